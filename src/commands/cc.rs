//! `cachescope cc`: the compiler wrapper.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use cachescope_tracer::cc::{expand_response_files, plan, Capture, Compiler, Family};
use cachescope_tracer::shim;
use cachescope_tracer::unrecorded::{scan, Blind, BlindSpot};

/// Parses the wrapper's leading options, runs the planned compiler steps, returns the
/// compiler's exit code.
pub fn run(args: &[String]) -> Result<ExitCode> {
    // `-h` or `--help` alone asks about the wrapper (gcc would read `-h` as the linker's
    // soname option and take the shim's `-L` for its value); with other arguments they are
    // the compiler's, as `cachescope cc --compiler g++ --help` is g++'s help.
    if let [only] = args {
        if only == "--help" || only == "-h" {
            print_help()?;
            return Ok(ExitCode::SUCCESS);
        }
    }
    let mut clang = false;
    let mut explicit = None;
    let mut capture = Capture::Tsan;
    let mut rest = args;
    loop {
        match rest.first().map(String::as_str) {
            Some("--clang") => {
                clang = true;
                rest = &rest[1..];
            }
            Some("--compiler") => {
                let Some(p) = rest.get(1) else {
                    bail!("--compiler needs a program, e.g. --compiler clang-14")
                };
                explicit = Some(p.clone());
                rest = &rest[2..];
            }
            Some("--capture") => {
                capture = match rest.get(1).map(String::as_str) {
                    Some("tsan") => Capture::Tsan,
                    Some("sancov") => Capture::Sancov,
                    Some(other) => bail!("--capture takes tsan or sancov, not {other:?}"),
                    None => bail!("--capture needs a value: tsan or sancov"),
                };
                rest = &rest[2..];
            }
            _ => break,
        }
    }
    let compiler = Compiler::choose(explicit.as_deref(), clang, capture);
    let exe = std::env::current_exe().context("locating the cachescope executable")?;
    let shim_path = shim::locate(&exe)?;
    let shim_dir = shim_path
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let tmp = tempfile::Builder::new()
        .prefix("cachescope-cc-")
        .tempdir()
        .context("creating a temporary directory")?;
    // Sources inside response files (`cc @args.rsp`) must be seen to be instrumented.
    let expanded = expand_response_files(rest);
    let plan = plan(&compiler, &expanded, &shim_dir, tmp.path())?;
    for step in &plan.steps {
        tracing::info!("{} {}", compiler.program, step.args.join(" "));
        let status = Command::new(&compiler.program)
            .args(&step.args)
            .status()
            .map_err(|e| {
                let hint = if e.kind() == std::io::ErrorKind::NotFound {
                    "; install it (the scripts install gcc and clang-14: `apt-get install \
                     clang-14 libomp-14-dev`) or name another with --compiler"
                } else {
                    ""
                };
                anyhow::anyhow!("running {}: {e}{hint}", compiler.program)
            })?;
        if !status.success() {
            let code = status.code().unwrap_or(1).clamp(1, 255) as u8;
            return Ok(ExitCode::from(code));
        }
    }
    for (file, name) in &plan.instrumented {
        warn_unrecorded(file, name, compiler.family == Family::Clang);
    }
    Ok(ExitCode::SUCCESS)
}

/// Functions named per kind in the warning.
const NAMED_FUNCTIONS: usize = 5;

/// Warns on stderr about memory instructions in the code just built that the recorder will
/// not see (the build still succeeds: the trace will lack them, and the user should know).
fn warn_unrecorded(file: &Path, name: &str, clang: bool) {
    let spots = match scan(file, clang) {
        Ok(s) => s,
        Err(e) => {
            // `-o /dev/null`, a compiler that wrote elsewhere: nothing to check.
            tracing::debug!("not checking {name} for unrecorded instructions: {e}");
            return;
        }
    };
    let total: usize = spots.iter().map(|s| s.count).sum();
    if total == 0 {
        return;
    }
    let mut text = format!(
        "cachescope cc: warning: {name}: {total} memory instruction(s) the recorder will not \
         see (docs/tracer.md, \"What the instrumentation cannot see\"):\n"
    );
    let mut kinds: Vec<Blind> = spots.iter().map(|s| s.kind).collect();
    kinds.dedup();
    for kind in kinds {
        let mut of_kind: Vec<&BlindSpot> = spots.iter().filter(|s| s.kind == kind).collect();
        of_kind.sort_by(|a, b| b.count.cmp(&a.count).then(a.function.cmp(&b.function)));
        let n: usize = of_kind.iter().map(|s| s.count).sum();
        let mut functions: Vec<String> = of_kind
            .iter()
            .take(NAMED_FUNCTIONS)
            .map(|s| format!("{} ({})", s.function, s.count))
            .collect();
        if of_kind.len() > NAMED_FUNCTIONS {
            functions.push(format!("{} more", of_kind.len() - NAMED_FUNCTIONS));
        }
        text.push_str(&format!("  {n} {kind}: in {}\n", functions.join(", ")));
    }
    eprint!("{text}");
}

/// Prints the wrapper's own help (its leading options; everything else is the compiler's).
fn print_help() -> Result<()> {
    use clap::CommandFactory;
    use std::io::Write;
    let mut cli = crate::cli::Cli::command();
    let text = match cli.find_subcommand_mut("cc") {
        Some(cc) => cc.render_long_help().to_string(),
        None => String::new(),
    };
    let mut out = std::io::stdout().lock();
    let written = writeln!(
        out,
        "{text}\nThe compiler's own options: `cachescope cc --compiler gcc --help` (or g++, \
         clang-14, ...)."
    )
    .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing the help"),
    }
}
