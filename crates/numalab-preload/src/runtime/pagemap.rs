//! The kernel's `PAGEMAP_SCAN` ioctl on `/proc/self/pagemap` (Linux 6.7):
//! which pages of a range are present, swapped or huge, a run of pages at
//! a time, without asking page by page.
//!
//! [`present_runs`] lets a region's pages be located (`move_pages`) only
//! where some are present: a thread's 8 MiB stack holds a few dozen
//! present pages, and asking for its 2,048 cost about 1.5 ms here (about
//! 0.75 µs a page), at every snapshot and at exit, for every thread. On
//! older kernels it answers `false` and the caller asks for every page.

use crate::runtime::sys;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::SeqCst};

/// `struct pm_scan_arg` of `<linux/fs.h>`.
#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region` of `<linux/fs.h>`: `[start, end)` and the
/// categories (of the return mask) its pages share.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct PageRegion {
    pub start: u64,
    pub end: u64,
    pub categories: u64,
}

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: u64 = 0xC000_0000 | (96 << 16) | (0x66 << 8) | 16;
pub const PAGE_IS_PRESENT: u64 = 1 << 3;
pub const PAGE_IS_SWAPPED: u64 = 1 << 4;
pub const PAGE_IS_HUGE: u64 = 1 << 6;

/// One scan of `[start, end)` on the pagemap descriptor `fd`: the runs of
/// pages whose categories include all of `category_mask`, each with its
/// categories of `return_mask`, into `out`. Returns how many runs were
/// written and where the walk ended (before `end` when `out` filled up);
/// `None`: the kernel refused (before 6.7, or not a pagemap file).
pub fn scan(
    fd: i32,
    start: usize,
    end: usize,
    category_mask: u64,
    return_mask: u64,
    out: &mut [PageRegion],
) -> Option<(usize, usize)> {
    let mut arg = PmScanArg {
        size: std::mem::size_of::<PmScanArg>() as u64,
        flags: 0,
        start: start as u64,
        end: end as u64,
        walk_end: 0,
        vec: out.as_mut_ptr() as u64,
        vec_len: out.len() as u64,
        max_pages: 0,
        category_inverted: 0,
        category_mask,
        category_anyof_mask: 0,
        return_mask,
    };
    // SAFETY: PAGEMAP_SCAN reads `arg` and writes at most `vec_len` page
    // regions into `out`.
    let n = unsafe { libc::ioctl(fd, PAGEMAP_SCAN as _, &mut arg) };
    (n >= 0).then(|| ((n as usize).min(out.len()), arg.walk_end as usize))
}

/// This process's pagemap descriptor for [`present_runs`] (-1: not open,
/// -2: the kernel refused the scan), and the process it was opened in: a
/// forked child's inherited one still reads its parent's pages.
static FD: AtomicI32 = AtomicI32::new(-1);
static FD_PID: AtomicU64 = AtomicU64::new(0);

fn this_pid() -> u64 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() as u64 }
}

/// The descriptor, opened (high, see [`sys::HIGH_FD`]) on first use in
/// this process; `None` where the kernel cannot scan.
fn pagemap() -> Option<i32> {
    let pid = this_pid();
    let fd = FD.load(SeqCst);
    if FD_PID.load(SeqCst) == pid {
        if fd >= 0 && sys::identity(fd).is_some() {
            return Some(fd);
        }
        if fd == -2 {
            return None;
        }
    }
    let Some(new) = sys::open_read(OsStr::new("/proc/self/pagemap")).map(sys::move_high) else {
        FD.store(-2, SeqCst);
        FD_PID.store(pid, SeqCst);
        return None;
    };
    // A scan of nothing: kernels before 6.7 refuse the ioctl.
    if scan(new, 0, 0, 0, 0, &mut []).is_none() {
        sys::close(new);
        FD.store(-2, SeqCst);
        FD_PID.store(pid, SeqCst);
        return None;
    }
    // Two threads may open one each at once: the first stored is kept,
    // the other closed (an inherited one is not the child's to close:
    // the parent's number may be the child's own file by now).
    match FD.compare_exchange(fd, new, SeqCst, SeqCst) {
        Ok(_) => {
            FD_PID.store(pid, SeqCst);
            Some(new)
        }
        Err(other) if other >= 0 && FD_PID.load(SeqCst) == pid => {
            sys::close(new);
            Some(other)
        }
        Err(_) => {
            sys::close(new);
            None
        }
    }
}

