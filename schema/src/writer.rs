//! Writing traces from many threads at once with bounded memory.
//!
//! Each recorded thread gets a [`ThreadWriter`] that encodes its events as they come (into
//! the columns of at most `chunk_events` events, see [`crate::chunk::ChunkEncoder`]),
//! compresses a full chunk on its own thread, and appends the chunk frame to the shared sink
//! under a short lock. Memory is therefore bounded by threads × chunk size, whatever the trace
//! length, and encoding scales with the writing threads.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::chunk::ChunkEncoder;
use crate::error::{ErrorKind, Result, TraceError};
use crate::event::{Event, ThreadId};
use crate::frame::{write_file_header, write_frame};
use crate::limits::{MAX_ACCESS_BYTES, MAX_CHUNK_EVENTS, MAX_THREADS};
use crate::record::{
    encode_header, encode_modules, encode_trailer, ChunkMeta, ModuleInfo, ThreadTotals, TimeUnit,
    TraceHeader, Trailer,
};

/// Default events per chunk: large enough for LZ4 to find the repeats of a loop, small
/// enough that a decoded chunk (32 bytes an event) stays around 1 MiB.
pub const DEFAULT_CHUNK_EVENTS: usize = 32 * 1024;

/// Events [`ThreadWriter::extend`] copies from its iterator at a time: small enough to stay
/// in the L1 cache with the encoder's state.
const STAGE_EVENTS: usize = 512;

struct Sink<W: Write> {
    out: W,
    chunk_count: u64,
    chunk_crcs: crc32fast::Hasher,
    threads: BTreeMap<ThreadId, ThreadTotals>,
    open: BTreeSet<ThreadId>,
}

struct Shared<W: Write> {
    sink: Mutex<Sink<W>>,
    chunk_events: usize,
    time_unit: TimeUnit,
}

impl<W: Write> Shared<W> {
    fn append(&self, payload: &[u8], is_chunk: bool) -> Result<()> {
        let mut sink = self.sink.lock();
        let crc = write_frame(&mut sink.out, payload).map_err(|e| TraceError::io(&e))?;
        if is_chunk {
            sink.chunk_count += 1;
            sink.chunk_crcs.update(&crc.to_le_bytes());
        }
        Ok(())
    }
}

/// Writes one trace. Cheap to share: hand out [`ThreadWriter`]s to recording threads.
pub struct TraceWriter<W: Write> {
    shared: Arc<Shared<W>>,
}

impl TraceWriter<BufWriter<File>> {
    /// Creates (or truncates) `path` and writes the header.
    pub fn create(path: &Path, header: &TraceHeader) -> Result<Self> {
        let file = File::create(path).map_err(|e| TraceError::io(&e).at_path(path))?;
        Self::new(BufWriter::with_capacity(1 << 20, file), header).map_err(|e| e.at_path(path))
    }
}

impl<W: Write> TraceWriter<W> {
    /// Starts a trace on `out` with the default chunk size.
    pub fn new(out: W, header: &TraceHeader) -> Result<Self> {
        Self::with_chunk_events(out, header, DEFAULT_CHUNK_EVENTS)
    }

    /// Starts a trace on `out`, flushing chunks of `chunk_events` events (1 ..= the reader's
    /// limit).
    pub fn with_chunk_events(
        mut out: W,
        header: &TraceHeader,
        chunk_events: usize,
    ) -> Result<Self> {
        if chunk_events == 0 || chunk_events > MAX_CHUNK_EVENTS as usize {
            return Err(TraceError::new(
                ErrorKind::Usage,
                format!("chunk size {chunk_events} events is outside 1..={MAX_CHUNK_EVENTS}"),
            ));
        }
        write_file_header(&mut out).map_err(|e| TraceError::io(&e))?;
        write_frame(&mut out, &encode_header(header)).map_err(|e| TraceError::io(&e))?;
        Ok(TraceWriter {
            shared: Arc::new(Shared {
                sink: Mutex::new(Sink {
                    out,
                    chunk_count: 0,
                    chunk_crcs: crc32fast::Hasher::new(),
                    threads: BTreeMap::new(),
                    open: BTreeSet::new(),
                }),
                chunk_events,
                time_unit: header.time_unit,
            }),
        })
    }

