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

/// A [`SyncOp`] in 16 bytes (the enum takes 24): a release has order `u64::MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PackedOp {
    lock: u64,
    order: u64,
}

impl From<SyncOp> for PackedOp {
    fn from(op: SyncOp) -> Self {
        match op {
            SyncOp::Acquire { lock, order } => PackedOp { lock, order },
            SyncOp::Release { lock } => PackedOp {
                lock,
                order: u64::MAX,
            },
        }
    }
}

impl PackedOp {
    fn get(self) -> SyncOp {
        match self.order {
            u64::MAX => SyncOp::Release { lock: self.lock },
            order => SyncOp::Acquire {
                lock: self.lock,
                order,
            },
        }
    }
}

/// The lock events of one round, per stream, and each stream's current epoch.
#[derive(Debug)]
pub(super) struct SyncLog {
    ops: Vec<Vec<PackedOp>>,
    /// Per stream, lock events so far in the round (its current epoch).
    epochs: Vec<u32>,
    /// Events kept in `ops`; past [`SYNC_OPS_MAX`] they are dropped (the round is then
    /// estimated without order) while the epochs still count.
    kept: usize,
}

/// Lock events kept per round at most (16 bytes each).
const SYNC_OPS_MAX: usize = 1 << 22;

impl SyncLog {
    /// An empty log for `streams` streams.
    pub fn new(streams: usize) -> Self {
        SyncLog {
            ops: vec![Vec::new(); streams],
            epochs: vec![0; streams],
            kept: 0,
        }
    }

    /// Stream `i`'s lock event `op`: its next accesses are in a new epoch.
    pub fn push(&mut self, i: usize, op: SyncOp) {
        self.epochs[i] = self.epochs[i].saturating_add(1);
        if self.kept < SYNC_OPS_MAX {
            self.ops[i].push(op.into());
            self.kept += 1;
        } else if !self.ops.is_empty() {
            tracing::debug!("too many lock events in a segment: estimated without lock order");
            self.ops.clear();
        }
    }

    /// Stream `i`'s current epoch.
    pub fn epoch(&self, i: usize) -> u32 {
        self.epochs[i]
    }

    /// Whether any stream had a lock event.
    pub fn any(&self) -> bool {
        self.epochs.iter().any(|&e| e > 0)
    }

    /// The lock events, per stream; `None` when there were too many to keep.
    pub fn ops(&self) -> Option<&[Vec<PackedOp>]> {
        (self.kept <= SYNC_OPS_MAX && !self.ops.is_empty()).then_some(&self.ops[..])
    }
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
    /// Threads (streams) in the segment: the length of every clock.
    n: usize,
    /// Per stream, the clocks of its needed epochs.
    streams: Vec<StreamClocks>,
}

/// The clocks of one stream's needed epochs, side by side: for each epoch (ascending), how
/// many epochs of each stream it has seen end (its own: its epoch number).
#[derive(Debug, Default)]
struct StreamClocks {
    epochs: Vec<u32>,
    /// `n` entries per epoch, in the order of `epochs`.
    clocks: Vec<u32>,
}

impl StreamClocks {
    /// Component `of` of the clock of `epoch`, moving `cursor` forward to it: callers ask
    /// for epochs in ascending order, so a walk costs no more than the stream's epochs.
    fn component(&self, n: usize, cursor: &mut usize, epoch: u32, of: usize) -> Option<u32> {
        while self.epochs.get(*cursor).is_some_and(|&e| e < epoch) {
            *cursor += 1;
        }
        if self.epochs.get(*cursor) != Some(&epoch) {
            return None;
        }
        self.clocks.get(*cursor * n + of).copied()
    }
}

/// Vector clock entries kept per segment at most (epochs needed × threads); beyond, the
/// segment is estimated without order (as before; only ever a higher estimate).
const CLOCK_ENTRIES_MAX: usize = 1 << 24;

