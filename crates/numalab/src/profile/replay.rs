//! The replay of a run's records, in the order the library wrote them:
//! one method per record kind, each adding to the accumulators the
//! profile is made of ([`Replay::finish`]). `profile::build` drives it.

use super::estimate;
use super::record::{
    self, Kind, Record, ALLOC_FILE, ALLOC_MMAP, FLAG_ACCESS_UNKNOWN, FLAG_HUGE, FLAG_WRITE,
    FLAG_WRITE_PROBE,
};
use super::{
    diagnose, located_regions, merge_small_sites, owner_of, page_map, present, refine,
    sampling_cost, symbols, whole_pages, Live, Located, PageSnapshot, Profile, RegionProfile,
    Selection, SiteAcc, Symbolizer, ThreadAcc, ThreadProfile, MAPPED_REGIONS, SCHEMA_VERSION,
};
use crate::machine::Machine;
use numalab_profile_abi::events::{
    Cost, Frame, SmallAlloc, Start, SwitchWindows, Totals, WordSurcharge, WordTotals,
};
use std::collections::{BTreeMap, BTreeSet};

/// What the records said so far.
pub(super) struct Replay<'a> {
    m: &'a Machine,
    /// Each allocation's call stack, (depth, pc) by its key: frames follow
    /// their allocation record, so they are grouped first.
    frames: BTreeMap<u64, Vec<(u64, u64)>>,
    /// Where each first-touched page went, from the Touched records.
    touched: BTreeMap<u64, i32>,
    sites: Vec<SiteAcc>,
    site_of_stack: BTreeMap<(String, Vec<u64>), usize>,
    live: BTreeMap<u64, Live>,
    threads: BTreeMap<u32, ThreadAcc>,
    t0: Option<u64>,
    sampled_for: Option<f64>,
    rate: u64,
    min_bytes: u64,
    page_size: u64,
    armed: u64,
    samples: u64,
    unattributed: u64,
    remote_total: u64,
    located_total: u64,
    used_frames: BTreeSet<u64>,
    allowed: BTreeMap<u32, u64>,
    ordinals: BTreeMap<u32, u32>,
    /// Threads whose Stack record said their samples are kept.
    other_threads: u64,
    costs: Vec<Cost>,
    located: Vec<Located>,
    pid: u32,
    first_by_thread: BTreeMap<u32, u64>,
    overflowed: u64,
    /// Watch records, with the site index and offset of the allocation.
    watch_hits: Vec<(Record, Option<(usize, u64)>)>,
    refine_book: Vec<Record>,
    half_by_region: bool,
    go_runtime: bool,
    started: bool,
    ended: bool,
    channel_reopened: u64,
    /// System calls that found the library's busy table full.
    busy_table_full: u64,
    /// Processes forked without a sampler, and those that started the
    /// library again by exec.
    forked: BTreeSet<u32>,
    started_pids: BTreeSet<u32>,
    /// Thread names, the last recorded of each.
    thread_names: BTreeMap<u32, String>,
    write_probes: u64,
    huge_page_samples: u64,
    /// The site of each Alloc record, in order, for the page maps.
    alloc_sites: Vec<usize>,
    /// Every draw of the word counter, the design its estimates need
    /// (estimate.rs), and its totals.
    all_cells: Vec<estimate::Cell>,
    designs: BTreeMap<Option<usize>, estimate::Design>,
    last_window: BTreeMap<u32, u64>,
    live_sites: BTreeSet<usize>,
    word_totals: Option<WordTotals>,
    word_switches: Option<WordSurcharge>,
    word_faults: Option<WordSurcharge>,
    /// The switch price's two sides (skipped, watched).
    switch_windows: [Option<SwitchWindows>; 2],
    /// Whether each site keeps its allocations and samples, for
    /// `--granularity`.
    keep_samples: bool,
}

