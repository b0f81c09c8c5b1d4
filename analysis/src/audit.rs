//! The false-sharing audit: Pluto estimates under the recorded layout and under predicted ones,
//! grouped by data object and code-position pair, named through the symbolizer, with a cost
//! estimate and a verdict against thresholds.

use std::collections::{BTreeMap, BTreeSet};

use cachescope_schema::{Alignment, CodePos, ThreadId, TraceError, TraceFile};
use cachescope_sim::{
    simulate_exact_with_coherence, CoherenceKey, MachineModel, SimError, ThreadMapping,
};
use serde::{Deserialize, Serialize};

mod line_parts;

pub use line_parts::{describe as describe_line_parts, LinePart};

use crate::heap::{HeapBlock, HeapMap};
use crate::numbers::thousands;
use crate::pluto::{estimate_trace, sort_blocks, BlockEstimate, Layout, PlutoReport, SiteKey};
use crate::stack::StackMap;
use crate::symbols::{base_name, DataObject, InlinedCall, StackLocal, StackObject, Symbolizer};

/// Audit settings (`audit.toml`; every field optional).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// A data object is a finding when its estimated false-sharing events reach this ...
    pub min_events: u64,
    /// ... and their estimated cost reaches this share of a thread's time inside parallel
    /// regions (0..1) ...
    pub min_time_share: f64,
    /// ... and at least this fraction of the object's cache lines is falsely shared (0..1;
    /// objects of unknown size count as fully affected). This separates a layout problem (most
    /// lines of per-thread data shared) from sharing at the borders of otherwise separate
    /// per-thread chunks, which stays small whatever the input size.
    pub min_line_fraction: f64,
    /// Cost of one false-sharing event in cycles (τ); the machine model's value when unset.
    pub penalty_cycles: Option<f64>,
    /// Line sizes to predict with, besides the machine's.
    pub predict_line_sizes: Vec<u64>,
    /// Alignment shifts (bytes) to predict with at the machine's line size: every multiple of
    /// this below the line size. 0 turns shift prediction off; otherwise a power of two (an
    /// object's start moves by multiples of its alignment, which is one).
    pub predict_shift_step: u64,
    /// Whether latent findings (only under a predicted layout) fail the audit.
    pub fail_on_latent: bool,
    /// Whether to replay the trace in the exact simulator for classified coherence misses
    /// (slower; without it, counts and costs come from the estimates alone).
    pub simulate: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            min_events: 1000,
            min_time_share: 0.01,
            min_line_fraction: 0.2,
            penalty_cycles: None,
            predict_line_sizes: vec![32, 128],
            predict_shift_step: 8,
            fail_on_latent: false,
            simulate: true,
        }
    }
}

/// An audit setting out of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ConfigError {
    /// The setting, as named in `audit.toml`.
    pub field: &'static str,
    /// What is wrong with its value.
    pub reason: String,
}

impl AuditConfig {
    /// Checks every setting's range. A value outside it would not fail loudly later: a NaN
    /// or a share above 1 makes every threshold unreachable and the audit pass silently.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field, reason| Err(ConfigError { field, reason });
        for (field, v) in [
            ("min_time_share", self.min_time_share),
            ("min_line_fraction", self.min_line_fraction),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(field, format!("must be a fraction in 0..=1, not {v}"));
            }
        }
        if let Some(v) = self.penalty_cycles {
            // The machine model's range for τ: a larger one overflows the costs, and a
            // finding whose cost is not finite would pass whatever it is.
            if !(1e-6..=1e9).contains(&v) {
                return bad(
                    "penalty_cycles",
                    format!("must be a number of cycles in 1e-6..=1e9, not {v}"),
                );
            }
        }
        for &l in &self.predict_line_sizes {
            if !l.is_power_of_two() || !(8..=512).contains(&l) {
                return bad(
                    "predict_line_sizes",
                    format!("each must be a power of two in 8..=512 (like a machine's line size), not {l}"),
                );
            }
        }
        let step = self.predict_shift_step;
        if step != 0 && !(step.is_power_of_two() && step <= 256) {
            return bad(
                "predict_shift_step",
                format!(
                    "must be 0 (no shift prediction) or a power of two up to 256 (objects move \
                     by multiples of their alignment), not {step}"
                ),
            );
        }
        Ok(())
    }
}

/// What kind of problem a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// False sharing with the recorded layout and line size.
    FalseSharing,
    /// Only under another line size or alignment: the recorded layout happens to hide it.
    LatentFalseSharing,
}

/// One code position with its source location.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Site {
    /// The thread.
    pub thread: ThreadId,
    /// Code position.
    pub pc: Option<CodePos>,
    /// Whether it stores.
    pub store: bool,
    /// Accesses counted.
    pub count: u64,
    /// Function, if known.
    pub function: Option<String>,
    /// Source file, if known.
    pub file: Option<String>,
    /// Source line, if known.
    pub line: Option<u32>,
}

/// A line of source: where a heap block was allocated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceLine {
    /// The function, if known.
    pub function: Option<String>,
    /// Source file, as DWARF gives it.
    pub file: String,
    /// Line (1-based).
    pub line: u32,
}

/// A named data object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ObjectName {
    /// Human name: a global symbol, `heap block from f (file:line)`, `local v of f
    /// (file:line)`, `stack frame of f (file:line)`, or an address.
    pub name: String,
    /// `global`, `heap`, `stack` or `unknown`.
    pub kind: &'static str,
}

/// Line offsets kept per finding (an array falsely shared all over has one per line).
pub const MAX_OFFSETS: usize = 1024;

