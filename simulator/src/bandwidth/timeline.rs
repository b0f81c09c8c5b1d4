//! Online aggregation of the bandwidth timeline, driven event by event next to an engine
//! (see [`PathByteSource`]): per thread and window the busy time units, the bytes of every series, then per
//! window the slowest limit (dominance), all folded into histograms when the window closes.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};

use cachescope_schema::{CodePos, Event, ThreadId, TimeUnit, TimedEvent};

use super::{
    Attribution, BandwidthConfig, BandwidthReport, Channel, Curve, Direction, Dominance,
    PathByteSource, ProgramEstimate, Scope, Series, ThreadBandwidth, ATTRIBUTION_TOP,
};
use crate::model::MachineModel;

use super::channels::{channels, ChannelError};

/// No series.
const NONE: usize = usize::MAX;

/// 4 KiB pages (the page size the model's `page_fault_ns` is measured for).
const PAGE_SHIFT: u32 = 12;

/// Heap blocks from this size on are mapped fresh by the allocator (glibc's default mmap
/// threshold) and returned on free: their pages fault again when reallocated.
const FRESH_MAPPING_BYTES: u64 = 128 << 10;

/// Per-thread state of the open window.
struct ThreadState {
    out: ThreadBandwidth,
    core: usize,
    /// Busy time units in the open window.
    busy: u64,
    /// Busy time units of an advance that reach past the open window.
    carry: u64,
    /// The FLOPs of those carried units: an advance's FLOPs are spread over the windows its
    /// units cover, in proportion (all in one window, a loop of 1,500 FLOPs per 2,700
    /// instructions showed a rate no scalar code reaches and a bottleneck that was not
    /// there, whose size depended on the window).
    carry_flops: u64,
    /// Per series, the open window's value.
    values: Vec<u64>,
    /// Accesses until the next sampled one.
    until_sample: u32,
    /// State of the deterministic pseudo-random sampling intervals.
    rng: u64,
    /// First touches of pages in the open window.
    faults: u64,
    /// Time units of the barriers passed and regions started in the open window, and how
    /// many there were.
    sync_units: f64,
    sync_events: u64,
    /// The thread began a region of two or more threads and has not entered a barrier since.
    forked: bool,
    /// Sampled `(series, pc, bytes)` of the open window.
    samples: Vec<(usize, CodePos, u64)>,
    /// Time of the current barrier segment: at peak, and estimated.
    segment_peak: f64,
    segment_estimated: f64,
    /// Where the thread's time in the segment starts, after the segment's start: at peak,
    /// and estimated. A thread created in the segment starts where its creator was; a
    /// thread that joined another goes on no earlier than that one's end.
    start_peak: f64,
    start_estimated: f64,
}

/// A thread creation or join seen in the open window, resolved when the window closes
/// (slots of the threads).
#[derive(Debug, Clone, Copy)]
enum ThreadEdge {
    /// `parent` created `child`.
    Create { parent: usize, child: usize },
    /// `parent` waited for `child` to end.
    Join { parent: usize, child: usize },
}

impl ThreadState {
    /// Adds one barrier or fork of `cost` time units to the open window (nothing when the
    /// model gives no cost).
    fn charge_sync(&mut self, cost: Option<f64>) {
        if let Some(cost) = cost {
            self.sync_units += cost;
            self.sync_events += 1;
        }
    }

    /// The next sampling interval: uniform in `1..2·period` (mean `period`), so that loops
    /// whose access pattern repeats with the period are not always sampled at the same access.
    fn next_interval(&mut self, period: u32) -> u32 {
        // xorshift64: deterministic per thread, no host state.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let span = 2 * u64::from(period.max(1)) - 1;
        (1 + self.rng % span) as u32
    }
}

