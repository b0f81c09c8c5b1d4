//! `cachescope audit`: false sharing for CI.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cachescope_analysis::audit::{
    audit, describe_line_parts, AuditConfig, AuditMachine, AuditReport, Finding, FindingKind,
};
use cachescope_analysis::sarif;
use cachescope_schema::TraceFile;
use cachescope_sim::MachineModel;

use crate::cli::AuditArgs;
use crate::output::{self, thousands};
use crate::progress::Progress;

/// Exit code when findings exceed the thresholds.
const EXIT_FINDINGS: u8 = 1;
/// τ when the machine model has none: a cross-core line transfer, order of the thesis's
/// measurement (125 cycles on a two-socket Xeon; less within one socket).
const DEFAULT_PENALTY_CYCLES: f64 = 100.0;

/// The machine facts the audit takes from a model.
pub fn audit_machine(model: &MachineModel) -> AuditMachine {
    let bw = model.bandwidth.as_ref();
    AuditMachine {
        line_size: u64::from(model.line_size),
        penalty_cycles: bw
            .and_then(|b| b.false_sharing_penalty_cycles)
            .unwrap_or(DEFAULT_PENALTY_CYCLES),
        ipc: bw.map_or(1.0, |b| b.ipc),
    }
}

/// Line offsets listed per finding in the human report (the JSON has more: `MAX_OFFSETS`).
const OFFSETS_SHOWN: usize = 16;

/// Standard output as an output file name.
const STDOUT: &str = "-";

