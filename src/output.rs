//! Writing reports: to stdout without panicking when it fails, to files without destroying
//! what was there unless the new content is complete, and numbers for humans.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::partial::Partial;

pub use cachescope_analysis::numbers::thousands;

/// Set once a reader closed standard output early: what the command prints after that is
/// dropped.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout. `print!` panics when stdout fails (a full disk, a closed pipe);
/// this returns the error instead, so the command exits 2 with a message. A reader that
/// closed the pipe early (`cachescope audit t | head -3`) is not an error: the rest of the
/// output is dropped and the command ends as it would have, with its own exit code (an audit
/// with findings still fails a CI step).
pub fn print(text: impl std::fmt::Display) -> Result<()> {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match write!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        r => r.context("writing to standard output"),
    }
}

/// `text` with control characters escaped (`\n`, `\u{1b}`): for strings a trace carries
/// (program name, arguments, host), which a hostile trace could fill with terminal escape
/// sequences or line breaks that forge report lines.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    // Control characters, and the invisible ones that move or reorder text on a terminal:
    // zero-width marks, line and paragraph separators, bidirectional overrides and isolates.
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
    };
    if text.chars().any(hidden) {
        text.chars()
            .map(|c| {
                if hidden(c) {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

/// Whether `e` comes from writing to a pipe whose reader has gone (also inside serde_json,
/// which wraps the I/O error of JSON written to a writer).
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    let pipe = Some(std::io::ErrorKind::BrokenPipe);
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().map(std::io::Error::kind) == pipe
            || c.downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == pipe
    })
}

/// [`print()`] with a newline.
pub fn println(text: impl std::fmt::Display) -> Result<()> {
    print(format_args!("{text}\n"))
}

/// Writes `bytes` to `path` as a whole (see [`replace_with`]). Refuses to replace a trace
/// file with something else (a report path mistaken for the trace argument).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    write_files(&[(path, bytes)])
}

/// Makes `path` the file that `write` writes: `write` gets a temporary file next to `path`,
/// which is renamed over `path` only when `write` succeeded. A full disk, a size limit, an
/// error or an interruption (Ctrl-C, SIGTERM, SIGHUP: see `partial.rs`) leaves the previous
/// file as it was, and no half-written one.
/// A symbolic link's target is replaced, not the link. Something that is not a regular file
/// (`/dev/null`, `/dev/stdout`, a pipe) cannot be replaced: `write` writes to it directly.
pub fn replace_with(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    refuse_to_replace_an_input(path)?;
    match Pending::new(path, write)? {
        Some(p) => p.commit(),
        None => Ok(()),
    }
}

/// Writes several files, all or none: every file is written to its temporary file first,
/// and only when all of them are complete are they renamed into place, so a failure (a
/// missing directory, a full disk, a trace given as an output) leaves every previous file
/// as it was. Refuses to replace a trace, and to write two outputs to one file.
pub fn write_files(files: &[(&Path, &[u8])]) -> Result<()> {
    for (i, (path, _)) in files.iter().enumerate() {
        refuse_to_replace_a_trace(path)?;
        refuse_to_replace_an_input(path)?;
        if files[..i].iter().any(|(p, _)| same_file(p, path)) {
            bail!("{} is given for two outputs", path.display());
        }
    }
    let mut pending = Vec::new();
    for (path, bytes) in files {
        let write = |tmp: &Path| {
            std::fs::write(tmp, bytes).with_context(|| format!("writing {}", path.display()))
        };
        if let Some(p) = Pending::new(path, write)? {
            pending.push(p);
        }
    }
    pending.into_iter().try_for_each(Pending::commit)
}

/// The input files of this run that are not traces (a machine model, an audit config, a
/// baseline): no output may replace them.
static INPUTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Marks `path` as an input of this run (see [`write_files`]).
pub fn protect_input(path: &Path) {
    INPUTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(path.to_owned());
}

