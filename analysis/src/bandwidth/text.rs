//! The terminal summary of a bandwidth analysis.

use std::fmt::Write;

use super::{BandwidthAnalysis, Breakdown};

/// Human-readable summary: runtime estimate, per-thread breakdown, per-path curves against
/// their limits, and the code behind each dominant limit.
pub fn summary(a: &BandwidthAnalysis) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Bandwidth analysis on {}: window W = {} {}, peak {:.2} GHz x {} per cycle",
        a.machine,
        a.window,
        a.time_unit,
        a.ghz,
        // A calibrated model's IPC has every digit of a measurement.
        (a.ipc * 100.0).round() / 100.0
    );
    // With what it adds: a path named "dominant" for a microsecond of a long run misleads.
    let adds = |name: Option<&str>, none: &str| -> String {
        let Some(name) = name else {
            return none.to_string();
        };
        let added = a
            .total
            .parts
            .iter()
            .find(|p| p.channel == name)
            .map_or(0.0, |p| p.added_seconds);
        let of = a.total.estimated_seconds;
        if of > 0.0 {
            format!(
                "{name} (+{} summed over threads, {:.1}% of their time)",
                secs(added),
                100.0 * added / of
            )
        } else {
            name.to_string()
        }
    };
    // Below the share a limit must add to be named, say so, and what came closest.
    let nothing = {
        let largest = super::largest_added(&a.total, |_| true);
        let floor = format!("nothing adds {:.0}%", super::NAMED_SHARE * 100.0);
        match largest {
            Some(p) => format!("{floor} (most: {})", adds(Some(&p.channel), "")),
            None => "nothing".to_string(),
        }
    };
    let _ = writeln!(
        o,
        "Program: estimated {} (at peak {}), {} barrier segment(s); adds the most time: {}; dominant data path: {}",
        secs(a.program.estimated_seconds),
        secs(a.program.peak_seconds),
        a.program.segments,
        adds(a.program.dominant.as_deref(), &nothing),
        if a.program.dominant_path.is_some() && a.program.dominant_path == a.program.dominant {
            "the same".to_string()
        } else {
            adds(a.program.dominant_path.as_deref(), "none")
        }
    );

    let mut columns: Vec<(String, &Breakdown)> = a
        .threads
        .iter()
        .map(|t| (format!("thread {}", t.thread), &t.breakdown))
        .collect();
    if a.threads.len() > 1 {
        columns.push(("all threads".into(), &a.total));
    }
    // One unit for the table, from its largest time: a run of a millisecond in seconds with
    // four decimals read as rows of zeros.
    let largest = columns
        .iter()
        .flat_map(|(_, b)| {
            [b.busy_seconds, b.peak_seconds, b.estimated_seconds]
                .into_iter()
                .chain(b.parts.iter().map(|p| p.seconds))
        })
        .fold(0.0f64, f64::max);
    let (unit, scale) = time_unit(largest);
    let t = |s: f64| format!("{:.3}", s * scale);
    let _ = writeln!(o, "\nTime per thread ({unit}; + added over peak):");
    let mut rows: Vec<String> = vec!["busy at peak".into(), "no bottleneck".into()];
    rows.extend(a.total.parts.iter().map(|p| p.channel.clone()));
    rows.push("estimated".into());
    let _ = write!(o, "  {:<26}", "");
    for (name, _) in &columns {
        let _ = write!(o, "{name:>20}");
    }
    let _ = writeln!(o);
    for row in &rows {
        let _ = write!(o, "  {row:<26}");
        for (_, b) in &columns {
            let cell = match row.as_str() {
                "busy at peak" => t(b.busy_seconds),
                "no bottleneck" => t(b.peak_seconds),
                "estimated" => t(b.estimated_seconds),
                ch => b
                    .parts
                    .iter()
                    .find(|p| p.channel == ch)
                    .map(|p| format!("{} (+{})", t(p.seconds), t(p.added_seconds)))
                    .unwrap_or_else(|| "-".into()),
            };
            let _ = write!(o, "{cell:>20}");
        }
        let _ = writeln!(o);
    }

    let _ = writeln!(
        o,
        "\nData paths (per thread; merge points against all threads' demand):"
    );
    let _ = writeln!(
        o,
        "  {:<22} {:<8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "series", "who", "volume", "avg", "max", "limit", "above", "T_L", "T_L dom"
    );
    for s in &a.series {
        if s.demand.volume == 0 {
            continue;
        }
        let unit = match s.unit {
            "GB/s" => "B",
            "Ginstr/s" => " instr",
            _ => "F",
        };
        for t in &s.threads {
            if t.curve.volume == 0 {
                continue;
            }
            let own = s.limits.iter().find_map(|l| {
                l.costs
                    .iter()
                    .find(|c| c.thread == Some(t.thread))
                    .map(|c| (l, c))
            });
            let _ = write!(
                o,
                "  {:<22} {:<8} {:>10} {:>9.2} {:>9.2}",
                s.label,
                format!("t{}", t.thread),
                volume(t.curve.volume, unit),
                t.curve.average_rate,
                t.curve.max_rate
            );
            match own {
                Some((l, c)) => {
                    let _ = writeln!(
                        o,
                        " {:>9.2} {:>9} {:>9} {:>9}",
                        l.limit,
                        secs(c.cost.seconds_above),
                        secs(c.cost.t_l_seconds),
                        secs(c.cost.dominant_t_l_seconds)
                    );
                }
                None => {
                    let _ = writeln!(o, " {:>9}", "-");
                }
            }
        }
        for l in s
            .limits
            .iter()
            .filter(|l| l.costs.iter().any(|c| c.thread.is_none()))
        {
            for c in l.costs.iter().filter(|c| c.thread.is_none()) {
                let _ = writeln!(
                    o,
                    "  {:<22} {:<8} {:>10} {:>9.2} {:>9.2} {:>9.2} {:>9} {:>9} {:>9}",
                    s.label,
                    "all",
                    volume(s.demand.volume, unit),
                    s.demand.average_rate,
                    s.demand.max_rate,
                    l.limit,
                    secs(c.cost.seconds_above),
                    secs(c.cost.t_l_seconds),
                    secs(c.cost.dominant_t_l_seconds)
                );
            }
        }
    }
    let _ = writeln!(
        o,
        "  (rates in GB/s or GFLOP/s; above = time over the limit; T_L = time the limit adds alone; T_L dom = time it adds where it dominates)"
    );

    if !a.attribution.is_empty() {
        let _ = writeln!(o, "\nCode behind each dominant limit (sampled):");
        for c in &a.attribution {
            let _ = writeln!(o, "  {}:", c.channel);
            for p in c.positions.iter().take(5) {
                let _ = writeln!(
                    o,
                    "    {:>5.1}%  {:>10}  {}",
                    p.share * 100.0,
                    volume(p.bytes, "B"),
                    p.place()
                );
            }
        }
    }
    o
}

/// Seconds with a unit that fits.
/// The unit for times up to `largest` seconds, and the factor from seconds to it.
fn time_unit(largest: f64) -> (&'static str, f64) {
    if largest >= 1.0 {
        ("s", 1.0)
    } else if largest >= 1e-3 {
        ("ms", 1e3)
    } else {
        ("us", 1e6)
    }
}

fn secs(s: f64) -> String {
    if s == 0.0 {
        "0".into()
    } else if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} us", s * 1e6)
    }
}

/// A volume with a decimal prefix.
fn volume(v: u64, unit: &str) -> String {
    let v = v as f64;
    if v >= 1e9 {
        format!("{:.2} G{unit}", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2} M{unit}", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2} k{unit}", v / 1e3)
    } else {
        format!("{v:.0} {unit}")
    }
}
