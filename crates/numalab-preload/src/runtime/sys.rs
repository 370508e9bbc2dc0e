//! System calls made directly: this library interposes `read`, `write`,
//! `mprotect` and friends, so calling them through libc from here would
//! call itself. Each is async-signal-safe. The clocks, the CPU number and
//! the thread id cost no system call: the fault handler runs on every
//! sample.

use std::cell::Cell;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// Writes all of `b` to `fd`, retrying on EINTR and short writes.
pub fn write_all(fd: i32, mut b: &[u8]) {
    while !b.is_empty() {
        // SAFETY: b is a valid readable buffer of b.len() bytes.
        let n = unsafe { libc::syscall(libc::SYS_write, fd, b.as_ptr(), b.len()) };
        if n > 0 {
            b = &b[n as usize..];
        } else if n < 0 && errno() == libc::EINTR {
            continue;
        } else {
            return;
        }
    }
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Opens `path` with `flags` (and mode 0644 when it creates), close-on-exec.
fn open(path: &OsStr, flags: i32) -> Option<i32> {
    let mut c = path.as_bytes().to_vec();
    if c.contains(&0) {
        return None;
    }
    c.push(0);
    // SAFETY: c is NUL-terminated.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c.as_ptr(),
            flags | libc::O_CLOEXEC,
            0o644,
        )
    };
    (fd >= 0).then_some(fd as i32)
}

/// Opens `path` for appending (created 0644).
pub fn open_append(path: &OsStr) -> Option<i32> {
    open(path, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND)
}

/// Opens `path` for reading.
pub fn open_read(path: &OsStr) -> Option<i32> {
    open(path, libc::O_RDONLY)
}

/// One `read(2)`; `None` on an error.
pub fn read_some(fd: i32, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: buf is writable for buf.len() bytes.
    let n = unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) };
    (n >= 0).then_some(n as usize)
}

/// The lowest number the descriptors the library keeps open move to.
///
/// A program may close every descriptor from 3 up (`closefrom`, the
/// daemon pattern) and open files again, or close stdin and expect its
/// next `open` to return 0: a descriptor of the library's on a low number
/// would take the number the program expects, or the program's file would
/// get a number the library still uses, and be read (24 bytes gone from
/// its offset) or closed under it. So the library's events and files sit
/// high, away from the numbers programs count on, and each is known again
/// (`perf_id`, `identity`) before it is read or closed.
pub const HIGH_FD: i32 = 700;

/// `fd` moved to a number from [`HIGH_FD`] up, close-on-exec; `fd`
/// itself where the descriptor limit is lower.
pub fn move_high(fd: i32) -> i32 {
    // SAFETY: fcntl on a descriptor the caller opened.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, HIGH_FD) };
    if high < 0 {
        return fd;
    }
    close(fd);
    high
}

/// `PERF_EVENT_IOC_ID`: `_IOR('$', 7, u64)`.
const PERF_IOC_ID: libc::c_ulong = 0x8008_2407;

/// The kernel's id of the perf event open on `fd`; `None` when `fd` is
/// not a perf event (closed, or a file of the program's now). The magic
/// `'$'` is perf's alone: another file refuses the request unchanged.
pub fn perf_id(fd: i32) -> Option<u64> {
    if fd < 0 {
        return None;
    }
    let mut id = 0u64;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 to the pointer given.
    let r = unsafe { libc::ioctl(fd, PERF_IOC_ID as _, &mut id as *mut u64) };
    (r == 0).then_some(id)
}

/// Closes the perf event `id` on `fd`, and nothing else: a number the
/// program took over is left alone.
pub fn close_event(fd: i32, id: u64) {
    if perf_id(fd) == Some(id) {
        close(fd);
    }
}

/// (device, inode) of the file open on `fd`, or `None` when it is not
/// open.
pub fn identity(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: a zeroed stat filled by fstat.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some((st.st_dev, st.st_ino))
    }
}

