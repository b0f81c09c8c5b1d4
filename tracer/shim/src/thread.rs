//! Per-thread recording state: the event buffer, pending time, the re-entrancy guard.
//!
//! The hot path (one access) is: one relaxed load of the global enable flag, one initial-exec
//! TLS load (two instructions, no call), the stores of the pending `Advance` and the access into
//! a preallocated buffer, and one capacity check. Nothing allocates until a buffer is full; then
//! it goes to the writer thread and a recycled buffer takes its place.
//!
//! At exit (or on SIGINT/SIGTERM) another thread collects the committed events of every thread
//! still alive, e.g. OpenMP pool threads that never exit: the owner only ever writes slots
//! beyond the committed length, and buffer swaps happen under a per-thread lock, so the
//! collector reads a stable prefix.
//!
//! The committed length is published (a release store) by every event except accesses and
//! `Advance`s: synchronization, thread, region and heap events, and buffer swaps (which hand
//! everything before them to the writer). A thread's own end (exit destructor, or the thread
//! that calls `exit`) sends all its events. So a thread that is idle at exit or at a stop signal
//! (an OpenMP pool thread waiting for work: its last events are barrier/region events) loses
//! nothing, while a thread still computing then loses the accesses (and time) since its last
//! committed event.
//!
//! The per-thread state pointer lives in an initial-exec TLS slot (`.tbss`, defined below in
//! assembly, read `%fs`-relative through its GOT offset) instead of a Rust `thread_local!`,
//! which in a shared library costs a `__tls_get_addr` call per access. Initial-exec TLS needs
//! the shim to be loaded at program start (it is: a `DT_NEEDED` dependency of every program
//! built with `cachescope cc`, and `LD_PRELOAD`ed by `cachescope record`); **the shim must not
//! be `dlopen`ed** (glibc may refuse: "cannot allocate memory in static TLS block").

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

use cachescope_schema::{Access, AccessKind, CodePos, Event, ThreadId};

use crate::recorder::{self, lock, Msg, BUFFER_EVENTS};

/// Flag: this thread belongs to the shim (the writer) and never records.
const INTERNAL: u8 = 1;
/// Flag: this thread is creating its state; allocations it makes are not recorded.
const CREATING: u8 = 2;

/// The slow-path thread-local flags (the state pointer itself is in [`state_slot`]).
struct Tls {
    flags: Cell<u8>,
    /// The id `pthread_create` chose for this thread, or `u32::MAX`.
    assigned: Cell<u32>,
}

thread_local! {
    static TLS: Tls = const {
        Tls {
            flags: Cell::new(0),
            assigned: Cell::new(u32::MAX),
        }
    };
}

// The calling thread's `*mut ThreadState` (null until `create`; `QUIET` in the writer thread
// and after `retire`): an 8-byte initial-exec TLS variable. Hidden, so it is resolved inside
// the shim and exported to no one; zero-initialized in every new thread (`.tbss`).
core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 3",
    ".globl cachescope_shim_state_slot",
    ".hidden cachescope_shim_state_slot",
    ".type cachescope_shim_state_slot,@object",
    ".size cachescope_shim_state_slot,8",
    "cachescope_shim_state_slot:",
    ".zero 8",
    ".popsection",
);

/// The calling thread's state pointer (see the `global_asm!` above).
#[inline(always)]
fn state_slot() -> *mut ThreadState {
    let p: *mut ThreadState;
    // SAFETY: reads the calling thread's own 8-byte TLS slot: its offset from the thread
    // pointer (%fs) comes from the GOT entry the linker made for the initial-exec relocation;
    // the slot exists in every thread of the process since the shim is loaded at start.
    // Not `pure`: `create`/`retire` change it between calls.
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr [rip + cachescope_shim_state_slot@GOTTPOFF]",
            "mov {p}, qword ptr fs:[{p}]",
            p = out(reg) p,
            options(nostack, readonly, preserves_flags),
        );
    }
    p
}

