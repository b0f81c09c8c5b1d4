//! Whole quanta of the global order with each thread's events kept apart: the input of the
//! parallel engine, which simulates every core's events of a quantum on its own and needs
//! the global order only where cores meet.
//!
//! Between two sync events a thread's clock depends on its own events alone, so a thread's
//! run of accesses and time advances can be released up to the end of the window at once
//! instead of event by event; only sync events (which move other threads' clocks) are taken
//! in the global order. Every event gets the time the global order gives it. A quantum too
//! large to hold is handed out in pieces of the global order ([`QuantaSizes`]).
//!
//! **Ties.** At most times the global order is by (time, thread id), each thread's events in
//! their order, so sorting each thread's events by that key gives it back. Not at a time when
//! a sync event woke a thread at that very time (a lock handed over, a barrier completed, a
//! thread created or joined, all in zero time): the woken thread comes after the waking event
//! even if its id is smaller, and takes over from the waker if so. For those times
//! `next_quanta` also gives every event of that time its rank there (1, 2, …), found by
//! replaying the merge's choice of thread for that time alone; the others get 0.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Range;

use super::{copy_plain, MergedEvents, TimedEvent, Wait};
use crate::error::{ErrorKind, Result, TraceError};
use crate::event::ThreadId;

/// How many events [`MergedEvents::next_quanta`] hands out per call.
///
/// A quantum is a span of time, and where time hardly moves (an import whose clock advances
/// only with instruction records) one quantum can hold any number of events; the parallel
/// engine keeps a call's events in memory. So a call that holds more than `split_above`
/// events ends at the next point where the events handed out are a prefix of the global
/// order, even inside a quantum (the engine is exact at any such point; it simulates the
/// pieces one after the other). Such points exist at every time except one at which a
/// thread woke at that very time (module docs); if more than `fail_above` events pile up
/// without one, the call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantaSizes {
    /// A call goes on to the end of the quantum in which it reaches this many events.
    pub at_least: usize,
    /// A call holding more events ends at the next point it can be cut.
    pub split_above: usize,
    /// A call holding more events that it cannot cut fails.
    pub fail_above: usize,
}

impl QuantaSizes {
    /// Calls of whole quanta, at least `n` events each, never split.
    pub fn whole(n: usize) -> Self {
        QuantaSizes {
            at_least: n,
            split_above: usize::MAX,
            fail_above: usize::MAX,
        }
    }
}

/// What woke a thread at the very time of the wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Waker {
    /// The event at this index of this slot's output (one past its last event when the
    /// thread's stream ended there, which wakes its joiners).
    Event(usize, usize),
    /// The n-th release of waits in an incomplete trace (nothing was ready).
    Release(u32),
}

/// A thread woken at time `time`, whose next event is at `resume` in its output.
#[derive(Debug, Clone, Copy)]
struct Wake {
    time: u64,
    by: Waker,
    woken: usize,
    resume: usize,
}

impl MergedEvents {
    /// The threads in the order of the `out` vectors of [`Self::next_quanta`].
    pub fn thread_ids(&self) -> Vec<ThreadId> {
        self.threads.iter().map(|t| t.cursor.thread()).collect()
    }

    /// Appends the events of the next whole quanta of `slack` time units (quantum `q` holds
    /// the times `q·slack ..= q·slack + slack − 1`) to `out`, one vector per thread in the
    /// order of [`Self::thread_ids`]: each event with the time [`Self::next_batch`] gives it,
    /// each thread's in its own order, until at least `sizes.at_least` events were appended
    /// (at a quantum boundary) or the merge ends. Quanta without events are skipped. `ties`
    /// receives one number per event, parallel to `out`: 0, or at a time when a thread woke at
    /// that very time, the event's rank among all events of that time in the global order (see
    /// the module docs). Sorting one call's events by (time, tie or else thread, index in the
    /// thread) gives the next stretch of the global order.
    ///
    /// A quantum is split between calls only where it holds more than `sizes.split_above`
    /// events (see [`QuantaSizes`]). Give each call empty vectors: a time a split cut in two
    /// continues in the next call, whose ties rank only its own events. After a split, only
    /// this method hands out the events it carried over (not [`Self::next_batch`] or the
    /// iterator). `Ok(false)` once the merge has ended (`out` may have received events
    /// before), and after an error.
    ///
    /// # Errors
    /// Those of the merge, and [`ErrorKind::LimitExceeded`] when more than `sizes.fail_above`
    /// events pile up that cannot be split (see [`QuantaSizes`]).
    ///
    /// # Panics
    /// If `out` or `ties` has fewer vectors than the trace has threads.
    pub fn next_quanta(
        &mut self,
        slack: u64,
        sizes: QuantaSizes,
        out: &mut [Vec<TimedEvent>],
        ties: &mut [Vec<u32>],
    ) -> Result<bool> {
        let n = self.threads.len();
        assert!(out.len() >= n && ties.len() >= n, "one vector per thread");
        if self.finished {
            return Ok(false);
        }
        let slack = slack.max(1);
        // Events a split left over come first: they follow everything handed out before.
        let mut carried = 0;
        let mut last = None;
        self.call_start.clear();
        self.call_start.extend(out.iter().take(n).map(Vec::len));
        for (k, c) in self.carry.iter_mut().enumerate() {
            if let Some(e) = c.last() {
                let q = e.time / slack;
                last = Some(last.map_or(q, |l: u64| l.max(q)));
            }
            carried += c.len();
            out[k].append(c);
            ties[k].resize(out[k].len(), 0);
        }
        self.same_time_wakes = Some(Vec::new());
        let mut wakes = Vec::new();
        let r = self.fill_quanta(slack, sizes, carried, last, out, ties, &mut wakes);
        self.same_time_wakes = None;
        if r.is_ok() {
            rank_ties(&self.thread_ids(), out, ties, &mut wakes);
        }
        r
    }

