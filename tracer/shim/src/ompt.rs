//! OpenMP with LLVM's libomp (clang `-fopenmp`): an OMPT tool that records parallel regions,
//! team barriers, critical sections, atomics and `ordered`.
//!
//! libomp looks for `ompt_start_tool` when it initializes; the shim defines it, so every
//! instrumented program that uses libomp loads this tool (only while recording). The events
//! have the structure [`crate::gomp`] gives gcc programs, so replay treats both alike:
//!
//! * every team member, at its implicit task's start: `RegionBegin`, then an episode of the
//!   team barrier (members start no earlier than the fork); the team goes onto `st.teams`;
//! * at the implicit barrier that ends the region (the join): an episode of the team barrier,
//!   `RegionEnd`, and the team leaves `st.teams`. The enter is recorded when the join
//!   barrier begins; explicit tasks the thread runs in it (one a waiting member takes over
//!   from a `single`, a `taskloop`'s) are recorded inside the episode, beside the other
//!   members' work, as in the program. libomp reports the end of a worker's join barrier
//!   and implicit task only when the worker is woken for the next region (and the last
//!   region's never), so the leave and `RegionEnd` are recorded at the first sign that the
//!   thread is out ([`finish_join`]): that late end, the next region's implicit task, or
//!   the primary thread's `parallel_end`; after the last region a worker's join stays open
//!   in the trace (it arrived and ended: replay and the audit take it so), and task
//!   switches publish its accesses. Until
//!   2026-11-29 the whole episode was recorded at the join's begin, which put such tasks
//!   after the region. Serialized regions (a team of one) have no join barrier: their
//!   implicit task's end records it instead;
//! * explicit barriers, the barriers that end worksharing constructs and reduction barriers:
//!   an episode of the innermost team's barrier;
//! * `critical`, lock-based `atomic` and `ordered`: lock acquire/release on the runtime's
//!   wait id. OpenMP locks, plain and nest, are left to [`crate::gomp`]'s `omp_*_lock`
//!   interposers (they catch libomp's too); recording them here as well would double them.
//!
//! The join barrier and the end-of-worksharing barrier have the same kind in libomp 14
//! (`barrier_implicit`); the join is the one whose return address is null (workers) or the
//! fork's (the primary thread), see [`classify_barrier`]. Newer runtimes report
//! `barrier_implicit_parallel` / `barrier_implicit_workshare`, which need no guessing.
//!
//! Per-task state lives in the task's `ompt_data_t` (the runtime keeps it with the task and
//! copies it for the late end callbacks); the team instance travels from `parallel_begin` to
//! the members in the region's `ompt_data_t`.
//!
//! The order explicit tasks' dependences, `taskwait` and `taskgroup` give is recorded as
//! order points (`task_order.rs`: task create, dependences, schedule and sync region
//! callbacks). Not modelled (documented): `teams` leagues,
//! cancellation.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use cachescope_schema::Event;
use libc::{c_char, c_int, c_uint, c_void};

use crate::pthread::{acquired, releasing};
use crate::recorder::lock;
use crate::stack;
use crate::task_order::{self, Dependence};
use crate::thread::{self, Team};

/// Synthetic objects live above the user address space (as in [`crate::gomp`]).
const SYNTHETIC: u64 = 0xffff_8000_0000_0000;
/// Team barrier objects of libomp teams: `TEAM_BASE | team number`. Disjoint from the gomp
/// module's range (`SYNTHETIC | 1 << 32 | n`).
const TEAM_BASE: u64 = SYNTHETIC | (1 << 44);

static NEXT_TEAM: AtomicU64 = AtomicU64::new(0);

// ---- The C interface (omp-tools.h, OpenMP 5.x), only what the tool uses. ----

/// `ompt_data_t`: a union of `uint64_t` and `void *`; the tool only uses it as `uint64_t`.
#[repr(C)]
pub struct OmptData {
    value: u64,
}

const _: () = assert!(std::mem::size_of::<*const c_void>() == std::mem::size_of::<u64>());

