//! The example programs in `examples/` build with gcc + OpenMP and compute the right results
//! with 1 and 2 threads (the tracer, bandwidth and false-sharing work records them).

use std::path::Path;
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run(bin: &Path, args: &[&str], threads: &str) -> String {
    let o = Command::new(bin)
        .args(args)
        .env("OMP_NUM_THREADS", threads)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(
        o.status.success(),
        "{} {args:?}: {}",
        bin.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn examples_build_and_agree() {
    if !have("gcc") || !have("make") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have gcc and make"
        );
        eprintln!("SKIPPED: gcc or make missing");
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let o = Command::new("make")
        .arg("-C")
        .arg(&examples)
        .arg(format!("O={}", out.path().display()))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "make: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bin = |name: &str| out.path().join(name);
    let cases: &[(&str, &[&str], Option<&str>)] = &[
        ("jacobi_naive", &["256", "8"], Some("checksum=")),
        ("jacobi_blocked", &["256", "8"], Some("checksum=")),
        ("false_sharing", &["1000"], Some("checksum=ok")),
        ("false_sharing_padded", &["1000"], Some("checksum=ok")),
        ("prime_sieve", &["1000000"], Some("primes_below_N=78498")),
        ("spmv_dynamic", &["1", "20000", "2"], None),
        ("spmv_dynamic", &["16", "20000", "2"], None),
        ("spmv_dynamic_padded", &["1", "20000", "2"], None),
        ("accumulators_packed", &["100000"], None),
        ("accumulators_padded", &["100000"], None),
        ("producer_consumer", &["10", "4096"], Some("sum=")),
        ("mutex_counter", &["10000", "2"], Some("ok")),
        ("latent_false_sharing", &["1000", "0"], Some("checksum=ok")),
        ("latent_false_sharing", &["1000", "32"], Some("checksum=ok")),
        (
            "latent_false_sharing",
            &["1000", "32", "heap"],
            Some("place=heap updates_per_thread=64000 checksum=ok"),
        ),
        (
            "latent_false_sharing",
            &["1000", "120", "malloc"],
            Some("place=malloc updates_per_thread=64000 checksum=ok"),
        ),
    ];
    let mut outputs = std::collections::BTreeMap::new();
    for (name, args, expect) in cases {
        let one = run(&bin(name), args, "1");
        let two = run(&bin(name), args, "2");
        assert_eq!(one, two, "{name} {args:?}: 1 and 2 threads disagree");
        if let Some(e) = expect {
            assert!(two.contains(e), "{name}: expected {e:?} in {two:?}");
        }
        outputs.insert((*name, args.join(" ")), two);
    }
    let key = |n: &'static str| (n, "256 8".to_string());
    assert_eq!(
        outputs[&key("jacobi_naive")],
        outputs[&key("jacobi_blocked")],
        "blocking must not change the result"
    );
    let spmv = |c: &str| outputs[&("spmv_dynamic", format!("{c} 20000 2"))].clone();
    assert_eq!(
        spmv("1"),
        spmv("16"),
        "the chunk size must not change the result"
    );
    assert_eq!(
        outputs[&("spmv_dynamic_padded", "1 20000 2".to_string())],
        spmv("1"),
        "padding y must not change the result"
    );
    assert_eq!(
        outputs[&("accumulators_packed", "100000".to_string())],
        outputs[&("accumulators_padded", "100000".to_string())]
    );
}
