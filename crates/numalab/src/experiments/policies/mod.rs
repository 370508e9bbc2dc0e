//! `numalab policies`: memory policies compared for canonical workloads, the
//! classic "platform x application type" table, with every cell's placement
//! verified and a recommendation for this machine derived from the numbers.
//!
//! Workloads (rows), each streaming a bandwidth kernel over its data:
//! 1. one thread, unpinned: the scheduler chooses its CPU and may move it;
//!    every CPU it is seen on is recorded;
//! 2. one thread, pinned to the first CPU of the layout;
//! 3. independent single-threaded programs: one pinned worker per CPU of the
//!    layout, each initializing its own data; the aggregate is the sum of
//!    each program's own rate (nobody waits for anybody);
//! 4. a threaded program whose main thread initializes all the data: one
//!    thread pinned to the first CPU touches and writes every worker's part
//!    before the workers start (first touch puts every page on its node: the
//!    classic mistake);
//! 5. a NUMA-aware threaded program: each thread initializes its own part.
//!
//! The threaded programs (4, 5) are timed as one job: all bytes over the
//! slowest thread's time. Each worker of 3-5 has the same data size as the
//! single thread, so rows compare like for like. A threaded program's data is
//! one part per thread, each part its own mapping: page placement (first
//! touch, interleave, bind) works page by page, so this is the same placement
//! as slices of one shared array.
//!
//! Policies (columns): local (the OS default, first touch), interleave page
//! by page over every memory node (the classic studies' advice), interleave
//! over the accessing nodes only (the nodes of the CPUs the workload's
//! threads run on), everything bound to one node. Every cell
//! is checked: each buffer's page histogram against what the policy should
//! give (toucher's node, even round robin, the bound node), who touched the
//! data, and where the workers ran.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the run after the cell in
//! progress: `cells` then holds the cells run so far.
//!
//! The code: this file holds the request and result types; `run.rs` runs
//! the cells and checks their placement; `advice.rs` derives the
//! recommendations from the figures.

use crate::machine::Machine;
use crate::measure::compare::{RankComparison, Verdict};
use crate::measure::environment::CACHE_FIT_MULTIPLE;
use crate::measure::harness::{Aggregate, BandwidthResult, Figure};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::StopRule;
use crate::placement::Thp;
use crate::serde_util::{f64_or_nan, int_keyed_map, vec_f64_or_nan};
use crate::text::format::s;
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod advice;
mod run;

pub use advice::{compare, recommend};
pub use run::{run_policies, uneven, ROUNDS};

/// A canonical workload: a row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    SingleUnpinned,
    SinglePinned,
    Independent,
    SerialInit,
    NumaAware,
}

impl Workload {
    pub const ALL: [Workload; 5] = [
        Self::SingleUnpinned,
        Self::SinglePinned,
        Self::Independent,
        Self::SerialInit,
        Self::NumaAware,
    ];

