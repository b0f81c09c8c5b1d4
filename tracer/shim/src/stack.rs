//! The frames of a thread's stack where it hands stack memory to other threads: before it
//! forks a parallel region (`gomp.rs`, `ompt.rs`) and before it creates a thread
//! (`pthread.rs`). A local array that the region's or the new thread's code writes (`double
//! partial[NT]` in `main`, one element per thread) lives in one of these frames; the trace's
//! `StackFrame` events let the false-sharing audit name it (the local variable, from the
//! program's DWARF, or at least the function whose frame it is in) instead of an address.
//!
//! Each frame is the function returned to at its return address, with the bytes
//! `[sp, cfa)`: the canonical frame address of the frame inside it, which is its stack
//! pointer at the call, and its own (both from the unwinder, so no frame pointers are
//! needed; the outermost frame the walk reaches has no known top and is left out). The
//! shim's own frames and the unwinder's are passed over. A thread writes
//! its frames only when they differ from the ones it wrote last: a region forked from the same
//! place in a loop costs one walk each time, but the trace only one set of events.

use std::ffi::c_void;

use cachescope_schema::event::MAX_STACK_FRAMES;
use cachescope_schema::{CodePos, Event};

use crate::callers::{
    _Unwind_Backtrace, _Unwind_GetCFA, _Unwind_GetIP, in_shim, in_unwinder, UnwindContext,
    CONTINUE, STOP,
};
use crate::thread::ThreadState;

/// One recorded frame: return address into the function, stack pointer at the call, CFA.
pub(crate) type Frame = (u64, u64, u64);

/// Frames before the first one recorded: the unwinder's and the shim's (walk, entry point,
/// wrapper), with room to spare. A walk that finds no frame outside them records nothing.
const SKIP_LIMIT: usize = 16;

/// The walk's state, passed to [`step`] through the unwinder.
struct Walk {
    frames: [Frame; MAX_STACK_FRAMES],
    len: usize,
    skipped: usize,
    /// A frame of the program's waiting for its top: return address and stack pointer.
    pending: Option<(u64, u64)>,
}

extern "C" fn step(ctx: *mut UnwindContext, arg: *mut c_void) -> i32 {
    // SAFETY: `arg` is the `Walk` that `walk_frames` passed to `_Unwind_Backtrace`, alive and
    // not otherwise borrowed while the walk runs.
    let walk = unsafe { &mut *arg.cast::<Walk>() };
    // SAFETY: `ctx` is the live context the unwinder passes to its callback.
    let ip = unsafe { _Unwind_GetIP(ctx) } as u64;
    // The context of the frame returned to at `ip` still has the CFA of the frame inside it
    // (libgcc moves the CFA on after the callback): the stack pointer of the function at
    // `ip` at its call, and so the top of the frame before it.
    // SAFETY: as above.
    let sp = unsafe { _Unwind_GetCFA(ctx) } as u64;
    if let Some((pending_ip, pending_sp)) = walk.pending.take() {
        walk.frames[walk.len] = (pending_ip, pending_sp, sp);
        walk.len += 1;
        if walk.len >= MAX_STACK_FRAMES {
            return STOP;
        }
    }
    if ip == 0 {
        return STOP;
    }
    if in_shim(ip) || in_unwinder(ip) {
        walk.skipped += 1;
        return if walk.len == 0 && walk.skipped >= SKIP_LIMIT {
            STOP
        } else {
            CONTINUE
        };
    }
    walk.pending = Some((ip, sp));
    CONTINUE
}

/// The calling thread's frames outside the shim, innermost first.
fn walk_frames() -> ([Frame; MAX_STACK_FRAMES], usize) {
    let mut walk = Walk {
        frames: [(0, 0, 0); MAX_STACK_FRAMES],
        len: 0,
        skipped: 0,
        pending: None,
    };
    // SAFETY: `step` matches the callback type libgcc calls and only uses `walk` through
    // `arg`; the walk reads this thread's stack, which does not change while it runs.
    unsafe { _Unwind_Backtrace(step, (&mut walk as *mut Walk).cast()) };
    (walk.frames, walk.len)
}

/// Records the calling thread's stack frames as `StackFrame` events, unless they are the ones
/// it recorded last. Quietly: the unwinder may allocate the first time it looks at a module.
pub(crate) fn record(st: &mut ThreadState) {
    st.quiet(|st| {
        let (frames, len) = walk_frames();
        let frames = &frames[..len];
        if frames == st.stack_frames.as_slice() {
            return;
        }
        st.stack_frames.clear();
        st.stack_frames.extend_from_slice(frames);
        for &(ip, sp, cfa) in frames {
            if let Some(site) = CodePos::new(ip.wrapping_sub(1)) {
                st.push(Event::StackFrame { site, sp, cfa });
            }
        }
    });
}
