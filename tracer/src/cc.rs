//! `cachescope cc`: a compiler wrapper that builds programs for recording.
//!
//! It adds ThreadSanitizer instrumentation (every load, store and atomic becomes a call into
//! the shim), basic-block coverage callbacks (`trace-pc`, for instruction counts) and `-g`
//! (code positions → source lines), and links the shim instead of the sanitizer runtime.
//!
//! gcc always links its ThreadSanitizer runtime when `-fsanitize=thread` is on the link line
//! (its specs force `--no-as-needed -ltsan`), so a gcc command that compiles and links at once
//! is split: each source is compiled to a temporary object with the instrumentation, then the
//! objects are linked without it. clang has `-fno-sanitize-link-runtime` and needs no split.

use std::path::{Path, PathBuf};

/// Which compiler family drives the build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// GNU gcc / g++.
    Gcc,
    /// LLVM clang / clang++.
    Clang,
}

/// How accesses are captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capture {
    /// ThreadSanitizer ABI (gcc and clang): accesses, atomics, vptr, ranges.
    Tsan,
    /// SanitizerCoverage `trace-loads,trace-stores` (clang only): plain loads and stores.
    Sancov,
}

/// The compiler to run and how.
#[derive(Debug, Clone)]
pub struct Compiler {
    /// Executable (e.g. `gcc`, `clang-14`).
    pub program: String,
    /// Its family.
    pub family: Family,
    /// Capture mode.
    pub capture: Capture,
}

impl Compiler {
    /// Picks the compiler: `explicit` if given (family guessed from its name), else clang with
    /// `clang`, else gcc.
    pub fn choose(explicit: Option<&str>, clang: bool, capture: Capture) -> Compiler {
        let program = match explicit {
            Some(p) => p.to_string(),
            None if clang => default_clang(),
            None => "gcc".to_string(),
        };
        let name = Path::new(&program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let family = if name.contains("clang") {
            Family::Clang
        } else {
            Family::Gcc
        };
        Compiler {
            program,
            family,
            capture,
        }
    }
}

fn default_clang() -> String {
    for c in ["clang-14", "clang"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(c).is_file()))
            .unwrap_or(false);
        if found {
            return c.to_string();
        }
    }
    "clang".to_string()
}

/// Why a command line cannot be wrapped.
#[derive(Debug, thiserror::Error)]
pub enum CcError {
    /// The chosen mode needs another compiler.
    #[error("{0}")]
    Unsupported(String),
}

/// One compiler invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Arguments (without the program).
    pub args: Vec<String>,
}

/// The invocations that replace one compiler command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Run in order; stop at the first failure.
    pub steps: Vec<Step>,
    /// Temporary objects to delete afterwards.
    pub temporaries: Vec<PathBuf>,
    /// Files holding code these steps instrument, with the name to report them by (an
    /// object or executable they write; a temporary object is named by its source), to
    /// look for what the recorder will not see once the steps succeeded.
    pub instrumented: Vec<(PathBuf, String)>,
}

const SOURCE_EXTS: &[&str] = &["c", "cc", "cpp", "cxx", "c++", "C", "i", "ii", "s", "S"];
/// Options whose value is the next argument.
const TAKES_VALUE: &[&str] = &[
    "-o",
    "-I",
    "-L",
    "-D",
    "-U",
    "-include",
    "-imacros",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-x",
    "-MF",
    "-MT",
    "-MQ",
    "-Xlinker",
    "-Xassembler",
    "-Xpreprocessor",
    "-aux-info",
    "-l",
    "-T",
    "-u",
    "-z",
];

fn is_source(arg: &str) -> bool {
    !arg.starts_with('-')
        && Path::new(arg)
            .extension()
            .is_some_and(|e| SOURCE_EXTS.contains(&e.to_string_lossy().as_ref()))
}