pub fn close(fd: i32) {
    #[cfg(test)]
    CLOSED.with(|c| c.borrow_mut().push(fd));
    // SAFETY: closes a descriptor this library opened.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

#[cfg(test)]
thread_local! {
    /// The descriptors this thread closed (unit tests): a descriptor
    /// closed twice closes whatever the program opened under its number
    /// in between.
    static CLOSED: std::cell::RefCell<Vec<i32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The descriptors the calling thread closed since the last call (unit
/// tests).
#[cfg(test)]
pub fn take_closed() -> Vec<i32> {
    CLOSED.with(|c| c.take())
}

/// Bumped in the child of every `fork`: a thread id cached before it is
/// the parent's.
static FORKS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's id and the fork count when it was read.
    static TID: Cell<(u32, u64)> = const { Cell::new((0, u64::MAX)) };
}

extern "C" fn after_fork_in_child() {
    FORKS.fetch_add(1, SeqCst);
}

/// Registers the fork hook that keeps [`gettid`]'s cache true.
pub fn watch_forks() {
    // SAFETY: a valid child hook; no prepare or parent hook.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
}

/// This thread's id, from a per-thread cache: a sample costs no system
/// call for it.
pub fn gettid() -> u32 {
    let forks = FORKS.load(SeqCst);
    TID.with(|c| {
        let (tid, seen) = c.get();
        if seen == forks {
            return tid;
        }
        // SAFETY: gettid has no arguments.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) as u32 };
        c.set((tid, forks));
        tid
    })
}

/// The CPU this thread runs on, or `u32::MAX`: glibc reads it from the
/// thread's rseq area (or the vDSO) without a system call.
pub fn cpu() -> u32 {
    // SAFETY: sched_getcpu has no preconditions and is signal-safe in
    // practice (a read of the rseq area or a vDSO call).
    let c = unsafe { libc::sched_getcpu() };
    if c >= 0 {
        c as u32
    } else {
        u32::MAX
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write; clock_gettime is
    // async-signal-safe (the vDSO: no system call for the monotonic clock).
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time of the whole process (every thread), in ns.
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The usage of `who` so far, by the system call itself (safe in a
/// signal handler): `RUSAGE_SELF`, every thread of the process, ended
/// ones too; `RUSAGE_THREAD`, the calling thread. `None` when refused.
pub fn usage(who: i32) -> Option<libc::rusage> {
    // SAFETY: getrusage writes one rusage into a zeroed one.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let r = unsafe { libc::syscall(libc::SYS_getrusage, who, &mut ru) };
    (r == 0).then_some(ru)
}

/// The voluntary context switches (a wait that blocked: a lock, a
/// barrier, a read) of `who` ([`usage`]); 0 when refused.
pub fn voluntary_switches(who: i32) -> u64 {
    usage(who).map_or(0, |ru| ru.ru_nvcsw as u64)
}

/// CPU time on `clock` (a thread's CPU-time clock), in ns.
pub fn cpu_clock_ns(clock: libc::clockid_t) -> u64 {
    clock_ns(clock)
}

/// `mprotect(2)` itself, not the interposed one.
pub fn mprotect(addr: usize, len: usize, prot: i32) -> i32 {
    // SAFETY: mprotect only changes protections; a bad range is an error.
    unsafe { libc::syscall(libc::SYS_mprotect, addr, len, prot) as i32 }
}

/// Where the page at `page` is, for the sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageState {
    /// Present, on this node (-1: present, node unknown).
    Present(i32),
    Absent,
}

/// Whether the page at `page` is present, and on which node: one
/// `move_pages` query, or `mincore` where the kernel has no NUMA.
pub fn page_state(page: usize, page_size: usize) -> PageState {
    let pages = [page as *mut libc::c_void];
    let mut status: i32 = -1;
    // SAFETY: a query (nodes null) of one page of this process: status
    // receives one int.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            1usize,
            pages.as_ptr(),
            std::ptr::null::<i32>(),
            &mut status as *mut i32,
            0,
        )
    };
    if r == 0 {
        return if status >= 0 {
            PageState::Present(status)
        } else {
            PageState::Absent
        };
    }
    let mut v: u8 = 0;
    // SAFETY: one page, one result byte.
    let r = unsafe { libc::syscall(libc::SYS_mincore, page, page_size, &mut v as *mut u8) };
    if r == 0 && v & 1 == 1 {
        PageState::Present(-1)
    } else {
        PageState::Absent
    }
}

/// Sends `sig` to this thread.
pub fn raise_here(sig: i32) {
    // SAFETY: tgkill to this process and thread.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            libc::syscall(libc::SYS_gettid),
            sig,
        )
    };
}

