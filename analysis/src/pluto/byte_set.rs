//! The bytes of one page that one thread accessed (or stored to) in a segment.
//!
//! Most pages are read or written in a few contiguous stretches (arrays walked in order), so a
//! set starts as a handful of runs kept inline; a page touched in more scattered places than
//! that becomes a bitmap of one bit per byte (512 bytes). Bytes, not lines, because the same
//! set must answer for every predicted layout: any line size and any shift.

use super::touch_table::PAGE_SIZE;

/// Runs kept inline before a set becomes a bitmap.
const INLINE_RUNS: usize = 6;

/// 64-bit words of a page's bitmap.
const WORDS: usize = PAGE_SIZE as usize / 64;

/// A set of byte offsets in `0..PAGE_SIZE`.
#[derive(Debug, Clone)]
pub(super) enum ByteSet {
    /// Sorted, disjoint and non-adjacent half-open runs `[start, end)`, `len` of them.
    Runs {
        /// Runs in use.
        len: u8,
        /// The runs; those past `len` are unused.
        runs: [(u16, u16); INLINE_RUNS],
    },
    /// One bit per byte.
    Bits(Box<[u64; WORDS]>),
}

impl Default for ByteSet {
    fn default() -> Self {
        ByteSet::Runs {
            len: 0,
            runs: [(0, 0); INLINE_RUNS],
        }
    }
}

impl ByteSet {
    /// Adds the bytes `[start, end)` (`start < end <= PAGE_SIZE`).
    pub(super) fn insert(&mut self, start: u16, end: u16) {
        debug_assert!(start < end && u64::from(end) <= PAGE_SIZE);
        match self {
            ByteSet::Runs { len, runs } => {
                let n = usize::from(*len);
                // The common case: an array walked upwards extends its last run.
                if n > 0 && start >= runs[n - 1].0 && start <= runs[n - 1].1 {
                    runs[n - 1].1 = runs[n - 1].1.max(end);
                    return;
                }
                // Runs [i, j) overlap or touch [start, end) and merge with it.
                let i = runs[..n].partition_point(|r| r.1 < start);
                let j = runs[..n].partition_point(|r| r.0 <= end);
                let merged = if i < j {
                    (start.min(runs[i].0), end.max(runs[j - 1].1))
                } else {
                    (start, end)
                };
                let new_len = n - (j - i) + 1;
                if new_len > INLINE_RUNS {
                    let mut bits = Box::new([0u64; WORDS]);
                    for &(s, e) in &runs[..n] {
                        set_bits(&mut bits, s, e);
                    }
                    set_bits(&mut bits, start, end);
                    *self = ByteSet::Bits(bits);
                    return;
                }
                if j != i + 1 {
                    runs.copy_within(j..n, i + 1);
                }
                runs[i] = merged;
                *len = new_len as u8;
            }
            ByteSet::Bits(bits) => set_bits(bits, start, end),
        }
    }

    /// The lowest byte of the set in `[start, end)`, if any.
    pub(super) fn first_in(&self, start: u16, end: u16) -> Option<u16> {
        match self {
            ByteSet::Runs { len, runs } => {
                let runs = &runs[..usize::from(*len)];
                let k = runs.partition_point(|r| r.1 <= start);
                let lo = runs.get(k)?.0.max(start);
                (lo < end).then_some(lo)
            }
            ByteSet::Bits(bits) => {
                let (start, end) = (usize::from(start), usize::from(end));
                let mut w = start / 64;
                let mut word = bits.get(w)? & (!0u64 << (start % 64));
                loop {
                    if word != 0 {
                        let at = w * 64 + word.trailing_zeros() as usize;
                        return (at < end).then_some(at as u16);
                    }
                    w += 1;
                    if w * 64 >= end || w >= WORDS {
                        return None;
                    }
                    word = bits[w];
                }
            }
        }
    }
}

/// Sets the bits of bytes `[start, end)`.
fn set_bits(bits: &mut [u64; WORDS], start: u16, end: u16) {
    let (start, end) = (usize::from(start), usize::from(end));
    let mut at = start;
    while at < end {
        let w = at / 64;
        let from = at % 64;
        let to = (end - w * 64).min(64);
        let mask = if to - from == 64 {
            !0
        } else {
            ((1u64 << (to - from)) - 1) << from
        };
        bits[w] |= mask;
        at = w * 64 + to;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The set as a plain list of flags.
    fn flags(set: &ByteSet) -> Vec<bool> {
        (0..PAGE_SIZE as u16)
            .map(|b| set.first_in(b, b + 1).is_some())
            .collect()
    }

    proptest! {
        #[test]
        fn a_set_holds_exactly_the_bytes_inserted(
            ranges in proptest::collection::vec((0u16..4096, 1u16..300), 0..20),
            queries in proptest::collection::vec((0u16..4096, 1u16..600), 1..20),
        ) {
            let mut set = ByteSet::default();
            let mut model = vec![false; PAGE_SIZE as usize];
            for (s, n) in ranges {
                let e = (s + n).min(PAGE_SIZE as u16);
                set.insert(s, e);
                model[usize::from(s)..usize::from(e)].iter_mut().for_each(|b| *b = true);
            }
            prop_assert_eq!(flags(&set), model.clone());
            for (s, n) in queries {
                let e = (s + n).min(PAGE_SIZE as u16);
                let want = (s..e).find(|&b| model[usize::from(b)]);
                prop_assert_eq!(set.first_in(s, e), want);
            }
        }
    }

    #[test]
    fn scattered_bytes_turn_the_runs_into_a_bitmap() {
        let mut set = ByteSet::default();
        for k in 0..INLINE_RUNS as u16 {
            set.insert(k * 100, k * 100 + 8);
        }
        assert!(matches!(set, ByteSet::Runs { .. }));
        // Adjacent to a run: still runs.
        set.insert(8, 16);
        assert!(matches!(set, ByteSet::Runs { .. }));
        set.insert(4000, 4096);
        assert!(matches!(set, ByteSet::Bits(_)));
        assert_eq!(set.first_in(4001, 4096), Some(4001));
        assert_eq!(set.first_in(16, 100), None);
        assert_eq!(set.first_in(0, 4096), Some(0));
    }
}
