//! `numalab fleet`: the reports of many nodes as one fleet. Per key figure
//! the median, the spread and the nodes far from the rest (a robust
//! z-score, [`robust`]); per setting (kernel, NUMA nodes and distances,
//! memory per node, THP, NUMA balancing, governor, firmware warnings, ...)
//! the values the nodes have; per node a verdict with its reasons.
//!
//! Aggregation streams: each node's results.json is read into the few
//! fields a fleet needs ([`NodeDoc`], the rest skipped by the parser) and
//! dropped before the next is read. What is kept is one column of numbers
//! per figure (8 bytes a node: the exact median and MAD need every value,
//! and 10,000 nodes are 80 KB a figure) and one small integer per setting
//! into that setting's table of distinct values.
//!
//! A fleet directory: `DIR/nodes/NAME/` holds one node's report (written
//! there by `numalab report` on that node), and `DIR/fleet.json`,
//! `fleet.html`, `fleet.txt` and `fleet.csv` the whole fleet.

pub mod compare;
mod render;
pub mod robust;

pub use render::{render_csv, render_html, render_text};

use crate::model::key_figures::key_labels;
use crate::model::REPORT_SCHEMA;
use numalab::measure::compare::{benjamini_hochberg, normal_two_sided_p};
use numalab::text::format::s as plural_s;
use robust::Spread;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub const FLEET_SCHEMA: &str = "numalab-fleet";
pub const FLEET_SCHEMA_VERSION: &str = "1.0";
/// The nodes' report directories, under the fleet directory.
pub const NODES_DIR: &str = "nodes";
pub const FLEET_FILE: &str = "fleet.json";
pub const FLEET_HTML: &str = "fleet.html";
pub const FLEET_TEXT: &str = "fleet.txt";
pub const FLEET_CSV: &str = "fleet.csv";
/// Where `fleet report` keeps each node's output (`NAME.log`) and the exit
/// status of its `numalab report` (`NAME.exit_status`), under the fleet
/// directory (see `numalab::cluster::slurm::node_log`).
pub const LOGS_DIR: &str = "logs";
/// The most nodes one fleet reads.
pub const MAX_NODES: usize = 100_000;
/// The most node names a setting's value lists (the count says the rest).
pub const NAMES_SHOWN: usize = 20;
/// A baseline's default tolerance for figures: a node's figure further
/// than this share from the baseline's fails the check.
pub const DEFAULT_TOLERANCE: f64 = 0.10;

/// One setting a fleet compares: its name, what it is, and how it is read
/// from a node's document.
pub struct SettingSpec {
    pub name: &'static str,
    pub what: &'static str,
    read: fn(&NodeDoc) -> Option<String>,
}

