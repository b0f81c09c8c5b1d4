//! Bandwidth requirement and dominance analysis (thesis §4.3–4.4): the simulator's online
//! timeline turned into curves in GB/s, limit costs (V_L, T_L), per-thread and total time
//! breakdowns, a runtime estimate, and the code positions behind each dominant path.
//!
//! * [`curve`]: curves in physical units and the cost of a limit;
//! * [`text`]: the terminal summary;
//! * [`svg`]: the plots (thesis Figs. 4.16–4.19).

pub mod curve;
pub mod svg;
pub mod text;

use std::path::Path;

use cachescope_schema::{CodePos, ThreadId};
use cachescope_sim::bandwidth::{BandwidthReport, Direction, Scope};
use serde::Serialize;

use crate::symbols::{base_name, relative_path, Symbolizer};
use curve::{LimitCost, RateCurve, Scale};

/// Name of the breakdown part for first touches of pages (its `windows` counts the faults).
pub const PAGE_FAULTS: &str = "page faults (first touch)";
/// The breakdown's part for barriers passed and parallel regions forked (the model's
/// `barrier_ns` and `region_ns`).
pub const SYNCHRONIZATION: &str = "synchronization";

/// Source lines listed per limit.
pub const POSITIONS_SHOWN: usize = 10;

/// Format identifier of the JSON report.
pub const SCHEMA: &str = "cachescope.bandwidth/1";

/// The whole analysis of one trace on one machine model.
#[derive(Debug, Clone, Serialize)]
pub struct BandwidthAnalysis {
    /// Format identifier.
    pub schema: &'static str,
    /// Machine model name.
    pub machine: String,
    /// Window W, time units.
    pub window: u64,
    /// Time unit of the trace (`instructions` or `events`).
    pub time_unit: String,
    /// Peak clock, GHz.
    pub ghz: f64,
    /// Peak time units per cycle.
    pub ipc: f64,
    /// Seconds per time unit at peak.
    pub seconds_per_unit: f64,
    /// Whole-program runtime estimate.
    pub program: ProgramSummary,
    /// Per thread, ascending by id.
    pub threads: Vec<ThreadSummary>,
    /// Sum over threads (user time; thesis Fig. 4.18).
    pub total: Breakdown,
    /// Per series (data path and direction, or the ALU).
    pub series: Vec<SeriesSummary>,
    /// Per limit: where its dominant bytes come from.
    pub attribution: Vec<ChannelAttribution>,
}

/// The runtime of the program: per barrier segment the slowest thread.
#[derive(Debug, Clone, Serialize)]
pub struct ProgramSummary {
    /// Barrier segments.
    pub segments: u64,
    /// Seconds at peak with no bandwidth limit.
    pub peak_seconds: f64,
    /// Estimated seconds with every limit.
    pub estimated_seconds: f64,
    /// What adds the most time summed over threads (a limit, the page faults or the
    /// synchronization), if anything adds time.
    pub dominant: Option<String>,
    /// The data path limit that adds the most time summed over threads (not the ALU,
    /// instruction issue, page faults or synchronization).
    pub dominant_path: Option<String>,
}

/// Time of one thread (or the sum of all) split by what limited it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Breakdown {
    /// Seconds executed at peak rate (busy time, no limit).
    pub busy_seconds: f64,
    /// Seconds of windows without any bottleneck.
    pub peak_seconds: f64,
    /// Estimated seconds: `peak_seconds` + every part's `seconds`.
    pub estimated_seconds: f64,
    /// Per limit that dominated some window, in channel order.
    pub parts: Vec<BreakdownPart>,
}

/// Windows in which one limit dominated, or the page faults.
#[derive(Debug, Clone, Serialize)]
pub struct BreakdownPart {
    /// Limit name, e.g. `L2-mem write (total)`, or [`PAGE_FAULTS`] or [`SYNCHRONIZATION`].
    pub channel: String,
    /// Windows (for [`PAGE_FAULTS`]: the number of faults; for [`SYNCHRONIZATION`]: of
    /// barriers and forks).
    pub windows: u64,
    /// Estimated seconds of those windows.
    pub seconds: f64,
    /// Seconds they add over peak.
    pub added_seconds: f64,
}

/// One thread.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadSummary {
    /// Thread id.
    pub thread: ThreadId,
    /// Simulated core.
    pub core: u32,
    /// The breakdown.
    #[serde(flatten)]
    pub breakdown: Breakdown,
    /// The limit adding the most time, if any.
    pub dominant: Option<String>,
}

