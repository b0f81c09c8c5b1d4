//! Damaged traces: every class of bad input gives the right error kind with a location, and
//! `verify` recovers exactly the complete chunks before the damage.

use cachescope_schema::chunk::ChunkDecoder;
use cachescope_schema::frame::{write_frame, FILE_HEADER_BYTES, FRAME_HEADER_BYTES};
use cachescope_schema::record::{decode_record, encode_chunk, encode_trailer, ChunkMeta, Record};
use cachescope_schema::synth::{generate, GenParams, Workload};
use cachescope_schema::{
    verify_file, Access, AccessKind, Alignment, CodePos, ErrorKind, Event, OpenOptions, TimeUnit,
    TraceFile, TraceHeader, TraceWriter,
};

/// A small 2-thread trace with many small chunks, and the end offset and cumulative event
/// count of every chunk frame.
fn sample() -> (Vec<u8>, Vec<(u64, u64)>) {
    let mut p = GenParams::new(Workload::FalseSharing);
    p.size = 2048;
    p.iterations = 2;
    let bytes = generate(&p, Vec::new(), 50).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.cstrace");
    std::fs::write(&path, &bytes).unwrap();
    let f = TraceFile::open(&path).unwrap();
    let mut events = 0;
    let ends = f
        .chunks()
        .iter()
        .map(|c| {
            events += c.meta.event_count as u64;
            (c.offset + FRAME_HEADER_BYTES + c.len as u64, events)
        })
        .collect();
    (bytes, ends)
}

fn with_file<T>(bytes: &[u8], f: impl FnOnce(&std::path::Path) -> T) -> T {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.cstrace");
    std::fs::write(&path, bytes).unwrap();
    f(&path)
}

#[test]
fn truncation_at_every_byte() {
    let (bytes, ends) = sample();
    assert!(ends.len() >= 5, "want several chunks, got {}", ends.len());
    for cut in 0..bytes.len() {
        with_file(&bytes[..cut], |path| {
            let err = TraceFile::open(path)
                .err()
                .expect("a cut trace must not open");
            assert!(
                matches!(err.kind, ErrorKind::Truncated | ErrorKind::MissingTrailer),
                "cut {cut}: {err}"
            );
            assert!(err.offset.is_some(), "cut {cut}: no offset in {err}");
            assert!(err.to_string().contains("bad.cstrace"), "{err}");
            let report = verify_file(path).unwrap();
            assert!(!report.ok());
            let expected = ends
                .iter()
                .take_while(|(end, _)| *end <= cut as u64)
                .last()
                .map_or(0, |(_, ev)| *ev);
            assert_eq!(report.recoverable_events, expected, "cut {cut}");
            if cut as u64 >= FILE_HEADER_BYTES + 8 && report.has_header {
                let f = TraceFile::open_with(
                    path,
                    OpenOptions {
                        allow_incomplete: true,
                    },
                )
                .unwrap();
                assert_eq!(f.event_count(), expected, "cut {cut}");
            }
        });
    }
}

#[test]
fn flipped_bits_are_detected_everywhere() {
    let (bytes, _) = sample();
    for pos in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[pos] ^= 1 << (pos % 8);
        with_file(&bad, |path| {
            let err = TraceFile::open(path).err();
            let report = verify_file(path).unwrap();
            let err = err.unwrap_or_else(|| panic!("flip at {pos} went unnoticed"));
            assert!(
                matches!(
                    err.kind,
                    ErrorKind::ChecksumMismatch
                        | ErrorKind::BadMagic
                        | ErrorKind::UnsupportedVersion
                        | ErrorKind::LimitExceeded
                        | ErrorKind::Truncated
                        | ErrorKind::Malformed
                        // The file header's version against the header record's.
                        | ErrorKind::Inconsistent
                ),
                "pos {pos}: {err}"
            );
            assert!(!report.ok(), "pos {pos}");
        });
    }
}

