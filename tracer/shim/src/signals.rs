//! The program's signal handlers run with their thread's recording suspended.
//!
//! A handler interrupts its thread anywhere, also in the middle of the recorder writing an
//! event (an access is a few stores and a pointer bump; a full buffer is swapped under a lock).
//! Instrumented code in the handler — even `flag = 1` — then wrote into the same buffer from
//! under the interrupted write: a review's program whose handler bumped counters died of
//! SIGSEGV under the recorder, and one whose handler called `sem_post` left a trace that did
//! not replay (until 2026-11-29).
//!
//! So the shim interposes the functions that install handlers — `sigaction` (and glibc's
//! `__sigaction`), `signal` (`bsd_signal`, `ssignal`), `sysv_signal` (`__sysv_signal`, which
//! `signal` is under `-std=c99`) and `sigset` — and installs [`trampoline`] in place of every
//! handler the program gives, with the program's mask and flags. The trampoline marks the
//! thread as in a handler (`thread::enter_handler`: nothing recorded, no state created, no
//! lock of the shim's taken) and calls the program's handler with the kernel's arguments.
//! `sigaction` reports the program's handler and flags, never the trampoline, so code that
//! saves and restores handlers sees what it set. A handler left by a long jump (`siglongjmp`
//! out of a SIGSEGV handler, the classic probe) resumes recording in the interposed
//! `longjmp`, `_longjmp`, `siglongjmp` and `__longjmp_chk`.
//!
//! What the handlers do is therefore not in the trace: neither their accesses nor their
//! synchronization (a `sem_post` in a handler orders nothing for replay or the audit).
//! Handlers installed by a raw `rt_sigaction` system call are not wrapped. The shim's own
//! handlers (`exit.rs`) are installed with the real `sigaction` and are not wrapped either.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use libc::{c_int, c_void, sighandler_t, siginfo_t};

use crate::real::real_fn;
use crate::thread;

real_fn! {
    real_sigaction_fn: "sigaction" =>
        unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
    real_sigprocmask: "sigprocmask" =>
        unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int;
    real_longjmp: "longjmp" => unsafe extern "C" fn(*mut c_void, c_int) -> !;
    real_siglongjmp: "siglongjmp" => unsafe extern "C" fn(*mut c_void, c_int) -> !;
    real_longjmp_chk: "__longjmp_chk" => unsafe extern "C" fn(*mut c_void, c_int) -> !;
}

/// Signal numbers the table covers (1 to 64 on Linux).
const SIGNALS: usize = 65;

/// `SIG_HOLD` of `<signal.h>` (not in the `libc` crate): `sigset`'s "block it".
const SIG_HOLD: sighandler_t = 2;

/// The program's handler of each signal whose disposition is the trampoline.
static HANDLERS: [AtomicUsize; SIGNALS] = [const { AtomicUsize::new(0) }; SIGNALS];
/// Whether that handler takes three arguments (`SA_SIGINFO`).
static THREE_ARGS: [AtomicBool; SIGNALS] = [const { AtomicBool::new(false) }; SIGNALS];

/// Resolves the real functions this module calls, so that a first call from a signal handler
/// (where `dlsym` could deadlock) finds them resolved. Called once at start.
pub(crate) fn resolve() {
    let _ = real_sigaction_fn();
    let _ = real_sigprocmask();
    let _ = real_longjmp();
    let _ = real_siglongjmp();
    let _ = real_longjmp_chk();
}

/// Restores the default disposition of `sig` (the shim's own handlers, `exit.rs`).
/// Async-signal-safe once [`resolve`] ran.
pub(crate) fn set_default(sig: c_int) {
    // SAFETY: a zeroed sigaction with SIG_DFL (0) and an empty mask is valid.
    let act: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: installing a valid disposition.
    unsafe { real_sigaction(sig, &act, std::ptr::null_mut()) };
}

/// The real `sigaction`, for the shim's own handlers (`exit.rs`).
///
/// # Safety
/// As `sigaction(2)`: `act` and `old` are null or valid.
pub(crate) unsafe fn real_sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: forwarding the caller's arguments.
    unsafe { real_sigaction_fn()(sig, act, old) }
}

/// The table index of `sig`, if it is a signal number.
fn index(sig: c_int) -> Option<usize> {
    usize::try_from(sig)
        .ok()
        .filter(|&i| (1..SIGNALS).contains(&i))
}

