//! Helpers shared by the tests that build and record real programs.
#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use cachescope_schema::{Event, EventKind, ThreadId, TraceFile};

/// The `cachescope` binary under test.
pub fn cachescope() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cachescope"))
}

/// Builds the shim next to the binary (`cargo test` does not build cdylibs of other packages).
pub fn ensure_shim() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "cachescope-shim"]);
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        let o = cmd
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("running cargo build -p cachescope-shim");
        assert!(
            o.status.success(),
            "building the shim failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    });
}

/// Whether `tool --version` runs.
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The C compilers to test with: gcc always; clang-14 when installed (CI installs it).
pub fn compilers() -> Vec<&'static str> {
    let mut v = vec!["gcc"];
    if have("clang-14") {
        v.push("clang-14");
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have clang-14 (scripts/system-deps.sh installs it)"
        );
        eprintln!("note: clang-14 missing, testing gcc only");
    }
    v
}

/// Runs a command, panicking with its stderr if it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `cachescope cc --compiler COMPILER ARGS...`.
pub fn cc(compiler: &str, args: &[&str]) -> Output {
    ensure_shim();
    run_ok(
        Command::new(cachescope())
            .arg("cc")
            .args(["--compiler", compiler])
            .args(args),
    )
}

/// `cachescope record -o TRACE -- PROGRAM ARGS` with `threads` OpenMP threads; returns the
/// program's stdout.
pub fn record(trace: &Path, program: &Path, args: &[&str], threads: u32) -> String {
    let o =
        run_ok(record_command(trace, program, args).env("OMP_NUM_THREADS", threads.to_string()));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `cachescope record -o TRACE -- PROGRAM ARGS...`, not run yet (for a test that looks at a
/// failing run's status or signals the program).
pub fn record_command(trace: &Path, program: &Path, args: &[&str]) -> Command {
    ensure_shim();
    let mut cmd = Command::new(cachescope());
    cmd.arg("record")
        .arg("-o")
        .arg(trace)
        .arg("--")
        .arg(program)
        .args(args);
    cmd
}

/// All events of every thread, by thread.
pub fn events(trace: &Path) -> Vec<(ThreadId, Vec<Event>)> {
    let t = TraceFile::open(trace).unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
    let ids: Vec<ThreadId> = t.thread_ids().collect();
    ids.into_iter()
        .map(|id| {
            let evs = t
                .thread_events(id)
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            (id, evs)
        })
        .collect()
}

/// Number of events of `kind` in `evs`.
pub fn count(evs: &[Event], kind: EventKind) -> usize {
    evs.iter().filter(|e| e.kind() == kind).count()
}

/// Runs `cachescope ARGS` and returns its output.
pub fn cli(args: &[&str]) -> Output {
    Command::new(cachescope())
        .args(args)
        .output()
        .expect("run cachescope")
}

/// Its stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts exit code 2 (bad input), no panic, and `expect` in the message.
pub fn assert_exit_2(o: &Output, expect: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(expect), "expected {expect:?} in {err}");
}

/// Generates a synthetic trace `dir/name` with `trace gen WORKLOAD` and `extra` arguments.
pub fn gen_trace(dir: &Path, name: &str, workload: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let mut args = vec!["trace", "gen", workload, "-o", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = cli(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    path
}

/// What stands for an earlier recording at an output: a trace's first bytes (a new recording
/// replaces only a trace, or an empty file).
pub fn earlier_trace() -> Vec<u8> {
    [&cachescope_schema::frame::MAGIC[..], b" an earlier trace"].concat()
}
