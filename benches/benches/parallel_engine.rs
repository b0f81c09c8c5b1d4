//! Replay throughput of the parallel engine, in memory accesses per second, with 1 and 2 host
//! threads, next to the exact engine on the same events.
//!
//! Run: `cargo bench -p cachescope-benches --bench parallel_engine`. The case is the
//! barrier-phased stencil on 4 threads / 4 simulated cores (ivybridge-4c, MSI).
//!
//! * `parallel/stencil-4core-msi`: the engines alone, on events already in memory (each
//!   thread's apart for the parallel engine, merged for the exact engine), as the exact
//!   engine's `engine` figure. Target (issue 5): 2 host threads ≥ 1.7× the throughput of 1
//!   host thread. The speedup is the ratio of the `threads-1` and `threads-2` times criterion
//!   prints.
//! * `parallel-file/stencil-4core-msi`: `simulate_exact` and `simulate_parallel` from the
//!   trace file, decoding and ordering included: what `cachescope simulate` spends.

use std::collections::BTreeMap;
use std::hint::black_box;

use cachescope_schema::synth::{generate_file, GenParams, Workload};
use cachescope_schema::TraceFile;
use cachescope_sim::parallel::DEFAULT_SLACK;
use cachescope_sim::run::{simulate_exact, simulate_parallel};
use cachescope_sim::{ExactEngine, MachineModel, ParallelConfig, ParallelEngine, ThreadMapping};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn bench(c: &mut Criterion) {
    let model = MachineModel::load("ivybridge-4c").expect("preset");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.cstrace");
    let mut p = GenParams::new(Workload::Stencil);
    p.threads = 4;
    p.size = 4 << 20;
    p.iterations = 2;
    generate_file(&p, &path).expect("generate");
    let trace = TraceFile::open(&path).expect("open");
    let unit = trace.header().time_unit;
    let (events, accesses) = cachescope_benches::merged_in_memory(&trace);
    let threads = cachescope_sim::parallel::threads_apart(&events);
    let streams: Vec<cachescope_sim::parallel::ThreadStream<'_>> =
        threads.iter().map(|t| t.stream()).collect();
    let placement: BTreeMap<u32, u32> = (0..4).map(|t| (t, t)).collect();
    let mut group = c.benchmark_group("parallel/stencil-4core-msi");
    group.throughput(Throughput::Elements(accesses));
    group.sample_size(10);
    for threads in [1usize, 2] {
        group.bench_function(format!("threads-{threads}"), |b| {
            b.iter(|| {
                let cfg = ParallelConfig {
                    slack: DEFAULT_SLACK,
                    threads,
                };
                let mut engine = ParallelEngine::new(&model, &placement, unit, cfg).expect("model");
                engine.run_threads(&streams);
                black_box(engine.report().paths[0].total.read)
            })
        });
    }
    group.bench_function("exact", |b| {
        b.iter(|| {
            let mut engine = ExactEngine::new(&model, &placement, unit);
            for e in &events {
                engine.process(e);
            }
            black_box(engine.report().paths[0].total.read)
        })
    });
    group.finish();

    let mut group = c.benchmark_group("parallel-file/stencil-4core-msi");
    group.throughput(Throughput::Elements(accesses));
    group.sample_size(10);
    let mapping = ThreadMapping::OneToOne;
    for threads in [1usize, 2] {
        group.bench_function(format!("threads-{threads}"), |b| {
            b.iter(|| {
                let cfg = ParallelConfig {
                    slack: DEFAULT_SLACK,
                    threads,
                };
                let r = simulate_parallel(&trace, &model, &mapping, cfg).expect("simulate");
                black_box(r.paths[0].total.read)
            })
        });
    }
    group.bench_function("exact", |b| {
        b.iter(|| {
            let r = simulate_exact(&trace, &model, &mapping).expect("simulate");
            black_box(r.paths[0].total.read)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
