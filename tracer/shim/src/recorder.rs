//! The process-wide side of recording: configuration, the trace file, the writer thread and
//! the registry of recording threads.
//!
//! Recording threads never encode or write: a full event buffer is sent over a bounded channel
//! to one writer thread that owns the [`TraceWriter`]. The channel bound and the buffer size bound
//! the shim's memory whatever the trace length; a producer that outruns the writer blocks.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use cachescope_schema::event::MAX_ALLOC_CALLERS;
use cachescope_schema::{
    Event, Instrumentation, ModuleInfo, ThreadId, ThreadWriter, TimeUnit, TraceHeader, TraceWriter,
};

use crate::thread;

/// Environment variable naming the output trace (set by `cachescope record`). Without it the
/// shim stays inert: every callback returns at once.
pub const ENV_OUT: &str = "CACHESCOPE_OUT";
/// Environment variable with the time unit: `instructions` or `events` (unset: the one of the
/// executable's instrumentation).
pub const ENV_TIME_UNIT: &str = "CACHESCOPE_TIME_UNIT";
/// Environment variable with the CPUs the writer thread may run on, as a Linux CPU list
/// (`0-3,6`): the affinity `cachescope record` itself had. Needed because the writer thread
/// starts after the OpenMP runtime may have bound the main thread to one CPU
/// (`OMP_PROC_BIND=true`), and a new thread inherits its creator's binding: the writer would
/// then compete with thread 0 for one CPU while the others idle.
pub const ENV_WRITER_CPUS: &str = "CACHESCOPE_WRITER_CPUS";
/// Environment variable with the number of callers to record per heap allocation beyond its
/// site (`callers.rs`; 0 to [`MAX_ALLOC_CALLERS`], default the maximum).
pub const ENV_ALLOC_CALLERS: &str = "CACHESCOPE_ALLOC_CALLERS";
/// Events per recording-thread buffer (and per chunk).
pub const BUFFER_EVENTS: usize = 32 * 1024;
/// Full buffers that may wait for the writer before producers block: with 32-byte events this
/// bounds the queued memory to 8 MiB. Also the number of empty buffers kept for reuse. Small on
/// purpose: the writer is slower than the program's threads (on every example), so the queue
/// is full most of the time whatever its depth, and every buffer beyond the ones recycled is
/// fresh memory whose first touch costs a page fault per 4 KiB in the recording thread (with
/// 32 buffers that was about a third of the recording time of the small examples).
const QUEUE_BUFFERS: usize = 8;

/// How long the end of a recording waits for the buffers threads are handing to the writer
/// (normally microseconds; a thread stopped in the middle, e.g. by a debugger, must not hold
/// the trace back forever).
const HANDOVER_WAIT: Duration = Duration::from_secs(2);

/// Whether events are recorded now. Cleared when recording ends (or fails, or in a fork child).
static ENABLED: AtomicBool = AtomicBool::new(false);
/// Callers recorded per heap allocation (see [`ENV_ALLOC_CALLERS`]).
static ALLOC_CALLERS: AtomicUsize = AtomicUsize::new(0);

/// How many callers to record per heap allocation.
pub(crate) fn alloc_callers() -> usize {
    ALLOC_CALLERS.load(Ordering::Relaxed)
}

/// Set once the writer has completed the trace (a faulting thread waits for it).
static TRACE_ENDED: AtomicBool = AtomicBool::new(false);

/// Whether the writer has completed the trace.
pub(crate) fn trace_ended() -> bool {
    TRACE_ENDED.load(Ordering::SeqCst)
}

/// The signal that asked us to stop (SIGINT/SIGTERM, or a fault), or 0.
pub(crate) static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The program's main thread ended with `pthread_exit`: the process lives on until its last
/// thread ends, and the writer must not be that last thread (see [`only_writer_left`]).
static MAIN_EXITED: AtomicBool = AtomicBool::new(false);
/// Next thread id to hand out (0 is the first thread that records, normally `main`).
static NEXT_TID: AtomicU32 = AtomicU32::new(0);

static RECORDER: OnceLock<Recorder> = OnceLock::new();
/// The writer thread's pthread handle: it must never record, not even the allocations std makes
/// before its body starts.
static WRITER_THREAD: AtomicU64 = AtomicU64::new(0);

/// Whether the calling thread is the writer.
pub(crate) fn is_writer_thread() -> bool {
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    me == WRITER_THREAD.load(Ordering::SeqCst)
}

