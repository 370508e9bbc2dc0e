//! Placing memory a program already has: any address range, not only a
//! buffer numalab mapped (a numpy array, a Fortran allocatable, a region
//! of a C heap). The policy goes on the pages that hold the range, and
//! the pages already there move to follow it (`mbind` with
//! `MPOL_MF_MOVE`); pages not touched yet follow it when first touched.
//!
//! Striped policies (`interleave:NODES@PAGES`) and weighted interleave are
//! laid by the kernel chunk by chunk, each chunk strictly bound to its
//! node: exact, on any kernel, with no system setting changed. (The
//! kernel's own weighted interleave reads system-wide weights at the
//! moment each page is allocated, which cannot be held for pages a
//! program touches later.)

use super::buffer::{bind_chunks, mbind_error};
use super::memory_policy::{MemoryPolicy, Realization, WeightedImpl};
use super::sys::{self, Mode, MPOL_MF_MOVE, MPOL_MF_STRICT};
use super::{PlacementError, PlacementError as E};
use crate::machine::Machine;
use serde::Serialize;

/// How a range is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeOptions {
    /// Move the pages already there (`MPOL_MF_MOVE`); without it only
    /// pages touched later follow the policy.
    pub move_pages: bool,
    /// Fail when a page cannot be moved (`MPOL_MF_STRICT`): a page another
    /// process maps too, or a node out of memory.
    pub strict: bool,
}

impl Default for RangeOptions {
    fn default() -> Self {
        Self {
            move_pages: true,
            strict: false,
        }
    }
}

/// What was done to a range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RangePlacement {
    /// The whole pages placed: the range widened to page boundaries.
    pub start: usize,
    pub len: usize,
    pub page_size: usize,
    pub realization: Realization,
    /// Remarks worth showing (the range widened, neighbours moved with it).
    pub notes: Vec<String>,
}

/// The whole pages holding `[addr, addr+len)`: `(start, len)`, or an error
/// for an empty range or one that wraps around the address space.
pub fn page_span(
    addr: usize,
    len: usize,
    page_size: usize,
) -> Result<(usize, usize), PlacementError> {
    if len == 0 {
        return Err(E::Invalid(
            "the range is empty: give at least 1 byte".into(),
        ));
    }
    let end = addr.checked_add(len).ok_or_else(|| {
        E::Invalid(format!(
            "the range of {len} bytes at {addr:#x} runs past the end of the address space"
        ))
    })?;
    let start = addr - addr % page_size;
    let end = end.checked_next_multiple_of(page_size).ok_or_else(|| {
        E::Invalid(format!(
            "the range at {addr:#x} ends past the address space"
        ))
    })?;
    Ok((start, end - start))
}

