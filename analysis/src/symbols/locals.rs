//! Local variables of a function's stack frame, from DWARF: which variable of the frame holds
//! a stack address, so the false-sharing audit can name `partial` in `main` instead of an
//! address when a parallel region's threads write the elements of a local array.
//!
//! Only variables the compiler keeps at a fixed place in the frame are found: a location that
//! is the frame base plus a constant (`DW_OP_fbreg`), as an expression or as the entry of a
//! location list that covers the call site. The frame base must be one the trace can
//! reconstruct from a recorded frame's bounds (`[sp, cfa)`): the canonical frame address
//! (`DW_OP_call_frame_cfa`, what gcc emits), the stack pointer (`DW_OP_reg7`/`breg7`, clang
//! with optimization: the stack pointer at a call is the frame's `sp`) or the frame pointer
//! (`DW_OP_reg6`/`breg6`, clang without optimization: x86-64's frame pointer prologue leaves
//! it 16 bytes below the CFA). Variables in registers, and frames of other bases, are not
//! named; the audit then names the function whose frame holds the address.

use addr2line::gimli;
use gimli::{AttributeValue, Operation};

use std::sync::Arc;

use super::links::text;
use super::members::{ShapeReader, TypeShape};
use super::module::demangled;

/// How many type links (typedef, qualifiers, array element) are followed to find a size;
/// a cycle in corrupt DWARF must end.
const MAX_TYPE_DEPTH: usize = 16;

/// The register a frame base is relative to, which a recorded frame gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameRegister {
    /// The canonical frame address (the frame's top).
    Cfa,
    /// The stack pointer at the call (the frame's bottom).
    Sp,
    /// The frame pointer (`rbp`), 16 bytes below the CFA after the standard prologue.
    Fp,
}

/// x86-64 DWARF register numbers.
const RBP: u16 = 6;
const RSP: u16 = 7;

/// A variable at a fixed place in a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LocalVar {
    /// Its name in the source.
    pub name: String,
    /// The function that declares it: the frame's, or one inlined into it.
    pub function: Option<String>,
    /// What its address is relative to.
    pub register: FrameRegister,
    /// Its address minus the register's value.
    pub offset: i64,
    /// Its size in bytes, when the type says.
    pub size: Option<u64>,
    /// The alignment declared for it or its type (`alignas`), if any.
    pub align: Option<u64>,
    /// The source file that declares it.
    pub decl_file: Option<String>,
    /// The line that declares it.
    pub decl_line: Option<u32>,
    /// The shape of its type (names its members).
    pub shape: Option<Arc<TypeShape>>,
}

impl LocalVar {
    /// Its start address in a frame with bounds `[sp, cfa)` whose frame pointer is `fp`
    /// (usually the CFA minus 16: see `frames::frame_pointer_rule`).
    pub fn address(&self, sp: u64, cfa: u64, fp: u64) -> u64 {
        let base = match self.register {
            FrameRegister::Cfa => cfa,
            FrameRegister::Sp => sp,
            FrameRegister::Fp => fp,
        };
        base.wrapping_add_signed(self.offset)
    }
}

/// The register and offset of a one-operation expression relative to a frame register.
fn frame_base<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    expr: &gimli::Expression<R>,
) -> Option<(FrameRegister, i64)> {
    let mut ops = expr.0.clone();
    let op = Operation::parse(&mut ops, unit.encoding()).ok()?;
    if !ops.is_empty() {
        return None;
    }
    let reg = |r: gimli::Register| match r.0 {
        RBP => Some(FrameRegister::Fp),
        RSP => Some(FrameRegister::Sp),
        _ => None,
    };
    match op {
        Operation::CallFrameCFA => Some((FrameRegister::Cfa, 0)),
        Operation::Register { register } => Some((reg(register)?, 0)),
        Operation::RegisterOffset {
            register, offset, ..
        } => Some((reg(register)?, offset)),
        _ => None,
    }
}

/// Where a one-operation location expression puts a variable: relative to the frame base
/// (`DW_OP_fbreg`, `None` as register) or to the stack or frame pointer directly
/// (`DW_OP_breg7`/`breg6`: gcc addresses locals of a frame it realigned for `alignas` from
/// the stack pointer).
fn frame_offset<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    expr: &gimli::Expression<R>,
) -> Option<(Option<FrameRegister>, i64)> {
    let mut ops = expr.0.clone();
    let op = Operation::parse(&mut ops, unit.encoding()).ok()?;
    if !ops.is_empty() {
        return None;
    }
    match op {
        Operation::FrameOffset { offset } => Some((None, offset)),
        Operation::RegisterOffset {
            register, offset, ..
        } => match register.0 {
            RBP => Some((Some(FrameRegister::Fp), offset)),
            RSP => Some((Some(FrameRegister::Sp), offset)),
            _ => None,
        },
        _ => None,
    }
}

