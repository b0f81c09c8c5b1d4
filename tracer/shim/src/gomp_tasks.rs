//! libgomp's explicit tasks: the order `taskwait`, `taskgroup` and `depend` give them
//! (`task_order.rs`), recorded around the task's own function.
//!
//! `GOMP_task` is given a function of ours, [`run_task`], and an argument block that starts
//! with a [`TaskHeader`] (the program's function and copy function, the task's id, its
//! parent and its dependences) followed by the program's block at its alignment. libgomp
//! copies that block into the task (with `memcpy`, or with our copy function, which copies
//! the header and calls the program's on the rest) and later calls `run_task` with the copy,
//! which records the task's start, runs the program's function on the program's part and
//! records its completion. Each thread notes the task it runs (`ThreadState::task`), the
//! parent of the tasks it creates and the task a `taskwait` waits in. A task with a `detach`
//! event is passed through unchanged (unordered, as before).
//!
//! `GOMP_taskloop` (and `_ull`) creates its tasks inside libgomp, each with a copy of the
//! argument block whose first two words libgomp then sets to the task's share of the
//! iterations. Its block gets two words for those first, then the header and the program's
//! block; [`run_loop_task`] moves the two words into the program's block before it runs the
//! program's function. The taskloop's creation is one source that each of its tasks starts
//! after; each completes like a child of the encountering task, and the end of the
//! taskloop's implicit taskgroup (unless `nogroup`) waits for the children. A taskloop that
//! libgomp surely runs at once on the calling thread ([`undeferred`]) keeps its block. One with
//! a `reduction` (libgomp reads the program's block itself then) or a block aligned to more
//! than 64 bytes is passed through unchanged. With `OMP_CANCELLATION=true` no task is
//! ordered: the shim then has no join barrier of its own, tasks still queued at a region's
//! end run after its recorded end, and order points there would make the trace unreplayable.

use std::alloc::Layout;
use std::sync::atomic::{AtomicU64, Ordering};

use libc::{c_int, c_long, c_uint, c_ulong, c_void};

use crate::real::real_fn;
use crate::task_order::{self, Dependence};
use crate::thread;

type TaskFn = extern "C" fn(*mut c_void);
type CopyFn = extern "C" fn(*mut c_void, *mut c_void);

/// `GOMP_TASK_FLAG_DEPEND`: `depend` lists the task's dependences.
const FLAG_DEPEND: c_uint = 1 << 3;
/// `GOMP_TASK_FLAG_UP`: a taskloop counts up; `GOMP_TASK_FLAG_GRAINSIZE`: its `num_tasks`
/// argument is a grain size; `GOMP_TASK_FLAG_IF`: its `if` clause is true (or absent).
const FLAG_UP: c_uint = 1 << 8;
const FLAG_GRAINSIZE: c_uint = 1 << 9;
const FLAG_IF: c_uint = 1 << 10;
/// `GOMP_TASK_FLAG_NOGROUP`: a taskloop without its implicit taskgroup.
const FLAG_NOGROUP: c_uint = 1 << 11;
/// `GOMP_TASK_FLAG_REDUCTION`: a taskloop with a `reduction` (libgomp reads the program's
/// block).
const FLAG_REDUCTION: c_uint = 1 << 12;

/// `GOMP_taskloop`'s signature (`GOMP_taskloop_ull`'s, with `u64` bounds and step).
macro_rules! taskloop_fn {
    ($t:ty) => {
        unsafe extern "C" fn(TaskFn, *mut c_void, Option<CopyFn>, c_long, c_long, c_uint, c_ulong, c_int, $t, $t, $t)
    };
}

real_fn! {
    real_task: "GOMP_task" => unsafe extern "C" fn(
        TaskFn,
        *mut c_void,
        Option<CopyFn>,
        c_long,
        c_long,
        bool,
        c_uint,
        *mut *mut c_void,
        c_int,
        *mut c_void,
    );
    real_taskloop: "GOMP_taskloop" => taskloop_fn!(c_long);
    real_taskloop_ull: "GOMP_taskloop_ull" => taskloop_fn!(u64);
    real_taskwait: "GOMP_taskwait" => unsafe extern "C" fn();
    real_taskgroup_start: "GOMP_taskgroup_start" => unsafe extern "C" fn();
    real_taskgroup_end: "GOMP_taskgroup_end" => unsafe extern "C" fn();
}

static NEXT_TASK: AtomicU64 = AtomicU64::new(1);

