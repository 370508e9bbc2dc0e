//! A part of `numalab report`, behind one trait.
//!
//! A part is one experiment measured within a share of the report's
//! budget, with one view of its result: the CSV tables, the section of
//! report.html, the plain sentences and advice of the summary, and the
//! text a terminal shows. The session ([`super::session`]), the document
//! ([`super::results`]), the tables ([`super::csv`]), the summary
//! ([`super::summary`]) and the page ([`super::html`]) know parts only
//! through [`Part`] and iterate the registry ([`super::views::PARTS`]), so a
//! new part is its experiment, its view file and one registry line
//! (ARCHITECTURE.md, "Adding a report part").
//!
//! Each part implements the typed [`ReportPart`] (its result is a concrete
//! type); the blanket impl turns it into the object-safe [`Part`] the
//! registry holds, with results kept as [`PartResult`] (type-erased, read
//! back through the part that wrote them).

use crate::budget::{PartPlan, PlanEnv};
use crate::csv::Table;
use crate::html::Section;
use crate::results::Mode;
use crate::summary::SummaryBuilder;
use numalab::machine::Machine;
use numalab::measure::kernels::Isa;
use numalab::measure::stats::StopRule;
use numalab::placement::PlacementError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::fmt;
use std::time::Duration;

/// What the front end sees while a report runs. `Send`, because some
/// experiments report progress from the threads they measure with.
pub trait Observer: Send {
    /// Calibration (a few tenths of a second) starts.
    fn calibrating(&mut self) {}
    /// A part starts: its position among the parts of this run and its budget.
    fn part_started(&mut self, part: PartName, index: usize, count: usize, budget_s: f64);
    /// What the running part is doing now.
    fn step(&mut self, part: PartName, what: &str);
    /// A part ended (done or not): the document is up to date and should
    /// be saved now.
    fn part_ended(&mut self, doc: &crate::results::ReportResults, part: PartName);
}

/// The fixed facts of a part: names, budget weight, grouping.
#[derive(Debug, Clone, Copy)]
pub struct PartInfo {
    /// The part's name in JSON, `--parts`, CSV file names and element ids.
    pub name: &'static str,
    /// A title for people.
    pub title: &'static str,
    /// The numalab command that measures the same thing on its own.
    pub command: &'static str,
    /// Names that select this part together with others of its kind in
    /// `--parts` (`matrix` names both matrices).
    pub aliases: &'static [&'static str],
    /// Its share of the budget relative to the other parts.
    pub weight: f64,
    /// The share in `--quick` mode, where fixed costs weigh more.
    pub quick_weight: f64,
    /// It keeps its deadline itself (it runs as many cases as fit and stops
    /// at its budget): it goes last in the registry, and its time teaches
    /// the planner nothing about fixed costs.
    pub keeps_deadline: bool,
    /// Parts of one group (consecutive in the registry) merge their tables
    /// of the same name, shown once after the group's last part.
    pub table_group: Option<&'static str>,
    /// The keys it sets in the summary's key figures (null until measured).
    pub key_figures: &'static [&'static str],
    /// It runs only in `--full` reports (it is slow, or answers a question
    /// most readers do not ask); in other modes, even when named with
    /// `--parts`, it is not applicable with [`FULL_ONLY_REASON`].
    pub full_only: bool,
}

/// Why a [`PartInfo::full_only`] part is not in a report of another mode.
pub const FULL_ONLY_REASON: &str = "runs with --full";

impl PartInfo {
    /// A part with weight `weight` in every mode, in no group and without
    /// key figures.
    pub const fn new(
        name: &'static str,
        title: &'static str,
        command: &'static str,
        weight: f64,
    ) -> Self {
        PartInfo {
            name,
            title,
            command,
            aliases: &[],
            weight,
            quick_weight: weight,
            keeps_deadline: false,
            table_group: None,
            key_figures: &[],
            full_only: false,
        }
    }

    /// The weight in `mode`.
    pub fn weight_in(&self, mode: Mode) -> f64 {
        match mode {
            Mode::Quick => self.quick_weight,
            _ => self.weight,
        }
    }
}

/// A part's name: one of the registry's (serialized as the string).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartName(&'static str);

impl PartName {
    /// The part named `name`, if the registry has it.
    pub fn find(name: &str) -> Option<PartName> {
        crate::views::PARTS
            .iter()
            .map(|p| p.info().name)
            .find(|n| *n == name)
            .map(PartName)
    }

