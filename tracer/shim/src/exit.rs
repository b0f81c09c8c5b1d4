//! Start and end of recording: the shim's constructor and destructor, SIGINT/SIGTERM, fork and
//! dlopen.
//!
//! * Normal exit (`exit`, return from `main`): the destructor records the exiting thread's end,
//!   collects every live thread's events and waits until the trace is complete.
//! * SIGINT / SIGTERM, when the program has not installed its own handler: the handler sets a
//!   flag and waits (as a crash's, below; one that arrives while the shim works on the thread
//!   waits until it is done); the writer thread notices the flag within 20 ms, collects and
//!   completes the trace, then re-raises the signal with its default action, so the program
//!   still dies of it (and its parent sees that).
//! * To the program, these signals keep their default disposition: `sigaction` and `signal`
//!   report `SIG_DFL` for the shim's handlers, and setting `SIG_DFL` installs them again
//!   (`signals.rs`), so a program that saves and restores a disposition, or a crash handler
//!   that restores the default and raises the signal again, still has its trace completed.
//!   A forked child gets the real default dispositions back.
//! * `fork`: the child has no writer thread and the trace belongs to the parent, so the child
//!   does not record. `exec` ends the recording as exit does (`exec.rs`); the shim removes
//!   `CACHESCOPE_OUT` from the environment at start, so programs started from the recorded one
//!   are not recorded.
//! * Crashes — SIGSEGV, SIGBUS, SIGFPE, SIGILL, and SIGABRT (`abort`, failed `assert`) — when
//!   the program has not installed its own handler: the faulting thread publishes its last
//!   accesses, sets the same flag and waits; the writer completes the trace and re-raises the
//!   signal with its default action, so the program dies of it as it would have (core dump
//!   included). If the writer takes more than [`FAULT_WAIT_MS`] (it may wait for a lock the
//!   faulting thread holds, when the fault is in the shim itself), the thread dies anyway.
//!   A stack overflow is handled too: each recording thread has an alternate signal stack.
//! * `_exit`, SIGKILL: the trace keeps its complete chunks but has no trailer; `cachescope trace verify` says so and `--allow-incomplete` uses
//!   what is there.

use std::sync::atomic::{AtomicU64, Ordering};

use libc::{c_char, c_int, c_void};

use crate::real::real_fn;
use crate::recorder::{self, Msg, STOP_SIGNAL};
use crate::{modules, signals, thread};

extern "C" fn init() {
    // First, so that its fork handlers run around every other one.
    crate::own_memory::register_fork();
    // The C allocator sets itself up on its first call and gives its main arena to the thread
    // that made it. The shim's own allocations no longer go through it, so that first call
    // could come from the writer thread, started below, and the program's main thread would
    // get an arena of its own, away from where its blocks lie natively. `mallinfo2` sets the
    // allocator up here, on the main thread, and allocates nothing.
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let _ = unsafe { libc::mallinfo2() };
    // The program's `sigaction` and long jumps may come from a signal handler: no `dlsym` there.
    signals::resolve();
    thread::quietly(|| {
        thread::init_exit_key();
        recorder::start();
    });
    if !recorder::enabled() {
        return;
    }
    for sig in [libc::SIGINT, libc::SIGTERM]
        .into_iter()
        .chain(FAULT_SIGNALS)
    {
        install_handler(sig);
    }
    // SAFETY: registering a plain function as the fork child handler.
    unsafe { libc::pthread_atfork(None, None, Some(in_fork_child)) };
}

extern "C" fn fini() {
    thread::end_current_thread();
    thread::quietly(recorder::finish);
}

// SAFETY (of the sections): `.init_array` / `.fini_array` entries are plain `extern "C" fn()`
// pointers that the dynamic loader calls once when the shim is loaded / unloaded.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;

extern "C" fn in_fork_child() {
    recorder::disable_in_child();
    restore_defaults_in_child();
    thread::forget_in_fork_child();
}

/// Handler of SIGINT and SIGTERM (where the program left the default): has the writer
/// complete the trace, which then ends the process with the signal. The thread that got it
/// runs no more program code meanwhile, as it would not natively (a program that restores
/// the default and raises SIGINT printed its next line under the recorder until
/// 2026-11-29); a signal that arrives while the shim works on the thread waits until it is
/// done (`signals.rs`), so that the writer never waits for a lock that thread holds.
extern "C" fn on_stop_signal(sig: c_int, info: *mut libc::siginfo_t, _: *mut c_void) {
    if thread::defer_signal(sig, info, false) {
        return;
    }
    stop_and_wait(sig);
    signals::set_default(sig);
    // SAFETY: sending the signal to ourselves (the handler consumed it).
    unsafe { libc::raise(sig) };
}