/// A fresh task id (a region member's implicit task, or an explicit task).
pub(crate) fn next_task_id() -> u64 {
    NEXT_TASK.fetch_add(1, Ordering::Relaxed)
}

/// What [`run_task`] needs, at the start of the task's argument block.
#[repr(C)]
#[derive(Clone, Copy)]
struct TaskHeader {
    func: TaskFn,
    copy: Option<CopyFn>,
    /// The program's argument block, for its copy function.
    src: *mut c_void,
    /// Offset of the program's block from the header.
    payload: usize,
    id: u64,
    parent: u64,
    /// The taskgroup the task belongs to (0: none).
    group: u64,
    /// The dependences (a leaked `Box<[Dependence]>`, freed when the task has run).
    deps: *mut Dependence,
    ndeps: usize,
}

/// The dependences `GOMP_task` is given: `depend[0]` addresses in all, `depend[1]` of them
/// `out`/`inout`, from `depend[2]`; or, with `depend[0]` 0 (gcc's newer form), the counts in
/// `depend[1..5]` and the addresses from `depend[5]`, `depobj` entries last (pointers to the
/// object's address and kind).
///
/// # Safety
/// `depend` is the array libgomp receives with `GOMP_TASK_FLAG_DEPEND`.
unsafe fn dependences(depend: *mut *mut c_void) -> Vec<Dependence> {
    // SAFETY: the caller's array, in the format above (libgomp reads it the same way).
    unsafe {
        let word = |i: usize| *depend.add(i) as usize;
        let (n, first, plain) = match word(0) {
            0 => {
                let n = word(1);
                (n, 5, word(2) + word(3) + word(4))
            }
            n => (n, 2, n),
        };
        (0..n.min(1 << 16))
            .map(|k| {
                let entry = *depend.add(first + k);
                if k < plain || entry.is_null() {
                    entry as u64
                } else {
                    *entry.cast::<*mut c_void>() as u64
                }
            })
            .collect()
    }
}

/// Runs a task given to [`GOMP_task`]: `p` is its argument block, a [`TaskHeader`] and then
/// the program's block.
extern "C" fn run_task(p: *mut c_void) {
    // SAFETY: libgomp passes the block `GOMP_task` gave it (or its copy), which starts with
    // the header; it is aligned for it (`GOMP_task` asked for at least 8 bytes).
    let h = unsafe { std::ptr::read(p.cast::<TaskHeader>()) };
    // SAFETY: the program's block lies `payload` bytes into the task's block.
    let payload = unsafe { p.cast::<u8>().add(h.payload) }.cast::<c_void>();
    let deps: &[Dependence] = if h.deps.is_null() {
        &[]
    } else {
        // SAFETY: `deps`/`ndeps` are the leaked slice `GOMP_task` made, freed below only.
        unsafe { std::slice::from_raw_parts(h.deps, h.ndeps) }
    };
    let outer = thread::current().map(|st| enter_task(st, h.id, h.group));
    task_order::task_starts(h.id, deps);
    (h.func)(payload);
    task_order::task_completed(h.parent, h.group, deps);
    if let (Some(outer), Some(st)) = (outer, thread::current()) {
        (st.task, st.group) = outer;
    }
    if !h.deps.is_null() {
        // SAFETY: the slice leaked by `GOMP_task` for this task, which runs once.
        thread::quietly(|| {
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(h.deps, h.ndeps)) })
        });
    }
}

/// The thread runs task `task` of taskgroup `group` (the group of the tasks it creates, until
/// it opens one); returns the task and group it ran before.
fn enter_task(st: &mut thread::ThreadState, task: u64, group: u64) -> (u64, u64) {
    (
        std::mem::replace(&mut st.task, task),
        std::mem::replace(&mut st.group, group),
    )
}

/// The start of the argument blocks the shim gives libgomp: [`TaskHeader`] for `GOMP_task`,
/// [`LoopHeader`] for a taskloop.
trait BlockHeader: Copy {
    fn task(&self) -> &TaskHeader;
}

impl BlockHeader for TaskHeader {
    fn task(&self) -> &TaskHeader {
        self
    }
}

impl BlockHeader for LoopHeader {
    fn task(&self) -> &TaskHeader {
        &self.task
    }
}

