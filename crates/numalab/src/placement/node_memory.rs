//! What memory the kernel will really give on each node: a snapshot of the
//! kernel's memory figures, and what a placement may take from each node.
//!
//! The nodes' own figures (`/sys/devices/system/node/nodeN/meminfo`) are the
//! truth on an ordinary machine. On many virtual machines they are not the
//! whole story: memory is hot-added to a node as it is used (virtio-mem,
//! ACPI hot-plug), given back to the host (ballooning), or left in offline
//! memory blocks. Then the nodes' totals and `/proc/meminfo` disagree, or the
//! online memory blocks hold more than the nodes count. [`NodeMemory`] reads
//! every source once, says when they disagree ([`MemoryDisagreement`]), and
//! gives the capacity check ([`super::capacity`]) what each node can give
//! ([`NodeMemory::allocatable`]).
//!
//! Sources, all read under a root directory so tests feed fixture trees:
//! - per node, `nodeN/meminfo`: `MemTotal`, `MemFree`, `Active(file)`,
//!   `Inactive(file)`, `KReclaimable` (else `SReclaimable`); the node's low
//!   watermarks from `/proc/zoneinfo`;
//! - `/proc/meminfo`: `MemTotal`, `MemAvailable`;
//! - this process's memory cgroup (found as the environment finds it,
//!   `placement::sysroot`): v2 `memory.max`, `memory.current`,
//!   `memory.stat` `inactive_file`; v1 `memory.limit_in_bytes`,
//!   `memory.usage_in_bytes`, `memory.stat` `total_inactive_file`;
//! - memory blocks: `/sys/devices/system/memory/block_size_bytes` (hex),
//!   `memoryM/state`, the `nodeN/memoryM` links, `auto_online_blocks`.
//!
//! A node's *available* memory is estimated the way the kernel estimates
//! `MemAvailable` (`si_mem_available`), per node:
//!
//! ```text
//! available = MemFree
//!           + file  - min(file / 2, low)          file = Active(file) + Inactive(file)
//!           + slab  - min(slab / 2, low)          slab = KReclaimable (or SReclaimable)
//! ```
//!
//! where `low` is the sum of the node's zones' low watermarks (half of each
//! figure when `/proc/zoneinfo` cannot say). The kernel also subtracts its
//! reserve (high watermarks and lowmem reserves); the capacity check keeps
//! its own margin for that (`capacity::usable`).
//!
//! What a placement may take from a node ([`NodeMemory::allocatable`]):
//! - on an ordinary machine, the node's available memory;
//! - when `/proc/meminfo` counts more than the nodes (memory being
//!   hot-added), the memory the nodes do not account for (the system's
//!   `MemAvailable` less the nodes' available, and likewise for the totals)
//!   is attributed to the nodes it can come to: to the nodes whose online
//!   blocks exceed their `MemTotal`, in proportion to that excess and never
//!   more than it; else, on a machine with one memory node, all of it to
//!   that node; else to every node in proportion to its `MemTotal`;
//! - in every case capped by what the cgroup has left (its limit less its
//!   usage, reclaimable page cache not counted as used, at the tightest
//!   level of the hierarchy), which also caps a whole plan
//!   ([`NodeMemory::cgroup`]).
//!
//! Memory ballooned out or in offline blocks is never counted: the kernel
//! will not give it until the host or an administrator brings it back.

use super::sysroot::{ProcessCgroups, SysRoot};
use crate::text::format;
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Nodes read at most: above any kernel's `MAX_NUMNODES` (1024).
const MAX_NODES: usize = 4096;
/// Memory blocks read at most, over all nodes: 256 TiB of 2 GiB blocks.
/// Beyond that the blocks are not read (unknown), which keeps a snapshot
/// quick on any machine.
const MAX_BLOCKS: usize = 1 << 17;

/// One node's memory figures, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFigures {
    /// `MemTotal` of the node's meminfo: the memory the node counts now.
    pub total: u64,
    /// `MemFree`.
    pub free: u64,
    /// Page cache: `Active(file)` + `Inactive(file)`.
    pub file: u64,
    /// Reclaimable kernel memory: `KReclaimable`, else `SReclaimable`.
    pub reclaimable: u64,
    /// Sum of the node's zones' low watermarks, when /proc/zoneinfo says.
    pub low_watermark: Option<u64>,
    /// What the kernel would reclaim and give: see the module documentation.
    pub available: u64,
    /// Bytes in the node's online memory blocks, when sysfs lists them.
    pub online_block_bytes: Option<u64>,
    /// Bytes in the node's offline memory blocks, when sysfs lists them.
    pub offline_block_bytes: Option<u64>,
}

/// The memory cgroup's limit on this process, at the tightest level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupMemory {
    /// 1 or 2 (the cgroup version the limit comes from).
    pub version: u32,
    /// The limit of the level with the least left, in bytes.
    pub limit: u64,
    /// What is left under that limit: the limit less the usage, the usage
    /// without inactive page cache (which the kernel reclaims first).
    pub remaining: u64,
}

impl CgroupMemory {
    /// The file the limit is read from.
    pub fn limit_file(&self) -> &'static str {
        if self.version == 1 {
            "memory.limit_in_bytes"
        } else {
            "memory.max"
        }
    }
}

/// The likely reason the kernel's memory figures disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryCause {
    /// /proc/meminfo counts more than the nodes: memory is being hot-added
    /// to the nodes (virtio-mem, ACPI hot-plug) as it is used.
    HotAdd,
    /// The nodes count more than /proc/meminfo: memory is being removed.
    Removal,
    /// Online memory blocks hold more than the nodes count: memory given
    /// back to the host by a balloon driver.
    Balloon,
    /// Some memory blocks are offline.
    OfflineBlocks,
}

impl MemoryCause {
    /// A few words for messages.
    pub fn words(self) -> &'static str {
        match self {
            MemoryCause::HotAdd => "memory being hot-added",
            MemoryCause::Removal => "memory being removed",
            MemoryCause::Balloon => "memory ballooned out to the host",
            MemoryCause::OfflineBlocks => "offline memory blocks",
        }
    }
}

