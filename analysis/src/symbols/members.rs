//! The layout of a variable's type, from DWARF, to name the member a byte range of it is:
//! `accs[1]`, `h.partial[0]`, `grid[2][5].count`. A false-sharing finding names the data
//! object; which of its members each thread writes is what says what to pad.
//!
//! A type is read into a small owned tree ([`TypeShape`]): typedefs and qualifiers are
//! followed, structs, classes and unions list their data members (base classes as members
//! without a name, since their fields are the object's own), arrays keep their dimensions and
//! one element's shape. The tree is bounded ([`MAX_NODES`], [`MAX_DEPTH`]): a type too large
//! or too deep to read, or corrupt DWARF, only makes the name stop at the part read.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use addr2line::gimli;
use gimli::AttributeValue;

use super::alignment::{for_each_global_variable, specification};
use super::locals::decl_file;

/// Types (members and array elements counted) read for one variable, at most.
const MAX_NODES: usize = 1024;

/// Parts a byte range is named as, at most: more are named as the range of the whole object.
const MAX_PARTS: usize = 16;

/// Nesting read, at most (typedef and qualifier links count too): real types need a few, and
/// a cycle in corrupt DWARF must end.
const MAX_DEPTH: usize = 24;

/// The layout of a type, as far as naming members needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeShape {
    /// Its size in bytes, when DWARF gives it.
    pub size: Option<u64>,
    /// What it is made of.
    pub kind: ShapeKind,
}

/// What a [`TypeShape`] is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShapeKind {
    /// A scalar, pointer, enum or anything not looked into.
    Leaf,
    /// An array: its element count (0 when DWARF does not say) and one element. A
    /// multidimensional array is an array of arrays, as in C: `long data[2][4]` is two rows of
    /// four, and a row is `data[1]`.
    Array {
        /// Elements.
        count: u64,
        /// The element.
        element: Arc<TypeShape>,
    },
    /// A struct, class or union: its data members and base classes.
    Record(Vec<Member>),
}

/// A data member (or base class) of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its name; `None` for a base class or an anonymous struct or union, whose members are
    /// named as the enclosing object's.
    pub name: Option<String>,
    /// Its offset in the record.
    pub offset: u64,
    /// Its type.
    pub shape: Arc<TypeShape>,
}

impl TypeShape {
    /// A heap block of `bytes` bytes holding `element`s: an array of them, after the count
    /// `new[]` stores in front of an array of a type with a destructor (the Itanium C++ ABI's
    /// cookie, the larger of 8 bytes and the element's alignment) when the size says there is
    /// one: `n * size` plus 8, 16, 32 or 64 bytes; or, when `destructor` says the element
    /// type has one, a size that is a whole number of elements of at most 8 bytes, or of an
    /// over-aligned type as large as its alignment (16, 32, 64: `alignas(16) struct { long
    /// a, b; }`), whose cookie is one element long.
    pub fn heap_array_of(element: Arc<TypeShape>, bytes: u64, destructor: bool) -> TypeShape {
        let size = element.size.filter(|&s| s > 0);
        let rest = size.map_or(0, |s| bytes % s);
        let cookie = match (rest, size) {
            (8 | 16 | 32 | 64, _) => rest,
            (0, Some(s)) if destructor && (8 % s == 0 || matches!(s, 16 | 32 | 64)) => s.max(8),
            _ => 0,
        };
        if cookie == 0 || cookie >= bytes {
            return TypeShape::array_of(element, bytes);
        }
        TypeShape {
            size: Some(bytes),
            kind: ShapeKind::Record(vec![Member {
                name: None,
                offset: cookie,
                shape: Arc::new(TypeShape::array_of(element, bytes - cookie)),
            }]),
        }
    }

    /// This record with its flexible array member (`struct hist { long n; long bins[]; }`, the
    /// last member, an array DWARF gives no count, or the "struct hack"'s one-element array:
    /// of bytes, or in a block that is no whole number of the structs) grown to fill `bytes`
    /// bytes: a heap block
    /// of one such struct, `bins` with as many elements as fit. `None` for any other type.
    pub fn with_flexible_tail(&self, bytes: u64) -> Option<TypeShape> {
        let ShapeKind::Record(members) = &self.kind else {
            return None;
        };
        let last = members.iter().max_by_key(|m| m.offset)?;
        let ShapeKind::Array { count, element } = &last.shape.kind else {
            return None;
        };
        // C99's `bins[]` and GNU's `bins[0]` have no count; the older "struct hack"'s
        // `data[1]` is one when the block is no whole number of the structs.
        let size = self.size?;
        // `char data[1]` last is the hack whatever the size; `long v[1]` only in a block no
        // whole number of the structs fills.
        let hack =
            *count == 1 && size > 0 && (element.size == Some(1) || !bytes.is_multiple_of(size));
        if !(*count == 0 || hack)
            || bytes < size
            || bytes < last.offset
            || element.size.is_none_or(|s| s == 0)
        {
            return None;
        }
        let tail = Member {
            shape: Arc::new(TypeShape::array_of(
                Arc::clone(element),
                bytes - last.offset,
            )),
            ..last.clone()
        };
        let mut grown: Vec<Member> = members.iter().filter(|m| *m != last).cloned().collect();
        grown.push(tail);
        Some(TypeShape {
            size: Some(bytes),
            kind: ShapeKind::Record(grown),
        })
    }

    /// One object of type `object`, `at` bytes into a heap block of `bytes` bytes: the object
    /// itself when it fills the block, else a block holding it whose further bytes no member
    /// names (`Base *b = new Derived`: the derived class's members, which the pointer's type
    /// does not tell; `at` is where the derived class keeps its `Base`).
    pub fn object_in(object: Arc<TypeShape>, at: u64, bytes: u64) -> TypeShape {
        if at == 0 && object.size.is_none_or(|s| s >= bytes) {
            return (*object).clone();
        }
        TypeShape {
            size: Some(bytes),
            kind: ShapeKind::Record(vec![Member {
                name: None,
                offset: at,
                shape: object,
            }]),
        }
    }

    /// Whether objects of this type hold a vtable pointer (`_vptr.Shape`, clang's
    /// `_vptr$Shape`), theirs or a base class's: a polymorphic class, whose objects from
    /// `new` may be of a derived class.
    pub fn has_vtable(&self) -> bool {
        let ShapeKind::Record(members) = &self.kind else {
            return false;
        };
        members.iter().any(|m| match &m.name {
            Some(name) => name.starts_with("_vptr"),
            None => m.shape.has_vtable(),
        })
    }

    /// An array of `bytes` bytes of `element`s (a heap block of them).
    pub fn array_of(element: Arc<TypeShape>, bytes: u64) -> TypeShape {
        let count = element.size.filter(|&s| s > 0).map_or(0, |s| bytes / s);
        TypeShape {
            size: Some(bytes),
            kind: ShapeKind::Array { count, element },
        }
    }

