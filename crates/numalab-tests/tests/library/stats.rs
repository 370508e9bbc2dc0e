//! Statistics of repeated measurements (measure::stats) on fixed sample sets,
//! the adaptive repetition loop with deterministic closures, and the
//! environment a result depends on (measure::environment) from fake /proc and
//! /sys trees and from this machine.

use numalab::measure::environment::{CgroupLimits, Environment};
use numalab::measure::stats::{
    measure, median_ci_ranks, Better, Measurement, StopReason, StopRule, Summary,
};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * (1.0 + a.abs().max(b.abs()))
}

/// One median in the engine and the CLI (`measure::stats::median`, which
/// leaves NaN and infinities out and gives `None` for nothing): a median
/// sorted and indexed by hand elsewhere is how four of them came to treat
/// an even count, NaN and empty input each its own way.
#[test]
fn one_median_in_the_engine_and_the_cli() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    let mut dirs = vec![root.join("numalab/src"), root.join("numalab-cli/src")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|x| x != "rs") || path.ends_with("measure/stats.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, l) in lines.iter().enumerate() {
                let by_hand = l.contains("sort_by(f64::total_cmp)")
                    && lines[i + 1..lines.len().min(i + 4)]
                        .iter()
                        .any(|n| n.contains("/ 2]") || n.contains("len() / 2"));
                if by_hand || l.trim_start().starts_with("fn median(") {
                    found.push(format!("{}:{}", path.display(), i + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "medians computed by hand (use numalab::measure::stats::median): {found:?}"
    );
    // What that median gives.
    use numalab::measure::stats::median;
    assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
    assert_eq!(
        median(vec![3.0, f64::NAN, 1.0, f64::INFINITY, 2.0]),
        Some(2.0)
    );
    assert_eq!(median(vec![f64::NAN]), None);
    assert_eq!(median(Vec::new()), None);
}

#[test]
fn median_and_quartiles_odd_n() {
    // Unsorted on purpose.
    let s = Summary::of(&[9.0, 1.0, 5.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0]).unwrap();
    assert_eq!(s.n, 9);
    assert_eq!(s.median, 5.0);
    assert_eq!(s.q1, 3.0);
    assert_eq!(s.q3, 7.0);
    assert_eq!((s.min, s.max), (1.0, 9.0));
    assert_eq!(s.mean, 5.0);
    assert!(close(s.stddev, 7.5f64.sqrt()));
    assert!(close(s.spread, 8.0 / 5.0));
}

#[test]
fn median_and_quartiles_even_n() {
    let v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
    let s = Summary::of(&v).unwrap();
    assert_eq!(s.median, 5.5);
    assert_eq!(s.q1, 3.25);
    assert_eq!(s.q3, 7.75);
    assert_eq!(s.mean, 5.5);
    // Sample variance of 1..10 = 55/6.
    assert!(close(s.stddev, (55.0f64 / 6.0).sqrt()));
}

#[test]
fn single_sample() {
    let s = Summary::of(&[4.0]).unwrap();
    assert_eq!(
        (s.median, s.q1, s.q3, s.min, s.max),
        (4.0, 4.0, 4.0, 4.0, 4.0)
    );
    assert_eq!((s.stddev, s.spread, s.rel_ci), (0.0, 0.0, 0.0));
    assert_eq!((s.ci_low, s.ci_high), (4.0, 4.0));
}

#[test]
fn median_ci_from_binomial_ranks() {
    // n = 10: P(Bin(10, 1/2) <= 1) = 11/1024 = 1.07% <= 2.5% and
    // P(<= 2) = 56/1024 = 5.5% > 2.5%, so the CI is [x(2), x(9)].
    assert_eq!(median_ci_ranks(10), Some((2, 9)));
    let v = [70.0, 10.0, 100.0, 40.0, 20.0, 90.0, 30.0, 60.0, 50.0, 80.0];
    let s = Summary::of(&v).unwrap();
    assert_eq!((s.ci_low, s.ci_high), (20.0, 90.0));
    assert!(close(s.rel_ci, (90.0 - 20.0) / 2.0 / 55.0));
    // n = 20: P(<= 5) = 2.07%, P(<= 6) = 5.77% -> [x(6), x(15)].
    assert_eq!(median_ci_ranks(20), Some((6, 15)));
    // n = 6: P(<= 0) = 1/64 = 1.6% -> [x(1), x(6)]; n = 7: P(<= 1) = 8/128 = 6.25% -> still [x(1), x(7)].
    assert_eq!(median_ci_ranks(6), Some((1, 6)));
    assert_eq!(median_ci_ranks(7), Some((1, 7)));
    assert_eq!(median_ci_ranks(9), Some((2, 8)));
}

#[test]
fn median_ci_below_six_samples_is_min_max() {
    for n in 1..6 {
        assert_eq!(median_ci_ranks(n), None);
        let v: Vec<f64> = (0..n).map(|i| 10.0 + i as f64).collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!((s.ci_low, s.ci_high), (s.min, s.max), "n={n}");
    }
}

#[test]
fn tukey_outliers() {
    let v = [
        10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 30.0, 100.0,
    ];
    let s = Summary::of(&v).unwrap();
    // q1 = 12.75, q3 = 18.25, IQR = 5.5: fences [4.5, 26.5] and [-3.75, 34.75].
    assert!(close(s.q1, 12.75) && close(s.q3, 18.25));
    assert_eq!(s.outliers, 2);
    assert_eq!(s.severe_outliers, 1);
    let low = [-100.0, 10.0, 11.0, 12.0, 13.0, 14.0];
    let s = Summary::of(&low).unwrap();
    assert_eq!((s.outliers, s.severe_outliers), (1, 1));
    let none = Summary::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
    assert_eq!((none.outliers, none.severe_outliers), (0, 0));
}

#[test]
fn empty_and_non_finite_are_refused() {
    assert_eq!(Summary::of(&[]), None);
    assert_eq!(Summary::of(&[1.0, f64::NAN, 2.0]), None);
    assert_eq!(Summary::of(&[1.0, f64::INFINITY]), None);
    assert_eq!(Summary::of(&[f64::NEG_INFINITY]), None);
}

#[test]
fn best_follows_the_direction() {
    let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
    assert_eq!(s.best(Better::Higher), 3.0);
    assert_eq!(s.best(Better::Lower), 1.0);
}

#[test]
fn zero_median_relative_values() {
    let s = Summary::of(&[0.0, 0.0, 0.0]).unwrap();
    assert_eq!((s.spread, s.rel_ci), (0.0, 0.0));
    let s = Summary::of(&[-1.0, 0.0, 1.0]).unwrap();
    assert_eq!(s.spread, f64::INFINITY);
}

#[test]
fn json_shape() {
    let s = Summary::of(&[1.0, 2.0, 3.0]).unwrap();
    let j = serde_json::to_value(&s).unwrap();
    for key in [
        "n",
        "median",
        "mean",
        "min",
        "max",
        "stddev",
        "q1",
        "q3",
        "spread",
        "ci_low",
        "ci_high",
        "rel_ci",
        "outliers",
        "severe_outliers",
    ] {
        assert!(j.get(key).is_some(), "missing {key}");
    }
    assert_eq!(
        serde_json::to_value(StopReason::MaxReps).unwrap(),
        serde_json::json!("max_reps")
    );
    assert_eq!(
        serde_json::to_value(Better::Higher).unwrap(),
        serde_json::json!("higher")
    );
    let m = measure(&StopRule::default(), || 1.0);
    let j = serde_json::to_value(&m).unwrap();
    assert_eq!(j["stop_reason"], "converged");
    assert_eq!(j["rule"]["budget"], 3.0);
}

/// A closure returning the values of `list` in turn (cycling).
fn from_list(list: &[f64]) -> impl FnMut() -> f64 + '_ {
    let mut i = 0;
    move || {
        let x = list[i % list.len()];
        i += 1;
        x
    }
}

fn rule(warmup: usize, min_reps: usize, max_reps: usize, target: f64, budget_ms: u64) -> StopRule {
    StopRule {
        warmup,
        min_reps,
        max_reps,
        target_rel_ci: target,
        budget: Duration::from_millis(budget_ms),
    }
}

#[test]
fn defaults() {
    let r = StopRule::default();
    assert_eq!((r.warmup, r.min_reps, r.max_reps), (1, 5, 1000));
    assert_eq!(r.target_rel_ci, 0.01);
    assert_eq!(r.budget, Duration::from_secs(3));
    assert!(r.validate().is_ok());
    assert!(rule(0, 0, 5, 0.01, 1).validate().is_err());
    assert!(rule(0, 5, 4, 0.01, 1).validate().is_err());
    assert!(rule(0, 5, 5, f64::NAN, 1).validate().is_err());
}

#[test]
fn constant_values_converge_at_min_reps() {
    let m = measure(&StopRule::default(), || 5.0);
    assert_eq!(m.stop_reason, StopReason::Converged);
    assert_eq!(m.samples, vec![5.0; 5]);
    assert_eq!(m.warmup_samples, vec![5.0]);
    assert_eq!(m.summary.n, 5);
    assert_eq!(m.summary.rel_ci, 0.0);
    assert!(m.warnings().is_empty(), "{:?}", m.warnings());
}

#[test]
fn warmup_values_are_discarded_in_order() {
    let list = [100.0, 90.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0];
    let m = measure(&rule(2, 5, 100, 0.01, 60_000), from_list(&list));
    assert_eq!(m.warmup_samples, vec![100.0, 90.0]);
    assert_eq!(m.samples, vec![10.0; 5]);
    assert_eq!(m.stop_reason, StopReason::Converged);
    let w = m.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("first warm-up run differs from the median by +900%"),
        "{w:?}"
    );
}

