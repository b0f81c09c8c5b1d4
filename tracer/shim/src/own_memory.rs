//! The shim's own memory, apart from the program's heap.
//!
//! The recorder allocates (thread state, event buffers, the writer's encoder, hash maps) while
//! the program runs. Taken from the program's `malloc`, those blocks land between the
//! program's own: two per-thread counters that `malloc` puts 32 bytes apart natively, and so
//! on one cache line, were half a megabyte apart under the recorder, and their false sharing
//! vanished from the trace. So the shim's global allocator takes memory straight from `mmap`:
//! power-of-two size classes up to [`LARGEST_CLASS`] carved from 1 MiB chunks (a block freed
//! goes to its class's free list, never back to the system), larger blocks mapped and unmapped
//! one by one. One spin lock guards the classes; the shim allocates rarely (never per event),
//! so it is never contended for long. `fork` takes the lock first (see [`register_fork`]), so
//! a child never starts with the lock held by a thread it does not have.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, Ordering};

/// Smallest block (and class 0's size).
const SMALLEST_CLASS: usize = 16;
/// Largest block served from the classes; larger ones get their own mapping.
const LARGEST_CLASS: usize = 64 * 1024;
/// Classes 16, 32, …, [`LARGEST_CLASS`] bytes.
const CLASSES: usize = (LARGEST_CLASS / SMALLEST_CLASS).trailing_zeros() as usize + 1;
/// Memory mapped at a time for the classes.
const CHUNK: usize = 1 << 20;
const PAGE: usize = 4096;

/// The allocator (installed as the shim's `#[global_allocator]` in `lib.rs`).
pub(crate) struct OwnMemory;

/// A free block: the next one of its class.
struct FreeBlock {
    next: *mut FreeBlock,
}

struct Classes {
    free: [*mut FreeBlock; CLASSES],
    /// Unused rest of the current chunk.
    cursor: usize,
    end: usize,
}

impl Classes {
    /// A block of `class`: a freed one, else carved from the current region; when that has
    /// no room, from the region `refill` maps (start and length), if it maps one.
    fn take(&mut self, class: usize, refill: impl FnOnce() -> Option<(usize, usize)>) -> *mut u8 {
        let head = self.free[class];
        if !head.is_null() {
            // SAFETY: a block on the free list holds its successor (written by `give`).
            self.free[class] = unsafe { (*head).next };
            return head.cast();
        }
        let size = SMALLEST_CLASS << class;
        let mut at = self.cursor.next_multiple_of(size);
        if self.end == 0 || at + size > self.end {
            let Some((start, len)) = refill() else {
                return null_mut();
            };
            (self.cursor, self.end) = (start, start + len);
            at = start;
        }
        self.cursor = at + size;
        at as *mut u8
    }

    /// Gives back a block of `class` taken before.
    fn give(&mut self, class: usize, block: *mut u8) {
        let block = block.cast::<FreeBlock>();
        // SAFETY: the block is the caller's to give back, at least 16 bytes and aligned to
        // its class, so it can hold the list link.
        unsafe {
            block.write(FreeBlock {
                next: self.free[class],
            })
        };
        self.free[class] = block;
    }
}

struct Locked {
    busy: AtomicBool,
    classes: UnsafeCell<Classes>,
}

// SAFETY: `classes` is only touched while `busy` is held (see `Locked::with`).
unsafe impl Sync for Locked {}

static STATE: Locked = Locked::new();

impl Locked {
    const fn new() -> Locked {
        Locked {
            busy: AtomicBool::new(false),
            classes: UnsafeCell::new(Classes {
                free: [null_mut(); CLASSES],
                cursor: 0,
                end: 0,
            }),
        }
    }

    fn lock(&self) {
        let mut spins = 0u32;
        while self
            .busy
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }

    fn unlock(&self) {
        self.busy.store(false, Ordering::Release);
    }

