//! How `numalab report` keeps its budget on any machine: what each part
//! costs, what work it does for a share of the budget, and how the budget
//! is shared so that every part runs.
//!
//! **Costs.** A part's time is its measurements' budgets plus fixed costs
//! nobody sets: placing, faulting and checking buffers, building and
//! warming pointer chases, starting threads, and the floor of a
//! measurement (a sizing sample, a warm-up and at least two repetitions,
//! each at least one pass over the buffer). Those scale with what the part
//! does (threads, bytes, pairs, cells), so the report measures the
//! *operations* once at the start ([`probe`]: a buffer faulted, a chase
//! built and walked, a read pass, threads started; about half a second) and
//! every part predicts its cost from them with its own model ([`Costs`]
//! helpers, called from each part's [`crate::part::ReportPart::plan`]).
//!
//! **Work.** Each part turns a share of the budget into work
//! ([`PartPlan`]): it keeps its full form when that fits, and otherwise
//! shrinks it (fewer sizes or ladder steps, a sample of CPU pairs, fewer
//! sweep cases with every hop class kept, buffers down to twice the
//! last-level cache). Its smallest form is what it does with no budget at
//! all; every part has one, so no applicable part is ever dropped for time.
//!
//! **Sharing.** [`allocate`] gives every part its smallest form first and
//! shares the rest by weight. The session re-plans before each part from
//! the time really left and from [`Costs::factor`], the ratio of real to
//! predicted fixed costs of the parts done so far ([`corrected_factor`]).
//! A budget below what the smallest forms need ([`required_budget`]) is
//! raised for the defaults and warned about when given with `--budget`.

use crate::model::drift::MIN_PROBES;
use crate::model::{CostSource, Costs, Mode, PartName, PartPlan, Work};
use crate::plan::{default_budget, PlanEnv, RESERVE_SECONDS};
use crate::registry::Registry;
use numalab::machine::Machine;
use serde::{Deserialize, Serialize};

/// The plan of `p` for `budget_s` seconds on `env`.
pub fn plan_part(reg: &Registry, env: &PlanEnv, p: PartName, budget_s: f64) -> PartPlan {
    reg.part(p).plan(env, budget_s.max(0.0))
}

/// Seconds the smallest forms of `parts` need, with the reserve for
/// writing the report.
pub fn required_budget(reg: &Registry, env: &PlanEnv, parts: &[PartName]) -> f64 {
    parts
        .iter()
        .map(|&p| plan_part(reg, env, p, 0.0).predicted_s)
        .sum::<f64>()
        + RESERVE_SECONDS
}

/// The shares of `left` seconds for `parts` (in run order): each its
/// smallest form, and what is left over by weight. When the smallest forms
/// do not fit, each gets its smallest form anyway (the run will overrun;
/// [`required_budget`] says by how much).
pub fn allocate(
    reg: &Registry,
    env: &PlanEnv,
    parts: &[PartName],
    left: f64,
) -> Vec<(PartName, f64)> {
    let mins: Vec<f64> = parts
        .iter()
        .map(|&p| plan_part(reg, env, p, 0.0).predicted_s)
        .collect();
    let spare = left - mins.iter().sum::<f64>();
    let weights: Vec<f64> = parts
        .iter()
        .map(|&p| reg.part(p).info().weight_in(env.mode))
        .collect();
    let total_w: f64 = weights.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    parts
        .iter()
        .zip(mins.iter().zip(&weights))
        .map(|(&p, (&min, &w))| (p, min + spare.max(0.0) * w / total_w))
        .collect()
}

/// Every selected part's plan for a run of `budget_s` seconds that starts
/// now (the dry run shows it; the session re-plans as it goes).
pub fn plan_all(
    reg: &Registry,
    env: &PlanEnv,
    parts: &[PartName],
    budget_s: f64,
) -> Vec<(PartName, PartPlan)> {
    let shares = allocate(reg, env, parts, budget_s - RESERVE_SECONDS);
    // Parts that cannot use their whole share give the rest to the later
    // ones, as the session does when they finish early.
    let mut out = Vec::with_capacity(parts.len());
    let mut carry = 0.0;
    for (i, &(p, share)) in shares.iter().enumerate() {
        let rest: Vec<PartName> = parts[i + 1..].to_vec();
        let w_rest: f64 = rest
            .iter()
            .map(|&q| reg.part(q).info().weight_in(env.mode))
            .sum();
        let w = reg.part(p).info().weight_in(env.mode);
        let mine = share + carry * w / (w + w_rest).max(f64::MIN_POSITIVE);
        carry -= carry * w / (w + w_rest).max(f64::MIN_POSITIVE);
        let plan = plan_part(reg, env, p, mine);
        carry += (mine - plan.predicted_s).max(0.0);
        out.push((p, plan));
    }
    out
}

