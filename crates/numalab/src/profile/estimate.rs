//! What a region's accesses are, estimated from the word counter's draws
//! (the preload library's `words`: each thread counts every access it
//! makes to a few words drawn at random, redrawn every window of its CPU
//! time), with an interval that accounts for how they were drawn.
//!
//! A draw (a *cell*) is one (thread, slot, window): a word drawn uniformly
//! from the pages tracked then (the frame, F pages), and the accesses its
//! thread made to it in that window. Every access of any thread to any
//! tracked word is counted by a slot with the same probability, so each
//! thread's accesses are estimated without bias whatever the other threads
//! do (docs/profile.md, "How the remote share is estimated").
//!
//! The estimator, per thread t and region R, is post-stratified: the mean
//! count of t's draws that fell in R, times R's size over t's windows
//! (Σ over t's watched windows of 2^duty × R's pages then), rather than
//! the plain Horvitz–Thompson sum. How many of t's draws happened to fall
//! in R is then no source of error, and a region scanned over and over
//! (every draw in it counting about as many accesses) is estimated from a
//! few draws. A share of R is the ratio of such sums over the threads; its
//! variance is the linearised (delta-method) variance over the draws,
//! each thread's draws independent of the others', every access in one
//! draw sharing its thread and word (so they are one unit, never
//! independent samples). The interval is Wilson's at the effective number
//! of draws that variance implies (at the draws with an access where
//! every draw agrees, and the variance is nought).

use super::record::{word_duty, word_slots, Record, WORD_MOVED};
use crate::experiments::pdm::wilson;
use crate::machine::Machine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Draws with an access a share needs before a policy is planned on it
/// (below: "not enough samples").
pub const MIN_CELLS: u64 = 30;

/// One draw of the word counter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub tid: u32,
    /// Its window (the time the window closed: the draws of one window
    /// share it).
    pub window: u64,
    /// The region (site index) its word fell in, if any.
    pub site: Option<usize>,
    /// The node of the thread's CPU (None: not known, or it changed node
    /// during the window).
    pub cpu_node: Option<u32>,
    /// The node of the word's page at the window's end, for a draw with
    /// an access (None: not present, or no access).
    pub memory_node: Option<u32>,
    /// Accesses counted (scaled to the whole window when capped).
    pub count: f64,
    /// Its Horvitz–Thompson weight: 2^duty × frame pages / slots.
    pub weight: f64,
}

impl Cell {
    /// The draw a WordCount record is, on machine `m`, in region `site`.
    pub fn of(m: &Machine, r: &Record, site: Option<usize>) -> Cell {
        Cell {
            tid: r.tid,
            window: r.time_ns,
            site,
            cpu_node: if r.flags & WORD_MOVED != 0 {
                None
            } else {
                m.node_of_cpu(r.cpu)
            },
            memory_node: (r.node >= 0).then_some(r.node as u32),
            count: r.size as f64,
            weight: duty_weight(r) * r.aux.max(1) as f64 / word_slots(r.flags).max(1) as f64,
        }
    }

    /// Whether its accesses' nodes are both known.
    fn placed(&self) -> bool {
        self.count > 0.0 && self.cpu_node.is_some() && self.memory_node.is_some()
    }
}

/// 2^duty of a WordCount: the inverse of its window's chance to be watched.
pub fn duty_weight(r: &Record) -> f64 {
    2f64.powi(word_duty(r.flags) as i32)
}

/// What the draws of one region need besides themselves: per thread, how
/// many windows it watched in all, and the region's size over them
/// (Σ 2^duty × the region's pages at each window).
#[derive(Debug, Clone, Default)]
pub struct Design {
    pub windows_per_thread: BTreeMap<u32, u64>,
    pub size_over_windows: BTreeMap<u32, f64>,
}

/// A share with its 95% interval.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Share {
    pub share: f64,
    pub low: f64,
    pub high: f64,
}

/// One cell of the access matrix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MatrixShare {
    pub cpu_node: u32,
    pub memory_node: u32,
    #[serde(flatten)]
    pub share: Share,
}

