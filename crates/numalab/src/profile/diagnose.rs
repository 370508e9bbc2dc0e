//! Diagnoses of a profile, each computed from its region's numbers with
//! the evidence stated (DESIGN.md section 6: a share is judged by its 95%
//! Wilson interval, never by its point value), and the placement that
//! fixes it as a `numalab run` option.

use super::{Profile, RegionProfile};
use crate::experiments::pdm::wilson;
use crate::machine::Machine;
use crate::IdSet;
use serde::{Deserialize, Serialize};

/// Samples a region needs before anything is said of it.
pub const MIN_SAMPLES: u64 = 20;
/// Share of a region's present pages on one node for "its pages are on
/// node N".
const ONE_NODE: f64 = 0.9;
/// Share of a region's samples a CPU node needs to count as accessing it.
const ACCESSING: f64 = 0.05;

/// One finding about a region, with its numbers and its fix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Diagnosis {
    /// `one-node-shared` (pages on one node, accessed from several: the
    /// signature of initialisation by one thread), `remote-bound` (pages
    /// on one node, accessed from one other), `cpuless-hot` (a hot region
    /// on a node without CPUs).
    pub kind: String,
    /// Index into `regions`, and its site.
    pub region: usize,
    pub site: String,
    /// The node holding the pages, and the share of them there.
    pub pages_node: u32,
    pub pages_share: f64,
    /// CPU nodes with at least 5% of the region's samples.
    pub accessing_nodes: Vec<u32>,
    pub samples: u64,
    pub remote_share: f64,
    /// 95% Wilson interval of the remote share.
    pub remote_ci: [f64; 2],
    pub text: String,
    /// The placement that fixes it, as a command.
    pub fix: String,
}

/// The node holding at least 90% of the region's present pages.
fn pages_node(r: &RegionProfile) -> Option<(u32, f64)> {
    let present: u64 = r
        .pages_by_node
        .iter()
        .filter(|(n, _)| **n >= 0)
        .map(|(_, p)| p)
        .sum();
    let (n, p) = r
        .pages_by_node
        .iter()
        .filter(|(n, _)| **n >= 0)
        .max_by_key(|(_, p)| **p)?;
    let share = *p as f64 / present.max(1) as f64;
    (share >= ONE_NODE).then_some((*n as u32, share))
}

