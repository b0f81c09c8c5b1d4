//! The program's signal handlers on a recording thread (`signals.rs` runs them): recording is
//! suspended while one runs, signals that arrive while the shim works wait for it to finish,
//! and a handler left other than by returning — a long jump, an exception, the thread's end —
//! has recording resume as it found the thread.
//!
//! Each running handler has a *frame* in two initial-exec TLS slots (read without a call that
//! could allocate): the number of handlers running, and per level the stack pointer at its
//! entry and how it found the thread. A long jump leaves the handlers whose entry lies below
//! its target on the stack (`leave_handlers_by_jump`), so a `setjmp`/`longjmp` inside a
//! handler leaves none, and one back into the interrupted code leaves them all.

use std::ptr;

use super::{has_state, set_state_slot, state_slot, QUIET};

// Per handler level below `FRAMES`: its entry's stack pointer and `FRAME_*` bits (words
// `2l` and `2l + 1`); then the number of handlers running (word `DEPTH_WORD`).
core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 3",
    ".globl cachescope_shim_handler_frames",
    ".hidden cachescope_shim_handler_frames",
    ".type cachescope_shim_handler_frames,@object",
    ".size cachescope_shim_handler_frames,264",
    "cachescope_shim_handler_frames:",
    ".zero 264",
    ".popsection",
);

/// Handler levels with a frame (nested handlers deeper than that are left by any jump).
const FRAMES: u64 = 16;
/// The word that holds the handler depth.
const DEPTH_WORD: u64 = 2 * FRAMES;
/// Frame bit: the handler found the thread without a state.
const FRAME_STATELESS: u64 = 1;
/// Frame bit: the handler found the thread's state busy.
const FRAME_BUSY: u64 = 2;

/// Word `i` (at most [`DEPTH_WORD`]) of the calling thread's handler TLS array.
fn frame_word(i: u64) -> u64 {
    let v: u64;
    // SAFETY: reads word `i` <= DEPTH_WORD of the thread's own 264-byte initial-exec TLS
    // array, through its GOT offset from %fs, as `state_slot` reads its slot.
    unsafe {
        core::arch::asm!(
            "mov {v}, qword ptr [rip + cachescope_shim_handler_frames@GOTTPOFF]",
            "mov {v}, qword ptr fs:[{v} + {i} * 8]",
            v = out(reg) v,
            i = in(reg) i.min(DEPTH_WORD),
            options(nostack, readonly, preserves_flags),
        );
    }
    v
}

/// Sets word `i` (at most [`DEPTH_WORD`]) of the calling thread's handler TLS array.
fn set_frame_word(i: u64, v: u64) {
    // SAFETY: writes word `i` <= DEPTH_WORD of the thread's own TLS array (see above).
    unsafe {
        core::arch::asm!(
            "mov {t}, qword ptr [rip + cachescope_shim_handler_frames@GOTTPOFF]",
            "mov qword ptr fs:[{t} + {i} * 8], {v}",
            t = out(reg) _,
            i = in(reg) i.min(DEPTH_WORD),
            v = in(reg) v,
            options(nostack, preserves_flags),
        );
    }
}

/// The number of program handlers running on the calling thread.
fn depth() -> u64 {
    frame_word(DEPTH_WORD)
}

/// Sets the calling thread's handler depth.
fn set_depth(v: u64) {
    set_frame_word(DEPTH_WORD, v);
}

/// How a program signal handler found its thread, to be restored when it is left.
#[derive(Clone, Copy)]
pub(crate) struct HandlerEntry {
    state: Found,
    /// The handler's level (0: it interrupted no other handler).
    level: u64,
}

/// The thread as a handler found it.
#[derive(Clone, Copy)]
enum Found {
    /// No state yet: the slot is [`QUIET`] meanwhile, so nothing creates one.
    Stateless,
    /// A state, whose `busy` flag was this.
    State(bool),
    /// The thread never records (the writer, a thread after its end, a forked child).
    Quiet,
}

impl Found {
    fn bits(self) -> u64 {
        match self {
            Found::Stateless => FRAME_STATELESS,
            Found::State(true) => FRAME_BUSY,
            Found::State(false) | Found::Quiet => 0,
        }
    }
}

/// Suspends recording on the calling thread while a program signal handler runs on it: the
/// handler may have interrupted the recorder in the middle of an event, so it records
/// nothing, creates no state and takes no lock of the shim's. `sp` is the stack pointer at its
/// entry (an address in the caller's frame). Async-signal-safe: only the thread's own TLS
/// slots and state are touched. Undo with [`leave_handler`] or [`unwind_handler`].
pub(crate) fn enter_handler(sp: u64) -> HandlerEntry {
    let p = state_slot();
    let state = if p.is_null() {
        set_state_slot(QUIET);
        Found::Stateless
    } else if has_state(p) {
        // SAFETY: see `current`; only this thread touches its state, through the raw pointer
        // (the interrupted code may hold a reference, which is not used while we run).
        Found::State(unsafe { std::mem::replace(&mut (*p).busy, true) })
    } else {
        Found::Quiet
    };
    let level = depth();
    if level < FRAMES {
        set_frame_word(2 * level, sp);
        set_frame_word(2 * level + 1, state.bits());
    }
    set_depth(level.saturating_add(1));
    HandlerEntry { state, level }
}