/// The estimate of one region's accesses (or the whole program's).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AccessEstimate {
    /// Draws whose word fell in the region, with or without an access.
    pub draws: u64,
    /// Draws with a counted access: the samples behind every share.
    pub cells: u64,
    /// The effective number of independent draws the remote share's
    /// interval rests on.
    pub effective_cells: f64,
    /// Accesses counted (scaled where capped).
    pub counted: u64,
    /// Draws with an access whose thread's node and page's node were both
    /// known, of `cells`: the shares are of their accesses.
    pub placed_cells: u64,
    /// Estimated accesses to the region over the run, in draw units (an
    /// access to every word of a page counts the page's words): for
    /// comparing regions, not a count of loads.
    pub accesses: f64,
    /// Share of the placed accesses from a thread on another node than
    /// the page's, with its interval.
    pub remote: Option<Share>,
    /// Share of each (CPU node, memory node) among the placed accesses.
    pub matrix: Vec<MatrixShare>,
    /// Share of the placed accesses made from each CPU node.
    pub cpu_nodes: BTreeMap<u32, f64>,
    /// Estimated share of the region's accesses by each thread, and its
    /// draws with an access.
    pub threads: BTreeMap<u32, ThreadShare>,
}

/// One thread's part of a region's accesses.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ThreadShare {
    pub share: f64,
    /// Its draws whose word fell in the region, with or without an
    /// access: what its CPU time bought, whatever the others did.
    #[serde(default)]
    pub draws: u64,
    pub cells: u64,
    pub counted: u64,
}

/// One thread's draws in the region, summed.
struct ThreadSums<'a> {
    cells: Vec<&'a Cell>,
    /// Σ weight over its draws in the region (its Horvitz–Thompson count
    /// of the region's pages) and the region's size over its windows.
    weight: f64,
    size: f64,
    /// Its watched windows in all.
    windows: u64,
}

impl ThreadSums<'_> {
    /// The post-stratification factor: the region's size over the
    /// thread's windows per unit of its weighted draws there.
    fn factor(&self) -> f64 {
        if self.weight > 0.0 {
            self.size / self.weight
        } else {
            0.0
        }
    }

    /// The thread's estimated total of `y` over the region.
    fn total(&self, y: impl Fn(&Cell) -> f64) -> f64 {
        self.factor() * self.cells.iter().map(|c| c.weight * y(c)).sum::<f64>()
    }
}

/// The estimate of a ratio Σ num / Σ den over the threads, with its
/// linearised variance. The unit of the variance is the window: a
/// thread's draws of one window share its length and what the thread did
/// in it, so they are not independent of each other; windows are (each a
/// fresh draw of words), and so are threads.
fn ratio(
    threads: &[ThreadSums],
    num: impl Fn(&Cell) -> f64 + Copy,
    den: impl Fn(&Cell) -> f64 + Copy,
) -> Option<(f64, f64)> {
    let n_total: f64 = threads.iter().map(|t| t.total(num)).sum();
    let d_total: f64 = threads.iter().map(|t| t.total(den)).sum();
    if d_total <= 0.0 {
        return None;
    }
    let rho = n_total / d_total;
    let mut var = 0.0;
    for t in threads {
        let g = t.factor();
        if g == 0.0 {
            continue;
        }
        // The thread's mean per unit weight, of num - rho den.
        let w: f64 = t.cells.iter().map(|c| c.weight).sum();
        let mean = t
            .cells
            .iter()
            .map(|c| c.weight * (num(c) - rho * den(c)))
            .sum::<f64>()
            / w;
        // Each window's residual; windows of the thread with no draw in
        // the region have none (and count in n).
        let mut by_window: BTreeMap<u64, f64> = BTreeMap::new();
        for c in &t.cells {
            *by_window.entry(c.window).or_default() +=
                g * c.weight * (num(c) - rho * den(c) - mean);
        }
        let sum_sq: f64 = by_window.values().map(|z| z * z).sum();
        let n = t.windows.max(2) as f64;
        var += n / (n - 1.0) * sum_sq;
    }
    Some((rho, var / (d_total * d_total)))
}

