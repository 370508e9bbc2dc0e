//! `numalab c2c`: cache-line transfer latency between every pair of CPUs.
//!
//! Two threads pinned to CPUs `a` and `b` pass one 64-byte line back and
//! forth. Three figures per pair, each a [`measure`]d median:
//!
//! - **modified** (one-way latency, symmetric): one 8-byte counter on its own
//!   line. `a` stores `v + 1` and spins until it reads `v + 2`; `b` spins until
//!   it reads an odd value and stores that value + 1. Every hand-over is a load
//!   of a line the other core has just written (Modified in its cache),
//!   followed by a store (ownership back): the classic flag ping-pong. A sample
//!   is `n` round trips; the figure is round trip / 2.
//! - **clean** (directional: `clean[r][o]` = reader `r`, owner `o`): 64 lines,
//!   each on its own 4 KiB page at a different offset (no two in one L1 set,
//!   no two adjacent: hardware prefetchers stay out), linked in a random cycle
//!   of pointers, in memory local to the owner. One round: the owner flushes the
//!   64 lines from every cache (`clflush` on x86-64, `dc civac` on aarch64),
//!   reads them back from memory (so each line is clean, Exclusive, in the
//!   owner's cache and in no other core's), then raises a flag; the reader
//!   follows the 64 pointers, timed: 64 dependent loads, each of a clean line
//!   held by the other core. The figure is the reader's time / 64 (minus the
//!   clock's own overhead). Not available on other architectures.
//! - **false sharing** (symmetric): both threads do `n` atomic increments
//!   (`lock xadd` on x86-64) of their own 8-byte word, at once; once with the
//!   two words in one line (bytes 0 and 8), once with them 2 KiB apart. The
//!   threads start together (the second signals the first, which then
//!   starts); the figures are ns per increment (slower thread) and their
//!   ratio.
//!
//! The lines live in pages first touched with the `local` policy by the row
//! CPU (`a`; for clean, the owner). The diagonal (a CPU with itself) is not
//! measured: `None` (`null` in JSON). Each pair's time budget is shared by
//! its figures (modified 30%, clean 20% per direction, false sharing 15% per
//! layout).
//!
//! Cancellation ([`crate::measure::cancel`]) ends the run within one sample:
//! the pair in progress keeps the figures measured so far (the rest `None`),
//! and the matrices and summaries cover the pairs measured.

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::harness::{core_ghz, Figure};
use crate::measure::stats::{measure, median, Better, Measurement, StopRule};
use crate::placement::{
    pin_current_thread, sys, BufferSpec, MemoryPolicy, PlacedBuffer, PlacementError,
};
use crate::random::SplitMix64;
use crate::serde_util::f64_or_nan;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// Lines followed by the reader in one clean round.
pub const CLEAN_LINES: usize = 64;

/// The figures to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct C2cFigures {
    pub modified: bool,
    pub clean: bool,
    pub false_sharing: bool,
}

impl Default for C2cFigures {
    fn default() -> Self {
        Self {
            modified: true,
            clean: true,
            false_sharing: true,
        }
    }
}

impl C2cFigures {
    /// The names [`C2cFigures::parse`] reads.
    pub const CHOICES: &'static str = "modified, clean, false-sharing, all";

    /// Parses a comma-separated list of figure names.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut f = Self {
            modified: false,
            clean: false,
            false_sharing: false,
        };
        for part in text.split(',').map(str::trim) {
            match part {
                "modified" => f.modified = true,
                "clean" => f.clean = true,
                "false-sharing" => f.false_sharing = true,
                "all" => f = Self::default(),
                _ => return Err(format!("unknown figure '{part}'; valid: {}", Self::CHOICES)),
            }
        }
        if !(f.modified || f.clean || f.false_sharing) {
            return Err(format!("no figure chosen; valid: {}", Self::CHOICES));
        }
        Ok(f)
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct C2cRequest {
    /// CPUs to pair (any order; the result orders them by node, then id).
    pub cpus: Vec<u32>,
    pub figures: C2cFigures,
    /// Stop rule of one pair: its budget is the pair's, shared by the figures.
    pub rule: StopRule,
}

