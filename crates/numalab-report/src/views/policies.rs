//! The policy comparison (`numalab policies`, report part `policies`):
//! local, interleave and one-node memory for canonical workloads, every
//! cell's pages verified, and the advice that follows for this machine.

use super::matrix::halvings;
use super::{grid, Units};
use crate::claims::{Basis, Claim, ClaimKind, Derivation, RankRule};
use crate::csv::{opt, yes, Table};
use crate::html::Section;
use crate::model::Mode;
use crate::model::{largest_fitting, CountValue, PartPlan, Work};
use crate::part::{Measured, PartContext, PartInfo, ReportPart, MIN_MEASUREMENT_S};
use crate::plan::no_cpu_node;
use crate::plan::PlanEnv;
use crate::summary::{advice, sentence_case, SummaryBuilder};
use crate::svg::{bar_chart, Bar, BarGroup};
use numalab::experiments::policies::{
    column_title, default_array_bytes, run_policies, Cell, Comparison, PoliciesRequest,
    PoliciesResult, PolicyColumn, Workload, ROUNDS,
};
use numalab::machine::Machine;
use numalab::measure::compare::Verdict;
use numalab::measure::harness::default_buffer_bytes;
use numalab::measure::kernels::BandwidthKernel;
use numalab::measure::stats::StopRule;
use numalab::placement::thread_policy::scatter_order;
use numalab::placement::{PlacementError, Thp};
use numalab::text::format::{bytes as format_bytes, s as plural_s};
use numalab::IdSet;
use std::fmt::Write;

/// The report part.
pub struct PoliciesPart;

/// The request for `budget` seconds and its plan: the mode's workloads
/// with the default arrays when they fit; else shorter measurements, then
/// smaller arrays (down to 2 MiB, with every thread's arrays together still
/// twice the last-level cache), then fewer workloads (single-pinned,
/// serial-init and numa-aware kept longest).
fn work(env: &PlanEnv, budget: f64) -> Result<(PoliciesRequest, PartPlan), PlacementError> {
    let m = env.m;
    let cpus = scatter_order(m, &m.allowed_cpus);
    let main = *cpus.first().ok_or_else(no_cpu_node)?;
    let node = m
        .node_of_cpu(main)
        .filter(|&n| m.memory_nodes().contains(n))
        .or_else(|| m.memory_nodes().first())
        .ok_or_else(|| PlacementError::Invalid("no allowed node has memory".into()))?;
    let kernel = BandwidthKernel::Triad;
    let arrays = kernel.arrays();
    let wanted = if env.size == default_buffer_bytes(m) {
        default_array_bytes(m, kernel)
    } else {
        (env.size / 6).max(2 << 20).next_multiple_of(2 << 20)
    };
    let t = cpus.len();
    // The one-node column (and main-thread first touch) put every thread's
    // arrays on one node.
    let full_array = env.fit(node, t * arrays, wanted, 0.6);
    let min_array = ((2.0 * env.llc()) as usize / (t * arrays).max(1))
        .max(2 << 20)
        .next_multiple_of(2 << 20)
        .min(full_array);
    let byte_levels = halvings(min_array, full_array);
    let (mode_workloads, ranked) = workloads_by_rank(env.mode);
    let columns = PolicyColumn::ALL.len();
    let c = env.costs;
    // One cell: the workload's threads place their arrays (one toucher
    // for serial init) and stream over them, in each of the engine's
    // rounds (its measurement split over them): a cell pays its placement,
    // its threads and a measurement's fixed cost once a round. Counted
    // once, a quick report in the Quartet guest took 26.9 s of the 7.4 s
    // it was given.
    let cell = |w: Workload, array: usize, per: f64| -> f64 {
        let threads = match w {
            Workload::SingleUnpinned | Workload::SinglePinned => 1,
            _ => t,
        };
        let touchers = if w == Workload::SerialInit {
            1
        } else {
            threads
        };
        let bytes = (array * arrays * threads) as f64;
        let rounds = ROUNDS as f64;
        rounds
            * (c.place(bytes, touchers)
                + c.threads(threads)
                + c.measurement(
                    per / rounds,
                    c.bandwidth_sample((array * arrays) as f64, threads),
                ))
    };
    let levels = ranked.len() + byte_levels.len() - 1;
    let at = |l: usize| -> (usize, usize) {
        if l < ranked.len() {
            (l + 1, min_array)
        } else {
            (ranked.len(), byte_levels[l + 1 - ranked.len()])
        }
    };
    let cost = |(k, array): (usize, usize), per: f64| {
        ranked[..k]
            .iter()
            .map(|&w| cell(w, array, per))
            .sum::<f64>()
            * columns as f64
    };
    let l = largest_fitting(levels, budget, |l| cost(at(l), MIN_MEASUREMENT_S));
    let (k, array) = at(l);
    let cells = k * columns;
    let fixed = cost((k, array), MIN_MEASUREMENT_S) - cells as f64 * MIN_MEASUREMENT_S;
    let per = ((budget - fixed) / cells as f64).clamp(MIN_MEASUREMENT_S, 3.0);
    // Run in the table's order.
    let workloads: Vec<Workload> = mode_workloads
        .iter()
        .copied()
        .filter(|w| ranked[..k].contains(w))
        .collect();
    let plan = PartPlan {
        predicted_s: cost((k, array), per),
        measuring_s: per * cells as f64,
        work: Work {
            measurements: cells,
            per_measurement_s: per,
            threads: t,
            buffer_bytes: array as u64,
            ..Work::default()
        }
        .count("cells", "cells", cells)
        .with(
            "workloads",
            CountValue::Of(k as u64, columns as u64),
            format!("{k} workloads x {columns} policies"),
        ),
        cut: cut_text(k, mode_workloads.len(), array, full_array),
    };
    let req = PoliciesRequest {
        kernel,
        isa: numalab::measure::kernels::Isa::detect_best(),
        thread_policy: "scatter".into(),
        unpinned_cpus: m.allowed_cpus.clone(),
        node,
        buffer_bytes: array,
        thp: Thp::Off,
        rule: StopRule {
            budget: std::time::Duration::from_secs_f64(per),
            ..crate::part::default_rule()
        },
        workloads,
        policies: PolicyColumn::ALL.to_vec(),
        cpus,
    };
    Ok((req, plan))
}

