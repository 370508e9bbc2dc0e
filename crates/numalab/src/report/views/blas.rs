//! BLAS placement sensitivity (`numalab blas`, report part `blas`, only
//! with `--full`). The text `numalab blas` prints: how OpenBLAS was kept to
//! one thread, then per kernel one row per placement (CPU node, hop class,
//! operands' nodes, GFLOPS, pages verified), its sensitivity and
//! per-hop-class figures, then the level finding with its rule; and the
//! `--list` plan. The report part runs the serial mode, every CPU node's
//! placements folded by hop class, with `n` cut to fit its budget.

use crate::experiments::blas::{
    plan as plan_runs, run_blas, BlasRequest, BlasResult, Kernel, ParallelClass, PlannedRun,
    DEFAULT_N,
};
use crate::machine::Machine;
use crate::measure::stats::StopRule;
use crate::placement::PlacementError;
use crate::report::budget::{spread, Costs, PartPlan, PlanEnv, Work};
use crate::report::csv::{num, yes, Table};
use crate::report::html::Section;
use crate::report::part::{
    default_rule, Measured, PartContext, PartInfo, ReportPart, MIN_MEASUREMENT_S,
};
use crate::report::summary::{finding, SummaryBuilder};
use crate::IdSet;
use std::fmt::Write;
use std::time::Duration;

/// The report part.
pub struct BlasPart;

/// Dimensions the part tries, largest first: the study's, halved.
const N_LADDER: [usize; 6] = [DEFAULT_N, 800, 400, 200, 100, 50];
/// One core's dgemm GFLOPS assumed where [`Costs::reference`] holds (a
/// small VM); other machines scale it by their read pass's speed. Low on
/// purpose: a plan that overestimates dgemm only picks a smaller `n`.
const REFERENCE_DGEMM_GFLOPS: f64 = 10.0;
/// Most seconds of measurement one placement gets.
const MAX_PER_PLACEMENT_S: f64 = 0.2;
const GIB: f64 = (1u64 << 30) as f64;

/// What the part measures for a budget.
struct BlasWork {
    n: usize,
    cpu_nodes: IdSet,
    per_placement_s: f64,
}

/// Bytes of a kernel's operands at dimension `n`.
fn operand_bytes(k: Kernel, n: usize) -> f64 {
    k.elements(n).iter().sum::<usize>() as f64 * 8.0
}

/// Predicted seconds of one call: the level-1 and level-2 kernels stream
/// their operands once, dgemm is bound by arithmetic.
fn call_s(c: &Costs, k: Kernel, n: usize) -> f64 {
    let pass = c.factor * c.pass_s_per_gib * operand_bytes(k, n) / GIB;
    match k {
        Kernel::Dgemm => {
            let slower = c.factor * c.pass_s_per_gib / Costs::reference().pass_s_per_gib;
            k.flops(n) / (REFERENCE_DGEMM_GFLOPS * 1e9) * slower
        }
        _ => pass,
    }
}

/// Predicted seconds of one placement: its operands placed by one toucher
/// and filled (one more pass), one sizing call, then the measurement.
fn placement_s(c: &Costs, k: Kernel, n: usize, per: f64) -> f64 {
    let bytes = operand_bytes(k, n);
    let call = call_s(c, k, n);
    c.place(bytes, 1)
        + c.factor * c.pass_s_per_gib * bytes / GIB
        + call
        + c.measurement(per, call.max(1e-3))
}

/// The CPU nodes with a CPU this process may use (a cgroup may allow a
/// node's memory but none of its CPUs).
fn thread_nodes(m: &Machine) -> IdSet {
    m.cpu_nodes()
        .iter()
        .filter(|&n| !m.allowed_cpus_of(n).is_empty())
        .collect()
}

/// Placements per kernel (in [`Kernel::ALL`] order) of each thread node.
fn runs_per_node(m: &Machine) -> Vec<(u32, [usize; 4])> {
    thread_nodes(m)
        .iter()
        .map(|node| {
            let req = request(IdSet::single(node), 1, MIN_MEASUREMENT_S);
            let mut counts = [0usize; 4];
            for r in plan_runs(m, &req).unwrap_or_default() {
                counts[r.kernel as usize] += 1;
            }
            (node, counts)
        })
        .collect()
}

