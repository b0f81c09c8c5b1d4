//! `exec`: a recorded program that replaces itself ends its recorded run there, as at `exit`.
//!
//! exec discards the process with the writer thread and every buffer, so without this the
//! trace was an empty `.partial` file. The exec family now completes the trace first. The new
//! program is not recorded (`CACHESCOPE_OUT` left the environment when recording started). If
//! the exec fails, the program goes on unrecorded and says so.
//!
//! A forked (or vforked) child's exec leaves the parent's recording alone (the recorder checks
//! the process id).
//!
//! `execl`, `execlp` and `execle` are variadic, which stable Rust cannot define, and glibc's
//! own versions call its internal `execve`, which interposing `execve` does not reach. Each is
//! a naked function that hands its register and stack arguments to [`exec_list`] (x86-64
//! System V: the first six integer arguments in registers, the rest on the stack).

use libc::{c_char, c_int};

use crate::real::real_fn;
use crate::recorder;

type Argv = *const *const c_char;

real_fn! {
    real_execve: "execve" => unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
    real_execv: "execv" => unsafe extern "C" fn(*const c_char, Argv) -> c_int;
    real_execvp: "execvp" => unsafe extern "C" fn(*const c_char, Argv) -> c_int;
    real_execvpe: "execvpe" => unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
    real_fexecve: "fexecve" => unsafe extern "C" fn(c_int, Argv, Argv) -> c_int;
}

extern "C" {
    /// The process's environment (what `execl` and `execv` pass on).
    static environ: Argv;
}

/// Completes the trace if this process records, runs `exec`, and if that returns (failed),
/// says that the rest of the run is not recorded, keeping the exec's `errno`.
fn ending_recording(exec: impl FnOnce() -> c_int) -> c_int {
    let ended = recorder::end_at_exec();
    let r = exec();
    if ended {
        // SAFETY: errno is thread-local; read, then restored after the message.
        let err = unsafe { *libc::__errno_location() };
        eprintln!(
            "cachescope: exec failed ({}); the trace ended at the exec, the rest of the run is \
             not recorded",
            std::io::Error::from_raw_os_error(err)
        );
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = err };
    }
    r
}

/// Interposed `execve`.
#[no_mangle]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: forwarding the caller's arguments.
    ending_recording(|| unsafe { real_execve()(path, argv, envp) })
}

/// Interposed `execv`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    // SAFETY: forwarding the caller's arguments.
    ending_recording(|| unsafe { real_execv()(path, argv) })
}

/// Interposed `execvp`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    // SAFETY: forwarding the caller's arguments.
    ending_recording(|| unsafe { real_execvp()(file, argv) })
}

/// Interposed `execvpe`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: forwarding the caller's arguments.
    ending_recording(|| unsafe { real_execvpe()(file, argv, envp) })
}

/// Interposed `fexecve`.
#[no_mangle]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    // SAFETY: forwarding the caller's arguments.
    ending_recording(|| unsafe { real_fexecve()(fd, argv, envp) })
}

/// Which function [`exec_list`] stands for.
const EXECL: u32 = 0;
const EXECLP: u32 = 1;
const EXECLE: u32 = 2;

/// The list functions' common part: `regs` holds the five argument registers after the path
/// (`arg0` and the next four), `stack` the arguments passed on the stack; the list ends with
/// a null pointer, which `execle` follows with the environment.
unsafe extern "C" fn exec_list(path: *const c_char, regs: Argv, stack: Argv, which: u32) -> c_int {
    // SAFETY: the caller passed a null-terminated list (as execl requires); `regs` has five
    // entries, and the rest are the caller's stack arguments, read up to the terminator (and
    // for execle one more).
    let arg = |i: usize| unsafe {
        if i < 5 {
            *regs.add(i)
        } else {
            *stack.add(i - 5)
        }
    };
    let mut argv = Vec::new();
    loop {
        let a = arg(argv.len());
        argv.push(a);
        if a.is_null() {
            break;
        }
    }
    // SAFETY: forwarding to the interposers with a null-terminated argv; `environ` is the
    // process's environment.
    unsafe {
        match which {
            EXECLP => execvp(path, argv.as_ptr()),
            EXECLE => execve(path, argv.as_ptr(), arg(argv.len()).cast()),
            _ => execve(path, argv.as_ptr(), environ),
        }
    }
}

/// Defines a variadic `exec` list function that saves its argument registers and calls
/// [`exec_list`] (path still in `rdi`). At entry `rsp` is 8 past a 16-byte boundary; five
/// pushes realign it for the call, and the caller's stack arguments start 48 bytes up (the
/// pushes, then the return address).
macro_rules! exec_list_fn {
    ($name:ident, $which:expr) => {
        #[doc = concat!("Interposed `", stringify!($name), "` (variadic; see the module docs).")]
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, arg0: *const c_char) -> c_int {
            core::arch::naked_asm!(
                "push r9",
                "push r8",
                "push rcx",
                "push rdx",
                "push rsi",
                "mov rsi, rsp",
                "lea rdx, [rsp + 48]",
                "mov ecx, {which}",
                "call {list}",
                "add rsp, 40",
                "ret",
                which = const $which,
                list = sym exec_list,
            )
        }
    };
}

exec_list_fn!(execl, EXECL);
exec_list_fn!(execlp, EXECLP);
exec_list_fn!(execle, EXECLE);
