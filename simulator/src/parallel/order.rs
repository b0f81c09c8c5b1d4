//! The global order within a quantum, with each thread's events kept apart.
//!
//! The engine gets every thread's events on their own (`MergedEvents::next_quanta`, or a
//! merged slice split up), so a core's worker reads just its threads' events. Where the global
//! (time, thread) order matters — the weave's order of requests, lockstep quanta, the
//! bandwidth timeline — an event is named by its [`Seq`], which sorts like the global order.

use cachescope_schema::{ThreadId, TimedEvent};

/// An event's place in the global order: its time, its thread, and its index among its
/// thread's events of the quantum (a thread's events may share a time). Sorting by `Seq`
/// gives the trace's global order, which is by (time, thread) with each thread's events in
/// their own order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct Seq {
    pub time: u64,
    pub thread: ThreadId,
    pub n: u32,
}

impl Seq {
    /// Sorts after every event.
    pub const END: Seq = Seq {
        time: u64::MAX,
        thread: ThreadId::MAX,
        n: u32::MAX,
    };

    /// Event `n` of its thread's events in the quantum.
    #[inline]
    pub fn of(n: usize, e: &TimedEvent) -> Seq {
        Seq {
            time: e.time,
            thread: e.thread,
            // A thread's events of one quantum are counted by a u32 (checked by the driver).
            n: n as u32,
        }
    }
}

/// Calls `f` with every event of `threads` (each one thread's events of a quantum, in order)
/// in the global order, with its [`Seq`].
pub(crate) fn for_each_in_order<'a>(
    threads: &[&'a [TimedEvent]],
    mut f: impl FnMut(Seq, &'a TimedEvent),
) {
    if let [only] = threads {
        for (n, e) in only.iter().enumerate() {
            f(Seq::of(n, e), e);
        }
        return;
    }
    let mut pos = vec![0usize; threads.len()];
    loop {
        // The thread whose next event comes first (few threads: a scan beats a heap).
        let mut best: Option<(usize, Seq)> = None;
        for (t, events) in threads.iter().enumerate() {
            if let Some(e) = events.get(pos[t]) {
                let s = Seq::of(pos[t], e);
                if best.is_none_or(|(_, b)| s < b) {
                    best = Some((t, s));
                }
            }
        }
        let Some((t, s)) = best else { return };
        f(s, &threads[t][pos[t]]);
        pos[t] += 1;
    }
}

/// Splits events in the global order into each thread's events (threads ascending).
pub(crate) fn split_by_thread(events: &[TimedEvent]) -> Vec<(ThreadId, Vec<TimedEvent>)> {
    let mut threads: Vec<(ThreadId, Vec<TimedEvent>)> = Vec::new();
    for e in events {
        match threads.binary_search_by_key(&e.thread, |(t, _)| *t) {
            Ok(i) => threads[i].1.push(*e),
            Err(i) => threads.insert(i, (e.thread, vec![*e])),
        }
    }
    threads
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachescope_schema::Event;

    fn ev(time: u64, thread: ThreadId) -> TimedEvent {
        TimedEvent {
            time,
            thread,
            event: Event::Advance { units: 0, flops: 0 },
        }
    }

    #[test]
    fn threads_apart_come_back_in_the_global_order() {
        // Thread 1 has two events at time 5, thread 0 one at time 5 and one later.
        let merged = [ev(0, 1), ev(5, 0), ev(5, 1), ev(5, 1), ev(7, 0), ev(9, 2)];
        let split = split_by_thread(&merged);
        assert_eq!(
            split.iter().map(|(t, v)| (*t, v.len())).collect::<Vec<_>>(),
            vec![(0, 2), (1, 3), (2, 1)]
        );
        let slices: Vec<&[TimedEvent]> = split.iter().map(|(_, v)| v.as_slice()).collect();
        let mut seen = Vec::new();
        for_each_in_order(&slices, |s, e| seen.push((s, *e)));
        assert_eq!(
            seen.iter().map(|(_, e)| *e).collect::<Vec<_>>(),
            merged.to_vec()
        );
        let seqs: Vec<Seq> = seen.iter().map(|(s, _)| *s).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        assert_eq!((seqs[3].thread, seqs[3].n), (1, 2));
        assert!(seqs.iter().all(|&s| s < Seq::END));
    }
}