/// Whether a disposition is a function (not `SIG_DFL`, `SIG_IGN`, `SIG_HOLD` or `SIG_ERR`).
fn is_function(h: sighandler_t) -> bool {
    ![libc::SIG_DFL, libc::SIG_IGN, SIG_HOLD, libc::SIG_ERR].contains(&h)
}

/// What the kernel calls in place of every handler the program installs (see the module docs).
extern "C" fn trampoline(sig: c_int, info: *mut siginfo_t, context: *mut c_void) {
    let Some(i) = index(sig) else { return };
    let handler = HANDLERS[i].load(Ordering::Acquire);
    if !is_function(handler) {
        return;
    }
    let three_args = THREE_ARGS[i].load(Ordering::Acquire);
    let entry = thread::enter_handler();
    if three_args {
        // SAFETY: the program installed `handler` with SA_SIGINFO, so it takes these three
        // arguments, which are the kernel's.
        let f = unsafe {
            std::mem::transmute::<usize, extern "C" fn(c_int, *mut siginfo_t, *mut c_void)>(handler)
        };
        f(sig, info, context);
    } else {
        // SAFETY: the program installed `handler` without SA_SIGINFO: it takes the signal.
        let f = unsafe { std::mem::transmute::<usize, extern "C" fn(c_int)>(handler) };
        f(sig);
    }
    thread::leave_handler(entry);
}

/// Interposed `sigaction`: the trampoline goes to the kernel in place of the program's handler,
/// the program's handler to the table, and `old` reports the program's previous handler.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let Some(i) = index(sig) else {
        // SAFETY: forwarding; the real function rejects the signal number.
        return unsafe { real_sigaction(sig, act, old) };
    };
    // SAFETY: `act` is null or the caller's valid sigaction.
    let mut given = (!act.is_null()).then(|| unsafe { *act });
    let previous = (
        HANDLERS[i].load(Ordering::Acquire),
        THREE_ARGS[i].load(Ordering::Acquire),
    );
    if let Some(a) = given.as_mut().filter(|a| is_function(a.sa_sigaction)) {
        // Into the table first: a signal that arrives once the kernel has the trampoline
        // finds the new handler.
        THREE_ARGS[i].store(a.sa_flags & libc::SA_SIGINFO != 0, Ordering::Release);
        HANDLERS[i].store(a.sa_sigaction, Ordering::Release);
        a.sa_sigaction = trampoline as extern "C" fn(c_int, *mut siginfo_t, *mut c_void) as usize;
        a.sa_flags |= libc::SA_SIGINFO;
    }
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut was: libc::sigaction = unsafe { std::mem::zeroed() };
    let given_ptr = given
        .as_ref()
        .map_or(std::ptr::null(), |a| a as *const libc::sigaction);
    // SAFETY: forwarding a valid (or null) sigaction and a valid out-parameter.
    let rc = unsafe { real_sigaction(sig, given_ptr, &mut was) };
    if rc != 0 {
        HANDLERS[i].store(previous.0, Ordering::Release);
        THREE_ARGS[i].store(previous.1, Ordering::Release);
        return rc;
    }
    if !old.is_null() {
        if was.sa_sigaction
            == trampoline as extern "C" fn(c_int, *mut siginfo_t, *mut c_void) as usize
        {
            was.sa_sigaction = previous.0;
            if !previous.1 {
                was.sa_flags &= !libc::SA_SIGINFO;
            }
        }
        // SAFETY: `old` is the caller's valid out-parameter.
        unsafe { *old = was };
    }
    0
}

/// Interposed `__sigaction` (glibc's other name of `sigaction`).
#[no_mangle]
pub unsafe extern "C" fn __sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: same contract.
    unsafe { sigaction(sig, act, old) }
}

