//! The weave phase of the parallel engine: the shared levels, the coherence directory and the
//! per-byte write record, applied to the quantum's requests in the global (time, thread) order.
//!
//! The directory is the authority on sharers and ownership: it changes only here, in the same
//! order as in the exact engine, so the cross-core decisions (invalidate whom, who supplies a
//! line, who gets MESI's E) are the exact engine's whenever the private caches it consults
//! (for dirty data) agree. Effects on other cores' private caches (invalidations, downgrades,
//! back-invalidations, E grants) are applied at once, i.e. after those cores already ran the
//! whole quantum: a core sees another core's write at most one quantum late.

use rustc_hash::FxHashMap;

use cachescope_schema::AccessKind;

use crate::cache::{Cache, DIRTY, OWNED};
use crate::counters::{MissClass, PathBytes};
use crate::model::Inclusion;

use super::core::{CoreSim, Req, Stamped};
use super::ledger::{diff, Delta};
use super::order::Seq;
use super::shared_class::ShadowOp;
use super::Geometry;

const NO_OWNER: u8 = u8::MAX;

/// Directory entry of one line.
#[derive(Debug, Clone, Copy)]
struct Dir {
    /// Cores holding a private copy.
    sharers: u64,
    /// The core holding it exclusively (E or M), or [`NO_OWNER`].
    owner: u8,
}

impl Default for Dir {
    fn default() -> Self {
        Dir {
            sharers: 0,
            owner: NO_OWNER,
        }
    }
}

/// Shared state of the parallel engine.
pub(crate) struct Weave {
    geo: Geometry,
    mesi: bool,
    /// Shared level `i` at `i - p` (classified apart, see `shared_class.rs`).
    caches: Vec<Cache>,
    /// What the shared levels' shadows must see, in the weave's order, until handed over.
    pub shadow_log: Vec<ShadowOp>,
    dir: FxHashMap<u64, Dir>,
    /// Per line ever invalidated: weave sequence number of the last write of each byte.
    pub written: FxHashMap<u64, Box<[u64]>>,
    /// Per line: how many cores have it in their `lost` map.
    lost_count: FxHashMap<u64, u32>,
    /// Sequence number of the write being woven (writes are numbered in weave order, which
    /// is the global order, so comparisons come out as with the exact engine's numbers).
    wseq: u64,
    /// Request lists taken from the cores, kept for their allocations.
    lists: Vec<Vec<Stamped>>,
    /// Per core, its `lost_misses` taken with its requests, and how many are used.
    lost_misses: Vec<(Vec<(u64, u32)>, usize)>,
    /// Whether the bytes of each event are logged (for the bandwidth timeline).
    logging: bool,
    /// Every core's path counters before the event being woven (when logging).
    before: Vec<PathBytes>,
    /// The bytes each event moved in the weave (and in lockstep quanta) (when logging).
    pub log: Vec<Delta>,
}

impl Weave {
    pub fn new(geo: Geometry, mesi: bool, caches: Vec<Cache>) -> Self {
        Weave {
            geo,
            mesi,
            caches,
            shadow_log: Vec::new(),
            dir: FxHashMap::default(),
            written: FxHashMap::default(),
            lost_count: FxHashMap::default(),
            wseq: 0,
            lists: Vec::new(),
            lost_misses: Vec::new(),
            logging: false,
            before: Vec::new(),
            log: Vec::new(),
        }
    }

    /// Makes the weave log the bytes of each event.
    pub fn enable_log(&mut self) {
        self.logging = true;
    }

    /// Whether the bytes of each event are logged.
    pub fn logging(&self) -> bool {
        self.logging
    }

    /// Before simulating event `seq` of a quantum (when logging): remembers every core's
    /// path counters.
    pub fn log_before(&mut self, cores: &[&mut CoreSim]) {
        self.before.clear();
        for c in cores {
            self.before.extend_from_slice(&c.paths);
        }
    }