/// Kish's effective number of the placed draws: (Σ u)² / Σ u², u each
/// draw's part of the placed total (its thread's post-stratification
/// factor × its weight × its count). A share weighs its draws by u, so a
/// few heavy ones (a thread with a single draw in the region, which its
/// factor makes stand for all its windows; a draw with many accesses)
/// carry what many light ones would: the share knows at most this many
/// independent draws. The within-thread variance cannot see it: a thread
/// whose only draw in the region hit has no residual at all, and CI once
/// printed 0.558 (95% CI 0.395-0.709) for a staggered reader's cell whose
/// truth was 0.250.
fn kish_draws(threads: &[ThreadSums]) -> f64 {
    let (mut sum, mut sum_sq) = (0.0, 0.0);
    for t in threads {
        let g = t.factor();
        for c in t.cells.iter().filter(|c| c.placed()) {
            let u = g * c.weight * c.count;
            sum += u;
            sum_sq += u * u;
        }
    }
    if sum_sq > 0.0 {
        sum * sum / sum_sq
    } else {
        0.0
    }
}

/// Wilson's interval of `share` at the effective draws its variance
/// implies; where the variance is nought (every draw agrees), at the
/// draws with an access. Never at more than `most` draws.
fn interval(share: f64, var: f64, most: f64) -> Share {
    let s = share.clamp(0.0, 1.0);
    let [low, high] = wilson(s, effective_draws(s, var, most));
    Share {
        share: s + 0.0,
        low,
        high,
    }
}

/// The independent draws a share with variance `var` stands for: s(1 − s)
/// / var, at most `most`; `most` where the variance is nought (every draw
/// agrees) or the share is 0 or 1.
fn effective_draws(s: f64, var: f64, most: f64) -> f64 {
    let n = if var > 0.0 && s > 0.0 && s < 1.0 {
        (s * (1.0 - s) / var).min(most)
    } else {
        most
    };
    n.max(1.0)
}

