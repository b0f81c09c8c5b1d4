//! `cachescope cc`: the compiler wrapper.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use cachescope_tracer::cc::{expand_response_files, plan, Capture, Compiler};
use cachescope_tracer::shim;

/// Parses the wrapper's leading options, runs the planned compiler steps, returns the
/// compiler's exit code.
pub fn run(args: &[String]) -> Result<ExitCode> {
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
                    other => bail!("--capture takes tsan or sancov, not {other:?}"),
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
    Ok(ExitCode::SUCCESS)
}
