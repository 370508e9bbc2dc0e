//! The three tables the sampler, the fault handler and the interposed
//! calls share: pages armed now, allocations large enough to sample, and
//! buffers a system call is using. Fixed arrays of atomics: the fault
//! handler reads them, so nothing here allocates or takes a lock.
//!
//! Arming and the calls that must not see an armed page race; the rule
//! that makes it safe is a Dekker handshake. The sampler claims an entry
//! (ARMING), then checks the region and the busy buffers, then protects the
//! page. A call publishes its buffer (or removes its region), then looks
//! for entries in its range and waits for ARMING ones to settle. With
//! sequentially consistent atomics on both sides, one of them sees the
//! other: the sampler gives up, or the call finds the entry and disarms.

use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU64, AtomicU8, AtomicUsize, Ordering::SeqCst,
};

/// The node of an armed page that was not present: its fault is a first
/// touch.
pub const NODE_ABSENT: i32 = -100;

/// Pages armed at once, at most.
pub const ARMED_CAPACITY: usize = 512;
/// Allocations tracked at once, at most (the largest win when full).
pub const REGION_CAPACITY: usize = 4096;
/// Threads inside an interposed system call at once, at most; while a call
/// finds no slot, the sampler arms nothing. Every call with a buffer takes
/// a slot, tracked or not, so a server whose threads block in `read` or
/// `poll` holds one each: at 256, a thread-per-connection server with more
/// connections paused sampling for as long as they stayed blocked. Walks
/// stop at the slots ever claimed (`BUSY_USED`), so a program with few
/// threads pays for few.
/// (The profile's warning names the number: it lives in the contract.)
pub const BUSY_CAPACITY: usize = numalab_profile_abi::events::BUSY_TABLE_SLOTS;

const FREE: u8 = 0;
const ARMING: u8 = 1;
const ARMED: u8 = 2;
/// A fault handler or a call is restoring the page's protection.
const DISARMING: u8 = 3;

/// Or'ed into the protection given to [`begin_arming`]: the page is armed
/// against writes only (a write probe, for refinement); its fault is a
/// write, and no sample of the page's accesses.
pub const PROBE: i32 = 0x80;

/// One armed span: its address and length, state and the protection to
/// restore. A span is one page, or one whole transparent huge page (armed
/// whole, because protecting part of it would split it: see the sampler).
pub struct ArmedPage {
    page: AtomicUsize,
    len: AtomicUsize,
    state: AtomicU8,
    prot: AtomicU8,
    /// The page's node when it was armed (-1: unknown, [`NODE_ABSENT`]:
    /// not present): looked up by the sampler, so that the fault handler
    /// makes no system call for it.
    node: AtomicI32,
    /// When it was armed (CLOCK_MONOTONIC ns).
    since: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_PAGE: ArmedPage = ArmedPage {
    page: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    state: AtomicU8::new(FREE),
    prot: AtomicU8::new(0),
    node: AtomicI32::new(-1),
    since: AtomicU64::new(0),
};

static ARMED_PAGES: [ArmedPage; ARMED_CAPACITY] = [EMPTY_PAGE; ARMED_CAPACITY];
/// Entries not FREE: lets calls skip the scan when nothing is armed.
static ARMED_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Entries ever claimed (a high-water mark; an entry is claimed lowest
/// first): scans stop there. At the default rate a dozen pages are armed
/// at a time, and every interposed call that finds any armed scans the
/// table: a server's event loop makes tens of thousands a second.
static ARMED_USED: AtomicUsize = AtomicUsize::new(0);

/// The entries that may hold a span.
fn armed_entries() -> &'static [ArmedPage] {
    &ARMED_PAGES[..ARMED_USED.load(SeqCst).min(ARMED_CAPACITY)]
}

/// What the fault handler finds for a page.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Not armed by us: the fault is the program's.
    NotOurs,
    /// Armed by us, now ours to disarm: restore `prot` over
    /// `[start, start + len)`, then call [`release`] with the index.
    /// `node`: the page's node when armed.
    Claimed {
        index: usize,
        start: usize,
        len: usize,
        prot: i32,
        node: i32,
        probe: bool,
    },
    /// Being armed or disarmed by another thread: return and let the
    /// access retry.
    Settling,
}