/// Blocks every signal but those a fault raises in the calling thread; returns the mask
/// before. glibc keeps its own internal signals (thread cancellation, `setxid`) unblocked.
fn block_async_signals() -> libc::sigset_t {
    // SAFETY: `sigset_t` is plain data that `sigfillset` initializes; the calls get valid
    // pointers to locals and change only this thread's mask.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut block);
        for sig in crate::signals::SYNCHRONOUS {
            libc::sigdelset(&mut block, sig);
        }
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        old
    }
}

/// Sets the calling thread's signal mask back to `mask`.
fn restore_signal_mask(mask: &libc::sigset_t) {
    // SAFETY: `mask` came from `pthread_sigmask`; only this thread's mask changes.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut()) };
}

/// Messages to the writer thread.
pub(crate) enum Msg {
    /// Events of one thread, in order.
    Events(ThreadId, Vec<Event>),
    /// The thread ended; its writer can be finished.
    ThreadDone(ThreadId),
    /// Modules loaded after start (dlopen).
    Modules(Vec<ModuleInfo>),
}

struct Recorder {
    tx: Mutex<Option<SyncSender<Msg>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    pid: u32,
    path: PathBuf,
}

/// Whether events are recorded now.
#[inline(always)]
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// A fresh thread id.
pub(crate) fn next_tid() -> ThreadId {
    NEXT_TID.fetch_add(1, Ordering::Relaxed)
}

/// Sends a message to the writer thread (dropped once recording has ended).
pub(crate) fn send(msg: Msg) {
    let Some(rec) = RECORDER.get() else { return };
    let tx = lock(&rec.tx).clone();
    if let Some(tx) = tx {
        // An error means the writer is gone (failed or finished): nothing left to do.
        let _ = tx.send(msg);
    }
}

/// Buffers recycled by the writer, so recording threads rarely allocate.
static POOL: Mutex<Vec<Vec<Event>>> = Mutex::new(Vec::new());

/// An empty buffer with room for [`BUFFER_EVENTS`] events.
pub(crate) fn take_buffer() -> Vec<Event> {
    let recycled = lock(&POOL).pop();
    recycled.unwrap_or_else(|| Vec::with_capacity(BUFFER_EVENTS))
}

fn recycle(mut buf: Vec<Event>) {
    buf.clear();
    let mut pool = lock(&POOL);
    if pool.len() < QUEUE_BUFFERS {
        pool.push(buf);
    }
}

