//! The model's `ipc` for `calibrate --bandwidth`: instructions per cycle of ordinary compiled
//! loops, in the unit of the traces.
//!
//! `calibrate/ipc_kernels.c` (embedded) has seven small kernels on L1-resident data (STREAM
//! copy, scale, add, triad, a dot product, a 5-point stencil sweep, an integer loop with `%`).
//! It is built twice with the same flags:
//!
//! * with `cachescope cc` (the running executable's), and each kernel recorded under the shim
//!   twice, with [`REPS_SHORT`] and [`REPS_LONG`] calls: the difference of the two traces'
//!   instruction totals over the difference of the calls is the kernel's instructions per call
//!   as cachescope's tracer counts them (the setup cancels out) — the unit in which
//!   `cachescope bandwidth` divides by `ghz × ipc`;
//! * with plain gcc, and each kernel timed natively (one invocation per kernel, pinned): slices
//!   of kernel calls alternate with slices of the add-chain clock, the fastest of each per
//!   round, so the cycles per call are measured against the clock right around them.
//!
//! A kernel's IPC per round = instructions per call / cycles per call; its figure is the best
//! round; the model's `ipc` is the median of the seven kernels' figures.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use cachescope_schema::TraceFile;
use cachescope_tracer::record::{inspect, record, RecordOptions};
use cachescope_tracer::shim;
use serde::Serialize;

use super::bandwidth::Stat;
use super::{compile, median, run_bench};

/// The kernels' C source.
const SOURCE: &str = include_str!("../../../calibrate/ipc_kernels.c");
/// Flags of both builds: `-O2` as ordinary builds use; the copy loop stays a loop (no memcpy
/// call, whose instructions the tracer would not count).
pub const FLAGS: [&str; 3] = ["-O2", "-fno-tree-loop-distribute-patterns", "-Wall"];
/// Kernel calls of the shorter recorded run.
pub const REPS_SHORT: u64 = 20;
/// Kernel calls of the longer recorded run.
pub const REPS_LONG: u64 = 220;
/// Above this a kernel's IPC is a broken measurement, not a fast core (vectorized kernels
/// reach about 2 x the hardware's IPC in the tracer's count of scalar instructions).
const MAX_PLAUSIBLE_IPC: f64 = 24.0;

/// The kernels: name (the program's argument) and what it does.
pub const KERNELS: [(&str, &str); 7] = [
    ("copy", "c[i] = a[i], 2 x 512 doubles"),
    ("scale", "b[i] = s * c[i], 2 x 512 doubles"),
    ("add", "c[i] = a[i] + b[i], 3 x 512 doubles"),
    ("triad", "a[i] = b[i] + s * c[i], 3 x 512 doubles"),
    ("dot", "sum += a[i] * b[i], 2 x 512 doubles"),
    ("stencil", "5-point Jacobi sweep, 2 x 32 x 32 doubles"),
    (
        "modulo",
        "h[i] = (k[i] * 2654435761 + i) % m, 2 x 1024 uint32",
    ),
];

/// One kernel's figures.
#[derive(Debug, Clone, Serialize)]
pub struct KernelIpc {
    /// The kernel.
    pub name: &'static str,
    /// What it computes, on which data.
    pub what: &'static str,
    /// Instructions per call, as the tracer counts them (recorded runs' difference).
    pub instructions_per_call: f64,
    /// Instruction totals of the two recorded runs ([`REPS_SHORT`], [`REPS_LONG`] calls).
    pub recorded_instructions: [u64; 2],
    /// Native cycles per call of the best round.
    pub cycles_per_call: f64,
    /// Instructions per cycle per round (best: the kernel's figure).
    pub ipc: Stat,
}

