//! GNU libgomp interposition (OpenMP with gcc): parallel regions, team barriers, critical
//! sections, atomics and OpenMP locks.
//!
//! A parallel region's outlined function is wrapped so that every team member records the
//! region, a barrier at its start (members start no earlier than the fork) and one at its end
//! (the implicit join barrier: a real team barrier, in which explicit tasks still queued run
//! inside the region, see [`run_region`]). Barrier episodes are recorded when the wait is
//! over ([`gomp_barrier`]); one that the team's cancellation cut short is not. Each team gets a synthetic barrier object, so barriers of teams
//! of different sizes never mix; explicit and loop-end barriers use the same object.
//! `ordered` sections are a lock of their own (the runtime lets them in in iteration order,
//! which is the recorded order of acquisitions replay follows). OpenMP nest locks record their
//! outermost acquisition and the release that frees them (the holder's nested acquisitions
//! cannot wait), with either runtime: the interposers catch libomp's functions too.
//! Explicit tasks (`GOMP_task`, `GOMP_taskloop*`, `GOMP_taskwait`, `GOMP_taskgroup_end`) are in
//! `gomp_tasks.rs`. Not modelled (documented): nested parallelism beyond keeping the team
//! stack, cancellation points.

use std::sync::atomic::{AtomicU64, Ordering};

use cachescope_schema::Event;
use libc::{c_long, c_uint, c_void};

use crate::pthread::{acquired, releasing};
use crate::real::real_fn;
use crate::stack;
use crate::thread::{self, Team};

type OutlinedFn = extern "C" fn(*mut c_void);

/// Synthetic objects live above the user address space, so they never collide with real ones.
const SYNTHETIC: u64 = 0xffff_8000_0000_0000;
/// The lock behind unnamed `critical` sections.
const CRITICAL_LOCK: u64 = SYNTHETIC | 0x1;
/// The lock behind `GOMP_atomic_start/end`.
const ATOMIC_LOCK: u64 = SYNTHETIC | 0x2;
/// The lock behind `ordered` sections (gcc's `GOMP_ordered_start/end`).
const ORDERED_LOCK: u64 = SYNTHETIC | 0x3;
/// Team barrier objects: `TEAM_BASE | team number`.
const TEAM_BASE: u64 = SYNTHETIC | 0x1_0000_0000;

static NEXT_TEAM: AtomicU64 = AtomicU64::new(0);

