//! cachescope-schema: the trace format and everything that reads or writes it.
//!
//! A trace is one file per recorded run: a header, then chunks of per-thread events as threads
//! fill their buffers, then a trailer (see `trace.capnp` for the framing and records, and
//! [`columns`] for how events are stored). This crate provides
//!
//! * [`TraceWriter`] / [`ThreadWriter`]: many threads write at once, memory bounded by the
//!   chunk size;
//! * [`TraceFile`]: open and index a file, iterate one thread's events or all threads in the
//!   global (time, thread) order of the time model ([`merge`]);
//! * [`scan`] / [`summary`]: checking and summarizing, used by `cachescope trace info|verify`;
//! * [`synth`]: synthetic workloads for tests and benches;
//! * [`instrumentation`]: which callbacks make a program recordable, and its time unit.
//!
//! Every error says what went wrong and where ([`TraceError`]); reader limits are in
//! [`limits`].

#![warn(missing_docs)]

pub mod chunk;
pub mod columns;
pub mod error;
pub mod event;
pub mod frame;
pub mod instrumentation;
pub mod limits;
pub mod merge;
pub mod prefetch;
pub mod progress;
pub mod reader;
pub mod record;
pub mod scan;
pub mod summary;
pub mod synth;
#[allow(clippy::all, missing_docs, unused, unreachable_pub)]
#[rustfmt::skip]
pub mod trace_capnp;
pub mod writer;

pub use error::{ErrorKind, Result, TraceError};
pub use event::{Access, AccessKind, Alignment, CodePos, Event, EventKind, ThreadId};
pub use instrumentation::Instrumentation;
pub use merge::{MergedEvents, QuantaSizes, TimedEvent};
pub use reader::{CursorMark, OpenOptions, ThreadCursor, ThreadEvents, TraceFile};
pub use record::{HostInfo, ModuleInfo, TimeUnit, TraceHeader, Trailer};
pub use summary::{verify_file, TraceSummary, VerifyReport};
pub use writer::{ThreadWriter, TraceWriter, DEFAULT_CHUNK_EVENTS};