/// Sleeps `ns` nanoseconds (no signal handling needed: the sampler only).
pub fn sleep_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; the remainder is not needed.
    unsafe {
        libc::syscall(
            libc::SYS_nanosleep,
            &ts,
            std::ptr::null_mut::<libc::timespec>(),
        )
    };
}

/// Moves the calling thread from `SCHED_OTHER` to `SCHED_BATCH`, the
/// same share of the CPUs without wake-up preemption: a thread of the
/// library that wakes then runs when a CPU comes free or at the running
/// thread's next tick, instead of at once in place of a program thread.
/// A thread under any other policy (real-time, idle: the program's,
/// inherited) keeps it. Whether it moved.
pub fn yield_on_wake_up() -> bool {
    // SAFETY: the calling thread (pid 0), priority 0 as the fair policies
    // take.
    unsafe {
        libc::sched_getscheduler(0) == libc::SCHED_OTHER
            && libc::sched_setscheduler(
                0,
                libc::SCHED_BATCH,
                &libc::sched_param { sched_priority: 0 },
            ) == 0
    }
}

/// Runs `f` with the calling thread back under `SCHED_OTHER` when it is
/// under `SCHED_BATCH` (a move between the two fair policies needs no
/// privilege), then moves it back: a measurement of what a wake-up costs
/// must not wait for a CPU.
pub fn undelayed<T>(f: impl FnOnce() -> T) -> T {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: the calling thread (pid 0), a fair policy, priority 0.
    let batch = unsafe {
        libc::sched_getscheduler(0) == libc::SCHED_BATCH
            && libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) == 0
    };
    let r = f();
    if batch {
        // SAFETY: as above.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    }
    r
}

/// One `move_pages` query: the node of each of `pages` (or a negative
/// errno, -ENOENT when not present) into `status`. False when the call
/// itself failed (no NUMA in the kernel).
pub fn query_pages(pages: &[*mut libc::c_void], status: &mut [i32]) -> bool {
    let n = pages.len().min(status.len());
    // SAFETY: n pages and n status slots; nodes null is a query.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0,
            n,
            pages.as_ptr(),
            std::ptr::null::<i32>(),
            status.as_mut_ptr(),
            0,
        )
    };
    r == 0
}

/// Nodes counted by [`page_histogram`]; pages on higher nodes count as -2.
pub const HISTOGRAM_NODES: usize = 64;

/// Pages of `[start, start + len)` per node: `counts[n]` for node n,
/// `absent` not present, `beyond` on nodes past [`HISTOGRAM_NODES`].
pub struct Histogram {
    pub counts: [u64; HISTOGRAM_NODES],
    pub absent: u64,
    pub beyond: u64,
}

/// Where the pages of a region are, by `move_pages` queries of 256 pages
/// at a time (no allocation), asked only where the kernel's page map says
/// some are present ([`crate::runtime::pagemap::present_runs`]; every page on kernels
/// before 6.7); `each(page, node)` sees every whole page in address order
/// (node -1: not present).
pub fn page_histogram(
    start: usize,
    len: usize,
    page_size: usize,
    mut each: impl FnMut(usize, i32),
) -> Histogram {
    let mut h = Histogram {
        counts: [0; HISTOGRAM_NODES],
        absent: 0,
        beyond: 0,
    };
    let first = start.div_ceil(page_size) * page_size;
    let end = (start + len) / page_size * page_size;
    if first >= end {
        return h;
    }
    let mut at = first;
    let mut count = |page: usize, node: i32| {
        each(page, node);
        if node < 0 {
            h.absent += 1;
        } else if (node as usize) < HISTOGRAM_NODES {
            h.counts[node as usize] += 1;
        } else {
            h.beyond += 1;
        }
    };
    let scanned = crate::runtime::pagemap::present_runs(first, end, |s, e| {
        // Runs come page-aligned and in order; the gap before one is absent.
        let s = s / page_size * page_size;
        let e = e.div_ceil(page_size) * page_size;
        while at < s.min(end) {
            count(at, -1);
            at += page_size;
        }
        at = at.max(s);
        query_run(&mut at, e.min(end), page_size, &mut count);
    });
    if !scanned {
        // The kernel cannot say: every page not yet seen is asked.
        query_run(&mut at, end, page_size, &mut count);
    }
    while at < end {
        count(at, -1);
        at += page_size;
    }
    h
}