/// Calls `each(start, end)` for every run of present pages in `[start,
/// end)`, in address order (a run may begin or end beyond the range's
/// bounds, clipped here). `false` when the kernel cannot say (before
/// Linux 6.7): the caller must then take every page as possibly present.
/// A run found present may be gone by the time it is used, and a page
/// found absent may appear: the answer is a moment's, as `move_pages`'s.
pub fn present_runs(start: usize, end: usize, mut each: impl FnMut(usize, usize)) -> bool {
    let Some(fd) = pagemap() else { return false };
    let mut runs = [PageRegion::default(); 32];
    let mut at = start;
    while at < end {
        let Some((n, walk_end)) = scan(fd, at, end, PAGE_IS_PRESENT, PAGE_IS_PRESENT, &mut runs)
        else {
            return false;
        };
        for r in &runs[..n] {
            let (s, e) = ((r.start as usize).max(at), (r.end as usize).min(end));
            if s < e {
                each(s, e);
            }
        }
        // The walk ends at `end`, or where the runs filled up. One that
        // did not move would loop: the rest is then taken as possibly
        // present, as without the scan.
        if walk_end <= at {
            each(at, end);
            return true;
        }
        at = walk_end;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 64 pages of our own, pages 3, 10-12 and 63 touched.
    fn touched_pages(ps: usize) -> usize {
        // SAFETY: an anonymous private mapping, by the system call itself.
        let p = unsafe {
            libc::syscall(
                libc::SYS_mmap,
                0usize,
                64 * ps,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0usize,
            )
        };
        assert!(p > 0);
        // Never a huge page: its first touch would make the span present.
        // SAFETY: advice on the mapping above.
        unsafe { libc::madvise(p as *mut libc::c_void, 64 * ps, libc::MADV_NOHUGEPAGE) };
        for k in [3, 10, 11, 12, 63] {
            // SAFETY: a page of the mapping above.
            unsafe { std::ptr::write_volatile((p as usize + k * ps) as *mut u8, 1) };
        }
        p as usize
    }

    #[test]
    fn present_runs_are_the_touched_pages_and_the_histogram_agrees_page_by_page() {
        let ps = 4096;
        let base = touched_pages(ps);
        let mut runs = Vec::new();
        if !present_runs(base, base + 64 * ps, |s, e| {
            runs.push(((s - base) / ps, (e - base) / ps))
        }) {
            eprintln!("skipped: this kernel has no PAGEMAP_SCAN (Linux 6.7)");
            return;
        }
        assert_eq!(runs, [(3, 4), (10, 13), (63, 64)]);
        // Clipped to the range asked, which may start inside a run.
        let mut inner = Vec::new();
        assert!(present_runs(base + 11 * ps, base + 40 * ps, |s, e| inner
            .push(((s - base) / ps, (e - base) / ps))));
        assert_eq!(inner, [(11, 13)]);
        // The histogram sees every page in order, present ones with the
        // node move_pages gives each, the rest absent.
        let mut seen = Vec::new();
        let h = sys::page_histogram(base, 64 * ps, ps, |p, n| seen.push(((p - base) / ps, n)));
        assert_eq!(seen.len(), 64);
        assert!(
            seen.iter().enumerate().all(|(i, &(k, _))| i == k),
            "{seen:?}"
        );
        for &(k, node) in &seen {
            let mut status = [0i32];
            assert!(sys::query_pages(
                &[(base + k * ps) as *mut libc::c_void],
                &mut status
            ));
            assert_eq!(node, status[0].max(-1), "page {k}");
            assert_eq!(node >= 0, [3, 10, 11, 12, 63].contains(&k), "page {k}");
        }
        assert_eq!((h.absent, h.counts.iter().sum::<u64>() + h.beyond), (59, 5));
        // A range that starts and ends inside pages: whole pages only.
        let mut part = Vec::new();
        sys::page_histogram(base + ps / 2, 4 * ps, ps, |p, n| {
            part.push(((p - base) / ps, n >= 0))
        });
        assert_eq!(part, [(1, false), (2, false), (3, true)]);
        // SAFETY: unmaps the mapping made above.
        unsafe { libc::syscall(libc::SYS_munmap, base, 64 * ps) };
    }
}
