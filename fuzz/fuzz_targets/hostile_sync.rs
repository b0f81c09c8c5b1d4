//! Well-framed traces with arbitrary synchronization: barriers with any participant count,
//! lock acquisitions in any order, threads created, started, joined and exited in any order,
//! regions, allocations and accesses, on up to 4 threads. Whatever the events say, opening
//! the trace, merging it into the global order (strict and `allow_incomplete`) and simulating
//! it with both engines and the bandwidth timeline, and auditing it for false sharing (with
//! SARIF output), must end in a result or an error — never a panic or a hang — and the two
//! engines must agree on which, and on the counters. Read in whole quanta split into pieces
//! of a few events (`next_quanta`), each piece sorted by the parallel engine's key must be
//! the next stretch of the global order, with the same error at the same place.
#![no_main]

use cachescope_analysis::audit::{audit, AuditConfig, AuditMachine};
use cachescope_analysis::sarif::to_sarif;
use cachescope_schema::event::{ORDER_OBJECT, ORDER_SINK_MARK};
use cachescope_schema::{
    Access, AccessKind, CodePos, Event, OpenOptions, QuantaSizes, TimeUnit, TimedEvent, TraceFile,
    TraceHeader, TraceWriter,
};
use cachescope_sim::bandwidth::BandwidthConfig;
use cachescope_sim::{
    simulate_exact_with_bandwidth, simulate_parallel_with_bandwidth, MachineModel, ParallelConfig,
    ThreadMapping,
};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::counters;

/// A lock object from an operand: one of four, plain or an order object (with or without the
/// sink mark).
fn lock_id(x: u8) -> u64 {
    let mut lock = u64::from(x & 3);
    if x & 0x40 != 0 {
        lock |= ORDER_OBJECT;
    }
    if x & 0x80 != 0 {
        lock |= ORDER_SINK_MARK;
    }
    lock
}

/// One event from two bytes: the kind, and an operand.
fn event(kind: u8, x: u8) -> Event {
    let small = u64::from(x & 3);
    match kind % 17 {
        0..=3 => Event::Access(Access {
            kind: [
                AccessKind::Load,
                AccessKind::Store,
                AccessKind::Modify,
                AccessKind::AtomicRmw,
            ][usize::from(kind % 4)],
            size: [1, 8, 64, 200][usize::from(x >> 6)],
            addr: 0x10000 + u64::from(x) * 8,
            pc: None,
        }),
        4 => Event::Advance {
            units: u64::from(x),
            flops: u64::from(x >> 4),
        },
        5 => Event::BarrierEnter {
            barrier: small,
            participants: u32::from(x >> 2) % 6,
        },
        6 => Event::BarrierLeave { barrier: small },
        // Plain locks and order objects (sources, sinks and their marks in any pattern),
        // with orders up to the top of the range.
        7 => Event::LockAcquire {
            lock: lock_id(x),
            order: match (x >> 2) % 8 {
                6 => u64::MAX,
                7 => u64::MAX - 1,
                o => u64::from(o),
            },
        },
        8 => Event::LockRelease { lock: lock_id(x) },
        9 => Event::ThreadCreate {
            child: u32::from(x) % 5,
        },
        10 => Event::ThreadStart,
        11 => Event::ThreadJoin {
            child: u32::from(x) % 5,
        },
        12 => Event::RegionBegin {
            region: small,
            team: u32::from(x >> 2) % 6,
        },
        13 => Event::RegionEnd { region: small },
        // Heap blocks over the accessed range: overlapping, freed twice, freed unallocated.
        14 => Event::Alloc {
            addr: 0x10000 + u64::from(x & 0x1f) * 64,
            size: u64::from(x >> 5) * 40,
            site: CodePos::new(u64::from(x & 3)),
            align: None,
        },
        // Callers with or without an allocation before them, any number of them.
        15 if x & 1 == 0 => Event::AllocCaller {
            site: CodePos::new(0x1000 + u64::from(x)).expect("not 0"),
        },
        // Stack frames over the accessed range, also empty and inverted ones.
        15 => Event::StackFrame {
            site: CodePos::new(0x2000 + u64::from(x)).expect("not 0"),
            sp: 0x10000 + u64::from(x & 0x1f) * 64,
            cfa: 0x10000 + u64::from(x >> 3) * 96,
        },
        _ => Event::Free {
            addr: 0x10000 + u64::from(x & 0x1f) * 64,
        },
    }
}

