//! The document `numalab report` writes as `DIR/results.json`: the machine
//! model, the environment, and every part of the characterization with its
//! status, so that a report interrupted half way says what is missing and
//! why, and `--resume` can measure only that.
//!
//! The JSON form is versioned ([`REPORT_SCHEMA_VERSION`]) and described by
//! `docs/report-schema.json` (checked in tests). Each part keeps the full
//! result of its experiment, exactly as the experiment's own command writes
//! it with `--json` (without that command's envelope).

use crate::experiments::c2c::C2cResult;
use crate::experiments::loaded_latency::LoadedLatencyResult;
use crate::experiments::matrix::MatrixResult;
use crate::experiments::policies::PoliciesResult;
use crate::experiments::scaling::ScalingResult;
use crate::experiments::sizes::SizesResult;
use crate::experiments::sweep::{Findings, SweepResult};
use crate::machine::Machine;
use crate::measure::environment::Environment;
use crate::report::summary::Summary;
use serde::{Deserialize, Serialize};

/// Name of the document kind, the `schema` field.
pub const REPORT_SCHEMA: &str = "numalab-report";

/// Version of the results.json layout. Bump the major part when a key
/// changes meaning or disappears, the minor part when keys are added.
pub const REPORT_SCHEMA_VERSION: &str = "1.0";

/// How thorough a report is: it sets the default budget and how much each
/// part measures within its share of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// A third of the default budget: fewer sizes, one traffic mix.
    Quick,
    /// The default.
    Default,
    /// Four times the default budget: every size, every mix, all threads per
    /// node in the bandwidth matrix, every background level.
    Full,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Quick => "quick",
            Mode::Default => "default",
            Mode::Full => "full",
        }
    }
}

/// The parts of a report, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartName {
    LatencyMatrix,
    BandwidthMatrix,
    Sizes,
    Scaling,
    C2c,
    LoadedLatencyLocal,
    LoadedLatencyFar,
    Policies,
    Sweep,
    SweepBackground,
}

impl PartName {
    /// Every part, in run order. The sweeps come last: their budget is a
    /// deadline they keep exactly, so they absorb what earlier parts over-
    /// or under-ran.
    pub const ALL: [PartName; 10] = [
        PartName::LatencyMatrix,
        PartName::BandwidthMatrix,
        PartName::Sizes,
        PartName::Scaling,
        PartName::C2c,
        PartName::LoadedLatencyLocal,
        PartName::LoadedLatencyFar,
        PartName::Policies,
        PartName::Sweep,
        PartName::SweepBackground,
    ];