real_fn! {
    real_parallel: "GOMP_parallel" => unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_uint);
    real_parallel_loop: "GOMP_parallel_loop_static" =>
        unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint);
    real_parallel_loop_dynamic: "GOMP_parallel_loop_dynamic" =>
        unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint);
    real_parallel_loop_guided: "GOMP_parallel_loop_guided" =>
        unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint);
    real_parallel_loop_nm_dynamic: "GOMP_parallel_loop_nonmonotonic_dynamic" =>
        unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint);
    real_parallel_loop_nm_guided: "GOMP_parallel_loop_nonmonotonic_guided" =>
        unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_long, c_long, c_long, c_long, c_uint);
    real_parallel_loop_runtime: "GOMP_parallel_loop_runtime" =>
        unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_long, c_long, c_long, c_uint);
    real_parallel_loop_nm_runtime: "GOMP_parallel_loop_nonmonotonic_runtime" =>
        unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_long, c_long, c_long, c_uint);
    real_parallel_loop_mnm_runtime: "GOMP_parallel_loop_maybe_nonmonotonic_runtime" =>
        unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_long, c_long, c_long, c_uint);
    real_parallel_sections: "GOMP_parallel_sections" =>
        unsafe extern "C" fn(OutlinedFn, *mut c_void, c_uint, c_uint, c_uint);
    real_barrier: "GOMP_barrier" => unsafe extern "C" fn();
    real_barrier_cancel: "GOMP_barrier_cancel" => unsafe extern "C" fn() -> bool;
    real_loop_end: "GOMP_loop_end" => unsafe extern "C" fn();
    real_loop_end_cancel: "GOMP_loop_end_cancel" => unsafe extern "C" fn() -> bool;
    real_sections_end: "GOMP_sections_end" => unsafe extern "C" fn();
    real_sections_end_cancel: "GOMP_sections_end_cancel" => unsafe extern "C" fn() -> bool;
    real_critical_start: "GOMP_critical_start" => unsafe extern "C" fn();
    real_critical_end: "GOMP_critical_end" => unsafe extern "C" fn();
    real_critical_name_start: "GOMP_critical_name_start" => unsafe extern "C" fn(*mut *mut c_void);
    real_critical_name_end: "GOMP_critical_name_end" => unsafe extern "C" fn(*mut *mut c_void);
    real_atomic_start: "GOMP_atomic_start" => unsafe extern "C" fn();
    real_atomic_end: "GOMP_atomic_end" => unsafe extern "C" fn();
    real_set_lock: "omp_set_lock" => unsafe extern "C" fn(*mut c_void);
    real_unset_lock: "omp_unset_lock" => unsafe extern "C" fn(*mut c_void);
    real_test_lock: "omp_test_lock" => unsafe extern "C" fn(*mut c_void) -> i32;
    real_set_nest_lock: "omp_set_nest_lock" => unsafe extern "C" fn(*mut c_void);
    real_unset_nest_lock: "omp_unset_nest_lock" => unsafe extern "C" fn(*mut c_void);
    real_test_nest_lock: "omp_test_nest_lock" => unsafe extern "C" fn(*mut c_void) -> i32;
    real_ordered_start: "GOMP_ordered_start" => unsafe extern "C" fn();
    real_ordered_end: "GOMP_ordered_end" => unsafe extern "C" fn();
    real_num_threads: "omp_get_num_threads" => unsafe extern "C" fn() -> i32;
    real_get_cancellation: "omp_get_cancellation" => unsafe extern "C" fn() -> i32;
}

/// What the wrapped outlined function needs.
struct Region {
    f: OutlinedFn,
    data: *mut c_void,
    team: u64,
}

/// Runs in every member of the team.
extern "C" fn run_region(p: *mut c_void) {
    // SAFETY: `p` is the `Region` on the forking thread's stack, alive until the region (and
    // so every member's call of this function) has ended.
    let r = unsafe { &*p.cast::<Region>() };
    // SAFETY: libgomp is loaded (it called us).
    let size = unsafe { real_num_threads()() }.max(1) as u32;
    let region = r.f as usize as u64;
    let team = Team {
        barrier: TEAM_BASE | r.team,
        size,
    };
    // The member's implicit task, the parent of the explicit tasks it creates.
    let outer_task = thread::current()
        .map(|st| std::mem::replace(&mut st.task, crate::gomp_tasks::next_task_id()));
    if let Some(st) = thread::current() {
        // The team exists: threads the region's code creates are the program's.
        st.forking = false;
        st.quiet(|st| st.teams.push(team));
        st.push(Event::RegionBegin { region, team: size });
        st.push(Event::BarrierEnter {
            barrier: team.barrier,
            participants: size,
        });
        st.push(Event::BarrierLeave {
            barrier: team.barrier,
        });
    }
    (r.f)(r.data);
    // Explicit tasks still queued when a member's share of the region is done run in the
    // join barrier, which libgomp enters after this function returns: recorded after
    // `RegionEnd`, they would follow the region instead of running beside it (a task that a
    // waiting member takes over from the `single` that created it, or a `taskloop`'s
    // tasks). A real team barrier here runs them before the region's recorded join episode
    // ends; the join then finds no task left. One more barrier per region and member, while
    // recording only (about 1.6–2.9 µs per region with two threads, review 2026-11-29; a
    // region is wrapped only when its forking thread records, and then every member of the
    // team comes here, so the barrier is complete).
    // With cancellation enabled (`OMP_CANCELLATION=true`) there is none: a team that `cancel
    // parallel` cut short leaves libgomp's barrier count off by one, and a barrier of ours
    // would hang there or in the join (review, 2026-11-29); such a program's tasks left at
    // the region's end are recorded after it, as before.
    if !cancellation() {
        // SAFETY: as above.
        gomp_barrier(team.barrier, size, || unsafe { real_barrier()() });
    } else {
        gomp_barrier(team.barrier, size, || ());
    }
    if let Some(st) = thread::current() {
        st.push(Event::RegionEnd { region });
        st.quiet(|st| st.teams.pop());
        if let Some(outer) = outer_task {
            st.task = outer;
        }
    }
}

