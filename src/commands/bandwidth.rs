//! `cachescope bandwidth`: bandwidth requirement curves, dominance and runtime estimate.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cachescope_analysis::bandwidth::{analyse, svg, text, BandwidthAnalysis};
use cachescope_analysis::symbols::Symbolizer;
use cachescope_schema::{OpenOptions, TraceFile};
use cachescope_sim::bandwidth::{channels, BandwidthConfig, BandwidthReport};
use cachescope_sim::{
    simulate_exact_with_bandwidth, simulate_parallel_with_bandwidth, ThreadMapping,
};

use crate::cli::BandwidthArgs;
use crate::output;
use crate::progress::Progress;

/// Runs `cachescope bandwidth`.
pub fn run(a: &BandwidthArgs) -> Result<ExitCode> {
    let analysis = analyse_trace(a)?;
    // Every output is drawn before any is written, and the files are replaced together (each
    // written to a temporary file first), so a failing output — a missing directory, a full
    // disk — leaves the earlier plots and report as they were, not a mix of two runs.
    let plots = match &a.svg {
        Some(dir) => {
            svg::prepare_dir(dir)?;
            svg::render_all(&analysis, dir)?
        }
        None => Vec::new(),
    };
    let json = match &a.json.json {
        Some(to) => Some((to.as_path(), output::json_text(&analysis)?)),
        None => None,
    };
    let mut files: Vec<(&Path, &[u8])> = plots
        .iter()
        .map(|(p, svg)| (p.as_path(), svg.as_bytes()))
        .collect();
    let to_stdout = match &json {
        Some((to, text)) if *to == Path::new("-") => Some(text.clone()),
        Some((to, json)) => {
            files.push((to, json.as_bytes()));
            // The file, and the summary still on stdout (a CI log shows what it holds).
            Some(text::summary(&analysis))
        }
        None => Some(text::summary(&analysis)),
    };
    output::write_files(&files)?;
    if let Some(dir) = &a.svg {
        let written: Vec<_> = plots.into_iter().map(|(p, _)| p).collect();
        svg::remove_stale_curves(dir, &written)?;
        eprintln!("wrote {} plot(s) to {}", written.len(), dir.display());
    }
    if let Some(text) = to_stdout {
        output::print(text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Simulates the trace with the bandwidth timeline and analyses it.
pub fn analyse_trace(a: &BandwidthArgs) -> Result<BandwidthAnalysis> {
    let engine = a.engine.parallel_config()?;
    let mut model = crate::commands::load_machine(&a.machine)?;
    if !a.set.is_empty() {
        model.apply_overrides(&a.set, &a.machine)?;
    }
    // The model's bandwidth section first: it is what this command is about. The error names
    // the model by its `name`; say where it came from too (a file may be a copy of a preset).
    channels(&model).with_context(|| format!("--machine {}", a.machine))?;
    let trace = TraceFile::open_with(
        &a.trace,
        OpenOptions {
            allow_incomplete: a.allow_incomplete,
        },
    )?;
    if let Some(d) = trace.damage() {
        eprintln!("warning: {d}; analysing the complete chunks before it");
    }
    // Checked here, not by the placement: its advice (`--map round-robin`) puts two threads
    // on a core, which the analysis refuses (thesis §4.3.1).
    let threads = trace.threads().len();
    if threads > cachescope_sim::model::MAX_CORES as usize {
        bail!(
            "bandwidth analysis needs one core per thread, but the trace has {threads} threads \
             and a model has at most {} cores",
            cachescope_sim::model::MAX_CORES
        );
    }
    if threads > model.cores as usize {
        bail!(
            "bandwidth analysis needs one core per thread, but the trace has {threads} threads \
             and the machine {} cores; give --set cores={threads} (or a model with more cores)",
            model.cores
        );
    }
    let mapping = ThreadMapping::parse(&a.map)?;
    let cfg = BandwidthConfig {
        window: a.window,
        sample_period: a.sample_period,
    };
    tracing::info!(trace = %a.trace.display(), machine = %model.name, "simulating with the bandwidth timeline");
    let progress = Progress::start("simulating", &trace);
    let (_, report) = match engine {
        None => simulate_exact_with_bandwidth(&trace, &model, &mapping, cfg)?,
        Some(p) => simulate_parallel_with_bandwidth(&trace, &model, &mapping, p, cfg)?,
    };
    drop(progress);
    warn_if_one_window(&report);
    let mut symbols = Symbolizer::new(trace.modules());
    let root = std::env::current_dir().context("current directory")?;
    Ok(analyse(&report, &model.name, &mut symbols, &root))
}

/// A window as long as the run leaves one window: the curves are the run's average spread
/// over W (a fraction of it where W is longer) and no limit can dominate any part of the run.
fn warn_if_one_window(report: &BandwidthReport) {
    let windows = report.threads.iter().map(|t| t.windows).max().unwrap_or(0);
    let busy = report
        .threads
        .iter()
        .map(|t| t.busy_units)
        .max()
        .unwrap_or(0);
    if windows == 1 && busy > 0 {
        eprintln!(
            "warning: one window covers the whole run (--window {} {}, the busiest thread \
             runs {} of them), so the curves show one average and the estimate cannot see \
             phases that need more bandwidth; give a window of a small part of the run \
             (default 200)",
            report.window,
            report.time_unit.name(),
            output::thousands(busy)
        );
    }
}
