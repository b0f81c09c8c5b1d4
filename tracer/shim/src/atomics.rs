//! ThreadSanitizer's atomic operations, which the shim must perform (the compiler replaced the
//! program's atomic instructions with these calls), and record: loads as loads, stores as
//! stores, read-modify-writes and compare-exchanges (even failing ones, which still take the
//! line exclusively on x86) as atomic RMWs.
//!
//! Every operation runs with sequentially consistent ordering whatever order the program asked
//! for: stronger ordering is always correct, and on x86 it only adds a fence to plain stores.
//! 128-bit atomics (rare: `__int128` with `-mcx16`) are serialized under one lock; that is
//! atomic with respect to every other 128-bit atomic, which all go through this shim too.

use std::sync::atomic::{fence, AtomicI16, AtomicI32, AtomicI64, AtomicI8, Ordering};
use std::sync::Mutex;

use cachescope_schema::AccessKind;

use crate::tsan::access;

const SC: Ordering = Ordering::SeqCst;

/// The operations of one atomic width.
trait Atomic: Sized {
    type V: Copy + Eq;
    const SIZE: u32;
    /// # Safety
    /// `p` must be valid and suitably aligned for atomic access of this width.
    unsafe fn at<'a>(p: *mut Self::V) -> &'a Self;
    fn load(&self) -> Self::V;
    fn store(&self, v: Self::V);
    fn swap(&self, v: Self::V) -> Self::V;
    fn add(&self, v: Self::V) -> Self::V;
    fn sub(&self, v: Self::V) -> Self::V;
    fn and(&self, v: Self::V) -> Self::V;
    fn or(&self, v: Self::V) -> Self::V;
    fn xor(&self, v: Self::V) -> Self::V;
    fn nand(&self, v: Self::V) -> Self::V;
    fn cas(&self, c: Self::V, v: Self::V) -> Result<Self::V, Self::V>;
}

macro_rules! impl_atomic {
    ($($a:ty, $v:ty, $n:expr;)*) => {$(
        impl Atomic for $a {
            type V = $v;
            const SIZE: u32 = $n;
            unsafe fn at<'a>(p: *mut $v) -> &'a Self {
                // SAFETY: the caller guarantees validity and alignment (the program's atomic).
                unsafe { <$a>::from_ptr(p) }
            }
            fn load(&self) -> $v { <$a>::load(self, SC) }
            fn store(&self, v: $v) { <$a>::store(self, v, SC) }
            fn swap(&self, v: $v) -> $v { <$a>::swap(self, v, SC) }
            fn add(&self, v: $v) -> $v { self.fetch_add(v, SC) }
            fn sub(&self, v: $v) -> $v { self.fetch_sub(v, SC) }
            fn and(&self, v: $v) -> $v { self.fetch_and(v, SC) }
            fn or(&self, v: $v) -> $v { self.fetch_or(v, SC) }
            fn xor(&self, v: $v) -> $v { self.fetch_xor(v, SC) }
            fn nand(&self, v: $v) -> $v { self.fetch_nand(v, SC) }
            fn cas(&self, c: $v, v: $v) -> Result<$v, $v> { self.compare_exchange(c, v, SC, SC) }
        }
    )*};
}

impl_atomic! {
    AtomicI8, i8, 1;
    AtomicI16, i16, 2;
    AtomicI32, i32, 4;
    AtomicI64, i64, 8;
}

extern "C" fn load<A: Atomic>(a: *mut A::V, _mo: i32, ret: u64) -> A::V {
    access(AccessKind::Load, A::SIZE, a as u64, ret);
    // SAFETY: `a` is the program's atomic object, valid and aligned (C11/C++11 requirement).
    unsafe { A::at(a) }.load()
}

extern "C" fn store<A: Atomic>(a: *mut A::V, v: A::V, _mo: i32, ret: u64) {
    access(AccessKind::Store, A::SIZE, a as u64, ret);
    // SAFETY: as in `load`.
    unsafe { A::at(a) }.store(v)
}

macro_rules! rmw_fns {
    ($($name:ident => $op:ident;)*) => {$(
        extern "C" fn $name<A: Atomic>(a: *mut A::V, v: A::V, _mo: i32, ret: u64) -> A::V {
            access(AccessKind::AtomicRmw, A::SIZE, a as u64, ret);
            // SAFETY: as in `load`.
            unsafe { A::at(a) }.$op(v)
        }
    )*};
}

rmw_fns! {
    exchange => swap;
    fetch_add => add;
    fetch_sub => sub;
    fetch_and => and;
    fetch_or => or;
    fetch_xor => xor;
    fetch_nand => nand;
}

