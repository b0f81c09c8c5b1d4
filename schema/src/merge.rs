//! The global order of all events: (time, thread id), with clocks aligned at sync events.
//!
//! Each thread has a logical clock in the header's time unit. Events are released in
//! ascending (clock, thread id) order, and sync events align clocks:
//!
//! * a barrier's participants all leave together, when the last one is done with it: at the
//!   latest time one reached its leave. Events between a thread's enter and leave (explicit
//!   tasks an OpenMP runtime runs in the barrier) happen at the thread's own clock, beside
//!   the others' work before the barrier, and nobody leaves before they are done (an OpenMP
//!   barrier completes its tasks). Without such events this is the latest enter time. Until
//!   2026-11-29 a thread waited at its enter, which put such tasks after the barrier;
//! * acquisition #k of a lock waits for the release after acquisition #k−1 and happens no
//!   earlier than it (acquisitions keep their recorded order);
//! * a created thread starts no earlier than its creator's `ThreadCreate`;
//! * a join happens no earlier than the joined thread's exit (or the end of its stream).
//!
//! A thread that waits is parked without consuming its event and re-examined when woken, so
//! the order depends on the trace alone — never on recording wall-clock order or the host.
//! Sync that can never be satisfied is reported as a [`ErrorKind::Deadlock`] error naming
//! every waiting thread — except in an incomplete trace (see [`MergedEvents::incomplete`]),
//! where the partners' events may simply be missing, and when every waiting thread's stream
//! ends with the event it waits with: the program ended while they waited (another thread
//! called `exit`, a signal ended it), so no partner's event ever came. There the waits are
//! released, at the latest clock of any thread, so that every recovered event is still ordered.
//! (A thread whose stream ends inside a barrier waits for nothing: it is done with it when
//! its stream ends, and the others leave once every participant is done.) Likewise when every
//! waiting thread waits to leave a barrier whose missing participants' streams were cut (ended
//! without `ThreadExit`) before their arrival: the recording stopped after they arrived but
//! before the arrival was recorded.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use serde::Serialize;

use crate::error::{ErrorKind, Result, TraceError};
use crate::event::{Event, ThreadId};
use crate::reader::ThreadCursor;
use crate::record::TimeUnit;

mod window;

pub use window::QuantaSizes;

/// An event with its thread and aligned global time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimedEvent {
    /// Aligned time at which the event happens.
    pub time: u64,
    /// The thread.
    pub thread: ThreadId,
    /// The event.
    #[serde(skip)]
    pub event: Event,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Runnable,
    Barrier(u64),
    Lock { lock: u64, order: u64 },
    Start,
    Join(ThreadId),
    Done,
}

struct ThreadState {
    cursor: ThreadCursor,
    clock: u64,
    wait: Wait,
    /// The barrier episodes the thread entered and has not left, innermost last: (barrier,
    /// generation). A task run in a barrier may enter a barrier of its own (a nested team's).
    episodes: Vec<(u64, u64)>,
    /// The stream had its `ThreadExit` (a stream that ends without one was cut: the program
    /// ended, or a stop signal ended it, while the thread ran).
    exited: bool,
}

/// Barrier episodes one thread may be inside at once (a task run in a barrier may enter a
/// nested team's barriers); beyond, the trace is refused as inconsistent (memory must not
/// grow with a hostile trace's enters).
const MAX_OPEN_BARRIERS: usize = 64;

#[derive(Default)]
struct BarrierState {
    participants: u32,
    /// Threads that entered the current episode.
    arrived: Vec<usize>,
    /// Participants of the current episode that reached their leave (or ended inside it),
    /// and the latest time one did.
    done: u32,
    latest_done: u64,
    /// Episodes completed so far: the current one's number.
    generation: u64,
    /// When the last completed episode was left. A thread can be at most one episode behind:
    /// the next one cannot complete without it.
    completed_at: u64,
    /// Threads parked at their leave of the current episode.
    leaving: Vec<usize>,
}

impl BarrierState {
    /// Completes the current episode at `at`; returns the threads waiting to leave it.
    fn complete(&mut self, at: u64) -> Vec<usize> {
        self.completed_at = at;
        self.generation += 1;
        self.arrived.clear();
        (self.done, self.latest_done) = (0, 0);
        std::mem::take(&mut self.leaving)
    }

