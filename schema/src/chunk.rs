//! Chunks: a thread's events, column-encoded and LZ4-compressed, inside one record.

use crate::columns::{
    decode_columns, first_op_newer_than, ColumnEncoder, COLUMN_COUNT, COLUMN_NAMES, DECODE_PADDING,
};
use crate::error::{ErrorKind, Result, TraceError};
use crate::event::Event;
use crate::frame::FORMAT_VERSION;
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
///
/// Either encode whole chunks with [`encode`](Self::encode), or stream: [`push`](Self::push)
/// events as they come and [`finish_chunk`](Self::finish_chunk) when enough have been pushed;
/// streaming never holds the events themselves.
#[derive(Default, Debug)]
pub struct ChunkEncoder {
    columns: ColumnEncoder,
    raw: Vec<u8>,
    compressed: Vec<u8>,
}

impl ChunkEncoder {
    /// Encodes `events` into a chunk record payload. `meta.event_count` and
    /// `meta.has_code_positions` are filled in from the events. Discards events pushed
    /// since the last [`finish_chunk`](Self::finish_chunk).
    pub fn encode(&mut self, meta: ChunkMeta, events: &[Event]) -> Vec<u8> {
        self.columns.start_detecting();
        self.columns.push_slice(events);
        self.finish_chunk(meta)
    }

    /// Appends events to the open chunk.
    #[inline]
    pub fn push(&mut self, events: &[Event]) {
        self.columns.push_slice(events);
    }

    /// Events pushed to the open chunk.
    pub fn pending(&self) -> usize {
        self.columns.len()
    }

    /// How far the thread's clock moves over the open chunk's events (what
    /// [`clock_advance`] would return for them).
    pub fn pending_clock_advance(&self, unit: TimeUnit) -> u64 {
        self.columns.clock_advance(unit.access_cost())
    }

    /// Encodes the open chunk's events into a chunk record payload and opens an empty chunk.
    /// `meta.event_count` and `meta.has_code_positions` are filled in from the events.
    pub fn finish_chunk(&mut self, mut meta: ChunkMeta) -> Vec<u8> {
        self.columns.finish();
        meta.event_count = self.columns.len() as u32;
        meta.has_code_positions = self.columns.has_pcs();
        self.raw.clear();
        let mut lengths = [0u32; COLUMN_COUNT];
        for (len, col) in lengths.iter_mut().zip(&self.columns.columns) {
            *len = col.len() as u32;
            self.raw.extend_from_slice(col);
        }
        // Into a kept buffer: `compress` would allocate its output for every chunk.
        self.compressed
            .resize(lz4_flex::block::get_maximum_output_size(self.raw.len()), 0);
        let n = lz4_flex::block::compress_into(&self.raw, &mut self.compressed)
            .expect("output buffer has the maximum compressed size");
        let payload = encode_chunk(&meta, &lengths, &self.compressed[..n]);
        self.columns.start_detecting();
        payload
    }
}

/// Decodes chunks; keeps its decompression buffer between chunks.
#[derive(Debug)]
pub struct ChunkDecoder {
    raw: Vec<u8>,
    version: u32,
}

impl Default for ChunkDecoder {
    /// A decoder for chunks of the format version this build writes.
    fn default() -> Self {
        Self::for_version(FORMAT_VERSION)
    }
}

impl ChunkDecoder {
    /// A decoder for chunks of a file of format `version` (one the frame reader accepted):
    /// chunks of older versions must not use what later versions added.
    pub fn for_version(version: u32) -> Self {
        ChunkDecoder {
            raw: Vec::new(),
            version,
        }
    }

    /// Decompresses and decodes `chunk`, appending its events to `out`.
    pub fn decode(&mut self, chunk: &ChunkRecord, out: &mut Vec<Event>) -> Result<()> {
        crate::progress::add_decoded(u64::from(chunk.meta.event_count));
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
        if let Some((event, code, what)) =
            first_op_newer_than(&self.raw[..chunk.column_lengths[0] as usize], self.version)
        {
            return Err(TraceError::new(
                ErrorKind::Malformed,
                format!(
                    "event {event} of the chunk: {} column: op code {code} ({what}) does not \
                     exist in format version {}",
                    COLUMN_NAMES[0], self.version
                ),
            )
            .in_thread(chunk.meta.thread));
        }
        let before = out.len();
        decode_columns(
            &self.raw[..padded],
            chunk.column_lengths,
            chunk.meta.has_code_positions,
            self.version,
            out,
        )
        .map_err(|e| {
            out.truncate(before);
            TraceError::new(ErrorKind::Malformed, e.to_string()).in_thread(chunk.meta.thread)
        })
    }
}
