//! Column encoding of a chunk's events (part of trace format version 5; versions 1 to 3 are
//! version 4 without the op codes added later — aligned allocations in 2, allocation callers
//! in 3, stack frames in 4 — and an older chunk that uses a later code is refused, see
//! [`first_op_newer_than`]; versions 1 to 4 choose the address predictor's slot by a hash of
//! the code position, version 5 by its low bits, see [`hashed_slot`]).
//!
//! Each event becomes a *token*: an op byte plus the event's fields, with addresses and code
//! positions stored as differences to a prediction. Tokens are spread over four byte columns,
//! which are then concatenated and LZ4-compressed:
//!
//! * `ops`: one byte per event. Bits 0–6 are an op code (see `op_code`): accesses have codes
//!   `6·kind + size class` (classes 1..=5 mean 1, 2, 4, 8, 16 bytes, 0 means the size follows
//!   in `args`), the kinds from `Advance` to `Free` `30 + 2·(kind − 5) + flag`, where the flag
//!   says whether the optional second value (FLOPs of `Advance`, site of `Alloc`) follows in
//!   `args`. An `Alloc` with a requested alignment of 2^k bytes (k in 0..=31) has code
//!   `56 + 2·k + flag` instead (codes 56..=119, version 2; the alignment is in the op code, so
//!   it costs no byte). `AllocCaller` has code 120 (version 3; its site follows in `args`),
//!   `StackFrame` code 121 (version 4; its site, stack pointer and frame size `cfa − sp`
//!   follow in `args`).
//!   Bit 7 starts a *run* (below).
//! * `addrs`: for each access, the zigzag varint difference to the address of the previous
//!   access whose code position falls into the same slot of a 1024-entry table (slot = the
//!   code position's low 10 bits; versions 1 to 4: a hash of it into 256 slots; all slots
//!   start at 0 in each chunk); for each `Alloc`/`Free`, the
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

use crate::event::{Access, AccessKind, Alignment, CodePos, Event, EventKind};

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
const SLOTS: usize = 1024;

/// The predictor slot of code position `pc` (format version 5): its low 10 bits. A program's
/// modules load at page boundaries, so the slots of its instructions are the same in every
/// run, and instructions less than 1 KiB apart — a loop body's — never share one.
#[inline(always)]
fn slot(pc: u64) -> usize {
    pc as usize & (SLOTS - 1)
}

/// Slots of format versions 1 to 4.
const HASHED_SLOTS: usize = 256;

/// The predictor slot of `pc` in format versions 1 to 4: the top 8 bits of a multiplicative
/// hash of the whole code position. The load address is in it, so two instructions of a loop
/// shared a slot in some runs and not in others (with ten access instructions, about one run
/// in six): their addresses were then mispredicted in every iteration, no loop became a run,
/// and the recording took five times as long and its file a hundred times the space.
#[inline(always)]
fn hashed_slot(pc: u64) -> usize {
    (pc.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - HASHED_SLOTS.trailing_zeros())) as usize
}

/// What an op code means.
#[derive(Clone, Copy, Debug)]
struct OpInfo {
    kind: EventKind,
    /// Access: size class; others: bit 0 says whether the optional second value is present;
    /// `Alloc`: bits 1.. are 0 without a requested alignment, else its exponent + 1.
    aux: u8,
    /// Access size in bytes, or 0 when it is stored in `args`.
    size: u32,
    valid: bool,
}

/// First op code of an `Alloc` with a requested alignment (see the module documentation).
const ALIGNED_ALLOC_CODE: u8 = 56;

/// Op code of `AllocCaller` (format version 3).
const ALLOC_CALLER_CODE: u8 = 120;

/// Op code of `StackFrame` (format version 4).
const STACK_FRAME_CODE: u8 = 121;

/// The first op code a file of format `version` cannot hold: version 1 ends before the
/// aligned allocations, version 2 before `AllocCaller`, version 3 before `StackFrame`.
fn first_code_after(version: u32) -> u8 {
    match version {
        0 | 1 => ALIGNED_ALLOC_CODE,
        2 => ALLOC_CALLER_CODE,
        3 => STACK_FRAME_CODE,
        _ => 128,
    }
}

/// The index of the first event in a chunk's `ops` column whose op code a file of format
/// `version` cannot hold, with that code and what it means. Only chunks of older versions
/// need the check; the decoder itself knows just the newest op codes.
pub fn first_op_newer_than(ops: &[u8], version: u32) -> Option<(usize, u8, &'static str)> {
    let first = first_code_after(version);
    if first >= 128 {
        return None;
    }
    let (i, code) = ops
        .iter()
        .map(|&b| b & !RUN_FLAG)
        .enumerate()
        .find(|&(_, code)| code >= first && OPS[code as usize].valid)?;
    let what = match OPS[code as usize].kind {
        EventKind::AllocCaller => "an allocation's caller",
        EventKind::StackFrame => "a stack frame",
        _ => "an aligned allocation",
    };
    Some((i, code, what))
}

/// The op code of `kind` with `aux` (see the module documentation).
fn op_code(kind: EventKind, aux: u8) -> u8 {
    let k = kind.opcode();
    if kind == EventKind::AllocCaller {
        ALLOC_CALLER_CODE
    } else if kind == EventKind::StackFrame {
        STACK_FRAME_CODE
    } else if k < 5 {
        k * 6 + aux
    } else if aux >> 1 != 0 {
        // An aligned `Alloc`: aux = 2·(exponent + 1) + flag.
        ALIGNED_ALLOC_CODE + (aux - 2)
    } else {
        30 + (k - 5) * 2 + aux
    }
}

