//! `cachescope cc` + `cachescope record` on tiny C programs, with gcc and clang: exact facts
//! about what the trace must contain.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use cachescope_schema::{AccessKind, Event, EventKind, TraceFile};
use support::{cc, cli, compilers, count, events, have, record, record_command, run_ok, stderr};

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/record")
        .join(name)
}

/// 1-based line of the first line of `file` containing `marker`.
fn line_of(file: &Path, marker: &str) -> u32 {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines().position(|l| l.contains(marker)).unwrap() as u32 + 1
}

/// `file:line` of a code position, through the trace's module map and binutils' addr2line.
fn source_line(trace: &Path, pc: u64) -> (String, u32) {
    let t = TraceFile::open(trace).unwrap();
    let m = t
        .modules()
        .find(|m| m.start <= pc && pc < m.end)
        .unwrap_or_else(|| panic!("pc {pc:#x} is in no module of the trace"));
    let o = run_ok(
        Command::new("addr2line")
            .arg("-e")
            .arg(&m.path)
            .arg(format!("{:#x}", pc - m.load_bias)),
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let loc = text.lines().next().unwrap_or_default();
    let (file, line) = loc.rsplit_once(':').unwrap();
    let line = line.split_whitespace().next().unwrap().parse().unwrap_or(0);
    (file.to_string(), line)
}

/// Builds `src` with `cachescope cc --compiler COMPILER FLAGS` into `dir/name`.
fn build(
    dir: &Path,
    name: impl AsRef<Path>,
    compiler: &str,
    src: &Path,
    flags: &[&str],
) -> PathBuf {
    let prog = dir.join(name);
    let mut args = flags.to_vec();
    args.extend([src.to_str().unwrap(), "-o", prog.to_str().unwrap()]);
    cc(compiler, &args);
    prog
}

/// Builds the pthreads program `src` with `compiler` at `opt` (`-g -pthread`) into
/// `dir/TAG-COMPILER-OPT`, records it (no arguments), checks that it printed `printed`, and
/// returns the trace and that name, for assertion messages.
fn recorded_c(
    dir: &Path,
    tag: &str,
    compiler: &str,
    opt: &str,
    src: &Path,
    printed: &str,
) -> (PathBuf, String) {
    let name = format!("{tag}-{compiler}{opt}");
    let prog = build(dir, &name, compiler, src, &[opt, "-g", "-pthread"]);
    let trace = dir.join(format!("{name}.cstrace"));
    assert_eq!(record(&trace, &prog, &[], 1), printed, "{name}");
    (trace, name)
}

#[test]
fn n_stores_to_a_global_array_are_n_store_events_at_the_right_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("stores.c");
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("stores-{compiler}"),
            compiler,
            &src,
            &["-O2"],
        );
        let trace = dir.path().join(format!("stores-{compiler}.cstrace"));
        let n = 1000u64;
        let out = record(&trace, &prog, &[&n.to_string()], 1);
        let base = u64::from_str_radix(
            out.trim()
                .strip_prefix("array=0x")
                .expect("program prints array=0x..."),
            16,
        )
        .unwrap();
        let all = events(&trace);
        assert_eq!(all.len(), 1, "{compiler}: one thread");
        let stores: Vec<_> = all[0]
            .1
            .iter()
            .filter_map(|e| match e {
                Event::Access(a)
                    if a.kind == AccessKind::Store
                        && a.addr >= base
                        && a.addr < base + 8 * 4096 =>
                {
                    Some(*a)
                }
                _ => None,
            })
            .collect();
        assert_eq!(stores.len() as u64, n, "{compiler}: stores into g_array");
        for (i, a) in stores.iter().enumerate() {
            assert_eq!(a.addr, base + 8 * i as u64, "{compiler}: store {i}");
            assert_eq!(a.size, 8, "{compiler}: store {i}");
        }
        // The compiler may peel or unroll the loop: several store instructions, one line.
        let mut pcs: Vec<u64> = stores
            .iter()
            .map(|a| a.pc.expect("stores have code positions").addr())
            .collect();
        pcs.sort_unstable();
        pcs.dedup();
        for pc in pcs {
            let (file, line) = source_line(&trace, pc);
            assert!(file.ends_with("stores.c"), "{compiler}: {file}");
            assert_eq!(
                line,
                line_of(&src, "STORE-LINE"),
                "{compiler}: line of {pc:#x}"
            );
        }
        // Time is in instructions and the loop's instructions were counted.
        let t = TraceFile::open(&trace).unwrap();
        assert_eq!(t.header().time_unit.name(), "instructions");
        let units: u64 = all[0]
            .1
            .iter()
            .map(|e| match e {
                Event::Advance { units, .. } => *units,
                _ => 0,
            })
            .sum();
        assert!(
            units >= 2 * n,
            "{compiler}: {units} instructions for {n} iterations"
        );
    }
}

#[test]
fn record_keeps_the_exit_code_and_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(
        dir.path(),
        "stores",
        "gcc",
        source("stores.c").as_path(),
        &["-O1"],
    );
    let trace = dir.path().join("t.cstrace");
    let o = record_command(&trace, &prog, &["10", "7"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("array=0x"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("recorded 1 thread(s)"), "{err}");
    assert!(trace.is_file());
    // Not instrumented: a clear error, exit 2, nothing written.
    let plain = dir.path().join("plain");
    run_ok(
        Command::new("gcc")
            .arg(source("stores.c"))
            .arg("-o")
            .arg(&plain),
    );
    let o = Command::new(support::cachescope())
        .args(["record", "-o"])
        .arg(dir.path().join("p.cstrace"))
        .arg("--")
        .arg(&plain)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not built with `cachescope cc`"));
    assert!(!dir.path().join("p.cstrace").exists());
    // A read-only trace is not replaced, and the program is not run for nothing (renaming
    // over the file would need only the directory's permission); nor is a directory.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&trace, std::fs::Permissions::from_mode(0o444)).unwrap();
    let before = std::fs::read(&trace).unwrap();
    for out in [trace.clone(), dir.path().to_path_buf()] {
        let o = Command::new(support::cachescope())
            .args(["record", "-o"])
            .arg(&out)
            .arg("--")
            .arg(&prog)
            .args(["10", "7"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let says = if out == trace {
            "read-only"
        } else {
            "directory"
        };
        assert!(err.contains(says), "{err}");
        assert!(o.stdout.is_empty(), "the program ran");
    }
    assert_eq!(std::fs::read(&trace).unwrap(), before);
}

#[test]
fn k_openmp_barriers_give_k_barrier_events_per_thread() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("omp_barriers.c");
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("bar-{compiler}"),
            compiler,
            src.as_path(),
            &["-O2", "-fopenmp"],
        );
        for threads in [2u32, 3] {
            let trace = dir.path().join(format!("bar-{compiler}-{threads}.cstrace"));
            let k = 5;
            let out = record(&trace, &prog, &[&k.to_string()], threads);
            assert_eq!(out.trim(), format!("team={threads} k={k}"));
            let all = events(&trace);
            assert_eq!(
                all.len() as u32,
                threads,
                "{compiler}: threads in the trace"
            );
            for (i, (tid, evs)) in all.iter().enumerate() {
                // K explicit barriers, plus the region's fork and join, which the tracer
                // records as barriers of the team.
                assert_eq!(
                    count(evs, EventKind::BarrierEnter),
                    k + 2,
                    "{compiler}, {threads} threads: barrier enters of thread {tid}"
                );
                // libomp reports a worker's leave of the join only when it wakes it for a
                // next region: after the last one, the worker's join stays open (it arrived
                // and ended). The primary thread (the first) leaves it.
                let open = usize::from(compiler != "gcc" && i > 0);
                assert_eq!(
                    count(evs, EventKind::BarrierLeave),
                    k + 2 - open,
                    "{compiler}, {threads} threads: barrier leaves of thread {tid}"
                );
                assert_eq!(count(evs, EventKind::RegionBegin), 1);
                assert_eq!(count(evs, EventKind::RegionEnd), 1 - open);
            }
            // Replay aligns the threads at every barrier without deadlock.
            run_ok(
                Command::new(support::cachescope())
                    .arg("simulate")
                    .arg(&trace),
            );
        }
    }
}

#[test]
fn pthreads_create_join_barriers_and_locks() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("pthreads.c");
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("pt-{compiler}"),
            compiler,
            src.as_path(),
            &["-O2", "-pthread"],
        );
        let trace = dir.path().join(format!("pt-{compiler}.cstrace"));
        let (t, k) = (3, 4);
        let out = record(&trace, &prog, &[&t.to_string(), &k.to_string()], 1);
        assert_eq!(out.trim(), format!("counter={}", t * k));
        let all = events(&trace);
        assert_eq!(all.len(), t + 1, "{compiler}: main + {t} threads");
        let main = &all[0].1;
        assert_eq!(count(main, EventKind::ThreadCreate), t);
        assert_eq!(count(main, EventKind::ThreadJoin), t);
        for (tid, evs) in &all[1..] {
            assert_eq!(evs.first(), Some(&Event::ThreadStart), "thread {tid}");
            assert_eq!(evs.last(), Some(&Event::ThreadExit), "thread {tid}");
            assert_eq!(count(evs, EventKind::BarrierEnter), k, "thread {tid}");
            assert_eq!(count(evs, EventKind::LockAcquire), k, "thread {tid}");
            assert_eq!(count(evs, EventKind::LockRelease), k, "thread {tid}");
        }
        run_ok(
            Command::new(support::cachescope())
                .arg("simulate")
                .arg(&trace),
        );
    }
}

#[test]
fn hand_overs_by_c11_threads_semaphores_clockwait_and_other_locks_are_ordered() {
    // A worker fills one half of a line, hands it over, and `main` fills the other half
    // only then. Before 2026-11-29: C11 threads were not recorded at all (no creation, join
    // or lock events: glibc calls its own pthread code), semaphores and
    // `pthread_cond_clockwait` gave no order, and the estimate ignored the order waits give
    // within a segment, so every one of these was flagged as false sharing.
    let dir = tempfile::tempdir().unwrap();
    let src = source("handovers.c");
    let printed = "19999900000 19999900000\n";
    for compiler in compilers() {
        let name = format!("handovers-{compiler}");
        let prog = build(
            dir.path(),
            &name,
            compiler,
            &src,
            &["-O2", "-g", "-pthread"],
        );
        for mode in ["c11", "sem", "clockwait", "rwlock", "spin", "none"] {
            let trace = dir.path().join(format!("{name}-{mode}.cstrace"));
            assert_eq!(record(&trace, &prog, &[mode], 1), printed, "{name} {mode}");
            let all = events(&trace);
            let what = format!("{name} {mode}");
            assert_eq!(all.len(), 2, "{what}: main and the worker");
            let (main, worker) = (&all[0].1, &all[1].1);
            assert_eq!(count(main, EventKind::ThreadCreate), 1, "{what}");
            assert_eq!(count(main, EventKind::ThreadJoin), 1, "{what}");
            assert_eq!(worker.first(), Some(&Event::ThreadStart), "{what}");
            let handed = count(worker, EventKind::LockAcquire);
            assert_eq!(handed > 0, mode != "none", "{what}: {handed} acquisitions");
            // Read-write and spin locks are recorded (replay follows them) but order nothing
            // for the audit: which thread took a lock first is the run's doing. Their
            // hand-over is a flag polled under a lock, flagged like any polled flag
            // (docs/audit.md, "Limits").
            if mode == "rwlock" || mode == "spin" {
                continue;
            }
            let (code, json, _) = audit_json(&trace);
            let findings = format!("{what}: {:#}", json["findings"]);
            let false_sharing: Vec<_> = json["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["kind"] == "false_sharing")
                .collect();
            if mode == "none" {
                assert_eq!(code, 1, "{findings}");
                assert!(
                    false_sharing.iter().any(|f| f["object"]["name"] == "box"),
                    "{findings}"
                );
            } else {
                assert_eq!(code, 0, "{findings}");
                assert!(false_sharing.is_empty(), "{findings}");
            }
        }
    }
}

#[test]
fn tasks_ordered_by_taskwait_depend_or_taskgroup_are_not_concurrent() {
    // Two tasks write neighbouring counters one after the other, as `taskwait`, `depend` or
    // a `taskgroup` orders them (also a task its task created), or a task of a `taskloop`
    // between two stretches of its creator's. Before 2026-11-29 that order was not recorded: whenever the tasks ran on
    // different threads they counted as concurrent and were flagged (a review's programs,
    // about half of the runs; gcc's taskloop and a taskgroup's grandchild until later that
    // day, every run). Each build is recorded
    // until the tasks ran on different threads (the program lets the other thread take
    // them).
    let dir = tempfile::tempdir().unwrap();
    let src = source("omp_task_order.c");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let name = format!("task-order-{compiler}{opt}");
            let prog = build(dir.path(), &name, compiler, &src, &[opt, "-g", "-fopenmp"]);
            for mode in ["taskwait", "depend", "taskgroup", "grandchild", "taskloop"] {
                let what = format!("{name} {mode}");
                let mut apart = false;
                for attempt in 0..6 {
                    let trace = dir.path().join(format!("{name}-{mode}-{attempt}.cstrace"));
                    let out = record(&trace, &prog, &[mode], 2);
                    assert!(out.ends_with("2000000 2000000\n"), "{what}: {out}");
                    let (code, json, _) = audit_json(&trace);
                    assert_eq!(code, 0, "{what} ({out}): {:#}", json["findings"]);
                    if out.starts_with("ran 0 1") || out.starts_with("ran 1 0") {
                        apart = true;
                        break;
                    }
                }
                assert!(apart, "{what}: the tasks never ran on different threads");
            }
            // With cancellation enabled the shim has no join barrier of its own and tasks
            // still queued at a region's end run after its recorded end: they are not ordered
            // then (ordered, the trace did not replay: every gcc run, review 2026-11-29).
            let trace = dir.path().join(format!("{name}-cancellation.cstrace"));
            let out = run_ok(
                record_command(&trace, &prog, &["taskloop"])
                    .env("OMP_NUM_THREADS", "2")
                    .env("OMP_CANCELLATION", "true"),
            );
            assert!(
                String::from_utf8_lossy(&out.stdout).ends_with("2000000 2000000\n"),
                "{name} with cancellation"
            );
            let sim = cli(&["simulate", trace.to_str().unwrap()]);
            assert!(
                sim.status.success(),
                "{name} with cancellation: {}",
                stderr(&sim)
            );
        }
    }
}

#[test]
fn a_taskloop_libgomp_runs_at_once_needs_no_more_stack_recorded() {
    // libgomp runs a taskloop of more tasks than it queues on the calling thread, after
    // copying every task's block onto the stack. Until 2026-11-29 the recorder's bigger
    // blocks overflowed an 8 MiB stack at 21,742 such tasks where the program ran natively
    // up to 28,310 (review); such loops now keep the program's blocks.
    let dir = tempfile::tempdir().unwrap();
    let prog = build(
        dir.path(),
        "taskloop-stack",
        "g++",
        source("omp_taskloop_stack.cpp").as_path(),
        &["-O2", "-g", "-fopenmp"],
    );
    let trace = dir.path().join("taskloop-stack.cstrace");
    support::ensure_shim();
    let command = format!(
        "ulimit -s 8192 && exec '{}' record -o '{}' -- '{}' 25000",
        support::cachescope().display(),
        trace.display(),
        prog.display()
    );
    let o = Command::new("bash")
        .args(["-c", &command])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "n=25000 sum=312624996\n"
    );
}