/// The budget a run gets: `asked` (`--budget`) as given, or the mode's
/// default raised to what the smallest forms of the parts need. Returns the
/// budget and, when it is short or was raised, a sentence saying so.
pub fn effective_budget(
    reg: &Registry,
    env: &PlanEnv,
    parts: &[PartName],
    asked: Option<f64>,
) -> (f64, Option<String>) {
    let required = required_budget(reg, env, parts);
    match asked {
        Some(b) if b < required => (
            b,
            Some(format!(
                "--budget {b:.0} s is below the {required:.0} s the smallest forms of these parts need here: every part still runs in its smallest form, so the report will take about {required:.0} s; give --budget {:.0} or fewer --parts",
                required.ceil()
            )),
        ),
        Some(b) => (b, None),
        None => {
            let default = default_budget(env.m, env.mode);
            if default < required {
                (
                    required.ceil(),
                    Some(format!(
                        "the default budget ({default:.0} s) was raised to {:.0} s: the smallest forms of the parts need that long on this machine",
                        required.ceil()
                    )),
                )
            } else {
                (default, None)
            }
        }
    }
}

/// One part in a dry run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DryRunPart {
    pub name: PartName,
    pub applicable: bool,
    /// Why it is not planned (not applicable, or left out with `--parts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub planned: bool,
    pub predicted_s: Option<f64>,
    pub work: Option<Work>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

/// What `numalab report --dry-run` prints: the plan of every part for the
/// budget, and the costs it was made with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DryRun {
    pub mode: Mode,
    pub budget_s: f64,
    /// Seconds the smallest forms of the planned parts need.
    pub required_s: f64,
    pub predicted_total_s: f64,
    pub costs: Costs,
    pub parts: Vec<DryRunPart>,
    pub warnings: Vec<String>,
    /// Whether the run would look at the host's speed between its parts
    /// (on the live machine only; absent for a topology file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub looks: Option<DryRunLooks>,
}

/// The looks at the host's speed a run plans ([`looks_fit`]: three of
/// them within a quarter of the budget, judged again after the first from
/// its own time).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DryRunLooks {
    /// One look's predicted seconds, from the costs.
    pub look_s: f64,
    /// Whether the run looks (the first look's own time decides the rest).
    pub planned: bool,
    /// Why not, with the budget that gives them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Each measurement of a look, seconds.
pub const LOOK_MEASUREMENT_S: f64 = 0.1;

/// The share of a run's budget its looks at the host's speed may take. A
/// look is not a part: its time comes out of the parts', and its cost
/// grows with the buffers, sized by the last-level cache (a look over the
/// 1.9 GiB buffers of a host with a 480 MiB cache took 14 s here, where
/// `--budget 4` made a report of 35 s).
pub const LOOK_SHARE: f64 = 0.25;

/// What one look at the host's speed between a report's parts
/// ([`probe_speed`]) is expected to take on `m` with `costs`, over buffers
/// of `bytes`: placing and faulting
/// its buffers (the chase's, one thread's read and two threads' reads),
/// building the chase, warming it (two last-level caches of dependent
/// loads at most, as the latency measurement does), and four
/// measurements of a tenth of a second each.
///
/// [`probe_speed`]: numalab::measure::probe::probe_speed
pub fn look_cost_s(m: &Machine, costs: &Costs, bytes: usize) -> f64 {
    let llc = m.last_level_cache_bytes().unwrap_or(32 << 20) as f64;
    let b = bytes as f64;
    let each = LOOK_MEASUREMENT_S;
    2.0 * costs.place(b, 1)
        + costs.place(2.0 * b, 2)
        + costs.chase(b, llc)
        + 2.0 * costs.measurement(each, costs.bandwidth_sample(b, 1))
        + costs.measurement(each, costs.bandwidth_sample(b, 2))
        + costs.measurement(each, 0.0)
}

/// Whether a run of `budget_s` looks at the host: only when the looks
/// that estimate a drift ([`MIN_PROBES`]), at `look_s` each, fit in
/// [`LOOK_SHARE`] of it (two looks show no drift). `look_s` is predicted
/// before the first look and that look's own time after it (`taken`).
/// `Err`: why not, with the budget that would.
pub fn looks_fit(look_s: f64, budget_s: f64, taken: bool) -> Result<(), String> {
    let needed = MIN_PROBES as f64 * look_s;
    if needed <= LOOK_SHARE * budget_s {
        return Ok(());
    }
    let look = if taken {
        format!("its one look at the host's speed took {look_s:.1} s")
    } else {
        format!("a look at the host's speed would take about {look_s:.1} s here")
    };
    Err(format!(
        "{look}, and the {MIN_PROBES} that estimate a drift more than a quarter of the {budget_s:.0} s budget (--budget {:.0} or more, or a smaller --size, gives them)",
        (needed / LOOK_SHARE).ceil()
    ))
}

