//! `numalab profile`: which data of a program is accessed from which node.
//!
//! The program runs with the preload library (crates/numalab-preload),
//! which samples accesses to its large allocations by protection faults
//! and writes fixed-size records ([`record`]). This module turns the
//! records into a [`Profile`]: regions grouped by allocation site, each
//! with its sampled accesses as a (CPU node of the thread) × (memory node
//! of the page) matrix, its remote share, where its pages were, and the
//! threads that touched it. [`symbols`] names the allocation sites.

pub mod diagnose;
#[path = "../../../numalab-preload/src/record.rs"]
pub mod record;
pub mod symbols;

use crate::machine::Machine;
use record::{Kind, Record, FLAG_ACCESS_UNKNOWN, FLAG_WRITE};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Version of the profile's JSON (docs/profile.md).
pub const SCHEMA_VERSION: &str = "1.0";

/// Sampled accesses by (CPU node of the thread, memory node of the page).
pub type AccessMatrix = BTreeMap<u32, BTreeMap<u32, u64>>;

/// One allocation site (or mapping) and what was sampled of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RegionProfile {
    /// `heap` (malloc family) or `mmap` (anonymous mapping).
    pub kind: String,
    /// The allocation site: the first frame outside the preload library
    /// and libc's allocator, symbolised where debug info allows.
    pub site: String,
    /// The call stack, innermost first.
    pub stack: Vec<String>,
    /// Allocations from this site, and their bytes.
    pub allocations: u64,
    pub bytes: u64,
    /// The first allocation's address, for reading the page map.
    pub first_address: u64,
    pub samples: u64,
    pub reads: u64,
    pub writes: u64,
    /// Samples whose access type the mechanism could not tell.
    pub unknown_access: u64,
    pub accesses: AccessMatrix,
    /// Share of samples from a thread on another node than the page's.
    pub remote_share: Option<f64>,
    /// Mean SLIT distance of the sampled accesses over the local distance
    /// (1.0: all local).
    pub distance_ratio: Option<f64>,
    /// Pages per node when freed or at exit (`-1`: not present).
    pub pages_by_node: BTreeMap<i32, u64>,
    /// Threads that accessed it, with their samples.
    pub threads: BTreeMap<u32, u64>,
}

/// One thread of the program.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThreadProfile {
    pub tid: u32,
    pub samples: u64,
    /// CPUs its affinity allowed at its first sample (1: pinned; `None`:
    /// not recorded).
    pub allowed_cpus: Option<u64>,
    /// CPUs it was seen on, and their nodes.
    pub cpus: Vec<u32>,
    pub nodes: Vec<u32>,
    pub remote_share: Option<f64>,
}

/// What a profiled run found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Profile {
    pub schema_version: String,
    pub command: Vec<String>,
    /// Pages armed per second asked, and the tracking threshold.
    pub rate: u64,
    pub min_bytes: u64,
    pub page_size: u64,
    pub pages_armed: u64,
    pub samples: u64,
    /// Samples outside every tracked allocation (a freed one, a race).
    pub unattributed: u64,
    pub remote_share: Option<f64>,
    pub regions: Vec<RegionProfile>,
    pub threads: Vec<ThreadProfile>,
    /// What the numbers say of the regions, with the fix of each.
    pub diagnoses: Vec<diagnose::Diagnosis>,
    /// What limits this profile (no samples, records lost, ...).
    pub warnings: Vec<String>,
}

/// A live allocation while the records are replayed.
struct Live {
    start: u64,
    len: u64,
    site: usize,
}

#[derive(Default)]
struct SiteAcc {
    kind: String,
    stack: Vec<u64>,
    allocations: u64,
    bytes: u64,
    first_address: u64,
    samples: u64,
    reads: u64,
    writes: u64,
    unknown: u64,
    accesses: AccessMatrix,
    remote: u64,
    distance_sum: f64,
    local_distance_sum: f64,
    pages: BTreeMap<i32, u64>,
    threads: BTreeMap<u32, u64>,
}

