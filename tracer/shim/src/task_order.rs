//! The order OpenMP gives explicit tasks, as source and sink points of order objects
//! ([`pthread::order_source`], [`pthread::order_sink`]; both runtimes, `gomp_tasks.rs` and
//! `ompt.rs`):
//!
//! * a task's creation is a source of the task's own object and its start a sink of it: the
//!   task follows the code that created it;
//! * a task's completion is a source of its parent's *children* object, and a `taskwait` or
//!   the end of a `taskgroup` a sink of the waiting task's, after the wait: the code after the
//!   wait follows every child that completed before it (all of them, for a `taskwait`);
//! * a task's completion is also a source of the innermost `taskgroup` it belongs to (the
//!   one open where it was created, or its creator's), and the end of that taskgroup a sink
//!   of it: the code after a taskgroup follows the descendants of its tasks too (nested
//!   groups are ended before their outer ones, so one group per task is enough);
//! * a task's completion is a source, and its start a sink, of the object of each of its
//!   dependences: a successor, which starts after its predecessors completed, follows them
//!   (an `in` after an `out`, an `out` after an `in`; an `in` also follows the `in` tasks of
//!   the variable that completed before it started, which the program does not require).
//!
//! Sources do not order each other (siblings that completed one after the other in this run
//! could overlap in another), so tasks the program leaves unordered stay concurrent. Until
//! 2026-11-29 none of this was recorded, and tasks chained by `taskwait` or `depend` but run
//! by different threads counted as concurrent (a review's `depend` chain and `taskgroup` pair
//! were flagged).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::pthread::{order_sink, order_source};
use crate::thread::ThreadState;

/// Object kinds, above any address or task id (below the schema's order bits).
const TASK: u64 = 1 << 59;
const CHILDREN: u64 = 1 << 58;
const DEPENDENCE: u64 = TASK | CHILDREN;
const GROUP: u64 = 1 << 57;
/// The bits of an address or id kept.
const ID: u64 = GROUP - 1;

/// Taskgroup ids (0 is "none").
static NEXT_GROUP: AtomicU64 = AtomicU64::new(1);

/// A task's dependence: the variable's address.
pub(crate) type Dependence = u64;

/// The creating thread made task `task` (before the task can start).
pub(crate) fn task_created(task: u64) {
    order_source((task & ID) | TASK);
}

/// Task `task` with dependences `deps` starts.
pub(crate) fn task_starts(task: u64, deps: &[Dependence]) {
    order_sink((task & ID) | TASK);
    for &d in deps {
        order_sink((d & ID) | DEPENDENCE);
    }
}

/// A task of `parent` in taskgroup `group` (0: none) with dependences `deps` completed.
pub(crate) fn task_completed(parent: u64, group: u64, deps: &[Dependence]) {
    for &d in deps {
        order_source((d & ID) | DEPENDENCE);
    }
    order_source((parent & ID) | CHILDREN);
    if group != 0 {
        order_source((group & ID) | GROUP);
    }
}

/// The thread's running task opens a taskgroup: the tasks it creates from now on belong to
/// it. Returns the group.
pub(crate) fn group_opened(st: &mut ThreadState) -> u64 {
    let group = NEXT_GROUP.fetch_add(1, Ordering::Relaxed);
    let outer = std::mem::replace(&mut st.group, group);
    st.quiet(|st| st.outer_groups.push(outer));
    group
}

/// The thread's innermost open taskgroup ended (after its wait): the code after it follows
/// the running task's children and the group's tasks with their descendants.
pub(crate) fn group_ended(st: &mut ThreadState) {
    children_waited(st.task);
    let Some(outer) = st.outer_groups.pop() else {
        return;
    };
    let group = std::mem::replace(&mut st.group, outer);
    order_sink((group & ID) | GROUP);
}

/// Task `task` waited for its children (`taskwait`, the end of a `taskgroup`).
pub(crate) fn children_waited(task: u64) {
    order_sink((task & ID) | CHILDREN);
}
