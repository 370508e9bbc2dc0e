//! Statistics of repeated measurements, hyperfine style: warm-up runs,
//! repetitions until the median is precise enough, a distribution-free
//! confidence interval of the median, Tukey outliers, and plain-sentence
//! warnings.
//!
//! Conventions (every function below follows them):
//! - Quantiles (median, quartiles) interpolate linearly between order
//!   statistics (Hyndman-Fan type 7, the default of R and NumPy): the median of
//!   an even number of samples is the mean of the two middle ones.
//! - The 95% confidence interval of the median comes from order statistics
//!   with binomial ranks (no assumption on the distribution): for `n` samples
//!   it is `[x(l), x(n+1-l)]` (1-based, sorted) with the largest `l` such that
//!   `P(Binomial(n, 1/2) <= l-1) <= 2.5%`. For n = 10 that is `[x(2), x(9)]`
//!   (coverage 97.9%). Below 6 samples no pair of ranks reaches 95% and the
//!   interval is `[min, max]` (coverage `1 - 2^(1-n)`, e.g. 93.75% for n = 5).
//! - Relative quantities (`spread`, `rel_ci`) are divided by `|median|`; with a
//!   median of 0 they are 0 when the numerator is 0, else infinity (`null` in
//!   JSON).
//! - Samples must be finite: [`Summary::of`] refuses NaN and infinities
//!   (returns `None`) instead of silently dropping them, and [`measure`] keeps
//!   them out of the statistics, counts them in [`Measurement::non_finite`] and
//!   says so in [`Measurement::warnings`].
//! - [`measure`] honours [`super::cancel`]: once cancellation is requested it
//!   takes no further run and returns what it has ([`StopReason::Cancelled`]).
//! - Everything here reads back from its JSON (`Deserialize`); statistics
//!   written as `null` (NaN, infinity) read back as NaN.

use super::cancel;
use crate::serde_util::{f64_or_nan, vec_f64_or_nan};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// Two-sided confidence level of [`Summary::ci_low`]..[`Summary::ci_high`].
pub const CONFIDENCE: f64 = 0.95;

/// Tukey's fence for outliers, in interquartile ranges beyond the quartiles.
pub const OUTLIER_FENCE: f64 = 1.5;

/// Tukey's fence for severe ("far out") outliers.
pub const SEVERE_OUTLIER_FENCE: f64 = 3.0;

/// A first run (warm-up or sample) further than this from the median (as a
/// fraction of the median) draws a warning.
pub const FIRST_RUN_DEVIATION: f64 = 0.20;

/// Descriptive statistics of a set of finite samples.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    #[serde(deserialize_with = "f64_or_nan")]
    pub median: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub mean: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub min: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub max: f64,
    /// Sample standard deviation (divisor n - 1; 0 for a single sample).
    #[serde(deserialize_with = "f64_or_nan")]
    pub stddev: f64,
    /// First quartile (type 7 interpolation).
    #[serde(deserialize_with = "f64_or_nan")]
    pub q1: f64,
    /// Third quartile (type 7 interpolation).
    #[serde(deserialize_with = "f64_or_nan")]
    pub q3: f64,
    /// `(max - min) / |median|`.
    #[serde(deserialize_with = "f64_or_nan")]
    pub spread: f64,
    /// Lower end of the 95% distribution-free confidence interval of the median.
    #[serde(deserialize_with = "f64_or_nan")]
    pub ci_low: f64,
    /// Upper end of the 95% distribution-free confidence interval of the median.
    #[serde(deserialize_with = "f64_or_nan")]
    pub ci_high: f64,
    /// Half the confidence interval relative to the median: `(ci_high - ci_low) / 2 / |median|`.
    #[serde(deserialize_with = "f64_or_nan")]
    pub rel_ci: f64,
    /// Samples outside the Tukey fences `[q1 - 1.5 IQR, q3 + 1.5 IQR]` (severe ones included).
    pub outliers: usize,
    /// Samples outside `[q1 - 3 IQR, q3 + 3 IQR]`.
    pub severe_outliers: usize,
}

/// Which direction is good for a quantity, for picking the "best" sample
/// (STREAM convention: the best of a bandwidth is its maximum, the best of a
/// time or a latency its minimum).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Bandwidth, throughput, operations per second.
    Higher,
    /// Time, latency.
    Lower,
}