/// Builds the profile of `records` (in the order they were written) on
/// machine `m`; `name` names each call-stack address.
pub fn build(
    m: &Machine,
    command: Vec<String>,
    records: &[Record],
    name: &dyn Fn(u64) -> Option<String>,
) -> Profile {
    // Frames follow their allocation record: group them first.
    let mut frames: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == Kind::Frame) {
        frames.entry(r.addr).or_default().push((r.size, r.time_ns));
    }
    let mut sites: Vec<SiteAcc> = Vec::new();
    let mut site_of_stack: BTreeMap<(String, Vec<u64>), usize> = BTreeMap::new();
    let mut live: BTreeMap<u64, Live> = BTreeMap::new();
    let mut threads: BTreeMap<u32, (u64, BTreeSet<u32>, u64)> = BTreeMap::new();
    let (mut rate, mut min_bytes, mut page_size, mut armed) = (0, 0, 4096, 0);
    let (mut samples, mut unattributed, mut remote_total, mut located_total) =
        (0u64, 0u64, 0u64, 0u64);
    let mut used_frames: BTreeSet<u64> = BTreeSet::new();
    let mut allowed: BTreeMap<u32, u64> = BTreeMap::new();
    for r in records {
        match r.kind {
            Kind::Start => {
                rate = r.node.max(0) as u64;
                min_bytes = r.addr;
                page_size = r.size.max(1);
            }
            Kind::Totals => armed += r.addr,
            Kind::Alloc => {
                let kind = if r.flags & 1 != 0 { "mmap" } else { "heap" };
                // The stack recorded right after this allocation: take it
                // once, so that a later allocation at the same address
                // gets its own.
                let stack: Vec<u64> = if used_frames.insert(r.addr) {
                    let mut f = frames.get(&r.addr).cloned().unwrap_or_default();
                    f.sort();
                    f.into_iter().map(|(_, pc)| pc).collect()
                } else {
                    Vec::new()
                };
                let key = (kind.to_string(), stack.clone());
                let site = *site_of_stack.entry(key).or_insert_with(|| {
                    sites.push(SiteAcc {
                        kind: kind.into(),
                        stack,
                        first_address: r.addr,
                        ..SiteAcc::default()
                    });
                    sites.len() - 1
                });
                sites[site].allocations += 1;
                sites[site].bytes += r.size;
                live.insert(
                    r.addr,
                    Live {
                        start: r.addr,
                        len: r.size,
                        site,
                    },
                );
            }
            Kind::PageNodes => {
                if let Some(l) = live.get(&r.addr) {
                    *sites[l.site].pages.entry(r.node).or_default() += r.size;
                }
            }
            Kind::Free => {
                let end = r.addr.saturating_add(r.size);
                let gone: Vec<u64> = live
                    .range(..end)
                    .filter(|(_, l)| l.start + l.len > r.addr)
                    .map(|(k, _)| *k)
                    .collect();
                for k in gone {
                    live.remove(&k);
                }
            }
            Kind::Sample => {
                samples += 1;
                let cpu_node = m.node_of_cpu(r.cpu);
                let t = threads.entry(r.tid).or_default();
                t.0 += 1;
                t.1.insert(r.cpu);
                let remote = match (cpu_node, r.node) {
                    (Some(c), n) if n >= 0 => {
                        located_total += 1;
                        c != n as u32
                    }
                    _ => false,
                };
                if remote {
                    t.2 += 1;
                    remote_total += 1;
                }
                let owner = live
                    .range(..=r.addr)
                    .next_back()
                    .filter(|(_, l)| r.addr < l.start + l.len)
                    .map(|(_, l)| l.site);
                let Some(site) = owner else {
                    unattributed += 1;
                    continue;
                };
                let s = &mut sites[site];
                s.samples += 1;
                if r.flags & FLAG_ACCESS_UNKNOWN != 0 {
                    s.unknown += 1;
                } else if r.flags & FLAG_WRITE != 0 {
                    s.writes += 1;
                } else {
                    s.reads += 1;
                }
                *s.threads.entry(r.tid).or_default() += 1;
                if let (Some(c), n) = (cpu_node, r.node) {
                    if n >= 0 {
                        *s.accesses
                            .entry(c)
                            .or_default()
                            .entry(n as u32)
                            .or_default() += 1;
                        s.distance_sum += m.distance(c, n as u32) as f64;
                        s.local_distance_sum += m.distance(c, c) as f64;
                        if remote {
                            s.remote += 1;
                        }
                    }
                }
            }
            Kind::Thread => {
                allowed.insert(r.tid, r.size);
            }
            Kind::Frame => {}
        }
    }
    let share = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);
    let mut regions: Vec<RegionProfile> = sites
        .into_iter()
        .map(|s| {
            let located: u64 = s.accesses.values().flat_map(|v| v.values()).sum();
            let stack: Vec<String> = s
                .stack
                .iter()
                .map(|&pc| name(pc).unwrap_or_else(|| format!("{pc:#x}")))
                .collect();
            let site = stack
                .iter()
                .find(|f| !symbols::is_allocator_frame(f))
                .cloned()
                .unwrap_or_else(|| "(no stack)".into());
            RegionProfile {
                kind: s.kind,
                site,
                stack,
                allocations: s.allocations,
                bytes: s.bytes,
                first_address: s.first_address,
                samples: s.samples,
                reads: s.reads,
                writes: s.writes,
                unknown_access: s.unknown,
                remote_share: share(s.remote, located),
                distance_ratio: (s.local_distance_sum > 0.0)
                    .then(|| s.distance_sum / s.local_distance_sum),
                accesses: s.accesses,
                pages_by_node: s.pages,
                threads: s.threads,
            }
        })
        .collect();
    regions.sort_by(|a, b| b.samples.cmp(&a.samples).then(b.bytes.cmp(&a.bytes)));
    let threads = threads
        .into_iter()
        .map(|(tid, (n, cpus, remote))| ThreadProfile {
            tid,
            samples: n,
            allowed_cpus: allowed.get(&tid).copied(),
            nodes: cpus
                .iter()
                .filter_map(|&c| m.node_of_cpu(c))
                .collect::<BTreeSet<u32>>()
                .into_iter()
                .collect(),
            cpus: cpus.into_iter().collect(),
            remote_share: share(remote, n),
        })
        .collect();
    let mut warnings = Vec::new();
    if samples == 0 {
        warnings.push(format!(
            "no access was sampled: the program allocated nothing of {} or more that it touched while sampled, or ran too briefly (raise --rate or lower --min-bytes)",
            crate::text::format::bytes(min_bytes)
        ));
    }
    let mut p = Profile {
        schema_version: SCHEMA_VERSION.into(),
        command,
        rate,
        min_bytes,
        page_size,
        pages_armed: armed,
        samples,
        unattributed,
        remote_share: share(remote_total, located_total),
        regions,
        threads,
        diagnoses: Vec::new(),
        warnings,
    };
    p.diagnoses = diagnose::diagnose(m, &p);
    p
}
