//! Symbolization against real binaries: small C programs are compiled with gcc (and clang-14
//! when installed) at -O2 -g as PIE, run once to print their run-time addresses, and those
//! addresses are symbolized through a module map built the way the shim builds it.

use std::path::{Path, PathBuf};
use std::process::Command;

use cachescope_analysis::heap::{HeapBlock, HeapMap};
use cachescope_analysis::symbols::{
    DataObject, ModuleState, SymbolError, Symbolizer, SymbolizerOptions,
};
use cachescope_schema::event::MAX_ALLOC_CALLERS;
use cachescope_schema::{Alignment, CodePos, ModuleInfo};
use object::{Object, ObjectSegment, ObjectSymbol, SegmentFlags};
use proptest::prelude::*;

const PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>

long g_counts[16];
static double s_table[8] = {1, 2, 3};
static void *pcs[4];
/* Where the functions' own statics are (gcc names them `f_counts.0`, clang `bump.f_counts`). */
static long *p_fcounts, *p_hhits;
/* Declared alignments: on the variable, and on an array's element type through a typedef
   and a qualifier. */
_Alignas(128) long g_aligned[4];
struct __attribute__((aligned(64))) padded { long v; };
typedef struct padded padded_t;
volatile padded_t g_padded[4];

/* Records its return address once per id: minus one, that is a trace's code position. */
__attribute__((noinline)) void probe(int id) {
    if (!pcs[id])
        pcs[id] = __builtin_return_address(0);
}

__attribute__((noinline)) void bump(long n) {
    static long f_counts[4];
    p_fcounts = &f_counts[1];
    for (long i = 0; i < n; i++) {
        f_counts[i & 3] += 1;
        g_counts[i & 15] += i;
        probe(0); /* MARK_BUMP */
    }
}

static inline __attribute__((always_inline)) void helper(long i) {
    static long h_hits[2];
    h_hits[i & 1] += 1;
    p_hhits = &h_hits[1];
    s_table[i & 7] += 1.0;
    probe(1); /* MARK_INLINE */
}

__attribute__((noinline)) void outer(long n) {
    for (long i = 0; i < n; i++) {
        helper(i); /* MARK_CALL_HELPER */
    }
}

int main(int argc, char **argv) {
    (void)argv;
    bump(argc * 100);
    outer(argc * 100);
    g_aligned[argc & 3] += argc;
    g_padded[argc & 3].v += argc;
    printf("g_counts3 %p\n", (void *)&g_counts[3]);
    printf("g_aligned1 %p\n", (void *)&g_aligned[1]);
    printf("g_padded2 %p\n", (void *)&g_padded[2]);
    printf("s_table2 %p\n", (void *)&s_table[2]);
    printf("f_counts1 %p\n", (void *)p_fcounts);
    printf("h_hits1 %p\n", (void *)p_hhits);
    printf("main %p\n", (void *)main);
    printf("pc0 %p\n", pcs[0]);
    printf("pc1 %p\n", pcs[1]);
    return (int)(g_counts[3] & 1) + (s_table[2] > 1e9);
}
"#;

/// Line (1-based) of the marker comment.
fn marker_line(marker: &str) -> u32 {
    let idx = PROGRAM
        .lines()
        .position(|l| l.contains(marker))
        .expect("marker present");
    u32::try_from(idx + 1).unwrap()
}

fn available(compiler: &str) -> bool {
    Command::new(compiler)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The compilers to test with: gcc, and clang-14 when installed.
fn compilers() -> Vec<&'static str> {
    let found: Vec<_> = ["gcc", "clang-14"]
        .into_iter()
        .filter(|c| available(c))
        .collect();
    if found.is_empty() {
        eprintln!("skipped: no C compiler (gcc, clang-14) installed");
    }
    found
}

/// A compiled and run test program.
struct Built {
    _dir: tempfile::TempDir,
    exe: PathBuf,
    source: PathBuf,
    /// Printed run-time addresses by label.
    printed: Vec<(String, u64)>,
    module: ModuleInfo,
}

impl Built {
    fn addr(&self, label: &str) -> u64 {
        self.printed
            .iter()
            .find(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("{label} not printed"))
            .1
    }
}

