//! Synthetic workloads for tests and benches (`cachescope trace gen`).
//!
//! Each workload is written the way an OpenMP program would be recorded: thread 0 allocates
//! the data, opens a parallel region and creates the other threads; every thread works on its
//! share and meets the others at a barrier after each iteration; thread 0 joins them. Time is
//! in instructions (`Advance` events per loop body, with FLOPs where the kernel computes), and
//! every access carries a code position, so generated traces exercise every column.
//!
//! Output is a pure function of the parameters: the same parameters give the same bytes.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::str::FromStr;

use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::error::{ErrorKind, Result, TraceError};
use crate::event::{Access, AccessKind, CodePos, Event, ThreadId};
use crate::record::{HostInfo, TimeUnit, TraceHeader};
use crate::writer::{ThreadWriter, TraceWriter};

/// The synthetic access patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// `a[i] = b[i]` over each thread's contiguous share.
    Stream,
    /// Loads at a fixed stride over each thread's share.
    Strided,
    /// Uniformly random 8-byte loads (¾) and stores (¼) over the whole array.
    Random,
    /// A walk through a randomly linked cyclic list of 64-byte nodes per thread.
    PointerChase,
    /// Thesis Fig. 4.3: each thread modifies 4-byte elements at 64-byte strides; threads are 4
    /// bytes apart (false sharing) or, with `padded`, in disjoint parts of the array.
    FalseSharing,
    /// Thread 0 writes a buffer, the others read it after a barrier; a lock-protected shared
    /// counter is incremented by every thread each iteration (true sharing).
    ProducerConsumer,
    /// Barrier-phased 2D Jacobi stencil on an N×N grid of doubles, rows split statically.
    Stencil,
}

impl Workload {
    /// All workloads.
    pub const ALL: [Workload; 7] = [
        Workload::Stream,
        Workload::Strided,
        Workload::Random,
        Workload::PointerChase,
        Workload::FalseSharing,
        Workload::ProducerConsumer,
        Workload::Stencil,
    ];

    /// The workload's command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Stream => "stream",
            Workload::Strided => "strided",
            Workload::Random => "random",
            Workload::PointerChase => "pointer-chase",
            Workload::FalseSharing => "false-sharing",
            Workload::ProducerConsumer => "producer-consumer",
            Workload::Stencil => "stencil",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Workload::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Workload::ALL.iter().map(|w| w.name()).collect();
                format!("unknown workload {s:?}; one of {}", names.join(", "))
            })
    }
}

/// Parameters of a synthetic trace.
#[derive(Debug, Clone, Serialize)]
pub struct GenParams {
    /// The pattern.
    pub workload: Workload,
    /// Number of threads (1 ..= 1024).
    pub threads: u32,
    /// Bytes of the main data structure (per array; the stencil's grid).
    pub size: u64,
    /// Passes over the data.
    pub iterations: u32,
    /// Seed for random and pointer-chase.
    pub seed: u64,
    /// Stride in bytes for `strided`.
    pub stride: u64,
    /// `false-sharing` without false sharing (threads in disjoint parts).
    pub padded: bool,
}

impl GenParams {
    /// Defaults for `workload`: 2 threads, 1 MiB, 4 iterations, seed 1, stride 64.
    pub fn new(workload: Workload) -> Self {
        GenParams {
            workload,
            threads: 2,
            size: 1 << 20,
            iterations: 4,
            seed: 1,
            stride: 64,
            padded: false,
        }
    }

    fn check(&self) -> Result<()> {
        let bad = |m: String| Err(TraceError::new(ErrorKind::Usage, m));
        if !(1..=1024).contains(&self.threads) {
            return bad(format!("threads must be 1..=1024, not {}", self.threads));
        }
        if self.size < 64 * self.threads as u64 || self.size > 1 << 40 {
            return bad(format!(
                "size must be at least 64 bytes per thread ({} for {} threads) and at most \
                 1 TiB, not {}",
                64 * self.threads as u64,
                self.threads,
                self.size
            ));
        }
        if self.stride == 0 || self.stride > self.size {
            return bad(format!("stride must be 1..=size, not {}", self.stride));
        }
        Ok(())
    }
}

const HEAP: u64 = 0x7f00_0000_0000;
const BARRIER: u64 = 0x0060_4000;
const LOCK: u64 = 0x0060_4040;
const COUNTER: u64 = 0x0060_4080;
const REGION: u64 = 0x0040_1000;
const CODE: u64 = 0x0040_2000;

/// Writes events for one thread with a little vocabulary.
struct Emit<'a, W: Write> {
    out: &'a mut ThreadWriter<W>,
}

