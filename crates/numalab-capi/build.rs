//! The shared library carries the soname it is installed under
//! (scripts/install-lib.sh: libnumalab.so.0), so that programs linked with
//! -lnumalab ask for libnumalab.so.0 at run time, whatever the file cargo
//! wrote is called.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnumalab.so.0");
}
