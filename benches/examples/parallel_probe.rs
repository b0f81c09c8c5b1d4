//! Quick parallel-engine probe (the criterion bench `parallel_engine` is the reference): the
//! 4-core stencil in memory, best of REPS (default 5) runs with 1 and 2 host threads and the
//! exact engine, at SLACK (default: the engine's default).
//!
//! Run: `cargo run --release -p cachescope-benches --example parallel_probe`; with `ALL=1` each
//! run's time goes to stderr too (exact engine, then 1 and 2 host threads, REPS each).
//! `ONLY=exact`, `ONLY=1` or `ONLY=2` runs just that one (for profiling one engine).
//! `PAIRS=N` instead alternates N runs with 1 and with 2 host threads and prints the median of
//! the N ratios: the 2-vCPU VMs switch speed every few seconds, and a ratio of two runs a
//! moment apart is less exposed to that than best-of-REPS phases one after the other.
use std::collections::BTreeMap;
use std::time::Instant;

use cachescope_schema::synth::{generate_file, GenParams, Workload};
use cachescope_schema::TraceFile;
use cachescope_sim::parallel::DEFAULT_SLACK;
use cachescope_sim::{ExactEngine, MachineModel, ParallelConfig, ParallelEngine};

fn main() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let reps = env("REPS", 5);
    let slack = env("SLACK", DEFAULT_SLACK);
    let model = MachineModel::load("ivybridge-4c").expect("preset");
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("t.cstrace");
    let mut p = GenParams::new(Workload::Stencil);
    p.threads = 4;
    p.size = 4 << 20;
    p.iterations = 2;
    generate_file(&p, &path).expect("gen");
    let t = TraceFile::open(&path).expect("open");
    let unit = t.header().time_unit;
    let (events, acc) = cachescope_benches::merged_in_memory(&t);
    let placement: BTreeMap<u32, u32> = (0..4).map(|t| (t, t)).collect();
    let time = |f: &mut dyn FnMut()| {
        (0..reps)
            .map(|_| {
                let s = Instant::now();
                f();
                let t = s.elapsed().as_secs_f64();
                if std::env::var_os("ALL").is_some() {
                    eprint!("{t:.3} ");
                }
                t
            })
            .fold(f64::MAX, f64::min)
    };
    let only = std::env::var("ONLY").ok();
    let runs = |what: &str| only.as_deref().is_none_or(|o| o == what);
    if runs("exact") {
        let exact = time(&mut || {
            let mut e = ExactEngine::new(&model, &placement, unit);
            for ev in &events {
                e.process(ev);
            }
            std::hint::black_box(e.report());
        });
        println!(
            "exact: {exact:.3} s, {:.2} M acc/s",
            acc as f64 / exact / 1e6
        );
    }
    // Each thread's events apart, as the engine takes them (outside the timed runs).
    let threads = cachescope_sim::parallel::threads_apart(&events);
    let streams: Vec<cachescope_sim::parallel::ThreadStream<'_>> =
        threads.iter().map(|t| t.stream()).collect();
    let run = |threads: usize| {
        let cfg = ParallelConfig { slack, threads };
        let s = Instant::now();
        let mut e = ParallelEngine::new(&model, &placement, unit, cfg).expect("model");
        e.run_threads(&streams);
        std::hint::black_box(e.report());
        s.elapsed().as_secs_f64()
    };
    let pairs = env("PAIRS", 0);
    if pairs > 0 {
        let mut ratios: Vec<f64> = (0..pairs)
            .map(|_| {
                let (one, two) = (run(1), run(2));
                eprint!("{one:.3}/{two:.3} ");
                one / two
            })
            .collect();
        eprintln!();
        ratios.sort_by(f64::total_cmp);
        println!(
            "parallel slack {slack}: {pairs} pairs of 1 and 2 host threads, ratio min {:.2} median {:.2} max {:.2}",
            ratios[0],
            ratios[ratios.len() / 2],
            ratios[ratios.len() - 1]
        );
        return;
    }
    let mut one = 0.0;
    for threads in [1usize, 2] {
        if !runs(&threads.to_string()) {
            continue;
        }
        let cfg = ParallelConfig { slack, threads };
        let mut quanta = None;
        let s = time(&mut || {
            let mut e = ParallelEngine::new(&model, &placement, unit, cfg).expect("model");
            e.run_threads(&streams);
            quanta = e.report().quanta;
        });
        if threads == 1 {
            one = s;
        }
        println!(
            "parallel slack {slack} threads {threads}: {s:.3} s, {:.2} M acc/s, speedup over 1 thread {:.2}, {quanta:?}",
            acc as f64 / s / 1e6,
            one / s
        );
    }
}
