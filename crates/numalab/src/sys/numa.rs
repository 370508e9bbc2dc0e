//! Thin, checked wrappers over the Linux calls placement needs.
//!
//! hwloc's memory binding cannot express every policy we need (it turns a
//! non-strict bind into MPOL_PREFERRED_MANY and has no weighted interleave),
//! so memory policy goes straight to the kernel (docs/policies.md).

use crate::IdSet;
use std::io;

/// Kernel memory policy modes (include/uapi/linux/mempolicy.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Mode {
    Default = 0,
    Preferred = 1,
    Bind = 2,
    Interleave = 3,
    Local = 4,
    PreferredMany = 5,
    WeightedInterleave = 6,
}

impl Mode {
    /// Every mode, in the kernel's numbering.
    pub const ALL: [Mode; 7] = [
        Mode::Default,
        Mode::Preferred,
        Mode::Bind,
        Mode::Interleave,
        Mode::Local,
        Mode::PreferredMany,
        Mode::WeightedInterleave,
    ];

    /// The mode of a [`Mode::kernel_name`].
    pub fn from_kernel_name(name: &str) -> Option<Mode> {
        Self::ALL.into_iter().find(|m| m.kernel_name() == name)
    }

    /// The kernel's name of the mode, as /proc/PID/numa_maps prints it.
    pub fn kernel_name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Preferred => "prefer",
            Mode::Bind => "bind",
            Mode::Interleave => "interleave",
            Mode::Local => "local",
            Mode::PreferredMany => "prefer (many)",
            Mode::WeightedInterleave => "weighted interleave",
        }
    }

    /// The first Linux version that has this mode.
    pub fn min_kernel(self) -> (u32, u32) {
        match self {
            Mode::Local => (3, 8),
            Mode::PreferredMany => (5, 15),
            Mode::WeightedInterleave => (6, 9),
            _ => (2, 6),
        }
    }
}

/// `mbind` flag: fail when existing pages do not follow the policy.
pub const MPOL_MF_STRICT: u32 = 1;
/// `mbind` flag: move existing pages to follow the policy.
pub const MPOL_MF_MOVE: u32 = 2;

/// Node masks handed to the kernel are this many bits wide: enough for any
/// real machine (the kernel rejects masks wider than a page of bits).
const MASK_BITS: usize = 1024;

fn last_os_error() -> io::Error {
    io::Error::last_os_error()
}

/// A CPU or node set in the kernel's bitmask layout, built ahead of time.
/// Handing it to the kernel allocates nothing, so [`set_affinity_mask`] and
/// [`set_mempolicy_mask`] may run where allocating is not allowed: in a
/// child between fork and exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMask {
    words: Vec<u64>,
    empty: bool,
}

impl KernelMask {
    /// The mask of `set`, at least 1024 bits wide.
    pub fn new(set: &IdSet) -> Self {
        Self {
            words: set.to_words(MASK_BITS),
            empty: set.is_empty(),
        }
    }

    /// Pointer and `maxnode` for the memory-policy calls: a null mask for
    /// the empty set; otherwise one more than the mask width, as the kernel
    /// decrements `maxnode` before use.
    fn node_arg(&self) -> (*const u64, libc::c_ulong) {
        if self.empty {
            (std::ptr::null(), 0)
        } else {
            (
                self.words.as_ptr(),
                (self.words.len() * 64 + 1) as libc::c_ulong,
            )
        }
    }
}

/// Applies a memory policy to `[addr, addr+len)` of this process. `addr`
/// must be page aligned.
///
/// Safe for any range: a memory policy decides where pages live, never
/// what they hold (with [`MPOL_MF_MOVE`] the kernel copies each page
/// before it remaps it), and the kernel refuses a range that is not mapped
/// (EFAULT, ENOMEM).
pub fn mbind(addr: usize, len: usize, mode: Mode, nodes: &IdSet, flags: u32) -> io::Result<()> {
    mbind_mask(addr, len, mode, &KernelMask::new(nodes), flags)
}

