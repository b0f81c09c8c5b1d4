//! Symbolization: code positions to functions and source lines, data addresses to global
//! objects, repo-relative paths for reports.
//!
//! A [`Symbolizer`] is built from a trace's module map (`TraceFile::modules()`: the header's
//! modules plus later `dlopen` updates). Each module's file is opened on first need, checked
//! against the build-id the trace recorded, and its DWARF parsed on the first code lookup in
//! it. A module whose file changed since recording (build-ids differ) is reported as stale and
//! answers nothing: a wrong line is worse than none.
//!
//! **Code positions.** A trace's code position is the callback's return address minus one, so
//! it already lies inside the call instruction that made the access (docs/tracer.md); the same
//! holds for allocation sites. [`Symbolizer::code`] looks up exactly the address it is given
//! and must not be handed a position with another 1 subtracted, nor a raw return address.
//!
//! **Data addresses.** [`Symbolizer::data`] finds global and static objects in the modules'
//! symbol tables. Heap blocks come from the trace's `Alloc`/`Free` events, which only the
//! caller sees in order: see [`crate::heap::HeapMap`] and [`Symbolizer::classify`]. Stack
//! addresses are known by the frames a trace records where a thread hands its stack to
//! others (before a parallel region or a thread creation; [`crate::stack::StackMap`]):
//! [`Symbolizer::stack_object`] names the local variable from DWARF, or the function whose
//! frame it is. Other stack addresses are [`DataObject::Unknown`], as is thread-local storage
//! (TLS symbols are per-thread offsets).

mod alignment;
mod assigned;
mod callees;
mod declarations;
mod frames;
mod lambdas;
mod links;
use frames::FrameRule;
mod locals;
mod members;
mod module;
mod path;
mod regions;
mod source;
mod statics;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use cachescope_schema::{CodePos, ModuleInfo};
use tracing::{debug, warn};

use crate::heap::{HeapBlock, HeapMap};
use crate::stack::StackSlot;
use callees::Allocator;
use locals::{FrameRegister, LocalVar};
use members::Derived;
pub use members::{HeapVariable, Member, ShapeKind, TypeShape};
use module::{DebugSearch, LoadedModule};
pub use path::{file_uri, relative_path};
use source::SourceLines;

/// Why a module cannot be used for symbolization.
#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    /// The module's file could not be read (deleted, no permission, or not a file: the vDSO).
    #[error("cannot read module {path}: {source}")]
    Read {
        /// The module path from the trace.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an object file `object` can read.
    #[error("module {path} is not a readable object file: {source}")]
    Parse {
        /// The module path from the trace.
        path: String,
        /// The parse error.
        #[source]
        source: object::Error,
    },
    /// The file on disk is not the one that was recorded.
    #[error(
        "module {path} changed since recording (build-id {found} on disk, {expected} in the trace)"
    )]
    StaleBuildId {
        /// The module path from the trace.
        path: String,
        /// The build-id the trace recorded, in hex.
        expected: String,
        /// The build-id of the file on disk, in hex.
        found: String,
    },
}

/// Options of a [`Symbolizer`].
#[derive(Debug, Clone)]
pub struct SymbolizerOptions {
    /// Directories searched for separate debug files, by build-id
    /// (`DIR/.build-id/ab/cdef….debug`) and by `.gnu_debuglink`. Default: `/usr/lib/debug`.
    pub debug_dirs: Vec<PathBuf>,
}

impl Default for SymbolizerOptions {
    fn default() -> Self {
        SymbolizerOptions {
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
        }
    }
}

/// A caller into which the code was inlined, with the position of the inlined call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlinedCall {
    /// The calling function (demangled; an OpenMP region's outlined function as
    /// `PARENT (OpenMP region)`, see [`CodeLocation::function`]).
    pub function: Option<String>,
    /// The function is a wrapper the compiler made that only calls the code at this line
    /// (clang's `.omp_outlined.`, names starting with a dot), not the program's code.
    pub compiler_made: bool,
    /// Source file of the call site, as DWARF gives it (usually absolute).
    pub file: Option<String>,
    /// Line of the call site.
    pub line: Option<u32>,
    /// Column of the call site (1-based; `None` when unknown).
    pub column: Option<u32>,
    /// `line` is not the code's own: DWARF gave it line 0 (code the compiler merged from
    /// several lines), and `line` is the nearest line before it, good for showing where the
    /// code is but not for reading the source line as the code's statement.
    pub line_guessed: bool,
}

/// The source location of a code position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeLocation {
    /// Path of the module, as in the trace.
    pub module: Arc<str>,
    /// Link-time address in the module (position minus load bias): what `addr2line -e MODULE`
    /// takes.
    pub module_address: u64,
    /// Innermost function (demangled for C++ and Rust), inlined or not. The function a
    /// compiler outlined an OpenMP region into is named after the function the region is
    /// written in, `main (OpenMP region)`, with gcc (`main._omp_fn.0`) and clang
    /// (`.omp_outlined._debug__`) alike.
    pub function: Option<String>,
    /// The innermost function is a wrapper the compiler made ([`InlinedCall::compiler_made`]).
    pub compiler_made: bool,
    /// Source file, as DWARF gives it (compilation directory joined: usually absolute).
    pub file: Option<String>,
    /// Source line (`None` when unknown). For DWARF's line 0 (code the compiler merged from
    /// several lines), the nearest line before it in the same file, with `line_guessed`.
    pub line: Option<u32>,
    /// Source column (1-based; `None` when unknown or DWARF's "left edge" 0).
    pub column: Option<u32>,
    /// `line` is the nearest line before code DWARF gave line 0 ([`InlinedCall::line_guessed`]).
    pub line_guessed: bool,
    /// Functions the innermost one was inlined into, innermost first, each with the call
    /// site; empty when the code is not inlined.
    pub inlined_into: Vec<InlinedCall>,
}

impl CodeLocation {
    /// The function the machine code belongs to: the outermost caller when inlined.
    pub fn outer_function(&self) -> Option<&str> {
        match self.inlined_into.last() {
            Some(call) => call.function.as_deref(),
            None => self.function.as_deref(),
        }
    }

