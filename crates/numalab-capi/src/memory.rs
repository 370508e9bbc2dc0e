//! Memory policies and placed memory: allocate with a policy over a set,
//! place a range the program already has, free.

use crate::args;
use crate::handles::{self, Object};
use crate::machine::{machine_of, numalab_machine};
use crate::sets::{numalab_set, set_of};
use crate::{guard, numalab_status, Fail, Result};
use numalab::placement::memory_policy::MAX_CHUNK_PAGES;
use numalab::placement::{
    BufferSpec, MemoryPolicy, PlacedBuffer, Prefault, RangeOptions, Thp, WeightedImpl,
};
use numalab::{IdSet, Machine};
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::Arc;

/// A memory policy (opaque), for one machine. Made by
/// `numalab_policy_parse`, `numalab_policy_over_set` or
/// `numalab_policy_weighted`; freed by `numalab_policy_free`.
pub struct numalab_policy {
    _opaque: [u8; 0],
}

/// `numalab_policy_over_set`: every page strictly on the set's nodes
/// (MPOL_BIND).
pub const NUMALAB_POLICY_BIND: c_int = 0;
/// `numalab_policy_over_set`: pages round robin over the set's nodes, in
/// stripes of `stripe_pages` pages (0 or 1: page by page).
pub const NUMALAB_POLICY_INTERLEAVE: c_int = 1;
/// `numalab_policy_over_set`: the set's nodes first, other nodes when they
/// are full (one node: MPOL_PREFERRED; several: MPOL_PREFERRED_MANY).
pub const NUMALAB_POLICY_PREFERRED: c_int = 2;
/// `numalab_policy_over_set`: first touch by the set's CPUs in parallel:
/// one thread pinned to each CPU (ascending) writes its contiguous share
/// of the pages, so each share lands on its CPU's node, as a parallel
/// program's workers would place it.
pub const NUMALAB_POLICY_FIRST_TOUCH: c_int = 3;
/// `numalab_policy_over_set`: the node of the thread that first touches a
/// page (MPOL_LOCAL); the set is not used.
pub const NUMALAB_POLICY_LOCAL: c_int = 4;

/// `numalab_alloc` flag: transparent huge pages on (`MADV_HUGEPAGE`, the
/// buffer aligned to 2 MiB).
pub const NUMALAB_ALLOC_THP_ON: c_uint = 1;
/// `numalab_alloc` flag: transparent huge pages off (`MADV_NOHUGEPAGE`);
/// the default for interleaved and weighted policies, whose pages must
/// stay 4 KiB to be spread.
pub const NUMALAB_ALLOC_THP_OFF: c_uint = 2;
/// `numalab_alloc` flag: back the buffer with hugetlbfs 2 MiB pages
/// (reserved beforehand in /proc/sys/vm/nr_hugepages).
pub const NUMALAB_ALLOC_HUGETLB: c_uint = 4;
/// `numalab_alloc` flag: weighted interleave by the kernel's
/// MPOL_WEIGHTED_INTERLEAVE (Linux >= 6.9), writing the weights to
/// /sys/kernel/mm/mempolicy/weighted_interleave for the allocation (root)
/// and restoring them after. Without it weighted policies are laid by the
/// library chunk by chunk, exact on any kernel, changing no system
/// setting.
pub const NUMALAB_ALLOC_WEIGHTED_KERNEL: c_uint = 8;
/// `numalab_alloc` flag: do not touch the pages; each is placed by the
/// policy when the program first writes it (not with
/// `NUMALAB_POLICY_FIRST_TOUCH` policies, which are a touch).
pub const NUMALAB_ALLOC_LAZY: c_uint = 16;

const ALLOC_FLAGS: c_uint = NUMALAB_ALLOC_THP_ON
    | NUMALAB_ALLOC_THP_OFF
    | NUMALAB_ALLOC_HUGETLB
    | NUMALAB_ALLOC_WEIGHTED_KERNEL
    | NUMALAB_ALLOC_LAZY;