/// Runs the audit.
pub fn run(args: &AuditArgs) -> Result<ExitCode> {
    let to_stdout = |p: &Option<PathBuf>| p.as_deref().is_some_and(|p| p == Path::new(STDOUT));
    if to_stdout(&args.write_baseline) {
        bail!(
            "--write-baseline takes a file name; `-` (standard output) is for --json and \
             --sarif (the human report goes there)"
        );
    }
    if to_stdout(&args.sarif) && to_stdout(&args.json.json) {
        bail!("--sarif - and --json - would both write to standard output; give one a file name");
    }
    let config: AuditConfig = match &args.config {
        Some(p) => {
            output::protect_input(p);
            let text = crate::input::read_text_named(p, "the audit config")?;
            let config: AuditConfig = toml::from_str(&text)
                .with_context(|| format!("{}: invalid audit config", p.display()))?;
            config
                .validate()
                .with_context(|| format!("{}: invalid audit config", p.display()))?;
            config
        }
        None => AuditConfig::default(),
    };
    let baseline = match &args.baseline {
        Some(p) => {
            // Rewriting the baseline it read (`--baseline F --write-baseline F`) updates it.
            if !args
                .write_baseline
                .as_deref()
                .is_some_and(|w| output::same_file(w, p))
            {
                output::protect_input(p);
            }
            Some(read_baseline(p)?)
        }
        None => None,
    };
    let repo_root = match &args.repo_root {
        // `.` and `..` are resolved later, lexically, as in the sources' paths.
        Some(r) if !r.is_dir() => bail!(
            "--repo-root {}: {}",
            r.display(),
            if r.exists() {
                "not a directory"
            } else {
                "no such directory"
            }
        ),
        Some(r) => std::path::absolute(r).context("--repo-root")?,
        None => std::env::current_dir().context("current directory")?,
    };
    let model = crate::commands::load_machine(&args.machine)?;
    let machine = audit_machine(&model);
    let trace = TraceFile::open(&args.trace)?;
    tracing::info!(trace = %args.trace.display(), machine = %model.name, "auditing");
    let progress = Progress::start("auditing", &trace);
    let mut report = audit(&trace, machine, Some(&model), &config)?;
    drop(progress);
    if let Some(accepted) = &baseline {
        report.accept(|fingerprint| accepted.contains(fingerprint));
    }

    if args.write_baseline.is_some() {
        // Writing a baseline accepts every finding it writes, as reading it back would: the
        // reports say so, and the run passes.
        report.accept(|_| true);
    }

    // Every output is made before any is written, and the files are replaced together, so a
    // failing output (a missing directory, a full disk) leaves all previous files as they were.
    // SARIF and JSON may go to standard output (`-`), the baseline only to a file.
    let mut outputs: Vec<(&Path, String)> = Vec::new();
    if let Some(p) = &args.sarif {
        let log = sarif::to_sarif(&report, &repo_root, env!("CARGO_PKG_VERSION"));
        for file in &log.outside_root {
            tracing::warn!(
                "{file} is not under the repository root {}: its SARIF location is an absolute \
                 file URI, which code scanning cannot show in the repository (set --repo-root)",
                repo_root.display()
            );
        }
        outputs.push((p, output::json_text(&log.sarif)?));
    }
    if let Some(p) = &args.json.json {
        outputs.push((p, output::json_text(&report)?));
    }
    let (to_stdout, mut files): (Vec<_>, Vec<_>) = outputs
        .into_iter()
        .partition(|(p, _)| *p == Path::new(STDOUT));
    if let Some(p) = &args.write_baseline {
        files.insert(0, (p, baseline_text(&report)));
    }
    let mut stdout = to_stdout.into_iter().next().map(|(_, text)| text);
    // τ measured here (`calibrate --false-sharing` names its model BASE-calibrated) or set
    // by the user, or a preset's figure from another machine.
    let tau_measured = model.name.ends_with("-calibrated") || config.penalty_cycles.is_some();
    let human = render(
        &args.trace,
        &report,
        baseline.as_ref().map(BTreeSet::len),
        tau_measured,
    );
    match (&args.json.json, &stdout) {
        // The JSON report on standard output instead of the human one.
        (Some(p), _) if *p == Path::new(STDOUT) => {}
        // SARIF on standard output: the human report goes to standard error.
        (_, Some(_)) => eprint!("{human}"),
        // Also with `--json FILE`: a CI log shows what the files hold.
        (_, None) => stdout = Some(human),
    }
    let files: Vec<(&Path, &[u8])> = files.iter().map(|(p, t)| (*p, t.as_bytes())).collect();
    output::write_files(&files)?;
    if let Some(text) = stdout {
        output::print(text)?;
    }
    if let Some(p) = &args.write_baseline {
        // Writing a baseline accepts what it writes, as reading it back would: the step that
        // (re)writes it succeeds, so a CI script need not allow exit code 1 for it.
        eprintln!(
            "cachescope: {} finding(s) written to {} as accepted",
            report.findings.len(),
            p.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    Ok(if report.fails() {
        ExitCode::from(EXIT_FINDINGS)
    } else {
        ExitCode::SUCCESS
    })
}

/// The baseline file for the report's findings: a fingerprint a line, with a comment naming
/// the finding.
fn baseline_text(report: &AuditReport) -> String {
    report
        .findings
        .iter()
        .map(|f| {
            format!(
                "{}  # {} {}\n",
                f.fingerprint,
                kind_name(f.kind),
                f.object.name
            )
        })
        .collect()
}

/// The fingerprints of a baseline file (lower case; a byte-order mark, blank lines and `#`
/// comments are skipped).
fn read_baseline(p: &Path) -> Result<BTreeSet<String>> {
    let text = crate::input::read_text(p).with_context(|| {
        format!(
            "reading the baseline {}{}",
            p.display(),
            if p.exists() {
                ""
            } else {
                " (write one with `cachescope audit TRACE --write-baseline FILE` and commit \
                 it, or leave out --baseline)"
            }
        )
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut out = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let fp = line.split('#').next().unwrap_or("").trim();
        if fp.is_empty() {
            continue;
        }
        if fp.len() != 16 || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!(
                "{}: line {}: {fp:?} is not a finding fingerprint (16 hex digits)",
                p.display(),
                i + 1
            );
        }
        out.insert(fp.to_ascii_lowercase());
    }
    Ok(out)
}

fn kind_name(k: FindingKind) -> &'static str {
    match k {
        FindingKind::FalseSharing => "false sharing",
        FindingKind::LatentFalseSharing => "latent false sharing",
    }
}

fn place(s: &cachescope_analysis::audit::Site) -> String {
    let at = match (&s.file, s.line) {
        (Some(f), Some(l)) => format!("{}:{l}", f.rsplit('/').next().unwrap_or(f)),
        _ => s.pc.map_or("unknown code".to_string(), |p| p.to_string()),
    };
    let func = s
        .function
        .as_deref()
        .map_or(String::new(), |f| format!(" in {f}"));
    format!("{at}{func}")
}

fn site_text(s: &cachescope_analysis::audit::Site) -> String {
    let what = if s.store { "writes" } else { "reads" };
    format!(
        "thread {} {what} at {} ({} accesses)",
        s.thread,
        place(s),
        thousands(s.count)
    )
}

fn finding_text(n: usize, f: &Finding, fails: bool) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let status = if f.baselined {
        "baselined"
    } else if fails {
        "FAIL"
    } else {
        "warn"
    };
    let _ = writeln!(
        o,
        "{n}. [{status}] {} on {} ({}): ~{} events on {} line(s) of {} bytes{}",
        kind_name(f.kind),
        f.object.name,
        f.object.kind,
        thousands(f.events),
        f.lines,
        f.layout.line_size,
        if f.layout.shift > 0 {
            format!(", data shifted by {} bytes", f.layout.shift)
        } else {
            String::new()
        }
    );
    if let (Some(fals), Some(tru)) = (f.simulated_false, f.simulated_true) {
        let _ = writeln!(
            o,
            "   simulated: {} false-sharing and {} true-sharing L1 coherence misses; \
             estimate {} events (worst case {}, possible exchanges {})",
            thousands(fals),
            thousands(tru),
            thousands(f.estimated_events),
            thousands(f.worst_case_events),
            thousands(f.exchanges)
        );
    } else {
        let _ = writeln!(
            o,
            "   estimate: {} events (worst case {}, possible exchanges {})",
            thousands(f.estimated_events),
            thousands(f.worst_case_events),
            thousands(f.exchanges)
        );
    }
    if let Some(w) = &f.writer {
        let _ = writeln!(o, "   writer: {}", site_text(w));
    }
    if let Some(v) = &f.victim {
        let _ = writeln!(o, "   victim: {}", site_text(v));
    }
    if let Some((w, v)) = &f.simulated_pair {
        let _ = writeln!(
            o,
            "   most simulated misses ({}): thread {} misses at {} after thread {}'s store at {}",
            thousands(w.count),
            v.thread,
            place(v),
            w.thread,
            place(w)
        );
    }
    let shown = f.offsets.len().min(OFFSETS_SHOWN);
    // `lines` counts every involved line; the offsets may be cut (or unknown: then none).
    let listed = if f.offsets.is_empty() {
        0
    } else {
        f.lines.max(f.offsets.len())
    };
    let more = match listed - shown {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let _ = writeln!(
        o,
        "   threads {:?}; line offsets in the object {:?}{more}",
        f.threads,
        &f.offsets[..shown]
    );
    if !f.line_parts.is_empty() {
        let busiest = if f.lines > 1 {
            "its busiest line"
        } else {
            "the line"
        };
        let _ = writeln!(o, "   on {busiest}: {}", describe_line_parts(&f.line_parts));
    }
    let per_thread = f.cost_cycles / f.threads.len().max(1) as f64;
    let _ = writeln!(
        o,
        "   cost ~{:.3} M cycles in all ({:.3} M per thread), up to {:.2}% of a thread's time",
        f.cost_cycles / 1e6,
        per_thread / 1e6,
        f.time_share * 100.0
    );
    if !f.neighbours.is_empty() {
        let _ = writeln!(
            o,
            "   the same lines hold {}{}",
            // A heap block's name says what it is.
            if f.object.kind == "heap" {
                ""
            } else {
                "the globals "
            },
            f.neighbours.join(", ")
        );
    }
    let _ = writeln!(o, "   fix: {}", f.suggestion);
    let _ = writeln!(o, "   fingerprint {}", f.fingerprint);
    o
}

/// The human report; `baselined`: the number of fingerprints in the baseline, if one was
/// given; `tau_measured`: whether τ was calibrated on this machine (or set by the user).
pub fn render(
    trace: &Path,
    r: &AuditReport,
    baselined: Option<usize>,
    tau_measured: bool,
) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "false-sharing audit of {} ({}-byte lines, tau = {} cycles{}, {} segment{})",
        trace.display(),
        r.line_size,
        r.penalty_cycles,
        if tau_measured {
            ""
        } else {
            " from the model, not measured here (costs are rough; `cachescope calibrate \
             --false-sharing -o cal.toml`, then --machine cal.toml)"
        },
        r.segments,
        if r.segments == 1 { "" } else { "s" }
    );
    if r.findings.is_empty() {
        let _ = writeln!(o, "no false sharing found");
    }
    for (i, f) in r.findings.iter().enumerate() {
        o.push_str(&finding_text(i + 1, f, r.finding_fails(f)));
    }
    for t in &r.true_sharing {
        let _ = writeln!(
            o,
            "true sharing (not flagged): {} ({}): ~{} possible data exchanges between threads \
             {:?}{}",
            t.object.name,
            t.object.kind,
            thousands(t.exchanges),
            t.threads,
            match t.handovers {
                0 => String::new(),
                n if n == t.exchanges => {
                    " (all hand-overs from one segment to the next: one thread used the data \
                     in a segment, another took it over in the next)"
                        .to_owned()
                }
                n => format!(
                    " ({} of them hand-overs from one segment to the next)",
                    thousands(n)
                ),
            }
        );
        // The estimate's worst cases can cancel where the replay still sees false sharing
        // (a hot atomic next to data the other threads read or write): say so when it is as
        // much as a finding needs.
        if let (Some(fals), Some(tru)) = (t.simulated_false, t.simulated_true) {
            if fals > 0 && fals >= r.config.min_events {
                let _ = writeln!(
                    o,
                    "   simulated: {} false-sharing and {} true-sharing L1 coherence misses on \
                     its lines: other data on them misses when the exchanged data changes \
                     (give the exchanged data a line of its own)",
                    thousands(fals),
                    thousands(tru)
                );
            }
        }
    }
    let count = |kind: FindingKind, fails: bool| {
        r.findings
            .iter()
            .filter(|f| f.kind == kind && !f.baselined && r.finding_fails(f) == fails)
            .count()
    };
    let mut parts = Vec::new();
    for (n, what) in [
        (
            count(FindingKind::FalseSharing, true),
            "false sharing (fails)",
        ),
        (
            count(FindingKind::LatentFalseSharing, true),
            "latent false sharing (fails)",
        ),
        (
            count(FindingKind::LatentFalseSharing, false),
            "latent false sharing (warns)",
        ),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    let accepted = r.findings.iter().filter(|f| f.baselined).count();
    if accepted > 0 {
        parts.push(format!("{accepted} accepted by the baseline"));
    }
    if parts.is_empty() {
        parts.push("no findings".to_owned());
    }
    let baseline = match baselined {
        Some(n) => format!("; baseline of {n} fingerprint(s)"),
        None => String::new(),
    };
    let _ = writeln!(
        o,
        "verdict: {}: {}{baseline} (a finding has >= {} events, >= {}% of a thread's time \
         and >= {}% of the object's lines)",
        if r.fails() { "FAIL" } else { "pass" },
        parts.join(", "),
        r.config.min_events,
        percent(r.config.min_time_share),
        percent(r.config.min_line_fraction)
    );
    o
}

/// A threshold share as a percentage with as many decimals as it has (up to four): 0.985 is
/// "98.5", not a rounded "98" that misstates the threshold.
fn percent(share: f64) -> String {
    let text = format!("{:.4}", share * 100.0);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}