/// The bandwidth timeline of one simulation.
pub struct BandwidthTimeline {
    cfg: BandwidthConfig,
    time_unit: TimeUnit,
    ghz: f64,
    ipc: f64,
    series: Vec<Series>,
    channels: Vec<Channel>,
    /// Series index of each engine path: read, write, and read+write (`NONE` when the path
    /// has no combined limit).
    path_series: Vec<(usize, usize, usize)>,
    flops_series: usize,
    /// The instruction-issue series (`NONE` without an `ipc_total`): a window's busy units.
    issue_series: usize,
    threads: Vec<ThreadState>,
    slot_of: FxHashMap<ThreadId, usize>,
    last_thread: Option<(ThreadId, usize)>,
    /// The engine's count of transfers beyond the first path at the last look.
    moves_seen: u64,
    /// Per core: the thread whose event it ran last (charged with its bytes).
    core_thread: Vec<usize>,
    /// Per core and path: bytes already accounted.
    seen: Vec<Vec<(u64, u64)>>,
    /// Index of the open window.
    window: u64,
    demand: Vec<Curve>,
    /// Per channel: the demand in windows where it dominated some thread (merge points).
    merge_dominance: Vec<Curve>,
    /// Per channel: dominant for some thread in the open window (scratch).
    dominant_now: Vec<bool>,
    /// Summed over threads per series in the open window (scratch).
    demand_now: Vec<u64>,
    /// Time a barrier was left in the open window: a barrier segment ends there.
    segment_ends: Option<u64>,
    last_leave: Option<u64>,
    /// Thread creations and joins of the open window, in the trace's order.
    edges: Vec<ThreadEdge>,
    program: ProgramEstimate,
    /// Time units one first touch of a page costs (`None`: the model has no cost).
    fault_cost: Option<f64>,
    /// Time units a thread spends passing one barrier, and starting one parallel region
    /// (`None`: the model has no cost).
    barrier_cost: Option<f64>,
    region_cost: Option<f64>,
    /// Pages touched so far.
    touched: FxHashSet<u64>,
    /// Live heap blocks large enough to be mapped fresh (their pages fault again after a
    /// free and a new allocation): start → size.
    large_blocks: FxHashMap<u64, u64>,
    attribution: FxHashMap<(usize, CodePos), u64>,
}

impl BandwidthTimeline {
    /// A timeline for `model` (which needs a bandwidth section) and the thread placement the
    /// engine uses.
    pub fn new(
        model: &MachineModel,
        placement: &BTreeMap<ThreadId, u32>,
        time_unit: TimeUnit,
        cfg: BandwidthConfig,
    ) -> Result<Self, ChannelError> {
        let (series, chans) = channels(model)?;
        // Per-core limits and busy time are per thread: two threads on one core would be
        // modelled as two cores (thesis §4.3.1: every thread has its own core).
        let mut per_core = BTreeMap::new();
        for &core in placement.values() {
            *per_core.entry(core).or_insert(0usize) += 1;
        }
        if let Some((&core, &n)) = per_core.iter().find(|(_, &n)| n > 1) {
            return Err(ChannelError::SharedCore {
                core,
                threads: n,
                needed: placement.len(),
            });
        }
        let bw = model
            .bandwidth
            .as_ref()
            .ok_or_else(|| ChannelError::NoBandwidthModel(model.name.clone()))?;
        let cfg = BandwidthConfig {
            window: cfg.window.max(1),
            sample_period: cfg.sample_period.max(1),
        };
        let paths = model.path_names().len();
        let mut path_series = vec![(NONE, NONE, NONE); paths];
        let mut flops_series = NONE;
        let mut issue_series = NONE;
        for (s, ser) in series.iter().enumerate() {
            match (ser.path_index, ser.direction) {
                (Some(j), Direction::Read) => path_series[j].0 = s,
                (Some(j), Direction::Write) => path_series[j].1 = s,
                (Some(j), Direction::Combined) => path_series[j].2 = s,
                (_, Direction::Instructions) => issue_series = s,
                _ => flops_series = s,
            }
        }
        let ns = series.len();
        let mut slot_of = FxHashMap::default();
        let threads = placement
            .iter()
            .enumerate()
            .map(|(i, (&thread, &core))| {
                slot_of.insert(thread, i);
                ThreadState {
                    out: ThreadBandwidth {
                        thread,
                        core,
                        windows: 0,
                        busy_units: 0,
                        peak_units: 0,
                        estimated_units: 0.0,
                        faults: 0,
                        fault_units: 0.0,
                        sync_events: 0,
                        sync_units: 0.0,
                        curves: (0..ns).map(|_| Curve::new()).collect(),
                        dominance: chans
                            .iter()
                            .map(|_| Dominance {
                                windows: 0,
                                units: 0.0,
                                added_units: 0.0,
                                curve: Curve::new(),
                            })
                            .collect(),
                    },
                    core: core as usize,
                    busy: 0,
                    carry: 0,
                    carry_flops: 0,
                    values: vec![0; ns],
                    until_sample: cfg.sample_period.max(1),
                    rng: 0x9e37_79b9_7f4a_7c15 ^ u64::from(thread),
                    faults: 0,
                    sync_units: 0.0,
                    sync_events: 0,
                    forked: false,
                    samples: Vec::new(),
                    segment_peak: 0.0,
                    segment_estimated: 0.0,
                    start_peak: 0.0,
                    start_estimated: 0.0,
                }
            })
            .collect();
        // Until a core runs an event, its bytes go to its first placed thread.
        let mut core_thread = vec![0; model.cores as usize];
        for (i, &core) in placement.values().enumerate().rev() {
            if let Some(c) = core_thread.get_mut(core as usize) {
                *c = i;
            }
        }
        Ok(BandwidthTimeline {
            cfg,
            time_unit,
            ghz: bw.ghz,
            ipc: bw.ipc,
            demand: (0..ns).map(|_| Curve::new()).collect(),
            demand_now: vec![0; ns],
            merge_dominance: chans.iter().map(|_| Curve::new()).collect(),
            dominant_now: vec![false; chans.len()],
            series,
            channels: chans,
            path_series,
            flops_series,
            issue_series,
            threads,
            slot_of,
            last_thread: None,
            seen: vec![vec![(0, 0); paths]; model.cores as usize],
            core_thread,
            moves_seen: 0,
            window: 0,
            segment_ends: None,
            last_leave: None,
            edges: Vec::new(),
            program: ProgramEstimate::default(),
            fault_cost: bw.page_fault_ns.map(|ns| ns * bw.ghz * bw.ipc),
            barrier_cost: bw.barrier_ns.map(|ns| ns * bw.ghz * bw.ipc),
            region_cost: bw.region_ns.map(|ns| ns * bw.ghz * bw.ipc),
            touched: FxHashSet::default(),
            large_blocks: FxHashMap::default(),
            attribution: FxHashMap::default(),
        })
    }