    /// The part's name in JSON, `--parts`, CSV file names and element ids.
    pub fn name(self) -> &'static str {
        match self {
            PartName::LatencyMatrix => "latency-matrix",
            PartName::BandwidthMatrix => "bandwidth-matrix",
            PartName::Sizes => "sizes",
            PartName::Scaling => "scaling",
            PartName::C2c => "c2c",
            PartName::LoadedLatencyLocal => "loaded-latency-local",
            PartName::LoadedLatencyFar => "loaded-latency-far",
            PartName::Policies => "policies",
            PartName::Sweep => "sweep",
            PartName::SweepBackground => "sweep-background",
        }
    }

    /// A title for people.
    pub fn title(self) -> &'static str {
        match self {
            PartName::LatencyMatrix => "Latency matrix",
            PartName::BandwidthMatrix => "Bandwidth matrix",
            PartName::Sizes => "Working-set size sweep",
            PartName::Scaling => "Packed vs spread scaling",
            PartName::C2c => "Core-to-core latency",
            PartName::LoadedLatencyLocal => "Loaded latency, local node",
            PartName::LoadedLatencyFar => "Loaded latency, farthest node",
            PartName::Policies => "Policy comparison",
            PartName::Sweep => "Placement sweep, idle",
            PartName::SweepBackground => "Placement sweep, background load",
        }
    }

    /// The numalab command that measures the same thing on its own.
    pub fn command(self) -> &'static str {
        match self {
            PartName::LatencyMatrix => "numalab matrix --latency",
            PartName::BandwidthMatrix => "numalab matrix --bandwidth",
            PartName::Sizes => "numalab sizes",
            PartName::Scaling => "numalab scaling",
            PartName::C2c => "numalab c2c",
            PartName::LoadedLatencyLocal | PartName::LoadedLatencyFar => "numalab loaded-latency",
            PartName::Policies => "numalab policies",
            PartName::Sweep | PartName::SweepBackground => "numalab sweep",
        }
    }

    /// The names [`PartName::parse_list`] accepts.
    pub fn choices() -> String {
        let mut v: Vec<&str> = Self::ALL.iter().map(|p| p.name()).collect();
        v.extend(["matrix", "loaded-latency", "sweeps", "all"]);
        v.join(", ")
    }

    /// Parses a comma-separated list of part names (`matrix`,
    /// `loaded-latency` and `sweeps` name both parts of that kind, `all`
    /// every part), kept in run order.
    pub fn parse_list(text: &str) -> Result<Vec<PartName>, String> {
        let mut out: Vec<PartName> = Vec::new();
        for item in text.split(',').map(str::trim) {
            let add: Vec<PartName> = match item {
                "all" => Self::ALL.to_vec(),
                "matrix" => vec![PartName::LatencyMatrix, PartName::BandwidthMatrix],
                "loaded-latency" => {
                    vec![PartName::LoadedLatencyLocal, PartName::LoadedLatencyFar]
                }
                "sweeps" => vec![PartName::Sweep, PartName::SweepBackground],
                "" => {
                    return Err(format!(
                        "empty part name in '{text}'; valid: {}",
                        Self::choices()
                    ))
                }
                name => match Self::ALL.iter().find(|p| p.name() == name) {
                    Some(p) => vec![*p],
                    None => {
                        return Err(format!("unknown part '{name}'; valid: {}", Self::choices()))
                    }
                },
            };
            for p in add {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

/// Where a part stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartStatus {
    /// Measured (in this run or an earlier run of the same report).
    Done,
    /// Not run yet: the report is being written.
    Pending,
    /// This machine cannot have it (one memory node has no farthest node,
    /// one CPU has no pair of cores).
    NotApplicable,
    /// Needs the live machine: the report describes a topology file.
    NeedsMachine,
    /// Left out with `--parts`.
    NotSelected,
    /// The budget was spent before the part could start.
    OutOfBudget,
    /// Stopped by Ctrl-C (SIGINT) or SIGTERM, while running or before it started.
    Interrupted,
    /// It ran and failed; the reason says why.
    Failed,
}

impl PartStatus {
    pub fn name(self) -> &'static str {
        match self {
            PartStatus::Done => "done",
            PartStatus::Pending => "pending",
            PartStatus::NotApplicable => "not-applicable",
            PartStatus::NeedsMachine => "needs-machine",
            PartStatus::NotSelected => "not-selected",
            PartStatus::OutOfBudget => "out-of-budget",
            PartStatus::Interrupted => "interrupted",
            PartStatus::Failed => "failed",
        }
    }

    /// Whether the part is missing from the report (`--resume` measures
    /// the missing parts it can).
    pub fn is_missing(self) -> bool {
        !matches!(self, PartStatus::Done | PartStatus::NotApplicable)
    }
}

/// One part: its status and, when done, its result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part<T> {
    pub status: PartStatus,
    /// Why the part is not done (or a note on how it was done), in words.
    pub reason: Option<String>,
    /// Seconds of the report's budget given to this part.
    pub budget_s: Option<f64>,
    /// Seconds it took.
    pub elapsed_s: Option<f64>,
    /// Which run of the report measured it (1 = the first, 2 = the first `--resume`, ...).
    pub run: Option<u32>,
    pub started_utc: Option<String>,
    /// Whether every placement of the part verified (threads on their CPUs,
    /// pages on their nodes).
    pub verified: Option<bool>,
    pub result: Option<T>,
}

