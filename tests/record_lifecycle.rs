//! How a recorded run starts and ends, other than by running a program built with
//! `cachescope cc` until it exits: launchers (a script, `env`, `sh -c`) that start such a
//! program, programs that replace themselves (exec), and programs that crash.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cachescope_schema::{EventKind, TimeUnit, TraceFile};
use support::{cachescope, cc, count, ensure_shim, events, stderr};

/// Array elements the program stores (each exactly once, by one of its threads).
const N: usize = 5000;

/// Builds `tests/record/exec_after_work.c` with gcc and OpenMP into `dir`.
fn build(dir: &Path) -> PathBuf {
    build_named(dir, "exec_after_work")
}

/// Builds `tests/record/NAME.c` with gcc and OpenMP into `dir/NAME`.
fn build_named(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/record/{name}.c"));
    let prog = dir.join(name);
    cc(
        "gcc",
        &[
            "-O2",
            "-fopenmp",
            src.to_str().unwrap(),
            "-o",
            prog.to_str().unwrap(),
        ],
    );
    prog
}

/// `cachescope record [-o TRACE] -- COMMAND` in `dir` with 2 OpenMP threads, under a time
/// limit (a recorder waiting for a writer that exec took away would hang).
fn record(dir: &Path, trace: Option<&Path>, command: &[&str]) -> Output {
    ensure_shim();
    let mut c = Command::new("timeout");
    c.arg("60").arg(cachescope()).arg("record");
    if let Some(t) = trace {
        c.arg("-o").arg(t);
    }
    c.arg("--")
        .args(command)
        .current_dir(dir)
        .env("OMP_NUM_THREADS", "2")
        .output()
        .expect("run cachescope record")
}

/// Stores to `g_array` in the trace, over all threads.
fn stores(trace: &Path) -> usize {
    events(trace)
        .iter()
        .map(|(_, evs)| count(evs, EventKind::Store))
        .sum()
}

#[test]
fn a_program_that_replaces_itself_leaves_a_complete_trace() {
    // exec took the writer thread and every buffer with it: the trace was an empty
    // `.partial` file and `record` exited 2.
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let prog = prog.to_str().unwrap();
    let n = N.to_string();
    for (how, expect) in [
        // Seven arguments after the path: the last ones are passed on the stack.
        ("execl", "1 2 3 4 5 6 7 replaced\n"),
        ("execlp", "replaced\n"),
        ("execle", "CHECK=exec\n"),
        ("execv", "replaced\n"),
        ("execvp", "replaced\n"),
        ("execve", "CHECK=exec\n"),
    ] {
        let trace = dir.path().join(format!("{how}.cstrace"));
        let o = record(dir.path(), Some(&trace), &[prog, &n, how]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{how}: {}", stderr(&o));
        assert!(out.ends_with(expect), "{how}: {out}");
        // Complete (it opens without --allow-incomplete), with every store made before the
        // exec; the replacing program is not recorded.
        assert!(stores(&trace) >= N, "{how}: {} stores", stores(&trace));
        assert!(!dir.path().join(format!("{how}.cstrace.partial")).exists());
    }
}

#[test]
fn a_failed_exec_ends_the_trace_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let trace = dir.path().join("missing.cstrace");
    let o = record(
        dir.path(),
        Some(&trace),
        &[prog.to_str().unwrap(), &N.to_string(), "missing"],
    );
    // The program's own exit status, its own error message (errno kept), and ours.
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("exec: No such file or directory"), "{err}");
    assert!(err.contains("the trace ended at the exec"), "{err}");
    assert!(stores(&trace) >= N);
}

#[test]
fn a_forked_childs_exec_leaves_the_parents_recording_alone() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let trace = dir.path().join("child.cstrace");
    let o = record(
        dir.path(),
        Some(&trace),
        &[prog.to_str().unwrap(), &N.to_string(), "child"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).ends_with("child exited 0\n"));
    // The parent recorded to its end: its main thread's exit is in the trace.
    let evs = events(&trace);
    assert_eq!(count(&evs[0].1, EventKind::ThreadExit), 1);
    assert!(stores(&trace) >= N);
}

