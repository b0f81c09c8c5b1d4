//! `cachescope calibrate --false-sharing`: measures τ, the cost of one false-sharing event in
//! cycles, with the synthetic benchmark of thesis §4.2.4.
//!
//! The benchmark (`calibrate/false_sharing_bench.c`, embedded) is compiled with `gcc -O2
//! -pthread` into a temporary directory and run (again when a run shows no penalty, below).
//! Two threads, pinned to two CPUs, each modify (load + store) `ops` 4-byte ints at 64-byte
//! strides over `LINES` lines: 4 bytes apart (false sharing) or in disjoint regions (none),
//! alternating, `repetitions` times each.
//!
//! **Events, as the audit counts them.** Pluto's φ̃′ for one line modified `R` times by each of
//! two threads at different offsets, with no barrier in between, is
//! `2·[min(S₀, L₁) + min(S₁, L₀)] − 1 − θ̃ = 2·(R + R) − 1 − 0 = 4R − 1`: one event per memory
//! reference (two per modify, the thesis's "twice the number of evictions"). The benchmark's
//! events are `LINES · (4R − 1)` with `R = ops / LINES`.
//!
//! **Measurable.** τ is taken only from a measurement where false sharing makes the threads
//! at least 10 % slower; up to [`ATTEMPTS`] measurements are made (see the constants).
//!
//! **τ.** The audit's cost is events × τ summed over all threads, so τ is the extra thread
//! time per event: `τ = f · (T_fs − T_nofs) / events`, where T is the median over the
//! repetitions of the two threads' times added up. With two balanced threads this is the
//! thesis's "overhead per memory reference" (wall-time difference per reference of one thread).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use cachescope_sim::model::BandwidthModel;
use cachescope_sim::MachineModel;
use serde::Serialize;

use super::{compile, cpuinfo_ghz, median, Frequency};
use crate::cli::CalibrateArgs;

/// The benchmark's C source.
const BENCH_SOURCE: &str = include_str!("../../../calibrate/false_sharing_bench.c");
/// Lines each thread walks over (4 KiB per thread: fits any L1, like the thesis's small sizes).
const LINES: u64 = 64;
/// IPC to assume when the base model has no bandwidth section (the audit's own default).
const DEFAULT_IPC: f64 = 1.0;
/// The smallest penalty taken as measured: the threads' time with false sharing at least this
/// much above the time without (10 %). Below it the difference is run-to-run noise, and a τ
/// from it would be near 0 and make the audit pass everything.
const MEASURABLE_PENALTY: f64 = 1.10;
/// Measurements before giving up when one shows no penalty. On a VM the host moves the two
/// vCPUs every few seconds, between cores where a shared line costs hundreds of cycles and
/// places where it costs nothing; a measurement seconds later usually finds the former.
const ATTEMPTS: u32 = 4;
/// Seconds to wait before measurement 2, 3, 4 after one without a penalty. Measurements run
/// back to back take well under a second each, so without a pause all of them can fall into
/// one placement of the vCPUs (2026-11-29: three in a row found none, a run two minutes later
/// did); doubling pauses spread the last one about 14 s after the first.
const RETRY_PAUSES_S: [u64; ATTEMPTS as usize - 1] = [2, 4, 8];

/// The medians of one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ModeTimes {
    /// Median wall time of a run, seconds.
    pub wall_s: f64,
    /// Median time of each thread, seconds.
    pub thread_s: [f64; 2],
    /// Median over runs of the two threads' times added up, seconds (what τ uses).
    pub thread_sum_s: f64,
}

/// The calibration result.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// Modify operations per thread and run.
    pub ops_per_thread: u64,
    /// Lines per thread.
    pub lines: u64,
    /// Timed runs per mode.
    pub repetitions: u32,
    /// Measurements made (more than 1 when the earlier ones showed no measurable penalty).
    pub attempts: u32,
    /// CPUs the threads were pinned to.
    pub pinned_cpus: [u32; 2],
    /// With false sharing.
    pub false_sharing: ModeTimes,
    /// Without.
    pub no_false_sharing: ModeTimes,
    /// Pluto's φ̃′ for the benchmark's false-sharing run (both threads).
    pub events: u64,
    /// Memory references of that run (both threads; a modify is a load and a store).
    pub references: u64,
    /// The clock.
    pub frequency: Frequency,
    /// τ, cycles per false-sharing event.
    pub tau_cycles: f64,
    /// τ in nanoseconds.
    pub tau_ns: f64,
    /// Wall time of one reference of one thread with false sharing, cycles.
    pub cycles_per_reference_fs: f64,
    /// The same without false sharing.
    pub cycles_per_reference_nofs: f64,
}