/// The state of `page` for a fault on it.
pub fn lookup_fault(page: usize) -> Lookup {
    if ARMED_COUNT.load(SeqCst) == 0 {
        return Lookup::NotOurs;
    }
    for (index, e) in armed_entries().iter().enumerate() {
        let start = e.page.load(SeqCst);
        if !covers(start, e.len.load(SeqCst), page) {
            continue;
        }
        match e.state.compare_exchange(ARMED, DISARMING, SeqCst, SeqCst) {
            Ok(_) if e.page.load(SeqCst) != start => {
                // ABA: between the look at `page` and the claim, another
                // thread disarmed this span and the sampler armed another
                // in the same entry. Give that entry back; this page was
                // restored: run the access again.
                e.state.store(ARMED, SeqCst);
                return Lookup::Settling;
            }
            Ok(_) => {
                let raw = e.prot.load(SeqCst) as i32;
                return Lookup::Claimed {
                    index,
                    start,
                    len: e.len.load(SeqCst),
                    prot: raw & !PROBE,
                    node: e.node.load(SeqCst),
                    probe: raw & PROBE != 0,
                };
            }
            Err(ARMING) | Err(DISARMING) => return Lookup::Settling,
            Err(_) => {}
        }
    }
    Lookup::NotOurs
}

/// Whether the span `[start, start + len)` holds `page` (`start` 0: none).
fn covers(start: usize, len: usize, page: usize) -> bool {
    start != 0 && page >= start && page - start < len
}

/// Frees entry `index` after its page's protection was restored.
pub fn release(index: usize) {
    let e = &ARMED_PAGES[index];
    DISARMS.fetch_add(1, SeqCst);
    e.page.store(0, SeqCst);
    e.state.store(FREE, SeqCst);
    ARMED_COUNT.fetch_sub(1, SeqCst);
}

/// Counts every disarm: a thread that faulted on an armed page while
/// another thread restored it finds no entry when its handler runs; it
/// must run the access again rather than take the fault as the program's.
/// A fault that repeats with no disarm in between is the program's.
static DISARMS: AtomicU64 = AtomicU64::new(0);

/// Disarms so far.
pub fn disarms() -> u64 {
    DISARMS.load(SeqCst)
}

/// Claims a free entry for the span `[page, page + len)` on `node` (state
/// ARMING); `None` when the table is full or part of the span is armed
/// already.
pub fn begin_arming(page: usize, len: usize, prot: i32, node: i32) -> Option<usize> {
    if armed_entries().iter().any(|e| {
        let s = e.page.load(SeqCst);
        s != 0 && e.state.load(SeqCst) != FREE && overlaps(s, e.len.load(SeqCst), page, page + len)
    }) {
        return None;
    }
    for (i, e) in ARMED_PAGES.iter().enumerate() {
        if e.state
            .compare_exchange(FREE, ARMING, SeqCst, SeqCst)
            .is_ok()
        {
            // Before the span is named (and before the sampler checks the
            // busy buffers): a call that read the mark before this either
            // published its buffer first, and the sampler sees it, or
            // reads the raised mark.
            ARMED_USED.fetch_max(i + 1, SeqCst);
            ARMED_COUNT.fetch_add(1, SeqCst);
            e.prot.store(prot as u8, SeqCst);
            e.node.store(node, SeqCst);
            e.len.store(len, SeqCst);
            e.page.store(page, SeqCst);
            return Some(i);
        }
    }
    None
}

/// Corrects the node of entry `index` while it is still being armed.
pub fn set_node(index: usize, node: i32) {
    ARMED_PAGES[index].node.store(node, SeqCst);
}

/// The page of entry `index` is protected (at `now` ns): faults on it are
/// samples now.
pub fn finish_arming(index: usize, now: u64) {
    ARMED_PAGES[index].since.store(now, SeqCst);
    ARMED_PAGES[index].state.store(ARMED, SeqCst);
}