/// The estimate of region `site` (None: every tracked region, the whole
/// program) from its draws and its design; `None` without any draw.
pub fn estimate(cells: &[&Cell], design: &Design) -> Option<AccessEstimate> {
    if cells.is_empty() {
        return None;
    }
    let mut by_thread: BTreeMap<u32, Vec<&Cell>> = BTreeMap::new();
    for c in cells {
        if c.cpu_node.is_some() {
            by_thread.entry(c.tid).or_default().push(c);
        }
    }
    let threads: Vec<ThreadSums> = by_thread
        .into_iter()
        .map(|(tid, cs)| ThreadSums {
            weight: cs.iter().map(|c| c.weight).sum(),
            size: design.size_over_windows.get(&tid).copied().unwrap_or(0.0),
            windows: design
                .windows_per_thread
                .get(&tid)
                .copied()
                .unwrap_or(cs.len() as u64),
            cells: cs,
        })
        .collect();
    let placed = |c: &Cell| if c.placed() { c.count } else { 0.0 };
    let remote = |c: &Cell| {
        if c.placed() && c.cpu_node != c.memory_node {
            c.count
        } else {
            0.0
        }
    };
    let with_access = cells.iter().filter(|c| c.count > 0.0).count() as u64;
    let placed_cells = cells.iter().filter(|c| c.placed()).count() as u64;
    let remote_share = ratio(&threads, remote, placed);
    // Never more than one independent observation a draw (stratifying by
    // thread can shrink the variance below the binomial's, but a handful of
    // threads that happen to agree is no proof of it), nor more than the
    // draws' weights allow.
    let most = (placed_cells as f64).min(kish_draws(&threads));
    let effective = remote_share.map_or(0.0, |(s, v)| effective_draws(s, v, most));
    let mut pairs: BTreeMap<(u32, u32), ()> = BTreeMap::new();
    for c in cells.iter().filter(|c| c.placed()) {
        if let (Some(a), Some(b)) = (c.cpu_node, c.memory_node) {
            pairs.insert((a, b), ());
        }
    }
    let matrix = pairs
        .into_keys()
        .filter_map(|(a, b)| {
            let (s, v) = ratio(
                &threads,
                |c| {
                    if c.placed() && c.cpu_node == Some(a) && c.memory_node == Some(b) {
                        c.count
                    } else {
                        0.0
                    }
                },
                placed,
            )?;
            Some(MatrixShare {
                cpu_node: a,
                memory_node: b,
                share: interval(s, v, most),
            })
        })
        .collect();
    let total_placed: f64 = threads.iter().map(|t| t.total(placed)).sum();
    let mut shares: BTreeMap<u32, ThreadShare> = BTreeMap::new();
    let all: f64 = threads.iter().map(|t| t.total(|c| c.count)).sum();
    for t in &threads {
        let mine = t.total(|c| c.count);
        let tid = t.cells[0].tid;
        shares.insert(
            tid,
            ThreadShare {
                share: if all > 0.0 { mine / all } else { 0.0 },
                draws: t.cells.len() as u64,
                cells: t.cells.iter().filter(|c| c.count > 0.0).count() as u64,
                counted: t.cells.iter().map(|c| c.count.round() as u64).sum(),
            },
        );
    }
    // A thread's node is its CPU's at each window: a thread that moved
    // between nodes is split by its draws.
    let mut by_node: BTreeMap<u32, f64> = BTreeMap::new();
    for t in &threads {
        let g = t.factor();
        for c in t.cells.iter().filter(|c| c.placed()) {
            *by_node.entry(c.cpu_node.unwrap_or(0)).or_default() += g * c.weight * c.count;
        }
    }
    let cpu_nodes: BTreeMap<u32, f64> = if total_placed > 0.0 {
        by_node
            .into_iter()
            .map(|(n, a)| (n, a / total_placed))
            .collect()
    } else {
        BTreeMap::new()
    };
    Some(AccessEstimate {
        draws: cells.len() as u64,
        cells: with_access,
        effective_cells: effective,
        counted: cells.iter().map(|c| c.count.round() as u64).sum(),
        placed_cells,
        accesses: all,
        remote: remote_share.map(|(s, v)| interval(s, v, most)),
        matrix,
        cpu_nodes,
        threads: shares,
    })
}

/// The windows the switch price was measured on, by side: those whose
/// thread blocked often (8 times or more, and 1000 times a second of its
/// CPU time).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SwitchEvidence {
    pub watched: SwitchSide,
    pub skipped: SwitchSide,
}

/// One side's windows: how many, their context switches, their system
/// time (ms; the watched side's net of what is charged apart, its counted
/// accesses and faults, so it may be below 0) and their CPU time (ms).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SwitchSide {
    pub windows: u64,
    pub switches: u64,
    pub sys_ms: f64,
    pub cpu_ms: f64,
}

impl SwitchSide {
    fn of(r: &numalab_profile_abi::events::SwitchWindows) -> SwitchSide {
        SwitchSide {
            windows: r.windows as u64,
            switches: r.switches,
            sys_ms: r.sys_ns as f64 / 1e6,
            cpu_ms: r.cpu_ns as f64 / 1e6,
        }
    }
}

