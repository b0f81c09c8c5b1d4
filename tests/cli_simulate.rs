//! `cachescope simulate` and `cachescope import` as a user runs them.

mod support;

use std::path::{Path, PathBuf};

use support::{assert_exit_2, cli as cachescope, stderr};

fn gen(dir: &Path, workload: &str, threads: &str) -> PathBuf {
    let name = format!("{workload}.cstrace");
    let extra = ["--threads", threads, "--size", "16K", "--iterations", "2"];
    support::gen_trace(dir, &name, workload, &extra)
}

#[test]
fn simulate_table_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "false-sharing", "2");
    let o = cachescope(&["simulate", t.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("coh-false") && text.contains("L1-L1"),
        "{text}"
    );
    let json = dir.path().join("r.json");
    let o = cachescope(&[
        "simulate",
        t.to_str().unwrap(),
        "--set",
        "coherence=mesi",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // `--json FILE` writes the file and still prints the report (it printed nothing).
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("coh-false"), "{text}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["schema"], "cachescope.simulate/1");
    assert_eq!(r["machine"]["coherence"], "mesi");
    assert!(
        r["levels"][0]["misses"]["coherence_false"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(r["threads"].as_array().unwrap().len(), 2);
}

#[test]
fn cachegrind_mode_says_when_the_trace_has_no_instruction_fetches() {
    // Generated traces, like recorded programs' traces, have data accesses only: Ir, I1mr
    // and ILmr were not simulated and must not read as "0 fetched, 0 missed".
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "stream", "1");
    let t = t.to_str().unwrap();
    let o = cachescope(&["simulate", t, "--machine", "cachegrind"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    for name in ["Ir", "I1mr", "ILmr"] {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row: {text}"));
        assert_eq!(row.split_whitespace().nth(1), Some("-"), "{text}");
    }
    assert!(
        text.contains("the trace has no instruction fetches"),
        "{text}"
    );
    let dr = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("Dr"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("{text}"));
    assert_ne!(dr, "0", "{text}");
    let o = cachescope(&["simulate", t, "--machine", "cachegrind", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["cachegrind"]["fetches_in_trace"], false, "{r:#}");
}

#[test]
fn unset_model_fields_are_left_out_of_the_json() {
    // One convention for optional settings in the report's machine: absent, never `null`.
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "stream", "2");
    let m = dir.path().join("m.toml");
    std::fs::write(
        &m,
        "name = \"mini\"\ncores = 2\nline_size = 64\n[[levels]]\nname = \"L1\"\nsize = \"32K\"\n\
         assoc = 8\n[bandwidth]\nghz = 2.0\nipc = 2.0\n[bandwidth.paths.L1-mem]\nread_gbs = 10.0\n",
    )
    .unwrap();
    let o = cachescope(&[
        "simulate",
        t.to_str().unwrap(),
        "--machine",
        m.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        r["machine"]["bandwidth"],
        serde_json::json!({"ghz": 2.0, "ipc": 2.0, "paths": {"L1-mem": {"read_gbs": 10.0}}})
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("null"));
}

#[test]
fn simulate_parallel_engine() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "stencil", "4");
    let t = t.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["simulate", t, "--json", "-"];
        args.extend_from_slice(extra);
        let o = cachescope(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let one = run(&["--engine", "parallel", "--slack", "1", "--threads", "1"]);
    let two = run(&["--engine", "parallel", "--slack", "1", "--threads", "2"]);
    assert_eq!(one, two, "--threads changed the report");
    assert_eq!(
        one,
        run(&["--engine", "parallel", "--slack", "1", "--threads", "2"])
    );
    let p: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert_eq!(
        (p["engine"].as_str(), p["slack"].as_u64()),
        (Some("parallel"), Some(1))
    );
    let q = &p["quanta"];
    assert!(q["total"].as_u64() > Some(100) && q["lockstep"].as_u64() < q["total"].as_u64());
    // Every slack gives the exact counters.
    let mut e: serde_json::Value = serde_json::from_str(&run(&["--engine", "exact"])).unwrap();
    let mut p = p;
    let mut big: serde_json::Value =
        serde_json::from_str(&run(&["--engine", "parallel", "--slack", "100000"])).unwrap();
    for r in [&mut e, &mut p, &mut big] {
        let o = r.as_object_mut().unwrap();
        o.remove("engine");
        o.remove("slack");
        o.remove("quanta");
    }
    assert_eq!(e, p);
    assert_eq!(e, big);
    // The default engine is still the exact one.
    let d: serde_json::Value = serde_json::from_str(&run(&[])).unwrap();
    assert_eq!(d["engine"], "exact");
    let o = cachescope(&["simulate", t, "--engine", "parallel", "--slack", "500"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("parallel (slack 500; ") && text.contains(" in lockstep)"),
        "{text}"
    );
}

#[test]
fn simulate_parallel_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "stream", "2");
    let t = t.to_str().unwrap();
    assert_exit_2(
        &cachescope(&["simulate", t, "--engine", "parallel", "--slack", "0"]),
        "slack must be at least 1",
    );
    assert_exit_2(
        &cachescope(&["simulate", t, "--threads", "2"]),
        "--engine parallel",
    );
    assert_exit_2(
        &cachescope(&[
            "simulate",
            t,
            "--engine",
            "parallel",
            "--machine",
            "cachegrind",
        ]),
        "no parallel engine",
    );
    assert_exit_2(
        &cachescope(&[
            "simulate",
            t,
            "--engine",
            "parallel",
            "--set",
            "levels.L1.write=through",
        ]),
        "--engine exact",
    );
}

#[test]
fn simulate_bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "stream", "3");
    let ts = t.to_str().unwrap();
    assert_exit_2(
        &cachescope(&["simulate", ts, "--machine", "no-such-model"]),
        "not a preset",
    );
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\ncores = 2\nline_size = 64\n[[levels]]\nname = \"L1\"\nsize = \"32K\"\nassoc = 7\n").unwrap();
    assert_exit_2(
        &cachescope(&["simulate", ts, "--machine", bad.to_str().unwrap()]),
        "levels.L1.assoc",
    );
    // Named as the option spells it (it said `levels[0].size`).
    assert_exit_2(
        &cachescope(&["simulate", ts, "--set", "levels.L1.size=1000"]),
        "levels.L1.size: 1000 is not a positive multiple",
    );
    assert_exit_2(
        &cachescope(&["simulate", ts, "--set", "cores=2"]),
        "3 threads but the machine has 2 cores",
    );
    assert!(
        cachescope(&["simulate", ts, "--set", "cores=2", "--map", "round-robin"])
            .status
            .success()
    );
    assert_exit_2(
        &cachescope(&["simulate", ts, "--I1", "32768,8,64"]),
        "need --machine cachegrind",
    );
    assert_exit_2(
        &cachescope(&[
            "simulate",
            ts,
            "--machine",
            "cachegrind",
            "--D1",
            "3000,8,64",
        ]),
        "--D1",
    );
    assert_exit_2(
        &cachescope(&["simulate", ts, "--machine", "cachegrind", "--D1", "0,8,64"]),
        "size must be positive",
    );
    assert_exit_2(
        &cachescope(&["simulate", ts, "--set", "bandwidth.ipc=inf"]),
        "must be a positive finite number, not inf",
    );
    let cut = dir.path().join("cut.cstrace");
    let bytes = std::fs::read(&t).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert_exit_2(
        &cachescope(&["simulate", cut.to_str().unwrap()]),
        "truncated",
    );
}

#[test]
fn import_lackey_errors_and_keeps_existing_output() {
    let dir = tempfile::tempdir().unwrap();
    // The previous output is a trace: `import` replaces traces only.
    let out = gen(dir.path(), "false-sharing", "2");
    let previous = std::fs::read(&out).unwrap();
    let bad = dir.path().join("bad.lackey");
    std::fs::write(&bad, "I  0400,3\n L 1000,8\nthis is not lackey\n").unwrap();
    let o = cachescope(&[
        "import",
        "lackey",
        bad.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_exit_2(&o, "line 3");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        previous,
        "a failed import must not touch the output"
    );
    let good = dir.path().join("good.lackey");
    std::fs::write(&good, "I  0400,3\n L 1000,8\n S 1008,8\n").unwrap();
    let o = cachescope(&[
        "import",
        "lackey",
        good.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cachescope(&["simulate", out.to_str().unwrap(), "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["unsimulated_fetches"], 1);
    assert_eq!(r["levels"][0]["accesses"]["store"], 1);
    // The table says the fetch went unsimulated, except where the cachegrind model
    // simulated it (its I1 row).
    let text = |machine: &str| {
        let o = cachescope(&["simulate", out.to_str().unwrap(), "--machine", machine]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let note = "instruction fetches not simulated";
    assert!(text("ivybridge-4c").contains(note));
    let cachegrind = text("cachegrind");
    assert!(!cachegrind.contains(note), "{cachegrind}");
}

#[test]
fn a_sweep_gives_each_configurations_own_report_and_a_table() {
    // One replay per combination of the swept values, the trace read once for all of them
    // (exact engine) or in turn (parallel): each report must be the one a separate
    // `simulate --set` run gives.
    let dir = tempfile::tempdir().unwrap();
    let t = support::gen_trace(
        dir.path(),
        "stencil.cstrace",
        "stencil",
        &["--threads", "2", "--size", "256K", "--iterations", "2"],
    );
    let ts = t.to_str().unwrap();
    let sizes = ["4K", "32K"];
    let protocols = ["msi", "mesi"];
    for engine in ["exact", "parallel"] {
        let o = cachescope(&[
            "simulate",
            ts,
            "--engine",
            engine,
            "--set",
            "levels.L2.size=192K",
            "--sweep",
            "levels.L1.size=4K,32K",
            "--sweep",
            "coherence=msi,mesi",
            "--json",
            "-",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let sweep: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(sweep["schema"], "cachescope.sweep/1");
        let runs = sweep["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 4);
        let mut k = 0;
        for size in sizes {
            for protocol in protocols {
                let set_size = format!("levels.L1.size={size}");
                let set_protocol = format!("coherence={protocol}");
                assert_eq!(
                    runs[k]["config"],
                    serde_json::json!([set_size, set_protocol])
                );
                let alone = cachescope(&[
                    "simulate",
                    ts,
                    "--engine",
                    engine,
                    "--set",
                    "levels.L2.size=192K",
                    "--set",
                    &set_size,
                    "--set",
                    &set_protocol,
                    "--json",
                    "-",
                ]);
                let alone: serde_json::Value = serde_json::from_slice(&alone.stdout).unwrap();
                assert_eq!(
                    runs[k]["report"], alone,
                    "{engine} {set_size} {set_protocol}"
                );
                k += 1;
            }
        }
        // The L1 size matters on this trace: the runs differ.
        assert_ne!(
            runs[0]["report"]["levels"][0]["misses"],
            runs[2]["report"]["levels"][0]["misses"]
        );
    }
    // The table: a row per configuration.
    let o = cachescope(&["simulate", ts, "--sweep", "levels.L1.size=4K,32K"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("2 configurations"), "{text}");
    assert!(text.contains("levels.L1.size=4K ") && text.contains("levels.L1.size=32K "));
    // Bad sweeps are bad input, naming the configuration.
    assert_exit_2(
        &cachescope(&["simulate", ts, "--sweep", "levels.L1.size"]),
        "expected KEY=V1,V2",
    );
    assert_exit_2(
        &cachescope(&["simulate", ts, "--sweep", "levels.L1.assoc=8,7"]),
        "--sweep configuration levels.L1.assoc=7",
    );
}

#[test]
fn a_sweep_table_counts_each_coherence_miss_once_and_names_renamed_levels_by_position() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "false-sharing", "2");
    let t = t.to_str().unwrap();
    // With a private L2 a line taken away misses in both private levels: the table's
    // coherence misses are the outermost private level's, as the report has them.
    let o = cachescope(&["simulate", t, "--set", "levels.L2.shared=false", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let l2_false = r["levels"][1]["misses"]["coherence_false"]
        .as_u64()
        .unwrap();
    assert!(l2_false > 0, "{r:#}");
    assert_eq!(r["levels"][0]["misses"]["coherence_false"], l2_false);
    let o = cachescope(&["simulate", t, "--sweep", "levels.L2.shared=true,false"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("coh-true    coh-false        inval     memory bytes"),
        "{text}"
    );
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("levels.L2.shared=false"))
        .unwrap_or_else(|| panic!("{text}"))
        .split_whitespace()
        .collect();
    // The last four: coh-true, coh-false, inval, memory bytes.
    let shown = row[row.len() - 3].replace(',', "");
    assert_eq!(shown, l2_false.to_string(), "{text}");
    // A sweep that renames a level: the columns cannot carry one configuration's names.
    let o = cachescope(&["simulate", t, "--sweep", "levels.L1.name=A,B"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("level 1 miss%") && !text.contains("A miss%"),
        "{text}"
    );
}

#[test]
fn a_long_run_shows_progress_on_a_terminal_and_nothing_in_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    // About 25 M events: a few seconds, longer than the second before the line appears.
    let t = support::gen_trace(
        dir.path(),
        "stream.cstrace",
        "stream",
        &["--threads", "2", "--size", "64M", "--iterations", "1"],
    );
    let ts = t.to_str().unwrap();
    let o = cachescope(&["simulate", ts, "--json", "/dev/null"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "",
        "no progress output when stderr is not a terminal"
    );
    // On a terminal (util-linux `script` gives the command one).
    if !support::have("script") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI has util-linux's script"
        );
        return;
    }
    let command = format!(
        "{} simulate {ts} --json /dev/null",
        support::cachescope().display()
    );
    let o = std::process::Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        shown.contains("simulating") && shown.contains("events"),
        "{shown}"
    );
}

#[test]
fn a_field_swept_and_set_or_swept_under_two_names_is_refused() {
    // Until 2026-11-28 `--set levels.L1.size=64K --sweep levels.L1.size=16K,32K` ran the
    // sweep and showed 64 KiB in the header, a value no run used; and a field swept under two
    // names (`levels.0.size`, `levels.L1.size`) was taken for two values written two ways.
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "false-sharing", "2");
    let ts = t.to_str().unwrap();
    assert_exit_2(
        &cachescope(&[
            "simulate",
            ts,
            "--sweep",
            "levels.L1.size=16K,32K",
            "--set",
            "levels.L1.size=64K",
        ]),
        "--set levels.L1.size=64K: the field is also swept",
    );
    assert_exit_2(
        &cachescope(&[
            "simulate",
            ts,
            "--sweep",
            "levels.0.size=16K,32K",
            "--sweep",
            "levels.L1.size=8K",
        ]),
        "vary the same field",
    );
    // Other fields set next to a sweep are fine.
    let o = cachescope(&[
        "simulate",
        ts,
        "--sweep",
        "levels.L1.size=16K,32K",
        "--set",
        "coherence=mesi",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_sweep_whose_hierarchies_do_not_fit_in_memory_together_is_refused() {
    // Each of these models holds close to the simulator's limit of lines; the exact engine
    // replays a sweep's configurations at once, and eight of them took 2.25 GB (256 were
    // accepted) until 2026-11-28.
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "false-sharing", "2");
    let model = dir.path().join("big.toml");
    std::fs::write(
        &model,
        "name = \"big\"\ncores = 64\nline_size = 8\n[[levels]]\nname = \"L1\"\nsize = \"8K\"\n\
         assoc = 1024\n[[levels]]\nname = \"LLC\"\nsize = \"248M\"\nassoc = 4096\nshared = true\n",
    )
    .unwrap();
    assert_exit_2(
        &cachescope(&[
            "simulate",
            t.to_str().unwrap(),
            "--machine",
            model.to_str().unwrap(),
            "--sweep",
            "levels.L1.assoc=1,2,4,8,16",
        ]),
        "cache lines together",
    );
}

#[test]
fn the_table_shows_policies_and_back_invalidations() {
    // Until 2026-11-28 the header left out inclusion and write policy, and the table had no
    // back-invalidations (the JSON had them): an inclusive run looked like the default.
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "false-sharing", "2");
    let o = cachescope(&[
        "simulate",
        t.to_str().unwrap(),
        "--set",
        "levels.L2.inclusion=inclusive",
        "--set",
        "levels.L1.write=through",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let machine = text.lines().find(|l| l.starts_with("machine")).unwrap();
    assert!(machine.contains("Lru write-through;"), "{machine}");
    assert!(machine.ends_with("shared Lru inclusive"), "{machine}");
    assert!(text.contains("back-inval"), "{text}");
    let plain = cachescope(&["simulate", t.to_str().unwrap()]);
    let plain = String::from_utf8_lossy(&plain.stdout);
    assert!(
        !plain.contains("back-inval") && !plain.contains("inclusive"),
        "{plain}"
    );
}