/// Whether the two threads of a pair ran where they were pinned.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairVerification {
    /// The CPUs asked for: `[a, b]`.
    pub requested: [u32; 2],
    /// CPUs each thread saw itself on (start and end of every phase), deduplicated.
    pub seen: [Vec<u32>; 2],
    pub verified: bool,
}

/// False-sharing figures of a pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FalseSharing {
    /// ns per atomic increment, both words in one line (the slower thread).
    pub shared_line_ns: Figure,
    /// ns per atomic increment, words on separate lines.
    pub separate_lines_ns: Figure,
    /// `shared_line_ns.median / separate_lines_ns.median` (NaN, `null`, when
    /// the latter is not positive).
    #[serde(deserialize_with = "f64_or_nan")]
    pub ratio: f64,
}

/// One pair of CPUs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairResult {
    /// `[a, b]`, `a` before `b` in the matrix order.
    pub cpus: [u32; 2],
    pub nodes: [u32; 2],
    /// One-way latency of a modified line, ns.
    pub modified_ns: Option<Figure>,
    /// Reader `a`, owner `b`: ns per load of a clean line held by `b`.
    pub clean_ab_ns: Option<Figure>,
    /// Reader `b`, owner `a`.
    pub clean_ba_ns: Option<Figure>,
    pub false_sharing: Option<FalseSharing>,
    /// Samples taken per figure, in the order modified, clean a<-b, clean b<-a,
    /// false sharing shared, separate (0 when not measured).
    pub samples: [usize; 5],
    pub verification: PairVerification,
    pub warnings: Vec<String>,
}

/// Medians of the pairs between two nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodePairSummary {
    /// `[p, q]` with `p <= q`; `p == q` is "within the node".
    pub nodes: [u32; 2],
    /// Pairs of distinct CPUs between (or within) the nodes.
    pub pairs: usize,
    pub modified_ns: Option<f64>,
    pub modified_cycles: Option<f64>,
    /// Both directions pooled.
    pub clean_ns: Option<f64>,
    pub clean_cycles: Option<f64>,
    pub false_sharing_ns: Option<f64>,
    pub false_sharing_ratio: Option<f64>,
}

/// A CPU x CPU matrix of medians in the order of [`C2cResult::cpus`]:
/// `rows[i][j]`; the diagonal is `None` (not measured).
pub type CpuMatrix = Vec<Vec<Option<f64>>>;

/// The matrices of the result (`None` when the figure was not measured).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct C2cMatrices {
    pub modified_ns: Option<CpuMatrix>,
    pub modified_cycles: Option<CpuMatrix>,
    /// Row = reader, column = owner.
    pub clean_ns: Option<CpuMatrix>,
    pub clean_cycles: Option<CpuMatrix>,
    /// ns per increment with both words in one line.
    pub false_sharing_ns: Option<CpuMatrix>,
    /// Shared line / separate lines.
    pub false_sharing_ratio: Option<CpuMatrix>,
}

/// Whole-run placement proof.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct C2cVerification {
    pub verified: bool,
    pub problems: Vec<String>,
}

/// The outcome of [`run_c2c`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct C2cResult {
    /// CPUs in matrix order: by node, then id.
    pub cpus: Vec<u32>,
    /// Node of each CPU of `cpus`.
    pub nodes: Vec<u32>,
    pub figures: C2cFigures,
    /// Core clock used for the cycle figures (0 when it could not be measured).
    #[serde(deserialize_with = "f64_or_nan")]
    pub core_ghz: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub budget_per_pair_s: f64,
    /// Pairs of distinct CPUs measured (each unordered pair once).
    pub pair_count: usize,
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
    pub matrices: C2cMatrices,
    pub node_summary: Vec<NodePairSummary>,
    pub pairs: Vec<PairResult>,
    pub verification: C2cVerification,
    pub warnings: Vec<String>,
}

/// Number of pairs `n` CPUs give.
pub fn pair_count(n: usize) -> usize {
    n * n.saturating_sub(1) / 2
}