    /// Accounts event `e`, which `engine` has just processed.
    pub fn observe(&mut self, e: &TimedEvent, engine: &impl PathByteSource) {
        let slot = match self.last_thread {
            Some((t, i)) if t == e.thread => i,
            _ => match self.slot_of.get(&e.thread) {
                Some(&i) => {
                    self.last_thread = Some((e.thread, i));
                    i
                }
                None => return,
            },
        };
        let w = self.cfg.window;
        if e.time / w > self.window {
            self.advance_to(e.time / w);
        }
        match e.event {
            Event::Access(a) => {
                let cost = self.time_unit.access_cost();
                if cost > 0 {
                    self.add_busy(slot, e.time, cost);
                }
                let t = &mut self.threads[slot];
                t.until_sample -= 1;
                let sampled = t.until_sample == 0;
                if sampled {
                    t.until_sample = t.next_interval(self.cfg.sample_period);
                }
                let core = t.core;
                self.core_thread[core] = slot;
                let moves = engine.beyond_first_moves();
                if moves == self.moves_seen {
                    // The common case, an L1 hit: only the first path moved bytes.
                    self.take_first(core, engine, a.pc.filter(|_| sampled));
                } else {
                    self.moves_seen = moves;
                    // A page's first touch always misses every level, so only accesses that
                    // moved bytes beyond the first path need the page check.
                    if self.fault_cost.is_some() {
                        let first = a.addr >> PAGE_SHIFT;
                        let last = a.addr.saturating_add(a.size.max(1) as u64 - 1) >> PAGE_SHIFT;
                        for page in first..=last {
                            if self.touched.insert(page) {
                                self.threads[slot].faults += 1;
                            }
                        }
                    }
                    // Bytes beyond the first path may be charged to other cores too (a
                    // downgrade writeback of another core's dirty copy): look at every core.
                    // Accesses beyond the first level are attributed exactly (they are few);
                    // the first path only when sampled.
                    self.take_bytes(core, engine, a.pc, sampled);
                    for other in (0..self.seen.len()).filter(|&c| c != core) {
                        self.take_bytes(other, engine, None, false);
                    }
                }
            }
            Event::Advance { units, flops } => {
                let here = self.add_busy(slot, e.time, units);
                // The FLOPs in proportion to the units in the open window; the rest is carried
                // with the units.
                let flops_here = if here == units {
                    flops
                } else {
                    (u128::from(flops) * u128::from(here) / u128::from(units)) as u64
                };
                let t = &mut self.threads[slot];
                let v = &mut t.values[self.flops_series];
                *v = v.saturating_add(flops_here);
                t.carry_flops = t.carry_flops.saturating_add(flops - flops_here);
            }
            Event::Alloc { addr, size, .. } if size >= FRESH_MAPPING_BYTES => {
                self.large_blocks.insert(addr, size);
            }
            Event::Free { addr } => {
                if let Some(size) = self.large_blocks.remove(&addr) {
                    let first = addr >> PAGE_SHIFT;
                    let last = addr.saturating_add(size - 1) >> PAGE_SHIFT;
                    // A hostile trace may free a block of 2^62 bytes: never walk more pages
                    // than are known.
                    if last - first < self.touched.len() as u64 {
                        for page in first..=last {
                            self.touched.remove(&page);
                        }
                    } else {
                        self.touched.retain(|p| !(first..=last).contains(p));
                    }
                }
            }
            // A barrier or a team of one thread is not charged (a choice: the costs are
            // measured with a thread per CPU, and a team of one does less of that work).
            Event::BarrierEnter { participants, .. } if participants > 1 => {
                let t = &mut self.threads[slot];
                // The recorders write a barrier right after a region's fork (its members
                // start no earlier than the fork); its time is the fork's, in `region_ns`.
                if !std::mem::take(&mut t.forked) {
                    t.charge_sync(self.barrier_cost);
                }
            }
            Event::BarrierLeave { .. } if self.last_leave != Some(e.time) => {
                self.last_leave = Some(e.time);
                self.segment_ends = Some(e.time);
            }
            Event::ThreadCreate { child } => {
                if let Some(&child) = self.slot_of.get(&child) {
                    self.edges.push(ThreadEdge::Create {
                        parent: slot,
                        child,
                    });
                }
            }
            Event::ThreadJoin { child } => {
                if let Some(&child) = self.slot_of.get(&child) {
                    self.edges.push(ThreadEdge::Join {
                        parent: slot,
                        child,
                    });
                }
            }
            Event::RegionBegin { team, .. } if team > 1 => {
                let t = &mut self.threads[slot];
                t.forked = true;
                t.charge_sync(self.region_cost);
            }
            _ => {}
        }
    }

