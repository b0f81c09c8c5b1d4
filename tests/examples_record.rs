//! Every example program builds with `cachescope cc` (gcc and clang), records with 1 and 2
//! threads, prints what its native build prints, and its trace verifies and replays.

mod support;

use std::path::Path;
use std::process::Command;

use cachescope_schema::{verify_file, EventKind};
use support::{cachescope, compilers, count, ensure_shim, events, record, run_ok};

/// Small inputs, so that the debug-build replay stays quick.
const CASES: &[(&str, &[&str])] = &[
    ("jacobi_naive", &["128", "4"]),
    ("jacobi_blocked", &["128", "4"]),
    ("false_sharing", &["200"]),
    ("false_sharing_padded", &["200"]),
    ("prime_sieve", &["200000"]),
    ("spmv_dynamic", &["1", "5000", "1"]),
    ("spmv_dynamic", &["16", "5000", "1"]),
    ("spmv_dynamic_padded", &["1", "5000", "1"]),
    ("accumulators_packed", &["20000"]),
    ("accumulators_padded", &["20000"]),
    ("producer_consumer", &["4", "1024"]),
    ("mutex_counter", &["2000", "2"]),
    ("latent_false_sharing", &["200", "0"]),
];

#[test]
fn every_example_records_verifies_and_replays() {
    ensure_shim();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let dir = tempfile::tempdir().unwrap();
    for compiler in compilers() {
        let native = dir.path().join(format!("native-{compiler}"));
        let inst = dir.path().join(format!("inst-{compiler}"));
        run_ok(
            Command::new("make")
                .arg("-s")
                .arg("-C")
                .arg(&examples)
                .arg(format!("O={}", native.display()))
                .arg(format!("CC={compiler}")),
        );
        run_ok(
            Command::new("make")
                .arg("-s")
                .arg("-C")
                .arg(&examples)
                .arg(format!("O={}", inst.display()))
                .arg(format!(
                    "CC={} cc --compiler {compiler}",
                    cachescope().display()
                )),
        );
        for (name, args) in CASES {
            for threads in [1u32, 2] {
                let what = format!("{compiler} {name} {args:?} {threads} thread(s)");
                let expected = String::from_utf8(
                    run_ok(
                        Command::new(native.join(name))
                            .args(*args)
                            .env("OMP_NUM_THREADS", threads.to_string()),
                    )
                    .stdout,
                )
                .unwrap();
                let trace = dir
                    .path()
                    .join(format!("{compiler}-{name}-{threads}.cstrace"));
                let out = record(&trace, &inst.join(name), args, threads);
                assert_eq!(out, expected, "{what}: output under the recorder");
                let report = verify_file(&trace).unwrap();
                assert!(report.ok(), "{what}: {:?}", report.problem());
                let all = events(&trace);
                let accesses: usize = all
                    .iter()
                    .map(|(_, e)| count(e, EventKind::Load) + count(e, EventKind::Store))
                    .sum();
                assert!(accesses > 1000, "{what}: only {accesses} accesses");
                if *name != "mutex_counter" {
                    // OpenMP: every team member sees the same barriers.
                    let workers: Vec<usize> = all
                        .iter()
                        .filter(|(_, e)| count(e, EventKind::RegionBegin) > 0)
                        .map(|(_, e)| count(e, EventKind::BarrierEnter))
                        .collect();
                    assert_eq!(workers.len() as u32, threads, "{what}: team members");
                    assert!(
                        workers.windows(2).all(|w| w[0] == w[1]),
                        "{what}: barrier counts per thread differ: {workers:?}"
                    );
                }
                run_ok(
                    Command::new(cachescope())
                        .arg("simulate")
                        .arg(&trace)
                        .arg("--json")
                        .arg(dir.path().join("sim.json")),
                );
            }
        }
    }
}
