//! The plan of a sweep over its thread counts, refused before it is built
//! when too large, and the order that covers the most hop classes first.

use super::super::SweepRequest;
use super::fold::thread_orders;
use super::{PlannedCase, SweepSpace, MAX_FOLDED_CLASSES, MAX_PLANNED_CASES};
use crate::machine::Machine;
use std::collections::{BTreeMap, BTreeSet};

/// The cases a sweep would run for each thread count, in order, without
/// running them: (threads, total cases, planned cases).
///
/// Refuses, before building anything, a plan of more than
/// [`MAX_PLANNED_CASES`] cases over all thread counts (or, with `--every-case`,
/// more than `req.full_limit` for one thread count), saying how many it
/// would hold and what to narrow. Folded classes are counted without
/// enumerating ([`SweepSpace::class_bounds`]); when those bounds straddle
/// the limit, the classes of thread sequences are counted
/// ([`SweepSpace::sequence_classes`]), and only when the bounds still
/// straddle it are the classes enumerated, never more than the limit.
pub fn plan(
    space: &SweepSpace,
    req: &SweepRequest,
) -> Result<Vec<(usize, u64, Vec<PlannedCase>)>, String> {
    let mut out = Vec::new();
    let mut planned: u64 = 0;
    for &t in &req.threads {
        let left = MAX_PLANNED_CASES - planned;
        let total = space.total_cases(t);
        let cases = if req.full {
            if total > left as u128 && left < req.full_limit {
                return Err(too_many(
                    space,
                    t,
                    &format!("{} cases", count(total)),
                    planned,
                ));
            }
            space.full(t, req.full_limit)?
        } else {
            folded_within(space, t, left, planned)?
        };
        let total = u64::try_from(total).map_err(|_| {
            format!(
                "{t} thread(s): {} cases, more than a sweep can count (2^64); use fewer --thread-counts or a smaller --cpus or --mem-nodes set",
                count(total)
            )
        })?;
        planned += cases.len() as u64;
        out.push((t, total, cases));
    }
    Ok(out)
}

/// The classes of `threads` threads when they fit in `left` more cases.
fn folded_within(
    space: &SweepSpace,
    threads: usize,
    left: u64,
    planned: u64,
) -> Result<Vec<PlannedCase>, String> {
    let (lower, upper) = space.class_bounds(threads);
    let total = count(space.total_cases(threads));
    let left = left.min(MAX_FOLDED_CLASSES.saturating_sub(planned));
    let too_many = |space: &SweepSpace, threads: usize, what: &str, planned: u64| {
        refused(space, threads, what, planned, MAX_FOLDED_CLASSES, "classes")
    };
    // Bounds that straddle the limit are narrowed by counting the classes
    // of thread sequences, which costs a walk to the last thread but not
    // the canonical form of every case (seconds on a 64-node machine).
    let (lower, upper) = if lower <= left as u128 && upper > left as u128 {
        let orders = thread_orders(threads);
        match space.sequence_classes(threads, (left as u128).saturating_mul(orders)) {
            None => {
                let classes = format!("{total} cases fold into more than {left} classes");
                return Err(too_many(space, threads, &classes, planned));
            }
            Some(s) if space.symmetry_held() => (lower.max(s.div_ceil(orders)), upper.min(s)),
            Some(s) => (lower.max(s.div_ceil(orders)), upper),
        }
    } else {
        (lower, upper)
    };
    if lower > left as u128 {
        let classes = if lower == upper {
            format!("{total} cases fold into {} classes", count(lower))
        } else {
            format!(
                "{total} cases fold into at least {} classes (at most {})",
                count(lower),
                count(upper)
            )
        };
        return Err(too_many(space, threads, &classes, planned));
    }
    space.folded_at_most(threads, left as usize).ok_or_else(|| {
        let classes = format!("{total} cases fold into more than {left} classes");
        too_many(space, threads, &classes, planned)
    })
}

/// The one line refusing a plan too large to build: what it would hold, the
/// limit, and what to narrow.
fn too_many(space: &SweepSpace, threads: usize, what: &str, planned: u64) -> String {
    refused(space, threads, what, planned, MAX_PLANNED_CASES, "cases")
}

/// [`too_many`] against `limit` `unit` (cases, or folded classes).
fn refused(
    space: &SweepSpace,
    threads: usize,
    what: &str,
    planned: u64,
    limit: u64,
    unit: &str,
) -> String {
    let others = if planned > 0 {
        format!(" besides the {planned} of the thread counts before")
    } else {
        String::new()
    };
    format!(
        "sweep plan too large: {threads} thread(s) on {} CPUs x {} memory nodes x {} access(es): {what}{others}, more than the {limit} {unit} a sweep may plan; use fewer --thread-counts, a smaller --cpus or --mem-nodes set, or one --access",
        space.cpus.len(),
        space.mem_nodes.len(),
        space.accesses.len()
    )
}

/// A count for a message; the saturated maximum is said as a bound.
fn count(n: u128) -> String {
    if n == u128::MAX {
        "more than 10^38".into()
    } else {
        n.to_string()
    }
}

/// How many hop classes `cases` cover.
/// What a sweep would run, counted without running it: per thread count,
/// the cases there are, the cases planned (one per symmetry class, or
/// all with `full`) and the hop classes among them (the fewest cases a
/// budget-cut sweep still runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseCount {
    pub threads: usize,
    pub total: u64,
    pub planned: usize,
    pub hop_classes: usize,
}

/// The [`CaseCount`]s of `req` on `m`.
pub fn case_counts(m: &Machine, req: &SweepRequest) -> Result<Vec<CaseCount>, String> {
    let space = SweepSpace::new(m, &req.cpus, &req.mem_nodes, &req.accesses)?;
    Ok(plan(&space, req)?
        .into_iter()
        .map(|(threads, total, cases)| CaseCount {
            threads,
            total,
            planned: cases.len(),
            hop_classes: hop_class_count(&cases).max(1),
        })
        .collect())
}

pub(in crate::experiments::sweep) fn hop_class_count(cases: &[PlannedCase]) -> usize {
    cases
        .iter()
        .map(|c| c.hop_class())
        .collect::<BTreeSet<String>>()
        .len()
}

/// Orders cases so that any prefix covers as many hop classes as possible:
/// round robin over hop classes, largest classes first inside each.
pub fn coverage_order(cases: &[PlannedCase]) -> Vec<usize> {
    let mut by_hop: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, c) in cases.iter().enumerate() {
        by_hop.entry(c.hop_class()).or_default().push(i);
    }
    for v in by_hop.values_mut() {
        v.sort_by_key(|&i| std::cmp::Reverse(cases[i].class_size));
    }
    let mut out = Vec::with_capacity(cases.len());
    let mut round = 0;
    while out.len() < cases.len() {
        for v in by_hop.values() {
            if let Some(&i) = v.get(round) {
                out.push(i);
            }
        }
        round += 1;
    }
    out
}