#[test]
fn slow_first_sample_is_reported() {
    let list = [5.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0];
    let m = measure(&rule(0, 6, 6, 0.01, 60_000), from_list(&list));
    assert!(m.warmup_samples.is_empty());
    let w = m.warnings();
    assert!(
        w.iter()
            .any(|s| s.contains("first measured sample differs from the median by -50%")),
        "{w:?}"
    );
}

#[test]
fn converges_once_precise_enough() {
    // 1% noise around 100: [x(l), x(u)] narrows as n grows; a 2% target is met
    // only after the CI stops spanning the extremes.
    let list = [99.0, 101.0, 100.0, 99.5, 100.5, 100.2, 99.8, 100.1, 99.9];
    let m = measure(&rule(0, 3, 1000, 0.006, 60_000), from_list(&list));
    assert_eq!(m.stop_reason, StopReason::Converged);
    // n < 6 uses min..max = ±1%; n = 6..8 still [min, max]; n = 9 -> [x(2), x(8)] = [99.5, 100.5].
    assert_eq!(m.summary.n, 9);
    assert!(m.summary.rel_ci <= 0.006);
}

#[test]
fn noisy_values_hit_max_reps() {
    let m = measure(&rule(1, 5, 50, 0.01, 60_000), from_list(&[1.0, 2.0]));
    assert_eq!(m.stop_reason, StopReason::MaxReps);
    assert_eq!(m.samples.len(), 50);
    let w = m.warnings();
    assert!(
        w.iter().any(|s| s.starts_with("median not precise: ±")
            && s.contains("after 50 repetitions (the maximum) (target ±1%)")),
        "{w:?}"
    );
}

