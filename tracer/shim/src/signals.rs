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
//! `signal` is under `-std=c99`), `sigset`, and `siginterrupt` (whose choice `signal`
//! follows) — and installs [`trampoline`] in place of every handler the program gives, with
//! the program's mask and flags. The trampoline marks the thread as in a handler
//! (`thread::enter_handler`: nothing recorded, no state created, no lock of the shim's taken)
//! and calls the program's handler with the kernel's arguments; a signal that arrives while
//! the shim works on the thread waits until it is done ([`Deferred`]). `sigaction` reports the
//! program's handler and flags, never the trampoline, so code that saves and restores
//! handlers sees what it set; the shim's own handlers of SIGINT, SIGTERM and the crash
//! signals (`exit.rs`, installed with the real `sigaction`) are reported as `SIG_DFL`, and
//! `SIG_DFL` installs them again. A handler left by a long jump (`siglongjmp` out of a SIGSEGV
//! handler, the classic probe) resumes recording in the interposed `longjmp`, `_longjmp`,
//! `siglongjmp` and `__longjmp_chk` (which handlers a jump leaves: [`jump_target`]); one left
//! by an exception or by its thread's end resumes it too ([`Running`]).
//!
//! What the handlers do is therefore not in the trace: neither their accesses nor their
//! synchronization (a `sem_post` in a handler orders nothing for replay or the audit).
//! Handlers installed by a raw `rt_sigaction` system call are not wrapped.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use libc::{c_int, c_void, sighandler_t, siginfo_t};

use crate::real::real_fn;
use crate::{exit, thread};

real_fn! {
    real_sigaction_fn: "sigaction" =>
        unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
    real_sigprocmask: "sigprocmask" =>
        unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int;
    real_longjmp: "longjmp" => unsafe extern "C" fn(*mut c_void, c_int) -> !;
    real_siglongjmp: "siglongjmp" => unsafe extern "C" fn(*mut c_void, c_int) -> !;
    real_longjmp_chk: "__longjmp_chk" => unsafe extern "C" fn(*mut c_void, c_int) -> !;
    real_setcontext: "setcontext" => unsafe extern "C" fn(*const libc::ucontext_t) -> c_int;
}

/// The type of [`trampoline`].
type Trampoline = extern "C-unwind" fn(c_int, *mut siginfo_t, *mut c_void);

/// Signal numbers the table covers (1 to 64 on Linux).
const SIGNALS: usize = 65;

/// `SIG_HOLD` of `<signal.h>` (not in the `libc` crate): `sigset`'s "block it".
const SIG_HOLD: sighandler_t = 2;

/// The program's handler of each signal whose disposition is the trampoline.
static HANDLERS: [AtomicUsize; SIGNALS] = [const { AtomicUsize::new(0) }; SIGNALS];
/// That handler's `sa_flags` as the program gave them.
static FLAGS: [AtomicI32; SIGNALS] = [const { AtomicI32::new(0) }; SIGNALS];

/// Resolves the real functions this module calls, so that a first call from a signal handler
/// (where `dlsym` could deadlock) finds them resolved. Called once at start.
pub(crate) fn resolve() {
    let _ = real_sigaction_fn();
    let _ = real_sigprocmask();
    let _ = real_longjmp();
    let _ = real_siglongjmp();
    let _ = real_longjmp_chk();
    let _ = real_setcontext();
}

/// Restores the default disposition of `sig` (the shim's own handlers, `exit.rs`).
/// Async-signal-safe once [`resolve`] ran.
pub(crate) fn set_default(sig: c_int) {
    install(sig, libc::SIG_DFL, 0);
}

/// The disposition the kernel has for `sig` now (the trampoline where the program installed
/// a handler), if it can be read. Async-signal-safe once [`resolve`] ran.
pub(crate) fn installed(sig: c_int) -> Option<sighandler_t> {
    // SAFETY: a zeroed sigaction is a valid out-parameter.
    let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: querying into a valid out-parameter.
    (unsafe { real_sigaction(sig, std::ptr::null(), &mut now) } == 0).then_some(now.sa_sigaction)
}

