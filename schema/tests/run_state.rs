//! Regression: a run whose repeats end mid-period must leave the decoder in the state the
//! next event expects (found in review: the code position was left at the body's end).

use cachescope_schema::{
    Access, AccessKind, CodePos, Event, TimeUnit, TraceFile, TraceHeader, TraceWriter,
};

fn roundtrip(events: &[Event]) -> Vec<Event> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.cstrace");
    let w = TraceWriter::create(&path, &TraceHeader::new("t", "p", TimeUnit::Events)).unwrap();
    let mut tw = w.thread(0).unwrap();
    tw.extend(events.iter().copied()).unwrap();
    tw.finish().unwrap();
    w.finish().unwrap();
    let f = TraceFile::open(&path).unwrap();
    f.thread_events(0).unwrap().map(Result::unwrap).collect()
}
fn ld(addr: u64, pc: u64) -> Event {
    Event::Access(Access {
        kind: AccessKind::Load,
        size: 8,
        addr,
        pc: CodePos::new(pc),
    })
}

#[test]
fn run_ending_mid_period_with_pcs() {
    for n in [40usize, 41, 43] {
        let mut ev = Vec::new();
        for i in 0..n {
            let (pc, base) = if i % 2 == 0 {
                (0x400100u64, 0x10000u64)
            } else {
                (0x400200, 0x20000)
            };
            ev.push(ld(base + 8 * (i as u64 / 2), pc));
        }
        ev.push(ld(0x30000, 0x400300));
        ev.push(ld(0x30008, 0x400300));
        let back = roundtrip(&ev);
        assert_eq!(back.len(), ev.len());
        for (k, (a, b)) in ev.iter().zip(&back).enumerate() {
            assert_eq!(a, b, "n={n} event {k}");
        }
    }
}
