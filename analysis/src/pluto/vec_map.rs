//! A small map kept as a vector sorted by key.
//!
//! A shared block's detailed counts hold a few threads, slots and code positions each; as
//! B-trees or hash maps they took about 1.5 KB per block and layout (a 16 MiB array that two
//! threads update at random: 4.2 GB), most of it in the maps' minimum allocations.

/// Keys in ascending order, each once.
#[derive(Debug, Clone)]
pub(super) struct VecMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        VecMap(Vec::new())
    }
}

impl<K: Ord, V: Default> VecMap<K, V> {
    /// The value of `key`, inserted as the default if absent.
    pub(super) fn entry(&mut self, key: K) -> &mut V {
        let i = match self.0.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (key, V::default()));
                i
            }
        };
        &mut self.0[i].1
    }
}

impl<K, V> VecMap<K, V> {
    /// Entries in ascending key order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &(K, V)> {
        self.0.iter()
    }

    /// Keys in ascending order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &K> {
        self.0.iter().map(|(k, _)| k)
    }

    /// Values in ascending key order.
    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }
}

impl<K, V> IntoIterator for VecMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
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
}