/// One finding: a data object with false sharing.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Recorded or latent.
    pub kind: FindingKind,
    /// The data object.
    pub object: ObjectName,
    /// Layout under which it shows (the recorded one for `false_sharing`).
    pub layout: Layout,
    /// False-sharing events used for the verdict and the cost: the Pluto estimate (it holds for
    /// every interleaving; the replay shows one interleaving — the recorded instruction-time
    /// order — which can hide sharing that the real run's timing would show, e.g. with dynamic
    /// schedules).
    pub events: u64,
    /// Estimated false-sharing events (Pluto, Σ φ̃′ over the object's blocks).
    pub estimated_events: u64,
    /// Simulated first-level coherence misses on the object's lines classified as false
    /// sharing (None when not simulated, or for latent findings).
    pub simulated_false: Option<u64>,
    /// ... and classified as true sharing.
    pub simulated_true: Option<u64>,
    /// The pair of source lines with the most simulated false-sharing misses: the writer whose
    /// store took the line away, and the victim that missed (each with the code position of
    /// one of its instructions).
    pub simulated_pair: Option<(Site, Site)>,
    /// Worst-case coherence events (Σ φ̃).
    pub worst_case_events: u64,
    /// Possible data exchanges (Σ θ̃).
    pub exchanges: u64,
    /// Cache lines of the object involved.
    pub lines: usize,
    /// Those lines as a fraction of the object's lines (1 when the object's size is unknown).
    pub line_fraction: f64,
    /// Byte offsets of the involved lines from the object's start (globals and heap blocks),
    /// the first [`MAX_OFFSETS`] (`lines` counts them all).
    pub offsets: Vec<u64>,
    /// Threads involved.
    pub threads: Vec<ThreadId>,
    /// The storing site with the most accesses (the writer); the instructions of one source
    /// line count together (`pc` is one of them).
    pub writer: Option<Site>,
    /// The most frequent storing site of another thread on the same lines (the victim), if
    /// it has at least 1 % of that thread's most frequent site's accesses; else its most
    /// frequent site. Counted the same way.
    pub victim: Option<Site>,
    /// A heap block's allocation: the program's line its name gives.
    pub allocated_at: Option<SourceLine>,
    /// A local variable's declaration (stack objects named from DWARF).
    pub declared_at: Option<SourceLine>,
    /// Other globals on the finding's lines (the linker placed them next to the object), or
    /// for a heap block the other heap blocks written there (the allocator placed them next
    /// to it): a thread writing one of them and another thread the object share the line
    /// although neither writes the other's data.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub neighbours: Vec<String>,
    /// Per thread, the part of the busiest line it used, named as a member of the object
    /// when DWARF describes its type (`accs[0]` and `accs[1]`: what to pad).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub line_parts: Vec<LinePart>,
    /// Estimated cost: events × τ, in cycles.
    pub cost_cycles: f64,
    /// Largest share of one thread's time that cost represents (0..1; 0 when unknown): the
    /// thread's share of the cost over its compute time plus that share.
    pub time_share: f64,
    /// Estimated events per 1000 time units (instructions) of the threads involved: the
    /// intensity, independent of how long the program ran.
    pub events_per_kilo_unit: f64,
    /// Whether it exceeds the thresholds (every reported finding does).
    pub exceeds: bool,
    /// Accepted by a baseline (`--baseline`, or written by `--write-baseline`): listed, but it
    /// does not fail the audit.
    pub baselined: bool,
    /// What to do about it.
    pub suggestion: String,
    /// Stable identity for baselines and SARIF (object + sites, not addresses).
    pub fingerprint: String,
}

/// The audit's result.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// Settings used.
    pub config: AuditConfig,
    /// Line size of the machine.
    pub line_size: u64,
    /// τ used, cycles.
    pub penalty_cycles: f64,
    /// Barrier segments.
    pub segments: u64,
    /// Findings, most costly first.
    pub findings: Vec<Finding>,
    /// Data objects with mostly true sharing (data exchanged between threads): not findings,
    /// listed so the report says why they are not flagged.
    pub true_sharing: Vec<TrueSharing>,
}

/// A data object whose coherence traffic is data exchange.
#[derive(Debug, Clone, Serialize)]
pub struct TrueSharing {
    /// The data object.
    pub object: ObjectName,
    /// Possible data exchanges (Σ θ̃).
    pub exchanges: u64,
    /// Of those, hand-overs from one segment to the next (a line one thread used in a
    /// segment and another thread, with a store, in the next: the main thread's set-up
    /// handing its data to the workers).
    pub handovers: u64,
    /// Estimated false-sharing events left after subtracting them (Σ φ̃′).
    pub false_events: u64,
    /// Threads involved: those that shared the object's lines in a segment, and those that
    /// handed them over to another thread from the segment before.
    pub threads: Vec<ThreadId>,
    /// Simulated false-sharing coherence misses on the object's lines (None: not simulated).
    /// Pluto's worst cases can cancel out where one field is exchanged and its neighbour only
    /// read (a hot atomic counter next to read-mostly data); the replay still counts the
    /// misses of the readers that only needed the neighbour.
    pub simulated_false: Option<u64>,
    /// Simulated true-sharing coherence misses on them.
    pub simulated_true: Option<u64>,
}

impl AuditReport {
    /// Whether the audit fails (a finding fails it, see [`Self::finding_fails`]).
    pub fn fails(&self) -> bool {
        self.findings.iter().any(|f| self.finding_fails(f))
    }

    /// Whether `f` fails the audit: it exceeds the thresholds, no baseline accepted it, and it
    /// is false sharing as recorded, or latent with `fail_on_latent`.
    pub fn finding_fails(&self, f: &Finding) -> bool {
        f.exceeds
            && !f.baselined
            && (f.kind == FindingKind::FalseSharing || self.config.fail_on_latent)
    }

    /// Marks the findings whose fingerprints `accepted` holds as baselined.
    pub fn accept(&mut self, accepted: impl Fn(&str) -> bool) {
        for f in &mut self.findings {
            if accepted(&f.fingerprint) {
                f.baselined = true;
            }
        }
    }
}

/// Machine facts the audit needs.
#[derive(Debug, Clone, Copy)]
pub struct AuditMachine {
    /// Cache line size.
    pub line_size: u64,
    /// τ in cycles.
    pub penalty_cycles: f64,
    /// Instructions per cycle (to turn a thread's instruction count into cycles).
    pub ipc: f64,
}

