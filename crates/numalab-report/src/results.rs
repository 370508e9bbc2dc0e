//! The document `numalab report` writes as `DIR/results.json`: the machine
//! model, the environment, and every part of the characterization with its
//! status, so that a report interrupted half way says what is missing and
//! why, and `--resume` can measure only that.
//!
//! The JSON form is versioned ([`REPORT_SCHEMA_VERSION`]) and described by
//! `docs/report-schema.json` (checked in tests). Each part keeps the full
//! result of its experiment, exactly as the experiment's own command writes
//! it with `--json` (without that command's envelope).

use crate::model::drift::HostDrift;
pub use crate::model::{Mode, REPORT_SCHEMA, REPORT_SCHEMA_VERSION};
use crate::model::{PartName, PartPlan};
use crate::part::PartResult;
use crate::registry::REPORT;
use crate::summary::Summary;
use numalab::machine::Machine;
use numalab::measure::environment::Environment;
use serde::{Deserialize, Serialize};

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
#[derive(Debug, Clone, Serialize)]
pub struct PartRecord {
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
    /// The experiment's result, as its command writes it with `--json`
    /// (without that command's envelope).
    pub result: Option<PartResult>,
    /// The work planned for its budget and the predicted seconds (absent
    /// in reports of numalab before 0.2 and for parts not started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PartPlan>,
}

impl PartRecord {
    pub fn new(status: PartStatus, reason: Option<String>) -> Self {
        PartRecord {
            status,
            reason,
            budget_s: None,
            elapsed_s: None,
            run: None,
            started_utc: None,
            verified: None,
            result: None,
            plan: None,
        }
    }

    /// Marks the part as not done; any earlier result is dropped.
    pub fn mark(&mut self, status: PartStatus, reason: Option<String>) {
        *self = PartRecord::new(status, reason);
    }

    /// The result when the part is done.
    pub fn done(&self) -> Option<&PartResult> {
        match self.status {
            PartStatus::Done => self.result.as_ref(),
            _ => None,
        }
    }
}

/// Every part of the registry with its record, in run order (serialized as
/// an object keyed by part name).
#[derive(Debug, Clone)]
pub struct Parts(Vec<(PartName, PartRecord)>);

impl Parts {
    /// Every part with the same status and reason.
    pub fn all(status: PartStatus, reason: Option<String>) -> Self {
        Parts(
            REPORT
                .all()
                .into_iter()
                .map(|p| (p, PartRecord::new(status, reason.clone())))
                .collect(),
        )
    }

    /// Every part and its record, in run order.
    pub fn iter(&self) -> impl Iterator<Item = (PartName, &PartRecord)> {
        self.0.iter().map(|(n, r)| (*n, r))
    }

    /// A part's record.
    pub fn get(&self, name: PartName) -> &PartRecord {
        &self.0[REPORT.index(name)].1
    }

    /// A part's record, to change it.
    pub fn get_mut(&mut self, name: PartName) -> &mut PartRecord {
        &mut self.0[REPORT.index(name)].1
    }

    /// Marks a part as not done (dropping any result).
    pub fn mark(&mut self, name: PartName, status: PartStatus, reason: Option<String>) {
        self.get_mut(name).mark(status, reason)
    }

    /// Records budget, start time and run number of a part about to run.
    pub fn start(&mut self, name: PartName, budget_s: f64, run: u32, started_utc: String) {
        let p = self.get_mut(name);
        p.budget_s = Some(budget_s);
        p.run = Some(run);
        p.started_utc = Some(started_utc);
    }

    /// Statuses of every part, in run order.
    pub fn statuses(&self) -> Vec<(PartName, PartStatus)> {
        self.iter().map(|(n, r)| (n, r.status)).collect()
    }
}

impl Serialize for Parts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (n, r) in &self.0 {
            map.serialize_entry(n.name(), r)?;
        }
        map.end()
    }
}

/// A part record as read from JSON, before its part decodes the result.
#[derive(Deserialize)]
struct RawRecord {
    status: PartStatus,
    reason: Option<String>,
    budget_s: Option<f64>,
    elapsed_s: Option<f64>,
    run: Option<u32>,
    started_utc: Option<String>,
    verified: Option<bool>,
    result: Option<serde_json::Value>,
    #[serde(default)]
    plan: Option<PartPlan>,
}

impl<'de> Deserialize<'de> for Parts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut raw: std::collections::BTreeMap<String, RawRecord> =
            std::collections::BTreeMap::deserialize(d)?;
        let mut out = Vec::new();
        for p in REPORT.all() {
            let rec = match raw.remove(p.name()) {
                // A part this numalab has but the report's numalab had not.
                None => PartRecord::new(
                    PartStatus::NotSelected,
                    Some("not in this report: it was made by a numalab without this part".into()),
                ),
                Some(r) => {
                    let result = match r.result {
                        None | Some(serde_json::Value::Null) => None,
                        Some(v) => Some(REPORT.part(p).decode(v).map_err(|e| {
                            serde::de::Error::custom(format!("parts.{p}.result: {e}"))
                        })?),
                    };
                    PartRecord {
                        status: r.status,
                        reason: r.reason,
                        budget_s: r.budget_s,
                        elapsed_s: r.elapsed_s,
                        run: r.run,
                        started_utc: r.started_utc,
                        verified: r.verified,
                        result,
                        plan: r.plan,
                    }
                }
            };
            out.push((p, rec));
        }
        Ok(Parts(out))
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
    /// The operation costs the run planned with (probed at its start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub costs: Option<crate::model::Costs>,
    /// What the run could not keep, e.g. a budget below what the smallest
    /// forms of its parts need.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
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
    /// The contention model calibrated from this report, predicting the
    /// sweep's classes and the scenarios it ran (`predicted.rs`); absent
    /// when neither was run, and in reports written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelSection>,
    /// The host's speed looked at between the parts (on the live machine),
    /// which widens the key figures' intervals (`crate::model::drift`);
    /// absent without probes.
    #[serde(default, skip_serializing_if = "HostDrift::is_empty")]
    pub drift: HostDrift,
}