impl<T> Part<T> {
    pub fn new(status: PartStatus, reason: Option<String>) -> Self {
        Part {
            status,
            reason,
            budget_s: None,
            elapsed_s: None,
            run: None,
            started_utc: None,
            verified: None,
            result: None,
        }
    }

    /// The part without its result.
    pub fn meta(&self) -> PartMeta {
        PartMeta {
            status: self.status,
            reason: self.reason.clone(),
            budget_s: self.budget_s,
            elapsed_s: self.elapsed_s,
            run: self.run,
            verified: self.verified,
        }
    }

    /// Marks the part as not done; any earlier result is dropped.
    pub fn mark(&mut self, status: PartStatus, reason: Option<String>) {
        *self = Part::new(status, reason);
    }

    /// The result when the part is done.
    pub fn done(&self) -> Option<&T> {
        match self.status {
            PartStatus::Done => self.result.as_ref(),
            _ => None,
        }
    }
}

/// What [`Part::meta`] returns: everything but the result.
#[derive(Debug, Clone, PartialEq)]
pub struct PartMeta {
    pub status: PartStatus,
    pub reason: Option<String>,
    pub budget_s: Option<f64>,
    pub elapsed_s: Option<f64>,
    pub run: Option<u32>,
    pub verified: Option<bool>,
}

/// A placement sweep and the classic questions answered from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepOutcome {
    pub sweep: SweepResult,
    pub findings: Vec<Findings>,
}

/// Every part, each under its own key (in run order).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Parts {
    #[serde(rename = "latency-matrix")]
    pub latency_matrix: Part<MatrixResult>,
    #[serde(rename = "bandwidth-matrix")]
    pub bandwidth_matrix: Part<MatrixResult>,
    pub sizes: Part<SizesResult>,
    pub scaling: Part<ScalingResult>,
    pub c2c: Part<C2cResult>,
    #[serde(rename = "loaded-latency-local")]
    pub loaded_latency_local: Part<LoadedLatencyResult>,
    #[serde(rename = "loaded-latency-far")]
    pub loaded_latency_far: Part<LoadedLatencyResult>,
    pub policies: Part<PoliciesResult>,
    pub sweep: Part<SweepOutcome>,
    #[serde(rename = "sweep-background")]
    pub sweep_background: Part<SweepOutcome>,
}

/// Runs `$body` with `$p` bound to the part named `$name` of `$parts`
/// (each part has its own result type, so a plain match cannot return it).
macro_rules! with_part {
    (&mut $parts:expr, $name:expr, |$p:ident| $body:expr) => {
        with_part!(@go [&mut] $parts, $name, $p, $body)
    };
    (&$parts:expr, $name:expr, |$p:ident| $body:expr) => {
        with_part!(@go [&] $parts, $name, $p, $body)
    };
    (@go [$($r:tt)+] $parts:expr, $name:expr, $p:ident, $body:expr) => {
        match $name {
            PartName::LatencyMatrix => { let $p = $($r)+ $parts.latency_matrix; $body }
            PartName::BandwidthMatrix => { let $p = $($r)+ $parts.bandwidth_matrix; $body }
            PartName::Sizes => { let $p = $($r)+ $parts.sizes; $body }
            PartName::Scaling => { let $p = $($r)+ $parts.scaling; $body }
            PartName::C2c => { let $p = $($r)+ $parts.c2c; $body }
            PartName::LoadedLatencyLocal => { let $p = $($r)+ $parts.loaded_latency_local; $body }
            PartName::LoadedLatencyFar => { let $p = $($r)+ $parts.loaded_latency_far; $body }
            PartName::Policies => { let $p = $($r)+ $parts.policies; $body }
            PartName::Sweep => { let $p = $($r)+ $parts.sweep; $body }
            PartName::SweepBackground => { let $p = $($r)+ $parts.sweep_background; $body }
        }
    };
}

