//! The second pass's counts of one segment, once for all layouts.
//!
//! Each layout counts a block in detail when several threads use it with a store (see
//! `Estimator::mark_details`); a shared array that threads update at random has every line so
//! marked in every layout. Counting each access into every layout's blocks cost a dozen map
//! lookups per access and about 1 KB per line and layout. Here an access is counted once, by
//! what it is — address, size, thread and code position — if it overlaps a block that some
//! layout counts in detail; each layout then cuts these records into its own blocks at the end
//! of the segment. The records hold everything the per-layout counts hold (loads and stores
//! per thread and (offset, size) slot, accesses per code position), so the estimates are the
//! same, and an access repeated a million times (a thread's accumulator) is one record.

use std::borrow::Cow;

use cachescope_schema::{AccessKind, CodePos, ThreadId};
use rustc_hash::{FxHashMap, FxHashSet};

use super::order::{EpochCount, Ordering, PackedOp};
use super::Layout;

/// Epoch counts kept per segment at most ([`SegmentDetail::track_epochs`]); beyond, the
/// segment is estimated without order (only ever a higher estimate).
const EPOCH_ENTRIES_MAX: usize = 1 << 22;

/// Granules of this many bytes tell which accesses to keep: every granule that overlaps a
/// block counted in detail by some layout is marked, so the filter keeps a superset of the
/// accesses any layout needs (each layout skips the rest).
const GRANULE_SHIFT: u32 = 6;

/// What a counted access was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Record {
    /// First byte.
    pub addr: u64,
    /// Bytes accessed, as in the trace.
    pub size: u32,
    /// The accessing thread.
    pub thread: ThreadId,
    /// The instruction.
    pub pc: Option<CodePos>,
}

/// Loads and stores of one [`Record`] (a read-modify-write is both).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct LoadsStores {
    pub loads: u64,
    pub stores: u64,
}

/// The second pass of one segment.
#[derive(Debug, Default)]
pub(super) struct SegmentDetail {
    /// Granules overlapping a block some layout counts in detail.
    granules: FxHashSet<u64>,
    /// Counts per access, while the second pass runs.
    records: FxHashMap<Record, LoadsStores>,
    /// The same once it has run ([`SegmentDetail::seal`]): each layout reads them all.
    sealed: Vec<(Record, LoadsStores)>,
    /// The last granule looked up that is not marked.
    last_plain: Option<u64>,
    /// Whether to count loads and stores per marked granule, thread and epoch (the segment
    /// has lock events: see `order.rs`).
    track_epochs: bool,
    /// Those counts, each list in epoch order.
    epochs: FxHashMap<(u64, ThreadId), Vec<EpochCount>>,
    /// Entries in `epochs`.
    epoch_entries: usize,
    /// The segment's order, once sealed ([`SegmentDetail::order`]).
    ordering: Option<Ordering>,
}

/// A map or vector with room for more than this many times its entries (and more than
/// `ROOM_KEPT` entries) is given back when cleared: clearing and walking a hash map take time
/// in proportion to its room, and one large segment must not slow down thousands of small
/// ones after it.
const ROOM_FACTOR: usize = 8;

/// Room kept whatever the use.
const ROOM_KEPT: usize = 4096;

/// Whether a collection with `room` for `used` entries is worth keeping.
fn worth_keeping(room: usize, used: usize) -> bool {
    room <= ROOM_KEPT || room <= ROOM_FACTOR * used
}

impl SegmentDetail {
    /// Forgets the segment. The maps keep their room for the next one unless this one used
    /// a small part of it.
    pub fn clear(&mut self) {
        let used = self.sealed.len().max(self.records.len());
        if worth_keeping(self.granules.capacity(), self.granules.len()) {
            self.granules.clear();
        } else {
            self.granules = FxHashSet::default();
        }
        if worth_keeping(self.records.capacity(), used) {
            self.records.clear();
        } else {
            self.records = FxHashMap::default();
        }
        if worth_keeping(self.sealed.capacity(), self.sealed.len()) {
            self.sealed.clear();
        } else {
            self.sealed = Vec::new();
        }
        self.last_plain = None;
        self.track_epochs = false;
        self.epochs = FxHashMap::default();
        self.epoch_entries = 0;
        self.ordering = None;
    }

    /// Once sealed: orders the epochs the counts saw by the segment's lock events (`ops`,
    /// per stream of threads `ids`; `None` when there were too many to keep), if epochs were
    /// counted.
    pub fn order(&mut self, ids: &[ThreadId], ops: Option<&[Vec<PackedOp>]>) {
        self.ordering = match ops {
            Some(ops) if self.track_epochs && !self.epochs.is_empty() => {
                Ordering::of(ids, ops, &self.epochs_seen())
            }
            _ => None,
        };
    }