/// Indices of the source files in `args`: files with a source extension, and any input file
/// after `-x LANGUAGE` (until `-x none`), whatever its name.
fn source_indices(args: &[String]) -> Vec<usize> {
    let mut sources = Vec::new();
    let mut language: Option<&str> = None;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "-x" {
            language = args.get(i + 1).map(String::as_str);
            i += 2;
            continue;
        }
        if let Some(l) = a.strip_prefix("-x") {
            language = Some(l);
        } else if TAKES_VALUE.contains(&a) {
            i += 1;
        } else if !a.starts_with('-') {
            let forced = language.is_some_and(|l| l != "none");
            if forced || is_source(a) {
                sources.push(i);
            }
        }
        i += 1;
    }
    sources
}

/// `args` with every `@FILE` replaced by the arguments in FILE (gcc's response files:
/// whitespace-separated, with quotes and backslash escapes; nested files too). An `@FILE`
/// that cannot be read stays as it is, as gcc keeps it.
pub fn expand_response_files(args: &[String]) -> Vec<String> {
    fn expand(args: &[String], depth: u32, out: &mut Vec<String>) {
        for a in args {
            let text = a
                .strip_prefix('@')
                .filter(|_| depth < 16)
                .and_then(|f| std::fs::read_to_string(f).ok());
            match text {
                Some(text) => expand(&split_response_file(&text), depth + 1, out),
                None => out.push(a.clone()),
            }
        }
    }
    let mut out = Vec::with_capacity(args.len());
    expand(args, 0, &mut out);
    out
}

/// Splits a response file's text the way libiberty's `buildargv` does.
fn split_response_file(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_arg = false;
    let (mut single, mut double) = (false, false);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c.is_whitespace() && !single && !double {
            if in_arg {
                out.push(std::mem::take(&mut cur));
                in_arg = false;
            }
            continue;
        }
        in_arg = true;
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ => cur.push(c),
        }
    }
    if in_arg {
        out.push(cur);
    }
    out
}

/// The dependency-file options gcc would use for `source` in a compile+link command that
/// asks for one (`-MD`/`-MMD` without `-MF`): compiled alone into a temporary object, the
/// file and its target would be named after that object. With `-o OUT`: `OUT` minus its
/// extension plus `.d`, target `OUT`; without: `a-STEM.d`, target `STEM.o` (gcc 12).
/// The value of `-o FILE` or `-oFILE`.
fn output_arg(args: &[String]) -> Option<String> {
    args.iter()
        .position(|a| a == "-o")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("-o").filter(|o| !o.is_empty()))
                .map(str::to_owned)
        })
}

/// The stem of a source file's name (`dir/a.c` → `a`).
fn stem_of(source: &str) -> String {
    Path::new(source)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "src".into())
}

fn dependency_options(args: &[String], source: &str) -> Vec<String> {
    let wants = args.iter().any(|a| a == "-MD" || a == "-MMD");
    let has = |o: &str| {
        args.iter()
            .any(|a| a == o || (a.starts_with(o) && a.len() > o.len()))
    };
    if !wants || has("-MF") {
        return Vec::new();
    }
    let out = output_arg(args);
    let stem = stem_of(source);
    let (file, target) = match out {
        Some(o) => (
            Path::new(&o).with_extension("d").display().to_string(),
            o.clone(),
        ),
        None => (format!("a-{stem}.d"), format!("{stem}.o")),
    };
    let mut v = vec!["-MF".to_string(), file];
    if !has("-MT") && !has("-MQ") {
        v.extend(["-MT".to_string(), target]);
    }
    v
}