/// The nodes of the pages from `*at` to `end`, 256 to a `move_pages`
/// query; `*at` ends at `end`.
fn query_run(at: &mut usize, end: usize, page_size: usize, count: &mut impl FnMut(usize, i32)) {
    while *at < end {
        let n = ((end - *at) / page_size).min(256);
        let mut pages = [std::ptr::null_mut::<libc::c_void>(); 256];
        let mut status = [0i32; 256];
        for (i, p) in pages.iter_mut().take(n).enumerate() {
            *p = (*at + i * page_size) as *mut libc::c_void;
        }
        let ok = query_pages(&pages[..n], &mut status[..n]);
        for (i, &s) in status.iter().take(n).enumerate() {
            count(*at + i * page_size, if !ok || s < 0 { -1 } else { s });
        }
        *at += n * page_size;
    }
}

/// How many CPUs this thread may run on, and the first of them.
pub fn affinity() -> (u64, u64) {
    let mut mask = [0u64; 16];
    // SAFETY: the kernel writes at most the 128 bytes given.
    let n = unsafe {
        libc::syscall(
            libc::SYS_sched_getaffinity,
            0,
            std::mem::size_of_val(&mask),
            mask.as_mut_ptr(),
        )
    };
    if n <= 0 {
        return (0, 0);
    }
    let count: u32 = mask.iter().map(|w| w.count_ones()).sum();
    let first = mask
        .iter()
        .enumerate()
        .find(|(_, w)| **w != 0)
        .map_or(0, |(i, w)| i as u64 * 64 + w.trailing_zeros() as u64);
    (count as u64, first)
}

/// The path of this process's descriptor `fd` (`readlink` of
/// /proc/self/fd/FD into `buf`, no allocation); `None` when unreadable or
/// longer than `buf`.
pub fn fd_path(fd: i32, buf: &mut [u8]) -> Option<&[u8]> {
    let mut link = *b"/proc/self/fd/\0\0\0\0\0\0\0\0\0\0\0";
    let mut digits = [0u8; 10];
    let mut n = fd.max(0) as u32;
    let mut k = 0;
    loop {
        digits[k] = b'0' + (n % 10) as u8;
        k += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for (i, d) in digits[..k].iter().rev().enumerate() {
        link[14 + i] = *d;
    }
    // SAFETY: link is NUL-terminated (at most 10 digits after 14 bytes of
    // its 25); readlink writes at most buf.len() bytes.
    let r = unsafe {
        libc::readlink(
            link.as_ptr() as *const libc::c_char,
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
        )
    };
    (r > 0 && (r as usize) < buf.len()).then(|| &buf[..r as usize])
}

/// The CPU thread `tid` of this process last ran on (field 39 of
/// /proc/self/task/TID/stat); allocates: not for signal handlers.
pub fn task_cpu(tid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The name (field 2) may hold spaces: count from after its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(36)?.parse().ok()
}

/// CPU → node, from /sys/devices/system/node/nodeN/cpulist (u8::MAX: none);
/// allocates: not for signal handlers.
pub fn cpu_nodes() -> Vec<u8> {
    // The nodes the kernel may have ("0-3"), not every number up to a
    // bound: on a one-node machine 63 of 64 opens failed at every start.
    let nodes = std::fs::read_to_string("/sys/devices/system/node/possible")
        .map(|l| id_list(&l, 255))
        .unwrap_or_else(|_| (0..64).collect());
    let mut map = Vec::new();
    for node in nodes {
        let path = format!("/sys/devices/system/node/node{node}/cpulist");
        let Ok(list) = std::fs::read_to_string(path) else {
            continue;
        };
        for cpu in id_list(&list, 4095) {
            if map.len() <= cpu {
                map.resize(cpu + 1, u8::MAX);
            }
            map[cpu] = node as u8;
        }
    }
    map
}

/// The ids of a kernel list ("0-3,8,10-11"), those above `max` left out;
/// malformed parts are skipped.
fn id_list(list: &str, max: usize) -> Vec<usize> {
    let mut ids = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) else {
            continue;
        };
        ids.extend(a..=b.min(max));
    }
    ids
}

