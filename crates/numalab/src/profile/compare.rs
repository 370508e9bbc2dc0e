//! `numalab compare A/profile.json B/profile.json`: two profiles of a
//! program side by side (before and after a placement change, two
//! machines, two versions), region by region.
//!
//! Regions are matched by kind and allocation site (static data by
//! symbol); stacks, named by thread ids that differ between runs, are not
//! matched. A remote share that changed is judged by a two-proportion
//! test on the located samples, Holm-corrected over the whole program's
//! share and every matched region's: "changed" means the corrected p is
//! below 0.05, not that the two numbers differ.

use super::{Profile, RegionProfile};
use crate::measure::compare::{holm, two_proportion_p};
use serde::Serialize;
use std::collections::BTreeMap;

/// The corrected p-value under which a change counts.
pub const ALPHA: f64 = 0.05;
/// Regions compared at most (the most sampled first).
pub const MAX_REGIONS: usize = 200;

/// A remote share in both profiles and whether it changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareChange {
    /// Remote samples and located samples (whose page node is known).
    pub remote_a: u64,
    pub located_a: u64,
    pub remote_b: u64,
    pub located_b: u64,
    pub share_a: Option<f64>,
    pub share_b: Option<f64>,
    /// The two-proportion test's p-value, and Holm-corrected over the
    /// comparison's family.
    pub p_value: Option<f64>,
    pub p_corrected: Option<f64>,
    /// The corrected p is below [`ALPHA`]; `None`: nothing to test.
    pub changed: Option<bool>,
}

/// One region in both profiles (or in one: the other side `None`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegionChange {
    pub kind: String,
    pub site: String,
    pub samples_a: Option<u64>,
    pub samples_b: Option<u64>,
    pub bytes_a: Option<u64>,
    pub bytes_b: Option<u64>,
    pub remote: ShareChange,
    /// Share of its present pages per node (`{node: share}`).
    pub pages_a: BTreeMap<i32, f64>,
    pub pages_b: BTreeMap<i32, f64>,
    pub distance_ratio_a: Option<f64>,
    pub distance_ratio_b: Option<f64>,
    /// Estimated ns per access with `--machine` on both sides.
    pub ns_per_access_a: Option<f64>,
    pub ns_per_access_b: Option<f64>,
}

/// A diagnosis of one side, and whether the other has it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagnosisChange {
    pub kind: String,
    /// Its region's site, or "thread #N" / "thread TID".
    pub subject: String,
    pub in_a: bool,
    pub in_b: bool,
}

/// Two profiles compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileComparison {
    pub command_a: String,
    pub command_b: String,
    pub samples_a: u64,
    pub samples_b: u64,
    pub remote: ShareChange,
    pub regions: Vec<RegionChange>,
    pub diagnoses: Vec<DiagnosisChange>,
    pub warnings: Vec<String>,
}

/// Remote and located samples of a region's access matrix.
fn remote_located(r: &RegionProfile) -> (u64, u64) {
    let mut remote = 0;
    let mut located = 0;
    for (cpu, row) in &r.accesses {
        for (mem, n) in row {
            located += n;
            if cpu != mem {
                remote += n;
            }
        }
    }
    (remote, located)
}

fn program_remote(p: &Profile) -> (u64, u64) {
    p.regions
        .iter()
        .map(remote_located)
        .fold((0, 0), |(r, l), (a, b)| (r + a, l + b))
}

fn share_change(a: (u64, u64), b: (u64, u64)) -> ShareChange {
    let share = |(k, n): (u64, u64)| (n > 0).then(|| k as f64 / n as f64);
    ShareChange {
        remote_a: a.0,
        located_a: a.1,
        remote_b: b.0,
        located_b: b.1,
        share_a: share(a),
        share_b: share(b),
        p_value: two_proportion_p(a.0, a.1, b.0, b.1),
        p_corrected: None,
        changed: None,
    }
}

fn page_shares(r: &RegionProfile) -> BTreeMap<i32, f64> {
    let present = super::present(r);
    r.pages_by_node
        .iter()
        .filter(|(n, _)| **n >= 0 && present > 0)
        .map(|(n, p)| (*n, *p as f64 / present as f64))
        .collect()
}

/// The key regions are matched by; `None` for those that cannot be
/// matched across runs (stacks, named by thread id).
fn key(r: &RegionProfile) -> Option<(String, String)> {
    (r.kind != "stack").then(|| (r.kind.clone(), r.site.clone()))
}

