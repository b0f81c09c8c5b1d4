//! `cachescope demo`: the main job end to end on a real OpenMP program.
//!
//! Builds four example programs (sources embedded from `examples/`) with `cachescope cc`,
//! records each with two threads, verifies the traces, replays them on the `ivybridge-4c` model
//! with the exact engine, and writes the reports:
//! * the false-sharing benchmark of thesis Fig. 4.3 and its padded fix, audited for false
//!   sharing;
//! * the naive and the temporally blocked 2D Jacobi solver of thesis §4.3.4, analysed for
//!   bandwidth requirements, dominance and runtime (text, JSON and SVG plots).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use cachescope_analysis::audit::{audit, AuditConfig};
use cachescope_analysis::bandwidth::{analyse, svg, text as bandwidth_text};
use cachescope_analysis::symbols::Symbolizer;
use cachescope_schema::event::MAX_ALLOC_CALLERS;
use cachescope_schema::{verify_file, TraceFile, TraceSummary};
use cachescope_sim::bandwidth::BandwidthConfig;
use cachescope_sim::counters::SimReport;
use cachescope_sim::{simulate_exact, simulate_exact_with_bandwidth, MachineModel, ThreadMapping};
use cachescope_tracer::record::{inspect, record, RecordOptions};
use cachescope_tracer::shim;

use super::audit::{audit_machine, render as render_audit};
use super::simulate::render as render_simulation;
use super::trace::render_info;
use crate::cli::DemoArgs;
use crate::output::{self, thousands, write_json};

/// What the demo explains about a program.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Analysis {
    /// The false-sharing audit.
    Audit,
    /// Bandwidth curves, dominance and runtime estimate.
    Bandwidth,
}

/// The programs the demo records: name, source, arguments, analysis.
const PROGRAMS: &[(&str, &str, &[&str], Analysis)] = &[
    (
        "false_sharing",
        include_str!("../../examples/false_sharing.c"),
        &["2000"],
        Analysis::Audit,
    ),
    (
        "false_sharing_padded",
        include_str!("../../examples/false_sharing_padded.c"),
        &["2000"],
        Analysis::Audit,
    ),
    // Two 8 MiB grids (far beyond the model's 3 MiB L2), 12 sweeps; the blocked version does
    // all 12 per pass over the grid (tiles of 16 rows).
    (
        "jacobi_naive",
        include_str!("../../examples/jacobi_naive.c"),
        &["1024", "12"],
        Analysis::Bandwidth,
    ),
    (
        "jacobi_blocked",
        include_str!("../../examples/jacobi_blocked.c"),
        &["1024", "12", "16", "12"],
        Analysis::Bandwidth,
    ),
];