/// Disarms the spans armed before `before` ns that no access touched,
/// with `restore(start, len, prot)`: cold pages must not hold the table.
/// Returns how many.
pub fn expire(before: u64, restore: impl Fn(usize, usize, i32)) -> usize {
    let mut n = 0;
    for (i, e) in armed_entries().iter().enumerate() {
        if e.state.load(SeqCst) == ARMED
            && e.since.load(SeqCst) < before
            && e.state
                .compare_exchange(ARMED, DISARMING, SeqCst, SeqCst)
                .is_ok()
        {
            restore(
                e.page.load(SeqCst),
                e.len.load(SeqCst),
                e.prot.load(SeqCst) as i32 & !PROBE,
            );
            release(i);
            n += 1;
        }
    }
    n
}

/// Gives up entry `index` before its page was protected.
pub fn abandon_arming(index: usize) {
    release(index);
}

/// Disarms every armed span that overlaps `[start, end)` with
/// `restore(span_start, span_len, prot)`, waiting for spans being armed or
/// disarmed by others to settle. Call it after publishing the range (busy
/// buffer, removed region), so that the sampler cannot arm a page of it
/// afterwards.
pub fn disarm_range(start: usize, end: usize, restore: impl Fn(usize, usize, i32)) {
    if ARMED_COUNT.load(SeqCst) == 0 {
        return;
    }
    for (i, e) in armed_entries().iter().enumerate() {
        loop {
            let page = e.page.load(SeqCst);
            let len = e.len.load(SeqCst);
            if page == 0 || !overlaps(page, len, start, end) {
                break;
            }
            match e.state.compare_exchange(ARMED, DISARMING, SeqCst, SeqCst) {
                // ABA (see lookup_fault): the entry holds another span
                // now; give it back and look again.
                Ok(_) if e.page.load(SeqCst) != page => e.state.store(ARMED, SeqCst),
                Ok(_) => {
                    restore(page, len, e.prot.load(SeqCst) as i32 & !PROBE);
                    release(i);
                    break;
                }
                Err(FREE) => break,
                // Settles within the other side's few system calls.
                Err(_) => std::hint::spin_loop(),
            }
        }
    }
}

/// Whether the span `[s, s + len)` and the range `[start, end)` overlap.
fn overlaps(s: usize, len: usize, start: usize, end: usize) -> bool {
    s < end && start < s.saturating_add(len)
}

/// First-touched pages whose node the sampler looks up at its next tick.
const PENDING_CAPACITY: usize = 256;
#[allow(clippy::declare_interior_mutable_const)]
const NO_PAGE: AtomicUsize = AtomicUsize::new(0);
static PENDING: [AtomicUsize; PENDING_CAPACITY] = [NO_PAGE; PENDING_CAPACITY];

/// Notes a first-touched page for [`take_pending`]; false when the table
/// is full (its node stays unknown).
pub fn add_pending(page: usize) -> bool {
    PENDING
        .iter()
        .any(|p| p.compare_exchange(0, page, SeqCst, SeqCst).is_ok())
}

/// Hands every noted page to `f`, emptying the table.
pub fn take_pending(mut f: impl FnMut(usize)) {
    for p in PENDING.iter() {
        let page = p.swap(0, SeqCst);
        if page != 0 {
            f(page);
        }
    }
}

/// Pages armed now.
pub fn armed_count() -> usize {
    ARMED_COUNT.load(SeqCst)
}

/// One tracked allocation (`start == 0`: a free slot).
struct Region {
    start: AtomicUsize,
    len: AtomicUsize,
    /// Refinement may watch its lines (`--refine FILTER` selected it).
    refine: AtomicBool,
    /// Its protection (`PROT_*`), which an armed page of it gets back.
    prot: AtomicU8,
    /// Its pages may be armed ([`Arming::Pages`]).
    armable: AtomicBool,
}

