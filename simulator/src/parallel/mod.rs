//! The parallel engine: deterministic bound-weave with one worker per simulated core.
//!
//! Time is cut into quanta of `slack` time units (aligned to multiples of `slack`). For each
//! quantum:
//!
//! 1. **bound**: every core's worker simulates that core's events of the quantum through its
//!    private levels alone (`core.rs`). Hits are final; what needs other cores or the shared
//!    levels becomes a request stamped with the event's time. Workers run in parallel, each
//!    owning its core; with fewer host threads than cores, host thread `h` runs cores
//!    `h, h + K, h + 2K, ...` in turn.
//! 2. **weave**: one thread applies all requests to the directory and the shared levels in
//!    (time, core) order (`weave.rs`); invalidations, downgrades and back-invalidations it
//!    causes reach the other cores' private caches before the next quantum.
//!
//! Nothing depends on the host: each core's bound phase is a function of its own state and
//! events, and the weave order is fixed, so any `threads` gives byte-identical reports.
//!
//! The deviation from the exact engine comes from the bound phase not seeing other cores'
//! actions of the same quantum: a core may hit on a line another core invalidated earlier in
//! the quantum, fill a set before a remote invalidation frees a way in it, or ask for MESI's
//! E one quantum late. With `slack = 1` a quantum is one time unit, and the engines agree
//! unless two cores touch the same line, or one core's fill meets another's invalidation or
//! back-invalidation in the same set, within one time unit.
//!
//! Supported models: at least one private level, write-back levels, no exclusive (victim)
//! levels; others are refused with [`ParallelError::Unsupported`].

mod core;
mod weave;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

use rustc_hash::FxHashMap;

use cachescope_schema::{ThreadId, TimeUnit, TimedEvent};

use crate::cache::Cache;
use crate::counters::{
    CoreCounters, LevelCounters, PathBytes, PathCounters, SimReport, ThreadCounters, REPORT_SCHEMA,
};
use crate::model::{Inclusion, MachineModel, Protocol, WritePolicy};
use crate::shadow::Classifier;

use self::core::CoreSim;
use self::weave::Weave;

/// The default quantum, in time units (chosen from the sweep in `docs/parallel-engine.md`).
pub const DEFAULT_SLACK: u64 = 1000;

/// Why the parallel engine cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParallelError {
    /// A slack of 0 time units.
    #[error("the slack must be at least 1 time unit")]
    ZeroSlack,
    /// Zero host threads.
    #[error("the parallel engine needs at least 1 host thread")]
    ZeroThreads,
    /// A model feature the engine does not simulate.
    #[error("the parallel engine does not support {0}; use --engine exact")]
    Unsupported(String),
}

/// How the parallel engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParallelConfig {
    /// Quantum length in time units: a core sees other cores' actions at most this late.
    pub slack: u64,
    /// Host threads (at most one per simulated core is used). Never changes the results.
    pub threads: usize,
}