    /// The members of an object of this type that bytes `[start, end)` from its start are, in
    /// address order, each as a suffix for the object's name and the bytes of it: `[1]`,
    /// `.partial[0]`, `[2].sum_x`; a range of elements `[0..7]` when the bytes span several;
    /// `.head` and `.tail` when they span two members of a struct; an empty suffix for the
    /// whole object or bytes no member holds (padding). Bytes past the type's size are left
    /// out (they are a neighbour's). Of a union's members, the smallest that holds the bytes
    /// names them: a 4-byte write to `union { uint64_t whole; uint32_t half[2]; }` is `half`.
    pub fn parts(&self, start: u64, end: u64) -> Vec<(String, u64, u64)> {
        let end = self.size.map_or(end, |s| end.min(s));
        let mut out = Vec::new();
        if start < end {
            self.parts_into(start, end, (String::new(), true), 0, &mut out);
        }
        if out.len() > MAX_PARTS {
            out = vec![(String::new(), start, end)];
        }
        out
    }

    /// The size of the smallest part of this type (itself, a member, an element, at any depth)
    /// that holds all of bytes `[start, end)`: how tightly a union member names them.
    fn fit(&self, start: u64, end: u64, depth: usize) -> u64 {
        let own = self.size.unwrap_or(u64::MAX);
        if depth >= MAX_DEPTH {
            return own;
        }
        match &self.kind {
            ShapeKind::Leaf => own,
            ShapeKind::Array { element, .. } => match element.size.filter(|&s| s > 0) {
                Some(s) if start / s == (end - 1) / s => {
                    let at = start / s * s;
                    element.fit(start - at, end - at, depth + 1)
                }
                _ => own,
            },
            ShapeKind::Record(members) => members
                .iter()
                .filter(|m| {
                    let size = m.shape.size.unwrap_or(0);
                    m.offset <= start && end <= m.offset.saturating_add(size)
                })
                .map(|m| m.shape.fit(start - m.offset, end - m.offset, depth + 1))
                .min()
                .unwrap_or(own),
        }
    }

    /// [`parts`](Self::parts) of `[start, end)`, named `prefix` + member, appended to `out`;
    /// `named` says whether this level added to the prefix: all of a base class or of a
    /// std::array's elements is named by its members, not as the enclosing object.
    fn parts_into(
        &self,
        start: u64,
        end: u64,
        (prefix, named): (String, bool),
        depth: usize,
        out: &mut Vec<(String, u64, u64)>,
    ) {
        let whole = named && self.size.is_some_and(|s| start == 0 && end >= s);
        if whole || depth >= MAX_DEPTH || out.len() > MAX_PARTS {
            out.push((prefix, start, end));
            return;
        }
        match &self.kind {
            ShapeKind::Leaf => out.push((prefix, start, end)),
            ShapeKind::Array { element, .. } => {
                let Some(size) = element.size.filter(|&s| s > 0) else {
                    out.push((prefix, start, end));
                    return;
                };
                let (first, last) = (start / size, (end - 1) / size);
                // One element's bytes, named by its members.
                let element_parts = |i: u64, lo: u64, hi: u64, out: &mut Vec<_>| {
                    let at = i * size;
                    let mut inner = Vec::new();
                    element.parts_into(
                        lo - at,
                        hi - at,
                        (format!("{prefix}[{i}]"), true),
                        depth + 1,
                        &mut inner,
                    );
                    out.extend(inner.into_iter().map(|(n, s, e)| (n, s + at, e + at)));
                };
                if first == last {
                    element_parts(first, start, end, out);
                    return;
                }
                // Whole elements are a range; a part of one at either end is its members:
                // `[0].val, [1..2], [3].key`, not `[0..3]`, which would claim all of both ends.
                let mut whole = first..=last;
                if !start.is_multiple_of(size) {
                    element_parts(first, start, (first + 1) * size, out);
                    whole = first + 1..=last;
                }
                let tail = !end.is_multiple_of(size);
                if tail {
                    whole = *whole.start()..=last - 1;
                }
                match (*whole.start(), *whole.end()) {
                    (a, b) if a < b => {
                        out.push((format!("{prefix}[{a}..{b}]"), a * size, (b + 1) * size))
                    }
                    (a, b) if a == b => element_parts(a, a * size, (a + 1) * size, out),
                    _ => {}
                }
                if tail {
                    element_parts(last, last * size, end, out);
                }
            }
            ShapeKind::Record(members) => {
                let span =
                    |m: &Member| (m.offset, m.offset.saturating_add(m.shape.size.unwrap_or(0)));
                // The member holding all the bytes (one, but in a union: the one with the
                // tightest fit, `i[3]` rather than `l[1]` for bytes 12..15; the first of equals).
                let holder = members
                    .iter()
                    .filter(|m| {
                        let (lo, hi) = span(m);
                        lo <= start && end <= hi
                    })
                    .min_by_key(|m| m.shape.fit(start - m.offset, end - m.offset, depth + 1));
                let chosen: Vec<&Member> = match holder {
                    Some(m) => vec![m],
                    // Else each member the bytes touch, in address order; of overlapping ones
                    // (a union's), the first.
                    None => {
                        let mut touched: Vec<&Member> = members
                            .iter()
                            .filter(|m| {
                                let (lo, hi) = span(m);
                                lo < end && start < hi
                            })
                            .collect();
                        touched.sort_by_key(|m| m.offset);
                        let mut kept: Vec<&Member> = Vec::new();
                        for m in touched {
                            if kept.last().is_none_or(|k| span(k).1 <= m.offset) {
                                kept.push(m);
                            }
                        }
                        kept
                    }
                };
                if chosen.is_empty() {
                    out.push((prefix, start, end));
                    return;
                }
                // Bytes between the chosen members (padding, a member not read) are the
                // enclosing object's: a run is named whole, never with a hole.
                let mut covered = start;
                for m in chosen {
                    let (lo, hi) = span(m);
                    if covered < lo {
                        out.push((prefix.clone(), covered, lo));
                    }
                    covered = covered.max(hi.min(end));
                    let name = match m.name.as_deref() {
                        // A base class or anonymous member; a std::array's one member.
                        None | Some("_M_elems" | "__elems_") => (prefix.clone(), false),
                        Some(n) => (format!("{prefix}.{n}"), true),
                    };
                    let mut inner = Vec::new();
                    m.shape.parts_into(
                        start.max(lo) - lo,
                        end.min(hi) - lo,
                        name,
                        depth + 1,
                        &mut inner,
                    );
                    out.extend(inner.into_iter().map(|(n, s, e)| (n, s + lo, e + lo)));
                }
                if covered < end {
                    out.push((prefix, covered, end));
                }
            }
        }
    }
}