#[test]
fn budget_is_honored() {
    let budget = Duration::from_millis(150);
    let mut flip = false;
    let m = measure(&rule(1, 5, 1000, 0.0, 150), || {
        std::thread::sleep(Duration::from_millis(20));
        flip = !flip;
        if flip {
            1.0
        } else {
            1.5
        }
    });
    assert_eq!(m.stop_reason, StopReason::Budget);
    assert!(m.elapsed_s >= budget.as_secs_f64());
    // Runs last at least 20 ms each: stopping at the budget means at most
    // one run past 150 ms, so at most 8 samples (a wall-clock bound would
    // measure the machine's load, not the rule).
    assert!(
        m.samples.len() >= 2 && m.samples.len() <= 8,
        "{}",
        m.samples.len()
    );
    let w = m.warnings();
    assert!(
        w.iter()
            .any(|s| s.contains("repetitions in the 150 ms budget (target ±0%)")),
        "{w:?}"
    );
}

#[test]
fn budget_smaller_than_one_run_still_gives_two_samples() {
    let m = measure(&rule(3, 5, 1000, 0.01, 30), || {
        std::thread::sleep(Duration::from_millis(40));
        2.0
    });
    // One warm-up (the others are skipped once the budget is spent), two samples.
    assert_eq!(m.warmup_samples.len(), 1);
    assert_eq!(m.samples.len(), 2);
    assert_eq!(m.stop_reason, StopReason::Budget);
    let w = m.warnings();
    assert!(
        w.iter()
            .any(|s| s.starts_with("only 2 repetitions fit in the 30 ms budget (minimum 5)")),
        "{w:?}"
    );
    // Constant values: precise, so no "not precise" warning.
    assert!(!w.iter().any(|s| s.contains("not precise")), "{w:?}");
}