impl<'a> Replay<'a> {
    /// A replay of `records` on `m`, nothing replayed yet (the frames and
    /// the first touches' pages, which later records refer back to, are
    /// gathered).
    pub(super) fn new(m: &'a Machine, records: &[Record], keep_samples: bool) -> Replay<'a> {
        let mut frames: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for f in records.iter().filter_map(Frame::from_record) {
            frames.entry(f.key).or_default().push((f.depth, f.pc));
        }
        let touched = records
            .iter()
            .filter(|r| r.kind == Kind::Touched)
            .map(|r| (r.addr, r.node))
            .collect();
        Replay {
            m,
            frames,
            touched,
            sites: Vec::new(),
            site_of_stack: BTreeMap::new(),
            live: BTreeMap::new(),
            threads: BTreeMap::new(),
            t0: None,
            sampled_for: None,
            rate: 0,
            min_bytes: 0,
            page_size: 4096,
            armed: 0,
            samples: 0,
            unattributed: 0,
            remote_total: 0,
            located_total: 0,
            used_frames: BTreeSet::new(),
            allowed: BTreeMap::new(),
            ordinals: BTreeMap::new(),
            other_threads: 0,
            costs: Vec::new(),
            located: Vec::new(),
            pid: 0,
            first_by_thread: BTreeMap::new(),
            overflowed: 0,
            watch_hits: Vec::new(),
            refine_book: Vec::new(),
            half_by_region: false,
            go_runtime: false,
            started: false,
            ended: false,
            channel_reopened: 0,
            busy_table_full: 0,
            forked: BTreeSet::new(),
            started_pids: BTreeSet::new(),
            thread_names: BTreeMap::new(),
            write_probes: 0,
            huge_page_samples: 0,
            alloc_sites: Vec::new(),
            all_cells: Vec::new(),
            designs: BTreeMap::new(),
            last_window: BTreeMap::new(),
            live_sites: BTreeSet::new(),
            word_totals: None,
            word_switches: None,
            word_faults: None,
            switch_windows: [None; 2],
            keep_samples,
        }
    }

    /// Adds one record.
    pub(super) fn record(&mut self, r: &Record) {
        match r.kind {
            Kind::WordCount => self.word_count(r),
            Kind::WordTotals => self.word_totals = WordTotals::from_record(r),
            Kind::WordSwitches => self.word_switches = WordSurcharge::from_record(r),
            Kind::WordFaults => self.word_faults = WordSurcharge::from_record(r),
            Kind::SwitchWindows => {
                if let Some(side) = SwitchWindows::from_record(r) {
                    self.switch_windows[usize::from(side.watched)] = Some(side);
                }
            }
            Kind::Forked => {
                self.forked.insert(r.tid);
            }
            Kind::ThreadName => {
                self.thread_names.insert(r.tid, record::name_of(r));
            }
            Kind::Start => self.start(r),
            Kind::Watch => {
                let owner = owner_of(&self.live, r.addr).map(|l| (l.site, r.addr - l.start));
                self.watch_hits.push((*r, owner));
            }
            Kind::Refine => self.refine_book.push(*r),
            // Read by PmuStatus::after_run.
            Kind::Pmu => {}
            Kind::Totals => self.totals(r),
            Kind::Cost => self.costs.extend(Cost::from_record(r)),
            Kind::Static | Kind::Stack => {
                if r.kind == Kind::Stack && r.aux > 0 {
                    self.ordinals.entry(r.tid).or_insert(r.aux - 1);
                }
                self.located.push(Located {
                    stack_of: (r.kind == Kind::Stack).then_some(r.tid),
                    start: r.addr,
                    len: r.size,
                    bias: r.time_ns,
                    runs: Vec::new(),
                })
            }
            Kind::PageRun => self.page_run(r),
            Kind::Alloc => self.alloc(r),
            Kind::SmallAlloc => self.small_alloc(r),
            Kind::PageNodes => self.page_nodes(r),
            Kind::Free => self.free(r),
            // Refinement's write probes tell who writes a line's page, not
            // how its accesses go: they stay out of the shares.
            Kind::Sample if r.flags & FLAG_WRITE_PROBE != 0 => self.write_probes += 1,
            Kind::Sample => self.sample(r),
            Kind::Thread => {
                self.allowed.insert(r.tid, r.size);
                if r.node >= 0 {
                    self.ordinals.insert(r.tid, r.node as u32);
                }
            }
            Kind::FirstTouch => self.first_touch(r),
            Kind::ThreadEnd => {
                if r.addr != u64::MAX {
                    self.threads.entry(r.tid).or_default().migrations = Some(r.addr);
                }
            }
            // Read with the records they follow, or by `plan::verify` (a
            // plan's placement, `profile --plan`), or by
            // `placement::pin_check` (`run --pin`).
            Kind::Touched
            | Kind::Frame
            | Kind::Planned
            | Kind::PlanPages
            | Kind::PlanEnd
            | Kind::Pinned => {}
        }
    }

    /// The site of allocations of `kind` from `stack` (the first seen at
    /// `first_address`), made at its first allocation.
    fn site(&mut self, kind: &str, stack: Vec<u64>, first_address: u64) -> usize {
        let key = (kind.to_string(), stack.clone());
        *self.site_of_stack.entry(key).or_insert_with(|| {
            self.sites.push(SiteAcc {
                kind: kind.into(),
                stack,
                first_address,
                ..SiteAcc::default()
            });
            self.sites.len() - 1
        })
    }

    /// A word counter's draw (a cell of a window).
    fn word_count(&mut self, r: &Record) {
        let site = owner_of(&self.live, r.addr).map(|l| l.site);
        let cell = estimate::Cell::of(self.m, r, site);
        // A window's first draw: every live region's size (and the
        // frame's) over the thread's windows grows by its pages.
        if self.last_window.insert(r.tid, r.time_ns) != Some(r.time_ns) {
            let w = estimate::duty_weight(r);
            *self
                .designs
                .entry(None)
                .or_default()
                .size_over_windows
                .entry(r.tid)
                .or_default() += w * r.aux as f64;
            for &s in &self.live_sites {
                let pages = self.sites[s].live_pages.min(r.aux as u64) as f64;
                *self
                    .designs
                    .entry(Some(s))
                    .or_default()
                    .size_over_windows
                    .entry(r.tid)
                    .or_default() += w * pages;
            }
        }
        self.all_cells.push(cell);
        let t = self.threads.entry(r.tid).or_default();
        if r.size > 0 {
            t.word_cells += 1;
        }
        t.word_draws += 1;
    }

    /// The library started (again, after an exec).
    fn start(&mut self, r: &Record) {
        let Some(s) = Start::from_record(r) else {
            return;
        };
        self.t0 = Some(s.time_ns);
        self.sampled_for = s.window_ms.map(|w| w as f64 / 1e3);
        self.pid = s.pid;
        self.rate = s.fixed_rate.unwrap_or(0) as u64;
        self.min_bytes = s.min_bytes;
        self.page_size = s.page_size.max(1);
        self.half_by_region = s.refining;
        self.go_runtime |= s.go_runtime;
        self.started = true;
        self.started_pids.insert(s.pid);
    }

    /// The library's totals at exit.
    fn totals(&mut self, r: &Record) {
        let Some(t) = Totals::from_record(r) else {
            return;
        };
        self.ended = true;
        self.channel_reopened += t.channel_reopened as u64;
        self.busy_table_full += u64::from(t.busy_table_full.unwrap_or(0));
        self.armed += t.pages_armed;
        self.overflowed += t.lost_records as u64;
        self.other_threads += t.other_thread_samples as u64;
    }

    /// A run of pages of the static segment or stack located just before.
    fn page_run(&mut self, r: &Record) {
        let ps = self.page_size.max(1);
        if let Some(l) = self
            .located
            .iter_mut()
            .rev()
            .find(|l| r.addr >= l.start / ps * ps && r.addr < l.start + l.len)
        {
            l.runs.push((r.addr, r.size, r.node));
        }
    }

    /// A tracked allocation: its site, and its pages while it lives.
    fn alloc(&mut self, r: &Record) {
        let kind = if r.flags & ALLOC_FILE != 0 {
            "file"
        } else if r.flags & ALLOC_MMAP != 0 {
            "mmap"
        } else {
            "heap"
        };
        // The stack recorded right after this allocation: take it
        // once, so that a later allocation at the same address
        // gets its own.
        let stack: Vec<u64> = if self.used_frames.insert(r.addr) {
            let mut f = self.frames.get(&r.addr).cloned().unwrap_or_default();
            f.sort();
            f.into_iter().map(|(_, pc)| pc).collect()
        } else {
            Vec::new()
        };
        let site = self.site(kind, stack, r.addr);
        self.alloc_sites.push(site);
        self.sites[site].allocations += 1;
        self.sites[site].bytes += r.size;
        self.sites[site].live_pages += whole_pages(r.addr, r.size, self.page_size);
        if self.keep_samples {
            self.sites[site].kept.allocations.push((r.addr, r.size));
        }
        self.live_sites.insert(site);
        self.live.insert(
            r.addr,
            Live {
                start: r.addr,
                len: r.size,
                site,
            },
        );
    }

    /// A sampled small allocation, weighed by its chance to be drawn.
    fn small_alloc(&mut self, r: &Record) {
        let Some(small) = SmallAlloc::from_record(r) else {
            return;
        };
        let mut f = self.frames.get(&small.key).cloned().unwrap_or_default();
        f.sort();
        let stack: Vec<u64> = f.into_iter().map(|(_, pc)| pc).collect();
        let site = self.site("small", stack, r.addr);
        // Drawn with probability 1 - exp(-size/mean): weighed by
        // its inverse, the sums estimate the site's totals.
        let mean = (small.mean_bytes as f64).max(1.0);
        let p = (1.0 - (-(r.size.max(1) as f64) / mean).exp()).max(1e-12);
        let s = &mut self.sites[site];
        s.sampled_allocations += 1;
        s.estimated_allocations += 1.0 / p;
        s.estimated_bytes += r.size as f64 / p;
        *s.pages.entry(r.node).or_default() += 1;
    }

    /// Where an allocation's pages were, at its end or in a snapshot.
    fn page_nodes(&mut self, r: &Record) {
        if let Some(l) = self.live.get(&r.addr) {
            let site = &mut self.sites[l.site];
            if r.cpu == u32::MAX {
                *site.pages.entry(r.node).or_default() += r.size;
            } else {
                let (_, nodes) = site
                    .snapshots
                    .entry(r.cpu)
                    .or_insert_with(|| (r.time_ns, BTreeMap::new()));
                *nodes.entry(r.node).or_default() += r.size;
            }
        }
    }

    /// Every live allocation the freed range overlaps ends.
    fn free(&mut self, r: &Record) {
        let end = r.addr.saturating_add(r.size);
        let gone: Vec<u64> = self
            .live
            .range(..end)
            .filter(|(_, l)| l.start + l.len > r.addr)
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            if let Some(l) = self.live.remove(&k) {
                let s = &mut self.sites[l.site];
                s.live_pages =
                    s.live_pages
                        .saturating_sub(whole_pages(l.start, l.len, self.page_size));
                if s.live_pages == 0 {
                    self.live_sites.remove(&l.site);
                }
            }
        }
    }

