//! SanitizerCoverage callbacks: basic-block callbacks (`trace-pc`, `trace-pc-guard`) advance the
//! thread's clock by the block's instruction and FLOP counts; `trace-loads,trace-stores`
//! (clang) is the second way of capturing accesses.
//!
//! A block's cost is decoded once per process (see [`crate::blockcost`]) and cached twice: in a
//! global map, and in a small direct-mapped table per thread so the common case takes no lock.

use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

use cachescope_schema::AccessKind;

use crate::blockcost::{block_cost, BlockCost, CodeMemory};
use crate::modules::{self, Snapshot};
use crate::thread::{self, CachedBlock, Existing, BLOCK_CACHE};
use crate::tsan::{access, one_arg_entry};

static COSTS: RwLock<Option<HashMap<u64, BlockCost>>> = RwLock::new(None);
static SHIM_CODE: OnceLock<(u64, u64)> = OnceLock::new();

/// The shim's own executable range: calls into it are instrumentation.
fn shim_code() -> (u64, u64) {
    *SHIM_CODE.get_or_init(|| {
        let here = on_block as *const () as u64;
        modules::with_current(|s| s.code_range_of(here)).unwrap_or((here, here + 1))
    })
}

/// Whether `addr` is in the shim's own code (a call from the shim is never the program's).
pub(crate) fn in_shim(addr: u64) -> bool {
    let (start, end) = shim_code();
    (start..end).contains(&addr)
}

/// Reads the traced process's own code and data, within its loaded segments.
struct ProcessMemory<'a> {
    snap: &'a Snapshot,
}

impl CodeMemory for ProcessMemory<'_> {
    fn read(&self, addr: u64, len: usize) -> &[u8] {
        let Some((_, end)) = self.snap.readable_range(addr) else {
            return &[];
        };
        let n = (end - addr).min(len as u64) as usize;
        // SAFETY: `[addr, addr + n)` lies inside a readable PT_LOAD segment of a module that
        // is loaded (modules are not unloaded while their code runs, and this block's module
        // is running).
        unsafe { std::slice::from_raw_parts(addr as *const u8, n) }
    }

    fn read_u64(&self, addr: u64) -> Option<u64> {
        let b = self.read(addr, 8);
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
}

/// The cost of the block whose coverage call returns to `ret`.
fn cost_of(ret: u64) -> BlockCost {
    if let Some(c) = COSTS
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|m| m.get(&ret))
    {
        return *c;
    }
    let (lo, hi) = shim_code();
    let is_shim = |target: u64| lo <= target && target < hi;
    let mut cost = modules::with_current(|s| block_cost(&ProcessMemory { snap: s }, ret, &is_shim));
    if cost == BlockCost::default() {
        // Code loaded after the last snapshot (dlopen without our hook): refresh once.
        let s = modules::snapshot();
        cost = block_cost(&ProcessMemory { snap: &s }, ret, &is_shim);
    }
    COSTS
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(ret, cost);
    cost
}

extern "C" fn on_block(ret: u64) {
    let st = match thread::existing() {
        Existing::Recording(st) => st,
        Existing::Quiet => return,
        Existing::NoState => return on_block_slow(ret),
    };
    let slot = ((ret ^ (ret >> 12)) as usize) & (BLOCK_CACHE - 1);
    // SAFETY: `blocks` has BLOCK_CACHE entries (made so in `thread::create`, never resized)
    // and `slot < BLOCK_CACHE`.
    let cached = unsafe { *st.blocks.get_unchecked(slot) };
    if cached.pc == ret {
        st.advance(u64::from(cached.units), u64::from(cached.flops));
        return;
    }
    miss(st, slot, ret);
}

/// The thread's first event: [`thread::current`] creates its state.
#[cold]
#[inline(never)]
fn on_block_slow(ret: u64) {
    let Some(st) = thread::current() else { return };
    let slot = ((ret ^ (ret >> 12)) as usize) & (BLOCK_CACHE - 1);
    miss(st, slot, ret);
}

/// A block not in the thread's cache: look it up (or decode it) and cache it.
#[cold]
#[inline(never)]
fn miss(st: &mut thread::ThreadState, slot: usize, ret: u64) {
    let cost = st.quiet(|_| cost_of(ret));
    if let Some(b) = st.blocks.get_mut(slot) {
        *b = CachedBlock {
            pc: ret,
            units: cost.units,
            flops: cost.flops,
        };
    }
    st.advance(u64::from(cost.units), u64::from(cost.flops));
}

extern "C" fn on_guard(_guard: u64, ret: u64) {
    on_block(ret);
}

/// `-fsanitize-coverage=trace-pc`: called at the start of every basic block.
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn __sanitizer_cov_trace_pc() {
    core::arch::naked_asm!("mov rdi, [rsp]", "jmp {f}", f = sym on_block)
}

one_arg_entry! {
    __sanitizer_cov_trace_pc_guard => on_guard;
}

/// `-fsanitize-coverage=trace-pc-guard`: gives every guard a non-zero value so that code
/// which checks guards calls us.
#[no_mangle]
pub extern "C" fn __sanitizer_cov_trace_pc_guard_init(start: *mut u32, stop: *mut u32) {
    let mut p = start;
    while p < stop {
        // SAFETY: the compiler passes the bounds of this module's guard array.
        unsafe {
            p.write(1);
            p = p.add(1);
        }
    }
}

extern "C" fn sancov_load<const N: u32>(addr: u64, ret: u64) {
    access(AccessKind::Load, N, addr, ret);
}
extern "C" fn sancov_store<const N: u32>(addr: u64, ret: u64) {
    access(AccessKind::Store, N, addr, ret);
}

one_arg_entry! {
    __sanitizer_cov_load1 => sancov_load::<1>;
    __sanitizer_cov_load2 => sancov_load::<2>;
    __sanitizer_cov_load4 => sancov_load::<4>;
    __sanitizer_cov_load8 => sancov_load::<8>;
    __sanitizer_cov_load16 => sancov_load::<16>;
    __sanitizer_cov_store1 => sancov_store::<1>;
    __sanitizer_cov_store2 => sancov_store::<2>;
    __sanitizer_cov_store4 => sancov_store::<4>;
    __sanitizer_cov_store8 => sancov_store::<8>;
    __sanitizer_cov_store16 => sancov_store::<16>;
}
