//! Anonymous mappings owned by a value: memory that a measurement binds,
//! touches, moves between nodes and unmaps, without a Rust allocation in
//! between (a forked child may use it).

use super::numa::{mbind_mask, KernelMask, Mode};
use std::io;

/// An anonymous private mapping of `len` bytes whose start is aligned to
/// `align`, with no page until it is touched. Unmapped on drop. Its bytes
/// read as zero until written; the views borrow it, so no view outlives it
/// and a mutable one is the only one.
#[derive(Debug)]
pub struct AnonymousMapping {
    start: *mut u8,
    len: usize,
    map_start: *mut libc::c_void,
    map_len: usize,
}

// SAFETY: the value owns the mapping, as a Vec<u8> owns its buffer.
unsafe impl Send for AnonymousMapping {}
// SAFETY: through `&self` only shared byte views and the kernel's calls on
// the range (which never change what it holds) are given; writes need
// `&mut self`.
unsafe impl Sync for AnonymousMapping {}

impl AnonymousMapping {
    /// Maps `len` bytes (more by up to `align`, so that an aligned start
    /// fits), reserving no memory (`MAP_NORESERVE`); `align` is a power of
    /// two, at least the page size.
    pub fn new(len: usize, align: usize) -> io::Result<Self> {
        if !align.is_power_of_two() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let map_len = len
            .checked_add(align)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        Self::map(len, map_len, align, libc::MAP_NORESERVE)
    }

    /// Maps `len` bytes of hugetlbfs 2 MiB pages, reserved now: with
    /// `MAP_NORESERVE` an empty pool would only show as SIGBUS at the first
    /// touch. `len` is a multiple of 2 MiB.
    pub fn hugetlb(len: usize) -> io::Result<Self> {
        Self::map(len, len, 2 << 20, libc::MAP_HUGETLB)
    }

    fn map(len: usize, map_len: usize, align: usize, flags: i32) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: an anonymous mapping, no file, no address asked for.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(AnonymousMapping {
            start: (p as usize).next_multiple_of(align) as *mut u8,
            len,
            map_start: p,
            map_len,
        })
    }

    /// The aligned start address.
    pub fn start(&self) -> usize {
        self.start as usize
    }

    /// Bytes from [`AnonymousMapping::start`].
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a mapping has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `madvise(advice)` over the aligned range (`MADV_HUGEPAGE`,
    /// `MADV_NOHUGEPAGE`, ...).
    pub fn advise(&self, advice: i32) -> io::Result<()> {
        // SAFETY: the range lies inside our own mapping.
        if unsafe { libc::madvise(self.start.cast(), self.len, advice) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// `mbind` of the aligned range with a mask built beforehand: one
    /// system call, no allocation.
    pub fn bind(&self, mode: Mode, nodes: &KernelMask, flags: u32) -> io::Result<()> {
        mbind_mask(self.start(), self.len, mode, nodes, flags)
    }

    /// Writes `value` every `step` bytes (a page size: one fault each),
    /// with volatile stores the compiler keeps. No allocation.
    pub fn touch_pages(&mut self, step: usize, value: u8) {
        touch_pages(self.as_mut_slice(), step, value);
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: mapped for `len` bytes (untouched pages read as zero) and
        // alive while `self` is; writes need `&mut self`.
        unsafe { std::slice::from_raw_parts(self.start, self.len) }
    }

    /// The bytes, to write (`chunks_mut` gives threads parts of their own).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.start, self.len) }
    }

    /// The mapping as 8-byte floats (its start is page aligned; a last
    /// partial word is left out).
    pub fn as_f64_mut(&mut self) -> &mut [f64] {
        // SAFETY: mapped, page aligned, `len / 8` whole words; any bit
        // pattern is an f64; uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.start.cast::<f64>(), self.len / 8) }
    }

    /// The mapping as 8-byte atomic words, for threads that share it (the
    /// exclusive borrow keeps the byte views away while they do).
    pub fn as_atomics(&mut self) -> &[std::sync::atomic::AtomicU64] {
        // SAFETY: mapped, page aligned (AtomicU64 needs 8), `len / 8` whole
        // words; AtomicU64 has u64's layout and every bit pattern is valid;
        // no other view exists while this borrow lives.
        unsafe {
            std::slice::from_raw_parts(
                self.start.cast::<std::sync::atomic::AtomicU64>(),
                self.len / 8,
            )
        }
    }
}

/// Writes `value` every `step` bytes of `bytes` with volatile stores (a
/// first touch that the compiler cannot drop): a thread's part of a
/// mapping, one fault per page.
pub fn touch_pages(bytes: &mut [u8], step: usize, value: u8) {
    for b in bytes.iter_mut().step_by(step.max(1)) {
        // SAFETY: `b` is a valid, exclusive byte.
        unsafe { std::ptr::write_volatile(b, value) };
    }
}

impl Drop for AnonymousMapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe { libc::munmap(self.map_start, self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aligned_mapping_is_touched_and_its_pages_counted() {
        let page = super::super::numa::page_size();
        let m = AnonymousMapping::new(8 * page, 2 << 20).unwrap();
        assert_eq!(m.start() % (2 << 20), 0);
        assert_eq!(m.len(), 8 * page);
        let pages: Vec<usize> = (0..8).map(|i| m.start() + i * page).collect();
        let mut status = vec![0; 8];
        super::super::numa::query_page_nodes(0, &pages, &mut status).unwrap();
        assert!(status.iter().all(|&s| s == -libc::ENOENT), "{status:?}");
        let mut m = m;
        m.touch_pages(page, 1);
        assert!(m.as_slice().iter().step_by(page).all(|&b| b == 1));
        assert_eq!(m.as_f64_mut().len(), page);
        super::super::numa::query_page_nodes(0, &pages, &mut status).unwrap();
        assert!(status.iter().all(|&s| s >= 0), "{status:?}");
    }

    #[test]
    fn a_bad_size_or_alignment_is_refused() {
        assert!(AnonymousMapping::new(0, 4096).is_err());
        assert!(AnonymousMapping::new(4096, 3000).is_err());
        assert!(AnonymousMapping::new(usize::MAX, 4096).is_err());
    }
}
