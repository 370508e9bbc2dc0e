//! Placement by the library: `numalab run --plan FILE` (a policy per data
//! region) and `numalab run --mem interleave:NODES@PAGES | weighted:...`
//! (stripes for every mapping a program makes), on any program.
//!
//! The engine passes the plan in `NUMALAB_PLAN`, one line each (written
//! by `numalab::profile::plan`):
//!
//! - `policy MODE NODES`: a new entry whose kernel policy (`mbind` mode in
//!   the kernel's numbering, nodes as a comma list) applies to what the
//!   lines after it select; `policy chunks NODE:PAGES,...`: stripes, each
//!   run of PAGES pages bound to its NODE, the pattern repeating from the
//!   region's start.
//! - selection terms, as `select` reads them (`heap`, `mmap`, `size`,
//!   `addr`, `code`, `file`), plus `all` (every allocation and mapping, and
//!   the heaps themselves as they grow: the break and malloc's arenas) and
//!   `static START END PATH` (an object's static data, placed at start).
//!
//! An allocation of at least a page that an entry selects is made page
//! aligned and its pages bound before the program touches them (and
//! moved, `MPOL_MF_MOVE`, where it reuses touched memory). Smaller ones
//! share their pages with other objects: they are left where the heap's
//! policy puts them (the `all` entry's stripes, or the process policy).
//! The first entry that selects a region wins. A region a plan entry
//! placed keeps its policy: the program's own `mbind` on it is skipped
//! (and counted). Stripes on everything (`all`) are the process policy in
//! another form: the program's own `mbind` wins over them, as over
//! numactl's.
//!
//! Records: `Planned` when a policy is applied, `PlanPages` (its pages by
//! node) when the region is freed or at exit, so that `--verify` reads
//! where the pages ended from the kernel. They go to the profile's
//! records, or to `NUMALAB_PLAN_OUT` when the program is not profiled.

use crate::record::{Kind, Record};
use crate::runtime::stacks::{call_stack, STACK_CAPACITY};
use crate::runtime::state::{config, on_library_thread, page_size};
use crate::runtime::{channel, emit, next, sys};
use crate::select::{self, Candidate, Term};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::OnceLock;

/// Entries read at most.
const MAX_ENTRIES: usize = 64;
/// Node-mask words (1024 nodes).
const MASK_WORDS: usize = 16;
/// Runs of a stripe pattern at most.
const MAX_RUNS: usize = 64;
/// Live planned regions remembered for `--verify` and the program's own
/// `mbind` (more are placed, but not verified one by one).
const MAX_PLANNED: usize = 4096;
/// Arena heaps (mappings malloc carves small blocks from) striped at most.
const MAX_ARENAS: usize = 256;

/// `MPOL_MF_MOVE`: pages already present move too.
const MF_MOVE: usize = 1 << 1;
/// `MPOL_BIND`.
const MODE_BIND: usize = 2;
const MODE_INTERLEAVE: usize = 3;
/// `vm.max_map_count` where it cannot be read: the kernel's default.
const DEFAULT_MAP_COUNT: usize = 65530;

#[derive(Clone, Debug, PartialEq)]
enum Policy {
    /// One `mbind` over the region.
    Kernel {
        mode: usize,
        mask: [u64; MASK_WORDS],
    },
    /// Runs of `(node, pages)`, repeating from the region's start (read
    /// at start; never empty in an entry).
    Chunks(Vec<(u32, u64)>),
}

#[derive(Debug)]
struct Entry {
    policy: Policy,
    terms: Vec<Term>,
    /// `all`: every allocation and mapping, and the heaps as they grow.
    all: bool,
    /// `static` terms: absolute ranges, placed at start.
    statics: Vec<(usize, usize)>,
    /// `small`: allocations below a page too, from a pool of its own.
    small: bool,
}

static ENTRIES: OnceLock<Vec<Entry>> = OnceLock::new();
/// The paths of the plan's `file` terms.
static PATHS: OnceLock<Vec<String>> = OnceLock::new();
/// Set once a plan with entries was read.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// An entry selects by call stack: allocations of a page or more take one.
static BY_STACK: AtomicBool = AtomicBool::new(false);
/// The `all` entry, if any (its index + 1; 0: none).
static ALL: AtomicUsize = AtomicUsize::new(0);

