//! BLAS placement sensitivity (`numalab blas`, report part `blas`, only
//! with `--full`). The text `numalab blas` prints: how OpenBLAS was kept to
//! one thread, then per kernel one row per placement (CPU node, hop class,
//! operands' nodes, GFLOPS, pages verified), its sensitivity and
//! per-hop-class figures, then the level finding with its rule; and the
//! `--list` plan. The report part runs the serial mode, every CPU node's
//! placements folded by hop class, with `n` cut to fit its budget.

use crate::csv::{num, yes, Table};
use crate::html::Section;
use crate::model::{spread, Costs, PartPlan, Work};
use crate::part::{default_rule, Measured, PartContext, PartInfo, ReportPart, MIN_MEASUREMENT_S};
use crate::plan::PlanEnv;
use crate::summary::{finding, SummaryBuilder};
use crate::svg::{bar_chart, Bar, BarGroup};
use numalab::experiments::blas::{
    self, plan as plan_runs, run_blas, BlasRequest, BlasResult, Kernel, ParallelClass, PlannedRun,
    DEFAULT_N,
};
use numalab::machine::Machine;
use numalab::measure::stats::StopRule;
use numalab::placement::PlacementError;
use numalab::text::format::significant;
use numalab::IdSet;
use std::collections::HashMap;
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

/// Placements per kernel (in [`Kernel::ALL`] order) of threads on
/// `nodes` together: the machine's automorphisms fold placements across
/// the nodes, so a set's count is not the sum of its nodes' alone. `None`
/// when `blas` would refuse the plan (too many placements).
fn runs_of(m: &Machine, nodes: &IdSet) -> Option<[usize; 4]> {
    let req = request(nodes.clone(), 1, MIN_MEASUREMENT_S);
    let mut counts = [0usize; 4];
    for r in plan_runs(m, &req).ok()? {
        counts[r.kernel as usize] += 1;
    }
    Some(counts)
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
    let nodes: Vec<u32> = thread_nodes(env.m).iter().collect();
    let counted: std::cell::RefCell<HashMap<Vec<usize>, Option<[usize; 4]>>> = Default::default();
    let runs = |chosen: &[usize]| -> Option<[usize; 4]> {
        *counted
            .borrow_mut()
            .entry(chosen.to_vec())
            .or_insert_with(|| runs_of(env.m, &chosen.iter().map(|&i| nodes[i]).collect()))
    };
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
    let cost = |chosen: &[usize], n: usize, per: f64| -> f64 {
        let Some(counts) = runs(chosen) else {
            return f64::INFINITY;
        };
        Kernel::ALL
            .iter()
            .map(|&k| counts[k as usize] as f64 * placement_s(c, k, n, per))
            .sum()
    };
    let placements = |chosen: &[usize]| -> usize { runs(chosen).map_or(0, |c| c.iter().sum()) };
    let all: Vec<usize> = (0..nodes.len()).collect();
    let fits = ladder
        .iter()
        .copied()
        .find(|&n| cost(&all, n, MIN_MEASUREMENT_S) <= budget);
    let (n, chosen) = match fits {
        Some(n) => (n, all.clone()),
        None => {
            let n = *ladder.last().unwrap_or(&smallest);
            // More CPU nodes cost nothing where automorphisms fold them
            // onto the first: keep them all if that costs no more than the
            // smallest form, else as many as that cost allows, growing
            // until one more does not fit. The walk
            // stops there because an irregular subset of a big machine
            // (every CPU node but a few of 64) has few automorphisms and
            // each is found only by a long search.
            let least = budget.max(cost(&spread(all.len(), 1), n, MIN_MEASUREMENT_S));
            let fit = |k: usize| cost(&spread(all.len(), k), n, MIN_MEASUREMENT_S) <= least;
            let k = if fit(all.len()) {
                all.len()
            } else {
                (2..all.len()).take_while(|&k| fit(k)).last().unwrap_or(1)
            };
            (n, spread(all.len(), k))
        }
    };
    let count = placements(&chosen);
    let spare = budget - cost(&chosen, n, MIN_MEASUREMENT_S);
    let per = (MIN_MEASUREMENT_S + spare.max(0.0) / count.max(1) as f64)
        .clamp(MIN_MEASUREMENT_S, MAX_PER_PLACEMENT_S);
    let predicted = cost(&chosen, n, per);
    let measuring = count as f64 * per;
    let cpu_nodes: IdSet = chosen.iter().map(|&i| nodes[i]).collect();
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
            ..Work::default()
        }
        .count_of("rows", "CPU nodes", chosen.len(), all.len()),
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
                "contention",
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
                    p.contention.map_or_else(String::new, |c| num(c, 6)),
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
            numalab::text::escape::xml(&f.verdict),
            r.n,
            numalab::text::escape::xml(&r.cpu_nodes.to_string())
        ));
        s.table("blas-levels", false);
        s.note(&format!(
            "Sensitivity = best / worst median GFLOPS over the placements of a kernel. Rule: {}. OpenBLAS: {} ({} thread after).",
            f.rule, r.openblas.method, r.openblas.num_threads_after
        ));
        for k in r.kernels.iter().filter(|k| !k.placements.is_empty()) {
            s.figure(
                contention_chart(k),
                &format!(
                    "{}: each measured placement's median GFLOPS, grouped and ordered by its contention in the placement distribution model (lowest first), as the study's Figure 2; a bar stands for its class of placements under the machine's automorphisms. {}",
                    k.kernel.name(),
                    k.contention_finding
                        .as_ref()
                        .map(|f| format!("Non-local placement of lower contention beats all-local: {}.", f.verdict))
                        .unwrap_or_default()
                ),
            );
        }
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

