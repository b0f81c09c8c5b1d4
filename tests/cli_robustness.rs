//! Failing outputs and out-of-range settings across commands: exit 2 with a message that says
//! what, never a panic, and files that were there before stay as they were.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::{assert_exit_2, cli as cachescope, stderr};

fn gen(dir: &Path, name: &str, workload: &str, size: &str) -> PathBuf {
    support::gen_trace(dir, name, workload, &["--threads", "2", "--size", size])
}

/// `cachescope ARGS` with files limited to 1 KiB (`ulimit -f 1`, SIGXFSZ ignored so that a
/// write past the limit fails with EFBIG like a full disk would).
fn with_file_size_limit(args: &[&str]) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"")
        .arg(support::cachescope())
        .args(args)
        .output()
        .expect("run sh")
}

/// Names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn failing_stdout_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    for args in [
        vec!["simulate", ts],
        vec!["bandwidth", ts],
        vec!["trace", "info", ts],
        vec!["trace", "verify", ts],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = Command::new(support::cachescope())
            .args(&args)
            .stdout(Stdio::from(full))
            .output()
            .unwrap();
        assert_exit_2(&o, "writing to standard output");
    }
}

#[test]
fn outputs_are_replaced_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    let trace_bytes = std::fs::read(&t).unwrap();

    // A report too large for the limit: the old report stays.
    let json = dir.path().join("out.json");
    std::fs::write(&json, "old").unwrap();
    let o = with_file_size_limit(&["simulate", ts, "--json", json.to_str().unwrap()]);
    assert_exit_2(&o, "writing");
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "old");

    // A generated trace too large for the limit: the old trace stays, readable.
    let keep = gen(dir.path(), "keep.cstrace", "stream", "16K");
    let keep_bytes = std::fs::read(&keep).unwrap();
    let o = with_file_size_limit(&[
        "trace",
        "gen",
        "stream",
        "-o",
        keep.to_str().unwrap(),
        "--size",
        "4M",
    ]);
    assert_exit_2(&o, "keep.cstrace");
    assert_eq!(std::fs::read(&keep).unwrap(), keep_bytes);
    assert!(cachescope(&["trace", "verify", keep.to_str().unwrap()])
        .status
        .success());

    // A read-only report is not replaced (renaming over it would need only the directory's
    // permission).
    let protected = dir.path().join("protected.json");
    std::fs::write(&protected, "kept").unwrap();
    std::fs::set_permissions(&protected, std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = cachescope(&["simulate", ts, "--json", protected.to_str().unwrap()]);
    assert_exit_2(&o, "read-only");
    assert_eq!(std::fs::read_to_string(&protected).unwrap(), "kept");
    std::fs::remove_file(&protected).unwrap();

    // `--json` given without a file name takes the trace argument as its file: a trace is
    // never replaced by a report.
    let o = cachescope(&["simulate", "--json", ts, ts]);
    assert_exit_2(&o, "is a cachescope trace");
    assert_eq!(std::fs::read(&t).unwrap(), trace_bytes);

    // No temporary files are left behind by the failed runs.
    assert_eq!(
        listing(dir.path()),
        ["keep.cstrace", "out.json", "t.cstrace"]
    );

    // A successful run replaces the report, with ordinary permissions.
    let o = cachescope(&["simulate", ts, "--json", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["engine"], "exact");
    use std::os::unix::fs::PermissionsExt;
    let new = dir.path().join("new.json");
    let o = cachescope(&["simulate", ts, "--json", new.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mode = std::fs::metadata(&new).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "{mode:o}");
}

#[test]
fn plots_are_replaced_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    let plots = dir.path().join("plots");
    std::fs::create_dir(&plots).unwrap();
    let dominance = plots.join("dominance.svg");

    // Plots too large for the limit: the old plot stays, and no temporary file is left.
    std::fs::write(&dominance, "old").unwrap();
    let o = with_file_size_limit(&["bandwidth", ts, "--svg", plots.to_str().unwrap()]);
    // The error names the plot that could not be written.
    assert_exit_2(&o, "plots/curve-");
    assert!(stderr(&o).contains("File too large"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&dominance).unwrap(), "old");
    assert!(
        listing(&plots).iter().all(|n| !n.ends_with(".partial")),
        "{:?}",
        listing(&plots)
    );

    // A trace where a plot goes is not replaced by the plot.
    std::fs::copy(&t, &dominance).unwrap();
    let o = cachescope(&["bandwidth", ts, "--svg", plots.to_str().unwrap()]);
    assert_exit_2(&o, "is a cachescope trace");
    assert_eq!(
        std::fs::read(&dominance).unwrap(),
        std::fs::read(&t).unwrap()
    );

    // Otherwise every plot is written.
    std::fs::remove_file(&dominance).unwrap();
    let o = cachescope(&["bandwidth", ts, "--svg", plots.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(&dominance).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
}

#[test]
fn thread_mappings_must_name_each_trace_thread_once() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    assert_exit_2(
        &cachescope(&["simulate", ts, "--map", "0:0,0:1,1:1"]),
        "thread 0 is mapped twice (to cores 0 and 1)",
    );
    assert_exit_2(
        &cachescope(&["simulate", ts, "--map", "5:0,0:0,1:1"]),
        "thread 5 is mapped but the trace has no such thread (its threads: 0, 1)",
    );
    assert!(cachescope(&["simulate", ts, "--map", "0:1,1:0"])
        .status
        .success());
}

#[test]
fn model_values_of_the_wrong_kind_name_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    assert_exit_2(
        &cachescope(&["simulate", ts, "--set", "levels.L1.size=-1"]),
        "levels.L1.size=-1: size: -1 is negative",
    );
    assert_exit_2(
        &cachescope(&["simulate", ts, "--set", "cores="]),
        "cores=: invalid type",
    );
    // Positive but far beyond any machine: the estimates would overflow to infinity.
    assert_exit_2(
        &cachescope(&[
            "simulate",
            ts,
            "--set",
            "bandwidth.paths.L1-L2.read_gbs=1e-300",
        ]),
        "bandwidth.paths.L1-L2.read_gbs: 1e-300 is outside 1e-3..=1e6 GB/s",
    );
    let preset = include_str!("../simulator/presets/ivybridge-4c.toml");
    let m = dir.path().join("m.toml");
    std::fs::write(&m, preset.replace("size = \"32K\"", "size = 1.5")).unwrap();
    assert_exit_2(
        &cachescope(&["simulate", ts, "--machine", m.to_str().unwrap()]),
        "size: 1.5 is a floating-point number; write a size as an integer or a string",
    );
    // `1e3` is a TOML float, though its value is whole.
    assert_exit_2(
        &cachescope(&["simulate", ts, "--set", "levels.L1.size=1e3"]),
        "levels.L1.size=1e3: size: 1000 is a floating-point number",
    );
    std::fs::write(
        &m,
        preset.replace(
            "false_sharing_penalty_cycles = 125.0",
            "false_sharing_penalty_cycles = -5.0",
        ),
    )
    .unwrap();
    assert_exit_2(
        &cachescope(&["simulate", ts, "--machine", m.to_str().unwrap()]),
        "bandwidth.false_sharing_penalty_cycles",
    );
}

#[test]
fn a_failing_audit_output_leaves_every_earlier_output_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    let (sarif, json, base) = (
        dir.path().join("a.sarif"),
        dir.path().join("a.json"),
        dir.path().join("base.txt"),
    );
    for f in [&sarif, &json, &base] {
        std::fs::write(f, "old").unwrap();
    }
    let missing = dir.path().join("missing").join("x");
    let p = |f: &Path| f.to_str().unwrap().to_owned();
    // The failing output last, in the middle and first: nothing is replaced.
    for args in [
        [
            "--write-baseline",
            &p(&base),
            "--json",
            &p(&json),
            "--sarif",
            &p(&missing),
        ],
        [
            "--write-baseline",
            &p(&base),
            "--json",
            &p(&missing),
            "--sarif",
            &p(&sarif),
        ],
        [
            "--write-baseline",
            &p(&missing),
            "--json",
            &p(&json),
            "--sarif",
            &p(&sarif),
        ],
    ] {
        let mut all = vec!["audit", ts];
        all.extend(args.iter().copied());
        let o = cachescope(&all);
        assert_exit_2(&o, "does not exist");
        for f in [&sarif, &json, &base] {
            assert_eq!(
                std::fs::read_to_string(f).unwrap(),
                "old",
                "{}",
                f.display()
            );
        }
    }
    // One file for two outputs, and two outputs on standard output, are refused up front.
    let o = cachescope(&["audit", ts, "--json", &p(&json), "--sarif", &p(&json)]);
    assert_exit_2(&o, "is given for two outputs");
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "old");
    let o = cachescope(&["audit", ts, "--json", "-", "--sarif", "-"]);
    assert_exit_2(&o, "both write to standard output");
    // All three written when all can be.
    let o = cachescope(&[
        "audit",
        ts,
        "--write-baseline",
        &p(&base),
        "--json",
        &p(&json),
        "--sarif",
        &p(&sarif),
    ]);
    // Writing a baseline accepts its findings: exit 0.
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for f in [&sarif, &json, &base] {
        assert_ne!(
            std::fs::read_to_string(f).unwrap(),
            "old",
            "{}",
            f.display()
        );
    }
    assert_eq!(
        listing(dir.path()),
        ["a.json", "a.sarif", "base.txt", "t.cstrace"]
    );
}

