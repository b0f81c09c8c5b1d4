//! Pluto's worst-case estimates of false-sharing events (thesis §4.2.2, Eq. 1–5), generalized
//! from two threads to any number.
//!
//! Within one barrier segment the order of accesses is unknown to the estimate (that is its
//! point: it holds for every interleaving). Per memory block (an aligned cache line) and thread
//! it counts loads L and stores S, also split by (offset, size):
//!
//! * φ̃ (Eq. 1), for threads u, v, is
//!   `2·[min(S_u, L_v) + min(S_v, L_u)] + 2·max(min(S_u − L_v, S_v − L_u), 0) − 1`: the
//!   longest alternating sequence of a store of one thread and an access of the other, minus
//!   the compulsory miss;
//! * θ̃ (Eq. 2): `2·Σ_{x,y} [min(S_u,xy, L_v,xy) + min(S_v,xy, L_u,xy)]` — accesses of the same
//!   offset and size by the other thread, taken as data exchange (true sharing);
//! * φ̃′ = φ̃ − θ̃ (Eq. 3, at least 0): the false-sharing estimate.
//!
//! **More than two threads.** φ̃ and θ̃ are summed over all pairs of threads that access the block.
//! Every access causes at most one coherence transaction in any interleaving, so the pair sum is
//! capped at (accesses to the block − 1); θ̃ is capped at φ̃. With two threads this is exactly
//! Eq. 1–3.
//!
//! **Segments.** Each thread's stream is cut at its barrier events (every `BarrierLeave` starts a
//! new segment for that thread); the k-th segments of all threads are estimated together, which
//! lines up the members of an OpenMP team or of a pthread barrier. Between consecutive segments
//! at most one transfer per block can happen (Eq. 4–5): the estimate adds, to both φ̃ and θ̃, the
//! blocks accessed in both segments by at least two threads with a store among them. (Eq. 4–5
//! count every block in both segments; blocks one thread uses alone cannot move between cores,
//! so they are left out.)

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use cachescope_schema::{AccessKind, CodePos, Event, ThreadId, TraceError, TraceFile};
use serde::Serialize;

use crate::heap::{HeapBlock, HeapMap};

/// Which layout of memory into blocks to assume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Block (cache line) size in bytes, a power of two.
    pub line_size: u64,
    /// Bytes added to every address before cutting into blocks: a virtual re-alignment of the
    /// data (as Predator's virtual lines), 0 for the recorded layout.
    pub shift: u64,
}

impl Layout {
    /// The recorded layout with `line_size`-byte lines.
    pub fn recorded(line_size: u64) -> Self {
        Layout {
            line_size,
            shift: 0,
        }
    }

    fn block_of(&self, addr: u64) -> u64 {
        addr.wrapping_add(self.shift) & !(self.line_size - 1)
    }
}

/// Load and store counts of one thread on one block.
#[derive(Debug, Clone, Default)]
struct ThreadCounts {
    loads: u64,
    stores: u64,
    /// By (offset in block, size): (loads, stores).
    by_slot: BTreeMap<(u32, u32), (u64, u64)>,
}

/// Where a thread accessed a block: code position, kind, count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SiteKey {
    /// The accessing thread.
    pub thread: ThreadId,
    /// The instruction (None when the recorder did not know it).
    pub pc: Option<CodePos>,
    /// Whether the accesses wrote.
    pub store: bool,
}

/// One block's counts in one segment.
#[derive(Debug, Clone, Default)]
struct BlockCounts {
    threads: BTreeMap<ThreadId, ThreadCounts>,
    sites: HashMap<SiteKey, u64>,
    /// Lowest address accessed in the block (for naming the data object).
    first_addr: u64,
}

/// The estimates for one block over the whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BlockEstimate {
    /// Block start address (in the recorded address space: the shift is undone).
    pub block: u64,
    /// A representative accessed address inside the block (for naming the data object).
    pub sample_addr: u64,
    /// φ̃: worst-case coherence events.
    pub phi: u64,
    /// θ̃: of those, possible data exchanges.
    pub theta: u64,
    /// φ̃′ = φ̃ − θ̃ (at least 0): estimated false-sharing events.
    pub phi_prime: u64,
    /// Segments in which the block was shared with a store.
    pub segments: u64,
    /// Threads that accessed the block in those segments.
    pub threads: Vec<ThreadId>,
    /// Access counts per thread, code position and kind, in those segments (largest first).
    pub sites: Vec<(SiteKey, u64)>,
    /// The heap block containing `sample_addr` when the block was first estimated, if any.
    pub heap: Option<HeapBlock>,
}

