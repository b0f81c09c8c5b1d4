//! The parallel engine fed from trace files whose threads synchronize (barriers, locks) at
//! the same time units: sync events wake threads at the very time of the waking event, so
//! the global order at such a time is not by thread id, and the engine must follow it.

use cachescope_schema::{AccessKind, Event, QuantaSizes, TimeUnit, TimedEvent, TraceFile};
use cachescope_sim::counters::SimReport;
use cachescope_sim::parallel::ThreadStream;
use cachescope_sim::{
    simulate_exact, simulate_parallel, MachineModel, ParallelConfig, ParallelEngine, ThreadMapping,
};
use proptest::prelude::*;
#[allow(dead_code)] // shared with other test files
mod common;

/// One thread's action in a segment between barriers.
#[derive(Debug, Clone)]
enum Op {
    /// A load or store of 8 bytes at `0x10000 + 8·slot`.
    Access(bool, u64),
    /// Time advances by this many instructions (0 keeps events at the same time).
    Advance(u64),
    /// The thread takes the lock (its next acquisition in the global order), does its
    /// accesses, and releases it.
    Locked(Vec<(bool, u64)>),
}

/// Writes a trace of `threads` (each a list of segments; all threads pass the same number
/// of barriers, one between consecutive segments) in which lock acquisitions are numbered
/// segment by segment in the order `lock_order` gives (thread of each acquisition).
fn write_trace(
    segments: &[Vec<Vec<Op>>],
    lock_order: &[Vec<usize>],
) -> (tempfile::TempDir, TraceFile) {
    const LOCK: u64 = 0x5000;
    let n = segments.len();
    let mut streams: Vec<Vec<Event>> = vec![Vec::new(); n];
    let mut next_order = 0u64;
    let nseg = segments[0].len();
    for s in 0..nseg {
        // This segment's acquisition numbers, per thread, in the segment's global order.
        let mut orders: Vec<Vec<u64>> = vec![Vec::new(); n];
        for &t in &lock_order[s] {
            orders[t].push(next_order);
            next_order += 1;
        }
        for t in 0..n {
            let mut mine = orders[t].iter();
            for op in &segments[t][s] {
                match op {
                    Op::Access(store, slot) => streams[t].push(access(*store, *slot)),
                    Op::Advance(units) => streams[t].push(Event::Advance {
                        units: *units,
                        flops: 0,
                    }),
                    Op::Locked(inside) => {
                        let Some(&order) = mine.next() else { continue };
                        streams[t].push(Event::LockAcquire { lock: LOCK, order });
                        for &(store, slot) in inside {
                            streams[t].push(access(store, slot));
                        }
                        streams[t].push(Event::LockRelease { lock: LOCK });
                    }
                }
            }
            // Acquisitions the segment's ops did not place still happen, at its end.
            for &order in mine {
                streams[t].push(Event::LockAcquire { lock: LOCK, order });
                streams[t].push(Event::LockRelease { lock: LOCK });
            }
            if s + 1 < nseg {
                streams[t].push(Event::BarrierEnter {
                    barrier: 0xb0 + s as u64,
                    participants: n as u32,
                });
                streams[t].push(Event::BarrierLeave {
                    barrier: 0xb0 + s as u64,
                });
            }
        }
    }
    common::trace_file(TimeUnit::Instructions, &streams)
}

fn access(store: bool, slot: u64) -> Event {
    let kind = if store {
        AccessKind::Store
    } else {
        AccessKind::Load
    };
    Event::Access(common::acc(kind, 0x10000 + 8 * slot, 8))
}

