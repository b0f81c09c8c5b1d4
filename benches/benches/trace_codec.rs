//! Trace encode/decode throughput (events/s) and size (bytes/event) per synthetic workload.
//!
//! Run: `cargo bench -p cachescope-benches --bench trace_codec`. The bytes/event table is
//! printed first; throughput figures are criterion's `thrpt` lines (elements = events).
//! Targets (issue 2): decode ≥ 200 M events/s on one core; ≤ 2.0 bytes/event on stream,
//! strided and stencil.

use std::hint::black_box;

use cachescope_benches::{bench_params, generate_in_memory};
use cachescope_schema::chunk::{ChunkDecoder, ChunkEncoder};
use cachescope_schema::record::ChunkMeta;
use cachescope_schema::synth::Workload;
use cachescope_schema::Event;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn codec(c: &mut Criterion) {
    println!(
        "\n{:<18} {:>12} {:>12} {:>12}",
        "workload", "events", "file bytes", "bytes/event"
    );
    for w in Workload::ALL {
        let t = generate_in_memory(&bench_params(w, 1));
        println!(
            "{:<18} {:>12} {:>12} {:>12.3}",
            w.name(),
            t.events,
            t.bytes.len(),
            t.bytes_per_event()
        );
    }
    for w in Workload::ALL {
        let trace = generate_in_memory(&bench_params(w, 1));
        let mut group = c.benchmark_group(format!("trace/{}", w.name()));
        group.throughput(Throughput::Elements(trace.events));
        group.sample_size(20);
        let mut decoder = ChunkDecoder::default();
        let mut out: Vec<Event> = Vec::with_capacity(1 << 16);
        group.bench_function("decode", |b| {
            b.iter(|| {
                let mut n = 0usize;
                for chunk in &trace.chunks {
                    out.clear();
                    decoder.decode(chunk, &mut out).expect("valid chunk");
                    n += out.len();
                }
                black_box(n)
            })
        });
        let mut all = Vec::new();
        for chunk in &trace.chunks {
            decoder.decode(chunk, &mut all).expect("valid chunk");
        }
        let mut encoder = ChunkEncoder::default();
        group.bench_function("encode", |b| {
            b.iter(|| {
                let mut bytes = 0usize;
                for (i, events) in all
                    .chunks(trace.chunks[0].meta.event_count as usize)
                    .enumerate()
                {
                    let meta = ChunkMeta {
                        thread: 0,
                        sequence: i as u32,
                        first_event: 0,
                        start_time: 0,
                        event_count: 0,
                        has_code_positions: false,
                    };
                    bytes += encoder.encode(meta, events).len();
                }
                black_box(bytes)
            })
        });
        group.finish();
    }
}

criterion_group!(benches, codec);
criterion_main!(benches);