impl Summary {
    /// Statistics of `samples` (in any order). `None` when `samples` is empty
    /// or holds a NaN or an infinity: a non-finite value is a broken
    /// measurement, and dropping it silently would hide that.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Self::of_sorted(&sorted))
    }

    /// `sorted` is non-empty, finite and ascending.
    fn of_sorted(sorted: &[f64]) -> Summary {
        let n = sorted.len();
        let (min, max) = (sorted[0], sorted[n - 1]);
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let stddev = if n > 1 {
            let ss: f64 = sorted.iter().map(|x| (x - mean) * (x - mean)).sum();
            (ss / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let median = quantile_sorted(sorted, 0.5);
        let q1 = quantile_sorted(sorted, 0.25);
        let q3 = quantile_sorted(sorted, 0.75);
        let (ci_low, ci_high) = median_ci_sorted(sorted);
        let iqr = q3 - q1;
        let outside = |k: f64| {
            let (lo, hi) = (q1 - k * iqr, q3 + k * iqr);
            sorted.iter().filter(|&&x| x < lo || x > hi).count()
        };
        Summary {
            n,
            median,
            mean,
            min,
            max,
            stddev,
            q1,
            q3,
            spread: relative(max - min, median),
            ci_low,
            ci_high,
            rel_ci: relative((ci_high - ci_low) / 2.0, median),
            outliers: outside(OUTLIER_FENCE),
            severe_outliers: outside(SEVERE_OUTLIER_FENCE),
        }
    }

    /// The best sample: the maximum when higher is better, the minimum when
    /// lower is better.
    pub fn best(&self, b: Better) -> f64 {
        match b {
            Better::Higher => self.max,
            Better::Lower => self.min,
        }
    }

    /// Placeholder for a measurement without a single finite sample: `n` = 0,
    /// every statistic NaN (`null` in JSON).
    fn no_data() -> Summary {
        let nan = f64::NAN;
        Summary {
            n: 0,
            median: nan,
            mean: nan,
            min: nan,
            max: nan,
            stddev: nan,
            q1: nan,
            q3: nan,
            spread: nan,
            ci_low: nan,
            ci_high: nan,
            rel_ci: nan,
            outliers: 0,
            severe_outliers: 0,
        }
    }
}

/// `part / |whole|`, with 0/0 = 0 and x/0 = infinity.
fn relative(part: f64, whole: f64) -> f64 {
    if whole == 0.0 {
        if part == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        part / whole.abs()
    }
}

/// Type 7 quantile of non-empty ascending `sorted`, `p` in [0, 1].
fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = h - lo as f64;
    if frac == 0.0 {
        sorted[lo]
    } else {
        sorted[lo] + frac * (sorted[hi] - sorted[lo])
    }
}

/// 1-based ranks `(l, u)` of the order statistics bounding the 95%
/// distribution-free confidence interval of the median of `n` samples, or
/// `None` when `n` < 6 (no pair of ranks reaches 95%).
pub fn median_ci_ranks(n: usize) -> Option<(usize, usize)> {
    let alpha_half = (1.0 - CONFIDENCE) / 2.0;
    // Cumulative Binomial(n, 1/2) in log space: 2^-n underflows past n = 1074.
    let ln_half_n = n as f64 * std::f64::consts::LN_2;
    let mut ln_choose = 0.0; // ln C(n, k)
    let mut cdf = 0.0; // P(X <= k)
    let mut l = 0; // largest l found so far with P(X <= l - 1) <= alpha/2
    for k in 0..=n / 2 {
        cdf += (ln_choose - ln_half_n).exp();
        // Tiny slack so exact ties with alpha/2 (none occur for 95%) are not lost to rounding.
        if cdf > alpha_half * (1.0 + 1e-12) {
            break;
        }
        l = k + 1;
        ln_choose += ((n - k) as f64).ln() - ((k + 1) as f64).ln();
    }
    (l >= 1).then(|| (l, n + 1 - l))
}

/// The 95% confidence interval of the median of non-empty ascending `sorted`.
fn median_ci_sorted(sorted: &[f64]) -> (f64, f64) {
    let n = sorted.len();
    match median_ci_ranks(n) {
        Some((l, u)) => (sorted[l - 1], sorted[u - 1]),
        None => (sorted[0], sorted[n - 1]),
    }
}

