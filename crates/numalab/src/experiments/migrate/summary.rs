//! A method's result from the raw figures: pages moved and left behind,
//! failures by status, GB/s and microseconds per page, and what did not
//! verify.

use super::figures::{Count, Stage};
use super::moves::Work;
use super::{Method, MethodResult, Plan};
use crate::measure::stats::{Better, Summary};
use std::collections::BTreeMap;

fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EBUSY => "EBUSY",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::ENOENT => "ENOENT",
        libc::EPERM => "EPERM",
        libc::EINVAL => "EINVAL",
        libc::E2BIG => "E2BIG",
        libc::ENODEV => "ENODEV",
        libc::EIO => "EIO",
        libc::ENOSYS => "ENOSYS",
        libc::EAGAIN => "EAGAIN",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

fn by_node(c: &Count, node: u32, other: Option<u32>) -> BTreeMap<u32, u64> {
    let mut m = BTreeMap::new();
    if c.on_node > 0 {
        m.insert(node, c.on_node);
    }
    if let (Some(o), true) = (other, c.elsewhere > 0) {
        m.insert(o, c.elsewhere);
    }
    m
}

/// The method's result from the raw figures.
pub(super) fn summarize(
    method: Method,
    plan: &Plan,
    work: &Work,
    huge: (Option<u64>, Option<u64>),
) -> MethodResult {
    let pages = (plan.len / plan.page) as u64;
    let h = &work.header;
    let mut problems = Vec::new();
    if h.failed_stage != 0 {
        problems.push(format!(
            "{} failed: {}",
            Stage::of(h.failed_stage),
            if h.errno == 0 {
                "no figures came back".to_string()
            } else {
                std::io::Error::from_raw_os_error(h.errno).to_string()
            }
        ));
    }
    let ran = if h.failed_stage == 0 {
        &work.reps[..]
    } else {
        &work.reps[..0]
    };
    // Only two nodes are involved: what is not on one is on the other.
    let placed = by_node(&h.placed, plan.from, Some(plan.to));
    if h.failed_stage == 0 && h.placed.on_node != pages {
        problems.push(format!(
            "after the first touch {} of {pages} pages were on node {} ({} elsewhere, {} untouched)",
            h.placed.on_node, plan.from, h.placed.elsewhere, h.placed.untouched
        ));
    }
    let mut failure_statuses = BTreeMap::new();
    let mut move_failures = 0;
    let mut back_incomplete = 0;
    let mut samples_gbps = Vec::new();
    let mut samples_us = Vec::new();
    for r in ran {
        move_failures += r.failures;
        if r.first_status < 0 {
            *failure_statuses
                .entry(errno_name(-r.first_status))
                .or_insert(0) += r.failures;
        }
        if r.back.on_node != pages {
            back_incomplete += 1;
        }
        if r.after.on_node > 0 && r.seconds > 0.0 {
            let bytes = (r.after.on_node * plan.page as u64) as f64;
            samples_gbps.push(bytes / r.seconds / 1e9);
            samples_us.push(r.seconds * 1e6 / r.after.on_node as f64);
        }
    }
    let pages_moved = ran.iter().map(|r| r.after.on_node).min().unwrap_or(0);
    let pages_not_moved = pages - pages_moved;
    if !ran.is_empty() && pages_not_moved > 0 {
        problems.push(format!(
            "a move left {pages_not_moved} of {pages} pages off node {}",
            plan.to
        ));
    }
    if back_incomplete > 0 {
        problems.push(format!(
            "{back_incomplete} backward move(s) left pages off node {}",
            plan.from
        ));
    }
    let gbps = Summary::of(&samples_gbps);
    let us_per_page = Summary::of(&samples_us);
    MethodResult {
        method,
        pages,
        placed_pages_by_node: placed,
        pages_by_node: ran
            .last()
            .map(|r| by_node(&r.after, plan.to, Some(plan.from)))
            .unwrap_or_default(),
        pages_moved,
        pages_not_moved,
        move_failures,
        failure_statuses,
        back_moves_incomplete: back_incomplete,
        huge_pages_placed: huge.0,
        huge_pages_after: huge.1,
        cpu_seen: u32::try_from(h.cpu_seen).ok(),
        seconds: ran.iter().map(|r| r.seconds).collect(),
        best_gbps: gbps.as_ref().map(|s| s.best(Better::Higher)),
        gbps,
        us_per_page,
        verified: problems.is_empty() && h.placed.on_node == pages,
        problems,
    }
}