    /// The workload's name (also its serde name), e.g. "serial-init".
    pub fn name(self) -> &'static str {
        match self {
            Self::SingleUnpinned => "single-unpinned",
            Self::SinglePinned => "single-pinned",
            Self::Independent => "independent",
            Self::SerialInit => "serial-init",
            Self::NumaAware => "numa-aware",
        }
    }

    /// Row title for `threads` threads.
    pub fn title(self, threads: usize) -> String {
        match self {
            Self::SingleUnpinned => "1 thread, unpinned".into(),
            Self::SinglePinned => "1 thread, pinned".into(),
            Self::Independent => format!("{threads} independent program{}", s(threads)),
            Self::SerialInit => format!("{threads} threads, main thread inits"),
            Self::NumaAware => format!("{threads} threads, NUMA-aware"),
        }
    }

    /// What the workload is, in one sentence.
    pub fn description(self) -> &'static str {
        match self {
            Self::SingleUnpinned => "one thread with no affinity (the scheduler places and may move it), initializing its own data",
            Self::SinglePinned => "one thread pinned to the first CPU, initializing its own data",
            Self::Independent => "independent single-threaded programs, one per CPU, each with its own data which it initializes itself; aggregate = sum of their rates",
            Self::SerialInit => "one multi-threaded program whose main thread (pinned to the first CPU) initializes all the data before the threads start; aggregate = all bytes / slowest thread",
            Self::NumaAware => "one multi-threaded program in which each thread initializes its own part of the data; aggregate = all bytes / slowest thread",
        }
    }

    /// Whether the workload uses every thread of the layout.
    pub fn threaded(self) -> bool {
        !matches!(self, Self::SingleUnpinned | Self::SinglePinned)
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        Self::ALL
            .into_iter()
            .find(|w| w.name() == t)
            .or(match t {
                "unpinned" => Some(Self::SingleUnpinned),
                "pinned" | "single" => Some(Self::SinglePinned),
                "main-init" | "main-thread-init" => Some(Self::SerialInit),
                _ => None,
            })
            .ok_or_else(|| {
                format!(
                    "unknown workload '{t}'; valid: {}, all",
                    Self::ALL.map(|w| w.name()).join(", ")
                )
            })
    }
}

/// A memory policy column of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyColumn {
    /// The OS default: first touch (MPOL_DEFAULT).
    Local,
    /// Page-by-page round robin over every memory node.
    Interleave,
    /// Page-by-page round robin over the nodes of the CPUs the workload's
    /// threads run on (for a one-thread workload its own node: local).
    InterleaveAccessing,
    /// Every page bound to one node.
    OneNode,
}

impl PolicyColumn {
    /// Every column, in table order.
    pub const ALL: [PolicyColumn; 4] = [
        Self::Local,
        Self::Interleave,
        Self::InterleaveAccessing,
        Self::OneNode,
    ];

    /// The column's name (also its serde name), e.g. "interleave-accessing".
    pub fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Interleave => "interleave",
            Self::InterleaveAccessing => "interleave-accessing",
            Self::OneNode => "one-node",
        }
    }

    /// A column by name or alias; the error names the valid choices.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "local" | "first-touch" | "default" => Ok(Self::Local),
            "interleave" => Ok(Self::Interleave),
            "interleave-accessing" => Ok(Self::InterleaveAccessing),
            "one-node" | "bind" | "node" => Ok(Self::OneNode),
            t => Err(format!(
                "unknown policy '{t}'; valid: local, interleave, interleave-accessing, one-node, all"
            )),
        }
    }
}

/// Parses a comma-separated list of names (or `all`), keeping `ALL`'s order.
pub fn parse_list<T: Copy + Ord>(
    text: &str,
    all: &[T],
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    if text.trim() == "all" {
        return Ok(all.to_vec());
    }
    let mut out = Vec::new();
    for item in text.split(',') {
        if item.trim().is_empty() {
            return Err(format!("empty name in the list '{text}'"));
        }
        let v = parse(item)?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out.sort();
    Ok(out)
}

/// What to run.
#[derive(Debug, Clone)]
pub struct PoliciesRequest {
    pub kernel: BandwidthKernel,
    pub isa: Isa,
    /// CPUs of the threaded workloads' threads, in layout order. The first is
    /// the pinned single thread's CPU and the main thread's.
    pub cpus: Vec<u32>,
    /// How `cpus` was laid out (for the record), e.g. "scatter".
    pub thread_policy: String,
    /// CPUs the unpinned thread may run on.
    pub unpinned_cpus: IdSet,
    /// The node of the one-node column.
    pub node: u32,
    /// Bytes of each array of each worker.
    pub buffer_bytes: usize,
    pub thp: Thp,
    pub rule: StopRule,
    pub workloads: Vec<Workload>,
    pub policies: Vec<PolicyColumn>,
}

/// Default bytes per array: one worker's arrays together at least
/// [`CACHE_FIT_MULTIPLE`] times the last-level cache, so that the figures
/// come from memory and the cache-fit warning stays quiet (never below
/// 16 MiB per array), rounded up to 2 MiB.
pub fn default_array_bytes(m: &Machine, kernel: BandwidthKernel) -> usize {
    let llc = m.last_level_cache_bytes().unwrap_or(32 << 20) as usize;
    (CACHE_FIT_MULTIPLE as usize * llc)
        .div_ceil(kernel.arrays())
        .max(16 << 20)
        .next_multiple_of(2 << 20)
}

/// A row of the table as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadInfo {
    pub name: Workload,
    pub title: String,
    /// [`Workload::description`] when run; as read back when deserialized.
    pub description: String,
    pub threads: usize,
    pub aggregate: Aggregate,
}

