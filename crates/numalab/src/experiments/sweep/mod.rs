//! `numalab sweep`: the placement truth table of the classic ccNUMA studies.
//!
//! N foreground threads each stream their own private buffer, read-only or
//! write-only. A *case* puts every thread on a CPU, every buffer on a memory
//! node and gives every thread an access (read or write); the sweep runs
//! every case: `(CPUs x memory nodes x accesses)^N`, 4096 for two threads on
//! a 4-node machine with 2 cores per node.
//!
//! Many cases are the same experiment seen through the machine's symmetry:
//! renaming the nodes by a permutation that keeps every distance (and each
//! node's CPU structure, memory kind and role) and swapping interchangeable
//! cores (same node, same last-level cache) or SMT siblings gives a case the
//! hardware cannot tell apart. The sweep folds such cases into *classes*,
//! runs one representative per class and reports the class size; `--every-case`
//! runs them all. Folding never enumerates the full space: representatives
//! are generated with cores numbered by first use ("slots") and kept when no
//! node automorphism gives a smaller form, and a class's size is the number
//! of its distinct node images times the number of ways to pick concrete
//! cores and PUs for the slots.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the sweep after the case in
//! progress: `runs` then holds the cases run so far (a run for every thread
//! count and background reached).
//!
//! The code is split by concern: the case space and its symmetry
//! (`space/`: canonical forms and folding in `fold.rs`, the plan and its
//! limits in `plan.rs`, twins in `twin.rs`), running the cases (`run.rs`)
//! and mining the result for the classic questions (`findings.rs`). This file holds the requests and
//! results every layer reads, and the one description of a run's condition
//! ([`Background::describe`], [`SweepRun::condition`]).

mod findings;
mod listing;
mod run;
mod scenario_findings;
mod scenario_run;
mod scenarios;
mod space;
mod symmetry;
mod tree;

#[doc(hidden)]
pub use findings::test_cases;
pub use findings::{
    compared_classes, crossfire_cases, findings, hop_cases, two_writer_cases, widest_class,
    Finding, Findings, NOISE as FINDING_NOISE,
};
pub use listing::{ListedCases, ListedPlan, SweepListing, SweepReport};
pub use run::{bytes_per_pass, check_buffers_fit, normalize, run_sweep};
pub use scenario_findings::{scenario_findings, ScenarioFinding};
pub use scenario_run::{
    run_scenarios, BaselineResults, Normalize, ScenarioCaseResult, ScenarioRequest, ScenarioRun,
    ScenariosResult, BACKGROUND_START_S as SCENARIO_BACKGROUND_START_S,
    CASE_OVERHEAD_S as SCENARIO_CASE_OVERHEAD_S, MIN_CASE_S as SCENARIO_MIN_CASE_S, MIN_ROUNDS,
};
pub use scenarios::{
    plan_scenarios, Roles, Scenario, ScenarioBackground, ScenarioCase, ScenarioPlan, ScenarioSet,
};
pub use space::{
    case_counts, coverage_order, plan, Access, CaseCount, PlannedCase, SweepSpace, ThreadCase,
    TwinMove, MAX_EXCHANGED_THREADS, MAX_PLANNED_CASES,
};

use crate::measure::compare::RankComparison;
use crate::measure::harness::BufferCheck;
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::memory_traffic::MemoryTraffic;
use crate::measure::stats::{StopRule, Summary};
use crate::placement::Thp;
use crate::serde_util::{f64_or_nan, int_keyed_map, vec_f64_or_nan};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Background load of a sweep run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Background {
    /// The level as asked (`low`, `2`, ...).
    pub level: String,
    /// Per background thread, bytes/s (program bytes).
    #[serde(deserialize_with = "f64_or_nan")]
    pub bytes_per_second: f64,
    /// How many of the free CPUs carry a background thread.
    pub subscription: Subscription,
    /// Fixed background CPUs instead of a subscription of the free ones.
    pub cpus: Option<IdSet>,
}

impl Background {
    /// The one description of a background load, for every report:
    /// `background high (2.00 GB/s per thread), full subscription`, or with
    /// fixed CPUs `background high (2.00 GB/s per thread), on CPUs 2-3`.
    pub fn describe(&self) -> String {
        let place = match &self.cpus {
            Some(c) => format!("on CPUs {c}"),
            None => format!("{} subscription", self.subscription.name()),
        };
        format!(
            "{} ({:.2} GB/s per thread), {place}",
            self.short(),
            self.bytes_per_second / 1e9
        )
    }

