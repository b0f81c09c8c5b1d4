//! `memcpy`, `memmove` and `memset`, interposed: compilers turn struct copies and array
//! initializations into calls to these (clang's ThreadSanitizer pass calls them by name and
//! relies on the runtime to intercept them), and libraries call them too. Each call records a
//! read of the source range and a write of the destination range, then runs glibc's
//! implementation through its `__*_chk` entry points, which are exported, optimized (IFUNC) and
//! need no `dlsym`.

use cachescope_schema::AccessKind;
use libc::{c_int, c_void, size_t};

use crate::tsan::range;

extern "C" {
    fn __memcpy_chk(dst: *mut c_void, src: *const c_void, n: size_t, dstlen: size_t)
        -> *mut c_void;
    fn __memmove_chk(
        dst: *mut c_void,
        src: *const c_void,
        n: size_t,
        dstlen: size_t,
    ) -> *mut c_void;
    fn __memset_chk(dst: *mut c_void, c: c_int, n: size_t, dstlen: size_t) -> *mut c_void;
}

extern "C" fn memcpy_impl(
    dst: *mut c_void,
    src: *const c_void,
    n: size_t,
    ret: u64,
) -> *mut c_void {
    range(AccessKind::Load, src as u64, n as u64, ret);
    range(AccessKind::Store, dst as u64, n as u64, ret);
    // SAFETY: the caller's arguments; `dstlen = n` disables the (meaningless here) check.
    unsafe { __memcpy_chk(dst, src, n, n) }
}

extern "C" fn memmove_impl(
    dst: *mut c_void,
    src: *const c_void,
    n: size_t,
    ret: u64,
) -> *mut c_void {
    range(AccessKind::Load, src as u64, n as u64, ret);
    range(AccessKind::Store, dst as u64, n as u64, ret);
    // SAFETY: as above.
    unsafe { __memmove_chk(dst, src, n, n) }
}

extern "C" fn memset_impl(dst: *mut c_void, c: c_int, n: size_t, ret: u64) -> *mut c_void {
    range(AccessKind::Store, dst as u64, n as u64, ret);
    // SAFETY: as above.
    unsafe { __memset_chk(dst, c, n, n) }
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