/// Why the audit failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A setting is out of range.
    #[error("audit config: {0}")]
    Config(#[from] ConfigError),
    /// The trace is unreadable.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The replay failed.
    #[error(transparent)]
    Sim(#[from] SimError),
}

/// Runs the audit on `trace`; with `model` (and `config.simulate`) the trace is also replayed
/// in the exact engine and the findings carry simulated coherence misses.
pub fn audit(
    trace: &TraceFile,
    machine: AuditMachine,
    model: Option<&MachineModel>,
    config: &AuditConfig,
) -> Result<AuditReport, AuditError> {
    config.validate()?;
    let line = machine.line_size;
    let mut layouts = vec![Layout::recorded(line)];
    for &l in &config.predict_line_sizes {
        if l != line && l.is_power_of_two() && !layouts.contains(&Layout::recorded(l)) {
            layouts.push(Layout::recorded(l));
        }
    }
    if config.predict_shift_step > 0 {
        let mut s = config.predict_shift_step;
        while s < line {
            layouts.push(Layout {
                line_size: line,
                shift: s,
            });
            s += config.predict_shift_step;
        }
    }
    // A larger line holds several recorded lines: an object aligned to the recorded line may
    // start at any of them, not only where the linker or allocator put it in this recording
    // (an alignas(64) array at 0x4080 shares 128-byte lines across its per-thread rows; moved
    // to 0x40c0 by an unrelated new global, it did not, and the warning came and went).
    for &l in &config.predict_line_sizes {
        if l > line && l.is_power_of_two() {
            layouts.extend((1..l / line).map(|k| Layout {
                line_size: l,
                shift: k * line,
            }));
        }
    }
    let replay = model.filter(|_| config.simulate).map(|m| {
        let mut m = m.clone();
        let threads = trace.thread_ids().count() as u32;
        m.cores = m.cores.max(threads).min(cachescope_sim::model::MAX_CORES);
        // More threads than the simulator has cores: several threads share a core.
        let mapping = if threads > m.cores {
            ThreadMapping::RoundRobin
        } else {
            ThreadMapping::OneToOne
        };
        (m, mapping)
    });
    let mut heap = HeapMap::new();
    let mut stacks = StackMap::new();
    // The replay and the estimates read the trace each on their own and need nothing from
    // each other: the replay runs on a thread of its own beside them (it was a quarter to a
    // third of an audit's time). The estimates' error, if any, is reported first, as when
    // they ran first.
    let (reports, simulated) = std::thread::scope(|scope| {
        let replay = replay.as_ref().map(|(m, mapping)| {
            scope.spawn(move || simulate_exact_with_coherence(trace, m, mapping))
        });
        let reports = estimate_trace(trace, &layouts, &mut heap, &mut stacks);
        let simulated = replay.map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        (reports, simulated)
    });
    let mut reports = reports?;
    let simulated = simulated.transpose()?.map(|(_, log)| log);
    let mut symbols = Symbolizer::new(trace.modules());
    for report in &mut reports {
        merge_by_object(report, line, &mut symbols);
    }
    // A thread's time: inside parallel regions when it has any (serial set-up and tear-down
    // would dilute the cost of false sharing in the parallel phases), else the whole run.
    let whole: BTreeMap<ThreadId, u64> = trace
        .trailer()
        .map(|t| t.threads.iter().map(|x| (x.thread, x.end_time)).collect())
        .unwrap_or_default();
    let thread_units: BTreeMap<ThreadId, f64> = whole
        .iter()
        .map(|(t, w)| {
            let inside = reports[0].region_units.get(t).copied().unwrap_or(0);
            (*t, if inside > 0 { inside } else { *w } as f64)
        })
        .collect();
    let thread_cycles: BTreeMap<ThreadId, f64> = thread_units
        .iter()
        .map(|(t, u)| (*t, u / machine.ipc.max(1e-9)))
        .collect();
    let penalty = config.penalty_cycles.unwrap_or(machine.penalty_cycles);

    let recorded = group(&reports[0], line, &mut symbols);
    // Lines that hold more than one falsely shared object (in different segments): their
    // simulated misses go to the object whose code missed.
    let mut objects_on_line: BTreeMap<u64, usize> = BTreeMap::new();
    for blocks in recorded.values() {
        let lines: BTreeSet<u64> = blocks.iter().map(|b| b.block & !(line - 1)).collect();
        for l in lines {
            *objects_on_line.entry(l).or_default() += 1;
        }
    }
    let crowded: BTreeSet<u64> = objects_on_line
        .into_iter()
        .filter(|&(_, n)| n > 1)
        .map(|(l, _)| l)
        .collect();
    let mut findings = Vec::new();
    for (object, blocks) in &recorded {
        let mut f = finding(
            FindingKind::FalseSharing,
            object,
            &reports[0],
            blocks,
            &mut symbols,
            penalty,
            &thread_cycles,
            &thread_units,
            config,
        );
        if let Some(log) = &simulated {
            attach_simulation(&mut f, blocks, log, line, &crowded, &mut symbols);
        }
        if f.exceeds {
            findings.push(f);
        }
    }
    let true_sharing = true_sharing(
        &reports[0],
        &mut symbols,
        config,
        simulated.as_deref(),
        line,
    );
    // Latent: objects clean (below the event threshold) under the recorded layout, above it
    // under some predicted layout; the worst predicted layout is reported.
    let mut latent: BTreeMap<ObjectName, Finding> = BTreeMap::new();
    // Memory known only by its address has no bounds to compare layouts by: a predicted
    // block of it counts the recorded events of every recorded line it overlaps.
    let recorded_blocks = &reports[0].blocks;
    let mut recorded_lines: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, b) in recorded_blocks.iter().enumerate() {
        recorded_lines.entry(b.block).or_default().push(i);
    }
    let recorded_overlapping = |b: &BlockEstimate, size: u64| -> u64 {
        let from = b.block.saturating_sub(line.saturating_sub(1));
        recorded_lines
            .range(from..b.block.saturating_add(size))
            .flat_map(|(_, e)| e)
            .map(|&i| recorded_blocks[i].phi_prime)
            .sum()
    };
    for report in &reports[1..] {
        for (object, mut blocks) in group(report, line, &mut symbols) {
            // Only the lines of blocks that can land there: one allocation site may hand out
            // blocks of different alignments (an allocation wrapper taking the alignment).
            blocks.retain(|b| !shift_breaks_alignment(report.layout, b, &mut symbols));
            if blocks.is_empty() {
                continue;
            }
            let recorded_events = if object.kind == "unknown" {
                let size = report.layout.line_size;
                blocks.iter().map(|b| recorded_overlapping(b, size)).sum()
            } else {
                let own = recorded
                    .get(&object)
                    .map_or(0, |b| b.iter().map(|x| x.phi_prime).sum::<u64>());
                // An object on the lines of a recorded finding named after its neighbour (the
                // data stored to most names a line) is falsely shared as recorded too: the
                // finding names it among the line's other data. A predicted layout that moves
                // it to lines of its own is no latent finding of it ("no false sharing with
                // the recorded placement" would be wrong), and would count its events twice.
                // Only the recorded lines that hold the object's bytes of a predicted block:
                // a neighbour's recorded finding on the object's first line must not hide
                // latent false sharing on its other lines.
                let predicted = report.layout.line_size;
                let mut held: BTreeSet<usize> = BTreeSet::new();
                for b in &blocks {
                    let Some(base) = object_base(b, &mut symbols) else {
                        continue;
                    };
                    let Some(size) = object_size(b, &mut symbols) else {
                        continue;
                    };
                    let from = b.block.max(base);
                    let to = b
                        .block
                        .saturating_add(predicted)
                        .min(base.saturating_add(size));
                    if from < to {
                        held.extend(recorded_lines.range(from & !(line - 1)..to).flat_map(
                            |(_, indices)| {
                                // Only a recorded finding whose threads used the object's
                                // bytes on that line: false sharing of two neighbours on
                                // it, in a phase in which the object sat idle, leaves the
                                // object's own placement problem where it was (review,
                                // 2026-11-29).
                                indices.iter().copied().filter(move |&i| {
                                    recorded_blocks[i]
                                        .thread_bytes
                                        .iter()
                                        .any(|t| t.start < to && from < t.end)
                                })
                            },
                        ));
                    }
                }
                let around: u64 = held.iter().map(|&i| recorded_blocks[i].phi_prime).sum();
                own.max(around)
            };
            if recorded_events >= config.min_events {
                continue;
            }
            let f = finding(
                FindingKind::LatentFalseSharing,
                &object,
                report,
                &blocks,
                &mut symbols,
                penalty,
                &thread_cycles,
                &thread_units,
                config,
            );
            if !f.exceeds {
                continue;
            }
            // The worst layout; on a tie the one with the machine's line size (a placement
            // problem of this machine) before other line sizes.
            let rank = |x: &Finding| (x.events, x.layout.line_size == line);
            let better = latent.get(&object).is_none_or(|g| rank(&f) > rank(g));
            if better {
                latent.insert(object, f);
            }
        }
    }
    findings.extend(latent.into_values());
    findings.sort_by(|a, b| {
        (
            b.exceeds,
            b.kind == FindingKind::FalseSharing,
            b.events,
            &a.object.name,
        )
            .cmp(&(
                a.exceeds,
                a.kind == FindingKind::FalseSharing,
                a.events,
                &b.object.name,
            ))
    });
    Ok(AuditReport {
        config: config.clone(),
        line_size: line,
        penalty_cycles: penalty,
        segments: reports[0].segments,
        findings,
        true_sharing,
    })
}