    /// A sampled access: the program's, its thread's and its region's counts.
    fn sample(&mut self, r: &Record) {
        self.samples += 1;
        if r.flags & FLAG_HUGE != 0 {
            self.huge_page_samples += 1;
        }
        let cpu_node = self.m.node_of_cpu(r.cpu);
        let remote = match (cpu_node, r.node) {
            (Some(c), n) if n >= 0 => {
                self.located_total += 1;
                c != n as u32
            }
            _ => false,
        };
        if remote {
            self.remote_total += 1;
        }
        let t = self.threads.entry(r.tid).or_default();
        t.samples += 1;
        t.remote += remote as u64;
        if r.node >= 0 {
            *t.memory_nodes.entry(r.node as u32).or_default() += 1;
        }
        let at = r.time_ns.saturating_sub(self.t0.unwrap_or(r.time_ns)) as f64 / 1e9;
        t.fault(at, r.cpu, cpu_node, Some(remote));
        let Some((site, alloc_start, alloc_len)) =
            owner_of(&self.live, r.addr).map(|l| (l.site, l.start, l.len))
        else {
            self.unattributed += 1;
            return;
        };
        let s = &mut self.sites[site];
        s.samples += 1;
        if self.keep_samples {
            s.kept.samples.push(super::granularity::UnitSample {
                addr: r.addr,
                alloc_start,
                alloc_len,
                tid: r.tid,
                cpu_node,
                page_node: (r.node >= 0).then_some(r.node as u32),
                write: if r.flags & FLAG_ACCESS_UNKNOWN != 0 {
                    None
                } else {
                    Some(r.flags & FLAG_WRITE != 0)
                },
            });
        }
        if r.flags & FLAG_ACCESS_UNKNOWN != 0 {
            s.unknown += 1;
        } else if r.flags & FLAG_WRITE != 0 {
            s.writes += 1;
        } else {
            s.reads += 1;
        }
        *s.threads.entry(r.tid).or_default() += 1;
        if let (Some(c), n) = (cpu_node, r.node) {
            if n >= 0 {
                *s.accesses
                    .entry(c)
                    .or_default()
                    .entry(n as u32)
                    .or_default() += 1;
                s.distance_sum += self.m.distance(c, n as u32) as f64;
                s.local_distance_sum += self.m.distance(c, c) as f64;
                let t = s.placed_by_thread.entry(r.tid).or_default();
                t[0] += 1;
                if remote {
                    s.remote += 1;
                    t[1] += 1;
                }
            }
        }
    }

