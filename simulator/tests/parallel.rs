//! The parallel engine: determinism across host thread counts, and equality with the exact
//! engine at every slack (quanta whose cores interact run in lockstep), on generated,
//! recorded and random traces.

use std::collections::BTreeMap;

use cachescope_schema::synth::{generate, GenParams, Workload};
use cachescope_schema::{AccessKind, Event, TimeUnit, TimedEvent, TraceFile};
use cachescope_sim::counters::SimReport;
use proptest::prelude::*;
#[allow(dead_code)] // shared with other test files
mod common;

use cachescope_sim::parallel::DEFAULT_SLACK;
use cachescope_sim::{
    simulate_exact, simulate_parallel, ExactEngine, MachineModel, ParallelConfig, ParallelEngine,
    ParallelError, ThreadMapping,
};

fn trace(p: &GenParams) -> (tempfile::TempDir, TraceFile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.cstrace");
    std::fs::write(&path, generate(p, Vec::new(), 4096).unwrap()).unwrap();
    let t = TraceFile::open(&path).unwrap();
    (dir, t)
}

fn params(w: Workload, threads: u32, size: u64, iterations: u32) -> GenParams {
    let mut p = GenParams::new(w);
    p.threads = threads;
    p.size = size;
    p.iterations = iterations;
    p
}

fn parallel(t: &TraceFile, m: &MachineModel, slack: u64, threads: usize) -> SimReport {
    simulate_parallel(
        t,
        m,
        &ThreadMapping::OneToOne,
        ParallelConfig { slack, threads },
    )
    .unwrap()
}

/// The paths at which two JSON values differ (for readable failures).
fn json_diff(a: &serde_json::Value, b: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                json_diff(
                    v,
                    y.get(k).unwrap_or(&Value::Null),
                    &format!("{at}.{k}"),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                json_diff(u, v, &format!("{at}[{i}]"), out);
            }
        }
        _ if a != b => out.push(format!("{at}: {a} vs {b}")),
        _ => {}
    }
}

fn exact(t: &TraceFile, m: &MachineModel) -> SimReport {
    simulate_exact(t, m, &ThreadMapping::OneToOne).unwrap()
}

fn json(r: &SimReport) -> String {
    serde_json::to_string(r).unwrap()
}

#[test]
fn results_do_not_depend_on_host_threads() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    for w in [
        Workload::Stencil,
        Workload::FalseSharing,
        Workload::ProducerConsumer,
        Workload::Random,
    ] {
        let (_d, t) = trace(&params(w, 4, 16 << 10, 2));
        for slack in [1, 97, 5000] {
            let one = json(&parallel(&t, &m, slack, 1));
            for threads in [2, 3, 8] {
                assert_eq!(
                    one,
                    json(&parallel(&t, &m, slack, threads)),
                    "{w:?} slack {slack}: --threads {threads} differs from --threads 1"
                );
            }
            assert_eq!(one, json(&parallel(&t, &m, slack, 2)), "{w:?}: run to run");
        }
    }
}

#[test]
fn mesi_and_three_levels_are_deterministic_too() {
    let m = common::model(
        r#"
[[levels]]
name = "L1"
size = "4K"
assoc = 4
[[levels]]
name = "L2"
size = "16K"
assoc = 4
inclusion = "inclusive"
[[levels]]
name = "L3"
size = "64K"
assoc = 8
shared = true
inclusion = "inclusive"
"#,
        4,
        "mesi",
    );
    let (_d, t) = trace(&params(Workload::ProducerConsumer, 4, 32 << 10, 3));
    let one = json(&parallel(&t, &m, 50, 1));
    assert_eq!(one, json(&parallel(&t, &m, 50, 3)));
    // Every access is counted once at L1, whatever the engine.
    let (e, p) = (exact(&t, &m), parallel(&t, &m, 50, 2));
    let l1 = |r: &SimReport| {
        let c = &r.levels[0].counters;
        (c.accesses.total(), c.hits + c.misses.total())
    };
    assert_eq!(l1(&e), l1(&p));
    assert_eq!(l1(&p).0, l1(&p).1, "hits + misses = accesses");
}

