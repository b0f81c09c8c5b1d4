//! Miss classification of the shared levels, deferred off the weave.
//!
//! Telling a capacity miss from a conflict miss takes a fully associative LRU shadow of the
//! level, updated on every access that reaches it: about half of the weave's work, and the
//! weave is the engine's serial part. Nothing else depends on the shadow of a *shared* level
//! (its lookups scan the set directly; private levels keep their own shadows, which double as
//! a lookup index). So the weave only logs what the shadow must see — [`ShadowOp`]s, in the
//! weave's order, which is the global order — and the log is replayed into the shadows later,
//! on any host thread, as a task of the next bound phase. Replaying the same operations in
//! the same order gives the exact engine's classes.

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
}

impl SharedClassifier {
    /// For shared levels of `lines` lines each, on `cores` cores.
    pub fn new(lines: impl IntoIterator<Item = usize>, cores: usize) -> Self {
        let shadows: Vec<FaLru> = lines.into_iter().map(FaLru::new).collect();
        SharedClassifier {
            misses: vec![vec![MissCounts::default(); shadows.len()]; cores],
            shadows,
            ready: Vec::new(),
        }
    }

    /// Whether a log waits for replay.
    pub fn has_work(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Replays the waiting log.
    pub fn replay(&mut self) {
        for op in self.ready.drain(..) {
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
    }

    /// Takes the weave's `log` (leaving it empty) to be replayed later; a log still waiting is
    /// replayed first, so logs are replayed in the order they were made.
    pub fn hand_over(&mut self, log: &mut Vec<ShadowOp>) {
        if self.has_work() {
            self.replay();
        }
        std::mem::swap(&mut self.ready, log);
    }

    /// Replays everything: the waiting log, then `log`.
    pub fn flush(&mut self, log: &mut Vec<ShadowOp>) {
        self.hand_over(log);
        self.replay();
    }
}