/// `numalab_place_range` flag: leave the pages already there where they
/// are; only pages touched later follow the policy.
pub const NUMALAB_PLACE_NO_MOVE: c_uint = 1;
/// `numalab_place_range` flag: fail (`NUMALAB_E_CAPACITY`) when a page
/// cannot be moved (shared with another process, or the node is full).
pub const NUMALAB_PLACE_STRICT: c_uint = 2;

const PLACE_FLAGS: c_uint = NUMALAB_PLACE_NO_MOVE | NUMALAB_PLACE_STRICT;

/// What a policy handle holds.
pub struct PolicyObject {
    pub machine: Arc<Machine>,
    pub kind: PolicyKind,
}

/// A policy of the grammar, or a first touch by a team of CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyKind {
    Memory(MemoryPolicy),
    /// First touch in parallel by one thread per CPU, in this order.
    Team(Vec<u32>),
}

impl PolicyObject {
    /// The policy as the grammar writes it (a team: `first-touch` by its CPUs).
    pub fn describe(&self) -> String {
        match &self.kind {
            PolicyKind::Memory(p) => p.to_string(),
            PolicyKind::Team(cpus) => format!(
                "first-touch by CPUs {{{}}}",
                cpus.iter().copied().collect::<IdSet>()
            ),
        }
    }

    /// The memory policy the kernel follows (a team's is first touch).
    pub fn memory(&self) -> MemoryPolicy {
        match &self.kind {
            PolicyKind::Memory(p) => p.clone(),
            PolicyKind::Team(_) => MemoryPolicy::FirstTouch,
        }
    }
}

/// What `numalab_alloc` handed out: the placed buffer and how it was asked.
pub struct BufferObject {
    pub buffer: PlacedBuffer,
    pub policy: Arc<PolicyObject>,
}

pub(crate) fn policy_of(p: *const numalab_policy) -> Result<Arc<PolicyObject>> {
    match handles::get(p as usize, "policy", "policy")? {
        Object::Policy(p) => Ok(p),
        _ => unreachable!("the registry checked the kind"),
    }
}

fn hand_out(machine: Arc<Machine>, kind: PolicyKind, out: &mut *mut numalab_policy) {
    *out = handles::insert(Object::Policy(Arc::new(PolicyObject { machine, kind })))
        as *mut numalab_policy;
}

/// # Safety
/// `out` is NULL or valid for a write.
unsafe fn out_policy<'a>(out: *mut *mut numalab_policy) -> Result<&'a mut *mut numalab_policy> {
    // SAFETY: the caller's guarantee.
    let o = unsafe { args::out(out, "out") }?;
    *o = std::ptr::null_mut();
    Ok(o)
}

/// A policy in the grammar every numalab command takes
/// (docs/policies.md): `"first-touch"`, `"local"`, `"bind:NODES"`,
/// `"preferred:NODES"`, `"interleave:NODES[@PAGES]"` (stripes of PAGES
/// pages), `"weighted:N=W,...[@PAGES]"`, `"remote[:near|:far]"`; NODES in
/// the set grammar (`0-1`, `node:2`, `all`). A bad policy is
/// `NUMALAB_E_INVALID` naming it and the valid ones.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_policy_parse(
    m: *const numalab_machine,
    text: *const c_char,
    out: *mut *mut numalab_policy,
) -> numalab_status {
    guard("numalab_policy_parse", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_policy(out) }?;
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let text = unsafe { args::text(text, "text") }?;
        let p = MemoryPolicy::parse(&m, text).map_err(Fail::invalid)?;
        hand_out(m, PolicyKind::Memory(p), o);
        Ok(())
    })
}

