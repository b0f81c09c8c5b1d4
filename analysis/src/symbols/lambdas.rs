//! Names for C++ lambdas. A lambda's body is the `operator()` of a closure type the compiler
//! made inside the function that wrote the lambda. g++ gives that `operator()` no linkage
//! name where it is inlined (into `std::thread`'s `_M_run`, say), so DWARF frames name it
//! `operator()` alone, and a report said "writes at acc.cpp:9 in operator()" for every lambda
//! of a program. The closure type is a child of the enclosing function's entry in DWARF: that
//! function names the lambda, `main::{lambda}`, as the demangler writes lambdas
//! (`main::{lambda()#1}`) without the signature and number the DWARF does not give.
//!
//! Each out-of-line or inlined instance of such an `operator()` (its abstract origin or
//! specification leads to the declaration in the closure type) maps its code ranges to that
//! name; frames named `operator()` at an address take the names of the instances around it,
//! innermost first.

use std::collections::HashMap;
use std::sync::Arc;

use addr2line::gimli;

use super::links::{linked, text};
use super::module::demangled;

/// How many enclosing lambdas are followed (a cycle in corrupt DWARF must end).
const MAX_LINKS: usize = 8;

/// A lambda instance's code range: `start`, `end`, the instance's depth in its unit's entry
/// tree (an instance inlined into another lies deeper), its name.
type Range = (u64, u64, isize, Arc<str>);

/// Code ranges of lambda bodies with their names. Ranges nest (a lambda inlined into a
/// function inlined into another lambda) but never partly overlap in sane DWARF.
#[derive(Debug, Default)]
pub(crate) struct Lambdas {
    /// Sorted by start.
    ranges: Vec<Range>,
}

impl Lambdas {
    /// The names of the lambdas whose code holds link-time address `addr`, innermost (the
    /// deepest instance; of equals the shortest range) first.
    pub fn names_at(&self, addr: u64) -> Vec<&str> {
        let end = self.ranges.partition_point(|r| r.0 <= addr);
        let mut around: Vec<&Range> = self.ranges[..end].iter().filter(|r| addr < r.1).collect();
        around.sort_by_key(|r| (std::cmp::Reverse(r.2), r.1 - r.0));
        around.into_iter().map(|r| &*r.3).collect()
    }

    /// Whether any lambda was found (most C programs have none).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// The name DWARF gives a frame of an inlined or out-of-line `operator()` without a linkage
/// name: what [`Lambdas`] renames.
pub(crate) const BARE_CALL_OPERATOR: &str = "operator()";

/// Every lambda body's code ranges with its name. Units or entries that cannot be read are
/// skipped (their frames keep the name `operator()`).
pub(crate) fn lambdas<R: gimli::Reader>(dwarf: &gimli::Dwarf<R>) -> Lambdas {
    let mut ranges = Vec::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let decls = declarations(dwarf, &unit);
        if decls.is_empty() {
            continue;
        }
        let names = names(dwarf, &unit, &decls);
        let mut entries = unit.entries();
        let mut depth: isize = 0;
        while let Ok(Some((delta, entry))) = entries.next_dfs() {
            depth += delta;
            if !matches!(
                entry.tag(),
                gimli::DW_TAG_subprogram | gimli::DW_TAG_inlined_subroutine
            ) {
                continue;
            }
            let Some(name) = declaration_of(&unit, entry, &decls).and_then(|d| names.get(&d))
            else {
                continue;
            };
            if let Ok(mut it) = dwarf.die_ranges(&unit, entry) {
                while let Ok(Some(r)) = it.next() {
                    if r.begin < r.end {
                        ranges.push((r.begin, r.end, depth, Arc::clone(name)));
                    }
                }
            }
        }
    }
    ranges.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    Lambdas { ranges }
}

/// The unit's lambda `operator()` declarations, each with the entry of the function its
/// closure type is written in (`None` at namespace scope).
fn declarations<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
) -> HashMap<gimli::UnitOffset<R::Offset>, Option<gimli::UnitOffset<R::Offset>>> {
    let mut out = HashMap::new();
    // The entries around the one being read: depth, tag, offset, and for types whether they
    // are closure types.
    let mut stack: Vec<(isize, gimli::DwTag, gimli::UnitOffset<R::Offset>, bool)> = Vec::new();
    let mut depth: isize = 0;
    let mut entries = unit.entries();
    while let Ok(Some((delta, entry))) = entries.next_dfs() {
        depth += delta;
        while stack.last().is_some_and(|&(d, ..)| d >= depth) {
            stack.pop();
        }
        let tag = entry.tag();
        let closure = matches!(tag, gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type)
            && own_name(dwarf, unit, entry).is_none_or(|n| n.starts_with("<lambda"));
        if tag == gimli::DW_TAG_subprogram
            && own_name(dwarf, unit, entry).as_deref() == Some(BARE_CALL_OPERATOR)
            && stack.last().is_some_and(|&(.., is_closure)| is_closure)
        {
            let enclosing = stack
                .iter()
                .rev()
                .find(|&&(_, t, ..)| t == gimli::DW_TAG_subprogram)
                .map(|&(_, _, o, _)| o);
            out.insert(entry.offset(), enclosing);
        }
        stack.push((depth, tag, entry.offset(), closure));
    }
    out
}

