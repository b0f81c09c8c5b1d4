//! Bandwidth timeline (thesis §4.3–4.4): bytes per thread per data path per window of `W`
//! time units, kept online as histograms, with the dominant limit of every window.
//!
//! * [`channels`]: which series (path × direction, plus FLOPs as the ALU "path") a machine
//!   moves, and which limits (per core, or summed over cores at a merge point) apply to them;
//! * `timeline`: the online aggregation driven alongside an engine, event by event, through
//!   [`PathByteSource`] (the exact engine, or the parallel engine's per-event byte ledger);
//! * this file: the configuration and the report the analysis stage turns into curves,
//!   breakdowns and runtime estimates.
//!
//! Windows are tumbling windows of the global (aligned) clock: window `w` covers time units
//! `[w·W, (w+1)·W)`. The thesis's sliding average `r̄_t = 1/W · Σ_{w<W} r_{t−w}` sampled every `W`
//! units equals the bytes of one window divided by `W`, so each window is recorded in the
//! histograms with weight `W` time units: the area under a curve is exactly the bytes moved.

mod channels;
mod timeline;

pub use channels::{channels, Channel, ChannelError, Direction, Scope, Series};
pub use timeline::BandwidthTimeline;

use cachescope_schema::{CodePos, ThreadId, TimeUnit};

use crate::counters::PathBytes;
use hdrhistogram::Histogram;
use serde::Serialize;

/// Default smoothing window, time units (thesis §4.3.1: about a memory latency).
pub const DEFAULT_WINDOW: u64 = 200;

/// Default: one access in this many is sampled for source attribution.
pub const DEFAULT_SAMPLE_PERIOD: u32 = 16;

/// Code positions (instructions) kept per channel for source attribution; the analysis merges
/// them by source line.
pub const ATTRIBUTION_TOP: usize = 64;

/// What the timeline reads from an engine after each event: the bytes each core has moved so
/// far over each data path. Both engines give the same values after every event (the parallel
/// engine replays its per-event byte log in the global order), so their timelines agree.
pub trait PathByteSource {
    /// Bytes `core` has moved so far over data path `path` (index into
    /// [`crate::MachineModel::path_names`]); zero for an unknown path or core.
    fn core_path_bytes(&self, core: usize, path: usize) -> PathBytes;
    /// A count that changes whenever bytes move on a path other than the first (any core):
    /// when it has not changed, an access moved bytes only between its core and the first
    /// level.
    fn beyond_first_moves(&self) -> u64;
}

impl PathByteSource for crate::exact::ExactEngine {
    #[inline]
    fn core_path_bytes(&self, core: usize, path: usize) -> PathBytes {
        crate::exact::ExactEngine::core_path_bytes(self, core, path)
    }

    #[inline]
    fn beyond_first_moves(&self) -> u64 {
        crate::exact::ExactEngine::beyond_first_moves(self)
    }
}

/// How the timeline aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BandwidthConfig {
    /// Window length W in time units (≥ 1).
    pub window: u64,
    /// Every `sample_period`-th access of a thread is sampled for source attribution (≥ 1).
    pub sample_period: u32,
}

impl Default for BandwidthConfig {
    fn default() -> Self {
        BandwidthConfig {
            window: DEFAULT_WINDOW,
            sample_period: DEFAULT_SAMPLE_PERIOD,
        }
    }
}

/// A bandwidth curve in the thesis's online form: how many time units each window value
/// (bytes, or FLOPs, per window of W units) was required.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    /// Exact total moved (bytes or FLOPs): the area under the curve.
    pub volume: u64,
    /// Time units covered (windows × W).
    pub units: u64,
    /// Value per window → time units, 3 significant digits (values below 2048 exact).
    #[serde(skip)]
    pub histogram: Histogram<u64>,
}

impl Curve {
    /// An empty curve.
    pub fn new() -> Self {
        Curve {
            volume: 0,
            units: 0,
            histogram: new_histogram(),
        }
    }

    /// Records that `value` (per window) was required for `units` time units; the caller
    /// adds to `volume`.
    pub fn record(&mut self, value: u64, units: u64) {
        // Auto-resizing histograms take any u64 below 2^63; larger window values would
        // need more than 2^63 bytes in W units.
        let _ = self.histogram.record_n(value, units);
        self.units = self.units.saturating_add(units);
    }

