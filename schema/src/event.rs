//! The events of one thread's stream, as the rest of cachescope sees them.
//!
//! On disk events are columns (see [`crate::columns`]); in memory they are this small `Copy`
//! enum so that decode loops and simulators can work on plain slices.

use std::fmt;
use std::num::NonZeroU64;

use serde::Serialize;

/// A thread id as recorded (0 is the program's initial thread).
pub type ThreadId = u32;

/// A code position: the address of the instruction that caused an event (never 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct CodePos(pub NonZeroU64);

impl CodePos {
    /// A code position from an address; `None` for address 0 (unknown).
    pub fn new(addr: u64) -> Option<Self> {
        NonZeroU64::new(addr).map(CodePos)
    }

    /// The instruction address.
    pub fn addr(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for CodePos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// The alignment a program asked for when it allocated a heap block (`aligned_alloc`,
/// `posix_memalign`, `memalign`, `valloc`): a power of two from 1 to 2^31 bytes.
///
/// Stored as the exponent so that [`Event`] stays small and a value that is not a power of two
/// cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Alignment(u8);

impl Alignment {
    /// Largest exponent: 2^31 bytes (op codes hold 32 exponents, see [`crate::columns`]).
    pub const MAX_LOG2: u8 = 31;

    /// The alignment of `bytes`; `None` unless it is a power of two of at most 2^31.
    pub fn new(bytes: u64) -> Option<Self> {
        (bytes.is_power_of_two() && bytes.trailing_zeros() <= u32::from(Self::MAX_LOG2))
            .then(|| Alignment(bytes.trailing_zeros() as u8))
    }

    /// The alignment 2^`log2`; `None` beyond [`Alignment::MAX_LOG2`].
    pub fn from_log2(log2: u8) -> Option<Self> {
        (log2 <= Self::MAX_LOG2).then_some(Alignment(log2))
    }

    /// The exponent: the alignment is 2^`log2()` bytes.
    pub fn log2(self) -> u8 {
        self.0
    }

    /// The alignment in bytes.
    pub fn bytes(self) -> u64 {
        1 << self.0
    }
}

impl fmt::Display for Alignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bytes())
    }
}

impl Serialize for Alignment {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.bytes())
    }
}

/// What a memory access does to the addressed bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessKind {
    /// A data read.
    Load,
    /// A data write.
    Store,
    /// An atomic read-modify-write (e.g. `lock add`, compare-exchange).
    AtomicRmw,
    /// A non-atomic read then write of the same bytes by one instruction (Valgrind's `M`).
    Modify,
    /// An instruction fetch.
    Fetch,
}

impl AccessKind {
    /// All access kinds, in opcode order.
    pub const ALL: [AccessKind; 5] = [
        AccessKind::Load,
        AccessKind::Store,
        AccessKind::AtomicRmw,
        AccessKind::Modify,
        AccessKind::Fetch,
    ];

    /// Whether the access reads the addressed bytes.
    pub fn reads(self) -> bool {
        !matches!(self, AccessKind::Store)
    }

    /// Whether the access writes the addressed bytes.
    pub fn writes(self) -> bool {
        matches!(
            self,
            AccessKind::Store | AccessKind::AtomicRmw | AccessKind::Modify
        )
    }
}

/// One memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Access {
    /// What the access does.
    pub kind: AccessKind,
    /// Number of bytes accessed (at least 1).
    pub size: u32,
    /// First byte address.
    pub addr: u64,
    /// The instruction that made the access, when the recorder knows it.
    pub pc: Option<CodePos>,
}

