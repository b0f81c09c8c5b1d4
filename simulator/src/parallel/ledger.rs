//! Per-event byte accounting, so that the bandwidth timeline sees the parallel engine exactly
//! as it sees the exact engine.
//!
//! The timeline reads every core's cumulative bytes per data path after each event in the
//! global order. The parallel engine charges an event's bytes in up to two places — its core's
//! bound phase (private levels) and the weave (shared levels, other cores' copies) — at
//! different times and on different host threads. Each place therefore logs what each event
//! moved ([`Delta`], found by comparing the path counters before and after the event), and
//! after the quantum the [`Observer`] replays the quantum's events in the global order,
//! adding each event's deltas to a [`Ledger`] before the timeline looks at it. The results
//! equal the exact engine's timeline because the engines charge the same bytes to the same
//! event (`tests/parallel_bandwidth.rs` compares whole bandwidth reports).

use super::order::{for_each_in_order, Seq, ThreadStream};

use crate::bandwidth::{BandwidthReport, BandwidthTimeline, PathByteSource};
use crate::counters::PathBytes;

/// Bytes one event (at `seq` in the global order) moved over one path of one core.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Delta {
    pub seq: Seq,
    pub core: u32,
    pub path: u32,
    pub bytes: PathBytes,
}

/// Appends to `out` what moved on `core`'s paths since `before`, charged to event `seq`.
pub(crate) fn diff(
    seq: Seq,
    core: usize,
    before: &[PathBytes],
    now: &[PathBytes],
    out: &mut Vec<Delta>,
) {
    for (j, (b, n)) in before.iter().zip(now).enumerate() {
        if b != n {
            out.push(Delta {
                seq,
                core: core as u32,
                path: j as u32,
                bytes: PathBytes {
                    read: n.read - b.read,
                    write: n.write - b.write,
                },
            });
        }
    }
}

/// Every core's bytes per path, as of the event being observed.
struct Ledger {
    paths: usize,
    /// Core `c`, path `j` at `c * paths + j`.
    bytes: Vec<PathBytes>,
    /// Deltas added on paths other than the first.
    beyond_first: u64,
}

impl Ledger {
    fn add(&mut self, d: &Delta) {
        let b = &mut self.bytes[d.core as usize * self.paths + d.path as usize];
        b.read += d.bytes.read;
        b.write += d.bytes.write;
        if d.path > 0 {
            self.beyond_first += 1;
        }
    }
}

impl PathByteSource for Ledger {
    fn core_path_bytes(&self, core: usize, path: usize) -> PathBytes {
        if path >= self.paths {
            return PathBytes::default();
        }
        self.bytes
            .get(core * self.paths + path)
            .copied()
            .unwrap_or_default()
    }

    fn beyond_first_moves(&self) -> u64 {
        self.beyond_first
    }
}

/// The bandwidth timeline of a parallel simulation, fed one quantum at a time.
pub(crate) struct Observer {
    timeline: BandwidthTimeline,
    ledger: Ledger,
    /// The quantum's deltas, gathered from every log (kept for its allocation).
    deltas: Vec<Delta>,
}

impl Observer {
    pub fn new(timeline: BandwidthTimeline, cores: usize, paths: usize) -> Self {
        Observer {
            timeline,
            ledger: Ledger {
                paths,
                bytes: vec![PathBytes::default(); cores * paths],
                beyond_first: 0,
            },
            deltas: Vec::new(),
        }
    }

    /// Observes a simulated quantum: `threads` (each thread's events of the quantum), and
    /// the logs of the deltas its events caused (emptied).
    pub fn quantum<'a>(
        &mut self,
        threads: &[ThreadStream<'_>],
        logs: impl IntoIterator<Item = &'a mut Vec<Delta>>,
    ) {
        self.deltas.clear();
        for log in logs {
            self.deltas.append(log);
        }
        // Within one event the order does not matter: the timeline sees the sums.
        self.deltas.sort_unstable_by_key(|d| d.seq);
        let mut next = self.deltas.iter().peekable();
        let (ledger, timeline) = (&mut self.ledger, &mut self.timeline);
        for_each_in_order(threads, |seq, e| {
            while let Some(d) = next.next_if(|d| d.seq == seq) {
                ledger.add(d);
            }
            timeline.observe(e, ledger);
        });
    }

    /// The timeline's report.
    pub fn finish(self) -> BandwidthReport {
        self.timeline.finish()
    }
}
