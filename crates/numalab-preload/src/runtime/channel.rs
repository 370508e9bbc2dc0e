//! The records' channel: the file `NUMALAB_PROFILE_OUT` (or
//! `NUMALAB_PLAN_OUT`) names, which the program must never be able to
//! take over.
//!
//! A program may close every descriptor from 3 up (the daemon pattern,
//! `closefrom`) or `dup2` its own files onto low numbers; the next file it
//! opens then gets the number the library writes its records to, and the
//! program's file would collect binary records. So the channel sits on a
//! high descriptor (away from the numbers programs `dup2` onto), and its
//! identity (device and inode, from `fstat`) is checked before every
//! write: a descriptor that is closed or names another file is never
//! written; the library opens its file again by path (kept from the start,
//! without allocating later) and counts the loss, which the profile
//! reports. (A program that closes the descriptor and opens a file under
//! the same number between the check and the write would still receive
//! one write; the window is one system call wide.)

use super::sys;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::SeqCst};

/// The longest path kept for reopening.
const PATH_MAX: usize = 4096;

static FD: AtomicI32 = AtomicI32::new(-1);
static DEV: AtomicU64 = AtomicU64::new(0);
static INO: AtomicU64 = AtomicU64::new(0);
/// Times the channel was found closed or replaced and opened again.
static REOPENED: AtomicUsize = AtomicUsize::new(0);
/// Set while one thread reopens: the others drop their record meanwhile.
static REOPENING: AtomicBool = AtomicBool::new(false);

struct Path(std::cell::UnsafeCell<[u8; PATH_MAX + 1]>);
// SAFETY: written once by `open` at the library's start, before any other
// thread can use the channel; read-only afterwards.
unsafe impl Sync for Path {}
static PATH: Path = Path(std::cell::UnsafeCell::new([0; PATH_MAX + 1]));
static PATH_LEN: AtomicUsize = AtomicUsize::new(0);

/// Opens the saved path for appending, on a high descriptor; records its
/// identity. Returns the descriptor, or the errno.
fn open_saved() -> Result<i32, i32> {
    let len = PATH_LEN.load(SeqCst);
    if len == 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: PATH is NUL-terminated at `len` (see `open`) and no longer
    // written.
    let c = unsafe { (*PATH.0.get()).as_ptr() };
    // SAFETY: c is a NUL-terminated path.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c,
            libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
            0o644,
        )
    } as i32;
    if fd < 0 {
        return Err(errno());
    }
    // Where the descriptor limit is below HIGH_FD: the low one, still
    // checked before every write.
    let fd = sys::move_high(fd);
    match sys::identity(fd) {
        Some((dev, ino)) => {
            DEV.store(dev, SeqCst);
            INO.store(ino, SeqCst);
            FD.store(fd, SeqCst);
            Ok(fd)
        }
        None => Err(errno()),
    }
}

fn errno() -> i32 {
    // SAFETY: the calling thread's errno location.
    unsafe { *libc::__errno_location() }
}

/// Opens the channel at `path` (at the library's start, once); the
/// errno when it cannot (a directory, a missing parent, no permission).
pub fn open(path: &OsStr) -> Result<i32, i32> {
    let b = path.as_bytes();
    if b.len() > PATH_MAX {
        return Err(libc::ENAMETOOLONG);
    }
    if b.is_empty() || b.contains(&0) {
        return Err(libc::EINVAL);
    }
    // SAFETY: the library's constructor, before any other thread runs
    // the library's code.
    unsafe {
        let p = &mut *PATH.0.get();
        p[..b.len()].copy_from_slice(b);
        p[b.len()] = 0;
    }
    PATH_LEN.store(b.len(), SeqCst);
    open_saved()
}

/// The channel's descriptor, checked: still open and still the library's
/// file; reopened by path when the program closed or replaced it; -1 when
/// it cannot be had (the record is then lost, the program unaffected).
/// Async-signal-safe (fstat, open, fcntl).
pub fn checked() -> i32 {
    let fd = FD.load(SeqCst);
    if fd < 0 {
        return -1;
    }
    if sys::identity(fd) == Some((DEV.load(SeqCst), INO.load(SeqCst))) {
        return fd;
    }
    // Closed or taken by the program: never written; opened again.
    if REOPENING.swap(true, SeqCst) {
        return -1;
    }
    // Still the same descriptor the others saw (no reopen meanwhile).
    let fd = if FD.load(SeqCst) == fd {
        REOPENED.fetch_add(1, SeqCst);
        open_saved().unwrap_or(-1)
    } else {
        FD.load(SeqCst)
    };
    REOPENING.store(false, SeqCst);
    fd
}

/// Times the channel had to be opened again.
pub fn reopened() -> usize {
    REOPENED.load(SeqCst)
}
