//! Reading traces: open and index a file, then stream one thread's events in program order
//! (or all threads merged, see [`crate::merge`]). Only one decoded chunk per thread is held in
//! memory at a time.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::chunk::{clock_advance, ChunkDecoder};
use crate::error::{ErrorKind, Result, TraceError};
use crate::event::{Event, ThreadId};
use crate::frame::FRAME_HEADER_BYTES;
use crate::merge::MergedEvents;
use crate::record::{decode_record, ModuleInfo, Record, TimeUnit, TraceHeader, Trailer};
use crate::scan::{scan, ChunkIndex, ThreadSummary};

/// How strictly [`TraceFile::open_with`] treats damage.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Accept a file without trailer or with damage, using every complete chunk before the
    /// first problem (the problem is kept in [`TraceFile::damage`]).
    pub allow_incomplete: bool,
}

/// An opened, indexed trace file.
pub struct TraceFile {
    path: PathBuf,
    file: Arc<File>,
    header: TraceHeader,
    format_version: u32,
    late_modules: Vec<ModuleInfo>,
    chunks: Vec<ChunkIndex>,
    threads: BTreeMap<ThreadId, ThreadSummary>,
    trailer: Option<Trailer>,
    damage: Option<TraceError>,
    file_len: u64,
}

impl TraceFile {
    /// Opens a complete, undamaged trace.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_with(path, OpenOptions::default())
    }

    /// Opens a trace with the given options. Reads every frame once to check its CRC and
    /// build the chunk index; event data is decoded later, on demand.
    pub fn open_with(path: &Path, options: OpenOptions) -> Result<Self> {
        let file = open_regular(path)?;
        let file_len = file
            .metadata()
            .map_err(|e| TraceError::io(&e).at_path(path))?
            .len();
        let s = scan(BufReader::with_capacity(1 << 20, &file), false, |_, _| {});
        let damage = s.damage.map(|d| d.at_path(path));
        let Some(header) = s.header else {
            return Err(damage.unwrap_or_else(|| {
                TraceError::new(ErrorKind::Truncated, "no header record").at_path(path)
            }));
        };
        if let Some(d) = &damage {
            if !options.allow_incomplete {
                return Err(d.clone());
            }
            // The caller decides how to tell the user (see `damage()`); this is only a log.
            tracing::debug!(
                "{d}; using the {} complete chunks before it",
                s.chunks.len()
            );
        }
        let mut trace = TraceFile {
            path: path.to_path_buf(),
            file: Arc::new(file),
            header,
            format_version: s.format_version,
            late_modules: s.late_modules,
            chunks: s.chunks,
            threads: s.threads,
            trailer: s.trailer,
            damage,
            file_len,
        };
        trace.settle_end_times(options)?;
        Ok(trace)
    }

    /// Sets each thread's end time from its events (the scan only knows where its last chunk
    /// starts): one chunk per thread is decoded. The trailer's end times are claims to check
    /// against them, not figures to show: a mismatch is an error, or the damage of a trace
    /// opened with `allow_incomplete`.
    fn settle_end_times(&mut self, options: OpenOptions) -> Result<()> {
        let mut buf = Vec::new();
        let threads: Vec<ThreadId> = self.threads.keys().copied().collect();
        for t in threads {
            let mut cursor = self.thread_cursor(t)?;
            let Some(last) = cursor.chunks.len().checked_sub(1) else {
                continue;
            };
            cursor.next_chunk = last;
            cursor.clock = cursor.chunks[last].meta.start_time;
            cursor.next_chunk_into(&mut buf)?;
            let end = cursor.clock;
            if let Some(summary) = self.threads.get_mut(&t) {
                summary.end_time = end;
            }
            let claimed = self
                .trailer
                .as_ref()
                .and_then(|tr| tr.threads.iter().find(|x| x.thread == t))
                .map(|x| x.end_time);
            if let Some(claimed) = claimed.filter(|&c| c != end) {
                let err = TraceError::new(
                    ErrorKind::Inconsistent,
                    format!(
                        "trailer says thread {t} ends at time {claimed}, its events end at {end}"
                    ),
                )
                .at_path(&self.path)
                .in_thread(t);
                if !options.allow_incomplete {
                    return Err(err);
                }
                self.damage.get_or_insert(err);
            }
        }
        Ok(())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header.
    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// Modules from the header and from later module records.
    pub fn modules(&self) -> impl Iterator<Item = &ModuleInfo> {
        self.header.modules.iter().chain(&self.late_modules)
    }

    /// The trailer (absent in an incomplete trace).
    pub fn trailer(&self) -> Option<&Trailer> {
        self.trailer.as_ref()
    }

    /// The damage that ended reading, when opened with `allow_incomplete`.
    pub fn damage(&self) -> Option<&TraceError> {
        self.damage.as_ref()
    }

    /// File size in bytes.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// All chunks in file order.
    pub fn chunks(&self) -> &[ChunkIndex] {
        &self.chunks
    }

    /// Thread ids, ascending.
    pub fn thread_ids(&self) -> impl Iterator<Item = ThreadId> + '_ {
        self.threads.keys().copied()
    }

    /// Per-thread summaries.
    pub fn threads(&self) -> &BTreeMap<ThreadId, ThreadSummary> {
        &self.threads
    }

    /// Total number of events.
    pub fn event_count(&self) -> u64 {
        self.threads.values().map(|t| t.events).sum()
    }

    /// A cursor over one thread's events in program order.
    pub fn thread_cursor(&self, thread: ThreadId) -> Result<ThreadCursor> {
        let summary = self.threads.get(&thread).ok_or_else(|| {
            TraceError::new(
                ErrorKind::Usage,
                format!("the trace has no thread {thread}"),
            )
            .at_path(&self.path)
        })?;
        Ok(ThreadCursor {
            path: self.path.clone(),
            file: Arc::clone(&self.file),
            thread,
            chunks: summary.chunks.iter().map(|&i| self.chunks[i]).collect(),
            next_chunk: 0,
            unit: self.header.time_unit,
            clock: 0,
            decoder: ChunkDecoder::for_version(self.format_version),
            payload: Vec::new(),
            events: Vec::new(),
            pos: 0,
        })
    }

    /// One thread's events in program order.
    pub fn thread_events(&self, thread: ThreadId) -> Result<ThreadEvents> {
        Ok(ThreadEvents {
            cursor: self.thread_cursor(thread)?,
            failed: false,
        })
    }

    /// All events of all threads in the global (time, thread) order, with clocks aligned at
    /// sync events (see [`crate::merge`]). In a trace opened with `allow_incomplete` that has
    /// damage, waits whose partners' events are missing are released.
    pub fn merged(&self) -> Result<MergedEvents> {
        let cursors = self
            .thread_ids()
            .map(|t| self.thread_cursor(t))
            .collect::<Result<Vec<_>>>()?;
        Ok(MergedEvents::new(cursors, self.header.time_unit).incomplete(self.damage.is_some()))
    }
}

