//! The pointer member an assignment's target names: `v->data = calloc(…)` holds its block in
//! the member `data` of what `v` points to. The target's root name is looked up in the scopes
//! around the allocating code (innermost first, then the unit's globals), and each member in
//! the class the path has reached so far (its bases included), so a member name used by
//! several classes (`struct msg { char data[1]; }` next to `struct vec { long *data; }`) is
//! still the right one.

use addr2line::gimli::{self, AttributeValue};

use super::locals::{covers, decl_file};
use super::members::{has_name, pointee, stripped, the_pointer, DeclaredPointer};
use super::source::Step;

/// An entry of a unit read by `R`.
type Offset<R> = gimli::UnitOffset<<R as gimli::Reader>::Offset>;

/// How deep the DWARF tree is read for scopes, and how many bases a member is searched
/// through: bounds against a hostile or looping type graph.
const MAX_DEPTH: usize = 24;

/// Where an allocating statement is: its code address, how many functions inlined into
/// the statement's own function hold that address (library code, `std::vector`'s), and its
/// file and line.
pub(crate) struct Statement<'a> {
    /// Code address in the module (link-time).
    pub pc: u64,
    /// Inlined functions inside the statement's function at `pc`.
    pub inlined: usize,
    /// The statement's source file.
    pub file: &'a str,
    /// The statement's line.
    pub line: u32,
    /// The source text before the statement on its line (a local declared in it was
    /// declared before the statement).
    pub before: &'a str,
    /// The source lines before the statement's, nearest last (up to
    /// [`PRECEDING_LINES`]): clang gives a block-scope `extern` declaration no entry.
    pub preceding: &'a [String],
}

/// How many source lines before a statement [`Statement::preceding`] holds.
pub(crate) const PRECEDING_LINES: u32 = 200;

/// The member the path `root` then `steps` names, at `at`, read as a pointer to a block of
/// `block` bytes (as [`super::members::pointer_declared_at`]; its name is `name`). `None`
/// when the root is not a variable the statement sees (see [`root_entry`]), a step does not
/// fit its type (`->` on a non-pointer) or a member is not found.
pub(crate) fn pointer_at_path<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    at: &Statement<'_>,
    root: &str,
    steps: &[(Step, &str)],
    name: String,
    block: u64,
) -> Option<DeclaredPointer> {
    let (mut holder, function) = root_entry(unit, at, root)?;
    for &(step, member) in steps {
        let class = class_of(unit, type_of(&unit.entry(holder).ok()?)?, step)?;
        holder = member_of(unit, class, member, 0)?;
    }
    let (target, pointer) = pointee(unit, &unit.entry(holder).ok()?)?;
    if unit
        .entry(target)
        .is_ok_and(|t| t.tag() == gimli::DW_TAG_subroutine_type)
    {
        // A function pointer `cb(new X)` would call, not hold the block.
        return None;
    }
    let mut declared = the_pointer(unit, vec![(name, target, pointer)], block)?;
    declared.member = !steps.is_empty() && returns_nothing(unit, function);
    Some(declared)
}

/// Whether the function at `function` (a subprogram or an inlined call of one) returns
/// nothing: a constructor, `void init(struct obj *o)`. Its type is on its declaration.
fn returns_nothing<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    function: gimli::UnitOffset<R::Offset>,
) -> bool {
    let mut at = function;
    for _ in 0..MAX_DEPTH {
        let Ok(entry) = unit.entry(at) else {
            return false;
        };
        if entry.attr_value(gimli::DW_AT_type).ok().flatten().is_some() {
            return false;
        }
        match declaration_link(&entry) {
            Some(o) => at = o,
            None => return true,
        }
    }
    false
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
    // `T &r = …; r.data = …`, `T *&p`: a reference is what it refers to.
    let outer = unit.entry(at).ok()?;
    if matches!(
        outer.tag(),
        gimli::DW_TAG_reference_type | gimli::DW_TAG_rvalue_reference_type
    ) {
        at = stripped(unit, type_of(&outer)?)?;
    }
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

/// The data member `name` of the class at `class`, or of one of its bases or anonymous
/// structs and unions (`struct { long *q; };` inside it).
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
            // A static data member is a variable in the class (DWARF 5, g++).
            gimli::DW_TAG_member | gimli::DW_TAG_variable if has_name(unit, e, name) => {
                return Some(e.offset());
            }
            gimli::DW_TAG_member if e.attr_value(gimli::DW_AT_name).ok().flatten().is_none() => {
                bases.extend(type_of(e));
            }
            gimli::DW_TAG_inheritance => bases.extend(type_of(e)),
            _ => {}
        }
    }
    bases.into_iter().find_map(|b| {
        let base = stripped(unit, b)?;
        let tag = unit.entry(base).ok()?.tag();
        let class = matches!(
            tag,
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type
        );
        class
            .then(|| member_of(unit, base, name, depth + 1))
            .flatten()
    })
}