/// Pluto estimates of a trace under one layout.
#[derive(Debug, Clone, Serialize)]
pub struct PlutoReport {
    /// The layout assumed.
    pub layout: Layout,
    /// Number of segments (of the thread with the most).
    pub segments: u64,
    /// Blocks with φ̃ > 0, by φ̃′ then φ̃ (largest first).
    pub blocks: Vec<BlockEstimate>,
    /// Per thread: time units spent inside parallel regions (`RegionBegin`..`RegionEnd`), 0
    /// for threads that never entered one (e.g. plain pthreads).
    pub region_units: BTreeMap<ThreadId, u64>,
    /// Every block written during the run (start addresses in the recorded address space), to
    /// tell how much of an object's written data a finding covers.
    #[serde(skip)]
    pub written_blocks: BTreeSet<u64>,
}

impl PlutoReport {
    /// Written blocks within `[start, end)` (none when the range is empty or wraps).
    pub fn written_in(&self, start: u64, end: u64) -> usize {
        let line = self.layout.line_size;
        let from = start & !(line - 1);
        if from >= end {
            return 0;
        }
        self.written_blocks.range(from..end).count()
    }
}

impl PlutoReport {
    /// Σ φ̃′ over blocks.
    pub fn total_phi_prime(&self) -> u64 {
        self.blocks.iter().map(|b| b.phi_prime).sum()
    }
}

/// Eq. 1 for one pair of threads.
fn phi_pair(u: &ThreadCounts, v: &ThreadCounts) -> u64 {
    let (su, lu, sv, lv) = (
        i128::from(u.stores),
        i128::from(u.loads),
        i128::from(v.stores),
        i128::from(v.loads),
    );
    if su + sv == 0 {
        return 0;
    }
    let crossed = 2 * (su.min(lv) + sv.min(lu));
    let stores_left = 2 * (su - lv).min(sv - lu).max(0);
    (crossed + stores_left - 1).max(0) as u64
}

/// Eq. 2 for one pair of threads.
fn theta_pair(u: &ThreadCounts, v: &ThreadCounts) -> u64 {
    let mut t = 0;
    for (slot, &(lu, su)) in &u.by_slot {
        if let Some(&(lv, sv)) = v.by_slot.get(slot) {
            t += 2 * (su.min(lv) + sv.min(lu));
        }
    }
    t
}

/// φ̃ and θ̃ of one block in one segment, over all pairs of threads (see the module docs).
fn estimate(b: &BlockCounts) -> (u64, u64) {
    let threads: Vec<&ThreadCounts> = b.threads.values().collect();
    let accesses: u64 = threads.iter().map(|t| t.loads + t.stores).sum();
    let mut phi = 0u64;
    let mut theta = 0u64;
    for i in 0..threads.len() {
        for j in i + 1..threads.len() {
            phi = phi.saturating_add(phi_pair(threads[i], threads[j]));
            theta = theta.saturating_add(theta_pair(threads[i], threads[j]));
        }
    }
    let phi = phi.min(accesses.saturating_sub(1));
    (phi, theta.min(phi))
}

/// Blocks accessed by ≥ 2 threads with at least one store, as (block → threads, has store).
type SharedSet = HashMap<u64, (HashSet<ThreadId>, bool)>;

/// Accumulates the segments of all threads.
struct Estimator {
    layout: Layout,
    written: BTreeSet<u64>,
    current: HashMap<u64, BlockCounts>,
    previous: HashMap<u64, (HashSet<ThreadId>, bool)>,
    totals: HashMap<u64, BlockEstimate>,
    segments: u64,
}

impl Estimator {
    fn new(layout: Layout) -> Self {
        Estimator {
            layout,
            written: BTreeSet::new(),
            current: HashMap::new(),
            previous: HashMap::new(),
            totals: HashMap::new(),
            segments: 0,
        }
    }

