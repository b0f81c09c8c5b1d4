//! Valgrind Lackey (`valgrind --tool=lackey --trace-mem=yes`) → trace.
//!
//! Lackey prints one line per access: `I  ADDR,SIZE` for an instruction fetch and
//! ` L ADDR,SIZE`, ` S ADDR,SIZE`, ` M ADDR,SIZE` for a data load, store and modify (load then
//! store of the same address by one instruction), addresses in hex. Lines starting with `==`
//! are Valgrind's own messages (present with `--log-file`) and are skipped. Valgrind runs the
//! program's threads one at a time and Lackey does not say which thread ran, so the import is
//! one thread.
//!
//! Time is in instructions: each fetch is followed (lazily, coalesced) by an `Advance` of the
//! instructions since the last one, so data accesses happen after their instruction.

use std::io::{BufRead, Read, Write};

use cachescope_schema::{Access, AccessKind, Event, TimeUnit, TraceHeader, TraceWriter};

use super::ImportError;

/// Longest line accepted (Lackey's lines are under 40 bytes).
pub const MAX_LINE: usize = 256;

/// What an import produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportStats {
    /// Input lines read.
    pub lines: u64,
    /// Instruction fetches.
    pub fetches: u64,
    /// Loads, stores and modifies.
    pub data: u64,
}

fn parse_access(rest: &str) -> Result<(u64, u32), String> {
    let (addr, size) = rest
        .trim()
        .split_once(',')
        .ok_or_else(|| format!("expected ADDR,SIZE, found {rest:?}"))?;
    let addr =
        u64::from_str_radix(addr.trim(), 16).map_err(|_| format!("bad hex address {addr:?}"))?;
    let size: u32 = size
        .trim()
        .parse()
        .map_err(|_| format!("bad size {size:?}"))?;
    if size == 0 {
        return Err("access of size 0".into());
    }
    if size > cachescope_schema::limits::MAX_ACCESS_BYTES {
        return Err(format!(
            "access of {size} bytes exceeds the trace format's limit of {} bytes",
            cachescope_schema::limits::MAX_ACCESS_BYTES
        ));
    }
    Ok((addr, size))
}

/// Reads `input` up to and including the next newline (or to its end), holding at most
/// [`MAX_LINE`] bytes at a time.
fn skip_rest_of_line<R: BufRead>(input: &mut R) -> std::io::Result<()> {
    let mut piece = Vec::with_capacity(MAX_LINE);
    loop {
        piece.clear();
        let n = Read::take(&mut *input, MAX_LINE as u64).read_until(b'\n', &mut piece)?;
        if n == 0 || piece.last() == Some(&b'\n') {
            return Ok(());
        }
    }
}