/// Where `entry`'s location at `pc` puts it (see [`frame_offset`]): its expression, or the
/// entry of its location list that covers `pc`.
fn location_at<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    pc: u64,
) -> Option<(Option<FrameRegister>, i64)> {
    let attr = entry.attr_value(gimli::DW_AT_location).ok()??;
    if let AttributeValue::Exprloc(expr) = &attr {
        return frame_offset(unit, expr);
    }
    let mut list = unit.attr_locations(attr).ok()??;
    while let Ok(Some(l)) = list.next() {
        if l.range.begin <= pc && pc < l.range.end {
            return frame_offset(unit, &l.data);
        }
    }
    None
}

/// Size in bytes and declared alignment of the type `entry` refers to (following typedefs,
/// qualifiers and, for arrays, counting elements).
fn type_layout<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> (Option<u64>, Option<u64>) {
    let mut align = entry
        .attr_value(gimli::DW_AT_alignment)
        .ok()
        .flatten()
        .and_then(|v| v.udata_value());
    let mut count: u64 = 1;
    let Ok(Some(AttributeValue::UnitRef(mut at))) = entry.attr_value(gimli::DW_AT_type) else {
        return (None, align);
    };
    for _ in 0..MAX_TYPE_DEPTH {
        let Ok(ty) = unit.entry(at) else {
            return (None, align);
        };
        if align.is_none() {
            align = ty
                .attr_value(gimli::DW_AT_alignment)
                .ok()
                .flatten()
                .and_then(|v| v.udata_value());
        }
        if ty.tag() == gimli::DW_TAG_array_type {
            match array_elements(unit, &ty) {
                Some(n) => count = count.saturating_mul(n),
                None => return (None, align),
            }
        } else if let Ok(Some(v)) = ty.attr_value(gimli::DW_AT_byte_size) {
            return (v.udata_value().map(|s| s.saturating_mul(count)), align);
        }
        match ty.attr_value(gimli::DW_AT_type) {
            Ok(Some(AttributeValue::UnitRef(next))) => at = next,
            _ => return (None, align),
        }
    }
    (None, align)
}

/// Number of elements of an array type: the product of its subranges' counts.
fn array_elements<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    array: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<u64> {
    let mut tree = unit.entries_tree(Some(array.offset())).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    let mut n: u64 = 1;
    let mut any = false;
    while let Ok(Some(child)) = children.next() {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_subrange_type {
            continue;
        }
        any = true;
        let count = match e.attr_value(gimli::DW_AT_count).ok().flatten() {
            Some(v) => v.udata_value()?,
            None => {
                let upper = e
                    .attr_value(gimli::DW_AT_upper_bound)
                    .ok()
                    .flatten()?
                    .udata_value()?;
                let lower = e
                    .attr_value(gimli::DW_AT_lower_bound)
                    .ok()
                    .flatten()
                    .and_then(|v| v.udata_value())
                    .unwrap_or(0);
                upper.checked_sub(lower)?.checked_add(1)?
            }
        };
        n = n.saturating_mul(count);
    }
    any.then_some(n)
}

/// The path of file `index` of the unit's line program (its directory and the unit's
/// compilation directory prepended when relative).
pub(crate) fn decl_file<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    index: u64,
) -> Option<String> {
    let program = unit.line_program.as_ref()?;
    let header = program.header();
    let file = header.file(index)?;
    let text = |v: AttributeValue<R>| -> Option<String> {
        let s = unit.attr_string(v).ok()?;
        Some(s.to_string_lossy().ok()?.into_owned())
    };
    let mut path = std::path::PathBuf::new();
    if let Some(dir) = unit.comp_dir.as_ref() {
        path.push(dir.to_string_lossy().ok()?.as_ref());
    }
    if let Some(dir) = file.directory(header).and_then(text) {
        path.push(dir);
    }
    path.push(text(file.path_name())?);
    Some(path.to_string_lossy().into_owned())
}

/// The entry `entry`'s `DW_AT_abstract_origin` refers to (an inlined function's or variable's
/// declaration, which holds its name, type and declaring line), else `entry` itself.
fn origin<'u, R: gimli::Reader>(
    unit: gimli::UnitRef<'u, R>,
    entry: &gimli::DebuggingInformationEntry<'_, 'u, R>,
) -> Option<gimli::DebuggingInformationEntry<'u, 'u, R>> {
    let mut current = entry.clone();
    for _ in 0..MAX_TYPE_DEPTH {
        match current.attr_value(gimli::DW_AT_abstract_origin) {
            Ok(Some(AttributeValue::UnitRef(o))) => current = unit.unit.entry(o).ok()?,
            _ => return unit.unit.entry(current.offset()).ok(),
        }
    }
    None
}

/// The `DW_AT_name` of `entry` (or of its abstract origin).
fn name_of<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<String> {
    let e = origin(unit, entry)?;
    let v = e.attr_value(gimli::DW_AT_name).ok()??;
    let s = unit.attr_string(v).ok()?;
    Some(s.to_string_lossy().ok()?.into_owned())
}

