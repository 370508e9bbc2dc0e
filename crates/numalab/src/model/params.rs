//! The model's parameters: what each resource can carry and what one
//! thread puts on each, in the units the studies give them (GB/s), read
//! from a JSON file (`model --params`) or fitted from a report
//! (`calibrate`).

use crate::input::{read_text, InputKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The `schema` a parameter file carries.
pub const PARAMS_SCHEMA: &str = "numalab-model-params/1";

/// Largest rate accepted anywhere, GB/s: far above any memory system, low
/// enough that sums of thousands of them stay exact in f64.
pub const MAX_GBPS: f64 = 1.0e6;

/// Most requests a thread may keep in flight.
pub const MAX_IN_FLIGHT: f64 = 4096.0;

/// Most links or per-node entries a file may give.
pub const MAX_ENTRIES: usize = 4096;

/// What one kind of access (a read stream, a write stream) costs each
/// resource, measured with the thread alone on an idle machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessTraffic {
    /// GB/s the thread loads its local memory controller with, alone.
    pub controller_gbps: f64,
    /// Lines the memory moves per line the thread accesses: 1 for a read,
    /// 2 for a write with write-allocate (the line is read, then written
    /// back), 1 for a non-temporal write.
    pub memory_lines: f64,
    /// GB/s on each link toward the memory (requests, probes, written
    /// data), with the memory `measured_hops` away.
    pub toward_memory_gbps: f64,
    /// GB/s on each link back toward the thread (data, responses).
    pub toward_thread_gbps: f64,
    /// How far the memory was when the link loads were measured.
    #[serde(default = "one")]
    pub measured_hops: u32,
}

fn one() -> u32 {
    1
}

fn line() -> f64 {
    64.0
}

/// One link's capacity, where it differs from `link_gbps`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkCapacity {
    pub from: u32,
    pub to: u32,
    pub gbps: f64,
}

/// Everything the model needs besides the machine's graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelParams {
    /// [`PARAMS_SCHEMA`].
    pub schema: String,
    /// What machine these describe.
    pub name: String,
    /// Where each figure comes from.
    #[serde(default)]
    pub source: String,
    /// The links as node pairs; `None`: the machine's interconnect graph.
    #[serde(default)]
    pub links: Option<Vec<(u32, u32)>>,
    /// Each direction of each link, GB/s.
    pub link_gbps: f64,
    /// Directed links whose capacity differs.
    #[serde(default)]
    pub link_overrides: Vec<LinkCapacity>,
    /// What a memory controller sustains, GB/s.
    pub controller_gbps: f64,
    /// Controllers that differ (CPU-less tiers, nodes with fewer DIMMs):
    /// node (as a string, JSON's keys are) → GB/s.
    #[serde(default)]
    pub controller_overrides: BTreeMap<String, f64>,
    /// Bytes per request.
    #[serde(default = "line")]
    pub line_bytes: f64,
    pub read: AccessTraffic,
    pub write: AccessTraffic,
    /// A thread's time alone by hops to its memory, local = 1: `[1, 1.08,
    /// 1.30]`. Hops past the end add the last step again.
    pub hop_time: Vec<f64>,
    /// Requests a local reader keeps in flight; other threads keep as many
    /// more as their rate is higher (Little's law at equal latency).
    pub in_flight: f64,
    /// What is assumed, fitted or known to be off.
    #[serde(default)]
    pub notes: Vec<String>,
}

impl ModelParams {
    /// Reads and checks a parameter file.
    pub fn load(path: &Path) -> Result<ModelParams, String> {
        let text = read_text(path, InputKind::ModelParams).map_err(|e| e.to_string())?;
        let p: ModelParams = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a model parameter file: {e}", path.display()))?;
        p.check().map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(p)
    }