    /// A sampled first touch: who touched the region first, and where the page went.
    fn first_touch(&mut self, r: &Record) {
        *self.first_by_thread.entry(r.tid).or_default() += 1;
        // The thread ran there: it is listed even with no access
        // sampled (a main thread that only initialised).
        let at = r.time_ns.saturating_sub(self.t0.unwrap_or(r.time_ns)) as f64 / 1e9;
        self.threads
            .entry(r.tid)
            .or_default()
            .fault(at, r.cpu, self.m.node_of_cpu(r.cpu), None);
        if let Some(site) = owner_of(&self.live, r.addr).map(|l| l.site) {
            let f = &mut self.sites[site].first_touch;
            f.samples += 1;
            if r.flags & FLAG_WRITE != 0 {
                f.writes += 1;
            }
            *f.threads.entry(r.tid).or_default() += 1;
            let node = match self
                .touched
                .get(&(r.addr / self.page_size * self.page_size))
            {
                Some(&n) if n >= 0 => n,
                Some(&n) if n == -libc::EFAULT => -2,
                _ => -1,
            };
            *f.nodes.entry(node).or_default() += 1;
        }
    }

    /// The word counts' estimates: each tracked site's, and the whole
    /// program's (every design gets each thread's windows in all).
    fn estimates(
        &mut self,
    ) -> (
        BTreeMap<usize, estimate::AccessEstimate>,
        Option<estimate::AccessEstimate>,
    ) {
        // Each thread's windows in all, for every design; the draws by region.
        let mut windows: BTreeSet<(u32, u64)> = BTreeSet::new();
        let mut cells_by_site: BTreeMap<Option<usize>, Vec<&estimate::Cell>> = BTreeMap::new();
        for c in &self.all_cells {
            windows.insert((c.tid, c.window));
            cells_by_site.entry(c.site).or_default().push(c);
        }
        let mut windows_per_thread: BTreeMap<u32, u64> = BTreeMap::new();
        for (tid, _) in windows {
            *windows_per_thread.entry(tid).or_default() += 1;
        }
        for d in self.designs.values_mut() {
            d.windows_per_thread = windows_per_thread.clone();
        }
        let mut site_estimates: BTreeMap<usize, estimate::AccessEstimate> = BTreeMap::new();
        for (site, cells) in &cells_by_site {
            if let (Some(s), Some(d)) = (site, self.designs.get(site)) {
                if let Some(e) = estimate::estimate(cells, d) {
                    site_estimates.insert(*s, e);
                }
            }
        }
        let program_estimate = self
            .designs
            .get(&None)
            .and_then(|d| estimate::estimate(&self.all_cells.iter().collect::<Vec<_>>(), d));
        (site_estimates, program_estimate)
    }

