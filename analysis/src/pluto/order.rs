//! Order within a segment: which accesses of two threads can interleave at all.
//!
//! Pluto's φ̃ assumes any interleaving of a segment's accesses. Locks order some of them: a
//! thread that fills a buffer, releases the mutex a condition variable waits on, and a thread
//! that takes the mutex after it and then writes beside the buffer never overlap — but with
//! no barrier between them, the estimate counted the two threads' whole phases against each
//! other (2026-11-29 review: a padded mutex + condition variable hand-over, C and C++, flagged
//! with ~800,000 events while the replay simulated none).
//!
//! Each thread's part of a segment is cut into *epochs* at its points of *order objects*:
//! synchronization that orders code without holding anything, which the recorder writes as
//! lock events on objects with the schema's `ORDER_OBJECT` bit — a semaphore's posts and
//! waits, a condition variable's signals and completed waits, OpenMP tasks' creation, start,
//! completion, `taskwait` and dependences. A point is a *source* (a post, a signal, a task's
//! creation or completion) or a *sink* (a completed wait, a task's start, a `taskwait`):
//! code after a sink follows the code before every source of the object recorded before it.
//! Sources do not follow each other, nor sinks, and plain locks (mutexes, spin locks,
//! OpenMP `critical`, read-write locks) order nothing here: which thread took a lock first is
//! how this run went, not what the program requires, and an estimate that followed it would
//! change from recording to recording (2026-11-29 review: two workers bumping a counter under
//! a mutex between writes to neighbouring slots passed or failed depending on the run). Each
//! epoch gets a vector clock; only two epochs that are ordered neither way can interleave.
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

