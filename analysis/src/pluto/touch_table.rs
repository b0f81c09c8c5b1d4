//! What the first pass learns of one segment, once for every layout.
//!
//! Per 4 KiB page and thread: the bytes the thread accessed and the bytes it stored to. Each
//! layout reads what it needs of a block — which thread accessed it and whether another did,
//! whether it was written, its lowest accessed and written addresses — from the bytes the
//! block covers, so the table does not depend on line size or shift. Memory grows with the
//! pages a segment touches: about 110–125 bytes per page and thread for pages read or written
//! in a few stretches, up to 1 KiB more where the accesses are scattered (a bitmap each for the
//! accessed and the stored bytes). A table per layout cost about 150 bytes per block and
//! layout: 1.7 KB per 64-byte line with the audit's eleven layouts.
//!
//! Most pages of a segment are one thread's (private data): the walks that look for shared
//! blocks skip them, and the walk at the end of a segment hands on only their written blocks
//! when the previous segment left them to the same thread (no block of theirs is shared or
//! can have moved between cores).

use cachescope_schema::{AccessKind, ThreadId};
use rustc_hash::FxHashMap;

use super::byte_set::ByteSet;
use super::Layout;

/// Bytes per page of the table. At least the largest line size (512), so that a block spans
/// at most two pages.
pub(super) const PAGE_SIZE: u64 = 4096;

/// End of a page's list of threads.
const NONE: u32 = u32::MAX;

/// Threads of a page found by walking its list; a page with more is indexed by (page, thread),
/// so that thousands of threads on one page do not make each access walk them all.
const LIST_LIMIT: u32 = 8;

/// What one block saw in a segment, as a layout reads it from the table.
#[derive(Debug, Clone, Copy)]
pub(super) struct Touch {
    /// Lowest address accessed in the block.
    pub first_addr: u64,
    /// Lowest address written in the block, `u64::MAX` if none: the data object is named by
    /// it (several small objects share a line, and false sharing is about the written one).
    pub store_addr: u64,
    /// A thread that accessed it: the only one unless `many`.
    pub thread: ThreadId,
    /// Whether two or more threads accessed it.
    pub many: bool,
    /// Whether an access wrote it.
    pub store: bool,
}

/// A block as [`TouchTable::for_each_block_or_written`] hands it on.
#[derive(Debug, Clone, Copy)]
pub(super) enum Visit {
    /// A block and what it saw, as [`TouchTable::for_each_block`] gives it.
    Block(u64, Touch),
    /// A block of a quiet page (see [`TouchTable::for_each_block_or_written`]) that a store
    /// wrote: all that is left to note of it.
    Written(u64),
}

/// One thread's bytes of one page.
#[derive(Debug)]
struct ThreadBytes {
    thread: ThreadId,
    accessed: ByteSet,
    stored: ByteSet,
    /// The page's next thread, or `NONE`.
    next: u32,
}

/// One page of the table.
#[derive(Debug, Clone, Copy)]
struct Page {
    /// Its start address.
    base: u64,
    /// Its first thread's entry, or `NONE`.
    first: u32,
    /// Threads on its list.
    threads: u32,
}

/// The pages a segment touched, with each thread's bytes.
#[derive(Debug, Default)]
pub(super) struct TouchTable {
    /// Page start → index in `pages`.
    index: FxHashMap<u64, u32>,
    /// The pages, in the order first touched.
    pages: Vec<Page>,
    /// (page start, thread) → entry, for pages with more than `LIST_LIMIT` threads.
    crowded: FxHashMap<(u64, ThreadId), u32>,
    /// Threads' bytes, chained per page.
    entries: Vec<ThreadBytes>,
    /// Indices of `pages` by page start, once sealed.
    order: Vec<u32>,
    /// The page and thread of the last access, and their entry: accesses come in runs.
    last: Option<(u64, ThreadId, u32)>,
}

