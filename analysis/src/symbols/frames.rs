//! How far below a function's stack pointer in its body its stack pointer lies at one of its
//! calls: the call's own arguments, pushed onto the stack.
//!
//! A recorded frame's bottom is the stack pointer *at the call* (`tracer/shim/src/stack.rs`).
//! clang's DWARF places the locals of an optimized function relative to the stack pointer of
//! the function's body (`DW_OP_breg7`, or a frame base of `rsp`), and the two differ where the
//! call passes arguments on the stack: clang hands the captured variables of an OpenMP region
//! beyond the sixth argument of `__kmpc_fork_call` over that way (`sub $8,%rsp; push; push;
//! push; call`), so every local of the forking function would be placed 32 bytes too low and
//! named after its neighbour.
//!
//! The pushes are read from the code: the function (its bounds from `.eh_frame`, which no
//! strip removes) is decoded from its start, and the instructions right before the call are
//! walked back over while they push (`push`, or `sub $8,%rsp` for alignment). Anything else that
//! moves the stack pointer, a branch, another call or the function's start ends the walk. The
//! call frame information alone would not do: with a frame pointer (a frame realigned for an
//! `alignas(64)` local) it does not follow the stack pointer at all.

use std::path::PathBuf;

use addr2line::gimli;
use gimli::{BaseAddresses, EhFrame, UnwindContext, UnwindSection};
use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic, OpKind, Register};
use object::{Object, ObjectSection, SectionKind};

use super::callees::callee;
use super::module::read_regular_file;

/// A `sub $N,%rsp` of at most this many bytes in a call sequence pads the stack arguments to
/// 16 bytes; a larger one allocates a frame and ends the walk.
const ALIGNMENT_PAD: u64 = 8;

/// Where to read a module's code and call frame information (only when a stack frame needs
/// it: few call sites do).
pub(crate) struct CallSites {
    path: PathBuf,
    build_id: Vec<u8>,
}

impl CallSites {
    /// The module at `path`, whose build-id was `build_id` when it was opened.
    pub fn new(path: PathBuf, build_id: Vec<u8>) -> Self {
        Self { path, build_id }
    }

    /// Bytes pushed onto the stack for the call at code position `site` (link-time; as a
    /// recorded frame gives it, the return address minus one, inside the call instruction).
    /// `None` when the file changed or cannot be read, or the code there is not a call.
    pub fn pushed_at(&self, site: u64) -> Option<u64> {
        self.with_call(site, |_, code, start, body, ret| {
            pushed_before(code, start, body, ret)
        })
    }

    /// Where the function holding code position `site` (link-time) sets its frame pointer,
    /// read from its prologue (see [`frame_pointer_rule`]). `None` when the file changed or
    /// cannot be read, or the prologue is not one the rule covers.
    pub fn frame_pointer_at(&self, site: u64) -> Option<FrameRule> {
        self.with_call(site, |_, code, start, _, _| frame_pointer_rule(code, start))
    }

    /// The function the call at code position `site` (link-time, as
    /// [`pushed_at`](Self::pushed_at) takes it) calls, when its target has a name (see
    /// `callees.rs`).
    pub fn callee_at(&self, site: u64) -> Option<String> {
        self.with_call(site, |file, code, start, _, ret| {
            callee(file, code, start, ret)
        })
    }