/// The kernel's memory figures disagree: what each says, and why, likely.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryDisagreement {
    /// The likely cause.
    pub cause: MemoryCause,
    /// Sum of `MemTotal` over the nodes' meminfo files.
    pub nodes_total_bytes: u64,
    /// `MemTotal` of /proc/meminfo.
    pub system_total_bytes: u64,
    /// `MemAvailable` of /proc/meminfo.
    pub system_available_bytes: u64,
    /// Bytes in online memory blocks, over all nodes, when sysfs lists them.
    pub online_block_bytes: Option<u64>,
    /// Bytes in offline memory blocks, over all nodes, when sysfs lists them.
    pub offline_block_bytes: Option<u64>,
    /// `/sys/devices/system/memory/auto_online_blocks`: what the kernel does
    /// with hot-added blocks ("online", "online_movable", "offline").
    pub auto_online_blocks: Option<String>,
}

impl MemoryDisagreement {
    /// The figures in a few words, for a refusal or a table note: "node
    /// meminfo says 4.3 GiB total; /proc/meminfo 128 GiB, memory being
    /// hot-added".
    pub fn figures(&self) -> String {
        let nodes = format::bytes(self.nodes_total_bytes);
        match self.cause {
            MemoryCause::HotAdd | MemoryCause::Removal => format!(
                "node meminfo says {nodes} total; /proc/meminfo {}, {}",
                format::bytes(self.system_total_bytes),
                self.cause.words()
            ),
            MemoryCause::Balloon => format!(
                "node meminfo says {nodes} total; online memory blocks {}, {}",
                format::bytes(self.online_block_bytes.unwrap_or(0)),
                self.cause.words()
            ),
            MemoryCause::OfflineBlocks => format!(
                "node meminfo says {nodes} total; {} more in offline memory blocks",
                format::bytes(self.offline_block_bytes.unwrap_or(0))
            ),
        }
    }

    /// One sentence for the environment's warnings and the topology view:
    /// what differs, why, and what capacity checks use.
    pub fn sentence(&self) -> String {
        let gives = "capacity checks use what the kernel will give on each node";
        match self.cause {
            MemoryCause::HotAdd | MemoryCause::Removal => format!(
                "the nodes' meminfo counts {} of memory but /proc/meminfo {} ({} available), \
                 likely {} (virtio-mem, hot-plug or ballooning): {gives}, not the nodes' totals",
                format::bytes(self.nodes_total_bytes),
                format::bytes(self.system_total_bytes),
                format::bytes(self.system_available_bytes),
                self.cause.words()
            ),
            MemoryCause::Balloon => format!(
                "online memory blocks hold {} but the nodes' meminfo counts {}, likely {}: \
                 {gives}, not the blocks",
                format::bytes(self.online_block_bytes.unwrap_or(0)),
                format::bytes(self.nodes_total_bytes),
                self.cause.words()
            ),
            MemoryCause::OfflineBlocks => format!(
                "{} of memory is in offline memory blocks (auto_online_blocks: {}): the kernel \
                 gives none of it until the blocks are onlined; {gives}",
                format::bytes(self.offline_block_bytes.unwrap_or(0)),
                self.auto_online_blocks.as_deref().unwrap_or("unknown")
            ),
        }
    }
}

/// When to read the memory blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocks {
    /// Always (the environment, the topology view).
    Always,
    /// Only when the nodes' totals and /proc/meminfo disagree: the blocks
    /// only decide where unaccounted memory goes, and a capacity check
    /// should not read thousands of files on every ordinary machine.
    WhenTotalsDisagree,
}

/// A snapshot of the memory the kernel will give: see the module
/// documentation.
#[derive(Debug, Clone, Default)]
pub struct NodeMemory {
    /// Per node with a readable meminfo.
    pub nodes: BTreeMap<u32, NodeFigures>,
    /// `MemTotal` of /proc/meminfo.
    pub system_total: Option<u64>,
    /// `MemAvailable` of /proc/meminfo.
    pub system_available: Option<u64>,
    /// The memory cgroup's limit, when one binds.
    pub cgroup: Option<CgroupMemory>,
    /// `auto_online_blocks`.
    pub auto_online_blocks: Option<String>,
    /// Set when the figures disagree.
    pub disagreement: Option<MemoryDisagreement>,
    /// Per node: (available, total) bytes attributed to it from what the
    /// nodes do not account for.
    attributed: BTreeMap<u32, (u64, u64)>,
}

impl NodeMemory {
    /// The snapshot of this machine now, memory blocks included.
    pub fn capture() -> NodeMemory {
        Self::capture_from(Path::new("/"), Blocks::Always)
    }

    /// The snapshot a capacity check needs: memory blocks only read where
    /// they decide something ([`Blocks::WhenTotalsDisagree`]).
    pub fn capture_for_capacity() -> NodeMemory {
        Self::capture_from(Path::new("/"), Blocks::WhenTotalsDisagree)
    }

    /// The snapshot of the tree under `root` (`<root>/proc`, `<root>/sys`).
    /// Never fails: what cannot be read is missing.
    pub fn capture_from(root: &Path, blocks: Blocks) -> NodeMemory {
        let fs = SysRoot::new(root);
        let lows = fs
            .read("proc/zoneinfo")
            .map(|t| low_watermarks(&t, super::sys::page_size() as u64))
            .unwrap_or_default();
        let mut nodes = BTreeMap::new();
        for n in node_ids(&fs) {
            let Some(text) = fs.read(&format!("sys/devices/system/node/node{n}/meminfo")) else {
                continue;
            };
            let get = |key: &str| meminfo_value(&text, key);
            let (Some(total), Some(free)) = (get("MemTotal"), get("MemFree")) else {
                continue;
            };
            let mut f = NodeFigures {
                total,
                free,
                file: get("Active(file)")
                    .unwrap_or(0)
                    .saturating_add(get("Inactive(file)").unwrap_or(0)),
                reclaimable: get("KReclaimable")
                    .or_else(|| get("SReclaimable"))
                    .unwrap_or(0),
                low_watermark: lows.get(&n).copied(),
                ..NodeFigures::default()
            };
            f.available = estimate_available(&f);
            nodes.insert(n, f);
        }
        let proc_meminfo = fs.read("proc/meminfo").unwrap_or_default();
        let mut s = NodeMemory {
            nodes,
            system_total: meminfo_value(&proc_meminfo, "MemTotal"),
            system_available: meminfo_value(&proc_meminfo, "MemAvailable"),
            cgroup: cgroup_memory(&fs),
            auto_online_blocks: fs.read("sys/devices/system/memory/auto_online_blocks"),
            ..NodeMemory::default()
        };
        // A kernel built without NUMA has no node directories: its one
        // node is the whole of /proc/meminfo.
        if s.nodes.is_empty() && !fs.path("sys/devices/system/node").is_dir() {
            if let (Some(total), Some(available)) = (s.system_total, s.system_available) {
                let free = meminfo_value(&proc_meminfo, "MemFree").unwrap_or(available);
                s.nodes.insert(
                    0,
                    NodeFigures {
                        total,
                        free,
                        available,
                        ..NodeFigures::default()
                    },
                );
            }
        }
        if blocks == Blocks::Always || s.totals_cause().is_some() {
            read_blocks(&fs, &mut s.nodes);
        }
        s.disagreement = s.find_disagreement();
        s.attribute();
        s
    }