/// The matrix order: CPUs sorted by node, then id; error for a CPU without node.
pub fn matrix_order(m: &Machine, cpus: &[u32]) -> Result<Vec<(u32, u32)>, PlacementError> {
    let mut v = Vec::with_capacity(cpus.len());
    for &c in cpus {
        let n = m.node_of_cpu(c).ok_or_else(|| {
            PlacementError::Invalid(format!("CPU {c} belongs to no NUMA node of this machine"))
        })?;
        v.push((n, c));
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// Measures every pair of `req.cpus`; `progress` is called before each pair.
pub fn run_c2c(
    m: &Machine,
    req: &C2cRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<C2cResult, PlacementError> {
    let order = matrix_order(m, &req.cpus)?;
    if order.len() < 2 {
        return Err(PlacementError::Invalid(format!(
            "c2c needs at least two CPUs, got {}",
            order.len()
        )));
    }
    let start = Instant::now();
    let ghz = core_ghz();
    let cpus: Vec<u32> = order.iter().map(|x| x.1).collect();
    let nodes: Vec<u32> = order.iter().map(|x| x.0).collect();
    let pairs = measure_pairs(m, req, (&cpus, &nodes), progress)?;
    let matrices = matrices_of(req.figures, &cpus, &pairs, ghz);
    let node_summary = summarize_nodes(&nodes, &pairs, ghz);
    let (verification, warnings) = verify_pairs(req.figures, &pairs);
    Ok(C2cResult {
        cpus,
        nodes,
        figures: req.figures,
        core_ghz: ghz,
        budget_per_pair_s: req.rule.budget.as_secs_f64(),
        pair_count: pairs.len(),
        elapsed_s: start.elapsed().as_secs_f64(),
        matrices,
        node_summary,
        pairs,
        verification,
        warnings,
    })
}

/// Every pair of distinct CPUs once, `a` before `b` in matrix order, until
/// all are measured or a cancel came (the pair in progress finishes).
fn measure_pairs(
    m: &Machine,
    req: &C2cRequest,
    (cpus, nodes): (&[u32], &[u32]),
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<PairResult>, PlacementError> {
    let mut pairs = Vec::new();
    for i in 0..cpus.len() {
        for j in i + 1..cpus.len() {
            if cancel::requested() {
                return Ok(pairs);
            }
            progress(&format!("c2c CPU {} <-> CPU {}", cpus[i], cpus[j]));
            let mut p = measure_pair(m, [cpus[i], cpus[j]], req)?;
            p.nodes = [nodes[i], nodes[j]];
            pairs.push(p);
        }
    }
    Ok(pairs)
}

/// The CPU x CPU matrices of the figures measured (symmetric ones filled
/// both ways; clean: row = reader), with their cycle versions when the
/// clock is known.
fn matrices_of(f: C2cFigures, cpus: &[u32], pairs: &[PairResult], ghz: f64) -> C2cMatrices {
    let n = cpus.len();
    let idx = |c: u32| cpus.iter().position(|x| *x == c).unwrap_or(0);
    let mut mats: [CpuMatrix; 4] = std::array::from_fn(|_| vec![vec![None; n]; n]);
    for p in pairs {
        let (i, j) = (idx(p.cpus[0]), idx(p.cpus[1]));
        if let Some(f) = &p.modified_ns {
            mats[0][i][j] = Some(f.median);
            mats[0][j][i] = Some(f.median);
        }
        if let Some(f) = &p.clean_ab_ns {
            mats[1][i][j] = Some(f.median);
        }
        if let Some(f) = &p.clean_ba_ns {
            mats[1][j][i] = Some(f.median);
        }
        if let Some(fs) = &p.false_sharing {
            mats[2][i][j] = Some(fs.shared_line_ns.median);
            mats[2][j][i] = Some(fs.shared_line_ns.median);
            mats[3][i][j] = Some(fs.ratio);
            mats[3][j][i] = Some(fs.ratio);
        }
    }
    let cycles = |mx: &CpuMatrix| -> Option<CpuMatrix> {
        (ghz > 0.0).then(|| {
            mx.iter()
                .map(|r| r.iter().map(|v| v.map(|x| x * ghz)).collect())
                .collect()
        })
    };
    let clean_ok = f.clean && clean_supported();
    let [mod_ns, clean_ns, fs_ns, fs_ratio] = mats;
    C2cMatrices {
        modified_cycles: if f.modified { cycles(&mod_ns) } else { None },
        modified_ns: f.modified.then_some(mod_ns),
        clean_cycles: if clean_ok { cycles(&clean_ns) } else { None },
        clean_ns: clean_ok.then_some(clean_ns),
        false_sharing_ns: f.false_sharing.then_some(fs_ns),
        false_sharing_ratio: f.false_sharing.then_some(fs_ratio),
    }
}

/// The whole run's placement proof (every thread seen only where it was
/// pinned) and its warnings: the clean figure unavailable here, each
/// pair's own, the cancel.
fn verify_pairs(f: C2cFigures, pairs: &[PairResult]) -> (C2cVerification, Vec<String>) {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    if f.clean && !clean_supported() {
        warnings.push(format!(
            "the clean-line figure needs a cache-flush instruction (x86-64 clflush, aarch64 dc civac); not measured on {}",
            std::env::consts::ARCH
        ));
    }
    for p in pairs {
        let v = &p.verification;
        for k in 0..2 {
            if v.seen[k].iter().any(|c| *c != v.requested[k]) {
                problems.push(format!(
                    "pair {}-{}: thread pinned to CPU {} was seen on CPU(s) {:?}",
                    p.cpus[0], p.cpus[1], v.requested[k], v.seen[k]
                ));
            }
        }
        warnings.extend(p.warnings.iter().cloned());
    }
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    let verification = C2cVerification {
        verified: problems.is_empty(),
        problems,
    };
    (verification, warnings)
}

/// Per node pair (p <= q), the medians of the pair figures.
fn summarize_nodes(nodes: &[u32], pairs: &[PairResult], ghz: f64) -> Vec<NodePairSummary> {
    let mut ids: Vec<u32> = nodes.to_vec();
    ids.dedup();
    let mut out = Vec::new();
    for (x, &p) in ids.iter().enumerate() {
        for &q in &ids[x..] {
            let sel: Vec<&PairResult> = pairs
                .iter()
                .filter(|r| {
                    let [u, v] = r.nodes;
                    (u, v) == (p, q) || (u, v) == (q, p)
                })
                .collect();
            if sel.is_empty() {
                // A node with one CPU has no pair within itself.
                if p == q {
                    out.push(NodePairSummary {
                        nodes: [p, q],
                        pairs: 0,
                        modified_ns: None,
                        modified_cycles: None,
                        clean_ns: None,
                        clean_cycles: None,
                        false_sharing_ns: None,
                        false_sharing_ratio: None,
                    });
                }
                continue;
            }
            let modified: Vec<f64> = sel
                .iter()
                .filter_map(|r| r.modified_ns.as_ref().map(|f| f.median))
                .collect();
            let clean: Vec<f64> = sel
                .iter()
                .flat_map(|r| [&r.clean_ab_ns, &r.clean_ba_ns])
                .filter_map(|f| f.as_ref().map(|f| f.median))
                .collect();
            let fs: Vec<f64> = sel
                .iter()
                .filter_map(|r| r.false_sharing.as_ref().map(|f| f.shared_line_ns.median))
                .collect();
            let fr: Vec<f64> = sel
                .iter()
                .filter_map(|r| r.false_sharing.as_ref().map(|f| f.ratio))
                .collect();
            let cyc = |v: Option<f64>| v.filter(|_| ghz > 0.0).map(|x| x * ghz);
            let modified_ns = median(modified);
            let clean_ns = median(clean);
            out.push(NodePairSummary {
                nodes: [p, q],
                pairs: sel.len(),
                modified_ns,
                modified_cycles: cyc(modified_ns),
                clean_ns,
                clean_cycles: cyc(clean_ns),
                false_sharing_ns: median(fs),
                false_sharing_ratio: median(fr),
            });
        }
    }
    out
}

/// Budget shares of the figures (modified, clean per direction, false sharing per layout).
const SHARE: [f64; 5] = [0.30, 0.20, 0.20, 0.15, 0.15];

/// Measures the figures of one pair, each under its share of the pair's
/// budget; stops early (figures left `None`) on cancel.
fn measure_pair(
    m: &Machine,
    cpus: [u32; 2],
    req: &C2cRequest,
) -> Result<PairResult, PlacementError> {
    let f = req.figures;
    let clean = f.clean && clean_supported();
    let rules = budget_rules(
        &req.rule,
        [f.modified, clean, clean, f.false_sharing, f.false_sharing],
    );
    let mut log = PairLog::new(cpus);
    let mut modified_ns = None;
    if f.modified {
        let r = measure_modified(m, cpus, &rules[0])?;
        modified_ns = Some(log.note(0, "modified", r, false));
    }
    let (mut clean_ab_ns, mut clean_ba_ns) = (None, None);
    if clean && !cancel::requested() {
        let r = measure_clean(m, cpus[0], cpus[1], &rules[1])?;
        clean_ab_ns = Some(log.note(1, "clean", r, false));
        if !cancel::requested() {
            let r = measure_clean(m, cpus[1], cpus[0], &rules[2])?;
            clean_ba_ns = Some(log.note(2, "clean", r, true));
        }
    }
    let mut false_sharing = None;
    if f.false_sharing && !cancel::requested() {
        let r = measure_false_sharing(m, cpus, &rules[3], true)?;
        let sh = log.note(3, "false sharing", r, false);
        // Both layouts or neither: the figure is their ratio.
        let r = measure_false_sharing(m, cpus, &rules[4], false)?;
        let se = log.note(4, "separate lines", r, false);
        false_sharing = Some(FalseSharing {
            ratio: if se.median > 0.0 {
                sh.median / se.median
            } else {
                f64::NAN
            },
            shared_line_ns: sh,
            separate_lines_ns: se,
        });
    }
    let (verification, samples, warnings) = log.finish();
    Ok(PairResult {
        cpus,
        nodes: [0, 0],
        modified_ns,
        clean_ab_ns,
        clean_ba_ns,
        false_sharing,
        samples,
        verification,
        warnings,
    })
}

/// Each figure's stop rule (in the order of [`SHARE`]): the pair's budget
/// shared by the figures measured (`on`), in proportion to their shares.
fn budget_rules(rule: &StopRule, on: [bool; 5]) -> [StopRule; 5] {
    let total: f64 = SHARE
        .iter()
        .zip(on)
        .filter(|(_, o)| *o)
        .map(|(s, _)| s)
        .sum();
    std::array::from_fn(|k| {
        let mut r = rule.clone();
        r.budget = rule.budget.mul_f64(SHARE[k] / total.max(1e-9));
        r
    })
}

/// What the measurements of one pair have shown so far: where its threads
/// were seen, the samples of each figure, the warnings.
struct PairLog {
    cpus: [u32; 2],
    seen: Seen,
    samples: [usize; 5],
    warnings: Vec<String>,
}

impl PairLog {
    fn new(cpus: [u32; 2]) -> Self {
        PairLog {
            cpus,
            seen: [Vec::new(), Vec::new()],
            samples: [0; 5],
            warnings: Vec::new(),
        }
    }

    /// Notes the measurement of figure `k` (its index in `samples`), taken
    /// with the pair's CPUs the other way round when `swap`; returns its figure.
    fn note(
        &mut self,
        k: usize,
        what: &str,
        (meas, seen): (Measurement, Seen),
        swap: bool,
    ) -> Figure {
        let (x, y) = if swap { (1, 0) } else { (0, 1) };
        self.seen[x].extend(&seen[0]);
        self.seen[y].extend(&seen[1]);
        let label = format!("pair {}-{}", self.cpus[0], self.cpus[1]);
        for w in meas.warnings() {
            self.warnings.push(format!("{label} {what}: {w}"));
        }
        self.samples[k] = meas.samples.len();
        Figure::of(&meas.summary, Better::Lower, 1.0)
    }

    /// The pair's verification (each thread seen only on its own CPU), its
    /// samples per figure and its warnings.
    fn finish(mut self) -> (PairVerification, [usize; 5], Vec<String>) {
        for s in self.seen.iter_mut() {
            s.sort_unstable();
            s.dedup();
        }
        let verified = self.seen[0].iter().all(|c| *c == self.cpus[0])
            && self.seen[1].iter().all(|c| *c == self.cpus[1]);
        let verification = PairVerification {
            requested: self.cpus,
            seen: self.seen,
            verified,
        };
        (verification, self.samples, self.warnings)
    }
}

/// An atomic on its own 128-byte block (two lines: the adjacent-line
/// prefetcher pairs lines by 128 bytes).
#[repr(align(128))]
struct Padded<T>(T);

/// Spins until `a` is nonzero and returns it.
fn wait_nonzero(a: &AtomicU8) -> u8 {
    loop {
        let v = a.load(Ordering::Acquire);
        if v != 0 {
            return v;
        }
        std::hint::spin_loop();
    }
}

/// Sets `stop` when dropped, so a follower never spins forever.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Runs `driver` on a thread pinned to `cpus[0]` and `follower` on one
/// pinned to `cpus[1]`; the follower gets a flag set once the driver is
/// done. Returns the driver's value and the CPUs each thread saw itself on.
fn run_on_pair<R: Send>(
    cpus: [u32; 2],
    driver: impl FnOnce() -> R + Send,
    follower: impl FnOnce(&AtomicBool) + Send,
) -> Result<(R, [Vec<u32>; 2]), PlacementError> {
    let ready = [AtomicU8::new(0), AtomicU8::new(0)];
    let stop = AtomicBool::new(false);
    let (ready, stop) = (&ready, &stop);
    std::thread::scope(|s| {
        let d = sys::spawn_scoped(
            s,
            "a c2c thread",
            move || -> Result<(Option<R>, Vec<u32>), PlacementError> {
                let _guard = StopOnDrop(stop);
                let pinned = pin_current_thread(cpus[0]);
                ready[0].store(if pinned.is_ok() { 1 } else { 2 }, Ordering::Release);
                let other = wait_nonzero(&ready[1]);
                pinned?;
                if other != 1 {
                    return Ok((None, Vec::new()));
                }
                let mut seen: Vec<u32> = sys::current_cpu().into_iter().collect();
                let r = driver();
                seen.extend(sys::current_cpu());
                Ok((Some(r), seen))
            },
        )?;
        let f = sys::spawn_scoped(
            s,
            "a c2c thread",
            move || -> Result<Vec<u32>, PlacementError> {
                let pinned = pin_current_thread(cpus[1]);
                ready[1].store(if pinned.is_ok() { 1 } else { 2 }, Ordering::Release);
                let other = wait_nonzero(&ready[0]);
                pinned?;
                if other != 1 {
                    return Ok(Vec::new());
                }
                let mut seen: Vec<u32> = sys::current_cpu().into_iter().collect();
                follower(stop);
                seen.extend(sys::current_cpu());
                Ok(seen)
            },
        );
        // The driver waits for its partner's start: told it never came.
        let f = f.inspect_err(|_| ready[1].store(2, Ordering::Release))?;
        let panicked = || PlacementError::Os("a c2c thread panicked".into());
        let dr = d.join().map_err(|_| panicked())?;
        let fr = f.join().map_err(|_| panicked())?;
        let (r, seen_d) = dr?;
        let seen_f = fr?;
        let r = r.ok_or_else(|| PlacementError::Os("the partner thread failed to start".into()))?;
        Ok((r, [seen_d, seen_f]))
    })
}

/// One page in memory local to `cpu`, first touched there.
fn page_local_to(m: &Machine, cpu: u32, bytes: usize) -> Result<PlacedBuffer, PlacementError> {
    PlacedBuffer::new(
        m,
        &BufferSpec {
            size: bytes,
            policy: MemoryPolicy::Local,
            thp: Some(crate::placement::Thp::Off),
            hugetlb: false,
            toucher: Some(cpu),
            weighted: Default::default(),
        },
    )
}

/// Repetitions so that a sample lasts about `target` given `per_unit` ns each.
fn reps_for(per_unit_ns: f64, target: Duration, lo: u64, hi: u64) -> u64 {
    ((target.as_secs_f64() * 1e9 / per_unit_ns.max(0.1)) as u64).clamp(lo, hi)
}

/// Length of one sample for a figure with this budget: a hundredth of it,
/// 20 to 250 us. Short samples rarely straddle a preemption (on a busy
/// machine the other thread of the pair may be off its CPU for
/// milliseconds), and the median ignores the few that do.
fn sample_target(rule: &StopRule) -> Duration {
    Duration::from_secs_f64((rule.budget.as_secs_f64() / 100.0).clamp(20e-6, 250e-6))
}

type Seen = [Vec<u32>; 2];

fn measure_modified(
    m: &Machine,
    cpus: [u32; 2],
    rule: &StopRule,
) -> Result<(Measurement, Seen), PlacementError> {
    let mut buf = page_local_to(m, cpus[0], 4096)?;
    let flag = &buf.as_atomics()[0];
    flag.store(0, Ordering::Release);
    let target = sample_target(rule);
    run_on_pair(
        cpus,
        || {
            let mut v = 0u64;
            let mut trips = |n: u64| -> f64 {
                let t0 = Instant::now();
                for _ in 0..n {
                    flag.store(v + 1, Ordering::Release);
                    v += 2;
                    while flag.load(Ordering::Acquire) != v {}
                }
                t0.elapsed().as_secs_f64() * 1e9 / (2 * n) as f64
            };
            let one_way = trips(64);
            let n = reps_for(2.0 * one_way, target, 16, 1 << 24);
            measure(rule, || trips(n))
        },
        |stop| {
            let mut expect = 1u64;
            loop {
                let x = flag.load(Ordering::Acquire);
                if x == expect {
                    flag.store(x + 1, Ordering::Release);
                    expect += 2;
                } else if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        },
    )
}

/// True where the clean-line figure can be measured.
pub fn clean_supported() -> bool {
    crate::sys::cache::FLUSH_SUPPORTED
}

/// Follows `steps` links of a chain of word indices from word `at`.
#[inline(always)]
fn follow(words: &[AtomicU64], mut at: usize, steps: usize) -> usize {
    for _ in 0..steps {
        // Relaxed: a plain load each step, which the next one depends on.
        at = words[at].load(Ordering::Relaxed) as usize;
    }
    at
}

/// Median cost of reading the clock twice, in ns (subtracted from short timings).
fn timer_overhead_ns() -> f64 {
    let v: Vec<f64> = (0..201)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(&t);
            t.elapsed().as_secs_f64() * 1e9
        })
        .collect();
    median(v).unwrap_or(0.0)
}

/// The order in which the reader follows the clean lines: a random cycle,
/// seeded by the pair (the same pair always gets the same order).
fn clean_order(reader: u32, owner: u32) -> Vec<usize> {
    let mut order: Vec<usize> = (0..CLEAN_LINES).collect();
    let mut rng = SplitMix64::new(0x9e37_79b9_7f4a_7c15 ^ ((reader as u64) << 32 | owner as u64));
    // A modulo draw, not `below`: the orders stay those of earlier versions.
    for i in (1..order.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

fn measure_clean(
    m: &Machine,
    reader: u32,
    owner: u32,
    rule: &StopRule,
) -> Result<(Measurement, Seen), PlacementError> {
    const PAGE: usize = 4096;
    let mut buf = page_local_to(m, owner, CLEAN_LINES * PAGE)?;
    let words = buf.as_atomics();
    // The word index of line k: one line a page, at a different offset in
    // each page so that the lines spread over the cache's sets.
    let line = |k: usize| (k * PAGE + (k % (PAGE / 64)) * 64) / 8;
    let order = clean_order(reader, owner);
    for i in 0..CLEAN_LINES {
        let next = line(order[(i + 1) % CLEAN_LINES]);
        words[line(order[i])].store(next as u64, Ordering::Relaxed);
    }
    let head = line(order[0]);
    let lines: Vec<&AtomicU64> = (0..CLEAN_LINES).map(|k| &words[line(k)]).collect();
    let cmd = Padded(AtomicU64::new(0));
    let ack = Padded(AtomicU64::new(0));
    let overhead = timer_overhead_ns();
    run_on_pair(
        [reader, owner],
        || {
            let mut round = 0u64;
            measure(rule, || {
                round += 1;
                cmd.0.store(round, Ordering::Release);
                while ack.0.load(Ordering::Acquire) != round {}
                let t0 = Instant::now();
                let p = follow(words, head, CLEAN_LINES);
                let ns = t0.elapsed().as_secs_f64() * 1e9;
                std::hint::black_box(p);
                (ns - overhead).max(0.0) / CLEAN_LINES as f64
            })
        },
        |stop| {
            let mut done = 0u64;
            loop {
                let c = cmd.0.load(Ordering::Acquire);
                if c != done {
                    for l in &lines {
                        crate::sys::cache::flush_line(*l);
                    }
                    crate::sys::cache::flush_fence();
                    std::hint::black_box(follow(words, head, CLEAN_LINES));
                    // Release: the loads above are done before the reader starts.
                    ack.0.store(c, Ordering::Release);
                    done = c;
                } else if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        },
    )
}

fn measure_false_sharing(
    m: &Machine,
    cpus: [u32; 2],
    rule: &StopRule,
    shared: bool,
) -> Result<(Measurement, Seen), PlacementError> {
    let mut buf = page_local_to(m, cpus[0], 4096)?;
    let words = buf.as_atomics();
    // One line for both, or half a page apart.
    let a = &words[0];
    let b = &words[if shared { 1 } else { 2048 / 8 }];
    let go = Padded(AtomicU64::new(0));
    let count = Padded(AtomicU64::new(0));
    let started = Padded(AtomicU64::new(0));
    let done = Padded(AtomicU64::new(0));
    let their_ns = Padded(AtomicU64::new(0));
    let target = sample_target(rule);
    run_on_pair(
        cpus,
        || {
            let mut round = 0u64;
            let mut run = |n: u64| -> f64 {
                round += 1;
                count.0.store(n, Ordering::Relaxed);
                go.0.store(round, Ordering::Release);
                // Start together: both threads must be on their CPUs at once.
                while started.0.load(Ordering::Acquire) != round {}
                let t0 = Instant::now();
                for _ in 0..n {
                    a.fetch_add(1, Ordering::Relaxed);
                }
                let mine = t0.elapsed().as_secs_f64() * 1e9;
                while done.0.load(Ordering::Acquire) != round {}
                let theirs = f64::from_bits(their_ns.0.load(Ordering::Acquire));
                mine.max(theirs) / n as f64
            };
            let per = run(256);
            let n = reps_for(per, target, 64, 1 << 24);
            measure(rule, || run(n))
        },
        |stop| {
            let mut last = 0u64;
            loop {
                let g = go.0.load(Ordering::Acquire);
                if g != last {
                    let n = count.0.load(Ordering::Relaxed);
                    started.0.store(g, Ordering::Release);
                    let t0 = Instant::now();
                    for _ in 0..n {
                        b.fetch_add(1, Ordering::Relaxed);
                    }
                    let ns = t0.elapsed().as_secs_f64() * 1e9;
                    their_ns.0.store(ns.to_bits(), Ordering::Release);
                    done.0.store(g, Ordering::Release);
                    last = g;
                } else if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_parse() {
        assert_eq!(C2cFigures::parse("all").unwrap(), C2cFigures::default());
        let f = C2cFigures::parse("modified, clean").unwrap();
        assert!(f.modified && f.clean && !f.false_sharing);
        assert!(C2cFigures::parse("dirty")
            .unwrap_err()
            .contains("valid: modified"));
    }

    #[test]
    fn clean_orders_are_pinned() {
        // Each pair's order must never change between versions.
        assert_eq!(
            clean_order(0, 1)[..12],
            [34, 31, 43, 7, 12, 8, 20, 5, 24, 35, 17, 16]
        );
        assert_eq!(
            clean_order(3, 2)[..12],
            [58, 1, 12, 21, 41, 63, 14, 18, 16, 15, 52, 0]
        );
        let mut all = clean_order(5, 9);
        all.sort_unstable();
        assert_eq!(all, (0..CLEAN_LINES).collect::<Vec<_>>());
    }

    #[test]
    fn pair_counts() {
        assert_eq!(pair_count(2), 1);
        assert_eq!(pair_count(8), 28);
        assert_eq!(pair_count(64), 2016);
        assert_eq!(pair_count(1), 0);
    }
}
