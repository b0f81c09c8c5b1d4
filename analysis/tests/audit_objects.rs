//! What the audit calls one data object, on generated traces of two threads without barriers
//! (one segment, as in a pthreads program that creates and joins its threads): a heap block
//! freed before the segment ends keeps its name, memory known only by its address gets one
//! finding and no latent echo of it, and accesses of the same bytes with different widths
//! are true sharing, not false.

use cachescope_analysis::audit::{audit, AuditConfig, AuditMachine, AuditReport, FindingKind};
use cachescope_analysis::heap::HeapMap;
use cachescope_analysis::pluto::{estimate_trace, Layout};
use cachescope_analysis::sarif::to_sarif;
use cachescope_analysis::stack::StackMap;
use cachescope_schema::{
    Access, AccessKind, Alignment, CodePos, Event, TimeUnit, TraceFile, TraceHeader, TraceWriter,
};

const REPS: u64 = 500;

fn access(kind: AccessKind, addr: u64, size: u32, pc: u64) -> Event {
    Event::Access(Access {
        kind,
        size,
        addr,
        pc: CodePos::new(pc),
    })
}

/// A trace whose thread t has the events `threads[t]`.
fn trace(threads: Vec<Vec<Event>>) -> (tempfile::TempDir, TraceFile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("objects.cstrace");
    let w =
        TraceWriter::create(&path, &TraceHeader::new("test", "test", TimeUnit::Events)).unwrap();
    for (t, events) in threads.into_iter().enumerate() {
        let mut tw = w.thread(t as u32).unwrap();
        tw.extend(events).unwrap();
        tw.finish().unwrap();
    }
    w.finish().unwrap();
    let f = TraceFile::open(&path).unwrap();
    (dir, f)
}

/// Each thread updating its own 8-byte counter at `base + 8·t`, `REPS` times.
fn counters(base: u64, t: u64) -> Vec<Event> {
    let at = base + 8 * t;
    (0..REPS)
        .flat_map(|_| {
            [
                access(AccessKind::Load, at, 8, 0x40_1000 + t),
                access(AccessKind::Store, at, 8, 0x40_1010 + t),
            ]
        })
        .collect()
}

/// A heap block of `size` bytes at `addr` from allocation site `site` (no requested
/// alignment).
fn alloc(addr: u64, size: u64, site: u64) -> Event {
    Event::Alloc {
        addr,
        size,
        site: CodePos::new(site),
        align: None,
    }
}

/// A created thread's stream: `ThreadStart`, [`counters`]`(base, t)`, `ThreadExit`.
fn created_counters(base: u64, t: u64) -> Vec<Event> {
    let mut v = vec![Event::ThreadStart];
    v.extend(counters(base, t));
    v.push(Event::ThreadExit);
    v
}

/// 64-byte lines, τ = 100 cycles, IPC 1.
fn machine() -> AuditMachine {
    AuditMachine {
        line_size: 64,
        penalty_cycles: 100.0,
        ipc: 1.0,
    }
}

fn audit_of(trace: &TraceFile) -> AuditReport {
    let config = AuditConfig {
        min_events: 100,
        min_time_share: 0.0,
        min_line_fraction: 0.0,
        simulate: false,
        ..AuditConfig::default()
    };
    let machine = machine();
    audit(trace, machine, None, &config).unwrap()
}

/// (kind, object kind) of every finding.
fn kinds(report: &AuditReport) -> Vec<(FindingKind, &'static str)> {
    report
        .findings
        .iter()
        .map(|f| (f.kind, f.object.kind))
        .collect()
}

/// The findings' kinds and object kinds are `expected`, in order.
fn assert_kinds(report: &AuditReport, expected: &[(FindingKind, &str)]) {
    assert_eq!(kinds(report), expected, "{report:#?}");
}