impl Ordering {
    /// The order of a segment whose streams (threads `ids`) had the lock events `ops`, with
    /// clocks for the epochs in `needed` (per thread, ascending); `None` when no lock passed
    /// between two threads (or the clocks would take too much room): nothing is ordered
    /// beyond program order.
    pub fn of(
        ids: &[ThreadId],
        ops: &[Vec<PackedOp>],
        needed: &FxHashMap<ThreadId, Vec<u32>>,
    ) -> Option<Ordering> {
        let n = ids.len().min(ops.len());
        let count: usize = needed.values().map(Vec::len).sum();
        if n < 2 || count.saturating_mul(n) > CLOCK_ENTRIES_MAX {
            return None;
        }
        let index: FxHashMap<ThreadId, usize> = ids
            .iter()
            .take(n)
            .enumerate()
            .map(|(i, &t)| (t, i))
            .collect();
        let mut streams: Vec<StreamClocks> = (0..n).map(|_| StreamClocks::default()).collect();
        let mut wanted: Vec<&[u32]> = vec![&[]; n];
        for (t, epochs) in needed {
            if let Some(&i) = index.get(t) {
                wanted[i] = epochs;
            }
        }
        // Per lock, its first acquisition in the segment: acquisition #k waits for the
        // release of #k−1 only if that one was acquired in the segment too (else it came
        // before). One whose release never comes (a lock held at the segment's end) stops
        // the walk, which lets it go on without (`given_up`).
        let mut first_order: FxHashMap<u64, u64> = FxHashMap::default();
        for stream in ops.iter().take(n) {
            for op in stream {
                if let SyncOp::Acquire { lock, order } = op.get() {
                    let first = first_order.entry(lock).or_insert(order);
                    *first = (*first).min(order);
                }
            }
        }
        let mut given_up: FxHashSet<(u64, u64)> = FxHashSet::default();
        let mut vc: Vec<Vec<u32>> = vec![vec![0; n]; n];
        let mut pos = vec![0usize; n];
        // Per stream, the next needed epoch (an index into `wanted`).
        let mut next_wanted = vec![0usize; n];
        let mut keep = |i: usize, epoch: u32, clock: &[u32], streams: &mut [StreamClocks]| {
            let w = wanted[i];
            while w.get(next_wanted[i]).is_some_and(|&e| e < epoch) {
                next_wanted[i] += 1;
            }
            if w.get(next_wanted[i]) == Some(&epoch) {
                streams[i].epochs.push(epoch);
                streams[i].clocks.extend_from_slice(clock);
            }
        };
        let mut held: Vec<FxHashMap<u64, u64>> = vec![FxHashMap::default(); n];
        // Clocks at releases, until the next acquisition takes them.
        let mut released: FxHashMap<(u64, u64), (usize, Vec<u32>)> = FxHashMap::default();
        let mut edges = false;
        for (i, c) in vc.iter().enumerate() {
            keep(i, 0, c, &mut streams);
        }
        loop {
            let mut moved = false;
            let mut blocked = None;
            for i in 0..n {
                while let Some(op) = ops[i].get(pos[i]).map(|p| p.get()) {
                    if let SyncOp::Acquire { lock, order } = op {
                        let prev = order.checked_sub(1).map(|p| (lock, p));
                        let waits = prev.filter(|&(l, p)| {
                            first_order.get(&l).is_some_and(|&f| p >= f)
                                && !given_up.contains(&(l, p))
                        });
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
                    keep(i, epoch, &vc[i], &mut streams);
                    moved = true;
                }
            }
            if (0..n).all(|i| pos[i] >= ops[i].len()) {
                break;
            }
            if !moved {
                // Acquisitions waiting for releases that do not come (a lock held at the
                // segment's end; or, in an inconsistent trace, for each other): the first
                // goes ahead without its release.
                let Some(i) = blocked else { break };
                if let Some(SyncOp::Acquire { lock, order }) = ops[i].get(pos[i]).map(|p| p.get()) {
                    given_up.insert((lock, order.saturating_sub(1)));
                }
            }
        }
        edges.then_some(Ordering { index, n, streams })
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
        let (ti, ui) = (*self.index.get(&t)?, *self.index.get(&u)?);
        let (tc, uc) = (self.streams.get(ti)?, self.streams.get(ui)?);
        let mut total = 0u64;
        // u's epochs before `lo` happen before t's current one; from `hi` on they come after
        // it. Both only move forward as t's epochs go on (clocks grow along program order),
        // so the loads and stores of u's epochs in between are kept as a running window.
        let (mut lo, mut hi) = (0usize, 0usize);
        let (mut loads, mut stores) = (0u64, 0u64);
        let (mut t_cursor, mut u_cursor) = (0, 0);
        for c in t_epochs {
            let lo_epoch = tc.component(self.n, &mut t_cursor, c.epoch, ui)?;
            // Extend the window past u's epochs that have not seen the end of this one.
            while let Some(x) = u_epochs.get(hi) {
                if uc.component(self.n, &mut u_cursor, x.epoch, ti)? > c.epoch {
                    break;
                }
                if hi >= lo {
                    // (Counts of one segment's accesses: their sums cannot overflow.)
                    loads += x.loads;
                    stores += x.stores;
                }
                hi += 1;
            }
            // Drop u's epochs that happen before this one.
            while u_epochs.get(lo).is_some_and(|x| x.epoch < lo_epoch) {
                if lo < hi {
                    loads -= u_epochs[lo].loads;
                    stores -= u_epochs[lo].stores;
                }
                lo += 1;
            }
            let (l, s) = if lo < hi { (loads, stores) } else { (0, 0) };
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

    fn packed(ops: Vec<Vec<SyncOp>>) -> Vec<Vec<PackedOp>> {
        ops.into_iter()
            .map(|s| s.into_iter().map(PackedOp::from).collect())
            .collect()
    }

    fn needed(list: &[(ThreadId, u32)]) -> FxHashMap<ThreadId, Vec<u32>> {
        let mut m: FxHashMap<ThreadId, Vec<u32>> = FxHashMap::default();
        for &(t, e) in list {
            m.entry(t).or_default().push(e);
        }
        for v in m.values_mut() {
            v.sort_unstable();
        }
        m
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
        let o = Ordering::of(&[1, 2], &packed(ops), &needed(&[(1, 0), (2, 2), (2, 0)])).unwrap();
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
        assert!(Ordering::of(&[1, 2], &packed(ops), &needed(&[(1, 0), (2, 0)])).is_none());
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
        let o = Ordering::of(&[1, 2], &packed(ops), &needed(&[(1, 3), (2, 3)]));
        assert!(o.is_some());
    }
}
