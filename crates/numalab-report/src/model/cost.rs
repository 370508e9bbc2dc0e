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
/// The work of one part, as the plan and the report show it: what every
/// part has (measurements, threads, buffers) and the part's own
/// [`Count`]s (sizes, pairs, cells, …), each labelled by the part.
///
/// In JSON the counts are keys of the object beside the common fields (`"cells": 16`,
/// `"rows": [2, 4]` for 2 of 4), as docs/report-schema.json's `plan_work` lists them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Work {
    /// Timed measurements.
    pub measurements: usize,
    /// Budget of each measurement, seconds.
    pub per_measurement_s: f64,
    /// Most threads at once.
    pub threads: usize,
    /// Bytes per buffer.
    pub buffer_bytes: u64,
    /// The part's own counts, in the order it gave them.
    pub counts: Vec<Count>,
}

/// One count of a part's work: its key in JSON, its value, and the words
/// a person reads ("4 sizes of 9").
#[derive(Debug, Clone, PartialEq)]
pub struct Count {
    pub key: String,
    pub value: CountValue,
    pub text: String,
}

/// A count alone (`16`) or with what it is taken of (`[2, 4]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CountValue {
    One(u64),
    Of(u64, u64),
}

impl Work {
    /// `n` `noun` (`"16 cells"`), under `key`.
    pub fn count(self, key: &str, noun: &str, n: usize) -> Self {
        self.with(key, CountValue::One(n as u64), format!("{n} {noun}"))
    }

    /// `n` `noun` of `all` (`"4 sizes of 9"`, `"9 sizes"` when all), under
    /// `key`.
    pub fn count_of(self, key: &str, noun: &str, n: usize, all: usize) -> Self {
        let text = if n == all {
            format!("{n} {noun}")
        } else {
            format!("{n} {noun} of {all}")
        };
        self.with(key, CountValue::Of(n as u64, all as u64), text)
    }

    /// A count under `key` with its own words.
    pub fn with(mut self, key: &str, value: CountValue, text: String) -> Self {
        self.counts.push(Count {
            key: key.to_string(),
            value,
            text,
        });
        self
    }

    /// The count under `key`.
    pub fn get(&self, key: &str) -> Option<CountValue> {
        self.counts.iter().find(|c| c.key == key).map(|c| c.value)
    }

    /// One line for people: "4 sizes of 9, 1 thread, 64 MiB buffers, 0.3 s
    /// per measurement".
    pub fn describe(&self) -> String {
        use numalab::text::format;
        let mut v: Vec<String> = self.counts.iter().map(|c| c.text.clone()).collect();
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

/// The common fields by name, then each count under its key.
impl Serialize for Work {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(4 + self.counts.len()))?;
        map.serialize_entry("measurements", &self.measurements)?;
        map.serialize_entry("per_measurement_s", &self.per_measurement_s)?;
        map.serialize_entry("threads", &self.threads)?;
        map.serialize_entry("buffer_bytes", &self.buffer_bytes)?;
        for c in &self.counts {
            map.serialize_entry(&c.key, &c.value)?;
        }
        map.end()
    }
}

/// Keys other than the common fields are counts (their words, which JSON
/// does not keep, become "KEY VALUE").
impl<'de> Deserialize<'de> for Work {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let mut w = Work::default();
        for (key, v) in map {
            let number = |v: &serde_json::Value| {
                v.as_f64()
                    .ok_or_else(|| D::Error::custom(format!("work.{key}: not a number")))
            };
            match key.as_str() {
                "measurements" => w.measurements = number(&v)? as usize,
                "per_measurement_s" => w.per_measurement_s = number(&v)?,
                "threads" => w.threads = number(&v)? as usize,
                "buffer_bytes" => w.buffer_bytes = number(&v)? as u64,
                _ => {
                    let value = CountValue::deserialize(&v).map_err(|_| {
                        D::Error::custom(format!("work.{key}: a count is a number or [number, of]"))
                    })?;
                    let text = match value {
                        CountValue::One(n) => format!("{key} {n}"),
                        CountValue::Of(n, all) => format!("{key} {n} of {all}"),
                    };
                    w.counts.push(Count { key, value, text });
                }
            }
        }
        Ok(w)
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

    #[test]
    fn work_is_labelled_counts_in_json_and_words() {
        let w = Work {
            measurements: 12,
            per_measurement_s: 0.25,
            threads: 2,
            buffer_bytes: 64 << 20,
            ..Work::default()
        }
        .count_of("sizes", "sizes", 4, 9)
        .count("pairs", "pairs", 6)
        .count_of("rows", "CPU nodes", 2, 2);
        assert_eq!(
            w.describe(),
            "4 sizes of 9, 6 pairs, 2 CPU nodes, 2 threads, 64 MiB buffers, 12 measurements of 0.25 s"
        );
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"measurements": 12, "per_measurement_s": 0.25, "threads": 2,
                "buffer_bytes": 67108864, "sizes": [4, 9], "pairs": 6, "rows": [2, 2]})
        );
        let back: Work = serde_json::from_value(v).unwrap();
        assert_eq!(back.get("sizes"), Some(CountValue::Of(4, 9)));
        assert_eq!(back.get("pairs"), Some(CountValue::One(6)));
        assert_eq!((back.measurements, back.threads), (12, 2));
        // Read back, a count's words are its key and value.
        assert!(back
            .describe()
            .starts_with("pairs 6, rows 2 of 2, sizes 4 of 9"));
        let bad = serde_json::from_value::<Work>(serde_json::json!({"cells": "x"}));
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("work.cells: a count is a number or [number, of]"));
    }
}
