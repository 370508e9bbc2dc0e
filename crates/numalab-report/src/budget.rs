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

use crate::part::{PartName, MIN_MEASUREMENT_S};
use crate::results::Mode;
use numalab::machine::Machine;
use serde::{Deserialize, Serialize};

const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

/// Shortest sample of any measurement, seconds (the harness sizes samples
/// to at least this).
pub const SAMPLE_S: f64 = 0.02;
/// Samples a measurement takes whatever its budget: one sizing sample, one
/// warm-up and two repetitions (the stop rule never stops before two).
pub const FLOOR_SAMPLES: f64 = 4.0;

/// Where a set of costs comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CostSource {
    /// Measured on the live machine at the start of the run.
    Probed,
    /// A named set of reference costs (a topology file has no machine to
    /// measure).
    Preset(String),
}

/// Seconds of the operations every part is made of, and the learnt
/// correction of their sum.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Costs {
    /// Placing, faulting and checking one GiB of base pages from one thread.
    pub fault_s_per_gib: f64,
    /// Building a random pointer chase over one MiB.
    pub chase_s_per_mib: f64,
    /// One dependent load that misses the caches, nanoseconds.
    pub load_ns: f64,
    /// One read pass over one GiB by one thread.
    pub pass_s_per_gib: f64,
    /// Starting, pinning and joining one worker thread.
    pub thread_s: f64,
    /// Fixed cost of any measurement: checks, bookkeeping, settling.
    pub measurement_s: f64,
    /// Real over predicted fixed costs of the parts run so far (1 at the
    /// start).
    pub factor: f64,
    pub source: CostSource,
}

impl Costs {
    /// A fast two-socket server: 4 KiB faults at about 4 GiB/s, 12 GB/s
    /// per thread, 90 ns to memory.
    pub fn fast_server() -> Costs {
        Costs {
            fault_s_per_gib: 0.25,
            chase_s_per_mib: 0.000_2,
            load_ns: 90.0,
            pass_s_per_gib: 0.04,
            thread_s: 0.000_2,
            measurement_s: 0.004,
            factor: 1.0,
            source: CostSource::Preset("fast-server".into()),
        }
    }

    /// A small cloud VM like the one numalab's CI runs on (2 vCPUs): what a
    /// report assumes when it has no machine to probe.
    pub fn reference() -> Costs {
        Costs {
            fault_s_per_gib: 0.8,
            chase_s_per_mib: 0.000_5,
            load_ns: 200.0,
            pass_s_per_gib: 0.06,
            thread_s: 0.000_1,
            measurement_s: 0.01,
            factor: 1.0,
            source: CostSource::Preset("reference-vm".into()),
        }
    }

    /// Every operation `k` times slower than [`Costs::reference`] (a QEMU
    /// TCG guest is about 50 times slower).
    pub fn slower(k: f64) -> Costs {
        let r = Costs::reference();
        Costs {
            fault_s_per_gib: r.fault_s_per_gib * k,
            chase_s_per_mib: r.chase_s_per_mib * k,
            load_ns: r.load_ns * k,
            pass_s_per_gib: r.pass_s_per_gib * k,
            thread_s: r.thread_s * k,
            measurement_s: r.measurement_s * k,
            factor: 1.0,
            source: CostSource::Preset(format!("reference-vm x{k}")),
        }
    }

