//! `memcpy`, `memmove` and `memset`, interposed: compilers turn struct copies and array
//! initializations into calls to these (clang's ThreadSanitizer pass calls them by name and
//! relies on the runtime to intercept them), and libraries call them too. Each call records a
//! read of the source range and a write of the destination range, then runs the next
//! definition (glibc's optimized one, found with `dlsym(RTLD_NEXT)`).
//!
//! The next definition cannot be reached through glibc's exported aliases (`__memcpy_chk` and
//! friends end in a jump to `memcpy`, which is us again: an endless loop once the compiler makes
//! our call a tail call), and `dlsym` itself copies memory. So until `dlsym` has answered, and
//! if it cannot, the copies are done with `rep movsb` / `rep stosb`, which call nothing.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use cachescope_schema::AccessKind;
use libc::{c_int, c_void, size_t};

use crate::thread::{self, Existing};
use crate::tsan::range;

type CopyFn = unsafe extern "C" fn(*mut c_void, *const c_void, size_t) -> *mut c_void;
type SetFn = unsafe extern "C" fn(*mut c_void, c_int, size_t) -> *mut c_void;

/// A function of libc found after the shim, resolved once.
struct Next {
    name: &'static [u8],
    addr: AtomicUsize,
    /// 0: not tried, 1: resolving (recursive calls use the fallback), 2: done.
    state: AtomicU8,
}

impl Next {
    const fn new(name: &'static [u8]) -> Self {
        Next {
            name,
            addr: AtomicUsize::new(0),
            state: AtomicU8::new(0),
        }
    }

    /// The next definition's address, or `None` while it is being resolved or if absent.
    fn get(&self) -> Option<usize> {
        match self.state.load(Ordering::Acquire) {
            2 => return Some(self.addr.load(Ordering::Acquire)).filter(|&a| a != 0),
            1 => return None,
            _ => {}
        }
        if self
            .state
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return None;
        }
        // SAFETY: `name` is NUL-terminated; RTLD_NEXT searches the modules after the shim.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr().cast()) } as usize;
        self.addr.store(p, Ordering::Release);
        self.state.store(2, Ordering::Release);
        Some(p).filter(|&a| a != 0)
    }
}

static NEXT_MEMCPY: Next = Next::new(b"memcpy\0");
static NEXT_MEMMOVE: Next = Next::new(b"memmove\0");
static NEXT_MEMSET: Next = Next::new(b"memset\0");

/// Forward byte copy that calls nothing.
///
/// # Safety
/// `dst` and `src` must be valid for `n` bytes; forward copying must be correct for them.
unsafe fn movsb(dst: *mut c_void, src: *const c_void, n: size_t) {
    // SAFETY: the caller's contract; `rep movsb` copies rcx bytes from [rsi] to [rdi] with the
    // direction flag clear (the ABI guarantees it is clear on function entry).
    unsafe {
        core::arch::asm!("rep movsb", inout("rcx") n => _, inout("rdi") dst => _,
            inout("rsi") src => _, options(nostack, preserves_flags));
    }
}

/// Whether the calling thread may record now. Inlined, so that threads that never record
/// (the writer thread, whose encoder makes a small `memcpy` call for every variable-length
/// integer) go straight to libc: two loads and a compare.
#[inline(always)]
fn may_record(ret: u64) -> bool {
    // The shim's own copies (its allocator zeroing a block for the C library, Rust code) are
    // not the program's, on whatever thread and in whatever state they run.
    !matches!(thread::existing(), Existing::Quiet) && !crate::cov::in_shim(ret)
}

/// Records the source and destination ranges of a copy.
#[inline(never)]
fn record_copy(src: *const c_void, dst: *mut c_void, n: size_t, ret: u64) {
    range(AccessKind::Load, src as u64, n as u64, ret);
    range(AccessKind::Store, dst as u64, n as u64, ret);
}