    /// The tracked sites as regions, in the sites' order, with their
    /// estimates and page maps.
    fn region_profiles(
        &mut self,
        records: &[Record],
        names: &dyn Symbolizer,
        mut site_estimates: BTreeMap<usize, estimate::AccessEstimate>,
    ) -> Vec<RegionProfile> {
        let t0 = self.t0;
        let page_maps = page_map::page_maps(
            self.m,
            records,
            &self.alloc_sites,
            self.sites.len(),
            self.page_size,
        );
        std::mem::take(&mut self.sites)
            .into_iter()
            .zip(page_maps)
            .enumerate()
            .map(|(i, (s, page_map))| {
                let located: u64 = s.accesses.values().flat_map(|v| v.values()).sum();
                let estimate = site_estimates.remove(&i);
                let stack: Vec<String> = s
                    .stack
                    .iter()
                    .map(|&pc| names.frame(pc).unwrap_or_else(|| format!("{pc:#x}")))
                    .filter(|f| !symbols::is_profiler_frame(f))
                    .collect();
                let site = symbols::site_of(&stack)
                    .cloned()
                    .unwrap_or_else(|| "(no stack)".into());
                let small = s.kind == "small";
                RegionProfile {
                    sampled: !small,
                    kind: s.kind,
                    site,
                    object: None,
                    thread: None,
                    stack,
                    allocations: if small {
                        s.estimated_allocations.round() as u64
                    } else {
                        s.allocations
                    },
                    bytes: if small {
                        s.estimated_bytes.round() as u64
                    } else {
                        s.bytes
                    },
                    sampled_allocations: s.sampled_allocations,
                    first_address: s.first_address,
                    samples: s.samples,
                    reads: s.reads,
                    writes: s.writes,
                    unknown_access: s.unknown,
                    remote_share: remote_share(estimate.as_ref(), s.remote, located),
                    estimate,
                    distance_ratio: (s.local_distance_sum > 0.0)
                        .then(|| s.distance_sum / s.local_distance_sum),
                    latency_cost: None,
                    accesses: s.accesses,
                    pages_by_node: s.pages,
                    threads: s.threads,
                    placed_by_thread: s.placed_by_thread,
                    first_touch: (s.first_touch.samples > 0).then_some(s.first_touch),
                    pages_over_time: s
                        .snapshots
                        .into_values()
                        .map(|(t, pages_by_node)| PageSnapshot {
                            at_s: t.saturating_sub(t0.unwrap_or(t)) as f64 / 1e9,
                            pages_by_node,
                        })
                        .collect(),
                    page_map,
                    units: None,
                    kept_samples: (self.keep_samples && !small).then(|| Box::new(s.kept)),
                }
            })
            .collect()
    }

