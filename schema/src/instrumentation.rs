//! Which instrumentation a program was built with, read from the callbacks it imports.
//!
//! One rule for the two places that need it: `cachescope record`, which refuses a program
//! that would record nothing, and the shim, which records only in a process whose executable
//! is instrumented (so that a launcher — a shell script, `env`, `taskset` — passes the
//! recording on to the program it starts) and picks the trace's time unit.

use crate::record::TimeUnit;

/// The instrumentation callbacks a program's executable imports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Instrumentation {
    /// It calls ThreadSanitizer entry points.
    pub tsan: bool,
    /// It calls SanitizerCoverage load/store callbacks.
    pub sancov_accesses: bool,
    /// It calls basic-block callbacks (so time is in instructions).
    pub blocks: bool,
}

impl Instrumentation {
    /// Notes one undefined dynamic symbol of the executable.
    pub fn note_import(&mut self, name: &str) {
        if name.starts_with("__tsan_") {
            self.tsan = true;
        } else if name.starts_with("__sanitizer_cov_load")
            || name.starts_with("__sanitizer_cov_store")
        {
            self.sancov_accesses = true;
        } else if name.starts_with("__sanitizer_cov_trace_pc") {
            self.blocks = true;
        }
    }

    /// The instrumentation of a program importing `names`.
    pub fn from_imports<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut ins = Instrumentation::default();
        for name in names {
            ins.note_import(name);
        }
        ins
    }

    /// The instrumentation of code made of `self`'s and `other`'s (a program and its
    /// libraries).
    pub fn union(self, other: Instrumentation) -> Instrumentation {
        Instrumentation {
            tsan: self.tsan || other.tsan,
            sancov_accesses: self.sancov_accesses || other.sancov_accesses,
            blocks: self.blocks || other.blocks,
        }
    }

    /// Whether the program reports its memory accesses (built with `cachescope cc`).
    pub fn records_accesses(self) -> bool {
        self.tsan || self.sancov_accesses
    }

    /// The time unit its trace will have.
    pub fn time_unit(self) -> TimeUnit {
        if self.blocks {
            TimeUnit::Instructions
        } else {
            TimeUnit::Events
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_decide_the_instrumentation_and_the_time_unit() {
        let gcc = Instrumentation::from_imports(["__tsan_read8", "__sanitizer_cov_trace_pc"]);
        assert!(gcc.records_accesses());
        assert_eq!(gcc.time_unit(), TimeUnit::Instructions);
        let sancov = Instrumentation::from_imports(["__sanitizer_cov_load4", "malloc"]);
        assert!(sancov.records_accesses() && !sancov.tsan);
        assert_eq!(sancov.time_unit(), TimeUnit::Events);
        let plain = Instrumentation::from_imports(["malloc", "__sanitizer_cov_trace_pc_guard"]);
        assert!(!plain.records_accesses());
    }
}
