//! Attributes of DWARF entries that an inlined or out-of-line instance gives through its
//! declaration: `DW_AT_abstract_origin` and `DW_AT_specification` links are followed.

use addr2line::gimli;
use gimli::AttributeValue;

/// How many `DW_AT_abstract_origin`/`DW_AT_specification` links are followed (a cycle in
/// corrupt DWARF must end).
const MAX_LINKS: usize = 8;

/// Attribute `at` of `entry`, or of the declaration its abstract origin or specification
/// links lead to.
pub(crate) fn attr<R: gimli::Reader>(
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
    at: gimli::DwAt,
) -> Option<AttributeValue<R>> {
    let mut current = entry.clone();
    for _ in 0..MAX_LINKS {
        if let Ok(Some(v)) = current.attr_value(at) {
            return Some(v);
        }
        let link = [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification]
            .into_iter()
            .find_map(|a| match current.attr_value(a) {
                Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
                _ => None,
            })?;
        current = unit.entry(link).ok()?;
    }
    None
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