/// `perf_event_open(attr, tid, any CPU, no group, close-on-exec)` (tid 0:
/// this thread): the descriptor or the errno.
pub fn perf_event_open(attr: &crate::perf::PerfEventAttr, tid: u32) -> Result<i32, i32> {
    perf_event_open_in(attr, tid, -1)
}

/// [`perf_event_open`] as a member of the group whose leader is `group`
/// (-1: none): members start and stop with their leader.
pub fn perf_event_open_in(
    attr: &crate::perf::PerfEventAttr,
    tid: u32,
    group: i32,
) -> Result<i32, i32> {
    // SAFETY: a valid attr of the size it says; `group` is -1 or an open
    // perf descriptor of the same thread.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const crate::perf::PerfEventAttr,
            tid as libc::pid_t,
            -1 as libc::c_int,
            group as libc::c_int,
            crate::perf::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(move_high(fd as i32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_events_sit_high_and_are_known_again() {
        let attr = crate::perf::PerfEventAttr {
            kind: 1, // PERF_TYPE_SOFTWARE
            size: crate::perf::PerfEventAttr::SIZE,
            config: 9, // PERF_COUNT_SW_DUMMY
            flags: crate::perf::ATTR_EXCLUDE_KERNEL | crate::perf::ATTR_EXCLUDE_HV,
            ..Default::default()
        };
        let Ok(fd) = perf_event_open(&attr, 0) else {
            eprintln!("skipped: the kernel opens no software perf event here");
            return;
        };
        assert!(fd >= HIGH_FD, "{fd}");
        let id = perf_id(fd).expect("a perf event has an id");
        // A file under another number is not an event: never closed.
        let file = move_high(open_read(OsStr::new("/dev/null")).unwrap());
        assert!(file >= HIGH_FD && file != fd);
        assert_eq!(perf_id(file), None);
        take_closed();
        close_event(file, id);
        assert_eq!(take_closed(), vec![]);
        assert!(identity(file).is_some());
        close_event(fd, id);
        assert_eq!(take_closed(), vec![fd]);
        assert_eq!(perf_id(fd), None);
        close(file);
        assert_eq!(identity(file), None);
    }

    #[test]
    fn kernel_lists_become_ids_within_their_bound() {
        assert_eq!(id_list("0-3\n", 255), [0, 1, 2, 3]);
        assert_eq!(id_list("0,2-3,8", 255), [0, 2, 3, 8]);
        // A CPU-less node's empty cpulist, and parts that are not ids.
        assert!(id_list("\n", 4095).is_empty());
        assert_eq!(id_list("x,1,2-y,4", 255), [1, 4]);
        // Past the bound: cut there (a range) or left out.
        assert_eq!(id_list("254-300,400", 255), [254, 255]);
    }

    #[test]
    fn this_machines_cpus_have_nodes() {
        // Every CPU this process may run on has a node (one on this VM).
        let map = cpu_nodes();
        let (cpus, _) = affinity();
        assert!(cpus > 0);
        assert!(
            !map.is_empty() && map.iter().filter(|&&n| n != u8::MAX).count() as u64 >= cpus,
            "{map:?}"
        );
    }
}