/// The serial request the part runs.
fn request(cpu_nodes: IdSet, n: usize, per: f64) -> BlasRequest {
    BlasRequest {
        kernels: Kernel::ALL.to_vec(),
        n: Some(n),
        cpu_nodes: Some(cpu_nodes),
        full: false,
        rule: StopRule {
            budget: Duration::from_secs_f64(per.max(MIN_MEASUREMENT_S)),
            ..default_rule()
        },
        check: true,
        parallel: None,
        seed: 1,
    }
}

/// The work for `budget` seconds, and its plan: every CPU node at the
/// largest `n` of [`N_LADDER`] that fits (and fits the nodes' memory);
/// when even the smallest does not, the CPU nodes spread over the machine
/// that fit, at least one.
fn work(env: &PlanEnv, budget: f64) -> (BlasWork, PartPlan) {
    let c = env.costs;
    let per_node = runs_per_node(env.m);
    let memory: Vec<u32> = env.m.memory_nodes().iter().collect();
    // Three operands of n² doubles on one node within half its memory.
    let ladder: Vec<usize> = N_LADDER
        .iter()
        .copied()
        .filter(|&n| n * n * 8 <= env.fit_all(&memory, 3, n * n * 8, 0.5))
        .collect();
    let smallest = *N_LADDER.last().unwrap_or(&50);
    let ladder = if ladder.is_empty() {
        vec![smallest]
    } else {
        ladder
    };
    let cost = |nodes: &[usize], n: usize, per: f64| -> f64 {
        nodes
            .iter()
            .map(|&i| {
                Kernel::ALL
                    .iter()
                    .map(|&k| per_node[i].1[k as usize] as f64 * placement_s(c, k, n, per))
                    .sum::<f64>()
            })
            .sum()
    };
    let placements = |nodes: &[usize]| -> usize {
        nodes
            .iter()
            .map(|&i| per_node[i].1.iter().sum::<usize>())
            .sum()
    };
    let all: Vec<usize> = (0..per_node.len()).collect();
    let fits = ladder
        .iter()
        .copied()
        .find(|&n| cost(&all, n, MIN_MEASUREMENT_S) <= budget);
    let (n, chosen) = match fits {
        Some(n) => (n, all.clone()),
        None => {
            let n = *ladder.last().unwrap_or(&smallest);
            let k = (1..=all.len())
                .take_while(|&k| cost(&spread(all.len(), k), n, MIN_MEASUREMENT_S) <= budget)
                .last()
                .unwrap_or(1);
            (n, spread(all.len(), k))
        }
    };
    let count = placements(&chosen);
    let spare = budget - cost(&chosen, n, MIN_MEASUREMENT_S);
    let per = (MIN_MEASUREMENT_S + spare.max(0.0) / count.max(1) as f64)
        .clamp(MIN_MEASUREMENT_S, MAX_PER_PLACEMENT_S);
    let predicted = cost(&chosen, n, per);
    let measuring = count as f64 * per;
    let cpu_nodes: IdSet = chosen.iter().map(|&i| per_node[i].0).collect();
    let mut cut = Vec::new();
    if n < DEFAULT_N {
        cut.push(format!(
            "n = {n} instead of {DEFAULT_N} (the placements at n = {DEFAULT_N} would not fit the budget or the nodes' memory)"
        ));
    }
    if chosen.len() < all.len() {
        cut.push(format!(
            "threads on {} of {} CPU nodes ({cpu_nodes}): every CPU node's placements would not fit the budget",
            chosen.len(),
            all.len()
        ));
    }
    let plan = PartPlan {
        predicted_s: predicted,
        measuring_s: measuring,
        work: Work {
            measurements: count,
            per_measurement_s: per,
            threads: 1,
            buffer_bytes: (n * n * 8) as u64,
            rows: Some((chosen.len(), all.len())),
            ..Work::default()
        },
        cut: (!cut.is_empty()).then(|| cut.join("; ")),
    };
    (
        BlasWork {
            n,
            cpu_nodes,
            per_placement_s: per,
        },
        plan,
    )
}

impl ReportPart for BlasPart {
    type Result = BlasResult;