/// A policy of kind `kind` (`NUMALAB_POLICY_BIND`, `_INTERLEAVE`,
/// `_PREFERRED`, `_FIRST_TOUCH`, `_LOCAL`) over the set `s`: its nodes,
/// or for `_FIRST_TOUCH` its CPUs. `stripe_pages` is for `_INTERLEAVE`
/// only (0 or 1: page by page; up to 2^30); others need 0.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_policy_over_set(
    s: *const numalab_set,
    kind: c_int,
    stripe_pages: u64,
    out: *mut *mut numalab_policy,
) -> numalab_status {
    guard("numalab_policy_over_set", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_policy(out) }?;
        let s = set_of(s, "set")?;
        if stripe_pages != 0 && kind != NUMALAB_POLICY_INTERLEAVE {
            return Err(Fail::invalid(format!(
                "stripe_pages is {stripe_pages}: only NUMALAB_POLICY_INTERLEAVE takes stripes; pass 0"
            )));
        }
        if stripe_pages > MAX_CHUNK_PAGES {
            return Err(Fail::overflow(format!(
                "stripe_pages is {stripe_pages}; at most {MAX_CHUNK_PAGES}"
            )));
        }
        let nodes = || -> Result<IdSet> {
            if s.set().nodes.is_empty() {
                return Err(Fail::invalid(format!(
                    "the set has no memory node ({}); a policy over it needs one",
                    s.set()
                )));
            }
            Ok(s.set().nodes.clone())
        };
        let p = match kind {
            NUMALAB_POLICY_BIND => PolicyKind::Memory(MemoryPolicy::Bind { nodes: nodes()? }),
            NUMALAB_POLICY_INTERLEAVE => PolicyKind::Memory(MemoryPolicy::Interleave {
                nodes: nodes()?,
                chunk_pages: stripe_pages.max(1),
            }),
            NUMALAB_POLICY_PREFERRED => {
                PolicyKind::Memory(MemoryPolicy::Preferred { nodes: nodes()? })
            }
            NUMALAB_POLICY_FIRST_TOUCH => {
                if s.set().cpus.is_empty() {
                    return Err(Fail::invalid(format!(
                        "the set has no CPU ({}) to first touch the pages",
                        s.set()
                    )));
                }
                PolicyKind::Team(s.set().cpus.iter().collect())
            }
            NUMALAB_POLICY_LOCAL => PolicyKind::Memory(MemoryPolicy::Local),
            other => {
                return Err(Fail::invalid(format!(
                    "unknown policy kind {other}; valid: NUMALAB_POLICY_BIND (0), _INTERLEAVE (1), _PREFERRED (2), _FIRST_TOUCH (3), _LOCAL (4)"
                )))
            }
        };
        hand_out(s.machine.clone(), p, o);
        Ok(())
    })
}

/// Weighted interleave: `weights[i]` pages (times `chunk_pages`, 0 or 1
/// meaning 1) on `nodes[i]` per round, for `n` nodes; weights 1 to 255,
/// each node once.
///
/// # Safety
/// `nodes` and `weights` are NULL or valid for `n` reads; `out` is NULL
/// or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_policy_weighted(
    m: *const numalab_machine,
    nodes: *const c_uint,
    weights: *const c_uint,
    n: usize,
    chunk_pages: u64,
    out: *mut *mut numalab_policy,
) -> numalab_status {
    guard("numalab_policy_weighted", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_policy(out) }?;
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let (nodes, weights) = unsafe {
            (
                args::ids(nodes, n, "nodes")?,
                args::ids(weights, n, "weights")?,
            )
        };
        if n == 0 {
            return Err(Fail::invalid("weighted interleave needs at least one node"));
        }
        if chunk_pages > MAX_CHUNK_PAGES {
            return Err(Fail::overflow(format!(
                "chunk_pages is {chunk_pages}; at most {MAX_CHUNK_PAGES}"
            )));
        }
        let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(n);
        for (&node, &w) in nodes.iter().zip(weights) {
            if !m.allowed_nodes.contains(node) {
                return Err(Fail::invalid(format!(
                    "node {node} does not exist or is not allowed; allowed nodes: {}",
                    m.allowed_nodes
                )));
            }
            if !(1..=255).contains(&w) {
                return Err(Fail::invalid(format!(
                    "weight {w} of node {node} must be a whole number from 1 to 255 (the kernel's range)"
                )));
            }
            if pairs.iter().any(|p| p.0 == node) {
                return Err(Fail::invalid(format!("node {node} has two weights")));
            }
            pairs.push((node, w));
        }
        pairs.sort_unstable();
        let p = MemoryPolicy::Weighted {
            weights: pairs,
            chunk_pages: chunk_pages.max(1),
        };
        hand_out(m, PolicyKind::Memory(p), o);
        Ok(())
    })
}

