//! The bandwidth timeline on hand-made timelines: curve areas equal the bytes moved, the
//! dominant limit is the slowest one, and merge points slow every user by the same factor.

use std::collections::BTreeMap;

use cachescope_schema::{Access, AccessKind, Event, TimeUnit, TimedEvent};
use cachescope_sim::bandwidth::{BandwidthConfig, BandwidthReport, BandwidthTimeline};
use cachescope_sim::counters::SimReport;
use cachescope_sim::{replay_exact_with_bandwidth, MachineModel};
use proptest::prelude::*;

/// Two cores, private 1 KiB L1, shared 64 KiB L2; 1 GHz × 1 instruction per cycle, so a
/// limit of N GB/s is N bytes per time unit.
fn model(limits: &str) -> MachineModel {
    let text = format!(
        r#"
name = "hand"
cores = 2
line_size = 64
[[levels]]
name = "L1"
size = 1024
assoc = 2
[[levels]]
name = "L2"
size = "64K"
assoc = 8
shared = true
[bandwidth]
ghz = 1.0
ipc = 1.0
{limits}
"#
    );
    MachineModel::from_toml(&text, "hand").expect("valid model")
}

/// Runs `events` (already in global order, instructions as time unit) through the exact
/// engine and the timeline, thread i on core i.
fn run(m: &MachineModel, events: &[TimedEvent], window: u64) -> (BandwidthReport, SimReport) {
    let placement: BTreeMap<u32, u32> = (0..m.cores).map(|c| (c, c)).collect();
    let cfg = BandwidthConfig {
        window,
        sample_period: 1,
    };
    let (sim, r) = replay_exact_with_bandwidth(m, &placement, TimeUnit::Instructions, events, cfg)
        .expect("bandwidth model");
    (r, sim)
}

fn acc(kind: AccessKind, addr: u64, size: u32) -> Access {
    Access {
        kind,
        size,
        addr,
        pc: None,
    }
}

fn at(time: u64, thread: u32, event: Event) -> TimedEvent {
    TimedEvent {
        time,
        thread,
        event,
    }
}

/// `lines` loads of 8 bytes, one per distinct line from `base`, at `time`, then an advance of
/// `units` instructions.
fn burst(thread: u32, time: u64, base: u64, lines: u64, units: u64) -> Vec<TimedEvent> {
    let mut v: Vec<_> = (0..lines)
        .map(|i| {
            at(
                time,
                thread,
                Event::Access(acc(AccessKind::Load, base + i * 64, 8)),
            )
        })
        .collect();
    v.push(at(time, thread, Event::Advance { units, flops: 0 }));
    v
}

fn channel(r: &BandwidthReport, name: &str) -> usize {
    r.channels
        .iter()
        .position(|c| c.name == name)
        .unwrap_or_else(|| panic!("no channel {name}: {:?}", r.channels))
}

/// The one dominant channel of thread `t`, if any.
fn dominant(r: &BandwidthReport, t: usize) -> Option<String> {
    let d: Vec<_> = r.threads[t]
        .dominance
        .iter()
        .enumerate()
        .filter(|(_, d)| d.windows > 0)
        .map(|(c, _)| r.channels[c].name.clone())
        .collect();
    assert!(d.len() <= 1, "one window, one dominant channel: {d:?}");
    d.into_iter().next()
}

const LIMITS: &str = r#"
[bandwidth.paths.core-L1]
read_gbs = 8.0
[bandwidth.paths.L1-L2]
read_gbs = 64.0
[bandwidth.paths.L2-mem]
read_gbs = 16.0
"#;

