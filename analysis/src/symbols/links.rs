//! Attributes of DWARF entries that an inlined or out-of-line instance gives through its
//! declaration: `DW_AT_abstract_origin` and `DW_AT_specification` links are followed.

use addr2line::gimli;
use gimli::AttributeValue;

/// How many `DW_AT_abstract_origin`/`DW_AT_specification` links are followed (a cycle in
/// corrupt DWARF must end).
const MAX_LINKS: usize = 8;

/// `entry`, then the entries its abstract origin or specification links lead to, one after
/// the other (at most [`MAX_LINKS`] of them).
pub(crate) fn linked<'a, R: gimli::Reader>(
    unit: &'a gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> impl Iterator<Item = gimli::DebuggingInformationEntry<'a, 'a, R>> + 'a {
    let first = unit.entry(entry.offset()).ok();
    std::iter::successors(first, move |current| {
        let link = [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification]
            .into_iter()
            .find_map(|a| match current.attr_value(a) {
                Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
                _ => None,
            })?;
        unit.entry(link).ok()
    })
    .take(MAX_LINKS)
}

/// Attribute `at` of `entry`, or of the declaration its abstract origin or specification
/// links lead to.
pub(crate) fn attr<R: gimli::Reader>(
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    at: gimli::DwAt,
) -> Option<AttributeValue<R>> {
    linked(unit, entry).find_map(|e| e.attr_value(at).ok().flatten())
}

/// A string attribute of `entry` (or its declaration).
pub(crate) fn text<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    at: gimli::DwAt,
) -> Option<String> {
    let v = attr(unit, entry, at)?;
    let s = dwarf.attr_string(unit, v).ok()?;
    Some(s.to_string_lossy().ok()?.into_owned())
}
