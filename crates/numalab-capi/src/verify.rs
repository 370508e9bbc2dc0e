//! Verification: where the pages of any address range are (the kernel's
//! answer, `move_pages` in query mode), and whether a buffer or a range is
//! placed as its policy asked, in one call.

use crate::args::{self, fill_mask, fill_message};
use crate::handles;
use crate::memory::{numalab_policy, policy_of, PolicyKind, PolicyObject};
use crate::{
    guard, numalab_status, Fail, Result, NUMALAB_MAX_NODES, NUMALAB_MESSAGE_BYTES,
    NUMALAB_NODE_MASK_WORDS,
};
use numalab::placement::range::page_span;
use numalab::placement::{check_pages, PageHistogram};
use std::ffi::{c_char, c_int, c_void};

/// Most pages one query may cover: 2^28, 1 TiB of 4 KiB pages (the
/// kernel's answer takes 4 bytes a page while it is counted).
pub const NUMALAB_MAX_QUERY_PAGES: u64 = 1 << 28;

/// Pages of a range by node, as the kernel reports them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct numalab_page_counts {
    /// Bytes per page counted (4096; 2 MiB for a hugetlbfs buffer).
    pub page_size: u64,
    /// Pages in the range.
    pub total: u64,
    /// Pages never touched: no memory behind them yet.
    pub untouched: u64,
    /// Pages the kernel could not report (unmapped, or another error).
    pub unknown: u64,
    /// `by_node[n]`: pages on node `n`.
    pub by_node: [u64; NUMALAB_MAX_NODES],
}

impl Default for numalab_page_counts {
    fn default() -> Self {
        Self {
            page_size: 0,
            total: 0,
            untouched: 0,
            unknown: 0,
            by_node: [0; NUMALAB_MAX_NODES],
        }
    }
}

/// A buffer or range checked against its policy.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct numalab_buffer_check {
    /// 1 when every page is where the policy puts it (and every thread of
    /// a first touch ran where it was pinned), else 0.
    pub verified: c_int,
    /// The CPU that touched the pages when one thread did, else -1.
    pub toucher_cpu: c_int,
    /// The nodes the policy puts pages on, as a mask (bit `n % 64` of word
    /// `n / 64`); all zero when that depends on who touches them.
    pub expected_nodes: [u64; NUMALAB_NODE_MASK_WORDS],
    /// Where the pages are.
    pub pages: numalab_page_counts,
    /// Every way the placement differs from the request, "; "-separated,
    /// or the placement's notes when it verified; NUL-terminated.
    pub message: [c_char; NUMALAB_MESSAGE_BYTES],
}

impl Default for numalab_buffer_check {
    fn default() -> Self {
        Self {
            verified: 0,
            toucher_cpu: -1,
            expected_nodes: [0; NUMALAB_NODE_MASK_WORDS],
            pages: numalab_page_counts::default(),
            message: [0; NUMALAB_MESSAGE_BYTES],
        }
    }
}

fn counts_of(h: &PageHistogram) -> numalab_page_counts {
    let mut c = numalab_page_counts {
        page_size: h.page_size as u64,
        total: h.pages_total,
        untouched: h.untouched_pages,
        unknown: h.unknown_pages.values().sum(),
        ..Default::default()
    };
    for (&n, &pages) in &h.pages_by_node {
        if let Some(slot) = c.by_node.get_mut(n as usize) {
            *slot = pages;
        }
    }
    c
}

fn histogram_of_range(addr: usize, len: usize) -> Result<PageHistogram> {
    if addr == 0 {
        return Err(args::null("addr"));
    }
    let page = numalab::placement::sys::page_size();
    let (start, span) = page_span(addr, len, page).map_err(|e| match e {
        numalab::placement::PlacementError::Invalid(m) if m.contains("address space") => {
            Fail::overflow(m)
        }
        other => other.into(),
    })?;
    let pages = (span / page) as u64;
    if pages > NUMALAB_MAX_QUERY_PAGES {
        return Err(Fail::overflow(format!(
            "the range holds {pages} pages; ask about at most {NUMALAB_MAX_QUERY_PAGES} at a time"
        )));
    }
    Ok(PageHistogram::of_range(0, start as *mut u8, span, page)?)
}

/// Where the pages holding `[addr, addr+len)` (widened to whole pages) are
/// now, from the kernel (`move_pages` in query mode: nothing moves, and an
/// untouched page stays untouched). Any address range of this process:
/// unmapped pages count as `unknown`.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_range_pages(
    addr: *const c_void,
    len: usize,
    out: *mut numalab_page_counts,
) -> numalab_status {
    guard("numalab_range_pages", || {
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(out, "out") }?;
        let h = histogram_of_range(addr as usize, len)?;
        *out = counts_of(&h);
        Ok(())
    })
}

