//! Where global and static variables are declared, from DWARF (`DW_AT_decl_file` and
//! `DW_AT_decl_line`, on the variable or on the declaration its `DW_AT_specification` names:
//! a C++ static member or a namespace member defined apart from its declaration), for the
//! "declared here" location of a global's finding.

use std::collections::BTreeMap;

use addr2line::gimli;
use gimli::AttributeValue;

use super::alignment::{for_each_global_variable, specification};
use super::locals::decl_file;

/// Link-time start address of each global or static variable → its declaring file and line.
/// Units or entries that cannot be read are skipped: a missing entry only means the finding
/// has no declaration location.
pub(crate) fn declarations<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
) -> BTreeMap<u64, (String, u32)> {
    let mut out = BTreeMap::new();
    for_each_global_variable(dwarf, |unit, entry, addr| {
        let unit_ref = gimli::UnitRef::new(dwarf, unit);
        let site = std::iter::once(entry.clone())
            .chain(specification(unit, entry))
            .find_map(|e| {
                let file = match e.attr_value(gimli::DW_AT_decl_file).ok()?? {
                    AttributeValue::FileIndex(i) => i,
                    v => v.udata_value()?,
                };
                let line = e.attr_value(gimli::DW_AT_decl_line).ok()??.udata_value()?;
                let line = u32::try_from(line).ok().filter(|&l| l > 0)?;
                Some((decl_file(unit_ref, file)?, line))
            });
        if let Some(site) = site {
            out.entry(addr).or_insert(site);
        }
    });
    out
}