/// Objects whose possible data exchanges reach the reporting threshold while their false
/// sharing estimate stays below it.
fn true_sharing(
    report: &PlutoReport,
    symbols: &mut Symbolizer,
    config: &AuditConfig,
    log: Option<&[(CoherenceKey, u64)]>,
    line: u64,
) -> Vec<TrueSharing> {
    let mut by_object: BTreeMap<ObjectName, (TrueSharing, BTreeSet<u64>)> = BTreeMap::new();
    for b in report.blocks.iter().filter(|b| b.theta > 0) {
        let name = object_name(b, report.layout.line_size, symbols);
        let (e, lines) = by_object.entry(name.clone()).or_insert_with(|| {
            let t = TrueSharing {
                object: name,
                exchanges: 0,
                handovers: 0,
                false_events: 0,
                threads: Vec::new(),
                simulated_false: None,
                simulated_true: None,
            };
            (t, BTreeSet::new())
        });
        e.exchanges += b.theta;
        e.handovers += b.handovers;
        e.false_events += b.phi_prime;
        e.threads.extend(b.threads.iter().copied());
        e.threads.extend(b.handover_threads.iter().copied());
        lines.insert(b.block & !(line - 1));
    }
    let mut out: Vec<TrueSharing> = by_object
        .into_values()
        .filter(|(t, _)| t.exchanges >= config.min_events && t.false_events < config.min_events)
        .map(|(mut t, lines)| {
            t.threads.sort_unstable();
            t.threads.dedup();
            if let Some(log) = log {
                let on_lines = log.iter().filter(|(k, _)| lines.contains(&k.line));
                let (fals, tru) = on_lines.fold((0, 0), |(f, t), (k, n)| {
                    if k.false_sharing {
                        (f + n, t)
                    } else {
                        (f, t + n)
                    }
                });
                (t.simulated_false, t.simulated_true) = (Some(fals), Some(tru));
            }
            t
        })
        .collect();
    out.sort_by(|a, b| b.exchanges.cmp(&a.exchanges).then(a.object.cmp(&b.object)));
    out
}

/// Adds the simulated coherence misses on the finding's lines, and the top code-position pair.
/// On `crowded` lines (several objects' findings) only the misses of the finding's own
/// accesses (thread and code position) count.
fn attach_simulation(
    f: &mut Finding,
    blocks: &[&BlockEstimate],
    log: &[(CoherenceKey, u64)],
    line: u64,
    crowded: &BTreeSet<u64>,
    symbols: &mut Symbolizer,
) {
    let lines: BTreeSet<u64> = blocks.iter().map(|b| b.block & !(line - 1)).collect();
    let own: BTreeSet<(u64, ThreadId, Option<CodePos>)> = blocks
        .iter()
        .filter(|b| crowded.contains(&(b.block & !(line - 1))))
        .flat_map(|b| {
            b.sites
                .iter()
                .map(move |(s, _)| (b.block & !(line - 1), s.thread, s.pc))
        })
        .collect();
    let (mut fals, mut tru) = (0u64, 0u64);
    let mut pairs: BTreeMap<(ThreadId, Option<CodePos>, ThreadId, Option<CodePos>), u64> =
        BTreeMap::new();
    let mine = |k: &CoherenceKey| {
        lines.contains(&k.line)
            && (!crowded.contains(&k.line) || own.contains(&(k.line, k.victim_thread, k.victim_pc)))
    };
    for (k, n) in log.iter().filter(|(k, _)| mine(k)) {
        if k.false_sharing {
            fals += n;
            if let Some(w) = k.writer_thread {
                *pairs
                    .entry((w, k.writer_pc, k.victim_thread, k.victim_pc))
                    .or_default() += n;
            }
        } else {
            tru += n;
        }
    }
    f.simulated_false = Some(fals);
    f.simulated_true = Some(tru);
    // Pairs of source lines: an unrolled loop's copies of one store are one writer.
    let mut lines: Vec<(Site, Site)> = Vec::new();
    for ((wt, wpc, vt, vpc), n) in pairs {
        let w = located(symbols, wt, wpc, true, n);
        let v = located(symbols, vt, vpc, false, n);
        match lines
            .iter_mut()
            .find(|(a, b)| same_source_line(a, &w) && same_source_line(b, &v))
        {
            Some((a, b)) => {
                a.count += n;
                b.count += n;
            }
            None => lines.push((w, v)),
        }
    }
    f.simulated_pair = most_accessed(&lines, |_| true, |(w, _)| w).cloned();
}

/// Counts at least this share of the highest are a tie, settled by source position: the
/// schedule of a recording moves counts by a few accesses (a loop condition's read of a
/// neighbour 100,001 times against the body's 100,000), and the sites a finding names — and
/// so its fingerprint — must not follow it from one recording to the next.
const COMPARABLE_COUNTS: f64 = 0.99;

/// Of the `items` that `keep`, the one whose `site` has the most accesses, where counts within
/// [`COMPARABLE_COUNTS`] of it are settled by [`source_order`].
fn most_accessed<T>(
    items: &[T],
    keep: impl Fn(&T) -> bool,
    site: impl Fn(&T) -> &Site,
) -> Option<&T> {
    let max = items
        .iter()
        .filter(|i| keep(i))
        .map(|i| site(i).count)
        .max()?;
    items
        .iter()
        .filter(|i| keep(i) && site(i).count as f64 >= max as f64 * COMPARABLE_COUNTS)
        .min_by(|a, b| source_order(site(a)).cmp(&source_order(site(b))))
}

/// Known lines first, then by file, line, loads before stores, thread and function: nothing
/// that changes between recordings of one program (code addresses move with the load address).
type SourceOrder<'a> = (
    bool,
    Option<&'a str>,
    Option<u32>,
    bool,
    ThreadId,
    Option<&'a str>,
);

fn source_order(s: &Site) -> SourceOrder<'_> {
    (
        s.line.is_none(),
        s.file.as_deref(),
        s.line,
        s.store,
        s.thread,
        s.function.as_deref(),
    )
}