/// Starts recording if `CACHESCOPE_OUT` is set and the executable was built with `cachescope
/// cc`. Called once, from the shim's constructor, on
/// the thread that loads the program.
pub(crate) fn start() {
    let Some(path) = std::env::var_os(ENV_OUT).map(PathBuf::from) else {
        return;
    };
    // A process none of whose code was built with `cachescope cc` records nothing: it is a
    // launcher (a shell running a script, `env`, `taskset`, `make`), and the program it starts
    // is the one to record, so the request stays in the environment for it.
    let modules = crate::modules::snapshot();
    let ins = match process_instrumentation(&modules) {
        Ok(ins) if ins.records_accesses() => ins,
        Ok(_) => return,
        Err(e) => {
            eprintln!(
                "cachescope: not recording pid {}: cannot read its executable: {e}",
                std::process::id()
            );
            return;
        }
    };
    // Programs this one starts (exec) must not write into our trace.
    std::env::remove_var(ENV_OUT);
    let unit = match std::env::var(ENV_TIME_UNIT).as_deref() {
        Ok("events") => TimeUnit::Events,
        Ok("instructions") => TimeUnit::Instructions,
        _ => ins.time_unit(),
    };
    let callers = match std::env::var(ENV_ALLOC_CALLERS) {
        Err(_) => MAX_ALLOC_CALLERS,
        Ok(n) => n.parse::<usize>().unwrap_or_else(|_| {
            eprintln!(
                "cachescope: {ENV_ALLOC_CALLERS}={n:?} is not a number; recording \
                 {MAX_ALLOC_CALLERS} callers per allocation"
            );
            MAX_ALLOC_CALLERS
        }),
    };
    ALLOC_CALLERS.store(callers.min(MAX_ALLOC_CALLERS), Ordering::Relaxed);
    // create_new: if another process already claimed the file, this one is not traced.
    let file = match OpenOptions::new().write(true).create_new(true).open(&path) {
        Ok(f) => {
            crate::fds::protect(std::os::fd::AsRawFd::as_raw_fd(&f));
            f
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // A launcher that starts several instrumented programs: the first one is recorded.
            eprintln!(
                "cachescope: not recording pid {} ({}): an earlier program of this run is \
                 being recorded",
                std::process::id(),
                program_path()
            );
            return;
        }
        Err(e) => {
            eprintln!(
                "cachescope: not recording pid {}: cannot create {}: {e}",
                std::process::id(),
                path.display()
            );
            return;
        }
    };
    let mut header = TraceHeader::new(
        concat!("cachescope-shim ", env!("CARGO_PKG_VERSION")),
        program_path(),
        unit,
    );
    header.args = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    crate::modules::reported(&modules);
    // The shim's code range, found now (from the map just taken) rather than inside the
    // first interposed `memcpy` that asks.
    let _ = crate::cov::in_shim(0);
    crate::callers::init(&modules);
    header.modules = modules.infos();
    header.created_unix_seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let writer = match TraceWriter::with_chunk_events(
        BufWriter::with_capacity(1 << 20, file),
        &header,
        BUFFER_EVENTS,
    ) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("cachescope: not recording: {}: {e}", path.display());
            return;
        }
    };
    // The header in the file before the program runs on: a trace killed before its first
    // chunk still says what it is.
    if let Err(e) = writer.flush() {
        eprintln!("cachescope: not recording: {}: {e}", path.display());
        return;
    }
    let (tx, rx) = sync_channel(QUEUE_BUFFERS);
    let writer_cpus = std::env::var(ENV_WRITER_CPUS)
        .ok()
        .and_then(|l| parse_cpu_list(&l));
    // Like ENV_OUT: the program's own children must not inherit it.
    std::env::remove_var(ENV_WRITER_CPUS);
    // The writer starts with asynchronous signals blocked (a thread inherits its creator's
    // mask, so none can arrive before its body runs): the program's handlers must never run
    // on it. A handler that forks a parallel region or allocates would otherwise run while the
    // writer holds the allocator's lock and wait for it forever.
    let mask = block_async_signals();
    let handle = std::thread::Builder::new()
        .name("cachescope-writer".into())
        .spawn(move || {
            thread::mark_internal();
            lower_priority();
            writer_loop(writer, rx)
        });
    restore_signal_mask(&mask);
    let handle = match handle {
        Ok(h) => h,
        Err(e) => {
            eprintln!("cachescope: not recording: cannot start the writer thread: {e}");
            return;
        }
    };
    let writer_pthread = std::os::unix::thread::JoinHandleExt::as_pthread_t(&handle);
    // Set here, not in the writer's body: the writer runs at the lowest priority and may not
    // have started when the program (or its OpenMP runtime) looks, so only a binding made by
    // this thread before recording starts is certain to hold from the first event.
    if let Some(cpus) = writer_cpus {
        set_affinity(writer_pthread, &cpus);
    }
    WRITER_THREAD.store(writer_pthread as u64, Ordering::SeqCst);
    let _ = RECORDER.set(Recorder {
        tx: Mutex::new(Some(tx)),
        writer: Mutex::new(Some(handle)),
        pid: std::process::id(),
        path,
    });
    ENABLED.store(true, Ordering::SeqCst);
}

/// The main thread has ended while the process goes on (`pthread_exit` in `main`).
pub(crate) fn main_thread_exited() {
    MAIN_EXITED.store(true, Ordering::SeqCst);
}

/// Whether every thread of the process but the calling one (the writer) has ended: their
/// tasks are gone or zombies (a main thread that called `pthread_exit` stays a zombie until
/// the process ends). Any thread counts, recorded or not. `false` when `/proc` cannot say.
fn only_writer_left() -> bool {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::syscall(libc::SYS_gettid) }.to_string();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    for task in tasks {
        let Ok(task) = task else { return false };
        let name = task.file_name();
        if name.to_str() == Some(me.as_str()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            // Gone between the listing and the read.
            continue;
        };
        // `tid (comm) S …`: the state follows the last parenthesis (comm may hold any).
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].trim_start().chars().next());
        if !matches!(state, Some('Z' | 'X')) {
            return false;
        }
    }
    true
}