/// `ompt_function_lookup_t`.
type LookupFn = unsafe extern "C" fn(*const c_char) -> *const c_void;
/// `ompt_initialize_t`.
type InitializeFn = unsafe extern "C" fn(LookupFn, c_int, *mut OmptData) -> c_int;
/// `ompt_finalize_t`.
type FinalizeFn = unsafe extern "C" fn(*mut OmptData);
/// `ompt_set_callback_t` (the callback is a function pointer, passed like a data pointer).
type SetCallbackFn = unsafe extern "C" fn(c_int, *const c_void) -> c_int;

/// `ompt_start_tool_result_t`.
#[repr(C)]
pub struct StartToolResult {
    initialize: InitializeFn,
    finalize: FinalizeFn,
    tool_data: OmptData,
}

// ompt_callbacks_t
const CB_PARALLEL_BEGIN: c_int = 3;
const CB_PARALLEL_END: c_int = 4;
const CB_TASK_CREATE: c_int = 5;
const CB_TASK_SCHEDULE: c_int = 6;
const CB_IMPLICIT_TASK: c_int = 7;
const CB_MUTEX_RELEASED: c_int = 17;
const CB_DEPENDENCES: c_int = 18;
const CB_SYNC_REGION: c_int = 23;
const CB_MUTEX_ACQUIRED: c_int = 27;

// ompt_set_result_t: the event will never be reported / registration failed.
const SET_ERROR: c_int = 0;
const SET_NEVER: c_int = 1;

// ompt_scope_endpoint_t
const SCOPE_BEGIN: c_int = 1;
const SCOPE_END: c_int = 2;

// ompt_sync_region_t
const SYNC_BARRIER: c_int = 1;
const SYNC_BARRIER_IMPLICIT: c_int = 2;
const SYNC_BARRIER_EXPLICIT: c_int = 3;
const SYNC_BARRIER_IMPLEMENTATION: c_int = 4;
const SYNC_TASKWAIT: c_int = 5;
const SYNC_TASKGROUP: c_int = 6;
const SYNC_BARRIER_IMPLICIT_WORKSHARE: c_int = 8;
const SYNC_BARRIER_IMPLICIT_PARALLEL: c_int = 9;

// ompt_mutex_t (1–4: plain and nest locks, test or not; left to the interposers)
const MUTEX_CRITICAL: c_int = 5;
const MUTEX_ATOMIC: c_int = 6;
const MUTEX_ORDERED: c_int = 7;

// ompt_task_status_t: the prior task ended.
const TASK_COMPLETE: c_int = 1;
const TASK_CANCEL: c_int = 3;

// ompt_dependence_type_t: doacross `source`/`sink` are no task dependences.
const DEPENDENCE_SOURCE: c_int = 5;
const DEPENDENCE_SINK: c_int = 6;

// ompt_task_flag_t / ompt_parallel_flag_t
const TASK_INITIAL: c_int = 0x1;
const TASK_EXPLICIT: c_int = 0x4;
const PARALLEL_LEAGUE: c_int = 0x4000_0000;

// ---- Decisions (pure, unit-tested). ----

/// What a barrier-like sync region means for the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BarrierRole {
    /// The implicit barrier that ends the parallel region: region end.
    Join,
    /// A barrier of the whole innermost team inside the region.
    Team,
    /// Not a team barrier (taskwait, taskgroup, teams, unknown).
    Ignore,
}

/// Classifies a sync region of kind `kind` reported at `codeptr` inside the implicit task of
/// the region forked at `region` (its `parallel_begin` return address).
fn classify_barrier(kind: c_int, codeptr: u64, region: u64) -> BarrierRole {
    match kind {
        SYNC_BARRIER_IMPLICIT_PARALLEL => BarrierRole::Join,
        // libomp before OpenMP 5.1 kinds: the join barrier is reported with no return address
        // on workers and the fork's on the primary thread; the barrier ending a worksharing
        // construct has the construct's return address in the outlined function.
        SYNC_BARRIER_IMPLICIT if codeptr == 0 || codeptr == region => BarrierRole::Join,
        SYNC_BARRIER_IMPLICIT
        | SYNC_BARRIER
        | SYNC_BARRIER_EXPLICIT
        | SYNC_BARRIER_IMPLEMENTATION
        | SYNC_BARRIER_IMPLICIT_WORKSHARE => BarrierRole::Team,
        _ => BarrierRole::Ignore,
    }
}