/// Live planned regions: start, length, entry + 1 (0: a free slot).
static PLANNED: [[AtomicUsize; 3]; MAX_PLANNED] = [const {
    [
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    ]
}; MAX_PLANNED];
/// Slots of [`PLANNED`] and [`ARENAS`] ever used: scans stop there (a
/// free of a page or more, and each small block with stripes, look).
static PLANNED_USED: AtomicUsize = AtomicUsize::new(0);
static ARENAS_USED: AtomicUsize = AtomicUsize::new(0);
/// The break heap: where striping started, and how far it reaches.
static BRK_START: AtomicUsize = AtomicUsize::new(0);
static BRK_DONE: AtomicUsize = AtomicUsize::new(0);
/// Arena heaps seen: start, how far striped, and end. A heap is striped as
/// far as its blocks reach (and [`ARENA_AHEAD`] beyond), never whole: a
/// thread's 64 MiB heap that holds 2 MiB costs tens of stripes, not
/// thousands (each a mapping of the process, and an `mbind`).
static ARENAS: [[AtomicUsize; 3]; MAX_ARENAS] = [const {
    [
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    ]
}; MAX_ARENAS];
/// One thread at a time extends the heaps' stripes.
static GROWING: AtomicBool = AtomicBool::new(false);
/// Program `mbind` calls skipped on planned regions, and `mbind` calls of
/// the plan the kernel refused (with the first refusal's errno).
static OVERRIDDEN: AtomicUsize = AtomicUsize::new(0);
/// Whether an entry places small allocations (`small`).
static SMALL: AtomicBool = AtomicBool::new(false);
/// Stripes laid with an `mbind` of their own over the run, and the most
/// there may be. To the kernel each stripe is a mapping of its own
/// (neighbours differ in policy), and a process may have
/// `vm.max_map_count` mappings: half of them are left to the program, so
/// that its own `mmap` and thread stacks never run out. Past the budget a
/// range is interleaved page by page over the same nodes (one mapping);
/// such ranges are counted.
static STRIPES_LAID: AtomicUsize = AtomicUsize::new(0);
static STRIPE_BUDGET: AtomicUsize = AtomicUsize::new(DEFAULT_MAP_COUNT / 2);
static FOLDED: AtomicUsize = AtomicUsize::new(0);
static REFUSED: AtomicUsize = AtomicUsize::new(0);
static FIRST_ERRNO: AtomicUsize = AtomicUsize::new(0);

/// Whether a plan is in force.
pub fn active() -> bool {
    ACTIVE.load(SeqCst)
}

/// Reads `NUMALAB_PLAN`; places static data and notes the break. Called
/// from the library's start, before the program runs. Returns whether
/// a plan is in force.
pub fn init() -> bool {
    let Some(text) = config().plan.clone() else {
        return false;
    };
    let mut paths = Vec::new();
    let entries = parse(&text, select::object_bias, &mut paths);
    let _ = PATHS.set(paths);
    select::resolve_find_object();
    if entries.is_empty() {
        return false;
    }
    SMALL.store(entries.iter().any(|e| e.small && !e.all), SeqCst);
    BY_STACK.store(
        entries.iter().any(|e| e.terms.iter().any(Term::by_code)),
        SeqCst,
    );
    let max_maps = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
        .unwrap_or(DEFAULT_MAP_COUNT);
    STRIPE_BUDGET.store(max_maps / 2, SeqCst);
    if let Some(i) = entries.iter().position(|e| e.all) {
        ALL.store(i + 1, SeqCst);
        // SAFETY: sbrk(0) only reads the break.
        let brk = unsafe { libc::sbrk(0) } as usize;
        let ps = page_size();
        let at = brk.div_ceil(ps) * ps;
        BRK_START.store(at, SeqCst);
        BRK_DONE.store(at, SeqCst);
    }
    let _ = ENTRIES.set(entries);
    ACTIVE.store(true, SeqCst);
    for (i, e) in ENTRIES.get().into_iter().flatten().enumerate() {
        for &(s, end) in &e.statics {
            // Static data shares its first and last page with neighbours:
            // the pages it overlaps are placed, neighbours' parts with it.
            let ps = page_size();
            let (s, end) = (s / ps * ps, end.div_ceil(ps) * ps);
            place(i, s, end - s, true);
        }
    }
    true
}

/// The entries of a `NUMALAB_PLAN` text (`bias` as for `select`).
fn parse(text: &str, bias: impl Fn(&str) -> Option<usize>, paths: &mut Vec<String>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = Vec::new();
    for line in text.lines().take(MAX_ENTRIES * 64) {
        let line = line.trim_end();
        if let Some(p) = line.strip_prefix("policy ") {
            if entries.len() >= MAX_ENTRIES {
                break;
            }
            // An entry whose policy does not read selects nothing.
            let policy = parse_policy(p);
            entries.push(Entry {
                policy: policy.unwrap_or(Policy::Chunks(Vec::new())),
                terms: Vec::new(),
                all: false,
                statics: Vec::new(),
                small: false,
            });
            continue;
        }
        let Some(e) = entries.last_mut() else {
            continue;
        };
        if line == "all" {
            e.all = true;
        } else if line == "small" {
            e.small = true;
        } else if let Some(rest) = line.strip_prefix("static ") {
            let mut f = rest.splitn(3, ' ');
            let mut num = || f.next().and_then(|n| n.parse::<usize>().ok());
            if let (Some(s), Some(end)) = (num(), num()) {
                if let Some(b) = f.next().and_then(&bias) {
                    e.statics.push((s.wrapping_add(b), end.wrapping_add(b)));
                }
            }
        } else {
            e.terms.extend(select::parse_regions(line, &bias, paths));
        }
    }
    // Entries that select nothing are dropped (a policy that did not read).
    entries.retain(|e| {
        !matches!(&e.policy, Policy::Chunks(runs) if runs.is_empty())
            && (e.all || !e.terms.is_empty() || !e.statics.is_empty())
    });
    entries
}

