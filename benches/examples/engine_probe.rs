//! Quick engine-only throughput probe (the criterion bench `exact_engine` is the reference).
use std::collections::BTreeMap;
use std::time::Instant;

use cachescope_schema::synth::{generate_file, GenParams, Workload};
use cachescope_schema::{Event, TimedEvent, TraceFile};
use cachescope_sim::{ExactEngine, MachineModel};

fn main() {
    let model = MachineModel::load("ivybridge-4c").expect("preset");
    for (w, threads) in [
        (Workload::Stencil, 1u32),
        (Workload::Stencil, 4),
        (Workload::Stream, 4),
    ] {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("t.cstrace");
        let mut p = GenParams::new(w);
        p.threads = threads;
        p.size = 4 << 20;
        p.iterations = 2;
        generate_file(&p, &path).expect("gen");
        let t = TraceFile::open(&path).expect("open");
        let events: Vec<TimedEvent> = t.merged().expect("merge").map(|e| e.expect("ok")).collect();
        let acc = events
            .iter()
            .filter(|e| matches!(e.event, Event::Access(_)))
            .count();
        let placement: BTreeMap<u32, u32> = (0..threads).map(|t| (t, t)).collect();
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            let mut e = ExactEngine::new(&model, &placement, t.header().time_unit);
            for ev in &events {
                e.process(ev);
            }
            std::hint::black_box(e.report());
            best = best.min(start.elapsed().as_secs_f64());
        }
        println!(
            "{w} x{threads}: {acc} accesses, engine {:.1} M accesses/s",
            acc as f64 / best / 1e6
        );
    }
}