/// A column of the table as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyInfo {
    pub name: PolicyColumn,
    pub title: String,
    /// The memory policy every buffer gets (`numalab place` syntax).
    pub memory_policy: String,
}

/// One workload under one policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub workload: Workload,
    pub policy: PolicyColumn,
    pub memory_policy: String,
    pub threads: usize,
    /// Each worker's CPU; `None` for the unpinned worker.
    pub requested_cpus: Vec<Option<u32>>,
    /// Every CPU each worker was seen on.
    pub seen_cpus: Vec<Vec<u32>>,
    /// How often the unpinned worker was seen on another CPU than before.
    pub migrations: Option<u64>,
    /// CPUs of the threads that first touched the data.
    pub toucher_cpus: Vec<u32>,
    pub aggregate: Aggregate,
    /// Aggregate bandwidth (program bytes), 1e9 B/s; absent when the cell could not run.
    pub gbps: Option<Figure>,
    /// Aggregate bandwidth in bytes memory moves (write-allocate included).
    pub memory_gbps: Option<Figure>,
    /// Median of each worker's own rate, in worker order.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub worker_gbps: Vec<f64>,
    /// Pages of all the cell's data, per node.
    #[serde(deserialize_with = "int_keyed_map")]
    pub pages_by_node: BTreeMap<u32, u64>,
    /// Share of the data (percent) on the node of the worker that streams
    /// it (for the unpinned worker: on a node it was seen running on).
    pub local_percent: Option<f64>,
    pub page_size: usize,
    /// Where the pages should be, in words.
    pub expected: String,
    pub verified: bool,
    pub problems: Vec<String>,
    /// The run: samples, stop reason, per-worker buffers and page histograms.
    pub run: Option<BandwidthResult>,
    pub warnings: Vec<String>,
}

/// Two cells compared by the rank test on their bandwidth samples
/// ([`crate::measure::compare`]): `better` has the higher median, and the
/// verdict says whether the test supports "`better` is faster".
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    /// "workload/policy".
    pub better: String,
    /// "workload/policy" of the cell with the lower median.
    pub worse: String,
    /// `(better / worse - 1) * 100` of the medians.
    #[serde(deserialize_with = "f64_or_nan")]
    pub percent: f64,
    /// The fixed noise threshold of results written before the rank test
    /// (5% or the confidence half-widths added); `null` in new results,
    /// where it decides nothing.
    #[serde(default = "nan", deserialize_with = "f64_or_nan")]
    pub noise_percent: f64,
    /// Whether the difference is a claim: `verdict` is `holds`.
    pub significant: bool,
    /// Two-sided Mann–Whitney U p-value of the two cells' samples.
    #[serde(default = "nan", deserialize_with = "f64_or_nan")]
    pub p_value: f64,
    /// 95% confidence interval of the ratio better / worse (Hodges–Lehmann);
    /// `null` with too few samples.
    #[serde(default = "nan", deserialize_with = "f64_or_nan")]
    pub ratio_low: f64,
    /// Upper end of the interval of `ratio_low`.
    #[serde(default = "nan", deserialize_with = "f64_or_nan")]
    pub ratio_high: f64,
    /// The test and its threshold in words ([`crate::measure::compare::RULE`]).
    #[serde(default)]
    pub rule: String,
    /// Whether "`better` is faster than `worse`" holds, does not hold, or
    /// the samples cannot tell (always cannot tell on one memory node, where
    /// the cells are the same memory).
    #[serde(default = "cannot_tell")]
    pub verdict: Verdict,
    /// The rank test of `better`'s samples against `worse`'s that the
    /// verdict comes from (absent in results written before report schema
    /// 1.1, and when a cell had no samples): the claims checker reruns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<RankComparison>,
}