/// Installs `handler` as the one-argument handler of `sig` with `flags` (blocking `sig` in the
/// handler unless told not to) and returns the previous disposition, as glibc's `signal`
/// family does.
fn install_plain(sig: c_int, handler: sighandler_t, flags: c_int, mask_self: bool) -> sighandler_t {
    // SAFETY: a zeroed sigaction is valid; its mask is set up by sigemptyset / sigaddset.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    // SAFETY: `act.sa_mask` is a valid sigset.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    // SAFETY: as above; an invalid `sig` fails (EINVAL).
    if index(sig).is_none() || (mask_self && unsafe { libc::sigaddset(&mut act.sa_mask, sig) } != 0)
    {
        // SAFETY: errno is the calling thread's.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return libc::SIG_ERR;
    }
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid arguments.
    if unsafe { sigaction(sig, &act, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

/// Interposed `signal` (glibc's BSD semantics: restarting, the signal blocked in its handler).
#[no_mangle]
pub extern "C" fn signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    install_plain(sig, handler, libc::SA_RESTART, true)
}

/// Interposed `bsd_signal` (= `signal`).
#[no_mangle]
pub extern "C" fn bsd_signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    signal(sig, handler)
}

/// Interposed `ssignal` (= `signal` in glibc).
#[no_mangle]
pub extern "C" fn ssignal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    signal(sig, handler)
}

/// Interposed `sysv_signal`: one-shot, not blocked in its handler, not restarting.
#[no_mangle]
pub extern "C" fn sysv_signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    install_plain(sig, handler, libc::SA_RESETHAND | libc::SA_NODEFER, false)
}

/// Interposed `__sysv_signal` (what `signal` calls itself under strict ISO C, `-std=c99`).
#[no_mangle]
pub extern "C" fn __sysv_signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    sysv_signal(sig, handler)
}

/// Interposed `sigset` (System V): `SIG_HOLD` blocks the signal, anything else installs it
/// and unblocks the signal; returns `SIG_HOLD` if it was blocked, else the previous
/// disposition (glibc's algorithm, with the interposed `sigaction`).
#[no_mangle]
pub extern "C" fn sigset(sig: c_int, handler: sighandler_t) -> sighandler_t {
    // SAFETY: valid sigsets; sigaddset rejects an invalid `sig`.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut was_blocked: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if index(sig).is_none()
        || unsafe { libc::sigemptyset(&mut set) } != 0
        || unsafe { libc::sigaddset(&mut set, sig) } != 0
    {
        // SAFETY: errno is the calling thread's.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return libc::SIG_ERR;
    }
    if handler == SIG_HOLD {
        // SAFETY: valid sigsets.
        if unsafe { real_sigprocmask()(libc::SIG_BLOCK, &set, &mut was_blocked) } != 0 {
            return libc::SIG_ERR;
        }
        // SAFETY: a valid sigset.
        if unsafe { libc::sigismember(&was_blocked, sig) } == 1 {
            return SIG_HOLD;
        }
        // SAFETY: a zeroed sigaction is a valid out-parameter.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: querying into a valid out-parameter.
        if unsafe { sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            return libc::SIG_ERR;
        }
        return old.sa_sigaction;
    }
    let old = install_plain(sig, handler, 0, false);
    if old == libc::SIG_ERR {
        return old;
    }
    // SAFETY: valid sigsets.
    if unsafe { real_sigprocmask()(libc::SIG_UNBLOCK, &set, &mut was_blocked) } != 0 {
        return libc::SIG_ERR;
    }
    // SAFETY: a valid sigset.
    if unsafe { libc::sigismember(&was_blocked, sig) } == 1 {
        SIG_HOLD
    } else {
        old
    }
}

/// Interposed `longjmp`: a jump out of a signal handler resumes recording.
#[no_mangle]
pub unsafe extern "C" fn longjmp(env: *mut c_void, val: c_int) -> ! {
    thread::leave_handlers_by_jump();
    // SAFETY: forwarding the caller's jump buffer.
    unsafe { real_longjmp()(env, val) }
}

/// Interposed `_longjmp` (= `longjmp` in glibc).
#[no_mangle]
pub unsafe extern "C" fn _longjmp(env: *mut c_void, val: c_int) -> ! {
    // SAFETY: same contract.
    unsafe { longjmp(env, val) }
}

/// Interposed `siglongjmp`.
#[no_mangle]
pub unsafe extern "C" fn siglongjmp(env: *mut c_void, val: c_int) -> ! {
    thread::leave_handlers_by_jump();
    // SAFETY: forwarding the caller's jump buffer.
    unsafe { real_siglongjmp()(env, val) }
}

/// Interposed `__longjmp_chk` (`longjmp` and `siglongjmp` under `_FORTIFY_SOURCE`).
#[no_mangle]
pub unsafe extern "C" fn __longjmp_chk(env: *mut c_void, val: c_int) -> ! {
    thread::leave_handlers_by_jump();
    // SAFETY: forwarding the caller's jump buffer.
    unsafe { real_longjmp_chk()(env, val) }
}