    fn with<R>(&self, f: impl FnOnce(&mut Classes) -> R) -> R {
        self.lock();
        // SAFETY: the lock is held, so no other reference to the classes exists.
        let r = f(unsafe { &mut *self.classes.get() });
        self.unlock();
        r
    }
}

/// The class of a block of `size` bytes aligned to `align`, if one serves it.
fn class_of(size: usize, align: usize) -> Option<usize> {
    let need = size
        .max(align)
        .max(SMALLEST_CLASS)
        .checked_next_power_of_two()?;
    (need <= LARGEST_CLASS).then(|| (need / SMALLEST_CLASS).trailing_zeros() as usize)
}

fn map(len: usize) -> *mut u8 {
    map_with(len, 0)
}

/// An anonymous private read-write mapping of `len` bytes with `flags` added, or null.
fn map_with(len: usize, flags: libc::c_int) -> *mut u8 {
    // SAFETY: an anonymous private mapping; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        null_mut()
    } else {
        p.cast()
    }
}

fn mapped_len(size: usize) -> usize {
    size.div_ceil(PAGE) * PAGE
}

// SAFETY (of the impl): blocks come from mappings no one else uses; a class block is handed
// out once until it is freed; sizes and alignments are those of the class (a power of two at
// least as large as both), and the chunks' cursor is aligned to the class before carving.
unsafe impl GlobalAlloc for OwnMemory {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = class_of(layout.size(), layout.align()) else {
            // Mappings are page-aligned: larger alignments are not served (the shim has none).
            return if layout.align() <= PAGE {
                map(mapped_len(layout.size()))
            } else {
                null_mut()
            };
        };
        STATE.with(|c| {
            c.take(class, || {
                let chunk = map(CHUNK);
                (!chunk.is_null()).then_some((chunk as usize, CHUNK))
            })
        })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class_of(layout.size(), layout.align()) {
            Some(class) => STATE.with(|c| c.give(class, ptr)),
            None => {
                // SAFETY: a mapping of this length made by `alloc` for this layout.
                unsafe { libc::munmap(ptr.cast(), mapped_len(layout.size())) };
            }
        }
    }
}

/// Bytes reserved (not committed: pages are touched only when used) for the blocks the C
/// library allocates while the shim works ([`c_alloc`]).
const FOREIGN_BYTES: usize = 64 << 20;
/// Header in front of a [`c_alloc`] block: its class.
const HEADER: usize = 16;

