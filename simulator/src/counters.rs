//! What the engines count, and the simulation report (`cachescope simulate --json`).
//!
//! The JSON schema is versioned by [`REPORT_SCHEMA`]; fields are only ever added within a
//! version. Maps are ordered, so the same trace and model give byte-identical JSON.

use serde::Serialize;

use cachescope_schema::{AccessKind, ThreadId, TimeUnit};

use crate::cachegrind::{CgConfig, CgCounts};
use crate::model::MachineModel;

/// Identifies the report format.
pub const REPORT_SCHEMA: &str = "cachescope.simulate/1";

/// Accesses by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AccessCounts {
    /// Loads.
    pub load: u64,
    /// Stores.
    pub store: u64,
    /// Atomic read-modify-writes.
    pub atomic_rmw: u64,
    /// Non-atomic read-then-write of the same bytes.
    pub modify: u64,
    /// Instruction fetches.
    pub fetch: u64,
}

impl AccessCounts {
    /// Counts one access of `kind`.
    #[inline]
    pub fn add(&mut self, kind: AccessKind) {
        match kind {
            AccessKind::Load => self.load += 1,
            AccessKind::Store => self.store += 1,
            AccessKind::AtomicRmw => self.atomic_rmw += 1,
            AccessKind::Modify => self.modify += 1,
            AccessKind::Fetch => self.fetch += 1,
        }
    }

    /// All accesses.
    pub fn total(&self) -> u64 {
        self.load + self.store + self.atomic_rmw + self.modify + self.fetch
    }

    fn merge(&mut self, o: &Self) {
        self.load += o.load;
        self.store += o.store;
        self.atomic_rmw += o.atomic_rmw;
        self.modify += o.modify;
        self.fetch += o.fetch;
    }
}

/// Why a line was not in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissClass {
    /// First access to the line by this cache.
    Compulsory,
    /// A fully associative LRU cache of the same size would have missed too.
    Capacity,
    /// A fully associative LRU cache of the same size would have hit.
    Conflict,
    /// Lost to another core's write, and the bytes now accessed were written since.
    CoherenceTrue,
    /// Lost to another core's write, but none of the bytes now accessed were written since.
    CoherenceFalse,
}

/// Misses by class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MissCounts {
    /// Compulsory (cold) misses.
    pub compulsory: u64,
    /// Capacity misses.
    pub capacity: u64,
    /// Conflict misses.
    pub conflict: u64,
    /// Coherence misses caused by true sharing.
    pub coherence_true: u64,
    /// Coherence misses caused by false sharing.
    pub coherence_false: u64,
}

impl MissCounts {
    /// Counts one miss.
    #[inline]
    pub fn add(&mut self, class: MissClass) {
        match class {
            MissClass::Compulsory => self.compulsory += 1,
            MissClass::Capacity => self.capacity += 1,
            MissClass::Conflict => self.conflict += 1,
            MissClass::CoherenceTrue => self.coherence_true += 1,
            MissClass::CoherenceFalse => self.coherence_false += 1,
        }
    }

    /// All misses.
    pub fn total(&self) -> u64 {
        self.compulsory + self.capacity + self.conflict + self.coherence_true + self.coherence_false
    }

    /// Adds `o`'s counts.
    pub(crate) fn merge(&mut self, o: &Self) {
        self.compulsory += o.compulsory;
        self.capacity += o.capacity;
        self.conflict += o.conflict;
        self.coherence_true += o.coherence_true;
        self.coherence_false += o.coherence_false;
    }
}

/// One core's view of one cache level (for shared levels: the accesses this core caused).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LevelCounters {
    /// Level name.
    pub level: String,
    /// Line accesses that reached this level, by kind (an access straddling two lines counts
    /// twice).
    pub accesses: AccessCounts,
    /// Hits.
    pub hits: u64,
    /// Misses by class.
    pub misses: MissCounts,
    /// Lines displaced by fills.
    pub evictions: u64,
    /// Dirty lines written to the level below.
    pub writebacks: u64,
    /// Lines removed because an inclusive level below evicted them.
    pub back_invalidations: u64,
}

impl LevelCounters {
    fn merge(&mut self, o: &Self) {
        self.accesses.merge(&o.accesses);
        self.hits += o.hits;
        self.misses.merge(&o.misses);
        self.evictions += o.evictions;
        self.writebacks += o.writebacks;
        self.back_invalidations += o.back_invalidations;
    }
}

