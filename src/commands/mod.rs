//! One module per command; each returns the process exit code.

mod audit;
mod bandwidth;
mod calibrate;
mod cc;
mod demo;
mod import;
mod record;
mod simulate;
mod sweep;
mod trace;

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use cachescope_sim::MachineModel;

use crate::cli::{Command, ImportCommand, TraceCommand};

/// Exit code for bad input (unreadable, corrupt or inconsistent traces, bad arguments).
pub const EXIT_BAD_INPUT: u8 = 2;

/// The machine model `--machine` names (a preset or a file); a file is an input no output of
/// the run may replace.
pub fn load_machine(name: &str) -> Result<MachineModel> {
    // A preset's name (or `host`) loads the preset even where a file has that name.
    let preset = name == "host" || cachescope_sim::model::preset_names().contains(&name);
    if !preset && Path::new(name).is_file() {
        crate::output::protect_input(Path::new(name));
    }
    Ok(MachineModel::load(name)?)
}

/// Runs a parsed command.
pub fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Demo(args) => demo::run(&args),
        Command::Simulate(args) => simulate::run(&args),
        Command::Cc(args) => cc::run(&args.args),
        Command::Record(args) => record::run(&args),
        Command::Bandwidth(args) => bandwidth::run(&args),
        Command::Audit(args) => audit::run(&args),
        Command::Calibrate(args) => calibrate::run(&args),
        Command::Import(ImportCommand::Lackey {
            input,
            output,
            program,
        }) => import::lackey(&input, &output, &program),
        Command::Trace(t) => match t {
            TraceCommand::Info {
                trace,
                allow_incomplete,
                json,
            } => trace::info(&trace, allow_incomplete, json.json.as_deref()),
            TraceCommand::Dump {
                trace,
                thread,
                limit,
                skip,
                allow_incomplete,
                json,
            } => trace::dump(&trace, thread, skip, limit, allow_incomplete, json),
            TraceCommand::Verify { trace, json } => trace::verify(&trace, json.json.as_deref()),
            TraceCommand::Gen(args) => trace::gen(&args),
        },
    }
}