    /// [`Self::take_bytes`] for the first path only (an L1 hit).
    fn take_first(&mut self, core: usize, engine: &impl PathByteSource, pc: Option<CodePos>) {
        let period = self.cfg.sample_period as u64;
        self.take_path(core, 0, engine, pc.map(|pc| (pc, period)));
    }

    /// Moves the bytes `engine` charged to `core` since the last look into the open window of
    /// the thread last seen on it, and attributes them to `pc` when given: exactly on every
    /// path but the first, on the first one when `first_sampled` (weighted by the period).
    fn take_bytes(
        &mut self,
        core: usize,
        engine: &impl PathByteSource,
        pc: Option<CodePos>,
        first_sampled: bool,
    ) {
        let period = self.cfg.sample_period as u64;
        for j in 0..self.path_series.len() {
            let weight = match (j, first_sampled) {
                (0, true) => Some(period),
                (0, false) => None,
                _ => Some(1),
            };
            self.take_path(core, j, engine, pc.zip(weight));
        }
    }

    /// Moves the bytes of path `j` charged to `core` since the last look into the open window
    /// of the thread last seen on it; attributes them to a code position with a weight.
    fn take_path(
        &mut self,
        core: usize,
        j: usize,
        engine: &impl PathByteSource,
        attribute: Option<(CodePos, u64)>,
    ) {
        let (read_s, write_s, both_s) = self.path_series[j];
        let now = engine.core_path_bytes(core, j);
        let seen = &mut self.seen[core][j];
        let (dr, dw) = (now.read - seen.0, now.write - seen.1);
        if dr | dw == 0 {
            return;
        }
        *seen = (now.read, now.write);
        let t = &mut self.threads[self.core_thread[core]];
        t.values[read_s] += dr;
        t.values[write_s] += dw;
        if both_s != NONE {
            t.values[both_s] += dr + dw;
        }
        if let Some((pc, weight)) = attribute {
            for (s, d) in [(read_s, dr), (write_s, dw), (both_s, dr + dw)] {
                if d > 0 && s != NONE {
                    t.samples.push((s, pc, d * weight));
                }
            }
        }
    }

