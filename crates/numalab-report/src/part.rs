//! A part of `numalab report`, behind one trait.
//!
//! A part is one experiment measured within a share of the report's
//! budget, with one view of its result: the CSV tables, the section of
//! report.html, the plain sentences and advice of the summary, and the
//! text a terminal shows. What runs and writes a whole report (the
//! session, the document, its tables, summary and page, above the
//! registry) knows parts only through [`Part`], so a new part is its
//! experiment, its view file and one registry line (ARCHITECTURE.md,
//! "Adding a report part").
//!
//! Each part implements the typed [`ReportPart`] (its result is a concrete
//! type); the blanket impl turns it into the object-safe [`Part`] the
//! registry holds, with results kept as [`PartResult`] (type-erased, read
//! back through the part that wrote them).

use crate::csv::Table;
use crate::html::Section;
use crate::model::PartPlan;
pub use crate::model::{
    default_rule, Costs, Measured, Mode, PartInfo, PartName, FULL_ONLY_REASON, MIN_MEASUREMENT_S,
};
use crate::plan::PlanEnv;
use crate::summary::SummaryBuilder;
use numalab::machine::Machine;
use numalab::measure::kernels::Isa;
use numalab::measure::stats::StopRule;
use numalab::placement::PlacementError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::Any;
use std::fmt;
use std::time::Duration;

/// Where a running part says what it is doing. `Send`, because some
/// experiments report progress from the threads they measure with.
pub trait Progress: Send {
    /// What the running part `part` is doing now.
    fn step(&mut self, part: PartName, what: &str);
}

/// A part's result, whatever its type: each part reads its own back.
pub struct PartResult(Box<dyn ResultValue>);

trait ResultValue: Any + Send + Sync + fmt::Debug {
    fn to_json(&self) -> serde_json::Result<serde_json::Value>;
    fn clone_box(&self) -> Box<dyn ResultValue>;
    fn as_any(&self) -> &dyn Any;
}

impl<T> ResultValue for T
where
    T: Serialize + Clone + fmt::Debug + Send + Sync + 'static,
{
    fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::to_value(self)
    }
    fn clone_box(&self) -> Box<dyn ResultValue> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl PartResult {
    pub fn new<T: Serialize + Clone + fmt::Debug + Send + Sync + 'static>(v: T) -> Self {
        PartResult(Box::new(v))
    }

    /// The result as its type, when it is one.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref()
    }

    /// The result as JSON.
    pub fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        self.0.to_json()
    }
}

impl Clone for PartResult {
    fn clone(&self) -> Self {
        PartResult(self.0.clone_box())
    }
}

impl fmt::Debug for PartResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for PartResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

/// What a running part may use: the machine, the report's settings, the
/// calibrated costs, and where progress goes.
pub struct PartContext<'a> {
    pub m: &'a Machine,
    pub mode: Mode,
    pub isa: Isa,
    /// Bytes per buffer of the memory-bound measurements (before fitting to
    /// a node's free memory).
    pub size: usize,
    pub costs: Costs,
    pub(crate) obs: &'a mut dyn Progress,
    pub(crate) part: PartName,
}

impl PartContext<'_> {
    /// What this part plans with: the machine, the mode, the buffer size
    /// and the costs, on the live machine.
    pub fn env(&self) -> PlanEnv<'_> {
        PlanEnv {
            m: self.m,
            mode: self.mode,
            size: self.size,
            costs: &self.costs,
            live: self.m.is_live(),
        }
    }

    /// Says what the part is doing now.
    pub fn step(&mut self, what: &str) {
        let p = self.part;
        self.obs.step(p, what);
    }

    /// A stop rule with `seconds` of budget (at least
    /// [`MIN_MEASUREMENT_S`]): see [`default_rule`].
    pub fn rule(&self, seconds: f64) -> StopRule {
        StopRule {
            budget: Duration::from_secs_f64(seconds.max(MIN_MEASUREMENT_S)),
            ..default_rule()
        }
    }

    /// `budget` less `fixed` seconds, shared by `n` measurements, within
    /// [`MIN_MEASUREMENT_S`]..`max`.
    pub fn per_measurement(&self, budget: f64, fixed: f64, n: usize, max: f64) -> f64 {
        ((budget - fixed) / n.max(1) as f64).clamp(MIN_MEASUREMENT_S, max)
    }
}

/// A part of the report, with its result's own type. Implement this; the
/// registry holds it as a [`Part`].
pub trait ReportPart: Sync {
    /// What the experiment returns (stored in results.json as it is).
    type Result: Serialize + DeserializeOwned + Clone + fmt::Debug + Send + Sync + 'static;

    fn info(&self) -> PartInfo;

    /// Whether the machine can have the part; `Err` says why not.
    fn applicable(&self, _m: &Machine) -> Result<(), String> {
        Ok(())
    }