    fn info(&self) -> PartInfo {
        PartInfo {
            full_only: true,
            ..PartInfo::new("blas", "BLAS placement sensitivity", "numalab blas", 2.0)
        }
    }

    fn applicable(&self, m: &Machine) -> Result<(), String> {
        if m.memory_nodes().is_empty() || thread_nodes(m).is_empty() {
            return Err(
                "needs a node with memory and a node with a CPU this process may use".into(),
            );
        }
        Ok(())
    }

    fn plan(&self, env: &PlanEnv, budget: f64) -> PartPlan {
        work(env, budget).1
    }

    /// The serial mode on the planned CPU nodes at the planned `n`.
    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<BlasResult>, PlacementError> {
        let (w, plan) = work(&ctx.env(), budget);
        let m = ctx.m;
        let req = request(w.cpu_nodes, w.n, w.per_placement_s);
        let total = plan.work.measurements;
        let mut done = 0usize;
        let r = run_blas(m, &req, &mut || {
            done += 1;
            ctx.step(&format!("placement {done} of {total}"));
        })?;
        Ok(Measured::new(r, plan.measuring_s, plan.fixed_s()).with_note(plan.cut))
    }

    fn verified(&self, r: &BlasResult) -> bool {
        r.verified
    }

    fn text(&self, r: &BlasResult, _m: &Machine) -> String {
        text(r)
    }

    fn tables(&self, r: &BlasResult, _m: &Machine) -> Vec<Table> {
        let mut t = Table::new(
            "blas",
            "BLAS placement sensitivity: median GFLOPS of each measured placement (one thread; each operand on its own node), per kernel",
            &[
                "level",
                "kernel",
                "cpu_node",
                "hops_class",
                "operand_nodes",
                "stands_for",
                "gflops_median",
                "verified",
            ],
        );
        for k in &r.kernels {
            for p in &k.placements {
                t.rows.push(vec![
                    k.level.to_string(),
                    k.kernel.name().to_string(),
                    p.cpu_node.to_string(),
                    p.class.clone(),
                    p.operands
                        .iter()
                        .map(|o| format!("{}@{}", o.name, o.node))
                        .collect::<Vec<_>>()
                        .join(" "),
                    p.stands_for.to_string(),
                    num(p.gflops.median, 3),
                    yes(p.verified),
                ]);
            }
        }
        let mut s = Table::new(
            "blas-levels",
            "BLAS placement sensitivity per kernel: best and worst median GFLOPS over the placements, best/worst and its noise",
            &[
                "level",
                "kernel",
                "best_gflops",
                "best_class",
                "worst_gflops",
                "worst_class",
                "sensitivity",
                "noise_pct",
            ],
        );
        for k in &r.kernels {
            if let Some(x) = &k.sensitivity {
                s.rows.push(vec![
                    k.level.to_string(),
                    k.kernel.name().to_string(),
                    num(x.best, 3),
                    x.best_class.clone(),
                    num(x.worst, 3),
                    x.worst_class.clone(),
                    num(x.sensitivity, 3),
                    num(x.noise * 100.0, 1),
                ]);
            }
        }
        vec![s, t]
    }

    fn html(&self, r: &BlasResult, s: &mut Section) {
        let f = &r.finding;
        s.html(&format!(
            "<p>Level 1 &gt; level 2 &gt; level 3 in sensitivity to placement: <strong>{}</strong> (n = {}, threads on CPU nodes {}).</p>\n",
            crate::text::escape::xml(&f.verdict),
            r.n,
            crate::text::escape::xml(&r.cpu_nodes.to_string())
        ));
        s.table("blas-levels", false);
        s.note(&format!(
            "Sensitivity = best / worst median GFLOPS over the placements of a kernel. Rule: {}. OpenBLAS: {} ({} thread after).",
            f.rule, r.openblas.method, r.openblas.num_threads_after
        ));
        s.table("blas", true);
    }

    fn summarize(&self, r: &BlasResult, s: &mut SummaryBuilder) {
        summarize(r, s);
    }
}

