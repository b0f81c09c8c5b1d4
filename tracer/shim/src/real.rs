//! Finding the next definition of a function the shim interposes (`dlsym(RTLD_NEXT)`), once.

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A lazily resolved pointer to the real implementation of an interposed function.
pub(crate) struct Real {
    name: &'static CStr,
    addr: AtomicUsize,
}

impl Real {
    /// A function named `name`, resolved on first use.
    pub const fn new(name: &'static CStr) -> Self {
        Real {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// The real function's address, or `None` when no later module defines it.
    pub fn get(&self) -> Option<usize> {
        let a = self.addr.load(Ordering::Acquire);
        if a != 0 {
            return Some(a);
        }
        // SAFETY: `name` is NUL-terminated; RTLD_NEXT searches the modules after the shim.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
        if p == 0 {
            return None;
        }
        self.addr.store(p, Ordering::Release);
        Some(p)
    }

    /// Like [`Real::get`], but a missing function is fatal: the program called a function the
    /// shim interposes, so its real definition must exist.
    pub fn expect(&self) -> usize {
        match self.get() {
            Some(a) => a,
            None => {
                let name = self.name.to_bytes();
                let parts: [&[u8]; 3] = [
                    b"cachescope: the recorder interposes `",
                    name,
                    b"`, but no library loaded after it defines it (is the library that \
                      provides it linked? e.g. -lgomp for GOMP_ functions)\n",
                ];
                for part in parts {
                    // SAFETY: writing a live byte slice to stderr.
                    unsafe { libc::write(2, part.as_ptr().cast(), part.len()) };
                }
                std::process::abort()
            }
        }
    }
}

/// Declares a [`Real`] and a typed getter for it.
macro_rules! real_fn {
    ($($getter:ident: $name:literal => $ty:ty;)*) => {$(
        #[doc = concat!("The real `", $name, "`.")]
        fn $getter() -> $ty {
            static REAL: $crate::real::Real = $crate::real::Real::new(
                match std::ffi::CStr::from_bytes_with_nul(concat!($name, "\0").as_bytes()) {
                    Ok(c) => c,
                    Err(_) => panic!("bad symbol name"),
                },
            );
            let addr = REAL.expect();
            // SAFETY: `addr` is the address of the function `$name`, whose C signature is `$ty`.
            unsafe { std::mem::transmute::<usize, $ty>(addr) }
        }
    )*};
}
pub(crate) use real_fn;
