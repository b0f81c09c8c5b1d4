//! The order OpenMP gives explicit tasks, as source and sink points of order objects
//! ([`pthread::order_source`], [`pthread::order_sink`]; both runtimes, `gomp_tasks.rs` and
//! `ompt.rs`):
//!
//! * a task's creation is a source of the task's own object and its start a sink of it: the
//!   task follows the code that created it;
//! * a task's completion is a source of its parent's *children* object, and a `taskwait` or
//!   the end of a `taskgroup` a sink of the waiting task's, after the wait: the code after the
//!   wait follows every child that completed before it (all of them, for a `taskwait`; a
//!   `taskgroup`'s grandchildren are not covered);
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

use crate::pthread::{order_sink, order_source};

/// Object kinds, above any address or task id (below the schema's order bits).
const TASK: u64 = 1 << 59;
const CHILDREN: u64 = 1 << 58;
const DEPENDENCE: u64 = TASK | CHILDREN;
/// The bits of an address or id kept.
const ID: u64 = CHILDREN - 1;

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

/// A task of `parent` with dependences `deps` completed.
pub(crate) fn task_completed(parent: u64, deps: &[Dependence]) {
    for &d in deps {
        order_source((d & ID) | DEPENDENCE);
    }
    order_source((parent & ID) | CHILDREN);
}

/// Task `task` waited for its children (`taskwait`, the end of a `taskgroup`).
pub(crate) fn children_waited(task: u64) {
    order_sink((task & ID) | CHILDREN);
}
