//! The `cachescope` command: record, replay and explain multithreaded memory behaviour.
//!
//! Exit codes: 0 success, 1 findings (audit), 2 bad input or any other error.

mod cli;
mod commands;
mod output;
mod partial;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let filter = match cli.verbose {
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
    match commands::run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(commands::EXIT_BAD_INPUT)
        }
    }
}
