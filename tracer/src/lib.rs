//! cachescope-tracer: the shim that records per-thread memory access streams of a real
//! program into a cachescope trace, and the helpers behind `cachescope cc` / `record`.
//!
//! Not implemented yet: the tracer issue fills this crate. It depends on the schema crate's
//! writer only and must stay lean, because it runs inside someone else's process.
