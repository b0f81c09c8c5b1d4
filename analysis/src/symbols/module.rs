//! One module's file on disk: its symbol tables, its load segments and (lazily) its DWARF.
//!
//! Symbols and segments are copied out of the file when it is opened, so no struct borrows
//! from another (the `object` crate's views borrow the bytes), and the bytes are dropped. The
//! DWARF context is built (the file read again, its sections copied into shared buffers) on
//! the first code lookup in the module only: most modules of a trace (libc, libm, the shim)
//! are asked about data addresses or never at all, and parsing their line tables up front
//! would dominate start-up. The declared alignments of variables (`alignment.rs`) are read
//! with it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use addr2line::gimli;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
use tracing::{debug, warn};

use super::alignment::declared_alignments;
use super::declarations::declarations;
use super::frames::CallSites;
use super::lambdas::{lambdas, Lambdas};
use super::members::{global_shapes, TypeShape};
use super::regions::{outlined_regions, OutlinedRegions};
use super::statics::{function_statics, FunctionStatic};
use super::{hex, SymbolError};

/// The gimli reader: sections copied into shared buffers, so the context owns its data.
pub(crate) type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;
/// An addr2line context over [`Reader`].
pub(crate) type Context = addr2line::Context<Reader>;

/// A sized symbol `[start, end)` in link-time addresses.
#[derive(Debug, Clone)]
pub(crate) struct Sym {
    pub start: u64,
    pub end: u64,
    pub name: Arc<str>,
}

/// Sized symbols sorted by start, with a running maximum of ends so that a lookup stays right
/// when symbols nest or overlap (aliases, a struct and a member exported separately).
#[derive(Debug, Default)]
pub(crate) struct SymbolTable {
    syms: Vec<Sym>,
    /// `max_end[i]` = the largest `end` among `syms[..=i]`.
    max_end: Vec<u64>,
}

/// Binding rank for choosing among aliases of one `[start, end)`: global names are what a
/// programmer declared; local ones (`counter.0`) and weak ones are compiler or libc aliases.
fn rank(sym: &object::Symbol<'_, '_>) -> u8 {
    if sym.is_global() && !sym.is_weak() {
        0
    } else if sym.is_weak() {
        1
    } else {
        2
    }
}

/// A symbol's name as a reader writes it: C++ (`_Z…`) and Rust (`_R…`) names demangled,
/// every other name as it is. Demangling any name would read a C global `a` as the C++ type
/// code for `signed char` and `y` as `unsigned long long`.
pub(super) fn demangled(name: String) -> std::borrow::Cow<'static, str> {
    if !(name.starts_with("_Z") || name.starts_with("_R")) {
        return name.into();
    }
    // A legacy Rust name (`_ZN…17h<16 hex digits>E`) is a valid C++ name too, and the Rust
    // demangler reads any `_ZN…E` name as a Rust path (`_GLOBAL__N_1::counters` for C++'s
    // `(anonymous namespace)::counters`): Rust first only for names with the Rust hash.
    let (first, second) = if name.starts_with("_R") || legacy_rust_hash(&name) {
        (gimli::DW_LANG_Rust, gimli::DW_LANG_C_plus_plus)
    } else {
        (gimli::DW_LANG_C_plus_plus, gimli::DW_LANG_Rust)
    };
    let whole = addr2line::demangle(&name, first).or_else(|| addr2line::demangle(&name, second));
    match whole.or_else(|| demangled_name_part(&name)) {
        Some(d) => d.into(),
        None => name.into(),
    }
}

