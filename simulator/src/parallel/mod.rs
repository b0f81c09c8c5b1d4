//! The parallel engine: deterministic bound-weave with one worker per simulated core, and
//! the exact engine's results at every slack.
//!
//! The engine takes each thread's events apart (`ParallelEngine::run_threads`, fed by
//! `MergedEvents::next_quanta`), so a core's worker reads only its threads' events; the
//! global (time, thread) order is kept where it matters by naming each event by its
//! `Seq` (`order.rs`: time, thread, index among the thread's events of the quantum), which sorts
//! like the global order.
//!
//! Time is cut into quanta of `slack` time units (aligned to multiples of `slack`). For each
//! quantum:
//!
//! 1. **scan**: every core's worker finds the lines its threads' events of the quantum touch
//!    (`footprint.rs`) — with two or more host threads, the other host threads do this
//!    while host thread 0 weaves the previous quantum, and host thread 0 takes the cores
//!    left when it has woven (cores are taken by whichever host thread is free). Host
//!    thread 0 then checks those lines against the directory, which it wove and so has in
//!    its cache (the footprints hand on their lines as plain lists, read in order), and
//!    decides whether the cores may run the quantum apart (below).
//! 2. **bound**: every core's worker simulates that core's events of the quantum through its
//!    private levels alone (`core.rs`). Hits are final; what needs other cores or the shared
//!    levels becomes a request stamped with the event's `Seq`. Workers run in parallel, each
//!    owning its core while it runs; host threads take the cores (and the replay of the
//!    previous weave's shared-level classification log, `shared_class.rs`, in two halves: the
//!    first and the last task) as tasks, whichever thread is free, so fewer host threads than
//!    cores run several in turn.
//! 3. **weave**: one thread applies all requests to the directory and the shared levels (whose
//!    capacity/conflict classification it only logs, for the next bound phase) in
//!    the global (time, thread) order (`weave.rs`); invalidations, downgrades and E grants
//!    reach the other cores' private caches before the next quantum.
//!
//! **Interacting quanta run in lockstep.** A bound phase cannot see other cores' actions of
//! the same quantum: a core would hit on a line another core invalidated earlier in the
//! quantum, evict a dirty line another core had already downgraded, or fill a set before a
//! remote invalidation frees a way in it. So a quantum runs apart only when no line couples
//! its cores: no line written by one core is accessed by another in the quantum, none is
//! written while another core holds a copy, and none is accessed while another core owns it
//! (E or M). Otherwise it runs in *lockstep*: one thread takes the events in the global
//! order, line by line, and the weave applies each line's requests (and then fills the
//! private levels) before the next one — the exact engine's order. An inclusive *shared*
//! level couples cores too: its evictions back-invalidate private copies, possibly of lines a
//! bound phase already used. A quantum also runs in lockstep when it touches more lines
//! absent from such a level than some set of it has free ways (once such a level is full,
//! most quanta with misses run in lockstep: exact, but hardly parallel).
//!
//! Hence the results equal the exact engine's at every slack (`tests/parallel.rs` checks
//! this on random traces); the slack only sets how much work a quantum holds, against how
//! often one runs in lockstep. Nothing depends on the host: the scan, the decision, each
//! core's bound phase and the weave order are functions of the trace and the model, so any
//! `threads` gives byte-identical reports.
//!
//! **Bandwidth.** With [`ParallelEngine::enable_bandwidth`], the bound phase and the weave log
//! the bytes each event moved, and after each quantum the bandwidth timeline replays the
//! quantum's events in the global order with those bytes (`ledger.rs`): the same timeline as
//! the exact engine's.
//!
//! Supported models: at least one private level, write-back levels, no exclusive (victim)
//! levels; others are refused with [`ParallelError::Unsupported`].

mod core;
mod footprint;
mod ledger;
mod order;
mod shared_class;
mod weave;

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

