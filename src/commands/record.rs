//! `cachescope record`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cachescope_schema::{OpenOptions, TraceFile};
use cachescope_tracer::record::{inspect, record, resolve_program, RecordOptions};
use cachescope_tracer::shim;

use super::EXIT_BAD_INPUT;
use crate::cli::RecordArgs;
use crate::output::thousands;

/// Records the program; exits with its exit code (128 + signal if it was killed), or 2 when
/// no complete trace came out of a successful run.
pub fn run(args: &RecordArgs) -> Result<ExitCode> {
    let Some((program, prog_args)) = args.command.split_first() else {
        bail!("give the program to record after --, e.g. cachescope record -- ./prog 4")
    };
    let program = resolve_program(&PathBuf::from(program))?;
    let ins = inspect(&program)?;
    if !ins.tsan && !ins.sancov_accesses {
        bail!(
            "{} was not built with `cachescope cc` (it calls no ThreadSanitizer or \
             SanitizerCoverage load/store callbacks), so no accesses would be recorded; \
             rebuild it, e.g. CC=\"cachescope cc\" make",
            program.display()
        );
    }
    let output = match &args.output {
        Some(o) => o.clone(),
        None => {
            let name = program
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "program".into());
            PathBuf::from(format!("{name}.cstrace"))
        }
    };
    let exe = std::env::current_exe().context("locating the cachescope executable")?;
    let opts = RecordOptions {
        program: program.clone(),
        args: prog_args.to_vec(),
        output,
        shim: shim::locate(&exe)?,
        time_unit: ins.time_unit(),
        alloc_callers: usize::from(args.alloc_callers),
        env: Vec::new(),
    };
    let outcome = record(&opts)?;
    let program_code = match outcome.status.code() {
        Some(c) => c,
        None => {
            use std::os::unix::process::ExitStatusExt;
            128 + outcome.status.signal().unwrap_or(0)
        }
    };
    match (&outcome.trace, outcome.complete) {
        (Some(path), true) => {
            // From the trailer: no decoding, so the summary costs nothing next to the run
            // (`cachescope trace info` has the full picture).
            let trace = TraceFile::open_with(path, OpenOptions::default())?;
            let totals = trace
                .trailer()
                .map(|t| t.threads.clone())
                .unwrap_or_default();
            let events: u64 = totals.iter().map(|t| t.events).sum();
            let time: u64 = totals.iter().map(|t| t.end_time).sum();
            eprintln!(
                "cachescope: recorded {} thread(s), {} events, {} {} in {:.2} s -> {} \
                 ({} bytes, {:.3} bytes/event)",
                totals.len(),
                thousands(events),
                thousands(time),
                trace.header().time_unit.name(),
                outcome.seconds,
                path.display(),
                thousands(trace.file_len()),
                trace.file_len() as f64 / events.max(1) as f64
            );
        }
        (Some(path), false) => {
            use std::os::unix::process::ExitStatusExt;
            // What ended the program before the recorder could complete the trace.
            let why = match (outcome.status.code(), outcome.status.signal()) {
                (_, Some(sig)) => format!("the program was killed by signal {sig}"),
                (Some(code), _) => format!(
                    "the program ended with status {code} without the recorder's end: \
                     _exit(), exec, or a recording error reported above"
                ),
                (None, None) => "the program did not end normally".to_string(),
            };
            eprintln!(
                "cachescope: the trace is incomplete ({why}); kept at {} (use \
                 --allow-incomplete to read it)",
                path.display()
            )
        }
        (None, _) => eprintln!(
            "cachescope: no trace was written (the program exited before the recorder started, \
             or the shim was not loaded)"
        ),
    }
    if program_code != 0 {
        return Ok(ExitCode::from(program_code.clamp(1, 255) as u8));
    }
    if !outcome.complete {
        return Ok(ExitCode::from(EXIT_BAD_INPUT));
    }
    Ok(ExitCode::SUCCESS)
}