#[test]
fn dominance_picks_the_slowest_limit() {
    // 100 loads of 8 bytes from distinct lines in 200 instructions: core-L1 800 B, L1-L2 and
    // L2-mem 6400 B each. Needs: core-L1 800/8 = 100, L1-L2 6400/64 = 100, L2-mem
    // 6400/16 = 400 time units: memory dominates and the window takes 400 units.
    let events = burst(0, 0, 1 << 20, 100, 200);
    let m = model(LIMITS);
    let (r, _) = run(&m, &events, 200);
    let t = &r.threads[0];
    assert_eq!(t.busy_units, 200);
    assert_eq!(dominant(&r, 0).as_deref(), Some("L2-mem read"));
    assert!(
        (t.estimated_units - 400.0).abs() < 1e-9,
        "{}",
        t.estimated_units
    );
    let d = &t.dominance[channel(&r, "L2-mem read")];
    assert!((d.added_units - 200.0).abs() < 1e-9);
    assert_eq!(t.peak_units, 0);

    // Memory four times faster: need 100; the L1 read path (8 B/unit, 800 B → 100) ties,
    // and core-L1 is now the slowest at 2 B/unit (need 400).
    let m = model(
        r#"
[bandwidth.paths.core-L1]
read_gbs = 2.0
[bandwidth.paths.L1-L2]
read_gbs = 64.0
[bandwidth.paths.L2-mem]
read_gbs = 64.0
"#,
    );
    let (r, _) = run(&m, &events, 200);
    assert_eq!(dominant(&r, 0).as_deref(), Some("core-L1 read"));
    assert!((r.threads[0].estimated_units - 400.0).abs() < 1e-9);

    // Every limit above the demand: the thread runs at peak.
    let m = model(
        r#"
[bandwidth.paths.L2-mem]
read_gbs = 1000.0
"#,
    );
    let (r, _) = run(&m, &events, 200);
    assert_eq!(dominant(&r, 0), None);
    assert_eq!(r.threads[0].peak_units, 200);
    assert!((r.threads[0].estimated_units - 200.0).abs() < 1e-9);
}

#[test]
fn flops_are_the_alu_path() {
    // 600 FLOPs in 200 instructions on a 1 FLOP/cycle ALU: 600 units, ALU dominant.
    let m = model("flops_per_cycle = 1.0\n");
    let events = [at(
        0,
        0,
        Event::Advance {
            units: 200,
            flops: 600,
        },
    )];
    let (r, _) = run(&m, &events, 200);
    assert_eq!(dominant(&r, 0).as_deref(), Some("ALU flops"));
    assert!((r.threads[0].estimated_units - 600.0).abs() < 1e-9);
}

#[test]
fn flops_of_an_advance_are_spread_over_the_windows_its_units_cover() {
    // A loop body of 1,500 FLOPs in 2,700 instructions, twenty times, on a 1 FLOP/cycle ALU
    // with W = 200: 0.56 FLOPs per unit everywhere, below the limit. All of an advance's
    // FLOPs in its first window would be 7.5 per unit there and make the ALU dominant.
    let m = model("flops_per_cycle = 1.0\n");
    let events: Vec<_> = (0..20)
        .map(|i| {
            at(
                i * 2700,
                0,
                Event::Advance {
                    units: 2700,
                    flops: 1500,
                },
            )
        })
        .collect();
    let (r, _) = run(&m, &events, 200);
    let t = &r.threads[0];
    assert_eq!(dominant(&r, 0), None);
    assert_eq!(t.busy_units, 54_000);
    assert!(
        (t.estimated_units - 54_000.0).abs() < 1e-9,
        "{}",
        t.estimated_units
    );
    let alu = r
        .series
        .iter()
        .position(|s| s.label() == "ALU flops")
        .expect("ALU series");
    let curve = &t.curves[alu];
    assert_eq!(curve.volume, 30_000);
    // 1,500 × 200 / 2,700 = 111.1 per full window, a few more in the window that ends an
    // advance.
    let max = curve.steps().iter().map(|&(v, _)| v).max().unwrap_or(0);
    assert!((111..=125).contains(&max), "max {max} FLOPs per window");
}

#[test]
fn flops_of_a_long_advance_are_spread_evenly_over_its_windows() {
    // A register-only loop recorded as one advance: 230 M units and 80 M FLOPs, W = 200, so
    // 69.57 FLOPs per window. Rounding each window down and leaving the rest to the last one
    // put 644 k FLOPs into that window (a 28,979 GFLOP/s ALU bottleneck in a review); each
    // window must take 69 or 70, and a second thread with another rate must not change it.
    let m = model("flops_per_cycle = 1.0\n");
    let events = vec![
        at(
            0,
            0,
            Event::Advance {
                units: 230_000_000,
                flops: 80_000_000,
            },
        ),
        at(
            0,
            1,
            Event::Advance {
                units: 100_000_030,
                flops: 30_000_000,
            },
        ),
    ];
    let (r, _) = run(&m, &events, 200);
    assert_eq!(dominant(&r, 0), None);
    let alu = r
        .series
        .iter()
        .position(|s| s.label() == "ALU flops")
        .expect("ALU series");
    for (thread, total, most) in [(0, 80_000_000, 70), (1, 30_000_000, 60)] {
        let curve = &r.threads[thread].curves[alu];
        assert_eq!(curve.volume, total, "thread {thread}");
        let max = curve.steps().iter().map(|&(v, _)| v).max().unwrap_or(0);
        assert!(max <= most, "thread {thread}: max {max} FLOPs per window");
    }
}