/// Whether `name` ends like a legacy Rust symbol: its last path element `17h` and 16 hex
/// digits, then `E` (and possibly a `.llvm.…` or other suffix after it).
fn legacy_rust_hash(name: &str) -> bool {
    let name = name.split('.').next().unwrap_or(name);
    name.strip_suffix('E')
        .and_then(|n| n.get(n.len().checked_sub(19)?..))
        .is_some_and(|h| h.starts_with("17h") && h[3..].bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Longest mangled name [`demangled_name_part`] tries (each try parses a prefix; names this
/// long are rare, and a report keeps the mangled name then).
const PARTIAL_DEMANGLE_MAX: usize = 1024;

/// For a C++ name the demangler cannot parse whole: its function or object name alone, as the
/// longest leading part of the mangled name that demangles to a plain name, followed by
/// `(…)` for the signature left out. GCC mangles some expressions in template signatures in
/// a form cpp_demangle rejects (`srSt11__is_scalarIT0_E` in libstdc++'s
/// `std::__fill_a1<double*, double>`), and a name like that is still better read than
/// `_ZSt9__fill_a1IPddEN9__gnu_cxx…`. A leading part that parses as a function (with a
/// parameter list) is not taken: it would name parameters the symbol does not have.
fn demangled_name_part(name: &str) -> Option<String> {
    if !name.starts_with("_Z") || name.len() > PARTIAL_DEMANGLE_MAX || !name.is_ascii() {
        return None;
    }
    (3..name.len()).rev().find_map(|end| {
        let d = addr2line::demangle(&name[..end], gimli::DW_LANG_C_plus_plus)?;
        (!d.contains('(')).then(|| format!("{d}(…)"))
    })
}

impl SymbolTable {
    fn build(mut raw: Vec<(u64, u64, u8, String)>) -> Self {
        // Deterministic alias choice: by range, then binding rank, then fewer leading
        // underscores (`environ` over `__environ`), then the name itself.
        raw.sort_by(|a, b| {
            let under = |s: &str| s.len() - s.trim_start_matches('_').len();
            (a.0, a.1, a.2, under(&a.3), &a.3).cmp(&(b.0, b.1, b.2, under(&b.3), &b.3))
        });
        raw.dedup_by(|later, first| later.0 == first.0 && later.1 == first.1);
        let syms: Vec<Sym> = raw
            .into_iter()
            .map(|(start, end, _, name)| Sym {
                start,
                end,
                name: Arc::from(demangled(name).as_ref()),
            })
            .collect();
        let mut max_end = Vec::with_capacity(syms.len());
        let mut running = 0;
        for s in &syms {
            running = running.max(s.end);
            max_end.push(running);
        }
        SymbolTable { syms, max_end }
    }

    /// The innermost symbol (greatest start) whose range contains `addr`.
    pub fn find(&self, addr: u64) -> Option<&Sym> {
        let mut i = self.syms.partition_point(|s| s.start <= addr);
        while i > 0 {
            i -= 1;
            if self.max_end[i] <= addr {
                // No symbol at or before `i` reaches `addr`.
                return None;
            }
            let s = &self.syms[i];
            if addr < s.end {
                return Some(s);
            }
        }
        None
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }
}

/// Where the DWARF of a module is, or the built context.
enum Dwarf {
    /// Not parsed yet: the file that has `.debug_info` (the module or its separate debug
    /// file) and its build-id when it has one. Only the path is kept, not the bytes: a data
    /// lookup opens every module of the trace, and few of them are ever asked about code.
    Pending(PathBuf, Vec<u8>),
    Ready(Box<Parsed>),
    Absent,
}

/// A module's parsed DWARF: what code positions and data objects need from it.
struct Parsed {
    context: Context,
    /// Declared alignments of variables, by link-time start address (`alignment.rs`).
    alignments: BTreeMap<u64, u64>,
    /// Declaring file and line of global and static variables, by link-time start address
    /// (`declarations.rs`).
    declarations: BTreeMap<u64, (String, u32)>,
    /// Source names and type shapes of global and static variables, by link-time start
    /// address (`members.rs`).
    shapes: BTreeMap<u64, (String, Arc<TypeShape>)>,
    /// Variables declared `static` in a function, by link-time address (`statics.rs`).
    statics: BTreeMap<u64, FunctionStatic>,
    /// clang's outlined OpenMP regions and their enclosing functions (`regions.rs`).
    regions: OutlinedRegions,
    /// C++ lambda bodies and their names (`lambdas.rs`).
    lambdas: Lambdas,
}

/// A module that was read and checked against the trace's build-id.
pub(crate) struct LoadedModule {
    /// `PT_LOAD` segments in link-time addresses `[vaddr, vaddr + memsz)`.
    pub segments: Vec<(u64, u64)>,
    /// `STT_OBJECT`/`STT_COMMON` symbols with a size (globals and statics).
    pub objects: SymbolTable,
    /// `STT_FUNC` symbols with a size (fallback names when there is no DWARF).
    pub functions: SymbolTable,
    /// Its code, to place locals relative to a frame's stack pointer (`frames.rs`).
    pub call_sites: CallSites,
    dwarf: Dwarf,
}

/// Search options for separate debug files.
#[derive(Debug, Clone)]
pub(crate) struct DebugSearch<'a> {
    pub debug_dirs: &'a [PathBuf],
}

fn has_dwarf(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0 && s.file_range().is_some())
}

fn collect_symbols(
    file: &object::File<'_>,
    objects: &mut Vec<(u64, u64, u8, String)>,
    functions: &mut Vec<(u64, u64, u8, String)>,
) {
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        if sym.is_undefined() || sym.size() == 0 {
            continue;
        }
        let target = match sym.kind() {
            SymbolKind::Data => &mut *objects,
            SymbolKind::Text => &mut *functions,
            // TLS symbols hold offsets into each thread's block, not addresses.
            _ => continue,
        };
        let Ok(name) = sym.name() else { continue };
        if name.is_empty() {
            continue;
        }
        let start = sym.address();
        target.push((
            start,
            start.saturating_add(sym.size()),
            rank(&sym),
            name.to_owned(),
        ));
    }
}