#[test]
fn a_heap_block_freed_before_the_segment_ends_keeps_its_name() {
    let base = 0x10_0000;
    let mut main = vec![alloc(base, 64, 0x40_0100)];
    main.extend(counters(base, 0));
    // Freed after the work, with no barrier in between: the segment is the whole run.
    main.push(Event::Free { addr: base });
    let (_dir, t) = trace(vec![main, counters(base, 1)]);
    let report = audit_of(&t);
    assert_eq!(
        kinds(&report),
        [(FindingKind::FalseSharing, "heap")],
        "{:#?}",
        report.findings
    );
}

#[test]
fn heap_blocks_allocated_one_after_another_on_one_line_are_both_named() {
    // Two 16-byte blocks from two sites, one per thread, 16 bytes apart in one line: the
    // finding is on one of them and must name the other, which the other thread writes.
    let (a, b) = (0x10_0000, 0x10_0020);
    let mut main = vec![alloc(a, 16, 0x40_0100), alloc(b, 16, 0x40_0200)];
    main.extend(counters(a, 0));
    // Thread 1's counter `b + 8·1 − 8` is the first word of block b.
    let (_dir, t) = trace(vec![main, counters(b - 8, 1)]);
    let report = audit_of(&t);
    assert_eq!(
        kinds(&report),
        [(FindingKind::FalseSharing, "heap")],
        "{:#?}",
        report.findings
    );
    let f = &report.findings[0];
    assert_eq!(f.neighbours.len(), 1, "{f:#?}");
    assert_ne!(f.neighbours[0], f.object.name, "{f:#?}");
    assert!(f.neighbours[0].contains("heap block"), "{f:#?}");
    assert!(
        f.suggestion.contains("aligned_alloc(64"),
        "{}",
        f.suggestion
    );
}

#[test]
fn memory_of_no_known_object_gets_one_finding_and_no_latent_echo() {
    // False sharing as recorded: shifted layouts must not report the same memory again,
    // also where a shifted line starts in the line before (thread 0 also writes the last
    // word of that line, which alone shares nothing).
    let base = 0x7fff_0000_1040;
    let mut first = counters(base, 0);
    first.extend((0..REPS).map(|_| access(AccessKind::Store, base - 8, 8, 0x40_1020)));
    let (_dir, t) = trace(vec![first, counters(base, 1)]);
    let report = audit_of(&t);
    assert_eq!(
        kinds(&report),
        [(FindingKind::FalseSharing, "unknown")],
        "{:#?}",
        report.findings
    );

    // Clean as recorded (the counters 32 bytes apart, on both sides of a line boundary at
    // +32), sharing a line under every shift but 32 and under 128-byte lines: one latent
    // finding, not one per layout.
    let at = |t: u64| 0x7fff_0000_1020 + 32 * t;
    let (_dir, t) = trace(vec![counters(at(0), 0), counters(at(1) - 8, 1)]);
    let report = audit_of(&t);
    assert_eq!(
        kinds(&report),
        [(FindingKind::LatentFalseSharing, "unknown")],
        "{:#?}",
        report.findings
    );
}

#[test]
fn the_same_bytes_accessed_with_different_widths_are_true_sharing() {
    // Thread 0 writes a 16-byte element with one vector store; thread 1 reads its two 8-byte
    // halves. Different (offset, size), the same bytes.
    let base = 0x20_0000;
    let writer: Vec<Event> = (0..REPS)
        .map(|_| access(AccessKind::Store, base, 16, 0x40_2000))
        .collect();
    let reader: Vec<Event> = (0..REPS)
        .flat_map(|_| {
            [
                access(AccessKind::Load, base, 8, 0x40_2010),
                access(AccessKind::Load, base + 8, 8, 0x40_2020),
            ]
        })
        .collect();
    let (_dir, t) = trace(vec![writer, reader]);
    let report = audit_of(&t);
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert_eq!(report.true_sharing.len(), 1, "{:#?}", report.true_sharing);
}

