//! Miss classification helpers: a fully associative LRU "shadow" cache of the same number of
//! lines (a miss it would have hit is a conflict miss, otherwise a capacity miss) and the set
//! of lines a cache has ever held (a first miss is compulsory).

use rustc_hash::FxHashMap;

use crate::fib_hash::fib_index;
use crate::line_set::LineSet;

/// End of the recency list.
const NIL: u32 = u32::MAX;

/// Lines kept in the front array (see [`FaLru`]).
const FRONT: usize = 8;

/// Entries of the front's position hints (see [`FaLru::front_find`]); a power of two.
const HINTS: usize = 32;

/// Tag of a front line that is not in the real cache (see [`FaLru`]).
pub const NO_TAG: u32 = u32::MAX;

/// An unused front entry. Lines are addresses divided by a line size of at least 8 bytes, so
/// no line number reaches it: a search of all entries never matches an unused one.
const EMPTY: u64 = u64::MAX;

/// Last use of an unused front entry: later than any real use.
const UNUSED: u64 = u64::MAX;

/// Whether a line is in a [`FaLru`], and whether it ever was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Never accessed.
    Never,
    /// Accessed before, but evicted or removed since.
    Gone,
    /// Present.
    Present,
}

/// Fully associative LRU cache of line numbers with O(1) access.
///
/// The LRU stack is split in two: the (up to) `FRONT` most recently used lines in a small
/// array, then all older lines in a doubly linked list. A loop that cycles through a few
/// lines only touches the array, so most accesses cost a fixed-width compare and one store;
/// the order of the whole stack stays exact.
///
/// The array is not kept in order: each entry carries the time of its last use, and only
/// when a new line pushes the oldest entry into the list is the smallest time looked for. A
/// hit neither shifts entries nor branches on where the line was found (mispredicted
/// branches of an ordered scan were the largest cost of the exact engine's hit path). A few
/// position hints (line → front position, by a hash of the line, checked before use) find
/// most front lines without comparing all entries.
///
/// **Shadowing a real cache** ([`FaLru::with_slots`]): the shadow of a set-associative cache
/// holds mostly the same lines as that cache. Each front entry carries the line's slot in the
/// real cache as its tag ([`NO_TAG`] once the line has left it), so that a hit on a recent line
/// needs no set scan; and the list nodes `0..slots` belong to the real cache's slots: a listed
/// line that is in the real cache sits at its slot's node, found without any lookup. Only
/// *ghosts* — listed lines the real cache no longer holds — have nodes found through a hash
/// map, which stays small (a hash map of every listed line cost a host cache miss per
/// operation on large shadows). The owner reports each line that leaves the real cache, with
/// its slot ([`FaLru::left_cache`]), before the slot is used again.
///
/// Without slots ([`FaLru::new`]) every listed line is a ghost: a plain fully associative LRU.
#[derive(Debug, Clone)]
pub struct FaLru {
    capacity: usize,
    /// Front lines; [`EMPTY`] where unused.
    front: [u64; FRONT],
    /// Front lines' slots in the real cache, [`NO_TAG`] where none.
    front_tag: [u32; FRONT],
    /// Last use of each front entry (larger is more recent); [`UNUSED`] where unused, so
    /// that the oldest entry is always a used one.
    front_used: [u64; FRONT],
    /// Used front entries.
    front_len: usize,
    /// Where a line was last put into the front, by a hash of the line: a line and its front
    /// position, or a stale pair (checked against `front` before use).
    hint_line: [u64; HINTS],
    hint_pos: [u8; HINTS],
    /// Clock of the front entries' uses.
    clock: u64,
    /// A line [`Self::presence`] found absent, [`EMPTY`] if none: a miss is classified just
    /// before the line is filled, and the fill then needs no second lookup. Only inserting
    /// that line could make it present, and that consumes the note.
    absent: u64,
    /// Per slot of the real cache: whether its node is in the list.
    listed: Vec<bool>,
    /// Listed lines not in the real cache → their nodes (all `>= listed.len()`).
    ghost: FxHashMap<u64, u32>,
    /// Lines in the list.
    list_len: usize,
    /// Every line ever accessed (removals and evictions do not forget it).
    ever: LineSet,
    /// Per node: line, neighbours. Nodes `0..listed.len()` are the slots'.
    line: Vec<u64>,
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32, // most recently used
    tail: u32, // least recently used
    /// Ghost nodes not in use.
    free: Vec<u32>,
}