/// A variable or parameter of the unit named as a root, or `this`.
struct Variable<O> {
    /// The scope entry it is declared in.
    parent: O,
    /// The entry holding its name, type and line (an inlined copy's abstract origin).
    declared: O,
    /// It is a function's `this`.
    this: bool,
    /// It is declared at namespace scope (a global).
    global: bool,
}

/// The entry (a variable's, or a data member's) of what `root` names to the statement at `at`, and the function
/// (subprogram or inlined call) the statement is in. Looked up as C and C++ do, in the scopes
/// of DWARF entries that hold the code: the statement's own function (the one `at.inlined`
/// levels out from the innermost holding `at.pc`; not a function it is inlined into, whose
/// locals it cannot see) and its lexical blocks, innermost first, skipping locals declared
/// on a later line; then, in a member function, its class's data members (`cfg->data`
/// meaning `this->cfg->data`); then globals and variables in namespaces, which must agree.
/// `None` in a lambda unless the root is the lambda's own local: its captures are members of
/// a closure DWARF does not name as the source does.
fn root_entry<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    at: &Statement<'_>,
    root: &str,
) -> Option<(Offset<R>, Offset<R>)> {
    // The scope entries holding `pc` whose parents all do, outermost first.
    let mut chain: Vec<(gimli::UnitOffset<R::Offset>, bool)> = Vec::new();
    let mut variables: Vec<Variable<gimli::UnitOffset<R::Offset>>> = Vec::new();
    // Per depth of the entry being read: its offset, whether it and its parents hold `pc`,
    // and whether it is at namespace scope.
    let mut path: Vec<(gimli::UnitOffset<R::Offset>, bool, bool)> = Vec::new();
    // The parent of each function, block and class, and those entries' tags.
    let mut tree = Tree::default();
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
        path.truncate(d);
        let (parent, inside, global) = path
            .last()
            .map_or((None, true, true), |&(o, i, g)| (Some(o), i, g));
        let tag = entry.tag();
        let function = matches!(
            tag,
            gimli::DW_TAG_subprogram | gimli::DW_TAG_inlined_subroutine
        );
        tree.note(entry.offset(), tag, parent);
        let (holds, namespace) = match tag {
            gimli::DW_TAG_compile_unit | gimli::DW_TAG_namespace => (inside, global),
            gimli::DW_TAG_lexical_block => {
                (inside && covers(unit, entry, at.pc) == Some(true), false)
            }
            _ if function => (inside && covers(unit, entry, at.pc) == Some(true), false),
            // A class's static members are reached through the class, not by a plain name.
            _ => (false, false),
        };
        if holds && !matches!(tag, gimli::DW_TAG_compile_unit | gimli::DW_TAG_namespace) {
            chain.push((entry.offset(), function));
        }
        path.push((entry.offset(), holds, namespace));
        let (Some(parent), gimli::DW_TAG_variable | gimli::DW_TAG_formal_parameter) = (parent, tag)
        else {
            continue;
        };
        if !(inside || global) {
            continue;
        }
        let declared = match entry.attr_value(gimli::DW_AT_abstract_origin) {
            Ok(Some(AttributeValue::UnitRef(o))) => o,
            _ => entry.offset(),
        };
        let Ok(origin) = unit.entry(declared) else {
            continue;
        };
        let this = has_name(unit, &origin, "this");
        if this || has_name(unit, &origin, root) {
            variables.push(Variable {
                parent,
                declared,
                this,
                global,
            });
        }
    }
    // The statement's function, and its scopes: up to the next function inlined into it.
    let functions: Vec<usize> = (0..chain.len()).filter(|&i| chain[i].1).collect();
    let first = *functions.get(functions.len().checked_sub(at.inlined + 1)?)?;
    let function = chain[first].0;
    let end = functions
        .iter()
        .find(|&&i| i > first)
        .copied()
        .unwrap_or(chain.len());
    let scopes = &chain[first..end];
    let this_class = variables
        .iter()
        .find(|v| v.this && v.parent == function)
        .and_then(|v| class_of(unit, type_of(&unit.entry(v.declared).ok()?)?, Step::Arrow));
    let closure = this_class.is_some_and(|c| is_closure(unit, c));
    // Where a variable is declared: its line in the statement's file, and column.
    let declared_at = |v: &Variable<_>| {
        let e = unit.entry(v.declared).ok()?;
        let line = match e.attr_value(gimli::DW_AT_decl_line) {
            Ok(Some(AttributeValue::Udata(n))) => u32::try_from(n).ok()?,
            _ => return None,
        };
        let file = match e.attr_value(gimli::DW_AT_decl_file) {
            Ok(Some(AttributeValue::FileIndex(i) | AttributeValue::Udata(i))) => decl_file(unit, i),
            _ => None,
        };
        let same = file.is_some_and(|f| super::base_name(&f) == super::base_name(at.file));
        let column = match e.attr_value(gimli::DW_AT_decl_column) {
            Ok(Some(AttributeValue::Udata(n))) => Some(n),
            _ => None,
        };
        same.then_some((line, column))
    };
    // Declared after the statement: on a later line, or later on its line (by the column
    // g++ gives, or else by the name not being written before the statement).
    let later = |v: &Variable<_>| match declared_at(v) {
        Some((line, _)) if line > at.line => true,
        Some((line, column)) if line == at.line => match column {
            Some(c) => c > at.before.len() as u64,
            None => !words(at.before).any(|w| w == root),
        },
        _ => false,
    };
    // A block-scope `extern` declaration of the name after the local's (clang gives it no
    // entry): which one the statement sees is not known.
    let redeclared = |v: &Variable<_>| {
        let Some((line, _)) = declared_at(v) else {
            return false;
        };
        let from = at.line.saturating_sub(at.preceding.len() as u32);
        let lines = at.preceding.iter().enumerate().filter_map(|(i, text)| {
            let number = from + i as u32;
            (number > line).then_some(text.as_str())
        });
        lines.chain([at.before]).any(|text| {
            let mut w = words(text);
            w.clone().any(|x| x == "extern") && w.any(|x| x == root)
        })
    };
    for &(scope, _) in scopes.iter().rev() {
        let found: Vec<_> = variables
            .iter()
            .filter(|v| v.parent == scope && (v.this == (root == "this")) && !later(v))
            .collect();
        if found.is_empty() {
            continue;
        }
        if (closure && root == "this") || found.iter().any(|v| redeclared(v)) {
            return None;
        }
        let one = one_variable(unit, found.iter().map(|v| v.declared))?;
        return Some((one, function));
    }
    if closure {
        return None;
    }
    // Not a local: a data member of the function's class (also a static one, in a static
    // member function), or of a class it is nested in.
    let classes = match context(unit, &tree, function) {
        Context::Nested => return None,
        Context::Member(classes) => classes,
        Context::Free => Vec::new(),
    };
    for class in this_class.into_iter().chain(classes) {
        if let Some(member) = member_of(unit, class, root, 0) {
            return Some((member, function));
        }
    }
    // An OpenMP region's outlined function sees its enclosing function's variables, which
    // DWARF does not give it (clang passes them by pointer).
    if function_name(unit, function)
        .is_some_and(|n| n.contains(".omp_outlined") || n.contains("._omp_fn."))
    {
        return None;
    }
    let globals = variables
        .iter()
        .filter(|v| v.global && !v.this)
        .map(|v| v.declared);
    Some((one_variable(unit, globals)?, function))
}