    /// The work it does within `budget_s` seconds on `env`'s machine and
    /// its predicted cost (see [`crate::budget`]): its mode's full
    /// form when that fits, else cut down; below its smallest form's cost,
    /// the smallest form. `run` must do what this says.
    fn plan(&self, env: &PlanEnv, budget_s: f64) -> PartPlan;

    /// Measures within `budget_s` seconds, doing the work of
    /// [`ReportPart::plan`] for that budget.
    fn run(
        &self,
        ctx: &mut PartContext,
        budget_s: f64,
    ) -> Result<Measured<Self::Result>, PlacementError>;

    /// Whether every placement of the result verified.
    fn verified(&self, r: &Self::Result) -> bool;

    /// The result as a terminal shows it (the part's command prints the same).
    fn text(&self, r: &Self::Result, m: &Machine) -> String;

    /// Its tables: CSV files, and tables of its HTML section.
    fn tables(&self, r: &Self::Result, m: &Machine) -> Vec<Table>;

    /// Its section of report.html (the page writes the heading and the note).
    fn html(&self, r: &Self::Result, s: &mut Section);

    /// Its sentences, advice, key figures and warnings in the summary.
    fn summarize(&self, r: &Self::Result, s: &mut SummaryBuilder);
}

/// A part as the registry holds it: [`ReportPart`] with the result's type
/// erased. Implemented for every [`ReportPart`].
pub trait Part: Sync {
    fn info(&self) -> PartInfo;
    fn applicable(&self, m: &Machine) -> Result<(), String>;
    fn plan(&self, env: &PlanEnv, budget_s: f64) -> PartPlan;
    fn run(
        &self,
        ctx: &mut PartContext,
        budget_s: f64,
    ) -> Result<Measured<PartResult>, PlacementError>;
    fn verified(&self, r: &PartResult) -> bool;
    /// Reads a result back from results.json.
    fn decode(&self, v: serde_json::Value) -> Result<PartResult, String>;
    fn text(&self, r: &PartResult, m: &Machine) -> String;
    fn tables(&self, r: &PartResult, m: &Machine) -> Vec<Table>;
    fn html(&self, r: &PartResult, s: &mut Section);
    fn summarize(&self, r: &PartResult, s: &mut SummaryBuilder);
}

impl<P: ReportPart> Part for P {
    fn info(&self) -> PartInfo {
        ReportPart::info(self)
    }
    fn applicable(&self, m: &Machine) -> Result<(), String> {
        ReportPart::applicable(self, m)
    }
    fn plan(&self, env: &PlanEnv, budget_s: f64) -> PartPlan {
        ReportPart::plan(self, env, budget_s)
    }
    fn run(
        &self,
        ctx: &mut PartContext,
        budget_s: f64,
    ) -> Result<Measured<PartResult>, PlacementError> {
        let m = ReportPart::run(self, ctx, budget_s)?;
        Ok(Measured {
            result: PartResult::new(m.result),
            measuring_s: m.measuring_s,
            fixed_s: m.fixed_s,
            note: m.note,
        })
    }
    fn verified(&self, r: &PartResult) -> bool {
        typed::<P>(self, r).is_some_and(|r| ReportPart::verified(self, r))
    }
    fn decode(&self, v: serde_json::Value) -> Result<PartResult, String> {
        serde_json::from_value::<P::Result>(v)
            .map(PartResult::new)
            .map_err(|e| e.to_string())
    }
    fn text(&self, r: &PartResult, m: &Machine) -> String {
        typed::<P>(self, r)
            .map(|r| ReportPart::text(self, r, m))
            .unwrap_or_default()
    }
    fn tables(&self, r: &PartResult, m: &Machine) -> Vec<Table> {
        typed::<P>(self, r)
            .map(|r| ReportPart::tables(self, r, m))
            .unwrap_or_default()
    }
    fn html(&self, r: &PartResult, s: &mut Section) {
        if let Some(r) = typed::<P>(self, r) {
            ReportPart::html(self, r, s);
        }
    }
    fn summarize(&self, r: &PartResult, s: &mut SummaryBuilder) {
        if let Some(r) = typed::<P>(self, r) {
            ReportPart::summarize(self, r, s);
        }
    }
}

/// `r` as `P`'s result type. A document only ever pairs a part with its own
/// result (the session stores what the part returned, and reading back goes
/// through the part's `decode`), so `None` would be a bug; callers treat it
/// as "nothing to show" rather than panic in the middle of saving a report.
fn typed<'r, P: ReportPart>(p: &P, r: &'r PartResult) -> Option<&'r P::Result> {
    let v = r.get::<P::Result>();
    debug_assert!(v.is_some(), "part {} given a foreign result", p.info().name);
    v
}
