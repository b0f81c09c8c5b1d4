//! pthreads interposition: thread create/start/join (exit is recorded by the thread-exit key in
//! [`crate::thread`]), mutexes, condition variables and barriers. C11 `<threads.h>`, POSIX
//! semaphores, read-write and spin locks come through here too (`c11_threads.rs`,
//! `semaphore.rs`, `locks.rs`).
//!
//! Lock acquisitions are numbered per lock in the order they happened (the number is taken
//! while the lock is held, so it is the real order); replay aligns clocks with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use cachescope_schema::event::{ORDER_OBJECT, ORDER_SINK_MARK};
use cachescope_schema::{Event, ThreadId};
use libc::{c_int, c_void, pthread_attr_t, pthread_barrier_t, pthread_cond_t, pthread_mutex_t};

use crate::real::real_fn;
use crate::recorder::{self, lock};
use crate::stack;
use crate::thread;

type StartFn = extern "C" fn(*mut c_void) -> *mut c_void;

real_fn! {
    real_create: "pthread_create" =>
        unsafe extern "C" fn(*mut libc::pthread_t, *const pthread_attr_t, StartFn, *mut c_void) -> c_int;
    real_join: "pthread_join" => unsafe extern "C" fn(libc::pthread_t, *mut *mut c_void) -> c_int;
    real_mutex_lock: "pthread_mutex_lock" => unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int;
    real_mutex_trylock: "pthread_mutex_trylock" => unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int;
    real_mutex_timedlock: "pthread_mutex_timedlock" =>
        unsafe extern "C" fn(*mut pthread_mutex_t, *const libc::timespec) -> c_int;
    real_mutex_unlock: "pthread_mutex_unlock" => unsafe extern "C" fn(*mut pthread_mutex_t) -> c_int;
    real_cond_wait: "pthread_cond_wait" =>
        unsafe extern "C" fn(*mut pthread_cond_t, *mut pthread_mutex_t) -> c_int;
    real_cond_timedwait: "pthread_cond_timedwait" =>
        unsafe extern "C" fn(*mut pthread_cond_t, *mut pthread_mutex_t, *const libc::timespec) -> c_int;
    real_cond_clockwait: "pthread_cond_clockwait" =>
        unsafe extern "C" fn(
            *mut pthread_cond_t,
            *mut pthread_mutex_t,
            libc::clockid_t,
            *const libc::timespec,
        ) -> c_int;
    real_cond_signal: "pthread_cond_signal" => unsafe extern "C" fn(*mut pthread_cond_t) -> c_int;
    real_cond_broadcast: "pthread_cond_broadcast" => unsafe extern "C" fn(*mut pthread_cond_t) -> c_int;
    real_barrier_init: "pthread_barrier_init" =>
        unsafe extern "C" fn(*mut pthread_barrier_t, *const libc::pthread_barrierattr_t, u32) -> c_int;
    real_barrier_wait: "pthread_barrier_wait" => unsafe extern "C" fn(*mut pthread_barrier_t) -> c_int;
}

/// Next acquisition number per lock object.
static LOCK_ORDERS: Mutex<Option<HashMap<u64, u64>>> = Mutex::new(None);
/// Recorded id of each thread created through us, by pthread handle.
static THREAD_IDS: Mutex<Option<HashMap<u64, ThreadId>>> = Mutex::new(None);
/// Participant count of each barrier, from `pthread_barrier_init`.
static BARRIERS: Mutex<Option<HashMap<u64, u32>>> = Mutex::new(None);

/// The next acquisition number of `lock_obj` (call with the thread busy: it may allocate).
fn next_order(lock_obj: u64) -> u64 {
    let mut g = lock(&LOCK_ORDERS);
    let n = g
        .get_or_insert_with(HashMap::new)
        .entry(lock_obj)
        .or_insert(0);
    let order = *n;
    *n += 1;
    order
}

/// Records that the calling thread acquired `lock` (call while holding it).
pub(crate) fn acquired(lock_obj: u64) {
    if let Some(st) = thread::current() {
        if st.waiting() {
            // The runtime's own lock while the thread waits in a barrier: a trace whose
            // program ended during the wait would otherwise end the thread's stream with
            // lock events instead of its wait, and replay would call it a deadlock.
            st.quiet(|st| st.unrecorded_locks.push(lock_obj));
            return;
        }
        let order = st.quiet(|_| next_order(lock_obj));
        st.push(Event::LockAcquire {
            lock: lock_obj,
            order,
        });
    }
}

/// Records that the calling thread is about to release `lock`.
pub(crate) fn releasing(lock_obj: u64) {
    if let Some(st) = thread::current() {
        if let Some(i) = st.unrecorded_locks.iter().position(|&l| l == lock_obj) {
            st.unrecorded_locks.swap_remove(i);
            return;
        }
        st.push(Event::LockRelease { lock: lock_obj });
    }
}

/// Records a *source* point of the order object for `obj` (`ORDER_OBJECT`, in the schema):
/// the thread's code before it comes before the sinks that follow on the object (a post, a
/// signal, an OpenMP task's creation or completion). The point is numbered like a lock
/// acquisition and recorded in one step with the thread busy, so a signal handler that
/// posts a semaphore in the middle records nothing rather than points out of order.
pub(crate) fn order_source(obj: u64) {
    order_points(&[obj | ORDER_OBJECT]);
}