/// Where a function is written, for the names it sees beyond its own scopes.
enum Context<O> {
    /// At namespace scope: globals.
    Free,
    /// A member function (also a static one) of these classes, innermost first.
    Member(Vec<O>),
    /// Inside another function (a GNU nested function, a local class's member): it sees
    /// that function's locals, which are not looked up here.
    Nested,
}

/// The parents and tags of a unit's functions, blocks, classes and namespaces.
struct Tree<O> {
    parent: std::collections::HashMap<O, O>,
    tag: std::collections::HashMap<O, gimli::DwTag>,
}

impl<O> Default for Tree<O> {
    fn default() -> Self {
        Tree {
            parent: std::collections::HashMap::new(),
            tag: std::collections::HashMap::new(),
        }
    }
}

impl<O: Copy + Eq + std::hash::Hash> Tree<O> {
    /// Notes `entry` (of tag `tag`, under `parent`) if it is a function, block, class or
    /// namespace.
    fn note(&mut self, entry: O, tag: gimli::DwTag, parent: Option<O>) {
        let kept = matches!(
            tag,
            gimli::DW_TAG_subprogram
                | gimli::DW_TAG_inlined_subroutine
                | gimli::DW_TAG_lexical_block
                | gimli::DW_TAG_structure_type
                | gimli::DW_TAG_class_type
                | gimli::DW_TAG_union_type
                | gimli::DW_TAG_namespace
                | gimli::DW_TAG_compile_unit
        );
        if kept {
            self.tag.insert(entry, tag);
            if let Some(p) = parent {
                self.parent.insert(entry, p);
            }
        }
    }
}