/// Sites of one thread, direction and known source line (function, file, line) merged into
/// one, with the summed count and the code position of the first: several instructions of
/// one line (an unrolled or vectorized loop) are one place in the program's source. Sorted by
/// count, most first; ties keep the order given.
fn by_source_line(sites: impl IntoIterator<Item = Site>) -> Vec<Site> {
    let mut merged: Vec<Site> = Vec::new();
    for s in sites {
        match merged.iter_mut().find(|m| same_source_line(m, &s)) {
            Some(m) => m.count += s.count,
            None => merged.push(s),
        }
    }
    merged.sort_by_key(|s| std::cmp::Reverse(s.count));
    merged
}

/// The same thread and direction at the same known source line, or where the line is not
/// known (no debug information, no recorded code position) at the same code position.
fn same_source_line(a: &Site, b: &Site) -> bool {
    let known = |s: &Site| s.line.is_some() && s.file.is_some();
    (a.thread, a.store) == (b.thread, b.store)
        && match (known(a), known(b)) {
            (true, true) => (&a.function, &a.file, a.line) == (&b.function, &b.file, b.line),
            (false, false) => a.pc == b.pc,
            _ => false,
        }
}

/// A site with its source location.
fn located(
    symbols: &mut Symbolizer,
    thread: ThreadId,
    pc: Option<CodePos>,
    store: bool,
    count: u64,
) -> Site {
    let loc = pc.and_then(|p| symbols.code_pos(p));
    // The access as the program's source says it: library code inlined into it (a
    // `std::atomic`'s `fetch_add` in `atomic_base.h`) is named by the program's line that
    // called it, the first frame outwards in the program's own source.
    let frame = loc.as_ref().and_then(|l| {
        l.frames()
            .find(|f| f.is_program_source())
            .or_else(|| l.frames().next())
    });
    Site {
        thread,
        pc,
        store,
        count,
        function: frame.as_ref().and_then(|f| f.function.clone()),
        file: frame.as_ref().and_then(|f| f.file.clone()),
        line: frame.as_ref().and_then(|f| f.line),
    }
}

/// Cost, shares and verdict of a finding from its `events`.
fn rate(
    f: &mut Finding,
    penalty: f64,
    thread_cycles: &BTreeMap<ThreadId, f64>,
    thread_units: &BTreeMap<ThreadId, f64>,
    config: &AuditConfig,
) {
    f.cost_cycles = f.events as f64 * penalty;
    // Each event delays one of the threads involved; spread evenly, a thread's share is its
    // part of the cost over its compute time plus that part.
    let per_thread = f.cost_cycles / f.threads.len().max(1) as f64;
    f.time_share = f
        .threads
        .iter()
        .filter_map(|t| thread_cycles.get(t))
        .filter(|&&c| c > 0.0)
        .map(|c| per_thread / (c + per_thread))
        .fold(0.0, f64::max);
    let involved_units: f64 = f.threads.iter().filter_map(|t| thread_units.get(t)).sum();
    f.events_per_kilo_unit = if involved_units > 0.0 {
        f.events as f64 * 1000.0 / involved_units
    } else {
        0.0
    };
    f.exceeds = f.events >= config.min_events
        && f.time_share >= config.min_time_share
        && f.line_fraction >= config.min_line_fraction;
}

/// Pluto keeps a block's estimates apart by the address that named the block in each segment
/// (a line may hold one global in one segment and another in the next); here, where symbols
/// are known, the estimates of a block that name the same global (or the same line of
/// unknown memory) become one again. Heap and stack estimates are kept apart by Pluto itself.
fn merge_by_object(report: &mut PlutoReport, line: u64, symbols: &mut Symbolizer) {
    let mut merged: Vec<BlockEstimate> = Vec::with_capacity(report.blocks.len());
    let mut index: BTreeMap<(u64, ObjectName), usize> = BTreeMap::new();
    let mut changed = false;
    for b in std::mem::take(&mut report.blocks) {
        if b.heap.is_some() || b.stack.is_some() {
            merged.push(b);
            continue;
        }
        let key = (b.block, object_name(&b, line, symbols));
        match index.get(&key) {
            Some(&i) => {
                merged[i].absorb(b);
                changed = true;
            }
            None => {
                index.insert(key, merged.len());
                merged.push(b);
            }
        }
    }
    if changed {
        sort_blocks(&mut merged);
    }
    report.blocks = merged;
}

/// Groups a report's blocks by the data object they belong to.
fn group<'a>(
    report: &'a PlutoReport,
    line: u64,
    symbols: &mut Symbolizer,
) -> BTreeMap<ObjectName, Vec<&'a BlockEstimate>> {
    let mut out: BTreeMap<ObjectName, Vec<&BlockEstimate>> = BTreeMap::new();
    for b in &report.blocks {
        if b.phi_prime == 0 {
            continue;
        }
        let name = object_name(b, line, symbols);
        out.entry(name).or_default().push(b);
    }
    out
}

/// The data object of block `b`: a heap block, a global, a local variable or frame of a
/// recorded stack frame, or else memory known only by its address, named by the recorded
/// `line`-byte line of its lowest accessed address — the same
/// name under every predicted layout (a 128-byte or shifted block starts elsewhere), so a
/// prediction about memory that already has a finding under the recorded layout is not
/// reported again as latent, and one object gets one latent finding.
fn object_name(b: &BlockEstimate, line: u64, symbols: &mut Symbolizer) -> ObjectName {
    if let Some(h) = &b.heap {
        return ObjectName {
            name: symbols.heap_block_name(h),
            kind: "heap",
        };
    }
    match symbols.data(b.sample_addr) {
        Some(DataObject::Global { name, .. }) => ObjectName {
            name: name.to_string(),
            kind: "global",
        },
        _ if b.stack.is_some() => ObjectName {
            name: b
                .stack
                .as_ref()
                .map(|s| symbols.stack_object(s).name())
                .unwrap_or_default(),
            kind: "stack",
        },
        _ => ObjectName {
            name: format!(
                "memory at {:#x}",
                b.sample_addr - b.sample_addr % line.max(1)
            ),
            kind: "unknown",
        },
    }
}

/// Alignment every allocation function guarantees for blocks of at least this many bytes:
/// `alignof(max_align_t)` on x86-64, what C's `malloc` and C++'s `new` promise (glibc gives it
/// to every block).
const FUNDAMENTAL_ALIGNMENT: u64 = 16;

/// Alignment of the stack at a call on x86-64 (the System V ABI): a recorded frame, and every
/// local in it, can only land elsewhere by a multiple of it.
const STACK_ALIGNMENT: u64 = 16;

