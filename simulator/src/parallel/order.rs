//! The global order within a quantum, with each thread's events kept apart.
//!
//! The engine gets every thread's events on their own (`MergedEvents::next_quanta`, or a
//! merged slice split up by [`threads_apart`]), so a core's worker reads just its threads'
//! events. Where the global order matters — the weave's order of requests, lockstep quanta,
//! the bandwidth timeline — an event is named by its [`Seq`], which sorts like the global
//! order.

use cachescope_schema::{ThreadId, TimedEvent};

/// An event's place in the global order. At most times the global order is by thread, each
/// thread's events in their order: then `within` is the thread and `n` the event's index
/// among its thread's events of the quantum. At a time when a thread woke at that very time
/// (a lock handed over, a barrier completed, in zero time) it is not; then the event's tie
/// (its rank among that time's events, see `MergedEvents::next_quanta`) is `within`, and `n`
/// is 0. All events of a time are named the same way, so sorting by `Seq` gives the global
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct Seq {
    pub time: u64,
    pub within: u32,
    pub n: u32,
}

impl Seq {
    /// Sorts after every event.
    pub const END: Seq = Seq {
        time: u64::MAX,
        within: u32::MAX,
        n: u32::MAX,
    };

    /// Event `n` of its thread's events in the quantum, with its tie (0: none).
    #[inline]
    pub fn of(n: usize, e: &TimedEvent, tie: u32) -> Seq {
        if tie != 0 {
            return Seq {
                time: e.time,
                within: tie,
                n: 0,
            };
        }
        Seq {
            time: e.time,
            within: e.thread,
            // A thread's events of one quantum are counted by a u32 (checked by the driver).
            n: n as u32,
        }
    }
}

/// One thread's events of a quantum (or more), in order, and their ties: empty when none
/// has one, else one per event (see `Seq`).
#[derive(Debug, Clone, Copy)]
pub struct ThreadStream<'a> {
    /// The thread.
    pub thread: ThreadId,
    /// Its events, with the times the global order gives them.
    pub events: &'a [TimedEvent],
    /// Empty, or one tie per event: 0, or the event's rank among the events of its time when
    /// the global order at that time is not by thread.
    pub ties: &'a [u32],
}

impl<'a> ThreadStream<'a> {
    /// One stream per thread of `ids`, from the parallel vectors `MergedEvents::next_quanta`
    /// fills (events and ties in the order of `MergedEvents::thread_ids`).
    pub fn of_quanta(
        ids: &[ThreadId],
        events: &'a [Vec<TimedEvent>],
        ties: &'a [Vec<u32>],
    ) -> Vec<ThreadStream<'a>> {
        ids.iter()
            .zip(events.iter().zip(ties))
            .map(|(&thread, (events, ties))| ThreadStream {
                thread,
                events,
                ties,
            })
            .collect()
    }
}

impl ThreadStream<'_> {
    /// The tie of event `i` (0 when there are none).
    #[inline]
    pub(crate) fn tie(&self, i: usize) -> u32 {
        self.ties.get(i).copied().unwrap_or(0)
    }
}

/// One thread's events, owned (see [`threads_apart`]).
#[derive(Debug, Clone, Default)]
pub struct ThreadEvents {
    /// The thread.
    pub thread: ThreadId,
    /// Its events in order.
    pub events: Vec<TimedEvent>,
    /// One tie per event.
    pub ties: Vec<u32>,
}

impl ThreadEvents {
    /// The events as the engine takes them.
    pub fn stream(&self) -> ThreadStream<'_> {
        ThreadStream {
            thread: self.thread,
            events: &self.events,
            ties: &self.ties,
        }
    }
}

/// Calls `f` with every event of `threads` (each one thread's events of a quantum, in order)
/// in the global order, with its [`Seq`].
pub(crate) fn for_each_in_order<'a>(
    threads: &[ThreadStream<'a>],
    mut f: impl FnMut(Seq, &'a TimedEvent),
) {
    if let [only] = threads {
        for (n, e) in only.events.iter().enumerate() {
            f(Seq::of(n, e, only.tie(n)), e);
        }
        return;
    }
    let mut pos = vec![0usize; threads.len()];
    loop {
        // The thread whose next event comes first (few threads: a scan beats a heap).
        let mut best: Option<(usize, Seq)> = None;
        for (t, s) in threads.iter().enumerate() {
            if let Some(e) = s.events.get(pos[t]) {
                let seq = Seq::of(pos[t], e, s.tie(pos[t]));
                if best.is_none_or(|(_, b)| seq < b) {
                    best = Some((t, seq));
                }
            }
        }
        let Some((t, seq)) = best else { return };
        f(seq, &threads[t].events[pos[t]]);
        pos[t] += 1;
    }
}

/// Splits events in the global order into each thread's events (threads ascending), with
/// every event's rank among the events of its time as its tie, so that `Seq` gives back
/// exactly the given order.
pub fn threads_apart(events: &[TimedEvent]) -> Vec<ThreadEvents> {
    let mut threads: Vec<ThreadEvents> = Vec::new();
    let mut rank = 0u32;
    let mut time = None;
    for e in events {
        if time != Some(e.time) {
            time = Some(e.time);
            rank = 0;
        }
        rank += 1;
        let i = match threads.binary_search_by_key(&e.thread, |t| t.thread) {
            Ok(i) => i,
            Err(i) => {
                threads.insert(
                    i,
                    ThreadEvents {
                        thread: e.thread,
                        ..ThreadEvents::default()
                    },
                );
                i
            }
        };
        threads[i].events.push(*e);
        threads[i].ties.push(rank);
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

    fn in_order(threads: &[ThreadEvents]) -> Vec<(Seq, TimedEvent)> {
        let streams: Vec<ThreadStream<'_>> = threads.iter().map(ThreadEvents::stream).collect();
        let mut seen = Vec::new();
        for_each_in_order(&streams, |s, e| seen.push((s, *e)));
        seen
    }

    #[test]
    fn threads_apart_come_back_in_the_given_order() {
        // At time 5 thread 1 comes before thread 0 (as when thread 1 woke thread 0 then).
        let merged = [ev(0, 1), ev(5, 1), ev(5, 0), ev(5, 1), ev(7, 0), ev(9, 2)];
        let split = threads_apart(&merged);
        assert_eq!(
            split
                .iter()
                .map(|t| (t.thread, t.events.len()))
                .collect::<Vec<_>>(),
            vec![(0, 2), (1, 3), (2, 1)]
        );
        let seen = in_order(&split);
        assert_eq!(
            seen.iter().map(|(_, e)| *e).collect::<Vec<_>>(),
            merged.to_vec()
        );
        let seqs: Vec<Seq> = seen.iter().map(|(s, _)| *s).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        assert!(seqs.iter().all(|&s| s < Seq::END));
    }

    #[test]
    fn without_ties_threads_come_by_id() {
        let t = |thread, times: &[u64]| ThreadEvents {
            thread,
            events: times.iter().map(|&time| ev(time, thread)).collect(),
            ties: Vec::new(),
        };
        let seen = in_order(&[t(3, &[0, 5, 5]), t(1, &[5, 6])]);
        let order: Vec<(u64, u32)> = seen.iter().map(|(_, e)| (e.time, e.thread)).collect();
        assert_eq!(order, vec![(0, 3), (5, 1), (5, 3), (5, 3), (6, 1)]);
    }
}