/// The buffer size of a look at the host's speed, for parts' buffers of
/// `buffer_bytes` (0: the default): the parts' where it is smaller than the
/// default (the user's --size, on a small or emulated machine), so that a
/// look is no dearer than the measurements it watches.
pub fn look_bytes_for(m: &Machine, buffer_bytes: u64) -> usize {
    let default = numalab::measure::harness::default_buffer_bytes(m);
    match usize::try_from(buffer_bytes) {
        Ok(b) if b > 0 => b.min(default),
        _ => default,
    }
}

/// The plan of a report of `env`'s machine with the `selected` parts and
/// `--budget` `asked`.
pub fn dry_run(reg: &Registry, env: &PlanEnv, selected: &[PartName], asked: Option<f64>) -> DryRun {
    let runnable: Vec<PartName> = selected
        .iter()
        .copied()
        .filter(|p| reg.available(*p, env.m, env.mode).is_ok())
        .collect();
    let (budget, warning) = effective_budget(reg, env, &runnable, asked);
    let plans = plan_all(reg, env, &runnable, budget);
    let parts = reg
        .all()
        .into_iter()
        .map(|p| {
            let applicable = reg.available(p, env.m, env.mode);
            let plan = plans.iter().find(|x| x.0 == p).map(|x| x.1.clone());
            DryRunPart {
                name: p,
                applicable: applicable.is_ok(),
                reason: match (&applicable, selected.contains(&p)) {
                    (Err(why), _) => Some(why.clone()),
                    (Ok(()), false) => Some("left out with --parts".into()),
                    _ => None,
                },
                planned: plan.is_some(),
                predicted_s: plan.as_ref().map(|x| x.predicted_s),
                cut: plan.as_ref().and_then(|x| x.cut.clone()),
                work: plan.map(|x| x.work),
            }
        })
        .collect::<Vec<_>>();
    DryRun {
        mode: env.mode,
        budget_s: budget,
        required_s: required_budget(reg, env, &runnable),
        predicted_total_s: plans.iter().map(|x| x.1.predicted_s).sum::<f64>() + RESERVE_SECONDS,
        costs: env.costs.clone(),
        parts,
        warnings: warning.into_iter().collect(),
        looks: env.live.then(|| {
            let bytes = look_bytes_for(env.m, env.size as u64);
            let look_s = look_cost_s(env.m, env.costs, bytes);
            let fit = looks_fit(look_s, budget, false);
            DryRunLooks {
                look_s,
                planned: fit.is_ok(),
                reason: fit.err(),
            }
        }),
    }
}

/// The correction of [`Costs::factor`] after a part that predicted
/// `fixed` seconds of fixed costs and `measuring` seconds of measurement
/// and took `elapsed` in all: the mean of the old factor and the
/// real-over-predicted ratio (bounded, so one odd part cannot derail the
/// rest).
pub fn corrected_factor(old: f64, measuring: f64, fixed: f64, elapsed: f64) -> f64 {
    if fixed <= 0.01 {
        return old;
    }
    let real_fixed = (elapsed - measuring).max(0.0);
    // `fixed` was predicted with `old` applied: the ratio corrects it.
    let ratio = (old * real_fixed / fixed).clamp(0.3 * old, 5.0 * old);
    ((old + ratio) / 2.0).clamp(0.2, 20.0)
}