    /// `units` of busy time of thread `slot` starting at `time` (inside the open window);
    /// returns how many fall into the open window (the rest is carried).
    fn add_busy(&mut self, slot: usize, time: u64, units: u64) -> u64 {
        let w = self.cfg.window;
        let window_end = self.window.saturating_add(1).saturating_mul(w);
        let t = &mut self.threads[slot];
        let here = units.min(window_end.saturating_sub(time));
        t.busy = t.busy.saturating_add(here);
        t.carry = t.carry.saturating_add(units - here);
        here
    }

    /// Closes windows until `target` is the open one.
    fn advance_to(&mut self, target: u64) {
        while self.window < target {
            self.close(1);
            self.window += 1;
            if self.threads.iter().all(|t| t.busy == 0 && t.carry == 0) {
                self.window = target;
                return;
            }
            // Windows filled only by carried busy time (long advances) are identical: close
            // them in one step, with the carried FLOPs spread evenly (`close_carried`). The
            // open window was just filled from the carry: no event has been added to it yet.
            let w = self.cfg.window;
            let flops_series = self.flops_series;
            let only_carry = self.threads.iter().all(|t| {
                (t.busy == 0 || t.busy == w)
                    && t.values
                        .iter()
                        .enumerate()
                        .all(|(s, &v)| v == 0 || (s == flops_series && t.busy == w))
            });
            if self.window < target && only_carry {
                let repeat = self
                    .threads
                    .iter()
                    .filter(|t| t.busy > 0)
                    // Never the last window of carried units: it may be partial.
                    .map(|t| (t.carry.saturating_sub(1) / w).saturating_add(1))
                    .min()
                    .unwrap_or(1)
                    .min(target - self.window);
                if repeat > 1 {
                    self.close_carried(repeat);
                }
            }
        }
    }

    /// Closes the open window and the `repeat - 1` after it, all filled only by carried units
    /// (and never holding the last of them), and opens the next one.
    ///
    /// Each thread's FLOPs for the `repeat` windows are their share of the carried FLOPs in
    /// proportion to the units, `q` or `q + 1` per window (the first `r` windows take one
    /// more), so the rounding rest is spread over the windows instead of piling up in the
    /// last carried one. Threads cut the run at different `r`: it is recorded in pieces, each
    /// piece a run of identical windows.
    fn close_carried(&mut self, repeat: u64) {
        let w = self.cfg.window;
        let flops_series = self.flops_series;
        let mut shares = Vec::with_capacity(self.threads.len());
        for t in &mut self.threads {
            if t.busy == 0 {
                shares.push((0, 0));
                continue;
            }
            let pool = t.values[flops_series].saturating_add(t.carry_flops);
            let units = w.saturating_add(t.carry);
            // repeat * w < units: the last carried window is not among them.
            let total = (u128::from(pool) * u128::from(repeat * w) / u128::from(units)) as u64;
            shares.push((total / repeat, total % repeat));
            t.carry -= (repeat - 1) * w;
            t.carry_flops = pool - total;
        }
        let mut cuts: Vec<u64> = shares
            .iter()
            .map(|&(_, r)| r)
            .filter(|&r| r > 0)
            .chain([repeat])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut done = 0;
        for cut in cuts {
            for (t, &(q, r)) in self.threads.iter_mut().zip(&shares) {
                if t.busy > 0 {
                    t.values[flops_series] = if done < r { q + 1 } else { q };
                }
            }
            self.record(cut - done);
            self.window += cut - done;
            done = cut;
        }
        self.refill();
    }

    /// Closes the open window, which stands for `repeat` identical windows.
    fn close(&mut self, repeat: u64) {
        self.record(repeat);
        self.refill();
    }