    /// `read` of the module's file, the code of the function holding `site` up to the return
    /// address `site + 1`, the function's start and body start, and that return address.
    fn with_call<T>(
        &self,
        site: u64,
        read: impl FnOnce(&object::File<'_>, &[u8], u64, u64, u64) -> Option<T>,
    ) -> Option<T> {
        let bytes = read_regular_file(&self.path).ok()?;
        let file = object::File::parse(&*bytes).ok()?;
        let now = file.build_id().ok().flatten().unwrap_or_default();
        if now != self.build_id.as_slice() {
            return None;
        }
        let ret = site.checked_add(1)?;
        let (start, body) = function_and_body_start(&file, site)?;
        let section = file.sections().find(|s| {
            s.kind() == SectionKind::Text
                && s.address() <= start
                && ret <= s.address().saturating_add(s.size())
        })?;
        let data = section.data().ok()?;
        let from = usize::try_from(start - section.address()).ok()?;
        let to = usize::try_from(ret - section.address()).ok()?;
        read(&file, data.get(from..to)?, start, body, ret)
    }
}

/// Bytes between two changes of the call frame information within a prologue (its pushes
/// and frame allocation are consecutive instructions of at most a few bytes each).
const PROLOGUE_STEP: u64 = 16;

/// The start of the function holding link-time address `pc`, from its `.eh_frame` entry, and
/// the end of its prologue: where the first run of closely spaced changes of its call frame
/// information ends. A frame allocated with a push (`push %rax` for 8 bytes of locals) must
/// not count as an argument pushed for a call that follows it directly.
fn function_and_body_start(file: &object::File<'_>, pc: u64) -> Option<(u64, u64)> {
    let section = file.section_by_name(".eh_frame")?;
    let data = section.data().ok()?;
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let eh = EhFrame::new(data, endian);
    let bases = BaseAddresses::default().set_eh_frame(section.address());
    let fde = eh
        .fde_for_address(&bases, pc, EhFrame::cie_from_offset)
        .ok()?;
    let start = fde.initial_address();
    let mut ctx = Box::new(UnwindContext::new());
    let mut rows = fde.rows(&eh, &bases, &mut ctx).ok()?;
    let mut body = start;
    while let Ok(Some(row)) = rows.next_row() {
        if row.start_address() > body.saturating_add(PROLOGUE_STEP) {
            break;
        }
        body = row.start_address();
    }
    Some((start, body))
}

/// A function's frame pointer as a function of its canonical frame address:
/// `((cfa + before) & mask) + after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameRule {
    before: i64,
    mask: u64,
    after: i64,
}

impl FrameRule {
    /// The frame pointer of the frame whose canonical frame address is `cfa`.
    pub fn frame_pointer(self, cfa: u64) -> u64 {
        (cfa.wrapping_add_signed(self.before) & self.mask).wrapping_add_signed(self.after)
    }
}

/// Instructions of a prologue read before giving up on finding `mov %rsp,%rbp`.
const PROLOGUE_INSTRUCTIONS: usize = 16;

/// Where the function whose code starts at `start` (`code`: from there on) sets `%rbp`,
/// relative to its canonical frame address, from its prologue: the stack pointer is followed
/// from the entry (the CFA minus the return address) through pushes, `sub`/`add` of
/// constants and `and` (a frame realigned for an `alignas(64)` local) up to `mov %rsp,%rbp`.
/// Usually `push %rbp; mov %rsp,%rbp`: the CFA minus 16. gcc realigns a frame before it
/// saves `%rbp` (`lea 8(%rsp),%r10; and $-64,%rsp; push -8(%r10); push %rbp; mov
/// %rsp,%rbp`), and addresses the locals from that `%rbp` (`DW_OP_breg6`), which is then
/// not the CFA minus 16 (until 2026-11-29 its locals were placed up to 48 bytes off, and
/// named after their neighbours). `None` when anything else moves the stack pointer, a
/// branch comes first, or no `mov %rsp,%rbp` comes within [`PROLOGUE_INSTRUCTIONS`].
pub(crate) fn frame_pointer_rule(code: &[u8], start: u64) -> Option<FrameRule> {
    let mut decoder = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    let mut rule = FrameRule {
        before: -8,
        mask: u64::MAX,
        after: 0,
    };
    for _ in 0..PROLOGUE_INSTRUCTIONS {
        if !decoder.can_decode() {
            return None;
        }
        let i = decoder.decode();
        if i.is_invalid() || i.flow_control() != FlowControl::Next {
            return None;
        }
        let reg = |n: u32| i.op_count() > n && i.op_kind(n) == OpKind::Register;
        let writes_rsp = reg(0) && i.op0_register() == Register::RSP;
        let imm = matches!(
            i.op1_kind(),
            OpKind::Immediate8to64 | OpKind::Immediate32to64
        );
        match i.mnemonic() {
            Mnemonic::Mov
                if reg(0)
                    && reg(1)
                    && i.op0_register() == Register::RBP
                    && i.op1_register() == Register::RSP =>
            {
                return Some(rule);
            }
            Mnemonic::Push => rule.after -= i64::from(i.stack_pointer_increment().unsigned_abs()),
            Mnemonic::Sub if writes_rsp && imm => {
                rule.after = rule.after.checked_sub(i.immediate(1) as i64)?
            }
            Mnemonic::Add if writes_rsp && imm => {
                rule.after = rule.after.checked_add(i.immediate(1) as i64)?
            }
            // One realignment: a second one would need the offset folded in under the first
            // mask (not a prologue seen in practice).
            Mnemonic::And if writes_rsp && imm && rule.mask == u64::MAX => {
                rule.before = rule.before.checked_add(rule.after)?;
                rule.after = 0;
                rule.mask &= i.immediate(1);
            }
            _ if writes_rsp || i.stack_pointer_increment() != 0 => return None,
            // A write of `%rbp` before the frame is set: not a frame pointer prologue.
            _ if reg(0) && i.op0_register() == Register::RBP => return None,
            _ => {}
        }
    }
    None
}

