//! C++ `operator new`: heap blocks allocated by `new` named by the line that says `new`.
//!
//! libstdc++'s `operator new` allocates with `malloc` (or `aligned_alloc` for over-aligned
//! types), so without this module every C++ heap block would have the same allocation site,
//! inside libstdc++, and the audit would merge all of them into one data object. The shim
//! exports the eight global `operator new` forms; each entry point notes its caller's return
//! address as the *pending site* of the calling thread and jumps to the real operator new
//! (the next definition, found with `dlsym(RTLD_NEXT)`, or in a C++ library `dlopen`ed
//! later), which calls `malloc`; the shim's `malloc` then takes the pending site instead of
//! its own return address (`alloc.rs`), whether or not the thread records.
//!
//! Why a note and a jump instead of allocating here: the real operator new calls the
//! new-handler and throws `std::bad_alloc` when memory runs out, and an exception cannot
//! pass through the shim's Rust frames. After the jump no shim frame is left on the stack;
//! the real operator new runs exactly as without the shim.
//!
//! Nested calls keep the outer site: libstdc++'s `new[]` calls `new`, and the `nothrow`
//! forms call the throwing ones, with the same size (and alignment), so a note that finds a
//! pending site for the same size and alignment leaves it. A `malloc` takes the pending site
//! only if its size is the one `new` was asked for (libstdc++ asks for at least 1 byte, and
//! rounds an aligned request up to a multiple of the alignment); any other allocation keeps
//! its own site. An operator new that does not call `malloc` (another allocator's) leaves its
//! note pending until an allocation of that size takes it or a note of another size or
//! alignment replaces it (docs/tracer.md lists this).
//!
//! Deletes need nothing: `operator delete` frees with `free`, which the shim records.

use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The calling thread's pending `operator new` site.
#[derive(Clone, Copy)]
struct Pending {
    /// Return address of the `operator new` call; 0: none pending.
    site: u64,
    /// Bytes asked for.
    size: usize,
    /// Alignment asked for (1 for the forms without one).
    align: usize,
}

const NONE: Pending = Pending {
    site: 0,
    size: 0,
    align: 1,
};

thread_local! {
    static PENDING: Cell<Pending> = const { Cell::new(NONE) };
}

/// The forms' symbols, in the order of the entry points below.
static NAMES: [&CStr; 8] = [
    c"_Znwm",
    c"_Znam",
    c"_ZnwmRKSt9nothrow_t",
    c"_ZnamRKSt9nothrow_t",
    c"_ZnwmSt11align_val_t",
    c"_ZnamSt11align_val_t",
    c"_ZnwmSt11align_val_tRKSt9nothrow_t",
    c"_ZnamSt11align_val_tRKSt9nothrow_t",
];

/// The real forms' addresses, 0 until found.
static REAL: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];

/// The real operator new form `form`: the next definition after the shim, or, when the C++
/// library was loaded later with `dlopen` (a C program loading a C++ plugin: `RTLD_NEXT`
/// searches only the libraries loaded at start), the first definition outside the shim in
/// any loaded library. Missing everywhere is fatal: someone called it, so it exists.
fn real(form: usize) -> usize {
    let found = REAL[form].load(Ordering::Acquire);
    if found != 0 {
        return found;
    }
    let name = NAMES[form];
    // SAFETY: `name` is NUL-terminated; RTLD_NEXT searches the modules after the shim.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    let addr = if next != 0 {
        next
    } else {
        loaded_definition(name).unwrap_or_else(|| {
            let msg = b"cachescope: C++ operator new called, but no library defines it\n";
            // SAFETY: writing a static buffer to stderr.
            unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
            std::process::abort()
        })
    };
    REAL[form].store(addr, Ordering::Release);
    addr
}

/// Start of the loaded object holding `addr` (`dladdr`), or 0.
fn object_base(addr: usize) -> usize {
    // SAFETY: all-zero is a valid `Dl_info` (null pointers); dladdr fills it or leaves it.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables for `addr`.
    if unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } == 0 {
        return 0;
    }
    info.dli_fbase as usize
}

