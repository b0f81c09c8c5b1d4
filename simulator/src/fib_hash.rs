//! Fibonacci hashing of line and page numbers into small direct-mapped tables (the shadow's
//! front position hints, recent pages of the lines ever held, the scan's filter of recorded
//! lines). Multiplicative, because arrays a power of two apart — common in programs — share
//! the low bits of their line numbers.

/// An index below `2^bits` (`1 ≤ bits ≤ 63`) for `x`.
#[inline(always)]
pub(crate) fn fib_index(x: u64, bits: u32) -> usize {
    (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
}