use crossbeam_utils::CachePadded;
use rustc_hash::FxHashMap;

use cachescope_schema::{ThreadId, TimeUnit, TimedEvent};

use crate::bandwidth::{BandwidthReport, BandwidthTimeline};
use crate::cache::Cache;
use crate::counters::{
    CoreCounters, LevelCounters, PathBytes, PathCounters, QuantumCounts, SimReport, ThreadCounters,
    REPORT_SCHEMA,
};
use crate::model::{Inclusion, MachineModel, Protocol, WritePolicy};
use crate::shadow::Classifier;
use crate::thread_index::ThreadIndex;

use self::core::{for_each_line, CoreSim};
use self::footprint::{Footprint, FOOTPRINT_LINES};
use self::ledger::Observer;
use self::order::for_each_in_order;
pub use self::order::{threads_apart, ThreadEvents, ThreadStream};
use self::shared_class::SharedClassifier;
use self::weave::Weave;

/// Phases of a quantum run by every host thread (see [`ParallelEngine::run_threads`]): find
/// the lines each core's threads' events touch.
const SCAN: u8 = 0;
/// The same for the next quantum, by host threads 1.. while host thread 0 weaves, and by host
/// thread 0 too once it has woven.
const SCAN_AHEAD: u8 = 1;
/// The bound phase.
const BOUND: u8 = 2;

/// Whether some line written by one core is touched by another (`foots`: every core's).
fn shared_write<'a>(foots: impl Iterator<Item = &'a Footprint> + Clone) -> bool {
    foots.clone().enumerate().any(|(c, f)| {
        f.list.iter().any(|&(line, write)| {
            write
                && foots
                    .clone()
                    .enumerate()
                    .any(|(o, g)| o != c && g.touches(line))
        })
    })
}

/// Lines a core's footprint may hold, however many cores share [`FOOTPRINT_LINES`].
const MIN_FOOTPRINT_LINES: usize = 1 << 14;

/// Operations of the shared levels' classification log (16 bytes each) that a lockstep
/// quantum lets pile up before it replays them itself. A quantum that runs apart logs a few
/// operations per request, and its requests are bounded by its events, which are in memory
/// anyway; a lockstep quantum may be one that touched more lines than its footprints hold.
const LOCKSTEP_LOG_OPS: usize = 1 << 20;

/// The default quantum, in time units (chosen from the sweep in `docs/parallel-engine.md`).
pub const DEFAULT_SLACK: u64 = 10_000;

/// Why the parallel engine cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParallelError {
    /// A slack of 0 time units.
    #[error("the slack must be at least 1 time unit")]
    ZeroSlack,
    /// Zero host threads.
    #[error("the parallel engine needs at least 1 host thread")]
    ZeroThreads,
    /// A model feature the engine does not simulate.
    #[error("the parallel engine does not support {0}; use --engine exact")]
    Unsupported(String),
}

/// How the parallel engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParallelConfig {
    /// Quantum length in time units: a core sees other cores' actions at most this late.
    pub slack: u64,
    /// Host threads (at most one per simulated core is used). Never changes the results.
    pub threads: usize,
}