#[test]
fn launchers_pass_the_recording_on_to_the_instrumented_program() {
    // `record` refused anything not built with `cachescope cc`; and with a launcher let
    // through, the launcher's process took the recording and lost it at its exec.
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let n = N.to_string();
    let script = dir.path().join("run.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\n./exec_after_work {N} none\n./exec_after_work 10 none\n"),
    )
    .unwrap();
    let mut perm = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&script, perm).unwrap();
    let sh_command = format!("OMP_NUM_THREADS=2 ./exec_after_work {N} none");
    for (what, command) in [
        (
            "env",
            vec!["env", "OMP_PROC_BIND=false", "./exec_after_work", &n],
        ),
        ("sh -c", vec!["sh", "-c", &sh_command]),
        // A script, whose second program is not recorded (the first one is).
        ("script", vec!["./run.sh"]),
    ] {
        let o = record(dir.path(), None, &command);
        assert!(o.status.success(), "{what}: {}", stderr(&o));
        // Named after the program the launcher starts, when the command names it.
        let trace = if what == "script" {
            assert!(
                stderr(&o).contains("an earlier program of this run is being recorded"),
                "{}",
                stderr(&o)
            );
            dir.path().join("run.sh.cstrace")
        } else {
            dir.path().join("exec_after_work.cstrace")
        };
        let t = TraceFile::open(&trace).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            t.header().program.starts_with(prog.to_str().unwrap()),
            "{what}: {}",
            t.header().program
        );
        // The shim took the time unit from the program it recorded.
        assert_eq!(t.header().time_unit, TimeUnit::Instructions, "{what}");
        assert!(stores(&trace) >= N, "{what}");
        std::fs::remove_file(&trace).unwrap();
    }
}

#[test]
fn a_trace_is_never_written_over_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let before = std::fs::read(&prog).unwrap();
    let o = record(dir.path(), Some(&prog), &[prog.to_str().unwrap()]);
    support::assert_exit_2(&o, "refusing to write the trace over the program");
    assert_eq!(std::fs::read(&prog).unwrap(), before);
}

/// Writes an executable shell script `dir/name` running `body`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    let mut perm = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm).unwrap();
    path
}

#[test]
fn a_trace_is_never_written_over_a_program_a_launcher_starts() {
    // Only `-o ./prog -- ./prog` was refused: through `env` or a script the program was
    // replaced by its trace, with exit 0.
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let before = std::fs::read(&prog).unwrap();
    let n = N.to_string();
    script(dir.path(), "run.sh", &format!("./exec_after_work {N} none"));
    for (what, command) in [
        (
            "env",
            vec!["env", "OMP_PROC_BIND=false", "./exec_after_work", &n],
        ),
        ("script", vec!["./run.sh"]),
    ] {
        let o = record(dir.path(), Some(Path::new("exec_after_work")), &command);
        support::assert_exit_2(&o, "it is a program (an executable file)");
        // Refused before the run.
        assert!(
            o.stdout.is_empty(),
            "{what}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert_eq!(std::fs::read(&prog).unwrap(), before, "{what}");
    }
    // A program that appears at the output while the run goes on (built, then started, by
    // the launcher) is not replaced either: the trace is kept beside it.
    script(
        dir.path(),
        "build.sh",
        &format!("cp exec_after_work built && ./built {N} none"),
    );
    let o = record(dir.path(), Some(Path::new("built")), &["./build.sh"]);
    support::assert_exit_2(&o, "it is the recorded program");
    assert!(stderr(&o).contains("built.partial"), "{}", stderr(&o));
    assert_eq!(std::fs::read(dir.path().join("built")).unwrap(), before);
    assert!(stores(&dir.path().join("built.partial")) >= N);
}

#[test]
fn an_output_that_is_not_a_regular_file_is_refused_before_the_run() {
    // The trace was renamed over it: a FIFO or a device (`/dev/null`, as root) became a
    // regular file holding the trace.
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let prog = prog.to_str().unwrap();
    support::run_ok(Command::new("mkfifo").arg(dir.path().join("fifo")));
    std::os::unix::fs::symlink("/dev/null", dir.path().join("null")).unwrap();
    for (name, what) in [("fifo", "a FIFO"), ("null", "a character device")] {
        let o = record(dir.path(), Some(Path::new(name)), &[prog, "10", "none"]);
        support::assert_exit_2(&o, &format!("it is {what}"));
        assert!(o.stdout.is_empty(), "{name}: the program ran");
        let meta = std::fs::symlink_metadata(dir.path().join(name)).unwrap();
        if name == "fifo" {
            assert!(std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
        } else {
            assert!(meta.is_symlink());
        }
    }
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &std::fs::metadata("/dev/null").unwrap().file_type()
    ));
}

