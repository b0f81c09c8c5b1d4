//! `cachescope bandwidth`: bandwidth requirement curves, dominance and runtime estimate.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cachescope_analysis::bandwidth::{analyse, svg, text, BandwidthAnalysis};
use cachescope_analysis::symbols::Symbolizer;
use cachescope_schema::{OpenOptions, TraceFile};
use cachescope_sim::bandwidth::{channels, BandwidthConfig};
use cachescope_sim::{
    simulate_exact_with_bandwidth, simulate_parallel_with_bandwidth, MachineModel, ThreadMapping,
};

use crate::cli::BandwidthArgs;
use crate::output::{self, write_json};

/// Runs `cachescope bandwidth`.
pub fn run(a: &BandwidthArgs) -> Result<ExitCode> {
    let analysis = analyse_trace(a)?;
    if let Some(dir) = &a.svg {
        let files = svg::write_all_with(&analysis, dir, output::write_plot)?;
        eprintln!("wrote {} plot(s) to {}", files.len(), dir.display());
    }
    match &a.json.json {
        Some(to) => write_json(&analysis, to)?,
        None => output::print(text::summary(&analysis))?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Simulates the trace with the bandwidth timeline and analyses it.
pub fn analyse_trace(a: &BandwidthArgs) -> Result<BandwidthAnalysis> {
    let engine = a.engine.parallel_config()?;
    if a.window == 0 {
        bail!("--window must be at least 1 time unit");
    }
    if a.sample_period == 0 {
        bail!("--sample-period must be at least 1");
    }
    let mut model = MachineModel::load(&a.machine)?;
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
    let mapping = ThreadMapping::parse(&a.map)?;
    let cfg = BandwidthConfig {
        window: a.window,
        sample_period: a.sample_period,
    };
    let (_, report) = match engine {
        None => simulate_exact_with_bandwidth(&trace, &model, &mapping, cfg)?,
        Some(p) => simulate_parallel_with_bandwidth(&trace, &model, &mapping, p, cfg)?,
    };
    let mut symbols = Symbolizer::new(trace.modules());
    let root = std::env::current_dir().context("current directory")?;
    Ok(analyse(&report, &model.name, &mut symbols, &root))
}
