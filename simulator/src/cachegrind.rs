//! Cachegrind's cache simulation, reproduced exactly so that its nine event counts
//! (`Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw`) come out identical for the same accesses.
//!
//! The semantics follow valgrind's `cg_sim.c` and `cg_main.c` (3.x):
//! * each cache is true LRU; a set is an MRU-ordered array of tags, the tag is the whole
//!   block number, and every way starts out holding tag 0;
//! * the set index is the block number masked by `sets - 1` (sets must be a power of two);
//! * an access straddling two lines counts once, and misses if either line misses; both lines
//!   are always looked up (a miss in the first still touches the second);
//! * the unified LL is accessed only on an L1 miss, with the same address and size;
//! * write-allocate: stores are simulated like loads;
//! * a modify (load and store of the same address by one instruction) counts as one read;
//! * data accesses larger than the smallest configured line size are simulated as that many
//!   bytes (Cachegrind clamps only dirty-helper accesses such as `fxsave`, but every other
//!   access is at most 64 bytes, so clamping all of them is the same);
//! * instruction fetches go through I1 with the instruction's size.

use serde::Serialize;

use cachescope_schema::{Access, AccessKind};

/// Geometry of one Cachegrind cache, as valgrind's `--I1/--D1/--LL SIZE,ASSOC,LINE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CgGeometry {
    /// Capacity in bytes.
    pub size: u64,
    /// Ways per set.
    pub assoc: u32,
    /// Line size in bytes.
    pub line: u32,
}

impl CgGeometry {
    /// Parses `SIZE,ASSOC,LINE` and checks Cachegrind's constraints.
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        let [size, assoc, line] = parts[..] else {
            return Err(format!("{s:?}: expected SIZE,ASSOC,LINE (e.g. 32768,8,64)"));
        };
        let num = |v: &str, what: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{s:?}: {what} {v:?} is not a number"))
        };
        let small = |v: &str, what: &str| {
            num(v, what).and_then(|n| {
                u32::try_from(n).map_err(|_| format!("{s:?}: {what} {n} is too large"))
            })
        };
        let g = CgGeometry {
            size: num(size, "size")?,
            assoc: small(assoc, "associativity")?,
            line: small(line, "line size")?,
        };
        g.check().map(|()| g).map_err(|e| format!("{s:?}: {e}"))
    }

    /// Cachegrind's own checks: power-of-two line size ≥ 16, power-of-two set count.
    pub fn check(&self) -> Result<(), String> {
        if self.size > crate::model::MAX_LEVEL_BYTES {
            return Err("size exceeds the simulator's limit of 1 GiB".into());
        }
        if self.size == 0 {
            return Err("size must be positive".into());
        }
        if self.assoc == 0 || self.line < 16 || !self.line.is_power_of_two() {
            return Err("associativity must be ≥ 1 and the line size a power of two ≥ 16".into());
        }
        let lines = self.size / self.line as u64;
        if !self.size.is_multiple_of(self.line as u64) || !lines.is_multiple_of(self.assoc as u64) {
            return Err("size must be a multiple of line size × associativity".into());
        }
        let sets = lines / self.assoc as u64;
        if sets == 0 || !sets.is_power_of_two() {
            return Err(format!(
                "the set count {sets} is not a power of two, which Cachegrind requires"
            ));
        }
        Ok(())
    }
}

/// One Cachegrind cache.
#[derive(Debug, Clone)]
struct CgCache {
    assoc: usize,
    sets_mask: u64,
    line_bits: u32,
    tags: Vec<u64>,
}

impl CgCache {
    fn new(g: CgGeometry) -> Self {
        let sets = g.size / g.line as u64 / g.assoc as u64;
        CgCache {
            assoc: g.assoc as usize,
            sets_mask: sets - 1,
            line_bits: g.line.trailing_zeros(),
            tags: vec![0; (sets as usize) * g.assoc as usize],
        }
    }

    /// `cachesim_setref_is_miss`: MRU-ordered set, move-to-front.
    fn set_ref_is_miss(&mut self, set: u64, tag: u64) -> bool {
        let base = set as usize * self.assoc;
        let ways = &mut self.tags[base..base + self.assoc];
        if ways[0] == tag {
            return false;
        }
        match ways.iter().position(|&t| t == tag) {
            Some(i) => {
                ways[..=i].rotate_right(1);
                false
            }
            None => {
                ways.rotate_right(1);
                ways[0] = tag;
                true
            }
        }
    }

    /// `cachesim_ref_is_miss`.
    fn ref_is_miss(&mut self, addr: u64, size: u64) -> bool {
        let block1 = addr >> self.line_bits;
        let block2 = addr.wrapping_add(size - 1) >> self.line_bits;
        if block1 == block2 {
            return self.set_ref_is_miss(block1 & self.sets_mask, block1);
        }
        // Cachegrind asserts that an access spans at most two lines; sizes are clamped to
        // 16 bytes and lines are at least 16 bytes, so it does.
        let miss1 = self.set_ref_is_miss(block1 & self.sets_mask, block1);
        let miss2 = self.set_ref_is_miss(block2 & self.sets_mask, block2);
        miss1 || miss2
    }
}

/// Cachegrind's event counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[allow(non_snake_case)]
pub struct CgCounts {
    /// Instruction fetches.
    pub Ir: u64,
    /// I1 misses.
    pub I1mr: u64,
    /// LL misses of instruction fetches.
    pub ILmr: u64,
    /// Data reads (including modifies).
    pub Dr: u64,
    /// D1 read misses.
    pub D1mr: u64,
    /// LL read misses.
    pub DLmr: u64,
    /// Data writes.
    pub Dw: u64,
    /// D1 write misses.
    pub D1mw: u64,
    /// LL write misses.
    pub DLmw: u64,
}