/// What the word counter did over the run (its WordTotals record).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WordCounting {
    /// Why it did not run (the kernel refused a watchpoint), or null.
    pub unavailable: Option<String>,
    /// Threads watched, and threads whose watch was lost (descriptors
    /// the program closed, registers taken, the table full).
    pub threads: u64,
    pub threads_lost: u64,
    /// Windows watched, and draws (slot-windows) in them.
    pub windows: u64,
    pub cells: u64,
    /// Draws with an access (the samples of every share).
    pub cells_with_accesses: u64,
    /// The cost of one counted access, measured at start (µs), and the
    /// time the windows' turns took in all (ms).
    pub us_per_access: f64,
    pub turns_ms: f64,
    /// What a context switch of a watching thread costs more (µs; 0:
    /// nothing measurable; null: not measured, or a profile from before
    /// 2.2): since 2.6 the system time a switch took in the program's
    /// watched windows less what it took in its skipped ones, measured
    /// once each kind had 100 switches and 20 ms of CPU time in windows
    /// whose thread blocked often (`switch_windows`; before 2.6, a helper
    /// thread's futex passed back and forth once the watched switches
    /// passed 500), and the baseline,
    /// the system time a switch took in skipped windows (µs, null before
    /// 2.6 or when not measured); the switches of threads while their
    /// windows watched, and what was charged for them (ms).
    #[serde(default)]
    pub us_per_switch: Option<f64>,
    #[serde(default)]
    pub us_sys_per_switch_skipped: Option<f64>,
    /// What that price rests on: the two sides' windows (null before
    /// 2.7).
    #[serde(default)]
    pub switch_windows: Option<SwitchEvidence>,
    #[serde(default)]
    pub switches: u64,
    #[serde(default)]
    pub switches_ms: f64,
    /// The same for a page fault of a watching thread, measured once the
    /// watched faults passed 1000 (null: not measured, or a profile from
    /// before 2.4), the faults, and what was charged for them (ms).
    #[serde(default)]
    pub us_per_fault: Option<f64>,
    #[serde(default)]
    pub faults: u64,
    #[serde(default)]
    pub faults_ms: f64,
}