/// The variable a heap block's allocating line declares to hold it, and the block's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeapVariable {
    /// The variable's name (`accs`, `node`).
    pub name: String,
    /// The block's shape: an array of what the variable points to, or that one object when
    /// `single`.
    pub shape: TypeShape,
    /// The variable is a pointer to one object the size of the block (`Node *node = new
    /// Node`): its members are `node->id`.
    pub single: bool,
}

/// Link-time start address of each global or static variable → its name in the source and
/// its type's shape. Units or entries that cannot be read are skipped: a missing entry only
/// means findings on the variable name no member.
pub(crate) fn global_shapes<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
) -> BTreeMap<u64, (String, Arc<TypeShape>)> {
    let mut out = BTreeMap::new();
    let mut reader = ShapeReader::default();
    for_each_global_variable(dwarf, |plain, entry, addr| {
        let unit = gimli::UnitRef::new(dwarf, plain);
        // A C++ static member defined apart from its declaration has its name and type on the
        // declaration.
        let declared = std::iter::once(entry.clone()).chain(specification(plain, entry));
        let mut name = None;
        let mut shape = None;
        for e in declared {
            if name.is_none() {
                name = e
                    .attr_value(gimli::DW_AT_name)
                    .ok()
                    .flatten()
                    .and_then(|v| unit.attr_string(v).ok())
                    .and_then(|s| s.to_string_lossy().ok().map(|s| s.into_owned()));
            }
            if shape.is_none() {
                shape = reader.of_variable(unit, &e);
            }
        }
        if let (Some(name), Some(shape)) = (name, shape) {
            out.entry(addr).or_insert((name, shape));
        }
    });
    out
}

/// A variable an allocating line declares to hold a heap block, and what DWARF says of the
/// type it points to.
#[derive(Debug, Clone)]
pub(crate) struct DeclaredPointer {
    /// The variable's name (`accs`, `node`).
    pub name: String,
    /// The shape of what it points to (a `std::vector`'s element type).
    pub shape: Arc<TypeShape>,
    /// The variable is a pointer or a `std::unique_ptr<T>` (not a `std::vector` or
    /// `unique_ptr<T[]>`).
    pub pointer: bool,
    /// The type pointed to has a destructor (its own, a member's or a base's): `new[]` stores
    /// the element count in front of an array of it.
    pub destructor: bool,
    /// When the type pointed to is a class smaller than the block: where the classes of the
    /// block's size the unit derives from it keep it (`B *b = new C` with `struct C : A, B`
    /// keeps `B` 8 bytes in).
    pub within_derived: Derived,
    /// It is a data member the statement stores the block in (`v->data = …`), not a
    /// variable: the block outlives the allocating function in an object whose type says
    /// how the program reads it.
    pub member: bool,
}

/// Where the classes of a block's size derived from a class keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Derived {
    /// No class of that size derives from it (or it is not a class, or not smaller).
    None,
    /// All of them at this offset.
    At(u64),
    /// At different offsets: which class the block is cannot be told.
    Disagree,
}

/// The variable declared at `file:line` of `unit` that holds a pointer to heap memory, and
/// the shape of what it points to, when exactly one such variable is declared there: `double
/// *y = aligned_alloc(…)` gives `y` and `double`, `std::vector<Acc> accs(n)` gives `accs` and
/// `Acc` (the vector's element type). A heap block's type is not recorded; the line that
/// allocated it usually declares the variable that names it. Files are compared by name, as
/// the allocation's line and DWARF's declaration may spell the directory differently.
/// `block` is the block's size, for [`DeclaredPointer::within_derived`].
pub(crate) fn pointer_declared_at<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    file: &str,
    line: u32,
    block: u64,
) -> Option<DeclaredPointer> {
    let mut candidates = Vec::new();
    for_each_variable_declared_at(unit, file, line, |name, entry| {
        if let Some((target, pointer)) = pointee(unit, entry) {
            candidates.push((name, target, pointer));
        }
    });
    the_pointer(unit, candidates, block)
}

/// The pointer (or `std::vector`, `std::unique_ptr`) variable of `unit` named `name`, as for
/// [`pointer_declared_at`]: the target of an assignment (`g_data = malloc(…)` to a global
/// declared elsewhere, `y = malloc(…)` to a local declared earlier). `None` when the unit has
/// several variables, parameters or data members of that name that are not all the same
/// pointer: which one the statement assigns is not known.
pub(crate) fn pointer_named<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    name: &str,
    block: u64,
) -> Option<DeclaredPointer> {
    let mut candidates = Vec::new();
    let mut entries = unit.entries();
    while let Ok(Some((_, entry))) = entries.next_dfs() {
        // A parameter or a data member of that name may be what the statement assigns (a
        // local shadowing a global, `buf = …` in a member function): any of them of another
        // type makes the name ambiguous.
        if !matches!(
            entry.tag(),
            gimli::DW_TAG_variable | gimli::DW_TAG_formal_parameter | gimli::DW_TAG_member
        ) {
            continue;
        }
        if !has_name(unit, entry, name) {
            continue;
        }
        match pointee(unit, entry) {
            Some((target, pointer)) => candidates.push((name.to_owned(), target, pointer)),
            None => return None,
        }
    }
    the_pointer(unit, candidates, block)
}

/// The one variable among `candidates` (name, the entry of what it points to, whether it is
/// a pointer), read into a [`DeclaredPointer`] for a block of `block` bytes; `None` when
/// there is none or they differ. The same variable seen twice (an inlined copy's
/// declaration, an `extern` declaration and the definition) is one.
pub(super) fn the_pointer<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    candidates: Vec<(String, gimli::UnitOffset<R::Offset>, bool)>,
    block: u64,
) -> Option<DeclaredPointer> {
    let mut candidates = candidates.into_iter();
    let (name, target, pointer) = candidates.next()?;
    if candidates.any(|(n, t, _)| n != name || t != target) {
        return None;
    }
    let mut reader = ShapeReader::default();
    let shape = reader.shape(unit, target, 0);
    let class = stripped(unit, target);
    let mut budget = MAX_NODES;
    let destructor = class.is_some_and(|c| has_destructor(unit, c, 0, &mut budget));
    let within_derived = match (class, shape.size) {
        (Some(c), Some(size)) if pointer && size < block => base_offset_in_derived(unit, c, block),
        _ => Derived::None,
    };
    Some(DeclaredPointer {
        name,
        shape,
        pointer,
        destructor,
        within_derived,
        member: false,
    })
}

/// `at` with typedefs and qualifiers followed.
pub(super) fn stripped<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    mut at: gimli::UnitOffset<R::Offset>,
) -> Option<gimli::UnitOffset<R::Offset>> {
    for _ in 0..MAX_DEPTH {
        let ty = unit.entry(at).ok()?;
        match ty.tag() {
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type => match ty.attr_value(gimli::DW_AT_type) {
                Ok(Some(AttributeValue::UnitRef(o))) => at = o,
                _ => return None,
            },
            _ => return Some(at),
        }
    }
    None
}

