//! Diagnoses of a profile, each computed from its region's numbers with
//! the evidence stated (docs/profile.md, "Diagnoses": a share is judged by its 95%
//! Wilson interval, never by its point value), and the placement that
//! fixes it as a `numalab run` option.

use super::{Profile, RegionProfile};
use crate::experiments::pdm::wilson;
use crate::machine::Machine;
use crate::IdSet;
use serde::{Deserialize, Serialize};

/// Page-fault samples a region needs before anything is said of it
/// from them (without word counts).
pub const MIN_SAMPLES: u64 = 20;
/// Word-count samples (cells with an access, their thread's and page's
/// nodes known) a region needs before anything is said of it.
pub const MIN_CELLS: u64 = super::estimate::MIN_CELLS;
/// Share of a region's present pages on one node for "its pages are on
/// node N".
const ONE_NODE: f64 = 0.9;
/// Share of a region's samples a CPU node needs to count as accessing it.
const ACCESSING: f64 = 0.05;

/// One finding about a region, with its numbers and its fix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Diagnosis {
    /// `one-node-shared` (pages on one node, accessed from three or more
    /// nodes: the signature of initialisation by one thread),
    /// `two-node-shared` (the same from two nodes: interleave would not
    /// help, the program should split it), `not-enough-samples` (mostly
    /// remote by too few samples to plan on), `remote-bound` (pages
    /// on one node, accessed from one other), `first-touched-elsewhere`
    /// (the same, and its sampled first touches were by a thread on that
    /// node that does not use it), `cpuless-hot` (a hot region on a node
    /// without CPUs), `unpinned-drift` (a thread free to run anywhere that
    /// ran on several nodes, mostly away from its data), `false-sharing`
    /// (refinement saw one cache line written from two or more nodes, to
    /// different words), `shared-write` (one word written from two or more
    /// nodes).
    pub kind: String,
    /// Index into `regions` and its site, or the thread ("thread TID").
    pub region: Option<usize>,
    pub thread: Option<u32>,
    pub site: String,
    /// The node holding the pages, and the share of them there.
    pub pages_node: u32,
    pub pages_share: f64,
    /// CPU nodes the region is accessed from: at least 5% of its
    /// estimated accesses (word counts) or of its page-fault samples.
    pub accessing_nodes: Vec<u32>,
    /// The samples the shares come from: word-count cells, or page-fault
    /// samples (`source` says which).
    pub samples: u64,
    pub remote_share: f64,
    /// 95% interval of the remote share: Wilson's over the word counts'
    /// effective cells, or over the page-fault samples' threads (each
    /// thread one draw: its samples are not independent).
    pub remote_ci: [f64; 2],
    /// `word counts` or `page-fault samples` (since 1.7; the latter's
    /// error is not bounded).
    #[serde(default)]
    pub source: String,
    pub text: String,
    /// The placement that fixes it, as a command.
    pub fix: String,
}

/// Pages a node a region needs before interleaving it is worth it: the
/// AMD note's "much larger than a page".
const INTERLEAVE_PAGES_PER_NODE: u64 = 16;

/// The bytes a region shared by `nodes` nodes needs before interleave.
fn interleave_worth(nodes: usize) -> u64 {
    INTERLEAVE_PAGES_PER_NODE * 4096 * nodes as u64
}

/// First touches a region needs before its toucher is named.
const MIN_FIRST_TOUCHES: u64 = 5;

/// The thread behind most of a region's sampled first touches (the lower
/// end of the 95% interval of its share above one half), with the words
/// for it: "thread 812 (the main thread, pinned to CPU 0), 40 of 41
/// sampled first touches (95% CI 87–100%)".
/// Below this share of a region's accesses, the thread that first touched
/// it does not use it: its initialising writes are all it did there (one
/// pass, against the users' many).
const TOUCHER_USE_SHARE: f64 = 0.10;

fn first_toucher(p: &Profile, r: &RegionProfile) -> Option<(u32, String)> {
    let f = r.first_touch.as_ref()?;
    if f.samples < MIN_FIRST_TOUCHES {
        return None;
    }
    let (tid, k) = f.threads.iter().max_by_key(|(_, k)| **k)?;
    let share = *k as f64 / f.samples as f64;
    let ci = wilson(share, f.samples as f64);
    if ci[0] <= 0.5 {
        return None;
    }
    let t = p.threads.iter().find(|t| t.tid == *tid);
    let main = (*tid == p.pid).then_some("the main thread");
    let pinned = match (t.and_then(|t| t.allowed_cpus), t.map(|t| &t.cpus)) {
        (Some(1), Some(c)) if c.len() == 1 => Some(format!("pinned to CPU {}", c[0])),
        (Some(1), _) => Some("pinned".to_string()),
        (Some(_), _) => Some("not pinned".to_string()),
        _ => None,
    };
    let about = match (main, pinned) {
        (Some(m), Some(p)) => format!(" ({m}, {p})"),
        (Some(m), None) => format!(" ({m})"),
        (None, Some(p)) => format!(" ({p})"),
        (None, None) => String::new(),
    };
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    Some((
        *tid,
        format!(
            "thread {tid}{about}, {k} of {} sampled first touches (95% CI {}–{})",
            f.samples,
            pct(ci[0]),
            pct(ci[1])
        ),
    ))
}

