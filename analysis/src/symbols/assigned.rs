//! The pointer member an assignment's target names: `v->data = calloc(…)` holds its block in
//! the member `data` of what `v` points to. The target's root name is looked up in the scopes
//! around the allocating code (innermost first, then the unit's globals), and each member in
//! the class the path has reached so far (its bases included), so a member name used by
//! several classes (`struct msg { char data[1]; }` next to `struct vec { long *data; }`) is
//! still the right one.

use addr2line::gimli::{self, AttributeValue};

use super::locals::covers;
use super::members::{has_name, pointee, stripped, the_pointer, DeclaredPointer};
use super::source::Step;

/// How deep the DWARF tree is read for scopes, and how many bases a member is searched
/// through: bounds against a hostile or looping type graph.
const MAX_DEPTH: usize = 24;

/// The member the path `root` then `steps` names, at code address `pc` of `unit`, read as a
/// pointer to a block of `block` bytes (as [`super::members::pointer_declared_at`]; its name
/// is `name`). `None` when the root is not a variable in scope, a step does not fit its type
/// (`->` on a non-pointer) or a member is not found.
pub(crate) fn pointer_at_path<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    pc: u64,
    root: &str,
    steps: &[(Step, &str)],
    name: String,
    block: u64,
) -> Option<DeclaredPointer> {
    let mut ty = type_of(&unit.entry(variable_in_scope(unit, pc, root)?).ok()?)?;
    let (&(last_step, last), path) = steps.split_last()?;
    for &(step, member) in path {
        let class = class_of(unit, ty, step)?;
        ty = type_of(&unit.entry(member_of(unit, class, member, 0)?).ok()?)?;
    }
    let class = class_of(unit, ty, last_step)?;
    let entry = unit.entry(member_of(unit, class, last, 0)?).ok()?;
    let (target, pointer) = pointee(unit, &entry)?;
    if unit
        .entry(target)
        .is_ok_and(|t| t.tag() == gimli::DW_TAG_subroutine_type)
    {
        // A function pointer `cb(new X)` would call, not hold the block.
        return None;
    }
    let mut declared = the_pointer(unit, vec![(name, target, pointer)], block)?;
    declared.member = true;
    Some(declared)
}

/// The type `DW_AT_type` of `entry` names.
fn type_of<R: gimli::Reader>(
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<gimli::UnitOffset<R::Offset>> {
    match entry.attr_value(gimli::DW_AT_type) {
        Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
        _ => None,
    }
}

/// The class (struct, class or union) a value of type `ty` is (`.`), or points to (`->`).
fn class_of<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    ty: gimli::UnitOffset<R::Offset>,
    step: Step,
) -> Option<gimli::UnitOffset<R::Offset>> {
    let mut at = stripped(unit, ty)?;
    if step == Step::Arrow {
        let pointer = unit.entry(at).ok()?;
        if pointer.tag() != gimli::DW_TAG_pointer_type {
            return None;
        }
        at = stripped(unit, type_of(&pointer)?)?;
    }
    let class = unit.entry(at).ok()?;
    matches!(
        class.tag(),
        gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type
    )
    .then_some(at)
}

/// The data member `name` of the class at `class`, or of one of its bases.
fn member_of<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    class: gimli::UnitOffset<R::Offset>,
    name: &str,
    depth: usize,
) -> Option<gimli::UnitOffset<R::Offset>> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut tree = unit.entries_tree(Some(class)).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    let mut bases = Vec::new();
    while let Ok(Some(child)) = children.next() {
        let e = child.entry();
        match e.tag() {
            gimli::DW_TAG_member if has_name(unit, e, name) => return Some(e.offset()),
            gimli::DW_TAG_inheritance => bases.extend(type_of(e)),
            _ => {}
        }
    }
    bases.into_iter().find_map(|b| {
        let base = stripped(unit, b)?;
        member_of(unit, base, name, depth + 1)
    })
}

/// The variable or parameter named `name` that code at `pc` sees: the one declared in the
/// innermost scope (function, lexical block) around `pc`, else the unit's global. `None` when
/// there is none, or the innermost scope that has one has several.
fn variable_in_scope<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    pc: u64,
    name: &str,
) -> Option<gimli::UnitOffset<R::Offset>> {
    // For each depth of the entry being read: whether the scopes down to it hold `pc`.
    let mut open: Vec<bool> = Vec::new();
    // The depth of the innermost scope with a variable of that name, and its variables.
    let mut best: Option<(usize, Vec<gimli::UnitOffset<R::Offset>>)> = None;
    let mut entries = unit.entries();
    let mut depth: isize = 0;
    while let Ok(Some((delta, entry))) = entries.next_dfs() {
        depth += delta;
        let Ok(d) = usize::try_from(depth) else {
            break;
        };
        if d > MAX_DEPTH {
            continue;
        }
        open.truncate(d);
        // The scope this entry is in holds `pc` (the unit itself always does).
        let inside = open.iter().all(|&o| o);
        let holds = match entry.tag() {
            gimli::DW_TAG_subprogram
            | gimli::DW_TAG_lexical_block
            | gimli::DW_TAG_inlined_subroutine => {
                inside && covers(unit, entry, pc).unwrap_or(false)
            }
            // A class's static members are reached through the class, not by a plain name.
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type => {
                false
            }
            _ => inside,
        };
        open.push(holds);
        let variable = matches!(
            entry.tag(),
            gimli::DW_TAG_variable | gimli::DW_TAG_formal_parameter
        );
        if !(inside && variable) {
            continue;
        }
        // An inlined or out-of-line copy's variable has its name and type in the abstract
        // function's entry.
        let declared = match entry.attr_value(gimli::DW_AT_abstract_origin) {
            Ok(Some(AttributeValue::UnitRef(o))) => o,
            _ => entry.offset(),
        };
        if !unit.entry(declared).is_ok_and(|e| has_name(unit, &e, name)) {
            continue;
        }
        match &mut best {
            Some((at, found)) if *at == d => found.push(declared),
            Some((at, _)) if *at > d => {}
            _ => best = Some((d, vec![declared])),
        }
    }
    let (_, found) = best?;
    // An `extern` declaration and the definition of one global are one variable.
    let mut types = found
        .iter()
        .map(|&o| unit.entry(o).ok().and_then(|e| type_of(&e)));
    let first = types.next()?;
    types.all(|t| t == first).then(|| found[found.len() - 1])
}
