//! A set of line numbers that only grows: "every line this cache ever held", asked on every
//! miss (a first miss is compulsory).
//!
//! A hash set of lines grows with the footprint (16+ bytes per line, spread over memory),
//! so on large traces nearly every query misses the host's caches. Programs touch lines in
//! runs, so the set is kept as bitmaps of [`PAGE_LINES`] consecutive lines (one host cache
//! line each), found through a small map of pages, with the pages used last remembered in a
//! few direct-mapped entries: sweeps over a few arrays at once cost one bit test per line.

use rustc_hash::FxHashMap;

use crate::fib_hash::fib_index;

/// Lines per bitmap page (512 lines of 64 B = 32 KiB of address space).
const PAGE_LINES: u64 = 512;

const WORDS: usize = (PAGE_LINES / 64) as usize;

/// Entries of the recently used pages (a power of two): a loop nest sweeps a few arrays at a
/// time, each in its own page.
const RECENT: usize = 8;

/// An unused recent entry: no page number reaches it (pages are lines / 512).
const NO_PAGE: u64 = u64::MAX;

/// A grow-only set of line numbers.
#[derive(Debug, Clone)]
pub struct LineSet {
    /// Page number (line / [`PAGE_LINES`]) → index into `bits`.
    pages: FxHashMap<u64, u32>,
    /// One bitmap per page.
    bits: Vec<[u64; WORDS]>,
    /// Pages recently inserted into, and their indices, at a hash of the page ([`NO_PAGE`]
    /// where unused).
    recent: [(u64, u32); RECENT],
}

impl Default for LineSet {
    fn default() -> Self {
        LineSet {
            pages: FxHashMap::default(),
            bits: Vec::new(),
            recent: [(NO_PAGE, 0); RECENT],
        }
    }
}

/// The recent entry of `page`.
#[inline(always)]
fn recent_of(page: u64) -> usize {
    fib_index(page, RECENT.trailing_zeros())
}

impl LineSet {
    /// The index of `page`'s bitmap, if it has one.
    #[inline]
    fn page(&self, page: u64) -> Option<u32> {
        match self.recent[recent_of(page)] {
            (p, i) if p == page => Some(i),
            _ => self.pages.get(&page).copied(),
        }
    }

    /// Whether `line` is in the set.
    #[inline]
    pub fn contains(&self, line: u64) -> bool {
        let (page, bit) = (line / PAGE_LINES, line % PAGE_LINES);
        self.page(page)
            .is_some_and(|i| self.bits[i as usize][(bit / 64) as usize] & (1 << (bit % 64)) != 0)
    }

    /// Adds `line`; returns whether it was new.
    #[inline]
    pub fn insert(&mut self, line: u64) -> bool {
        let (page, bit) = (line / PAGE_LINES, line % PAGE_LINES);
        let i = match self.page(page) {
            Some(i) => i,
            None => {
                // More than 2^32 pages would take 256 GiB of bitmaps first.
                let i = self.bits.len() as u32;
                self.bits.push([0; WORDS]);
                self.pages.insert(page, i);
                i
            }
        };
        self.recent[recent_of(page)] = (page, i);
        let word = &mut self.bits[i as usize][(bit / 64) as usize];
        let mask = 1 << (bit % 64);
        let new = *word & mask == 0;
        *word |= mask;
        new
    }
}

#[cfg(test)]
mod tests {
    use super::LineSet;
    use proptest::prelude::*;
    use std::collections::HashSet;

    proptest! {
        /// The same answers as a hash set, for lines near each other, far apart and at the
        /// ends of the address space.
        #[test]
        fn matches_hash_set(
            ops in prop::collection::vec(
                (prop_oneof![0u64..2000, any::<u64>(), (u64::MAX - 1000)..=u64::MAX], any::<bool>()),
                1..400,
            ),
        ) {
            let mut set = LineSet::default();
            let mut naive = HashSet::new();
            for (line, insert) in ops {
                if insert {
                    prop_assert_eq!(set.insert(line), naive.insert(line), "insert {}", line);
                } else {
                    prop_assert_eq!(set.contains(line), naive.contains(&line), "contains {}", line);
                }
            }
            for &line in &naive {
                prop_assert!(set.contains(line));
            }
        }
    }

    #[test]
    fn pages_are_separate() {
        let mut s = LineSet::default();
        assert!(s.insert(5));
        assert!(!s.insert(5));
        assert!(!s.contains(5 + 512));
        assert!(s.insert(5 + 512));
        assert!(s.contains(5));
        assert!(!s.contains(4));
        assert!(!s.contains(6));
    }
}
