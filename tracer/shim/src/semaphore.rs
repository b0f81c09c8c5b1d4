//! POSIX semaphores: a post is a source of the semaphore's order, a wait that took a unit a
//! sink ([`pthread::order_source`], [`pthread::order_sink`]), so replay and the audit take a
//! waiter's code after the wait to follow the posts before it. A producer that fills a
//! buffer, posts, and a consumer that waits and then writes beside it were counted as
//! concurrent before (2026-11-29: ~400,000 simulated false-sharing misses and a failed audit
//! on a hand-over that never overlaps).
//!
//! The post's point is recorded before the real post, the wait's after the real wait returns:
//! a wait the post released cannot return before that post's point was numbered. Posts do not
//! order each other, nor waits each other (in another run they could come the other way);
//! a wait follows every post before it, also ones meant for another waiter.

use libc::{c_int, sem_t};

use crate::pthread::{order_sink, order_source};
use crate::real::real_fn;

real_fn! {
    real_post: "sem_post" => unsafe extern "C" fn(*mut sem_t) -> c_int;
    real_wait: "sem_wait" => unsafe extern "C" fn(*mut sem_t) -> c_int;
    real_trywait: "sem_trywait" => unsafe extern "C" fn(*mut sem_t) -> c_int;
    real_timedwait: "sem_timedwait" => unsafe extern "C" fn(*mut sem_t, *const libc::timespec) -> c_int;
    real_clockwait: "sem_clockwait" =>
        unsafe extern "C" fn(*mut sem_t, libc::clockid_t, *const libc::timespec) -> c_int;
}

/// Records the point of a wait that took a unit (`rc` 0).
fn waited(s: *mut sem_t, rc: c_int) -> c_int {
    if rc == 0 {
        order_sink(s as u64);
    }
    rc
}

/// Interposed `sem_post`.
#[no_mangle]
pub unsafe extern "C" fn sem_post(s: *mut sem_t) -> c_int {
    order_source(s as u64);
    // SAFETY: forwarding.
    unsafe { real_post()(s) }
}

/// Interposed `sem_wait`.
#[no_mangle]
pub unsafe extern "C" fn sem_wait(s: *mut sem_t) -> c_int {
    // SAFETY: forwarding.
    waited(s, unsafe { real_wait()(s) })
}

/// Interposed `sem_trywait`.
#[no_mangle]
pub unsafe extern "C" fn sem_trywait(s: *mut sem_t) -> c_int {
    // SAFETY: forwarding.
    waited(s, unsafe { real_trywait()(s) })
}

/// Interposed `sem_timedwait`.
#[no_mangle]
pub unsafe extern "C" fn sem_timedwait(s: *mut sem_t, t: *const libc::timespec) -> c_int {
    // SAFETY: forwarding.
    waited(s, unsafe { real_timedwait()(s, t) })
}

/// Interposed `sem_clockwait` (glibc 2.30).
#[no_mangle]
pub unsafe extern "C" fn sem_clockwait(
    s: *mut sem_t,
    clock: libc::clockid_t,
    t: *const libc::timespec,
) -> c_int {
    // SAFETY: forwarding.
    waited(s, unsafe { real_clockwait()(s, clock, t) })
}
