//! One simulated core of the parallel engine: its private levels, simulated by one worker in
//! the bound phase without looking at any other core.
//!
//! Everything a core decides alone is final here: lookups and hits in its private levels,
//! compulsory/capacity/conflict classification, fills and evictions inside its private
//! levels. Everything that needs the other cores or the shared levels becomes a [`Req`]
//! stamped with the event's place in the global order ([`Seq`]), for the weave: misses in
//! all private levels, upgrades, writes to lines whose bytes are tracked for true/false
//! classification (the set of tracked lines cannot grow in a quantum that runs apart: only a
//! write that invalidates another core's copy starts tracking, and that runs the quantum in
//! lockstep), private copies that disappeared (directory), and dirty data leaving the private
//! levels.
//!
//! The worker speculates on what the weave will decide: a write miss or upgrade fills with
//! ownership at once (the weave invalidates the other copies); a read miss fills without it
//! (MESI's E is granted by the weave, after the quantum).

use rustc_hash::FxHashMap;

use cachescope_schema::{Access, AccessKind, Event, ThreadId, TimedEvent};

use crate::cache::{Evicted, DIRTY, OWNED};
use crate::counters::{LevelCounters, MissClass, PathBytes, ThreadCounters};
use crate::model::Inclusion;
use crate::shadow::{Presence, NO_TAG};

use super::ledger::{diff, Delta};
use super::order::{for_each_in_order, Seq, ThreadStream};
use super::{Geometry, Unit};

/// What a core needs from the weave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Req {
    /// A write hit a private copy without ownership.
    Upgrade { line: u64, off: u16, len: u16 },
    /// A write hit an owned copy of a line whose written bytes may be tracked.
    Write { line: u64, off: u16, len: u16 },
    /// The access missed in every private level; the line is now filled there.
    Miss {
        line: u64,
        off: u16,
        len: u16,
        kind: AccessKind,
        /// Set when the line had been lost to another core's write; the details are the
        /// core's next entry in [`CoreSim::lost_misses`] (kept apart: requests are written by
        /// one host thread and read by another, so their size is what crosses between them).
        lost: bool,
    },
    /// The core's last private copy of `line` is gone.
    Gone { line: u64 },
    /// Dirty data of `line` left the last private level.
    Writeback { line: u64 },
}

/// A request and the event that caused it, by its place in the global order: the weave's
/// order key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamped {
    pub seq: Seq,
    pub req: Req,
}

/// One core's state.
pub(crate) struct CoreSim {
    pub core: usize,
    geo: Geometry,
    /// Private levels, L1 first.
    pub units: Vec<Unit>,
    /// Counters of every level (shared levels: this core's accesses, counted by the weave).
    pub lc: Vec<LevelCounters>,
    /// Bytes per data path caused by this core.
    pub paths: Vec<PathBytes>,
    pub invalidations_sent: u64,
    pub invalidations_received: u64,
    pub upgrades: u64,
    pub cache_to_cache: u64,
    /// Lines lost to another core's write → the weave sequence number of that write.
    pub lost: FxHashMap<u64, u64>,
    /// For each [`Req::Miss`] with `lost` set in `reqs`, in order: the weave sequence number
    /// of the write that took the line, and the private levels whose miss is a coherence
    /// miss (bit mask).
    pub lost_misses: Vec<(u64, u32)>,
    /// Threads on this core, ascending by id.
    pub threads: Vec<ThreadCounters>,
    slot_of: FxHashMap<ThreadId, usize>,
    last_thread: Option<(ThreadId, usize)>,
    pub unsimulated_fetches: u64,
    /// This quantum's requests, in the core's event order.
    pub reqs: Vec<Stamped>,
    /// The event being simulated.
    now: Seq,
    /// In a lockstep quantum: private fills after a miss are the weave's (see
    /// [`Self::begin_lockstep`]).
    defer_fills: bool,
    /// Whether the bound phase logs each event's bytes (for the bandwidth timeline).
    logging: bool,
    /// The path counters before the event being simulated (when logging).
    before: Vec<PathBytes>,
    /// The bytes each event of the bound phase moved (when logging).
    pub log: Vec<Delta>,
}