#[test]
fn merge_point_slows_every_user_by_the_same_factor() {
    // Per-core memory limit 100 B/unit (not binding), total 16 B/unit. Thread 0 reads 50
    // lines (3200 B), thread 1 reads 10 lines (640 B) in the same 200-unit window: the
    // summed demand 3840 B needs 240 units, so both threads are slowed by 240/200 = 1.2 —
    // each gets bandwidth in proportion to its demand.
    let m = model(
        r#"
[bandwidth.paths.L2-mem]
read_gbs = 100.0
total_read_gbs = 16.0
"#,
    );
    let mut events = burst(0, 0, 1 << 20, 50, 200);
    events.extend(burst(1, 0, 2 << 20, 10, 200));
    // A third participant-free phase: thread 1 computes alone later, unaffected.
    events.push(at(
        200,
        1,
        Event::Advance {
            units: 200,
            flops: 0,
        },
    ));
    let (r, _) = run(&m, &events, 200);
    let total = channel(&r, "L2-mem read (total)");
    for t in 0..2 {
        let th = &r.threads[t];
        assert_eq!(dominant(&r, t).as_deref(), Some("L2-mem read (total)"));
        assert_eq!(th.dominance[total].windows, 1, "thread {t}");
        assert!(
            (th.dominance[total].units - 240.0).abs() < 1e-9,
            "thread {t}"
        );
    }
    // Thread 1's second window has no memory demand: at peak.
    assert_eq!(r.threads[1].peak_units, 200);
    assert!((r.threads[1].estimated_units - 440.0).abs() < 1e-9);
    // The demand curve of the merge point saw 3840 B in one window.
    let demand = &r.demand[r.channels[total].series];
    assert_eq!(demand.volume, 3840);
    assert_eq!(r.merge_dominance[total].volume, 3840);
    assert_eq!(r.merge_dominance[total].units, 200);
    // No barrier: one segment, the slower thread (440) decides.
    assert_eq!(r.program.segments, 1);
    assert!((r.program.estimated_units - 440.0).abs() < 1e-9);
}

#[test]
fn created_and_joined_threads_run_after_each_other() {
    // Thread 0 runs 100 units, creates thread 1, waits for it (300 units) and runs 200 more:
    // no barrier, but the program takes 100 + 300 + 200. Taking the longest thread of the
    // segment, as before thread creation and joins were ordered, gives 300.
    let m = model(LIMITS);
    let adv = |units| Event::Advance { units, flops: 0 };
    let events = [
        at(0, 0, adv(100)),
        at(100, 0, Event::ThreadCreate { child: 1 }),
        at(100, 1, Event::ThreadStart),
        at(100, 1, adv(300)),
        at(400, 1, Event::ThreadExit),
        at(400, 0, Event::ThreadJoin { child: 1 }),
        at(400, 0, adv(200)),
    ];
    let (r, _) = run(&m, &events, 100);
    assert_eq!(r.program.segments, 1);
    assert!(
        (r.program.peak_units - 600.0).abs() < 1e-9,
        "{:?}",
        r.program
    );
    assert!((r.program.estimated_units - 600.0).abs() < 1e-9);
    // A thread that is created but never joined still starts at its creation: thread 1 ends
    // at 100 + 300, after thread 0's 100 + 50.
    let events = [
        at(0, 0, adv(100)),
        at(100, 0, Event::ThreadCreate { child: 1 }),
        at(100, 1, adv(300)),
        at(100, 0, adv(50)),
    ];
    let (r, _) = run(&m, &events, 100);
    assert!(
        (r.program.peak_units - 400.0).abs() < 1e-9,
        "{:?}",
        r.program
    );
}