/// Frees a policy. NULL is a no-op; a policy already freed is
/// `NUMALAB_E_HANDLE`. Memory allocated with it stays valid.
#[no_mangle]
pub extern "C" fn numalab_policy_free(p: *mut numalab_policy) -> numalab_status {
    guard("numalab_policy_free", || {
        handles::remove(p as usize, "policy", "policy")
    })
}

/// The policy as text (`"interleave:0-3@4"`, `"weighted:0=3,1=1"`,
/// `"first-touch by CPUs {0-7}"`), NUL-terminated into `(buf, capacity)`;
/// `*needed` (when not NULL) gets the bytes it needs.
///
/// # Safety
/// `buf` is NULL or valid for `capacity` writes; `needed` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_policy_format(
    p: *const numalab_policy,
    buf: *mut c_char,
    capacity: usize,
    needed: *mut usize,
) -> numalab_status {
    guard("numalab_policy_format", || {
        let p = policy_of(p)?;
        // SAFETY: the caller's guarantee.
        unsafe { args::write_text(&p.describe(), buf, capacity, needed) }
    })
}

fn alloc(policy: Arc<PolicyObject>, size: usize, flags: c_uint) -> Result<*mut c_void> {
    if flags & !ALLOC_FLAGS != 0 {
        return Err(Fail::invalid(format!(
            "unknown flags {:#x}; valid: NUMALAB_ALLOC_THP_ON, _THP_OFF, _HUGETLB, _WEIGHTED_KERNEL, _LAZY",
            flags & !ALLOC_FLAGS
        )));
    }
    if size == 0 {
        return Err(Fail::invalid("size is 0; allocate at least 1 byte"));
    }
    if size > numalab::placement::buffer::MAX_BUFFER_BYTES {
        return Err(Fail::overflow(format!(
            "size {size} is larger than any address space; at most {} bytes",
            numalab::placement::buffer::MAX_BUFFER_BYTES
        )));
    }
    let thp = match (
        flags & NUMALAB_ALLOC_THP_ON != 0,
        flags & NUMALAB_ALLOC_THP_OFF != 0,
    ) {
        (true, true) => {
            return Err(Fail::invalid(
                "NUMALAB_ALLOC_THP_ON and NUMALAB_ALLOC_THP_OFF exclude each other",
            ))
        }
        (true, false) => Some(Thp::On),
        (false, true) => Some(Thp::Off),
        (false, false) => None,
    };
    let lazy = flags & NUMALAB_ALLOC_LAZY != 0;
    let prefault = match (&policy.kind, lazy) {
        (PolicyKind::Team(_), true) => {
            return Err(Fail::invalid(
                "a first touch by a team touches the pages: it cannot be NUMALAB_ALLOC_LAZY",
            ))
        }
        (PolicyKind::Team(cpus), false) => Prefault::Parallel(cpus.clone()),
        (_, true) => Prefault::Lazy,
        (_, false) => Prefault::Toucher,
    };
    let spec = BufferSpec {
        size,
        policy: policy.memory(),
        thp,
        hugetlb: flags & NUMALAB_ALLOC_HUGETLB != 0,
        toucher: None,
        weighted: if flags & NUMALAB_ALLOC_WEIGHTED_KERNEL != 0 {
            WeightedImpl::Kernel
        } else {
            WeightedImpl::Emulate
        },
    };
    let buffer = PlacedBuffer::with_prefault(&policy.machine, &spec, &prefault)?;
    let addr = buffer.as_ptr();
    handles::insert_buffer(addr as usize, Arc::new(BufferObject { buffer, policy }));
    Ok(addr as *mut c_void)
}

/// # Safety
/// `out` is NULL or valid for a write.
unsafe fn out_ptr<'a>(out: *mut *mut c_void) -> Result<&'a mut *mut c_void> {
    // SAFETY: the caller's guarantee.
    let o = unsafe { args::out(out, "out") }?;
    *o = std::ptr::null_mut();
    Ok(o)
}

