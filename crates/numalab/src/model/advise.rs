//! `numalab advise`: the placement to use for a workload of a given shape,
//! predicted by the model (docs/advise.md).
//!
//! A workload is threads and data regions: who accesses which region, how
//! much of it is written ([`Workload`], from a shape or a profile). A
//! placement is a thread order (which CPU each thread is pinned to) and a
//! layout per region (where its pages go: first touch, interleave, bind,
//! weighted interleave). Each candidate placement becomes one [`Flow`] per
//! thread (its lines spread over the nodes by the pages it sees, its
//! written share), the model predicts each thread's rate, and the
//! candidate's time is the makespan of one pass over the data: every
//! thread does its share of the accesses, the slowest finishes last. The
//! best candidate, the runner-up and the OS default (threads where the
//! scheduler spreads them, pages where first touch puts them) are compared
//! by that time.
//!
//! [`verify`] runs the best placement and the default as a synthetic
//! workload of the same shape with the measuring harness and compares
//! measured and predicted gains.

use super::network::{Flow, Network, Prediction};
use crate::machine::Machine;
use crate::measure::compare::{rank_compare, RankComparison, Verdict, RULE};
use crate::measure::harness::{
    run_bandwidth_with, Aggregate, BandwidthRequest, BandwidthResult, RunOptions, WorkerPlan,
};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::{StopRule, Summary};
use crate::placement::thread_policy::{compact_order, scatter_order};
use crate::placement::{MemoryPolicy, PlacementError};
use crate::profile::plan::{Plan, PlanEntry, SCHEMA as PLAN_SCHEMA};
use crate::profile::Profile;
use crate::text::format;
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Candidates whose predicted times differ by less than this (relative)
/// are taken as equal: the simpler one (earlier in [`Layout`]'s order, no
/// code change) is recommended. The model's own convergence is far finer;
/// this keeps a 0.1% "win" from choosing a placement that needs more.
pub const TIE: f64 = 0.005;

/// Most regions a workload may have (a profile's sampled regions).
pub const MAX_REGIONS: usize = 64;

/// Most data a workload may describe: 1 PiB keeps every sum exact in f64
/// and is far above any one machine's memory.
pub const MAX_DATA_BYTES: u64 = 1 << 50;

/// How the threads of a workload share its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sharing {
    /// Each thread has its own slice and touches nothing else.
    Independent,
    /// Every thread accesses all of the data, evenly.
    Shared,
    /// Threads in pairs (0 and 1, 2 and 3, ...); each pair shares its own
    /// buffer, which the first of the pair (the producer) touches first.
    ProducerConsumer,
}

impl Sharing {
    pub const ALL: [Sharing; 3] = [
        Sharing::Independent,
        Sharing::Shared,
        Sharing::ProducerConsumer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Sharing::Independent => "independent",
            Sharing::Shared => "shared",
            Sharing::ProducerConsumer => "producer-consumer",
        }
    }

    /// A sharing by name; the error lists the valid ones.
    pub fn parse(text: &str) -> Result<Sharing, String> {
        let t = text.trim();
        Sharing::ALL
            .into_iter()
            .find(|s| s.name() == t)
            .or(match t {
                "private" => Some(Sharing::Independent),
                "pairs" | "pipeline" => Some(Sharing::ProducerConsumer),
                _ => None,
            })
            .ok_or_else(|| {
                format!(
                    "unknown sharing '{}'; valid: independent, shared, producer-consumer",
                    format::excerpt(t, 40)
                )
            })
    }

    /// The written share when `--rw` is not given: a producer writes what
    /// its consumer reads (half the pair's lines), the others read.
    pub fn default_write_share(self) -> f64 {
        match self {
            Sharing::ProducerConsumer => 0.5,
            _ => 0.0,
        }
    }
}

/// The written share of `R:W` (reads to writes: `1:0` reads only, `3:1`,
/// `1:1`, `0:1` writes only).
pub fn parse_rw(text: &str) -> Result<f64, String> {
    let bad = || {
        format!(
            "'{}' is not a read:write ratio; valid: R:W with numbers 0 or more, not both 0, e.g. 1:0 (reads only), 3:1, 1:1, 0:1 (writes only)",
            format::excerpt(text, 40)
        )
    };
    let (r, w) = text.trim().split_once(':').ok_or_else(bad)?;
    let num = |s: &str| -> Result<f64, String> {
        let v: f64 = s.trim().parse().map_err(|_| bad())?;
        if v.is_finite() && (0.0..=1e6).contains(&v) {
            Ok(v)
        } else {
            Err(bad())
        }
    };
    let (r, w) = (num(r)?, num(w)?);
    if r + w <= 0.0 {
        return Err(bad());
    }
    Ok(w / (r + w))
}

/// A workload given by its shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    pub threads: usize,
    pub sharing: Sharing,
    /// All the data together, bytes.
    pub data_bytes: u64,
    /// Share of the accessed lines written (0 reads only, 1 writes only).
    pub write_share: f64,
}

/// Who accesses a region, and how much a pass over the data accesses of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Access {
    /// Each thread its own equal slice.
    Private,
    /// Every thread all of it, each an equal share of the accesses.
    AllThreads,
    /// Threads 2i and 2i+1 share slice i, each half of its accesses.
    Pairs,
    /// Bytes each thread accesses in one pass (from a profile's samples),
    /// in thread order.
    Threads { bytes: Vec<f64> },
}

/// One data region of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Region {
    /// How text names it: `data`, a profile's allocation site.
    pub name: String,
    /// The `--regions` term that selects it in a plan (profiles only).
    pub selector: Option<String>,
    pub bytes: u64,
    pub write_share: f64,
    pub access: Access,
    /// Profiles: the threads that first touched its pages (thread index,
    /// weight), which first touch follows when threads move.
    #[serde(default)]
    pub first_touchers: Vec<(usize, f64)>,
    /// Profiles: where its pages were (node, share).
    #[serde(default)]
    pub found: Vec<(u32, f64)>,
    /// Profiles: the share of each thread's accesses that were local as
    /// profiled (thread order; `None` where the profile has none). Under
    /// first touch a thread keeps that share local wherever it is pinned:
    /// the pages it touched itself follow it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_shares: Vec<Option<f64>>,
}

/// Threads and data regions: what advise places.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// The workload in words, for the report.
    pub description: String,
    pub threads: usize,
    /// The shape it was made from, if any (a profile has none).
    pub shape: Option<Shape>,
    pub regions: Vec<Region>,
    /// Profiles: the CPU each thread was seen on first, in thread order,
    /// for the "as profiled" placement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiled_cpus: Vec<Option<u32>>,
    /// The profiled program, for the command lines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub program: Vec<String>,
}

impl Workload {
    /// The workload of a shape: one region, `data_bytes` long, accessed
    /// as `sharing` says.
    pub fn from_shape(shape: &Shape) -> Result<Workload, String> {
        if shape.threads == 0 || shape.threads > super::network::MAX_FLOWS {
            return Err(format!(
                "--threads {}: valid: 1 to {}",
                shape.threads,
                super::network::MAX_FLOWS
            ));
        }
        if shape.sharing == Sharing::ProducerConsumer && shape.threads % 2 == 1 {
            return Err(format!(
                "--threads {}: producer-consumer places threads in pairs; give an even number",
                shape.threads
            ));
        }
        if shape.data_bytes == 0 || shape.data_bytes > MAX_DATA_BYTES {
            return Err(format!(
                "--data {}: valid: above 0, at most {}",
                shape.data_bytes,
                format::bytes(MAX_DATA_BYTES)
            ));
        }
        if !(0.0..=1.0).contains(&shape.write_share) {
            return Err(format!(
                "the written share {} is outside 0 to 1",
                shape.write_share
            ));
        }
        let access = match shape.sharing {
            Sharing::Independent => Access::Private,
            Sharing::Shared => Access::AllThreads,
            Sharing::ProducerConsumer => Access::Pairs,
        };
        let what = match shape.sharing {
            Sharing::Independent => "each thread its own slice",
            Sharing::Shared => "every thread accesses all of it",
            Sharing::ProducerConsumer => {
                "threads in pairs, each pair sharing a buffer its producer touches first"
            }
        };
        Ok(Workload {
            description: format!(
                "{}, {} data ({what}), {} of {}, {} of the lines written",
                format::plural(shape.threads, "thread", "threads"),
                shape.sharing.name(),
                format::bytes(shape.data_bytes),
                if shape.sharing == Sharing::Independent {
                    "data in all"
                } else {
                    "data"
                },
                format::percent(shape.write_share)
            ),
            threads: shape.threads,
            shape: Some(shape.clone()),
            regions: vec![Region {
                name: "data".into(),
                selector: None,
                bytes: shape.data_bytes,
                write_share: shape.write_share,
                access,
                first_touchers: Vec::new(),
                found: Vec::new(),
                local_shares: Vec::new(),
            }],
            profiled_cpus: Vec::new(),
            program: Vec::new(),
        })
    }