#[test]
fn the_main_threads_set_up_and_tear_down_are_not_concurrent_with_its_threads() {
    // A pthreads program without barriers: main writes the first word of 32 lines, creates
    // two threads, which read the second word of those lines and write the first word of
    // their own lines; main joins them and reads the second word of the threads' lines.
    // Different bytes of the same lines, but never at the same time.
    let input = 0x30_0000u64;
    let out = |t: u64| 0x40_0000 + 64 * t;
    let mut main: Vec<Event> = (0..32)
        .map(|l| access(AccessKind::Store, input + 64 * l, 8, 0x40_3000))
        .collect();
    main.push(Event::ThreadCreate { child: 1 });
    main.push(Event::ThreadCreate { child: 2 });
    main.push(Event::ThreadJoin { child: 1 });
    main.push(Event::ThreadJoin { child: 2 });
    main.extend(
        (1..3).flat_map(|t| {
            (0..REPS).map(move |_| access(AccessKind::Load, out(t) + 8, 8, 0x40_3010))
        }),
    );
    let worker = |t: u64| -> Vec<Event> {
        let mut e = vec![Event::ThreadStart];
        for _ in 0..REPS {
            for l in 0..32 {
                e.push(access(AccessKind::Load, input + 64 * l + 8, 8, 0x40_3020));
            }
            e.push(access(AccessKind::Store, out(t), 8, 0x40_3030));
        }
        e.push(Event::ThreadExit);
        e
    };
    let (_dir, t) = trace(vec![main, worker(1), worker(2)]);
    let report = audit_of(&t);
    // The input lines, which main and the threads touch in turn, are in no finding. (The
    // threads' own 64-byte lines are neighbours: placed one line further, they would share a
    // 128-byte line, a latent finding on them alone.)
    for f in &report.findings {
        assert_eq!(f.kind, FindingKind::LatentFalseSharing, "{f:#?}");
        assert_eq!((f.layout.line_size, f.layout.shift), (128, 64), "{f:#?}");
        assert_eq!(f.threads, [1, 2], "{f:#?}");
    }
    // Set-up, the threads' segment, tear-down.
    assert_eq!(report.segments, 3);
}

#[test]
fn data_the_main_thread_hands_over_names_it_among_the_threads() {
    // Main zero-fills 200 lines, creates two threads, which then write disjoint halves of
    // them: no line is shared by the workers, but each is handed over from main's set-up.
    // Listed as true sharing "between threads [1, 2]", the entry sent users looking for an
    // exchange between the workers that did not exist.
    let base = 0x50_0000u64;
    let mut main = vec![Event::Alloc {
        addr: base,
        size: 200 * 64,
        site: CodePos::new(0x40_4020),
        align: Alignment::new(64),
    }];
    main.extend((0..200).map(|l| access(AccessKind::Store, base + 64 * l, 8, 0x40_4000)));
    main.push(Event::ThreadCreate { child: 1 });
    main.push(Event::ThreadCreate { child: 2 });
    main.push(Event::ThreadJoin { child: 1 });
    main.push(Event::ThreadJoin { child: 2 });
    let half = |t: u64| -> Vec<Event> {
        let mut e = vec![Event::ThreadStart];
        for _ in 0..5 {
            for l in (t - 1) * 100..t * 100 {
                e.push(access(AccessKind::Store, base + 64 * l, 8, 0x40_4010));
            }
        }
        e.push(Event::ThreadExit);
        e
    };
    let (_dir, t) = trace(vec![main, half(1), half(2)]);
    let report = audit_of(&t);
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert_eq!(report.true_sharing.len(), 1, "{:#?}", report.true_sharing);
    let ts = &report.true_sharing[0];
    assert_eq!(ts.exchanges, 200, "{ts:#?}");
    assert_eq!(ts.handovers, 200, "{ts:#?}");
    assert_eq!(ts.threads, [0, 1, 2], "{ts:#?}");
}