/// Whether mutexes of `kind` are recorded here (OpenMP locks are interposed by symbol).
fn records_mutex(kind: c_int) -> bool {
    matches!(kind, MUTEX_CRITICAL | MUTEX_ATOMIC | MUTEX_ORDERED)
}

/// Per implicit task state, kept in its `ompt_data_t`: the region's id and flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TaskState(u64);

impl TaskState {
    /// The task's region was recorded: its team is on the thread's team stack.
    const RECORDED: u64 = 1 << 63;
    /// The region's end was recorded (at the join barrier's begin).
    const ENDED: u64 = 1 << 62;
    /// A team barrier episode was entered and not yet left.
    const OPEN: u64 = 1 << 61;
    const REGION: u64 = (1 << 56) - 1;

    fn recorded(region: u64) -> Self {
        TaskState(Self::RECORDED | (region & Self::REGION))
    }
    fn region(self) -> u64 {
        self.0 & Self::REGION
    }
    fn has(self, flag: u64) -> bool {
        self.0 & flag != 0
    }
    fn with(self, flag: u64) -> Self {
        TaskState(self.0 | flag)
    }
    fn without(self, flag: u64) -> Self {
        TaskState(self.0 & !flag)
    }
    /// Inside a recorded region whose end has not been recorded yet.
    fn live(self) -> bool {
        self.has(Self::RECORDED) && !self.has(Self::ENDED)
    }
}

/// A region instance, from `parallel_begin` (boxed into the region's `ompt_data_t`) to
/// `parallel_end`.
struct Parallel {
    /// Team number (barrier object `TEAM_BASE | team`).
    team: u64,
    /// Region id: the fork's return address.
    region: u64,
}

// ---- Tool start. ----

struct ResultCell(UnsafeCell<StartToolResult>);

// SAFETY: the result is written by no one after construction (the runtime reads it, and
// passes `tool_data` to our `initialize`, which ignores it); the cell only gives the runtime
// the mutable pointer the C interface asks for.
unsafe impl Sync for ResultCell {}

static RESULT: ResultCell = ResultCell(UnsafeCell::new(StartToolResult {
    initialize,
    finalize,
    tool_data: OmptData { value: 0 },
}));

/// Called by libomp when it initializes: activates the tool while recording.
#[no_mangle]
pub extern "C" fn ompt_start_tool(
    _omp_version: c_uint,
    _runtime_version: *const c_char,
) -> *mut StartToolResult {
    if crate::recorder::enabled() {
        RESULT.0.get()
    } else {
        std::ptr::null_mut()
    }
}

unsafe extern "C" fn initialize(
    lookup: LookupFn,
    _initial_device: c_int,
    _tool_data: *mut OmptData,
) -> c_int {
    // SAFETY: `lookup` is the runtime's lookup function; the name is NUL-terminated.
    let f = unsafe { lookup(c"ompt_set_callback".as_ptr()) };
    if f.is_null() {
        return 0;
    }
    // SAFETY: the runtime's `ompt_set_callback` has the C signature `SetCallbackFn`
    // (function and data pointers have the same representation on supported targets).
    let set: SetCallbackFn = unsafe { std::mem::transmute::<*const c_void, SetCallbackFn>(f) };
    let callbacks: [(c_int, *const c_void); 8] = [
        (CB_PARALLEL_BEGIN, on_parallel_begin as *const c_void),
        (CB_PARALLEL_END, on_parallel_end as *const c_void),
        (CB_TASK_CREATE, on_task_create as *const c_void),
        (CB_TASK_SCHEDULE, on_task_schedule as *const c_void),
        (CB_IMPLICIT_TASK, on_implicit_task as *const c_void),
        (CB_SYNC_REGION, on_sync_region as *const c_void),
        (CB_MUTEX_ACQUIRED, on_mutex_acquired as *const c_void),
        (CB_MUTEX_RELEASED, on_mutex_released as *const c_void),
    ];
    let mut ok = true;
    for (event, cb) in callbacks {
        // SAFETY: each callback has the signature omp-tools.h gives for `event`.
        let r = unsafe { set(event, cb) };
        ok &= r != SET_ERROR && r != SET_NEVER;
    }
    // Without it, tasks' dependences order nothing (as before 2026-11-29): no warning.
    // SAFETY: `on_dependences` has the signature omp-tools.h gives for the event.
    unsafe { set(CB_DEPENDENCES, on_dependences as *const c_void) };
    if !ok {
        let msg = b"cachescope: libomp refused an OMPT callback; OpenMP synchronization may be \
                    recorded incompletely\n";
        // SAFETY: writing a static buffer to stderr.
        unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    }
    // Nonzero keeps the tool active.
    1
}

