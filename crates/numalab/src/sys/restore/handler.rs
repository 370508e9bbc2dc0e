//! What the signal handler restores, and the handler: fixed slots it can
//! read without locks or allocation, filled while a setting is held.

use super::AUTO_NAMES;
use std::cell::UnsafeCell;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

pub(crate) const SLOTS: usize = 128;
pub(crate) const PATH_CAP: usize = 512;
pub(crate) const VALUE_CAP: usize = 64;

pub(crate) const FREE: u8 = 0;
pub(crate) const FILLING: u8 = 1;
pub(crate) const READY: u8 = 2;
pub(crate) const HANDLING: u8 = 3;

pub(crate) struct SlotData {
    path: [u8; PATH_CAP],
    entry: [u8; PATH_CAP],
    saved: [u8; VALUE_CAP],
    saved_len: usize,
}

pub(crate) struct Slot {
    state: AtomicU8,
    order: AtomicU64,
    data: UnsafeCell<SlotData>,
}

// SAFETY: `data` is written only by the thread that moved `state` from FREE
// to FILLING, and read only by the one that moved it from READY to
// HANDLING; the atomic transitions order those accesses.
unsafe impl Sync for Slot {}

impl Slot {
    const fn new() -> Self {
        Self {
            state: AtomicU8::new(FREE),
            order: AtomicU64::new(0),
            data: UnsafeCell::new(SlotData {
                path: [0; PATH_CAP],
                entry: [0; PATH_CAP],
                saved: [0; VALUE_CAP],
                saved_len: 0,
            }),
        }
    }
}

pub(crate) static SLOT_TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
pub(crate) static SLOT_ORDER: AtomicU64 = AtomicU64::new(1);

/// Copies `s` and a NUL into `buf`; false when it does not fit.
/// Reads the setting at the NUL-terminated `path` into `now`: what read(2)
/// returned (0 when the file could not be opened) and the length without
/// trailing whitespace. Async-signal-safe (the handler and the watchdog).
pub(crate) unsafe fn read_setting(path: &[u8], now: &mut [u8; VALUE_CAP]) -> (isize, usize) {
    // SAFETY: `path` is NUL-terminated (filled by `fill`); `now` is ours.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        let mut n = 0isize;
        if fd >= 0 {
            n = libc::read(fd, now.as_mut_ptr().cast(), VALUE_CAP);
            libc::close(fd);
        }
        let mut len = n.max(0) as usize;
        while len > 0 && now[len - 1].is_ascii_whitespace() {
            len -= 1;
        }
        (n, len)
    }
}

pub(crate) fn fill(buf: &mut [u8], s: &[u8]) -> bool {
    if s.len() >= buf.len() || s.contains(&0) {
        return false;
    }
    buf[..s.len()].copy_from_slice(s);
    buf[s.len()] = 0;
    true
}

