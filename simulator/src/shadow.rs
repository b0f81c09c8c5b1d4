//! Miss classification helpers: a fully associative LRU "shadow" cache of the same number of
//! lines (a miss it would have hit is a conflict miss, otherwise a capacity miss) and the set
//! of lines a cache has ever held (a first miss is compulsory).

use rustc_hash::{FxHashMap, FxHashSet};

const NIL: u32 = u32::MAX;

/// Fully associative LRU cache of line numbers with O(1) access.
#[derive(Debug, Clone)]
pub struct FaLru {
    capacity: usize,
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

    /// Accesses `line`; returns whether it was present. Misses insert it, evicting the least
    /// recently used line when full.
    pub fn access(&mut self, line: u64) -> bool {
        if let Some(&s) = self.slot_of.get(&line) {
            if self.head != s {
                self.unlink(s);
                self.push_front(s);
            }
            return true;
        }
        let s = if self.slot_of.len() >= self.capacity {
            let victim = self.tail;
            self.unlink(victim);
            self.slot_of.remove(&self.line[victim as usize]);
            victim
        } else if let Some(s) = self.free.pop() {
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
        false
    }

    /// Removes `line` (a coherence invalidation removes it from any cache).
    pub fn remove(&mut self, line: u64) {
        if let Some(s) = self.slot_of.remove(&line) {
            self.unlink(s);
            self.free.push(s);
        }
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