/// Synthetic traces (time unit: events) in which no two cores touch the same line in the same
/// time unit: each thread does one access per unit, and the stencil, stream and padded
/// false-sharing workloads share lines only across barriers.
#[test]
fn smallest_slack_equals_exact_without_same_time_sharing() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let mut padded = params(Workload::FalseSharing, 4, 64 << 10, 4);
    padded.padded = true;
    for p in [
        params(Workload::Stencil, 4, 256 << 10, 2),
        params(Workload::Stream, 4, 256 << 10, 2),
        params(Workload::Stencil, 3, 64 << 10, 3),
        padded,
    ] {
        let (_d, t) = trace(&p);
        let e = exact(&t, &m);
        let par = parallel(&t, &m, 1, 2);
        assert_eq!(
            common::counters_json(&e),
            common::counters_json(&par),
            "{:?} {} threads: slack 1 differs from the exact engine",
            p.workload,
            p.threads
        );
        assert_eq!(par.engine, "parallel");
        assert_eq!(par.slack, Some(1));
    }
}

/// The same on a trace that does share lines between cores (coherence misses happen) but
/// never within one time unit.
#[test]
fn smallest_slack_equals_exact_with_coherence_misses() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let (_d, t) = trace(&params(Workload::ProducerConsumer, 4, 64 << 10, 4));
    let e = exact(&t, &m);
    let coh = e.levels[0].counters.misses.coherence_true;
    assert!(coh > 100, "the trace must have coherence misses ({coh})");
    assert_eq!(
        common::counters_json(&e),
        common::counters_json(&parallel(&t, &m, 1, 2))
    );
}

#[test]
fn any_slack_equals_exact_on_same_time_sharing() {
    // Threads that fight over lines within one time unit, and one quantum for the whole run:
    // the interfering quanta run in lockstep, so nothing is lost.
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let (_d, t) = trace(&params(Workload::FalseSharing, 2, 16 << 10, 4));
    let e = exact(&t, &m);
    assert!(e.levels[0].counters.misses.coherence_false > 500);
    for slack in [1, 7, DEFAULT_SLACK, u64::MAX] {
        let p = parallel(&t, &m, slack, 2);
        assert_eq!(
            common::counters_json(&e),
            common::counters_json(&p),
            "slack {slack}"
        );
        let q = p.quanta.unwrap();
        assert!(
            q.lockstep > 0 && q.lockstep <= q.total,
            "slack {slack}: {q:?}"
        );
    }
}

/// 8-byte accesses (time, thread, kind, address), in that order.
fn accesses_of_8_bytes(list: &[(u64, u32, AccessKind, u64)]) -> Vec<TimedEvent> {
    list.iter()
        .map(|&(time, thread, kind, addr)| TimedEvent {
            time,
            thread,
            event: Event::Access(common::acc(kind, addr, 8)),
        })
        .collect()
}

/// The exact engine's report on `events` (time unit: events).
fn exact_events(
    m: &MachineModel,
    placement: &BTreeMap<u32, u32>,
    events: &[TimedEvent],
) -> SimReport {
    let mut e = ExactEngine::new(m, placement, TimeUnit::Events);
    for ev in events {
        e.process(ev);
    }
    e.report()
}

