//! The report's vocabulary, at the bottom of its layers: what a report is
//! (its [`Mode`], its schema's name and version), what names a part
//! ([`PartName`], a plain id) and describes it ([`PartInfo`]), and what a
//! part plans and returns ([`cost`]: the costs it predicts with and the
//! work it does; [`Measured`]), what the key figures are
//! ([`key_figures`]) and how far the host's speed drifted under them
//! ([`drift`]). Nothing here knows which parts exist: that
//! is the registry's ([`crate::registry`]), above the views.

pub mod cost;
pub mod drift;
pub mod key_figures;

pub use cost::{
    default_rule, largest_fitting, spread, CostSource, Costs, Count, CountValue, PartPlan, Work,
    FLOOR_SAMPLES, MIN_MEASUREMENT_S, SAMPLE_S,
};

use serde::{Deserialize, Serialize};
use std::fmt;

/// Name of the document kind, the `schema` field.
pub const REPORT_SCHEMA: &str = "numalab-report";

/// Version of the results.json layout. Bump the major part when a key
/// changes meaning or disappears, the minor part when keys are added.
pub const REPORT_SCHEMA_VERSION: &str = "1.5";

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
    /// node in the bandwidth matrix, every scenario of the study.
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
    /// The id `name`. Only the registry makes them, from its parts' names
    /// ([`crate::registry::Registry::find`]), so every id names a part.
    pub(crate) const fn new(name: &'static str) -> Self {
        PartName(name)
    }

    /// The name as written in JSON, `--parts`, file names and ids.
    pub fn name(self) -> &'static str {
        self.0
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