impl FaLru {
    /// An empty cache of `capacity` lines, not tied to a real cache.
    pub fn new(capacity: usize) -> Self {
        Self::with_slots(capacity, 0)
    }

    /// An empty cache of `capacity` lines shadowing a real cache with `slots` slots.
    pub fn with_slots(capacity: usize, slots: usize) -> Self {
        FaLru {
            capacity: capacity.max(1),
            front: [EMPTY; FRONT],
            front_tag: [NO_TAG; FRONT],
            front_used: [UNUSED; FRONT],
            front_len: 0,
            hint_line: [EMPTY; HINTS],
            hint_pos: [0; HINTS],
            clock: 0,
            absent: EMPTY,
            listed: vec![false; slots],
            ghost: FxHashMap::default(),
            list_len: 0,
            ever: LineSet::default(),
            // Zeroed, so the host commits the pages of a large level's nodes only as they are
            // used: a slot node's links are set when it enters the list, before any read.
            line: vec![0; slots],
            prev: vec![0; slots],
            next: vec![0; slots],
            head: NIL,
            tail: NIL,
            free: Vec::new(),
        }
    }

    /// Whether node `n` is a slot's (else a ghost's).
    #[inline]
    fn is_slot(&self, n: u32) -> bool {
        (n as usize) < self.listed.len()
    }

    /// Points `p`'s next (the head, if `p` is NIL) at `after_p` and `n`'s previous (the tail,
    /// if `n` is NIL) at `before_n`.
    fn link(&mut self, p: u32, n: u32, after_p: u32, before_n: u32) {
        if p == NIL {
            self.head = after_p
        } else {
            self.next[p as usize] = after_p
        }
        if n == NIL {
            self.tail = before_n
        } else {
            self.prev[n as usize] = before_n
        }
    }

    fn unlink(&mut self, s: u32) {
        let (p, n) = (self.prev[s as usize], self.next[s as usize]);
        self.link(p, n, n, p);
    }