/// Sets the calling thread's memory policy (inherited by children and exec).
pub fn set_mempolicy(mode: Mode, nodes: &IdSet) -> io::Result<()> {
    set_mempolicy_mask(mode, &KernelMask::new(nodes))
}

/// [`set_mempolicy`] with a mask built beforehand: async-signal-safe (one
/// system call, no allocation), for a child between fork and exec.
pub fn set_mempolicy_mask(mode: Mode, nodes: &KernelMask) -> io::Result<()> {
    let (ptr, maxnode) = nodes.node_arg();
    // SAFETY: plain syscall with a mask that outlives it.
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode as libc::c_int, ptr, maxnode) };
    if r != 0 {
        return Err(last_os_error());
    }
    Ok(())
}

/// The calling thread's memory policy: raw mode number and node mask.
pub fn get_mempolicy() -> io::Result<(i32, IdSet)> {
    let mut mode: libc::c_int = 0;
    let mut m = vec![0u64; MASK_BITS / 64];
    // SAFETY: output buffers are sized for MASK_BITS bits.
    let r = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            m.as_mut_ptr(),
            (MASK_BITS + 1) as libc::c_ulong,
            std::ptr::null_mut::<libc::c_void>(),
            0 as libc::c_ulong,
        )
    };
    if r != 0 {
        return Err(last_os_error());
    }
    Ok((mode, IdSet::from_words(&m)))
}

/// Asks the kernel where each page is, without moving anything
/// (`move_pages` with a null node array). Entries are a node id, or a negative
/// errno: `-ENOENT` for a page never touched. Pages are addresses in
/// `pid`'s address space, as numbers: the kernel reads them, nothing here
/// dereferences them.
pub fn query_page_nodes(pid: i32, pages: &[usize], status: &mut [i32]) -> io::Result<()> {
    assert_eq!(pages.len(), status.len());
    if pages.is_empty() {
        return Ok(());
    }
    // SAFETY: query mode reads `pages` and writes `status`, both sized `len`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            std::ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0 as libc::c_int,
        )
    };
    if r < 0 {
        return Err(last_os_error());
    }
    Ok(())
}

/// Moves pages of process `pid` (0: the caller): `pages[i]` to node
/// `nodes[i]`, with [`MPOL_MF_MOVE`] (only pages no other process maps).
/// `status[i]` receives the node the page is on afterwards, or a negative
/// errno for a page that could not be moved. Returns how many pages the
/// kernel could not move (its return value). Allocates nothing, so a forked
/// child may call it.
pub fn move_pages(
    pid: i32,
    pages: &[usize],
    nodes: &[i32],
    status: &mut [i32],
) -> io::Result<usize> {
    if pages.len() != nodes.len() || pages.len() != status.len() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    if pages.is_empty() {
        return Ok(0);
    }
    // SAFETY: the three arrays hold `len` entries each; the kernel reads
    // `pages` and `nodes` and writes `status`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            nodes.as_ptr(),
            status.as_mut_ptr(),
            MPOL_MF_MOVE as libc::c_int,
        )
    };
    if r < 0 {
        return Err(last_os_error());
    }
    Ok(r as usize)
}

/// [`mbind`] with a mask built beforehand: one system call, no allocation,
/// for a forked child.
pub fn mbind_mask(
    addr: usize,
    len: usize,
    mode: Mode,
    nodes: &KernelMask,
    flags: u32,
) -> io::Result<()> {
    let (ptr, maxnode) = nodes.node_arg();
    // SAFETY: the kernel reads the mask, which outlives the call; the range
    // is only an address to it (see `mbind`).
    let r = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            addr as libc::c_ulong,
            len as libc::c_ulong,
            mode as libc::c_ulong,
            ptr,
            maxnode,
            flags as libc::c_ulong,
        )
    };
    if r != 0 {
        return Err(last_os_error());
    }
    Ok(())
}

