//! Names for the functions compilers outline OpenMP regions into. Reports name code by its
//! function, and a parallel region's body is a function the compiler made: gcc calls it
//! `main._omp_fn.0` (numbered per file, so the name changes when a region is added above it),
//! clang `.omp_outlined.` around `.omp_outlined._debug__` (the same names for every region of
//! the program). Either way the user wrote the region inside a function of their own, and
//! reports say `main (OpenMP region)` with both compilers.
//!
//! gcc's name starts with the enclosing function's. clang's names say nothing, so its parent
//! is found in DWARF: in the same compilation unit and source file, the function whose
//! declaration is the last one at or above the region's (`DW_AT_decl_line`) — the function
//! whose text holds the pragma. Each outlined function's code ranges map to that name.

use std::borrow::Cow;
use std::sync::Arc;

use addr2line::gimli;
use gimli::AttributeValue;

use super::links::{attr, text};
use super::locals::decl_file;
use super::module::demangled;

/// What reports append to the enclosing function's name.
const REGION_SUFFIX: &str = " (OpenMP region)";

/// Code ranges of clang's outlined region functions, each with its enclosing function.
#[derive(Debug, Default)]
pub(crate) struct OutlinedRegions {
    /// `(start, end, parent)`, sorted by start; ranges do not overlap.
    ranges: Vec<(u64, u64, Arc<str>)>,
}

impl OutlinedRegions {
    /// The function enclosing the outlined region whose code holds link-time address `addr`.
    pub fn parent_at(&self, addr: u64) -> Option<&str> {
        let i = self.ranges.partition_point(|&(start, _, _)| start <= addr);
        let (start, end, parent) = self.ranges.get(i.checked_sub(1)?)?;
        (*start <= addr && addr < *end).then_some(&**parent)
    }
}

/// Whether `function` (a frame's name as DWARF or the symbol table gives it) is a wrapper the
/// compiler made that only calls the code at its line: clang's `.omp_outlined.` (whose body,
/// `.omp_outlined._debug__`, holds the region's code and is the program's) and any other name
/// starting with a dot.
pub(crate) fn is_compiler_wrapper(function: &str) -> bool {
    function.starts_with('.') && !function.contains("_debug__")
}

/// The name reports give a frame named `function`: `PARENT (OpenMP region)` for an outlined
/// region (gcc's `PARENT._omp_fn.N`; clang's `.omp_outlined.…` with `parent` from
/// [`OutlinedRegions::parent_at`]), `None` for any other function or an unknown parent.
pub(crate) fn region_name(function: &str, parent: Option<&str>) -> Option<String> {
    if let Some(i) = function.find("._omp_fn.") {
        // Demangled C++ says `ns::Acc::run(long) [clone ._omp_fn.0]`.
        let prefix = function[..i].trim_end();
        let prefix = prefix.strip_suffix(" [clone").unwrap_or(prefix);
        if prefix.is_empty() {
            return None;
        }
        // A C++ function's region carries its mangled name (`_ZN3Foo3runEv._omp_fn.0`).
        let parent: Cow<'_, str> = if prefix.starts_with("_Z") {
            demangled(prefix.to_owned())
        } else {
            Cow::Borrowed(prefix)
        };
        return Some(format!("{parent}{REGION_SUFFIX}"));
    }
    if function.starts_with(".omp_outlined.") {
        return parent.map(|p| format!("{p}{REGION_SUFFIX}"));
    }
    None
}

/// A subprogram's declaration as the parent search needs it.
struct Declared {
    /// The declaring file's path (DWARF 5 may list the primary source file twice, as file 0
    /// and file 1, so indices are not compared).
    file: String,
    line: u64,
    /// The demangled linkage name, else the plain name (what addr2line shows for a frame).
    name: String,
}

/// The name reports show and the declaration's file and line of `entry`.
fn declaration<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    language: Option<gimli::DwLang>,
) -> Option<Declared> {
    let plain = text(dwarf, unit, entry, gimli::DW_AT_name)?;
    let linkage = text(dwarf, unit, entry, gimli::DW_AT_linkage_name)
        .or_else(|| text(dwarf, unit, entry, gimli::DW_AT_MIPS_linkage_name));
    let name = match linkage {
        // By the unit's language, else as a symbol's name (which also names what the
        // demangler cannot parse whole).
        Some(l) => match addr2line::demangle_auto(Cow::Borrowed(&l), language) {
            Cow::Owned(d) => d,
            Cow::Borrowed(_) => demangled(l).into_owned(),
        },
        None => plain,
    };
    let index = match attr(unit, entry, gimli::DW_AT_decl_file)? {
        AttributeValue::FileIndex(i) => i,
        v => v.udata_value()?,
    };
    let file = decl_file(gimli::UnitRef::new(dwarf, unit), index)?;
    let line = attr(unit, entry, gimli::DW_AT_decl_line)?.udata_value()?;
    Some(Declared { file, line, name })
}

