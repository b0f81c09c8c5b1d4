//! `cachescope import lackey`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cachescope_tracer::import::lackey;

use crate::output::{self, thousands};

/// Imports Lackey output from `input` (`-` = stdin) into the trace `output`.
pub fn lackey(input: &Path, output: &Path, program: &str) -> Result<ExitCode> {
    let name = if input.as_os_str() == "-" {
        "stdin".to_string()
    } else {
        input.display().to_string()
    };
    if input.as_os_str() != "-" {
        // `-o` naming the log would replace it with the trace made from it.
        output::protect_input(input);
    }
    output::refuse_to_replace_a_non_trace(output)?;
    let mut stats = None;
    // Written next to the target and renamed at the end: a failed import never leaves a
    // half-written file under the requested name, nor destroys an existing one.
    output::replace_with(output, |tmp| {
        let out = BufWriter::with_capacity(
            1 << 20,
            File::create(tmp).with_context(|| format!("creating {}", output.display()))?,
        );
        let (mut out, s) = if input.as_os_str() == "-" {
            lackey::import(std::io::stdin().lock(), &name, out, program)?
        } else {
            let file = File::open(input).with_context(|| format!("opening {}", input.display()))?;
            lackey::import(BufReader::with_capacity(1 << 20, file), &name, out, program)?
        };
        out.flush()
            .with_context(|| format!("writing {}", output.display()))?;
        if s.fetches + s.data == 0 {
            bail!(
                "{name}: no Lackey records in {} lines (expected lines like \"I  0400,3\" and \
                 \" L 1000,8\" from valgrind --tool=lackey --trace-mem=yes)",
                thousands(s.lines)
            );
        }
        stats = Some(s);
        Ok(())
    })?;
    let stats = stats.context("the import wrote no statistics")?;
    output::println(format_args!(
        "wrote {}: {} instruction fetches, {} data accesses from {} lines",
        output.display(),
        thousands(stats.fetches),
        thousands(stats.data),
        thousands(stats.lines)
    ))?;
    Ok(ExitCode::SUCCESS)
}