    /// `(value per window, time units)` pairs in ascending value order; the value is the
    /// highest value of its histogram bucket (exact below 2048).
    pub fn steps(&self) -> Vec<(u64, u64)> {
        self.histogram
            .iter_recorded()
            .map(|v| {
                (
                    self.histogram.highest_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                )
            })
            .collect()
    }
}

impl Default for Curve {
    fn default() -> Self {
        Curve::new()
    }
}

fn new_histogram() -> Histogram<u64> {
    // 3 significant digits: 2048 exact sub-buckets, ~100 KiB per histogram at most.
    Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits are valid"))
}

/// One limit's share of a thread's time.
#[derive(Debug, Clone, Serialize)]
pub struct Dominance {
    /// Windows in which this limit was the dominant bottleneck.
    pub windows: u64,
    /// Estimated time of those windows (time units at peak rate).
    pub units: f64,
    /// Time those windows add over running at peak.
    pub added_units: f64,
    /// The limited value (own, or summed over cores for a merge point) in dominant windows:
    /// the thesis's dominance histogram Δt_b^Dom.
    pub curve: Curve,
}

/// One thread's bandwidth timeline.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadBandwidth {
    /// Thread id.
    pub thread: ThreadId,
    /// Simulated core.
    pub core: u32,
    /// Windows in which the thread ran.
    pub windows: u64,
    /// Time units the thread executed (at peak, no bandwidth limit).
    pub busy_units: u64,
    /// Busy time in windows without any bottleneck.
    pub peak_units: u64,
    /// Estimated time with every limit applied (Σ over windows of the slowest of peak and
    /// every limit, plus page faults).
    pub estimated_units: f64,
    /// First touches of 4 KiB pages (page faults) by this thread.
    pub faults: u64,
    /// Time they cost (the model's `page_fault_ns` each), included in `estimated_units`.
    pub fault_units: f64,
    /// Barrier episodes this thread passed and parallel regions it started (counted only
    /// when the model gives their cost).
    pub sync_events: u64,
    /// Time they cost (the model's `barrier_ns` and `region_ns`), included in
    /// `estimated_units`.
    pub sync_units: f64,
    /// Per series (same order as [`BandwidthReport::series`]).
    pub curves: Vec<Curve>,
    /// Per channel (same order as [`BandwidthReport::channels`]).
    pub dominance: Vec<Dominance>,
}

/// Code positions that moved the most bytes over one channel in windows where it was dominant.
#[derive(Debug, Clone, Serialize)]
pub struct Attribution {
    /// Channel index.
    pub channel: usize,
    /// Code position.
    pub pc: CodePos,
    /// Estimated bytes (sampled accesses × sample period).
    pub bytes: u64,
}

/// Runtime of the whole program: per barrier segment the slowest thread, summed.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ProgramEstimate {
    /// Barrier segments.
    pub segments: u64,
    /// At peak, without any bandwidth limit.
    pub peak_units: f64,
    /// With every limit applied.
    pub estimated_units: f64,
}

/// Everything the timeline collected.
#[derive(Debug, Clone, Serialize)]
pub struct BandwidthReport {
    /// Window length W, time units.
    pub window: u64,
    /// Sample period of source attribution.
    pub sample_period: u32,
    /// Unit of every time in this report.
    pub time_unit: TimeUnit,
    /// Peak clock, GHz.
    pub ghz: f64,
    /// Peak instructions (time units) per cycle.
    pub ipc: f64,
    /// The series every thread's curves are kept for.
    pub series: Vec<Series>,
    /// The limits checked in every window.
    pub channels: Vec<Channel>,
    /// Per thread, ascending by id.
    pub threads: Vec<ThreadBandwidth>,
    /// Per series, summed over threads per window (what a merge point sees).
    pub demand: Vec<Curve>,
    /// Per channel (merge points only; empty curves for per-core limits): the summed demand in
    /// windows where the limit dominated at least one thread.
    pub merge_dominance: Vec<Curve>,
    /// Whole-program runtime.
    pub program: ProgramEstimate,
    /// Top code positions per channel.
    pub attribution: Vec<Attribution>,
}

impl BandwidthReport {
    /// Seconds per time unit at the model's peak.
    pub fn seconds_per_unit(&self) -> f64 {
        1.0 / (self.ghz * 1e9 * self.ipc)
    }
}