/// Whether `layout` shifts the object holding block `b` by an amount the object's alignment
/// rules out: such a predicted layout cannot happen. A global's alignment is the one declared
/// in the DWARF (`alignas(64)` keeps it on a line boundary, whatever the link order); a heap
/// block's is the one the program asked for (`aligned_alloc(64, n)`, recorded in the trace),
/// and at least [`FUNDAMENTAL_ALIGNMENT`] for blocks that large; a stack object's is its
/// declared one and at least [`STACK_ALIGNMENT`]. A global without DWARF or declared
/// alignment keeps every shift.
fn shift_breaks_alignment(layout: Layout, b: &BlockEstimate, symbols: &mut Symbolizer) -> bool {
    if layout.shift == 0 {
        return false;
    }
    let align = match &b.heap {
        Some(h) => {
            let fundamental = (h.size >= FUNDAMENTAL_ALIGNMENT).then_some(FUNDAMENTAL_ALIGNMENT);
            h.align.map(Alignment::bytes).max(fundamental)
        }
        // A stack frame moves as a whole, by multiples of the 16 bytes the x86-64 ABI keeps
        // the stack aligned to at every call (a deeper call chain, a longer environment).
        None if b.stack.is_some() => {
            let declared = stack_local(b, symbols).and_then(|local| local.align);
            declared.max(Some(STACK_ALIGNMENT))
        }
        None => symbols.declared_alignment(b.sample_addr),
    };
    align.is_some_and(|a| !layout.shift.is_multiple_of(a))
}

/// The local variable holding block `b`, when it is in a recorded stack frame and DWARF
/// places a variable there.
fn stack_local(b: &BlockEstimate, symbols: &mut Symbolizer) -> Option<StackLocal> {
    if b.heap.is_some() {
        return None;
    }
    symbols.stack_object(b.stack.as_ref()?).local
}

/// Size in bytes of the object containing the block, when known.
fn object_size(b: &BlockEstimate, symbols: &mut Symbolizer) -> Option<u64> {
    if let Some(h) = &b.heap {
        return Some(h.size);
    }
    match symbols.data(b.sample_addr) {
        Some(DataObject::Global { size, .. }) => Some(size),
        _ => stack_local(b, symbols).and_then(|l| l.size),
    }
}

/// Start address of the object containing the block (for offsets).
fn object_base(b: &BlockEstimate, symbols: &mut Symbolizer) -> Option<u64> {
    if let Some(h) = &b.heap {
        return Some(h.base);
    }
    match symbols.data(b.sample_addr) {
        Some(DataObject::Global { offset, .. }) => Some(b.sample_addr - offset),
        _ => stack_local(b, symbols).map(|l| l.base),
    }
}

#[allow(clippy::too_many_arguments)]
fn finding(
    kind: FindingKind,
    object: &ObjectName,
    report: &PlutoReport,
    blocks: &[&BlockEstimate],
    symbols: &mut Symbolizer,
    penalty: f64,
    thread_cycles: &BTreeMap<ThreadId, f64>,
    thread_units: &BTreeMap<ThreadId, f64>,
    config: &AuditConfig,
) -> Finding {
    let layout = report.layout;
    let events: u64 = blocks.iter().map(|b| b.phi_prime).sum();
    let worst: u64 = blocks.iter().map(|b| b.phi).sum();
    let exchanges: u64 = blocks.iter().map(|b| b.theta).sum();
    let mut threads: Vec<ThreadId> = blocks.iter().flat_map(|b| b.threads.clone()).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut sites: BTreeMap<SiteKey, u64> = BTreeMap::new();
    for b in blocks {
        for (k, n) in &b.sites {
            *sites.entry(*k).or_default() += n;
        }
    }
    let ranked = by_source_line(
        sites
            .into_iter()
            .map(|(k, n)| located(symbols, k.thread, k.pc, k.store, n)),
    );
    let writer = most_accessed(&ranked, |s| s.store, |s| s).cloned();
    // The victim's own writes first: they are what shares the line with the writer's, while
    // its reads may be of a neighbour that shares the line in one recording and not in the
    // next (a stack variable, placed anew with every run), which would change the fingerprint.
    let victim = writer.as_ref().and_then(|w| {
        let other = |s: &Site| s.thread != w.thread;
        // A store counts if it is not negligible next to the thread's reads (one write of a
        // neighbour read a million times is not what suffers).
        let top = ranked.iter().filter(|s| other(s)).map(|s| s.count).max()?;
        let store = |s: &Site| other(s) && s.store && s.count.saturating_mul(100) >= top;
        most_accessed(&ranked, store, |s| s)
            .or_else(|| most_accessed(&ranked, other, |s| s))
            .cloned()
    });
    let mut offsets: Vec<u64> = blocks
        .iter()
        .filter_map(|b| object_base(b, symbols).map(|base| b.block.saturating_sub(base)))
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    offsets.truncate(MAX_OFFSETS);
    let base = blocks.first().and_then(|b| object_base(b, symbols));
    // Of the object's written lines, how many are falsely shared.
    let written = blocks.first().and_then(|b| {
        let base = base?;
        let size = object_size(b, symbols)?;
        // Saturating: a block may end at the top of the address space (hostile traces).
        let end = base.saturating_add(size).saturating_add(layout.shift);
        Some(report.written_in(base.wrapping_add(layout.shift), end))
    });
    let line_fraction = written
        .filter(|&n| n > 0)
        .map_or(1.0, |n| (blocks.len() as f64 / n as f64).min(1.0));
    // Where the object started in its line in the recording.
    let start_in_line = base.map(|b| b % layout.line_size.max(1));
    let neighbours = match object.kind {
        "global" if layout.shift == 0 => {
            neighbours_on_lines(object, blocks, layout.line_size, symbols)
        }
        "heap" if layout.shift == 0 => heap_neighbours(object, blocks, symbols),
        _ => Vec::new(),
    };
    let suggestion = suggestion(
        kind,
        object,
        layout,
        threads.len(),
        (exchanges, worst),
        start_in_line,
        &neighbours,
        report.region_units.values().any(|&u| u > 0),
    );
    let heap = blocks.first().and_then(|b| b.heap.as_deref());
    let allocated_at = heap
        .filter(|_| object.kind == "heap")
        .and_then(|h| symbols.allocation_frames(h).0)
        .and_then(|f| {
            Some(SourceLine {
                function: f.function,
                file: f.file?,
                line: f.line.filter(|&l| l > 0)?,
            })
        });
    let stack = blocks
        .first()
        .filter(|_| object.kind == "stack")
        .and_then(|b| b.stack.as_ref())
        .map(|s| symbols.stack_object(s));
    let declared_at = match object.kind {
        "stack" => stack.as_ref().and_then(|s| {
            let l = s.local.as_ref()?;
            Some(SourceLine {
                function: l.function.clone().or_else(|| s.function.clone()),
                file: l.decl_file.clone()?,
                line: l.decl_line.filter(|&l| l > 0)?,
            })
        }),
        // A global's declaration, from DWARF (`static` variables of a function included).
        "global" => blocks.first().and_then(|b| {
            let (file, line) = symbols.declaration(b.sample_addr)?;
            Some(SourceLine {
                // A function's `static` variable: that function.
                function: symbols.static_function(b.sample_addr),
                file,
                line,
            })
        }),
        _ => None,
    };
    let size = blocks.first().and_then(|b| object_size(b, symbols));
    let line_parts = line_parts::line_parts(object, blocks, (base, size), symbols);
    let fingerprint = fingerprint(
        kind,
        object,
        heap,
        stack.as_ref(),
        [writer.as_ref(), victim.as_ref()],
        symbols,
    );
    let mut f = Finding {
        kind,
        object: object.clone(),
        layout,
        events,
        estimated_events: events,
        simulated_false: None,
        simulated_true: None,
        simulated_pair: None,
        worst_case_events: worst,
        exchanges,
        lines: blocks.len(),
        line_fraction,
        offsets,
        threads,
        writer,
        victim,
        allocated_at,
        declared_at,
        neighbours,
        line_parts,
        cost_cycles: 0.0,
        time_share: 0.0,
        events_per_kilo_unit: 0.0,
        exceeds: false,
        baselined: false,
        suggestion,
        fingerprint,
    };
    rate(&mut f, penalty, thread_cycles, thread_units, config);
    f
}

