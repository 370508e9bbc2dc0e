//! A region's pages in address order: which node each page was on, and
//! which CPU node accessed it most (profile.html draws it).
//!
//! The library writes where every page of an allocation is when it is
//! freed or at exit (PageRun records, in address order); before that, it
//! records per-page facts only where a page was touched: a sample carries
//! its page's node and the CPU that faulted, a Touched record where a
//! first-touched page went. Its page snapshots (PageNodes) count pages by
//! node without positions, so they place the pages only when they count
//! every page on one node. A page's node is the latest of these that
//! tells it, else unknown (records of an older library have no runs).
//!
//! A site may have many allocations; its map is of its most sampled one,
//! so that the pages drawn side by side are neighbours in memory.

use super::record::{Kind, Record, FLAG_WRITE_PROBE};
use crate::machine::Machine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Cells a map has at most: more pages share cells, so that the JSON of
/// one map stays within a few hundred kB whatever the region's size.
pub const MAX_CELLS: u64 = 2048;
/// Runs kept per allocation (the library writes at most 16384).
const MAX_RUNS: usize = 1 << 16;

/// The pages of one allocation of a region, run-length encoded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PageMap {
    /// The allocation's address, its pages (partial ones at either end
    /// counted), and its samples.
    pub address: u64,
    pub pages: u64,
    pub samples: u64,
    /// Pages one cell stands for: 1 up to [`MAX_CELLS`] pages, else the
    /// fewest that make at most that many cells (the last may hold fewer).
    pub pages_per_cell: u64,
    /// Consecutive cells with the same node and accessing node, in address
    /// order; their `cells` add up to the map's cells.
    pub runs: Vec<PageMapRun>,
}

/// Cells alike, in a [`PageMap`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PageMapRun {
    pub cells: u64,
    /// The memory node of its pages (of most of a cell's pages whose node
    /// is known); -1 not present; `None` unknown.
    pub node: Option<i32>,
    /// The CPU node whose threads' samples of these pages were most
    /// (ties: the lowest node); absent when none was sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u32>,
    /// Sampled accesses of these pages.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub samples: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl PageMap {
    /// Cells in all (runs added up).
    pub fn cells(&self) -> u64 {
        self.runs.iter().map(|r| r.cells).sum()
    }
}

/// What the records told of one page.
#[derive(Default)]
struct PageFacts {
    /// Its node at the latest record that named one, and that record's
    /// index (later knowledge wins over earlier).
    node: Option<(i32, usize)>,
    /// Sampled accesses by CPU node.
    from: BTreeMap<u32, u64>,
}

/// One allocation while the records are replayed.
struct Allocation {
    site: usize,
    start: u64,
    len: u64,
    samples: u64,
    /// Pages (from the allocation's first page) with facts.
    pages: BTreeMap<u64, PageFacts>,
    /// The latest page count by node: the snapshot number (`u32::MAX`: at
    /// free or exit), the index of its first record, and the counts.
    counts: Option<(u32, usize, BTreeMap<i32, u64>)>,
    /// Where its pages were at free or exit: runs of (first page from the
    /// allocation's first page, pages, node, index of the record) in
    /// address order, without overlaps (a later run over the same pages
    /// replaces them: a thread's stack is located as the thread ends and
    /// again at exit, and a mapping can be both a stack and an
    /// allocation).
    runs: Vec<PageRun>,
}

/// (first page, pages, node, index of the record it came from).
type PageRun = (u64, u64, i32, usize);

/// Puts `new` into `runs` (address order, no overlaps), cutting away what
/// it covers of the runs already there.
fn put_run(runs: &mut Vec<PageRun>, new: PageRun) {
    let (first, n, _, _) = new;
    if n == 0 {
        return;
    }
    let end = first.saturating_add(n);
    // The common case: runs of one snapshot arrive in address order.
    if runs.last().is_none_or(|r| r.0 + r.1 <= first) {
        runs.push(new);
        return;
    }
    let mut kept: Vec<PageRun> = Vec::with_capacity(runs.len() + 2);
    for &r in runs.iter() {
        let (rf, rn, node, at) = r;
        let re = rf + rn;
        if re <= first || rf >= end {
            kept.push(r);
            continue;
        }
        if rf < first {
            kept.push((rf, first - rf, node, at));
        }
        if re > end {
            kept.push((end, re - end, node, at));
        }
    }
    let i = kept.partition_point(|r| r.0 < first);
    kept.insert(i, new);
    *runs = kept;
}