fn build(compiler: &str, extra: &[&str]) -> Built {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("symtest.c");
    std::fs::write(&source, PROGRAM).unwrap();
    let exe = dir.path().join("symtest");
    let status = Command::new(compiler)
        .args(["-O2", "-g", "-fPIE", "-pie", "-Wl,--build-id"])
        .args(extra)
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(status.success(), "{compiler} failed");
    let out = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let printed: Vec<(String, u64)> = stdout
        .lines()
        .map(|l| {
            let (label, value) = l.split_once(' ').unwrap();
            let value = u64::from_str_radix(value.trim_start_matches("0x"), 16).unwrap();
            (label.to_owned(), value)
        })
        .collect();
    let module = module_info(&exe, printed.iter().find(|(l, _)| l == "main").unwrap().1);
    Built {
        _dir: dir,
        exe,
        source,
        printed,
        module,
    }
}

/// The module map entry the shim would record: the load bias is the printed `main` minus its
/// link-time value; the code range is the executable `PT_LOAD` segment.
fn module_info(exe: &Path, main_runtime: u64) -> ModuleInfo {
    let bytes = std::fs::read(exe).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let main = file
        .symbols()
        .find(|s| s.name() == Ok("main"))
        .expect("main in .symtab")
        .address();
    let load_bias = main_runtime - main;
    let (mut start, mut end) = (u64::MAX, 0);
    for seg in file.segments() {
        if let SegmentFlags::Elf { p_flags } = seg.flags() {
            if p_flags & object::elf::PF_X != 0 {
                start = start.min(seg.address() + load_bias);
                end = end.max(seg.address() + seg.size() + load_bias);
            }
        }
    }
    assert!(start < end);
    ModuleInfo {
        path: exe.to_string_lossy().into_owned(),
        build_id: file.build_id().unwrap().expect("build-id").to_vec(),
        load_bias,
        start,
        end,
    }
}

fn global(obj: Option<DataObject>) -> (String, String, u64, u64) {
    match obj {
        Some(DataObject::Global {
            module,
            name,
            offset,
            size,
        }) => (module.to_string(), name.to_string(), offset, size),
        other => panic!("not a global: {other:?}"),
    }
}

#[test]
fn declared_alignments_come_from_the_variable_or_its_type() {
    for cc in compilers() {
        let b = build(cc, &[]);
        let mut sym = Symbolizer::new([&b.module]);
        assert_eq!(
            sym.declared_alignment(b.addr("g_aligned1")),
            Some(128),
            "{cc}"
        );
        assert_eq!(
            sym.declared_alignment(b.addr("g_padded2")),
            Some(64),
            "{cc}"
        );
        // Nothing declared: the compiler's own alignment is no promise.
        assert_eq!(sym.declared_alignment(b.addr("g_counts3")), None, "{cc}");
        assert_eq!(sym.declared_alignment(b.addr("s_table2")), None, "{cc}");
        // No object there.
        assert_eq!(sym.declared_alignment(0x10), None, "{cc}");
    }
}

#[test]
fn globals_and_statics_resolve_with_offset() {
    for cc in compilers() {
        let b = build(cc, &[]);
        let mut sym = Symbolizer::new([&b.module]);
        let (module, name, offset, size) = global(sym.data(b.addr("g_counts3")));
        assert_eq!(module, b.exe.to_string_lossy(), "{cc}");
        assert_eq!((name.as_str(), offset, size), ("g_counts", 24, 128), "{cc}");
        let (_, name, offset, size) = global(sym.data(b.addr("s_table2")));
        assert_eq!((name.as_str(), offset, size), ("s_table", 16, 64), "{cc}");
        // A function's statics: by their DWARF names, not the symbols' made-up ones.
        let (_, name, offset, size) = global(sym.data(b.addr("f_counts1")));
        assert_eq!(
            (name.as_str(), offset, size),
            ("static f_counts of bump", 8, 32),
            "{cc}"
        );
        let (_, name, offset, size) = global(sym.data(b.addr("h_hits1")));
        assert_eq!(
            (name.as_str(), offset, size),
            ("static h_hits of helper", 8, 16),
            "{cc}"
        );
        // One past the end of g_counts is not g_counts.
        let past = b.addr("g_counts3") - 24 + 128;
        assert!(
            !matches!(sym.data(past), Some(DataObject::Global { ref name, .. }) if &**name == "g_counts"),
            "{cc}"
        );
        // Far outside every module.
        assert_eq!(sym.data(0x10), None);
    }
}

