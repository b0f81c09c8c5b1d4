//! Replay throughput of the exact engine, in memory accesses per second.
//!
//! Run: `cargo bench -p cachescope-benches --bench exact_engine`. Two figures per case:
//! * `engine`: the engine alone, over the trace's events already merged into global order in
//!   memory — what the simulator itself sustains;
//! * `from-file`: everything `cachescope simulate` does — read, decode, merge, simulate.
//!
//! Cases: 1 thread on one core with private L1 and shared L2 (ivybridge-4c), and 4 threads on
//! 4 cores with MSI coherence, both on the barrier-phased stencil. Target (issue 3):
//! ≥ 50 M accesses/s on one host core.

use std::collections::BTreeMap;
use std::hint::black_box;

use cachescope_schema::synth::{generate_file, GenParams, Workload};
use cachescope_schema::TraceFile;
use cachescope_sim::{simulate_exact, ExactEngine, MachineModel, ThreadMapping};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn bench(c: &mut Criterion) {
    let model = MachineModel::load("ivybridge-4c").expect("preset");
    for (name, workload, threads) in [
        ("stencil-1core", Workload::Stencil, 1u32),
        ("stencil-4core-msi", Workload::Stencil, 4),
        ("stream-4core-msi", Workload::Stream, 4),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.cstrace");
        let mut p = GenParams::new(workload);
        p.threads = threads;
        p.size = 4 << 20;
        p.iterations = 2;
        generate_file(&p, &path).expect("generate");
        let trace = TraceFile::open(&path).expect("open");
        let (events, accesses) = cachescope_benches::merged_in_memory(&trace);
        let placement: BTreeMap<u32, u32> = (0..threads).map(|t| (t, t)).collect();
        let mut group = c.benchmark_group(format!("exact/{name}"));
        group.throughput(Throughput::Elements(accesses));
        group.sample_size(10);
        group.bench_function("engine", |b| {
            b.iter(|| {
                let mut engine = ExactEngine::new(&model, &placement, trace.header().time_unit);
                for e in &events {
                    engine.process(e);
                }
                black_box(engine.report().paths[0].total.read)
            })
        });
        group.bench_function("from-file", |b| {
            b.iter(|| {
                let r = simulate_exact(&trace, &model, &ThreadMapping::OneToOne).expect("simulate");
                black_box(r.paths[0].total.read)
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
