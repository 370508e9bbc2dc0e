//! Layer 1, the machine model: what this machine (or a machine described by a
//! topology file) is made of, keyed by OS indexes.
//!
//! The model is plain data, filled once from hwloc (`hwloc.rs`) and then
//! queried without hwloc: every later layer works the same on the live machine
//! and on a topology file. Derived facts (interconnect graph, hop counts,
//! firmware sanity warnings) live in `graph.rs`. Topology files are checked
//! in Rust before hwloc reads them (`xml_check/`) and loaded first in a
//! child process where that is sound (`crate::sys::child`).

mod graph;
mod hwloc;
mod xml_check;

pub use graph::{
    distance_warnings, fully_connected, hop_matrix, hop_matrix_with, interconnect_graph,
    interconnect_graph_with, Link, DEFAULT_REMOTE_DISTANCE,
};

pub use xml_check::{
    check as check_topology_xml, MAX_ATTRIBUTE_VALUE, MAX_CACHE_BYTES, MAX_DISTANCE_OBJECTS,
    MAX_NODE_BYTES, MAX_OBJECTS, MAX_OBJECT_DEPTH, MAX_OS_INDEX, MAX_XML_NODES,
};

use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A machine of `tests/fixtures/topologies`, for unit tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> Machine {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/topologies")
        .join(name);
    Machine::from_xml_file(&p).unwrap()
}

/// Version of the JSON produced by [`Machine`] (`numalab topology --json`).
/// Bump the major part when a key changes meaning or disappears.
pub const TOPOLOGY_SCHEMA_VERSION: &str = "1.1";

/// Where a machine model came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// The running machine, discovered by hwloc.
    Live,
    /// An hwloc XML topology file.
    File {
        #[serde(serialize_with = "path_lossy")]
        path: PathBuf,
    },
}

/// A path as JSON text: lossily, because serde refuses a path that is not
/// UTF-8, and such a topology file is valid input whose report must save.
fn path_lossy<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

/// What kind of memory a NUMA node holds, where the firmware or hwloc says.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    Dram,
    Hbm,
    Nvm,
    GpuMemory,
    Cxl,
    /// Specific-purpose memory (EFI_MEMORY_SP) of unknown technology.
    SpecificPurpose,
    Unknown,
}

/// One NUMA node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Node {
    pub os_index: u32,
    /// OS indexes of the PUs (hardware threads) local to this node; empty when CPU-less.
    pub cpus: IdSet,
    pub memory_bytes: u64,
    /// Free memory when live (from the kernel), `None` for topology files.
    pub free_bytes: Option<u64>,
    pub cpuless: bool,
    pub kind: MemoryKind,
    /// hwloc's subtype when present (e.g. "MCDRAM", "GPUMemory"), for display.
    pub subtype: Option<String>,
    /// Memory tier rank reported by the kernel/hwloc, when known.
    pub tier: Option<u32>,
    /// Whether this process may allocate here (cgroup cpuset.mems).
    pub allowed: bool,
}

/// One processor package (socket).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Package {
    pub os_index: Option<u32>,
    pub logical_index: u32,
    pub cpus: IdSet,
    /// NUMA nodes whose CPUs lie inside this package.
    pub nodes: IdSet,
}

/// One core and its PUs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Core {
    pub logical_index: u32,
    pub os_index: Option<u32>,
    pub cpus: IdSet,
    pub package: u32,
}

/// One CPU cache.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cache {
    /// 1 for L1 ... 5.
    pub level: u8,
    /// "data", "instruction" or "unified".
    pub kind: String,
    pub logical_index: u32,
    pub size_bytes: u64,
    pub line_bytes: u32,
    pub associativity: Option<i32>,
    /// PUs sharing this cache.
    pub cpus: IdSet,
}

/// The SLIT-style distance matrix between NUMA nodes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Distances {
    /// OS indexes of the nodes, in row (and column) order.
    pub nodes: Vec<u32>,
    /// `matrix[i][j]`: distance from `nodes[i]` to `nodes[j]`.
    pub matrix: Vec<Vec<u64>>,
    /// Where the values came from (hwloc's distances name, e.g. "NUMALatency").
    pub source: String,
}

