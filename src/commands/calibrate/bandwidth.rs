//! `cachescope calibrate --bandwidth`: measures this machine's limits the way thesis §4.4.4 did
//! for Table 4.3 ("the limitations were determined with micro-benchmarks") and writes them as
//! the model's `[bandwidth]` section.
//!
//! The benchmark (`calibrate/bandwidth_bench.c`, embedded) is compiled with `gcc -O2 -pthread
//! -fno-tree-loop-distribute-patterns` and run once with one task per figure:
//!
//! * per data path `core-L1`, `L1-L2`, …, `<last>-mem`: one pinned core streams 16-byte SSE2
//!   loads (read) or stores (write) over a working set that lives in the lower level of the
//!   path: half of L1 for `core-L1`; for `Li-Lj` the best of a ladder of working sets, each
//!   twice the one before, from 4 × Li (at most ¾ of Lj) to half of Lj (a VM's last level can
//!   hold less than its reported size); for `<last>-mem` 4 × the last level (at least 64 MiB);
//! * the memory merge point: the same streams on one pinned thread per usable CPU at once →
//!   `total_read_gbs` / `total_write_gbs` of `<last>-mem`;
//! * reads and writes sharing the memory bus: a copy stream (16-byte loads from A, stores to
//!   B, each half the memory working set) on one core and on all → `combined_gbs` /
//!   `total_combined_gbs` of `<last>-mem`, counted like the simulator counts a copy: loaded +
//!   2 × stored bytes (the stores' RFO reads);
//! * `barrier_ns` and `region_ns` (`calibrate/sync_bench.c`, gcc -fopenmp, libgomp, one
//!   thread per usable CPU): an OpenMP barrier episode, and an empty parallel region less
//!   a barrier (its end is one);
//! * `page_fault_ns`: first writes to fresh anonymous memory (one byte per 4 KiB page,
//!   transparent huge pages off), per page;
//! * the cache-to-cache path `<last private>-<same>`: two pinned threads hand a 16 KiB block
//!   back and forth (one stores it, the other loads it) → `read_gbs`, from the loading time;
//! * `ghz` from a dependent chain of register adds (1 cycle each); `ipc_throughput_loop` (for
//!   reference) from an L1-resident load/load/add/mul/store loop written in assembly (8
//!   instructions per element); `flops_per_cycle` from independent SSE2 `addpd` and `mulpd`
//!   chains.
//!
//! The model's `ipc` is measured separately ([`super::ipc`]): the median IPC of seven compiled
//! kernels, instructions as the tracer counts them over native cycles.
//!
//! Every figure is the best of `--repetitions` timed repetitions of about 40 ms (other load on
//! the machine only ever slows a run down; for the page-fault cost, the lowest); the
//! repetitions of all benchmark tasks are interleaved.
//! docs/calibrate.md says what each figure is and why it is measured that way.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use cachescope_sim::model::{BandwidthModel, PathLimit};
use cachescope_sim::MachineModel;
use serde::Serialize;

use super::ipc::{self, ConcurrentIpc, IpcKernels};
use super::{compile, cpuinfo_ghz, median, run_bench, Frequency};
use crate::cli::CalibrateArgs;

/// The benchmark's C source.
const BENCH_SOURCE: &str = include_str!("../../../calibrate/bandwidth_bench.c");
/// The OpenMP synchronization benchmark's C source, and how it is compiled (libgomp).
const SYNC_SOURCE: &str = include_str!("../../../calibrate/sync_bench.c");
const SYNC_FLAGS: [&str; 3] = ["-O2", "-fopenmp", "-Wall"];
/// How it is compiled: the loops must stay loops (no memset calls).
const GCC_FLAGS: [&str; 4] = [
    "-O2",
    "-pthread",
    "-fno-tree-loop-distribute-patterns",
    "-Wall",
];
/// Bytes per load or store of the stream kernels (SSE2, what gcc -O2 vectorizes to on x86-64).
pub const ACCESS_BYTES: u32 = 16;
/// Length of one timed repetition.
const TARGET_MS: u64 = 40;
/// The same with `--quick`.
const QUICK_TARGET_MS: u64 = 20;
/// Repetitions with `--quick` (at most).
const QUICK_REPETITIONS: u32 = 5;
/// The block handed from core to core.
const C2C_BLOCK: u64 = 16 << 10;
/// Smallest working set of the memory streams.
const MEM_MIN: u64 = 64 << 20;
/// Largest working set of the memory streams (and of all threads together).
const MEM_MAX: u64 = 2 << 30;
/// Fresh memory touched per page-fault repetition (~45 ms at 2.8 µs per page).
const FAULT_BYTES: u64 = 64 << 20;
/// The page the fault cost is given for.
pub const PAGE_BYTES: u64 = 4096;

/// Best, median and all samples of one figure.
#[derive(Debug, Clone, Serialize)]
pub struct Stat {
    /// The best sample, the figure used: the largest for rates, the smallest for costs.
    pub best: f64,
    /// The median sample, for the spread.
    pub median: f64,
    /// One per repetition, in the order measured.
    pub samples: Vec<f64>,
}

impl Stat {
    /// A rate: the best sample is the largest (interference only lowers a rate).
    pub fn of(samples: Vec<f64>) -> Option<Stat> {
        Stat::with_best(samples, f64::max)
    }

    /// A cost: the best sample is the smallest (interference only adds to a cost).
    pub fn of_cost(samples: Vec<f64>) -> Option<Stat> {
        Stat::with_best(samples, f64::min)
    }

    fn with_best(samples: Vec<f64>, better: fn(f64, f64) -> f64) -> Option<Stat> {
        let samples: Vec<f64> = samples
            .into_iter()
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect();
        let first = *samples.first()?;
        Some(Stat {
            best: samples.iter().copied().fold(first, better),
            median: median(samples.clone()),
            samples,
        })
    }
}

/// One stream measurement.
#[derive(Debug, Clone, Serialize)]
pub struct StreamMeasurement {
    /// Data path it is for.
    pub path: String,
    /// `read` (loads), `write` (stores) or `copy` (loads from A, stores to B).
    pub direction: &'static str,
    /// Threads, one per CPU.
    pub threads: u32,
    /// Working set of each thread, bytes (copy: A and B together, half each).
    pub bytes_per_thread: u64,
    /// GB/s, all threads together: read and write, 10⁹ bytes loaded or stored per second;
    /// copy, 10⁹ bytes the simulator counts on the path per second for the same copy: bytes
    /// loaded + 2 × bytes stored (each stored line is first read for ownership).
    pub gbs: Stat,
    /// Copy only: 10⁹ bytes the cores loaded and stored per second (no RFO), for reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core_gbs: Option<Stat>,
}