/// One core.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CoreCounters {
    /// Core index.
    pub core: u32,
    /// Threads mapped to this core.
    pub threads: Vec<ThreadId>,
    /// Per level, from the core outwards.
    pub levels: Vec<LevelCounters>,
    /// Invalidations this core's writes sent to other cores' private caches.
    pub invalidations_sent: u64,
    /// Invalidations this core's private caches received.
    pub invalidations_received: u64,
    /// Writes that hit a shared (not owned) copy and had to gain ownership.
    pub upgrades: u64,
    /// Lines this core received from another core's private cache.
    pub cache_to_cache: u64,
}

/// Bytes moved over one data path in each direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PathBytes {
    /// Towards the core.
    pub read: u64,
    /// Away from the core.
    pub write: u64,
}

/// One data path, e.g. `core-L1`, `L1-L2`, `L2-mem` or `L1-L1` (cache to cache).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PathCounters {
    /// Path name.
    pub path: String,
    /// Bytes attributed to the core whose access caused them.
    pub per_core: Vec<PathBytes>,
    /// Sum over cores.
    pub total: PathBytes,
}

/// One thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ThreadCounters {
    /// Thread id.
    pub thread: ThreadId,
    /// Simulated core.
    pub core: u32,
    /// Memory accesses.
    pub accesses: u64,
    /// Time units the thread advanced (instructions or events).
    pub time_units: u64,
    /// Floating-point operations.
    pub flops: u64,
    /// Aligned time of its last event.
    pub end_time: u64,
}

/// Totals of one level over all cores.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LevelTotals {
    /// The summed counters.
    #[serde(flatten)]
    pub counters: LevelCounters,
    /// Misses / accesses.
    pub miss_rate: f64,
}

/// Cachegrind-identical counts (only with the `cachegrind` model).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CachegrindReport {
    /// The I1/D1/LL geometry.
    pub config: CgConfig,
    /// The nine events.
    pub events: CgCounts,
    /// Whether the trace has instruction fetches (traces imported from Lackey do). Traces of
    /// recorded programs have none, so their `Ir`, `I1mr` and `ILmr` are 0 because nothing
    /// was simulated, not because nothing was fetched or missed.
    pub fetches_in_trace: bool,
}

/// How the parallel engine simulated its quanta. Like every counter it depends only on the
/// trace, the model and the slack, never on the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QuantumCounts {
    /// Quanta simulated.
    pub total: u64,
    /// Quanta whose cores interacted through a line, simulated in lockstep (one event at a
    /// time, in the global order) instead of by the cores apart.
    pub lockstep: u64,
}

/// A simulation report.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    /// Report format identifier.
    pub schema: &'static str,
    /// `exact`, `parallel` or `cachegrind`.
    pub engine: String,
    /// The simulated machine.
    pub machine: MachineModel,
    /// Unit of all times.
    pub time_unit: TimeUnit,
    /// Per core.
    pub cores: Vec<CoreCounters>,
    /// Per level, summed over cores.
    pub levels: Vec<LevelTotals>,
    /// Bytes per data path.
    pub paths: Vec<PathCounters>,
    /// Per thread.
    pub threads: Vec<ThreadCounters>,
    /// Accesses the model cannot simulate (instruction fetches without an instruction
    /// cache).
    pub unsimulated_fetches: u64,
    /// The parallel engine's quantum in time units (only from that engine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slack: Option<u64>,
    /// How the parallel engine ran its quanta (only from that engine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quanta: Option<QuantumCounts>,
    /// Cachegrind's events, with the `cachegrind` model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cachegrind: Option<CachegrindReport>,
}

impl SimReport {
    /// Fills `levels` from `cores`.
    pub fn sum_levels(&mut self) {
        let n = self.cores.first().map_or(0, |c| c.levels.len());
        self.levels = (0..n)
            .map(|i| {
                let mut t = LevelCounters {
                    level: self.cores[0].levels[i].level.clone(),
                    ..LevelCounters::default()
                };
                for c in &self.cores {
                    t.merge(&c.levels[i]);
                }
                let acc = t.accesses.total();
                LevelTotals {
                    miss_rate: if acc == 0 {
                        0.0
                    } else {
                        t.misses.total() as f64 / acc as f64
                    },
                    counters: t,
                }
            })
            .collect();
    }
}