/// Reads Lackey output from `input` and writes a one-thread trace to `out`.
pub fn import<R: BufRead, W: Write>(
    mut input: R,
    source_name: &str,
    out: W,
    program: &str,
) -> Result<(W, ImportStats), ImportError> {
    let mut header = TraceHeader::new(
        format!("cachescope {} import lackey", env!("CARGO_PKG_VERSION")),
        program,
        TimeUnit::Instructions,
    );
    header.args = vec![source_name.to_string()];
    let writer = TraceWriter::new(out, &header)?;
    let mut thread = writer.thread(0)?;
    let mut stats = ImportStats::default();
    let mut pending_instructions = 0u64;
    let mut line = Vec::with_capacity(64);
    let parse_err = |line: u64, reason: String| ImportError::Parse {
        source_name: source_name.to_string(),
        line,
        reason,
    };
    loop {
        line.clear();
        // Bounded line read: never buffer more than MAX_LINE bytes of a hostile input.
        let n = Read::take(&mut input, MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|err| ImportError::Read {
                source_name: source_name.to_string(),
                err,
            })?;
        if n == 0 {
            break;
        }
        stats.lines += 1;
        if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            // Valgrind's own messages can be long (`==PID== Command:` with the program's
            // arguments); they are skipped whatever their length, in bounded pieces.
            if line.starts_with(b"==") || line.starts_with(b"--") {
                skip_rest_of_line(&mut input).map_err(|err| ImportError::Read {
                    source_name: source_name.to_string(),
                    err,
                })?;
                continue;
            }
            return Err(parse_err(
                stats.lines,
                format!("line longer than {MAX_LINE} bytes"),
            ));
        }
        let text =
            std::str::from_utf8(&line).map_err(|_| parse_err(stats.lines, "not text".into()))?;
        let text = text.trim_end_matches(['\n', '\r']);
        if text.is_empty() || text.starts_with("==") || text.starts_with("--") {
            continue;
        }
        let (kind, rest) = match text.as_bytes() {
            [b'I', b' ', ..] => (AccessKind::Fetch, &text[1..]),
            [b' ', b'L', b' ', ..] => (AccessKind::Load, &text[2..]),
            [b' ', b'S', b' ', ..] => (AccessKind::Store, &text[2..]),
            [b' ', b'M', b' ', ..] => (AccessKind::Modify, &text[2..]),
            _ => {
                return Err(parse_err(
                    stats.lines,
                    format!("not a Lackey access line: {text:?} (expected 'I  ADDR,SIZE' or ' L|S|M ADDR,SIZE')"),
                ))
            }
        };
        let (addr, size) = parse_access(rest).map_err(|r| parse_err(stats.lines, r))?;
        // The instructions fetched so far have executed before this access.
        if pending_instructions > 0 {
            thread.push(Event::Advance {
                units: pending_instructions,
                flops: 0,
            })?;
            pending_instructions = 0;
        }
        if kind == AccessKind::Fetch {
            stats.fetches += 1;
            pending_instructions = 1;
        } else {
            stats.data += 1;
        }
        thread.push(Event::Access(Access {
            kind,
            size,
            addr,
            pc: None,
        }))?;
    }
    if pending_instructions > 0 {
        thread.push(Event::Advance {
            units: pending_instructions,
            flops: 0,
        })?;
    }
    thread.finish()?;
    Ok((writer.finish()?, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_all_kinds_and_skips_valgrind_messages() {
        let text = "==1== Lackey, an example Valgrind tool\nI  04000bd0,3\n S 7ff000628,8\nI  04000bd3,5\n L 04222cac,4\n M 0421c7f0,4\n";
        let (bytes, stats) = import(text.as_bytes(), "t", Vec::new(), "prog").unwrap();
        assert_eq!(
            stats,
            ImportStats {
                lines: 6,
                fetches: 2,
                data: 3
            }
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.cstrace");
        std::fs::write(&path, bytes).unwrap();
        let t = cachescope_schema::TraceFile::open(&path).unwrap();
        let ev: Vec<Event> = t.thread_events(0).unwrap().map(Result::unwrap).collect();
        let kinds: Vec<_> = ev.iter().map(|e| e.kind().name()).collect();
        assert_eq!(
            kinds,
            ["fetch", "advance", "store", "fetch", "advance", "load", "modify"]
        );
        assert_eq!(
            ev[6],
            Event::Access(Access {
                kind: AccessKind::Modify,
                size: 4,
                addr: 0x0421c7f0,
                pc: None
            })
        );
    }

    #[test]
    fn errors_name_the_line() {
        for (text, line, what) in [
            ("I  04000bd0,3\n X 12,4\n", 2, "not a Lackey access line"),
            ("I  zz,3\n", 1, "bad hex address"),
            (" L 1000,0\n", 1, "size 0"),
            (" L 1000\n", 1, "expected ADDR,SIZE"),
            (" L 0,4294967295\n", 1, "exceeds the trace format's limit"),
        ] {
            match import(text.as_bytes(), "in.txt", Vec::new(), "p") {
                Err(ImportError::Parse {
                    line: l, reason, ..
                }) => {
                    assert_eq!(l, line, "{text:?}");
                    assert!(reason.contains(what), "{reason}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        let long = format!(" L {}\n", "1".repeat(10_000));
        assert!(matches!(
            import(long.as_bytes(), "x", Vec::new(), "p"),
            Err(ImportError::Parse { line: 1, .. })
        ));
    }

    #[test]
    fn long_valgrind_messages_are_skipped() {
        // A program run with long arguments: Valgrind's `Command:` line is as long as they are.
        let command = format!("==7== Command: ./prog {}\n", "x".repeat(3 * MAX_LINE + 5));
        for tail in ["I  04000bd0,3\n L 1000,4\n", ""] {
            let text = format!("==7== Lackey\n{command}{tail}");
            let (_, stats) = import(text.as_bytes(), "t", Vec::new(), "p").unwrap();
            assert_eq!(stats.lines, if tail.is_empty() { 2 } else { 4 }, "{tail:?}");
            assert_eq!(stats.data, u64::from(!tail.is_empty()), "{tail:?}");
        }
        // Without its newline, at the end of the input.
        let text = format!("I  04000bd0,3\n--7-- {}", "y".repeat(1000));
        let (_, stats) = import(text.as_bytes(), "t", Vec::new(), "p").unwrap();
        assert_eq!(stats.fetches, 1);
    }
}