/// The command's text: the run's settings, each kernel's placements and
/// classes, then the finding across levels.
pub fn text(r: &BlasResult) -> String {
    let mut s = String::new();
    settings_text(&mut s, r);
    for k in &r.kernels {
        kernel_text(&mut s, k);
    }
    finding_text(&mut s, r);
    s
}

/// Mode, size, nodes, OpenBLAS and the numerical check.
fn settings_text(s: &mut String, r: &BlasResult) {
    let _ = writeln!(
        s,
        "BLAS placement sensitivity, {} mode, n = {}{}; memory nodes {}, threads on CPU nodes {}",
        r.mode,
        r.n,
        match (r.mode.as_str(), r.full) {
            ("parallel", _) => ", one thread per CPU node, random placements per contention class",
            (_, true) => ", every placement",
            _ => ", one placement per class of the machine's automorphisms",
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
    if !r.openblas.core.is_empty() {
        let _ = writeln!(
            s,
            "OpenBLAS core type: {} ({} kernels; this CPU runs {}{})",
            r.openblas.core,
            r.openblas.core_isa,
            r.openblas.cpu_isa,
            r.openblas
                .env_openblas_coretype
                .as_ref()
                .map(|v| format!("; OPENBLAS_CORETYPE={v}"))
                .unwrap_or_default()
        );
    }
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
}

/// One kernel: its placements, contention classes, sensitivity and finding.
fn kernel_text(s: &mut String, k: &blas::KernelResult) {
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
            "  {:>4}  {:<9} {:>10} {:>6}  {:<24} {:>9} {:>7}  pages",
            "node", "hops", "contention", "stands", "operands", "GFLOPS", "±CI"
        );
    }
    for p in &k.placements {
        let nodes: Vec<u32> = p.operands.iter().map(|o| o.node).collect();
        let _ = writeln!(
            s,
            "  {:>4}  {:<9} {:>10} {:>6}  {:<24} {:>9} {:>6.1}%  {}",
            p.cpu_node,
            p.class,
            contention_text(p.contention),
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
        if sens.per_contention.len() > 1 {
            let per: Vec<String> = sens
                .per_contention
                .iter()
                .map(|c| {
                    format!(
                        "{} {} ({} run, {} placements)",
                        contention_text(Some(c.contention)),
                        gf(c.median_gflops),
                        c.placements,
                        c.stands_for
                    )
                })
                .collect();
            let _ = writeln!(
                s,
                "  median GFLOPS by contention, lowest first: {}",
                per.join(", ")
            );
        }
    }
    if let Some(f) = &k.contention_finding {
        let _ = writeln!(
            s,
            "  a non-local placement of lower contention beats all-local: {}",
            f.verdict
        );
    }
}

/// Whether sensitivity falls from level 1 to 3, and the rules.
fn finding_text(s: &mut String, r: &BlasResult) {
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
    if r.kernels.iter().any(|k| k.contention_finding.is_some()) {
        let _ = writeln!(s, "contention rule: {}", blas::CONTENTION_RULE);
    }
}

/// The study's Figure 2 for one kernel: its serial placements' GFLOPS, one
/// group per contention value, lowest first; placements without a value
/// (no links inferred) last.
pub fn contention_chart(k: &blas::KernelResult) -> String {
    let mut groups: Vec<(Option<f64>, Vec<Bar>)> = Vec::new();
    let mut placements: Vec<&blas::PlacementResult> = k.placements.iter().collect();
    placements.sort_by(|a, b| {
        let key = |c: Option<f64>| c.unwrap_or(f64::INFINITY);
        key(a.contention)
            .total_cmp(&key(b.contention))
            .then(b.gflops.median.total_cmp(&a.gflops.median))
    });
    for p in placements {
        let bar = Bar {
            label: format!("{} t@{}", blas::placement_label(p), p.cpu_node),
            value: p.gflops.median,
            tooltip: format!(
                "thread on node {} (CPU {}), hops {}, stands for {} placement(s), contention {}",
                p.cpu_node,
                p.cpu,
                p.class,
                p.stands_for,
                contention_text(p.contention)
            ),
            flagged: !p.verified,
            interval: Bar::relative_interval(p.gflops.median, p.gflops.rel_ci),
            series: None,
        };
        let same = |c: &Option<f64>| match (c, p.contention) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-6,
            (None, None) => true,
            _ => false,
        };
        match groups.last_mut() {
            Some((c, bars)) if same(c) => bars.push(bar),
            _ => groups.push((p.contention, vec![bar])),
        }
    }
    let groups: Vec<BarGroup> = groups
        .into_iter()
        .map(|(c, bars)| BarGroup {
            label: format!("contention {}", contention_text(c)),
            bars,
        })
        .collect();
    bar_chart(
        &format!("blas-contention-{}", k.kernel.name()),
        &format!("{} GFLOPS by placement contention", k.kernel.name()),
        "GFLOPS",
        &groups,
        None,
    )
}

