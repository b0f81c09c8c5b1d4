//! Temporary output files that an interruption must not leave behind.
//!
//! Outputs are written to a hidden temporary file next to their target and renamed over it
//! when complete (`output::replace_with`). Dropping the temporary file removes it, but Ctrl-C,
//! SIGTERM or a closed terminal end the process without running destructors: an import from a
//! pipe, interrupted after minutes, left gigabytes in a hidden `.cachescope-*.partial` file.
//! From the first such file on, a thread waits for those signals; on one it removes every
//! file still registered and exits with 128 + the signal number, the status a shell shows for
//! the default action. The target itself is never touched: it keeps its previous content.

use std::path::PathBuf;
use std::sync::{Mutex, Once, PoisonError};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tempfile::NamedTempFile;

/// Temporary files being written, removed on an interruption.
static REGISTERED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

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

/// The registry; a panic while it was locked leaves a valid list, so poisoning is ignored.
fn registered() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    REGISTERED.lock().unwrap_or_else(PoisonError::into_inner)
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
                for p in registered().drain(..) {
                    // Already renamed into place, or never created: nothing to remove.
                    let _ = std::fs::remove_file(p);
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
