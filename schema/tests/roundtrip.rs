//! Random event sequences for several threads round-trip exactly through writer and reader.

use std::io::Write;

use cachescope_schema::{
    verify_file, Access, AccessKind, Alignment, CodePos, Event, TimeUnit, TraceFile, TraceHeader,
    TraceWriter,
};
use proptest::prelude::*;

fn code_pos() -> impl Strategy<Value = Option<CodePos>> {
    prop_oneof![Just(None), any::<u64>().prop_map(CodePos::new)]
}

fn access() -> impl Strategy<Value = Event> {
    (
        prop::sample::select(AccessKind::ALL.to_vec()),
        prop_oneof![
            prop::sample::select(vec![1u32, 2, 4, 8, 16]),
            1u32..=cachescope_schema::limits::MAX_ACCESS_BYTES
        ],
        prop_oneof![any::<u64>(), 0x1000u64..0x2000],
        code_pos(),
    )
        .prop_map(|(kind, size, addr, pc)| {
            Event::Access(Access {
                kind,
                size,
                addr,
                pc,
            })
        })
}

/// Any event the format can hold (sync events need not be satisfiable here: the per-thread
/// reader does not interpret them).
fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        6 => access(),
        2 => (any::<u64>(), prop_oneof![Just(0u64), any::<u64>()])
            .prop_map(|(units, flops)| Event::Advance { units, flops }),
        1 => (any::<u64>(), any::<u32>())
            .prop_map(|(barrier, participants)| Event::BarrierEnter { barrier, participants }),
        1 => any::<u64>().prop_map(|barrier| Event::BarrierLeave { barrier }),
        1 => (any::<u64>(), any::<u64>()).prop_map(|(lock, order)| Event::LockAcquire { lock, order }),
        1 => any::<u64>().prop_map(|lock| Event::LockRelease { lock }),
        1 => any::<u32>().prop_map(|child| Event::ThreadCreate { child }),
        1 => Just(Event::ThreadStart),
        1 => Just(Event::ThreadExit),
        1 => any::<u32>().prop_map(|child| Event::ThreadJoin { child }),
        1 => (any::<u64>(), any::<u32>()).prop_map(|(region, team)| Event::RegionBegin { region, team }),
        1 => any::<u64>().prop_map(|region| Event::RegionEnd { region }),
        1 => (any::<u64>(), any::<u64>(), code_pos(), 0u8..=32)
            .prop_map(|(addr, size, site, log2)| Event::Alloc {
                addr,
                size,
                site,
                // 32 is out of range: no alignment.
                align: Alignment::from_log2(log2),
            }),
        1 => any::<u64>().prop_map(|addr| Event::Free { addr }),
        1 => (1u64..).prop_map(|site| Event::AllocCaller {
            site: CodePos::new(site).expect("not 0"),
        }),
        // Any pair of bounds, also a frame that ends below its start (readers ignore those).
        1 => (1u64.., any::<u64>(), any::<u64>()).prop_map(|(site, sp, cfa)| Event::StackFrame {
            site: CodePos::new(site).expect("not 0"),
            sp,
            cfa,
        }),
    ]
}

fn write_trace(
    path: &std::path::Path,
    threads: &[(u32, Vec<Event>)],
    chunk_events: usize,
) -> TraceHeader {
    let mut header = TraceHeader::new("test", "roundtrip", TimeUnit::Events);
    header.args = vec!["a b".into(), "ü".into()];
    let file = std::fs::File::create(path).unwrap();
    let w = TraceWriter::with_chunk_events(file, &header, chunk_events).unwrap();
    // Interleave the threads' pushes so chunks of different threads alternate in the file.
    let mut writers: Vec<_> = threads.iter().map(|(t, _)| w.thread(*t).unwrap()).collect();
    let longest = threads.iter().map(|(_, e)| e.len()).max().unwrap_or(0);
    for i in 0..longest {
        for (k, (_, evs)) in threads.iter().enumerate() {
            if let Some(e) = evs.get(i) {
                writers[k].push(*e).unwrap();
            }
        }
    }
    for tw in writers {
        tw.finish().unwrap();
    }
    w.finish().unwrap().flush().unwrap();
    header
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn events_roundtrip_exactly(
        threads in prop::collection::vec(prop::collection::vec(event(), 0..300), 1..5),
        chunk_events in 1usize..64,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.cstrace");
        let threads: Vec<(u32, Vec<Event>)> = threads
            .into_iter()
            .enumerate()
            .map(|(i, evs)| (i as u32 * 7, evs))
            .collect();
        let header = write_trace(&path, &threads, chunk_events);
        let trace = TraceFile::open(&path).unwrap();
        prop_assert_eq!(trace.header(), &header);
        for (tid, events) in &threads {
            if events.is_empty() {
                prop_assert!(trace.thread_events(*tid).is_err());
                continue;
            }
            let back: Vec<Event> = trace.thread_events(*tid).unwrap().map(Result::unwrap).collect();
            prop_assert_eq!(&back, events);
        }
        let report = verify_file(&path).unwrap();
        prop_assert!(report.damage.is_none(), "{:?}", report.damage);
        prop_assert_eq!(
            report.recoverable_events,
            threads.iter().map(|(_, e)| e.len() as u64).sum::<u64>()
        );
    }
}