fn env(d: &NodeDoc, key: &str) -> Option<String> {
    match d.environment.as_ref()?.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn cgroup(d: &NodeDoc, key: &str) -> Option<String> {
    match d.environment.as_ref()?.get("cgroup")?.get(key)? {
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The settings, in the order an administrator checks them.
pub const SETTINGS: &[SettingSpec] = &[
    SettingSpec {
        name: "numa_nodes",
        what: "NUMA nodes",
        read: |d| d.machine.as_ref().map(|m| m.nodes.len().to_string()),
    },
    SettingSpec {
        name: "memory_per_node",
        what: "memory per node (GiB)",
        read: |d| {
            let m = d.machine.as_ref()?;
            let gib = |b: u64| (b as f64 / (1u64 << 30) as f64).round();
            Some(
                m.nodes
                    .iter()
                    .map(|n| format!("{}: {}", n.os_index, gib(n.memory_bytes)))
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        },
    },
    SettingSpec {
        name: "distances",
        what: "node distances",
        read: |d| {
            let m = d.machine.as_ref()?.distances.as_ref()?.get("matrix")?;
            let rows = m.as_array()?;
            Some(
                rows.iter()
                    .map(|r| {
                        r.as_array()
                            .into_iter()
                            .flatten()
                            .map(|x| x.to_string())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        },
    },
    SettingSpec {
        name: "logical_cpus",
        what: "logical CPUs",
        read: |d| env(d, "logical_cpus"),
    },
    SettingSpec {
        name: "allowed_cpus",
        what: "CPUs the report could use (cgroup, affinity)",
        read: |d| {
            let m = d.machine.as_ref()?;
            Some(
                m.allowed_cpus
                    .iter()
                    .copied()
                    .collect::<numalab::IdSet>()
                    .to_string(),
            )
        },
    },
    SettingSpec {
        name: "memory_max",
        what: "cgroup memory limit",
        read: |d| cgroup(d, "memory_max"),
    },
    SettingSpec {
        name: "thp_enabled",
        what: "transparent huge pages",
        read: |d| env(d, "thp_enabled"),
    },
    SettingSpec {
        name: "thp_defrag",
        what: "THP defrag",
        read: |d| env(d, "thp_defrag"),
    },
    SettingSpec {
        name: "numa_balancing",
        what: "automatic NUMA balancing",
        read: |d| env(d, "numa_balancing"),
    },
    SettingSpec {
        name: "governor",
        what: "CPU frequency governor",
        read: |d| env(d, "governor"),
    },
    SettingSpec {
        name: "smt_active",
        what: "SMT (hyper-threading) on",
        read: |d| env(d, "smt_active"),
    },
    SettingSpec {
        name: "kernel",
        what: "kernel",
        read: |d| env(d, "kernel"),
    },
    SettingSpec {
        name: "cpu_model",
        what: "CPU model",
        read: |d| env(d, "cpu_model"),
    },
    SettingSpec {
        name: "firmware_warnings",
        what: "firmware and topology warnings",
        read: |d| {
            let w = &d.machine.as_ref()?.warnings;
            Some(if w.is_empty() {
                "none".into()
            } else {
                w.join("; ")
            })
        },
    },
    SettingSpec {
        name: "numalab_version",
        what: "numalab version",
        read: |d| env(d, "numalab_version"),
    },
];

/// What a fleet reads of one node's results.json; every other field is
/// skipped while parsing.
#[derive(Deserialize, Default)]
pub struct NodeDoc {
    #[serde(default)]
    schema: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    complete: Option<bool>,
    #[serde(default)]
    environment: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    machine: Option<MachineLite>,
    #[serde(default)]
    summary: Option<SummaryLite>,
}

#[derive(Deserialize, Default)]
struct MachineLite {
    #[serde(default)]
    nodes: Vec<NodeLite>,
    #[serde(default)]
    distances: Option<Value>,
    #[serde(default)]
    allowed_cpus: Vec<u32>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize, Default)]
struct NodeLite {
    os_index: u32,
    #[serde(default)]
    memory_bytes: u64,
}

#[derive(Deserialize, Default)]
struct SummaryLite {
    #[serde(default)]
    key_figures: BTreeMap<String, Option<f64>>,
}

impl NodeDoc {
    /// Parses a node's results.json, refusing what is not a numalab report.
    pub fn parse(text: &str) -> Result<NodeDoc, String> {
        let d: NodeDoc = serde_json::from_str(text).map_err(|e| format!("does not read: {e}"))?;
        match d.schema.as_deref() {
            Some(REPORT_SCHEMA) => Ok(d),
            Some(other) => Err(format!(
                "is not a numalab report's results.json (its schema is {other:?})"
            )),
            None => Err("is not a numalab report's results.json (no schema)".into()),
        }
    }

    /// The document's value of each key figure of `names`, in their order.
    fn figures(&self, names: &[&str]) -> Vec<Option<f64>> {
        let k = self.summary.as_ref().map(|s| &s.key_figures);
        names
            .iter()
            .map(|n| k.and_then(|k| k.get(*n).copied().flatten()))
            .map(|x| x.filter(|v| v.is_finite()))
            .collect()
    }
}

/// The key figures a fleet compares: those of the report's key-figures
/// table, in its order.
pub fn figure_names() -> Vec<&'static str> {
    key_labels().into_iter().map(|(k, _, _)| k).collect()
}

/// How a node took part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "reason")]
pub enum NodeStatus {
    Reported,
    /// Its report ran but failed or is unreadable: why.
    Failed(String),
}

/// One node as the fleet keeps it while aggregating.
struct Row {
    name: String,
    status: NodeStatus,
    complete: Option<bool>,
    mode: Option<String>,
    figures: Vec<Option<f64>>,
    /// Per setting, an index into that setting's distinct values.
    settings: Vec<Option<u32>>,
}

/// Collects nodes one at a time; [`FleetBuilder::finish`] judges them.
pub struct FleetBuilder {
    figures: Vec<&'static str>,
    rows: Vec<Row>,
    values: Vec<Vec<String>>,
    index: Vec<HashMap<String, u32>>,
}

impl Default for FleetBuilder {
    fn default() -> Self {
        FleetBuilder {
            figures: figure_names(),
            rows: Vec::new(),
            values: vec![Vec::new(); SETTINGS.len()],
            index: vec![HashMap::new(); SETTINGS.len()],
        }
    }
}

impl FleetBuilder {
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Adds a node whose report was read.
    pub fn add(&mut self, name: &str, doc: &NodeDoc) {
        let settings = SETTINGS
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let v = (s.read)(doc)?;
                let next = self.values[i].len() as u32;
                let id = *self.index[i].entry(v.clone()).or_insert(next);
                if id == next {
                    self.values[i].push(v);
                }
                Some(id)
            })
            .collect();
        self.rows.push(Row {
            name: name.to_string(),
            status: NodeStatus::Reported,
            complete: doc.complete,
            mode: doc.mode.clone(),
            figures: doc.figures(&self.figures),
            settings,
        });
    }

    /// Adds a node with no report, and why.
    pub fn add_failed(&mut self, name: &str, why: String) {
        self.rows.push(Row {
            name: name.to_string(),
            status: NodeStatus::Failed(why),
            complete: None,
            mode: None,
            figures: vec![None; self.figures.len()],
            settings: vec![None; SETTINGS.len()],
        });
    }

    /// Judges every node against the fleet (or against `baseline`).
    pub fn finish(mut self, baseline: Option<&Baseline>) -> Fleet {
        self.rows.sort_by(|a, b| natural(&a.name, &b.name));
        let figures = self.figure_summaries();
        let settings = self.setting_summaries(baseline);
        let nodes = self
            .rows
            .iter()
            .map(|r| self.judge(r, &figures, &settings, baseline))
            .collect::<Vec<_>>();
        let mut f = Fleet {
            schema: FLEET_SCHEMA.into(),
            schema_version: FLEET_SCHEMA_VERSION.into(),
            nodes_total: nodes.len(),
            reported: nodes
                .iter()
                .filter(|n| n.status == NodeStatus::Reported)
                .count(),
            rule: Rule::new(baseline),
            figures,
            settings,
            nodes,
            summary: Vec::new(),
        };
        f.summary = f.sentences();
        f
    }

    fn figure_summaries(&self) -> Vec<FigureSummary> {
        let labels = key_labels();
        let spreads: Vec<Option<Spread>> = (0..self.figures.len())
            .map(|i| {
                let column: Vec<f64> = self.rows.iter().filter_map(|r| r.figures[i]).collect();
                Spread::of(&column)
            })
            .collect();
        // Every judged value of the fleet is one test: (figure, row, its
        // two-sided p-value), then the discoveries among all of them.
        let tests: Vec<(usize, usize, f64)> = spreads
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.filter(|s| s.n >= robust::MIN_NODES).map(|s| (i, s)))
            .flat_map(|(i, s)| {
                self.rows.iter().enumerate().filter_map(move |(k, r)| {
                    let x = r.figures[i]?;
                    Some((i, k, normal_two_sided_p(s.z(x))))
                })
            })
            .collect();
        let p: Vec<f64> = tests.iter().map(|t| t.2).collect();
        let found: std::collections::BTreeSet<(usize, usize)> =
            benjamini_hochberg(&p, robust::FALSE_DISCOVERY_RATE)
                .into_iter()
                .zip(&tests)
                .filter(|(d, _)| *d)
                .map(|(_, t)| (t.0, t.1))
                .collect();
        self.figures
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let spread = spreads[i];
                let (label, unit) = labels
                    .iter()
                    .find(|l| l.0 == *name)
                    .map(|l| (l.1.clone(), l.2))
                    .unwrap_or_default();
                let outliers = match &spread {
                    Some(s) => self
                        .rows
                        .iter()
                        .enumerate()
                        .filter_map(|(k, r)| {
                            let x = r.figures[i]?;
                            (s.is_outlier(x) && found.contains(&(i, k))).then(|| FigureOutlier {
                                node: r.name.clone(),
                                value: x,
                                z: s.z(x),
                            })
                        })
                        .collect(),
                    None => Vec::new(),
                };
                FigureSummary {
                    name: name.to_string(),
                    label,
                    unit: unit.to_string(),
                    spread,
                    outliers,
                }
            })
            .collect()
    }

    fn setting_summaries(&self, baseline: Option<&Baseline>) -> Vec<SettingSummary> {
        SETTINGS
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let mut values: Vec<SettingValue> = self.values[i]
                    .iter()
                    .map(|v| SettingValue {
                        value: v.clone(),
                        count: 0,
                        nodes: Vec::new(),
                    })
                    .collect();
                let mut reporting = 0;
                for r in &self.rows {
                    if let Some(id) = r.settings[i] {
                        reporting += 1;
                        let v = &mut values[id as usize];
                        v.count += 1;
                        if v.nodes.len() < NAMES_SHOWN {
                            v.nodes.push(r.name.clone());
                        }
                    }
                }
                values.sort_by(|a, b| b.count.cmp(&a.count).then(a.value.cmp(&b.value)));
                let majority = values
                    .first()
                    .filter(|v| 2 * v.count > reporting)
                    .map(|v| v.value.clone());
                let expected = match baseline {
                    Some(b) => b.setting(spec.name).map(str::to_string),
                    None => majority.clone(),
                };
                SettingSummary {
                    name: spec.name.into(),
                    what: spec.what.into(),
                    nodes: reporting,
                    values,
                    majority,
                    expected,
                }
            })
            .collect()
    }

    fn judge(
        &self,
        r: &Row,
        figures: &[FigureSummary],
        settings: &[SettingSummary],
        baseline: Option<&Baseline>,
    ) -> NodeVerdict {
        let mut reasons = Vec::new();
        let mut undecided = Vec::new();
        // How far off the node is, to list the worst first: a failure,
        // then a setting, then the largest |z| (or share off the baseline).
        let mut severity: f64 = 0.0;
        if let NodeStatus::Failed(why) = &r.status {
            reasons.push(why.clone());
            severity = f64::MAX;
        }
        for (i, s) in settings.iter().enumerate() {
            let Some(id) = r.settings[i] else { continue };
            let mine = &self.values[i][id as usize];
            match &s.expected {
                Some(want) if want != mine => {
                    severity = severity.max(1e9);
                    reasons.push(match baseline {
                        Some(_) => format!("{}: {mine}, the baseline {want}", s.what),
                        None => format!(
                            "{}: {mine}, where {} of {} nodes have {want}",
                            s.what, s.values[0].count, s.nodes
                        ),
                    })
                }
                Some(_) => {}
                None if s.values.len() > 1 => undecided.push(format!(
                    "{}: {mine}, and no value is held by a majority ({})",
                    s.what,
                    s.values
                        .iter()
                        .map(|v| format!("{} on {} node{}", v.value, v.count, plural_s(v.count)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                None => {}
            }
        }
        for (i, f) in figures.iter().enumerate() {
            let Some(x) = r.figures[i] else { continue };
            match baseline {
                Some(b) => {
                    if let Some(want) = b.figure(&f.name) {
                        let off = x / want - 1.0;
                        if want != 0.0 && off.abs() > b.tolerance {
                            severity = severity.max(off.abs());
                            reasons.push(format!(
                                "{}: {} {}, {:.0}% {} the baseline's {} (tolerance {:.0}%)",
                                f.label,
                                num(x),
                                f.unit,
                                100.0 * off.abs(),
                                if off < 0.0 { "below" } else { "above" },
                                num(want),
                                100.0 * b.tolerance
                            ));
                        }
                    }
                }
                None => {
                    if let Some(o) = f.outliers.iter().find(|o| o.node == r.name) {
                        let s = f.spread.as_ref().expect("outliers have a spread");
                        severity = severity.max(o.z.abs());
                        reasons.push(format!(
                            "{}: {} {}, modified z {:+.1} (fleet median {}, MAD {})",
                            f.label,
                            num(x),
                            f.unit,
                            o.z,
                            num(s.median),
                            num(s.mad)
                        ));
                    }
                }
            }
        }
        let verdict = match (&r.status, reasons.is_empty(), undecided.is_empty()) {
            (NodeStatus::Failed(_), _, _) => Verdict::Failed,
            (_, false, _) => Verdict::Outlier,
            (_, true, false) => Verdict::Undecided,
            _ => Verdict::Conforms,
        };
        reasons.extend(undecided);
        NodeVerdict {
            name: r.name.clone(),
            status: r.status.clone(),
            verdict,
            reasons,
            severity: severity.min(1e12),
            complete: r.complete,
            mode: r.mode.clone(),
            figures: self
                .figures
                .iter()
                .zip(&r.figures)
                .filter_map(|(n, v)| Some((n.to_string(), (*v)?)))
                .collect(),
            settings: SETTINGS
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    let id = r.settings[i]?;
                    Some((s.name.to_string(), self.values[i][id as usize].clone()))
                })
                .collect(),
        }
    }
}

/// A number as the fleet prints it: 3 significant digits, at least.
pub fn num(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Node names in natural order: `node2` before `node10`.
pub fn natural(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(s: &str) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut text = String::new();
        let mut digits = String::new();
        for c in s.chars() {
            if c.is_ascii_digit() {
                digits.push(c);
            } else {
                if !digits.is_empty() {
                    out.push((
                        std::mem::take(&mut text),
                        digits.parse().unwrap_or(u64::MAX),
                    ));
                    digits.clear();
                }
                text.push(c);
            }
        }
        out.push((text, digits.parse().unwrap_or(0)));
        out
    }
    key(a).cmp(&key(b)).then(a.cmp(b))
}

/// What a node is judged against: the settings and figures of one reference
/// report, or a fleet's majorities and medians.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// Where it came from, as the output names it.
    pub source: String,
    settings: Vec<(String, String)>,
    figures: Vec<(String, f64)>,
    pub tolerance: f64,
}