/// Places the pages of `[addr, addr+len)` as `policy` says (see the
/// module's text). The range is widened to whole base pages: whatever else
/// shares its first and last page moves with it. Memory that is not
/// mapped is an error, never a crash.
pub fn place_range(
    m: &Machine,
    addr: usize,
    len: usize,
    policy: &MemoryPolicy,
    options: RangeOptions,
) -> Result<RangePlacement, PlacementError> {
    if !m.is_live() {
        return Err(E::Invalid(
            "placing memory needs the live machine, not a topology file".into(),
        ));
    }
    let page_size = sys::page_size();
    let (start, span) = page_span(addr, len, page_size)?;
    let toucher_node = sys::current_cpu().and_then(|c| m.node_of_cpu(c));
    let realization = policy.realize(m, toucher_node, WeightedImpl::Emulate)?;
    let mut flags = 0;
    if options.move_pages {
        flags |= MPOL_MF_MOVE;
    }
    if options.strict {
        flags |= MPOL_MF_STRICT;
    }
    match &realization {
        // The kernel moves only pages outside a policy's nodes, and every
        // page of a range is inside `interleave:ALL`'s: the policy is set
        // for pages touched later, and the pages already there are moved
        // one by one, round robin.
        Realization::Kernel {
            mode: Mode::Interleave,
            nodes,
        } if options.move_pages => {
            sys::mbind(start, span, Mode::Interleave, nodes, 0)
                .map_err(|e| range_error(e, Mode::Interleave, nodes, start, span))?;
            spread_pages(start, span, page_size, nodes, options.strict)?;
        }
        Realization::Kernel { mode, nodes } => {
            sys::kernel_supports(*mode).map_err(E::Unsupported)?;
            // A memory policy moves or places pages without changing their
            // contents; the kernel refuses ranges that are not mapped.
            sys::mbind(start, span, *mode, nodes, flags)
                .map_err(|e| range_error(e, *mode, nodes, start, span))?;
        }
        Realization::Chunks { pattern } => {
            bind_chunks(start, span, page_size, pattern, flags)?;
        }
        Realization::KernelWeighted { .. } => {
            return Err(E::Invalid(
                "an existing range is striped by chunks, not by the kernel's weighted interleave"
                    .into(),
            ))
        }
    }
    let mut notes = Vec::new();
    if start != addr || span != len {
        notes.push(format!(
            "placed the {} whole pages holding the range ({} bytes from {start:#x}); other data on its first and last page moved with it",
            span / page_size,
            span
        ));
    }
    Ok(RangePlacement {
        start,
        len: span,
        page_size,
        realization,
        notes,
    })
}

/// Moves the pages already in `[start, start+span)` round robin over
/// `nodes` (page `i` to the `i % n`-th node) with `move_pages`, in
/// batches; untouched pages are left for the policy. With `strict`, a page
/// that could not move is an error.
fn spread_pages(
    start: usize,
    span: usize,
    page_size: usize,
    nodes: &crate::IdSet,
    strict: bool,
) -> Result<(), PlacementError> {
    const BATCH: usize = 1 << 14;
    let order: Vec<i32> = nodes.iter().map(|n| n as i32).collect();
    let pages = span / page_size;
    let mut addrs: Vec<usize> = Vec::with_capacity(BATCH.min(pages));
    let mut targets: Vec<i32> = Vec::with_capacity(BATCH.min(pages));
    let mut status: Vec<i32> = vec![0; BATCH.min(pages)];
    let mut stuck = 0usize;
    let mut i = 0;
    while i < pages {
        let k = BATCH.min(pages - i);
        addrs.clear();
        targets.clear();
        for p in i..i + k {
            addrs.push(start + p * page_size);
            targets.push(order[p % order.len()]);
        }
        sys::move_pages(0, &addrs, &targets, &mut status[..k])
            .map_err(|e| E::Os(format!("move_pages over {k} pages: {e}")))?;
        stuck += status[..k]
            .iter()
            .filter(|&&s| s < 0 && s != -libc::ENOENT)
            .count();
        i += k;
    }
    if strict && stuck > 0 {
        return Err(E::Capacity(format!(
            "{stuck} pages of the range could not be moved to nodes {{{nodes}}} (shared with another process, or the nodes are full), and strict placement was asked"
        )));
    }
    Ok(())
}

