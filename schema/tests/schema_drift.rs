//! The generated capnp code is checked in so that a fresh machine builds without the `capnp`
//! compiler. This test regenerates it and fails on any drift. It needs the `capnp` binary
//! (Debian's `capnproto`, installed by `scripts/test.sh`); set `CACHESCOPE_REGEN_SCHEMA=1` to
//! rewrite the checked-in file after changing `trace.capnp`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn capnp_available() -> bool {
    Command::new("capnp")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn generated_code_matches_schema() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let checked_in = crate_dir.join("src/trace_capnp.rs");
    if !capnp_available() {
        // CI always has capnp (scripts/test.sh installs it) and sets CI=true: fail there.
        assert!(
            std::env::var_os("CI").is_none(),
            "capnp compiler missing in CI: scripts/test.sh must install capnproto"
        );
        eprintln!("SKIPPED: `capnp` not installed; schema drift not checked");
        return;
    }
    let out = tempfile::tempdir().expect("temp dir");
    capnpc::CompilerCommand::new()
        .src_prefix(crate_dir)
        .file(crate_dir.join("trace.capnp"))
        .output_path(out.path())
        .run()
        .expect("capnp compile");
    let generated: PathBuf = out.path().join("trace_capnp.rs");
    let fresh = std::fs::read_to_string(&generated).expect("generated file");
    if std::env::var_os("CACHESCOPE_REGEN_SCHEMA").is_some() {
        std::fs::write(&checked_in, &fresh).expect("write regenerated code");
        return;
    }
    let old = std::fs::read_to_string(&checked_in).expect("checked-in generated code");
    assert!(
        without_compiler_version(&old) == without_compiler_version(&fresh),
        "schema/src/trace_capnp.rs is out of date with schema/trace.capnp; \
         rerun with CACHESCOPE_REGEN_SCHEMA=1 cargo test -p cachescope-schema --test schema_drift"
    );
}

/// The generated file names the `capnp` binary's version in a comment; a different compiler
/// version producing the same code is not drift.
fn without_compiler_version(code: &str) -> String {
    code.lines()
        .filter(|l| !l.starts_with("// capnp binary version:"))
        .collect::<Vec<_>>()
        .join("\n")
}