#[test]
fn nest_locks_and_ordered_sections_are_locks_with_either_runtime() {
    // gcc's libgomp recorded neither (the replay ran the ordered sections and the nest-locked
    // updates of both threads at once); LLVM libomp's nest locks came through OMPT.
    let dir = tempfile::tempdir().unwrap();
    let src = source("omp_nest_ordered.c");
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("nest-{compiler}"),
            compiler,
            src.as_path(),
            &["-O2", "-fopenmp"],
        );
        let trace = dir.path().join(format!("nest-{compiler}.cstrace"));
        let n = 50;
        let out = record(&trace, &prog, &[&n.to_string()], 2);
        assert_eq!(
            out.trim(),
            "counter=102 ordered=16 in_order=1",
            "{compiler}"
        );
        // Acquisitions per lock object, over both threads.
        let mut per_lock: std::collections::BTreeMap<u64, (usize, usize)> = Default::default();
        for (_, evs) in events(&trace) {
            for e in evs {
                match e {
                    Event::LockAcquire { lock, .. } => per_lock.entry(lock).or_default().0 += 1,
                    Event::LockRelease { lock } => per_lock.entry(lock).or_default().1 += 1,
                    _ => {}
                }
            }
        }
        let mut counts: Vec<(usize, usize)> = per_lock.values().copied().collect();
        counts.sort();
        // The nest lock: each thread's N outermost acquisitions and the one around the test
        // (its nested ones are not synchronization); the ordered section: 16 turns.
        assert!(
            counts.contains(&(2 * (n + 1), 2 * (n + 1))),
            "{compiler}: {per_lock:x?}"
        );
        assert!(counts.contains(&(16, 16)), "{compiler}: {per_lock:x?}");
        // Replay follows the recorded order of every lock without deadlock.
        run_ok(
            Command::new(support::cachescope())
                .arg("simulate")
                .arg(&trace),
        );
    }
}

#[test]
fn an_openmp_atomic_counter_computes_the_same_with_and_without_the_shim() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("omp_atomic.c");
    for compiler in compilers() {
        let native = dir.path().join(format!("atomic-native-{compiler}"));
        run_ok(
            Command::new(compiler)
                .args(["-O2", "-fopenmp"])
                .arg(&src)
                .arg("-o")
                .arg(&native),
        );
        let prog = build(
            dir.path(),
            format!("atomic-{compiler}"),
            compiler,
            src.as_path(),
            &["-O2", "-fopenmp"],
        );
        let n = "200000";
        let expected = String::from_utf8(
            run_ok(Command::new(&native).arg(n).env("OMP_NUM_THREADS", "2")).stdout,
        )
        .unwrap();
        // sum of i % 7 for i < 200000 (= 7 * 28571 + 3): 28571 * 21 + 0 + 1 + 2.
        assert_eq!(expected.trim(), "counter=599994 fsum=100000.0");
        // Instrumented, not recording (the shim is inert but still performs the atomics).
        let inert = String::from_utf8(
            run_ok(Command::new(&prog).arg(n).env("OMP_NUM_THREADS", "2")).stdout,
        )
        .unwrap();
        assert_eq!(inert, expected, "{compiler}: instrumented, not recording");
        let trace = dir.path().join(format!("atomic-{compiler}.cstrace"));
        let recorded = record(&trace, &prog, &[n], 2);
        assert_eq!(recorded, expected, "{compiler}: recording");
        let all = events(&trace);
        let rmw: usize = all
            .iter()
            .map(|(_, e)| count(e, EventKind::AtomicRmw))
            .sum();
        assert!(
            rmw >= 200_000,
            "{compiler}: {rmw} atomic RMWs for 200000 atomic adds"
        );
        // The `critical` lock is taken once per iteration (runtimes take a few locks of their
        // own at start-up, e.g. libomp's pthread mutexes).
        let mut per_lock = std::collections::BTreeMap::<u64, usize>::new();
        for (_, evs) in &all {
            for e in evs {
                if let Event::LockAcquire { lock, .. } = e {
                    *per_lock.entry(*lock).or_default() += 1;
                }
            }
        }
        let critical = per_lock.values().copied().max().unwrap_or(0);
        assert_eq!(
            critical, 200_000,
            "{compiler}: one critical section per iteration"
        );
    }
}

#[test]
fn an_openmp_program_that_calls_no_omp_function_keeps_its_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("omp_pragma_only.c");
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("pragma-{compiler}"),
            compiler,
            &src,
            &["-O2", "-fopenmp"],
        );
        // Natively (the shim is linked, not recording) and recorded, with 2 threads.
        let native = run_ok(Command::new(&prog).env("OMP_NUM_THREADS", "2"));
        assert_eq!(
            String::from_utf8_lossy(&native.stdout),
            "threads=2\n",
            "{compiler}"
        );
        let trace = dir.path().join(format!("pragma-{compiler}.cstrace"));
        assert_eq!(record(&trace, &prog, &[], 2), "threads=2\n", "{compiler}");
        let threads = events(&trace).len();
        assert_eq!(threads, 2, "{compiler}");
    }
}

#[test]
fn addr2line_is_available() {
    assert!(
        have("addr2line"),
        "binutils' addr2line resolves code positions in these tests"
    );
}

/// `tests/record/lifecycle.c` built into `dir` (gcc -O1).
fn lifecycle(dir: &Path) -> PathBuf {
    build(
        dir,
        "lifecycle",
        "gcc",
        source("lifecycle.c").as_path(),
        &["-O1"],
    )
}

#[test]
fn sigterm_completes_the_trace_and_the_program_still_dies_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let prog = lifecycle(dir.path());
    let trace = dir.path().join("spin.cstrace");
    // An earlier recording at the output: a run cut short by a signal must not replace it.
    let earlier = support::earlier_trace();
    std::fs::write(&trace, &earlier).unwrap();
    let pidfile = dir.path().join("pid");
    let mut child = record_command(&trace, &prog, &["spin", pidfile.to_str().unwrap()])
        .spawn()
        .unwrap();
    let pid: i32 = wait_for_report(&mut child, &pidfile)
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    run_ok(Command::new("kill").args(["-TERM", &pid.to_string()]));
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "record reports the program's death by SIGTERM"
    );
    assert_eq!(std::fs::read(&trace).unwrap(), earlier);
    let trace = dir.path().join("spin.cstrace.partial");
    let report = cachescope_schema::verify_file(&trace).unwrap();
    assert!(report.ok(), "{:?}", report.problem());
    let all = events(&trace);
    let stores = count(&all[0].1, EventKind::Store);
    assert!(stores > 10_000, "{stores} stores before the signal");
}

/// Waits until the recorded program wrote `file` (its pid, and whatever else it reports) and
/// returns its content; fails the test if `record` ends first.
fn wait_for_report(child: &mut std::process::Child, file: &Path) -> String {
    loop {
        if let Ok(s) = std::fs::read_to_string(file) {
            if !s.trim().is_empty() {
                return s;
            }
        }
        // A record that ended before the program wrote the file (refused the output) must
        // fail the test, not hang it.
        if let Some(status) = child.try_wait().unwrap() {
            panic!("record ended before the program started: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_stop_signal_while_threads_hand_buffers_over_keeps_every_stream_whole() {
    // Workers that fill a buffer every few hundred microseconds wait on the writer's queue
    // most of the time. Until 2026-11-29 the writer, stopping, emptied that queue and then
    // took the threads' current buffers: a buffer a thread was still handing over was lost
    // (the stream jumped, or lost a lock acquisition or thread creation, and replay called
    // the trace unsatisfiable: 1 run of 8 of a review's program) or arrived after the
    // thread's later events; and a thread's creation was recorded after the child had
    // started, so a stop between the two kept the child's start without its creation.
    let dir = tempfile::tempdir().unwrap();
    let prog = build(
        dir.path(),
        "stop_while_handing_over",
        "gcc",
        source("stop_while_handing_over.c").as_path(),
        &["-O2", "-g", "-pthread"],
    );
    // As the program's N and NEXT.
    const N: u64 = 8192;
    let next = |i: u64| (i * 1664525 + 1013904223) & (N - 1);
    // Each round fails with a chance of about 1 in 7 on the old recorder (4 of 30 runs).
    for round in 0..8u64 {
        let trace = dir.path().join(format!("stop{round}.cstrace"));
        let report = dir.path().join(format!("pid{round}"));
        let mut child = record_command(&trace, &prog, &[report.to_str().unwrap()])
            .spawn()
            .unwrap();
        let text = wait_for_report(&mut child, &report);
        let mut words = text.split_whitespace();
        let pid: i32 = words.next().unwrap().parse().unwrap();
        let base: u64 = words.next().unwrap().parse().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100 + 50 * round));
        run_ok(Command::new("kill").args(["-TERM", &pid.to_string()]));
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(128 + 15), "round {round}");
        let partial = dir.path().join(format!("stop{round}.cstrace.partial"));
        let verified = cachescope_schema::verify_file(&partial).unwrap();
        assert!(verified.ok(), "round {round}: {:?}", verified.problem());
        let t = TraceFile::open(&partial).unwrap();
        let mut workers = 0;
        for id in t.thread_ids().collect::<Vec<_>>() {
            // Each worker's stores into its row of `a` must follow the program's sequence.
            let (mut last, mut stores) = (None::<(u64, u64)>, 0u64);
            for e in t.thread_events(id).unwrap() {
                let Event::Access(a) = e.unwrap() else {
                    continue;
                };
                if a.kind != AccessKind::Store || a.addr < base || a.addr >= base + 8 * N * 8 {
                    continue;
                }
                let (row, i) = ((a.addr - base) / (N * 8), (a.addr - base) % (N * 8) / 8);
                if let Some((r, prev)) = last {
                    assert_eq!(
                        (row, i),
                        (r, next(prev)),
                        "round {round}: thread {id}'s store #{stores} jumped: events are missing"
                    );
                }
                last = Some((row, i));
                stores += 1;
            }
            if stores > 0 {
                workers += 1;
            }
        }
        assert_eq!(workers, 8, "round {round}: every worker stored");
        // Every lock acquisition and thread creation the kept events depend on is there.
        let sim = cli(&[
            "simulate",
            "--map",
            "round-robin",
            partial.to_str().unwrap(),
        ]);
        assert!(sim.status.success(), "round {round}: {}", stderr(&sim));
    }
}

#[test]
fn an_openmp_program_stopped_in_its_barriers_leaves_a_trace_that_replays() {
    // OpenMP barriers are recorded once their wait is over (gcc), and LLVM libomp's fork is
    // recorded by the primary thread before the workers are seen in the region: a stop
    // signal landing while a thread waits leaves a partner that got through without the
    // waiting thread's arrival. Until 2026-11-29 replay refused such traces (a review: 5 of
    // 8 SIGINTs with gcc, 1 of 6 with clang); now the barrier is left when every missing
    // participant's stream was cut off.
    let dir = tempfile::tempdir().unwrap();
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("omp-stopped-{compiler}"),
            compiler,
            source("omp_regions_until_stopped.c").as_path(),
            &["-O2", "-g", "-fopenmp"],
        );
        for round in 0..4u64 {
            let what = format!("{compiler} round {round}");
            let trace = dir
                .path()
                .join(format!("stopped-{compiler}-{round}.cstrace"));
            let report = dir.path().join(format!("pid-{compiler}-{round}"));
            let mut child = record_command(&trace, &prog, &[report.to_str().unwrap()])
                .spawn()
                .unwrap();
            let pid: i32 = wait_for_report(&mut child, &report).trim().parse().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(100 + 70 * round));
            run_ok(Command::new("kill").args(["-INT", &pid.to_string()]));
            let status = child.wait().unwrap();
            assert_eq!(status.code(), Some(128 + 2), "{what}");
            let partial = dir
                .path()
                .join(format!("stopped-{compiler}-{round}.cstrace.partial"));
            let verified = cachescope_schema::verify_file(&partial).unwrap();
            assert!(verified.ok(), "{what}: {:?}", verified.problem());
            let sim = cli(&["simulate", partial.to_str().unwrap()]);
            assert!(sim.status.success(), "{what}: {}", stderr(&sim));
        }
    }
}

#[test]
fn a_program_ending_with_exit_underscore_leaves_its_complete_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let prog = lifecycle(dir.path());
    let trace = dir.path().join("quit.cstrace");
    let pidfile = dir.path().join("pid");
    let o = record_command(&trace, &prog, &["quit", pidfile.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // `_exit(0)`, yet no trace end: not a success.
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the trace is incomplete"), "{err}");
    // Every chunk the recorder had written is in the file (it used to sit in a 1 MiB buffer
    // that `_exit` threw away: an empty file).
    let partial = dir.path().join("quit.cstrace.partial");
    let t = TraceFile::open_with(
        &partial,
        cachescope_schema::OpenOptions {
            allow_incomplete: true,
        },
    )
    .unwrap();
    let stores = t
        .thread_events(0)
        .unwrap()
        .filter(|e| matches!(e, Ok(Event::Access(a)) if a.kind == AccessKind::Store))
        .count();
    // 3 M updates (6 M events). Lost: the thread's buffer and what `_exit` caught on its
    // way to the file — at most the writer's queue (8 buffers) and the chunk it encoded,
    // 10 × 32 Ki events, half of them stores.
    assert!(stores >= 3_000_000 - 5 * 32_768, "{stores} stores kept");
}

#[test]
fn a_forked_child_does_not_write_into_the_parents_trace() {
    let dir = tempfile::tempdir().unwrap();
    let prog = lifecycle(dir.path());
    let trace = dir.path().join("fork.cstrace");
    let pidfile = dir.path().join("pid");
    let out = record(&trace, &prog, &["fork", pidfile.to_str().unwrap()], 1);
    assert_eq!(out.trim(), "child=0");
    let report = cachescope_schema::verify_file(&trace).unwrap();
    assert!(report.ok(), "{:?}", report.problem());
    let all = events(&trace);
    assert_eq!(all.len(), 1, "only the parent records");
    let stores = count(&all[0].1, EventKind::Store);
    // 2 × 1000 `sink` updates by the parent (+ a few from stdio); the child's 100000 are absent.
    assert!((2000..3000).contains(&stores), "{stores} stores");
}

#[test]
fn flops_are_counted_and_dlopened_modules_join_the_module_map() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("flops_dlopen.c");
    for compiler in compilers() {
        // No vectorization, so the loop's FLOPs are scalar: one mul and one add per element.
        let novec = if compiler == "gcc" {
            "-fno-tree-vectorize"
        } else {
            "-fno-vectorize"
        };
        let prog = build(
            dir.path(),
            format!("fd-{compiler}"),
            compiler,
            &src,
            &["-O2", novec, "-ldl"],
        );
        let trace = dir.path().join(format!("fd-{compiler}.cstrace"));
        let n = 10_000u64;
        let out = record(&trace, &prog, &[&n.to_string()], 1);
        assert_eq!(out.trim(), "dot=49995000.0 cos0=1.0");
        let all = events(&trace);
        let flops: u64 = all[0]
            .1
            .iter()
            .map(|e| match e {
                Event::Advance { flops, .. } => *flops,
                _ => 0,
            })
            .sum();
        // 2n in the dot product, plus the FLOPs of the initialization loop (i * 0.5).
        assert!(
            (2 * n..=4 * n).contains(&flops),
            "{compiler}: {flops} FLOPs for a dot product of {n}"
        );
        let t = TraceFile::open(&trace).unwrap();
        assert!(
            !t.header()
                .modules
                .iter()
                .any(|m| m.path.contains("libm.so")),
            "{compiler}: libm is not loaded at start"
        );
        assert!(
            t.modules().any(|m| m.path.contains("libm.so")),
            "{compiler}: libm (dlopened) is in the module map: {:?}",
            t.modules().map(|m| &m.path).collect::<Vec<_>>()
        );
    }
}

#[test]
fn memset_and_memcpy_are_recorded_as_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("memops.c");
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("mem-{compiler}"),
            compiler,
            &src,
            &["-O2"],
        );
        let trace = dir.path().join(format!("mem-{compiler}.cstrace"));
        let out = record(&trace, &prog, &[], 1);
        let addr = |key: &str| {
            let v = out
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .unwrap_or_else(|| panic!("{out}"));
            u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
        };
        let (a, p) = (addr("A="), addr("p="));
        let all = events(&trace);
        let covered = |kind: AccessKind, lo: u64, len: u64| {
            let bytes: u64 = all[0]
                .1
                .iter()
                .filter_map(|e| match e {
                    Event::Access(x) if x.kind == kind && x.addr >= lo && x.addr < lo + len => {
                        Some(u64::from(x.size).min(lo + len - x.addr))
                    }
                    _ => None,
                })
                .sum();
            bytes >= len
        };
        if compiler != "gcc" {
            // gcc 12 expands this memset into inline vector stores after its ThreadSanitizer
            // pass, uninstrumented (docs/tracer.md lists it); clang calls memset.
            assert!(
                covered(AccessKind::Store, a, 200),
                "{compiler}: memset of A"
            );
        }
        assert!(
            covered(AccessKind::Store, p + 1, 200),
            "{compiler}: memcpy into p"
        );
        assert!(
            covered(AccessKind::Load, a, 200),
            "{compiler}: memcpy from A"
        );
    }
}

