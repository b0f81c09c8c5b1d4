//! Order within a segment: which accesses of two threads can interleave at all.
//!
//! Pluto's φ̃ assumes any interleaving of a segment's accesses. Locks order some of them: a
//! thread that fills a buffer, releases the mutex a condition variable waits on, and a thread
//! that takes the mutex after it and then writes beside the buffer never overlap — but with
//! no barrier between them, the estimate counted the two threads' whole phases against each
//! other (2026-11-29 review: a padded mutex + condition variable hand-over, C and C++, flagged
//! with ~800,000 events while the replay simulated none).
//!
//! Each thread's part of a segment is cut into *epochs* at its lock events (every
//! acquisition and release starts a new one; semaphores and C11 mutexes are recorded as lock
//! events too). Acquisition #k of a lock follows the release of #k−1 (the trace numbers them
//! in the order they happened), which gives each epoch a vector clock: epoch (u, f) happens
//! before (t, e) when t, at e, has seen the end of u's epoch f. Only two epochs that are
//! ordered neither way can interleave.
//!
//! **The ordered estimate of a pair of threads** on a block, with per epoch the thread's
//! loads and stores there: for each epoch e of t, the accesses of u in the epochs concurrent
//! with it (an interval of u's epochs, since order follows program order) make one φ̃ (Eq. 1)
//! with e's; summed over t's epochs that bounds the alternations between concurrent accesses,
//! as does the same sum from u's side, so the smaller one counts. Alternations across an
//! order (a hand-over: t wrote, u acquired after t's release and wrote) are at most one per
//! epoch that accessed the block, added to it. The pair's φ̃ is the smaller of this and the
//! unordered φ̃, so order only ever lowers an estimate; θ̃ keeps its share of the pair's φ̃
//! (the true/false split of the unordered counts). A segment without a lock passed between
//! threads is estimated as before.

use cachescope_schema::ThreadId;
use rustc_hash::{FxHashMap, FxHashSet};

/// A lock event of one thread, in its stream's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SyncOp {
    /// Acquisition `order` of `lock`.
    Acquire { lock: u64, order: u64 },
    /// A release of `lock`.
    Release { lock: u64 },
}

/// One thread's loads and stores on a block in one epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct EpochCount {
    pub epoch: u32,
    pub loads: u64,
    pub stores: u64,
}

/// Vector clocks of a segment's epochs, for the epochs that accessed blocks counted in
/// detail.
#[derive(Debug, Default)]
pub(super) struct Ordering {
    /// Stream index of each thread.
    index: FxHashMap<ThreadId, usize>,
    /// Per (stream, epoch): how many epochs of each stream it has seen end (its own: its
    /// epoch number).
    clocks: FxHashMap<(usize, u32), Box<[u32]>>,
}

/// Vector clock entries kept per segment at most (epochs needed × threads); beyond, the
/// segment is estimated without order (as before; only ever a higher estimate).
const CLOCK_ENTRIES_MAX: usize = 1 << 24;