    /// One more participant is done with the current episode at `time`; returns the time
    /// the episode is left if that completes it.
    fn one_done(&mut self, time: u64) -> Option<u64> {
        self.done += 1;
        self.latest_done = self.latest_done.max(time);
        (self.done >= self.participants).then_some(self.latest_done)
    }
}

#[derive(Default)]
struct LockState {
    next_order: u64,
    holder: Option<usize>,
    release_time: u64,
    waiters: BTreeMap<u64, usize>,
}

/// Iterator over all events in global order. Stops after the first error.
pub struct MergedEvents {
    threads: Vec<ThreadState>,
    slot: HashMap<ThreadId, usize>,
    ready: BinaryHeap<Reverse<(u64, ThreadId, usize)>>,
    current: Option<usize>,
    barriers: HashMap<u64, BarrierState>,
    locks: HashMap<u64, LockState>,
    created: HashMap<ThreadId, u64>,
    exited: HashMap<ThreadId, u64>,
    access_cost: u64,
    finished: bool,
    incomplete: bool,
    now: u64,
    /// While `next_quanta` runs: threads woken at the very time of the waking event (slot,
    /// time), for it to order that time's events (see `merge/window.rs`).
    same_time_wakes: Option<Vec<(usize, u64)>>,
    /// Per slot, events `next_quanta` cut off its last call, for the next one.
    carry: Vec<Vec<TimedEvent>>,
    /// Per slot, the length of `next_quanta`'s output vector when the call began.
    call_start: Vec<usize>,
}

impl MergedEvents {
    /// Merges the given thread cursors (one per thread).
    pub fn new(cursors: Vec<ThreadCursor>, unit: TimeUnit) -> Self {
        let mut ready = BinaryHeap::new();
        let mut slot = HashMap::new();
        let threads: Vec<ThreadState> = cursors
            .into_iter()
            .enumerate()
            .map(|(i, cursor)| {
                slot.insert(cursor.thread(), i);
                ready.push(Reverse((0, cursor.thread(), i)));
                ThreadState {
                    cursor,
                    clock: 0,
                    wait: Wait::Runnable,
                    episodes: Vec::new(),
                    exited: false,
                }
            })
            .collect();
        MergedEvents {
            threads,
            slot,
            ready,
            current: None,
            barriers: HashMap::new(),
            locks: HashMap::new(),
            created: HashMap::new(),
            exited: HashMap::new(),
            access_cost: unit.access_cost(),
            finished: false,
            incomplete: false,
            now: 0,
            same_time_wakes: None,
            carry: Vec::new(),
            call_start: Vec::new(),
        }
    }

    /// Marks the trace as incomplete (cut off or damaged): when no thread can continue, the
    /// waits are released instead of reporting a deadlock, because the events that would
    /// satisfy them were lost.
    pub fn incomplete(mut self, incomplete: bool) -> Self {
        self.incomplete = incomplete;
        self
    }

    /// Releases waits that can no longer be satisfied (incomplete traces only), least
    /// disruptive first: barriers (the missing participants' events are lost), then locks
    /// whose holder has ended (one waiter per lock, in acquisition order), then threads
    /// waiting to be created, and joins only when nothing else can move. Returns whether any
    /// thread woke. Threads are visited by slot, so the outcome is deterministic.
    fn release_waits(&mut self, why: &str) -> bool {
        // The moment no thread can continue: after the last event released and every
        // thread's clock (a parked thread's clock is at the event it waits with). Released
        // threads continue from there, so the order stays ascending in time (and no quantum
        // already handed out by `next_quanta` receives events later).
        let now = self
            .threads
            .iter()
            .map(|t| t.clock)
            .fold(self.now, u64::max);
        self.now = now;
        let woke = self.release_barriers(now)
            || self.release_locks(now)
            || self.release(now, |w| w == Wait::Start)
            || self.release(now, |w| matches!(w, Wait::Join(_)));
        if woke {
            tracing::warn!(
                "{why}: released waits at time {now} whose partners' events are missing"
            );
        }
        woke
    }

