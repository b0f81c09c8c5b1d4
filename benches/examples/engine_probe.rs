//! Quick engine-only throughput probe (the criterion bench `exact_engine` is the reference).
use std::collections::BTreeMap;
use std::time::Instant;

use cachescope_schema::synth::{generate_file, GenParams, Workload};
use cachescope_schema::{Event, TimedEvent, TraceFile};
use cachescope_sim::{ExactEngine, MachineModel};

fn main() {
    let model = MachineModel::load("ivybridge-4c").expect("preset");
    for (w, threads, size, iterations) in [
        (Workload::Stream, 1u32, 8u64 << 10, 400u32), // working set fits L1: hit path only
        (Workload::Stencil, 1, 4 << 20, 2),
        (Workload::Stencil, 4, 4 << 20, 2),
        (Workload::Stream, 4, 4 << 20, 2),
    ]
    .into_iter()
    .enumerate()
    .filter(|(i, _)| std::env::var("CASE").map_or(true, |c| c == i.to_string()))
    .map(|(_, c)| c)
    {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("t.cstrace");
        let mut p = GenParams::new(w);
        p.threads = threads;
        p.size = size;
        p.iterations = iterations;
        generate_file(&p, &path).expect("gen");
        let t = TraceFile::open(&path).expect("open");
        let events: Vec<TimedEvent> = t.merged().expect("merge").map(|e| e.expect("ok")).collect();
        let acc = events
            .iter()
            .filter(|e| matches!(e.event, Event::Access(_)))
            .count();
        let placement: BTreeMap<u32, u32> = (0..threads).map(|t| (t, t)).collect();
        let mut best = f64::MAX;
        let reps: usize = std::env::var("REPS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(5);
        for _ in 0..reps {
            let start = Instant::now();
            run_engine(&model, &placement, t.header().time_unit, &events);
            best = best.min(start.elapsed().as_secs_f64());
        }
        println!(
            "{w} x{threads}: {acc} accesses, engine {:.1} M accesses/s",
            acc as f64 / best / 1e6
        );
    }
}

/// One run of the engine over `events` (a function of its own, so that callgrind can count
/// the engine's instructions alone: `--toggle-collect=*run_engine*`).
#[inline(never)]
fn run_engine(
    model: &MachineModel,
    placement: &BTreeMap<u32, u32>,
    unit: cachescope_schema::TimeUnit,
    events: &[TimedEvent],
) {
    let mut e = ExactEngine::new(model, placement, unit);
    for ev in events {
        e.process(ev);
    }
    std::hint::black_box(e.report());
}
