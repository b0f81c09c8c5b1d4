//! Which parts of a falsely shared line each thread used, named as members of the data
//! objects there (`accs[1]`, `h.partial[0]`) when DWARF describes their types: the object's
//! name says what to look at, the members say what to pad.

use std::sync::Arc;

use cachescope_schema::ThreadId;
use serde::Serialize;

use super::ObjectName;
use crate::heap::HeapBlock;
use crate::pluto::{BlockEstimate, ThreadBytes};
use crate::stack::StackSlot;
#[cfg(doc)]
use crate::symbols::HeapVariable;
use crate::symbols::{DataObject, Symbolizer, TypeShape};

/// Bytes one thread used on a finding's busiest line, within one member of one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinePart {
    /// The thread.
    pub thread: ThreadId,
    /// Whether it wrote these bytes (else it only read them).
    pub store: bool,
    /// The variable and member holding them (`accs[1]`, `h.partial[0]`, `y[0..7]` when they
    /// span several elements), when DWARF describes the variable's type; a neighbour on the
    /// line (another global or local) is named as itself. For a heap block, the pointer or
    /// `std::vector` its allocating line declares, if it declares one (the trace does not
    /// record a block's type).
    pub member: Option<String>,
    /// Offset of the first byte from the start of the finding's object, when known and
    /// inside it (a neighbour's bytes on the line have none).
    pub offset: Option<u64>,
    /// Bytes from the first to the last one used.
    pub bytes: u64,
}

/// Parts shown per thread in the report sentence; JSON and SARIF's properties have all.
const SHOWN_PER_THREAD: usize = 4;

/// The parts of the busiest of `blocks` (the most estimated false-sharing events, the lowest
/// address of equals): per thread, in thread order, what it wrote and what it only read, in
/// address order, split at objects and their members; offsets from the finding object's
/// start and size (the third argument), when known.
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
    let mut holders = Holders::new(object.kind, busiest, symbols);
    let mut parts = Vec::new();
    for run in &busiest.thread_bytes {
        for (member, start, end) in holders.split(run) {
            parts.push(LinePart {
                thread: run.thread,
                store: run.store,
                member,
                // Bytes of a neighbour on the line (another global) are not the object's.
                offset: object_base
                    .and_then(|b| start.checked_sub(b))
                    .filter(|&o| object_size.is_none_or(|s| o < s)),
                bytes: end - start,
            });
        }
    }
    // Stable: each thread's parts stay in address order.
    parts.sort_by_key(|p| p.thread);
    parts
}

/// An object's name, its type's shape when known, and whether the name is a pointer to the
/// one object (see [`HeapVariable`]).
type NamedShape = (String, Option<Arc<TypeShape>>, bool);

/// An object on the line: its name, where it starts, its size and its type's shape.
struct Holder {
    name: String,
    base: u64,
    size: Option<u64>,
    shape: Option<Arc<TypeShape>>,
    /// `name` is a pointer to this one object: its members are `name->member`.
    single: bool,
}

impl Holder {
    /// The name of a part of the object, given its [`TypeShape::parts`] suffix: `accs[1].sum`,
    /// `node->id`, `*node`.
    fn part_name(&self, suffix: &str) -> String {
        if !self.single {
            return format!("{}{suffix}", self.name);
        }
        match suffix.strip_prefix('.') {
            Some(member) => format!("{}->{member}", self.name),
            None if suffix.is_empty() => format!("*{}", self.name),
            None => format!("(*{}){suffix}", self.name),
        }
    }
}

/// Finds the object holding an address on the busiest line, as the finding's kind allows:
/// globals from the symbol table, locals of the recorded frame, the heap blocks the block
/// estimate names.
struct Holders<'a> {
    kind: &'static str,
    block: &'a BlockEstimate,
    symbols: &'a mut Symbolizer,
    /// The heap blocks and the variables their allocating lines declare (with their shapes),
    /// looked up once; a neighbour no variable names has its allocation site's name.
    heap: Vec<(Arc<HeapBlock>, Option<NamedShape>)>,
}

impl<'a> Holders<'a> {
    fn new(kind: &'static str, block: &'a BlockEstimate, symbols: &'a mut Symbolizer) -> Self {
        let mut heap = Vec::new();
        if kind == "heap" {
            if let Some(h) = &block.heap {
                let variable = symbols
                    .heap_variable(h)
                    .map(|v| (v.name, Some(Arc::new(v.shape)), v.single));
                heap.push((Arc::clone(h), variable));
            }
            // A neighbour no variable names is named by where it was allocated: "reads 8
            // bytes" alone would not say of what.
            for h in &block.heap_neighbours {
                let variable = match symbols.heap_variable(h) {
                    Some(v) => (v.name, Some(Arc::new(v.shape)), v.single),
                    None => (symbols.heap_block_name(h), None, false),
                };
                heap.push((Arc::clone(h), Some(variable)));
            }
        }
        Holders {
            kind,
            block,
            symbols,
            heap,
        }
    }

