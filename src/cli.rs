//! Command-line definitions.

use std::path::PathBuf;

use cachescope_schema::event::MAX_ALLOC_CALLERS;
use cachescope_schema::synth::Workload;
use clap::{Args, Parser, Subcommand};

/// Trace-driven multithreaded memory-hierarchy simulator.
#[derive(Parser, Debug)]
#[command(name = "cachescope", version, about, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug; CACHESCOPE_LOG overrides).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the main job end to end on an example and write the reports.
    Demo(DemoArgs),
    /// Inspect, check and generate trace files.
    #[command(subcommand)]
    Trace(TraceCommand),
    /// Convert another tool's memory trace into a cachescope trace.
    #[command(subcommand)]
    Import(ImportCommand),
    /// Replay a trace through a simulated cache hierarchy.
    Simulate(SimulateArgs),
    /// Compile and link C/C++ for recording: `CC="cachescope cc" make`.
    ///
    /// Leading options (before the compiler's own): --clang (use clang-14/clang instead of
    /// gcc), --compiler PROG (any gcc- or clang-compatible driver), --capture tsan|sancov
    /// (sancov: clang's trace-loads/trace-stores instead of ThreadSanitizer calls). Everything
    /// else goes to the compiler, with the instrumentation and the shim added.
    #[command(disable_help_flag = true)]
    Cc(CcArgs),
    /// Run a program built with `cachescope cc` and write its trace.
    Record(RecordArgs),
    /// Bandwidth requirement curves, dominance breakdown and runtime estimate (thesis
    /// §4.3–4.4).
    Bandwidth(BandwidthArgs),
    /// Find false sharing: exit 0 when clean, 1 when findings exceed the thresholds.
    Audit(AuditArgs),
    /// Measure machine parameters natively and write them into a machine model.
    Calibrate(CalibrateArgs),
}

/// `cachescope calibrate`.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Measure τ, the cost of one false-sharing event in cycles (thesis §4.2.4; gcc needed).
    #[arg(long)]
    pub false_sharing: bool,
    /// Measure clock, IPC, FLOPs per cycle, page-fault cost and read/write/combined bandwidth per
    /// data path, per core and with all cores (thesis §4.3–4.4, Table 4.3; gcc, x86-64 and the
    /// recording shim needed; docs/calibrate.md).
    #[arg(long)]
    pub bandwidth: bool,
    /// Write the base model with the measurements here (TOML, for --machine).
    #[arg(short, long, value_name = "FILE.toml")]
    pub output: Option<PathBuf>,
    /// Base machine model for the written model (its levels set the --bandwidth working sets):
    /// a preset or a TOML file [default: host with --bandwidth, else ivybridge-4c].
    #[arg(long, short)]
    pub machine: Option<String>,
    /// Timed runs per false-sharing mode (the medians are used) and per bandwidth figure (the
    /// best is used).
    #[arg(long, default_value_t = 7)]
    pub repetitions: u32,
    /// Shorter --bandwidth runs for tests and smoke checks: at most 5 repetitions of ~20 ms
    /// instead of ~40 ms each (noisier figures).
    #[arg(long)]
    pub quick: bool,
    /// Modify operations per thread and run (at least 64; rounded down to a multiple of 64).
    #[arg(long, default_value_t = 1 << 24, value_parser = clap::value_parser!(u64).range(64..))]
    pub ops: u64,
    /// Also write all measurements as JSON to FILE; `--json` alone or `--json -`: JSON on
    /// stdout instead of the summary.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
}

/// `cachescope audit`.
#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The trace file.
    pub trace: PathBuf,
    /// Machine model (line size, τ, IPC): a preset or a TOML file.
    #[arg(long, short, default_value = "ivybridge-4c")]
    pub machine: String,
    /// Thresholds and prediction settings (TOML; see docs/audit.md).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Accept the findings listed in this file (fingerprints, as written by --write-baseline).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Write the current findings' fingerprints as a baseline file (which accepts them: the
    /// run exits 0).
    #[arg(long, value_name = "FILE")]
    pub write_baseline: Option<PathBuf>,
    /// Write SARIF 2.1.0 (for GitHub code scanning and other CI systems).
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
    /// Source paths in SARIF are made relative to this directory (default: current directory).
    #[arg(long, value_name = "DIR")]
    pub repo_root: Option<PathBuf>,
    #[command(flatten)]
    pub json: JsonArg,
}