#[test]
fn code_positions_give_function_file_and_line() {
    for cc in compilers() {
        let b = build(cc, &[]);
        let mut sym = Symbolizer::new([&b.module]);
        // A trace's code position: return address minus one.
        let pc = b.addr("pc0") - 1;
        let loc = sym.code(pc).expect("symbolized");
        assert_eq!(loc.function.as_deref(), Some("bump"), "{cc}: {loc:?}");
        assert!(
            loc.file.as_deref().unwrap().ends_with("symtest.c"),
            "{cc}: {loc:?}"
        );
        assert_eq!(loc.line, Some(marker_line("MARK_BUMP")), "{cc}: {loc:?}");
        assert!(loc.inlined_into.is_empty(), "{cc}: {loc:?}");
        assert_eq!(loc.outer_function(), Some("bump"));
        assert_eq!(loc.module_address, pc - b.module.load_bias);
        assert!(
            loc.to_string()
                .starts_with(&format!("bump (symtest.c:{}", marker_line("MARK_BUMP"))),
            "{loc}"
        );
        // Cached: the same answer again.
        assert_eq!(sym.code(pc), Some(loc.clone()));
        // The source path DWARF gives is the one compiled.
        assert_eq!(
            Path::new(loc.file.as_deref().unwrap()),
            b.source.as_path(),
            "{cc}"
        );
        assert_eq!(sym.code(8), None);
    }
}

#[test]
fn inlined_code_keeps_its_caller() {
    for cc in compilers() {
        let b = build(cc, &[]);
        let mut sym = Symbolizer::new([&b.module]);
        let loc = sym.code(b.addr("pc1") - 1).expect("symbolized");
        assert_eq!(loc.function.as_deref(), Some("helper"), "{cc}: {loc:?}");
        assert_eq!(loc.line, Some(marker_line("MARK_INLINE")), "{cc}: {loc:?}");
        assert_eq!(loc.inlined_into.len(), 1, "{cc}: {loc:?}");
        let call = &loc.inlined_into[0];
        assert_eq!(call.function.as_deref(), Some("outer"), "{cc}: {loc:?}");
        assert_eq!(
            call.line,
            Some(marker_line("MARK_CALL_HELPER")),
            "{cc}: {loc:?}"
        );
        assert!(call.file.as_deref().unwrap().ends_with("symtest.c"));
        assert_eq!(loc.outer_function(), Some("outer"));
    }
}

#[test]
fn stale_build_id_is_refused() {
    for cc in compilers() {
        let b = build(cc, &[]);
        let mut stale = b.module.clone();
        stale.build_id = vec![0xde, 0xad, 0xbe, 0xef];
        let mut sym = Symbolizer::new([&stale]);
        assert_eq!(sym.code(b.addr("pc0") - 1), None, "{cc}");
        assert_eq!(sym.data(b.addr("g_counts3")), None, "{cc}");
        let failures: Vec<&SymbolError> = sym.failures().collect();
        assert!(
            matches!(failures.as_slice(), [SymbolError::StaleBuildId { expected, .. }] if expected == "deadbeef"),
            "{failures:?}"
        );
        assert!(matches!(
            sym.modules().next(),
            Some((_, ModuleState::Failed(SymbolError::StaleBuildId { .. })))
        ));
        // A trace without a build-id cannot be checked: the file is used.
        let mut unknown = b.module.clone();
        unknown.build_id.clear();
        let mut sym = Symbolizer::new([&unknown]);
        assert!(sym.code(b.addr("pc0") - 1).is_some(), "{cc}");
    }
}

#[test]
fn missing_modules_and_vdso_answer_nothing() {
    let vdso = ModuleInfo {
        path: "linux-vdso.so.1".into(),
        build_id: vec![1, 2, 3],
        load_bias: 0x7fff_0000_0000,
        start: 0x7fff_0000_1000,
        end: 0x7fff_0000_2000,
    };
    let gone = ModuleInfo {
        path: "/nonexistent/libgone.so".into(),
        start: 0x1000,
        end: 0x2000,
        ..ModuleInfo::default()
    };
    // A hostile trace's module: a "regular" file that says it is empty and reads for
    // hundreds of GiB.
    let endless = ModuleInfo {
        path: "/proc/self/pagemap".into(),
        start: 0x10_0000,
        end: 0x10_1000,
        ..ModuleInfo::default()
    };
    let mut sym = Symbolizer::new([&vdso, &gone, &endless]);
    assert_eq!(sym.code(0x7fff_0000_1500), None);
    assert_eq!(sym.code(0x1500), None);
    assert_eq!(sym.data(0x1500), None);
    assert_eq!(sym.code(0x10_0500), None);
    assert_eq!(sym.failures().count(), 3);
    assert!(matches!(
        sym.failures().next(),
        Some(SymbolError::Read { .. })
    ));
}

