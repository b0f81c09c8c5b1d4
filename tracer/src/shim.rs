//! Finding the recording shim (`libcachescope_shim.so`).
//!
//! It is built by the workspace next to the `cachescope` binary (`target/<profile>/`);
//! `CACHESCOPE_SHIM` overrides the location (a file path).

use std::path::{Path, PathBuf};

/// File name of the shim library.
pub const SHIM_FILE: &str = "libcachescope_shim.so";
/// Environment variable that overrides the shim's path.
pub const ENV_SHIM: &str = "CACHESCOPE_SHIM";

/// Why the shim could not be found.
#[derive(Debug, thiserror::Error)]
#[error(
    "the recording shim {SHIM_FILE} was not found (looked at: {looked}); build it with \
     `cargo build --release -p cachescope-shim` (or the whole workspace), or set {ENV_SHIM}"
)]
pub struct ShimNotFound {
    looked: String,
}

/// The shim next to `exe` (or where `CACHESCOPE_SHIM` says), as an absolute path.
pub fn locate(exe: &Path) -> Result<PathBuf, ShimNotFound> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os(ENV_SHIM) {
        candidates.push(PathBuf::from(p));
    } else if let Some(dir) = exe.parent() {
        candidates.push(dir.join(SHIM_FILE));
        // Test and example binaries live one level below the profile directory.
        if let Some(up) = dir.parent() {
            candidates.push(up.join(SHIM_FILE));
        }
    }
    for c in &candidates {
        if c.is_file() {
            return Ok(c.canonicalize().unwrap_or_else(|_| c.clone()));
        }
    }
    Err(ShimNotFound {
        looked: candidates
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    })
}
