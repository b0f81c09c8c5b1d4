//! Writing traces from many threads at once with bounded memory.
//!
//! Each recorded thread gets a [`ThreadWriter`] that buffers at most `chunk_events` events,
//! encodes and compresses a full buffer on its own thread, and appends the chunk frame to the
//! shared sink under a short lock. Memory is therefore bounded by threads × chunk size,
//! whatever the trace length, and encoding scales with the writing threads.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::chunk::{clock_advance, ChunkEncoder};
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
            buf: Vec::with_capacity(self.shared.chunk_events),
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

/// Buffers one thread's events and flushes them as chunks.
pub struct ThreadWriter<W: Write> {
    shared: Arc<Shared<W>>,
    thread: ThreadId,
    buf: Vec<Event>,
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
        if let Event::Access(a) = &event {
            if a.size == 0 || a.size > MAX_ACCESS_BYTES {
                return Err(TraceError::new(
                    ErrorKind::Usage,
                    format!(
                        "access of {} bytes at {:#x}: sizes must be 1..={MAX_ACCESS_BYTES}",
                        a.size, a.addr
                    ),
                )
                .in_thread(self.thread));
            }
        }
        self.buf.push(event);
        if self.buf.len() >= self.shared.chunk_events {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Appends many events.
    pub fn extend(&mut self, events: impl IntoIterator<Item = Event>) -> Result<()> {
        for e in events {
            self.push(e)?;
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.buf.is_empty() {
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
        let payload = self.encoder.encode(meta, &self.buf);
        self.shared
            .append(&payload, true)
            .map_err(|e| e.in_thread(self.thread))?;
        self.sequence += 1;
        self.first_event += self.buf.len() as u64;
        self.clock = self
            .clock
            .wrapping_add(clock_advance(&self.buf, self.shared.time_unit));
        self.buf.clear();
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