    /// Whether some thread waits and every waiting thread waits to leave a barrier whose
    /// missing participants can no longer come: at least as many threads' streams were cut
    /// (ended without `ThreadExit`) outside its episode as participants are missing. A stop
    /// signal ended the program after such a partner arrived but before its arrival was
    /// recorded (an OpenMP runtime's barrier is recorded once its wait is over; LLVM libomp's
    /// fork is recorded by the primary thread before the workers are seen in the region).
    fn arrivals_cut(&self) -> bool {
        let mut waiting = false;
        for t in &self.threads {
            match t.wait {
                Wait::Runnable | Wait::Done => {}
                Wait::Barrier(b) => {
                    let Some(st) = self.barriers.get(&b) else {
                        return false;
                    };
                    let missing = (st.participants as usize).saturating_sub(st.arrived.len());
                    let cut = self
                        .threads
                        .iter()
                        .enumerate()
                        .filter(|&(j, u)| {
                            u.wait == Wait::Done && !u.exited && !st.arrived.contains(&j)
                        })
                        .count();
                    if missing == 0 || cut < missing {
                        return false;
                    }
                    waiting = true;
                }
                _ => return false,
            }
        }
        waiting
    }

    /// Whether some thread waits and every waiting thread's stream ends with the event it
    /// waits with: the program ended while they waited (see the module docs).
    fn ended_while_waiting(&self) -> bool {
        let mut waiting = self
            .threads
            .iter()
            .filter(|t| !matches!(t.wait, Wait::Runnable | Wait::Done))
            .peekable();
        // Every wait puts its event back. A barrier's is the leave: the thread did get through
        // the barrier in the recording, so its partners' enters must be somewhere (a thread
        // whose stream ends inside a barrier does not wait: it is done with it; recorders
        // write no leave for a thread still in a barrier when the program ends).
        waiting.peek().is_some()
            && waiting.all(|t| !matches!(t.wait, Wait::Barrier(_)) && t.cursor.at_most_left(1))
    }

    fn release_barriers(&mut self, now: u64) -> bool {
        let mut woke = false;
        for i in 0..self.threads.len() {
            if let Wait::Barrier(b) = self.threads[i].wait {
                if let Some(st) = self.barriers.get_mut(&b) {
                    // The episode is over for the ones that arrived (those still between
                    // their enter and leave pass their leave too).
                    let at = st.latest_done.max(now);
                    for j in st.complete(at) {
                        self.wake(j, at);
                    }
                    woke = true;
                }
            }
        }
        woke
    }

    fn release_locks(&mut self, now: u64) -> bool {
        let mut woke = false;
        // One waiter per lock: a second one woken in the same call would find the lock
        // promised to a later acquisition than its own (and the first one's acquisition
        // would then look recorded twice).
        let mut released = Vec::new();
        for i in 0..self.threads.len() {
            let Wait::Lock { lock, .. } = self.threads[i].wait else {
                continue;
            };
            if released.contains(&lock) {
                continue;
            }
            // A live holder will still release the lock; only a finished one never will.
            let threads = &self.threads;
            let Some(st) = self.locks.get_mut(&lock) else {
                continue;
            };
            if st.holder.is_some_and(|h| threads[h].wait != Wait::Done) {
                continue;
            }
            st.holder = None;
            if let Some((order, j)) = st.waiters.pop_first() {
                st.next_order = order;
                let at = st.release_time.max(now);
                released.push(lock);
                self.wake(j, at);
                woke = true;
            }
        }
        woke
    }

    fn release(&mut self, now: u64, which: impl Fn(Wait) -> bool) -> bool {
        let mut woke = false;
        for i in 0..self.threads.len() {
            let wait = self.threads[i].wait;
            if !which(wait) {
                continue;
            }
            match wait {
                Wait::Start => {
                    let tid = self.threads[i].cursor.thread();
                    self.created.insert(tid, now);
                }
                Wait::Join(c) => {
                    self.exited.insert(c, now);
                }
                _ => continue,
            }
            self.wake(i, now);
            woke = true;
        }
        woke
    }

    fn wake(&mut self, i: usize, not_before: u64) {
        let t = &mut self.threads[i];
        t.clock = t.clock.max(not_before);
        t.wait = Wait::Runnable;
        self.ready.push(Reverse((t.clock, t.cursor.thread(), i)));
        if t.clock == not_before {
            if let Some(w) = &mut self.same_time_wakes {
                w.push((i, not_before));
            }
        }
    }