#[test]
fn recording_leaves_the_programs_heap_as_it_is_natively() {
    // The shim's allocations (its thread state, the writer thread's TLS vector that glibc
    // callocs) used to come from the program's heap: two per-thread blocks 32 bytes apart on
    // one line natively were half a megabyte apart when recorded, or on two lines, and the
    // audit found nothing.
    let dir = tempfile::tempdir().unwrap();
    let src = source("heap_counters.c");
    let (write, alloc) = (
        line_of(&src, "COUNTER_WRITE"),
        line_of(&src, "COUNTER_ALLOC"),
    );
    let offsets = |out: &str| -> Vec<u64> {
        out.split_whitespace()
            .map(|w| u64::from_str_radix(w.trim_start_matches("0x"), 16).unwrap() & 0xfff)
            .collect()
    };
    let native_prog = dir.path().join("heap-native");
    support::run_ok(
        Command::new("gcc")
            .args(["-O2", "-pthread"])
            .arg(&src)
            .arg("-o")
            .arg(&native_prog),
    );
    let native = String::from_utf8_lossy(&support::run_ok(&mut Command::new(&native_prog)).stdout)
        .into_owned();
    let native = offsets(&native);
    assert_eq!(
        native[1] - native[0],
        32,
        "glibc's layout changed: {native:?}"
    );
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("heap-{compiler}"),
            compiler,
            &src,
            &["-O2", "-g", "-pthread"],
        );
        let trace = dir.path().join(format!("heap-{compiler}.cstrace"));
        let out = record(&trace, &prog, &[], 1);
        assert_eq!(
            offsets(&out),
            native,
            "{compiler}: recorded vs native block offsets"
        );
        let (f, _, what) = failing_false_sharing(&trace, compiler);
        assert_eq!(f["object"]["kind"], "heap", "{what}");
        assert!(
            f["object"]["name"]
                .as_str()
                .unwrap()
                .contains(&format!("heap_counters.c:{alloc}")),
            "{what}"
        );
        assert_eq!(
            f["writer"]["line"].as_u64(),
            Some(u64::from(write)),
            "{what}"
        );
    }
}

#[test]
fn the_compilers_own_v_reaches_the_compiler() {
    // CMake's compiler checks run `CC -v`; cachescope's global -v used to take it.
    support::ensure_shim();
    let o = support::run_ok(Command::new(support::cachescope()).args(["cc", "-v"]));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("gcc version"), "{stderr}");
    assert!(!stderr.contains("INFO"), "{stderr}");
    // With inputs, the wrapped build runs (instrumented) and the compiler shows its steps.
    let dir = tempfile::tempdir().unwrap();
    let prog = dir.path().join("v");
    let o = support::run_ok(
        Command::new(support::cachescope())
            .args(["cc", "-v", "-O2"])
            .arg(source("stores.c"))
            .arg("-o")
            .arg(&prog),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("-fsanitize=thread"), "{stderr}");
    assert!(stderr.contains("collect2"), "{stderr}");
}

#[test]
fn vectorized_and_lto_builds_record_every_byte() {
    // clang's ThreadSanitizer skips accesses wider than 16 bytes (-march=native: 32-byte
    // vectors, a triad with nothing loaded) and the load of `x += v`; gcc with -flto
    // instruments at link time, where the wrapper's link has none (nothing recorded); gcc
    // expands a small memset or memcpy into moves its ThreadSanitizer does not see.
    let dir = tempfile::tempdir().unwrap();
    let src = source("vector_triad.c");
    const N: u64 = 4096;
    let mut builds = vec![
        ("gcc", vec!["-O3", "-march=native"]),
        ("gcc", vec!["-O2", "-flto"]),
    ];
    if compilers().contains(&"clang-14") {
        builds.push(("clang-14", vec!["-O3", "-march=native"]));
        builds.push(("clang-14", vec!["-O3", "-march=native", "-ffast-math"]));
    }
    for (n, (compiler, flags)) in builds.into_iter().enumerate() {
        let what = format!("{compiler} {}", flags.join(" "));
        let prog = build(dir.path(), format!("triad-{n}"), compiler, &src, &flags);
        let trace = dir.path().join(format!("triad-{n}.cstrace"));
        let out = record(&trace, &prog, &[], 1);
        let addr = |key: &str| {
            let v = out
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .unwrap_or_else(|| panic!("{what}: {out}"));
            u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
        };
        let all = events(&trace);
        let bytes = |kind: AccessKind, lo: u64, len: u64| -> u64 {
            all.iter()
                .flat_map(|(_, e)| e)
                .filter_map(|e| match e {
                    Event::Access(x) if x.kind == kind && x.addr >= lo && x.addr < lo + len => {
                        Some(u64::from(x.size).min(lo + len - x.addr))
                    }
                    _ => None,
                })
                .sum()
        };
        let (a, b, c, counter) = (addr("a="), addr("b="), addr("c="), addr("counter="));
        let size = N * 8;
        assert_eq!(
            bytes(AccessKind::Store, a, size),
            size,
            "{what}: stores into a"
        );
        assert_eq!(bytes(AccessKind::Load, b, size), size, "{what}: loads of b");
        assert_eq!(bytes(AccessKind::Load, c, size), size, "{what}: loads of c");
        assert_eq!(
            bytes(AccessKind::Store, b, size),
            size,
            "{what}: stores into b"
        );
        // 1,000 increments plus the read for printf.
        assert_eq!(
            bytes(AccessKind::Load, counter, 8),
            1001 * 8,
            "{what}: counter loads"
        );
        assert_eq!(
            bytes(AccessKind::Store, counter, 8),
            1000 * 8,
            "{what}: counter stores"
        );
        // A 40-byte memset and a 24-byte memcpy: gcc -O2 expanded them into vector moves
        // ThreadSanitizer does not instrument, and nothing was recorded.
        let (buf, copy) = (addr("buf="), addr("copy="));
        assert_eq!(bytes(AccessKind::Store, buf, 40), 40, "{what}: memset");
        assert_eq!(
            bytes(AccessKind::Load, buf, 40),
            24,
            "{what}: memcpy's loads"
        );
        assert_eq!(
            bytes(AccessKind::Store, copy, 24),
            24,
            "{what}: memcpy's stores"
        );
    }
}

#[test]
fn the_writer_thread_keeps_the_cpus_of_record_when_openmp_binds_the_main_thread() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("writer_affinity.c");
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let mine = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("affinity-{compiler}"),
            compiler,
            &src,
            &["-O2", "-fopenmp"],
        );
        let trace = dir.path().join(format!("affinity-{compiler}.cstrace"));
        support::ensure_shim();
        let o = run_ok(
            Command::new(support::cachescope())
                .arg("record")
                .arg("-o")
                .arg(&trace)
                .arg("--")
                .arg(&prog)
                .env("OMP_NUM_THREADS", "2")
                .env("OMP_PROC_BIND", "true"),
        );
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            out.trim(),
            format!("writer={mine}"),
            "{compiler}: the writer thread's CPUs"
        );
    }
}

/// The C++ compiler of the same family as `compiler` (a C compiler of [`compilers`]).
fn cxx_of(compiler: &str) -> String {
    match compiler {
        "gcc" => "g++".to_owned(),
        c => c.replacen("clang", "clang++", 1),
    }
}

#[test]
fn accesses_in_inlined_library_code_are_named_by_the_programs_line() {
    // `std::atomic<int>::fetch_add` is inlined from atomic_base.h: the writer and victim were
    // "atomic_base.h:618 in std::__atomic_base<int>::fetch_add", a SARIF location outside the
    // repository that code scanning cannot show.
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_atomic_counters.cpp");
    let bump = line_of(&src, "BUMP");
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("atomics-{compiler}"),
            &cxx_of(compiler),
            &src,
            &["-O2", "-g", "-pthread"],
        );
        let trace = dir.path().join(format!("atomics-{compiler}.cstrace"));
        assert_eq!(record(&trace, &prog, &[], 1), "100000\n", "{compiler}");
        let (f, sarif, what) = failing_false_sharing(&trace, compiler);
        for side in ["writer", "victim"] {
            assert_eq!(f[side]["line"].as_u64(), Some(u64::from(bump)), "{what}");
            assert!(
                f[side]["file"]
                    .as_str()
                    .unwrap()
                    .ends_with("cxx_atomic_counters.cpp"),
                "{what}"
            );
        }
        let uri = &sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
            ["artifactLocation"]["uri"];
        assert_eq!(
            uri, "tests/record/cxx_atomic_counters.cpp",
            "{compiler}: {sarif:#}"
        );
    }
}

/// Builds the C++ program `src` (two threads, printing 200000) with `compiler`'s C++ driver
/// at `opt`, records it and returns its false-sharing finding (the audit must fail) and a
/// description for assertion messages.
fn cxx_finding(
    dir: &Path,
    tag: &str,
    compiler: &str,
    opt: &str,
    src: &Path,
) -> (serde_json::Value, String) {
    let name = format!("{tag}-{compiler}{opt}");
    let prog = build(dir, &name, &cxx_of(compiler), src, &[opt, "-g", "-pthread"]);
    let trace = dir.join(format!("{name}.cstrace"));
    assert_eq!(record(&trace, &prog, &[], 1), "200000\n", "{name}");
    let (f, _, what) = failing_false_sharing(&trace, &name);
    (f, what)
}

#[test]
fn names_in_an_anonymous_namespace_are_spelled_as_cpp_tools_do() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_anon_namespace.cpp");
    let line = line_of(&src, "WORK");
    let declared = line_of(&src, "COUNTERS");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let (f, what) = cxx_finding(dir.path(), "anon", compiler, opt, &src);
            assert_eq!(
                f["object"]["name"], "(anonymous namespace)::counters",
                "{what}"
            );
            // A global's declaration, as a local's: the SARIF "declared here" location.
            assert_eq!(
                f["declared_at"]["line"].as_u64(),
                Some(u64::from(declared)),
                "{what}"
            );
            assert!(
                f["declared_at"]["file"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("cxx_anon_namespace.cpp")),
                "{what}"
            );
            for side in ["writer", "victim"] {
                assert_eq!(f[side]["line"].as_u64(), Some(u64::from(line)), "{what}");
                assert_eq!(
                    f[side]["function"], "(anonymous namespace)::work(int)",
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn findings_name_the_member_each_thread_writes() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_struct_members.cpp");
    let line = line_of(&src, "COUNT");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let (f, what) = cxx_finding(dir.path(), "members", compiler, opt, &src);
            let name = f["object"]["name"].as_str().unwrap();
            assert!(name.starts_with("local t of main"), "{what}: {name}");
            assert_eq!(
                f["writer"]["line"].as_u64(),
                Some(u64::from(line)),
                "{what}"
            );
            // Thread 0 is main, which only creates and joins: the two workers write.
            assert_eq!(
                parts_of(&f),
                [
                    part(1, true, "t.per_thread[0].hits", 8, 8),
                    part(2, true, "t.per_thread[1].hits", 24, 8)
                ],
                "{what}"
            );
        }
    }
}

/// One part of a finding's busiest line: thread, store, member, offset, bytes.
type Part = (u64, bool, String, Option<u64>, u64);