impl LoadedModule {
    /// Reads `path`, refuses it when its build-id differs from `expected` (both non-empty),
    /// and finds its DWARF (in the file or a separate debug file).
    pub fn open(
        path: &str,
        expected: &[u8],
        search: &DebugSearch<'_>,
    ) -> Result<Self, SymbolError> {
        let bytes = read_regular_file(Path::new(path)).map_err(|source| SymbolError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file = object::File::parse(&*bytes).map_err(|source| SymbolError::Parse {
            path: path.to_owned(),
            source,
        })?;
        let found = file.build_id().ok().flatten().unwrap_or_default().to_vec();
        if !expected.is_empty() && !found.is_empty() && expected != found.as_slice() {
            return Err(SymbolError::StaleBuildId {
                path: path.to_owned(),
                expected: hex(expected),
                found: hex(&found),
            });
        }
        if !expected.is_empty() && found.is_empty() {
            debug!(
                path,
                "module has no build-id on disk; cannot check it against the trace"
            );
        }
        let segments = file
            .segments()
            .map(|s| (s.address(), s.address().saturating_add(s.size())))
            .collect();
        let (mut objects, mut functions) = (Vec::new(), Vec::new());
        collect_symbols(&file, &mut objects, &mut functions);
        let in_file = has_dwarf(&file);
        let debuglink = file
            .gnu_debuglink()
            .ok()
            .flatten()
            .and_then(|(name, _crc)| std::str::from_utf8(name).ok().map(str::to_owned));
        let dwarf = if in_file {
            Dwarf::Pending(PathBuf::from(path), found.clone())
        } else {
            // The build-id of the module itself (what the trace recorded, or the file's).
            let id = if found.is_empty() { expected } else { &found };
            match find_debug_file(path, id, debuglink.as_deref(), search) {
                Some((debug_bytes, debug_path)) => {
                    // A stripped module keeps only .dynsym; the debug file has .symtab.
                    let mut debug_id = Vec::new();
                    if let Ok(df) = object::File::parse(&*debug_bytes) {
                        collect_symbols(&df, &mut objects, &mut functions);
                        debug_id = df.build_id().ok().flatten().unwrap_or_default().to_vec();
                    }
                    debug!(path, debug = %debug_path.display(), "using separate debug file");
                    Dwarf::Pending(debug_path, debug_id)
                }
                None => {
                    debug!(path, "no DWARF: functions from the symbol table only");
                    Dwarf::Absent
                }
            }
        };
        let objects = SymbolTable::build(objects);
        let functions = SymbolTable::build(functions);
        debug!(
            path,
            objects = objects.len(),
            functions = functions.len(),
            "opened module"
        );
        Ok(LoadedModule {
            segments,
            objects,
            functions,
            call_sites: CallSites::new(PathBuf::from(path), found.clone()),
            dwarf,
        })
    }

    /// Whether the module has (or had, before parsing) DWARF.
    pub fn has_debug_info(&self) -> bool {
        !matches!(self.dwarf, Dwarf::Absent)
    }

    /// The DWARF context, built on first use. A module whose DWARF cannot be parsed is
    /// logged once and treated as having none.
    pub fn context(&mut self) -> Option<&Context> {
        if let Dwarf::Pending(..) = self.dwarf {
            let Dwarf::Pending(path, build_id) = std::mem::replace(&mut self.dwarf, Dwarf::Absent)
            else {
                return None;
            };
            match build_context(&path, &build_id) {
                Ok(parsed) => self.dwarf = Dwarf::Ready(Box::new(parsed)),
                Err(e) => {
                    warn!(path = %path.display(), error = %e, "unreadable DWARF; using symbol names only")
                }
            }
        }
        match &self.dwarf {
            Dwarf::Ready(parsed) => Some(&parsed.context),
            _ => None,
        }
    }

    /// The variable declared `static` in a function that starts at link-time address
    /// `start`, if DWARF says so (parses the DWARF on first use, as [`Self::context`]).
    pub fn function_static(&mut self, start: u64) -> Option<&FunctionStatic> {
        self.context()?;
        match &self.dwarf {
            Dwarf::Ready(parsed) => parsed.statics.get(&start),
            _ => None,
        }
    }

    /// The function enclosing the clang-outlined OpenMP region whose code holds link-time
    /// address `addr` (see `regions.rs`; the DWARF must already be parsed, as by
    /// [`Self::context`]).
    pub fn outlined_parent(&self, addr: u64) -> Option<&str> {
        match &self.dwarf {
            Dwarf::Ready(parsed) => parsed.regions.parent_at(addr),
            _ => None,
        }
    }

    /// The names of the C++ lambdas whose code holds link-time address `addr`, innermost
    /// first (see `lambdas.rs`; the DWARF must already be parsed, as by [`Self::context`]).
    pub fn lambdas_at(&self, addr: u64) -> Vec<&str> {
        match &self.dwarf {
            Dwarf::Ready(parsed) if !parsed.lambdas.is_empty() => parsed.lambdas.names_at(addr),
            _ => Vec::new(),
        }
    }

    /// The alignment declared in DWARF for the variable starting at link-time address
    /// `start`, if any (parses the DWARF on first use, as [`Self::context`]).
    pub fn declared_alignment(&mut self, start: u64) -> Option<u64> {
        self.context()?;
        match &self.dwarf {
            Dwarf::Ready(parsed) => parsed.alignments.get(&start).copied(),
            _ => None,
        }
    }

    /// The source name and type shape DWARF gives the variable starting at link-time address
    /// `start`, if any (parses the DWARF on first use, as [`Self::context`]).
    pub fn shape(&mut self, start: u64) -> Option<(String, Arc<TypeShape>)> {
        self.context()?;
        match &self.dwarf {
            Dwarf::Ready(parsed) => parsed.shapes.get(&start).cloned(),
            _ => None,
        }
    }

    /// The declaring file and line DWARF gives the variable starting at link-time address
    /// `start`, if any (parses the DWARF on first use, as [`Self::context`]).
    pub fn declaration(&mut self, start: u64) -> Option<(String, u32)> {
        self.context()?;
        match &self.dwarf {
            Dwarf::Ready(parsed) => parsed.declarations.get(&start).cloned(),
            _ => None,
        }
    }
}

/// Reads a module or debug file: only a regular file (a trace naming `/dev/zero` or a pipe as
/// a module must not make the audit read forever or wait for input), checked before it is
/// opened and again through the handle, and no more than the size it states (files in `/proc`
/// state 0 and read on: `/proc/self/pagemap` for hundreds of GiB).
pub(super) fn read_regular_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let refuse = |what: &str| Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, what));
    if !std::fs::metadata(path)?.is_file() {
        return refuse("not a regular file");
    }
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return refuse("not a regular file");
    }
    let mut bytes = Vec::new();
    file.take(meta.len().saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 != meta.len() {
        return refuse("its size changed while it was read, or it is not what it says it is");
    }
    Ok(bytes)
}