/// Whether the type at `at` (typedefs followed) has a destructor: a class declaring one
/// (`~Worker`, also the implicit one DWARF lists once it is used), or holding a member, base
/// or array element whose type has one. `budget` bounds the entries read.
fn has_destructor<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    at: gimli::UnitOffset<R::Offset>,
    depth: usize,
    budget: &mut usize,
) -> bool {
    if depth > MAX_DEPTH || *budget == 0 {
        return false;
    }
    *budget -= 1;
    let Some(at) = stripped(unit, at) else {
        return false;
    };
    let Ok(ty) = unit.entry(at) else {
        return false;
    };
    let type_of =
        |e: &gimli::DebuggingInformationEntry<'_, '_, R>| match e.attr_value(gimli::DW_AT_type) {
            Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
            _ => None,
        };
    match ty.tag() {
        gimli::DW_TAG_array_type => {
            type_of(&ty).is_some_and(|e| has_destructor(unit, e, depth + 1, budget))
        }
        gimli::DW_TAG_class_type | gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type => {
            let Ok(mut tree) = unit.entries_tree(Some(at)) else {
                return false;
            };
            let Ok(root) = tree.root() else {
                return false;
            };
            let mut children = root.children();
            while let Ok(Some(child)) = children.next() {
                let e = child.entry();
                let found = match e.tag() {
                    gimli::DW_TAG_subprogram => e
                        .attr_value(gimli::DW_AT_name)
                        .ok()
                        .flatten()
                        .and_then(|v| unit.attr_string(v).ok())
                        .is_some_and(|n| n.to_string_lossy().is_ok_and(|n| n.starts_with('~'))),
                    // A static data member is declared, not held.
                    gimli::DW_TAG_member
                        if !matches!(
                            e.attr_value(gimli::DW_AT_external),
                            Ok(Some(AttributeValue::Flag(true)))
                        ) =>
                    {
                        type_of(e).is_some_and(|t| has_destructor(unit, t, depth + 1, budget))
                    }
                    gimli::DW_TAG_inheritance => {
                        type_of(e).is_some_and(|t| has_destructor(unit, t, depth + 1, budget))
                    }
                    _ => false,
                };
                if found {
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

/// Each class's direct bases: their offsets in it and their entries.
type Bases<O> = HashMap<O, Vec<(u64, O)>>;

/// Where the classes of `unit` that are `size` bytes and derive from the class at `base`
/// (directly or through other bases) keep it.
fn base_offset_in_derived<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    base: gimli::UnitOffset<R::Offset>,
    size: u64,
) -> Derived {
    // Each class's bases: (offset in it, the base's entry).
    let mut bases: Bases<gimli::UnitOffset<R::Offset>> = HashMap::new();
    let mut sized = Vec::new();
    let mut entries = unit.entries();
    let mut class_at: Vec<(isize, gimli::UnitOffset<R::Offset>)> = Vec::new();
    let mut depth = 0isize;
    while let Ok(Some((delta, entry))) = entries.next_dfs() {
        depth += delta;
        while class_at.last().is_some_and(|&(d, _)| d >= depth) {
            class_at.pop();
        }
        match entry.tag() {
            gimli::DW_TAG_class_type | gimli::DW_TAG_structure_type => {
                class_at.push((depth, entry.offset()));
                let bytes = entry
                    .attr_value(gimli::DW_AT_byte_size)
                    .ok()
                    .flatten()
                    .and_then(|v| v.udata_value());
                if bytes == Some(size) {
                    sized.push(entry.offset());
                }
            }
            gimli::DW_TAG_inheritance => {
                let (Some(&(d, class)), Ok(Some(AttributeValue::UnitRef(of)))) =
                    (class_at.last(), entry.attr_value(gimli::DW_AT_type))
                else {
                    continue;
                };
                if d + 1 != depth {
                    continue;
                }
                // A virtual base's offset is an expression read at run time: unknown here.
                let Some(offset) = entry
                    .attr_value(gimli::DW_AT_data_member_location)
                    .ok()
                    .flatten()
                    .and_then(|v| v.udata_value())
                else {
                    continue;
                };
                if let Some(of) = stripped(unit, of) {
                    bases.entry(class).or_default().push((offset, of));
                }
            }
            _ => {}
        }
    }
    let mut offsets = Vec::new();
    for class in sized {
        collect_base_offsets(&bases, class, base, 0, 0, &mut offsets);
    }
    offsets.sort_unstable();
    offsets.dedup();
    match offsets.as_slice() {
        [] => Derived::None,
        [one] => Derived::At(*one),
        _ => Derived::Disagree,
    }
}

/// Adds to `out` each offset at which `class` (itself `at` bytes into the object) keeps
/// `base` among its bases, per `bases`.
fn collect_base_offsets<O: Eq + std::hash::Hash + Copy>(
    bases: &Bases<O>,
    class: O,
    base: O,
    at: u64,
    depth: usize,
    out: &mut Vec<u64>,
) {
    if depth > MAX_DEPTH || out.len() > MAX_PARTS {
        return;
    }
    for &(offset, of) in bases.get(&class).into_iter().flatten() {
        let here = at.saturating_add(offset);
        if of == base {
            out.push(here);
        } else {
            collect_base_offsets(bases, of, base, here, depth + 1, out);
        }
    }
}

/// Whether a variable declared at `file:line` of `unit` is a pointer to raw bytes (`void *`,
/// `char *`): the line of an allocating wrapper (`void *p = malloc(n)` in `xmalloc`), whose
/// caller's line says what the block holds.
pub(crate) fn byte_pointer_declared_at<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    file: &str,
    line: u32,
) -> bool {
    let mut found = false;
    for_each_variable_declared_at(unit, file, line, |_, entry| {
        found |= points_to_bytes(unit, entry);
    });
    found
}

/// Calls `f` with the name and entry of each named variable of `unit` declared at
/// `file:line`.
fn for_each_variable_declared_at<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    file: &str,
    line: u32,
    mut f: impl FnMut(String, &gimli::DebuggingInformationEntry<'_, '_, R>),
) {
    let wanted = file_name(file);
    let mut entries = unit.entries();
    while let Ok(Some((_, entry))) = entries.next_dfs() {
        if entry.tag() != gimli::DW_TAG_variable {
            continue;
        }
        let udata = |name| {
            entry
                .attr_value(name)
                .ok()
                .flatten()
                .and_then(|v: AttributeValue<R>| match v {
                    AttributeValue::FileIndex(i) => Some(i),
                    v => v.udata_value(),
                })
        };
        if udata(gimli::DW_AT_decl_line) != Some(u64::from(line)) {
            continue;
        }
        let declared_in = udata(gimli::DW_AT_decl_file).and_then(|i| decl_file(unit, i));
        if declared_in.as_deref().map(file_name) != Some(wanted) {
            continue;
        }
        let Some(name) = entry
            .attr_value(gimli::DW_AT_name)
            .ok()
            .flatten()
            .and_then(|v| unit.attr_string(v).ok())
            .and_then(|s| s.to_string_lossy().ok().map(|s| s.into_owned()))
        else {
            continue;
        };
        f(name, entry);
    }
}

/// Whether `variable` is a pointer to `void` or to a 1-byte scalar (through typedefs and
/// qualifiers on either side).
fn points_to_bytes<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    variable: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> bool {
    let type_of =
        |e: &gimli::DebuggingInformationEntry<'_, '_, R>| match e.attr_value(gimli::DW_AT_type) {
            Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
            _ => None,
        };
    let mut at = type_of(variable);
    let mut behind_pointer = false;
    for _ in 0..MAX_DEPTH {
        // No type behind the pointer: `void`.
        let Some(offset) = at else {
            return behind_pointer;
        };
        let Ok(ty) = unit.entry(offset) else {
            return false;
        };
        match ty.tag() {
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type => at = type_of(&ty),
            gimli::DW_TAG_pointer_type if !behind_pointer => {
                behind_pointer = true;
                at = type_of(&ty);
            }
            gimli::DW_TAG_unspecified_type => return behind_pointer,
            gimli::DW_TAG_base_type => {
                return behind_pointer
                    && matches!(
                        ty.attr_value(gimli::DW_AT_byte_size),
                        Ok(Some(v)) if v.udata_value() == Some(1)
                    );
            }
            _ => return false,
        }
    }
    false
}

/// The last component of a path.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The type a variable points to: the target of a pointer type (through typedefs and
/// qualifiers), the element type of a `std::vector` (its `_Tp` template parameter), what a
/// `std::unique_ptr` holds (an array's element type); and whether the variable points to one
/// object (a pointer or `unique_ptr<T>`) rather than holding elements.
pub(super) fn pointee<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    variable: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<(gimli::UnitOffset<R::Offset>, bool)> {
    let type_of =
        |e: &gimli::DebuggingInformationEntry<'_, '_, R>| match e.attr_value(gimli::DW_AT_type) {
            Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
            _ => None,
        };
    let mut at = type_of(variable)?;
    for _ in 0..MAX_DEPTH {
        let ty = unit.entry(at).ok()?;
        match ty.tag() {
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type => at = type_of(&ty)?,
            gimli::DW_TAG_pointer_type => return type_of(&ty).map(|t| (t, true)),
            gimli::DW_TAG_class_type | gimli::DW_TAG_structure_type => {
                let name = ty
                    .attr_value(gimli::DW_AT_name)
                    .ok()
                    .flatten()
                    .and_then(|v| unit.attr_string(v).ok())
                    .and_then(|s| s.to_string_lossy().ok().map(|s| s.into_owned()))?;
                if name.starts_with("vector<") {
                    // `std::vector<bool>` packs its elements into words: its bytes are no
                    // `bool`s.
                    let element = template_type_parameter(unit, at, "_Tp")?;
                    let bits = unit.entry(element).ok().is_some_and(|e| {
                        e.tag() == gimli::DW_TAG_base_type
                            && matches!(
                                e.attr_value(gimli::DW_AT_encoding),
                                Ok(Some(AttributeValue::Encoding(gimli::DW_ATE_boolean)))
                            )
                    });
                    return (!bits).then_some((element, false));
                }
                if !name.starts_with("unique_ptr<") {
                    return None;
                }
                // `unique_ptr<Stat[]>` holds an array of `Stat`, `unique_ptr<Node>` one `Node`.
                let held = template_type_parameter(unit, at, "_Tp")?;
                let entry = unit.entry(held).ok()?;
                return match entry.tag() {
                    gimli::DW_TAG_array_type => type_of(&entry).map(|t| (t, false)),
                    _ => Some((held, true)),
                };
            }
            _ => return None,
        }
    }
    None
}

/// Whether `entry`'s `DW_AT_name` is `name`.
pub(super) fn has_name<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    name: &str,
) -> bool {
    entry
        .attr_value(gimli::DW_AT_name)
        .ok()
        .flatten()
        .and_then(|v| unit.attr_string(v).ok())
        .is_some_and(|s| s.to_string_lossy().is_ok_and(|s| s == name))
}

/// The type of template parameter `name` of the class at `at`.
fn template_type_parameter<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    at: gimli::UnitOffset<R::Offset>,
    name: &str,
) -> Option<gimli::UnitOffset<R::Offset>> {
    let mut tree = unit.entries_tree(Some(at)).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    while let Ok(Some(child)) = children.next() {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_template_type_parameter {
            continue;
        }
        if has_name(unit, e, name) {
            if let Ok(Some(AttributeValue::UnitRef(o))) = e.attr_value(gimli::DW_AT_type) {
                return Some(o);
            }
        }
    }
    None
}