impl Allocation {
    fn first_page(&self, ps: u64) -> u64 {
        self.start / ps
    }

    fn page_count(&self, ps: u64) -> u64 {
        self.start.saturating_add(self.len.max(1) - 1) / ps - self.first_page(ps) + 1
    }

    /// The node of every page, and since which record, when the latest
    /// count has them all on one node (or all absent).
    fn uniform(&self) -> Option<(i32, usize)> {
        let (_, at, counts) = self.counts.as_ref()?;
        let mut present = counts.iter().filter(|(_, k)| **k > 0);
        match (present.next(), present.next()) {
            (Some((&n, _)), None) if n >= -1 => Some((n, *at)),
            _ => None,
        }
    }
}

/// The page map of each site's most sampled allocation (`None` for a site
/// none of whose allocations was sampled). `alloc_sites` holds the site of
/// each Alloc record of `records`, in order; `sites` is their number.
pub fn page_maps(
    m: &Machine,
    records: &[Record],
    alloc_sites: &[usize],
    sites: usize,
    page_size: u64,
) -> Vec<Option<PageMap>> {
    let ps = page_size.max(1);
    let mut allocs: Vec<Allocation> = Vec::with_capacity(alloc_sites.len());
    // Live allocations by start: their index in `allocs`.
    let mut live: BTreeMap<u64, usize> = BTreeMap::new();
    let owner = |live: &BTreeMap<u64, usize>, allocs: &[Allocation], addr: u64| {
        live.range(..=addr)
            .next_back()
            .map(|(_, &i)| i)
            .filter(|&i| addr < allocs[i].start.saturating_add(allocs[i].len))
    };
    for (at, r) in records.iter().enumerate() {
        match r.kind {
            Kind::Alloc => {
                let Some(&site) = alloc_sites.get(allocs.len()) else {
                    continue;
                };
                live.insert(r.addr, allocs.len());
                allocs.push(Allocation {
                    site,
                    start: r.addr,
                    len: r.size,
                    samples: 0,
                    pages: BTreeMap::new(),
                    counts: None,
                    runs: Vec::new(),
                });
            }
            Kind::Free => {
                let end = r.addr.saturating_add(r.size);
                let gone: Vec<u64> = live
                    .range(..end)
                    .filter(|(_, &i)| allocs[i].start.saturating_add(allocs[i].len) > r.addr)
                    .map(|(k, _)| *k)
                    .collect();
                for k in gone {
                    live.remove(&k);
                }
            }
            Kind::Sample => {
                let Some(i) = owner(&live, &allocs, r.addr) else {
                    continue;
                };
                let a = &mut allocs[i];
                let page = a.pages.entry(r.addr / ps - a.first_page(ps)).or_default();
                if r.node >= 0 {
                    page.node = Some((r.node, at));
                }
                // A write probe saw the page's node, but is no access
                // sample.
                if r.flags & FLAG_WRITE_PROBE == 0 {
                    a.samples += 1;
                    if let Some(c) = m.node_of_cpu(r.cpu) {
                        *page.from.entry(c).or_default() += 1;
                    }
                }
            }
            Kind::PageRun => {
                if let Some(i) = owner(&live, &allocs, r.addr) {
                    let a = &mut allocs[i];
                    // -3: past the library's cap, unknown.
                    if r.node >= -1 && a.runs.len() < MAX_RUNS {
                        let first = r.addr / ps - a.first_page(ps);
                        put_run(&mut a.runs, (first, r.size, r.node, at));
                    }
                }
            }
            Kind::Touched if r.node >= 0 => {
                if let Some(i) = owner(&live, &allocs, r.addr) {
                    let a = &mut allocs[i];
                    let page = a.pages.entry(r.addr / ps - a.first_page(ps)).or_default();
                    page.node = Some((r.node, at));
                }
            }
            Kind::PageNodes => {
                let Some(&i) = live.get(&r.addr) else {
                    continue;
                };
                let counts = &mut allocs[i].counts;
                // A count once final (at free or exit) stays; a new
                // snapshot replaces the one before.
                let fresh = counts
                    .as_ref()
                    .is_none_or(|(id, _, _)| *id != r.cpu && *id != u32::MAX);
                if fresh {
                    *counts = Some((r.cpu, at, BTreeMap::new()));
                }
                if let Some((id, _, c)) = counts {
                    if *id == r.cpu {
                        *c.entry(r.node).or_default() += r.size;
                    }
                }
            }
            _ => {}
        }
    }
    let mut best: Vec<Option<usize>> = vec![None; sites];
    for (i, a) in allocs.iter().enumerate() {
        let Some(b) = best.get_mut(a.site) else {
            continue;
        };
        if a.samples > 0 && b.is_none_or(|j| a.samples > allocs[j].samples) {
            *b = Some(i);
        }
    }
    best.into_iter()
        .map(|b| b.map(|i| map_of(&allocs[i], ps)))
        .collect()
}