/// The copy function given to libgomp when the program has one: copies the header `H` from
/// our block `src` to `dest` and the program's block with the program's function (libgomp
/// writes a taskloop task's bounds after it).
extern "C" fn copy_block<H: BlockHeader>(dest: *mut c_void, src: *mut c_void) {
    // SAFETY: `src` is a block `fill_block` made (an `H` first), `dest` the task's block of
    // the size and alignment it asked for.
    unsafe {
        let h = std::ptr::read(src.cast::<H>());
        std::ptr::write(dest.cast::<H>(), h);
        let t = h.task();
        if let Some(copy) = t.copy {
            copy(dest.cast::<u8>().add(t.payload).cast(), t.src);
        }
    }
}

/// Writes `header` at the start of `block` and, without a copy function (libgomp then copies
/// the whole block), the program's `size` bytes at `data` after it, at the header's
/// `payload`. Returns the copy function to give libgomp.
///
/// # Safety
/// `block` has room for `payload + size` bytes and is aligned for `H`; `data` is readable for
/// `size` bytes (or null with `size` 0).
unsafe fn fill_block<H: BlockHeader>(block: *mut u8, header: H, size: usize) -> Option<CopyFn> {
    let t = *header.task();
    // SAFETY: as the caller guarantees.
    unsafe {
        std::ptr::write(block.cast::<H>(), header);
        if t.copy.is_none() && size > 0 && !t.src.is_null() {
            std::ptr::copy_nonoverlapping(t.src.cast::<u8>(), block.add(t.payload), size);
        }
    }
    t.copy.map(|_| copy_block::<H> as CopyFn)
}

/// Interposed `GOMP_task` (gcc 11 and later: with `detach`).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn GOMP_task(
    func: TaskFn,
    data: *mut c_void,
    copy: Option<CopyFn>,
    arg_size: c_long,
    arg_align: c_long,
    if_clause: bool,
    flags: c_uint,
    depend: *mut *mut c_void,
    priority: c_int,
    detach: *mut c_void,
) {
    let forward = || {
        // SAFETY: the caller's arguments, unchanged.
        unsafe {
            real_task()(
                func, data, copy, arg_size, arg_align, if_clause, flags, depend, priority, detach,
            )
        }
    };
    let size = usize::try_from(arg_size).unwrap_or(usize::MAX);
    let Some((parent, group)) = thread::current().map(|st| (st.task, st.group)) else {
        return forward();
    };
    let align = usize::try_from(arg_align).unwrap_or(1).max(8);
    if !detach.is_null()
        || size > 1 << 30
        || align > 4096
        || !align.is_power_of_two()
        || crate::gomp::cancellation()
    {
        return forward();
    }
    let payload = std::mem::size_of::<TaskHeader>().next_multiple_of(align);
    let Ok(layout) = Layout::from_size_align(payload + size, align) else {
        return forward();
    };
    let deps = if flags & FLAG_DEPEND != 0 && !depend.is_null() {
        // SAFETY: libgomp's dependence array, as the flag says.
        thread::quietly(|| unsafe { dependences(depend) })
    } else {
        Vec::new()
    };
    // SAFETY: a non-zero size (the header at least).
    let block = thread::quietly(|| unsafe { std::alloc::alloc(layout) });
    if block.is_null() {
        return forward();
    }
    let ndeps = deps.len();
    let deps = if ndeps == 0 {
        std::ptr::null_mut()
    } else {
        thread::quietly(|| Box::into_raw(deps.into_boxed_slice())).cast::<Dependence>()
    };
    let id = next_task_id();
    let header = TaskHeader {
        func,
        copy,
        src: data,
        payload,
        id,
        parent,
        group,
        deps,
        ndeps,
    };
    // SAFETY: `block` was allocated with room for the header and `size` bytes after
    // `payload`, aligned for the header; `data` is the program's block of `size` bytes.
    let block_copy = unsafe { fill_block(block, header, size) };
    task_order::task_created(id);
    // SAFETY: our function and block in place of the program's, same flags and dependences;
    // the block outlives the call (libgomp copies it or runs the task before returning).
    unsafe {
        real_task()(
            run_task,
            block.cast(),
            block_copy,
            (payload + size) as c_long,
            align as c_long,
            if_clause,
            flags,
            depend,
            priority,
            detach,
        )
    };
    // SAFETY: allocated above with `layout`; libgomp no longer uses it.
    thread::quietly(|| unsafe { std::alloc::dealloc(block, layout) });
}

/// The start of a taskloop task's argument block: the two words libgomp sets to the task's
/// iterations (`start`, `end`), then the header ([`TaskHeader::payload`] counts from the
/// block's start).
#[repr(C)]
#[derive(Clone, Copy)]
struct LoopHeader {
    bounds: [u64; 2],
    task: TaskHeader,
}