/// What a function's entry is a copy or definition of (`DW_AT_abstract_origin`, else
/// `DW_AT_specification`): where its name, type and class are.
fn declaration_link<R: gimli::Reader>(
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<Offset<R>> {
    [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification]
        .into_iter()
        .find_map(|a| match entry.attr_value(a) {
            Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
            _ => None,
        })
}

/// The identifiers of `text`.
fn words(text: &str) -> impl Iterator<Item = &str> + Clone {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// Where the function at `function` is written: its declaration (reached through
/// `DW_AT_abstract_origin` and `DW_AT_specification`) is in a class (nested in classes at
/// namespace scope), in another function, or at namespace scope.
fn context<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    tree: &Tree<Offset<R>>,
    function: Offset<R>,
) -> Context<Offset<R>> {
    let mut at = function;
    for _ in 0..MAX_DEPTH {
        let Ok(entry) = unit.entry(at) else {
            return Context::Nested;
        };
        match declaration_link(&entry) {
            Some(o) => at = o,
            None => break,
        }
    }
    let mut classes = Vec::new();
    let mut up = tree.parent.get(&at).copied();
    for _ in 0..MAX_DEPTH {
        let Some(p) = up else {
            break;
        };
        match tree.tag.get(&p).copied() {
            Some(
                gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type,
            ) => classes.push(p),
            Some(gimli::DW_TAG_namespace | gimli::DW_TAG_compile_unit) | None => break,
            // A function or block: a nested function, or a local class's member.
            Some(_) => return Context::Nested,
        }
        up = tree.parent.get(&p).copied();
    }
    if classes.is_empty() {
        Context::Free
    } else {
        Context::Member(classes)
    }
}

/// The name of the function at `function` (on it, or on what it is an inlined or
/// out-of-line copy or definition of).
fn function_name<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    function: Offset<R>,
) -> Option<String> {
    let mut at = function;
    for _ in 0..MAX_DEPTH {
        let entry = unit.entry(at).ok()?;
        if let Some(v) = entry.attr_value(gimli::DW_AT_name).ok().flatten() {
            return Some(
                unit.attr_string(v)
                    .ok()?
                    .to_string_lossy()
                    .ok()?
                    .into_owned(),
            );
        }
        at = declaration_link(&entry)?;
    }
    None
}

/// One of the variables at `declared` when all have one type (an `extern` declaration and
/// the definition of one global are one variable); `None` when there are none or they differ.
fn one_variable<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    mut declared: impl Iterator<Item = gimli::UnitOffset<R::Offset>>,
) -> Option<gimli::UnitOffset<R::Offset>> {
    let type_at = |o| unit.entry(o).ok().and_then(|e| type_of(&e));
    let first = declared.next()?;
    let ty = type_at(first)?;
    declared.all(|o| type_at(o) == Some(ty)).then_some(first)
}

/// Whether the class at `class` is a lambda's closure type: g++ names it `<lambda(…)>`,
/// clang leaves it unnamed (an ordinary class with member functions has a name).
fn is_closure<R: gimli::Reader>(
    unit: gimli::UnitRef<'_, R>,
    class: gimli::UnitOffset<R::Offset>,
) -> bool {
    let Ok(entry) = unit.entry(class) else {
        return true;
    };
    match entry.attr_value(gimli::DW_AT_name).ok().flatten() {
        None => true,
        Some(v) => unit
            .attr_string(v)
            .ok()
            .and_then(|s| s.to_string_lossy().ok().map(|s| s.starts_with("<lambda")))
            .unwrap_or(true),
    }
}