/// The state slot's value for a thread that never records again (the writer thread, and a
/// thread after its end): not null, so that [`existing`] answers `Quiet` at once instead of
/// taking the state-creation path. Never dereferenced (see [`has_state`]). The writer thread
/// calls the interposed `memcpy` for every small copy its encoder makes (one per varint on
/// irregular address streams); through the creation path (a `__tls_get_addr` call and the
/// flag checks, twice per copy) that was about 40 % of its time on such streams.
const QUIET: *mut ThreadState = ptr::without_provenance_mut(1);

/// Whether the slot value `p` is a state (neither null nor [`QUIET`]).
#[inline(always)]
fn has_state(p: *mut ThreadState) -> bool {
    p.addr() > QUIET.addr()
}

/// Sets the calling thread's state pointer.
fn set_state_slot(p: *mut ThreadState) {
    // SAFETY: writes the calling thread's own TLS slot (see `state_slot`); nothing else
    // refers to that memory.
    unsafe {
        core::arch::asm!(
            "mov {t}, qword ptr [rip + cachescope_shim_state_slot@GOTTPOFF]",
            "mov qword ptr fs:[{t}], {p}",
            t = out(reg) _,
            p = in(reg) p,
            options(nostack, preserves_flags),
        );
    }
}

mod handlers;
pub(crate) use handlers::{
    defer_signal, enter_handler, leave_handler, leave_handlers_by_jump, unwind_handler,
    HandlerEntry,
};

/// One OpenMP team this thread belongs to (innermost last).
#[derive(Clone, Copy, Default)]
pub(crate) struct Team {
    /// Synthetic barrier object shared by the team's members.
    pub barrier: u64,
    /// Number of threads in the team.
    pub size: u32,
}

/// Cached cost of one basic block (direct-mapped by code position).
#[derive(Clone, Copy, Default)]
pub(crate) struct CachedBlock {
    pub pc: u64,
    pub units: u32,
    pub flops: u32,
}

/// Entries of the per-thread block cache.
pub(crate) const BLOCK_CACHE: usize = 4096;

/// Recording state of one thread.
///
/// `#[repr(C)]` keeps the fields of the hot path together at the start.
#[repr(C)]
pub(crate) struct ThreadState {
    /// Next free slot of the current buffer; written by the owner only.
    cur: *mut Event,
    /// `ptr + BUFFER_EVENTS - 1`. Between pushes `cur < limit`, so at least two slots (a push's
    /// `Advance` and its event) are free; a push that reaches `limit` swaps the buffer.
    limit: *mut Event,
    pending_units: u64,
    pending_flops: u64,
    /// Set while the shim itself runs on this thread (nothing is recorded then).
    pub busy: bool,
    /// Recorded thread id.
    pub tid: ThreadId,
    /// Start of the current buffer (capacity [`BUFFER_EVENTS`]); written by the owner only.
    ptr: *mut Event,
    /// The current buffer, for the collector.
    shared_ptr: AtomicPtr<Event>,
    /// Events the collector may read (published by [`ThreadState::push`], not by accesses).
    committed: AtomicUsize,
    /// Held while the owner swaps buffers or the collector reads.
    swap: Mutex<SwapState>,
    /// Enclosing OpenMP teams.
    pub teams: Vec<Team>,
    /// The stack frames this thread recorded last (`stack.rs`).
    pub stack_frames: Vec<crate::stack::Frame>,
    /// Set while the thread forks a parallel region: the OpenMP runtime's own thread
    /// creations then record no frames (the region's frames, recorded at the fork, stay).
    pub forking: bool,
    /// Block costs seen by this thread ([`BLOCK_CACHE`] entries).
    pub blocks: Box<[CachedBlock]>,
    /// Set between the thread's `BarrierEnter` and `BarrierLeave`: it waits in a barrier,
    /// and mutexes it takes meanwhile are the runtime's (LLVM libomp suspends a waiting
    /// thread on its own mutex and condition variable), not the program's synchronization.
    pub in_barrier: bool,
    /// Set while the thread runs an explicit OpenMP task (`ompt.rs`): in a barrier too, its
    /// mutexes and heap calls are then the program's (see [`ThreadState::waiting`]).
    pub in_task: bool,
    /// The id of the OpenMP task the thread runs (a region member's implicit task or an
    /// explicit one), the parent of the tasks it creates and the task its `taskwait` waits
    /// in (`gomp_tasks.rs`; `ompt.rs`, where ids are the tasks' `ompt_data_t` addresses).
    pub task: u64,
    /// The innermost `taskgroup` the tasks this thread creates now belong to (one the
    /// running task opened, or the one it belongs to itself; 0: none), and the groups it
    /// replaced, innermost last (`task_order.rs`).
    pub group: u64,
    pub outer_groups: Vec<u64>,
    /// Mutexes taken while [`ThreadState::waiting`] and not recorded: their releases are
    /// not recorded either.
    pub unrecorded_locks: Vec<u64>,
    /// OpenMP nest locks this thread holds, with its nesting depth of each (`gomp.rs`).
    pub nest_locks: Vec<(u64, u32)>,
    /// The join barriers (object, region id) this thread entered and has not been seen to
    /// leave, innermost last (`ompt.rs`): explicit tasks the thread runs there are recorded
    /// inside the episode (and one of them may fork a region, whose join nests). One still
    /// open when the thread or the program ends stays open in the trace (the thread arrived
    /// and ended): a leave written then could claim a barrier the team's other members never
    /// reached (`exit` inside a parallel region).
    pending_joins: Vec<(u64, u64)>,
    /// The alternate signal stack the shim gave this thread (`alt_stack.rs`).
    alt_stack: Option<crate::alt_stack::AltStack>,
    /// Signals that arrived while the thread was busy, delivered when it is no longer.
    deferred: crate::signals::Deferred,
}