    /// The named presets [`Costs::preset`] knows.
    pub const PRESETS: &'static [&'static str] = &["fast-server", "reference-vm", "tcg"];

    /// A preset by name (`tcg`: 50 times the reference).
    pub fn preset(name: &str) -> Option<Costs> {
        match name {
            "fast-server" => Some(Costs::fast_server()),
            "reference-vm" => Some(Costs::reference()),
            "tcg" => Some(Costs::slower(50.0)),
            _ => None,
        }
    }

    /// Placing, faulting and checking `bytes` in all, faulted by `threads`
    /// threads at once (faults scale with threads, though not linearly: the
    /// page allocator and the page-table lock are shared).
    pub fn place(&self, bytes: f64, threads: usize) -> f64 {
        let parallel = (threads.max(1) as f64).sqrt().min(4.0);
        self.factor * self.fault_s_per_gib * bytes / GIB / parallel
    }

    /// Building a chase over `bytes` and warming it as the harness does
    /// (one walk over the buffer, at most twice the last-level cache).
    pub fn chase(&self, bytes: f64, llc: f64) -> f64 {
        let warm_lines = (bytes.min(2.0 * llc) / 64.0).max(10_000.0);
        self.factor * (self.chase_s_per_mib * bytes / MIB + warm_lines * self.load_ns * 1e-9)
    }

    /// Starting `n` worker threads.
    pub fn threads(&self, n: usize) -> f64 {
        self.factor * self.thread_s * n as f64
    }

    /// One sample of a bandwidth measurement: the longer of
    /// [`SAMPLE_S`] and one pass over `bytes_per_thread`, slowed when
    /// `sharing` threads share one memory node's bandwidth.
    pub fn bandwidth_sample(&self, bytes_per_thread: f64, sharing: usize) -> f64 {
        let slowdown = (sharing.max(1) as f64 / 2.0).max(1.0);
        (self.pass_s_per_gib * bytes_per_thread / GIB * slowdown * self.factor).max(SAMPLE_S)
    }

    /// A measurement given `budget` seconds whose samples take `sample`
    /// seconds: never less than [`FLOOR_SAMPLES`] samples.
    pub fn measurement(&self, budget: f64, sample: f64) -> f64 {
        budget.max(MIN_MEASUREMENT_S).max(FLOOR_SAMPLES * sample) + self.factor * self.measurement_s
    }

    /// What a measurement of `budget` seconds adds above its budget: the
    /// fixed part of [`Costs::measurement`].
    pub fn over_budget(&self, budget: f64, sample: f64) -> f64 {
        self.measurement(budget, sample) - budget.max(MIN_MEASUREMENT_S)
    }
}

/// What a plan runs on: the machine, the mode, the wanted buffer size and
/// the costs; `live` when buffers must fit in the machine's free memory now
/// (a topology file, or a simulation, uses the nodes' memory instead).
pub struct PlanEnv<'a> {
    pub m: &'a Machine,
    pub mode: Mode,
    /// Bytes per buffer of the memory-bound measurements, before fitting.
    pub size: usize,
    pub costs: &'a Costs,
    pub live: bool,
}

impl PlanEnv<'_> {
    /// Runs `f` with the environment a part's applicability is judged in:
    /// the default mode, the reference costs, a machine file's memory.
    pub fn for_applicability<R>(m: &Machine, f: impl FnOnce(&PlanEnv) -> R) -> R {
        let costs = Costs::reference();
        f(&PlanEnv {
            m,
            mode: Mode::Default,
            size: 2 << 20,
            costs: &costs,
            live: false,
        })
    }

    /// Bytes per buffer so that `count` buffers fit in `share` of node
    /// `node`'s memory: free memory now on a live machine
    /// ([`super::plan::fit`]), the node's memory otherwise.
    pub fn fit(&self, node: u32, count: usize, wanted: usize, share: f64) -> usize {
        if self.live {
            return super::plan::fit(node, count, wanted, share);
        }
        const STEP: usize = 2 << 20;
        let memory = self.m.node(node).map_or(u64::MAX, |n| n.memory_bytes) as f64;
        let cap = (memory * share / count.max(1) as f64).min(usize::MAX as f64) as usize;
        wanted.min(cap / STEP * STEP).max(STEP)
    }

    /// [`PlanEnv::fit`] on every node of `nodes`: the smallest.
    pub fn fit_all(&self, nodes: &[u32], count: usize, wanted: usize, share: f64) -> usize {
        nodes
            .iter()
            .map(|&n| self.fit(n, count, wanted, share))
            .min()
            .unwrap_or(wanted)
    }

    /// The last-level cache in bytes (32 MiB when the machine does not say).
    pub fn llc(&self) -> f64 {
        self.m.last_level_cache_bytes().unwrap_or(32 << 20) as f64
    }

    /// The smallest buffer a memory-bound measurement may shrink to: twice
    /// the last-level cache, at least 16 MiB, in 2 MiB steps, and never
    /// more than `bytes` (a small node keeps the buffer it can hold).
    pub fn min_memory_bytes(&self, bytes: usize) -> usize {
        let rule = ((2.0 * self.llc()) as usize)
            .max(16 << 20)
            .next_multiple_of(2 << 20);
        rule.min(bytes)
    }
}