/// The workloads of `mode` in table order, and the same ranked by how long
/// they are kept when the budget is short (dropped last to first).
fn workloads_by_rank(mode: Mode) -> (Vec<Workload>, Vec<Workload>) {
    // Workloads in the order they are dropped last to first.
    let keep_order = [
        Workload::SinglePinned,
        Workload::NumaAware,
        Workload::SerialInit,
        Workload::Independent,
        Workload::SingleUnpinned,
    ];
    let mode_workloads: Vec<Workload> = match mode {
        Mode::Quick => vec![
            Workload::SinglePinned,
            Workload::SerialInit,
            Workload::NumaAware,
        ],
        _ => Workload::ALL.to_vec(),
    };
    let ranked: Vec<Workload> = keep_order
        .iter()
        .copied()
        .filter(|w| mode_workloads.contains(w))
        .collect();
    (mode_workloads, ranked)
}

/// What was cut from the full table, when something was.
fn cut_text(kept: usize, workloads: usize, array: usize, full_array: usize) -> Option<String> {
    let mut cut = Vec::new();
    if kept < workloads {
        cut.push(format!("{kept} of {workloads} workloads"));
    }
    if array < full_array {
        cut.push(format!(
            "{} arrays instead of {}",
            format_bytes(array as u64),
            format_bytes(full_array as u64)
        ));
    }
    (!cut.is_empty()).then(|| {
        format!(
            "{}: the full table would not fit the budget",
            cut.join("; ")
        )
    })
}

impl ReportPart for PoliciesPart {
    type Result = PoliciesResult;

    fn info(&self) -> PartInfo {
        PartInfo {
            // A quick report has little time: the fixed costs of the policy
            // cells need a larger share.
            quick_weight: 14.0 * 1.2,
            ..PartInfo::new("policies", "Policy comparison", "numalab policies", 14.0)
        }
    }