impl Default for ParallelConfig {
    fn default() -> Self {
        ParallelConfig {
            slack: DEFAULT_SLACK,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// Sizes and policies both phases need.
#[derive(Debug, Clone)]
pub(crate) struct Geometry {
    /// Private levels.
    p: usize,
    /// All levels.
    n: usize,
    shift: u32,
    line_size: u64,
    /// Data paths (the last one is cache to cache).
    paths: usize,
    access_cost: u64,
    inclusion: Vec<Inclusion>,
    /// Some shared level is inclusive (its evictions back-invalidate private copies).
    inclusive_shared: bool,
}

/// The events of one call of [`ParallelEngine::run_threads`]: each placed thread's, and which
/// of them run on each core.
struct Input<'a> {
    placed: &'a [ThreadStream<'a>],
    /// Per core, indices into `placed`.
    of_core: &'a [Vec<usize>],
}

impl<'a> Input<'a> {
    /// The quantum that starts at `pos` (per thread, its next event): each thread's events in
    /// it, or `None` when no events are left.
    fn quantum_at(&self, slack: u64, pos: &[usize]) -> Option<Vec<Range<usize>>> {
        let q = self
            .placed
            .iter()
            .zip(pos)
            .filter_map(|(s, &p)| s.events.get(p))
            .map(|e| e.time / slack)
            .min()?;
        Some(
            self.placed
                .iter()
                .zip(pos)
                .map(|(s, &p)| {
                    // A thread's times never decrease.
                    let len = s.events[p..].partition_point(|e| e.time / slack <= q);
                    // Events are numbered per thread and quantum by a u32 (`Seq`); 2^32 events
                    // of one thread in one quantum would take over 100 GiB of memory first.
                    assert!(
                        len <= u32::MAX as usize,
                        "a quantum of more than 2^32 events"
                    );
                    p..p + len
                })
                .collect(),
        )
    }

    /// Every placed thread's events of the quantum `r`.
    fn slices(&self, r: &[Range<usize>]) -> Vec<ThreadStream<'a>> {
        self.placed
            .iter()
            .zip(r)
            .map(|(s, r)| sub_stream(s, r.clone()))
            .collect()
    }

    /// Core `c`'s threads' events of the quantum `r`.
    fn core_slices(&self, c: usize, r: &[Range<usize>]) -> Vec<ThreadStream<'a>> {
        self.of_core[c]
            .iter()
            .map(|&i| sub_stream(&self.placed[i], r[i].clone()))
            .collect()
    }
}

/// Events `r` of `s`, with their ties.
fn sub_stream<'a>(s: &ThreadStream<'a>, r: Range<usize>) -> ThreadStream<'a> {
    ThreadStream {
        thread: s.thread,
        events: &s.events[r.clone()],
        ties: s.ties.get(r).unwrap_or_default(),
    }
}

/// One cache instance and its miss classifier.
pub(crate) struct Unit {
    cache: Cache,
    class: Classifier,
}

