//! What the first pass learns of one segment, once for every layout.
//!
//! Per 4 KiB page and thread: the bytes the thread accessed and the bytes it stored to. Each
//! layout reads what it needs of a block — its first thread, whether another thread came,
//! whether it was written, its lowest accessed and written addresses — from the bytes the
//! block covers, so the table does not depend on line size or shift. Memory grows with the
//! pages a segment touches (a few dozen bytes per page read or written in order, 1 KiB per
//! page accessed in scattered places, per thread), where a table per layout and block cost
//! about 150 bytes per block and layout: 1.7 KB per 64-byte line with the audit's eleven
//! layouts.

use cachescope_schema::{AccessKind, ThreadId};
use rustc_hash::FxHashMap;

use super::byte_set::ByteSet;
use super::Layout;

/// Bytes per page of the table. At least the largest line size (512), so that a block spans
/// at most two pages.
pub(super) const PAGE_SIZE: u64 = 4096;

/// End of a page's list of threads.
const NONE: u32 = u32::MAX;

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

/// One thread's bytes of one page.
#[derive(Debug)]
struct ThreadBytes {
    thread: ThreadId,
    accessed: ByteSet,
    stored: ByteSet,
    /// The page's next thread, or `NONE`.
    next: u32,
}

/// The pages a segment touched, with each thread's bytes.
#[derive(Debug, Default)]
pub(super) struct TouchTable {
    /// Page start → index in `pages`.
    index: FxHashMap<u64, u32>,
    /// Page start and its first thread's entry.
    pages: Vec<(u64, u32)>,
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
            pages.push((page, NONE));
            (pages.len() - 1) as u32
        }) as usize;
        let mut e = self.pages[pos].1;
        while e != NONE && self.entries[e as usize].thread != thread {
            e = self.entries[e as usize].next;
        }
        if e == NONE {
            e = self.entries.len() as u32;
            self.entries.push(ThreadBytes {
                thread,
                accessed: ByteSet::default(),
                stored: ByteSet::default(),
                next: self.pages[pos].1,
            });
            self.pages[pos].1 = e;
        }
        self.last = Some((page, thread, e));
        e as usize
    }

    /// Ends the first pass: pages are visited in address order from now on.
    pub(super) fn seal(&mut self) {
        let pages = &self.pages;
        self.order = (0..pages.len() as u32).collect();
        self.order.sort_unstable_by_key(|&p| pages[p as usize].0);
        self.last = None;
    }

    /// Empties the table, keeping its room.
    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.pages.clear();
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
        let (base, mut e) = self.pages[pos];
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
    /// block's start in the layout's (shifted) address space, in address order. The table
    /// must be sealed.
    pub(super) fn for_each_block(&self, layout: Layout, mut f: impl FnMut(u64, Touch)) {
        let line = layout.line_size;
        for &pos in &self.order {
            let pos = pos as usize;
            let base = self.pages[pos].0;
            // The page starts `r` bytes into a block of the layout.
            let r = base.wrapping_add(layout.shift) & (line - 1);
            let first_block = base.wrapping_sub(r);
            for k in 0..(r + PAGE_SIZE).div_ceil(line) {
                let start = first_block.wrapping_add(k * line);
                // The block's bytes in this page.
                let from = (k * line).saturating_sub(r);
                let to = (k * line + line - r).min(PAGE_SIZE);
                let mut here = None;
                self.fold_page(pos, from as u16, to as u16, &mut here);
                let Some(mut touch) = here else {
                    continue;
                };
                let before = k == 0 && r != 0;
                let after = k * line + line - r > PAGE_SIZE;
                if before {
                    // A block begun in the previous page belongs to that page if it touched
                    // it there: each block is visited once, from its lowest touched page.
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
                            continue;
                        }
                    }
                }
                if after {
                    touch = match self.block(start, line) {
                        Some(t) => t,
                        None => continue,
                    };
                }
                f(start.wrapping_add(layout.shift), touch);
            }
        }
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

    proptest! {
        #[test]
        fn every_layout_reads_what_per_layout_tables_saw(
            accesses in proptest::collection::vec(
                (0u32..3, any::<bool>(), prop_oneof![0u64..3 * PAGE_SIZE, u64::MAX - 2 * PAGE_SIZE..=u64::MAX], 0u32..700),
                1..60),
            line_log in 3u32..10,
            shift_frac in 0u64..512,
        ) {
            let line_size = 1u64 << line_log;
            let layout = Layout { line_size, shift: shift_frac % line_size };
            prop_assert_eq!(from_table(layout, &accesses), reference(layout, &accesses));
        }
    }
}