    /// After simulating event `seq` (when logging): logs what it moved on every core's paths.
    pub fn log_after(&mut self, seq: Seq, cores: &[&mut CoreSim]) {
        let paths = self.geo.paths;
        for (c, core) in cores.iter().enumerate() {
            diff(
                seq,
                c,
                &self.before[c * paths..(c + 1) * paths],
                &core.paths,
                &mut self.log,
            );
        }
    }

    /// Applies the quantum's requests of all cores in the order of the events that caused
    /// them, the global (time, thread) order, as in the exact engine (several threads may
    /// share a core).
    pub fn run(&mut self, cores: &mut [&mut CoreSim]) {
        let n = cores.len();
        self.lists.resize_with(n, Vec::new);
        for (c, core) in cores.iter_mut().enumerate() {
            std::mem::swap(&mut self.lists[c], &mut core.reqs);
        }
        self.take_lost_misses(cores);
        let lists = std::mem::take(&mut self.lists);
        let mut pos = vec![0usize; n];
        // Each list's next event, or `Seq::END` once it is used up. Each list is in event
        // order already, and an event belongs to one core: the smallest head is the earliest
        // event, and it is unique.
        let head = |l: &Vec<Stamped>, p: usize| l.get(p).map_or(Seq::END, |s| s.seq);
        let mut heads: Vec<Seq> = lists.iter().map(|l| head(l, 0)).collect();
        loop {
            let (c, seq) = heads
                .iter()
                .enumerate()
                .fold(
                    (0, Seq::END),
                    |best, (c, &s)| if s < best.1 { (c, s) } else { best },
                );
            if seq == Seq::END {
                break;
            }
            if self.logging {
                self.log_before(cores);
            }
            // The same event's requests come next.
            while let Some(s) = lists[c].get(pos[c]).filter(|s| s.seq == seq) {
                pos[c] += 1;
                self.apply(cores, c, s.req);
            }
            heads[c] = head(&lists[c], pos[c]);
            if self.logging {
                self.log_after(seq, cores);
            }
        }
        self.lists = lists;
        for l in &mut self.lists {
            l.clear();
        }
    }

    /// Takes every core's `lost_misses` (used by its requests in order), giving back the
    /// lists used before (cleared), for their allocations.
    fn take_lost_misses(&mut self, cores: &mut [&mut CoreSim]) {
        self.lost_misses.resize_with(cores.len(), Default::default);
        for (core, (list, used)) in cores.iter_mut().zip(&mut self.lost_misses) {
            // Every miss on a lost line was applied (lockstep takes the lists after each
            // access, when the other cores' lists are empty).
            debug_assert_eq!(*used, list.len(), "lost-line misses left unapplied");
            list.clear();
            std::mem::swap(list, &mut core.lost_misses);
            *used = 0;
        }
    }

    /// The details of core `c`'s next miss on a lost line.
    fn next_lost_miss(&mut self, c: usize) -> (u64, u32) {
        let (list, used) = &mut self.lost_misses[c];
        // Each such miss pushed its entry before its request; a miss is applied once.
        let entry = list.get(*used).copied();
        *used += 1;
        entry.unwrap_or_else(|| unreachable!("a lost-line miss without its details"))
    }

    /// Applies core `c`'s pending requests at once (a lockstep quantum: one event at a time,
    /// in the global order).
    pub fn run_core(&mut self, cores: &mut [&mut CoreSim], c: usize) {
        // Applying a miss may fill the core's private levels, whose victims add requests.
        while !cores[c].reqs.is_empty() {
            self.take_lost_misses(cores);
            let mut reqs = std::mem::take(&mut cores[c].reqs);
            for s in &reqs {
                self.apply(cores, c, s.req);
            }
            reqs.clear();
            if cores[c].reqs.is_empty() {
                cores[c].reqs = reqs;
            }
        }
    }

    /// Whether core `core`, accessing `line` in a quantum (and writing it if `write`),
    /// interacts with another core through the directory as it was before the quantum: a
    /// write while another core holds a copy (it will be invalidated), or an access while
    /// another core owns the line (it will be downgraded, its dirty data moved). Accesses to
    /// one line by several cores in the quantum, one of them writing, are checked by the
    /// driver.
    pub fn interferes(&self, line: u64, core: usize, write: bool) -> bool {
        let Some(d) = self.dir.get(&line) else {
            return false;
        };
        let me = 1u64 << core;
        (write && d.sharers & !me != 0) || (d.owner != NO_OWNER && d.owner as usize != core)
    }

