//! What one core does in a quantum, found by its worker before the quantum runs: which lines
//! its events touch (see the module docs of
//! `parallel` for how the driver decides from these whether the cores may run apart).

use rustc_hash::FxHashMap;

use cachescope_schema::{AccessKind, Event, TimedEvent};

use super::core::for_each_line;
use super::weave::Weave;
use super::Geometry;
use crate::fib_hash::fib_index;
#[cfg(test)]
use crate::thread_index::ThreadIndex;

/// Entries of the filter of recently recorded lines.
const FILTER: usize = 64;

/// Lines all cores' footprints of a quantum may hold together (about 48 MB): beyond that a
/// quantum runs in lockstep, which needs no footprint. A quantum is a span of time, and where
/// time hardly moves (an import whose clock advances only with instruction records, a
/// recorded `memset` of a gigabyte) one quantum can touch any number of lines; without a cap
/// the footprints of 40 accesses of 16 MiB took 1.9 GB.
pub(crate) const FOOTPRINT_LINES: usize = 1 << 20;

/// Line visits (a line of an access, counted again on every access) a footprint allows per
/// line it may hold. The bound phase's requests and the weave's log grow with the visits
/// that miss, not with the distinct lines: a thousand accesses of 1 MiB each in one quantum
/// are 16 M visits of 16,384 lines.
const VISITS_PER_LINE: usize = 4;

/// One core's footprint in a quantum.
///
/// What other host threads read (the line list) is written in order;
/// the line map is filled, and mostly read, by the thread that scans. A footprint
/// is written by one host thread and read by another every quantum, and on a host whose two
/// cores are far apart a hash table filled in random order cost twice the scan itself
/// (docs/parallel-engine.md, "Where the slow state's time goes").
pub(crate) struct Footprint {
    /// Lines the core's accesses touch, each once, and whether the core writes them (made
    /// from `lines` by [`Self::finish`]).
    pub list: Vec<(u64, bool)>,
    /// Lines the core's accesses touch → whether the core writes them.
    lines: FxHashMap<u64, bool>,
    /// A line interacts with another core through the directory as it was before the
    /// quantum (set by [`Self::check_directory`]).
    pub dir_conflict: bool,
    /// A direct-mapped filter of lines already recorded (line + 1, 0 when empty; and whether
    /// a write was recorded): a core's accesses mostly revisit a few lines, and the filter
    /// spares their hash lookups.
    recent: [(u64, bool); FILTER],
    /// Lines this footprint may hold before it gives up (see [`FOOTPRINT_LINES`]).
    limit: usize,
    /// Lines of the core's accesses in the quantum so far, each access's counted anew.
    visits: usize,
    /// The core touches more than `limit` lines in the quantum, or visits more than
    /// [`VISITS_PER_LINE`] times as many: the footprint is incomplete (`list` is empty) and
    /// the quantum must run in lockstep.
    pub overflow: bool,
}

impl Default for Footprint {
    fn default() -> Self {
        Footprint {
            list: Vec::new(),
            lines: FxHashMap::default(),
            dir_conflict: false,
            recent: [(0, false); FILTER],
            limit: usize::MAX,
            visits: 0,
            overflow: false,
        }
    }
}

impl Footprint {
    /// An empty footprint that overflows beyond `limit` lines.
    pub fn with_limit(limit: usize) -> Self {
        Footprint {
            limit,
            ..Footprint::default()
        }
    }

    /// Replaces the footprint with that of core `core` in `events` (one quantum).
    #[cfg(test)]
    pub fn scan(
        &mut self,
        core: usize,
        events: &[TimedEvent],
        table: &ThreadIndex,
        geo: &Geometry,
    ) {
        self.clear();
        for e in events {
            if table.get(e.thread) == Some(core) {
                self.add(e, geo);
            }
        }
        self.finish();
    }

    /// Empties the footprint, for the next quantum.
    pub fn clear(&mut self) {
        self.list.clear();
        self.lines.clear();
        self.dir_conflict = false;
        self.recent = [(0, false); FILTER];
        self.visits = 0;
        self.overflow = false;
    }

