//! Variables declared `static` inside a function, from DWARF: their symbols carry names the
//! compiler made up (gcc: `partial.0`, numbered per translation unit; clang: `run.partial`),
//! which reports should not show. DWARF nests such a variable in its function's entry, so
//! the audit can say `static partial of run` instead, the same with either compiler and
//! however the compiler numbered it.

use std::collections::BTreeMap;

use super::alignment::location_address;
use super::links::text;
use addr2line::gimli;

/// A variable's name and the function that declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FunctionStatic {
    /// The variable's name in the source.
    pub name: String,
    /// The function that declares it, when its entry is named (clang leaves the entry of a
    /// function it inlined everywhere empty; its symbol `FUNCTION.NAME` still says).
    pub function: Option<String>,
}

/// Link-time address of each variable with static storage declared inside a function → its
/// name and that function. Units or entries that cannot be read are skipped (the symbol's
/// own name is then used).
pub(crate) fn function_statics<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
) -> BTreeMap<u64, FunctionStatic> {
    let mut out = BTreeMap::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let mut entries = unit.entries();
        let mut depth: isize = 0;
        // Enclosing functions with their depths, innermost last.
        let mut functions: Vec<(isize, Option<String>)> = Vec::new();
        while let Ok(Some((delta, entry))) = entries.next_dfs() {
            depth += delta;
            while functions.last().is_some_and(|&(d, _)| d >= depth) {
                functions.pop();
            }
            match entry.tag() {
                gimli::DW_TAG_subprogram => {
                    functions.push((depth, text(dwarf, &unit, entry, gimli::DW_AT_name)));
                }
                gimli::DW_TAG_variable => {
                    let Some((_, function)) = functions.last() else {
                        continue;
                    };
                    let Some(addr) = location_address(dwarf, &unit, entry) else {
                        continue;
                    };
                    if let Some(name) = text(dwarf, &unit, entry, gimli::DW_AT_name) {
                        out.entry(addr).or_insert(FunctionStatic {
                            name,
                            function: function.clone(),
                        });
                    }
                }
                _ => {}
            }
        }
    }
    out
}