    /// Not with one memory node: every policy would place the same pages
    /// on it, and the part's time goes to parts that can tell something.
    fn applicable(&self, m: &Machine) -> Result<(), String> {
        super::one_memory_node(m, "every policy places the pages on it")
    }

    fn plan(&self, env: &PlanEnv, budget: f64) -> PartPlan {
        match work(env, budget) {
            Ok((_, plan)) => plan,
            // Not applicable here: nothing to plan.
            Err(_) => PartPlan::none(),
        }
    }

    /// The triad kernel, threads scattered over every allowed CPU, every
    /// workload (three in `--quick`) under every policy.
    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<PoliciesResult>, PlacementError> {
        let (mut req, plan) = work(&ctx.env(), budget)?;
        req.isa = ctx.isa;
        let r = run_policies(ctx.m, &req, &mut |w| ctx.step(w))?;
        Ok(Measured::new(r, plan.measuring_s, plan.fixed_s()).with_note(plan.cut))
    }

    fn verified(&self, r: &PoliciesResult) -> bool {
        r.verified
    }

    fn text(&self, r: &PoliciesResult, m: &Machine) -> String {
        text(m, r, Units::Gb)
    }

    fn tables(&self, r: &PoliciesResult, _m: &Machine) -> Vec<Table> {
        let mut t = Table::new(
            "policies",
            "Policy comparison: aggregate bandwidth (GB/s, program bytes) per workload and memory policy, and where the pages were",
            &[
                "workload",
                "policy",
                "memory_policy",
                "threads",
                "gbps",
                "rel_ci",
                "local_percent",
                "pages_by_node",
                "verified",
            ],
        );
        for c in &r.cells {
            t.rows.push(vec![
                c.workload.name().into(),
                c.policy.name().into(),
                c.memory_policy.clone(),
                c.threads.to_string(),
                opt(c.gbps.as_ref().map(|g| g.median), 3),
                opt(c.gbps.as_ref().map(|g| g.rel_ci), 4),
                opt(c.local_percent, 1),
                c.pages_by_node
                    .iter()
                    .map(|(n, p)| format!("{n}:{p}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                yes(c.verified),
            ]);
        }
        vec![t]
    }

    fn html(&self, r: &PoliciesResult, s: &mut Section) {
        html(r, s);
    }

    fn summarize(&self, r: &PoliciesResult, s: &mut SummaryBuilder) {
        if r.single_node {
            // Every policy puts every page on the one node: the comparison
            // only checks the machinery, its differences are noise.
            s.claim(
                Claim::new(
                    ClaimKind::Advice,
                    "policies",
                    Basis::Placement,
                    "Memory policies: one memory node: local, interleave and bind place the same memory, so there is nothing to compare.",
                )
                .fact("single", true, s.path("single_node")),
            );
            return;
        }
        let cell_gbps = |label: &str| -> Option<(f64, Derivation)> {
            let (i, c) = r
                .cells
                .iter()
                .enumerate()
                .find(|(_, c)| format!("{}/{}", c.workload.name(), c.policy.name()) == label)?;
            let g = c.gbps.as_ref()?;
            Some((g.median, s.at(&format!("cells/{i}/gbps/median"))))
        };
        // Where the samples a recommendation's rank test compared are, for
        // the checker to rerun it ("better is faster": its samples the larger).
        let cell_of = |label: &str| {
            r.cells
                .iter()
                .position(|c| format!("{}/{}", c.workload.name(), c.policy.name()) == label)
        };
        let cells_at = s.path("cells");
        let ranked = |c: Claim, name: &str, x: &Comparison, verdict_at: String| {
            let (Some(bi), Some(wi)) = (cell_of(&x.better), cell_of(&x.worse)) else {
                return c;
            };
            let at = |i: usize| vec![format!("{cells_at}/{i}/run/measurement/samples")];
            // The experiment's own test of these samples: the checker
            // reruns it from them.
            match &x.test {
                Some(t) => c.ranked_as(name, (at(bi), at(wi)), RankRule::Larger, t, verdict_at),
                None => c,
            }
        };
        let mut claims = Vec::new();
        for (i, rec) in r.recommendations.iter().enumerate() {
            let base = format!("recommendations/{i}");
            let mut c = advice("policies", "{^advice}").fact(
                "advice",
                &rec.text,
                s.path(&format!("{base}/text")),
            );
            for (k, x) in rec.comparisons.iter().enumerate() {
                let (Some((b, bd)), Some((w, wd))) = (cell_gbps(&x.better), cell_gbps(&x.worse))
                else {
                    continue;
                };
                let at = |f: &str| s.path(&format!("{base}/comparisons/{k}/{f}"));
                // The verdict comes from the rank test on the cells' samples
                // (measure::compare), which the summary cannot re-derive from
                // medians: it is stated as a fact with its p-value.
                c = c
                    .fig(&format!("b{k}"), b, "GB/s", 3, bd)
                    .fig(&format!("w{k}"), w, "GB/s", 3, wd)
                    .fact(&format!("p{k}"), x.p_value, at("p_value"))
                    .fact(&format!("v{k}"), x.verdict, at("verdict"));
                c = ranked(c, &format!("t{k}"), x, at("verdict"));
            }
            claims.push(c);
        }
        for c in claims {
            s.claim(c);
        }
        let cell = |p: PolicyColumn| {
            let (i, c) = r
                .cells
                .iter()
                .enumerate()
                .find(|(_, c)| c.workload == Workload::SerialInit && c.policy == p)?;
            Some((
                c.gbps.as_ref()?.median,
                s.at(&format!("cells/{i}/gbps/median")),
            ))
        };
        // The verdict is the rank test's on the two cells' samples, as the
        // serial-init advice compared them (not a threshold on medians).
        let pair = ["serial-init/interleave", "serial-init/local"];
        let tested = r.recommendations.iter().enumerate().find_map(|(i, rec)| {
            rec.comparisons.iter().enumerate().find_map(|(k, x)| {
                (pair.contains(&x.better.as_str()) && pair.contains(&x.worse.as_str()))
                    .then(|| (format!("recommendations/{i}/comparisons/{k}"), x))
            })
        });
        if let (Some((i, id)), Some((l, ld)), Some((base, x))) = (
            cell(PolicyColumn::Interleave),
            cell(PolicyColumn::Local),
            tested,
        ) {
            let interleave_faster = x.better == pair[0];
            let template = match (x.verdict, interleave_faster) {
                (Verdict::Holds, true) => "When threads on three or more nodes share data, or the program initializes it from one thread, interleave it: the program whose main thread initialized the data got {i} GB/s interleaved vs {l} with first touch (Mann–Whitney U, p = {p}).",
                (Verdict::Holds, false) => "When threads on three or more nodes share data, or the program initializes it from one thread, interleaving is the classic fix, but first touch was faster here: the program whose main thread initialized the data got {i} GB/s interleaved vs {l} with first touch (Mann–Whitney U, p = {p}).",
                _ => "When threads on three or more nodes share data, or the program initializes it from one thread, interleaving is the classic fix; here the rank test cannot tell it from first touch: the program whose main thread initialized the data got {i} GB/s interleaved vs {l} with first touch (Mann–Whitney U, p = {p}).",
            };
            let claim = ranked(
                advice("shared-data", template),
                "test",
                x,
                s.path(&format!("{base}/verdict")),
            );
            s.add_to_advice(
                claim
                    .fig("i", i, "GB/s", 1, id)
                    .fig("l", l, "GB/s", 1, ld)
                    .fig("p", x.p_value, "", 3, s.at(&format!("{base}/p_value")))
                    .fact("verdict", x.verdict, s.path(&format!("{base}/verdict")))
                    .fact("better", &x.better, s.path(&format!("{base}/better"))),
            );
        }
    }
}

/// Bars per workload and policy, the notes, the table.
fn html(r: &PoliciesResult, s: &mut Section) {
    let groups: Vec<BarGroup> = r
        .workloads
        .iter()
        .map(|w| BarGroup {
            label: w.title.clone(),
            bars: r
                .policies
                .iter()
                .enumerate()
                .filter_map(|(k, p)| {
                    let c = r.cell(w.name, p.name)?;
                    let g = c.gbps.as_ref()?;
                    Some(Bar {
                        label: p.name.name().to_string(),
                        value: g.median,
                        tooltip: format!(
                            "{} / {}: {:.2} GB/s ±{:.1}%{}{}",
                            w.title,
                            p.title,
                            g.median,
                            g.rel_ci * 100.0,
                            c.local_percent
                                .map(|l| format!(", {l:.0}% of the pages local"))
                                .unwrap_or_default(),
                            if c.verified {
                                ""
                            } else {
                                "; placement NOT verified"
                            }
                        ),
                        flagged: !c.verified,
                        interval: Bar::relative_interval(g.median, g.rel_ci),
                        // Coloured by policy, the thing compared.
                        series: Some(k),
                    })
                })
                .collect(),
        })
        .collect();
    s.figure(
        bar_chart(
            "fig-policies",
            &format!(
                "Aggregate {} bandwidth per workload and memory policy",
                r.kernel.name()
            ),
            "bandwidth (GB/s)",
            &groups,
            None,
        ),
        "Bars in each group, coloured by policy: local (first touch), interleave over every memory node, one node; whiskers: the median's 95% interval. Higher is better.",
    );
    for n in &r.notes {
        s.note(&format!("{}.", sentence_case(n).trim_end_matches('.')));
    }
    s.table("policies", false);
}

/// The text `numalab policies` prints: the setup, bandwidth and page
/// shares per workload and policy, where the workers ran, the placement
/// check and the recommendation.
pub fn text(m: &Machine, r: &PoliciesResult, u: Units) -> String {
    let mut s = header(m, r);
    let mut head = vec!["workload".to_string()];
    head.extend(
        r.policies
            .iter()
            .map(|p| column_title(p.name, &r.interleave_nodes, &r.accessing_nodes, r.node)),
    );
    let row_of = |w: Workload, f: &dyn Fn(&Cell) -> String| -> Vec<String> {
        let mut row = vec![w.title(r.threads)];
        for p in &r.policies {
            row.push(r.cell(w, p.name).map_or("-".into(), f));
        }
        row
    };
    let _ = writeln!(
        s,
        "\naggregate bandwidth, {} (median ±half its 95% confidence interval; ! = placement not verified)",
        u.label()
    );
    let rows: Vec<Vec<String>> = r
        .workloads
        .iter()
        .map(|w| {
            row_of(w.name, &|c| match &c.gbps {
                Some(g) => format!(
                    "{:.2} ±{:.1}%{}",
                    u.convert(g.median),
                    g.rel_ci * 100.0,
                    if c.verified { "" } else { " !" }
                ),
                None => "not run !".into(),
            })
        })
        .collect();
    s.push_str(&grid(&head, &rows));
    let _ = writeln!(
        s,
        "\nwhere the pages are: share of the data per node (and on the node of the worker that streams it)"
    );
    let rows: Vec<Vec<String>> = r
        .workloads
        .iter()
        .map(|w| row_of(w.name, &shares))
        .collect();
    s.push_str(&grid(&head, &rows));
    s.push_str(&workers_text(r));
    s.push_str(&verification_text(r));
    if !r.recommendations.is_empty() {
        let _ = writeln!(s, "\nrecommendation for this machine");
        for rec in &r.recommendations {
            let _ = writeln!(s, "  - {}", rec.text);
        }
    }
    s
}

/// The first line (what ran where) and the notes.
fn header(m: &Machine, r: &PoliciesResult) -> String {
    let mut s = String::new();
    let main_node = m
        .node_of_cpu(r.main_cpu)
        .map_or("?".into(), |n| n.to_string());
    let _ = writeln!(
        s,
        "policies: {} over {} x {} per worker (THP {}, ISA {}); {} thread{} laid out {} on CPUs {}; main thread on CPU {} (node {main_node}); the unpinned thread may run on CPUs {}",
        r.kernel.name(),
        r.arrays,
        format_bytes(r.buffer_bytes),
        r.thp.describe(),
        r.isa.name(),
        r.threads,
        plural_s(r.threads),
        r.thread_policy,
        comma_list(&r.cpus),
        r.main_cpu,
        r.unpinned_cpus
    );
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

fn comma_list(cpus: &[u32]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// "n0 25% n1 75% (local 50%)": each node's share of the pages, and the
/// share on the node of the worker that streams them.
fn shares(c: &Cell) -> String {
    let total: u64 = c.pages_by_node.values().sum();
    if total == 0 {
        return "-".into();
    }
    let nodes = c
        .pages_by_node
        .iter()
        .map(|(n, p)| format!("n{n} {:.0}%", 100.0 * *p as f64 / total as f64))
        .collect::<Vec<_>>()
        .join(" ");
    match c.local_percent {
        Some(l) => format!("{nodes} (local {l:.0}%)"),
        None => nodes,
    }
}

/// Per workload: the CPUs its workers ran on and who first touched its data.
fn workers_text(r: &PoliciesResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nworkers (CPUs they ran on, CPUs that first touched the data)"
    );
    for w in &r.workloads {
        let cells: Vec<&Cell> = r
            .cells
            .iter()
            .filter(|c| c.workload == w.name && c.run.is_some())
            .collect();
        let toucher_set: IdSet = cells
            .iter()
            .flat_map(|c| c.toucher_cpus.iter().copied())
            .collect();
        let touchers = format!("CPU{} {toucher_set}", plural_s(toucher_set.len()));
        let ran = if w.name == Workload::SingleUnpinned {
            unpinned_text(r, &cells)
        } else {
            pinned_text(r, w.threads, &cells)
        };
        let who = match w.name {
            Workload::SerialInit => {
                format!("all data first touched by the main thread on {touchers}")
            }
            Workload::SingleUnpinned => format!("data first touched on {touchers}"),
            _ if w.threads == 1 => format!("data first touched on {touchers}"),
            _ => format!("each worker first touched its own data ({touchers})"),
        };
        let _ = writeln!(s, "  {}: {ran}; {who}", w.title);
    }
    s
}

/// Where the unpinned thread was seen under each policy, and how often it
/// moved.
fn unpinned_text(r: &PoliciesResult, cells: &[&Cell]) -> String {
    let per: Vec<String> = cells
        .iter()
        .map(|c| {
            let seen: IdSet = c.seen_cpus.iter().flatten().copied().collect();
            format!("{seen} ({})", c.policy.name())
        })
        .collect();
    let moved: u64 = cells.iter().filter_map(|c| c.migrations).sum();
    format!(
        "unpinned over CPUs {}: seen on CPUs {}; moved {moved} time{} in all",
        r.unpinned_cpus,
        per.join(", "),
        plural_s(moved as usize)
    )
}

/// The CPUs pinned workers were asked for, and whether they were seen there.
fn pinned_text(r: &PoliciesResult, threads: usize, cells: &[&Cell]) -> String {
    let cpus = if threads == 1 {
        vec![r.main_cpu]
    } else {
        r.cpus.clone()
    };
    let all_there = cells.iter().all(|c| {
        c.seen_cpus
            .iter()
            .zip(&c.requested_cpus)
            .all(|(seen, want)| seen.iter().all(|s| Some(*s) == *want))
    });
    format!(
        "pinned to CPU{} {}{}",
        plural_s(cpus.len()),
        comma_list(&cpus),
        if all_there {
            " (seen there)"
        } else {
            " (NOT always seen there)"
        }
    )
}

/// The cells that did not verify, or that every one did.
fn verification_text(r: &PoliciesResult) -> String {
    let mut s = String::new();
    let bad: Vec<&Cell> = r.cells.iter().filter(|c| !c.verified).collect();
    if bad.is_empty() {
        let _ = writeln!(
            s,
            "\nplacement verified in every cell: pages where each policy puts them, data touched by the intended threads, pinned workers on their CPUs"
        );
        return s;
    }
    let _ = writeln!(s, "\nNOT VERIFIED");
    for c in bad {
        let more = c.problems.len().saturating_sub(3);
        let _ = writeln!(
            s,
            "  {} / {} (expected {}): {}{}",
            c.workload.name(),
            c.policy.name(),
            c.expected,
            c.problems
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
            if more > 0 {
                format!("; and {more} more (--json lists them)")
            } else {
                String::new()
            }
        );
    }
    s
}
