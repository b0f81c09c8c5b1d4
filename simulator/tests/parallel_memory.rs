//! The parallel engine where time does not move: a quantum is a span of time, so one quantum
//! can hold a whole trace (an import whose clock advances only with instruction records)
//! or touch any number of lines (one access of many megabytes). The engine reads such a
//! quantum in pieces of the global order and runs a quantum whose lines overflow its
//! footprints in lockstep; both keep its memory bounded and its results the exact engine's.

use cachescope_schema::{AccessKind, Event, TimeUnit, TraceFile, TraceHeader, TraceWriter};
use cachescope_sim::{simulate_exact, simulate_parallel, ParallelConfig, ThreadMapping};
#[allow(dead_code)] // shared with other test files
mod common;

/// A trace in instructions whose events never advance time: all at time 0.
fn timeless(streams: &[Vec<Event>]) -> (tempfile::TempDir, TraceFile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timeless.cstrace");
    let w = TraceWriter::create(
        &path,
        &TraceHeader::new("test", "timeless", TimeUnit::Instructions),
    )
    .unwrap();
    for (t, events) in streams.iter().enumerate() {
        let mut tw = w.thread(t as u32).unwrap();
        tw.extend(events.iter().copied()).unwrap();
        tw.finish().unwrap();
    }
    w.finish().unwrap();
    let f = TraceFile::open(&path).unwrap();
    (dir, f)
}

fn access(kind: AccessKind, addr: u64, size: u32) -> Event {
    Event::Access(common::acc(kind, addr, size))
}

/// 2 × 160,000 accesses at time 0, more than the engine reads at once (2^18 events): the
/// quantum is read in pieces, and the report equals the exact engine's, on 1 and 2 host
/// threads alike. The threads share some lines, so pieces run apart and in lockstep.
#[test]
fn a_quantum_of_more_events_than_a_read_holds_is_read_in_pieces() {
    let streams: Vec<Vec<Event>> = (0..2u64)
        .map(|t| {
            (0..160_000u64)
                .map(|i| {
                    // Mostly the thread's own 256 KiB; every 1000th access a shared line.
                    let addr = if i % 1000 == 999 {
                        0x100_0000 + (i / 1000 % 8) * 64 + t * 8
                    } else {
                        0x200_0000 * (t + 1) + (i * 72) % (256 << 10)
                    };
                    let kind = if i % 3 == 0 {
                        AccessKind::Store
                    } else {
                        AccessKind::Load
                    };
                    access(kind, addr, 8)
                })
                .collect()
        })
        .collect();
    let (_d, t) = timeless(&streams);
    let m = common::model(common::RANDOM_HIERARCHIES[0], 2, "mesi");
    let exact = simulate_exact(&t, &m, &ThreadMapping::OneToOne).unwrap();
    let mut reports = Vec::new();
    for threads in [1, 2] {
        let cfg = ParallelConfig { slack: 10, threads };
        let p = simulate_parallel(&t, &m, &ThreadMapping::OneToOne, cfg).unwrap();
        assert_eq!(
            common::counters_json(&exact),
            common::counters_json(&p),
            "--threads {threads}"
        );
        let q = p.quanta.expect("the parallel engine counts its quanta");
        assert!(q.total >= 2, "one time unit, read in pieces: {q:?}");
        assert!(q.lockstep < q.total, "some pieces run apart: {q:?}");
        reports.push(serde_json::to_string(&p).unwrap());
    }
    assert_eq!(reports[0], reports[1], "host threads change nothing");
}

/// A quantum in which each core touches more lines than its footprint may hold (on 64
/// cores, 2^14 lines each: 1 MiB), or visits 4 times as many (the bound phase's requests
/// grow with the visits), runs in lockstep instead of growing the footprints and the
/// requests, with the exact engine's results. The two threads touch disjoint lines, so
/// without the caps the quantum would run apart.
#[test]
fn a_quantum_whose_lines_overflow_the_footprints_runs_in_lockstep() {
    let streams: Vec<Vec<Event>> = (0..2u64)
        .map(|t| {
            let base = 0x1000_0000 * (t + 1);
            vec![
                access(AccessKind::Load, base, 1 << 20),
                access(AccessKind::Store, base + (1 << 20), 64 << 10),
                access(AccessKind::Load, base + 64, 8),
            ]
        })
        .collect();
    let (_d, t) = timeless(&streams);
    let m = common::model(common::RANDOM_HIERARCHIES[0], 64, "msi");
    let exact = simulate_exact(&t, &m, &ThreadMapping::OneToOne).unwrap();
    let cfg = ParallelConfig {
        slack: 1,
        threads: 2,
    };
    let p = simulate_parallel(&t, &m, &ThreadMapping::OneToOne, cfg).unwrap();
    assert_eq!(common::counters_json(&exact), common::counters_json(&p));
    let q = p.quanta.expect("the parallel engine counts its quanta");
    assert_eq!((q.total, q.lockstep), (1, 1), "{q:?}");

    // 9 accesses of the same 512 KiB (8,192 lines, 73,728 visits).
    let again: Vec<Vec<Event>> = (0..2u64)
        .map(|t| {
            let base = 0x1000_0000 * (t + 1);
            (0..9)
                .map(|_| access(AccessKind::Load, base, 512 << 10))
                .collect()
        })
        .collect();
    let (_d, t) = timeless(&again);
    let exact = simulate_exact(&t, &m, &ThreadMapping::OneToOne).unwrap();
    let p = simulate_parallel(&t, &m, &ThreadMapping::OneToOne, cfg).unwrap();
    assert_eq!(common::counters_json(&exact), common::counters_json(&p));
    let q = p.quanta.expect("the parallel engine counts its quanta");
    assert_eq!((q.total, q.lockstep), (1, 1), "{q:?}");

    // Accesses small enough for the footprints: the quantum runs apart.
    let small: Vec<Vec<Event>> = (0..2u64)
        .map(|t| {
            let base = 0x1000_0000 * (t + 1);
            vec![
                access(AccessKind::Load, base, 512 << 10),
                access(AccessKind::Load, base, 512 << 10),
                access(AccessKind::Load, base + 64, 8),
            ]
        })
        .collect();
    let (_d, t) = timeless(&small);
    let p = simulate_parallel(&t, &m, &ThreadMapping::OneToOne, cfg).unwrap();
    let q = p.quanta.expect("the parallel engine counts its quanta");
    assert_eq!((q.total, q.lockstep), (1, 0), "{q:?}");
}
