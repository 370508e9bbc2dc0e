//! Transparent huge pages, which protection-fault sampling must not break.
//!
//! `mprotect` on one page of a huge page splits it: the program runs on
//! small pages there from then on, and pays in TLB misses a cost the
//! controller never sees (26-33 huge pages split a run of profile_truth
//! with THP `always`; 0-2 with this module). Arming one
//! page of a range not yet touched splits its memory area, and the
//! kernel then backs the range with small pages when it is first touched
//! (a 64 MiB array advised `MADV_HUGEPAGE` got none). So the sampler
//! arms a whole huge page where one maps the page it drew, and a whole
//! untouched huge-page-sized span where the kernel may back it with a
//! huge page; the kernel tells which through the `PAGEMAP_SCAN` ioctl
//! (Linux 6.7). On older kernels, or with THP off, pages are armed one by
//! one as before.

use crate::runtime::pagemap::{self, PageRegion, PAGE_IS_HUGE, PAGE_IS_PRESENT, PAGE_IS_SWAPPED};
use crate::runtime::sys;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

/// What the kernel maps over the huge-page-sized span around a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// One huge page maps `[start, start + len)`: arm it whole.
    Huge(usize, usize),
    /// Nothing is mapped in `[start, start + len)` yet: its first touch
    /// may get a huge page, if the kernel's policy gives it one.
    Empty(usize, usize),
    /// Small pages, or a mix: arm the page alone.
    Small,
}

/// When the kernel backs untouched memory with huge pages
/// (`/sys/kernel/mm/transparent_hugepage/enabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Wherever it can.
    Always,
    /// In ranges the program advised with `madvise(MADV_HUGEPAGE)`.
    Madvise,
}

/// The kernel's huge-page facts for this process.
pub struct HugePages {
    pagemap: i32,
    /// Its (device, inode): closed only while it is still that file.
    identity: Option<(u64, u64)>,
    /// The PMD-sized huge page (`hpage_pmd_size`): 2 MiB on x86_64.
    pub size: usize,
    pub mode: Mode,
}

impl Drop for HugePages {
    fn drop(&mut self) {
        if sys::identity(self.pagemap) == self.identity {
            sys::close(self.pagemap);
        }
    }
}

impl HugePages {
    /// `None` when transparent huge pages are off (`never`), or the
    /// kernel cannot say which pages are huge.
    pub fn open() -> Option<HugePages> {
        let mut buf = [0u8; 128];
        let enabled = read_file(
            OsStr::new("/sys/kernel/mm/transparent_hugepage/enabled"),
            &mut buf,
        )?;
        let mode = if contains(enabled, b"[always]") {
            Mode::Always
        } else if contains(enabled, b"[madvise]") {
            Mode::Madvise
        } else {
            return None;
        };
        let size = read_file(
            OsStr::new("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"),
            &mut buf,
        )
        .and_then(|b| std::str::from_utf8(b).ok()?.trim().parse::<usize>().ok())
        .filter(|s| s.is_power_of_two() && *s > 4096)?;
        Self::with_pagemap(OsStr::new("/proc/self/pagemap"), size, mode)
    }

    /// The facts with the pagemap file at `path`, when the kernel answers
    /// `PAGEMAP_SCAN` on it. The descriptor is closed once, by `Drop`,
    /// whatever the answer: it was closed twice on kernels before 6.7,
    /// and the second close took whatever file a program thread had
    /// opened under the number in between (Open MPI's parameter file in
    /// the 6.1 guest, whose reader then failed with "input in flex
    /// scanner failed").
    fn with_pagemap(path: &OsStr, size: usize, mode: Mode) -> Option<HugePages> {
        // Kept open for the whole run: high, known again at its close.
        let pagemap = sys::move_high(sys::open_read(path)?);
        let h = HugePages {
            pagemap,
            identity: sys::identity(pagemap),
            size,
            mode,
        };
        // A scan of nothing: kernels before 6.7 refuse the ioctl.
        h.scan(0, 0).map(|_| h)
    }

    /// The huge-page-sized span around `page`, as `(start, len)`.
    pub fn span_around(&self, page: usize) -> (usize, usize) {
        (page & !(self.size - 1), self.size)
    }

    /// What maps the huge-page-sized span around `page` now.
    pub fn span_of(&self, page: usize) -> Span {
        let start = page & !(self.size - 1);
        let end = start + self.size;
        match self.scan(start, end) {
            Some((s, e, c)) if s == start && e == end && c & PAGE_IS_HUGE != 0 => {
                Span::Huge(start, self.size)
            }
            Some((s, e, 0)) if s == start && e == end => Span::Empty(start, self.size),
            _ => Span::Small,
        }
    }

    /// Whether the kernel may back the untouched span `[start, start +
    /// len)` with a huge page when it is first touched.
    pub fn may_be_huge(&self, start: usize, len: usize) -> bool {
        match advice(start, start + len) {
            Some(huge) => huge,
            None => self.mode == Mode::Always,
        }
    }