/// `MODE NODES` or `chunks NODE:PAGES,...`.
fn parse_policy(t: &str) -> Option<Policy> {
    let (word, rest) = t.split_once(' ')?;
    if word == "chunks" {
        let mut runs = Vec::new();
        for run in rest.split(',') {
            let (n, p) = run.split_once(':')?;
            let (n, p) = (n.parse::<u32>().ok()?, p.parse::<u64>().ok()?);
            if p == 0 || n as usize >= MASK_WORDS * 64 || runs.len() == MAX_RUNS {
                return None;
            }
            runs.push((n, p));
        }
        return (!runs.is_empty()).then_some(Policy::Chunks(runs));
    }
    // 0 (MPOL_DEFAULT) to 6 (MPOL_WEIGHTED_INTERLEAVE); "-": no node.
    let mode = word.parse::<usize>().ok().filter(|m| *m <= 6)?;
    let mut mask = [0u64; MASK_WORDS];
    for n in rest.split(',').filter(|n| !n.is_empty() && *n != "-") {
        let n = n.parse::<usize>().ok().filter(|n| *n < MASK_WORDS * 64)?;
        mask[n / 64] |= 1 << (n % 64);
    }
    Some(Policy::Kernel { mode, mask })
}

/// One `mbind`; counts a refusal.
fn mbind(start: usize, len: usize, mode: usize, mask: &[u64; MASK_WORDS]) {
    mbind_with(start, len, mode, mask, MF_MOVE)
}

/// [`mbind`] with the call's `flags` (0: the policy for pages to come
/// only, present pages stay where they are).
fn mbind_with(start: usize, len: usize, mode: usize, mask: &[u64; MASK_WORDS], flags: usize) {
    // SAFETY: mbind reads MASK_WORDS words of the mask. libc's own
    // `syscall`: this library's would skip the call on a planned range.
    let r = unsafe {
        next::real_syscall(
            libc::SYS_mbind,
            [
                start as libc::c_long,
                len as libc::c_long,
                mode as libc::c_long,
                mask.as_ptr() as libc::c_long,
                (MASK_WORDS * 64) as libc::c_long,
                flags as libc::c_long,
            ],
        )
    };
    if r != 0 && REFUSED.fetch_add(1, SeqCst) == 0 {
        // SAFETY: this thread's errno.
        FIRST_ERRNO.store(unsafe { *libc::__errno_location() } as usize, SeqCst);
    }
}

/// Applies entry `i`'s policy to `[start, start + len)` (page aligned),
/// stripes counted from `origin`.
fn apply(i: usize, origin: usize, start: usize, len: usize) {
    let Some(e) = ENTRIES.get().and_then(|v| v.get(i)) else {
        return;
    };
    let ps = page_size();
    match &e.policy {
        Policy::Kernel { mode, mask } => mbind(start, len, *mode, mask),
        Policy::Chunks(runs) => {
            let n = runs.len();
            let round: u64 = runs.iter().map(|r| r.1).sum();
            let end = start + len;
            // Where `start` falls in the pattern.
            let mut page = ((start - origin) / ps) as u64 % round;
            let mut at = start;
            let mut k = 0;
            while page >= runs[k].1 {
                page -= runs[k].1;
                k += 1;
            }
            let mut every = [0u64; MASK_WORDS];
            for r in runs {
                every[r.0 as usize / 64] |= 1 << (r.0 % 64);
            }
            // One node: the stripes would merge into one mapping anyway.
            if runs.iter().all(|r| r.0 == runs[0].0) {
                mbind(start, len, MODE_BIND, &every);
                return;
            }
            while at < end {
                if STRIPES_LAID.fetch_add(1, SeqCst) >= STRIPE_BUDGET.load(SeqCst) {
                    mbind(at, end - at, MODE_INTERLEAVE, &every);
                    FOLDED.fetch_add(1, SeqCst);
                    return;
                }
                let left = (runs[k].1 - page) as usize * ps;
                let take = left.min(end - at);
                let mut mask = [0u64; MASK_WORDS];
                let node = runs[k].0 as usize;
                mask[node / 64] |= 1 << (node % 64);
                mbind(at, take, MODE_BIND, &mask);
                at += take;
                page = 0;
                k = (k + 1) % n;
            }
        }
    }
}

