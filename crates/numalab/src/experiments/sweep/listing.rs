//! What `numalab sweep` prints as JSON besides a run's own result: the
//! sweep with its findings (`sweep --json`), and the plan of `sweep --list`
//! (every class of every thread count, written as it is read).

use super::{Findings, PlannedCase, SweepResult, ThreadCase};
use serde::Serialize;

/// A sweep with its findings, as `sweep --json` prints it (inside the
/// command's envelope).
#[derive(Serialize)]
pub struct SweepReport<'a> {
    #[serde(flatten)]
    pub sweep: &'a SweepResult,
    pub findings: &'a [Findings],
}

/// `sweep --list --json`: the plan of each thread count (inside the
/// command's envelope).
#[derive(Serialize)]
pub struct SweepListing<'a> {
    pub plans: Vec<ListedPlan<'a>>,
}

/// One thread count's plan; its cases are written as they are read,
/// never gathered into one document in memory first.
#[derive(Serialize)]
pub struct ListedPlan<'a> {
    pub threads: usize,
    pub total_cases: u64,
    pub classes: usize,
    /// Saturating at `u64::MAX`; exactly in `node_symmetry_order`.
    pub node_automorphisms: u64,
    pub node_symmetry_order: &'a str,
    /// The whole machine tree's automorphisms that keep the sweep's
    /// CPUs and memory nodes (cores, caches, PUs and nodes).
    pub machine_symmetry_order: &'a str,
    pub cases: ListedCases<'a>,
}

/// The cases of one plan, each with its labels, hop class and class size.
pub struct ListedCases<'a>(pub &'a [PlannedCase]);

#[derive(Serialize)]
struct ListedCase<'a> {
    labels: Vec<String>,
    threads: &'a [ThreadCase],
    hop_class: String,
    class_size: u64,
    class_key: &'a str,
}

impl Serialize for ListedCases<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|c| ListedCase {
            labels: c.threads.iter().map(|t| t.label()).collect(),
            threads: &c.threads,
            hop_class: c.hop_class(),
            class_size: c.class_size,
            class_key: &c.class_key,
        }))
    }
}