/// The work of one part, as the plan and the report show it. Fields a part
/// does not have are absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Work {
    /// Timed measurements.
    pub measurements: usize,
    /// Budget of each measurement, seconds.
    pub per_measurement_s: f64,
    /// Most threads at once.
    pub threads: usize,
    /// Bytes per buffer.
    pub buffer_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cells: Option<usize>,
    /// CPU nodes measured as rows of a matrix (of how many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<(usize, usize)>,
    /// Working-set sizes (of how many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<(usize, usize)>,
    /// Thread counts of a scaling curve (of how many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points: Option<(usize, usize)>,
    /// CPUs whose every pair is measured (of how many usable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<(usize, usize)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixes: Option<usize>,
    /// Load steps per mix (of how many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<(usize, usize)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injectors: Option<usize>,
    /// Workloads × policy columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<(usize, usize)>,
    /// Sweep cases planned (of how many classes there are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<(u64, u64)>,
    /// The study's scenarios run (of how many this machine can have).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenarios: Option<(usize, usize)>,
    /// Interleaved rounds, each running every case once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<usize>,
}

impl Work {
    /// One line for people: "4 sizes of 9, 1 thread, 64 MiB buffers, 0.3 s
    /// per measurement".
    pub fn describe(&self) -> String {
        use numalab::text::format;
        let of = |n: usize, all: usize, what: &str| {
            if n == all {
                format!("{n} {what}")
            } else {
                format!("{n} {what} of {all}")
            }
        };
        let mut v: Vec<String> = Vec::new();
        if let Some((r, all)) = self.rows {
            v.push(of(r, all, "CPU nodes"));
        }
        if let Some(c) = self.cells {
            v.push(format!("{c} cells"));
        }
        if let Some((s, all)) = self.sizes {
            v.push(of(s, all, "sizes"));
        }
        if let Some((p, all)) = self.points {
            v.push(of(p, all, "thread counts"));
        }
        if let Some((c, all)) = self.cpus {
            v.push(of(c, all, "CPUs"));
        }
        if let Some(p) = self.pairs {
            v.push(format!("{p} pairs"));
        }
        if let Some(m) = self.mixes {
            v.push(format!("{m} mixes"));
        }
        if let Some((s, all)) = self.steps {
            v.push(of(s, all, "load steps"));
        }
        if let Some(i) = self.injectors {
            v.push(format!("{i} injectors"));
        }
        if let Some((w, p)) = self.workloads {
            v.push(format!("{w} workloads x {p} policies"));
        }
        if let Some((c, all)) = self.classes {
            v.push(if c == all {
                format!("{c} cases")
            } else {
                format!("{c} cases of {all}")
            });
        }
        if let Some((s, all)) = self.scenarios {
            v.push(of(s, all, "scenarios"));
        }
        if let Some(r) = self.rounds {
            v.push(format::plural(r, "round", "rounds"));
        }
        v.push(format::plural(self.threads, "thread", "threads"));
        if self.buffer_bytes > 0 {
            v.push(format!("{} buffers", format::bytes(self.buffer_bytes)));
        }
        v.push(format!(
            "{} measurements of {:.2} s",
            self.measurements, self.per_measurement_s
        ));
        v.join(", ")
    }
}

/// What a part will do within a share of the budget, and what that is
/// predicted to cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartPlan {
    /// Predicted seconds in all.
    pub predicted_s: f64,
    /// Seconds of measurement budgets within [`PartPlan::predicted_s`];
    /// the rest is fixed costs.
    pub measuring_s: f64,
    pub work: Work,
    /// How the work was cut from the mode's full form to fit, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

impl PartPlan {
    /// No work: the plan of a part that cannot run on the machine (its
    /// `applicable` says why).
    pub fn none() -> PartPlan {
        PartPlan {
            predicted_s: 0.0,
            measuring_s: 0.0,
            work: Work::default(),
            cut: None,
        }
    }

    /// Predicted seconds that are not measurement budgets.
    pub fn fixed_s(&self) -> f64 {
        (self.predicted_s - self.measuring_s).max(0.0)
    }
}