/// Takes a slot for the handler and installs it; called with [`HELD`] locked.
pub(crate) fn claim_slot(path: &Path, entry: &Path, saved: &str) -> Result<usize, String> {
    install_handlers();
    for (i, slot) in SLOT_TABLE.iter().enumerate() {
        if slot
            .state
            .compare_exchange(FREE, FILLING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        // SAFETY: FILLING is ours alone (see `Slot`).
        let d = unsafe { &mut *slot.data.get() };
        let ok = fill(&mut d.path, path.as_os_str().as_bytes())
            && fill(&mut d.entry, entry.as_os_str().as_bytes())
            && fill(&mut d.saved, saved.as_bytes());
        if !ok {
            slot.state.store(FREE, Ordering::Release);
            return Err(format!(
                "cannot record {} for restoring on a signal: its path, the journal's ({}) or its value is too long",
                path.display(),
                entry.display()
            ));
        }
        d.saved_len = saved.len();
        slot.order
            .store(SLOT_ORDER.fetch_add(1, Ordering::SeqCst), Ordering::Relaxed);
        slot.state.store(READY, Ordering::Release);
        return Ok(i);
    }
    Err(format!(
        "cannot change more than {SLOTS} system settings at once"
    ))
}

/// Gives a slot back; a slot the handler took stays its own (the process is
/// ending). Called with [`HELD`] locked.
pub(crate) fn release_slot(i: usize) {
    let _ = SLOT_TABLE[i]
        .state
        .compare_exchange(READY, FREE, Ordering::AcqRel, Ordering::Relaxed);
    if SLOT_TABLE
        .iter()
        .all(|s| s.state.load(Ordering::Acquire) == FREE)
    {
        uninstall_handlers();
    }
}

/// Set when the automatic-weights switch could not be turned back on
/// because the kernel has no memory bandwidth data (ENODEV): it reads
/// "true" at boot, but then only because no weight was ever written, and
/// turning it on needs that data. Its weights without the data are all 1,
/// the weights restored before it, so what interleaving does is unchanged;
/// only the switch reads "false". Retrying could never succeed: the entry
/// goes, and the handler's last line says so.
pub(crate) static AUTO_STAYS_OFF: AtomicBool = AtomicBool::new(false);

/// Whether the NUL-terminated `path` names the automatic-weights switch
/// ([`AUTO_NAMES`]). Async-signal-safe.
pub(crate) fn is_auto_path(path: &[u8]) -> bool {
    let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
    AUTO_NAMES.iter().any(|n| {
        let n = n.as_bytes();
        end > n.len() && path[..end].ends_with(n) && path[end - n.len() - 1] == b'/'
    })
}

/// The line the handler ends with, in two parts written one after the
/// other (a handler cannot format): what stopped it, and how it ends.
pub(crate) fn stopped_line(sig: libc::c_int, auto_stays_off: bool) -> [&'static [u8]; 2] {
    let start: &[u8] = match sig {
        libc::SIGINT => b"numalab: stopped by SIGINT; the system settings it changed are restored",
        libc::SIGTERM => {
            b"numalab: stopped by SIGTERM; the system settings it changed are restored"
        }
        _ => b"numalab: stopped by SIGHUP; the system settings it changed are restored",
    };
    let end: &[u8] = if auto_stays_off {
        b", but automatic interleave weights stay off (the kernel has no bandwidth data to turn them on; the weights are the same)\n"
    } else {
        b"\n"
    };
    [start, end]
}

/// Restores every ready slot, latest change first. Async-signal-safe:
/// atomics, open, read, write, close and unlink on buffers prepared
/// beforehand.
pub(crate) fn restore_slots() {
    let mut below = u64::MAX;
    loop {
        let mut pick: Option<(usize, u64)> = None;
        for (i, s) in SLOT_TABLE.iter().enumerate() {
            let o = s.order.load(Ordering::Relaxed);
            if s.state.load(Ordering::Acquire) == READY && o < below && pick.is_none_or(|p| o > p.1)
            {
                pick = Some((i, o));
            }
        }
        let Some((i, o)) = pick else { return };
        below = o;
        let slot = &SLOT_TABLE[i];
        if slot
            .state
            .compare_exchange(READY, HANDLING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        // SAFETY: HANDLING is ours alone (see `Slot`); the buffers hold
        // NUL-terminated paths and `saved_len` value bytes.
        unsafe {
            let d = &*slot.data.get();
            let mut now = [0u8; VALUE_CAP];
            let (_, len) = read_setting(&d.path, &mut now);
            if now[..len] != d.saved[..d.saved_len] {
                let fd = libc::open(d.path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    let written = libc::write(fd, d.saved.as_ptr().cast(), d.saved_len);
                    let errno = *libc::__errno_location();
                    libc::close(fd);
                    if written == d.saved_len as isize {
                        libc::unlink(d.entry.as_ptr().cast());
                    } else if written < 0 && errno == libc::ENODEV && is_auto_path(&d.path) {
                        // See `AUTO_STAYS_OFF`: nothing to retry.
                        libc::unlink(d.entry.as_ptr().cast());
                        AUTO_STAYS_OFF.store(true, Ordering::SeqCst);
                    }
                }
            } else {
                libc::unlink(d.entry.as_ptr().cast());
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The handler of SIGINT, SIGTERM and SIGHUP while settings are held.

pub(crate) const HANDLED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Whether our handler is the one in place (for handlers that chain to the
/// one they replaced: ours then does nothing).
pub(crate) static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The signals whose disposition we replaced (and so put back).
pub(crate) static REPLACED: Mutex<[bool; 3]> = Mutex::new([false; 3]);

pub(crate) extern "C" fn on_signal(sig: libc::c_int) {
    if !INSTALLED.load(Ordering::SeqCst) {
        // Either a handler installed after ours chains to it (it decides),
        // or `uninstall_handlers` is between clearing INSTALLED and putting
        // the default action back: then ours is still the disposition, and
        // the signal must not be lost (a Ctrl-C there ended a `place` with
        // status 0): it gets the default action.
        if default_if_ours(sig) {
            // Pending until this handler returns, then the default.
            // SAFETY: raise is async-signal-safe.
            unsafe { libc::raise(sig) };
        }
        return;
    }
    restore_slots();
    let msg = stopped_line(sig, AUTO_STAYS_OFF.load(Ordering::SeqCst));
    // SAFETY: write and _exit are async-signal-safe; the message is static.
    unsafe {
        for part in msg {
            libc::write(2, part.as_ptr().cast(), part.len());
        }
        libc::_exit(128 + sig);
    }
}

/// Installs [`on_signal`] for each handled signal whose action is the
/// default (ending the process); leaves ignored and handled ones alone.
pub(crate) fn install_handlers() {
    let mut replaced = REPLACED.lock().unwrap_or_else(|p| p.into_inner());
    for (k, &sig) in HANDLED.iter().enumerate() {
        if replaced[k] {
            continue;
        }
        // SAFETY: sigaction with valid pointers to zeroed/filled structs;
        // the handler is an extern "C" fn(c_int).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigfillset(&mut new.sa_mask);
            new.sa_flags = libc::SA_RESTART;
            if libc::sigaction(sig, &new, std::ptr::null_mut()) == 0 {
                replaced[k] = true;
            }
        }
    }
    INSTALLED.store(true, Ordering::SeqCst);
}

/// Puts the default action back for `sig` if [`on_signal`] is its
/// disposition (nobody replaced ours since); whether it did. Only
/// async-signal-safe calls: the handler uses it too.
pub(crate) fn default_if_ours(sig: libc::c_int) -> bool {
    // SAFETY: sigaction with local structs, async-signal-safe.
    unsafe {
        let mut now: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut now) != 0
            || now.sa_sigaction != on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t
        {
            return false;
        }
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, std::ptr::null_mut()) == 0
    }
}

/// Puts the default action back where we replaced it and nobody replaced
/// ours since.
pub(crate) fn uninstall_handlers() {
    let mut replaced = REPLACED.lock().unwrap_or_else(|p| p.into_inner());
    INSTALLED.store(false, Ordering::SeqCst);
    for (k, &sig) in HANDLED.iter().enumerate() {
        if !replaced[k] {
            continue;
        }
        replaced[k] = false;
        default_if_ours(sig);
    }
}

/// The handled signals blocked in this thread for its life, so that a
/// setting is never half changed or half restored when one arrives here.
pub(crate) struct BlockedSignals(libc::sigset_t);

impl BlockedSignals {
    pub(crate) fn new() -> Self {
        // SAFETY: sigset operations on local sets; pthread_sigmask changes
        // only this thread's mask and stores the old one in `old`.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in HANDLED {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            Self(old)
        }
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        // SAFETY: puts back the mask saved in `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_while_the_handlers_are_taken_down_is_not_lost() {
        // In a child: our handler is the disposition but INSTALLED is
        // clear, as in the middle of `uninstall_handlers`. The SIGINT must
        // end it as the default action would, not return to status 0.
        // SAFETY: the child makes only async-signal-safe calls on local
        // structs and ends with _exit; the parent waits for its own child.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                INSTALLED.store(false, Ordering::SeqCst);
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                libc::sigaction(libc::SIGINT, &new, std::ptr::null_mut());
                libc::raise(libc::SIGINT);
                libc::_exit(0);
            }
            let mut status = 0;
            assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
            assert!(
                libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGINT,
                "status {status:#x}"
            );
        }
    }
}