/// The kernels' measurement.
#[derive(Debug, Clone, Serialize)]
pub struct IpcKernels {
    /// The model's `ipc`: the median of the kernels' best IPCs.
    pub median: f64,
    /// How it is measured.
    pub method: &'static str,
    /// Flags of both builds (the recorded one through `cachescope cc`).
    pub flags: Vec<&'static str>,
    /// Kernel calls of the two recorded runs.
    pub recorded_calls: [u64; 2],
    /// One per kernel.
    pub kernels: Vec<KernelIpc>,
    /// Per kernel: the slice sizes the rounds used (calls, clock iterations).
    #[serde(skip)]
    sizes: Vec<Option<(u64, u64)>>,
    /// Per kernel: instructions per call.
    #[serde(skip)]
    per_call: Vec<f64>,
}

/// The kernels on every CPU at once.
#[derive(Debug, Clone, Serialize)]
pub struct ConcurrentIpc {
    /// The CPUs, one pinned copy of the kernel program on each.
    pub cpus: Vec<u32>,
    /// Per kernel: the IPCs summed over the CPUs (best round).
    pub kernels: Vec<(&'static str, Stat)>,
    /// The model's `ipc_total`: the median of the kernels' summed IPCs.
    pub median: f64,
    /// `median` / (CPUs × the single-CPU `ipc`): 1 when cores do not share execution
    /// resources.
    pub efficiency: f64,
}

/// Runs every kernel on all `cpus` at once — one pinned copy per CPU, with the slice sizes
/// of the single-CPU rounds, started together — and sums their IPCs: the instruction issue of
/// all cores together, which is less than the CPUs times the single-CPU figure when CPUs share
/// a physical core (SMT siblings, vCPUs). `rounds` rounds, best per kernel.
pub fn measure_concurrent(
    prepared: &Prepared,
    single: &IpcKernels,
    cpus: &[u32],
    rounds: u32,
    round_ms: u64,
) -> Result<ConcurrentIpc> {
    let target_us = round_ms * 1000;
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); KERNELS.len()];
    for _ in 0..rounds {
        for (k, (name, _)) in KERNELS.iter().enumerate() {
            let sizes = single.sizes.get(k).copied().flatten();
            let results: Vec<Result<Round>> = std::thread::scope(|scope| {
                let handles: Vec<_> = cpus
                    .iter()
                    .map(|&cpu| {
                        scope.spawn(move || {
                            time_round(&prepared.native, name, target_us, sizes, Some(cpu))
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(anyhow!("a kernel timing thread panicked")))
                    })
                    .collect()
            });
            let mut total = 0.0;
            for r in results {
                let r = r?;
                let cycles = r.seconds / r.calls * (r.adds / r.clock_seconds);
                total += single.per_call[k] / cycles;
            }
            samples[k].push(total);
        }
    }
    let mut kernels = Vec::new();
    for (k, (name, _)) in KERNELS.iter().enumerate() {
        let stat = Stat::of(std::mem::take(&mut samples[k]))
            .ok_or_else(|| anyhow!("the {name} kernel measured no positive IPC on all CPUs"))?;
        kernels.push((*name, stat));
    }
    let total = median(kernels.iter().map(|(_, s)| s.best).collect());
    Ok(ConcurrentIpc {
        cpus: cpus.to_vec(),
        efficiency: total / (cpus.len() as f64 * single.median),
        median: total,
        kernels,
    })
}

/// Both builds and the recorded instruction counts.
pub struct Prepared {
    /// The plain gcc build.
    native: PathBuf,
    /// Per kernel: instructions of the [`REPS_SHORT`] and [`REPS_LONG`] recorded runs.
    counts: Vec<(u64, u64)>,
}