#[test]
fn damage_in_the_header_record_is_not_called_a_chunk() {
    let (bytes, _) = sample();
    let first_chunk = first_chunk_offset(&bytes) as usize;
    // A byte of the header record's payload (after the file header and its frame header).
    let pos = (FILE_HEADER_BYTES + FRAME_HEADER_BYTES) as usize + 4;
    assert!(pos < first_chunk);
    let mut bad = bytes.clone();
    bad[pos] ^= 0x10;
    let err = with_file(&bad, |p| TraceFile::open(p).err().unwrap());
    assert_eq!(err.kind, ErrorKind::ChecksumMismatch, "{err}");
    assert_eq!(err.chunk, None, "{err}");
    assert!(err.message.starts_with("the header record: "), "{err}");
    // The same damage in the first chunk is located at chunk #0.
    let mut bad = bytes;
    bad[first_chunk + FRAME_HEADER_BYTES as usize + 4] ^= 0x10;
    let err = with_file(&bad, |p| TraceFile::open(p).err().unwrap());
    assert_eq!(
        (err.kind, err.chunk),
        (ErrorKind::ChecksumMismatch, Some(0)),
        "{err}"
    );
}

#[test]
fn wrong_magic_and_version() {
    let (mut bytes, _) = sample();
    bytes[..8].copy_from_slice(b"NOTATRCE");
    let err = with_file(&bytes, |p| TraceFile::open(p).err().unwrap());
    assert_eq!((err.kind, err.offset), (ErrorKind::BadMagic, Some(0)));

    let (mut bytes, _) = sample();
    bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
    let err = with_file(&bytes, |p| TraceFile::open(p).err().unwrap());
    assert_eq!(err.kind, ErrorKind::UnsupportedVersion);
    assert!(err.message.contains("version 7"), "{err}");
    assert!(err.message.contains("versions 1 to 5"), "{err}");

    // Versions 1 (no aligned allocations), 2 (no allocation callers), 3 (no stack frames) and
    // 4 (hashed predictor slots) are read (the committed
    // `tests/data/hostile` traces are version 1 files), but the file header's version, which
    // no checksum covers, must be the header record's; 0 and the next version are not read.
    for v in [1u32, 2, 3, 4] {
        let (mut bytes, _) = sample();
        bytes[8..12].copy_from_slice(&v.to_le_bytes());
        let err = with_file(&bytes, |p| TraceFile::open(p).err().unwrap());
        assert_eq!(err.kind, ErrorKind::Inconsistent, "version {v}: {err}");
        let says = format!("the file header says format version {v}, the header record 5");
        assert!(err.message.contains(&says), "{err}");
    }
    for v in [0u32, 6] {
        let (mut bytes, _) = sample();
        bytes[8..12].copy_from_slice(&v.to_le_bytes());
        let err = with_file(&bytes, |p| TraceFile::open(p).err().unwrap());
        assert_eq!(err.kind, ErrorKind::UnsupportedVersion, "version {v}");
    }

    // The flags word, which no checksum covers either: no version defines a flag.
    for byte in 12..16 {
        let (mut bytes, _) = sample();
        bytes[byte] ^= 0x10;
        let err = with_file(&bytes, |p| TraceFile::open(p).err().unwrap());
        assert_eq!(
            (err.kind, err.offset),
            (ErrorKind::UnsupportedVersion, Some(12)),
            "byte {byte}: {err}"
        );
        assert!(err.message.contains("flags"), "{err}");
    }
}