unsafe extern "C" fn finalize(_tool_data: *mut OmptData) {}

// ---- Callbacks. ----

/// `ompt_callback_parallel_begin`: numbers the team instance (on the encountering thread).
unsafe extern "C" fn on_parallel_begin(
    _encountering_task_data: *mut OmptData,
    _encountering_task_frame: *const c_void,
    parallel_data: *mut OmptData,
    _requested_parallelism: c_uint,
    flags: c_int,
    codeptr_ra: *const c_void,
) {
    // SAFETY: a non-null `parallel_data` is the region's data, ours until `parallel_end`.
    let Some(pd) = (unsafe { parallel_data.as_mut() }) else {
        return;
    };
    pd.value = 0;
    if flags & PARALLEL_LEAGUE != 0 {
        return;
    }
    let Some(st) = thread::current() else { return };
    // (No `finish_join` here: a task run in a join barrier may fork a region of its own.)
    // The region's code may write the encountering function's locals (shared variables).
    stack::record(st);
    st.forking = true;
    let par = Parallel {
        team: NEXT_TEAM.fetch_add(1, Ordering::Relaxed),
        region: codeptr_ra as u64,
    };
    pd.value = st.quiet(|_| Box::into_raw(Box::new(par))) as u64;
}

/// `ompt_callback_parallel_end`: frees the team instance (every member has read it: they all
/// began their implicit tasks before the join barrier let the primary thread here).
unsafe extern "C" fn on_parallel_end(
    parallel_data: *mut OmptData,
    _encountering_task_data: *mut OmptData,
    _flags: c_int,
    _codeptr_ra: *const c_void,
) {
    // Should no implicit task have begun on this thread, the fork ends here at the latest.
    if let Some(st) = thread::current() {
        st.forking = false;
    }
    // SAFETY: as in `on_parallel_begin`.
    let Some(pd) = (unsafe { parallel_data.as_mut() }) else {
        return;
    };
    let p = std::mem::replace(&mut pd.value, 0) as *mut Parallel;
    // SAFETY: as in `on_implicit_task`: 0 or this region's `Parallel`, freed only below.
    if let (Some(par), Some(st)) = (unsafe { p.as_ref() }, thread::current()) {
        // The primary thread has left this region's join barrier, should its end not have
        // been reported (only this region's: a task run in an outer join may have forked it).
        if st
            .open_join()
            .is_some_and(|(b, _)| b == TEAM_BASE | par.team)
        {
            finish_join(st);
        }
    }
    if !p.is_null() {
        // SAFETY: `p` was boxed by `on_parallel_begin` for this region and is freed only here.
        thread::quietly(|| drop(unsafe { Box::from_raw(p) }));
    }
}

