//! Heap interposition: `malloc`, `calloc`, `realloc`, `free`, `posix_memalign`,
//! `aligned_alloc`, `memalign`, `valloc`, with the allocation site (the caller's return
//! address) and a few callers further out (`callers.rs`), so analyses can name heap objects
//! by where they were allocated, and with the alignment asked for (`aligned_alloc`,
//! `posix_memalign`, `memalign`, `valloc`), so that the false-sharing audit knows which
//! placements of a block cannot happen.
//!
//! The real allocator is glibc's, reached through its `__libc_*` entry points rather than
//! `dlsym`: `dlsym` itself allocates, and would recurse into us before it could answer.
//! The shim's own allocations (Rust's allocator calls these same symbols) are not recorded:
//! [`crate::thread::current`] returns `None` while the shim works on a thread.

use cachescope_schema::{Alignment, CodePos, Event};
use libc::{c_int, c_void, size_t};

use crate::{callers, cxx_new, own_memory, recorder, thread};

extern "C" {
    fn __libc_malloc(size: size_t) -> *mut c_void;
    fn __libc_calloc(n: size_t, size: size_t) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: size_t) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_memalign(align: size_t, size: size_t) -> *mut c_void;
    fn __libc_valloc(size: size_t) -> *mut c_void;
}

/// Records a block of `size` bytes at `p` allocated from return address `ret`, with the
/// alignment the caller asked for (`None`: the allocator's default). An allocation made for
/// C++ `operator new` takes the site of the `new` instead (`cxx_new.rs`), also when it failed.
fn record_alloc(p: *mut c_void, size: usize, ret: u64, align: Option<Alignment>) {
    // First, whether or not this thread records: the `new` this allocation serves noted its
    // site, and a note left pending (before recording starts, say) would name a later block.
    let ret = cxx_new::site_of(ret, size);
    let Some(st) = thread::current() else {
        return;
    };
    if p.is_null() || st.waiting() {
        return;
    }
    st.push(Event::Alloc {
        addr: p as u64,
        size: size as u64,
        site: CodePos::new(ret.wrapping_sub(1)),
        align,
    });
    let wanted = recorder::alloc_callers();
    if wanted == 0 {
        return;
    }
    // Quietly: should the unwinder allocate, that is not the program's allocation, and the
    // shim's own copies (`memcpy` in unoptimized builds) are not the program's accesses.
    st.quiet(|st| {
        for caller in callers::callers_of(ret, wanted) {
            if let Some(site) = CodePos::new(caller.wrapping_sub(1)) {
                st.push(Event::AllocCaller { site });
            }
        }
    });
}

/// The alignment `memalign(align, …)` guarantees: glibc rounds an alignment that is not a
/// power of two up to the next one. `None` when that does not fit the trace (above 2^31).
fn requested(align: size_t) -> Option<Alignment> {
    align
        .checked_next_power_of_two()
        .and_then(|a| Alignment::new(a as u64))
}

fn record_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    if let Some(st) = thread::current() {
        // Between a thread's barrier enter and leave its heap calls are the OpenMP runtime's
        // (LLVM libomp frees memory of a waiting thread it suspends or shuts down when another
        // thread calls exit), as its mutexes are (`pthread.rs`): recorded, they would follow
        // a wait that never ends, and replay would call the trace deadlocked.
        if !st.waiting() {
            st.push(Event::Free { addr: p as u64 });
        }
    }
}

/// A block for the C library working for the shim (see `own_memory::c_alloc`), if the
/// calling thread is doing the shim's work.
fn for_the_shim(size: size_t, zero: bool) -> Option<*mut c_void> {
    if !thread::internal() {
        return None;
    }
    own_memory::c_alloc(size, zero).map(|p| p.cast())
}

extern "C" fn malloc_impl(size: size_t, ret: u64) -> *mut c_void {
    if let Some(p) = for_the_shim(size, false) {
        return p;
    }
    // SAFETY: glibc's allocator with the caller's argument.
    let p = unsafe { __libc_malloc(size) };
    record_alloc(p, size, ret, None);
    p
}