    /// `background high`: for titles where the rate and CPUs are said
    /// elsewhere, or nowhere.
    pub fn short(&self) -> String {
        format!("background {}", self.level)
    }
}

/// `idle` without a background, else its description.
fn condition(bg: Option<&Background>) -> String {
    bg.map_or_else(|| "idle".into(), Background::describe)
}

/// Share of the CPUs a case leaves free that carry background threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subscription {
    /// About a quarter of the free CPUs (at least one).
    Under,
    /// About three quarters.
    High,
    /// All of them.
    Full,
}

impl Subscription {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "under" => Ok(Subscription::Under),
            "high" => Ok(Subscription::High),
            "full" => Ok(Subscription::Full),
            o => Err(format!(
                "unknown subscription '{o}'; valid: under (a quarter of the free CPUs), high (three quarters), full (all)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Subscription::Under => "under",
            Subscription::High => "high",
            Subscription::Full => "full",
        }
    }

    /// Background threads out of `free` CPUs.
    pub fn threads(self, free: usize) -> usize {
        if free == 0 {
            return 0;
        }
        match self {
            Subscription::Under => free.div_ceil(4),
            Subscription::High => (3 * free).div_ceil(4),
            Subscription::Full => free,
        }
    }
}

/// What to sweep and how.
#[derive(Debug, Clone)]
pub struct SweepRequest {
    /// Thread counts, each a sweep of its own (normalized on its own).
    pub threads: Vec<usize>,
    pub cpus: IdSet,
    pub mem_nodes: IdSet,
    pub accesses: Vec<Access>,
    pub read_kernel: BandwidthKernel,
    pub write_kernel: BandwidthKernel,
    pub isa: Isa,
    /// Bytes per buffer (each thread has one per memory node).
    pub buffer_bytes: usize,
    pub thp: Option<Thp>,
    /// Run every case instead of one per class.
    pub full: bool,
    /// Whole-sweep time budget: run a subset covering every hop class.
    pub budget: Option<Duration>,
    /// Per case (its time budget is set by the sweep when `budget` is given).
    pub rule: StopRule,
    /// Background settings to run the sweep under (`None` = idle), in order.
    pub backgrounds: Vec<Option<Background>>,
    /// Bytes per background buffer.
    pub background_bytes: usize,
    /// Refuse `--every-case` beyond this many cases.
    pub full_limit: u64,
    /// Shortest sample in seconds (passes are repeated up to it, after a
    /// calibration sample); 0 = one pass per sample, no calibration.
    pub min_sample_s: f64,
    /// Measure a second member of each class run (when the budget pays for
    /// it; never with `full`, which measures every member).
    pub twins: bool,
}

/// Seconds per pass of a case (its slowest thread), over the samples.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct CaseTime {
    #[serde(deserialize_with = "f64_or_nan")]
    pub median: f64,
    /// Fastest sample.
    #[serde(deserialize_with = "f64_or_nan")]
    pub best: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub max: f64,
    /// Interquartile range over the median.
    #[serde(deserialize_with = "f64_or_nan")]
    pub spread: f64,
    /// Half-width of the median's 95% confidence interval over the median.
    #[serde(deserialize_with = "f64_or_nan")]
    pub rel_ci: f64,
    pub samples: usize,
}

impl CaseTime {
    fn of(s: &Summary) -> Self {
        CaseTime {
            median: s.median,
            best: s.min,
            max: s.max,
            spread: s.spread,
            rel_ci: s.rel_ci,
            samples: s.n,
        }
    }
}

/// One foreground thread's outcome in a case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadResult {
    #[serde(flatten)]
    pub case: ThreadCase,
    pub label: String,
    /// Seconds per pass over its buffer (median over samples).
    #[serde(deserialize_with = "f64_or_nan")]
    pub seconds: f64,
    /// Program bytes per second / 1e9 (median): for the line kernels one
    /// word per 64-byte line.
    #[serde(deserialize_with = "f64_or_nan")]
    pub gbps: f64,
    /// Bytes memory moves per second / 1e9: whole lines, write-allocate
    /// included for ordinary stores.
    #[serde(deserialize_with = "f64_or_nan")]
    pub memory_gbps: f64,
    /// CPUs the thread was seen on.
    pub seen_cpus: Vec<u32>,
    pub verified: bool,
}

