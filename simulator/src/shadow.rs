//! Miss classification helpers: a fully associative LRU "shadow" cache of the same number of
//! lines (a miss it would have hit is a conflict miss, otherwise a capacity miss) and the set
//! of lines a cache has ever held (a first miss is compulsory).

use rustc_hash::{FxHashMap, FxHashSet};

const NIL: u32 = u32::MAX;

/// Lines kept in the ordered front array (see [`FaLru`]).
const FRONT: usize = 8;

/// Fully associative LRU cache of line numbers with O(1) access.
///
/// The LRU stack is split in two: the (up to) [`FRONT`] most recently used lines in a small
/// array in exact recency order, then all older lines in a hash-indexed linked list. A loop
/// that cycles through a few lines only reorders the array, so most accesses cost a short
/// scan instead of a hash-table update; the order of the whole stack stays exact.
#[derive(Debug, Clone)]
pub struct FaLru {
    capacity: usize,
    front: [u64; FRONT],
    front_len: usize,
    slot_of: FxHashMap<u64, u32>,
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
            front: [0; FRONT],
            front_len: 0,
            slot_of: FxHashMap::default(),
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
        self.slot_of.insert(line, s);
        self.push_front(s);
    }

    /// Accesses `line`; returns whether it was present. Misses insert it, evicting the least
    /// recently used line when full.
    #[inline]
    pub fn access(&mut self, line: u64) -> bool {
        let k = self.front_len;
        if let Some(pos) = self.front[..k].iter().position(|&l| l == line) {
            shift_down(&mut self.front, pos);
            self.front[0] = line;
            return true;
        }
        self.access_list(line)
    }

    fn access_list(&mut self, line: u64) -> bool {
        let hit = match self.slot_of.remove(&line) {
            Some(s) => {
                self.unlink(s);
                self.free.push(s);
                true
            }
            None => false,
        };
        let k = self.front_len;
        if k < FRONT.min(self.capacity) {
            shift_down(&mut self.front, k);
            self.front_len += 1;
        } else {
            // The array is full: its oldest line becomes the newest of the list.
            let spill = self.front[k - 1];
            shift_down(&mut self.front, k - 1);
            self.push_list_front(spill);
        }
        self.front[0] = line;
        if self.front_len + self.slot_of.len() > self.capacity {
            let victim = self.tail;
            self.unlink(victim);
            self.slot_of.remove(&self.line[victim as usize]);
            self.free.push(victim);
        }
        hit
    }

    /// Whether `line` is present (no change to the recency order).
    pub fn contains(&self, line: u64) -> bool {
        self.front[..self.front_len].contains(&line) || self.slot_of.contains_key(&line)
    }

    /// Removes `line` (a coherence invalidation removes it from any cache).
    pub fn remove(&mut self, line: u64) {
        let k = self.front_len;
        if let Some(pos) = self.front[..k].iter().position(|&l| l == line) {
            self.front[pos..k].rotate_left(1);
            self.front_len -= 1;
        } else if let Some(s) = self.slot_of.remove(&line) {
            self.unlink(s);
            self.free.push(s);
        }
    }
}

/// Moves `front[0..end]` one place up (over `front[end]`), leaving `front[0]` to be set.
/// Written as a carry of swaps: LLVM turns a plain shifting loop into a `memmove` call, which
/// costs more than the handful of moves.
#[inline(always)]
fn shift_down(front: &mut [u64; FRONT], end: usize) {
    let mut carry = front[0];
    for slot in front.iter_mut().take(end.min(FRONT - 1) + 1).skip(1) {
        std::mem::swap(slot, &mut carry);
    }
}

/// Per cache instance: what it has ever held, its FA shadow, and the last line looked up
/// (a repeated lookup of the most recent line changes no LRU state, so it is skipped).
#[derive(Debug, Clone)]
pub struct Classifier {
    /// Lines ever held.
    pub seen: FxHashSet<u64>,
    /// The fully associative shadow.
    pub shadow: FaLru,
    /// Last line accessed, if it is still present.
    pub last: Option<u64>,
}

impl Classifier {
    /// For a cache of `lines` lines.
    pub fn new(lines: usize) -> Self {
        Classifier {
            seen: FxHashSet::default(),
            shadow: FaLru::new(lines),
            last: None,
        }
    }

    /// Forgets `line` after it left the cache.
    pub fn removed(&mut self, line: u64) {
        if self.last == Some(line) {
            self.last = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FaLru;
    use proptest::prelude::*;

    proptest! {
        /// Same hits as a plain list kept in recency order.
        #[test]
        fn matches_naive_lru(
            capacity in 1usize..20,
            ops in prop::collection::vec((0u64..30, 0u8..10), 1..600),
        ) {
            let mut fa = FaLru::new(capacity);
            let mut naive: Vec<u64> = Vec::new(); // most recent first
            for (i, (line, op)) in ops.into_iter().enumerate() {
                if op == 0 {
                    fa.remove(line);
                    naive.retain(|&l| l != line);
                    continue;
                }
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
