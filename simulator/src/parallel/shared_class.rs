//! Miss classification of the shared levels, deferred off the weave.
//!
//! Telling a capacity miss from a conflict miss takes a fully associative LRU shadow of the
//! level, updated on every access that reaches it: about half of the weave's work, and the
//! weave is the engine's serial part. Nothing else depends on the shadow of a *shared* level
//! (its lookups scan the set directly; private levels keep their own shadows, which double as
//! a lookup index). So the weave only logs what the shadow must see — [`ShadowOp`]s, in the
//! weave's order, which is the global order — and the log is replayed into the shadows later,
//! on any host thread, as the first and the last task of the next bound phase (one half
//! each). Replaying the same operations in the same order gives the exact engine's classes.

use crate::counters::{MissClass, MissCounts};
use crate::shadow::{FaLru, Presence};

/// What a shared level's shadow must see, in order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ShadowOp {
    /// `line` was accessed at shared level `level` (a hit, or its fill after a miss).
    Touch { level: u32, line: u64 },
    /// `core` missed `line` at shared level `level`: classify before the line's fill.
    Miss { level: u32, core: u32, line: u64 },
}

/// The shared levels' shadows, the classes counted so far, and the log waiting for replay.
pub(crate) struct SharedClassifier {
    /// Per shared level.
    shadows: Vec<FaLru>,
    /// Per core, per shared level: the misses by class.
    pub misses: Vec<Vec<MissCounts>>,
    /// A weave's log, handed over for replay.
    ready: Vec<ShadowOp>,
    /// How much of `ready` has been replayed.
    replayed: usize,
}

impl SharedClassifier {
    /// For shared levels of `lines` lines each, on `cores` cores.
    pub fn new(lines: impl IntoIterator<Item = usize>, cores: usize) -> Self {
        let shadows: Vec<FaLru> = lines.into_iter().map(FaLru::new).collect();
        SharedClassifier {
            misses: vec![vec![MissCounts::default(); shadows.len()]; cores],
            shadows,
            ready: Vec::new(),
            replayed: 0,
        }
    }

    /// Replays the waiting log's first half (the bound phase's first task; its last task
    /// replays the rest: two halves on either side of the per-core tasks balance the phase
    /// better than one piece, which is often longer than a core's task). The halves may run
    /// in either order: the second replays whatever is left, the first then finds nothing.
    pub fn replay_first_half(&mut self) {
        self.replay_to(self.ready.len() / 2);
    }

    /// Replays what is left of the waiting log.
    pub fn replay(&mut self) {
        self.replay_to(self.ready.len());
    }

    /// Replays the waiting log up to (not including) operation `end`.
    fn replay_to(&mut self, end: usize) {
        let from = self.replayed.min(end);
        for &op in &self.ready[from..end] {
            match op {
                ShadowOp::Touch { level, line } => {
                    self.shadows[level as usize].access(line);
                }
                ShadowOp::Miss { level, core, line } => {
                    let class = match self.shadows[level as usize].presence(line) {
                        Presence::Never => MissClass::Compulsory,
                        Presence::Present => MissClass::Conflict,
                        Presence::Gone => MissClass::Capacity,
                    };
                    self.misses[core as usize][level as usize].add(class);
                }
            }
        }
        self.replayed = self.replayed.max(end);
    }

    /// Takes the weave's `log` (leaving it empty) to be replayed later; a log still waiting is
    /// replayed first, so logs are replayed in the order they were made.
    pub fn hand_over(&mut self, log: &mut Vec<ShadowOp>) {
        self.replay();
        self.ready.clear();
        self.replayed = 0;
        std::mem::swap(&mut self.ready, log);
    }

    /// Replays everything: the waiting log, then `log`.
    pub fn flush(&mut self, log: &mut Vec<ShadowOp>) {
        self.hand_over(log);
        self.replay();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log with compulsory, capacity and conflict misses on a 4-line shadow, on 2 cores.
    fn log() -> Vec<ShadowOp> {
        let mut ops = Vec::new();
        for round in 0..3u64 {
            for line in 0..6u64 {
                let core = (line % 2) as u32;
                ops.push(ShadowOp::Miss {
                    level: 0,
                    core,
                    line: line * (round + 1),
                });
                ops.push(ShadowOp::Touch {
                    level: 0,
                    line: line * (round + 1),
                });
                ops.push(ShadowOp::Touch {
                    level: 0,
                    line: round,
                });
            }
        }
        ops
    }

    /// The classes after handing `log()` over, running `steps`, and flushing.
    fn after(steps: impl FnOnce(&mut SharedClassifier)) -> Vec<Vec<MissCounts>> {
        let mut c = SharedClassifier::new([4], 2);
        c.hand_over(&mut log());
        steps(&mut c);
        c.flush(&mut Vec::new());
        c.misses
    }

    #[test]
    fn halves_in_either_order_equal_one_replay() {
        let mut whole = SharedClassifier::new([4], 2);
        whole.flush(&mut log());
        let total: u64 = whole.misses.iter().map(|m| m[0].total()).sum();
        assert_eq!(total, 18, "every miss counted once");
        for class in [
            |m: &MissCounts| m.compulsory,
            |m: &MissCounts| m.capacity,
            |m: &MissCounts| m.conflict,
        ] {
            assert!(
                whole.misses.iter().any(|m| class(&m[0]) > 0),
                "{:?}",
                whole.misses
            );
        }

        // The first half, then the rest, as the bound phase's first and last tasks.
        let split = after(|c| {
            c.replay_first_half();
            c.replay();
        });
        assert_eq!(split, whole.misses);
        // The last task first: it replays everything, and the first half finds nothing.
        let swapped = after(|c| {
            c.replay();
            c.replay_first_half();
        });
        assert_eq!(swapped, whole.misses);

        // A log handed over before the previous one was replayed is replayed after it.
        let mut two = SharedClassifier::new([4], 2);
        let mut first = log();
        let mut second = first.split_off(first.len() / 3);
        two.hand_over(&mut first);
        two.replay_first_half();
        two.hand_over(&mut second);
        two.flush(&mut Vec::new());
        assert_eq!(two.misses, whole.misses);
    }
}
