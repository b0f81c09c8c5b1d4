//! cachescope-sim: machine model, caches, coherence, the simulation engines and their
//! counters.
//!
//! * [`model`]: machine models (TOML, presets, validation);
//! * [`cache`]: one set-associative cache array with its replacement policy;
//! * [`exact`]: the exact engine — all threads' events in the trace's global order, one at a
//!   time, through private levels, a coherence directory and shared levels;
//! * [`parallel`]: the parallel engine — one worker per simulated core for the private levels
//!   (bound phase), the shared levels and the directory in a deterministic weave step;
//! * [`cachegrind`]: Cachegrind's own algorithm, for identical I1/D1/LL counts;
//! * [`bandwidth`]: the bandwidth timeline — bytes per thread, data path and window, curves
//!   and dominance kept online as histograms;
//! * [`counters`]: what the engines count, and the stable JSON report.

#![warn(missing_docs)]

pub mod bandwidth;
pub mod cache;
pub mod cachegrind;
pub mod counters;
pub mod exact;
mod fib_hash;
mod line_set;
pub mod model;
pub mod parallel;
pub mod run;
pub mod shadow;
mod thread_index;

pub use exact::{CoherenceKey, ExactEngine, ThreadMapping};
pub use model::{MachineModel, ModelError};
pub use parallel::{ParallelConfig, ParallelEngine, ParallelError};
pub use run::{
    replay_exact_with_bandwidth, replay_parallel_with_bandwidth, simulate_cachegrind,
    simulate_exact, simulate_exact_many, simulate_exact_with_bandwidth,
    simulate_exact_with_coherence, simulate_parallel, simulate_parallel_with_bandwidth, SimError,
};