/// `ompt_callback_implicit_task`: region begin (and the end of serialized regions).
unsafe extern "C" fn on_implicit_task(
    endpoint: c_int,
    parallel_data: *mut OmptData,
    task_data: *mut OmptData,
    actual_parallelism: c_uint,
    _index: c_uint,
    flags: c_int,
) {
    // SAFETY: a non-null `task_data` is the implicit task's data, used by this thread only.
    let Some(td) = (unsafe { task_data.as_mut() }) else {
        return;
    };
    // The task the thread runs, the parent of the explicit tasks it creates (the runtime
    // reports a creator's data at `task_create` at another address than at a `taskgroup`'s
    // end: the shim keeps its own notion, `ThreadState::task`).
    if endpoint == SCOPE_BEGIN {
        if let Some(st) = thread::current() {
            st.task = task_data as u64;
        }
    }
    if flags & TASK_INITIAL != 0 {
        // The initial thread's (or a league's) initial task: no region.
        if endpoint == SCOPE_BEGIN {
            td.value = 0;
        }
        return;
    }
    match endpoint {
        SCOPE_BEGIN => {
            td.value = 0;
            // SAFETY: a non-null `parallel_data` is the region's data, alive during the region.
            let p = unsafe { parallel_data.as_ref() }.map_or(0, |pd| pd.value) as *const Parallel;
            // SAFETY: the value is 0 or the `Parallel` boxed by `on_parallel_begin`, alive until
            // `parallel_end`, which the primary thread reaches only after this member joined.
            let par = unsafe { p.as_ref() };
            // A worker learns that it left the previous region's join barrier only now. (Not
            // a thread forking a region of its own: a task it runs in a join may fork one.)
            if let Some(st) = thread::current() {
                if !st.forking {
                    finish_join(st);
                }
            }
            let (Some(par), Some(st)) = (par, thread::current()) else {
                return;
            };
            // The team exists: threads the region's code creates are the program's.
            st.forking = false;
            let size = actual_parallelism.max(1);
            let team = Team {
                barrier: TEAM_BASE | par.team,
                size,
            };
            st.quiet(|st| st.teams.push(team));
            st.push(Event::RegionBegin {
                region: par.region,
                team: size,
            });
            st.push(Event::BarrierEnter {
                barrier: team.barrier,
                participants: size,
            });
            st.push(Event::BarrierLeave {
                barrier: team.barrier,
            });
            td.value = TaskState::recorded(par.region).0;
        }
        SCOPE_END => {
            let s = TaskState(td.value);
            if s.live() {
                // A serialized region: no join barrier, nothing runs in it. (A region with
                // one was left at its join's end, or will be: a worker's implicit task ends
                // late, after a task in the join may have forked a region of its own.)
                enter_join(s);
                if let Some(st) = thread::current() {
                    finish_join(st);
                }
            }
            td.value = 0;
        }
        _ => {}
    }
}

/// Enters the region's closing barrier episode (the join). Its leave and the region's end
/// are recorded by [`finish_join`] once the thread is seen out of it: explicit tasks the
/// thread runs meanwhile (taken over from a `single` or another member) belong to the region
/// and run beside the other members' work, as they do in the program.
fn enter_join(s: TaskState) {
    let Some(st) = thread::current() else { return };
    let Some(team) = st.teams.last().copied() else {
        return;
    };
    st.push(Event::BarrierEnter {
        barrier: team.barrier,
        participants: team.size,
    });
    st.enter_join(team.barrier, s.region());
}

/// Leaves the join barrier the thread entered (if it did): the barrier's leave, the
/// region's end, and the team off the team stack. libomp reports a worker's leave only when
/// it wakes it for the next region (and never after the last region, whose join then stays
/// open); the primary thread's when it leaves.
fn finish_join(st: &mut thread::ThreadState) {
    let Some((barrier, region)) = st.close_join() else {
        return;
    };
    st.push(Event::BarrierLeave { barrier });
    st.push(Event::RegionEnd { region });
    st.quiet(|st| st.teams.pop());
}

/// The `ompt_data_t` value of an explicit task (implicit tasks hold a [`TaskState`], never
/// this value).
const EXPLICIT_TASK: u64 = 1;

/// An explicit task's parent and dependences, for its order points ([`task_order`]).
#[derive(Debug, Default)]
struct TaskOrder {
    /// The parent's id (`ThreadState::task` of the creating thread).
    parent: u64,
    /// The task its executing thread ran before it (restored when it completes).
    outer: u64,
    /// The taskgroup it belongs to (the creator's innermost, `task_order.rs`; 0: none), and
    /// the executing thread's group before it started (restored when it completes).
    group: u64,
    outer_group: u64,
    deps: Vec<Dependence>,
    /// Its start was recorded (a task suspended and resumed starts once).
    started: bool,
}