impl Distances {
    /// Distance between two nodes by OS index.
    pub fn get(&self, from: u32, to: u32) -> Option<u64> {
        let i = self.nodes.iter().position(|&n| n == from)?;
        let j = self.nodes.iter().position(|&n| n == to)?;
        Some(self.matrix[i][j])
    }
}

/// One HMAT-style memory attribute value: performance of `target` node as seen
/// from the CPUs in `initiator`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemoryAttributeValue {
    /// "latency_ns", "read_latency_ns", "write_latency_ns", "bandwidth_mib_s",
    /// "read_bandwidth_mib_s", "write_bandwidth_mib_s".
    pub attribute: String,
    pub target: u32,
    /// CPUs of the initiator.
    pub initiator_cpus: IdSet,
    /// The NUMA node(s) whose CPUs are the initiator, when it maps onto nodes.
    pub initiator_nodes: IdSet,
    pub value: u64,
}

/// A PCI or OS device with a locality.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Device {
    /// "gpu", "network", "storage", "coprocessor", "dma", "other". A
    /// compute device that names a GPU model (NVML, CUDA, ROCm SMI, Level
    /// Zero, an OpenCL GPU) is "gpu" although hwloc files it as a
    /// coprocessor.
    pub kind: String,
    pub name: String,
    /// What it is, as its description names it: a GPU's model ("Tesla
    /// V100-SXM3-32GB-H"), a disk's model, the PCI device's name.
    #[serde(default)]
    pub model: Option<String>,
    /// Its vendor, likewise ("NVIDIA Corporation").
    #[serde(default)]
    pub vendor: Option<String>,
    /// PCI bus id "dddd:bb:dd.f" when known.
    pub pci_bus_id: Option<String>,
    /// NUMA nodes local to the device (the nodeset of its nearest non-I/O ancestor).
    pub local_nodes: IdSet,
    pub local_cpus: IdSet,
}

impl Device {
    /// What a reader calls it: "GPU", "NVMe", "disk", "NIC", "InfiniBand",
    /// "DMA", "coprocessor", "device".
    pub fn label(&self) -> &'static str {
        match self.kind.as_str() {
            "gpu" => "GPU",
            "storage" if self.name.starts_with("nvme") => "NVMe",
            "storage" if self.name.starts_with("dax") => "DAX",
            "storage" => "disk",
            "network" if self.name.starts_with("mlx") || self.name.starts_with("ib") => {
                "InfiniBand"
            }
            "network" => "NIC",
            "dma" => "DMA",
            "coprocessor" => "coprocessor",
            _ => "device",
        }
    }
}

/// The whole machine model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// [`TOPOLOGY_SCHEMA_VERSION`] when built; as read back when deserialized.
    pub schema_version: String,
    pub source: Source,
    /// NUMA nodes sorted by OS index, including disallowed ones.
    pub nodes: Vec<Node>,
    pub packages: Vec<Package>,
    pub cores: Vec<Core>,
    /// All PUs (complete set).
    pub complete_cpus: IdSet,
    pub complete_nodes: IdSet,
    /// PUs and nodes this process may use (cgroup restrictions applied).
    pub allowed_cpus: IdSet,
    pub allowed_nodes: IdSet,
    /// Whether a cgroup (cpuset) keeps this process from some CPUs or nodes
    /// the topology describes. Offline CPUs and memoryless nodes, which are in
    /// the complete sets but usable by nobody, do not make a view restricted.
    pub restricted: bool,
    /// Hardware threads per core (max over cores).
    pub smt: u32,
    pub caches: Vec<Cache>,
    pub distances: Option<Distances>,
    pub memory_attributes: Vec<MemoryAttributeValue>,
    pub devices: Vec<Device>,
    /// Direct links of the interconnect graph (inferred from distances).
    pub links: Vec<Link>,
    /// Hop counts between nodes, same row order as `hop_nodes`.
    pub hops: HopMatrix,
    /// Things in the firmware data that look wrong, in plain sentences.
    pub warnings: Vec<String>,
}

/// Hop counts between nodes (BFS over the interconnect graph).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HopMatrix {
    pub nodes: Vec<u32>,
    /// `matrix[i][j]`: hops from `nodes[i]` to `nodes[j]`; `None` when unreachable.
    pub matrix: Vec<Vec<Option<u32>>>,
}