    fn fail(&self, i: usize, kind: ErrorKind, msg: String) -> TraceError {
        TraceError::new(kind, msg).in_thread(self.threads[i].cursor.thread())
    }

    fn park(&mut self, i: usize, wait: Wait) {
        self.threads[i].cursor.unread();
        self.threads[i].wait = wait;
    }

    fn thread_exited(&mut self, i: usize) {
        let tid = self.threads[i].cursor.thread();
        let at = self.threads[i].clock;
        self.exited.entry(tid).or_insert(at);
        let joiners: Vec<usize> = (0..self.threads.len())
            .filter(|&j| self.threads[j].wait == Wait::Join(tid))
            .collect();
        for j in joiners {
            self.wake(j, at);
        }
    }

    /// Processes thread `i`'s next event. `Ok(None)` when the thread parked or ended.
    fn step(&mut self, i: usize) -> Result<Option<TimedEvent>> {
        let Some(event) = self.threads[i].cursor.next_event()? else {
            self.threads[i].wait = Wait::Done;
            // A thread whose stream ends inside a barrier (the program ended while it waited
            // there) is done with it.
            let at = self.threads[i].clock;
            for (b, generation) in std::mem::take(&mut self.threads[i].episodes) {
                if let Some(st) = self.barriers.get_mut(&b) {
                    if st.generation == generation {
                        if let Some(left) = st.one_done(at) {
                            for j in st.complete(left) {
                                self.wake(j, left);
                            }
                        }
                    }
                }
            }
            self.thread_exited(i);
            return Ok(None);
        };
        let tid = self.threads[i].cursor.thread();
        let time = self.threads[i].clock;
        match event {
            Event::Access(_) => self.threads[i].clock = time.saturating_add(self.access_cost),
            Event::Advance { units, .. } => self.threads[i].clock = time.saturating_add(units),
            Event::ThreadStart => match self.created.get(&tid) {
                Some(&at) => self.threads[i].clock = time.max(at),
                None => {
                    self.park(i, Wait::Start);
                    return Ok(None);
                }
            },
            Event::ThreadCreate { child } => {
                self.created.entry(child).or_insert(time);
                if let Some(&j) = self.slot.get(&child) {
                    if self.threads[j].wait == Wait::Start {
                        self.wake(j, time);
                    }
                }
            }
            Event::ThreadJoin { child } => {
                if let Some(&at) = self.exited.get(&child) {
                    self.threads[i].clock = time.max(at);
                } else if self.slot.contains_key(&child) {
                    self.park(i, Wait::Join(child));
                    return Ok(None);
                } else {
                    tracing::warn!("thread {tid} joins thread {child}, which has no events");
                }
            }
            Event::ThreadExit => {
                self.threads[i].exited = true;
                self.thread_exited(i);
            }
            Event::LockAcquire { lock, order } => {
                let st = self.locks.entry(lock).or_default();
                if st.holder.is_none() && st.next_order == order {
                    st.holder = Some(i);
                    let at = st.release_time;
                    self.threads[i].clock = time.max(at);
                } else {
                    if st.waiters.insert(order, i).is_some() || order < st.next_order {
                        return Err(self.fail(
                            i,
                            ErrorKind::Inconsistent,
                            format!("lock {lock:#x} acquisition #{order} recorded twice"),
                        ));
                    }
                    self.park(i, Wait::Lock { lock, order });
                    return Ok(None);
                }
            }
            Event::LockRelease { lock } => {
                let st = self.locks.entry(lock).or_default();
                if st.holder != Some(i) {
                    return Err(self.fail(
                        i,
                        ErrorKind::Inconsistent,
                        format!("thread {tid} releases lock {lock:#x}, which it does not hold"),
                    ));
                }
                st.holder = None;
                st.release_time = time;
                st.next_order += 1;
                let next = st.next_order;
                if let Some(j) = st.waiters.remove(&next) {
                    self.wake(j, time);
                }
            }
            Event::BarrierEnter {
                barrier,
                participants,
            } => {
                if participants == 0 {
                    return Err(self.fail(
                        i,
                        ErrorKind::Inconsistent,
                        format!("barrier {barrier:#x} with 0 participants"),
                    ));
                }
                let st = self.barriers.entry(barrier).or_default();
                if st.arrived.is_empty() {
                    st.participants = participants;
                } else if st.participants != participants {
                    let expected = st.participants;
                    return Err(self.fail(
                        i,
                        ErrorKind::Inconsistent,
                        format!(
                            "barrier {barrier:#x}: thread {tid} expects {participants} \
                             participants, others {expected}"
                        ),
                    ));
                }
                let episode = (barrier, st.generation);
                let open = &self.threads[i].episodes;
                if open.contains(&episode) {
                    return Err(self.fail(
                        i,
                        ErrorKind::Inconsistent,
                        format!(
                            "thread {tid} enters barrier {barrier:#x} again without leaving it"
                        ),
                    ));
                }
                if open.len() >= MAX_OPEN_BARRIERS {
                    return Err(self.fail(
                        i,
                        ErrorKind::Inconsistent,
                        format!(
                            "thread {tid} is inside more than {MAX_OPEN_BARRIERS} barriers at once"
                        ),
                    ));
                }
                st.arrived.push(i);
                self.threads[i].episodes.push(episode);
            }
            Event::BarrierLeave { barrier } => {
                // The leave of the innermost episode of this barrier the thread entered waits
                // until every participant is done with it (a leave without an enter is taken
                // as is). An episode completed before the thread's leave was released (an
                // incomplete trace, while the thread was still inside): it leaves at its own
                // time.
                let open = &self.threads[i].episodes;
                if let Some(k) = open.iter().rposition(|&(b, _)| b == barrier) {
                    let generation = open[k].1;
                    let st = self.barriers.entry(barrier).or_default();
                    if st.generation == generation {
                        match st.one_done(time) {
                            // The last one: everybody leaves now (this thread's time is the
                            // latest, the others were done earlier in the order).
                            Some(at) => {
                                for j in st.complete(at) {
                                    self.wake(j, at);
                                }
                            }
                            None => {
                                st.leaving.push(i);
                                self.park(i, Wait::Barrier(barrier));
                                return Ok(None);
                            }
                        }
                    }
                    self.threads[i].episodes.remove(k);
                }
            }
            Event::RegionBegin { .. }
            | Event::RegionEnd { .. }
            | Event::Alloc { .. }
            | Event::Free { .. }
            | Event::AllocCaller { .. }
            | Event::StackFrame { .. } => {}
        }
        Ok(Some(TimedEvent {
            time,
            thread: tid,
            event,
        }))
    }

