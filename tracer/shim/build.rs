//! Gives the shim a SONAME. `cachescope record` preloads the shim that matches the running
//! `cachescope`; with a SONAME the loader then treats the program's own `DT_NEEDED` entry as
//! already satisfied instead of loading a second copy from the program's rpath.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcachescope_shim.so");
}