/// `migrate_pages(2)` for process `pid` (0: the caller): every page of the
/// process on a node of `from` goes to `to`. It moves the *whole process's*
/// pages there, not one range; with CAP_SYS_NICE in effect the kernel also
/// moves pages shared with other processes (see
/// [`drop_effective_capability`]). Returns how many pages could not be
/// moved. No allocation: a forked child may call it.
pub fn migrate_pages_mask(pid: i32, from: &KernelMask, to: &KernelMask) -> io::Result<usize> {
    let (old, maxnode) = from.node_arg();
    let (new, _) = to.node_arg();
    // SAFETY: both masks are `maxnode - 1` bits wide and outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_migrate_pages,
            pid as libc::c_long,
            maxnode,
            old,
            new,
        )
    };
    if r < 0 {
        return Err(last_os_error());
    }
    Ok(r as usize)
}

/// Linux capability number of CAP_SYS_NICE (include/uapi/linux/capability.h).
pub const CAP_SYS_NICE: u32 = 23;

/// Takes capability `cap` (below 32) out of the calling thread's effective
/// set; it stays permitted. Two system calls, no allocation: a forked child
/// may call it. Without CAP_SYS_NICE in effect, `migrate_pages` and
/// `move_pages` leave pages that other processes map where they are.
pub fn drop_effective_capability(cap: u32) -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    if cap >= 32 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set.
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and two data words, as version 3 requires.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut Header,
            data.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(last_os_error());
    }
    data[0].effective &= !(1 << cap);
    // SAFETY: as above; the kernel only reads them.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if r != 0 {
        return Err(last_os_error());
    }
    Ok(())
}

/// Pins the calling thread (tid 0) or thread `tid` to `cpus`.
pub fn set_affinity(tid: i32, cpus: &IdSet) -> io::Result<()> {
    set_affinity_mask(tid, &KernelMask::new(cpus))
}

/// [`set_affinity`] with a mask built beforehand: async-signal-safe (one
/// system call, no allocation), for a child between fork and exec.
pub fn set_affinity_mask(tid: i32, cpus: &KernelMask) -> io::Result<()> {
    let words = &cpus.words;
    // SAFETY: the mask is `words.len() * 8` bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setaffinity,
            tid as libc::c_long,
            words.len() * 8,
            words.as_ptr(),
        )
    };
    if r != 0 {
        return Err(last_os_error());
    }
    Ok(())
}

/// The CPUs thread `tid` (0: the caller) may run on.
pub fn get_affinity(tid: i32) -> io::Result<IdSet> {
    let mut words = vec![0u64; MASK_BITS / 64];
    // SAFETY: the buffer is `words.len() * 8` bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getaffinity,
            tid as libc::c_long,
            words.len() * 8,
            words.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(last_os_error());
    }
    Ok(IdSet::from_words(&words))
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: no arguments.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as u32)
}

/// The limits that can refuse a new thread, as one line: the soft
/// RLIMIT_NPROC and RLIMIT_AS, the cgroup's pids.max, the kernel's
/// threads-max (each only where it is set or readable).
pub fn thread_limits() -> String {
    let rlimit = |what: libc::__rlimit_resource_t| -> Option<u64> {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given.
        (unsafe { libc::getrlimit(what, &mut r) } == 0 && r.rlim_cur != libc::RLIM_INFINITY)
            .then_some(r.rlim_cur)
    };
    let mut out = Vec::new();
    if let Some(n) = rlimit(libc::RLIMIT_NPROC) {
        out.push(format!("RLIMIT_NPROC {n} (ulimit -u)"));
    }
    if let Some(b) = rlimit(libc::RLIMIT_AS) {
        out.push(format!(
            "RLIMIT_AS {} (ulimit -v)",
            crate::text::format::bytes(b)
        ));
    }
    // cgroup v2: the line "0::/PATH" of /proc/self/cgroup.
    let pids = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("0::").map(|p| p.trim().to_string()))
        })
        .and_then(|p| {
            std::fs::read_to_string(format!("/sys/fs/cgroup{p}/pids.max"))
                .ok()
                .map(|v| (p, v.trim().to_string()))
        });
    if let Some((p, v)) = pids.filter(|(_, v)| v != "max") {
        out.push(format!("pids.max {v} in cgroup {p}"));
    }
    if let Ok(t) = std::fs::read_to_string("/proc/sys/kernel/threads-max") {
        out.push(format!("threads-max {}", t.trim()));
    }
    format!("limits: {}", out.join(", "))
}