    /// Whether the fills of a quantum touching `lines` might make an inclusive shared level
    /// evict a line, and so back-invalidate private copies the bound phase already used: some
    /// set of that level has fewer free ways than the touched lines it lacks (only an absent
    /// line is filled there; a cache-to-cache transfer fills no shared level).
    pub fn may_back_invalidate(&self, lines: impl Iterator<Item = u64> + Clone) -> bool {
        let p = self.geo.p;
        let mut absent: FxHashMap<u64, usize> = FxHashMap::default();
        for (k, cache) in self.caches.iter().enumerate() {
            if self.geo.inclusion[p + k] != Inclusion::Inclusive {
                continue;
            }
            absent.clear();
            for line in lines.clone() {
                if cache.contains(line) {
                    continue;
                }
                let n = absent.entry(cache.set_index(line)).or_insert(0);
                *n += 1;
                if *n > cache.free_ways(line) {
                    return true;
                }
            }
        }
        false
    }

    fn apply(&mut self, cores: &mut [&mut CoreSim], c: usize, req: Req) {
        match req {
            Req::Upgrade { line, off, len } => {
                self.wseq += 1;
                let owner = self.dir.get(&line).map_or(NO_OWNER, |d| d.owner);
                // A line granted E in this quantum's weave is written silently (E → M).
                if owner as usize != c {
                    cores[c].upgrades += 1;
                    self.invalidate_others(cores, c, line);
                }
                let d = self.dir.entry(line).or_default();
                d.sharers |= 1u64 << c;
                d.owner = c as u8;
                self.record_write(line, off, len);
            }
            Req::Write { line, off, len } => {
                self.wseq += 1;
                self.record_write(line, off, len);
            }
            Req::Miss {
                line,
                off,
                len,
                kind,
                lost,
            } => {
                let lost = lost.then(|| self.next_lost_miss(c));
                self.miss(cores, c, line, off, len, kind, lost)
            }
            Req::Gone { line } => self.copy_gone(c, line),
            Req::Writeback { line } => {
                let p = self.geo.p;
                self.write_back_from(cores[c], p - 1, line);
            }
        }
    }

    fn record_write(&mut self, line: u64, off: u16, len: u16) {
        if let Some(w) = self.written.get_mut(&line) {
            w[off as usize..(off + len) as usize].fill(self.wseq);
        }
    }

