//! Throughput of the audit's false-sharing estimate (Pluto, thesis §4.2.2), in memory accesses
//! per second, under the audit's default eleven layouts.
//!
//! Run: `cargo bench -p cachescope-benches --bench false_sharing_audit`. Cases: a 2-thread
//! stream over 16 MiB in one barrier segment (every line used by one thread: what the first
//! pass costs), the 4-thread barrier-phased stencil over 4 MiB (lines shared at the threads'
//! borders: both passes), and a 1 MiB array that 2 threads update at random places (every
//! line shared and written: mostly the second pass, and a finding on every line). Memory is
//! measured by
//! `bash benches/scripts/audit_memory.sh` (docs/audit.md, "Limits").

use std::hint::black_box;

use cachescope_analysis::heap::HeapMap;
use cachescope_analysis::pluto::{estimate_trace, Layout};
use cachescope_analysis::stack::StackMap;
use cachescope_schema::synth::{generate_file, GenParams, Workload};
use cachescope_schema::{Event, TraceFile};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// The layouts `cachescope audit` predicts by default for 64-byte lines: the recorded one,
/// 32- and 128-byte lines, shifts by 8..56 bytes, 128-byte lines shifted by 64.
fn default_layouts() -> Vec<Layout> {
    let mut layouts = vec![
        Layout::recorded(64),
        Layout::recorded(32),
        Layout::recorded(128),
    ];
    layouts.extend((1..8).map(|k| Layout {
        line_size: 64,
        shift: 8 * k,
    }));
    layouts.push(Layout {
        line_size: 128,
        shift: 64,
    });
    layouts
}

fn bench(c: &mut Criterion) {
    let layouts = default_layouts();
    for (name, workload, threads, size, iterations) in [
        ("stream-2t-16M", Workload::Stream, 2u32, 16u64 << 20, 1u32),
        ("stencil-4t-4M", Workload::Stencil, 4, 4 << 20, 2),
        ("random-2t-1M", Workload::Random, 2, 1 << 20, 1),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.cstrace");
        let mut p = GenParams::new(workload);
        p.threads = threads;
        p.size = size;
        p.iterations = iterations;
        generate_file(&p, &path).expect("generate");
        let trace = TraceFile::open(&path).expect("open");
        let accesses = trace
            .merged()
            .expect("merge")
            .filter(|e| matches!(e, Ok(t) if matches!(t.event, Event::Access(_))))
            .count() as u64;
        let mut group = c.benchmark_group(format!("audit/{name}"));
        group.throughput(Throughput::Elements(accesses));
        group.sample_size(10);
        group.bench_function("pluto-11-layouts", |b| {
            b.iter(|| {
                let r = estimate_trace(&trace, &layouts, &mut HeapMap::new(), &mut StackMap::new())
                    .expect("estimate");
                black_box(r[0].total_phi_prime())
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