impl Baseline {
    fn setting(&self, name: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn figure(&self, name: &str) -> Option<f64> {
        self.figures
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }

    /// A baseline from a file: a node's results.json or a fleet.json.
    pub fn parse(text: &str, source: &str, tolerance: f64) -> Result<Baseline, String> {
        let probe: Value = serde_json::from_str(text).map_err(|e| format!("does not read: {e}"))?;
        if probe.get("schema").and_then(Value::as_str) == Some(FLEET_SCHEMA) {
            let f: Fleet =
                serde_json::from_value(probe).map_err(|e| format!("does not read: {e}"))?;
            return Ok(Baseline {
                source: source.into(),
                settings: f
                    .settings
                    .iter()
                    .filter_map(|s| Some((s.name.clone(), s.majority.clone()?)))
                    .collect(),
                figures: f
                    .figures
                    .iter()
                    .filter_map(|x| Some((x.name.clone(), x.spread?.median)))
                    .collect(),
                tolerance,
            });
        }
        let doc = NodeDoc::parse(text)
            .map_err(|e| format!("{e}; a baseline is a node's results.json or a fleet.json"))?;
        Ok(Baseline {
            source: source.into(),
            settings: SETTINGS
                .iter()
                .filter_map(|s| Some((s.name.to_string(), (s.read)(&doc)?)))
                .collect(),
            figures: figure_names()
                .into_iter()
                .zip(doc.figures(&figure_names()))
                .filter_map(|(n, v)| Some((n.to_string(), v?)))
                .collect(),
            tolerance,
        })
    }
}

/// How nodes were judged, as the output states it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rule {
    pub text: String,
    pub z_threshold: f64,
    pub min_deviation: f64,
    /// The false-discovery rate over every figure of every node (0 in a
    /// fleet.json written before it was judged so).
    #[serde(default)]
    pub false_discovery_rate: f64,
    pub min_nodes: usize,
    pub baseline: Option<String>,
    pub tolerance: Option<f64>,
}