impl CoreSim {
    pub fn new(core: usize, geo: Geometry, units: Vec<Unit>, lc: Vec<LevelCounters>) -> Self {
        CoreSim {
            core,
            paths: vec![PathBytes::default(); geo.paths],
            geo,
            units,
            lc,
            invalidations_sent: 0,
            invalidations_received: 0,
            upgrades: 0,
            cache_to_cache: 0,
            lost: FxHashMap::default(),
            lost_misses: Vec::new(),
            threads: Vec::new(),
            slot_of: FxHashMap::default(),
            last_thread: None,
            unsimulated_fetches: 0,
            reqs: Vec::new(),
            now: Seq::default(),
            defer_fills: false,
            logging: false,
            before: Vec::new(),
            log: Vec::new(),
        }
    }

    /// Gives the small vectors written on every event (counters, the private levels' state)
    /// at least 128 unused bytes past their end, so that no other core's data shares a host
    /// cache line with them (the allocator places small blocks of different cores next to each
    /// other). Call once the core's threads are placed.
    pub fn pad_tails(&mut self) {
        fn pad<T>(v: &mut Vec<T>) {
            v.reserve_exact(128 / std::mem::size_of::<T>().max(1) + 1);
        }
        pad(&mut self.paths);
        pad(&mut self.lc);
        pad(&mut self.threads);
        pad(&mut self.units);
    }

    /// Places `thread` on this core.
    pub fn add_thread(&mut self, t: ThreadCounters) {
        self.slot_of.insert(t.thread, self.threads.len());
        self.threads.push(t);
    }

