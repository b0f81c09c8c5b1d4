//! The trace file's descriptor belongs to the recorder. Programs that close every inherited
//! descriptor before their work (`for (fd = 3; fd < 1024; fd++) close(fd)`, `closefrom(3)`,
//! `close_range`), as daemons and process spawners do, would close it and lose the whole
//! trace ("Bad file descriptor", a 0-byte `.partial`). While the process records, closing it
//! is skipped and reported as done, as Valgrind does with its own descriptors; the writer
//! thread closes it when the trace is complete, and a forked child may close its copy.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use libc::{c_int, c_uint};

use crate::real::real_fn;
use crate::recorder;

/// The trace's descriptor (-1: none) and the process that opened it.
static TRACE_FD: AtomicI32 = AtomicI32::new(-1);
static TRACE_PID: AtomicU32 = AtomicU32::new(0);

/// Protects `fd`, the trace file's descriptor in this process, from the program's `close`.
pub(crate) fn protect(fd: c_int) {
    TRACE_PID.store(std::process::id(), Ordering::SeqCst);
    TRACE_FD.store(fd, Ordering::SeqCst);
}

/// The protected descriptor, if the calling thread may not close it.
fn protected() -> Option<c_int> {
    let fd = TRACE_FD.load(Ordering::SeqCst);
    (fd >= 0 && may_not_close()).then_some(fd)
}

/// Whether the calling thread may not close the trace's descriptor: it is in the recording
/// process (not a forked child) and not the writer.
fn may_not_close() -> bool {
    TRACE_PID.load(Ordering::SeqCst) == std::process::id() && !recorder::is_writer_thread()
}

real_fn! {
    real_close: "close" => unsafe extern "C" fn(c_int) -> c_int;
    real_close_range: "close_range" => unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int;
    real_closefrom: "closefrom" => unsafe extern "C" fn(c_int);
}

/// Interposed `close`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    // The descriptor first: it costs nothing, while the process id is a system call.
    if fd >= 0 && fd == TRACE_FD.load(Ordering::SeqCst) && may_not_close() {
        return 0;
    }
    // SAFETY: forwarding.
    unsafe { real_close()(fd) }
}

/// Interposed `close_range`: the range without the trace's descriptor.
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let inside = protected()
        .and_then(|fd| c_uint::try_from(fd).ok())
        .filter(|fd| (first..=last).contains(fd));
    let Some(fd) = inside else {
        // SAFETY: forwarding.
        return unsafe { real_close_range()(first, last, flags) };
    };
    let mut rc = 0;
    if fd > first {
        // SAFETY: forwarding a sub-range of the caller's.
        rc = unsafe { real_close_range()(first, fd - 1, flags) };
    }
    if rc == 0 && fd < last {
        // SAFETY: as above.
        rc = unsafe { real_close_range()(fd + 1, last, flags) };
    }
    rc
}

/// Interposed `closefrom`: every descriptor from `low` but the trace's.
#[no_mangle]
pub unsafe extern "C" fn closefrom(low: c_int) {
    match protected().filter(|&fd| low >= 0 && fd >= low) {
        Some(fd) => {
            if fd > low {
                // SAFETY: closing the descriptors below the trace's, as the caller asked;
                // both bounds are non-negative.
                unsafe { real_close_range()(low as c_uint, (fd - 1) as c_uint, 0) };
            }
            // SAFETY: forwarding the rest.
            unsafe { real_closefrom()(fd + 1) }
        }
        // SAFETY: forwarding.
        None => unsafe { real_closefrom()(low) },
    }
}
