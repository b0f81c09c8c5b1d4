//! Column encoding of a chunk's events (part of trace format version 1).
//!
//! A chunk's events become four byte columns, which are then concatenated and LZ4-compressed:
//!
//! * `ops`: one byte per event: bits 0–4 the opcode ([`EventKind`] order), bits 5–7 `aux`.
//!   For accesses `aux` is the size class: 1..=5 mean 1, 2, 4, 8, 16 bytes, 0 means the size
//!   follows in `args`. For `Advance` and `Alloc`, `aux` bit 0 says whether the optional second
//!   value (FLOPs, allocation site) follows in `args`.
//! * `addrs`: for each access and each `Alloc`/`Free`, the zigzag varint difference to the
//!   previous address in this column (starting from 0).
//! * `pcs`: only in chunks whose flag says so; for each access, the zigzag varint difference to
//!   the previous code position in this column (starting from 0; position 0 means unknown).
//! * `args`: varint values of everything else, in event order.
//!
//! Varints are prefix varints: the number of trailing zero bits of the first byte plus one is
//! the length L in 1..=8 bytes, and the remaining 7·L bits (little-endian) are the value; a
//! first byte of 0 is followed by the value as 8 little-endian bytes. Unlike LEB128 this
//! decodes with one 8-byte load, a shift and a mask, whatever the length.
//!
//! Why this shape: program-order streams repeat small address and code-position deltas, which
//! become one byte each before LZ4 and close to nothing after it; and one decode loop over the
//! ops column produces events without per-event Cap'n Proto objects.

use crate::event::{Access, AccessKind, CodePos, Event, EventKind};

/// Number of columns in a chunk.
pub const COLUMN_COUNT: usize = 4;

/// Column names, in storage order (used in error messages).
pub const COLUMN_NAMES: [&str; COLUMN_COUNT] = ["ops", "addrs", "pcs", "args"];

const SIZE_OF_CLASS: [u32; 8] = [0, 1, 2, 4, 8, 16, 0, 0];

/// What went wrong while decoding columns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event {event} of the chunk: {column} column: {what}")]
pub struct ColumnError {
    /// Index of the event within the chunk.
    pub event: u32,
    /// Column that was being read.
    pub column: &'static str,
    /// What was wrong.
    pub what: &'static str,
}

/// Encodes events into the four columns. Reuse one encoder per thread: it keeps its buffers.
#[derive(Default, Debug)]
pub struct ColumnEncoder {
    /// Encoded columns, in storage order.
    pub columns: [Vec<u8>; COLUMN_COUNT],
    prev_addr: u64,
    prev_pc: u64,
    has_pcs: bool,
}