    /// Hands everything written so far to the output's destination (`Write::flush`): a
    /// recorder calls it after every chunk, so that a process that dies without ending the
    /// trace (`_exit`, SIGKILL) leaves every complete chunk in the file, not in a buffer.
    pub fn flush(&self) -> Result<()> {
        self.shared
            .sink
            .lock()
            .out
            .flush()
            .map_err(|e| TraceError::io(&e))
    }

    /// Records modules loaded after the header was written (e.g. by `dlopen`).
    pub fn add_modules(&self, modules: &[ModuleInfo]) -> Result<()> {
        self.shared.append(&encode_modules(modules), false)
    }

    /// A writer for `thread`'s events. Each thread id can be opened once per trace.
    pub fn thread(&self, thread: ThreadId) -> Result<ThreadWriter<W>> {
        let mut sink = self.shared.sink.lock();
        if sink.open.contains(&thread) {
            return Err(TraceError::new(
                ErrorKind::Usage,
                format!("thread {thread} already has a writer in this trace"),
            ));
        }
        if sink.open.len() >= MAX_THREADS {
            return Err(TraceError::new(
                ErrorKind::LimitExceeded,
                format!("more than {MAX_THREADS} threads"),
            ));
        }
        sink.open.insert(thread);
        Ok(ThreadWriter {
            shared: Arc::clone(&self.shared),
            thread,
            stage: Vec::new(),
            encoder: ChunkEncoder::default(),
            sequence: 0,
            first_event: 0,
            clock: 0,
            finished: false,
        })
    }

    /// Writes the trailer and returns the output. Every [`ThreadWriter`] must have been
    /// finished or dropped.
    pub fn finish(self) -> Result<W> {
        let shared = Arc::try_unwrap(self.shared).map_err(|_| {
            TraceError::new(
                ErrorKind::Usage,
                "a thread writer is still open; finish or drop it first",
            )
        })?;
        let mut sink = shared.sink.into_inner();
        let trailer = Trailer {
            threads: sink.threads.values().copied().collect(),
            chunk_count: sink.chunk_count,
            chunk_checksum: sink.chunk_crcs.clone().finalize(),
        };
        write_frame(&mut sink.out, &encode_trailer(&trailer)).map_err(|e| TraceError::io(&e))?;
        sink.out.flush().map_err(|e| TraceError::io(&e))?;
        Ok(sink.out)
    }
}

/// Whether `e` is an access of a size readers reject (1..=MAX_ACCESS_BYTES is one unsigned
/// comparison).
#[inline(always)]
fn bad_access(e: &Event) -> bool {
    matches!(e, Event::Access(a) if a.size.wrapping_sub(1) >= MAX_ACCESS_BYTES)
}

/// Encodes one thread's events as they come and flushes them as chunks.
pub struct ThreadWriter<W: Write> {
    shared: Arc<Shared<W>>,
    thread: ThreadId,
    /// Events of an `extend` being copied from its iterator (at most [`STAGE_EVENTS`]), so
    /// that they are checked and encoded in slices.
    stage: Vec<Event>,
    encoder: ChunkEncoder,
    sequence: u32,
    first_event: u64,
    clock: u64,
    finished: bool,
}

impl<W: Write> ThreadWriter<W> {
    /// The thread this writer records.
    pub fn thread_id(&self) -> ThreadId {
        self.thread
    }

    /// Appends one event; flushes a chunk when the buffer is full. Accesses must have a size
    /// of 1 ..= [`MAX_ACCESS_BYTES`] (what readers accept).
    pub fn push(&mut self, event: Event) -> Result<()> {
        self.push_slice(std::slice::from_ref(&event))
    }