impl Parts {
    /// Every part with the same status and reason.
    pub fn all(status: PartStatus, reason: Option<String>) -> Self {
        Parts {
            latency_matrix: Part::new(status, reason.clone()),
            bandwidth_matrix: Part::new(status, reason.clone()),
            sizes: Part::new(status, reason.clone()),
            scaling: Part::new(status, reason.clone()),
            c2c: Part::new(status, reason.clone()),
            loaded_latency_local: Part::new(status, reason.clone()),
            loaded_latency_far: Part::new(status, reason.clone()),
            policies: Part::new(status, reason.clone()),
            sweep: Part::new(status, reason.clone()),
            sweep_background: Part::new(status, reason),
        }
    }

    /// A part's status, times and reason.
    pub fn meta(&self, name: PartName) -> PartMeta {
        with_part!(&self, name, |p| p.meta())
    }

    /// Marks a part as not done (dropping any result).
    pub fn mark(&mut self, name: PartName, status: PartStatus, reason: Option<String>) {
        with_part!(&mut self, name, |p| p.mark(status, reason))
    }

    /// Records budget, start time and run number of a part about to run.
    pub fn start(&mut self, name: PartName, budget_s: f64, run: u32, started_utc: String) {
        with_part!(&mut self, name, |p| {
            p.budget_s = Some(budget_s);
            p.run = Some(run);
            p.started_utc = Some(started_utc);
        })
    }

    /// Records how long a part took (whatever its outcome).
    pub fn set_elapsed(&mut self, name: PartName, elapsed_s: f64) {
        with_part!(&mut self, name, |p| p.elapsed_s = Some(elapsed_s))
    }

    /// Sets the reason (or note) of a part.
    pub fn set_reason(&mut self, name: PartName, reason: Option<String>) {
        with_part!(&mut self, name, |p| p.reason = reason)
    }

    /// Statuses of every part, in run order.
    pub fn statuses(&self) -> Vec<(PartName, PartStatus)> {
        PartName::ALL
            .iter()
            .map(|&n| (n, self.meta(n).status))
            .collect()
    }
}

/// One invocation of `numalab report` on this document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// 1 for the first run, 2 for the first `--resume`, ...
    pub run: u32,
    pub resumed: bool,
    pub command_line: Vec<String>,
    pub started_utc: String,
    pub finished_utc: Option<String>,
    pub budget_s: f64,
    pub elapsed_s: f64,
    /// `running`, `complete`, `incomplete` (some part missing), `interrupted`.
    pub outcome: String,
    /// Parts this run measured.
    pub measured: Vec<PartName>,
    /// Environment fields that differ from the first run's (a resumed
    /// report measured under other settings says so).
    pub environment_changes: Vec<String>,
}

/// Whether every placement of the report verified.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ReportVerification {
    pub verified: bool,
    /// One line per part whose placement did not verify.
    pub problems: Vec<String>,
}

/// The whole document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReportResults {
    /// Always [`REPORT_SCHEMA`].
    pub schema: String,
    pub schema_version: String,
    /// Always `report`.
    pub command: String,
    pub numalab_version: String,
    pub mode: Mode,
    /// The whole report's time budget, seconds (of the first run).
    pub budget_s: f64,
    /// Bytes per buffer of the memory-bound measurements.
    pub buffer_bytes: u64,
    /// Parts asked for (`--parts`), in run order.
    pub selected_parts: Vec<PartName>,
    /// Every selected part done (or not applicable to this machine).
    pub complete: bool,
    /// Seconds measured in all runs together.
    pub elapsed_s: f64,
    pub runs: Vec<RunRecord>,
    pub machine: Machine,
    /// What results depend on (kernel, THP, NUMA balancing, governor, cgroup,
    /// versions); absent for a report made from a topology file.
    pub environment: Option<Environment>,
    pub parts: Parts,
    /// The plain-sentence summary at the top of the report.
    pub summary: Summary,
    pub verification: ReportVerification,
}