    fn deadlock(&self) -> TraceError {
        let mut waits = Vec::new();
        for t in &self.threads {
            let tid = t.cursor.thread();
            let what = match t.wait {
                Wait::Runnable | Wait::Done => continue,
                Wait::Barrier(b) => {
                    let st = &self.barriers[&b];
                    format!(
                        "thread {tid} waits at barrier {b:#x} ({} of {} arrived)",
                        st.arrived.len(),
                        st.participants
                    )
                }
                Wait::Lock { lock, order } => format!(
                    "thread {tid} waits to acquire lock {lock:#x} as #{order} (next is #{})",
                    self.locks.get(&lock).map_or(0, |l| l.next_order)
                ),
                Wait::Start => format!("thread {tid} waits to be created"),
                Wait::Join(c) => format!("thread {tid} waits to join thread {c}"),
            };
            waits.push(what);
        }
        TraceError::new(
            ErrorKind::Deadlock,
            format!("no thread can continue: {}", waits.join("; ")),
        )
    }

    /// The thread first in the global order (taken out of `current` or the ready heap).
    /// When none is ready, the waits of an incomplete trace are released (`on_release` runs
    /// after each release); `Ok(None)` once every thread is done, a deadlock error when some
    /// thread can never continue.
    fn first_thread(&mut self, mut on_release: impl FnMut(&mut Self)) -> Result<Option<usize>> {
        loop {
            if let Some(i) = self.current.take() {
                return Ok(Some(i));
            }
            if let Some(Reverse((_, _, i))) = self.ready.pop() {
                return Ok(Some(i));
            }
            if self.threads.iter().all(|t| t.wait == Wait::Done) {
                return Ok(None);
            }
            if self.incomplete && self.release_waits("incomplete trace") {
                on_release(self);
                continue;
            }
            if self.ended_while_waiting()
                && self.release_waits("the program ended while threads waited")
            {
                on_release(self);
                continue;
            }
            if self.arrivals_cut()
                && self.release_waits(
                    "the program ended before a barrier partner's arrival was recorded",
                )
            {
                on_release(self);
                continue;
            }
            return Err(self.deadlock());
        }
    }