/// Places a region entry `i` selected: its pages (wholly inside; `whole`:
/// the range is page aligned already) get the policy, and it is recorded.
fn place(i: usize, start: usize, len: usize, whole: bool) {
    let ps = page_size();
    let (s, end) = if whole {
        (start, start + len)
    } else {
        (start.div_ceil(ps) * ps, (start + len) / ps * ps)
    };
    if end <= s {
        return;
    }
    let refused = REFUSED.load(SeqCst);
    let spread = spreads(i);
    if spread {
        // Interleave and stripes are page by page: a transparent huge page
        // would put 2 MiB on one node, and the region's nodes would be
        // even only in huge pages (a region of 7 huge and 512 small pages
        // over two nodes came out 56/44). The kernel places small pages
        // here, as the policy reads (docs/plan.md).
        // SAFETY: advice on a range of the program's own mapping.
        unsafe { libc::syscall(libc::SYS_madvise, s, end - s, libc::MADV_NOHUGEPAGE) };
    }
    apply(i, s, s, end - s);
    // Stripes on everything (`all`, from `--mem`) are the process's policy
    // in another form: not remembered one by one, and a program's own
    // `mbind` wins over them as it wins over numactl's.
    if ENTRIES.get().and_then(|v| v.get(i)).is_some_and(|e| e.all) {
        return;
    }
    remember(i, s, end - s);
    emit(&Record {
        kind: Kind::Planned,
        tid: sys::gettid(),
        cpu: u32::MAX,
        node: i as i32,
        flags: (REFUSED.load(SeqCst) - refused).min(u32::MAX as usize) as u32,
        addr: s as u64,
        size: (end - s) as u64,
        time_ns: sys::monotonic_ns(),
        // 1: huge pages turned off on it (interleave, stripes).
        aux: spread as u32,
    });
}

/// The stripes entry that governs `[p, p + len)`: a planned region's, or
/// the `all` entry's; None where no stripes over two or more nodes do.
fn striping(p: usize, len: usize) -> Option<usize> {
    let end = p.saturating_add(len);
    let entries = ENTRIES.get()?;
    let stripes = |i: usize| matches!(entries.get(i).map(|e| &e.policy), Some(Policy::Chunks(runs)) if runs.iter().any(|r| r.0 != runs[0].0));
    let region = planned().iter().find_map(|s| {
        let e = s[2].load(SeqCst);
        let (a, l) = (s[0].load(SeqCst), s[1].load(SeqCst));
        (e != 0 && e != usize::MAX && a < end && p < a + l).then(|| e - 1)
    });
    region
        .or_else(|| ALL.load(SeqCst).checked_sub(1))
        .filter(|&i| stripes(i))
}

/// Before the program's `mremap` of `[p, p + len)`: `mremap` works on one
/// mapping only, and stripes split a range into one mapping per stripe
/// (each with its own node's policy), so the call would fail with EFAULT
/// where it never failed without numalab (issue 36). The range gets one
/// policy, interleave over the stripes' nodes, and the kernel merges it
/// into one mapping again (its pages stay where they are). Returns the
/// entry whose stripes [`after_remap`] lays again.
pub fn before_remap(p: usize, len: usize) -> Option<usize> {
    if !active() || len == 0 {
        return None;
    }
    let i = striping(p, len)?;
    let Some(Policy::Chunks(runs)) = ENTRIES.get().and_then(|v| v.get(i)).map(|e| &e.policy) else {
        return None;
    };
    let mut every = [0u64; MASK_WORDS];
    for r in runs {
        every[r.0 as usize / 64] |= 1 << (r.0 % 64);
    }
    let ps = page_size();
    // No move: the stripes' pages stay on their nodes.
    mbind_with(
        p / ps * ps,
        len.div_ceil(ps) * ps,
        MODE_INTERLEAVE,
        &every,
        0,
    );
    Some(i)
}

/// After the `mremap` [`before_remap`] prepared: entry `i`'s stripes are
/// laid again on the range the call left, the new one (or the old one
/// when it failed), from its start; pages already there stay.
pub fn after_remap(i: usize, start: usize, len: usize) {
    let ps = page_size();
    let len = len.div_ceil(ps) * ps;
    if len == 0 {
        return;
    }
    if ENTRIES.get().and_then(|v| v.get(i)).is_some_and(|e| e.all) {
        apply(i, start, start, len);
    } else {
        place(i, start, len, true);
    }
}

/// Whether entry `i` spreads a region page by page over several nodes
/// (interleave, stripes over two or more nodes).
fn spreads(i: usize) -> bool {
    match ENTRIES.get().and_then(|v| v.get(i)).map(|e| &e.policy) {
        Some(Policy::Kernel { mode, mask }) => {
            *mode == MODE_INTERLEAVE && mask.iter().map(|w| w.count_ones()).sum::<u32>() > 1
        }
        Some(Policy::Chunks(runs)) => runs.iter().any(|r| r.0 != runs[0].0),
        None => false,
    }
}

fn remember(i: usize, start: usize, len: usize) {
    for (k, slot) in PLANNED.iter().enumerate() {
        if slot[2]
            .compare_exchange(0, usize::MAX, SeqCst, SeqCst)
            .is_ok()
        {
            slot[0].store(start, SeqCst);
            slot[1].store(len, SeqCst);
            PLANNED_USED.fetch_max(k + 1, SeqCst);
            slot[2].store(i + 1, SeqCst);
            return;
        }
    }
}

/// Whether a plan entry placed a region (live or freed since).
pub fn placed_any() -> bool {
    PLANNED_USED.load(SeqCst) > 0
}

/// The slots of [`PLANNED`] that were ever used.
fn planned() -> &'static [[AtomicUsize; 3]] {
    &PLANNED[..PLANNED_USED.load(SeqCst)]
}

