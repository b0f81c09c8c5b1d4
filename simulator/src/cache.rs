//! One set-associative cache array: tags, per-line state bits and the replacement policy.
//! Set counts need not be powers of two (set = line number mod sets).

use crate::model::{LevelConfig, Replacement};

/// Tag of an empty way.
const INVALID: u64 = u64::MAX;

/// The line has been written since it was filled (must be written back on eviction).
pub const DIRTY: u8 = 1;
/// The core holds the line exclusively (MESI E or M): a write needs no coherence action.
pub const OWNED: u8 = 2;

/// A small, fast, seeded generator for random replacement (SplitMix64).
#[derive(Debug, Clone)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A line pushed out of the cache by a fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    /// Line number (address / line size).
    pub line: u64,
    /// Its state bits.
    pub state: u8,
    /// The slot it left (now the new line's).
    pub slot: usize,
}

/// One cache array.
#[derive(Debug, Clone)]
pub struct Cache {
    sets: u64,
    assoc: usize,
    set_mask: Option<u64>,
    policy: Replacement,
    tags: Vec<u64>,
    state: Vec<u8>,
    /// LRU: last-use stamp; FIFO: fill stamp; 0 for an empty way (uses and fills are
    /// stamped from 1 on).
    stamp: Vec<u64>,
    /// Tree-PLRU bits, one word per set.
    plru: Vec<u64>,
    clock: u64,
    rng: SplitMix,
}

impl Cache {
    /// An empty cache of `level`'s geometry with lines of `line_size` bytes; `seed` drives
    /// random replacement.
    pub fn new(level: &LevelConfig, line_size: u32, seed: u64) -> Self {
        let sets = level.sets(line_size);
        let assoc = level.assoc as usize;
        let n = (sets as usize) * assoc;
        Cache {
            sets,
            assoc,
            set_mask: sets.is_power_of_two().then(|| sets - 1),
            policy: level.replacement,
            tags: vec![INVALID; n],
            state: vec![0; n],
            stamp: vec![0; n],
            plru: vec![
                0;
                if level.replacement == Replacement::Plru {
                    sets as usize
                } else {
                    0
                }
            ],
            clock: 0,
            rng: SplitMix(seed),
        }
    }

    /// Number of sets.
    pub fn sets(&self) -> u64 {
        self.sets
    }

    /// Ways per set.
    pub fn assoc(&self) -> usize {
        self.assoc
    }

    #[inline]
    fn set_of(&self, line: u64) -> usize {
        match self.set_mask {
            Some(m) => (line & m) as usize,
            None => (line % self.sets) as usize,
        }
    }

    /// Number of ways of `line`'s set that hold no line.
    pub fn free_ways(&self, line: u64) -> usize {
        let base = self.set_of(line) * self.assoc;
        self.tags[base..base + self.assoc]
            .iter()
            .filter(|&&t| t == INVALID)
            .count()
    }

    /// Index of `line`'s set.
    pub fn set_index(&self, line: u64) -> u64 {
        self.set_of(line) as u64
    }

    /// The slot holding `line`, if present.
    #[inline]
    pub fn find(&self, line: u64) -> Option<usize> {
        let base = self.set_of(line) * self.assoc;
        self.tags[base..base + self.assoc]
            .iter()
            .position(|&t| t == line)
            .map(|w| base + w)
    }

    /// Whether `line` is present.
    pub fn contains(&self, line: u64) -> bool {
        self.find(line).is_some()
    }

    /// State bits of a slot.
    #[inline]
    pub fn state(&self, slot: usize) -> u8 {
        self.state[slot]
    }

    /// Sets state bits of a slot.
    #[inline]
    pub fn set_state(&mut self, slot: usize, state: u8) {
        self.state[slot] = state;
    }

    /// Records a use of `slot` for the replacement policy.
    #[inline]
    pub fn touch(&mut self, slot: usize) {
        match self.policy {
            Replacement::Lru => {
                self.clock += 1;
                self.stamp[slot] = self.clock;
            }
            Replacement::Plru => self.plru_touch(slot),
            Replacement::Fifo | Replacement::Random => {}
        }
    }

    fn plru_touch(&mut self, slot: usize) {
        let set = slot / self.assoc;
        let way = slot % self.assoc;
        let mut bits = self.plru[set];
        let mut node = 0usize; // heap-ordered tree: children of n are 2n+1, 2n+2
        let mut lo = 0usize;
        let mut span = self.assoc;
        while span > 1 {
            span /= 2;
            let right = way >= lo + span;
            // Point the node away from the used half.
            if right {
                bits &= !(1 << node);
                lo += span;
                node = 2 * node + 2;
            } else {
                bits |= 1 << node;
                node = 2 * node + 1;
            }
        }
        self.plru[set] = bits;
    }