    /// The segment's order (see `order.rs`), when its lock events order threads.
    pub fn ordering(&self) -> Option<&Ordering> {
        self.ordering.as_ref()
    }

    /// Counts accesses per granule, thread and epoch from now on in this segment.
    pub fn track_epochs(&mut self) {
        self.track_epochs = true;
    }

    /// Per thread, the epochs that accessed a marked granule, ascending.
    fn epochs_seen(&self) -> FxHashMap<ThreadId, Vec<u32>> {
        let mut seen: FxHashMap<ThreadId, Vec<u32>> = FxHashMap::default();
        for (&(_, thread), list) in &self.epochs {
            seen.entry(thread)
                .or_default()
                .extend(list.iter().map(|c| c.epoch));
        }
        for epochs in seen.values_mut() {
            epochs.sort_unstable();
            epochs.dedup();
        }
        seen
    }

    /// `thread`'s loads and stores per epoch on the granules overlapping `len` bytes from
    /// `start` (a block of some layout, which may wrap around the top of the address space),
    /// in epoch order; borrowed when one granule holds them all (as with the recorded
    /// layout). A granule the block covers only in part counts whole: more accesses, so a
    /// higher estimate, never a lower one.
    pub fn epochs_of(&self, thread: ThreadId, start: u64, len: u64) -> Cow<'_, [EpochCount]> {
        let last = start.wrapping_add(len.max(1) - 1) >> GRANULE_SHIFT;
        let mut lists: Vec<&[EpochCount]> = Vec::new();
        let mut g = start >> GRANULE_SHIFT;
        loop {
            if let Some(list) = self.epochs.get(&(g, thread)) {
                lists.push(list);
            }
            if g == last {
                break;
            }
            g = g.wrapping_add(1) & (u64::MAX >> GRANULE_SHIFT);
        }
        match lists[..] {
            [] => Cow::Borrowed(&[]),
            [one] => Cow::Borrowed(one),
            _ => {
                let mut out: Vec<EpochCount> = lists.concat();
                out.sort_by_key(|c| c.epoch);
                out.dedup_by(|later, kept| {
                    let same = later.epoch == kept.epoch;
                    if same {
                        kept.loads = kept.loads.saturating_add(later.loads);
                        kept.stores = kept.stores.saturating_add(later.stores);
                    }
                    same
                });
                Cow::Owned(out)
            }
        }
    }

    /// Adds an access to the epoch counts of the marked granules it overlaps.
    fn count_epoch(
        &mut self,
        thread: ThreadId,
        epoch: u32,
        kind: AccessKind,
        first: u64,
        last: u64,
    ) {
        let (loads, stores) = (u64::from(kind.reads()), u64::from(kind.writes()));
        for g in first..=last {
            if !self.granules.contains(&g) {
                continue;
            }
            let list = self.epochs.entry((g, thread)).or_default();
            match list.last_mut() {
                Some(c) if c.epoch == epoch => {
                    c.loads += loads;
                    c.stores += stores;
                }
                _ => {
                    list.push(EpochCount {
                        epoch,
                        loads,
                        stores,
                    });
                    self.epoch_entries += 1;
                }
            }
        }
        if self.epoch_entries > EPOCH_ENTRIES_MAX {
            tracing::debug!("too many epochs in a segment: estimated without lock order");
            self.track_epochs = false;
            self.epochs = FxHashMap::default();
        }
    }

    /// Ends the second pass: the records become a list for the layouts to read, in address
    /// order (a layout then meets its blocks in order, as the accesses of an array come,
    /// rather than all over its maps).
    pub fn seal(&mut self) {
        self.sealed.clear();
        self.sealed.extend(self.records.drain());
        self.sealed
            .sort_unstable_by_key(|(r, _)| (r.addr, r.size, r.thread, r.pc));
    }

    /// Marks the bytes of `block` (a block of `layout`, in its shifted address space) as
    /// counted in detail. A block may wrap around the top of the address space.
    pub fn mark_block(&mut self, layout: Layout, block: u64) {
        let start = block.wrapping_sub(layout.shift);
        let last = start.wrapping_add(layout.line_size - 1);
        // Every granule the block overlaps holds one of these bytes: they are less than a
        // granule apart.
        for offset in (0..layout.line_size).step_by(1 << GRANULE_SHIFT) {
            self.granules
                .insert(start.wrapping_add(offset) >> GRANULE_SHIFT);
        }
        self.granules.insert(last >> GRANULE_SHIFT);
    }

    /// Counts an access of `thread` in its `epoch` if it overlaps a marked granule
    /// (instruction fetches are not counted).
    pub fn count(
        &mut self,
        thread: ThreadId,
        epoch: u32,
        kind: AccessKind,
        addr: u64,
        size: u32,
        pc: Option<CodePos>,
    ) {
        if kind == AccessKind::Fetch || self.granules.is_empty() {
            return;
        }
        // The bytes the layouts cut into blocks: an access running past the top of the
        // address space ends there (`Layout::for_each_block`).
        let end = addr.saturating_add(u64::from(size.max(1)));
        let (first, last) = (addr >> GRANULE_SHIFT, (end - 1) >> GRANULE_SHIFT);
        let marked = if first == last {
            if self.last_plain == Some(first) {
                false
            } else if self.granules.contains(&first) {
                true
            } else {
                self.last_plain = Some(first);
                false
            }
        } else {
            (first..=last).any(|g| self.granules.contains(&g))
        };
        if !marked {
            return;
        }
        if self.track_epochs {
            self.count_epoch(thread, epoch, kind, first, last);
        }
        let c = self.records.entry(Record {
            addr,
            size,
            thread,
            pc,
        });
        let c = c.or_default();
        if kind.reads() {
            c.loads += 1;
        }
        if kind.writes() {
            c.stores += 1;
        }
    }

    /// The counted accesses, in no particular order, once sealed.
    pub fn records(&self) -> impl Iterator<Item = (&Record, &LoadsStores)> {
        self.sealed.iter().map(|(r, c)| (r, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(line_size: u64, shift: u64) -> Layout {
        Layout { line_size, shift }
    }

    fn counted(d: &mut SegmentDetail) -> Vec<(u64, u32)> {
        d.seal();
        let mut v: Vec<(u64, u32)> = d.records().map(|(r, _)| (r.addr, r.size)).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn keeps_accesses_overlapping_a_marked_block_only() {
        let mut d = SegmentDetail::default();
        // The 32-byte block at 0x1020 of the recorded 32-byte layout.
        d.mark_block(layout(32, 0), 0x1020);
        for (addr, size) in [
            (0x1000, 8),
            (0x1028, 8),
            (0x0ffc, 8),
            (0x1040, 8),
            (0x2000, 4),
        ] {
            d.count(1, 0, AccessKind::Store, addr, size, None);
        }
        // The granule is 64 bytes: 0x1000 is kept too (a superset), 0x1040 and 0x2000 not;
        // 0x0ffc reaches into the granule.
        assert_eq!(counted(&mut d), vec![(0x0ffc, 8), (0x1000, 8), (0x1028, 8)]);
    }

    #[test]
    fn a_shifted_or_large_block_marks_every_granule_it_overlaps() {
        let mut d = SegmentDetail::default();
        // 128-byte line shifted by 64: the block at shifted 0x2080 is bytes 0x2040..0x20c0.
        d.mark_block(layout(128, 64), 0x2080);
        for addr in [0x2000, 0x2040, 0x2080, 0x20c0] {
            d.count(0, 0, AccessKind::Load, addr, 8, None);
        }
        assert_eq!(counted(&mut d), vec![(0x2040, 8), (0x2080, 8)]);
        // A block wrapping around the top of the address space.
        let mut d = SegmentDetail::default();
        d.mark_block(layout(64, 8), 0);
        d.count(0, 0, AccessKind::Load, u64::MAX - 3, 8, None);
        d.count(0, 0, AccessKind::Load, 0, 8, None);
        d.count(0, 0, AccessKind::Load, 0x40, 8, None);
        assert_eq!(counted(&mut d), vec![(0, 8), (u64::MAX - 3, 8)]);
    }

    #[test]
    fn counts_loads_and_stores_per_access_and_skips_fetches() {
        let mut d = SegmentDetail::default();
        d.mark_block(layout(64, 0), 0x40);
        let pc = CodePos::new(0x401000);
        d.count(2, 0, AccessKind::Modify, 0x48, 8, pc);
        d.count(2, 0, AccessKind::Modify, 0x48, 8, pc);
        d.count(2, 0, AccessKind::Load, 0x48, 8, pc);
        d.count(2, 0, AccessKind::Fetch, 0x48, 8, pc);
        d.count(3, 0, AccessKind::Store, 0x48, 8, pc);
        d.seal();
        let mut v: Vec<(ThreadId, u64, u64)> = d
            .records()
            .map(|(r, c)| (r.thread, c.loads, c.stores))
            .collect();
        v.sort_unstable();
        assert_eq!(v, vec![(2, 3, 2), (3, 0, 1)]);
        d.clear();
        d.count(2, 0, AccessKind::Store, 0x48, 8, pc);
        d.seal();
        assert_eq!(d.records().count(), 0);
    }
}
