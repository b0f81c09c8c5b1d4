//! Shared helpers for cachescope's criterion benches (see `benches/benches/`).

use cachescope_schema::frame::{FrameReader, FILE_HEADER_BYTES};
use cachescope_schema::record::{decode_record, ChunkRecord, Record};
use cachescope_schema::synth::{generate, GenParams, Workload};
use cachescope_schema::DEFAULT_CHUNK_EVENTS;

/// A generated trace held in memory.
pub struct InMemoryTrace {
    /// The whole file.
    pub bytes: Vec<u8>,
    /// Its chunk records, undecoded.
    pub chunks: Vec<ChunkRecord>,
    /// Total events.
    pub events: u64,
}

impl InMemoryTrace {
    /// File bytes per event.
    pub fn bytes_per_event(&self) -> f64 {
        (self.bytes.len() as u64 - FILE_HEADER_BYTES) as f64 / self.events as f64
    }
}

/// The bench parameters of `workload`: one or more threads over 4 MiB, large enough for
/// steady-state compression and small enough to stay in memory.
pub fn bench_params(workload: Workload, threads: u32) -> GenParams {
    let mut p = GenParams::new(workload);
    p.threads = threads;
    p.size = 4 << 20;
    p.iterations = 1;
    if workload == Workload::FalseSharing || workload == Workload::ProducerConsumer {
        p.iterations = 4;
    }
    p
}

/// Generates `p` with the default chunk size and splits it into chunk records.
pub fn generate_in_memory(p: &GenParams) -> InMemoryTrace {
    let bytes = generate(p, Vec::new(), DEFAULT_CHUNK_EVENTS).expect("valid bench parameters");
    let mut frames = FrameReader::new(&bytes[..]).expect("generated trace");
    let mut chunks = Vec::new();
    while let Some(f) = frames.next_frame().expect("generated trace") {
        if let Record::Chunk(c) = decode_record(&f.payload).expect("generated trace") {
            chunks.push(c);
        }
    }
    let events = chunks.iter().map(|c| c.meta.event_count as u64).sum();
    InMemoryTrace {
        bytes,
        chunks,
        events,
    }
}

/// A trace's events merged into global order in memory, and how many are memory accesses:
/// the input of the engine-only benches, so they time the engine and not the reader.
pub fn merged_in_memory(
    trace: &cachescope_schema::TraceFile,
) -> (Vec<cachescope_schema::TimedEvent>, u64) {
    let events: Vec<cachescope_schema::TimedEvent> = trace
        .merged()
        .expect("merge")
        .map(|e| e.expect("valid"))
        .collect();
    let accesses = events
        .iter()
        .filter(|e| matches!(e.event, cachescope_schema::Event::Access(_)))
        .count() as u64;
    (events, accesses)
}