    /// Every frame of the location, innermost first: the function the code is in, then the
    /// functions it was inlined into, each at its call site. C++ allocations are made in
    /// inlined library code (`std::vector` → `std::__new_allocator::allocate` in
    /// `new_allocator.h`); the frame that names the object is the first one outwards in the
    /// program's own source ([`InlinedCall::is_program_source`]).
    pub fn frames(&self) -> impl Iterator<Item = InlinedCall> + '_ {
        std::iter::once(InlinedCall {
            function: self.function.clone(),
            compiler_made: self.compiler_made,
            file: self.file.clone(),
            line: self.line,
            column: self.column,
            line_guessed: self.line_guessed,
        })
        .chain(self.inlined_into.iter().cloned())
    }
}

/// A frame of the program's and the code position whose frames hold it.
type FrameAt = (CodePos, InlinedCall);

/// Whether `path` is a system or compiler header rather than the program's own source: under
/// `/usr/include`, `/usr/lib` (gcc's and clang's own headers) or their `/usr/local` twins, or
/// wherever a toolchain keeps its C++ library (`…/include/c++/…`) or its own headers
/// (`…/lib/gcc/…`, `…/lib/clang/…`: toolchains in `/opt`, Spack, conda).
pub fn is_system_source(path: &str) -> bool {
    const PREFIXES: [&str; 4] = [
        "/usr/include/",
        "/usr/lib/",
        "/usr/local/include/",
        "/usr/local/lib/",
    ];
    const PARTS: [&str; 3] = ["/include/c++/", "/lib/gcc/", "/lib/clang/"];
    PREFIXES.iter().any(|p| path.starts_with(p)) || PARTS.iter().any(|p| path.contains(p))
}

/// Whether the module at `path` is a library the system installed (under `/lib`, `/lib64`,
/// `/usr/lib` or `/usr/lib64`): its code is never the program's own, even when its debug
/// information names sources by relative paths (`./string/strdup.c` in the C library's).
pub fn is_system_module(path: &str) -> bool {
    ["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"]
        .iter()
        .any(|p| path.starts_with(p))
}

impl InlinedCall {
    /// Whether the function is one the compiler made rather than the program's author, a
    /// wrapper that only calls the code at its line, such as clang's OpenMP
    /// `.omp_outlined.` (the region's body, clang's `.omp_outlined._debug__` or gcc's
    /// `main._omp_fn.0`, is the program's code and names allocations).
    pub fn is_compiler_generated(&self) -> bool {
        self.compiler_made
    }

    /// Whether the frame is in the program's own source: it has a source file, and not a
    /// system or compiler header ([`is_system_source`]). Code without debug information
    /// (such as the C library's) has none.
    pub fn is_program_source(&self) -> bool {
        self.file.as_deref().is_some_and(|f| !is_system_source(f))
    }
}

impl fmt::Display for InlinedCall {
    /// `function (file.c:12:5)`, with the file's base name (`file.c:~12` for a guessed line),
    /// as for [`CodeLocation`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.function.as_deref().unwrap_or("?"))?;
        write_position(
            f,
            self.file.as_deref(),
            self.line,
            self.column,
            self.line_guessed,
        )
    }
}

/// ` (file.c:12:5)` with the file's base name; nothing without a file, the parts known;
/// ` (file.c:~12)` when 12 is only the nearest line before code merged from several lines.
fn write_position(
    f: &mut fmt::Formatter<'_>,
    file: Option<&str>,
    line: Option<u32>,
    column: Option<u32>,
    guessed: bool,
) -> fmt::Result {
    let Some(file) = file else {
        return Ok(());
    };
    write!(f, " ({}", base_name(file))?;
    if let Some(line) = line {
        let about = if guessed { "~" } else { "" };
        write!(f, ":{about}{line}")?;
        if let Some(col) = column {
            write!(f, ":{col}")?;
        }
    }
    f.write_str(")")
}

impl fmt::Display for CodeLocation {
    /// `function (file.c:12:5)`, with the file's base name; parts that are unknown are left
    /// out, and `module+0xoffset` stands in when nothing is known but the module.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.function {
            Some(func) => f.write_str(func)?,
            None => write!(f, "{}+{:#x}", base_name(&self.module), self.module_address)?,
        }
        write_position(
            f,
            self.file.as_deref(),
            self.line,
            self.column,
            self.line_guessed,
        )
    }
}

pub(crate) fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// What a data address belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataObject {
    /// A global or static object from a module's symbol table.
    Global {
        /// Path of the module, as in the trace.
        module: Arc<str>,
        /// Symbol name (demangled for C++ and Rust); a variable declared `static` in a function
        /// is `static NAME of FUNCTION` when DWARF says so (its symbol is `NAME.0` with gcc,
        /// `FUNCTION.NAME` with clang), else keeps the symbol's name.
        name: Arc<str>,
        /// Offset of the address from the object's start.
        offset: u64,
        /// Object size in bytes.
        size: u64,
    },
    /// A live heap block (from the caller's [`HeapMap`]).
    Heap(HeapBlock),
    /// Neither: stack, thread-local storage, memory from `mmap`, uninstrumented allocators, or
    /// a module that could not be read.
    Unknown,
}

/// A local variable holding a stack address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackLocal {
    /// Its name in the source.
    pub name: String,
    /// The function that declares it (the frame's, or one inlined into it).
    pub function: Option<String>,
    /// Its start address in the recorded frame.
    pub base: u64,
    /// Its size in bytes, when DWARF says.
    pub size: Option<u64>,
    /// The alignment declared for it or its type, if any.
    pub align: Option<u64>,
    /// The source file that declares it.
    pub decl_file: Option<String>,
    /// The line that declares it.
    pub decl_line: Option<u32>,
    /// The shape of its type, when DWARF gives it (names its members).
    pub shape: Option<Arc<TypeShape>>,
}

/// What a stack address in a recorded frame belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackObject {
    /// The function that owns the frame (the outermost one, when code was inlined into it).
    pub function: Option<String>,
    /// The function that made the recorded call (where a region was forked or a thread
    /// created): the frame's, or one inlined into it.
    pub caller: Option<String>,
    /// Source file of the recorded call.
    pub file: Option<String>,
    /// Line of the recorded call.
    pub line: Option<u32>,
    /// The thread whose stack it is.
    pub thread: cachescope_schema::ThreadId,
    /// The local variable holding the address, when DWARF places one there.
    pub local: Option<StackLocal>,
}

