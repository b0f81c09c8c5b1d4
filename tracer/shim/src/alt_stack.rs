//! An alternate signal stack for each recording thread, so that the fault handler
//! (`exit.rs`) also runs when a thread overflows its own stack (deep recursion): the kernel
//! cannot push a handler's frame onto a full stack and would kill the process with the trace
//! unfinished.
//!
//! To the program the thread has no alternate stack but its own: the interposed
//! [`sigaltstack`] reports the shim's as disabled (until 2026-11-29 a program that asks
//! whether one is installed before installing its own, as stack-overflow handlers do, found
//! the shim's 64 KiB and kept it), installs the program's in its place, and puts the shim's
//! back when the program disables its own.

use std::cell::Cell;

use libc::{c_int, stack_t};

/// Bytes of each thread's alternate stack: the handler only publishes, stores a flag and
/// sleeps.
const ALT_STACK_BYTES: usize = 64 << 10;

thread_local! {
    /// The alternate stack the shim mapped for this thread (its base; 0: none).
    static OWN: Cell<usize> = const { Cell::new(0) };
}

/// The system call (glibc's `sigaltstack` is nothing more): the shim's own calls must not
/// go through the interposer below.
fn real_sigaltstack(ss: *const stack_t, old: *mut stack_t) -> c_int {
    // SAFETY: the kernel reads `ss` and writes `old` when they are not null; callers pass
    // valid pointers or null. The result is 0 or -1 (errno set), as glibc's.
    unsafe { libc::syscall(libc::SYS_sigaltstack, ss, old) as c_int }
}

/// The calling thread's alternate stack as the kernel has it.
fn current() -> Option<stack_t> {
    // SAFETY: an all-zero `stack_t` is a valid value to be overwritten.
    let mut cur: stack_t = unsafe { std::mem::zeroed() };
    (real_sigaltstack(std::ptr::null(), &mut cur) == 0).then_some(cur)
}

/// `stack_t` of the shim's stack at `base`.
fn own_stack(base: usize) -> stack_t {
    stack_t {
        ss_sp: base as *mut libc::c_void,
        ss_flags: 0,
        ss_size: ALT_STACK_BYTES,
    }
}

/// A thread's alternate signal stack, mapped by the shim.
#[derive(Debug)]
pub(crate) struct AltStack {
    base: usize,
}

/// Gives the calling thread an alternate signal stack, unless it has one (the program's).
pub(crate) fn install() -> Option<AltStack> {
    // SAFETY: sigaltstack reads into / from valid stack_t values; the mapping is fresh,
    // private and this thread's alone; on failure it is unmapped again.
    unsafe {
        if current()?.ss_flags & libc::SS_DISABLE == 0 {
            return None;
        }
        let base = libc::mmap(
            std::ptr::null_mut(),
            ALT_STACK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            return None;
        }
        if real_sigaltstack(&own_stack(base as usize), std::ptr::null_mut()) != 0 {
            libc::munmap(base, ALT_STACK_BYTES);
            return None;
        }
        OWN.with(|o| o.set(base as usize));
        Some(AltStack {
            base: base as usize,
        })
    }
}

/// Removes the calling thread's alternate stack `a`: unmaps it unless a handler runs on it
/// (then it is left), after disabling it where it is still installed.
pub(crate) fn remove(a: AltStack) {
    let Some(cur) = current() else { return };
    if cur.ss_sp as usize == a.base && cur.ss_flags & libc::SS_DISABLE == 0 {
        if cur.ss_flags & libc::SS_ONSTACK != 0 {
            return;
        }
        let off = stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        if real_sigaltstack(&off, std::ptr::null_mut()) != 0 {
            return;
        }
    }
    OWN.with(|o| o.set(0));
    // SAFETY: the mapping `install` made, no longer the thread's alternate stack (the
    // program's replaced it, or it was disabled above), and nothing runs on it.
    unsafe { libc::munmap(a.base as *mut libc::c_void, ALT_STACK_BYTES) };
}

/// Interposed `sigaltstack`: the program sees and sets its own alternate stack only (see the
/// module doc).
///
/// # Safety
/// As `sigaltstack(2)`: `ss` and `old` are null or valid.
#[no_mangle]
pub unsafe extern "C" fn sigaltstack(ss: *const stack_t, old: *mut stack_t) -> c_int {
    let own = OWN.with(Cell::get);
    if own == 0 {
        return real_sigaltstack(ss, old);
    }
    let Some(cur) = current() else { return -1 };
    let shims = cur.ss_sp as usize == own && cur.ss_flags & libc::SS_DISABLE == 0;
    if !ss.is_null() {
        // SAFETY: the caller's stack_t (read before `old` is written: they may be one).
        let wanted = unsafe { *ss };
        if wanted.ss_flags & libc::SS_DISABLE == 0 {
            if real_sigaltstack(&wanted, std::ptr::null_mut()) != 0 {
                return -1;
            }
        } else if !shims {
            // The program disables its own stack: the shim's takes its place again, for
            // the fault handler (to the program the thread has none).
            if real_sigaltstack(&wanted, std::ptr::null_mut()) != 0 {
                return -1;
            }
            real_sigaltstack(&own_stack(own), std::ptr::null_mut());
        }
        // Disabling the shim's: the program had none to disable.
    }
    if !old.is_null() {
        let reported = if shims {
            stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            }
        } else {
            cur
        };
        // SAFETY: the caller's out-pointer.
        unsafe { *old = reported };
    }
    0
}