/// Explicit tasks created and not completed, by their `ompt_data_t` address.
static TASKS: Mutex<Option<HashMap<u64, TaskOrder>>> = Mutex::new(None);

/// `ompt_callback_task_create`: marks explicit tasks, for [`on_task_schedule`], and notes
/// their parent.
unsafe extern "C" fn on_task_create(
    _encountering_task_data: *mut OmptData,
    _encountering_task_frame: *const c_void,
    new_task_data: *mut OmptData,
    flags: c_int,
    _has_dependences: c_int,
    _codeptr_ra: *const c_void,
) {
    // SAFETY: a non-null `new_task_data` is the new task's data, ours to set.
    let Some(td) = (unsafe { new_task_data.as_mut() }) else {
        return;
    };
    let explicit = flags & TASK_EXPLICIT != 0;
    td.value = if explicit { EXPLICIT_TASK } else { 0 };
    let creator = thread::current().map(|st| (st.task, st.group));
    if let (true, Some((parent, group))) = (explicit, creator) {
        let task = new_task_data as u64;
        thread::quietly(|| {
            let mut g = lock(&TASKS);
            let t = g.get_or_insert_with(HashMap::new).entry(task).or_default();
            t.parent = parent;
            t.group = group;
        });
        task_order::task_created(task);
    }
}

/// `ompt_dependence_t`.
#[repr(C)]
struct OmptDependence {
    variable: OmptData,
    dependence_type: c_int,
}

/// `ompt_callback_dependences`: a new task's dependences (after its creation).
unsafe extern "C" fn on_dependences(
    task_data: *mut OmptData,
    deps: *const OmptDependence,
    ndeps: c_int,
) {
    let n = usize::try_from(ndeps).unwrap_or(0);
    if deps.is_null() || n == 0 || thread::current().is_none() {
        return;
    }
    // SAFETY: the runtime passes `ndeps` dependences at `deps`, valid during the call.
    let deps = unsafe { std::slice::from_raw_parts(deps, n) };
    let task = task_data as u64;
    thread::quietly(|| {
        let mut g = lock(&TASKS);
        let entry = g.get_or_insert_with(HashMap::new).entry(task).or_default();
        entry.deps.extend(
            deps.iter()
                .filter(|d| !matches!(d.dependence_type, DEPENDENCE_SOURCE | DEPENDENCE_SINK))
                .map(|d| d.variable.value),
        );
    });
}

/// `ompt_callback_task_schedule`: a task switch. The thread runs an explicit task from now
/// on, or not: in a barrier, an explicit task's mutexes and heap calls are the program's
/// ([`thread::ThreadState::in_task`]). And a thread that ran a task in a join barrier
/// records nothing until it is woken for the next region, if ever: its accesses are
/// published here, or a program's end would lose them.
unsafe extern "C" fn on_task_schedule(
    prior_task_data: *mut OmptData,
    prior_task_status: c_int,
    next_task_data: *mut OmptData,
) {
    if thread::current().is_none() {
        return;
    }
    // An explicit task that completed: its order points, recorded while it still counts as
    // running (in a barrier too, `ThreadState::waiting`).
    // SAFETY: a non-null `prior_task_data` is the prior task's data, read only.
    let prior = unsafe { prior_task_data.as_ref() }.map_or(0, |d| d.value);
    if prior == EXPLICIT_TASK && matches!(prior_task_status, TASK_COMPLETE | TASK_CANCEL) {
        let key = prior_task_data as u64;
        let done = thread::quietly(|| lock(&TASKS).as_mut()?.remove(&key));
        if let Some(t) = done {
            task_order::task_completed(t.parent, t.group, &t.deps);
            if let Some(st) = thread::current() {
                st.task = t.outer;
                st.group = t.outer_group;
            }
            thread::quietly(|| drop(t));
        }
    }
    // SAFETY: a non-null `next_task_data` is the next task's data, read only.
    let next = unsafe { next_task_data.as_ref() }.map_or(0, |d| d.value);
    if let Some(st) = thread::current() {
        st.in_task = next == EXPLICIT_TASK;
        st.publish();
    }
    if next == EXPLICIT_TASK {
        let key = next_task_data as u64;
        let (outer, outer_group) = thread::current().map_or((0, 0), |st| {
            (std::mem::replace(&mut st.task, key), st.group)
        });
        let started = thread::quietly(|| {
            let mut g = lock(&TASKS);
            let t = g.as_mut()?.get_mut(&key)?;
            let first = !std::mem::replace(&mut t.started, true);
            first.then(|| {
                t.outer = outer;
                t.outer_group = outer_group;
                (t.group, t.deps.clone())
            })
        });
        // A task resumed after a switch keeps the group it is in (one it opened, maybe).
        if let Some((group, deps)) = started {
            if let Some(st) = thread::current() {
                st.group = group;
            }
            task_order::task_starts(key, &deps);
            thread::quietly(|| drop(deps));
        }
    }
}