/// One series: per-thread curves, the all-threads demand, and its limits.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesSummary {
    /// `L2-mem read`, `ALU flops`.
    pub label: String,
    /// Data path or `ALU`.
    pub path: String,
    /// `read`, `write` or `flops`.
    pub direction: &'static str,
    /// `GB/s`, `GFLOP/s` (ALU) or `Ginstr/s` (instruction issue).
    pub unit: &'static str,
    /// Per thread (same order as `threads`).
    pub threads: Vec<ThreadCurve>,
    /// Summed over threads per window (what a merge point sees).
    pub demand: RateCurve,
    /// The limits on this series.
    pub limits: Vec<LimitSummary>,
}

/// A thread's curve of one series.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadCurve {
    /// Thread id.
    pub thread: ThreadId,
    /// The curve, with the dominant share of the per-core limit when there is one.
    pub curve: RateCurve,
}

/// A limit on one series and what it costs.
#[derive(Debug, Clone, Serialize)]
pub struct LimitSummary {
    /// Limit name.
    pub channel: String,
    /// `per_core` or `total`.
    pub scope: Scope,
    /// GB/s (GFLOP/s).
    pub limit: f64,
    /// Per thread for per-core limits; one entry (thread `None`) for a merge point, against
    /// the demand curve.
    pub costs: Vec<ThreadCost>,
}

/// A limit's cost on one curve.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadCost {
    /// Thread (`None`: all threads' demand).
    pub thread: Option<ThreadId>,
    /// The cost.
    #[serde(flatten)]
    pub cost: LimitCost,
    /// The curve with this limit's dominant share (merge points only; per-core limits use
    /// the thread curve in `threads`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curve: Option<RateCurve>,
}

/// Code positions behind one limit's dominant windows.
#[derive(Debug, Clone, Serialize)]
pub struct ChannelAttribution {
    /// Limit name.
    pub channel: String,
    /// Top positions, most bytes first.
    pub positions: Vec<AttributedPosition>,
}

/// One code position.
#[derive(Debug, Clone, Serialize)]
pub struct AttributedPosition {
    /// Instruction address.
    pub pc: CodePos,
    /// Function, when known.
    pub function: Option<String>,
    /// Source file (relative to the working directory when below it).
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
    /// The module and the offset in it (`libomp.so.5+0x290d1`) when the module is known:
    /// what names code without debug information, the same in every run (the address
    /// changes with where the module was loaded).
    pub module_offset: Option<String>,
    /// Estimated bytes in dominant windows (sampled).
    pub bytes: u64,
    /// Share of the bytes of this limit's kept positions (the 64 instructions with the most
    /// bytes in dominant windows) that this source line moved.
    pub share: f64,
}

impl AttributedPosition {
    /// `function (file:line)`, else `module+0xoffset`, else the address.
    pub fn place(&self) -> String {
        let file = self.file.as_deref().map(|f| match self.line {
            Some(l) => format!("{f}:{l}"),
            None => f.to_string(),
        });
        match (&self.function, file) {
            (Some(func), Some(file)) => format!("{func} ({file})"),
            (Some(func), None) => func.clone(),
            (None, Some(file)) => file,
            (None, None) => self
                .module_offset
                .clone()
                .unwrap_or_else(|| self.pc.to_string()),
        }
    }
}