/// Whether the program runs with OpenMP cancellation enabled (`OMP_CANCELLATION=true`): the
/// shim then has no join barrier of its own, tasks still queued at a region's end run after
/// its recorded end, and explicit tasks are not ordered (`gomp_tasks.rs`).
pub(crate) fn cancellation() -> bool {
    // SAFETY: libgomp is loaded (the program called one of its functions, which called us).
    unsafe { real_get_cancellation()() != 0 }
}

/// The number of threads in the calling thread's current team (1 outside a region).
pub(crate) fn team_size() -> u32 {
    // SAFETY: libgomp is loaded (the program called one of its functions, which called us).
    u32::try_from(unsafe { real_num_threads()() })
        .unwrap_or(1)
        .max(1)
}

/// Runs `fork` with the outlined function wrapped, when recording.
fn fork(f: OutlinedFn, data: *mut c_void, fork: impl FnOnce(OutlinedFn, *mut c_void)) {
    let Some(st) = thread::current() else {
        return fork(f, data);
    };
    // The region's code may write the forking function's locals (shared variables).
    stack::record(st);
    st.forking = true;
    let mut region = Region {
        f,
        data,
        team: NEXT_TEAM.fetch_add(1, Ordering::Relaxed),
    };
    fork(run_region, (&mut region as *mut Region).cast());
    if let Some(st) = thread::current() {
        st.forking = false;
    }
}

/// What a libgomp barrier returns: whether the team was cancelled (`GOMP_barrier_cancel`
/// and the other `_cancel` forms), or nothing.
trait Cancelled {
    fn cancelled(&self) -> bool;
}

impl Cancelled for () {
    fn cancelled(&self) -> bool {
        false
    }
}

impl Cancelled for bool {
    fn cancelled(&self) -> bool {
        *self
    }
}

/// The innermost team's barrier around `wait`.
fn team_barrier<R: Cancelled>(wait: impl FnOnce() -> R) -> R {
    let team = thread::current().and_then(|st| st.teams.last().copied());
    match team {
        Some(t) => gomp_barrier(t.barrier, t.size, wait),
        None => wait(),
    }
}

/// A barrier episode of libgomp around `wait`, recorded once the wait is over: explicit tasks
/// the thread ran in the barrier come before its enter (for replay and the audit the same
/// as between its enter and leave: the barrier is left once every member is done), and the
/// thread is never marked as waiting ([`thread::ThreadState::in_barrier`]): libgomp waits on
/// futexes and takes no mutex of the program's, and what runs in its barriers is explicit
/// tasks, whose locks and heap calls are the program's. A barrier the team's cancellation
/// ended (`cancel parallel`: the members that cancelled never come) is not recorded (the
/// region's end, which every member reaches, uses a barrier that cannot be cancelled).
fn gomp_barrier<R: Cancelled>(obj: u64, participants: u32, wait: impl FnOnce() -> R) -> R {
    let r = wait();
    if !r.cancelled() {
        if let Some(st) = thread::current() {
            st.push(Event::BarrierEnter {
                barrier: obj,
                participants,
            });
            st.push(Event::BarrierLeave { barrier: obj });
        }
    }
    r
}

/// Interposed `GOMP_parallel`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_parallel(f: OutlinedFn, data: *mut c_void, n: c_uint, flags: c_uint) {
    // SAFETY: forwarding, with the outlined function wrapped (same signature).
    fork(f, data, |f, d| unsafe { real_parallel()(f, d, n, flags) })
}

