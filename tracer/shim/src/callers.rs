//! The callers of an allocating function: a few return addresses further out than the
//! allocation site, so that a block allocated in library code (`std::vector`'s out-of-line
//! growth, `strdup`) or in the program's own wrapper (`xmalloc`) can still be named by the
//! program's line that asked for it.
//!
//! The stack is walked with libgcc's unwinder (`_Unwind_Backtrace`, which the shim links for
//! Rust's own panics), from the DWARF call frame information every ELF object on this
//! platform carries, so programs need no frame pointers. The walk starts in the shim; the
//! frames up to the site (the shim's, `operator new`'s) are skipped by looking for the site's
//! return address, and nothing is recorded when it is not found: a caller is never guessed.
//! The walk stops at the first frame without call frame information.
//!
//! Two kinds of frame need care:
//! * the shim's own wrappers between a runtime and the program (`GOMP_parallel`, the thread
//!   start routine) are not recorded: they are not the program's, and leaving them out names
//!   a block the same on every thread (the master thread enters a parallel region through
//!   the wrapper, the workers through the thread start);
//! * an allocation made by the unwinder itself (libgcc's `init_object` sorts the frames a JIT
//!   registered with `__register_frame_info`, under a lock it holds while calling `malloc`)
//!   gets no callers: walking the stack then would take that lock again and hang.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use cachescope_schema::event::MAX_ALLOC_CALLERS;

use crate::modules::Snapshot;

/// libgcc's opaque unwind context.
#[repr(C)]
pub(crate) struct UnwindContext {
    _private: [u8; 0],
}

/// `_URC_NO_REASON`: go on to the next frame.
pub(crate) const CONTINUE: i32 = 0;
/// `_URC_NORMAL_STOP`: the callback has what it needs.
pub(crate) const STOP: i32 = 4;

extern "C" {
    pub(crate) fn _Unwind_Backtrace(
        trace: extern "C" fn(*mut UnwindContext, *mut c_void) -> i32,
        arg: *mut c_void,
    ) -> i32;
    pub(crate) fn _Unwind_GetIP(ctx: *mut UnwindContext) -> usize;
    pub(crate) fn _Unwind_GetCFA(ctx: *mut UnwindContext) -> usize;
}

/// The shim's own code: `[start, end)`, set by [`init`]; empty before.
static SHIM_CODE: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
/// The code of the unwinder the walk uses (libgcc_s), set by [`init`]; empty before.
static UNWINDER_CODE: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

fn set(range: &[AtomicU64; 2], code: Option<(u64, u64)>) {
    let (start, end) = code.unwrap_or((0, 0));
    range[0].store(start, Ordering::Relaxed);
    range[1].store(end, Ordering::Relaxed);
}

fn contains(range: &[AtomicU64; 2], ip: u64) -> bool {
    range[0].load(Ordering::Relaxed) <= ip && ip < range[1].load(Ordering::Relaxed)
}

/// Whether `ip` is in the shim's own code.
pub(crate) fn in_shim(ip: u64) -> bool {
    contains(&SHIM_CODE, ip)
}

/// Whether `ip` is in the unwinder's code (libgcc_s).
pub(crate) fn in_unwinder(ip: u64) -> bool {
    contains(&UNWINDER_CODE, ip)
}

/// Finds the shim's and the unwinder's code in the module map (before recording starts).
pub(crate) fn init(modules: &Snapshot) {
    set(&SHIM_CODE, modules.code_range_of(step as *const () as u64));
    set(
        &UNWINDER_CODE,
        modules.code_range_of(_Unwind_Backtrace as *const () as u64),
    );
}

/// Frames searched for the site: the shim's own (unwinder, callers, allocator entry),
/// `operator new`'s, and the site's, with room to spare.
const SEARCH_FRAMES: usize = 16;

/// The walk's state, passed to [`step`] through the unwinder.
struct Walk {
    site: u64,
    searched: usize,
    found: bool,
    callers: [u64; MAX_ALLOC_CALLERS],
    len: usize,
    wanted: usize,
}

extern "C" fn step(ctx: *mut UnwindContext, arg: *mut c_void) -> i32 {
    // SAFETY: `arg` is the `Walk` that `callers_of` passed to `_Unwind_Backtrace`, alive and
    // not otherwise borrowed while the walk runs.
    let walk = unsafe { &mut *arg.cast::<Walk>() };
    // SAFETY: `ctx` is the live context the unwinder passes to its callback.
    let ip = unsafe { _Unwind_GetIP(ctx) } as u64;
    if walk.found {
        if ip == 0 {
            return STOP;
        }
        if contains(&SHIM_CODE, ip) {
            return CONTINUE;
        }
        walk.callers[walk.len] = ip;
        walk.len += 1;
        return if walk.len >= walk.wanted {
            STOP
        } else {
            CONTINUE
        };
    }
    walk.found = ip == walk.site;
    walk.searched += 1;
    if walk.searched >= SEARCH_FRAMES && !walk.found {
        STOP
    } else {
        CONTINUE
    }
}

/// The return addresses of up to `wanted` (at most [`MAX_ALLOC_CALLERS`]) frames outside the
/// one that returns to `site` (the allocation's return address), innermost first, the shim's
/// own frames left out; empty when `site` is not on the stack or is in the unwinder.
pub(crate) fn callers_of(site: u64, wanted: usize) -> impl Iterator<Item = u64> {
    let mut walk = Walk {
        site,
        searched: 0,
        found: false,
        callers: [0; MAX_ALLOC_CALLERS],
        len: 0,
        wanted: wanted.clamp(1, MAX_ALLOC_CALLERS),
    };
    if !contains(&UNWINDER_CODE, site) {
        // SAFETY: `step` matches the callback type libgcc calls and only uses `walk` through
        // `arg`; the walk reads this thread's stack, which does not change while it runs.
        unsafe { _Unwind_Backtrace(step, (&mut walk as *mut Walk).cast()) };
    }
    walk.callers.into_iter().take(walk.len)
}
