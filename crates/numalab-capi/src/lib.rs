//! libnumalab: numalab's placement framework as a C library (docs/api.md).
//!
//! The machine model, resource sets in numalab's grammar (named and
//! nested), memory policies (bind, preferred, interleave, striped,
//! weighted, first touch by a team), thread binding by thread policies,
//! and verification from the kernel, for C, C++ and Fortran programs. The
//! header `include/numalab.h` is generated from this crate by cbindgen
//! (`tests/header.rs` fails when it is stale) and documents every call.
//!
//! Every exported function runs inside `guard`: a panic becomes the
//! status `NUMALAB_E_INTERNAL`, never an unwind into C; every failure
//! leaves a one-line message for [`numalab_last_error`]. Objects are
//! handed out as handles that are looked up in a registry on every call
//! (`handles`), so a freed or foreign handle is an error status, never a
//! use after free.
#![allow(non_camel_case_types)]
// The C names are the API; Rust-side names follow them.
#![allow(clippy::upper_case_acronyms)]

mod args;
mod handles;
pub mod machine;
pub mod memory;
pub mod results;
pub mod sets;
pub mod threads;
pub mod verify;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What every call returns. `NUMALAB_OK` is 0; for anything else
/// `numalab_last_error()` says what went wrong, in one line.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum numalab_status {
    /// Success.
    NUMALAB_OK = 0,
    /// A bad argument: unknown CPU or node, a policy or set expression
    /// that does not parse, an impossible request.
    NUMALAB_E_INVALID = 1,
    /// A pointer argument that must not be NULL was NULL.
    NUMALAB_E_NULL = 2,
    /// A handle or address numalab did not hand out, or one already freed.
    NUMALAB_E_HANDLE = 3,
    /// A size or count so large that it overflows, or beyond numalab's
    /// bounds.
    NUMALAB_E_OVERFLOW = 4,
    /// The kernel or system lacks a feature (e.g. weighted interleave
    /// before Linux 6.9).
    NUMALAB_E_UNSUPPORTED = 5,
    /// Not permitted (capabilities, cgroup cpuset, sysfs).
    NUMALAB_E_PERMISSION = 6,
    /// A strict placement that does not fit in the nodes' free memory.
    NUMALAB_E_CAPACITY = 7,
    /// Any other failure of the operating system.
    NUMALAB_E_OS = 8,
    /// An output buffer too small: it holds what fits (NUL-terminated),
    /// and the size needed was reported.
    NUMALAB_E_TRUNCATED = 9,
    /// A bug in numalab, caught at the library's boundary; the message
    /// says where.
    NUMALAB_E_INTERNAL = 10,
}

pub use numalab_status::*;

/// Most NUMA nodes a node array (`numalab_page_counts.by_node`) holds:
/// Linux's largest configuration (`NODES_SHIFT` 10).
pub const NUMALAB_MAX_NODES: usize = 1024;

/// Most CPUs a CPU mask in a result holds: Linux's largest configuration
/// (`NR_CPUS` 8192 with MAXSMP).
pub const NUMALAB_MAX_CPUS: usize = 8192;

/// 64-bit words of a CPU mask (`NUMALAB_MAX_CPUS` bits).
pub const NUMALAB_CPU_MASK_WORDS: usize = NUMALAB_MAX_CPUS / 64;

/// 64-bit words of a node mask (`NUMALAB_MAX_NODES` bits).
pub const NUMALAB_NODE_MASK_WORDS: usize = NUMALAB_MAX_NODES / 64;

/// Bytes of the message field of a check result, NUL included.
pub const NUMALAB_MESSAGE_BYTES: usize = 1024;

/// A failed call: its status and its one-line message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fail {
    pub status: numalab_status,
    pub message: String,
}

impl Fail {
    pub fn new(status: numalab_status, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(NUMALAB_E_INVALID, message)
    }

    pub fn overflow(message: impl Into<String>) -> Self {
        Self::new(NUMALAB_E_OVERFLOW, message)
    }
}

impl From<numalab::placement::PlacementError> for Fail {
    fn from(e: numalab::placement::PlacementError) -> Self {
        use numalab::placement::PlacementError as P;
        let status = match &e {
            P::Invalid(_) => NUMALAB_E_INVALID,
            P::Unsupported(_) => NUMALAB_E_UNSUPPORTED,
            P::Permission(_) => NUMALAB_E_PERMISSION,
            P::Capacity(_) => NUMALAB_E_CAPACITY,
            P::Os(_) => NUMALAB_E_OS,
        };
        Self::new(status, e.to_string())
    }
}