/// The finding as one claim: each level's sensitivity (best/worst GFLOPS
/// of its most sensitive kernel) and the verdict of the rule.
fn summarize(r: &BlasResult, s: &mut SummaryBuilder) {
    let f = &r.finding;
    if f.levels.is_empty() {
        return;
    }
    if r.memory_nodes.len() < 2 {
        // Every placement is local: figures of 1.00 would only look like
        // a measurement of sensitivity.
        s.claim(
            finding(
                "blas",
                "BLAS placement sensitivity (level 1 > level 2 > level 3): {verdict}.",
            )
            .fact("verdict", &f.verdict, s.path("finding/verdict")),
        );
        return;
    }
    let mut parts = Vec::new();
    let mut c = finding("blas", String::new());
    for (i, l) in f.levels.iter().enumerate() {
        let name = format!("s{}", l.level);
        parts.push(format!(
            "level {} ({}) {{{name}}}x",
            l.level,
            l.kernel.name()
        ));
        c = c.fig(
            &name,
            l.sensitivity,
            "x",
            2,
            s.at(&format!("finding/levels/{i}/sensitivity")),
        );
    }
    c.template = format!(
        "BLAS placement sensitivity (best/worst GFLOPS over placements): {}; level 1 > level 2 > level 3: {{verdict}}.",
        parts.join(", ")
    );
    c = c.fact("verdict", &f.verdict, s.path("finding/verdict"));
    s.claim(c);
}

