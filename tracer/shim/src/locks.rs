//! pthread read-write locks and spin locks (mutexes and condition variables are in
//! `pthread.rs`).
//!
//! A spin lock is a lock like a mutex: its acquisitions are numbered while it is held.
//! A read-write lock is held by several readers at once, which the replay's lock model (one
//! holder) cannot express, so each of its acquisitions and each unlock is recorded as an
//! acquisition and release of the lock at once: replay follows the recorded order of them.
//! The audit takes none of these as ordering code (mutual exclusion only: which thread got
//! a lock first is the run's, not the program's; docs/audit.md).

use libc::{c_int, pthread_rwlock_t, pthread_spinlock_t};

use crate::pthread::{acquired, releasing};
use crate::real::real_fn;

real_fn! {
    real_rdlock: "pthread_rwlock_rdlock" => unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    real_tryrdlock: "pthread_rwlock_tryrdlock" => unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    real_timedrdlock: "pthread_rwlock_timedrdlock" =>
        unsafe extern "C" fn(*mut pthread_rwlock_t, *const libc::timespec) -> c_int;
    real_clockrdlock: "pthread_rwlock_clockrdlock" =>
        unsafe extern "C" fn(*mut pthread_rwlock_t, libc::clockid_t, *const libc::timespec) -> c_int;
    real_wrlock: "pthread_rwlock_wrlock" => unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    real_trywrlock: "pthread_rwlock_trywrlock" => unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    real_timedwrlock: "pthread_rwlock_timedwrlock" =>
        unsafe extern "C" fn(*mut pthread_rwlock_t, *const libc::timespec) -> c_int;
    real_clockwrlock: "pthread_rwlock_clockwrlock" =>
        unsafe extern "C" fn(*mut pthread_rwlock_t, libc::clockid_t, *const libc::timespec) -> c_int;
    real_rwunlock: "pthread_rwlock_unlock" => unsafe extern "C" fn(*mut pthread_rwlock_t) -> c_int;
    real_spin_lock: "pthread_spin_lock" => unsafe extern "C" fn(*mut pthread_spinlock_t) -> c_int;
    real_spin_trylock: "pthread_spin_trylock" => unsafe extern "C" fn(*mut pthread_spinlock_t) -> c_int;
    real_spin_unlock: "pthread_spin_unlock" => unsafe extern "C" fn(*mut pthread_spinlock_t) -> c_int;
}

/// Records a read-write lock taken (`rc` 0), read or write, as an acquisition and release.
fn taken(l: *mut pthread_rwlock_t, rc: c_int) -> c_int {
    if rc == 0 {
        point(l as u64);
    }
    rc
}

/// An acquisition and release of `obj` at once.
fn point(obj: u64) {
    acquired(obj);
    releasing(obj);
}

/// Interposed `pthread_rwlock_rdlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_rdlock(l: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: forwarding.
    taken(l, unsafe { real_rdlock()(l) })
}

/// Interposed `pthread_rwlock_tryrdlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_tryrdlock(l: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: forwarding.
    taken(l, unsafe { real_tryrdlock()(l) })
}

/// Interposed `pthread_rwlock_timedrdlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_timedrdlock(
    l: *mut pthread_rwlock_t,
    t: *const libc::timespec,
) -> c_int {
    // SAFETY: forwarding.
    taken(l, unsafe { real_timedrdlock()(l, t) })
}

/// Interposed `pthread_rwlock_clockrdlock` (glibc 2.30).
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_clockrdlock(
    l: *mut pthread_rwlock_t,
    clock: libc::clockid_t,
    t: *const libc::timespec,
) -> c_int {
    // SAFETY: forwarding.
    taken(l, unsafe { real_clockrdlock()(l, clock, t) })
}

/// Interposed `pthread_rwlock_wrlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_wrlock(l: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: forwarding.
    taken(l, unsafe { real_wrlock()(l) })
}

/// Interposed `pthread_rwlock_trywrlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_trywrlock(l: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: forwarding.
    taken(l, unsafe { real_trywrlock()(l) })
}

/// Interposed `pthread_rwlock_timedwrlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_timedwrlock(
    l: *mut pthread_rwlock_t,
    t: *const libc::timespec,
) -> c_int {
    // SAFETY: forwarding.
    taken(l, unsafe { real_timedwrlock()(l, t) })
}

/// Interposed `pthread_rwlock_clockwrlock` (glibc 2.30).
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_clockwrlock(
    l: *mut pthread_rwlock_t,
    clock: libc::clockid_t,
    t: *const libc::timespec,
) -> c_int {
    // SAFETY: forwarding.
    taken(l, unsafe { real_clockwrlock()(l, clock, t) })
}

/// Interposed `pthread_rwlock_unlock`: the point comes before the unlock, so a thread that
/// takes the lock after it follows it.
#[no_mangle]
pub unsafe extern "C" fn pthread_rwlock_unlock(l: *mut pthread_rwlock_t) -> c_int {
    point(l as u64);
    // SAFETY: forwarding.
    unsafe { real_rwunlock()(l) }
}

/// Interposed `pthread_spin_lock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_lock(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: forwarding.
    let rc = unsafe { real_spin_lock()(l) };
    if rc == 0 {
        acquired(l as u64);
    }
    rc
}

/// Interposed `pthread_spin_trylock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_trylock(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: forwarding.
    let rc = unsafe { real_spin_trylock()(l) };
    if rc == 0 {
        acquired(l as u64);
    }
    rc
}

/// Interposed `pthread_spin_unlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_spin_unlock(l: *mut pthread_spinlock_t) -> c_int {
    releasing(l as u64);
    // SAFETY: forwarding.
    unsafe { real_spin_unlock()(l) }
}
