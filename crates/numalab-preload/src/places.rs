//! Where the data the sampler cannot arm lives: the writable segments of
//! every loaded ELF object (.data, .bss) and each thread's stack. Their
//! pages are located, not sampled: a stack is where the fault handler
//! itself runs, and static data holds libc's and the program's locks,
//! whose futex calls would fail on an armed page. `numalab profile` names
//! the large static symbols from the segments and the objects' symbol
//! tables.
//!
//! Also where the pages of a tracked region are ([`emit_pages`], PageNodes
//! and PageRun records), written by the sampler's snapshots, by the hooks
//! as a region is freed, and at exit.

use crate::record::{Kind, Record};
use crate::runtime::state::page_size;
use crate::runtime::{emit, sys};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::SeqCst};

/// Threads whose stacks are remembered at once; a thread past them is
/// recorded when it starts but not located at exit.
const STACK_CAPACITY: usize = 1024;
/// Runs written per located range at most: a range more scattered than
/// that ends in one run of the rest, node unknown (-3).
const MAX_RUNS: usize = 65_536;

struct Stack {
    tid: AtomicU32,
    start: AtomicUsize,
    len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const NO_STACK: Stack = Stack {
    tid: AtomicU32::new(0),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
};

static STACKS: [Stack; STACK_CAPACITY] = [NO_STACK; STACK_CAPACITY];

/// The calling thread's stack, from its pthread attributes.
fn own_stack() -> Option<(usize, usize)> {
    // SAFETY: attr is initialised by pthread_getattr_np before it is read
    // and destroyed after.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut len: libc::size_t = 0;
        let r = libc::pthread_attr_getstack(&attr, &mut addr, &mut len);
        libc::pthread_attr_destroy(&mut attr);
        (r == 0 && !addr.is_null() && len > 0).then_some((addr as usize, len))
    }
}

/// Records the calling thread's stack (a Stack record) and remembers it
/// for [`thread_ends`] and [`at_exit`].
pub fn thread_starts() {
    let Some((start, len)) = own_stack() else {
        return;
    };
    let tid = sys::gettid();
    let selected = crate::select::thread_selected();
    if selected {
        // Whether it is pinned, as it starts (a thread no page sample
        // finds has its affinity too; its first sample says it again).
        // The record also lists the thread in the profile: its samples
        // are kept (no `--only-threads`, or the thread is in its set).
        emit_thread(sys::monotonic_ns());
    }
    emit(&Record {
        kind: Kind::Stack,
        tid,
        cpu: u32::MAX,
        node: -1,
        flags: 0,
        addr: start as u64,
        size: len as u64,
        time_ns: sys::monotonic_ns(),
        // Its ordinal (given at creation, set before this): the Thread
        // record that also says it comes with a page sample only.
        aux: match crate::select::ordinal() {
            u32::MAX => 0,
            o => o + 1,
        },
    });
    for s in STACKS.iter() {
        if s.tid.compare_exchange(0, tid, SeqCst, SeqCst).is_ok() {
            s.start.store(start, SeqCst);
            s.len.store(len, SeqCst);
            return;
        }
    }
}

/// A Thread record of the calling thread at `time_ns`: how many CPUs its
/// affinity allows and the first, and its ordinal.
pub fn emit_thread(time_ns: u64) {
    let (cpus, first) = sys::affinity();
    emit(&Record {
        kind: Kind::Thread,
        tid: sys::gettid(),
        cpu: u32::MAX,
        node: match crate::select::ordinal() {
            u32::MAX => -1,
            o => o.min(i32::MAX as u32) as i32,
        },
        flags: 0,
        addr: first,
        size: cpus,
        time_ns,
        aux: 0,
    });
}

/// Locates the calling thread's stack pages as its start routine returns,
/// and forgets it (glibc gives the memory to the next thread).
pub fn thread_ends() {
    let tid = sys::gettid();
    thread_end(tid);
    for s in STACKS.iter() {
        if s.tid.load(SeqCst) == tid {
            page_runs(s.start.load(SeqCst), s.len.load(SeqCst));
            s.tid.store(0, SeqCst);
            return;
        }
    }
}

