//! What a part's work costs and what work it does within a budget (see
//! [`crate::budget`] for how the report shares its budget out).

use numalab::measure::stats::StopRule;
use serde::{Deserialize, Serialize};
use std::time::Duration;

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

/// Shortest budget a single measurement gets, seconds: below it the
/// statistics have too few samples to mean anything.
pub const MIN_MEASUREMENT_S: f64 = 0.04;

/// The stop rule of a report's measurements, budget aside: warm-up 1, 3
/// to 1000 repetitions, 1% CI.
pub fn default_rule() -> StopRule {
    StopRule {
        warmup: 1,
        min_reps: 3,
        max_reps: 1000,
        target_rel_ci: 0.01,
        budget: Duration::from_secs_f64(MIN_MEASUREMENT_S),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