#[test]
fn barriers_join_threads_per_segment() {
    // Segment 1: thread 0 runs 200 units, thread 1 runs 400. Segment 2 (after the barrier
    // left at 400): thread 0 runs 600, thread 1 nothing. Program: max(200, 400) + 600.
    // (Counting the window after the barrier into the first segment would give 800.)
    let m = model(LIMITS);
    let adv = |units| Event::Advance { units, flops: 0 };
    let enter = Event::BarrierEnter {
        barrier: 1,
        participants: 2,
    };
    let leave = Event::BarrierLeave { barrier: 1 };
    let events = [
        at(0, 0, adv(200)),
        at(0, 1, adv(400)),
        at(200, 0, enter),
        at(400, 1, enter),
        at(400, 0, leave),
        at(400, 0, adv(600)),
        at(400, 1, leave),
    ];
    let (r, _) = run(&m, &events, 200);
    assert_eq!(r.program.segments, 2);
    assert!(
        (r.program.estimated_units - 1000.0).abs() < 1e-9,
        "{:?}",
        r.program
    );
    assert!((r.program.peak_units - 1000.0).abs() < 1e-9);
    assert_eq!(r.threads[0].busy_units, 800);
    assert_eq!(r.threads[1].busy_units, 400);
}

#[test]
fn combined_limit_counts_both_directions() {
    // Memory: 100 B/unit each way, but only 16 B/unit both ways together. 100 line loads in
    // 200 units: 6400 B read → the combined limit needs 400 units and dominates.
    let m = model(
        r#"
[bandwidth.paths.L2-mem]
read_gbs = 100.0
write_gbs = 100.0
combined_gbs = 16.0
"#,
    );
    let (r, _) = run(&m, &burst(0, 0, 1 << 20, 100, 200), 200);
    assert_eq!(dominant(&r, 0).as_deref(), Some("L2-mem read+write"));
    assert!((r.threads[0].estimated_units - 400.0).abs() < 1e-9);
    let both = r.channels[channel(&r, "L2-mem read+write")].series;
    assert_eq!(r.threads[0].curves[both].volume, 6400);
}

#[test]
fn first_touches_of_pages_cost_page_faults() {
    // 100 ns per fault at 1 GHz × 1 IPC: 100 units each, added to the window's time.
    let m = model("page_fault_ns = 100.0\n");
    let load = |addr| Event::Access(acc(AccessKind::Load, addr, 8));
    let adv = |units| Event::Advance { units, flops: 0 };
    let big = 0x4000_0000u64;
    let events = [
        // Window 0: three lines in two pages: 2 faults.
        at(0, 0, load(0x10_0000)),
        at(0, 0, load(0x10_0040)),
        at(0, 0, load(0x10_1000)),
        at(0, 0, adv(200)),
        // Window 1: the same pages again (one line evicted meanwhile is no new fault).
        at(200, 0, load(0x10_0000)),
        at(200, 0, load(0x10_1008)),
        at(200, 0, adv(200)),
        // A 256 KiB block touched, freed, allocated again and touched: its page faults twice.
        at(
            400,
            0,
            Event::Alloc {
                addr: big,
                size: 256 << 10,
                site: None,
                align: None,
            },
        ),
        at(400, 0, Event::Access(acc(AccessKind::Store, big, 8))),
        at(400, 0, Event::Free { addr: big }),
        at(
            400,
            0,
            Event::Alloc {
                addr: big,
                size: 256 << 10,
                site: None,
                align: None,
            },
        ),
        at(400, 0, Event::Access(acc(AccessKind::Store, big + 64, 8))),
        at(400, 0, adv(200)),
    ];
    let (r, _) = run(&m, &events, 200);
    let t = &r.threads[0];
    assert_eq!(t.faults, 4);
    assert!((t.fault_units - 400.0).abs() < 1e-9);
    assert!(
        (t.estimated_units - (600.0 + 400.0)).abs() < 1e-9,
        "{}",
        t.estimated_units
    );
    assert!((r.program.estimated_units - 1000.0).abs() < 1e-9);
}