impl ReportResults {
    /// Parts that are missing, with status and reason, in run order.
    pub fn missing(&self) -> Vec<(PartName, PartMeta)> {
        PartName::ALL
            .iter()
            .map(|&n| (n, self.parts.meta(n)))
            .filter(|(_, m)| m.status.is_missing() && m.status != PartStatus::NotSelected)
            .collect()
    }

    /// Recomputes `complete` and `verification` from the parts.
    pub fn refresh_status(&mut self) {
        self.complete = self
            .selected_parts
            .iter()
            .all(|&n| !self.parts.meta(n).status.is_missing());
        let mut problems = Vec::new();
        for n in PartName::ALL {
            let meta = self.parts.meta(n);
            if meta.status == PartStatus::Done && meta.verified == Some(false) {
                problems.push(format!(
                    "{}: some placement did not verify (see parts.{}.result)",
                    n.name(),
                    n.name()
                ));
            }
        }
        self.verification = ReportVerification {
            verified: problems.is_empty(),
            problems,
        };
    }

    /// Reads a results.json back.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != REPORT_SCHEMA {
            return Err(format!(
                "not a numalab report (its schema is '{schema}', expected '{REPORT_SCHEMA}')"
            ));
        }
        let version = v
            .get("schema_version")
            .and_then(|s| s.as_str())
            .unwrap_or("");
        let major = |s: &str| s.split('.').next().unwrap_or("").to_string();
        if major(version) != major(REPORT_SCHEMA_VERSION) {
            return Err(format!(
                "report schema version {version} cannot be read by this numalab (it reads {REPORT_SCHEMA_VERSION})"
            ));
        }
        serde_json::from_value(v).map_err(|e| format!("malformed report: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_lists_parse_in_run_order() {
        assert_eq!(
            PartName::parse_list("sweeps,matrix").unwrap(),
            vec![
                PartName::LatencyMatrix,
                PartName::BandwidthMatrix,
                PartName::Sweep,
                PartName::SweepBackground
            ]
        );
        assert_eq!(PartName::parse_list("all").unwrap().len(), 10);
        assert_eq!(
            PartName::parse_list("c2c,c2c").unwrap(),
            vec![PartName::C2c]
        );
        let e = PartName::parse_list("c2c,latency").unwrap_err();
        assert!(
            e.starts_with("unknown part 'latency'; valid: latency-matrix"),
            "{e}"
        );
        assert!(PartName::parse_list("c2c,")
            .unwrap_err()
            .contains("empty part name"));
    }

    #[test]
    fn names_match_serde() {
        for p in PartName::ALL {
            let v = serde_json::to_value(p).unwrap();
            assert_eq!(v.as_str(), Some(p.name()));
        }
        for s in [
            PartStatus::Done,
            PartStatus::OutOfBudget,
            PartStatus::NeedsMachine,
            PartStatus::NotApplicable,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap().as_str(), Some(s.name()));
        }
    }

    #[test]
    fn marking_a_part_drops_its_result() {
        let mut parts = Parts::all(PartStatus::Pending, None);
        parts.start(PartName::C2c, 3.0, 1, "t".into());
        assert_eq!(parts.meta(PartName::C2c).budget_s, Some(3.0));
        parts.mark(
            PartName::C2c,
            PartStatus::Interrupted,
            Some("Ctrl-C".into()),
        );
        let m = parts.meta(PartName::C2c);
        assert_eq!(m.status, PartStatus::Interrupted);
        assert_eq!(m.budget_s, None);
        assert!(m.status.is_missing());
        assert!(!PartStatus::NotApplicable.is_missing());
    }
}