#[test]
fn outlier_warning() {
    let list = [
        10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 10.1, 9.9, 10.0, 10.05, 9.95, 10.0, 10.1, 9.9,
        10.0, 10.0, 10.1, 30.0, 50.0,
    ];
    let m = measure(&rule(0, 20, 20, 0.0, 60_000), from_list(&list));
    assert_eq!(m.summary.n, 20);
    // q1 = 9.9875, q3 = 10.1, IQR = 0.1125: 9.8 is below q1 - 1.5 IQR = 9.81875,
    // 30 and 50 are above q3 + 3 IQR = 10.4375.
    assert_eq!((m.summary.outliers, m.summary.severe_outliers), (3, 2));
    let w = m.warnings();
    assert!(
        w.iter().any(|s| s.starts_with(
            "3 of 20 samples are outliers (Tukey 1.5 IQR), 2 severe (3 IQR); the system may be noisy"
        )),
        "{w:?}"
    );
}

#[test]
fn non_finite_values_are_counted_not_summarized() {
    let list = [1.0, f64::NAN, 1.0, f64::INFINITY, 1.0, 1.0, 1.0];
    let m = measure(&rule(0, 5, 1000, 0.01, 60_000), from_list(&list));
    assert_eq!(m.stop_reason, StopReason::Converged);
    assert_eq!(m.samples, vec![1.0; 5]);
    assert_eq!(m.non_finite, 2);
    let w = m.warnings();
    assert!(
        w[0].starts_with("2 of 7 repetitions gave no finite value"),
        "{w:?}"
    );

    let m: Measurement = measure(&rule(0, 5, 10, 0.01, 60_000), || f64::NAN);
    assert_eq!(m.stop_reason, StopReason::MaxReps);
    assert_eq!(m.summary.n, 0);
    assert!(m.summary.median.is_nan());
    assert_eq!(m.non_finite, 10);
    assert!(serde_json::to_value(&m).unwrap()["summary"]["median"].is_null());
}

#[test]
fn odd_rules_do_not_hang() {
    // max_reps 0 counts as 1; max_reps below min_reps lowers the minimum.
    let m = measure(&rule(0, 5, 0, 0.01, 60_000), || 1.0);
    assert_eq!(m.samples.len(), 1);
    let m = measure(&rule(0, 5, 3, 0.01, 60_000), || 1.0);
    assert_eq!((m.samples.len(), m.stop_reason), (3, StopReason::Converged));
}