    /// The workload a profile saw: its threads that accessed sampled
    /// regions (in creation order, the main thread first), and each
    /// sampled region with its bytes, its written share and each thread's
    /// share of its accesses. A pass accesses each region in proportion to
    /// its samples, scaled so that the whole pass touches as many bytes as
    /// the regions hold.
    pub fn from_profile(p: &Profile) -> Result<Workload, String> {
        // Threads in creation order (main first), those without an ordinal
        // after them by id: the order `--pin` pins them in.
        let mut threads: Vec<&crate::profile::ThreadProfile> = p.threads.iter().collect();
        threads.sort_by_key(|t| (t.ordinal.is_none(), t.ordinal, t.tid));
        let sampled: Vec<&crate::profile::RegionProfile> = p
            .regions
            .iter()
            .filter(|r| r.sampled && r.bytes > 0 && r.threads.values().any(|&k| k > 0))
            .collect();
        if sampled.is_empty() {
            return Err(
                "the profile has no sampled region that a thread accessed: nothing to place (profile longer, or with --min-bytes lower)"
                    .into(),
            );
        }
        // Only threads that accessed some sampled region are placed.
        let used: Vec<u32> = threads
            .iter()
            .map(|t| t.tid)
            .filter(|tid| {
                sampled
                    .iter()
                    .any(|r| r.threads.get(tid).is_some_and(|&k| k > 0))
            })
            .collect();
        if used.is_empty() {
            return Err(
                "no thread of the profile's thread list accessed a sampled region: nothing to place"
                    .into(),
            );
        }
        let index = |tid: u32| used.iter().position(|&t| t == tid);
        let mut regions: Vec<(f64, Region)> = Vec::new();
        let total_bytes: f64 = sampled.iter().map(|r| r.bytes as f64).sum();
        let total_samples: f64 = sampled
            .iter()
            .map(|r| r.threads.values().sum::<u64>() as f64)
            .sum();
        for r in &sampled {
            let mut per_thread = vec![0.0; used.len()];
            for (tid, &k) in &r.threads {
                if let Some(i) = index(*tid) {
                    per_thread[i] += k as f64;
                }
            }
            // Samples to bytes of one pass: the pass touches as many bytes
            // as all regions hold, shared out by samples.
            for v in &mut per_thread {
                *v *= total_bytes / total_samples;
            }
            let rw = r.reads + r.writes;
            let write_share = if rw > 0 {
                r.writes as f64 / rw as f64
            } else {
                0.0
            };
            let first_touchers = r
                .first_touch
                .as_ref()
                .map(|f| {
                    f.threads
                        .iter()
                        .filter_map(|(tid, &k)| index(*tid).map(|i| (i, k as f64)))
                        .filter(|&(_, k)| k > 0.0)
                        .collect()
                })
                .unwrap_or_default();
            let found = shares(
                r.pages_by_node
                    .iter()
                    .filter_map(|(&n, &k)| u32::try_from(n).ok().map(|n| (n, k as f64))),
            );
            // Each thread's local share as profiled: its own samples'
            // [placed, remote], else its node's row of the access matrix.
            let local_shares = used
                .iter()
                .map(|tid| {
                    if let Some(&[placed, remote]) = r.placed_by_thread.get(tid) {
                        if placed > 0 {
                            return Some(1.0 - remote as f64 / placed as f64);
                        }
                    }
                    let node = threads
                        .iter()
                        .find(|t| t.tid == *tid)
                        .and_then(|t| t.nodes.first().copied())?;
                    let row = r.accesses.get(&node)?;
                    let all: u64 = row.values().sum();
                    (all > 0).then(|| row.get(&node).copied().unwrap_or(0) as f64 / all as f64)
                })
                .collect();
            let samples: f64 = per_thread.iter().sum();
            regions.push((
                samples,
                Region {
                    name: format::excerpt(&r.site, 80),
                    selector: crate::profile::plan::selector(r),
                    bytes: r.bytes,
                    write_share,
                    access: Access::Threads { bytes: per_thread },
                    first_touchers,
                    found,
                    local_shares,
                },
            ));
        }
        // The most accessed regions first; the rest beyond the limit are
        // left where they are (they are the least accessed).
        regions.sort_by(|a, b| b.0.total_cmp(&a.0));
        let dropped = regions.len().saturating_sub(MAX_REGIONS);
        regions.truncate(MAX_REGIONS);
        let profiled_cpus = used
            .iter()
            .map(|tid| {
                threads
                    .iter()
                    .find(|t| t.tid == *tid)
                    .and_then(|t| t.cpus.first().copied())
            })
            .collect();
        Ok(Workload {
            description: format!(
                "the profile of {}: {}, {} sampled region{}{}",
                format::excerpt(&p.program.join(" "), 60),
                format::plural(used.len(), "thread", "threads"),
                regions.len(),
                format::s(regions.len()),
                if dropped > 0 {
                    format!(" (the {dropped} least accessed left out)")
                } else {
                    String::new()
                }
            ),
            threads: used.len(),
            shape: None,
            regions: regions.into_iter().map(|r| r.1).collect(),
            profiled_cpus,
            program: p.program.clone(),
        })
    }

    fn sharing(&self) -> Option<Sharing> {
        self.shape.as_ref().map(|s| s.sharing)
    }
}

/// Shares that sum to 1 of non-negative weights (zeros left out); empty
/// when all are zero.
fn shares(w: impl IntoIterator<Item = (u32, f64)>) -> Vec<(u32, f64)> {
    let mut acc: BTreeMap<u32, f64> = BTreeMap::new();
    for (n, x) in w {
        if x > 0.0 && x.is_finite() {
            *acc.entry(n).or_insert(0.0) += x;
        }
    }
    let total: f64 = acc.values().sum();
    if total <= 0.0 {
        return Vec::new();
    }
    acc.into_iter().map(|(n, x)| (n, x / total)).collect()
}

/// Which CPU each thread runs on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadOrder {
    /// `spread`, `compact`, `as profiled`, or `not pinned` (the default).
    pub name: String,
    /// Thread i's CPU, in thread order.
    pub cpus: Vec<u32>,
    /// Each thread's node.
    pub nodes: Vec<u32>,
    /// Whether the placement pins them (the default does not: the
    /// scheduler places them, modelled as spread).
    pub pinned: bool,
}

/// Where a region's pages go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Layout {
    /// The OS default: each page on the node of the thread that touches it
    /// first (the main thread for shared data, the producer for a pair's
    /// buffer, each thread for its own slice; a profile's first touchers).
    FirstTouch,
    /// Round robin page by page over `nodes`.
    Interleave { nodes: IdSet },
    /// Weighted round robin: `weight` pages on `node` in turn.
    Weighted { weights: Vec<(u32, u32)> },
    /// Every page on one node.
    Bind { node: u32 },
    /// Each thread first touches the slice it will use (a code change: the
    /// program initializes its data in parallel).
    ParallelInit,
}

impl Layout {
    /// The numalab memory policy (`numalab place --mem` syntax).
    pub fn policy(&self) -> String {
        match self {
            Layout::FirstTouch | Layout::ParallelInit => "first-touch".into(),
            Layout::Interleave { nodes } => format!("interleave:{nodes}"),
            Layout::Weighted { weights } => weighted_text(weights),
            Layout::Bind { node } => format!("bind:{node}"),
        }
    }

    /// Short words for tables: `first touch`, `interleave 0-3`.
    pub fn short(&self) -> String {
        match self {
            Layout::FirstTouch => "first touch".into(),
            Layout::Interleave { nodes } => format!("interleave {nodes}"),
            Layout::Weighted { weights } => format!(
                "weighted {}",
                weights
                    .iter()
                    .map(|(n, w)| format!("{n}={w}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Layout::Bind { node } => format!("bind {node}"),
            Layout::ParallelInit => "parallel first touch".into(),
        }
    }

    /// What the program must do for the layout to happen, beyond the
    /// command line.
    fn needs(&self) -> Option<&'static str> {
        match self {
            Layout::ParallelInit => Some(
                "the program must initialize the data in parallel: each thread first touches the part it will use (a code change)",
            ),
            _ => None,
        }
    }
}

fn weighted_text(w: &[(u32, u32)]) -> String {
    format!(
        "weighted:{}",
        w.iter()
            .map(|(n, w)| format!("{n}={w}"))
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// A region as one candidate places it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionPlacement {
    pub region: String,
    pub layout: Layout,
    /// The memory policy (numalab syntax).
    pub policy: String,
    /// Where its pages end up: (node, share of its bytes).
    pub pages: Vec<(u32, f64)>,
}

/// What the model predicts for a placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    /// Makespan of one pass over the data: the slowest thread's time for
    /// its share of the accesses, seconds.
    pub seconds: f64,
    /// All bytes a pass accesses over `seconds`, GB/s.
    pub gbps: f64,
    /// The thread that finishes last.
    pub slowest_thread: usize,
    /// The busiest resource and its utilisation.
    pub bottleneck: Option<String>,
    pub bottleneck_utilisation: Option<f64>,
}

/// The command lines that give a placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commands {
    /// `numalab run ... -- CMD`.
    pub numalab: String,
    /// `numactl ... CMD`, where numactl can express the placement.
    pub numactl: Option<String>,
    /// What numactl cannot do, or does differently.
    pub numactl_note: Option<String>,
    /// The plan `numalab run --plan` reads, when regions get different
    /// policies.
    pub plan: Option<Plan>,
}

/// One placement, predicted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// `spread, interleave 0-3`.
    pub name: String,
    pub threads: ThreadOrder,
    pub memory: Vec<RegionPlacement>,
    /// What the program itself must do (a code change), if anything.
    pub needs: Option<String>,
    /// `None` on a one-node machine without a model.
    pub predicted: Option<Predicted>,
    /// Time over the best's (1 for the best).
    pub vs_best: Option<f64>,
    /// The data fits where the placement puts it.
    pub fits: bool,
    pub problems: Vec<String>,
    pub commands: Commands,
}

/// How far the model's predictions can be trusted on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelTrust {
    /// Relative error of one predicted time (0.08 = 8%), from the
    /// calibration's check; `None`: not calibrated on this machine.
    pub relative_error: Option<f64>,
    /// Where the figure (or its absence) comes from, in words.
    pub basis: String,
}

/// The predicted gain over the default and how sure it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gain {
    /// Default's predicted time over the best's (1: no gain).
    pub ratio: f64,
    /// The interval the model's error allows: both predictions off by the
    /// relative error in opposite directions. `None` without a calibration.
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// `holds` (the whole interval above 1), `cannot tell`, or `not
    /// calibrated`.
    pub verdict: String,
    pub basis: String,
}

/// advise's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    pub workload: Workload,
    /// What the predicted time is.
    pub time_basis: String,
    /// The machine has one node: every placement is the same memory.
    pub single_node: bool,
    pub best: Candidate,
    pub runner_up: Option<Candidate>,
    pub default: Candidate,
    pub gain: Gain,
    /// Every distinct candidate, fastest first.
    pub candidates: Vec<Candidate>,
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