/// The name of the function `entry` (a subprogram or an inlined call) is, as its frames are
/// named (addr2line's way): the demangled linkage name, else the plain name, each found through
/// abstract origins and specifications. An inlined member function's abstract instance has its
/// name only on the declaration in the class, and an out-of-line one has it there too.
fn function_name<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<String> {
    let linkage = text(unit.dwarf, unit.unit, entry, gimli::DW_AT_linkage_name)
        .or_else(|| text(unit.dwarf, unit.unit, entry, gimli::DW_AT_MIPS_linkage_name));
    match linkage {
        Some(l) => Some(demangled(l).into_owned()),
        None => text(unit.dwarf, unit.unit, entry, gimli::DW_AT_name),
    }
}

/// The variables and parameters at a fixed frame offset of the function whose code holds
/// `pc` (in the unit `unit`, which holds `pc`), including those of its lexical blocks and of
/// functions inlined into it (they live in the same frame). Empty when the function's frame
/// base is not one a recorded frame gives.
pub(crate) fn locals_at<R: gimli::Reader>(unit: gimli::UnitRef<'_, R>, pc: u64) -> Vec<LocalVar> {
    let mut out = Vec::new();
    let mut shapes = ShapeReader::default();
    let mut entries = unit.entries();
    // Depth of the subprogram being read, once found; entries deeper than it are its own.
    let mut depth: isize = 0;
    let mut inside: Option<(isize, FrameRegister, i64)> = None;
    // The scopes around the entry being read: the subprogram, then lexical blocks and
    // functions inlined into it, with their depths, whether their code holds `pc` (a scope
    // without code ranges is taken to) and, for functions, their names. Only variables of
    // scopes that hold `pc` are live at the recorded call: scopes that do not (another
    // function inlined into the same frame) may reuse the same stack bytes.
    let mut scopes: Vec<(isize, bool, Option<String>)> = Vec::new();
    while let Ok(Some((delta, entry))) = entries.next_dfs() {
        depth += delta;
        if let Some((d, _, _)) = inside {
            if depth <= d {
                break;
            }
        }
        while scopes.last().is_some_and(|&(d, _, _)| d >= depth) {
            scopes.pop();
        }
        match (entry.tag(), inside) {
            (gimli::DW_TAG_subprogram, None) => {
                if covers(unit, entry, pc) != Some(true) {
                    continue;
                }
                let base = match entry.attr_value(gimli::DW_AT_frame_base) {
                    Ok(Some(AttributeValue::Exprloc(expr))) => frame_base(unit, &expr),
                    _ => None,
                };
                match base {
                    Some((register, offset)) => inside = Some((depth, register, offset)),
                    None => break,
                }
                scopes.push((depth, true, function_name(unit, entry)));
            }
            (gimli::DW_TAG_inlined_subroutine, Some(_)) => {
                let live = covers(unit, entry, pc).unwrap_or(true);
                scopes.push((depth, live, function_name(unit, entry)));
            }
            (gimli::DW_TAG_lexical_block, Some(_)) => {
                let live = covers(unit, entry, pc).unwrap_or(true);
                scopes.push((depth, live, None));
            }
            // A function nested in this one (gcc's outlined parallel regions, `f._omp_fn.0`,
            // are children of `f`) has its own frame: its variables are not this frame's.
            (gimli::DW_TAG_subprogram, Some(_)) => {
                scopes.push((depth, false, None));
            }
            (gimli::DW_TAG_variable | gimli::DW_TAG_formal_parameter, Some((_, reg, base))) => {
                if !scopes.iter().all(|&(_, live, _)| live) {
                    continue;
                }
                let Some((direct, offset)) = location_at(unit, entry, pc) else {
                    continue;
                };
                let (register, offset) = match direct {
                    Some(r) => (r, offset),
                    None => (reg, base.saturating_add(offset)),
                };
                let Some(name) = name_of(unit, entry) else {
                    continue;
                };
                let declaration = origin(unit, entry).unwrap_or_else(|| entry.clone());
                let (size, align) = type_layout(unit, &declaration);
                let shape = shapes.of_variable(unit, &declaration);
                let decl_file = match declaration.attr_value(gimli::DW_AT_decl_file) {
                    Ok(Some(AttributeValue::FileIndex(i))) => decl_file(unit, i),
                    Ok(Some(v)) => v.udata_value().and_then(|i| decl_file(unit, i)),
                    _ => None,
                };
                let decl_line = declaration
                    .attr_value(gimli::DW_AT_decl_line)
                    .ok()
                    .flatten()
                    .and_then(|v| v.udata_value())
                    .and_then(|l| u32::try_from(l).ok());
                out.push(LocalVar {
                    name,
                    function: scopes.iter().rev().find_map(|(_, _, f)| f.clone()),
                    register,
                    offset,
                    size,
                    align,
                    decl_file,
                    decl_line,
                    shape,
                });
            }
            _ => {}
        }
    }
    out
}

/// Whether `entry`'s code ranges hold `pc`; `None` when it has none.
pub(super) fn covers<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    pc: u64,
) -> Option<bool> {
    let mut ranges = unit.die_ranges(entry).ok()?;
    let mut any = false;
    while let Ok(Some(r)) = ranges.next() {
        if r.begin <= pc && pc < r.end {
            return Some(true);
        }
        any = true;
    }
    any.then_some(false)
}