/// Runs a taskloop task: `p` is its argument block, a [`LoopHeader`] and then the program's
/// block, which gets the task's iterations in its first two words.
extern "C" fn run_loop_task(p: *mut c_void) {
    // SAFETY: libgomp passes a copy of the block `taskloop` made (a loop header first, with
    // the bounds it wrote), aligned for it (at least 8 bytes were asked for).
    let h = unsafe { std::ptr::read(p.cast::<LoopHeader>()) };
    // SAFETY: the program's block lies `payload` bytes into the task's block and starts with
    // the two 8-byte words the program's function reads its iterations from.
    let payload = unsafe {
        let payload = p.cast::<u8>().add(h.task.payload);
        std::ptr::write(payload.cast::<[u64; 2]>(), h.bounds);
        payload.cast::<c_void>()
    };
    // Each task of the loop is a task of its own (the parent of what it creates).
    let outer = thread::current().map(|st| enter_task(st, next_task_id(), h.task.group));
    task_order::task_starts(h.task.id, &[]);
    (h.task.func)(payload);
    task_order::task_completed(h.task.parent, h.task.group, &[]);
    if let (Some(outer), Some(st)) = (outer, thread::current()) {
        (st.task, st.group) = outer;
    }
}

/// What `taskloop` runs in place of the program's function and block: our function, block,
/// copy function and block size, or nothing where the call passes through unchanged.
struct LoopBlock {
    block: *mut u8,
    layout: Layout,
    copy: Option<CopyFn>,
}

/// Makes the block for a taskloop of the calling task (see the module doc), records the
/// loop's creation; `None`: pass the call through.
fn loop_block(
    func: TaskFn,
    data: *mut c_void,
    copy: Option<CopyFn>,
    arg_size: c_long,
    arg_align: c_long,
    flags: c_uint,
) -> Option<LoopBlock> {
    let st = thread::current()?;
    let parent = st.task;
    let size = usize::try_from(arg_size).ok()?;
    let align = usize::try_from(arg_align).unwrap_or(1).max(8);
    // The program's block holds at least its two bound words; a reduction's is read by
    // libgomp itself. A larger alignment would cost each task that much more room, also on
    // the stack, where libgomp copies every undeferred task's block (a review's taskloop of
    // 600 tasks with an `alignas(4096)` firstprivate ran natively and overflowed the stack
    // recorded).
    if flags & FLAG_REDUCTION != 0 || !(16..=1 << 30).contains(&size) || align > 64 {
        return None;
    }
    if crate::gomp::cancellation() {
        return None;
    }
    if !align.is_power_of_two() || data.is_null() {
        return None;
    }
    let payload = std::mem::size_of::<LoopHeader>().next_multiple_of(align);
    let layout = Layout::from_size_align(payload + size, align).ok()?;
    // SAFETY: a non-zero size.
    let block = thread::quietly(|| unsafe { std::alloc::alloc(layout) });
    if block.is_null() {
        return None;
    }
    let id = next_task_id();
    // The loop's tasks belong to its implicit taskgroup, or to the creator's group.
    let group = if flags & FLAG_NOGROUP == 0 {
        task_order::group_opened(st)
    } else {
        st.group
    };
    let header = LoopHeader {
        bounds: [0; 2],
        task: TaskHeader {
            func,
            copy,
            src: data,
            payload,
            id,
            parent,
            group,
            deps: std::ptr::null_mut(),
            ndeps: 0,
        },
    };
    // SAFETY: as in `GOMP_task` (`data` is not null, checked above).
    let copy = unsafe { fill_block(block, header, size) };
    task_order::task_created(id);
    Some(LoopBlock {
        block,
        layout,
        copy,
    })
}

/// After the real taskloop returned: frees the block; the code after a taskloop with its
/// implicit taskgroup follows the loop's tasks and their descendants.
fn loop_done(b: LoopBlock, flags: c_uint) {
    // SAFETY: allocated by `loop_block` with `layout`; libgomp copied it into every task (or
    // ran them) before returning.
    thread::quietly(|| unsafe { std::alloc::dealloc(b.block, b.layout) });
    if flags & FLAG_NOGROUP == 0 {
        if let Some(st) = thread::current() {
            task_order::group_ended(st);
        }
    }
}

/// A taskloop's iteration count, as libgomp computes it (bounds and step as 128-bit values;
/// 0 for a zero step).
fn iterations(start: i128, end: i128, step: i128, up: bool) -> u64 {
    let n = match (up, step) {
        (_, 0) => 0,
        (true, _) if start < end => (end - start + step - 1) / step,
        (false, _) if start > end => (start - end - step - 1) / -step,
        _ => 0,
    };
    u64::try_from(n).unwrap_or(0)
}