impl<W: Write> Emit<'_, W> {
    fn access(&mut self, kind: AccessKind, addr: u64, size: u32, pc: u64) -> Result<()> {
        self.out.push(Event::Access(Access {
            kind,
            size,
            addr,
            pc: CodePos::new(pc),
        }))
    }
    fn load(&mut self, addr: u64, size: u32, pc: u64) -> Result<()> {
        self.access(AccessKind::Load, addr, size, pc)
    }
    fn store(&mut self, addr: u64, size: u32, pc: u64) -> Result<()> {
        self.access(AccessKind::Store, addr, size, pc)
    }
    fn advance(&mut self, units: u64, flops: u64) -> Result<()> {
        self.out.push(Event::Advance { units, flops })
    }
    fn barrier(&mut self, n: u32) -> Result<()> {
        self.out.push(Event::BarrierEnter {
            barrier: BARRIER,
            participants: n,
        })?;
        self.out.push(Event::BarrierLeave { barrier: BARRIER })
    }
}

/// Thread `t`'s share `[start, end)` of `n` items split among `threads`.
fn share(n: u64, t: u32, threads: u32) -> (u64, u64) {
    let (t, k) = (t as u64, threads as u64);
    (n * t / k, n * (t + 1) / k)
}

/// Writes the synthetic trace described by `p` to `path`.
pub fn generate_file(p: &GenParams, path: &Path) -> Result<()> {
    p.check().map_err(|e| e.at_path(path))?;
    let writer = TraceWriter::create(path, &header(p)).map_err(|e| e.at_path(path))?;
    generate_into(p, &writer).map_err(|e| e.at_path(path))?;
    writer.finish().map_err(|e| e.at_path(path))?;
    Ok(())
}

/// Writes the synthetic trace described by `p` to `out`, with `chunk_events` per chunk.
pub fn generate<W: Write>(p: &GenParams, out: W, chunk_events: usize) -> Result<W> {
    p.check()?;
    let writer = TraceWriter::with_chunk_events(out, &header(p), chunk_events)?;
    generate_into(p, &writer)?;
    writer.finish()
}

fn header(p: &GenParams) -> TraceHeader {
    TraceHeader {
        recorder: format!("cachescope {} trace gen", env!("CARGO_PKG_VERSION")),
        program: format!("synthetic:{}", p.workload),
        args: vec![
            format!("--threads={}", p.threads),
            format!("--size={}", p.size),
            format!("--iterations={}", p.iterations),
            format!("--seed={}", p.seed),
            format!("--stride={}", p.stride),
            format!("--padded={}", p.padded),
        ],
        // Synthetic traces describe no host: keeps their bytes identical everywhere.
        host: HostInfo::default(),
        time_unit: TimeUnit::Instructions,
        modules: Vec::new(),
        created_unix_seconds: 0,
    }
}

fn generate_into<W: Write>(p: &GenParams, writer: &TraceWriter<W>) -> Result<()> {
    // Arrays are 4 KiB aligned and 4 KiB apart, like large heap blocks.
    let array_bytes = p.size.div_ceil(4096) * 4096;
    let arrays = [HEAP, HEAP + array_bytes + 4096];
    for t in 0..p.threads {
        let mut w = writer.thread(t as ThreadId)?;
        let mut e = Emit { out: &mut w };
        if t == 0 {
            for (k, &a) in arrays.iter().enumerate() {
                e.out.push(Event::Alloc {
                    addr: a,
                    size: p.size,
                    site: CodePos::new(CODE + 0x10 * k as u64),
                    align: None,
                })?;
            }
            e.out.push(Event::RegionBegin {
                region: REGION,
                team: p.threads,
            })?;
            for c in 1..p.threads {
                e.out.push(Event::ThreadCreate { child: c })?;
            }
        } else {
            e.out.push(Event::ThreadStart)?;
        }
        body(p, t, arrays, &mut e)?;
        if t == 0 {
            for c in 1..p.threads {
                e.out.push(Event::ThreadJoin { child: c })?;
            }
            e.out.push(Event::RegionEnd { region: REGION })?;
            for &a in &arrays {
                e.out.push(Event::Free { addr: a })?;
            }
        }
        e.out.push(Event::ThreadExit)?;
        w.finish()?;
    }
    Ok(())
}