/// Records a *sink* point of the order object for `obj`: the thread's code after it follows
/// the sources before it (a completed wait, an OpenMP task's start, a `taskwait`). A second
/// pair, on the object with `ORDER_SINK_MARK`, says so.
pub(crate) fn order_sink(obj: u64) {
    let o = obj | ORDER_OBJECT;
    order_points(&[o, o | ORDER_SINK_MARK]);
}

/// Records an acquisition and release of each of `objs`, in one step.
fn order_points(objs: &[u64]) {
    let Some(st) = thread::current() else { return };
    if st.waiting() {
        // The runtime's own synchronization while the thread waits in a barrier.
        return;
    }
    st.quiet(|st| {
        for &lock_obj in objs {
            let order = next_order(lock_obj);
            st.push(Event::LockAcquire {
                lock: lock_obj,
                order,
            });
            st.push(Event::LockRelease { lock: lock_obj });
        }
    });
}

/// Records a barrier episode around `wait`.
pub(crate) fn barrier<R>(obj: u64, participants: u32, wait: impl FnOnce() -> R) -> R {
    if let Some(st) = thread::current() {
        st.push(Event::BarrierEnter {
            barrier: obj,
            participants,
        });
    }
    let r = wait();
    if let Some(st) = thread::current() {
        st.push(Event::BarrierLeave { barrier: obj });
    }
    r
}

struct Start {
    start: StartFn,
    arg: *mut c_void,
    tid: ThreadId,
    /// Set by the creating thread once it recorded the creation (its last use of this box).
    recorded: AtomicBool,
}

extern "C" fn start_thread(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the `Start` boxed by `pthread_create` below, handed to exactly this thread.
    let s = unsafe { Box::from_raw(p.cast::<Start>()) };
    // The creation is recorded first: a trace cut by a stop signal must never hold this
    // thread's `ThreadStart` without it (until 2026-11-29 the child could record before its
    // creator did, and 1 recording of 12 stopped by SIGTERM could not be replayed: "thread N
    // waits to be created"). The creator sets the flag right after `real_create` returns.
    let mut spins = 0u32;
    while !s.recorded.load(Ordering::Acquire) {
        spins = spins.saturating_add(1);
        if spins < 64 {
            std::hint::spin_loop();
        } else if spins < 128 {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        } else {
            // Sleeping, not yielding: a child of higher real-time priority on the creator's
            // CPU would otherwise never let it run.
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
    thread::assign_tid(s.tid);
    if let Some(st) = thread::current() {
        st.push(Event::ThreadStart);
    }
    (s.start)(s.arg)
}

/// Interposed `pthread_create`: the child records under a fresh id and starts no earlier than
/// its creation.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    th: *mut libc::pthread_t,
    attr: *const pthread_attr_t,
    start: StartFn,
    arg: *mut c_void,
) -> c_int {
    let Some(st) = thread::current() else {
        // SAFETY: forwarding the caller's arguments unchanged.
        return unsafe { real_create()(th, attr, start, arg) };
    };
    // The new thread may write the creating function's locals (through `arg`); not when the
    // OpenMP runtime creates its workers during a fork (the fork recorded the frames).
    if !st.forking {
        stack::record(st);
    }
    let tid = recorder::next_tid();
    let boxed = st.quiet(|_| {
        Box::into_raw(Box::new(Start {
            start,
            arg,
            tid,
            recorded: AtomicBool::new(false),
        }))
    });
    // SAFETY: the caller's arguments, with our start routine and its boxed context.
    let rc = unsafe { real_create()(th, attr, start_thread, boxed.cast()) };
    if rc != 0 {
        // SAFETY: the thread was not created, so the box is still ours.
        st.quiet(|_| drop(unsafe { Box::from_raw(boxed) }));
        return rc;
    }
    // SAFETY: on success pthread_create stored the handle in `*th`.
    let handle: u64 = unsafe { *th };
    // With the thread busy: a signal handler that jumps away meanwhile would leave the child
    // waiting forever.
    st.quiet(|st| {
        lock(&THREAD_IDS)
            .get_or_insert_with(HashMap::new)
            .insert(handle, tid);
        st.push(Event::ThreadCreate { child: tid });
        // SAFETY: the child frees the box only after it saw this store (`start_thread`);
        // nothing here touches the box after it.
        unsafe { (*boxed).recorded.store(true, Ordering::Release) };
    });
    rc
}

/// Interposed `pthread_join`: the joiner continues no earlier than the child's exit.
#[no_mangle]
pub unsafe extern "C" fn pthread_join(th: libc::pthread_t, ret: *mut *mut c_void) -> c_int {
    // SAFETY: forwarding the caller's arguments unchanged.
    let rc = unsafe { real_join()(th, ret) };
    if rc == 0 {
        if let Some(st) = thread::current() {
            let child = st.quiet(|_| lock(&THREAD_IDS).as_mut()?.remove(&th));
            if let Some(child) = child {
                st.push(Event::ThreadJoin { child });
            }
        }
    }
    rc
}

/// How many times the calling thread, which holds `m`, holds it: glibc's `__count` (bytes
/// 4..8 of `pthread_mutex_t` on x86-64 Linux), which a recursive mutex counts its nested
/// acquisitions in and other kinds leave at 0. Only the outermost acquisition and the release
/// that frees the mutex are recorded: a nested one would look, in replay, like a second
/// thread taking a lock its holder never released.
fn depth(m: *const pthread_mutex_t) -> u32 {
    // SAFETY: `m` is a mutex the calling thread holds (just acquired, or about to be
    // released), so the field is initialized and only this thread changes it; the read is
    // aligned (a `pthread_mutex_t` is 8-byte aligned) and within its 40 bytes.
    unsafe { std::ptr::read_volatile(m.cast::<u8>().add(4).cast::<u32>()) }
}

/// Interposed `pthread_mutex_lock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_lock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: forwarding.
    let rc = unsafe { real_mutex_lock()(m) };
    if rc == 0 && depth(m) <= 1 {
        acquired(m as u64);
    }
    rc
}

