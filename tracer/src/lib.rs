//! cachescope-tracer: everything that turns a program's execution into a cachescope trace.
//!
//! * [`import`]: importers of other tools' traces (Valgrind Lackey).
//! * The shim that records per-thread access streams inside the traced program, and the
//!   helpers behind `cachescope cc` / `record`, come with the tracer issue. The shim must stay
//!   lean, because it runs inside someone else's process: it uses only the schema crate's
//!   writer.

#![warn(missing_docs)]

pub mod import;
