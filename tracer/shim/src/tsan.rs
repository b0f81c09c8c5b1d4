//! The ThreadSanitizer ABI that `-fsanitize=thread` code calls (gcc 12 and clang 14): plain,
//! unaligned, volatile and range accesses, vptr, function entry/exit and init.
//!
//! Each access entry point is a two-instruction naked trampoline that passes its return address
//! (the instrumented instruction's position) as an extra argument to the Rust implementation;
//! Rust has no stable way to read a return address otherwise. Atomics are in [`crate::atomics`].

use cachescope_schema::limits::MAX_ACCESS_BYTES;
use cachescope_schema::AccessKind;

use crate::thread;

/// Records one access of `size` bytes at `addr`, made by the call returning to `ret`.
#[inline(always)]
pub(crate) fn access(kind: AccessKind, size: u32, addr: u64, ret: u64) {
    // The return address is the instruction after the call; one less lies inside the call,
    // whose source line is the access's.
    thread::record_access(kind, size, addr, ret.wrapping_sub(1));
}

/// Records an access of any length, split into pieces the trace format accepts.
pub(crate) fn range(kind: AccessKind, addr: u64, len: u64, ret: u64) {
    let mut done = 0;
    while done < len {
        let piece = (len - done).min(u64::from(MAX_ACCESS_BYTES));
        access(kind, piece as u32, addr.wrapping_add(done), ret);
        done += piece;
    }
}

/// `extern "C" fn(addr, ret)` implementations, one per kind and size.
extern "C" fn load<const N: u32>(addr: u64, ret: u64) {
    access(AccessKind::Load, N, addr, ret);
}
extern "C" fn store<const N: u32>(addr: u64, ret: u64) {
    access(AccessKind::Store, N, addr, ret);
}
extern "C" fn load_range(addr: u64, len: u64, ret: u64) {
    range(AccessKind::Load, addr, len, ret);
}
extern "C" fn store_range(addr: u64, len: u64, ret: u64) {
    range(AccessKind::Store, addr, len, ret);
}
extern "C" fn vptr_update(addr: u64, _new: u64, ret: u64) {
    access(AccessKind::Store, 8, addr, ret);
}

/// Defines exported `fn(addr)` entry points that forward `(addr, return address)` to `$imp`.
macro_rules! one_arg_entry {
    ($($name:ident => $imp:path;)*) => {$(
        #[doc = concat!("ThreadSanitizer entry point `", stringify!($name), "`.")]
        #[unsafe(naked)]
        #[no_mangle]
        pub extern "C" fn $name(_addr: u64) {
            // The return address is at [rsp] on entry; it becomes the second argument.
            core::arch::naked_asm!("mov rsi, [rsp]", "jmp {f}", f = sym $imp)
        }
    )*};
}

/// Defines exported `fn(a, b)` entry points that forward `(a, b, return address)` to `$imp`.
macro_rules! two_arg_entry {
    ($($name:ident => $imp:path;)*) => {$(
        #[doc = concat!("ThreadSanitizer entry point `", stringify!($name), "`.")]
        #[unsafe(naked)]
        #[no_mangle]
        pub extern "C" fn $name(_a: u64, _b: u64) {
            core::arch::naked_asm!("mov rdx, [rsp]", "jmp {f}", f = sym $imp)
        }
    )*};
}
pub(crate) use one_arg_entry;

one_arg_entry! {
    __tsan_read1 => load::<1>;
    __tsan_read2 => load::<2>;
    __tsan_read4 => load::<4>;
    __tsan_read8 => load::<8>;
    __tsan_read16 => load::<16>;
    __tsan_write1 => store::<1>;
    __tsan_write2 => store::<2>;
    __tsan_write4 => store::<4>;
    __tsan_write8 => store::<8>;
    __tsan_write16 => store::<16>;
    __tsan_unaligned_read1 => load::<1>;
    __tsan_unaligned_read2 => load::<2>;
    __tsan_unaligned_read4 => load::<4>;
    __tsan_unaligned_read8 => load::<8>;
    __tsan_unaligned_read16 => load::<16>;
    __tsan_unaligned_write1 => store::<1>;
    __tsan_unaligned_write2 => store::<2>;
    __tsan_unaligned_write4 => store::<4>;
    __tsan_unaligned_write8 => store::<8>;
    __tsan_unaligned_write16 => store::<16>;
    __tsan_volatile_read1 => load::<1>;
    __tsan_volatile_read2 => load::<2>;
    __tsan_volatile_read4 => load::<4>;
    __tsan_volatile_read8 => load::<8>;
    __tsan_volatile_read16 => load::<16>;
    __tsan_volatile_write1 => store::<1>;
    __tsan_volatile_write2 => store::<2>;
    __tsan_volatile_write4 => store::<4>;
    __tsan_volatile_write8 => store::<8>;
    __tsan_volatile_write16 => store::<16>;
    __tsan_unaligned_volatile_read1 => load::<1>;
    __tsan_unaligned_volatile_read2 => load::<2>;
    __tsan_unaligned_volatile_read4 => load::<4>;
    __tsan_unaligned_volatile_read8 => load::<8>;
    __tsan_unaligned_volatile_read16 => load::<16>;
    __tsan_unaligned_volatile_write1 => store::<1>;
    __tsan_unaligned_volatile_write2 => store::<2>;
    __tsan_unaligned_volatile_write4 => store::<4>;
    __tsan_unaligned_volatile_write8 => store::<8>;
    __tsan_unaligned_volatile_write16 => store::<16>;
    __tsan_vptr_read => load::<8>;
}

two_arg_entry! {
    __tsan_read_range => load_range;
    __tsan_write_range => store_range;
    __tsan_vptr_update => vptr_update;
}

/// Called by instrumented modules' constructors. Recording starts in the shim's own
/// constructor, which runs first (the shim is a dependency of every instrumented module).
#[no_mangle]
pub extern "C" fn __tsan_init() {}

/// Function entry. `cachescope cc` asks the compilers not to emit these; code built with
/// plain `-fsanitize=thread` still calls them, and they cost nothing here.
#[no_mangle]
pub extern "C" fn __tsan_func_entry(_caller: *const u8) {}

/// Function exit (see [`__tsan_func_entry`]).
#[no_mangle]
pub extern "C" fn __tsan_func_exit() {}

/// Start of a region whose accesses the program asks ThreadSanitizer to ignore; we record them
/// anyway (they are real memory traffic).
#[no_mangle]
pub extern "C" fn __tsan_ignore_thread_begin() {}

/// End of an ignored region (see [`__tsan_ignore_thread_begin`]).
#[no_mangle]
pub extern "C" fn __tsan_ignore_thread_end() {}
