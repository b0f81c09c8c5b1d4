//! `cachescope simulate --sweep`: one replay per cache configuration, summarized side by side.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cachescope_schema::TraceFile;
use cachescope_sim::counters::SimReport;
use cachescope_sim::{
    simulate_exact_many, simulate_parallel, MachineModel, ParallelConfig, ThreadMapping,
};
use serde::Serialize;

use super::simulate::pct;
use crate::cli::SimulateArgs;
use crate::output::{self, thousands};
use crate::progress::Progress;

/// Configurations one command may run (each holds a whole simulated hierarchy).
const MAX_CONFIGS: usize = 256;

/// Cache lines all configurations of one exact-engine sweep may hold together (four of the
/// largest hierarchies a model may have, [`cachescope_sim::model::MAX_TOTAL_LINES`]; about
/// 1.2 GB).
const MAX_SWEEP_LINES: u64 = 4 * cachescope_sim::model::MAX_TOTAL_LINES;

/// One swept field and its values.
struct Sweep {
    key: String,
    values: Vec<String>,
}

fn parse(spec: &str) -> Result<Sweep> {
    let Some((key, values)) = spec.split_once('=') else {
        bail!("--sweep {spec:?}: expected KEY=V1,V2,..., e.g. levels.L1.size=16K,32K,64K");
    };
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    if key.trim().is_empty() || values.iter().any(String::is_empty) {
        bail!(
            "--sweep {spec:?}: expected KEY=V1,V2,... with no empty value, e.g. \
             levels.L1.size=16K,32K,64K"
        );
    }
    if let Some(v) = values
        .iter()
        .enumerate()
        .find_map(|(i, v)| values[..i].contains(v).then_some(v))
    {
        bail!("--sweep {spec:?}: value {v:?} is given twice");
    }
    Ok(Sweep {
        key: key.trim().to_string(),
        values,
    })
}

/// Every combination of the sweeps' values, the first sweep varying slowest: each a list of
/// `KEY=VALUE` overrides.
fn combinations(sweeps: &[Sweep]) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new()];
    for s in sweeps {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                s.values.iter().map(move |v| {
                    let mut c = prefix.clone();
                    c.push(format!("{}={v}", s.key));
                    c
                })
            })
            .collect();
    }
    out
}

/// Whether setting `second` (any of its values) changes the field `first` sets: applied after
/// `second`, one of `first`'s values then changes the model (it would not if they were
/// different fields, `first` having been applied before). Overrides that fail are no
/// evidence (the sweep reports them itself).
fn same_field(
    base: &MachineModel,
    source: &str,
    first: &str,
    first_values: &[String],
    second: &str,
    second_values: &[String],
) -> bool {
    let apply = |m: &MachineModel, kv: String| -> Option<MachineModel> {
        let mut m = m.clone();
        m.apply_overrides(&[kv], source).ok()?;
        Some(m)
    };
    first_values.iter().any(|f| {
        let Some(with_first) = apply(base, format!("{first}={f}")) else {
            return false;
        };
        second_values.iter().any(|v| {
            let Some(both) = apply(&with_first, format!("{second}={v}")) else {
                return false;
            };
            apply(&both, format!("{first}={f}")).is_some_and(|again| again != both)
        })
    })
}

/// One configuration's result in the JSON.
#[derive(Serialize)]
struct Run<'a> {
    /// The swept fields' values (`KEY=VALUE`), on top of the model and its `--set`s.
    config: &'a [String],
    report: &'a SimReport,
}

#[derive(Serialize)]
struct SweepJson<'a> {
    schema: &'static str,
    trace: String,
    runs: Vec<Run<'a>>,
}