    fn access(
        &mut self,
        thread: ThreadId,
        kind: AccessKind,
        addr: u64,
        size: u32,
        pc: Option<CodePos>,
    ) {
        if kind == AccessKind::Fetch {
            return;
        }
        let line = self.layout.line_size;
        let mut at = addr;
        let end = addr.saturating_add(u64::from(size.max(1)));
        while at < end {
            let block = self.layout.block_of(at);
            let offset = at.wrapping_add(self.layout.shift) - block;
            let piece = (line - offset).min(end - at);
            let b = self.current.entry(block).or_insert_with(|| BlockCounts {
                first_addr: at,
                ..BlockCounts::default()
            });
            b.first_addr = b.first_addr.min(at);
            let t = b.threads.entry(thread).or_default();
            let slot = t.by_slot.entry((offset as u32, piece as u32)).or_default();
            if kind.reads() {
                t.loads += 1;
                slot.0 += 1;
                *b.sites
                    .entry(SiteKey {
                        thread,
                        pc,
                        store: false,
                    })
                    .or_default() += 1;
            }
            if kind.writes() {
                t.stores += 1;
                slot.1 += 1;
                *b.sites
                    .entry(SiteKey {
                        thread,
                        pc,
                        store: true,
                    })
                    .or_default() += 1;
            }
            at += piece;
        }
    }

    /// Ends segment k of every thread: estimates it and adds the transfers from segment k−1.
    /// `heap` names heap data as it is live now.
    fn end_segment(&mut self, heap: &HeapMap) {
        self.segments += 1;
        let mut shared: SharedSet = HashMap::new();
        for (block, b) in self.current.drain() {
            let any_store = b.threads.values().any(|t| t.stores > 0);
            if any_store {
                self.written.insert(block.wrapping_sub(self.layout.shift));
            }
            let tids: HashSet<ThreadId> = b.threads.keys().copied().collect();
            let (phi, theta) = estimate(&b);
            // Transfer from the previous segment (Eq. 4–5): a block used by ≥ 2 threads over
            // both segments, with a store among them.
            let crossing = match self.previous.get(&block) {
                Some((prev_tids, prev_store)) => {
                    let union: HashSet<_> = prev_tids.union(&tids).collect();
                    u64::from(union.len() >= 2 && (any_store || *prev_store))
                }
                None => 0,
            };
            if phi + crossing > 0 {
                let e = self.totals.entry(block).or_insert_with(|| BlockEstimate {
                    block: block.wrapping_sub(self.layout.shift),
                    sample_addr: b.first_addr,
                    heap: heap.lookup(b.first_addr),
                    ..BlockEstimate::default()
                });
                e.phi += phi + crossing;
                e.theta += theta + crossing;
                for t in &tids {
                    if !e.threads.contains(t) {
                        e.threads.push(*t);
                    }
                }
                if phi > 0 {
                    e.segments += 1;
                    for (k, n) in b.sites {
                        match e.sites.iter_mut().find(|(s, _)| *s == k) {
                            Some((_, m)) => *m += n,
                            None => e.sites.push((k, n)),
                        }
                    }
                }
            }
            shared.insert(block, (tids, any_store));
        }
        self.previous = shared;
    }

    fn finish(mut self, heap: &HeapMap) -> PlutoReport {
        if !self.current.is_empty() {
            self.end_segment(heap);
        }
        let mut blocks: Vec<BlockEstimate> = self
            .totals
            .into_values()
            .map(|mut e| {
                e.phi_prime = e.phi.saturating_sub(e.theta);
                e.threads.sort_unstable();
                e.sites.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                e
            })
            .collect();
        blocks.sort_by(|a, b| (b.phi_prime, b.phi, a.block).cmp(&(a.phi_prime, a.phi, b.block)));
        PlutoReport {
            layout: self.layout,
            segments: self.segments,
            blocks,
            region_units: BTreeMap::new(),
            written_blocks: self.written,
        }
    }
}

