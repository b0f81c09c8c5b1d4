//! `cachescope record`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cachescope_schema::{OpenOptions, TraceFile};
use cachescope_tracer::record::{
    inspect, instrumented_program_in, is_script, record, resolve_program, Instrumentation,
    RecordOptions,
};
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
    let target = choose_target(&program, prog_args, args.follow)?;
    let output = match &args.output {
        Some(o) => o.clone(),
        None => {
            let named = target.launched.as_deref().unwrap_or(&program);
            let name = named
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "program".into());
            PathBuf::from(format!("{name}.cstrace"))
        }
    };
    if crate::output::same_file(&output, &program) {
        bail!(
            "refusing to write the trace over the program {}: give -o another file",
            program.display()
        );
    }
    let exe = std::env::current_exe().context("locating the cachescope executable")?;
    let opts = RecordOptions {
        program: program.clone(),
        args: prog_args.to_vec(),
        output,
        shim: shim::locate(&exe)?,
        time_unit: target.instrumentation.map(Instrumentation::time_unit),
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
            if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&outcome.status) {
                // SIGINT/SIGTERM, or a crash the recorder caught: complete up to that point,
                // kept apart from the output (see `record::record`).
                eprintln!(
                    "cachescope: the program was killed by {}; the trace ends there and is kept \
                     as {} ({} was left as it was)",
                    signal_label(sig),
                    path.display(),
                    opts.output.display()
                );
            }
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
                (_, Some(sig)) => format!("the program was killed by {}", signal_label(sig)),
                (Some(code), _) => format!(
                    "the program ended with status {code} without the recorder's end: \
                     _exit() or a recording error reported above"
                ),
                (None, None) => "the program did not end normally".to_string(),
            };
            eprintln!(
                "cachescope: the trace is incomplete ({why}); kept at {} (use \
                 --allow-incomplete to read it)",
                path.display()
            )
        }
        (None, _) if target.instrumentation.is_none() => eprintln!(
            "cachescope: no trace was written: no program built with `cachescope cc` ran under \
             {} (a launcher passes the recording on to the first such program it starts; it \
             must keep the environment, CACHESCOPE_OUT and LD_PRELOAD)",
            program.display()
        ),
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

/// What `record` runs: the program itself, built with `cachescope cc`, or a launcher that
/// starts such a program (the shim records the first process whose executable, or else a
/// library it starts with, is instrumented, see `docs/tracer.md`).
struct Target {
    /// The program's instrumentation, when it is the one recorded.
    instrumentation: Option<Instrumentation>,
    /// For a launcher: the instrumented program its arguments name, if any.
    launched: Option<PathBuf>,
}

fn choose_target(program: &Path, args: &[OsString], follow: bool) -> Result<Target> {
    let script = is_script(program);
    let ins = if script {
        None
    } else {
        Some(inspect(program)?)
    };
    if let Some(ins) = ins.filter(|i| i.records_accesses()) {
        return Ok(Target {
            instrumentation: Some(ins),
            launched: None,
        });
    }
    let launched = instrumented_program_in(args);
    if script || follow || launched.is_some() {
        tracing::info!(
            launcher = %program.display(),
            program = ?launched,
            "recording the first instrumented program the launcher starts"
        );
        return Ok(Target {
            instrumentation: None,
            launched,
        });
    }
    bail!(
        "{} was not built with `cachescope cc` (it calls no ThreadSanitizer or \
         SanitizerCoverage load/store callbacks), so no accesses would be recorded; \
         rebuild it, e.g. CC=\"cachescope cc\" make (if it is a launcher that starts the \
         program to record, or uses libraries built with `cachescope cc`, pass --follow)",
        program.display()
    )
}

/// `signal 11 (SIGSEGV)`.
fn signal_label(sig: i32) -> String {
    match signal_hook::low_level::signal_name(sig) {
        Some(name) => format!("signal {sig} ({name})"),
        None => format!("signal {sig}"),
    }
}
