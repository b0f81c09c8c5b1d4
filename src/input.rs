//! Reading the small text files a command takes besides its trace (an audit config, a
//! baseline): at most [`MAX_TEXT_INPUT_BYTES`], so that `/dev/zero` given by mistake is an
//! error at once rather than a read without end. Any kind of file is read: `/dev/null` is an
//! empty baseline, and `<(git show main:baseline.txt)` a pipe.

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// Largest text input read: a baseline of a million findings is about 40 MB.
const MAX_TEXT_INPUT_BYTES: u64 = 64 << 20;

/// The contents of `path`, as UTF-8 text.
pub fn read_text(path: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_TEXT_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_TEXT_INPUT_BYTES {
        bail!("more than {MAX_TEXT_INPUT_BYTES} bytes; a text input is not that large");
    }
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
