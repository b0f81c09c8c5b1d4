//! `cachescope simulate`.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{bail, Result};
use cachescope_schema::{OpenOptions, TraceFile};
use cachescope_sim::cachegrind::{CgConfig, CgGeometry};
use cachescope_sim::counters::SimReport;
use cachescope_sim::model::LevelConfig;
use cachescope_sim::{
    simulate_cachegrind, simulate_exact, simulate_parallel, MachineModel, ThreadMapping,
};

use crate::cli::SimulateArgs;
use crate::output::{self, thousands};
use crate::progress::Progress;

/// Runs `cachescope simulate`.
pub fn run(a: &SimulateArgs) -> Result<ExitCode> {
    let parallel = a.engine.parallel_config()?;
    let mut model = crate::commands::load_machine(&a.machine)?;
    if !a.set.is_empty() {
        model.apply_overrides(&a.set, &a.machine)?;
    }
    // Cachegrind's algorithm is selected by the preset, not by a user model's name.
    let cachegrind = a.machine == "cachegrind";
    if !cachegrind && (a.i1.is_some() || a.d1.is_some() || a.ll.is_some()) {
        bail!("--I1/--D1/--LL set Cachegrind's geometry and need --machine cachegrind");
    }
    let trace = TraceFile::open_with(
        &a.trace,
        OpenOptions {
            allow_incomplete: a.allow_incomplete,
        },
    )?;
    if let Some(d) = trace.damage() {
        eprintln!("warning: {d}; simulating the complete chunks before it");
    }
    if !a.sweep.is_empty() {
        if cachegrind {
            bail!("--sweep varies the model's fields; --machine cachegrind has --I1/--D1/--LL");
        }
        return super::sweep::run(a, &trace, &model, parallel);
    }
    tracing::info!(
        trace = %a.trace.display(),
        machine = %model.name,
        engine = if parallel.is_some() { "parallel" } else { "exact" },
        "simulating"
    );
    let progress = Progress::start("simulating", &trace);
    let report = if cachegrind {
        if parallel.is_some() {
            bail!("--machine cachegrind runs Cachegrind's algorithm; it has no parallel engine");
        }
        let cfg = cachegrind_config(&mut model, a)?;
        simulate_cachegrind(&trace, &model, cfg)?
    } else {
        let mapping = ThreadMapping::parse(&a.map)?;
        match parallel {
            None => simulate_exact(&trace, &model, &mapping)?,
            Some(cfg) => simulate_parallel(&trace, &model, &mapping, cfg)?,
        }
    };
    drop(progress);
    output::report(&report, a.json.json.as_deref(), || {
        render(&a.trace.display().to_string(), &report)
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Cachegrind's geometry from --I1/--D1/--LL (defaults: the model's D1 and LL, I1 = D1), also
/// applied to the model so the per-core report uses the same D1/LL.
fn cachegrind_config(model: &mut MachineModel, a: &SimulateArgs) -> Result<CgConfig> {
    let from_level = |l: &LevelConfig, line: u32| CgGeometry {
        size: l.size,
        assoc: l.assoc,
        line,
    };
    let parse = |flag: &str, v: &Option<String>, default: CgGeometry| -> Result<CgGeometry> {
        match v {
            Some(s) => CgGeometry::parse(s).map_err(|e| anyhow::anyhow!("--{flag} {e}")),
            None => Ok(default),
        }
    };
    let line = model.line_size;
    let d1_default = from_level(&model.levels[0], line);
    let ll_default = from_level(model.levels.last().unwrap_or(&model.levels[0]), line);
    let d1 = parse("D1", &a.d1, d1_default)?;
    let ll = parse("LL", &a.ll, ll_default)?;
    let i1 = parse("I1", &a.i1, d1)?;
    for (flag, g) in [("I1", i1), ("D1", d1), ("LL", ll)] {
        g.check().map_err(|e| anyhow::anyhow!("--{flag}: {e}"))?;
    }
    if d1.line != ll.line || i1.line != ll.line {
        bail!("cachescope's Cachegrind mode needs one line size for I1, D1 and LL");
    }
    model.line_size = d1.line;
    if let Some(l) = model.levels.first_mut() {
        l.size = d1.size;
        l.assoc = d1.assoc;
    }
    if let Some(l) = model.levels.last_mut() {
        l.size = ll.size;
        l.assoc = ll.assoc;
    }
    model.validate("cachegrind with --I1/--D1/--LL")?;
    Ok(CgConfig { i1, d1, ll })
}

/// `part` as a percentage of `whole` with two decimals, `-` when `whole` is 0.
pub(super) fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.2}%", 100.0 * part as f64 / whole as f64)
    }
}