/// Allocates `size` bytes (rounded up to whole pages, page aligned,
/// zeroed) placed as `policy` says, and touches every page so that the
/// placement is decided when the call returns (unless
/// `NUMALAB_ALLOC_LAZY`): first-touch and local pages go to the calling
/// thread's node, `NUMALAB_POLICY_FIRST_TOUCH` pages to their team
/// member's. `flags` is 0 or `NUMALAB_ALLOC_*` flags or-ed. A strict
/// placement larger than the free memory of its nodes is
/// `NUMALAB_E_CAPACITY` (never an OOM kill). Free with `numalab_free`.
/// Needs the live machine.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_alloc(
    policy: *const numalab_policy,
    size: usize,
    flags: c_uint,
    out: *mut *mut c_void,
) -> numalab_status {
    guard("numalab_alloc", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_ptr(out) }?;
        *o = alloc(policy_of(policy)?, size, flags)?;
        Ok(())
    })
}

/// `numalab_alloc` of `count` elements of `elem_size` bytes each; a
/// product that overflows is `NUMALAB_E_OVERFLOW` (the check `calloc`
/// makes).
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_alloc_array(
    policy: *const numalab_policy,
    count: usize,
    elem_size: usize,
    flags: c_uint,
    out: *mut *mut c_void,
) -> numalab_status {
    guard("numalab_alloc_array", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_ptr(out) }?;
        let size = count.checked_mul(elem_size).ok_or_else(|| {
            Fail::overflow(format!(
                "{count} elements of {elem_size} bytes overflow the size of any allocation"
            ))
        })?;
        *o = alloc(policy_of(policy)?, size, flags)?;
        Ok(())
    })
}

/// `numalab_alloc` with the policy as text (`numalab_policy_parse`'s
/// grammar): `numalab_alloc_str(m, n * sizeof(double), "interleave:0-3", 0, &p)`.
///
/// # Safety
/// `policy` is NULL or a NUL-terminated string; `out` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_alloc_str(
    m: *const numalab_machine,
    size: usize,
    policy: *const c_char,
    flags: c_uint,
    out: *mut *mut c_void,
) -> numalab_status {
    guard("numalab_alloc_str", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_ptr(out) }?;
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let text = unsafe { args::text(policy, "policy") }?;
        let p = MemoryPolicy::parse(&m, text).map_err(Fail::invalid)?;
        let policy = Arc::new(PolicyObject {
            machine: m,
            kind: PolicyKind::Memory(p),
        });
        *o = alloc(policy, size, flags)?;
        Ok(())
    })
}

/// Frees memory from `numalab_alloc*`. NULL is a no-op; any other address
/// (not the start of such memory, or already freed) is
/// `NUMALAB_E_HANDLE` and nothing is freed.
#[no_mangle]
pub extern "C" fn numalab_free(addr: *mut c_void) -> numalab_status {
    guard("numalab_free", || {
        handles::remove_buffer(addr as usize, "addr")
    })
}

/// The usable size of memory from `numalab_alloc*` (the size asked,
/// rounded up to whole pages).
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_alloc_size(
    addr: *const c_void,
    out: *mut usize,
) -> numalab_status {
    guard("numalab_alloc_size", || {
        let b = handles::buffer(addr as usize, "addr")?;
        // SAFETY: the caller's guarantee.
        *unsafe { args::out(out, "out") }? = b.buffer.len();
        Ok(())
    })
}