/// GFLOPS with three significant figures, `-` without data.
fn gf(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// The operands of a placement as `name@node` words.
fn operand_nodes(names: &[&str], nodes: &[u32]) -> String {
    names
        .iter()
        .zip(nodes)
        .map(|(n, v)| format!("{n}@{v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command's text.
pub fn text(r: &BlasResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "BLAS placement sensitivity, {} mode, n = {}{}; memory nodes {}, threads on CPU nodes {}",
        r.mode,
        r.n,
        match (r.mode.as_str(), r.full) {
            ("parallel", _) => ", one thread per CPU node, random placements per contention class",
            (_, true) => ", every placement",
            _ => ", one placement per hop class",
        },
        r.memory_nodes,
        r.cpu_nodes
    );
    if let Some(why) = &r.scaled_down {
        let _ = writeln!(s, "{why}");
    }
    let _ = writeln!(
        s,
        "OpenBLAS: {}; {} -> {} thread(s)",
        r.openblas.config, r.openblas.method, r.openblas.num_threads_after
    );
    if let Some(c) = &r.check {
        let _ = writeln!(
            s,
            "numerical check: {} (n = 1..{}, max relative error {:.1e}, bound {:.0e})",
            if c.checked { "passed" } else { "FAILED" },
            c.sizes.iter().max().copied().unwrap_or(0),
            c.max_rel_error,
            c.bound
        );
    }
    for k in &r.kernels {
        let names: Vec<&str> = k.operands.iter().map(|s| s.as_str()).collect();
        let _ = writeln!(
            s,
            "\n{} (level {}), operands {} of {} elements",
            k.kernel.name(),
            k.level,
            names.join(", "),
            k.elements
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if !k.placements.is_empty() {
            let _ = writeln!(
                s,
                "  {:>4}  {:<9} {:>6}  {:<24} {:>9} {:>7}  pages",
                "node", "hops", "stands", "operands", "GFLOPS", "±CI"
            );
        }
        for p in &k.placements {
            let nodes: Vec<u32> = p.operands.iter().map(|o| o.node).collect();
            let _ = writeln!(
                s,
                "  {:>4}  {:<9} {:>6}  {:<24} {:>9} {:>6.1}%  {}",
                p.cpu_node,
                p.class,
                p.stands_for,
                operand_nodes(&names, &nodes),
                gf(p.gflops.median),
                p.gflops.rel_ci * 100.0,
                if p.verified {
                    "verified"
                } else {
                    "NOT verified"
                }
            );
        }
        for c in &k.contention_classes {
            let _ = writeln!(
                s,
                "  contention [{}, {}) ({:.2}% of placements): {} placement(s), median {} GFLOPS (min {}, max {}){}",
                c.low,
                c.high,
                c.share * 100.0,
                c.placements.len(),
                gf(c.median_gflops),
                gf(c.min_gflops),
                gf(c.max_gflops),
                if c.placements.iter().all(|p| p.verified) {
                    ", pages verified"
                } else {
                    ", pages NOT verified"
                }
            );
        }
        if let Some(sens) = &k.sensitivity {
            let _ = writeln!(
                s,
                "  best {} GFLOPS ({}), worst {} ({}): worst/best {:.3}, noise ±{:.1}%",
                gf(sens.best),
                sens.best_class,
                gf(sens.worst),
                sens.worst_class,
                sens.ratio,
                sens.noise * 100.0
            );
            if sens.per_hop_class.len() > 1 {
                let per: Vec<String> = sens
                    .per_hop_class
                    .iter()
                    .map(|c| format!("{} {}", c.class, gf(c.median_gflops)))
                    .collect();
                let _ = writeln!(
                    s,
                    "  median GFLOPS per {} class: {}",
                    if k.placements.is_empty() {
                        "contention"
                    } else {
                        "hop"
                    },
                    per.join(", ")
                );
            }
        }
    }
    let f = &r.finding;
    let _ = writeln!(
        s,
        "\nlevel 1 > level 2 > level 3 in sensitivity: {}",
        f.verdict
    );
    for l in &f.levels {
        let _ = writeln!(
            s,
            "  level {} ({}): best/worst {:.3} ± {:.1}%",
            l.level,
            l.kernel.name(),
            l.sensitivity,
            l.noise * 100.0
        );
    }
    let _ = writeln!(s, "rule: {}", f.rule);
    s
}

/// The `--list` text: the placements a run would measure.
pub fn plan_text(runs: &[PlannedRun]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} placement(s) to run:\n  {:<6} {:>4} {:>4}  {:<9} {:>6}  operands",
        runs.len(),
        "kernel",
        "node",
        "cpu",
        "hops",
        "stands"
    );
    for r in runs {
        let _ = writeln!(
            s,
            "  {:<6} {:>4} {:>4}  {:<9} {:>6}  {}",
            r.kernel.name(),
            r.cpu_node,
            r.cpu,
            r.class,
            r.stands_for,
            operand_nodes(r.kernel.operands(), &r.nodes)
        );
    }
    s
}

/// The `--list --parallel` text: per kernel and contention class, the
/// drawn placements.
pub fn parallel_plan_text(draws: &[(Kernel, Vec<ParallelClass>)]) -> String {
    let mut s = String::new();
    for (k, classes) in draws {
        let names: Vec<String> = k
            .operands()
            .iter()
            .enumerate()
            .map(|(i, o)| format!("{}={o}", (b'a' + i as u8) as char))
            .collect();
        let _ = writeln!(
            s,
            "{} (level {}), quantities {}:",
            k.name(),
            k.level(),
            names.join(" ")
        );
        for c in classes {
            let _ = writeln!(
                s,
                "  contention [{}, {}): {:.2}% of placements, {} of {} drawn",
                c.low,
                c.high,
                c.share * 100.0,
                c.runs.len(),
                c.wanted
            );
            for r in &c.runs {
                let _ = writeln!(s, "    {}", r.label);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::blas::{plan, BlasRequest, Kernel};
    use crate::measure::stats::StopRule;
    use crate::report::fixture;
    use crate::report::results::Mode;

    fn plan_env<'a>(m: &'a Machine, costs: &'a Costs) -> PlanEnv<'a> {
        PlanEnv {
            m,
            mode: Mode::Full,
            size: 64 << 20,
            costs,
            live: false,
        }
    }

    #[test]
    fn part_plan_keeps_n_1600_on_every_node_when_it_fits_and_cuts_it_when_not() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let costs = Costs::reference();
        let e = plan_env(&m, &costs);
        // The ring seen from a node: hop classes 0, 1, 2, so 3^q per kernel:
        // daxpy 9, triad 27, dgemv 27, dgemm 27 = 90 per CPU node.
        let (w, p) = work(&e, 1e6);
        assert_eq!(w.n, 1600);
        assert_eq!(w.cpu_nodes.to_string(), "0-3");
        assert_eq!(p.work.measurements, 4 * 90);
        assert_eq!(p.work.rows, Some((4, 4)));
        assert_eq!(p.cut, None);
        assert!(p.predicted_s <= 1e6);
        // No budget: the smallest form, one CPU node at the smallest n,
        // and the plan says so.
        let (w, p) = work(&e, 0.0);
        assert_eq!(w.n, 50);
        assert_eq!(w.cpu_nodes.len(), 1);
        assert_eq!(p.work.measurements, 90);
        assert_eq!(w.per_placement_s, MIN_MEASUREMENT_S);
        let cut = p.cut.unwrap();
        assert!(cut.contains("n = 50 instead of 1600"), "{cut}");
        assert!(cut.contains("1 of 4 CPU nodes"), "{cut}");
        // Any budget above the smallest form is kept.
        for b in [1.5, 3.0, 10.0, 30.0, 100.0] {
            let budget = p.predicted_s * b;
            let (_, q) = work(&e, budget);
            assert!(q.predicted_s <= budget * 1.0001, "{b}: {q:?}");
        }
    }

    #[test]
    fn claim_states_each_levels_sensitivity_from_the_finding() {
        let level = |l: u8, k: &str, x: f64| serde_json::json!({"level": l, "kernel": k, "sensitivity": x, "noise": 0.01});
        let r: BlasResult = serde_json::from_value(serde_json::json!({
            "mode": "serial", "full": false, "n": 400, "n_requested": 400,
            "scaled_down": null, "memory_nodes": [0, 1], "cpu_nodes": [0, 1],
            "openblas": {"config": "c", "env_openblas_num_threads": null,
                         "method": "m", "num_threads_after": 1},
            "check": null, "kernels": [],
            "finding": {"verdict": "holds", "holds": true, "rule": "r",
                        "levels": [level(1, "triad", 1.8), level(2, "dgemv", 1.3),
                                   level(3, "dgemm", 1.02)]},
            "verified": true, "warnings": []
        }))
        .unwrap();
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let mut b = SummaryBuilder::for_tests(&m, "/parts/blas/result");
        summarize(&r, &mut b);
        let c = &b.claims()[0];
        assert_eq!(
            c.text,
            "BLAS placement sensitivity (best/worst GFLOPS over placements): level 1 (triad) 1.80x, \
             level 2 (dgemv) 1.30x, level 3 (dgemm) 1.02x; level 1 > level 2 > level 3: holds."
        );
        let doc =
            serde_json::json!({"parts": {"blas": {"result": serde_json::to_value(&r).unwrap()}}});
        assert!(crate::report::claims::check_claim(c, &doc).is_empty());
        // One memory node: the verdict alone.
        let mut one = r.clone();
        one.memory_nodes = crate::IdSet::single(0);
        let mut b = SummaryBuilder::for_tests(&m, "/parts/blas/result");
        summarize(&one, &mut b);
        assert!(b.claims()[0].figures.is_empty());
    }

    #[test]
    fn part_is_full_only_and_needs_a_node_with_an_allowed_cpu() {
        let info = ReportPart::info(&BlasPart);
        assert!(info.full_only);
        assert_eq!(info.name, "blas");
        // Nodes 2-3 are allowed, but none of their CPUs is.
        let m = fixture("16amd64-4n4c-cgroup-distance-merge.xml");
        assert!(ReportPart::applicable(&BlasPart, &m)
            .unwrap_err()
            .contains("a node with a CPU this process may use"));
        let ring = fixture("qemu-quartet-4n2c-ring.xml");
        assert!(ReportPart::applicable(&BlasPart, &ring).is_ok());
    }

    #[test]
    fn plan_text_lists_every_run_with_its_operand_nodes() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let req = BlasRequest {
            kernels: vec![Kernel::Daxpy],
            n: Some(8),
            cpu_nodes: Some(crate::IdSet::single(0)),
            full: false,
            rule: StopRule::default(),
            check: false,
            parallel: None,
            seed: 1,
        };
        let t = plan_text(&plan(&m, &req).unwrap());
        assert!(t.starts_with("9 placement(s) to run:\n"), "{t}");
        assert_eq!(t.lines().count(), 2 + 9, "{t}");
        assert!(
            t.contains("daxpy     0    0  0/0            1  x@0 y@0"),
            "{t}"
        );
        assert!(
            t.contains("daxpy     0    0  1/2            2  x@1 y@3"),
            "{t}"
        );
    }
}
