//! Errors of the trace reader and writer: always say what went wrong and where.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::event::ThreadId;

/// The class of a trace error, stable for programs and tests to match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The operating system refused a read or write.
    Io,
    /// The file does not start with the trace magic bytes.
    BadMagic,
    /// The file's format version is not one this build reads.
    UnsupportedVersion,
    /// The file ends in the middle of a frame.
    Truncated,
    /// A frame's CRC or the trailer's chunk checksum does not match its content.
    ChecksumMismatch,
    /// A length or count exceeds the reader's limits (see [`crate::limits`]).
    LimitExceeded,
    /// A frame's content cannot be decoded (bad Cap'n Proto message, bad columns, ...).
    Malformed,
    /// Frames decode but contradict each other (sequence gaps, totals, sync mismatches).
    Inconsistent,
    /// The file has no trailer: the recording was interrupted.
    MissingTrailer,
    /// Sync events can never be satisfied (e.g. a barrier that too few threads reach).
    Deadlock,
    /// The caller used the API wrongly (e.g. wrote one thread twice).
    Usage,
}

impl ErrorKind {
    /// A short human description of the class.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::Io => "I/O error",
            ErrorKind::BadMagic => "not a cachescope trace (bad magic)",
            ErrorKind::UnsupportedVersion => "unsupported trace format version",
            ErrorKind::Truncated => "truncated",
            ErrorKind::ChecksumMismatch => "checksum mismatch (corrupt data)",
            ErrorKind::LimitExceeded => "limit exceeded",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Inconsistent => "inconsistent",
            ErrorKind::MissingTrailer => "incomplete trace (no trailer)",
            ErrorKind::Deadlock => "unsatisfiable synchronization",
            ErrorKind::Usage => "invalid use",
        }
    }
}

/// A trace error with its location: file, byte offset, chunk (frame number in file order) and
/// thread, whichever are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// The class of error.
    pub kind: ErrorKind,
    /// The trace file, when reading or writing a file.
    pub path: Option<PathBuf>,
    /// Byte offset in the file where the problem was found.
    pub offset: Option<u64>,
    /// Index of the chunk (in file order, counting chunks only).
    pub chunk: Option<u64>,
    /// The thread whose data was involved.
    pub thread: Option<ThreadId>,
    /// Details.
    pub message: String,
}

impl TraceError {
    /// A new error of `kind` with a message and no location yet.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        TraceError {
            kind,
            path: None,
            offset: None,
            chunk: None,
            thread: None,
            message: message.into(),
        }
    }

    /// An I/O error.
    pub fn io(err: &std::io::Error) -> Self {
        Self::new(ErrorKind::Io, err.to_string())
    }

    /// Sets the file.
    pub fn at_path(mut self, path: &Path) -> Self {
        self.path.get_or_insert_with(|| path.to_path_buf());
        self
    }

    /// Sets the byte offset unless one is already known.
    pub fn at_offset(mut self, offset: u64) -> Self {
        self.offset.get_or_insert(offset);
        self
    }

    /// Sets the chunk index unless one is already known.
    pub fn in_chunk(mut self, chunk: u64) -> Self {
        self.chunk.get_or_insert(chunk);
        self
    }

    /// Sets the thread unless one is already known.
    pub fn in_thread(mut self, thread: ThreadId) -> Self {
        self.thread.get_or_insert(thread);
        self
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.path {
            write!(f, "{}: ", p.display())?;
        }
        let mut place = Vec::new();
        if let Some(o) = self.offset {
            place.push(format!("byte offset {o}"));
        }
        if let Some(c) = self.chunk {
            place.push(format!("chunk #{c}"));
        }
        if let Some(t) = self.thread {
            place.push(format!("thread {t}"));
        }
        if !place.is_empty() {
            write!(f, "at {}: ", place.join(", "))?;
        }
        write!(f, "{}: {}", self.kind.describe(), self.message)
    }
}

impl std::error::Error for TraceError {}

/// Result type of this crate.
pub type Result<T, E = TraceError> = std::result::Result<T, E>;