/// Estimates `trace` under each of `layouts` in one pass over the trace.
///
/// The threads are read segment by segment (all threads' k-th segment, then the (k+1)-th), so
/// memory holds one segment's blocks, not the run's. `heap` follows the trace's allocations
/// (and is left as it is at the end), so blocks can be named by the heap block they were in.
pub fn estimate_trace(
    trace: &TraceFile,
    layouts: &[Layout],
    heap: &mut HeapMap,
) -> Result<Vec<PlutoReport>, TraceError> {
    let mut estimators: Vec<Estimator> = layouts.iter().map(|&l| Estimator::new(l)).collect();
    let ids: Vec<ThreadId> = trace.thread_ids().collect();
    let mut streams = Vec::with_capacity(ids.len());
    for &t in &ids {
        streams.push((t, trace.thread_events(t)?, false));
    }
    // Per thread: region nesting depth and units spent inside regions.
    let mut regions: BTreeMap<ThreadId, (u32, u64)> = BTreeMap::new();
    loop {
        let mut any = false;
        for (tid, events, done) in streams.iter_mut() {
            if *done {
                continue;
            }
            loop {
                match events.next() {
                    None => {
                        *done = true;
                        break;
                    }
                    Some(Err(e)) => return Err(e),
                    Some(Ok(Event::Access(a))) => {
                        any = true;
                        for est in &mut estimators {
                            est.access(*tid, a.kind, a.addr, a.size, a.pc);
                        }
                    }
                    Some(Ok(Event::BarrierLeave { .. })) => {
                        any = true;
                        break;
                    }
                    Some(Ok(Event::Advance { units, .. })) => {
                        let r = regions.entry(*tid).or_default();
                        if r.0 > 0 {
                            r.1 = r.1.saturating_add(units);
                        }
                    }
                    Some(Ok(Event::RegionBegin { .. })) => regions.entry(*tid).or_default().0 += 1,
                    Some(Ok(Event::RegionEnd { .. })) => {
                        let r = regions.entry(*tid).or_default();
                        r.0 = r.0.saturating_sub(1);
                    }
                    Some(Ok(Event::Alloc { addr, size, site })) => heap.on_alloc(addr, size, site),
                    Some(Ok(Event::Free { addr })) => {
                        heap.on_free(addr);
                    }
                    Some(Ok(_)) => {}
                }
            }
        }
        for est in &mut estimators {
            est.end_segment(heap);
        }
        if !any || streams.iter().all(|s| s.2) {
            break;
        }
    }
    let region_units: BTreeMap<ThreadId, u64> =
        regions.into_iter().map(|(t, (_, u))| (t, u)).collect();
    Ok(estimators
        .into_iter()
        .map(|e| {
            let mut r = e.finish(heap);
            r.region_units = region_units.clone();
            r
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (offset, size) → (loads, stores).
    type Slot = ((u32, u32), (u64, u64));

    fn counts(loads: u64, stores: u64, slots: &[Slot]) -> ThreadCounts {
        ThreadCounts {
            loads,
            stores,
            by_slot: slots.iter().copied().collect(),
        }
    }

    #[test]
    fn eq1_matches_hand_computation() {
        // Thread 0: 3 stores, 1 load; thread 1: 2 stores, 5 loads.
        // 2·[min(3,5) + min(2,1)] + 2·max(min(3−5, 2−1), 0) − 1 = 2·4 + 0 − 1 = 7.
        assert_eq!(phi_pair(&counts(1, 3, &[]), &counts(5, 2, &[])), 7);
        // Only stores: 4 and 4 → 2·0 + 2·min(4, 4) − 1 = 7 (s0 s1 s0 s1 … alternate).
        assert_eq!(phi_pair(&counts(0, 4, &[]), &counts(0, 4, &[])), 7);
        // Loads only: nothing.
        assert_eq!(phi_pair(&counts(9, 0, &[]), &counts(9, 0, &[])), 0);
        // Section 4.2.2's first example: s0,1 s1,1 by thread 0, l2,1 l3,1 by thread 1 →
        // worst case 2·min(2, 2) − 1 = 3 events.
        assert_eq!(phi_pair(&counts(0, 2, &[]), &counts(2, 0, &[])), 3);
    }

    #[test]
    fn eq2_counts_matching_offsets_and_sizes_only() {
        // Figure 4.2-like: thread 1 stores (0,4) twice and (8,4) once; thread 0 loads (0,4)
        // twice and (4,4) once; thread 1 loads (8,4), thread 0 stores (8,4).
        let t0 = counts(
            3,
            1,
            &[((0, 4), (2, 0)), ((4, 4), (1, 0)), ((8, 4), (0, 1))],
        );
        let t1 = counts(1, 3, &[((0, 4), (0, 2)), ((8, 4), (1, 1))]);
        // 2·[(min(0,0)+min(2,2)) + (min(1,1)+min(1,0))] = 2·(2 + 1) = 6.
        assert_eq!(theta_pair(&t0, &t1), 6);
    }

    #[test]
    fn more_threads_sum_pairs_capped_by_accesses() {
        let mut b = BlockCounts::default();
        for t in 0..3 {
            b.threads.insert(t, counts(1, 1, &[((t * 8, 8), (1, 1))]));
        }
        let (phi, theta) = estimate(&b);
        // Pairs: each 2·[1+1] + 0 − 1 = 3, three pairs = 9, capped at 6 accesses − 1 = 5.
        assert_eq!(phi, 5);
        assert_eq!(theta, 0, "disjoint offsets exchange nothing");
    }

    #[test]
    fn disjoint_writers_in_one_line_are_false_sharing_padded_are_not() {
        let layout = Layout::recorded(64);
        let mut est = Estimator::new(layout);
        for i in 0..100 {
            est.access(0, AccessKind::Modify, 0x1000, 4, None);
            est.access(1, AccessKind::Modify, 0x1004, 4, None);
            let _ = i;
        }
        let r = est.finish(&HeapMap::new());
        assert_eq!(r.blocks.len(), 1);
        assert_eq!(r.blocks[0].block, 0x1000);
        assert!(r.blocks[0].phi_prime >= 199, "{:?}", r.blocks[0]);
        let mut padded = Estimator::new(layout);
        for _ in 0..100 {
            padded.access(0, AccessKind::Modify, 0x1000, 4, None);
            padded.access(1, AccessKind::Modify, 0x1040, 4, None);
        }
        assert!(padded.finish(&HeapMap::new()).blocks.is_empty());
        // The same accesses with 128-byte lines share a line again: latent false sharing.
        let mut wide = Estimator::new(Layout::recorded(128));
        for _ in 0..100 {
            wide.access(0, AccessKind::Modify, 0x1000, 4, None);
            wide.access(1, AccessKind::Modify, 0x1040, 4, None);
        }
        assert!(wide.finish(&HeapMap::new()).total_phi_prime() > 0);
    }

    #[test]
    fn producer_consumer_on_the_same_slot_is_true_sharing() {
        let mut est = Estimator::new(Layout::recorded(64));
        for _ in 0..50 {
            est.access(0, AccessKind::Store, 0x2000, 8, None);
            est.access(1, AccessKind::Load, 0x2000, 8, None);
        }
        let r = est.finish(&HeapMap::new());
        assert_eq!(r.blocks[0].phi, 99);
        assert_eq!(r.blocks[0].phi_prime, 0, "{:?}", r.blocks[0]);
    }

    #[test]
    fn blocks_at_the_top_of_the_address_space_are_counted_without_overflow() {
        let mut est = Estimator::new(Layout {
            line_size: 64,
            shift: 32,
        });
        for _ in 0..10 {
            est.access(0, AccessKind::Store, u64::MAX - 63, 64, None);
            est.access(1, AccessKind::Store, u64::MAX - 7, 8, None);
        }
        let r = est.finish(&HeapMap::new());
        assert!(r.total_phi_prime() > 0);
        assert_eq!(r.written_in(u64::MAX - 63, u64::MAX), 1);
        assert_eq!(
            r.written_in(u64::MAX - 63, u64::MAX - 100),
            0,
            "an empty range"
        );
    }

    #[test]
    fn transfers_between_segments_count_once_per_shared_block() {
        let mut est = Estimator::new(Layout::recorded(64));
        est.access(0, AccessKind::Store, 0x3000, 8, None);
        est.end_segment(&HeapMap::new());
        est.access(1, AccessKind::Load, 0x3000, 8, None);
        est.end_segment(&HeapMap::new());
        let r = est.finish(&HeapMap::new());
        assert_eq!(r.blocks.len(), 1);
        assert_eq!((r.blocks[0].phi, r.blocks[0].theta), (1, 1));
    }
}