/// Reads `path` again and builds its DWARF context and alignment table, refusing a file
/// whose build-id is no longer the one seen when the module was opened (replaced in between).
fn build_context(path: &Path, build_id: &[u8]) -> Result<Parsed, String> {
    let bytes = read_regular_file(path).map_err(|e| e.to_string())?;
    let file = object::File::parse(&*bytes).map_err(|e| e.to_string())?;
    let now = file.build_id().ok().flatten().unwrap_or_default();
    if now != build_id {
        return Err(format!(
            "file changed since it was opened (build-id {} now, {} before)",
            hex(now),
            hex(build_id)
        ));
    }
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Reader, String> {
        let data: Arc<[u8]> = match file.section_by_name(id.name()) {
            // Compressed sections need object's `compression` feature, which we leave out;
            // the error says so and the module falls back to symbol names.
            Some(section) => Arc::from(
                &*section
                    .uncompressed_data()
                    .map_err(|e| format!("{}: {e}", id.name()))?,
            ),
            None => Arc::from(&[][..]),
        };
        Ok(gimli::EndianArcSlice::new(data, endian))
    };
    let dwarf = gimli::Dwarf::load(load)?;
    let alignments = declared_alignments(&dwarf);
    let declarations = declarations(&dwarf);
    let shapes = global_shapes(&dwarf);
    let statics = function_statics(&dwarf);
    let regions = outlined_regions(&dwarf);
    let lambdas = lambdas(&dwarf);
    let context = Context::from_dwarf(dwarf).map_err(|e| e.to_string())?;
    Ok(Parsed {
        context,
        alignments,
        declarations,
        shapes,
        statics,
        regions,
        lambdas,
    })
}

