//! cachescope-sim: machine model, private/shared caches, MSI/MESI coherence, the exact and the
//! parallel slack-based engines, and their counters.
//!
//! Not implemented yet: the simulator issues fill this crate. It reads traces through
//! `cachescope-schema` and never depends on the analysis crate.
