//! The exact engine: every event of every thread, in the trace's global (time, thread) order,
//! one at a time. The reference all other engines are checked against.
//!
//! Per access and line touched:
//! 1. the core's private levels are looked up from L1 outwards;
//! 2. coherence: a write needs ownership — other cores' copies are invalidated (an upgrade if
//!    this core had a shared copy); a miss while another core holds the line modified is served
//!    cache to cache (a read downgrades the owner, whose dirty data is written back);
//! 3. otherwise the shared levels are looked up, then memory;
//! 4. the line is filled into the levels above where it was found, except exclusive (victim)
//!    levels and, for stores, write-through (no-write-allocate) levels; an exclusive level
//!    that supplied the line gives it up;
//! 5. a write marks the first write-back level holding the line dirty; write-through levels
//!    pass the written bytes down.
//!
//! Evicted dirty lines are written to the next level that holds them (or memory); victims of
//! a level above an exclusive level go into it; an inclusive level that evicts a line removes
//! it from the levels above (from all cores for a shared level). Writebacks into a level that
//! does not hold the line do not allocate it.
//!
//! Misses are classified per cache: compulsory (never held); coherence (the line was lost to
//! another core's write since this core last held it, tracked per core: true sharing if any
//! byte now accessed was last written by another core since, else false sharing — Dubois'
//! definition); else conflict if a fully associative LRU cache of the same size would have
//! hit (a cache that loses invalidated lines too), else capacity.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use cachescope_schema::{Access, AccessKind, CodePos, Event, ThreadId, TimeUnit, TimedEvent};
use serde::Serialize;

use crate::cache::{Cache, Evicted, DIRTY, OWNED};
use crate::counters::{
    CoreCounters, LevelCounters, MissClass, PathBytes, PathCounters, SimReport, ThreadCounters,
    REPORT_SCHEMA,
};
use crate::model::{Inclusion, MachineModel, Protocol, WritePolicy};
use crate::shadow::{Classifier, Presence, NO_TAG};
use crate::thread_index::ThreadIndex;

/// `last_thread` before the first event: no thread id (a u32) equals it.
const NO_THREAD: u64 = u64::MAX;

/// Bits of a written byte's record that name the writing core (at most 64 cores; the write
/// sequence number above them leaves 2^58 writes).
const WRITER_BITS: u32 = 6;
const WRITER_MASK: u64 = (1 << WRITER_BITS) - 1;

/// How threads are placed on simulated cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadMapping {
    /// The i-th thread (by ascending id) runs on core i; more threads than cores is an error.
    OneToOne,
    /// Thread i-th (by ascending id) runs on core i mod cores.
    RoundRobin,
    /// Explicit thread → core pairs; every thread must be listed.
    Explicit(BTreeMap<ThreadId, u32>),
}

/// A thread that cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("thread mapping: {0}")]
pub struct MappingError(pub String);

impl ThreadMapping {
    /// Parses `one-to-one`, `round-robin` or `T:C,T:C,...`.
    pub fn parse(s: &str) -> Result<Self, MappingError> {
        match s {
            "one-to-one" | "1:1" => Ok(ThreadMapping::OneToOne),
            "round-robin" => Ok(ThreadMapping::RoundRobin),
            _ => {
                let mut map = BTreeMap::new();
                for pair in s.split(',') {
                    let (t, c) = Self::parse_pair(pair)?;
                    if let Some(prev) = map.insert(t, c) {
                        return Err(MappingError(format!(
                            "thread {t} is mapped twice (to cores {prev} and {c})"
                        )));
                    }
                }
                Ok(ThreadMapping::Explicit(map))
            }
        }
    }

    /// One `THREAD:CORE` pair.
    fn parse_pair(pair: &str) -> Result<(ThreadId, u32), MappingError> {
        let (t, c) = pair
            .split_once(':')
            .ok_or_else(|| MappingError(format!("{pair:?}: expected THREAD:CORE")))?;
        let t = t
            .trim()
            .parse()
            .map_err(|_| MappingError(format!("{t:?} is not a thread id")))?;
        let c = c
            .trim()
            .parse()
            .map_err(|_| MappingError(format!("{c:?} is not a core")))?;
        Ok((t, c))
    }