#[test]
fn lines_the_main_thread_wrote_alone_do_not_dilute_a_finding() {
    // A 512-byte heap block the main thread zeroes line by line before it creates two
    // threads, which then update one word each of its first line: per-thread data on one
    // line, the whole of what the threads share. The set-up's eight lines must not count in
    // the fraction of the object's written lines that are falsely shared (1 of 8 is below the
    // default 0.2, and the audit passed).
    let base = 0x10_0000u64;
    let mut main = vec![Event::Alloc {
        addr: base,
        size: 512,
        site: CodePos::new(0x40_0100),
        align: Alignment::new(64),
    }];
    main.extend((0..64).map(|w| access(AccessKind::Store, base + 8 * w, 8, 0x40_0200)));
    main.push(Event::ThreadCreate { child: 1 });
    main.push(Event::ThreadCreate { child: 2 });
    main.push(Event::ThreadJoin { child: 1 });
    main.push(Event::ThreadJoin { child: 2 });
    let (_dir, t) = trace(vec![
        main,
        created_counters(base, 1),
        created_counters(base, 2),
    ]);
    let config = AuditConfig {
        simulate: false,
        ..AuditConfig::default()
    };
    let report = audit(&t, machine(), None, &config).unwrap();
    let f = report
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::FalseSharing)
        .unwrap_or_else(|| panic!("{report:#?}"));
    assert_eq!(f.object.kind, "heap", "{f:#?}");
    assert_eq!(f.line_fraction, 1.0, "{f:#?}");
    assert!(f.exceeds && report.fails(), "{f:#?}");
}

#[test]
fn exchanges_between_two_threads_do_not_hide_a_third_threads_false_sharing() {
    // Thread 0 stores 32 bytes at x, thread 1 loads them as eight 4-byte pieces (true
    // sharing), thread 2 stores 8 bytes at x + 32 (false sharing with both).
    let x = 0x50_0000;
    let t0: Vec<Event> = (0..REPS)
        .map(|_| access(AccessKind::Store, x, 32, 0x40_4000))
        .collect();
    let t1: Vec<Event> = (0..REPS)
        .flat_map(|_| (0..8).map(|i| access(AccessKind::Load, x + 4 * i, 4, 0x40_4010)))
        .collect();
    let t2: Vec<Event> = (0..REPS)
        .map(|_| access(AccessKind::Store, x + 32, 8, 0x40_4020))
        .collect();
    let (_dir, t) = trace(vec![t0, t1, t2]);
    let report = audit_of(&t);
    let fs: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::FalseSharing)
        .collect();
    assert_eq!(fs.len(), 1, "{:#?}", report.findings);
    // Thread 2 against threads 0 and 1: about 4 · REPS events.
    assert!(fs[0].events >= 3 * REPS, "{:#?}", fs[0]);
}

/// A stack frame event of the main thread.
fn frame(site: u64, sp: u64, cfa: u64) -> Event {
    Event::StackFrame {
        site: CodePos::new(site).unwrap(),
        sp,
        cfa,
    }
}

#[test]
fn memory_in_a_recorded_stack_frame_is_stack_memory_until_the_frames_are_replaced() {
    let stack = 0x7ffd_0000_1000;
    // Thread 0's frames, innermost first: the counters are in the second frame.
    let frames = [
        frame(0x40_2000, stack - 0x40, stack),
        frame(0x40_3000, stack, stack + 0x100),
    ];
    let mut main: Vec<Event> = frames.to_vec();
    main.extend(counters(stack + 0x40, 0));
    let (_dir, t) = trace(vec![main, counters(stack + 0x40, 1)]);
    let r = audit_of(&t);
    assert_kinds(&r, &[(FindingKind::FalseSharing, "stack")]);
    // No DWARF here: the trace's thread names the stack.
    assert_eq!(r.findings[0].object.name, "stack of thread 0");
    assert!(r.findings[0].declared_at.is_none());

    // A later set of frames (after any other event) replaces the earlier one: the counters'
    // bytes are in none of the new frames, so they are memory known only by its address.
    let mut main: Vec<Event> = frames.to_vec();
    main.push(Event::Advance { units: 1, flops: 0 });
    main.push(frame(0x40_4000, stack + 0x1000, stack + 0x1100));
    main.extend(counters(stack + 0x40, 0));
    let (_dir, t) = trace(vec![main, counters(stack + 0x40, 1)]);
    let r = audit_of(&t);
    assert_kinds(&r, &[(FindingKind::FalseSharing, "unknown")]);
}