/// A one-thread trace whose event 1 is an allocation with a requested alignment and event 2
/// its caller.
fn trace_with_aligned_alloc() -> Vec<u8> {
    let header = TraceHeader::new("test", "aligned", TimeUnit::Events);
    let w = TraceWriter::new(Vec::new(), &header).unwrap();
    let mut t = w.thread(0).unwrap();
    let access = Event::Access(Access {
        addr: 0x1000,
        size: 8,
        kind: AccessKind::Store,
        pc: None,
    });
    t.extend([
        access,
        Event::Alloc {
            addr: 0x2000,
            size: 256,
            site: None,
            align: Alignment::from_log2(6),
        },
        Event::AllocCaller {
            site: CodePos::new(0x4321).unwrap(),
        },
        Event::Free { addr: 0x2000 },
        Event::StackFrame {
            site: CodePos::new(0x5432).unwrap(),
            sp: 0x7ffd_0000_1000,
            cfa: 0x7ffd_0000_1080,
        },
        access,
    ])
    .unwrap();
    t.finish().unwrap();
    w.finish().unwrap()
}

#[test]
fn op_codes_newer_than_the_files_version_are_refused() {
    let bytes = trace_with_aligned_alloc();
    let (events, chunk) = with_file(&bytes, |p| {
        let f = TraceFile::open(p).unwrap();
        let c = f.chunks()[0];
        let at = (c.offset + FRAME_HEADER_BYTES) as usize;
        let Record::Chunk(chunk) = decode_record(&bytes[at..at + c.len as usize]).unwrap() else {
            panic!("not a chunk record");
        };
        let events = f.thread_events(0).unwrap();
        (events.collect::<Result<Vec<_>, _>>().unwrap(), chunk)
    });
    assert!(
        matches!(events[1], Event::Alloc { align: Some(a), .. } if a.bytes() == 64),
        "{events:?}"
    );
    assert!(
        matches!(events[2], Event::AllocCaller { site } if site.addr() == 0x4321),
        "{events:?}"
    );

    // The same chunk in a file of version 1: op code 56 + 2·6 + 0 = 68 (aligned allocations)
    // did not exist yet; in version 2, op code 120 (callers) did not.
    let mut out = Vec::new();
    let err = ChunkDecoder::for_version(1)
        .decode(&chunk, &mut out)
        .unwrap_err();
    assert_eq!(
        (err.kind, err.thread),
        (ErrorKind::Malformed, Some(0)),
        "{err}"
    );
    for part in [
        "event 1 of the chunk",
        "ops column",
        "op code 68",
        "format version 1",
    ] {
        assert!(err.message.contains(part), "{part:?} in {err}");
    }
    let err = ChunkDecoder::for_version(2)
        .decode(&chunk, &mut out)
        .unwrap_err();
    for part in [
        "event 2 of the chunk",
        "op code 120",
        "an allocation's caller",
        "format version 2",
    ] {
        assert!(err.message.contains(part), "{part:?} in {err}");
    }
    assert!(out.is_empty(), "{out:?}");
    // In version 3, op code 121 (stack frames) did not exist.
    let err = ChunkDecoder::for_version(3)
        .decode(&chunk, &mut out)
        .unwrap_err();
    for part in [
        "event 4 of the chunk",
        "op code 121",
        "a stack frame",
        "format version 3",
    ] {
        assert!(err.message.contains(part), "{part:?} in {err}");
    }
    assert!(out.is_empty(), "{out:?}");
    assert!(
        matches!(events[4], Event::StackFrame { site, sp: 0x7ffd_0000_1000, cfa: 0x7ffd_0000_1080 } if site.addr() == 0x5432),
        "{events:?}"
    );
    ChunkDecoder::for_version(5)
        .decode(&chunk, &mut out)
        .unwrap();
    assert_eq!(out, events);
}

/// Replaces the frame at `offset` with `payload` (CRC recomputed) so the damage passes the
/// checksum and reaches the decoder.
fn replace_frame(bytes: &[u8], offset: u64, payload: &[u8]) -> Vec<u8> {
    let off = offset as usize;
    let len = u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
    let mut out = bytes[..off].to_vec();
    write_frame(&mut out, payload).unwrap();
    out.extend_from_slice(&bytes[off + 8 + len..]);
    out
}

fn first_chunk_offset(bytes: &[u8]) -> u64 {
    with_file(bytes, |p| TraceFile::open(p).unwrap().chunks()[0].offset)
}