use cachescope_schema::event::{ORDER_OBJECT, ORDER_SINK_MARK};
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

    /// The lock events, per stream; `None` when there were too many to keep (`push` then
    /// dropped them all).
    pub fn ops(&self) -> Option<&[Vec<PackedOp>]> {
        (!self.ops.is_empty()).then_some(&self.ops[..])
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
/// detail. Only threads with points of order objects have clocks; the others are in their
/// epoch 0 throughout and see no other thread's epochs end.
#[derive(Debug, Default)]
pub(super) struct Ordering {
    /// Index of each thread with points in the segment.
    index: FxHashMap<ThreadId, usize>,
    /// Threads with points: the length of every clock.
    n: usize,
    /// Per such thread, the clocks of its needed epochs.
    streams: Vec<StreamClocks>,
}

/// The clocks of one stream's needed epochs, side by side: for each epoch (ascending), how
/// many epochs of each stream with points it has seen end (its own: its epoch number).
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

/// Vector clock entries kept per segment at most (epochs needed × threads with points);
/// beyond, the segment is estimated without order (as before; only ever a higher estimate).
const CLOCK_ENTRIES_MAX: usize = 1 << 24;

/// Whether lock events on `lock` are points of an order object (see the module docs).
pub(super) fn orders(lock: u64) -> bool {
    lock & ORDER_OBJECT != 0
}

impl Ordering {
    /// The order of a segment whose streams (threads `ids`) had the points `ops` (lock
    /// events on order objects), with clocks for the epochs in `needed` (per thread,
    /// ascending); `None` when no sink followed another thread's source (or the clocks would
    /// take too much room): nothing is ordered beyond program order.
    pub fn of(
        ids: &[ThreadId],
        ops: &[Vec<PackedOp>],
        needed: &FxHashMap<ThreadId, Vec<u32>>,
    ) -> Option<Ordering> {
        // Streams with points, in stream order.
        let active: Vec<usize> = (0..ids.len().min(ops.len()))
            .filter(|&i| !ops[i].is_empty())
            .collect();
        let n = active.len();
        let count: usize = active
            .iter()
            .filter_map(|&i| needed.get(&ids[i]))
            .map(Vec::len)
            .sum();
        if n < 2 || count.saturating_mul(n) > CLOCK_ENTRIES_MAX {
            return None;
        }
        let index: FxHashMap<ThreadId, usize> = active
            .iter()
            .enumerate()
            .map(|(a, &i)| (ids[i], a))
            .collect();
        let ops: Vec<&[PackedOp]> = active.iter().map(|&i| &ops[i][..]).collect();
        let wanted: Vec<&[u32]> = active
            .iter()
            .map(|&i| needed.get(&ids[i]).map_or(&[][..], |v| &v[..]))
            .collect();
        let mut streams: Vec<StreamClocks> = (0..n).map(|_| StreamClocks::default()).collect();
        // Per object, its first acquisition in the segment: acquisition #k waits for the
        // release of #k−1 only if that one was acquired in the segment too (else it came
        // before). One whose release never comes stops the walk, which then lets it go on
        // without (`given_up`).
        let mut first_order: FxHashMap<u64, u64> = FxHashMap::default();
        for stream in &ops {
            for op in stream.iter() {
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
        // Per stream and object: the acquisition it holds, and whether it is a sink.
        let mut held: Vec<FxHashMap<u64, (u64, bool)>> = vec![FxHashMap::default(); n];
        // Per object: the last acquisition released, and the sources' clocks so far.
        let mut released: FxHashMap<u64, u64> = FxHashMap::default();
        let mut sources: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
        let mut edges = false;
        for (i, c) in vc.iter().enumerate() {
            keep(i, 0, c, &mut streams);
        }
        loop {
            let mut moved = false;
            let mut blocked = None;
            for i in 0..n {
                while let Some(op) = ops[i].get(pos[i]).map(|p| p.get()) {
                    match op {
                        // Marks: no order of their own.
                        SyncOp::Acquire { lock, .. } | SyncOp::Release { lock }
                            if lock & ORDER_SINK_MARK != 0 => {}
                        SyncOp::Acquire { lock, order } => {
                            let waits = order.checked_sub(1).is_some_and(|p| {
                                first_order.get(&lock).is_some_and(|&f| p >= f)
                                    && !given_up.contains(&(lock, p))
                                    && released.get(&lock).is_none_or(|&r| r < p)
                            });
                            if waits {
                                // The release of #k−1 was not reached yet.
                                blocked.get_or_insert(i);
                                break;
                            }
                            let sink = ops[i].get(pos[i] + 2).is_some_and(|m| {
                                matches!(m.get(), SyncOp::Acquire { lock: l, .. }
                                    if l == lock | ORDER_SINK_MARK)
                            });
                            if sink {
                                if let Some(at) = sources.get(&lock) {
                                    for (k, (mine, &theirs)) in vc[i].iter_mut().zip(at).enumerate()
                                    {
                                        edges |= k != i && theirs > *mine;
                                        *mine = (*mine).max(theirs);
                                    }
                                }
                            }
                            held[i].insert(lock, (order, sink));
                        }
                        SyncOp::Release { lock } => {
                            if let Some((k, sink)) = held[i].remove(&lock) {
                                if !sink {
                                    // A source: its code so far comes before later sinks.
                                    let mut at = vc[i].clone();
                                    at[i] = at[i].saturating_add(1);
                                    let all = sources.entry(lock).or_insert_with(|| vec![0; n]);
                                    for (s, a) in all.iter_mut().zip(at) {
                                        *s = (*s).max(a);
                                    }
                                }
                                let r = released.entry(lock).or_insert(k);
                                *r = (*r).max(k);
                            }
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
                // Acquisitions waiting for releases that do not come (a point's release
                // missing from the segment; or, in an inconsistent trace, waits for each
                // other): the first goes ahead without.
                let Some(i) = blocked else { break };
                if let Some(SyncOp::Acquire { lock, order }) = ops[i].get(pos[i]).map(|p| p.get()) {
                    given_up.insert((lock, order.saturating_sub(1)));
                }
            }
        }
        edges.then_some(Ordering { index, n, streams })
    }

    /// Component `of` (a thread) of `thread`'s clock at `epoch`, moving `cursor` forward.
    /// A thread without points is in epoch 0 and sees no other thread's epochs end.
    fn view(&self, thread: ThreadId, cursor: &mut usize, epoch: u32, of: ThreadId) -> Option<u32> {
        match self.index.get(&thread) {
            None => (epoch == 0).then_some(0),
            Some(&i) => match self.index.get(&of) {
                None => Some(0),
                Some(&o) => self.streams.get(i)?.component(self.n, cursor, epoch, o),
            },
        }
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
        let mut total = 0u64;
        // u's epochs before `lo` happen before t's current one; from `hi` on they come after
        // it. Both only move forward as t's epochs go on (clocks grow along program order),
        // so the loads and stores of u's epochs in between are kept as a running window.
        let (mut lo, mut hi) = (0usize, 0usize);
        let (mut loads, mut stores) = (0u64, 0u64);
        let (mut t_cursor, mut u_cursor) = (0, 0);
        for c in t_epochs {
            let lo_epoch = self.view(t, &mut t_cursor, c.epoch, u)?;
            // Extend the window past u's epochs that have not seen the end of this one.
            while let Some(x) = u_epochs.get(hi) {
                if self.view(u, &mut u_cursor, x.epoch, t)? > c.epoch {
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

    const O: u64 = ORDER_OBJECT | 0x9000;

    /// A source point of `obj` numbered `order`.
    fn source(obj: u64, order: u64) -> Vec<SyncOp> {
        vec![
            SyncOp::Acquire { lock: obj, order },
            SyncOp::Release { lock: obj },
        ]
    }

    /// A sink point of `obj` numbered `order` (its mark numbered `mark`).
    fn sink(obj: u64, order: u64, mark: u64) -> Vec<SyncOp> {
        let m = obj | ORDER_SINK_MARK;
        vec![
            SyncOp::Acquire { lock: obj, order },
            SyncOp::Release { lock: obj },
            SyncOp::Acquire {
                lock: m,
                order: mark,
            },
            SyncOp::Release { lock: m },
        ]
    }

    #[test]
    fn a_wait_after_a_post_follows_the_posters_code_before_it() {
        // Thread 1 writes (epoch 0) and posts; thread 2's wait returns after the post and
        // it writes from epoch 4 on (after the sink and its mark).
        let ops = packed(vec![source(O, 0), sink(O, 1, 0)]);
        let o = Ordering::of(&[1, 2], &ops, &needed(&[(1, 0), (2, 4), (2, 0)])).unwrap();
        let t = [count(0, 0, 1000)];
        let u = [count(4, 0, 1000)];
        // Unordered, Eq. 1 gives 2·1000 − 1; ordered, one crossing per epoch.
        assert_eq!(o.pair_bound(1, &t, 2, &u), Some(2));
        // Before its wait thread 2 runs beside thread 1's writes.
        let u_early = [count(0, 0, 1000)];
        assert_eq!(o.pair_bound(1, &t, 2, &u_early), Some(1999 + 2));
    }

    #[test]
    fn sources_do_not_follow_each_other_nor_sinks() {
        // Two posts in a row by different threads: no order between them.
        let ops = packed(vec![source(O, 0), source(O, 1)]);
        assert!(Ordering::of(&[1, 2], &ops, &needed(&[(1, 0), (2, 0)])).is_none());
        // Two waits in a row (after a post by a third thread): they follow the post, not
        // each other.
        let ops = packed(vec![source(O, 0), sink(O, 1, 0), sink(O, 2, 1)]);
        let o = Ordering::of(&[1, 2, 3], &ops, &needed(&[(2, 0), (2, 4), (3, 0), (3, 4)])).unwrap();
        let (two, three) = ([count(4, 0, 1000)], [count(4, 0, 1000)]);
        assert_eq!(o.pair_bound(2, &two, 3, &three), Some(1999 + 2));
        // Thread 2 before its wait and thread 3 after its own: concurrent too.
        let two_early = [count(0, 0, 1000)];
        assert_eq!(o.pair_bound(2, &two_early, 3, &three), Some(1999 + 2));
    }

    #[test]
    fn sinks_waiting_for_each_other_end_without_hanging() {
        // Each waits for a source only the other's later point would give.
        let a = ORDER_OBJECT | 0x1000;
        let b = ORDER_OBJECT | 0x2000;
        let mut one = sink(a, 1, 0);
        one.extend(source(b, 0));
        let mut two = sink(b, 1, 0);
        two.extend(source(a, 0));
        let o = Ordering::of(&[1, 2], &packed(vec![one, two]), &needed(&[(1, 6), (2, 6)]));
        assert!(o.is_some());
    }
}
