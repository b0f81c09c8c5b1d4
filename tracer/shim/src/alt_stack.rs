//! An alternate signal stack for each recording thread, so that the fault handler
//! (`exit.rs`) also runs when a thread overflows its own stack (deep recursion): the kernel
//! cannot push a handler's frame onto a full stack and would kill the process with the trace
//! unfinished.

/// Bytes of each thread's alternate stack: the handler only publishes, stores a flag and
/// sleeps.
const ALT_STACK_BYTES: usize = 64 << 10;

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
        let mut old: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut old) != 0
            || old.ss_flags & libc::SS_DISABLE == 0
        {
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
        let stack = libc::stack_t {
            ss_sp: base,
            ss_flags: 0,
            ss_size: ALT_STACK_BYTES,
        };
        if libc::sigaltstack(&stack, std::ptr::null_mut()) != 0 {
            libc::munmap(base, ALT_STACK_BYTES);
            return None;
        }
        Some(AltStack {
            base: base as usize,
        })
    }
}

/// Removes the calling thread's alternate stack `a` when it is still the one installed and
/// not in use (otherwise the program replaced it, or a handler runs on it: it is left).
pub(crate) fn remove(a: AltStack) {
    // SAFETY: as in `install`; the mapping is unmapped only after it stopped being the
    // thread's alternate stack.
    unsafe {
        let mut cur: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut cur) != 0
            || cur.ss_sp as usize != a.base
            || cur.ss_flags & libc::SS_ONSTACK != 0
        {
            return;
        }
        let off = libc::stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        if libc::sigaltstack(&off, std::ptr::null_mut()) == 0 {
            libc::munmap(a.base as *mut libc::c_void, ALT_STACK_BYTES);
        }
    }
}