#[derive(Default)]
struct SwapState {
    /// The collector took this thread's events; nothing more goes to the writer.
    collected: bool,
}

/// Buffers that threads took from their state and are still handing to the writer (counted
/// under the thread's swap lock before it releases it, uncounted once the writer's queue has
/// them): the collector waits for these before it writes the thread's current buffer, which
/// holds later events.
static HANDOVERS: AtomicUsize = AtomicUsize::new(0);

/// How many buffers threads are handing to the writer right now (see [`HANDOVERS`]). Once the
/// collector has taken every thread's events ([`collect_all`]) no new hand-over begins, so
/// this only falls.
pub(crate) fn handovers() -> usize {
    HANDOVERS.load(Ordering::SeqCst)
}

// Pointers to live thread states, for the collector.
struct Registry(Vec<usize>);
static REGISTRY: Mutex<Registry> = Mutex::new(Registry(Vec::new()));
static EXIT_KEY: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Creates the pthread key whose destructor ends each thread's stream. Called once at start.
pub(crate) fn init_exit_key() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer; the destructor has the signature pthread expects.
    let rc = unsafe { libc::pthread_key_create(&mut key, Some(on_thread_exit)) };
    if rc == 0 {
        EXIT_KEY.store(key as usize, Ordering::SeqCst);
    }
}

/// In a forked child: the forking thread (the child's only one) never records again and never
/// hands its state to the writer. The parent's other threads may have held the registry's or
/// the channel's lock at the fork, and no writer thread exists here, so ending the stream at
/// the child's `exit` would wait forever.
pub(crate) fn forget_in_fork_child() {
    set_state_slot(QUIET);
}

/// Whether the calling thread is doing the shim's work (or is the shim's own thread).
pub(crate) fn internal() -> bool {
    TLS.with(|t| t.flags.get() & INTERNAL != 0)
}

/// Marks the calling thread as the shim's own: it never records.
pub(crate) fn mark_internal() {
    TLS.with(|t| t.flags.set(t.flags.get() | INTERNAL));
    if state_slot().is_null() {
        set_state_slot(QUIET);
    }
}

/// Sets the id the calling thread records under (before it records anything).
pub(crate) fn assign_tid(tid: ThreadId) {
    TLS.with(|t| t.assigned.set(tid));
}