/// Whether libgomp surely runs a taskloop's tasks at once, one after the other, on the calling
/// thread: with `if(0)`, or with more tasks than 64 per member of the team (libgomp's limit
/// on queued tasks). Its tasks then need no order of their own (the calling thread's is
/// theirs), and wrapping them would only cost room: with a copy function libgomp copies every
/// such task's block onto the stack (a review's `grainsize(1)` loop of 25,000 tasks ran
/// natively and overflowed the stack recorded).
fn undeferred(flags: c_uint, num_tasks: u64, iterations: u64) -> bool {
    if flags & FLAG_IF == 0 {
        return true;
    }
    let tasks = if flags & FLAG_GRAINSIZE != 0 {
        iterations / num_tasks.max(1)
    } else {
        num_tasks.min(iterations)
    };
    tasks > 64 * u64::from(crate::gomp::team_size())
}

/// Runs an undeferred taskloop (see [`undeferred`]) as the program called it; the code after
/// it (unless `nogroup`) follows what its tasks created, as after any taskloop.
fn undeferred_loop(flags: c_uint, run: impl FnOnce()) {
    let grouped = flags & FLAG_NOGROUP == 0;
    if let Some(st) = thread::current().filter(|_| grouped) {
        task_order::group_opened(st);
    }
    run();
    if let Some(st) = thread::current().filter(|_| grouped) {
        task_order::group_ended(st);
    }
}

macro_rules! taskloop_entry {
    ($name:ident, $real:ident, $t:ty) => {
        #[doc = concat!("Interposed `", stringify!($name), "` (see the module doc).")]
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            func: TaskFn,
            data: *mut c_void,
            copy: Option<CopyFn>,
            arg_size: c_long,
            arg_align: c_long,
            flags: c_uint,
            num_tasks: c_ulong,
            priority: c_int,
            start: $t,
            end: $t,
            step: $t,
        ) {
            let forward = || {
                // SAFETY: the caller's arguments, unchanged.
                unsafe {
                    $real()(
                        func, data, copy, arg_size, arg_align, flags, num_tasks, priority, start,
                        end, step,
                    )
                }
            };
            // The step is signed for either type (libgomp's `_ull` loops count down with a
            // negative step in an unsigned word).
            let n = iterations(
                start as i128,
                end as i128,
                i128::from(step as i64),
                flags & FLAG_UP != 0,
            );
            if thread::current().is_some() && undeferred(flags, num_tasks as u64, n) {
                return undeferred_loop(flags, forward);
            }
            let Some(b) = loop_block(func, data, copy, arg_size, arg_align, flags) else {
                return forward();
            };
            // SAFETY: our function, block and copy function in place of the program's (the
            // block's size and alignment from its layout), the rest unchanged; the block
            // outlives the call.
            unsafe {
                $real()(
                    run_loop_task,
                    b.block.cast(),
                    b.copy,
                    b.layout.size() as c_long,
                    b.layout.align() as c_long,
                    flags,
                    num_tasks,
                    priority,
                    start,
                    end,
                    step,
                )
            };
            loop_done(b, flags);
        }
    };
}

taskloop_entry!(GOMP_taskloop, real_taskloop, c_long);
taskloop_entry!(GOMP_taskloop_ull, real_taskloop_ull, u64);

/// Interposed `GOMP_taskwait`: the code after it follows the task's children.
#[no_mangle]
pub unsafe extern "C" fn GOMP_taskwait() {
    // SAFETY: forwarding.
    unsafe { real_taskwait()() };
    if let Some(task) = thread::current().map(|st| st.task) {
        task_order::children_waited(task);
    }
}

/// Interposed `GOMP_taskgroup_start`: the tasks created from now on belong to the group.
#[no_mangle]
pub unsafe extern "C" fn GOMP_taskgroup_start() {
    // SAFETY: forwarding.
    unsafe { real_taskgroup_start()() };
    if let Some(st) = thread::current() {
        task_order::group_opened(st);
    }
}

/// Interposed `GOMP_taskgroup_end`: the code after it follows the task's children and the
/// group's tasks with their descendants.
#[no_mangle]
pub unsafe extern "C" fn GOMP_taskgroup_end() {
    // SAFETY: forwarding.
    unsafe { real_taskgroup_end()() };
    if let Some(st) = thread::current() {
        task_order::group_ended(st);
    }
}
