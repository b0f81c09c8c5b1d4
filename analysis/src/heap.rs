//! Live heap blocks, rebuilt from a trace's `Alloc`/`Free` events in the order the analysis
//! replays them.

use std::collections::BTreeMap;

use cachescope_schema::{Alignment, CodePos};

/// A live heap block containing a looked-up address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct HeapBlock {
    /// Start of the block.
    pub base: u64,
    /// Requested size in bytes.
    pub size: u64,
    /// The allocation site (a code position: see [`crate::symbols::Symbolizer::code`]).
    pub site: Option<CodePos>,
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

/// What the map keeps of a live block: size, site and requested alignment.
#[derive(Debug, Clone, Copy)]
struct Live {
    size: u64,
    site: Option<CodePos>,
    align: Option<Alignment>,
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
        let end = span_end(addr, size);
        // Blocks are disjoint, so at most one starts before `addr` and reaches into it; every
        // block starting inside `[addr, end)` overlaps.
        let mut stale: Vec<u64> = self.blocks.range(addr..end).map(|(&b, _)| b).collect();
        if let Some((&b, l)) = self.blocks.range(..addr).next_back() {
            if span_end(b, l.size) > addr {
                stale.push(b);
            }
        }
        for b in stale {
            self.blocks.remove(&b);
            self.replaced += 1;
        }
        self.blocks.insert(addr, Live { size, site, align });
    }

    /// Records a free of the block starting at `addr` (a `Free` event); returns the block if
    /// it was live.
    pub fn on_free(&mut self, addr: u64) -> Option<HeapBlock> {
        self.blocks.remove(&addr).map(|l| HeapBlock {
            base: addr,
            size: l.size,
            site: l.site,
            align: l.align,
            offset: 0,
        })
    }

    /// The live block holding `addr`, with the offset of `addr` in it.
    pub fn lookup(&self, addr: u64) -> Option<HeapBlock> {
        let (&base, l) = self.blocks.range(..=addr).next_back()?;
        let offset = addr - base;
        (offset < l.size).then_some(HeapBlock {
            base,
            size: l.size,
            site: l.site,
            align: l.align,
            offset,
        })
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
