//! Per-thread recording state: the event buffer, pending time, the re-entrancy guard.
//!
//! The hot path (one access) is: one relaxed load of the global enable flag, one TLS load, a
//! store of the event into a preallocated buffer and a release store of the committed length.
//! Nothing allocates until a buffer is full; then it goes to the writer thread and a recycled
//! buffer takes its place.
//!
//! At exit (or on SIGINT/SIGTERM) another thread collects the committed events of every thread
//! still alive, e.g. OpenMP pool threads that never exit: the owner only ever writes slots
//! beyond the committed length, and buffer swaps happen under a per-thread lock, so the
//! collector reads a stable prefix.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

use cachescope_schema::{Event, ThreadId};

use crate::recorder::{self, lock, Msg, BUFFER_EVENTS};

/// Flag: this thread belongs to the shim (the writer) and never records.
const INTERNAL: u8 = 1;
/// Flag: this thread is creating its state; allocations it makes are not recorded.
const CREATING: u8 = 2;

struct Tls {
    state: Cell<*mut ThreadState>,
    flags: Cell<u8>,
    /// The id `pthread_create` chose for this thread, or `u32::MAX`.
    assigned: Cell<u32>,
}

thread_local! {
    static TLS: Tls = const {
        Tls {
            state: Cell::new(ptr::null_mut()),
            flags: Cell::new(0),
            assigned: Cell::new(u32::MAX),
        }
    };
}

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
pub(crate) struct ThreadState {
    /// Recorded thread id.
    pub tid: ThreadId,
    /// Start of the current buffer (capacity [`BUFFER_EVENTS`]); written by the owner only.
    ptr: *mut Event,
    /// Events in the current buffer (owner's view).
    len: usize,
    /// The current buffer, for the collector.
    shared_ptr: AtomicPtr<Event>,
    /// Events the collector may read.
    committed: AtomicUsize,
    /// Held while the owner swaps buffers or the collector reads.
    swap: Mutex<SwapState>,
    pending_units: u64,
    pending_flops: u64,
    /// Set while the shim itself runs on this thread (nothing is recorded then).
    pub busy: bool,
    /// Enclosing OpenMP teams.
    pub teams: Vec<Team>,
    /// Block costs seen by this thread.
    pub blocks: Box<[CachedBlock]>,
}

