//! `cachescope calibrate`: with `--false-sharing` the written model loads, has a positive
//! finite τ, and `cachescope audit --machine` accepts it; with `--bandwidth` the written host
//! model loads, has every data path measured, the combined memory limits, the page-fault cost,
//! the compiled kernels' IPC (recorded with the shim) and plausible figures; with both, one
//! model has both. Without the shim `--bandwidth` fails with a clear error.

mod support;

use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

use cachescope_sim::MachineModel;

fn cachescope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cachescope"))
        .args(args)
        .output()
        .expect("run cachescope")
}

fn text(o: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn calibrated_model_loads_and_audits() {
    let _machine = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("cal.toml");
    let model_s = model.to_str().unwrap();
    // Fewer operations than the default: the test checks the plumbing, not the value.
    let o = cachescope(&[
        "calibrate",
        "--false-sharing",
        "-o",
        model_s,
        "--ops",
        "4194304",
        "--repetitions",
        "5",
    ]);
    assert!(o.status.success(), "calibrate failed: {}", text(&o));
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains("tau = "), "{summary}");
    assert!(summary.contains("clock: "), "{summary}");

    let m = MachineModel::load(model_s).expect("calibrated model loads");
    let bw = m.bandwidth.expect("bandwidth section");
    let tau = bw.false_sharing_penalty_cycles.expect("tau written");
    assert!(tau.is_finite() && tau > 0.0, "tau = {tau}");
    assert!(bw.ghz.is_finite() && bw.ghz > 0.0, "ghz = {}", bw.ghz);

    let trace = dir.path().join("t.cstrace");
    let trace_s = trace.to_str().unwrap();
    let o = cachescope(&[
        "trace",
        "gen",
        "false-sharing",
        "--threads",
        "2",
        "--size",
        "64K",
        "-o",
        trace_s,
    ]);
    assert!(o.status.success(), "gen failed: {}", text(&o));
    let o = cachescope(&["audit", "--machine", model_s, "--json", "-", trace_s]);
    assert_eq!(o.status.code(), Some(1), "audit: {}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("audit JSON");
    // τ goes through TOML text and back: equal up to float printing.
    let used = report["penalty_cycles"].as_f64().expect("penalty_cycles");
    assert!(
        (used - tau).abs() <= 1e-9 * tau.abs(),
        "{used} vs {tau}: {report}"
    );
    let findings = report["findings"].as_array().expect("findings");
    assert!(!findings.is_empty(), "{report}");
    let cost = findings[0]["cost_cycles"].as_f64().unwrap();
    let events = findings[0]["events"].as_f64().unwrap();
    assert!(
        (cost - events * tau).abs() <= 1e-6 * cost.max(1.0),
        "{report}"
    );
}

/// The calibrations measure this machine: never two at once (the tests of this file run in
/// parallel threads otherwise).
static MACHINE: Mutex<()> = Mutex::new(());

fn exclusive() -> MutexGuard<'static, ()> {
    MACHINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// /proc/cpuinfo's first "cpu MHz", in GHz.
fn cpuinfo_ghz() -> Option<f64> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .filter(|l| l.starts_with("cpu MHz"))
            .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
            .find(|m| *m > 0.0)
            .map(|m| m / 1e3)
    })
}