/// Every clang outlined region function's code ranges with its enclosing function. Units or
/// entries that cannot be read are skipped (their frames keep the compiler's names).
pub(crate) fn outlined_regions<R: gimli::Reader>(dwarf: &gimli::Dwarf<R>) -> OutlinedRegions {
    let mut ranges: Vec<(u64, u64, Arc<str>)> = Vec::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        // Functions that may enclose a region, and the outlined functions with their ranges:
        // entry offsets first, declarations (file path, demangled name) only for units that
        // have an outlined function, so programs without clang regions pay one name per entry.
        let mut parent_entries = Vec::new();
        let mut outlined_entries = Vec::new();
        let mut entries = unit.entries();
        let mut language = None;
        while let Ok(Some((_, entry))) = entries.next_dfs() {
            if entry.tag() == gimli::DW_TAG_compile_unit {
                if let Ok(Some(AttributeValue::Language(l))) =
                    entry.attr_value(gimli::DW_AT_language)
                {
                    language = Some(l);
                }
            }
            if entry.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let Some(plain) = text(dwarf, &unit, entry, gimli::DW_AT_name) else {
                continue;
            };
            if plain.starts_with(".omp_outlined.") {
                let mut code = Vec::new();
                if let Ok(mut it) = dwarf.die_ranges(&unit, entry) {
                    while let Ok(Some(r)) = it.next() {
                        if r.begin < r.end {
                            code.push((r.begin, r.end));
                        }
                    }
                }
                if !code.is_empty() {
                    outlined_entries.push((entry.offset(), code));
                }
            } else if !plain.starts_with('.')
                && !matches!(
                    entry.attr_value(gimli::DW_AT_artificial),
                    Ok(Some(AttributeValue::Flag(true)))
                )
            {
                parent_entries.push(entry.offset());
            }
        }
        if outlined_entries.is_empty() {
            continue;
        }
        let declared = |offset| {
            let entry = unit.entry(offset).ok()?;
            declaration(dwarf, &unit, &entry, language)
        };
        let parents: Vec<Declared> = parent_entries.into_iter().filter_map(declared).collect();
        let outlined: Vec<(Declared, Vec<(u64, u64)>)> = outlined_entries
            .into_iter()
            .filter_map(|(o, code)| Some((declared(o)?, code)))
            .collect();
        for (region, code) in outlined {
            let parent = parents
                .iter()
                .filter(|p| p.file == region.file && p.line <= region.line)
                .max_by_key(|p| p.line);
            if let Some(p) = parent {
                let name: Arc<str> = Arc::from(p.name.as_str());
                ranges.extend(code.into_iter().map(|(s, e)| (s, e, Arc::clone(&name))));
            }
        }
    }
    ranges.sort_by_key(|&(start, _, _)| start);
    // Overlaps would only come from corrupt DWARF: the first range wins.
    let mut kept: Vec<(u64, u64, Arc<str>)> = Vec::with_capacity(ranges.len());
    for r in ranges {
        if kept.last().is_none_or(|last| last.1 <= r.0) {
            kept.push(r);
        }
    }
    OutlinedRegions { ranges: kept }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcc_regions_are_named_by_their_prefix() {
        assert_eq!(
            region_name("main._omp_fn.0", None).as_deref(),
            Some("main (OpenMP region)")
        );
        assert_eq!(
            region_name("_ZN3Foo3runEv._omp_fn.3", None).as_deref(),
            Some("Foo::run() (OpenMP region)")
        );
        assert_eq!(
            region_name("ns::Acc::run(long) [clone ._omp_fn.0]", None).as_deref(),
            Some("ns::Acc::run(long) (OpenMP region)")
        );
        assert_eq!(region_name("._omp_fn.0", None), None);
        assert_eq!(region_name("main", Some("x")), None);
    }

    #[test]
    fn clang_regions_need_their_parent() {
        assert_eq!(region_name(".omp_outlined.", None), None);
        assert_eq!(
            region_name(".omp_outlined._debug__", Some("sum")).as_deref(),
            Some("sum (OpenMP region)")
        );
        assert!(is_compiler_wrapper(".omp_outlined."));
        assert!(is_compiler_wrapper(".omp_outlined..1"));
        assert!(!is_compiler_wrapper(".omp_outlined._debug__"));
        assert!(!is_compiler_wrapper(".omp_outlined._debug__.1"));
        assert!(!is_compiler_wrapper("main._omp_fn.0"));
    }

    #[test]
    fn parents_are_found_by_address() {
        let regions = OutlinedRegions {
            ranges: vec![
                (0x100, 0x180, Arc::from("a")),
                (0x200, 0x210, Arc::from("b")),
            ],
        };
        assert_eq!(regions.parent_at(0x100), Some("a"));
        assert_eq!(regions.parent_at(0x17f), Some("a"));
        assert_eq!(regions.parent_at(0x180), None);
        assert_eq!(regions.parent_at(0xff), None);
        assert_eq!(regions.parent_at(0x20f), Some("b"));
        assert_eq!(regions.parent_at(0x210), None);
    }
}
