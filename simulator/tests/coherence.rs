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

/// One-line L1s above a two-line exclusive L2 (64-byte lines: every address below maps to the
/// one set of each).
const TINY_EXCLUSIVE: &str = r#"
[[levels]]
name = "L1"
size = 64
assoc = 1
[[levels]]
name = "L2"
size = 128
assoc = 2
shared = true
inclusion = "exclusive"
"#;

const A: u64 = 0x10000;
const B: u64 = 0x20000;
const C: u64 = 0x30000;
const D: u64 = 0x40000;
const E: u64 = 0x50000;

#[test]
fn an_exclusive_level_gives_its_line_up_before_taking_the_victim_from_above() {
    // A B C A B on one core: when A comes back from L2, L1's victim C takes A's freed way
    // (a swap), so B is still there (until 2026-11-29 C went in first and evicted B).
    let m = model(TINY_EXCLUSIVE, 1, "msi");
    let mut e = engine(&m);
    for addr in [A, B, C, A, B] {
        e.access(0, &acc(AccessKind::Load, addr, 8));
    }
    let l2 = &e.report().cores[0].levels[1];
    assert_eq!((l2.hits, l2.evictions), (2, 0), "{l2:?}");
}

#[test]
fn a_dirty_line_evicted_onto_a_stale_copy_in_an_exclusive_level_reaches_memory() {
    let m = model(TINY_EXCLUSIVE, 2, "msi");
    let mut e = engine(&m);
    e.access(0, &acc(AccessKind::Load, A, 8));
    e.access(1, &acc(AccessKind::Load, A, 8));
    // Core 1's clean copy of A goes down to L2, while core 0 still holds A and then writes it.
    e.access(1, &acc(AccessKind::Load, B, 8));
    e.access(0, &acc(AccessKind::Store, A, 8));
    // Core 0's dirty A goes down onto the stale copy: that copy is dirty now.
    e.access(0, &acc(AccessKind::Load, C, 8));
    // Core 1's next lines push A out of L2, to memory.
    e.access(1, &acc(AccessKind::Load, D, 8));
    e.access(1, &acc(AccessKind::Load, E, 8));
    let r = e.report();
    let l2_writebacks: u64 = r.cores.iter().map(|c| c.levels[1].writebacks).sum();
    assert_eq!(l2_writebacks, 1, "{:?}", r.cores);
}

#[test]
fn a_dirty_line_moved_up_from_an_exclusive_level_is_modified_under_msi() {
    let m = model(TINY_EXCLUSIVE, 2, "msi");
    let mut e = engine(&m);
    e.access(0, &acc(AccessKind::Store, A, 8));
    e.access(0, &acc(AccessKind::Load, B, 8)); // dirty A down to L2
    e.access(0, &acc(AccessKind::Load, A, 8)); // and back up: the only copy of the data
    e.access(0, &acc(AccessKind::Store, A, 8)); // a write hit on a modified line
    e.access(1, &acc(AccessKind::Load, A, 8)); // served by core 0, cache to cache
    let r = e.report();
    assert_eq!(r.cores[0].upgrades, 0, "{:?}", r.cores[0]);
    assert_eq!(r.cores[1].cache_to_cache, 1, "{:?}", r.cores[1]);
}

#[test]
fn a_dirty_line_moved_up_while_other_cores_hold_it_is_shared_and_keeps_its_dirt() {
    // Core 1's clean A goes down into the exclusive L2 while core 0 holds A; core 0 writes
    // it (L2's copy is now stale) and serves core 1's next load, whose downgrade leaves the
    // dirty data on L2's copy. Core 2's load moves that dirty copy up while cores 0 and 1
    // hold A shared: it arrives shared, with its dirt, so core 3's load is no cache-to-cache
    // transfer (only a modified holder serves one; a reviewer's reference simulator, which
    // let a dirty shared copy serve, counted one) and core 2 writes the dirt back when it
    // evicts A.
    let m = model(TINY_EXCLUSIVE, 4, "msi");
    let mut e = engine(&m);
    e.access(0, &acc(AccessKind::Load, A, 8));
    e.access(1, &acc(AccessKind::Load, A, 8));
    e.access(1, &acc(AccessKind::Load, B, 8)); // A, clean, down to L2
    e.access(0, &acc(AccessKind::Store, A, 8));
    e.access(1, &acc(AccessKind::Load, A, 8)); // served by core 0
    e.access(2, &acc(AccessKind::Load, A, 8)); // L2's dirty copy moves up
    e.access(3, &acc(AccessKind::Load, A, 8));
    e.access(2, &acc(AccessKind::Load, C, 8)); // core 2 evicts A
    let r = e.report();
    assert_eq!(r.cores[1].cache_to_cache, 1, "{:?}", r.cores[1]);
    assert_eq!(r.cores[2].cache_to_cache, 0, "{:?}", r.cores[2]);
    assert_eq!(r.cores[3].cache_to_cache, 0, "{:?}", r.cores[3]);
    assert_eq!(r.cores[2].levels[0].writebacks, 1, "{:?}", r.cores[2]);
}

#[test]
fn a_cores_own_store_to_a_line_it_lost_is_no_true_sharing() {
    let m = model(
        r#"
[[levels]]
name = "L1"
size = 512
assoc = 2
write = "through"
[[levels]]
name = "L2"
size = 2048
assoc = 4
shared = true
"#,
        2,
        "msi",
    );
    let mut e = engine(&m);
    e.access(0, &acc(AccessKind::Load, A, 8));
    // Core 1 writes bytes 8..15: core 0 loses the line.
    e.access(1, &acc(AccessKind::Store, A + 8, 8));
    // Core 0 stores bytes 0..7 without allocating (write-through), then loads them: the data
    // it misses on is its own, the line was lost to core 1's write of other bytes.
    e.access(0, &acc(AccessKind::Store, A, 8));
    e.access(0, &acc(AccessKind::Load, A, 8));
    let l1 = &e.report().cores[0].levels[0];
    assert_eq!(
        (l1.misses.coherence_true, l1.misses.coherence_false),
        (0, 2),
        "{l1:?}"
    );
}

#[test]
fn dirt_moved_up_from_an_exclusive_level_skips_a_write_through_level() {
    // L1 write-through, L2 write-back, L3 exclusive: A written in L2 goes down dirty to L3
    // and comes back up on a load, filling L1 and L2. Its dirt belongs in L2 (until
    // 2026-11-29 the write-through L1 took it and later counted a writeback).
    let m = model(
        r#"
[[levels]]
name = "L1"
size = 64
assoc = 1
write = "through"
[[levels]]
name = "L2"
size = 64
assoc = 1
[[levels]]
name = "L3"
size = 128
assoc = 2
shared = true
inclusion = "exclusive"
"#,
        1,
        "msi",
    );
    let mut e = engine(&m);
    e.access(0, &acc(AccessKind::Store, A, 8));
    e.access(0, &acc(AccessKind::Load, B, 8));
    e.access(0, &acc(AccessKind::Load, A, 8));
    e.access(0, &acc(AccessKind::Load, C, 8));
    let r = e.report();
    let (l1, l2) = (&r.cores[0].levels[0], &r.cores[0].levels[1]);
    assert_eq!((l1.writebacks, l2.writebacks), (0, 2), "{l1:?} {l2:?}");
}