/// The calling thread's state, if it records now (not inside the shim, recording enabled).
#[inline(always)]
pub(crate) fn current() -> Option<&'static mut ThreadState> {
    if !recorder::enabled() {
        return None;
    }
    let p = state_slot();
    if !has_state(p) {
        return if p.is_null() { create() } else { None };
    }
    // SAFETY: `p` was created by `create` for this thread and is freed only by `retire` on
    // this thread (from its exit destructor or the shim's fini), which first sets the TLS
    // slot to `QUIET`; only this thread uses it. `busy` is read through the raw pointer, so
    // no second `&mut` exists while a re-entrant call finds the state busy.
    if unsafe { (*p).busy } {
        return None;
    }
    // SAFETY: as above; not busy, so no other reference to the state is live.
    Some(unsafe { &mut *p })
}

/// [`current`] without the state's creation, so that callers can outline that rare case
/// and keep their hot path free of saved registers.
pub(crate) enum Existing {
    /// The thread records now.
    Recording(&'static mut ThreadState),
    /// Recording is off, or the shim works on this thread: record nothing.
    Quiet,
    /// The thread has no state (yet): call [`current`], which decides and creates it.
    NoState,
}

/// See [`Existing`].
#[inline(always)]
pub(crate) fn existing() -> Existing {
    if !recorder::enabled() {
        return Existing::Quiet;
    }
    let p = state_slot();
    if !has_state(p) {
        return if p.is_null() {
            Existing::NoState
        } else {
            Existing::Quiet
        };
    }
    // SAFETY: as in `current`.
    if unsafe { (*p).busy } {
        return Existing::Quiet;
    }
    // SAFETY: as in `current`.
    Existing::Recording(unsafe { &mut *p })
}

/// Records an access of `size` bytes at `addr` by the instruction at `pc` (0: unknown) on the
/// calling thread if it records now.
#[inline(always)]
pub(crate) fn record_access(kind: AccessKind, size: u32, addr: u64, pc: u64) {
    match existing() {
        Existing::Recording(st) => st.push_access(kind, size, addr, pc),
        Existing::Quiet => {}
        Existing::NoState => record_access_slow(kind, size, addr, pc),
    }
}

#[cold]
#[inline(never)]
fn record_access_slow(kind: AccessKind, size: u32, addr: u64, pc: u64) {
    if let Some(st) = current() {
        st.push_access(kind, size, addr, pc);
    }
}

#[cold]
fn create() -> Option<&'static mut ThreadState> {
    let (flags, assigned) = TLS.with(|t| (t.flags.get(), t.assigned.get()));
    if flags & (INTERNAL | CREATING) != 0 {
        return None;
    }
    if recorder::is_writer_thread() {
        mark_internal();
        return None;
    }
    TLS.with(|t| t.flags.set(flags | CREATING));
    let tid = if assigned == u32::MAX {
        recorder::next_tid()
    } else {
        assigned
    };
    let p = fresh_buffer();
    let st = Box::new(ThreadState {
        cur: p,
        limit: buffer_limit(p),
        pending_units: 0,
        pending_flops: 0,
        busy: false,
        tid,
        ptr: p,
        shared_ptr: AtomicPtr::new(p),
        committed: AtomicUsize::new(0),
        swap: Mutex::new(SwapState::default()),
        teams: Vec::with_capacity(8),
        stack_frames: Vec::with_capacity(cachescope_schema::event::MAX_STACK_FRAMES),
        forking: false,
        blocks: vec![CachedBlock::default(); BLOCK_CACHE].into_boxed_slice(),
        in_barrier: false,
        in_task: false,
        task: 0,
        group: 0,
        outer_groups: Vec::new(),
        unrecorded_locks: Vec::with_capacity(4),
        nest_locks: Vec::new(),
        pending_joins: Vec::with_capacity(4),
        alt_stack: crate::alt_stack::install(),
        deferred: crate::signals::Deferred::new(),
    });
    let raw = Box::into_raw(st);
    lock(&REGISTRY).0.push(raw as usize);
    let key = EXIT_KEY.load(Ordering::SeqCst);
    if key != usize::MAX {
        // SAFETY: the key was created by `init_exit_key`; the value is this thread's state,
        // handed back to `on_thread_exit` when the thread ends.
        unsafe { libc::pthread_setspecific(key as libc::pthread_key_t, raw.cast()) };
    }
    set_state_slot(raw);
    TLS.with(|t| t.flags.set(flags));
    // SAFETY: just created for this thread, see `current`.
    Some(unsafe { &mut *raw })
}