/// The `aux` of an `Alloc` (see [`OpInfo::aux`]).
fn alloc_aux(site: Option<CodePos>, align: Option<Alignment>) -> u8 {
    u8::from(site.is_some()) | align.map_or(0, |a| (a.log2() + 1) << 1)
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
        } else if matches!(kind, EventKind::AllocCaller) {
            t[ALLOC_CALLER_CODE as usize] = OpInfo {
                kind,
                aux: 0,
                size: 0,
                valid: true,
            };
        } else if matches!(kind, EventKind::StackFrame) {
            t[STACK_FRAME_CODE as usize] = OpInfo {
                kind,
                aux: 0,
                size: 0,
                valid: true,
            };
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
            if matches!(kind, EventKind::Alloc) {
                let mut aux = 2;
                while aux < 2 * (Alignment::MAX_LOG2 as usize + 2) {
                    t[ALIGNED_ALLOC_CODE as usize + aux - 2] = OpInfo {
                        kind,
                        aux: aux as u8,
                        size: 0,
                        valid: true,
                    };
                    aux += 1;
                }
            }
        }
        k += 1;
    }
    t
};

/// One event as stored: its op code and its field values relative to the predictors.
/// Unused fields are 0, so equal tokens mean equal stored bytes.
#[derive(Clone, Copy, Debug, Default, Eq)]
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

impl PartialEq for Token {
    /// Without branches: the run finder compares tokens of irregular streams all the time,
    /// and a field-by-field comparison mispredicts on them.
    #[inline(always)]
    fn eq(&self, o: &Self) -> bool {
        (u64::from(self.code ^ o.code)
            | (self.addr ^ o.addr)
            | (self.pc ^ o.pc)
            | (self.a ^ o.a)
            | (self.b ^ o.b))
            == 0
    }
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
    /// Slots by [`hashed_slot`] (a file of format version 1 to 4) instead of [`slot`].
    hashed: bool,
}

impl Default for State {
    fn default() -> Self {
        State {
            pc: 0,
            heap: 0,
            addrs: [0; SLOTS],
            hashed: false,
        }
    }
}

impl State {
    /// The state a chunk of a file of format `version` starts decoding with.
    fn for_version(version: u32) -> Self {
        State {
            hashed: version < 5,
            ..State::default()
        }
    }

    /// The predictor slot of `pc` in this state's format.
    #[inline(always)]
    fn slot(&self, pc: u64) -> usize {
        if self.hashed {
            hashed_slot(pc)
        } else {
            slot(pc)
        }
    }

    /// The event of token `t` (whose code has `info`); advances the predictors.
    #[inline(always)]
    fn apply(&mut self, info: OpInfo, t: &Token) -> Event {
        if (info.kind as u8) < 5 {
            self.pc = self.pc.wrapping_add(t.pc);
            let prev = &mut self.addrs[self.slot(self.pc)];
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
                    align: (info.aux >> 1)
                        .checked_sub(1)
                        .and_then(Alignment::from_log2),
                }
            }
            EventKind::Free => {
                self.heap = self.heap.wrapping_add(t.addr);
                Event::Free { addr: self.heap }
            }
            EventKind::AllocCaller => match CodePos::new(t.a) {
                Some(site) => Event::AllocCaller { site },
                // `read_token` refuses site 0.
                None => Event::ThreadStart,
            },
            EventKind::StackFrame => match CodePos::new(t.a) {
                Some(site) => Event::StackFrame {
                    site,
                    sp: t.addr,
                    // Any pair round-trips; readers take a frame with `cfa <= sp` as empty.
                    cfa: t.addr.wrapping_add(t.b),
                },
                None => Event::ThreadStart,
            },
            // Accesses returned above.
            _ => Event::ThreadStart,
        }
    }

    /// The token of `event`; advances the predictors (the inverse of [`State::apply`]).
    /// Without code positions in the chunk, accesses are stored with position 0.
    #[inline(always)]
    fn token(&mut self, event: &Event, has_pcs: bool) -> Token {
        token(
            event,
            has_pcs,
            &mut self.pc,
            &mut self.heap,
            &mut self.addrs,
        )
    }
}

/// The token of `event` given the predictors (the fields of [`State`], passed apart so that a
/// loop can keep them in registers); advances them.
#[inline(always)]
fn token(
    event: &Event,
    has_pcs: bool,
    last_pc: &mut u64,
    heap: &mut u64,
    addrs: &mut [u64; SLOTS],
) -> Token {
    // Accesses and `Advance` are nearly all events: two well-predicted branches instead of a
    // jump table, and op codes without the general `op_code`.
    match *event {
        Event::Access(a) => {
            let pc = if has_pcs {
                a.pc.map_or(0, CodePos::addr)
            } else {
                0
            };
            let dpc = pc.wrapping_sub(*last_pc);
            *last_pc = pc;
            let prev = &mut addrs[slot(pc)];
            let addr = a.addr.wrapping_sub(*prev);
            *prev = a.addr;
            Token {
                // AccessKind's order is the op codes' (checked below).
                code: a.kind as u8 * 6 + size_class(a.size),
                addr,
                pc: dpc,
                a: a.size as u64,
                b: 0,
            }
        }
        Event::Advance { units, flops } => Token {
            code: ADVANCE_CODE + u8::from(flops != 0),
            addr: 0,
            pc: 0,
            a: units,
            b: flops,
        },
        _ => any_token(event, has_pcs, last_pc, heap, addrs),
    }
}