/// The node holding at least 90% of the region's present pages.
fn pages_node(r: &RegionProfile) -> Option<(u32, f64)> {
    let present = super::present(r);
    let (n, p) = r
        .pages_by_node
        .iter()
        .filter(|(n, _)| **n >= 0)
        .max_by_key(|(_, p)| **p)?;
    let share = *p as f64 / present.max(1) as f64;
    (share >= ONE_NODE).then_some((*n as u32, share))
}

/// What a region's remote share rests on.
pub struct Evidence {
    pub share: f64,
    pub ci: [f64; 2],
    pub samples: u64,
    /// CPU nodes accessing it (see [`Diagnosis::accessing_nodes`]).
    pub accessing: Vec<u32>,
    /// Where the share comes from, for the text.
    pub source: &'static str,
}

/// The evidence of region `r`: its word counts when they have enough
/// cells, else its page-fault samples with an interval over its threads;
/// `None` with too few of either. The accessing nodes come from the
/// counted accesses (where they have the cells to judge by) and the
/// sampled faults, so that a biased sampler cannot leave out a node that
/// reads the region.
pub fn evidence(r: &RegionProfile) -> Option<Evidence> {
    let fault_placed: u64 = r.accesses.values().flat_map(|v| v.values()).sum();
    let mut accessing: std::collections::BTreeSet<u32> = r
        .accesses
        .iter()
        .filter(|(_, row)| row.values().sum::<u64>() as f64 >= ACCESSING * fault_placed as f64)
        .map(|(c, _)| *c)
        .collect();
    if let Some(e) = r.estimate.as_ref().filter(|e| e.placed_cells >= MIN_CELLS) {
        // A counted access is real, but a share from a few cells is not:
        // a node counts when its share's interval clears ACCESSING (one
        // cell of eight from the thread that initialised the region is
        // not a user of it). Below MIN_CELLS the word counts decide
        // nothing, neither the share nor who uses it: a CI run gave the
        // main thread 2 of E's 7 cells (its one initialising pass; 28%,
        // interval 8-64%) and the region, read from node 3 only, was
        // called shared by nodes 0 and 3.
        accessing.extend(
            e.cpu_nodes
                .iter()
                .filter(|(_, share)| wilson(**share, e.placed_cells as f64)[0] >= ACCESSING)
                .map(|(n, _)| *n),
        );
        if let Some(remote) = e.remote {
            return Some(Evidence {
                share: remote.share,
                ci: [remote.low, remote.high],
                samples: e.placed_cells,
                accessing: accessing.into_iter().collect(),
                source: "word counts",
            });
        }
    }
    if fault_placed < MIN_SAMPLES {
        return None;
    }
    let share = r.fault_remote_share()?;
    Some(Evidence {
        share,
        ci: by_thread_interval(r, share),
        samples: fault_placed,
        accessing: accessing.into_iter().collect(),
        source: "page-fault samples",
    })
}

/// Samples a region below the evidence needed must still have before it
/// is named as one that may need a fix.
const NAMED_BELOW_EVIDENCE: u64 = 5;

/// A region whose few samples say mostly remote, but too few to judge:
/// named, with what would settle it, and no policy (the plan leaves it).
fn too_few(
    i: usize,
    r: &RegionProfile,
    node: u32,
    pshare: f64,
    command: &str,
) -> Option<Diagnosis> {
    let (share, samples, source, needed) = match &r.estimate {
        Some(e) if e.placed_cells > 0 => {
            (e.remote?.share, e.placed_cells, "word counts", MIN_CELLS)
        }
        _ => {
            let n: u64 = r.accesses.values().flat_map(|v| v.values()).sum();
            (
                r.fault_remote_share()?,
                n,
                "page-fault samples",
                MIN_SAMPLES,
            )
        }
    };
    if samples < NAMED_BELOW_EVIDENCE || share <= 0.5 {
        return None;
    }
    Some(Diagnosis {
        kind: "not-enough-samples".into(),
        region: Some(i),
        thread: None,
        site: r.site.clone(),
        pages_node: node,
        pages_share: pshare,
        accessing_nodes: Vec::new(),
        samples,
        remote_share: share,
        remote_ci: [0.0, 1.0],
        source: source.into(),
        text: format!(
            "{}: {:.0}% of its pages are on node {node}, and {samples} {source} say {:.0}% of its accesses are remote, but a policy needs {needed}: not enough samples; run longer or raise --overhead (word counts) or --rate (page faults)",
            r.site,
            pshare * 100.0,
            share * 100.0
        ),
        fix: format!("numalab profile --overhead 5 -- {command}"),
    })
}