#[test]
fn an_exclusive_grant_does_not_outlive_the_copy_it_was_for() {
    // MESI, direct-mapped L1 of two sets: core 0 reads L alone (E), loses it to X (same set),
    // core 1 reads L, core 0 reads L again (now S) — all in one quantum, which runs apart (no
    // writes). In the next quantum core 0 writes L: an upgrade that invalidates core 1's copy.
    // Found by the `engines_agree` fuzz target: the weave applied the E of the first miss to
    // the copy of the second, and the write was silent.
    let levels = "[[levels]]\nname = \"L1\"\nsize = 128\nassoc = 1\n\
                  [[levels]]\nname = \"L2\"\nsize = 1024\nassoc = 4\nshared = true\n";
    let m = common::model(levels, 2, "mesi");
    let (l, x) = (0x10000, 0x10080);
    let events = accesses_of_8_bytes(&[
        (1, 0, AccessKind::Load, l),
        (2, 0, AccessKind::Load, x),
        (3, 1, AccessKind::Load, l),
        (4, 0, AccessKind::Load, l),
        (5, 0, AccessKind::Store, l),
    ]);
    let placement: BTreeMap<u32, u32> = [(0, 0), (1, 1)].into();
    let e = exact_events(&m, &placement, &events);
    assert_eq!(
        (e.cores[0].upgrades, e.cores[1].invalidations_received),
        (1, 1)
    );
    for host in [1, 2] {
        let cfg = ParallelConfig {
            slack: 5,
            threads: host,
        };
        let mut p = ParallelEngine::new(&m, &placement, TimeUnit::Events, cfg).unwrap();
        p.run_slice(&events);
        let p = p.report();
        // The first quantum runs apart; the second, a write to a line core 1 holds, in
        // lockstep — where core 0's own copy says whether it needs the upgrade.
        let q = p.quanta.unwrap();
        assert_eq!((q.total, q.lockstep), (2, 1));
        assert_eq!(
            common::counters_json(&e),
            common::counters_json(&p),
            "{host} host threads"
        );
    }
}

#[test]
fn an_owner_whose_dirty_data_left_its_outer_level_supplies_nothing() {
    // Private L1 (direct-mapped, 4 sets) over a private non-inclusive FIFO L2 (2 sets of 2).
    // Core 1 writes A; B evicts A's dirty L1 copy into L2; A comes back into L1 from L2
    // (owned, clean there); C makes L2 evict A first (FIFO: A was filled first), so the
    // dirty data goes to memory while core 1 keeps its clean L1 copy. Core 0's read of A then
    // comes from memory: no cache-to-cache transfer, one L2 writeback. Found by a differential
    // campaign: the weave took the owner for dirty because it had gained ownership by writing.
    let levels = "[[levels]]\nname = \"L1\"\nsize = 256\nassoc = 1\n\
                  [[levels]]\nname = \"L2\"\nsize = 256\nassoc = 2\nreplacement = \"fifo\"\n";
    let m = common::model(levels, 2, "msi");
    let line = |k: u64| 0x10000 + 64 * k;
    let (a, b, c) = (line(0), line(4), line(2));
    let events = accesses_of_8_bytes(&[
        (1, 1, AccessKind::Store, a),
        (2, 1, AccessKind::Load, b),
        (3, 1, AccessKind::Load, a),
        (4, 1, AccessKind::Load, c),
        (5, 0, AccessKind::Load, a),
    ]);
    let placement: BTreeMap<u32, u32> = [(0, 0), (1, 1)].into();
    let e = exact_events(&m, &placement, &events);
    assert_eq!(
        (e.cores[0].cache_to_cache, e.cores[1].levels[1].writebacks),
        (0, 1)
    );
    for slack in [1, 2, 100] {
        for host in [1, 2] {
            let cfg = ParallelConfig {
                slack,
                threads: host,
            };
            let mut p = ParallelEngine::new(&m, &placement, TimeUnit::Events, cfg).unwrap();
            p.run_slice(&events);
            assert_eq!(
                common::counters_json(&e),
                common::counters_json(&p.report()),
                "slack {slack}, {host} host threads"
            );
        }
    }
}