    /// The object holding `addr`, if one is known.
    fn at(&mut self, addr: u64) -> Option<Holder> {
        match self.kind {
            "global" => {
                let Some(DataObject::Global {
                    name, offset, size, ..
                }) = self.symbols.data(addr)
                else {
                    return None;
                };
                let base = addr - offset;
                Some(match self.symbols.global_shape(addr) {
                    Some((name, shape)) => Holder {
                        name,
                        base,
                        size: Some(size),
                        shape: Some(shape),
                        single: false,
                    },
                    None => Holder {
                        name: name.to_string(),
                        base,
                        size: Some(size),
                        shape: None,
                        single: false,
                    },
                })
            }
            "stack" => {
                let frame = self.block.stack.as_deref()?;
                if !(frame.sp..frame.cfa).contains(&addr) {
                    return None;
                }
                let slot = StackSlot { addr, ..*frame };
                let local = self.symbols.stack_object(&slot).local?;
                Some(Holder {
                    name: local.name,
                    base: local.base,
                    size: local.size,
                    shape: local.shape,
                    single: false,
                })
            }
            "heap" => {
                let (h, variable) = self
                    .heap
                    .iter()
                    .find(|(h, _)| (h.base..h.base.saturating_add(h.size)).contains(&addr))?;
                let (name, shape, single) = variable.clone()?;
                Some(Holder {
                    name,
                    base: h.base,
                    size: Some(h.size),
                    shape,
                    single,
                })
            }
            _ => None,
        }
    }

    /// `run` split at the objects and members it covers: (name, start, end), in address
    /// order; bytes no known object holds have no name.
    fn split(&mut self, run: &ThreadBytes) -> Vec<(Option<String>, u64, u64)> {
        let mut out = Vec::new();
        let mut at = run.start;
        while at < run.end {
            let Some(h) = self.at(at) else {
                // Unnamed up to the next byte an object holds.
                let next = (at + 1..run.end)
                    .find(|&a| self.at(a).is_some())
                    .unwrap_or(run.end);
                out.push((None, at, next));
                at = next;
                continue;
            };
            let end = h
                .size
                .map_or(run.end, |s| run.end.min(h.base.saturating_add(s)));
            let end = end.max(at + 1);
            match &h.shape {
                Some(shape) => {
                    for (suffix, s, e) in shape.parts(at - h.base, end - h.base) {
                        out.push((Some(h.part_name(&suffix)), h.base + s, h.base + e));
                    }
                }
                None => out.push((Some(h.name.clone()), at, end)),
            }
            at = end;
        }
        out
    }
}

/// `thread 0 writes accs[0] (bytes 0..31); thread 1 writes accs[1] (bytes 32..63), reads
/// n`: the parts for the report, offsets from the object's start, at most
/// [`SHOWN_PER_THREAD`] per thread.
pub fn describe(parts: &[LinePart]) -> String {
    let mut threads: Vec<String> = Vec::new();
    for group in parts.chunk_by(|a, b| a.thread == b.thread) {
        let mut text = format!("thread {}", group[0].thread);
        let mut verb = None;
        for (i, p) in group.iter().take(SHOWN_PER_THREAD).enumerate() {
            let range = |o: u64| format!("{o}..{}", o + p.bytes.saturating_sub(1));
            let what = match (&p.member, p.offset) {
                (Some(m), Some(o)) => format!("{m} (bytes {})", range(o)),
                // A neighbour on the line: its own offsets would read as the object's, but
                // how much of the line it holds still tells what padding must cover.
                (Some(m), None) => format!("{m} ({})", byte_count(p.bytes)),
                (None, Some(o)) => format!("bytes {}", range(o)),
                // Not the finding's object, and no known object's either.
                (None, None) => format!("{} of a neighbour", byte_count(p.bytes)),
            };
            let sep = if i == 0 { " " } else { ", " };
            if verb == Some(p.store) {
                text += &format!("{sep}{what}");
            } else {
                let v = if p.store { "writes" } else { "reads" };
                text += &format!("{sep}{v} {what}");
                verb = Some(p.store);
            }
        }
        if group.len() > SHOWN_PER_THREAD {
            text += &format!(" and {} more parts", group.len() - SHOWN_PER_THREAD);
        }
        threads.push(text);
    }
    threads.join("; ")
}

/// `1 byte`, `8 bytes`.
fn byte_count(n: u64) -> String {
    if n == 1 {
        "1 byte".to_owned()
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pointer_to_one_object_names_its_members_through_the_pointer() {
        let holder = |single| Holder {
            name: "node".into(),
            base: 0,
            size: Some(48),
            shape: None,
            single,
        };
        assert_eq!(holder(true).part_name(".vals[1].i"), "node->vals[1].i");
        assert_eq!(holder(true).part_name(""), "*node");
        assert_eq!(holder(true).part_name("[1]"), "(*node)[1]");
        assert_eq!(holder(false).part_name("[0].id"), "node[0].id");
    }

    #[test]
    fn parts_without_a_name_say_they_are_a_neighbours() {
        let part = |member: Option<&str>, offset, store| LinePart {
            thread: 1,
            store,
            member: member.map(str::to_owned),
            offset,
            bytes: 8,
        };
        let text = describe(&[
            part(None, None, false),
            part(Some("objs[0].b"), Some(16), true),
        ]);
        assert_eq!(
            text,
            "thread 1 reads 8 bytes of a neighbour, writes objs[0].b (bytes 16..23)"
        );
        // A named neighbour says how much of the line it holds, without offsets (they
        // would read as the finding object's).
        let text = describe(&[
            part(Some("first"), None, true),
            LinePart {
                bytes: 1,
                ..part(Some("flag"), None, false)
            },
        ]);
        assert_eq!(text, "thread 1 writes first (8 bytes), reads flag (1 byte)");
    }
}