/// Gives the kernel `handler` with `flags` and an empty mask for `sig` (the real `sigaction`,
/// for the shim's own dispositions); whether it took it. Async-signal-safe once [`resolve`]
/// ran.
pub(crate) fn install(sig: c_int, handler: sighandler_t, flags: c_int) -> bool {
    // SAFETY: a zeroed sigaction is valid; its mask is set by sigemptyset.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    // SAFETY: valid arguments.
    unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        real_sigaction(sig, &act, std::ptr::null_mut()) == 0
    }
}

/// The real `sigaction`.
///
/// # Safety
/// As `sigaction(2)`: `act` and `old` are null or valid.
unsafe fn real_sigaction(
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

/// Whether `handler` is the shim's own handler of `sig`, installed in place of its default.
fn own(sig: c_int, handler: sighandler_t) -> bool {
    exit::own_handler(sig).is_some_and(|(own, _)| own == handler)
}

/// Whether a disposition is a function (not `SIG_DFL`, `SIG_IGN`, `SIG_HOLD` or `SIG_ERR`).
fn is_function(h: sighandler_t) -> bool {
    ![libc::SIG_DFL, libc::SIG_IGN, SIG_HOLD, libc::SIG_ERR].contains(&h)
}

/// Signals the kernel raises in the thread that caused them (faults, traps).
pub(crate) const SYNCHRONOUS: [c_int; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
];

/// Signals that arrive while the shim works on the thread can be faults of the shim itself:
/// those run their handler at once (returning would fault again).
fn synchronous(sig: c_int, info: *const siginfo_t) -> bool {
    // SAFETY: `info` is the kernel's siginfo (SA_SIGINFO), read once.
    let from_kernel = !info.is_null() && unsafe { (*info).si_code } > 0;
    from_kernel && SYNCHRONOUS.contains(&sig)
}

/// What the kernel calls in place of every handler the program installs (see the module docs).
/// `C-unwind`: a handler may leave by an exception (C++ with `-fnon-call-exceptions`, a
/// SIGSEGV or SIGFPE turned into one) or end its thread (`pthread_exit`, a forced unwind).
extern "C-unwind" fn trampoline(sig: c_int, info: *mut siginfo_t, context: *mut c_void) {
    let Some(i) = index(sig) else { return };
    let handler = HANDLERS[i].load(Ordering::Acquire);
    if !is_function(handler) {
        return;
    }
    let flags = FLAGS[i].load(Ordering::Acquire);
    let one_shot = flags & libc::SA_RESETHAND != 0;
    if one_shot {
        own_default_after_one_shot(sig);
    }
    if !synchronous(sig, info) && thread::defer_signal(sig, info, one_shot) {
        return;
    }
    let here = 0u8;
    let running = Running {
        entry: thread::enter_handler(std::ptr::addr_of!(here) as u64),
        returned: false,
    };
    // With the kernel's three arguments whatever the handler's flags, as the kernel calls
    // every handler on x86-64 (a one-argument handler ignores the other two): the table's
    // handler and flags are two words, which a `sigaction` on another thread may change
    // between our two reads.
    // SAFETY: `handler` is a function the program installed as a signal handler.
    let f = unsafe {
        std::mem::transmute::<usize, extern "C-unwind" fn(c_int, *mut siginfo_t, *mut c_void)>(
            handler,
        )
    };
    f(sig, info, context);
    let mut running = running;
    running.returned = true;
}

/// A program handler running on this thread: when it returns, recording resumes as it found
/// the thread; when it is left by an unwind (an exception, `pthread_exit`), the code it
/// interrupted never goes on, as after a long jump out of it.
struct Running {
    entry: thread::HandlerEntry,
    returned: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.returned {
            thread::leave_handler(self.entry);
        } else {
            thread::unwind_handler(self.entry);
        }
    }
}