/// Bytes pushed right before the call that returns to `ret`, given the code from the
/// function's start `start` to `ret`; instructions before `body` (the prologue) never count.
/// `None` when that code does not end with a call.
pub(crate) fn pushed_before(code: &[u8], start: u64, body: u64, ret: u64) -> Option<u64> {
    let mut decoder = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    let mut instructions = Vec::new();
    while decoder.can_decode() {
        let i = decoder.decode();
        if i.is_invalid() {
            return None;
        }
        instructions.push(i);
    }
    let (call, before) = instructions.split_last()?;
    if call.next_ip() != ret
        || !matches!(
            call.flow_control(),
            FlowControl::Call | FlowControl::IndirectCall
        )
    {
        return None;
    }
    let mut pushed = 0u64;
    for i in before.iter().rev() {
        if i.flow_control() != FlowControl::Next || i.ip() < body {
            break;
        }
        let writes_rsp = i.op_count() > 0
            && i.op0_kind() == OpKind::Register
            && i.op0_register() == Register::RSP;
        match i.mnemonic() {
            Mnemonic::Push => pushed += u64::from(i.stack_pointer_increment().unsigned_abs()),
            Mnemonic::Sub
                if writes_rsp
                    && matches!(
                        i.op1_kind(),
                        OpKind::Immediate8to64 | OpKind::Immediate32to64
                    )
                    && i.immediate(1) <= ALIGNMENT_PAD =>
            {
                pushed += i.immediate(1);
            }
            _ if writes_rsp || i.stack_pointer_increment() != 0 => break,
            _ => {}
        }
    }
    Some(pushed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALL: [u8; 5] = [0xe8, 0, 0, 0, 0];

    #[test]
    fn a_frame_pointer_is_found_in_plain_and_realigned_prologues() {
        // push %rbp; mov %rsp,%rbp; sub $0x20,%rsp
        let plain = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x20];
        let rule = frame_pointer_rule(&plain, 0x1000).unwrap();
        assert_eq!(rule.frame_pointer(0x7ff0_0620), 0x7ff0_0610);
        // endbr64 first, as with -fcf-protection.
        let endbr = [&[0xf3, 0x0f, 0x1e, 0xfa][..], &plain].concat();
        let rule = frame_pointer_rule(&endbr, 0x1000).unwrap();
        assert_eq!(rule.frame_pointer(0x7ff0_0620), 0x7ff0_0610);
        // gcc -O0 realigning for an alignas(64) local (from a real build):
        // lea 0x8(%rsp),%r10; and $-64,%rsp; push -0x8(%r10); push %rbp; mov %rsp,%rbp
        let realigned = [
            0x4c, 0x8d, 0x54, 0x24, 0x08, 0x48, 0x83, 0xe4, 0xc0, 0x41, 0xff, 0x72, 0xf8, 0x55,
            0x48, 0x89, 0xe5,
        ];
        let rule = frame_pointer_rule(&realigned, 0x1000).unwrap();
        // Entry %rsp 0x…618, aligned down to 0x…600, two pushes: 0x…5f0 (a debugger's
        // value in a recorded run), not the CFA minus 16 (0x…610).
        assert_eq!(rule.frame_pointer(0x7ff0_0620), 0x7ff0_05f0);
        // Two realignments (and $-16; push %rbp; and $-64; push %rbp; mov %rsp,%rbp): not
        // followed, the CFA minus 16 is kept.
        let twice = [
            0x48, 0x83, 0xe4, 0xf0, 0x55, 0x48, 0x83, 0xe4, 0xc0, 0x55, 0x48, 0x89, 0xe5,
        ];
        assert_eq!(frame_pointer_rule(&twice, 0x1000), None);
        // No frame pointer: a call before any `mov %rsp,%rbp`, or none at all.
        assert_eq!(
            frame_pointer_rule(&[&[0x55][..], &CALL].concat(), 0x1000),
            None
        );
        assert_eq!(frame_pointer_rule(&[0x48, 0x83, 0xec, 0x20], 0x1000), None);
    }

    fn pushed(code: &[u8]) -> Option<u64> {
        pushed_before(code, 0x1000, 0x1000, 0x1000 + code.len() as u64)
    }

    /// clang's fork of a region with eight captured variables (from a real build).
    #[test]
    fn the_arguments_pushed_for_a_call_are_counted() {
        let code = [
            &[0xe8, 0, 0, 0, 0][..],   // call (a coverage callback): the walk stops here
            &[0x48, 0x83, 0xec, 0x08], // sub $8,%rsp (alignment)
            &[0x48, 0x89, 0xe9],       // mov %rbp,%rcx
            &[0x41, 0x54],             // push %r12
            &[0x41, 0x55],             // push %r13
            &[0x48, 0x8d, 0x5c, 0x24, 0x20], // lea 0x20(%rsp),%rbx
            &[0x53],                   // push %rbx
            &CALL,
        ]
        .concat();
        assert_eq!(pushed(&code), Some(32));
    }

    #[test]
    fn a_frame_allocation_or_a_branch_ends_the_walk() {
        // The prologue: push %rbp; sub $0x68,%rsp; push %rbx; call.
        let code = [&[0x55, 0x48, 0x83, 0xec, 0x68, 0x53][..], &CALL].concat();
        assert_eq!(pushed(&code), Some(8));
        // A jump target may follow a jmp: nothing before it counts.
        let code = [&[0x41, 0x54, 0xeb, 0x00, 0x53][..], &CALL].concat();
        assert_eq!(pushed(&code), Some(8));
        // pop / and / mov to rsp end it too.
        for moves in [&[0x5b][..], &[0x48, 0x83, 0xe4, 0xc0], &[0x48, 0x89, 0xec]] {
            let code = [&[0x41, 0x54][..], moves, &[0x53], &CALL].concat();
            assert_eq!(pushed(&code), Some(8), "{moves:x?}");
        }
        // A call with nothing pushed.
        assert_eq!(pushed(&[&[0x48, 0x89, 0xe9][..], &CALL].concat()), Some(0));
    }

    #[test]
    fn the_prologue_is_not_walked_into() {
        // clang's frame of 8 bytes: push %rax; mov %rsp,%rcx; call.
        let code = [&[0x50, 0x48, 0x89, 0xe1][..], &CALL].concat();
        assert_eq!(pushed_before(&code, 0x1000, 0x1001, 0x1009), Some(0));
        // Without the prologue's end, the push would count.
        assert_eq!(pushed(&code), Some(8));
    }

    #[test]
    fn code_that_does_not_end_with_a_call_says_nothing() {
        assert_eq!(pushed(&[0x53, 0x90]), None);
        assert_eq!(pushed(&[]), None);
        // Cut inside an instruction.
        assert_eq!(pushed(&CALL[..3]), None);
    }
}