    /// The sum of the nodes' `MemTotal`.
    pub fn nodes_total(&self) -> u64 {
        self.nodes.values().map(|f| f.total).sum()
    }

    /// Whether /proc/meminfo's total and the nodes' differ beyond the
    /// tolerance, and which way.
    fn totals_cause(&self) -> Option<MemoryCause> {
        let system = self.system_total?;
        if self.nodes.is_empty() {
            return None;
        }
        let nodes = self.nodes_total();
        // Both are sums of the same managed pages and equal on a steady
        // machine; they differ only while pages move (hot-plug, balloon
        // steps) between the reads of the two files. 1% or one 128 MiB
        // memory block keeps such a race from being reported; the hot-plug
        // case (a few GiB of 128) is far beyond it.
        let tolerance = (system.max(nodes) / 100).max(128 << 20);
        if system > nodes.saturating_add(tolerance) {
            Some(MemoryCause::HotAdd)
        } else if nodes > system.saturating_add(tolerance) {
            Some(MemoryCause::Removal)
        } else {
            None
        }
    }

    fn find_disagreement(&self) -> Option<MemoryDisagreement> {
        let sum = |get: fn(&NodeFigures) -> Option<u64>| -> Option<u64> {
            self.nodes.values().map(get).sum::<Option<u64>>()
        };
        let online = sum(|f| f.online_block_bytes);
        let offline = sum(|f| f.offline_block_bytes);
        let cause = self
            .totals_cause()
            .or_else(|| {
                self.nodes
                    .values()
                    .any(|f| block_excess(f) > 0)
                    .then_some(MemoryCause::Balloon)
            })
            .or_else(|| {
                offline
                    .is_some_and(|o| o > 0)
                    .then_some(MemoryCause::OfflineBlocks)
            })?;
        Some(MemoryDisagreement {
            cause,
            nodes_total_bytes: self.nodes_total(),
            system_total_bytes: self.system_total.unwrap_or(0),
            system_available_bytes: self.system_available.unwrap_or(0),
            online_block_bytes: online,
            offline_block_bytes: offline,
            auto_online_blocks: self.auto_online_blocks.clone(),
        })
    }

    /// Attributes what the nodes do not account for (see the module
    /// documentation); only when /proc/meminfo counts more than the nodes.
    fn attribute(&mut self) {
        if self.totals_cause() != Some(MemoryCause::HotAdd) {
            return;
        }
        let nodes_available: u64 = self.nodes.values().map(|f| f.available).sum();
        let extra_available = self
            .system_available
            .unwrap_or(0)
            .saturating_sub(nodes_available);
        let extra_total = self
            .system_total
            .unwrap_or(0)
            .saturating_sub(self.nodes_total());
        // (node, weight, cap)
        let mut weights: Vec<(u32, u64, Option<u64>)> = self
            .nodes
            .iter()
            .map(|(&n, f)| (n, block_excess(f), Some(block_excess(f))))
            .filter(|w| w.1 > 0)
            .collect();
        if weights.is_empty() {
            let memory_nodes: Vec<(u32, u64)> = self
                .nodes
                .iter()
                .filter(|(_, f)| f.total > 0)
                .map(|(&n, f)| (n, f.total))
                .collect();
            weights = match memory_nodes.as_slice() {
                [(n, _)] => vec![(*n, 1, None)],
                _ => memory_nodes.iter().map(|&(n, t)| (n, t, None)).collect(),
            };
        }
        let whole: u128 = weights.iter().map(|w| w.1 as u128).sum();
        if whole == 0 {
            return;
        }
        for (n, w, cap) in weights {
            let share =
                |extra: u64| (extra as u128 * w as u128 / whole).min(u64::MAX as u128) as u64;
            let capped = |b: u64| cap.map_or(b, |c| b.min(c));
            self.attributed.insert(
                n,
                (capped(share(extra_available)), capped(share(extra_total))),
            );
        }
    }

    /// Bytes a placement may take on `node` now (0 for a node without
    /// figures): see the module documentation.
    pub fn allocatable(&self, node: u32) -> u64 {
        let Some(f) = self.nodes.get(&node) else {
            return 0;
        };
        let extra = self.attributed.get(&node).map_or(0, |a| a.0);
        let bytes = f.available.saturating_add(extra);
        match self.cgroup {
            Some(c) => bytes.min(c.remaining),
            None => bytes,
        }
    }

    /// Bytes placements may take on `nodes` together: each node's
    /// [`NodeMemory::allocatable`], the sum capped by the cgroup.
    pub fn allocatable_on(&self, nodes: &IdSet) -> u64 {
        let sum = nodes
            .iter()
            .map(|n| self.allocatable(n))
            .fold(0u64, u64::saturating_add);
        self.cgroup.map_or(sum, |c| sum.min(c.remaining))
    }

    /// All the memory `node` has, free or not: its `MemTotal` and what is
    /// attributed to it from /proc/meminfo's larger total. `None` for a
    /// node without figures.
    pub fn memory(&self, node: u32) -> Option<u64> {
        let f = self.nodes.get(&node)?;
        let extra = self.attributed.get(&node).map_or(0, |a| a.1);
        Some(f.total.saturating_add(extra))
    }
}