/// The report's predicted vs measured view (docs/model.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ModelSection {
    /// Why there is no prediction (a part calibration needs is missing).
    pub not_available: Option<String>,
    /// The fitted parameters, their residuals and the scaling check.
    pub calibration: Option<numalab::model::calibrate::Calibration>,
    /// The sweep's measured classes against the model.
    pub sweep: Option<numalab::model::predict::ModelCheck>,
    /// Sweep cases left out (threads taking turns on one CPU).
    pub sweep_skipped: usize,
    /// The scenarios' measured cases against the model.
    pub scenarios: Option<numalab::model::predict::ModelCheck>,
    pub notes: Vec<String>,
}

impl ReportResults {
    /// Parts that are missing (and selected), in run order.
    pub fn missing(&self) -> Vec<(PartName, &PartRecord)> {
        self.parts
            .iter()
            .filter(|(_, r)| r.status.is_missing() && r.status != PartStatus::NotSelected)
            .collect()
    }

    /// Recomputes `complete` and `verification` from the parts.
    pub fn refresh_status(&mut self) {
        self.complete = self
            .selected_parts
            .iter()
            .all(|&n| !self.parts.get(n).status.is_missing());
        let problems: Vec<String> = self
            .parts
            .iter()
            .filter(|(_, r)| r.status == PartStatus::Done && r.verified == Some(false))
            .map(|(n, _)| format!("{n}: some placement did not verify (see parts.{n}.result)"))
            .collect();
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

    fn part(name: &str) -> PartName {
        REPORT.find(name).unwrap()
    }

    #[test]
    fn part_lists_parse_in_run_order() {
        assert_eq!(
            REPORT.parse_list("sweeps,matrix").unwrap(),
            vec![
                part("latency-matrix"),
                part("bandwidth-matrix"),
                part("sweep-scenarios"),
                part("sweep")
            ]
        );
        assert_eq!(REPORT.parse_list("all").unwrap(), REPORT.all());
        assert_eq!(REPORT.parse_list("c2c,c2c").unwrap(), vec![part("c2c")]);
        let e = REPORT.parse_list("c2c,latency").unwrap_err();
        assert!(
            e.starts_with("unknown part 'latency'; valid: latency-matrix"),
            "{e}"
        );
        assert!(REPORT
            .parse_list("c2c,")
            .unwrap_err()
            .contains("empty part name"));
    }

    #[test]
    fn names_match_serde() {
        for p in REPORT.all() {
            let v = serde_json::to_value(p).unwrap();
            assert_eq!(v.as_str(), Some(p.name()));
            let back: PartName = serde_json::from_value(v).unwrap();
            assert_eq!(back, p);
        }
        let e = serde_json::from_str::<PartName>("\"latency\"").unwrap_err();
        assert!(e.to_string().contains("unknown part 'latency'"), "{e}");
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
        let c2c = part("c2c");
        let mut parts = Parts::all(PartStatus::Pending, None);
        parts.start(c2c, 3.0, 1, "t".into());
        assert_eq!(parts.get(c2c).budget_s, Some(3.0));
        parts.mark(c2c, PartStatus::Interrupted, Some("Ctrl-C".into()));
        let m = parts.get(c2c);
        assert_eq!(m.status, PartStatus::Interrupted);
        assert_eq!(m.budget_s, None);
        assert!(m.status.is_missing());
        assert!(!PartStatus::NotApplicable.is_missing());
    }

    #[test]
    fn parts_serialize_as_an_object_in_run_order_and_read_back() {
        let mut parts = Parts::all(PartStatus::Pending, None);
        parts.mark(part("sizes"), PartStatus::Failed, Some("failed: x".into()));
        let v = serde_json::to_value(&parts).unwrap();
        let text = serde_json::to_string(&parts).unwrap();
        // In run order in the file (not alphabetical).
        assert!(text.find("latency-matrix").unwrap() < text.find("bandwidth-matrix").unwrap());
        assert_eq!(v["sizes"]["status"], "failed");
        assert_eq!(v["sizes"]["reason"], "failed: x");
        assert!(v["c2c"]["result"].is_null());
        let back: Parts = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back.get(part("sizes")).status, PartStatus::Failed);
        // A part the file does not have (an older numalab) is not selected.
        let mut older = v;
        older.as_object_mut().unwrap().remove("c2c");
        let back: Parts = serde_json::from_value(older).unwrap();
        assert_eq!(back.get(part("c2c")).status, PartStatus::NotSelected);
        // A result its part cannot read is an error naming the part.
        let mut bad = serde_json::to_value(&parts).unwrap();
        bad["c2c"]["result"] = serde_json::json!({"cpus": "no"});
        let e = serde_json::from_value::<Parts>(bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("parts.c2c.result"), "{e}");
    }
}