/// Gives the writer thread the lowest CPU priority. On a machine with as many cores as program
/// threads, an equal-priority writer would take turns with the program's threads, and the
/// program's own interleaving (which thread gets which chunk of a dynamic schedule, who
/// touches a line first) would follow the writer's time slices instead of the program. At
/// the lowest priority it mostly runs when the program's threads wait, including on the full
/// queue.
fn lower_priority() {
    // SAFETY: gettid and setpriority have no memory-safety preconditions; failure (e.g. a
    // restrictive sandbox) only leaves the priority as it was.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

/// The CPUs of a Linux CPU list such as `0-3,6` (`None` if malformed or beyond `CPU_SETSIZE`).
fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let c = part.parse::<usize>().ok()?;
                (c, c)
            }
        };
        if lo > hi || hi >= libc::CPU_SETSIZE as usize {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// Lets `thread` run on `cpus` (see [`ENV_WRITER_CPUS`]). Failure leaves the inherited
/// affinity, which only costs speed.
fn set_affinity(thread: libc::pthread_t, cpus: &[usize]) {
    // SAFETY: `cpu_set_t` is a plain bit array, valid when zeroed; CPU_SET is given indices
    // below CPU_SETSIZE (checked by `parse_cpu_list`); `thread` is a live thread (its
    // JoinHandle is held by the caller, so it cannot have been joined or detached);
    // pthread_setaffinity_np reads `set` only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::pthread_setaffinity_np(thread, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The instrumentation callbacks the ELF file at `path` imports (read from the file: headers
/// and dynamic symbols only).
fn imported_instrumentation(path: &str) -> Result<Instrumentation, String> {
    use object::{Object, ObjectSymbol};
    let file = File::open(path).map_err(|e| e.to_string())?;
    let cache = object::ReadCache::new(file);
    let elf = object::File::parse(&cache).map_err(|e| e.to_string())?;
    let imports = elf
        .dynamic_symbols()
        .filter(|sym| sym.is_undefined())
        .filter_map(|sym| sym.name().ok());
    Ok(Instrumentation::from_imports(imports))
}

/// The instrumentation of this process's code: its executable's, or else that of the
/// libraries loaded with it (a program not built with `cachescope cc`, e.g. a test driver,
/// using a library that was). An unreadable library counts as uninstrumented.
fn process_instrumentation(modules: &crate::modules::Snapshot) -> Result<Instrumentation, String> {
    let exe = imported_instrumentation("/proc/self/exe")?;
    if exe.records_accesses() {
        return Ok(exe);
    }
    Ok(modules
        .modules
        .iter()
        .skip(1)
        .filter_map(|m| imported_instrumentation(&m.info.path).ok())
        .fold(exe, Instrumentation::union))
}

fn program_path() -> String {
    std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .or_else(|_| std::env::args().next().ok_or(()))
        .unwrap_or_default()
}

fn writer_loop(trace: TraceWriter<BufWriter<File>>, rx: Receiver<Msg>) {
    let mut out = Output {
        trace,
        threads: HashMap::new(),
        failed: false,
    };
    let mut signal;
    // Set when the program's threads have all ended without `exit` (main called
    // `pthread_exit`): the writer ends the trace and must not keep the process alive.
    let mut orphaned = false;
    loop {
        // Checked on every message, not only when idle: a busy program never lets the queue
        // run dry.
        signal = STOP_SIGNAL.load(Ordering::SeqCst);
        if signal != 0 {
            // SIGINT/SIGTERM or a crash: the handler set the flag and waits; the writer takes
            // what the threads have recorded so far and ends the trace.
            out.take_everything(&rx);
            break;
        }
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(msg) => out.handle(msg),
            Err(RecvTimeoutError::Timeout) => {
                if MAIN_EXITED.load(Ordering::SeqCst) && only_writer_left() {
                    out.take_everything(&rx);
                    orphaned = true;
                    break;
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    out.finish();
    TRACE_ENDED.store(true, Ordering::SeqCst);
    if signal != 0 {
        crate::exit::reraise(signal);
    }
    if orphaned {
        // This thread's end ends the process (as exit(0)), whose destructor then calls
        // `finish`: it must find nothing to send and no writer to join (joining itself
        // would fail).
        if let Some(rec) = RECORDER.get() {
            drop(lock(&rec.tx).take());
            drop(lock(&rec.writer).take());
        }
    }
}

/// The writer thread's state.
struct Output {
    trace: TraceWriter<BufWriter<File>>,
    threads: HashMap<ThreadId, ThreadWriter<BufWriter<File>>>,
    failed: bool,
}

impl Output {
    /// Stops recording and takes everything the threads have recorded: the buffers they
    /// handed over (queued, or being queued), then each live thread's committed events.
    fn take_everything(&mut self, rx: &Receiver<Msg>) {
        ENABLED.store(false, Ordering::SeqCst);
        let current = thread::collect_all();
        // Buffers taken before the collection and not yet queued hold earlier events than the
        // threads' current ones: they go first. Until 2026-11-29 the writer emptied the queue
        // and took the current buffers, and a buffer still on its way was lost.
        await_handovers(|| {
            if let Ok(msg) = rx.recv_timeout(Duration::from_millis(1)) {
                self.handle(msg);
            }
        });
        while let Ok(msg) = rx.try_recv() {
            self.handle(msg);
        }
        for (tid, events, done) in current {
            self.handle(Msg::Events(tid, events));
            if done {
                self.handle(Msg::ThreadDone(tid));
            }
        }
    }

    fn handle(&mut self, msg: Msg) {
        if self.failed {
            if let Msg::Events(_, buf) = msg {
                recycle(buf);
            }
            return;
        }
        let result = match msg {
            Msg::Events(tid, buf) => {
                let r = match self.threads.entry(tid) {
                    Entry::Occupied(o) => Ok(o.into_mut()),
                    Entry::Vacant(v) => self.trace.thread(tid).map(|w| v.insert(w)),
                }
                .and_then(|w| w.extend(buf.iter().copied()));
                recycle(buf);
                r
            }
            Msg::ThreadDone(tid) => self.threads.remove(&tid).map_or(Ok(()), |w| w.finish()),
            Msg::Modules(m) => self.trace.add_modules(&m),
        }
        // Into the file at once (a chunk is one write): a program that ends with `_exit` or
        // is killed leaves its complete chunks; the 1 MiB buffer alone held up to about 100 M
        // events, and a short run's header too.
        .and_then(|()| self.trace.flush());
        if let Err(e) = result {
            eprintln!("cachescope: recording failed, the trace will be incomplete: {e}");
            ENABLED.store(false, Ordering::SeqCst);
            self.failed = true;
        }
    }

    fn finish(self) {
        if self.failed {
            return;
        }
        let mut result = Ok(());
        let mut threads: Vec<_> = self.threads.into_iter().collect();
        threads.sort_by_key(|(tid, _)| *tid);
        for (_, w) in threads {
            result = result.and(w.finish());
        }
        if let Err(e) = result.and_then(|_| self.trace.finish().map(|_| ())) {
            eprintln!("cachescope: recording failed, the trace is incomplete: {e}");
        }
    }
}

/// Runs `pause` until no thread is handing a buffer to the writer any more, or for at most
/// [`HANDOVER_WAIT`] (after [`thread::collect_all`], no new hand-over begins).
fn await_handovers(mut pause: impl FnMut()) {
    let deadline = std::time::Instant::now() + HANDOVER_WAIT;
    while thread::handovers() > 0 && std::time::Instant::now() < deadline {
        pause();
    }
}

/// Ends recording: hands every thread's remaining events to the writer, writes the trailer and
/// waits for the file to be complete. Idempotent; does nothing in a forked child.
pub(crate) fn finish() {
    let Some(rec) = RECORDER.get() else { return };
    if rec.pid != std::process::id() {
        return;
    }
    ENABLED.store(false, Ordering::SeqCst);
    let current = thread::collect_all();
    // As in `Output::take_everything`: the buffers still being handed over first (the
    // writer takes them from the queue meanwhile).
    await_handovers(|| std::thread::sleep(Duration::from_millis(1)));
    for (tid, events, done) in current {
        send(Msg::Events(tid, events));
        if done {
            send(Msg::ThreadDone(tid));
        }
    }
    drop(lock(&rec.tx).take());
    let handle = lock(&rec.writer).take();
    if let Some(h) = handle {
        if h.join().is_err() {
            eprintln!(
                "cachescope: the writer thread failed; {} is incomplete",
                rec.path.display()
            );
        }
    }
}

/// Locks a mutex, also after a panic elsewhere (the shim must keep going).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The program replaces itself (exec): its recorded run ends here, as at exit. Completes the
/// trace and returns whether this process was recording (a forked child's exec leaves its
/// parent's trace alone).
pub(crate) fn end_at_exec() -> bool {
    let mine = RECORDER.get().is_some_and(|r| r.pid == std::process::id());
    if !mine || !enabled() {
        return false;
    }
    thread::end_current_thread();
    thread::quietly(finish);
    true
}

/// Stops recording in a forked child: it has no writer thread, and the trace is the parent's.
pub(crate) fn disable_in_child() {
    ENABLED.store(false, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::parse_cpu_list;

    #[test]
    fn cpu_lists_parse_like_proc_status() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0,2-4,7"), Some(vec![0, 2, 3, 4, 7]));
        assert_eq!(parse_cpu_list("3"), Some(vec![3]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("4-2"), None);
        assert_eq!(parse_cpu_list("0-x"), None);
        assert_eq!(parse_cpu_list("0-100000"), None);
    }
}