/// The first definition of `name` outside the shim in the libraries loaded now, each asked
/// with `dlopen(RTLD_NOLOAD)` + `dlsym` (which searches that library and its dependencies).
fn loaded_definition(name: &CStr) -> Option<usize> {
    // Paths first: `dlopen` must not run inside `dl_iterate_phdr`, which holds a loader lock.
    let mut paths: Vec<CString> = Vec::new();
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Vec` passed below; `info` is valid during the callback.
        let (paths, info) = unsafe { (&mut *data.cast::<Vec<CString>>(), &*info) };
        if !info.dlpi_name.is_null() {
            // SAFETY: a non-null `dlpi_name` is a NUL-terminated path.
            let path = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !path.is_empty() {
                paths.push(path.to_owned());
            }
        }
        0
    }
    // SAFETY: `visit` only pushes to the `Vec` behind `data`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut paths as *mut Vec<CString>).cast()) };
    let shim = object_base(note_new as *const () as usize);
    paths.iter().find_map(|path| {
        // SAFETY: `path` is NUL-terminated; RTLD_NOLOAD only looks the library up.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if h.is_null() {
            return None;
        }
        // SAFETY: `h` is a live handle, `name` NUL-terminated; the handle is closed after.
        let addr = unsafe {
            let a = libc::dlsym(h, name.as_ptr()) as usize;
            libc::dlclose(h);
            a
        };
        (addr != 0 && object_base(addr) != shim).then_some(addr)
    })
}

/// Forms 4..8 take an alignment as their second argument.
const FIRST_ALIGNED: usize = 4;

/// Notes the pending site of operator new form `form` (an index into [`REAL`]) called from
/// `ret` with `size` and `second` (the alignment for the aligned forms); returns the address
/// of the real form to jump to.
extern "C" fn note_new(ret: u64, form: usize, size: usize, second: usize) -> usize {
    // Resolved first: finding it may allocate, and must not take the site noted below.
    let real = real(form);
    let align = if form >= FIRST_ALIGNED { second } else { 1 };
    // `try_with`: during thread teardown the slot may be gone; then nothing is noted.
    let _ = PENDING.try_with(|p| {
        let cur = p.get();
        // A nested call (new[] → new, nothrow → throwing) keeps the outer site.
        if !(cur.site != 0 && cur.size == size && cur.align == align) {
            p.set(Pending {
                site: ret,
                size,
                align,
            });
        }
    });
    real
}

/// The site of an allocation of `size` bytes made from return address `ret`: the pending
/// `operator new` site when this allocation is the one `new` asked for (which is then no
/// longer pending), else `ret`.
pub(crate) fn site_of(ret: u64, size: usize) -> u64 {
    PENDING
        .try_with(|p| {
            let cur = p.get();
            if cur.site == 0 {
                return ret;
            }
            let least = cur.size.max(1);
            // libstdc++ rounds an aligned request up to a multiple of the alignment.
            let most = least
                .checked_next_multiple_of(cur.align.max(1))
                .unwrap_or(least);
            if (least..=most).contains(&size) {
                p.set(NONE);
                cur.site
            } else {
                ret
            }
        })
        .unwrap_or(ret)
}

/// Defines exported `operator new` entry points: each saves the argument registers, calls
/// [`note_new`] with its return address, form number, size and second argument, restores
/// them and jumps to the address `note_new` returned (the real form), so that the real
/// operator new returns (or throws) straight to the caller.
macro_rules! new_entry {
    ($($name:ident = $form:literal;)*) => {$(
        #[doc = concat!("Interposed `", stringify!($name), "` (a form of C++ `operator new`).")]
        #[unsafe(naked)]
        #[no_mangle]
        #[allow(non_snake_case)]
        pub extern "C" fn $name() {
            // At entry rsp is 8 mod 16 (the return address); three pushes make it 0 mod 16,
            // as the call needs.
            core::arch::naked_asm!(
                "push rdi",
                "push rsi",
                "push rdx",
                "mov rdi, [rsp + 24]",
                concat!("mov esi, ", $form),
                "mov rdx, [rsp + 16]",
                "mov rcx, [rsp + 8]",
                "call {note}",
                "pop rdx",
                "pop rsi",
                "pop rdi",
                "jmp rax",
                note = sym note_new,
            )
        }
    )*};
}

new_entry! {
    _Znwm = 0;
    _Znam = 1;
    _ZnwmRKSt9nothrow_t = 2;
    _ZnamRKSt9nothrow_t = 3;
    _ZnwmSt11align_val_t = 4;
    _ZnamSt11align_val_t = 5;
    _ZnwmSt11align_val_tRKSt9nothrow_t = 6;
    _ZnamSt11align_val_tRKSt9nothrow_t = 7;
}