impl CgCounts {
    /// The nine counts in Cachegrind's order, with their names.
    pub fn named(&self) -> [(&'static str, u64); 9] {
        [
            ("Ir", self.Ir),
            ("I1mr", self.I1mr),
            ("ILmr", self.ILmr),
            ("Dr", self.Dr),
            ("D1mr", self.D1mr),
            ("DLmr", self.DLmr),
            ("Dw", self.Dw),
            ("D1mw", self.D1mw),
            ("DLmw", self.DLmw),
        ]
    }
}

/// The I1/D1/LL geometry of a Cachegrind run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CgConfig {
    /// Instruction L1.
    pub i1: CgGeometry,
    /// Data L1.
    pub d1: CgGeometry,
    /// Unified last level.
    pub ll: CgGeometry,
}

/// Cachegrind's simulator: all threads share one I1/D1/LL, as under valgrind.
#[derive(Debug, Clone)]
pub struct CachegrindSim {
    i1: CgCache,
    d1: CgCache,
    ll: CgCache,
    /// Largest simulated data access: the smallest line size (Cachegrind's `min_line_size`).
    max_data_size: u64,
    /// The counts so far.
    pub counts: CgCounts,
}

impl CachegrindSim {
    /// A cold simulator.
    pub fn new(cfg: CgConfig) -> Self {
        CachegrindSim {
            i1: CgCache::new(cfg.i1),
            d1: CgCache::new(cfg.d1),
            ll: CgCache::new(cfg.ll),
            max_data_size: cfg.i1.line.min(cfg.d1.line).min(cfg.ll.line) as u64,
            counts: CgCounts::default(),
        }
    }

    /// Simulates one access.
    pub fn access(&mut self, a: &Access) {
        let c = &mut self.counts;
        match a.kind {
            AccessKind::Fetch => {
                c.Ir += 1;
                if self.i1.ref_is_miss(a.addr, a.size as u64) {
                    c.I1mr += 1;
                    if self.ll.ref_is_miss(a.addr, a.size as u64) {
                        c.ILmr += 1;
                    }
                }
            }
            kind => {
                let size = (a.size as u64).min(self.max_data_size);
                let read = kind != AccessKind::Store;
                if read {
                    c.Dr += 1;
                } else {
                    c.Dw += 1;
                }
                if self.d1.ref_is_miss(a.addr, size) {
                    if read {
                        c.D1mr += 1;
                    } else {
                        c.D1mw += 1;
                    }
                    if self.ll.ref_is_miss(a.addr, size) {
                        if read {
                            c.DLmr += 1;
                        } else {
                            c.DLmw += 1;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(kind: AccessKind, addr: u64, size: u32) -> Access {
        Access {
            kind,
            size,
            addr,
            pc: None,
        }
    }

    fn sim() -> CachegrindSim {
        let g = CgGeometry::parse("1024,2,64").unwrap();
        CachegrindSim::new(CgConfig {
            i1: g,
            d1: g,
            ll: CgGeometry::parse("4096,4,64").unwrap(),
        })
    }

    #[test]
    fn straddling_access_counts_once() {
        let mut s = sim();
        s.access(&acc(AccessKind::Load, 60, 8));
        assert_eq!((s.counts.Dr, s.counts.D1mr, s.counts.DLmr), (1, 1, 1));
        // Both lines are now present.
        s.access(&acc(AccessKind::Load, 64, 4));
        s.access(&acc(AccessKind::Load, 56, 4));
        assert_eq!((s.counts.Dr, s.counts.D1mr), (3, 1));
    }

    #[test]
    fn tags_start_as_block_zero() {
        // Cachegrind initializes every way to tag 0, so block 0 hits in a cold cache.
        let mut s = sim();
        s.access(&acc(AccessKind::Store, 8, 8));
        assert_eq!((s.counts.Dw, s.counts.D1mw), (1, 0));
    }

    #[test]
    fn modify_is_a_read_and_wide_accesses_are_clamped_to_a_line() {
        let mut s = sim();
        s.access(&acc(AccessKind::Modify, 0x1000, 4));
        // A 32-byte load is simulated whole: it straddles into line 0x2040.
        s.access(&acc(AccessKind::Load, 0x2030, 32));
        assert_eq!((s.counts.Dr, s.counts.Dw, s.counts.D1mr), (2, 0, 2));
        s.access(&acc(AccessKind::Load, 0x2040, 4));
        assert_eq!(
            s.counts.D1mr, 2,
            "line 0x2040 was touched by the 32-byte load"
        );
        // 512 bytes (an fxsave) are clamped to one line's worth: lines 0x3000 and 0x3040 only.
        s.access(&acc(AccessKind::Store, 0x3020, 512));
        s.access(&acc(AccessKind::Load, 0x3080, 4));
        assert_eq!(
            (s.counts.D1mw, s.counts.D1mr),
            (1, 3),
            "line 0x3080 must still be cold"
        );
    }

    #[test]
    fn geometry_checks() {
        assert!(CgGeometry::parse("32768,8,64").is_ok());
        assert!(CgGeometry::parse("3145728,12,64").is_ok());
        assert!(CgGeometry::parse("2949120,12,64").is_err());
        assert!(CgGeometry::parse("32768,8").is_err());
        assert!(CgGeometry::parse("32768,8,24").is_err());
    }
}
