//! cachescope-analysis: turns simulator output into bandwidth curves, dominance breakdowns,
//! runtime estimates and false-sharing findings.
//!
//! Modules:
//! - [`symbols`]: code positions to functions and source lines (DWARF via `addr2line`), data
//!   addresses to global objects (ELF symbol tables), build-id checks against the trace's
//!   module map, repo-relative paths for reports.
//! - [`bandwidth`]: bandwidth curves in GB/s, limit costs (V_L, T_L), dominance breakdowns
//!   per thread and in total, the runtime estimate, source attribution and SVG plots.
//! - [`heap`]: live heap blocks rebuilt from `Alloc`/`Free` events, for naming heap data.
//! - [`stack`]: threads' stack frames rebuilt from `StackFrame` events, for naming stack data.
//! - [`audit`]: the false-sharing audit: findings per data object with sites, cost, latent
//!   (predicted-layout) findings and fingerprints.
//! - [`sarif`]: the audit as SARIF 2.1.0 for CI systems.
//! - [`numbers`]: numbers for people (digit grouping).
//! - [`pluto`]: worst-case false/true sharing estimates per barrier segment (thesis §4.2.2),
//!   for any number of threads, under the recorded or a virtual cache-line layout.
#![warn(missing_docs)]

pub mod audit;
pub mod bandwidth;
pub mod heap;
pub mod numbers;
pub mod pluto;
pub mod sarif;
pub mod stack;
pub mod symbols;
