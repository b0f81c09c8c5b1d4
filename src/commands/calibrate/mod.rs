//! `cachescope calibrate`: measures this machine natively and writes a machine model with the
//! results.
//!
//! * `--false-sharing` ([`false_sharing`]): τ, the cost of one false-sharing event in cycles
//!   (thesis §4.2.4), for the audit;
//! * `--bandwidth` ([`bandwidth`]): the core clock, IPC of ordinary compiled code ([`ipc`]:
//!   recorded with the shim for the tracer's instruction count, timed natively), FLOPs per
//!   cycle, the cost of a page fault and the read, write and combined limits of every data
//!   path, per core and summed over all cores at the memory merge point (thesis §4.3–4.4,
//!   Table 4.3), for `cachescope bandwidth`.
//!
//! Each compiles its embedded C benchmark with gcc into a temporary directory and runs it. With
//! both flags the bandwidth run goes first and its measured clock converts τ to cycles too; one
//! model is written. The base model is `--machine`, by default `host` (levels from /sys) when
//! `--bandwidth` is given and `ivybridge-4c` for `--false-sharing` alone (docs/calibrate.md).

mod bandwidth;
mod false_sharing;
mod ipc;

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cachescope_sim::MachineModel;
use serde::Serialize;

use crate::cli::CalibrateArgs;
use crate::output::{self, write_json};

/// Where the clock frequency came from.
#[derive(Debug, Clone, Serialize)]
pub struct Frequency {
    /// GHz.
    pub ghz: f64,
    /// The file or field it was read from, or how it was measured.
    pub source: String,
}

/// JSON of one mode: its results and the model written.
#[derive(Serialize)]
struct Single<'a, T: Serialize> {
    #[serde(flatten)]
    result: &'a T,
    model_file: Option<&'a Path>,
    runtime_s: f64,
}

/// JSON of both modes.
#[derive(Serialize)]
struct Both<'a> {
    false_sharing: &'a false_sharing::Calibration,
    bandwidth: &'a bandwidth::BandwidthCalibration,
    model_file: Option<&'a Path>,
    runtime_s: f64,
}

/// The base model when `--machine` is not given.
fn default_machine(bandwidth: bool) -> &'static str {
    if bandwidth {
        "host"
    } else {
        "ivybridge-4c"
    }
}