/// Compares profile `a` with profile `b`.
pub fn compare(a: &Profile, b: &Profile) -> ProfileComparison {
    let mut warnings = Vec::new();
    if a.program != b.program {
        warnings.push(format!(
            "the profiles are of different commands ('{}' and '{}'): regions match by site only",
            a.program.join(" "),
            b.program.join(" ")
        ));
    }
    for (name, p) in [("A", a), ("B", b)] {
        if let Some(sel) = &p.selection {
            if sel.regions.is_some() || sel.threads.is_some() {
                warnings.push(format!(
                    "profile {name} was limited (--regions/--only-threads): its whole-program share is of the selection only"
                ));
            }
        }
    }
    let index = |p: &Profile| -> BTreeMap<(String, String), usize> {
        let mut m = BTreeMap::new();
        for (i, r) in p.regions.iter().enumerate() {
            if let Some(k) = key(r) {
                m.entry(k).or_insert(i);
            }
        }
        m
    };
    let (ia, ib) = (index(a), index(b));
    let mut keys: Vec<(String, String)> = ia.keys().chain(ib.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    // Most sampled (on either side) first; regions sampled on neither side
    // are left out when there are too many.
    let samples = |k: &(String, String)| {
        ia.get(k).map_or(0, |&i| a.regions[i].samples)
            + ib.get(k).map_or(0, |&i| b.regions[i].samples)
    };
    keys.sort_by_key(|k| std::cmp::Reverse(samples(k)));
    if keys.len() > MAX_REGIONS {
        warnings.push(format!(
            "{} regions: the {MAX_REGIONS} most sampled are compared",
            keys.len()
        ));
        keys.truncate(MAX_REGIONS);
    }
    let mut regions: Vec<RegionChange> = keys
        .iter()
        .map(|k| {
            let ra = ia.get(k).map(|&i| &a.regions[i]);
            let rb = ib.get(k).map(|&i| &b.regions[i]);
            let rl = |r: Option<&RegionProfile>| r.map_or((0, 0), remote_located);
            RegionChange {
                kind: k.0.clone(),
                site: k.1.clone(),
                samples_a: ra.map(|r| r.samples),
                samples_b: rb.map(|r| r.samples),
                bytes_a: ra.map(|r| r.bytes),
                bytes_b: rb.map(|r| r.bytes),
                remote: share_change(rl(ra), rl(rb)),
                pages_a: ra.map(page_shares).unwrap_or_default(),
                pages_b: rb.map(page_shares).unwrap_or_default(),
                distance_ratio_a: ra.and_then(|r| r.distance_ratio),
                distance_ratio_b: rb.and_then(|r| r.distance_ratio),
                ns_per_access_a: ra
                    .and_then(|r| r.latency_cost.as_ref())
                    .map(|c| c.ns_per_access),
                ns_per_access_b: rb
                    .and_then(|r| r.latency_cost.as_ref())
                    .map(|c| c.ns_per_access),
            }
        })
        .collect();
    let mut remote = share_change(program_remote(a), program_remote(b));
    // One family: the program's share and every region's that can be
    // tested.
    let mut family: Vec<&mut ShareChange> = std::iter::once(&mut remote)
        .chain(regions.iter_mut().map(|r| &mut r.remote))
        .filter(|s| s.p_value.is_some())
        .collect();
    let ps: Vec<f64> = family.iter().map(|s| s.p_value.unwrap_or(1.0)).collect();
    for (s, adj) in family.iter_mut().zip(holm(&ps)) {
        s.p_corrected = Some(adj);
        s.changed = Some(adj < ALPHA);
    }
    ProfileComparison {
        command_a: a.program.join(" "),
        command_b: b.program.join(" "),
        samples_a: a.samples,
        samples_b: b.samples,
        remote,
        regions,
        diagnoses: diagnoses(a, b),
        warnings,
    }
}

/// The diagnoses of both sides, by kind and subject.
fn diagnoses(a: &Profile, b: &Profile) -> Vec<DiagnosisChange> {
    let subjects = |p: &Profile| -> Vec<(String, String)> {
        p.diagnoses
            .iter()
            .map(|d| {
                let subject = match (d.region, d.thread) {
                    (Some(i), _) => p.regions.get(i).map_or(d.site.clone(), |r| r.site.clone()),
                    (None, Some(tid)) => p
                        .threads
                        .iter()
                        .find(|t| t.tid == tid)
                        .and_then(|t| t.ordinal)
                        .map_or(format!("thread {tid}"), |o| format!("thread #{o}")),
                    (None, None) => d.site.clone(),
                };
                (d.kind.clone(), subject)
            })
            .collect()
    };
    let (sa, sb) = (subjects(a), subjects(b));
    let mut all: Vec<(String, String)> = sa.iter().chain(sb.iter()).cloned().collect();
    all.sort();
    all.dedup();
    all.into_iter()
        .map(|(kind, subject)| DiagnosisChange {
            in_a: sa.contains(&(kind.clone(), subject.clone())),
            in_b: sb.contains(&(kind.clone(), subject.clone())),
            kind,
            subject,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{located_region, Profile};

    fn region(site: &str, matrix: &[(u32, u32, u64)], pages: &[(i32, u64)]) -> RegionProfile {
        let mut r = located_region("heap", site.into(), 1 << 20, 0x1000);
        for &(c, m, n) in matrix {
            *r.accesses.entry(c).or_default().entry(m).or_default() += n;
            r.samples += n;
        }
        r.pages_by_node = pages.iter().copied().collect();
        r
    }

    fn profile(regions: Vec<RegionProfile>) -> Profile {
        let mut p: Profile = serde_json::from_value(serde_json::json!({
            "schema_version": "1.3", "command": ["./app"], "pid": 1, "rate": 0,
            "min_bytes": 65536, "page_size": 4096, "pages_armed": 0, "samples": 0,
            "cost": null, "sampled_for_s": null, "unattributed": 0, "remote_share": null,
            "regions": [], "threads": [], "diagnoses": [], "warnings": []
        }))
        .unwrap();
        p.samples = regions.iter().map(|r| r.samples).sum();
        p.regions = regions;
        p
    }

    #[test]
    fn a_fixed_region_changes_and_an_untouched_one_does_not() {
        // A: 300 of 400 remote before (main-thread init on node 0), 100
        // of 400 after interleaving; C unchanged at 100% (50 of 50).
        let before = profile(vec![
            region("main app.c:10", &[(0, 0, 100), (1, 0, 300)], &[(0, 100)]),
            region("main app.c:20", &[(0, 1, 50)], &[(1, 10)]),
            region("main app.c:30", &[(0, 0, 5)], &[(0, 1)]),
        ]);
        let after = profile(vec![
            region(
                "main app.c:10",
                &[(0, 0, 300), (1, 0, 50), (0, 1, 50)],
                &[(0, 50), (1, 50)],
            ),
            region("main app.c:20", &[(0, 1, 48)], &[(1, 10)]),
            region("main app.c:40", &[(1, 1, 7)], &[(1, 2)]),
        ]);
        let c = compare(&before, &after);
        assert_eq!(c.remote.share_a, Some(350.0 / 455.0));
        assert_eq!((c.remote.remote_b, c.remote.located_b), (148, 455));
        assert_eq!(c.remote.changed, Some(true));
        let by_site = |s: &str| c.regions.iter().find(|r| r.site == s).unwrap();
        let a = by_site("main app.c:10");
        assert_eq!(
            (a.remote.share_a, a.remote.share_b),
            (Some(0.75), Some(0.25))
        );
        assert_eq!(a.remote.changed, Some(true));
        assert!(a.remote.p_corrected.unwrap() < 1e-6);
        assert_eq!(a.pages_b, BTreeMap::from([(0, 0.5), (1, 0.5)]));
        // All remote on both sides: nothing to test.
        let cc = by_site("main app.c:20");
        assert_eq!((cc.remote.p_value, cc.remote.changed), (None, None));
        // Only on one side each.
        assert_eq!(by_site("main app.c:30").samples_b, None);
        assert_eq!(by_site("main app.c:40").samples_a, None);
        // Most sampled first.
        assert_eq!(c.regions[0].site, "main app.c:10");
    }

    #[test]
    fn a_small_difference_in_few_samples_is_no_change() {
        let a = profile(vec![region("f", &[(0, 0, 12), (1, 0, 8)], &[])]);
        let b = profile(vec![region("f", &[(0, 0, 9), (1, 0, 11)], &[])]);
        let c = compare(&a, &b);
        let r = &c.regions[0].remote;
        assert_eq!((r.share_a, r.share_b), (Some(0.4), Some(0.55)));
        assert_eq!(r.changed, Some(false));
        assert!(r.p_value.unwrap() > 0.3);
    }
}