/// The words of [`Advice::time_basis`].
pub const TIME_BASIS: &str = "makespan of one pass over the data: each thread does its share of the accesses, the slowest thread finishes last";

/// Where the command lines put the program and the plan file.
#[derive(Debug, Clone)]
pub struct CommandContext {
    /// The program and its arguments (`CMD` when none was given).
    pub program: Vec<String>,
    /// The plan file the numalab command line names.
    pub plan_path: String,
}

/// What the layout of a region looks like to the machine and the threads.
struct Ctx<'a> {
    m: &'a Machine,
    /// Each thread's CPU node.
    nodes: Vec<u32>,
}

impl Ctx<'_> {
    /// Where first touch from `cpu_node` puts a page: that node, or the
    /// nearest node with memory where it has none.
    fn home(&self, cpu_node: u32) -> u32 {
        home_memory(self.m, cpu_node)
    }

    fn home_of(&self, t: usize) -> u32 {
        self.home(self.nodes[t])
    }
}

fn home_memory(m: &Machine, node: u32) -> u32 {
    let mem = m.memory_nodes();
    if mem.contains(node) {
        return node;
    }
    mem.iter()
        .min_by_key(|&n| (m.distance(node, n), n))
        .unwrap_or(node)
}

/// The page shares of a region a thread sees under a layout, and the
/// region's slices (bytes, page shares) for the capacity check.
fn thread_view(ctx: &Ctx, r: &Region, layout: &Layout, t: usize) -> Vec<(u32, f64)> {
    let threads = ctx.nodes.len();
    match layout {
        Layout::Interleave { nodes } => shares(nodes.iter().map(|n| (n, 1.0))),
        Layout::Weighted { weights } => shares(weights.iter().map(|&(n, w)| (n, w as f64))),
        Layout::Bind { node } => vec![(*node, 1.0)],
        Layout::FirstTouch => match &r.access {
            Access::Private => vec![(ctx.home_of(t), 1.0)],
            Access::AllThreads => vec![(ctx.home_of(0), 1.0)],
            Access::Pairs => vec![(ctx.home_of(t - t % 2), 1.0)],
            Access::Threads { .. } => first_touch_of(ctx, r, t),
        },
        Layout::ParallelInit => match &r.access {
            Access::Private => vec![(ctx.home_of(t), 1.0)],
            Access::AllThreads => shares((0..threads).map(|i| (ctx.home_of(i), 1.0))),
            Access::Pairs => {
                let p = t - t % 2;
                shares([(ctx.home_of(p), 1.0), (ctx.home_of(p + 1), 1.0)])
            }
            Access::Threads { bytes } => {
                shares(bytes.iter().enumerate().map(|(i, &b)| (ctx.home_of(i), b)))
            }
        },
    }
}

/// A profiled region under first touch, as thread `t` sees it: its
/// profiled local share on its own node (the pages it touched follow it
/// wherever it is pinned), the rest where the region's other pages were
/// found (else where its first touchers run now). Without a local share,
/// the region's pages as a whole: where its first touchers run, else where
/// they were found, else the main thread's node.
fn first_touch_of(ctx: &Ctx, r: &Region, t: usize) -> Vec<(u32, f64)> {
    let mem = ctx.m.memory_nodes();
    let by_toucher = shares(
        r.first_touchers
            .iter()
            .filter(|(i, _)| *i < ctx.nodes.len())
            .map(|&(i, k)| (ctx.home_of(i), k)),
    );
    let found = shares(r.found.iter().copied().filter(|(n, _)| mem.contains(*n)));
    if let Some(Some(local)) = r.local_shares.get(t) {
        let home = ctx.home_of(t);
        let local = local.clamp(0.0, 1.0);
        let elsewhere = |d: &[(u32, f64)]| shares(d.iter().copied().filter(|(n, _)| *n != home));
        let mut rest = elsewhere(&found);
        if rest.is_empty() {
            rest = elsewhere(&by_toucher);
        }
        if rest.is_empty() {
            return vec![(home, 1.0)];
        }
        return shares(
            std::iter::once((home, local))
                .chain(rest.into_iter().map(|(n, x)| (n, x * (1.0 - local)))),
        );
    }
    if !by_toucher.is_empty() {
        return by_toucher;
    }
    if !found.is_empty() {
        return found;
    }
    vec![(ctx.home_of(0), 1.0)]
}

/// The region's bytes as slices with their page shares.
fn slices(ctx: &Ctx, r: &Region, layout: &Layout) -> Vec<(f64, Vec<(u32, f64)>)> {
    let n = ctx.nodes.len();
    let bytes = r.bytes as f64;
    match r.access {
        Access::Private => (0..n)
            .map(|t| (bytes / n as f64, thread_view(ctx, r, layout, t)))
            .collect(),
        Access::Pairs => (0..n)
            .step_by(2)
            .map(|t| {
                (
                    bytes / (n / 2).max(1) as f64,
                    thread_view(ctx, r, layout, t),
                )
            })
            .collect(),
        Access::AllThreads => vec![(bytes, thread_view(ctx, r, layout, 0))],
        // A profiled region's pages as a whole (no one thread's view).
        Access::Threads { .. } => match layout {
            Layout::FirstTouch => vec![(bytes, first_touch_of(ctx, r, usize::MAX))],
            _ => vec![(bytes, thread_view(ctx, r, layout, 0))],
        },
    }
}

/// Bytes thread `t` accesses of `r` in one pass.
fn work(r: &Region, t: usize, threads: usize) -> f64 {
    match &r.access {
        Access::Private | Access::AllThreads | Access::Pairs => r.bytes as f64 / threads as f64,
        Access::Threads { bytes } => bytes.get(t).copied().unwrap_or(0.0),
    }
}

/// One thread's flow under a placement, and the bytes it accesses in a
/// pass; `None` for a thread that accesses nothing.
fn flow_of(ctx: &Ctx, w: &Workload, layouts: &[Layout], t: usize) -> Option<(Flow, f64)> {
    let mut mem: Vec<(u32, f64)> = Vec::new();
    let mut written = 0.0;
    let mut total = 0.0;
    for (r, l) in w.regions.iter().zip(layouts) {
        let a = work(r, t, w.threads);
        if a <= 0.0 {
            continue;
        }
        total += a;
        written += a * r.write_share;
        mem.extend(
            thread_view(ctx, r, l, t)
                .into_iter()
                .map(|(n, s)| (n, s * a)),
        );
    }
    if total <= 0.0 {
        return None;
    }
    Some((
        Flow {
            label: format!("thread {t}"),
            cpu_node: ctx.nodes[t],
            memory: shares(mem),
            write_share: (written / total).clamp(0.0, 1.0),
            pace_gbps: None,
        },
        total,
    ))
}

/// A placement before its prediction.
#[derive(Debug, Clone)]
struct Placement {
    order: ThreadOrder,
    layouts: Vec<Layout>,
}

/// The flows of a placement with each one's bytes per pass, and a key
/// that is equal for placements the model cannot tell apart.
fn flows(m: &Machine, w: &Workload, p: &Placement) -> (Vec<(Flow, f64)>, String) {
    let ctx = Ctx {
        m,
        nodes: p.order.nodes.clone(),
    };
    let fl: Vec<(Flow, f64)> = (0..w.threads)
        .filter_map(|t| flow_of(&ctx, w, &p.layouts, t))
        .collect();
    let mut keys: Vec<String> = fl
        .iter()
        .map(|(f, a)| {
            let mem: Vec<String> = f
                .memory
                .iter()
                .map(|(n, s)| format!("{n}:{:.6}", s))
                .collect();
            format!(
                "{}|{}|{:.6}|{:.3e}",
                f.cpu_node,
                mem.join(","),
                f.write_share,
                a
            )
        })
        .collect();
    keys.sort();
    (fl, keys.join(";"))
}

/// Predicts a placement's makespan.
fn predict(net: &Network, fl: &[(Flow, f64)]) -> Result<Predicted, String> {
    let flows: Vec<Flow> = fl.iter().map(|f| f.0.clone()).collect();
    let p: Prediction = net.predict(&flows)?;
    let mut seconds = 0.0;
    let mut slowest = 0;
    let mut total = 0.0;
    for (i, ((f, bytes), r)) in fl.iter().zip(&p.flows).enumerate() {
        let t = bytes / (r.gbps * 1e9);
        total += bytes;
        if t > seconds {
            seconds = t;
            slowest = f
                .label
                .strip_prefix("thread ")
                .and_then(|s| s.parse().ok())
                .unwrap_or(i);
        }
    }
    Ok(Predicted {
        seconds,
        gbps: if seconds > 0.0 {
            total / seconds / 1e9
        } else {
            0.0
        },
        slowest_thread: slowest,
        bottleneck: p.bottleneck.as_ref().map(|b| b.name.clone()),
        bottleneck_utilisation: p.bottleneck.as_ref().map(|b| b.utilisation),
    })
}

/// Bytes each memory node holds under a placement, and the problems of
/// those that do not fit (free memory on the live machine, the node's
/// size in a topology file).
fn capacity_problems(m: &Machine, w: &Workload, p: &Placement) -> Vec<String> {
    let ctx = Ctx {
        m,
        nodes: p.order.nodes.clone(),
    };
    let mut need: BTreeMap<u32, f64> = BTreeMap::new();
    for (r, l) in w.regions.iter().zip(&p.layouts) {
        for (bytes, sh) in slices(&ctx, r, l) {
            for (n, s) in sh {
                *need.entry(n).or_insert(0.0) += bytes * s;
            }
        }
    }
    need.into_iter()
        .filter_map(|(n, b)| {
            let node = m.node(n)?;
            let (have, what) = match node.free_bytes {
                Some(f) => (f, "free"),
                None => (node.memory_bytes, "in all"),
            };
            (b > have as f64).then(|| {
                format!(
                    "node {n} would hold {} but has {} {what}",
                    format::bytes(b as u64),
                    format::bytes(have)
                )
            })
        })
        .collect()
}