pub(crate) type Result<T> = std::result::Result<T, Fail>;

thread_local! {
    /// The message of this thread's last call: empty after a success.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    // A C string ends at the first NUL: keep the rest readable.
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// Runs one exported call: its status, its message kept for
/// [`numalab_last_error`], and a panic turned into `NUMALAB_E_INTERNAL`
/// instead of unwinding into the C caller.
pub(crate) fn guard(call: &str, f: impl FnOnce() -> Result<()>) -> numalab_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            set_last_error("");
            NUMALAB_OK
        }
        Ok(Err(fail)) => {
            set_last_error(&format!("{call}: {}", fail.message));
            fail.status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            set_last_error(&format!(
                "{call}: internal error in numalab ({what}); please report it"
            ));
            NUMALAB_E_INTERNAL
        }
    }
}

/// The message of the last call made on this thread: one line naming
/// the function and the problem, or "" when that call succeeded. Never
/// NULL; valid until the thread's next numalab call.
#[no_mangle]
pub extern "C" fn numalab_last_error() -> *const c_char {
    // Reading a thread-local cannot panic once the thread runs; a panic
    // here would abort rather than unwind (extern "C").
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// The name of a status (`"NUMALAB_E_INVALID"`), or `"unknown status"`
/// for a number that is none. Never NULL; a static string.
#[no_mangle]
pub extern "C" fn numalab_status_name(status: c_int) -> *const c_char {
    let name: &'static [u8] = match status {
        0 => b"NUMALAB_OK\0",
        1 => b"NUMALAB_E_INVALID\0",
        2 => b"NUMALAB_E_NULL\0",
        3 => b"NUMALAB_E_HANDLE\0",
        4 => b"NUMALAB_E_OVERFLOW\0",
        5 => b"NUMALAB_E_UNSUPPORTED\0",
        6 => b"NUMALAB_E_PERMISSION\0",
        7 => b"NUMALAB_E_CAPACITY\0",
        8 => b"NUMALAB_E_OS\0",
        9 => b"NUMALAB_E_TRUNCATED\0",
        10 => b"NUMALAB_E_INTERNAL\0",
        _ => b"unknown status\0",
    };
    name.as_ptr() as *const c_char
}

/// The library's version, e.g. `"0.1.0"`. Never NULL; a static string.
#[no_mangle]
pub extern "C" fn numalab_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last() -> String {
        // SAFETY: numalab_last_error never returns NULL and the string
        // lives until this thread's next call.
        unsafe { CStr::from_ptr(numalab_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let s = guard("numalab_test", || panic!("boom {}", 7));
        assert_eq!(s, NUMALAB_E_INTERNAL);
        assert_eq!(
            last(),
            "numalab_test: internal error in numalab (boom 7); please report it"
        );
        let s = guard("numalab_test", || -> Result<()> {
            std::panic::panic_any(42u8);
        });
        assert_eq!(s, NUMALAB_E_INTERNAL);
        assert!(last().contains("a panic without a message"));
        // The next success clears it.
        assert_eq!(guard("numalab_test", || Ok(())), NUMALAB_OK);
        assert_eq!(last(), "");
    }

    #[test]
    fn failures_name_the_call_and_messages_stay_per_thread() {
        let s = guard("numalab_x", || Err(Fail::invalid("node 9 does not exist")));
        assert_eq!(s, NUMALAB_E_INVALID);
        assert_eq!(last(), "numalab_x: node 9 does not exist");
        std::thread::spawn(|| assert_eq!(last(), ""))
            .join()
            .unwrap();
        assert_eq!(last(), "numalab_x: node 9 does not exist");
        guard("numalab_x", || Err(Fail::invalid("a\0b")));
        assert_eq!(last(), "numalab_x: a\\0b");
    }

    #[test]
    fn status_names_and_version() {
        // SAFETY: static NUL-terminated strings.
        let name = |s| {
            // SAFETY: the test passes valid pointers and sizes.
            unsafe { CStr::from_ptr(numalab_status_name(s)) }
                .to_str()
                .unwrap()
        };
        assert_eq!(name(0), "NUMALAB_OK");
        assert_eq!(name(NUMALAB_E_INTERNAL as c_int), "NUMALAB_E_INTERNAL");
        assert_eq!(name(-1), "unknown status");
        assert_eq!(name(11), "unknown status");
        // SAFETY: as above.
        let v = unsafe { CStr::from_ptr(numalab_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}