/// The 95% interval of a page-fault share with each thread one cluster:
/// a thread's samples of a page come in runs (the first to touch an armed
/// page takes it), so the threads, not the samples, are independent. The
/// variance is the cluster-robust (sandwich) one of the ratio, over the
/// threads' placed and remote samples; Wilson's interval at the effective
/// number of samples it implies, never more than the samples themselves.
/// It still cannot see threads that drew no sample (the word counts can):
/// the interval is labelled not bounded.
fn by_thread_interval(r: &RegionProfile, share: f64) -> [f64; 2] {
    let all: u64 = r.accesses.values().flat_map(|v| v.values()).sum();
    cluster_interval(&r.placed_by_thread, all, share)
}

/// [`by_thread_interval`] of any samples: `placed_by_thread` each
/// thread's `[placed, remote]`, `all` the placed samples (of threads
/// known or not), `share` their remote share. `--granularity`'s units use
/// it too.
pub(crate) fn cluster_interval(
    placed_by_thread: &std::collections::BTreeMap<u32, [u64; 2]>,
    all: u64,
    share: f64,
) -> [f64; 2] {
    let placed: u64 = placed_by_thread.values().map(|t| t[0]).sum();
    let clusters = placed_by_thread.len() as f64;
    // A profile without samples by thread (schema before 1.7), or with
    // one thread, shows no spread between threads to widen by.
    if clusters < 2.0 || placed == 0 {
        return wilson(share, all.max(1) as f64);
    }
    let n = placed as f64;
    let spread: f64 = placed_by_thread
        .values()
        .map(|[k, remote]| (*remote as f64 - share * *k as f64).powi(2))
        .sum();
    let var = clusters / (clusters - 1.0) * spread / (n * n);
    let effective = if var > 0.0 && share > 0.0 && share < 1.0 {
        (share * (1.0 - share) / var).min(n)
    } else {
        n
    };
    wilson(share, effective.max(1.0))
}