/// A contention value as the model gives it (shares of split paths show
/// as decimals), `-` without one.
fn contention_text(c: Option<f64>) -> String {
    match c {
        Some(x) if x.is_finite() => significant(x, 3),
        _ => "-".into(),
    }
}

/// The `--list` text: the placements a run would measure.
pub fn plan_text(runs: &[PlannedRun]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} placement(s) to run:\n  {:<6} {:>4} {:>4}  {:<9} {:>6} {:>10}  operands",
        runs.len(),
        "kernel",
        "node",
        "cpu",
        "hops",
        "stands",
        "contention"
    );
    for r in runs {
        let _ = writeln!(
            s,
            "  {:<6} {:>4} {:>4}  {:<9} {:>6} {:>10}  {}",
            r.kernel.name(),
            r.cpu_node,
            r.cpu,
            r.class,
            r.stands_for,
            contention_text(r.contention),
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
    use crate::fixture;
    use crate::model::Mode;
    use numalab::experiments::blas::{plan, BlasRequest, Kernel};
    use numalab::measure::stats::StopRule;

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
        // The ring's placements of a thread and q operands under its 8
        // automorphisms: daxpy 10, triad 36, dgemv 36, dgemm 36 = 118, the
        // same whether the thread may be on one node (its reflection
        // folds) or on all four (every node is alike).
        let (w, p) = work(&e, 1e6);
        assert_eq!(w.n, 1600);
        assert_eq!(w.cpu_nodes.to_string(), "0-3");
        assert_eq!(p.work.measurements, 118);
        assert_eq!(p.work.get("rows"), Some(crate::model::CountValue::Of(4, 4)));
        assert_eq!(p.cut, None);
        assert!(p.predicted_s <= 1e6);
        // No budget: the smallest n, and the plan says so; every CPU node
        // is kept, since on the ring they cost no more than one.
        let (w, p) = work(&e, 0.0);
        assert_eq!(w.n, 50);
        assert_eq!(w.cpu_nodes.to_string(), "0-3");
        assert_eq!(p.work.measurements, 118);
        assert_eq!(w.per_placement_s, MIN_MEASUREMENT_S);
        let cut = p.cut.unwrap();
        assert!(cut.contains("n = 50 instead of 1600"), "{cut}");
        assert!(!cut.contains("CPU nodes"), "{cut}");
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
        assert!(crate::claims::check_claim(c, &doc).is_empty());
        // One memory node: the verdict alone.
        let mut one = r.clone();
        one.memory_nodes = numalab::IdSet::single(0);
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

    /// The study's Figure 2 order: groups by contention, lowest first,
    /// whatever order the placements ran in; each bar names its operands.
    #[test]
    fn contention_chart_orders_placements_by_contention() {
        let placement = |nodes: [u32; 3], contention: f64, gflops: f64| {
            let operands: Vec<serde_json::Value> = ["A", "B", "C"]
                .iter()
                .zip(nodes)
                .map(|(n, v)| {
                    serde_json::json!({"name": n, "node": v, "hops": null, "bytes": 0,
                        "pages_by_node": {}, "verified": true, "problems": []})
                })
                .collect();
            serde_json::json!({
                "cpu_node": 0, "cpu": 0, "hops": [], "class": "x", "stands_for": 1,
                "contention": contention,
                "gflops": {"median": gflops, "best": gflops, "min": gflops, "max": gflops,
                           "spread": 0.0, "rel_ci": 0.01},
                "calls_per_sample": 1, "samples": 3, "verified": true,
                "operands": operands
            })
        };
        let k: blas::KernelResult = serde_json::from_value(serde_json::json!({
            "kernel": "dgemm", "level": 3, "n": 8, "operands": ["A", "B", "C"],
            "elements": [64, 64, 64], "flops_per_call": 1024.0, "sensitivity": null,
            "placements": [
                placement([0, 0, 0], 3.0, 9.0),
                placement([0, 1, 1], 2.0, 10.0),
                placement([0, 1, 2], 1.0, 12.0),
                placement([0, 2, 2], 2.0, 11.0),
            ]
        }))
        .unwrap();
        let svg = contention_chart(&k);
        let at = |t: &str| {
            svg.find(t)
                .unwrap_or_else(|| panic!("{t} not in the chart"))
        };
        assert!(at("contention 1") < at("contention 2"));
        assert!(at("contention 2") < at("contention 3"));
        assert!(at("A@0 B@1 C@2 t@0") < at("A@0 B@2 C@2 t@0"));
        assert!(
            at("A@0 B@2 C@2 t@0") < at("A@0 B@1 C@1 t@0"),
            "faster first within a group"
        );
        assert!(at("A@0 B@1 C@1 t@0") < at("A@0 B@0 C@0 t@0"));
    }

    #[test]
    fn plan_text_lists_every_run_with_its_operand_nodes() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let req = BlasRequest {
            kernels: vec![Kernel::Daxpy],
            n: Some(8),
            cpu_nodes: Some(numalab::IdSet::single(0)),
            full: false,
            rule: StopRule::default(),
            check: false,
            parallel: None,
            seed: 1,
        };
        let t = plan_text(&plan(&m, &req).unwrap());
        // Node 0's 16 placements under the ring's reflection through
        // node 0 (1 and 2 swap): 10 classes; x@1 y@1 and x@1 y@2 share the
        // hop tuple 1/1 but not the links they load.
        assert!(t.starts_with("10 placement(s) to run:\n"), "{t}");
        assert_eq!(t.lines().count(), 2 + 10, "{t}");
        // Contention: y written moves both ways and x@1 y@1 loads the
        // link 1->0 twice; y two hops away splits over both paths (0.5).
        let row = |hops: &str, stands: u64, contention: &str, ops: &str| {
            format!("  daxpy     0    0  {hops:<9} {stands:>6} {contention:>10}  {ops}\n")
        };
        for r in [
            row("0/0", 1, "2", "x@0 y@0"),
            row("1/2", 2, "1.5", "x@1 y@3"),
            row("1/1", 2, "2", "x@1 y@1"),
            row("1/1", 2, "1", "x@1 y@2"),
        ] {
            assert!(t.contains(&r), "{r} in {t}");
        }
    }
}