/// Restores `found` (the thread as a handler found it); `abandoned`: the code that handler
/// interrupted never goes on.
fn restore(found: Found, abandoned: bool) {
    let p = state_slot();
    match found {
        Found::Stateless if p == QUIET => set_state_slot(ptr::null_mut()),
        Found::State(busy) if has_state(p) => {
            // SAFETY: as in `enter_handler`.
            unsafe {
                (*p).unbusy(busy);
                // An abandoned push may have written its event without its check of the
                // room left: the next push needs its two free slots.
                if abandoned && !(*p).busy {
                    (*p).check_room();
                }
            }
        }
        _ => {}
    }
}

/// Resumes what [`enter_handler`] suspended, when the handler returns.
pub(crate) fn leave_handler(entry: HandlerEntry) {
    set_depth(entry.level);
    restore(entry.state, false);
}

/// The handler of `entry` is left by an unwind (an exception, `pthread_exit`): it and the
/// handlers it interrupted are gone.
pub(crate) fn unwind_handler(entry: HandlerEntry) {
    set_depth(entry.level);
    restore(entry.state, true);
}

/// How the handler at `level` found the thread.
fn found_at(level: u64) -> Found {
    let bits = frame_word(2 * level + 1);
    if bits & FRAME_STATELESS != 0 {
        Found::Stateless
    } else {
        Found::State(bits & FRAME_BUSY != 0)
    }
}

/// The calling thread long-jumps to the stack pointer `target` (`None`: unknown), maybe out
/// of program signal handlers (`siglongjmp` out of a SIGSEGV handler, `signals.rs`): those
/// whose entry lies below `target` on the stack are left, and recording resumes as the
/// outermost of them found the thread. A handler entered on the alternate signal stack is
/// left by a jump to anywhere else. Handlers nested deeper than the frames kept are left by
/// any jump.
pub(crate) fn leave_handlers_by_jump(target: Option<u64>) {
    let mut level = depth();
    if level == 0 {
        return;
    }
    let alt = alt_stack();
    while level > 0 {
        let below = level - 1;
        let left = below >= FRAMES
            || target.is_none_or(|t| {
                let entry = frame_word(2 * below);
                let on_alt = |a: u64| alt.is_some_and(|(lo, hi)| lo <= a && a < hi);
                (on_alt(entry) && !on_alt(t)) || t > entry
            });
        if !left {
            break;
        }
        level = below;
    }
    if level == depth() {
        return;
    }
    set_depth(level);
    let found = if level < FRAMES {
        found_at(level)
    } else {
        Found::State(true)
    };
    restore(found, true);
}

/// The calling thread's alternate signal stack, as an address range, if it has one.
fn alt_stack() -> Option<(u64, u64)> {
    // SAFETY: a zeroed stack_t is a valid out-parameter; sigaltstack only reads the state.
    let mut ss: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: querying into a valid out-parameter.
    if unsafe { libc::sigaltstack(ptr::null(), &mut ss) } != 0
        || ss.ss_flags & libc::SS_DISABLE != 0
    {
        return None;
    }
    let lo = ss.ss_sp as u64;
    Some((lo, lo.saturating_add(ss.ss_size as u64)))
}

/// The calling thread ends (`exit`, `pthread_exit`) while program handlers run on it:
/// recording resumes as the outermost found the thread, and even if that handler
/// interrupted the shim (typically a buffer hand-over waiting for the writer, whose events
/// are lost then), so that the thread's end is in the trace.
pub(crate) fn abandon_handlers_at_end() {
    if depth() == 0 {
        return;
    }
    set_depth(0);
    let found = match found_at(0) {
        Found::State(_) => Found::State(false),
        other => other,
    };
    restore(found, true);
}

/// Whether a program handler runs on the calling thread and the outermost one found the
/// thread not busy in the shim (its events up to the last complete one can be published).
pub(crate) fn in_handler_outside_shim() -> bool {
    depth() > 0 && !matches!(found_at(0), Found::State(true))
}

/// Keeps signal `sig` for later when it arrives while the shim works on the calling thread
/// (its state is busy, and not because a program handler runs): `true` when kept, and the
/// thread delivers it again once it is done (`signals.rs`, `Deferred`).
pub(crate) fn defer_signal(sig: libc::c_int, info: *const libc::siginfo_t, one_shot: bool) -> bool {
    let p = state_slot();
    if !has_state(p) || depth() != 0 {
        return false;
    }
    // SAFETY: as in `enter_handler`.
    unsafe { (*p).busy && (*p).deferred.keep(sig, info, one_shot) }
}
