//! Declared alignments of global and static variables, from DWARF (`DW_AT_alignment`, which
//! compilers emit for `alignas(N)`, `_Alignas(N)` and `__attribute__((aligned(N)))`, on the
//! variable or on its type).
//!
//! The audit's prediction shifts data within a cache line to find false sharing that another
//! placement would expose. A variable declared aligned cannot land at an offset that is not a
//! multiple of its alignment, however the program is linked, so shifts that break the
//! declaration predict a layout that cannot happen.

use std::collections::BTreeMap;

use addr2line::gimli;
use gimli::AttributeValue;

/// How many type links (typedef, const, volatile, array element) are followed from a
/// variable to find a declared alignment: real programs need a few, and a cycle in corrupt
/// DWARF must end.
const MAX_TYPE_DEPTH: usize = 16;

/// Link-time start address of each variable with a declared alignment → that alignment in
/// bytes (the largest, when a variable and its type both declare one). Units or entries that
/// cannot be read are skipped: a missing entry only means no shift is ruled out.
pub(crate) fn declared_alignments<R: gimli::Reader>(dwarf: &gimli::Dwarf<R>) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    for_each_global_variable(dwarf, |unit, entry, addr| {
        let declared = std::iter::once(entry.clone())
            .chain(specification(unit, entry))
            .filter_map(|e| alignment_of(unit, &e))
            .max();
        if let Some(a) = declared {
            let slot = out.entry(addr).or_insert(a);
            *slot = (*slot).max(a);
        }
    });
    out
}

/// Calls `f` with the unit, entry and link-time address of every global or static variable
/// (see [`location_address`]). Units or entries that cannot be read are skipped.
pub(crate) fn for_each_global_variable<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    mut f: impl FnMut(&gimli::Unit<R>, &gimli::DebuggingInformationEntry<'_, '_, R>, u64),
) {
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let mut entries = unit.entries();
        while let Ok(Some((_, entry))) = entries.next_dfs() {
            if entry.tag() != gimli::DW_TAG_variable {
                continue;
            }
            if let Some(addr) = location_address(dwarf, &unit, entry) {
                f(&unit, entry, addr);
            }
        }
    }
}

/// The declaration a variable's definition refers to (`DW_AT_specification`: a C++ static
/// member or namespace member defined apart from its declaration), if any.
pub(crate) fn specification<'u, R: gimli::Reader>(
    unit: &'u gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<gimli::DebuggingInformationEntry<'u, 'u, R>> {
    match entry.attr_value(gimli::DW_AT_specification) {
        Ok(Some(AttributeValue::UnitRef(o))) => unit.entry(o).ok(),
        _ => None,
    }
}

/// The address of a variable whose location is a single address (`DW_OP_addr` or
/// `DW_OP_addrx`): a global or static, not a local or thread-local one.
pub(crate) fn location_address<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<u64> {
    let Ok(Some(AttributeValue::Exprloc(expr))) = entry.attr_value(gimli::DW_AT_location) else {
        return None;
    };
    let mut ops = expr.0.clone();
    let op = gimli::Operation::parse(&mut ops, unit.encoding()).ok()?;
    // Anything after the address (e.g. DW_OP_GNU_push_tls_address) makes it something else.
    if !ops.is_empty() {
        return None;
    }
    match op {
        gimli::Operation::Address { address } => Some(address),
        gimli::Operation::AddressIndex { index } => dwarf.address(unit, index).ok(),
        _ => None,
    }
}

/// `DW_AT_alignment` of `entry`, else of its type, following typedefs, qualifiers and array
/// element types.
fn alignment_of<R: gimli::Reader>(
    unit: &gimli::Unit<R>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, R>,
) -> Option<u64> {
    let mut current = entry.clone();
    for _ in 0..MAX_TYPE_DEPTH {
        if let Ok(Some(v)) = current.attr_value(gimli::DW_AT_alignment) {
            if let Some(a) = v.udata_value().filter(|a| a.is_power_of_two()) {
                return Some(a);
            }
        }
        let Ok(Some(AttributeValue::UnitRef(o))) = current.attr_value(gimli::DW_AT_type) else {
            return None;
        };
        current = unit.entry(o).ok()?;
    }
    None
}