/// Writes the trace the input describes: three bytes an event (thread, kind, operand), each
/// thread ending with `ThreadExit` when the first byte's bit says so.
fn write(data: &[u8], path: &std::path::Path) -> bool {
    let Some((&head, rest)) = data.split_first() else {
        return false;
    };
    let mut per_thread: Vec<Vec<Event>> = vec![Vec::new(); 4];
    for b in rest.chunks_exact(3).take(3000) {
        per_thread[usize::from(b[0] & 3)].push(event(b[1], b[2]));
    }
    let header = TraceHeader::new("fuzz", "fuzz", TimeUnit::Instructions);
    let Ok(w) = TraceWriter::create(path, &header) else {
        return false;
    };
    for (t, events) in per_thread.iter().enumerate() {
        if events.is_empty() {
            continue;
        }
        let Ok(mut tw) = w.thread(t as u32) else {
            return false;
        };
        if tw.extend(events.iter().copied()).is_err() {
            return false;
        }
        if head & (1 << t) != 0 && tw.push(Event::ThreadExit).is_err() {
            return false;
        }
        if tw.finish().is_err() {
            return false;
        }
    }
    w.finish().is_ok()
}

/// The events of `trace` one by one, and the error that ended the merge.
fn one_by_one(trace: &TraceFile) -> (Vec<TimedEvent>, Option<String>) {
    let mut all = Vec::new();
    let Ok(merged) = trace.merged() else {
        return (all, Some("open".into()));
    };
    for e in merged {
        match e {
            Ok(e) => all.push(e),
            Err(e) => return (all, Some(e.to_string())),
        }
    }
    (all, None)
}

/// The events of `trace` from `next_quanta` with quanta of `slack` and calls of `sizes`, each
/// call's sorted by (time, tie or else thread, index), and the error that ended the merge.
fn in_pieces(
    trace: &TraceFile,
    slack: u64,
    sizes: QuantaSizes,
) -> (Vec<TimedEvent>, Option<String>) {
    let mut all = Vec::new();
    let Ok(mut merged) = trace.merged() else {
        return (all, Some("open".into()));
    };
    let n = merged.thread_ids().len();
    loop {
        let mut out = vec![Vec::new(); n];
        let mut ties = vec![Vec::new(); n];
        let r = merged.next_quanta(slack, sizes, &mut out, &mut ties);
        let mut keyed: Vec<((u64, u32, usize), TimedEvent)> = out
            .iter()
            .zip(&ties)
            .flat_map(|(events, ties)| {
                events.iter().zip(ties).enumerate().map(|(k, (e, &tie))| {
                    let key = if tie != 0 {
                        (e.time, tie, 0)
                    } else {
                        (e.time, e.thread, k)
                    };
                    (key, *e)
                })
            })
            .collect();
        keyed.sort_by_key(|(k, _)| *k);
        match r {
            Ok(true) => all.extend(keyed.into_iter().map(|(_, e)| e)),
            Ok(false) => {
                all.extend(keyed.into_iter().map(|(_, e)| e));
                return (all, None);
            }
            // The events of the failing call are not in the global order's prefix for sure.
            Err(e) => return (all, Some(e.to_string())),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.cstrace");
    if !write(data, &path) {
        return;
    }
    let model = MachineModel::load("ivybridge-4c").expect("preset");
    let bw = BandwidthConfig {
        window: 64,
        sample_period: 3,
    };
    for allow_incomplete in [false, true] {
        let Ok(trace) = TraceFile::open_with(&path, OpenOptions { allow_incomplete }) else {
            continue;
        };
        let single = one_by_one(&trace);
        let head = data.first().copied().unwrap_or(0);
        let sizes = QuantaSizes {
            at_least: usize::from(head >> 6),
            split_above: usize::from(head >> 4 & 3),
            fail_above: usize::MAX,
        };
        let slack = [1, 3, 64, u64::MAX][usize::from(head >> 2 & 3)];
        let pieces = in_pieces(&trace, slack, sizes);
        assert_eq!(pieces.1, single.1, "errors differ");
        if single.1.is_none() {
            assert!(pieces.0 == single.0, "pieces are not the global order");
        } else {
            assert!(
                single.0.starts_with(&pieces.0),
                "pieces before the error are not a prefix of the global order"
            );
        }
        let exact = simulate_exact_with_bandwidth(&trace, &model, &ThreadMapping::OneToOne, bw);
        let parallel = simulate_parallel_with_bandwidth(
            &trace,
            &model,
            &ThreadMapping::OneToOne,
            ParallelConfig {
                slack: 7,
                threads: 2,
            },
            bw,
        );
        let machine = AuditMachine {
            line_size: 64,
            penalty_cycles: 100.0,
            ipc: 1.0,
        };
        if let Ok(report) = audit(&trace, machine, Some(&model), &AuditConfig::default()) {
            let _ = report.fails();
            let _ = to_sarif(&report, dir.path(), "fuzz");
        }
        match (exact, parallel) {
            (Ok((a, ab)), Ok((b, bb))) => {
                assert!(counters(&a) == counters(&b), "counters differ");
                assert_eq!(
                    serde_json::to_string(&ab).expect("json"),
                    serde_json::to_string(&bb).expect("json"),
                    "bandwidth timelines differ"
                );
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!(
                "one engine failed: exact {:?}, parallel {:?}",
                a.err(),
                b.err()
            ),
        }
    }
});