/// At exit: the stacks of the threads still running, and every loaded
/// object's writable segments.
pub fn at_exit() {
    for s in STACKS.iter() {
        let tid = s.tid.load(SeqCst);
        if tid != 0 {
            thread_end(tid);
            page_runs(s.start.load(SeqCst), s.len.load(SeqCst));
        }
    }
    // SAFETY: the callback only reads the headers it is given.
    unsafe { libc::dl_iterate_phdr(Some(each_object), std::ptr::null_mut()) };
}

unsafe extern "C" fn each_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    _data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid dl_phdr_info with dlpi_phnum
    // program headers.
    let info = unsafe { &*info };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: i < dlpi_phnum.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_W == 0 || ph.p_memsz == 0 {
            continue;
        }
        let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
        let len = ph.p_memsz as usize;
        emit(&Record {
            kind: Kind::Static,
            tid: sys::gettid(),
            cpu: u32::MAX,
            node: -1,
            flags: 0,
            addr: start as u64,
            size: len as u64,
            // Symbol values are relative to this.
            time_ns: info.dlpi_addr,
            aux: 0,
        });
        page_runs(start, len);
    }
    0
}

/// Writes where the pages of `[start, start + len)` are, as runs of pages
/// on one node (PageRun records; node -1: not present).
pub fn page_runs(start: usize, len: usize) {
    let ps = page_size();
    let first = start & !(ps - 1);
    let end = start.saturating_add(len).div_ceil(ps) * ps;
    let mut runs = RunWriter::new(MAX_RUNS, end, ps);
    sys::page_histogram(first, end - first, ps, |page, node| runs.page(page, node));
    runs.finish();
}

/// Where the pages of the region at `start` are, a record per node, as
/// it is freed or at exit, and their runs in address order (for page
/// maps).
pub fn emit_pages(start: usize, len: usize) {
    emit_page_records(start, len, u32::MAX);
}

/// Runs written per allocation at free or exit at most (512 kB of
/// records): the rest of a more scattered one is one run, node unknown.
const MAX_ALLOCATION_RUNS: usize = 16_384;

/// Where the pages of the region at `start` are, a record per node;
/// `snapshot`: the number of the sampler's snapshot, or `u32::MAX` (freed
/// or at exit: the runs too).
pub fn emit_page_records(start: usize, len: usize, snapshot: u32) {
    let ps = page_size();
    let end = start.saturating_add(len) / ps * ps;
    let mut runs = (snapshot == u32::MAX).then(|| RunWriter::new(MAX_ALLOCATION_RUNS, end, ps));
    let h = sys::page_histogram(start, len, ps, |page, node| {
        if let Some(r) = runs.as_mut() {
            r.page(page, node);
        }
    });
    if let Some(r) = runs {
        r.finish();
    }
    let nodes = h.counts.iter().enumerate().map(|(n, c)| (n as i32, *c));
    for (node, pages) in nodes.chain([(-1, h.absent), (-2, h.beyond)]) {
        if pages > 0 {
            emit(&Record {
                kind: Kind::PageNodes,
                tid: sys::gettid(),
                cpu: snapshot,
                node,
                flags: 0,
                addr: start as u64,
                size: pages,
                time_ns: sys::monotonic_ns(),
                aux: 0,
            });
        }
    }
}

/// Builds PageRun records from pages given in address order, at most
/// `cap` runs: a range more scattered than that ends in one run of the
/// rest, node unknown (-3).
pub struct RunWriter {
    run: Option<(usize, u64, i32)>,
    runs: usize,
    cap: usize,
    end: usize,
    page_size: usize,
    done: bool,
}

impl RunWriter {
    /// Runs of the pages up to `end`.
    pub fn new(cap: usize, end: usize, page_size: usize) -> RunWriter {
        RunWriter {
            run: None,
            runs: 0,
            cap: cap.max(2),
            end,
            page_size,
            done: false,
        }
    }

