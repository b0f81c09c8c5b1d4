//! Column encoding of a chunk's events (part of trace format version 1).
//!
//! Each event becomes a *token*: an op byte plus the event's fields, with addresses and code
//! positions stored as differences to a prediction. Tokens are spread over four byte columns,
//! which are then concatenated and LZ4-compressed:
//!
//! * `ops`: one byte per event. Bits 0–6 are an op code (see [`op_code`]): accesses have codes
//!   `6·kind + size class` (classes 1..=5 mean 1, 2, 4, 8, 16 bytes, 0 means the size follows
//!   in `args`), every other kind `30 + 2·(kind − 5) + flag`, where the flag says whether the
//!   optional second value (FLOPs of `Advance`, site of `Alloc`) follows in `args`. Bit 7
//!   starts a *run* (below).
//! * `addrs`: for each access, the zigzag varint difference to the address of the previous
//!   access whose code position falls into the same slot of a 256-entry table (slot = hash of
//!   the code position; all slots start at 0 in each chunk); for each `Alloc`/`Free`, the
//!   difference to the previous `Alloc`/`Free` address.
//! * `pcs`: only in chunks whose flag says so; for each access, the zigzag varint difference to
//!   the previous access's code position (starting from 0; position 0 means unknown).
//! * `args`: varint values of everything else, in event order.
//!
//! A *run* is a loop: an event whose op byte has bit 7 set is preceded in `args` by two
//! varints P (1..=[`MAX_PERIOD`]) and N (≥ 1). That event and the next P − 1 are the loop body,
//! stored as usual (none of them may start a run itself); the N events after the body repeat
//! the body's tokens cyclically, so they take nothing from `addrs`, `pcs` or `args`, and their
//! op bytes must equal the body's (without bit 7). The repeated tokens are applied to the
//! predictors exactly like stored ones, so a loop over `a[i] = b[i]` is one run: both accesses
//! differ by +8 from the previous access of their own instruction in every iteration.
//!
//! Varints are prefix varints: the number of trailing zero bits of the first byte plus one is
//! the length L in 1..=8 bytes, and the remaining 7·L bits (little-endian) are the value; a
//! first byte of 0 is followed by the value as 8 little-endian bytes. Unlike LEB128 this
//! decodes with one 8-byte load, a shift and a mask, whatever the length.
//!
//! Why this shape: decoding must run at hundreds of millions of events per second. Program-
//! order streams are mostly loops; runs let the decoder produce their events from a few
//! tokens in registers instead of parsing (and LZ4-decompressing) every event, which is what
//! limited the throughput before. The per-instruction address prediction makes the tokens of
//! a loop body identical between iterations even when its accesses use different arrays and
//! strides. Everything else still costs one decode loop step per event, without per-event
//! Cap'n Proto objects.

use crate::event::{Access, AccessKind, CodePos, Event, EventKind};

/// Number of columns in a chunk.
pub const COLUMN_COUNT: usize = 4;

/// Column names, in storage order (used in error messages).
pub const COLUMN_NAMES: [&str; COLUMN_COUNT] = ["ops", "addrs", "pcs", "args"];

/// Longest loop body of a run, in events.
pub const MAX_PERIOD: usize = 64;

/// Shortest run the encoder emits (repeated events after the body). Shorter repetitions are
/// cheaper to decode event by event than to set up a run for.
const MIN_RUN: usize = 16;

/// Bit 7 of an op byte: this event starts a run.
const RUN_FLAG: u8 = 0x80;

const SIZE_OF_CLASS: [u32; 8] = [0, 1, 2, 4, 8, 16, 0, 0];

/// Number of address predictor slots (a power of two).
const SLOTS: usize = 256;

