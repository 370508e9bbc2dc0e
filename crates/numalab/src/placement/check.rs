//! Checking a placed buffer against its request: the page histogram and the
//! CPUs its toucher and workers ran on, compared with what was asked; and
//! [`place_and_check`], all of `numalab place` but the printing.

use super::buffer::{BufferSpec, PlacedBuffer, Thp};
use super::memory_policy::{MemoryPolicy, Realization};
use super::touch::{write_from_workers, WorkerCheck};
use super::verify::{PageHistogram, RunLengths};
use super::PlacementError;
use crate::machine::Machine;
use crate::IdSet;
use serde::Serialize;
use std::collections::BTreeMap;

/// Version of the JSON `numalab place --json` prints.
pub const PLACE_SCHEMA_VERSION: &str = "1.0";

/// A buffer placed, touched and checked: how it was placed, where every
/// page is, and whether that is what the request asked for.
#[derive(Debug, Clone, Serialize)]
pub struct PlaceResult {
    pub schema_version: &'static str,
    pub size_bytes: u64,
    pub policy: String,
    pub realization: Realization,
    pub thp: Thp,
    pub hugetlb: bool,
    pub toucher_cpu: Option<u32>,
    pub toucher_node: Option<u32>,
    pub page_size: usize,
    pub pages_total: u64,
    pub pages_by_node: BTreeMap<u32, u64>,
    pub untouched_pages: u64,
    pub run_lengths: RunLengths,
    pub expected_nodes: Option<IdSet>,
    pub workers: Vec<WorkerCheck>,
    pub verified: bool,
    pub problems: Vec<String>,
    pub notes: Vec<String>,
}

/// Places a buffer as `spec` asks, lets threads pinned to `workers` each
/// write their slice (as a parallel program's workers would), and checks
/// every page and thread against the request.
pub fn place_and_check(
    m: &Machine,
    spec: &BufferSpec,
    workers: &[u32],
) -> Result<PlaceResult, PlacementError> {
    let mut buf = PlacedBuffer::new(m, spec)?;
    // A worker that cannot be pinned is a failure to carry out the request,
    // not a bad request: the CPUs were checked before.
    let worker_checks =
        write_from_workers(&mut buf, workers).map_err(|e| PlacementError::Os(e.to_string()))?;
    let hist = buf.histogram()?;
    let toucher_cpu = spec.toucher.or(buf.toucher_cpu());
    let toucher_node = toucher_cpu.and_then(|c| m.node_of_cpu(c));
    let expected = spec.policy.nodes_expected(m, toucher_node);
    let problems = BufferCheck {
        policy: &spec.policy,
        expected_nodes: expected.as_ref(),
        requested_cpu: spec.toucher,
        seen_cpu: buf.toucher_cpu(),
        workers: &worker_checks,
    }
    .problems(&hist);
    Ok(PlaceResult {
        schema_version: PLACE_SCHEMA_VERSION,
        size_bytes: buf.len() as u64,
        policy: spec.policy.to_string(),
        realization: buf.realization().clone(),
        thp: buf.thp(),
        hugetlb: spec.hugetlb,
        toucher_cpu,
        toucher_node,
        page_size: hist.page_size,
        pages_total: hist.pages_total,
        pages_by_node: hist.pages_by_node,
        untouched_pages: hist.untouched_pages,
        run_lengths: hist.run_lengths,
        expected_nodes: expected,
        verified: problems.is_empty(),
        problems,
        workers: worker_checks,
        notes: buf.notes().to_vec(),
    })
}

/// What was asked of a buffer and where its threads were seen.
#[derive(Debug, Clone, Copy)]
pub struct BufferCheck<'a> {
    pub policy: &'a MemoryPolicy,
    /// The nodes its pages belong on ([`MemoryPolicy::nodes_expected`]);
    /// `None` when that depends on more than the policy.
    pub expected_nodes: Option<&'a IdSet>,
    /// The CPU the toucher was asked to run on, if one was.
    pub requested_cpu: Option<u32>,
    /// The CPU the toucher was seen on.
    pub seen_cpu: Option<u32>,
    pub workers: &'a [WorkerCheck],
}