#[test]
fn module_without_code_range_is_found_by_segments() {
    for cc in compilers() {
        let b = build(cc, &[]);
        let mut m = b.module.clone();
        m.start = 0;
        m.end = 0;
        let mut sym = Symbolizer::new([&m]);
        let loc = sym.code(b.addr("pc0") - 1).expect("symbolized");
        assert_eq!(loc.function.as_deref(), Some("bump"), "{cc}");
    }
}

#[test]
fn separate_debug_file_by_build_id() {
    if !available("objcopy") || !available("gcc") {
        eprintln!("skipped: objcopy or gcc missing");
        return;
    }
    let b = build("gcc", &[]);
    let debug_root = b._dir.path().join("debug");
    let id: String = b
        .module
        .build_id
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    let debug_file = debug_root
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug_file.parent().unwrap()).unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        assert!(Command::new("objcopy")
            .args(args)
            .status()
            .unwrap()
            .success());
    };
    run(&[
        "--only-keep-debug".as_ref(),
        b.exe.as_os_str(),
        debug_file.as_os_str(),
    ]);
    // Strip everything (no .symtab either): names must come from the debug file.
    run(&["--strip-all".as_ref(), b.exe.as_os_str()]);

    // Without the debug directory: no line, no g_counts (not in .dynsym of an executable).
    let mut plain = Symbolizer::with_options(
        [&b.module],
        SymbolizerOptions {
            debug_dirs: Vec::new(),
        },
    );
    let loc = plain.code(b.addr("pc0") - 1).expect("module found");
    assert_eq!(loc.line, None);
    assert!(matches!(
        plain.modules().next(),
        Some((_, ModuleState::Ready { debug_info: false }))
    ));

    let mut sym = Symbolizer::with_options(
        [&b.module],
        SymbolizerOptions {
            debug_dirs: vec![debug_root],
        },
    );
    let loc = sym.code(b.addr("pc0") - 1).expect("symbolized");
    assert_eq!(loc.function.as_deref(), Some("bump"));
    assert_eq!(loc.line, Some(marker_line("MARK_BUMP")));
    let (_, name, offset, _) = global(sym.data(b.addr("g_counts3")));
    assert_eq!((name.as_str(), offset), ("g_counts", 24));
}

#[test]
fn no_dwarf_falls_back_to_symbol_names() {
    if !available("gcc") {
        eprintln!("skipped: gcc missing");
        return;
    }
    let b = build("gcc", &["-g0"]);
    let mut sym = Symbolizer::new([&b.module]);
    let loc = sym.code(b.addr("pc0") - 1).expect("symbolized");
    assert_eq!(loc.function.as_deref(), Some("bump"));
    assert_eq!((loc.file.as_deref(), loc.line), (None, None));
    assert!(loc.to_string().starts_with("bump"));
    let (_, name, offset, _) = global(sym.data(b.addr("g_counts3")));
    assert_eq!((name.as_str(), offset), ("g_counts", 24));
}

#[test]
fn heap_blocks_are_classified_and_named_by_site() {
    for cc in compilers() {
        let b = build(cc, &[]);
        let mut sym = Symbolizer::new([&b.module]);
        let mut heap = HeapMap::new();
        let site = CodePos::new(b.addr("pc0") - 1);
        heap.on_alloc(0x5000_0000, 256, site, Alignment::new(64));
        let block = match sym.classify(0x5000_0010, &heap) {
            DataObject::Heap(block) => block,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            block,
            HeapBlock {
                base: 0x5000_0000,
                size: 256,
                site,
                callers: Default::default(),
                align: Alignment::new(64),
                offset: 16
            }
        );
        let name = sym.heap_block_name(&block);
        assert!(
            name.starts_with(&format!(
                "heap block from bump (symtest.c:{}",
                marker_line("MARK_BUMP")
            )),
            "{name}"
        );
        assert!(matches!(
            sym.classify(b.addr("g_counts3"), &heap),
            DataObject::Global { .. }
        ));
        assert_eq!(sym.classify(0x5000_0100, &heap), DataObject::Unknown);
        assert_eq!(
            sym.heap_block_name(&HeapBlock {
                site: None,
                ..block
            }),
            "heap block (allocation site unknown)"
        );
    }
}