    /// [`Self::next_quanta`] after the carried events (`carried` of them, up to quantum
    /// `last`).
    #[allow(clippy::too_many_arguments)]
    fn fill_quanta(
        &mut self,
        slack: u64,
        sizes: QuantaSizes,
        carried: usize,
        mut last: Option<u64>,
        out: &mut [Vec<TimedEvent>],
        ties: &mut [Vec<u32>],
        wakes: &mut Vec<Wake>,
    ) -> Result<bool> {
        // `last`: the last quantum of this call, once the first event fixed the first one.
        let mut releases = 0u32;
        // Events the merge gave this call (the call holds `carried` more; they do not count
        // toward a split: a call that splits again must still move on by about
        // `split_above` events).
        let mut new = 0usize;
        // The latest time of a wake so far (wakes come in the order of time).
        let (mut wakes_seen, mut latest_wake) = (0, None);
        loop {
            let first = self.first_thread(|m| {
                m.take_wakes(Waker::Release(releases), out, wakes);
                releases += 1;
            });
            let i = match first {
                Ok(Some(i)) => i,
                Ok(None) => {
                    self.finished = true;
                    return Ok(false);
                }
                Err(e) => {
                    self.finished = true;
                    return Err(e);
                }
            };
            // `i` is first in the global order: every event left is at its clock or later.
            let quantum = self.threads[i].clock / slack;
            let last = match last {
                Some(l) if quantum <= l => l,
                Some(_) if carried + new >= sizes.at_least => {
                    self.current = Some(i);
                    return Ok(true);
                }
                _ => *last.insert(quantum),
            };
            if new > sizes.split_above {
                latest_wake = wakes[wakes_seen..]
                    .iter()
                    .map(|w| w.time)
                    .chain(latest_wake)
                    .max();
                wakes_seen = wakes.len();
                if self.split_before(i, out, ties, latest_wake) {
                    self.current = Some(i);
                    return Ok(true);
                }
                if carried + new > sizes.fail_above {
                    self.finished = true;
                    let t = &self.threads[i];
                    return Err(TraceError::new(
                        ErrorKind::LimitExceeded,
                        format!(
                            "more than {} events of the global order at time {} cannot be split \
                             into smaller pieces (threads hand over a lock or barrier at that \
                             very time while time does not move); the parallel engine would \
                             hold them all in memory: use the exact engine",
                            sizes.fail_above, t.clock
                        ),
                    ));
                }
            }
            // A run stops where the call would hold more than `split_above` new events, so
            // that a split keeps the call near that size. Once a split is near (or the call
            // began with events a split carried), runs also stop where another thread comes
            // first, as in the global order: events copied ahead of that point would only be
            // carried into the next call, and again, while the first thread stays put.
            let room = sizes.split_above.saturating_sub(new).max(1);
            let ordered = carried > 0 || new >= sizes.split_above / 2;
            let ran = self.run_plain(i, slack, last, room, ordered, &mut out[i]);
            ties[i].resize(out[i].len(), 0);
            new += ran;
            let t = &self.threads[i];
            if ran == 0 && t.clock / slack <= last {
                // The next event is a sync event or in a chunk not decoded yet: the one-event
                // path, taken while `i` is first in the global order (after a run, another
                // thread may come first now).
                let at = out[i].len();
                let stepped = self.step(i);
                self.take_wakes(Waker::Event(i, at), out, wakes);
                match stepped {
                    Ok(Some(e)) => {
                        self.now = self.now.max(e.time);
                        out[i].push(e);
                        ties[i].push(0);
                        new += 1;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.finished = true;
                        return Err(e);
                    }
                }
            }
            let t = &self.threads[i];
            if t.wait == Wait::Runnable {
                self.ready.push(Reverse((t.clock, t.cursor.thread(), i)));
            }
        }
    }