/// One event of a thread's stream, in program order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A memory access.
    Access(Access),
    /// The thread executed `units` time units (see the header's time unit) and `flops`
    /// floating-point operations since the previous advance.
    Advance {
        /// Time units executed.
        units: u64,
        /// Floating-point operations executed (0 when unknown).
        flops: u64,
    },
    /// The thread arrived at a barrier that `participants` threads must reach.
    BarrierEnter {
        /// Barrier object (usually its address).
        barrier: u64,
        /// Number of threads the barrier waits for.
        participants: u32,
    },
    /// The thread left a barrier.
    BarrierLeave {
        /// Barrier object.
        barrier: u64,
    },
    /// The thread acquired a lock; `order` numbers the acquisitions of this lock 0, 1, 2, ...
    /// in the order they happened during recording.
    LockAcquire {
        /// Lock object (usually its address).
        lock: u64,
        /// Acquisition number of this lock.
        order: u64,
    },
    /// The thread released a lock.
    LockRelease {
        /// Lock object.
        lock: u64,
    },
    /// The thread created thread `child`.
    ThreadCreate {
        /// The new thread.
        child: ThreadId,
    },
    /// First event of a created thread: it starts no earlier than its creation.
    ThreadStart,
    /// Last event of a thread.
    ThreadExit,
    /// The thread waited for thread `child` to exit.
    ThreadJoin {
        /// The joined thread.
        child: ThreadId,
    },
    /// A parallel region (e.g. `#pragma omp parallel`) began with `team` threads.
    RegionBegin {
        /// Region id (e.g. the outlined function's address).
        region: u64,
        /// Team size.
        team: u32,
    },
    /// A parallel region ended.
    RegionEnd {
        /// Region id.
        region: u64,
    },
    /// A heap block was allocated.
    Alloc {
        /// Block start.
        addr: u64,
        /// Block size in bytes.
        size: u64,
        /// The allocation site.
        site: Option<CodePos>,
        /// The alignment the program asked for (`aligned_alloc(64, n)`: 64); `None` for
        /// allocation functions that take none (`malloc`, `calloc`, `realloc`: the
        /// allocator's default alignment, which the trace does not state).
        align: Option<Alignment>,
    },
    /// A heap block was freed.
    Free {
        /// Block start.
        addr: u64,
    },
    /// One caller of the function that made this thread's last allocation: the thread's
    /// `Alloc` is followed by one of these per recorded frame, innermost first (`site` is the
    /// return address into the caller, like [`Event::Alloc`]'s). A block allocated by a
    /// library function or a wrapper (`std::vector`'s out-of-line growth, `xmalloc`) is then
    /// still found from the program's line that asked for it.
    AllocCaller {
        /// The call site in the caller.
        site: CodePos,
    },
    /// One frame of the thread's stack, recorded where the thread hands memory of its stack
    /// to other threads (after `ThreadCreate` and `RegionBegin`: a local array that a parallel
    /// region or a new thread writes): the function returned to at `site` owns the stack
    /// bytes `[sp, cfa)` — `sp` is its stack pointer at the call, `cfa` its canonical frame
    /// address (the stack pointer before it was called). A thread's consecutive `StackFrame`
    /// events describe its stack from the inside out and replace the ones it recorded
    /// before; a recorder writes them only when they changed. The false-sharing audit names
    /// stack memory by them (the local variable, or the function whose frame it is in).
    StackFrame {
        /// The call site in the function that owns the frame.
        site: CodePos,
        /// Lowest address of the frame (the stack pointer at the call).
        sp: u64,
        /// One past the frame's highest address (its canonical frame address).
        cfa: u64,
    },
}

/// Lock objects with this bit are *order objects* the recorder made up for synchronization
/// that orders code but holds nothing (a semaphore, a condition variable's signals, OpenMP
/// tasks): each acquisition and release pair on one is a point in its order. A point is a
/// *source* (its code before it comes before later sinks: a post, a signal, a task's
/// creation or completion) or, when the thread's next lock events are a pair on the object
/// with [`ORDER_SINK_MARK`] too, a *sink* (its code after it follows the sources before it:
/// a completed wait, the start of a task, a `taskwait`). Analyses order code by these only;
/// replay treats them as any lock.
pub const ORDER_OBJECT: u64 = 1 << 61;

/// With [`ORDER_OBJECT`]: marks the point just before it on the same object as a sink.
pub const ORDER_SINK_MARK: u64 = 1 << 60;

