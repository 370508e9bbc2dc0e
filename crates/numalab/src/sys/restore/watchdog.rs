//! The watchdog: a small process that puts back the settings this process
//! holds when it ends without doing so itself (SIGKILL, an abort, a
//! `process::exit` past the guards), within milliseconds and without
//! waiting for another numalab command.
//!
//! The first setting a process holds starts it: a double fork, so that it
//! is nobody's child to wait for. The process tells it each setting it
//! holds and releases over a socket only the two share; the watchdog
//! watches the process through a pidfd (and the socket's end, where the
//! kernel has no pidfds). When the process is gone it reads what is left
//! to say, restores every setting still held under the journal's lock,
//! latest first, exactly as a replay would (only a value still at what the
//! process wrote, only an entry that is still the process's own file),
//! removes their entries, writes one line each on the process's stderr
//! and exits.
//!
//! It runs in the child of a fork of a process that may have many threads:
//! from the fork on it uses system calls and fixed buffers only, never the
//! allocator or a lock another thread may have held.
//!
//! If the watchdog itself is killed (a `kill -9` of the process group),
//! the journal entry stays, and the next numalab command restores it.

use super::handler::{fill, read_setting, PATH_CAP, SLOTS, VALUE_CAP};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

const HOLD: u8 = 1;
const RELEASE: u8 = 2;

/// One message: a setting held (with all the watchdog needs to restore
/// it) or released. Well under PIPE_BUF, and sent as one packet.
#[derive(Clone, Copy)]
#[repr(C)]
struct Message {
    kind: u8,
    has_set: u8,
    slot: u16,
    pid: u32,
    order: u64,
    /// The journal entry's identity when written: an entry replaced since
    /// (another command replayed it and took the setting) is not ours.
    entry_dev: u64,
    entry_ino: u64,
    path: [u8; PATH_CAP],
    entry: [u8; PATH_CAP],
    lock: [u8; PATH_CAP],
    saved: [u8; VALUE_CAP],
    set: [u8; VALUE_CAP],
}

const EMPTY: Message = Message {
    kind: 0,
    has_set: 0,
    slot: 0,
    pid: 0,
    order: 0,
    entry_dev: 0,
    entry_ino: 0,
    path: [0; PATH_CAP],
    entry: [0; PATH_CAP],
    lock: [0; PATH_CAP],
    saved: [0; VALUE_CAP],
    set: [0; VALUE_CAP],
};

/// This process's end of the socket, and whose it is: a child forked
/// without exec that takes a setting starts its own watchdog.
struct Channel {
    owner: u32,
    sock: OwnedFd,
}

static CHANNEL: Mutex<Option<Channel>> = Mutex::new(None);

/// What a held setting is, for [`held`].
pub(crate) struct Held<'a> {
    pub slot: usize,
    pub order: u64,
    pub path: &'a Path,
    pub entry: &'a Path,
    pub lock: &'a Path,
    pub saved: &'a str,
    pub set: Option<&'a str>,
}

/// Tells the watchdog (started on first use) that a setting is held. A
/// watchdog that cannot be started or told is not an error: the journal
/// entry is written, and the next numalab command restores it.
pub(crate) fn held(h: &Held) {
    let Ok(meta) = std::fs::symlink_metadata(h.entry) else {
        return;
    };
    let mut m = EMPTY;
    m.kind = HOLD;
    m.slot = h.slot as u16;
    m.pid = std::process::id();
    m.order = h.order;
    m.entry_dev = meta.dev();
    m.entry_ino = meta.ino();
    m.has_set = h.set.is_some() as u8;
    let ok = fill(&mut m.path, h.path.as_os_str().as_bytes())
        && fill(&mut m.entry, h.entry.as_os_str().as_bytes())
        && fill(&mut m.lock, h.lock.as_os_str().as_bytes())
        && fill(&mut m.saved, h.saved.as_bytes())
        && fill(&mut m.set, h.set.unwrap_or("").as_bytes());
    if ok {
        send(&m, true);
    }
}

/// Tells the watchdog that a setting was restored by this process.
pub(crate) fn released(slot: usize) {
    let mut m = EMPTY;
    m.kind = RELEASE;
    m.slot = slot as u16;
    send(&m, false);
}