/// `ompt_callback_sync_region`: team barriers and the join barrier; the end of a `taskwait`
/// or `taskgroup` ([`task_order`]).
unsafe extern "C" fn on_sync_region(
    kind: c_int,
    endpoint: c_int,
    _parallel_data: *mut OmptData,
    task_data: *mut OmptData,
    codeptr_ra: *const c_void,
) {
    // The end of a `taskwait` or `taskgroup`: the task follows its children (and a
    // taskgroup's tasks with their descendants: its begin opens the group).
    if matches!(kind, SYNC_TASKWAIT | SYNC_TASKGROUP) {
        if let Some(st) = thread::current() {
            match (kind, endpoint) {
                (SYNC_TASKGROUP, SCOPE_BEGIN) => {
                    task_order::group_opened(st);
                }
                (SYNC_TASKGROUP, SCOPE_END) => task_order::group_ended(st),
                (_, SCOPE_END) => task_order::children_waited(st.task),
                _ => {}
            }
        }
        return;
    }
    // SAFETY: a non-null `task_data` is the current task's data, used by this thread only.
    let Some(td) = (unsafe { task_data.as_mut() }) else {
        return;
    };
    let s = TaskState(td.value);
    if !s.live() {
        // The end of the join barrier: reported late for workers (see `finish_join`).
        if s.has(TaskState::RECORDED)
            && endpoint == SCOPE_END
            && classify_barrier(kind, codeptr_ra as u64 & TaskState::REGION, s.region())
                == BarrierRole::Join
        {
            if let Some(st) = thread::current() {
                finish_join(st);
            }
        }
        // Outside recorded regions (serial code, explicit tasks) or after the join began.
        return;
    }
    match (
        classify_barrier(kind, codeptr_ra as u64 & TaskState::REGION, s.region()),
        endpoint,
    ) {
        (BarrierRole::Join, SCOPE_BEGIN) => {
            td.value = s.with(TaskState::ENDED).0;
            enter_join(s);
        }
        (BarrierRole::Team, SCOPE_BEGIN) => {
            let Some(st) = thread::current() else { return };
            let Some(team) = st.teams.last().copied() else {
                return;
            };
            st.push(Event::BarrierEnter {
                barrier: team.barrier,
                participants: team.size,
            });
            td.value = s.with(TaskState::OPEN).0;
        }
        (_, SCOPE_END) if s.has(TaskState::OPEN) => {
            td.value = s.without(TaskState::OPEN).0;
            let Some(st) = thread::current() else { return };
            if let Some(team) = st.teams.last().copied() {
                st.push(Event::BarrierLeave {
                    barrier: team.barrier,
                });
            }
        }
        _ => {}
    }
}

/// `ompt_callback_mutex_acquired`.
unsafe extern "C" fn on_mutex_acquired(kind: c_int, wait_id: u64, _codeptr_ra: *const c_void) {
    if records_mutex(kind) {
        acquired(wait_id);
    }
}