/// The page-fault measurement.
#[derive(Debug, Clone, Serialize)]
pub struct PageFault {
    /// Fresh anonymous memory mapped and touched per repetition, bytes.
    pub bytes: u64,
    /// 4 KiB pages touched per repetition.
    pub pages: u64,
    /// How the memory is touched.
    pub method: &'static str,
    /// Nanoseconds per 4 KiB page (best: the lowest, the `page_fault_ns` written).
    pub ns_per_page: Stat,
}

/// The OpenMP synchronization measurement (`calibrate/sync_bench.c`).
#[derive(Debug, Clone, Serialize)]
pub struct SyncCost {
    /// Threads of the team (one per usable CPU).
    pub threads: u32,
    /// Nanoseconds per barrier episode (best: the lowest, the model's `barrier_ns`).
    pub barrier_ns: Stat,
    /// Nanoseconds per empty parallel region: fork, the barrier at its end, join (best: the
    /// lowest).
    pub empty_region_ns: Stat,
    /// The model's `region_ns`: an empty region's best less a barrier's (a region's end is a
    /// barrier, which the trace records and the estimate charges on its own); at least 1 ns.
    pub region_ns: f64,
}

/// The cache-to-cache measurement.
#[derive(Debug, Clone, Serialize)]
pub struct CacheToCache {
    /// Data path it is for (`<last private>-<same>`).
    pub path: String,
    /// Bytes handed over per round.
    pub block_bytes: u64,
    /// The two CPUs.
    pub cpus: [u32; 2],
    /// Bytes per second the loading core pulled out of the other core's cache (its loading
    /// time only): the `read_gbs` written.
    pub read_gbs: Stat,
    /// Bytes per second over whole rounds (the storing core's turn and the hand-overs too).
    pub round_gbs: Stat,
}

/// The core clock.
#[derive(Debug, Clone, Serialize)]
pub struct Clock {
    /// The clock used: the best measured one.
    pub ghz: f64,
    /// Measured with a dependent chain of register adds, GHz.
    pub measured: Stat,
    /// /proc/cpuinfo's "cpu MHz" of the first CPU, GHz (often the nominal clock on VMs).
    pub cpuinfo_ghz: Option<f64>,
}

/// Per-cycle throughput of the core kernels (each relative to the clock measured right
/// around it).
#[derive(Debug, Clone, Serialize)]
pub struct Kernels {
    /// Instructions per cycle of the L1-resident load/load/add/mul/store loop in assembly.
    pub ipc_throughput_loop: Stat,
    /// Instructions per cycle of 8 independent chains of register adds.
    pub ipc_independent_adds: Stat,
    /// Flops per cycle of independent SSE2 addpd and mulpd chains.
    pub flops_per_cycle: Stat,
}

/// Everything `calibrate --bandwidth` measured.
#[derive(Debug, Clone, Serialize)]
pub struct BandwidthCalibration {
    /// The base model (its levels give the working sets and path names).
    pub base_model: String,
    /// Timed repetitions per figure.
    pub repetitions: u32,
    /// Target length of one repetition, ms.
    pub repetition_ms: u64,
    /// Whether `--quick` shortened the runs.
    pub quick: bool,
    /// How the repetitions are combined.
    pub statistic: &'static str,
    /// Bytes per load or store of the stream kernels.
    pub access_bytes: u32,
    /// CPUs the benchmark threads were pinned to.
    pub cpus: Vec<u32>,
    /// Core clock, GHz (the model's `ghz`).
    pub ghz: f64,
    /// IPC of ordinary compiled code, in the tracer's instruction count (the model's `ipc`):
    /// the median of the compiled kernels (`ipc_kernels`).
    pub ipc: f64,
    /// IPC of the L1-resident load/load/add/mul/store loop in assembly, for reference (the
    /// `ipc` of earlier versions).
    pub ipc_throughput_loop: f64,
    /// IPC of independent register adds, for reference.
    pub ipc_independent_adds: f64,
    /// Flops per cycle (the model's `flops_per_cycle`).
    pub flops_per_cycle: f64,
    /// Cost of the first touch of a 4 KiB page, ns (the model's `page_fault_ns`).
    pub page_fault_ns: f64,
    /// Clock details.
    pub clock: Clock,
    /// The compiled kernels behind `ipc`.
    pub ipc_kernels: IpcKernels,
    /// Instructions per cycle of all CPUs together (the model's `ipc_total`): the kernels on
    /// every CPU at once (None with one CPU).
    pub ipc_total: Option<f64>,
    /// The kernels on every CPU at once, behind `ipc_total`.
    pub ipc_concurrent: Option<ConcurrentIpc>,
    /// Per-cycle details of the assembly kernels.
    pub kernels: Kernels,
    /// Page-fault details.
    pub page_fault: PageFault,
    /// OpenMP barrier and region costs (None: not measured, see `notes`).
    pub sync: Option<SyncCost>,
    /// The stream measurements.
    pub streams: Vec<StreamMeasurement>,
    /// The cache-to-cache measurement (None: not measured, see `notes`).
    pub cache_to_cache: Option<CacheToCache>,
    /// The limits written, by path.
    pub paths: BTreeMap<String, PathLimit>,
    /// The measured paths from the core outwards (the order of the summary's rows).
    #[serde(skip)]
    pub path_order: Vec<String>,
    /// Paths of the base model's bandwidth section not measured here (kept as they were).
    pub kept_from_base: Vec<String>,
    /// What could not be measured or does not match, and why.
    pub notes: Vec<String>,
}

impl BandwidthCalibration {
    /// The measured clock, for τ.
    pub fn frequency(&self) -> Frequency {
        Frequency {
            ghz: self.ghz,
            source: format!(
                "calibrate --bandwidth: dependent add chain, best of {}",
                self.repetitions
            ),
        }
    }
}

/// What a stream does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
    Copy,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Copy => "copy",
        }
    }
}

/// One task of the benchmark.
#[derive(Debug, Clone)]
enum Task {
    Clock,
    Ipc,
    Adds,
    Flops,
    Stream {
        path: String,
        op: Op,
        bytes: u64,
        threads: u32,
    },
    C2c {
        path: String,
        bytes: u64,
    },
    Fault {
        bytes: u64,
    },
}

impl Task {
    fn arg(&self) -> String {
        match self {
            Task::Clock => "clock".into(),
            Task::Ipc => "ipc".into(),
            Task::Adds => "adds".into(),
            Task::Flops => "flops".into(),
            Task::Stream {
                op, bytes, threads, ..
            } => format!("{}:{bytes}:{threads}", op.name()),
            Task::C2c { bytes, .. } => format!("c2c:{bytes}"),
            Task::Fault { bytes } => format!("fault:{bytes}"),
        }
    }