/// Online block bytes beyond the node's `MemTotal`, past the tolerance; 0
/// when not beyond or unknown. Online blocks always hold a little more than
/// `MemTotal`: the page structures of boot memory (64 bytes per 4 KiB page,
/// 1.6%), the kernel image, the crash kernel and firmware reservations. A
/// sixteenth of the blocks, at least 1 GiB, covers these on machines from a
/// 512 MiB guest node to terabytes.
fn block_excess(f: &NodeFigures) -> u64 {
    let Some(online) = f.online_block_bytes else {
        return 0;
    };
    let tolerance = (online / 16).max(1 << 30);
    let excess = online.saturating_sub(f.total);
    if excess > tolerance {
        excess
    } else {
        0
    }
}

/// The kernel's `MemAvailable` estimate for one node (module documentation).
fn estimate_available(f: &NodeFigures) -> u64 {
    let keep = |bytes: u64| (bytes / 2).min(f.low_watermark.unwrap_or(u64::MAX));
    f.free
        .saturating_add(f.file - keep(f.file))
        .saturating_add(f.reclaimable - keep(f.reclaimable))
}

/// The ids of `<root>/sys/devices/system/node/nodeN`, ascending, at most
/// [`MAX_NODES`].
fn node_ids(fs: &SysRoot) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(fs.path("sys/devices/system/node")) else {
        return Vec::new();
    };
    let mut ids: Vec<u32> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .take(MAX_NODES)
        .collect();
    ids.sort_unstable();
    ids
}

/// The value of `key` in a meminfo text, in bytes: `MemTotal:  123 kB` in
/// /proc/meminfo, `Node 0 MemTotal:  123 kB` in a node's. `key` is matched
/// whole (`MemFree` is not `HugePages_Free`).
pub(crate) fn meminfo_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (head, rest) = line.split_once(':')?;
        let name = head.split_whitespace().last()?;
        if name != key {
            return None;
        }
        let mut parts = rest.split_whitespace();
        let value: u64 = parts.next()?.parse().ok()?;
        Some(match parts.next() {
            Some(_) => value.saturating_mul(1024),
            None => value,
        })
    })
}

/// Per node, the sum of its zones' low watermarks in bytes, from
/// /proc/zoneinfo ("Node 0, zone   Normal" then "        low      31427",
/// in pages).
fn low_watermarks(zoneinfo: &str, page: u64) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    let mut node = None;
    for line in zoneinfo.lines() {
        if let Some(rest) = line.strip_prefix("Node ") {
            node = rest.split(',').next().and_then(|n| n.trim().parse().ok());
            continue;
        }
        let mut words = line.split_whitespace();
        if let (Some(n), Some("low"), Some(v)) = (node, words.next(), words.next()) {
            if let Ok(pages) = v.parse::<u64>() {
                let e: &mut u64 = out.entry(n).or_default();
                *e = e.saturating_add(pages.saturating_mul(page));
            }
        }
    }
    out
}

/// Reads each node's online and offline memory block bytes, when sysfs
/// lists the blocks (and there are at most [`MAX_BLOCKS`]).
fn read_blocks(fs: &SysRoot, nodes: &mut BTreeMap<u32, NodeFigures>) {
    let Some(block) = fs
        .read("sys/devices/system/memory/block_size_bytes")
        .and_then(|t| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok())
        .filter(|&b| b > 0)
    else {
        return;
    };
    let mut counts = BTreeMap::new();
    let mut seen = 0usize;
    for &n in nodes.keys() {
        let Ok(dir) = std::fs::read_dir(fs.path(&format!("sys/devices/system/node/node{n}")))
        else {
            return;
        };
        let (mut online, mut offline) = (0u64, 0u64);
        for e in dir.filter_map(|e| e.ok()) {
            let name = e.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|s| s.strip_prefix("memory"))
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            seen += 1;
            if seen > MAX_BLOCKS {
                return;
            }
            match fs
                .read(&format!("sys/devices/system/memory/memory{id}/state"))
                .as_deref()
            {
                Some("online") => online += 1,
                Some("offline" | "going-offline") => offline += 1,
                _ => {}
            }
        }
        counts.insert(n, (online, offline));
    }
    for (n, (online, offline)) in counts {
        if let Some(f) = nodes.get_mut(&n) {
            f.online_block_bytes = Some(online.saturating_mul(block));
            f.offline_block_bytes = Some(offline.saturating_mul(block));
        }
    }
}

/// The memory cgroup's tightest limit on this process and what is left
/// under it, over the cgroup and its ancestors.
fn cgroup_memory(fs: &SysRoot) -> Option<CgroupMemory> {
    let cgroups = ProcessCgroups::read(fs)?;
    let (version, dirs, limit_name, usage_name, inactive_name) =
        if let Some((h, _)) = cgroups.v1("memory") {
            (
                1,
                h.dirs(),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "total_inactive_file",
            )
        } else {
            let path = cgroups.v2_path()?;
            (
                2,
                cgroups.v2(&path).dirs(),
                "memory.max",
                "memory.current",
                "inactive_file",
            )
        };
    let number = |rel: String| fs.read(&rel).and_then(|t| t.parse::<u64>().ok());
    dirs.iter()
        .filter_map(|d| {
            // "max" (v2) and v1's huge page-aligned number mean no limit.
            let limit = number(format!("{d}/{limit_name}")).filter(|&l| l < 1 << 62)?;
            let usage = number(format!("{d}/{usage_name}")).unwrap_or(0);
            let inactive = fs
                .read(&format!("{d}/memory.stat"))
                .and_then(|t| {
                    t.lines().find_map(|l| {
                        let (k, v) = l.split_once(' ')?;
                        if k != inactive_name {
                            return None;
                        }
                        v.trim().parse::<u64>().ok()
                    })
                })
                .unwrap_or(0);
            Some(CgroupMemory {
                version,
                limit,
                remaining: limit.saturating_sub(usage.saturating_sub(inactive)),
            })
        })
        .min_by_key(|c| c.remaining)
}

/// Fixture trees of `/proc` and `/sys` files for tests that read them
/// through a root directory, here and in numalab-report's tests (compiled
/// always: a feature for them would build the engine twice in one test
/// run).
#[doc(hidden)]
pub mod test_tree {
    use std::path::{Path, PathBuf};

    /// A fixture tree under the temporary directory, removed on drop.
    pub struct Tree(PathBuf);