/// `ompt_callback_mutex_released` (libomp reports it just after the release; the release
/// event's place in this thread's stream is the same, and replay orders acquisitions by their
/// recorded numbers).
unsafe extern "C" fn on_mutex_released(kind: c_int, wait_id: u64, _codeptr_ra: *const c_void) {
    if records_mutex(kind) {
        releasing(wait_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORK: u64 = 0x5555_0000_163f;
    const LOOP_END: u64 = 0x5555_0000_1754;

    #[test]
    fn join_barrier_is_recognized() {
        // libomp 14: kind barrier_implicit; workers have no return address, the primary
        // thread the fork's.
        assert_eq!(
            classify_barrier(SYNC_BARRIER_IMPLICIT, 0, FORK),
            BarrierRole::Join
        );
        assert_eq!(
            classify_barrier(SYNC_BARRIER_IMPLICIT, FORK, FORK),
            BarrierRole::Join
        );
        // OpenMP 5.1 runtimes say so.
        for ra in [0, FORK, LOOP_END] {
            assert_eq!(
                classify_barrier(SYNC_BARRIER_IMPLICIT_PARALLEL, ra, FORK),
                BarrierRole::Join
            );
        }
    }

    #[test]
    fn team_barriers_are_recognized() {
        for kind in [
            SYNC_BARRIER_IMPLICIT,
            SYNC_BARRIER_EXPLICIT,
            SYNC_BARRIER_IMPLEMENTATION,
            SYNC_BARRIER_IMPLICIT_WORKSHARE,
        ] {
            assert_eq!(
                classify_barrier(kind, LOOP_END, FORK),
                BarrierRole::Team,
                "{kind}"
            );
        }
        // Only barrier_implicit is ambiguous: the others never end the region, whatever the
        // return address.
        for kind in [
            SYNC_BARRIER,
            SYNC_BARRIER_EXPLICIT,
            SYNC_BARRIER_IMPLEMENTATION,
            SYNC_BARRIER_IMPLICIT_WORKSHARE,
        ] {
            assert_eq!(classify_barrier(kind, 0, FORK), BarrierRole::Team, "{kind}");
            assert_eq!(
                classify_barrier(kind, FORK, FORK),
                BarrierRole::Team,
                "{kind}"
            );
        }
    }

    #[test]
    fn other_sync_regions_are_ignored() {
        // taskwait, taskgroup, reduction, teams, unknown
        for kind in [5, 6, 7, 10, 0, 99] {
            assert_eq!(
                classify_barrier(kind, LOOP_END, FORK),
                BarrierRole::Ignore,
                "{kind}"
            );
            assert_eq!(classify_barrier(kind, 0, FORK), BarrierRole::Ignore);
        }
    }

    #[test]
    fn openmp_locks_are_left_to_the_interposers() {
        assert!(!records_mutex(1)); // ompt_mutex_lock
        assert!(!records_mutex(2)); // ompt_mutex_test_lock
        assert!(!records_mutex(3)); // ompt_mutex_nest_lock
        assert!(!records_mutex(4)); // ompt_mutex_test_nest_lock
        for kind in [MUTEX_CRITICAL, MUTEX_ATOMIC, MUTEX_ORDERED] {
            assert!(records_mutex(kind), "{kind}");
        }
        assert!(!records_mutex(0));
        assert!(!records_mutex(8));
    }

    #[test]
    fn task_state_round_trips() {
        let s = TaskState::recorded(FORK);
        assert!(s.live());
        assert_eq!(s.region(), FORK);
        let open = s.with(TaskState::OPEN);
        assert!(open.has(TaskState::OPEN) && open.live());
        assert_eq!(open.region(), FORK);
        assert_eq!(open.without(TaskState::OPEN), s);
        let ended = s.with(TaskState::ENDED);
        assert!(!ended.live());
        assert_eq!(ended.region(), FORK);
        // Never-recorded tasks (value 0, as the runtime initializes them) are not live.
        assert!(!TaskState(0).live());
        // A region id of 0 (no return address) still makes a recorded state.
        assert!(TaskState::recorded(0).live());
    }
}