/// What a measured host model must satisfy beyond its structure (`loop_ipc`: the JSON's
/// `ipc_throughput_loop`). Empty when plausible.
fn implausible(m: &MachineModel, loop_ipc: f64) -> Vec<String> {
    let mut problems = Vec::new();
    let bw = m.bandwidth.as_ref().expect("bandwidth section");
    let names = m.path_names();
    let read = |p: &str| bw.paths.get(p).and_then(|l| l.read_gbs).unwrap_or(0.0);
    let core_l1 = &names[0];
    let mem = names
        .iter()
        .find(|n| n.ends_with("-mem"))
        .expect("memory path");
    // The hierarchy is monotone at its ends: L1 streams faster than memory.
    if read(core_l1) <= read(mem) {
        problems.push(format!(
            "{core_l1} read {} <= {mem} read {}",
            read(core_l1),
            read(mem)
        ));
    }
    // The merge point: all cores together get at least (about) what one core gets.
    let total = bw.paths[mem].total_read_gbs.unwrap_or(0.0);
    if total < 0.8 * read(mem) {
        problems.push(format!(
            "{mem} total read {total} < 0.8 x per-core read {}",
            read(mem)
        ));
    }
    // A copy counted as the simulator counts it (loaded + 2 x stored bytes) moves at least
    // half as many bytes per second as a pure read stream (here it moves more: 21-31 against
    // 12-18 GB/s).
    let combined = bw.paths[mem].combined_gbs.unwrap_or(0.0);
    if combined < 0.5 * read(mem) {
        problems.push(format!(
            "{mem} combined {combined} < 0.5 x per-core read {}",
            read(mem)
        ));
    }
    // Ordinary compiled loops: 1.8-6 instructions per cycle each here, median 2.45-2.92; never
    // much above the hand-written throughput loop (4.7-6.9 here).
    if !(0.5..=8.0).contains(&bw.ipc) || bw.ipc > 1.2 * loop_ipc {
        problems.push(format!(
            "ipc {} (kernel median) outside 0.5-8 or above 1.2 x the throughput loop's {loop_ipc}",
            bw.ipc
        ));
    }
    // The measured clock against /proc/cpuinfo, which on VMs is often the nominal clock while
    // the cores boost: one 2.445 GHz EPYC VM ran its add chain at 3.1-3.25 GHz (+27-33%, the
    // same with imul and addsd chains), a 2.596 GHz one at 4.14-4.21 GHz (+60%; current EPYC
    // parts boost up to about 1.5-1.65x their base clock). So at least 70% and at most 200%.
    if let Some(nominal) = cpuinfo_ghz() {
        let ratio = bw.ghz / nominal;
        if !(0.7..=2.0).contains(&ratio) {
            problems.push(format!(
                "clock {} GHz vs /proc/cpuinfo {nominal} GHz",
                bw.ghz
            ));
        }
    }
    // Whatever /proc/cpuinfo says, the clock must make the throughput loop's IPC physical: no
    // x86 core retires more than 8 instructions per cycle (7.6 on the +60% EPYC VM above;
    // there, the nominal clock would have meant 12). A clock measured too low fails here.
    if loop_ipc > 8.5 {
        problems.push(format!(
            "throughput loop at {loop_ipc} instructions per cycle of the measured {} GHz: \
             more than any x86 core retires, so the clock is too low",
            bw.ghz
        ));
    }
    problems
}