    /// The threads seen, with the program's estimate of each one's share.
    fn thread_profiles(
        &mut self,
        program_estimate: Option<&estimate::AccessEstimate>,
    ) -> Vec<ThreadProfile> {
        // Threads seen only at their end (no sampled fault, no counted
        // access) are left out, unless a Thread record said their
        // affinity: the library writes one as each thread it samples
        // starts (no `--only-threads`, or the thread is in its set), so
        // such a thread is listed even when no window of word counting's
        // fell in its life (the duty starts above 0 at small targets).
        let allowed = &self.allowed;
        std::mem::take(&mut self.threads)
            .into_iter()
            .filter(|(tid, t)| !t.cpus.is_empty() || t.word_draws > 0 || allowed.contains_key(tid))
            .map(|(tid, t)| ThreadProfile {
                tid,
                name: self.thread_names.get(&tid).cloned(),
                ordinal: self.ordinals.get(&tid).copied(),
                samples: t.samples,
                allowed_cpus: self.allowed.get(&tid).copied(),
                nodes: t
                    .cpus
                    .iter()
                    .filter_map(|&c| self.m.node_of_cpu(c))
                    .collect::<BTreeSet<u32>>()
                    .into_iter()
                    .collect(),
                cpus: t.cpus.into_iter().collect(),
                remote_share: share(t.remote, t.samples),
                first_touches: self.first_by_thread.get(&tid).copied().unwrap_or(0),
                estimated_share: program_estimate
                    .as_ref()
                    .and_then(|e| e.threads.get(&tid))
                    .map(|t| t.share),
                word_cells: t.word_cells,
                memory_nodes: t.memory_nodes,
                migrations: t.migrations,
                cpu_changes_seen: t.cpu_changes,
                timeline: t.timeline,
            })
            .collect()
    }

