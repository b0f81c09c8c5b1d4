//! How many events this process has decoded so far, over all traces and readers: what a
//! progress display shows during a long `simulate`, `bandwidth` or `audit`. A relaxed atomic
//! added to once per chunk, so it costs nothing next to decoding.

use std::sync::atomic::{AtomicU64, Ordering};

static DECODED: AtomicU64 = AtomicU64::new(0);

/// Events decoded so far by this process.
pub fn events_decoded() -> u64 {
    DECODED.load(Ordering::Relaxed)
}

/// Counts `n` more decoded events.
pub(crate) fn add_decoded(n: u64) {
    DECODED.fetch_add(n, Ordering::Relaxed);
}