impl BufferCheck<'_> {
    /// Every way `hist` and the threads differ from the request, one
    /// sentence each; empty when the placement is verified. Preferred
    /// placement may fall back to other nodes (it is not strict), so pages
    /// elsewhere are not a problem for it. Interleave must spread evenly:
    /// within one chunk per node once every page is touched.
    pub fn problems(&self, hist: &PageHistogram) -> Vec<String> {
        let mut p = Vec::new();
        if hist.untouched_pages > 0 {
            p.push(format!("{} pages were never touched", hist.untouched_pages));
        }
        if let Some(r) = self.requested_cpu {
            if self.seen_cpu != Some(r) {
                p.push(format!(
                    "the toucher ran on CPU {} instead of CPU {r}",
                    self.seen_cpu.map(|c| c.to_string()).unwrap_or("?".into())
                ));
            }
        }
        for w in self.workers.iter().filter(|w| !w.ok) {
            p.push(format!(
                "worker for CPU {} ran on CPU {:?}",
                w.requested_cpu, w.seen_cpu
            ));
        }
        let Some(exp) = self
            .expected_nodes
            .filter(|_| !matches!(self.policy, MemoryPolicy::Preferred { .. }))
        else {
            return p;
        };
        let outside = hist.pages_outside(exp);
        if outside > 0 {
            p.push(format!(
                "{outside} of {} pages landed outside the requested nodes {{{exp}}}",
                hist.pages_total
            ));
        }
        if let MemoryPolicy::Interleave { nodes, chunk_pages } = self.policy {
            let counts: Vec<u64> = nodes
                .iter()
                .map(|n| *hist.pages_by_node.get(&n).unwrap_or(&0))
                .collect();
            let lo = counts.iter().min().copied().unwrap_or(0);
            let hi = counts.iter().max().copied().unwrap_or(0);
            if hi - lo > *chunk_pages && hist.untouched_pages == 0 {
                p.push(format!(
                    "interleave is uneven: {lo} to {hi} pages per node (allowed difference {chunk_pages})"
                ));
            }
        }
        if let MemoryPolicy::Weighted {
            weights,
            chunk_pages,
        } = self.policy
        {
            // Round robin over the weights leaves each node within one
            // round's share (its weight in chunks) of its exact share.
            let touched: u64 = hist.pages_by_node.values().sum();
            let total: u64 = weights.iter().map(|w| w.1 as u64).sum();
            if hist.untouched_pages == 0 && total > 0 {
                for &(node, w) in weights {
                    let have = *hist.pages_by_node.get(&node).unwrap_or(&0);
                    let exact = touched as f64 * w as f64 / total as f64;
                    let allowed = w as u64 * chunk_pages;
                    if (have as f64 - exact).abs() > allowed as f64 {
                        p.push(format!(
                            "weighted interleave is off its weights: node {node} has {have} of {touched} pages where weight {w} of {total} is {exact:.0} (allowed difference {allowed})"
                        ));
                    }
                }
            }
        }
        p
    }
}

/// Checks where pages are against what their policy asks, as the C API
/// and the Python package verify memory in one call: the nodes the
/// policy puts pages on (`None` when that depends on who touches them),
/// and every way the pages and threads differ (empty when verified).
/// `team` is the CPUs of a parallel first touch, in order (each share on
/// its CPU's node); `toucher` the CPU that touched the pages when one
/// thread did; `workers` where the threads of a parallel touch ran.
pub fn check_pages(
    m: &Machine,
    policy: &MemoryPolicy,
    team: Option<&[u32]>,
    hist: &PageHistogram,
    toucher: Option<u32>,
    workers: &[WorkerCheck],
) -> (Option<IdSet>, Vec<String>) {
    let expected = match team {
        Some(cpus) => Some(cpus.iter().filter_map(|&c| m.node_of_cpu(c)).collect()),
        None => policy.nodes_expected(m, toucher.and_then(|c| m.node_of_cpu(c))),
    };
    let mut problems = BufferCheck {
        policy,
        expected_nodes: expected.as_ref(),
        requested_cpu: None,
        seen_cpu: toucher,
        workers,
    }
    .problems(hist);
    if let Some(cpus) = team {
        problems.extend(parallel_touch_problems(m, hist, cpus));
    }
    (expected, problems)
}

