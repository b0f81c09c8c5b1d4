//! `cachescope trace info|dump|verify|gen`.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cachescope_schema::synth::{generate, GenParams};
use cachescope_schema::{
    verify_file, Event, EventKind, OpenOptions, TraceFile, TraceSummary, VerifyReport,
    DEFAULT_CHUNK_EVENTS,
};
use serde::Serialize;

use super::EXIT_BAD_INPUT;
use crate::cli::GenArgs;
use crate::output::{self, thousands};

fn open(path: &Path, allow_incomplete: bool) -> Result<TraceFile> {
    let trace = TraceFile::open_with(path, OpenOptions { allow_incomplete })?;
    if let Some(d) = trace.damage() {
        eprintln!("warning: {d}; reading the complete chunks before it");
    }
    Ok(trace)
}

/// `trace info`.
pub fn info(path: &Path, allow_incomplete: bool, json: Option<&Path>) -> Result<ExitCode> {
    let trace = open(path, allow_incomplete)?;
    let s = TraceSummary::compute(&trace)?;
    output::report(&s, json, || render_info(path, &s))?;
    Ok(ExitCode::SUCCESS)
}

/// The human-readable `trace info` report.
pub fn render_info(path: &Path, s: &TraceSummary) -> String {
    use std::fmt::Write as _;
    let unit = s.time_unit.name();
    let mut o = String::new();
    let h = &s.header;
    let _ = writeln!(o, "trace        {}", path.display());
    // The trace's strings are escaped: a hostile trace must not reach the terminal with
    // escape sequences or forge lines of the report.
    let p = |s: &str| output::printable(s).into_owned();
    let _ = writeln!(o, "recorder     {}", p(&h.recorder));
    // Arguments with spaces (or none at all) quoted, so `a b` as one argument does not read
    // as two.
    let args: Vec<String> = h
        .args
        .iter()
        .map(|a| {
            if a.is_empty() || a.contains(char::is_whitespace) || a.contains('\'') {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a.clone()
            }
        })
        .collect();
    let _ = writeln!(o, "program      {} {}", p(&h.program), p(&args.join(" ")));
    if !h.host.hostname.is_empty() {
        let _ = writeln!(
            o,
            "host         {} ({}, {} cores, {})",
            p(&h.host.hostname),
            p(&h.host.cpu_model),
            h.host.logical_cores,
            p(&h.host.os)
        );
    }
    let _ = writeln!(o, "time unit    {unit}");
    let _ = writeln!(o, "threads      {}", s.threads.len());
    let _ = writeln!(
        o,
        "events       {} ({} memory accesses)",
        thousands(s.events),
        thousands(s.accesses)
    );
    let _ = writeln!(
        o,
        "size         {} bytes in {} chunks, {:.3} bytes/event",
        thousands(s.file_bytes),
        s.chunks,
        s.bytes_per_event
    );
    let _ = writeln!(
        o,
        "time span    {} {unit} (clocks aligned at sync)",
        thousands(s.time_span)
    );
    if s.incomplete {
        let _ = writeln!(o, "status       INCOMPLETE: only complete chunks were read");
    }
    let _ = writeln!(o, "\nevents by kind");
    for k in EventKind::ALL {
        if let Some(n) = s.events_by_kind.get(k.name()) {
            let _ = writeln!(o, "  {:<15} {:>15}", k.name(), thousands(*n));
        }
    }
    let _ = writeln!(
        o,
        "\n{:>7} {:>15} {:>15} {:>15} {:>15}",
        "thread", "events", "own time", "starts at", "ends at"
    );
    for t in &s.threads {
        let _ = writeln!(
            o,
            "{:>7} {:>15} {:>15} {:>15} {:>15}",
            t.thread,
            thousands(t.events),
            thousands(t.local_time),
            thousands(t.first_time),
            thousands(t.end_time)
        );
    }
    o
}

#[derive(Serialize)]
struct DumpLine<'a> {
    index: u64,
    time: u64,
    thread: u32,
    #[serde(flatten)]
    event: &'a Event,
}