/// Runs the calibrations asked for.
pub fn run(args: &CalibrateArgs) -> Result<ExitCode> {
    let started = Instant::now();
    if !args.false_sharing && !args.bandwidth {
        bail!("nothing to calibrate: pass --bandwidth and/or --false-sharing");
    }
    if args.repetitions == 0 {
        bail!("--repetitions must be at least 1");
    }
    if let Some(path) = &args.output {
        check_writable(path)?;
    }
    let machine = args
        .machine
        .clone()
        .unwrap_or_else(|| default_machine(args.bandwidth).to_string());
    // Registered as an input (as `simulate`, `audit` and `bandwidth` do): `-o` or `--json`
    // naming the model file would replace the model it was calibrated from.
    let base = super::load_machine(&machine)
        .with_context(|| format!("loading base machine model {machine:?}"))?;
    // Refused now, not when the results are written after minutes of measuring.
    let json_file = args.json.as_deref().filter(|p| p.as_os_str() != "-");
    for out in [args.output.as_deref(), json_file].into_iter().flatten() {
        output::refuse_to_replace_an_input(out)?;
    }
    if let (Some(model), Some(json)) = (args.output.as_deref(), json_file) {
        if output::same_file(model, json) {
            bail!(
                "{} is given for two outputs (-o and --json)",
                model.display()
            );
        }
    }
    let dir = tempfile::tempdir().context("creating a temporary directory for the benchmarks")?;
    let _dir_on_interrupt = crate::partial::PartialDir::register(dir.path());

    let bw = match args.bandwidth {
        true => Some(bandwidth::measure(args, &base, dir.path())?),
        false => None,
    };
    let fs = match args.false_sharing {
        true => Some(false_sharing::measure_tau(
            args,
            &base,
            dir.path(),
            bw.as_ref().map(bandwidth::BandwidthCalibration::frequency),
        )?),
        false => None,
    };
    if let Some(path) = &args.output {
        write_model(&base, &machine, fs.as_ref(), bw.as_ref(), path)?;
    }
    let model_file = args.output.as_deref();
    let runtime_s = started.elapsed().as_secs_f64();

    if let Some(to) = &args.json {
        match (&fs, &bw) {
            (Some(f), Some(b)) => write_json(
                &Both {
                    false_sharing: f,
                    bandwidth: b,
                    model_file,
                    runtime_s,
                },
                to,
            )?,
            (Some(f), None) => write_json(
                &Single {
                    result: f,
                    model_file,
                    runtime_s,
                },
                to,
            )?,
            (None, Some(b)) => write_json(
                &Single {
                    result: b,
                    model_file,
                    runtime_s,
                },
                to,
            )?,
            (None, None) => {}
        }
    }
    if args.json.as_deref() != Some(Path::new("-")) {
        let mut o = String::new();
        if let Some(b) = &bw {
            o.push_str(&bandwidth::render(b));
        }
        if let Some(f) = &fs {
            o.push_str(&false_sharing::render(f));
        }
        match model_file {
            Some(p) => {
                let use_with = match (&fs, &bw) {
                    (Some(_), None) => "cachescope audit --machine",
                    (None, _) => "cachescope bandwidth --machine",
                    (Some(_), Some(_)) => "cachescope bandwidth|audit --machine",
                };
                let _ = writeln!(
                    o,
                    "wrote {} (use: {use_with} {} TRACE)",
                    p.display(),
                    p.display()
                );
            }
            None => {
                let _ = writeln!(o, "(no model written; pass -o FILE.toml)");
            }
        }
        if let Some(to) = args.json.as_deref() {
            let _ = writeln!(o, "wrote all measurements to {}", to.display());
        }
        let _ = writeln!(o, "calibration took {runtime_s:.1} s");
        output::print(o)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `base` with the measurements to `path`: loaded back before anything is written, then
/// written to a temporary file next to `path` and renamed over it, so a reader never sees a
/// half-written model.
fn write_model(
    base: &MachineModel,
    base_name: &str,
    fs: Option<&false_sharing::Calibration>,
    bw: Option<&bandwidth::BandwidthCalibration>,
    path: &Path,
) -> Result<()> {
    let mut model = base.clone();
    if !model.name.ends_with("-calibrated") {
        model.name = format!("{}-calibrated", base.name);
    }
    if let Some(b) = bw {
        bandwidth::apply(b, &mut model);
    }
    if let Some(f) = fs {
        false_sharing::apply(f, &mut model);
    }
    let modes = match (fs.is_some(), bw.is_some()) {
        (true, true) => "--bandwidth --false-sharing",
        (true, false) => "--false-sharing",
        _ => "--bandwidth",
    };
    let mut text = String::new();
    let _ = writeln!(
        text,
        "# Written by `cachescope calibrate {modes}` from the base model {base_name:?}."
    );
    if let Some(b) = bw {
        text.push_str(&bandwidth::model_comment(b));
    }
    if let Some(f) = fs {
        text.push_str(&false_sharing::model_comment(f));
    }
    text.push_str(&model.to_toml());
    MachineModel::from_toml(&text, &path.display().to_string())
        .with_context(|| format!("the calibrated model for {} does not load", path.display()))?;
    output::write_file(path, text.as_bytes())
}

/// Fails early (before minutes of measuring) when the model could not be written to `path`.
fn check_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!("-o {}: is a directory, not a model file", path.display());
    }
    if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().readonly()) {
        bail!(
            "-o {}: the file is read-only; make it writable or remove it to replace it",
            path.display()
        );
    }
    let dir = output::parent_dir(path);
    if !dir.is_dir() {
        bail!(
            "-o {}: the directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Writes a benchmark's source to `dir` and compiles it with gcc; returns the executable.
fn compile(dir: &Path, name: &str, source: &str, flags: &[&str]) -> Result<PathBuf> {
    let src = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&src, source).with_context(|| format!("writing {}", src.display()))?;
    tracing::debug!(
        "gcc {} -o {} {}",
        flags.join(" "),
        exe.display(),
        src.display()
    );
    let out = match crate::partial::output_of(
        Command::new("gcc")
            .args(flags)
            .arg("-o")
            .arg(&exe)
            .arg(&src),
    ) {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "gcc not found: calibrate compiles its benchmark ({name}.c) with gcc at run time; \
             install gcc (Debian: apt-get install gcc)"
        ),
        Err(e) => return Err(e).context(format!("running gcc to compile {name}.c")),
    };
    if !out.status.success() {
        bail!(
            "gcc {} {} failed ({}):\n{}",
            flags.join(" "),
            src.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(exe)
}

/// Runs `exe args` and returns its standard output; fails with its standard error when it
/// exits unsuccessfully or is killed by a signal, and kills it after `timeout`.
fn run_bench(exe: &Path, args: &[String], timeout: Duration) -> Result<String> {
    tracing::debug!("running {} {}", exe.display(), args.join(" "));
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let killed_on_interrupt = crate::partial::PartialChild::register(child.id());
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for the benchmark")? {
            break status;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{} did not finish within {} s and was killed",
                exe.display(),
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Reaped: its process id may be reused from here on.
    drop(killed_on_interrupt);
    crate::partial::wait_if_interrupted();
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        bail!(
            "{} failed ({status}): {}",
            exe.display(),
            match stderr.trim() {
                "" => "no error message",
                e => e,
            }
        );
    }
    Ok(stdout)
}

/// The first CPU's "cpu MHz" in /proc/cpuinfo, in GHz (None when absent or zero).
fn cpuinfo_ghz() -> Option<f64> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .filter(|l| l.starts_with("cpu MHz"))
            .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
            .find(|m| *m > 0.0)
            .map(|mhz| mhz / 1e3)
    })
}

/// Median of `v` (not empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
