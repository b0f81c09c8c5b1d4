//! What `trace info` and `trace verify` report about a trace.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::Path;

use serde::Serialize;

use crate::error::{Result, TraceError};
use crate::event::{EventKind, ThreadId};
use crate::reader::{OpenOptions, TraceFile};
use crate::record::{TimeUnit, TraceHeader};
use crate::scan::scan;

/// Per-thread facts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ThreadInfo {
    /// The thread.
    pub thread: ThreadId,
    /// Events by kind (only kinds that occur).
    pub events_by_kind: BTreeMap<&'static str, u64>,
    /// All events.
    pub events: u64,
    /// The thread's own clock at its end (sum of its time, before alignment).
    pub local_time: u64,
    /// Aligned time of the thread's first event.
    pub first_time: u64,
    /// Aligned time after the thread's last event.
    pub end_time: u64,
}

/// Facts about a whole trace.
#[derive(Debug, Clone, Serialize)]
pub struct TraceSummary {
    /// The header.
    pub header: TraceHeader,
    /// Unit of all times below.
    pub time_unit: TimeUnit,
    /// File size.
    pub file_bytes: u64,
    /// Number of chunks.
    pub chunks: u64,
    /// All events.
    pub events: u64,
    /// Memory accesses (loads, stores, RMWs, modifies, fetches).
    pub accesses: u64,
    /// File bytes per event.
    pub bytes_per_event: f64,
    /// Events by kind over all threads.
    pub events_by_kind: BTreeMap<&'static str, u64>,
    /// Aligned time after the last event of any thread (the program's span).
    pub time_span: u64,
    /// Per-thread facts, by thread id.
    pub threads: Vec<ThreadInfo>,
    /// Whether the trace ended without trailer or with damage (read with `allow_incomplete`).
    pub incomplete: bool,
}

impl TraceSummary {
    /// Reads every event of `trace` in global order and summarizes it.
    pub fn compute(trace: &TraceFile) -> Result<Self> {
        let mut threads: BTreeMap<ThreadId, ThreadInfo> = trace
            .threads()
            .iter()
            .map(|(&t, s)| {
                (
                    t,
                    ThreadInfo {
                        thread: t,
                        local_time: s.end_time,
                        first_time: u64::MAX,
                        ..ThreadInfo::default()
                    },
                )
            })
            .collect();
        let mut counts = vec![[0u64; EventKind::COUNT]; threads.len()];
        let slot: BTreeMap<ThreadId, usize> =
            threads.keys().enumerate().map(|(i, &t)| (t, i)).collect();
        let cost = trace.header().time_unit.access_cost();
        for e in trace.merged()? {
            let e = e.map_err(|err| err.at_path(trace.path()))?;
            // Merged events only come from indexed threads.
            let (Some(info), Some(&k)) = (threads.get_mut(&e.thread), slot.get(&e.thread)) else {
                continue;
            };
            counts[k][e.event.kind() as usize] += 1;
            info.first_time = info.first_time.min(e.time);
            let after = match e.event {
                crate::event::Event::Access(_) => e.time.saturating_add(cost),
                crate::event::Event::Advance { units, .. } => e.time.saturating_add(units),
                _ => e.time,
            };
            info.end_time = info.end_time.max(after);
        }
        let mut total = [0u64; EventKind::COUNT];
        for (info, c) in threads.values_mut().zip(&counts) {
            if info.first_time == u64::MAX {
                info.first_time = 0;
            }
            for (k, &n) in EventKind::ALL.iter().zip(c) {
                total[*k as usize] += n;
                if n > 0 {
                    info.events_by_kind.insert(k.name(), n);
                }
                info.events += n;
            }
        }
        let by_kind: BTreeMap<_, _> = EventKind::ALL
            .iter()
            .zip(total)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (k.name(), n))
            .collect();
        let events: u64 = total.iter().sum();
        let accesses: u64 = total[..5].iter().sum();
        Ok(TraceSummary {
            header: trace.header().clone(),
            time_unit: trace.header().time_unit,
            file_bytes: trace.file_len(),
            chunks: trace.chunks().len() as u64,
            events,
            accesses,
            bytes_per_event: if events == 0 {
                0.0
            } else {
                trace.file_len() as f64 / events as f64
            },
            events_by_kind: by_kind,
            time_span: threads.values().map(|t| t.end_time).max().unwrap_or(0),
            threads: threads.into_values().collect(),
            incomplete: trace.damage().is_some(),
        })
    }
}

/// The result of checking every byte of a trace.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    /// File size.
    pub file_bytes: u64,
    /// Bytes up to the end of the last complete frame.
    pub good_bytes: u64,
    /// Whether a header was read.
    pub has_header: bool,
    /// Whether a valid trailer was read.
    pub has_trailer: bool,
    /// Chunks that decode completely.
    pub complete_chunks: u64,
    /// Events in those chunks (what a reader with `allow_incomplete` recovers).
    pub recoverable_events: u64,
    /// Threads with at least one complete chunk.
    pub threads: u64,
    /// The first structural problem, if any.
    pub damage: Option<String>,
    /// Its class.
    pub damage_kind: Option<crate::error::ErrorKind>,
    /// A problem with the sync events (deadlock, bad lock use), checked when the structure is
    /// sound.
    pub sync_problem: Option<String>,
}

impl VerifyReport {
    /// Whether the trace is complete and sound.
    pub fn ok(&self) -> bool {
        self.damage.is_none() && self.sync_problem.is_none()
    }

    /// The first problem as an error.
    pub fn problem(&self) -> Option<String> {
        self.damage.clone().or_else(|| self.sync_problem.clone())
    }
}

/// Decodes every chunk of the file at `path`, checks every frame, count and checksum, then
/// replays the sync events. Only failing to open the file is an `Err`; damage is reported.
pub fn verify_file(path: &Path) -> Result<VerifyReport> {
    let file = crate::reader::open_regular(path)?;
    let file_bytes = file
        .metadata()
        .map_err(|e| TraceError::io(&e).at_path(path))?
        .len();
    let s = scan(BufReader::with_capacity(1 << 20, file), true, |_, _| {});
    let mut report = VerifyReport {
        file_bytes,
        good_bytes: s.good_bytes,
        has_header: s.header.is_some(),
        has_trailer: s.trailer.is_some(),
        complete_chunks: s.chunks.len() as u64,
        recoverable_events: s.threads.values().map(|t| t.events).sum(),
        threads: s.threads.len() as u64,
        damage_kind: s.damage.as_ref().map(|d| d.kind),
        damage: s.damage.map(|d| d.at_path(path).to_string()),
        sync_problem: None,
    };
    if report.damage.is_none() {
        let trace = TraceFile::open_with(path, OpenOptions::default())?;
        if let Some(Err(e)) = trace.merged()?.find(|e| e.is_err()) {
            report.sync_problem = Some(e.at_path(path).to_string());
        }
    }
    Ok(report)
}