/// Reads one thread's chunks on demand and hands out their events.
pub struct ThreadCursor {
    path: PathBuf,
    file: Arc<File>,
    thread: ThreadId,
    chunks: Vec<ChunkIndex>,
    next_chunk: usize,
    unit: TimeUnit,
    /// The thread's own clock after the chunks read so far: where the next chunk must start
    /// (the chunks' start times are checked like `verify` checks them).
    clock: u64,
    decoder: ChunkDecoder,
    payload: Vec<u8>,
    events: Vec<Event>,
    pos: usize,
}

impl ThreadCursor {
    /// The thread.
    pub fn thread(&self) -> ThreadId {
        self.thread
    }

    /// Decodes the next chunk into `out` (cleared first); `Ok(false)` after the last chunk.
    /// The chunk-at-a-time path for consumers that want slices, not single events.
    pub fn next_chunk_into(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        let Some(&c) = self.chunks.get(self.next_chunk) else {
            return Ok(false);
        };
        self.next_chunk += 1;
        let ctx = |e: TraceError| {
            e.at_path(&self.path)
                .at_offset(c.offset)
                .in_chunk(c.ordinal)
                .in_thread(c.meta.thread)
        };
        self.payload.resize(c.len as usize, 0);
        self.file
            .read_exact_at(&mut self.payload, c.offset + FRAME_HEADER_BYTES)
            .map_err(|e| ctx(TraceError::io(&e)))?;
        if crc32fast::hash(&self.payload) != c.crc {
            return Err(ctx(TraceError::new(
                ErrorKind::ChecksumMismatch,
                "chunk changed on disk since the trace was opened",
            )));
        }
        match decode_record(&self.payload).map_err(ctx)? {
            Record::Chunk(chunk) if chunk.meta == c.meta => {
                if c.meta.start_time != self.clock {
                    return Err(ctx(TraceError::new(
                        ErrorKind::Inconsistent,
                        format!(
                            "chunk starts at time {} but the thread's clock is at {}",
                            c.meta.start_time, self.clock
                        ),
                    )));
                }
                self.decoder.decode(&chunk, out).map_err(ctx)?;
                self.clock = c
                    .meta
                    .start_time
                    .wrapping_add(clock_advance(out, self.unit));
                Ok(true)
            }
            _ => Err(ctx(TraceError::new(
                ErrorKind::Inconsistent,
                "chunk changed on disk since the trace was opened",
            ))),
        }
    }