/// The human-readable report.
pub fn render(trace: &str, r: &SimReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "trace    {trace}");
    let _ = writeln!(o, "machine  {}", r.machine);
    match r.slack {
        Some(slack) => {
            let q = r.quanta.unwrap_or_default();
            let _ = writeln!(
                o,
                "engine   {} (slack {slack}; {} quanta, {} in lockstep)\n",
                r.engine, q.total, q.lockstep
            );
        }
        None => {
            let _ = writeln!(o, "engine   {}\n", r.engine);
        }
    }
    if let Some(cg) = &r.cachegrind {
        let e = &cg.events;
        let _ = writeln!(
            o,
            "Cachegrind events (I1 {},{},{}  D1 {},{},{}  LL {},{},{})",
            cg.config.i1.size,
            cg.config.i1.assoc,
            cg.config.i1.line,
            cg.config.d1.size,
            cg.config.d1.assoc,
            cg.config.d1.line,
            cg.config.ll.size,
            cg.config.ll.assoc,
            cg.config.ll.line
        );
        for (name, v) in e.named() {
            if !cg.fetches_in_trace && matches!(name, "Ir" | "I1mr" | "ILmr") {
                let _ = writeln!(o, "  {name:<5} {:>16}", "-");
            } else {
                let _ = writeln!(o, "  {name:<5} {:>16}", thousands(v));
            }
        }
        if !cg.fetches_in_trace {
            let _ = writeln!(
                o,
                "  (the trace has no instruction fetches, so Ir, I1mr and ILmr are not \
                 simulated: recorded programs' traces count instructions but not their \
                 addresses; `import lackey` traces have them)"
            );
        }
        let _ = writeln!(o);
    }
    // Back-invalidations (an inclusive level's evictions removing copies above) get a column
    // where they can happen.
    let back = r
        .machine
        .levels
        .iter()
        .any(|l| l.inclusion == cachescope_sim::model::Inclusion::Inclusive)
        || r.levels.iter().any(|l| l.counters.back_invalidations > 0);
    let _ = writeln!(
        o,
        "{:<6} {:>5} {:>14} {:>8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}{}",
        "level",
        "core",
        "accesses",
        "miss%",
        "compulsory",
        "capacity",
        "conflict",
        "coh-true",
        "coh-false",
        "evictions",
        "writebacks",
        if back {
            format!(" {:>12}", "back-inval")
        } else {
            String::new()
        }
    );
    let row =
        |o: &mut String, name: &str, core: &str, l: &cachescope_sim::counters::LevelCounters| {
            let acc = l.accesses.total();
            let _ = writeln!(
                o,
                "{:<6} {:>5} {:>14} {:>8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}{}",
                name,
                core,
                thousands(acc),
                pct(l.misses.total(), acc),
                thousands(l.misses.compulsory),
                thousands(l.misses.capacity),
                thousands(l.misses.conflict),
                thousands(l.misses.coherence_true),
                thousands(l.misses.coherence_false),
                thousands(l.evictions),
                thousands(l.writebacks),
                if back {
                    format!(" {:>12}", thousands(l.back_invalidations))
                } else {
                    String::new()
                }
            );
        };
    for (i, total) in r.levels.iter().enumerate() {
        if r.cores.len() > 1 {
            for c in &r.cores {
                if c.levels[i].accesses.total() > 0 {
                    row(
                        &mut o,
                        &total.counters.level,
                        &c.core.to_string(),
                        &c.levels[i],
                    );
                }
            }
        }
        row(&mut o, &total.counters.level, "all", &total.counters);
    }
    let _ = writeln!(
        o,
        "\n{:>5} {:>14} {:>14} {:>10} {:>14}",
        "core", "inval sent", "inval recv", "upgrades", "cache-to-cache"
    );
    for c in &r.cores {
        let _ = writeln!(
            o,
            "{:>5} {:>14} {:>14} {:>10} {:>14}",
            c.core,
            thousands(c.invalidations_sent),
            thousands(c.invalidations_received),
            thousands(c.upgrades),
            thousands(c.cache_to_cache)
        );
    }
    let _ = writeln!(
        o,
        "\n{:<12} {:>16} {:>16}",
        "data path", "read bytes", "write bytes"
    );
    for p in &r.paths {
        let _ = writeln!(
            o,
            "{:<12} {:>16} {:>16}",
            p.path,
            thousands(p.total.read),
            thousands(p.total.write)
        );
    }
    let unit = r.time_unit.name();
    let _ = writeln!(
        o,
        "\n{:>7} {:>5} {:>14} {:>16} {:>14} {:>16}",
        "thread", "core", "accesses", unit, "flops", "ends at"
    );
    for t in &r.threads {
        let _ = writeln!(
            o,
            "{:>7} {:>5} {:>14} {:>16} {:>14} {:>16}",
            t.thread,
            t.core,
            thousands(t.accesses),
            thousands(t.time_units),
            thousands(t.flops),
            thousands(t.end_time)
        );
    }
    // The cachegrind model simulates the fetches in its own section (I1, LL) above.
    if r.unsimulated_fetches > 0 && r.cachegrind.is_none() {
        let _ = writeln!(
            o,
            "\nnote: {} instruction fetches not simulated (the model has no instruction cache; \
             --machine cachegrind simulates them)",
            thousands(r.unsimulated_fetches)
        );
    }
    o
}