/// Interposed `pthread_mutex_trylock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_trylock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: forwarding.
    let rc = unsafe { real_mutex_trylock()(m) };
    if rc == 0 && depth(m) <= 1 {
        acquired(m as u64);
    }
    rc
}

/// Interposed `pthread_mutex_timedlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_timedlock(
    m: *mut pthread_mutex_t,
    t: *const libc::timespec,
) -> c_int {
    // SAFETY: forwarding.
    let rc = unsafe { real_mutex_timedlock()(m, t) };
    if rc == 0 && depth(m) <= 1 {
        acquired(m as u64);
    }
    rc
}

/// Interposed `pthread_mutex_unlock`.
#[no_mangle]
pub unsafe extern "C" fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
    // An unlock by a thread that does not hold `m` fails and has `depth` 0 or another
    // thread's count: recorded as before (the replay's lock check reports it).
    if depth(m) <= 1 {
        releasing(m as u64);
    }
    // SAFETY: forwarding.
    unsafe { real_mutex_unlock()(m) }
}

/// Interposed `pthread_cond_wait`: releases and re-acquires the mutex; its return is a sink of
/// the condition variable's order (it follows the signals before it).
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
) -> c_int {
    releasing(m as u64);
    // SAFETY: forwarding.
    let rc = unsafe { real_cond_wait()(c, m) };
    acquired(m as u64);
    order_sink(c as u64);
    rc
}

/// Interposed `pthread_cond_timedwait`: the mutex is re-acquired on timeout too.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_timedwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    t: *const libc::timespec,
) -> c_int {
    releasing(m as u64);
    // SAFETY: forwarding.
    let rc = unsafe { real_cond_timedwait()(c, m, t) };
    acquired(m as u64);
    if rc == 0 {
        order_sink(c as u64);
    }
    rc
}

/// Interposed `pthread_cond_clockwait` (glibc 2.30; libstdc++'s `condition_variable::wait_for`
/// and `wait_until` call it): the mutex is re-acquired on timeout too.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_clockwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    clock: libc::clockid_t,
    t: *const libc::timespec,
) -> c_int {
    releasing(m as u64);
    // SAFETY: forwarding.
    let rc = unsafe { real_cond_clockwait()(c, m, clock, t) };
    acquired(m as u64);
    if rc == 0 {
        order_sink(c as u64);
    }
    rc
}

/// Interposed `pthread_cond_signal`: a source of the condition variable's order (a wait that
/// returns after it follows the signaller's code before it).
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int {
    order_source(c as u64);
    // SAFETY: forwarding.
    unsafe { real_cond_signal()(c) }
}

/// Interposed `pthread_cond_broadcast`: as `pthread_cond_signal`.
#[no_mangle]
pub unsafe extern "C" fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int {
    order_source(c as u64);
    // SAFETY: forwarding.
    unsafe { real_cond_broadcast()(c) }
}

/// Interposed `pthread_barrier_init`: remembers the participant count.
#[no_mangle]
pub unsafe extern "C" fn pthread_barrier_init(
    b: *mut pthread_barrier_t,
    attr: *const libc::pthread_barrierattr_t,
    count: u32,
) -> c_int {
    // SAFETY: forwarding.
    let rc = unsafe { real_barrier_init()(b, attr, count) };
    if rc == 0 {
        thread::quietly(|| {
            lock(&BARRIERS)
                .get_or_insert_with(HashMap::new)
                .insert(b as u64, count)
        });
    }
    rc
}

/// Interposed `pthread_barrier_wait`.
#[no_mangle]
pub unsafe extern "C" fn pthread_barrier_wait(b: *mut pthread_barrier_t) -> c_int {
    let count = thread::quietly(|| lock(&BARRIERS).as_ref()?.get(&(b as u64)).copied());
    // SAFETY: forwarding.
    let wait = || unsafe { real_barrier_wait()(b) };
    match count {
        Some(n) => barrier(b as u64, n, wait),
        None => wait(),
    }
}