/// One case's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    pub labels: Vec<String>,
    pub hop_class: String,
    /// Threads sharing hardware: `cpu` (time-shared), `core` (SMT), `none`.
    pub sharing: String,
    pub class_size: u64,
    pub class_key: String,
    /// Seconds per pass of the slowest thread: the case's time.
    pub seconds: CaseTime,
    /// The threads' seconds per pass (each its median) summed: the total
    /// time the study normalises.
    #[serde(default = "nan", deserialize_with = "f64_or_nan")]
    pub total_seconds: f64,
    /// Each sample of that time, in the order taken: what the findings'
    /// rank tests compare.
    #[serde(default, deserialize_with = "vec_f64_or_nan")]
    pub samples: Vec<f64>,
    /// `total_seconds` over the fastest idle case's of the same thread
    /// count ([`NORMALIZATION`]; the run's `normalization` says the rule).
    #[serde(deserialize_with = "f64_or_nan")]
    pub normalized: f64,
    pub threads: Vec<ThreadResult>,
    /// Background achieved, bytes/s per background thread, while this case ran.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub background_achieved: Vec<f64>,
    pub background_cpus: Vec<u32>,
    /// Threads on their CPUs, buffers on their nodes (and background verified).
    pub verified: bool,
    pub problems: Vec<String>,
}

/// The cases of one thread count under one background setting.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepRun {
    pub threads: usize,
    pub background: Option<Background>,
    /// Cases of the full enumeration.
    pub total_cases: u64,
    /// Classes of equivalent cases (= total with `--every-case`).
    pub classes: u64,
    /// Cases run (fewer than `classes` under `--budget`).
    pub cases_run: u64,
    /// Hop classes present in the space and how many of them were run.
    pub hop_classes: u64,
    pub hop_classes_run: u64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
    /// What `normalized` is relative to, in words.
    #[serde(default = "old_normalization")]
    pub normalization: String,
    pub cases: Vec<CaseResult>,
    /// Classes measured at two members, to test the symmetry the folding
    /// assumed (finding e).
    #[serde(default)]
    pub twins: Vec<TwinPair>,
}

/// A class measured at two members in interleaved runs: representative,
/// twin, representative, twin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TwinPair {
    pub class_key: String,
    pub hop_class: String,
    /// How the twin differs from the representative.
    pub moved_by: TwinMove,
    pub labels: Vec<String>,
    pub twin_labels: Vec<String>,
    /// Seconds per pass (slowest thread) of every sample of both runs of
    /// each member.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub samples: Vec<f64>,
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub twin_samples: Vec<f64>,
    /// Every thread and buffer of both members where it was put.
    pub verified: bool,
    /// The rank test of the twin's samples against the representative's
    /// (absent in results written before report schema 1.1, and when a
    /// sample is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<RankComparison>,
}

/// The rule of every case's `normalized`: the classic study's (and
/// `--scenarios`'), so a sweep and the study's figures read alike.
pub const NORMALIZATION: &str = "total time of the threads (their seconds per pass summed) over the fastest idle case's of the same thread count, as the classic study normalises";

/// The rule when the sweep ran no idle case of a thread count.
pub const NORMALIZATION_LOADED: &str = "total time of the threads (their seconds per pass summed) over the fastest case's of the same thread count under any load (no idle run to normalise to)";

/// What results written before the study's rule were normalised by.
fn old_normalization() -> String {
    "time of the slowest thread over the fastest case of the same run".into()
}

fn nan() -> f64 {
    f64::NAN
}

impl SweepRun {
    /// What the run was measured under: `idle`, or
    /// [`Background::describe`].
    pub fn condition(&self) -> String {
        condition(self.background.as_ref())
    }
}

/// A finished sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepResult {
    pub folded: bool,
    /// Node automorphisms the folding used (saturating at `u64::MAX`).
    pub node_automorphisms: u64,
    /// The same number exactly, in decimal (8 nodes with a flat distance
    /// table have 40320; 64 have about 10^89).
    #[serde(default)]
    pub node_symmetry_order: String,
    /// The order of the whole machine tree's automorphisms that keep the
    /// sweep's CPUs and memory nodes (nodes, and a node's alike cores,
    /// caches and PUs), exactly; empty in results written before it.
    #[serde(default)]
    pub machine_symmetry_order: String,
    pub cpus: Vec<u32>,
    pub mem_nodes: Vec<u32>,
    pub accesses: Vec<Access>,
    pub read_kernel: String,
    pub write_kernel: String,
    pub buffer_bytes: u64,
    pub budget_s: Option<f64>,
    pub runs: Vec<SweepRun>,
    /// Each (thread index, memory node) buffer: where its pages were when
    /// allocated and when the sweep ended.
    pub buffers: Vec<SweepBuffer>,
    pub verified: bool,
    pub warnings: Vec<String>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
    /// Whether the threads' `memory_gbps` are only assumed (always, per
    /// thread) and what the memory controllers counted over all the cases
    /// when they could be counted (the whole machine's bytes).
    #[serde(default)]
    pub memory_traffic: MemoryTraffic,
}

