//! `cachescope cc` warns about memory instructions in the code it built that the recorder will
//! not see, naming their kind and function, and stays quiet on ordinary code.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{cachescope, ensure_shim, stderr};

fn build(dir: &Path, compiler: &str, src: &Path, flags: &[&str]) -> Output {
    ensure_shim();
    let o = Command::new(cachescope())
        .args(["cc", "--compiler", compiler])
        .args(flags)
        .arg(src)
        .arg("-o")
        .arg(dir.join("prog"))
        .output()
        .expect("run cachescope cc");
    assert!(o.status.success(), "{compiler}: {}", stderr(&o));
    o
}

#[test]
fn intrinsics_the_instrumentation_skips_are_named_at_build_time() {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/record/avx_intrinsics.c");
    let gcc = stderr(&build(dir.path(), "gcc", &src, &["-O2", "-mavx2", "-g"]));
    assert!(gcc.contains("the recorder will not see"), "{gcc}");
    assert!(gcc.contains("gathers/scatters: in gather_sum"), "{gcc}");
    assert!(
        gcc.contains("non-temporal (streaming) loads/stores: in copy_nt"),
        "{gcc}"
    );
    // gcc reports 32-byte accesses as ranges.
    assert!(!gcc.contains("wider than 16 bytes"), "{gcc}");
    if support::compilers().contains(&"clang-14") {
        let clang = stderr(&build(
            dir.path(),
            "clang-14",
            &src,
            &["-O2", "-mavx2", "-g"],
        ));
        assert!(clang.contains("wider than 16 bytes"), "{clang}");
        assert!(clang.contains("triad_avx"), "{clang}");
        assert!(!clang.contains("plain"), "{clang}");
    }
}

#[test]
fn ordinary_vectorized_code_builds_without_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/jacobi_naive.c");
    for compiler in support::compilers() {
        let o = build(
            dir.path(),
            compiler,
            &src,
            &["-O3", "-march=native", "-fopenmp", "-g"],
        );
        assert!(
            !stderr(&o).contains("will not see"),
            "{compiler}: {}",
            stderr(&o)
        );
    }
}