/// Most [`Event::StackFrame`] events a recorder writes at once, and that readers keep per
/// thread: a local variable shared with other threads is usually in the function that starts
/// them, or a few callers out, and an OpenMP runtime may add a few frames of its own
/// (libomp calls the recorder from inside its fork).
pub const MAX_STACK_FRAMES: usize = 16;

/// Most [`Event::AllocCaller`] events a recorder writes after one `Alloc`, and that readers
/// keep: enough to get from a library's or a wrapper's allocation to the program's line, also
/// in an unoptimized (`-O0`) C++ build, where `std::make_shared` or `std::map::insert` are
/// seven to nine frames of library templates above the program's line.
pub const MAX_ALLOC_CALLERS: usize = 12;

/// The kind of an event without its data, for counting and filtering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// [`AccessKind::Load`].
    Load,
    /// [`AccessKind::Store`].
    Store,
    /// [`AccessKind::AtomicRmw`].
    AtomicRmw,
    /// [`AccessKind::Modify`].
    Modify,
    /// [`AccessKind::Fetch`].
    Fetch,
    /// [`Event::Advance`].
    Advance,
    /// [`Event::BarrierEnter`].
    BarrierEnter,
    /// [`Event::BarrierLeave`].
    BarrierLeave,
    /// [`Event::LockAcquire`].
    LockAcquire,
    /// [`Event::LockRelease`].
    LockRelease,
    /// [`Event::ThreadCreate`].
    ThreadCreate,
    /// [`Event::ThreadStart`].
    ThreadStart,
    /// [`Event::ThreadExit`].
    ThreadExit,
    /// [`Event::ThreadJoin`].
    ThreadJoin,
    /// [`Event::RegionBegin`].
    RegionBegin,
    /// [`Event::RegionEnd`].
    RegionEnd,
    /// [`Event::Alloc`].
    Alloc,
    /// [`Event::Free`].
    Free,
    /// [`Event::AllocCaller`].
    AllocCaller,
    /// [`Event::StackFrame`].
    StackFrame,
}

impl EventKind {
    /// Number of event kinds.
    pub const COUNT: usize = 20;

    /// All kinds, in opcode order (the index is the on-disk opcode).
    pub const ALL: [EventKind; Self::COUNT] = [
        EventKind::Load,
        EventKind::Store,
        EventKind::AtomicRmw,
        EventKind::Modify,
        EventKind::Fetch,
        EventKind::Advance,
        EventKind::BarrierEnter,
        EventKind::BarrierLeave,
        EventKind::LockAcquire,
        EventKind::LockRelease,
        EventKind::ThreadCreate,
        EventKind::ThreadStart,
        EventKind::ThreadExit,
        EventKind::ThreadJoin,
        EventKind::RegionBegin,
        EventKind::RegionEnd,
        EventKind::Alloc,
        EventKind::Free,
        EventKind::AllocCaller,
        EventKind::StackFrame,
    ];

    /// The kind's snake_case name, as used in reports.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Load => "load",
            EventKind::Store => "store",
            EventKind::AtomicRmw => "atomic_rmw",
            EventKind::Modify => "modify",
            EventKind::Fetch => "fetch",
            EventKind::Advance => "advance",
            EventKind::BarrierEnter => "barrier_enter",
            EventKind::BarrierLeave => "barrier_leave",
            EventKind::LockAcquire => "lock_acquire",
            EventKind::LockRelease => "lock_release",
            EventKind::ThreadCreate => "thread_create",
            EventKind::ThreadStart => "thread_start",
            EventKind::ThreadExit => "thread_exit",
            EventKind::ThreadJoin => "thread_join",
            EventKind::RegionBegin => "region_begin",
            EventKind::RegionEnd => "region_end",
            EventKind::Alloc => "alloc",
            EventKind::Free => "free",
            EventKind::AllocCaller => "alloc_caller",
            EventKind::StackFrame => "stack_frame",
        }
    }

    /// The on-disk opcode of this kind.
    pub fn opcode(self) -> u8 {
        self as u8
    }
}