#[test]
fn barriers_and_forks_cost_the_models_synchronization_time() {
    // 50 ns per barrier and 30 ns per fork at 1 GHz x 1 IPC: 50 and 30 units for each thread
    // that passes or forks, added to the window's time (until 2026-11-28 they cost nothing,
    // and code of many short regions was estimated faster than it runs).
    let m = model("barrier_ns = 50.0\nregion_ns = 30.0\n");
    let adv = |units| Event::Advance { units, flops: 0 };
    // Both threads pass a barrier at `time` (enter, then leave).
    let barrier = |events: &mut Vec<_>, time| {
        for t in 0..2 {
            events.push(at(
                time,
                t,
                Event::BarrierEnter {
                    barrier: 7,
                    participants: 2,
                },
            ));
        }
        for t in 0..2 {
            events.push(at(time, t, Event::BarrierLeave { barrier: 7 }));
        }
    };
    // A region as the recorders write it: the fork, a barrier right after it (the members
    // start no earlier than the fork: the fork's time, not charged again), the work, the
    // barrier at its end.
    let mut events = Vec::new();
    for t in 0..2 {
        events.push(at(0, t, Event::RegionBegin { region: 1, team: 2 }));
    }
    barrier(&mut events, 0);
    for t in 0..2 {
        events.push(at(0, t, adv(100)));
    }
    barrier(&mut events, 100);
    for t in 0..2 {
        events.push(at(100, t, adv(100)));
    }
    let (r, _) = run(&m, &events, 200);
    for t in &r.threads {
        assert_eq!(t.sync_events, 2, "{t:?}");
        assert!((t.sync_units - 80.0).abs() < 1e-9, "{t:?}");
        assert!((t.estimated_units - 280.0).abs() < 1e-9, "{t:?}");
    }
    // Without the figures, nothing is charged.
    let (r, _) = run(&model("page_fault_ns = 1.0\n"), &events, 200);
    assert!(r
        .threads
        .iter()
        .all(|t| t.sync_events == 0 && t.sync_units == 0.0));
    // A team of one thread and a barrier of one: nothing either.
    let alone = [
        at(0, 0, Event::RegionBegin { region: 1, team: 1 }),
        at(
            0,
            0,
            Event::BarrierEnter {
                barrier: 7,
                participants: 1,
            },
        ),
        at(0, 0, Event::BarrierLeave { barrier: 7 }),
        at(0, 0, adv(100)),
    ];
    let (r, _) = run(&m, &alone, 200);
    assert_eq!(r.threads[0].sync_events, 0);
    // A barrier alone in the last window is charged too (it was dropped with the window).
    let mut last = vec![at(0, 0, adv(200)), at(0, 1, adv(200))];
    barrier(&mut last, 200);
    let (r, _) = run(&m, &last, 200);
    for t in &r.threads {
        assert_eq!(t.sync_events, 1, "{t:?}");
        assert!((t.estimated_units - 250.0).abs() < 1e-9, "{t:?}");
    }
}

#[test]
fn shared_issue_width_slows_concurrent_threads() {
    // Both cores together issue 1.2 instructions per cycle (1 alone): two threads busy in the
    // same window need 400 / 1.2 units each; a thread running alone is not slowed.
    let m = model("ipc_total = 1.2\n");
    let adv = |units| Event::Advance { units, flops: 0 };
    let events = [at(0, 0, adv(200)), at(0, 1, adv(200)), at(200, 0, adv(200))];
    let (r, _) = run(&m, &events, 200);
    for t in 0..2 {
        assert_eq!(
            dominant(&r, t).as_deref(),
            Some("issue instructions (total)")
        );
    }
    assert!((r.threads[1].estimated_units - 400.0 / 1.2).abs() < 1e-9);
    assert!((r.threads[0].estimated_units - (400.0 / 1.2 + 200.0)).abs() < 1e-9);
    assert_eq!(r.threads[0].peak_units, 200);
}

#[test]
fn long_advances_fill_every_window() {
    // One advance of 1,000,000 units from time 100 with W = 200: 5001 windows touched.
    let m = model(LIMITS);
    let events = [at(
        100,
        0,
        Event::Advance {
            units: 1_000_000,
            flops: 0,
        },
    )];
    let (r, _) = run(&m, &events, 200);
    let t = &r.threads[0];
    assert_eq!(t.busy_units, 1_000_000);
    assert_eq!(t.windows, 5001);
    assert_eq!(t.curves[0].units, 5001 * 200);
}