impl StackObject {
    /// A name for reports: `local partial of main (file.c:4)` (the declaration), else
    /// `stack frame of main (file.c:9)` (the recorded call; `stack of f (file.c:9), inlined
    /// into main` when the call was inlined), else `stack of thread N`.
    pub fn name(&self) -> String {
        let place = |file: &Option<String>, line: Option<u32>| match (file, line) {
            (Some(f), Some(l)) => format!(" ({}:{l})", base_name(f)),
            (Some(f), None) => format!(" ({})", base_name(f)),
            _ => String::new(),
        };
        if let Some(l) = &self.local {
            let of = l
                .function
                .as_deref()
                .or(self.function.as_deref())
                .map_or_else(String::new, |f| format!(" of {f}"));
            return format!("local {}{of}{}", l.name, place(&l.decl_file, l.decl_line));
        }
        let at = place(&self.file, self.line);
        match (self.function.as_deref(), self.caller.as_deref()) {
            (Some(f), Some(c)) if f != c => format!("stack of {c}{at}, inlined into {f}"),
            (Some(f), _) => format!("stack frame of {f}{at}"),
            (None, _) => format!("stack of thread {}", self.thread),
        }
    }
}

/// State of one module of the trace, for reports.
#[derive(Debug)]
pub enum ModuleState<'a> {
    /// Not needed by any lookup yet.
    NotOpened,
    /// Opened; `debug_info` says whether it has DWARF (else only symbol-table names).
    Ready {
        /// Whether file and line lookups are possible.
        debug_info: bool,
    },
    /// Unusable; lookups in it answer nothing.
    Failed(&'a SymbolError),
}

enum Slot {
    Unopened,
    Ready(Box<LoadedModule>),
    Failed(SymbolError),
}

struct Entry {
    info: ModuleInfo,
    path: Arc<str>,
    slot: Slot,
}

/// Resolves code positions and data addresses of one trace. Not thread-safe by itself (it
/// opens files and caches lazily through `&mut self`); it is `Send`, so it can be moved to a
/// worker.
pub struct Symbolizer {
    entries: Vec<Entry>,
    options: SymbolizerOptions,
    /// Results per code position, including misses, so each position is looked up once.
    code_cache: HashMap<u64, Option<Arc<CodeLocation>>>,
    /// Run-time `[start, end, entry)` of every opened module's load segments, sorted; built
    /// on the first data lookup (which opens every module).
    extents: Option<Vec<(u64, u64, usize)>>,
    /// Source files read for [`Self::source_line`].
    sources: SourceLines,
    /// Fixed-place locals of the function holding each looked-up code position.
    locals_cache: HashMap<u64, Arc<Vec<LocalVar>>>,
    /// Bytes pushed for the call at a code position (see [`Symbolizer::pushed_at`]).
    pushed_cache: HashMap<u64, u64>,
    /// Frame pointer rules by code position (see `frame_rule_at`).
    frame_rule_cache: HashMap<u64, Option<FrameRule>>,
}