    /// The name as written in JSON, `--parts`, file names and ids.
    pub fn name(self) -> &'static str {
        self.0
    }

    /// The part's implementation.
    pub fn part(self) -> &'static dyn Part {
        crate::views::PARTS[self.index()]
    }

    /// Position in the registry (run order).
    pub fn index(self) -> usize {
        crate::views::PARTS
            .iter()
            .position(|p| p.info().name == self.0)
            .expect("a PartName is always in the registry")
    }

    /// A title for people.
    pub fn title(self) -> &'static str {
        self.part().info().title
    }

    /// Whether a report of `mode` on `m` can have the part: the part's own
    /// [`Part::applicable`], after [`PartInfo::full_only`] (`Err` says why
    /// not, [`FULL_ONLY_REASON`] for a full-only part outside `--full`).
    pub fn available(self, m: &Machine, mode: Mode) -> Result<(), String> {
        let part = self.part();
        if part.info().full_only && mode != Mode::Full {
            return Err(FULL_ONLY_REASON.to_string());
        }
        part.applicable(m)
    }

    /// Every part, in run order.
    pub fn all() -> Vec<PartName> {
        crate::views::PARTS
            .iter()
            .map(|p| PartName(p.info().name))
            .collect()
    }

    /// The names [`PartName::parse_list`] accepts.
    pub fn choices() -> String {
        let mut v: Vec<&str> = Self::all().iter().map(|p| p.name()).collect();
        for p in crate::views::PARTS {
            for a in p.info().aliases {
                if !v.contains(a) {
                    v.push(a);
                }
            }
        }
        v.push("all");
        v.join(", ")
    }

    /// Parses a comma-separated list of part names (an alias such as
    /// `matrix` names every part of that kind, `all` every part), kept in
    /// run order without repeats.
    pub fn parse_list(text: &str) -> Result<Vec<PartName>, String> {
        let all = Self::all();
        let mut out: Vec<PartName> = Vec::new();
        for item in text.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(format!(
                    "empty part name in '{text}'; valid: {}",
                    Self::choices()
                ));
            }
            let add: Vec<PartName> = if item == "all" {
                all.clone()
            } else {
                all.iter()
                    .copied()
                    .filter(|p| p.name() == item || p.part().info().aliases.contains(&item))
                    .collect()
            };
            if add.is_empty() {
                return Err(format!("unknown part '{item}'; valid: {}", Self::choices()));
            }
            for p in add {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out.sort_by_key(|p| p.index());
        Ok(out)
    }
}

impl fmt::Debug for PartName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PartName({})", self.0)
    }
}

impl fmt::Display for PartName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for PartName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for PartName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        PartName::find(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown part '{s}'; valid: {}",
                PartName::choices()
            ))
        })
    }
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

/// What a part measured, and what it spent doing it.
pub struct Measured<R> {
    pub result: R,
    /// Seconds of measurement budgets it planned.
    pub measuring_s: f64,
    /// Seconds of fixed costs it predicted (placing and faulting buffers,
    /// building chases, starting threads); 0 when it keeps its own deadline.
    pub fixed_s: f64,
    /// A note on how it was done (a subset of CPUs, ...), shown with it.
    pub note: Option<String>,
}

impl<R> Measured<R> {
    /// A result that planned `measuring_s` seconds of measurement and
    /// predicted `fixed_s` seconds of fixed costs.
    pub fn new(result: R, measuring_s: f64, fixed_s: f64) -> Self {
        Measured {
            result,
            measuring_s,
            fixed_s,
            note: None,
        }
    }

    pub fn with_note(mut self, note: Option<String>) -> Self {
        self.note = note;
        self
    }
}

pub use crate::budget::Costs;

/// Shortest budget a single measurement gets, seconds: below it the
/// statistics have too few samples to mean anything.
pub const MIN_MEASUREMENT_S: f64 = 0.04;

/// The stop rule of a report's measurements, budget aside: warm-up 1, 3
/// to 1000 repetitions, 1% CI.
pub fn default_rule() -> StopRule {
    StopRule {
        warmup: 1,
        min_reps: 3,
        max_reps: 1000,
        target_rel_ci: 0.01,
        budget: Duration::from_secs_f64(MIN_MEASUREMENT_S),
    }
}

/// What a running part may use: the machine, the report's settings, the
/// calibrated costs, and the observer for progress.
pub struct PartContext<'a> {
    pub m: &'a Machine,
    pub mode: Mode,
    pub isa: Isa,
    /// Bytes per buffer of the memory-bound measurements (before fitting to
    /// a node's free memory).
    pub size: usize,
    pub costs: Costs,
    pub(crate) obs: &'a mut dyn Observer,
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

    /// Tells the observer what the part is doing now.
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
