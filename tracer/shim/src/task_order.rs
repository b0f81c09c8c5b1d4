//! The order OpenMP gives explicit tasks, as points in the order of synthetic objects
//! ([`pthread::order_point`]; both runtimes, `gomp_tasks.rs` and `ompt.rs`):
//!
//! * a task's creation, its start and its completion are points of its parent's *children*
//!   object, and a `taskwait` or the end of a `taskgroup` is one of the waiting task's, after
//!   the wait: a task follows the code that created it, and the code after the wait follows
//!   every child that completed before it (all of them, for a `taskwait`; a `taskgroup`'s
//!   grandchildren are not covered);
//! * a task with dependences is a point of each dependence's object when it starts and when
//!   it completes: a successor, which starts after its predecessors completed, follows them
//!   (whatever the dependence types: an `in` after an `out`, or an `out` after an `in`).
//!
//! Points of one object follow each other in the recorded order, so a few more pairs are
//! ordered than the program orders (two `in` tasks of one variable, the second started
//! after the first completed), never fewer. Until 2026-11-29 none of this was recorded, and
//! tasks chained by `taskwait` or `depend` but run by different threads counted as
//! concurrent (a review's `depend` chain and `taskgroup` pair were flagged).

use crate::pthread::order_point;

/// Children objects: a task's id (an address below 2⁴⁸, or a counter) with this bit.
const CHILDREN: u64 = 1 << 63;
/// Dependence objects: the variable's address with this bit (apart from a lock there).
const DEPENDENCE: u64 = 1 << 62;

/// A task's dependence: the variable's address.
pub(crate) type Dependence = u64;

/// The object of task `parent`'s children.
fn children(parent: u64) -> u64 {
    (parent & !(CHILDREN | DEPENDENCE)) | CHILDREN
}

/// The object of the dependences on `addr`.
fn dependence(addr: Dependence) -> u64 {
    (addr & !(CHILDREN | DEPENDENCE)) | DEPENDENCE
}

/// Task `parent` created a task (on the creating thread, before the task can start).
pub(crate) fn task_created(parent: u64) {
    order_point(children(parent));
}

/// A task of `parent` with dependences `deps` starts.
pub(crate) fn task_starts(parent: u64, deps: &[Dependence]) {
    order_point(children(parent));
    for &d in deps {
        order_point(dependence(d));
    }
}

/// A task of `parent` with dependences `deps` completed.
pub(crate) fn task_completed(parent: u64, deps: &[Dependence]) {
    for &d in deps {
        order_point(dependence(d));
    }
    order_point(children(parent));
}

/// Task `task` waited for its children (`taskwait`, the end of a `taskgroup`).
pub(crate) fn children_waited(task: u64) {
    order_point(children(task));
}
