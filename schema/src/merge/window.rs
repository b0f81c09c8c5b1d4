//! Whole quanta of the global order with each thread's events kept apart: the input of the
//! parallel engine, which simulates every core's events of a quantum on its own and needs
//! the global order only for the few requests that reach other cores.
//!
//! Between two sync events a thread's clock depends on its own events alone, so a thread's
//! run of accesses and time advances can be released up to the end of the window at once
//! instead of event by event; only sync events (which move other threads' clocks) are taken
//! in the global order. Every event gets the time the global order gives it.

use std::cmp::Reverse;

use super::{MergedEvents, TimedEvent, Wait};
use crate::error::Result;
use crate::event::{Event, ThreadId};

impl MergedEvents {
    /// The threads in the order of the `out` vectors of [`Self::next_quanta`].
    pub fn thread_ids(&self) -> Vec<ThreadId> {
        self.threads.iter().map(|t| t.cursor.thread()).collect()
    }

    /// Appends the events of the next whole quanta of `slack` time units (quantum `q` holds
    /// the times `q·slack ..= q·slack + slack − 1`) to `out`, one vector per thread in the
    /// order of [`Self::thread_ids`]: each event with the time [`Self::next_batch`] gives it,
    /// each thread's in its own order, until at least `max` events were appended (at a quantum
    /// boundary: a quantum is never split between calls) or the merge ends. Quanta without
    /// events are skipped. `Ok(false)` once the merge has ended (`out` may have received
    /// events before), and after an error.
    ///
    /// # Panics
    /// If `out` has fewer vectors than the trace has threads.
    pub fn next_quanta(
        &mut self,
        slack: u64,
        max: usize,
        out: &mut [Vec<TimedEvent>],
    ) -> Result<bool> {
        assert!(out.len() >= self.threads.len(), "one vector per thread");
        let slack = slack.max(1);
        if self.finished {
            return Ok(false);
        }
        let mut added = 0usize;
        // The last quantum of this call, once the first event fixed the first one.
        let mut last: Option<u64> = None;
        loop {
            let i = match self.current.take() {
                Some(i) => i,
                None => match self.ready.pop() {
                    Some(Reverse((_, _, i))) => i,
                    None => {
                        if self.threads.iter().all(|t| t.wait == Wait::Done) {
                            self.finished = true;
                            return Ok(false);
                        }
                        if self.incomplete && self.release_waits() {
                            continue;
                        }
                        self.finished = true;
                        return Err(self.deadlock());
                    }
                },
            };
            // `i` is first in the global order: every event left is at its clock or later.
            let quantum = self.threads[i].clock / slack;
            let last = match last {
                Some(l) if quantum <= l => l,
                Some(_) if added >= max => {
                    self.current = Some(i);
                    return Ok(true);
                }
                _ => *last.insert(quantum),
            };
            let ran = self.run_plain(i, slack, last, &mut out[i]);
            added += ran;
            let t = &self.threads[i];
            if ran == 0 && t.clock / slack <= last {
                // The next event is a sync event or in a chunk not decoded yet: the one-event
                // path, taken while `i` is first in the global order (after a run, another
                // thread may come first now).
                match self.step(i) {
                    Ok(Some(e)) => {
                        self.now = self.now.max(e.time);
                        out[i].push(e);
                        added += 1;
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

    /// Appends thread `i`'s decoded accesses and time advances that start in quanta up to
    /// `last` to `out`, up to its next sync event or the end of the decoded chunk; returns
    /// how many.
    fn run_plain(&mut self, i: usize, slack: u64, last: u64, out: &mut Vec<TimedEvent>) -> usize {
        let t = &mut self.threads[i];
        let tid = t.cursor.thread();
        let mut clock = t.clock;
        let mut n = 0;
        for &event in t.cursor.pending() {
            if clock / slack > last {
                break;
            }
            let next = match event {
                Event::Access(_) => clock.saturating_add(self.access_cost),
                Event::Advance { units, .. } => clock.saturating_add(units),
                _ => break,
            };
            out.push(TimedEvent {
                time: clock,
                thread: tid,
                event,
            });
            clock = next;
            n += 1;
        }
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