/// Flags that instrument a compilation.
pub fn compile_flags(c: &Compiler) -> Result<Vec<String>, CcError> {
    let mut f: Vec<String> = Vec::new();
    match (c.capture, c.family) {
        (Capture::Tsan, Family::Gcc) => {
            f.extend(
                [
                    "-fsanitize=thread",
                    "--param=tsan-instrument-func-entry-exit=0",
                    // The shim performs atomics and fences itself: gcc's warning that
                    // ThreadSanitizer does not model `atomic_thread_fence` does not apply,
                    // and would fail -Werror builds.
                    "-Wno-tsan",
                    // With -flto gcc instruments at link time, where the split link below
                    // has no -fsanitize (it would link gcc's own sanitizer runtime): the
                    // program would record nothing. Instrumented objects are plain objects.
                    "-fno-lto",
                    // gcc expands a memset or memcpy of known small size into plain moves
                    // after its ThreadSanitizer pass, which then never sees them: kept as
                    // calls, the shim records their ranges (clang's pass sees them itself).
                    "-fno-builtin-memset",
                    "-fno-builtin-memcpy",
                    "-fno-builtin-memmove",
                ]
                .map(String::from),
            );
        }
        (Capture::Tsan, Family::Clang) => {
            f.extend(
                [
                    "-fsanitize=thread",
                    "-mllvm",
                    "-tsan-instrument-func-entry-exit=0",
                    // clang leaves out the load of a read-modify-write (`x += v`), which is
                    // enough to find races, not to count memory traffic.
                    "-mllvm",
                    "-tsan-instrument-read-before-write",
                    // clang's ThreadSanitizer skips accesses wider than 16 bytes: vectorized
                    // loops (-O3 -march=native) would lose every load and store. 128-bit
                    // vectors keep the bytes (explicit 256/512-bit intrinsics stay blind).
                    "-mprefer-vector-width=128",
                ]
                .map(String::from),
            );
        }
        (Capture::Sancov, Family::Clang) => {
            f.push("-fsanitize-coverage=trace-pc-guard,no-prune,trace-loads,trace-stores".into());
        }
        (Capture::Sancov, Family::Gcc) => {
            return Err(CcError::Unsupported(
                "--capture sancov needs clang (gcc has no trace-loads/trace-stores); add --clang"
                    .into(),
            ))
        }
    }
    match (c.capture, c.family) {
        (Capture::Tsan, Family::Gcc) => f.push("-fsanitize-coverage=trace-pc".into()),
        // no-prune: clang otherwise leaves out blocks it deems redundant for coverage, whose
        // instructions would then never be counted.
        (Capture::Tsan, Family::Clang) => f.push("-fsanitize-coverage=trace-pc,no-prune".into()),
        (Capture::Sancov, _) => {}
    }
    f.push("-g".into());
    Ok(f)
}

/// Flags that link the shim (from `shim_dir`) into an executable or shared object.
pub fn link_flags(c: &Compiler, shim_dir: &Path) -> Vec<String> {
    let dir = shim_dir.display().to_string();
    let mut f = Vec::new();
    if c.family == Family::Clang {
        // clang would link its own sanitizer (or coverage) runtime, whose definitions of the
        // callbacks would win over the shim's.
        f.push("-fno-sanitize-link-runtime".to_string());
    }
    f.extend([
        format!("-L{dir}"),
        format!("-Wl,-rpath,{dir}"),
        "-lcachescope_shim".to_string(),
        // Resolve every symbol at start: the block decoder follows PLT slots to tell calls
        // into the shim from the program's own calls.
        "-Wl,-z,now".to_string(),
    ]);
    f
}

/// Flags that keep the OpenMP runtime linked when `args` build with `-fopenmp`.
///
/// The shim defines the runtime's entry points it records (`GOMP_parallel`, `GOMP_barrier`,
/// `omp_set_lock`, ...) and calls the real ones through `dlsym(RTLD_NEXT)`. A program that
/// calls nothing else of the runtime — a `#pragma omp parallel` without any `omp_*` call —
/// has all its references satisfied by the shim, and a linker in `--as-needed` mode (gcc's
/// default on Debian and Ubuntu) then drops the runtime: the program would abort at its first
/// parallel region, recorded or not.
fn openmp_runtime(c: &Compiler, args: &[String]) -> Vec<String> {
    let runtime = args.iter().rev().find_map(|a| match a.as_str() {
        "-fopenmp" => Some(match c.family {
            Family::Gcc => "gomp",
            Family::Clang => "omp",
        }),
        _ => match a.strip_prefix("-fopenmp=")? {
            "libgomp" => Some("gomp"),
            "libiomp5" => Some("iomp5"),
            _ => Some("omp"),
        },
    });
    match runtime {
        Some(lib) => vec![
            "-Wl,--push-state,--no-as-needed".to_string(),
            format!("-l{lib}"),
            "-Wl,--pop-state".to_string(),
        ],
        None => Vec::new(),
    }
}