/// The check of `hist` against `policy`, as the CLI's `numalab place` makes it.
fn check(
    policy: &PolicyObject,
    hist: &PageHistogram,
    toucher: Option<u32>,
    workers: &[numalab::placement::WorkerCheck],
    notes: &[String],
) -> numalab_buffer_check {
    let team = match &policy.kind {
        PolicyKind::Team(cpus) => Some(cpus.as_slice()),
        PolicyKind::Memory(_) => None,
    };
    let (expected, problems) = check_pages(
        &policy.machine,
        &policy.memory(),
        team,
        hist,
        toucher,
        workers,
    );
    let mut out = numalab_buffer_check {
        verified: problems.is_empty() as c_int,
        toucher_cpu: toucher.map(|c| c as c_int).unwrap_or(-1),
        pages: counts_of(hist),
        ..Default::default()
    };
    if let Some(e) = &expected {
        fill_mask(&mut out.expected_nodes, e.iter());
    }
    let text = if problems.is_empty() {
        notes.join("; ")
    } else {
        problems.join("; ")
    };
    fill_message(&mut out.message, &text);
    out
}

/// Checks memory from `numalab_alloc*` against the policy it was made
/// with, in one call: where every page is (the kernel's answer), the nodes
/// the policy puts them on, and whether they are there (`verified`):
/// bind and interleave pages on their nodes, interleave even within a
/// stripe per node, weighted pages within one round of their weights,
/// first-touch pages on their toucher's node, each share of a team's first
/// touch on its CPU's node.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_verify(
    addr: *const c_void,
    out: *mut numalab_buffer_check,
) -> numalab_status {
    guard("numalab_verify", || {
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(out, "out") }?;
        let b = handles::buffer(addr as usize, "addr")?;
        let hist = b.buffer.histogram()?;
        let toucher = match b.policy.kind {
            PolicyKind::Team(_) => None,
            PolicyKind::Memory(_) => b.buffer.toucher_cpu(),
        };
        *out = check(
            &b.policy,
            &hist,
            toucher,
            b.buffer.prefault_workers(),
            b.buffer.notes(),
        );
        Ok(())
    })
}

/// Checks any range (widened to whole pages) against `policy`, as
/// `numalab_verify` checks a buffer: for memory placed with
/// `numalab_place_range`, or placed by the program itself. First-touch
/// and local pages are checked against the calling thread's node; a team
/// policy's shares split the range as `numalab_alloc` would.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_verify_range(
    policy: *const numalab_policy,
    addr: *const c_void,
    len: usize,
    out: *mut numalab_buffer_check,
) -> numalab_status {
    guard("numalab_verify_range", || {
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(out, "out") }?;
        let p = policy_of(policy)?;
        let hist = histogram_of_range(addr as usize, len)?;
        let toucher = match p.kind {
            PolicyKind::Team(_) => None,
            PolicyKind::Memory(_) => numalab::placement::sys::current_cpu(),
        };
        *out = check(&p, &hist, toucher, &[], &[]);
        Ok(())
    })
}