macro_rules! parallel_loop {
    ($($name:ident => $real:ident;)*) => {$(
        #[doc = concat!("Interposed `", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            f: OutlinedFn, data: *mut c_void, n: c_uint,
            start: c_long, end: c_long, incr: c_long, chunk: c_long, flags: c_uint,
        ) {
            // SAFETY: forwarding, with the outlined function wrapped.
            fork(f, data, |f, d| unsafe { $real()(f, d, n, start, end, incr, chunk, flags) })
        }
    )*};
}

parallel_loop! {
    GOMP_parallel_loop_static => real_parallel_loop;
    GOMP_parallel_loop_dynamic => real_parallel_loop_dynamic;
    GOMP_parallel_loop_guided => real_parallel_loop_guided;
    GOMP_parallel_loop_nonmonotonic_dynamic => real_parallel_loop_nm_dynamic;
    GOMP_parallel_loop_nonmonotonic_guided => real_parallel_loop_nm_guided;
}

macro_rules! parallel_loop_runtime {
    ($($name:ident => $real:ident;)*) => {$(
        #[doc = concat!("Interposed `", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            f: OutlinedFn, data: *mut c_void, n: c_uint,
            start: c_long, end: c_long, incr: c_long, flags: c_uint,
        ) {
            // SAFETY: forwarding, with the outlined function wrapped.
            fork(f, data, |f, d| unsafe { $real()(f, d, n, start, end, incr, flags) })
        }
    )*};
}

parallel_loop_runtime! {
    GOMP_parallel_loop_runtime => real_parallel_loop_runtime;
    GOMP_parallel_loop_nonmonotonic_runtime => real_parallel_loop_nm_runtime;
    GOMP_parallel_loop_maybe_nonmonotonic_runtime => real_parallel_loop_mnm_runtime;
}

/// Interposed `GOMP_parallel_sections`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_parallel_sections(
    f: OutlinedFn,
    data: *mut c_void,
    n: c_uint,
    count: c_uint,
    flags: c_uint,
) {
    // SAFETY: forwarding, with the outlined function wrapped.
    fork(f, data, |f, d| unsafe {
        real_parallel_sections()(f, d, n, count, flags)
    })
}

macro_rules! barrier_fn {
    ($($name:ident => $real:ident -> $ret:ty;)*) => {$(
        #[doc = concat!("Interposed `", stringify!($name), "`: a team barrier.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name() -> $ret {
            // SAFETY: forwarding.
            team_barrier(|| unsafe { $real()() })
        }
    )*};
}

barrier_fn! {
    GOMP_barrier => real_barrier -> ();
    GOMP_barrier_cancel => real_barrier_cancel -> bool;
    GOMP_loop_end => real_loop_end -> ();
    GOMP_loop_end_cancel => real_loop_end_cancel -> bool;
    GOMP_sections_end => real_sections_end -> ();
    GOMP_sections_end_cancel => real_sections_end_cancel -> bool;
}

/// Interposed `GOMP_critical_start` (unnamed `critical`).
#[no_mangle]
pub unsafe extern "C" fn GOMP_critical_start() {
    // SAFETY: forwarding.
    unsafe { real_critical_start()() };
    acquired(CRITICAL_LOCK);
}

/// Interposed `GOMP_critical_end`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_critical_end() {
    releasing(CRITICAL_LOCK);
    // SAFETY: forwarding.
    unsafe { real_critical_end()() }
}

/// Interposed `GOMP_critical_name_start` (`critical(name)`; the lock is the name's slot).
#[no_mangle]
pub unsafe extern "C" fn GOMP_critical_name_start(p: *mut *mut c_void) {
    // SAFETY: forwarding.
    unsafe { real_critical_name_start()(p) };
    acquired(p as u64);
}

/// Interposed `GOMP_critical_name_end`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_critical_name_end(p: *mut *mut c_void) {
    releasing(p as u64);
    // SAFETY: forwarding.
    unsafe { real_critical_name_end()(p) }
}