    /// The next event, or `Ok(None)` at the end of the thread's stream.
    #[inline]
    pub fn next_event(&mut self) -> Result<Option<Event>> {
        loop {
            if let Some(&e) = self.events.get(self.pos) {
                self.pos += 1;
                return Ok(Some(e));
            }
            if !self.load_next_chunk()? {
                return Ok(None);
            }
        }
    }

    /// The decoded events not returned yet (empty when the next call of
    /// [`Self::next_event`] decodes a chunk).
    #[inline]
    pub(crate) fn pending(&self) -> &[Event] {
        self.events.get(self.pos..).unwrap_or_default()
    }

    /// Consumes the first `n` events of [`Self::pending`], as `n` calls of
    /// [`Self::next_event`] would.
    #[inline]
    pub(crate) fn skip(&mut self, n: usize) {
        debug_assert!(
            n <= self.pending().len(),
            "skipping past the decoded events"
        );
        self.pos += n;
    }

    /// Where the cursor is, for [`Self::seek`]: the next event [`Self::next_event`] returns.
    pub fn mark(&self) -> CursorMark {
        if self.pos < self.events.len() {
            // Inside the chunk decoded last.
            CursorMark {
                chunk: self.next_chunk - 1,
                pos: self.pos,
            }
        } else {
            CursorMark {
                chunk: self.next_chunk,
                pos: 0,
            }
        }
    }

    /// Goes back (or forth) to `mark`, taken from this cursor: the events from there are read
    /// again (their chunk decoded again and checked against its checksum; the chunks were
    /// checked in order when first read, so the thread's clock is taken from the chunk).
    pub fn seek(&mut self, mark: CursorMark) -> Result<()> {
        self.events.clear();
        self.pos = 0;
        self.next_chunk = mark.chunk.min(self.chunks.len());
        if let Some(c) = self.chunks.get(self.next_chunk) {
            self.clock = c.meta.start_time;
        }
        if mark.pos > 0 {
            self.load_next_chunk()?;
            self.pos = mark.pos.min(self.events.len());
        }
        Ok(())
    }

    /// Decodes the next chunk into the cursor's own buffer, from its start; `Ok(false)`
    /// after the last chunk.
    fn load_next_chunk(&mut self) -> Result<bool> {
        let mut buf = std::mem::take(&mut self.events);
        let more = self.next_chunk_into(&mut buf);
        self.events = buf;
        self.pos = 0;
        more
    }

    /// Whether at most `n` events of the stream are left, all of them decoded: whether the
    /// stream ends with the event a thread waits with (`n` = 1 after [`Self::unread`], 0 when
    /// the event was consumed, as a barrier's enter is).
    #[inline]
    pub(crate) fn at_most_left(&self, n: usize) -> bool {
        self.events.len() - self.pos.min(self.events.len()) <= n
            && self.next_chunk >= self.chunks.len()
    }

    /// Steps back over the event [`Self::next_event`] just returned, so that it is returned
    /// again. Only valid directly after a `next_event` that returned an event.
    #[inline]
    pub fn unread(&mut self) {
        debug_assert!(self.pos > 0, "unread without a preceding next_event");
        self.pos = self.pos.saturating_sub(1);
    }
}

/// A place in one thread's stream (see [`ThreadCursor::mark`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CursorMark {
    /// The chunk (of the thread's) holding the event.
    chunk: usize,
    /// The event's index in that chunk.
    pos: usize,
}

/// Iterator over one thread's events; stops after the first error.
pub struct ThreadEvents {
    cursor: ThreadCursor,
    failed: bool,
}

impl ThreadEvents {
    /// Where the iterator is: the next event it returns (see [`ThreadCursor::mark`]).
    pub fn mark(&self) -> CursorMark {
        self.cursor.mark()
    }

    /// Reads again from `mark`, taken from this iterator (see [`ThreadCursor::seek`]).
    pub fn seek(&mut self, mark: CursorMark) -> Result<()> {
        self.failed = false;
        self.cursor.seek(mark)
    }
}

impl Iterator for ThreadEvents {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.cursor.next_event() {
            Ok(e) => e.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Opens `path` for reading if it is a regular file. It is looked at first: opening a FIFO
/// that no process writes would wait forever. Chunks are read at their offsets, on demand, so
/// a pipe would fail later anyway, at the first chunk, with "Illegal seek".
pub(crate) fn open_regular(path: &Path) -> Result<File> {
    let meta = std::fs::metadata(path).map_err(|e| TraceError::io(&e).at_path(path))?;
    if !meta.is_file() {
        return Err(TraceError::new(
            ErrorKind::Usage,
            "not a regular file (a pipe, device or directory): traces are read at random \
             offsets, so save the trace to a file first",
        )
        .at_path(path));
    }
    File::open(path).map_err(|e| TraceError::io(&e).at_path(path))
}