impl Symbolizer {
    /// A symbolizer over a trace's modules, with default options. Nothing is opened yet.
    /// Duplicate entries (same path and load bias) are kept once.
    pub fn new<'a>(modules: impl IntoIterator<Item = &'a ModuleInfo>) -> Self {
        Self::with_options(modules, SymbolizerOptions::default())
    }

    /// A symbolizer with explicit options.
    pub fn with_options<'a>(
        modules: impl IntoIterator<Item = &'a ModuleInfo>,
        options: SymbolizerOptions,
    ) -> Self {
        let mut entries: Vec<Entry> = Vec::new();
        for m in modules {
            if m.path.is_empty()
                || entries
                    .iter()
                    .any(|e| e.info.path == m.path && e.info.load_bias == m.load_bias)
            {
                continue;
            }
            entries.push(Entry {
                info: m.clone(),
                path: Arc::from(m.path.as_str()),
                slot: Slot::Unopened,
            });
        }
        Symbolizer {
            entries,
            options,
            code_cache: HashMap::new(),
            extents: None,
            sources: SourceLines::default(),
            locals_cache: HashMap::new(),
            pushed_cache: HashMap::new(),
            frame_rule_cache: HashMap::new(),
        }
    }

    /// Opens every module now (instead of on first need), so that problems can be reported
    /// before the analysis starts.
    pub fn open_all(&mut self) {
        for i in 0..self.entries.len() {
            self.open(i);
        }
    }

    /// Every module of the trace with its state.
    pub fn modules(&self) -> impl Iterator<Item = (&ModuleInfo, ModuleState<'_>)> {
        self.entries.iter().map(|e| {
            let state = match &e.slot {
                Slot::Unopened => ModuleState::NotOpened,
                Slot::Ready(m) => ModuleState::Ready {
                    debug_info: m.has_debug_info(),
                },
                Slot::Failed(err) => ModuleState::Failed(err),
            };
            (&e.info, state)
        })
    }

    /// The modules that could not be used (missing, unreadable, stale), among those opened.
    pub fn failures(&self) -> impl Iterator<Item = &SymbolError> {
        self.entries.iter().filter_map(|e| match &e.slot {
            Slot::Failed(err) => Some(err),
            _ => None,
        })
    }

    fn open(&mut self, i: usize) -> Option<&mut LoadedModule> {
        let entry = self.entries.get_mut(i)?;
        if let Slot::Unopened = entry.slot {
            let search = DebugSearch {
                debug_dirs: &self.options.debug_dirs,
            };
            entry.slot = match LoadedModule::open(&entry.info.path, &entry.info.build_id, &search) {
                Ok(m) => Slot::Ready(Box::new(m)),
                Err(err) => {
                    match &err {
                        SymbolError::StaleBuildId { .. } => warn!("{err}; not symbolized"),
                        // The vDSO and similar pseudo-modules have no file: expected.
                        _ if !entry.info.path.starts_with('/') => debug!("{err}"),
                        _ => warn!("{err}; not symbolized"),
                    }
                    Slot::Failed(err)
                }
            };
        }
        match &mut entry.slot {
            Slot::Ready(m) => Some(m),
            _ => None,
        }
    }

    /// The module whose executable range holds `pc`; the latest loaded wins if ranges overlap
    /// (a module unloaded and another loaded in its place: the trace does not say when).
    fn code_module(&mut self, pc: u64) -> Option<usize> {
        let by_range = self
            .entries
            .iter()
            .rposition(|e| e.info.start <= pc && pc < e.info.end);
        // Modules recorded without a code range are found by their load segments instead.
        by_range.or_else(|| self.extent_module(pc))
    }

    fn extent_module(&mut self, addr: u64) -> Option<usize> {
        if self.extents.is_none() {
            self.open_all();
            let mut extents = Vec::new();
            for (i, e) in self.entries.iter().enumerate() {
                if let Slot::Ready(m) = &e.slot {
                    for &(lo, hi) in &m.segments {
                        let bias = e.info.load_bias;
                        extents.push((lo.wrapping_add(bias), hi.wrapping_add(bias), i));
                    }
                }
            }
            extents.sort_unstable();
            self.extents = Some(extents);
        }
        let extents = self.extents.as_deref().unwrap_or_default();
        let upto = extents.partition_point(|&(lo, _, _)| lo <= addr);
        // Segments do not overlap in a sane process; scanning back a little covers a
        // pathological map without making ordinary lookups slower.
        extents[..upto]
            .iter()
            .rev()
            .take(8)
            .find(|&&(lo, hi, _)| lo <= addr && addr < hi)
            .map(|&(_, _, i)| i)
    }

    /// The source location of a code position from the trace (see the module docs: already
    /// inside the instruction, do not adjust). `None` when no module holds it or the module is
    /// unusable. Results are cached per position.
    pub fn code(&mut self, pc: u64) -> Option<Arc<CodeLocation>> {
        if let Some(hit) = self.code_cache.get(&pc) {
            return hit.clone();
        }
        let found = self.lookup_code(pc).map(Arc::new);
        self.code_cache.insert(pc, found.clone());
        found
    }

    /// [`Symbolizer::code`] for a schema [`CodePos`].
    pub fn code_pos(&mut self, pos: CodePos) -> Option<Arc<CodeLocation>> {
        self.code(pos.addr())
    }

    fn lookup_code(&mut self, pc: u64) -> Option<CodeLocation> {
        let i = self.code_module(pc)?;
        let bias = self.entries[i].info.load_bias;
        let module_name = Arc::clone(&self.entries[i].path);
        let probe = pc.wrapping_sub(bias);
        let m = self.open(i)?;
        let mut loc = CodeLocation {
            module: module_name,
            module_address: probe,
            function: None,
            compiler_made: false,
            file: None,
            line: None,
            column: None,
            line_guessed: false,
            inlined_into: Vec::new(),
        };
        if let Some(ctx) = m.context() {
            read_frames(ctx, probe, &mut loc);
        }
        if loc.outer_function().is_none() {
            // No DWARF, or DWARF without a subprogram here (assembly): the symbol table.
            let name = m.functions.find(probe).map(|s| s.name.to_string());
            let made = name.as_deref().is_some_and(regions::is_compiler_wrapper);
            match loc.inlined_into.last_mut() {
                Some(outer) => (outer.function, outer.compiler_made) = (name, made),
                None => (loc.function, loc.compiler_made) = (name, made),
            }
        } else if let Some(full) = loc
            .outer_function()
            .and_then(|plain| qualified_by_symbol(plain, m.functions.find(probe)?))
        {
            // g++ gives a function in an anonymous namespace (or a `static` one) no linkage
            // name in DWARF, only `work`; its symbol says `(anonymous namespace)::work(int)`.
            match loc.inlined_into.last_mut() {
                Some(outer) => outer.function = Some(full),
                None => loc.function = Some(full),
            }
        }
        // Lambdas g++ inlined are `operator()` in DWARF: named after the function they are
        // written in, innermost frame first.
        let bare = |name: &Option<String>| name.as_deref() == Some(lambdas::BARE_CALL_OPERATOR);
        if bare(&loc.function) || loc.inlined_into.iter().any(|c| bare(&c.function)) {
            let mut lambdas = m.lambdas_at(probe).into_iter();
            let frames = std::iter::once(&mut loc.function)
                .chain(loc.inlined_into.iter_mut().map(|c| &mut c.function));
            for name in frames.filter(|n| bare(n)) {
                match lambdas.next() {
                    Some(lambda) => *name = Some(lambda.to_string()),
                    None => break,
                }
            }
        }
        // Outlined OpenMP regions are named after the function they are written in.
        let parent = m.outlined_parent(probe);
        let names = std::iter::once(&mut loc.function)
            .chain(loc.inlined_into.iter_mut().map(|c| &mut c.function));
        for name in names {
            if let Some(region) = name
                .as_deref()
                .and_then(|n| regions::region_name(n, parent))
            {
                *name = Some(region);
            }
        }
        Some(loc)
    }

    /// The global or static object holding `addr`, from the modules' symbol tables. The first
    /// data lookup opens every module (their load segments say which one holds an address).
    pub fn data(&mut self, addr: u64) -> Option<DataObject> {
        let i = self.extent_module(addr)?;
        let module = Arc::clone(&self.entries[i].path);
        let probe = addr.wrapping_sub(self.entries[i].info.load_bias);
        let Slot::Ready(m) = &mut self.entries[i].slot else {
            return None;
        };
        let sym = m.objects.find(probe)?;
        let (start, end, symbol) = (sym.start, sym.end, Arc::clone(&sym.name));
        // A function's static variable has a name the compiler made up (gcc `partial.0`,
        // clang `run.partial`): its DWARF says what it is. Other names need no DWARF.
        let name = match m.function_static(start).filter(|_| symbol.contains('.')) {
            Some(s) => {
                let text = match declaring_function(s, &symbol) {
                    Some(f) => format!("static {} of {f}", s.name),
                    None => format!("static {}", s.name),
                };
                Arc::from(text.as_str())
            }
            None => symbol,
        };
        Some(DataObject::Global {
            module,
            name,
            offset: probe - start,
            size: end - start,
        })
    }

    /// The function that declares the `static` variable holding `addr`, when it is one
    /// declared inside a function (see [`Symbolizer::data`]).
    pub fn static_function(&mut self, addr: u64) -> Option<String> {
        let (m, start) = self.global_at(addr)?;
        let symbol = Arc::clone(&m.objects.find(start)?.name);
        let s = m.function_static(start).filter(|_| symbol.contains('.'))?;
        declaring_function(s, &symbol)
    }

    /// The alignment declared (DWARF `DW_AT_alignment`: `alignas`, `aligned(N)`) for the
    /// global or static object holding `addr`, if it has one; parses the module's DWARF.
    pub fn declared_alignment(&mut self, addr: u64) -> Option<u64> {
        let (m, start) = self.global_at(addr)?;
        m.declared_alignment(start)
    }

    /// Where the global or static object holding `addr` is declared (file and line, from
    /// DWARF), if known; parses the module's DWARF.
    pub fn declaration(&mut self, addr: u64) -> Option<(String, u32)> {
        let (m, start) = self.global_at(addr)?;
        m.declaration(start)
    }

    /// The source name of the global or static object holding `addr` and the shape of its
    /// type (DWARF), if known; parses the module's DWARF. A struct whose flexible array
    /// member is initialised statically (`struct hist h = {0, {1, 2, 3}}`) is the symbol's
    /// size, with the array as long as the rest (DWARF gives the type's size only).
    pub fn global_shape(&mut self, addr: u64) -> Option<(String, Arc<TypeShape>)> {
        let (m, start) = self.global_at(addr)?;
        let symbol_size = m.objects.find(start).map(|s| s.end - s.start);
        let (name, shape) = m.shape(start)?;
        let grown = symbol_size
            .filter(|&size| shape.size.is_some_and(|s| s < size))
            .and_then(|size| shape.with_flexible_tail(size));
        Some((name, grown.map_or(shape, Arc::new)))
    }

    /// The module holding the global or static object at `addr`, and the object's
    /// link-time start address.
    fn global_at(&mut self, addr: u64) -> Option<(&mut LoadedModule, u64)> {
        let i = self.extent_module(addr)?;
        let probe = addr.wrapping_sub(self.entries[i].info.load_bias);
        let m = self.open(i)?;
        let start = m.objects.find(probe)?.start;
        Some((m, start))
    }

    /// What `addr` belongs to: a live heap block in `heap`, else a global object, else
    /// [`DataObject::Unknown`].
    pub fn classify(&mut self, addr: u64, heap: &HeapMap) -> DataObject {
        if let Some(block) = heap.lookup(addr) {
            return DataObject::Heap(block);
        }
        self.data(addr).unwrap_or(DataObject::Unknown)
    }

    /// What the stack address of `slot` belongs to: the local variable of the frame's
    /// function that DWARF places there, else just the function.
    pub fn stack_object(&mut self, slot: &StackSlot) -> StackObject {
        let loc = self.code_pos(slot.site);
        let (function, caller, file, line) = match loc.as_deref() {
            Some(l) => (
                l.outer_function().map(str::to_owned),
                l.function.clone(),
                l.file.clone(),
                l.line,
            ),
            None => (None, None, None, None),
        };
        let locals = self.frame_locals(slot.site.addr());
        // Locals placed relative to the stack pointer are relative to the body's, above the
        // call's own pushed arguments (the code is read only for frames that have such).
        let by_sp = locals.iter().any(|v| v.register == FrameRegister::Sp);
        let pushed = if by_sp {
            self.pushed_at(slot.site.addr())
        } else {
            0
        };
        let sp = match slot.sp.checked_add(pushed) {
            Some(sp) if sp < slot.cfa => sp,
            _ => slot.sp,
        };
        // Locals placed relative to the frame pointer: where the prologue put it.
        let by_fp = locals.iter().any(|v| v.register == FrameRegister::Fp);
        let fp = if by_fp {
            self.frame_rule_at(slot.site.addr())
                .map_or(slot.cfa.wrapping_sub(16), |r| r.frame_pointer(slot.cfa))
        } else {
            slot.cfa.wrapping_sub(16)
        };
        let local = locals.iter().find_map(|v| {
            let base = v.address(sp, slot.cfa, fp);
            let inside = match v.size {
                Some(size) => base <= slot.addr && slot.addr < base.saturating_add(size),
                None => base == slot.addr,
            };
            inside.then(|| StackLocal {
                name: v.name.clone(),
                function: v.function.clone(),
                base,
                size: v.size,
                align: v.align,
                decl_file: v.decl_file.clone(),
                decl_line: v.decl_line,
                shape: v.shape.clone(),
            })
        });
        StackObject {
            function,
            caller,
            file,
            line,
            thread: slot.thread,
            local,
        }
    }

    /// The fixed-place locals of the function holding code position `pc` (cached).
    fn frame_locals(&mut self, pc: u64) -> Arc<Vec<LocalVar>> {
        if let Some(hit) = self.locals_cache.get(&pc) {
            return Arc::clone(hit);
        }
        let found = self.lookup_locals(pc).unwrap_or_default();
        let found = Arc::new(found);
        self.locals_cache.insert(pc, Arc::clone(&found));
        found
    }

    /// Bytes the call at code position `pc` pushed below its function's stack pointer in the
    /// body (its stack arguments; 0 when the code does not say), cached.
    fn pushed_at(&mut self, pc: u64) -> u64 {
        if let Some(&hit) = self.pushed_cache.get(&pc) {
            return hit;
        }
        let found = self.code_module(pc).and_then(|i| {
            let probe = pc.wrapping_sub(self.entries[i].info.load_bias);
            self.open(i)?.call_sites.pushed_at(probe)
        });
        let found = found.unwrap_or(0);
        self.pushed_cache.insert(pc, found);
        found
    }

    /// How the function holding code position `pc` sets its frame pointer (see
    /// `frames::frame_pointer_rule`), cached.
    fn frame_rule_at(&mut self, pc: u64) -> Option<FrameRule> {
        if let Some(&hit) = self.frame_rule_cache.get(&pc) {
            return hit;
        }
        let found = self.code_module(pc).and_then(|i| {
            let probe = pc.wrapping_sub(self.entries[i].info.load_bias);
            self.open(i)?.call_sites.frame_pointer_at(probe)
        });
        self.frame_rule_cache.insert(pc, found);
        found
    }

    fn lookup_locals(&mut self, pc: u64) -> Option<Vec<LocalVar>> {
        let i = self.code_module(pc)?;
        let probe = pc.wrapping_sub(self.entries[i].info.load_bias);
        let ctx = self.open(i)?.context()?;
        let unit = ctx.find_dwarf_and_unit(probe).skip_all_loads()?;
        Some(locals::locals_at(unit, probe))
    }

    /// The text of line `line` of source file `file` (as a [`CodeLocation`] names it), its
    /// whitespace runs collapsed and trimmed; `None` when the file cannot be read here.
    pub fn source_line(&mut self, file: &str, line: u32) -> Option<&str> {
        self.sources.line(file, line)
    }

    /// Where the program allocated `block`: the innermost frame in the program's own source
    /// (inlined frames included, see [`CodeLocation::frames`]) of the allocation site or,
    /// when the site is library code (`std::vector`'s out-of-line growth, `strdup`), of its
    /// recorded callers; and the frame right outside it when that one is the program's too,
    /// which tells the callers of an allocating function of the program's (a wrapper like
    /// `xmalloc`) apart. A runtime frame in between ends the search: a block allocated in an
    /// OpenMP region or a thread function gets no caller, whichever thread entered it through
    /// whichever runtime code. Functions the compiler made (clang's `.omp_outlined.`, which
    /// calls the region's body at the pragma's line) are passed over there. Frames of
    /// libraries installed by the system ([`is_system_module`]) are never the program's,
    /// whatever their debug information says. `(None, None)` when no frame is in the
    /// program's source.
    pub fn allocation_frames(
        &mut self,
        block: &HeapBlock,
    ) -> (Option<InlinedCall>, Option<InlinedCall>) {
        let (first, caller) = self.allocation_frames_at(block);
        (first.map(|(_, f)| f), caller.map(|(_, f)| f))
    }

    /// [`allocation_frames`](Self::allocation_frames), with the code positions whose frames
    /// hold them.
    fn allocation_frames_at(&mut self, block: &HeapBlock) -> (Option<FrameAt>, Option<FrameAt>) {
        let mut first = None;
        for pos in block.site.into_iter().chain(block.callers.iter()) {
            // Judged by the module alone: its debug information (the C library's, when
            // installed) is neither needed nor read.
            let system = self
                .code_module(pos.addr())
                .is_some_and(|i| is_system_module(&self.entries[i].path));
            if system {
                if first.is_some() {
                    return (first, None);
                }
                continue;
            }
            let loc = self.code_pos(pos);
            let mut any = false;
            for frame in loc.iter().flat_map(|loc| loc.frames()) {
                any = true;
                if first.is_some() && frame.is_compiler_generated() {
                    continue;
                }
                let program = frame.is_program_source();
                match (first.is_some(), program) {
                    (false, true) => first = Some((pos, frame)),
                    (false, false) => {}
                    (true, true) => return (first, Some((pos, frame))),
                    (true, false) => return (first, None),
                }
            }
            if !any && first.is_some() {
                // An address in no known module: not the program's.
                return (first, None);
            }
        }
        (first, None)
    }

    /// The variable or member the program's allocating statement puts `block` in, and the
    /// block's shape as what it points to: the variable the statement declares (`double *y
    /// = malloc(…)`, `std::vector<Acc> accs(n)`, when DWARF has exactly one on that line),
    /// else the name or member path it assigns the block to (`g_data = …`, `v->data = …`) or
    /// a constructor's member initializer sets (see `pointer_of_line`). Names the members of a
    /// heap block (`y[3]`, `accs[1].sum`), whose type the trace does not record. The
    /// allocator called there (`callees.rs`) says the layout: `new` one object (`node->id`;
    /// a larger block is a derived class's, whose other bytes are named as the object, and
    /// which keeps the pointer's class where the unit's classes of that size derived from it
    /// do — no name when they disagree or there are none), `new[]` an array maybe after its
    /// count, a C allocator an array and never a count. Not named: a block the declared
    /// vector's elements allocated on that line (a row of `std::vector<std::vector<long>>`,
    /// a `std::vector<bool>`'s words), and one an allocating function of the program's (with
    /// a caller of the program's) holds in a `void *` or `char *` variable, or in a variable
    /// its caller's line does not hold it in too: it may hand the block out past a header.
    pub fn heap_variable(&mut self, block: &HeapBlock) -> Option<HeapVariable> {
        let (Some((pos, frame)), caller) = self.allocation_frames_at(block) else {
            return None;
        };
        // `operator new` or `operator new[]` of a class: what its caller's `new[]` puts in
        // front of the elements is not known here.
        if frame
            .function
            .as_deref()
            .is_some_and(|f| f.contains("operator new"))
        {
            return None;
        }
        let library = self.allocation_library_functions(block);
        let vector_storage = callees::holds_vector_elements(&library);
        if vector_storage == Some(false) {
            return None;
        }
        let i = self.code_module(pos.addr())?;
        let probe = pos.addr().wrapping_sub(self.entries[i].info.load_bias);
        let callee = self.open(i)?.call_sites.callee_at(probe);
        let allocator = callee.as_deref().and_then(Allocator::named);
        let (file, line) = (frame.file.as_deref()?, frame.line?);
        if caller.is_some()
            && self.with_unit_at(pos, |unit| {
                members::byte_pointer_declared_at(unit, file, line)
            }) == Some(true)
        {
            return None;
        }
        let grown_by = callees::vector_method(&library);
        let allocating = LineRole::Allocating {
            callee: callee.as_deref(),
            grown_by,
        };
        let declared = self.pointer_of_line(pos, &frame, block.size, allocating)?;
        if vector_storage.is_some() && declared.pointer {
            // A vector's storage, named through a pointer to the vector (`p->v = new
            // std::vector<long>(8)`, `make_unique<std::vector<long>>(8)`): not that object.
            return None;
        }
        // `struct hdr *h = malloc(sizeof *h + n); … return h + 1;` in an allocating function:
        // a header and what follows it, not an array of headers. The function's pointer names
        // the block only when its caller's line holds it in a pointer of the same type
        // (`struct pair *p = make_pairs(…)`, `pairs = make_pairs(…)`), or it stores the block
        // in a member (`this->cells = new double[n]` in a constructor).
        if let (Some((outer_pos, outer)), false) = (&caller, declared.member) {
            let theirs = self.pointer_of_line(*outer_pos, outer, block.size, LineRole::Caller);
            if theirs.is_none_or(|t| t.shape != declared.shape) {
                return None;
            }
        }
        let element = declared.shape;
        // `new Node` pointed to by `node`: its members are `node->id`, not `node[0].id`; so
        // are those of a struct whose flexible array member takes the rest of the block.
        let flexible = declared
            .pointer
            .then(|| element.with_flexible_tail(block.size))
            .flatten();
        let single = declared.pointer
            && (element.size == Some(block.size)
                || flexible.is_some()
                || allocator == Some(Allocator::New));
        let shape = match (flexible, single, allocator) {
            (Some(grown), _, _) => grown,
            (None, true, _) if element.size.is_some_and(|s| s < block.size) => {
                match declared.within_derived {
                    Derived::At(at) => TypeShape::object_in(element, at, block.size),
                    // Which derived class it is cannot be told: DWARF may leave out a class
                    // only ever created by `new` (and it may be in another unit).
                    Derived::Disagree | Derived::None => return None,
                }
            }
            (None, true, _) => TypeShape::object_in(element, 0, block.size),
            // Only `new[]` stores a count in front of the elements; when the call is not
            // known, the size decides (see `heap_array_of`).
            (None, false, Some(Allocator::New | Allocator::C)) => {
                TypeShape::array_of(element, block.size)
            }
            (None, false, Some(Allocator::ArrayNew)) => {
                TypeShape::heap_array_of(element, block.size, declared.destructor)
            }
            (None, false, None) => TypeShape::heap_array_of(element, block.size, false),
        };
        Some(HeapVariable {
            name: declared.name,
            shape,
            single,
        })
    }

    /// The pointer the line of `frame` (at code position `pos`) declares, or else assigns to
    /// by a plain name (`g_data = malloc(…)`: a variable declared elsewhere) or a path of
    /// members (`v->data = calloc(…)`, named so; the last member's type, `data`'s, is the
    /// block's), a constructor's member initializer sets (`cells(new double[n])`, named
    /// `this->cells`) or `posix_memalign` stores it through (`&accs`). For the allocating
    /// statement itself, a declared variable counts only if the statement at the frame's
    /// column declares it (`struct vec *v = malloc(…); v->data = calloc(…);`: the second
    /// block is not `v` but `v->data`) with the allocation as its value. None when the
    /// frame's line is only the nearest one before merged code
    /// ([`InlinedCall::line_guessed`]).
    fn pointer_of_line(
        &mut self,
        pos: CodePos,
        frame: &InlinedCall,
        block: u64,
        kind: LineRole<'_>,
    ) -> Option<members::DeclaredPointer> {
        let (statement, called, grown_by) = match kind {
            LineRole::Allocating { callee, grown_by } => (true, callee, grown_by),
            LineRole::Caller => (false, None, None),
        };
        if frame.line_guessed {
            // Code merged from several lines (clang -O2 making one `malloc` call of two
            // branches'): the line before it need not be the allocation's.
            return None;
        }
        let (file, mut line) = (frame.file.as_deref()?, frame.line?);
        let mut text = frame
            .column
            .and_then(|column| Some((self.sources.raw_line(file, line)?.to_owned(), column)));
        // A statement continued from the line before (`double *y =` then `malloc(…);`): read
        // as one line, declared on the first.
        if let Some((rest, column)) = &text {
            let before = line.checked_sub(1).filter(|&l| l > 0);
            let joined = before
                .and_then(|l| self.sources.raw_line(file, l))
                .and_then(|first| source::continued(first, rest, *column));
            if let Some(joined) = joined {
                text = Some(joined);
                line -= 1;
            }
        }
        let i = self.code_module(pos.addr())?;
        let pc = pos.addr().wrapping_sub(self.entries[i].info.load_bias);
        // The frames of code inlined into the statement's function, there.
        let inlined = self
            .code_pos(pos)
            .and_then(|loc| loc.frames().position(|f| &f == frame));
        // What the statement's own call instruction calls (not inlined library code's, as
        // `std::vector`'s): the allocation written there must call it.
        let callee = match inlined {
            Some(0) => called.and_then(Allocator::spelled),
            _ => None,
        };
        let declared = self
            .with_unit_at(pos, |unit| {
                members::pointer_declared_at(unit, file, line, block)
            })
            .flatten();
        if let Some(d) = declared {
            // A pointer must be initialised with the allocation itself (not `wrap(malloc(n))`
            // or `(long *)malloc(n) + 1`); a container is constructed with arguments.
            let declares = !statement
                || text.as_ref().is_none_or(|(text, column)| {
                    source::statement_declares(text, *column, &d.name, !d.pointer)
                        && (!d.pointer || source::declared_value(text, *column, &d.name, callee))
                });
            if declares {
                return Some(d);
            }
        }
        // Assigned, not declared: the name or member's type is DWARF's, its spelling the
        // statement's (`v->data`).
        let (text, column) = text?;
        let first = line.saturating_sub(assigned::PRECEDING_LINES).max(1);
        let preceding: Vec<String> = (first..line)
            .map(|l| self.sources.raw_line(file, l).unwrap_or("").to_owned())
            .collect();
        let at = assigned::Statement {
            pc,
            inlined: inlined?,
            file,
            line,
            before: &text[..source::statement_start(&text, column)],
            preceding: &preceding,
        };
        // Each with whether a plain name is looked up in the statement's scopes, or (as
        // assignments have been since before those) as the unit's one variable of that name.
        let targets = [
            (source::assigned_target(&text, column, callee), false),
            (source::initialized_member(&text, column, callee), false),
            (source::out_parameter_target(&text, column, callee), false),
            // `accs.resize(n)` in a function whose lambdas capture `accs`.
            (source::grown_container(&text, column, grown_by), true),
        ];
        for (target, scoped) in targets {
            let Some(target) = target else {
                continue;
            };
            let found = self.with_unit_at(pos, |unit| {
                if target.steps.is_empty() && !scoped {
                    return members::pointer_named(unit, target.root, block);
                }
                let name = target.path();
                assigned::pointer_at_path(unit, &at, target.root, &target.steps, name, block)
            });
            if let Some(Some(pointer)) = found {
                return Some(pointer);
            }
        }
        None
    }

    /// `read` of the DWARF unit that holds code position `pos`.
    fn with_unit_at<T>(
        &mut self,
        pos: CodePos,
        read: impl FnOnce(addr2line::gimli::UnitRef<'_, module::Reader>) -> T,
    ) -> Option<T> {
        let i = self.code_module(pos.addr())?;
        let probe = pos.addr().wrapping_sub(self.entries[i].info.load_bias);
        let ctx = self.open(i)?.context()?;
        let unit = ctx.find_dwarf_and_unit(probe).skip_all_loads()?;
        Some(read(unit))
    }

    /// The functions of library code (demangled, innermost first) the allocation of `block`
    /// ran through before the first frame of the program's (see
    /// [`allocation_frames`](Self::allocation_frames)): `std::__new_allocator<long>::allocate`
    /// … `std::vector<long>::vector`. Empty when no frame is the program's.
    fn allocation_library_functions(&mut self, block: &HeapBlock) -> Vec<String> {
        let mut functions = Vec::new();
        for pos in block.site.into_iter().chain(block.callers.iter()) {
            let system = self
                .code_module(pos.addr())
                .is_some_and(|i| is_system_module(&self.entries[i].path));
            if system {
                continue;
            }
            let loc = self.code_pos(pos);
            for frame in loc.iter().flat_map(|loc| loc.frames()) {
                if frame.is_program_source() {
                    return functions;
                }
                functions.extend(frame.function);
            }
        }
        Vec::new()
    }

    /// A name for a heap block that is stable across runs (addresses are not): where the
    /// program allocated it ([`allocation_frames`](Self::allocation_frames)), e.g. `heap
    /// block from main (jacobi.c:41)` or `heap block from xmalloc (util.c:12), called from
    /// read_matrix (io.c:40)`; the site itself when no frame is the program's.
    pub fn heap_block_name(&mut self, block: &HeapBlock) -> String {
        match self.allocation_frames(block) {
            (Some(frame), Some(caller)) => {
                format!("heap block from {frame}, called from {caller}")
            }
            (Some(frame), None) => format!("heap block from {frame}"),
            (None, _) => match block.site {
                Some(site) => match self.code_pos(site) {
                    Some(loc) => format!("heap block from {loc}"),
                    None => format!("heap block from {site}"),
                },
                None => "heap block (allocation site unknown)".to_owned(),
            },
        }
    }
}

