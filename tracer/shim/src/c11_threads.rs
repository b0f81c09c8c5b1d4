//! C11 `<threads.h>`: glibc's `thrd_create`, `thrd_join`, `mtx_*` and `cnd_*wait` call its
//! internal pthread functions directly, never the interposable `pthread_*` symbols, so without
//! these wrappers a C11 program's threads had no creation, start, join or lock events (its
//! worker's writes counted as concurrent with `main`'s after `thrd_join`; 2026-11-29 review).
//! Each wrapper goes through the interposed pthread function it stands for, relying on glibc's
//! layout: `thrd_t` is a `pthread_t`, `mtx_t` and `cnd_t` hold a `pthread_mutex_t` and a
//! `pthread_cond_t`, and `mtx_init` makes a recursive mutex for `mtx_recursive`.

use libc::{c_int, c_void, pthread_cond_t, pthread_mutex_t};

use crate::pthread;
use crate::thread;

/// `thrd_start_t`.
type ThrdStart = extern "C" fn(*mut c_void) -> c_int;

// `<threads.h>` results (glibc's values).
const THRD_SUCCESS: c_int = 0;
const THRD_BUSY: c_int = 1;
const THRD_ERROR: c_int = 2;
const THRD_NOMEM: c_int = 3;
const THRD_TIMEDOUT: c_int = 4;

/// glibc's `thrd_err_map`: a pthread result as a `<threads.h>` one.
fn thrd_result(rc: c_int) -> c_int {
    match rc {
        0 => THRD_SUCCESS,
        libc::ENOMEM => THRD_NOMEM,
        libc::ETIMEDOUT => THRD_TIMEDOUT,
        libc::EBUSY => THRD_BUSY,
        _ => THRD_ERROR,
    }
}

struct C11Start {
    func: ThrdStart,
    arg: *mut c_void,
}

/// A C11 thread's start through pthreads: its `int` result becomes the thread's `void *`
/// result the way glibc converts it (`(void *) (uintptr_t) result`, read back by `thrd_join`
/// as `(int) (uintptr_t)`).
extern "C" fn start_c11(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the `C11Start` boxed by `thrd_create` below, handed to exactly this
    // thread; freed before the program's function runs (which may end in `thrd_exit`), and
    // quietly (the shim's block, not the program's).
    let s = thread::quietly(|| *unsafe { Box::from_raw(p.cast::<C11Start>()) });
    let rc = (s.func)(s.arg);
    rc as isize as *mut c_void
}

/// Interposed `thrd_create`: recorded as `pthread_create`.
#[no_mangle]
pub unsafe extern "C" fn thrd_create(
    th: *mut libc::pthread_t,
    func: ThrdStart,
    arg: *mut c_void,
) -> c_int {
    let boxed = thread::quietly(|| Box::into_raw(Box::new(C11Start { func, arg })));
    // SAFETY: the caller's handle pointer, our start routine and its boxed context.
    let rc = unsafe { pthread::pthread_create(th, std::ptr::null(), start_c11, boxed.cast()) };
    if rc != 0 {
        // SAFETY: the thread was not created, so the box is still ours.
        thread::quietly(|| drop(unsafe { Box::from_raw(boxed) }));
    }
    thrd_result(rc)
}

/// Interposed `thrd_join`: recorded as `pthread_join`.
#[no_mangle]
pub unsafe extern "C" fn thrd_join(th: libc::pthread_t, res: *mut c_int) -> c_int {
    let mut ret: *mut c_void = std::ptr::null_mut();
    // SAFETY: forwarding, with a local for the result.
    let rc = unsafe { pthread::pthread_join(th, &mut ret) };
    if rc == 0 {
        // SAFETY: a non-null `res` is the caller's `int` to store the result in.
        if let Some(res) = unsafe { res.as_mut() } {
            *res = ret as usize as c_int;
        }
    }
    thrd_result(rc)
}

/// Interposed `mtx_lock`.
#[no_mangle]
pub unsafe extern "C" fn mtx_lock(m: *mut c_void) -> c_int {
    // SAFETY: an `mtx_t` holds a `pthread_mutex_t` (glibc).
    thrd_result(unsafe { pthread::pthread_mutex_lock(m.cast::<pthread_mutex_t>()) })
}

/// Interposed `mtx_trylock`.
#[no_mangle]
pub unsafe extern "C" fn mtx_trylock(m: *mut c_void) -> c_int {
    // SAFETY: as in `mtx_lock`.
    thrd_result(unsafe { pthread::pthread_mutex_trylock(m.cast::<pthread_mutex_t>()) })
}

/// Interposed `mtx_timedlock`.
#[no_mangle]
pub unsafe extern "C" fn mtx_timedlock(m: *mut c_void, t: *const libc::timespec) -> c_int {
    // SAFETY: as in `mtx_lock`.
    thrd_result(unsafe { pthread::pthread_mutex_timedlock(m.cast::<pthread_mutex_t>(), t) })
}

/// Interposed `mtx_unlock`.
#[no_mangle]
pub unsafe extern "C" fn mtx_unlock(m: *mut c_void) -> c_int {
    // SAFETY: as in `mtx_lock`.
    thrd_result(unsafe { pthread::pthread_mutex_unlock(m.cast::<pthread_mutex_t>()) })
}

/// Interposed `cnd_signal`: a source of the condition variable's order.
#[no_mangle]
pub unsafe extern "C" fn cnd_signal(c: *mut c_void) -> c_int {
    // SAFETY: a `cnd_t` holds a `pthread_cond_t` (glibc).
    thrd_result(unsafe { pthread::pthread_cond_signal(c.cast::<pthread_cond_t>()) })
}

/// Interposed `cnd_broadcast`: a source of the condition variable's order.
#[no_mangle]
pub unsafe extern "C" fn cnd_broadcast(c: *mut c_void) -> c_int {
    // SAFETY: as in `cnd_signal`.
    thrd_result(unsafe { pthread::pthread_cond_broadcast(c.cast::<pthread_cond_t>()) })
}

/// Interposed `cnd_wait`: releases and re-acquires the mutex.
#[no_mangle]
pub unsafe extern "C" fn cnd_wait(c: *mut c_void, m: *mut c_void) -> c_int {
    // SAFETY: a `cnd_t` holds a `pthread_cond_t`, an `mtx_t` a `pthread_mutex_t` (glibc).
    thrd_result(unsafe {
        pthread::pthread_cond_wait(c.cast::<pthread_cond_t>(), m.cast::<pthread_mutex_t>())
    })
}

/// Interposed `cnd_timedwait`: the mutex is re-acquired on timeout too.
#[no_mangle]
pub unsafe extern "C" fn cnd_timedwait(
    c: *mut c_void,
    m: *mut c_void,
    t: *const libc::timespec,
) -> c_int {
    // SAFETY: as in `cnd_wait`.
    thrd_result(unsafe {
        pthread::pthread_cond_timedwait(c.cast::<pthread_cond_t>(), m.cast::<pthread_mutex_t>(), t)
    })
}