/// How a tracked region is sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arming {
    /// Its pages are armed (protection faults) and its words counted.
    Pages,
    /// Its pages are never armed, only its words counted (watchpoints,
    /// which the kernel's own accesses do not trip). For memory libc
    /// allocates for itself and fills or empties with system calls of its
    /// own, which no hook sees: a directory's buffer (`opendir`), 32 KiB
    /// and up. An armed page of it made `getdents64` fail with EFAULT:
    /// directory listings came out short.
    WordsOnly,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_REGION: Region = Region {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    refine: AtomicBool::new(false),
    prot: AtomicU8::new(0),
    armable: AtomicBool::new(false),
};

static REGIONS: [Region; REGION_CAPACITY] = [EMPTY_REGION; REGION_CAPACITY];
/// Entries ever claimed (a high-water mark): walks of the table stop
/// there, so that a program with few regions pays for few (the word
/// counter draws from the table at every window of every thread).
static REGIONS_USED: AtomicUsize = AtomicUsize::new(0);

/// The entries that may hold a region.
fn regions() -> &'static [Region] {
    &REGIONS[..REGIONS_USED.load(SeqCst).min(REGION_CAPACITY)]
}

/// Tracks `[start, start + len)`, of protection `prot`, as a region
/// sampled as `arming` says (`refine`: whose lines refinement may watch);
/// `false` when the table is full.
pub fn add_region(start: usize, len: usize, refine: bool, prot: i32, arming: Arming) -> bool {
    if start == 0 || len == 0 {
        return false;
    }
    for (i, r) in REGIONS.iter().enumerate() {
        if r.start
            .compare_exchange(0, usize::MAX, SeqCst, SeqCst)
            .is_ok()
        {
            REGIONS_USED.fetch_max(i + 1, SeqCst);
            r.len.store(len, SeqCst);
            r.refine.store(refine, SeqCst);
            r.prot.store(prot as u8, SeqCst);
            r.armable.store(arming == Arming::Pages, SeqCst);
            r.start.store(start, SeqCst);
            return true;
        }
    }
    false
}

/// Stops tracking every region overlapping `[start, end)`: no page of
/// them is armed afterwards (with [`disarm_range`] over the same range).
/// Calls `each(start, len)` for every removed region and returns their
/// total length.
pub fn remove_regions(start: usize, end: usize, mut each: impl FnMut(usize, usize)) -> usize {
    let mut removed = 0;
    for r in regions().iter() {
        let s = r.start.load(SeqCst);
        if s == 0 || s == usize::MAX {
            continue;
        }
        let len = r.len.load(SeqCst);
        if s < end
            && start < s.saturating_add(len)
            && r.start.compare_exchange(s, 0, SeqCst, SeqCst).is_ok()
        {
            each(s, len);
            removed += len;
        }
    }
    removed
}

/// Calls `f(start, len)` for every tracked region.
pub fn for_each_region(mut f: impl FnMut(usize, usize)) {
    for r in regions().iter() {
        let s = r.start.load(SeqCst);
        if s != 0 && s != usize::MAX {
            f(s, r.len.load(SeqCst));
        }
    }
}

/// The protection of the tracked region holding `addr`, which an armed
/// page of it gets back; None when no region holds it or the region's
/// pages are never armed ([`Arming::WordsOnly`]).
pub fn armable_prot(addr: usize) -> Option<i32> {
    regions().iter().find_map(|r| {
        let s = r.start.load(SeqCst);
        (s != 0 && s != usize::MAX && addr >= s && addr - s < r.len.load(SeqCst))
            .then(|| r.armable.load(SeqCst).then(|| r.prot.load(SeqCst) as i32))
            .flatten()
    })
}

/// Whether `[page, page + len)` lies wholly inside a tracked region.
pub fn in_region(page: usize, len: usize) -> bool {
    regions().iter().any(|r| {
        let s = r.start.load(SeqCst);
        s != 0 && s != usize::MAX && page >= s && page + len <= s + r.len.load(SeqCst)
    })
}

