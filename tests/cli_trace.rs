//! The `cachescope trace` commands as a user runs them: exit codes, messages, outputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cachescope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cachescope"))
        .args(args)
        .output()
        .expect("run cachescope")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn gen(dir: &Path, workload: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(format!("{workload}.cstrace"));
    let mut args = vec!["trace", "gen", workload, "-o", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = cachescope(&args);
    assert!(o.status.success(), "gen failed: {}", stderr(&o));
    path
}

/// A bad-input run: exit code 2, a message naming the file, never a panic.
fn assert_bad_input(o: &Output, file: &Path, expect: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(
        err.contains(file.file_name().unwrap().to_str().unwrap()),
        "no file name: {err}"
    );
    assert!(err.contains(expect), "expected {expect:?} in: {err}");
}

#[test]
fn gen_info_dump_verify_work() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(
        dir.path(),
        "producer-consumer",
        &["--threads", "3", "--size", "4K", "--iterations", "2"],
    );
    let o = cachescope(&["trace", "info", t.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["threads"].as_array().unwrap().len(), 3);
    // 2 iterations × 3 threads × 1 lock acquisition.
    assert_eq!(v["events_by_kind"]["lock_acquire"], 6);
    let text =
        String::from_utf8(cachescope(&["trace", "info", t.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("threads      3"), "{text}");

    let o = cachescope(&["trace", "dump", t.to_str().unwrap(), "--limit", "5"]);
    assert!(o.status.success());
    assert_eq!(String::from_utf8(o.stdout).unwrap().lines().count(), 5);
    let o = cachescope(&[
        "trace",
        "dump",
        t.to_str().unwrap(),
        "--thread",
        "2",
        "--json",
        "--limit",
        "3",
    ]);
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8(o.stdout).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(
        (first["thread"].as_u64(), first["event"].as_str()),
        (Some(2), Some("thread_start"))
    );
    let o = cachescope(&[
        "trace",
        "dump",
        t.to_str().unwrap(),
        "--thread",
        "0",
        "--json",
        "--limit",
        "1",
    ]);
    let alloc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(alloc["event"], "alloc");
    assert_eq!(alloc["addr"].as_u64(), Some(0x7f00_0000_0000));

    let o = cachescope(&["trace", "verify", t.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(String::from_utf8(o.stdout).unwrap().starts_with("OK"));
}

#[test]
fn truncated_trace_exits_2_and_verify_reports_recoverable() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "stream", &["--size", "256K"]);
    let bytes = std::fs::read(&t).unwrap();
    let cut = dir.path().join("cut.cstrace");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let c = cut.to_str().unwrap();
    assert_bad_input(&cachescope(&["trace", "info", c]), &cut, "truncated");
    assert_bad_input(&cachescope(&["trace", "dump", c]), &cut, "byte offset");
    let o = cachescope(&["trace", "verify", c, "--json"]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["recoverable_events"].as_u64().unwrap() > 0);
    assert_eq!(v["damage_kind"], "truncated");
    // The recoverable part is usable on request.
    let o = cachescope(&["trace", "info", c, "--allow-incomplete", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let info: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(info["incomplete"], true);
    assert_eq!(info["events"], v["recoverable_events"]);
}

#[test]
fn every_truncation_point_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(
        dir.path(),
        "false-sharing",
        &["--size", "1K", "--iterations", "1"],
    );
    let bytes = std::fs::read(&t).unwrap();
    let cut = dir.path().join("cut.cstrace");
    for n in 0..bytes.len() {
        std::fs::write(&cut, &bytes[..n]).unwrap();
        let o = cachescope(&["trace", "info", cut.to_str().unwrap()]);
        assert_bad_input(&o, &cut, "error:");
    }
}

#[test]
fn corrupt_and_foreign_files_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let t = gen(dir.path(), "random", &["--size", "64K"]);
    let mut bytes = std::fs::read(&t).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    let bad = dir.path().join("flipped.cstrace");
    std::fs::write(&bad, &bytes).unwrap();
    assert_bad_input(
        &cachescope(&["trace", "info", bad.to_str().unwrap()]),
        &bad,
        "checksum mismatch",
    );
    assert_bad_input(
        &cachescope(&["trace", "verify", bad.to_str().unwrap()]),
        &bad,
        "",
    );

    let foreign = dir.path().join("notes.txt");
    std::fs::write(&foreign, "hello, not a trace\n").unwrap();
    assert_bad_input(
        &cachescope(&["trace", "info", foreign.to_str().unwrap()]),
        &foreign,
        "bad magic",
    );

    let missing = dir.path().join("missing.cstrace");
    assert_bad_input(
        &cachescope(&["trace", "info", missing.to_str().unwrap()]),
        &missing,
        "I/O error",
    );
}

#[test]
fn bad_arguments_exit_2() {
    let o = cachescope(&["trace", "gen", "no-such-workload", "-o", "/tmp/x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown workload"), "{}", stderr(&o));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.cstrace");
    let o = cachescope(&[
        "trace",
        "gen",
        "stream",
        "-o",
        out.to_str().unwrap(),
        "--threads",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("threads must be"), "{}", stderr(&o));
}

#[test]
fn gen_writes_to_dev_null_without_reading_it_back() {
    // Until 2026-11-28: exit 2, "re-reading /dev/null: not a regular file", after writing.
    let o = cachescope(&["trace", "gen", "stream", "-o", "/dev/null", "--size", "4K"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("not read back"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn trace_writers_replace_traces_but_not_other_files() {
    // Until 2026-11-28 `trace gen` and `import lackey` renamed their trace over any file:
    // `-o main.c` cost the source (record already refused it).
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("main.c");
    std::fs::write(&source, "int main(void) { return 0; }\n").unwrap();
    let log = dir.path().join("run.lackey");
    std::fs::write(&log, "I  04000bd0,3\n L 1000,4\n").unwrap();
    let (s, l) = (source.to_str().unwrap(), log.to_str().unwrap());
    for args in [
        vec!["trace", "gen", "stream", "-o", s, "--size", "4K"],
        vec!["import", "lackey", l, "-o", s],
    ] {
        let o = cachescope(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("not a cachescope trace"),
            "{}",
            stderr(&o)
        );
        assert!(stderr(&o).contains("main.c"), "{}", stderr(&o));
        assert_eq!(
            std::fs::read_to_string(&source).unwrap(),
            "int main(void) { return 0; }\n",
            "{args:?} changed the file"
        );
    }
    // A previous trace and an empty file (`mktemp`) take the new trace.
    let trace = dir.path().join("t.cstrace");
    std::fs::write(&trace, "").unwrap();
    let t = trace.to_str().unwrap();
    for args in [
        vec!["trace", "gen", "stream", "-o", t, "--size", "4K"],
        vec!["import", "lackey", l, "-o", t],
    ] {
        let o = cachescope(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let o = cachescope(&["trace", "info", t]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn info_quotes_arguments_with_spaces() {
    // The header's arguments: one argument `my log.lackey` must not read as two.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("my log.lackey");
    std::fs::write(&log, "I  04000bd0,3\n L 1000,4\n").unwrap();
    let t = dir.path().join("t.cstrace");
    let o = cachescope(&[
        "import",
        "lackey",
        log.to_str().unwrap(),
        "-o",
        t.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cachescope(&["trace", "info", t.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("my log.lackey'"), "{text}");
}