proptest! {
    #[test]
    fn order_of_statistics(v in prop::collection::vec(-1e6f64..1e6, 1..300)) {
        let s = Summary::of(&v).unwrap();
        prop_assert_eq!(s.n, v.len());
        prop_assert!(s.min <= s.ci_low);
        prop_assert!(s.ci_low <= s.median);
        prop_assert!(s.median <= s.ci_high);
        prop_assert!(s.ci_high <= s.max);
        prop_assert!(s.min <= s.q1 && s.q1 <= s.median && s.median <= s.q3 && s.q3 <= s.max);
        prop_assert!(s.min <= s.mean && s.mean <= s.max);
        prop_assert!(s.severe_outliers <= s.outliers && s.outliers <= s.n);
        prop_assert!(s.stddev >= 0.0);
    }

    #[test]
    fn ranks_are_symmetric_and_inside(n in 6usize..3000) {
        let (l, u) = median_ci_ranks(n).unwrap();
        prop_assert!(1 <= l && l <= u && u <= n);
        prop_assert_eq!(l + u, n + 1);
    }
}

// ---------------------------------------------------------------- environment

/// A fresh fake root under CARGO_TARGET_TMPDIR holding `files` (path, contents).
fn fake_root(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("env-{name}"));
    let _ = std::fs::remove_dir_all(&root);
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    root
}

const CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
model name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\n\
flags\t\t: fpu sse sse2 ht avx avx2 fma avx512f avx512bw avx512vl constant_tsc\n\n\
processor\t: 1\nvendor_id\t: GenuineIntel\n\
model name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\nflags\t\t: fpu sse sse2\n";

