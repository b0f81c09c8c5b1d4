//! `cachescope demo`: the main job end to end.
//!
//! Today: generate a barrier-phased OpenMP-like stencil trace with two threads, verify it,
//! simulate it on the `ivybridge-4c` model with the exact engine, and write the trace and
//! simulation reports. The tracer issue replaces the synthetic trace with a recorded example
//! program; the analysis issues add their reports here.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cachescope_schema::synth::{generate_file, GenParams, Workload};
use cachescope_schema::{verify_file, TraceFile, TraceSummary};
use cachescope_sim::{simulate_exact, MachineModel, ThreadMapping};

use super::simulate::render as render_simulation;
use super::trace::render_info;
use crate::cli::DemoArgs;
use crate::output::write_json;

/// Runs the demo into `args.out`.
pub fn run(args: &DemoArgs) -> Result<ExitCode> {
    let out = &args.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let trace_path = out.join("stencil.cstrace");
    let mut p = GenParams::new(Workload::Stencil);
    p.threads = 2;
    p.size = 512 << 10;
    p.iterations = 4;
    println!(
        "1/3 generating a 2-thread OpenMP-like 2D stencil trace -> {}",
        trace_path.display()
    );
    generate_file(&p, &trace_path)?;

    println!("2/4 verifying every chunk");
    let report = verify_file(&trace_path)?;
    if let Some(problem) = report.problem() {
        bail!("the demo trace does not verify: {problem}");
    }

    println!("3/4 summarizing");
    let trace = TraceFile::open(&trace_path)?;
    let summary = TraceSummary::compute(&trace)?;
    let info = render_info(&trace_path, &summary);
    write_report(out, "trace-info.txt", &info)?;
    write_json(&summary, &out.join("trace-info.json"))?;
    write_json(&report, &out.join("trace-verify.json"))?;

    println!("4/4 simulating on ivybridge-4c (exact engine)");
    let model = MachineModel::load("ivybridge-4c")?;
    let sim = simulate_exact(&trace, &model, &ThreadMapping::OneToOne)?;
    let sim_text = render_simulation(&trace_path.display().to_string(), &sim);
    write_report(out, "simulate.txt", &sim_text)?;
    write_json(&sim, &out.join("simulate.json"))?;

    println!("\n{info}\n{sim_text}");
    println!("reports in {}:", out.display());
    for name in [
        "trace-info.txt",
        "trace-info.json",
        "trace-verify.json",
        "simulate.txt",
        "simulate.json",
    ] {
        println!("  {}", out.join(name).display());
    }
    Ok(ExitCode::SUCCESS)
}

fn write_report(dir: &Path, name: &str, text: &str) -> Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}