/// `compare_exchange_strong/weak(a, *c, v, mo, fail_mo)`: on failure `*c` gets the current value.
extern "C" fn cas_ptr<A: Atomic>(
    a: *mut A::V,
    c: *mut A::V,
    v: A::V,
    _mo: i32,
    _fmo: i32,
    ret: u64,
) -> i32 {
    access(AccessKind::AtomicRmw, A::SIZE, a as u64, ret);
    // SAFETY: `c` points to the caller's expected value (a local the compiler provides).
    let expected = unsafe { c.read() };
    // SAFETY: as in `load`.
    match unsafe { A::at(a) }.cas(expected, v) {
        Ok(_) => 1,
        Err(current) => {
            // SAFETY: as above.
            unsafe { c.write(current) };
            0
        }
    }
}

/// `compare_exchange_val(a, c, v, mo, fail_mo)`: returns the previous value.
extern "C" fn cas_val<A: Atomic>(
    a: *mut A::V,
    c: A::V,
    v: A::V,
    _mo: i32,
    _fmo: i32,
    ret: u64,
) -> A::V {
    access(AccessKind::AtomicRmw, A::SIZE, a as u64, ret);
    // SAFETY: as in `load`.
    match unsafe { A::at(a) }.cas(c, v) {
        Ok(prev) | Err(prev) => prev,
    }
}

/// Naked entry points: move the return address into the argument register after the
/// operation's own arguments and jump to the implementation.
macro_rules! entries {
    ($reg:literal, $sig:tt; $($name:ident => $imp:path;)*) => {$(
        #[doc = concat!("ThreadSanitizer entry point `", stringify!($name), "`.")]
        #[unsafe(naked)]
        #[no_mangle]
        pub extern "C" fn $name $sig {
            core::arch::naked_asm!(concat!("mov ", $reg, ", [rsp]"), "jmp {f}", f = sym $imp)
        }
    )*};
}

macro_rules! width {
    ($a:ty; $load:ident, $store:ident, $xchg:ident, $add:ident, $sub:ident, $and:ident,
     $or:ident, $xor:ident, $nand:ident, $strong:ident, $weak:ident, $val:ident) => {
        entries! { "rdx", (_a: u64, _mo: i32); $load => load::<$a>; }
        entries! { "rcx", (_a: u64, _v: u64, _mo: i32);
            $store => store::<$a>;
            $xchg => exchange::<$a>;
            $add => fetch_add::<$a>;
            $sub => fetch_sub::<$a>;
            $and => fetch_and::<$a>;
            $or => fetch_or::<$a>;
            $xor => fetch_xor::<$a>;
            $nand => fetch_nand::<$a>;
        }
        entries! { "r9", (_a: u64, _c: u64, _v: u64, _mo: i32, _fmo: i32);
            $strong => cas_ptr::<$a>;
            $weak => cas_ptr::<$a>;
            $val => cas_val::<$a>;
        }
    };
}

width!(AtomicI8; __tsan_atomic8_load, __tsan_atomic8_store, __tsan_atomic8_exchange,
    __tsan_atomic8_fetch_add, __tsan_atomic8_fetch_sub, __tsan_atomic8_fetch_and,
    __tsan_atomic8_fetch_or, __tsan_atomic8_fetch_xor, __tsan_atomic8_fetch_nand,
    __tsan_atomic8_compare_exchange_strong, __tsan_atomic8_compare_exchange_weak,
    __tsan_atomic8_compare_exchange_val);
width!(AtomicI16; __tsan_atomic16_load, __tsan_atomic16_store, __tsan_atomic16_exchange,
    __tsan_atomic16_fetch_add, __tsan_atomic16_fetch_sub, __tsan_atomic16_fetch_and,
    __tsan_atomic16_fetch_or, __tsan_atomic16_fetch_xor, __tsan_atomic16_fetch_nand,
    __tsan_atomic16_compare_exchange_strong, __tsan_atomic16_compare_exchange_weak,
    __tsan_atomic16_compare_exchange_val);
width!(AtomicI32; __tsan_atomic32_load, __tsan_atomic32_store, __tsan_atomic32_exchange,
    __tsan_atomic32_fetch_add, __tsan_atomic32_fetch_sub, __tsan_atomic32_fetch_and,
    __tsan_atomic32_fetch_or, __tsan_atomic32_fetch_xor, __tsan_atomic32_fetch_nand,
    __tsan_atomic32_compare_exchange_strong, __tsan_atomic32_compare_exchange_weak,
    __tsan_atomic32_compare_exchange_val);
width!(AtomicI64; __tsan_atomic64_load, __tsan_atomic64_store, __tsan_atomic64_exchange,
    __tsan_atomic64_fetch_add, __tsan_atomic64_fetch_sub, __tsan_atomic64_fetch_and,
    __tsan_atomic64_fetch_or, __tsan_atomic64_fetch_xor, __tsan_atomic64_fetch_nand,
    __tsan_atomic64_compare_exchange_strong, __tsan_atomic64_compare_exchange_weak,
    __tsan_atomic64_compare_exchange_val);

