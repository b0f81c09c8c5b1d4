//! `cachescope audit`: false sharing for CI.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cachescope_analysis::audit::{
    audit, AuditConfig, AuditMachine, AuditReport, Finding, FindingKind,
};
use cachescope_analysis::sarif;
use cachescope_schema::TraceFile;
use cachescope_sim::MachineModel;

use crate::cli::AuditArgs;
use crate::output::{self, thousands, write_json};

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

/// Runs the audit.
pub fn run(args: &AuditArgs) -> Result<ExitCode> {
    let config: AuditConfig = match &args.config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
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
        Some(p) => read_baseline(p)?,
        None => BTreeSet::new(),
    };
    let model = MachineModel::load(&args.machine)?;
    let machine = audit_machine(&model);
    let trace = TraceFile::open(&args.trace)?;
    let mut report = audit(&trace, machine, Some(&model), &config)?;
    for f in &mut report.findings {
        if baseline.contains(&f.fingerprint) {
            f.exceeds = false;
        }
    }
    if let Some(p) = &args.write_baseline {
        let text: String = report
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
            .collect();
        output::write_file(p, text.as_bytes())?;
    }
    if let Some(p) = &args.sarif {
        let root = match &args.repo_root {
            Some(r) => r.clone(),
            None => std::env::current_dir().context("current directory")?,
        };
        let log = sarif::to_sarif(&report, &root, env!("CARGO_PKG_VERSION"));
        write_json(&log, p)?;
    }
    match &args.json.json {
        Some(to) => write_json(&report, to)?,
        None => output::print(render(&args.trace, &report, baseline.len()))?,
    }
    Ok(if report.fails() {
        ExitCode::from(EXIT_FINDINGS)
    } else {
        ExitCode::SUCCESS
    })
}

fn read_baseline(p: &Path) -> Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    let mut out = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let fp = line.split('#').next().unwrap_or("").trim();
        if fp.is_empty() {
            continue;
        }
        if fp.len() != 16 || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
            anyhow::bail!(
                "{}: line {}: {fp:?} is not a finding fingerprint (16 hex digits)",
                p.display(),
                i + 1
            );
        }
        out.insert(fp.to_string());
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

fn finding_text(n: usize, f: &Finding) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let status = match (f.exceeds, f.kind) {
        (false, _) => "baselined",
        (true, FindingKind::FalseSharing) => "FAIL",
        (true, FindingKind::LatentFalseSharing) => "warn",
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
    let _ = writeln!(
        o,
        "   threads {:?}; line offsets in the object {:?}",
        f.threads, f.offsets
    );
    let _ = writeln!(
        o,
        "   cost ~{:.3} M cycles = {:.2}% of the busiest thread's time",
        f.cost_cycles / 1e6,
        f.time_share * 100.0
    );
    let _ = writeln!(o, "   fix: {}", f.suggestion);
    let _ = writeln!(o, "   fingerprint {}", f.fingerprint);
    o
}

/// The human report.
pub fn render(trace: &Path, r: &AuditReport, baselined: usize) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "false-sharing audit of {} ({}-byte lines, tau = {} cycles, {} barrier segments)",
        trace.display(),
        r.line_size,
        r.penalty_cycles,
        r.segments
    );
    if r.findings.is_empty() {
        let _ = writeln!(o, "no false sharing found");
    }
    for (i, f) in r.findings.iter().enumerate() {
        o.push_str(&finding_text(i + 1, f));
    }
    for t in &r.true_sharing {
        let _ = writeln!(
            o,
            "true sharing (not flagged): {} ({}): ~{} possible data exchanges between threads {:?}",
            t.object.name,
            t.object.kind,
            thousands(t.exchanges),
            t.threads
        );
    }
    let failing = r.findings.iter().filter(|f| f.exceeds).count();
    let _ = writeln!(
        o,
        "verdict: {} ({} finding(s), {} not in the baseline ({} fingerprint(s)); a finding has \
         >= {} events, >= {:.0}% of a thread's time and >= {:.0}% of the object's lines)",
        if r.fails() { "FAIL" } else { "pass" },
        r.findings.len(),
        failing,
        baselined,
        r.config.min_events,
        r.config.min_time_share * 100.0,
        r.config.min_line_fraction * 100.0
    );
    o
}
