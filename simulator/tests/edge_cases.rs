//! Edge cases of the exact engine found in review: each test failed (or panicked) before its
//! fix.

#[allow(dead_code)] // shared with other test files
mod common;

use cachescope_schema::{AccessKind, Event, TimedEvent};
use cachescope_sim::counters::MissCounts;
use cachescope_sim::MachineModel;
use common::{acc, engine};

fn model(levels: &str, cores: u32) -> MachineModel {
    common::model(levels, cores, "msi")
}

/// Private L1 and L2, shared L3.
const PRIVATE_L2: &str = r#"
[[levels]]
name = "L1"
size = 512
assoc = 2
[[levels]]
name = "L2"
size = 2048
assoc = 4
[[levels]]
name = "L3"
size = 8192
assoc = 4
shared = true
"#;

#[test]
fn downgrade_writeback_leaves_the_owners_private_levels() {
    let m = model(PRIVATE_L2, 2);
    let mut e = engine(&m);
    e.access(0, &acc(AccessKind::Store, 0x8000, 8));
    e.access(1, &acc(AccessKind::Load, 0x8000, 8));
    e.check_invariants().unwrap();
    let r = e.report();
    let l2_l3 = r.paths.iter().find(|p| p.path == "L2-L3").unwrap();
    assert_eq!(
        l2_l3.per_core[0].write, 64,
        "M → S must write the dirty line out of core 0"
    );
}

#[test]
fn accesses_at_the_top_of_the_address_space() {
    let m = model(PRIVATE_L2, 2);
    let mut e = engine(&m);
    let top = u64::MAX - 63;
    e.access(0, &acc(AccessKind::Load, top, 8));
    e.access(1, &acc(AccessKind::Store, top, 8)); // invalidates core 0: bytes are tracked
    e.access(0, &acc(AccessKind::Load, u64::MAX - 3, 8)); // runs past the end: 4 bytes
    e.access(0, &acc(AccessKind::Load, u64::MAX - 69, 8)); // straddles into the top line
    e.check_invariants().unwrap();
    let r = e.report();
    assert_eq!(
        r.levels[0].counters.accesses.load, 4,
        "the straddling load touches two lines"
    );
}

#[test]
fn write_through_store_misses_are_not_conflicts() {
    let levels = r#"
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
"#;
    let mut e = engine(&model(levels, 1));
    for _ in 0..10 {
        e.access(0, &acc(AccessKind::Store, 0x4000, 8));
    }
    let r = e.report();
    // No-write-allocate: L1 never holds the line, so every store misses as never held.
    assert_eq!(
        r.cores[0].levels[0].misses,
        MissCounts {
            compulsory: 10,
            ..MissCounts::default()
        }
    );
    assert_eq!(
        r.paths[1].total.write, 80,
        "each store's 8 bytes pass down to L2"
    );
}

#[test]
fn huge_time_advances_saturate() {
    let mut e = engine(&model(PRIVATE_L2, 1));
    e.process(&TimedEvent {
        time: 5,
        thread: 0,
        event: Event::Advance {
            units: u64::MAX,
            flops: 1,
        },
    });
    e.process(&TimedEvent {
        time: 6,
        thread: 0,
        event: Event::Advance {
            units: u64::MAX,
            flops: 1,
        },
    });
    let r = e.report();
    assert_eq!(
        (r.threads[0].time_units, r.threads[0].end_time),
        (u64::MAX, u64::MAX)
    );
}

#[test]
fn oversized_caches_are_rejected_not_allocated() {
    let text = "name = \"t\"\ncores = 1\nline_size = 64\n[[levels]]\nname = \"L1\"\nsize = \"16384G\"\nassoc = 8\n";
    let err = MachineModel::from_toml(text, "big.toml").unwrap_err();
    assert_eq!(err.field, "levels.L1.size");
    assert!(cachescope_sim::cachegrind::CgGeometry::parse("17592186044416,1,64").is_err());
    assert!(cachescope_sim::cachegrind::CgGeometry::parse("32768,8,4294967360").is_err());
}

#[test]
fn misses_are_compulsory_then_conflict_or_capacity_by_the_fully_associative_shadow() {
    // Direct-mapped, 2 lines: 0x0 and 0x80 fight over set 0 while a fully associative cache
    // of 2 lines would hold both: conflict misses.
    let m = model(
        "[[levels]]\nname = \"L1\"\nsize = 128\nassoc = 1\n[[levels]]\nname = \"L2\"\nsize = 4096\nassoc = 4\nshared = true\n",
        1,
    );
    let mut e = engine(&m);
    for addr in [0x0, 0x80, 0x0, 0x80] {
        e.access(0, &acc(AccessKind::Load, addr, 8));
    }
    let l1 = &e.report().levels[0].counters.misses;
    assert_eq!((l1.compulsory, l1.conflict, l1.capacity), (2, 2, 0));
    // Fully associative, 2 lines: three lines in a cycle do not fit: capacity misses.
    let m = model(
        "[[levels]]\nname = \"L1\"\nsize = 128\nassoc = 2\n[[levels]]\nname = \"L2\"\nsize = 4096\nassoc = 4\nshared = true\n",
        1,
    );
    let mut e = engine(&m);
    for addr in [0x0, 0x40, 0x80, 0x0, 0x40] {
        e.access(0, &acc(AccessKind::Load, addr, 8));
    }
    let l1 = &e.report().levels[0].counters.misses;
    assert_eq!((l1.compulsory, l1.conflict, l1.capacity), (3, 0, 2));
}

/// Threads are found by id whatever the ids: small ones (a table), large ones such as Linux
/// tids (a map), and events of threads with no placement are skipped, in any mix.
#[test]
fn thread_ids_small_large_and_unplaced() {
    use std::collections::BTreeMap;
    let m = model(PRIVATE_L2, 3);
    let placement: BTreeMap<u32, u32> = [(1, 0), (4095, 1), (4_000_000, 2)].into();
    let mut e =
        cachescope_sim::ExactEngine::new(&m, &placement, cachescope_schema::TimeUnit::Events);
    let ids = [1u32, 4095, 4_000_000, 7, 4096, 1, 4_000_000, 4095, 0];
    for (i, &thread) in ids.iter().cycle().take(90).enumerate() {
        e.process(&TimedEvent {
            time: i as u64,
            thread,
            event: Event::Access(acc(AccessKind::Store, 64 * (i as u64 % 4), 8)),
        });
    }
    let r = e.report();
    let per_thread: Vec<(u32, u32, u64)> = r
        .threads
        .iter()
        .map(|t| (t.thread, t.core, t.accesses))
        .collect();
    // 10 rounds of the 9 ids: thread 1 and the large id twice per round, 4095 twice.
    assert_eq!(
        per_thread,
        vec![(1, 0, 20), (4095, 1, 20), (4_000_000, 2, 20)]
    );
    assert_eq!(
        r.cores
            .iter()
            .map(|c| c.levels[0].accesses.total())
            .sum::<u64>(),
        60
    );
}