fn meta(thread: u32, event_count: u32) -> ChunkMeta {
    ChunkMeta {
        thread,
        sequence: 0,
        first_event: 0,
        start_time: 0,
        event_count,
        has_code_positions: false,
    }
}

#[test]
fn absurd_lengths_and_counts() {
    let (bytes, _) = sample();
    let at = first_chunk_offset(&bytes);

    // A frame length far beyond the limit.
    let mut bad = bytes.clone();
    bad[at as usize..at as usize + 4].copy_from_slice(&0xfff0_0000u32.to_le_bytes());
    let err = with_file(&bad, |p| TraceFile::open(p).err().unwrap());
    assert_eq!((err.kind, err.offset), (ErrorKind::LimitExceeded, Some(at)));

    // A chunk claiming a billion events.
    let payload = encode_chunk(&meta(0, 1 << 30), &[1 << 30, 0, 0, 0], &[0; 8]);
    let err = with_file(&replace_frame(&bytes, at, &payload), |p| {
        TraceFile::open(p).err().unwrap()
    });
    assert_eq!(err.kind, ErrorKind::LimitExceeded, "{err}");
    assert_eq!(
        (err.offset, err.chunk, err.thread),
        (Some(at), Some(0), Some(0))
    );

    // Column lengths far beyond what 8 compressed bytes can hold.
    let payload = encode_chunk(&meta(0, 10), &[10, 60 << 20, 0, 0], &[0; 8]);
    let err = with_file(&replace_frame(&bytes, at, &payload), |p| {
        TraceFile::open(p).err().unwrap()
    });
    assert_eq!(err.kind, ErrorKind::LimitExceeded, "{err}");
}

#[test]
fn garbage_chunk_data_is_malformed_with_location() {
    let (bytes, _) = sample();
    let at = first_chunk_offset(&bytes);
    // Same event count as the chunk it replaces, so the index stays consistent.
    let count = with_file(&bytes, |p| {
        TraceFile::open(p).unwrap().chunks()[0].meta.event_count
    });
    let payload = encode_chunk(&meta(0, count), &[count, 5, 0, 0], &[0xff; 12]);
    let bad = replace_frame(&bytes, at, &payload);
    with_file(&bad, |p| {
        // The index is fine (metadata is plausible); decoding the events is not.
        let report = verify_file(p).unwrap();
        assert_eq!(report.damage_kind, Some(ErrorKind::Malformed));
        assert_eq!(report.complete_chunks, 0);
        // Strict opening refuses the file: the trailer's chunk checksum no longer matches,
        // and the message says the replaced chunk cannot be named from it.
        let err = TraceFile::open(p).err().unwrap();
        assert_eq!(err.kind, ErrorKind::ChecksumMismatch);
        assert!(err.message.contains("some chunk was replaced"), "{err}");
        // Opening only reads metadata; decoding the forged chunk fails with its location.
        let f = TraceFile::open_with(
            p,
            OpenOptions {
                allow_incomplete: true,
            },
        )
        .unwrap();
        let err = f.thread_events(0).unwrap().find_map(Result::err).unwrap();
        assert_eq!(err.kind, ErrorKind::Malformed);
        assert_eq!(
            (err.offset, err.chunk, err.thread),
            (Some(at), Some(0), Some(0))
        );
    });
}

#[test]
fn sequence_gap_is_inconsistent() {
    let (bytes, _) = sample();
    let at = first_chunk_offset(&bytes);
    let mut m = meta(0, 10);
    m.sequence = 5;
    let payload = encode_chunk(&m, &[10, 0, 0, 0], &[0; 4]);
    let err = with_file(&replace_frame(&bytes, at, &payload), |p| {
        TraceFile::open(p).err().unwrap()
    });
    assert_eq!(err.kind, ErrorKind::Inconsistent, "{err}");
    assert!(err.message.contains("sequence 5"), "{err}");
    // The break shows at this chunk; the message says where the damage may really be.
    assert!(
        err.message
            .contains("chunks 0 to 4 of thread 0 are missing, or carry another thread id"),
        "{err}"
    );
}