/// The symbol's (demangled) name for a function DWARF names only by its plain identifier
/// `plain`, when the symbol is that function with its scope and parameters
/// (`(anonymous namespace)::work(int)` for `work`); `None` otherwise (C functions, whose
/// symbol is the plain name, and names DWARF already qualified).
fn qualified_by_symbol(plain: &str, sym: &module::Sym) -> Option<String> {
    let identifier = !plain.is_empty()
        && plain
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'~');
    let name: &str = &sym.name;
    let call = format!("{plain}(");
    (identifier && (name.starts_with(&call) || name.contains(&format!("::{call}"))))
        .then(|| name.to_owned())
}

/// Fills `loc` from addr2line's frames at `probe` (innermost first).
fn read_frames(ctx: &module::Context, probe: u64, loc: &mut CodeLocation) {
    let frames = match ctx.find_frames(probe).skip_all_loads() {
        Ok(frames) => frames,
        Err(e) => {
            debug!(error = %e, probe, "DWARF lookup failed");
            return;
        }
    };
    let mut frames = frames;
    let mut first = true;
    loop {
        let frame = match frames.next() {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                debug!(error = %e, probe, "DWARF frame walk failed");
                break;
            }
        };
        // addr2line demangles by the unit's language; a C++ function inlined into a unit it
        // takes for another language (g++'s `std::__fill_a1` behind `std::vector(n, x)`)
        // kept its mangled name, so a mangled name left over is demangled by its prefix.
        let function = frame
            .function
            .as_ref()
            .and_then(|f| f.demangle().ok())
            .map(|n| module::demangled(n.into_owned()).into_owned());
        let (file, line, column) = match &frame.location {
            Some(l) => (
                l.file.map(str::to_owned),
                l.line.filter(|&n| n != 0),
                l.column.filter(|&c| c != 0),
            ),
            None => (None, None, None),
        };
        let compiler_made = function
            .as_deref()
            .is_some_and(regions::is_compiler_wrapper);
        if first {
            // Line 0: code the compiler could not give one line (clang merging two branches'
            // stores into one `cmov`); the nearest line before it in the same file says where
            // it is, as a report and a SARIF location need one.
            let guessed = match (line, file.as_deref()) {
                (None, Some(file)) => nearest_line_before(ctx, probe, file),
                _ => None,
            };
            loc.line_guessed = guessed.is_some();
            loc.function = function;
            loc.compiler_made = compiler_made;
            loc.file = file;
            loc.line = line.or(guessed);
            loc.column = column;
            first = false;
        } else {
            loc.inlined_into.push(InlinedCall {
                function,
                compiler_made,
                file,
                line,
                column,
                line_guessed: false,
            });
        }
    }
}