/// `cachescope cc`.
#[derive(Args, Debug)]
pub struct CcArgs {
    /// Wrapper options, then the compiler's arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// `cachescope record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Output trace (default: PROGRAM-NAME.cstrace in the current directory). An existing trace
    /// is replaced only by a complete trace; an existing file that is neither a trace nor empty
    /// is refused before the run.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Callers recorded per heap allocation beyond its site (0 to 12): they name blocks that
    /// library code or the program's own wrappers allocate by the program's line that asked
    /// for them. The walk stops where the stack ends; it costs about 1.5–2.5 µs per
    /// allocation (1 M allocations 12 frames deep: 0.3 s recorded without callers, 2.7 s
    /// with twelve); 0 for programs that allocate millions of blocks.
    #[arg(long, default_value_t = MAX_ALLOC_CALLERS as u8,
          value_parser = clap::value_parser!(u8).range(0..=MAX_ALLOC_CALLERS as i64))]
    pub alloc_callers: u8,
    /// The program is a launcher (a wrapper script, `env`, `taskset`, `make`, …) or uses
    /// libraries built with `cachescope cc`: record the first process whose executable, or
    /// else a library it starts with, was. Implied for scripts, and for launchers whose
    /// arguments name such a program.
    #[arg(long)]
    pub follow: bool,
    /// The program and its arguments (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 1.., required = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// `cachescope import ...`.
#[derive(Subcommand, Debug)]
pub enum ImportCommand {
    /// Valgrind Lackey output (`valgrind --tool=lackey --trace-mem=yes --log-file=FILE`).
    Lackey {
        /// Lackey output file, or `-` for stdin.
        input: PathBuf,
        /// Output trace file.
        #[arg(short, long)]
        output: PathBuf,
        /// Program name to record in the trace header.
        #[arg(long, default_value = "unknown")]
        program: String,
    },
}

/// `cachescope simulate`.
#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// The trace file.
    pub trace: PathBuf,
    /// Machine model: a preset (ivybridge-4c, cachegrind, host) or a TOML file.
    #[arg(long, short, default_value = "ivybridge-4c")]
    pub machine: String,
    /// Override one model field, e.g. `--set levels.L1.size=64K --set coherence=mesi`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Replay once per value, e.g. `--sweep levels.L1.size=16K,32K,64K`; several sweeps give
    /// every combination. One summary row per configuration (the trace is read once).
    #[arg(long, value_name = "KEY=V1,V2,...")]
    pub sweep: Vec<String>,
    /// Thread placement: one-to-one, round-robin, or THREAD:CORE,... pairs.
    #[arg(long, default_value = "one-to-one")]
    pub map: String,
    /// Cachegrind's I1 geometry SIZE,ASSOC,LINE (with --machine cachegrind).
    #[arg(long = "I1", value_name = "SIZE,ASSOC,LINE")]
    pub i1: Option<String>,
    /// Cachegrind's D1 geometry SIZE,ASSOC,LINE (with --machine cachegrind).
    #[arg(long = "D1", value_name = "SIZE,ASSOC,LINE")]
    pub d1: Option<String>,
    /// Cachegrind's LL geometry SIZE,ASSOC,LINE (with --machine cachegrind).
    #[arg(long = "LL", value_name = "SIZE,ASSOC,LINE")]
    pub ll: Option<String>,
    /// Use the complete chunks of a damaged or interrupted trace.
    #[arg(long)]
    pub allow_incomplete: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub json: JsonArg,
}

/// Which engine simulates, and how (`simulate`, `bandwidth`).
#[derive(Args, Debug)]
pub struct EngineArgs {
    /// Simulation engine: `exact` (the reference: one event at a time in global order) or
    /// `parallel` (one worker per simulated core, bound-weave with --slack; same results;
    /// see docs/parallel-engine.md).
    #[arg(long, value_enum, default_value = "exact")]
    pub engine: EngineArg,
    /// Parallel engine: quantum in time units (how long each core runs apart from the others
    /// before they are woven; never changes the results, only the speed). Default 10000.
    #[arg(long, value_name = "N")]
    pub slack: Option<u64>,
    /// Parallel engine: host threads (default: available cores). Never changes the results.
    #[arg(long, value_name = "K")]
    pub threads: Option<usize>,
}