/// The predictor slot of code position `pc`: the top bits of a multiplicative hash, so that
/// nearby instructions (which differ in their low bits) get different slots.
#[inline(always)]
fn slot(pc: u64) -> usize {
    (pc.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize
}

/// What an op code means.
#[derive(Clone, Copy, Debug)]
struct OpInfo {
    kind: EventKind,
    /// Access: size class; others: whether the optional second value is present.
    aux: u8,
    /// Access size in bytes, or 0 when it is stored in `args`.
    size: u32,
    valid: bool,
}

/// The op code of `kind` with `aux` (see the module documentation).
fn op_code(kind: EventKind, aux: u8) -> u8 {
    let k = kind.opcode();
    if k < 5 {
        k * 6 + aux
    } else {
        30 + (k - 5) * 2 + aux
    }
}

/// Decode table of op codes (bit 7 masked off); invalid codes have `valid: false`.
const OPS: [OpInfo; 128] = {
    let mut t = [OpInfo {
        kind: EventKind::Load,
        aux: 0,
        size: 0,
        valid: false,
    }; 128];
    let mut k = 0;
    while k < EventKind::COUNT {
        let kind = EventKind::ALL[k];
        if k < 5 {
            let mut class = 0;
            while class < 6 {
                t[k * 6 + class] = OpInfo {
                    kind,
                    aux: class as u8,
                    size: SIZE_OF_CLASS[class],
                    valid: true,
                };
                class += 1;
            }
        } else {
            let code = 30 + (k - 5) * 2;
            t[code] = OpInfo {
                kind,
                aux: 0,
                size: 0,
                valid: true,
            };
            if matches!(kind, EventKind::Advance | EventKind::Alloc) {
                t[code + 1] = OpInfo {
                    kind,
                    aux: 1,
                    size: 0,
                    valid: true,
                };
            }
        }
        k += 1;
    }
    t
};

/// One event as stored: its op code and its field values relative to the predictors.
/// Unused fields are 0, so equal tokens mean equal stored bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Token {
    /// Op code without the run flag.
    code: u8,
    /// Address difference to the prediction (accesses, `Alloc`, `Free`).
    addr: u64,
    /// Code position difference (accesses).
    pc: u64,
    /// First other value (the access size for accesses, whether stored or implied).
    a: u64,
    /// Second other value.
    b: u64,
}