    fn copy_gone(&mut self, c: usize, line: u64) {
        if let Some(d) = self.dir.get_mut(&line) {
            d.sharers &= !(1u64 << c);
            if d.owner as usize == c {
                d.owner = NO_OWNER;
            }
            if d.sharers == 0 {
                self.dir.remove(&line);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn miss(
        &mut self,
        cores: &mut [&mut CoreSim],
        c: usize,
        line: u64,
        off: u16,
        len: u16,
        kind: AccessKind,
        lost: Option<(u64, u32)>,
    ) {
        let (p, n, ls) = (self.geo.p, self.geo.n, self.geo.line_size);
        let write = kind.writes();
        if write {
            self.wseq += 1;
        }
        if let Some((at, levels)) = lost {
            let rewritten = self.written.get(&line).is_some_and(|w| {
                w[off as usize..(off + len) as usize]
                    .iter()
                    .any(|&s| s >= at)
            });
            let class = if rewritten {
                MissClass::CoherenceTrue
            } else {
                MissClass::CoherenceFalse
            };
            for i in (0..p).filter(|i| levels & (1 << i) != 0) {
                cores[c].lc[i].misses.add(class);
            }
        }
        // Coherence: does another core supply the line?
        let me = 1u64 << c;
        let d = self.dir.get(&line).copied().unwrap_or_default();
        let others = d.sharers & !me;
        let mut remote = false;
        if others != 0 {
            let owner = (d.owner != NO_OWNER && others & (1u64 << d.owner) != 0)
                .then_some(d.owner as usize);
            // Whether the owner holds the line dirty is read from its caches, as in the exact
            // engine: its dirty data may have left its last private level while it kept a
            // clean copy above (a non-inclusive outer level evicting first, as FIFO does). A
            // downgrade only happens in lockstep (another core's access to a line this core
            // owns interferes), where the owner's caches are those of this point in the order.
            let dirty_level = owner.and_then(|o| cores[o].dirty_level(line));
            let dirty_owner = owner.filter(|_| dirty_level.is_some());
            if write {
                self.invalidate_others(cores, c, line);
            } else if let Some(o) = owner {
                // M → S (dirty data also goes down) or E → S.
                if let Some(i) = dirty_level {
                    cores[o].lc[i].writebacks += 1;
                    for j in i + 1..p {
                        cores[o].paths[j].write += ls;
                    }
                    self.write_back_from(cores[o], p - 1, line);
                }
                cores[o].clear_private(line, OWNED | DIRTY);
                if let Some(e) = self.dir.get_mut(&line) {
                    e.owner = NO_OWNER;
                }
            }
            if dirty_owner.is_some() {
                cores[c].cache_to_cache += 1;
                cores[c].paths[self.geo.paths - 1].read += ls;
                remote = true;
            }
        }
        // Shared levels, then memory.
        let mut from = n;
        if remote {
            from = p;
        } else {
            for i in p..n {
                if self.lookup(cores[c], i, line, kind) {
                    from = i;
                    break;
                }
            }
        }
        // A cache-to-cache transfer enters at the last private level.
        let last_path = if remote { p - 1 } else { from };
        for j in 1..=last_path {
            cores[c].paths[j].read += ls;
        }
        for i in (p..from).rev() {
            self.fill(cores, c, i, line);
        }
        // The core filled its private levels in the bound phase, unless in lockstep: then it
        // does so now, after the shared levels, as in the exact engine.
        if cores[c].defers_fills() {
            cores[c].fill_missed(line, write);
        }
        let others_share = self.mesi && self.dir.get(&line).is_some_and(|d| d.sharers & !me != 0);
        let owned_now = write || (self.mesi && !others_share);
        let e = self.dir.entry(line).or_default();
        e.sharers |= me;
        if owned_now {
            e.owner = c as u8;
            if !write {
                // MESI's E, granted after the core's quantum.
                cores[c].update_private(line, OWNED);
            }
        } else {
            if e.owner as usize == c {
                e.owner = NO_OWNER;
            }
            if self.mesi {
                // The core's copy now is the one this miss filled, in S. An E granted to an
                // earlier miss of this quantum on the same line was applied to whatever copy
                // the core held after its quantum — this one, if the core lost the line and
                // filled it again meanwhile (another core reading it in between): without
                // this, a later write would find E and skip the upgrade. (In an apart quantum
                // the core does not write the line after a shared miss: that would be a write
                // to a line another core holds, which runs the quantum in lockstep.)
                cores[c].clear_private(line, OWNED);
            }
        }
        if lost.is_some() {
            // The line is back: once no core waits to classify a coherence miss on it, its
            // written bytes need not be kept.
            if let Some(k) = self.lost_count.get_mut(&line) {
                *k -= 1;
                if *k == 0 {
                    self.lost_count.remove(&line);
                    self.written.remove(&line);
                }
            }
        }
        if write {
            self.record_write(line, off, len);
        }
    }

    /// Looks `line` up at shared level `i` for `core`.
    fn lookup(&mut self, core: &mut CoreSim, i: usize, line: u64, kind: AccessKind) -> bool {
        let lc = &mut core.lc[i];
        lc.accesses.add(kind);
        let level = (i - self.geo.p) as u32;
        let cache = &mut self.caches[i - self.geo.p];
        if let Some(s) = cache.find(line) {
            cache.touch(s);
            lc.hits += 1;
            self.shadow_log.push(ShadowOp::Touch { level, line });
            return true;
        }
        // Counted by class when the log is replayed.
        self.shadow_log.push(ShadowOp::Miss {
            level,
            core: core.core as u32,
            line,
        });
        false
    }

    /// Fills `line` into shared level `i` for core `c` and deals with the victim.
    fn fill(&mut self, cores: &mut [&mut CoreSim], c: usize, i: usize, line: u64) {
        let cache = &mut self.caches[i - self.geo.p];
        if cache.find(line).is_some() {
            return;
        }
        let (_, victim) = cache.fill_at(line, 0);
        self.shadow_log.push(ShadowOp::Touch {
            level: (i - self.geo.p) as u32,
            line,
        });
        let Some(v) = victim else {
            return;
        };
        cores[c].lc[i].evictions += 1;
        if v.state & DIRTY != 0 {
            cores[c].lc[i].writebacks += 1;
            self.write_back_from(cores[c], i, v.line);
        }
        if self.geo.inclusion[i] == Inclusion::Inclusive {
            self.back_invalidate(cores, i, v.line);
        }
    }

    /// Dirty data of `line` leaves level `from` of `core`: it goes to the next level holding
    /// the line (marked dirty there) or to memory.
    fn write_back_from(&mut self, core: &mut CoreSim, from: usize, line: u64) {
        let (p, n, ls) = (self.geo.p, self.geo.n, self.geo.line_size);
        for j in from + 1..=n {
            core.paths[j].write += ls;
            if j < n {
                let cache = if j < p {
                    &mut core.units[j].cache
                } else {
                    &mut self.caches[j - p]
                };
                if let Some(s) = cache.find(line) {
                    let st = cache.state(s);
                    cache.set_state(s, st | DIRTY);
                    return;
                }
            }
        }
    }

    /// Shared inclusive level `i` lost `line`: remove it from every level above, of every
    /// core (counted, as in the exact engine, on the core whose copy is removed).
    // The index names the core in the directory too, and `self` is borrowed inside the loop.
    #[allow(clippy::needless_range_loop)]
    fn back_invalidate(&mut self, cores: &mut [&mut CoreSim], i: usize, line: u64) {
        let p = self.geo.p;
        for cc in 0..cores.len() {
            for j in (0..i).rev() {
                let removed = if j < p {
                    let u = &mut cores[cc].units[j];
                    let s = u.cache.invalidate_slot(line);
                    if let Some((slot, _)) = s {
                        u.class.removed(line, slot);
                    }
                    s.map(|(_, state)| state)
                } else {
                    // No shadow update: a shared level's shadow keeps invalidated lines, as
                    // the exact engine's does.
                    self.caches[j - p].invalidate(line)
                };
                let Some(state) = removed else { continue };
                cores[cc].lc[j].back_invalidations += 1;
                if state & DIRTY != 0 {
                    cores[cc].lc[j].writebacks += 1;
                    self.write_back_from(cores[cc], j, line);
                }
                if j < p && cores[cc].private_state(line).is_none() {
                    self.copy_gone(cc, line);
                }
            }
        }
    }

    /// Invalidates every other core's private copies of `line` (for a write by `c`).
    fn invalidate_others(&mut self, cores: &mut [&mut CoreSim], c: usize, line: u64) {
        let me = 1u64 << c;
        let others = self.dir.get(&line).map_or(0, |d| d.sharers & !me);
        if others == 0 {
            return;
        }
        let seq = self.wseq;
        let ls = self.geo.line_size as usize;
        self.written
            .entry(line)
            .or_insert_with(|| vec![0; ls].into_boxed_slice());
        for o in (0..cores.len()).filter(|o| others & (1u64 << o) != 0) {
            cores[o].invalidate(line);
            if cores[o].lost.insert(line, seq).is_none() {
                *self.lost_count.entry(line).or_insert(0) += 1;
            }
            cores[c].invalidations_sent += 1;
            cores[o].invalidations_received += 1;
        }
        if let Some(d) = self.dir.get_mut(&line) {
            d.sharers &= me;
            if d.owner as usize != c {
                d.owner = NO_OWNER;
            }
            if d.sharers == 0 {
                self.dir.remove(&line);
            }
        }
    }
}