    /// Sets `dir_conflict`: whether core `core`'s footprint (complete) interacts with another
    /// core through the directory of `weave` (see [`Weave::interferes`]).
    pub fn check_directory(&mut self, core: usize, weave: &Weave) {
        self.dir_conflict = self
            .list
            .iter()
            .any(|&(line, write)| weave.interferes(line, core, write));
    }

    /// Whether the core's accesses touch `line` in the quantum.
    pub fn touches(&self, line: u64) -> bool {
        self.lines.contains_key(&line)
    }

    /// Ends the scan of a quantum: lists the lines, for the threads that read them next.
    pub fn finish(&mut self) {
        self.list.clear();
        if self.overflow {
            // Give the memory back: the quantum runs in lockstep, and the next one is most
            // likely small.
            self.lines = FxHashMap::default();
            self.list.shrink_to_fit();
        } else {
            self.list.extend(self.lines.iter().map(|(&l, &w)| (l, w)));
        }
    }

    /// Adds the core's event `e`.
    #[inline]
    pub fn add(&mut self, e: &TimedEvent, geo: &Geometry) {
        let Event::Access(a) = e.event else { return };
        if a.kind == AccessKind::Fetch || self.overflow {
            return;
        }
        let write = a.kind.writes();
        let (lines, recent, limit) = (&mut self.lines, &mut self.recent, self.limit);
        let max_visits = limit.saturating_mul(VISITS_PER_LINE);
        let visits = &mut self.visits;
        let mut overflow = false;
        for_each_line(&a, geo.shift, geo.line_size, |line, _, _| {
            *visits += 1;
            if overflow || *visits > max_visits {
                overflow = true;
                return;
            }
            let slot = &mut recent[fib_index(line, FILTER.trailing_zeros())];
            if slot.0 == line.wrapping_add(1) && (slot.1 || !write) {
                return;
            }
            if lines.len() >= limit && !lines.contains_key(&line) {
                overflow = true;
                return;
            }
            let w = lines.entry(line).or_insert(false);
            *w |= write;
            *slot = (line.wrapping_add(1), *w);
        });
        self.overflow = overflow;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachescope_schema::Access;

    fn geo() -> Geometry {
        Geometry {
            p: 1,
            n: 2,
            shift: 6,
            line_size: 64,
            paths: 4,
            access_cost: 1,
            inclusion: Vec::new(),
            inclusive_shared: false,
        }
    }

    fn access(thread: u32, addr: u64, size: u32, kind: AccessKind) -> TimedEvent {
        TimedEvent {
            time: 0,
            thread,
            event: Event::Access(Access {
                addr,
                size,
                kind,
                pc: None,
            }),
        }
    }

    #[test]
    fn events_and_lines_of_one_core() {
        let mut core_of = FxHashMap::default();
        core_of.insert(1, 0);
        core_of.insert(2, 1);
        core_of.insert(4, 0);
        let table = ThreadIndex::new(core_of.iter().map(|(&t, &c)| (t, c)));
        let events = [
            access(1, 0, 8, AccessKind::Load),
            access(2, 64, 8, AccessKind::Store),
            access(1, 8, 8, AccessKind::Store),
            access(4, 124, 8, AccessKind::Load), // straddles lines 1 and 2
            access(4, 130, 8, AccessKind::Fetch),
            access(3, 0, 8, AccessKind::Store), // not placed: ignored
        ];
        let mut f = Footprint::default();
        f.scan(0, &events, &table, &geo());
        let mut v = f.list.clone();
        v.sort_unstable();
        // Line 0 read then written: the write is not lost to the filter.
        assert_eq!(v, vec![(0, true), (1, false), (2, false)]);
        assert!(f.touches(0) && f.touches(2));
        assert!(!f.touches(3));
        f.scan(1, &events, &table, &geo());
        assert_eq!(f.list, vec![(1, true)]);
        assert_eq!(f.lines.len(), 1);
    }
}