fn body<W: Write>(p: &GenParams, t: u32, arrays: [u64; 2], e: &mut Emit<'_, W>) -> Result<()> {
    let n = p.threads;
    let [a, b] = arrays;
    let pc = CODE + 0x100 + 0x100 * p.workload as u64;
    match p.workload {
        Workload::Stream => {
            let (lo, hi) = share(p.size / 8, t, n);
            for _ in 0..p.iterations {
                for i in lo..hi {
                    e.load(b + 8 * i, 8, pc)?;
                    e.store(a + 8 * i, 8, pc + 4)?;
                    e.advance(3, 0)?;
                }
                e.barrier(n)?;
            }
        }
        Workload::Strided => {
            let (lo, hi) = share(p.size, t, n);
            for _ in 0..p.iterations {
                let mut off = lo;
                while off < hi {
                    e.load(a + off, 8.min((hi - off) as u32), pc)?;
                    e.advance(2, 0)?;
                    off += p.stride;
                }
                e.barrier(n)?;
            }
        }
        Workload::Random => {
            let mut rng = ChaCha8Rng::seed_from_u64(p.seed ^ (t as u64).wrapping_mul(0x9e37));
            let words = p.size / 8;
            let (lo, hi) = share(words, t, n);
            for _ in 0..p.iterations {
                for _ in lo..hi {
                    let addr = a + 8 * rng.random_range(0..words);
                    if rng.random_range(0..4u32) == 0 {
                        e.store(addr, 8, pc + 4)?;
                    } else {
                        e.load(addr, 8, pc)?;
                    }
                    e.advance(4, 0)?;
                }
                e.barrier(n)?;
            }
        }
        Workload::PointerChase => {
            let mut rng = ChaCha8Rng::seed_from_u64(p.seed ^ (t as u64).wrapping_mul(0x9e37));
            let (lo, hi) = share(p.size / 64, t, n);
            // The visiting order is held in memory (8 bytes per line): ask for it first, so
            // that a size beyond this machine is an error instead of an abort.
            let mut order: Vec<u64> = Vec::new();
            order.try_reserve_exact((hi - lo) as usize).map_err(|_| {
                TraceError::new(
                    ErrorKind::Usage,
                    format!(
                        "pointer-chase over {} bytes needs {} MiB of memory for its visiting \
                         order, which cannot be allocated here; use a smaller --size",
                        p.size,
                        ((hi - lo) * 8) >> 20
                    ),
                )
            })?;
            order.extend(lo..hi);
            order.shuffle(&mut rng);
            for _ in 0..p.iterations {
                for &node in &order {
                    e.load(a + 64 * node, 8, pc)?;
                    e.advance(3, 0)?;
                }
                e.barrier(n)?;
            }
        }
        Workload::FalseSharing => {
            // Per thread the same number of elements, one per 64-byte line of its range.
            let lines = p.size / 64 / if p.padded { n as u64 } else { 1 };
            let base = if p.padded {
                a + lines * 64 * t as u64
            } else {
                a + 4 * t as u64
            };
            for _ in 0..p.iterations {
                for j in 0..lines {
                    let addr = base + 64 * j;
                    e.load(addr, 4, pc)?;
                    e.store(addr, 4, pc + 4)?;
                    e.advance(3, 0)?;
                }
                e.barrier(n)?;
            }
        }
        Workload::ProducerConsumer => {
            let words = p.size / 8;
            for it in 0..p.iterations as u64 {
                if t == 0 {
                    for i in 0..words {
                        e.store(a + 8 * i, 8, pc)?;
                        e.advance(2, 0)?;
                    }
                }
                e.barrier(n)?;
                if t != 0 || n == 1 {
                    for i in 0..words {
                        e.load(a + 8 * i, 8, pc + 4)?;
                        e.advance(2, 1)?;
                    }
                }
                e.barrier(n)?;
                // Everyone bumps the shared counter, in thread order within an iteration.
                e.out.push(Event::LockAcquire {
                    lock: LOCK,
                    order: it * n as u64 + t as u64,
                })?;
                e.load(COUNTER, 8, pc + 8)?;
                e.store(COUNTER, 8, pc + 12)?;
                e.advance(5, 0)?;
                e.out.push(Event::LockRelease { lock: LOCK })?;
            }
        }
        Workload::Stencil => {
            let dim = ((p.size / 8) as f64).sqrt() as u64;
            if dim < 3 {
                return Err(TraceError::new(
                    ErrorKind::Usage,
                    "stencil needs at least a 3×3 grid (size ≥ 72 bytes)",
                ));
            }
            let (lo, hi) = share(dim - 2, t, n);
            let (mut src, mut dst) = (a, b);
            let at = |g: u64, i: u64, j: u64| g + 8 * (i * dim + j);
            for _ in 0..p.iterations {
                for i in lo + 1..hi + 1 {
                    for j in 1..dim - 1 {
                        e.load(at(src, i - 1, j), 8, pc)?;
                        e.load(at(src, i, j - 1), 8, pc + 4)?;
                        e.load(at(src, i, j + 1), 8, pc + 8)?;
                        e.load(at(src, i + 1, j), 8, pc + 12)?;
                        e.store(at(dst, i, j), 8, pc + 16)?;
                        e.advance(9, 4)?;
                    }
                }
                e.barrier(n)?;
                std::mem::swap(&mut src, &mut dst);
            }
        }
    }
    Ok(())
}
