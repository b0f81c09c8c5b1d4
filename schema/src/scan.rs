//! One sequential pass over a trace's frames that checks their structure, indexes the chunks,
//! and stops at the first damage while keeping everything complete before it. Both opening a
//! trace ([`crate::TraceFile`]) and `verify` are built on it.

use std::collections::BTreeMap;
use std::io::Read;

use serde::Serialize;

use crate::chunk::{clock_advance, ChunkDecoder};
use crate::error::{ErrorKind, Result, TraceError};
use crate::event::{Event, ThreadId};
use crate::frame::{FrameReader, FRAME_HEADER_BYTES};
use crate::limits::MAX_THREADS;
use crate::record::{decode_record, ChunkMeta, ModuleInfo, Record, TraceHeader, Trailer};

/// Where a chunk lives in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChunkIndex {
    /// The chunk's metadata.
    pub meta: ChunkMeta,
    /// Chunk number in file order.
    pub ordinal: u64,
    /// Offset of the chunk's frame header.
    pub offset: u64,
    /// Payload length.
    pub len: u32,
    /// Payload CRC-32.
    pub crc: u32,
}

/// What the scan learned about one thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ThreadSummary {
    /// Indices into [`Scan::chunks`] of this thread's chunks, in sequence order.
    pub chunks: Vec<usize>,
    /// Events in those chunks.
    pub events: u64,
    /// The thread's own clock after its last complete chunk (exact only when events were
    /// decoded; otherwise the start time of the last chunk).
    pub end_time: u64,
}

/// The outcome of a scan: everything readable up to the first damage, and the damage.
#[derive(Debug, Default)]
pub struct Scan {
    /// The file's format version, once its file header was read (0 before).
    pub format_version: u32,
    /// The header, once read.
    pub header: Option<TraceHeader>,
    /// Modules loaded after the header.
    pub late_modules: Vec<ModuleInfo>,
    /// Complete chunks, in file order.
    pub chunks: Vec<ChunkIndex>,
    /// Per-thread summaries, by thread id.
    pub threads: BTreeMap<ThreadId, ThreadSummary>,
    /// The trailer, if the file has a valid one.
    pub trailer: Option<Trailer>,
    /// The first problem found; nothing after it was read.
    pub damage: Option<TraceError>,
    /// Offset just past the last complete frame.
    pub good_bytes: u64,
    /// Whether event data was decoded and checked.
    pub decoded: bool,
}

/// Scans a trace from `input`. With `decode_events`, every chunk's events are decompressed,
/// decoded and their clocks checked; `on_events` then sees each chunk's events.
pub fn scan(
    input: impl Read,
    decode_events: bool,
    mut on_events: impl FnMut(&ChunkMeta, &[Event]),
) -> Scan {
    let mut scan = Scan {
        decoded: decode_events,
        ..Scan::default()
    };
    if let Err(e) = scan_into(&mut scan, input, &mut on_events) {
        scan.damage = Some(e);
    }
    scan
}