impl TouchTable {
    /// Notes an access (instruction fetches are not data and are left out).
    pub(super) fn touch(&mut self, thread: ThreadId, kind: AccessKind, addr: u64, size: u32) {
        if kind == AccessKind::Fetch {
            return;
        }
        let store = kind.writes();
        let end = addr.saturating_add(u64::from(size.max(1)));
        let mut at = addr;
        while at < end {
            let page = at & !(PAGE_SIZE - 1);
            let off = at - page;
            let n = (PAGE_SIZE - off).min(end - at);
            let e = self.entry(page, thread);
            let (s, e_off) = (off as u16, (off + n) as u16);
            let bytes = &mut self.entries[e];
            bytes.accessed.insert(s, e_off);
            if store {
                bytes.stored.insert(s, e_off);
            }
            at += n;
        }
    }

    /// The entry of `thread` on the page starting at `page`, made if new.
    fn entry(&mut self, page: u64, thread: ThreadId) -> usize {
        if let Some((p, t, e)) = self.last {
            if p == page && t == thread {
                return e as usize;
            }
        }
        let pages = &mut self.pages;
        let pos = *self.index.entry(page).or_insert_with(|| {
            pages.push(Page {
                base: page,
                first: NONE,
                threads: 0,
            });
            (pages.len() - 1) as u32
        }) as usize;
        let p = self.pages[pos];
        let mut e = if p.threads > LIST_LIMIT {
            self.crowded.get(&(page, thread)).copied().unwrap_or(NONE)
        } else {
            let mut e = p.first;
            while e != NONE && self.entries[e as usize].thread != thread {
                e = self.entries[e as usize].next;
            }
            e
        };
        if e == NONE {
            e = self.entries.len() as u32;
            self.entries.push(ThreadBytes {
                thread,
                accessed: ByteSet::default(),
                stored: ByteSet::default(),
                next: p.first,
            });
            let p = &mut self.pages[pos];
            p.first = e;
            p.threads += 1;
            if p.threads == LIST_LIMIT + 1 {
                let mut i = e;
                while i != NONE {
                    let bytes = &self.entries[i as usize];
                    self.crowded.insert((page, bytes.thread), i);
                    i = bytes.next;
                }
            } else if p.threads > LIST_LIMIT {
                self.crowded.insert((page, thread), e);
            }
        }
        self.last = Some((page, thread, e));
        e as usize
    }

    /// Ends the first pass: pages are visited in address order from now on.
    pub(super) fn seal(&mut self) {
        let pages = &self.pages;
        self.order = (0..pages.len() as u32).collect();
        self.order.sort_unstable_by_key(|&p| pages[p as usize].base);
        self.last = None;
    }