    /// Ends the call before thread `i`'s next event, the first of the rest of the global
    /// order, if the events handed out so far can be cut there: keeps every thread's events
    /// before that point and carries the others over to the next call. Returns whether it
    /// cut.
    ///
    /// Thread `i` is at time `h`. Every event left in the merge is at `h` or later, so the
    /// events before `h` are all out. Those at `h` are ordered by thread id unless a thread
    /// woke at `h` (module docs); without such a wake in this call, the threads with a
    /// smaller id than `i`'s have handed out all their events at `h` (else one of them would
    /// come first), and `i` those before its next. So the events before `h`, and those at `h`
    /// of `i` and of threads with smaller ids, are a prefix of the global order, and the rest
    /// (events a thread's run copied ahead of the others) follows it. With a wake at `h` the
    /// order of `h`'s events depends on wakes the next call would not see: no cut.
    ///
    /// `latest_wake`: the time of the call's latest wake at the time of the waking event.
    fn split_before(
        &mut self,
        i: usize,
        out: &mut [Vec<TimedEvent>],
        ties: &mut [Vec<u32>],
        latest_wake: Option<u64>,
    ) -> bool {
        let h = self.threads[i].clock;
        let id = self.threads[i].cursor.thread();
        // Wakes happen at the time of the thread first in the global order, never later
        // than `h`.
        if latest_wake.is_some_and(|w| w >= h) {
            return false;
        }
        let keep: Vec<usize> = self
            .threads
            .iter()
            .zip(out.iter())
            .map(|(t, v)| {
                if t.cursor.thread() <= id {
                    v.partition_point(|e| e.time <= h)
                } else {
                    v.partition_point(|e| e.time < h)
                }
            })
            .collect();
        // Cut only where the call hands something out (it must make progress).
        if !keep.iter().zip(&self.call_start).any(|(&k, &s)| k > s) {
            return false;
        }
        self.carry.resize_with(self.threads.len(), Vec::new);
        for (k, &at) in keep.iter().enumerate() {
            self.carry[k] = out[k].split_off(at);
            ties[k].truncate(at);
        }
        true
    }

    /// Records the threads just woken at the time of the wake, by `by`.
    fn take_wakes(&mut self, by: Waker, out: &[Vec<TimedEvent>], wakes: &mut Vec<Wake>) {
        if let Some(w) = &mut self.same_time_wakes {
            // A woken thread is parked until now, so its next event goes to the end of its
            // output.
            wakes.extend(w.drain(..).map(|(woken, time)| Wake {
                time,
                by,
                woken,
                resume: out[woken].len(),
            }));
        }
    }

    /// Appends thread `i`'s decoded accesses and time advances that start in quanta up to
    /// `last` to `out`, up to its next sync event, the end of the decoded chunk or `max`
    /// events, and if `ordered`, up to where another ready thread comes first in the global
    /// order; returns how many.
    fn run_plain(
        &mut self,
        i: usize,
        slack: u64,
        last: u64,
        max: usize,
        ordered: bool,
        out: &mut Vec<TimedEvent>,
    ) -> usize {
        let waiting = self.ready.peek().map(|Reverse(k)| *k).filter(|_| ordered);
        let t = &mut self.threads[i];
        let tid = t.cursor.thread();
        let in_window =
            |clock: u64| clock / slack <= last && waiting.is_none_or(|min| min >= (clock, tid, i));
        if !in_window(t.clock) {
            return 0;
        }
        let (n, clock) = copy_plain(
            t.cursor.pending(),
            t.cursor.thread(),
            t.clock,
            self.access_cost,
            max,
            out,
            in_window,
        );
        if n > 0 {
            t.cursor.skip(n);
            // The time of the last event appended (the clock before it).
            if let Some(e) = out.last() {
                self.now = self.now.max(e.time);
            }
            t.clock = clock;
        }
        n
    }
}