#[test]
fn data_after_the_trailer_is_inconsistent() {
    let (bytes, _) = sample();
    let twice = [bytes.clone(), bytes.clone()].concat();
    let err = with_file(&twice, |p| TraceFile::open(p).err().unwrap());
    assert_eq!(
        (err.kind, err.offset),
        (ErrorKind::Inconsistent, Some(bytes.len() as u64))
    );
    assert!(err.message.contains("after the trailer"), "{err}");
    // The first trace is intact and usable on request.
    let events = with_file(&twice, |p| {
        TraceFile::open_with(
            p,
            OpenOptions {
                allow_incomplete: true,
            },
        )
        .unwrap()
        .event_count()
    });
    let single = with_file(&bytes, |p| TraceFile::open(p).unwrap().event_count());
    assert_eq!(events, single);
}

#[test]
fn a_trailer_end_time_its_events_contradict_is_inconsistent() {
    let (bytes, ends) = sample();
    let (trailer, true_end) = with_file(&bytes, |p| {
        let f = TraceFile::open(p).unwrap();
        (f.trailer().unwrap().clone(), f.threads()[&0].end_time)
    });
    assert_eq!(trailer.threads[0].end_time, true_end);
    let mut lying = trailer.clone();
    lying.threads[0].end_time = 1 << 59;
    // The trailer is the frame after the last chunk (a synthetic trace has no module records).
    let at = ends.last().unwrap().0;
    let bad = replace_frame(&bytes, at, &encode_trailer(&lying));
    let err = with_file(&bad, |p| TraceFile::open(p).err().expect("must not open"));
    assert_eq!(err.kind, ErrorKind::Inconsistent, "{err}");
    assert_eq!(err.thread, Some(0), "{err}");
    assert!(
        err.message.contains(&format!(
            "ends at time {}, its events end at {true_end}",
            1u64 << 59
        )),
        "{err}"
    );
    // Read on request, with the events' end time (not the trailer's) and the damage kept.
    let (end, damage) = with_file(&bad, |p| {
        let f = TraceFile::open_with(
            p,
            OpenOptions {
                allow_incomplete: true,
            },
        )
        .unwrap();
        (f.threads()[&0].end_time, f.damage().cloned())
    });
    assert_eq!(end, true_end);
    assert_eq!(damage.map(|d| d.kind), Some(ErrorKind::Inconsistent));
}

#[test]
fn a_chunk_starting_off_its_threads_clock_is_inconsistent_when_read() {
    let (bytes, _) = sample();
    let at = first_chunk_offset(&bytes);
    let off = at as usize;
    let len = u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()) as usize;
    let Record::Chunk(c) = decode_record(&bytes[off + 8..off + 8 + len]).unwrap() else {
        panic!("the first frame after the header is a chunk");
    };
    let mut m = c.meta;
    m.start_time = 0xffff_ffff;
    let bad = replace_frame(&bytes, at, &encode_chunk(&m, &c.column_lengths, &c.data));
    with_file(&bad, |p| {
        let report = verify_file(p).unwrap();
        assert_eq!(report.damage_kind, Some(ErrorKind::Inconsistent));
        // Reading checks the same chain of start times as verify does: the events are not
        // used as if nothing were wrong.
        let f = TraceFile::open_with(
            p,
            OpenOptions {
                allow_incomplete: true,
            },
        )
        .unwrap();
        let err = f.thread_events(0).unwrap().find_map(Result::err).unwrap();
        assert_eq!(err.kind, ErrorKind::Inconsistent, "{err}");
        assert!(
            err.message.contains("chunk starts at time 4294967295"),
            "{err}"
        );
        assert_eq!(
            (err.offset, err.chunk, err.thread),
            (Some(at), Some(0), Some(0))
        );
    });
}