/// A live block of the model: start, size, site, requested alignment.
type ModelBlock = (u64, u64, Option<CodePos>, Option<Alignment>);

/// The obvious model of [`HeapMap`]: a list of live blocks.
#[derive(Default)]
struct Model {
    blocks: Vec<ModelBlock>,
}

impl Model {
    fn alloc(&mut self, block: ModelBlock) {
        let (addr, size, ..) = block;
        let end = addr + size.max(1);
        self.blocks
            .retain(|&(b, s, ..)| !(b < end && addr < b + s.max(1)));
        self.blocks.push(block);
    }
    fn free(&mut self, addr: u64) -> Option<ModelBlock> {
        let i = self.blocks.iter().position(|&(b, ..)| b == addr)?;
        Some(self.blocks.remove(i))
    }
    fn lookup(&self, addr: u64) -> Option<HeapBlock> {
        self.blocks
            .iter()
            .find(|&&(b, s, ..)| b <= addr && addr < b + s)
            .map(|&(base, size, site, align)| HeapBlock {
                base,
                size,
                site,
                callers: Default::default(),
                align,
                offset: addr - base,
            })
    }
}

#[derive(Debug, Clone)]
enum Op {
    Alloc(u64, u64, u64),
    Free(u64),
    Lookup(u64),
}

fn op() -> impl Strategy<Value = Op> {
    // A small address space so that allocations collide, frees hit and lookups land on edges.
    prop_oneof![
        (0u64..512, 0u64..48, 0u64..4).prop_map(|(a, s, site)| Op::Alloc(a, s, site)),
        (0u64..512).prop_map(Op::Free),
        (0u64..600).prop_map(Op::Lookup),
    ]
}

proptest! {
    #[test]
    fn heap_map_matches_model(ops in proptest::collection::vec(op(), 1..200)) {
        let mut map = HeapMap::new();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Alloc(a, s, site) => {
                    // Sites 1 and 3 ask for an alignment (2 and 8 bytes).
                    let align = Alignment::from_log2(site as u8).filter(|_| site % 2 == 1);
                    let site = CodePos::new(site);
                    map.on_alloc(a, s, site, align);
                    model.alloc((a, s, site, align));
                }
                Op::Free(a) => {
                    let got = map.on_free(a).map(|b| (b.base, b.size, b.site, b.align));
                    prop_assert_eq!(got, model.free(a));
                }
                Op::Lookup(a) => prop_assert_eq!(map.lookup(a), model.lookup(a)),
            }
            prop_assert_eq!(map.len(), model.blocks.len());
        }
        for a in 0..600 {
            prop_assert_eq!(map.lookup(a), model.lookup(a));
        }
    }
}

#[test]
fn heap_map_edges() {
    let mut map = HeapMap::new();
    assert!(map.is_empty());
    map.on_alloc(100, 0, None, None);
    assert_eq!(map.lookup(100), None, "a zero-size block holds no byte");
    map.on_alloc(100, 10, None, None);
    assert_eq!(map.len(), 1);
    assert_eq!(map.replaced(), 1);
    assert_eq!(map.lookup(109).map(|b| b.offset), Some(9));
    assert_eq!(map.lookup(110), None);
    assert_eq!(map.on_free(105), None, "not a block start");
    map.on_alloc(u64::MAX - 4, 100, None, None);
    assert_eq!(map.lookup(u64::MAX).map(|b| b.offset), Some(4));
    assert!(map.on_free(100).is_some());
    assert_eq!(map.lookup(105), None);
}

