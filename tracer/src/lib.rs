//! cachescope-tracer: everything that turns a program's execution into a cachescope trace.
//!
//! * [`cc`]: the compiler wrapper behind `cachescope cc` (instrumentation and link flags).
//! * [`record`]: running an instrumented program under the shim (`cachescope record`).
//! * [`shim`]: finding the shim library.
//! * [`unrecorded`]: memory instructions in the code `cc` built that the recorder will not see.
//! * [`import`]: importers of other tools' traces (Valgrind Lackey).
//!
//! The shim itself is the `cachescope-shim` crate in `tracer/shim/`: a cdylib that lives inside
//! the traced program, so it stays lean (the schema crate's writer, libc, a decoder, an ELF reader).

#![warn(missing_docs)]

pub mod cc;
pub mod import;
pub mod record;
pub mod shim;
pub mod unrecorded;