/// Builds the analysis from the simulator's timeline; `symbols` names code positions, source
/// files below `root` are shown relative to it.
pub fn analyse(
    report: &BandwidthReport,
    machine: &str,
    symbols: &mut Symbolizer,
    root: &Path,
) -> BandwidthAnalysis {
    let spu = report.seconds_per_unit();
    let scale = Scale {
        window: report.window,
        seconds_per_unit: spu,
    };
    let channel_names: Vec<String> = report.channels.iter().map(|c| c.name.clone()).collect();
    // The limits on data paths: not the ALU, instruction issue or page faults.
    let data_paths: Vec<&str> = report
        .channels
        .iter()
        .filter(|c| report.series[c.series].path_index.is_some())
        .map(|c| c.name.as_str())
        .collect();

    let mut total = Breakdown::default();
    let threads: Vec<ThreadSummary> = report
        .threads
        .iter()
        .map(|t| {
            let mut parts: Vec<BreakdownPart> = t
                .dominance
                .iter()
                .zip(&channel_names)
                .filter(|(d, _)| d.windows > 0)
                .map(|(d, name)| BreakdownPart {
                    channel: name.clone(),
                    windows: d.windows,
                    seconds: d.units * spu,
                    added_seconds: d.added_units * spu,
                })
                .collect();
            // Time on top of the windows' (faults, barriers and forks), counted by events.
            for (name, events, units) in [
                (PAGE_FAULTS, t.faults, t.fault_units),
                (SYNCHRONIZATION, t.sync_events, t.sync_units),
            ] {
                if events > 0 {
                    parts.push(BreakdownPart {
                        channel: name.into(),
                        windows: events,
                        seconds: units * spu,
                        added_seconds: units * spu,
                    });
                }
            }
            let breakdown = Breakdown {
                busy_seconds: t.busy_units as f64 * spu,
                peak_seconds: t.peak_units as f64 * spu,
                estimated_seconds: t.estimated_units * spu,
                parts,
            };
            add_breakdown(&mut total, &breakdown);
            ThreadSummary {
                thread: t.thread,
                core: t.core,
                dominant: most_added(&breakdown, |_| true),
                breakdown,
            }
        })
        .collect();

    // Channel order, then page faults, then synchronization.
    total.parts.sort_by_key(|p| {
        channel_names
            .iter()
            .position(|n| *n == p.channel)
            .unwrap_or(if p.channel == SYNCHRONIZATION {
                usize::MAX
            } else {
                usize::MAX - 1
            })
    });

    let series = report
        .series
        .iter()
        .enumerate()
        .map(|(s, ser)| {
            let own_limit = report
                .channels
                .iter()
                .position(|c| c.series == s && c.scope == Scope::PerCore);
            let thread_curves: Vec<ThreadCurve> = report
                .threads
                .iter()
                .map(|t| ThreadCurve {
                    thread: t.thread,
                    curve: RateCurve::new(
                        &t.curves[s],
                        own_limit.map(|c| &t.dominance[c].curve),
                        scale,
                    ),
                })
                .collect();
            let demand = RateCurve::new(&report.demand[s], None, scale);
            let limits = report
                .channels
                .iter()
                .enumerate()
                .filter(|(_, c)| c.series == s)
                .map(|(ci, c)| LimitSummary {
                    channel: c.name.clone(),
                    scope: c.scope,
                    limit: c.limit_gbs,
                    costs: match c.scope {
                        Scope::PerCore => thread_curves
                            .iter()
                            .map(|tc| ThreadCost {
                                thread: Some(tc.thread),
                                cost: tc.curve.cost(c.limit_gbs),
                                curve: None,
                            })
                            .collect(),
                        Scope::Total => {
                            let curve = RateCurve::new(
                                &report.demand[s],
                                Some(&report.merge_dominance[ci]),
                                scale,
                            );
                            vec![ThreadCost {
                                thread: None,
                                cost: curve.cost(c.limit_gbs),
                                curve: Some(curve),
                            }]
                        }
                    },
                })
                .collect();
            SeriesSummary {
                label: ser.label(),
                path: ser.path.clone(),
                direction: ser.direction.name(),
                unit: match ser.direction {
                    Direction::Flops => "GFLOP/s",
                    Direction::Instructions => "Ginstr/s",
                    _ => "GB/s",
                },
                threads: thread_curves,
                demand,
                limits,
            }
        })
        .collect();

    let attribution = channel_names
        .iter()
        .enumerate()
        .filter_map(|(c, name)| {
            let mine: Vec<_> = report
                .attribution
                .iter()
                .filter(|a| a.channel == c)
                .collect();
            let sum: u64 = mine.iter().map(|a| a.bytes).sum();
            if sum == 0 {
                return None;
            }
            // Several instructions of one source line (unrolled or vectorized code) are one
            // position for the reader: merge them, keeping the first address.
            let mut positions: Vec<AttributedPosition> = Vec::new();
            for a in &mine {
                let loc = symbols.code_pos(a.pc);
                // Library code inlined into the program's (`std::fill` behind a
                // `std::vector` constructor) is named by the program's line that called it:
                // the line the reader can change.
                let frame = loc.as_ref().and_then(|l| {
                    l.frames()
                        .find(|f| f.is_program_source())
                        .or_else(|| l.frames().next())
                });
                let p = AttributedPosition {
                    pc: a.pc,
                    function: frame.as_ref().and_then(|f| f.function.clone()),
                    file: frame
                        .as_ref()
                        .and_then(|f| f.file.as_deref())
                        .map(|f| relative_path(f, root).unwrap_or_else(|| f.to_string())),
                    line: frame.as_ref().and_then(|f| f.line),
                    module_offset: loc
                        .as_ref()
                        .map(|l| format!("{}+{:#x}", base_name(&l.module), l.module_address)),
                    bytes: a.bytes,
                    share: 0.0,
                };
                let known = p.file.is_some() || p.function.is_some();
                match positions.iter_mut().find(|q| {
                    known && q.function == p.function && q.file == p.file && q.line == p.line
                }) {
                    Some(q) => q.bytes += p.bytes,
                    None => positions.push(p),
                }
            }
            for p in &mut positions {
                p.share = p.bytes as f64 / sum as f64;
            }
            positions.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.pc.cmp(&b.pc)));
            positions.truncate(POSITIONS_SHOWN);
            Some(ChannelAttribution {
                channel: name.clone(),
                positions,
            })
        })
        .collect();

    BandwidthAnalysis {
        schema: SCHEMA,
        machine: machine.to_string(),
        window: report.window,
        time_unit: report.time_unit.name().to_string(),
        ghz: report.ghz,
        ipc: report.ipc,
        seconds_per_unit: spu,
        program: ProgramSummary {
            segments: report.program.segments,
            peak_seconds: report.program.peak_units * spu,
            estimated_seconds: report.program.estimated_units * spu,
            dominant: most_added(&total, |_| true),
            dominant_path: most_added(&total, |c| data_paths.contains(&c)),
        },
        threads,
        total,
        series,
        attribution,
    }
}