impl WordCounting {
    /// From the WordTotals record and the WordSwitches and WordFaults
    /// beside it (`cells_with_accesses` from the draws).
    pub fn of(
        r: &numalab_profile_abi::events::WordTotals,
        switches: Option<&numalab_profile_abi::events::WordSurcharge>,
        faults: Option<&numalab_profile_abi::events::WordSurcharge>,
        sides: &[Option<numalab_profile_abi::events::SwitchWindows>; 2],
        cells_with_accesses: u64,
    ) -> WordCounting {
        let each = |s: Option<&numalab_profile_abi::events::WordSurcharge>| {
            s.filter(|s| s.measured).map(|s| s.ns_each as f64 / 1e3)
        };
        WordCounting {
            unavailable: (r.unavailable < 0).then(|| {
                format!(
                    "the kernel refused a hardware watchpoint ({}): shares come from page-fault samples, whose error is not bounded",
                    std::io::Error::from_raw_os_error(-r.unavailable)
                )
            }),
            threads: r.threads as u64,
            threads_lost: r.threads_lost as u64,
            windows: r.windows,
            cells: r.cells,
            cells_with_accesses,
            us_per_access: r.ns_per_access as f64 / 1e3,
            turns_ms: r.turns_ns as f64 / 1e6,
            us_per_switch: each(switches),
            us_sys_per_switch_skipped: switches
                .filter(|s| s.measured && s.unwatched_ns_each > 0)
                .map(|s| s.unwatched_ns_each as f64 / 1e3),
            switch_windows: match sides {
                [Some(skipped), Some(watched)] => Some(SwitchEvidence {
                    watched: SwitchSide::of(watched),
                    skipped: SwitchSide::of(skipped),
                }),
                _ => None,
            },
            switches: switches.map_or(0, |s| s.events),
            switches_ms: switches.map_or(0.0, |s| s.charged_ns as f64 / 1e6),
            us_per_fault: each(faults),
            faults: faults.map_or(0, |s| s.events),
            faults_ms: faults.map_or(0.0, |s| s.charged_ns as f64 / 1e6),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(tid: u32, cpu: u32, mem: u32, count: f64) -> Cell {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Cell {
            tid,
            window: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            site: Some(0),
            cpu_node: Some(cpu),
            memory_node: (count > 0.0).then_some(mem),
            count,
            weight: 1.0,
        }
    }

    /// A design where each thread's windows saw `size` pages of the
    /// region, and it watched `windows` windows in all.
    fn design(threads: &[(u32, f64, u64)]) -> Design {
        Design {
            windows_per_thread: threads.iter().map(|t| (t.0, t.2)).collect(),
            size_over_windows: threads.iter().map(|t| (t.0, t.1)).collect(),
        }
    }

    #[test]
    fn each_thread_counts_by_its_mean_not_by_its_luck_in_draws() {
        // Two threads scan the region equally (3 accesses a draw there),
        // pages on node 0; thread 2 (node 1) drew it twice as often by
        // chance. Horvitz-Thompson would give it 2/3; post-stratified,
        // each thread gets half.
        let mut cells: Vec<Cell> = (0..10).map(|_| cell(1, 0, 0, 3.0)).collect();
        cells.extend((0..20).map(|_| cell(2, 1, 0, 3.0)));
        let refs: Vec<&Cell> = cells.iter().collect();
        let e = estimate(&refs, &design(&[(1, 15.0, 45), (2, 15.0, 45)])).unwrap();
        let r = e.remote.unwrap();
        assert!((r.share - 0.5).abs() < 1e-12, "{r:?}");
        assert!((e.threads[&1].share - 0.5).abs() < 1e-12);
        assert_eq!(
            (e.draws, e.cells, e.placed_cells, e.counted),
            (30, 30, 30, 90)
        );
        // Every draw of each thread agrees: no variance, the interval at
        // the draws with an access.
        assert!(r.low < 0.5 && r.high > 0.5);
    }

    #[test]
    fn draws_without_an_access_lower_a_threads_mean() {
        // Thread 2 accesses the region in half its draws there.
        let mut cells: Vec<Cell> = (0..20).map(|_| cell(1, 0, 0, 2.0)).collect();
        cells.extend((0..20).map(|i| cell(2, 1, 0, if i % 2 == 0 { 2.0 } else { 0.0 })));
        let refs: Vec<&Cell> = cells.iter().collect();
        let e = estimate(&refs, &design(&[(1, 20.0, 80), (2, 20.0, 80)])).unwrap();
        let r = e.remote.unwrap();
        assert!((r.share - 1.0 / 3.0).abs() < 1e-12, "{r:?}");
        assert!(r.low > 0.1 && r.high < 0.6, "{r:?}");
        assert_eq!(e.cells, 30);
        assert!((e.cpu_nodes[&1] - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(e.matrix.len(), 2);
    }

    #[test]
    fn scattered_counts_widen_the_interval() {
        let steady: Vec<Cell> = (0..40).map(|i| cell(1 + i % 2, i % 2, 0, 2.0)).collect();
        let noisy: Vec<Cell> = (0..40)
            .map(|i| cell(1 + i % 2, i % 2, 0, if i % 8 < 6 { 0.0 } else { 8.0 }))
            .collect();
        let d = design(&[(1, 20.0, 40), (2, 20.0, 40)]);
        let a = estimate(&steady.iter().collect::<Vec<_>>(), &d).unwrap();
        let b = estimate(&noisy.iter().collect::<Vec<_>>(), &d).unwrap();
        assert!((a.remote.unwrap().share - 0.5).abs() < 1e-12);
        let width = |e: &AccessEstimate| e.remote.unwrap().high - e.remote.unwrap().low;
        assert!(width(&b) > width(&a), "{} {}", width(&a), width(&b));
    }

    #[test]
    fn a_thread_whose_single_draw_stands_for_all_its_windows_widens_the_interval() {
        // Four local threads with 10 draws each in the region, and one
        // remote thread whose only draw there hit: its factor makes that
        // draw a fifth of the accesses. It has no residual, so the
        // variance alone would print an interval at all 41 draws; Kish's
        // effective draws bound it: u is 1 for each local draw and 10 for
        // the remote one, (Σu)²/Σu² = 50²/(40 + 100) = 17.9.
        let mut cells: Vec<Cell> = (0..40).map(|i| cell(1 + i % 4, 0, 0, 1.0)).collect();
        cells.push(cell(9, 1, 0, 1.0));
        let mut threads: Vec<(u32, f64, u64)> = (1..=4).map(|t| (t, 10.0, 40)).collect();
        threads.push((9, 10.0, 40));
        let e = estimate(&cells.iter().collect::<Vec<_>>(), &design(&threads)).unwrap();
        let r = e.remote.unwrap();
        assert!((r.share - 0.2).abs() < 1e-12, "{r:?}");
        let kish = 2500.0 / 140.0;
        assert!(
            (e.effective_cells - kish).abs() < 1e-9,
            "{}",
            e.effective_cells
        );
        let [low, high] = wilson(0.2, kish);
        assert_eq!((r.low, r.high), (low, high));
        // Equal weights: Kish's bound is the draws themselves.
        let even: Vec<Cell> = (0..40).map(|i| cell(1 + i % 4, i % 2, 0, 1.0)).collect();
        let d = design(&(1..=4).map(|t| (t, 10.0, 40)).collect::<Vec<_>>());
        let e = estimate(&even.iter().collect::<Vec<_>>(), &d).unwrap();
        assert!(
            e.effective_cells <= 40.0 && e.effective_cells > 39.0,
            "{}",
            e.effective_cells
        );
    }

    #[test]
    fn all_local_still_has_an_interval_above_zero() {
        let cells: Vec<Cell> = (0..40).map(|i| cell(i, 0, 0, 1.0)).collect();
        let d = design(&(0..40).map(|i| (i, 1.0, 4)).collect::<Vec<_>>());
        let r = estimate(&cells.iter().collect::<Vec<_>>(), &d)
            .unwrap()
            .remote
            .unwrap();
        assert_eq!(r.share, 0.0);
        assert_eq!(r.low, 0.0);
        assert!(r.high > 0.05 && r.high < 0.15, "{r:?}");
        assert!(estimate(&[], &Design::default()).is_none());
    }

    #[test]
    fn draws_of_unknown_node_count_but_are_not_placed() {
        let mut cells: Vec<Cell> = (0..10).map(|i| cell(i, 0, 1, 1.0)).collect();
        cells.push(Cell {
            tid: 50,
            window: 0,
            site: Some(0),
            cpu_node: Some(0),
            memory_node: None,
            count: 3.0,
            weight: 1.0,
        });
        let d = design(&(0..51).map(|i| (i, 1.0, 2)).collect::<Vec<_>>());
        let e = estimate(&cells.iter().collect::<Vec<_>>(), &d).unwrap();
        assert_eq!((e.cells, e.placed_cells, e.counted), (11, 10, 13));
        assert_eq!(e.remote.unwrap().share, 1.0);
        assert_eq!(e.matrix.len(), 1);
        assert_eq!((e.matrix[0].cpu_node, e.matrix[0].memory_node), (0, 1));
    }

    #[test]
    fn the_switch_price_says_both_sides_it_rests_on_or_nothing() {
        use numalab_profile_abi::events::{SwitchWindows, WordTotals};
        let totals = WordTotals {
            tid: 1,
            windows: 12,
            cells: 48,
            threads: 2,
            threads_lost: 0,
            unavailable: 0,
            ns_per_access: 12_000,
            turns_ns: 3_000_000,
        };
        let side = |watched, sys_ns| SwitchWindows {
            tid: 1,
            watched,
            windows: 5,
            switches: 4_000,
            sys_ns,
            cpu_ns: 61_500_000,
        };
        // The watched side net of what is charged apart: below 0 here.
        let sides = [Some(side(false, 70_000_000)), Some(side(true, -1_500_000))];
        let w = WordCounting::of(&totals, None, None, &sides, 0);
        let e = w.switch_windows.expect("both sides");
        assert_eq!(
            (
                e.skipped.windows,
                e.skipped.switches,
                e.skipped.sys_ms,
                e.skipped.cpu_ms
            ),
            (5, 4_000, 70.0, 61.5)
        );
        assert_eq!(e.watched.sys_ms, -1.5);
        // A profile from before 2.7 (or one side's record lost): nothing.
        let w = WordCounting::of(&totals, None, None, &[sides[0], None], 0);
        assert_eq!(w.switch_windows, None);
    }
}