/// An empty buffer from the pool, as a raw pointer to its [`BUFFER_EVENTS`] slots (turned
/// back into a `Vec` by [`ThreadState::take_events`]).
fn fresh_buffer() -> *mut Event {
    std::mem::ManuallyDrop::new(recorder::take_buffer()).as_mut_ptr()
}

/// The swap threshold of the buffer at `p`: its last slot.
fn buffer_limit(p: *mut Event) -> *mut Event {
    // SAFETY: `p` is the start of a buffer of BUFFER_EVENTS slots: its last slot is in bounds.
    unsafe { p.add(BUFFER_EVENTS - 1) }
}

impl ThreadState {
    /// Records `event`, preceded by the time the thread executed since its last event, and
    /// publishes both to the collector (for everything but accesses; see the module doc).
    #[inline(always)]
    pub fn push(&mut self, event: Event) {
        match event {
            Event::BarrierEnter { .. } => self.in_barrier = true,
            Event::BarrierLeave { .. } => self.in_barrier = false,
            _ => {}
        }
        // SAFETY: see `put`; this thread owns the state.
        let n = unsafe { self.put(event) };
        self.committed.store(n, Ordering::Release);
        self.check_room();
    }

    /// Whether the thread waits in a barrier and runs none of the program's tasks there: its
    /// mutexes and heap calls are then the runtime's.
    pub fn waiting(&self) -> bool {
        self.in_barrier && !self.in_task
    }

    /// Notes that the thread entered the join barrier `barrier` of region `region` (after
    /// recording the enter), to be left by [`ThreadState::close_join`].
    pub fn enter_join(&mut self, barrier: u64, region: u64) {
        self.quiet(|st| st.pending_joins.push((barrier, region)));
    }

    /// The innermost join barrier and region the thread entered and has not left, if any.
    pub fn open_join(&self) -> Option<(u64, u64)> {
        self.pending_joins.last().copied()
    }

    /// The innermost join barrier and region the thread entered and has not left, if any; it
    /// is left now.
    pub fn close_join(&mut self) -> Option<(u64, u64)> {
        self.pending_joins.pop()
    }

    /// Publishes the events recorded so far, accesses included (as [`ThreadState::push`]
    /// does): for a thread about to wait where no event of its own comes (an OpenMP worker
    /// done with a task in a join barrier, which may be the program's last).
    pub fn publish(&mut self) {
        self.committed.store(self.len(), Ordering::Release);
    }

    /// Records an access (see [`record_access`]), preceded by the pending time, without
    /// publishing it (the hot path: the next `push`, buffer swap or the thread's end does).
    #[inline(always)]
    pub fn push_access(&mut self, kind: AccessKind, size: u32, addr: u64, pc: u64) {
        let access = Access {
            kind,
            size,
            addr,
            pc: CodePos::new(pc),
        };
        // SAFETY: see `put`.
        unsafe { self.put(Event::Access(access)) };
        self.check_room();
    }

    /// Writes the pending `Advance` (if any) and `event` into the free slots; returns the
    /// number of events now in the buffer.
    ///
    /// # Safety
    /// Only called between pushes, when `cur < limit` (two free slots).
    #[inline(always)]
    unsafe fn put(&mut self, event: Event) -> usize {
        let mut cur = self.cur;
        if (self.pending_units | self.pending_flops) != 0 {
            // SAFETY: `cur < limit`, so `cur` and `cur + 1` are slots of the buffer; only this
            // thread writes them, beyond `committed`, which the collector never reads past.
            unsafe {
                cur.write(Event::Advance {
                    units: self.pending_units,
                    flops: self.pending_flops,
                });
                cur = cur.add(1);
            }
            self.pending_units = 0;
            self.pending_flops = 0;
        }
        // SAFETY: as above (`cur` is at most the old `cur + 1`).
        unsafe {
            cur.write(event);
            cur = cur.add(1);
        }
        self.cur = cur;
        self.len()
    }