/// Several OS threads write one trace at the same time; every thread's stream comes back
/// exactly, and the file verifies.
#[test]
fn concurrent_writers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.cstrace");
    let header = TraceHeader::new("test", "concurrent", TimeUnit::Instructions);
    let w = TraceWriter::with_chunk_events(std::fs::File::create(&path).unwrap(), &header, 1000)
        .unwrap();
    let expected = |t: u32| -> Vec<Event> {
        (0..50_000u64)
            .map(|i| match i % 3 {
                0 => Event::load(0x1000 * t as u64 + 8 * i, 8),
                1 => Event::store(0x9000_0000 + i, 4),
                _ => Event::Advance {
                    units: i % 7,
                    flops: t as u64,
                },
            })
            .collect()
    };
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let mut tw = w.thread(t).unwrap();
            s.spawn(move || {
                for e in expected(t) {
                    tw.push(e).unwrap();
                }
                tw.finish().unwrap();
            });
        }
    });
    w.finish().unwrap();
    let f = TraceFile::open(&path).unwrap();
    for t in 0..4u32 {
        let back: Vec<Event> = f.thread_events(t).unwrap().map(Result::unwrap).collect();
        assert_eq!(back, expected(t), "thread {t}");
    }
    assert!(verify_file(&path).unwrap().ok());
}

/// Loops: a body of accesses at recurring code positions, repeated any number of times
/// (including a number that stops mid-period), then other events. The codec stores such loops
/// as runs, so this exercises run encoding and decoding, which random events rarely reach.
fn looped() -> impl Strategy<Value = Vec<Event>> {
    let body = prop::collection::vec(
        (
            prop::sample::select(vec![
                AccessKind::Load,
                AccessKind::Store,
                AccessKind::Modify,
            ]),
            0u64..6,                                              // code position index
            prop::sample::select(vec![0i64, 4, 8, -8, 64, 4096]), // stride
            prop::sample::select(vec![4u32, 8, 3]),
            any::<bool>(), // with or without a following Advance
        ),
        1..9,
    );
    prop::collection::vec(
        (body, 0u64..120, 0u64..1 << 20, prop::option::of(event())),
        1..5,
    )
    .prop_map(|loops| {
        let mut out = Vec::new();
        for (body, reps, base, tail) in loops {
            for it in 0..reps as i64 {
                for (k, &(kind, pcx, stride, size, adv)) in body.iter().enumerate() {
                    let addr = (base as i64 + 0x1000 * k as i64 + it * stride) as u64;
                    out.push(Event::Access(Access {
                        kind,
                        size,
                        addr,
                        pc: CodePos::new(0x400000 + 0x10 * pcx),
                    }));
                    if adv {
                        out.push(Event::Advance { units: 2, flops: 1 });
                    }
                }
            }
            out.extend(tail);
            out.push(Event::load(base ^ 0x55, 8));
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn loops_roundtrip_exactly(events in looped(), chunk_events in prop::sample::select(vec![7usize, 100, 4096])) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.cstrace");
        write_trace(&path, &[(0, events.clone())], chunk_events);
        let back: Vec<Event> = TraceFile::open(&path).unwrap().thread_events(0).unwrap().map(Result::unwrap).collect();
        prop_assert_eq!(back, events);
    }
}

/// A thread's stream read again from a mark (start, inside a chunk, at a chunk boundary, the
/// end) gives the same events as the first reading from there.
#[test]
fn thread_events_seek_back_to_a_mark() {
    use cachescope_schema::synth::{generate, GenParams, Workload};
    let mut p = GenParams::new(Workload::Stencil);
    p.threads = 2;
    p.size = 8192;
    p.iterations = 2;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.cstrace");
    // Small chunks: marks fall inside chunks and on their boundaries.
    std::fs::write(&path, generate(&p, Vec::new(), 100).unwrap()).unwrap();
    let trace = TraceFile::open(&path).unwrap();
    let all: Vec<Event> = trace
        .thread_events(1)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(all.len() > 500, "{} events", all.len());
    for at in [0, 1, 99, 100, 101, 250, all.len() - 1, all.len()] {
        let mut it = trace.thread_events(1).unwrap();
        for _ in 0..at {
            it.next().unwrap().unwrap();
        }
        let mark = it.mark();
        let first: Vec<Event> = it.by_ref().take(150).collect::<Result<_, _>>().unwrap();
        assert_eq!(first[..], all[at..(at + 150).min(all.len())], "from {at}");
        it.seek(mark).unwrap();
        let again: Vec<Event> = it.collect::<Result<_, _>>().unwrap();
        assert_eq!(again[..], all[at..], "again from {at}");
    }
}

/// A file of format version 4, recorded (`accumulators_packed 3000`, 2 threads) where the
/// hashed predictor slots of versions 1 to 4 put two of the loop's instructions into one slot
/// (27,832 bytes for 42,000 events; 2,128 in most runs), decodes as it always did: the
/// digest of its accesses is the one the version 4 reader gave (`cachescope trace dump` of it
/// is byte-identical too). Read with version 5's slots, its addresses would differ.
#[test]
fn old_files_decode_as_before() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/hashed_slots_v4.cstrace");
    let t = TraceFile::open(&path).unwrap();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut accesses = 0u64;
    for id in t.thread_ids().collect::<Vec<_>>() {
        for e in t.thread_events(id).unwrap() {
            if let Event::Access(a) = e.unwrap() {
                accesses += 1;
                for v in [a.addr, a.pc.map_or(0, |p| p.addr()), u64::from(a.size)] {
                    h = (h ^ v).wrapping_mul(0x0000_0100_0000_01b3);
                }
            }
        }
    }
    assert_eq!(
        (accesses, h),
        (36_018, 14_946_909_190_594_675_087),
        "digest of the decoded accesses"
    );
}
