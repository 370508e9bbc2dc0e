//! Placement plans: from a profile's diagnoses to a memory policy per data
//! region, applied to any program by the preload library (`numalab run
//! --plan FILE`), and proved from the kernel afterwards (`--verify`).
//!
//! A plan is JSON (docs/plan-schema.json): `entries[]`, each a `region` (a
//! `--regions` filter: `site:FILE:LINE`, `site:FUNCTION`, `static:SYMBOL`,
//! `file:PATH`, `heap`, `mmap`, `size>N`, an address range) and a
//! `policy` (any numalab memory policy but `remote`), with the `reason`
//! and `expected` effect `numalab profile` found. The first entry that
//! selects a region wins. Hand-written plans need only `schema` and the
//! entries' `region` and `policy`.
//!
//! [`Plan::library_form`] turns it into the lines the library reads
//! (`NUMALAB_PLAN`, see `crates/numalab-preload/src/plan.rs`): each policy
//! as the kernel mode and nodes it is, or as stripes (`interleave@PAGES`,
//! `weighted:`, placed chunk by chunk as `place` does), each region as the
//! terms the library judges, site terms resolved to code ranges and
//! static symbols to addresses in the program's ELF files.

use super::diagnose::Diagnosis;
use super::filter::{self, CodeRange, RegionFilter, Term};
use super::record::{Kind, Record};
use super::{Profile, RegionProfile};
use crate::machine::Machine;
use crate::placement::{MemoryPolicy, Realization, WeightedImpl};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The `schema` of plan files this version reads and writes.
pub const SCHEMA: &str = "numalab-plan/1";
/// Entries in one plan at most.
pub const MAX_ENTRIES: usize = 64;

/// A placement plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The command the profile ran (informative).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub program: Vec<String>,
    /// The entries, first match wins.
    pub entries: Vec<PlanEntry>,
}

/// One region and its policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanEntry {
    /// The regions it places: a `--regions` filter.
    pub region: String,
    /// The memory policy they get (`interleave:0-3`, `bind:0`,
    /// `weighted:0=3,1=1`, `interleave:0-3@8`, `preferred:1`...).
    pub policy: String,
    /// Whether allocations smaller than a page are placed too, each entry's
    /// from a pool of its own whose pages get the policy (docs/plan.md):
    /// they share pages with other objects in the heap.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub small: bool,
    /// Why (the diagnosis, for plans `numalab profile` wrote).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The region as profiled: its site, kind and bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// What the profile says the policy changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Expected>,
}