/// A barrier for a fixed number of threads that spins before yielding: quanta are short,
/// and parking a thread costs more than most bound phases.
struct SpinBarrier {
    n: usize,
    count: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    fn new(n: usize) -> Self {
        SpinBarrier {
            n,
            count: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    fn wait(&self) {
        let gen = self.generation.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.count.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == gen {
            if spins < 2000 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                // Give the core to the other threads (the machine may have fewer cores than
                // threads want).
                std::thread::yield_now();
            }
        }
    }
}

/// Locks a mutex; a poisoned lock means a worker panicked, and that panic is re-raised by
/// the thread scope, so the data is never used afterwards.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The parallel engine.
pub struct ParallelEngine {
    model: MachineModel,
    geo: Geometry,
    cfg: ParallelConfig,
    /// Per core, its state. Each on host cache lines of its own: a core's state is written by
    /// whichever host thread runs the core, and two cores' state on one host line made the
    /// workers slow each other down (false sharing; 2 host threads gained 1.37× over 1 with
    /// it, 1.59× without).
    cores: Vec<CachePadded<Mutex<CoreSim>>>,
    /// Per core, its part of the quantum (apart from the core: scanned while it is woven).
    foots: Vec<CachePadded<Mutex<Footprint>>>,
    /// Whether a line written by one core is touched by another in the footprints last
    /// scanned, when one host thread scanned them all and so could tell with the line maps
    /// in its own cache (`None` otherwise).
    shared_write: Mutex<Option<bool>>,
    weave: RwLock<Weave>,
    /// Miss classes of the shared levels, replayed from the weave's log (`shared_class.rs`).
    shared_class: Mutex<SharedClassifier>,
    /// The next task of a bound phase: 0 replays the first half of the shared levels' log,
    /// `1 + c` bounds core c, `1 + cores` replays the rest of the log.
    next_task: AtomicUsize,
    /// The next core to scan in a scan phase.
    next_scan: AtomicUsize,
    /// Thread → core.
    table: ThreadIndex,
    time_unit: TimeUnit,
    /// Quanta simulated so far, and how many of them ran in lockstep.
    quanta: QuantumCounts,
    /// The bandwidth timeline, when enabled.
    observer: Option<Mutex<Observer>>,
}

impl ParallelEngine {
    /// An engine for `model` with the given thread placement.
    pub fn new(
        model: &MachineModel,
        placement: &BTreeMap<ThreadId, u32>,
        unit: TimeUnit,
        cfg: ParallelConfig,
    ) -> Result<Self, ParallelError> {
        if cfg.slack == 0 {
            return Err(ParallelError::ZeroSlack);
        }
        if cfg.threads == 0 {
            return Err(ParallelError::ZeroThreads);
        }
        let m = model.clone();
        let p = m.private_levels();
        let n = m.levels.len();
        if p == 0 {
            return Err(ParallelError::Unsupported(
                "models without a private level".into(),
            ));
        }
        if p > 32 {
            return Err(ParallelError::Unsupported(
                "more than 32 private levels".into(),
            ));
        }
        for l in &m.levels {
            if l.write == WritePolicy::Through {
                return Err(ParallelError::Unsupported(format!(
                    "write-through levels ({})",
                    l.name
                )));
            }
            if l.inclusion == Inclusion::Exclusive {
                return Err(ParallelError::Unsupported(format!(
                    "exclusive levels ({})",
                    l.name
                )));
            }
        }
        let ls = m.line_size;
        let ncores = m.cores as usize;
        let mut path_names = m.path_names();
        path_names.truncate(n + 2);
        let geo = Geometry {
            p,
            n,
            shift: ls.trailing_zeros(),
            line_size: ls as u64,
            paths: path_names.len(),
            access_cost: unit.access_cost(),
            inclusion: m.levels.iter().map(|l| l.inclusion).collect(),
            inclusive_shared: m.levels[p..]
                .iter()
                .any(|l| l.inclusion == Inclusion::Inclusive),
        };
        // The same seeds as the exact engine's, so random replacement agrees.
        let seed = |i: usize, c: usize| m.seed ^ ((i as u64) << 32) ^ c as u64;
        let make_unit = |i: usize, c: usize| Unit {
            cache: Cache::new(&m.levels[i], ls, seed(i, c)),
            class: Classifier::new(m.levels[i].lines(ls) as usize),
        };
        let mut cores: Vec<CoreSim> = (0..ncores)
            .map(|c| {
                let lc = m
                    .levels
                    .iter()
                    .map(|l| LevelCounters {
                        level: l.name.clone(),
                        ..LevelCounters::default()
                    })
                    .collect();
                CoreSim::new(
                    c,
                    geo.clone(),
                    (0..p).map(|i| make_unit(i, c)).collect(),
                    lc,
                )
            })
            .collect();
        let mut core_of = FxHashMap::default();
        for (&t, &c) in placement {
            let c = c as usize;
            if c >= ncores {
                return Err(ParallelError::Unsupported(format!(
                    "thread {t} on core {c} of {ncores}"
                )));
            }
            core_of.insert(t, c);
            cores[c].add_thread(ThreadCounters {
                thread: t,
                core: c as u32,
                ..ThreadCounters::default()
            });
        }
        // Each core's small, hot vectors get a tail of their own (see `cores`).
        for c in &mut cores {
            c.pad_tails();
        }
        let shared = (p..n)
            .map(|i| Cache::new(&m.levels[i], ls, seed(i, 0)))
            .collect();
        let shared_lines = (p..n).map(|i| m.levels[i].lines(ls) as usize);
        Ok(ParallelEngine {
            weave: RwLock::new(Weave::new(
                geo.clone(),
                m.coherence == Protocol::Mesi,
                shared,
            )),
            shared_class: Mutex::new(SharedClassifier::new(shared_lines, ncores)),
            next_task: AtomicUsize::new(0),
            next_scan: AtomicUsize::new(0),
            foots: (0..ncores)
                .map(|_| {
                    let limit = (FOOTPRINT_LINES / ncores).max(MIN_FOOTPRINT_LINES);
                    CachePadded::new(Mutex::new(Footprint::with_limit(limit)))
                })
                .collect(),
            shared_write: Mutex::new(None),
            cores: cores
                .into_iter()
                .map(|c| CachePadded::new(Mutex::new(c)))
                .collect(),
            geo,
            cfg,
            table: ThreadIndex::new(core_of.iter().map(|(&t, &c)| (t, c))),
            time_unit: unit,
            quanta: QuantumCounts::default(),
            observer: None,
            model: m,
        })
    }