#[test]
fn environment_from_a_cgroup_v2_tree() {
    let root = fake_root(
        "v2",
        &[
            ("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n"),
            ("proc/sys/kernel/hostname", "node17\n"),
            (
                "proc/version",
                "Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian \
                 12.2.0-14) 12.2.0, GNU ld 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 \
                 (2024-02-01)\n",
            ),
            ("proc/cpuinfo", CPUINFO),
            ("proc/sys/kernel/numa_balancing", "1\n"),
            ("proc/self/cgroup", "0::/batch/job42\n"),
            ("sys/devices/system/cpu/online", "0-7\n"),
            ("sys/devices/system/cpu/smt/active", "1\n"),
            (
                "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
                "powersave\n",
            ),
            (
                "sys/devices/system/cpu/cpu0/cpufreq/scaling_min_freq",
                "800000\n",
            ),
            (
                "sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq",
                "2000000\n",
            ),
            (
                "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
                "3500000\n",
            ),
            (
                "sys/kernel/mm/transparent_hugepage/enabled",
                "always [madvise] never\n",
            ),
            (
                "sys/kernel/mm/transparent_hugepage/defrag",
                "always defer [madvise] never\n",
            ),
            (
                "sys/fs/cgroup/cgroup.controllers",
                "cpuset cpu io memory pids\n",
            ),
            ("sys/fs/cgroup/cpuset.cpus.effective", "0-7\n"),
            ("sys/fs/cgroup/batch/memory.max", "4294967296\n"),
            ("sys/fs/cgroup/batch/cpu.max", "max 100000\n"),
            ("sys/fs/cgroup/batch/job42/cpuset.cpus.effective", "0-3\n"),
            ("sys/fs/cgroup/batch/job42/cpuset.mems.effective", "0\n"),
            ("sys/fs/cgroup/batch/job42/cpu.max", "50000 100000\n"),
            ("sys/fs/cgroup/batch/job42/memory.max", "max\n"),
        ],
    );
    let e = Environment::capture_from(&root);
    assert_eq!(e.numalab_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(e.kernel, "6.1.0-18-amd64");
    assert_eq!(
        e.kernel_version,
        "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"
    );
    assert_eq!(e.hostname, "node17");
    assert_eq!(e.cpu_model, "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz");
    assert_eq!(e.cpu_vendor, "GenuineIntel");
    assert_eq!(
        e.cpu_flags,
        [
            "sse2",
            "avx",
            "avx2",
            "fma",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "ht",
            "constant_tsc"
        ]
    );
    assert_eq!(e.logical_cpus, 8);
    assert_eq!(e.smt_active, Some(true));
    assert_eq!(e.thp_enabled.as_deref(), Some("madvise"));
    assert_eq!(e.thp_defrag.as_deref(), Some("madvise"));
    assert_eq!(e.numa_balancing, Some(true));
    assert_eq!(e.governor.as_deref(), Some("powersave"));
    assert_eq!(e.cpufreq_mhz, Some((800.0, 2000.0)));
    assert_eq!(
        e.cgroup,
        CgroupLimits {
            version: Some(2),
            path: Some("/batch/job42".into()),
            cpuset_cpus: Some("0-3".into()),
            cpuset_mems: Some("0".into()),
            // The parent's limit binds.
            memory_max: Some("4294967296".into()),
            cpu_max: Some("50000 100000".into()),
        }
    );
    let w = &e.warnings;
    let expected = [
        "automatic NUMA balancing is on (/proc/sys/kernel/numa_balancing=1): pages may migrate \
         during the experiment; turn it off with echo 0 > /proc/sys/kernel/numa_balancing",
        "the CPU frequency governor is 'powersave', not 'performance': the clock may change \
         during the experiment; for steady numbers: cpupower frequency-set -g performance",
        "the CPU frequency is capped at 2000 MHz (the hardware allows 3500 MHz, see \
         scaling_max_freq)",
        "the cgroup limits CPU time: cpu.max = 50000 100000 (0.50 CPUs); the process may be \
         throttled, which distorts timings",
        "the cgroup cpuset allows CPUs 0-3 (4 of 8 online) and memory nodes 0: experiments run \
         inside these sets only",
        "the cgroup limits memory to 4 GiB (memory.max): larger buffers are reclaimed, swapped \
         or killed",
    ];
    assert_eq!(w, &expected, "{w:#?}");
    // SMT is recorded, not warned about; THP "madvise" is fine.
    assert!(!w
        .iter()
        .any(|s| s.contains("SMT") || s.contains("huge pages")));

    // The JSON keys a report reads.
    let j = serde_json::to_value(&e).unwrap();
    assert_eq!(j["cpufreq_mhz"], serde_json::json!([800.0, 2000.0]));
    assert_eq!(j["cgroup"]["cpu_max"], "50000 100000");
    assert_eq!(j["numa_balancing"], true);
}

#[test]
fn environment_from_a_cgroup_v1_container_tree() {
    // Docker on cgroup v1: the host path /docker/abc does not exist inside
    // the container, whose own cgroup is mounted at the controller's root.
    let root = fake_root(
        "v1",
        &[
            ("proc/sys/kernel/osrelease", "5.15.0-91-generic\n"),
            (
                "proc/sys/kernel/version",
                "#101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023\n",
            ),
            ("proc/cpuinfo", CPUINFO),
            ("proc/sys/kernel/numa_balancing", "0\n"),
            (
                "proc/self/cgroup",
                "12:cpuset:/docker/abc\n4:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n\
                 1:name=systemd:/docker/abc\n0::/system.slice/containerd.service\n",
            ),
            ("sys/devices/system/cpu/online", "0-3\n"),
            ("sys/devices/system/cpu/smt/active", "0\n"),
            (
                "sys/kernel/mm/transparent_hugepage/enabled",
                "[always] madvise never\n",
            ),
            ("sys/fs/cgroup/cpuset/cpuset.effective_cpus", "2-3\n"),
            ("sys/fs/cgroup/cpuset/cpuset.effective_mems", "1\n"),
            ("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n"),
            ("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n"),
            (
                "sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
        ],
    );
    let e = Environment::capture_from(&root);
    assert_eq!(e.kernel, "5.15.0-91-generic");
    assert_eq!(
        e.kernel_version,
        "#101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023"
    );
    assert_eq!(e.hostname, "");
    assert_eq!(e.logical_cpus, 4);
    assert_eq!(e.smt_active, Some(false));
    assert_eq!(e.thp_enabled.as_deref(), Some("always"));
    assert_eq!(e.thp_defrag, None);
    assert_eq!(e.numa_balancing, Some(false));
    assert_eq!((e.governor.as_deref(), e.cpufreq_mhz), (None, None));
    assert_eq!(
        e.cgroup,
        CgroupLimits {
            version: Some(1),
            path: Some("/docker/abc".into()),
            cpuset_cpus: Some("2-3".into()),
            cpuset_mems: Some("1".into()),
            memory_max: Some("max".into()),
            cpu_max: Some("max".into()),
        }
    );
    assert_eq!(e.warnings.len(), 2, "{:#?}", e.warnings);
    assert!(e.warnings[0].starts_with("transparent huge pages are 'always'"));
    assert!(e.warnings[0].contains("2 MiB"));
    assert_eq!(
        e.warnings[1],
        "the cgroup cpuset allows CPUs 2-3 (2 of 4 online) and memory nodes 1: experiments run \
         inside these sets only"
    );
}

#[test]
fn environment_from_an_empty_tree() {
    let root = fake_root("empty", &[]);
    std::fs::create_dir_all(&root).unwrap();
    let e = Environment::capture_from(&root);
    assert_eq!((e.kernel.as_str(), e.cpu_model.as_str()), ("", ""));
    assert!(e.cpu_flags.is_empty());
    assert_eq!(e.logical_cpus, 0);
    assert_eq!((e.smt_active, e.numa_balancing), (None, None));
    assert_eq!(
        (e.thp_enabled, e.governor, e.cpufreq_mhz),
        (None, None, None)
    );
    assert_eq!(e.cgroup, CgroupLimits::default());
    assert!(e.warnings.is_empty());
}

/// "YYYY-MM-DDTHH:MM:SSZ" with plausible field values.
fn is_rfc3339_utc(t: &str) -> bool {
    let b = t.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r.clone()].iter().all(u8::is_ascii_digit);
    let num = |r: std::ops::Range<usize>| t[r].parse::<u32>().unwrap();
    b.len() == 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'Z'
        && (1..=12).contains(&num(5..7))
        && (1..=31).contains(&num(8..10))
        && num(11..13) < 24
        && num(14..16) < 60
        && num(17..19) < 61
}

#[test]
fn live_environment() {
    let e = Environment::capture();
    assert!(!e.kernel.is_empty());
    assert!(e.logical_cpus >= 1);
    if cfg!(target_arch = "x86_64") {
        assert!(e.cpu_flags.iter().any(|f| f == "sse2"), "{:?}", e.cpu_flags);
    }
    assert!(is_rfc3339_utc(&e.timestamp_utc), "{}", e.timestamp_utc);
    assert!(e.timestamp_utc.as_str() >= "2024-01-01T00:00:00Z");
    assert_eq!(e.numalab_version, env!("CARGO_PKG_VERSION"));
    let parts: Vec<&str> = e.hwloc_version.split('.').collect();
    assert!(
        parts.len() >= 2 && parts[0] == "2",
        "hwloc version {}",
        e.hwloc_version
    );
    assert!(
        e.hwloc_api_version.starts_with("2."),
        "{}",
        e.hwloc_api_version
    );
    assert!(!e.command_line.is_empty());
    assert_eq!(
        e.numa_balancing == Some(true),
        e.warnings
            .iter()
            .any(|w| w.starts_with("automatic NUMA balancing is on"))
    );
    serde_json::to_string(&e).unwrap();
}

#[test]
fn timestamp_shape_check_rejects_garbage() {
    assert!(is_rfc3339_utc("2024-02-29T23:59:59Z"));
    assert!(!is_rfc3339_utc("2024-02-29 23:59:59Z"));
    assert!(!is_rfc3339_utc("2024-13-01T00:00:00Z"));
}
