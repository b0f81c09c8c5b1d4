//! `cachescope calibrate --false-sharing`: the written model loads, has a positive finite τ,
//! and `cachescope audit --machine` accepts it.

use std::process::{Command, Output};
use std::time::Instant;

use cachescope_sim::MachineModel;

fn cachescope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cachescope"))
        .args(args)
        .output()
        .expect("run cachescope")
}

fn text(o: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn calibrated_model_loads_and_audits() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("cal.toml");
    let model_s = model.to_str().unwrap();
    let started = Instant::now();
    // Fewer operations than the default: the test checks the plumbing, not the value.
    let o = cachescope(&[
        "calibrate",
        "--false-sharing",
        "-o",
        model_s,
        "--ops",
        "4194304",
        "--repetitions",
        "5",
    ]);
    assert!(o.status.success(), "calibrate failed: {}", text(&o));
    assert!(
        started.elapsed().as_secs() <= 30,
        "calibration took {:?}",
        started.elapsed()
    );
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains("tau = "), "{summary}");
    assert!(summary.contains("clock: "), "{summary}");

    let m = MachineModel::load(model_s).expect("calibrated model loads");
    let bw = m.bandwidth.expect("bandwidth section");
    let tau = bw.false_sharing_penalty_cycles.expect("tau written");
    assert!(tau.is_finite() && tau > 0.0, "tau = {tau}");
    assert!(bw.ghz.is_finite() && bw.ghz > 0.0, "ghz = {}", bw.ghz);

    let trace = dir.path().join("t.cstrace");
    let trace_s = trace.to_str().unwrap();
    let o = cachescope(&[
        "trace",
        "gen",
        "false-sharing",
        "--threads",
        "2",
        "--size",
        "64K",
        "-o",
        trace_s,
    ]);
    assert!(o.status.success(), "gen failed: {}", text(&o));
    let o = cachescope(&["audit", "--machine", model_s, "--json", "-", trace_s]);
    assert_eq!(o.status.code(), Some(1), "audit: {}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("audit JSON");
    // τ goes through TOML text and back: equal up to float printing.
    let used = report["penalty_cycles"].as_f64().expect("penalty_cycles");
    assert!(
        (used - tau).abs() <= 1e-9 * tau.abs(),
        "{used} vs {tau}: {report}"
    );
    let findings = report["findings"].as_array().expect("findings");
    assert!(!findings.is_empty(), "{report}");
    let cost = findings[0]["cost_cycles"].as_f64().unwrap();
    let events = findings[0]["events"].as_f64().unwrap();
    assert!(
        (cost - events * tau).abs() <= 1e-6 * cost.max(1.0),
        "{report}"
    );
    assert!(started.elapsed().as_secs() <= 30, "{:?}", started.elapsed());
}
