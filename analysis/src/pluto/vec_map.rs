//! A small map kept as a vector sorted by key, and as a B-tree once it grows.
//!
//! A shared block's detailed counts hold a few threads, slots and code positions each; as
//! B-trees or hash maps they took about 1.5 KB per block and layout (a 16 MiB array that two
//! threads update at random: 4.2 GB), most of it in the maps' minimum allocations. A map that
//! grows past `SMALL` entries (a 512-byte line accessed at every offset with every width) moves
//! to a B-tree, where a sorted vector would insert in linear time.

use std::collections::BTreeMap;

/// Entries kept in a sorted vector.
const SMALL: usize = 32;

/// Keys in ascending order, each once.
#[derive(Debug, Clone)]
pub(super) enum VecMap<K, V> {
    /// Up to `SMALL` entries, sorted by key.
    Small(Vec<(K, V)>),
    /// More.
    Large(BTreeMap<K, V>),
}

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        VecMap::Small(Vec::new())
    }
}

impl<K: Ord, V: Default> VecMap<K, V> {
    /// The value of `key`, inserted as the default if absent.
    pub(super) fn entry(&mut self, key: K) -> &mut V {
        if let VecMap::Small(v) = self {
            if v.len() >= SMALL && v.binary_search_by(|(k, _)| k.cmp(&key)).is_err() {
                let all: BTreeMap<K, V> = std::mem::take(v).into_iter().collect();
                *self = VecMap::Large(all);
            }
        }
        match self {
            VecMap::Small(v) => {
                let i = match v.binary_search_by(|(k, _)| k.cmp(&key)) {
                    Ok(i) => i,
                    Err(i) => {
                        v.insert(i, (key, V::default()));
                        i
                    }
                };
                &mut v[i].1
            }
            VecMap::Large(m) => m.entry(key).or_default(),
        }
    }
}

impl<K, V> VecMap<K, V> {
    /// Entries in ascending key order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        let (small, large) = match self {
            VecMap::Small(v) => (Some(v.iter().map(|(k, v)| (k, v))), None),
            VecMap::Large(m) => (None, Some(m.iter())),
        };
        small
            .into_iter()
            .flatten()
            .chain(large.into_iter().flatten())
    }

    /// Keys in ascending order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &K> {
        self.iter().map(|(k, _)| k)
    }

    /// Values in ascending key order.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }
}

impl<K, V> IntoIterator for VecMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::iter::Chain<
        std::iter::Flatten<std::option::IntoIter<std::vec::IntoIter<(K, V)>>>,
        std::iter::Flatten<std::option::IntoIter<std::collections::btree_map::IntoIter<K, V>>>,
    >;

    fn into_iter(self) -> Self::IntoIter {
        let (small, large) = match self {
            VecMap::Small(v) => (Some(v.into_iter()), None),
            VecMap::Large(m) => (None, Some(m.into_iter())),
        };
        small
            .into_iter()
            .flatten()
            .chain(large.into_iter().flatten())
    }
}

impl<K: Ord, V: Default> FromIterator<(K, V)> for VecMap<K, V> {
    /// Later values of a key replace earlier ones, as for the standard maps.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = VecMap::default();
        for (k, v) in iter {
            *map.entry(k) = v;
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_sorted_and_unique() {
        let mut m: VecMap<u32, u64> = VecMap::default();
        for k in [5, 1, 9, 1, 5, 3] {
            *m.entry(k) += 1;
        }
        let all: Vec<(u32, u64)> = m.into_iter().collect();
        assert_eq!(all, [(1, 2), (3, 1), (5, 2), (9, 1)]);
        let m: VecMap<u32, u64> = [(2, 7), (1, 3), (2, 8)].into_iter().collect();
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(m.values().copied().collect::<Vec<_>>(), [3, 8]);
    }

    #[test]
    fn a_large_map_keeps_its_entries_and_order() {
        let mut m: VecMap<u32, u64> = VecMap::default();
        // Descending: every insert at the front, the worst case of a sorted vector.
        for k in (0..1000u32).rev() {
            *m.entry(k % 700) += 1;
        }
        assert!(matches!(m, VecMap::Large(_)));
        let all: Vec<(u32, u64)> = m.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(all.len(), 700);
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(all[0], (0, 2));
        assert_eq!(all[699], (699, 1));
    }
}