impl Ordering {
    /// The order of a segment whose streams (threads `ids`) had the lock events `ops`, with
    /// clocks for the epochs in `needed`; `None` when no lock passed between two threads (or
    /// the clocks would take too much room): nothing is ordered beyond program order.
    pub fn of(
        ids: &[ThreadId],
        ops: &[Vec<SyncOp>],
        needed: &FxHashSet<(ThreadId, u32)>,
    ) -> Option<Ordering> {
        let n = ids.len().min(ops.len());
        if n < 2 || needed.len().saturating_mul(n) > CLOCK_ENTRIES_MAX {
            return None;
        }
        let index: FxHashMap<ThreadId, usize> = ids
            .iter()
            .take(n)
            .enumerate()
            .map(|(i, &t)| (t, i))
            .collect();
        let wanted: FxHashSet<(usize, u32)> = needed
            .iter()
            .filter_map(|(t, e)| Some((*index.get(t)?, *e)))
            .collect();
        // The acquisitions released within the segment: an acquisition #k waits for the
        // release of #k−1 only if it is one of these (else it came before the segment).
        let mut will_release: FxHashSet<(u64, u64)> = FxHashSet::default();
        for stream in ops.iter().take(n) {
            let mut held: FxHashMap<u64, u64> = FxHashMap::default();
            for op in stream {
                match *op {
                    SyncOp::Acquire { lock, order } => {
                        held.insert(lock, order);
                    }
                    SyncOp::Release { lock } => {
                        if let Some(k) = held.remove(&lock) {
                            will_release.insert((lock, k));
                        }
                    }
                }
            }
        }
        let mut clocks: FxHashMap<(usize, u32), Box<[u32]>> = FxHashMap::default();
        let mut vc: Vec<Vec<u32>> = vec![vec![0; n]; n];
        let mut pos = vec![0usize; n];
        let mut held: Vec<FxHashMap<u64, u64>> = vec![FxHashMap::default(); n];
        // Clocks at releases, until the next acquisition takes them.
        let mut released: FxHashMap<(u64, u64), (usize, Vec<u32>)> = FxHashMap::default();
        let mut edges = false;
        for (i, c) in vc.iter().enumerate() {
            if wanted.contains(&(i, 0)) {
                clocks.insert((i, 0), c.clone().into_boxed_slice());
            }
        }
        loop {
            let mut moved = false;
            let mut blocked = None;
            for i in 0..n {
                while let Some(&op) = ops[i].get(pos[i]) {
                    if let SyncOp::Acquire { lock, order } = op {
                        let prev = order.checked_sub(1).map(|p| (lock, p));
                        let waits = prev.filter(|p| will_release.contains(p));
                        match waits.map(|p| released.remove(&p)) {
                            // Its release was not reached yet.
                            Some(None) => {
                                blocked.get_or_insert(i);
                                break;
                            }
                            Some(Some((from, at))) => {
                                edges |= from != i;
                                for (mine, theirs) in vc[i].iter_mut().zip(at) {
                                    *mine = (*mine).max(theirs);
                                }
                            }
                            None => {}
                        }
                        held[i].insert(lock, order);
                    } else if let SyncOp::Release { lock } = op {
                        if let Some(k) = held[i].remove(&lock) {
                            let mut at = vc[i].clone();
                            at[i] = at[i].saturating_add(1);
                            released.insert((lock, k), (i, at));
                        }
                    }
                    pos[i] += 1;
                    let epoch = u32::try_from(pos[i]).unwrap_or(u32::MAX);
                    vc[i][i] = epoch;
                    if wanted.contains(&(i, epoch)) {
                        clocks.insert((i, epoch), vc[i].clone().into_boxed_slice());
                    }
                    moved = true;
                }
            }
            if (0..n).all(|i| pos[i] >= ops[i].len()) {
                break;
            }
            if !moved {
                // Acquisitions waiting for each other (an inconsistent trace): the first
                // goes ahead without its release, as the replay would refuse the trace.
                let Some(i) = blocked else { break };
                if let Some(&SyncOp::Acquire { lock, order }) = ops[i].get(pos[i]) {
                    will_release.remove(&(lock, order.saturating_sub(1)));
                }
            }
        }
        edges.then_some(Ordering { index, clocks })
    }

    /// The clock of `thread`'s `epoch`, if it was needed.
    fn clock(&self, thread: ThreadId, epoch: u32) -> Option<(usize, &[u32])> {
        let i = *self.index.get(&thread)?;
        Some((i, self.clocks.get(&(i, epoch))?))
    }

    /// The alternations the accesses of threads `t` and `u` on a block can make at most,
    /// given their counts per epoch (each sorted by epoch): see the module docs. `None` when
    /// an epoch's clock is missing (the block is then estimated without order).
    pub fn pair_bound(
        &self,
        t: ThreadId,
        t_epochs: &[EpochCount],
        u: ThreadId,
        u_epochs: &[EpochCount],
    ) -> Option<u64> {
        let a = self.concurrent_sum(t, t_epochs, u, u_epochs)?;
        let b = self.concurrent_sum(u, u_epochs, t, t_epochs)?;
        let crossings = (t_epochs.len() + u_epochs.len()) as u64;
        Some(a.min(b).saturating_add(crossings))
    }

