//! The `cachescope` command: record, replay and explain multithreaded memory behaviour.
//!
//! Exit codes: 0 success, 1 findings (audit), 2 bad input or any other error.

mod cli;
mod commands;
mod input;
mod output;
mod partial;
mod progress;

use std::process::ExitCode;

use clap::Parser;

/// `cachescope [-v…] cc ARGS…`: the compiler wrapper's arguments, untouched by the parser
/// (whose global `-v` would take the compiler's `-v`, which CMake's compiler checks use),
/// and the `-v`s before `cc`.
fn wrapper_command() -> Option<(u8, cli::Command)> {
    let mut verbose = 0u8;
    let mut args = std::env::args_os().skip(1);
    for a in args.by_ref() {
        match a.to_str()? {
            "-v" | "--verbose" => verbose = verbose.saturating_add(1),
            "-vv" => verbose = verbose.saturating_add(2),
            "cc" => {
                let rest = args.map(|a| a.to_string_lossy().into_owned()).collect();
                return Some((verbose, cli::Command::Cc(cli::CcArgs { args: rest })));
            }
            _ => return None,
        }
    }
    None
}

fn main() -> ExitCode {
    let (verbose, command) = match wrapper_command() {
        Some(wrapped) => wrapped,
        None => {
            let cli = cli::Cli::parse();
            (cli.verbose, cli.command)
        }
    };
    let filter = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CACHESCOPE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: CI logs and redirected output get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .init();
    match commands::run(command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(commands::EXIT_BAD_INPUT)
        }
    }
}