/// Measures τ. `clock`: the core clock measured by `calibrate --bandwidth` when it ran too
/// (else cpufreq, /proc/cpuinfo or the base model give the clock).
pub fn measure_tau(
    args: &CalibrateArgs,
    base: &MachineModel,
    dir: &Path,
    clock: Option<Frequency>,
) -> Result<Calibration> {
    let ops = (args.ops / LINES).max(1) * LINES;
    tracing::info!(
        "false sharing: {ops} modifies per thread, {} runs per mode",
        args.repetitions
    );
    let exe = compile(
        dir,
        "false_sharing_bench",
        BENCH_SOURCE,
        &["-O2", "-pthread"],
    )?;
    let mut unmeasurable = Vec::new();
    let (attempts, (pinned, fs, nofs)) = loop {
        let (pinned, fs, nofs) = measure(&exe, ops, args.repetitions)?;
        let Some(pinned) = pinned else {
            // Two threads on one CPU take turns; no line ever moves between caches.
            bail!(
                "calibrate --false-sharing needs two CPUs to pin its two threads to, and this \
                 process may use only one (its CPU affinity: taskset, cpuset cgroups); run it \
                 where two CPUs are usable"
            );
        };
        if fs.thread_sum_s >= MEASURABLE_PENALTY * nofs.thread_sum_s && nofs.thread_sum_s > 0.0 {
            break (unmeasurable.len() as u32 + 1, (pinned, fs, nofs));
        }
        let seen = format!(
            "{:.4} s with, {:.4} s without",
            fs.thread_sum_s, nofs.thread_sum_s
        );
        let pause = RETRY_PAUSES_S.get(unmeasurable.len()).copied();
        tracing::warn!(
            "false sharing: no measurable penalty in measurement {} of {ATTEMPTS} ({seen}){}",
            unmeasurable.len() + 1,
            pause.map_or(String::new(), |s| format!("; measuring again in {s} s"))
        );
        unmeasurable.push(seen);
        if let Some(s) = pause {
            std::thread::sleep(std::time::Duration::from_secs(s));
        } else {
            bail!(
                "no measurable false-sharing penalty in {ATTEMPTS} measurements: median thread \
                 time (both threads) {}; a penalty counts when false sharing makes the threads \
                 at least {:.0} % slower. The two CPUs may share one core's L1 (SMT siblings, or \
                 vCPUs the host placed on one core) or the machine is busy: rerun on a quieter \
                 machine or with more --ops",
                unmeasurable.join("; "),
                (MEASURABLE_PENALTY - 1.0) * 100.0
            );
        }
    };
    let frequency = match clock {
        Some(f) => f,
        None => frequency(base)?,
    };

    let reps_per_line = ops / LINES;
    let events = LINES * (4 * reps_per_line - 1);
    let references = 2 * 2 * ops;
    let extra_s = fs.thread_sum_s - nofs.thread_sum_s;
    let tau_cycles = extra_s * frequency.ghz * 1e9 / events as f64;
    let per_ref = |t: &ModeTimes| t.wall_s * frequency.ghz * 1e9 / (2 * ops) as f64;
    Ok(Calibration {
        ops_per_thread: ops,
        lines: LINES,
        repetitions: args.repetitions,
        attempts,
        pinned_cpus: pinned,
        cycles_per_reference_fs: per_ref(&fs),
        cycles_per_reference_nofs: per_ref(&nofs),
        false_sharing: fs,
        no_false_sharing: nofs,
        events,
        references,
        tau_cycles,
        tau_ns: tau_cycles / frequency.ghz,
        frequency,
    })
}

/// Pinned CPUs, medians with and without false sharing.
type Measured = (Option<[u32; 2]>, ModeTimes, ModeTimes);

/// Runs the benchmark and takes the medians of its output.
fn measure(exe: &Path, ops: u64, reps: u32) -> Result<Measured> {
    let out = crate::partial::output_of(Command::new(exe).args([
        ops.to_string(),
        LINES.to_string(),
        reps.to_string(),
    ]))
    .with_context(|| format!("running {}", exe.display()))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let bad = |line: &str| anyhow::anyhow!("unexpected benchmark output line {line:?}");
    let mut pinned = None;
    // [mode] → (wall, thread 0, thread 1) per run; mode 0 = fs, 1 = nofs.
    let mut runs: [Vec<[f64; 3]>; 2] = [Vec::new(), Vec::new()];
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["pinned", "none"] => pinned = None,
            ["pinned", a, b] => {
                pinned = Some([
                    a.parse().map_err(|_| bad(line))?,
                    b.parse().map_err(|_| bad(line))?,
                ])
            }
            ["run", mode, w, t0, t1] => {
                let slot = match *mode {
                    "fs" => 0,
                    "nofs" => 1,
                    _ => return Err(bad(line)),
                };
                let mut v = [0.0; 3];
                for (x, s) in v.iter_mut().zip([w, t0, t1]) {
                    *x = s.parse().map_err(|_| bad(line))?;
                }
                runs[slot].push(v);
            }
            _ => return Err(bad(line)),
        }
    }
    let times = |r: &[[f64; 3]]| -> Result<ModeTimes> {
        if r.len() != reps as usize {
            bail!(
                "benchmark printed {} runs of a mode, expected {reps}:\n{text}",
                r.len()
            );
        }
        let col = |i: usize| median(r.iter().map(|x| x[i]).collect());
        Ok(ModeTimes {
            wall_s: col(0),
            thread_s: [col(1), col(2)],
            thread_sum_s: median(r.iter().map(|x| x[1] + x[2]).collect()),
        })
    };
    Ok((pinned, times(&runs[0])?, times(&runs[1])?))
}