    /// Checks every figure: finite, positive, bounded; one line naming the
    /// first that is not.
    pub fn check(&self) -> Result<(), String> {
        if self.schema != PARAMS_SCHEMA {
            return Err(format!(
                "schema '{}' is not {PARAMS_SCHEMA}",
                crate::text::format::excerpt(&self.schema, 40)
            ));
        }
        let rate = |what: &str, x: f64| -> Result<(), String> {
            if x.is_finite() && x > 0.0 && x <= MAX_GBPS {
                Ok(())
            } else {
                Err(format!(
                    "{what} is {x}; valid: a rate above 0 and at most {MAX_GBPS} GB/s"
                ))
            }
        };
        rate("link_gbps", self.link_gbps)?;
        rate("controller_gbps", self.controller_gbps)?;
        for l in &self.link_overrides {
            rate(&format!("link {}->{}", l.from, l.to), l.gbps)?;
        }
        for (node, &g) in &self.controller_overrides {
            node.parse::<u32>().map_err(|_| {
                format!(
                    "controller_overrides: '{}' is not a node number",
                    crate::text::format::excerpt(node, 20)
                )
            })?;
            rate(&format!("controller of node {node}"), g)?;
        }
        let entries = self.link_overrides.len()
            + self.controller_overrides.len()
            + self.links.as_ref().map_or(0, Vec::len);
        if entries > MAX_ENTRIES {
            return Err(format!(
                "{entries} links and overrides; at most {MAX_ENTRIES}"
            ));
        }
        if !(self.line_bytes.is_finite() && (8.0..=4096.0).contains(&self.line_bytes)) {
            return Err(format!(
                "line_bytes is {}; valid: 8 to 4096",
                self.line_bytes
            ));
        }
        for (name, a) in [("read", &self.read), ("write", &self.write)] {
            rate(&format!("{name}.controller_gbps"), a.controller_gbps)?;
            rate(&format!("{name}.toward_memory_gbps"), a.toward_memory_gbps)?;
            rate(&format!("{name}.toward_thread_gbps"), a.toward_thread_gbps)?;
            if !(a.memory_lines.is_finite() && (0.5..=4.0).contains(&a.memory_lines)) {
                return Err(format!(
                    "{name}.memory_lines is {}; valid: 0.5 to 4 (1 a read, 2 a write-allocate write)",
                    a.memory_lines
                ));
            }
            if a.measured_hops == 0 || a.measured_hops > 64 {
                return Err(format!(
                    "{name}.measured_hops is {}; valid: 1 to 64 (link loads are measured on a remote access)",
                    a.measured_hops
                ));
            }
        }
        if self.hop_time.is_empty() || self.hop_time.len() > 65 {
            return Err("hop_time needs 1 to 65 entries (local first)".into());
        }
        if self
            .hop_time
            .iter()
            .any(|&h| !(h.is_finite() && (0.01..=1000.0).contains(&h)))
        {
            return Err(format!(
                "hop_time {:?} has an entry outside 0.01 to 1000",
                self.hop_time
            ));
        }
        if !(self.in_flight.is_finite() && (1.0..=MAX_IN_FLIGHT).contains(&self.in_flight)) {
            return Err(format!(
                "in_flight is {}; valid: 1 to {MAX_IN_FLIGHT} requests",
                self.in_flight
            ));
        }
        Ok(())
    }

    /// A thread's time alone with its memory `hops` away, local = 1.
    pub fn hop_factor(&self, hops: u32) -> f64 {
        let h = hops as usize;
        match self.hop_time.get(h) {
            Some(&f) => f,
            None => {
                let last = self.hop_time[self.hop_time.len() - 1];
                let step = if self.hop_time.len() >= 2 {
                    last - self.hop_time[self.hop_time.len() - 2]
                } else {
                    0.0
                };
                last + step * (h + 1 - self.hop_time.len()) as f64
            }
        }
    }

    /// The capacity of memory node `node`'s controller, GB/s.
    pub fn controller_of(&self, node: u32) -> f64 {
        self.controller_overrides
            .get(&node.to_string())
            .copied()
            .unwrap_or(self.controller_gbps)
    }

    /// The capacity of the directed link `from → to`, GB/s.
    pub fn link_of(&self, from: u32, to: u32) -> f64 {
        self.link_overrides
            .iter()
            .find(|l| l.from == from && l.to == to)
            .map_or(self.link_gbps, |l| l.gbps)
    }

    /// The traffic figures of reads or writes.
    pub fn traffic(&self, write: bool) -> &AccessTraffic {
        if write {
            &self.write
        } else {
            &self.read
        }
    }

    /// The AMD note's parameters (docs/models/amd-quartet-2006.json), as
    /// shipped: the first test of the model.
    pub fn amd_quartet_2006() -> ModelParams {
        serde_json::from_str(AMD_QUARTET_2006).expect("the shipped parameter file parses")
    }
}

/// docs/models/amd-quartet-2006.json, built in so that `model --params
/// amd-quartet-2006` works from any directory.
pub const AMD_QUARTET_2006: &str = include_str!("../../../../docs/models/amd-quartet-2006.json");

/// The parameter sets numalab ships, by name.
pub fn builtin(name: &str) -> Option<ModelParams> {
    match name {
        "amd-quartet-2006" => Some(ModelParams::amd_quartet_2006()),
        _ => None,
    }
}

/// Names [`builtin`] knows.
pub const BUILTIN_NAMES: [&str; 1] = ["amd-quartet-2006"];