fn scan_into(
    scan: &mut Scan,
    input: impl Read,
    on_events: &mut impl FnMut(&ChunkMeta, &[Event]),
) -> Result<()> {
    let mut frames = FrameReader::new(input)?;
    scan.good_bytes = frames.offset();
    scan.format_version = frames.version();
    let mut decoder = ChunkDecoder::for_version(frames.version());
    let mut events = Vec::new();
    let mut checksum = crc32fast::Hasher::new();
    loop {
        let next = frames.next_frame();
        if scan.trailer.is_some() {
            // Whatever follows a valid trailer (even a second, complete trace) is not part
            // of this one.
            return match next {
                Ok(None) => Ok(()),
                _ => Err(TraceError::new(
                    ErrorKind::Inconsistent,
                    "data after the trailer (two traces concatenated?)",
                )
                .at_offset(scan.good_bytes)),
            };
        }
        // A frame that cannot be read is the header record's while there is no header yet;
        // after it, the frame is counted as the next chunk (a trailer is only known once read).
        let Some(frame) = next.map_err(|e| match scan.header {
            Some(_) => e.in_chunk(scan.chunks.len() as u64),
            None => TraceError {
                message: format!("the header record: {}", e.message),
                ..e
            },
        })?
        else {
            break;
        };
        let at = |e: TraceError| e.at_offset(frame.offset);
        let record = decode_record(&frame.payload).map_err(|e| match scan.header {
            Some(_) => at(e.in_chunk(scan.chunks.len() as u64)),
            None => at(e),
        })?;
        let Some(header) = &scan.header else {
            match record {
                Record::Header(h, version) => {
                    // The file header's version has no checksum; the record's has.
                    if version != scan.format_version {
                        return Err(at(TraceError::new(
                            ErrorKind::Inconsistent,
                            format!(
                                "the file header says format version {}, the header record \
                                 {version}",
                                scan.format_version
                            ),
                        )));
                    }
                    scan.header = Some(h);
                    scan.good_bytes = frames.offset();
                    continue;
                }
                _ => {
                    return Err(at(TraceError::new(
                        ErrorKind::Malformed,
                        "the first record is not a header",
                    )))
                }
            }
        };
        match record {
            Record::Header(..) => {
                return Err(at(TraceError::new(
                    ErrorKind::Inconsistent,
                    "a second header record",
                )))
            }
            Record::Modules(m) => scan.late_modules.extend(m),
            Record::Chunk(chunk) => {
                let ordinal = scan.chunks.len() as u64;
                let meta = chunk.meta;
                let ctx = |e: TraceError| at(e.in_chunk(ordinal).in_thread(meta.thread));
                let known = scan.threads.len();
                let thread = scan.threads.entry(meta.thread).or_default();
                if thread.chunks.is_empty() && known >= MAX_THREADS {
                    return Err(ctx(TraceError::new(
                        ErrorKind::LimitExceeded,
                        format!("more than {MAX_THREADS} threads"),
                    )));
                }
                if meta.sequence as usize != thread.chunks.len() {
                    // The break shows here, but the damage may be earlier: a lost chunk, or one
                    // of this thread's chunks labelled with another thread's id.
                    let (expected, seq) = (thread.chunks.len() as u64, meta.sequence as u64);
                    let hint = match seq.checked_sub(expected) {
                        Some(1) => format!(
                            " (chunk {expected} of thread {} is missing, or carries another \
                             thread id)",
                            meta.thread
                        ),
                        Some(n) if n > 1 => format!(
                            " (chunks {expected} to {} of thread {} are missing, or carry \
                             another thread id)",
                            seq - 1,
                            meta.thread
                        ),
                        _ => String::new(),
                    };
                    return Err(ctx(TraceError::new(
                        ErrorKind::Inconsistent,
                        format!(
                            "chunk sequence {} where {} was expected{hint}",
                            meta.sequence,
                            thread.chunks.len()
                        ),
                    )));
                }
                if meta.first_event != thread.events {
                    return Err(ctx(TraceError::new(
                        ErrorKind::Inconsistent,
                        format!(
                            "chunk starts at event {} but the thread's previous chunks hold {}",
                            meta.first_event, thread.events
                        ),
                    )));
                }
                if scan.decoded {
                    if meta.start_time != thread.end_time {
                        return Err(ctx(TraceError::new(
                            ErrorKind::Inconsistent,
                            format!(
                                "chunk starts at time {} but the thread's clock is at {}",
                                meta.start_time, thread.end_time
                            ),
                        )));
                    }
                    events.clear();
                    decoder.decode(&chunk, &mut events).map_err(ctx)?;
                    thread.end_time = meta
                        .start_time
                        .wrapping_add(clock_advance(&events, header.time_unit));
                    on_events(&meta, &events);
                } else {
                    thread.end_time = meta.start_time;
                }
                thread.events += meta.event_count as u64;
                thread.chunks.push(scan.chunks.len());
                checksum.update(&frame.crc.to_le_bytes());
                scan.chunks.push(ChunkIndex {
                    meta,
                    ordinal,
                    offset: frame.offset,
                    len: (frames.offset() - frame.offset - FRAME_HEADER_BYTES) as u32,
                    crc: frame.crc,
                });
            }
            Record::Trailer(trailer) => {
                check_trailer(scan, &trailer, checksum.clone().finalize()).map_err(at)?;
                scan.trailer = Some(trailer);
            }
        }
        scan.good_bytes = frames.offset();
    }
    if scan.header.is_none() {
        return Err(
            TraceError::new(ErrorKind::Truncated, "the file has no header record")
                .at_offset(scan.good_bytes),
        );
    }
    if scan.trailer.is_none() {
        let last = scan.chunks.last().map_or_else(
            || "no complete chunk".to_string(),
            |c| {
                format!(
                    "the last complete chunk is #{} (thread {}, sequence {})",
                    c.ordinal, c.meta.thread, c.meta.sequence
                )
            },
        );
        return Err(TraceError::new(
            ErrorKind::MissingTrailer,
            format!("the recording was interrupted: {last}"),
        )
        .at_offset(scan.good_bytes));
    }
    Ok(())
}

fn check_trailer(scan: &Scan, trailer: &Trailer, checksum: u32) -> Result<()> {
    let bad = |msg: String| Err(TraceError::new(ErrorKind::Inconsistent, msg));
    if trailer.chunk_count != scan.chunks.len() as u64 {
        return bad(format!(
            "trailer counts {} chunks, the file has {}",
            trailer.chunk_count,
            scan.chunks.len()
        ));
    }
    if trailer.chunk_checksum != checksum {
        return Err(TraceError::new(
            ErrorKind::ChecksumMismatch,
            format!(
                "trailer chunk checksum {:#010x}, chunks give {checksum:#010x} (some chunk was \
                 replaced after recording, each frame intact, or the trailer was; which one \
                 cannot be told)",
                trailer.chunk_checksum
            ),
        ));
    }
    let listed: BTreeMap<ThreadId, _> = trailer.threads.iter().map(|t| (t.thread, t)).collect();
    for (&tid, summary) in &scan.threads {
        let Some(t) = listed.get(&tid) else {
            return bad(format!("thread {tid} has chunks but no trailer entry"));
        };
        if t.events != summary.events || t.chunks as usize != summary.chunks.len() {
            return bad(format!(
                "trailer says thread {tid} has {} events in {} chunks, the file has {} in {}",
                t.events,
                t.chunks,
                summary.events,
                summary.chunks.len()
            ));
        }
        if scan.decoded && t.end_time != summary.end_time {
            return bad(format!(
                "trailer says thread {tid} ends at time {}, its events end at {}",
                t.end_time, summary.end_time
            ));
        }
    }
    if let Some(t) = trailer
        .threads
        .iter()
        .find(|t| t.events > 0 && !scan.threads.contains_key(&t.thread))
    {
        return bad(format!(
            "trailer lists {} events of thread {} that has no chunks",
            t.events, t.thread
        ));
    }
    Ok(())
}