const _: () = {
    let mut k = 0;
    while k < 5 {
        assert!(AccessKind::ALL[k] as usize == k && EventKind::ALL[k] as usize == k);
        k += 1;
    }
};

/// [`token`] of any event (the fast paths there cover accesses and `Advance`).
#[inline(never)]
fn any_token(
    event: &Event,
    has_pcs: bool,
    last_pc: &mut u64,
    heap: &mut u64,
    addrs: &mut [u64; SLOTS],
) -> Token {
    let kind = event.kind();
    let mut t = Token::default();
    let aux = match *event {
        Event::Access(a) => {
            let pc = if has_pcs {
                a.pc.map_or(0, CodePos::addr)
            } else {
                0
            };
            t.pc = pc.wrapping_sub(*last_pc);
            *last_pc = pc;
            let prev = &mut addrs[slot(pc)];
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
        Event::Alloc {
            addr,
            size,
            site,
            align,
        } => {
            t.addr = addr.wrapping_sub(*heap);
            *heap = addr;
            t.a = size;
            t.b = site.map_or(0, CodePos::addr);
            alloc_aux(site, align)
        }
        Event::Free { addr } => {
            t.addr = addr.wrapping_sub(*heap);
            *heap = addr;
            0
        }
        Event::AllocCaller { site } => {
            t.a = site.addr();
            0
        }
        Event::StackFrame { site, sp, cfa } => {
            t.a = site.addr();
            t.addr = sp;
            t.b = cfa.wrapping_sub(sp);
            0
        }
    };
    t.code = op_code(kind, aux);
    t
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

/// What a [`Template`] checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum TemplateKind {
    /// Compute the event's token and compare it with the body's.
    #[default]
    Other,
    /// An access with these fields, at the slot's previous address plus `x`.
    Access,
    /// `Advance { units: x, flops: y }`.
    Advance,
}

/// The event a committed run expects at one body position, in a form that is cheaper to
/// check than computing the event's token (see `ColumnEncoder::make_templates`).
#[derive(Clone, Copy, Debug)]
struct Template {
    what: TemplateKind,
    access: AccessKind,
    size: u32,
    pc: Option<CodePos>,
    slot: u16,
    x: u64,
    y: u64,
}

impl Default for Template {
    fn default() -> Self {
        Template {
            what: TemplateKind::Other,
            access: AccessKind::Load,
            size: 0,
            pc: None,
            slot: 0,
            x: 0,
            y: 0,
        }
    }
}

/// Encodes events into the four columns. Reuse one encoder per thread: it keeps its buffers.
///
/// Call [`start`](Self::start) (or [`start_detecting`](Self::start_detecting)), push the
/// events with [`push`](Self::push) or [`push_slice`](Self::push_slice), then
/// [`finish`](Self::finish); the columns are complete after `finish`.
///
/// Encoding is streaming: runs are found while events arrive, keeping only the last few
/// hundred tokens, so the encoder never holds a chunk's events or tokens. The output is the
/// same as that of the greedy whole-chunk search described at [`finish`](Self::finish).
#[derive(Debug)]
pub struct ColumnEncoder {
    /// Encoded columns, in storage order.
    pub columns: [Vec<u8>; COLUMN_COUNT],
    state: State,
    /// Whether tokens use the accesses' code positions (false: they are stored as 0).
    use_pcs: bool,
    /// Whether to drop the `pcs` column at `finish` if no access had a code position.
    detect_pcs: bool,
    /// Whether an access with a code position was pushed (only tracked with `use_pcs`).
    saw_pc: bool,
    /// Run finding: the latest decision index + 1 per token hash bucket (0 = none).
    seen: Vec<u32>,
    /// The last [`RING`] tokens, token `i` at `i % RING`.
    ring: Box<[Token; RING]>,
    /// Tokens pushed in this chunk.
    n: usize,
    /// First token not yet stored (the greedy search's current event).
    d: usize,
    /// Period of the run candidate starting at `d` (0: none yet).
    cand: usize,
    /// Next token to compare with the one a period before it, for the candidate.
    scan: usize,
    /// Whether the candidate has repeated enough to be a run (its body is in `body`); then
    /// tokens only extend it until one differs.
    committed: bool,
    /// The body of a committed run.
    body: [Token; MAX_PERIOD],
    /// How to check events against the committed run's body without computing their tokens
    /// (see [`Template`]); `None` when that is not possible.
    templates: Option<Box<[Template; MAX_PERIOD]>>,
    /// Kept allocation of `templates`.
    spare_templates: Option<Box<[Template; MAX_PERIOD]>>,
    /// Accesses pushed in this chunk (for the clock).
    accesses: u64,
    /// Sum of the `Advance` units pushed in this chunk (wrapping, for the clock).
    units: u64,
}

impl Default for ColumnEncoder {
    /// An encoder with a chunk started as by [`start_detecting`](Self::start_detecting).
    fn default() -> Self {
        let mut enc = ColumnEncoder {
            columns: Default::default(),
            state: State::default(),
            use_pcs: true,
            detect_pcs: true,
            saw_pc: false,
            seen: Vec::new(),
            ring: Box::new([Token::default(); RING]),
            n: 0,
            d: 0,
            cand: 0,
            scan: 0,
            committed: false,
            body: [Token::default(); MAX_PERIOD],
            templates: None,
            spare_templates: None,
            accesses: 0,
            units: 0,
        };
        enc.start_detecting();
        enc
    }
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
        // All eight bytes, then cut to the length: a fixed-size copy is one store, where
        // copying `len` bytes is a call to `memcpy`.
        out.extend_from_slice(&word.to_le_bytes());
        out.truncate(out.len() - 8 + len);
    } else {
        out.push(0);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn size_class(size: u32) -> u8 {
    // A table rather than a `match`: one load on the encoder's hot path.
    const CLASS: [u8; 17] = [0, 1, 2, 0, 3, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 5];
    CLASS.get(size as usize).copied().unwrap_or(0)
}

/// Bits of the run finder's hash table (4096 buckets).
const SEEN_BITS: u32 = 12;

/// Tokens the encoder keeps (a power of two). The search looks back at most
/// [`MAX_PERIOD`] tokens from its current event and ahead at most `MAX_PERIOD` (body) +
/// `MAX_PERIOD` (repeats before a candidate is committed) + 1.
const RING: usize = 256;
const _: () = assert!(RING.is_power_of_two() && RING > 3 * MAX_PERIOD + 1);

/// Repeats after the body that make a candidate with period `p` a run.
#[inline(always)]
fn min_repeats(p: usize) -> usize {
    MIN_RUN.max(p)
}

impl ColumnEncoder {
    /// Clears the columns and starts a new chunk. `has_pcs` says whether accesses carry code
    /// positions in this chunk (if any access has one, pass true).
    pub fn start(&mut self, has_pcs: bool) {
        self.reset(has_pcs, false);
    }

    /// Clears the columns and starts a new chunk whose `has_pcs` flag is found from its
    /// events: true if any access has a code position (see [`has_pcs`](Self::has_pcs)).
    pub fn start_detecting(&mut self) {
        self.reset(true, true);
    }

    fn reset(&mut self, use_pcs: bool, detect_pcs: bool) {
        for c in &mut self.columns {
            c.clear();
        }
        self.state = State::default();
        self.use_pcs = use_pcs;
        self.detect_pcs = detect_pcs;
        self.saw_pc = false;
        self.seen.clear();
        self.seen.resize(1 << SEEN_BITS, 0);
        self.n = 0;
        self.d = 0;
        self.cand = 0;
        self.scan = 0;
        self.committed = false;
        self.drop_templates();
        self.accesses = 0;
        self.units = 0;
    }

    /// Whether the chunk's accesses carry code positions: as passed to
    /// [`start`](Self::start), or after [`start_detecting`](Self::start_detecting) whether an
    /// access pushed so far has one.
    pub fn has_pcs(&self) -> bool {
        self.use_pcs && (self.saw_pc || !self.detect_pcs)
    }

    /// Events pushed since the chunk started.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether no event was pushed since the chunk started.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// How far a thread's clock moves over the events pushed since the chunk started, when
    /// an access costs `access_cost` (the same as [`crate::chunk::clock_advance`] over them).
    pub fn clock_advance(&self, access_cost: u64) -> u64 {
        self.units
            .wrapping_add(self.accesses.wrapping_mul(access_cost))
    }

    /// Appends one event.
    #[inline]
    pub fn push(&mut self, event: &Event) {
        self.push_slice(std::slice::from_ref(event));
    }

    /// Appends events in order.
    pub fn push_slice(&mut self, mut events: &[Event]) {
        while !events.is_empty() {
            let used = if self.committed {
                self.extend_run(events)
            } else {
                self.push_one(&events[0]);
                1
            };
            events = &events[used..];
        }
    }

    /// Counts `t` (the token of an event just pushed) into the clock totals.
    #[inline(always)]
    fn count(accesses: &mut u64, units: &mut u64, t: &Token) {
        *accesses += u64::from(t.code < ADVANCE_CODE);
        let advance = t.code >> 1 == ADVANCE_CODE >> 1;
        *units = units.wrapping_add(if advance { t.a } else { 0 });
    }

    /// Pushes one event outside a committed run.
    fn push_one(&mut self, e: &Event) {
        let t = self.state.token(e, self.use_pcs);
        // Only accesses move `state.pc`, and it is non-zero exactly after an access with a
        // code position: no need to look at the event again.
        self.saw_pc |= self.state.pc != 0;
        Self::count(&mut self.accesses, &mut self.units, &t);
        let d = self.n;
        self.ring[d % RING] = t;
        self.n = d + 1;
        // Nothing pending (the search is at this event): its step inline, without entering
        // the general search, unless it proposes a run.
        if self.cand == 0 && self.d == d && !self.propose(d, &t) {
            self.put_single(d, &t);
            return;
        }
        self.search(false);
    }

    /// Forgets the templates (keeping their allocation).
    fn drop_templates(&mut self) {
        if let Some(t) = self.templates.take() {
            self.spare_templates = Some(t);
        }
    }

    /// Prepares [`Template`]s for the just committed run, if its body allows: code positions
    /// are used, and they add up to no change over the body (the loop's instructions recur,
    /// so each body position always has the same code position and predictor slot).
    fn make_templates(&mut self) {
        self.drop_templates();
        let p = self.cand;
        let body = &self.body[..p];
        let pc_sum = body.iter().fold(0u64, |s, t| s.wrapping_add(t.pc));
        if !self.use_pcs || pc_sum != 0 {
            return;
        }
        // The code position before body position 0: the current one (after token n − 1, at
        // body position `last`) minus the body's changes up to there.
        let last = (self.n - 1 - self.d) % p;
        let upto_last = body[..=last].iter().fold(0u64, |s, t| s.wrapping_add(t.pc));
        let mut pc = self.state.pc.wrapping_sub(upto_last);
        let mut tmpl = self
            .spare_templates
            .take()
            .unwrap_or_else(|| Box::new([Template::default(); MAX_PERIOD]));
        for (t, out) in body.iter().zip(tmpl.iter_mut()) {
            let info = OPS[t.code as usize];
            *out = if (info.kind as u8) < 5 {
                pc = pc.wrapping_add(t.pc);
                Template {
                    what: TemplateKind::Access,
                    access: AccessKind::ALL[info.kind as usize],
                    size: t.a as u32,
                    pc: CodePos::new(pc),
                    slot: slot(pc) as u16,
                    x: t.addr,
                    y: 0,
                }
            } else if info.kind == EventKind::Advance {
                Template {
                    what: TemplateKind::Advance,
                    x: t.a,
                    y: t.b,
                    ..Template::default()
                }
            } else {
                Template::default()
            };
        }
        self.templates = Some(tmpl);
    }

    /// Extends the committed run with `events` while their tokens repeat the run's body;
    /// ends it at the first one that differs (pushing that one). Returns the number of events
    /// used.
    ///
    /// This is where a loop's events go, so it is written for speed: the predictors and
    /// counters live in locals (registers) for the whole slice, and each event costs its
    /// token and one comparison with the body (the ring is filled in when the run ends).
    fn extend_run(&mut self, events: &[Event]) -> usize {
        if self.templates.is_some() {
            return self.extend_run_templates(events);
        }
        self.extend_run_tokens(events)
    }

    /// [`extend_run`](Self::extend_run) with templates: an access is checked by comparing
    /// its fields with the template's and its address with the slot's previous one plus the
    /// body's difference; an `Advance` by comparing its fields. This is equivalent to
    /// comparing tokens (given the templates' conditions) but skips the hashing and the
    /// op code. Other events, and the first one that differs, take the token path.
    fn extend_run_templates(&mut self, events: &[Event]) -> usize {
        let p = self.cand;
        let mut n = self.n;
        let mut k = (n - self.d) % p;
        let (mut pc, mut heap) = (self.state.pc, self.state.heap);
        let (mut accesses, mut units) = (self.accesses, self.units);
        let Some(tmpl) = self.templates.as_deref() else {
            unreachable!("called with templates")
        };
        let tmpl = &tmpl[..p];
        let body = &self.body[..p];
        let addrs = &mut self.state.addrs;
        let mut differs = None;
        for (i, e) in events.iter().enumerate() {
            let tp = &tmpl[k];
            let same = match (tp.what, e) {
                (TemplateKind::Access, Event::Access(a)) => {
                    let prev = &mut addrs[tp.slot as usize % SLOTS];
                    let addr = prev.wrapping_add(tp.x);
                    let same =
                        a.addr == addr && a.kind == tp.access && a.size == tp.size && a.pc == tp.pc;
                    if same {
                        *prev = addr;
                        pc = tp.pc.map_or(0, CodePos::addr);
                        accesses += 1;
                    }
                    same
                }
                (TemplateKind::Advance, &Event::Advance { units: u, flops }) => {
                    let same = u == tp.x && flops == tp.y;
                    units = units.wrapping_add(if same { u } else { 0 });
                    same
                }
                (TemplateKind::Other, _) => {
                    let t = token(e, true, &mut pc, &mut heap, addrs);
                    Self::count(&mut accesses, &mut units, &t);
                    if t != body[k] {
                        differs = Some((i, t));
                        break;
                    }
                    true
                }
                _ => false,
            };
            if !same {
                // Differs (the check is exact): the token, from the unchanged predictors.
                let t = token(e, true, &mut pc, &mut heap, addrs);
                self.saw_pc |= pc != 0;
                Self::count(&mut accesses, &mut units, &t);
                differs = Some((i, t));
                break;
            }
            n += 1;
            k += 1;
            if k == p {
                k = 0;
            }
        }
        (self.n, self.state.pc, self.state.heap) = (n, pc, heap);
        (self.accesses, self.units) = (accesses, units);
        self.after_run_extension(events.len(), differs)
    }

    /// Ends [`extend_run`](Self::extend_run): if token `n` (`t`, the `i`th event) differs,
    /// ends the run and goes on searching from it. Returns the number of events used.
    fn after_run_extension(&mut self, len: usize, differs: Option<(usize, Token)>) -> usize {
        match differs {
            None => len,
            Some((i, t)) => {
                let n = self.n;
                self.end_committed_run();
                self.ring[n % RING] = t;
                self.n = n + 1;
                self.search(false);
                i + 1
            }
        }
    }

    fn extend_run_tokens(&mut self, events: &[Event]) -> usize {
        let p = self.cand;
        let use_pcs = self.use_pcs;
        let (mut n, mut pc, mut heap) = (self.n, self.state.pc, self.state.heap);
        let (mut accesses, mut units, mut saw_pc) = (self.accesses, self.units, self.saw_pc);
        let body = &self.body[..p];
        let addrs = &mut self.state.addrs;
        // Body position of token `n`.
        let mut k = (n - self.d) % p;
        let mut differs = None;
        for (i, e) in events.iter().enumerate() {
            let t = token(e, use_pcs, &mut pc, &mut heap, addrs);
            saw_pc |= pc != 0;
            Self::count(&mut accesses, &mut units, &t);
            if t != body[k] {
                differs = Some((i, t));
                break;
            }
            n += 1;
            k += 1;
            if k == p {
                k = 0;
            }
        }
        (self.n, self.state.pc, self.state.heap) = (n, pc, heap);
        (self.accesses, self.units, self.saw_pc) = (accesses, units, saw_pc);
        self.after_run_extension(events.len(), differs)
    }

    /// Writes the events not yet stored into the columns, ending the chunk.
    ///
    /// Runs are found greedily: at each event, the previous event with an equal token (found
    /// through a hash table) proposes a period P; if the P tokens from here on repeat at least
    /// `MIN_RUN` (and at least P) more events, they become a run, else the event is stored
    /// alone. Events inside a run are not entered into the hash table.
    pub fn finish(&mut self) {
        if self.committed {
            self.end_committed_run();
        }
        self.search(true);
        debug_assert!(self.d == self.n && self.cand == 0);
        if self.detect_pcs && !self.saw_pc {
            // The tokens of accesses without code positions are the same either way (position
            // 0); only the `pcs` column, all zeros, goes.
            self.columns[2].clear();
        }
    }

    /// Ends the committed run at the current token (`n`, the first that differs or the end of
    /// the chunk).
    fn end_committed_run(&mut self) {
        let p = self.cand;
        // The run's tokens after the commit are not in the ring, and need not be: the search
        // reads the ring only at decision points (single events and run starts, never inside
        // a run) and at tokens pushed after them.
        let body = &self.body;
        put_run(
            &mut self.columns,
            self.use_pcs,
            p,
            self.n - self.d - p,
            |k| body[k],
        );
        self.d = self.n;
        self.cand = 0;
        self.committed = false;
        self.drop_templates();
    }

    /// Advances the greedy search over the pushed tokens as far as they allow; with `last`,
    /// no more tokens come.
    fn search(&mut self, last: bool) {
        loop {
            let d = self.d;
            if self.cand == 0 {
                if d >= self.n {
                    return;
                }
                let t = self.ring[d % RING];
                if !self.propose(d, &t) {
                    self.put_single(d, &t);
                }
                continue;
            }
            let p = self.cand;
            let mut scan = self.scan;
            while scan < self.n && self.ring[scan % RING] == self.ring[(scan - p) % RING] {
                scan += 1;
            }
            self.scan = scan;
            let repeats = scan.saturating_sub(d + p);
            if scan < self.n || last {
                // The candidate's repeats are known.
                if repeats >= min_repeats(p) {
                    let ring = &self.ring;
                    put_run(&mut self.columns, self.use_pcs, p, repeats, |k| {
                        ring[(d + k) % RING]
                    });
                    self.d = d + p + repeats;
                    self.cand = 0;
                } else {
                    self.cand = 0;
                    let t = self.ring[d % RING];
                    self.put_single(d, &t);
                }
                continue;
            }
            if repeats >= min_repeats(p) {
                // A run whatever comes next: keep its body and let `push_slice` extend it.
                for k in 0..p {
                    self.body[k] = self.ring[(d + k) % RING];
                }
                self.committed = true;
                self.make_templates();
            }
            return;
        }
    }

    /// The search's step at a new current event `d` (token `t`): enters it into the hash
    /// table and, if the previous event with an equal token is at most [`MAX_PERIOD`] back,
    /// makes the distance the candidate period. Returns whether it did.
    #[inline(always)]
    fn propose(&mut self, d: usize, t: &Token) -> bool {
        let bucket = (t.hash() >> (64 - SEEN_BITS)) as usize;
        let prev = std::mem::replace(&mut self.seen[bucket], d as u32 + 1) as usize;
        if prev != 0 && d + 1 - prev <= MAX_PERIOD && self.ring[(prev - 1) % RING] == *t {
            self.cand = d + 1 - prev;
            self.scan = d + self.cand;
            return true;
        }
        false
    }

    /// Stores token `d` (`t`) alone and moves the search to the next one.
    #[inline(always)]
    fn put_single(&mut self, d: usize, t: &Token) {
        put_token(&mut self.columns, self.use_pcs, t, false);
        self.d = d + 1;
    }
}

/// Stores a run: its body of `p` tokens (`body(k)` is the `k`th) followed by `repeats`
/// repeated events. The body comes through a function so that no caller copies a whole
/// [`MAX_PERIOD`] array per run (short runs of irregular streams end all the time).
fn put_run(
    columns: &mut [Vec<u8>; COLUMN_COUNT],
    pcs: bool,
    p: usize,
    repeats: usize,
    body: impl Fn(usize) -> Token,
) {
    put_varint(&mut columns[3], p as u64);
    put_varint(&mut columns[3], repeats as u64);
    for k in 0..p {
        put_token(columns, pcs, &body(k), k == 0);
    }
    // The repeats' op bytes are the body's, cyclically: copy the ones written so far
    // (doubling) rather than pushing byte by byte.
    let ops = &mut columns[0];
    let start = ops.len() - p;
    ops[start] &= !RUN_FLAG;
    let end = ops.len() + repeats;
    ops.reserve(repeats);
    while ops.len() < end {
        let copy = (ops.len() - start).min(end - ops.len());
        ops.extend_from_within(start..start + copy);
    }
    ops[start] |= RUN_FLAG;
}

/// Op code of `Advance` without FLOPs (with FLOPs it is this + 1; accesses are below it).
const ADVANCE_CODE: u8 = 30;
const _: () = assert!(ADVANCE_CODE == 30 + 2 * (EventKind::Advance as u8 - 5));

/// Stores one token (the inverse of `read_token`); `pcs` says whether the chunk has a `pcs`
/// column.
fn put_token(columns: &mut [Vec<u8>; COLUMN_COUNT], pcs: bool, t: &Token, starts_run: bool) {
    let info = OPS[t.code as usize];
    let [ops, addrs, pc_col, args] = columns;
    ops.push(t.code | if starts_run { RUN_FLAG } else { 0 });
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
            if pcs {
                put_varint(pc_col, zigzag(t.pc));
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
            if info.aux & 1 == 1 {
                put_varint(args, t.b);
            }
        }
        EventKind::Free => put_varint(addrs, zigzag(t.addr)),
        EventKind::AllocCaller => put_varint(args, t.a),
        EventKind::StackFrame => {
            put_varint(args, t.a);
            put_varint(args, t.addr);
            put_varint(args, t.b);
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
/// `out` may hold some of the chunk's events. `version`: the file's format version (it
/// decides the address predictor's slots).
pub fn decode_columns(
    raw: &[u8],
    lengths: [u32; COLUMN_COUNT],
    has_pcs: bool,
    version: u32,
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
    let (i, fail) = match decode_loop(ops, &mut cur, has_pcs, version, out) {
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
            if info.aux & 1 == 1 {
                t.b = read(cur, ARGS)?;
                if t.b == 0 {
                    return Err(Fail::Arg("allocation site 0"));
                }
            }
        }
        EventKind::Free => t.addr = unzigzag(read(cur, ADDRS)?),
        EventKind::AllocCaller => {
            t.a = read(cur, ARGS)?;
            if t.a == 0 {
                return Err(Fail::Arg("allocation caller's site 0"));
            }
        }
        EventKind::StackFrame => {
            t.a = read(cur, ARGS)?;
            t.addr = read(cur, ARGS)?;
            t.b = read(cur, ARGS)?;
            if t.a == 0 {
                return Err(Fail::Arg("stack frame's site 0"));
            }
        }
        _ => {}
    }
    Ok(t)
}

/// Decodes all events; on error returns the failing event's index.
fn decode_loop(
    ops: &[u8],
    cur: &mut [Cursor<'_>; 3],
    has_pcs: bool,
    version: u32,
    out: &mut Vec<Event>,
) -> Result<(), (usize, Fail)> {
    let mut st = State::for_version(version);
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
                Event::Access(a) => st.slot(a.pc.map_or(0, CodePos::addr)),
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
    use crate::frame::FORMAT_VERSION;
    use proptest::prelude::*;

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
        let err =
            decode_columns(&raw, lengths, false, FORMAT_VERSION, &mut Vec::new()).unwrap_err();
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
                align: None,
            },
            Event::Free {
                addr: 0x7f00_0000_0000,
            },
            // Aligned allocations: the smallest and largest exponent, with and without site.
            Event::Alloc {
                addr: 0x7f00_0000_1000,
                size: 8,
                site: CodePos::new(0x401008),
                align: Alignment::new(1),
            },
            Event::Alloc {
                addr: 0x8000_0000,
                size: 1 << 31,
                site: None,
                align: Alignment::new(1 << 31),
            },
            Event::Alloc {
                addr: 0x7f00_0000_2000,
                size: 100,
                site: None,
                align: Alignment::new(64),
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
        decode_columns(&raw, lengths, true, FORMAT_VERSION, &mut out).unwrap();
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
        decode_columns(&raw, lengths, has_pcs, FORMAT_VERSION, &mut out).unwrap();
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
                align: Alignment::new(1 << (i % 8)),
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
    fn a_loops_instructions_get_their_own_slots_wherever_the_program_is_loaded() {
        // Two loads 233 bytes apart (a Fibonacci distance, the multiplicative hash's worst)
        // at a load address where the hash of format versions 1 to 4 put them into one slot.
        let base = (0x5555_5555_0000u64..)
            .step_by(4096)
            .take(1 << 16)
            .find(|b| hashed_slot(b + 0x6b0) == hashed_slot(b + 0x6b0 + 233))
            .expect("a colliding load address");
        let (p1, p2) = (base + 0x6b0, base + 0x6b0 + 233);
        assert_ne!(slot(p1), slot(p2));
        let (a, b) = (0x7f00_0000_0000u64, 0x5555_6000_0000u64);
        let events: Vec<Event> = (0..10_000u64)
            .flat_map(|i| {
                [
                    access(AccessKind::Load, a + 2 * i, 1, p1),
                    access(AccessKind::Load, b + 8 * (i % 4), 8, p2),
                ]
            })
            .collect();
        let enc = roundtrip(&events, true);
        // One run: the value columns hold its body, not 20,000 mispredicted addresses.
        let lens: Vec<usize> = enc.columns.iter().map(Vec::len).collect();
        assert!(lens[1] + lens[3] < 200, "{lens:?}");
        // The same chunk read as a version 4 file predicts through the hashed slots.
        let (raw, lengths) = padded(&enc);
        let mut out = Vec::new();
        decode_columns(&raw, lengths, true, 4, &mut out).unwrap();
        assert_ne!(out, events);
    }

    /// The greedy whole-chunk run search the streaming encoder must match (format version 1's
    /// first encoder, kept as the reference): tokens of all events first, then runs.
    fn reference_columns(events: &[Event], has_pcs: bool) -> [Vec<u8>; COLUMN_COUNT] {
        let mut st = State::default();
        let tokens: Vec<Token> = events.iter().map(|e| st.token(e, has_pcs)).collect();
        let mut cols: [Vec<u8>; COLUMN_COUNT] = Default::default();
        let mut seen = vec![0u32; 1 << SEEN_BITS];
        let (n, mut i) = (tokens.len(), 0);
        while i < n {
            let bucket = (tokens[i].hash() >> (64 - SEEN_BITS)) as usize;
            let prev = std::mem::replace(&mut seen[bucket], i as u32 + 1) as usize;
            if prev != 0 && i + 1 - prev <= MAX_PERIOD && tokens[prev - 1] == tokens[i] {
                let p = i + 1 - prev;
                let repeats = (i + p..n)
                    .take_while(|&j| tokens[j] == tokens[j - p])
                    .count();
                if repeats >= MIN_RUN.max(p) {
                    put_varint(&mut cols[3], p as u64);
                    put_varint(&mut cols[3], repeats as u64);
                    for (k, t) in tokens[i..i + p].iter().enumerate() {
                        put_token(&mut cols, has_pcs, t, k == 0);
                    }
                    let body = cols[0].len() - p;
                    cols[0][body] &= !RUN_FLAG;
                    for j in 0..repeats {
                        let op = cols[0][body + j];
                        cols[0].push(op);
                    }
                    cols[0][body] |= RUN_FLAG;
                    i += p + repeats;
                    continue;
                }
            }
            put_token(&mut cols, has_pcs, &tokens[i], false);
            i += 1;
        }
        cols
    }

    /// Loop-shaped streams with perturbations: periods up to past MAX_PERIOD, code positions
    /// that recur or drift, heap events and sync events in bodies.
    fn loopy_events() -> impl Strategy<Value = Vec<Event>> {
        let item = (0u8..12, 0u64..4, 0u64..3, 0u64..3);
        let body = proptest::collection::vec(item, 1..70);
        let part = (body, 0usize..40, 0u32..50, any::<bool>());
        proptest::collection::vec(part, 1..6).prop_map(|parts| {
            let mut v = Vec::new();
            for (body, reps, noise, drift) in parts {
                for it in 0..reps as u64 {
                    for (j, &(k, stride, x, pcx)) in body.iter().enumerate() {
                        let bump =
                            u64::from(noise != 0 && (it * 7 + j as u64) % 97 == noise as u64);
                        let addr = 0x1000 + stride * 8 * it + bump;
                        let pc = 0x400 + 4 * pcx + if drift { it } else { 0 };
                        let access = |kind| {
                            Event::Access(Access {
                                kind,
                                size: [8, 4, 3][x as usize],
                                addr,
                                pc: CodePos::new(if k == 4 { 0 } else { pc }),
                            })
                        };
                        v.push(match k {
                            0..=4 => access(AccessKind::ALL[(k % 5) as usize]),
                            5..=7 => Event::Advance {
                                units: x + bump,
                                flops: x / 2,
                            },
                            8 => Event::Alloc {
                                addr,
                                size: 64,
                                site: CodePos::new(x),
                                // Exponent 32 is out of range: no alignment.
                                align: Alignment::from_log2((x % 33) as u8),
                            },
                            9 => match CodePos::new(x) {
                                Some(site) if x % 3 == 0 => Event::AllocCaller { site },
                                Some(site) if x % 3 == 1 => Event::StackFrame {
                                    site,
                                    sp: addr,
                                    cfa: addr + 16 * x,
                                },
                                _ => Event::Free { addr },
                            },
                            10 => Event::BarrierEnter {
                                barrier: x,
                                participants: 2,
                            },
                            _ => Event::LockAcquire { lock: x, order: it },
                        });
                    }
                }
            }
            v
        })
    }

    proptest! {
        /// The streaming encoder writes what the whole-chunk reference writes, however the
        /// events are split into pushes, in every code position mode.
        #[test]
        fn streaming_matches_reference(events in loopy_events(), split in 1usize..300) {
            for mode in 0..3 {
                let mut enc = ColumnEncoder::default();
                match mode {
                    0 => enc.start(false),
                    1 => enc.start(true),
                    _ => enc.start_detecting(),
                }
                for part in events.chunks(split) {
                    enc.push_slice(part);
                }
                enc.finish();
                let any_pc = events
                    .iter()
                    .any(|e| matches!(e, Event::Access(a) if a.pc.is_some()));
                let has_pcs = match mode {
                    0 => false,
                    1 => true,
                    _ => any_pc,
                };
                prop_assert_eq!(enc.has_pcs(), has_pcs);
                prop_assert_eq!(&enc.columns, &reference_columns(&events, has_pcs));
                prop_assert_eq!(enc.len(), events.len());
                let cost = 3;
                let clock = events.iter().fold(0u64, |t, e| match e {
                    Event::Access(_) => t.wrapping_add(cost),
                    Event::Advance { units, .. } => t.wrapping_add(*units),
                    _ => t,
                });
                prop_assert_eq!(enc.clock_advance(cost), clock);
            }
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
                let _ = decode_columns(&bad, lengths, true, FORMAT_VERSION, &mut out);
                assert!(out.len() <= lengths[0] as usize);
            }
        }
        // A run longer than the chunk, and a run starting inside a run body.
        let mut bad = raw.clone();
        let first = bad.iter().position(|&b| b & RUN_FLAG != 0).unwrap();
        let mut short = lengths;
        short[0] = first as u32 + 3;
        bad.copy_within(lengths[0] as usize.., first + 3);
        let err = decode_columns(&bad, short, true, FORMAT_VERSION, &mut Vec::new()).unwrap_err();
        assert_eq!(err.event, first as u32);
        let mut bad = raw.clone();
        bad[first + 1] |= RUN_FLAG;
        let err = decode_columns(&bad, lengths, true, FORMAT_VERSION, &mut Vec::new()).unwrap_err();
        assert_eq!(err.event, first as u32 + 1);
        let mut bad = raw.clone();
        bad[first + 40] ^= 1;
        let err = decode_columns(&bad, lengths, true, FORMAT_VERSION, &mut Vec::new()).unwrap_err();
        assert_eq!(
            (err.event, err.what),
            (first as u32 + 40, "op differs from the run's body")
        );
    }
}