#[test]
fn blocks_freed_during_a_segment_are_named_until_it_ends() {
    let pos = |a: u64| CodePos::new(a).unwrap();
    let site = |b: Option<HeapBlock>| b.and_then(|b| b.site).map(CodePos::addr);
    let mut map = HeapMap::new();
    map.on_alloc(100, 64, Some(pos(1)), None);
    map.on_alloc(300, 64, Some(pos(2)), None);
    assert!(map.on_free(100).is_some());
    // Gone from the live blocks, still known for naming the segment's accesses.
    assert_eq!(map.lookup(110), None);
    assert_eq!(site(map.lookup_in_segment(110)), Some(1));
    assert_eq!(map.lookup_in_segment(110).map(|b| b.offset), Some(10));
    assert_eq!(map.lookup_in_segment(164), None, "past the block's end");
    // A live block at the same place wins; a later free replaces the overlapped one.
    map.on_alloc(96, 32, Some(pos(3)), None);
    assert_eq!(site(map.lookup_in_segment(110)), Some(3));
    assert!(map.on_free(96).is_some());
    assert_eq!(site(map.lookup_in_segment(110)), Some(3));
    assert_eq!(
        map.lookup_in_segment(140),
        None,
        "the older block was replaced"
    );
    assert!(map.on_free(300).is_some());
    map.end_segment();
    assert_eq!(map.lookup_in_segment(110), None);
    assert_eq!(map.lookup_in_segment(310), None);
}

#[test]
fn heap_map_attaches_callers_to_the_threads_last_allocation() {
    let pos = |a: u64| CodePos::new(a).unwrap();
    let callers = |map: &HeapMap, addr: u64| -> Vec<u64> {
        let block = map.lookup(addr).expect("live");
        block.callers.iter().map(CodePos::addr).collect()
    };
    let mut map = HeapMap::new();
    map.on_caller(0, pos(1)); // nothing allocated yet: ignored
    map.on_alloc_in(0, 100, 10, Some(pos(7)), None);
    map.on_alloc_in(1, 200, 10, Some(pos(8)), None);
    // Thread 0's callers follow its own allocation, whatever thread 1 did meanwhile.
    map.on_caller(0, pos(10));
    map.on_caller(1, pos(20));
    map.on_caller(0, pos(11));
    assert_eq!(callers(&map, 105), [10, 11]);
    assert_eq!(callers(&map, 200), [20]);
    // At most MAX_ALLOC_CALLERS are kept, innermost first.
    for c in 21..25 + MAX_ALLOC_CALLERS as u64 {
        map.on_caller(1, pos(c));
    }
    let kept: Vec<u64> = (20..20 + MAX_ALLOC_CALLERS as u64).collect();
    assert_eq!(callers(&map, 200), kept);
    // A block freed before its callers arrive takes none, and a later block of the thread
    // starts without any.
    assert!(map.on_free(100).is_some());
    map.on_caller(0, pos(12));
    map.on_alloc_in(0, 100, 10, Some(pos(7)), None);
    assert_eq!(callers(&map, 100), Vec::<u64>::new());
    assert_eq!(
        map.on_free(200).map(|b| b.callers.iter().count()),
        Some(MAX_ALLOC_CALLERS)
    );
}

#[test]
fn symbolizer_can_move_to_a_worker() {
    fn send<T: Send>() {}
    send::<Symbolizer>();
    send::<HeapMap>();
}

#[test]
fn libraries_the_system_installed_are_not_the_programs_own_code() {
    use cachescope_analysis::symbols::is_system_module;
    for path in [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libgomp.so.1",
        "/lib64/ld-linux-x86-64.so.2",
        "/usr/lib64/libstdc++.so.6",
    ] {
        assert!(is_system_module(path), "{path}");
    }
    for path in [
        "/work/main/target/release/examples/spmv",
        "/usr/local/lib/libmine.so",
        "/home/me/build/libapp.so",
        "./a.out",
    ] {
        assert!(!is_system_module(path), "{path}");
    }
}

#[test]
fn system_headers_are_not_the_programs_own_source() {
    use cachescope_analysis::symbols::is_system_source;
    for path in [
        "/usr/include/c++/12/bits/new_allocator.h",
        "/usr/lib/gcc/x86_64-linux-gnu/12/include/omp.h",
        "/usr/lib/llvm-14/lib/clang/14.0.6/include/stddef.h",
        "/usr/local/include/boost/vector.hpp",
        "/opt/gcc-13/include/c++/13/bits/stl_vector.h",
        "/opt/rh/gcc-toolset-13/root/usr/lib/gcc/x86_64-redhat-linux/13/include/mm_malloc.h",
        "/opt/llvm/lib/clang/17/include/stddef.h",
    ] {
        assert!(is_system_source(path), "{path}");
    }
    for path in [
        "/work/main/examples/spmv_dynamic.c",
        "/home/me/src/include/my.h",
        "/usr/local/src/app/main.c",
        "a.c",
    ] {
        assert!(!is_system_source(path), "{path}");
    }
}