/// The thread orders to try: spread (one node after another in turn) and
/// compact (node by node), and the profiled one for a profile.
fn orders(m: &Machine, w: &Workload) -> Result<Vec<ThreadOrder>, String> {
    let cpus: IdSet = m
        .cpu_nodes()
        .iter()
        .flat_map(|n| m.allowed_cpus_of(n).iter().collect::<Vec<_>>())
        .collect();
    if w.threads > cpus.len() {
        return Err(format!(
            "{} threads but this machine has {} CPUs ({cpus}); advise places one thread per CPU: valid: 1 to {}",
            w.threads,
            cpus.len(),
            cpus.len()
        ));
    }
    let make = |name: &str, list: Vec<u32>, pinned: bool| ThreadOrder {
        name: name.into(),
        nodes: list
            .iter()
            .map(|&c| m.node_of_cpu(c).unwrap_or(0))
            .collect(),
        cpus: list,
        pinned,
    };
    let mut out = vec![
        make(
            "spread",
            scatter_order(m, &cpus)
                .into_iter()
                .take(w.threads)
                .collect(),
            true,
        ),
        make(
            "compact",
            compact_order(m, &cpus)
                .into_iter()
                .take(w.threads)
                .collect(),
            true,
        ),
    ];
    if !w.profiled_cpus.is_empty()
        && w.profiled_cpus
            .iter()
            .all(|c| c.is_some_and(|c| cpus.contains(c)))
    {
        let list: Vec<u32> = w.profiled_cpus.iter().map(|c| c.unwrap_or(0)).collect();
        let distinct: IdSet = list.iter().copied().collect();
        // Two threads seen on one CPU cannot both be pinned there.
        if distinct.len() == list.len() {
            out.push(make("as profiled", list, true));
        }
    }
    Ok(out)
}

/// The default's thread order: not pinned. For a shape the scheduler
/// spreads idle threads over the nodes (modelled as spread); a profile's
/// threads where they were seen.
fn default_order(orders: &[ThreadOrder]) -> ThreadOrder {
    match orders.iter().find(|o| o.name == "as profiled") {
        Some(o) => ThreadOrder {
            name: "not pinned, as profiled".into(),
            pinned: false,
            ..o.clone()
        },
        None => ThreadOrder {
            name: "not pinned, spread by the scheduler (assumed)".into(),
            pinned: false,
            ..orders[0].clone()
        },
    }
}

/// The layouts to try for a region, in order of preference (simplest
/// first, code changes last): first touch, interleave over the nodes the
/// threads run on, over every memory node, weighted over the tiers
/// (CPU-less nodes included) by modelled bandwidth, bound to each node,
/// parallel first touch.
fn layouts(m: &Machine, net: Option<&Network>, r: &Region, order_nodes: &[u32]) -> Vec<Layout> {
    let mem = m.memory_nodes();
    let accessing: IdSet = order_nodes.iter().map(|&n| home_memory(m, n)).collect();
    let mut out = vec![Layout::FirstTouch];
    if accessing.len() > 1 && accessing != mem {
        out.push(Layout::Interleave {
            nodes: accessing.clone(),
        });
    }
    if mem.len() > 1 {
        out.push(Layout::Interleave { nodes: mem.clone() });
    }
    let cpuless: IdSet = mem
        .iter()
        .filter(|&n| m.node(n).is_some_and(|x| x.cpuless))
        .collect();
    if let (Some(net), false) = (net, cpuless.is_empty()) {
        let tiers = accessing.union(&cpuless);
        let caps: Vec<(u32, f64)> = tiers
            .iter()
            .map(|n| (n, net.params().controller_of(n)))
            .collect();
        out.push(Layout::Weighted {
            weights: small_weights(&caps),
        });
    }
    for n in mem.iter() {
        out.push(Layout::Bind { node: n });
    }
    // Parallel initialization is a change to the program's code; for a
    // shape it is the classic fix of shared data, while a profile's
    // regions already say who touches what (and `numalab profile`
    // diagnoses the rest).
    if matches!(r.access, Access::AllThreads | Access::Pairs) {
        out.push(Layout::ParallelInit);
    }
    out
}

/// A layout's place in the order of preference: first touch (nothing to
/// do), interleave over the accessing nodes, over every node, weighted,
/// bound to one node, parallel first touch (a code change).
fn layout_rank(l: &Layout, mem: &IdSet) -> usize {
    match l {
        Layout::FirstTouch => 0,
        Layout::Interleave { nodes } if nodes != mem => 1,
        Layout::Interleave { .. } => 2,
        Layout::Weighted { .. } => 3,
        Layout::Bind { .. } => 4,
        Layout::ParallelInit => 5,
    }
}

/// Integer weights (1 to 255, the kernel's range) proportional to `caps`
/// within 5%, as small as that allows.
pub fn small_weights(caps: &[(u32, f64)]) -> Vec<(u32, u32)> {
    let min = caps
        .iter()
        .map(|c| c.1)
        .filter(|c| *c > 0.0)
        .fold(f64::INFINITY, f64::min);
    if !min.is_finite() {
        return caps.iter().map(|&(n, _)| (n, 1)).collect();
    }
    let at = |scale: f64| -> Vec<(u32, u32)> {
        caps.iter()
            .map(|&(n, c)| (n, ((c / min) * scale).round().clamp(1.0, 255.0) as u32))
            .collect()
    };
    for scale in 1..=20 {
        let w = at(scale as f64);
        let close = caps.iter().zip(&w).all(|(&(_, c), &(_, k))| {
            let want = c / min;
            (k as f64 / scale as f64 - want).abs() <= 0.05 * want
        });
        if close {
            return w;
        }
    }
    at(20.0)
}

fn candidate_name(p: &Placement, w: &Workload) -> String {
    let changed: Vec<String> = p
        .layouts
        .iter()
        .filter(|l| !matches!(l, Layout::FirstTouch))
        .map(Layout::short)
        .collect();
    let mem = if p.layouts.len() == 1 {
        p.layouts[0].short()
    } else if changed.is_empty() {
        "first touch everywhere".into()
    } else {
        format!(
            "{} of {} regions placed ({})",
            changed.len(),
            w.regions.len(),
            changed.join(", ")
        )
    };
    format!("{}, {mem}", p.order.name)
}