/// Signals that arrived while the shim worked on a thread (it was busy: numbering a lock,
/// handing a buffer to the writer, allocating), kept until it is done. A handler run there
/// could leave by a long jump, or end the thread, in the middle of the shim's work (a lock
/// of the shim's held forever, a buffer lost) — as the C library and sanitizer runtimes do,
/// the shim delivers such signals when it is done: it sends each to its thread again, with
/// the siginfo of its first arrival, as many times as it arrived (up to
/// [`REPEATS_MAX`]: a profiler's SIGPROF keeps coming while a thread waits for the writer;
/// merged into one, half of a 10 kHz timer's ticks were lost in a review). A one-shot
/// handler (`SA_RESETHAND`), which the kernel removed when it delivered the signal, is
/// installed again for its one delivery.
pub(crate) struct Deferred {
    /// Bit `n - 1`: signal `n` is kept.
    pending: AtomicU64,
    /// Bit `n - 1`: signal `n`'s handler is one-shot.
    one_shot: AtomicU64,
    /// How many times each kept signal arrived, at `n - 1`.
    arrivals: [AtomicU32; SIGNALS - 1],
    /// The siginfo of each kept signal, at `n - 1`.
    infos: UnsafeCell<[MaybeUninit<siginfo_t>; SIGNALS - 1]>,
}

/// Deliveries of one kept signal at most.
const REPEATS_MAX: u32 = 1024;

impl Deferred {
    /// Nothing kept.
    pub fn new() -> Self {
        Deferred {
            pending: AtomicU64::new(0),
            one_shot: AtomicU64::new(0),
            arrivals: [const { AtomicU32::new(0) }; SIGNALS - 1],
            infos: UnsafeCell::new([const { MaybeUninit::uninit() }; SIGNALS - 1]),
        }
    }

    /// Keeps signal `sig` (from its thread's handler, while the thread is busy); `false` when
    /// it cannot be kept (no siginfo, not a signal number).
    pub fn keep(&self, sig: c_int, info: *const siginfo_t, one_shot: bool) -> bool {
        let Some(i) = index(sig) else { return false };
        if info.is_null() {
            return false;
        }
        let bit = 1u64 << (i - 1);
        if self.pending.load(Ordering::Relaxed) & bit == 0 {
            // SAFETY: only this thread touches `infos`: here, in its handler, for a signal
            // not kept yet (so `redeliver` does not read this entry now), and in `redeliver`,
            // which runs when the thread is not busy, so no handler keeps anything then.
            unsafe {
                let entry = self.infos.get().cast::<MaybeUninit<siginfo_t>>().add(i - 1);
                entry.write(MaybeUninit::new(*info));
            }
            self.arrivals[i - 1].store(1, Ordering::Relaxed);
            if one_shot {
                self.one_shot.fetch_or(bit, Ordering::Relaxed);
            } else {
                self.one_shot.fetch_and(!bit, Ordering::Relaxed);
            }
            self.pending.fetch_or(bit, Ordering::Release);
        } else {
            let n = &self.arrivals[i - 1];
            n.store(
                n.load(Ordering::Relaxed).saturating_add(1).min(REPEATS_MAX),
                Ordering::Relaxed,
            );
        }
        true
    }

    /// Whether a signal is kept.
    #[inline(always)]
    pub fn any(&self) -> bool {
        self.pending.load(Ordering::Relaxed) != 0
    }

    /// Sends the kept signals to the calling thread again (once it is no longer busy): each
    /// arrives before this returns, unless the thread blocks it now.
    #[cold]
    pub fn redeliver(&self) {
        let mut bits = self.pending.swap(0, Ordering::Acquire);
        let one_shot = self.one_shot.swap(0, Ordering::Relaxed);
        // SAFETY: getpid and gettid have no preconditions.
        let (pid, tid) = unsafe { (libc::getpid(), libc::syscall(libc::SYS_gettid)) };
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            let bit = bits & bits.wrapping_neg();
            bits &= bits - 1;
            // SAFETY: the entry was written before its bit was set (release, acquired by the
            // swap above); see `keep`.
            let info = unsafe {
                let entry = self.infos.get().cast::<MaybeUninit<siginfo_t>>().add(i);
                entry.read().assume_init()
            };
            let sig = i as c_int + 1;
            let times = if one_shot & bit != 0 {
                rearm_one_shot(sig);
                1
            } else {
                self.arrivals[i]
                    .swap(0, Ordering::Relaxed)
                    .clamp(1, REPEATS_MAX)
            };
            for _ in 0..times {
                // SAFETY: sending a signal to the calling thread with the siginfo the kernel
                // gave; a thread may send itself any siginfo (rt_tgsigqueueinfo(2)). Where it
                // cannot, a plain signal goes instead.
                unsafe {
                    if libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid, sig, &info) != 0 {
                        libc::syscall(libc::SYS_tgkill, pid, tid, sig);
                    }
                }
            }
        }
    }
}