/// The entry (index) that selects an allocation or mapping, if any.
fn selecting(c: &Candidate) -> Option<usize> {
    ENTRIES
        .get()?
        .iter()
        .position(|e| e.all || select::selects_in(&e.terms, PATHS.get().map_or(&[], |p| p), c))
}

/// The entry that selects a heap allocation of `n` bytes about to be made
/// by the calling thread (its stack taken when an entry needs it); `None`
/// below a page or when nothing selects it.
pub fn entry_for_allocation(n: usize) -> Option<usize> {
    if !active() || n < page_size() || on_library_thread() {
        return None;
    }
    let mut pcs = [0usize; STACK_CAPACITY];
    let depth = if BY_STACK.load(SeqCst) {
        call_stack(&mut pcs)
    } else {
        0
    };
    selecting(&Candidate {
        // Not known yet: address terms judge mappings and regions only.
        addr: 0,
        len: n,
        mmap: false,
        stack: &pcs[..depth],
        path: None,
    })
}

/// The first entry with `small` that selects an allocation of `n` bytes,
/// below a page, about to be made by the calling thread; `None` when no
/// entry asks for small allocations (then no stack is taken).
pub fn entry_for_small(n: usize) -> Option<usize> {
    if !active() || !SMALL.load(SeqCst) || n >= page_size() || on_library_thread() {
        return None;
    }
    let mut pcs = [0usize; STACK_CAPACITY];
    let depth = if BY_STACK.load(SeqCst) {
        call_stack(&mut pcs)
    } else {
        0
    };
    let c = Candidate {
        addr: 0,
        len: n,
        mmap: false,
        stack: &pcs[..depth],
        path: None,
    };
    ENTRIES.get()?.iter().position(|e| {
        e.small && !e.all && select::selects_in(&e.terms, PATHS.get().map_or(&[], |p| p), &c)
    })
}

/// Places entry `i`'s pool of small allocations (`pool::alloc`).
pub fn place_pool(i: usize, start: usize, len: usize) {
    place(i, start, len, true);
}

/// Places a page-aligned allocation `p` of `n` bytes that entry `i` selected.
pub fn place_allocation(i: usize, p: usize, n: usize) {
    place(i, p, n.div_ceil(page_size()) * page_size(), true);
    whole_mapping(i, p);
}

/// Places the pages wholly inside an allocation entry `i` selected that
/// could not be made page aligned (a `realloc`).
pub fn place_within(i: usize, p: usize, n: usize) {
    if p == 0 {
        return;
    }
    if heap_striped(i) {
        striped_block(i, p, n);
    } else {
        place(i, p, n, false);
        whole_mapping(i, p);
    }
}

/// Whether entry `i` reaches blocks of a page or more through the heap's
/// own stripes rather than one by one: the `all` entry under glibc's
/// malloc, whose heap and arenas it stripes as they grow, and whose
/// blocks past the mmap threshold are mappings of their own. Made page
/// aligned one by one, sqlite's page cache (blocks of a page and a few
/// bytes) took 12 KiB a block and an `mbind` each: 5,900 calls, and
/// memory and time 2.5 times a plain run's.
pub fn heap_striped(i: usize) -> bool {
    next::is_glibc() && ENTRIES.get().and_then(|v| v.get(i)).is_some_and(|e| e.all)
}

/// A block glibc's malloc returned under the `all` entry `i` (see
/// [`heap_striped`]): its own mapping striped whole, from its start, or
/// the heap it came from striped as far as it reaches.
pub fn striped_block(i: usize, p: usize, n: usize) {
    let Some((start, bytes)) = next::own_mapping(p) else {
        heap_block(p, n);
        return;
    };
    // The stripes count from the block's first whole page, as a plan's
    // region's do; the header page before it takes the pattern's first
    // node (with stripes on one node, the whole mapping stays one).
    let ps = page_size();
    let first = p.div_ceil(ps) * ps;
    let end = start + bytes;
    if first < end {
        apply(i, first, first, end - first);
    }
    if start < first {
        apply(i, start, start, first - start);
    }
}

/// Where glibc served block `p` by a mapping of its own, the mapping's
/// pages outside the block's whole pages (its header page, a partial
/// last page) get entry `i`'s policy too, so that the kernel keeps one
/// mapping: glibc's `realloc` moves the block with `mremap`, which fails
/// on a range of two mappings (sqlite under a plan placing `size>1M`: 3 of
/// its 6 calls failed, and glibc copied the blocks instead). Stripes over
/// several nodes are one mapping per stripe whatever is done here.
fn whole_mapping(i: usize, p: usize) {
    let uniform = match ENTRIES.get().and_then(|v| v.get(i)).map(|e| &e.policy) {
        Some(Policy::Kernel { .. }) => true,
        Some(Policy::Chunks(runs)) => runs.iter().all(|r| r.0 == runs[0].0),
        None => false,
    };
    let Some((start, bytes)) = next::own_mapping(p).filter(|_| uniform) else {
        return;
    };
    // Whatever was placed is the policy already: laid again over the whole
    // mapping, the kernel merges the pieces.
    apply(i, start, start, bytes);
}

