//! `cachescope bandwidth` as a user runs it: output forms, determinism, bad input.

mod support;

use std::path::{Path, PathBuf};

use support::{assert_exit_2, cli as cachescope, stderr};

/// A barrier-phased 2D Jacobi trace with 2 threads.
fn stencil(dir: &Path) -> PathBuf {
    let path = dir.join("stencil.cstrace");
    let o = cachescope(&[
        "trace",
        "gen",
        "stencil",
        "-o",
        path.to_str().unwrap(),
        "--threads",
        "2",
        "--size",
        "256K",
        "--iterations",
        "3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    path
}

#[test]
fn summary_json_and_plots_are_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let t = stencil(dir.path());
    let t = t.to_str().unwrap();
    let o = cachescope(&["bandwidth", t]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("one window"), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    for needle in [
        "Program: estimated",
        "Time per thread",
        "all threads",
        "L2-mem read",
    ] {
        assert!(text.contains(needle), "{needle:?} missing in\n{text}");
    }
    // The per-thread table is in a unit its times read in (a short run in seconds with four
    // decimals was all zeros).
    let estimated: f64 = text
        .lines()
        .find(|l| l.trim_start().starts_with("estimated"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no estimated row in\n{text}"));
    assert!(
        (1.0..1000.0).contains(&estimated),
        "thread 0's estimate {estimated} in\n{text}"
    );
    // Same trace and model: byte-identical JSON and plots, also with another window.
    let run = |name: &str, window: &str| -> (Vec<u8>, PathBuf) {
        let json = dir.path().join(format!("{name}.json"));
        let svg = dir.path().join(format!("{name}-svg"));
        let o = cachescope(&[
            "bandwidth",
            t,
            "--window",
            window,
            "--json",
            json.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        // The summary still on stdout with `--json FILE`.
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("Program: estimated"), "{text}");
        (std::fs::read(&json).unwrap(), svg)
    };
    let (a, svg_a) = run("a", "200");
    let (b, svg_b) = run("b", "200");
    assert_eq!(a, b, "same input, different JSON");
    for f in ["dominance.svg", "curve-L2-mem-read.svg"] {
        assert_eq!(
            std::fs::read(svg_a.join(f)).unwrap(),
            std::fs::read(svg_b.join(f)).unwrap(),
            "{f} differs"
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
    assert_eq!(v["window"], 200);
    assert_eq!(v["time_unit"], "instructions");
    // The window changes the curves, not the volumes.
    let (c, _) = run("c", "50");
    let w: serde_json::Value = serde_json::from_slice(&c).unwrap();
    assert_eq!(w["window"], 50);
    for (s, u) in v["series"]
        .as_array()
        .unwrap()
        .iter()
        .zip(w["series"].as_array().unwrap())
    {
        assert_eq!(
            s["demand"]["volume"], u["demand"]["volume"],
            "{}",
            s["label"]
        );
    }
}

#[test]
fn the_parallel_engine_gives_the_same_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let t = stencil(dir.path());
    let t = t.to_str().unwrap();
    let run = |name: &str, engine: &[&str]| -> Vec<u8> {
        let json = dir.path().join(format!("{name}.json"));
        let mut args = vec!["bandwidth", t, "--json", json.to_str().unwrap()];
        args.extend_from_slice(engine);
        let o = cachescope(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read(&json).unwrap()
    };
    let exact = run("exact", &[]);
    assert!(!exact.is_empty());
    for (name, engine) in [
        ("p1", &["--engine", "parallel", "--threads", "1"][..]),
        (
            "p2",
            &["--engine", "parallel", "--threads", "2", "--slack", "100"][..],
        ),
    ] {
        assert!(run(name, engine) == exact, "{name}: the analysis differs");
    }
    assert_exit_2(
        &cachescope(&["bandwidth", t, "--threads", "2"]),
        "--threads is an option of --engine parallel",
    );
    assert_exit_2(
        &cachescope(&["bandwidth", t, "--slack", "100"]),
        "--slack is an option of --engine parallel",
    );
    assert_exit_2(
        &cachescope(&["bandwidth", t, "--engine", "parallel", "--slack", "0"]),
        "slack",
    );
    // The options are checked before any file is read.
    assert_exit_2(
        &cachescope(&["bandwidth", "/nonexistent/x.cstrace", "--threads", "2"]),
        "--threads is an option of --engine parallel",
    );
}

#[test]
fn a_window_as_long_as_the_run_is_named_in_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let t = stencil(dir.path());
    // Its curves show the run's average spread over a window ten thousand times as long.
    let o = cachescope(&["bandwidth", t.to_str().unwrap(), "--window", "10000000000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: one window covers the whole run (--window 10000000000"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_input_is_exit_2_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let t = stencil(dir.path());
    let t = t.to_str().unwrap();
    // A model without a [bandwidth] section.
    assert_exit_2(
        &cachescope(&["bandwidth", t, "--machine", "cachegrind"]),
        "no [bandwidth] section",
    );
    // A file keeping a preset's name is named by its path too.
    let preset = include_str!("../simulator/presets/ivybridge-4c.toml");
    let cut = preset
        .find("[bandwidth]")
        .expect("the preset has a [bandwidth] section");
    let m = dir.path().join("no-bandwidth.toml");
    std::fs::write(&m, &preset[..cut]).unwrap();
    let ms = m.to_str().unwrap();
    assert_exit_2(
        &cachescope(&["bandwidth", t, "--machine", ms]),
        &format!("--machine {ms}: machine model \"ivybridge-4c\" has no [bandwidth] section"),
    );
    // The range in the message is the one the option takes (`--sample-period 0` was refused
    // as "must be at least 1" while a too large one said "not in 0..=4294967295").
    assert_exit_2(
        &cachescope(&["bandwidth", t, "--window", "0"]),
        "invalid value '0' for '--window <WINDOW>': 0 is not in 1..",
    );
    for period in ["0", "4294967296"] {
        assert_exit_2(
            &cachescope(&["bandwidth", t, "--sample-period", period]),
            &format!("{period} is not in 1..=4294967295"),
        );
    }
    // More threads than cores: the advice is one the command takes (it used to suggest
    // `--map round-robin`, which it then refused).
    let o = cachescope(&["bandwidth", t, "--set", "cores=1"]);
    assert_exit_2(&o, "give --set cores=2");
    assert!(!stderr(&o).contains("round-robin"), "{}", stderr(&o));
    // More threads than any model has cores: no advice that validation would refuse.
    let many = support::gen_trace(
        dir.path(),
        "many.cstrace",
        "stream",
        &["--threads", "65", "--size", "16K"],
    );
    let o = cachescope(&["bandwidth", many.to_str().unwrap()]);
    assert_exit_2(&o, "65 threads and a model has at most 64 cores");
    assert_exit_2(
        &cachescope(&["bandwidth", t, "--set", "bandwidth.ipc=-1"]),
        "bandwidth.ipc",
    );
    // A truncated trace: named, and no output written.
    let bytes = std::fs::read(t).unwrap();
    let cut = dir.path().join("cut.cstrace");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let json = dir.path().join("out.json");
    let o = cachescope(&[
        "bandwidth",
        cut.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_exit_2(&o, "cut.cstrace");
    assert!(!json.exists());
    // Missing file.
    assert_exit_2(
        &cachescope(&["bandwidth", "/nonexistent/x.cstrace"]),
        "x.cstrace",
    );
}

/// Every file in `dir`, by name, with its bytes.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_failing_output_leaves_the_earlier_plots_and_report_as_they_were() {
    // The plots were written one by one before the JSON: a JSON path in a missing directory
    // left the new run's plots over the old ones (and the old curves removed), the old JSON
    // next to them.
    let dir = tempfile::tempdir().unwrap();
    let st = stencil(dir.path());
    let fs = support::gen_trace(
        dir.path(),
        "fs.cstrace",
        "false-sharing",
        &["--threads", "2", "--size", "64K"],
    );
    let plots = dir.path().join("plots");
    let json = dir.path().join("bw.json");
    let o = cachescope(&[
        "bandwidth",
        st.to_str().unwrap(),
        "--svg",
        plots.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (plots_before, json_before) = (snapshot(&plots), std::fs::read(&json).unwrap());
    let missing = dir.path().join("nodir/bw.json");
    let o = cachescope(&[
        "bandwidth",
        fs.to_str().unwrap(),
        "--svg",
        plots.to_str().unwrap(),
        "--json",
        missing.to_str().unwrap(),
    ]);
    assert_exit_2(&o, "nodir");
    assert!(
        snapshot(&plots) == plots_before,
        "the earlier plots changed"
    );
    assert!(
        std::fs::read(&json).unwrap() == json_before,
        "the earlier JSON changed"
    );
    // When every output can be written, all are replaced together.
    let o = cachescope(&[
        "bandwidth",
        fs.to_str().unwrap(),
        "--svg",
        plots.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        snapshot(&plots) != plots_before,
        "the plots were not replaced"
    );
    assert!(
        std::fs::read(&json).unwrap() != json_before,
        "the JSON was not replaced"
    );
}