    /// Empties the table, keeping its room.
    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.pages.clear();
        self.crowded.clear();
        self.entries.clear();
        self.order.clear();
        self.last = None;
    }

    /// What the `len` bytes from `start` saw (wrapping at the top of the address space, as
    /// a shifted layout's block may), or `None` if no access touched them.
    pub(super) fn block(&self, start: u64, len: u64) -> Option<Touch> {
        let mut touch = None;
        let mut at = start;
        let mut left = len;
        while left > 0 {
            let page = at & !(PAGE_SIZE - 1);
            let off = at - page;
            let n = (PAGE_SIZE - off).min(left);
            if let Some(&pos) = self.index.get(&page) {
                self.fold_page(pos as usize, off as u16, (off + n) as u16, &mut touch);
            }
            at = at.wrapping_add(n);
            left -= n;
        }
        touch
    }

    /// Adds what the page at index `pos` saw in its bytes `[from, to)` to `touch`.
    fn fold_page(&self, pos: usize, from: u16, to: u16, touch: &mut Option<Touch>) {
        let Page {
            base, first: mut e, ..
        } = self.pages[pos];
        while e != NONE {
            let bytes = &self.entries[e as usize];
            e = bytes.next;
            let Some(first) = bytes.accessed.first_in(from, to) else {
                continue;
            };
            // Stored bytes are accessed bytes too.
            let stored = bytes.stored.first_in(from, to).map(|b| base + u64::from(b));
            let first = base + u64::from(first);
            match touch {
                None => {
                    *touch = Some(Touch {
                        first_addr: first,
                        store_addr: stored.unwrap_or(u64::MAX),
                        thread: bytes.thread,
                        many: false,
                        store: stored.is_some(),
                    })
                }
                Some(t) => {
                    t.first_addr = t.first_addr.min(first);
                    if let Some(s) = stored {
                        t.store_addr = t.store_addr.min(s);
                        t.store = true;
                    }
                    t.many |= t.thread != bytes.thread;
                }
            }
        }
    }

    /// Calls `f(block, touch)` for every block of `layout` that an access touched, with the
    /// block's start in the layout's (shifted) address space, in address order (but for a
    /// block that wraps around the top of the address space, visited last). The table must
    /// be sealed.
    #[cfg(test)]
    pub(super) fn for_each_block(&self, layout: Layout, f: impl FnMut(u64, Touch)) {
        self.walk(layout, false, f);
    }

    /// [`Self::for_each_block`] for a superset of the blocks that two or more threads
    /// accessed (`Touch::many`): it skips the pages that one thread alone touched, next to
    /// none touched by another (most of a segment's pages; no block of theirs can be shared).
    pub(super) fn for_each_shared_block(&self, layout: Layout, f: impl FnMut(u64, Touch)) {
        self.walk(layout, true, f);
    }

    /// [`Self::for_each_block`] as the end of a segment needs it, given the previous
    /// segment's table: a page that one thread alone touched, next to none touched by another,
    /// and whose bytes and neighbours the previous segment left untouched or to the same
    /// thread alone, has no block that is shared or can move between cores (the estimates
    /// give it nothing), so only its written blocks are handed on, as [`Visit::Written`]
    /// (some may be handed on twice). Other blocks come as [`Visit::Block`], as
    /// `for_each_block` gives them. Most of a segment's pages are quiet: private data.
    pub(super) fn for_each_block_or_written(
        &self,
        layout: Layout,
        previous: &TouchTable,
        mut f: impl FnMut(Visit),
    ) {
        let line = layout.line_size;
        let quiet = |pos: usize| {
            let Page { base, first, .. } = self.pages[pos];
            let thread = self.entries[first as usize].thread;
            self.private_page(pos)
                && [
                    base.wrapping_sub(PAGE_SIZE),
                    base,
                    base.wrapping_add(PAGE_SIZE),
                ]
                .into_iter()
                .all(|b| previous.left_to(b, thread))
        };
        for &pos in &self.order {
            let pos = pos as usize;
            if !quiet(pos) {
                self.walk_page(layout, pos, &mut |b, t| f(Visit::Block(b, t)));
                continue;
            }
            let Page { base, first, .. } = self.pages[pos];
            let bytes = &self.entries[first as usize];
            let r = base.wrapping_add(layout.shift) & (line - 1);
            // The blocks with a stored byte in this page.
            let mut from = 0u64;
            while let Some(b) = bytes.stored.first_in(from as u16, PAGE_SIZE as u16) {
                let k = (u64::from(b) + r) / line;
                let start = base.wrapping_sub(r).wrapping_add(k * line);
                f(Visit::Written(start.wrapping_add(layout.shift)));
                from = k * line + line - r;
                if from >= PAGE_SIZE {
                    break;
                }
            }
            // A last block going on into the next page, stored to only there: the walk
            // visits it from this page if this page touched it (from the next one else, where
            // it is found as that page's first block).
            let k = (r + PAGE_SIZE - 1) / line;
            let from = (k * line).saturating_sub(r);
            if k * line + line - r > PAGE_SIZE
                && bytes
                    .accessed
                    .first_in(from as u16, PAGE_SIZE as u16)
                    .is_some()
            {
                let start = base.wrapping_sub(r).wrapping_add(k * line);
                let next = base.wrapping_add(PAGE_SIZE);
                let in_next = k * line + line - r - PAGE_SIZE;
                if let Some(t) = self.block(next, in_next) {
                    if t.store {
                        f(Visit::Written(start.wrapping_add(layout.shift)));
                    }
                }
            }
        }
    }

    /// Whether no thread but `thread` touched the page starting at `base` (or none did).
    fn left_to(&self, base: u64, thread: ThreadId) -> bool {
        self.index.get(&base).is_none_or(|&pos| {
            let p = self.pages[pos as usize];
            p.threads == 1 && self.entries[p.first as usize].thread == thread
        })
    }

    /// Whether no block with bytes in the page at index `pos` can have been accessed by two
    /// threads: one thread touched it, and neither neighbouring page holds another's accesses
    /// (a block spans at most two pages).
    fn private_page(&self, pos: usize) -> bool {
        let Page {
            base,
            first,
            threads,
        } = self.pages[pos];
        if threads != 1 {
            return false;
        }
        let thread = self.entries[first as usize].thread;
        self.left_to(base.wrapping_sub(PAGE_SIZE), thread)
            && self.left_to(base.wrapping_add(PAGE_SIZE), thread)
    }

    /// The walk of [`Self::for_each_block`], skipping private pages if `shared_only`.
    fn walk(&self, layout: Layout, shared_only: bool, mut f: impl FnMut(u64, Touch)) {
        debug_assert!(layout.line_size.is_power_of_two() && layout.line_size <= PAGE_SIZE);
        for &pos in &self.order {
            let pos = pos as usize;
            if shared_only && self.private_page(pos) {
                continue;
            }
            self.walk_page(layout, pos, &mut f);
        }
    }

    /// The blocks that the page at index `pos` visits (see [`Self::for_each_block`]).
    fn walk_page(&self, layout: Layout, pos: usize, f: &mut impl FnMut(u64, Touch)) {
        let line = layout.line_size;
        let base = self.pages[pos].base;
        // The page starts `r` bytes into a block of the layout.
        let r = base.wrapping_add(layout.shift) & (line - 1);
        let blocks = (r + PAGE_SIZE).div_ceil(line);
        let mut k = 0;
        while k < blocks {
            // The block's bytes in this page.
            let from = (k * line).saturating_sub(r);
            let to = (k * line + line - r).min(PAGE_SIZE);
            let mut here = None;
            self.fold_page(pos, from as u16, to as u16, &mut here);
            let Some(touch) = here else {
                // Untouched: on to the block of the page's next touched byte (a page
                // touched in a few places is not walked block by block).
                match self.next_accessed(pos, to) {
                    Some(next) => k = (u64::from(next) + r) / line,
                    None => break,
                }
                continue;
            };
            let start = base.wrapping_sub(r).wrapping_add(k * line);
            if let Some(touch) = self.whole_block(base, r, k, line, start, touch) {
                f(start.wrapping_add(layout.shift), touch);
            }
            k += 1;
        }
    }

    /// The `k`-th block of the page starting at `base` (the block starts at `start`; the page
    /// `r` bytes into its first block), which saw `here` in this page: what the whole block
    /// saw, or `None` if it belongs to the previous page.
    fn whole_block(
        &self,
        base: u64,
        r: u64,
        k: u64,
        line: u64,
        start: u64,
        here: Touch,
    ) -> Option<Touch> {
        if k == 0 && r != 0 {
            // A block begun in the previous page belongs to that page if it touched it
            // there: each block is visited once, from its lowest touched page.
            let previous = base.wrapping_sub(PAGE_SIZE);
            if let Some(&p) = self.index.get(&previous) {
                let mut there = None;
                self.fold_page(
                    p as usize,
                    (PAGE_SIZE - r) as u16,
                    PAGE_SIZE as u16,
                    &mut there,
                );
                if there.is_some() {
                    return None;
                }
            }
        }
        if k * line + line - r > PAGE_SIZE {
            // It goes on into the next page.
            return self.block(start, line);
        }
        Some(here)
    }

    /// The lowest byte at or after `from` that a thread accessed on the page at index `pos`.
    fn next_accessed(&self, pos: usize, from: u64) -> Option<u16> {
        if from >= PAGE_SIZE {
            return None;
        }
        let mut e = self.pages[pos].first;
        let mut next: Option<u16> = None;
        while e != NONE {
            let bytes = &self.entries[e as usize];
            if let Some(b) = bytes.accessed.first_in(from as u16, PAGE_SIZE as u16) {
                next = Some(next.map_or(b, |n| n.min(b)));
            }
            e = bytes.next;
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Per block: (first thread, many, store, first address, store address), computed access
    /// by access as the per-layout tables did before the byte table.
    fn reference(
        layout: Layout,
        accesses: &[(ThreadId, bool, u64, u32)],
    ) -> BTreeMap<u64, (bool, bool, u64, u64, Option<ThreadId>)> {
        let mut blocks: BTreeMap<u64, (ThreadId, bool, bool, u64, u64)> = BTreeMap::new();
        for &(thread, store, addr, size) in accesses {
            layout.for_each_block(addr, size, |block, _, _, at| {
                let t = blocks
                    .entry(block)
                    .or_insert((thread, false, false, at, u64::MAX));
                t.1 |= t.0 != thread;
                t.2 |= store;
                t.3 = t.3.min(at);
                if store {
                    t.4 = t.4.min(at);
                }
            });
        }
        blocks
            .into_iter()
            .map(|(b, (th, many, store, first, stored))| {
                (b, (many, store, first, stored, (!many).then_some(th)))
            })
            .collect()
    }

    fn from_table(
        layout: Layout,
        accesses: &[(ThreadId, bool, u64, u32)],
    ) -> BTreeMap<u64, (bool, bool, u64, u64, Option<ThreadId>)> {
        let table = table_of(accesses);
        let mut blocks = BTreeMap::new();
        let mut last = None;
        table.for_each_block(layout, |b, t| {
            assert!(
                blocks
                    .insert(
                        b,
                        (
                            t.many,
                            t.store,
                            t.first_addr,
                            t.store_addr,
                            (!t.many).then_some(t.thread)
                        )
                    )
                    .is_none(),
                "block {b:#x} visited twice"
            );
            // Address order, except where a shifted block wraps around the top.
            if layout.shift == 0 {
                assert!(last < Some(b));
            }
            last = Some(b);
        });
        blocks
    }

    /// A table of `accesses`, sealed.
    fn table_of(accesses: &[(ThreadId, bool, u64, u32)]) -> TouchTable {
        let mut table = TouchTable::default();
        for &(thread, store, addr, size) in accesses {
            let kind = if store {
                AccessKind::Store
            } else {
                AccessKind::Load
            };
            table.touch(thread, kind, addr, size);
        }
        table.seal();
        table
    }

    /// What the end of a segment takes from a walk: the written blocks, and the blocks that
    /// are shared or may have moved between cores since the previous segment (in order, with
    /// what they saw).
    type EndOfSegment = (
        std::collections::BTreeSet<u64>,
        Vec<(u64, bool, bool, u64, u64, ThreadId)>,
    );

    proptest! {
        /// Skipping quiet pages at the end of a segment changes nothing it takes.
        #[test]
        fn the_end_walk_skips_only_quiet_blocks(
            previous in proptest::collection::vec(
                (0u32..10, any::<bool>(), prop_oneof![0u64..5 * PAGE_SIZE, u64::MAX - 2 * PAGE_SIZE..=u64::MAX], 0u32..700),
                0..30),
            current in proptest::collection::vec(
                (0u32..10, any::<bool>(), prop_oneof![0u64..5 * PAGE_SIZE, u64::MAX - 2 * PAGE_SIZE..=u64::MAX], 0u32..700),
                1..40),
            line_log in 3u32..13,
            shift_frac in 0u64..4096,
        ) {
            let line = 1u64 << line_log;
            let layout = Layout { line_size: line, shift: shift_frac % line };
            // Mostly thread 0, so that many pages are one thread's (quiet, or next to one).
            let mostly_one = |v: Vec<(ThreadId, bool, u64, u32)>| -> Vec<_> {
                v.into_iter().map(|(t, s, a, n)| (t / 8, s, a, n)).collect()
            };
            let (previous, current) = (
                table_of(&mostly_one(previous)),
                table_of(&mostly_one(current)),
            );
            let keep = |b: u64, t: &Touch, out: &mut EndOfSegment| {
                if t.store {
                    out.0.insert(b);
                }
                let crossing = previous
                    .block(b.wrapping_sub(layout.shift), line)
                    .is_some_and(|p| p.many || p.thread != t.thread);
                if t.many || crossing {
                    out.1.push((b, t.many, t.store, t.first_addr, t.store_addr, t.thread));
                }
            };
            let mut all: EndOfSegment = Default::default();
            current.for_each_block(layout, |b, t| keep(b, &t, &mut all));
            let mut skipping: EndOfSegment = Default::default();
            current.for_each_block_or_written(layout, &previous, |v| match v {
                Visit::Block(b, t) => keep(b, &t, &mut skipping),
                Visit::Written(b) => {
                    skipping.0.insert(b);
                }
            });
            prop_assert_eq!(skipping, all);
        }

        /// Skipping private pages loses no block that two threads accessed.
        #[test]
        fn the_shared_walk_finds_every_shared_block(
            accesses in proptest::collection::vec(
                (0u32..10, any::<bool>(), prop_oneof![0u64..4 * PAGE_SIZE, u64::MAX - 2 * PAGE_SIZE..=u64::MAX], 0u32..700),
                1..60),
            line_log in 3u32..13,
            shift_frac in 0u64..4096,
        ) {
            let line_size = 1u64 << line_log;
            let layout = Layout { line_size, shift: shift_frac % line_size };
            // Mostly thread 0, so that many pages are one thread's.
            let accesses: Vec<_> =
                accesses.into_iter().map(|(t, s, a, n)| (t / 8, s, a, n)).collect();
            let table = table_of(&accesses);
            let mut all = Vec::new();
            table.for_each_block(layout, |b, t| all.push((b, t.many, t.store, t.first_addr)));
            let mut shared = Vec::new();
            table.for_each_shared_block(layout, |b, t| {
                shared.push((b, t.many, t.store, t.first_addr))
            });
            // The same visits, in the same order, of every shared block.
            let all_shared: Vec<_> = all.iter().copied().filter(|v| v.1).collect();
            let shared_shared: Vec<_> = shared.iter().copied().filter(|v| v.1).collect();
            prop_assert_eq!(all_shared, shared_shared);
            prop_assert!(shared.iter().all(|v| all.contains(v)));
        }

        #[test]
        fn every_layout_reads_what_per_layout_tables_saw(
            accesses in proptest::collection::vec(
                (0u32..12, any::<bool>(), prop_oneof![0u64..3 * PAGE_SIZE, u64::MAX - 2 * PAGE_SIZE..=u64::MAX], 0u32..700),
                1..80),
            threads in 1u32..13,
            line_log in 3u32..10,
            shift_frac in 0u64..512,
        ) {
            // From one thread to twelve (more than a page's list holds: crowded pages).
            let accesses: Vec<_> = accesses
                .into_iter()
                .map(|(t, store, addr, size)| (t % threads, store, addr, size))
                .collect();
            let line_size = 1u64 << line_log;
            let layout = Layout { line_size, shift: shift_frac % line_size };
            prop_assert_eq!(from_table(layout, &accesses), reference(layout, &accesses));
        }
    }

    #[test]
    fn a_page_of_many_threads_finds_each_threads_bytes() {
        // 40 threads on one page, each storing to its own 8 bytes twice (the second time
        // through the crowded index), and one of them also to its neighbour's line.
        let mut accesses: Vec<(ThreadId, bool, u64, u32)> = Vec::new();
        for round in 0..2 {
            for t in 0..40u32 {
                accesses.push((t, round == 1, 0x10_000 + 64 * u64::from(t), 8));
            }
        }
        accesses.push((7, true, 0x10_000 + 64 * 8 + 32, 4));
        let layout = Layout::recorded(64);
        let blocks = from_table(layout, &accesses);
        assert_eq!(blocks, reference(layout, &accesses));
        assert_eq!(blocks.len(), 40);
        assert_eq!(
            blocks.values().filter(|b| b.0).count(),
            1,
            "one line of two threads"
        );
    }
}
