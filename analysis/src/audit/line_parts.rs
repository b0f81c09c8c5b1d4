//! Which part of a falsely shared line each thread used, named as a member of the data object
//! (`accs[1]`, `h.partial[0]`) when DWARF describes the object's type: the object's name
//! says what to look at, the members say what to pad.

use cachescope_schema::ThreadId;
use serde::Serialize;

use super::{stack_local, ObjectName};
use crate::pluto::BlockEstimate;
use crate::symbols::{DataObject, Symbolizer};

/// The bytes one thread used on a finding's busiest line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinePart {
    /// The thread.
    pub thread: ThreadId,
    /// Whether it wrote these bytes (else it only read the line).
    pub store: bool,
    /// The variable and member holding them (`accs[1]`, `h.partial[0]`, `y[0..7]` when they
    /// span several elements), when DWARF describes the variable's type; for a heap block,
    /// the pointer or `std::vector` its allocating line declares, if it declares one (the
    /// trace does not record a block's type).
    pub member: Option<String>,
    /// Offset of the first byte from the start of the finding's object, when known and
    /// inside it (a neighbour's bytes on the line have none).
    pub offset: Option<u64>,
    /// Bytes from the first to the last one used.
    pub bytes: u64,
}

/// The parts of the busiest of `blocks` (the most estimated false-sharing events, the lowest
/// address of equals) per thread, in thread order; offsets from the object's start and size
/// (the third argument), when known.
pub(super) fn line_parts(
    object: &ObjectName,
    blocks: &[&BlockEstimate],
    (object_base, object_size): (Option<u64>, Option<u64>),
    symbols: &mut Symbolizer,
) -> Vec<LinePart> {
    let Some(busiest) = blocks
        .iter()
        .max_by_key(|b| (b.phi_prime, b.phi, std::cmp::Reverse(b.block)))
    else {
        return Vec::new();
    };
    let local = (object.kind == "stack")
        .then(|| stack_local(busiest, symbols))
        .flatten();
    let heap = busiest.heap.as_deref().filter(|_| object.kind == "heap");
    let pointer = heap.and_then(|h| Some((h, symbols.heap_variable(h)?)));
    let mut parts: Vec<LinePart> = busiest
        .thread_bytes
        .iter()
        .map(|t| {
            let len = t.end.wrapping_sub(t.start);
            let member = match object.kind {
                // The global at these bytes: a neighbour the linker placed on the line is
                // named as itself.
                "global" => match symbols.data(t.start) {
                    Some(DataObject::Global { offset, .. }) => {
                        symbols.global_shape(t.start).map(|(name, shape)| {
                            name + &shape.member_path(offset, offset.saturating_add(len))
                        })
                    }
                    _ => None,
                },
                "stack" => local.as_ref().and_then(|l| {
                    let offset = t.start.checked_sub(l.base)?;
                    if l.size.is_some_and(|s| offset >= s) {
                        return None;
                    }
                    let path = l
                        .shape
                        .as_ref()
                        .map(|s| s.member_path(offset, offset.saturating_add(len)));
                    Some(l.name.clone() + path.as_deref().unwrap_or(""))
                }),
                // The block through the variable its allocating line declares (`y[3]`).
                "heap" => pointer.as_ref().and_then(|(h, (name, shape))| {
                    let offset = t.start.checked_sub(h.base).filter(|&o| o < h.size)?;
                    Some(name.clone() + &shape.member_path(offset, offset.saturating_add(len)))
                }),
                _ => None,
            };
            LinePart {
                thread: t.thread,
                store: t.store,
                member,
                // Bytes of a neighbour on the line (another global) are not the object's.
                offset: object_base
                    .and_then(|b| t.start.checked_sub(b))
                    .filter(|&o| object_size.is_none_or(|s| o < s)),
                bytes: len,
            }
        })
        .collect();
    parts.sort_by_key(|p| p.thread);
    parts
}

/// `thread 0 writes accs[0] (bytes 0..31), thread 1 writes accs[1] (bytes 32..63)`: the
/// parts for the report, offsets from the object's start.
pub fn describe(parts: &[LinePart]) -> String {
    parts
        .iter()
        .map(|p| {
            let verb = if p.store { "writes" } else { "reads" };
            let range = |o: u64| format!("{o}..{}", o + p.bytes.saturating_sub(1));
            match (&p.member, p.offset) {
                (Some(m), Some(o)) => {
                    format!("thread {} {verb} {m} (bytes {})", p.thread, range(o))
                }
                (Some(m), None) => format!("thread {} {verb} {m}", p.thread),
                (None, Some(o)) => format!("thread {} {verb} bytes {}", p.thread, range(o)),
                (None, None) => format!("thread {} {verb} {} bytes", p.thread, p.bytes),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
