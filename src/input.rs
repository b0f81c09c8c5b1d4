//! Reading the small text files a command takes besides its trace (an audit config, a
//! baseline): only regular files of bounded size, so that `/dev/zero` or a FIFO given by
//! mistake is an error at once rather than a read without end or a wait for a writer.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// Largest text input read: a baseline of a million findings is about 40 MB.
const MAX_TEXT_INPUT_BYTES: u64 = 64 << 20;

/// The contents of the regular file `path`, as UTF-8 text.
pub fn read_text(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        bail!("not a regular file (a directory, pipe or device)");
    }
    if meta.len() > MAX_TEXT_INPUT_BYTES {
        bail!(
            "{} bytes; at most {MAX_TEXT_INPUT_BYTES} are read from a text input",
            meta.len()
        );
    }
    let bytes = std::fs::read(path)?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "not UTF-8 text (the first bad byte is at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// [`read_text`], with `what` and the path in the error.
pub fn read_text_named(path: &Path, what: &str) -> Result<String> {
    read_text(path).with_context(|| format!("reading {what} {}", path.display()))
}