/// The core clock without measuring it: cpufreq's maximum, else /proc/cpuinfo's "cpu MHz",
/// else the base model's.
fn frequency(base: &MachineModel) -> Result<Frequency> {
    let sys = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq";
    if let Some(khz) = std::fs::read_to_string(sys)
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|k| *k > 0.0)
    {
        return Ok(Frequency {
            ghz: khz / 1e6,
            source: sys.to_string(),
        });
    }
    let cpuinfo = "/proc/cpuinfo";
    if let Some(ghz) = cpuinfo_ghz() {
        return Ok(Frequency {
            ghz,
            source: format!("{cpuinfo} \"cpu MHz\" of the first CPU (no cpufreq)"),
        });
    }
    match &base.bandwidth {
        Some(bw) => Ok(Frequency {
            ghz: bw.ghz,
            source: format!(
                "base model {} bandwidth.ghz (neither {sys} nor {cpuinfo} gave a clock)",
                base.name
            ),
        }),
        None => bail!(
            "no core clock: neither {sys} nor {cpuinfo} (\"cpu MHz\") gave one, and the base \
             model {} has no bandwidth.ghz",
            base.name
        ),
    }
}

/// Puts the measured τ and clock into `model`'s bandwidth section (created with the audit's
/// default IPC when the base model has none).
pub fn apply(cal: &Calibration, model: &mut MachineModel) {
    let bw = model.bandwidth.get_or_insert_with(|| BandwidthModel {
        ghz: cal.frequency.ghz,
        ipc: DEFAULT_IPC,
        flops_per_cycle: None,
        false_sharing_penalty_cycles: None,
        page_fault_ns: None,
        barrier_ns: None,
        region_ns: None,
        ipc_total: None,
        paths: Default::default(),
    });
    bw.ghz = cal.frequency.ghz;
    bw.false_sharing_penalty_cycles = Some(cal.tau_cycles);
}

/// The comment lines about τ at the top of the written model.
pub fn model_comment(cal: &Calibration) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# tau = {:.2} cycles = {:.3} ns per false-sharing event (Pluto's events: 1 per memory",
        cal.tau_cycles, cal.tau_ns
    );
    let _ = writeln!(
        text,
        "# reference); clock {:.3} GHz from {}.",
        cal.frequency.ghz, cal.frequency.source
    );
    let _ = writeln!(
        text,
        "# Benchmark: 2 threads x {} modifies over {} lines, median of {} runs; threads pinned: {}.",
        cal.ops_per_thread,
        cal.lines,
        cal.repetitions,
        pinned_text(cal.pinned_cpus)
    );
    text
}

fn pinned_text([a, b]: [u32; 2]) -> String {
    format!("CPUs {a} and {b}")
}

/// The human summary.
pub fn render(c: &Calibration) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "false-sharing calibration (thesis §4.2.4): 2 threads x {} modifies of 4-byte ints at \
         64-byte strides over {} lines, median of {} runs per mode",
        c.ops_per_thread, c.lines, c.repetitions
    );
    let _ = writeln!(o, "  threads pinned: {}", pinned_text(c.pinned_cpus));
    if c.attempts > 1 {
        let _ = writeln!(
            o,
            "  measurement {} of {ATTEMPTS}: the earlier ones showed no measurable penalty",
            c.attempts
        );
    }
    let _ = writeln!(
        o,
        "  clock: {:.3} GHz (from {})",
        c.frequency.ghz, c.frequency.source
    );
    for (name, t, per_ref) in [
        (
            "with false sharing   ",
            &c.false_sharing,
            c.cycles_per_reference_fs,
        ),
        (
            "without false sharing",
            &c.no_false_sharing,
            c.cycles_per_reference_nofs,
        ),
    ] {
        let _ = writeln!(
            o,
            "  {name}: wall {:.4} s, threads {:.4} s + {:.4} s (sum {:.4} s), {per_ref:.2} \
             cycles per reference",
            t.wall_s, t.thread_s[0], t.thread_s[1], t.thread_sum_s
        );
    }
    let _ = writeln!(
        o,
        "  false-sharing events (Pluto φ̃′): {} for {} references",
        c.events, c.references
    );
    let _ = writeln!(
        o,
        "  tau = {:.2} cycles = {:.3} ns per false-sharing event",
        c.tau_cycles, c.tau_ns
    );
    o
}