fn send(m: &Message, start: bool) {
    let mut ch = CHANNEL.lock().unwrap_or_else(|p| p.into_inner());
    let me = std::process::id();
    if ch.as_ref().is_none_or(|c| c.owner != me) {
        if !start {
            return;
        }
        *ch = spawn().ok().map(|sock| Channel { owner: me, sock });
    }
    let Some(c) = ch.as_ref() else { return };
    // SAFETY: send of a plain struct from our own memory on our socket;
    // MSG_NOSIGNAL: a dead watchdog is an error, not a SIGPIPE.
    let n = unsafe {
        libc::send(
            c.sock.as_raw_fd(),
            (m as *const Message).cast(),
            std::mem::size_of::<Message>(),
            libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        // The watchdog is gone: the journal is the fallback.
        *ch = None;
    }
}

/// Starts the watchdog; this process's end of the socket.
fn spawn() -> std::io::Result<OwnedFd> {
    let mut sv = [0 as libc::c_int; 2];
    // SAFETY: socketpair fills the two-element array.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are ours alone.
    let (mine, theirs) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    // SAFETY: pidfd_open of this process; -1 where the kernel has none.
    let pidfd = unsafe {
        libc::syscall(
            libc::SYS_pidfd_open,
            libc::getpid(),
            libc::PIDFD_NONBLOCK as libc::c_uint,
        )
    } as libc::c_int;
    // SAFETY: open of a NUL-terminated literal.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    // SAFETY: the children below make only async-signal-safe calls on
    // memory prepared before the fork, and end with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above.
        unsafe {
            if libc::fork() != 0 {
                libc::_exit(0);
            }
            watch(theirs.as_raw_fd(), mine.as_raw_fd(), pidfd, null)
        }
    }
    drop(theirs);
    // SAFETY: closing descriptors we opened above.
    unsafe {
        if pidfd >= 0 {
            libc::close(pidfd);
        }
        if null >= 0 {
            libc::close(null);
        }
    }
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut status = 0;
    // SAFETY: waits for the middle child, which exits at once.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
    Ok(mine)
}

/// What the watchdog holds: one message per slot of the handler's table.
struct Table(std::cell::UnsafeCell<[Message; SLOTS]>);
// SAFETY: only the watchdog process touches it, from its one thread.
unsafe impl Sync for Table {}
static TABLE: Table = Table(std::cell::UnsafeCell::new([EMPTY; SLOTS]));

/// The watchdog's life. Async-signal-safe calls only (see the module).
unsafe fn watch(
    sock: libc::c_int,
    parents_end: libc::c_int,
    pidfd: libc::c_int,
    null: libc::c_int,
) -> ! {
    // SAFETY: the whole body: system calls on descriptors and buffers of
    // this process; TABLE is ours alone here.
    unsafe {
        libc::close(parents_end);
        // Ctrl-C at the terminal and a hangup are for the process watched:
        // the watchdog outlives them to see what it left.
        let mut ign: libc::sigaction = std::mem::zeroed();
        ign.sa_sigaction = libc::SIG_IGN;
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in 1..32 {
            let a = match sig {
                libc::SIGINT | libc::SIGHUP | libc::SIGPIPE | libc::SIGQUIT | libc::SIGTSTP => &ign,
                _ => &dfl,
            };
            libc::sigaction(sig, a, std::ptr::null_mut());
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // Hold none of the process's pipes open but stderr, for the lines.
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
        }
        let mut keep = [sock, if pidfd >= 0 { pidfd } else { sock }];
        keep.sort_unstable();
        let mut from = 3u32;
        for k in keep {
            if k as u32 > from {
                close_range(from, k as u32 - 1);
            }
            from = from.max(k as u32 + 1);
        }
        close_range(from, u32::MAX);
        libc::prctl(libc::PR_SET_NAME, c"numalab-restore".as_ptr());

        let table = &mut *TABLE.0.get();
        let mut fds = [
            libc::pollfd {
                fd: sock,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let nfds = if pidfd >= 0 { 2 } else { 1 };
        loop {
            if libc::poll(fds.as_mut_ptr(), nfds, -1) < 0 {
                continue;
            }
            let gone = nfds == 2 && fds[1].revents != 0;
            if fds[0].revents & libc::POLLIN != 0 && !receive(sock, table) {
                break;
            }
            if gone || fds[0].revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                break;
            }
        }
        // What the process said before it went.
        while receive(sock, table) {}
        restore_all(table);
        libc::_exit(0)
    }
}

unsafe fn close_range(first: u32, last: u32) {
    // SAFETY: close_range closes descriptors of this process only.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, 0) != 0 {
            for fd in first..last.min(4096) {
                libc::close(fd as libc::c_int);
            }
        }
    }
}

