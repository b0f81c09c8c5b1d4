//! Thread id → a small index (a simulated core, a slot in a list of threads), looked up for
//! every event: a dense table when thread ids are small (recorders number threads from 0 or
//! 1), else a hash map (e.g. Linux thread ids).

use rustc_hash::FxHashMap;

use cachescope_schema::ThreadId;

/// Largest thread id kept in a dense table.
const DENSE_THREADS: u32 = 1 << 16;

/// A dense table's entry for an id with no index.
const NONE: u32 = u32::MAX;

/// Thread id → index.
#[derive(Debug, Clone)]
pub(crate) enum ThreadIndex {
    Dense(Vec<u32>),
    Sparse(FxHashMap<ThreadId, u32>),
}

impl ThreadIndex {
    /// The index of each listed thread (indices below `u32::MAX`).
    pub(crate) fn new(pairs: impl IntoIterator<Item = (ThreadId, usize)> + Clone) -> Self {
        let max = pairs.clone().into_iter().map(|(t, _)| t).max().unwrap_or(0);
        if max < DENSE_THREADS {
            let mut v = vec![NONE; max as usize + 1];
            for (t, i) in pairs {
                v[t as usize] = i as u32;
            }
            ThreadIndex::Dense(v)
        } else {
            ThreadIndex::Sparse(pairs.into_iter().map(|(t, i)| (t, i as u32)).collect())
        }
    }

    /// The index of thread `t`, if it has one.
    #[inline]
    pub(crate) fn get(&self, t: ThreadId) -> Option<usize> {
        let i = match self {
            ThreadIndex::Dense(v) => v.get(t as usize).copied(),
            ThreadIndex::Sparse(m) => m.get(&t).copied(),
        };
        i.filter(|&i| i != NONE).map(|i| i as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::ThreadIndex;

    #[test]
    fn dense_and_sparse_find_the_listed_ids_only() {
        let small = ThreadIndex::new([(1u32, 0usize), (4095, 1), (7, 2)]);
        assert!(matches!(small, ThreadIndex::Dense(_)));
        let large = ThreadIndex::new([(1u32, 0usize), (4_000_000, 1), (7, 2)]);
        assert!(matches!(large, ThreadIndex::Sparse(_)));
        for t in [&small, &large] {
            assert_eq!((t.get(1), t.get(7)), (Some(0), Some(2)));
            assert_eq!((t.get(0), t.get(2), t.get(5_000_000)), (None, None, None));
        }
        assert_eq!((small.get(4095), large.get(4_000_000)), (Some(1), Some(1)));
    }
}