/// Whether the plan selects mappings by their file.
pub fn needs_path() -> bool {
    PATHS.get().is_some_and(|p| !p.is_empty())
}

/// Places a new mapping when an entry selects it.
pub fn mapped(p: usize, len: usize, file: Option<&[u8]>) {
    if !active() || on_library_thread() {
        return;
    }
    let mut pcs = [0usize; STACK_CAPACITY];
    let depth = if BY_STACK.load(SeqCst) {
        call_stack(&mut pcs)
    } else {
        0
    };
    let c = Candidate {
        addr: p,
        len,
        mmap: true,
        stack: &pcs[..depth],
        path: file,
    };
    if let Some(i) = selecting(&c) {
        place(i, p, len.div_ceil(page_size()) * page_size(), true);
    }
}

/// The span of one of malloc's arena heaps (glibc's `HEAP_MAX_SIZE` on
/// 64-bit: heaps are mapped whole, readable or not, at multiples of it).
const ARENA_HEAP: usize = 64 << 20;

/// How far past a block's end an arena heap is striped: malloc writes the
/// next chunk's header just past a block, and the following blocks come
/// from there, so they find their pages striped already; a multiple of
/// any stripe's pages (the phase of the pattern comes from the heap's
/// start).
const ARENA_AHEAD: usize = 1 << 20;