    /// Σ over `t`'s epochs of Eq. 1 between that epoch's accesses and those of `u`'s epochs
    /// concurrent with it.
    fn concurrent_sum(
        &self,
        t: ThreadId,
        t_epochs: &[EpochCount],
        u: ThreadId,
        u_epochs: &[EpochCount],
    ) -> Option<u64> {
        // Prefix sums of u's loads and stores, and each u epoch's view of t.
        let mut sums = Vec::with_capacity(u_epochs.len() + 1);
        sums.push((0u64, 0u64));
        let mut seen_t = Vec::with_capacity(u_epochs.len());
        let ti = *self.index.get(&t)?;
        let ui = *self.index.get(&u)?;
        for c in u_epochs {
            let (l, s) = sums[sums.len() - 1];
            sums.push((l.saturating_add(c.loads), s.saturating_add(c.stores)));
            let (_, clock) = self.clock(u, c.epoch)?;
            seen_t.push(*clock.get(ti)?);
        }
        let mut total = 0u64;
        for c in t_epochs {
            let (_, clock) = self.clock(t, c.epoch)?;
            // u's epochs before `lo` happen before this one; from `hi` on they come after.
            let lo_epoch = *clock.get(ui)?;
            let lo = u_epochs.partition_point(|x| x.epoch < lo_epoch);
            let hi = seen_t.partition_point(|&s| s <= c.epoch).max(lo);
            let (l, s) = (sums[hi].0 - sums[lo].0, sums[hi].1 - sums[lo].1);
            total = total.saturating_add(super::phi_counts(c.stores, c.loads, s, l));
        }
        Some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(epoch: u32, loads: u64, stores: u64) -> EpochCount {
        EpochCount {
            epoch,
            loads,
            stores,
        }
    }

    fn needed(list: &[(ThreadId, u32)]) -> FxHashSet<(ThreadId, u32)> {
        list.iter().copied().collect()
    }

    #[test]
    fn a_hand_over_through_a_lock_orders_the_phases_around_it() {
        // Thread 1 writes (epoch 0), takes and releases the lock (epochs 1, 2); thread 2
        // takes it after that release (its epoch 1) and writes from epoch 2 on.
        let ops = vec![
            vec![
                SyncOp::Acquire { lock: 9, order: 0 },
                SyncOp::Release { lock: 9 },
            ],
            vec![
                SyncOp::Acquire { lock: 9, order: 1 },
                SyncOp::Release { lock: 9 },
            ],
        ];
        let o = Ordering::of(&[1, 2], &ops, &needed(&[(1, 0), (2, 2), (2, 0)])).unwrap();
        let t = [count(0, 0, 1000)];
        let u = [count(2, 0, 1000)];
        // Unordered, Eq. 1 gives 2·1000 − 1; ordered, one crossing per epoch.
        assert_eq!(o.pair_bound(1, &t, 2, &u), Some(2));
        // Before its acquisition thread 2 runs beside thread 1's writes.
        let u_early = [count(0, 0, 1000)];
        assert_eq!(o.pair_bound(1, &t, 2, &u_early), Some(1999 + 2));
    }

    #[test]
    fn locks_a_thread_keeps_to_itself_order_nothing() {
        let ops = vec![
            vec![
                SyncOp::Acquire { lock: 1, order: 0 },
                SyncOp::Release { lock: 1 },
            ],
            vec![
                SyncOp::Acquire { lock: 2, order: 0 },
                SyncOp::Release { lock: 2 },
            ],
        ];
        assert!(Ordering::of(&[1, 2], &ops, &needed(&[(1, 0), (2, 0)])).is_none());
    }

    #[test]
    fn acquisitions_waiting_for_each_other_end_without_hanging() {
        // Each waits for a release only the other's later acquisition would give.
        let ops = vec![
            vec![
                SyncOp::Acquire { lock: 1, order: 1 },
                SyncOp::Acquire { lock: 2, order: 0 },
                SyncOp::Release { lock: 2 },
            ],
            vec![
                SyncOp::Acquire { lock: 2, order: 1 },
                SyncOp::Acquire { lock: 1, order: 0 },
                SyncOp::Release { lock: 1 },
            ],
        ];
        let o = Ordering::of(&[1, 2], &ops, &needed(&[(1, 3), (2, 3)]));
        assert!(o.is_some());
    }
}