    /// Swaps the buffer if fewer than two slots are left, restoring `cur < limit`.
    #[inline(always)]
    fn check_room(&mut self) {
        if self.cur >= self.limit {
            self.swap_buffer();
        }
    }

    /// Events in the current buffer.
    #[inline(always)]
    fn len(&self) -> usize {
        // Plain arithmetic on the addresses (both point into the current buffer, `cur` not
        // before `ptr`); wrapping, so that it cannot panic whatever happens.
        (self.cur as usize).wrapping_sub(self.ptr as usize) / std::mem::size_of::<Event>()
    }

    /// Adds executed time (instructions and FLOPs of a basic block).
    #[inline(always)]
    pub fn advance(&mut self, units: u64, flops: u64) {
        self.pending_units += units;
        self.pending_flops += flops;
    }

    /// The current buffer's events, as the `Vec` it came from.
    ///
    /// # Safety
    /// The caller must replace `ptr`/`cur` (or drop the state) before pushing again: the
    /// buffer now belongs to the returned `Vec`.
    unsafe fn take_events(&self) -> Vec<Event> {
        // SAFETY: `ptr` came from a Vec with capacity BUFFER_EVENTS (take_buffer) whose first
        // `len` elements this thread initialized.
        unsafe { Vec::from_raw_parts(self.ptr, self.len(), BUFFER_EVENTS) }
    }

    #[cold]
    #[inline(never)]
    fn swap_buffer(&mut self) {
        let was_busy = std::mem::replace(&mut self.busy, true);
        let fresh = fresh_buffer();
        let full = {
            let swap = lock(&self.swap);
            // SAFETY: `ptr` and `cur` are replaced right below.
            let full = unsafe { self.take_events() };
            self.ptr = fresh;
            self.cur = fresh;
            self.limit = buffer_limit(fresh);
            self.shared_ptr.store(fresh, Ordering::Release);
            self.committed.store(0, Ordering::Release);
            if !swap.collected {
                HANDOVERS.fetch_add(1, Ordering::SeqCst);
            }
            (!swap.collected).then_some(full)
        };
        if let Some(full) = full {
            recorder::send(Msg::Events(self.tid, full));
            HANDOVERS.fetch_sub(1, Ordering::SeqCst);
        }
        self.unbusy(was_busy);
    }

    /// Ends a stretch of the shim's work: `busy` goes back to `was`, and when the thread is
    /// no longer busy, the signals that arrived meanwhile are delivered (`signals.rs`).
    #[inline(always)]
    fn unbusy(&mut self, was: bool) {
        self.busy = was;
        if !was {
            // The store above comes first: a signal from now on runs its handler at once.
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
            if self.deferred.any() {
                self.deferred.redeliver();
            }
        }
    }

    /// Runs `f` with recording suspended on this thread (for the shim's own work).
    pub fn quiet<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let was_busy = std::mem::replace(&mut self.busy, true);
        let r = f(self);
        self.unbusy(was_busy);
        r
    }
}

/// Runs `f` with recording suspended on the calling thread, whether or not it has a state.
pub(crate) fn quietly<R>(f: impl FnOnce() -> R) -> R {
    let p = state_slot();
    let flags = TLS.with(|t| t.flags.get());
    TLS.with(|t| t.flags.set(flags | INTERNAL));
    let was_busy = if !has_state(p) {
        false
    } else {
        // SAFETY: see `current`; only this thread touches its state.
        unsafe { std::mem::replace(&mut (*p).busy, true) }
    };
    let r = f();
    TLS.with(|t| t.flags.set(flags));
    if has_state(p) {
        // SAFETY: as above.
        unsafe { (*p).unbusy(was_busy) };
    }
    r
}