    fn name(&self) -> String {
        match self {
            Task::Stream {
                path, op, threads, ..
            } => format!(
                "{path} {} ({threads} thread{})",
                op.name(),
                if *threads == 1 { "" } else { "s" }
            ),
            Task::C2c { path, .. } => format!("{path} cache-to-cache"),
            Task::Fault { .. } => "page fault".into(),
            other => other.arg(),
        }
    }
}

/// Rounds down to a multiple of 128 bytes (the kernels' unit), at least 128.
fn unit(bytes: u64) -> u64 {
    (bytes / 128).max(1) * 128
}

/// Rounds down to a multiple of 256 bytes (a copy's two halves in the kernels' unit).
fn unit2(bytes: u64) -> u64 {
    (bytes / 256).max(1) * 256
}

/// "16 KiB", "128 MiB".
fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

/// CPUs this process may run on (/proc/self/status `Cpus_allowed_list`), else the available
/// parallelism.
fn usable_cpus() -> u32 {
    let parsed = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let list = s
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
                .trim()
                .to_string();
            let mut n = 0u32;
            for part in list.split(',').filter(|p| !p.is_empty()) {
                n += match part.split_once('-') {
                    Some((a, b)) => b.parse::<u32>().ok()? - a.parse::<u32>().ok()? + 1,
                    None => part.parse::<u32>().map(|_| 1).ok()?,
                };
            }
            Some(n)
        })
        .filter(|n| *n > 0);
    parsed.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
}

/// MemAvailable of /proc/meminfo, bytes.
fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The tasks for `base`'s hierarchy on a machine with `cpus` usable CPUs.
fn plan(base: &MachineModel, cpus: u32, notes: &mut Vec<String>) -> Vec<Task> {
    let levels = &base.levels;
    let mut tasks = vec![Task::Clock, Task::Ipc, Task::Adds, Task::Flops];
    let stream = |tasks: &mut Vec<Task>, path: &str, bytes: u64, threads: u32| {
        for op in [Op::Read, Op::Write] {
            tasks.push(Task::Stream {
                path: path.to_string(),
                op,
                bytes,
                threads,
            });
        }
    };
    stream(
        &mut tasks,
        &format!("core-{}", levels[0].name),
        unit(levels[0].size / 2),
        1,
    );
    for pair in levels.windows(2) {
        let (upper, lower) = (&pair[0], &pair[1]);
        // A ladder of working sets from 4 x Li (at most 3/4 of Lj) up to half of Lj, each
        // twice the one before (at most eight): the path's figure is the best of them. A
        // level can hold less than its size says: a VM reports its host's last level (260 MiB
        // on one), of which the guest keeps far less, and half of it streamed at memory speed
        // (9.7 GB/s, where 32 MiB gave 28).
        let top = (lower.size / 2).max((4 * upper.size).min(lower.size / 4 * 3));
        let mut bytes = (4 * upper.size).min(lower.size / 4 * 3).max(top >> 7);
        loop {
            stream(
                &mut tasks,
                &format!("{}-{}", upper.name, lower.name),
                unit(bytes),
                1,
            );
            if bytes >= top {
                break;
            }
            bytes = (bytes * 2).min(top);
        }
    }
    let last = &levels[levels.len() - 1];
    let mem_path = format!("{}-mem", last.name);
    let wanted = (4 * last.size).max(MEM_MIN);
    // Six memory tasks keep their buffers for the whole run (read, write and copy, on one
    // core and on all): at most 6/8 of the available memory together.
    let cap = mem_available().map_or(MEM_MAX, |m| (m / 8).min(MEM_MAX));
    let mem = wanted.min(cap);
    if mem < 4 * last.size {
        notes.push(format!(
            "{mem_path}: working set {} instead of 4 x {} = {} (capped at min(2 GiB, \
             MemAvailable/8)); part of it may be served by {}",
            size_text(unit(mem)),
            last.name,
            size_text(4 * last.size),
            last.name
        ));
    }
    stream(&mut tasks, &mem_path, unit(mem), 1);
    // The merge point: all CPUs at once, the same total working set split among them (each
    // still at least 4 x the last private level, so it streams from below the private caches).
    let private_last = levels.iter().take_while(|l| !l.shared).last();
    let per_thread = (mem / cpus as u64).max(private_last.map_or(0, |l| 4 * l.size));
    stream(&mut tasks, &mem_path, unit(per_thread), cpus);
    // Reads and writes together: copies over the same working sets, A and B half each (so
    // with 4 x the last level, A and B are 2 x the last level each).
    for (bytes, threads) in [(mem, 1), (per_thread, cpus)] {
        tasks.push(Task::Stream {
            path: mem_path.clone(),
            op: Op::Copy,
            bytes: unit2(bytes),
            threads,
        });
    }
    if base.cores != cpus {
        notes.push(format!(
            "{mem_path} totals: measured with the {cpus} CPUs this process may use; the base \
             model has {} cores",
            base.cores
        ));
    }
    match private_last {
        Some(p) if cpus >= 2 => tasks.push(Task::C2c {
            path: format!("{0}-{0}", p.name),
            bytes: unit(C2C_BLOCK.min(levels[0].size / 2)),
        }),
        Some(p) => notes.push(format!(
            "{0}-{0}: not measured (cache-to-cache transfers need two CPUs; this process may \
             use {cpus})",
            p.name
        )),
        None => {}
    }
    tasks.push(Task::Fault {
        bytes: (FAULT_BYTES.min(cap) / PAGE_BYTES).max(1) * PAGE_BYTES,
    });
    tasks
}