#[test]
fn hostile_sizes_neither_hang_nor_panic() {
    // A final advance of 2^60 units and a freed block of 2^62 bytes: bulk windows, bounded
    // page walks.
    let m = model("page_fault_ns = 1.0\n");
    let events = [
        at(
            0,
            0,
            Event::Alloc {
                addr: 0,
                size: 1 << 62,
                site: None,
                align: None,
            },
        ),
        at(0, 0, Event::Access(acc(AccessKind::Store, 4096, 8))),
        at(0, 0, Event::Free { addr: 0 }),
        at(
            0,
            0,
            Event::Advance {
                units: 1 << 60,
                flops: u64::MAX,
            },
        ),
    ];
    let (r, _) = run(&m, &events, 200);
    assert_eq!(r.threads[0].busy_units, 1 << 60);
    assert_eq!(r.threads[0].faults, 1);
}

#[test]
fn two_threads_on_one_core_are_refused() {
    let m = model(LIMITS);
    let placement: BTreeMap<u32, u32> = [(0, 0), (1, 0)].into_iter().collect();
    let e = BandwidthTimeline::new(
        &m,
        &placement,
        TimeUnit::Instructions,
        BandwidthConfig::default(),
    )
    .err()
    .expect("shared core refused");
    assert!(e.to_string().contains("one core per thread"), "{e}");
}

/// One random event of a thread: an access or an advance.
#[derive(Debug, Clone)]
enum Step {
    Access(bool, u64),
    Advance(u64, u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (any::<bool>(), 0u64..64).prop_map(|(w, line)| Step::Access(w, (1 << 20) + line * 48)),
        (1u64..40, 0u64..30).prop_map(|(u, f)| Step::Advance(u, f)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Thesis §4.3.1: the area under every curve (Σ value × time units / W) equals the bytes
    /// (FLOPs) moved, and those equal the engine's counters.
    #[test]
    fn curve_area_equals_volume(
        t0 in prop::collection::vec(step(), 1..300),
        t1 in prop::collection::vec(step(), 1..300),
        window in prop::sample::select(vec![1u64, 7, 16, 200]),
    ) {
        let m = model(LIMITS);
        // Per-thread clocks, then the global (time, thread, program order) merge.
        let mut events = Vec::new();
        for (thread, steps) in [(0u32, &t0), (1u32, &t1)] {
            let mut clock = 0;
            for (seq, s) in steps.iter().enumerate() {
                let e = match *s {
                    Step::Access(write, addr) => Event::Access(acc(
                        if write { AccessKind::Store } else { AccessKind::Load },
                        addr,
                        8,
                    )),
                    Step::Advance(units, flops) => Event::Advance { units, flops },
                };
                events.push((clock, thread, seq, e));
                if let Step::Advance(units, _) = *s {
                    clock += units;
                }
            }
        }
        events.sort_by_key(|&(time, thread, seq, _)| (time, thread, seq));
        let events: Vec<_> = events.into_iter().map(|(time, thread, _, event)| at(time, thread, event)).collect();
        let (r, sim) = run(&m, &events, window);
        for (ti, th) in r.threads.iter().enumerate() {
            prop_assert_eq!(th.busy_units, sim.threads[ti].time_units);
            for (s, curve) in th.curves.iter().enumerate() {
                let area: u128 = curve.steps().iter().map(|&(v, u)| v as u128 * u as u128).sum();
                prop_assert_eq!(area, curve.volume as u128 * window as u128, "series {}", s);
                let expected = match r.series[s].path_index {
                    Some(j) => {
                        let b = sim.paths[j].per_core[ti];
                        if r.series[s].direction == cachescope_sim::bandwidth::Direction::Read { b.read } else { b.write }
                    }
                    None => sim.threads[ti].flops,
                };
                prop_assert_eq!(curve.volume, expected, "series {}", r.series[s].label());
            }
            // The breakdown adds up: peak time plus dominated windows' time is the estimate.
            let dominated: f64 = th.dominance.iter().map(|d| d.units).sum();
            prop_assert!((th.peak_units as f64 + dominated + th.fault_units - th.estimated_units).abs() < 1e-6 * th.estimated_units.max(1.0));
            prop_assert!(th.estimated_units + 1e-9 >= th.busy_units as f64);
        }
    }
}