/// The parts of `f`'s busiest line (JSON `line_parts`).
fn parts_of(f: &serde_json::Value) -> Vec<Part> {
    f["line_parts"]
        .as_array()
        .unwrap_or_else(|| panic!("{f:#}"))
        .iter()
        .map(|p| {
            (
                p["thread"].as_u64().unwrap(),
                p["store"].as_bool().unwrap(),
                p["member"].as_str().unwrap_or("").to_owned(),
                p["offset"].as_u64(),
                p["bytes"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A part inside the finding's object.
fn part(thread: u64, store: bool, member: &str, offset: u64, bytes: u64) -> Part {
    (thread, store, member.to_owned(), Some(offset), bytes)
}

/// The parts of the heap finding on the block allocated on the line of `src` marked
/// `marker`.
fn heap_parts(json: &serde_json::Value, src: &Path, marker: &str) -> Vec<Part> {
    let line = u64::from(line_of(src, marker));
    let findings = json["findings"].as_array().unwrap();
    findings
        .iter()
        .find(|f| f["object"]["kind"] == "heap" && f["allocated_at"]["line"].as_u64() == Some(line))
        .map(parts_of)
        .unwrap_or_else(|| panic!("no heap finding from {marker}: {:#}", json["findings"]))
}

#[test]
fn findings_name_each_member_of_unions_interleaved_arrays_bases_and_new_arrays() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_member_shapes.cpp");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let name = format!("shapes-{compiler}{opt}");
            let flags = [opt, "-g", "-pthread"];
            let prog = build(dir.path(), &name, &cxx_of(compiler), &src, &flags);
            let trace = dir.path().join(format!("{name}.cstrace"));
            assert_eq!(record(&trace, &prog, &[], 1), "900000 0\n", "{name}");
            let (code, json, _) = audit_json(&trace);
            let what = format!("{name}: {:#}", json["findings"]);
            assert_eq!(code, 1, "{what}");
            let found = |object: &str| {
                json["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|f| f["object"]["name"] == object && f["kind"] == "false_sharing")
                    .map(parts_of)
                    .unwrap_or_else(|| panic!("no finding on {object}: {what}"))
            };
            // The union's struct view: the smallest member holding the bytes names them.
            assert_eq!(
                found("pair"),
                [
                    part(1, true, "pair.parts.lo", 0, 4),
                    part(2, true, "pair.parts.hi", 4, 4)
                ],
                "{what}"
            );
            // Elements taken in turn: each one a thread writes, not a span over the other's.
            let mut cyclic = Vec::new();
            for thread in [1, 2] {
                for j in (thread - 1..8).step_by(2) {
                    cyclic.push(part(thread, true, &format!("cyclic[{j}]"), 8 * j, 8));
                }
            }
            assert_eq!(found("cyclic"), cyclic, "{what}");
            // The consumer's reads of `tail` are what the producer's writes cost it; its
            // rare writes of `polls` are its own part too.
            assert_eq!(
                found("ring"),
                [
                    part(1, true, "ring.head", 0, 8),
                    part(2, false, "ring.tail", 8, 8),
                    part(2, true, "ring.polls", 16, 8)
                ],
                "{what}"
            );
            // Members of base classes, the second one 8 bytes in.
            assert_eq!(
                found("stage"),
                [
                    part(1, true, "stage.produced", 0, 8),
                    part(2, true, "stage.consumed", 8, 8)
                ],
                "{what}"
            );
            // Bit-fields sharing a byte are one member, named by all of them, next to `x`.
            assert_eq!(
                found("bits"),
                [
                    part(1, true, "bits.x", 0, 4),
                    part(1, true, "bits.{f1,f2}", 4, 1),
                    part(2, true, "bits.y", 16, 8)
                ],
                "{what}"
            );
            // Packed bit-fields: `w` (bits 28..39) shares byte 3 with `v` (bits 8..27); the
            // write of `w` is a read-modify-write of some of bytes 1..4, as wide as the
            // compiler makes it.
            let packed = found("packed");
            assert!(
                packed.iter().any(|p| p.0 == 1 && p.2 == "packed[0].{v,w}")
                    && packed
                        .iter()
                        .filter(|p| p.0 == 1)
                        .all(|p| p.2 == "packed[0].{v,w}"
                            && p.3 >= Some(1)
                            && p.3.unwrap_or(0) + p.4 <= 5),
                "{what}"
            );
            assert_eq!(
                packed.iter().filter(|p| p.0 == 2).collect::<Vec<_>>(),
                [&part(2, true, "packed[2].s", 19, 2)],
                "{what}"
            );
            // Parts of two neighbouring elements are their members; whole ones a range.
            assert_eq!(
                found("kv"),
                [
                    part(1, true, "kv[0].val", 4, 4),
                    part(1, true, "kv[1].key", 8, 4),
                    part(2, true, "kv[3..4]", 24, 16),
                    part(2, true, "kv[5].key", 40, 4)
                ],
                "{what}"
            );
            // An 8-byte copy from q[3] over q[4], which the thread then writes: q[3] is read.
            assert_eq!(
                found("overlap"),
                [
                    part(1, true, "overlap.a", 0, 8),
                    part(2, false, "overlap.q[3]", 20, 4),
                    part(2, true, "overlap.q[4]", 24, 4)
                ],
                "{what}"
            );
            // The vtable pointer a virtual call reads (gcc `_vptr.Shape`, clang `_vptr$Shape`).
            let vptr = match compiler {
                "gcc" => "shape._vptr.Shape",
                _ => "shape._vptr$Shape",
            };
            assert_eq!(
                found("shape"),
                [
                    part(1, true, "shape.h", 16, 8),
                    part(2, false, vptr, 0, 8),
                    part(2, false, "shape.w", 8, 8)
                ],
                "{what}"
            );
            let heap_at = |marker: &str| {
                let line = u64::from(line_of(&src, marker));
                json["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|f| {
                        f["object"]["kind"] == "heap"
                            && f["allocated_at"]["line"].as_u64() == Some(line)
                    })
                    .unwrap_or_else(|| panic!("no heap finding from line {line}: {what}"))
            };
            // One object from `new`, through its pointer; an array a unique_ptr holds.
            assert_eq!(
                parts_of(heap_at("NODE")),
                [
                    part(1, true, "node->id", 0, 4),
                    part(2, true, "node->total", 8, 8)
                ],
                "{what}"
            );
            assert_eq!(
                parts_of(heap_at("STATS")),
                [
                    part(1, true, "stats[0].a", 0, 8),
                    part(2, true, "stats[0].b", 8, 8)
                ],
                "{what}"
            );
            // A flexible array member takes the rest of the block: one struct, not an array.
            assert_eq!(
                parts_of(heap_at("HIST")),
                [
                    part(1, true, "hist->n", 0, 8),
                    part(1, true, "hist->bins[0]", 8, 8),
                    part(2, true, "hist->bins[1]", 16, 8)
                ],
                "{what}"
            );
            // new Worker[8]: elements start 8 bytes into the block, after the count.
            let parts = parts_of(heap_at("WORKERS"));
            assert!(
                parts.iter().any(|p| p.0 == 1) && parts.iter().any(|p| p.0 == 2),
                "{what}"
            );
            for (thread, store, member, offset, bytes) in parts {
                let j = member
                    .strip_prefix("workers[")
                    .and_then(|m| m.strip_suffix("].done"))
                    .and_then(|j| j.parse::<u64>().ok())
                    .unwrap_or_else(|| panic!("{member}: {what}"));
                assert!(store, "{what}");
                assert_eq!(j % 2, thread - 1, "{member}: {what}");
                assert_eq!(
                    (offset, bytes),
                    (Some(8 + 16 * j + 8), 8),
                    "{member}: {what}"
                );
            }
        }
    }
}

#[test]
fn heap_blocks_are_laid_out_by_the_allocator_their_line_called() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_member_allocators.cpp");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let name = format!("allocators-{compiler}{opt}");
            let flags = [opt, "-g", "-pthread"];
            let prog = build(dir.path(), &name, &cxx_of(compiler), &src, &flags);
            let trace = dir.path().join(format!("{name}.cstrace"));
            assert_eq!(record(&trace, &prog, &[], 1), "1200000 0\n", "{name}");
            let (code, json, _) = audit_json(&trace);
            let what = format!("{name}: {:#}", json["findings"]);
            assert_eq!(code, 1, "{what}");
            let findings = json["findings"].as_array().unwrap();
            let heap_at = |marker: &str| {
                let line = u64::from(line_of(&src, marker));
                findings.iter().find(|f| {
                    f["object"]["kind"] == "heap"
                        && f["allocated_at"]["line"].as_u64() == Some(line)
                })
            };
            let parts_at = |marker: &str| {
                parts_of(
                    heap_at(marker).unwrap_or_else(|| panic!("no finding from {marker}: {what}")),
                )
            };
            // `new Derived` held by a `Base *`: one object (no array of Base), whose bytes
            // past Base are the derived class's, named as the object. (clang 14's default
            // C++14 has no aligned new: the block is 16-byte aligned, the finding latent.)
            assert_eq!(
                parts_at("DERIVED"),
                [
                    part(1, true, "shape->id", 8, 8),
                    part(2, true, "*shape", 24, 8)
                ],
                "{what}"
            );
            // aligned_alloc rounds 4 triples up to 128 bytes: 8 bytes more than the
            // elements, but a C allocator stores no count in front of them.
            assert_eq!(
                parts_at("TRIPLES"),
                [
                    part(1, true, "triples[0].c", 16, 8),
                    part(2, true, "triples[1].a", 24, 8)
                ],
                "{what}"
            );
            // new Slot[7] of an 8-byte type with a destructor: 64 bytes, a whole number of
            // elements, but the first 8 are the count.
            assert_eq!(
                parts_at("SLOTS"),
                [
                    part(1, true, "slots[2]", 24, 8),
                    part(2, true, "slots[3]", 32, 8)
                ],
                "{what}"
            );
            // new Both held by a `Second *`: Both keeps its Second 64 bytes in.
            assert_eq!(
                parts_at("BOTH"),
                [
                    part(1, true, "second->s2", 72, 8),
                    part(2, true, "*second", 80, 8)
                ],
                "{what}"
            );
            // A vector<bool>'s words are no bools, and the rows are allocated on the line
            // that declares `rows` but hold longs, not rows: neither is named through its
            // variable, only by byte offsets. (At -O0 the twelve callers recorded may end
            // before main: the blocks are then named by the allocator's line.)
            for f in findings {
                for p in parts_of(f) {
                    assert!(
                        !p.2.starts_with("rows") && !p.2.starts_with("flags"),
                        "{p:?}: {what}"
                    );
                }
            }
            assert_eq!(
                parts_at("FLAGS"),
                [part(1, true, "", 128, 8), part(2, true, "", 136, 8)],
                "{what}"
            );
            if opt == "-O2" {
                assert!(heap_at("ROWS").is_some(), "{what}");
            }
        }
    }
}

#[test]
fn c_findings_name_flexible_arrays_and_polled_flags_and_never_misname_wrapped_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("c_member_shapes.c");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let name = format!("c-shapes-{compiler}{opt}");
            let flags = [opt, "-g", "-pthread"];
            let prog = build(dir.path(), &name, compiler, &src, &flags);
            let trace = dir.path().join(format!("{name}.cstrace"));
            assert_eq!(
                record(&trace, &prog, &[], 1),
                "200000 200000 600000 399808\n",
                "{name}"
            );
            let (code, json, _) = audit_json(&trace);
            let what = format!("{name}: {:#}", json["findings"]);
            assert_eq!(code, 1, "{what}");
            let findings = json["findings"].as_array().unwrap();
            let found = |object: &str| {
                findings
                    .iter()
                    .find(|f| f["object"]["name"] == object && f["kind"] == "false_sharing")
                    .map(parts_of)
                    .unwrap_or_else(|| panic!("no finding on {object}: {what}"))
            };
            // The initialiser makes `hist` 64 bytes; DWARF's type has 8.
            assert_eq!(
                found("hist"),
                [
                    part(1, true, "hist.n", 0, 8),
                    part(2, true, "hist.bins[3]", 32, 8)
                ],
                "{what}"
            );
            // Read 100000 times, reset 100 times: a read, as the producer's writes cost it.
            assert_eq!(
                found("queue"),
                [
                    part(1, true, "queue.head", 0, 8),
                    part(2, false, "queue.flag", 8, 8),
                    part(2, true, "queue.count", 16, 8)
                ],
                "{what}"
            );
            let from = |marker: &str| heap_parts(&json, &src, marker);
            // The struct hack: one message whose `data` takes the rest of the block.
            assert_eq!(
                from("MESSAGE"),
                [
                    part(1, true, "m->data[20]", 28, 1),
                    part(2, true, "m->data[28]", 36, 1)
                ],
                "{what}"
            );
            // Byte offsets, as no variable names these blocks from their start: wrappers'
            // `void *` and `char *` (which they may hand out past a header), and a header
            // type other than the caller's.
            let bytes = |a: u64, b: u64| vec![part(1, true, "", a, 8), part(2, true, "", b, 8)];
            assert_eq!(from("XMALLOC"), bytes(8, 16), "{what}");
            assert_eq!(from("ARENA"), bytes(8, 16), "{what}");
            assert_eq!(from("HEADER"), bytes(24, 32), "{what}");
            // Allocated on the line declaring `v`, by the statement assigning `v->data`: named
            // after the member (`struct vec`'s `long *data`, not `struct msg`'s `char data[1]`).
            assert_eq!(
                from("VECTOR"),
                [
                    part(1, true, "v->data[1]", 8, 8),
                    part(2, true, "v->data[2]", 16, 8)
                ],
                "{what}"
            );
            // Assigned to a global declared elsewhere: named after it.
            assert_eq!(
                from("SUMS"),
                [
                    part(1, true, "sums[3]", 24, 8),
                    part(2, true, "sums[4]", 32, 8)
                ],
                "{what}"
            );
            // Stored through the address handed to `posix_memalign`.
            assert_eq!(
                from("APAIRS"),
                [
                    part(1, true, "apairs[0].b", 8, 8),
                    part(2, true, "apairs[1].a", 16, 8)
                ],
                "{what}"
            );
            assert_eq!(
                from("SPARE"),
                [
                    part(1, true, "spare.data[1]", 8, 8),
                    part(2, true, "spare.data[2]", 16, 8)
                ],
                "{what}"
            );
            // Declared on the line before the call.
            assert_eq!(
                from("SPLIT"),
                [
                    part(1, true, "split[1]", 8, 8),
                    part(2, true, "split[2]", 16, 8)
                ],
                "{what}"
            );
            // clang -O2 makes one call of both branches' identical `aligned_alloc`, at
            // DWARF line 0: shown at the line before it, marked as a guess, and named by no
            // variable (that line declares `before`, another block's pointer).
            if compiler.starts_with("clang") && opt == "-O2" {
                let before = line_of(&src, "BEFORE");
                let guessed = findings
                    .iter()
                    .find(|f| {
                        f["object"]["name"]
                            .as_str()
                            .is_some_and(|n| n.ends_with(&format!(":~{before})")))
                    })
                    .unwrap_or_else(|| panic!("no finding at ~{before}: {what}"));
                assert_eq!(parts_of(guessed), bytes(8, 16), "{what}");
            } else {
                assert_eq!(
                    from("PAIR_BRANCH"),
                    [
                        part(1, true, "q[0].b", 8, 8),
                        part(2, true, "q[1].a", 16, 8)
                    ],
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn a_thread_in_no_barrier_shares_lines_with_the_work_after_the_barrier() {
    // `c` (thread 1) is in no barrier; `a` (thread 2) and `b` (thread 3) meet at one, after
    // which `a` writes slot[0] while `c` writes slot[1]. Read to its end in the first
    // segment, `c` was only ever estimated against the work before the barrier.
    let dir = tempfile::tempdir().unwrap();
    let src = source("free_thread.c");
    let (a_line, c_line) = (line_of(&src, "A_STORE"), line_of(&src, "C_STORE"));
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let (trace, name) =
                recorded_c(dir.path(), "free-thread", compiler, opt, &src, "400000\n");
            let (code, json, _) = audit_json(&trace);
            let what = format!("{name}: {:#}", json["findings"]);
            assert_eq!(code, 1, "{what}");
            let f = json["findings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["object"]["name"] == "slot" && f["kind"] == "false_sharing")
                .unwrap_or_else(|| panic!("no false sharing on slot: {what}"));
            // (The line may hold `go` or `bar` too, as the compiler laid the globals out.)
            let mut slots = parts_of(f);
            slots.retain(|p| p.2.starts_with("slot"));
            assert_eq!(
                slots,
                [
                    part(1, true, "slot[1]", 8, 8),
                    part(2, true, "slot[0]", 0, 8)
                ],
                "{what}"
            );
            let mut lines = [&f["writer"], &f["victim"]].map(|s| s["line"].as_u64());
            lines.sort();
            assert_eq!(
                lines,
                [Some(u64::from(a_line)), Some(u64::from(c_line))],
                "{what}"
            );
        }
    }
}

#[test]
fn heap_findings_name_blocks_after_the_member_path_a_statement_assigns() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_member_targets.cpp");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let name = format!("targets-{compiler}{opt}");
            let flags = [opt, "-g", "-pthread"];
            let prog = build(dir.path(), &name, &cxx_of(compiler), &src, &flags);
            let trace = dir.path().join(format!("{name}.cstrace"));
            assert_eq!(
                record(&trace, &prog, &[], 1),
                "200000 200000 200000 200000 4 200000 200000\n200000 200000 1\n\
                 200000 200000 200000 20\n",
                "{name}"
            );
            let (code, json, _) = audit_json(&trace);
            let what = format!("{name}: {:#}", json["findings"]);
            assert_eq!(code, 1, "{what}");
            let stores_from = |marker: &str| {
                let mut parts = heap_parts(&json, &src, marker);
                parts.retain(|p| p.1);
                parts
            };
            // In a constructor another function of the program calls: the member names the
            // block, whatever the caller's line holds (a `Grid *`).
            assert_eq!(
                stores_from("THIS_CELLS"),
                [
                    part(1, true, "this->cells[1]", 8, 8),
                    part(2, true, "this->cells[2]", 16, 8)
                ],
                "{what}"
            );
            // Through a member object; `Bytes` has a `data` member of another type.
            assert_eq!(
                stores_from("TABLE_DATA"),
                [
                    part(1, true, "holder->t.data[2]", 8, 4),
                    part(2, true, "holder->t.data[3]", 12, 4)
                ],
                "{what}"
            );
            // `new Node`: one object, written with spaces around the arrows.
            assert_eq!(
                stores_from("NEXT"),
                [
                    part(1, true, "holder->head->next->id", 0, 8),
                    part(2, true, "holder->head->next->hits", 8, 8)
                ],
                "{what}"
            );
            // Set by constructors' member initializers.
            assert_eq!(
                stores_from("RING_BUFFER"),
                [
                    part(1, true, "this->slots[1]", 8, 8),
                    part(2, true, "this->slots[2]", 16, 8)
                ],
                "{what}"
            );
            assert_eq!(
                stores_from("POOL"),
                [
                    part(1, true, "this->free_list[2]", 8, 4),
                    part(2, true, "this->free_list[3]", 12, 4)
                ],
                "{what}"
            );
            // An element's member: which element is not in the source.
            assert_eq!(
                stores_from("SLOTS"),
                [part(1, true, "", 8, 8), part(2, true, "", 16, 8)],
                "{what}"
            );
            // The data member `cfg` of `Engine`, not the global `cfg` (another type).
            assert_eq!(
                stores_from("IMPLICIT_THIS"),
                [
                    part(1, true, "cfg->data[1]", 8, 8),
                    part(2, true, "cfg->data[2]", 16, 8)
                ],
                "{what}"
            );
            // Vectors grown by a method on a line of their own.
            assert_eq!(
                stores_from("RESIZE"),
                [
                    part(1, true, "accs[0].n", 8, 8),
                    part(2, true, "accs[1].n", 24, 8)
                ],
                "{what}"
            );
            assert_eq!(
                stores_from("ASSIGN"),
                [
                    part(1, true, "st.hits[1]", 8, 8),
                    part(2, true, "st.hits[2]", 16, 8)
                ],
                "{what}"
            );
            assert_eq!(
                stores_from("PUSH"),
                [
                    part(1, true, "grown[1]", 8, 8),
                    part(2, true, "grown[2]", 16, 8)
                ],
                "{what}"
            );
            // A lambda's capture: not named (where `new` put the block, thread 2's element
            // may be on the next line).
            let captured = stores_from("LAMBDA");
            assert!(!captured.is_empty(), "{what}");
            assert!(captured.iter().all(|p| p.2.is_empty()), "{what}");
        }
    }
}