/// The parallel engine fed by `next_quanta` in pieces of a few events: quanta split between
/// calls wherever the events handed out are a prefix of the global order (as the engine reads
/// a quantum too large to hold; `simulate_parallel` only splits beyond 2^18 events).
fn parallel_in_pieces(t: &TraceFile, m: &MachineModel, cfg: ParallelConfig) -> SimReport {
    let threads: Vec<_> = t.thread_ids().collect();
    let placement = ThreadMapping::RoundRobin.place(&threads, m.cores).unwrap();
    let mut engine = ParallelEngine::new(m, &placement, t.header().time_unit, cfg).unwrap();
    let mut merged = t.merged().unwrap();
    let ids = merged.thread_ids();
    let sizes = QuantaSizes {
        at_least: 1,
        split_above: 2,
        fail_above: usize::MAX,
    };
    loop {
        let mut out: Vec<Vec<TimedEvent>> = vec![Vec::new(); ids.len()];
        let mut ties: Vec<Vec<u32>> = vec![Vec::new(); ids.len()];
        let more = merged
            .next_quanta(cfg.slack, sizes, &mut out, &mut ties)
            .unwrap();
        engine.run_threads(&ThreadStream::of_quanta(&ids, &out, &ties));
        if !more {
            return engine.report();
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    let acc = (any::<bool>(), 0u64..48);
    prop_oneof![
        4 => acc.clone().prop_map(|(s, a)| Op::Access(s, a)),
        2 => (0u64..3).prop_map(Op::Advance),
        1 => prop::collection::vec(acc, 0..3).prop_map(Op::Locked),
    ]
}

/// The tie the reviewer found: thread 1 takes the lock, stores and releases it, all at time
/// 0; thread 0 waits for the lock at time 0 and loads the same line. In the global order the
/// store comes first (thread 0 is woken by the release), although thread 0's id is smaller.
#[test]
fn a_lock_handed_over_at_the_same_time_keeps_the_global_order() {
    let segments = vec![
        vec![vec![Op::Locked(vec![(false, 0)])]],
        vec![vec![Op::Locked(vec![(true, 0)])]],
    ];
    let (_d, t) = write_trace(&segments, &[vec![1, 0]]);
    let m = common::model(common::RANDOM_HIERARCHIES[0], 2, "msi");
    let exact = simulate_exact(&t, &m, &ThreadMapping::OneToOne).unwrap();
    for slack in [1, 10, u64::MAX] {
        for threads in [1, 2] {
            let cfg = ParallelConfig { slack, threads };
            let p = simulate_parallel(&t, &m, &ThreadMapping::OneToOne, cfg).unwrap();
            assert_eq!(
                common::counters_json(&exact),
                common::counters_json(&p),
                "slack {slack}, {threads} host threads"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random traces of 2–4 threads on 2–3 cores (several threads per core included) with
    /// barriers, a lock handed between threads, and accesses mostly at the same time units:
    /// the parallel engine's report, read from the file, is the exact engine's, also when its
    /// quanta are read in pieces of a few events.
    #[test]
    fn sync_at_the_same_time_equals_exact(
        threads in 2usize..5,
        cores in 2u32..4,
        h in 0..common::RANDOM_HIERARCHIES.len(),
        mesi in any::<bool>(),
        slack in prop::sample::select(vec![1u64, 2, 7, 1000, u64::MAX]),
        host in 1usize..4,
        seed_segments in prop::collection::vec(prop::collection::vec(prop::collection::vec(op(), 0..8), 4), 1..4),
        picks in prop::collection::vec(0usize..4, 0..12),
    ) {
        // Segment s of thread t: seed_segments[s][t].
        let nseg = seed_segments.len();
        let segments: Vec<Vec<Vec<Op>>> = (0..threads)
            .map(|t| (0..nseg).map(|s| seed_segments[s][t].clone()).collect())
            .collect();
        // Each segment's acquisitions: the threads picked, in order.
        let lock_order: Vec<Vec<usize>> = (0..nseg)
            .map(|s| picks.iter().skip(s).step_by(nseg).map(|&p| p % threads).collect())
            .collect();
        let (_d, t) = write_trace(&segments, &lock_order);
        let m = common::model(common::RANDOM_HIERARCHIES[h], cores, if mesi { "mesi" } else { "msi" });
        let exact = simulate_exact(&t, &m, &ThreadMapping::RoundRobin).unwrap();
        let cfg = ParallelConfig { slack, threads: host };
        let p = simulate_parallel(&t, &m, &ThreadMapping::RoundRobin, cfg).unwrap();
        prop_assert_eq!(common::counters_json(&exact), common::counters_json(&p));
        let pieces = parallel_in_pieces(&t, &m, cfg);
        prop_assert_eq!(common::counters_json(&exact), common::counters_json(&pieces));
    }
}