/// How far before an address with line 0 the line table is searched for a line.
const LINE_ZERO_WINDOW: u64 = 256;

/// The line of the last line-table row of `file` with a line, starting before `probe` (within
/// [`LINE_ZERO_WINDOW`] bytes).
fn nearest_line_before(ctx: &module::Context, probe: u64, file: &str) -> Option<u32> {
    let rows = ctx
        .find_location_range(probe.saturating_sub(LINE_ZERO_WINDOW), probe)
        .ok()?;
    rows.filter(|(addr, _, l)| *addr < probe && l.file == Some(file))
        .filter_map(|(addr, _, l)| Some((addr, l.line.filter(|&n| n != 0)?)))
        .max_by_key(|&(addr, _)| addr)
        .map(|(_, line)| line)
}

/// Which statement [`Symbolizer::pointer_of_line`] reads.
#[derive(Clone, Copy)]
enum LineRole<'a> {
    /// The allocation's own: the function its call instruction calls (a symbol, `malloc` or
    /// `_Znam`), and the `std::vector` method that allocated, if one did.
    Allocating {
        callee: Option<&'a str>,
        grown_by: Option<&'a str>,
    },
    /// The line of the program's that called an allocating function of the program's.
    Caller,
}

/// Lower-case hex of a build-id.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The function that declares a function's `static` variable: its DWARF entry's name, else
/// the symbol's prefix (clang's `run.partial` for a function it inlined everywhere).
fn declaring_function(s: &statics::FunctionStatic, symbol: &str) -> Option<String> {
    s.function.clone().or_else(|| {
        symbol
            .strip_suffix(s.name.as_str())
            .and_then(|f| f.strip_suffix('.'))
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
    })
}