/// A foreground buffer of the sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepBuffer {
    pub thread: usize,
    pub node: u32,
    pub at_start: BufferCheckLite,
    pub at_end: BufferCheckLite,
}

/// The part of a [`BufferCheck`] a sweep keeps (and can read back).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BufferCheckLite {
    #[serde(deserialize_with = "int_keyed_map")]
    pub pages_by_node: BTreeMap<u32, u64>,
    pub untouched_pages: u64,
    pub verified: bool,
    pub problems: Vec<String>,
}

impl From<&BufferCheck> for BufferCheckLite {
    fn from(c: &BufferCheck) -> Self {
        BufferCheckLite {
            pages_by_node: c.pages_by_node.clone(),
            untouched_pages: c.untouched_pages,
            verified: c.verified,
            problems: c.problems.clone(),
        }
    }
}

/// Progress of a sweep: (done, total, what).
pub type SweepProgress<'a> = &'a mut dyn FnMut(u64, u64, &str);

#[cfg(test)]
mod tests {
    use super::*;

    fn high(cpus: Option<IdSet>) -> Background {
        Background {
            level: "high".into(),
            bytes_per_second: 2e9,
            subscription: Subscription::Full,
            cpus,
        }
    }

    fn run(background: Option<Background>) -> SweepRun {
        SweepRun {
            threads: 2,
            background,
            total_cases: 0,
            classes: 0,
            cases_run: 0,
            hop_classes: 0,
            hop_classes_run: 0,
            elapsed_s: 0.0,
            normalization: String::new(),
            cases: Vec::new(),
            twins: Vec::new(),
        }
    }

    /// The study's rule: total time over the fastest idle case's total,
    /// load included (values above 1), per thread count; the slowest
    /// thread alone decides nothing.
    #[test]
    fn cases_are_normalised_by_total_time_to_the_fastest_idle_case() {
        use findings::test_cases::case;
        // Two threads of 1 s and 3 s (total 4): slower by its slowest
        // thread than a case of 2 s and 2 s, faster in total than 3 + 3.
        let mut uneven = case(&[(0, 0, 0, 0), (1, 2, 1, 0)], 3.0);
        uneven.threads[0].seconds = 1.0;
        uneven.total_seconds = 4.0;
        let even = case(&[(0, 0, 1, 1), (1, 2, 0, 1)], 2.0);
        let slow = case(&[(0, 0, 3, 2), (1, 2, 2, 2)], 3.0);
        let mut idle = run(None);
        idle.cases = vec![uneven, even, slow.clone()];
        let mut loaded = run(Some(high(None)));
        loaded.cases = vec![slow];
        let mut runs = vec![idle, loaded];
        normalize(&mut runs);
        let norm: Vec<f64> = runs[0].cases.iter().map(|c| c.normalized).collect();
        assert_eq!(norm, vec![1.0, 1.0, 1.5]);
        assert_eq!(runs[1].cases[0].normalized, 1.5, "over the idle baseline");
        assert_eq!(runs[0].normalization, NORMALIZATION);
        assert_eq!(runs[1].normalization, NORMALIZATION);
        // Only a loaded run: its own fastest, and the rule says so.
        let mut only = vec![runs.pop().unwrap()];
        normalize(&mut only);
        assert_eq!(only[0].cases[0].normalized, 1.0);
        assert_eq!(only[0].normalization, NORMALIZATION_LOADED);
    }

    #[test]
    fn one_description_of_the_background() {
        assert_eq!(
            high(None).describe(),
            "background high (2.00 GB/s per thread), full subscription"
        );
        let under = Background {
            level: "0.5".into(),
            bytes_per_second: 0.5e9,
            subscription: Subscription::Under,
            cpus: None,
        };
        assert_eq!(
            under.describe(),
            "background 0.5 (0.50 GB/s per thread), under subscription"
        );
        let fixed = high(Some(IdSet::parse_list("2-3,6").unwrap()));
        assert_eq!(
            fixed.describe(),
            "background high (2.00 GB/s per thread), on CPUs 2-3,6"
        );
        assert_eq!(fixed.short(), "background high");
    }

    #[test]
    fn a_run_is_idle_or_under_its_background() {
        assert_eq!(run(None).condition(), "idle");
        assert_eq!(
            run(Some(high(None))).condition(),
            "background high (2.00 GB/s per thread), full subscription"
        );
    }
}
