//! `cachescope import lackey`.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cachescope_tracer::import::lackey;

use crate::output::{self, thousands};

/// Imports Lackey output from `input` (`-` = stdin) into the trace `output`.
pub fn lackey(input: &Path, output: &Path, program: &str) -> Result<ExitCode> {
    // Write next to the target and rename at the end: a failed import never leaves a
    // half-written file under the requested name, nor destroys an existing one.
    let tmp = output.with_extension("cstrace.partial");
    let out = BufWriter::with_capacity(
        1 << 20,
        File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?,
    );
    let result = if input.as_os_str() == "-" {
        lackey::import(std::io::stdin().lock(), "stdin", out, program)
    } else {
        let file = File::open(input).with_context(|| format!("opening {}", input.display()))?;
        lackey::import(
            BufReader::with_capacity(1 << 20, file),
            &input.display().to_string(),
            out,
            program,
        )
    };
    let (mut out, stats) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
    };
    out.flush()?;
    drop(out);
    std::fs::rename(&tmp, output).with_context(|| format!("renaming to {}", output.display()))?;
    output::println(format_args!(
        "wrote {}: {} instruction fetches, {} data accesses from {} lines",
        output.display(),
        thousands(stats.fetches),
        thousands(stats.data),
        thousands(stats.lines)
    ))?;
    Ok(ExitCode::SUCCESS)
}
