//! Chunks: a thread's events, column-encoded and LZ4-compressed, inside one record.

use crate::columns::{decode_columns, ColumnEncoder, COLUMN_COUNT, DECODE_PADDING};
use crate::error::{ErrorKind, Result, TraceError};
use crate::event::Event;
use crate::record::{encode_chunk, ChunkMeta, ChunkRecord, TimeUnit};

/// How far a thread's own clock moves over `events` (before sync alignment).
pub fn clock_advance(events: &[Event], unit: TimeUnit) -> u64 {
    let cost = unit.access_cost();
    events.iter().fold(0u64, |t, e| match e {
        Event::Access(_) => t.wrapping_add(cost),
        Event::Advance { units, .. } => t.wrapping_add(*units),
        _ => t,
    })
}

/// Encodes chunks; keeps its buffers between chunks (one per writing thread).
#[derive(Default, Debug)]
pub struct ChunkEncoder {
    columns: ColumnEncoder,
    raw: Vec<u8>,
}

impl ChunkEncoder {
    /// Encodes `events` into a chunk record payload. `meta.event_count` and
    /// `meta.has_code_positions` are filled in from the events.
    pub fn encode(&mut self, mut meta: ChunkMeta, events: &[Event]) -> Vec<u8> {
        meta.event_count = events.len() as u32;
        meta.has_code_positions = events
            .iter()
            .any(|e| matches!(e, Event::Access(a) if a.pc.is_some()));
        self.columns.start(meta.has_code_positions);
        for e in events {
            self.columns.push(e);
        }
        self.columns.finish();
        self.raw.clear();
        let mut lengths = [0u32; COLUMN_COUNT];
        for (len, col) in lengths.iter_mut().zip(&self.columns.columns) {
            *len = col.len() as u32;
            self.raw.extend_from_slice(col);
        }
        let compressed = lz4_flex::block::compress(&self.raw);
        encode_chunk(&meta, &lengths, &compressed)
    }
}

/// Decodes chunks; keeps its decompression buffer between chunks.
#[derive(Default, Debug)]
pub struct ChunkDecoder {
    raw: Vec<u8>,
}

impl ChunkDecoder {
    /// Decompresses and decodes `chunk`, appending its events to `out`.
    pub fn decode(&mut self, chunk: &ChunkRecord, out: &mut Vec<Event>) -> Result<()> {
        let total: usize = chunk.column_lengths.iter().map(|&l| l as usize).sum();
        // Limits were checked when the record was decoded, so `total` is bounded. The zero
        // padding after the columns lets the column decoder use 8-byte loads everywhere.
        // The buffer only grows: LZ4 overwrites the columns (or we fail on a short output
        // below), so only the padding needs zeroing, not the whole buffer per chunk.
        let padded = total + DECODE_PADDING;
        if self.raw.len() < padded {
            self.raw.resize(padded, 0);
        }
        let n =
            lz4_flex::block::decompress_into(&chunk.data, &mut self.raw[..total]).map_err(|e| {
                TraceError::new(ErrorKind::Malformed, format!("LZ4 data: {e}"))
                    .in_thread(chunk.meta.thread)
            })?;
        self.raw[total..padded].fill(0);
        if n != total {
            return Err(TraceError::new(
                ErrorKind::Malformed,
                format!("LZ4 data holds {n} bytes, the column lengths add up to {total}"),
            )
            .in_thread(chunk.meta.thread));
        }
        if !chunk.meta.has_code_positions && chunk.column_lengths[2] != 0 {
            return Err(TraceError::new(
                ErrorKind::Malformed,
                "pcs column present in a chunk without code positions",
            )
            .in_thread(chunk.meta.thread));
        }
        let before = out.len();
        decode_columns(
            &self.raw[..padded],
            chunk.column_lengths,
            chunk.meta.has_code_positions,
            out,
        )
        .map_err(|e| {
            out.truncate(before);
            TraceError::new(ErrorKind::Malformed, e.to_string()).in_thread(chunk.meta.thread)
        })
    }
}