/// Adds `b` into `total`, merging parts by channel (kept in first-seen order).
fn add_breakdown(total: &mut Breakdown, b: &Breakdown) {
    total.busy_seconds += b.busy_seconds;
    total.peak_seconds += b.peak_seconds;
    total.estimated_seconds += b.estimated_seconds;
    for p in &b.parts {
        match total.parts.iter_mut().find(|q| q.channel == p.channel) {
            Some(q) => {
                q.windows += p.windows;
                q.seconds += p.seconds;
                q.added_seconds += p.added_seconds;
            }
            None => total.parts.push(p.clone()),
        }
    }
}

/// The smallest share of the estimated time a limit must add to be named as what adds the
/// most: a compute-bound kernel's L1-L1 read adding 8 ns to 9 ms is no bottleneck, and
/// naming it in the headline sent readers after core-to-core transfers (review, 2026-11-29).
/// The breakdown still lists every part.
pub const NAMED_SHARE: f64 = 0.01;

/// The part that adds the most time (first on ties) among those whose channel `counts`, if
/// one adds at least [`NAMED_SHARE`] of the estimated time.
fn most_added(b: &Breakdown, counts: impl Fn(&str) -> bool) -> Option<String> {
    largest_added(b, counts)
        .filter(|p| p.added_seconds >= NAMED_SHARE * b.estimated_seconds)
        .map(|p| p.channel.clone())
}

/// The part that adds the most time (first on ties) among those whose channel `counts` and
/// that add any, however little.
pub(crate) fn largest_added(
    b: &Breakdown,
    counts: impl Fn(&str) -> bool,
) -> Option<&BreakdownPart> {
    b.parts
        .iter()
        .filter(|p| p.added_seconds > 0.0 && counts(&p.channel))
        .fold(None::<&BreakdownPart>, |best, p| match best {
            Some(q) if q.added_seconds >= p.added_seconds => Some(q),
            _ => Some(p),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_adding_under_one_percent_is_not_named() {
        let part = |channel: &str, added_seconds: f64| BreakdownPart {
            channel: channel.into(),
            windows: 1,
            seconds: added_seconds,
            added_seconds,
        };
        let mut b = Breakdown {
            busy_seconds: 1.0,
            peak_seconds: 1.0,
            estimated_seconds: 1.0,
            parts: vec![part("L1-L1 read", 8e-9), part("L2-mem read", 0.009)],
        };
        assert_eq!(most_added(&b, |_| true), None);
        b.parts.push(part("L1-L2 read", 0.01));
        assert_eq!(most_added(&b, |_| true).as_deref(), Some("L1-L2 read"));
        assert_eq!(most_added(&b, |c| c != "L1-L2 read"), None);
    }

    #[test]
    fn code_without_debug_information_is_named_by_module_and_offset() {
        let mut p = AttributedPosition {
            pc: CodePos::new(0x7fbf_085f_50d1).expect("nonzero"),
            function: None,
            file: None,
            line: None,
            module_offset: Some("libomp.so.5+0x290d1".into()),
            bytes: 1,
            share: 1.0,
        };
        // Not the address, which changes with where the library was loaded.
        assert_eq!(p.place(), "libomp.so.5+0x290d1");
        p.module_offset = None;
        assert_eq!(p.place(), p.pc.to_string());
        p.function = Some("main".into());
        p.file = Some("t.c".into());
        p.line = Some(3);
        assert_eq!(p.place(), "main (t.c:3)");
    }
}