/// The median of the finite values (NaN and infinities left out), `None`
/// when there is none.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// When [`measure`] stops repeating.
///
/// The 97.5% quantile of Student's t with `df` degrees of freedom.
pub fn t_critical(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => TABLE[df - 1],
        // Within 0.002 of the exact quantile past 30 degrees.
        _ => 1.96 + 2.4 / df as f64,
    }
}

/// Order of the checks after each repetition: converged (`rel_ci <=
/// target_rel_ci` with at least `min_reps` samples), then `max_reps` reached,
/// then cancellation requested ([`super::cancel`]), then budget spent. The
/// budget only stops a measurement after at least two
/// repetitions, so that every measurement has a spread; a budget too small for
/// `min_reps` repetitions yields fewer samples (at least 2) and a warning, and
/// a single run longer than the budget makes the call last about
/// `warm-up + 2` runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StopRule {
    /// Runs before the measurement whose values are discarded (cold caches,
    /// page faults, frequency ramp-up). The first always runs when > 0
    /// (unless cancellation was requested before the call); later
    /// ones are skipped once the budget is spent.
    pub warmup: usize,
    /// Repetitions before convergence may stop the measurement.
    pub min_reps: usize,
    /// Hard cap on repetitions (values below 1 count as 1; below `min_reps`
    /// it lowers the minimum).
    pub max_reps: usize,
    /// Wanted half-width of the median's 95% confidence interval relative to
    /// the median (0.01 = ±1%).
    #[serde(deserialize_with = "f64_or_nan")]
    pub target_rel_ci: f64,
    /// Wall time of the whole [`measure`] call, warm-up included; in JSON,
    /// seconds as a number.
    #[serde(serialize_with = "ser_secs", deserialize_with = "de_secs")]
    pub budget: Duration,
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// The inverse of `ser_secs`: seconds (a non-negative number) to a
/// duration, to the nearest nanosecond (exact for what `ser_secs` wrote).
fn de_secs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let secs = f64::deserialize(d)?;
    Duration::try_from_secs_f64(secs).map_err(|e| {
        serde::de::Error::custom(format!(
            "{secs} is not a duration in seconds (a number >= 0): {e}"
        ))
    })
}

impl Default for StopRule {
    fn default() -> Self {
        StopRule {
            warmup: 1,
            min_reps: 5,
            max_reps: 1000,
            target_rel_ci: 0.01,
            budget: Duration::from_secs(3),
        }
    }
}

impl StopRule {
    /// A one-line error for a rule that cannot mean what its user wants
    /// (for command-line front ends; [`measure`] itself copes with any rule).
    pub fn validate(&self) -> Result<(), String> {
        if self.min_reps < 1 {
            return Err("the minimum number of repetitions must be at least 1".into());
        }
        if self.max_reps < self.min_reps {
            return Err(format!(
                "the maximum number of repetitions ({}) is below the minimum ({})",
                self.max_reps, self.min_reps
            ));
        }
        if !(self.target_rel_ci.is_finite() && self.target_rel_ci >= 0.0) {
            return Err(format!(
                "the target precision must be a finite fraction >= 0 (got {})",
                self.target_rel_ci
            ));
        }
        Ok(())
    }
}

/// Why [`measure`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The median is as precise as asked, after at least `min_reps` samples.
    Converged,
    /// The time budget ran out first.
    Budget,
    /// `max_reps` repetitions ran.
    MaxReps,
    /// Cancellation was requested ([`super::cancel`]): the samples taken
    /// until then (possibly none) are not a valid measurement.
    Cancelled,
}

/// Samples of one quantity and their statistics.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measurement {
    /// The measured samples, in the order they were taken (finite only).
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub samples: Vec<f64>,
    /// The discarded warm-up values, in order (NaN and infinities included).
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub warmup_samples: Vec<f64>,
    /// Statistics of `samples`; `n` = 0 with NaN (`null`) statistics when no
    /// repetition gave a finite value.
    pub summary: Summary,
    pub stop_reason: StopReason,
    /// Wall time of the whole measurement, warm-up included, in seconds.
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
    /// Repetitions whose value was NaN or infinite (left out of `samples`,
    /// counted against `max_reps`).
    pub non_finite: usize,
    /// The rule the measurement followed (for the warnings and the record).
    pub rule: StopRule,
}