/// Reads type shapes, sharing the shape of a type used by several variables.
pub(crate) struct ShapeReader<O> {
    cache: HashMap<(gimli::UnitSectionOffset<O>, gimli::UnitOffset<O>), Arc<TypeShape>>,
    nodes: usize,
}

impl<O> Default for ShapeReader<O> {
    fn default() -> Self {
        ShapeReader {
            cache: HashMap::new(),
            nodes: 0,
        }
    }
}

impl<O: gimli::ReaderOffset> ShapeReader<O> {
    /// The shape of the type of variable `entry` of `unit` (`DW_AT_type`), if it has one.
    pub fn of_variable<R: gimli::Reader<Offset = O>>(
        &mut self,
        unit: gimli::UnitRef<'_, R>,
        entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    ) -> Option<Arc<TypeShape>> {
        let Ok(Some(AttributeValue::UnitRef(ty))) = entry.attr_value(gimli::DW_AT_type) else {
            return None;
        };
        self.nodes = 0;
        Some(self.shape(unit, ty, 0))
    }

    /// The shape of the type at `at`.
    fn shape<R: gimli::Reader<Offset = O>>(
        &mut self,
        unit: gimli::UnitRef<'_, R>,
        at: gimli::UnitOffset<O>,
        depth: usize,
    ) -> Arc<TypeShape> {
        let key = (unit.header.offset(), at);
        if let Some(hit) = self.cache.get(&key) {
            return Arc::clone(hit);
        }
        let shape = Arc::new(self.read(unit, at, depth));
        // Only whole shapes are shared: one cut short by the budget is not the type's.
        if self.nodes < MAX_NODES && depth < MAX_DEPTH {
            self.cache.insert(key, Arc::clone(&shape));
        }
        shape
    }