/// The region of [`c_alloc`] blocks, mapped on first use: start and end (0 until then).
static FOREIGN: Locked = Locked::new();
static FOREIGN_START: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A block of `size` bytes for a C library call made while the shim works (glibc's
/// `pthread_create` allocates the new thread's TLS vector with `calloc`, the writer thread's
/// included): taken from the program's heap, it would shift every later block of the program
/// by its size. Zeroed when `zero`. `None` when the region is full (the caller falls back to
/// the C library).
pub(crate) fn c_alloc(size: usize, zero: bool) -> Option<*mut u8> {
    let class = class_of(size.checked_add(HEADER)?, HEADER)?;
    let block = FOREIGN.with(|c| {
        c.take(class, || {
            // Once only: the region is reserved address space (MAP_NORESERVE), committed as
            // pages are touched; when it is full, the C library serves the call.
            if FOREIGN_START.load(Ordering::Acquire) != 0 {
                return None;
            }
            let region = map_with(FOREIGN_BYTES, libc::MAP_NORESERVE);
            if region.is_null() {
                return None;
            }
            FOREIGN_START.store(region as usize, Ordering::Release);
            Some((region as usize, FOREIGN_BYTES))
        })
    });
    if block.is_null() {
        return None;
    }
    // SAFETY: the block has room for the header and `size` bytes after it.
    unsafe {
        block.cast::<usize>().write(class);
        if zero {
            block.add(HEADER).write_bytes(0, size);
        }
        Some(block.add(HEADER))
    }
}

/// Whether `p` came from [`c_alloc`].
pub(crate) fn owns(p: *const u8) -> bool {
    let start = FOREIGN_START.load(Ordering::Acquire);
    start != 0 && (start..start + FOREIGN_BYTES).contains(&(p as usize))
}

/// Usable bytes of a [`c_alloc`] block.
pub(crate) fn c_size(p: *const u8) -> usize {
    // SAFETY: `p` is a c_alloc block (the caller checked `owns`): its header precedes it.
    let class = unsafe { p.sub(HEADER).cast::<usize>().read() };
    (SMALLEST_CLASS << class) - HEADER
}

/// Gives back a [`c_alloc`] block.
pub(crate) fn c_free(p: *mut u8) {
    // SAFETY: as in `c_size`.
    let block = unsafe { p.sub(HEADER) };
    // SAFETY: as above.
    let class = unsafe { block.cast::<usize>().read() };
    FOREIGN.with(|c| c.give(class, block));
}

extern "C" fn before_fork() {
    STATE.lock();
    FOREIGN.lock();
}

extern "C" fn after_fork() {
    FOREIGN.unlock();
    STATE.unlock();
}

/// Takes the allocator's lock around `fork`, so that the child (which has only the forking
/// thread) never inherits it held by a thread that is gone.
pub(crate) fn register_fork() {
    // SAFETY: registering plain functions as fork handlers.
    unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_small_size_and_alignment() {
        assert_eq!(class_of(1, 1), Some(0));
        assert_eq!(class_of(16, 8), Some(0));
        assert_eq!(class_of(17, 8), Some(1));
        assert_eq!(class_of(8, 64), Some(2));
        assert_eq!(class_of(LARGEST_CLASS, 8), Some(CLASSES - 1));
        assert_eq!(class_of(LARGEST_CLASS + 1, 8), None);
    }

    #[test]
    fn c_blocks_are_zeroed_owned_sized_and_reused() {
        let p = c_alloc(288, true).unwrap();
        assert!(owns(p));
        assert_eq!(p as usize % 16, 0);
        assert!(c_size(p) >= 288);
        // SAFETY: the block has 288 bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(p, 288) };
        assert!(bytes.iter().all(|&b| b == 0));
        bytes.fill(7);
        c_free(p);
        let q = c_alloc(288, true).unwrap();
        assert_eq!(q, p, "the freed block is taken again");
        // SAFETY: as above.
        assert!(unsafe { std::slice::from_raw_parts(q, 288) }
            .iter()
            .all(|&b| b == 0));
        c_free(q);
        let on_stack = 0u8;
        assert!(!owns(&on_stack));
    }

    #[test]
    fn blocks_are_aligned_distinct_and_reused() {
        let a = OwnMemory;
        let mut blocks = Vec::new();
        for size in [1usize, 24, 100, 4096, 65536, 70_000, 3 << 20] {
            for align in [1usize, 8, 64, 4096] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a valid layout; the block is written within its size, then freed.
                let p = unsafe { a.alloc(layout) };
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "{size} {align}");
                // SAFETY: the block has `size` bytes.
                unsafe { p.write_bytes(0xab, size) };
                blocks.push((p, layout));
            }
        }
        let mut starts: Vec<usize> = blocks.iter().map(|(p, _)| *p as usize).collect();
        starts.sort_unstable();
        starts.dedup();
        assert_eq!(starts.len(), blocks.len(), "blocks overlap");
        let (p, layout) = blocks[1];
        // SAFETY: freeing a block from `alloc` with its layout.
        unsafe { a.dealloc(p, layout) };
        // SAFETY: as above.
        let again = unsafe { a.alloc(layout) };
        assert_eq!(again, p, "a freed block is handed out again");
        for (p, layout) in blocks.into_iter().skip(2) {
            // SAFETY: each block once, with its layout.
            unsafe { a.dealloc(p, layout) };
        }
    }
}
