//! Miss classification helpers: a fully associative LRU "shadow" cache of the same number of
//! lines (a miss it would have hit is a conflict miss, otherwise a capacity miss) and the set
//! of lines a cache has ever held (a first miss is compulsory).

use rustc_hash::FxHashMap;

use crate::line_set::LineSet;

const NIL: u32 = u32::MAX;

/// Lines kept in the ordered front array (see [`FaLru`]).
const FRONT: usize = 8;

/// Tag of a front line that carries none (see [`FaLru::access_tagged`]).
pub const NO_TAG: u32 = u32::MAX;

/// An unused front entry. Lines are addresses divided by a line size of at least 8 bytes, so
/// no line number reaches it: a search of all entries never matches an unused one.
const EMPTY: u64 = u64::MAX;

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
/// The LRU stack is split in two: the (up to) [`FRONT`] most recently used lines in a small
/// array, then all older lines in a hash-indexed linked list. A loop that cycles through a few
/// lines only touches the array, so most accesses cost a fixed-width compare and one store
/// instead of a hash-table update; the order of the whole stack stays exact.
///
/// The array is not kept in order: each entry carries the time of its last use, and only
/// when a new line pushes the oldest entry into the list is the smallest time looked for. A
/// hit neither shifts entries nor branches on where the line was found (mispredicted
/// branches of an ordered scan were the largest cost of the exact engine's hit path).
///
/// Each front line carries a caller-defined `u32` tag (the exact engine stores the line's slot
/// in the real cache there, so that a hit on a recently used line needs no set scan). Tags
/// are not kept for older lines: a line that comes back to the front gets the tag of the
/// access that brought it back.
#[derive(Debug, Clone)]
pub struct FaLru {
    capacity: usize,
    /// Front lines; [`EMPTY`] where unused.
    front: [u64; FRONT],
    front_tag: [u32; FRONT],
    /// Last use of each front entry (larger is more recent).
    front_used: [u64; FRONT],
    /// Used front entries.
    front_len: usize,
    /// Clock of the front entries' uses.
    clock: u64,
    /// A line [`Self::presence`] found absent, [`EMPTY`] if none: a miss is classified just
    /// before the line is filled, and the fill then needs no second look in the list's index
    /// (on a large shadow each look is a host cache miss). Only inserting that line could
    /// make it present, and that consumes the note.
    absent: u64,
    /// Lines in the list part → their nodes (so its length is the list's). Only present
    /// lines: the map stays as small as the cache, so its lookups mostly hit the host's
    /// caches.
    node_of: FxHashMap<u64, u32>,
    /// Every line ever accessed (removals and evictions do not forget it).
    ever: LineSet,
    line: Vec<u64>,
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32, // most recently used
    tail: u32, // least recently used
    free: Vec<u32>,
}

impl FaLru {
    /// An empty cache of `capacity` lines.
    pub fn new(capacity: usize) -> Self {
        FaLru {
            capacity: capacity.max(1),
            front: [EMPTY; FRONT],
            front_tag: [NO_TAG; FRONT],
            front_used: [0; FRONT],
            front_len: 0,
            clock: 0,
            absent: EMPTY,
            node_of: FxHashMap::default(),
            ever: LineSet::default(),
            line: Vec::new(),
            prev: Vec::new(),
            next: Vec::new(),
            head: NIL,
            tail: NIL,
            free: Vec::new(),
        }
    }