impl Token {
    fn hash(&self) -> u64 {
        (self.code as u64
            ^ self.addr.rotate_left(13)
            ^ self.pc.rotate_left(29)
            ^ self.a.rotate_left(43)
            ^ self.b)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// Predictor state, identical in encoder and decoder.
#[derive(Clone, Debug)]
struct State {
    /// Code position of the previous access.
    pc: u64,
    /// Address of the previous `Alloc`/`Free`.
    heap: u64,
    /// Address of the previous access per code position slot.
    addrs: [u64; SLOTS],
}

impl Default for State {
    fn default() -> Self {
        State {
            pc: 0,
            heap: 0,
            addrs: [0; SLOTS],
        }
    }
}

impl State {
    /// The event of token `t` (whose code has `info`); advances the predictors.
    #[inline(always)]
    fn apply(&mut self, info: OpInfo, t: &Token) -> Event {
        if (info.kind as u8) < 5 {
            self.pc = self.pc.wrapping_add(t.pc);
            let prev = &mut self.addrs[slot(self.pc)];
            let addr = prev.wrapping_add(t.addr);
            *prev = addr;
            return Event::Access(Access {
                kind: AccessKind::ALL[info.kind as usize],
                size: t.a as u32,
                addr,
                pc: CodePos::new(self.pc),
            });
        }
        match info.kind {
            EventKind::Advance => Event::Advance {
                units: t.a,
                flops: t.b,
            },
            EventKind::BarrierEnter => Event::BarrierEnter {
                barrier: t.a,
                participants: t.b as u32,
            },
            EventKind::BarrierLeave => Event::BarrierLeave { barrier: t.a },
            EventKind::LockAcquire => Event::LockAcquire {
                lock: t.a,
                order: t.b,
            },
            EventKind::LockRelease => Event::LockRelease { lock: t.a },
            EventKind::ThreadCreate => Event::ThreadCreate { child: t.a as u32 },
            EventKind::ThreadStart => Event::ThreadStart,
            EventKind::ThreadExit => Event::ThreadExit,
            EventKind::ThreadJoin => Event::ThreadJoin { child: t.a as u32 },
            EventKind::RegionBegin => Event::RegionBegin {
                region: t.a,
                team: t.b as u32,
            },
            EventKind::RegionEnd => Event::RegionEnd { region: t.a },
            EventKind::Alloc => {
                self.heap = self.heap.wrapping_add(t.addr);
                Event::Alloc {
                    addr: self.heap,
                    size: t.a,
                    site: CodePos::new(t.b),
                }
            }
            EventKind::Free => {
                self.heap = self.heap.wrapping_add(t.addr);
                Event::Free { addr: self.heap }
            }
            // Accesses returned above.
            _ => Event::ThreadStart,
        }
    }

    /// The token of `event`; advances the predictors (the inverse of [`State::apply`]).
    /// Without code positions in the chunk, accesses are stored with position 0.
    fn token(&mut self, event: &Event, has_pcs: bool) -> Token {
        let kind = event.kind();
        let mut t = Token::default();
        let aux = match *event {
            Event::Access(a) => {
                let pc = if has_pcs {
                    a.pc.map_or(0, CodePos::addr)
                } else {
                    0
                };
                t.pc = pc.wrapping_sub(self.pc);
                self.pc = pc;
                let prev = &mut self.addrs[slot(pc)];
                t.addr = a.addr.wrapping_sub(*prev);
                *prev = a.addr;
                t.a = a.size as u64;
                size_class(a.size)
            }
            Event::Advance { units, flops } => {
                (t.a, t.b) = (units, flops);
                u8::from(flops != 0)
            }
            Event::BarrierEnter {
                barrier,
                participants,
            } => {
                (t.a, t.b) = (barrier, participants as u64);
                0
            }
            Event::LockAcquire { lock, order } => {
                (t.a, t.b) = (lock, order);
                0
            }
            Event::RegionBegin { region, team } => {
                (t.a, t.b) = (region, team as u64);
                0
            }
            Event::BarrierLeave { barrier: v }
            | Event::LockRelease { lock: v }
            | Event::RegionEnd { region: v } => {
                t.a = v;
                0
            }
            Event::ThreadCreate { child } | Event::ThreadJoin { child } => {
                t.a = child as u64;
                0
            }
            Event::ThreadStart | Event::ThreadExit => 0,
            Event::Alloc { addr, size, site } => {
                t.addr = addr.wrapping_sub(self.heap);
                self.heap = addr;
                t.a = size;
                t.b = site.map_or(0, CodePos::addr);
                u8::from(site.is_some())
            }
            Event::Free { addr } => {
                t.addr = addr.wrapping_sub(self.heap);
                self.heap = addr;
                0
            }
        };
        t.code = op_code(kind, aux);
        t
    }
}

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
///
/// Call [`start`](Self::start), [`push`](Self::push) each event, then
/// [`finish`](Self::finish); the columns are complete after `finish`.
#[derive(Default, Debug)]
pub struct ColumnEncoder {
    /// Encoded columns, in storage order.
    pub columns: [Vec<u8>; COLUMN_COUNT],
    tokens: Vec<Token>,
    state: State,
    has_pcs: bool,
    /// Run finding: the latest token index + 1 per token hash bucket (0 = none).
    seen: Vec<u32>,
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

/// Bits of the run finder's hash table (4096 buckets).
const SEEN_BITS: u32 = 12;

impl ColumnEncoder {
    /// Clears the columns and starts a new chunk. `has_pcs` says whether accesses carry code
    /// positions in this chunk (if any access has one, pass true).
    pub fn start(&mut self, has_pcs: bool) {
        for c in &mut self.columns {
            c.clear();
        }
        self.tokens.clear();
        self.state = State::default();
        self.has_pcs = has_pcs;
    }

    /// Appends one event.
    pub fn push(&mut self, event: &Event) {
        let t = self.state.token(event, self.has_pcs);
        self.tokens.push(t);
    }

    /// Writes the pushed events into the columns, finding runs.
    ///
    /// Runs are found greedily: at each event, the previous event with an equal token (found
    /// through a hash table) proposes a period P; if the P tokens from here on repeat at least
    /// [`MIN_RUN`] more events, they become a run, else the event is stored alone.
    pub fn finish(&mut self) {
        self.seen.clear();
        self.seen.resize(1 << SEEN_BITS, 0);
        let tokens = std::mem::take(&mut self.tokens);
        let n = tokens.len();
        let mut i = 0;
        while i < n {
            let bucket = (tokens[i].hash() >> (64 - SEEN_BITS)) as usize;
            let prev = std::mem::replace(&mut self.seen[bucket], i as u32 + 1) as usize;
            if prev != 0 && i + 1 - prev <= MAX_PERIOD && tokens[prev - 1] == tokens[i] {
                let p = i + 1 - prev;
                let repeats = (i + p..n)
                    .take_while(|&j| tokens[j] == tokens[j - p])
                    .count();
                if repeats >= MIN_RUN.max(p) {
                    put_varint(&mut self.columns[3], p as u64);
                    put_varint(&mut self.columns[3], repeats as u64);
                    for (k, t) in tokens[i..i + p].iter().enumerate() {
                        self.put_token(t, k == 0);
                    }
                    let ops = &mut self.columns[0];
                    let body = ops.len() - p;
                    ops[body] &= !RUN_FLAG;
                    for j in 0..repeats {
                        let op = ops[body + j];
                        ops.push(op);
                    }
                    ops[body] |= RUN_FLAG;
                    i += p + repeats;
                    continue;
                }
            }
            self.put_token(&tokens[i], false);
            i += 1;
        }
        self.tokens = tokens;
    }

    /// Stores one token (the inverse of `read_token`).
    fn put_token(&mut self, t: &Token, starts_run: bool) {
        let info = OPS[t.code as usize];
        self.columns[0].push(t.code | if starts_run { RUN_FLAG } else { 0 });
        let [_, addrs, pcs, args] = &mut self.columns;
        match info.kind {
            EventKind::Load
            | EventKind::Store
            | EventKind::AtomicRmw
            | EventKind::Modify
            | EventKind::Fetch => {
                put_varint(addrs, zigzag(t.addr));
                if info.size == 0 {
                    put_varint(args, t.a);
                }
                if self.has_pcs {
                    put_varint(pcs, zigzag(t.pc));
                }
            }
            EventKind::Advance => {
                put_varint(args, t.a);
                if info.aux == 1 {
                    put_varint(args, t.b);
                }
            }
            EventKind::BarrierEnter | EventKind::LockAcquire | EventKind::RegionBegin => {
                put_varint(args, t.a);
                put_varint(args, t.b);
            }
            EventKind::BarrierLeave
            | EventKind::LockRelease
            | EventKind::RegionEnd
            | EventKind::ThreadCreate
            | EventKind::ThreadJoin => put_varint(args, t.a),
            EventKind::ThreadStart | EventKind::ThreadExit => {}
            EventKind::Alloc => {
                put_varint(addrs, zigzag(t.addr));
                put_varint(args, t.a);
                if info.aux == 1 {
                    put_varint(args, t.b);
                }
            }
            EventKind::Free => put_varint(addrs, zigzag(t.addr)),
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
    let (i, fail) = match decode_loop(ops, &mut cur, has_pcs, out) {
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
fn read_u32(cur: &mut [Cursor<'_>; 3], c: usize) -> Result<u64, Fail> {
    let v = read(cur, c)?;
    if v > u32::MAX as u64 {
        return Err(Fail::Read(c));
    }
    Ok(v)
}

/// Reads the stored fields of an event with op code `info` (the inverse of `put_token`),
/// checking every value fits its field so that [`State::apply`] cannot fail.
#[inline(always)]
fn read_token(
    code: u8,
    info: OpInfo,
    cur: &mut [Cursor<'_>; 3],
    has_pcs: bool,
) -> Result<Token, Fail> {
    let mut t = Token {
        code,
        ..Token::default()
    };
    if (info.kind as u8) < 5 {
        t.addr = unzigzag(read(cur, ADDRS)?);
        t.a = info.size as u64;
        if info.size == 0 {
            t.a = read_u32(cur, ARGS)?;
            if t.a == 0 {
                return Err(Fail::Arg("access of size 0"));
            }
            if t.a > crate::limits::MAX_ACCESS_BYTES as u64 {
                return Err(Fail::Arg("access larger than the reader's limit (16 MiB)"));
            }
        }
        if has_pcs {
            t.pc = unzigzag(read(cur, PCS)?);
        }
        return Ok(t);
    }
    match info.kind {
        EventKind::Advance => {
            t.a = read(cur, ARGS)?;
            if info.aux == 1 {
                t.b = read(cur, ARGS)?;
            }
        }
        EventKind::LockAcquire => {
            t.a = read(cur, ARGS)?;
            t.b = read(cur, ARGS)?;
        }
        EventKind::BarrierEnter | EventKind::RegionBegin => {
            t.a = read(cur, ARGS)?;
            t.b = read_u32(cur, ARGS)?;
        }
        EventKind::BarrierLeave | EventKind::LockRelease | EventKind::RegionEnd => {
            t.a = read(cur, ARGS)?;
        }
        EventKind::ThreadCreate | EventKind::ThreadJoin => t.a = read_u32(cur, ARGS)?,
        EventKind::Alloc => {
            t.addr = unzigzag(read(cur, ADDRS)?);
            t.a = read(cur, ARGS)?;
            if info.aux == 1 {
                t.b = read(cur, ARGS)?;
                if t.b == 0 {
                    return Err(Fail::Arg("allocation site 0"));
                }
            }
        }
        EventKind::Free => t.addr = unzigzag(read(cur, ADDRS)?),
        _ => {}
    }
    Ok(t)
}

/// Decodes all events; on error returns the failing event's index.
fn decode_loop(
    ops: &[u8],
    cur: &mut [Cursor<'_>; 3],
    has_pcs: bool,
    out: &mut Vec<Event>,
) -> Result<(), (usize, Fail)> {
    let mut st = State::default();
    out.reserve(ops.len());
    let mut n = 0;
    while let Some(&op) = ops.get(n) {
        if op & RUN_FLAG != 0 {
            n = decode_run(ops, n, cur, has_pcs, &mut st, out)?;
            continue;
        }
        let info = OPS[op as usize];
        if !info.valid {
            return Err((n, Fail::Op("unknown opcode")));
        }
        let t = read_token(op, info, cur, has_pcs).map_err(|f| (n, f))?;
        out.push(st.apply(info, &t));
        n += 1;
    }
    Ok(())
}

/// Decodes the run starting at event `start` (see the module documentation); returns the
/// index of the event after it.
#[inline(never)]
fn decode_run(
    ops: &[u8],
    start: usize,
    cur: &mut [Cursor<'_>; 3],
    has_pcs: bool,
    st: &mut State,
    out: &mut Vec<Event>,
) -> Result<usize, (usize, Fail)> {
    let at = |f| (start, f);
    let period = read(cur, ARGS).map_err(at)?;
    let repeats = read(cur, ARGS).map_err(at)?;
    let left = (ops.len() - start) as u64;
    if period == 0 || period > MAX_PERIOD as u64 || period >= left {
        return Err(at(Fail::Arg("run period out of range")));
    }
    if repeats == 0 || repeats > left - period {
        return Err(at(Fail::Arg("run length out of range")));
    }
    let (p, r) = (period as usize, repeats as usize);

    // The body: stored tokens, decoded as usual but kept for the repeats, with the code
    // position after each body event (the fast path below needs it to end in the right
    // state when the repeats stop in the middle of a period).
    let mut body = [(OPS[0], Token::default()); MAX_PERIOD];
    let mut pc_after = [0u64; MAX_PERIOD];
    for (k, slot) in body[..p].iter_mut().enumerate() {
        let op = ops[start + k] & !(if k == 0 { RUN_FLAG } else { 0 });
        let fail = |f| (start + k, f);
        if op & RUN_FLAG != 0 {
            return Err(fail(Fail::Op("run starts inside a run body")));
        }
        let info = OPS[op as usize];
        if !info.valid {
            return Err(fail(Fail::Op("unknown opcode")));
        }
        let t = read_token(op, info, cur, has_pcs).map_err(fail)?;
        out.push(st.apply(info, &t));
        pc_after[k] = st.pc;
        *slot = (info, t);
    }

    // The repeats' op bytes must be the body's: the first P against the body, the rest
    // against the P before them (one slice comparison).
    let rep = start + p;
    let first = r.min(p);
    let mismatch = (0..first)
        .find(|&k| ops[rep + k] != body[k].1.code)
        .or_else(|| {
            (r > p && ops[rep + p..rep + r] != ops[rep..rep + r - p]).then(|| {
                (p..r)
                    .find(|&k| ops[rep + k] != ops[rep + k - p])
                    .unwrap_or(p)
            })
        });
    if let Some(k) = mismatch {
        return Err((rep + k, Fail::Op("op differs from the run's body")));
    }

    // The repeats. Usually the body's code positions add up to no change (the loop's
    // instructions recur), so each body position always has the same code position and
    // predictor slot: then its events are a fixed template whose address advances through
    // that slot, and the loop only adds and copies. `extend` over a counted iterator writes
    // the events without a capacity check per event.
    let body = &body[..p];
    let pc_sum = body.iter().fold(0u64, |s, (_, t)| s.wrapping_add(t.pc));
    let has_heap = body
        .iter()
        .any(|(i, _)| matches!(i.kind, EventKind::Alloc | EventKind::Free));
    if pc_sum == 0 && !has_heap {
        // Templates with the body's last events (their addresses are replaced).
        let events = &out[out.len() - p..];
        let mut tmpl = [(Event::ThreadStart, 0usize, 0u64); MAX_PERIOD];
        for (k, ((_, t), e)) in body.iter().zip(events).enumerate() {
            let slot = match e {
                Event::Access(a) => slot(a.pc.map_or(0, CodePos::addr)),
                _ => 0,
            };
            tmpl[k] = (*e, slot, t.addr);
        }
        let tmpl = &tmpl[..p];
        let addrs = &mut st.addrs;
        // `move`: the position counter lives in a register, not behind a reference.
        let mut k = 0;
        out.extend((0..r).map(move |_| {
            let (e, slot, delta) = &tmpl[k];
            k += 1;
            if k == p {
                k = 0;
            }
            match *e {
                Event::Access(a) => {
                    let prev = &mut addrs[*slot & (SLOTS - 1)];
                    let addr = prev.wrapping_add(*delta);
                    *prev = addr;
                    Event::Access(Access { addr, ..a })
                }
                other => other,
            }
        }));
        // With pc_sum == 0 the code position after body position k is the same in every
        // repetition: the repeats end after position (r − 1) mod p.
        st.pc = pc_after[(r - 1) % p];
        return Ok(rep + r);
    }
    let mut k = 0;
    out.extend((0..r).map(|_| {
        let (info, t) = &body[k];
        k += 1;
        if k == p {
            k = 0;
        }
        st.apply(*info, t)
    }));
    Ok(rep + r)
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
        enc.finish();
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
        enc.finish();
        let (raw, lengths) = padded(&enc);
        let mut out = Vec::new();
        decode_columns(&raw, lengths, true, &mut out).unwrap();
        assert_eq!(out, events);
    }

    fn roundtrip(events: &[Event], has_pcs: bool) -> ColumnEncoder {
        let mut enc = ColumnEncoder::default();
        enc.start(has_pcs);
        for e in events {
            enc.push(e);
        }
        enc.finish();
        let (raw, lengths) = padded(&enc);
        let mut out = Vec::new();
        decode_columns(&raw, lengths, has_pcs, &mut out).unwrap();
        let diff = out.iter().zip(events).position(|(a, b)| a != b);
        assert!(
            diff.is_none() && out.len() == events.len(),
            "differ at {diff:?}"
        );
        enc
    }

    /// `events` as a chunk without code positions stores them.
    fn without_pcs(events: Vec<Event>) -> Vec<Event> {
        events
            .into_iter()
            .map(|e| match e {
                Event::Access(a) => Event::Access(Access { pc: None, ..a }),
                e => e,
            })
            .collect()
    }

    fn access(kind: AccessKind, addr: u64, size: u32, pc: u64) -> Event {
        Event::Access(Access {
            kind,
            size,
            addr,
            pc: CodePos::new(pc),
        })
    }

    /// Loops of several shapes, with a partial last iteration and events between them.
    fn loops() -> Vec<Event> {
        let mut v = vec![Event::ThreadStart];
        for i in 0..1000u64 {
            v.push(access(AccessKind::Load, 0x1000 + 8 * i, 8, 0x400));
            v.push(access(AccessKind::Store, 0x9000 + 24 * i, 3, 0x404));
            v.push(Event::Advance { units: 3, flops: 1 });
        }
        v.push(Event::BarrierEnter {
            barrier: 5,
            participants: 2,
        });
        // Two accesses sharing a code position (and so a predictor slot).
        for i in 0..100u64 {
            v.push(access(AccessKind::Load, 0x5000 + 16 * i, 8, 0x500));
            v.push(access(AccessKind::Load, 0x5008 + 16 * i, 8, 0x500));
        }
        // Code positions that drift (no run: each access has a fresh predictor slot), and
        // heap events in a body (a run decoded without templates).
        for i in 0..100u64 {
            v.push(access(AccessKind::Fetch, 0x7000 + 4 * i, 4, 0x7000 + 4 * i));
        }
        for i in 0..50u64 {
            v.push(Event::Alloc {
                addr: 0x10_0000 + 64 * i,
                size: 64,
                site: CodePos::new(0x600),
            });
            v.push(Event::Free {
                addr: 0x10_0000 + 64 * i,
            });
        }
        // Period 1 and a period of MAX_PERIOD.
        v.extend((0..40).map(|_| Event::Advance { units: 1, flops: 0 }));
        for _ in 0..3 {
            for j in 0..MAX_PERIOD as u64 {
                v.push(Event::Advance { units: j, flops: 0 });
            }
        }
        v.push(Event::ThreadExit);
        v
    }

    #[test]
    fn loops_become_runs_and_roundtrip() {
        for has_pcs in [true, false] {
            let events = if has_pcs {
                loops()
            } else {
                without_pcs(loops())
            };
            let enc = roundtrip(&events, has_pcs);
            let runs = enc.columns[0]
                .iter()
                .filter(|&&b| b & RUN_FLAG != 0)
                .count();
            assert!(runs >= 5, "{runs} runs");
            // With code positions runs leave almost nothing in the value columns. (Without
            // them all accesses share one predictor slot, and the first loop's two strides
            // make its address differences aperiodic.)
            if !has_pcs {
                continue;
            }
            let lens: Vec<usize> = enc.columns.iter().map(Vec::len).collect();
            assert!(
                lens[1] + lens[3] < events.len() / 4,
                "{lens:?} for {} events",
                events.len()
            );
        }
        // Partial last iterations at every offset.
        let events = loops();
        for cut in (2990..3003).chain([events.len() - 1]) {
            roundtrip(&events[..cut], true);
        }
    }

    #[test]
    fn damaged_columns_are_errors_not_panics() {
        let mut enc = ColumnEncoder::default();
        enc.start(true);
        let events = loops();
        for e in &events[2900..] {
            enc.push(e);
        }
        enc.finish();
        let (raw, lengths) = padded(&enc);
        let total: usize = lengths.iter().map(|&l| l as usize).sum();
        let mut out = Vec::new();
        for i in 0..total {
            for flip in [1u8, 2, 4, 0x40, 0x80, 0xff] {
                let mut bad = raw.clone();
                bad[i] ^= flip;
                out.clear();
                let _ = decode_columns(&bad, lengths, true, &mut out);
                assert!(out.len() <= lengths[0] as usize);
            }
        }
        // A run longer than the chunk, and a run starting inside a run body.
        let mut bad = raw.clone();
        let first = bad.iter().position(|&b| b & RUN_FLAG != 0).unwrap();
        let mut short = lengths;
        short[0] = first as u32 + 3;
        bad.copy_within(lengths[0] as usize.., first + 3);
        let err = decode_columns(&bad, short, true, &mut Vec::new()).unwrap_err();
        assert_eq!(err.event, first as u32);
        let mut bad = raw.clone();
        bad[first + 1] |= RUN_FLAG;
        let err = decode_columns(&bad, lengths, true, &mut Vec::new()).unwrap_err();
        assert_eq!(err.event, first as u32 + 1);
        let mut bad = raw.clone();
        bad[first + 40] ^= 1;
        let err = decode_columns(&bad, lengths, true, &mut Vec::new()).unwrap_err();
        assert_eq!(
            (err.event, err.what),
            (first as u32 + 40, "op differs from the run's body")
        );
    }
}
