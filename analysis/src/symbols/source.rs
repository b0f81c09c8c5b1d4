//! Source lines by file and number, for fingerprints that survive edits elsewhere in a file.

use std::collections::HashMap;

/// Source files larger than this are not read (no C or C++ source is that large; a path a
/// hostile trace names could be a huge file).
const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// Source files read so far (or found unreadable), each read once.
#[derive(Debug, Default)]
pub(crate) struct SourceLines {
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceLines {
    /// Line `line` (1-based) of `file`, its whitespace runs collapsed to one space and trimmed
    /// (re-indenting does not change it); `None` when the file cannot be read (built
    /// elsewhere, deleted), is not a regular file (a `#line` directive can name a FIFO or
    /// `/dev/zero`, which would make the audit wait or read forever) or is shorter.
    pub(crate) fn line(&mut self, file: &str, line: u32) -> Option<&str> {
        let lines = self.files.entry(file.to_owned()).or_insert_with(|| {
            let bytes = read_source(file)?;
            Some(
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                    .collect(),
            )
        });
        let index = usize::try_from(line).ok()?.checked_sub(1)?;
        lines.as_ref()?.get(index).map(String::as_str)
    }
}

/// The bytes of source file `path`: a regular file, read through one handle (checked before
/// it is opened, so a FIFO is never opened and waited on, and again after, so it cannot be
/// swapped in between), at most [`MAX_SOURCE_BYTES`] (files in `/proc` say they are empty and
/// are not: `/proc/self/pagemap` reads for hundreds of GiB).
fn read_source(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= MAX_SOURCE_BYTES).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_once_and_normalized() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("a.c");
        std::fs::write(&p, "int x;\n    a[i]  +=\t1;  \n").expect("write");
        let p = p.to_str().expect("utf-8");
        let mut s = SourceLines::default();
        assert_eq!(s.line(p, 2), Some("a[i] += 1;"));
        assert_eq!(s.line(p, 1), Some("int x;"));
        assert_eq!(s.line(p, 3), None);
        assert_eq!(s.line(p, 0), None);
        // Cached: a later change on disk is not seen within one run.
        std::fs::write(p, "changed\n").expect("rewrite");
        assert_eq!(s.line(p, 1), Some("int x;"));
        assert_eq!(s.line("/nonexistent/b.c", 1), None);
    }

    #[test]
    fn special_files_are_not_read() {
        let mut s = SourceLines::default();
        // Would read forever.
        assert_eq!(s.line("/dev/zero", 1), None);
        // Would wait for a writer forever.
        let dir = tempfile::tempdir().expect("tmp");
        let fifo = dir.path().join("src.c");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(status.success());
        assert_eq!(s.line(fifo.to_str().expect("utf-8"), 1), None);
        // A "regular" file of size 0 that reads without end.
        assert_eq!(s.line("/proc/self/pagemap", 1), None);
    }
}