fn nan() -> f64 {
    f64::NAN
}

fn cannot_tell() -> Verdict {
    Verdict::CannotTell
}

/// One piece of advice for this machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recommendation {
    /// A workload name, or "pinning", "initialization", "scaling".
    pub topic: String,
    /// The policy to use, when the numbers single one out.
    pub best: Option<PolicyColumn>,
    pub text: String,
    pub comparisons: Vec<Comparison>,
}

/// The outcome of [`run_policies`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoliciesResult {
    pub kernel: BandwidthKernel,
    pub isa: Isa,
    pub threads: usize,
    pub thread_policy: String,
    pub cpus: Vec<u32>,
    /// The main thread's CPU (and the pinned single thread's).
    pub main_cpu: u32,
    pub unpinned_cpus: IdSet,
    /// The one-node column's node.
    pub node: u32,
    pub interleave_nodes: IdSet,
    /// The interleave-accessing column's nodes: the nodes of the threaded
    /// workloads' CPUs (empty in results written before the column).
    #[serde(default)]
    pub accessing_nodes: IdSet,
    /// One memory node only: the three policies are the same memory.
    pub single_node: bool,
    /// Bytes of each array of each worker.
    pub buffer_bytes: u64,
    pub arrays: usize,
    pub thp: Thp,
    pub rule: StopRule,
    /// Rounds every cell ran in, interleaved over the table (samples
    /// pooled); 1 in results from before rounds.
    #[serde(default = "one_round")]
    pub rounds: usize,
    pub workloads: Vec<WorkloadInfo>,
    pub policies: Vec<PolicyInfo>,
    pub cells: Vec<Cell>,
    pub recommendations: Vec<Recommendation>,
    pub notes: Vec<String>,
    pub verified: bool,
    pub warnings: Vec<String>,
}

fn one_round() -> usize {
    1
}

impl PoliciesResult {
    /// The cell of a workload under a policy, if it was run.
    pub fn cell(&self, w: Workload, p: PolicyColumn) -> Option<&Cell> {
        self.cells.iter().find(|c| c.workload == w && c.policy == p)
    }
}

/// Column heading: "local (first touch)", "interleave 0-3", "interleave
/// accessing 0,2", "one node (2)".
pub fn column_title(p: PolicyColumn, interleave: &IdSet, accessing: &IdSet, node: u32) -> String {
    match p {
        PolicyColumn::Local => "local (first touch)".into(),
        PolicyColumn::Interleave => format!("interleave {interleave}"),
        PolicyColumn::InterleaveAccessing => format!("interleave accessing {accessing}"),
        PolicyColumn::OneNode => format!("one node ({node})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_lists_keep_table_order() {
        let l = parse_list(
            "numa-aware,single-pinned,numa-aware",
            &Workload::ALL,
            Workload::parse,
        )
        .unwrap();
        assert_eq!(l, vec![Workload::SinglePinned, Workload::NumaAware]);
        assert_eq!(
            parse_list("all", &PolicyColumn::ALL, PolicyColumn::parse).unwrap(),
            PolicyColumn::ALL.to_vec()
        );
        assert!(Workload::parse("bogus")
            .unwrap_err()
            .contains("valid: single-unpinned"));
        assert!(parse_list("local,", &PolicyColumn::ALL, PolicyColumn::parse).is_err());
        assert_eq!(PolicyColumn::parse("bind").unwrap(), PolicyColumn::OneNode);
    }
}
