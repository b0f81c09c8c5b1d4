//! The parallel engine's bandwidth timeline equals the exact engine's: whole bandwidth reports
//! (curves, dominance, per-thread estimates, page faults, source attribution) compared as
//! JSON, on random and generated traces, at any slack and host thread count.

use std::collections::BTreeMap;
use std::num::NonZeroU64;

use cachescope_schema::synth::{generate, GenParams, Workload};
use cachescope_schema::{Access, AccessKind, CodePos, Event, TimeUnit, TimedEvent, TraceFile};
use cachescope_sim::bandwidth::{BandwidthConfig, BandwidthReport};
use cachescope_sim::{
    replay_exact_with_bandwidth, replay_parallel_with_bandwidth, simulate_exact_with_bandwidth,
    simulate_parallel_with_bandwidth, MachineModel, ParallelConfig, ThreadMapping,
};
use proptest::prelude::*;
#[allow(dead_code)] // shared with other test files
mod common;

/// `levels` on `cores` cores with a bandwidth section limiting every path (per core, and in
/// total at the memory side), page-fault costs and a shared issue width.
fn model(levels: &str, cores: u32, protocol: &str) -> MachineModel {
    let base = format!(
        "name = \"bw\"\ncores = {cores}\nline_size = 64\ncoherence = \"{protocol}\"\n{levels}"
    );
    let names = MachineModel::from_toml(&base, "bw").unwrap().path_names();
    let mut text = format!(
        "{base}\n[bandwidth]\nghz = 1.0\nipc = 2.0\nipc_total = 3.0\nflops_per_cycle = 1.0\n\
         page_fault_ns = 50.0\n"
    );
    for (i, name) in names.iter().enumerate() {
        let gbs = 1.0 + i as f64 * 0.5;
        text.push_str(&format!(
            "[bandwidth.paths.{name}]\nread_gbs = {gbs}\nwrite_gbs = {}\n",
            gbs / 2.0
        ));
        if name.ends_with("-mem") {
            text.push_str("total_read_gbs = 1.5\ntotal_write_gbs = 1.0\n");
        }
    }
    MachineModel::from_toml(&text, "bw").unwrap()
}

fn json(r: &BandwidthReport) -> String {
    serde_json::to_string_pretty(r).unwrap()
}

/// The first differing line of two reports (readable failures).
fn first_difference(a: &str, b: &str) -> Option<String> {
    a.lines()
        .zip(b.lines())
        .enumerate()
        .find(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| format!("line {}: exact {x:?} vs parallel {y:?}", i + 1))
        .or_else(|| (a.len() != b.len()).then(|| "lengths differ".to_string()))
}

#[test]
fn generated_traces_give_the_exact_engines_timeline() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let cfg = BandwidthConfig::default();
    for w in [
        Workload::FalseSharing,
        Workload::Stencil,
        Workload::ProducerConsumer,
    ] {
        let mut p = GenParams::new(w);
        p.threads = 4;
        p.size = 8192;
        p.iterations = 20;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.cstrace");
        std::fs::write(&path, generate(&p, Vec::new(), 4096).unwrap()).unwrap();
        let t = TraceFile::open(&path).unwrap();
        let (sim, exact) =
            simulate_exact_with_bandwidth(&t, &m, &ThreadMapping::OneToOne, cfg).unwrap();
        assert!(sim.levels[0].counters.misses.total() > 0, "{w:?}");
        let exact = json(&exact);
        for (slack, threads) in [(1, 2), (1000, 1), (10_000, 2), (1_000_000, 3)] {
            let (_, par) = simulate_parallel_with_bandwidth(
                &t,
                &m,
                &ThreadMapping::OneToOne,
                ParallelConfig { slack, threads },
                cfg,
            )
            .unwrap();
            let par = json(&par);
            assert!(
                exact == par,
                "{w:?}, slack {slack}, {threads} host threads: {:?}",
                first_difference(&exact, &par)
            );
        }
    }
}