/// `trace dump`.
pub fn dump(
    path: &Path,
    thread: Option<u32>,
    skip: u64,
    limit: Option<u64>,
    allow_incomplete: bool,
    json: bool,
) -> Result<ExitCode> {
    let trace = open(path, allow_incomplete)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let limit = limit.unwrap_or(u64::MAX);
    let mut emit = |index: u64, time: u64, thread: u32, event: &Event| -> Result<()> {
        if json {
            let line = DumpLine {
                index,
                time,
                thread,
                event,
            };
            serde_json::to_writer(&mut out, &line)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{index:>10} {time:>14} t{thread:<4} {event}")?;
        }
        Ok(())
    };
    let result = (|| -> Result<()> {
        if let Some(t) = thread {
            let cost = trace.header().time_unit.access_cost();
            let mut clock = 0u64;
            for (i, e) in trace.thread_events(t)?.enumerate() {
                let e = e?;
                let i = i as u64;
                if i >= skip.saturating_add(limit) {
                    break;
                }
                if i >= skip {
                    emit(i, clock, t, &e)?;
                }
                clock = clock.wrapping_add(match e {
                    Event::Access(_) => cost,
                    Event::Advance { units, .. } => units,
                    _ => 0,
                });
            }
        } else {
            for (i, e) in trace.merged()?.enumerate() {
                let e = e.map_err(|err| err.at_path(path))?;
                let i = i as u64;
                if i >= skip.saturating_add(limit) {
                    break;
                }
                if i >= skip {
                    emit(i, e.time, e.thread, &e.event)?;
                }
            }
        }
        Ok(())
    })();
    match result {
        // `cachescope trace dump | head` closes the pipe early; that is not an error.
        Err(e) if output::is_broken_pipe(&e) => Ok(ExitCode::SUCCESS),
        // Reading the trace fails with a trace error; writing (a full disk) with these.
        Err(e) if is_write_error(&e) => Err(e.context("writing to standard output")),
        Err(e) => Err(e),
        Ok(()) => {
            out.flush()
                .or_else(|e| {
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
                .context("writing to standard output")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// An error of writing the dump (as opposed to reading the trace).
fn is_write_error(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>().is_some()
        || e.downcast_ref::<serde_json::Error>()
            .is_some_and(|j| j.io_error_kind().is_some())
}

/// `trace verify`.
pub fn verify(path: &Path, json: Option<&Path>) -> Result<ExitCode> {
    let report = verify_file(path)?;
    output::report(&report, json, || render_verify(path, &report))?;
    Ok(match report.problem() {
        None => ExitCode::SUCCESS,
        Some(p) => {
            eprintln!("error: {p}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    })
}

fn render_verify(path: &Path, r: &VerifyReport) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let status = if r.ok() { "OK" } else { "DAMAGED" };
    let _ = writeln!(o, "{status}  {}", path.display());
    let _ = writeln!(
        o,
        "  complete chunks     {} ({} threads)",
        thousands(r.complete_chunks),
        r.threads
    );
    let _ = writeln!(
        o,
        "  recoverable events  {}",
        thousands(r.recoverable_events)
    );
    let _ = writeln!(
        o,
        "  readable bytes      {} of {}",
        thousands(r.good_bytes),
        thousands(r.file_bytes)
    );
    let _ = writeln!(
        o,
        "  header / trailer    {} / {}",
        yes(r.has_header),
        yes(r.has_trailer)
    );
    if let Some(d) = &r.damage {
        let _ = writeln!(o, "  damage              {d}");
        let _ = writeln!(
            o,
            "  (read the recoverable part with --allow-incomplete on info, dump, simulate, \
             bandwidth)"
        );
    }
    if let Some(p) = &r.sync_problem {
        let _ = writeln!(o, "  sync problem        {p}");
    }
    o
}

fn yes(b: bool) -> &'static str {
    if b {
        "present"
    } else {
        "missing"
    }
}

/// `trace gen`.
pub fn gen(a: &GenArgs) -> Result<ExitCode> {
    let p = GenParams {
        workload: a.workload,
        threads: a.threads,
        size: a.size,
        iterations: a.iterations,
        seed: a.seed,
        stride: a.stride,
        padded: a.padded,
    };
    // Generated and checked next to the output first: a failing or interrupted run leaves an
    // existing file as it was. The check's index gives the figures printed below.
    output::refuse_to_replace_a_non_trace(&a.output)?;
    let mut written = None;
    output::replace_with(&a.output, |tmp| {
        let what = || format!("generating {}", a.output.display());
        let file = std::fs::File::create(tmp).with_context(what)?;
        let out = generate(
            &p,
            BufWriter::with_capacity(1 << 20, file),
            DEFAULT_CHUNK_EVENTS,
        )
        .with_context(what)?;
        out.into_inner()
            .map_err(|e| e.into_error())
            .with_context(what)?;
        // Written straight to something that is not a regular file (`/dev/null`, a pipe):
        // there is nothing to read back.
        if !std::fs::metadata(tmp).is_ok_and(|m| m.is_file()) {
            return Ok(());
        }
        let trace =
            TraceFile::open(tmp).with_context(|| format!("re-reading {}", a.output.display()))?;
        written = Some((trace.event_count(), trace.file_len()));
        Ok(())
    })?;
    let Some((events, bytes)) = written else {
        output::println(format_args!(
            "wrote {}: {} {} thread(s) (not a regular file: not read back)",
            a.output.display(),
            a.workload,
            a.threads
        ))?;
        return Ok(ExitCode::SUCCESS);
    };
    output::println(format_args!(
        "wrote {}: {} {} thread(s), {} events, {} bytes ({:.3} bytes/event)",
        a.output.display(),
        a.workload,
        a.threads,
        thousands(events),
        thousands(bytes),
        bytes as f64 / events.max(1) as f64
    ))?;
    Ok(ExitCode::SUCCESS)
}