    /// The bound phase: simulates this core's events of a quantum, `threads` (each of its
    /// threads' events, in order), in the global order. `tracked` holds the lines whose
    /// written bytes the weave records (read only while the workers run).
    pub fn bound(&mut self, threads: &[ThreadStream<'_>], tracked: &FxHashMap<u64, Box<[u64]>>) {
        for_each_in_order(threads, |seq, e| {
            if self.logging {
                self.before.clone_from(&self.paths);
                self.process(seq, e, tracked);
                diff(seq, self.core, &self.before, &self.paths, &mut self.log);
            } else {
                self.process(seq, e, tracked);
            }
        });
    }

    /// Makes the bound phase log the bytes of each event.
    pub fn enable_log(&mut self) {
        self.logging = true;
    }

    /// Starts a quantum simulated in lockstep with the weave: the weave applies the requests
    /// of each line access before the next one, and fills the private levels after a miss
    /// itself (after the shared levels, whose evictions may back-invalidate private copies),
    /// so this core sees the others' actions in the exact engine's order.
    pub fn begin_lockstep(&mut self) {
        self.defer_fills = true;
    }

    /// Ends a lockstep quantum.
    pub fn end_lockstep(&mut self) {
        self.defer_fills = false;
    }

    /// Whether private fills after a miss are left to the weave (lockstep).
    pub fn defers_fills(&self) -> bool {
        self.defer_fills
    }

    fn process(&mut self, seq: Seq, e: &TimedEvent, tracked: &FxHashMap<u64, Box<[u64]>>) {
        if let Some(a) = self.begin(seq, e) {
            let (shift, ls) = (self.geo.shift, self.geo.line_size);
            for_each_line(&a, shift, ls, |line, off, len| {
                self.access_line(line, off, len, a.kind, tracked)
            });
        }
    }

    /// Counts event `e` (at `seq` in the global order) of this core's threads; returns the
    /// access whose lines are to be simulated, if it is one.
    pub fn begin(&mut self, seq: Seq, e: &TimedEvent) -> Option<Access> {
        let slot = match self.last_thread {
            Some((t, i)) if t == e.thread => i,
            _ => {
                let i = *self.slot_of.get(&e.thread)?;
                self.last_thread = Some((e.thread, i));
                i
            }
        };
        let cost = self.geo.access_cost;
        let t = &mut self.threads[slot];
        let end = e.time;
        match e.event {
            Event::Access(a) => {
                t.accesses += 1;
                t.time_units = t.time_units.saturating_add(cost);
                t.end_time = t.end_time.max(end.saturating_add(cost));
                self.now = seq;
                if a.kind == AccessKind::Fetch {
                    self.unsimulated_fetches += 1;
                    return None;
                }
                let size = a.size.max(1) as u64;
                if a.kind.reads() {
                    self.paths[0].read += size;
                }
                if a.kind.writes() {
                    self.paths[0].write += size;
                }
                Some(a)
            }
            Event::Advance { units, flops } => {
                t.time_units = t.time_units.saturating_add(units);
                t.flops = t.flops.saturating_add(flops);
                t.end_time = t.end_time.max(end.saturating_add(units));
                None
            }
            _ => {
                t.end_time = t.end_time.max(end);
                None
            }
        }
    }

    fn push(&mut self, req: Req) {
        self.reqs.push(Stamped { seq: self.now, req });
    }

    /// Simulates the part of an access that falls into `line` (bytes `off..off + len`).
    pub fn access_line(
        &mut self,
        line: u64,
        off: usize,
        len: usize,
        kind: AccessKind,
        tracked: &FxHashMap<u64, Box<[u64]>>,
    ) {
        let write = kind.writes();
        if let Some(slot) = self.lookup(0, line, kind) {
            if !write {
                return;
            }
            let l1 = &mut self.units[0].cache;
            let st = l1.state(slot);
            if st & OWNED != 0 {
                l1.set_state(slot, st | DIRTY);
                if tracked.contains_key(&line) {
                    self.push(Req::Write {
                        line,
                        off: off as u16,
                        len: len as u16,
                    });
                }
                return;
            }
            self.push(Req::Upgrade {
                line,
                off: off as u16,
                len: len as u16,
            });
            self.update_private(line, OWNED);
            self.mark_dirty(line);
            return;
        }
        // Misses on a line lost to another core's write are coherence misses at every level
        // that held it; the weave tells true from false sharing.
        let lost_at = self.lost.get(&line).copied();
        let mut coh_levels = 0u32;
        if lost_at.is_some() && self.units[0].class.shadow.ever_accessed(line) {
            coh_levels |= 1;
        }
        let mut found = None;
        for i in 1..self.geo.p {
            if self.lookup(i, line, kind).is_some() {
                found = Some(i);
                break;
            }
            if lost_at.is_some() && self.units[i].class.shadow.ever_accessed(line) {
                coh_levels |= 1 << i;
            }
        }
        if let Some(i) = found {
            // Found in an outer private level: this core alone decides, except for the upgrade.
            if coh_levels != 0 {
                // A lost line still held privately cannot happen (the weave removes every copy
                // when it records the loss); count such misses rather than drop them.
                debug_assert!(false, "line {line:#x} lost but held");
                for j in 0..i {
                    if coh_levels & (1 << j) != 0 {
                        self.lc[j].misses.add(MissClass::CoherenceFalse);
                    }
                }
            }
            let owned = self.private_state(line).is_some_and(|s| s & OWNED != 0);
            if write && !owned {
                self.push(Req::Upgrade {
                    line,
                    off: off as u16,
                    len: len as u16,
                });
            } else if write && tracked.contains_key(&line) {
                // As for a write hit in L1: the weave records the bytes written.
                self.push(Req::Write {
                    line,
                    off: off as u16,
                    len: len as u16,
                });
            }
            // The line crosses every boundary between level i and L1.
            let ls = self.geo.line_size;
            for j in 1..=i {
                self.paths[j].read += ls;
            }
            let state = if write || owned { OWNED } else { 0 };
            for j in (0..i).rev() {
                self.fill(j, line, state);
            }
            if write {
                self.update_private(line, OWNED);
                self.mark_dirty(line);
            }
            return;
        }
        // A miss in every private level: the weave decides where the line comes from.
        if let Some(at) = lost_at {
            self.lost.remove(&line);
            self.lost_misses.push((at, coh_levels));
        }
        self.push(Req::Miss {
            line,
            off: off as u16,
            len: len as u16,
            kind,
            lost: lost_at.is_some(),
        });
        if !self.defer_fills {
            self.fill_missed(line, write);
        }
    }

    /// Fills every private level with `line` after a miss (owned for a write; MESI's E is
    /// granted by the weave).
    pub fn fill_missed(&mut self, line: u64, write: bool) {
        let state = if write { OWNED } else { 0 };
        for j in (0..self.geo.p).rev() {
            self.fill(j, line, state);
        }
        if write {
            self.mark_dirty(line);
        }
    }

    /// Looks `line` up at private level `i`, counting the access and the hit or the miss (a
    /// coherence miss is counted by the weave, which knows the bytes written since).
    #[inline(always)]
    fn lookup(&mut self, i: usize, line: u64, kind: AccessKind) -> Option<usize> {
        self.lc[i].accesses.add(kind);
        let unit = &mut self.units[i];
        let slot = unit.lookup(line);
        if slot.is_some() {
            self.lc[i].hits += 1;
            return slot;
        }
        let presence = self.units[i].class.shadow.presence(line);
        let class = if presence == Presence::Never {
            Some(MissClass::Compulsory)
        } else if self.lost.contains_key(&line) {
            None
        } else if presence == Presence::Present {
            Some(MissClass::Conflict)
        } else {
            Some(MissClass::Capacity)
        };
        if let Some(c) = class {
            self.lc[i].misses.add(c);
        }
        None
    }

    /// Whether this core holds `line` in a private level, and the OR of those states.
    pub fn private_state(&self, line: u64) -> Option<u8> {
        let mut state = None;
        for u in &self.units {
            if let Some(s) = u.cache.find(line) {
                state = Some(state.unwrap_or(0) | u.cache.state(s));
            }
        }
        state
    }

    /// Sets state bits on every private copy of `line`.
    pub fn update_private(&mut self, line: u64, set: u8) {
        for u in &mut self.units {
            if let Some(s) = u.cache.find(line) {
                let st = u.cache.state(s);
                u.cache.set_state(s, st | set);
            }
        }
    }

    /// Clears state bits on every private copy of `line`.
    pub fn clear_private(&mut self, line: u64, clear: u8) {
        for u in &mut self.units {
            if let Some(s) = u.cache.find(line) {
                let st = u.cache.state(s);
                u.cache.set_state(s, st & !clear);
            }
        }
    }

    /// A write marks the first level holding the line dirty (every supported level is
    /// write-back, and a write always leaves the line in L1).
    fn mark_dirty(&mut self, line: u64) {
        for u in &mut self.units {
            if let Some(s) = u.cache.find(line) {
                let st = u.cache.state(s);
                u.cache.set_state(s, st | DIRTY);
                return;
            }
        }
    }

    /// Inserts `line` at private level `i` and deals with the victim.
    fn fill(&mut self, i: usize, line: u64, state: u8) {
        if let Some(v) = self.units[i].fill(line, state) {
            self.evicted(i, v);
        }
    }

    fn evicted(&mut self, i: usize, v: Evicted) {
        self.lc[i].evictions += 1;
        self.units[i].class.removed(v.line, v.slot);
        self.copy_gone(v.line);
        if v.state & DIRTY != 0 {
            self.lc[i].writebacks += 1;
            self.write_back(i, v.line);
        }
        if self.geo.inclusion[i] == Inclusion::Inclusive {
            for j in (0..i).rev() {
                if let Some((slot, state)) = self.units[j].cache.invalidate_slot(v.line) {
                    self.units[j].class.removed(v.line, slot);
                    self.lc[j].back_invalidations += 1;
                    if state & DIRTY != 0 {
                        self.lc[j].writebacks += 1;
                        self.write_back(j, v.line);
                    }
                    self.copy_gone(v.line);
                }
            }
        }
    }

    /// Tells the directory when the last private copy of `line` is gone.
    fn copy_gone(&mut self, line: u64) {
        if self.private_state(line).is_none() {
            self.push(Req::Gone { line });
        }
    }

    /// Dirty data of `line` leaves private level `from`: to the next private level holding
    /// it, else on to the weave.
    fn write_back(&mut self, from: usize, line: u64) {
        let ls = self.geo.line_size;
        for j in from + 1..self.geo.p {
            self.paths[j].write += ls;
            let c = &mut self.units[j].cache;
            if let Some(s) = c.find(line) {
                let st = c.state(s);
                c.set_state(s, st | DIRTY);
                return;
            }
        }
        self.push(Req::Writeback { line });
    }

    /// Removes `line` from every private level because another core wrote it; returns whether
    /// a copy was present.
    pub fn invalidate(&mut self, line: u64) -> bool {
        let mut any = false;
        for u in &mut self.units {
            if let Some((slot, _)) = u.cache.invalidate_slot(line) {
                u.class.removed(line, slot);
                u.class.shadow.remove(line);
                any = true;
            }
        }
        any
    }

    /// The outermost private level holding `line` dirty.
    pub fn dirty_level(&self, line: u64) -> Option<usize> {
        (0..self.geo.p).rev().find(|&i| {
            let c = &self.units[i].cache;
            c.find(line).is_some_and(|s| c.state(s) & DIRTY != 0)
        })
    }
}

/// Calls `f(line, offset, length)` for each line an access touches, in address order (an
/// access running past the top of the address space ends there).
#[inline]
pub(crate) fn for_each_line(a: &Access, shift: u32, ls: u64, mut f: impl FnMut(u64, usize, usize)) {
    let size = a.size.max(1) as u64;
    let first = a.addr >> shift;
    if (a.addr & (ls - 1)) + size <= ls {
        f(first, (a.addr & (ls - 1)) as usize, size as usize);
        return;
    }
    let end = (a.addr as u128 + size as u128).min(1u128 << 64);
    let last = ((end - 1) >> shift) as u64;
    for line in first..=last {
        let line_start = (line as u128) << shift;
        let from = line_start.max(a.addr as u128);
        let to = (line_start + ls as u128).min(end);
        f(line, (from - line_start) as usize, (to - from) as usize);
    }
}

impl Unit {
    /// Looks `line` up, updating replacement and shadow state on a hit.
    #[inline(always)]
    pub(crate) fn lookup(&mut self, line: u64) -> Option<usize> {
        // As in the exact engine: the shadow's front array holds the most recently used lines
        // with their slots, so most hits need no set scan.
        match self.class.shadow.front_find(line) {
            Some((pos, tag)) if tag != NO_TAG => {
                let s = tag as usize;
                debug_assert_eq!(self.cache.find(line), Some(s), "stale front tag");
                if self.class.last != Some(line) {
                    self.class.shadow.promote(pos);
                    self.cache.touch(s);
                    self.class.last = Some(line);
                }
                Some(s)
            }
            Some(_) => None,
            None => {
                let found = self.cache.find(line);
                if let Some(s) = found {
                    self.class.shadow.access_cached(line, s as u32);
                    self.cache.touch(s);
                    self.class.last = Some(line);
                }
                found
            }
        }
    }

    /// Inserts `line` (if absent) and returns the victim.
    pub(crate) fn fill(&mut self, line: u64, state: u8) -> Option<Evicted> {
        if self.cache.find(line).is_some() {
            return None;
        }
        let (slot, victim) = self.cache.fill_at(line, state);
        if let Some(v) = victim {
            // The shadow must learn that the victim left the slot before the new line takes it.
            self.class.removed(v.line, v.slot);
        }
        self.class.last = Some(line);
        self.class.shadow.access_filled(line, slot as u32);
        victim
    }
}