#[test]
fn default_slack_equals_exact_on_synthetic_traces() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    for p in [
        params(Workload::Stencil, 4, 256 << 10, 2),
        params(Workload::ProducerConsumer, 4, 64 << 10, 4),
        params(Workload::FalseSharing, 4, 64 << 10, 4),
        params(Workload::Random, 3, 64 << 10, 2),
    ] {
        let (_d, t) = trace(&p);
        let e = exact(&t, &m);
        let par = parallel(&t, &m, DEFAULT_SLACK, 2);
        assert_eq!(
            common::counters_json(&e),
            common::counters_json(&par),
            "{:?}",
            p.workload
        );
    }
}

/// A stencil shares lines between cores only across barriers: most quanta run apart.
#[test]
fn quanta_without_interaction_run_apart() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let (_d, t) = trace(&params(Workload::Stencil, 4, 256 << 10, 2));
    let q = parallel(&t, &m, 1000, 2).quanta.unwrap();
    assert!(q.total > 100, "{q:?}");
    assert!(q.lockstep * 10 < q.total, "{q:?}");
}

#[test]
fn run_and_run_slice_agree() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let (_d, t) = trace(&params(Workload::Stencil, 4, 64 << 10, 2));
    let events: Vec<_> = t.merged().unwrap().map(|e| e.unwrap()).collect();
    let placement: BTreeMap<u32, u32> = (0..4).map(|i| (i, i)).collect();
    let cfg = ParallelConfig {
        slack: 64,
        threads: 2,
    };
    let mut a = ParallelEngine::new(&m, &placement, t.header().time_unit, cfg).unwrap();
    a.run_slice(&events);
    // Split at an arbitrary quantum boundary.
    let cut = events.partition_point(|e| e.time < 64 * 100);
    let mut b = ParallelEngine::new(&m, &placement, t.header().time_unit, cfg).unwrap();
    b.run_slice(&events[..cut]);
    b.run_slice(&events[cut..]);
    assert!(cut > 0 && cut < events.len());
    assert_eq!(json(&a.report()), json(&b.report()));
    assert_eq!(json(&a.report()), json(&parallel(&t, &m, 64, 2)));
}

#[test]
fn unsupported_models_and_settings_are_refused() {
    let placement: BTreeMap<u32, u32> = [(0, 0)].into();
    let unit = cachescope_schema::TimeUnit::Events;
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let cfg = |slack, threads| ParallelConfig { slack, threads };
    assert_eq!(
        ParallelEngine::new(&m, &placement, unit, cfg(0, 1)).err(),
        Some(ParallelError::ZeroSlack)
    );
    assert_eq!(
        ParallelEngine::new(&m, &placement, unit, cfg(1, 0)).err(),
        Some(ParallelError::ZeroThreads)
    );
    for (what, levels) in [
        (
            "write-through",
            "[[levels]]\nname = \"L1\"\nsize = \"4K\"\nassoc = 4\nwrite = \"through\"\n",
        ),
        (
            "exclusive",
            "[[levels]]\nname = \"L1\"\nsize = \"4K\"\nassoc = 4\n[[levels]]\nname = \"L2\"\nsize = \"16K\"\nassoc = 4\ninclusion = \"exclusive\"\n",
        ),
        (
            "without a private level",
            "[[levels]]\nname = \"L1\"\nsize = \"4K\"\nassoc = 4\nshared = true\n",
        ),
    ] {
        let m = common::model(levels, 1, "msi");
        let err = ParallelEngine::new(&m, &placement, unit, cfg(1, 1))
            .err()
            .unwrap_or_else(|| panic!("{what} accepted"));
        assert!(
            matches!(&err, ParallelError::Unsupported(s) if s.contains(what.split(' ').next().unwrap())),
            "{what}: {err}"
        );
        assert!(err.to_string().contains("--engine exact"));
    }
}