impl Default for ParallelConfig {
    fn default() -> Self {
        ParallelConfig {
            slack: DEFAULT_SLACK,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// Sizes and policies both phases need.
#[derive(Debug, Clone)]
pub(crate) struct Geometry {
    /// Private levels.
    p: usize,
    /// All levels.
    n: usize,
    shift: u32,
    line_size: u64,
    /// Data paths (the last one is cache to cache).
    paths: usize,
    access_cost: u64,
    inclusion: Vec<Inclusion>,
}

/// Thread → core, looked up by every worker for every event of a quantum (each worker scans
/// the quantum's events for its cores' threads, so that the main thread does no per-event
/// work): a dense table when thread ids are small, else a hash map.
pub(crate) enum ThreadTable {
    Dense(Vec<u8>),
    Sparse(FxHashMap<ThreadId, u8>),
}

/// Largest thread id kept in a dense table.
const DENSE_THREADS: u32 = 1 << 16;

impl ThreadTable {
    fn new(core_of: &FxHashMap<ThreadId, usize>) -> Self {
        let max = core_of.keys().copied().max().unwrap_or(0);
        if max < DENSE_THREADS {
            let mut v = vec![u8::MAX; max as usize + 1];
            for (&t, &c) in core_of {
                v[t as usize] = c as u8;
            }
            ThreadTable::Dense(v)
        } else {
            ThreadTable::Sparse(core_of.iter().map(|(&t, &c)| (t, c as u8)).collect())
        }
    }

    /// The core of thread `t`, if placed.
    #[inline]
    pub(crate) fn core(&self, t: ThreadId) -> Option<usize> {
        let c = match self {
            ThreadTable::Dense(v) => v.get(t as usize).copied(),
            ThreadTable::Sparse(m) => m.get(&t).copied(),
        };
        c.filter(|&c| c != u8::MAX).map(usize::from)
    }
}

/// Events read from an iterator per batch (whole quanta; a quantum longer than this is kept
/// whole).
const BATCH: usize = 1 << 16;

/// One cache instance and its miss classifier.
pub(crate) struct Unit {
    cache: Cache,
    class: Classifier,
}

/// A barrier for a fixed number of threads that spins before yielding: quanta are short,
/// and parking a thread costs more than most bound phases.
struct SpinBarrier {
    n: usize,
    count: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    fn new(n: usize) -> Self {
        SpinBarrier {
            n,
            count: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    fn wait(&self) {
        let gen = self.generation.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.count.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == gen {
            if spins < 2000 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                // Give the core to the other threads (the machine may have fewer cores than
                // threads want).
                std::thread::yield_now();
            }
        }
    }
}

/// Locks a mutex; a poisoned lock means a worker panicked, and that panic is re-raised by
/// the thread scope, so the data is never used afterwards.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The parallel engine.
pub struct ParallelEngine {
    model: MachineModel,
    geo: Geometry,
    cfg: ParallelConfig,
    cores: Vec<Mutex<CoreSim>>,
    weave: RwLock<Weave>,
    table: ThreadTable,
    time_unit: TimeUnit,
}

impl ParallelEngine {
    /// An engine for `model` with the given thread placement.
    pub fn new(
        model: &MachineModel,
        placement: &BTreeMap<ThreadId, u32>,
        unit: TimeUnit,
        cfg: ParallelConfig,
    ) -> Result<Self, ParallelError> {
        if cfg.slack == 0 {
            return Err(ParallelError::ZeroSlack);
        }
        if cfg.threads == 0 {
            return Err(ParallelError::ZeroThreads);
        }
        let m = model.clone();
        let p = m.private_levels();
        let n = m.levels.len();
        if p == 0 {
            return Err(ParallelError::Unsupported(
                "models without a private level".into(),
            ));
        }
        if p > 32 {
            return Err(ParallelError::Unsupported(
                "more than 32 private levels".into(),
            ));
        }
        for l in &m.levels {
            if l.write == WritePolicy::Through {
                return Err(ParallelError::Unsupported(format!(
                    "write-through levels ({})",
                    l.name
                )));
            }
            if l.inclusion == Inclusion::Exclusive {
                return Err(ParallelError::Unsupported(format!(
                    "exclusive levels ({})",
                    l.name
                )));
            }
        }
        let ls = m.line_size;
        let ncores = m.cores as usize;
        let mut path_names = m.path_names();
        path_names.truncate(n + 2);
        let geo = Geometry {
            p,
            n,
            shift: ls.trailing_zeros(),
            line_size: ls as u64,
            paths: path_names.len(),
            access_cost: unit.access_cost(),
            inclusion: m.levels.iter().map(|l| l.inclusion).collect(),
        };
        // The same seeds as the exact engine's, so random replacement agrees.
        let seed = |i: usize, c: usize| m.seed ^ ((i as u64) << 32) ^ c as u64;
        let make_unit = |i: usize, c: usize| Unit {
            cache: Cache::new(&m.levels[i], ls, seed(i, c)),
            class: Classifier::new(m.levels[i].lines(ls) as usize),
        };
        let mut cores: Vec<CoreSim> = (0..ncores)
            .map(|c| {
                let lc = m
                    .levels
                    .iter()
                    .map(|l| LevelCounters {
                        level: l.name.clone(),
                        ..LevelCounters::default()
                    })
                    .collect();
                CoreSim::new(
                    c,
                    geo.clone(),
                    (0..p).map(|i| make_unit(i, c)).collect(),
                    lc,
                )
            })
            .collect();
        let mut core_of = FxHashMap::default();
        for (&t, &c) in placement {
            let c = c as usize;
            if c >= ncores {
                return Err(ParallelError::Unsupported(format!(
                    "thread {t} on core {c} of {ncores}"
                )));
            }
            core_of.insert(t, c);
            cores[c].add_thread(ThreadCounters {
                thread: t,
                core: c as u32,
                ..ThreadCounters::default()
            });
        }
        let shared = (p..n).map(|i| make_unit(i, 0)).collect();
        Ok(ParallelEngine {
            weave: RwLock::new(Weave::new(
                geo.clone(),
                m.coherence == Protocol::Mesi,
                shared,
            )),
            cores: cores.into_iter().map(Mutex::new).collect(),
            geo,
            cfg,
            table: ThreadTable::new(&core_of),
            time_unit: unit,
            model: m,
        })
    }

    /// Simulates `events`, which must come in the trace's global order (as from
    /// `TraceFile::merged`). Stops at the first error. Events are read a batch of whole quanta
    /// at a time, so memory stays bounded.
    pub fn run<E, I>(&mut self, events: I) -> Result<(), E>
    where
        I: IntoIterator<Item = Result<TimedEvent, E>>,
    {
        let slack = self.cfg.slack;
        let mut events = events.into_iter();
        let mut batch: Vec<TimedEvent> = Vec::with_capacity(BATCH);
        let mut pending: Option<TimedEvent> = None;
        loop {
            batch.clear();
            if let Some(e) = pending.take() {
                batch.push(e);
            }
            // Whole quanta only: a batch ends where a quantum ends.
            for e in events.by_ref() {
                let e = e?;
                if batch.len() >= BATCH
                    && batch
                        .last()
                        .is_some_and(|l| l.time / slack != e.time / slack)
                {
                    pending = Some(e);
                    break;
                }
                batch.push(e);
            }
            if batch.is_empty() {
                return Ok(());
            }
            self.run_slice(&batch);
            if pending.is_none() {
                return Ok(());
            }
        }
    }

    /// Simulates `events`, in the trace's global order, already in memory. Calls may follow
    /// one another (each ends with a complete quantum if the next one starts a new quantum).
    pub fn run_slice(&mut self, events: &[TimedEvent]) {
        let k = self.cfg.threads.min(self.cores.len()).max(1);
        let barrier = SpinBarrier::new(k);
        let done = AtomicBool::new(false);
        let range = (AtomicUsize::new(0), AtomicUsize::new(0));
        let this = &*self;
        std::thread::scope(|s| {
            for h in 1..k {
                let (barrier, done, range) = (&barrier, &done, &range);
                s.spawn(move || loop {
                    barrier.wait();
                    if done.load(Ordering::Acquire) {
                        break;
                    }
                    let (lo, hi) = (
                        range.0.load(Ordering::Acquire),
                        range.1.load(Ordering::Acquire),
                    );
                    this.bound_share(h, k, &events[lo..hi]);
                    barrier.wait();
                });
            }
            let slack = this.cfg.slack;
            let mut lo = 0;
            while lo < events.len() {
                // Events come in time order: the quantum ends at the first event of the next.
                let q = events[lo].time / slack;
                let hi = lo + events[lo..].partition_point(|e| e.time / slack == q);
                range.0.store(lo, Ordering::Release);
                range.1.store(hi, Ordering::Release);
                if k > 1 {
                    barrier.wait();
                }
                this.bound_share(0, k, &events[lo..hi]);
                if k > 1 {
                    barrier.wait();
                }
                this.weave();
                lo = hi;
            }
            done.store(true, Ordering::Release);
            if k > 1 {
                barrier.wait();
            }
        });
    }

    /// The bound phase of host thread `h` of `k`: cores `h, h + k, ...`.
    fn bound_share(&self, h: usize, k: usize, events: &[TimedEvent]) {
        let weave = self.weave.read().unwrap_or_else(PoisonError::into_inner);
        for c in (h..self.cores.len()).step_by(k) {
            lock(&self.cores[c]).bound(events, &self.table, &weave.written);
        }
    }

    fn weave(&self) {
        let mut weave = self.weave.write().unwrap_or_else(PoisonError::into_inner);
        let mut guards: Vec<MutexGuard<'_, CoreSim>> = self.cores.iter().map(lock).collect();
        let mut cores: Vec<&mut CoreSim> = guards.iter_mut().map(|g| &mut **g).collect();
        weave.run(&mut cores);
    }

    /// The report so far.
    pub fn report(&self) -> SimReport {
        let guards: Vec<MutexGuard<'_, CoreSim>> = self.cores.iter().map(lock).collect();
        let names = {
            let mut v = self.model.path_names();
            v.truncate(self.geo.paths);
            v
        };
        let paths = names
            .into_iter()
            .enumerate()
            .map(|(j, path)| {
                let per_core: Vec<PathBytes> = guards.iter().map(|g| g.paths[j]).collect();
                let total = per_core
                    .iter()
                    .fold(PathBytes::default(), |t, b| PathBytes {
                        read: t.read + b.read,
                        write: t.write + b.write,
                    });
                PathCounters {
                    path,
                    per_core,
                    total,
                }
            })
            .collect();
        let cores = guards
            .iter()
            .map(|g| CoreCounters {
                core: g.core as u32,
                threads: g.threads.iter().map(|t| t.thread).collect(),
                levels: g.lc.clone(),
                invalidations_sent: g.invalidations_sent,
                invalidations_received: g.invalidations_received,
                upgrades: g.upgrades,
                cache_to_cache: g.cache_to_cache,
            })
            .collect();
        let mut threads: Vec<ThreadCounters> = guards
            .iter()
            .flat_map(|g| g.threads.iter().cloned())
            .collect();
        threads.sort_by_key(|t| t.thread);
        let mut r = SimReport {
            schema: REPORT_SCHEMA,
            engine: "parallel".into(),
            machine: self.model.clone(),
            time_unit: self.time_unit,
            cores,
            levels: Vec::new(),
            paths,
            threads,
            unsimulated_fetches: guards.iter().map(|g| g.unsimulated_fetches).sum(),
            slack: Some(self.cfg.slack),
            cachegrind: None,
        };
        r.sum_levels();
        r
    }
}