/// Flags that keep the C++ standard library linked when `c` is a C++ driver (`g++`,
/// `clang++-14`).
///
/// The shim defines the global `operator new` forms and jumps to the real ones (`dlsym`): a
/// program whose only use of the library is `new` (no `delete`, no stream) has that reference
/// satisfied by the shim, and `--as-needed` drops libstdc++ (or libc++ with
/// `-stdlib=libc++`); the program would then abort at its first `new`.
fn cxx_runtime(c: &Compiler, args: &[String]) -> Vec<String> {
    let name = Path::new(&c.program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !name.contains("++") {
        return Vec::new();
    }
    let lib = if args.iter().any(|a| a == "-stdlib=libc++") {
        "c++"
    } else {
        "stdc++"
    };
    vec![
        "-Wl,--push-state,--no-as-needed".to_string(),
        format!("-l{lib}"),
        "-Wl,--pop-state".to_string(),
    ]
}

/// Plans the invocations for `args` (the user's compiler arguments). `tmp` is where split
/// compilations put their objects.
pub fn plan(c: &Compiler, args: &[String], shim_dir: &Path, tmp: &Path) -> Result<Plan, CcError> {
    let compile_only = args.iter().any(|a| {
        matches!(
            a.as_str(),
            "-c" | "-S" | "-E" | "-M" | "-MM" | "-fsyntax-only"
        )
    });
    // `-v` alone asks for the version; with inputs (as CMake's compiler checks run it) it
    // shows the steps of a real build, which must be the wrapped one.
    let queries = args.is_empty()
        || args == ["-v"]
        || args.iter().any(|a| {
            matches!(a.as_str(), "--version" | "-dumpversion" | "-dumpmachine")
                || a.starts_with("-print-")
                || a.starts_with("--print")
        });
    if queries {
        return Ok(Plan {
            steps: vec![Step {
                args: args.to_vec(),
            }],
            temporaries: Vec::new(),
            instrumented: Vec::new(),
        });
    }
    let cflags = compile_flags(c)?;
    let mut lflags = link_flags(c, shim_dir);
    lflags.extend(openmp_runtime(c, args));
    lflags.extend(cxx_runtime(c, args));
    let sources = source_indices(args);
    if compile_only {
        let mut a = args.to_vec();
        a.extend(cflags);
        // Objects (`-c`); not assembly, preprocessed text or dependency lists.
        let objects = args.iter().any(|a| a == "-c")
            && !args
                .iter()
                .any(|a| matches!(a.as_str(), "-S" | "-E" | "-M" | "-MM" | "-fsyntax-only"));
        let instrumented = match (objects, output_arg(args)) {
            (false, _) => Vec::new(),
            (true, Some(o)) => vec![(PathBuf::from(&o), o)],
            (true, None) => sources
                .iter()
                .map(|&i| {
                    (
                        PathBuf::from(format!("{}.o", stem_of(&args[i]))),
                        args[i].clone(),
                    )
                })
                .collect(),
        };
        return Ok(Plan {
            steps: vec![Step { args: a }],
            temporaries: Vec::new(),
            instrumented,
        });
    }
    let split = c.family == Family::Gcc && !sources.is_empty();
    if !split {
        let mut a = args.to_vec();
        if !sources.is_empty() {
            a.extend(cflags);
        }
        a.extend(lflags);
        let instrumented = if sources.is_empty() {
            Vec::new()
        } else {
            let out = output_arg(args).unwrap_or_else(|| "a.out".into());
            vec![(PathBuf::from(&out), out)]
        };
        return Ok(Plan {
            steps: vec![Step { args: a }],
            temporaries: Vec::new(),
            instrumented,
        });
    }
    // gcc, compile + link: compile each source alone, then link the objects.
    let compile_opts = compile_options(args, &sources);
    let mut steps = Vec::new();
    let mut temporaries = Vec::new();
    let mut link_args = Vec::new();
    let mut instrumented = Vec::new();
    for (n, &i) in sources.iter().enumerate() {
        let obj = tmp.join(format!("{n}-{}.o", stem_of(&args[i])));
        let mut a = compile_opts.clone();
        a.extend(dependency_options(args, &args[i]));
        a.extend(["-c".to_string(), args[i].clone(), "-o".to_string()]);
        a.push(obj.display().to_string());
        a.extend(cflags.iter().cloned());
        steps.push(Step { args: a });
        instrumented.push((obj.clone(), args[i].clone()));
        temporaries.push(obj);
    }
    let mut obj_iter = temporaries.iter();
    let mut language_value = false;
    for (i, a) in args.iter().enumerate() {
        // `-x LANGUAGE` applied to the sources; the link step gets objects.
        if std::mem::take(&mut language_value) {
            continue;
        }
        if a == "-x" {
            language_value = true;
            continue;
        }
        if a.starts_with("-x") {
            continue;
        }
        if sources.contains(&i) {
            if let Some(o) = obj_iter.next() {
                link_args.push(o.display().to_string());
            }
        } else {
            link_args.push(a.clone());
        }
    }
    link_args.push("-g".into());
    link_args.extend(lflags);
    steps.push(Step { args: link_args });
    Ok(Plan {
        steps,
        temporaries,
        instrumented,
    })
}

/// The arguments of a compile+link command that matter for compiling: everything except the
/// sources, the output and linker-only options.
fn compile_options(args: &[String], sources: &[usize]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let linker_only = a.starts_with("-l")
            || a.starts_with("-L")
            || a.starts_with("-Wl,")
            || matches!(
                a.as_str(),
                "-static" | "-shared" | "-pie" | "-no-pie" | "-rdynamic" | "-s"
            );
        if sources.contains(&i) {
            i += 1;
        } else if matches!(
            a.as_str(),
            "-o" | "-Xlinker" | "-l" | "-L" | "-T" | "-u" | "-z"
        ) {
            i += 2;
        } else if linker_only || (!a.starts_with('-') && !is_source(a)) {
            // Objects and libraries given by path are link inputs.
            i += 1;
        } else {
            out.push(a.clone());
            if TAKES_VALUE.contains(&a.as_str()) {
                if let Some(v) = args.get(i + 1) {
                    out.push(v.clone());
                }
                i += 1;
            }
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn gcc() -> Compiler {
        Compiler::choose(Some("gcc"), false, Capture::Tsan)
    }

    #[test]
    fn gcc_compile_and_link_is_split() {
        let p = plan(
            &gcc(),
            &s(&["-O2", "-fopenmp", "a.c", "-o", "prog", "-lm", "-DX=1"]),
            Path::new("/shim"),
            Path::new("/tmp/t"),
        )
        .unwrap();
        assert_eq!(p.steps.len(), 2);
        let compile = &p.steps[0].args;
        assert!(compile.starts_with(&s(&["-O2", "-fopenmp", "-DX=1", "-c", "a.c", "-o"])));
        assert!(compile.contains(&"-fsanitize=thread".to_string()));
        assert!(compile.contains(&"-fno-builtin-memcpy".to_string()));
        assert!(!compile.contains(&"-lm".to_string()));
        let link = &p.steps[1].args;
        assert_eq!(
            link[..5],
            s(&["-O2", "-fopenmp", "/tmp/t/0-a.o", "-o", "prog"])
        );
        assert!(link.contains(&"-lcachescope_shim".to_string()));
        assert!(!link.iter().any(|a| a.starts_with("-fsanitize")));
        assert_eq!(p.temporaries, vec![PathBuf::from("/tmp/t/0-a.o")]);
    }

    #[test]
    fn openmp_links_keep_the_runtime() {
        let link = |c: &Compiler, args: &[&str]| {
            let p = plan(c, &s(args), Path::new("/shim"), Path::new("/tmp/t")).unwrap();
            p.steps.last().unwrap().args.clone()
        };
        let kept = |lib: &str| s(&["-Wl,--push-state,--no-as-needed", lib, "-Wl,--pop-state"]);
        let gcc_link = link(&gcc(), &["-O2", "-fopenmp", "a.c", "-o", "prog"]);
        assert!(gcc_link.ends_with(&kept("-lgomp")), "{gcc_link:?}");
        let clang = Compiler::choose(Some("clang-14"), false, Capture::Tsan);
        let clang_link = link(&clang, &["-fopenmp", "a.c", "-o", "prog"]);
        assert!(clang_link.ends_with(&kept("-lomp")), "{clang_link:?}");
        let gomp = link(&clang, &["-fopenmp=libgomp", "a.o", "-o", "prog"]);
        assert!(gomp.ends_with(&kept("-lgomp")), "{gomp:?}");
        // Without OpenMP, or when only compiling, nothing is added.
        let plain = link(&gcc(), &["-O2", "a.c", "-o", "prog"]);
        assert!(!plain.iter().any(|a| a.contains("as-needed")), "{plain:?}");
        let simd = link(&gcc(), &["-fopenmp-simd", "a.c", "-o", "prog"]);
        assert!(!simd.iter().any(|a| a.contains("as-needed")), "{simd:?}");
        let compile = link(&gcc(), &["-fopenmp", "-c", "a.c"]);
        assert!(
            !compile.iter().any(|a| a.contains("as-needed")),
            "{compile:?}"
        );
    }

    #[test]
    fn cxx_links_keep_the_standard_library() {
        let link = |program: &str, args: &[&str]| {
            let c = Compiler::choose(Some(program), false, Capture::Tsan);
            let p = plan(&c, &s(args), Path::new("/shim"), Path::new("/tmp/t")).unwrap();
            p.steps.last().unwrap().args.clone()
        };
        let kept = |lib: &str| s(&["-Wl,--push-state,--no-as-needed", lib, "-Wl,--pop-state"]);
        let gxx = link("g++", &["-O2", "a.cpp", "-o", "prog"]);
        assert!(gxx.ends_with(&kept("-lstdc++")), "{gxx:?}");
        let libcxx = link(
            "/usr/bin/clang++-14",
            &["-stdlib=libc++", "a.cpp", "-o", "prog"],
        );
        assert!(libcxx.ends_with(&kept("-lc++")), "{libcxx:?}");
        // A C driver links no C++ library.
        let c = link("gcc", &["a.c", "-o", "prog"]);
        assert!(!c.iter().any(|a| a.contains("stdc++")), "{c:?}");
    }

    #[test]
    fn compile_only_adds_instrumentation_only() {
        let p = plan(
            &gcc(),
            &s(&["-c", "x.c"]),
            Path::new("/shim"),
            Path::new("/t"),
        )
        .unwrap();
        assert_eq!(p.steps.len(), 1);
        assert!(p.steps[0]
            .args
            .contains(&"-fsanitize-coverage=trace-pc".to_string()));
        assert!(!p.steps[0].args.contains(&"-lcachescope_shim".to_string()));
    }

    #[test]
    fn link_only_links_the_shim() {
        let p = plan(
            &gcc(),
            &s(&["a.o", "b.o", "-o", "p"]),
            Path::new("/shim"),
            Path::new("/t"),
        )
        .unwrap();
        assert_eq!(p.steps.len(), 1);
        assert!(p.steps[0].args.contains(&"-Wl,-rpath,/shim".to_string()));
        assert!(!p.steps[0].args.iter().any(|a| a.starts_with("-fsanitize")));
    }

    #[test]
    fn clang_compiles_and_links_in_one_step() {
        let c = Compiler::choose(Some("clang-14"), false, Capture::Tsan);
        let p = plan(
            &c,
            &s(&["a.c", "-o", "p"]),
            Path::new("/shim"),
            Path::new("/t"),
        )
        .unwrap();
        assert_eq!(p.steps.len(), 1);
        let a = &p.steps[0].args;
        assert!(a.contains(&"-fsanitize=thread".to_string()));
        assert!(a.contains(&"-fno-sanitize-link-runtime".to_string()));
    }

    #[test]
    fn sancov_needs_clang() {
        let c = Compiler::choose(Some("gcc"), false, Capture::Sancov);
        assert!(plan(&c, &s(&["-c", "a.c"]), Path::new("/s"), Path::new("/t")).is_err());
    }

    #[test]
    fn sources_after_x_language_are_compiled_with_instrumentation() {
        let p = plan(
            &gcc(),
            &s(&[
                "-O2",
                "-x",
                "c",
                "kernel.inc",
                "-x",
                "none",
                "lib.a",
                "-o",
                "p",
            ]),
            Path::new("/s"),
            Path::new("/t"),
        )
        .unwrap();
        assert_eq!(p.steps.len(), 2, "{p:?}");
        let compile = &p.steps[0].args;
        assert!(compile.contains(&"kernel.inc".to_string()), "{compile:?}");
        assert!(compile.contains(&"-fsanitize=thread".to_string()));
        // The link step takes the object as an object, not as C.
        let link = &p.steps[1].args;
        assert!(!link.iter().any(|a| a.starts_with("-x")), "{link:?}");
        assert!(link.contains(&"lib.a".to_string()), "{link:?}");
        assert_eq!(source_indices(&s(&["-xc++", "a.h", "-xnone", "b.o"])), [1]);
    }

    #[test]
    fn response_files_are_expanded_with_quotes_and_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner.rsp");
        std::fs::write(&inner, "-DINNER=1").unwrap();
        let outer = dir.path().join("outer.rsp");
        std::fs::write(
            &outer,
            format!(
                "-O2 'a b.c'\n\"-DX=\\\"y\\\"\" c\\ d.c @{}",
                inner.display()
            ),
        )
        .unwrap();
        let args = expand_response_files(&s(&["-c", &format!("@{}", outer.display()), "@missing"]));
        assert_eq!(
            args,
            s(&[
                "-c",
                "-O2",
                "a b.c",
                "-DX=\"y\"",
                "c d.c",
                "-DINNER=1",
                "@missing"
            ])
        );
    }

    #[test]
    fn dependency_files_of_a_split_build_are_named_as_gcc_names_them() {
        let compile = |args: &[&str]| {
            plan(&gcc(), &s(args), Path::new("/s"), Path::new("/t"))
                .unwrap()
                .steps[0]
                .args
                .clone()
        };
        let a = compile(&["-MMD", "src/x.c", "-o", "bin/prog.out"]);
        assert!(
            a.windows(4)
                .any(|w| w == s(&["-MF", "bin/prog.d", "-MT", "bin/prog.out"])),
            "{a:?}"
        );
        let b = compile(&["-MD", "src/x.c"]);
        assert!(
            b.windows(4)
                .any(|w| w == s(&["-MF", "a-x.d", "-MT", "x.o"])),
            "{b:?}"
        );
        let c = compile(&["-MMD", "-MF", "deps/x.d", "x.c", "-o", "p"]);
        assert_eq!(c.iter().filter(|a| *a == "-MF").count(), 1, "{c:?}");
    }

    #[test]
    fn verbose_builds_are_wrapped_and_a_lone_v_is_a_query() {
        let p = plan(&gcc(), &s(&["-v"]), Path::new("/s"), Path::new("/t")).unwrap();
        assert_eq!(p.steps[0].args, s(&["-v"]));
        let p = plan(
            &gcc(),
            &s(&["-v", "a.c", "-o", "p"]),
            Path::new("/s"),
            Path::new("/t"),
        )
        .unwrap();
        assert_eq!(p.steps.len(), 2);
        assert!(p.steps[0].args.contains(&"-fsanitize=thread".to_string()));
    }

    #[test]
    fn version_queries_pass_through() {
        let p = plan(&gcc(), &s(&["--version"]), Path::new("/s"), Path::new("/t")).unwrap();
        assert_eq!(p.steps[0].args, s(&["--version"]));
    }
}