#[test]
fn an_output_that_is_no_trace_is_refused_before_the_run() {
    // `-o main.c` for `-o main.cst`: the source became the trace. An empty file may take it.
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let prog = prog.to_str().unwrap();
    let source = dir.path().join("main.c");
    std::fs::write(&source, "int main(void) { return 0; }\n").unwrap();
    let o = record(dir.path(), Some(Path::new("main.c")), &[prog, "10", "none"]);
    support::assert_exit_2(&o, "it is not a cachescope trace");
    assert!(o.stdout.is_empty(), "the program ran");
    assert_eq!(
        std::fs::read_to_string(&source).unwrap(),
        "int main(void) { return 0; }\n"
    );
    let empty = dir.path().join("empty.cst");
    std::fs::write(&empty, "").unwrap();
    let o = record(
        dir.path(),
        Some(Path::new("empty.cst")),
        &[prog, &N.to_string(), "none"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stores(&empty) >= N);
}

#[test]
fn an_output_that_links_to_a_file_replaces_the_file_not_the_link() {
    // As every other command's outputs; until 2026-11-28 the trace replaced the link itself.
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let prog = prog.to_str().unwrap();
    std::fs::create_dir(dir.path().join("traces")).unwrap();
    let target = dir.path().join("traces").join("t.cstrace");
    std::fs::write(&target, support::earlier_trace()).unwrap();
    std::os::unix::fs::symlink("traces/t.cstrace", dir.path().join("link.cstrace")).unwrap();
    let o = record(
        dir.path(),
        Some(Path::new("link.cstrace")),
        &[prog, &N.to_string(), "none"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let meta = std::fs::symlink_metadata(dir.path().join("link.cstrace")).unwrap();
    assert!(meta.is_symlink());
    assert!(stores(&target) >= N);
}

#[test]
fn a_launcher_that_changes_directory_leaves_the_trace_at_the_output() {
    // The shim got the temporary trace's name relative to `record`'s directory, and created
    // it relative to the program's: the trace was lost in `sub/`, and `record` exited 2.
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    script(
        dir.path(),
        "cdrun.sh",
        &format!("cd sub && ../exec_after_work {N} none"),
    );
    let o = record(dir.path(), Some(Path::new("cd.cstrace")), &["./cdrun.sh"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stores(&dir.path().join("cd.cstrace")) >= N);
    let left: Vec<_> = std::fs::read_dir(dir.path().join("sub")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn an_output_directory_the_trace_cannot_be_created_in_is_refused_before_the_run() {
    // The program ran to its end unrecorded, then `record` said the shim was not loaded.
    // sysfs refuses new files even to root, whom permissions would not stop.
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let o = record(
        dir.path(),
        Some(Path::new("/sys/t.cstrace")),
        &[prog.to_str().unwrap(), "10", "none"],
    );
    support::assert_exit_2(&o, "cannot create the trace in /sys");
    assert!(o.stdout.is_empty(), "the program ran");
}

#[test]
fn a_launcher_that_starts_no_instrumented_program_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    // Without --follow, an uninstrumented program that names none is refused at once.
    let o = record(dir.path(), None, &["true"]);
    support::assert_exit_2(&o, "was not built with `cachescope cc`");
    assert!(stderr(&o).contains("--follow"), "{}", stderr(&o));
    // With it, the run says afterwards that nothing was recorded.
    ensure_shim();
    let o = Command::new(cachescope())
        .args(["record", "--follow", "--", "true"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    support::assert_exit_2(&o, "no program built with `cachescope cc` ran under");
}

#[test]
fn a_program_that_crashes_leaves_a_complete_trace_and_dies_of_its_signal() {
    // A crash kept only the full buffers: a program that died early left an empty `.partial`.
    let dir = tempfile::tempdir().unwrap();
    let prog = build_named(dir.path(), "crash");
    let n = N.to_string();
    for (how, sig, name) in [
        // A null store in a worker thread, a failed assert in main (abort), a division by
        // zero, and raise(SIGSEGV) (a signal the kernel did not raise for a fault).
        ("segv", 11, "SIGSEGV"),
        ("abort", 6, "SIGABRT"),
        ("fpe", 8, "SIGFPE"),
        ("raise", 11, "SIGSEGV"),
        // The handler runs on the alternate stack the shim gives each recording thread.
        ("overflow", 11, "SIGSEGV"),
    ] {
        let trace = dir.path().join(format!("{how}.cstrace"));
        // An earlier recording at the output stays: a run cut short is kept apart.
        std::fs::write(&trace, support::earlier_trace()).unwrap();
        let start = std::time::Instant::now();
        let o = record(dir.path(), Some(&trace), &[prog.to_str().unwrap(), &n, how]);
        // The faulting thread waits for the writer, which ends the process as soon as the
        // trace is complete; the wait's own limit is 10 s.
        assert!(
            start.elapsed().as_secs_f64() < 8.0,
            "{how}: {:?}",
            start.elapsed()
        );
        assert_eq!(o.status.code(), Some(128 + sig), "{how}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "killed by signal {sig} ({name}); the trace ends there"
            )),
            "{how}: {err}"
        );
        assert_eq!(
            std::fs::read(&trace).unwrap(),
            support::earlier_trace(),
            "{how}"
        );
        // Complete (opens without --allow-incomplete), with every store before the crash.
        let partial = dir.path().join(format!("{how}.cstrace.partial"));
        assert!(stores(&partial) >= N, "{how}: {} stores", stores(&partial));
    }
}

#[test]
fn a_driver_not_built_for_recording_records_the_instrumented_library_it_links() {
    // A test harness built with plain gcc, linking a library built with `cachescope cc`:
    // `record` refused it, and with --follow the shim only looked at the executable.
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/record");
    let lib = dir.path().join("libplug.so");
    cc(
        "gcc",
        &[
            "-O2",
            "-shared",
            "-fPIC",
            root.join("dl_counters_plugin.c").to_str().unwrap(),
            "-o",
            lib.to_str().unwrap(),
        ],
    );
    let driver = dir.path().join("driver");
    support::run_ok(
        Command::new("gcc")
            .args(["-O2", "-pthread"])
            .arg(root.join("linked_driver.c"))
            .arg("-o")
            .arg(&driver)
            .arg(format!("-L{}", dir.path().display()))
            .arg(format!("-Wl,-rpath,{}", dir.path().display()))
            .arg("-lplug"),
    );
    let d = driver.to_str().unwrap();
    let o = record(dir.path(), None, &[d]);
    support::assert_exit_2(
        &o,
        "uses libraries built with `cachescope cc`, pass --follow",
    );
    ensure_shim();
    let trace = dir.path().join("driver.cstrace");
    let o = Command::new(cachescope())
        .args(["record", "--follow", "-o"])
        .arg(&trace)
        .args(["--", d])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "linked\n");
    // The library's accesses: each thread's 200,000 updates of its counter.
    assert!(stores(&trace) >= 400_000, "{} stores", stores(&trace));
    let t = TraceFile::open(&trace).unwrap();
    assert_eq!(t.header().time_unit, TimeUnit::Instructions);
}

#[test]
fn a_signal_sent_to_record_reaches_the_program_and_its_trace_is_kept() {
    // `kill PID-of-record` (a job manager's SIGTERM, `timeout -s INT`) was swallowed: the
    // program ran on to its end and replaced the output.
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/record/lifecycle.c");
    let prog = dir.path().join("lifecycle");
    cc(
        "gcc",
        &["-O1", src.to_str().unwrap(), "-o", prog.to_str().unwrap()],
    );
    ensure_shim();
    for (sig, name) in [(15, "TERM"), (2, "INT")] {
        let trace = dir.path().join(format!("spin-{name}.cstrace"));
        let pidfile = dir.path().join(format!("pid-{name}"));
        let mut record = Command::new(cachescope())
            .arg("record")
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .arg(&prog)
            .arg("spin")
            .arg(&pidfile)
            .spawn()
            .unwrap();
        // The program runs (it wrote its pid) before `record` is signalled.
        while std::fs::read_to_string(&pidfile).map_or(true, |s| s.trim().is_empty()) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        support::run_ok(Command::new("kill").args([&format!("-{name}"), &record.id().to_string()]));
        // Before, the program spun on for ever: give up after a minute.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(s) = record.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = Command::new("pkill")
                    .args(["-f", prog.to_str().unwrap()])
                    .status();
                panic!("SIG{name} sent to record did not end the program");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        assert_eq!(status.code(), Some(128 + sig), "SIG{name}");
        let partial = dir.path().join(format!("spin-{name}.cstrace.partial"));
        assert!(stores(&partial) > 1000, "SIG{name}");
    }
}
