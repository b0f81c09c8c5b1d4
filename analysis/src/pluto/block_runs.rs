//! A set of one layout's block start addresses, kept as runs of consecutive blocks.
//!
//! Every block written during a run is remembered (to tell how much of an object's written
//! data a finding covers). Arrays are written in long stretches of consecutive blocks, so a
//! run per stretch takes a few dozen bytes where a set of addresses took 8 or more per block.

use std::collections::BTreeMap;

/// Block starts `first, first + step, …, last` per run; runs are disjoint and not adjacent.
#[derive(Debug, Clone, Default)]
pub(super) struct BlockRuns {
    /// Distance between consecutive blocks (the line size).
    step: u64,
    /// First block → last block of each run.
    runs: BTreeMap<u64, u64>,
}

impl BlockRuns {
    /// An empty set of blocks `step` bytes apart.
    pub(super) fn new(step: u64) -> Self {
        BlockRuns {
            step,
            runs: BTreeMap::new(),
        }
    }

    /// Adds a block start (all starts of one set lie on one grid of `step`).
    pub(super) fn insert(&mut self, block: u64) {
        let step = self.step;
        let mut grown = None;
        if let Some((&first, last)) = self.runs.range_mut(..=block).next_back() {
            if block <= *last {
                return;
            }
            if last.checked_add(step) == Some(block) {
                *last = block;
                grown = Some(first);
            }
        }
        let next = block
            .checked_add(step)
            .and_then(|n| self.runs.remove(&n).map(|last| (n, last)));
        match (grown, next) {
            (Some(first), Some((_, last))) => {
                self.runs.insert(first, last);
            }
            (Some(_), None) => {}
            (None, Some((_, last))) => {
                self.runs.insert(block, last);
            }
            (None, None) => {
                self.runs.insert(block, block);
            }
        }
    }

    /// Blocks `b` of the set with `from <= b < end`.
    pub(super) fn count_in(&self, from: u64, end: u64) -> usize {
        let step = self.step;
        let start = self
            .runs
            .range(..=from)
            .next_back()
            .map_or(from, |(&first, _)| first);
        let mut n = 0u64;
        for (&first, &last) in self.runs.range(start..) {
            if first >= end {
                break;
            }
            let lo = if first >= from {
                Some(first)
            } else {
                ((from - first).div_ceil(step))
                    .checked_mul(step)
                    .and_then(|d| first.checked_add(d))
            };
            let hi = last.min(end - 1);
            if let Some(lo) = lo.filter(|&lo| lo <= hi) {
                n += (hi - lo) / step + 1;
            }
        }
        n as usize
    }

    /// Whether the set holds no block.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        fn runs_count_like_a_set_of_addresses(
            blocks in proptest::collection::vec(0u64..200, 0..120),
            queries in proptest::collection::vec((0u64..13_000, 0u64..13_000), 1..20),
            top in any::<bool>(),
        ) {
            let step = 64;
            // Near the top of the address space too, where the last block has no successor.
            let base = if top { u64::MAX - 199 * step - 63 } else { 24 };
            let mut runs = BlockRuns::new(step);
            let mut set = BTreeSet::new();
            for b in blocks {
                let b = base + b * step;
                runs.insert(b);
                set.insert(b);
            }
            prop_assert_eq!(runs.is_empty(), set.is_empty());
            for (a, b) in queries {
                let (from, end) = (base.saturating_add(a).saturating_sub(40), base.saturating_add(b));
                let want = if from < end { set.range(from..end).count() } else { 0 };
                let got = if from < end { runs.count_in(from, end) } else { 0 };
                prop_assert_eq!(got, want, "[{:#x}, {:#x})", from, end);
            }
        }
    }
}