/// Starts `f` on a thread of scope `s`, as `Scope::spawn` does, but a
/// thread the system refuses (EAGAIN, ENOMEM: a limit reached) is an
/// error naming `what` and the limits on threads, where `Scope::spawn`
/// would panic (`placement::sys::spawn_scoped` gives it as a
/// `PlacementError`).
pub fn try_spawn_scoped<'scope, 'env, T: Send + 'scope>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    what: &str,
    f: impl FnOnce() -> T + Send + 'scope,
) -> Result<std::thread::ScopedJoinHandle<'scope, T>, String> {
    std::thread::Builder::new()
        .spawn_scoped(s, f)
        .map_err(|e| format!("could not start {what}: {e} ({})", thread_limits()))
}

/// Address space a thread takes besides its own memory: Rust's default
/// 2 MiB stack, its guard page and signal stack, rounded up.
const THREAD_ADDRESS_SPACE: u64 = (2 << 20) + (64 << 10);

/// Whether `n` more threads, each with `own` bytes of memory of its own,
/// fit in what this process may still have: its address space
/// (RLIMIT_AS against VmSize), its cgroup's pids.max (against
/// pids.current) and the kernel's threads-max (against the threads
/// running); the error names the limit and what it leaves.
pub fn room_for_threads(n: usize, own: u64) -> Result<(), String> {
    let n64 = n as u64;
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let as_limit = (unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } == 0
        && r.rlim_cur != libc::RLIM_INFINITY)
        .then_some(r.rlim_cur);
    if let Some(limit) = as_limit {
        let used = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmSize:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .unwrap_or(0)
            * 1024;
        let need = n64.saturating_mul(THREAD_ADDRESS_SPACE.saturating_add(own));
        if used.saturating_add(need) > limit {
            let b = crate::text::format::bytes;
            return Err(format!(
                "{n} threads need about {} of address space (stacks and buffers), and RLIMIT_AS (ulimit -v) {} leaves {}",
                b(need),
                b(limit),
                b(limit.saturating_sub(used))
            ));
        }
    }
    let read_u64 =
        |path: &str| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    if let Some(p) = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("0::").map(|p| p.trim().to_string()))
        })
    {
        let dir = format!("/sys/fs/cgroup{p}");
        if let (Some(max), Some(current)) = (
            read_u64(&format!("{dir}/pids.max")),
            read_u64(&format!("{dir}/pids.current")),
        ) {
            if current.saturating_add(n64) > max {
                return Err(format!(
                    "{n} threads do not fit under the cgroup's pids.max {max} ({current} tasks in {p} already)"
                ));
            }
        }
    }
    let running = std::fs::read_to_string("/proc/loadavg").ok().and_then(|l| {
        l.split_whitespace()
            .nth(3)?
            .split('/')
            .nth(1)?
            .parse::<u64>()
            .ok()
    });
    if let (Some(max), Some(running)) = (read_u64("/proc/sys/kernel/threads-max"), running) {
        if running.saturating_add(n64) > max {
            return Err(format!(
                "{n} threads do not fit under the kernel's threads-max {max} ({running} running)"
            ));
        }
    }
    Ok(())
}

/// The running kernel's (major, minor) version and full release string.
pub fn kernel_version() -> ((u32, u32), String) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    (parse_kernel_version(&release), release)
}