#[test]
fn bandwidth_calibration_writes_a_host_model() {
    let _machine = exclusive();
    support::ensure_shim(); // the IPC kernels are recorded
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("T.toml");
    let json = dir.path().join("J.json");
    let (model_s, json_s) = (model.to_str().unwrap(), json.to_str().unwrap());
    // The figures are measurements on a possibly busy (shared, virtual) machine: when they are
    // implausible, measure once more before failing. Structure is checked every time.
    for attempt in 1.. {
        let o = cachescope(&[
            "calibrate",
            "--bandwidth",
            "--quick",
            "-o",
            model_s,
            "--json",
            json_s,
        ]);
        assert!(o.status.success(), "calibrate failed: {}", text(&o));
        let summary = String::from_utf8_lossy(&o.stdout);
        for want in [
            "read GB/s",
            "total read",
            "combined",
            "clock: ",
            "ipc: ",
            "kernels: copy ",
            "page fault: ",
            &format!("wrote {model_s}"),
        ] {
            assert!(summary.contains(want), "{want:?} missing:\n{summary}");
        }

        let m = MachineModel::load(model_s).expect("calibrated model loads");
        assert_eq!(m.name, "host-calibrated");
        let host = MachineModel::load("host").expect("host model");
        assert_eq!(m.levels, host.levels, "levels come from the host preset");
        let bw = m.bandwidth.as_ref().expect("bandwidth section");
        assert!(bw.false_sharing_penalty_cycles.is_none(), "{bw:?}");
        for v in [bw.ghz, bw.ipc, bw.flops_per_cycle.unwrap_or(0.0)] {
            assert!(v.is_finite() && v > 0.0, "{bw:?}");
        }
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).expect("JSON written")).expect("JSON");
        let cpus = report["cpus"].as_array().expect("cpus").len();
        for path in m.path_names() {
            let limit = bw.paths.get(&path);
            let c2c = path.split('-').next() == path.split('-').nth(1);
            if c2c && cpus < 2 {
                continue; // cache-to-cache transfers need two CPUs
            }
            let read = limit.and_then(|l| l.read_gbs).unwrap_or(0.0);
            assert!(read > 0.0, "{path}: read {read}: {bw:?}");
            if !c2c {
                let write = limit.and_then(|l| l.write_gbs).unwrap_or(0.0);
                assert!(write > 0.0, "{path}: write {write}: {bw:?}");
            }
        }
        let adds = report["ipc_independent_adds"].as_f64().expect("adds IPC");
        assert!(adds > 0.0, "{report}");
        assert!(same_float(report["ghz"].as_f64(), bw.ghz), "{report}");
        assert_eq!(report["model_file"].as_str(), Some(model_s), "{report}");

        // Reads and writes together on the memory path, one core and all.
        let mem = m
            .path_names()
            .into_iter()
            .find(|n| n.ends_with("-mem"))
            .expect("memory path");
        let limit = &bw.paths[&mem];
        for (what, v) in [
            ("combined_gbs", limit.combined_gbs),
            ("total_combined_gbs", limit.total_combined_gbs),
        ] {
            assert!(v.is_some_and(|v| v > 0.0), "{mem} {what}: {bw:?}");
        }
        // The first touch of a page: a few µs here (2.2-2.9).
        let fault = bw.page_fault_ns.expect("page_fault_ns written");
        assert!((50.0..=50_000.0).contains(&fault), "page_fault_ns {fault}");
        assert!(
            same_float(report["page_fault_ns"].as_f64(), fault),
            "{report}"
        );
        // OpenMP synchronization (gcc here has libgomp; without it the figures would be left
        // out with a note): a barrier costs between 10 ns and 1 ms (0.26–1 µs on the 2-vCPU
        // VMs), a fork beyond its barrier at least the 1 ns floor and at most 1 ms, and the
        // JSON says how they were measured, with a team of one thread per CPU.
        let barrier = bw.barrier_ns.expect("barrier_ns written");
        let region = bw.region_ns.expect("region_ns written");
        assert!((10.0..=1e6).contains(&barrier), "barrier_ns {barrier}");
        assert!((1.0..=1e6).contains(&region), "region_ns {region}");
        assert_eq!(
            report["sync"]["threads"].as_u64(),
            Some(report["cpus"].as_array().map_or(0, |c| c.len() as u64)),
            "{report}"
        );
        assert!(
            same_float(report["sync"]["barrier_ns"]["best"].as_f64(), barrier),
            "{report}"
        );
        assert!(
            same_float(report["sync"]["region_ns"].as_f64(), region),
            "{report}"
        );
        // The model's ipc is the median of the compiled kernels, each in the JSON.
        let loop_ipc = report["ipc_throughput_loop"]
            .as_f64()
            .expect("ipc_throughput_loop");
        assert!(loop_ipc > 0.0, "{report}");
        assert!(same_float(report["ipc"].as_f64(), bw.ipc), "{report}");
        let kernels = report["ipc_kernels"]["kernels"]
            .as_array()
            .expect("ipc_kernels.kernels");
        let names: Vec<&str> = kernels.iter().filter_map(|k| k["name"].as_str()).collect();
        assert_eq!(
            names,
            ["copy", "scale", "add", "triad", "dot", "stencil", "modulo"],
            "{report}"
        );
        let mut ipcs: Vec<f64> = kernels
            .iter()
            .map(|k| {
                assert!(
                    k["instructions_per_call"].as_f64().unwrap_or(0.0) > 0.0,
                    "{k}"
                );
                k["ipc"]["best"].as_f64().expect("kernel ipc")
            })
            .collect();
        assert!(ipcs.iter().all(|x| *x > 0.0), "{ipcs:?}");
        ipcs.sort_by(f64::total_cmp);
        assert_eq!(bw.ipc, ipcs[ipcs.len() / 2], "the median of {ipcs:?}");
        // With several CPUs: the kernels on all of them at once give the model's ipc_total,
        // at most what independent cores would reach (with some room for noise).
        let cpus = report["cpus"].as_array().map_or(0, |c| c.len());
        if cpus > 1 {
            let total = bw.ipc_total.expect("ipc_total with several CPUs");
            assert!(same_float(report["ipc_total"].as_f64(), total), "{report}");
            assert!(
                total > 0.0 && total <= cpus as f64 * bw.ipc * 1.5,
                "ipc_total {total} for {cpus} CPUs at ipc {}",
                bw.ipc
            );
            let summed = report["ipc_concurrent"]["kernels"]
                .as_array()
                .expect("ipc_concurrent.kernels");
            assert_eq!(summed.len(), 7, "{report}");
        }

        let problems = implausible(&m, loop_ipc);
        if problems.is_empty() {
            break;
        }
        assert!(
            attempt < 2,
            "implausible figures twice: {problems:?}\n{summary}"
        );
        eprintln!("implausible figures, measuring again: {problems:?}\n{summary}");
    }
}

#[test]
fn both_calibrations_write_one_model() {
    let _machine = exclusive();
    support::ensure_shim();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("both.toml");
    let model_s = model.to_str().unwrap();
    let o = cachescope(&[
        "calibrate",
        "--bandwidth",
        "--false-sharing",
        "--quick",
        "--ops",
        "4194304",
        "--repetitions",
        "5",
        "-o",
        model_s,
        "--json",
    ]);
    assert!(o.status.success(), "calibrate failed: {}", text(&o));
    // `--json` alone: JSON on stdout instead of the summary.
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let m = MachineModel::load(model_s).expect("calibrated model loads");
    let bw = m.bandwidth.expect("bandwidth section");
    let tau = bw.false_sharing_penalty_cycles.expect("tau written");
    assert!(tau.is_finite() && tau > 0.0, "tau = {tau}");
    assert!(!bw.paths.is_empty(), "paths written");
    // τ is converted with the measured clock, the one written.
    let ghz = report["bandwidth"]["ghz"].as_f64().expect("bandwidth.ghz");
    assert_eq!(
        report["false_sharing"]["frequency"]["ghz"].as_f64(),
        Some(ghz)
    );
    assert!((bw.ghz - ghz).abs() <= 1e-9 * ghz, "{} vs {ghz}", bw.ghz);
    let text = std::fs::read_to_string(&model).unwrap();
    assert!(
        text.starts_with("# Written by `cachescope calibrate --bandwidth --false-sharing`"),
        "{text}"
    );
}