/// Shell words: a word with anything but safe characters is quoted.
fn shell_word(w: &str) -> String {
    let safe = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if safe {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn command_words(cmd: &[String]) -> String {
    if cmd.is_empty() {
        "CMD".into()
    } else {
        cmd.iter()
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The command lines of a placement.
fn commands(
    w: &Workload,
    p: &Placement,
    placed: &[RegionPlacement],
    cx: &CommandContext,
) -> Commands {
    let cmd = command_words(&cx.program);
    let list = |cpus: &[u32]| {
        cpus.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut numalab: Vec<String> = vec!["numalab run".into()];
    let mut numactl: Vec<String> = vec!["numactl".into()];
    let mut notes: Vec<String> = Vec::new();
    let mut cpu_note = None;
    if p.order.pinned {
        numalab.push(format!("--pin {}", list(&p.order.cpus)));
        let set: IdSet = p.order.cpus.iter().copied().collect();
        numactl.push(format!("--physcpubind={set}"));
        if p.order.cpus.len() > 1 {
            cpu_note = Some(format!(
                "numactl keeps the process on CPUs {set} and leaves each thread's CPU among them to the scheduler; numalab run --pin pins thread i to the i-th CPU"
            ));
        }
    }
    let mut plan = None;
    let distinct: Vec<&Layout> = {
        let mut v: Vec<&Layout> = Vec::new();
        for r in placed {
            if !v.contains(&&r.layout) {
                v.push(&r.layout);
            }
        }
        v
    };
    let mut numactl_ok = true;
    if distinct.len() == 1 || w.regions.len() == 1 {
        match distinct.first() {
            Some(Layout::FirstTouch) | Some(Layout::ParallelInit) | None => {
                numalab.push("--localalloc".into());
                numactl.push("--localalloc".into());
            }
            Some(Layout::Interleave { nodes }) => {
                numalab.push(format!("--interleave {nodes}"));
                numactl.push(format!("--interleave={nodes}"));
            }
            Some(Layout::Bind { node }) => {
                numalab.push(format!("--membind {node}"));
                numactl.push(format!("--membind={node}"));
            }
            Some(Layout::Weighted { weights }) => {
                numalab.push(format!("--mem {}", weighted_text(weights)));
                numactl_ok = false;
                let nodes: IdSet = weights.iter().map(|w| w.0).collect();
                notes.push(format!(
                    "numactl 2.0.16 (Debian 12) has no weighted interleave; numactl 2.0.19 and later take --weighted-interleave={nodes} with the weights written system-wide (as root) in /sys/kernel/mm/mempolicy/weighted_interleave/nodeN, on Linux 6.9 and later"
                ));
            }
        }
    } else {
        // Regions with policies of their own: a plan, which numactl (one
        // policy for the whole process) cannot give.
        let entries: Vec<PlanEntry> = w
            .regions
            .iter()
            .zip(placed)
            .filter(|(_, rp)| !matches!(rp.layout, Layout::FirstTouch | Layout::ParallelInit))
            .filter_map(|(r, rp)| {
                Some(PlanEntry {
                    region: r.selector.clone()?,
                    policy: rp.policy.clone(),
                    small: false,
                    reason: Some(format!("numalab advise: {}", rp.layout.short())),
                    site: Some(r.name.clone()),
                    kind: None,
                    bytes: Some(r.bytes),
                    expected: None,
                })
            })
            .collect();
        numalab.push(format!("--plan {}", shell_word(&cx.plan_path)));
        numactl_ok = false;
        notes.push(
            "numactl gives one policy to the whole process; these regions need each their own: use numalab run --plan".into(),
        );
        plan = Some(Plan {
            schema: PLAN_SCHEMA.into(),
            program: w.program.clone(),
            entries,
        });
    }
    numalab.push(format!("-- {cmd}"));
    numactl.push(cmd);
    // How numactl places threads matters only where it can give the rest.
    if let (true, Some(n)) = (numactl_ok, cpu_note) {
        notes.insert(0, n);
    }
    Commands {
        numalab: numalab.join(" "),
        numactl: numactl_ok.then(|| numactl.join(" ")),
        numactl_note: (!notes.is_empty()).then(|| notes.join("; ")),
        plan,
    }
}

/// The default's command line: the program as it is.
fn default_commands(cx: &CommandContext) -> Commands {
    let cmd = command_words(&cx.program);
    Commands {
        numalab: cmd.clone(),
        numactl: Some(cmd),
        numactl_note: None,
        plan: None,
    }
}

/// Everything known of a placement but its rank.
fn evaluate(
    m: &Machine,
    net: Option<&Network>,
    w: &Workload,
    p: &Placement,
    cx: &CommandContext,
    default: bool,
) -> Result<(Candidate, String), String> {
    let (fl, key) = flows(m, w, p);
    let predicted = match net {
        Some(n) => Some(predict(n, &fl)?),
        None => None,
    };
    let ctx = Ctx {
        m,
        nodes: p.order.nodes.clone(),
    };
    let memory: Vec<RegionPlacement> = w
        .regions
        .iter()
        .zip(&p.layouts)
        .map(|(r, l)| {
            let mut pages: BTreeMap<u32, f64> = BTreeMap::new();
            for (bytes, sh) in slices(&ctx, r, l) {
                for (n, s) in sh {
                    *pages.entry(n).or_insert(0.0) += bytes * s / r.bytes.max(1) as f64;
                }
            }
            RegionPlacement {
                region: r.name.clone(),
                layout: l.clone(),
                policy: l.policy(),
                pages: pages.into_iter().collect(),
            }
        })
        .collect();
    let problems = capacity_problems(m, w, p);
    let needs: Vec<&str> = p.layouts.iter().filter_map(Layout::needs).collect();
    let commands = if default {
        default_commands(cx)
    } else {
        commands(w, p, &memory, cx)
    };
    let name = if default {
        default_name(w, &memory)
    } else {
        candidate_name(p, w)
    };
    Ok((
        Candidate {
            name,
            threads: p.order.clone(),
            memory,
            needs: needs.first().map(|s| s.to_string()),
            predicted,
            vs_best: None,
            fits: problems.is_empty(),
            problems,
            commands,
        },
        key,
    ))
}

fn default_name(w: &Workload, memory: &[RegionPlacement]) -> String {
    let nodes = |rp: &RegionPlacement| {
        rp.pages
            .iter()
            .filter(|p| p.1 > 0.0)
            .map(|p| p.0)
            .collect::<IdSet>()
    };
    let pages = match (w.sharing(), memory.first()) {
        (Some(Sharing::Independent), _) => {
            "first touch: each thread's slice on its own node".into()
        }
        (Some(Sharing::Shared), Some(rp)) => {
            format!(
                "first touch by the main thread: every page on node {}",
                nodes(rp)
            )
        }
        (Some(Sharing::ProducerConsumer), _) => {
            "first touch by each pair's producer: its buffer on the producer's node".into()
        }
        _ => "pages where the profile found them (first touch)".into(),
    };
    format!("OS default: threads not pinned, {pages}")
}

/// The best placement of `w` on `m` by the model, the runner-up and the
/// default, with the predicted gain and its uncertainty. `net` may be
/// `None` only on a one-node machine, where every placement is the same
/// memory.
pub fn advise(
    m: &Machine,
    net: Option<&Network>,
    w: &Workload,
    trust: &ModelTrust,
    cx: &CommandContext,
) -> Result<Advice, String> {
    if w.regions.is_empty() || w.threads == 0 {
        return Err("the workload has no threads or no data".into());
    }
    let single_node = m.node_ids().len() == 1;
    if net.is_none() && !single_node {
        return Err(
            "the model needs parameters on a machine with several nodes: give --from RESULTS.json or --params FILE|NAME".into(),
        );
    }
    let orders = orders(m, w)?;
    let default_placement = Placement {
        order: default_order(&orders),
        layouts: vec![Layout::FirstTouch; w.regions.len()],
    };
    let (default, _) = evaluate(m, net, w, &default_placement, cx, true)?;
    let mut warnings = Vec::new();
    if !default.fits {
        warnings.push(format!(
            "the default does not fit where first touch puts it ({}): the kernel would spill pages to other nodes, and the prediction assumes it fits",
            default.problems.join("; ")
        ));
    }
    // Every placement to try, in order of preference: layouts first
    // (simplest first), then thread orders.
    let mut placements: Vec<Placement> = Vec::new();
    if w.regions.len() == 1 {
        let mem = m.memory_nodes();
        let mut ranked: Vec<(usize, usize, Placement)> = Vec::new();
        for (i, o) in orders.iter().enumerate() {
            for l in layouts(m, net, &w.regions[0], &o.nodes) {
                ranked.push((
                    layout_rank(&l, &mem),
                    i,
                    Placement {
                        order: o.clone(),
                        layouts: vec![l],
                    },
                ));
            }
        }
        // Stable: within a rank, each order's layouts as `layouts` lists them.
        ranked.sort_by_key(|r| (r.0, r.1));
        placements.extend(ranked.into_iter().map(|r| r.2));
    } else {
        let mem = m.memory_nodes();
        let mut ranked: Vec<(usize, usize, Placement)> = Vec::new();
        for (i, o) in orders.iter().enumerate() {
            for p in descend(m, net, w, o)? {
                let rank = p.layouts.iter().map(|l| layout_rank(l, &mem)).sum();
                ranked.push((rank, i, p));
            }
        }
        // Fewer and simpler changes first: a plan of one region before a
        // plan of two, first touch everywhere before either.
        ranked.sort_by_key(|r| (r.0, r.1));
        placements.extend(ranked.into_iter().map(|r| r.2));
    }
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for p in &placements {
        let (c, key) = evaluate(m, net, w, p, cx, false)?;
        // Placements the model cannot tell apart (the same threads on the
        // same nodes seeing the same pages): the first, simplest, stays.
        if keys.contains(&key) {
            continue;
        }
        keys.push(key);
        candidates.push(c);
    }
    let time = |c: &Candidate| c.predicted.as_ref().map_or(1.0, |p| p.seconds);
    // Fastest first; placements that do not fit after all that do.
    let mut ranked: Vec<usize> = (0..candidates.len()).collect();
    ranked.sort_by(|&a, &b| {
        (!candidates[a].fits)
            .cmp(&!candidates[b].fits)
            .then(time(&candidates[a]).total_cmp(&time(&candidates[b])))
            .then(a.cmp(&b))
    });
    let fastest = ranked.first().copied().ok_or("no candidate placement")?;
    // Within TIE of the fastest, the first in order of preference.
    let best_i = ranked
        .iter()
        .copied()
        .filter(|&i| {
            candidates[i].fits == candidates[fastest].fits
                && time(&candidates[i]) <= time(&candidates[fastest]) * (1.0 + TIE)
        })
        .min()
        .unwrap_or(fastest);
    let best_time = time(&candidates[best_i]);
    for c in &mut candidates {
        if let Some(p) = &c.predicted {
            c.vs_best = Some(p.seconds / best_time);
        }
    }
    let mut sorted: Vec<Candidate> = Vec::with_capacity(candidates.len());
    sorted.push(candidates[best_i].clone());
    for &i in &ranked {
        if i != best_i {
            sorted.push(candidates[i].clone());
        }
    }
    let best = sorted[0].clone();
    let runner_up = sorted.get(1).cloned();
    let ratio = if single_node {
        1.0
    } else {
        default.predicted.as_ref().map_or(1.0, |d| d.seconds) / best_time
    };
    let gain = gain_of(ratio, trust, single_node);
    let mut notes = Vec::new();
    if single_node {
        notes.push(format!(
            "this machine has one node (node {}): every placement puts every page there and every thread beside it, so they are all the same memory; pinning only keeps the threads from moving",
            m.node_ids()
        ));
    }
    if let Some(n) = &best.needs {
        notes.push(format!(
            "the best placement needs a change to the program: {n}"
        ));
    }
    if let Some(shape) = &w.shape {
        let llc: u64 = last_level_total(m);
        if llc > 0 && shape.data_bytes <= llc {
            warnings.push(format!(
                "the data ({}) fits in the last-level caches ({} in all): the model predicts memory traffic, which a cache-resident workload mostly does not make",
                format::bytes(shape.data_bytes),
                format::bytes(llc)
            ));
        }
    }
    if !best.fits {
        warnings.push(format!(
            "no candidate fits in memory as placed; the least bad: {}",
            best.problems.join("; ")
        ));
    }
    Ok(Advice {
        workload: w.clone(),
        time_basis: TIME_BASIS.into(),
        single_node,
        best,
        runner_up,
        default,
        gain,
        candidates: sorted,
        notes,
        warnings,
    })
}

/// The last-level caches of the machine together, bytes.
fn last_level_total(m: &Machine) -> u64 {
    let Some(&level) = m.data_cache_levels().last() else {
        return 0;
    };
    m.caches
        .iter()
        .filter(|c| c.level == level && c.kind != "instruction")
        .map(|c| c.size_bytes)
        .sum()
}

fn gain_of(ratio: f64, trust: &ModelTrust, single_node: bool) -> Gain {
    if single_node {
        return Gain {
            ratio: 1.0,
            low: Some(1.0),
            high: Some(1.0),
            verdict: "none: one node".into(),
            basis: "one node: every placement is the same memory, so the gain is exactly 1".into(),
        };
    }
    match trust.relative_error {
        Some(e) if e.is_finite() && (0.0..1.0).contains(&e) => {
            // Worst case: the default's time over-predicted and the best's
            // under-predicted by the error, or the other way round.
            let low = ratio * (1.0 - e) / (1.0 + e);
            let high = ratio * (1.0 + e) / (1.0 - e);
            let verdict = if low > 1.0 { "holds" } else { "cannot tell" };
            Gain {
                ratio,
                low: Some(low),
                high: Some(high),
                verdict: verdict.into(),
                basis: trust.basis.clone(),
            }
        }
        Some(e) => Gain {
            ratio,
            low: None,
            high: None,
            verdict: "cannot tell".into(),
            basis: format!(
                "{}; its error ({}) is too large to bound the gain",
                trust.basis,
                format::percent(e)
            ),
        },
        None => Gain {
            ratio,
            low: None,
            high: None,
            verdict: "not calibrated".into(),
            basis: trust.basis.clone(),
        },
    }
}

/// A profile's best per-region layouts for one thread order: each region
/// in turn (most accessed first) takes the layout that shortens the
/// makespan most with the others held, twice over. The placements it
/// passes through are returned in order of preference: the default
/// layouts first, the final one last.
fn descend(
    m: &Machine,
    net: Option<&Network>,
    w: &Workload,
    o: &ThreadOrder,
) -> Result<Vec<Placement>, String> {
    let mut current = Placement {
        order: o.clone(),
        layouts: vec![Layout::FirstTouch; w.regions.len()],
    };
    let mut out = vec![current.clone()];
    let Some(net) = net else {
        return Ok(out);
    };
    let seconds = |p: &Placement| -> Result<f64, String> {
        let (fl, _) = flows(m, w, p);
        Ok(predict(net, &fl)?.seconds)
    };
    let mem = m.memory_nodes();
    let mut now = seconds(&current)?;
    for _round in 0..2 {
        let mut changed = false;
        for i in 0..w.regions.len() {
            let mut trials: Vec<(Layout, f64)> = Vec::new();
            for l in layouts(m, Some(net), &w.regions[i], &o.nodes) {
                if l == current.layouts[i] {
                    continue;
                }
                let mut trial = current.clone();
                trial.layouts[i] = l.clone();
                if !capacity_problems(m, w, &trial).is_empty() {
                    continue;
                }
                trials.push((l, seconds(&trial)?));
            }
            let fastest = trials.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
            // The simplest layout within TIE of the fastest, if it gains.
            let pick = trials
                .into_iter()
                .filter(|t| t.1 <= fastest * (1.0 + TIE))
                .min_by_key(|t| layout_rank(&t.0, &mem));
            if let Some((l, t)) = pick.filter(|p| p.1 < now * (1.0 - TIE)) {
                current.layouts[i] = l;
                now = t;
                changed = true;
                out.push(current.clone());
            }
        }
        if !changed {
            break;
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------
// Verification: the best placement and the default, run.
// ---------------------------------------------------------------------

/// How `--verify` measures.
#[derive(Debug, Clone)]
pub struct VerifyRequest {
    pub isa: Isa,
    /// Interleaved rounds: default, best, then best, default, ...
    pub rounds: usize,
    /// Each run's budget in each round.
    pub budget_each: Duration,
}

/// One placement as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerifiedRun {
    /// `best` or `default`.
    pub role: String,
    pub name: String,
    /// Each worker's CPU and memory policy as run.
    pub cpus: Vec<u32>,
    pub policies: Vec<String>,
    /// Predicted GB/s of the kernel run (program bytes), when the model
    /// has parameters.
    pub predicted_gbps: Option<f64>,
    /// Measured GB/s (program bytes: all bytes over the slowest worker's
    /// time), median of the pooled samples.
    pub measured_gbps: f64,
    pub samples: Vec<f64>,
    /// Where the pages landed, checked with the kernel.
    pub verified: bool,
    pub problems: Vec<String>,
}

/// `--verify`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdviceCheck {
    /// The kernel that stands for the workload's read/write mix.
    pub kernel: BandwidthKernel,
    /// Its written share of lines (what is predicted).
    pub write_share: f64,
    /// Bytes of each array of each worker.
    pub buffer_bytes: u64,
    pub rounds: usize,
    pub runs: Vec<VerifiedRun>,
    /// Best over default, predicted for the kernel run.
    pub predicted_gain: f64,
    /// Best over default, medians of the measured samples.
    pub measured_gain: f64,
    /// The rank test of the best's samples (GB/s) against the default's:
    /// its ratio is the measured gain.
    pub comparison: Option<RankComparison>,
    /// Whether "the best is faster than the default" holds, by the rank
    /// test (always cannot tell on one node, where both are the same
    /// memory).
    pub verdict: Verdict,
    pub rule: String,
    pub notes: Vec<String>,
    pub warnings: Vec<String>,
}

/// The kernel whose written share of lines is nearest `w`: read 0, triad
/// 1/3, copy 1/2, write 1.
pub fn kernel_for(w: f64) -> (BandwidthKernel, f64) {
    let options = [
        (BandwidthKernel::Read, 0.0),
        (BandwidthKernel::Triad, 1.0 / 3.0),
        (BandwidthKernel::Copy, 0.5),
        (BandwidthKernel::Write, 1.0),
    ];
    options
        .into_iter()
        .min_by(|a, b| (a.1 - w).abs().total_cmp(&(b.1 - w).abs()))
        .unwrap_or((BandwidthKernel::Read, 0.0))
}

/// The harness's workers for a candidate of a one-region shape: each
/// thread's CPU and the policy that gives its buffers the pages the
/// candidate gives its part of the data; and the initializer of shared
/// data under first touch (the main thread touches everything).
fn workers_of(m: &Machine, w: &Workload, c: &Candidate) -> (Vec<WorkerPlan>, Option<u32>) {
    let r = &w.regions[0];
    let layout = &c.memory[0].layout;
    let ctx = Ctx {
        m,
        nodes: c.threads.nodes.clone(),
    };
    let mut out = Vec::with_capacity(w.threads);
    let mut initializer = None;
    for (t, &cpu) in c.threads.cpus.iter().enumerate() {
        let policy = match (layout, &r.access) {
            (Layout::FirstTouch, Access::AllThreads) => {
                initializer = Some(c.threads.cpus[0]);
                MemoryPolicy::FirstTouch
            }
            (Layout::FirstTouch | Layout::ParallelInit, Access::Private) => {
                MemoryPolicy::FirstTouch
            }
            (Layout::Interleave { nodes }, _) => MemoryPolicy::Interleave {
                nodes: nodes.clone(),
                chunk_pages: 1,
            },
            (Layout::Weighted { weights }, _) => MemoryPolicy::Weighted {
                weights: weights.clone(),
                chunk_pages: 1,
            },
            (Layout::Bind { node }, _) => MemoryPolicy::Bind {
                nodes: IdSet::single(*node),
            },
            // Pairs under first touch, parallel first touch of shared
            // data: each worker's buffers get the pages its part has, as
            // explicit policies (the pages are the same; the harness's
            // workers own their buffers).
            _ => policy_of_shares(&thread_view(&ctx, r, layout, t), ctx.home_of(t)),
        };
        out.push(WorkerPlan {
            cpu,
            policy: policy.into(),
            toucher: None,
        });
    }
    (out, initializer)
}

/// A policy that gives a buffer these page shares: first touch when all
/// on the toucher's own node, bind for one other node, interleave for
/// equal shares, weighted (small integers) otherwise.
fn policy_of_shares(sh: &[(u32, f64)], own: u32) -> MemoryPolicy {
    match sh {
        [(n, _)] if *n == own => MemoryPolicy::FirstTouch,
        [(n, _)] => MemoryPolicy::Bind {
            nodes: IdSet::single(*n),
        },
        _ => {
            let first = sh.first().map_or(0.0, |s| s.1);
            if sh.iter().all(|s| (s.1 - first).abs() < 1e-9) {
                MemoryPolicy::Interleave {
                    nodes: sh.iter().map(|s| s.0).collect(),
                    chunk_pages: 1,
                }
            } else {
                MemoryPolicy::Weighted {
                    weights: small_weights(sh),
                    chunk_pages: 1,
                }
            }
        }
    }
}

/// Runs the best placement and the default of a shape's advice as a
/// synthetic workload: one pinned worker per thread streaming the kernel
/// nearest the shape's read/write mix over its part of the data, placed
/// as the candidate places it (shared data: every worker's buffers have
/// the shared region's pages; a pair's: the pair's buffer's), the default
/// pinned where the model assumed the scheduler puts its threads. The
/// runs alternate over the rounds and their samples are pooled.
pub fn verify(
    m: &Machine,
    net: Option<&Network>,
    advice: &Advice,
    req: &VerifyRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<AdviceCheck, PlacementError> {
    let w = &advice.workload;
    let Some(shape) = &w.shape else {
        return Err(PlacementError::Invalid(
            "--verify runs a synthetic workload of a --threads/--sharing shape; for a profiled program compare the program itself: numalab profile --plan PLAN --repeat 5 -- PROGRAM".into(),
        ));
    };
    if !m.is_live() {
        return Err(PlacementError::Invalid(
            "--verify runs on this machine: leave out --topology".into(),
        ));
    }
    let (kernel, write_share) = kernel_for(shape.write_share);
    let arrays = kernel.arrays() as u64;
    let page = crate::placement::sys::page_size() as u64;
    let per_worker = shape.data_bytes / shape.threads as u64;
    let buffer_bytes = (per_worker / arrays) / page * page;
    if buffer_bytes < page {
        return Err(PlacementError::Invalid(format!(
            "--data {}: each of {} threads' {} arrays would be below a page; give at least {}",
            format::bytes(shape.data_bytes),
            shape.threads,
            arrays,
            format::bytes(page * arrays * shape.threads as u64)
        )));
    }
    // The shape as the kernel runs it, predicted again: its written share
    // is the kernel's, not --rw's.
    let run_shape = Shape {
        write_share,
        data_bytes: buffer_bytes * arrays * shape.threads as u64,
        ..shape.clone()
    };
    let run_w = Workload::from_shape(&run_shape).map_err(PlacementError::Invalid)?;
    let predicted = |c: &Candidate| -> Result<Option<f64>, PlacementError> {
        let Some(net) = net else { return Ok(None) };
        let p = Placement {
            order: c.threads.clone(),
            layouts: c.memory.iter().map(|r| r.layout.clone()).collect(),
        };
        let (fl, _) = flows(m, &run_w, &p);
        predict(net, &fl)
            .map(|p| Some(p.gbps))
            .map_err(PlacementError::Invalid)
    };
    let roles = [("default", &advice.default), ("best", &advice.best)];
    let mut plans = Vec::new();
    for (role, c) in roles {
        let (workers, initializer) = workers_of(m, w, c);
        plans.push((role, c, workers, initializer, predicted(c)?));
    }
    let rule = StopRule {
        warmup: 1,
        min_reps: 3,
        max_reps: 5,
        target_rel_ci: 0.02,
        budget: req.budget_each,
    };
    let mut results: Vec<Option<BandwidthResult>> = vec![None, None];
    let rounds = req.rounds.max(1);
    for round in 1..=rounds {
        // Alternate which runs first, so that drift reaches both alike.
        let order: [usize; 2] = if round % 2 == 1 { [0, 1] } else { [1, 0] };
        for i in order {
            let (role, c, workers, initializer, _) = &plans[i];
            progress(&format!("{role} ({}), round {round} of {rounds}", c.name));
            let breq = BandwidthRequest {
                kernel,
                isa: req.isa,
                workers: workers.clone(),
                buffer_bytes: buffer_bytes as usize,
                thp: None,
                rule: rule.clone(),
            };
            let opts = RunOptions {
                unpinned: None,
                initializer: *initializer,
                aggregate: Aggregate::Slowest,
            };
            let r = run_bandwidth_with(m, &breq, &opts)?;
            match &mut results[i] {
                Some(first) => first.absorb(r, round),
                slot => *slot = Some(r),
            }
        }
    }
    let mut runs = Vec::new();
    for ((role, c, workers, _, pred), r) in plans.iter().zip(results) {
        let r = r.ok_or_else(|| PlacementError::Os("a run did not happen".into()))?;
        let samples = r.measurement.samples.clone();
        runs.push(VerifiedRun {
            role: role.to_string(),
            name: c.name.clone(),
            cpus: workers.iter().map(|w| w.cpu).collect(),
            policies: workers.iter().map(|w| w.policy.to_string()).collect(),
            predicted_gbps: *pred,
            measured_gbps: Summary::of(&samples).map_or(f64::NAN, |s| s.median),
            samples,
            verified: r.verification.verified,
            problems: r.verification.problems.clone(),
        });
    }
    let measured_gain = runs[1].measured_gbps / runs[0].measured_gbps;
    let predicted_gain = match (runs[0].predicted_gbps, runs[1].predicted_gbps) {
        // One node: the same memory, whatever the model's rounding.
        _ if advice.single_node => 1.0,
        (Some(d), Some(b)) => b / d,
        _ => advice.gain.ratio,
    };
    // The best's samples against the default's: the ratio reads as the
    // gain (best over default).
    let comparison = rank_compare(&runs[1].samples, &runs[0].samples);
    let mut notes = Vec::new();
    let verdict = if advice.single_node {
        notes.push(
            "one node: the best placement and the default are the same memory, so no measured difference is a claim (DESIGN: claims need evidence); this run checks the mechanics".into(),
        );
        Verdict::CannotTell
    } else {
        // "The best is faster": its GB/s larger, the opposite of a_smaller.
        match comparison.as_ref().map(RankComparison::a_smaller) {
            Some(Verdict::Holds) => Verdict::DoesNotHold,
            Some(Verdict::DoesNotHold) => Verdict::Holds,
            _ => Verdict::CannotTell,
        }
    };
    notes.push(format!(
        "kernel {} ({} of the lines written, the nearest to the workload's {}); each worker streams its own buffers placed as its part of the data is",
        kernel.name(),
        format::percent(write_share),
        format::percent(shape.write_share)
    ));
    if shape.sharing == Sharing::Shared {
        notes.push(
            "shared data is run as one buffer per thread with the shared data's pages: the same traffic to every node, without the cache lines threads share".into(),
        );
    }
    let mut warnings = Vec::new();
    for r in &runs {
        if !r.verified {
            warnings.push(format!(
                "{}: the pages are not where the placement puts them: {}",
                r.role,
                r.problems.join("; ")
            ));
        }
    }
    Ok(AdviceCheck {
        kernel,
        write_share,
        buffer_bytes,
        rounds,
        runs,
        predicted_gain,
        measured_gain,
        comparison,
        verdict,
        rule: RULE.into(),
        notes,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;
    use crate::model::ModelParams;

    fn quartet() -> (Machine, Network) {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let n = Network::new(&m, ModelParams::amd_quartet_2006()).unwrap();
        (m, n)
    }

    fn trust() -> ModelTrust {
        ModelTrust {
            relative_error: None,
            basis: "not calibrated on this machine".into(),
        }
    }

    fn cx() -> CommandContext {
        CommandContext {
            program: vec!["./app".into(), "in put".into()],
            plan_path: "plan.json".into(),
        }
    }

    fn shape(threads: usize, sharing: Sharing, w: f64) -> Workload {
        Workload::from_shape(&Shape {
            threads,
            sharing,
            data_bytes: 256 << 20,
            write_share: w,
        })
        .unwrap()
    }

    #[test]
    fn rw_ratios_and_sharing_names_parse() {
        assert_eq!(parse_rw("1:0").unwrap(), 0.0);
        assert_eq!(parse_rw("3:1").unwrap(), 0.25);
        assert_eq!(parse_rw(" 0 : 2 ").unwrap(), 1.0);
        for bad in ["", "1", "0:0", "-1:1", "a:b", "1:nan", "1:inf"] {
            let e = parse_rw(bad).unwrap_err();
            assert!(e.contains("valid: R:W"), "{bad}: {e}");
        }
        assert_eq!(Sharing::parse("shared").unwrap(), Sharing::Shared);
        assert_eq!(Sharing::parse("pairs").unwrap(), Sharing::ProducerConsumer);
        assert!(Sharing::parse("both")
            .unwrap_err()
            .contains("valid: independent, shared, producer-consumer"));
        let e = Workload::from_shape(&Shape {
            threads: 3,
            sharing: Sharing::ProducerConsumer,
            data_bytes: 1 << 20,
            write_share: 0.5,
        })
        .unwrap_err();
        assert!(e.contains("even"), "{e}");
    }

    #[test]
    fn eight_independent_threads_keep_first_touch_spread() {
        let (m, n) = quartet();
        let a = advise(
            &m,
            Some(&n),
            &shape(8, Sharing::Independent, 0.0),
            &trust(),
            &cx(),
        )
        .unwrap();
        assert_eq!(a.best.memory[0].layout, Layout::FirstTouch);
        assert_eq!(a.best.threads.name, "spread");
        assert_eq!(a.best.threads.cpus, vec![0, 2, 4, 6, 1, 3, 5, 7]);
        // Spread and compact put two threads on every node: one candidate.
        assert!(a
            .candidates
            .iter()
            .all(|c| c.name != "compact, first touch"));
        // The default (spread by the scheduler, first touch) is the same
        // memory: no gain, and the runner-up is slower.
        assert!((a.gain.ratio - 1.0).abs() < 1e-9, "{}", a.gain.ratio);
        assert_eq!(a.gain.verdict, "not calibrated");
        let r = a.runner_up.as_ref().unwrap();
        assert!(r.vs_best.unwrap() > 1.0 + TIE, "{r:?}");
        assert_eq!(
            a.best.commands.numalab,
            "numalab run --pin 0,2,4,6,1,3,5,7 --localalloc -- ./app 'in put'"
        );
        assert_eq!(
            a.best.commands.numactl.as_deref(),
            Some("numactl --physcpubind=0-7 --localalloc ./app 'in put'")
        );
        assert_eq!(a.default.commands.numalab, "./app 'in put'");
    }

    #[test]
    fn four_independent_threads_go_one_per_node() {
        let (m, n) = quartet();
        let a = advise(
            &m,
            Some(&n),
            &shape(4, Sharing::Independent, 0.0),
            &trust(),
            &cx(),
        )
        .unwrap();
        assert_eq!(a.best.name, "spread, first touch");
        assert_eq!(a.best.threads.nodes, vec![0, 1, 2, 3]);
        let compact = a
            .candidates
            .iter()
            .find(|c| c.name == "compact, first touch")
            .unwrap();
        assert!(compact.vs_best.unwrap() >= 1.0, "{compact:?}");
    }

    #[test]
    fn shared_readers_interleave_over_every_node_and_beat_node_0() {
        let (m, n) = quartet();
        let a = advise(
            &m,
            Some(&n),
            &shape(8, Sharing::Shared, 0.0),
            &trust(),
            &cx(),
        )
        .unwrap();
        assert_eq!(
            a.best.memory[0].layout,
            Layout::Interleave {
                nodes: [0, 1, 2, 3].into_iter().collect()
            }
        );
        assert_eq!(a.best.memory[0].policy, "interleave:0-3");
        // The default: every page on node 0, its controller the bottleneck.
        assert_eq!(a.default.memory[0].pages, vec![(0, 1.0)]);
        let d = a.default.predicted.as_ref().unwrap();
        assert_eq!(d.bottleneck.as_deref(), Some("node 0's memory controller"));
        assert!(a.gain.ratio > 1.5, "gain {}", a.gain.ratio);
        assert_eq!(
            a.best.commands.numalab,
            "numalab run --pin 0,2,4,6,1,3,5,7 --interleave 0-3 -- ./app 'in put'"
        );
        assert_eq!(
            a.best.commands.numactl.as_deref(),
            Some("numactl --physcpubind=0-7 --interleave=0-3 ./app 'in put'")
        );
        // Parallel first touch gives the same pages (two threads a node):
        // the simpler interleave stands for both.
        assert!(a.candidates.iter().all(|c| c.needs.is_none()));
    }

    #[test]
    fn producer_consumer_pairs_stay_on_one_node() {
        let (m, n) = quartet();
        let a = advise(
            &m,
            Some(&n),
            &shape(8, Sharing::ProducerConsumer, 0.5),
            &trust(),
            &cx(),
        )
        .unwrap();
        assert_eq!(a.best.threads.name, "compact");
        assert_eq!(a.best.memory[0].layout, Layout::FirstTouch);
        // The default's pairs split over two nodes (spread): the consumer
        // reads remotely.
        assert!(a.gain.ratio > 1.0, "{}", a.gain.ratio);
        assert_eq!(
            a.best.commands.numalab,
            "numalab run --pin 0,1,2,3,4,5,6,7 --localalloc -- ./app 'in put'"
        );
    }

    #[test]
    fn calibrated_error_bounds_the_gain() {
        let (m, n) = quartet();
        let t = ModelTrust {
            relative_error: Some(0.1),
            basis: "calibrated".into(),
        };
        let a = advise(&m, Some(&n), &shape(8, Sharing::Shared, 0.0), &t, &cx()).unwrap();
        let (lo, hi) = (a.gain.low.unwrap(), a.gain.high.unwrap());
        assert!((lo - a.gain.ratio * 0.9 / 1.1).abs() < 1e-12);
        assert!((hi - a.gain.ratio * 1.1 / 0.9).abs() < 1e-12);
        assert_eq!(a.gain.verdict, "holds");
        let a = advise(
            &m,
            Some(&n),
            &shape(8, Sharing::Independent, 0.0),
            &t,
            &cx(),
        )
        .unwrap();
        assert_eq!(a.gain.verdict, "cannot tell");
    }

    #[test]
    fn cpuless_tiers_get_weighted_interleave_without_numactl() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let mut p = ModelParams::amd_quartet_2006();
        p.links = None;
        p.controller_overrides.insert("4".into(), 2.24);
        let n = Network::new(&m, p).unwrap();
        let a = advise(
            &m,
            Some(&n),
            &shape(4, Sharing::Shared, 0.0),
            &trust(),
            &cx(),
        )
        .unwrap();
        let w = a
            .candidates
            .iter()
            .find(|c| matches!(c.memory[0].layout, Layout::Weighted { .. }))
            .expect("a weighted candidate");
        // Controllers 4.48 and 2.24 GB/s: 2 pages on each DRAM node per
        // page on the CPU-less one.
        assert_eq!(w.memory[0].policy, "weighted:0=2,1=2,2=2,3=2,4=1");
        assert!(w
            .commands
            .numalab
            .contains("--mem weighted:0=2,1=2,2=2,3=2,4=1 --"));
        assert_eq!(w.commands.numactl, None);
        assert!(w
            .commands
            .numactl_note
            .as_deref()
            .unwrap()
            .contains("no weighted interleave"));
    }

    #[test]
    fn small_weights_are_close_and_small() {
        // 4.48 / 2 = 2.24: 7 / 3 is within 5%.
        assert_eq!(small_weights(&[(0, 4.48), (4, 2.0)]), vec![(0, 7), (4, 3)]);
        assert_eq!(small_weights(&[(0, 3.0), (1, 3.0)]), vec![(0, 1), (1, 1)]);
    }

    #[test]
    fn several_nodes_need_a_model_one_node_does_not() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let e = advise(&m, None, &shape(2, Sharing::Shared, 0.0), &trust(), &cx()).unwrap_err();
        assert!(e.contains("needs parameters"), "{e}");
        let one = fixture("offline-cpu0-node0.xml");
        assert_eq!(one.node_ids().len(), 1);
        let a = advise(&one, None, &shape(2, Sharing::Shared, 0.0), &trust(), &cx()).unwrap();
        assert!(a.single_node);
        assert_eq!(a.gain.ratio, 1.0);
        assert_eq!(a.gain.verdict, "none: one node");
        assert!(a.best.predicted.is_none());
        // Every layout is the same memory: one candidate is left.
        assert_eq!(a.candidates.len(), 1, "{:?}", a.candidates);
        assert!(a.notes[0].contains("one node"), "{:?}", a.notes);
    }

    #[test]
    fn too_many_threads_are_refused() {
        let (m, n) = quartet();
        let e = advise(
            &m,
            Some(&n),
            &shape(9, Sharing::Shared, 0.0),
            &trust(),
            &cx(),
        )
        .unwrap_err();
        assert!(e.contains("valid: 1 to 8"), "{e}");
    }

    #[test]
    fn kernels_stand_for_the_mix() {
        assert_eq!(kernel_for(0.0).0, BandwidthKernel::Read);
        assert_eq!(kernel_for(0.25).0, BandwidthKernel::Triad);
        assert_eq!(kernel_for(0.5).0, BandwidthKernel::Copy);
        assert_eq!(kernel_for(0.9).0, BandwidthKernel::Write);
    }

    #[test]
    fn a_profile_becomes_regions_and_a_plan() {
        let (m, n) = quartet();
        // Main (tid 10) first touched both regions on node 0; four
        // workers on nodes 0-3 read the big one evenly, the small one is
        // the main thread's alone.
        let p: Profile = serde_json::from_value(serde_json::json!({
            "schema_version": "2.0", "program": ["./app"], "pid": 10, "rate": 0,
            "min_bytes": 65536, "page_size": 4096, "pages_armed": 0, "samples": 500,
            "cost": null, "sampled_for_s": null, "unattributed": 0, "remote_share": null,
            "regions": [
                region("main app.c:10", 64 << 20, &[(11, 100), (12, 100), (13, 100), (14, 100)], 0),
                region("main app.c:20", 1 << 20, &[(10, 100)], 50),
            ],
            "threads": [
                thread(10, 0, 1), thread(11, 1, 0), thread(12, 2, 2),
                thread(13, 3, 4), thread(14, 4, 6)
            ],
            "diagnoses": [], "warnings": []
        }))
        .unwrap();
        let w = Workload::from_profile(&p).unwrap();
        assert_eq!(w.threads, 5);
        // Without samples by thread or an access matrix, no local share.
        assert!(w.regions[0].local_shares.iter().all(Option::is_none));
        assert_eq!(w.regions[0].selector.as_deref(), Some("site:app.c:10"));
        let a = advise(&m, Some(&n), &w, &trust(), &cx()).unwrap();
        let big = &a.best.memory[0];
        assert!(
            matches!(big.layout, Layout::Interleave { .. }),
            "{:?}",
            a.best.memory
        );
        let plan = a.best.commands.plan.as_ref().expect("a plan");
        assert_eq!(plan.entries[0].region, "site:app.c:10");
        assert!(a
            .best
            .commands
            .numalab
            .contains("--plan plan.json -- ./app"));
        assert_eq!(a.best.commands.numactl, None);
        assert!(a.gain.ratio > 1.0);
    }

    #[test]
    fn a_profiled_region_each_thread_keeps_local_stays_first_touch() {
        let (m, n) = quartet();
        // Four workers on nodes 0-3 each read their own slice of a 64 MiB
        // region, all of it local as profiled: nothing to move.
        let mut r = region(
            "work app.c:30",
            64 << 20,
            &[(11, 100), (12, 100), (13, 100), (14, 100)],
            0,
        );
        r["placed_by_thread"] =
            serde_json::json!({"11": [100, 0], "12": [100, 0], "13": [100, 0], "14": [100, 0]});
        r["pages_by_node"] = serde_json::json!({"0": 4096, "1": 4096, "2": 4096, "3": 4096});
        r["first_touch"] = serde_json::Value::Null;
        let p: Profile = serde_json::from_value(serde_json::json!({
            "schema_version": "2.0", "program": ["./app"], "pid": 10, "rate": 0,
            "min_bytes": 65536, "page_size": 4096, "pages_armed": 0, "samples": 400,
            "cost": null, "sampled_for_s": null, "unattributed": 0, "remote_share": null,
            "regions": [r],
            "threads": [thread(11, 1, 0), thread(12, 2, 2), thread(13, 3, 4), thread(14, 4, 6)],
            "diagnoses": [], "warnings": []
        }))
        .unwrap();
        let w = Workload::from_profile(&p).unwrap();
        assert_eq!(w.regions[0].local_shares, vec![Some(1.0); 4]);
        let a = advise(&m, Some(&n), &w, &trust(), &cx()).unwrap();
        assert_eq!(
            a.best.memory[0].layout,
            Layout::FirstTouch,
            "{}",
            a.best.name
        );
        // Spread is where they ran: the same CPUs, listed first.
        assert_eq!(a.best.threads.cpus, vec![0, 2, 4, 6]);
        assert!((a.gain.ratio - 1.0).abs() < 1e-9);
        assert!(a.best.commands.plan.is_none());
    }

    fn region(site: &str, bytes: u64, threads: &[(u32, u64)], writes: u64) -> serde_json::Value {
        let th: serde_json::Map<String, serde_json::Value> = threads
            .iter()
            .map(|(t, k)| (t.to_string(), (*k).into()))
            .collect();
        let reads: u64 = threads.iter().map(|t| t.1).sum::<u64>() - writes;
        serde_json::json!({
            "kind": "heap", "site": site, "sampled": true, "object": null, "thread": null,
            "stack": [], "allocations": 1, "bytes": bytes, "first_address": 4096,
            "samples": reads + writes, "reads": reads, "writes": writes, "unknown_access": 0,
            "accesses": {}, "remote_share": null, "distance_ratio": null,
            "pages_by_node": {"0": bytes / 4096}, "threads": th,
            "first_touch": {"samples": 10, "writes": 10, "threads": {"10": 10}, "nodes": {"0": 10}},
            "pages_over_time": []
        })
    }

    fn thread(tid: u32, ordinal: u32, cpu: u32) -> serde_json::Value {
        serde_json::json!({
            "tid": tid, "ordinal": ordinal, "samples": 100, "allowed_cpus": 8,
            "cpus": [cpu], "nodes": [cpu / 2], "remote_share": null, "first_touches": 0,
            "memory_nodes": {}, "migrations": null, "cpu_changes_seen": 0, "timeline": []
        })
    }
}