    fn plru_victim(&self, set: usize) -> usize {
        let bits = self.plru[set];
        let (mut node, mut lo, mut span) = (0usize, 0usize, self.assoc);
        while span > 1 {
            span /= 2;
            if bits & (1 << node) != 0 {
                lo += span;
                node = 2 * node + 2;
            } else {
                node = 2 * node + 1;
            }
        }
        lo
    }

    /// Puts `line` with `state` into its set (an empty way first, else the policy's victim)
    /// and returns what it displaced. The line must not be present.
    pub fn fill(&mut self, line: u64, state: u8) -> Option<Evicted> {
        self.fill_at(line, state).1
    }

    /// Like [`Self::fill`], and also returns the slot the line went to.
    pub fn fill_at(&mut self, line: u64, state: u8) -> (usize, Option<Evicted>) {
        debug_assert!(self.find(line).is_none(), "line {line:#x} filled twice");
        let set = self.set_of(line);
        let base = set * self.assoc;
        let way = match self.policy {
            // Empty ways have stamp 0 and held lines later ones: the first way with the
            // smallest stamp is the first empty way, else the policy's victim. One pass.
            Replacement::Lru | Replacement::Fifo => {
                let s = &self.stamp[base..base + self.assoc];
                let (mut way, mut oldest) = (0, u64::MAX);
                for (w, &stamp) in s.iter().enumerate() {
                    if stamp < oldest {
                        (way, oldest) = (w, stamp);
                    }
                }
                way
            }
            Replacement::Plru | Replacement::Random => {
                let empty = self.tags[base..base + self.assoc]
                    .iter()
                    .position(|&t| t == INVALID);
                match (empty, self.policy) {
                    (Some(w), _) => w,
                    (None, Replacement::Plru) => self.plru_victim(set),
                    (None, _) => (self.rng.next() % self.assoc as u64) as usize,
                }
            }
        };
        let slot = base + way;
        let old = self.tags[slot];
        let evicted = (old != INVALID).then(|| Evicted {
            line: old,
            state: self.state[slot],
            slot,
        });
        self.tags[slot] = line;
        self.state[slot] = state;
        self.clock += 1;
        self.stamp[slot] = self.clock;
        if self.policy == Replacement::Plru {
            self.plru_touch(slot);
        }
        (slot, evicted)
    }

    /// Removes `line`; returns its state if it was present.
    pub fn invalidate(&mut self, line: u64) -> Option<u8> {
        self.invalidate_slot(line).map(|(_, state)| state)
    }

    /// Removes `line`; returns the slot it left and its state if it was present.
    pub fn invalidate_slot(&mut self, line: u64) -> Option<(usize, u8)> {
        let slot = self.find(line)?;
        self.tags[slot] = INVALID;
        // An empty way's stamp is 0 (see `fill_at`).
        self.stamp[slot] = 0;
        let s = self.state[slot];
        self.state[slot] = 0;
        Some((slot, s))
    }