fn parse_kernel_version(release: &str) -> (u32, u32) {
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// Whether the running kernel has `mode`, with a message naming the needed
/// version when it does not.
pub fn kernel_supports(mode: Mode) -> Result<(), String> {
    let ((maj, min), release) = kernel_version();
    let (need_maj, need_min) = mode.min_kernel();
    let present = match mode {
        // The sysfs weights directory appears with the mode itself.
        Mode::WeightedInterleave => {
            std::path::Path::new("/sys/kernel/mm/mempolicy/weighted_interleave").is_dir()
        }
        _ => (maj, min) >= (need_maj, need_min),
    };
    if present {
        Ok(())
    } else {
        Err(format!(
            "the {} memory policy needs Linux >= {need_maj}.{need_min}; this kernel is {release}",
            mode.kernel_name()
        ))
    }
}

/// Free memory of a node right now, from /sys/devices/system/node/nodeN/meminfo
/// (`MemFree` only: what a placement may take there, page cache and
/// hot-added memory counted, is `placement::node_memory::NodeMemory::allocatable`).
pub fn node_free_bytes(node: u32) -> Option<u64> {
    node_meminfo(node, "MemFree:")
}

/// Total memory of a node, from /sys/devices/system/node/nodeN/meminfo.
pub fn node_total_bytes(node: u32) -> Option<u64> {
    node_meminfo(node, "MemTotal:")
}

fn node_meminfo(node: u32, key: &str) -> Option<u64> {
    let text =
        std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/meminfo")).ok()?;
    text.lines().find_map(|l| {
        let rest = l.split_once(key)?.1.trim();
        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kb * 1024)
    })
}