    /// The first run of pages in `[start, end)` with equal present,
    /// swapped and huge bits: `(start, end, bits)`, `(0, 0, 0)` if the
    /// range holds none; `None`: the kernel refused.
    fn scan(&self, start: usize, end: usize) -> Option<(usize, usize, u64)> {
        let mut region = [PageRegion::default()];
        let mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_HUGE;
        match pagemap::scan(self.pagemap, start, end, 0, mask, &mut region)? {
            (0, _) => Some((0, 0, 0)),
            _ => Some((
                region[0].start as usize,
                region[0].end as usize,
                region[0].categories & mask,
            )),
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Reads a small file whole into `buf`; the bytes read.
fn read_file<'a>(path: &OsStr, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let fd = sys::open_read(path)?;
    let n = sys::read_some(fd, buf);
    sys::close(fd);
    n.map(|n| &buf[..n])
}

/// The program's `MADV_HUGEPAGE` and `MADV_NOHUGEPAGE` advice, as ranges
/// (`start` 0: a free slot; the low bit of `end` set: no huge pages). A
/// newer advice over an older one replaces it whole, and advice past the
/// table's size is forgotten: both only make the sampler arm some spans
/// page by page, or an untouched span whole where the kernel gives small
/// pages (its first touch is then sampled once a span, not once a page).
const ADVICE_CAPACITY: usize = 64;
#[allow(clippy::declare_interior_mutable_const)]
const NONE: AtomicUsize = AtomicUsize::new(0);
static ADVICE_START: [AtomicUsize; ADVICE_CAPACITY] = [NONE; ADVICE_CAPACITY];
static ADVICE_END: [AtomicUsize; ADVICE_CAPACITY] = [NONE; ADVICE_CAPACITY];

/// Notes a `madvise` of `[start, start + len)` (other advice is ignored).
pub fn advise(start: usize, len: usize, advice: i32) {
    let huge = match advice {
        libc::MADV_HUGEPAGE => true,
        libc::MADV_NOHUGEPAGE => false,
        _ => return,
    };
    let end = start.saturating_add(len);
    forget(start, end);
    for (s, e) in ADVICE_START.iter().zip(&ADVICE_END) {
        if s.compare_exchange(0, usize::MAX, SeqCst, SeqCst).is_ok() {
            e.store((end & !1) | !huge as usize, SeqCst);
            s.store(start, SeqCst);
            return;
        }
    }
}

/// Forgets the advice overlapping `[start, end)` (unmapped, or advised
/// again).
pub fn forget(start: usize, end: usize) {
    for (s, e) in ADVICE_START.iter().zip(&ADVICE_END) {
        let a = s.load(SeqCst);
        if a != 0 && a != usize::MAX && a < end && start < e.load(SeqCst) & !1 {
            let _ = s.compare_exchange(a, 0, SeqCst, SeqCst);
        }
    }
}

/// The advice covering all of `[start, end)`: whether huge pages were
/// asked for, or `None` when no advice covers it.
fn advice(start: usize, end: usize) -> Option<bool> {
    ADVICE_START.iter().zip(&ADVICE_END).find_map(|(s, e)| {
        let a = s.load(SeqCst);
        let b = e.load(SeqCst);
        (a != 0 && a != usize::MAX && a <= start && end <= b & !1).then_some(b & 1 == 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_scan_closes_its_descriptor_once() {
        // /dev/null refuses the ioctl as kernels before 6.7 do.
        sys::take_closed();
        let h = HugePages::with_pagemap(OsStr::new("/dev/null"), 1 << 21, Mode::Always);
        assert!(h.is_none());
        // The number it was opened on (moved high: that one too), once
        // each.
        let mut closed = sys::take_closed();
        let n = closed.len();
        closed.dedup();
        assert!(n >= 1 && closed.len() == n, "closed {closed:?}");
        // Open, the descriptor is closed when the facts are dropped, and
        // only then.
        let Some(h) =
            HugePages::with_pagemap(OsStr::new("/proc/self/pagemap"), 1 << 21, Mode::Always)
        else {
            // Before 6.7 nothing stays open: the refusal above covers it.
            return;
        };
        let fd = h.pagemap;
        assert!(!sys::take_closed().contains(&fd));
        drop(h);
        assert_eq!(sys::take_closed(), vec![fd]);
    }

    #[test]
    fn advice_is_kept_replaced_and_forgotten() {
        let m = 1 << 21;
        assert_eq!(advice(10 * m, 11 * m), None);
        advise(8 * m, 8 * m, libc::MADV_HUGEPAGE);
        assert_eq!(advice(10 * m, 11 * m), Some(true));
        // Not wholly covered.
        assert_eq!(advice(15 * m, 17 * m), None);
        // Other advice is not huge-page advice.
        advise(8 * m, m, libc::MADV_DONTNEED);
        assert_eq!(advice(8 * m, 9 * m), Some(true));
        // A newer advice over part replaces the older one whole.
        advise(9 * m, m, libc::MADV_NOHUGEPAGE);
        assert_eq!(advice(9 * m, 10 * m), Some(false));
        assert_eq!(advice(12 * m, 13 * m), None);
        forget(0, 100 * m);
        assert_eq!(advice(9 * m, 10 * m), None);
    }
}