    /// Appends many events (as [`push`](Self::push) each, but faster). On an error, the
    /// events before the failing one have been appended.
    pub fn extend(&mut self, events: impl IntoIterator<Item = Event>) -> Result<()> {
        let mut events = events.into_iter();
        let mut stage = std::mem::take(&mut self.stage);
        stage.resize(STAGE_EVENTS, Event::ThreadStart);
        let result = loop {
            // Internal iteration (`for_each`) into an existing slice: for slice iterators a
            // plain copy loop, without the `Option` checks of calling `next` per event.
            let mut filled = 0;
            let mut bad = false;
            events.by_ref().take(STAGE_EVENTS).for_each(|e| {
                // Checked here, while the event is in registers; `push_slice` finds which one.
                bad |= bad_access(&e);
                stage[filled] = e;
                filled += 1;
            });
            let result = if bad {
                self.push_slice(&stage[..filled])
            } else {
                self.push_checked(&stage[..filled])
            };
            if let Err(e) = result {
                break Err(e);
            }
            if filled < STAGE_EVENTS {
                break Ok(());
            }
        };
        self.stage = stage;
        result
    }

    /// Appends the events of a slice (as [`push`](Self::push) each, but faster). On an error,
    /// the events before the failing one have been appended.
    pub fn push_slice(&mut self, all: &[Event]) -> Result<()> {
        let bad = all.iter().position(bad_access);
        self.push_checked(&all[..bad.unwrap_or(all.len())])?;
        match bad {
            None => Ok(()),
            Some(i) => {
                let Event::Access(a) = all[i] else {
                    unreachable!("only accesses fail the check")
                };
                Err(TraceError::new(
                    ErrorKind::Usage,
                    format!(
                        "access of {} bytes at {:#x}: sizes must be 1..={MAX_ACCESS_BYTES}",
                        a.size, a.addr
                    ),
                )
                .in_thread(self.thread))
            }
        }
    }

    /// Appends events whose accesses have valid sizes.
    fn push_checked(&mut self, mut events: &[Event]) -> Result<()> {
        while !events.is_empty() {
            let room = self.shared.chunk_events - self.encoder.pending();
            let (now, rest) = events.split_at(room.min(events.len()));
            self.encoder.push(now);
            events = rest;
            if self.encoder.pending() >= self.shared.chunk_events {
                self.flush_chunk()?;
            }
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<()> {
        let events = self.encoder.pending();
        if events == 0 {
            return Ok(());
        }
        let meta = ChunkMeta {
            thread: self.thread,
            sequence: self.sequence,
            first_event: self.first_event,
            start_time: self.clock,
            event_count: 0,
            has_code_positions: false,
        };
        let advance = self.encoder.pending_clock_advance(self.shared.time_unit);
        let payload = self.encoder.finish_chunk(meta);
        self.shared
            .append(&payload, true)
            .map_err(|e| e.in_thread(self.thread))?;
        self.sequence += 1;
        self.first_event += events as u64;
        self.clock = self.clock.wrapping_add(advance);
        Ok(())
    }

    /// Flushes the remaining events and records the thread's totals for the trailer.
    pub fn finish(mut self) -> Result<()> {
        self.finish_inner()
    }

    fn finish_inner(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        self.flush_chunk()?;
        let mut sink = self.shared.sink.lock();
        sink.threads.insert(
            self.thread,
            ThreadTotals {
                thread: self.thread,
                events: self.first_event,
                chunks: self.sequence,
                end_time: self.clock,
            },
        );
        Ok(())
    }
}

impl<W: Write> Drop for ThreadWriter<W> {
    fn drop(&mut self) {
        if let Err(e) = self.finish_inner() {
            tracing::error!(thread = self.thread, "losing buffered events: {e}");
        }
    }
}