/// Runs `sample` repeatedly as `rule` says and summarizes the values it
/// returns: `rule.warmup` discarded runs, then repetitions until the median
/// is precise enough ([`StopReason::Converged`]), `rule.max_reps`
/// repetitions ran ([`StopReason::MaxReps`]) or the time budget is spent
/// ([`StopReason::Budget`]); see [`StopRule`] for the exact order.
///
/// A repetition returning NaN or an infinity counts as a repetition but not
/// as a sample (see [`Measurement::non_finite`]).
///
/// Cancellation ([`super::cancel::request`]) is looked at before the first
/// run and after every warm-up run and repetition: once requested, no
/// further run is made and the summary of the samples taken so far comes
/// back with [`StopReason::Cancelled`] (the no-data summary when there is no
/// finite sample).
pub fn measure<F: FnMut() -> f64>(rule: &StopRule, mut sample: F) -> Measurement {
    let start = Instant::now();
    let spent = || start.elapsed() >= rule.budget;
    let max_reps = rule.max_reps.max(1);
    let min_reps = rule.min_reps.clamp(1, max_reps);

    let mut cancelled = cancel::requested();
    let mut warmup_samples = Vec::with_capacity(rule.warmup);
    for i in 0..rule.warmup {
        if cancelled || (i > 0 && spent()) {
            break;
        }
        warmup_samples.push(sample());
        cancelled = cancel::requested();
    }

    let mut samples = Vec::new();
    let mut sorted: Vec<f64> = Vec::new();
    let mut non_finite = 0;
    let mut reps = 0;
    let stop_reason = loop {
        if cancelled {
            break StopReason::Cancelled;
        }
        let x = sample();
        reps += 1;
        if x.is_finite() {
            samples.push(x);
            let at = sorted.partition_point(|&y| y <= x);
            sorted.insert(at, x);
        } else {
            non_finite += 1;
        }
        if sorted.len() >= min_reps && converged(&sorted, rule.target_rel_ci) {
            break StopReason::Converged;
        }
        if reps >= max_reps {
            break StopReason::MaxReps;
        }
        if cancel::requested() {
            break StopReason::Cancelled;
        }
        if reps >= 2 && spent() {
            break StopReason::Budget;
        }
    };
    let summary = if sorted.is_empty() {
        Summary::no_data()
    } else {
        Summary::of_sorted(&sorted)
    };
    Measurement {
        samples,
        warmup_samples,
        summary,
        stop_reason,
        elapsed_s: start.elapsed().as_secs_f64(),
        non_finite,
        rule: rule.clone(),
    }
}

/// Whether the median of non-empty ascending `sorted` is precise to `target`.
fn converged(sorted: &[f64], target: f64) -> bool {
    let median = quantile_sorted(sorted, 0.5);
    let (lo, hi) = median_ci_sorted(sorted);
    relative((hi - lo) / 2.0, median) <= target
}