#[test]
fn calibrate_needs_something_to_do_and_a_loadable_base() {
    let o = cachescope(&["calibrate"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--bandwidth"), "{}", text(&o));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.toml");
    let o = cachescope(&[
        "calibrate",
        "--bandwidth",
        "--machine",
        "/nonexistent/model.toml",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("/nonexistent/model.toml"), "{}", text(&o));
    assert!(!out.exists(), "no model written on errors");
    // A read-only model is refused before minutes of measuring, not after them.
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(&out, "# mine\n").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = cachescope(&["calibrate", "--false-sharing", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("read-only"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "# mine\n");
    // Nothing was measured: no result on stdout.
    assert!(o.stdout.is_empty(), "{}", text(&o));
}

#[test]
fn false_sharing_calibration_refuses_a_single_cpu() {
    // Two threads that take turns on one CPU never move a line between caches: any τ measured
    // there is noise (before, it was written as a near-zero τ, or reported as "no measurable
    // penalty" without the reason).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("one-cpu.toml");
    let o = Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_cachescope")])
        .args([
            "calibrate",
            "--false-sharing",
            "--ops",
            "6400",
            "--repetitions",
            "1",
        ])
        .args(["-o", out.to_str().unwrap()])
        .output()
        .expect("run taskset");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("needs two CPUs to pin its two threads to"),
        "{}",
        text(&o)
    );
    assert!(!out.exists(), "no model written");
}

#[test]
fn calibrate_never_writes_over_its_base_model() {
    // `--json m.toml` or `-o m.toml` after `--machine m.toml` replaced the user's model (exit
    // 0), where simulate, audit and bandwidth refuse it.
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.toml");
    let preset = include_str!("../simulator/presets/ivybridge-4c.toml");
    std::fs::write(&model, preset).unwrap();
    let m = model.to_str().unwrap();
    let other = dir.path().join("other.toml");
    let o_ = other.to_str().unwrap();
    let quick = ["--ops", "64", "--repetitions", "1"];
    for (what, args) in [
        (
            "--json",
            vec!["--false-sharing", "--machine", m, "--json", m, "-o", o_],
        ),
        ("-o", vec!["--false-sharing", "--machine", m, "-o", m]),
        (
            "--bandwidth -o",
            vec!["--bandwidth", "--quick", "--machine", m, "-o", m],
        ),
    ] {
        let mut all = vec!["calibrate"];
        all.extend(&args);
        if args[0] == "--false-sharing" {
            all.extend(quick);
        }
        let o = cachescope(&all);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", text(&o));
        assert!(
            text(&o).contains("it is an input of this run"),
            "{what}: {}",
            text(&o)
        );
        // Refused before measuring: no result on stdout, nothing written.
        assert!(o.stdout.is_empty(), "{what}: {}", text(&o));
        assert_eq!(std::fs::read_to_string(&model).unwrap(), preset, "{what}");
        assert!(!other.exists(), "{what}");
    }
    // Two outputs in one file: the JSON replaced the model just written.
    let o = cachescope(&[
        "calibrate",
        "--false-sharing",
        "--ops",
        "64",
        "--repetitions",
        "1",
        "-o",
        o_,
        "--json",
        o_,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("given for two outputs"), "{}", text(&o));
    assert!(!other.exists());
}

#[test]
fn bandwidth_calibration_needs_the_shim() {
    // The shim is looked up before anything is timed: the error comes at once.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.toml");
    let o = Command::new(env!("CARGO_BIN_EXE_cachescope"))
        .args(["calibrate", "--bandwidth", "--quick", "-o"])
        .arg(&out)
        .env("CACHESCOPE_SHIM", dir.path().join("missing.so"))
        .output()
        .expect("run cachescope");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("needs the recording shim") && err.contains("libcachescope_shim.so"),
        "{err}"
    );
    assert!(!out.exists(), "no model written on errors");
}

/// The JSON and the TOML model print floats independently: equal up to the last digit.
fn same_float(json: Option<f64>, model: f64) -> bool {
    json.is_some_and(|j| (j - model).abs() <= 1e-12 * model.abs().max(1.0))
}