#[derive(Default)]
struct SwapState {
    /// The collector took this thread's events; nothing more goes to the writer.
    collected: bool,
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

/// Marks the calling thread as the shim's own: it never records.
pub(crate) fn mark_internal() {
    TLS.with(|t| t.flags.set(t.flags.get() | INTERNAL));
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
    let p = TLS.with(|t| t.state.get());
    if p.is_null() {
        return create();
    }
    // SAFETY: `p` was created by `create` for this thread and is freed only by this thread's
    // exit destructor, which also clears the TLS slot; only this thread uses it mutably.
    let st = unsafe { &mut *p };
    if st.busy {
        None
    } else {
        Some(st)
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
    let mut buf = std::mem::ManuallyDrop::new(recorder::take_buffer());
    let p = buf.as_mut_ptr();
    let st = Box::new(ThreadState {
        tid,
        ptr: p,
        len: 0,
        shared_ptr: AtomicPtr::new(p),
        committed: AtomicUsize::new(0),
        swap: Mutex::new(SwapState::default()),
        pending_units: 0,
        pending_flops: 0,
        busy: false,
        teams: Vec::with_capacity(8),
        blocks: vec![CachedBlock::default(); BLOCK_CACHE].into_boxed_slice(),
    });
    let raw = Box::into_raw(st);
    lock(&REGISTRY).0.push(raw as usize);
    let key = EXIT_KEY.load(Ordering::SeqCst);
    if key != usize::MAX {
        // SAFETY: the key was created by `init_exit_key`; the value is this thread's state,
        // handed back to `on_thread_exit` when the thread ends.
        unsafe { libc::pthread_setspecific(key as libc::pthread_key_t, raw.cast()) };
    }
    TLS.with(|t| {
        t.state.set(raw);
        t.flags.set(flags);
    });
    // SAFETY: just created for this thread, see `current`.
    Some(unsafe { &mut *raw })
}

impl ThreadState {
    /// Records `event`, preceded by the time the thread executed since its last event.
    #[inline(always)]
    pub fn push(&mut self, event: Event) {
        if (self.pending_units | self.pending_flops) != 0 {
            let advance = Event::Advance {
                units: self.pending_units,
                flops: self.pending_flops,
            };
            self.pending_units = 0;
            self.pending_flops = 0;
            self.push_raw(advance);
        }
        self.push_raw(event);
    }

    /// Adds executed time (instructions and FLOPs of a basic block).
    #[inline(always)]
    pub fn advance(&mut self, units: u64, flops: u64) {
        self.pending_units += units;
        self.pending_flops += flops;
    }

    #[inline(always)]
    fn push_raw(&mut self, event: Event) {
        // SAFETY: `ptr` points to a buffer of BUFFER_EVENTS events and `len < BUFFER_EVENTS`
        // (the buffer is swapped as soon as it is full); only this thread writes it, and
        // only beyond `committed`, which the collector never reads past.
        unsafe { self.ptr.add(self.len).write(event) };
        self.len += 1;
        self.committed.store(self.len, Ordering::Release);
        if self.len == BUFFER_EVENTS {
            self.swap_buffer();
        }
    }

    #[cold]
    fn swap_buffer(&mut self) {
        let was_busy = std::mem::replace(&mut self.busy, true);
        let fresh = std::mem::ManuallyDrop::new(recorder::take_buffer()).as_mut_ptr();
        let full = {
            let swap = lock(&self.swap);
            // SAFETY: `ptr` came from a Vec with capacity BUFFER_EVENTS (take_buffer) whose
            // first `len` elements this thread initialized.
            let full = unsafe { Vec::from_raw_parts(self.ptr, self.len, BUFFER_EVENTS) };
            self.ptr = fresh;
            self.len = 0;
            self.shared_ptr.store(fresh, Ordering::Release);
            self.committed.store(0, Ordering::Release);
            (!swap.collected).then_some(full)
        };
        if let Some(full) = full {
            recorder::send(Msg::Events(self.tid, full));
        }
        self.busy = was_busy;
    }

    /// Runs `f` with recording suspended on this thread (for the shim's own work).
    pub fn quiet<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let was_busy = std::mem::replace(&mut self.busy, true);
        let r = f(self);
        self.busy = was_busy;
        r
    }
}

/// Runs `f` with recording suspended on the calling thread, whether or not it has a state.
pub(crate) fn quietly<R>(f: impl FnOnce() -> R) -> R {
    let (p, flags) = TLS.with(|t| (t.state.get(), t.flags.get()));
    TLS.with(|t| t.flags.set(flags | INTERNAL));
    let was_busy = if p.is_null() {
        false
    } else {
        // SAFETY: see `current`; only this thread touches its state.
        unsafe { std::mem::replace(&mut (*p).busy, true) }
    };
    let r = f();
    if !p.is_null() {
        // SAFETY: as above.
        unsafe { (*p).busy = was_busy };
    }
    TLS.with(|t| t.flags.set(flags));
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

/// Ends the calling thread's stream: records its exit and hands its events to the writer.
pub(crate) fn end_current_thread() {
    let p = TLS.with(|t| t.state.get());
    if p.is_null() {
        return;
    }
    if let Some(st) = current() {
        st.push(Event::ThreadExit);
    }
    retire(p);
}

/// pthread key destructor: runs when a thread that recorded exits.
extern "C" fn on_thread_exit(p: *mut libc::c_void) {
    let mine = TLS.with(|t| t.state.get());
    if mine.is_null() || mine.cast() != p {
        return;
    }
    if let Some(st) = current() {
        st.push(Event::ThreadExit);
    }
    retire(mine);
}

/// Sends a thread's last events and frees its state.
fn retire(p: *mut ThreadState) {
    TLS.with(|t| {
        t.state.set(ptr::null_mut());
        t.flags.set(t.flags.get() | INTERNAL);
    });
    lock(&REGISTRY).0.retain(|&q| q != p as usize);
    // SAFETY: `p` is this thread's state, out of the registry and the TLS slot: nobody else
    // can reach it now.
    let st = unsafe { Box::from_raw(p) };
    let collected = lock(&st.swap).collected;
    // SAFETY: as in `swap_buffer`.
    let events = unsafe { Vec::from_raw_parts(st.ptr, st.len, BUFFER_EVENTS) };
    if !collected {
        recorder::send(Msg::Events(st.tid, events));
        recorder::send(Msg::ThreadDone(st.tid));
    }
}
