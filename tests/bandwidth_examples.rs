//! Bandwidth analysis of the recorded Jacobi examples (naive vs temporally blocked) with 1
//! and 2 threads: memory traffic, runtime estimate, source attribution and plots.
//!
//! The model is the thesis's `ivybridge-4c` (3 MiB shared L2), so N = 1024 (two 8 MiB grids)
//! is far beyond the last level and the replay stays short. The accuracy of the runtime
//! estimate against wall time is a timing measurement: `benches/scripts/bandwidth_accuracy.sh`
//! (docs/bandwidth.md), not a test.

mod support;

use std::path::Path;

use serde_json::Value;
use support::{cachescope, cc, record, run_ok};

/// N, iterations, tile rows B, iterations per tile pass TB (one pass for all 12).
const ARGS_NAIVE: &[&str] = &["1024", "12"];
const ARGS_BLOCKED: &[&str] = &["1024", "12", "16", "12"];

fn analyse(trace: &Path, svg: &Path) -> Value {
    let out = run_ok(
        std::process::Command::new(cachescope())
            .arg("bandwidth")
            .arg(trace)
            .args(["--machine", "ivybridge-4c", "--json", "-", "--svg"])
            .arg(svg),
    );
    serde_json::from_slice(&out.stdout).expect("bandwidth --json prints JSON")
}

/// Bytes over the memory paths (read + write, all threads).
fn memory_bytes(a: &Value) -> u64 {
    a["series"]
        .as_array()
        .expect("series")
        .iter()
        .filter(|s| s["path"].as_str().is_some_and(|p| p.ends_with("-mem")))
        .filter(|s| s["direction"] == "read" || s["direction"] == "write")
        .map(|s| s["demand"]["volume"].as_u64().expect("volume"))
        .sum()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn jacobi_naive_vs_blocked() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let dir = tempfile::tempdir().unwrap();
    let bin = |name: &str| dir.path().join(name);
    for name in ["jacobi_naive", "jacobi_blocked"] {
        let src = examples.join(format!("{name}.c"));
        cc(
            "gcc",
            &[
                "-O2",
                "-g",
                "-fopenmp",
                "-o",
                bin(name).to_str().unwrap(),
                src.to_str().unwrap(),
            ],
        );
    }
    for threads in [1u32, 2] {
        let mut results = Vec::new();
        for (name, args) in [
            ("jacobi_naive", ARGS_NAIVE),
            ("jacobi_blocked", ARGS_BLOCKED),
        ] {
            let trace = bin(&format!("{name}-{threads}.trace"));
            let out = record(&trace, &bin(name), args, threads);
            assert!(out.contains("checksum="), "{out}");
            let svg = bin(&format!("{name}-{threads}-svg"));
            let a = analyse(&trace, &svg);
            check_analysis(&a, name, threads);
            check_plots(&svg, threads);
            results.push(a);
        }
        let (naive, blocked) = (memory_bytes(&results[0]), memory_bytes(&results[1]));
        eprintln!("{threads} thread(s): memory bytes naive {naive}, blocked {blocked}");
        assert!(
            naive >= 4 * blocked,
            "{threads} thread(s): blocked should move >= 4x fewer memory bytes: {naive} vs {blocked}"
        );
    }
}

/// The report's numbers are consistent with each other and with the run.
fn check_analysis(a: &Value, name: &str, threads: u32) {
    let what = format!("{name}, {threads} thread(s)");
    assert_eq!(a["schema"], "cachescope.bandwidth/1");
    assert_eq!(
        a["threads"].as_array().unwrap().len(),
        threads as usize,
        "{what}"
    );
    let p = &a["program"];
    let (peak, est) = (f(&p["peak_seconds"]), f(&p["estimated_seconds"]));
    assert!(
        peak > 0.0 && est >= peak,
        "{what}: peak {peak}, estimate {est}"
    );
    // 12 sweeps of a 1024² grid: at least one barrier segment per sweep.
    assert!(p["segments"].as_u64().unwrap() >= 12, "{what}: {p}");
    // Every thread's breakdown adds up to its estimate.
    for t in a["threads"].as_array().unwrap() {
        let parts: f64 = t["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| f(&p["seconds"]))
            .sum();
        let sum = f(&t["peak_seconds"]) + parts;
        let e = f(&t["estimated_seconds"]);
        assert!((sum - e).abs() <= 1e-9 + 1e-6 * e, "{what}: {sum} vs {e}");
    }
    // The core reads 4 and writes 1 double per grid point and sweep.
    let core_read = a["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == "core-L1 read")
        .map(|s| s["demand"]["volume"].as_u64().unwrap())
        .unwrap();
    let points = 1022u64 * 1022 * 12;
    assert!(core_read >= points * 32, "{what}: core reads {core_read}");
    // Source attribution names the stencil's source file for every dominant limit that has
    // sampled bytes.
    for c in a["attribution"].as_array().unwrap() {
        let top = &c["positions"][0];
        assert!(
            top["file"]
                .as_str()
                .is_some_and(|f| f.ends_with(&format!("{name}.c"))),
            "{what}: {}: {top}",
            c["channel"]
        );
    }
    if name == "jacobi_naive" {
        assert!(
            !a["attribution"].as_array().unwrap().is_empty(),
            "{what}: some limit dominates the naive stencil"
        );
    }
}

/// The plots exist and carry titles, axes, legends and data.
fn check_plots(dir: &Path, threads: u32) {
    let curve = read(&dir.join("curve-L2-mem-read.svg"));
    for needle in [
        "L2-mem read",
        "run time, reordered by requirement [",
        "bandwidth [GB/s]",
        "limit",
    ] {
        assert!(curve.contains(needle), "curve plot lacks {needle:?}");
    }
    assert!(curve.contains("<path") || curve.contains("<polyline"));
    for t in 0..threads {
        assert!(
            curve.contains(&format!("thread {t}")),
            "no panel for thread {t}"
        );
    }
    let bars = read(&dir.join("dominance.svg"));
    assert!(bars.contains("<rect"));
    for needle in ["thread 0", "all threads", "no bottleneck"] {
        assert!(bars.contains(needle), "dominance plot lacks {needle:?}");
    }
}
