//! The audit's shift prediction respects a heap block's requested alignment: a block from
//! `aligned_alloc(64, …)` cannot start 32 bytes past a 64-byte line, a `malloc`ed one can.

use cachescope_analysis::audit::{audit, AuditConfig, AuditMachine, FindingKind};
use cachescope_schema::{
    Access, AccessKind, Alignment, CodePos, Event, TimeUnit, TraceFile, TraceHeader, TraceWriter,
};

/// Per-thread data 32 bytes apart in 128-byte structs, as in `examples/latent_false_sharing.c`:
/// thread 0 writes bytes 32..63 of each struct, thread 1 bytes 64..95. On a line boundary
/// (64-byte lines) the threads never share a line; 32 bytes further every struct's middle
/// line holds both threads' data.
const STRUCTS: u64 = 32;
const REPS: u64 = 64;

/// Blocks on 128-byte boundaries, one per requested alignment, each from its own site.
fn blocks() -> Vec<(u64, Option<Alignment>)> {
    [
        None,
        Alignment::new(16),
        Alignment::new(32),
        Alignment::new(64),
        Alignment::new(128),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, a)| (0x10_0000 * (i as u64 + 1), a))
    .collect()
}

fn site(i: usize) -> Option<CodePos> {
    CodePos::new(0x40_0000 + 0x100 * i as u64)
}

fn trace() -> (tempfile::TempDir, TraceFile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("aligned.cstrace");
    let w =
        TraceWriter::create(&path, &TraceHeader::new("test", "test", TimeUnit::Events)).unwrap();
    for t in 0..2u32 {
        let mut tw = w.thread(t).unwrap();
        let mut events = Vec::new();
        if t == 0 {
            for (i, &(addr, align)) in blocks().iter().enumerate() {
                events.push(Event::Alloc {
                    addr,
                    size: STRUCTS * 128 + 128,
                    site: site(i),
                    align,
                });
            }
        } else {
            // Start after the allocations.
            events.push(Event::Advance {
                units: 100,
                flops: 0,
            });
        }
        for r in 0..REPS {
            for &(base, _) in &blocks() {
                for s in 0..STRUCTS {
                    events.push(Event::Access(Access {
                        kind: AccessKind::Store,
                        size: 8,
                        addr: base + 128 * s + 32 + 32 * u64::from(t) + 8 * (r % 4),
                        pc: CodePos::new(0x40_1000 + u64::from(t)),
                    }));
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

#[test]
fn shifts_a_requested_alignment_rules_out_are_not_predicted() {
    let (_dir, trace) = trace();
    let config = AuditConfig {
        min_time_share: 0.0,
        // Shifts only: other line sizes do not depend on the alignment.
        predict_line_sizes: vec![],
        simulate: false,
        ..AuditConfig::default()
    };
    let machine = AuditMachine {
        line_size: 64,
        penalty_cycles: 100.0,
        ipc: 1.0,
    };
    let report = audit(&trace, machine, None, &config).unwrap();
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.kind == FindingKind::LatentFalseSharing),
        "clean as recorded: {:#?}",
        report.findings
    );
    // One latent finding per block whose alignment allows a 32-byte shift: none, 16, 32.
    let mut flagged: Vec<(String, u64)> = report
        .findings
        .iter()
        .map(|f| (f.object.name.clone(), f.layout.shift))
        .collect();
    flagged.sort();
    let expected: Vec<(String, u64)> = (0..3)
        .map(|i| (format!("heap block from {}", site(i).unwrap()), 32))
        .collect();
    assert_eq!(flagged, expected, "{:#?}", report.findings);
    // The malloc-style block's advice says how to rule the placement out.
    let unaligned = report
        .findings
        .iter()
        .find(|f| f.object.name == expected[0].0)
        .unwrap();
    assert!(
        unaligned.suggestion.contains("aligned_alloc(64"),
        "{}",
        unaligned.suggestion
    );
}