    /// Places `threads` (ascending) on `cores` cores.
    pub fn place(
        &self,
        threads: &[ThreadId],
        cores: u32,
    ) -> Result<BTreeMap<ThreadId, u32>, MappingError> {
        match self {
            ThreadMapping::OneToOne => {
                if threads.len() > cores as usize {
                    return Err(MappingError(format!(
                        "the trace has {} threads but the machine has {cores} cores; \
                         give --map round-robin or THREAD:CORE pairs, or more cores",
                        threads.len()
                    )));
                }
                Ok(threads
                    .iter()
                    .enumerate()
                    .map(|(i, &t)| (t, i as u32))
                    .collect())
            }
            ThreadMapping::RoundRobin => Ok(threads
                .iter()
                .enumerate()
                .map(|(i, &t)| (t, i as u32 % cores))
                .collect()),
            ThreadMapping::Explicit(m) => {
                if let Some(t) = m.keys().find(|t| threads.binary_search(t).is_err()) {
                    return Err(MappingError(format!(
                        "thread {t} is mapped but the trace has no such thread (its threads: {})",
                        threads
                            .iter()
                            .map(|t| t.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                threads
                    .iter()
                    .map(|t| match m.get(t) {
                        Some(&c) if c < cores => Ok((*t, c)),
                        Some(&c) => Err(MappingError(format!(
                            "core {c} of thread {t} does not exist ({cores} cores)"
                        ))),
                        None => Err(MappingError(format!("thread {t} is not mapped"))),
                    })
                    .collect()
            }
        }
    }
}

/// Where a missing line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// A level of the requesting core or a shared level (index).
    Level(usize),
    /// Another core's private cache (cache-to-cache transfer).
    Remote,
    /// Memory.
    Memory,
}

/// One cache instance and its miss classifier.
struct Unit {
    cache: Cache,
    class: Classifier,
}

/// Who was involved in a first-level coherence miss: the key of the coherence log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct CoherenceKey {
    /// Line address (first byte).
    pub line: u64,
    /// Classified as false sharing (else true sharing) by the per-byte write record.
    pub false_sharing: bool,
    /// The thread that missed.
    pub victim_thread: ThreadId,
    /// Its instruction.
    pub victim_pc: Option<CodePos>,
    /// The thread whose write took the line away, if known.
    pub writer_thread: Option<ThreadId>,
    /// Its instruction.
    pub writer_pc: Option<CodePos>,
}

/// The coherence log, when enabled: per-event counts while simulating, for the false-sharing
/// audit (which names the lines' data objects and the code on both sides).
#[derive(Default)]
struct CoherenceLog {
    counts: FxHashMap<CoherenceKey, u64>,
    /// The access being simulated: thread and instruction.
    current: Option<(ThreadId, Option<CodePos>)>,
    /// Per line: the last write that invalidated other cores' copies.
    last_writer: FxHashMap<u64, (ThreadId, Option<CodePos>)>,
}

/// The exact engine.
pub struct ExactEngine {
    model: MachineModel,
    p: usize,
    n: usize,
    shift: u32,
    line_size: u64,
    mesi: bool,
    /// The first level is write-back (checked on every store hit).
    l1_write_back: bool,
    /// Cache instances: private level i of core c at `c * p + i`, shared level i at
    /// `cores * p + (i - p)` (one flat vector: the hot path does one bounds check).
    units: Vec<Unit>,
    /// Per core and level counters at `core * n + level`.
    lc: Vec<LevelCounters>,
    /// Directory: cores holding a private copy of each line.
    sharers: FxHashMap<u64, u64>,
    /// Per core: lines lost to another core's write, with that write's sequence number.
    lost: Vec<FxHashMap<u64, u64>>,
    /// Per line ever invalidated: per byte, the sequence number of its last write and the
    /// core that made it (`seq << WRITER_BITS | core`).
    written: FxHashMap<u64, Box<[u64]>>,
    wseq: u64,
    cores: Vec<CoreCounters>,
    /// Bytes per data path and core; the first path's are kept in `first_path` instead.
    paths: Vec<PathCounters>,
    /// Per core, the bytes between the core and its first level: counted on every access,
    /// so kept in one flat array (merged into `paths[0]` by [`Self::report`]).
    first_path: Vec<PathBytes>,
    /// Per placed thread, ascending by id.
    threads: Vec<ThreadCounters>,
    /// Thread id → index into `threads` (threads switch every few dozen events of a
    /// multi-threaded trace: small ids are found by indexing, not hashing).
    slot_of: ThreadIndex,
    /// The last thread looked up (events come in long runs of one thread) and its index;
    /// [`NO_THREAD`] before the first event (a u64 compare instead of an `Option`'s two).
    last_thread: (u64, usize),
    unsimulated_fetches: u64,
    /// Transfers counted on any path but the first (core↔first level), by any core.
    beyond_first_moves: u64,
    access_cost: u64,
    time_unit: TimeUnit,
    /// Boxed so the engine stays small when the log is off (the common case).
    log: Option<Box<CoherenceLog>>,
}

impl ExactEngine {
    /// An engine for `model` with the given thread placement.
    pub fn new(model: &MachineModel, placement: &BTreeMap<ThreadId, u32>, unit: TimeUnit) -> Self {
        let m = model.clone();
        let p = m.private_levels();
        let n = m.levels.len();
        let ls = m.line_size;
        let cores = m.cores as usize;
        let seed = |i: usize, c: usize| m.seed ^ ((i as u64) << 32) ^ c as u64;
        let make_unit = |i: usize, c: usize| Unit {
            cache: Cache::new(&m.levels[i], ls, seed(i, c)),
            class: Classifier::new(m.levels[i].lines(ls) as usize),
        };
        let mut units: Vec<Unit> = Vec::with_capacity(cores * p + n - p);
        for c in 0..cores {
            units.extend((0..p).map(|i| make_unit(i, c)));
        }
        units.extend((p..n).map(|i| make_unit(i, 0)));
        let lc = (0..cores)
            .flat_map(|_| m.levels.iter())
            .map(|l| LevelCounters {
                level: l.name.clone(),
                ..LevelCounters::default()
            })
            .collect();
        let mut path_names = m.path_names();
        path_names.truncate(n + 1 + usize::from(p > 0));
        let paths = path_names
            .into_iter()
            .map(|path| PathCounters {
                path,
                per_core: vec![PathBytes::default(); cores],
                total: PathBytes::default(),
            })
            .collect();
        let mut core_counters: Vec<CoreCounters> = (0..cores)
            .map(|c| CoreCounters {
                core: c as u32,
                ..CoreCounters::default()
            })
            .collect();
        let mut threads = Vec::new();
        let slot_of = ThreadIndex::new(placement.keys().enumerate().map(|(i, &t)| (t, i)));
        for (&t, &c) in placement {
            core_counters[c as usize].threads.push(t);
            threads.push(ThreadCounters {
                thread: t,
                core: c,
                ..ThreadCounters::default()
            });
        }
        ExactEngine {
            p,
            n,
            shift: ls.trailing_zeros(),
            line_size: ls as u64,
            mesi: m.coherence == Protocol::Mesi,
            l1_write_back: m
                .levels
                .first()
                .is_some_and(|l| l.write == WritePolicy::Back),
            units,
            lc,
            sharers: FxHashMap::default(),
            lost: vec![FxHashMap::default(); cores],
            written: FxHashMap::default(),
            wseq: 0,
            cores: core_counters,
            paths,
            first_path: vec![PathBytes::default(); cores],
            threads,
            slot_of,
            last_thread: (NO_THREAD, 0),
            unsimulated_fetches: 0,
            beyond_first_moves: 0,
            access_cost: unit.access_cost(),
            time_unit: unit,
            log: None,
            model: m,
        }
    }

    /// Starts recording who is involved in each first-level coherence miss (off by default:
    /// it costs a little on every access).
    pub fn enable_coherence_log(&mut self) {
        self.log = Some(Box::default());
    }

    /// The coherence log (empty unless enabled): counts per key, sorted by key.
    pub fn coherence_log(&self) -> Vec<(CoherenceKey, u64)> {
        let mut v: Vec<_> = self
            .log
            .as_ref()
            .map(|l| l.counts.iter().map(|(k, n)| (*k, *n)).collect())
            .unwrap_or_default();
        v.sort_unstable();
        v
    }

    /// Processes one event of the global order. Inlined into the caller's loop: a call per
    /// event saved and restored six registers, about as much as an L1 hit's own work.
    #[inline]
    pub fn process(&mut self, e: &TimedEvent) {
        let slot = if self.last_thread.0 == u64::from(e.thread) {
            self.last_thread.1
        } else {
            match self.slot_of.get(e.thread) {
                Some(i) => {
                    self.last_thread = (u64::from(e.thread), i);
                    i
                }
                None => return,
            }
        };
        let Event::Access(a) = &e.event else {
            return self.process_other(slot, e);
        };
        // The access's time units are added up in `report` (accesses × cost).
        let t = &mut self.threads[slot];
        t.accesses += 1;
        t.end_time = t.end_time.max(e.time.saturating_add(self.access_cost));
        let core = t.core as usize;
        if let Some(log) = self.log.as_mut() {
            log.current = Some((e.thread, a.pc));
        }
        self.access(core, a);
    }

    /// An event other than an access, of the thread at `slot`. Out of line: accesses are
    /// most events, and their path keeps fewer registers busy without this one inlined.
    #[inline(never)]
    fn process_other(&mut self, slot: usize, e: &TimedEvent) {
        let t = &mut self.threads[slot];
        match e.event {
            Event::Advance { units, flops } => {
                t.time_units = t.time_units.saturating_add(units);
                t.flops = t.flops.saturating_add(flops);
                t.end_time = t.end_time.max(e.time.saturating_add(units));
            }
            _ => t.end_time = t.end_time.max(e.time),
        }
    }

    /// Bytes `core` has moved so far over data path `path` (index into
    /// [`MachineModel::path_names`]); zero for an unknown path or core.
    #[inline]
    pub fn core_path_bytes(&self, core: usize, path: usize) -> PathBytes {
        if path == 0 {
            return self.first_path.get(core).copied().unwrap_or_default();
        }
        self.paths
            .get(path)
            .and_then(|p| p.per_core.get(core))
            .copied()
            .unwrap_or_default()
    }

    /// How many transfers have been counted on paths other than the first (by any core):
    /// when it has not changed, an access moved bytes only between its core and the first
    /// level.
    #[inline]
    pub fn beyond_first_moves(&self) -> u64 {
        self.beyond_first_moves
    }

    /// Number of data paths the engine counts.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// Simulates one memory access by `core`.
    #[inline]
    pub fn access(&mut self, core: usize, a: &Access) {
        if a.kind == AccessKind::Fetch {
            // The model has no instruction cache (Cachegrind mode simulates fetches).
            self.unsimulated_fetches += 1;
            return;
        }
        let size = a.size.max(1) as u64;
        let bytes = &mut self.first_path[core];
        if a.kind.reads() {
            bytes.read += size;
        }
        if a.kind.writes() {
            bytes.write += size;
        }
        let first = a.addr >> self.shift;
        let line_mask = self.line_size - 1;
        if (a.addr & line_mask) + size <= self.line_size {
            self.access_line(
                core,
                first,
                (a.addr & line_mask) as usize,
                size as usize,
                a.kind,
            );
            return;
        }
        self.access_lines(core, a, size);
    }

    /// An access spanning several lines. Kept out of line: it is rare, and inlining a second
    /// copy of the per-line path into [`Self::process`] makes the common path slower.
    #[inline(never)]
    fn access_lines(&mut self, core: usize, a: &Access, size: u64) {
        let first = a.addr >> self.shift;
        // An access running past the top of the address space ends there.
        let end = (a.addr as u128 + size as u128).min(1u128 << 64);
        let last = ((end - 1) >> self.shift) as u64;
        for line in first..=last {
            let line_start = (line as u128) << self.shift;
            let from = line_start.max(a.addr as u128);
            let to = (line_start + self.line_size as u128).min(end);
            self.access_line(
                core,
                line,
                (from - line_start) as usize,
                (to - from) as usize,
                a.kind,
            );
        }
    }

    #[inline]
    fn uid(&self, core: usize, i: usize) -> usize {
        if i < self.p {
            core * self.p + i
        } else {
            self.cores.len() * self.p + (i - self.p)
        }
    }

    fn cache(&mut self, core: usize, i: usize) -> &mut Cache {
        let u = self.uid(core, i);
        &mut self.units[u].cache
    }

    fn classifier(&mut self, core: usize, i: usize) -> &mut Classifier {
        let u = self.uid(core, i);
        &mut self.units[u].class
    }

    fn counters(&mut self, core: usize, i: usize) -> &mut LevelCounters {
        &mut self.lc[core * self.n + i]
    }

    fn path(&mut self, j: usize, core: usize, read: u64, write: u64) {
        self.beyond_first_moves += 1;
        let b = &mut self.paths[j].per_core[core];
        b.read += read;
        b.write += write;
    }

    /// Looks `line` up at level `i` for `core`, counting the access and the hit or
    /// classified miss.
    #[inline(always)]
    fn lookup(
        &mut self,
        core: usize,
        i: usize,
        line: u64,
        kind: AccessKind,
        off: usize,
        len: usize,
    ) -> Option<usize> {
        let u = self.uid(core, i);
        let lc = core * self.n + i;
        self.lc[lc].accesses.add(kind);
        let unit = &mut self.units[u];
        // The shadow's front array holds the most recently used lines with their slots in
        // this cache (untagged once a line leaves it): most hits need no set scan.
        let slot = match unit.class.shadow.front_find(line) {
            Some((pos, tag)) if tag != NO_TAG => {
                let s = tag as usize;
                debug_assert_eq!(unit.cache.find(line), Some(s), "stale front tag");
                if unit.class.last != Some(line) {
                    // A repeated lookup of the most recent line changes no LRU state.
                    unit.class.shadow.promote(pos);
                    unit.cache.touch(s);
                    unit.class.last = Some(line);
                }
                Some(s)
            }
            // Recently used but no longer in the cache.
            Some(_) => {
                debug_assert_eq!(unit.cache.find(line), None, "untagged line in the cache");
                None
            }
            None => {
                let found = unit.cache.find(line);
                if let Some(s) = found {
                    // Not in the front, so not the most recent line either.
                    unit.class.shadow.access_cached(line, s as u32);
                    unit.cache.touch(s);
                    unit.class.last = Some(line);
                }
                found
            }
        };
        if slot.is_some() {
            // Hits are counted in `report` (accesses − misses).
            return slot;
        }
        self.classify_miss(core, i, u, line, off, len);
        None
    }

    /// Counts a miss at level `i` (unit `u`) by class.
    #[cold]
    #[inline(never)]
    fn classify_miss(
        &mut self,
        core: usize,
        i: usize,
        u: usize,
        line: u64,
        off: usize,
        len: usize,
    ) {
        // The shadow and the set of lines ever held learn of the line when it is filled
        // (`fill`), not here: a no-write-allocate or exclusive level does not take it.
        let presence = self.units[u].class.shadow.presence(line);
        let class = if presence == Presence::Never {
            MissClass::Compulsory
        } else if let Some(&at) = (i < self.p).then(|| self.lost[core].get(&line)).flatten() {
            // A byte the core wrote itself since (a no-write-allocate store to the lost line)
            // is no data from another core.
            let rewritten = self.written.get(&line).is_some_and(|w| {
                w[off..off + len]
                    .iter()
                    .any(|&s| s >> WRITER_BITS >= at && (s & WRITER_MASK) as usize != core)
            });
            if i == 0 {
                if let Some(log) = self.log.as_mut() {
                    if let Some((thread, pc)) = log.current {
                        let writer = log.last_writer.get(&line).copied();
                        let key = CoherenceKey {
                            line: line << self.shift,
                            false_sharing: !rewritten,
                            victim_thread: thread,
                            victim_pc: pc,
                            writer_thread: writer.map(|w| w.0),
                            writer_pc: writer.and_then(|w| w.1),
                        };
                        *log.counts.entry(key).or_default() += 1;
                    }
                }
            }
            if rewritten {
                MissClass::CoherenceTrue
            } else {
                MissClass::CoherenceFalse
            }
        } else if presence == Presence::Present {
            MissClass::Conflict
        } else {
            MissClass::Capacity
        };
        self.counters(core, i).misses.add(class);
    }

    /// Whether `core` holds `line` in any private level, and the OR of those copies' states.
    fn private_state(&self, core: usize, line: u64) -> Option<u8> {
        let mut state = None;
        for u in &self.units[core * self.p..(core + 1) * self.p] {
            let c = &u.cache;
            if let Some(s) = c.find(line) {
                state = Some(state.unwrap_or(0) | c.state(s));
            }
        }
        state
    }

    /// Sets or clears state bits on all of `core`'s private copies of `line`.
    fn update_private(&mut self, core: usize, line: u64, set: u8, clear: u8) {
        let p = self.p;
        for u in &mut self.units[core * p..(core + 1) * p] {
            let c = &mut u.cache;
            if let Some(s) = c.find(line) {
                let st = c.state(s);
                c.set_state(s, (st | set) & !clear);
            }
        }
    }

    /// Invalidates every other core's private copies of `line` (for a write by `core`).
    fn invalidate_others(&mut self, core: usize, line: u64) {
        let others = self.sharers.get(&line).copied().unwrap_or(0) & !(1u64 << core);
        if others == 0 {
            return;
        }
        let seq = self.wseq;
        let ls = self.line_size as usize;
        self.written
            .entry(line)
            .or_insert_with(|| vec![0; ls].into_boxed_slice());
        if let Some(log) = self.log.as_mut() {
            if let Some(cur) = log.current {
                log.last_writer.insert(line, cur);
            }
        }
        for o in (0..self.cores.len()).filter(|o| others & (1u64 << o) != 0) {
            for i in 0..self.p {
                let u = &mut self.units[o * self.p + i];
                if let Some((slot, _)) = u.cache.invalidate_slot(line) {
                    let cls = &mut u.class;
                    cls.removed(line, slot);
                    cls.shadow.remove(line);
                }
            }
            self.lost[o].insert(line, seq);
            self.cores[core].invalidations_sent += 1;
            self.cores[o].invalidations_received += 1;
        }
        let entry = self.sharers.entry(line).or_insert(0);
        *entry &= 1u64 << core;
        if *entry == 0 {
            self.sharers.remove(&line);
        }
    }

    /// Coherence for a miss in all of `core`'s private levels. Returns whether another core
    /// supplies the (dirty) line.
    fn remote(&mut self, core: usize, line: u64, write: bool) -> bool {
        let others = self.sharers.get(&line).copied().unwrap_or(0) & !(1u64 << core);
        if others == 0 {
            return false;
        }
        let owner = (0..self.cores.len()).find(|&o| {
            others & (1u64 << o) != 0 && self.private_state(o, line).is_some_and(|s| s & OWNED != 0)
        });
        let dirty_owner =
            owner.filter(|&o| self.private_state(o, line).is_some_and(|s| s & DIRTY != 0));
        if write {
            self.invalidate_others(core, line);
        } else if let Some(o) = owner {
            // M → S (dirty data also goes back down) or E → S.
            if dirty_owner.is_some() {
                if let Some(i) = (0..self.p).rev().find(|&i| {
                    let c = &self.units[o * self.p + i].cache;
                    c.find(line).is_some_and(|s| c.state(s) & DIRTY != 0)
                }) {
                    self.lc[o * self.n + i].writebacks += 1;
                    // The owner keeps a clean copy: the data must leave its private levels.
                    self.write_back_to(o, i, line, self.p);
                }
            }
            self.update_private(o, line, 0, OWNED | DIRTY);
        }
        if dirty_owner.is_some() {
            self.cores[core].cache_to_cache += 1;
            let c2c = self.paths.len() - 1;
            self.path(c2c, core, self.line_size, 0);
            true
        } else {
            false
        }
    }

    #[inline(always)]
    fn access_line(&mut self, core: usize, line: u64, off: usize, len: usize, kind: AccessKind) {
        let write = kind.writes();
        if write {
            self.wseq += 1;
        }
        // Fast path: an L1 hit that needs no coherence action (a read, or a write to an owned
        // line of a write-back L1) changes nothing but the L1 itself.
        if self.p > 0 {
            if let Some(slot) = self.lookup(core, 0, line, kind, off, len) {
                let l1 = &mut self.units[core * self.p].cache;
                let st = l1.state(slot);
                if !write {
                    return;
                }
                if st & OWNED != 0 && self.l1_write_back {
                    l1.set_state(slot, st | DIRTY);
                    if !self.written.is_empty() {
                        self.record_write(core, line, off, len);
                    }
                    return;
                }
                return self.slow_path(core, line, off, len, kind, Source::Level(0));
            }
        }
        self.slow_path(core, line, off, len, kind, Source::Memory)
    }

    fn record_write(&mut self, core: usize, line: u64, off: usize, len: usize) {
        if let Some(w) = self.written.get_mut(&line) {
            w[off..off + len].fill(self.wseq << WRITER_BITS | core as u64);
        }
    }

    /// Everything but the fast path. `start` is `Level(0)` when L1 already hit (and was
    /// counted), else `Memory` (nothing looked up yet).
    #[inline(never)]
    #[cold]
    fn slow_path(
        &mut self,
        core: usize,
        line: u64,
        off: usize,
        len: usize,
        kind: AccessKind,
        start: Source,
    ) {
        let write = kind.writes();
        let pure_store = kind == AccessKind::Store;
        // 1. Private levels (L1 was looked up already by the caller).
        let mut source = start;
        let mut found_private = start != Source::Memory;
        if !found_private {
            for i in 1..self.p {
                if self.lookup(core, i, line, kind, off, len).is_some() {
                    source = Source::Level(i);
                    found_private = true;
                    break;
                }
            }
        }
        // 2. Coherence.
        if found_private {
            let owned = self
                .private_state(core, line)
                .is_some_and(|s| s & OWNED != 0);
            if write && !owned {
                self.cores[core].upgrades += 1;
                self.invalidate_others(core, line);
            }
        } else if self.p > 0 && self.remote(core, line, write) {
            source = Source::Remote;
        }
        // 3. Shared levels, then memory.
        if source == Source::Memory {
            for i in self.p..self.n {
                if self.lookup(core, i, line, kind, off, len).is_some() {
                    source = Source::Level(i);
                    break;
                }
            }
        }
        // 4. Move the line up and fill.
        let (from, moved_state) = match source {
            Source::Level(i) => {
                let cache = self.cache(core, i);
                let st = cache.find(line).map_or(0, |s| cache.state(s));
                (i, st)
            }
            Source::Remote => (self.p, 0),
            Source::Memory => (self.n, 0),
        };
        let fills = |e: &Self, i: usize| {
            let l = &e.model.levels[i];
            l.inclusion != Inclusion::Exclusive && !(pure_store && l.write == WritePolicy::Through)
        };
        let top = (0..from).find(|&i| fills(self, i));
        if let Some(top) = top {
            // The line crosses every boundary between its source and the top level filled; a
            // cache-to-cache transfer enters at the last private level.
            let last_path = if source == Source::Remote {
                self.p - 1
            } else {
                from
            };
            for j in top + 1..=last_path {
                self.path(j, core, self.line_size, 0);
            }
        }
        let exclusive_source = matches!(source, Source::Level(i) if self.model.levels[i].inclusion == Inclusion::Exclusive);
        let others_hold = self.sharers.get(&line).copied().unwrap_or(0) & !(1u64 << core) != 0;
        // A dirty line that an exclusive level gives up is the only copy of its data: its dirt
        // moves to the topmost write-back level filled (a write-through level holds no dirt;
        // with none, the data is written back below the source). In a private level it
        // arrives modified (owned), under MSI too (until 2026-11-29 it arrived shared, and the
        // next reader was not served cache to cache) — unless another core holds the line:
        // then it arrives shared with its dirt, and no cache-to-cache source (one owner only).
        let moved_dirt = exclusive_source && top.is_some() && moved_state & DIRTY != 0;
        let dirt_level = (0..from)
            .find(|&i| fills(self, i) && self.model.levels[i].write == WritePolicy::Back)
            .filter(|_| moved_dirt);
        let dirty_moved = dirt_level.is_some_and(|i| i < self.p);
        // Copies filled from the core's own levels inherit their ownership; MESI's E is granted
        // only to a line fetched from outside the core with no other sharer.
        let owned_now = write
            || if found_private {
                self.private_state(core, line)
                    .is_some_and(|s| s & OWNED != 0)
            } else {
                (self.mesi || dirty_moved) && !others_hold
            };
        // The victim level gives the line up before the levels above take it, so that the
        // victim one of them sends down takes the freed way (a swap) instead of evicting
        // another line (until 2026-11-29 it gave the line up afterwards).
        if exclusive_source && top.is_some() {
            if let Source::Level(i) = source {
                if let Some((slot, _)) = self.cache(core, i).invalidate_slot(line) {
                    self.classifier(core, i).removed(line, slot);
                }
                if i < self.p {
                    self.private_copy_gone(core, line);
                }
            }
        }
        for i in (0..from).rev() {
            if !fills(self, i) {
                continue;
            }
            let mut state = if i < self.p && owned_now { OWNED } else { 0 };
            if dirt_level == Some(i) {
                // The victim level gave the line up; its dirt moves with it.
                state |= DIRTY;
            }
            // Every level above the source missed, and filling one level only moves other
            // lines: the line is absent here.
            self.fill_absent(core, i, line, state);
        }
        if let (true, None, Source::Level(i)) = (moved_dirt, dirt_level, source) {
            self.lc[core * self.n + i].writebacks += 1;
            self.write_back(core, i, line);
        }
        if owned_now && write {
            self.update_private(core, line, OWNED, 0);
        }
        // A line back from outside the core is no longer "lost" to coherence.
        if !found_private
            && !self.lost[core].is_empty()
            && self.private_state(core, line).is_some()
            && self.lost[core].remove(&line).is_some()
            && !self.lost.iter().any(|l| l.contains_key(&line))
        {
            // No core waits to classify a coherence miss on this line any more.
            self.written.remove(&line);
        }
        // 5. The written bytes.
        if write {
            self.propagate_write(core, line, len as u64);
            self.record_write(core, line, off, len);
        }
    }

    /// Marks the first write-back level holding `line` dirty; write-through levels pass the
    /// bytes down.
    fn propagate_write(&mut self, core: usize, line: u64, len: u64) {
        for i in 0..self.n {
            let wb = self.model.levels[i].write == WritePolicy::Back;
            let cache = self.cache(core, i);
            if let Some(s) = cache.find(line) {
                if wb {
                    let st = cache.state(s);
                    cache.set_state(s, st | DIRTY);
                    return;
                }
            }
            self.path(i + 1, core, 0, len);
        }
    }

    /// Dirty data of `line` leaves level `from` of `core`: it goes to the next level holding
    /// the line (marked dirty there) or to memory.
    fn write_back(&mut self, core: usize, from: usize, line: u64) {
        self.write_back_to(core, from, line, from + 1);
    }

    /// Like [`Self::write_back`], but the data may only come to rest at level `stop_from`
    /// or below (a downgrade must move it out of the owner's private levels).
    fn write_back_to(&mut self, core: usize, from: usize, line: u64, stop_from: usize) {
        for j in from + 1..=self.n {
            self.path(j, core, 0, self.line_size);
            if j < self.n && j >= stop_from {
                let cache = self.cache(core, j);
                if let Some(s) = cache.find(line) {
                    let st = cache.state(s);
                    cache.set_state(s, st | DIRTY);
                    return;
                }
            }
        }
    }

    /// Bookkeeping after one of `core`'s private copies of `line` disappeared.
    fn private_copy_gone(&mut self, core: usize, line: u64) {
        // With one private level, the copy that went was the core's only one.
        if self.p == 1 || self.private_state(core, line).is_none() {
            if let Some(s) = self.sharers.get_mut(&line) {
                *s &= !(1u64 << core);
                if *s == 0 {
                    self.sharers.remove(&line);
                }
            }
        }
    }

    /// Inserts `line` at level `i` for `core` and deals with the victim. A copy already there
    /// (a shared exclusive level keeps a clean copy that another core evicted while this one
    /// wrote the line) takes the incoming dirt: the data must still reach memory.
    fn fill(&mut self, core: usize, i: usize, line: u64, state: u8) {
        let cache = self.cache(core, i);
        match cache.find(line) {
            Some(s) => {
                let st = cache.state(s);
                cache.set_state(s, st | (state & DIRTY));
            }
            None => self.fill_absent(core, i, line, state),
        }
    }

    /// Like [`Self::fill`], for a line known not to be at level `i` of `core`.
    fn fill_absent(&mut self, core: usize, i: usize, line: u64, state: u8) {
        let (slot, victim) = self.cache(core, i).fill_at(line, state);
        let class = self.classifier(core, i);
        if let Some(v) = victim {
            // The shadow must learn that the victim left the slot before the new line takes it.
            class.removed(v.line, v.slot);
        }
        class.last = Some(line);
        class.shadow.access_filled(line, slot as u32);
        if i < self.p {
            *self.sharers.entry(line).or_insert(0) |= 1u64 << core;
        }
        if let Some(v) = victim {
            self.evicted(core, i, v);
        }
    }

    fn evicted(&mut self, core: usize, i: usize, v: Evicted) {
        // (The classifier learnt of the victim in `fill_absent`, before the new line took its
        // slot.)
        self.lc[core * self.n + i].evictions += 1;
        if i < self.p {
            self.private_copy_gone(core, v.line);
        }
        let dirty = v.state & DIRTY != 0;
        let next_exclusive = self
            .model
            .levels
            .get(i + 1)
            .is_some_and(|l| l.inclusion == Inclusion::Exclusive);
        if next_exclusive {
            // The victim level receives every line evicted above it.
            if dirty {
                self.lc[core * self.n + i].writebacks += 1;
            }
            self.path(i + 1, core, 0, self.line_size);
            let keep = if i + 1 < self.p {
                v.state & (DIRTY | OWNED)
            } else {
                v.state & DIRTY
            };
            self.fill(core, i + 1, v.line, keep);
        } else if dirty {
            self.lc[core * self.n + i].writebacks += 1;
            self.write_back(core, i, v.line);
        }
        if self.model.levels[i].inclusion == Inclusion::Inclusive {
            self.back_invalidate(core, i, v.line);
        }
    }

    /// An inclusive level `i` lost `line`: remove it from the levels above (every core's, if
    /// level `i` is shared).
    fn back_invalidate(&mut self, core: usize, i: usize, line: u64) {
        let cores: Vec<usize> = if i < self.p {
            vec![core]
        } else {
            (0..self.cores.len()).collect()
        };
        for c in cores {
            for j in (0..i).rev() {
                if let Some((slot, state)) = self.cache(c, j).invalidate_slot(line) {
                    self.classifier(c, j).removed(line, slot);
                    self.lc[c * self.n + j].back_invalidations += 1;
                    if state & DIRTY != 0 {
                        self.lc[c * self.n + j].writebacks += 1;
                        self.write_back(c, j, line);
                    }
                    if j < self.p {
                        self.private_copy_gone(c, line);
                    }
                }
            }
        }
    }

    /// Checks the coherence invariants: at most one core owns a line and then no other core
    /// holds it; a core's copies agree on ownership; the directory matches the caches.
    /// Returns a description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut holders: BTreeMap<u64, Vec<(usize, u8)>> = BTreeMap::new();
        for c in 0..self.cores.len() {
            let mut per_line: BTreeMap<u64, (u8, u8)> = BTreeMap::new();
            for u in &self.units[c * self.p..(c + 1) * self.p] {
                for (line, st) in u.cache.lines() {
                    let e = per_line.entry(line).or_insert((st & OWNED, st & OWNED));
                    e.0 |= st & OWNED;
                    e.1 &= st & OWNED;
                }
            }
            for (line, (any, all)) in per_line {
                if any != all {
                    return Err(format!(
                        "core {c} line {line:#x}: copies disagree on ownership"
                    ));
                }
                holders.entry(line).or_default().push((c, any));
            }
        }
        for (line, hs) in &holders {
            let owners = hs.iter().filter(|(_, o)| *o != 0).count();
            if owners > 1 || (owners == 1 && hs.len() > 1) {
                return Err(format!(
                    "line {line:#x}: held by {hs:?} (one writer or many readers violated)"
                ));
            }
            let mask = hs.iter().fold(0u64, |m, (c, _)| m | (1u64 << c));
            if self.sharers.get(line).copied().unwrap_or(0) != mask {
                return Err(format!(
                    "line {line:#x}: directory {:?} but caches {mask:#b}",
                    self.sharers.get(line)
                ));
            }
        }
        if let Some((line, _)) = self.sharers.iter().find(|(l, _)| !holders.contains_key(l)) {
            return Err(format!("line {line:#x}: in the directory but in no cache"));
        }
        Ok(())
    }

    /// The report so far.
    pub fn report(&self) -> SimReport {
        let mut paths = self.paths.clone();
        if let Some(first) = paths.first_mut() {
            first.per_core.clone_from(&self.first_path);
        }
        for p in &mut paths {
            p.total = p
                .per_core
                .iter()
                .fold(PathBytes::default(), |t, b| PathBytes {
                    read: t.read + b.read,
                    write: t.write + b.write,
                });
        }
        let mut cores = self.cores.clone();
        for (c, core) in cores.iter_mut().enumerate() {
            core.levels = self.lc[c * self.n..(c + 1) * self.n].to_vec();
            for l in &mut core.levels {
                // Every lookup is a hit or a classified miss.
                l.hits = l.accesses.total() - l.misses.total();
            }
        }
        let mut threads = self.threads.clone();
        for t in &mut threads {
            // Until now `time_units` held the advances alone (a sum that saturates, as does
            // this one: the order of the terms does not matter).
            t.time_units = t
                .time_units
                .saturating_add(t.accesses.saturating_mul(self.access_cost));
        }
        let mut r = SimReport {
            schema: REPORT_SCHEMA,
            engine: "exact".into(),
            machine: self.model.clone(),
            time_unit: self.time_unit,
            cores,
            levels: Vec::new(),
            paths,
            threads,
            unsimulated_fetches: self.unsimulated_fetches,
            slack: None,
            quanta: None,
            cachegrind: None,
        };
        r.sum_levels();
        r
    }
}