/// Diagnoses of every region of `p` with enough samples; `command` is the
/// profiled command, for the fix.
pub fn diagnose(m: &Machine, p: &Profile) -> Vec<Diagnosis> {
    let total: u64 = p.regions.iter().map(|r| r.samples).sum();
    let command = p.program.join(" ");
    let mut out = Vec::new();
    for (i, r) in p.regions.iter().enumerate() {
        let Some((node, pshare)) = pages_node(r) else {
            continue;
        };
        let Some(ev) = evidence(r) else {
            out.extend(too_few(i, r, node, pshare, &command));
            continue;
        };
        let (share, ci, located) = (ev.share, ev.ci, ev.samples);
        let accessing = ev.accessing.clone();
        let nodes = accessing.iter().copied().collect::<IdSet>();
        let mut d = Diagnosis {
            kind: String::new(),
            region: Some(i),
            thread: None,
            site: r.site.clone(),
            pages_node: node,
            pages_share: pshare,
            accessing_nodes: accessing.clone(),
            samples: located,
            remote_share: share,
            remote_ci: ci,
            source: ev.source.into(),
            text: String::new(),
            fix: String::new(),
        };
        let pct = |x: f64| format!("{:.0}%", x * 100.0);
        let evidence = format!(
            "{} of its accesses remote (95% CI {}–{}, {} samples, {}{})",
            pct(share),
            pct(ci[0]),
            pct(ci[1]),
            located,
            ev.source,
            if ev.source == "word counts" {
                ""
            } else {
                ": error not bounded"
            }
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
        } else if ci[0] > 0.5 && accessing.len() == 2 {
            // The AMD note (docs/profile.md, "Diagnoses"): interleave pays where three
            // or more nodes share the data; over two, about half the
            // accesses stay remote either way, and interleave only spreads
            // the load over both controllers.
            d.kind = "two-node-shared".into();
            d.text = format!(
                "{}: {} of its pages are on node {node} and nodes {nodes} access it; {evidence}: interleaving it over two nodes would keep about half its accesses remote (interleave pays from three accessing nodes); give each node the part it uses (initialise it in parallel, each thread its part)",
                r.site,
                pct(pshare)
            );
            d.fix = "change the program: each node's threads first touch the part they use".into();
            out.push(d);
        } else if ci[0] > 0.5 && accessing.len() >= 3 && r.bytes < interleave_worth(accessing.len())
        {
            d.kind = "one-node-shared".into();
            d.text = format!(
                "{}: {} of its pages are on node {node} and nodes {nodes} access it; {evidence}; but at {} it is too small to interleave (fewer than {} pages a node): place it where its busiest users run, or give each node its own copy",
                r.site,
                pct(pshare),
                crate::text::format::bytes(r.bytes),
                INTERLEAVE_PAGES_PER_NODE
            );
            d.fix =
                "change the program: replicate it per node, or keep it where its busiest users run"
                    .into();
            out.push(d);
        } else if ci[0] > 0.5 && accessing.len() >= 3 {
            d.kind = "one-node-shared".into();
            let who = match first_toucher(p, r) {
                Some((_, words)) => format!("; first touched by {words}"),
                None => String::new(),
            };
            d.text = format!(
                "{}: {} of its pages are on node {node} and nodes {nodes} access it; {evidence}{who}: the signature of initialisation by one thread (first touch put every page on its node); interleave it over the accessing nodes, or initialise it in parallel, each thread its part",
                r.site,
                pct(pshare)
            );
            d.fix = format!("numalab run --interleave {nodes} -- {command}");
            out.push(d);
        } else if ci[0] > 0.5 && accessing.len() == 1 && accessing[0] != node {
            d.fix = format!("numalab run --membind {nodes} -- {command}");
            let (kind, text) = remote_use(p, r, node, pshare, &nodes, &evidence);
            d.kind = kind.into();
            d.text = text;
            out.push(d);
        }
    }
    out.extend(drifting_threads(p));
    out.extend(contended_lines(p));
    out
}

/// A region on node `node` that one other node uses: data its first
/// toucher placed and hardly uses ("first-touched-elsewhere"), or else data
/// bound away from its users ("remote-bound"); the kind and the sentence.
fn remote_use(
    p: &Profile,
    r: &RegionProfile,
    node: u32,
    pshare: f64,
    nodes: &IdSet,
    evidence: &str,
) -> (&'static str, String) {
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    // First touch placed it: the toucher ran on the pages' node
    // (not a policy that put them elsewhere) and never used it.
    let placed_by = |tid: &u32| p.threads.iter().any(|t| t.tid == *tid && t.nodes == [node]);
    // Its part of the accesses, by either source: the word counts
    // see the toucher's initialising writes, which are not a use.
    let use_share = |tid: &u32| {
        let sampled: u64 = r.threads.values().sum();
        let by_faults = match sampled {
            0 => 0.0,
            n => r.threads.get(tid).copied().unwrap_or(0) as f64 / n as f64,
        };
        let by_words = r
            .estimate
            .as_ref()
            .filter(|e| e.placed_cells >= MIN_CELLS)
            .and_then(|e| e.threads.get(tid))
            .map_or(0.0, |t| t.share);
        by_faults.max(by_words)
    };
    match first_toucher(p, r)
        .filter(|(tid, _)| use_share(tid) < TOUCHER_USE_SHARE && placed_by(tid))
    {
        Some((tid, words)) => {
            let uses = match use_share(&tid) {
                x if x > 0.0 => format!(
                    "which makes only {} of its accesses (its initialising writes)",
                    pct(x)
                ),
                _ => "which does not use it".to_string(),
            };
            (
                "first-touched-elsewhere",
                format!(
                    "{}: {} of its pages are on node {node} but only node {nodes} accesses it; {evidence}; first touched by {words}, {uses}: private data placed by another thread; initialise it in the threads that use it, or place it on their node",
                    r.site,
                    pct(pshare)
                ),
            )
        }
        None => (
            "remote-bound",
            format!(
                "{}: {} of its pages are on node {node} but only node {nodes} accesses it; {evidence}: place it on the node of its users",
                r.site,
                pct(pshare)
            ),
        ),
    }
}

