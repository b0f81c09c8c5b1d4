//! Start and end of recording: the shim's constructor and destructor, SIGINT/SIGTERM, fork and
//! dlopen.
//!
//! * Normal exit (`exit`, return from `main`): the destructor records the exiting thread's end,
//!   collects every live thread's events and waits until the trace is complete.
//! * SIGINT / SIGTERM, when the program has not installed its own handler: the handler only sets
//!   a flag (all a handler may safely do); the writer thread notices it within 20 ms, collects
//!   and completes the trace, then re-raises the signal with its default action, so the program
//!   still dies of it (and its parent sees that).
//! * `fork`: the child has no writer thread and the trace belongs to the parent, so the child
//!   does not record. `exec` ends the recording as exit does (`exec.rs`); the shim removes
//!   `CACHESCOPE_OUT` from the environment at start, so programs started from the recorded one
//!   are not recorded.
//! * `_exit`, SIGKILL, crashes: the trace keeps its complete chunks but has no trailer;
//!   `cachescope trace verify` says so and `--allow-incomplete` uses what is there.

use std::sync::atomic::Ordering;

use libc::{c_char, c_int, c_void};

use crate::real::real_fn;
use crate::recorder::{self, Msg, STOP_SIGNAL};
use crate::{modules, thread};

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
    thread::quietly(|| {
        thread::init_exit_key();
        recorder::start();
    });
    if !recorder::enabled() {
        return;
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        install_stop_handler(sig);
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
    thread::forget_in_fork_child();
}

extern "C" fn on_stop_signal(sig: c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
}

fn install_stop_handler(sig: c_int) {
    // SAFETY: reading the current disposition into a zeroed sigaction, then installing ours
    // only where the program left the default; the handler is async-signal-safe (one store).
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            return;
        }
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_stop_signal as extern "C" fn(c_int) as usize;
        libc::sigemptyset(&mut act.sa_mask);
        act.sa_flags = libc::SA_RESTART;
        libc::sigaction(sig, &act, std::ptr::null_mut());
    }
}

/// Ends the process the way `sig` would have, after the trace is complete.
pub(crate) fn reraise(sig: c_int) {
    // SAFETY: restoring the default disposition and sending the signal to ourselves.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::kill(libc::getpid(), sig);
    }
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