#[test]
fn a_thread_created_after_a_barrier_is_not_concurrent_with_what_came_before_it() {
    let base = 0x30_0000;
    let barrier = |b| {
        [
            Event::BarrierEnter {
                barrier: b,
                participants: 2,
            },
            Event::BarrierLeave { barrier: b },
        ]
    };
    // Thread 1 updates its counter before the barrier; thread 2, created by the main thread
    // only after it, updates the neighbouring one: never at the same time.
    let mut main = vec![Event::ThreadCreate { child: 1 }];
    main.extend(barrier(7));
    main.extend([
        Event::ThreadCreate { child: 2 },
        Event::ThreadJoin { child: 1 },
        Event::ThreadJoin { child: 2 },
    ]);
    let mut first = vec![Event::ThreadStart];
    first.extend(counters(base, 0));
    first.extend(barrier(7));
    first.push(Event::ThreadExit);
    let second = created_counters(base, 1);
    let (_dir, t) = trace(vec![main, first.clone(), second.clone()]);
    let r = audit_of(&t);
    assert_kinds(&r, &[]);

    // Created before the barrier instead, thread 2 runs beside thread 1: false sharing.
    let mut main = vec![
        Event::ThreadCreate { child: 1 },
        Event::ThreadCreate { child: 2 },
    ];
    main.extend(barrier(7));
    main.extend([
        Event::ThreadJoin { child: 1 },
        Event::ThreadJoin { child: 2 },
    ]);
    let (_dir, t) = trace(vec![main, first, second]);
    let r = audit_of(&t);
    assert_kinds(&r, &[(FindingKind::FalseSharing, "unknown")]);
}

#[test]
fn a_thread_created_by_a_thread_with_a_higher_id_starts_in_its_creators_segment() {
    let base = 0x40_0000;
    // Main creates thread 2, which creates thread 1: threads 1 and 2 then update neighbouring
    // counters at the same time (ids need not follow creation order).
    let main = vec![
        Event::ThreadCreate { child: 2 },
        Event::ThreadJoin { child: 2 },
    ];
    let mut second = vec![Event::ThreadStart, Event::ThreadCreate { child: 1 }];
    second.extend(counters(base, 1));
    second.extend([Event::ThreadJoin { child: 1 }, Event::ThreadExit]);
    let first = created_counters(base, 0);
    let (_dir, t) = trace(vec![main, first, second]);
    let r = audit_of(&t);
    assert_kinds(&r, &[(FindingKind::FalseSharing, "unknown")]);
}

#[test]
fn threads_of_a_wave_the_main_thread_joined_are_not_concurrent_with_the_next_wave() {
    let base = 0x50_0000;
    let worker = |t| created_counters(base, t);
    // Thread 1 is created and joined before thread 2 is created: the same line, never at
    // the same time.
    let waves = vec![
        Event::ThreadCreate { child: 1 },
        Event::ThreadJoin { child: 1 },
        Event::ThreadCreate { child: 2 },
        Event::ThreadJoin { child: 2 },
    ];
    let (_dir, t) = trace(vec![waves, worker(0), worker(1)]);
    let r = audit_of(&t);
    assert_kinds(&r, &[]);
    // Both created before either is joined: false sharing.
    let together = vec![
        Event::ThreadCreate { child: 1 },
        Event::ThreadCreate { child: 2 },
        Event::ThreadJoin { child: 1 },
        Event::ThreadJoin { child: 2 },
    ];
    let (_dir, t) = trace(vec![together, worker(0), worker(1)]);
    let r = audit_of(&t);
    assert_kinds(&r, &[(FindingKind::FalseSharing, "unknown")]);
}

#[test]
fn the_main_threads_work_after_a_join_is_concurrent_with_threads_it_did_not_join() {
    let base = 0x60_0000;
    // Main creates thread 1 and joins it; thread 1 started thread 2 (detached), which still
    // runs while main goes on updating the counter next to thread 2's.
    let mut main = vec![
        Event::ThreadCreate { child: 1 },
        Event::ThreadJoin { child: 1 },
    ];
    main.extend(counters(base, 0));
    let first = vec![
        Event::ThreadStart,
        Event::ThreadCreate { child: 2 },
        Event::ThreadExit,
    ];
    let second = created_counters(base, 1);
    let (_dir, t) = trace(vec![main, first, second]);
    let r = audit_of(&t);
    assert_kinds(&r, &[(FindingKind::FalseSharing, "unknown")]);
}

