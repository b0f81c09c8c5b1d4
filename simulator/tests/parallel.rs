//! The parallel engine: determinism across host thread counts, equality with the exact engine
//! at the smallest slack on traces without same-time sharing, bounded deviation at the default.

use std::collections::BTreeMap;

use cachescope_schema::synth::{generate, GenParams, Workload};
use cachescope_schema::TraceFile;
use cachescope_sim::counters::SimReport;
#[allow(dead_code)] // shared with other test files
mod common;

use cachescope_sim::parallel::DEFAULT_SLACK;
use cachescope_sim::{
    simulate_exact, simulate_parallel, MachineModel, ParallelConfig, ParallelEngine, ParallelError,
    ThreadMapping,
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

/// The report as JSON with the engine-specific fields removed.
fn counters_json(r: &SimReport) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("engine");
    o.remove("slack");
    v
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
            counters_json(&e),
            counters_json(&par),
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
    assert_eq!(counters_json(&e), counters_json(&parallel(&t, &m, 1, 2)));
}

#[test]
fn large_slack_loses_same_quantum_sharing() {
    // One quantum for the whole run: no core sees another's writes in time, so the
    // false-sharing misses disappear. The engine must not hide this.
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let (_d, t) = trace(&params(Workload::FalseSharing, 2, 16 << 10, 4));
    let e = exact(&t, &m);
    let p = parallel(&t, &m, u64::MAX, 2);
    assert!(e.levels[0].counters.misses.coherence_false > 500);
    assert!(
        p.levels[0].counters.misses.coherence_false < e.levels[0].counters.misses.coherence_false
    );
}

#[test]
fn default_slack_deviation_on_synthetic_traces() {
    // Measured deviation at the default slack (docs/parallel-engine.md): ≤ 1% of L1 misses
    // and ≤ 5% of coherence misses on these workloads.
    let m = MachineModel::load("ivybridge-4c").unwrap();
    for p in [
        params(Workload::Stencil, 4, 256 << 10, 2),
        params(Workload::ProducerConsumer, 4, 64 << 10, 4),
        params(Workload::FalseSharing, 4, 64 << 10, 4),
    ] {
        let (_d, t) = trace(&p);
        let e = exact(&t, &m);
        let par = simulate_parallel(
            &t,
            &m,
            &ThreadMapping::OneToOne,
            ParallelConfig {
                slack: DEFAULT_SLACK,
                threads: 2,
            },
        )
        .unwrap();
        let (el, pl) = (&e.levels[0].counters.misses, &par.levels[0].counters.misses);
        let dev = |a: u64, b: u64| a.abs_diff(b) as f64 / a.max(1) as f64;
        assert!(
            dev(el.total(), pl.total()) <= 0.01,
            "{:?}: L1 misses {} vs {}",
            p.workload,
            el.total(),
            pl.total()
        );
        let coh = |m: &cachescope_sim::counters::MissCounts| m.coherence_true + m.coherence_false;
        assert!(
            dev(coh(el), coh(pl)) <= 0.05,
            "{:?}: coherence misses {} vs {}",
            p.workload,
            coh(el),
            coh(pl)
        );
    }
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

/// Traces recorded from `examples/` (`OMP_NUM_THREADS=2 cachescope record`: jacobi_naive 128 4
/// and false_sharing 200); their time unit is instructions, so many accesses share a time.
fn recorded(name: &str) -> TraceFile {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    TraceFile::open(&path).unwrap()
}

#[test]
fn recorded_traces_are_deterministic_across_host_threads() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    for name in ["jacobi_naive.cstrace", "false_sharing.cstrace"] {
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
fn recorded_jacobi_equals_exact() {
    // Threads of the naive Jacobi share lines only across barriers.
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let t = recorded("jacobi_naive.cstrace");
    let e = exact(&t, &m);
    assert!(e.levels[0].counters.misses.total() > 1000);
    for slack in [1, DEFAULT_SLACK] {
        assert_eq!(
            counters_json(&e),
            counters_json(&parallel(&t, &m, slack, 2)),
            "slack {slack}"
        );
    }
}
