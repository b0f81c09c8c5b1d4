//! Importers: other tools' memory traces → cachescope traces.

pub mod lackey;

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The input does not have the expected format.
    #[error("{source_name}: line {line}: {reason}")]
    Parse {
        /// Input name (file path or `stdin`).
        source_name: String,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        reason: String,
    },
    /// Reading the input failed.
    #[error("{source_name}: {err}")]
    Read {
        /// Input name.
        source_name: String,
        /// The I/O error.
        err: std::io::Error,
    },
    /// Writing the trace failed.
    #[error(transparent)]
    Trace(#[from] cachescope_schema::TraceError),
}