/// Takes the committed events of every live thread (at exit or on a stop signal). Returns
/// `(thread, events, ended)`; threads collected once send nothing more.
pub(crate) fn collect_all() -> Vec<(ThreadId, Vec<Event>, bool)> {
    quietly(|| {
        let reg = lock(&REGISTRY);
        let mut out = Vec::with_capacity(reg.0.len());
        for &p in &reg.0 {
            // SAFETY: registered states are freed only after leaving the registry, which we
            // hold locked.
            let st = unsafe { &*(p as *const ThreadState) };
            let mut swap = lock(&st.swap);
            if swap.collected {
                continue;
            }
            swap.collected = true;
            let base = st.shared_ptr.load(Ordering::Acquire);
            let n = st.committed.load(Ordering::Acquire);
            // SAFETY: the owner initialized the first `n` events of `base` before publishing
            // `n` (release), never writes them again, and cannot swap `base` away while we
            // hold `swap`.
            let events = unsafe { std::slice::from_raw_parts(base, n) }.to_vec();
            out.push((st.tid, events, false));
        }
        out.sort_by_key(|(tid, _, _)| *tid);
        out
    })
}

/// On a fault in the calling thread (from its signal handler): publishes every event it wrote,
/// so the collector also takes its accesses since its last committed event (the thread runs
/// no more program code). Nothing else: a signal handler must not allocate or lock, and the
/// thread may have been interrupted inside the shim (then it is busy and publishes nothing).
pub(crate) fn publish_on_fault() {
    let p = state_slot();
    if !has_state(p) {
        return;
    }
    // Busy because a program handler runs (one that raised the fault again with the
    // default disposition, the shim's handler) is not busy in the shim: publish then too.
    let in_handler = handlers::in_handler_outside_shim();
    // SAFETY: as in `current`; only this thread writes its state, and the events before
    // `len` are complete (a push writes its slots before it moves `cur`).
    unsafe {
        if !(*p).busy || in_handler {
            (*p).committed.store((*p).len(), Ordering::Release);
        }
    }
}

/// Ends the calling thread's stream: records its exit and hands its events to the writer.
pub(crate) fn end_current_thread() {
    handlers::abandon_handlers_at_end();
    let p = state_slot();
    if !has_state(p) {
        return;
    }
    if let Some(st) = current() {
        st.push(Event::ThreadExit);
    }
    retire(p);
}

/// pthread key destructor: runs when a thread that recorded exits.
extern "C" fn on_thread_exit(p: *mut libc::c_void) {
    handlers::abandon_handlers_at_end();
    let mine = state_slot();
    if !has_state(mine) || mine.cast() != p {
        return;
    }
    // SAFETY: getpid and gettid have no preconditions.
    if unsafe { libc::syscall(libc::SYS_gettid) } == i64::from(unsafe { libc::getpid() }) {
        // Only `pthread_exit` runs key destructors on the main thread (`exit` does not).
        recorder::main_thread_exited();
    }
    if let Some(st) = current() {
        st.push(Event::ThreadExit);
    }
    retire(mine);
}

/// Sends a thread's last events and frees its state.
fn retire(p: *mut ThreadState) {
    set_state_slot(QUIET);
    TLS.with(|t| t.flags.set(t.flags.get() | INTERNAL));
    // Claimed while still registered: either the collector took the events already, or it
    // finds them claimed and waits for the hand-over (until 2026-11-29 the thread left the
    // registry first, and a collector running then neither took its events nor waited for
    // them: they reached the writer after the trace's end).
    let handing_over = {
        // SAFETY: `p` is this thread's state, still registered (so alive).
        let mut swap = lock(unsafe { &(*p).swap });
        let claim = !swap.collected;
        if claim {
            swap.collected = true;
            HANDOVERS.fetch_add(1, Ordering::SeqCst);
        }
        claim
    };
    lock(&REGISTRY).0.retain(|&q| q != p as usize);
    // SAFETY: `p` is this thread's state, out of the registry and the TLS slot: nobody else
    // can reach it now.
    let mut st = unsafe { Box::from_raw(p) };
    if let Some(a) = st.alt_stack.take() {
        crate::alt_stack::remove(a);
    }
    // SAFETY: the state is dropped below without pushing again.
    let events = unsafe { st.take_events() };
    if handing_over {
        recorder::send(Msg::Events(st.tid, events));
        recorder::send(Msg::ThreadDone(st.tid));
        HANDOVERS.fetch_sub(1, Ordering::SeqCst);
    }
}