/// Takes one message, if one is waiting; false at the end (the process
/// closed its end) or when none is.
unsafe fn receive(sock: libc::c_int, table: &mut [Message; SLOTS]) -> bool {
    let mut m = EMPTY;
    // SAFETY: recv into a local struct of the packet's size.
    let n = unsafe {
        libc::recv(
            sock,
            (&mut m as *mut Message).cast(),
            std::mem::size_of::<Message>(),
            libc::MSG_DONTWAIT,
        )
    };
    if n != std::mem::size_of::<Message>() as isize {
        return false;
    }
    let Some(slot) = table.get_mut(m.slot as usize) else {
        return true;
    };
    match m.kind {
        HOLD => *slot = m,
        RELEASE => slot.kind = 0,
        _ => {}
    }
    true
}

/// Restores what is still held, latest first.
unsafe fn restore_all(table: &mut [Message; SLOTS]) {
    loop {
        let mut pick: Option<usize> = None;
        for (i, m) in table.iter().enumerate() {
            if m.kind == HOLD && pick.is_none_or(|p| m.order > table[p].order) {
                pick = Some(i);
            }
        }
        let Some(i) = pick else { return };
        // SAFETY: system calls on the message's NUL-terminated buffers.
        unsafe { restore(&table[i]) };
        table[i].kind = 0;
    }
}

fn cstr_len(b: &[u8]) -> usize {
    b.iter().position(|c| *c == 0).unwrap_or(b.len())
}

unsafe fn say(parts: &[&[u8]]) {
    for p in parts {
        // SAFETY: write of our own buffers to stderr.
        unsafe { libc::write(2, p.as_ptr().cast(), p.len()) };
    }
}

/// Puts one setting back, as `placement::settings::Journal::replay` would.
unsafe fn restore(m: &Message) {
    // SAFETY: system calls on the message's NUL-terminated buffers and on
    // local structs.
    unsafe {
        let lock = libc::open(
            m.lock.as_ptr().cast(),
            libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
        );
        if lock >= 0 {
            while libc::flock(lock, libc::LOCK_EX) != 0 && *libc::__errno_location() == libc::EINTR
            {
            }
        }
        let mut st: libc::stat = std::mem::zeroed();
        let ours = libc::lstat(m.entry.as_ptr().cast(), &mut st) == 0
            && st.st_dev == m.entry_dev
            && st.st_ino == m.entry_ino;
        if ours {
            restore_value(m);
        }
        if lock >= 0 {
            libc::close(lock);
        }
    }
}

unsafe fn restore_value(m: &Message) {
    // SAFETY: as in `restore`.
    unsafe {
        let mut now = [0u8; VALUE_CAP];
        let (n, len) = read_setting(&m.path, &mut now);
        let saved = &m.saved[..cstr_len(&m.saved)];
        let set = &m.set[..cstr_len(&m.set)];
        let path = &m.path[..cstr_len(&m.path)];
        let mut digits = [0u8; 10];
        let pid = decimal(m.pid, &mut digits);
        if n < 0 || now[..len] == *saved {
            libc::unlink(m.entry.as_ptr().cast());
            return;
        }
        if m.has_set != 0 && now[..len] != *set {
            libc::unlink(m.entry.as_ptr().cast());
            say(&[
                b"numalab: warning: left ",
                path,
                b" at ",
                &now[..len],
                b": numalab pid ",
                pid,
                b" ended without restoring it to ",
                saved,
                b", but it has changed since\n",
            ]);
            return;
        }
        let fd = libc::open(m.path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
        let (written, errno) = if fd >= 0 {
            let w = libc::write(fd, saved.as_ptr().cast(), saved.len());
            let e = *libc::__errno_location();
            libc::close(fd);
            (w, e)
        } else {
            (-1, 0)
        };
        if written == saved.len() as isize {
            libc::unlink(m.entry.as_ptr().cast());
            say(&[
                b"numalab: warning: restored ",
                path,
                b" to ",
                saved,
                b", left changed by numalab pid ",
                pid,
                b", which ended without restoring it\n",
            ]);
        }
        if written < 0 && errno == libc::ENODEV && super::handler::is_auto_path(&m.path) {
            // See `AUTO_STAYS_OFF`: nothing to retry.
            libc::unlink(m.entry.as_ptr().cast());
            say(&[
                b"numalab: warning: automatic interleave weights stay off (",
                path,
                b" reads false): the kernel has no memory bandwidth data to turn them on; the weights are the same as before\n",
            ]);
        }
        // Otherwise the entry stays: the next numalab command retries and
        // says why it cannot.
    }
}

/// `v` in decimal, in `buf`.
fn decimal(mut v: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_one_packet_and_numbers_print() {
        assert!(std::mem::size_of::<Message>() < 4096);
        let mut b = [0u8; 10];
        assert_eq!(decimal(0, &mut b), b"0");
        assert_eq!(decimal(4294967295, &mut b), b"4294967295");
    }
}