/// Page counts as text: `"node 0: 512 pages (50.0%), node 1: 512 pages
/// (50.0%)"`, then untouched and unknown pages when there are any;
/// NUL-terminated into `(buf, capacity)`, `*needed` (when not NULL) the
/// bytes it needs.
///
/// # Safety
/// `counts` is NULL or valid for a read; `buf` is NULL or valid for
/// `capacity` writes; `needed` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_page_counts_format(
    counts: *const numalab_page_counts,
    buf: *mut c_char,
    capacity: usize,
    needed: *mut usize,
) -> numalab_status {
    guard("numalab_page_counts_format", || {
        // SAFETY: the caller's guarantee.
        let c = unsafe { counts.as_ref() }.ok_or_else(|| args::null("counts"))?;
        let touched: u64 = c.by_node.iter().sum();
        let mut parts: Vec<String> = c
            .by_node
            .iter()
            .enumerate()
            .filter(|(_, &p)| p > 0)
            .map(|(n, &p)| {
                format!(
                    "node {n}: {p} pages ({}%)",
                    numalab::text::format::fixed(p as f64 / touched as f64 * 100.0, 1)
                )
            })
            .collect();
        if c.untouched > 0 {
            parts.push(format!("untouched: {} pages", c.untouched));
        }
        if c.unknown > 0 {
            parts.push(format!("unknown: {} pages", c.unknown));
        }
        if parts.is_empty() {
            parts.push("no pages".into());
        }
        // SAFETY: the caller's guarantee.
        unsafe { args::write_text(&parts.join(", "), buf, capacity, needed) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{numalab_machine, numalab_machine_free, numalab_machine_load};
    use crate::memory::*;
    use crate::*;

    fn live() -> *mut numalab_machine {
        let mut m = std::ptr::null_mut();
        // SAFETY: valid pointers.
        assert_eq!(
            // SAFETY: the test passes valid pointers and sizes.
            unsafe { numalab_machine_load(std::ptr::null(), &mut m) },
            NUMALAB_OK
        );
        m
    }

    fn message(c: &numalab_buffer_check) -> String {
        // SAFETY: the field is NUL-terminated by the library.
        unsafe { std::ffi::CStr::from_ptr(c.message.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn every_policy_allocates_and_verifies_here() {
        let m = live();
        let page = numalab::placement::sys::page_size();
        // SAFETY: valid pointers throughout.
        unsafe {
            for text in [
                c"first-touch",
                c"local",
                c"bind:0",
                c"preferred:0",
                c"interleave:0",
                c"interleave:0@4",
                c"weighted:0=3",
                c"weighted:0=2@2",
            ] {
                let mut p = std::ptr::null_mut();
                assert_eq!(
                    numalab_alloc_str(m, 64 * page, text.as_ptr(), 0, &mut p),
                    NUMALAB_OK,
                    "{text:?}"
                );
                let mut c = numalab_buffer_check::default();
                assert_eq!(numalab_verify(p, &mut c), NUMALAB_OK);
                assert_eq!(c.verified, 1, "{text:?}: {}", message(&c));
                assert_eq!((c.pages.total, c.pages.by_node[0]), (64, 64), "{text:?}");
                assert_eq!(c.expected_nodes[0] & 1, 1, "{text:?}");
                assert_eq!(numalab_free(p), NUMALAB_OK);
            }
            let mut all = std::ptr::null_mut();
            assert_eq!(
                crate::sets::numalab_set_parse(m, c"all".as_ptr(), &mut all),
                NUMALAB_OK
            );
            let mut team = std::ptr::null_mut();
            assert_eq!(
                numalab_policy_over_set(all, NUMALAB_POLICY_FIRST_TOUCH, 0, &mut team),
                NUMALAB_OK
            );
            let mut p = std::ptr::null_mut();
            assert_eq!(numalab_alloc(team, 33 * page, 0, &mut p), NUMALAB_OK);
            let mut c = numalab_buffer_check::default();
            assert_eq!(numalab_verify(p, &mut c), NUMALAB_OK);
            assert_eq!(
                (c.verified, c.toucher_cpu, c.pages.by_node[0]),
                (1, -1, 33),
                "{}",
                message(&c)
            );
            assert_eq!(numalab_free(p), NUMALAB_OK);
            let mut lazy = std::ptr::null_mut();
            assert_eq!(
                numalab_alloc_str(
                    m,
                    4 * page,
                    c"bind:0".as_ptr(),
                    NUMALAB_ALLOC_LAZY,
                    &mut lazy
                ),
                NUMALAB_OK
            );
            assert_eq!(numalab_verify(lazy, &mut c), NUMALAB_OK);
            assert_eq!((c.verified, c.pages.untouched), (0, 4));
            assert_eq!(message(&c), "4 pages were never touched");
            assert_eq!(numalab_free(lazy), NUMALAB_OK);
            numalab_machine_free(m);
        }
    }

    #[test]
    fn a_heap_range_is_placed_and_counted() {
        let m = live();
        let page = numalab::placement::sys::page_size();
        let mut v = vec![1u8; 16 * page];
        let mut c = numalab_page_counts::default();
        let mut chk = numalab_buffer_check::default();
        let mut pol = std::ptr::null_mut();
        // SAFETY: valid pointers; the range is the vector's.
        unsafe {
            let addr = v.as_mut_ptr() as *mut c_void;
            assert_eq!(
                numalab_place_range_str(m, addr, v.len(), c"bind:0".as_ptr(), 0),
                NUMALAB_OK
            );
            assert_eq!(numalab_range_pages(addr, v.len(), &mut c), NUMALAB_OK);
            assert!(
                c.total >= 16 && c.by_node[0] == c.total,
                "{:?}",
                (c.total, c.by_node[0])
            );
            assert_eq!(
                numalab_policy_parse(m, c"interleave:0@2".as_ptr(), &mut pol),
                NUMALAB_OK
            );
            assert_eq!(
                numalab_place_range(pol, addr, v.len(), NUMALAB_PLACE_STRICT),
                NUMALAB_OK
            );
            assert_eq!(
                numalab_verify_range(pol, addr, v.len(), &mut chk),
                NUMALAB_OK
            );
            assert_eq!(chk.verified, 1, "{}", message(&chk));
            let mut text = [0 as c_char; 128];
            assert_eq!(
                numalab_page_counts_format(&c, text.as_mut_ptr(), 128, std::ptr::null_mut()),
                NUMALAB_OK
            );
            assert_eq!(
                std::ffi::CStr::from_ptr(text.as_ptr()).to_str().unwrap(),
                format!("node 0: {} pages (100.0%)", c.total)
            );
            assert_eq!(
                numalab_range_pages(std::ptr::null(), 1, &mut c),
                NUMALAB_E_NULL
            );
            assert_eq!(
                numalab_range_pages(addr, usize::MAX, &mut c),
                NUMALAB_E_OVERFLOW
            );
            assert_eq!(
                numalab_range_pages(4096 as *const c_void, 1 << 45, &mut c),
                NUMALAB_E_OVERFLOW
            );
            assert_eq!(numalab_verify(addr, &mut chk), NUMALAB_E_HANDLE);
        }
        assert!(v.iter().all(|&b| b == 1));
        numalab_machine_free(m);
    }
}