    /// Adds the open window to the curves and estimates, standing for `repeat` identical
    /// windows.
    fn record(&mut self, repeat: u64) {
        let w = self.cfg.window;
        let weight = w.saturating_mul(repeat);
        // A barrier left in the first half of the window ends the segment before it, one left
        // later ends it after: windows are not cut, so a segment boundary is exact to W/2.
        let start = self.window.saturating_mul(w);
        if self.segment_ends.is_some_and(|t| t - start < w.div_ceil(2)) {
            self.end_segment();
        }
        // Each thread's time in the segment before this window, for its creations and joins.
        let before: Vec<(f64, f64)> = if self.edges.is_empty() {
            Vec::new()
        } else {
            self.threads
                .iter()
                .map(|t| (t.segment_peak, t.segment_estimated))
                .collect()
        };
        if self.issue_series != NONE {
            for t in &mut self.threads {
                t.values[self.issue_series] = t.busy;
            }
        }
        for (s, d) in self.demand_now.iter_mut().enumerate() {
            *d = self
                .threads
                .iter()
                .fold(0u64, |sum, t| sum.saturating_add(t.values[s]));
        }
        let mut any = false;
        for t in &mut self.threads {
            if t.busy == 0
                && t.faults == 0
                && t.sync_events == 0
                && t.values.iter().all(|&v| v == 0)
            {
                continue;
            }
            any = true;
            let busy = t.busy as f64;
            let mut slowest = busy;
            let mut dominant: Option<(usize, u64)> = None;
            for (c, ch) in self.channels.iter().enumerate() {
                let own = t.values[ch.series];
                if own == 0 {
                    continue;
                }
                let value = match ch.scope {
                    Scope::PerCore => own,
                    // Fairness at a merge point: every core using it is slowed by the
                    // summed demand over the limit.
                    Scope::Total => self.demand_now[ch.series],
                };
                let need = value as f64 / ch.limit_per_unit;
                if need > slowest {
                    slowest = need;
                    dominant = Some((c, value));
                }
            }
            // Page faults stall the thread in the kernel: they add to the window's time.
            let faults = t.faults.saturating_mul(repeat);
            let fault_units = faults as f64 * self.fault_cost.unwrap_or(0.0);
            // So do barriers and forks: the runtime's own work, on top of the window's.
            let r = repeat as f64;
            let sync_units = t.sync_units * r;
            let stalled = fault_units + sync_units;
            let o = &mut t.out;
            o.windows = o.windows.saturating_add(repeat);
            o.busy_units = o.busy_units.saturating_add(t.busy.saturating_mul(repeat));
            o.estimated_units += slowest * r + stalled;
            o.faults = o.faults.saturating_add(faults);
            o.fault_units += fault_units;
            o.sync_events = o
                .sync_events
                .saturating_add(t.sync_events.saturating_mul(repeat));
            o.sync_units += sync_units;
            for (curve, &v) in o.curves.iter_mut().zip(&t.values) {
                curve.volume = curve.volume.saturating_add(v.saturating_mul(repeat));
                curve.record(v, weight);
            }
            match dominant {
                Some((c, value)) => {
                    self.dominant_now[c] = true;
                    let d = &mut o.dominance[c];
                    d.windows = d.windows.saturating_add(repeat);
                    d.units += slowest * r;
                    d.added_units += (slowest - busy) * r;
                    d.curve.volume = d.curve.volume.saturating_add(value.saturating_mul(repeat));
                    d.curve.record(value, weight);
                    let series = self.channels[c].series;
                    for &(s, pc, bytes) in &t.samples {
                        if s == series {
                            *self.attribution.entry((c, pc)).or_default() += bytes;
                        }
                    }
                }
                None => o.peak_units = o.peak_units.saturating_add(t.busy.saturating_mul(repeat)),
            }
            t.segment_peak += busy * r;
            t.segment_estimated += slowest * r + stalled;
        }
        if any {
            for (curve, &v) in self.demand.iter_mut().zip(&self.demand_now) {
                curve.volume = curve.volume.saturating_add(v.saturating_mul(repeat));
                curve.record(v, weight);
            }
            for (c, ch) in self.channels.iter().enumerate() {
                if std::mem::take(&mut self.dominant_now[c]) && ch.scope == Scope::Total {
                    let v = self.demand_now[ch.series];
                    self.merge_dominance[c].volume = self.merge_dominance[c]
                        .volume
                        .saturating_add(v.saturating_mul(repeat));
                    self.merge_dominance[c].record(v, weight);
                }
            }
        }
        self.resolve_edges(&before);
        if self.segment_ends.is_some() {
            self.end_segment();
        }
    }