#[test]
fn heap_findings_name_blocks_after_the_variable_the_statement_sees() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("c_member_scopes.c");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let name = format!("scopes-{compiler}{opt}");
            let flags = [opt, "-g", "-pthread"];
            let prog = build(dir.path(), &name, compiler, &src, &flags);
            let trace = dir.path().join(format!("{name}.cstrace"));
            assert_eq!(
                record(&trace, &prog, &[], 1),
                "1 1 200000 200000 200000 200000 200000 200000\n",
                "{name}"
            );
            let (code, json, _) = audit_json(&trace);
            let what = format!("{name}: {:#}", json["findings"]);
            assert_eq!(code, 1, "{what}");
            let from = |marker: &str| heap_parts(&json, &src, marker);
            let named = |root: &str| {
                vec![
                    part(1, true, &format!("{root}->data[1]"), 8, 8),
                    part(2, true, &format!("{root}->data[2]"), 16, 8),
                ]
            };
            // The global `v` (`long *data`), though the function is inlined into a block
            // whose local `v` has `char *data`; the global `w`, as the local `w` is declared
            // after the statement; the inner block's `p`, not the later block's.
            assert_eq!(from("INLINED_GLOBAL"), named("v"), "{what}");
            assert_eq!(from("LATE_LOCAL"), named("w"), "{what}");
            assert_eq!(from("INNER"), named("p"), "{what}");
            // Past the block's start: wrapped (gcc places the call at `wrap`), a macro, a
            // header kept in a member by a function returning the bytes after it.
            let bytes = vec![part(1, true, "", 16, 8), part(2, true, "", 24, 8)];
            assert_eq!(from("WRAPPED"), bytes, "{what}");
            assert_eq!(from("HIDDEN"), bytes, "{what}");
            assert_eq!(from("MEMBER_HEADER"), bytes, "{what}");
        }
    }
}

#[test]
fn cxx_heap_findings_name_class_statics_and_never_a_value_the_allocation_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_member_scopes.cpp");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let name = format!("cxx-scopes-{compiler}{opt}");
            let flags = [opt, "-g", "-pthread"];
            let prog = build(dir.path(), &name, &cxx_of(compiler), &src, &flags);
            let trace = dir.path().join(format!("{name}.cstrace"));
            assert_eq!(
                record(&trace, &prog, &[], 1),
                "200000 200000 200000 200000 200000 200000 200000 1\n200000 1 200000\n",
                "{name}"
            );
            let (code, json, _) = audit_json(&trace);
            let what = format!("{name}: {:#}", json["findings"]);
            assert_eq!(code, 1, "{what}");
            let from = |marker: &str| heap_parts(&json, &src, marker);
            // Class statics, not the global of that name (another type).
            for (marker, root) in [("STATIC_MEMBER", "cfg"), ("ENCLOSING_STATIC", "scfg")] {
                assert_eq!(
                    from(marker),
                    [
                        part(1, true, &format!("{root}->data[1]"), 8, 8),
                        part(2, true, &format!("{root}->data[2]"), 16, 8)
                    ],
                    "{marker}: {what}"
                );
            }
            // No part of these blocks is named (neighbours' parts have no offset in it).
            for marker in [
                "WRAPPED",
                "OFFSET",
                "NESTED",
                "VECTOR_POINTER",
                "CLASS_NEW",
                "ROW",
                "STRING",
            ] {
                let parts = from(marker);
                assert!(parts.iter().any(|p| p.3.is_some()), "{marker}: {what}");
                assert!(
                    parts
                        .iter()
                        .filter(|p| p.3.is_some())
                        .all(|p| p.2.is_empty()),
                    "{marker} names a part: {what}"
                );
            }
            // `this->e`'s block (clang), or bytes at the constructor's line (g++ places the
            // default member initializer at its last initializer): never `d`.
            let default_init = u64::from(line_of(&src, "DEFAULT_INIT"));
            let defaulted: Vec<Part> = json["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| {
                    f["object"]["kind"] == "heap"
                        && f["allocated_at"]["line"]
                            .as_u64()
                            .is_some_and(|l| l == default_init || l == default_init + 1)
                })
                .flat_map(parts_of)
                .collect();
            assert!(!defaulted.is_empty(), "{what}");
            assert!(
                defaulted.iter().all(|p| !p.2.starts_with("this->d")),
                "{what}"
            );
        }
    }
}

#[test]
fn a_block_assigned_in_an_openmp_region_is_never_named_after_a_global_it_does_not_see() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("omp_member_shared.c");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let name = format!("omp-shared-{compiler}{opt}");
            let flags = [opt, "-g", "-fopenmp"];
            let prog = build(dir.path(), &name, compiler, &src, &flags);
            let trace = dir.path().join(format!("{name}.cstrace"));
            assert_eq!(record(&trace, &prog, &[], 3), "200000 0\n", "{name}");
            // A finding either way (whether its share of the run's time fails it varies).
            let (_, json, _) = audit_json(&trace);
            let what = format!("{name}: {:#}", json["findings"]);
            let parts = heap_parts(&json, &src, "SHARED");
            let named = [
                part(1, true, "s->data[1]", 8, 8),
                part(2, true, "s->data[2]", 16, 8),
            ];
            let bytes = [part(1, true, "", 8, 8), part(2, true, "", 16, 8)];
            assert!(parts == named || parts == bytes, "{what}");
        }
    }
}

#[test]
fn heap_findings_name_members_through_the_vector_the_allocating_line_declares() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_vector_members.cpp");
    let declared = line_of(&src, "STATS");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let (f, what) = cxx_finding(dir.path(), "vector", compiler, opt, &src);
            assert_eq!(f["object"]["kind"], "heap", "{what}");
            assert_eq!(
                f["allocated_at"]["line"].as_u64(),
                Some(u64::from(declared)),
                "{what}"
            );
            assert_eq!(
                parts_of(&f),
                [
                    part(1, true, "stats[0].hits", 0, 4),
                    part(2, true, "stats[1].hits", 8, 4)
                ],
                "{what}"
            );
        }
    }
}

#[test]
fn a_member_functions_local_is_named_after_it_when_inlined_too() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_member_local.cpp");
    let line = line_of(&src, "MEMBER_LOCAL");
    for compiler in compilers() {
        let mut fingerprints = Vec::new();
        for opt in ["-O0", "-O2"] {
            let (f, what) = cxx_finding(dir.path(), "member", compiler, opt, &src);
            assert_eq!(
                f["object"]["name"],
                format!("local partial of Runner::run(int) (cxx_member_local.cpp:{line})"),
                "{what}"
            );
            assert_eq!(f["declared_at"]["function"], "Runner::run(int)", "{what}");
            fingerprints.push(f["fingerprint"].clone());
        }
        // A baseline written from a debug build accepts the release build's finding.
        assert_eq!(fingerprints[0], fingerprints[1], "{compiler}");
    }
}

#[test]
fn a_findings_fingerprint_does_not_depend_on_which_thread_accessed_more() {
    // The writer is the thread with the most accesses, which a timed loop decides run by run:
    // a baseline written from one recording must accept the next.
    let dir = tempfile::tempdir().unwrap();
    let src = source("pair_counters.c");
    let one = line_of(&src, "ONE_WRITES");
    let two = line_of(&src, "TWO_WRITES");
    for compiler in compilers() {
        let prog = build(
            dir.path(),
            format!("pair-{compiler}"),
            compiler,
            &src,
            &["-O0", "-g", "-pthread"],
        );
        let mut seen = Vec::new();
        for (rounds, writer) in [(["200000", "100000"], one), (["100000", "200000"], two)] {
            let trace = dir.path().join(format!("pair-{compiler}-{writer}.cstrace"));
            assert_eq!(record(&trace, &prog, &rounds, 1), "300000\n", "{compiler}");
            let (f, sarif, what) = failing_false_sharing(&trace, compiler);
            assert_eq!(
                f["writer"]["line"].as_u64(),
                Some(u64::from(writer)),
                "{what}"
            );
            seen.push(f["fingerprint"].clone());
            // `--json FILE`: the file, and the human report still on stdout.
            let file = trace.with_extension("json");
            let o = Command::new(support::cachescope())
                .arg("audit")
                .arg(&trace)
                .arg("--json")
                .arg(&file)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(1), "{what}");
            let human = String::from_utf8_lossy(&o.stdout);
            assert!(
                human.contains("[FAIL] false sharing on st (global)"),
                "{human}"
            );
            let from_file: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            assert_eq!(
                from_file["findings"][0]["fingerprint"], f["fingerprint"],
                "{what}"
            );
            // SARIF's properties carry every part of the line, as the JSON does.
            let result = &sarif["runs"][0]["results"][0];
            assert_eq!(
                result["partialFingerprints"]["cachescopeFinding/v3"], f["fingerprint"],
                "{what}"
            );
            assert_eq!(result["properties"]["lineParts"], f["line_parts"], "{what}");
            // (In address order, which differs between the compilers: sorted here.)
            let mut parts = parts_of(&f);
            parts.sort();
            assert_eq!(
                parts,
                [
                    // -O0 reads the loop bound from memory each time: the neighbour on the line.
                    (1, false, "rounds[0]".to_owned(), None, 8),
                    part(1, true, "st.a", 0, 8),
                    (2, false, "rounds[1]".to_owned(), None, 8),
                    part(2, true, "st.b", 8, 8),
                ],
                "{what}"
            );
        }
        assert_eq!(seen[0], seen[1], "{compiler}");
    }
}

#[test]
fn a_neighbours_recorded_finding_does_not_hide_an_objects_latent_one() {
    // `data`'s false sharing (phase 2) sits on `padded`'s first line with gcc -O0 and next
    // to it elsewhere; `padded` is idle then. Its 128-byte-line problem (phases 1 and 3) was
    // hidden wherever the two shared a line, and the fix offered was `data`'s.
    let dir = tempfile::tempdir().unwrap();
    let src = source("latent_beside_finding.c");
    let data = line_of(&src, "DATA_WRITES");
    let padded = line_of(&src, "PADDED_WRITES");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let (trace, name) = recorded_c(dir.path(), "latent", compiler, opt, &src, "600000\n");
            let (f, _, what) = failing_false_sharing(&trace, &name);
            assert_eq!(f["object"]["name"], "data", "{what}");
            assert_eq!(
                f["writer"]["line"].as_u64(),
                Some(u64::from(data)),
                "{what}"
            );
            let (_, json, _) = audit_json(&trace);
            let latent = json["findings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["kind"] == "latent_false_sharing" && f["object"]["name"] == "padded")
                .unwrap_or_else(|| panic!("{what}"));
            assert_eq!(
                latent["writer"]["line"].as_u64(),
                Some(u64::from(padded)),
                "{what}"
            );
        }
    }
}

#[test]
fn a_functions_static_is_named_and_declared_in_that_function() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("function_static.c");
    let declared = line_of(&src, "DECLARED");
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let (trace, name) = recorded_c(dir.path(), "static", compiler, opt, &src, "ok\n");
            let (f, _, what) = failing_false_sharing(&trace, &name);
            assert_eq!(f["object"]["name"], "static g of work", "{what}");
            assert_eq!(
                f["declared_at"]["line"].as_u64(),
                Some(u64::from(declared)),
                "{what}"
            );
            // (It was null: the JSON did not say which function declares it.)
            assert_eq!(f["declared_at"]["function"], "work", "{what}");
        }
    }
}

#[test]
fn lambdas_are_named_after_the_function_they_are_written_in() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_lambda_counters.cpp");
    let line = line_of(&src, "LAMBDA_WRITE");
    for compiler in compilers() {
        let name = format!("lambda-{compiler}");
        let prog = build(
            dir.path(),
            &name,
            &cxx_of(compiler),
            &src,
            &["-O2", "-g", "-pthread"],
        );
        let trace = dir.path().join(format!("{name}.cstrace"));
        assert_eq!(record(&trace, &prog, &[], 1), "200000\n", "{name}");
        let (f, _, what) = failing_false_sharing(&trace, &name);
        for side in ["writer", "victim"] {
            assert_eq!(f[side]["line"].as_u64(), Some(u64::from(line)), "{what}");
            let function = f[side]["function"].as_str().unwrap_or_default();
            // g++: `main::{lambda}` (its DWARF says `operator()`); clang keeps a linkage
            // name, `main::$_0::operator()() const`.
            assert!(
                function.starts_with("main::"),
                "{side}: {function:?}: {what}"
            );
            if compiler == "gcc" {
                assert_eq!(function, "main::{lambda}", "{what}");
            }
        }
    }
}