    impl Tree {
        /// An empty tree named after `name` and this process.
        pub fn new(name: &str) -> Tree {
            let d =
                std::env::temp_dir().join(format!("numalab-tree-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Tree(d)
        }

        /// Writes `text` at `rel`, creating its directories.
        pub fn file(&self, rel: &str, text: &str) -> &Tree {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
            self
        }

        /// The tree's root, to read it as `/`.
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    use test_tree::Tree;

    impl Tree {
        fn dir(&self, rel: &str) -> &Tree {
            std::fs::create_dir_all(self.path().join(rel)).unwrap();
            self
        }

        /// Node `n`'s meminfo with these figures (bytes, written in kB).
        fn node(&self, n: u32, total: u64, free: u64, file: u64, slab: u64) -> &Tree {
            let kb = |b: u64| b / KIB;
            self.file(
                &format!("sys/devices/system/node/node{n}/meminfo"),
                &format!(
                    "Node {n} MemTotal:       {} kB\nNode {n} MemFree:        {} kB\n\
                     Node {n} MemUsed:        {} kB\nNode {n} Active(file):   {} kB\n\
                     Node {n} Inactive(file): {} kB\nNode {n} KReclaimable:   {} kB\n\
                     Node {n} SReclaimable:   {} kB\nNode {n} HugePages_Free:     0\n",
                    kb(total),
                    kb(free),
                    kb(total - free),
                    kb(file / 2),
                    kb(file - file / 2),
                    kb(slab),
                    kb(slab)
                ),
            )
        }

        fn proc_meminfo(&self, total: u64, available: u64) -> &Tree {
            self.file(
                "proc/meminfo",
                &format!(
                    "MemTotal:       {} kB\nMemFree:        1024 kB\nMemAvailable:   {} kB\n",
                    total / KIB,
                    available / KIB
                ),
            )
        }

        /// Memory blocks `ids` of node `n` in `state`, of 128 MiB.
        fn blocks(&self, n: u32, ids: std::ops::Range<u32>, state: &str) -> &Tree {
            self.file("sys/devices/system/memory/block_size_bytes", "8000000\n");
            for id in ids {
                self.dir(&format!("sys/devices/system/node/node{n}/memory{id}"));
                self.file(
                    &format!("sys/devices/system/memory/memory{id}/state"),
                    state,
                );
            }
            self
        }

        fn snapshot(&self) -> NodeMemory {
            NodeMemory::capture_from(self.path(), Blocks::Always)
        }
    }

    #[test]
    fn meminfo_keys_are_matched_whole() {
        let node = "Node 0 MemTotal:  100 kB\nNode 0 HugePages_Free:  7\nNode 0 MemFree:  40 kB\n";
        assert_eq!(meminfo_value(node, "MemTotal"), Some(100 * KIB));
        assert_eq!(meminfo_value(node, "MemFree"), Some(40 * KIB));
        assert_eq!(meminfo_value(node, "HugePages_Free"), Some(7));
        assert_eq!(meminfo_value(node, "Free"), None);
        assert_eq!(
            meminfo_value("MemAvailable:   23983728 kB\n", "MemAvailable"),
            Some(23983728 * KIB)
        );
    }

    #[test]
    fn zoneinfo_low_watermarks_add_up_per_node() {
        let z = "Node 0, zone      DMA\n  per-node stats\n      nr_inactive_anon 717\n\
                 pages free     3840\n        min      10\n        low      13\n        high     16\n\
                 Node 0, zone    DMA32\n  pages free     3840\n        low      2888\n\
                 Node 1, zone   Normal\n  pages free     1\n        low      100\n";
        let lows = low_watermarks(z, 4096);
        assert_eq!(lows.get(&0), Some(&((13 + 2888) * 4096)));
        assert_eq!(lows.get(&1), Some(&(100 * 4096)));
    }

    #[test]
    fn available_counts_page_cache_and_reclaimable_slab_as_the_kernel_does() {
        let mut f = NodeFigures {
            total: 16 * GIB,
            free: 2 * GIB,
            file: 8 * GIB,
            reclaimable: GIB,
            low_watermark: Some(100 * MIB),
            ..NodeFigures::default()
        };
        // All the cache but the low watermark, once for each kind.
        assert_eq!(estimate_available(&f), 11 * GIB - 200 * MIB);
        // Without watermarks, half of each.
        f.low_watermark = None;
        assert_eq!(estimate_available(&f), 2 * GIB + 4 * GIB + GIB / 2);
    }

    /// The hot-plug VM of issue 16: 1 node, 16 CPUs, 128 GiB; node 0's
    /// meminfo says 4.3 GiB while /proc/meminfo says 128 GiB, 125 GiB
    /// available.
    fn hotplug_vm(t: &Tree) -> NodeMemory {
        let node_total = 4 * GIB + 307 * MIB;
        t.node(0, node_total, 2 * GIB, GIB, 200 * MIB)
            .proc_meminfo(128 * GIB, 125 * GIB)
            .file("proc/self/cgroup", "0::/user.slice\n")
            .dir("sys/fs/cgroup/user.slice")
            .file("sys/fs/cgroup/user.slice/memory.max", "max\n")
            .file("sys/devices/system/memory/auto_online_blocks", "online\n")
            .blocks(0, 0..35, "online")
            .snapshot()
    }

    #[test]
    fn a_hot_plug_vm_gives_what_proc_meminfo_has_available() {
        let t = Tree::new("hotplug");
        let s = hotplug_vm(&t);
        let d = s.disagreement.clone().unwrap();
        assert_eq!(d.cause, MemoryCause::HotAdd);
        assert_eq!(d.nodes_total_bytes, 4 * GIB + 307 * MIB);
        assert_eq!(d.system_total_bytes, 128 * GIB);
        assert_eq!(d.system_available_bytes, 125 * GIB);
        assert_eq!(d.online_block_bytes, Some(35 * 128 * MIB));
        assert_eq!(d.auto_online_blocks.as_deref(), Some("online"));
        // One memory node: all that the node does not account for is its.
        assert_eq!(s.allocatable(0), 125 * GIB);
        assert_eq!(s.memory(0), Some(128 * GIB));
        assert_eq!(s.cgroup, None);
        assert_eq!(
            d.figures(),
            "node meminfo says 4.3 GiB total; /proc/meminfo 128 GiB, memory being hot-added"
        );
        assert_eq!(
            d.sentence(),
            "the nodes' meminfo counts 4.3 GiB of memory but /proc/meminfo 128 GiB (125 GiB \
             available), likely memory being hot-added (virtio-mem, hot-plug or ballooning): \
             capacity checks use what the kernel will give on each node, not the nodes' totals"
        );
        // A node that does not exist gives nothing.
        assert_eq!(s.allocatable(1), 0);
        assert_eq!(s.memory(1), None);
    }

    #[test]
    fn an_ordinary_two_node_server_agrees_and_counts_page_cache() {
        let t = Tree::new("ordinary");
        t.node(0, 64 * GIB, 10 * GIB, 40 * GIB, GIB)
            .node(1, 64 * GIB, 50 * GIB, 2 * GIB, GIB)
            .proc_meminfo(128 * GIB, 100 * GIB)
            .file(
                "proc/zoneinfo",
                "Node 0, zone   Normal\n        low      25600\n\
                 Node 1, zone   Normal\n        low      25600\n",
            )
            // Blocks hold the page structures and the kernel beyond MemTotal.
            .blocks(0, 0..520, "online")
            .blocks(1, 520..1040, "online");
        let s = t.snapshot();
        assert_eq!(s.disagreement, None);
        // Free memory, page cache and slab less the low watermark each.
        assert_eq!(s.allocatable(0), 10 * GIB + 40 * GIB + GIB - 200 * MIB);
        assert_eq!(s.allocatable(1), 50 * GIB + 2 * GIB + GIB - 200 * MIB);
        assert_eq!(s.memory(0), Some(64 * GIB));
        assert_eq!(s.nodes[&1].online_block_bytes, Some(520 * 128 * MIB));
        // Whatever /proc/meminfo's MemAvailable says beyond the nodes is
        // not attributed on a machine whose totals agree.
        let t = Tree::new("ordinary-more-available");
        t.node(0, 64 * GIB, 10 * GIB, 0, 0)
            .proc_meminfo(64 * GIB, 60 * GIB);
        let s = t.snapshot();
        assert_eq!(s.disagreement, None);
        assert_eq!(s.allocatable(0), 10 * GIB);
    }

    #[test]
    fn offline_blocks_on_node_1_are_said_and_never_counted() {
        let t = Tree::new("offline");
        t.node(0, 16 * GIB, 12 * GIB, 0, 0)
            .node(1, 8 * GIB, 6 * GIB, 0, 0)
            .proc_meminfo(24 * GIB, 18 * GIB)
            .file("sys/devices/system/memory/auto_online_blocks", "offline\n")
            .blocks(0, 0..130, "online")
            .blocks(1, 130..195, "online")
            .blocks(1, 195..259, "offline");
        let s = t.snapshot();
        let d = s.disagreement.clone().unwrap();
        assert_eq!(d.cause, MemoryCause::OfflineBlocks);
        assert_eq!(d.offline_block_bytes, Some(8 * GIB));
        assert_eq!(s.nodes[&1].offline_block_bytes, Some(8 * GIB));
        assert_eq!(s.nodes[&0].offline_block_bytes, Some(0));
        assert_eq!(s.allocatable(1), 6 * GIB);
        assert_eq!(s.memory(1), Some(8 * GIB));
        assert_eq!(
            d.figures(),
            "node meminfo says 24 GiB total; 8 GiB more in offline memory blocks"
        );
        assert!(
            d.sentence().starts_with(
                "8 GiB of memory is in offline memory blocks (auto_online_blocks: offline)"
            ),
            "{}",
            d.sentence()
        );
    }

    #[test]
    fn a_ballooned_vm_counts_what_the_nodes_count() {
        // 64 GiB of blocks online, 48 GiB given back to the host: the
        // balloon driver takes them out of both totals, which agree.
        let t = Tree::new("balloon");
        t.node(0, 16 * GIB, 10 * GIB, 0, 0)
            .proc_meminfo(16 * GIB, 10 * GIB)
            .blocks(0, 0..512, "online");
        let s = t.snapshot();
        let d = s.disagreement.clone().unwrap();
        assert_eq!(d.cause, MemoryCause::Balloon);
        assert_eq!(d.online_block_bytes, Some(64 * GIB));
        assert_eq!(s.allocatable(0), 10 * GIB);
        assert_eq!(s.memory(0), Some(16 * GIB));
        assert_eq!(
            d.figures(),
            "node meminfo says 16 GiB total; online memory blocks 64 GiB, memory ballooned out to the host"
        );
    }

    #[test]
    fn nodes_counting_more_than_the_system_keep_their_own_figures() {
        let t = Tree::new("removal");
        t.node(0, 32 * GIB, 20 * GIB, 0, 0)
            .proc_meminfo(16 * GIB, 4 * GIB);
        let s = t.snapshot();
        assert_eq!(s.disagreement.as_ref().unwrap().cause, MemoryCause::Removal);
        assert_eq!(s.allocatable(0), 20 * GIB);
        assert_eq!(s.memory(0), Some(32 * GIB));
    }

    #[test]
    fn unaccounted_memory_goes_to_the_nodes_whose_blocks_exceed_their_total() {
        // Node 1 has 40 GiB of online blocks but counts 8 GiB: it is where
        // the memory is being added, up to that excess.
        let t = Tree::new("two-node-hotplug");
        t.node(0, 32 * GIB, 20 * GIB, 0, 0)
            .node(1, 8 * GIB, 4 * GIB, 0, 0)
            .proc_meminfo(80 * GIB, 70 * GIB)
            .blocks(0, 0..256, "online")
            .blocks(1, 256..576, "online");
        let s = t.snapshot();
        assert_eq!(s.disagreement.as_ref().unwrap().cause, MemoryCause::HotAdd);
        assert_eq!(s.allocatable(0), 20 * GIB);
        // 46 GiB unaccounted, capped by node 1's 32 GiB excess.
        assert_eq!(s.allocatable(1), 4 * GIB + 32 * GIB);
        assert_eq!(s.memory(1), Some(40 * GIB));
        // Without blocks, in proportion to the nodes' totals.
        let t = Tree::new("two-node-hotplug-no-blocks");
        t.node(0, 30 * GIB, 20 * GIB, 0, 0)
            .node(1, 10 * GIB, 4 * GIB, 0, 0)
            .proc_meminfo(80 * GIB, 64 * GIB);
        let s = t.snapshot();
        assert_eq!(s.allocatable(0), 20 * GIB + 30 * GIB);
        assert_eq!(s.allocatable(1), 4 * GIB + 10 * GIB);
        assert_eq!(s.memory(0), Some(60 * GIB));
    }

    #[test]
    fn a_capacity_snapshot_reads_blocks_only_where_totals_disagree() {
        let t = Tree::new("lazy-blocks");
        t.node(0, 16 * GIB, 10 * GIB, 0, 0)
            .proc_meminfo(16 * GIB, 10 * GIB)
            .blocks(0, 0..512, "online");
        let s = NodeMemory::capture_from(t.path(), Blocks::WhenTotalsDisagree);
        assert_eq!(s.nodes[&0].online_block_bytes, None);
        assert_eq!(s.disagreement, None);
        let t = Tree::new("lazy-blocks-hotplug");
        hotplug_vm(&t);
        let s = NodeMemory::capture_from(t.path(), Blocks::WhenTotalsDisagree);
        assert_eq!(s.nodes[&0].online_block_bytes, Some(35 * 128 * MIB));
    }

    #[test]
    fn cgroup_v2_limits_cap_every_node() {
        let t = Tree::new("cgroup-v2");
        t.node(0, 64 * GIB, 40 * GIB, 0, 0)
            .node(1, 64 * GIB, 40 * GIB, 0, 0)
            .proc_meminfo(128 * GIB, 80 * GIB)
            .file("proc/self/cgroup", "0::/batch/job7\n")
            .file("sys/fs/cgroup/batch/memory.max", &format!("{}\n", 16 * GIB))
            .file(
                "sys/fs/cgroup/batch/memory.current",
                &format!("{}\n", 6 * GIB),
            )
            .file(
                "sys/fs/cgroup/batch/memory.stat",
                &format!("anon 1\ninactive_file {}\nactive_file 5\n", 2 * GIB),
            )
            .file("sys/fs/cgroup/batch/job7/memory.max", "max\n")
            .file("sys/fs/cgroup/batch/job7/memory.current", "4096\n");
        let s = t.snapshot();
        let c = s.cgroup.unwrap();
        // 16 GiB less 6 GiB used, of which 2 GiB is inactive page cache.
        assert_eq!((c.version, c.limit, c.remaining), (2, 16 * GIB, 12 * GIB));
        assert_eq!(c.limit_file(), "memory.max");
        assert_eq!(s.allocatable(0), 12 * GIB);
        assert_eq!(s.allocatable(1), 12 * GIB);
        assert_eq!(s.disagreement, None);
    }

    #[test]
    fn cgroup_v1_limits_take_the_tightest_level() {
        let t = Tree::new("cgroup-v1");
        t.node(0, 64 * GIB, 40 * GIB, 0, 0)
            .proc_meminfo(64 * GIB, 40 * GIB)
            .file("proc/self/cgroup", "4:memory:/docker/abc\n0::/\n")
            .file(
                "sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            )
            .file(
                "sys/fs/cgroup/memory/docker/memory.limit_in_bytes",
                &format!("{}\n", 32 * GIB),
            )
            .file(
                "sys/fs/cgroup/memory/docker/memory.usage_in_bytes",
                &format!("{}\n", 30 * GIB),
            )
            .file(
                "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
                &format!("{}\n", 8 * GIB),
            )
            .file(
                "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes",
                &format!("{}\n", GIB),
            )
            .file(
                "sys/fs/cgroup/memory/docker/abc/memory.stat",
                &format!("cache 1\ntotal_inactive_file {}\n", 512 * MIB),
            );
        let s = t.snapshot();
        let c = s.cgroup.unwrap();
        // The parent has 2 GiB left, the container 7.5 GiB: the parent binds.
        assert_eq!((c.version, c.limit, c.remaining), (1, 32 * GIB, 2 * GIB));
        assert_eq!(c.limit_file(), "memory.limit_in_bytes");
        assert_eq!(s.allocatable(0), 2 * GIB);
    }

    #[test]
    fn an_empty_tree_has_nothing_to_give() {
        let t = Tree::new("empty");
        let s = t.snapshot();
        assert!(s.nodes.is_empty());
        assert_eq!((s.system_total, s.disagreement.is_none()), (None, true));
        assert_eq!(s.allocatable(0), 0);
    }

    /// The first shortfall of `buffers` (policy, toucher CPU, bytes) on
    /// machine `fixture` with memory `s`, and its message.
    fn refusal(
        fixture: &str,
        s: &NodeMemory,
        buffers: &[(&str, Option<u32>, u64)],
    ) -> Option<String> {
        use crate::placement::capacity::{plan_message, shares, snapshot_shortfall};
        use crate::placement::{MemoryPolicy, WeightedImpl};
        let m = crate::machine::fixture(fixture);
        let placed: Vec<_> = buffers
            .iter()
            .map(|&(policy, toucher, bytes)| {
                let p = MemoryPolicy::parse(&m, policy).unwrap();
                let node = toucher.and_then(|c| m.node_of_cpu(c));
                let r = p.realize(&m, node, WeightedImpl::Emulate).unwrap();
                (shares(&m, &r, node, bytes), bytes, false)
            })
            .collect();
        let short = snapshot_shortfall(&m, &placed, s, &|_| 0)?;
        let context = s.disagreement.as_ref().map(|d| d.figures());
        Some(plan_message(
            &short,
            "use a smaller --size or fewer threads",
            context.as_deref(),
        ))
    }

    /// One node, 2 GiB in the topology file: the hot-plug VM's model.
    const ONE_NODE: &str = "8em64t-2s2ca2c-buggynuma.xml";
    /// Two nodes of 755 GiB in the topology file.
    const TWO_NODES: &str = "nvidiaDGX2.xml";

    #[test]
    fn the_hot_plug_vm_runs_sixteen_triad_threads_and_refuses_what_it_has_not() {
        let t = Tree::new("hotplug-capacity");
        let s = hotplug_vm(&t);
        // bench bandwidth --threads 16 --size 256MiB, triad: 16 threads of
        // three 256 MiB arrays, each touched locally: 12 GiB on node 0.
        let triad: Vec<_> = (0..16)
            .flat_map(|_| [("local", Some(0), 256 * MIB); 3])
            .collect();
        assert_eq!(refusal(ONE_NODE, &s, &triad), None);
        assert_eq!(
            refusal(ONE_NODE, &s, &[("local", Some(0), 200 * GIB)]).as_deref(),
            Some(
                "the buffers of this run (200 GiB) do not fit in this machine: nodes {0} have \
                 128 GiB of memory in all (node meminfo says 4.3 GiB total; /proc/meminfo 128 \
                 GiB, memory being hot-added); use a smaller --size or fewer threads"
            )
        );
        // Below the machine's memory, above what the node can give now.
        assert_eq!(
            refusal(ONE_NODE, &s, &[("local", Some(0), 126 * GIB)]).as_deref(),
            Some(
                "126 GiB for 1 buffer on node 0 do not fit: node 0 can give 125 GiB (node \
                 meminfo says 4.3 GiB total; /proc/meminfo 128 GiB, memory being hot-added), \
                 119 GiB usable after the kernel's margin; use a smaller --size or fewer threads"
            )
        );
    }

    #[test]
    fn page_cache_is_given_on_an_ordinary_machine() {
        let t = Tree::new("ordinary-capacity");
        t.node(0, 64 * GIB, 10 * GIB, 40 * GIB, 0)
            .node(1, 64 * GIB, 50 * GIB, 0, 0)
            .proc_meminfo(128 * GIB, 100 * GIB);
        let s = t.snapshot();
        // 10 GiB free and 40 GiB of page cache (half counted without
        // watermarks): 30 GiB has room.
        assert_eq!(refusal(TWO_NODES, &s, &[("bind:0", None, 24 * GIB)]), None);
        assert_eq!(
            refusal(TWO_NODES, &s, &[("bind:0", None, 40 * GIB)]).as_deref(),
            Some(
                "40 GiB for 1 buffer on node 0 do not fit: 30 GiB free there, 28.5 GiB usable \
                 after the kernel's margin; use a smaller --size or fewer threads"
            )
        );
    }

    #[test]
    fn offline_blocks_refuse_with_both_figures() {
        let t = Tree::new("offline-capacity");
        t.node(0, 16 * GIB, 12 * GIB, 0, 0)
            .node(1, 8 * GIB, 6 * GIB, 0, 0)
            .proc_meminfo(24 * GIB, 18 * GIB)
            .blocks(1, 130..195, "online")
            .blocks(1, 195..259, "offline");
        let s = t.snapshot();
        assert_eq!(refusal(TWO_NODES, &s, &[("bind:1", None, 5 * GIB)]), None);
        assert_eq!(
            refusal(TWO_NODES, &s, &[("bind:1", None, 7 * GIB)]).as_deref(),
            Some(
                "7 GiB for 1 buffer on node 1 do not fit: node 1 can give 6 GiB (node meminfo \
                 says 24 GiB total; 8 GiB more in offline memory blocks), 5.7 GiB usable after \
                 the kernel's margin; use a smaller --size or fewer threads"
            )
        );
    }

    #[test]
    fn a_cgroup_limit_refuses_what_the_nodes_would_give() {
        let t = Tree::new("cgroup-capacity-v2");
        t.node(0, 64 * GIB, 40 * GIB, 0, 0)
            .node(1, 64 * GIB, 40 * GIB, 0, 0)
            .proc_meminfo(128 * GIB, 80 * GIB)
            .file("proc/self/cgroup", "0::/job\n")
            .file("sys/fs/cgroup/job/memory.max", &format!("{}\n", 16 * GIB))
            .file(
                "sys/fs/cgroup/job/memory.current",
                &format!("{}\n", 4 * GIB),
            );
        let s = t.snapshot();
        // Each node alone has room for 8 GiB; the cgroup not for both.
        let one = [("bind:0", None, 8 * GIB)];
        assert_eq!(refusal(TWO_NODES, &s, &one), None);
        assert_eq!(
            refusal(
                TWO_NODES,
                &s,
                &[("bind:0", None, 8 * GIB), ("bind:1", None, 8 * GIB)]
            )
            .as_deref(),
            Some(
                "16 GiB for 2 buffers do not fit in this process's memory cgroup: 12 GiB left \
                 under its 16 GiB limit (memory.max); use a smaller --size or fewer threads"
            )
        );
        let t = Tree::new("cgroup-capacity-v1");
        t.node(0, 64 * GIB, 40 * GIB, 0, 0)
            .node(1, 64 * GIB, 40 * GIB, 0, 0)
            .proc_meminfo(128 * GIB, 80 * GIB)
            .file("proc/self/cgroup", "3:memory:/slurm/job1\n")
            .file(
                "sys/fs/cgroup/memory/slurm/job1/memory.limit_in_bytes",
                &format!("{}\n", 4 * GIB),
            )
            .file(
                "sys/fs/cgroup/memory/slurm/job1/memory.usage_in_bytes",
                &format!("{}\n", GIB),
            );
        let s = t.snapshot();
        assert_eq!(refusal(TWO_NODES, &s, &[("bind:1", None, 2 * GIB)]), None);
        assert_eq!(
            refusal(TWO_NODES, &s, &[("bind:1", None, 5 * GIB)]).as_deref(),
            Some(
                "5 GiB for 1 buffer do not fit in this process's memory cgroup: 3 GiB left \
                 under its 4 GiB limit (memory.limit_in_bytes); use a smaller --size or fewer \
                 threads"
            )
        );
        assert_eq!(
            s.allocatable_on(&IdSet::parse_list("0-1").unwrap()),
            3 * GIB
        );
    }

    #[test]
    fn a_kernel_without_numa_is_one_node_of_proc_meminfo() {
        let t = Tree::new("no-numa");
        t.proc_meminfo(8 * GIB, 6 * GIB);
        let s = t.snapshot();
        assert_eq!(s.allocatable(0), 6 * GIB);
        assert_eq!(s.memory(0), Some(8 * GIB));
        assert_eq!(s.disagreement, None);
        // Node directories that cannot be read are not replaced.
        t.dir("sys/devices/system/node");
        assert_eq!(t.snapshot().allocatable(0), 0);
    }

    #[test]
    fn this_machine_is_readable() {
        let s = NodeMemory::capture();
        let f = s.nodes.get(&0).expect("node 0 has a meminfo");
        assert!(f.total > 64 * MIB && f.available <= f.total, "{f:?}");
        assert!(s.system_total.is_some());
    }
}