/// The map of one allocation: its pages grouped into at most
/// [`MAX_CELLS`] cells, then alike cells run-length encoded.
fn map_of(a: &Allocation, ps: u64) -> PageMap {
    let pages = a.page_count(ps);
    let per_cell = pages.div_ceil(MAX_CELLS).max(1);
    let uniform = a.uniform();
    let mut runs: Vec<PageMapRun> = Vec::new();
    let mut first = 0;
    while first < pages {
        let end = (first + per_cell).min(pages);
        let cell = cell_of(a, first, end, uniform);
        match runs.last_mut() {
            Some(r) if r.node == cell.node && r.from == cell.from => {
                r.cells += 1;
                r.samples += cell.samples;
            }
            _ => runs.push(cell),
        }
        first = end;
    }
    PageMap {
        address: a.start,
        pages,
        samples: a.samples,
        pages_per_cell: per_cell,
        runs,
    }
}

/// The cell of pages `first..end`: the node most of its known pages are
/// on (ties: the lowest), the CPU node that sampled it most.
fn cell_of(a: &Allocation, first: u64, end: u64, uniform: Option<(i32, usize)>) -> PageMapRun {
    let mut nodes: BTreeMap<i32, u64> = BTreeMap::new();
    let mut from: BTreeMap<u32, u64> = BTreeMap::new();
    // The base: the runs at free or exit where there are any, else a count
    // with every page on one node; each with the record it dates from.
    let base = |page: u64| -> Option<(i32, usize)> {
        if a.runs.is_empty() {
            return uniform;
        }
        let i = a.runs.partition_point(|r| r.0 + r.1 <= page);
        a.runs.get(i).filter(|r| r.0 <= page).map(|r| (r.2, r.3))
    };
    if a.runs.is_empty() {
        if let Some((u, _)) = uniform {
            nodes.insert(u, end - first);
        }
    } else {
        let i = a.runs.partition_point(|r| r.0 + r.1 <= first);
        for &(rf, rn, node, _) in a.runs[i..].iter().take_while(|r| r.0 < end) {
            let k = (rf + rn).min(end) - rf.max(first);
            *nodes.entry(node).or_default() += k;
        }
    }
    for (&page, p) in a.pages.range(first..end) {
        // A page's own record later than the base is the later word on it.
        if let Some((n, at)) = p.node {
            match base(page) {
                Some((_, since)) if at <= since => {}
                Some((b, _)) => {
                    if let Some(k) = nodes.get_mut(&b) {
                        *k = k.saturating_sub(1);
                    }
                    *nodes.entry(n).or_default() += 1;
                }
                None => *nodes.entry(n).or_default() += 1,
            }
        }
        for (&c, &k) in &p.from {
            *from.entry(c).or_default() += k;
        }
    }
    let most = |m: &BTreeMap<i32, u64>| {
        m.iter()
            .filter(|(_, k)| **k > 0)
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(n, _)| *n)
    };
    PageMapRun {
        cells: 1,
        node: most(&nodes),
        from: from
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(c, _)| *c),
        samples: from.values().sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;

    fn rec(kind: Kind, cpu: u32, node: i32, addr: u64, size: u64) -> Record {
        Record {
            kind,
            tid: 1,
            cpu,
            node,
            flags: 0,
            addr,
            size,
            time_ns: 0,
            aux: 0,
        }
    }

    fn run(cells: u64, node: Option<i32>, from: Option<u32>, samples: u64) -> PageMapRun {
        PageMapRun {
            cells,
            node,
            from,
            samples,
        }
    }

    /// Four nodes of two CPUs each: CPU 0 on node 0, CPU 2 on node 1.
    fn machine() -> Machine {
        fixture("qemu-quartet-4n2c-ring.xml")
    }

    #[test]
    fn sampled_and_touched_pages_are_placed_the_rest_unknown_in_runs() {
        let m = machine();
        let a = 0x10_0000u64;
        let records = vec![
            // 16 pages, page-aligned.
            rec(Kind::Alloc, u32::MAX, -1, a, 16 * 4096),
            // Page 2 read twice from node 0 and once from node 1, on node 1.
            rec(Kind::Sample, 0, 1, a + 2 * 4096 + 8, 0),
            rec(Kind::Sample, 0, 1, a + 2 * 4096 + 16, 0),
            rec(Kind::Sample, 2, 1, a + 2 * 4096, 0),
            // Page 3 read from node 1, on node 1: same node, other reader.
            rec(Kind::Sample, 2, 1, a + 3 * 4096, 0),
            // Pages 8 and 9 first touched onto node 0, never sampled.
            rec(Kind::Touched, 0, 0, a + 8 * 4096, 0),
            rec(Kind::Touched, 0, 0, a + 9 * 4096, 0),
            // Counts on two nodes: they place no page.
            rec(Kind::PageNodes, u32::MAX, 0, a, 2),
            rec(Kind::PageNodes, u32::MAX, 1, a, 14),
        ];
        let maps = page_maps(&m, &records, &[0], 1, 4096);
        let p = maps[0].as_ref().unwrap();
        assert_eq!(
            (p.address, p.pages, p.samples, p.pages_per_cell),
            (a, 16, 4, 1)
        );
        assert_eq!(
            p.runs,
            [
                run(2, None, None, 0),
                run(1, Some(1), Some(0), 3),
                run(1, Some(1), Some(1), 1),
                run(4, None, None, 0),
                run(2, Some(0), None, 0),
                run(6, None, None, 0),
            ]
        );
        assert_eq!(p.cells(), 16);
    }

    #[test]
    fn runs_at_free_place_every_page_and_outrank_earlier_facts() {
        let m = machine();
        let a = 0x20_0000u64;
        let records = vec![
            rec(Kind::Alloc, u32::MAX, -1, a, 12 * 4096),
            // Page 2 sampled on node 1 from node 0; page 9 first touched
            // onto node 3.
            rec(Kind::Sample, 0, 1, a + 2 * 4096, 0),
            rec(Kind::Touched, 0, 3, a + 9 * 4096, 0),
            // At free: pages 0-3 on node 0 (page 2 migrated since its
            // sample), 4-5 not present, 6-11 on node 1; past the library's
            // cap (-3) nothing is said.
            rec(Kind::PageRun, u32::MAX, 0, a, 4),
            rec(Kind::PageRun, u32::MAX, -1, a + 4 * 4096, 2),
            rec(Kind::PageRun, u32::MAX, 1, a + 6 * 4096, 5),
            rec(Kind::PageRun, u32::MAX, -3, a + 11 * 4096, 1),
            rec(Kind::PageNodes, u32::MAX, 0, a, 4),
            rec(Kind::PageNodes, u32::MAX, 1, a, 5),
            rec(Kind::Free, u32::MAX, -1, a, 12 * 4096),
        ];
        let maps = page_maps(&m, &records, &[0], 1, 4096);
        let p = maps[0].as_ref().unwrap();
        assert_eq!(
            p.runs,
            [
                run(2, Some(0), None, 0),
                run(1, Some(0), Some(0), 1),
                run(1, Some(0), None, 0),
                run(2, Some(-1), None, 0),
                run(5, Some(1), None, 0),
                run(1, None, None, 0),
            ]
        );
        // Grouped: a cell takes the node most of its pages are on.
        let mut big = vec![rec(Kind::Alloc, u32::MAX, -1, a, 4096 * 4096)];
        big.push(rec(Kind::Sample, 0, 1, a, 0));
        big.push(rec(Kind::PageRun, u32::MAX, 1, a, 3));
        big.push(rec(Kind::PageRun, u32::MAX, 0, a + 3 * 4096, 4093));
        let maps = page_maps(&m, &big, &[0], 1, 4096);
        let p = maps[0].as_ref().unwrap();
        assert_eq!(p.pages_per_cell, 2);
        assert_eq!(
            p.runs,
            [run(1, Some(1), Some(0), 1), run(2047, Some(0), None, 0)]
        );
    }

    #[test]
    fn a_later_set_of_runs_over_the_same_pages_replaces_the_earlier() {
        // A mapping that is both an allocation and a thread's stack: its
        // runs come as the thread ends, then again at exit (numpy's
        // OpenBLAS threads made the engine subtract past zero here).
        let m = machine();
        let a = 0x30_0000u64;
        let records = vec![
            rec(Kind::Alloc, u32::MAX, -1, a, 8 * 4096),
            rec(Kind::Sample, 0, 0, a + 5 * 4096, 0),
            // As the thread ends: pages 0-7 on node 0.
            rec(Kind::PageRun, u32::MAX, 0, a, 8),
            // Later, pages 2-5 on node 2 (migrated), then at exit pages
            // 4-7 on node 1.
            rec(Kind::PageRun, u32::MAX, 2, a + 2 * 4096, 4),
            rec(Kind::PageRun, u32::MAX, 1, a + 4 * 4096, 4),
        ];
        let maps = page_maps(&m, &records, &[0], 1, 4096);
        let p = maps[0].as_ref().unwrap();
        assert_eq!(
            p.runs,
            [
                run(2, Some(0), None, 0),
                run(2, Some(2), None, 0),
                run(1, Some(1), None, 0),
                run(1, Some(1), Some(0), 1),
                run(2, Some(1), None, 0),
            ]
        );
        let mut runs = Vec::new();
        for r in [(0, 8, 0, 1), (2, 4, 2, 2), (4, 4, 1, 3), (0, 1, 3, 4)] {
            put_run(&mut runs, r);
        }
        assert_eq!(
            runs,
            [(0, 1, 3, 4), (1, 1, 0, 1), (2, 2, 2, 2), (4, 4, 1, 3)]
        );
    }

    #[test]
    fn many_pages_share_cells_and_a_one_node_count_places_every_page() {
        let m = machine();
        // 5000 pages starting mid-page: 5001 pages touched by the range.
        let a = 0x4000_0010u64;
        let mut records = vec![
            rec(Kind::Alloc, u32::MAX, -1, a, 5000 * 4096),
            // A snapshot with pages on two nodes, then the final count:
            // every page on node 2.
            rec(Kind::PageNodes, 0, 0, a, 10),
            rec(Kind::PageNodes, 0, 2, a, 4991),
            rec(Kind::Sample, 0, 2, a, 0),
        ];
        records.extend([
            rec(Kind::PageNodes, u32::MAX, 2, a, 5001),
            // Freed: later samples at the address belong to no allocation.
            rec(Kind::Free, u32::MAX, -1, a, 5000 * 4096),
            rec(Kind::Sample, 2, 2, a + 4096 * 4000, 0),
        ]);
        let p = page_maps(&m, &records, &[0], 1, 4096)[0].clone().unwrap();
        assert_eq!((p.pages, p.pages_per_cell, p.samples), (5001, 3, 1));
        // 5001 pages in cells of 3: 1667 cells, the first sampled from
        // node 0.
        assert_eq!(p.cells(), 1667);
        assert_eq!(
            p.runs,
            [run(1, Some(2), Some(0), 1), run(1666, Some(2), None, 0)]
        );
        // A site without samples gets no map; an unknown site index is
        // skipped.
        let none = page_maps(&m, &records[..3], &[0], 1, 4096);
        assert_eq!(none, [None]);
        assert_eq!(page_maps(&m, &records, &[7], 1, 4096), [None]);
    }

    #[test]
    fn the_most_sampled_allocation_of_a_site_is_mapped() {
        let m = machine();
        let (a, b) = (0x10_0000u64, 0x20_0000u64);
        let records = vec![
            rec(Kind::Alloc, u32::MAX, -1, a, 4 * 4096),
            rec(Kind::Alloc, u32::MAX, -1, b, 2 * 4096),
            rec(Kind::Sample, 0, 0, a, 0),
            rec(Kind::Sample, 2, 3, b, 0),
            rec(Kind::Sample, 2, 3, b + 4096, 0),
        ];
        let p = page_maps(&m, &records, &[0, 0], 1, 4096)[0]
            .clone()
            .unwrap();
        assert_eq!((p.address, p.pages, p.samples), (b, 2, 2));
        assert_eq!(p.runs, [run(2, Some(3), Some(1), 2)]);
    }
}