/// Interposed `GOMP_atomic_start` (atomics the compiler could not make lock-free).
#[no_mangle]
pub unsafe extern "C" fn GOMP_atomic_start() {
    // SAFETY: forwarding.
    unsafe { real_atomic_start()() };
    acquired(ATOMIC_LOCK);
}

/// Interposed `GOMP_atomic_end`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_atomic_end() {
    releasing(ATOMIC_LOCK);
    // SAFETY: forwarding.
    unsafe { real_atomic_end()() }
}

/// Interposed `omp_set_lock`. This also catches libomp's function of the same name, so the
/// OMPT tool (`ompt.rs`) deliberately skips plain and test locks.
#[no_mangle]
pub unsafe extern "C" fn omp_set_lock(l: *mut c_void) {
    // SAFETY: forwarding.
    unsafe { real_set_lock()(l) };
    acquired(l as u64);
}

/// Interposed `omp_unset_lock`.
#[no_mangle]
pub unsafe extern "C" fn omp_unset_lock(l: *mut c_void) {
    releasing(l as u64);
    // SAFETY: forwarding.
    unsafe { real_unset_lock()(l) }
}

/// Interposed `omp_test_lock`.
#[no_mangle]
pub unsafe extern "C" fn omp_test_lock(l: *mut c_void) -> i32 {
    // SAFETY: forwarding.
    let got = unsafe { real_test_lock()(l) };
    if got != 0 {
        acquired(l as u64);
    }
    got
}

/// Changes the calling thread's nesting depth of nest lock `l` by `delta` (+1 or -1) and
/// returns the new depth, or `None` when the thread does not record.
fn nest_depth(l: u64, delta: i32) -> Option<u32> {
    let st = thread::current()?;
    Some(st.quiet(|st| {
        let held = &mut st.nest_locks;
        let i = match held.iter().position(|&(lock, _)| lock == l) {
            Some(i) => i,
            None => {
                held.push((l, 0));
                held.len() - 1
            }
        };
        let depth = held[i].1.saturating_add_signed(delta);
        if depth == 0 {
            held.swap_remove(i);
        } else {
            held[i].1 = depth;
        }
        depth
    }))
}

/// Interposed `omp_set_nest_lock` (either runtime's): the outermost acquisition is recorded.
#[no_mangle]
pub unsafe extern "C" fn omp_set_nest_lock(l: *mut c_void) {
    // SAFETY: forwarding.
    unsafe { real_set_nest_lock()(l) };
    if nest_depth(l as u64, 1) == Some(1) {
        acquired(l as u64);
    }
}

/// Interposed `omp_unset_nest_lock`: the release that frees the lock is recorded.
#[no_mangle]
pub unsafe extern "C" fn omp_unset_nest_lock(l: *mut c_void) {
    if nest_depth(l as u64, -1) == Some(0) {
        releasing(l as u64);
    }
    // SAFETY: forwarding.
    unsafe { real_unset_nest_lock()(l) }
}

/// Interposed `omp_test_nest_lock`: returns the new nesting depth, or 0 when another thread
/// holds the lock.
#[no_mangle]
pub unsafe extern "C" fn omp_test_nest_lock(l: *mut c_void) -> i32 {
    // SAFETY: forwarding.
    let depth = unsafe { real_test_nest_lock()(l) };
    if depth > 0 && nest_depth(l as u64, 1) == Some(1) {
        acquired(l as u64);
    }
    depth
}

/// Interposed `GOMP_ordered_start`: the thread's turn in an `ordered` section.
#[no_mangle]
pub unsafe extern "C" fn GOMP_ordered_start() {
    // SAFETY: forwarding.
    unsafe { real_ordered_start()() };
    acquired(ORDERED_LOCK);
}

/// Interposed `GOMP_ordered_end`.
#[no_mangle]
pub unsafe extern "C" fn GOMP_ordered_end() {
    releasing(ORDERED_LOCK);
    // SAFETY: forwarding.
    unsafe { real_ordered_end()() }
}