/// A small block malloc returned at `p`: with an `all` entry, the heap it
/// came from is striped as far as it reaches (the break as it grows, each
/// arena heap once, whole).
pub fn heap_block(p: usize, n: usize) {
    let all = ALL.load(SeqCst);
    if all == 0 || p == 0 {
        return;
    }
    let end = p.saturating_add(n);
    let brk_start = BRK_START.load(SeqCst);
    if p >= brk_start && end <= BRK_DONE.load(SeqCst) {
        return;
    }
    if in_arena(p, end) || IN_GROWTH.with(|g| g.get()) {
        // (Reading /proc/self/maps below may allocate: those blocks wait.)
        return;
    }
    // One thread extends the stripes at a time; the others wait for it
    // rather than touch their blocks under the process policy (a thread
    // that returned at once could fill a whole arena meanwhile).
    while GROWING.swap(true, SeqCst) {
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
    IN_GROWTH.with(|g| g.set(true));
    // Another thread may have striped this block's heap meanwhile.
    let striped = (p >= brk_start && end <= BRK_DONE.load(SeqCst)) || in_arena(p, end);
    if !striped {
        grow(all - 1, p, end, brk_start);
    }
    IN_GROWTH.with(|g| g.set(false));
    GROWING.store(false, SeqCst);
}

thread_local! {
    /// Set while this thread extends the stripes.
    static IN_GROWTH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Stripes the heap that holds the block `[p, end)` with entry `all`'s
/// policy: the break up to where it is now, or the arena heap (or
/// mapping) around `p` as far as the block reaches.
fn grow(all: usize, p: usize, end: usize, brk_start: usize) {
    let ps = page_size();
    // SAFETY: sbrk(0) only reads the break.
    let brk = unsafe { libc::sbrk(0) } as usize / ps * ps;
    let done = BRK_DONE.load(SeqCst);
    if p >= brk_start && p < brk {
        if brk > done {
            apply(all, brk_start, done, brk - done);
            BRK_DONE.store(brk, SeqCst);
        }
        return;
    }
    // Only this thread changes the arenas (GROWING is held).
    let used = ARENAS_USED.load(SeqCst);
    let known = ARENAS[..used].iter().find(|a| {
        let limit = a[2].load(SeqCst);
        limit != 0 && p >= a[0].load(SeqCst) && p < limit
    });
    let slot = match known {
        Some(slot) => slot,
        None => {
            // An arena heap starts at the multiple of its span below the
            // block, and is mapped whole; anything else (the main arena's
            // mappings when the break cannot grow) is striped as mapped.
            let heap = p & !(ARENA_HEAP - 1);
            let span = match mapping_of(heap) {
                Some((s, _)) if s == heap && mapped_through(heap, heap + ARENA_HEAP) => {
                    Some((heap, heap + ARENA_HEAP))
                }
                _ => mapping_of(p),
            };
            let Some((s, e)) = span else {
                return;
            };
            if s < brk_start && brk_start <= e {
                // The break heap below where the library started (glibc
                // carves blocks from the top it had grown before): striped
                // in phase with the stripes above `brk_start`, or the
                // pattern would shift by the gap where the two meet (a run
                // of 9 pages among runs of 8).
                let round = round_bytes(all);
                let origin = brk_start - (brk_start - s).div_ceil(round) * round;
                apply(all, origin, s, brk_start - s);
                if let Some(slot) = ARENAS.get(used) {
                    slot[0].store(s, SeqCst);
                    slot[1].store(brk_start, SeqCst);
                    slot[2].store(brk_start, SeqCst);
                    ARENAS_USED.store(used + 1, SeqCst);
                }
                return;
            }
            let Some(slot) = ARENAS.get(used) else {
                // No slot left to remember it: striped whole, once.
                apply(all, s, s, e - s);
                return;
            };
            slot[0].store(s, SeqCst);
            slot[1].store(s, SeqCst);
            slot[2].store(e, SeqCst);
            ARENAS_USED.store(used + 1, SeqCst);
            slot
        }
    };
    let (s, striped, limit) = (
        slot[0].load(SeqCst),
        slot[1].load(SeqCst),
        slot[2].load(SeqCst),
    );
    let reach = (end.div_ceil(ARENA_AHEAD) * ARENA_AHEAD)
        .saturating_add(ARENA_AHEAD)
        .min(limit);
    if reach > striped {
        apply(all, s, striped, reach - striped);
        slot[1].store(reach, SeqCst);
    }
}

/// The bytes of one round of entry `i`'s stripes (a page for a kernel
/// policy, whose `mbind` has no phase).
fn round_bytes(i: usize) -> usize {
    let pages = match ENTRIES.get().and_then(|v| v.get(i)).map(|e| &e.policy) {
        Some(Policy::Chunks(runs)) => runs.iter().map(|r| r.1 as usize).sum::<usize>().max(1),
        _ => 1,
    };
    pages * page_size()
}

/// Whether `[s, e)` is mapped without a hole: `mincore` fails with ENOMEM
/// on unmapped pages (one call over the range, the vector on the stack in
/// pieces).
fn mapped_through(s: usize, e: usize) -> bool {
    let ps = page_size();
    let mut v = [0u8; 4096];
    let mut at = s;
    while at < e {
        let len = (e - at).min(v.len() * ps);
        // SAFETY: v holds one byte per page of the (at most 4096-page) range.
        let r = unsafe { libc::syscall(libc::SYS_mincore, at, len, v.as_mut_ptr()) };
        if r != 0 {
            return false;
        }
        at += len;
    }
    true
}

/// Whether the block `[p, end)` lies in the striped part of an arena heap.
fn in_arena(p: usize, end: usize) -> bool {
    ARENAS[..ARENAS_USED.load(SeqCst)].iter().any(|a| {
        let striped = a[1].load(SeqCst);
        p >= a[0].load(SeqCst) && end <= striped
    })
}

/// The mapping holding `p`, from /proc/self/maps (read without allocating).
fn mapping_of(p: usize) -> Option<(usize, usize)> {
    let fd = sys::open_read(std::ffi::OsStr::new("/proc/self/maps"))?;
    let mut buf = [0u8; 4096];
    let mut line = [0u8; 64];
    let mut len = 0;
    let mut skipping = false;
    let mut found = None;
    // Each line starts "START-END ": the range is judged at its first space.
    'read: while let Some(n) = sys::read_some(fd, &mut buf).filter(|n| *n > 0) {
        for &b in &buf[..n] {
            match b {
                b'\n' => {
                    len = 0;
                    skipping = false;
                }
                _ if skipping => {}
                b' ' => {
                    skipping = true;
                    match range_of(&line[..len]) {
                        Some((s, e)) if p >= s && p < e => {
                            found = Some((s, e));
                            break 'read;
                        }
                        _ => {}
                    }
                }
                _ if len < line.len() => {
                    line[len] = b;
                    len += 1;
                }
                _ => {}
            }
        }
    }
    sys::close(fd);
    found
}

/// `START-END` in hex.
fn range_of(t: &[u8]) -> Option<(usize, usize)> {
    let t = std::str::from_utf8(t).ok()?;
    let (s, e) = t.split_once('-')?;
    Some((
        usize::from_str_radix(s, 16).ok()?,
        usize::from_str_radix(e, 16).ok()?,
    ))
}

/// Whether `[p, p + len)` overlaps a planned region: the program's own
/// `mbind` there is skipped (counted), so that the plan stays in force.
pub fn keeps_its_policy(p: usize, len: usize) -> bool {
    if !active() {
        return false;
    }
    let end = p.saturating_add(len);
    let hit = planned().iter().any(|s| {
        let e = s[2].load(SeqCst);
        e != 0 && e != usize::MAX && {
            let (a, l) = (s[0].load(SeqCst), s[1].load(SeqCst));
            a < end && p < a + l
        }
    });
    if hit {
        OVERRIDDEN.fetch_add(1, SeqCst);
    }
    hit
}

/// A region at `p` is freed or unmapped: its pages by node are recorded
/// (for `--verify`) and it is forgotten.
pub fn released(p: usize, len: usize) {
    if !active() {
        return;
    }
    let end = p.saturating_add(len);
    for s in planned() {
        let e = s[2].load(SeqCst);
        if e == 0 || e == usize::MAX {
            continue;
        }
        let (a, l) = (s[0].load(SeqCst), s[1].load(SeqCst));
        if a >= p && a < end && s[2].compare_exchange(e, usize::MAX, SeqCst, SeqCst).is_ok() {
            pages(a, l);
            s[2].store(0, SeqCst);
        }
    }
}

/// The pages of a planned region by node, a `PlanPages` record per node;
/// where the kernel can say which pages are transparent huge pages
/// (`PAGEMAP_SCAN`), those are counted again by node in records with
/// `aux` 1, so that the check judges each kind in its own unit.
fn pages(start: usize, len: usize) {
    let ps = page_size();
    let huge = crate::huge::HugePages::open();
    let mut huge_by_node = [0u64; 64];
    let mut span: (usize, bool) = (usize::MAX, false);
    let h = sys::page_histogram(start, len, ps, |page, node| {
        let Some(hp) = huge.as_ref() else { return };
        let (s, _) = hp.span_around(page);
        if span.0 != s {
            span = (s, matches!(hp.span_of(page), crate::huge::Span::Huge(..)));
        }
        if span.1 && (0..64).contains(&node) {
            huge_by_node[node as usize] += 1;
        }
    });
    let nodes = h.counts.iter().enumerate().map(|(n, c)| (n as i32, *c, 0));
    let huge_nodes = huge_by_node
        .iter()
        .enumerate()
        .map(|(n, c)| (n as i32, *c, 1));
    for (node, n, aux) in nodes
        .chain([(-1, h.absent, 0), (-2, h.beyond, 0)])
        .chain(huge_nodes)
    {
        if n > 0 {
            emit(&Record {
                kind: Kind::PlanPages,
                tid: sys::gettid(),
                cpu: u32::MAX,
                node,
                flags: 0,
                addr: start as u64,
                size: n,
                time_ns: sys::monotonic_ns(),
                aux,
            });
        }
    }
}

/// At exit: every live planned region's pages, and the totals (`PlanEnd`:
/// `addr` the program's `mbind` calls skipped, `size` the plan's refused,
/// `node` the first refusal's errno, `flags` the ranges interleaved page by
/// page past the stripe budget, `cpu` the small allocations an entry
/// selected that its pool could not take, `aux` the times the program
/// closed or took the records' descriptor).
pub fn at_exit() {
    if !active() {
        return;
    }
    for s in planned() {
        let e = s[2].load(SeqCst);
        if e != 0 && e != usize::MAX && s[2].compare_exchange(e, usize::MAX, SeqCst, SeqCst).is_ok()
        {
            pages(s[0].load(SeqCst), s[1].load(SeqCst));
        }
    }
    // A descriptor lost since the last write is found (and opened again)
    // now, so that this record can say so.
    channel::checked();
    emit(
        &numalab_profile_abi::events::PlanEnd {
            tid: sys::gettid(),
            program_mbinds_skipped: OVERRIDDEN.load(SeqCst) as u64,
            refused: REFUSED.load(SeqCst) as u64,
            first_errno: FIRST_ERRNO.load(SeqCst).min(i32::MAX as usize) as i32,
            stripes_folded: FOLDED.load(SeqCst).min(u32::MAX as usize) as u32,
            small_spilled: Some(crate::pool::spilled().min(u32::MAX as usize - 1) as u32),
            channel_reopened: channel::reopened().min(u32::MAX as usize) as u32,
            time_ns: sys::monotonic_ns(),
        }
        .to_record(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_read_into_entries() {
        let bias = |p: &str| (p == "/bin/prog").then_some(0x1000);
        let e = parse(
            "policy 3 0,1,2,3\ncode 16 32 /bin/prog\npolicy chunks 0:8,1:8\nall\npolicy 2 0\nstatic 100 200 /bin/prog\npolicy 9 0\nheap\npolicy chunks 0:0\nheap\npolicy 2 5\n",
            bias,
            &mut Vec::new(),
        );
        assert_eq!(e.len(), 3, "{e:?}");
        let mut mask = [0u64; MASK_WORDS];
        mask[0] = 0b1111;
        assert_eq!(e[0].policy, Policy::Kernel { mode: 3, mask });
        assert_eq!(e[0].terms, vec![Term::Code(0x1010, 0x1020)]);
        assert_eq!(e[1].policy, Policy::Chunks(vec![(0, 8), (1, 8)]));
        assert!(e[1].all);
        assert_eq!(e[2].statics, vec![(0x1064, 0x10c8)]);
        // Mode 9, a zero-page run and an entry with no term select nothing.
        assert_eq!(parse_policy("9 0"), None);
        assert_eq!(parse_policy("chunks 0:0"), None);
        assert_eq!(parse_policy("2 2000"), None);
        assert_eq!(
            parse_policy("4 -"),
            Some(Policy::Kernel {
                mode: 4,
                mask: [0; MASK_WORDS]
            })
        );
    }

    #[test]
    fn map_lines_give_their_ranges() {
        assert_eq!(range_of(b"7f00-7f10"), Some((0x7f00, 0x7f10)));
        assert_eq!(range_of(b"zz-1"), None);
        let here = &ENTRIES as *const _ as usize;
        let (s, e) = mapping_of(here).expect("this library's data is mapped");
        assert!(s <= here && here < e);
        assert!(mapped_through(s, e));
        assert!(!mapped_through(0, page_size()), "page 0 is never mapped");
    }
}
