//! Multi-core behaviour of the exact engine: the coherence invariant on random traces, and
//! hand-checked sharing patterns.

#[allow(dead_code)] // shared with other test files
mod common;

use cachescope_schema::synth::{generate, GenParams, Workload};
use cachescope_schema::{AccessKind, TraceFile};
use cachescope_sim::counters::SimReport;
use cachescope_sim::{simulate_exact, MachineModel, ThreadMapping};
use common::{acc, engine, model};
use proptest::prelude::*;

const L1_L2: &str = r#"
[[levels]]
name = "L1"
size = 512
assoc = 2
[[levels]]
name = "L2"
size = 2048
assoc = 4
shared = true
"#;

/// Several hierarchies that stress fills, evictions, inclusion and write policies.
fn hierarchies() -> Vec<&'static str> {
    vec![
        L1_L2,
        r#"
[[levels]]
name = "L1"
size = 256
assoc = 2
replacement = "plru"
[[levels]]
name = "L2"
size = 1024
assoc = 4
inclusion = "inclusive"
[[levels]]
name = "L3"
size = 4096
assoc = 4
shared = true
inclusion = "inclusive"
"#,
        r#"
[[levels]]
name = "L1"
size = 256
assoc = 2
write = "through"
[[levels]]
name = "L2"
size = 512
assoc = 2
inclusion = "exclusive"
replacement = "fifo"
[[levels]]
name = "L3"
size = 1536
assoc = 3
shared = true
replacement = "random"
"#,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// One writer or many readers, after every access, for MSI and MESI on every hierarchy.
    #[test]
    fn coherence_invariant_holds_after_every_access(
        h in 0usize..3,
        mesi in any::<bool>(),
        cores in 2u32..5,
        ops in prop::collection::vec(
            (0u32..4, prop::sample::select(vec![AccessKind::Load, AccessKind::Store, AccessKind::AtomicRmw, AccessKind::Modify]),
             0u64..4096, prop::sample::select(vec![1u32, 4, 8, 16, 100])),
            1..400),
    ) {
        let m = model(hierarchies()[h], cores, if mesi { "mesi" } else { "msi" });
        let mut e = engine(&m);
        for (i, (core, kind, addr, size)) in ops.into_iter().enumerate() {
            e.access((core % cores) as usize, &acc(kind, 0x10000 + addr, size));
            if let Err(msg) = e.check_invariants() {
                prop_assert!(false, "after access {}: {}", i, msg);
            }
        }
        let r = e.report();
        for l in &r.levels {
            prop_assert_eq!(l.counters.hits + l.counters.misses.total(), l.counters.accesses.total());
        }
    }
}

fn l1(r: &SimReport, core: usize) -> &cachescope_sim::counters::LevelCounters {
    &r.cores[core].levels[0]
}

#[test]
fn ping_pong_writes_are_coherence_misses() {
    let m = model(L1_L2, 2, "msi");
    // Same bytes: true sharing.
    let mut e = engine(&m);
    for i in 0..100 {
        e.access(i % 2, &acc(AccessKind::Store, 0x4000, 8));
    }
    let r = e.report();
    let (a, b) = (l1(&r, 0), l1(&r, 1));
    assert_eq!(a.misses.compulsory + b.misses.compulsory, 2);
    assert_eq!(
        a.misses.coherence_true + b.misses.coherence_true,
        98,
        "{a:?} {b:?}"
    );
    assert_eq!(a.misses.coherence_false + b.misses.coherence_false, 0);
    assert_eq!(
        r.cores[0].invalidations_sent + r.cores[1].invalidations_sent,
        99
    );
    assert_eq!(r.cores[0].cache_to_cache + r.cores[1].cache_to_cache, 99);

    // Different bytes of the same line: false sharing.
    let mut e = engine(&m);
    for i in 0..100u64 {
        e.access(
            (i % 2) as usize,
            &acc(AccessKind::Store, 0x4000 + 8 * (i % 2), 8),
        );
    }
    let r = e.report();
    let (a, b) = (l1(&r, 0), l1(&r, 1));
    assert_eq!(a.misses.coherence_false + b.misses.coherence_false, 98);
    assert_eq!(a.misses.coherence_true + b.misses.coherence_true, 0);
}

#[test]
fn read_after_remote_write_downgrades_and_transfers() {
    let m = model(L1_L2, 2, "msi");
    let mut e = engine(&m);
    e.access(0, &acc(AccessKind::Store, 0x8000, 8));
    e.access(1, &acc(AccessKind::Load, 0x8000, 8));
    e.check_invariants().unwrap();
    let r = e.report();
    assert_eq!(r.cores[1].cache_to_cache, 1);
    assert_eq!(
        r.cores[0].levels[0].writebacks, 1,
        "M → S writes the dirty line back"
    );
    // Core 0 writes again: an upgrade, invalidating core 1.
    e.access(0, &acc(AccessKind::Store, 0x8000, 8));
    let r = e.report();
    assert_eq!(
        (r.cores[0].upgrades, r.cores[1].invalidations_received),
        (1, 1)
    );
    // MESI: a lone reader gets E and writes without an upgrade.
    let m = model(L1_L2, 2, "mesi");
    let mut e = engine(&m);
    e.access(0, &acc(AccessKind::Load, 0x8000, 8));
    e.access(0, &acc(AccessKind::Store, 0x8000, 8));
    assert_eq!(e.report().cores[0].upgrades, 0);
}

fn gen_and_simulate(p: &GenParams, m: &MachineModel) -> SimReport {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.cstrace");
    std::fs::write(&path, generate(p, Vec::new(), 4096).unwrap()).unwrap();
    let t = TraceFile::open(&path).unwrap();
    simulate_exact(&t, m, &ThreadMapping::OneToOne).unwrap()
}

fn coherence(r: &SimReport) -> (u64, u64) {
    let l = &r.levels[0].counters.misses;
    (l.coherence_true, l.coherence_false)
}

#[test]
fn generated_false_sharing_is_false_and_padding_removes_it() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let mut p = GenParams::new(Workload::FalseSharing);
    p.size = 16 << 10;
    p.iterations = 4;
    let (t, f) = coherence(&gen_and_simulate(&p, &m));
    assert!(f > 500, "false-sharing misses {f}");
    assert_eq!(t, 0, "no true sharing in Fig. 4.3's pattern");
    p.padded = true;
    let (t, f) = coherence(&gen_and_simulate(&p, &m));
    assert_eq!((t, f), (0, 0), "padded layout has no coherence misses");
}

#[test]
fn producer_consumer_is_true_sharing() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let mut p = GenParams::new(Workload::ProducerConsumer);
    p.size = 8 << 10;
    p.iterations = 4;
    let (t, f) = coherence(&gen_and_simulate(&p, &m));
    // The consumer re-reads every line the producer rewrote: 128 lines × 3 later iterations.
    assert!(t >= 3 * 128, "true-sharing misses {t}");
    assert!(f < t / 10, "false {f} vs true {t}");
}

#[test]
fn same_trace_same_json() {
    let m = MachineModel::load("ivybridge-4c").unwrap();
    let mut p = GenParams::new(Workload::Stencil);
    p.threads = 3;
    p.size = 32 << 10;
    let a = serde_json::to_string(&gen_and_simulate(&p, &m)).unwrap();
    let b = serde_json::to_string(&gen_and_simulate(&p, &m)).unwrap();
    assert_eq!(a, b);
}