/// Diagnoses of every region of `p` with enough samples; `command` is the
/// profiled command, for the fix.
pub fn diagnose(m: &Machine, p: &Profile) -> Vec<Diagnosis> {
    let total: u64 = p.regions.iter().map(|r| r.samples).sum();
    let command = p.command.join(" ");
    let mut out = Vec::new();
    for (i, r) in p.regions.iter().enumerate() {
        let located: u64 = r.accesses.values().flat_map(|v| v.values()).sum();
        let (Some(share), Some((node, pshare))) = (r.remote_share, pages_node(r)) else {
            continue;
        };
        if located < MIN_SAMPLES {
            continue;
        }
        let ci = wilson(share, located as f64);
        let accessing: Vec<u32> = r
            .accesses
            .iter()
            .filter(|(_, row)| row.values().sum::<u64>() as f64 >= ACCESSING * located as f64)
            .map(|(c, _)| *c)
            .collect();
        let nodes = accessing.iter().copied().collect::<IdSet>();
        let mut d = Diagnosis {
            kind: String::new(),
            region: i,
            site: r.site.clone(),
            pages_node: node,
            pages_share: pshare,
            accessing_nodes: accessing.clone(),
            samples: located,
            remote_share: share,
            remote_ci: ci,
            text: String::new(),
            fix: String::new(),
        };
        let pct = |x: f64| format!("{:.0}%", x * 100.0);
        let evidence = format!(
            "{} of its accesses remote (95% CI {}–{}, {} samples)",
            pct(share),
            pct(ci[0]),
            pct(ci[1]),
            located
        );
        let cpuless = !m.cpu_nodes().contains(node);
        if cpuless && r.samples as f64 >= 0.1 * total as f64 {
            d.kind = "cpuless-hot".into();
            d.text = format!(
                "{}: {} of its pages are on node {node}, which has no CPUs, and it draws {} of all samples; {evidence}: a hot region in the slow tier",
                r.site,
                pct(pshare),
                pct(r.samples as f64 / total.max(1) as f64)
            );
            d.fix = format!("numalab run --preferred {nodes} -- {command}");
            out.push(d);
        } else if ci[0] > 0.5 && accessing.len() >= 2 {
            d.kind = "one-node-shared".into();
            d.text = format!(
                "{}: {} of its pages are on node {node} and nodes {nodes} access it; {evidence}: the signature of initialisation by one thread (first touch put every page on its node); interleave it over the accessing nodes, or initialise it in parallel, each thread its part",
                r.site,
                pct(pshare)
            );
            d.fix = format!("numalab run --interleave {nodes} -- {command}");
            out.push(d);
        } else if ci[0] > 0.5 && accessing.len() == 1 && accessing[0] != node {
            d.kind = "remote-bound".into();
            d.text = format!(
                "{}: {} of its pages are on node {node} but only node {nodes} accesses it; {evidence}: place it on the node of its users",
                r.site,
                pct(pshare)
            );
            d.fix = format!("numalab run --membind {nodes} -- {command}");
            out.push(d);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;
    use std::collections::BTreeMap;

    fn region(site: &str, pages: &[(i32, u64)], acc: &[(u32, u32, u64)]) -> RegionProfile {
        let mut accesses: BTreeMap<u32, BTreeMap<u32, u64>> = BTreeMap::new();
        let (mut n, mut remote) = (0, 0);
        for &(c, mnode, k) in acc {
            *accesses.entry(c).or_default().entry(mnode).or_default() += k;
            n += k;
            if c != mnode {
                remote += k;
            }
        }
        RegionProfile {
            kind: "heap".into(),
            site: site.into(),
            stack: Vec::new(),
            allocations: 1,
            bytes: 1 << 24,
            first_address: 0x1000,
            samples: n,
            reads: n,
            writes: 0,
            unknown_access: 0,
            remote_share: Some(remote as f64 / n as f64),
            distance_ratio: None,
            accesses,
            pages_by_node: pages.iter().copied().collect(),
            threads: BTreeMap::new(),
        }
    }

    fn profile(regions: Vec<RegionProfile>) -> Profile {
        Profile {
            schema_version: "1.0".into(),
            command: vec!["./app".into()],
            rate: 2000,
            min_bytes: 65536,
            page_size: 4096,
            pages_armed: 0,
            samples: regions.iter().map(|r| r.samples).sum(),
            unattributed: 0,
            remote_share: None,
            regions,
            threads: Vec::new(),
            diagnoses: Vec::new(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn the_classic_three_are_told_apart_by_their_numbers() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let p = profile(vec![
            // A: on node 0, read from all four nodes equally: 75% remote.
            region(
                "init_a",
                &[(0, 6143)],
                &[(0, 0, 30), (1, 0, 30), (2, 0, 30), (3, 0, 30)],
            ),
            // B: per-node slices, all local.
            region(
                "b",
                &[(0, 1000), (1, 1000), (2, 1000), (3, 1000)],
                &[(0, 0, 40), (1, 1, 40)],
            ),
            // C: on node 3, read from node 0 only.
            region("c", &[(3, 2048)], &[(0, 3, 50)]),
            // Too few samples to say anything.
            region("d", &[(2, 10)], &[(0, 2, 5)]),
        ]);
        let d = diagnose(&m, &p);
        let kinds: Vec<(&str, &str)> = d
            .iter()
            .map(|x| (x.site.as_str(), x.kind.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [("init_a", "one-node-shared"), ("c", "remote-bound")]
        );
        assert_eq!(d[0].fix, "numalab run --interleave 0-3 -- ./app");
        assert_eq!(d[0].accessing_nodes, [0, 1, 2, 3]);
        assert!((d[0].remote_share - 0.75).abs() < 1e-12);
        assert!(
            d[0].remote_ci[0] > 0.5 && d[0].remote_ci[1] < 0.9,
            "{:?}",
            d[0].remote_ci
        );
        assert!(
            d[0].text
                .contains("75% of its accesses remote (95% CI 67%–82%, 120 samples)"),
            "{}",
            d[0].text
        );
        assert_eq!(d[1].fix, "numalab run --membind 0 -- ./app");
    }

    #[test]
    fn a_hot_region_on_the_cpuless_node_and_noise_that_says_nothing() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let p = profile(vec![
            region("tier", &[(4, 2048)], &[(0, 4, 40), (1, 4, 40)]),
            // 55% remote from 40 samples: the interval reaches below 50%.
            region("mixed", &[(1, 900), (2, 50)], &[(1, 1, 18), (2, 1, 22)]),
        ]);
        let d = diagnose(&m, &p);
        assert_eq!(d.len(), 1, "{d:#?}");
        assert_eq!(d[0].kind, "cpuless-hot");
        assert_eq!(d[0].fix, "numalab run --preferred 0-1 -- ./app");
        assert!(
            d[0].text.contains("on node 4, which has no CPUs"),
            "{}",
            d[0].text
        );
    }
}
