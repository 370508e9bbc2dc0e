//! One view of an MPI job's profiles (`numalab profile --merge DIR`, over
//! the DIR/rank-N/profile.json that `profile -o DIR/rank-{rank}` wrote):
//! each rank's figures side by side, and each allocation site's samples
//! over every rank, with the ranks whose remote share stands out from the
//! others'. Ranks of one job run the same code on their own data, so a
//! site remote in one rank and local in the rest points at that rank's
//! placement, not at the code.

use super::{AccessMatrix, Profile};
use crate::measure::stats::median;
use serde::Serialize;
use std::collections::BTreeMap;

/// The most profiles one merge reads.
pub const MAX_RANKS: usize = 4096;

/// A site's rank is named when its remote share is this much above the
/// median of the other ranks' (share points, 0 to 1)...
pub const OUTLIER_POINTS: f64 = 0.25;
/// ...and both it and at least two other ranks have this many samples of
/// the site: a share from fewer samples moves by more than the threshold.
pub const OUTLIER_MIN_SAMPLES: u64 = 20;

/// One rank's profile in a line.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RankLine {
    /// The rank (the folder's `rank-N`), or the folder's name.
    pub rank: String,
    /// The host it ran on (None: a profile older than 2.1, or rebuilt).
    pub host: Option<String>,
    pub program: Vec<String>,
    pub samples: u64,
    /// Its remote share and, where the word counts gave one, the interval
    /// its profile printed.
    pub remote_share: Option<f64>,
    pub remote_interval: Option<(f64, f64)>,
    /// The nodes its threads ran on.
    pub cpu_nodes: Vec<u32>,
    pub threads: usize,
    pub regions: usize,
    /// Its sampling's cost, % of the program's CPU time.
    pub cost_percent: Option<f64>,
    pub warnings: usize,
}

/// One allocation site over every rank.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MergedSite {
    pub kind: String,
    pub site: String,
    /// Ranks in which the site was seen.
    pub ranks: usize,
    pub bytes: u64,
    pub samples: u64,
    /// Samples by CPU node, then memory node, over every rank.
    pub accesses: AccessMatrix,
    /// Remote samples of all ranks over their samples (no interval: the
    /// ranks' samples are not independent draws of one program's).
    pub sample_remote_share: Option<f64>,
    /// Each rank's samples and remote share of the site.
    pub by_rank: Vec<(String, u64, Option<f64>)>,
}

/// Every rank's profile, merged.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MergedProfiles {
    pub ranks: Vec<RankLine>,
    /// Sites with samples first, most sampled first.
    pub sites: Vec<MergedSite>,
    /// Ranks that stand out, one sentence each.
    pub findings: Vec<String>,
    /// The rule the findings follow.
    pub rule: String,
}

fn rank_line(rank: &str, p: &Profile) -> RankLine {
    let mut cpu_nodes: Vec<u32> = p.threads.iter().flat_map(|t| t.nodes.clone()).collect();
    cpu_nodes.sort_unstable();
    cpu_nodes.dedup();
    RankLine {
        rank: rank.to_string(),
        host: p.host.clone(),
        program: p.program.clone(),
        samples: p.samples,
        remote_share: p.remote_share,
        remote_interval: p
            .estimate
            .as_ref()
            .and_then(|e| e.remote.as_ref())
            .map(|r| (r.low, r.high)),
        cpu_nodes,
        threads: p.threads.len(),
        regions: p.regions.len(),
        cost_percent: p.cost.as_ref().and_then(|c| c.estimated_percent),
        warnings: p.warnings.len(),
    }
}

/// Remote samples of a matrix (CPU node other than the memory node).
fn remote_of(m: &AccessMatrix) -> u64 {
    m.iter()
        .flat_map(|(c, row)| row.iter().filter(move |(n, _)| *n != c).map(|(_, v)| v))
        .sum()
}

/// The site as it is named across ranks: a stack's thread id differs from
/// rank to rank, so stacks are the main thread's or the others'.
fn site_key(r: &super::RegionProfile) -> String {
    if r.kind != "stack" {
        r.site.clone()
    } else if r.site.ends_with("(main)") {
        "stack of the main thread".into()
    } else {
        "stacks of the other threads".into()
    }
}