    fn read<R: gimli::Reader<Offset = O>>(
        &mut self,
        unit: gimli::UnitRef<'_, R>,
        at: gimli::UnitOffset<O>,
        depth: usize,
    ) -> TypeShape {
        let leaf = |size| TypeShape {
            size,
            kind: ShapeKind::Leaf,
        };
        self.nodes += 1;
        let Ok(entry) = unit.entry(at) else {
            return leaf(None);
        };
        let size = entry
            .attr_value(gimli::DW_AT_byte_size)
            .ok()
            .flatten()
            .and_then(|v| v.udata_value())
            // clang gives pointers no size (its `_vptr$Shape` is one): they are an address.
            .or_else(|| {
                matches!(
                    entry.tag(),
                    gimli::DW_TAG_pointer_type
                        | gimli::DW_TAG_reference_type
                        | gimli::DW_TAG_rvalue_reference_type
                )
                .then(|| u64::from(unit.encoding().address_size))
            });
        let next = match entry.attr_value(gimli::DW_AT_type) {
            Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
            _ => None,
        };
        if depth >= MAX_DEPTH || self.nodes >= MAX_NODES {
            return leaf(size);
        }
        match entry.tag() {
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type => match next {
                Some(o) => (*self.shape(unit, o, depth + 1)).clone(),
                None => leaf(size),
            },
            gimli::DW_TAG_array_type => {
                let Some(o) = next else {
                    return leaf(size);
                };
                let mut element = self.shape(unit, o, depth + 1);
                let dims = dimensions(unit, &entry);
                // Innermost dimension first: each wraps the arrays of the next.
                for &count in dims.iter().skip(1).rev() {
                    element = Arc::new(TypeShape {
                        size: element.size.and_then(|s| s.checked_mul(count)),
                        kind: ShapeKind::Array { count, element },
                    });
                }
                let count = dims.first().copied().unwrap_or(0);
                let size = size.or_else(|| element.size?.checked_mul(count));
                TypeShape {
                    size,
                    kind: ShapeKind::Array { count, element },
                }
            }
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type => {
                let members = self.members(unit, at, entry.tag(), depth);
                TypeShape {
                    size,
                    kind: ShapeKind::Record(members),
                }
            }
            _ => leaf(size),
        }
    }

    /// Data members and base classes of the record at `at`, in offset order (static members
    /// have no offset and are left out; bit-fields are members over the bytes they occupy).
    fn members<R: gimli::Reader<Offset = O>>(
        &mut self,
        unit: gimli::UnitRef<'_, R>,
        at: gimli::UnitOffset<O>,
        tag: gimli::DwTag,
        depth: usize,
    ) -> Vec<Member> {
        let mut found = Vec::new();
        let mut bit_fields = Vec::new();
        {
            let Ok(mut tree) = unit.entries_tree(Some(at)) else {
                return Vec::new();
            };
            let Ok(root) = tree.root() else {
                return Vec::new();
            };
            let mut children = root.children();
            while let Ok(Some(child)) = children.next() {
                let e = child.entry();
                let base = match e.tag() {
                    gimli::DW_TAG_member => false,
                    gimli::DW_TAG_inheritance => true,
                    _ => continue,
                };
                let udata = |name| {
                    e.attr_value(name)
                        .ok()
                        .flatten()
                        .and_then(|v: AttributeValue<R>| v.udata_value())
                };
                if let Some(bits) = udata(gimli::DW_AT_bit_size) {
                    if let (Some(name), Some(at)) = (member_name(unit, e), bit_offset(e, tag)) {
                        bit_fields.push((name, at, bits));
                    }
                    continue;
                }
                let offset = match e.attr_value(gimli::DW_AT_data_member_location) {
                    Ok(Some(v)) => v.udata_value(),
                    // A union's members have none: they all start at 0.
                    Ok(None) if tag == gimli::DW_TAG_union_type => Some(0),
                    _ => None,
                };
                let (Some(offset), Ok(Some(AttributeValue::UnitRef(ty)))) =
                    (offset, e.attr_value(gimli::DW_AT_type))
                else {
                    continue;
                };
                let name = if base { None } else { member_name(unit, e) };
                found.push((name, offset, ty));
            }
        }
        let mut members: Vec<Member> = found
            .into_iter()
            .map(|(name, offset, ty)| Member {
                name,
                offset,
                shape: self.shape(unit, ty, depth + 1),
            })
            .collect();
        members.extend(bit_field_members(bit_fields));
        members.sort_by_key(|m| m.offset);
        members
    }
}

/// A member's name, if it has one.
fn member_name<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    e: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<String> {
    e.attr_value(gimli::DW_AT_name)
        .ok()
        .flatten()
        .and_then(|v| unit.attr_string(v).ok())
        .and_then(|s| s.to_string_lossy().ok().map(|s| s.into_owned()))
}

/// Where a bit-field starts, in bits from the start of its record (x86-64 is little-endian):
/// DWARF 4+'s `DW_AT_data_bit_offset`, or DWARF 2/3's storage unit
/// (`DW_AT_data_member_location`, `DW_AT_byte_size`) and `DW_AT_bit_offset`, counted from
/// the unit's most significant bit.
fn bit_offset<R: gimli::Reader>(
    e: &gimli::DebuggingInformationEntry<'_, '_, R>,
    record: gimli::DwTag,
) -> Option<u64> {
    let udata = |name| {
        e.attr_value(name)
            .ok()
            .flatten()
            .and_then(|v: AttributeValue<R>| v.udata_value())
    };
    if let Some(bits) = udata(gimli::DW_AT_data_bit_offset) {
        return Some(bits);
    }
    let unit_at = match udata(gimli::DW_AT_data_member_location) {
        Some(at) => at,
        None if record == gimli::DW_TAG_union_type => 0,
        None => return None,
    };
    // Signed: clang gives a packed bit-field that reaches past its storage unit's end a
    // negative one (-8 for `unsigned w : 12` at bits 28..39 of a 4-byte unit at byte 0),
    // written as an unsigned LEB128 of its two's complement.
    let from_msb = match e.attr_value(gimli::DW_AT_bit_offset).ok().flatten() {
        Some(AttributeValue::Udata(v)) => i128::from(v as i64),
        Some(v) => v.sdata_value().map_or(0, i128::from),
        None => 0,
    };
    let unit_bits = i128::from(udata(gimli::DW_AT_byte_size)?) * 8;
    let from_lsb = unit_bits - from_msb - i128::from(udata(gimli::DW_AT_bit_size)?);
    u64::try_from(i128::from(unit_at) * 8 + from_lsb).ok()
}

/// Bit-fields `(name, first bit, bits)` as members over the bytes they occupy; neighbours that
/// share a byte are one member named by all of them (`{ready,kind}`): a byte written is as
/// much one's as the other's.
fn bit_field_members(fields: Vec<(String, u64, u64)>) -> Vec<Member> {
    let mut groups: Vec<(Vec<String>, u64, u64)> = Vec::new();
    for (name, at, bits) in fields {
        let (lo, hi) = (at / 8, at.saturating_add(bits).div_ceil(8).max(at / 8 + 1));
        match groups.last_mut() {
            Some((names, _, end)) if lo < *end => {
                names.push(name);
                *end = (*end).max(hi);
            }
            _ => groups.push((vec![name], lo, hi)),
        }
    }
    groups
        .into_iter()
        .map(|(names, lo, hi)| Member {
            name: Some(match names.as_slice() {
                [one] => one.clone(),
                many => format!("{{{}}}", many.join(",")),
            }),
            offset: lo,
            shape: Arc::new(TypeShape {
                size: Some(hi - lo),
                kind: ShapeKind::Leaf,
            }),
        })
        .collect()
}