fn place(policy: &PolicyObject, addr: usize, len: usize, flags: c_uint) -> Result<()> {
    if flags & !PLACE_FLAGS != 0 {
        return Err(Fail::invalid(format!(
            "unknown flags {:#x}; valid: NUMALAB_PLACE_NO_MOVE, NUMALAB_PLACE_STRICT",
            flags & !PLACE_FLAGS
        )));
    }
    if addr == 0 {
        return Err(args::null("addr"));
    }
    if addr.checked_add(len).is_none() || len > numalab::placement::buffer::MAX_BUFFER_BYTES {
        return Err(Fail::overflow(format!(
            "{len} bytes from {addr:#x} run past the end of the address space"
        )));
    }
    if let PolicyKind::Team(_) = policy.kind {
        return Err(Fail::invalid(
            "a first touch by a team places pages as they are first written; place an existing range with bind, interleave, weighted or preferred",
        ));
    }
    let options = RangeOptions {
        move_pages: flags & NUMALAB_PLACE_NO_MOVE == 0,
        strict: flags & NUMALAB_PLACE_STRICT != 0,
    };
    numalab::placement::place_range(&policy.machine, addr, len, &policy.memory(), options)?;
    Ok(())
}

/// Places memory the program already has (a static array, a `malloc`ed
/// block, a Fortran allocatable): the pages holding `[addr, addr+len)`
/// (widened to whole pages: data sharing the first and last page moves
/// too) get `policy`, and the pages already there move to follow it
/// (unless `NUMALAB_PLACE_NO_MOVE`); pages not yet touched follow it when
/// touched. Striped and weighted policies are laid chunk by chunk. A range
/// that is not all mapped is `NUMALAB_E_INVALID`, never a crash.
#[no_mangle]
pub extern "C" fn numalab_place_range(
    policy: *const numalab_policy,
    addr: *mut c_void,
    len: usize,
    flags: c_uint,
) -> numalab_status {
    guard("numalab_place_range", || {
        place(&*policy_of(policy)?, addr as usize, len, flags)
    })
}

