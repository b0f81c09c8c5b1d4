//! The audit's shift prediction respects a heap block's alignment: a block from
//! `aligned_alloc(64, …)` cannot start 32 bytes past a 64-byte line, a `malloc`ed one can, but
//! not 8 bytes past one (malloc guarantees 16 bytes); memory of no known object keeps every
//! shift.

use cachescope_analysis::audit::{audit, AuditConfig, AuditMachine, AuditReport, FindingKind};
use cachescope_schema::{
    Access, AccessKind, Alignment, CodePos, Event, TimeUnit, TraceFile, TraceHeader, TraceWriter,
};

/// Structs per block, and how often each thread writes its part of every struct.
const STRUCTS: u64 = 32;
const REPS: u64 = 64;

/// One thread's 8-byte element: (offset in the struct, thread).
type Element = (u64, u32);

/// A region of memory the threads write: its start and, for a heap block, the alignment its
/// allocation asked for and the index of its allocation site (`None`: no known object).
type Region = (u64, Option<(Option<Alignment>, usize)>);

/// Per-thread data 32 bytes apart in 128-byte structs, as in `examples/latent_false_sharing.c`:
/// thread 0 writes bytes 32..63 of each struct, thread 1 bytes 64..95. On a line boundary
/// (64-byte lines) the threads never share a line; 32 bytes further every struct's middle
/// line holds both threads' data.
fn apart_32() -> (u64, Vec<Element>) {
    let mut e: Vec<Element> = (0..4).map(|i| (32 + 8 * i, 0)).collect();
    e.extend((0..4).map(|i| (64 + 8 * i, 1)));
    (128, e)
}

/// Four pairs in 256-byte structs: thread 0's element at p, thread 1's at p + 56, for p = 8,
/// 24, 40, 56 (each pair in its own quarter). A pair shares a line only when its span
/// [p, p + 64) is one line, i.e. shifted by 64 − p: so the threads share lines only with
/// shifts 8, 24, 40 and 56 — none that is a multiple of 16.
fn odd_eights() -> (u64, Vec<Element>) {
    let mut e = Vec::new();
    for (k, p) in [8u64, 24, 40, 56].into_iter().enumerate() {
        let quarter = 256 * k as u64;
        e.push((quarter + p, 0));
        e.push((quarter + p + 56, 1));
    }
    (1024, e)
}

fn site(i: usize) -> Option<CodePos> {
    CodePos::new(0x40_0000 + 0x100 * i as u64)
}

/// A trace of two threads writing their elements of `STRUCTS` structs of `pattern` in every
/// region (starts are line-aligned).
fn trace(pattern: (u64, Vec<Element>), regions: &[Region]) -> (tempfile::TempDir, TraceFile) {
    let (stride, elements) = pattern;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("aligned.cstrace");
    let w =
        TraceWriter::create(&path, &TraceHeader::new("test", "test", TimeUnit::Events)).unwrap();
    for t in 0..2u32 {
        let mut tw = w.thread(t).unwrap();
        let mut events = Vec::new();
        if t == 0 {
            for &(addr, block) in regions {
                if let Some((align, i)) = block {
                    events.push(Event::Alloc {
                        addr,
                        size: STRUCTS * stride + stride,
                        site: site(i),
                        align,
                    });
                }
            }
        } else {
            // Start after the allocations.
            events.push(Event::Advance {
                units: 100,
                flops: 0,
            });
        }
        for _ in 0..REPS {
            for &(base, _) in regions {
                for s in 0..STRUCTS {
                    for &(offset, owner) in &elements {
                        if owner == t {
                            events.push(Event::Access(Access {
                                kind: AccessKind::Store,
                                size: 8,
                                addr: base + stride * s + offset,
                                pc: CodePos::new(0x40_1000 + u64::from(t)),
                            }));
                        }
                    }
                }
            }
        }
        tw.extend(events).unwrap();
        tw.finish().unwrap();
    }
    w.finish().unwrap();
    let f = TraceFile::open(&path).unwrap();
    (dir, f)
}

/// The audit with shift prediction only (other line sizes do not depend on alignment), no
/// replay, and no time or line-share threshold (the generated threads have no time to speak
/// of).
fn audit_shifts(trace: &TraceFile) -> AuditReport {
    let config = AuditConfig {
        min_events: 100,
        min_time_share: 0.0,
        // A quarter of `odd_eights`' lines share under any one shift.
        min_line_fraction: 0.0,
        predict_line_sizes: vec![],
        simulate: false,
        ..AuditConfig::default()
    };
    let machine = AuditMachine {
        line_size: 64,
        penalty_cycles: 100.0,
        ipc: 1.0,
    };
    let report = audit(trace, machine, None, &config).unwrap();
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.kind == FindingKind::LatentFalseSharing),
        "clean as recorded: {:#?}",
        report.findings
    );
    report
}

#[test]
fn shifts_a_requested_alignment_rules_out_are_not_predicted() {
    // One block per requested alignment, each from its own site, and two blocks from one site
    // (an allocation wrapper taking the alignment): one 64-aligned, one not.
    let aligns = [
        None,
        Alignment::new(16),
        Alignment::new(32),
        Alignment::new(64),
        Alignment::new(128),
    ];
    let mut regions: Vec<_> = aligns
        .iter()
        .enumerate()
        .map(|(i, &a)| (0x10_0000 * (i as u64 + 1), Some((a, i))))
        .collect();
    regions.push((0x70_0000, Some((Alignment::new(64), 5))));
    regions.push((0x80_0000, Some((None, 5))));
    let (_dir, trace) = trace(apart_32(), &regions);
    let report = audit_shifts(&trace);
    // One latent finding per site with a block whose alignment allows a 32-byte shift: none,
    // 16, 32, and the mixed site with only its unaligned block's lines (one per struct).
    let mut flagged: Vec<(String, u64, usize)> = report
        .findings
        .iter()
        .map(|f| (f.object.name.clone(), f.layout.shift, f.lines))
        .collect();
    flagged.sort();
    let expected: Vec<(String, u64, usize)> = [0, 1, 2, 5]
        .into_iter()
        .map(|i| {
            let name = format!("heap block from {}", site(i).unwrap());
            (name, 32, STRUCTS as usize)
        })
        .collect();
    assert_eq!(flagged, expected, "{:#?}", report.findings);
    // The malloc-style block's advice says how to rule the placement out.
    let unaligned = report
        .findings
        .iter()
        .find(|f| f.object.name == expected[0].0)
        .unwrap();
    assert!(
        unaligned.suggestion.contains("aligned_alloc(64")
            && unaligned.suggestion.contains("alignas(64)"),
        "{}",
        unaligned.suggestion
    );
}

#[test]
fn malloc_blocks_are_not_shifted_by_less_than_sixteen_bytes() {
    // The same accesses in a malloc-style block and in memory of no known object: only the
    // latter can move by 8 bytes, and only moves by odd multiples of 8 share lines.
    let (_dir, trace) = trace(
        odd_eights(),
        &[(0x10_0000, Some((None, 0))), (0x20_0000, None)],
    );
    let report = audit_shifts(&trace);
    // Unknown memory is one object per line: every line of a pair is flagged, at its shift.
    assert_eq!(
        report.findings.len(),
        4 * STRUCTS as usize,
        "{:#?}",
        report.findings
    );
    for f in &report.findings {
        assert_eq!(f.object.kind, "unknown", "{f:#?}");
        assert_eq!(f.layout.shift % 16, 8, "{f:#?}");
    }
}