/// The expected effect of an entry, estimated from the profile: each
/// accessing CPU node keeps its share of the accesses, and an access is
/// local with the probability that the policy puts a page on its node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub remote_share_before: f64,
    pub remote_share_after: f64,
    /// The samples both shares come from (word-count draws with an
    /// access, or page-fault samples: `source`).
    pub samples: u64,
    /// 95% intervals of both shares (since plan schema 1.1... read
    /// without them from older plans): Wilson's at the effective number
    /// of samples behind the region's remote share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_interval: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_interval: Option<[f64; 2]>,
    /// `word counts` or `page-fault samples` (whose error is not bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl Plan {
    /// The plan a profile's diagnoses call for: one entry per region whose
    /// diagnosis has a placement fix (pages on one node shared by several:
    /// interleave over the accessing nodes; pages away from their one user
    /// node: bind there; a hot region on a CPU-less node: prefer the
    /// accessing nodes). Regions no filter term can name (an unsymbolised
    /// site, a stack) are left out.
    pub fn from_profile(m: &Machine, p: &Profile, diagnoses: &[Diagnosis]) -> Plan {
        Self::from_regions(m, &p.regions, p.program.clone(), diagnoses)
    }

    fn from_regions(
        m: &Machine,
        regions: &[RegionProfile],
        command: Vec<String>,
        diagnoses: &[Diagnosis],
    ) -> Plan {
        let mut entries: Vec<PlanEntry> = Vec::new();
        let mut placed = Vec::new();
        for d in diagnoses {
            let Some(i) = d.region else { continue };
            if placed.contains(&i) || d.accessing_nodes.is_empty() {
                continue;
            }
            let Some(r) = regions.get(i) else { continue };
            let nodes: IdSet = d.accessing_nodes.iter().copied().collect();
            let policy = match d.kind.as_str() {
                "one-node-shared" => format!("interleave:{nodes}"),
                "remote-bound" | "first-touched-elsewhere" => format!("bind:{nodes}"),
                "cpuless-hot" => format!("preferred:{nodes}"),
                _ => continue,
            };
            let Some(region) = selector(r) else { continue };
            // Two regions with one selector (two allocations on one line)
            // are one entry: the first diagnosis decides.
            if entries.iter().any(|e| e.region == region) {
                continue;
            }
            let expected = MemoryPolicy::parse(m, &policy)
                .ok()
                .and_then(|pol| expected(r, &pol));
            placed.push(i);
            entries.push(PlanEntry {
                region,
                policy,
                small: r.kind == "small",
                reason: Some(format!("{}: {}", d.kind, d.text)),
                site: Some(r.site.clone()),
                kind: Some(r.kind.clone()),
                bytes: Some(r.bytes),
                expected,
            });
            if entries.len() == MAX_ENTRIES {
                break;
            }
        }
        Plan {
            schema: SCHEMA.into(),
            program: command,
            entries,
        }
    }

    /// Reads and checks a plan: the schema, the number of entries, each
    /// region a filter whose terms a plan can place, each policy one the
    /// library can apply on this machine. The error names the entry.
    pub fn parse(m: &Machine, text: &str) -> Result<Plan, String> {
        let plan: Plan = serde_json::from_str(text).map_err(|e| format!("not a plan ({e})"))?;
        if plan.schema != SCHEMA {
            return Err(format!(
                "schema '{}' is not one this numalab reads; valid: {SCHEMA}",
                crate::text::format::excerpt(&plan.schema, 40)
            ));
        }
        if plan.entries.is_empty() {
            return Err("it has no entries; give at least one {\"region\", \"policy\"}".into());
        }
        if plan.entries.len() > MAX_ENTRIES {
            return Err(format!(
                "{} entries is too many (at most {MAX_ENTRIES})",
                plan.entries.len()
            ));
        }
        for (i, e) in plan.entries.iter().enumerate() {
            let at = |why: String| format!("entry {i} ({}): {why}", e.region);
            let f = RegionFilter::parse(&e.region).map_err(&at)?;
            placeable(&f).map_err(at)?;
            let policy = MemoryPolicy::parse(m, &e.policy).map_err(at)?;
            realize(m, &policy).map_err(at)?;
        }
        Ok(plan)
    }

    /// Whether an entry names code or static data, which is looked up in the
    /// program's ELF files.
    pub fn needs_symbols(&self) -> bool {
        self.entries.iter().any(|e| {
            RegionFilter::parse(&e.region).is_ok_and(|f| {
                f.has_sites() || f.terms.iter().any(|t| matches!(t, Term::Static(Some(_))))
            })
        })
    }

    /// The library's form of the plan (`NUMALAB_PLAN`), site terms resolved
    /// in `objects` (the program first, then its libraries) and static
    /// symbols looked up there.
    pub fn library_form(&self, m: &Machine, objects: &[PathBuf]) -> Result<String, String> {
        let mut out = String::new();
        for (i, e) in self.entries.iter().enumerate() {
            let at = |why: String| format!("entry {i} ({}): {why}", e.region);
            let policy = MemoryPolicy::parse(m, &e.policy).map_err(at)?;
            out.push_str(&policy_line(&realize(m, &policy).map_err(at)?));
            if e.small {
                out.push_str("small\n");
            }
            let f = RegionFilter::parse(&e.region).map_err(at)?;
            let code = if f.has_sites() {
                filter::resolve_sites(&f, objects).map_err(at)?
            } else {
                Vec::new()
            };
            out.push_str(&f.library_form(&code));
            for t in &f.terms {
                if let Term::Static(Some(name)) = t {
                    let found = static_ranges(name, objects);
                    if found.is_empty() {
                        return Err(at(format!(
                            "static:{name} names no data symbol in {}",
                            objects
                                .first()
                                .map_or(String::new(), |o| o.display().to_string())
                        )));
                    }
                    for c in found {
                        out.push_str(&format!(
                            "static {} {} {}\n",
                            c.start,
                            c.end,
                            c.object.display()
                        ));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The plan of a whole-program policy the kernel cannot apply page by
/// page (`run --mem interleave:NODES@PAGES`): its stripes on every
/// allocation and mapping, and on the heaps as they grow.
pub fn stripes_form(pattern: &[(u32, u64)]) -> String {
    format!(
        "{}all\n",
        policy_line(&Realization::Chunks {
            pattern: pattern.to_vec()
        })
    )
}

/// How the library applies a policy: the kernel's mode where it places
/// page by page, stripes otherwise (weighted interleave included, so that
/// each entry keeps its own weights).
fn realize(m: &Machine, p: &MemoryPolicy) -> Result<Realization, String> {
    if matches!(p, MemoryPolicy::Remote { .. }) {
        return Err(format!(
            "{p} depends on the node of the CPU that touches a page, which a plan does not know; name the node (bind:N)"
        ));
    }
    p.realize(m, None, WeightedImpl::Emulate)
        .map_err(|e| e.to_string())
}

fn policy_line(r: &Realization) -> String {
    let list = |v: Vec<String>| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(",")
        }
    };
    match r {
        Realization::Kernel { mode, nodes } => format!(
            "policy {} {}\n",
            *mode as u32,
            list(nodes.iter().map(|n| n.to_string()).collect())
        ),
        Realization::KernelWeighted { nodes, .. } => format!(
            "policy {} {}\n",
            crate::placement::sys::Mode::WeightedInterleave as u32,
            list(nodes.iter().map(|n| n.to_string()).collect())
        ),
        Realization::Chunks { pattern } => format!(
            "policy chunks {}\n",
            list(pattern.iter().map(|(n, p)| format!("{n}:{p}")).collect())
        ),
    }
}

/// Refuses the terms a plan cannot place.
fn placeable(f: &RegionFilter) -> Result<(), String> {
    for a in f.alternatives().iter().filter(|a| a.len() > 1) {
        if let Some((_, t)) = a.iter().find(|(_, t)| matches!(t, Term::Static(_))) {
            return Err(format!(
                "{} is placed where its symbol is, whatever else is asked: give it alone, not joined by & to other terms",
                match t {
                    Term::Static(Some(n)) => format!("static:{n}"),
                    _ => "static".into(),
                }
            ));
        }
    }
    for t in &f.terms {
        match t {
            Term::Stack => {
                return Err("a stack cannot be placed by a plan (its pages are the thread's); pin the thread with --cpus".into())
            }
            Term::Static(None) => {
                return Err("'static' alone names every object's data; name one: static:SYMBOL".into())
            }
            _ => {}
        }
    }
    Ok(())
}

/// The address ranges of a data symbol in the first object that has it.
fn static_ranges(name: &str, objects: &[PathBuf]) -> Vec<CodeRange> {
    for o in objects {
        let found: Vec<CodeRange> = super::symbols::data_symbols(&o.to_string_lossy())
            .into_iter()
            .filter(|(n, _, size)| *size > 0 && filter::names_match(n, name))
            .map(|(_, value, size)| CodeRange {
                object: o.clone(),
                start: value,
                end: value + size,
                term: 0,
                function: None,
            })
            .collect();
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

/// The filter term that names a region: its allocation site's line (or
/// function), its static symbol, its file. `advise` names a profile's
/// regions by it too, so that its plans read as `profile`'s do.
pub fn selector(r: &RegionProfile) -> Option<String> {
    match r.kind.as_str() {
        "heap" | "mmap" | "small" => {
            // "function file:line (object)", "function (object+0xOFF)" or
            // "object+0xOFF": the line where debug information gives one,
            // else the call's address (a function may allocate several
            // regions; a call site allocates one).
            let mut words = r.site.split_whitespace();
            let first = words.next()?;
            let rest: Vec<&str> = words.collect();
            let is_line = |w: &&str| {
                w.rsplit_once(':')
                    .is_some_and(|(f, l)| !f.is_empty() && l.parse::<u32>().is_ok())
            };
            let is_call = |w: &str| {
                w.rsplit_once('+')
                    .is_some_and(|(o, off)| !o.is_empty() && off.starts_with("0x"))
            };
            if let Some(line) = rest.iter().copied().find(is_line) {
                return Some(format!("site:{line}"));
            }
            let call = rest
                .iter()
                .map(|w| w.trim_start_matches('(').trim_end_matches(')'))
                .chain(std::iter::once(first))
                .find(|w| is_call(w));
            match call {
                Some(c) => Some(format!("site:{c}")),
                None if !first.starts_with("0x") => Some(format!("site:{first}")),
                None => None,
            }
        }
        "static" if !r.site.starts_with('(') => Some(format!("static:{}", r.site)),
        "file" => r.object.as_ref().map(|o| format!("file:{o}")),
        _ => None,
    }
}

/// The remote share of a region's accesses before, and as estimated after
/// the policy: from its word counts (each CPU node's estimated share of
/// its accesses) where they are, else from its page-fault samples.
fn expected(r: &RegionProfile, policy: &MemoryPolicy) -> Option<Expected> {
    let before = r.remote_share?;
    // Each node's share of the pages the policy gives.
    let shares: Vec<(u32, f64)> = match policy {
        MemoryPolicy::Bind { nodes } | MemoryPolicy::Preferred { nodes } => {
            let k = nodes.len() as f64;
            nodes.iter().map(|n| (n, 1.0 / k)).collect()
        }
        MemoryPolicy::Interleave { nodes, .. } => {
            let k = nodes.len() as f64;
            nodes.iter().map(|n| (n, 1.0 / k)).collect()
        }
        MemoryPolicy::Weighted { weights, .. } => {
            let total: f64 = weights.iter().map(|w| w.1 as f64).sum();
            weights
                .iter()
                .map(|&(n, w)| (n, w as f64 / total))
                .collect()
        }
        _ => return None,
    };
    let ev = super::diagnose::evidence(r);
    let (by_cpu_node, samples, source): (BTreeMap<u32, f64>, u64, &str) =
        match r.estimate.as_ref().filter(|e| !e.cpu_nodes.is_empty()) {
            Some(e) => (e.cpu_nodes.clone(), e.placed_cells, "word counts"),
            None => {
                let counts: BTreeMap<u32, u64> = r
                    .accesses
                    .iter()
                    .map(|(c, row)| (*c, row.values().sum()))
                    .collect();
                let n: u64 = counts.values().sum();
                if n == 0 {
                    return None;
                }
                (
                    counts
                        .into_iter()
                        .map(|(c, k)| (c, k as f64 / n as f64))
                        .collect(),
                    n,
                    "page-fault samples",
                )
            }
        };
    if samples == 0 {
        return None;
    }
    let local: f64 = by_cpu_node
        .iter()
        .map(|(c, share)| share * shares.iter().find(|s| s.0 == *c).map_or(0.0, |s| s.1))
        .sum();
    let after = (1.0 - local).clamp(0.0, 1.0);
    // The effective samples behind the region's share, from its interval.
    let effective = ev.as_ref().map(|e| effective_samples(e.share, e.ci));
    let interval = |x: f64| effective.map(|n| crate::experiments::pdm::wilson(x, n.max(1.0)));
    Some(Expected {
        remote_share_before: before,
        remote_share_after: after,
        samples,
        before_interval: ev.as_ref().map(|e| e.ci),
        after_interval: interval(after),
        source: Some(source.into()),
    })
}

/// The number of draws a Wilson interval `ci` of `share` stands for (its
/// half width inverted), at least 1.
fn effective_samples(share: f64, ci: [f64; 2]) -> f64 {
    let half = ((ci[1] - ci[0]) / 2.0).max(1e-6);
    let z = 1.959964;
    let p = share.clamp(0.02, 0.98);
    (z * z * p * (1.0 - p) / (half * half)).max(1.0)
}

/// Where one entry's regions ended, from the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntryCheck {
    pub region: String,
    pub policy: String,
    /// Allocations and mappings it placed, and their bytes.
    pub regions: u64,
    pub bytes: u64,
    /// Their pages by node when freed or at exit (-1: never touched).
    pub pages_by_node: BTreeMap<i32, u64>,
    /// Of them, the pages of transparent huge pages, by node (where the
    /// kernel could say: Linux 6.7 and later); the check judges them in
    /// huge pages, the rest in pages.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub huge_pages_by_node: BTreeMap<i32, u64>,
    /// Whether the library turned transparent huge pages off on its
    /// regions (interleave and stripes place page by page).
    #[serde(default)]
    pub huge_pages_off: bool,
    /// The nodes the policy puts pages on, and each one's share.
    pub expected_shares: BTreeMap<u32, f64>,
    /// `placed`, `misplaced`, `nothing-matched` or `not-touched`.
    pub verdict: String,
    pub detail: String,
}

/// `run --plan --verify`: every entry checked, and what the library saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanCheck {
    pub entries: Vec<EntryCheck>,
    /// The program's own `mbind` calls on planned regions, skipped.
    pub program_mbinds_skipped: u64,
    /// The plan's `mbind` calls the kernel refused, and the first errno.
    pub refused: u64,
    pub first_errno: Option<i32>,
    /// Ranges interleaved page by page instead of striped, because the
    /// stripes laid reached half of `vm.max_map_count` (docs/plan.md).
    #[serde(default)]
    pub stripes_folded: u64,
    /// Small allocations an entry with `small` selected that went to the
    /// heap, their entry's pool (64 MiB) being full.
    #[serde(default)]
    pub small_spilled: u64,
    /// Processes that ran with the plan (each writes its end).
    pub processes: u64,
    /// Regions whose pages were read from the command's mappings at exit,
    /// because no process reported its end (Go's runtime exits without
    /// libc's exit, so the library never counts its regions' pages).
    #[serde(default)]
    pub regions_read_at_exit: u64,
    /// Times the program closed or took over the descriptor of the
    /// library's record file (the library opened it again each time;
    /// records made meanwhile may be missing from this check).
    #[serde(default)]
    pub channel_reopened: u64,
}

/// The command's run time without and with the plan (`profile --plan
/// --repeat N`): unprofiled runs, interleaved, compared by the rank test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunTimes {
    /// Wall-clock seconds of each run, in the order run.
    pub without_s: Vec<f64>,
    pub with_s: Vec<f64>,
    /// With the plan over without (a ratio below 1: faster with it).
    pub comparison: Option<crate::measure::compare::RankComparison>,
    /// "the plan makes the command faster": holds, does not hold (slower),
    /// or cannot tell.
    pub verdict: crate::measure::compare::Verdict,
    pub rule: String,
}

impl RunTimes {
    /// Judges the runs.
    pub fn judge(without_s: Vec<f64>, with_s: Vec<f64>) -> RunTimes {
        use crate::measure::compare::{rank_compare, Verdict, RULE};
        let comparison = rank_compare(&with_s, &without_s);
        let verdict = comparison
            .as_ref()
            .map_or(Verdict::CannotTell, |c| c.a_smaller());
        RunTimes {
            without_s,
            with_s,
            comparison,
            verdict,
            rule: RULE.into(),
        }
    }
}

/// How far a node's share of an interleaved region may be from the
/// policy's before the entry is "misplaced": 5 points, or one stripe
/// round of the region when that is more (a small region cannot be even).
const SHARE_SLACK: f64 = 0.05;

/// Checks a plan against the library's records of a run, and, where the
/// program never reported its end (no process wrote one), against the
/// command's mappings as the kernel gave them at exit (`at_exit`).
pub fn verify(
    m: &Machine,
    plan: &Plan,
    records: &[Record],
    at_exit: Option<&crate::placement::verify::ProcessPlacement>,
) -> PlanCheck {
    let mut entries: Vec<EntryCheck> = plan
        .entries
        .iter()
        .map(|e| {
            let expected_shares = MemoryPolicy::parse(m, &e.policy)
                .ok()
                .map(|p| shares_of(m, &p))
                .unwrap_or_default();
            EntryCheck {
                region: e.region.clone(),
                policy: e.policy.clone(),
                regions: 0,
                bytes: 0,
                pages_by_node: BTreeMap::new(),
                huge_pages_by_node: BTreeMap::new(),
                huge_pages_off: false,
                expected_shares,
                verdict: String::new(),
                detail: String::new(),
            }
        })
        .collect();
    let mut open: BTreeMap<u64, usize> = BTreeMap::new();
    let mut check = PlanCheck {
        entries: Vec::new(),
        program_mbinds_skipped: 0,
        refused: 0,
        first_errno: None,
        stripes_folded: 0,
        small_spilled: 0,
        processes: 0,
        regions_read_at_exit: 0,
        channel_reopened: 0,
    };
    // Regions whose pages the library reported (freed, or at exit).
    let mut counted: std::collections::BTreeSet<u64> = std::collections::BTreeSet::new();
    for r in records {
        match r.kind {
            Kind::Planned => {
                let i = r.node.max(0) as usize;
                if let Some(e) = entries.get_mut(i) {
                    e.regions += 1;
                    e.bytes += r.size;
                    e.huge_pages_off |= r.aux == 1;
                    open.insert(r.addr, i);
                }
            }
            Kind::PlanPages => {
                counted.insert(r.addr);
                if let Some(e) = open.get(&r.addr).and_then(|&i| entries.get_mut(i)) {
                    let into = if r.aux == 1 {
                        &mut e.huge_pages_by_node
                    } else {
                        &mut e.pages_by_node
                    };
                    *into.entry(r.node).or_default() += r.size;
                }
            }
            Kind::PlanEnd => {
                let Some(end) = numalab_profile_abi::events::PlanEnd::from_record(r) else {
                    continue;
                };
                check.processes += 1;
                check.program_mbinds_skipped += end.program_mbinds_skipped;
                check.refused += end.refused;
                check.stripes_folded += u64::from(end.stripes_folded);
                check.channel_reopened += u64::from(end.channel_reopened);
                check.small_spilled += u64::from(end.small_spilled.unwrap_or(0));
                if end.refused > 0 && check.first_errno.is_none() {
                    check.first_errno = Some(end.first_errno);
                }
            }
            _ => {}
        }
    }
    if check.processes == 0 {
        if let Some(p) = at_exit {
            let uncounted: Vec<(u64, u64, usize)> = records
                .iter()
                .filter(|r| r.kind == Kind::Planned && !counted.contains(&r.addr))
                .filter_map(|r| open.get(&r.addr).map(|&i| (r.addr, r.size, i)))
                .collect();
            check.regions_read_at_exit = pages_at_exit(&mut entries, &uncounted, p);
        }
    }
    for e in &mut entries {
        judge(e);
    }
    check.entries = entries;
    check
}

/// Adds to each entry the pages the kernel showed at exit in the mappings
/// that start inside its regions (`(address, bytes, entry)`, in the order
/// placed): a placed region is a mapping of its own (its policy split it
/// from its neighbours) or the start of one that merged with a neighbour
/// of the same policy. A mapping counts once, for the region placed last
/// at the nearest start below it (a runtime maps over its own reservations
/// again). Returns how many regions got pages.
fn pages_at_exit(
    entries: &mut [EntryCheck],
    regions: &[(u64, u64, usize)],
    at_exit: &crate::placement::verify::ProcessPlacement,
) -> u64 {
    let mut by_start: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
    for &(addr, size, i) in regions {
        by_start.insert(addr, (size, i));
    }
    let mut with_pages = std::collections::BTreeSet::new();
    for m in &at_exit.mappings {
        let Ok(start) = u64::from_str_radix(&m.address, 16) else {
            continue;
        };
        let Some((&addr, &(size, i))) = by_start.range(..=start).next_back() else {
            continue;
        };
        let Some(e) = entries
            .get_mut(i)
            .filter(|_| start < addr.saturating_add(size))
        else {
            continue;
        };
        // numa_maps counts in the mapping's page size; the check counts in
        // 4 KiB pages.
        let per = (m.page_size / 4096).max(1);
        for (n, k) in &m.pages_by_node {
            *e.pages_by_node.entry(*n as i32).or_default() += k * per;
            if *k > 0 {
                with_pages.insert(addr);
            }
        }
    }
    with_pages.len() as u64
}

/// Each node's share of the pages a policy gives (empty: the policy does
/// not say, e.g. first touch).
fn shares_of(m: &Machine, p: &MemoryPolicy) -> BTreeMap<u32, f64> {
    match p.realize(m, None, WeightedImpl::Emulate) {
        Ok(Realization::Kernel { nodes, .. }) if !nodes.is_empty() => {
            let k = nodes.len() as f64;
            nodes.iter().map(|n| (n, 1.0 / k)).collect()
        }
        Ok(Realization::Chunks { pattern }) => {
            let total: u64 = pattern.iter().map(|p| p.1).sum();
            let mut s = BTreeMap::new();
            for (n, pages) in pattern {
                *s.entry(n).or_insert(0.0) += pages as f64 / total as f64;
            }
            s
        }
        _ => BTreeMap::new(),
    }
}

/// Pages of a transparent huge page (x86_64's 2 MiB over 4 KiB).
const HUGE_PAGES: u64 = 512;

/// The unit the kernel placed an entry's pages in, for the check's words.
fn unit(e: &EntryCheck) -> String {
    let huge: u64 = e.huge_pages_by_node.values().sum();
    if huge == 0 {
        let off = if e.huge_pages_off {
            " (huge pages turned off on the region)"
        } else {
            ""
        };
        format!("judged in 4 KiB pages{off}")
    } else {
        format!(
            "{huge} of the pages in 2 MiB huge pages, judged in huge pages, the rest in 4 KiB pages"
        )
    }
}

/// The node furthest from the policy's share, when further than the
/// kernel's unit allows: small pages and huge pages are each placed in
/// their own unit (an interleave of 7 huge pages over two nodes is 4 and
/// 3), so each may be off by one unit a node, and the share by
/// [`SHARE_SLACK`] on top (a stripe round of a small region). Returns
/// (node, its share, the policy's, the distance).
fn uneven(e: &EntryCheck) -> Option<(u32, f64, f64, f64)> {
    let present: u64 = e
        .pages_by_node
        .iter()
        .filter(|(n, _)| **n >= 0)
        .map(|(_, k)| *k)
        .sum();
    if present == 0 {
        return None;
    }
    let huge_present: u64 = e.huge_pages_by_node.values().sum();
    let units = |pages: u64, unit: u64| pages as f64 / unit as f64;
    e.expected_shares
        .iter()
        .map(|(n, want)| {
            let all = e.pages_by_node.get(&(*n as i32)).copied().unwrap_or(0);
            let huge = e.huge_pages_by_node.get(&(*n as i32)).copied().unwrap_or(0);
            let small = all.saturating_sub(huge);
            let small_present = present.saturating_sub(huge_present);
            // How far each kind is from the policy, in its own units,
            // less the one unit the kernel's rounding allows.
            let small_off = (units(small, 1) - want * units(small_present, 1)).abs() - 1.0;
            let huge_off =
                (units(huge, HUGE_PAGES) - want * units(huge_present, HUGE_PAGES)).abs() - 1.0;
            let excess = small_off.max(0.0) + huge_off.max(0.0) * HUGE_PAGES as f64;
            let got = all as f64 / present as f64;
            (*n, got, *want, excess / present as f64)
        })
        .filter(|w| w.3 > SHARE_SLACK)
        .max_by(|a, b| a.3.total_cmp(&b.3))
}

fn judge(e: &mut EntryCheck) {
    let present: u64 = e
        .pages_by_node
        .iter()
        .filter(|(n, _)| **n >= 0)
        .map(|(_, k)| *k)
        .sum();
    if e.regions == 0 {
        e.verdict = "nothing-matched".into();
        e.detail = "no allocation or mapping of the run matched the region".into();
        return;
    }
    if present == 0 {
        e.verdict = "not-touched".into();
        e.detail = format!(
            "{} region(s) placed, but none of their pages was present when freed or at exit",
            e.regions
        );
        return;
    }
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let outside: u64 = e
        .pages_by_node
        .iter()
        .filter(|(n, _)| **n >= 0 && !e.expected_shares.contains_key(&(**n as u32)))
        .map(|(_, k)| *k)
        .sum();
    // Policies that prefer may spill: only the nodes are judged.
    let preferred = e.policy.starts_with("preferred");
    if e.expected_shares.is_empty() {
        e.verdict = "placed".into();
        e.detail = format!("{present} pages present; the policy names no node to check");
    } else if outside > 0 {
        e.verdict = "misplaced".into();
        e.detail = format!(
            "{outside} of {present} present pages ({}) on nodes the policy does not name",
            pct(outside as f64 / present as f64)
        );
    } else if let Some((n, got, want, _)) = uneven(e).filter(|_| !preferred) {
        e.verdict = "misplaced".into();
        e.detail = format!(
            "node {n} holds {} of the {present} present pages, the policy {} ({} points off, {})",
            pct(got),
            pct(want),
            ((got - want).abs() * 100.0).round(),
            unit(e)
        );
    } else {
        e.verdict = "placed".into();
        let spread: Vec<String> = e
            .pages_by_node
            .iter()
            .filter(|(n, _)| **n >= 0)
            .map(|(n, k)| format!("node {n}: {k}"))
            .collect();
        e.detail = format!(
            "all {present} present pages on the policy's nodes ({}), {}",
            spread.join(", "),
            unit(e)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quartet() -> Machine {
        crate::machine::fixture("qemu-quartet-4n2c-ring.xml")
    }

    fn region(kind: &str, site: &str, accesses: &[(u32, u32, u64)]) -> RegionProfile {
        let mut r: RegionProfile = serde_json::from_value(serde_json::json!({
            "kind": kind, "site": site, "sampled": true, "object": null, "thread": null,
            "stack": [], "allocations": 1, "bytes": 1 << 20, "sampled_allocations": 0,
            "first_address": 0, "samples": 0, "reads": 0, "writes": 0, "unknown_access": 0,
            "accesses": {}, "remote_share": null, "distance_ratio": null, "latency_cost": null,
            "pages_by_node": {}, "threads": {}, "first_touch": null, "pages_over_time": [],
            "page_map": null
        }))
        .unwrap();
        let mut remote = 0;
        for &(c, n, k) in accesses {
            *r.accesses.entry(c).or_default().entry(n).or_default() += k;
            r.samples += k;
            if c != n {
                remote += k;
            }
        }
        r.remote_share = Some(remote as f64 / r.samples.max(1) as f64);
        r
    }

    #[test]
    fn regions_are_named_by_line_function_symbol_or_file() {
        let r = region("heap", "main profile_truth.c:172 (profile_truth)", &[]);
        assert_eq!(selector(&r).as_deref(), Some("site:profile_truth.c:172"));
        let r = region("mmap", "init_arrays", &[]);
        assert_eq!(selector(&r).as_deref(), Some("site:init_arrays"));
        assert_eq!(selector(&region("heap", "0x4011a6", &[])), None);
        // Without debug information: the call's address.
        let r = region("heap", "main (profile_truth+0x17b6)", &[]);
        assert_eq!(selector(&r).as_deref(), Some("site:profile_truth+0x17b6"));
        let r = region("heap", "prog+0x11a6", &[]);
        assert_eq!(selector(&r).as_deref(), Some("site:prog+0x11a6"));
        let r = region("static", "static_table", &[]);
        assert_eq!(selector(&r).as_deref(), Some("static:static_table"));
        assert_eq!(
            selector(&region("static", "(other static data)", &[])),
            None
        );
        assert_eq!(selector(&region("stack", "stack of thread 5", &[])), None);
        let mut f = region("file", "main x.c:3", &[]);
        f.object = Some("/srv/data.db".into());
        assert_eq!(selector(&f).as_deref(), Some("file:/srv/data.db"));
    }

    #[test]
    fn the_expected_share_follows_the_accessing_nodes() {
        let m = quartet();
        // Pages on node 0, read equally from the four nodes: 75% remote.
        let a = region(
            "heap",
            "main t.c:1",
            &[(0, 0, 100), (1, 0, 100), (2, 0, 100), (3, 0, 100)],
        );
        let e = expected(&a, &MemoryPolicy::parse(&m, "interleave:0-3").unwrap()).unwrap();
        assert_eq!(
            (e.remote_share_before, e.remote_share_after, e.samples),
            (0.75, 0.75, 400)
        );
        // Interleave over two of the four: the other two stay remote.
        let e = expected(&a, &MemoryPolicy::parse(&m, "interleave:0-1").unwrap()).unwrap();
        assert!((e.remote_share_after - 0.75).abs() < 1e-12);
        // Pages on node 3, read from node 0 only: bind to 0 makes it local.
        let c = region("mmap", "main t.c:2", &[(0, 3, 300)]);
        let e = expected(&c, &MemoryPolicy::parse(&m, "bind:0").unwrap()).unwrap();
        assert_eq!((e.remote_share_before, e.remote_share_after), (1.0, 0.0));
        // Weighted 3:1 over 0 and 1, read from both equally: 1 - (3/4 + 1/4)/2.
        let b = region("heap", "main t.c:3", &[(0, 2, 50), (1, 2, 50)]);
        let e = expected(&b, &MemoryPolicy::parse(&m, "weighted:0=3,1=1").unwrap()).unwrap();
        assert!((e.remote_share_after - 0.5).abs() < 1e-12);
        assert_eq!(expected(&b, &MemoryPolicy::Local), None);
    }

    fn diagnosis(kind: &str, region: usize, accessing: &[u32]) -> Diagnosis {
        Diagnosis {
            kind: kind.into(),
            region: Some(region),
            thread: None,
            site: String::new(),
            pages_node: 0,
            pages_share: 1.0,
            accessing_nodes: accessing.to_vec(),
            samples: 100,
            remote_share: 0.75,
            remote_ci: [0.6, 0.8],
            source: "word counts".into(),
            text: format!("{kind} text"),
            fix: String::new(),
        }
    }

    #[test]
    fn diagnoses_with_a_placement_fix_become_entries() {
        let m = quartet();
        let regions = vec![
            region(
                "heap",
                "main t.c:10",
                &[(0, 0, 25), (1, 0, 25), (2, 0, 25), (3, 0, 25)],
            ),
            region("mmap", "main t.c:12", &[(0, 3, 40)]),
            region("heap", "0x401122", &[(0, 3, 40)]),
            region("static", "table", &[(2, 4, 40)]),
            // A second allocation on line 12: one entry already names it.
            region("mmap", "main t.c:12", &[(0, 3, 40)]),
        ];
        let d = vec![
            diagnosis("one-node-shared", 0, &[0, 1, 2, 3]),
            diagnosis("remote-bound", 1, &[0]),
            diagnosis("false-sharing", 1, &[0, 1]),
            diagnosis("remote-bound", 2, &[0]),
            diagnosis("cpuless-hot", 3, &[2]),
            diagnosis("first-touched-elsewhere", 4, &[0]),
        ];
        let p = Plan::from_regions(&m, &regions, vec!["./t".into()], &d);
        let got: Vec<(&str, &str)> = p
            .entries
            .iter()
            .map(|e| (e.region.as_str(), e.policy.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("site:t.c:10", "interleave:0-3"),
                ("site:t.c:12", "bind:0"),
                ("static:table", "preferred:2")
            ]
        );
        assert_eq!(
            p.entries[1].expected.as_ref().unwrap().remote_share_after,
            0.0
        );
        assert_eq!(
            p.entries[0].reason.as_deref(),
            Some("one-node-shared: one-node-shared text")
        );
        // What it writes reads back as a plan.
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(Plan::parse(&m, &text).unwrap(), p);
    }

    #[test]
    fn policies_reach_the_library_as_modes_or_stripes() {
        let m = quartet();
        let line =
            |p: &str| policy_line(&realize(&m, &MemoryPolicy::parse(&m, p).unwrap()).unwrap());
        assert_eq!(line("bind:0"), "policy 2 0\n");
        assert_eq!(line("interleave:0-3"), "policy 3 0,1,2,3\n");
        assert_eq!(line("preferred:1"), "policy 1 1\n");
        assert_eq!(line("local"), "policy 4 -\n");
        assert_eq!(line("first-touch"), "policy 0 -\n");
        assert_eq!(line("interleave:0,2@8"), "policy chunks 0:8,2:8\n");
        assert_eq!(line("weighted:0=3,1=1"), "policy chunks 0:3,1:1\n");
        assert_eq!(
            stripes_form(&[(0, 8), (1, 8)]),
            "policy chunks 0:8,1:8\nall\n"
        );
        let remote = realize(&m, &MemoryPolicy::Remote { far: false }).unwrap_err();
        assert!(remote.contains("name the node (bind:N)"), "{remote}");
    }

    #[test]
    fn plans_are_checked_entry_by_entry() {
        let m = quartet();
        let ok = r#"{"schema":"numalab-plan/1","entries":[{"region":"site:t.c:1","policy":"interleave:0-3"},{"region":"heap,size>1M","policy":"bind:0"}]}"#;
        assert_eq!(Plan::parse(&m, ok).unwrap().entries.len(), 2);
        let bad = |text: &str, want: &str| {
            let e = Plan::parse(&m, text).unwrap_err();
            assert!(e.contains(want), "{e}");
        };
        bad(
            r#"{"schema":"numalab-plan/9","entries":[]}"#,
            "valid: numalab-plan/1",
        );
        bad(r#"{"schema":"numalab-plan/1","entries":[]}"#, "no entries");
        bad(
            r#"{"schema":"numalab-plan/1","entries":[{"region":"hep","policy":"bind:0"}]}"#,
            "entry 0 (hep)",
        );
        bad(
            r#"{"schema":"numalab-plan/1","entries":[{"region":"heap","policy":"bind:9"}]}"#,
            "entry 0 (heap)",
        );
        bad(
            r#"{"schema":"numalab-plan/1","entries":[{"region":"stack","policy":"bind:0"}]}"#,
            "a stack cannot be placed",
        );
        bad(
            r#"{"schema":"numalab-plan/1","entries":[{"region":"heap","policy":"remote"}]}"#,
            "name the node",
        );
        bad(
            r#"{"schema":"numalab-plan/1","entries":[{"region":"static:table&size>1M","policy":"bind:0"}]}"#,
            "entry 0 (static:table&size>1M): static:table is placed where its symbol is, whatever else is asked: give it alone",
        );
        // Terms joined by & reach the library as one alternative.
        let joined = r#"{"schema":"numalab-plan/1","entries":[{"region":"heap&size>1M,mmap","policy":"bind:1"}]}"#;
        let plan = Plan::parse(&m, joined).unwrap();
        assert_eq!(
            plan.library_form(&m, &[]).unwrap(),
            "policy 2 1\nheap\n& size 1048577 18446744073709551615\nmmap\n"
        );
        bad(
            r#"{"schema":"numalab-plan/1","entries":[{"region":"heap","polcy":"bind:0"}]}"#,
            "unknown field `polcy`",
        );
        bad("[1,2]", "not a plan");
        let many: Vec<String> = (0..65)
            .map(|_| r#"{"region":"heap","policy":"bind:0"}"#.to_string())
            .collect();
        bad(
            &format!(
                r#"{{"schema":"numalab-plan/1","entries":[{}]}}"#,
                many.join(",")
            ),
            "65 entries is too many (at most 64)",
        );
    }

    fn rec(kind: Kind, node: i32, addr: u64, size: u64) -> Record {
        Record {
            kind,
            tid: 1,
            cpu: u32::MAX,
            node,
            flags: 0,
            addr,
            size,
            time_ns: 0,
            aux: 0,
        }
    }

    #[test]
    fn run_times_are_judged_by_the_rank_test() {
        use crate::measure::compare::Verdict;
        let faster = RunTimes::judge(
            vec![2.0, 2.1, 2.05, 2.2, 2.15],
            vec![1.0, 1.1, 1.05, 1.2, 1.15],
        );
        assert_eq!(faster.verdict, Verdict::Holds);
        assert!(faster.comparison.unwrap().ratio < 0.6);
        let noise = RunTimes::judge(vec![1.0, 1.2, 1.1], vec![1.1, 1.0, 1.2]);
        assert_eq!(noise.verdict, Verdict::CannotTell);
        let none = RunTimes::judge(vec![], vec![1.0]);
        assert_eq!((none.verdict, none.comparison), (Verdict::CannotTell, None));
    }

    /// A plan whose entry i places the allocations of line i + 1 of t.c
    /// with `policies[i]`.
    fn sites_plan(m: &Machine, policies: &[&str]) -> Plan {
        let entries: Vec<String> = policies
            .iter()
            .enumerate()
            .map(|(i, p)| format!(r#"{{"region":"site:t.c:{}","policy":"{p}"}}"#, i + 1))
            .collect();
        let text = format!(
            r#"{{"schema":"numalab-plan/1","entries":[{}]}}"#,
            entries.join(",")
        );
        Plan::parse(m, &text).unwrap()
    }

    #[test]
    fn interleaved_huge_pages_are_judged_in_huge_pages() {
        let m = quartet();
        let plan = sites_plan(&m, &["interleave:0-1"; 3]);
        let huge = |node, addr, n: u64| Record {
            aux: 1,
            ..rec(Kind::PlanPages, node, addr, n * HUGE_PAGES)
        };
        let records = vec![
            // 7 huge pages interleaved as the kernel does, 4 and 3: 57%
            // against 50%, 7 points, yet one huge page of rounding.
            rec(Kind::Planned, 0, 0x20_0000, 7 << 21),
            rec(Kind::PlanPages, 0, 0x20_0000, 4 * HUGE_PAGES),
            rec(Kind::PlanPages, 1, 0x20_0000, 3 * HUGE_PAGES),
            huge(0, 0x20_0000, 4),
            huge(1, 0x20_0000, 3),
            // 7 huge pages 6 and 1: off by more than a unit (both nodes
            // equally; the check names the last).
            rec(Kind::Planned, 1, 0x200_0000, 7 << 21),
            rec(Kind::PlanPages, 0, 0x200_0000, 6 * HUGE_PAGES),
            rec(Kind::PlanPages, 1, 0x200_0000, HUGE_PAGES),
            huge(0, 0x200_0000, 6),
            huge(1, 0x200_0000, 1),
            // The same 4 and 3 split in small pages, with huge pages
            // turned off on the region: judged page by page, misplaced.
            Record {
                aux: 1,
                ..rec(Kind::Planned, 2, 0x400_0000, 7 << 21)
            },
            rec(Kind::PlanPages, 0, 0x400_0000, 4 * HUGE_PAGES),
            rec(Kind::PlanPages, 1, 0x400_0000, 3 * HUGE_PAGES),
        ];
        let c = verify(&m, &plan, &records, None);
        let verdicts: Vec<&str> = c.entries.iter().map(|e| e.verdict.as_str()).collect();
        assert_eq!(verdicts, ["placed", "misplaced", "misplaced"]);
        assert_eq!(
            c.entries[0].detail,
            "all 3584 present pages on the policy's nodes (node 0: 2048, node 1: 1536), \
             3584 of the pages in 2 MiB huge pages, judged in huge pages, the rest in 4 KiB pages"
        );
        assert_eq!(
            c.entries[1].detail,
            "node 1 holds 14% of the 3584 present pages, the policy 50% (36 points off, \
             3584 of the pages in 2 MiB huge pages, judged in huge pages, the rest in 4 KiB pages)"
        );
        assert_eq!(
            c.entries[2].detail,
            "node 1 holds 43% of the 3584 present pages, the policy 50% (7 points off, \
             judged in 4 KiB pages (huge pages turned off on the region))"
        );
    }

    #[test]
    fn the_kernels_pages_decide_each_entry() {
        let m = quartet();
        let plan = sites_plan(
            &m,
            &[
                "interleave:0-3",
                "bind:0",
                "bind:1",
                "interleave:0-1",
                "bind:2",
            ],
        );
        let records = vec![
            rec(Kind::Planned, 0, 0x1000, 4096 * 400),
            rec(Kind::Planned, 1, 0x900000, 4096 * 10),
            rec(Kind::Planned, 2, 0xa00000, 4096 * 10),
            rec(Kind::Planned, 3, 0xb00000, 4096 * 10),
            rec(Kind::PlanPages, 0, 0x1000, 100),
            rec(Kind::PlanPages, 1, 0x1000, 100),
            rec(Kind::PlanPages, 2, 0x1000, 100),
            rec(Kind::PlanPages, 3, 0x1000, 100),
            rec(Kind::PlanPages, 0, 0x900000, 10),
            rec(Kind::PlanPages, 0, 0xa00000, 9),
            rec(Kind::PlanPages, 1, 0xa00000, 1),
            rec(Kind::PlanPages, 0, 0xb00000, 9),
            rec(Kind::PlanPages, 1, 0xb00000, 1),
            Record {
                flags: 2,
                ..rec(Kind::PlanEnd, 22, 3, 1)
            },
        ];
        let c = verify(&m, &plan, &records, None);
        let verdicts: Vec<&str> = c.entries.iter().map(|e| e.verdict.as_str()).collect();
        assert_eq!(
            verdicts,
            [
                "placed",
                "placed",
                "misplaced",
                "misplaced",
                "nothing-matched"
            ]
        );
        assert_eq!(c.entries[0].pages_by_node.values().sum::<u64>(), 400);
        assert!(
            c.entries[2]
                .detail
                .starts_with("9 of 10 present pages (90%) on nodes the policy does not name"),
            "{}",
            c.entries[2].detail
        );
        assert!(
            c.entries[3].detail.contains(
                "of the 10 present pages, the policy 50% (40 points off, judged in 4 KiB pages)"
            ),
            "{}",
            c.entries[3].detail
        );
        assert_eq!(
            (
                c.program_mbinds_skipped,
                c.refused,
                c.first_errno,
                c.stripes_folded,
                c.processes
            ),
            (3, 1, Some(22), 2, 1)
        );
        // How the folded stripes are worded: numalab-report's views::plan
        // tests.
    }

    #[test]
    fn without_a_reported_end_the_pages_come_from_the_mappings_at_exit() {
        let m = quartet();
        let plan = sites_plan(&m, &["interleave:0-1", "bind:2"]);
        // Go's runtime: regions placed, mapped over again at one address,
        // never freed, and no end reported (no libc exit).
        let records = vec![
            rec(Kind::Planned, 0, 0x100_0000, 64 << 20),
            rec(Kind::Planned, 0, 0x100_0000, 64 << 20),
            rec(Kind::Planned, 1, 0x800_0000, 1 << 20),
        ];
        let maps = crate::placement::verify::parse_numa_maps(
            "01000000 interleave:0-1 anon=100 dirty=100 N0=50 N1=50 kernelpagesize_kB=4\n\
             01400000 interleave:0-1 anon=20 dirty=20 N0=10 N1=10 kernelpagesize_kB=4\n\
             05000000 default anon=7 dirty=7 N3=7 kernelpagesize_kB=4\n\
             08000000 bind:2 anon=0 dirty=0 kernelpagesize_kB=4\n",
        );
        let at_exit = crate::placement::verify::ProcessPlacement {
            pid: 1,
            program: "go".into(),
            threads: Vec::new(),
            mappings: maps,
            bytes_by_node: BTreeMap::new(),
            private_bytes_by_node: BTreeMap::new(),
            process_policy: None,
        };
        let c = verify(&m, &plan, &records, Some(&at_exit));
        // Each mapping once (the region placed twice), the one past the
        // region's end not at all.
        assert_eq!(
            c.entries[0].pages_by_node,
            BTreeMap::from([(0, 60), (1, 60)])
        );
        let verdicts: Vec<&str> = c.entries.iter().map(|e| e.verdict.as_str()).collect();
        assert_eq!(verdicts, ["placed", "not-touched"]);
        assert_eq!(c.regions_read_at_exit, 1);
        // With an end reported, the library's counts alone decide.
        let mut ended = records.clone();
        ended.push(rec(Kind::PlanEnd, 0, 0, 1));
        let c = verify(&m, &plan, &ended, Some(&at_exit));
        assert_eq!(c.entries[0].verdict, "not-touched");
        assert_eq!(c.regions_read_at_exit, 0);
    }
}