/// `cachescope bandwidth`.
#[derive(Args, Debug)]
pub struct BandwidthArgs {
    /// The trace file.
    pub trace: PathBuf,
    /// Machine model with a `[bandwidth]` section: a preset (ivybridge-4c) or a TOML file, e.g.
    /// from `cachescope calibrate --bandwidth -o host.toml`.
    #[arg(long, short, default_value = "ivybridge-4c")]
    pub machine: String,
    /// Override one model field, e.g. `--set bandwidth.ipc=2 --set levels.L1.size=64K`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Thread placement: one-to-one, round-robin, or THREAD:CORE,... pairs.
    #[arg(long, default_value = "one-to-one")]
    pub map: String,
    /// Smoothing window W in time units (thesis §4.3.1).
    #[arg(long, short = 'W', default_value_t = cachescope_sim::bandwidth::DEFAULT_WINDOW,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub window: u64,
    /// Source attribution samples one access in N.
    #[arg(long, value_name = "N", default_value_t = cachescope_sim::bandwidth::DEFAULT_SAMPLE_PERIOD,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub sample_period: u32,
    /// Write the plots (bandwidth curves per path, dominance bars) into this directory.
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Use the complete chunks of a damaged or interrupted trace.
    #[arg(long)]
    pub allow_incomplete: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub json: JsonArg,
}

impl EngineArgs {
    /// The parallel engine's configuration, or `None` for the exact engine.
    pub fn parallel_config(&self) -> anyhow::Result<Option<cachescope_sim::ParallelConfig>> {
        match self.engine {
            EngineArg::Exact => {
                if self.threads.is_some() {
                    anyhow::bail!("--threads is an option of --engine parallel");
                }
                if self.slack.is_some() {
                    anyhow::bail!("--slack is an option of --engine parallel");
                }
                Ok(None)
            }
            EngineArg::Parallel => Ok(Some(cachescope_sim::ParallelConfig {
                slack: self
                    .slack
                    .unwrap_or(cachescope_sim::parallel::DEFAULT_SLACK),
                threads: self
                    .threads
                    .unwrap_or_else(|| cachescope_sim::ParallelConfig::default().threads),
            })),
        }
    }
}

/// `cachescope simulate --engine`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineArg {
    /// The exact engine.
    Exact,
    /// The parallel slack-based engine.
    Parallel,
}

/// `cachescope demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Directory for the trace and the reports.
    #[arg(long, default_value = "demo-out")]
    pub out: PathBuf,
}

/// Where JSON goes: `--json` alone writes to stdout, `--json FILE` to a file.
#[derive(Args, Debug, Clone)]
pub struct JsonArg {
    /// JSON: `--json` alone (or `-`) prints it instead of the report; `--json FILE` writes it
    /// to FILE and still prints the report.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
}

/// `cachescope trace ...`.
#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Threads, events by kind, time span, size per event.
    Info {
        /// The trace file.
        trace: PathBuf,
        /// Use the complete chunks of a damaged or interrupted trace.
        #[arg(long)]
        allow_incomplete: bool,
        #[command(flatten)]
        json: JsonArg,
    },
    /// Print events: one thread in program order, or all in global (time, thread) order.
    Dump {
        /// The trace file.
        trace: PathBuf,
        /// Only this thread, with its own (unaligned) clock.
        #[arg(long)]
        thread: Option<u32>,
        /// Stop after this many events.
        #[arg(long)]
        limit: Option<u64>,
        /// Skip this many events first.
        #[arg(long, default_value_t = 0)]
        skip: u64,
        /// Use the complete chunks of a damaged or interrupted trace.
        #[arg(long)]
        allow_incomplete: bool,
        /// One JSON object per line instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check every frame, chunk and checksum; report what is recoverable. Exit 2 if damaged.
    Verify {
        /// The trace file.
        trace: PathBuf,
        #[command(flatten)]
        json: JsonArg,
    },
    /// Write a synthetic trace (for tests, benches and experiments).
    Gen(GenArgs),
}

/// `cachescope trace gen`.
#[derive(Args, Debug)]
pub struct GenArgs {
    /// The access pattern.
    #[arg(value_parser = parse_workload)]
    pub workload: Workload,
    /// Output trace file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Number of threads.
    #[arg(long, default_value_t = 2)]
    pub threads: u32,
    /// Size of the main data structure, bytes (suffixes K, M, G: powers of 1024).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    pub size: u64,
    /// Passes over the data.
    #[arg(long, default_value_t = 4)]
    pub iterations: u32,
    /// Random seed (random, pointer-chase).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stride in bytes (strided).
    #[arg(long, default_value = "64", value_parser = parse_size)]
    pub stride: u64,
    /// false-sharing: give each thread its own part of the array (no false sharing).
    #[arg(long)]
    pub padded: bool,
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    s.parse()
}

/// Parses a byte size such as `4096`, `64K`, `1M`, `2G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'B' => 1,
                _ => return Err(format!("unknown size suffix in {s:?} (use K, M or G)")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a size: {s:?} (examples: 4096, 64K, 1M)"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert!(parse_size("1X").is_err());
        assert!(parse_size("99999999999G").is_err());
        assert!(parse_size("").is_err());
    }
}