/// The lock that makes 128-bit operations atomic among themselves.
static WIDE: Mutex<()> = Mutex::new(());

/// Runs `f` on the 128-bit object `a` under [`WIDE`], recording one access of `kind`.
fn wide<R>(a: *mut i128, kind: AccessKind, f: impl FnOnce(*mut i128) -> R) -> R {
    // No return address here: the 128-bit entry points take their arguments in too many
    // registers for a trampoline; these accesses have no code position.
    // A return address of 1 makes the code position 0, which the trace stores as "none".
    access(kind, 16, a as u64, 1);
    let _g = crate::recorder::lock(&WIDE);
    f(a)
}

/// 128-bit atomic load.
#[no_mangle]
pub extern "C" fn __tsan_atomic128_load(a: *mut i128, _mo: i32) -> i128 {
    // SAFETY: `a` is the program's 16-byte atomic object; writers hold WIDE too.
    wide(a, AccessKind::Load, |a| unsafe { a.read_volatile() })
}

/// 128-bit atomic store.
#[no_mangle]
pub extern "C" fn __tsan_atomic128_store(a: *mut i128, v: i128, _mo: i32) {
    // SAFETY: as in `__tsan_atomic128_load`.
    wide(a, AccessKind::Store, |a| unsafe { a.write_volatile(v) })
}

macro_rules! wide_rmw {
    ($($name:ident => |$old:ident, $v:ident| $new:expr;)*) => {$(
        #[doc = concat!("128-bit atomic `", stringify!($name), "`.")]
        #[no_mangle]
        pub extern "C" fn $name(a: *mut i128, $v: i128, _mo: i32) -> i128 {
            wide(a, AccessKind::AtomicRmw, |a| {
                // SAFETY: as in `__tsan_atomic128_load`.
                let $old = unsafe { a.read_volatile() };
                // SAFETY: as above.
                unsafe { a.write_volatile($new) };
                $old
            })
        }
    )*};
}

wide_rmw! {
    __tsan_atomic128_exchange => |_old, v| v;
    __tsan_atomic128_fetch_add => |old, v| old.wrapping_add(v);
    __tsan_atomic128_fetch_sub => |old, v| old.wrapping_sub(v);
    __tsan_atomic128_fetch_and => |old, v| old & v;
    __tsan_atomic128_fetch_or => |old, v| old | v;
    __tsan_atomic128_fetch_xor => |old, v| old ^ v;
    __tsan_atomic128_fetch_nand => |old, v| !(old & v);
}

fn wide_cas(a: *mut i128, c: i128, v: i128) -> Result<i128, i128> {
    wide(a, AccessKind::AtomicRmw, |a| {
        // SAFETY: as in `__tsan_atomic128_load`.
        let old = unsafe { a.read_volatile() };
        if old == c {
            // SAFETY: as above.
            unsafe { a.write_volatile(v) };
            Ok(old)
        } else {
            Err(old)
        }
    })
}

/// 128-bit strong compare-exchange.
#[no_mangle]
pub extern "C" fn __tsan_atomic128_compare_exchange_strong(
    a: *mut i128,
    c: *mut i128,
    v: i128,
    _mo: i32,
    _fmo: i32,
) -> i32 {
    // SAFETY: `c` is the caller's expected-value slot.
    match wide_cas(a, unsafe { c.read() }, v) {
        Ok(_) => 1,
        Err(cur) => {
            // SAFETY: as above.
            unsafe { c.write(cur) };
            0
        }
    }
}

/// 128-bit weak compare-exchange (never fails spuriously here).
#[no_mangle]
pub extern "C" fn __tsan_atomic128_compare_exchange_weak(
    a: *mut i128,
    c: *mut i128,
    v: i128,
    mo: i32,
    fmo: i32,
) -> i32 {
    __tsan_atomic128_compare_exchange_strong(a, c, v, mo, fmo)
}

/// 128-bit compare-exchange returning the previous value.
#[no_mangle]
pub extern "C" fn __tsan_atomic128_compare_exchange_val(
    a: *mut i128,
    c: i128,
    v: i128,
    _mo: i32,
    _fmo: i32,
) -> i128 {
    match wide_cas(a, c, v) {
        Ok(p) | Err(p) => p,
    }
}

/// `atomic_thread_fence`.
#[no_mangle]
pub extern "C" fn __tsan_atomic_thread_fence(_mo: i32) {
    fence(SC);
}

/// `atomic_signal_fence`.
#[no_mangle]
pub extern "C" fn __tsan_atomic_signal_fence(_mo: i32) {
    std::sync::atomic::compiler_fence(SC);
}
