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
//! event, and tasks of `taskloop`, are passed through unchanged (unordered, as before).

use std::alloc::Layout;
use std::sync::atomic::{AtomicU64, Ordering};

use libc::{c_int, c_long, c_uint, c_void};

use crate::real::real_fn;
use crate::task_order::{self, Dependence};
use crate::thread;

type TaskFn = extern "C" fn(*mut c_void);
type CopyFn = extern "C" fn(*mut c_void, *mut c_void);

/// `GOMP_TASK_FLAG_DEPEND`: `depend` lists the task's dependences.
const FLAG_DEPEND: c_uint = 1 << 3;

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
    real_taskwait: "GOMP_taskwait" => unsafe extern "C" fn();
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
    let outer = thread::current().map(|st| std::mem::replace(&mut st.task, h.id));
    task_order::task_starts(h.id, deps);
    (h.func)(payload);
    task_order::task_completed(h.parent, deps);
    if let (Some(outer), Some(st)) = (outer, thread::current()) {
        st.task = outer;
    }
    if !h.deps.is_null() {
        // SAFETY: the slice leaked by `GOMP_task` for this task, which runs once.
        thread::quietly(|| {
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(h.deps, h.ndeps)) })
        });
    }
}

/// The copy function given to libgomp when the program has one: copies the header from our
/// block `src` to `dest` and the program's block with the program's function.
extern "C" fn copy_task(dest: *mut c_void, src: *mut c_void) {
    // SAFETY: `src` is the block `GOMP_task` made (a header first), `dest` the task's block
    // of the size and alignment it asked for.
    unsafe {
        let h = std::ptr::read(src.cast::<TaskHeader>());
        std::ptr::write(dest.cast::<TaskHeader>(), h);
        if let Some(copy) = h.copy {
            copy(dest.cast::<u8>().add(h.payload).cast(), h.src);
        }
    }
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
    let Some(parent) = thread::current().map(|st| st.task) else {
        return forward();
    };
    let align = usize::try_from(arg_align).unwrap_or(1).max(8);
    if !detach.is_null() || size > 1 << 30 || align > 4096 || !align.is_power_of_two() {
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
        deps,
        ndeps,
    };
    // SAFETY: `block` has room for the header and `size` bytes after `payload`; without a
    // copy function libgomp copies the whole block, so the program's block goes in too.
    unsafe {
        std::ptr::write(block.cast::<TaskHeader>(), header);
        if copy.is_none() && size > 0 && !data.is_null() {
            std::ptr::copy_nonoverlapping(data.cast::<u8>(), block.add(payload), size);
        }
    }
    task_order::task_created(id);
    // SAFETY: our function and block in place of the program's, same flags and dependences;
    // the block outlives the call (libgomp copies it or runs the task before returning).
    unsafe {
        real_task()(
            run_task,
            block.cast(),
            copy.map(|_| copy_task as CopyFn),
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

/// Interposed `GOMP_taskwait`: the code after it follows the task's children.
#[no_mangle]
pub unsafe extern "C" fn GOMP_taskwait() {
    // SAFETY: forwarding.
    unsafe { real_taskwait()() };
    if let Some(task) = thread::current().map(|st| st.task) {
        task_order::children_waited(task);
    }
}

/// Interposed `GOMP_taskgroup_end`: the code after it follows the task's children.
#[no_mangle]
pub unsafe extern "C" fn GOMP_taskgroup_end() {
    // SAFETY: forwarding.
    unsafe { real_taskgroup_end()() };
    if let Some(task) = thread::current().map(|st| st.task) {
        task_order::children_waited(task);
    }
}