extern "C" fn calloc_impl(n: size_t, size: size_t, ret: u64) -> *mut c_void {
    if let Some(p) = n.checked_mul(size).and_then(|b| for_the_shim(b, true)) {
        return p;
    }
    // SAFETY: as above.
    let p = unsafe { __libc_calloc(n, size) };
    record_alloc(p, n.saturating_mul(size), ret, None);
    p
}

extern "C" fn realloc_impl(old: *mut c_void, size: size_t, ret: u64) -> *mut c_void {
    if own_memory::owns(old.cast()) {
        // A block the C library took for the shim (a thread's TLS vector grown by dlopen)
        // stays out of the program's heap.
        let Some(new) = own_memory::c_alloc(size, false) else {
            return std::ptr::null_mut();
        };
        let keep = own_memory::c_size(old.cast()).min(size);
        // SAFETY: both blocks have at least `keep` bytes and do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(old.cast::<u8>(), new, keep) };
        own_memory::c_free(old.cast());
        return new.cast();
    }
    // SAFETY: as above; `old` is the caller's block (or null).
    let p = unsafe { __libc_realloc(old, size) };
    if !p.is_null() || size == 0 {
        record_free(old);
    }
    record_alloc(p, size, ret, None);
    p
}

extern "C" fn free_impl(p: *mut c_void) {
    if own_memory::owns(p.cast()) {
        own_memory::c_free(p.cast());
        return;
    }
    record_free(p);
    // SAFETY: the caller's block.
    unsafe { __libc_free(p) }
}

extern "C" fn memalign_impl(align: size_t, size: size_t, ret: u64) -> *mut c_void {
    // SAFETY: as above.
    let p = unsafe { __libc_memalign(align, size) };
    record_alloc(p, size, ret, requested(align));
    p
}

extern "C" fn valloc_impl(size: size_t, ret: u64) -> *mut c_void {
    // SAFETY: as above.
    let p = unsafe { __libc_valloc(size) };
    // SAFETY: sysconf only reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    record_alloc(
        p,
        size,
        ret,
        u64::try_from(page).ok().and_then(Alignment::new),
    );
    p
}

extern "C" fn posix_memalign_impl(
    out: *mut *mut c_void,
    align: size_t,
    size: size_t,
    ret: u64,
) -> c_int {
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<usize>()) {
        return libc::EINVAL;
    }
    // SAFETY: as above.
    let p = unsafe { __libc_memalign(align, size) };
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: `out` is the caller's result slot.
    unsafe { out.write(p) };
    record_alloc(p, size, ret, Alignment::new(align as u64));
    0
}

extern "C" fn aligned_alloc_impl(align: size_t, size: size_t, ret: u64) -> *mut c_void {
    if !align.is_power_of_two() {
        // SAFETY: errno is thread-local.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return std::ptr::null_mut();
    }
    memalign_impl(align, size, ret)
}

/// Defines an exported allocator entry point that appends its return address (the allocation
/// site) after the C arguments, in `$reg`, and jumps to `$imp`.
macro_rules! site_entry {
    ($($name:ident $args:tt -> $ret:ty, $reg:literal => $imp:ident;)*) => {$(
        #[doc = concat!("Interposed `", stringify!($name), "`.")]
        #[unsafe(naked)]
        #[no_mangle]
        pub extern "C" fn $name $args -> $ret {
            core::arch::naked_asm!(concat!("mov ", $reg, ", [rsp]"), "jmp {f}", f = sym $imp)
        }
    )*};
}

site_entry! {
    malloc(_size: size_t) -> *mut c_void, "rsi" => malloc_impl;
    calloc(_n: size_t, _size: size_t) -> *mut c_void, "rdx" => calloc_impl;
    realloc(_p: *mut c_void, _size: size_t) -> *mut c_void, "rdx" => realloc_impl;
    memalign(_align: size_t, _size: size_t) -> *mut c_void, "rdx" => memalign_impl;
    aligned_alloc(_align: size_t, _size: size_t) -> *mut c_void, "rdx" => aligned_alloc_impl;
    valloc(_size: size_t) -> *mut c_void, "rsi" => valloc_impl;
    posix_memalign(_out: *mut *mut c_void, _align: size_t, _size: size_t) -> c_int, "rcx"
        => posix_memalign_impl;
}

/// Interposed `free`.
#[no_mangle]
pub extern "C" fn free(p: *mut c_void) {
    free_impl(p)
}