/// Where the pages of a parallel first touch
/// ([`super::buffer::Prefault::Parallel`]) should be: the pages split into
/// contiguous shares as the touching threads split them (share `i` of
/// `ceil(pages / n)` pages to CPU `cpus[i]`), each share on its CPU's
/// node. Returns one sentence per share with pages elsewhere.
pub fn parallel_touch_problems(m: &Machine, hist: &PageHistogram, cpus: &[u32]) -> Vec<String> {
    let pages = hist.page_nodes.len();
    if cpus.is_empty() || pages == 0 {
        return Vec::new();
    }
    let per = pages.div_ceil(cpus.len()).max(1);
    let mut p = Vec::new();
    for (i, share) in hist.page_nodes.chunks(per).enumerate() {
        let cpu = cpus[i];
        let Some(node) = m.node_of_cpu(cpu) else {
            p.push(format!("CPU {cpu} belongs to no node of this machine"));
            continue;
        };
        let elsewhere = share
            .iter()
            .filter(|&&n| n >= 0 && n as u32 != node)
            .count();
        if elsewhere > 0 {
            p.push(format!(
                "{elsewhere} of the {} pages CPU {cpu} first touched are not on its node {node}",
                share.len()
            ));
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNTOUCHED: i32 = -libc::ENOENT;

    fn hist(nodes: &[i32]) -> PageHistogram {
        PageHistogram::from_page_nodes(nodes.to_vec(), 4096)
    }

    fn ids(s: &str) -> IdSet {
        IdSet::parse_list(s).unwrap()
    }

    fn check<'a>(policy: &'a MemoryPolicy, expected: Option<&'a IdSet>) -> BufferCheck<'a> {
        BufferCheck {
            policy,
            expected_nodes: expected,
            requested_cpu: None,
            seen_cpu: None,
            workers: &[],
        }
    }

    #[test]
    fn a_placement_as_asked_has_no_problem() {
        let one = ids("1");
        let bind = MemoryPolicy::Bind { nodes: one.clone() };
        let c = BufferCheck {
            requested_cpu: Some(3),
            seen_cpu: Some(3),
            ..check(&bind, Some(&one))
        };
        assert!(c.problems(&hist(&[1, 1, 1, 1])).is_empty());
    }

    #[test]
    fn untouched_pages() {
        let ft = MemoryPolicy::FirstTouch;
        let p = check(&ft, None).problems(&hist(&[0, UNTOUCHED, 0, UNTOUCHED]));
        assert_eq!(p, ["2 pages were never touched"]);
    }

    #[test]
    fn toucher_on_another_cpu_or_unseen() {
        let ft = MemoryPolicy::FirstTouch;
        let h = hist(&[0, 0]);
        let moved = BufferCheck {
            requested_cpu: Some(1),
            seen_cpu: Some(0),
            ..check(&ft, None)
        };
        assert_eq!(
            moved.problems(&h),
            ["the toucher ran on CPU 0 instead of CPU 1"]
        );
        let unseen = BufferCheck {
            seen_cpu: None,
            ..moved
        };
        assert_eq!(
            unseen.problems(&h),
            ["the toucher ran on CPU ? instead of CPU 1"]
        );
        // Without a request, wherever it ran is fine.
        let free = BufferCheck {
            requested_cpu: None,
            seen_cpu: Some(0),
            ..moved
        };
        assert!(free.problems(&h).is_empty());
    }

    #[test]
    fn workers_that_ran_elsewhere() {
        let ft = MemoryPolicy::FirstTouch;
        let workers = [
            WorkerCheck {
                requested_cpu: 0,
                seen_cpu: Some(0),
                ok: true,
            },
            WorkerCheck {
                requested_cpu: 1,
                seen_cpu: Some(0),
                ok: false,
            },
            WorkerCheck {
                requested_cpu: 2,
                seen_cpu: None,
                ok: false,
            },
        ];
        let c = BufferCheck {
            workers: &workers,
            ..check(&ft, None)
        };
        assert_eq!(
            c.problems(&hist(&[0])),
            [
                "worker for CPU 1 ran on CPU Some(0)",
                "worker for CPU 2 ran on CPU None"
            ]
        );
    }

    #[test]
    fn pages_outside_the_requested_nodes() {
        let bind = MemoryPolicy::Bind { nodes: ids("0-1") };
        let nodes = ids("0-1");
        let p = check(&bind, Some(&nodes)).problems(&hist(&[0, 2, 1, 3, 3, 0, 1, 1]));
        assert_eq!(p, ["3 of 8 pages landed outside the requested nodes {0-1}"]);
    }

    #[test]
    fn preferred_may_fall_back() {
        let preferred = MemoryPolicy::Preferred { nodes: ids("1") };
        let one = ids("1");
        let p = check(&preferred, Some(&one)).problems(&hist(&[0, 0, 1]));
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn uneven_interleave() {
        let nodes = ids("0-1");
        let il = MemoryPolicy::Interleave {
            nodes: nodes.clone(),
            chunk_pages: 1,
        };
        assert_eq!(
            check(&il, Some(&nodes)).problems(&hist(&[0, 0, 0, 1, 0])),
            ["interleave is uneven: 1 to 4 pages per node (allowed difference 1)"]
        );
        // One chunk of difference is what round robin leaves.
        assert!(check(&il, Some(&nodes))
            .problems(&hist(&[0, 1, 0]))
            .is_empty());
        // A node with no page at all counts as zero.
        assert_eq!(
            check(&il, Some(&nodes)).problems(&hist(&[0, 0, 0])),
            ["interleave is uneven: 0 to 3 pages per node (allowed difference 1)"]
        );
        // Chunks of 4 pages may differ by 4.
        let chunks = MemoryPolicy::Interleave {
            nodes: nodes.clone(),
            chunk_pages: 4,
        };
        assert!(check(&chunks, Some(&nodes))
            .problems(&hist(&[0, 0, 0, 0]))
            .is_empty());
        // Untouched pages are reported once, not as unevenness too.
        assert_eq!(
            check(&il, Some(&nodes)).problems(&hist(&[0, 0, 0, UNTOUCHED])),
            ["1 pages were never touched"]
        );
    }

    #[test]
    fn each_share_of_a_parallel_first_touch_is_on_its_cpus_node() {
        let m = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        // CPUs 0, 2, 4 are on nodes 0, 1, 2: three shares of 2 pages.
        let h = hist(&[0, 0, 1, 1, 2, 2]);
        assert!(parallel_touch_problems(&m, &h, &[0, 2, 4]).is_empty());
        let h = hist(&[0, 1, 1, 1, 2, UNTOUCHED]);
        assert_eq!(
            parallel_touch_problems(&m, &h, &[0, 2, 4]),
            ["1 of the 2 pages CPU 0 first touched are not on its node 0"]
        );
        // 5 pages over 2 CPUs: shares of 3 and 2.
        let h = hist(&[1, 1, 1, 2, 2]);
        assert_eq!(
            parallel_touch_problems(&m, &h, &[2, 4]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn weighted_pages_follow_their_weights() {
        let nodes = ids("0-1");
        let w = MemoryPolicy::Weighted {
            weights: vec![(0, 3), (1, 1)],
            chunk_pages: 1,
        };
        let exact = [0, 0, 0, 1].repeat(4);
        assert!(check(&w, Some(&nodes)).problems(&hist(&exact)).is_empty());
        // Half and half is far from 3:1.
        let even = [0, 1].repeat(8);
        assert_eq!(
            check(&w, Some(&nodes)).problems(&hist(&even)),
            [
                "weighted interleave is off its weights: node 0 has 8 of 16 pages where weight 3 of 4 is 12 (allowed difference 3)",
                "weighted interleave is off its weights: node 1 has 8 of 16 pages where weight 1 of 4 is 4 (allowed difference 1)",
            ]
        );
        // A partial last round is within one round of the exact share.
        let partial = [0, 0, 0, 1, 0, 0].to_vec();
        assert!(check(&w, Some(&nodes)).problems(&hist(&partial)).is_empty());
    }

    #[test]
    fn several_problems_in_order() {
        let nodes = ids("0-1");
        let il = MemoryPolicy::Interleave {
            nodes: nodes.clone(),
            chunk_pages: 1,
        };
        let c = BufferCheck {
            requested_cpu: Some(1),
            seen_cpu: Some(0),
            ..check(&il, Some(&nodes))
        };
        assert_eq!(
            c.problems(&hist(&[UNTOUCHED, 2, 0, 0, 0])),
            [
                "1 pages were never touched",
                "the toucher ran on CPU 0 instead of CPU 1",
                "1 of 5 pages landed outside the requested nodes {0-1}",
            ]
        );
    }
}