#[test]
fn openmp_regions_are_named_after_the_function_they_are_written_in() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_omp_region.cpp");
    let line = line_of(&src, "REGION_WRITE");
    for compiler in compilers() {
        let cxx = cxx_of(compiler);
        for opt in ["-O0", "-O2"] {
            let name = format!("cxx-omp-region-{compiler}{opt}");
            let prog = build(dir.path(), &name, &cxx, &src, &[opt, "-g", "-fopenmp"]);
            let trace = dir.path().join(format!("{name}.cstrace"));
            assert_eq!(record(&trace, &prog, &[], 2), "sum=300000\n", "{name}");
            let (f, _, what) = failing_false_sharing(&trace, &name);
            for side in ["writer", "victim"] {
                assert_eq!(
                    f[side]["function"], "ns::Acc::run(long) (OpenMP region)",
                    "{what}"
                );
                // clang -O2 puts the store on the loop's line, right above.
                let at = f[side]["line"].as_u64().unwrap_or(0);
                assert!(
                    (u64::from(line) - 1..=u64::from(line)).contains(&at),
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn a_cxx_program_that_only_calls_new_keeps_its_standard_library() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_only_new.cpp");
    for compiler in compilers() {
        let name = format!("only-new-{compiler}");
        let prog = build(dir.path(), &name, &cxx_of(compiler), &src, &["-O2"]);
        let trace = dir.path().join(format!("{name}.cstrace"));
        assert_eq!(record(&trace, &prog, &[], 1), "42\n", "{name}");
    }
}

#[test]
fn cxx_heap_blocks_are_named_by_the_line_that_says_new() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_new.cpp");
    // C++17 for both (clang-14 defaults to C++14, which has no aligned operator new).
    let flags = ["-O2", "-std=c++17"];
    for compiler in compilers() {
        let cxx = cxx_of(compiler);
        let native = dir.path().join(format!("cxx-native-{compiler}"));
        run_ok(
            Command::new(&cxx)
                .args(flags)
                .arg(&src)
                .arg("-o")
                .arg(&native),
        );
        let expected = String::from_utf8(run_ok(&mut Command::new(&native)).stdout).unwrap();
        assert_eq!(expected.trim(), "sum=3 threw=1 nothrow_null=1", "{cxx}");
        let prog = build(dir.path(), format!("cxx-{compiler}"), &cxx, &src, &flags);
        let trace = dir.path().join(format!("cxx-{compiler}.cstrace"));
        // The same output while recording: bad_alloc is thrown and caught through the shim's
        // operator new, and nothrow new still returns null.
        assert_eq!(record(&trace, &prog, &[], 1), expected, "{cxx}: recording");

        let t = TraceFile::open(&trace).unwrap();
        let mut symbols = cachescope_analysis::symbols::Symbolizer::new(t.modules());
        let mut named = Vec::new();
        for (_, evs) in events(&trace) {
            for e in evs {
                if let Event::Alloc {
                    addr,
                    size,
                    site,
                    align,
                } = e
                {
                    let block = cachescope_analysis::heap::HeapBlock {
                        base: addr,
                        size,
                        site,
                        callers: Default::default(),
                        align,
                        offset: 0,
                    };
                    named.push((
                        symbols.heap_block_name(&block),
                        size,
                        align.map(|a| a.bytes()),
                    ));
                }
            }
        }
        // (marker, bytes, alignment asked for): Pair is 16 bytes, Wide 128 (aligned 128).
        let pair = std::mem::size_of::<[u64; 2]>() as u64;
        for (marker, size, align) in [
            ("NEW_ONE", pair, None),
            ("NEW_ARRAY", 5 * pair, None),
            ("NEW_VECTOR", 7 * pair, None),
            ("NEW_NOTHROW", 9 * pair, None),
            ("NEW_ALIGNED", 2 * 128, Some(128)),
            ("NEW_ALIGNED_NOTHROW", 128, Some(128)),
        ] {
            let at = format!("(cxx_new.cpp:{}:", line_of(&src, marker));
            let found: Vec<_> = named.iter().filter(|(n, ..)| n.contains(&at)).collect();
            assert_eq!(
                found.len(),
                1,
                "{cxx}: one block allocated at {marker} {at}; all: {named:#?}"
            );
            assert!(
                found[0].0.starts_with("heap block from main ("),
                "{cxx}: {found:?}"
            );
            assert_eq!((found[0].1, found[0].2), (size, align), "{cxx}: {marker}");
        }
        // Nothing else is attributed to the program's lines (the failed allocations made no
        // block, and no allocation of the runtime took a pending site).
        let ours = named
            .iter()
            .filter(|(n, ..)| n.contains("(cxx_new.cpp:"))
            .count();
        assert_eq!(ours, 6, "{cxx}: {named:#?}");
    }
}

use cachescope_analysis::heap::HeapBlock;
use cachescope_analysis::symbols::Symbolizer;

/// Every heap block a recorded trace allocated, with the callers recorded after it, in
/// thread and program order.
fn heap_blocks(trace: &Path) -> Vec<HeapBlock> {
    let mut blocks: Vec<HeapBlock> = Vec::new();
    for (_, evs) in events(trace) {
        for e in evs {
            match e {
                Event::Alloc {
                    addr,
                    size,
                    site,
                    align,
                } => blocks.push(HeapBlock {
                    base: addr,
                    size,
                    site,
                    callers: Default::default(),
                    align,
                    offset: 0,
                }),
                Event::AllocCaller { site } => blocks
                    .last_mut()
                    .expect("a caller after an Alloc")
                    .callers
                    .push(site),
                _ => {}
            }
        }
    }
    blocks
}

/// A program built from `src` with `compiler` and `flags` and recorded with `threads` threads:
/// its output, its heap blocks and a symbolizer for its modules.
struct RecordedBlocks {
    output: String,
    blocks: Vec<HeapBlock>,
    symbols: Symbolizer,
}

impl RecordedBlocks {
    fn new(dir: &Path, compiler: &str, src: &Path, flags: &[&str], threads: u32) -> Self {
        let stem = src.file_stem().unwrap().to_string_lossy();
        let name = format!("{stem}-{compiler}");
        let prog = build(dir, &name, compiler, src, flags);
        let trace = dir.join(format!("{name}.cstrace"));
        let output = record(&trace, &prog, &[], threads);
        let symbols = Symbolizer::new(TraceFile::open(&trace).unwrap().modules());
        RecordedBlocks {
            output,
            blocks: heap_blocks(&trace),
            symbols,
        }
    }

    /// The one block of `size` bytes.
    fn of_size(&self, size: u64) -> &HeapBlock {
        let found: Vec<_> = self.blocks.iter().filter(|b| b.size == size).collect();
        assert_eq!(
            found.len(),
            1,
            "one block of {size} bytes in {:#?}",
            self.blocks
        );
        found[0]
    }

    /// The name of the one block of `size` bytes.
    fn name_of_size(&mut self, size: u64) -> String {
        let block = *self.of_size(size);
        self.symbols.heap_block_name(&block)
    }
}

#[test]
fn blocks_allocated_by_library_code_or_a_wrapper_are_named_by_the_programs_lines() {
    let dir = tempfile::tempdir().unwrap();
    // `std::vector::push_back`: the block's site is libstdc++'s out-of-line growth code.
    let grow = source("cxx_grow.cpp");
    let push_back = format!(
        "heap block from main (cxx_grow.cpp:{}:",
        line_of(&grow, "PUSH_BACK")
    );
    let mut site_alone_was_library_code = false;
    for compiler in compilers() {
        let cxx = cxx_of(compiler);
        let mut r = RecordedBlocks::new(dir.path(), &cxx, &grow, &["-O2"], 1);
        assert_eq!(r.output, "last=2\n", "{cxx}");
        // The vector's three capacities (1, 2 and 4 elements of 32 bytes).
        for size in [32, 64, 128] {
            let name = r.name_of_size(size);
            assert!(name.starts_with(&push_back), "{cxx}: {name} ({push_back}…)");
            let alone = HeapBlock {
                callers: Default::default(),
                ..*r.of_size(size)
            };
            site_alone_was_library_code |= !r.symbols.heap_block_name(&alone).contains("cxx_grow");
        }
    }
    // g++ keeps `_M_realloc_insert` out of line (clang inlines it): the callers were needed.
    assert!(
        site_alone_was_library_code,
        "no compiler allocated outside main"
    );

    // `record --alloc-callers N` records at most N callers per allocation (0: none).
    let prog = build(dir.path(), "grow-knob", "g++", &grow, &["-O2"]);
    for wanted in [0, 1, 4] {
        let trace = dir.path().join(format!("grow-knob-{wanted}.cstrace"));
        let o = run_ok(
            Command::new(support::cachescope())
                .args(["record", "--alloc-callers", &wanted.to_string(), "-o"])
                .arg(&trace)
                .arg("--")
                .arg(&prog),
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout), "last=2\n");
        let blocks = heap_blocks(&trace);
        let most = blocks.iter().map(|b| b.callers.iter().count()).max();
        // main, two frames of the C library's start-up code and `_start`: 4 to find.
        assert_eq!(most, Some(wanted), "--alloc-callers {wanted}: {blocks:#?}");
    }

    // The program's own wrapper, called from two functions, and the C library's `strdup`.
    let wrapper = source("c_wrapper.c");
    let at = |marker: &str| format!("(c_wrapper.c:{}:", line_of(&wrapper, marker));
    let from_xmalloc = format!("heap block from xmalloc {}", at("XMALLOC"));
    for compiler in compilers() {
        let mut r = RecordedBlocks::new(dir.path(), compiler, &wrapper, &["-O2"], 1);
        assert_eq!(r.output, "3 wrapper\n", "{compiler}");
        for (size, caller, marker) in [
            (16, "make_sums", "MAKE_SUMS"),
            (64 * 8, "make_table", "MAKE_TABLE"),
        ] {
            let name = r.name_of_size(size);
            let called_from = format!(", called from {caller} {}", at(marker));
            assert!(
                name.starts_with(&from_xmalloc) && name.contains(&called_from),
                "{compiler}: {name} ({from_xmalloc}…{called_from}…)"
            );
        }
        let name = r.name_of_size("wrapper".len() as u64 + 1);
        let strdup = format!("heap block from main {}", at("STRDUP"));
        assert!(name.starts_with(&strdup), "{compiler}: {name} ({strdup}…)");
        assert!(!name.contains("called from"), "{compiler}: {name}");
    }
}

#[test]
fn blocks_of_an_unoptimized_cxx_build_are_named_by_the_programs_lines() {
    // At -O0 the program's line is seven frames above the allocation site for
    // `std::make_shared` and `std::map`'s insertion: beyond four recorded callers.
    let dir = tempfile::tempdir().unwrap();
    let src = source("cxx_containers.cpp");
    let markers = [
        "MAKE_SHARED",
        "MAP_INSERT",
        "HASH_INSERT",
        "LIST_EMPLACE",
        // The C library's stdout buffer, allocated inside `printf`.
        "PRINT",
    ];
    let expected: std::collections::BTreeSet<u32> =
        markers.iter().map(|m| line_of(&src, m)).collect();
    // The program's lines that name blocks, each checked to be main's.
    let named_lines = |r: &mut RecordedBlocks, what: &str| {
        let mut lines = std::collections::BTreeSet::new();
        for b in r.blocks.clone() {
            let name = r.symbols.heap_block_name(&b);
            let Some(at) = name.find("(cxx_containers.cpp:") else {
                continue;
            };
            assert!(name.starts_with("heap block from main ("), "{what}: {name}");
            let line = name[at..]
                .split(':')
                .nth(1)
                .unwrap()
                .parse::<u32>()
                .unwrap();
            lines.insert(line);
        }
        lines
    };
    for compiler in compilers() {
        let cxx = cxx_of(compiler);
        let mut r = RecordedBlocks::new(dir.path(), &cxx, &src, &["-O0"], 1);
        assert_eq!(r.output, "sum=4\n", "{cxx}");
        assert_eq!(named_lines(&mut r, &cxx), expected, "{cxx}");
    }

    // Four callers, as trace format 3 first recorded, leave some of them unnamed.
    let prog = build(dir.path(), "containers-4", "g++", &src, &["-O0"]);
    let trace = dir.path().join("containers-4.cstrace");
    run_ok(
        Command::new(support::cachescope())
            .args(["record", "--alloc-callers", "4", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(&prog),
    );
    let mut r = RecordedBlocks {
        output: String::new(),
        blocks: heap_blocks(&trace),
        symbols: Symbolizer::new(TraceFile::open(&trace).unwrap().modules()),
    };
    let with_four = named_lines(&mut r, "4 callers");
    assert!(
        with_four.len() < expected.len(),
        "4 callers already name {with_four:?}"
    );
}

#[test]
fn compressed_debug_sections_are_read() {
    // `-gz` (and distributions' debug packages) compress the DWARF sections.
    let dir = tempfile::tempdir().unwrap();
    let wrapper = source("c_wrapper.c");
    let at = format!("(c_wrapper.c:{}:", line_of(&wrapper, "XMALLOC"));
    for compiler in compilers() {
        let flags = ["-O2", "-gz=zlib"];
        let mut r = RecordedBlocks::new(dir.path(), compiler, &wrapper, &flags, 1);
        assert_eq!(r.output, "3 wrapper\n", "{compiler}");
        let name = r.name_of_size(16);
        assert!(name.contains(&at), "{compiler}: {name} ({at}…)");
    }
}

#[test]
fn blocks_allocated_in_a_parallel_region_have_one_name_on_every_thread() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("c_omp_alloc.c");
    let region = format!("(c_omp_alloc.c:{}:", line_of(&src, "REGION_ALLOC"));
    for compiler in compilers() {
        let mut r = RecordedBlocks::new(dir.path(), compiler, &src, &["-O2", "-fopenmp"], 4);
        assert_eq!(r.output, "threads=4 sum=1998000\n", "{compiler}");
        // Thread t's block has 1000 + t longs; the master thread's (t = 0) entered the
        // region from main through the runtime and the recorder's wrapper, the others from
        // their thread start.
        let names: Vec<String> = (0..4).map(|t| r.name_of_size(8 * (1000 + t))).collect();
        assert!(
            names[0].starts_with("heap block from ") && names[0].contains(&region),
            "{compiler}: {names:#?}"
        );
        // No caller: the runtime called the region's function (clang's `.omp_outlined.`,
        // which calls the body at the pragma's line, is the compiler's, not a caller).
        assert!(!names[0].contains("called from"), "{compiler}: {names:#?}");
        assert!(
            names.iter().all(|n| *n == names[0]),
            "{compiler}: {names:#?}"
        );
        // Nothing is named by the recorder's own source.
        for b in r.blocks.clone() {
            let name = r.symbols.heap_block_name(&b);
            assert!(!name.contains(".rs:"), "{compiler}: {name}");
        }
    }
}

#[test]
fn an_allocation_by_the_unwinder_does_not_hang_the_recording() {
    // The program registers its own unwind tables (as JITs do) and then walks its stack:
    // libgcc allocates while holding its lock of registered frames, and the recorder must
    // not walk the stack under that lock (it would wait for itself).
    let dir = tempfile::tempdir().unwrap();
    let prog = build(
        dir.path(),
        "unwinder-alloc",
        "gcc",
        &source("unwinder_alloc.c"),
        &["-O2"],
    );
    let trace = dir.path().join("unwinder-alloc.cstrace");
    let o = run_ok(
        Command::new("timeout")
            .arg("60")
            .arg(support::cachescope())
            .args(["record", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(&prog),
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "frames 1\n");
    assert!(heap_blocks(&trace)
        .iter()
        .any(|b| b.callers.iter().count() > 0));
}

/// Builds `src` with plain g++ (not instrumented) into the shared library `out`.
fn shared_cxx_lib(src: &Path, out: &Path) -> PathBuf {
    run_ok(
        Command::new("g++")
            .args(["-O2", "-shared", "-fPIC"])
            .arg(src)
            .arg("-o")
            .arg(out),
    );
    out.to_path_buf()
}

#[test]
fn cxx_operator_new_works_in_dlopened_plugins_and_library_constructors() {
    let dir = tempfile::tempdir().unwrap();
    // A C++ plugin (plain g++, not instrumented) loaded by an instrumented C program: the
    // shim's operator new must find the real one in the libstdc++ that came with the plugin.
    let plugin = shared_cxx_lib(&source("cxx_plugin.cpp"), &dir.path().join("libplugin.so"));
    for compiler in compilers() {
        let host = build(
            dir.path(),
            format!("host-{compiler}"),
            compiler,
            &source("c_host_dlopen.c"),
            &["-O2", "-ldl"],
        );
        // Not recording (the shim is inert) and recording.
        let inert = run_ok(Command::new(&host).arg(&plugin));
        assert_eq!(
            String::from_utf8_lossy(&inert.stdout),
            "plugin_sum=9900\n",
            "{compiler}"
        );
        let trace = dir.path().join(format!("host-{compiler}.cstrace"));
        let out = record(&trace, &host, &[plugin.to_str().unwrap()], 1);
        assert_eq!(out, "plugin_sum=9900\n", "{compiler}: recording");
    }

    // A library whose global constructor runs `new` before the recorder starts: its note must
    // not name the program's first block of the same size.
    shared_cxx_lib(&source("cxx_ctor_lib.cpp"), &dir.path().join("libctor.so"));
    let src = source("cxx_ctor_main.cpp");
    let rpath = format!("-Wl,-rpath,{}", dir.path().display());
    let libdir = format!("-L{}", dir.path().display());
    let prog = dir.path().join("ctor-main");
    // The library after the source that uses it.
    cc(
        "g++",
        &[
            "-O2",
            src.to_str().unwrap(),
            "-o",
            prog.to_str().unwrap(),
            &libdir,
            "-lctor",
            &rpath,
        ],
    );
    let trace = dir.path().join("ctor-main.cstrace");
    let out = record(&trace, &prog, &[], 1);
    let mine = out
        .split_whitespace()
        .find_map(|w| w.strip_prefix("mine=0x"))
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or_else(|| panic!("no address in {out:?}"));
    let t = TraceFile::open(&trace).unwrap();
    let mut symbols = cachescope_analysis::symbols::Symbolizer::new(t.modules());
    let (size, site, align) = events(&trace)
        .into_iter()
        .flat_map(|(_, evs)| evs)
        .find_map(|e| match e {
            Event::Alloc {
                addr,
                size,
                site,
                align,
            } if addr == mine => Some((size, site, align)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no Alloc at {mine:#x}"));
    let name = symbols.heap_block_name(&cachescope_analysis::heap::HeapBlock {
        base: mine,
        size,
        site,
        callers: Default::default(),
        align,
        offset: 0,
    });
    let at = format!(
        "heap block from main (cxx_ctor_main.cpp:{}:",
        line_of(&src, "NEW_MAIN")
    );
    assert!(name.starts_with(&at), "{name} ({at}…)");
}

/// Every byte of `function`'s recorded frame is named by one of its own locals or by none:
/// never by a variable of a function nested in it (gcc's outlined region `f._omp_fn.0` is a
/// child of `f` in DWARF, with its own frame), nor by one not live at the recorded call.
fn no_local_of_a_nested_function_names_the_frame(trace: &Path, function: &str) {
    use cachescope_analysis::stack::StackSlot;
    let t = TraceFile::open(trace).unwrap();
    let mut symbols = Symbolizer::new(t.modules());
    let mut checked = 0;
    for (thread, evs) in events(trace) {
        for e in evs {
            let Event::StackFrame { site, sp, cfa } = e else {
                continue;
            };
            let frame = symbols.code_pos(site).and_then(|l| l.function.clone());
            if frame.as_deref() != Some(function) {
                continue;
            }
            for addr in sp..cfa {
                let slot = StackSlot {
                    thread,
                    site,
                    sp,
                    cfa,
                    addr,
                };
                if let Some(l) = symbols.stack_object(&slot).local {
                    let own = [
                        "partial",
                        "counts",
                        "alpha",
                        "deep_arr",
                        "th",
                        "s",
                        "i",
                        "hits",
                        "limits",
                        "scale",
                        "lo",
                        "hi",
                        "n",
                        "first_bins",
                        "second_bins",
                        "second",
                    ];
                    assert!(
                        own.contains(&l.name.as_str()) && l.function.as_deref() == Some(function),
                        "{function}'s frame byte {:#x} named {l:?}",
                        cfa - addr
                    );
                    // `sum_omp`'s loop counter is declared in a block after the region's call.
                    if function == "sum_omp" {
                        assert_ne!(l.name, "i", "{function}: a local not live at the call");
                    }
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 0, "no frame of {function} in {}", trace.display());
}

#[test]
fn an_instrumented_plugin_loaded_by_a_relative_path_is_named_in_the_audit() {
    // gcc's instrumented library runs a block in its constructor inside dlopen, whose module
    // snapshot used to hide the library from the dlopen hook: the trace had no module for it
    // and the audit said "memory at 0x7f… (unknown)" with no SARIF location.
    let dir = tempfile::tempdir().unwrap();
    let plugin_src = source("dl_counters_plugin.c");
    let write = line_of(&plugin_src, "PLUG_WRITE");
    for compiler in compilers() {
        let lib = format!("libcounters-{compiler}.so");
        cc(
            compiler,
            &[
                "-O2",
                "-g",
                "-fPIC",
                "-shared",
                plugin_src.to_str().unwrap(),
                "-o",
                dir.path().join(&lib).to_str().unwrap(),
            ],
        );
        let host = build(
            dir.path(),
            format!("dl-host-{compiler}"),
            compiler,
            &source("dl_counters_host.c"),
            &["-O2", "-pthread", "-ldl"],
        );
        let trace = dir.path().join(format!("dl-{compiler}.cstrace"));
        support::ensure_shim();
        let o = support::run_ok(
            Command::new(support::cachescope())
                .current_dir(dir.path())
                .args(["record", "-o"])
                .arg(&trace)
                .arg("--")
                .arg(&host)
                .arg(format!("./{lib}")),
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout), "loaded\n", "{compiler}");
        let t = TraceFile::open(&trace).unwrap();
        let path = dir.path().join(&lib).canonicalize().unwrap();
        assert!(
            t.modules().any(|m| Path::new(&m.path) == path.as_path()),
            "{compiler}: {} not among {:?}",
            path.display(),
            t.modules().map(|m| &m.path).collect::<Vec<_>>()
        );
        let (f, sarif, what) = failing_false_sharing(&trace, compiler);
        assert_eq!(f["object"]["name"], "plug_counters", "{what}");
        assert_eq!(
            f["writer"]["line"].as_u64(),
            Some(u64::from(write)),
            "{what}"
        );
        for r in sarif["runs"][0]["results"].as_array().unwrap() {
            assert!(
                !r["locations"].as_array().unwrap().is_empty(),
                "{compiler}: a SARIF result without a location: {r:#}"
            );
        }
    }
}

#[test]
fn two_globals_in_one_line_shared_in_turn_are_two_findings() {
    // `second` and `first` share a line; two threads write `first`, then two others
    // `second`. Both are falsely shared as recorded. The audit used to merge every segment's
    // estimate of the line into the object named first (`first`, five threads, all simulated
    // misses) and to report `second` only as latent at 32-byte lines. It also counted an
    // unrolled loop's writes per copy of the store (25,000 of 100,000).
    let dir = tempfile::tempdir().unwrap();
    let src = source("two_globals_one_line.c");
    let lines = [
        ("first", line_of(&src, "FIRST_WRITE"), [1, 2]),
        ("second", line_of(&src, "SECOND_WRITE"), [3, 4]),
    ];
    for compiler in compilers() {
        // gcc emits a section's globals in reverse unless told to keep their order.
        let keep_order: &[&str] = if compiler == "gcc" {
            &["-fno-toplevel-reorder"]
        } else {
            &[]
        };
        let mut flags = vec!["-O2", "-g", "-pthread"];
        flags.extend(keep_order);
        let prog = build(
            dir.path(),
            format!("two-{compiler}"),
            compiler,
            &src,
            &flags,
        );
        let trace = dir.path().join(format!("two-{compiler}.cstrace"));
        assert_eq!(record(&trace, &prog, &[], 1), "one line\n", "{compiler}");
        let (code, json, _) = audit_json(&trace);
        let what = format!("{compiler}: {:#}", json["findings"]);
        assert_eq!(code, 1, "{what}");
        let findings: Vec<_> = json["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["kind"] == "false_sharing")
            .collect();
        assert_eq!(findings.len(), 2, "{what}");
        for (f, (name, line, threads)) in findings.iter().zip(lines) {
            assert_eq!(f["object"]["name"], name, "{what}");
            assert_eq!(f["threads"], serde_json::json!(threads), "{what}");
            assert_eq!(
                f["writer"]["line"].as_u64(),
                Some(u64::from(line)),
                "{what}"
            );
            // Every store of the writer's loop, also where it is unrolled (`first`'s, and
            // clang unrolls `second`'s by itself): one source line, not one of its copies.
            assert_eq!(f["writer"]["count"].as_u64(), Some(100_000), "{what}");
            for side in &f["simulated_pair"].as_array().unwrap()[..] {
                assert_eq!(side["line"].as_u64(), Some(u64::from(line)), "{what}");
            }
            assert!(f["simulated_false"].as_u64().unwrap() > 0, "{what}");
        }
    }
}

/// The audit of `trace`, which must fail (exit 1) with a false-sharing finding: that finding
/// (the first), the SARIF log, and a description for assertion messages (`label` and every
/// finding).
fn failing_false_sharing(
    trace: &Path,
    label: &str,
) -> (serde_json::Value, serde_json::Value, String) {
    let (code, json, sarif) = audit_json(trace);
    let what = format!("{label}: {:#}", json["findings"]);
    assert_eq!(code, 1, "{what}");
    let f = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "false_sharing")
        .cloned()
        .unwrap_or_else(|| panic!("{what}"));
    (f, sarif, what)
}

/// `cachescope audit --json - --sarif FILE` of `trace`: exit code, JSON report, SARIF log.
fn audit_json(trace: &Path) -> (i32, serde_json::Value, serde_json::Value) {
    let sarif = trace.with_extension("sarif");
    let o = Command::new(support::cachescope())
        .arg("audit")
        .arg(trace)
        .args(["--json", "-", "--sarif"])
        .arg(&sarif)
        .arg("--repo-root")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let code = o.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "exit {code}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let sarif = std::fs::read_to_string(&sarif).unwrap();
    (
        code,
        serde_json::from_slice(&o.stdout).unwrap(),
        serde_json::from_str(&sarif).unwrap(),
    )
}

/// `cachescope record -o TRACE -- PROG`, ended after 60 s; asserts that it succeeded and
/// returns the program's output. The output goes to a file, not a pipe: a hung child would
/// keep a pipe open after `timeout` ended the recording, and the test would wait for it
/// instead of failing.
fn record_or_time_out(trace: &Path, prog: &Path) -> String {
    support::ensure_shim();
    let out = trace.with_extension("out");
    let status = Command::new("timeout")
        .arg("60")
        .arg(support::cachescope())
        .args(["record", "-o"])
        .arg(trace)
        .arg("--")
        .arg(prog)
        .stdout(std::fs::File::create(&out).unwrap())
        .status()
        .unwrap();
    assert!(status.success(), "{}: {status}", prog.display());
    std::fs::read_to_string(&out).unwrap()
}

#[test]
fn forked_children_that_call_exit_do_not_hang() {
    // Forty children leave with exit() while the parent's worker records (and hands buffers
    // to the writer): before, a child whose fork caught the worker holding a recorder lock
    // waited for it forever in the shim's destructor (2 of 5 recordings of a similar program).
    let dir = tempfile::tempdir().unwrap();
    let prog = build(
        dir.path(),
        "fork_exit",
        "gcc",
        &source("fork_exit.c"),
        &["-O2", "-pthread"],
    );
    let trace = dir.path().join("fork_exit.cstrace");
    for _ in 0..3 {
        assert_eq!(record_or_time_out(&trace, &prog), "children exited 40\n");
        // The parent's trace: main and its worker, complete.
        let t = TraceFile::open(&trace).unwrap();
        assert_eq!(t.thread_ids().count(), 2);
    }
}

#[test]
fn a_main_that_ends_with_pthread_exit_ends_the_recording() {
    // The process ends when its last thread does; the recorder's writer thread was that last
    // thread and waited forever (the recording never ended, the output was lost).
    let dir = tempfile::tempdir().unwrap();
    let prog = build(
        dir.path(),
        "main_pthread_exit",
        "gcc",
        &source("main_pthread_exit.c"),
        &["-O2", "-pthread"],
    );
    let trace = dir.path().join("main_pthread_exit.cstrace");
    assert_eq!(record_or_time_out(&trace, &prog), "worker done\n".repeat(3));
    // Complete: main and three workers, each with its exit.
    let evs = events(&trace);
    assert_eq!(evs.len(), 4);
    for (t, e) in &evs {
        assert_eq!(count(e, EventKind::ThreadExit), 1, "thread {t}");
    }
}

#[test]
fn a_program_that_closes_every_inherited_descriptor_keeps_its_trace() {
    // close() of 3..1024, closefrom(3) and close_range(3, ~0): before, the trace's
    // descriptor went with them, the trace was lost and `record` exited 2.
    let dir = tempfile::tempdir().unwrap();
    let prog = build(
        dir.path(),
        "close_fds",
        "gcc",
        &source("close_fds.c"),
        &["-O2"],
    );
    let trace = dir.path().join("close_fds.cstrace");
    assert_eq!(record(&trace, &prog, &[], 1), "sum 40950\n");
    let evs = events(&trace);
    assert_eq!(evs.len(), 1);
    // Ten passes of 4,096 stores, all after the descriptors were closed.
    assert!(
        count(&evs[0].1, EventKind::Store) >= 40_960,
        "{}",
        count(&evs[0].1, EventKind::Store)
    );
}

#[test]
fn a_recursive_mutex_records_only_its_outermost_acquisitions() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(
        dir.path(),
        "recursive_mutex",
        "gcc",
        &source("recursive_mutex.c"),
        &["-O2", "-pthread"],
    );
    let trace = dir.path().join("recursive_mutex.cstrace");
    assert_eq!(record(&trace, &prog, &[], 1), "counter=9000\n");
    // Three workers, 1,000 outermost acquisitions each (3,000 with the nested ones).
    let workers: Vec<_> = events(&trace)
        .into_iter()
        .filter(|(_, e)| count(e, EventKind::LockAcquire) > 0)
        .collect();
    assert_eq!(workers.len(), 3);
    for (t, e) in &workers {
        assert_eq!(count(e, EventKind::LockAcquire), 1000, "thread {t}");
        assert_eq!(count(e, EventKind::LockRelease), 1000, "thread {t}");
    }
    // And the trace replays: every event in the global order, no inconsistency.
    let t = TraceFile::open(&trace).unwrap();
    let merged: Result<Vec<_>, _> = t.merged().unwrap().collect();
    assert!(merged.is_ok(), "{:?}", merged.err());
}

#[test]
fn a_trace_of_a_program_that_exits_while_threads_wait_replays() {
    // Thread 1 calls exit(11) in a parallel region while the others wait at its barrier:
    // their streams end there. Before, every reader refused the trace as a deadlock.
    // With KMP_BLOCKTIME=0, LLVM libomp suspends waiting threads at once, on a mutex and a
    // condition variable of its own (as it does after 200 ms, or sooner on a loaded machine):
    // those lock events came after the wait and the trace was called deadlocked again.
    let dir = tempfile::tempdir().unwrap();
    let src = source("exit_in_region.c");
    for (compiler, blocktime) in compilers().into_iter().flat_map(|c| [(c, "200"), (c, "0")]) {
        let prog = build(
            dir.path(),
            format!("exit_in_region-{compiler}"),
            compiler,
            &src,
            &["-O2", "-fopenmp"],
        );
        let trace = dir
            .path()
            .join(format!("exit_in_region-{compiler}-{blocktime}.cstrace"));
        support::ensure_shim();
        let o = Command::new(support::cachescope())
            .args(["record", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(&prog)
            .env("OMP_NUM_THREADS", "4")
            .env("KMP_BLOCKTIME", blocktime)
            .output()
            .unwrap();
        let compiler = format!("{compiler} KMP_BLOCKTIME={blocktime}");
        // The program's own exit code and output.
        assert_eq!(o.status.code(), Some(11), "{compiler}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), "thread 1 exits\n");
        let t = TraceFile::open(&trace).unwrap();
        assert_eq!(t.thread_ids().count(), 4, "{compiler}");
        let merged: Result<Vec<_>, _> = t.merged().unwrap().collect();
        let merged = merged.unwrap_or_else(|e| panic!("{compiler}: {e}"));
        assert_eq!(merged.len() as u64, t.event_count(), "{compiler}");
        let sim = support::cli(&["simulate", trace.to_str().unwrap()]);
        assert!(
            sim.status.success(),
            "{compiler}: {}",
            support::stderr(&sim)
        );
    }
}

#[test]
fn the_programs_signal_handlers_never_run_on_the_recorders_writer_thread() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(
        dir.path(),
        "signal_writer",
        "gcc",
        &source("signal_writer.c"),
        &["-O1"],
    );
    let trace = dir.path().join("signal.cstrace");
    let out = record(&trace, &prog, &[], 1);
    // The program and the writer: two threads; only the program's handled its signal.
    assert_eq!(out, "threads=2 handled=1 on_writer=0\n");
}

#[test]
fn the_programs_signal_handlers_record_nothing_and_never_break_the_recording() {
    // Before 2026-11-29 a handler ran the recorder from under the event it interrupted: a
    // handler bumping counters while its thread computed crashed the program (SIGSEGV, or a
    // buffer handed over twice), and a `sem_post` in a handler left a trace that did not
    // replay. Handlers now record nothing, whether installed by `sigaction`, `signal`
    // (glibc's BSD one, or `__sysv_signal` under strict ISO C) and whether they return, jump
    // out (`siglongjmp`, `__longjmp_chk` under _FORTIFY_SOURCE) or end the program.
    let dir = tempfile::tempdir().unwrap();
    let src = source("signal_handlers.c");
    let mut builds: Vec<(String, &str, Vec<&str>)> = compilers()
        .into_iter()
        .map(|c| (format!("signals-{c}"), c, vec!["-O2", "-g", "-pthread"]))
        .collect();
    builds.push((
        "signals-gcc-strict-fortified".into(),
        "gcc",
        vec![
            "-O2",
            "-g",
            "-pthread",
            "-std=c99",
            "-D_XOPEN_SOURCE=700",
            "-D_FORTIFY_SOURCE=2",
        ],
    ));
    for (name, compiler, flags) in &builds {
        let prog = build(dir.path(), name, compiler, &src, flags);
        for mode in ["return", "exit"] {
            let what = format!("{name} {mode}");
            let trace = dir.path().join(format!("{name}-{mode}.cstrace"));
            let out = record(&trace, &prog, &[mode], 1);
            let line = out.lines().next().unwrap_or_default();
            let addresses = line
                .strip_prefix("bad=0 query=ok posts=1000 probes=100 jumps=2000 ")
                .unwrap_or_else(|| panic!("{what}: {out}"));
            let address = |name: &str| {
                let field = addresses
                    .split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or_else(|| panic!("{what}: no {name} in {out}"));
                u64::from_str_radix(field.trim_start_matches("0x"), 16).unwrap()
            };
            let (counters, after) = (address("counters="), address("after="));
            if mode == "exit" {
                assert!(
                    out.ends_with("\nleft by exit in a handler\n"),
                    "{what}: {out}"
                );
            }
            let all = events(&trace);
            assert_eq!(
                all.len(),
                4,
                "{what}: main, the waiter, the interrupter, the jumper"
            );
            let main = &all[0].1;
            // Also when a handler ended the program: its thread's end is recorded.
            assert_eq!(main.last(), Some(&Event::ThreadExit), "{what}");
            let stores_in = |base: u64, bytes: u64| {
                main.iter()
                    .filter(|e| {
                        matches!(e, Event::Access(a) if a.kind == AccessKind::Store
                            && (base..base + bytes).contains(&a.addr))
                    })
                    .count()
            };
            // Recording resumed after the jumps out of the handlers: every store of the
            // loop after them is there.
            assert_eq!(stores_in(after, 8 * 64), 5000, "{what}");
            // The handler's 64 x 20,000 stores are not recorded.
            assert_eq!(stores_in(counters, 8 * 64), 0, "{what}");
            let sim = cli(&["simulate", trace.to_str().unwrap()]);
            assert!(sim.status.success(), "{what}: {}", stderr(&sim));
        }
    }
}

#[test]
fn signals_the_recorder_handles_keep_their_default_disposition_for_the_program() {
    // The recorder handles SIGINT, SIGTERM and the crash signals where the program left the
    // default, to complete the trace. Until 2026-11-29 the program saw the recorder's
    // handlers (`sigaction` reported a function), a restored "default" SIGINT let the
    // program run on after `raise`, a crash handler that restored the default and raised
    // again left an incomplete trace, a forked child ignored SIGTERM, and (with the first
    // `signal` of the recorder's own) `siginterrupt` no longer made `signal` interrupt reads;
    // and the recorder's alternate signal stack was the program's.
    let dir = tempfile::tempdir().unwrap();
    let src = source("signal_defaults.c");
    for compiler in compilers() {
        let name = format!("signal-defaults-{compiler}");
        let prog = build(dir.path(), &name, compiler, &src, &["-O2", "-g"]);
        let trace = |mode: &str| dir.path().join(format!("{name}-{mode}.cstrace"));
        assert_eq!(
            record(&trace("query"), &prog, &["query"], 1),
            "defaults ok interrupted ok\n",
            "{name}"
        );
        assert_eq!(
            record(&trace("fork"), &prog, &["fork"], 1),
            "child died of SIGTERM\n",
            "{name}"
        );
        // The shim's own alternate stack (for its fault handler) is not the program's: until
        // 2026-11-29 `sigaltstack` reported it, so a program that installs one only where
        // there is none kept the shim's 64 KiB.
        assert_eq!(
            record(&trace("altstack"), &prog, &["altstack"], 2),
            "altstack none, thread none, own ok, handler on it, disabled none\n",
            "{name}"
        );
        for (mode, printed, signal) in [
            ("restore", "restored default\n", 2),
            ("rechain", "faulting\n", 11),
        ] {
            let what = format!("{name} {mode}");
            let o = record_command(&trace(mode), &prog, &[mode])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&o.stdout), printed, "{what}");
            assert_eq!(
                o.status.code(),
                Some(128 + signal),
                "{what}: {}",
                stderr(&o)
            );
            // Completed by the recorder before the program died.
            let partial = dir.path().join(format!("{name}-{mode}.cstrace.partial"));
            let report = cachescope_schema::verify_file(&partial).unwrap();
            assert!(report.ok(), "{what}: {:?}", report.problem());
            let stores = count(&events(&partial)[0].1, EventKind::Store);
            assert!(stores >= 100_000, "{what}: {stores} stores");
        }
    }
}

#[test]
fn stack_arrays_written_by_other_threads_are_named_by_their_local_variable() {
    let dir = tempfile::tempdir().unwrap();
    let src = source("stack_shared.c");
    let omp = line_of(&src, "OMP_LOCAL");
    let pthreads = line_of(&src, "PTHREAD_LOCAL");
    let (alpha, beta) = (line_of(&src, "ALPHA_LOCAL"), line_of(&src, "BETA_LOCAL"));
    let deep = line_of(&src, "DEEP_LOCAL");
    let captures = line_of(&src, "CAPTURES_LOCAL");
    let merged = line_of(&src, "MERGED_LOCAL");
    for compiler in compilers() {
        // Unoptimized, the arrays are in the frames of the functions that declare them;
        // optimized, those functions are inlined into `main` and other inlined functions'
        // locals share the same stack bytes: only the one live at the call is the object.
        for opt in ["-O0", "-O2"] {
            let name = format!("stack_shared-{compiler}{opt}");
            let prog = build(
                dir.path(),
                &name,
                compiler,
                &src,
                &[opt, "-g", "-fopenmp", "-pthread"],
            );
            for (mode, object, line, function) in [
                ("omp", "partial", omp, "sum_omp"),
                ("pthreads", "counts", pthreads, "sum_pthreads"),
                // Two functions one after the other, each starting and joining two threads
                // on its own local array at the same stack address: two objects.
                ("waves", "", 0, "wave_alpha"),
                // The OpenMP runtime's own frames (libomp calls the recorder from inside its
                // fork) and its creation of worker threads leave the caller's frames.
                ("deep", "deep_arr", deep, "sum_deep"),
                // clang pushes the region's captured variables beyond the sixth argument of
                // `__kmpc_fork_call` right before the call: the recorded stack pointer is
                // 32 bytes below the one the DWARF places the locals by.
                ("captures", "hits", captures, "sum_captures"),
                // clang -O2 gives the merged update line 0: it is named by the line before.
                ("merged", "first_bins", merged, "sum_merged"),
            ] {
                let trace = dir.path().join(format!("{name}-{mode}.cstrace"));
                let out = record(&trace, &prog, &[mode], 2);
                assert!(out.starts_with(mode), "{out}");
                // The frames were recorded where the thread handed its stack to others.
                let frames: usize = events(&trace)
                    .iter()
                    .map(|(_, e)| count(e, EventKind::StackFrame))
                    .sum();
                assert!(frames > 0, "{name} {mode}: no stack frames recorded");
                if opt == "-O0" {
                    no_local_of_a_nested_function_names_the_frame(&trace, function);
                }
                if mode == "waves" {
                    let (_, json, _) = audit_json(&trace);
                    let mut names: Vec<String> = json["findings"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|f| f["kind"] == "false_sharing")
                        .map(|f| f["object"]["name"].as_str().unwrap().to_owned())
                        .collect();
                    names.sort();
                    assert_eq!(
                        names,
                        [
                            format!("local alpha of wave_alpha (stack_shared.c:{alpha})"),
                            format!("local beta of wave_beta (stack_shared.c:{beta})"),
                        ],
                        "{name}: {:#}",
                        json["findings"]
                    );
                    continue;
                }
                let (code, json, sarif) = audit_json(&trace);
                let what = format!("{name} {mode}: {:#}", json["findings"]);
                assert_eq!(code, 1, "{what}");
                let findings = json["findings"].as_array().unwrap();
                let fs: Vec<_> = findings
                    .iter()
                    .filter(|f| f["kind"] == "false_sharing")
                    .collect();
                assert_eq!(fs.len(), 1, "{what}");
                let f = fs[0];
                assert_eq!(f["object"]["kind"], "stack", "{what}");
                assert_eq!(
                    f["object"]["name"],
                    format!("local {object} of {function} (stack_shared.c:{line})"),
                    "{what}"
                );
                assert_eq!(f["declared_at"]["line"].as_u64(), Some(u64::from(line)));
                assert_eq!(f["offsets"], serde_json::json!([0]), "{what}");
                for side in ["writer", "victim"] {
                    assert!(f[side]["line"].as_u64().is_some(), "{what}");
                }
                if mode == "omp" {
                    // The region's code is named after the function it is written in, with
                    // either compiler (gcc outlines it into `sum_omp._omp_fn.0`, clang into
                    // `.omp_outlined.` around `.omp_outlined._debug__`).
                    for side in ["writer", "victim"] {
                        assert_eq!(f[side]["function"], "sum_omp (OpenMP region)", "{what}");
                    }
                }
                // In SARIF, the declaration is the related location with id 2.
                let result = &sarif["runs"][0]["results"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["ruleId"] == "CS0001")
                    .cloned()
                    .unwrap_or_else(|| panic!("{name} {mode}: {sarif:#}"));
                // Code scanning rejects an upload with a result without a location.
                assert_eq!(
                    result["locations"].as_array().map(Vec::len),
                    Some(1),
                    "{result:#}"
                );
                let declared = result["relatedLocations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|l| l["id"] == 2)
                    .unwrap_or_else(|| panic!("{name} {mode}: {result:#}"));
                let region = &declared["physicalLocation"];
                assert_eq!(
                    region["artifactLocation"]["uri"], "tests/record/stack_shared.c",
                    "{result:#}"
                );
                assert_eq!(
                    region["region"]["startLine"].as_u64(),
                    Some(u64::from(line))
                );
            }
        }
    }
}

#[test]
fn tasks_run_in_a_barrier_count_with_the_region_that_runs_them() {
    // Until 2026-11-29 libgomp ran the tasks left at a region's end in its own join, after the
    // recorded region end, and the libomp tool recorded the whole join before them: two
    // sibling tasks writing neighbouring counters at the same time passed with gcc (the
    // replay even ran them one after the other), and a task run in the join was flagged
    // against the serial code after the region.
    let dir = tempfile::tempdir().unwrap();
    let src = source("omp_tasks.c");
    let task_line = u64::from(line_of(&src, "TASK_WRITE"));
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let name = format!("tasks-{compiler}{opt}");
            let prog = build(dir.path(), &name, compiler, &src, &[opt, "-g", "-fopenmp"]);
            let trace = dir.path().join(format!("{name}-siblings.cstrace"));
            assert_eq!(
                record(&trace, &prog, &["siblings"], 2),
                "1000000 1000000\n",
                "{name}"
            );
            let (code, json, _) = audit_json(&trace);
            let what = format!("{name} siblings: {:#}", json["findings"]);
            assert_eq!(code, 1, "{what}");
            let found: Vec<_> = json["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["kind"] == "false_sharing")
                .collect();
            assert_eq!(found.len(), 1, "{what}");
            assert_eq!(found[0]["object"]["name"], "cnt", "{what}");
            assert_eq!(
                found[0]["writer"]["line"].as_u64(),
                Some(task_line),
                "{what}"
            );
            assert_eq!(
                found[0]["victim"]["line"].as_u64(),
                Some(task_line),
                "{what}"
            );
            // The replay runs them at the same time too.
            assert!(
                found[0]["simulated_false"].as_u64().unwrap() > 100_000,
                "{what}"
            );

            // The task run in the single's barrier records its critical sections and heap
            // calls as the other one does (until 2026-11-29 a thread in a barrier recorded
            // none: they were taken for the runtime's).
            let trace = dir.path().join(format!("{name}-locked.cstrace"));
            assert_eq!(record(&trace, &prog, &["locked"], 2), "99 99\n", "{name}");
            let all = events(&trace);
            let per_thread: Vec<(usize, usize)> = all
                .iter()
                .map(|(_, evs)| {
                    let allocs = evs
                        .iter()
                        .filter(|e| matches!(e, Event::Alloc { size: 48, .. }))
                        .count();
                    (count(evs, EventKind::LockAcquire), allocs)
                })
                .collect();
            assert_eq!(per_thread.len(), 2, "{name}");
            for (locks, allocs) in &per_thread {
                assert!(*locks >= 100 && *allocs >= 100, "{name}: {per_thread:?}");
            }

            let trace = dir.path().join(format!("{name}-join.cstrace"));
            assert_eq!(
                record(&trace, &prog, &["join"], 2),
                "1000000 2000000\n",
                "{name}"
            );
            let (code, json, _) = audit_json(&trace);
            let what = format!("{name} join: {:#}", json["findings"]);
            assert_eq!(code, 0, "{what}");
            assert!(
                json["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|f| f["kind"] != "false_sharing"),
                "{what}"
            );
        }
    }
}

#[test]
fn a_local_in_a_frame_realigned_before_its_frame_pointer_is_named() {
    // gcc -O0 realigns main's frame for an alignas(64) local before it sets %rbp and places
    // the locals from that %rbp; until 2026-11-29 the audit took %rbp for the CFA minus 16,
    // placed `partial` 32 bytes off and named the finding "stack frame of main".
    let dir = tempfile::tempdir().unwrap();
    let src = source("realigned_frame.c");
    let decl = line_of(&src, "PARTIAL_DECL");
    let write = u64::from(line_of(&src, "PARTIAL_WRITE"));
    for compiler in compilers() {
        for opt in ["-O0", "-O2"] {
            let name = format!("realigned-{compiler}{opt}");
            let prog = build(dir.path(), &name, compiler, &src, &[opt, "-g", "-fopenmp"]);
            let trace = dir.path().join(format!("{name}.cstrace"));
            assert_eq!(record(&trace, &prog, &[], 2), "34359607296.0\n", "{name}");
            let (code, json, _) = audit_json(&trace);
            let what = format!("{name}: {:#}", json["findings"]);
            assert_eq!(code, 1, "{what}");
            let found: Vec<_> = json["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["kind"] == "false_sharing")
                .collect();
            assert_eq!(found.len(), 1, "{what}");
            let f = found[0];
            assert_eq!(f["object"]["kind"], "stack", "{what}");
            assert_eq!(
                f["object"]["name"],
                format!("local partial of main (realigned_frame.c:{decl})"),
                "{what}"
            );
            assert_eq!(f["writer"]["line"].as_u64(), Some(write), "{what}");
            // Each thread's part is its element of `partial`, at its offset in it.
            let parts: Vec<(String, u64)> = f["line_parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["store"] == true)
                .map(|p| {
                    (
                        p["member"].as_str().unwrap_or("?").to_owned(),
                        p["offset"].as_u64().unwrap_or(u64::MAX),
                    )
                })
                .collect();
            assert!(
                parts.contains(&("partial[0]".to_owned(), 0))
                    || parts.contains(&("partial[1]".to_owned(), 8)),
                "{what}"
            );
        }
    }
}

#[test]
fn a_cancelled_region_records_and_replays() {
    // Until 2026-11-29 (gcc) the barrier the recorder adds at a region's end hung in a team
    // that `cancel parallel` cut short, and the barrier the cancelled member never reached was
    // recorded, so the trace did not replay.
    let dir = tempfile::tempdir().unwrap();
    let src = source("omp_cancel.c");
    for compiler in compilers() {
        let name = format!("cancel-{compiler}");
        let prog = build(
            dir.path(),
            &name,
            compiler,
            &src,
            &["-O2", "-g", "-fopenmp"],
        );
        let trace = dir.path().join(format!("{name}.cstrace"));
        support::ensure_shim();
        let o = Command::new("timeout")
            .arg("60")
            .arg(support::cachescope())
            .args(["record", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(&prog)
            .env("OMP_CANCELLATION", "true")
            .env("OMP_NUM_THREADS", "2")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{name}: {:?} {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout), "done\n", "{name}");
        run_ok(
            Command::new(support::cachescope())
                .args(["trace", "verify"])
                .arg(&trace),
        );
        run_ok(
            Command::new(support::cachescope())
                .arg("simulate")
                .arg(&trace),
        );
    }
}