/// Lines the watchpoints saw written from two or more nodes: false sharing
/// (different words) or a shared written word. The fix is in the code, not
/// in placement: no policy keeps a line written from two nodes on both.
fn contended_lines(p: &Profile) -> Vec<Diagnosis> {
    let Some(refined) = &p.refinement else {
        return Vec::new();
    };
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let mut out = Vec::new();
    for l in refined
        .lines
        .iter()
        .filter(|l| l.false_sharing || !l.shared_words.is_empty())
    {
        let site = l.site.clone().unwrap_or_else(|| "(untracked)".into());
        let region = p
            .regions
            .iter()
            .position(|r| l.site.as_ref() == Some(&r.site));
        let words: Vec<String> = l
            .words
            .iter()
            .filter(|w| !w.writes.is_empty())
            .map(|w| {
                let by: Vec<String> = w
                    .writes
                    .iter()
                    .map(|(n, k)| format!("node {n} ({k})"))
                    .collect();
                format!("+{} by {}", w.offset, by.join(", "))
            })
            .collect();
        let share = l.remote_hits as f64 / l.placed_hits.max(1) as f64;
        let ci = wilson(share, l.placed_hits as f64);
        let nodes = l.written_from.iter().copied().collect::<IdSet>();
        let place = match l.offset {
            Some(o) => format!("line {:#x} (offset {o} of {site})", l.address),
            None => format!("line {:#x}", l.address),
        };
        let (kind, what, fix) = if l.false_sharing {
            (
                "false-sharing",
                format!(
                    "false sharing: the line moves between nodes {nodes} on their writes, though they write different words"
                ),
                "a code change: put the words written from different nodes on separate cache lines (align each to 64 bytes, or pad the struct); no placement fixes false sharing".to_string(),
            )
        } else {
            let shared: Vec<String> = l.shared_words.iter().map(|o| format!("+{o}")).collect();
            (
                "shared-write",
                format!(
                    "word {} is written from nodes {nodes}: a shared counter or lock, the line moves on every write",
                    shared.join(", ")
                ),
                "a code change: give each node (or thread) its own copy, on its own line, and combine them when read".to_string(),
            )
        };
        let page = l
            .page_node
            .map(|n| {
                format!(
                    "; its page is on node {n}, {} of the watched accesses remote",
                    pct(share)
                )
            })
            .unwrap_or_default();
        out.push(Diagnosis {
            kind: kind.into(),
            region,
            thread: None,
            site: site.clone(),
            pages_node: l.page_node.unwrap_or(0),
            pages_share: 1.0,
            accessing_nodes: l.accessed_from.clone(),
            samples: l.placed_hits,
            remote_share: share,
            remote_ci: ci,
            source: "watchpoints".into(),
            text: format!(
                "{place}: written {} (watchpoint hits){page}: {what}",
                words.join("; ")
            ),
            fix,
        });
    }
    out
}