    fn unlink(&mut self, s: u32) {
        let (p, n) = (self.prev[s as usize], self.next[s as usize]);
        if p == NIL {
            self.head = n
        } else {
            self.next[p as usize] = n
        }
        if n == NIL {
            self.tail = p
        } else {
            self.prev[n as usize] = p
        }
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

    /// Puts `line` at the most recent end of the list part.
    fn push_list_front(&mut self, line: u64) {
        let s = if let Some(s) = self.free.pop() {
            s
        } else {
            self.line.push(0);
            self.prev.push(NIL);
            self.next.push(NIL);
            (self.line.len() - 1) as u32
        };
        self.line[s as usize] = line;
        self.node_of.insert(line, s);
        self.push_front(s);
    }

    /// Accesses `line`; returns whether it was present. Misses insert it, evicting the least
    /// recently used line when full.
    #[inline]
    pub fn access(&mut self, line: u64) -> bool {
        self.access_tagged(line, NO_TAG)
    }

    /// Like [`Self::access`], and gives the line (now the most recent) the tag `tag`.
    #[inline]
    pub fn access_tagged(&mut self, line: u64, tag: u32) -> bool {
        if let Some((pos, _)) = self.front_find(line) {
            self.promote(pos);
            self.front_tag[pos] = tag;
            return true;
        }
        self.access_list(line, tag)
    }

    /// Position in the front array and tag of `line`, if it is one of the [`FRONT`] most
    /// recently used lines.
    #[inline(always)]
    pub fn front_find(&self, line: u64) -> Option<(usize, u32)> {
        // Every entry is compared (unused ones hold `EMPTY`, which matches no line) and the
        // position selected without a branch per entry: where a line sits changes from
        // access to access, so an early exit is a branch the host mispredicts.
        let mut pos = FRONT;
        for (i, &l) in self.front.iter().enumerate() {
            pos = if l == line { i } else { pos };
        }
        (pos < FRONT).then(|| (pos, self.front_tag[pos]))
    }

    /// Makes the front line at `pos` (from [`Self::front_find`]) the most recently used,
    /// keeping its tag: the same as accessing it.
    #[inline(always)]
    pub fn promote(&mut self, pos: usize) {
        self.clock += 1;
        self.front_used[pos] = self.clock;
    }

    /// Front position of the least recently used entry (the front must be full).
    fn front_oldest(&self) -> usize {
        let mut oldest = 0;
        for i in 1..FRONT {
            oldest = if self.front_used[i] < self.front_used[oldest] {
                i
            } else {
                oldest
            };
        }
        oldest
    }

    /// Clears the tag of `line` if it is in the front (its tag no longer holds).
    #[inline]
    pub fn untag(&mut self, line: u64) {
        if let Some((pos, _)) = self.front_find(line) {
            self.front_tag[pos] = NO_TAG;
        }
    }

    #[inline(never)]
    fn access_list(&mut self, line: u64, tag: u32) -> bool {
        let known_absent = std::mem::replace(&mut self.absent, EMPTY) == line;
        let listed = if known_absent {
            None
        } else {
            self.node_of.remove(&line)
        };
        let hit = match listed {
            Some(s) => {
                self.unlink(s);
                self.free.push(s);
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
            // The array is full: its oldest line becomes the newest of the list. (With a
            // capacity below FRONT the array never holds more than `capacity` lines, so the
            // oldest is looked for among the used entries only.)
            let pos = if self.front_len == FRONT {
                self.front_oldest()
            } else {
                self.front_oldest_used()
            };
            let spill = self.front[pos];
            self.push_list_front(spill);
            pos
        };
        self.front[pos] = line;
        self.front_tag[pos] = tag;
        self.clock += 1;
        self.front_used[pos] = self.clock;
        if self.front_len + self.node_of.len() > self.capacity {
            let victim = self.tail;
            self.unlink(victim);
            self.node_of.remove(&self.line[victim as usize]);
            self.free.push(victim);
        }
        hit
    }

    /// Front position of the least recently used of the used entries.
    fn front_oldest_used(&self) -> usize {
        (0..FRONT)
            .filter(|&i| self.front[i] != EMPTY)
            .min_by_key(|&i| self.front_used[i])
            .unwrap_or(0)
    }

    /// Whether `line` is present (no change to the recency order).
    pub fn contains(&self, line: u64) -> bool {
        self.front.contains(&line) || self.node_of.contains_key(&line)
    }

    /// Whether `line` was ever accessed and whether it is present now (a miss is classified
    /// by both). An absent line is remembered, so that accessing it next costs one index
    /// lookup less; the recency order is not changed.
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

    /// Removes `line` (a coherence invalidation removes it from any cache).
    pub fn remove(&mut self, line: u64) {
        if let Some((pos, _)) = self.front_find(line) {
            self.front[pos] = EMPTY;
            self.front_tag[pos] = NO_TAG;
            self.front_len -= 1;
        } else if let Some(s) = self.node_of.remove(&line) {
            self.unlink(s);
            self.free.push(s);
        }
    }
}

/// Per cache instance: its FA shadow (which also knows every line the cache ever held: the
/// shadow sees every fill), and the last line looked up (a repeated lookup of the most
/// recent line changes no LRU state, so it is skipped).
#[derive(Debug, Clone)]
pub struct Classifier {
    /// The fully associative shadow.
    pub shadow: FaLru,
    /// Last line accessed, if it is still present.
    pub last: Option<u64>,
}

impl Classifier {
    /// For a cache of `lines` lines.
    pub fn new(lines: usize) -> Self {
        Classifier {
            shadow: FaLru::new(lines),
            last: None,
        }
    }

    /// Forgets `line` after it left the cache (its slot, kept as the shadow's front tag, is no
    /// longer its own).
    #[inline]
    pub fn removed(&mut self, line: u64) {
        if self.last == Some(line) {
            self.last = None;
        }
        self.shadow.untag(line);
    }
}

#[cfg(test)]
mod tests {
    use super::{FaLru, Presence};
    use proptest::prelude::*;

    proptest! {
        /// Same hits, and the same presence (never / gone / present), as a plain list kept
        /// in recency order and the set of lines ever accessed.
        #[test]
        fn matches_naive_lru(
            capacity in 1usize..20,
            ops in prop::collection::vec((0u64..30, 0u8..10), 1..600),
        ) {
            let mut fa = FaLru::new(capacity);
            let mut naive: Vec<u64> = Vec::new(); // most recent first
            let mut ever = std::collections::HashSet::new();
            for (i, (line, op)) in ops.into_iter().enumerate() {
                let presence = if naive.contains(&line) {
                    Presence::Present
                } else if ever.contains(&line) {
                    Presence::Gone
                } else {
                    Presence::Never
                };
                prop_assert_eq!(fa.presence(line), presence, "op {} line {}", i, line);
                prop_assert_eq!(fa.ever_accessed(line), presence != Presence::Never);
                if op == 0 {
                    fa.remove(line);
                    naive.retain(|&l| l != line);
                    continue;
                }
                ever.insert(line);
                let hit = naive.contains(&line);
                naive.retain(|&l| l != line);
                naive.insert(0, line);
                naive.truncate(capacity);
                prop_assert_eq!(fa.access(line), hit, "op {} line {}", i, line);
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
