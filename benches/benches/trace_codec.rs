//! Trace encode/decode throughput (events/s) and size (bytes/event) per synthetic workload.
//!
//! Run: `cargo bench -p cachescope-benches --bench trace_codec`. The bytes/event table is
//! printed first; throughput figures are criterion's `thrpt` lines (elements = events).
//! Targets (issue 2): decode ≥ 200 M events/s on one core; ≤ 2.0 bytes/event on stream,
//! strided and stencil. Recording: `extend` (what a recording thread's writer does, from
//! buffered events to trace bytes) ≥ 100 M events/s on loop-shaped streams.

use std::hint::black_box;

use cachescope_benches::{bench_params, generate_in_memory};
use cachescope_schema::chunk::{ChunkDecoder, ChunkEncoder};
use cachescope_schema::record::ChunkMeta;
use cachescope_schema::synth::Workload;
use cachescope_schema::{Access, AccessKind, CodePos, Event, TimeUnit, TraceHeader, TraceWriter};
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};

/// The event stream a recorder produces for a naive 2D Jacobi sweep (`dst[i][j]` = average of
/// four neighbours in `src`) on a `dim`×`dim` grid: every access is preceded by an `Advance`
/// for the instructions since the previous one, the way the shim interleaves them.
fn jacobi_events(dim: u64, sweeps: u32) -> Vec<Event> {
    const PC: u64 = 0x40_1200;
    let (mut src, mut dst) = (0x7f00_0000_0000u64, 0x7f00_1000_0000u64);
    let at = |g: u64, i: u64, j: u64| g + 8 * (i * dim + j);
    let access = |kind, addr, pc| {
        Event::Access(Access {
            kind,
            size: 8,
            addr,
            pc: CodePos::new(pc),
        })
    };
    let mut v = vec![Event::ThreadStart];
    for _ in 0..sweeps {
        for i in 1..dim - 1 {
            for j in 1..dim - 1 {
                let loads = [at(src, i - 1, j), at(src, i, j - 1), at(src, i, j + 1)];
                for (k, a) in loads.into_iter().chain([at(src, i + 1, j)]).enumerate() {
                    v.push(Event::Advance {
                        units: 2 + (k == 0) as u64,
                        flops: (k > 0) as u64,
                    });
                    v.push(access(AccessKind::Load, a, PC + 7 * k as u64));
                }
                v.push(Event::Advance { units: 4, flops: 1 });
                v.push(access(AccessKind::Store, at(dst, i, j), PC + 40));
            }
            // The row loop's own instructions.
            v.push(Event::Advance { units: 5, flops: 0 });
        }
        v.push(Event::BarrierEnter {
            barrier: 0x60_4000,
            participants: 1,
        });
        v.push(Event::BarrierLeave { barrier: 0x60_4000 });
        std::mem::swap(&mut src, &mut dst);
    }
    v.push(Event::ThreadExit);
    v
}

/// A whole trace of one thread's `events`, written the way a recorder does: one
/// `ThreadWriter::extend` per buffer of events, default chunk size, into memory.
fn write_trace(events: &[Event], buffer: usize) -> Vec<u8> {
    let header = TraceHeader::new("bench", "bench", TimeUnit::Instructions);
    let writer = TraceWriter::new(Vec::with_capacity(1 << 20), &header).expect("header");
    let mut w = writer.thread(0).expect("thread");
    for part in events.chunks(buffer) {
        w.extend(part.iter().copied()).expect("valid events");
    }
    w.finish().expect("flush");
    writer.finish().expect("trailer")
}

/// Events per `extend` call in the `extend` benches (the shim's per-thread buffer size order).
const EXTEND_BUFFER: usize = 4096;

fn bench_extend(group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>, all: &[Event]) {
    group.bench_function("extend", |b| {
        b.iter(|| black_box(write_trace(black_box(all), EXTEND_BUFFER).len()))
    });
}

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
    let jacobi = jacobi_events(512, 2);
    let jacobi_bytes = write_trace(&jacobi, EXTEND_BUFFER).len();
    println!(
        "{:<18} {:>12} {:>12} {:>12.3}",
        "jacobi (extend)",
        jacobi.len(),
        jacobi_bytes,
        jacobi_bytes as f64 / jacobi.len() as f64
    );
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
        bench_extend(&mut group, &all);
        group.finish();
    }
    let mut group = c.benchmark_group("trace/jacobi");
    group.throughput(Throughput::Elements(jacobi.len() as u64));
    group.sample_size(20);
    bench_extend(&mut group, &jacobi);
    group.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