    /// The next page and its node.
    pub fn page(&mut self, page: usize, node: i32) {
        if self.done {
            return;
        }
        self.run = match self.run {
            Some((a, k, nd)) if nd == node => Some((a, k + 1, nd)),
            Some(r) if self.runs + 1 >= self.cap => {
                flush_run(r);
                flush_run((page, ((self.end - page) / self.page_size) as u64, -3));
                self.done = true;
                None
            }
            Some(r) => {
                flush_run(r);
                self.runs += 1;
                Some((page, 1, node))
            }
            None => Some((page, 1, node)),
        };
    }

    /// Writes the last run.
    pub fn finish(self) {
        if let Some(r) = self.run.filter(|_| !self.done) {
            flush_run(r);
        }
    }
}

fn flush_run((addr, pages, node): (usize, u64, i32)) {
    emit(&Record {
        kind: Kind::PageRun,
        tid: 0,
        cpu: u32::MAX,
        node,
        flags: 0,
        addr: addr as u64,
        size: pages,
        time_ns: sys::monotonic_ns(),
        aux: 0,
    });
}

/// A ThreadEnd record: how often the kernel moved thread `tid` between
/// CPUs (`se.nr_migrations` of /proc/self/task/TID/sched, present where
/// the kernel has scheduler statistics; `u64::MAX` when not).
fn thread_end(tid: u32) {
    emit(&Record {
        kind: Kind::ThreadEnd,
        tid,
        cpu: u32::MAX,
        node: -1,
        flags: 0,
        addr: migrations(tid).unwrap_or(u64::MAX),
        size: 0,
        time_ns: sys::monotonic_ns(),
        aux: 0,
    });
}

/// `se.nr_migrations` of a thread of this process, without allocating.
fn migrations(tid: u32) -> Option<u64> {
    let mut path = [0u8; 64];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        path[n..n + b.len()].copy_from_slice(b);
        n += b.len();
    };
    put(b"/proc/self/task/");
    let mut digits = [0u8; 10];
    let mut k = digits.len();
    let mut t = tid;
    loop {
        k -= 1;
        digits[k] = b'0' + (t % 10) as u8;
        t /= 10;
        if t == 0 {
            break;
        }
    }
    put(&digits[k..]);
    put(b"/sched");
    let fd = sys::open_read(std::ffi::OsStr::from_bytes(&path[..n]))?;
    let mut buf = [0u8; 4096];
    let mut len = 0;
    while len < buf.len() {
        match sys::read_some(fd, &mut buf[len..]) {
            Some(0) | None => break,
            Some(r) => len += r,
        }
    }
    sys::close(fd);
    parse_migrations(&buf[..len])
}

/// The value of the `se.nr_migrations` line of a sched file.
fn parse_migrations(text: &[u8]) -> Option<u64> {
    let key = b"se.nr_migrations";
    let at = text.windows(key.len()).position(|w| w == key)?;
    let rest = &text[at + key.len()..];
    let colon = rest.iter().position(|c| *c == b':')?;
    let mut v: u64 = 0;
    let mut seen = false;
    for &c in rest[colon + 1..].iter().skip_while(|c| **c == b' ') {
        if !c.is_ascii_digit() {
            break;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
        seen = true;
    }
    seen.then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_read_from_the_sched_file() {
        let text = b"prog (42, #threads: 3)\n----\nse.exec_start  :  12.5\nse.nr_migrations                             :                   17\nnr_switches : 9\n";
        assert_eq!(parse_migrations(text), Some(17));
        assert_eq!(parse_migrations(b"se.nr_migrations : x"), None);
        assert_eq!(parse_migrations(b"nothing here"), None);
        // This thread's own file, where the kernel keeps the statistics.
        if std::path::Path::new("/proc/self/sched").exists() {
            assert!(migrations(sys::gettid()).is_some());
        }
    }
}
