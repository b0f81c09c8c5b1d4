//! Live heap blocks, rebuilt from a trace's `Alloc`/`Free` events in the order the analysis
//! replays them.

use std::collections::BTreeMap;

use cachescope_schema::event::MAX_ALLOC_CALLERS;
use cachescope_schema::{Alignment, CodePos, ThreadId};

/// The recorded callers of the function that allocated a block (the trace's `AllocCaller`
/// events), innermost first: where a library function or a wrapper was called from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Callers([Option<CodePos>; MAX_ALLOC_CALLERS]);

impl Callers {
    /// The callers, innermost first.
    pub fn iter(&self) -> impl Iterator<Item = CodePos> + '_ {
        self.0.iter().map_while(|c| *c)
    }

    /// Appends the next caller out; beyond [`MAX_ALLOC_CALLERS`] it is dropped.
    pub fn push(&mut self, site: CodePos) {
        if let Some(free) = self.0.iter_mut().find(|c| c.is_none()) {
            *free = Some(site);
        }
    }
}

impl serde::Serialize for Callers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// A live heap block containing a looked-up address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct HeapBlock {
    /// Start of the block.
    pub base: u64,
    /// Requested size in bytes.
    pub size: u64,
    /// The allocation site (a code position: see [`crate::symbols::Symbolizer::code`]).
    pub site: Option<CodePos>,
    /// Where the allocating function was called from, when the trace says.
    pub callers: Callers,
    /// The alignment the program asked for (`aligned_alloc`, `posix_memalign`); `None` for
    /// `malloc`-style allocations and traces that do not record it.
    pub align: Option<Alignment>,
    /// Offset of the looked-up address from `base` (0 for blocks returned by
    /// [`HeapMap::on_free`]).
    pub offset: u64,
}

/// The bytes a block occupies for overlap checks: a zero-size allocation still holds a
/// unique address (glibc returns a minimum chunk), so it counts as one byte there, while
/// lookups never match it (no byte of it may be accessed).
fn span_end(base: u64, size: u64) -> u64 {
    base.saturating_add(size.max(1))
}

/// The starts of the blocks of `blocks` (disjoint) that overlap `[addr, end)`: at most one
/// starts before `addr` and reaches into it, and every one starting inside overlaps.
fn overlapping(blocks: &BTreeMap<u64, Live>, addr: u64, end: u64) -> Vec<u64> {
    let mut found: Vec<u64> = blocks.range(addr..end).map(|(&b, _)| b).collect();
    if let Some((&b, l)) = blocks.range(..addr).next_back() {
        if span_end(b, l.size) > addr {
            found.push(b);
        }
    }
    found
}

/// The block of `blocks` holding `addr`, with the offset of `addr` in it.
fn containing(blocks: &BTreeMap<u64, Live>, addr: u64) -> Option<HeapBlock> {
    let (&base, l) = blocks.range(..=addr).next_back()?;
    let offset = addr - base;
    (offset < l.size).then(|| l.block(base, offset))
}

/// Most blocks freed in one segment that [`HeapMap`] keeps for naming (about 150 bytes each);
/// beyond that, further freed blocks are forgotten at once, as before segments kept any.
pub const FREED_KEPT: usize = 1 << 18;

/// What the map keeps of a live block: size, site, callers and requested alignment.
#[derive(Debug, Clone, Copy)]
struct Live {
    size: u64,
    site: Option<CodePos>,
    callers: Callers,
    align: Option<Alignment>,
}

impl Live {
    fn block(&self, base: u64, offset: u64) -> HeapBlock {
        HeapBlock {
            base,
            size: self.size,
            site: self.site,
            callers: self.callers,
            align: self.align,
            offset,
        }
    }
}

/// Live heap blocks by start address: `O(log n)` lookups for the millions of accesses of a
/// trace.
///
/// An allocation that overlaps live blocks replaces them: the allocator cannot hand out live
/// memory, so their frees were not recorded (freed by uninstrumented code, or a trace that
/// lost events). Frees of unknown addresses are ignored for the same reason.
#[derive(Debug, Default, Clone)]
pub struct HeapMap {
    blocks: BTreeMap<u64, Live>,
    /// Blocks freed since the last [`end_segment`](Self::end_segment), disjoint (a later free
    /// replaces the earlier blocks it overlaps), at most [`FREED_KEPT`]: a segment's accesses
    /// are named when the segment ends, and a block the program freed before that (a thread's
    /// block deleted before the barrier, or the join, that ends the segment) must still have
    /// its name.
    freed: BTreeMap<u64, Live>,
    /// Each thread's last allocation, which its `AllocCaller` events describe.
    last_alloc: BTreeMap<ThreadId, u64>,
    /// Blocks dropped because a later allocation overlapped them.
    replaced: u64,
}

impl HeapMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an allocation of `size` bytes at `addr` (an `Alloc` event) from `site`, with
    /// the alignment asked for.
    pub fn on_alloc(
        &mut self,
        addr: u64,
        size: u64,
        site: Option<CodePos>,
        align: Option<Alignment>,
    ) {
        for b in overlapping(&self.blocks, addr, span_end(addr, size)) {
            self.blocks.remove(&b);
            self.replaced += 1;
        }
        self.blocks.insert(
            addr,
            Live {
                size,
                site,
                callers: Callers::default(),
                align,
            },
        );
    }

    /// [`on_alloc`](Self::on_alloc) of an allocation made by `thread`, whose callers may
    /// follow ([`on_caller`](Self::on_caller)).
    pub fn on_alloc_in(
        &mut self,
        thread: ThreadId,
        addr: u64,
        size: u64,
        site: Option<CodePos>,
        align: Option<Alignment>,
    ) {
        self.on_alloc(addr, size, site, align);
        self.last_alloc.insert(thread, addr);
    }

    /// Records the next caller out of the function that made `thread`'s last allocation (an
    /// `AllocCaller` event); ignored when that block is gone or the thread allocated nothing.
    pub fn on_caller(&mut self, thread: ThreadId, site: CodePos) {
        let block = self.last_alloc.get(&thread);
        if let Some(live) = block.and_then(|b| self.blocks.get_mut(b)) {
            live.callers.push(site);
        }
    }

    /// Records a free of the block starting at `addr` (a `Free` event); returns the block if
    /// it was live.
    pub fn on_free(&mut self, addr: u64) -> Option<HeapBlock> {
        let live = self.blocks.remove(&addr)?;
        for b in overlapping(&self.freed, addr, span_end(addr, live.size)) {
            self.freed.remove(&b);
        }
        if self.freed.len() < FREED_KEPT {
            self.freed.insert(addr, live);
        }
        Some(live.block(addr, 0))
    }

    /// The block holding `addr` now, else the block that held it when it was freed during
    /// the current segment (see [`end_segment`](Self::end_segment)).
    pub fn lookup_in_segment(&self, addr: u64) -> Option<HeapBlock> {
        containing(&self.blocks, addr).or_else(|| containing(&self.freed, addr))
    }

    /// Ends a segment: its accesses are named, blocks freed during it are forgotten.
    pub fn end_segment(&mut self) {
        self.freed.clear();
    }

    /// The live block holding `addr`, with the offset of `addr` in it.
    pub fn lookup(&self, addr: u64) -> Option<HeapBlock> {
        containing(&self.blocks, addr)
    }

    /// Number of live blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether no block is live.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Blocks dropped because a later allocation overlapped them (their frees were missed);
    /// non-zero means the trace does not see every free.
    pub fn replaced(&self) -> u64 {
        self.replaced
    }
}
