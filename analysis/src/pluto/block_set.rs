//! A set of one layout's block start addresses, as bitmaps of 64 consecutive blocks and runs
//! of full bitmaps.
//!
//! Every block written during a run is remembered (to tell how much of an object's written
//! data a finding covers). Arrays are written in long stretches of consecutive blocks: a run
//! of full 64-block chunks takes a few dozen bytes however long it is. Blocks written in
//! scattered places take a bitmap per 64 blocks (a block written alone in its 64 costs about
//! what an entry of a set of addresses did).

use std::collections::BTreeMap;

/// Block starts `base + i·step`, by `i`: bit `i % 64` of chunk `i / 64`.
#[derive(Debug, Clone, Default)]
pub(super) struct BlockSet {
    /// The lowest block start of the layout's grid (its starts are `base + i·step`).
    base: u64,
    /// log2 of the distance between blocks (the line size).
    step_log: u32,
    /// Chunk number → its 64 blocks, for chunks not all set.
    chunks: BTreeMap<u64, u64>,
    /// Runs of chunks all set: first chunk → last chunk.
    full: BTreeMap<u64, u64>,
    /// The chunk inserted last and its new bits, not yet in `chunks` (blocks come in order).
    pending: Option<(u64, u64)>,
}

impl BlockSet {
    /// An empty set of the block starts of a layout with `step`-byte lines (a power of two)
    /// shifted by `shift` bytes: the starts are the addresses ≡ −`shift` (mod `step`).
    pub(super) fn new(step: u64, shift: u64) -> Self {
        debug_assert!(step.is_power_of_two());
        BlockSet {
            base: step.wrapping_sub(shift) & (step - 1),
            step_log: step.trailing_zeros(),
            chunks: BTreeMap::new(),
            full: BTreeMap::new(),
            pending: None,
        }
    }

    /// Adds a block start (one of the layout's grid).
    pub(super) fn insert(&mut self, block: u64) {
        debug_assert!(block >= self.base && (block - self.base).trailing_zeros() >= self.step_log);
        let i = block.wrapping_sub(self.base) >> self.step_log;
        let (chunk, bit) = (i >> 6, 1u64 << (i & 63));
        match &mut self.pending {
            Some((c, bits)) if *c == chunk => *bits |= bit,
            _ => {
                self.flush();
                self.pending = Some((chunk, bit));
            }
        }
    }

    /// Moves the pending chunk into the maps; [`BlockSet::count_in`] needs it there.
    pub(super) fn flush(&mut self) {
        let Some((chunk, bits)) = self.pending.take() else {
            return;
        };
        if self.full_run_of(chunk).is_some() {
            return;
        }
        let all = self.chunks.entry(chunk).or_default();
        *all |= bits;
        if *all == !0 {
            self.chunks.remove(&chunk);
            self.add_full(chunk);
        }
    }

    /// The run of full chunks holding `chunk`, as (first, last).
    fn full_run_of(&self, chunk: u64) -> Option<(u64, u64)> {
        let (&first, &last) = self.full.range(..=chunk).next_back()?;
        (chunk <= last).then_some((first, last))
    }

    /// Adds a full chunk to the runs, joining its neighbours.
    fn add_full(&mut self, chunk: u64) {
        let before = chunk
            .checked_sub(1)
            .and_then(|c| self.full_run_of(c))
            .map(|(first, _)| first);
        let after = chunk.checked_add(1).and_then(|c| self.full.remove(&c));
        let first = before.unwrap_or(chunk);
        self.full.insert(first, after.unwrap_or(chunk));
    }

    /// Blocks `b` of the set with `from <= b < end` (after [`BlockSet::flush`]).
    pub(super) fn count_in(&self, from: u64, end: u64) -> usize {
        debug_assert!(self.pending.is_none(), "count_in before flush");
        let step = 1u64 << self.step_log;
        // Grid indices i with from <= base + i·step < end.
        let index = |at: u64| at.saturating_sub(self.base).div_ceil(step);
        let (lo, hi) = (index(from), index(end));
        if lo >= hi {
            return 0;
        }
        // Set bits of chunk `chunk` with these bits, within [lo, hi).
        let within = |chunk: u64, bits: u64| {
            let first = chunk << 6;
            let mut bits = bits;
            if first < lo {
                bits &= !0u64 << (lo - first);
            }
            if hi - first < 64 {
                bits &= (1u64 << (hi - first)) - 1;
            }
            bits.count_ones() as usize
        };
        let (lo_chunk, hi_chunk) = (lo >> 6, (hi - 1) >> 6);
        let mut n = 0usize;
        for (&chunk, &bits) in self.chunks.range(lo_chunk..=hi_chunk) {
            n += within(chunk, bits);
        }
        let start = self
            .full_run_of(lo_chunk)
            .map_or(lo_chunk, |(first, _)| first);
        for (&first, &last) in self.full.range(start..=hi_chunk) {
            let (a, b) = (first.max(lo_chunk), last.min(hi_chunk));
            if a > b {
                continue;
            }
            // Whole chunks inside, the two ends masked.
            n += within(a, !0);
            if b > a {
                n += within(b, !0) + ((b - a - 1) as usize) * 64;
            }
        }
        n
    }

    /// Whether the set holds no block.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.full.is_empty() && self.pending.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        fn bitmaps_count_like_a_set_of_addresses(
            blocks in proptest::collection::vec(0u64..300, 0..150),
            stretches in proptest::collection::vec((0u64..300, 0u64..200), 0..4),
            queries in proptest::collection::vec((0u64..20_000, 0u64..20_000), 1..20),
            top in any::<bool>(),
            step_log in 3u32..10,
            shift_frac in 0u64..512,
        ) {
            let step = 1u64 << step_log;
            let shift = shift_frac % step;
            let grid = step.wrapping_sub(shift) & (step - 1);
            // Near the top of the address space too, where the last block has no successor.
            let base = if top { (u64::MAX - 299 * step) & !(step - 1) } else { 0 } + grid;
            let mut set = BlockSet::new(step, shift);
            let mut model = BTreeSet::new();
            // Scattered blocks, and stretches that fill whole chunks (runs of full chunks).
            let stretched = stretches.iter().flat_map(|&(s, n)| s..(s + n).min(300));
            for b in blocks.into_iter().chain(stretched) {
                let b = base + b * step;
                set.insert(b);
                model.insert(b);
            }
            set.flush();
            prop_assert_eq!(set.is_empty(), model.is_empty());
            for (a, b) in queries {
                let from = base.saturating_add(a * step / 64).saturating_sub(40);
                let end = base.saturating_add(b * step / 64);
                let want = if from < end { model.range(from..end).count() } else { 0 };
                prop_assert_eq!(set.count_in(from, end), want, "[{:#x}, {:#x})", from, end);
            }
            prop_assert_eq!(set.count_in(0, u64::MAX), model.range(..u64::MAX).count());
        }
    }

    #[test]
    fn a_long_stretch_is_one_run_of_full_chunks() {
        let mut set = BlockSet::new(64, 0);
        // Blocks 64..1000 written twice, out of order the second time.
        for b in (64..1000u64).chain((64..1000).rev()) {
            set.insert(b * 64);
        }
        set.flush();
        assert_eq!(set.full.len(), 1, "{:?}", set.full);
        assert_eq!(set.full.first_key_value(), Some((&1, &14)));
        assert_eq!(set.chunks.len(), 1, "the last, partial chunk");
        assert_eq!(set.count_in(0, u64::MAX), 936);
        assert_eq!(set.count_in(100 * 64 + 1, 900 * 64), 799);
    }
}