#[test]
fn the_set_up_of_a_next_wave_is_not_concurrent_with_that_wave() {
    let base = 0x70_0000;
    // Wave 1 works elsewhere; then main updates counter 0 and only after that creates thread
    // 2, which updates counter 1: never at the same time.
    let mut main = vec![
        Event::ThreadCreate { child: 1 },
        Event::ThreadJoin { child: 1 },
    ];
    main.extend(counters(base, 0));
    main.extend([
        Event::ThreadCreate { child: 2 },
        Event::ThreadJoin { child: 2 },
    ]);
    let first = created_counters(base + 0x1000, 0);
    let second = created_counters(base, 1);
    let (_dir, t) = trace(vec![main, first, second]);
    let r = audit_of(&t);
    assert_kinds(&r, &[]);
}

#[test]
fn a_line_is_named_by_the_data_stored_to_most_not_by_a_neighbour_written_once() {
    // Thread 0 writes the first word of the line once (a thread handle, say); the threads'
    // counters 16 and 24 bytes further are written a thousand times: they name the line.
    let base = 0x7fff_0000_1000;
    let mut first = vec![access(AccessKind::Store, base, 8, 0x40_1030)];
    first.extend(counters(base + 16, 0));
    let (_dir, t) = trace(vec![first, counters(base + 16, 1)]);
    let r = audit_of(&t);
    assert_kinds(&r, &[(FindingKind::FalseSharing, "unknown")]);
    // The address that names the object (a global's symbol, a local's variable).
    let layout = Layout {
        line_size: 64,
        shift: 0,
    };
    let reports = estimate_trace(&t, &[layout], &mut HeapMap::new(), &mut StackMap::new()).unwrap();
    let samples: Vec<u64> = reports[0].blocks.iter().map(|b| b.sample_addr).collect();
    assert_eq!(samples, [base + 16]);
    // Comparable counts (a schedule's 3:1) keep the lowest written: the name must not follow
    // the schedule from run to run.
    let mut second = counters(base + 8, 1);
    second.extend(counters(base + 8, 1));
    second.extend(counters(base + 8, 1));
    let (_dir, t) = trace(vec![counters(base, 0), second]);
    let reports = estimate_trace(&t, &[layout], &mut HeapMap::new(), &mut StackMap::new()).unwrap();
    let samples: Vec<u64> = reports[0].blocks.iter().map(|b| b.sample_addr).collect();
    assert_eq!(samples, [base]);
}

#[test]
fn stack_memory_is_predicted_only_at_shifts_the_stack_alignment_allows() {
    let stack = 0x7ffd_0000_1000;
    let frames = [frame(0x40_3000, stack, stack + 0x200)];
    // Thread 0's counter 8 bytes into a line, thread 1's at the next line: only a shift of
    // 56 bytes puts them on one 64-byte line, and a stack frame moves by multiples of 16.
    let base = stack + 0x80;
    let mut main: Vec<Event> = frames.to_vec();
    main.extend(counters(base + 8, 0));
    let (_dir, t) = trace(vec![main, counters(base + 56, 1)]);
    let config = AuditConfig {
        min_events: 100,
        min_time_share: 0.0,
        min_line_fraction: 0.0,
        simulate: false,
        predict_line_sizes: Vec::new(),
        ..AuditConfig::default()
    };
    let machine = machine();
    let r = audit(&t, machine, None, &config).unwrap();
    assert_kinds(&r, &[]);
    // The same memory outside any recorded frame may land anywhere: latent at that shift.
    let (_dir, t) = trace(vec![counters(base + 8, 0), counters(base + 56, 1)]);
    let r = audit(&t, machine, None, &config).unwrap();
    assert_kinds(&r, &[(FindingKind::LatentFalseSharing, "unknown")]);
    assert_eq!(r.findings[0].layout.shift, 56);
}