/// Notes when the base model's levels are not this host's.
fn compare_with_host(base: &MachineModel, notes: &mut Vec<String>) {
    let describe = |m: &MachineModel| {
        m.levels
            .iter()
            .map(|l| {
                format!(
                    "{} {}{}",
                    l.name,
                    size_text(l.size),
                    if l.shared { " shared" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match MachineModel::host() {
        Ok(host) => {
            let same = host.levels.len() == base.levels.len()
                && host
                    .levels
                    .iter()
                    .zip(&base.levels)
                    .all(|(h, b)| h.size == b.size && h.shared == b.shared);
            if !same {
                notes.push(format!(
                    "the base model's levels ({}) are not this host's ({}): working sets and \
                     path names follow the base model, the figures are this host's",
                    describe(base),
                    describe(&host)
                ));
            }
        }
        Err(e) => notes.push(format!(
            "this host's cache levels are unknown ({e}); working sets follow the base model ({})",
            describe(base)
        )),
    }
}

/// Parsed benchmark output: usable CPUs, samples per task, skip reasons per task.
struct Output {
    cpus: Vec<u32>,
    reps: Vec<Vec<Vec<f64>>>,
    skipped: Vec<Option<String>>,
}

fn parse_output(text: &str, tasks: usize) -> Result<Output> {
    let bad = |line: &str| anyhow!("unexpected benchmark output line {line:?}");
    let mut out = Output {
        cpus: Vec::new(),
        reps: vec![Vec::new(); tasks],
        skipped: vec![None; tasks],
    };
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["cpus", list @ ..] => {
                out.cpus = list
                    .iter()
                    .map(|c| c.parse().map_err(|_| bad(line)))
                    .collect::<Result<_>>()?;
            }
            ["rep", id, values @ ..] if !values.is_empty() => {
                let id: usize = id.parse().map_err(|_| bad(line))?;
                let values = values
                    .iter()
                    .map(|v| v.parse::<f64>().map_err(|_| bad(line)))
                    .collect::<Result<Vec<_>>>()?;
                out.reps.get_mut(id).ok_or_else(|| bad(line))?.push(values);
            }
            ["skip", id, reason @ ..] => {
                let id: usize = id.parse().map_err(|_| bad(line))?;
                *out.skipped.get_mut(id).ok_or_else(|| bad(line))? = Some(reason.join(" "));
            }
            [] => {}
            _ => return Err(bad(line)),
        }
    }
    Ok(out)
}

/// Runs the benchmark for `base`'s hierarchy and collects the figures.
pub fn measure(
    args: &CalibrateArgs,
    base: &MachineModel,
    dir: &Path,
) -> Result<BandwidthCalibration> {
    if !cfg!(target_arch = "x86_64") {
        bail!(
            "calibrate --bandwidth: the micro-benchmarks are written for x86-64 (SSE2, inline \
             assembly); this is {}",
            std::env::consts::ARCH
        );
    }
    let (repetitions, repetition_ms) = if args.quick {
        (args.repetitions.min(QUICK_REPETITIONS), QUICK_TARGET_MS)
    } else {
        (args.repetitions, TARGET_MS)
    };
    let mut notes = Vec::new();
    compare_with_host(base, &mut notes);
    let cpus = usable_cpus();
    let tasks = plan(base, cpus, &mut notes);
    tracing::info!(
        "bandwidth: {} tasks x {repetitions} repetitions of ~{repetition_ms} ms on {cpus} CPUs",
        tasks.len()
    );
    let exe = compile(dir, "bandwidth_bench", BENCH_SOURCE, &GCC_FLAGS)?;
    // The IPC kernels are built and recorded first: a missing shim fails before seconds of
    // measuring.
    let kernels = ipc::prepare(dir)?;
    let mut bench_args = vec![repetitions.to_string(), (repetition_ms * 1000).to_string()];
    bench_args.extend(tasks.iter().map(Task::arg));
    // Setup and sizing take a few repetitions' time per task; a hung benchmark is killed.
    let expected_s = tasks.len() as u64 * (repetitions as u64 + 8) * repetition_ms / 1000;
    let timeout = Duration::from_secs((10 * expected_s).max(120));
    let text = run_bench(&exe, &bench_args, timeout)?;
    let out = parse_output(&text, tasks.len())?;

    // Every task that was not skipped must have all its repetitions with the right fields.
    for (i, task) in tasks.iter().enumerate() {
        if let Some(reason) = &out.skipped[i] {
            notes.push(format!("{}: not measured ({reason})", task.name()));
            continue;
        }
        let fields = match task {
            Task::Clock | Task::Stream { .. } | Task::Fault { .. } => 2,
            Task::C2c { .. } => 3,
            Task::Ipc | Task::Adds | Task::Flops => 4,
        };
        let reps = &out.reps[i];
        if reps.len() != repetitions as usize || reps.iter().any(|r| r.len() != fields) {
            bail!(
                "the benchmark printed {} repetitions of {} (expected {repetitions} with {fields} \
                 values each):\n{text}",
                reps.len(),
                task.name()
            );
        }
    }
    let rate = |r: &Vec<f64>| r[0] / r[1];
    let samples_of = |i: usize, f: &dyn Fn(&Vec<f64>) -> f64| -> Vec<f64> {
        out.reps[i].iter().map(f).collect()
    };
    let need = |stat: Option<Stat>, what: &str| {
        stat.ok_or_else(|| anyhow!("the benchmark measured no positive {what}:\n{text}"))
    };

    let mut clock = None;
    let mut ipc = None;
    let mut adds = None;
    let mut flops = None;
    let mut streams = Vec::new();
    let mut c2c = None;
    let mut fault = None;
    for (i, task) in tasks.iter().enumerate() {
        if out.skipped[i].is_some() {
            continue;
        }
        // Units per cycle, each against the clock measured right around it.
        let per_cycle = |r: &Vec<f64>| (r[0] / r[1]) / (r[2] / r[3]);
        match task {
            Task::Clock => {
                clock = Some(need(Stat::of(samples_of(i, &|r| rate(r) / 1e9)), "clock")?)
            }
            Task::Ipc => {
                ipc = Some(need(
                    Stat::of(samples_of(i, &per_cycle)),
                    "throughput-loop IPC",
                )?)
            }
            Task::Adds => adds = Some(need(Stat::of(samples_of(i, &per_cycle)), "add IPC")?),
            Task::Flops => {
                flops = Some(need(
                    Stat::of(samples_of(i, &per_cycle)),
                    "flops per cycle",
                )?)
            }
            Task::Stream {
                path,
                op,
                bytes,
                threads,
            } => {
                // A copy's count is the bytes copied: loaded once, stored once, and each
                // stored line read for ownership first.
                let counted = if *op == Op::Copy { 3.0 } else { 1.0 };
                streams.push(StreamMeasurement {
                    path: path.clone(),
                    direction: op.name(),
                    threads: *threads,
                    bytes_per_thread: *bytes,
                    gbs: need(
                        Stat::of(samples_of(i, &|r| counted * rate(r) / 1e9)),
                        &format!("bandwidth for {}", task.name()),
                    )?,
                    core_gbs: match op {
                        Op::Copy => Stat::of(samples_of(i, &|r| 2.0 * rate(r) / 1e9)),
                        _ => None,
                    },
                })
            }
            Task::Fault { bytes } => {
                fault = Some(PageFault {
                    bytes: *bytes,
                    pages: bytes / PAGE_BYTES,
                    method: "mmap(MAP_PRIVATE | MAP_ANONYMOUS), madvise(MADV_NOHUGEPAGE), write \
                             one byte per 4 KiB page, thread CPU time of the writes, on the \
                             first CPU",
                    ns_per_page: need(
                        Stat::of_cost(samples_of(i, &|r| r[1] / r[0] * 1e9)),
                        "page-fault cost",
                    )?,
                });
            }
            Task::C2c { path, bytes } => {
                let pinned = [
                    out.cpus.first().copied().unwrap_or(0),
                    out.cpus.get(1).copied().unwrap_or(1),
                ];
                c2c = Some(CacheToCache {
                    path: path.clone(),
                    block_bytes: *bytes,
                    cpus: pinned,
                    read_gbs: need(
                        Stat::of(samples_of(i, &|r| r[0] / r[1] / 1e9)),
                        "cache-to-cache bandwidth",
                    )?,
                    round_gbs: need(
                        Stat::of(samples_of(i, &|r| r[0] / r[2] / 1e9)),
                        "cache-to-cache round bandwidth",
                    )?,
                });
            }
        }
    }
    let missing = |what: &str| anyhow!("the benchmark did not measure the {what}:\n{text}");
    let clock = clock.ok_or_else(|| missing("clock"))?;
    let ipc = ipc.ok_or_else(|| missing("throughput-loop IPC"))?;
    let fault = fault.ok_or_else(|| missing("page-fault cost"))?;
    let adds = adds.ok_or_else(|| missing("add IPC"))?;
    let flops = flops.ok_or_else(|| missing("flops per cycle"))?;

    let mut paths = limits(&streams, &mut notes);
    // A cache path no faster than memory was not measured in the cache (the level holds
    // less than the model says, even at the ladder's smallest working set): say so.
    let mem_path = base.levels.last().map(|l| format!("{}-mem", l.name));
    let mem_read = mem_path
        .as_ref()
        .and_then(|m| paths.get(m))
        .and_then(|l| l.read_gbs);
    if let (Some(mem_path), Some(mem_read)) = (&mem_path, mem_read) {
        for (name, limit) in &paths {
            let c2c = c2c.as_ref().is_some_and(|c| &c.path == name);
            match limit.read_gbs {
                Some(r) if name != mem_path && !c2c && r <= mem_read => notes.push(format!(
                    "{name}: read {r:.1} GB/s, no faster than {mem_path}'s {mem_read:.1} GB/s: \
                     its working sets did not stay in the cache (a VM may report its host's \
                     cache sizes; check the model's levels, or set the figure by hand)"
                )),
                _ => {}
            }
        }
    }
    if let Some(c) = &c2c {
        paths.entry(c.path.clone()).or_default().read_gbs = Some(c.read_gbs.best);
    }
    let known = base.path_names();
    for name in &known {
        if !paths.contains_key(name) && !notes.iter().any(|n| n.starts_with(name.as_str())) {
            notes.push(format!("{name}: not measured"));
        }
    }
    let kept_from_base = base
        .bandwidth
        .iter()
        .flat_map(|b| b.paths.keys())
        .filter(|p| !paths.contains_key(*p))
        .cloned()
        .collect();
    let cpuinfo = cpuinfo_ghz();
    if let Some(c) = cpuinfo {
        let ratio = clock.best / c;
        if !(0.9..=1.1).contains(&ratio) {
            notes.push(format!(
                "the measured clock {:.3} GHz differs from /proc/cpuinfo's {c:.3} GHz by {:+.0}% \
                 (boost clock, or a VM reporting the nominal clock); the measured one is used",
                clock.best,
                100.0 * (ratio - 1.0)
            ));
        }
    }
    // The compiled kernels behind the model's ipc, timed natively after the benchmark.
    let ipc_kernels = ipc::measure(&kernels, repetitions, repetition_ms)?;
    // The same kernels on every CPU at once: whether the cores share execution resources.
    let ipc_concurrent = if out.cpus.len() > 1 {
        Some(ipc::measure_concurrent(
            &kernels,
            &ipc_kernels,
            &out.cpus,
            repetitions.min(3),
            repetition_ms,
        )?)
    } else {
        None
    };
    // Barriers and forks, on every CPU (a failure leaves the estimate without their cost).
    let sync = match measure_sync(dir, cpus, repetitions, repetition_ms) {
        Ok(s) => Some(s),
        Err(e) => {
            notes.push(format!(
                "barrier_ns, region_ns: not measured ({e:#}); the estimate charges nothing for \
                 synchronization"
            ));
            None
        }
    };
    for n in &notes {
        tracing::info!("note: {n}");
    }
    Ok(BandwidthCalibration {
        base_model: base.name.clone(),
        repetitions,
        repetition_ms,
        quick: args.quick,
        statistic: "best of the repetitions (interference only slows a run down): the highest \
                    rate, the lowest page-fault cost; the median and all samples show the spread",
        access_bytes: ACCESS_BYTES,
        cpus: out.cpus,
        ghz: clock.best,
        ipc: ipc_kernels.median,
        ipc_throughput_loop: ipc.best,
        ipc_independent_adds: adds.best,
        flops_per_cycle: flops.best,
        page_fault_ns: fault.ns_per_page.best,
        sync,
        clock: Clock {
            ghz: clock.best,
            measured: clock,
            cpuinfo_ghz: cpuinfo,
        },
        ipc_total: ipc_concurrent.as_ref().map(|c| c.median),
        ipc_concurrent,
        ipc_kernels,
        kernels: Kernels {
            ipc_throughput_loop: ipc,
            ipc_independent_adds: adds,
            flops_per_cycle: flops,
        },
        page_fault: fault,
        streams,
        cache_to_cache: c2c,
        path_order: known
            .into_iter()
            .filter(|p| paths.contains_key(p))
            .collect(),
        paths,
        kept_from_base,
        notes,
    })
}

/// How much faster than the path above a ladder rung may be and still count.
const RUNG_SLACK: f64 = 1.05;

/// The limits by path from the stream measurements (in the order measured: each path's
/// streams together, from the core outwards).
fn limits(streams: &[StreamMeasurement], notes: &mut Vec<String>) -> BTreeMap<String, PathLimit> {
    // The limits, by path. A rung of a path's ladder faster than the path above it (for
    // `L2-L3`, `L1-L2`) was served partly by the upper level (a replacement policy that keeps
    // part of a 4 x L2 stream in L2): it does not count, unless every rung is (then the
    // largest working set, the one most surely below).
    let mut upper: BTreeMap<&str, f64> = BTreeMap::new();
    let mut last_path: Option<&str> = None;
    let mut current: BTreeMap<&str, f64> = BTreeMap::new();
    // Per path and direction: the path above's figure and the best rung faster than it.
    let mut discarded: BTreeMap<(&str, &str), (f64, f64)> = BTreeMap::new();
    let mut paths: BTreeMap<String, PathLimit> = BTreeMap::new();
    for s in streams {
        if last_path != Some(s.path.as_str()) {
            upper = std::mem::take(&mut current);
            last_path = Some(&s.path);
        }
        let limit = paths.entry(s.path.clone()).or_default();
        if s.threads == 1 && s.direction != "copy" && !s.path.ends_with("-mem") {
            let cap = upper.get(s.direction).copied().unwrap_or(f64::INFINITY);
            // 5 % of slack: best-of figures of two paths with about the same rate are noisy.
            if s.gbs.best > cap * RUNG_SLACK {
                let d = discarded
                    .entry((&s.path, s.direction))
                    .or_insert((cap, 0.0));
                d.1 = d.1.max(s.gbs.best);
                continue;
            }
            let best = current.entry(s.direction).or_insert(0.0);
            *best = best.max(s.gbs.best);
        }
        let slot = match (s.direction, s.threads) {
            ("read", 1) => &mut limit.read_gbs,
            ("write", 1) => &mut limit.write_gbs,
            ("copy", 1) => &mut limit.combined_gbs,
            ("read", _) => &mut limit.total_read_gbs,
            ("write", _) => &mut limit.total_write_gbs,
            _ => &mut limit.total_combined_gbs,
        };
        // The best of a path's working sets (one for memory).
        *slot = Some(slot.map_or(s.gbs.best, |b: f64| b.max(s.gbs.best)));
    }
    for ((path, direction), (cap, best)) in discarded {
        let limit = paths.entry(path.to_string()).or_default();
        let slot = if direction == "read" {
            &mut limit.read_gbs
        } else {
            &mut limit.write_gbs
        };
        if slot.is_none() {
            // Not the largest working set's figure: on a VM that reports its host's cache,
            // that one is memory's speed, which the ladder is there to avoid.
            *slot = Some(best.min(cap));
            notes.push(format!(
                "{path} {direction}: every working set streamed faster than the path above it \
                 ({best:.1} GB/s); that path's {cap:.1} GB/s is used"
            ));
        }
    }
    paths
}

/// OpenMP settings of the caller's environment that would change what the synchronization
/// benchmark measures (a passive wait policy made a barrier 3 µs instead of 0.4; eight
/// threads on two CPUs, 48 µs).
const OMP_SETTINGS: [&str; 8] = [
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "OMP_DYNAMIC",
    "OMP_THREAD_LIMIT",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "GOMP_CPU_AFFINITY",
    "OMP_MAX_ACTIVE_LEVELS",
];

/// Compiles and runs the OpenMP synchronization benchmark with one thread per usable CPU
/// (`cpus`), whatever the caller's OpenMP environment says.
fn measure_sync(dir: &Path, cpus: u32, repetitions: u32, repetition_ms: u64) -> Result<SyncCost> {
    if cpus < 2 {
        bail!("one usable CPU: no team to synchronize");
    }
    let exe = compile(dir, "sync_bench", SYNC_SOURCE, &SYNC_FLAGS)?;
    let mut args: Vec<String> = OMP_SETTINGS
        .iter()
        .flat_map(|v| ["-u".to_string(), (*v).to_string()])
        .collect();
    args.push(format!("OMP_NUM_THREADS={cpus}"));
    args.push(exe.display().to_string());
    args.push(repetitions.to_string());
    args.push((repetition_ms * 1000).to_string());
    // Sizing takes a few repetitions' time; a hung benchmark is killed.
    let expected_s = 2 * (u64::from(repetitions) + 8) * repetition_ms / 1000;
    let text = run_bench(
        Path::new("env"),
        &args,
        Duration::from_secs((10 * expected_s).max(60)),
    )?;
    let sync = parse_sync(&text)?;
    if sync.threads != cpus {
        bail!(
            "the runtime ran a team of {} thread(s) where {cpus} were asked for",
            sync.threads
        );
    }
    Ok(sync)
}

/// The synchronization benchmark's output: `threads N`, then `rep barrier NS` and `rep region
/// NS` per repetition.
fn parse_sync(text: &str) -> Result<SyncCost> {
    let mut threads = None;
    let (mut barrier, mut region) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["threads", n] => threads = n.parse().ok(),
            ["rep", "barrier", ns] => barrier.push(ns.parse::<f64>()?),
            ["rep", "region", ns] => region.push(ns.parse::<f64>()?),
            _ => bail!("unexpected output of the synchronization benchmark: {line:?}"),
        }
    }
    let threads = threads.ok_or_else(|| anyhow!("the synchronization benchmark named no team"))?;
    let barrier_ns = Stat::of_cost(barrier)
        .ok_or_else(|| anyhow!("the synchronization benchmark timed no barrier"))?;
    let empty_region_ns = Stat::of_cost(region)
        .ok_or_else(|| anyhow!("the synchronization benchmark timed no region"))?;
    let region_ns = (empty_region_ns.best - barrier_ns.best).max(1.0);
    Ok(SyncCost {
        threads,
        barrier_ns,
        empty_region_ns,
        region_ns,
    })
}

/// Puts the measured clock, IPC, flops per cycle, page-fault and synchronization costs and
/// path limits into `model`'s bandwidth section; τ, paths and costs not measured stay as they
/// were.
pub fn apply(cal: &BandwidthCalibration, model: &mut MachineModel) {
    let bw = model.bandwidth.get_or_insert_with(|| BandwidthModel {
        ghz: cal.ghz,
        ipc: cal.ipc,
        flops_per_cycle: None,
        false_sharing_penalty_cycles: None,
        page_fault_ns: None,
        barrier_ns: None,
        region_ns: None,
        ipc_total: None,
        paths: Default::default(),
    });
    bw.ghz = cal.ghz;
    bw.ipc = cal.ipc;
    bw.ipc_total = cal.ipc_total;
    bw.flops_per_cycle = Some(cal.flops_per_cycle);
    bw.page_fault_ns = Some(cal.page_fault_ns);
    if let Some(sync) = &cal.sync {
        bw.barrier_ns = Some(sync.barrier_ns.best);
        bw.region_ns = Some(sync.region_ns);
    }
    for (name, limit) in &cal.paths {
        bw.paths.insert(name.clone(), limit.clone());
    }
}

/// The comment lines about the bandwidth figures at the top of the written model.
pub fn model_comment(cal: &BandwidthCalibration) -> String {
    let c2c = cal
        .cache_to_cache
        .as_ref()
        .map_or("(not measured)".to_string(), |c| c.path.clone());
    let cpuinfo = cal
        .clock
        .cpuinfo_ghz
        .map_or("-".to_string(), |c| format!("{c:.3} GHz"));
    let mut text = format!(
        "Bandwidth limits measured on this host (docs/calibrate.md): best of {} repetitions of \
         ~{} ms; {}-byte SSE2 loads/stores on one pinned core; total_*: {} CPUs at once; \
         combined_gbs: a copy stream, counted as loaded + 2 x stored bytes (the stores' RFO); \
         {c2c}: cache-to-cache. ghz: dependent add chain ({:.3} GHz; /proc/cpuinfo: {cpuinfo}). \
         ipc: median over {} compiled kernels of the tracer's instructions per native cycle \
         ({}; gcc {}). page_fault_ns: first write to a fresh anonymous 4 KiB page, transparent \
         huge pages off (lowest of the repetitions).{} flops_per_cycle: SSE2 addpd + mulpd. For \
         reference: L1-resident asm load/load/add/mul/store loop {:.2}, independent adds {:.2} \
         instructions per cycle.",
        cal.repetitions,
        cal.repetition_ms,
        cal.access_bytes,
        cal.cpus.len(),
        cal.ghz,
        cal.ipc_kernels.kernels.len(),
        kernel_list(&cal.ipc_kernels, " "),
        cal.ipc_kernels.flags.join(" "),
        match &cal.sync {
            Some(sync) => format!(
                " barrier_ns: one OpenMP barrier episode, region_ns: forking an empty parallel \
                 region beyond the barrier at its end (gcc -fopenmp, libgomp, a team of {}; \
                 lowest of the repetitions).",
                sync.threads
            ),
            None => String::new(),
        },
        cal.ipc_throughput_loop,
        cal.ipc_independent_adds
    );
    for n in &cal.notes {
        text.push_str("\nNote: ");
        text.push_str(n);
    }
    let mut out = String::new();
    for paragraph in text.lines() {
        let mut line = String::from("#");
        for word in paragraph.split_whitespace() {
            if line.len() + 1 + word.len() > 95 && line.len() > 1 {
                out.push_str(&line);
                out.push('\n');
                line = String::from("#");
            }
            line.push(' ');
            line.push_str(word);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// "copy 7.26 scale 10.85 …": each kernel's IPC.
fn kernel_list(k: &IpcKernels, sep: &str) -> String {
    k.kernels
        .iter()
        .map(|k| format!("{} {:.2}", k.name, k.ipc.best))
        .collect::<Vec<_>>()
        .join(sep)
}

/// The human summary: the clock and kernels, then one row per path.
pub fn render(c: &BandwidthCalibration) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "bandwidth calibration (thesis §4.3–4.4, Table 4.3): best of {} repetitions of ~{} ms{}, \
         {}-byte SSE2 loads/stores",
        c.repetitions,
        c.repetition_ms,
        if c.quick { " (--quick)" } else { "" },
        c.access_bytes
    );
    let cpus: Vec<String> = c.cpus.iter().map(u32::to_string).collect();
    let _ = writeln!(o, "  CPUs (threads pinned): {}", cpus.join(" "));
    let _ = writeln!(
        o,
        "  clock: {:.3} GHz measured (dependent add chain; median {:.3}); /proc/cpuinfo: {}",
        c.ghz,
        c.clock.measured.median,
        c.clock
            .cpuinfo_ghz
            .map_or("-".to_string(), |g| format!("{g:.3} GHz"))
    );
    let _ = writeln!(
        o,
        "  ipc: {:.2} (median of {} compiled kernels: tracer's instructions / native cycles; \
         asm throughput loop: {:.2}, independent adds: {:.2})",
        c.ipc,
        c.ipc_kernels.kernels.len(),
        c.ipc_throughput_loop,
        c.ipc_independent_adds
    );
    let _ = writeln!(o, "    kernels: {}", kernel_list(&c.ipc_kernels, ", "));
    if let Some(cc) = &c.ipc_concurrent {
        let _ = writeln!(
            o,
            "  ipc_total: {:.2} on {} CPUs at once ({:.0}% of {} x ipc; median of the kernels' \
             summed IPCs)",
            cc.median,
            cc.cpus.len(),
            100.0 * cc.efficiency,
            cc.cpus.len()
        );
    }
    let _ = writeln!(
        o,
        "  flops per cycle: {:.2} (SSE2 addpd + mulpd)",
        c.flops_per_cycle
    );
    let _ = writeln!(
        o,
        "  page fault: {:.2} µs per 4 KiB page (first write to fresh anonymous memory, huge \
         pages off; {} per repetition; median {:.2})",
        c.page_fault_ns / 1e3,
        size_text(c.page_fault.bytes),
        c.page_fault.ns_per_page.median / 1e3
    );
    match &c.sync {
        Some(sync) => {
            let _ = writeln!(
                o,
                "  synchronization ({} threads, libgomp): barrier {:.2} µs, region fork {:.2} \
                 µs beyond its end's barrier (empty region {:.2} µs; medians {:.2} and {:.2})",
                sync.threads,
                sync.barrier_ns.best / 1e3,
                sync.region_ns / 1e3,
                sync.empty_region_ns.best / 1e3,
                sync.barrier_ns.median / 1e3,
                sync.empty_region_ns.median / 1e3
            );
        }
        None => {
            let _ = writeln!(o, "  synchronization: not measured");
        }
    }
    let _ = writeln!(
        o,
        "  {:<10} {:>10} {:>10} {:>9} {:>11} {:>11} {:>11}  measured with",
        "path", "read GB/s", "write GB/s", "combined", "total read", "total write", "total comb."
    );
    let num = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
    for (name, limit) in c
        .path_order
        .iter()
        .filter_map(|n| Some((n, c.paths.get(n)?)))
    {
        let mut how: Vec<String> = Vec::new();
        for s in c.streams.iter().filter(|s| &s.path == name) {
            let what = if s.threads == 1 {
                format!("{} on 1 core", size_text(s.bytes_per_thread))
            } else {
                format!(
                    "{} x {} on {} cores",
                    s.threads,
                    size_text(s.bytes_per_thread),
                    s.threads
                )
            };
            if !how.contains(&what) {
                how.push(what);
            }
        }
        if let Some(x) = c.cache_to_cache.as_ref().filter(|x| &x.path == name) {
            how.push(format!(
                "{} handed between CPUs {} and {}",
                size_text(x.block_bytes),
                x.cpus[0],
                x.cpus[1]
            ));
        }
        let _ = writeln!(
            o,
            "  {:<10} {:>10} {:>10} {:>9} {:>11} {:>11} {:>11}  {}",
            name,
            num(limit.read_gbs),
            num(limit.write_gbs),
            num(limit.combined_gbs),
            num(limit.total_read_gbs),
            num(limit.total_write_gbs),
            num(limit.total_combined_gbs),
            how.join("; ")
        );
    }
    if c.paths.values().any(|l| l.combined_gbs.is_some()) {
        let _ = writeln!(
            o,
            "  combined: copy stream (A and B half the working set each), loaded + 2 x stored \
             bytes (RFO), as the simulator counts a copy"
        );
    }
    if !c.kept_from_base.is_empty() {
        let _ = writeln!(
            o,
            "  kept from the base model: {}",
            c.kept_from_base.join(", ")
        );
    }
    for n in &c.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_sets_follow_the_levels() {
        let host = MachineModel::from_toml(
            r#"
name = "h"
cores = 2
line_size = 64
[[levels]]
name = "L1"
size = "32K"
assoc = 8
[[levels]]
name = "L2"
size = "512K"
assoc = 8
[[levels]]
name = "L3"
size = "32M"
assoc = 16
shared = true
"#,
            "test",
        )
        .unwrap();
        let mut notes = Vec::new();
        let tasks = plan(&host, 2, &mut notes);
        let args: Vec<String> = tasks.iter().map(Task::arg).collect();
        assert_eq!(&args[..4], ["clock", "ipc", "adds", "flops"]);
        assert_eq!(args.last().map(String::as_str), Some("fault:67108864"));
        assert!(args.contains(&"read:16384:1".to_string()), "{args:?}");
        assert!(args.contains(&"write:262144:1".to_string()), "{args:?}");
        assert!(args.contains(&"read:16777216:1".to_string()), "{args:?}");
        // L2-L3: a ladder from 4 x L2 to half of L3.
        for mib in [2, 4, 8, 16] {
            assert!(args.contains(&format!("read:{}:1", mib << 20)), "{args:?}");
        }
        assert!(!args.contains(&format!("read:{}:1", 1 << 20)), "{args:?}");
        assert!(args.contains(&"c2c:16384".to_string()), "{args:?}");
        // Memory: 4 x 32 MiB (less only when MemAvailable is small), all CPUs with half each.
        let mem = tasks
            .iter()
            .find_map(|t| match t {
                Task::Stream {
                    path,
                    bytes,
                    threads: 1,
                    ..
                } if path == "L3-mem" => Some(*bytes),
                _ => None,
            })
            .unwrap();
        assert!(mem <= 128 << 20, "{mem}");
        assert!(
            args.contains(&format!("read:{}:2", mem / 2)),
            "{args:?} {mem}"
        );
        // Copies over the same working sets: A and B half each.
        assert!(args.contains(&format!("copy:{mem}:1")), "{args:?} {mem}");
        assert!(
            args.contains(&format!("copy:{}:2", mem / 2)),
            "{args:?} {mem}"
        );
    }

    #[test]
    fn a_path_is_the_best_rung_no_faster_than_the_path_above() {
        let m = |path: &str, direction: &'static str, threads: u32, bytes: u64, gbs: f64| {
            StreamMeasurement {
                path: path.into(),
                direction,
                threads,
                bytes_per_thread: bytes,
                gbs: Stat::of(vec![gbs]).unwrap(),
                core_gbs: None,
            }
        };
        let streams = [
            m("core-L1", "read", 1, 16 << 10, 100.0),
            m("L1-L2", "read", 1, 128 << 10, 70.0),
            m("L1-L2", "read", 1, 256 << 10, 60.0),
            // 4 x L2, partly kept in L2: faster than L1-L2, not counted.
            m("L2-L3", "read", 1, 2 << 20, 75.0),
            m("L2-L3", "read", 1, 4 << 20, 28.0),
            m("L2-L3", "read", 1, 130 << 20, 9.7),
            m("L2-L3", "write", 1, 2 << 20, 20.0),
            // Memory is not a ladder: faster than L2-L3 on a VM whose L3 is small, and kept.
            m("L3-mem", "read", 1, 1 << 30, 30.0),
            m("L3-mem", "read", 2, 1 << 29, 40.0),
        ];
        let mut notes = Vec::new();
        let p = limits(&streams, &mut notes);
        assert_eq!(p["L1-L2"].read_gbs, Some(70.0));
        assert_eq!(p["L2-L3"].read_gbs, Some(28.0));
        assert_eq!(p["L2-L3"].write_gbs, Some(20.0));
        assert_eq!(p["L3-mem"].read_gbs, Some(30.0));
        assert_eq!(p["L3-mem"].total_read_gbs, Some(40.0));
        assert!(notes.is_empty(), "{notes:?}");
        // Every rung faster than the path above: that path's figure, noted.
        let streams = [
            m("L1-L2", "read", 1, 128 << 10, 50.0),
            m("L2-L3", "read", 1, 2 << 20, 65.0),
            m("L2-L3", "read", 1, 8 << 20, 55.0),
        ];
        let p = limits(&streams, &mut notes);
        assert_eq!(p["L2-L3"].read_gbs, Some(50.0));
        assert_eq!(notes.len(), 1, "{notes:?}");
        // Within 5 % of the path above: noise, counted.
        let streams = [
            m("L1-L2", "read", 1, 128 << 10, 50.0),
            m("L2-L3", "read", 1, 2 << 20, 52.0),
        ];
        let p = limits(&streams, &mut notes);
        assert_eq!(p["L2-L3"].read_gbs, Some(52.0));
    }

    #[test]
    fn sync_output_parsing() {
        let s = parse_sync(
            "threads 2\nrep barrier 900.5\nrep region 2500\nrep barrier 800\nrep region 3000\n",
        )
        .unwrap();
        assert_eq!(s.threads, 2);
        assert_eq!(s.barrier_ns.best, 800.0);
        assert_eq!(s.empty_region_ns.best, 2500.0);
        // The region's own barrier is charged on its own.
        assert_eq!(s.region_ns, 1700.0);
        // A region no slower than a barrier still costs something.
        let s = parse_sync("threads 1\nrep barrier 300\nrep region 250\n").unwrap();
        assert_eq!(s.region_ns, 1.0);
        assert!(parse_sync("threads 2\n").is_err());
        assert!(parse_sync("rep barrier x\n").is_err());
        assert!(parse_sync("garbage\n").is_err());
    }

    #[test]
    fn output_parsing() {
        let o = parse_output("cpus 0 1\nrep 0 100 0.5\nskip 1 needs two CPUs\n", 2).unwrap();
        assert_eq!(o.cpus, [0, 1]);
        assert_eq!(o.reps[0], [vec![100.0, 0.5]]);
        assert_eq!(o.skipped[1].as_deref(), Some("needs two CPUs"));
        assert!(parse_output("rep 5 1 1\n", 2).is_err());
        assert!(parse_output("garbage\n", 2).is_err());
    }

    #[test]
    fn stats_take_the_best() {
        let s = Stat::of(vec![1.0, 3.0, 2.0, f64::NAN, 0.0]).unwrap();
        assert_eq!(s.best, 3.0);
        assert_eq!(s.median, 2.0);
        assert!(Stat::of(vec![0.0]).is_none());
        let cost = Stat::of_cost(vec![2.0, 3.0, 1.5, f64::INFINITY]).unwrap();
        assert_eq!(cost.best, 1.5);
        assert_eq!(cost.median, 2.0);
        assert_eq!(cost.samples, [2.0, 3.0, 1.5]);
    }
}