/// The `k`-th tracked page, counting whole pages of every region in table
/// order, with the number of whole pages in all: how the sampler picks a
/// page uniformly over the tracked bytes.
pub fn nth_page(k: usize, page_size: usize) -> (Option<usize>, usize) {
    let mut seen = 0usize;
    let mut hit = None;
    for r in regions().iter() {
        let s = r.start.load(SeqCst);
        if s == 0 || s == usize::MAX {
            continue;
        }
        let first = s.div_ceil(page_size) * page_size;
        let end = (s + r.len.load(SeqCst)) / page_size * page_size;
        let pages = end.saturating_sub(first) / page_size;
        if hit.is_none() && k >= seen && k < seen + pages {
            hit = Some(first + (k - seen) * page_size);
        }
        seen += pages;
    }
    (hit, seen)
}

/// Whether `addr` is in a tracked region refinement may watch.
pub fn refinable(addr: usize) -> bool {
    regions().iter().any(|reg| {
        let s = reg.start.load(SeqCst);
        s != 0
            && s != usize::MAX
            && addr >= s
            && addr - s < reg.len.load(SeqCst)
            && reg.refine.load(SeqCst)
    })
}

/// The `r`-th region (modulo those with a whole page; `refinable_only`:
/// of those refinement may watch): its first whole page and how many
/// whole pages it has. How refinement makes sure small regions are armed
/// too.
pub fn nth_region(r: usize, page_size: usize, refinable_only: bool) -> Option<(usize, usize)> {
    let live = || {
        regions().iter().filter_map(|reg| {
            let s = reg.start.load(SeqCst);
            if s == 0 || s == usize::MAX || (refinable_only && !reg.refine.load(SeqCst)) {
                return None;
            }
            let first = s.div_ceil(page_size) * page_size;
            let end = (s + reg.len.load(SeqCst)) / page_size * page_size;
            let pages = end.saturating_sub(first) / page_size;
            (pages > 0).then_some((first, pages))
        })
    };
    let count = live().count();
    if count == 0 {
        return None;
    }
    live().nth(r % count)
}

/// A buffer a system call is using now.
struct Busy {
    start: AtomicUsize,
    end: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_BUSY: Busy = Busy {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
};

static BUSY: [Busy; BUSY_CAPACITY] = [EMPTY_BUSY; BUSY_CAPACITY];
/// Slots ever claimed (a high-water mark): [`is_busy`] looks at no other.
/// A call raises it before its buffer is published and before it looks
/// for armed pages in its range, so a sampler that read a lower mark
/// claimed its entry before that look, which then finds it.
static BUSY_USED: AtomicUsize = AtomicUsize::new(0);
/// Calls that found no slot: while non-zero, the sampler arms nothing.
static BUSY_OVERFLOW: AtomicUsize = AtomicUsize::new(0);
/// Calls that ever found no slot (the profile warns of them).
static BUSY_FULL: AtomicU64 = AtomicU64::new(0);

/// A published busy buffer; dropping it unpublishes it.
pub struct BusyGuard {
    slot: Option<usize>,
}

/// Publishes `[start, end)` as used by a system call: the sampler will not
/// arm its pages until the guard is dropped.
pub fn publish_busy(start: usize, end: usize) -> BusyGuard {
    for (i, b) in BUSY.iter().enumerate() {
        if b.start
            .compare_exchange(0, usize::MAX, SeqCst, SeqCst)
            .is_ok()
        {
            BUSY_USED.fetch_max(i + 1, SeqCst);
            b.end.store(end, SeqCst);
            b.start.store(start.max(1), SeqCst);
            return BusyGuard { slot: Some(i) };
        }
    }
    BUSY_OVERFLOW.fetch_add(1, SeqCst);
    BUSY_FULL.fetch_add(1, SeqCst);
    BusyGuard { slot: None }
}

/// How many calls found the busy table full, in all.
pub fn busy_table_full() -> u64 {
    BUSY_FULL.load(SeqCst)
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        match self.slot {
            Some(i) => {
                BUSY[i].end.store(0, SeqCst);
                BUSY[i].start.store(0, SeqCst);
            }
            None => {
                BUSY_OVERFLOW.fetch_sub(1, SeqCst);
            }
        }
    }
}

