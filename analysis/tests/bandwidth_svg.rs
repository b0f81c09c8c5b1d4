//! The bandwidth analysis and its plots on a hand-made timeline: what the summary names as
//! dominant, and for the plots which files are written and that each names
//! what a reader needs (titles, axes, legends, limits, bars), and that empty or idle runs and
//! unwritable directories are handled without panics.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use cachescope_analysis::bandwidth::{analyse, svg, BandwidthAnalysis};
use cachescope_analysis::symbols::Symbolizer;
use cachescope_schema::{Access, AccessKind, Event, TimeUnit, TimedEvent};
use cachescope_sim::bandwidth::BandwidthConfig;
use cachescope_sim::{replay_exact_with_bandwidth, MachineModel};

/// Two cores, private 1 KiB L1, shared 64 KiB L2, 1 GHz × 1 instruction per cycle (a limit
/// of N GB/s is N bytes per time unit); memory reads limited to 16 GB/s per core and 20 GB/s
/// in total, one FLOP per cycle.
fn model() -> MachineModel {
    let text = r#"
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
flops_per_cycle = 1.0
[bandwidth.paths.L2-mem]
read_gbs = 16.0
total_read_gbs = 20.0
"#;
    MachineModel::from_toml(text, "hand").expect("valid model")
}

/// One burst of a thread: lines loaded (each a new line, so read from memory), then an
/// advance of `units` time units with `flops` FLOPs.
type Burst = (u64, u64, u64);

/// One thread's bursts, each starting where the previous one ended.
type Program<'a> = (u32, &'a [Burst]);