/// Lines of a finding looked at for other globals.
const NEIGHBOUR_LINES: usize = 4;
/// Other globals named at most.
const NEIGHBOURS: usize = 4;

/// The other globals on the first [`NEIGHBOUR_LINES`] lines of a finding on a global.
fn neighbours_on_lines(
    object: &ObjectName,
    blocks: &[&BlockEstimate],
    line: u64,
    symbols: &mut Symbolizer,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for b in blocks.iter().take(NEIGHBOUR_LINES) {
        let start = b.block & !(line - 1);
        for at in (0..line).step_by(8).map(|o| start.saturating_add(o)) {
            if let Some(DataObject::Global { name, .. }) = symbols.data(at) {
                // Not the toolchain's own (crtstuff's `completed.0`, `__dso_handle`): a name
                // with a dot that DWARF did not turn into a function's static, or `__…`.
                let toolchain =
                    (name.contains('.') && !name.starts_with("static ")) || name.starts_with("__");
                if !toolchain && *name != *object.name && !out.iter().any(|n| *n == *name) {
                    out.push(name.to_string());
                }
            }
        }
    }
    out.truncate(NEIGHBOURS);
    out
}

/// The other heap blocks stored to on the first [`NEIGHBOUR_LINES`] lines of a finding on a
/// heap block (see [`BlockEstimate::heap_neighbours`]); one from the same allocation site as
/// the object is named as such.
fn heap_neighbours(
    object: &ObjectName,
    blocks: &[&BlockEstimate],
    symbols: &mut Symbolizer,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for h in blocks
        .iter()
        .take(NEIGHBOUR_LINES)
        .flat_map(|b| b.heap_neighbours.iter())
    {
        let name = symbols.heap_block_name(h);
        let name = if name == object.name {
            "another block allocated there".to_string()
        } else {
            name
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out.truncate(NEIGHBOURS);
    out
}

/// What to do about a finding. `exchanges` of `worst` possible coherence events move data the
/// threads really share (the same bytes); `start_in_line`: the object's start in its line (of
/// `layout`'s size) in the recording, when its start is known; `neighbours`: other globals
/// on its lines; `openmp`: the program ran parallel regions (else schedules and reductions
/// are not its words).
#[allow(clippy::too_many_arguments)]
fn suggestion(
    kind: FindingKind,
    object: &ObjectName,
    layout: Layout,
    threads: usize,
    (exchanges, worst): (u64, u64),
    start_in_line: Option<u64>,
    neighbours: &[String],
    openmp: bool,
) -> String {
    let line = layout.line_size;
    let (chunks, distribution) = if openmp {
        (
            "bigger schedule chunk size",
            "a bigger schedule chunk size, or a block distribution",
        )
    } else {
        (
            "e.g. one contiguous range of elements per thread",
            "a block distribution: each thread a contiguous range",
        )
    };
    match kind {
        // Two globals the linker put on one line, each written by its own thread.
        FindingKind::FalseSharing if !neighbours.is_empty() && object.kind == "global" => format!(
            "{threads} threads access disjoint bytes of the same {line}-byte lines, which hold \
             {} and {}: if different threads write them, give each its own line (declare them \
             alignas({line}), or gather what each thread writes into a struct of its own \
             declared alignas({line})); if the threads write parts of {} itself, pad its \
             per-thread elements to {line} bytes or hand out larger contiguous chunks per thread",
            object.name,
            neighbours.join(", "),
            object.name
        ),
        // Objects allocated one after another (one per thread) that the allocator put on one
        // line.
        FindingKind::FalseSharing if !neighbours.is_empty() => format!(
            "{threads} threads access disjoint bytes of the same {line}-byte lines, which hold \
             {} and {}: if different threads write them, give each its own \
             line (allocate them with aligned_alloc({line}, …) rounded up to {line} bytes, or \
             declare their type alignas({line}), which C++17's new honours); if the threads \
             write parts of {} itself, pad its per-thread elements to {line} bytes or hand out \
             larger contiguous chunks per thread",
            object.name,
            neighbours.join(", "),
            object.name
        ),
        // Many exchanges: the threads also write the same bytes (e.g. bits of one byte of a
        // bit array), and padding elements would not separate them.
        FindingKind::FalseSharing if exchanges.saturating_mul(10) >= worst.max(1) => format!(
            "{threads} threads access the same {line}-byte lines of {}, at different bytes but \
             also at the same ones (about {} of {} possible coherence events exchange data): \
             padding elements cannot separate them; hand out larger contiguous chunks per \
             thread ({distribution}) so that each line is written by one thread",
            object.name,
            thousands(exchanges),
            thousands(worst)
        ),
        FindingKind::FalseSharing => format!(
            "{threads} threads access disjoint bytes of the same {line}-byte lines of {}, at \
             least one of them writing: give each thread's part its own line (pad per-thread \
             elements to {line} bytes, e.g. alignas({line})), or hand out larger contiguous \
             chunks per thread ({chunks}){}",
            object.name,
            match (object.kind, openmp) {
                ("stack", true) => {
                    "; or let each thread work on a private variable (declared inside the \
                     parallel region, or an OpenMP reduction) and combine the results once at \
                     the end"
                }
                ("stack", false) => {
                    "; or let each thread work on a private variable (declared in the thread \
                     function) and combine the results once at the end"
                }
                _ => "",
            }
        ),
        FindingKind::LatentFalseSharing if layout.shift > 0 => {
            // An object aligned to the line size never gets here: its shifts are ruled out
            // (a global's from the DWARF, a heap block's from the alignment its allocation
            // asked for, which the trace records).
            let placement = match (start_in_line, object.kind) {
                (Some(0), "global") => format!(
                    " It started on a {line}-byte boundary in this recording; declare it \
                     alignas({line}) (or larger, on the object or its type) and the audit rules \
                     such placements out"
                ),
                (Some(0), "heap") => format!(
                    " It started on a {line}-byte boundary in this recording, but its allocation \
                     does not guarantee that (malloc and new guarantee 16 bytes; aligned_alloc, \
                     posix_memalign and new of an alignas type what they ask for); allocate it \
                     with aligned_alloc({line}, …) in C, or declare its type alignas({line}) in \
                     C++, and the audit rules such placements out"
                ),
                _ => String::new(),
            };
            // Where the predicted placement puts the object's start, when the recorded one is
            // known; otherwise only the shift from it.
            let start = match start_in_line {
                Some(0) => format!("starting {} bytes past a line boundary", layout.shift),
                Some(r) => format!(
                    "starting {} bytes past a line boundary (it started {r} bytes past one in \
                     the recording)",
                    (r + layout.shift) % line.max(1)
                ),
                None => format!("placed {} bytes further", layout.shift),
            };
            format!(
                "no false sharing with the recorded placement, but with {} {start} its \
                 per-thread parts would share {line}-byte lines: align the object to {line} \
                 bytes (alignas({line}), aligned_alloc) and pad per-thread parts to whole \
                 lines, so the layout does not depend on where it lands.{placement}",
                object.name
            )
        }
        FindingKind::LatentFalseSharing => format!(
            "no false sharing with the recorded line size, but with {line}-byte lines the \
             per-thread parts of {} share lines: pad them to {line} bytes to be safe on such \
             machines",
            object.name
        ),
    }
}

/// A stable fingerprint (FNV-1a): the kind, what the object is and the writer's and victim's
/// function, file name and source line text, as an unordered pair. Never addresses (they change between runs) and line
/// numbers only when the source cannot be read: adding a line above a finding must not turn
/// an accepted finding into a new one. A heap block counts by its allocation site, the same
/// way.
fn fingerprint(
    kind: FindingKind,
    object: &ObjectName,
    heap: Option<&HeapBlock>,
    stack: Option<&StackObject>,
    sites: [Option<&Site>; 2],
    symbols: &mut Symbolizer,
) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |s: &str| {
        for b in s.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(match kind {
        FindingKind::FalseSharing => "fs",
        FindingKind::LatentFalseSharing => "latent",
    });
    let (heap_frames, heap_loc) = match (object.kind, heap) {
        ("heap", Some(block)) => match symbols.allocation_frames(block) {
            // The site's own location only names a block with no frame of the program's.
            (None, _) => ((None, None), block.site.and_then(|s| symbols.code_pos(s))),
            frames => (frames, None),
        },
        _ => ((None, None), None),
    };
    let mut code = |function: Option<&str>, file: Option<&str>, line: Option<u32>| {
        let text = match (file, line) {
            (Some(f), Some(l)) => symbols
                .source_line(f, l)
                .map_or_else(|| format!("line {l}"), |t| format!("text {t}")),
            _ => String::new(),
        };
        let file = file.unwrap_or("");
        [
            function.unwrap_or("").to_owned(),
            file.rsplit('/').next().unwrap_or(file).to_owned(),
            text,
        ]
    };
    let mut frame = |f: &InlinedCall| code(f.function.as_deref(), f.file.as_deref(), f.line);
    let object_parts: Vec<[String; 3]> = match (object.kind, heap_frames, heap_loc.as_deref()) {
        // The frames the object is named by (the program's line for library code, and the
        // caller of an allocating function of the program's).
        ("heap", (Some(f), caller), _) => std::iter::once(&f)
            .chain(caller.as_ref())
            .map(&mut frame)
            .collect(),
        ("heap", (None, _), Some(loc)) => {
            vec![code(loc.function.as_deref(), loc.file.as_deref(), loc.line)]
        }
        ("unknown", _, _) => vec![["unknown".to_owned(), String::new(), String::new()]],
        // A local by its function, file and name; a frame by its function, the function
        // that made the recorded call and the file; never line numbers.
        ("stack", _, _) => {
            let part = |f: Option<&str>| f.unwrap_or("").to_owned();
            vec![match stack {
                Some(StackObject {
                    local: Some(l),
                    function,
                    ..
                }) => [
                    format!(
                        "stack {}",
                        part(l.function.as_deref().or(function.as_deref()))
                    ),
                    part(l.decl_file.as_deref().map(base_name)),
                    format!("local {}", l.name),
                ],
                Some(s) => [
                    format!("stack {}", part(s.function.as_deref())),
                    part(s.file.as_deref().map(base_name)),
                    format!("frame {}", part(s.caller.as_deref())),
                ],
                None => ["stack".to_owned(), String::new(), String::new()],
            }]
        }
        _ => vec![[object.name.clone(), String::new(), String::new()]],
    };
    let mut site_parts: Vec<[String; 3]> = sites
        .into_iter()
        .flatten()
        .map(|s| code(s.function.as_deref(), s.file.as_deref(), s.line))
        .collect();
    // The pair, not who wrote more: two threads bumping neighbouring counters for the same
    // time make either one the writer (the one with more accesses), run by run.
    site_parts.sort_unstable();
    for part in object_parts.iter().chain(&site_parts) {
        for p in part {
            eat(p);
        }
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(thread: ThreadId, pc: u64, line: Option<u32>, count: u64) -> Site {
        Site {
            thread,
            pc: CodePos::new(pc),
            store: true,
            count,
            function: line.map(|_| "f".to_string()),
            file: line.map(|_| "f.c".to_string()),
            line,
        }
    }

    #[test]
    fn fixes_speak_openmp_only_to_openmp_programs() {
        let fix = |kind: &'static str, openmp: bool| {
            let object = ObjectName {
                name: "counters".into(),
                kind,
            };
            let layout = Layout {
                line_size: 64,
                shift: 0,
            };
            suggestion(
                FindingKind::FalseSharing,
                &object,
                layout,
                2,
                (0, 100),
                None,
                &[],
                openmp,
            )
        };
        assert!(fix("global", true).contains("schedule chunk size"));
        assert!(!fix("global", false).contains("schedule"));
        assert!(fix("stack", true).contains("OpenMP reduction"));
        assert!(!fix("stack", false).contains("OpenMP"));
        assert!(fix("stack", false).contains("thread function"));
    }

    #[test]
    fn sites_are_merged_by_source_line_else_by_code_position() {
        let merged = by_source_line([
            // An unrolled store: two instructions of line 9.
            site(1, 0x10, Some(9), 40),
            site(1, 0x18, Some(9), 40),
            // Without a line: one instruction seen twice stays one, another stays apart.
            site(1, 0x40, None, 50),
            site(1, 0x40, None, 10),
            site(1, 0x48, None, 30),
            // Another thread's copy of line 9.
            site(2, 0x10, Some(9), 5),
        ]);
        let summary: Vec<(ThreadId, Option<u32>, u64, u64)> = merged
            .iter()
            .map(|s| (s.thread, s.line, s.pc.map_or(0, CodePos::addr), s.count))
            .collect();
        assert_eq!(
            summary,
            [
                (1, Some(9), 0x10, 80),
                (1, None, 0x40, 60),
                (1, None, 0x48, 30),
                (2, Some(9), 0x10, 5)
            ]
        );
    }
}