#[test]
fn audit_baselines_may_be_upper_case_or_start_with_a_byte_order_mark() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    let base = dir.path().join("base.txt");
    let o = cachescope(&["audit", ts, "--write-baseline", base.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("written to"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&base).unwrap();
    assert!(!text.is_empty());
    std::fs::write(&base, format!("\u{feff}{}", text.to_uppercase())).unwrap();
    let o = cachescope(&["audit", ts, "--baseline", base.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("accepted by the baseline"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn audit_reports_agree_with_the_exit_code() {
    // Until 2026-11-28: `--write-baseline` exited 0 with a report, SARIF and JSON saying the
    // run failed; `fail_on_latent` failed the run with findings labelled warnings; the JSON
    // could not tell a baselined finding; the verdict rounded a threshold of 98.5% to 98%.
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let json = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(name)).unwrap()).unwrap()
    };
    let levels = |name: &str| -> Vec<String> {
        json(name)["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["level"].as_str().unwrap().to_owned())
            .collect()
    };
    let (base, sarif, js) = (path("base.txt"), path("w.sarif"), path("w.json"));
    let o = cachescope(&[
        "audit",
        ts,
        "--write-baseline",
        &base,
        "--sarif",
        &sarif,
        "--json",
        &js,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let w = json("w.json");
    let findings = w["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    assert!(findings.iter().all(|f| f["baselined"] == true), "{w:#}");
    assert!(levels("w.sarif").iter().all(|l| l == "note"));
    let o = cachescope(&["audit", ts, "--write-baseline", &base]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("[baselined]") && !text.contains("FAIL"),
        "{text}"
    );
    // Without a baseline the same findings fail, and say so.
    let o = cachescope(&["audit", ts, "--json", &js]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let plain = json("w.json");
    assert!(plain["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["baselined"] == false && f["exceeds"] == true && f["kind"] == "false_sharing"));
    // `-` is standard output for --json and --sarif, not a file name for the baseline.
    let o = cachescope(&["audit", ts, "--write-baseline", "-"]);
    assert_exit_2(&o, "--write-baseline takes a file name");
    // The verdict states a threshold as given.
    let cfg = dir.path().join("share.toml");
    std::fs::write(&cfg, "min_time_share = 0.985\n").unwrap();
    let o = cachescope(&["audit", ts, "--config", cfg.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(">= 98.5% of a thread's time"), "{text}");
}

#[test]
fn cc_options_without_a_right_value_say_what_they_take() {
    // Until 2026-11-28 the message showed a Rust value: `not Some("bogus")`, `not None`.
    let o = cachescope(&["cc", "--capture", "bogus", "x.c"]);
    assert_exit_2(&o, "--capture takes tsan or sancov, not \"bogus\"");
    assert!(!stderr(&o).contains("Some("), "{}", stderr(&o));
    assert_exit_2(&cachescope(&["cc", "--capture"]), "--capture needs a value");
}

#[test]
fn errors_say_what_is_wrong_with_the_argument() {
    // Until 2026-11-28 a directory was "no such file", and the per-thread size floor did not
    // say it depended on the thread count.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert_exit_2(
        &cachescope(&["record", "--", d]),
        "a directory, not a program",
    );
    let out = dir.path().join("x.cstrace");
    assert_exit_2(
        &cachescope(&[
            "trace",
            "gen",
            "stream",
            "-o",
            out.to_str().unwrap(),
            "--threads",
            "1000",
            "--size",
            "4K",
        ]),
        "(64000 for 1000 threads)",
    );
}

#[test]
fn audit_settings_out_of_range_exit_2_instead_of_passing() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    let cfg = dir.path().join("audit.toml");
    for (setting, expect) in [
        (
            "min_line_fraction = nan",
            "min_line_fraction: must be a fraction",
        ),
        ("min_time_share = 2.0", "min_time_share: must be a fraction"),
        (
            "min_time_share = -0.5",
            "min_time_share: must be a fraction",
        ),
        (
            "penalty_cycles = 0",
            "penalty_cycles: must be a number of cycles in 1e-6..=1e9",
        ),
        // So large that the costs overflow: the audit passed whatever it found.
        (
            "penalty_cycles = 1e308",
            "penalty_cycles: must be a number of cycles in 1e-6..=1e9",
        ),
        (
            "predict_line_sizes = [0, 48]",
            "predict_line_sizes: each must be",
        ),
        ("predict_shift_step = 3", "predict_shift_step: must be 0"),
        ("predict_shift_step = 512", "predict_shift_step: must be 0"),
    ] {
        std::fs::write(&cfg, setting).unwrap();
        let o = cachescope(&["audit", ts, "--config", cfg.to_str().unwrap()]);
        assert_exit_2(&o, expect);
        assert!(stderr(&o).contains("audit.toml"), "{}", stderr(&o));
    }
    // In range, the same trace fails the audit (exit 1): the checks above did not pass it.
    std::fs::write(&cfg, "min_time_share = 0.001").unwrap();
    let o = cachescope(&["audit", ts, "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

/// `cachescope ARGS`, killed after a minute (a command waiting on a FIFO would never end).
fn within_a_minute(args: &[&str]) -> std::process::Output {
    Command::new("timeout")
        .arg("60")
        .arg(support::cachescope())
        .args(args)
        .output()
        .expect("run timeout")
}

#[test]
fn a_fifo_trace_is_refused_at_once_and_text_inputs_are_read_to_a_bound() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let ok = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(ok.success());
    let f = fifo.to_str().unwrap();
    // Opening a FIFO without a writer blocks: the reader must look before it opens.
    for args in [
        vec!["trace", "verify", f],
        vec!["trace", "info", f],
        vec!["simulate", f],
        vec!["audit", f],
    ] {
        assert_exit_2(&within_a_minute(&args), "not a regular file");
    }
    // The small text inputs are read from anything (a process substitution is a pipe), but
    // not without end.
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    for args in [
        vec!["simulate", ts, "--machine", "/dev/zero"],
        vec!["audit", ts, "--baseline", "/dev/zero"],
        vec!["audit", ts, "--config", "/dev/zero"],
    ] {
        assert_exit_2(&within_a_minute(&args), "more than");
    }
    // /dev/null: an empty baseline accepts nothing; the trace's false sharing fails.
    let o = cachescope(&["audit", ts, "--baseline", "/dev/null"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn a_trace_through_a_pipe_is_refused_at_once_and_an_early_closed_pipe_is_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    // `cat t | cachescope simulate /dev/stdin`: chunks are read at their offsets, so a pipe
    // cannot work; say so, instead of "Illegal seek" at the first chunk.
    let mut child = Command::new(support::cachescope())
        .args(["simulate", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bytes = std::fs::read(&t).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The command may exit before reading it all: a failed write here is expected.
    let _ = std::io::Write::write_all(&mut stdin, &bytes);
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert_exit_2(&o, "not a regular file");
    assert!(!stderr(&o).contains("Illegal seek"), "{}", stderr(&o));
    assert_exit_2(
        &cachescope(&["simulate", dir.path().to_str().unwrap()]),
        "not a regular file",
    );
    // `trace dump [--json] | head -1`: the reader closing the pipe ends the dump quietly.
    for json in [false, true] {
        let mut args = vec!["trace", "dump", t.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let mut child = piped(&args);
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 16];
        std::io::Read::read_exact(&mut out, &mut first).unwrap();
        drop(out);
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "json {json}: {:?} {}",
            o.status,
            stderr(&o)
        );
    }
}

/// `cachescope ARGS` started with its standard output and error on pipes.
fn piped(args: &[&str]) -> std::process::Child {
    Command::new(support::cachescope())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_reader_closing_the_pipe_early_leaves_the_exit_code_alone() {
    // `cachescope … | head`: the pipe closes before the command writes. Not an error (exit
    // 2 until 2026-11-28); the audit still fails on its findings.
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let t = t.to_str().unwrap();
    for (args, code) in [
        (vec!["trace", "info", t], 0),
        (vec!["trace", "verify", t], 0),
        (vec!["simulate", t, "--json"], 0),
        (vec!["simulate", t, "--json", "/dev/stdout"], 0),
        (vec!["audit", t, "--sarif", "/dev/stdout"], 1),
        (vec!["simulate", t], 0),
        (vec!["audit", t], 1),
    ] {
        let mut child = piped(&args);
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).is_empty(), "{args:?}: {}", stderr(&o));
    }
    // A full disk is an error, and says it was the output that failed.
    for args in [vec!["trace", "dump", t], vec!["trace", "info", t]] {
        let full = std::fs::File::create("/dev/full").unwrap();
        let o = Command::new(support::cachescope())
            .args(&args)
            .stdout(full)
            .output()
            .unwrap();
        assert_exit_2(&o, "writing to standard output");
    }
}

#[test]
fn out_of_range_options_and_wrong_kinds_of_paths_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let file = dir.path().join("afile");
    std::fs::write(&file, "keep").unwrap();
    assert_exit_2(
        &cachescope(&[
            "bandwidth",
            t.to_str().unwrap(),
            "--svg",
            file.to_str().unwrap(),
        ]),
        "is not a directory",
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    assert_exit_2(
        &cachescope(&["demo", "--out", file.to_str().unwrap()]),
        "exists and is not a directory",
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    assert_exit_2(
        &cachescope(&["calibrate", "--false-sharing", "--ops", "0"]),
        "--ops",
    );
    // A repository root that is not a directory would make every SARIF location absolute.
    let sarif = dir.path().join("out.sarif");
    let ts = t.to_str().unwrap();
    for (root, says) in [
        (dir.path().join("missing"), "no such directory"),
        (file.clone(), "not a directory"),
    ] {
        let args = [
            "audit",
            ts,
            "--sarif",
            sarif.to_str().unwrap(),
            "--repo-root",
        ];
        let mut args: Vec<&str> = args.to_vec();
        args.push(root.to_str().unwrap());
        assert_exit_2(&cachescope(&args), says);
        assert!(!sarif.exists());
    }
}

#[test]
fn an_output_given_the_file_of_an_input_is_refused_and_the_input_kept() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    let ts = t.to_str().unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let model_text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("simulator/presets/ivybridge-4c.toml"),
    )
    .unwrap();
    let model = file("model.toml", &model_text);
    let ms = model.to_str().unwrap();
    let config = file("audit.toml", "min_events = 1\n");
    let cs = config.to_str().unwrap();
    let baseline = file("base.txt", "# none accepted\n");
    let bs = baseline.to_str().unwrap();
    for args in [
        vec!["simulate", ts, "--machine", ms, "--json", ms],
        vec!["bandwidth", ts, "--machine", ms, "--json", ms],
        vec!["audit", ts, "--machine", ms, "--sarif", ms],
        vec!["audit", ts, "--config", cs, "--json", cs],
        vec!["audit", ts, "--baseline", bs, "--json", bs],
    ] {
        assert_exit_2(&cachescope(&args), "it is an input of this run");
    }
    assert_eq!(std::fs::read_to_string(&model).unwrap(), model_text);
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "min_events = 1\n"
    );
    assert_eq!(
        std::fs::read_to_string(&baseline).unwrap(),
        "# none accepted\n"
    );
    // The Lackey log was replaced by the trace imported from it, with exit 0.
    let log_text = "I  04000000,3\n L 10000,8\n S 10008,8\n";
    let log = file("run.lackey", log_text);
    let ls = log.to_str().unwrap();
    assert_exit_2(
        &cachescope(&["import", "lackey", ls, "-o", ls]),
        "it is an input of this run",
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), log_text);
    // Writing the baseline that was read is how a baseline is updated.
    let o = cachescope(&["audit", ts, "--baseline", bs, "--write-baseline", bs]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_ne!(
        std::fs::read_to_string(&baseline).unwrap(),
        "# none accepted\n"
    );
}

#[test]
fn sweeps_are_counted_before_they_are_built() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "t.cstrace", "false-sharing", "16K");
    // 200^4 = 1.6e9 configurations: building them first ran out of memory.
    let values: Vec<String> = (1..=200).map(|v| v.to_string()).collect();
    let sweep = format!("seed={}", values.join(","));
    let mut args = vec!["simulate", t.to_str().unwrap()];
    for _ in 0..4 {
        args.extend(["--sweep", sweep.as_str()]);
    }
    // The same field four times is refused first; four different fields are counted.
    assert_exit_2(&cachescope(&args), "the field is swept twice");
    let fields = ["seed", "levels.L1.assoc", "levels.L2.assoc", "cores"];
    let sweeps: Vec<String> = fields
        .iter()
        .map(|f| format!("{f}={}", values.join(",")))
        .collect();
    let mut args = vec!["simulate", t.to_str().unwrap()];
    for s in &sweeps {
        args.extend(["--sweep", s.as_str()]);
    }
    assert_exit_2(
        &cachescope(&args),
        "--sweep gives 200 x 200 x 200 x 200 configurations",
    );
    // One size written two ways would run the same replay twice and show it as two results.
    let o = cachescope(&[
        "simulate",
        t.to_str().unwrap(),
        "--sweep",
        "levels.L1.size=16K,32K,16384",
    ]);
    assert_exit_2(
        &o,
        "configurations levels.L1.size=16K and levels.L1.size=16384 give the same model",
    );
}

#[test]
fn importing_a_log_without_lackey_records_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // The previous output is a trace: `import` replaces traces only.
    let out = gen(dir.path(), "t.cstrace", "false-sharing", "1K");
    let previous = std::fs::read(&out).unwrap();
    let log = dir.path().join("empty.lackey");
    std::fs::write(&log, "==123== Lackey, an example Valgrind tool\n").unwrap();
    let o = cachescope(&[
        "import",
        "lackey",
        log.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_exit_2(&o, "no Lackey records in 1 lines");
    assert_eq!(std::fs::read(&out).unwrap(), previous);
    assert_eq!(listing(dir.path()), ["empty.lackey", "t.cstrace"]);
}

/// Polls `done` every 20 ms for up to 20 s.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).contains(needle))
        .count()
}

#[test]
fn an_interrupted_calibration_kills_its_benchmark_and_removes_its_files() {
    let tmp = tempfile::tempdir().unwrap();
    // The benchmark itself, not gcc compiling it (whose command line names the directory too).
    let needle = format!("{}/", tmp.path().to_str().unwrap());
    let bench = "false_sharing_bench\x004294967296000";
    // Far more operations than it could finish: the benchmark runs until it is killed.
    let mut child = Command::new(support::cachescope())
        .args([
            "calibrate",
            "--false-sharing",
            "--ops",
            "4294967296000",
            "--repetitions",
            "1",
        ])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the benchmark to start", || processes_mentioning(bench) > 0);
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    wait_for("the benchmark to end", || {
        processes_mentioning(&needle) == 0
    });
    assert_eq!(listing(tmp.path()), Vec::<String>::new());
}

#[test]
fn an_interrupted_write_leaves_no_temporary_file_and_the_old_output() {
    use std::io::Write;
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let dir = tempfile::tempdir().unwrap();
        // The previous output is a trace: `import` replaces traces only.
        let out = gen(dir.path(), "t.cstrace", "false-sharing", "1K");
        let previous = std::fs::read(&out).unwrap();
        // An import from a pipe that stays open: the temporary trace exists until the end.
        let mut child = Command::new(support::cachescope())
            .args(["import", "lackey", "-", "-o", out.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for i in 0..1000u64 {
            writeln!(
                stdin,
                "I  {:08x},3\n L {:08x},8",
                0x400 + i * 4,
                0x1000 + i * 8
            )
            .unwrap();
        }
        stdin.flush().unwrap();
        wait_for("the temporary file", || {
            listing(dir.path()).iter().any(|n| n.ends_with(".partial"))
        });
        let kill = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let mut status = None;
        wait_for("the import to exit", || {
            status = child.try_wait().unwrap();
            status.is_some()
        });
        drop(stdin);
        assert_eq!(
            status.unwrap().code(),
            Some(code),
            "exit status after kill {signal}"
        );
        assert_eq!(
            listing(dir.path()),
            vec!["t.cstrace".to_string()],
            "after kill {signal}"
        );
        assert_eq!(
            std::fs::read(&out).unwrap(),
            previous,
            "after kill {signal}"
        );
    }
}

/// Crafted valid traces (found by fuzzing; tests/data/hostile): a heap block ending at the
/// top of the address space, a thread clock reaching `u64::MAX`, module paths naming a device
/// and a pipe. Each must run to an ordinary exit (no panic, no overflow in this debug build, no
/// endless read), and a device is not read as a module.
#[test]
fn hostile_but_valid_traces_run_to_an_ordinary_exit() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hostile");
    let run = |args: &[&str], file: &str| {
        let path = data.join(file);
        let mut all = args.to_vec();
        all.push(path.to_str().unwrap());
        let mut child = Command::new(env!("CARGO_BIN_EXE_cachescope"))
            .args(&all)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Stdin stays open and empty: a module read from it would wait here forever.
        let _stdin = child.stdin.take();
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
                assert!(
                    matches!(status.code(), Some(0 | 1)),
                    "{all:?}: {status}: {err}"
                );
                return err;
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                let _ = child.kill();
                panic!("{all:?} still running after 60 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    run(&["audit"], "audit_heap_at_top.cst");
    for engine in ["exact", "parallel"] {
        run(&["bandwidth", "--engine", engine], "bandwidth_adv_max.cst");
        run(
            &[
                "bandwidth",
                "--engine",
                engine,
                "-W",
                "1",
                "--sample-period",
                "1",
            ],
            "bandwidth_adv_max.cst",
        );
    }
    for file in ["module_path_dev_zero.cst", "module_path_dev_stdin.cst"] {
        let err = run(&["audit"], file);
        assert!(err.contains("not a regular file"), "{file}: {err}");
        run(&["bandwidth"], file);
    }
}

/// A crafted trace whose time never moves (tests/data/hostile/timeless_barrier.cst: 2
/// threads leave a barrier at time 0, then load 2.2 M times each, all at time 0). The
/// parallel engine cannot cut those events into pieces (their order depends on the barrier's
/// wake at that very time) and would hold them all: it refuses, naming the time and the way
/// out, instead of growing without bound; the exact engine streams it.
#[test]
fn events_the_parallel_engine_cannot_split_are_refused_not_held() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hostile/timeless_barrier.cst");
    let path = path.to_str().unwrap();
    let o = cachescope(&["simulate", path, "--engine", "parallel"]);
    assert_exit_2(
        &o,
        "limit exceeded: more than 4194304 events of the global order at time 0",
    );
    assert!(
        stderr(&o).contains("timeless_barrier.cst"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("use the exact engine"),
        "{}",
        stderr(&o)
    );
    let o = cachescope(&["simulate", path, "--engine", "exact", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        report["threads"].as_array().map(Vec::len),
        Some(2),
        "{report}"
    );
}