#[test]
fn true_sharing_next_to_read_mostly_data_shows_the_replays_false_misses() {
    // Both threads increment one counter (true sharing) and read the word next to it, which
    // no one writes: the reads after the other thread's increment miss on a line whose bytes
    // they did not need changed.
    let base = 0x7fff_0000_2000;
    let worker = |t: u64| -> Vec<Event> {
        (0..REPS)
            .flat_map(|_| {
                [
                    access(AccessKind::Load, base, 8, 0x40_2000 + t),
                    access(AccessKind::Load, base + 48, 8, 0x40_2010 + t),
                    access(AccessKind::Store, base + 48, 8, 0x40_2020 + t),
                ]
            })
            .collect()
    };
    let (_dir, t) = trace(vec![worker(0), worker(1)]);
    let config = AuditConfig {
        min_events: 100,
        min_time_share: 0.0,
        min_line_fraction: 0.0,
        ..AuditConfig::default()
    };
    let machine = machine();
    let model = cachescope_sim::MachineModel::load("ivybridge-4c").unwrap();
    let r = audit(&t, machine, Some(&model), &config).unwrap();
    assert_kinds(&r, &[]);
    assert_eq!(r.true_sharing.len(), 1, "{r:#?}");
    let ts = &r.true_sharing[0];
    assert!(ts.simulated_true.is_some_and(|n| n > 0), "{ts:#?}");
    assert!(ts.simulated_false.is_some_and(|n| n > 0), "{ts:#?}");
}

#[test]
fn latent_findings_that_fail_the_audit_are_reported_as_failing() {
    // Each thread's counter on a 64-byte line of its own: false sharing only with 128-byte
    // lines. With `fail_on_latent` the finding fails the run, and SARIF says `error` (it said
    // `warning` until 2026-11-28, and the report `[warn]`).
    let base = 0x10_0000;
    let (_dir, t) = trace(vec![counters(base, 0), counters(base + 56, 1)]);
    let mut config = AuditConfig {
        min_events: 100,
        min_time_share: 0.0,
        min_line_fraction: 0.0,
        simulate: false,
        ..AuditConfig::default()
    };
    for fail_on_latent in [false, true] {
        config.fail_on_latent = fail_on_latent;
        let report = audit(&t, machine(), None, &config).unwrap();
        assert_kinds(&report, &[(FindingKind::LatentFalseSharing, "unknown")]);
        assert_eq!(report.fails(), fail_on_latent);
        assert_eq!(report.finding_fails(&report.findings[0]), fail_on_latent);
        let log = to_sarif(&report, std::path::Path::new("/"), "test");
        let level = &log.sarif["runs"][0]["results"][0]["level"];
        assert_eq!(level, if fail_on_latent { "error" } else { "warning" });
        // Accepted by a baseline: a note, and the run passes.
        let mut accepted = report.clone();
        accepted.accept(|_| true);
        assert!(!accepted.fails() && accepted.findings[0].baselined);
        let log = to_sarif(&accepted, std::path::Path::new("/"), "test");
        assert_eq!(log.sarif["runs"][0]["results"][0]["level"], "note");
    }
}

#[test]
fn an_object_on_a_recorded_findings_line_is_not_latent() {
    // Two 16-byte heap blocks on one line, each with one 8-byte part per thread; the line is
    // named by the first (stored to more often). The second is falsely shared as recorded
    // too (the finding names it as a neighbour): a shifted layout that gives it a line of its
    // own must not report it as latent false sharing "with no false sharing as recorded"
    // (until 2026-11-28 it did, counting its events a second time).
    let (a, b) = (0x10_0000u64, 0x10_0020u64);
    let worker = |t: u64| -> Vec<Event> {
        let mut e = Vec::new();
        for i in 0..REPS {
            e.push(access(AccessKind::Store, a + 8 * t, 8, 0x40_1000 + t));
            if i % 2 == 0 {
                e.push(access(AccessKind::Store, b + 8 * t, 8, 0x40_2000 + t));
            }
        }
        e
    };
    let mut main = vec![alloc(a, 16, 0x40_0100), alloc(b, 16, 0x40_0200)];
    main.extend(worker(0));
    let (_dir, t) = trace(vec![main, worker(1)]);
    let report = audit_of(&t);
    assert_kinds(&report, &[(FindingKind::FalseSharing, "heap")]);
    assert_eq!(report.findings[0].neighbours.len(), 1, "{report:#?}");
}