impl Rule {
    fn new(b: Option<&Baseline>) -> Rule {
        let text = match b {
            Some(b) => format!(
                "against the baseline {}: every setting equal to the baseline's, every key figure within {:.0}% of the baseline's",
                b.source,
                100.0 * b.tolerance
            ),
            None => format!(
                "against the fleet: a setting differs when a majority of nodes has another value; a key figure is an outlier when its modified z-score (0.6745 × (value − median) / MAD, Iglewicz and Hoaglin) exceeds {} in absolute value, it is at least {:.0}% from the median, and its two-sided normal p-value is a discovery at a false-discovery rate of {:.0}% over every figure of every node (Benjamini and Hochberg), judged with {} or more nodes",
                robust::Z_THRESHOLD,
                100.0 * robust::MIN_DEVIATION,
                100.0 * robust::FALSE_DISCOVERY_RATE,
                robust::MIN_NODES
            ),
        };
        Rule {
            text,
            z_threshold: robust::Z_THRESHOLD,
            min_deviation: robust::MIN_DEVIATION,
            false_discovery_rate: robust::FALSE_DISCOVERY_RATE,
            min_nodes: robust::MIN_NODES,
            baseline: b.map(|b| b.source.clone()),
            tolerance: b.map(|b| b.tolerance),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FigureOutlier {
    pub node: String,
    pub value: f64,
    pub z: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FigureSummary {
    pub name: String,
    pub label: String,
    pub unit: String,
    /// `None` when no node has the figure.
    #[serde(with = "spread_serde")]
    pub spread: Option<Spread>,
    pub outliers: Vec<FigureOutlier>,
}

mod spread_serde {
    use super::Spread;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Form {
        n: usize,
        median: f64,
        mad: f64,
        mean_ad: f64,
        min: f64,
        max: f64,
    }

    pub fn serialize<S: Serializer>(s: &Option<Spread>, ser: S) -> Result<S::Ok, S::Error> {
        s.map(|s| Form {
            n: s.n,
            median: s.median,
            mad: s.mad,
            mean_ad: s.mean_ad,
            min: s.min,
            max: s.max,
        })
        .serialize(ser)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Spread>, D::Error> {
        Ok(Option::<Form>::deserialize(d)?.map(|f| Spread {
            n: f.n,
            median: f.median,
            mad: f.mad,
            mean_ad: f.mean_ad,
            min: f.min,
            max: f.max,
        }))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SettingValue {
    pub value: String,
    pub count: usize,
    /// The first [`NAMES_SHOWN`] nodes with it.
    pub nodes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SettingSummary {
    pub name: String,
    pub what: String,
    /// Nodes that report it.
    pub nodes: usize,
    /// Most common first.
    pub values: Vec<SettingValue>,
    /// The value more than half the nodes have.
    pub majority: Option<String>,
    /// What a node is judged against: the baseline's value, else the
    /// majority.
    pub expected: Option<String>,
}

impl SettingSummary {
    pub fn differs(&self) -> bool {
        self.values.len() > 1
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Conforms,
    /// A setting or figure off (reasons say which).
    Outlier,
    /// A setting differs and nothing says which value is right (no
    /// majority, no baseline).
    Undecided,
    Failed,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Conforms => "conforms",
            Verdict::Outlier => "outlier",
            Verdict::Undecided => "undecided",
            Verdict::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeVerdict {
    pub name: String,
    #[serde(flatten)]
    pub status: NodeStatus,
    pub verdict: Verdict,
    pub reasons: Vec<String>,
    /// How far off, to order nodes worst first: 1e12 failed, 1e9 a
    /// setting, else the largest |modified z| (or, against a baseline, the
    /// largest share off it).
    pub severity: f64,
    pub complete: Option<bool>,
    pub mode: Option<String>,
    pub figures: BTreeMap<String, f64>,
    pub settings: BTreeMap<String, String>,
}

/// A fleet: fleet.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fleet {
    pub schema: String,
    pub schema_version: String,
    pub nodes_total: usize,
    pub reported: usize,
    pub rule: Rule,
    pub figures: Vec<FigureSummary>,
    pub settings: Vec<SettingSummary>,
    pub nodes: Vec<NodeVerdict>,
    pub summary: Vec<String>,
}

impl Fleet {
    pub fn count(&self, v: Verdict) -> usize {
        self.nodes.iter().filter(|n| n.verdict == v).count()
    }

    /// The summary: how many nodes, how many conform, each node that does
    /// not with its first reason (the first ten), the settings that differ.
    fn sentences(&self) -> Vec<String> {
        let mut out = vec![format!(
            "{} of {} nodes reported: {} conform, {} outlier{}, {} undecided, {} failed.",
            self.reported,
            self.nodes_total,
            self.count(Verdict::Conforms),
            self.count(Verdict::Outlier),
            plural_s(self.count(Verdict::Outlier)),
            self.count(Verdict::Undecided),
            self.count(Verdict::Failed),
        )];
        let mut odd: Vec<&NodeVerdict> = self
            .nodes
            .iter()
            .filter(|n| n.verdict != Verdict::Conforms)
            .collect();
        odd.sort_by(|a, b| b.severity.total_cmp(&a.severity));
        for n in odd.iter().take(10) {
            out.push(format!(
                "{} {}: {}.",
                n.name,
                n.verdict.word(),
                n.reasons.join("; ")
            ));
        }
        if odd.len() > 10 {
            out.push(format!(
                "{} more nodes do not conform (fleet.csv lists every node).",
                odd.len() - 10
            ));
        }
        for s in self.settings.iter().filter(|s| s.differs()) {
            out.push(format!(
                "The nodes differ in {}: {}.",
                s.what,
                s.values
                    .iter()
                    .map(|v| format!("{} on {} node{}", v.value, v.count, plural_s(v.count)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if self.reported > 0 && self.reported < robust::MIN_NODES && self.rule.baseline.is_none() {
            out.push(format!(
                "With {} node{} reporting, no figure is judged an outlier (that needs {}): give --baseline to judge against a known-good node.",
                self.reported,
                plural_s(self.reported),
                robust::MIN_NODES
            ));
        }
        out
    }
}

/// Reads one node of the fleet directory `fleet` into `b`: its
/// results.json, or why there is none (its exit status and the last line
/// of its log, when `fleet report` wrote them).
pub fn add_node(b: &mut FleetBuilder, fleet: &Path, name: &str) {
    let results = fleet
        .join(NODES_DIR)
        .join(name)
        .join(crate::files::RESULTS_FILE);
    match numalab::input::read_text(&results, numalab::input::InputKind::ResultsJson) {
        Ok(text) => match NodeDoc::parse(&text) {
            Ok(doc) => b.add(name, &doc),
            Err(e) => b.add_failed(name, format!("its results.json {e}")),
        },
        Err(e) => b.add_failed(name, why_no_report(fleet, name, &e.to_string())),
    }
}

/// Why a node has no readable report.
fn why_no_report(fleet: &Path, name: &str, read_error: &str) -> String {
    let (log, status) = numalab::cluster::slurm::node_log(fleet, name);
    let status = std::fs::read_to_string(status).ok();
    let log = std::fs::read_to_string(log).unwrap_or_default();
    let last = log
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.chars().take(300).collect::<String>());
    match (status.as_deref().map(str::trim), last) {
        (Some("0"), _) => {
            format!("numalab report exited 0 but left no readable results.json ({read_error})")
        }
        (Some(code), Some(l)) => format!("numalab report exited with status {code}: {l}"),
        (Some(code), None) => format!("numalab report exited with status {code}"),
        (None, Some(l)) => format!("numalab report did not finish: {l}"),
        (None, None) => format!("no report: {read_error}"),
    }
}

/// The names of the directories (or, with `suffix`, of the files ending
/// in it, less the suffix) in `dir`; none when it does not exist.
fn names_in(dir: &Path, suffix: Option<&str>, names: &mut Vec<String>) -> Result<(), String> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    for e in rd {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let name = match suffix {
            None if is_dir => name,
            Some(sfx) if !is_dir => match name.strip_suffix(sfx) {
                Some(n) => n.to_string(),
                None => continue,
            },
            _ => continue,
        };
        names.push(name);
        if names.len() > 2 * MAX_NODES {
            return Err(format!(
                "{} holds more than {MAX_NODES} nodes: the most one fleet reads",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// Aggregates a fleet directory's nodes (those with a directory under
/// `nodes/` or a log under `logs/`), plus `expected` node names that have
/// neither (never started: unreachable, or refused by the scheduler),
/// listed as failed with `missing_why`.
pub fn gather(dir: &Path, expected: &[String], missing_why: &str) -> Result<FleetBuilder, String> {
    if !dir.is_dir() {
        return Err(format!(
            "{} is not a directory (a fleet directory holds nodes/NAME/results.json, as `numalab fleet report -o DIR` writes)",
            dir.display()
        ));
    }
    let mut names: Vec<String> = Vec::new();
    names_in(&dir.join(NODES_DIR), None, &mut names)?;
    names_in(&dir.join(LOGS_DIR), Some(".log"), &mut names)?;
    names.sort_by(|a, b| natural(a, b));
    names.dedup();
    if names.len() > MAX_NODES {
        return Err(format!(
            "{} holds more than {MAX_NODES} nodes: the most one fleet reads",
            dir.display()
        ));
    }
    let mut b = FleetBuilder::default();
    for n in &names {
        add_node(&mut b, dir, n);
    }
    for n in expected {
        if names.binary_search_by(|x| natural(x, n)).is_err() {
            b.add_failed(n, missing_why.to_string());
        }
    }
    if b.is_empty() {
        return Err(format!(
            "{} holds no node (nodes/NAME/results.json): nothing to aggregate",
            dir.display()
        ));
    }
    Ok(b)
}

#[cfg(test)]
mod tests;