fn zigzag(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(v: u64) -> u64 {
    (v >> 1) ^ (v & 1).wrapping_neg()
}

/// Zero bytes a decode buffer must have after its columns (see [`decode_columns`]).
pub const DECODE_PADDING: usize = 16;

fn put_varint(out: &mut Vec<u8>, v: u64) {
    let bits = 64 - v.leading_zeros() as usize;
    let len = bits.div_ceil(7).max(1);
    if len <= 8 {
        let word = (v << len) | (1 << (len - 1));
        out.extend_from_slice(&word.to_le_bytes()[..len]);
    } else {
        out.push(0);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn size_class(size: u32) -> u8 {
    match size {
        1 => 1,
        2 => 2,
        4 => 3,
        8 => 4,
        16 => 5,
        _ => 0,
    }
}

impl ColumnEncoder {
    /// Clears the columns and starts a new chunk. `has_pcs` says whether accesses carry code
    /// positions in this chunk (if any access has one, pass true).
    pub fn start(&mut self, has_pcs: bool) {
        for c in &mut self.columns {
            c.clear();
        }
        self.prev_addr = 0;
        self.prev_pc = 0;
        self.has_pcs = has_pcs;
    }

    fn addr(&mut self, addr: u64) {
        put_varint(
            &mut self.columns[1],
            zigzag(addr.wrapping_sub(self.prev_addr)),
        );
        self.prev_addr = addr;
    }

    fn op(&mut self, kind: EventKind, aux: u8) {
        self.columns[0].push(kind.opcode() | (aux << 5));
    }

    fn arg(&mut self, v: u64) {
        put_varint(&mut self.columns[3], v);
    }

    /// Appends one event.
    pub fn push(&mut self, event: &Event) {
        match *event {
            Event::Access(a) => {
                let class = size_class(a.size);
                self.op(event.kind(), class);
                self.addr(a.addr);
                if class == 0 {
                    self.arg(a.size as u64);
                }
                if self.has_pcs {
                    let pc = a.pc.map_or(0, CodePos::addr);
                    put_varint(&mut self.columns[2], zigzag(pc.wrapping_sub(self.prev_pc)));
                    self.prev_pc = pc;
                }
            }
            Event::Advance { units, flops } => {
                self.op(EventKind::Advance, u8::from(flops != 0));
                self.arg(units);
                if flops != 0 {
                    self.arg(flops);
                }
            }
            Event::BarrierEnter {
                barrier,
                participants,
            } => {
                self.op(EventKind::BarrierEnter, 0);
                self.arg(barrier);
                self.arg(participants as u64);
            }
            Event::BarrierLeave { barrier } => {
                self.op(EventKind::BarrierLeave, 0);
                self.arg(barrier);
            }
            Event::LockAcquire { lock, order } => {
                self.op(EventKind::LockAcquire, 0);
                self.arg(lock);
                self.arg(order);
            }
            Event::LockRelease { lock } => {
                self.op(EventKind::LockRelease, 0);
                self.arg(lock);
            }
            Event::ThreadCreate { child } | Event::ThreadJoin { child } => {
                self.op(event.kind(), 0);
                self.arg(child as u64);
            }
            Event::ThreadStart | Event::ThreadExit => self.op(event.kind(), 0),
            Event::RegionBegin { region, team } => {
                self.op(EventKind::RegionBegin, 0);
                self.arg(region);
                self.arg(team as u64);
            }
            Event::RegionEnd { region } => {
                self.op(EventKind::RegionEnd, 0);
                self.arg(region);
            }
            Event::Alloc { addr, size, site } => {
                self.op(EventKind::Alloc, u8::from(site.is_some()));
                self.addr(addr);
                self.arg(size);
                if let Some(site) = site {
                    self.arg(site.addr());
                }
            }
            Event::Free { addr } => {
                self.op(EventKind::Free, 0);
                self.addr(addr);
            }
        }
    }
}

/// A read position in one column. `buf` runs from the column's start to the end of the padded
/// decode buffer, so an 8-byte load at any position inside the column stays in bounds; `end` is
/// the column's own length. Reads return `None` on bad data; the caller turns that into a
/// [`ColumnError`] off the hot path, so the decode loop only moves plain integers around.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    fn load(&self, at: usize) -> Option<u64> {
        let bytes: [u8; 8] = self.buf.get(at..at + 8)?.try_into().ok()?;
        Some(u64::from_le_bytes(bytes))
    }

    #[inline(always)]
    fn varint(&mut self) -> Option<u64> {
        let p = self.pos;
        let word = self.load(p)?;
        let first = word as u8;
        let (v, len) = if first != 0 {
            let len = first.trailing_zeros() as usize + 1;
            ((word >> len) & ((1u64 << (7 * len)) - 1), len)
        } else {
            (self.load(p + 1)?, 9)
        };
        // No check against `end` here: an overrun reads (bounds-checked) into the next
        // column or the padding and is caught by the exact-end check after the loop.
        self.pos = p + len;
        Some(v)
    }

    #[inline(always)]
    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.varint()?).ok()
    }

    /// Why the last read failed (called only after a `None`).
    #[cold]
    fn why(&self) -> &'static str {
        let first = self.buf.get(self.pos).copied().unwrap_or(0);
        let len = if first == 0 {
            9
        } else {
            first.trailing_zeros() as usize + 1
        };
        if self.pos + len > self.end {
            "ends in the middle of a value"
        } else {
            "value exceeds its field's range"
        }
    }

    fn finished(&self) -> bool {
        self.pos == self.end
    }

    fn overran(&self) -> bool {
        self.pos > self.end
    }
}