    /// Orders the threads created and joined in the window just recorded (`before`: each
    /// thread's time in the segment before it). Exact to a window: a creation is placed at
    /// the creator's time at the window's start, a join as if the joining thread did its
    /// window's work after the joined thread's end.
    fn resolve_edges(&mut self, before: &[(f64, f64)]) {
        for edge in std::mem::take(&mut self.edges) {
            match edge {
                ThreadEdge::Create { parent, child } => {
                    let p = &self.threads[parent];
                    let (peak, est) = (
                        p.start_peak + before[parent].0,
                        p.start_estimated + before[parent].1,
                    );
                    let c = &mut self.threads[child];
                    // The child's time so far (none, unless the trace had it run before its
                    // creation) counts from its creation.
                    c.start_peak = peak - before[child].0;
                    c.start_estimated = est - before[child].1;
                }
                ThreadEdge::Join { parent, child } => {
                    let c = &self.threads[child];
                    let (peak, est) = (
                        c.start_peak + c.segment_peak,
                        c.start_estimated + c.segment_estimated,
                    );
                    let p = &mut self.threads[parent];
                    p.start_peak = p.start_peak.max(peak - before[parent].0);
                    p.start_estimated = p.start_estimated.max(est - before[parent].1);
                }
            }
        }
    }

    /// Opens the next window: empty but for the units (and their FLOPs) carried into it.
    fn refill(&mut self) {
        let w = self.cfg.window;
        let flops_series = self.flops_series;
        for t in &mut self.threads {
            t.values.iter_mut().for_each(|v| *v = 0);
            t.faults = 0;
            t.sync_units = 0.0;
            t.sync_events = 0;
            t.samples.clear();
            t.busy = t.carry.min(w);
            // The carried FLOPs in proportion to the carried units that fill this window; the
            // last of them takes the rest.
            let flops = if t.busy == t.carry {
                t.carry_flops
            } else {
                (u128::from(t.carry_flops) * u128::from(t.busy) / u128::from(t.carry)) as u64
            };
            t.values[flops_series] = flops;
            t.carry_flops -= flops;
            t.carry -= t.busy;
        }
    }

    fn end_segment(&mut self) {
        self.segment_ends = None;
        let (mut peak, mut est) = (0.0f64, 0.0f64);
        for t in &mut self.threads {
            peak = peak.max(t.start_peak + t.segment_peak);
            est = est.max(t.start_estimated + t.segment_estimated);
            t.segment_peak = 0.0;
            t.segment_estimated = 0.0;
            t.start_peak = 0.0;
            t.start_estimated = 0.0;
        }
        if est > 0.0 || peak > 0.0 {
            self.program.segments += 1;
            self.program.peak_units += peak;
            self.program.estimated_units += est;
        }
    }

    /// Closes the last windows and returns the report.
    pub fn finish(mut self) -> BandwidthReport {
        // One step to the window after the last carried busy unit: runs of identical windows
        // close in bulk (a huge final advance must not take one step per window).
        let w = self.cfg.window;
        let open = !self.edges.is_empty()
            || self.threads.iter().any(|t| {
                t.busy > 0 || t.faults > 0 || t.sync_events > 0 || t.values.iter().any(|&v| v > 0)
            });
        let carried = self
            .threads
            .iter()
            .map(|t| t.carry.div_ceil(w))
            .max()
            .unwrap_or(0);
        if open || carried > 0 {
            let target = self.window.saturating_add(1).saturating_add(carried);
            self.advance_to(target);
        }
        self.end_segment();
        let mut attribution: Vec<Attribution> = self
            .attribution
            .into_iter()
            .map(|((channel, pc), bytes)| Attribution { channel, pc, bytes })
            .collect();
        attribution.sort_unstable_by(|a, b| {
            (a.channel, std::cmp::Reverse(a.bytes), a.pc).cmp(&(
                b.channel,
                std::cmp::Reverse(b.bytes),
                b.pc,
            ))
        });
        let mut kept = Vec::new();
        for a in attribution {
            if kept
                .iter()
                .filter(|k: &&Attribution| k.channel == a.channel)
                .count()
                < ATTRIBUTION_TOP
            {
                kept.push(a);
            }
        }
        BandwidthReport {
            window: self.cfg.window,
            sample_period: self.cfg.sample_period,
            time_unit: self.time_unit,
            ghz: self.ghz,
            ipc: self.ipc,
            series: self.series,
            channels: self.channels,
            threads: self.threads.into_iter().map(|t| t.out).collect(),
            demand: self.demand,
            merge_dominance: self.merge_dominance,
            program: self.program,
            attribution: kept,
        }
    }
}