/// Element counts of an array's subranges (0 when one does not say).
fn dimensions<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    array: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Vec<u64> {
    let mut dims = Vec::new();
    let Ok(mut tree) = unit.entries_tree(Some(array.offset())) else {
        return dims;
    };
    let Ok(root) = tree.root() else {
        return dims;
    };
    let mut children = root.children();
    while let Ok(Some(child)) = children.next() {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_subrange_type {
            continue;
        }
        let udata = |name| {
            e.attr_value(name)
                .ok()
                .flatten()
                .and_then(|v: AttributeValue<R>| v.udata_value())
        };
        let count = udata(gimli::DW_AT_count).or_else(|| {
            let lower = udata(gimli::DW_AT_lower_bound).unwrap_or(0);
            udata(gimli::DW_AT_upper_bound)?
                .checked_sub(lower)?
                .checked_add(1)
        });
        dims.push(count.unwrap_or(0));
    }
    if dims.is_empty() {
        dims.push(0);
    }
    dims
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(size: u64) -> Arc<TypeShape> {
        Arc::new(TypeShape {
            size: Some(size),
            kind: ShapeKind::Leaf,
        })
    }

    fn array(count: u64, element: Arc<TypeShape>) -> Arc<TypeShape> {
        Arc::new(TypeShape {
            size: element.size.map(|s| s * count),
            kind: ShapeKind::Array { count, element },
        })
    }

    fn record(size: u64, members: &[(Option<&str>, u64, Arc<TypeShape>)]) -> Arc<TypeShape> {
        Arc::new(TypeShape {
            size: Some(size),
            kind: ShapeKind::Record(
                members
                    .iter()
                    .map(|(n, o, s)| Member {
                        name: n.map(str::to_owned),
                        offset: *o,
                        shape: Arc::clone(s),
                    })
                    .collect(),
            ),
        })
    }

    /// The parts of `[start, end)` of `shape`, as `suffix@start..end` joined by `, `.
    fn path(shape: &TypeShape, start: u64, end: u64) -> String {
        shape
            .parts(start, end)
            .iter()
            .map(|(name, s, e)| {
                if (*s, *e) == (start, end) {
                    name.clone()
                } else {
                    format!("{name}@{s}..{e}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    #[test]
    fn members_are_named_by_path() {
        // struct acc { double sum_x, sum_y, sum_xx, sum_xy; } accs[64];
        let acc = record(
            32,
            &[
                (Some("sum_x"), 0, leaf(8)),
                (Some("sum_y"), 8, leaf(8)),
                (Some("sum_xx"), 16, leaf(8)),
                (Some("sum_xy"), 24, leaf(8)),
            ],
        );
        let accs = array(64, acc);
        assert_eq!(path(&accs, 32, 64), "[1]");
        assert_eq!(path(&accs, 40, 48), "[1].sum_y");
        assert_eq!(path(&accs, 36, 40), "[1].sum_x");
        assert_eq!(path(&accs, 0, 64), "[0..1]");
        assert_eq!(path(&accs, 0, 64 * 32), "");
        // class Histogram { double partial[8]; std::vector<double> data; } (a base first)
        let base = record(8, &[(Some("id"), 0, leaf(4)), (Some("kind"), 4, leaf(4))]);
        let h = record(
            96,
            &[
                (None, 0, base),
                (Some("partial"), 8, array(8, leaf(8))),
                (Some("data"), 72, leaf(24)),
            ],
        );
        assert_eq!(path(&h, 16, 24), ".partial[1]");
        assert_eq!(path(&h, 0, 4), ".id");
        assert_eq!(path(&h, 4, 8), ".kind");
        assert_eq!(path(&h, 8, 72), ".partial");
        assert_eq!(path(&h, 8, 32), ".partial[0..2]");
        // struct slot { long data[2][4]; } (DWARF: one array type, two subranges)
        let slot = record(64, &[(Some("data"), 0, array(2, array(4, leaf(8))))]);
        assert_eq!(path(&slot, 32, 64), ".data[1]");
        assert_eq!(path(&slot, 40, 48), ".data[1][1]");
        assert_eq!(
            path(&slot, 24, 40),
            ".data[0][3]@24..32, .data[1][0]@32..40"
        );
        assert_eq!(path(&slot, 0, 32), ".data[0]");
        // Padding and unknown sizes stop the path.
        let padded = record(64, &[(Some("n"), 0, leaf(8))]);
        assert_eq!(path(&padded, 8, 16), "");
        let unsized_elements = array(
            0,
            Arc::new(TypeShape {
                size: None,
                kind: ShapeKind::Leaf,
            }),
        );
        assert_eq!(path(&unsized_elements, 8, 16), "");
    }

    #[test]
    fn ranges_split_at_members_and_stop_at_the_object() {
        // struct ring { long head, tail, polls; }: a run over two members is two parts.
        let ring = record(
            24,
            &[
                (Some("head"), 0, leaf(8)),
                (Some("tail"), 8, leaf(8)),
                (Some("polls"), 16, leaf(8)),
            ],
        );
        assert_eq!(path(&ring, 8, 24), ".tail@8..16, .polls@16..24");
        // Bytes past the object are a neighbour's: left out.
        assert_eq!(path(&ring, 16, 40), ".polls@16..24");
        assert!(ring.parts(24, 32).is_empty());
        // union { uint64_t whole; uint32_t half[2]; }: the smallest holder names the bytes.
        let u = record(
            8,
            &[
                (Some("whole"), 0, leaf(8)),
                (Some("half"), 0, array(2, leaf(4))),
            ],
        );
        assert_eq!(path(&u, 4, 8), ".half[1]");
        // union { long l[4]; int i[8]; }: the same size, but an int holds bytes 12..15.
        let li = record(
            32,
            &[
                (Some("l"), 0, array(4, leaf(8))),
                (Some("i"), 0, array(8, leaf(4))),
            ],
        );
        assert_eq!(path(&li, 12, 16), ".i[3]");
        assert_eq!(path(&li, 8, 16), ".l[1]");
        // union { long whole; struct { int lo, hi; } parts; }
        let pair = record(
            8,
            &[
                (Some("whole"), 0, leaf(8)),
                (
                    Some("parts"),
                    0,
                    record(8, &[(Some("lo"), 0, leaf(4)), (Some("hi"), 4, leaf(4))]),
                ),
            ],
        );
        assert_eq!(path(&pair, 4, 8), ".parts.hi");
        assert_eq!(path(&u, 0, 8), "");
        // struct MI : A, B { long own; }: all of a base is named by its member.
        let a = record(8, &[(Some("a"), 0, leaf(8))]);
        let b = record(8, &[(Some("b"), 0, leaf(8))]);
        let mi = record(
            24,
            &[(None, 0, a), (None, 8, b), (Some("own"), 16, leaf(8))],
        );
        assert_eq!(path(&mi, 0, 8), ".a");
        assert_eq!(path(&mi, 8, 16), ".b");
        assert_eq!(path(&mi, 8, 24), ".b@8..16, .own@16..24");
        // std::array<long, 8>: its one member is not part of the name.
        let arr = record(64, &[(Some("_M_elems"), 0, array(8, leaf(8)))]);
        assert_eq!(path(&arr, 16, 24), "[2]");
        assert_eq!(path(&arr, 16, 40), "[2..4]");
        assert_eq!(path(&arr, 0, 64), "");
    }

    #[test]
    fn runs_are_named_whole_with_partial_elements_by_their_members() {
        // struct kv { int key, val; } g_kv[8]: a run from one element's middle into the next
        // is their members, whole elements between them a range.
        let kv = record(8, &[(Some("key"), 0, leaf(4)), (Some("val"), 4, leaf(4))]);
        let g_kv = array(8, kv);
        assert_eq!(path(&g_kv, 4, 12), "[0].val@4..8, [1].key@8..12");
        assert_eq!(path(&g_kv, 24, 44), "[3..4]@24..40, [5].key@40..44");
        assert_eq!(path(&g_kv, 20, 32), "[2].val@20..24, [3]@24..32");
        // struct { char c; double d; }: padding written with the member after it is the
        // element's, not dropped.
        let padded = array(
            4,
            record(16, &[(Some("c"), 0, leaf(1)), (Some("d"), 8, leaf(8))]),
        );
        assert_eq!(path(&padded, 1, 16), "[0]@1..8, [0].d@8..16");
        assert_eq!(path(&padded, 0, 12), "[0].c@0..1, [0]@1..8, [0].d@8..12");
        // struct { int x; unsigned f1 : 3, f2 : 4; short y : 9; }: bit-fields sharing a byte
        // are one member.
        let bits = bit_field_members(vec![
            ("f1".into(), 32, 3),
            ("f2".into(), 35, 4),
            ("y".into(), 48, 9),
        ]);
        let names: Vec<_> = bits
            .iter()
            .map(|m| (m.name.clone().unwrap_or_default(), m.offset, m.shape.size))
            .collect();
        assert_eq!(
            names,
            [
                ("{f1,f2}".to_owned(), 4, Some(1)),
                ("y".to_owned(), 6, Some(2))
            ]
        );
        let mut members = vec![Member {
            name: Some("x".into()),
            offset: 0,
            shape: leaf(4),
        }];
        members.extend(bits);
        let b2 = Arc::new(TypeShape {
            size: Some(8),
            kind: ShapeKind::Record(members),
        });
        assert_eq!(path(&b2, 0, 5), ".x@0..4, .{f1,f2}@4..5");
        assert_eq!(path(&b2, 4, 8), ".{f1,f2}@4..5, @5..6, .y@6..8");
    }

    #[test]
    fn a_flexible_array_member_takes_the_rest_of_the_block() {
        // struct hist { long n; long bins[]; } in a 64-byte block: bins has 7 elements.
        let hist = record(
            8,
            &[
                (Some("n"), 0, leaf(8)),
                (Some("bins"), 8, array(0, leaf(8))),
            ],
        );
        let grown = hist
            .with_flexible_tail(64)
            .expect("a flexible array member");
        assert_eq!(grown.size, Some(64));
        assert_eq!(path(&grown, 0, 24), ".n@0..8, .bins[0..1]@8..24");
        assert_eq!(path(&grown, 56, 64), ".bins[6]");
        // Without one, or in a block smaller than the struct, nothing grows.
        let pt = record(8, &[(Some("x"), 0, leaf(4)), (Some("y"), 4, leaf(4))]);
        assert!(pt.with_flexible_tail(64).is_none());
        assert!(hist.with_flexible_tail(4).is_none());
        // The struct hack: `struct msg { int tag, len; char data[1]; }` (12 bytes) in a
        // 52-byte block is one message; in 48 bytes, four.
        let msg = record(
            12,
            &[
                (Some("tag"), 0, leaf(4)),
                (Some("len"), 4, leaf(4)),
                (Some("data"), 8, array(1, leaf(1))),
            ],
        );
        let grown = msg.with_flexible_tail(52).expect("the struct hack");
        assert_eq!(path(&grown, 28, 29), ".data[20]");
        // Of bytes, also in a whole number of the structs; of longs, only outside one.
        assert!(msg.with_flexible_tail(48).is_some());
        let longs = record(
            16,
            &[(Some("n"), 0, leaf(8)), (Some("v"), 8, array(1, leaf(8)))],
        );
        assert!(longs.with_flexible_tail(48).is_none());
        assert!(longs.with_flexible_tail(40).is_some());
    }

    #[test]
    fn a_vtable_pointer_makes_a_class_polymorphic_also_in_a_base() {
        let shape = record(
            16,
            &[(Some("_vptr.Shape"), 0, leaf(8)), (Some("w"), 8, leaf(8))],
        );
        let derived = record(24, &[(None, 0, shape), (Some("extra"), 16, leaf(8))]);
        assert!(derived.has_vtable());
        let plain = record(8, &[(Some("x"), 0, leaf(8))]);
        assert!(!plain.has_vtable());
        assert!(!TypeShape::array_of(derived, 48).has_vtable());
    }

    #[test]
    fn new_arrays_skip_the_count_in_front_of_elements_with_a_destructor() {
        let offset_of_first = |shape: &TypeShape| match &shape.kind {
            ShapeKind::Record(m) => m[0].offset,
            _ => 0,
        };
        // Where the elements start in a block of `bytes` of `size`-byte elements.
        let first = |size: u64, bytes: u64, destructor: bool| {
            offset_of_first(&TypeShape::heap_array_of(leaf(size), bytes, destructor))
        };
        let cases = [
            // 24-byte elements: 8 bytes over a whole number of them is the count, either way.
            (24, 104, false, 8),
            // 8- and 4-byte elements with a destructor: the count takes 8 bytes.
            (8, 64, true, 8),
            (4, 36, true, 8),
            // alignas(16) of 16 bytes, alignas(64) of 64: one element's room.
            (16, 96, true, 16),
            (64, 256, true, 64),
            // Without a destructor there is none; nor for sizes no cookie can fill.
            (8, 64, false, 0),
            (24, 96, true, 0),
            // The block one element: no room for a count.
            (8, 8, true, 0),
        ];
        for (size, bytes, destructor, expected) in cases {
            assert_eq!(
                first(size, bytes, destructor),
                expected,
                "{size}-byte elements in {bytes} bytes, destructor {destructor}"
            );
        }
    }
}
