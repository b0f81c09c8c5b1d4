//! Repo-relative paths for report formats (SARIF `artifactLocation.uri` with a base id).

use std::path::{Component, Path};

/// Lexically normalized components of an absolute path (`.` dropped, `..` pops, never above
/// the root). `None` for a relative path: without the directory it was relative to, any
/// answer could name the wrong file.
fn normalized(path: &Path) -> Option<Vec<String>> {
    if !path.is_absolute() {
        return None;
    }
    let mut parts: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                parts.pop();
            }
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
        }
    }
    Some(parts)
}

/// Percent-encodes what may not stand in a URI path segment. `:` is encoded too, so that a
/// first segment like `c:` cannot read as a scheme.
fn encode_segment(segment: &str, out: &mut String) {
    for b in segment.bytes() {
        let plain = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b'@'
            );
        if plain {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// `file` relative to `repo_root` as a URI reference with forward slashes (e.g.
/// `examples/jacobi.c`, for SARIF with `uriBaseId` set to the repository root).
///
/// Both paths are normalized lexically (`.` and `..`), as DWARF records the paths the
/// compiler was given; when that puts the file outside the root, both are resolved on the
/// file system (symbolic links), if they exist. Matching is by whole components, so
/// `/repo2/x.c` is not inside `/repo`. Returns `None` when `file` is relative, is not under
/// the root, or is the root itself. Characters not allowed in a URI path are percent-encoded.
pub fn relative_path(file: &str, repo_root: &Path) -> Option<String> {
    lexically_relative(Path::new(file), repo_root).or_else(|| {
        // A checkout reached through a symbolic link (built via the link, audited via the
        // real path, or the other way round): compare where both really are.
        let file = std::fs::canonicalize(file).ok()?;
        let root = std::fs::canonicalize(repo_root).ok()?;
        lexically_relative(&file, &root)
    })
}

/// [`relative_path`] without looking at the file system.
fn lexically_relative(file: &Path, repo_root: &Path) -> Option<String> {
    let file = normalized(file)?;
    let root = normalized(repo_root)?;
    let rest = file.strip_prefix(root.as_slice())?;
    if rest.is_empty() {
        return None;
    }
    let mut out = String::new();
    for (i, segment) in rest.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        encode_segment(segment, &mut out);
    }
    Some(out)
}

/// `path` (absolute; normalized lexically like [`relative_path`]) as a `file://` URI with
/// percent-encoded segments, ending in `/` when `dir` (a SARIF base URI must). `None` for a
/// relative path.
pub fn file_uri(path: &Path, dir: bool) -> Option<String> {
    let parts = normalized(path)?;
    let mut out = String::from("file://");
    for segment in &parts {
        out.push('/');
        encode_segment(segment, &mut out);
    }
    if dir || parts.is_empty() {
        out.push('/');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_or_file_reached_through_a_symbolic_link_is_still_inside() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("src")).unwrap();
        std::fs::write(real.join("src/a.c"), "int x;\n").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let via_link = link.join("src/a.c");
        let via_real = real.join("src/a.c");
        for (file, root) in [(&via_link, &real), (&via_real, &link), (&via_link, &link)] {
            assert_eq!(
                relative_path(file.to_str().unwrap(), root).as_deref(),
                Some("src/a.c"),
                "{} under {}",
                file.display(),
                root.display()
            );
        }
        let elsewhere = dir.path().join("elsewhere.c");
        std::fs::write(&elsewhere, "").unwrap();
        assert_eq!(relative_path(elsewhere.to_str().unwrap(), &link), None);
    }

    #[test]
    fn strips_root_and_normalizes() {
        let root = Path::new("/home/u/repo");
        assert_eq!(
            relative_path("/home/u/repo/examples/a.c", root).as_deref(),
            Some("examples/a.c")
        );
        assert_eq!(
            relative_path("/home/u/repo/build/../src/./b.c", root).as_deref(),
            Some("src/b.c")
        );
        assert_eq!(
            relative_path("/home/u/repo/x.c", Path::new("/home/u/repo/")).as_deref(),
            Some("x.c")
        );
        assert_eq!(
            relative_path("/home/u/x/../repo/y.c", Path::new("/home/u/./repo")).as_deref(),
            Some("y.c")
        );
    }

    #[test]
    fn refuses_outside_relative_and_root() {
        let root = Path::new("/home/u/repo");
        assert_eq!(relative_path("/home/u/repo2/a.c", root), None);
        assert_eq!(relative_path("/home/u/repo/../a.c", root), None);
        assert_eq!(relative_path("/usr/include/stdio.h", root), None);
        assert_eq!(relative_path("src/a.c", root), None);
        assert_eq!(relative_path("/home/u/repo", root), None);
        assert_eq!(relative_path("/home/u/repo/a.c", Path::new("repo")), None);
    }

    #[test]
    fn percent_encodes() {
        let root = Path::new("/r");
        assert_eq!(
            relative_path("/r/my dir/a#1.c", root).as_deref(),
            Some("my%20dir/a%231.c")
        );
        assert_eq!(relative_path("/r/c:x.c", root).as_deref(), Some("c%3Ax.c"));
        assert_eq!(relative_path("/r/é.c", root).as_deref(), Some("%C3%A9.c"));
    }

    #[test]
    fn file_uris() {
        assert_eq!(
            file_uri(Path::new("/tmp/my repo#1/./x/.."), true).as_deref(),
            Some("file:///tmp/my%20repo%231/")
        );
        assert_eq!(
            file_uri(Path::new("/usr/include/stdio.h"), false).as_deref(),
            Some("file:///usr/include/stdio.h")
        );
        assert_eq!(file_uri(Path::new("/"), true).as_deref(), Some("file:///"));
        assert_eq!(file_uri(Path::new("."), true), None);
    }
}