/// Refuses an output that is one of this run's inputs (`--json model.toml` after `--machine
/// model.toml` would replace the model with the report). Every write through this module
/// checks it; a command that measures or runs for long calls it first, to refuse up front.
pub fn refuse_to_replace_an_input(path: &Path) -> Result<()> {
    let inputs = INPUTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(input) = inputs.iter().find(|i| same_file(i, path)) {
        bail!(
            "refusing to overwrite {}: it is an input of this run ({}); give the output \
             another file",
            path.display(),
            input.display()
        );
    }
    Ok(())
}

/// Whether two paths name one file (the same path, or an existing file under two names).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    a == b || canonical(a).is_some_and(|c| Some(c) == canonical(b))
}

/// A complete temporary file waiting to be renamed over its target.
struct Pending {
    // Dropped after `tmp` (fields drop in order): the registration outlives the file.
    tmp: tempfile::NamedTempFile,
    _partial: Partial,
    path: std::path::PathBuf,
    target: std::path::PathBuf,
}

impl Pending {
    /// Writes the temporary file for `path` with `write`; `None` when `path` is not a
    /// regular file (a device or a pipe), which `write` then wrote directly.
    fn new(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<Option<Pending>> {
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            match write(path) {
                // `--json /dev/stdout | head`: a reader that closed the pipe early is no
                // error, as on standard output itself (see `print`).
                Err(e) if is_broken_pipe(&e) => {}
                r => r?,
            }
            return Ok(None);
        }
        // Renaming over a file needs only the directory's permission: a file the user made
        // read-only (a protected baseline or report) would be replaced where `>` or `cp`
        // would refuse.
        if std::fs::metadata(path).is_ok_and(|m| m.permissions().readonly()) {
            bail!(
                "writing {}: the file is read-only; make it writable or remove it to replace it",
                path.display()
            );
        }
        let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = parent_dir(&target);
        if !dir.is_dir() {
            let why = if dir.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            bail!("writing {}: {} {why}", path.display(), dir.display());
        }
        // Removed on Ctrl-C or SIGTERM too, which skip `tmp`'s destructor.
        let (partial, tmp) = Partial::create(|| {
            tempfile::Builder::new()
                .prefix(".cachescope-")
                .suffix(".partial")
                .tempfile_in(dir)
        })
        .with_context(|| format!("writing {}", path.display()))?;
        write(tmp.path())?;
        // A temporary file is private (0600); the result gets the permissions of the file it
        // replaces, or those of an ordinary new file.
        let mode = std::fs::metadata(&target).map_or(0o644, |m| m.permissions().mode());
        std::fs::File::open(tmp.path())
            .and_then(|f| {
                f.set_permissions(std::fs::Permissions::from_mode(mode))?;
                f.sync_all()
            })
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Some(Pending {
            tmp,
            _partial: partial,
            path: path.to_path_buf(),
            target,
        }))
    }

    /// Renames the temporary file over the target.
    fn commit(self) -> Result<()> {
        let Pending {
            tmp,
            _partial,
            path,
            target,
        } = self;
        tmp.persist(&target)
            .map_err(|e| e.error)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }
}

/// The directory `path` is in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// An error if `path` is an existing cachescope trace.
pub fn refuse_to_replace_a_trace(path: &Path) -> Result<()> {
    let magic = &cachescope_schema::frame::MAGIC;
    let mut head = [0u8; 8];
    // Only regular files are read: opening a terminal or a pipe to look would block.
    let is_trace = std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
            .is_ok_and(|()| &head == magic);
    if is_trace {
        bail!(
            "refusing to overwrite {}: it is a cachescope trace (is an output option missing its \
             file name?)",
            path.display()
        );
    }
    Ok(())
}