    /// Lines currently held, in slot order (for invariant checks).
    pub fn lines(&self) -> impl Iterator<Item = (u64, u8)> + '_ {
        self.tags
            .iter()
            .zip(&self.state)
            .filter(|(t, _)| **t != INVALID)
            .map(|(t, s)| (*t, *s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Inclusion, WritePolicy};
    use proptest::prelude::*;

    fn level(size: u64, assoc: u32, r: Replacement) -> LevelConfig {
        LevelConfig {
            name: "L1".into(),
            size,
            assoc,
            replacement: r,
            write: WritePolicy::Back,
            inclusion: Inclusion::NonInclusive,
            shared: false,
            latency: 0,
        }
    }

    /// Naive reference: each set is a list; LRU and FIFO by order, PLRU by an explicit tree of
    /// booleans.
    struct Naive {
        sets: Vec<Vec<u64>>,
        trees: Vec<Vec<bool>>,
        ways: Vec<Vec<Option<u64>>>,
        assoc: usize,
        policy: Replacement,
    }

    impl Naive {
        fn new(sets: usize, assoc: usize, policy: Replacement) -> Self {
            Naive {
                sets: vec![Vec::new(); sets],
                trees: vec![vec![false; assoc]; sets],
                ways: vec![vec![None; assoc]; sets],
                assoc,
                policy,
            }
        }

        /// Returns whether the access hits.
        fn access(&mut self, line: u64) -> bool {
            let s = (line % self.sets.len() as u64) as usize;
            match self.policy {
                Replacement::Lru | Replacement::Fifo => {
                    let list = &mut self.sets[s];
                    if let Some(i) = list.iter().position(|&l| l == line) {
                        if self.policy == Replacement::Lru {
                            let l = list.remove(i);
                            list.push(l);
                        }
                        return true;
                    }
                    if list.len() == self.assoc {
                        list.remove(0);
                    }
                    list.push(line);
                    false
                }
                Replacement::Plru => {
                    let ways = &mut self.ways[s];
                    let tree = &mut self.trees[s];
                    let hit = ways.iter().position(|&w| w == Some(line));
                    let way = match hit {
                        Some(w) => w,
                        None => match ways.iter().position(|w| w.is_none()) {
                            Some(w) => w,
                            None => {
                                // Follow the tree: false = left subtree is older.
                                let (mut node, mut lo, mut span) = (0, 0, self.assoc);
                                while span > 1 {
                                    span /= 2;
                                    if tree[node] {
                                        lo += span;
                                        node = 2 * node + 2;
                                    } else {
                                        node = 2 * node + 1;
                                    }
                                }
                                lo
                            }
                        },
                    };
                    ways[way] = Some(line);
                    let (mut node, mut lo, mut span) = (0, 0, self.assoc);
                    while span > 1 {
                        span /= 2;
                        let right = way >= lo + span;
                        tree[node] = !right;
                        if right {
                            lo += span;
                            node = 2 * node + 2;
                        } else {
                            node = 2 * node + 1;
                        }
                    }
                    hit.is_some()
                }
                Replacement::Random => unreachable!(),
            }
        }

        /// Removes `line` (a coherence invalidation): its way becomes empty.
        fn invalidate(&mut self, line: u64) {
            let s = (line % self.sets.len() as u64) as usize;
            self.sets[s].retain(|&l| l != line);
            for w in &mut self.ways[s] {
                if *w == Some(line) {
                    *w = None;
                }
            }
        }
    }

    fn simulate(c: &mut Cache, line: u64) -> bool {
        match c.find(line) {
            Some(slot) => {
                c.touch(slot);
                true
            }
            None => {
                c.fill(line, 0);
                false
            }
        }
    }

    proptest! {
        /// Same hits as the naive model, also when lines are invalidated (an empty way is
        /// filled before any line is evicted).
        #[test]
        fn policies_match_naive_reference(
            policy in prop::sample::select(vec![Replacement::Lru, Replacement::Fifo, Replacement::Plru]),
            assoc_log in 0u32..4,
            sets in prop::sample::select(vec![1usize, 2, 3, 4, 6]),
            ops in prop::collection::vec((0u64..48, 0u8..8), 1..400),
        ) {
            let assoc = 1usize << assoc_log;
            let mut c = Cache::new(&level((sets * assoc * 64) as u64, assoc as u32, policy), 64, 1);
            let mut n = Naive::new(sets, assoc, policy);
            for (i, &(l, op)) in ops.iter().enumerate() {
                if op == 0 {
                    c.invalidate(l);
                    n.invalidate(l);
                    continue;
                }
                prop_assert_eq!(simulate(&mut c, l), n.access(l), "access {} line {}", i, l);
            }
        }
    }

    #[test]
    fn random_replacement_is_seeded() {
        let run = |seed| {
            let mut c = Cache::new(&level(4 * 64, 4, Replacement::Random), 64, seed);
            (0..200u64)
                .map(|i| simulate(&mut c, (i * 7) % 11))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }

    /// X-Ray (seed 000) Theorem 1: repeating the strided sequence ⟨m0, S, N⟩ gives only hits
    /// in steady state iff N ≤ A·⌈T/S⌉, with T = C/A.
    #[test]
    fn xray_theorem_1() {
        for (size, assoc, line) in [
            (4096u64, 4u32, 64u32),
            (8192, 2, 32),
            (3072, 3, 64),
            (2048, 1, 16),
        ] {
            let t = size / assoc as u64;
            for stride in [
                line as u64 / 2,
                line as u64,
                2 * line as u64,
                256,
                1024,
                t,
                2 * t,
            ] {
                let limit = assoc as u64 * t.div_ceil(stride);
                for n in [limit.saturating_sub(1).max(1), limit, limit + 1, limit + 3] {
                    let mut c = Cache::new(&level(size, assoc, Replacement::Lru), line, 0);
                    let addrs: Vec<u64> = (0..n).map(|k| (1 << 20) + k * stride).collect();
                    for &a in &addrs {
                        simulate(&mut c, a / line as u64);
                    }
                    let all_hit = addrs.iter().all(|&a| simulate(&mut c, a / line as u64));
                    assert_eq!(
                        all_hit,
                        n <= limit,
                        "C={size} A={assoc} B={line} S={stride} N={n} limit={limit}"
                    );
                }
            }
        }
    }
}
