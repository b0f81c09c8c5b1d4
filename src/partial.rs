//! Temporary output files, directories and child processes that an interruption must not
//! leave behind.
//!
//! Outputs are written to a hidden temporary file next to their target and renamed over it
//! when complete (`output::replace_with`). Dropping the temporary file removes it, but Ctrl-C,
//! SIGTERM or a closed terminal end the process without running destructors: an import from a
//! pipe, interrupted after minutes, left gigabytes in a hidden `.cachescope-*.partial` file.
//! From the first such file on, a thread waits for those signals; on one it removes every
//! file still registered and exits with 128 + the signal number, the status a shell shows for
//! the default action. The target itself is never touched: it keeps its previous content.
//! `calibrate` registers its benchmarks' directory and each benchmark it runs the same way:
//! killed (they would run on at full speed after `cachescope` is gone) and removed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, PoisonError};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tempfile::NamedTempFile;

/// Temporary files being written, removed on an interruption.
static REGISTERED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Temporary directories (`calibrate`'s benchmarks), removed on an interruption.
static DIRECTORIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Child processes (`calibrate`'s benchmarks), killed on an interruption: they would run on,
/// at full speed, after `cachescope` is gone.
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Set when an interruption is being handled: a child that died of it is not a failure to
/// report (the process is about to exit with 128 + the signal).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Starts the signal thread, once per process.
static WATCH: Once = Once::new();

/// A registered temporary file: removed if the process is interrupted while this lives.
pub struct Partial(PathBuf);

impl Partial {
    /// Creates a temporary file with `make` and registers its path. The registry stays locked
    /// from before the file exists until its path is in it, so a signal arriving in between
    /// waits and then removes it too. The caller renames the file or lets it be removed; keep
    /// the returned `Partial` alive until then (declare it first, so that it is dropped last).
    pub fn create(
        make: impl FnOnce() -> std::io::Result<NamedTempFile>,
    ) -> std::io::Result<(Partial, NamedTempFile)> {
        WATCH.call_once(watch_signals);
        let mut list = registered();
        let tmp = make()?;
        list.push(tmp.path().to_path_buf());
        Ok((Partial(tmp.path().to_path_buf()), tmp))
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        registered().retain(|p| p != &self.0);
    }
}

/// A temporary directory, removed if the process is interrupted while this lives.
pub struct PartialDir(PathBuf);

impl PartialDir {
    /// Registers `path` (a directory the caller removes itself when done).
    pub fn register(path: &Path) -> PartialDir {
        WATCH.call_once(watch_signals);
        lock(&DIRECTORIES).push(path.to_path_buf());
        PartialDir(path.to_path_buf())
    }
}

impl Drop for PartialDir {
    fn drop(&mut self) {
        lock(&DIRECTORIES).retain(|p| p != &self.0);
    }
}

/// A running child process, killed if `cachescope` is interrupted while this lives.
pub struct PartialChild(u32);

impl PartialChild {
    /// Registers the child with process id `pid`.
    pub fn register(pid: u32) -> PartialChild {
        WATCH.call_once(watch_signals);
        lock(&CHILDREN).push(pid);
        PartialChild(pid)
    }
}

impl Drop for PartialChild {
    fn drop(&mut self) {
        lock(&CHILDREN).retain(|&p| p != self.0);
    }
}

/// `command`'s output, like [`std::process::Command::output`], with the child killed if
/// `cachescope` is interrupted meanwhile.
pub fn output_of(command: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    let child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let registered = PartialChild::register(child.id());
    let out = child.wait_with_output();
    drop(registered);
    wait_if_interrupted();
    out
}

/// Waits for the exit when an interruption is being handled (a child killed by it must not
/// be reported as failed, with exit 2, before the process exits with 128 + the signal).
pub fn wait_if_interrupted() {
    if INTERRUPTED.load(Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
}

/// A registry; a panic while it was locked leaves a valid list, so poisoning is ignored.
fn lock<T>(m: &'static Mutex<Vec<T>>) -> std::sync::MutexGuard<'static, Vec<T>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The registry of temporary files.
fn registered() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    lock(&REGISTERED)
}

/// Spawns the thread that cleans up on SIGINT, SIGTERM and SIGHUP and waits until it has
/// installed its handlers. If it cannot, the signals keep their default action (an
/// interruption may then leave the temporary file): the handlers are installed on that
/// thread, so a failure leaves nothing half set up (a handler without its thread would make
/// the process ignore Ctrl-C).
fn watch_signals() {
    let (ready, installed) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("interrupt".into())
        .spawn(move || {
            let mut signals = match Signals::new([SIGINT, SIGTERM, SIGHUP]) {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready.send(Err(e.to_string()));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            if let Some(sig) = signals.forever().next() {
                INTERRUPTED.store(true, Ordering::SeqCst);
                for p in registered().drain(..) {
                    // Already renamed into place, or never created: nothing to remove.
                    let _ = std::fs::remove_file(p);
                }
                for pid in lock(&CHILDREN).drain(..) {
                    // `kill(1)`: sending a signal to another process needs no unsafe code
                    // that way; the child may have ended already.
                    let _ = std::process::Command::new("kill")
                        .args(["-KILL", &pid.to_string()])
                        .stderr(std::process::Stdio::null())
                        .status();
                }
                for d in lock(&DIRECTORIES).drain(..) {
                    let _ = std::fs::remove_dir_all(d);
                }
                std::process::exit(128 + sig);
            }
        });
    let outcome = match spawned {
        Ok(_) => installed
            .recv()
            .unwrap_or_else(|_| Err("the thread ended".into())),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = outcome {
        tracing::warn!(
            "cannot watch for interruptions ({e}): an interrupted write may leave a temporary file"
        );
    }
}