/// An error if `path` exists and is neither a cachescope trace nor empty, for commands that
/// write a trace (`import`, `trace gen`): they replace the previous trace, not any file, so
/// `-o main.c` (a slip for `main.cst`) must not cost the source, as `record` refuses it too.
/// Something that is not a regular file (`/dev/null`, a pipe) is written to, not replaced.
pub fn refuse_to_replace_a_non_trace(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // The more precise reason first: `-o run.lackey` for the log being imported.
    refuse_to_replace_an_input(path)?;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    if meta.is_dir() {
        bail!(
            "{} is a directory; give the trace a file name",
            path.display()
        );
    }
    if !meta.is_file() {
        return Ok(());
    }
    let mut head = [0u8; 8];
    let read = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .with_context(|| format!("reading {} to see whether it is a trace", path.display()))?;
    let head = &head[..read];
    if head == cachescope_schema::frame::MAGIC || (head.is_empty() && meta.len() == 0) {
        return Ok(());
    }
    let what = if meta.permissions().mode() & 0o111 != 0 || head.starts_with(b"\x7fELF") {
        "a program (an executable file)"
    } else {
        "not a cachescope trace"
    };
    bail!(
        "refusing to write a trace over {}: it is {what}; give -o another file, or remove this \
         one first",
        path.display()
    )
}

/// A plot writer for `cachescope_analysis::bandwidth::svg::write_all_with`: [`write_file`],
/// with the reason alone (the plot error names the file).
pub fn write_plot(path: &Path, bytes: &[u8]) -> std::result::Result<(), String> {
    write_file(path, bytes).map_err(|e| e.root_cause().to_string())
}

/// `value` as the pretty JSON the reports are written in, with a final newline.
pub fn json_text(value: &impl Serialize) -> Result<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

/// Writes `value` as pretty JSON to stdout (`-`) or to a file (as a whole, see
/// [`write_file`]).
/// The report of a command with `--json [FILE]`: the human `text` on stdout, or with `--json`
/// alone (`-`) the JSON instead; `--json FILE` writes the file and still prints the text, so
/// a CI log shows what the file holds.
pub fn report(
    value: &impl Serialize,
    json: Option<&Path>,
    text: impl FnOnce() -> String,
) -> Result<()> {
    match json {
        Some(to) if to.as_os_str() == "-" => write_json(value, to),
        Some(to) => {
            write_json(value, to)?;
            print(text())
        }
        None => print(text()),
    }
}

pub fn write_json(value: &impl Serialize, to: &Path) -> Result<()> {
    let text = json_text(value)?;
    if to.as_os_str() == "-" {
        print(text)
    } else {
        write_file(to, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(super::printable("plain ü"), "plain ü");
        assert_eq!(
            super::printable("evil\u{1b}[31mRED\nline2\t"),
            "evil\\u{1b}[31mRED\\nline2\\t"
        );
        // A right-to-left override and a line separator, which reorder or break a line.
        assert_eq!(
            super::printable("a\u{202e}b\u{2028}c"),
            "a\\u{202e}b\\u{2028}c"
        );
    }

    #[test]
    fn write_file_replaces_whole_files_and_never_a_trace() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("out.json");
        super::write_file(&p, b"old").expect("write");
        super::write_file(&p, b"new").expect("rewrite");
        assert_eq!(std::fs::read(&p).expect("read"), b"new");
        let trace = dir.path().join("t.cstrace");
        let mut bytes = cachescope_schema::frame::MAGIC.to_vec();
        bytes.extend_from_slice(b"rest of a trace");
        std::fs::write(&trace, &bytes).expect("write trace");
        let err = super::write_file(&trace, b"{}").expect_err("a trace is not replaced");
        assert!(
            format!("{err:#}").contains("is a cachescope trace"),
            "{err:#}"
        );
        assert_eq!(std::fs::read(&trace).expect("read"), bytes);
        // A link's target is replaced and the link stays a link.
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&p, &link).expect("symlink");
        super::write_file(&link, b"through the link").expect("write via link");
        assert!(std::fs::symlink_metadata(&link)
            .expect("lstat")
            .is_symlink());
        assert_eq!(std::fs::read(&p).expect("read"), b"through the link");
        std::fs::remove_file(&link).expect("rm link");
        // A device is written, not replaced.
        super::write_file(std::path::Path::new("/dev/null"), b"x").expect("/dev/null");
        assert!(!std::fs::metadata("/dev/null").expect("stat").is_file());
        // Only the target remains: no temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
