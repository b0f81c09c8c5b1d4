//! Cachegrind-identical mode, checked against the real Cachegrind: small C programs are built
//! with gcc, run under `valgrind --tool=cachegrind` with explicit geometry and under
//! `valgrind --tool=lackey`; the imported Lackey trace simulated with `--machine cachegrind`
//! and the same geometry must give all nine counts exactly.

use std::path::{Path, PathBuf};
use std::process::Command;

const PROGRAMS: [&str; 3] = ["rowcol_sum", "matmul", "list_walk"];
const GEOMETRIES: [[&str; 3]; 2] = [
    ["4096,2,64", "8192,4,64", "65536,8,64"],
    ["32768,8,64", "32768,8,64", "262144,16,64"],
];

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(cmd: &mut Command) -> std::process::Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// The `summary:` line of a cachegrind.out file, in its `events:` order.
fn cachegrind_summary(out: &Path) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(out).unwrap();
    let events: Vec<String> = text
        .lines()
        .find_map(|l| l.strip_prefix("events:"))
        .expect("events line")
        .split_whitespace()
        .map(String::from)
        .collect();
    let values = text
        .lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .expect("summary line")
        .split_whitespace()
        .map(|v| v.parse::<u64>().unwrap());
    events.into_iter().zip(values).collect()
}

#[test]
fn nine_counts_identical_to_valgrind_cachegrind() {
    if !have("valgrind") || !have("gcc") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have valgrind and gcc (scripts/system-deps.sh)"
        );
        eprintln!("SKIPPED: valgrind or gcc missing");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let bin = env!("CARGO_BIN_EXE_cachescope");
    for prog in PROGRAMS {
        let exe: PathBuf = dir.path().join(prog);
        run(Command::new("gcc")
            .args(["-O1", "-g", "-o"])
            .arg(&exe)
            .arg(src.join(format!("{prog}.c"))));
        let lackey = dir.path().join(format!("{prog}.lackey"));
        run(Command::new("valgrind")
            .args(["--tool=lackey", "--trace-mem=yes"])
            .arg(format!("--log-file={}", lackey.display()))
            .arg(&exe));
        let trace = dir.path().join(format!("{prog}.cstrace"));
        run(Command::new(bin)
            .args(["import", "lackey"])
            .arg(&lackey)
            .arg("-o")
            .arg(&trace));
        for [i1, d1, ll] in GEOMETRIES {
            let cg_out = dir.path().join(format!("{prog}.cg.out"));
            run(Command::new("valgrind")
                .args(["--tool=cachegrind", "--cache-sim=yes"])
                .arg(format!("--I1={i1}"))
                .arg(format!("--D1={d1}"))
                .arg(format!("--LL={ll}"))
                .arg(format!("--cachegrind-out-file={}", cg_out.display()))
                .arg(&exe));
            let expected = cachegrind_summary(&cg_out);
            assert_eq!(expected.len(), 9, "{prog}: {expected:?}");
            let o = run(Command::new(bin).arg("simulate").arg(&trace).args([
                "--machine",
                "cachegrind",
                "--I1",
                i1,
                "--D1",
                d1,
                "--LL",
                ll,
                "--json",
            ]));
            let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(report["cachegrind"]["fetches_in_trace"], true, "{prog}");
            let events = &report["cachegrind"]["events"];
            for (name, want) in &expected {
                assert_eq!(
                    events[name.as_str()].as_u64(),
                    Some(*want),
                    "{prog} with I1={i1} D1={d1} LL={ll}: {name}"
                );
            }
            eprintln!("{prog} I1={i1} D1={d1} LL={ll}: {expected:?} identical");
        }
    }
}
