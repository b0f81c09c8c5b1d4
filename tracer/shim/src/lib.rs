//! cachescope-shim: the recorder that runs inside a program built with `cachescope cc`.
//!
//! The compilers' instrumentation calls into this library instead of a sanitizer runtime:
//! ThreadSanitizer entry points (`tsan.rs`, `atomics.rs`) and SanitizerCoverage callbacks
//! (`cov.rs`) report memory accesses and basic blocks; interposed functions report threads,
//! locks and barriers (`pthread.rs`, `gomp.rs`; LLVM libomp through the OMPT tool in
//! `ompt.rs`), heap blocks (`alloc.rs`; C++ `operator new` sites in `cxx_new.rs`), `memcpy`/`memset` ranges (`mem.rs`) and modules
//! (`exit.rs`'s `dlopen`); `exec.rs` ends the recording where the program replaces itself. The program's signal handlers run with recording suspended (`signals.rs`). Events go into per-thread buffers (`thread.rs`) and from there to one writer
//! thread (`recorder.rs`) that encodes the trace with the schema crate's writer.
//!
//! The shim is inert unless `CACHESCOPE_OUT` names the output (as `cachescope record` does)
//! and the process's executable is instrumented, so instrumented binaries also run normally
//! and a launcher passes the recording on to the program it starts. It must never unwind into C: it has no panicking
//! paths on recording threads (errors end recording with a message instead), and a panic that
//! reaches an `extern "C"` entry point aborts instead of unwinding.
//!
//! `unsafe` is confined to this crate (the project's rule): every block says why it is sound.

#![allow(clippy::missing_safety_doc)] // C ABI entry points: the callers are compilers and libc.
#![allow(clippy::not_unsafe_ptr_arg_deref)] // ditto: pointers come from instrumented code.

/// The shim's allocations never come from the program's heap (`own_memory.rs`).
#[global_allocator]
static OWN_MEMORY: own_memory::OwnMemory = own_memory::OwnMemory;

mod alloc;
mod alt_stack;
mod atomics;
mod blockcost;
mod c11_threads;
mod callers;
mod cov;
mod cxx_new;
mod exec;
mod exit;
mod fds;
mod gomp;
mod gomp_tasks;
mod locks;
mod mem;
mod modules;
mod ompt;
mod own_memory;
mod pthread;
mod real;
mod recorder;
mod semaphore;
mod signals;
mod stack;
mod task_order;
mod thread;
mod tsan;