#[test]
fn a_stack_line_is_named_by_its_longest_shared_phase() {
    // The main thread's frame holds, on one line, the threads' arguments (at +0x10, read once
    // before a barrier while main writes the second thread's) and their counters (at +0x00,
    // updated in the long phase after it). The line was named by the first phase that shared
    // it, so the finding named whichever local that phase's address fell in (the arguments,
    // or a thread handle, changing with the stack's placement from run to run), and the main
    // thread was among its threads though it never touched the line in the long phase.
    let stack = 0x7ffd_0000_1000u64;
    let line = stack + 0x40;
    let barrier = [
        Event::BarrierEnter {
            barrier: 7,
            participants: 2,
        },
        Event::BarrierLeave { barrier: 7 },
    ];
    let mut main = vec![
        frame(0x40_3000, stack, stack + 0x100),
        access(AccessKind::Store, line + 0x10, 8, 0x40_0100),
        Event::ThreadCreate { child: 1 },
        access(AccessKind::Store, line + 0x18, 8, 0x40_0100),
        Event::ThreadCreate { child: 2 },
    ];
    main.extend([
        Event::ThreadJoin { child: 1 },
        Event::ThreadJoin { child: 2 },
    ]);
    let worker = |t: u64| -> Vec<Event> {
        let mut e = vec![
            Event::ThreadStart,
            access(AccessKind::Load, line + 0x10 + 8 * (t - 1), 8, 0x40_0200),
        ];
        e.extend(barrier);
        e.extend(counters(line - 8, t));
        e.push(Event::ThreadExit);
        e
    };
    let (_dir, t) = trace(vec![main, worker(1), worker(2)]);
    let layout = Layout {
        line_size: 64,
        shift: 0,
    };
    let reports = estimate_trace(&t, &[layout], &mut HeapMap::new(), &mut StackMap::new()).unwrap();
    let b = &reports[0].blocks[0];
    assert_eq!(b.block, line, "{b:#?}");
    assert!(b.phi_prime > 2 * REPS, "{b:#?}");
    // The counters name it, in the frame (which names the local when DWARF is at hand).
    assert_eq!(b.sample_addr, line, "{b:#?}");
    assert_eq!(b.stack.as_ref().map(|s| s.addr), Some(line), "{b:#?}");
    assert_eq!(b.threads, [1, 2], "{b:#?}");
}

#[test]
fn a_neighbours_finding_on_an_objects_first_line_does_not_hide_its_latent_one() {
    // Heap block A (16 bytes) is falsely shared on the line it shares with the start of block
    // B; B's own per-thread counters sit on lines of their own further on, falsely shared
    // only with 128-byte lines. A's recorded finding must not count as B's (it did for a
    // while on 2026-11-28, and B's latent finding was gone).
    let (a, b) = (0x10_0000u64, 0x10_0020u64);
    let worker = |t: u64| -> Vec<Event> {
        let mut e = Vec::new();
        for _ in 0..REPS {
            e.push(access(AccessKind::Store, a + 8 * t, 8, 0x40_1000 + t));
            e.push(access(
                AccessKind::Store,
                0x10_0080 + 0x40 * t,
                8,
                0x40_2000 + t,
            ));
        }
        e
    };
    let mut main = vec![alloc(a, 16, 0x40_0100), alloc(b, 0x100, 0x40_0200)];
    main.extend(worker(0));
    let (_dir, t) = trace(vec![main, worker(1)]);
    let report = audit_of(&t);
    let latent: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::LatentFalseSharing)
        .collect();
    assert_eq!(latent.len(), 1, "{report:#?}");
    assert_eq!(latent[0].layout.line_size, 128, "{report:#?}");
    assert!(latent[0].object.name.contains("0x400200"), "{report:#?}");
}
