//! Memory instructions in instrumented code that the recorder will never see, found by
//! decoding the code `cachescope cc` just built, so that the build can say so instead of the
//! trace silently lacking them.
//!
//! What neither compiler's ThreadSanitizer instrumentation reports (docs/tracer.md, "What the
//! instrumentation cannot see"): gathers and scatters, masked loads and stores, and
//! non-temporal (streaming) stores and loads, written as intrinsics. With clang 14 also every
//! load or store wider than 16 bytes (AVX-256/512; gcc reports those as ranges). Register
//! spills (addressed from the stack pointer) are the compiler's own and are not counted.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};
use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};

/// A kind of memory instruction the recorder does not see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Blind {
    /// A load or store of 32 or 64 bytes in clang-built code.
    Wide,
    /// A gather or scatter (vector of addresses).
    GatherScatter,
    /// A masked load or store.
    Masked,
    /// A non-temporal (streaming) store or load.
    Streaming,
}

impl fmt::Display for Blind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Blind::Wide => {
                "loads/stores wider than 16 bytes (clang's instrumentation skips them; build \
                 this code with gcc, which records them)"
            }
            Blind::GatherScatter => "gathers/scatters",
            Blind::Masked => "masked loads/stores",
            Blind::Streaming => "non-temporal (streaming) loads/stores",
        })
    }
}

/// Unrecorded instructions of one kind in one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlindSpot {
    /// What kind.
    pub kind: Blind,
    /// The function they are in (its symbol), or `?` outside any.
    pub function: String,
    /// How many instructions.
    pub count: usize,
}

/// The kind of unrecorded memory instruction `i` is, if it is one.
fn classify(i: &Instruction, clang: bool) -> Option<Blind> {
    if !(0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory) {
        return None;
    }
    if i.is_vsib() {
        return Some(Blind::GatherScatter);
    }
    use Mnemonic::*;
    match i.mnemonic() {
        Vmaskmovps | Vmaskmovpd | Vpmaskmovd | Vpmaskmovq => return Some(Blind::Masked),
        Movnti | Movntps | Movntpd | Movntdq | Movntq | Movntss | Movntsd | Movntdqa | Vmovntps
        | Vmovntpd | Vmovntdq | Vmovntdqa => return Some(Blind::Streaming),
        _ => {}
    }
    if i.op_mask() != Register::None {
        return Some(Blind::Masked);
    }
    let spill = matches!(i.memory_base(), Register::RSP | Register::ESP);
    (clang && !spill && i.memory_size().size() > 16).then_some(Blind::Wide)
}

/// Decodes every code section of the object file or executable at `path` and lists its
/// memory instructions the recorder will not see, per kind and function. `clang`: the code
/// was instrumented by clang. A file that is not x86-64 ELF gives an empty list.
pub fn scan(path: &Path, clang: bool) -> Result<Vec<BlindSpot>, String> {
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = object::File::parse(&*data).map_err(|e| format!("{}: {e}", path.display()))?;
    if file.architecture() != object::Architecture::X86_64 {
        return Ok(Vec::new());
    }
    // Functions by section, sorted by address, to name each instruction's function.
    let mut functions: BTreeMap<usize, Vec<(u64, String)>> = BTreeMap::new();
    for sym in file.symbols() {
        if sym.kind() != SymbolKind::Text {
            continue;
        }
        if let (Some(section), Ok(name)) = (sym.section_index(), sym.name()) {
            functions
                .entry(section.0)
                .or_default()
                .push((sym.address(), name.to_string()));
        }
    }
    for list in functions.values_mut() {
        list.sort();
    }
    let mut counts: BTreeMap<(Blind, String), usize> = BTreeMap::new();
    for section in file.sections() {
        if section.kind() != SectionKind::Text {
            continue;
        }
        let Ok(code) = section.data() else { continue };
        let names = functions.get(&section.index().0);
        let mut decoder = Decoder::with_ip(64, code, section.address(), DecoderOptions::NONE);
        let mut instr = Instruction::default();
        while decoder.can_decode() {
            decoder.decode_out(&mut instr);
            let Some(kind) = classify(&instr, clang) else {
                continue;
            };
            let ip = instr.ip();
            let function = names
                .and_then(|n| {
                    let at = n.partition_point(|(a, _)| *a <= ip);
                    at.checked_sub(1).map(|k| n[k].1.clone())
                })
                .unwrap_or_else(|| "?".to_string());
            *counts.entry((kind, function)).or_insert(0) += 1;
        }
    }
    Ok(counts
        .into_iter()
        .map(|((kind, function), count)| BlindSpot {
            kind,
            function,
            count,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Instruction {
        Decoder::new(64, bytes, DecoderOptions::NONE).decode()
    }

    #[test]
    fn unrecorded_instructions_are_classified() {
        // vmovupd ymm0, [rdi]: wide for clang only.
        let wide = decode(&[0xc5, 0xfd, 0x10, 0x07]);
        assert_eq!(classify(&wide, true), Some(Blind::Wide));
        assert_eq!(classify(&wide, false), None);
        // vmovupd [rsp+0x20], ymm0: a spill.
        let spill = decode(&[0xc5, 0xfd, 0x11, 0x44, 0x24, 0x20]);
        assert_eq!(classify(&spill, true), None);
        // movupd xmm0, [rdi]: 16 bytes are recorded.
        let sse = decode(&[0x66, 0x0f, 0x10, 0x07]);
        assert_eq!(classify(&sse, true), None);
        // vgatherdpd ymm0, [rdi+xmm1*8], ymm2.
        let gather = decode(&[0xc4, 0xe2, 0xed, 0x92, 0x04, 0xcf]);
        assert_eq!(classify(&gather, false), Some(Blind::GatherScatter));
        // vmaskmovpd ymm0, ymm1, [rdi].
        let masked = decode(&[0xc4, 0xe2, 0x75, 0x2d, 0x07]);
        assert_eq!(classify(&masked, false), Some(Blind::Masked));
        // vmovntpd [rdi], ymm0.
        let stream = decode(&[0xc5, 0xfd, 0x2b, 0x07]);
        assert_eq!(classify(&stream, false), Some(Blind::Streaming));
        // add eax, 1: no memory.
        assert_eq!(classify(&decode(&[0x83, 0xc0, 0x01]), true), None);
    }
}