/// The lambda declaration an instance's (or declaration's) links lead to, if any.
fn declaration_of<R: gimli::Reader>(
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    decls: &HashMap<gimli::UnitOffset<R::Offset>, Option<gimli::UnitOffset<R::Offset>>>,
) -> Option<gimli::UnitOffset<R::Offset>> {
    linked(unit, entry)
        .map(|e| e.offset())
        .find(|o| decls.contains_key(o))
}

/// Each declaration's name: its enclosing function's (itself a lambda's, for a lambda
/// written in one) followed by `::{lambda}`.
fn names<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    decls: &HashMap<gimli::UnitOffset<R::Offset>, Option<gimli::UnitOffset<R::Offset>>>,
) -> HashMap<gimli::UnitOffset<R::Offset>, Arc<str>> {
    decls
        .keys()
        .map(|&d| {
            let mut suffix = String::from("::{lambda}");
            let mut enclosing = decls.get(&d).copied().flatten();
            let mut prefix = None;
            for _ in 0..MAX_LINKS {
                let Some(e) = enclosing.and_then(|o| unit.entry(o).ok()) else {
                    break;
                };
                // A lambda written in a lambda: the outer one's enclosing function, and
                // another `::{lambda}`.
                if let Some(outer) = declaration_of(unit, &e, decls) {
                    suffix.insert_str(0, "::{lambda}");
                    enclosing = decls.get(&outer).copied().flatten();
                    continue;
                }
                prefix = function_name(dwarf, unit, &e);
                break;
            }
            let name = match prefix {
                Some(p) => format!("{p}{suffix}"),
                None => suffix.trim_start_matches("::").to_string(),
            };
            (d, Arc::from(name.as_str()))
        })
        .collect()
}

/// A function entry's name as its frames are named: the demangled linkage name, else the
/// plain name (through abstract origins and specifications).
fn function_name<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<String> {
    match text(dwarf, unit, entry, gimli::DW_AT_linkage_name)
        .or_else(|| text(dwarf, unit, entry, gimli::DW_AT_MIPS_linkage_name))
    {
        Some(l) => Some(demangled(l).into_owned()),
        None => text(dwarf, unit, entry, gimli::DW_AT_name),
    }
}

/// `entry`'s own `DW_AT_name` (no links followed).
fn own_name<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<String> {
    let v = entry.attr_value(gimli::DW_AT_name).ok()??;
    let s = dwarf.attr_string(unit, v).ok()?;
    Some(s.to_string_lossy().ok()?.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_innermost_lambda_comes_first() {
        let l = Lambdas {
            ranges: vec![
                (0x100, 0x200, 3, Arc::from("main::{lambda}")),
                (0x140, 0x160, 5, Arc::from("main::{lambda}::{lambda}")),
                // The outer instance's range in pieces, one of them short, and an inner one
                // covering exactly the same code as its outer one: depth decides.
                (0x280, 0x284, 2, Arc::from("g::{lambda}")),
                (0x280, 0x290, 4, Arc::from("g::{lambda}::{lambda}")),
                (0x300, 0x310, 2, Arc::from("f::{lambda}")),
                (0x300, 0x310, 4, Arc::from("f::{lambda}::{lambda}")),
            ],
        };
        assert_eq!(
            l.names_at(0x150),
            ["main::{lambda}::{lambda}", "main::{lambda}"]
        );
        assert_eq!(l.names_at(0x282), ["g::{lambda}::{lambda}", "g::{lambda}"]);
        assert_eq!(l.names_at(0x305), ["f::{lambda}::{lambda}", "f::{lambda}"]);
        assert_eq!(l.names_at(0x100), ["main::{lambda}"]);
        assert!(l.names_at(0x200).is_empty());
        assert!(l.names_at(0x310).is_empty());
    }
}