/// Whether `[page, page + page_size)` overlaps a busy buffer (a slot being
/// filled counts as busy everywhere).
pub fn is_busy(page: usize, page_size: usize) -> bool {
    if BUSY_OVERFLOW.load(SeqCst) != 0 {
        return true;
    }
    BUSY[..BUSY_USED.load(SeqCst).min(BUSY_CAPACITY)]
        .iter()
        .any(|b| {
            let s = b.start.load(SeqCst);
            s == usize::MAX || (s != 0 && s < page + page_size && page < b.end.load(SeqCst))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The tables are process-wide: one test walks through all of them, and
    // the busy table's own tests take turns with it (one fills the table).
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn arming_regions_and_busy_buffers_follow_the_handshake() {
        let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let p = 4096;
        assert!(add_region(10 * p + 100, 5 * p, true, 3, Arming::Pages));
        assert_eq!(
            (armable_prot(11 * p), armable_prot(16 * p)),
            (Some(3), None)
        );
        // Whole pages only: 11p..15p.
        assert_eq!(nth_page(0, p), (Some(11 * p), 4));
        assert_eq!(nth_page(3, p), (Some(14 * p), 4));
        assert_eq!(nth_page(4, p), (None, 4));
        assert!(in_region(12 * p, p) && !in_region(15 * p, p));
        // A second region refinement may not watch.
        assert!(add_region(40 * p, 2 * p, false, 1, Arming::Pages));
        assert_eq!(armable_prot(41 * p), Some(1));
        // A region counted by word only: tracked, never armed.
        assert!(add_region(50 * p, 2 * p, false, 3, Arming::WordsOnly));
        assert!(in_region(50 * p, p) && armable_prot(50 * p).is_none());
        assert_eq!(remove_regions(50 * p, 51 * p, |_, _| {}), 2 * p);
        assert!(refinable(10 * p + 100) && refinable(15 * p + 99));
        assert!(!refinable(15 * p + 100) && !refinable(40 * p));
        assert_eq!(nth_region(1, p, true), Some((11 * p, 4)));
        assert_eq!(nth_region(1, p, false), Some((40 * p, 2)));
        assert_eq!(remove_regions(40 * p, 41 * p, |_, _| {}), 2 * p);

        let i = begin_arming(12 * p, p, 3, 2).unwrap();
        assert_eq!(begin_arming(12 * p, p, 3, 2), None, "armed twice");
        assert_eq!(lookup_fault(12 * p), Lookup::Settling);
        finish_arming(i, 10);
        assert_eq!(armed_count(), 1);
        assert_eq!(lookup_fault(13 * p), Lookup::NotOurs);
        assert_eq!(
            lookup_fault(12 * p),
            Lookup::Claimed {
                index: i,
                start: 12 * p,
                len: p,
                prot: 3,
                node: 2,
                probe: false
            }
        );
        // Claimed: a second faulting thread waits for the restore.
        assert_eq!(lookup_fault(12 * p), Lookup::Settling);
        release(i);
        assert_eq!(armed_count(), 0);

        // A busy buffer and a disarmed range: any overlap disarms a page.
        let j = begin_arming(13 * p, p, 3, 0).unwrap();
        finish_arming(j, 20);
        // The freed entry is claimed again: scans stop after one entry.
        assert_eq!((i, j, ARMED_USED.load(SeqCst)), (0, 0, 1));
        let guard = publish_busy(13 * p + 10, 13 * p + 20);
        assert!(is_busy(13 * p, p) && !is_busy(14 * p, p));
        let restored = std::cell::RefCell::new(Vec::new());
        disarm_range(14 * p, 15 * p, |page, len, prot| {
            restored.borrow_mut().push((page, len, prot))
        });
        assert!(restored.borrow().is_empty());
        disarm_range(13 * p + 10, 13 * p + 20, |page, len, prot| {
            restored.borrow_mut().push((page, len, prot))
        });
        assert_eq!(*restored.borrow(), vec![(13 * p, p, 3)]);
        drop(guard);
        assert!(!is_busy(13 * p, p));

        // Cold pages expire; young ones stay.
        let k = begin_arming(14 * p, p, 1, -1).unwrap();
        finish_arming(k, 100);
        assert_eq!(expire(100, |_, _, _| {}), 0);
        let expired = std::cell::RefCell::new(Vec::new());
        assert_eq!(
            expire(101, |page, len, prot| expired
                .borrow_mut()
                .push((page, len, prot))),
            1
        );
        assert_eq!(*expired.borrow(), vec![(14 * p, p, 1)]);

        // A huge page armed whole: a fault on any of its pages claims the
        // span, no page of it can be armed on its own, and a buffer in its
        // middle disarms all of it.
        let huge = 512 * p;
        let h = begin_arming(1024 * p, huge, 3, 1).unwrap();
        finish_arming(h, 30);
        assert_eq!(begin_arming(1100 * p, p, 3, 1), None);
        assert_eq!(begin_arming(1535 * p, 2 * p, 3, 1), None);
        assert_eq!(lookup_fault(1536 * p), Lookup::NotOurs);
        assert!(matches!(
            lookup_fault(1300 * p),
            Lookup::Claimed { start, len, node: 1, .. } if start == 1024 * p && len == huge
        ));
        release(h);
        let h = begin_arming(1024 * p, huge, 3, 1).unwrap();
        finish_arming(h, 30);
        let restored = std::cell::RefCell::new(Vec::new());
        disarm_range(1200 * p, 1201 * p, |page, len, prot| {
            restored.borrow_mut().push((page, len, prot))
        });
        assert_eq!(*restored.borrow(), vec![(1024 * p, huge, 3)]);

        assert_eq!(remove_regions(0, 11 * p, |_, _| {}), 5 * p);
        assert_eq!(nth_page(0, p), (None, 0));
        assert_eq!(armed_count(), 0);
    }

    #[test]
    fn a_thousand_calls_blocked_at_once_each_keep_only_their_own_pages_from_arming() {
        // A thread-per-connection server: 1000 threads in `read` at once,
        // each with its own buffer. With 256 slots the 257th call found
        // none, and no page anywhere could be armed until it returned.
        let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let p = 4096;
        let base = 1usize << 40;
        let buffer = |i: usize| base + 2 * i * p;
        let guards: Vec<BusyGuard> = (0..1000)
            .map(|i| publish_busy(buffer(i), buffer(i) + 100))
            .collect();
        assert_eq!(BUSY_OVERFLOW.load(SeqCst), 0);
        assert!(is_busy(buffer(0), p) && is_busy(buffer(999), p));
        assert!(!is_busy(buffer(999) + p, p), "the page between two buffers");
        drop(guards);
        assert!(!is_busy(buffer(999), p));
    }

    #[test]
    fn a_call_past_the_busy_table_stops_the_arming_while_it_lasts_and_is_counted() {
        let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let p = 4096;
        let base = 1usize << 41;
        let buffer = |i: usize| base + 2 * i * p;
        let before = busy_table_full();
        let mut guards: Vec<BusyGuard> = (0..BUSY_CAPACITY)
            .map(|i| publish_busy(buffer(i), buffer(i) + 100))
            .collect();
        assert_eq!((BUSY_OVERFLOW.load(SeqCst), busy_table_full()), (0, before));
        assert!(!is_busy(buffer(0) + p, p), "the page between two buffers");
        // One call more than the table holds: every page counts as busy
        // until it returns, and the profile will say it happened.
        guards.push(publish_busy(
            buffer(BUSY_CAPACITY),
            buffer(BUSY_CAPACITY) + 100,
        ));
        assert_eq!(
            (BUSY_OVERFLOW.load(SeqCst), busy_table_full()),
            (1, before + 1)
        );
        assert!(is_busy(buffer(0) + p, p));
        assert!(is_busy(1 << 30, p));
        guards.pop();
        assert_eq!(BUSY_OVERFLOW.load(SeqCst), 0);
        assert!(!is_busy(buffer(0) + p, p));
        drop(guards);
        assert!(!is_busy(buffer(0), p));
        assert_eq!(busy_table_full(), before + 1);
    }
}