/// Which column failed and how, before the event index is attached.
#[derive(Clone, Copy)]
enum Fail {
    Read(usize),
    Op(&'static str),
    Arg(&'static str),
}

/// Decodes the columns of one chunk, appending its events to `out`.
///
/// `raw` holds the columns back to back, with `lengths` bytes each, followed by at least
/// [`DECODE_PADDING`] bytes. The ops column has one byte per event. Every column must be
/// consumed exactly; anything else is a [`ColumnError`] naming the event and column. On error
/// `out` may hold some of the chunk's events.
pub fn decode_columns(
    raw: &[u8],
    lengths: [u32; COLUMN_COUNT],
    has_pcs: bool,
    out: &mut Vec<Event>,
) -> Result<(), ColumnError> {
    let mut starts = [0usize; COLUMN_COUNT + 1];
    for c in 0..COLUMN_COUNT {
        starts[c + 1] = starts[c] + lengths[c] as usize;
    }
    if raw.len() < starts[COLUMN_COUNT] + DECODE_PADDING {
        return Err(ColumnError {
            event: 0,
            column: COLUMN_NAMES[0],
            what: "decode buffer is shorter than its columns plus padding",
        });
    }
    let ops = &raw[..starts[1]];
    let cursor = |c: usize| Cursor {
        buf: &raw[starts[c]..],
        pos: 0,
        end: lengths[c] as usize,
    };
    let mut cur = [cursor(1), cursor(2), cursor(3)];
    let mut i = 0usize;
    let fail = match decode_loop(ops, &mut cur, has_pcs, out, &mut i) {
        Ok(()) => match cur.iter().position(|c| !c.finished()) {
            None => return Ok(()),
            Some(c) => {
                let what = if cur[c].overran() {
                    "holds fewer values than the events need"
                } else {
                    "has bytes left after the last event"
                };
                return Err(ColumnError {
                    event: ops.len() as u32,
                    column: COLUMN_NAMES[c + 1],
                    what,
                });
            }
        },
        Err(f) => f,
    };
    let (column, what) = match fail {
        Fail::Read(c) => (COLUMN_NAMES[c + 1], cur[c].why()),
        Fail::Op(what) => (COLUMN_NAMES[0], what),
        Fail::Arg(what) => (COLUMN_NAMES[3], what),
    };
    Err(ColumnError {
        event: i as u32,
        column,
        what,
    })
}

const ADDRS: usize = 0;
const PCS: usize = 1;
const ARGS: usize = 2;

#[inline(always)]
fn read(cur: &mut [Cursor<'_>; 3], c: usize) -> Result<u64, Fail> {
    cur[c].varint().ok_or(Fail::Read(c))
}

#[inline(always)]
fn read_u32(cur: &mut [Cursor<'_>; 3], c: usize) -> Result<u32, Fail> {
    cur[c].u32().ok_or(Fail::Read(c))
}

fn decode_loop(
    ops: &[u8],
    cur: &mut [Cursor<'_>; 3],
    has_pcs: bool,
    out: &mut Vec<Event>,
    i: &mut usize,
) -> Result<(), Fail> {
    let mut addr: u64 = 0;
    let mut pc: u64 = 0;
    out.reserve(ops.len());
    for (n, &op) in ops.iter().enumerate() {
        *i = n;
        let code = op & 0x1f;
        let aux = op >> 5;
        if code < 5 {
            addr = addr.wrapping_add(unzigzag(read(cur, ADDRS)?));
            let mut size = SIZE_OF_CLASS[aux as usize];
            if size == 0 {
                if aux != 0 {
                    return Err(Fail::Op("unknown access size class"));
                }
                size = read_u32(cur, ARGS)?;
                if size == 0 {
                    return Err(Fail::Arg("access of size 0"));
                }
            }
            let pos = if has_pcs {
                pc = pc.wrapping_add(unzigzag(read(cur, PCS)?));
                CodePos::new(pc)
            } else {
                None
            };
            out.push(Event::Access(Access {
                kind: AccessKind::ALL[code as usize],
                size,
                addr,
                pc: pos,
            }));
            continue;
        }
        let Some(&kind) = EventKind::ALL.get(code as usize) else {
            return Err(Fail::Op("unknown opcode"));
        };
        if aux > 1 || (aux == 1 && !matches!(kind, EventKind::Advance | EventKind::Alloc)) {
            return Err(Fail::Op("unknown flag bits in opcode"));
        }
        let event = match kind {
            EventKind::Advance => {
                let units = read(cur, ARGS)?;
                let flops = if aux == 1 { read(cur, ARGS)? } else { 0 };
                Event::Advance { units, flops }
            }
            EventKind::BarrierEnter => Event::BarrierEnter {
                barrier: read(cur, ARGS)?,
                participants: read_u32(cur, ARGS)?,
            },
            EventKind::BarrierLeave => Event::BarrierLeave {
                barrier: read(cur, ARGS)?,
            },
            EventKind::LockAcquire => Event::LockAcquire {
                lock: read(cur, ARGS)?,
                order: read(cur, ARGS)?,
            },
            EventKind::LockRelease => Event::LockRelease {
                lock: read(cur, ARGS)?,
            },
            EventKind::ThreadCreate => Event::ThreadCreate {
                child: read_u32(cur, ARGS)?,
            },
            EventKind::ThreadStart => Event::ThreadStart,
            EventKind::ThreadExit => Event::ThreadExit,
            EventKind::ThreadJoin => Event::ThreadJoin {
                child: read_u32(cur, ARGS)?,
            },
            EventKind::RegionBegin => Event::RegionBegin {
                region: read(cur, ARGS)?,
                team: read_u32(cur, ARGS)?,
            },
            EventKind::RegionEnd => Event::RegionEnd {
                region: read(cur, ARGS)?,
            },
            EventKind::Alloc => {
                addr = addr.wrapping_add(unzigzag(read(cur, ADDRS)?));
                let size = read(cur, ARGS)?;
                let site = if aux == 1 {
                    Some(CodePos::new(read(cur, ARGS)?).ok_or(Fail::Arg("allocation site 0"))?)
                } else {
                    None
                };
                Event::Alloc { addr, size, site }
            }
            EventKind::Free => {
                addr = addr.wrapping_add(unzigzag(read(cur, ADDRS)?));
                Event::Free { addr }
            }
            EventKind::Load
            | EventKind::Store
            | EventKind::AtomicRmw
            | EventKind::Modify
            | EventKind::Fetch => unreachable!("access opcodes are handled above"),
        };
        out.push(event);
    }
    *i = ops.len();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_roundtrips_extremes() {
        for v in [0u64, 1, u64::MAX, i64::MAX as u64, i64::MIN as u64, 12345] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(8), 16);
        assert_eq!(zigzag((-8i64) as u64), 15);
    }

    /// Concatenates an encoder's columns with decode padding.
    fn padded(enc: &ColumnEncoder) -> (Vec<u8>, [u32; COLUMN_COUNT]) {
        let mut raw = Vec::new();
        let mut lengths = [0; COLUMN_COUNT];
        for (l, c) in lengths.iter_mut().zip(&enc.columns) {
            *l = c.len() as u32;
            raw.extend_from_slice(c);
        }
        raw.resize(raw.len() + DECODE_PADDING, 0);
        (raw, lengths)
    }

    #[test]
    fn varints_roundtrip_at_every_length() {
        let mut values = vec![0u64, 1, 127, 128, u64::MAX, u64::MAX >> 8, 1 << 56];
        values.extend((0..64).map(|b| 1u64 << b));
        values.extend((1..64).map(|b| (1u64 << b) - 1));
        let mut buf = Vec::new();
        for &v in &values {
            put_varint(&mut buf, v);
        }
        let end = buf.len();
        buf.resize(end + DECODE_PADDING, 0);
        let mut c = Cursor {
            buf: &buf,
            pos: 0,
            end,
        };
        for &v in &values {
            assert_eq!(c.varint(), Some(v));
        }
        assert!(c.finished());
    }

    #[test]
    fn varint_cut_short_is_an_error() {
        let mut buf = Vec::new();
        put_varint(&mut buf, u64::MAX);
        buf.resize(buf.len() + DECODE_PADDING, 0);
        let c = &mut Cursor {
            buf: &buf,
            pos: 0,
            end: 4,
        };
        c.varint();
        assert!(c.overran() && !c.finished());
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut enc = ColumnEncoder::default();
        enc.start(false);
        enc.push(&Event::load(64, 8));
        enc.columns[1].push(1);
        let (raw, lengths) = padded(&enc);
        let err = decode_columns(&raw, lengths, false, &mut Vec::new()).unwrap_err();
        assert_eq!(err.column, "addrs");
    }

    #[test]
    fn odd_sizes_and_missing_pcs_roundtrip() {
        let events = vec![
            Event::Access(Access {
                kind: AccessKind::Modify,
                size: 3,
                addr: 0x1001,
                pc: CodePos::new(0x400123),
            }),
            Event::load(0x1000, 16),
            Event::Alloc {
                addr: 0x7f00_0000_0000,
                size: 4096,
                site: CodePos::new(0x401000),
            },
            Event::Free {
                addr: 0x7f00_0000_0000,
            },
            Event::Advance { units: 7, flops: 2 },
        ];
        let mut enc = ColumnEncoder::default();
        enc.start(true);
        for e in &events {
            enc.push(e);
        }
        let (raw, lengths) = padded(&enc);
        let mut out = Vec::new();
        decode_columns(&raw, lengths, true, &mut out).unwrap();
        assert_eq!(out, events);
    }
}