    fn push_front(&mut self, s: u32) {
        self.prev[s as usize] = NIL;
        self.next[s as usize] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = s;
        }
        self.head = s;
        if self.tail == NIL {
            self.tail = s;
        }
    }

    /// A ghost node for `line` (not yet linked).
    fn new_ghost(&mut self, line: u64) -> u32 {
        let g = if let Some(g) = self.free.pop() {
            g
        } else {
            self.line.push(0);
            self.prev.push(NIL);
            self.next.push(NIL);
            (self.line.len() - 1) as u32
        };
        self.line[g as usize] = line;
        self.ghost.insert(line, g);
        g
    }

    /// Node `n` has left the list: a slot's node is marked so, a ghost's is freed (its map
    /// entry must be gone already).
    fn release(&mut self, n: u32) {
        if self.is_slot(n) {
            self.listed[n as usize] = false;
        } else {
            self.free.push(n);
        }
    }

    /// Puts `line` (front tag `tag`) at the most recent end of the list part.
    fn push_list_front(&mut self, line: u64, tag: u32) {
        let n = if self.is_slot(tag) {
            self.listed[tag as usize] = true;
            self.line[tag as usize] = line;
            tag
        } else {
            self.new_ghost(line)
        };
        self.push_front(n);
        self.list_len += 1;
    }

    /// Accesses `line`, which is not in the shadowed cache (or there is none); returns whether
    /// it was present. Misses insert it, evicting the least recently used line when full.
    #[inline]
    pub fn access(&mut self, line: u64) -> bool {
        self.access_as(line, NO_TAG, false)
    }

    /// Accesses `line`, which the real cache holds (and held before) at `slot`: a hit there.
    #[inline]
    pub fn access_cached(&mut self, line: u64, slot: u32) -> bool {
        self.access_as(line, slot, true)
    }

    /// Accesses `line`, which was just put into the real cache at `slot` (the slot's previous
    /// line reported with [`Self::left_cache`]).
    #[inline]
    pub fn access_filled(&mut self, line: u64, slot: u32) -> bool {
        self.access_as(line, slot, false)
    }

    /// Accesses `line` with front tag `tag`; `cached` as in [`Self::access_list`].
    #[inline(always)]
    fn access_as(&mut self, line: u64, tag: u32, cached: bool) -> bool {
        // A line `presence` just found absent is in neither part: no front search.
        if self.absent != line {
            if let Some((pos, _)) = self.front_find(line) {
                self.promote(pos);
                self.front_tag[pos] = tag;
                return true;
            }
        }
        self.access_list(line, tag, cached)
    }

    /// Position in the front array and tag of `line`, if it is one of the `FRONT` most
    /// recently used lines. (Mutable only for the position hints; the order of the lines
    /// does not change.)
    #[inline(always)]
    pub fn front_find(&mut self, line: u64) -> Option<(usize, u32)> {
        // Most lookups are of a front line whose hint is intact: a hash, two loads and two
        // compares, against 8 compares for the scan below.
        let h = hint_of(line);
        let p = usize::from(self.hint_pos[h]) % FRONT;
        if self.hint_line[h] == line && self.front[p] == line {
            return Some((p, self.front_tag[p]));
        }
        // A line not in the front, or whose hint another line took over. Every entry is
        // compared (unused ones hold `EMPTY`, which matches no line) and the position selected
        // without a branch per entry: where a line sits changes from access to access, so an
        // early exit is a branch the host mispredicts.
        let mut pos = FRONT;
        for (i, &l) in self.front.iter().enumerate() {
            pos = if l == line { i } else { pos };
        }
        if pos == FRONT {
            return None;
        }
        // The line's hint was taken over: take it back, the line is likely used again.
        self.hint_line[h] = line;
        self.hint_pos[h] = pos as u8;
        Some((pos, self.front_tag[pos]))
    }

    /// Makes the front line at `pos` (from [`Self::front_find`]) the most recently used,
    /// keeping its tag: the same as accessing it.
    #[inline(always)]
    pub fn promote(&mut self, pos: usize) {
        self.clock += 1;
        self.front_used[pos] = self.clock;
    }

    /// Front position of the least recently used of the used entries (at least one).
    fn front_oldest(&self) -> usize {
        // The smallest stamp so far is kept, not re-read through its index: that made each
        // step wait for the previous one's load.
        let (mut oldest, mut min) = (0, self.front_used[0]);
        for (i, &used) in self.front_used.iter().enumerate().skip(1) {
            if used < min {
                (oldest, min) = (i, used);
            }
        }
        oldest
    }

    /// `line` left the real cache from `slot`: its front tag is cleared, or its list node
    /// becomes a ghost's. Anything else (the line is not in the shadow, or was reported
    /// already) is left alone.
    pub fn left_cache(&mut self, line: u64, slot: u32) {
        if let Some((pos, _)) = self.front_find(line) {
            self.front_tag[pos] = NO_TAG;
            return;
        }
        let s = slot as usize;
        if self.is_slot(slot) && self.listed[s] && self.line[s] == line {
            // A ghost node takes the slot's node's place in the list.
            let g = self.new_ghost(line);
            let (p, n) = (self.prev[s], self.next[s]);
            self.prev[g as usize] = p;
            self.next[g as usize] = n;
            self.link(p, n, g, g);
            self.listed[s] = false;
        }
    }

    /// `line` is not in the front. `cached`: it is in the real cache at slot `tag` (so listed,
    /// if at all, at that slot's node); else it is not in the real cache (a ghost, if listed).
    #[inline(never)]
    fn access_list(&mut self, line: u64, tag: u32, cached: bool) -> bool {
        let known_absent = std::mem::replace(&mut self.absent, EMPTY) == line;
        let node = if cached && self.is_slot(tag) {
            self.listed[tag as usize].then_some(tag)
        } else if known_absent {
            None
        } else {
            self.ghost.remove(&line)
        };
        let hit = match node {
            Some(n) => {
                self.unlink(n);
                self.release(n);
                self.list_len -= 1;
                true
            }
            None => {
                self.ever.insert(line);
                false
            }
        };
        let pos = if self.front_len < FRONT.min(self.capacity) {
            // A free entry (one exists: fewer than FRONT are used).
            self.front_len += 1;
            self.front.iter().position(|&l| l == EMPTY).unwrap_or(0)
        } else {
            // The array is full (with a capacity below FRONT: holds `capacity` lines): its
            // oldest line becomes the newest of the list.
            let pos = self.front_oldest();
            self.push_list_front(self.front[pos], self.front_tag[pos]);
            pos
        };
        self.front[pos] = line;
        self.front_tag[pos] = tag;
        let h = hint_of(line);
        self.hint_line[h] = line;
        self.hint_pos[h] = pos as u8;
        self.clock += 1;
        self.front_used[pos] = self.clock;
        if self.front_len + self.list_len > self.capacity {
            let victim = self.tail;
            self.unlink(victim);
            self.list_len -= 1;
            if !self.is_slot(victim) {
                self.ghost.remove(&self.line[victim as usize]);
            }
            self.release(victim);
        }
        hit
    }

    /// Whether `line` is present (no change to the recency order). When shadowing a real
    /// cache, only for a line the real cache does not hold (as on a miss there).
    pub fn contains(&self, line: u64) -> bool {
        self.front.contains(&line) || self.ghost.contains_key(&line)
    }

    /// Whether `line` was ever accessed and whether it is present now (a miss is classified
    /// by both); as [`Self::contains`], for a line the real cache does not hold. An absent
    /// line is remembered, so that accessing it next costs one lookup less; the recency order
    /// is not changed.
    #[inline]
    pub fn presence(&mut self, line: u64) -> Presence {
        if self.contains(line) {
            Presence::Present
        } else {
            self.absent = line;
            if self.ever.contains(line) {
                Presence::Gone
            } else {
                Presence::Never
            }
        }
    }

    /// Whether `line` was ever accessed (removals and evictions do not forget it).
    #[inline]
    pub fn ever_accessed(&self, line: u64) -> bool {
        self.ever.contains(line)
    }

    /// Removes `line` (a coherence invalidation removes it from any cache). When shadowing a
    /// real cache, its leaving the real cache is reported first ([`Self::left_cache`]).
    pub fn remove(&mut self, line: u64) {
        if let Some((pos, _)) = self.front_find(line) {
            self.front[pos] = EMPTY;
            self.front_tag[pos] = NO_TAG;
            self.front_used[pos] = UNUSED;
            self.front_len -= 1;
        } else if let Some(g) = self.ghost.remove(&line) {
            self.unlink(g);
            self.release(g);
            self.list_len -= 1;
        }
    }
}

