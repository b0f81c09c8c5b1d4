//! Threads' stack frames, rebuilt from a trace's `StackFrame` events in the order the analysis
//! replays them: which function's frame holds a stack address that several threads access
//! (a local array of `main` whose elements a parallel region's threads write).
//!
//! A recorder writes a thread's frames where it hands its stack to other threads (before a
//! parallel region or a thread creation), innermost first, and only when they changed. A
//! frame stays valid while that function runs, which covers the region or the thread it was
//! recorded for. Memory of frames recorded earlier and since returned from may be named by the
//! old frame until the thread records again; only memory several threads access is named at
//! all, and a thread passes its stack to others through a region or a creation, which records.

use std::collections::BTreeMap;

use cachescope_schema::event::MAX_STACK_FRAMES;
use cachescope_schema::{CodePos, ThreadId};

/// A recorded frame holding a looked-up address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct StackSlot {
    /// The thread whose stack it is.
    pub thread: ThreadId,
    /// The call site in the function that owns the frame (a code position).
    pub site: CodePos,
    /// The frame's lowest address (the stack pointer at the call).
    pub sp: u64,
    /// One past its highest address (the canonical frame address).
    pub cfa: u64,
    /// The looked-up address.
    pub addr: u64,
}

/// One frame: call site, `[sp, cfa)`.
type Frame = (CodePos, u64, u64);

/// Each live thread's latest recorded frames.
#[derive(Debug, Default, Clone)]
pub struct StackMap {
    /// Per thread: when its set was recorded (a count of sets) and the set.
    frames: BTreeMap<ThreadId, (u64, Vec<Frame>)>,
    /// Sets of threads that ended during the current segment, kept until it ends: the
    /// segment's memory is named then, and a thread that started others on its stack and
    /// joined them may well have ended by that time.
    ended: Vec<(ThreadId, (u64, Vec<Frame>))>,
    /// Sets recorded so far.
    sets: u64,
}

impl StackMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a `StackFrame` event of `thread`. `first` says that the thread's previous event
    /// was not one: the frames it recorded before are replaced. Frames beyond
    /// [`MAX_STACK_FRAMES`] per set and empty ones (`cfa <= sp`) are dropped.
    pub fn on_frame(&mut self, thread: ThreadId, site: CodePos, sp: u64, cfa: u64, first: bool) {
        let (when, frames) = self.frames.entry(thread).or_default();
        if first {
            frames.clear();
            self.sets += 1;
            *when = self.sets;
        }
        if cfa > sp && frames.len() < MAX_STACK_FRAMES {
            frames.push((site, sp, cfa));
        }
    }

    /// Forgets the frames of `thread`, which ended, once the current segment ends (see
    /// [`end_segment`](Self::end_segment)): its stack may be given to a thread created later
    /// (glibc reuses the stacks of exited threads), whose memory they must not name.
    pub fn forget(&mut self, thread: ThreadId) {
        if let Some(set) = self.frames.remove(&thread) {
            self.ended.push((thread, set));
        }
    }

    /// Ends a segment: its memory is named, the frames of threads that ended in it go.
    pub fn end_segment(&mut self) {
        self.ended.clear();
    }

    /// The recorded frame holding `addr`, of any thread. Stacks of live threads are disjoint;
    /// should frames of two threads still overlap (an exit the trace lacks), the most recently
    /// recorded set wins.
    pub fn lookup(&self, addr: u64) -> Option<StackSlot> {
        let ended = self.ended.iter().map(|(t, set)| (t, set));
        self.frames
            .iter()
            .chain(ended)
            .filter_map(|(&thread, (when, frames))| {
                frames
                    .iter()
                    .find(|&&(_, sp, cfa)| sp <= addr && addr < cfa)
                    .map(|&(site, sp, cfa)| {
                        let slot = StackSlot {
                            thread,
                            site,
                            sp,
                            cfa,
                            addr,
                        };
                        (*when, slot)
                    })
            })
            .max_by_key(|&(when, _)| when)
            .map(|(_, slot)| slot)
    }

    /// Number of frames held over all threads.
    pub fn len(&self) -> usize {
        self.frames.values().map(|(_, f)| f.len()).sum()
    }

    /// Whether no frame is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(x: u64) -> CodePos {
        CodePos::new(x).expect("not 0")
    }

    #[test]
    fn a_new_set_replaces_the_threads_frames_and_lookups_find_the_holding_frame() {
        let mut m = StackMap::new();
        m.on_frame(0, pos(0x10), 0x1000, 0x1040, true);
        m.on_frame(0, pos(0x20), 0x1040, 0x1100, false);
        m.on_frame(1, pos(0x30), 0x9000, 0x9080, true);
        assert_eq!(m.len(), 3);
        let s = m.lookup(0x1050).expect("in the second frame");
        assert_eq!(
            (s.thread, s.site, s.sp, s.cfa),
            (0, pos(0x20), 0x1040, 0x1100)
        );
        assert_eq!(m.lookup(0x1040).map(|s| s.site), Some(pos(0x20)));
        assert_eq!(m.lookup(0x103f).map(|s| s.site), Some(pos(0x10)));
        assert_eq!(m.lookup(0x1100), None);
        assert_eq!(m.lookup(0x9000).map(|s| s.thread), Some(1));
        // A new set of thread 0 drops its old frames, not thread 1's.
        m.on_frame(0, pos(0x40), 0x2000, 0x2010, true);
        assert_eq!(m.lookup(0x1050), None);
        assert_eq!(m.lookup(0x2008).map(|s| s.site), Some(pos(0x40)));
        assert_eq!(m.lookup(0x9000).map(|s| s.thread), Some(1));
        // Overlapping sets of two threads: the later one names the memory; a thread that
        // ended names nothing.
        m.on_frame(2, pos(0x50), 0x1ff0, 0x2020, true);
        assert_eq!(m.lookup(0x2008).map(|s| s.thread), Some(2));
        // A thread that ended names its memory until the segment ends.
        m.forget(2);
        assert_eq!(m.lookup(0x2008).map(|s| s.thread), Some(2));
        m.end_segment();
        assert_eq!(m.lookup(0x2008).map(|s| s.thread), Some(0));
        assert_eq!(m.lookup(0x1ff0), None);
    }

    #[test]
    fn empty_inverted_and_excess_frames_are_dropped() {
        let mut m = StackMap::new();
        m.on_frame(0, pos(1), 0x100, 0x100, true);
        m.on_frame(0, pos(2), 0x200, 0x100, false);
        assert!(m.is_empty());
        for i in 0..MAX_STACK_FRAMES as u64 + 3 {
            m.on_frame(0, pos(3 + i), 0x1000 + i * 16, 0x1010 + i * 16, false);
        }
        assert_eq!(m.len(), MAX_STACK_FRAMES);
    }
}