/// `numalab_place_range` with the policy as text.
///
/// # Safety
/// `policy` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn numalab_place_range_str(
    m: *const numalab_machine,
    addr: *mut c_void,
    len: usize,
    policy: *const c_char,
    flags: c_uint,
) -> numalab_status {
    guard("numalab_place_range_str", || {
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let text = unsafe { args::text(policy, "policy") }?;
        let p = MemoryPolicy::parse(&m, text).map_err(Fail::invalid)?;
        let policy = PolicyObject {
            machine: m,
            kind: PolicyKind::Memory(p),
        };
        place(&policy, addr as usize, len, flags)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{numalab_machine_free, numalab_machine_load};
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

    fn last() -> String {
        // SAFETY: never NULL.
        unsafe { std::ffi::CStr::from_ptr(numalab_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn allocations_are_placed_zeroed_and_freed_once() {
        let m = live();
        let mut p = std::ptr::null_mut();
        let mut size = 0usize;
        // SAFETY: valid pointers; the memory is used within its size.
        unsafe {
            assert_eq!(
                numalab_alloc_str(m, 10_000, c"bind:0".as_ptr(), 0, &mut p),
                NUMALAB_OK
            );
            assert_eq!(numalab_alloc_size(p, &mut size), NUMALAB_OK);
            assert_eq!(size, 12_288);
            let bytes = std::slice::from_raw_parts_mut(p as *mut u8, size);
            assert!(bytes.iter().all(|&b| b == 0));
            bytes[size - 1] = 7;
            assert_eq!(numalab_free(p), NUMALAB_OK);
            assert_eq!(numalab_free(p), NUMALAB_E_HANDLE);
            assert!(
                last().contains("not the start of memory numalab_alloc returned"),
                "{}",
                last()
            );
            assert_eq!(numalab_free(std::ptr::null_mut()), NUMALAB_OK);
            numalab_machine_free(m);
        }
    }

    #[test]
    fn sizes_that_overflow_and_bad_flags_are_refused() {
        let m = live();
        let mut pol = std::ptr::null_mut();
        let mut p = std::ptr::dangling_mut::<c_void>();
        // SAFETY: valid pointers; nothing is allocated.
        unsafe {
            assert_eq!(
                numalab_policy_parse(m, c"first-touch".as_ptr(), &mut pol),
                NUMALAB_OK
            );
            assert_eq!(
                numalab_alloc(pol, usize::MAX, 0, &mut p),
                NUMALAB_E_OVERFLOW
            );
            assert!(p.is_null());
            assert_eq!(
                numalab_alloc_array(pol, usize::MAX / 2, 3, 0, &mut p),
                NUMALAB_E_OVERFLOW
            );
            assert_eq!(
                last(),
                format!(
                    "numalab_alloc_array: {} elements of 3 bytes overflow the size of any allocation",
                    usize::MAX / 2
                )
            );
            assert_eq!(numalab_alloc(pol, 0, 0, &mut p), NUMALAB_E_INVALID);
            assert_eq!(numalab_alloc(pol, 4096, 1 << 9, &mut p), NUMALAB_E_INVALID);
            assert_eq!(
                numalab_alloc(
                    pol,
                    4096,
                    NUMALAB_ALLOC_THP_ON | NUMALAB_ALLOC_THP_OFF,
                    &mut p
                ),
                NUMALAB_E_INVALID
            );
            // Larger than the machine: refused before any page is touched.
            assert_eq!(numalab_alloc(pol, 1 << 50, 0, &mut p), NUMALAB_E_CAPACITY);
            assert_eq!(
                numalab_place_range(pol, 4096 as *mut c_void, usize::MAX, 0),
                NUMALAB_E_OVERFLOW
            );
            assert_eq!(numalab_policy_free(pol), NUMALAB_OK);
            assert_eq!(numalab_alloc(pol, 4096, 0, &mut p), NUMALAB_E_HANDLE);
            numalab_machine_free(m);
        }
    }

    #[test]
    fn policies_over_sets_and_weights_say_what_they_are() {
        let m = live();
        let mut all = std::ptr::null_mut();
        let mut pol = std::ptr::null_mut();
        let mut text = [0 as c_char; 64];
        let show = |p: *const numalab_policy, text: &mut [c_char; 64]| {
            // SAFETY: sized as passed.
            assert_eq!(
                // SAFETY: the test passes valid pointers and sizes.
                unsafe { numalab_policy_format(p, text.as_mut_ptr(), 64, std::ptr::null_mut()) },
                NUMALAB_OK
            );
            // SAFETY: NUL-terminated by numalab_policy_format.
            unsafe { std::ffi::CStr::from_ptr(text.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: valid pointers.
        unsafe {
            assert_eq!(
                crate::sets::numalab_set_parse_nodes(m, c"0".as_ptr(), &mut all),
                NUMALAB_OK
            );
            assert_eq!(
                numalab_policy_over_set(all, NUMALAB_POLICY_INTERLEAVE, 4, &mut pol),
                NUMALAB_OK
            );
            assert_eq!(show(pol, &mut text), "interleave:0@4");
            assert_eq!(
                numalab_policy_over_set(all, NUMALAB_POLICY_BIND, 4, &mut pol),
                NUMALAB_E_INVALID
            );
            assert!(pol.is_null());
            assert_eq!(
                numalab_policy_over_set(all, 9, 0, &mut pol),
                NUMALAB_E_INVALID
            );
            assert!(last().contains("unknown policy kind 9"), "{}", last());
            assert_eq!(
                numalab_policy_weighted(m, [0u32].as_ptr(), [3u32].as_ptr(), 1, 2, &mut pol),
                NUMALAB_OK
            );
            assert_eq!(show(pol, &mut text), "weighted:0=3@2");
            assert_eq!(
                numalab_policy_weighted(m, [0u32].as_ptr(), [300u32].as_ptr(), 1, 0, &mut pol),
                NUMALAB_E_INVALID
            );
            assert_eq!(
                numalab_policy_parse(m, c"interleave:9".as_ptr(), &mut pol),
                NUMALAB_E_INVALID
            );
            assert_eq!(
                last(),
                "numalab_policy_parse: node 9 does not exist; valid nodes: 0"
            );
            assert_eq!(
                numalab_policy_parse(m, c"scatter".as_ptr(), &mut pol),
                NUMALAB_E_INVALID
            );
            assert!(
                last().contains("unknown memory policy 'scatter'; valid: first-touch"),
                "{}",
                last()
            );
        }
    }
}