/// The hint entry of `line`.
#[inline(always)]
fn hint_of(line: u64) -> usize {
    fib_index(line, HINTS.trailing_zeros())
}

/// Per cache instance: its FA shadow (which also knows every line the cache ever held: the
/// shadow sees every fill), and the last line looked up (a repeated lookup of the most
/// recent line changes no LRU state, so it is skipped).
#[derive(Debug, Clone)]
pub struct Classifier {
    /// The fully associative shadow, tied to the cache's slots.
    pub shadow: FaLru,
    /// Last line accessed, if it is still present.
    pub last: Option<u64>,
}

impl Classifier {
    /// For a cache of `lines` lines (slots `0..lines`).
    pub fn new(lines: usize) -> Self {
        Classifier {
            shadow: FaLru::with_slots(lines, lines),
            last: None,
        }
    }

    /// `line` left the cache from `slot` (evicted, invalidated or given up): the shadow must
    /// know before the slot is filled again.
    #[inline]
    pub fn removed(&mut self, line: u64, slot: usize) {
        if self.last == Some(line) {
            self.last = None;
        }
        self.shadow.left_cache(line, slot as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::{FaLru, Presence};
    use crate::cache::Cache;
    use crate::model::{Inclusion, LevelConfig, Replacement, WritePolicy};
    use proptest::prelude::*;

    /// Naive fully associative LRU: a list in recency order and the set of lines ever held.
    #[derive(Default)]
    struct Naive {
        list: Vec<u64>, // most recent first
        ever: std::collections::HashSet<u64>,
        capacity: usize,
    }

    impl Naive {
        fn presence(&self, line: u64) -> Presence {
            if self.list.contains(&line) {
                Presence::Present
            } else if self.ever.contains(&line) {
                Presence::Gone
            } else {
                Presence::Never
            }
        }

        fn access(&mut self, line: u64) -> bool {
            self.ever.insert(line);
            let hit = self.list.contains(&line);
            self.list.retain(|&l| l != line);
            self.list.insert(0, line);
            self.list.truncate(self.capacity);
            hit
        }

        fn remove(&mut self, line: u64) {
            self.list.retain(|&l| l != line);
        }
    }

    proptest! {
        /// Same hits, and the same presence (never / gone / present), as the naive model.
        #[test]
        fn matches_naive_lru(
            capacity in 1usize..20,
            ops in prop::collection::vec((0u64..30, 0u8..10), 1..600),
        ) {
            let mut fa = FaLru::new(capacity);
            let mut naive = Naive { capacity, ..Naive::default() };
            for (i, (line, op)) in ops.into_iter().enumerate() {
                let presence = naive.presence(line);
                prop_assert_eq!(fa.presence(line), presence, "op {} line {}", i, line);
                prop_assert_eq!(fa.ever_accessed(line), presence != Presence::Never);
                if op == 0 {
                    fa.remove(line);
                    naive.remove(line);
                    continue;
                }
                prop_assert_eq!(fa.access(line), naive.access(line), "op {} line {}", i, line);
            }
        }

        /// Shadowing a real set-associative cache, driven as the engines drive it (hits by
        /// slot, misses classified then filled, victims and invalidations reported with their
        /// slots): same hits and presence as the naive model, and every front tag names the
        /// line's slot in the real cache.
        #[test]
        fn shadowing_a_cache_matches_naive_lru(
            sets in prop::sample::select(vec![1u64, 2, 3, 4]),
            assoc in 1u32..5,
            policy in prop::sample::select(vec![Replacement::Lru, Replacement::Fifo]),
            ops in prop::collection::vec((0u64..40, 0u8..12), 1..800),
        ) {
            let level = LevelConfig {
                name: "L1".into(),
                size: sets * assoc as u64 * 64,
                assoc,
                replacement: policy,
                write: WritePolicy::Back,
                inclusion: Inclusion::NonInclusive,
                shared: false,
                latency: 0,
            };
            let lines = (sets * assoc as u64) as usize;
            let mut cache = Cache::new(&level, 64, 1);
            let mut fa = FaLru::with_slots(lines, lines);
            let mut naive = Naive { capacity: lines, ..Naive::default() };
            for (i, (line, op)) in ops.into_iter().enumerate() {
                if op == 0 {
                    // A coherence invalidation.
                    if let Some((slot, _)) = cache.invalidate_slot(line) {
                        fa.left_cache(line, slot as u32);
                    }
                    fa.remove(line);
                    naive.remove(line);
                    continue;
                }
                match cache.find(line) {
                    Some(slot) => {
                        cache.touch(slot);
                        let hit = fa.access_cached(line, slot as u32);
                        prop_assert_eq!(hit, naive.access(line), "op {} line {}", i, line);
                    }
                    None => {
                        prop_assert_eq!(fa.presence(line), naive.presence(line), "op {} line {}", i, line);
                        let (slot, victim) = cache.fill_at(line, 0);
                        if let Some(v) = victim {
                            fa.left_cache(v.line, slot as u32);
                        }
                        let hit = fa.access_filled(line, slot as u32);
                        prop_assert_eq!(hit, naive.access(line), "op {} line {}", i, line);
                    }
                }
                for l in 0..40 {
                    if let Some((_, tag)) = fa.front_find(l) {
                        let held = cache.find(l).map_or(super::NO_TAG, |s| s as u32);
                        prop_assert_eq!(tag, held, "op {} front tag of line {}", i, l);
                    }
                }
            }
        }
    }

    #[test]
    fn lru_order_and_remove() {
        let mut c = FaLru::new(2);
        assert!(!c.access(1));
        assert!(!c.access(2));
        assert!(c.access(1)); // 1 is MRU, 2 LRU
        assert!(!c.access(3)); // evicts 2
        assert!(!c.access(2)); // evicts 1
        assert!(c.access(3));
        c.remove(3);
        assert!(!c.access(3));
        assert!(c.access(2));
    }
}
