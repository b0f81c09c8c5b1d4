//! `cachescope record`: runs a program built with `cachescope cc` under the shim and leaves
//! one trace file.
//!
//! The shim writes to a temporary file next to the output; only the complete trace of a run
//! that ended by itself replaces the output, so an interrupted or crashed run never destroys an
//! earlier good trace (its trace, complete up to the signal or not, is kept as
//! `OUTPUT.partial`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;

pub use cachescope_schema::Instrumentation;
use cachescope_schema::{OpenOptions, TimeUnit, TraceFile};

/// Why recording could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The program is missing or unreadable.
    #[error("{path}: {reason}")]
    Program {
        /// The program.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Starting or waiting for the program failed.
    #[error("running {path}: {err}")]
    Run {
        /// The program.
        path: PathBuf,
        /// The error.
        err: std::io::Error,
    },
    /// The output location is unusable.
    #[error("{path}: {reason}")]
    Output {
        /// The output path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Finds `program` like a shell does (a name without `/` is looked up in `PATH`).
pub fn resolve_program(program: &Path) -> Result<PathBuf, RecordError> {
    let not_found = |reason: &str| RecordError::Program {
        path: program.to_path_buf(),
        reason: reason.to_string(),
    };
    if program.components().count() > 1 || program.is_absolute() {
        return if program.is_file() {
            Ok(program.to_path_buf())
        } else if program.is_dir() {
            Err(not_found("a directory, not a program"))
        } else if program.exists() {
            Err(not_found("not a regular file"))
        } else {
            Err(not_found("no such file"))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| not_found("not found in PATH"))
}

/// Reads which instrumentation callbacks `program` imports (the shim applies the same rule to
/// the executable of each process it is loaded into).
pub fn inspect(program: &Path) -> Result<Instrumentation, RecordError> {
    use object::{Object, ObjectSymbol};
    let bad = |reason: String| RecordError::Program {
        path: program.to_path_buf(),
        reason,
    };
    let data = std::fs::read(program).map_err(|e| bad(e.to_string()))?;
    let file = object::File::parse(&*data)
        .map_err(|e| bad(format!("not an executable cachescope can read: {e}")))?;
    let imports = file
        .dynamic_symbols()
        .filter(|sym| sym.is_undefined())
        .filter_map(|sym| sym.name().ok());
    Ok(Instrumentation::from_imports(imports))
}

/// Whether `program` is a script (starts with `#!`). It may start a program built with
/// `cachescope cc`, and the shim then records that one.
pub fn is_script(program: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 2];
    std::fs::File::open(program)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == b"#!")
}

/// Words of a launcher's arguments looked at for the program it starts (a command line with
/// more is not searched further: launchers name their program early).
const LAUNCHER_WORDS: usize = 256;

/// The first program built with `cachescope cc` that a launcher's arguments name (`env
/// OMP_NUM_THREADS=2 ./prog`, `taskset -c 0,1 ./prog`, `sh -c "./prog 4"`): an argument, or a
/// word of one, that is such an executable (a bare name is looked up in `PATH`).
pub fn instrumented_program_in(args: &[OsString]) -> Option<PathBuf> {
    args.iter()
        .flat_map(|a| {
            a.to_string_lossy()
                .split_whitespace()
                .map(|w| w.trim_matches(|c| c == '\'' || c == '"').to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|w| !w.is_empty() && !w.starts_with('-'))
        .take(LAUNCHER_WORDS)
        .filter_map(|w| resolve_program(Path::new(&w)).ok())
        .find(|p| inspect(p).is_ok_and(Instrumentation::records_accesses))
}

/// Signals `record` survives while the program runs, passing on those a process sent it.
const FORWARDED: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The program (resolved).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The trace to write.
    pub output: PathBuf,
    /// The shim library.
    pub shim: PathBuf,
    /// Time unit to record in; `None` lets the shim take the one of the executable it
    /// records (a launcher's program is known only when it starts).
    pub time_unit: Option<TimeUnit>,
    /// Callers to record per heap allocation beyond its site (at most
    /// [`cachescope_schema::event::MAX_ALLOC_CALLERS`]).
    pub alloc_callers: usize,
    /// Extra environment for the program (e.g. `OMP_NUM_THREADS`).
    pub env: Vec<(OsString, OsString)>,
}

/// How recording ended.
#[derive(Debug)]
pub struct RecordOutcome {
    /// The program's exit status.
    pub status: ExitStatus,
    /// Where the trace is, if one was written: the output when it is complete and the program
    /// ended by itself, else `OUTPUT.partial`.
    pub trace: Option<PathBuf>,
    /// Whether the trace is complete (it has its trailer: every event recorded up to the end,
    /// which a signal may have brought early).
    pub complete: bool,
    /// Wall time of the run in seconds.
    pub seconds: f64,
}

/// Runs the program under the shim and waits for it. While it runs, SIGINT, SIGTERM and SIGHUP
/// do not stop this process: the program gets them (from the terminal, as its process group
/// does, or passed on when a process sent them to `record`), the shim completes the trace, and
/// the trace is moved into place.
pub fn record(opts: &RecordOptions) -> Result<RecordOutcome, RecordError> {
    // A symbolic link to a file: the file is replaced, not the link, as every other command
    // does with its outputs (the trace is written next to the file and renamed over it).
    let output = match std::fs::symlink_metadata(&opts.output) {
        Ok(m)
            if m.file_type().is_symlink()
                && std::fs::metadata(&opts.output).is_ok_and(|t| t.is_file()) =>
        {
            std::fs::canonicalize(&opts.output).unwrap_or_else(|_| opts.output.clone())
        }
        _ => opts.output.clone(),
    };
    let out_dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !out_dir.is_dir() {
        return Err(RecordError::Output {
            path: output.clone(),
            reason: "its directory does not exist".into(),
        });
    }
    let file_name = opts
        .output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| RecordError::Output {
            path: output.clone(),
            reason: "not a file name".into(),
        })?;
    // Checked before the run, not after it: a trace the program took an hour to write must
    // not be lost to a name it cannot have.
    if let Ok(meta) = std::fs::metadata(&output) {
        if let Some(reason) = unusable_output(&output, &meta) {
            return Err(RecordError::Output {
                path: output.clone(),
                reason,
            });
        }
    }
    // Absolute: the shim opens it in the recorded process, which a launcher may have started
    // in another directory (`cd build && ./prog`); a relative name would put the trace there,
    // where `record` does not look for it.
    let abs_dir = std::fs::canonicalize(&out_dir).map_err(|e| RecordError::Output {
        path: output.clone(),
        reason: format!("cannot resolve its directory {}: {e}", out_dir.display()),
    })?;
    let tmp = abs_dir.join(format!(".{file_name}.recording-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    // The shim creates the trace only once the program runs, and can only say it failed to:
    // a directory the trace cannot be written to is found now, before a run that would go
    // unrecorded.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|_| std::fs::remove_file(&tmp))
        .map_err(|e| RecordError::Output {
            path: output.clone(),
            reason: format!(
                "cannot create the trace in {}: {e}",
                output_dir_name(&out_dir)
            ),
        })?;

    let mut preload = opts.shim.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    // Registering these replaces their default "terminate" action: `record` outlives them,
    // so the program's trace is moved into place whatever ends the program.
    let mut signals =
        SignalsInfo::<WithOrigin>::new(FORWARDED).map_err(|err| RecordError::Run {
            path: opts.program.clone(),
            err,
        })?;
    let start = std::time::Instant::now();
    let mut command = Command::new(&opts.program);
    if let Some(unit) = opts.time_unit {
        command.env("CACHESCOPE_TIME_UNIT", unit.name());
    }
    if let Some(cpus) = own_cpu_list() {
        command.env("CACHESCOPE_WRITER_CPUS", cpus);
    }
    let mut child = command
        .args(&opts.args)
        .envs(opts.env.iter().map(|(k, v)| (k, v)))
        .env("CACHESCOPE_OUT", &tmp)
        .env("CACHESCOPE_ALLOC_CALLERS", opts.alloc_callers.to_string())
        .env("LD_PRELOAD", preload)
        .env("LD_BIND_NOW", "1")
        .spawn()
        .map_err(|err| RecordError::Run {
            path: opts.program.clone(),
            err,
        })?;
    let pid = rustix::process::Pid::from_child(&child);
    let handle = signals.handle();
    let forwarder = std::thread::spawn(move || {
        for info in signals.forever() {
            // Ctrl-C or a hangup from the terminal reach the program as well (one process
            // group; the kernel sends them): not passed on, or the program would get two. A
            // signal a process sent to `record` (`kill`, `timeout`, a job manager's SIGTERM) is
            // meant for the run: the program gets it, and its trace is completed.
            if info.process.is_some() {
                if let Some(sig) = rustix::process::Signal::from_named_raw(info.signal) {
                    let _ = rustix::process::kill_process(pid, sig);
                }
            }
        }
    });
    let waited = child.wait();
    handle.close();
    let _ = forwarder.join();
    let status = waited.map_err(|err| RecordError::Run {
        path: opts.program.clone(),
        err,
    })?;
    let seconds = start.elapsed().as_secs_f64();

    if !tmp.exists() {
        return Ok(RecordOutcome {
            status,
            trace: None,
            complete: false,
            seconds,
        });
    }
    let finished = TraceFile::open_with(
        &tmp,
        OpenOptions {
            allow_incomplete: false,
        },
    )
    .ok();
    let complete = finished.is_some();
    // Only a run that ended by itself replaces the output: a trace cut short by a signal (an
    // interrupt, a crash) is complete up to there, but not the run an earlier trace at the
    // output may hold.
    let ended_normally = std::os::unix::process::ExitStatusExt::signal(&status).is_none();
    // The output may have become the recorded program while it ran (a launcher that builds
    // the program at that path, then runs it): that program is never replaced by its trace.
    // Its header names the recorded process's `/proc/self/exe`.
    let recorded = finished
        .map(|t| PathBuf::from(&t.header().program))
        .filter(|p| ended_normally && same_inode(p, &output));
    let replaces_output = complete && ended_normally && recorded.is_none();
    let dest = if replaces_output {
        output.clone()
    } else {
        out_dir.join(format!("{file_name}.partial"))
    };
    std::fs::rename(&tmp, &dest).map_err(|e| RecordError::Output {
        path: dest.clone(),
        reason: format!("cannot move the trace into place: {e}"),
    })?;
    if let Some(program) = recorded {
        return Err(RecordError::Output {
            path: output.clone(),
            reason: format!(
                "it is the recorded program ({}), which the trace must not replace; the \
                 trace is kept as {}",
                program.display(),
                dest.display()
            ),
        });
    }
    Ok(RecordOutcome {
        status,
        trace: Some(dest),
        complete,
        seconds,
    })
}

/// Why the existing output `path` (with metadata `meta`, links followed) cannot take the
/// trace, if it cannot. The trace is written to a temporary file and renamed over the output,
/// so only a regular file can be replaced: a device or a FIFO (`/dev/null`) would itself be
/// replaced by a regular file. A program is never replaced either: `record -o ./prog -- env
/// A=1 ./prog` must not turn the program into its trace.
fn unusable_output(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let kind = meta.file_type();
    if kind.is_dir() {
        return Some("it is a directory".to_string());
    }
    let not_regular = if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else if kind.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if kind.is_socket() {
        Some("a socket")
    } else if !kind.is_file() {
        Some("not a regular file")
    } else {
        None
    };
    if let Some(what) = not_regular {
        return Some(format!(
            "it is {what}; the trace is renamed into place, which would replace it: give -o \
             a regular file"
        ));
    }
    if meta.permissions().readonly() {
        // Renaming over a read-only file needs only the directory's permission, so it would
        // silently replace a protected trace.
        return Some(
            "the file is read-only; make it writable or remove it to replace it".to_string(),
        );
    }
    let mut head = [0u8; 8];
    let read = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let head = &head[..read];
    // A trace on a file system that marks every file executable (FAT, some mounts) is still
    // a trace, which a new recording may replace.
    let is_trace = head == cachescope_schema::frame::MAGIC;
    let executable = meta.permissions().mode() & 0o111 != 0;
    if !is_trace && (executable || head.starts_with(b"\x7fELF") || head.starts_with(b"#!")) {
        return Some(
            "it is a program (an executable file); refusing to write the trace over it: give \
             -o another file"
                .to_string(),
        );
    }
    // A recording replaces the previous recording, not any file: `-o main.cpp` (a slip for
    // `main.cst`) must not cost the source. An empty file (`mktemp`) may take the trace.
    if !is_trace && !head.is_empty() {
        return Some(
            "it is not a cachescope trace; refusing to write the trace over it: give -o \
             another file, or remove this one first"
                .to_string(),
        );
    }
    None
}

/// `dir` for a message (`.` as "the current directory").
fn output_dir_name(dir: &Path) -> String {
    if dir == Path::new(".") {
        "the current directory".to_string()
    } else {
        dir.display().to_string()
    }
}

/// Whether `a` and `b` are one existing file (device and inode; links followed).
fn same_inode(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The CPUs this thread may run on (`Cpus_allowed_list` of `/proc/thread-self/status`), for the
/// shim's writer thread: the OpenMP runtime may bind the program's main thread before the
/// writer starts, and the writer would inherit that binding.
fn own_cpu_list() -> Option<String> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|l| l.trim().to_owned())
}