/// The events of `programs` in global order.
fn events(programs: &[Program<'_>]) -> Vec<TimedEvent> {
    let mut all = Vec::new();
    for &(thread, bursts) in programs {
        let mut clock = 0;
        let mut addr = (u64::from(thread) + 1) << 24;
        let mut seq = 0;
        let mut push = |time, event, all: &mut Vec<_>| {
            all.push((time, thread, seq, event));
            seq += 1;
        };
        for &(lines, units, flops) in bursts {
            for _ in 0..lines {
                let access = Access {
                    kind: AccessKind::Load,
                    size: 8,
                    addr,
                    pc: None,
                };
                push(clock, Event::Access(access), &mut all);
                addr += 64;
            }
            push(clock, Event::Advance { units, flops }, &mut all);
            clock += units;
        }
    }
    // Global order: time, then thread, then program order.
    all.sort_by_key(|&(time, thread, seq, _)| (time, thread, seq));
    all.into_iter()
        .map(|(time, thread, _, event)| TimedEvent {
            time,
            thread,
            event,
        })
        .collect()
}

/// Simulates `events` with a window of 200 units and analyses the timeline.
fn analysis(events: &[TimedEvent]) -> BandwidthAnalysis {
    let m = model();
    let placement: BTreeMap<u32, u32> = (0..m.cores).map(|c| (c, c)).collect();
    let cfg = BandwidthConfig {
        window: 200,
        sample_period: 1,
    };
    let (_, report) =
        replay_exact_with_bandwidth(&m, &placement, TimeUnit::Instructions, events, cfg)
            .expect("bandwidth model");
    analyse(&report, "hand", &mut Symbolizer::new([]), Path::new("/"))
}

/// Window 0: thread 0 reads 100 lines (32 B/unit: its per-core limit dominates), thread 1
/// reads 10 (alone fine, but the sum needs 35.2 B/unit > 20: the merge point dominates it).
/// Window 1: both under every limit (peak). Window 2: thread 1 computes 600 FLOPs (the ALU
/// dominates).
fn two_threads() -> BandwidthAnalysis {
    events_analysis(&[
        (0, &[(100, 200, 0), (5, 200, 0)]),
        (1, &[(10, 200, 0), (30, 200, 0), (0, 200, 600)]),
    ])
}

fn events_analysis(programs: &[Program<'_>]) -> BandwidthAnalysis {
    analysis(&events(programs))
}

fn read(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn assert_contains(svg: &str, file: &str, needles: &[&str]) {
    for n in needles {
        assert!(svg.contains(n), "{file} lacks {n:?}");
    }
}

#[test]
fn plots_name_everything_a_reader_needs() {
    let a = two_threads();
    // The scenario is what the comments say: both limits and the ALU dominate somewhere,
    // and some windows run at peak.
    let channels: Vec<&str> = a.total.parts.iter().map(|p| p.channel.as_str()).collect();
    assert_eq!(
        channels,
        ["L2-mem read", "L2-mem read (total)", "ALU flops"],
        "{:#?}",
        a.total
    );
    assert!(a.total.peak_seconds > 0.0);

    let tmp = tempfile::tempdir().expect("tempdir");
    // A directory that does not exist yet is created.
    let dir = tmp.path().join("plots");
    let files = svg::write_all(&a, &dir).expect("plots written");

    // One curve per series that moved anything, then the bars.
    let mut names: Vec<String> = files
        .iter()
        .map(|f| {
            assert_eq!(f.parent(), Some(dir.as_path()));
            f.file_name()
                .and_then(|n| n.to_str())
                .expect("file name")
                .to_string()
        })
        .collect();
    assert_eq!(names.last().map(String::as_str), Some("dominance.svg"));
    names.sort();
    let mut on_disk: Vec<String> = fs::read_dir(&dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    assert_eq!(names, on_disk);
    for expected in [
        "curve-core-L1-read.svg",
        "curve-L1-L2-read.svg",
        "curve-L2-mem-read.svg",
        "curve-ALU-flops.svg",
        "dominance.svg",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    // Nothing was written anywhere: no write curves.
    assert!(!names.iter().any(|n| n.contains("write")), "{names:?}");

    for name in &names {
        let svg = read(&dir, name);
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{name}"
        );
        assert!(svg.len() < 1 << 20, "{name}: {} bytes", svg.len());
        // Numbers are rounded for people, never printed as raw floats.
        assert!(
            !svg.contains("00000000") && !svg.contains("99999999"),
            "{name} has an unrounded number"
        );
    }

    let curve = read(&dir, "curve-L2-mem-read.svg");
    assert_contains(
        &curve,
        "curve-L2-mem-read.svg",
        &[
            // Titles: the series, who, the limit and its cost.
            "L2-mem read: bandwidth requirement",
            "L2-mem read, thread 0 — limit 16 GB/s per core: above it",
            "L2-mem read, thread 1 — limit 16 GB/s per core: never exceeded",
            "L2-mem read, all threads (merge point) — limit 20 GB/s total: above it",
            "T_L",
            "dominant",
            // Axes.
            "run time, reordered by requirement [",
            "bandwidth [GB/s]",
            // Legend.
            "requirement curve",
            "limit L",
            "above L: V_L, costs T_L alone",
            "L dominates: V_L^Dom, costs the dominant time",
            // Limit labels on the lines.
            "per-core limit 16 GB/s",
            "total limit 20 GB/s (all cores)",
            // The curve, the hatched and the grey areas.
            "<polyline",
            "<polygon",
            "url(#hatch)",
        ],
    );

    let alu = read(&dir, "curve-ALU-flops.svg");
    assert_contains(
        &alu,
        "curve-ALU-flops.svg",
        &[
            "ALU flops, thread 1 — limit 1 GFLOP/s per core: above it",
            "FLOP rate [GFLOP/s]",
            "per-core limit 1 GFLOP/s",
            "<polyline",
        ],
    );
    // Thread 0 never computes: its panel says so instead of drawing a flat line.
    assert_contains(&alu, "curve-ALU-flops.svg", &["thread 0 executed no FLOPs"]);

    // No limit on L1 reads: curves without limit lines, and no limit in the legend.
    let l1 = read(&dir, "curve-core-L1-read.svg");
    assert_contains(
        &l1,
        "curve-core-L1-read.svg",
        &["core-L1 read, thread 0 — no per-core limit", "<polyline"],
    );
    assert!(!l1.contains("limit L<") && !l1.contains("V_L"), "{l1}");

    let bars = read(&dir, "dominance.svg");
    assert_contains(
        &bars,
        "dominance.svg",
        &[
            "Time by dominant limit — program estimated",
            "at peak",
            // One label per bar.
            "thread 0",
            "thread 1",
            "all threads",
            // Legend: every limit that dominated, the peak segment, the marker.
            "\nL2-mem read\n",
            "L2-mem read (total)",
            "ALU flops",
            "no bottleneck (peak)",
            "program estimate",
            "time [µs]",
            "<rect",
        ],
    );
}

#[test]
fn the_dominant_data_path_is_never_the_alu() {
    // Thread 1's 1,000 FLOPs in 200 units need five times the ALU's rate (800 units added);
    // the memory reads add 200 (thread 0's per-core limit) and less at the merge point.
    let a = events_analysis(&[
        (0, &[(100, 200, 0), (5, 200, 0)]),
        (1, &[(10, 200, 0), (30, 200, 0), (0, 200, 1000)]),
    ]);
    let added = |name: &str| {
        a.total
            .parts
            .iter()
            .find(|p| p.channel == name)
            .map_or(0.0, |p| p.added_seconds)
    };
    assert!(
        added("ALU flops") > added("L2-mem read") && added("L2-mem read") > 0.0,
        "{:#?}",
        a.total
    );
    assert_eq!(a.program.dominant.as_deref(), Some("ALU flops"));
    assert_eq!(a.program.dominant_path.as_deref(), Some("L2-mem read"));
}

#[test]
fn run_without_windows_writes_only_the_bars() {
    // No events: the model's threads exist but never ran a window.
    let a = analysis(&[]);
    assert!(a.series.iter().all(|s| s.demand.volume == 0));
    let tmp = tempfile::tempdir().expect("tempdir");
    // An earlier run's curves of paths this run has no data for (one of them made read-only
    // by the user), and files of the user's, one named like a curve.
    let earlier = svg::write_all(&two_threads(), tmp.path()).expect("plots");
    let stale: Vec<_> = earlier
        .iter()
        .filter(|p| p.to_string_lossy().contains("curve-"))
        .cloned()
        .collect();
    assert!(stale.len() >= 2, "{earlier:?}");
    use std::os::unix::fs::PermissionsExt;
    let kept = &stale[0];
    std::fs::set_permissions(kept, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let notes = tmp.path().join("curve-notes.txt");
    std::fs::write(&notes, "mine").expect("write");
    let own = tmp.path().join("curve-mine.svg");
    std::fs::write(&own, "<svg/>").expect("write");
    let files = svg::write_all(&a, tmp.path()).expect("plots written");
    assert_eq!(files, vec![tmp.path().join("dominance.svg")]);
    for p in &stale[1..] {
        assert!(!p.exists(), "an earlier run's plot is left behind: {p:?}");
    }
    assert!(kept.exists(), "a read-only plot was removed");
    assert!(notes.exists(), "a file the plots are not was removed");
    assert!(own.exists(), "the user's own curve-*.svg was removed");
    let bars = read(tmp.path(), "dominance.svg");
    assert_contains(
        &bars,
        "dominance.svg",
        &["thread 0", "all threads", "</svg>"],
    );

    // Nothing at all: no threads, no series.
    let mut empty = a;
    empty.threads.clear();
    empty.series.clear();
    empty.total = Default::default();
    let files = svg::write_all(&empty, tmp.path()).expect("plots written");
    assert_eq!(files, vec![tmp.path().join("dominance.svg")]);
    let bars = read(tmp.path(), "dominance.svg");
    assert_contains(&bars, "dominance.svg", &["no threads", "</svg>"]);
}

#[test]
fn idle_threads_draw_peak_bars_and_no_curves() {
    // Only computation without FLOPs: every series has zero volume, all time is at peak.
    let a = events_analysis(&[(0, &[(0, 400, 0)]), (1, &[(0, 200, 0)])]);
    assert_eq!(a.threads.len(), 2);
    let tmp = tempfile::tempdir().expect("tempdir");
    let files = svg::write_all(&a, tmp.path()).expect("plots written");
    assert_eq!(files, vec![tmp.path().join("dominance.svg")]);
    let bars = read(tmp.path(), "dominance.svg");
    assert_contains(
        &bars,
        "dominance.svg",
        &[
            "thread 0",
            "thread 1",
            "all threads",
            "no bottleneck (peak)",
        ],
    );
}

#[test]
fn unwritable_directory_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // A directory below a regular file cannot be created.
    let file = tmp.path().join("not-a-dir");
    fs::write(&file, b"x").expect("write file");
    let dir = file.join("plots");
    let err = svg::write_all(&two_threads(), &dir).expect_err("cannot create the directory");
    assert_eq!(err.path, dir);
    assert!(!err.reason.is_empty());
    assert!(err.to_string().contains("not-a-dir"), "{err}");
}
