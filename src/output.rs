//! Writing reports: JSON to stdout or a file, numbers for humans.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

/// Writes `value` as pretty JSON to stdout (`-`) or to a file.
pub fn write_json(value: &impl Serialize, to: &Path) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    if to.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{text}")?;
    } else {
        std::fs::write(to, text + "\n").with_context(|| format!("writing {}", to.display()))?;
    }
    Ok(())
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1000), "1,000");
        assert_eq!(super::thousands(1234567), "1,234,567");
    }
}