impl Event {
    /// The event's kind.
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Access(a) => match a.kind {
                AccessKind::Load => EventKind::Load,
                AccessKind::Store => EventKind::Store,
                AccessKind::AtomicRmw => EventKind::AtomicRmw,
                AccessKind::Modify => EventKind::Modify,
                AccessKind::Fetch => EventKind::Fetch,
            },
            Event::Advance { .. } => EventKind::Advance,
            Event::BarrierEnter { .. } => EventKind::BarrierEnter,
            Event::BarrierLeave { .. } => EventKind::BarrierLeave,
            Event::LockAcquire { .. } => EventKind::LockAcquire,
            Event::LockRelease { .. } => EventKind::LockRelease,
            Event::ThreadCreate { .. } => EventKind::ThreadCreate,
            Event::ThreadStart => EventKind::ThreadStart,
            Event::ThreadExit => EventKind::ThreadExit,
            Event::ThreadJoin { .. } => EventKind::ThreadJoin,
            Event::RegionBegin { .. } => EventKind::RegionBegin,
            Event::RegionEnd { .. } => EventKind::RegionEnd,
            Event::Alloc { .. } => EventKind::Alloc,
            Event::Free { .. } => EventKind::Free,
            Event::AllocCaller { .. } => EventKind::AllocCaller,
            Event::StackFrame { .. } => EventKind::StackFrame,
        }
    }

    /// Shorthand for a load without code position.
    pub fn load(addr: u64, size: u32) -> Self {
        Event::Access(Access {
            kind: AccessKind::Load,
            size,
            addr,
            pc: None,
        })
    }

    /// Shorthand for a store without code position.
    pub fn store(addr: u64, size: u32) -> Self {
        Event::Access(Access {
            kind: AccessKind::Store,
            size,
            addr,
            pc: None,
        })
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind().name();
        match *self {
            Event::Access(a) => {
                write!(f, "{name:<13} {:#014x} size {}", a.addr, a.size)?;
                if let Some(pc) = a.pc {
                    write!(f, " pc {pc}")?;
                }
                Ok(())
            }
            Event::Advance { units, flops } => {
                write!(f, "{name:<13} {units} units")?;
                if flops > 0 {
                    write!(f, ", {flops} flops")?;
                }
                Ok(())
            }
            Event::BarrierEnter {
                barrier,
                participants,
            } => write!(f, "{name:<13} {barrier:#x} of {participants}"),
            Event::BarrierLeave { barrier } => write!(f, "{name:<13} {barrier:#x}"),
            Event::LockAcquire { lock, order } => write!(f, "{name:<13} {lock:#x} #{order}"),
            Event::LockRelease { lock } => write!(f, "{name:<13} {lock:#x}"),
            Event::ThreadCreate { child } | Event::ThreadJoin { child } => {
                write!(f, "{name:<13} thread {child}")
            }
            Event::ThreadStart | Event::ThreadExit => write!(f, "{name}"),
            Event::RegionBegin { region, team } => {
                write!(f, "{name:<13} {region:#x} team {team}")
            }
            Event::RegionEnd { region } => write!(f, "{name:<13} {region:#x}"),
            Event::Alloc {
                addr,
                size,
                site,
                align,
            } => {
                write!(f, "{name:<13} {addr:#014x} size {size}")?;
                if let Some(align) = align {
                    write!(f, " align {align}")?;
                }
                if let Some(site) = site {
                    write!(f, " site {site}")?;
                }
                Ok(())
            }
            Event::Free { addr } => write!(f, "{name:<13} {addr:#014x}"),
            Event::AllocCaller { site } => write!(f, "{name:<13} site {site}"),
            Event::StackFrame { site, sp, cfa } => {
                write!(f, "{name:<13} {sp:#014x}..{cfa:#014x} site {site}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_stays_small() {
        // Decode loops write one Event per input event; keep it at 32 bytes.
        assert!(std::mem::size_of::<Event>() <= 32);
    }

    #[test]
    fn opcodes_follow_all_order() {
        for (i, k) in EventKind::ALL.iter().enumerate() {
            assert_eq!(k.opcode() as usize, i);
        }
    }
}
