//! cachescope-analysis: turns simulator output into bandwidth curves, dominance breakdowns,
//! runtime estimates and false-sharing findings.
//!
//! Not implemented yet: the bandwidth and false-sharing issues fill this crate.