impl Measurement {
    /// Plain sentences about what makes this measurement doubtful, in the
    /// spirit of hyperfine's warnings; empty when all is well.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let s = &self.summary;
        let n = s.n;
        if self.non_finite > 0 {
            out.push(format!(
                "{} of {} repetitions gave no finite value (NaN or infinity) and were left out: \
                 the run may be too short for the timer, or a rate divides by zero",
                self.non_finite,
                self.non_finite + n
            ));
        }
        if self.stop_reason == StopReason::Cancelled {
            out.push(format!(
                "cancelled after {n} repetition{}: not a valid measurement",
                if n == 1 { "" } else { "s" }
            ));
        }
        if n == 0 {
            return out;
        }
        if s.outliers > 0 {
            let severe = if s.severe_outliers > 0 {
                format!(", {} severe (3 IQR)", s.severe_outliers)
            } else {
                String::new()
            };
            out.push(format!(
                "{} of {} samples are outliers (Tukey 1.5 IQR){severe}; the system may be noisy: \
                 close other programs, pin, or raise --min-reps",
                s.outliers, n
            ));
        }
        let min_reps = self.rule.min_reps.clamp(1, self.rule.max_reps.max(1));
        if self.stop_reason == StopReason::Budget && n < min_reps {
            out.push(format!(
                "only {n} repetitions fit in the {} budget (minimum {min_reps}): \
                 raise the budget or shorten one run",
                fmt_duration(self.rule.budget)
            ));
        }
        // NaN (no data) counts as not precise.
        let precise = s.rel_ci <= self.rule.target_rel_ci;
        let incomplete = matches!(self.stop_reason, StopReason::Budget | StopReason::MaxReps);
        if incomplete && !precise {
            let why = match self.stop_reason {
                StopReason::Budget => format!("in the {} budget", fmt_duration(self.rule.budget)),
                _ => "(the maximum)".to_string(),
            };
            out.push(format!(
                "median not precise: ±{} after {n} repetitions {why} (target ±{})",
                fmt_pct(s.rel_ci),
                fmt_pct(self.rule.target_rel_ci)
            ));
        }
        let first = [
            ("first warm-up run", self.warmup_samples.first()),
            ("first measured sample", self.samples.first()),
        ];
        for (what, x) in first {
            let Some(&x) = x else { continue };
            let dev = relative(x - s.median, s.median);
            if x.is_finite() && dev.abs() > FIRST_RUN_DEVIATION {
                let advice = if what.contains("warm-up") {
                    "it was discarded"
                } else {
                    "consider more warm-up runs"
                };
                out.push(format!(
                    "the {what} differs from the median by {}{} (cold caches, page faults, \
                     frequency ramp-up); {advice}",
                    if dev > 0.0 { "+" } else { "-" },
                    fmt_pct(dev.abs())
                ));
            }
        }
        out
    }
}

/// A fraction as a percentage with at most one decimal: 0.023 -> "2.3%",
/// 0.01 -> "1%".
fn fmt_pct(fraction: f64) -> String {
    if !fraction.is_finite() {
        return "∞%".to_string();
    }
    let text = format!("{:.1}", fraction * 100.0);
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text}%")
}

/// A duration for a sentence: "3 s", "1.5 s", "250 ms".
fn fmt_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs >= 1.0 {
        let text = format!("{secs:.1}");
        format!("{} s", text.strip_suffix(".0").unwrap_or(&text))
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_table_and_approach_the_normal() {
        assert_eq!(t_critical(1), 12.706);
        assert_eq!(t_critical(30), 2.042);
        assert!((t_critical(120) - 1.980).abs() < 0.002);
        assert!((t_critical(100_000) - 1.960).abs() < 0.001);
    }

    #[test]
    fn type7_quantiles() {
        let v: Vec<f64> = (1..=4).map(f64::from).collect();
        assert_eq!(quantile_sorted(&v, 0.0), 1.0);
        assert_eq!(quantile_sorted(&v, 1.0), 4.0);
        assert_eq!(quantile_sorted(&v, 0.5), 2.5);
        assert_eq!(quantile_sorted(&[7.0], 0.25), 7.0);
    }

    #[test]
    fn ranks_small_n() {
        for n in 0..6 {
            assert_eq!(median_ci_ranks(n), None, "n={n}");
        }
        assert_eq!(median_ci_ranks(6), Some((1, 6)));
        assert_eq!(median_ci_ranks(9), Some((2, 8)));
        assert_eq!(median_ci_ranks(10), Some((2, 9)));
    }

    #[test]
    fn ranks_do_not_underflow_for_large_n() {
        // Normal approximation: l ~ n/2 - 1.96 sqrt(n)/2.
        let (l, u) = median_ci_ranks(10_000).unwrap();
        assert!((4900..4903).contains(&l), "l={l}");
        assert_eq!(l + u, 10_001);
    }

    #[test]
    fn relative_handles_zero_median() {
        assert_eq!(relative(0.0, 0.0), 0.0);
        assert_eq!(relative(1.0, 0.0), f64::INFINITY);
        assert_eq!(relative(1.0, -4.0), 0.25);
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_pct(0.023), "2.3%");
        assert_eq!(fmt_pct(0.01), "1%");
        assert_eq!(fmt_pct(0.005), "0.5%");
        assert_eq!(fmt_duration(Duration::from_secs(3)), "3 s");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(fmt_duration(Duration::from_millis(250)), "250 ms");
    }
}