/// A random step of one thread.
#[derive(Debug, Clone)]
enum Step {
    Access(AccessKind, u64, u32, u64),
    Advance(u64, u64),
    Alloc(u64, u64),
    Free(u64),
    Barrier,
    /// A thread creation or join (of thread `n % threads`), which order threads in the
    /// program estimate.
    Create(u32),
    Join(u32),
}

fn step() -> impl Strategy<Value = Step> {
    let kind = prop::sample::select(vec![
        AccessKind::Load,
        AccessKind::Store,
        AccessKind::Modify,
        AccessKind::AtomicRmw,
    ]);
    prop_oneof![
        8 => (kind, 0u64..16384, prop::sample::select(vec![1u32, 4, 8, 16, 100]), 1u64..6)
            .prop_map(|(k, a, s, pc)| Step::Access(k, a, s, pc)),
        2 => (1u64..300, 0u64..8).prop_map(|(u, f)| Step::Advance(u, f)),
        1 => (0u64..4, prop::sample::select(vec![64u64, 200 << 10])).prop_map(|(b, s)| Step::Alloc(b, s)),
        1 => (0u64..4).prop_map(Step::Free),
        1 => Just(Step::Barrier),
        1 => (0u32..4).prop_map(Step::Create),
        1 => (0u32..4).prop_map(Step::Join),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random multi-thread timelines (accesses with code positions, advances, large blocks
    /// freed and reallocated, barriers, thread creations and joins, many events at the same
    /// time): the parallel engine's
    /// bandwidth report is the exact engine's, byte for byte.
    #[test]
    fn random_timelines_equal_exact(
        h in 0..common::RANDOM_HIERARCHIES.len(),
        mesi in any::<bool>(),
        threads in 2u32..5,
        slack in prop::sample::select(vec![1u64, 7, 100, u64::MAX]),
        host in 1usize..4,
        window in prop::sample::select(vec![1u64, 50, 200]),
        period in 1u32..4,
        ops in prop::collection::vec((0u32..4, 0u64..3, step()), 1..300),
    ) {
        let m = model(common::RANDOM_HIERARCHIES[h], 4, if mesi { "mesi" } else { "msi" });
        let mut time = 0;
        let mut events: Vec<TimedEvent> = ops
            .into_iter()
            .map(|(thread, dt, s)| {
                time += dt;
                let event = match s {
                    Step::Access(kind, addr, size, pc) => Event::Access(Access {
                        kind,
                        size,
                        addr: 0x10000 + addr,
                        pc: NonZeroU64::new(0x400000 + pc).map(CodePos),
                    }),
                    Step::Advance(units, flops) => Event::Advance { units, flops },
                    Step::Alloc(b, size) => Event::Alloc { addr: 0x100000 * (b + 1), size, site: None, align: None },
                    Step::Free(b) => Event::Free { addr: 0x100000 * (b + 1) },
                    Step::Barrier => Event::BarrierLeave { barrier: 1 },
                    Step::Create(n) => Event::ThreadCreate { child: n % threads },
                    Step::Join(n) => Event::ThreadJoin { child: n % threads },
                };
                TimedEvent { time, thread: thread % threads, event }
            })
            .collect();
        events.sort_by_key(|e| (e.time, e.thread));
        let placement: BTreeMap<u32, u32> = (0..threads).map(|t| (t, t)).collect();
        let cfg = BandwidthConfig { window, sample_period: period };
        let (es, eb) = replay_exact_with_bandwidth(&m, &placement, TimeUnit::Instructions, &events, cfg).unwrap();
        let (ps, pb) = replay_parallel_with_bandwidth(
            &m, &placement, TimeUnit::Instructions, &events,
            ParallelConfig { slack, threads: host }, cfg,
        ).unwrap();
        prop_assert_eq!(es.paths, ps.paths);
        let (eb, pb) = (json(&eb), json(&pb));
        prop_assert!(eb == pb, "{:?}", first_difference(&eb, &pb));
    }
}