fn range_error(
    e: std::io::Error,
    mode: Mode,
    nodes: &crate::IdSet,
    start: usize,
    span: usize,
) -> PlacementError {
    match e.raw_os_error() {
        Some(libc::EFAULT) => E::Invalid(format!(
            "the range {start:#x}..{:#x} is not all mapped memory of this process",
            start + span
        )),
        Some(libc::EIO) => E::Capacity(format!(
            "some pages of the range could not be moved to nodes {{{nodes}}} (shared with another process, or the nodes are full), and strict placement was asked"
        )),
        _ => mbind_error(e, mode, nodes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::PageHistogram;

    #[test]
    fn spans_widen_to_whole_pages_and_refuse_wrapping() {
        assert_eq!(page_span(4096, 4096, 4096).unwrap(), (4096, 4096));
        assert_eq!(page_span(4100, 10, 4096).unwrap(), (4096, 4096));
        assert_eq!(page_span(4000, 200, 4096).unwrap(), (0, 8192));
        assert!(page_span(1, 0, 4096)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        let e = page_span(usize::MAX - 10, 100, 4096).unwrap_err();
        assert!(e.to_string().contains("runs past the end"), "{e}");
        let e = page_span(usize::MAX - 4000, 100, 4096).unwrap_err();
        assert!(e.to_string().contains("ends past"), "{e}");
    }

    fn node0() -> (Machine, u32) {
        let m = Machine::live().unwrap();
        let n = m.allowed_nodes.first().unwrap();
        (m, n)
    }

    #[test]
    fn a_heap_vector_moves_to_the_node_asked_and_keeps_its_contents() {
        let (m, n) = node0();
        let page = sys::page_size();
        let v: Vec<u64> = (0..(64 * page / 8) as u64).collect();
        let addr = v.as_ptr() as usize;
        let bytes = v.len() * 8;
        let p = place_range(
            &m,
            addr,
            bytes,
            &MemoryPolicy::on_node(n),
            RangeOptions::default(),
        )
        .unwrap();
        assert!(p.start <= addr && p.start + p.len >= addr + bytes);
        assert_eq!(p.len % page, 0);
        let h = PageHistogram::of_range(0, p.start as *mut u8, p.len, page).unwrap();
        assert_eq!(h.pages_outside(&crate::IdSet::single(n)), 0);
        assert_eq!(
            h.pages_by_node.get(&n).copied(),
            Some((p.len / page) as u64)
        );
        assert!(v.iter().enumerate().all(|(i, x)| *x == i as u64));
    }

    #[test]
    fn weighted_and_striped_ranges_are_chunks() {
        let (m, n) = node0();
        let page = sys::page_size();
        let mut v = vec![0u8; 40 * page];
        let addr = v.as_mut_ptr() as usize;
        let w = MemoryPolicy::Weighted {
            weights: vec![(n, 3)],
            chunk_pages: 2,
        };
        let p = place_range(&m, addr, v.len(), &w, RangeOptions::default()).unwrap();
        assert_eq!(
            p.realization,
            Realization::Chunks {
                pattern: vec![(n, 6)]
            }
        );
        v[0] = 1;
    }

    #[test]
    fn an_interleaved_range_keeps_the_kernel_policy_and_moves_its_pages() {
        let (m, n) = node0();
        let page = sys::page_size();
        let mut v = vec![3u8; 24 * page];
        let addr = v.as_mut_ptr() as usize;
        let il = MemoryPolicy::Interleave {
            nodes: crate::IdSet::single(n),
            chunk_pages: 1,
        };
        let strict = RangeOptions {
            move_pages: true,
            strict: true,
        };
        let p = place_range(&m, addr, v.len(), &il, strict).unwrap();
        assert_eq!(
            p.realization,
            Realization::Kernel {
                mode: Mode::Interleave,
                nodes: crate::IdSet::single(n)
            }
        );
        let h = PageHistogram::of_range(0, p.start as *mut u8, p.len, page).unwrap();
        assert_eq!(h.pages_outside(&crate::IdSet::single(n)), 0);
        assert!(v.iter().all(|&b| b == 3));
        v[0] = 4;
    }

    #[test]
    fn memory_that_is_not_mapped_is_an_error() {
        let (m, n) = node0();
        let page = sys::page_size();
        // A fresh mapping, unmapped at once so that its address is known
        // not to be mapped.
        let p = crate::sys::mapping::AnonymousMapping::new(4 * page, page)
            .unwrap()
            .start();
        for policy in [
            MemoryPolicy::on_node(n),
            MemoryPolicy::Interleave {
                nodes: crate::IdSet::single(n),
                chunk_pages: 2,
            },
        ] {
            let e = place_range(&m, p, 4 * page, &policy, RangeOptions::default()).unwrap_err();
            assert!(
                e.to_string()
                    .contains("is not all mapped memory of this process"),
                "{policy}: {e}"
            );
        }
    }
}