/// Installs the trampoline again for `sig`, whose one-shot handler the kernel removed when
/// it delivered a signal the shim kept: where the disposition is still the default (the
/// shim's handler of it, see [`own_default_after_one_shot`]), for one more delivery.
fn rearm_one_shot(sig: c_int) {
    let Some(i) = index(sig) else { return };
    if installed(sig).is_some_and(|now| now == libc::SIG_DFL || own(sig, now)) {
        let flags = FLAGS[i].load(Ordering::Acquire) | libc::SA_SIGINFO;
        install(sig, trampoline as Trampoline as usize, flags);
    }
}

/// After the kernel removed a one-shot handler (it reset the disposition to the real
/// default), of a signal the shim handles in place of its default: the shim's handler again,
/// so that the next such signal (a second SIGINT, a crash) still completes the trace.
fn own_default_after_one_shot(sig: c_int) {
    if let Some((handler, flags)) = exit::own_handler(sig) {
        if installed(sig) == Some(libc::SIG_DFL) {
            install(sig, handler, flags);
        }
    }
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
        FLAGS[i].load(Ordering::Acquire),
    );
    if let Some(a) = given.as_mut() {
        // The default disposition of a signal the shim handles is the shim's handler (which
        // completes the trace and then dies of the signal as by default).
        if let (libc::SIG_DFL, Some((own, flags))) = (a.sa_sigaction, exit::own_handler(sig)) {
            a.sa_sigaction = own;
            a.sa_flags = flags;
            // SAFETY: a valid sigset.
            unsafe { libc::sigemptyset(&mut a.sa_mask) };
        }
    }
    if let Some(a) = given
        .as_mut()
        .filter(|a| is_function(a.sa_sigaction) && !own(sig, a.sa_sigaction))
    {
        // Into the table first: a signal that arrives once the kernel has the trampoline
        // finds the new handler.
        FLAGS[i].store(a.sa_flags, Ordering::Release);
        HANDLERS[i].store(a.sa_sigaction, Ordering::Release);
        a.sa_sigaction = trampoline as Trampoline as usize;
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
        FLAGS[i].store(previous.1, Ordering::Release);
        return rc;
    }
    if !old.is_null() {
        if own(sig, was.sa_sigaction) {
            // SAFETY: a zeroed sigaction is SIG_DFL without flags, with an empty mask.
            was = unsafe { std::mem::zeroed() };
        } else if was.sa_sigaction == trampoline as Trampoline as usize {
            was.sa_sigaction = previous.0;
            if previous.1 & libc::SA_SIGINFO == 0 {
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

/// Which of glibc's one-argument installers a call stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    /// `signal`, `bsd_signal`, `ssignal`: the signal is blocked in its handler.
    Bsd,
    /// `sysv_signal`: it is not.
    SysV,
    /// `sigset`: nor is it, and `SIG_ERR` is installed as an address like any other.
    Sigset,
}

/// Installs `handler` as the one-argument handler of `sig` with `flags` and returns the
/// previous disposition, as glibc's `signal` family does.
fn install_plain(sig: c_int, handler: sighandler_t, flags: c_int, family: Family) -> sighandler_t {
    if handler == libc::SIG_ERR && family != Family::Sigset {
        // glibc's `signal` family refuses it (`sigset` installs it: the kernel takes any
        // address).
        // SAFETY: errno is the calling thread's.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return libc::SIG_ERR;
    }
    // SAFETY: a zeroed sigaction is valid; its mask is set up by sigemptyset / sigaddset.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    // SAFETY: `act.sa_mask` is a valid sigset.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    // SAFETY: as above; an invalid `sig` fails (EINVAL).
    if index(sig).is_none()
        || (family == Family::Bsd && unsafe { libc::sigaddset(&mut act.sa_mask, sig) } != 0)
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

/// Signals `siginterrupt` asked not to restart system calls (bit `n - 1`: signal `n`), which
/// `signal` then installs without `SA_RESTART` (glibc keeps the same set, out of our reach).
static INTERRUPTING: AtomicU64 = AtomicU64::new(0);

real_fn! {
    real_siginterrupt: "siginterrupt" => unsafe extern "C" fn(c_int, c_int) -> c_int;
}

/// Interposed `siginterrupt`: noted for [`signal`], then glibc's (which changes the installed
/// disposition's `SA_RESTART`, the trampoline staying in place).
#[no_mangle]
pub extern "C" fn siginterrupt(sig: c_int, interrupt: c_int) -> c_int {
    // SAFETY: forwarding.
    let rc = unsafe { real_siginterrupt()(sig, interrupt) };
    if let (0, Some(i)) = (rc, index(sig)) {
        let bit = 1u64 << (i - 1);
        if interrupt != 0 {
            INTERRUPTING.fetch_or(bit, Ordering::AcqRel);
        } else {
            INTERRUPTING.fetch_and(!bit, Ordering::AcqRel);
        }
    }
    rc
}

/// Interposed `signal` (glibc's BSD semantics: restarting unless `siginterrupt` said
/// otherwise, the signal blocked in its handler).
#[no_mangle]
pub extern "C" fn signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    let interrupting =
        index(sig).is_some_and(|i| INTERRUPTING.load(Ordering::Acquire) & (1u64 << (i - 1)) != 0);
    let flags = if interrupting { 0 } else { libc::SA_RESTART };
    install_plain(sig, handler, flags, Family::Bsd)
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
    install_plain(
        sig,
        handler,
        libc::SA_RESETHAND | libc::SA_NODEFER,
        Family::SysV,
    )
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
    let old = install_plain(sig, handler, 0, Family::Sigset);
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

/// The stack pointer a glibc `jmp_buf`/`sigjmp_buf` jumps to: its word 6 (`JB_RSP`), which
/// `setjmp` stored mangled with the thread's pointer guard (`PTR_MANGLE`: xor with the TCB's
/// `pointer_guard` at `%fs:0x30`, then rotate left by 17), as ThreadSanitizer's runtime
/// reads it too. `None` for a null buffer.
fn jump_target(env: *mut c_void) -> Option<u64> {
    if env.is_null() {
        return None;
    }
    // SAFETY: `env` is the program's jump buffer (at least the 8 words of `__jmp_buf`).
    let mangled = unsafe { env.cast::<u64>().add(6).read() };
    let guard: u64;
    // SAFETY: reads the calling thread's TCB field `pointer_guard` (glibc x86-64, offset 0x30).
    unsafe {
        core::arch::asm!(
            "mov {g}, qword ptr fs:[0x30]",
            g = out(reg) guard,
            options(nostack, readonly, preserves_flags),
        );
    }
    Some(mangled.rotate_right(17) ^ guard)
}

/// Interposed `longjmp`: a jump out of a signal handler resumes recording.
#[no_mangle]
pub unsafe extern "C" fn longjmp(env: *mut c_void, val: c_int) -> ! {
    thread::leave_handlers_by_jump(jump_target(env));
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
    thread::leave_handlers_by_jump(jump_target(env));
    // SAFETY: forwarding the caller's jump buffer.
    unsafe { real_siglongjmp()(env, val) }
}

/// Interposed `__longjmp_chk` (`longjmp` and `siglongjmp` under `_FORTIFY_SOURCE`).
#[no_mangle]
pub unsafe extern "C" fn __longjmp_chk(env: *mut c_void, val: c_int) -> ! {
    thread::leave_handlers_by_jump(jump_target(env));
    // SAFETY: forwarding the caller's jump buffer.
    unsafe { real_longjmp_chk()(env, val) }
}

/// Interposed `setcontext`: like a long jump (a handler that resumes a context saved by
/// `getcontext` leaves the handlers below that context's stack pointer).
#[no_mangle]
pub unsafe extern "C" fn setcontext(ucp: *const libc::ucontext_t) -> c_int {
    if !ucp.is_null() {
        // SAFETY: the program's context, as `setcontext` reads it.
        let sp = unsafe { (*ucp).uc_mcontext.gregs[libc::REG_RSP as usize] };
        thread::leave_handlers_by_jump(Some(sp as u64));
    }
    // SAFETY: forwarding.
    unsafe { real_setcontext()(ucp) }
}
