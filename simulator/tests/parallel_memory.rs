//! The parallel engine where time does not move: a quantum is a span of time, so one quantum
//! can hold a whole trace (an import whose clock advances only with instruction records)
//! or touch any number of lines (one access of many megabytes). The engine reads such a
//! quantum in pieces of the global order and runs a quantum whose lines overflow its
//! footprints in lockstep; both keep its memory bounded and its results the exact engine's.

use cachescope_schema::{AccessKind, Event, TimeUnit, TraceFile};
use cachescope_sim::{
    simulate_exact, simulate_parallel, MachineModel, ParallelConfig, ThreadMapping,
};
#[allow(dead_code)] // shared with other test files
mod common;

/// A trace in instructions whose events never advance time: all at time 0.
fn timeless(streams: &[Vec<Event>]) -> (tempfile::TempDir, TraceFile) {
    common::trace_file(TimeUnit::Instructions, streams)
}

/// The parallel engine's (quanta, lockstep quanta) on `streams` at time 0 on `m`, slack 1 and
/// 2 host threads, after checking its counters against the exact engine's.
fn quanta_of(streams: &[Vec<Event>], m: &MachineModel) -> (u64, u64) {
    let (_d, t) = timeless(streams);
    let exact = simulate_exact(&t, m, &ThreadMapping::OneToOne).unwrap();
    let cfg = ParallelConfig {
        slack: 1,
        threads: 2,
    };
    let p = simulate_parallel(&t, m, &ThreadMapping::OneToOne, cfg).unwrap();
    assert_eq!(common::counters_json(&exact), common::counters_json(&p));
    let q = p.quanta.expect("the parallel engine counts its quanta");
    (q.total, q.lockstep)
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
    let m = common::model(common::RANDOM_HIERARCHIES[0], 64, "msi");
    // Each thread's accesses in its own 256 MiB.
    let per_thread = |accesses: &dyn Fn(u64) -> Vec<Event>| -> Vec<Vec<Event>> {
        (0..2u64).map(|t| accesses(0x1000_0000 * (t + 1))).collect()
    };
    let wide = per_thread(&|base| {
        vec![
            access(AccessKind::Load, base, 1 << 20),
            access(AccessKind::Store, base + (1 << 20), 64 << 10),
            access(AccessKind::Load, base + 64, 8),
        ]
    });
    assert_eq!(quanta_of(&wide, &m), (1, 1));
    // 9 accesses of the same 512 KiB (8,192 lines, 73,728 visits).
    let again = per_thread(&|base| {
        (0..9)
            .map(|_| access(AccessKind::Load, base, 512 << 10))
            .collect()
    });
    assert_eq!(quanta_of(&again, &m), (1, 1));
    // Accesses small enough for the footprints: the quantum runs apart.
    let small = per_thread(&|base| {
        vec![
            access(AccessKind::Load, base, 512 << 10),
            access(AccessKind::Load, base, 512 << 10),
            access(AccessKind::Load, base + 64, 8),
        ]
    });
    assert_eq!(quanta_of(&small, &m), (1, 0));
}