/// Finds the shim, builds both versions and records every kernel twice (a fraction of a
/// second): fails before anything is timed when the shim is missing or `cachescope cc` fails.
pub fn prepare(dir: &Path) -> Result<Prepared> {
    let exe = std::env::current_exe().context("locating the cachescope executable")?;
    let shim_path = shim::locate(&exe).map_err(|e| {
        anyhow!(
            "calibrate --bandwidth measures the model's ipc in the tracer's instruction count, \
             so it records small kernels and needs the recording shim: {e}"
        )
    })?;
    let native = compile(dir, "ipc_kernels", SOURCE, &FLAGS)?;
    let src = dir.join("ipc_kernels.c");
    let traced = dir.join("ipc_kernels_traced");
    let out = Command::new(&exe)
        .arg("cc")
        .args(FLAGS)
        .arg(&src)
        .arg("-o")
        .arg(&traced)
        .output()
        .context("running cachescope cc")?;
    if !out.status.success() {
        bail!(
            "cachescope cc {} {} failed ({}):\n{}",
            FLAGS.join(" "),
            src.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let time_unit = inspect(&traced)?.time_unit();
    let mut counts = Vec::new();
    for (name, _) in KERNELS {
        let mut pair = [0u64; 2];
        for (slot, reps) in pair.iter_mut().zip([REPS_SHORT, REPS_LONG]) {
            let trace = dir.join(format!("ipc_{name}_{reps}.cstrace"));
            let outcome = record(&RecordOptions {
                program: traced.clone(),
                args: ["count", name, &reps.to_string()]
                    .iter()
                    .map(OsString::from)
                    .collect(),
                output: trace.clone(),
                shim: shim_path.clone(),
                time_unit: Some(time_unit),
                // Counting instructions: allocations do not matter.
                alloc_callers: 0,
                env: Vec::new(),
            })?;
            if !outcome.status.success() || !outcome.complete {
                bail!(
                    "recording the {name} kernel ({} count {name} {reps}) failed: program {}, \
                     trace {}",
                    traced.display(),
                    outcome.status,
                    if outcome.complete {
                        "complete"
                    } else {
                        "incomplete or missing"
                    }
                );
            }
            *slot = instructions(&trace)?;
        }
        counts.push((pair[0], pair[1]));
    }
    Ok(Prepared { native, counts })
}

/// The instructions of all threads of a complete trace (their clocks at the end, from the
/// trailer; time unit instructions).
fn instructions(trace: &Path) -> Result<u64> {
    let file = TraceFile::open(trace)?;
    if file.header().time_unit != cachescope_schema::TimeUnit::Instructions {
        bail!(
            "{}: time unit {:?}, not instructions: the kernels were built without basic-block \
             callbacks",
            trace.display(),
            file.header().time_unit
        );
    }
    let trailer = file
        .trailer()
        .ok_or_else(|| anyhow!("{}: no trailer", trace.display()))?;
    Ok(trailer.threads.iter().map(|t| t.end_time).sum())
}

/// One round of one kernel: `rep CALLS SECONDS CLOCK_ADDS CLOCK_SECONDS`.
struct Round {
    calls: f64,
    seconds: f64,
    adds: f64,
    clock_seconds: f64,
}

/// Runs `ipc_kernels time NAME 1 TARGET_US [CALLS CLOCK_ITERS]` (one round), on `cpu` only
/// when given (through `taskset`: the program pins itself to the first CPU it may use).
fn time_round(
    native: &Path,
    name: &str,
    target_us: u64,
    sizes: Option<(u64, u64)>,
    cpu: Option<u32>,
) -> Result<Round> {
    let mut args = vec![
        "time".to_string(),
        name.to_string(),
        "1".to_string(),
        target_us.to_string(),
    ];
    if let Some((calls, iters)) = sizes {
        args.extend([calls.to_string(), iters.to_string()]);
    }
    let timeout = Duration::from_secs((20 * target_us / 1_000_000).max(120));
    let text = match cpu {
        None => run_bench(native, &args, timeout)?,
        Some(cpu) => {
            let mut full = vec!["-c".to_string(), cpu.to_string()];
            full.push(native.display().to_string());
            full.extend(args.iter().cloned());
            run_bench(Path::new("taskset"), &full, timeout)
                .context("running the IPC kernels on every CPU at once (taskset, util-linux)")?
        }
    };
    let bad = || {
        anyhow!(
            "unexpected output of ipc_kernels {}:\n{text}",
            args.join(" ")
        )
    };
    let fields: Vec<&str> = text.split_whitespace().collect();
    let ["rep", values @ ..] = fields.as_slice() else {
        return Err(bad());
    };
    let v: Vec<f64> = values
        .iter()
        .map(|x| x.parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    match v.as_slice() {
        &[calls, seconds, adds, clock_seconds] if calls >= 1.0 && adds >= 1000.0 => Ok(Round {
            calls,
            seconds,
            adds,
            clock_seconds,
        }),
        _ => Err(bad()),
    }
}

/// Times every kernel natively and combines it with the recorded counts: `rounds` rounds,
/// each one invocation per kernel of 8 + 8 slices of about `round_ms` in all. The rounds go
/// over all kernels in turn (like the benchmark's repetitions), so a burst of other load
/// spoils a round of every kernel rather than all rounds of one; the first round sizes the
/// slices and the later ones reuse the sizes.
pub fn measure(prepared: &Prepared, rounds: u32, round_ms: u64) -> Result<IpcKernels> {
    let mut per_call = Vec::new();
    for ((name, _), &(short, long)) in KERNELS.iter().zip(&prepared.counts) {
        if long <= short {
            bail!(
                "the recorded {name} kernel counted {short} instructions in {REPS_SHORT} calls \
                 and {long} in {REPS_LONG}: no instructions per call"
            );
        }
        per_call.push((long - short) as f64 / (REPS_LONG - REPS_SHORT) as f64);
    }
    let target_us = round_ms * 1000;
    let mut sizes: Vec<Option<(u64, u64)>> = vec![None; KERNELS.len()];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); KERNELS.len()];
    for _ in 0..rounds {
        for (k, (name, _)) in KERNELS.iter().enumerate() {
            let r = time_round(&prepared.native, name, target_us, sizes[k], None)?;
            sizes[k] = Some((r.calls as u64, (r.adds / 1000.0) as u64));
            // Cycles per call: the kernel slice's seconds per call x the clock slice's adds
            // (cycles) per second.
            let cycles = r.seconds / r.calls * (r.adds / r.clock_seconds);
            samples[k].push(per_call[k] / cycles);
        }
    }
    let mut kernels = Vec::new();
    for (k, (name, what)) in KERNELS.iter().enumerate() {
        let ipc = Stat::of(std::mem::take(&mut samples[k]))
            .ok_or_else(|| anyhow!("the {name} kernel measured no positive IPC"))?;
        // No loop retires dozens of instructions per cycle: the compiler removed work the
        // count includes (the kernels' data must stay observable).
        if ipc.best > MAX_PLAUSIBLE_IPC {
            bail!(
                "the {name} kernel ran at {:.1} instructions per cycle natively: the native \
                 build does less work than the recorded one (calibrate/ipc_kernels.c)",
                ipc.best
            );
        }
        let (short, long) = prepared.counts[k];
        kernels.push(KernelIpc {
            name,
            what,
            instructions_per_call: per_call[k],
            recorded_instructions: [short, long],
            cycles_per_call: per_call[k] / ipc.best,
            ipc,
        });
    }
    let ipc_sizes = sizes;
    Ok(IpcKernels {
        sizes: ipc_sizes,
        per_call,
        median: median(kernels.iter().map(|k| k.ipc.best).collect()),
        method: "per kernel: instructions per call as cachescope's tracer counts them (two \
                 recorded runs of the `cachescope cc` build, their difference) over native \
                 cycles per call (gcc build, thread CPU time x the add-chain clock measured \
                 around it), best of the rounds; the model's ipc is the median over the kernels",
        flags: FLAGS.to_vec(),
        recorded_calls: [REPS_SHORT, REPS_LONG],
        kernels,
    })
}