    fn next_inner(&mut self) -> Result<Option<TimedEvent>> {
        loop {
            let Some(i) = self.first_thread(|_| {})? else {
                return Ok(None);
            };
            let out = self.step(i)?;
            let t = &self.threads[i];
            if t.wait == Wait::Runnable {
                let key = (t.clock, t.cursor.thread(), i);
                match self.ready.peek() {
                    Some(Reverse(min)) if *min < key => self.ready.push(Reverse(key)),
                    _ => self.current = Some(i),
                }
            }
            if let Some(e) = out {
                self.now = e.time;
                return Ok(Some(e));
            }
        }
    }
}

impl MergedEvents {
    /// Appends the next events of the global order to `out` until it holds `max`: the same
    /// events, in the same order, as that many calls of `next`. `Ok(false)` once the merge
    /// has ended (`out` may have received events before), and after an error.
    ///
    /// Most events are accesses and time advances of the thread that stays first in the
    /// order; runs of them are copied straight from the decoded chunk, up to where another
    /// ready thread comes first. That is where `next` would switch threads: the run ends
    /// when the thread's (clock, id, slot) key passes the smallest key waiting, which plain
    /// events cannot change. Everything else takes the one-event path.
    pub fn next_batch(&mut self, out: &mut Vec<TimedEvent>, max: usize) -> Result<bool> {
        if self.finished {
            return Ok(false);
        }
        while out.len() < max {
            if let Some(i) = self.current {
                let waiting = self.ready.peek().map(|Reverse(k)| *k);
                let t = &mut self.threads[i];
                let tid = t.cursor.thread();
                // `i` comes first now; after each event, until another thread does.
                let overtakes = |clock: u64| waiting.is_some_and(|min| min < (clock, tid, i));
                let (n, clock) = copy_plain(
                    t.cursor.pending(),
                    tid,
                    t.clock,
                    self.access_cost,
                    max - out.len(),
                    out,
                    |clock| !overtakes(clock),
                );
                let overtaken = overtakes(clock);
                if n > 0 {
                    t.cursor.skip(n);
                    t.clock = clock;
                    self.now = out[out.len() - 1].time;
                    if overtaken {
                        self.current = None;
                        self.ready.push(Reverse((clock, tid, i)));
                    }
                    continue;
                }
            }
            match self.next() {
                Some(Ok(e)) => out.push(e),
                Some(Err(e)) => return Err(e),
                None => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// Copies the plain events (accesses and time advances) at the start of `pending`, at most
/// `limit`, to `out` with their times from `clock` on, while `go` holds for the clock before
/// each (the first is always taken); stops at any other event. Returns how many were copied
/// and the clock after them. Between sync events a thread's clock depends on its own events
/// alone, so such a run needs no look at the other threads.
pub(super) fn copy_plain(
    pending: &[Event],
    thread: ThreadId,
    mut clock: u64,
    access_cost: u64,
    limit: usize,
    out: &mut Vec<TimedEvent>,
    mut go: impl FnMut(u64) -> bool,
) -> (usize, u64) {
    let mut n = 0;
    for &event in pending.iter().take(limit) {
        if n > 0 && !go(clock) {
            break;
        }
        let next = match event {
            Event::Access(_) => clock.saturating_add(access_cost),
            Event::Advance { units, .. } => clock.saturating_add(units),
            _ => break,
        };
        out.push(TimedEvent {
            time: clock,
            thread,
            event,
        });
        clock = next;
        n += 1;
    }
    (n, clock)
}

impl Iterator for MergedEvents {
    type Item = Result<TimedEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.next_inner() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.finished = true;
                None
            }
            Err(e) => {
                self.finished = true;
                Some(Err(e))
            }
        }
    }
}