/// Measures the operations of [`Costs`] on the live machine from `cpu`
/// (about half a second on a small VM; `numalab::measure::probe`, in the
/// engine's optimized build); what could not be measured keeps its
/// reference value.
pub fn probe(m: &Machine, cpu: u32) -> Costs {
    let mut c = Costs::reference();
    c.source = CostSource::Probed;
    let Some(p) = numalab::measure::probe::probe_operations(m, cpu) else {
        return c;
    };
    if let Some(v) = p.fault_s_per_gib {
        c.fault_s_per_gib = v.max(0.01);
    }
    if let Some(v) = p.pass_s_per_gib {
        c.pass_s_per_gib = v.max(0.005);
    }
    if let Some(v) = p.chase_s_per_mib {
        c.chase_s_per_mib = v.max(1e-4);
    }
    if let Some(v) = p.load_ns {
        c.load_ns = v.max(5.0);
    }
    c.thread_s = p.thread_s.max(1e-5);
    c.measurement_s = (c.thread_s * 10.0).max(0.005);
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use crate::registry::REPORT;

    #[test]
    fn the_factor_follows_real_fixed_costs_within_bounds() {
        // 2 s planned measuring, 1 s fixed predicted, 4 s taken: fixed was
        // 2 s, twice the prediction.
        assert!((corrected_factor(1.0, 2.0, 1.0, 4.0) - 1.5).abs() < 1e-12);
        // Wildly off: bounded at 5x.
        assert!((corrected_factor(1.0, 0.0, 0.1, 100.0) - 3.0).abs() < 1e-12);
        // Nothing predicted: nothing learnt.
        assert_eq!(corrected_factor(1.7, 1.0, 0.0, 9.0), 1.7);
    }

    /// A plan of the live machine says whether its run would look at the
    /// host (the session's rule, with the look's predicted time); a
    /// topology file's plan has no looks.
    #[test]
    fn a_live_plan_says_whether_the_run_looks_at_the_host() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let costs = Costs::reference();
        let mut env = PlanEnv {
            m: &m,
            mode: Mode::Quick,
            size: 64 << 20,
            costs: &costs,
            live: false,
        };
        let c2c = [REPORT.find("c2c").unwrap()];
        assert!(dry_run(&REPORT, &env, &c2c, Some(60.0)).looks.is_none());
        env.live = true;
        let look_s = look_cost_s(&m, &costs, 64 << 20);
        let room = dry_run(&REPORT, &env, &c2c, Some(60.0)).looks.unwrap();
        assert_eq!(
            (room.look_s, room.planned, room.reason),
            (look_s, true, None)
        );
        let tight = dry_run(&REPORT, &env, &c2c, Some(2.0)).looks.unwrap();
        assert!(!tight.planned);
        assert_eq!(
            tight.reason,
            looks_fit(look_s, tight_budget(&env, &c2c), false).err()
        );
    }

    /// The budget a plan with `--budget 2` gets (raised to what the
    /// smallest forms need).
    fn tight_budget(env: &PlanEnv, parts: &[PartName]) -> f64 {
        dry_run(&REPORT, env, parts, Some(2.0)).budget_s
    }

    #[test]
    fn topology_plans_fit_the_nodes_memory() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let costs = Costs::reference();
        let env = PlanEnv {
            m: &m,
            mode: Mode::Default,
            size: 1 << 30,
            costs: &costs,
            live: false,
        };
        // 491 MiB nodes: two buffers of 60% of that each.
        let b = env.fit(0, 2, 1 << 30, 0.6);
        assert!((140 << 20..160 << 20).contains(&b), "{b}");
    }

    /// Every topology fixture, by file name.
    fn fixtures() -> Vec<(String, Machine)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/topologies");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".xml"))
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|n| (n.clone(), fixture(&n)))
            .collect()
    }

    fn env<'a>(m: &'a Machine, mode: Mode, costs: &'a Costs) -> PlanEnv<'a> {
        PlanEnv {
            m,
            mode,
            size: numalab::measure::harness::default_buffer_bytes(m),
            costs,
            live: false,
        }
    }

    #[test]
    fn every_fixture_plans_every_applicable_part_within_budget() {
        let presets = [
            Costs::fast_server(),
            Costs::reference(),
            Costs::slower(50.0),
        ];
        let mut raised = Vec::new();
        let mut bad = Vec::new();
        for (name, m) in fixtures() {
            for costs in &presets {
                for mode in [Mode::Quick, Mode::Default, Mode::Full] {
                    let e = env(&m, mode, costs);
                    let d = dry_run(&REPORT, &e, &REPORT.all(), None);
                    let what = format!("{name}, {:?}, {mode:?}", costs.source);
                    for p in &d.parts {
                        if p.planned != p.applicable
                            || (p.planned && p.work.as_ref().map_or(0, |w| w.measurements) == 0)
                        {
                            bad.push(format!("{what}: {:?} {:?}", p.name, p.reason));
                        }
                    }
                    assert!(
                        d.predicted_total_s <= d.budget_s * 1.0001,
                        "{what}: predicted {:.1} s of {:.1} s",
                        d.predicted_total_s,
                        d.budget_s
                    );
                    let default = crate::plan::default_budget(&m, mode);
                    // A real machine's default may grow a little (a matrix
                    // keeps every row up to eight CPU nodes: the KNL fixture
                    // needs 1.27x in --quick); only the
                    // emulator needs much more.
                    let slow = matches!(&costs.source, CostSource::Preset(p) if p.contains("x50"));
                    if !slow && d.budget_s > default * 1.3 {
                        raised.push(format!("{what}: {:.0} s of {default:.0}", d.budget_s));
                    }
                }
            }
        }
        assert!(bad.is_empty(), "applicable parts not planned: {bad:#?}");
        assert!(raised.is_empty(), "raised on a real machine: {raised:#?}");
    }

    #[test]
    fn each_part_keeps_within_any_share_above_its_smallest_form() {
        let costs = Costs::reference();
        for name in [
            "qemu-quartet-4n2c-ring.xml",
            "256ia64-64n2s2c.xml",
            "192em64t-24n8c2t.xml",
        ] {
            let m = fixture(name);
            let e = env(&m, Mode::Default, &costs);
            for p in REPORT.all() {
                // Full-only parts too: their plan must keep any share.
                if REPORT.part(p).applicable(&m).is_err() {
                    continue;
                }
                let min = plan_part(&REPORT, &e, p, 0.0).predicted_s;
                for k in [1.0, 1.5, 3.0, 10.0, 100.0] {
                    let b = min * k;
                    let plan = plan_part(&REPORT, &e, p, b);
                    assert!(
                        plan.predicted_s <= b * 1.0001,
                        "{name} {p:?}: {:.2} s planned for {b:.2} s",
                        plan.predicted_s
                    );
                    assert!(plan.predicted_s >= min * 0.999, "{name} {p:?}");
                }
            }
        }
    }

    /// Runs a simulated report: each part takes its fixed costs at the
    /// reference's prices times `slow(i)` plus its measuring time, and the session's loop
    /// re-plans from what is left. Returns the total and the parts' plans.
    fn simulate(m: &Machine, budget: f64, slow: impl Fn(usize) -> f64) -> (f64, Vec<PartPlan>) {
        let parts: Vec<PartName> = REPORT
            .all()
            .into_iter()
            .filter(|p| REPORT.available(*p, m, Mode::Default).is_ok())
            .collect();
        let mut costs = Costs::reference();
        let mut spent = 0.0;
        let mut plans = Vec::new();
        for i in 0..parts.len() {
            let e = env(m, Mode::Default, &costs);
            let left = budget - spent - crate::plan::RESERVE_SECONDS;
            let share = allocate(&REPORT, &e, &parts[i..], left)[0].1;
            let plan = plan_part(&REPORT, &e, parts[i], share);
            // A part that keeps its own deadline ends at it.
            let took = if REPORT.part(parts[i]).info().keeps_deadline {
                share
            } else {
                // The machine's fixed costs are `slow(i)` times the
                // reference's: the prediction has the learnt factor in it,
                // which must not compound with them.
                plan.measuring_s + plan.fixed_s() / costs.factor * slow(i)
            };
            eprintln!(
                "sim {:?} left {left:.1} share {share:.1} predicted {:.1} took {took:.1}",
                parts[i], plan.predicted_s
            );
            spent += took;
            if !REPORT.part(parts[i]).info().keeps_deadline {
                costs.factor =
                    corrected_factor(costs.factor, plan.measuring_s, plan.fixed_s(), took);
            }
            plans.push(plan);
        }
        (spent + crate::plan::RESERVE_SECONDS, plans)
    }

    #[test]
    fn replanning_absorbs_costs_that_change_mid_run() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let budget = crate::plan::default_budget(&m, Mode::Default);
        // As predicted: the budget is used and kept.
        let (t, plans) = simulate(&m, budget, |_| 1.0);
        assert!(t <= budget * 1.001 && t > budget * 0.5, "{t} of {budget}");
        assert!(plans.iter().all(|p| p.predicted_s > 0.0));
        // Fixed costs twice the prediction from the third part on: later
        // parts shrink and the run still ends within 5%.
        let (t, slow_plans) = simulate(&m, budget, |i| if i >= 2 { 2.0 } else { 1.0 });
        assert!(t <= budget * 1.05, "{t} of {budget}");
        // The last part before the sweeps whose work scales with its share.
        let last = REPORT
            .all()
            .iter()
            .position(|p| p.name() == "policies")
            .unwrap();
        assert!(
            slow_plans[last].predicted_s < plans[last].predicted_s,
            "later parts get less when earlier ones overran"
        );
        // Faster than predicted: later parts get more.
        let (t, fast_plans) = simulate(&m, budget, |_| 0.5);
        assert!(t <= budget * 1.001, "{t} of {budget}");
        assert!(fast_plans[last].predicted_s >= plans[last].predicted_s * 0.999);
    }
}