/// Runs the demo into `args.out`.
pub fn run(args: &DemoArgs) -> Result<ExitCode> {
    let out = &args.out;
    if out.exists() && !out.is_dir() {
        anyhow::bail!(
            "--out {}: exists and is not a directory (the demo writes its reports into a directory)",
            out.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let exe = std::env::current_exe().context("locating the cachescope executable")?;
    let shim_path = shim::locate(&exe)?;
    let model = MachineModel::load("ivybridge-4c")?;
    let mut written = Vec::new();
    let mut results = Vec::new();
    let mut bandwidth_results = Vec::new();
    for (name, source, prog_args, analysis) in PROGRAMS {
        let src = out.join(format!("{name}.c"));
        std::fs::write(&src, source).with_context(|| format!("writing {}", src.display()))?;
        let bin = out.join(name);
        output::println(format_args!("== {name}"))?;
        output::println(format_args!(
            "1/5 building with `cachescope cc -O2 -fopenmp` -> {}",
            bin.display()
        ))?;
        let status = Command::new(&exe)
            .args(["cc", "-O2", "-fopenmp"])
            .arg(&src)
            .arg("-o")
            .arg(&bin)
            .status()
            .context("running cachescope cc")?;
        if !status.success() {
            bail!(
                "building {} failed ({status}); is gcc installed?",
                src.display()
            );
        }
        let trace_path = out.join(format!("{name}.cstrace"));
        output::println(format_args!(
            "2/5 recording with 2 threads -> {}",
            trace_path.display()
        ))?;
        let outcome = record(&RecordOptions {
            program: bin.clone(),
            args: prog_args.iter().map(OsString::from).collect(),
            output: trace_path.clone(),
            shim: shim_path.clone(),
            time_unit: Some(inspect(&bin)?.time_unit()),
            alloc_callers: MAX_ALLOC_CALLERS,
            env: vec![("OMP_NUM_THREADS".into(), "2".into())],
        })?;
        if !outcome.status.success() || !outcome.complete {
            bail!(
                "recording {name} failed: program {}, trace {}",
                outcome.status,
                if outcome.complete {
                    "complete"
                } else {
                    "incomplete or missing"
                }
            );
        }
        output::println("3/5 verifying every chunk")?;
        let report = verify_file(&trace_path)?;
        if let Some(problem) = report.problem() {
            bail!("the recorded trace does not verify: {problem}");
        }
        let trace = TraceFile::open(&trace_path)?;
        let summary = TraceSummary::compute(&trace)?;
        let info = render_info(&trace_path, &summary);
        written.push(write_report(out, &format!("{name}.trace-info.txt"), &info)?);
        written.push(write_json_report(
            out,
            &format!("{name}.trace-info.json"),
            &summary,
        )?);
        written.push(write_json_report(
            out,
            &format!("{name}.trace-verify.json"),
            &report,
        )?);

        output::println("4/5 simulating on ivybridge-4c (exact engine)")?;
        let (sim, bandwidth) = match analysis {
            Analysis::Audit => (
                simulate_exact(&trace, &model, &ThreadMapping::OneToOne)?,
                None,
            ),
            Analysis::Bandwidth => {
                let (sim, timeline) = simulate_exact_with_bandwidth(
                    &trace,
                    &model,
                    &ThreadMapping::OneToOne,
                    BandwidthConfig::default(),
                )?;
                (sim, Some(timeline))
            }
        };
        let sim_text = render_simulation(&trace_path.display().to_string(), &sim);
        written.push(write_report(
            out,
            &format!("{name}.simulate.txt"),
            &sim_text,
        )?);
        written.push(write_json_report(
            out,
            &format!("{name}.simulate.json"),
            &sim,
        )?);
        output::println(format_args!("\n{info}\n{sim_text}"))?;

        if let Some(timeline) = bandwidth {
            output::println("5/5 bandwidth requirements, dominance and runtime estimate")?;
            let mut symbols = Symbolizer::new(trace.modules());
            let root = std::env::current_dir().context("current directory")?;
            let a = analyse(&timeline, &model.name, &mut symbols, &root);
            let text = bandwidth_text::summary(&a);
            written.push(write_report(out, &format!("{name}.bandwidth.txt"), &text)?);
            written.push(write_json_report(
                out,
                &format!("{name}.bandwidth.json"),
                &a,
            )?);
            let plots = out.join(format!("{name}.bandwidth-svg"));
            let files = svg::write_all_with(&a, &plots, output::write_plot)?;
            written.extend(files);
            output::println(format_args!("{text}"))?;
            let memory: u64 = a
                .series
                .iter()
                .filter(|s| s.path.ends_with("-mem"))
                .map(|s| s.demand.volume)
                .sum();
            bandwidth_results.push((
                *name,
                memory,
                a.program.estimated_seconds,
                a.program.dominant.clone(),
            ));
            continue;
        }

        output::println("5/5 false-sharing audit")?;
        let report = audit(
            &trace,
            audit_machine(&model),
            Some(&model),
            &AuditConfig::default(),
        )?;
        let audit_text = render_audit(
            &trace_path,
            &report,
            None,
            model.name.ends_with("-calibrated"),
        );
        written.push(write_report(
            out,
            &format!("{name}.audit.txt"),
            &audit_text,
        )?);
        written.push(write_json_report(
            out,
            &format!("{name}.audit.json"),
            &report,
        )?);
        output::println(format_args!("{audit_text}"))?;
        results.push((*name, summary.accesses, coherence_false(&sim)));
    }
    output::println("summary (2 threads, ivybridge-4c):")?;
    for (name, accesses, false_misses) in &results {
        output::println(format_args!(
            "  {name:<22} {:>12} accesses {:>12} L1 false-sharing misses",
            thousands(*accesses),
            thousands(*false_misses)
        ))?;
    }
    for (name, memory, seconds, dominant) in &bandwidth_results {
        output::println(format_args!(
            "  {name:<22} {:>12} memory bytes {:>9.2} ms estimated, dominant limit: {}",
            thousands(*memory),
            seconds * 1e3,
            dominant.as_deref().unwrap_or("none")
        ))?;
    }
    output::println(format_args!("reports in {}:", out.display()))?;
    for p in written {
        output::println(format_args!("  {}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// L1 coherence misses classified as false sharing, over all cores.
fn coherence_false(sim: &SimReport) -> u64 {
    sim.levels
        .iter()
        .find(|l| l.counters.level == "L1")
        .map_or(0, |l| l.counters.misses.coherence_false)
}

fn write_report(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    output::write_file(&path, text.as_bytes())?;
    Ok(path)
}

fn write_json_report(dir: &Path, name: &str, value: &impl serde::Serialize) -> Result<PathBuf> {
    let path = dir.join(name);
    write_json(value, &path)?;
    Ok(path)
}