impl HopMatrix {
    /// Hops between two nodes by OS index.
    pub fn get(&self, from: u32, to: u32) -> Option<u32> {
        let i = self.nodes.iter().position(|&n| n == from)?;
        let j = self.nodes.iter().position(|&n| n == to)?;
        self.matrix[i][j]
    }
}

/// Errors while building a machine model.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    #[error("cannot read topology file {path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error(
        "topology file {path} is not a valid hwloc XML topology (hwloc 2.x, XML v2): {reason}"
    )]
    Malformed { path: PathBuf, reason: String },
    #[error(
        "hwloc crashed loading topology file {path} ({signal}){detail}: the file is damaged or was not written by hwloc 2; export it again with lstopo --of xml"
    )]
    Crashed {
        path: PathBuf,
        /// The signal's name, e.g. "SIGSEGV".
        signal: String,
        /// What hwloc said last, as ` after "..."`, or empty.
        detail: String,
    },
    #[error("hwloc could not discover this machine: {0}")]
    Discovery(String),
}

impl Machine {
    /// Discovers the running machine.
    pub fn live() -> Result<Self, MachineError> {
        hwloc::load(None)
    }

    /// Reads an hwloc XML topology file.
    pub fn from_xml_file(path: &Path) -> Result<Self, MachineError> {
        hwloc::load(Some(path))
    }

    /// The live machine, or the file when one is given.
    pub fn load(path: Option<&Path>) -> Result<Self, MachineError> {
        hwloc::load(path)
    }

    /// Whether this model describes the machine we run on (placement possible).
    pub fn is_live(&self) -> bool {
        self.source == Source::Live
    }

    /// A node by OS index.
    pub fn node(&self, os_index: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.os_index == os_index)
    }

    /// The node whose CPUs include `cpu`.
    pub fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        self.nodes
            .iter()
            .find(|n| n.cpus.contains(cpu))
            .map(|n| n.os_index)
    }

    /// All node OS indexes.
    pub fn node_ids(&self) -> IdSet {
        self.nodes.iter().map(|n| n.os_index).collect()
    }

    /// Allowed nodes that have CPUs.
    pub fn cpu_nodes(&self) -> IdSet {
        self.nodes
            .iter()
            .filter(|n| !n.cpuless && n.allowed)
            .map(|n| n.os_index)
            .collect()
    }

    /// Allowed nodes that have memory, CPU-less ones included: where
    /// placements may put pages (the interleave set).
    pub fn memory_nodes(&self) -> IdSet {
        self.nodes
            .iter()
            .filter(|n| n.allowed && n.memory_bytes > 0)
            .map(|n| n.os_index)
            .collect()
    }

    /// The CPUs of `node` this process may use (empty for a CPU-less or
    /// unknown node).
    pub fn allowed_cpus_of(&self, node: u32) -> IdSet {
        self.node(node)
            .map(|n| n.cpus.intersection(&self.allowed_cpus))
            .unwrap_or_default()
    }

    /// Distance between two nodes; falls back to 10 (local) / 20 (remote)
    /// when the machine has no distance matrix, as the kernel does.
    pub fn distance(&self, from: u32, to: u32) -> u64 {
        self.distances
            .as_ref()
            .and_then(|d| d.get(from, to))
            .unwrap_or(if from == to { 10 } else { 20 })
    }

    /// Hop count between two nodes (0 for the same node).
    pub fn hops_between(&self, from: u32, to: u32) -> Option<u32> {
        if from == to {
            return Some(0);
        }
        self.hops.get(from, to)
    }

    /// The levels of the data (or unified) caches, smallest first.
    pub fn data_cache_levels(&self) -> Vec<u8> {
        let mut levels: Vec<u8> = self
            .caches
            .iter()
            .filter(|c| c.kind != "instruction")
            .map(|c| c.level)
            .collect();
        levels.sort_unstable();
        levels.dedup();
        levels
    }

    /// The largest data (or unified) cache of `level`, in bytes.
    pub fn data_cache_bytes(&self, level: u8) -> Option<u64> {
        self.caches
            .iter()
            .filter(|c| c.level == level && c.kind != "instruction")
            .map(|c| c.size_bytes)
            .max()
    }

    /// The largest last-level (data or unified) cache size, in bytes.
    pub fn last_level_cache_bytes(&self) -> Option<u64> {
        self.data_cache_bytes(*self.data_cache_levels().last()?)
    }
}