/// Chooses the largest of `levels` work levels (0 = the smallest form)
/// whose predicted cost fits `budget`: `cost(level)` must grow with the
/// level. Level 0 when none fits.
pub fn largest_fitting(levels: usize, budget: f64, cost: impl Fn(usize) -> f64) -> usize {
    let (mut lo, mut hi) = (0usize, levels.saturating_sub(1));
    if levels == 0 || cost(0) > budget {
        return 0;
    }
    // Binary search for the last level that fits.
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if cost(mid) <= budget {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// `n` of the `all` items, spread evenly and keeping the first and the
/// last (indices, ascending).
pub fn spread(all: usize, n: usize) -> Vec<usize> {
    if n >= all {
        return (0..all).collect();
    }
    if n <= 1 {
        return vec![0];
    }
    let mut v: Vec<usize> = (0..n).map(|i| i * (all - 1) / (n - 1)).collect();
    v.dedup();
    v
}

/// The plan of `p` for `budget_s` seconds on `env`.
pub fn plan_part(env: &PlanEnv, p: PartName, budget_s: f64) -> PartPlan {
    p.part().plan(env, budget_s.max(0.0))
}

/// Seconds the smallest forms of `parts` need, with the reserve for
/// writing the report.
pub fn required_budget(env: &PlanEnv, parts: &[PartName]) -> f64 {
    parts
        .iter()
        .map(|&p| plan_part(env, p, 0.0).predicted_s)
        .sum::<f64>()
        + super::plan::RESERVE_SECONDS
}

/// The shares of `left` seconds for `parts` (in run order): each its
/// smallest form, and what is left over by weight. When the smallest forms
/// do not fit, each gets its smallest form anyway (the run will overrun;
/// [`required_budget`] says by how much).
pub fn allocate(env: &PlanEnv, parts: &[PartName], left: f64) -> Vec<(PartName, f64)> {
    let mins: Vec<f64> = parts
        .iter()
        .map(|&p| plan_part(env, p, 0.0).predicted_s)
        .collect();
    let spare = left - mins.iter().sum::<f64>();
    let weights: Vec<f64> = parts
        .iter()
        .map(|&p| p.part().info().weight_in(env.mode))
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
pub fn plan_all(env: &PlanEnv, parts: &[PartName], budget_s: f64) -> Vec<(PartName, PartPlan)> {
    let shares = allocate(env, parts, budget_s - super::plan::RESERVE_SECONDS);
    // Parts that cannot use their whole share give the rest to the later
    // ones, as the session does when they finish early.
    let mut out = Vec::with_capacity(parts.len());
    let mut carry = 0.0;
    for (i, &(p, share)) in shares.iter().enumerate() {
        let rest: Vec<PartName> = parts[i + 1..].to_vec();
        let w_rest: f64 = rest
            .iter()
            .map(|q| q.part().info().weight_in(env.mode))
            .sum();
        let w = p.part().info().weight_in(env.mode);
        let mine = share + carry * w / (w + w_rest).max(f64::MIN_POSITIVE);
        carry -= carry * w / (w + w_rest).max(f64::MIN_POSITIVE);
        let plan = plan_part(env, p, mine);
        carry += (mine - plan.predicted_s).max(0.0);
        out.push((p, plan));
    }
    out
}

/// The budget a run gets: `asked` (`--budget`) as given, or the mode's
/// default raised to what the smallest forms of the parts need. Returns the
/// budget and, when it is short or was raised, a sentence saying so.
pub fn effective_budget(
    env: &PlanEnv,
    parts: &[PartName],
    asked: Option<f64>,
) -> (f64, Option<String>) {
    let required = required_budget(env, parts);
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
            let default = super::plan::default_budget(env.m, env.mode);
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
}

/// The plan of a report of `env`'s machine with the `selected` parts and
/// `--budget` `asked`.
pub fn dry_run(env: &PlanEnv, selected: &[PartName], asked: Option<f64>) -> DryRun {
    let runnable: Vec<PartName> = selected
        .iter()
        .copied()
        .filter(|p| p.available(env.m, env.mode).is_ok())
        .collect();
    let (budget, warning) = effective_budget(env, &runnable, asked);
    let plans = plan_all(env, &runnable, budget);
    let parts = PartName::all()
        .into_iter()
        .map(|p| {
            let applicable = p.available(env.m, env.mode);
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
        required_s: required_budget(env, &runnable),
        predicted_total_s: plans.iter().map(|x| x.1.predicted_s).sum::<f64>()
            + super::plan::RESERVE_SECONDS,
        costs: env.costs.clone(),
        parts,
        warnings: warning.into_iter().collect(),
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

    #[test]
    fn largest_fitting_finds_the_last_level_within_budget() {
        let cost = |l: usize| 1.0 + l as f64;
        assert_eq!(largest_fitting(10, 0.5, cost), 0);
        assert_eq!(largest_fitting(10, 1.0, cost), 0);
        assert_eq!(largest_fitting(10, 4.5, cost), 3);
        assert_eq!(largest_fitting(10, 100.0, cost), 9);
        assert_eq!(largest_fitting(0, 100.0, cost), 0);
    }

    #[test]
    fn spread_keeps_both_ends() {
        assert_eq!(spread(9, 3), vec![0, 4, 8]);
        assert_eq!(spread(9, 20), (0..9).collect::<Vec<_>>());
        assert_eq!(spread(5, 1), vec![0]);
        assert_eq!(spread(10, 4), vec![0, 3, 6, 9]);
    }

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

    #[test]
    fn costs_scale_with_what_parts_do() {
        let c = Costs::reference();
        assert!(c.place(2.0 * GIB, 1) > 1.9 * c.place(GIB, 1));
        assert!(c.place(GIB, 16) < c.place(GIB, 1));
        // A pass over 1.2 GiB is longer than the shortest sample, and a
        // measurement takes at least four of them.
        let s = c.bandwidth_sample(1.2 * GIB, 1);
        assert!(s > SAMPLE_S);
        assert!((c.measurement(0.0, s) - (4.0 * s + c.measurement_s)).abs() < 1e-9);
        // Slower machines cost more.
        assert!(Costs::slower(50.0).place(GIB, 1) > 49.0 * c.place(GIB, 1));
        for name in Costs::PRESETS {
            assert!(Costs::preset(name).is_some(), "{name}");
        }
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
                    let d = dry_run(&e, &PartName::all(), None);
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
                    let default = super::super::plan::default_budget(&m, mode);
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
            for p in PartName::all() {
                // Full-only parts too: their plan must keep any share.
                if p.part().applicable(&m).is_err() {
                    continue;
                }
                let min = plan_part(&e, p, 0.0).predicted_s;
                for k in [1.0, 1.5, 3.0, 10.0, 100.0] {
                    let b = min * k;
                    let plan = plan_part(&e, p, b);
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
        let parts: Vec<PartName> = PartName::all()
            .into_iter()
            .filter(|p| p.available(m, Mode::Default).is_ok())
            .collect();
        let mut costs = Costs::reference();
        let mut spent = 0.0;
        let mut plans = Vec::new();
        for i in 0..parts.len() {
            let e = env(m, Mode::Default, &costs);
            let left = budget - spent - super::super::plan::RESERVE_SECONDS;
            let share = allocate(&e, &parts[i..], left)[0].1;
            let plan = plan_part(&e, parts[i], share);
            // A part that keeps its own deadline ends at it.
            let took = if parts[i].part().info().keeps_deadline {
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
            if !parts[i].part().info().keeps_deadline {
                costs.factor =
                    corrected_factor(costs.factor, plan.measuring_s, plan.fixed_s(), took);
            }
            plans.push(plan);
        }
        (spent + super::super::plan::RESERVE_SECONDS, plans)
    }

    #[test]
    fn replanning_absorbs_costs_that_change_mid_run() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let budget = super::super::plan::default_budget(&m, Mode::Default);
        // As predicted: the budget is used and kept.
        let (t, plans) = simulate(&m, budget, |_| 1.0);
        assert!(t <= budget * 1.001 && t > budget * 0.5, "{t} of {budget}");
        assert!(plans.iter().all(|p| p.predicted_s > 0.0));
        // Fixed costs twice the prediction from the third part on: later
        // parts shrink and the run still ends within 5%.
        let (t, slow_plans) = simulate(&m, budget, |i| if i >= 2 { 2.0 } else { 1.0 });
        assert!(t <= budget * 1.05, "{t} of {budget}");
        // The last part before the sweeps whose work scales with its share.
        let last = PartName::all()
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