/// Has the writer complete the trace and end the process with `sig` (or the stop signal that
/// came first), and waits for that (at most [`FAULT_WAIT_MS`]); returns at once where the
/// thread does not record and no stop is under way (a forked child, the writer itself, the
/// trace already ended).
fn stop_and_wait(sig: c_int) {
    if recorder::is_writer_thread() {
        return;
    }
    if recorder::enabled() {
        thread::publish_on_fault();
        // The first stop signal is the one the process dies of.
        let _ = STOP_SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    } else if STOP_SIGNAL.load(Ordering::SeqCst) == 0 {
        return;
    }
    // Also when recording already stopped for an earlier stop signal (the writer disables
    // it when it starts collecting): a second SIGTERM must not end the process before the
    // trace is complete (two in a row lost the trailer in 3 runs of 4 in a review).
    let tick = libc::timespec {
        tv_sec: 0,
        tv_nsec: 10_000_000,
    };
    // The writer re-raises the signal for the process once the trace is complete; where
    // every other thread blocks it (a program whose only thread got it: the writer blocks
    // it), it arrives when the handler returns.
    for _ in 0..FAULT_WAIT_MS / 10 {
        if recorder::trace_ended() {
            break;
        }
        // SAFETY: sleeping with a valid timespec.
        unsafe { libc::nanosleep(&tick, std::ptr::null_mut()) };
    }
}

/// Signals that end the program where it faults (or aborts) in the thread that raised them.
const FAULT_SIGNALS: [c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];

/// How long a faulting thread waits for the writer to complete the trace (the writer then
/// ends the process; a large trace's last chunks take well under a second to write).
const FAULT_WAIT_MS: u32 = 10_000;

/// Handler of [`FAULT_SIGNALS`]: has the writer complete the trace and end the process with
/// the signal (see the module docs). Async-signal-safe: atomic stores and `nanosleep`.
extern "C" fn on_fault(sig: c_int, info: *mut libc::siginfo_t, _: *mut c_void) {
    stop_and_wait(sig);
    // The trace is complete, or not recording here, or the writer took too long: die of the
    // signal as without the shim. A fault the kernel raised happens again when the handler
    // returns; one sent by the program (`raise`, `abort`'s first raise) is sent again.
    signals::set_default(sig);
    // SAFETY: `info` is the kernel's siginfo for this signal (SA_SIGINFO), read once.
    unsafe {
        if info.is_null() || (*info).si_code <= 0 {
            libc::raise(sig);
        }
    }
}

/// Signals whose default disposition the shim replaced with its own handler (bit `n - 1`:
/// signal `n`). To the program these still have their default disposition (`signals.rs`
/// reports `SIG_DFL` and puts the shim's handler back for it), and a forked child gets the
/// real default back.
static OWN_HANDLERS: AtomicU64 = AtomicU64::new(0);

/// The handler and flags the shim installs for `sig` in place of its default disposition,
/// if it does.
pub(crate) fn own_handler(sig: c_int) -> Option<(usize, c_int)> {
    let bit = u32::try_from(sig.checked_sub(1)?)
        .ok()
        .filter(|&b| b < 64)?;
    if OWN_HANDLERS.load(Ordering::Acquire) & (1u64 << bit) == 0 {
        return None;
    }
    let flags = if FAULT_SIGNALS.contains(&sig) {
        // On the thread's alternate stack (`alt_stack.rs`) when it has one: a stack overflow
        // leaves no room on its own.
        libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART
    } else {
        libc::SA_SIGINFO | libc::SA_RESTART
    };
    Some((own_handler_address(sig)?, flags))
}

/// Installs the shim's handler for `sig` where the program left the default disposition.
fn install_handler(sig: c_int) {
    if signals::installed(sig) != Some(libc::SIG_DFL) {
        return;
    }
    let bit = 1u64 << (sig - 1);
    OWN_HANDLERS.fetch_or(bit, Ordering::AcqRel);
    let Some((handler, flags)) = own_handler(sig) else {
        return;
    };
    // The handlers are async-signal-safe.
    if !signals::install(sig, handler, flags) {
        OWN_HANDLERS.fetch_and(!bit, Ordering::AcqRel);
    }
}

/// In a forked child (which never records): the signals the shim handled get their real
/// default disposition back where the shim's handler is still installed (a child killed by
/// SIGTERM must die of it; until 2026-11-29 its handler only set a flag for a writer thread
/// the child does not have).
fn restore_defaults_in_child() {
    let own = OWN_HANDLERS.swap(0, Ordering::AcqRel);
    for sig in (1..=64).filter(|s| own & (1u64 << (s - 1)) != 0) {
        if signals::installed(sig).is_some_and(|now| own_handler_address(sig) == Some(now)) {
            signals::set_default(sig);
        }
    }
}

/// The address of the shim's handler for `sig` (whether or not it is installed).
fn own_handler_address(sig: c_int) -> Option<usize> {
    if FAULT_SIGNALS.contains(&sig) {
        Some(on_fault as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize)
    } else if [libc::SIGINT, libc::SIGTERM].contains(&sig) {
        Some(on_stop_signal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize)
    } else {
        None
    }
}

/// Ends the process the way `sig` would have, after the trace is complete.
pub(crate) fn reraise(sig: c_int) {
    signals::set_default(sig);
    // SAFETY: sending the signal to ourselves.
    unsafe { libc::kill(libc::getpid(), sig) };
}

real_fn! {
    real_dlopen: "dlopen" => unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
}

/// Interposed `dlopen`: modules loaded later are added to the trace's module map.
#[no_mangle]
pub unsafe extern "C" fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void {
    // SAFETY: forwarding.
    let h = unsafe { real_dlopen()(file, flags) };
    if !h.is_null() && recorder::enabled() {
        thread::quietly(|| {
            let new = modules::refresh_new();
            if !new.is_empty() {
                recorder::send(Msg::Modules(new));
            }
        });
    }
    h
}