/// Merges `(rank, profile)` pairs, in the order given.
pub fn merge(profiles: &[(String, Profile)]) -> MergedProfiles {
    let ranks: Vec<RankLine> = profiles.iter().map(|(r, p)| rank_line(r, p)).collect();
    let mut sites: BTreeMap<(String, String), MergedSite> = BTreeMap::new();
    for (rank, p) in profiles {
        // A site may appear as several regions of one rank (a stack per
        // thread, several mappings): summed per rank first.
        let mut here: BTreeMap<(String, String), (u64, u64, AccessMatrix)> = BTreeMap::new();
        for r in &p.regions {
            let e = here.entry((r.kind.clone(), site_key(r))).or_default();
            e.0 += r.bytes;
            e.1 += r.samples;
            for (c, row) in &r.accesses {
                for (n, v) in row {
                    *e.2.entry(*c).or_default().entry(*n).or_default() += v;
                }
            }
        }
        for ((kind, site), (bytes, samples, acc)) in here {
            let m = sites
                .entry((kind.clone(), site.clone()))
                .or_insert_with(|| MergedSite {
                    kind,
                    site,
                    ranks: 0,
                    bytes: 0,
                    samples: 0,
                    accesses: AccessMatrix::new(),
                    sample_remote_share: None,
                    by_rank: Vec::new(),
                });
            m.ranks += 1;
            m.bytes += bytes;
            m.samples += samples;
            for (c, row) in &acc {
                for (n, v) in row {
                    *m.accesses.entry(*c).or_default().entry(*n).or_default() += v;
                }
            }
            let placed: u64 = acc.values().flat_map(|r| r.values()).sum();
            let share = (placed > 0).then(|| remote_of(&acc) as f64 / placed as f64);
            m.by_rank.push((rank.clone(), placed, share));
        }
    }
    let mut sites: Vec<MergedSite> = sites
        .into_values()
        .map(|mut s| {
            let placed: u64 = s.accesses.values().flat_map(|r| r.values()).sum();
            s.sample_remote_share =
                (placed > 0).then(|| remote_of(&s.accesses) as f64 / placed as f64);
            s
        })
        .collect();
    sites.sort_by(|a, b| b.samples.cmp(&a.samples).then(b.bytes.cmp(&a.bytes)));
    let findings = sites.iter().flat_map(outliers).collect();
    MergedProfiles {
        ranks,
        sites,
        findings,
        rule: format!(
            "a rank is named where its remote share of a site is more than {:.0} points above the median of the other ranks', each of them and at least two others with {OUTLIER_MIN_SAMPLES} or more samples of it",
            OUTLIER_POINTS * 100.0
        ),
    }
}

/// The ranks whose remote share of `s` stands out.
fn outliers(s: &MergedSite) -> Vec<String> {
    let enough: Vec<(&String, f64)> = s
        .by_rank
        .iter()
        .filter(|(_, n, _)| *n >= OUTLIER_MIN_SAMPLES)
        .filter_map(|(r, _, sh)| sh.map(|x| (r, x)))
        .collect();
    if enough.len() < 3 {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, (rank, share)) in enough.iter().enumerate() {
        let others: Vec<f64> = enough
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, (_, x))| *x)
            .collect();
        let Some(mid) = median(others) else {
            continue;
        };
        if share - mid > OUTLIER_POINTS {
            out.push(format!(
                "rank {rank}: {:.0}% of its samples of {} ({}) are remote, the other {} ranks' median {:.0}%: look at where rank {rank} placed this data",
                share * 100.0,
                s.site,
                s.kind,
                enough.len() - 1,
                mid * 100.0
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(regions: serde_json::Value) -> Profile {
        serde_json::from_value(serde_json::json!({
            "schema_version": "2.0", "program": ["app"], "pid": 1, "rate": 0,
            "min_bytes": 65536, "page_size": 4096, "pages_armed": 1, "samples": 100,
            "cost": null, "sampled_for_s": null, "unattributed": 0, "remote_share": 0.1,
            "estimate": null, "regions": regions, "threads": [], "latency_source": null,
            "refinement": null, "diagnoses": [], "warnings": []
        }))
        .unwrap()
    }

    fn region(site: &str, local: u64, remote: u64) -> serde_json::Value {
        serde_json::json!({
            "kind": "heap", "site": site, "sampled": true, "object": null, "thread": null,
            "stack": [], "allocations": 1, "bytes": 1 << 20, "sampled_allocations": 0,
            "first_address": 0, "samples": local + remote, "reads": local + remote,
            "writes": 0, "unknown_access": 0,
            "accesses": {"0": {"0": local, "1": remote}},
            "remote_share": null, "estimate": null, "distance_ratio": null,
            "latency_cost": null, "pages_by_node": {}, "threads": {},
            "placed_by_thread": {}, "first_touch": null, "pages_over_time": [], "page_map": null
        })
    }

    #[test]
    fn sites_sum_over_ranks_and_the_rank_whose_data_is_remote_is_named() {
        let ps: Vec<(String, Profile)> = (0..4)
            .map(|r| {
                let grid = if r == 2 {
                    region("grid", 10, 90)
                } else {
                    region("grid", 95, 5)
                };
                (
                    r.to_string(),
                    profile(serde_json::json!([grid, region("halo", 3, 1)])),
                )
            })
            .collect();
        let m = merge(&ps);
        assert_eq!(m.ranks.len(), 4);
        assert_eq!(m.sites[0].site, "grid");
        assert_eq!(m.sites[0].ranks, 4);
        assert_eq!(m.sites[0].samples, 400);
        assert_eq!(m.sites[0].bytes, 4 << 20);
        assert_eq!(m.sites[0].accesses[&0][&1], 105);
        assert!((m.sites[0].sample_remote_share.unwrap() - 105.0 / 400.0).abs() < 1e-12);
        assert_eq!(
            m.findings,
            ["rank 2: 90% of its samples of grid (heap) are remote, the other 3 ranks' median 5%: look at where rank 2 placed this data"]
        );
        // The halo site has too few samples a rank to name anyone.
        assert_eq!(m.sites[1].site, "halo");
        assert_eq!(m.sites[1].by_rank.len(), 4);
        // Two ranks are too few to say which one differs.
        let m = merge(&ps[1..3]);
        assert!(m.findings.is_empty(), "{:?}", m.findings);
    }
}