/// Runs every configuration (the exact engine reads the trace once for all of them; the
/// parallel engine runs them in turn) and prints or writes the summary.
pub fn run(
    a: &SimulateArgs,
    trace: &TraceFile,
    base: &MachineModel,
    parallel: Option<ParallelConfig>,
) -> Result<ExitCode> {
    let sweeps = a
        .sweep
        .iter()
        .map(|s| parse(s))
        .collect::<Result<Vec<_>>>()?;
    // Two sweeps of one field would give configurations whose last value silently wins.
    for (i, s) in sweeps.iter().enumerate() {
        if sweeps[..i].iter().any(|t| t.key == s.key) {
            bail!(
                "--sweep {}: the field is swept twice; give all its values in one --sweep \
                 (KEY=V1,V2,...)",
                s.key
            );
        }
    }
    // Counted before any is built: a few long value lists multiply to billions.
    let count = sweeps
        .iter()
        .try_fold(1usize, |n, s| n.checked_mul(s.values.len()))
        .filter(|&n| n <= MAX_CONFIGS);
    if count.is_none() {
        let product = sweeps
            .iter()
            .map(|s| s.values.len().to_string())
            .collect::<Vec<_>>()
            .join(" x ");
        bail!("--sweep gives {product} configurations; at most {MAX_CONFIGS} per command");
    }
    // Fields named two ways (`levels.0.size`, `levels.L1.size`), or swept and `--set` too
    // (the header showed the `--set` value, which no run used): found by applying the
    // overrides, so every spelling of a field counts.
    for (i, s) in sweeps.iter().enumerate() {
        for t in &sweeps[..i] {
            if same_field(base, &a.machine, &t.key, &t.values, &s.key, &s.values) {
                bail!(
                    "--sweep {} and --sweep {} vary the same field; give all its values in one \
                     --sweep (KEY=V1,V2,...)",
                    t.key,
                    s.key
                );
            }
        }
        for set in &a.set {
            let Some((key, value)) = set.split_once('=') else {
                continue;
            };
            let value = [value.to_string()];
            if same_field(base, &a.machine, key, &value, &s.key, &s.values) {
                bail!(
                    "--set {set}: the field is also swept (--sweep {}); each run uses the \
                     swept value, so drop the --set or add its value to the sweep",
                    s.key
                );
            }
        }
    }
    let configs = combinations(&sweeps);
    let models = configs
        .iter()
        .map(|c| {
            let mut m = base.clone();
            m.apply_overrides(c, &a.machine)
                .with_context(|| format!("--sweep configuration {}", c.join(" ")))?;
            Ok(m)
        })
        .collect::<Result<Vec<_>>>()?;
    // Values written two ways (`16K,16384`) give one model twice: the same replay run twice
    // and shown as two results.
    for (i, m) in models.iter().enumerate() {
        if let Some(j) = models[..i].iter().position(|earlier| earlier == m) {
            bail!(
                "--sweep configurations {} and {} give the same model; give each value once",
                configs[j].join(" "),
                configs[i].join(" ")
            );
        }
    }
    // The exact engine replays every configuration at once: their hierarchies are in memory
    // together (eight of the largest a model may have took 2.25 GB).
    let lines: u64 = models.iter().map(MachineModel::total_lines).sum();
    if parallel.is_none() && lines > MAX_SWEEP_LINES {
        bail!(
            "--sweep: the {} configurations hold {lines} cache lines together, more than the \
             {MAX_SWEEP_LINES} one command replays at once (each line takes memory); sweep \
             fewer values per command, or use --engine parallel, which replays them in turn",
            models.len()
        );
    }
    let mapping = ThreadMapping::parse(&a.map)?;
    let progress = Progress::start(
        &format!("simulating {} configurations", models.len()),
        trace,
    );
    let reports = match parallel {
        None => simulate_exact_many(trace, &models, &mapping)?,
        Some(cfg) => models
            .iter()
            .map(|m| simulate_parallel(trace, m, &mapping, cfg))
            .collect::<Result<Vec<_>, _>>()?,
    };
    drop(progress);
    let json = SweepJson {
        schema: "cachescope.sweep/1",
        trace: a.trace.display().to_string(),
        runs: configs
            .iter()
            .zip(&reports)
            .map(|(config, report)| Run { config, report })
            .collect(),
    };
    output::report(&json, a.json.json.as_deref(), || {
        render(
            &a.trace.display().to_string(),
            base,
            &configs,
            &models,
            &reports,
        )
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The summary table: per configuration, each level's miss rate and misses, coherence
/// misses (true / false), invalidations and the bytes to and from memory.
///
/// Coherence misses are those of the outermost private level: a line another core's write
/// took away misses in every private level that held it, and adding the levels up counted
/// one such miss twice with a private L2 (a sweep of `levels.L2.shared` showed false sharing
/// doubling).
fn render(
    trace: &str,
    base: &MachineModel,
    configs: &[Vec<String>],
    models: &[MachineModel],
    reports: &[SimReport],
) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "trace    {trace}");
    let _ = writeln!(o, "machine  {base}");
    if let Some(r) = reports.first() {
        let _ = writeln!(o, "engine   {}", r.engine);
    }
    let _ = writeln!(o, "{} configurations\n", configs.len());
    let labels: Vec<String> = configs.iter().map(|c| c.join(" ")).collect();
    let width = labels.iter().map(String::len).max().unwrap_or(6).max(6);
    let names = |r: &SimReport| -> Vec<String> {
        r.levels.iter().map(|l| l.counters.level.clone()).collect()
    };
    let first = reports.first().map(names).unwrap_or_default();
    // Levels named by position where the sweep renames them (or changes their number).
    let levels: Vec<String> = if reports.iter().all(|r| names(r) == first) {
        first
    } else {
        let most = reports.iter().map(|r| r.levels.len()).max().unwrap_or(0);
        (1..=most).map(|i| format!("level {i}")).collect()
    };
    let mut header = format!("{:<width$}", "config");
    for l in &levels {
        let _ = write!(
            header,
            " {:>9} {:>13}",
            format!("{l} miss%"),
            format!("{l} misses")
        );
    }
    let _ = write!(
        header,
        " {:>12} {:>12} {:>12} {:>16}",
        "coh-true", "coh-false", "inval", "memory bytes"
    );
    let _ = writeln!(o, "{header}");
    for ((label, r), m) in labels.iter().zip(reports).zip(models) {
        let mut row = format!("{label:<width$}");
        for l in &r.levels {
            let c = &l.counters;
            let _ = write!(
                row,
                " {:>9} {:>13}",
                pct(c.misses.total(), c.accesses.total()),
                thousands(c.misses.total())
            );
        }
        for _ in r.levels.len()..levels.len() {
            let _ = write!(row, " {:>9} {:>13}", "-", "-");
        }
        let private = m
            .levels
            .iter()
            .rposition(|l| !l.shared)
            .and_then(|i| r.levels.get(i));
        let (coh_true, coh_false) = private.map_or((0, 0), |l| {
            let misses = &l.counters.misses;
            (misses.coherence_true, misses.coherence_false)
        });
        let inval: u64 = r.cores.iter().map(|c| c.invalidations_received).sum();
        let memory: u64 = r
            .paths
            .iter()
            .filter(|p| p.path.ends_with("-mem"))
            .map(|p| p.total.read + p.total.write)
            .sum();
        let _ = writeln!(
            o,
            "{row} {:>12} {:>12} {:>12} {:>16}",
            thousands(coh_true),
            thousands(coh_false),
            thousands(inval),
            thousands(memory)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_give_every_combination_the_first_varying_slowest() {
        let s = [
            parse("levels.L1.size=16K,32K").unwrap(),
            parse("coherence=msi, mesi").unwrap(),
        ];
        let c = combinations(&s);
        assert_eq!(
            c,
            vec![
                vec!["levels.L1.size=16K", "coherence=msi"],
                vec!["levels.L1.size=16K", "coherence=mesi"],
                vec!["levels.L1.size=32K", "coherence=msi"],
                vec!["levels.L1.size=32K", "coherence=mesi"],
            ]
        );
        assert!(parse("levels.L1.size").is_err());
        assert!(parse("levels.L1.size=").is_err());
        assert!(parse("=16K").is_err());
        // An empty or repeated value is a mistake, not a configuration to skip or run twice.
        assert!(parse("levels.L1.size=16K,,32K").is_err());
        assert!(parse("levels.L1.size=16K,").is_err());
        assert!(parse("levels.L1.size=16K,32K,16K").is_err());
    }
}