    /// What the reader must know about how the run was recorded.
    fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.go_runtime {
            warnings.push(
                "a Go program: its runtime makes system calls without libc, which would fail (EFAULT) on a page armed for sampling, so no page was armed: accesses come from word counts (watchpoints) alone, and first touches are not sampled".into(),
            );
        }
        if self.started && !self.ended {
            warnings.push(if self.go_runtime {
                "the program exited without libc's exit (Go's runtime never calls it): where its pages were at exit, its totals and its last second of word counts are missing".into()
            } else {
                "the program did not exit through libc's exit (a signal, _exit, or an exec ended it): where its pages were at exit, its totals and its last second of word counts are missing".into()
            });
        }
        if self.channel_reopened > 0 {
            warnings.push(format!(
                "the program closed or reused the descriptor of the library's record file {} time{} (it closes descriptors from 3 up, or dup2s onto them): the library opened its file again each time and never wrote into the program's files, but records made meanwhile may be missing",
                self.channel_reopened,
                if self.channel_reopened == 1 { "" } else { "s" }
            ));
        }
        if self.busy_table_full > 0 {
            warnings.push(format!(
                "{} system call{} found the library's table of busy buffers full (more than {} calls blocked in the kernel at once, each with a buffer): while each lasted no page was armed, so page-fault samples are missing from that time (word counts do not depend on it)",
                self.busy_table_full,
                if self.busy_table_full == 1 { "" } else { "s" },
                numalab_profile_abi::events::BUSY_TABLE_SLOTS
            ));
        }
        // Forked children that never exec'd ran without a sampler.
        let unsampled = self.forked.difference(&self.started_pids).count();
        if unsampled > 0 {
            warnings.push(format!(
                "{unsampled} process{} forked without exec (workers such as stress-ng's or a pre-forking server's) {} not sampled: the library's sampler thread does not survive fork, so only the process numalab started and the programs children exec are profiled; their work is missing here (profile one worker by running it directly)",
                if unsampled == 1 { "" } else { "es" },
                if unsampled == 1 { "was" } else { "were" }
            ));
        }
        if self.samples == 0 && unsampled > 0 {
            warnings.push(
                "no access was sampled: the work ran in the forked processes above, which are not sampled (a higher --rate would not help)".into(),
            );
        } else if self.samples == 0 && !self.go_runtime {
            warnings.push(format!(
                "no access was sampled: the program allocated nothing of {} or more that it touched while sampled, or ran too briefly (raise --rate or lower --min-bytes)",
                crate::text::format::bytes(self.min_bytes)
            ));
        }
        if self.overflowed > 0 {
            warnings.push(format!(
                "{} records were written past a full queue: their order may be off, and a sample may count as unattributed",
                self.overflowed
            ));
        }
        if self.half_by_region {
            warnings.push(
                "--refine armed a quarter of the pages region by region, so that small regions are seen: regions' remote shares stand, but the whole program's counts small regions more than their size".into(),
            );
        }
        warnings
    }

    /// The profile of what was replayed; `records` for the page maps,
    /// `names` for the call stacks.
    pub(super) fn finish(
        mut self,
        command: Vec<String>,
        records: &[Record],
        names: &dyn Symbolizer,
    ) -> Profile {
        let (site_estimates, program_estimate) = self.estimates();
        let mut regions = self.region_profiles(records, names, site_estimates);
        let threads = self.thread_profiles(program_estimate.as_ref());
        let warnings = self.warnings();
        // Named before the regions are sorted: the sites' order is theirs.
        let watch_hits: Vec<refine::WatchHit> = self
            .watch_hits
            .into_iter()
            .map(|(record, owner)| refine::WatchHit {
                record,
                owner: owner.map(|(site, off)| (regions[site].site.clone(), off)),
            })
            .collect();
        let refinement =
            refine::refinement(self.m, &watch_hits, &self.refine_book, self.write_probes);
        merge_small_sites(&mut regions);
        regions.extend(located_regions(
            &self.located,
            names,
            self.min_bytes,
            self.page_size,
            self.pid,
        ));
        regions.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then(present(b).cmp(&present(a)))
                .then(b.bytes.cmp(&a.bytes))
        });
        for r in regions.iter_mut().skip(MAPPED_REGIONS) {
            r.page_map = None;
        }
        // A first touch is a sampled fault too.
        let faults = self.samples + self.first_by_thread.values().sum::<u64>();
        // Several processes' Cost records interleave: no one span to
        // divide their pages by.
        let one_process = self.started_pids.len() <= 1;
        let cost = sampling_cost(&self.costs, faults, one_process.then_some(self.armed));
        let mut p = Profile {
            schema_version: SCHEMA_VERSION.into(),
            program: command,
            pid: self.pid,
            host: None,
            rate: self.rate,
            min_bytes: self.min_bytes,
            page_size: self.page_size,
            pages_armed: self.armed,
            go_runtime: self.go_runtime,
            samples: self.samples,
            huge_page_samples: self.huge_page_samples,
            cost,
            sampled_for_s: self.sampled_for,
            ran_for_s: None,
            unattributed: self.unattributed,
            remote_share: remote_share(
                program_estimate.as_ref(),
                self.remote_total,
                self.located_total,
            ),
            word_counting: self.word_totals.map(|r| {
                estimate::WordCounting::of(
                    &r,
                    self.word_switches.as_ref(),
                    self.word_faults.as_ref(),
                    &self.switch_windows,
                    self.all_cells.iter().filter(|c| c.count > 0.0).count() as u64,
                )
            }),
            estimate: program_estimate,
            regions,
            threads,
            latency_source: None,
            refinement,
            diagnoses: Vec::new(),
            plan_check: None,
            warnings,
            pmu: None,
            counters: None,
            granularity: None,
            selection: (self.other_threads > 0).then(|| Selection {
                samples_of_other_threads: self.other_threads,
                ..Selection::default()
            }),
        };
        p.diagnoses = diagnose::diagnose(self.m, &p);
        p
    }
}

/// `part` of `whole`, when there is a whole.
fn share(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// The word counts' remote share where they are enough to rest a diagnosis
/// on (the diagnoses' threshold), else the page faults' (`remote` of
/// `located` samples).
fn remote_share(e: Option<&estimate::AccessEstimate>, remote: u64, located: u64) -> Option<f64> {
    e.filter(|e| e.placed_cells >= estimate::MIN_CELLS)
        .and_then(|e| e.remote)
        .map(|r| r.share)
        .or(share(remote, located))
}