    /// Keeps `timeline` next to the simulation (made for this engine's model and placement),
    /// fed with every event in the global order and the bytes it moved; see
    /// [`Self::finish_bandwidth`]. Call before the first event.
    pub fn enable_bandwidth(&mut self, timeline: BandwidthTimeline) {
        for c in &self.cores {
            lock(c).enable_log();
        }
        self.weave
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .enable_log();
        self.observer = Some(Mutex::new(Observer::new(
            timeline,
            self.cores.len(),
            self.geo.paths,
        )));
    }

    /// The bandwidth timeline's report, if enabled (it ends the timeline).
    pub fn finish_bandwidth(&mut self) -> Option<BandwidthReport> {
        self.observer.take().map(|o| {
            o.into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .finish()
        })
    }

    /// Simulates `events`, in the trace's global order (as from `TraceFile::merged`), already
    /// in memory. Calls may follow one another (each ends with a complete quantum if the next
    /// one starts a new quantum).
    pub fn run_slice(&mut self, events: &[TimedEvent]) {
        let threads = threads_apart(events);
        let streams: Vec<ThreadStream<'_>> = threads.iter().map(ThreadEvents::stream).collect();
        self.run_threads(&streams);
    }

    /// Simulates each thread's events with their global times and ties (as from
    /// `MergedEvents::next_quanta`, or [`threads_apart`]; events of threads the placement
    /// does not name are ignored). Calls may follow one another, as for [`Self::run_slice`].
    pub fn run_threads(&mut self, streams: &[ThreadStream<'_>]) {
        // The placed threads' events, and each core's threads among them.
        let mut placed: Vec<ThreadStream<'_>> = Vec::new();
        let mut of_core: Vec<Vec<usize>> = vec![Vec::new(); self.cores.len()];
        for s in streams {
            if let Some(c) = self.table.get(s.thread) {
                of_core[c].push(placed.len());
                placed.push(*s);
            }
        }
        let input = Input {
            placed: &placed,
            of_core: &of_core,
        };
        let k = self.cfg.threads.min(self.cores.len()).max(1);
        let barrier = SpinBarrier::new(k);
        let done = AtomicBool::new(false);
        // What the host threads do between the next two barriers, and on which events.
        let phase = AtomicU8::new(SCAN);
        let ranges: RwLock<Vec<Range<usize>>> = RwLock::new(Vec::new());
        let this = &*self;
        let mut counts = QuantumCounts::default();
        std::thread::scope(|s| {
            for _ in 1..k {
                let (barrier, done, phase, ranges, input) =
                    (&barrier, &done, &phase, &ranges, &input);
                s.spawn(move || loop {
                    barrier.wait();
                    if done.load(Ordering::Acquire) {
                        break;
                    }
                    {
                        let r = ranges.read().unwrap_or_else(PoisonError::into_inner);
                        this.share(input, &r, phase.load(Ordering::Acquire));
                    }
                    barrier.wait();
                });
            }
            // Runs a phase on every host thread on the quantum `r`; this one does `own` (its
            // share, or the weave).
            let run_phase = |p: u8, r: &[Range<usize>], own: &dyn Fn()| {
                r.clone_into(&mut ranges.write().unwrap_or_else(PoisonError::into_inner));
                phase.store(p, Ordering::Release);
                if k > 1 {
                    barrier.wait();
                }
                own();
                if k > 1 {
                    barrier.wait();
                }
            };
            let mine = |p: u8, r: &[Range<usize>]| {
                run_phase(p, r, &|| this.share(&input, r, p));
            };
            let mut cur = input.quantum_at(this.cfg.slack, &vec![0; placed.len()]);
            // Whether the quantum `cur` was scanned during the previous weave.
            let mut scanned = false;
            while let Some(r) = cur {
                let quantum = input.slices(&r);
                let next_pos: Vec<usize> = r.iter().map(|r| r.end).collect();
                let next = input.quantum_at(this.cfg.slack, &next_pos);
                counts.total += 1;
                if !scanned {
                    this.next_scan.store(0, Ordering::Release);
                    mine(SCAN, &r);
                }
                this.check_directory();
                if this.interferes() {
                    counts.lockstep += 1;
                    this.lockstep(&quantum);
                    this.hand_over_shadow_log();
                    this.observe(&quantum);
                    scanned = false;
                } else {
                    this.next_task.store(0, Ordering::Release);
                    mine(BOUND, &r);
                    let weave_and_observe = || {
                        this.weave();
                        this.hand_over_shadow_log();
                        this.observe(&quantum);
                    };
                    match &next {
                        Some(n) if k > 1 => {
                            // The other host threads scan the next quantum while this one
                            // weaves, and this one scans what is left once it has woven (the
                            // shared-level replay stays a bound task).
                            this.next_scan.store(0, Ordering::Release);
                            run_phase(SCAN_AHEAD, n, &|| {
                                weave_and_observe();
                                this.share(&input, n, SCAN_AHEAD);
                            });
                            scanned = true;
                        }
                        _ => {
                            weave_and_observe();
                            scanned = false;
                        }
                    }
                }
                cur = next;
            }
            done.store(true, Ordering::Release);
            if k > 1 {
                barrier.wait();
            }
        });
        self.quanta.total += counts.total;
        self.quanta.lockstep += counts.lockstep;
        // The report must count every shared-level miss by class.
        let mut weave = self.weave.write().unwrap_or_else(PoisonError::into_inner);
        lock(&self.shared_class).flush(&mut weave.shadow_log);
    }

    /// Checks every core's footprint of the quantum just scanned against the directory (on
    /// the driver thread: the directory is in its cache, the footprints' line lists are read
    /// in order; each host thread checking its own cores read the directory from another
    /// host core's cache at random, 7 % of the run on a host whose cores are far apart).
    fn check_directory(&self) {
        let weave = self.weave.read().unwrap_or_else(PoisonError::into_inner);
        for (c, f) in self.foots.iter().enumerate() {
            lock(f).check_directory(c, &weave);
        }
    }

    /// Whether the cores interact through a line in the quantum just scanned and checked
    /// (see the module docs): then it must run in lockstep. Serial, but only over the lines
    /// each core writes.
    fn interferes(&self) -> bool {
        let foots: Vec<MutexGuard<'_, Footprint>> = self.foots.iter().map(|m| lock(m)).collect();
        if foots.iter().any(|f| f.dir_conflict || f.overflow) {
            return true;
        }
        let known = *lock(&self.shared_write);
        if known.unwrap_or_else(|| shared_write(foots.iter().map(|g| &**g))) {
            return true;
        }
        if !self.geo.inclusive_shared {
            return false;
        }
        // Each line once, in the first core that touches it.
        let lines = foots.iter().enumerate().flat_map(|(c, f)| {
            let earlier = &foots[..c];
            f.list
                .iter()
                .map(|&(line, _)| line)
                .filter(move |&l| !earlier.iter().any(|e| e.touches(l)))
        });
        let weave = self.weave.read().unwrap_or_else(PoisonError::into_inner);
        weave.may_back_invalidate(lines)
    }

    /// Simulates one quantum (each thread's events) in the global order, weaving each
    /// event's requests before the next event: the exact engine's order, on one thread.
    fn lockstep(&self, threads: &[ThreadStream<'_>]) {
        let mut weave = self.weave.write().unwrap_or_else(PoisonError::into_inner);
        let mut guards: Vec<MutexGuard<'_, CoreSim>> = self.cores.iter().map(|m| lock(m)).collect();
        let mut cores: Vec<&mut CoreSim> = guards.iter_mut().map(|g| &mut **g).collect();
        for c in &mut cores {
            c.begin_lockstep();
        }
        let (shift, ls) = (self.geo.shift, self.geo.line_size);
        let logging = weave.logging();
        for_each_in_order(threads, |seq, e| {
            let Some(c) = self.table.get(e.thread) else {
                return;
            };
            if logging {
                weave.log_before(&cores);
            }
            if let Some(a) = cores[c].begin(seq, e) {
                // Line by line: the second line of a straddling access sees the first one
                // filled.
                for_each_line(&a, shift, ls, |line, off, len| {
                    cores[c].access_line(line, off, len, a.kind, &weave.written);
                    if !cores[c].reqs.is_empty() {
                        weave.run_core(&mut cores, c);
                    }
                });
            }
            if logging {
                weave.log_after(seq, &cores);
            }
            if weave.shadow_log.len() >= LOCKSTEP_LOG_OPS {
                // Lockstep is serial anyway; replaying now keeps the log's memory bounded
                // where time does not move.
                lock(&self.shared_class).flush(&mut weave.shadow_log);
            }
        });
        for c in &mut cores {
            c.end_lockstep();
        }
    }

    /// A host thread's share of phase `phase` on the quantum `r` of `input`: the phase's tasks
    /// (cores to scan, or the bound phase's tasks) that no other host thread took first.
    fn share(&self, input: &Input<'_>, r: &[Range<usize>], phase: u8) {
        match phase {
            BOUND => {
                // Tasks taken in turn by whichever host thread is free (each is a function of
                // the trace alone, so who runs it never matters): the first half of the replay
                // of the previous weave's shared-level log, one task per core, the rest of
                // the replay.
                let weave = self.weave.read().unwrap_or_else(PoisonError::into_inner);
                let n = self.cores.len();
                loop {
                    let task = self.next_task.fetch_add(1, Ordering::AcqRel);
                    if task > n + 1 {
                        break;
                    }
                    if task == 0 {
                        lock(&self.shared_class).replay_first_half();
                        continue;
                    }
                    if task == n + 1 {
                        lock(&self.shared_class).replay();
                        continue;
                    }
                    let c = task - 1;
                    lock(&self.cores[c]).bound(&input.core_slices(c, r), &weave.written);
                }
            }
            _ => {
                // Cores taken in turn by whichever host thread is free: host thread 0 joins
                // the scan ahead once it has woven, so the scan and the weave share both host
                // threads however long each takes on this host. Each core's footprint reads
                // only its own threads' events.
                let n = self.cores.len();
                let mut mine: Vec<MutexGuard<'_, Footprint>> = Vec::new();
                loop {
                    let c = self.next_scan.fetch_add(1, Ordering::AcqRel);
                    if c >= n {
                        break;
                    }
                    let mut f = lock(&self.foots[c]);
                    f.clear();
                    for s in input.core_slices(c, r) {
                        for e in s.events {
                            f.add(e, &self.geo);
                        }
                    }
                    f.finish();
                    mine.push(f);
                }
                // With every core's line map at hand, this thread answers the shared-write
                // test, so the driver need not read the maps from another host core's cache.
                // A thread that scanned no core says nothing: when another scanned them all,
                // its verdict is the only one written.
                if !mine.is_empty() {
                    let verdict =
                        (mine.len() == n).then(|| shared_write(mine.iter().map(|f| &**f)));
                    *lock(&self.shared_write) = verdict;
                }
            }
        }
    }

    /// Feeds the quantum just simulated (each thread's events) to the bandwidth timeline, if
    /// enabled.
    fn observe(&self, threads: &[ThreadStream<'_>]) {
        let Some(observer) = &self.observer else {
            return;
        };
        let mut weave = self.weave.write().unwrap_or_else(PoisonError::into_inner);
        let mut guards: Vec<MutexGuard<'_, CoreSim>> = self.cores.iter().map(|m| lock(m)).collect();
        let logs = std::iter::once(&mut weave.log).chain(guards.iter_mut().map(|g| &mut g.log));
        lock(observer).quantum(threads, logs);
    }

    /// Hands the weave's shared-level log to the classifier, to be replayed during the next
    /// bound phase.
    fn hand_over_shadow_log(&self) {
        let mut weave = self.weave.write().unwrap_or_else(PoisonError::into_inner);
        lock(&self.shared_class).hand_over(&mut weave.shadow_log);
    }

    fn weave(&self) {
        let mut weave = self.weave.write().unwrap_or_else(PoisonError::into_inner);
        let mut guards: Vec<MutexGuard<'_, CoreSim>> = self.cores.iter().map(|m| lock(m)).collect();
        let mut cores: Vec<&mut CoreSim> = guards.iter_mut().map(|g| &mut **g).collect();
        weave.run(&mut cores);
    }

    /// The report so far.
    pub fn report(&self) -> SimReport {
        let guards: Vec<MutexGuard<'_, CoreSim>> = self.cores.iter().map(|m| lock(m)).collect();
        let names = {
            let mut v = self.model.path_names();
            v.truncate(self.geo.paths);
            v
        };
        let paths = names
            .into_iter()
            .enumerate()
            .map(|(j, path)| {
                let per_core: Vec<PathBytes> = guards.iter().map(|g| g.paths[j]).collect();
                let total = per_core
                    .iter()
                    .fold(PathBytes::default(), |t, b| PathBytes {
                        read: t.read + b.read,
                        write: t.write + b.write,
                    });
                PathCounters {
                    path,
                    per_core,
                    total,
                }
            })
            .collect();
        let shared = lock(&self.shared_class);
        let p = self.geo.p;
        let cores = guards
            .iter()
            .map(|g| CoreCounters {
                core: g.core as u32,
                threads: g.threads.iter().map(|t| t.thread).collect(),
                levels: {
                    let mut levels = g.lc.clone();
                    for (l, m) in levels[p..].iter_mut().zip(&shared.misses[g.core]) {
                        l.misses.merge(m);
                    }
                    levels
                },
                invalidations_sent: g.invalidations_sent,
                invalidations_received: g.invalidations_received,
                upgrades: g.upgrades,
                cache_to_cache: g.cache_to_cache,
            })
            .collect();
        let mut threads: Vec<ThreadCounters> = guards
            .iter()
            .flat_map(|g| g.threads.iter().cloned())
            .collect();
        threads.sort_by_key(|t| t.thread);
        let mut r = SimReport {
            schema: REPORT_SCHEMA,
            engine: "parallel".into(),
            machine: self.model.clone(),
            time_unit: self.time_unit,
            cores,
            levels: Vec::new(),
            paths,
            threads,
            unsimulated_fetches: guards.iter().map(|g| g.unsimulated_fetches).sum(),
            slack: Some(self.cfg.slack),
            quanta: Some(self.quanta),
            cachegrind: None,
        };
        r.sum_levels();
        r
    }
}