/// Looks for a separate debug file: by build-id under each debug directory
/// (`DIR/.build-id/ab/cdef….debug`), then by `.gnu_debuglink` name next to the module, in its
/// `.debug/` subdirectory and under each debug directory (GDB's order). A candidate is used
/// only if it has DWARF and, when both have a build-id, the same build-id as the module.
fn find_debug_file(
    path: &str,
    build_id: &[u8],
    debuglink: Option<&str>,
    search: &DebugSearch<'_>,
) -> Option<(Vec<u8>, PathBuf)> {
    let mut candidates = Vec::new();
    if build_id.len() >= 2 {
        let id = hex(build_id);
        let (head, tail) = id.split_at(2);
        for dir in search.debug_dirs {
            candidates.push(
                dir.join(".build-id")
                    .join(head)
                    .join(format!("{tail}.debug")),
            );
        }
    }
    if let Some(link) = debuglink {
        let module_dir = Path::new(path).parent().unwrap_or(Path::new("/"));
        candidates.push(module_dir.join(link));
        candidates.push(module_dir.join(".debug").join(link));
        for dir in search.debug_dirs {
            let relative = module_dir.strip_prefix("/").unwrap_or(module_dir);
            candidates.push(dir.join(relative).join(link));
        }
    }
    for candidate in candidates {
        if candidate == Path::new(path) {
            continue;
        }
        let Ok(bytes) = read_regular_file(&candidate) else {
            continue;
        };
        let Ok(file) = object::File::parse(&*bytes) else {
            continue;
        };
        let id = file.build_id().ok().flatten().unwrap_or_default();
        if !build_id.is_empty() && !id.is_empty() && id != build_id {
            debug!(candidate = %candidate.display(), "debug file has another build-id; skipped");
            continue;
        }
        if !has_dwarf(&file) {
            continue;
        }
        return Some((bytes, candidate));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::demangled;

    #[test]
    fn only_mangled_names_are_demangled() {
        // Plain C names that the C++ demangler would read as type codes.
        for c in ["a", "y", "x", "d", "i", "counters"] {
            assert_eq!(demangled(c.to_string()), c);
        }
        assert_eq!(demangled("_ZN2ns3AccE".to_string()), "ns::Acc");
        assert_eq!(demangled("_ZL5table".to_string()), "table");
        // GCC's `sr` + `St` expression, which cpp_demangle rejects (libstdc++'s `std::fill`
        // at -O0): the name without its signature, not the mangled name.
        let fill = "_ZSt9__fill_a1IPddEN9__gnu_cxx11__enable_ifIXsrSt11__is_scalarIT0_E7__\
                    valueEvE6__typeET_S8_RKS4_";
        assert_eq!(
            demangled(fill.to_string()),
            "std::__fill_a1<double*, double>(…)"
        );
        // The same with a clone suffix; a name that is no mangled name at all stays as it is.
        assert_eq!(
            demangled(format!("{fill}.isra.0")),
            "std::__fill_a1<double*, double>(…)"
        );
        assert_eq!(demangled("_Zzzz".to_string()), "_Zzzz");
        // C++'s anonymous namespace, which the Rust demangler would read as a Rust path.
        assert_eq!(
            demangled("_ZN12_GLOBAL__N_18countersE".to_string()),
            "(anonymous namespace)::counters"
        );
        // A legacy Rust name keeps the Rust reading (without its hash).
        assert_eq!(
            demangled("_ZN4core3ptr13drop_in_place17h0123456789abcdefE".to_string()),
            "core::ptr::drop_in_place"
        );
        // Names the demangler reads whole are not cut.
        assert_eq!(demangled("_ZN3Foo3runEl".to_string()), "Foo::run(long)");
    }
}
