//! Explicit reader limits. Traces may come from untrusted uploads: every length and count read
//! from a file is checked against these before memory is allocated for it.

/// Largest frame payload (one Cap'n Proto message) the reader accepts.
pub const MAX_FRAME_BYTES: u32 = 64 << 20;

/// Largest number of events in one chunk.
pub const MAX_CHUNK_EVENTS: u32 = 1 << 20;

/// Largest uncompressed size of one chunk's columns.
pub const MAX_RAW_CHUNK_BYTES: u64 = 64 << 20;

/// LZ4 cannot expand data by more than this factor; a chunk claiming more is corrupt, and
/// rejecting it early keeps a 20-byte frame from asking for 64 MiB.
pub const MAX_LZ4_RATIO: u64 = 255;

/// Largest single memory access (e.g. a `memcpy` recorded as one range). Simulating an
/// access costs one step per cache line, so this bounds the work one event can cause.
pub const MAX_ACCESS_BYTES: u32 = 16 << 20;

/// Largest number of distinct threads in one trace.
pub const MAX_THREADS: usize = 1 << 16;

/// Cap'n Proto nesting limit for trace records (the schema nests at most 4 deep).
pub const CAPNP_NESTING_LIMIT: i32 = 16;

/// Cap'n Proto traversal limit, in 8-byte words, as a multiple of the message's own size.
/// A well-formed record is traversed about once; the factor bounds amplification attacks
/// (many pointers to the same data) to a small multiple of the frame size.
pub const CAPNP_TRAVERSAL_FACTOR: usize = 4;

/// The Cap'n Proto reader options used for a message of `payload_bytes` bytes.
pub fn capnp_options(payload_bytes: usize) -> capnp::message::ReaderOptions {
    let words = (payload_bytes / 8).max(64) * CAPNP_TRAVERSAL_FACTOR;
    let mut opts = capnp::message::ReaderOptions::new();
    opts.traversal_limit_in_words(Some(words))
        .nesting_limit(CAPNP_NESTING_LIMIT);
    opts
}