/// Gives every event of each time at which a thread woke at that very time its rank among
/// that time's events in the global order (`ties`, 1-based), by replaying how the merge
/// chooses the next thread: the ready thread with the smallest id, where a thread woken with
/// a smaller id than the running one takes over right after the waking event.
fn rank_ties(ids: &[ThreadId], out: &[Vec<TimedEvent>], ties: &mut [Vec<u32>], wakes: &mut [Wake]) {
    wakes.sort_by_key(|w| w.time);
    for same in wakes.chunk_by(|a, b| a.time == b.time) {
        rank_time(same[0].time, ids, out, ties, same);
    }
}

/// [`rank_ties`] for the events at time `t`, with the wakes at `t`.
fn rank_time(
    t: u64,
    ids: &[ThreadId],
    out: &[Vec<TimedEvent>],
    ties: &mut [Vec<u32>],
    wakes: &[Wake],
) {
    let n = ids.len();
    // Each thread's events at time `t`, and where it stops: one past them, or one further
    // when its stream ends at `t` and that end wakes a joiner.
    let at: Vec<Range<usize>> = out
        .iter()
        .take(n)
        .map(|v| v.partition_point(|e| e.time < t)..v.partition_point(|e| e.time <= t))
        .collect();
    let end: Vec<usize> = (0..n)
        .map(|k| {
            let virtual_end = wakes.iter().any(|w| w.by == Waker::Event(k, at[k].end));
            at[k].end + usize::from(virtual_end)
        })
        .collect();
    // Positions a thread waits at until its wake, how many wakes each still waits for.
    let mut waiting: HashMap<(usize, usize), usize> = HashMap::new();
    for w in wakes {
        *waiting.entry((w.woken, w.resume)).or_default() += 1;
    }
    let mut by: HashMap<Waker, Vec<(usize, usize)>> = HashMap::new();
    for w in wakes {
        by.entry(w.by).or_default().push((w.woken, w.resume));
    }
    let mut rounds: Vec<u32> = wakes
        .iter()
        .filter_map(|w| match w.by {
            Waker::Release(r) => Some(r),
            Waker::Event(..) => None,
        })
        .collect();
    rounds.sort_unstable();
    rounds.dedup();
    let mut rounds = rounds.into_iter();
    let mut pos: Vec<usize> = at.iter().map(|r| r.start).collect();
    let mut ready: BinaryHeap<Reverse<(ThreadId, usize)>> = (0..n)
        .filter(|&k| pos[k] < end[k] && !waiting.contains_key(&(k, pos[k])))
        .map(|k| Reverse((ids[k], k)))
        .collect();
    // Frees the threads `woken` waited for and readies those that are at that position.
    let release = |woken: &[(usize, usize)],
                   waiting: &mut HashMap<(usize, usize), usize>,
                   pos: &[usize],
                   ready: &mut BinaryHeap<Reverse<(ThreadId, usize)>>| {
        for &(j, resume) in woken {
            if let Some(c) = waiting.get_mut(&(j, resume)) {
                *c -= 1;
                if *c == 0 {
                    waiting.remove(&(j, resume));
                    if pos[j] == resume && resume < end[j] {
                        ready.push(Reverse((ids[j], j)));
                    }
                }
            }
        }
    };
    let mut current: Option<usize> = None;
    let mut rank = 0u32;
    loop {
        let x = match current.take() {
            Some(x) if ready.peek().is_none_or(|Reverse(m)| (ids[x], x) < *m) => x,
            c => {
                if let Some(x) = c {
                    ready.push(Reverse((ids[x], x)));
                }
                match ready.pop() {
                    Some(Reverse((_, x))) => x,
                    None => match rounds.next() {
                        Some(r) => {
                            if let Some(woken) = by.get(&Waker::Release(r)) {
                                release(woken, &mut waiting, &pos, &mut ready);
                            }
                            continue;
                        }
                        None => break,
                    },
                }
            }
        };
        let p = pos[x];
        if p < at[x].end {
            rank += 1;
            ties[x][p] = rank;
        }
        pos[x] += 1;
        if let Some(woken) = by.get(&Waker::Event(x, p)) {
            release(woken, &mut waiting, &pos, &mut ready);
        }
        if pos[x] < end[x] && !waiting.contains_key(&(x, pos[x])) {
            current = Some(x);
        }
    }
    // Every event of the time has its rank when the wakes are consistent; rank any left
    // over after the others, by thread, so the key stays a total order.
    for (k, left) in at.iter().enumerate() {
        for tie in &mut ties[k][pos[k].min(left.end)..left.end] {
            if *tie == 0 {
                debug_assert!(false, "an event of slot {k} at time {t} not reached");
                rank += 1;
                *tie = rank;
            }
        }
    }
}