/// The base page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread the system refuses is an error naming the limits, not a
    /// panic: in a forked child whose address space is capped just above
    /// what it uses, the thread's 2 MiB stack cannot be mapped.
    #[test]
    fn a_refused_thread_is_an_error_naming_the_limits() {
        // SAFETY: the child only sets its limits, starts a thread through
        // the function under test, and leaves with _exit; glibc's fork
        // leaves malloc usable in the child.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            // SAFETY: alarm and setrlimit have no memory preconditions;
            // the alarm ends a child that would hang.
            unsafe { libc::alarm(20) };
            let used = std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("VmSize:"))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                })
                .unwrap_or(0)
                * 1024;
            let cap = libc::rlimit {
                rlim_cur: used + (256 << 10),
                rlim_max: libc::RLIM_INFINITY,
            };
            // glibc keeps the stacks of ended threads (up to 40 MiB) and
            // gives them to new ones without mapping: threads are started,
            // and kept, until one needs a new stack.
            let release = std::sync::atomic::AtomicBool::new(false);
            // SAFETY: setrlimit reads the struct it is given.
            let ok = unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) } == 0
                && std::thread::scope(|s| {
                    let mut refused = None;
                    for _ in 0..64 {
                        let release = &release;
                        let started = try_spawn_scoped(s, "a test thread", move || {
                            while !release.load(std::sync::atomic::Ordering::Acquire) {
                                std::thread::sleep(std::time::Duration::from_millis(1));
                            }
                        });
                        if let Err(e) = started {
                            refused = Some(e.to_string());
                            break;
                        }
                    }
                    release.store(true, std::sync::atomic::Ordering::Release);
                    refused.is_some_and(|t| {
                        t.contains("could not start a test thread: ") && t.contains("RLIMIT_AS")
                    })
                });
            // SAFETY: leaves the child without running the parent's
            // destructors or the test harness.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child's status {status:#x} (stderr above)"
        );
    }

    #[test]
    fn room_for_threads_names_the_limit_it_would_pass() {
        assert_eq!(room_for_threads(1, 4096), Ok(()));
        // More threads than any kernel allows.
        let e = room_for_threads(1 << 40, 0).unwrap_err();
        assert!(
            e.contains("threads-max") || e.contains("pids.max") || e.contains("RLIMIT_AS"),
            "{e}"
        );
        assert!(e.starts_with(&format!("{} threads ", 1u64 << 40)), "{e}");
        assert!(thread_limits().starts_with("limits: "));
    }

    #[test]
    fn kernel_version_parsing() {
        assert_eq!(parse_kernel_version("6.12.9+bpo-amd64"), (6, 12));
        assert_eq!(parse_kernel_version("5.15.0-91-generic"), (5, 15));
        assert_eq!(parse_kernel_version(""), (0, 0));
    }

    #[test]
    fn affinity_roundtrip_on_this_machine() {
        let before = get_affinity(0).unwrap();
        let first = before.first().unwrap();
        set_affinity(0, &IdSet::single(first)).unwrap();
        assert_eq!(get_affinity(0).unwrap(), IdSet::single(first));
        assert_eq!(current_cpu(), Some(first));
        set_affinity(0, &before).unwrap();
        assert_eq!(get_affinity(0).unwrap(), before);
    }

    #[test]
    fn mempolicy_roundtrip() {
        set_mempolicy(Mode::Bind, &IdSet::single(0)).unwrap();
        let (mode, nodes) = get_mempolicy().unwrap();
        assert_eq!(mode, Mode::Bind as i32);
        assert_eq!(nodes, IdSet::single(0));
        set_mempolicy(Mode::Default, &IdSet::new()).unwrap();
        assert_eq!(get_mempolicy().unwrap().0, Mode::Default as i32);
    }

    #[test]
    fn kernel_mask_arguments() {
        let empty = KernelMask::new(&IdSet::new());
        assert_eq!(empty.node_arg(), (std::ptr::null(), 0));
        assert_eq!(empty.words.len(), MASK_BITS / 64);
        let two = KernelMask::new(&IdSet::parse_list("0,65").unwrap());
        let (ptr, maxnode) = two.node_arg();
        assert_eq!(
            (ptr, maxnode),
            (two.words.as_ptr(), MASK_BITS as libc::c_ulong + 1)
        );
        assert_eq!(&two.words[..2], &[1, 2]);
    }

    #[test]
    fn move_pages_reports_each_page_and_migrate_pages_the_pages_left() {
        let page = page_size();
        let mut buf = vec![1u8; 8 * page];
        let first = buf
            .as_mut_ptr()
            .wrapping_add(page - buf.as_ptr() as usize % page);
        let pages: Vec<usize> = (0..4).map(|i| first as usize + i * page).collect();
        let node = query_node(pages[0]);
        let mut status = vec![-1; 4];
        assert_eq!(
            move_pages(0, &pages, &[node as i32; 4], &mut status).unwrap(),
            0
        );
        assert_eq!(status, vec![node as i32; 4]);
        let e = move_pages(0, &pages, &[0; 3], &mut status).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        let same = KernelMask::new(&IdSet::single(node));
        assert_eq!(migrate_pages_mask(0, &same, &same).unwrap(), 0);
    }

    fn query_node(p: usize) -> u32 {
        let mut s = [0i32];
        query_page_nodes(0, &[p], &mut s).unwrap();
        s[0] as u32
    }

    #[test]
    fn dropping_an_effective_capability_touches_only_this_thread() {
        let eff = || {
            let t = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            let hex = t.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap();
            u64::from_str_radix(hex.trim(), 16).unwrap()
        };
        let before = eff();
        let inside = std::thread::spawn(move || {
            drop_effective_capability(CAP_SYS_NICE).unwrap();
            eff()
        })
        .join()
        .unwrap();
        assert_eq!(inside, before & !(1 << CAP_SYS_NICE));
        assert_eq!(eff(), before);
        assert_eq!(
            drop_effective_capability(40).unwrap_err().raw_os_error(),
            Some(libc::EINVAL)
        );
    }

    #[test]
    fn node_zero_meminfo_is_readable() {
        let total = node_total_bytes(0).unwrap();
        let free = node_free_bytes(0).unwrap();
        assert!(total > 64 << 20, "node 0 total {total}");
        assert!(free <= total);
    }
}