extern "C" fn memcpy_impl(
    dst: *mut c_void,
    src: *const c_void,
    n: size_t,
    ret: u64,
) -> *mut c_void {
    if may_record(ret) {
        record_copy(src, dst, n, ret);
    }
    match NEXT_MEMCPY.get() {
        Some(f) => {
            // SAFETY: `f` is libc's memcpy; the arguments are the caller's.
            unsafe { std::mem::transmute::<usize, CopyFn>(f)(dst, src, n) }
        }
        None => {
            // SAFETY: memcpy's contract (valid, non-overlapping ranges) is the caller's.
            unsafe { movsb(dst, src, n) };
            dst
        }
    }
}

extern "C" fn memmove_impl(
    dst: *mut c_void,
    src: *const c_void,
    n: size_t,
    ret: u64,
) -> *mut c_void {
    if may_record(ret) {
        record_copy(src, dst, n, ret);
    }
    match NEXT_MEMMOVE.get() {
        Some(f) => {
            // SAFETY: `f` is libc's memmove; the arguments are the caller's.
            unsafe { std::mem::transmute::<usize, CopyFn>(f)(dst, src, n) }
        }
        None => {
            let (d, s) = (dst as usize, src as usize);
            if d <= s || d >= s + n {
                // SAFETY: forward copying is correct when dst is below src or disjoint.
                unsafe { movsb(dst, src, n) };
            } else {
                // Overlap with dst above src: copy backwards, byte by byte, without calls.
                for i in (0..n).rev() {
                    // SAFETY: both ranges are valid for n bytes (the caller's contract);
                    // volatile keeps the compiler from turning the loop into a memmove call.
                    unsafe {
                        let b = std::ptr::read_volatile((src as *const u8).add(i));
                        std::ptr::write_volatile((dst as *mut u8).add(i), b);
                    }
                }
            }
            dst
        }
    }
}

/// Records the destination range of a `memset`.
#[inline(never)]
fn record_set(dst: *mut c_void, n: size_t, ret: u64) {
    range(AccessKind::Store, dst as u64, n as u64, ret);
}

extern "C" fn memset_impl(dst: *mut c_void, c: c_int, n: size_t, ret: u64) -> *mut c_void {
    if may_record(ret) {
        record_set(dst, n, ret);
    }
    match NEXT_MEMSET.get() {
        Some(f) => {
            // SAFETY: `f` is libc's memset; the arguments are the caller's.
            unsafe { std::mem::transmute::<usize, SetFn>(f)(dst, c, n) }
        }
        None => {
            // SAFETY: `dst` is valid for n bytes (the caller's contract); `rep stosb` stores al
            // rcx times at [rdi].
            unsafe {
                core::arch::asm!("rep stosb", inout("rcx") n => _, inout("rdi") dst => _,
                    in("al") c as u8, options(nostack, preserves_flags));
            }
            dst
        }
    }
}

/// Exported entry points: the return address (the call site) goes in `rcx`, after the three
/// C arguments.
macro_rules! mem_entry {
    ($($name:ident $args:tt => $imp:ident;)*) => {$(
        #[doc = concat!("Interposed `", stringify!($name), "`.")]
        #[unsafe(naked)]
        #[no_mangle]
        pub extern "C" fn $name $args -> *mut c_void {
            core::arch::naked_asm!("mov rcx, [rsp]", "jmp {f}", f = sym $imp)
        }
    )*};
}

mem_entry! {
    memcpy(_d: *mut c_void, _s: *const c_void, _n: size_t) => memcpy_impl;
    memmove(_d: *mut c_void, _s: *const c_void, _n: size_t) => memmove_impl;
    memset(_d: *mut c_void, _c: c_int, _n: size_t) => memset_impl;
    __tsan_memcpy(_d: *mut c_void, _s: *const c_void, _n: size_t) => memcpy_impl;
    __tsan_memmove(_d: *mut c_void, _s: *const c_void, _n: size_t) => memmove_impl;
    __tsan_memset(_d: *mut c_void, _c: c_int, _n: size_t) => memset_impl;
}