/// Traces recorded from `examples/` (`OMP_NUM_THREADS=2 cachescope record`: jacobi_naive 128 4,
/// false_sharing 200, and mutex_counter 200 2, whose lock changes hands at the very time
/// unit the waiter is woken); their time unit is instructions, so many accesses share a time.
fn recorded(name: &str) -> TraceFile {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    TraceFile::open(&path).unwrap()
}

#[test]
fn recorded_traces_are_deterministic_across_host_threads() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    for name in [
        "jacobi_naive.cstrace",
        "false_sharing.cstrace",
        "mutex_counter.cstrace",
    ] {
        let t = recorded(name);
        for slack in [100, DEFAULT_SLACK] {
            let one = json(&parallel(&t, &m, slack, 1));
            assert_eq!(
                one,
                json(&parallel(&t, &m, slack, 2)),
                "{name} slack {slack}"
            );
            assert_eq!(
                one,
                json(&parallel(&t, &m, slack, 3)),
                "{name} slack {slack}"
            );
        }
    }
}

#[test]
fn recorded_traces_equal_exact() {
    // Naive Jacobi shares lines only across barriers; false_sharing's threads fight over
    // every line within one time unit (instructions: many accesses share a time); the mutex
    // counter's global order at a lock handover is not by thread id.
    let m = MachineModel::load("ivybridge-4c").unwrap();
    for (name, min_misses) in [
        ("jacobi_naive.cstrace", 1000),
        ("false_sharing.cstrace", 1000),
        ("mutex_counter.cstrace", 50),
    ] {
        let t = recorded(name);
        let e = exact(&t, &m);
        assert!(e.levels[0].counters.misses.total() > min_misses, "{name}");
        for slack in [1, 100, DEFAULT_SLACK, 100_000] {
            assert_eq!(
                common::counters_json(&e),
                common::counters_json(&parallel(&t, &m, slack, 2)),
                "{name} slack {slack}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random accesses of up to 4 threads on 2–3 cores (several threads per core included),
    /// many at the same time: the parallel engine's report is the exact engine's at any slack
    /// and host thread count.
    #[test]
    fn random_traces_equal_exact(
        h in 0..common::RANDOM_HIERARCHIES.len(),
        mesi in any::<bool>(),
        cores in 2u32..4,
        threads in 2u32..5,
        slack in prop::sample::select(vec![1u64, 2, 5, 50, u64::MAX]),
        host in 1usize..4,
        ops in prop::collection::vec(
            (0u32..4, 0u64..3,
             prop::sample::select(vec![AccessKind::Load, AccessKind::Store, AccessKind::AtomicRmw, AccessKind::Modify]),
             0u64..4096, prop::sample::select(vec![1u32, 4, 8, 16, 100])),
            1..400),
    ) {
        let m = common::model(common::RANDOM_HIERARCHIES[h], cores, if mesi { "mesi" } else { "msi" });
        let mut time = 0;
        let mut events: Vec<TimedEvent> = ops
            .into_iter()
            .map(|(thread, dt, kind, addr, size)| {
                time += dt;
                TimedEvent {
                    time,
                    thread: thread % threads,
                    event: Event::Access(common::acc(kind, 0x10000 + addr, size)),
                }
            })
            .collect();
        // The global order: by time, then thread (stable: each thread keeps its own order).
        events.sort_by_key(|e| (e.time, e.thread));
        let placement: BTreeMap<u32, u32> = (0..threads).map(|t| (t, t % cores)).collect();
        let mut e = ExactEngine::new(&m, &placement, TimeUnit::Events);
        for ev in &events {
            e.process(ev);
        }
        let cfg = ParallelConfig { slack, threads: host };
        let mut p = ParallelEngine::new(&m, &placement, TimeUnit::Events, cfg).unwrap();
        p.run_slice(&events);
        let mut diff = Vec::new();
        json_diff(&common::counters_json(&e.report()), &common::counters_json(&p.report()), "", &mut diff);
        prop_assert!(diff.is_empty(), "exact vs parallel: {:?}", diff);
    }
}
