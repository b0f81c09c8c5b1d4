//! Running an engine over a trace file.

use std::collections::BTreeMap;

use cachescope_schema::prefetch::{prefetch, Prefetched};
use cachescope_schema::{
    AccessKind, Event, QuantaSizes, ThreadId, TimeUnit, TimedEvent, TraceError, TraceFile,
};

use crate::bandwidth::{BandwidthConfig, BandwidthReport, BandwidthTimeline, ChannelError};
use crate::cachegrind::{CachegrindSim, CgConfig};
use crate::counters::{CachegrindReport, SimReport};
use crate::exact::{CoherenceKey, ExactEngine, MappingError, ThreadMapping};
use crate::model::MachineModel;
use crate::parallel::{ParallelConfig, ParallelEngine, ParallelError, ThreadStream};

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The trace is unreadable or inconsistent.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// Threads cannot be placed on the machine's cores.
    #[error(transparent)]
    Mapping(#[from] MappingError),
    /// The parallel engine cannot run this model or configuration.
    #[error(transparent)]
    Parallel(#[from] ParallelError),
    /// The model cannot be used for bandwidth analysis.
    #[error(transparent)]
    Bandwidth(#[from] ChannelError),
    /// The thread that reads the trace ahead could not be started.
    #[error("cannot start the trace reading thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// The trace's events in the global order, decoded and merged on a reading thread while the
/// engine simulates (same order, so the same results; only faster), with errors naming the
/// file.
fn events(trace: &TraceFile) -> Result<Prefetched<TimedEvent, TraceError>, SimError> {
    let path = trace.path().to_path_buf();
    let mut merged = trace.merged()?;
    Ok(prefetch(move |out: &mut Vec<TimedEvent>, max| {
        merged
            .next_batch(out, max)
            .map_err(|err| err.at_path(&path))
    })?)
}

/// Calls `f` on every event of `trace`, in the global order (see [`events`]), a batch at a
/// time: the loop over a batch's slice inlines the engine's per-event work, where an
/// iterator of `Result`s copied each event out and called the engine (about a third of the
/// engine thread's time).
fn for_each_event(trace: &TraceFile, mut f: impl FnMut(&TimedEvent)) -> Result<(), SimError> {
    let mut source = events(trace)?;
    while let Some(batch) = source.next_items() {
        for e in &batch? {
            f(e);
        }
    }
    Ok(())
}

/// Replays in-memory events, already in the global (time, thread) order, through the exact
/// engine with the bandwidth timeline (hand-made timelines in tests and benches).
pub fn replay_exact_with_bandwidth<'a>(
    model: &MachineModel,
    placement: &BTreeMap<ThreadId, u32>,
    unit: TimeUnit,
    events: impl IntoIterator<Item = &'a TimedEvent>,
    cfg: BandwidthConfig,
) -> Result<(SimReport, BandwidthReport), ChannelError> {
    let mut timeline = BandwidthTimeline::new(model, placement, unit, cfg)?;
    let mut engine = ExactEngine::new(model, placement, unit);
    for e in events {
        engine.process(e);
        timeline.observe(e, &engine);
    }
    Ok((engine.report(), timeline.finish()))
}

/// Simulates `trace` with the exact engine and keeps the bandwidth timeline (thesis
/// §4.3–4.4) next to it.
pub fn simulate_exact_with_bandwidth(
    trace: &TraceFile,
    model: &MachineModel,
    mapping: &ThreadMapping,
    cfg: BandwidthConfig,
) -> Result<(SimReport, BandwidthReport), SimError> {
    let threads: Vec<_> = trace.thread_ids().collect();
    let placement = mapping.place(&threads, model.cores)?;
    let unit = trace.header().time_unit;
    let mut timeline = BandwidthTimeline::new(model, &placement, unit, cfg)?;
    let mut engine = ExactEngine::new(model, &placement, unit);
    for_each_event(trace, |e| {
        engine.process(e);
        timeline.observe(e, &engine);
    })?;
    Ok((engine.report(), timeline.finish()))
}

/// Events handed to the parallel engine per call, at least (whole quanta: a longer quantum
/// is kept whole, up to the split of [`PARALLEL_SIZES`]). Each call starts with a quantum
/// that was not scanned ahead, so a call should hold many quanta; larger batches (2^20)
/// were slower (more memory to go through).
const PARALLEL_BATCH: usize = 1 << 17;

/// How the parallel engine reads: batches of whole quanta of at least [`PARALLEL_BATCH`]
/// events, a quantum of more than 2^18 events (about 12 MB) split into pieces of the global
/// order, and a refusal where 2^22 events (about 200 MB, and the engine's requests for
/// them) cannot be split (time stuck at one value while threads hand a lock over at it).
/// Without the split, a Lackey import without instruction records (time never moves) put
/// the whole trace into one quantum: 5 M accesses took 816 MB against the exact engine's
/// 14 MB.
const PARALLEL_SIZES: QuantaSizes = QuantaSizes {
    at_least: PARALLEL_BATCH,
    split_above: 1 << 18,
    fail_above: 1 << 22,
};

/// Runs the parallel engine over `trace`, whole quanta at a time (a quantum of more than
/// 2^18 events in pieces, see [`PARALLEL_SIZES`]) with each thread's events apart
/// (`MergedEvents::next_quanta`: between sync events a thread's events are copied from the
/// decoded chunk as a run, not merged one by one). The next batch is read on another
/// thread when the engine leaves a host core free; otherwise on the driver thread between
/// batches (a reading thread competing with the spinning workers slowed every quantum down).
fn run_parallel(
    engine: &mut ParallelEngine,
    trace: &TraceFile,
    cfg: ParallelConfig,
) -> Result<(), SimError> {
    let path = trace.path().to_path_buf();
    let mut merged = trace.merged()?;
    let ids = merged.thread_ids();
    let n = ids.len();
    let mut fill = move |b: &mut QuantaBatch| {
        b.events.resize_with(n, Vec::new);
        b.ties.resize_with(n, Vec::new);
        b.events.iter_mut().for_each(Vec::clear);
        b.ties.iter_mut().for_each(Vec::clear);
        merged
            .next_quanta(cfg.slack, PARALLEL_SIZES, &mut b.events, &mut b.ties)
            .map_err(|e| e.at_path(&path))
    };
    let mut run = |b: &QuantaBatch| {
        engine.run_threads(&ThreadStream::of_quanta(&ids, &b.events, &b.ties));
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cfg.threads >= cores {
        let mut batch = QuantaBatch::default();
        while fill(&mut batch)? {
            run(&batch);
        }
        run(&batch);
        return Ok(());
    }
    std::thread::scope(|s| {
        // One batch waits while the engine runs another; used buffers come back for reuse.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let (back_tx, back_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("cachescope-read".into())
            .spawn_scoped(s, move || loop {
                let mut batch = back_rx.try_recv().unwrap_or_default();
                let r = fill(&mut batch);
                let last = !matches!(r, Ok(true));
                // A send fails once the engine stopped on an error.
                if tx.send(r.map(|more| (batch, more))).is_err() || last {
                    return;
                }
            })?;
        for batch in rx {
            let (batch, more) = batch?;
            run(&batch);
            // The reader may have finished: then the buffers are simply dropped.
            let _ = back_tx.send(batch);
            if !more {
                break;
            }
        }
        Ok(())
    })
}

/// Whole quanta of every thread's events and their ties (`MergedEvents::next_quanta`).
#[derive(Default)]
struct QuantaBatch {
    events: Vec<Vec<TimedEvent>>,
    ties: Vec<Vec<u32>>,
}

/// Simulates `trace` with the exact engine and also returns the coherence log (who was
/// involved in each first-level coherence miss, with counts).
pub fn simulate_exact_with_coherence(
    trace: &TraceFile,
    model: &MachineModel,
    mapping: &ThreadMapping,
) -> Result<(SimReport, Vec<(CoherenceKey, u64)>), SimError> {
    let threads: Vec<_> = trace.thread_ids().collect();
    let placement = mapping.place(&threads, model.cores)?;
    let mut engine = ExactEngine::new(model, &placement, trace.header().time_unit);
    engine.enable_coherence_log();
    for_each_event(trace, |e| engine.process(e))?;
    Ok((engine.report(), engine.coherence_log()))
}

/// Simulates `trace` on `model` with the exact engine.
pub fn simulate_exact(
    trace: &TraceFile,
    model: &MachineModel,
    mapping: &ThreadMapping,
) -> Result<SimReport, SimError> {
    let threads: Vec<_> = trace.thread_ids().collect();
    let placement = mapping.place(&threads, model.cores)?;
    let mut engine = ExactEngine::new(model, &placement, trace.header().time_unit);
    for_each_event(trace, |e| engine.process(e))?;
    Ok(engine.report())
}

/// Simulates `trace` with the exact engine on each of `models` (a sweep over cache
/// configurations), reading the trace once: each batch of events goes to every model's
/// engine, the engines side by side on rayon's threads. Each report is the one
/// [`simulate_exact`] gives for its model, whatever the host's thread count.
pub fn simulate_exact_many(
    trace: &TraceFile,
    models: &[MachineModel],
    mapping: &ThreadMapping,
) -> Result<Vec<SimReport>, SimError> {
    use rayon::prelude::*;
    let threads: Vec<_> = trace.thread_ids().collect();
    let unit = trace.header().time_unit;
    let mut engines = models
        .iter()
        .map(|m| {
            Ok(ExactEngine::new(
                m,
                &mapping.place(&threads, m.cores)?,
                unit,
            ))
        })
        .collect::<Result<Vec<_>, SimError>>()?;
    let mut source = events(trace)?;
    while let Some(batch) = source.next_items() {
        let batch = batch?;
        engines.par_iter_mut().for_each(|engine| {
            for e in &batch {
                engine.process(e);
            }
        });
    }
    Ok(engines.iter().map(ExactEngine::report).collect())
}

/// Simulates `trace` on `model` with the parallel engine.
pub fn simulate_parallel(
    trace: &TraceFile,
    model: &MachineModel,
    mapping: &ThreadMapping,
    cfg: ParallelConfig,
) -> Result<SimReport, SimError> {
    let threads: Vec<_> = trace.thread_ids().collect();
    let placement = mapping.place(&threads, model.cores)?;
    let mut engine = ParallelEngine::new(model, &placement, trace.header().time_unit, cfg)?;
    run_parallel(&mut engine, trace, cfg)?;
    Ok(engine.report())
}

/// Simulates `trace` with the parallel engine and keeps the bandwidth timeline next to it
/// (the same timeline as [`simulate_exact_with_bandwidth`]'s).
pub fn simulate_parallel_with_bandwidth(
    trace: &TraceFile,
    model: &MachineModel,
    mapping: &ThreadMapping,
    cfg: ParallelConfig,
    bandwidth: BandwidthConfig,
) -> Result<(SimReport, BandwidthReport), SimError> {
    let threads: Vec<_> = trace.thread_ids().collect();
    let placement = mapping.place(&threads, model.cores)?;
    let unit = trace.header().time_unit;
    parallel_with_timeline(model, &placement, unit, cfg, bandwidth, |engine| {
        run_parallel(engine, trace, cfg)
    })
}

/// Replays in-memory events, already in the global (time, thread) order, through the parallel
/// engine with the bandwidth timeline (tests and benches).
pub fn replay_parallel_with_bandwidth(
    model: &MachineModel,
    placement: &BTreeMap<ThreadId, u32>,
    unit: TimeUnit,
    events: &[TimedEvent],
    cfg: ParallelConfig,
    bandwidth: BandwidthConfig,
) -> Result<(SimReport, BandwidthReport), SimError> {
    parallel_with_timeline(model, placement, unit, cfg, bandwidth, |engine| {
        engine.run_slice(events);
        Ok(())
    })
}

/// The parallel engine with the bandwidth timeline, fed by `feed`.
fn parallel_with_timeline(
    model: &MachineModel,
    placement: &BTreeMap<ThreadId, u32>,
    unit: TimeUnit,
    cfg: ParallelConfig,
    bandwidth: BandwidthConfig,
    feed: impl FnOnce(&mut ParallelEngine) -> Result<(), SimError>,
) -> Result<(SimReport, BandwidthReport), SimError> {
    let timeline = BandwidthTimeline::new(model, placement, unit, bandwidth)?;
    let mut engine = ParallelEngine::new(model, placement, unit, cfg)?;
    engine.enable_bandwidth(timeline);
    feed(&mut engine)?;
    let report = engine.report();
    let bandwidth = engine
        .finish_bandwidth()
        .expect("the timeline was enabled above");
    Ok((report, bandwidth))
}

/// Simulates `trace` with Cachegrind's algorithm (all threads share one I1/D1/LL, as under
/// valgrind). The report's cores/levels/paths come from the exact engine on `model` (one core
/// per thread is not Cachegrind's view, so the cores are simulated one-to-one only when the
/// model has enough cores; otherwise round-robin).
pub fn simulate_cachegrind(
    trace: &TraceFile,
    model: &MachineModel,
    cfg: CgConfig,
) -> Result<SimReport, SimError> {
    let threads: Vec<_> = trace.thread_ids().collect();
    let mapping = if threads.len() <= model.cores as usize {
        ThreadMapping::OneToOne
    } else {
        ThreadMapping::RoundRobin
    };
    let placement = mapping.place(&threads, model.cores)?;
    let mut engine = ExactEngine::new(model, &placement, trace.header().time_unit);
    let mut cg = CachegrindSim::new(cfg);
    let mut fetches = false;
    for_each_event(trace, |e| {
        if let Event::Access(a) = &e.event {
            fetches |= a.kind == AccessKind::Fetch;
            cg.access(a);
        }
        engine.process(e);
    })?;
    let mut report = engine.report();
    report.engine = "cachegrind".into();
    report.cachegrind = Some(CachegrindReport {
        config: cfg,
        events: cg.counts,
        fetches_in_trace: fetches,
    });
    Ok(report)
}