/// Threads free to run on more than one CPU that the samples saw on two
/// or more nodes, with most of their accesses remote (the lower end of
/// the 95% interval above one half): the scheduler moved them away from
/// their data. The fix binds the program's CPUs to the node holding most
/// of the pages they accessed.
fn drifting_threads(p: &Profile) -> Vec<Diagnosis> {
    let command = p.program.join(" ");
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let mut out = Vec::new();
    for t in &p.threads {
        let (Some(share), Some(allowed)) = (t.remote_share, t.allowed_cpus) else {
            continue;
        };
        if allowed < 2 || t.nodes.len() < 2 || t.samples < MIN_SAMPLES {
            continue;
        }
        let ci = wilson(share, t.samples as f64);
        let Some((&home, &k)) = t.memory_nodes.iter().max_by_key(|(_, k)| **k) else {
            continue;
        };
        if ci[0] <= 0.5 {
            continue;
        }
        let moves = match t.migrations {
            Some(n) => format!("the kernel moved it {n} times between CPUs"),
            None => format!("its samples changed CPU {} times", t.cpu_changes_seen),
        };
        let nodes = t.nodes.iter().copied().collect::<IdSet>();
        out.push(Diagnosis {
            kind: "unpinned-drift".into(),
            region: None,
            thread: Some(t.tid),
            site: format!("thread {}", t.tid),
            pages_node: home,
            pages_share: k as f64 / t.samples.max(1) as f64,
            accessing_nodes: t.nodes.clone(),
            samples: t.samples,
            remote_share: share,
            remote_ci: ci,
            source: "page-fault samples".into(),
            text: format!(
                "thread {}: free to run on {allowed} CPUs, it ran on nodes {nodes} ({moves}); {} of its accesses remote (95% CI {}–{}, {} samples), {} of them to pages on node {home}: unpinned, it drifted away from its data; bind it to node {home}",
                t.tid,
                pct(share),
                pct(ci[0]),
                pct(ci[1]),
                t.samples,
                pct(k as f64 / t.samples.max(1) as f64)
            ),
            fix: format!("numalab run --cpunodebind {home} -- {command}"),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;
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
            sampled: true,
            object: None,
            thread: None,
            stack: Vec::new(),
            allocations: 1,
            sampled_allocations: 0,
            bytes: 1 << 24,
            first_address: 0x1000,
            samples: n,
            reads: n,
            writes: 0,
            unknown_access: 0,
            remote_share: Some(remote as f64 / n as f64),
            estimate: None,
            distance_ratio: None,
            latency_cost: None,
            accesses,
            pages_by_node: pages.iter().copied().collect(),
            threads: BTreeMap::new(),
            placed_by_thread: BTreeMap::new(),
            first_touch: None,
            pages_over_time: Vec::new(),
            page_map: None,
            units: None,
            kept_samples: None,
        }
    }

    fn profile(regions: Vec<RegionProfile>) -> Profile {
        Profile {
            refinement: None,
            latency_source: None,
            schema_version: "1.0".into(),
            program: vec!["./app".into()],
            pid: 100,
            host: None,
            rate: 2000,
            min_bytes: 65536,
            page_size: 4096,
            pages_armed: 0,
            go_runtime: false,
            huge_page_samples: 0,
            samples: regions.iter().map(|r| r.samples).sum(),
            cost: None,
            sampled_for_s: None,
            ran_for_s: None,
            unattributed: 0,
            remote_share: None,
            estimate: None,
            word_counting: None,
            regions,
            threads: Vec::new(),
            diagnoses: Vec::new(),
            plan_check: None,
            warnings: Vec::new(),
            selection: None,
            pmu: None,
            counters: None,
            granularity: None,
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
        assert_eq!(
            kinds(&d),
            [
                ("init_a", "one-node-shared"),
                ("c", "remote-bound"),
                ("d", "not-enough-samples")
            ]
        );
        assert!(
            d[2].text.contains(
                "5 page-fault samples say 100% of its accesses are remote, but a policy needs 20"
            ),
            "{}",
            d[2].text
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
                .contains("75% of its accesses remote (95% CI 67%–82%, 120 samples, page-fault samples: error not bounded)"),
            "{}",
            d[0].text
        );
        assert_eq!(d[1].fix, "numalab run --membind 0 -- ./app");
    }

    #[test]
    fn samples_that_one_thread_takes_widen_the_fault_interval() {
        // The leader: 8 threads read A in step from four nodes;
        // the one in front takes most samples (remote), the two local
        // threads a few. Samples as independent draws would say 95% with
        // a narrow interval; by thread the interval reaches the truth.
        let mut a = region(
            "a",
            &[(0, 6143)],
            &[(0, 0, 8), (1, 0, 60), (2, 0, 60), (3, 0, 31)],
        );
        a.placed_by_thread = BTreeMap::from([
            (1, [113, 113]),
            (2, [4, 0]),
            (3, [4, 0]),
            (4, [10, 10]),
            (5, [12, 12]),
            (6, [6, 6]),
            (7, [9, 9]),
            (8, [1, 1]),
        ]);
        let share = a.fault_remote_share().unwrap();
        assert!((share - 151.0 / 159.0).abs() < 1e-12);
        let by_thread = by_thread_interval(&a, share);
        let independent = wilson(share, 159.0);
        assert!(independent[0] > 0.89, "{independent:?}");
        assert!(
            by_thread[0] < independent[0] - 0.05,
            "{by_thread:?} {independent:?}"
        );
        // One thread, or none recorded, has no spread to widen by.
        a.placed_by_thread = BTreeMap::from([(1, [159, 151])]);
        assert_eq!(by_thread_interval(&a, share), independent);
    }

    /// (site, kind) of each diagnosis, in order.
    fn kinds(d: &[Diagnosis]) -> Vec<(&str, &str)> {
        d.iter()
            .map(|x| (x.site.as_str(), x.kind.as_str()))
            .collect()
    }

    fn thread(tid: u32, cpu: u32, node: u32) -> crate::profile::ThreadProfile {
        crate::profile::ThreadProfile {
            tid,
            name: None,
            ordinal: None,
            samples: 0,
            allowed_cpus: Some(1),
            cpus: vec![cpu],
            nodes: vec![node],
            remote_share: None,
            first_touches: 0,
            estimated_share: None,
            word_cells: 0,
            memory_nodes: BTreeMap::new(),
            migrations: None,
            cpu_changes_seen: 0,
            timeline: Vec::new(),
        }
    }

    #[test]
    fn a_node_in_a_few_word_counts_is_no_user_until_its_interval_says_so() {
        // E's faults all come from node 3; its word counts saw the main
        // thread's initialising writes from node 0 in 1 of 8 cells.
        let mut e = region("e", &[(0, 2047)], &[(3, 0, 40)]);
        let estimate = |placed_cells: u64| crate::profile::estimate::AccessEstimate {
            draws: 100,
            cells: placed_cells,
            effective_cells: placed_cells as f64,
            counted: placed_cells,
            placed_cells,
            accesses: 1e6,
            remote: None,
            matrix: Vec::new(),
            cpu_nodes: BTreeMap::from([(0, 0.125), (3, 0.875)]),
            threads: BTreeMap::new(),
        };
        e.estimate = Some(estimate(8));
        assert_eq!(evidence(&e).unwrap().accessing, [3]);
        // The same share from 400 cells: node 0 does use it.
        e.estimate = Some(estimate(400));
        assert_eq!(evidence(&e).unwrap().accessing, [0, 3]);
    }

    #[test]
    fn word_counts_below_the_cells_a_share_needs_name_no_user() {
        // A CI run's E: 281 fault samples, all from node 3's two readers;
        // 22 of 22 sampled first touches by the main thread on node 0; and
        // 7 word-count cells, 2 of them the main thread's initialising
        // writes (28%, whose interval 8-64% clears 5%). It was called
        // two-node-shared; 7 cells decide nothing, so the faults do.
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let mut e = region("e", &[(0, 2047)], &[(3, 0, 281)]);
        e.threads = BTreeMap::from([(230, 149), (231, 132)]);
        e.first_touch = Some(crate::profile::FirstTouches {
            samples: 22,
            writes: 22,
            threads: BTreeMap::from([(100, 22)]),
            nodes: BTreeMap::from([(0, 22)]),
        });
        let toucher = crate::profile::estimate::ThreadShare {
            share: 0.278,
            draws: 31,
            cells: 2,
            counted: 2,
        };
        e.estimate = Some(crate::profile::estimate::AccessEstimate {
            draws: 1560,
            cells: 7,
            effective_cells: 7.0,
            counted: 7,
            placed_cells: 7,
            accesses: 47460.0,
            remote: None,
            matrix: Vec::new(),
            cpu_nodes: BTreeMap::from([(0, 0.278), (3, 0.722)]),
            threads: BTreeMap::from([(100, toucher)]),
        });
        assert_eq!(evidence(&e).unwrap().accessing, [3]);
        let mut p = profile(vec![e]);
        p.threads = vec![thread(100, 0, 0), thread(230, 6, 3), thread(231, 7, 3)];
        let d = diagnose(&m, &p);
        assert_eq!(kinds(&d), [("e", "first-touched-elsewhere")]);
        assert_eq!(d[0].accessing_nodes, [3]);
        assert_eq!(d[0].fix, "numalab run --membind 3 -- ./app");
        assert!(d[0].text.contains("which does not use it"), "{}", d[0].text);
    }

    #[test]
    fn first_touches_tell_private_data_placed_by_another_thread_from_a_policy() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let touched = |tid: u32, n: u64, node: i32| {
            Some(crate::profile::FirstTouches {
                samples: n,
                writes: n,
                threads: BTreeMap::from([(tid, n)]),
                nodes: BTreeMap::from([(node, n)]),
            })
        };
        // E: on node 0, read by thread 103 on node 3 only; the main thread
        // (100, pinned to CPU 0) wrote 12 of 12 sampled first touches.
        let mut e = region("e", &[(0, 2047)], &[(3, 0, 40)]);
        e.threads = BTreeMap::from([(103, 40)]);
        e.first_touch = touched(100, 12, 0);
        // C: on node 3 by a policy; the same main thread touched it first,
        // but from node 0: not first touch's doing.
        let mut c = region("c", &[(3, 2048)], &[(0, 3, 40)]);
        c.threads = BTreeMap::from([(101, 40)]);
        c.first_touch = touched(100, 12, 3);
        // A: shared from every node, first-touched by the main thread.
        let mut a = region(
            "a",
            &[(0, 6143)],
            &[(0, 0, 30), (1, 0, 30), (2, 0, 30), (3, 0, 30)],
        );
        a.first_touch = touched(100, 20, 0);
        // Too few first touches to name anyone: remote-bound.
        let mut f = region("f", &[(0, 512)], &[(3, 0, 40)]);
        f.first_touch = touched(100, 4, 0);
        // G: as E, but the main thread's own accesses are 1 of 41 samples
        // (its initialising writes): still placed by another thread.
        let mut g = region("g", &[(0, 2047)], &[(3, 0, 40), (0, 0, 1)]);
        g.threads = BTreeMap::from([(103, 40), (100, 1)]);
        g.first_touch = touched(100, 12, 0);
        // H: the toucher makes 12 of 40 accesses (30%): it uses the data,
        // shared by two nodes.
        let mut h = region("h", &[(0, 2047)], &[(3, 0, 28), (0, 0, 12)]);
        h.threads = BTreeMap::from([(103, 28), (100, 12)]);
        h.first_touch = touched(100, 12, 0);
        let mut p = profile(vec![e, c, a, f, g, h]);
        p.threads = vec![thread(100, 0, 0), thread(101, 0, 0), thread(103, 3, 3)];
        let d = diagnose(&m, &p);
        assert_eq!(
            kinds(&d),
            [
                ("e", "first-touched-elsewhere"),
                ("c", "remote-bound"),
                ("a", "one-node-shared"),
                ("f", "remote-bound"),
                ("g", "first-touched-elsewhere"),
                ("h", "two-node-shared"),
            ]
        );
        assert!(
            d[4].text.contains(
                "12 of 12 sampled first touches (95% CI 76%–100%), which makes only 2% of its accesses (its initialising writes): private data"
            ),
            "{}",
            d[4].text
        );
        assert!(
            d[0].text.contains(
                "first touched by thread 100 (the main thread, pinned to CPU 0), 12 of 12 sampled first touches (95% CI 76%–100%), which does not use it"
            ),
            "{}",
            d[0].text
        );
        assert_eq!(d[0].fix, "numalab run --membind 3 -- ./app");
        assert!(
            d[2].text.contains(
                "; first touched by thread 100 (the main thread, pinned to CPU 0), 20 of 20"
            ),
            "{}",
            d[2].text
        );
    }

    #[test]
    fn a_region_shared_by_four_nodes_is_interleaved_only_from_16_pages_a_node() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let shared = &[(0, 0, 30), (1, 0, 30), (2, 0, 30), (3, 0, 30)];
        // 63 pages: one short of 16 a node over the four accessing nodes.
        let mut small = region("small", &[(0, 63)], shared);
        small.bytes = 63 * 4096;
        let mut big = region("big", &[(0, 64)], shared);
        big.bytes = 64 * 4096;
        let d = diagnose(&m, &profile(vec![small, big]));
        assert_eq!(
            kinds(&d),
            [("small", "one-node-shared"), ("big", "one-node-shared")]
        );
        assert!(
            d[0].text.contains(
                "but at 252 KiB it is too small to interleave (fewer than 16 pages a node)"
            ),
            "{}",
            d[0].text
        );
        assert_eq!(
            d[0].fix,
            "change the program: replicate it per node, or keep it where its busiest users run"
        );
        assert_eq!(d[1].fix, "numalab run --interleave 0-3 -- ./app");
    }

    #[test]
    fn an_unpinned_thread_that_ran_away_from_its_data_is_told_to_bind() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let mut p = profile(Vec::new());
        // Free on 4 CPUs, seen on nodes 0 and 2; 60 samples, 48 remote,
        // 54 of them to node 0's pages.
        let mut drifter = thread(200, 0, 0);
        drifter.allowed_cpus = Some(4);
        drifter.cpus = vec![0, 2];
        drifter.nodes = vec![0, 2];
        drifter.samples = 60;
        drifter.remote_share = Some(0.8);
        drifter.memory_nodes = BTreeMap::from([(0, 54), (2, 6)]);
        drifter.migrations = Some(31);
        // Pinned, or local enough, or on one node: nothing to say.
        let mut pinned = drifter.clone();
        pinned.tid = 201;
        pinned.allowed_cpus = Some(1);
        let mut local = drifter.clone();
        local.tid = 202;
        local.remote_share = Some(0.4);
        let mut one_node = drifter.clone();
        one_node.tid = 203;
        one_node.nodes = vec![2];
        p.threads = vec![drifter, pinned, local, one_node];
        let d = diagnose(&m, &p);
        assert_eq!(d.len(), 1, "{d:#?}");
        assert_eq!(
            (d[0].kind.as_str(), d[0].thread, d[0].region),
            ("unpinned-drift", Some(200), None)
        );
        assert_eq!(d[0].fix, "numalab run --cpunodebind 0 -- ./app");
        assert!(
            d[0].text.contains("free to run on 4 CPUs, it ran on nodes 0,2 (the kernel moved it 31 times between CPUs); 80% of its accesses remote"),
            "{}",
            d[0].text
        );
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
