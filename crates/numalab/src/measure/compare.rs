//! One statistical comparison of two samples, shared by every experiment that
//! says "A is faster than B" or "A and B are the same": a Mann–Whitney U rank
//! test for whether the difference is real, and a Hodges–Lehmann (Moses)
//! confidence interval of the ratio for how large it is.
//!
//! Rank statistics because timings are skewed and have outliers (a preempted
//! sample), so a mean and its standard error would let one bad sample decide.
//! The ratio's interval is computed on log values, where a ratio is a shift,
//! so that "1.3x (95% CI 1.2–1.4)" reads the same whichever side is larger.
//!
//! The p-values follow R's `wilcox.test` (exact distribution when both samples
//! have fewer than 50 values and there are no ties; otherwise the normal
//! approximation with tie and continuity correction), so a reader can
//! reproduce any figure with one line of R.

use serde::{Deserialize, Serialize};

use crate::serde_util::f64_or_nan;
use crate::text::format;

/// Outcome of a comparison or a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The evidence supports the statement.
    Holds,
    /// The evidence supports the opposite of the statement.
    DoesNotHold,
    /// The evidence decides neither way: noise, or too few samples.
    CannotTell,
}

impl Verdict {
    /// The verdict in words, for text: "holds", "does not hold", "cannot tell".
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::DoesNotHold => "does not hold",
            Verdict::CannotTell => "cannot tell",
        }
    }
}

/// Two samples of times (or any positive figures) compared by a rank test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankComparison {
    /// Number of values in sample a.
    pub n_a: usize,
    /// Number of values in sample b.
    pub n_b: usize,
    /// Median of sample a.
    pub median_a: f64,
    /// Median of sample b.
    pub median_b: f64,
    /// median_a / median_b
    pub ratio: f64,
    /// The Hodges–Lehmann estimate of the ratio a/b (the median of all
    /// pairwise ratios): the point its interval is built around, so it always
    /// lies inside [`RankComparison::ratio_low`, `RankComparison::ratio_high`],
    /// which the ratio of medians need not (NaN in results written before it).
    #[serde(default = "nan", deserialize_with = "f64_or_nan")]
    pub estimate: f64,
    /// 95% confidence interval of the ratio a/b (Hodges–Lehmann / Moses
    /// interval on log values; NaN when too few samples)
    #[serde(deserialize_with = "f64_or_nan")]
    pub ratio_low: f64,
    /// Upper end of the interval of [`RankComparison::ratio_low`].
    #[serde(deserialize_with = "f64_or_nan")]
    pub ratio_high: f64,
    /// two-sided Mann–Whitney U p-value (exact for small samples without
    /// ties, normal approximation with tie correction otherwise)
    pub p_value: f64,
}

/// Significance level of every comparison.
pub const ALPHA: f64 = 0.05;

/// The rule in words, for reports.
pub const RULE: &str = "Mann–Whitney U two-sided, p < 0.05; 95% CI of the ratio (Hodges–Lehmann)";

/// Below this many values in each sample the exact distribution of U is
/// used (R's `wilcox.test` threshold); it also bounds the exact table's size.
const EXACT_BELOW: usize = 50;

/// The standard normal quantile of 0.975, for the large-sample interval.
const Z_975: f64 = 1.959_963_984_540_054;

/// Compares sample `a` with sample `b`. `None` when either is empty or a
/// value is not finite or not positive (the ratio's interval is taken on
/// log values).
pub fn rank_compare(a: &[f64], b: &[f64]) -> Option<RankComparison> {
    if a.is_empty() || b.is_empty() || a.iter().chain(b).any(|v| !v.is_finite() || *v <= 0.0) {
        return None;
    }
    let (m, n) = (a.len(), b.len());
    let median_a = median_of(a);
    let median_b = median_of(b);
    let (u, tie_groups) = u_statistic(a, b);
    let exact = m < EXACT_BELOW && n < EXACT_BELOW;
    let table = exact.then(|| LowerTail::new(m, n));
    let p_value = match &table {
        Some(t) if tie_groups.is_empty() => t.two_sided_p(u),
        _ => normal_p(u, m, n, &tie_groups),
    };
    let (estimate, ratio_low, ratio_high) = ratio_interval(a, b, table.as_ref());
    Some(RankComparison {
        n_a: m,
        n_b: n,
        median_a,
        median_b,
        ratio: median_a / median_b,
        estimate,
        ratio_low,
        ratio_high,
        p_value,
    })
}

impl RankComparison {
    /// a smaller than b (e.g. a faster in seconds): Holds when p < ALPHA and
    /// ratio < 1; DoesNotHold when p < ALPHA and ratio > 1; CannotTell
    /// otherwise (noise, or too few samples to reach ALPHA — with n_a=n_b=1
    /// it is always CannotTell).
    pub fn a_smaller(&self) -> Verdict {
        // A NaN p-value (never produced here, but possible in a result read
        // back) decides nothing.
        let significant = self.p_value < ALPHA;
        if !significant {
            Verdict::CannotTell
        } else if self.ratio < 1.0 {
            Verdict::Holds
        } else if self.ratio > 1.0 {
            Verdict::DoesNotHold
        } else {
            Verdict::CannotTell
        }
    }

    /// a and b equal within `margin` (e.g. 0.05 = 5%): Holds when the whole
    /// CI lies inside [1/(1+margin), 1+margin]; DoesNotHold when p < ALPHA
    /// and the CI lies wholly outside it; CannotTell otherwise (including
    /// when the CI could not be computed).
    pub fn equal_within(&self, margin: f64) -> Verdict {
        let (low, high) = (self.ratio_low, self.ratio_high);
        if !(low.is_finite() && high.is_finite() && margin.is_finite() && margin >= 0.0) {
            return Verdict::CannotTell;
        }
        let band_low = 1.0 / (1.0 + margin);
        let band_high = 1.0 + margin;
        if low >= band_low && high <= band_high {
            Verdict::Holds
        } else if self.p_value < ALPHA && (high < band_low || low > band_high) {
            Verdict::DoesNotHold
        } else {
            Verdict::CannotTell
        }
    }

    /// "1.32x (95% CI 1.25–1.40), p = 0.002" for text: the Hodges–Lehmann
    /// estimate with its interval (the ratio of medians where no estimate
    /// was recorded).
    pub fn describe(&self) -> String {
        let ci = if self.ratio_low.is_finite() && self.ratio_high.is_finite() {
            format!(
                "95% CI {}–{}",
                format::fixed(self.ratio_low, 2),
                format::fixed(self.ratio_high, 2)
            )
        } else {
            "95% CI n/a, too few samples".to_string()
        };
        let p = if self.p_value < 0.001 {
            "p < 0.001".to_string()
        } else {
            format!("p = {}", format::fixed(self.p_value, 3))
        };
        let point = if self.estimate.is_finite() {
            self.estimate
        } else {
            self.ratio
        };
        format!("{}x ({ci}), {p}", format::fixed(point, 2))
    }
}

/// The samples' median ([`super::stats::median`], the one median);
/// `rank_compare` checked that they are finite and not empty.
fn median_of(v: &[f64]) -> f64 {
    super::stats::median(v.to_vec()).unwrap_or(f64::NAN)
}

/// U of sample a (pairs where a's value is larger, ties counting one half,
/// R's `W`) and the sizes of the groups of tied values in the pooled sample.
fn u_statistic(a: &[f64], b: &[f64]) -> (f64, Vec<usize>) {
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut rank_sum_a = 0.0;
    let mut ties = Vec::new();
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i;
        while j + 1 < pooled.len() && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        // Ranks i+1..=j+1 share their mean.
        let mid_rank = (i + j) as f64 / 2.0 + 1.0;
        let in_a = pooled[i..=j].iter().filter(|p| p.1).count();
        rank_sum_a += mid_rank * in_a as f64;
        if j > i {
            ties.push(j - i + 1);
        }
        i = j + 1;
    }
    let m = a.len() as f64;
    (rank_sum_a - m * (m + 1.0) / 2.0, ties)
}

/// The exact null distribution of U for sizes m and n, lower half only (it
/// is symmetric about mn/2).
struct LowerTail {
    /// cdf[u] = P(U <= u) for u in 0..=mn/2.
    cdf: Vec<f64>,
    mn: usize,
}

impl LowerTail {
    fn new(m: usize, n: usize) -> LowerTail {
        let half = m * n / 2;
        // count[j][u]: arrangements of i values of a and j of b with U = u.
        // The largest value is either a's (beating all j of b) or b's:
        // c(i, j, u) = c(i-1, j, u-j) + c(i, j-1, u). Probabilities rather
        // than counts keep every term within f64's range.
        let mut prev = vec![vec![0.0f64; half + 1]; n + 1];
        for row in prev.iter_mut() {
            row[0] = 1.0;
        }
        for i in 1..=m {
            let mut cur = vec![vec![0.0f64; half + 1]; n + 1];
            cur[0][0] = 1.0;
            for j in 1..=n {
                let (wa, wb) = (i as f64 / (i + j) as f64, j as f64 / (i + j) as f64);
                for u in 0..=half {
                    let from_a = if u >= j { prev[j][u - j] } else { 0.0 };
                    cur[j][u] = wa * from_a + wb * cur[j - 1][u];
                }
            }
            prev = cur;
        }
        let mut cdf = prev.swap_remove(n);
        for u in 1..cdf.len() {
            cdf[u] += cdf[u - 1];
        }
        LowerTail { cdf, mn: m * n }
    }

    /// P(U <= u) for an integer u.
    fn at_most(&self, u: usize) -> f64 {
        if u < self.cdf.len() {
            self.cdf[u]
        } else if u >= self.mn {
            1.0
        } else {
            // Symmetry: P(U <= u) = 1 - P(U <= mn - u - 1).
            1.0 - self.cdf[self.mn - u - 1]
        }
    }

    /// Two-sided p-value of an observed U without ties (R's rule).
    fn two_sided_p(&self, u: f64) -> f64 {
        let u = u.round() as usize;
        let one_side = if 2 * u > self.mn {
            1.0 - self.at_most(u - 1)
        } else {
            self.at_most(u)
        };
        (2.0 * one_side).min(1.0)
    }
}

/// Two-sided p-value by the normal approximation with tie and continuity
/// correction (R's rule). With every value tied there is no variance and no
/// evidence of a difference: 1.
fn normal_p(u: f64, m: usize, n: usize, ties: &[usize]) -> f64 {
    let (mf, nf) = (m as f64, n as f64);
    let total = mf + nf;
    let tie_term: f64 = ties
        .iter()
        .map(|&t| (t as f64).powi(3) - t as f64)
        .sum::<f64>()
        / (total * (total - 1.0));
    let sigma = (mf * nf / 12.0 * (total + 1.0 - tie_term)).max(0.0).sqrt();
    let z = u - mf * nf / 2.0;
    if sigma.is_nan() || sigma <= 0.0 {
        return 1.0;
    }
    // R's sign(0) is 0: no continuity correction when U sits at its mean.
    let correction = if z == 0.0 { 0.0 } else { 0.5 * z.signum() };
    let z = (z - correction) / sigma;
    erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0)
}

fn nan() -> f64 {
    f64::NAN
}

/// The Hodges–Lehmann estimate of the ratio a/b and its Moses interval: the
/// median and the order statistics of all pairwise differences of logs,
/// the interval's ranks from U's distribution (NaN when too few samples).
fn ratio_interval(a: &[f64], b: &[f64], table: Option<&LowerTail>) -> (f64, f64, f64) {
    let (m, n) = (a.len(), b.len());
    let mn = m * n;
    let k = match table {
        // Largest k with P(U <= k-1) <= 2.5%: [d_(k), d_(mn+1-k)] covers at least 95%.
        Some(t) => (0..=mn / 2)
            .take_while(|&u| t.at_most(u) <= ALPHA / 2.0)
            .count(),
        None => {
            let (mf, nf) = (m as f64, n as f64);
            let c = mf * nf / 2.0 - Z_975 * (mf * nf * (mf + nf + 1.0) / 12.0).sqrt();
            c.round().max(0.0) as usize
        }
    };
    let mut diffs = Vec::with_capacity(mn);
    for x in a {
        for y in b {
            diffs.push(x.ln() - y.ln());
        }
    }
    diffs.sort_by(f64::total_cmp);
    let estimate = median_of(&diffs).exp();
    if k == 0 {
        return (estimate, f64::NAN, f64::NAN);
    }
    (estimate, diffs[k - 1].exp(), diffs[mn - k].exp())
}

/// Two-sided p-value that two shares, `k1` of `n1` and `k2` of `n2`, are
/// equal: the pooled two-proportion z-test (R's `prop.test` without
/// continuity correction). `None` when a side has no trials or the pooled
/// share is 0 or 1 (no variance: equal, or nothing to test).
pub fn two_proportion_p(k1: u64, n1: u64, k2: u64, n2: u64) -> Option<f64> {
    if n1 == 0 || n2 == 0 || k1 > n1 || k2 > n2 {
        return None;
    }
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let pooled = (k1 + k2) as f64 / (n1f + n2f);
    if pooled <= 0.0 || pooled >= 1.0 {
        return None;
    }
    let se = (pooled * (1.0 - pooled) * (1.0 / n1f + 1.0 / n2f)).sqrt();
    let z = (k1 as f64 / n1f - k2 as f64 / n2f) / se;
    Some(erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0))
}

/// The two-sided p-value of a score `z` of a standard normal variable.
pub fn normal_two_sided_p(z: f64) -> f64 {
    erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0)
}

/// Benjamini and Hochberg's step-up procedure: which of a family of
/// p-values are discoveries at false-discovery rate `q` (the largest k whose
/// k-th smallest p-value is at most q·k/m, and every p-value up to it), in
/// the same order. Where most of many tests are true nulls it lets through
/// the few large effects and almost none of the chance extremes a fixed
/// threshold flags in proportion to the number of tests.
pub fn benjamini_hochberg(p: &[f64], q: f64) -> Vec<bool> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let last = order
        .iter()
        .enumerate()
        .rev()
        .find(|(rank, &i)| p[i] <= q * (rank + 1) as f64 / m as f64)
        .map_or(0, |(rank, _)| rank + 1);
    let mut out = vec![false; m];
    for &i in &order[..last] {
        out[i] = true;
    }
    out
}

/// Holm's step-down correction of a family of p-values: the adjusted
/// p-values, in the same order (each at most 1, never below an earlier
/// one in ascending order).
pub fn holm(p: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let m = p.len();
    let mut out = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// Complementary error function: the power series of erf where it converges
/// without much cancellation, the continued fraction of erfc beyond; both
/// better than 1e-12 relative where a p-value can be told from 0.
fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 2.5 {
        let mut term = x;
        let mut sum = x;
        let x2 = x * x;
        for k in 1..200 {
            term *= -x2 / k as f64;
            let add = term / (2 * k + 1) as f64;
            sum += add;
            if add.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        1.0 - 2.0 / std::f64::consts::PI.sqrt() * sum
    } else {
        // erfc(x) = exp(-x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))).
        let mut tail = 0.0;
        for k in (1..=80).rev() {
            tail = (k as f64 / 2.0) / (x + tail);
        }
        (-x * x).exp() / std::f64::consts::PI.sqrt() / (x + tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// Exact p-values, the same as R's `wilcox.test(x, y)` prints; each is a
    /// count of arrangements over C(m+n, m), worked out by hand:
    /// - x=1:4, y=5:8: U=0, only 1 of the 70 arrangements is as extreme on
    ///   each side: p = 2/70 = 0.02857.
    /// - x=1:3, y=4:6: p = 2/20 = 0.1 (the smallest p for 3 against 3).
    /// - x=1:5, y=6:10: p = 2/252 = 0.007937.
    /// - x=c(1,3,5,7), y=c(2,4,6,8): U=6; the counts of U for 4 against 4
    ///   are 1,1,2,3,5,5,7,... so P(U<=6) = 24/70 and p = 48/70 = 0.6857.
    #[test]
    fn exact_p_values_match_r() {
        let p = |a: &[f64], b: &[f64]| rank_compare(a, b).unwrap().p_value;
        assert!(close(
            p(&[1., 2., 3., 4.], &[5., 6., 7., 8.]),
            2.0 / 70.0,
            1e-12
        ));
        assert!(close(
            p(&[5., 6., 7., 8.], &[1., 2., 3., 4.]),
            2.0 / 70.0,
            1e-12
        ));
        assert!(close(p(&[1., 2., 3.], &[4., 5., 6.]), 0.1, 1e-12));
        assert!(close(
            p(&[1., 2., 3., 4., 5.], &[6., 7., 8., 9., 10.]),
            2.0 / 252.0,
            1e-12
        ));
        assert!(close(
            p(&[1., 3., 5., 7.], &[2., 4., 6., 8.]),
            48.0 / 70.0,
            1e-12
        ));
        assert!(close(
            p(&[2., 4., 6., 8.], &[1., 3., 5., 7.]),
            48.0 / 70.0,
            1e-12
        ));
    }

    /// The exact table against brute force: every way to choose which of
    /// the m+n ranks belong to a, counting U for each.
    #[test]
    fn exact_distribution_matches_enumeration() {
        for (m, n) in [(1, 1), (3, 4), (4, 4), (5, 3), (2, 7)] {
            let total = m + n;
            let mut counts = vec![0u64; m * n + 1];
            for mask in 0u32..(1 << total) {
                if mask.count_ones() as usize != m {
                    continue;
                }
                // Bit r set: rank r is a's; U counts b's below each of a's.
                let u: usize = (0..total)
                    .filter(|r| mask >> r & 1 == 1)
                    .map(|r| (0..r).filter(|q| mask >> q & 1 == 0).count())
                    .sum();
                counts[u] += 1;
            }
            let all: u64 = counts.iter().sum();
            let t = LowerTail::new(m, n);
            let mut cum = 0;
            for (u, c) in counts.iter().enumerate() {
                cum += c;
                assert!(
                    close(t.at_most(u), cum as f64 / all as f64, 1e-12),
                    "{m}x{n} u={u}"
                );
            }
        }
        // 49 against 49: one of C(98,49) ≈ 2.5e28 arrangements has U=0.
        let t = LowerTail::new(49, 49);
        assert!(
            close(t.cdf[0] / 3.925_014_596_481_662e-29, 1.0, 1e-9),
            "{}",
            t.cdf[0]
        );
    }

    /// With ties R uses the normal approximation. x=c(1,2,3,4,5),
    /// y=c(3,4,5,6,7): W=4.5, ties {3,4,5} in pairs, so
    /// sigma² = 25/12·(11 − 18/90) = 22.5, z = (4.5−12.5+0.5)/√22.5 = −1.5811
    /// and p = 2Φ(−1.5811) = 0.11385 (R prints 0.1138).
    #[test]
    fn tied_p_value_uses_the_corrected_normal_approximation() {
        let c = rank_compare(&[1., 2., 3., 4., 5.], &[3., 4., 5., 6., 7.]).unwrap();
        assert!(
            close(c.p_value, 0.113_846_298_006_658, 1e-9),
            "{}",
            c.p_value
        );
    }

    /// erfc against known values: erfc(1) = 0.157299207050285,
    /// erfc(3) = 2.20904969985854e-5, erfc(0.5) = 0.479500122186953.
    #[test]
    fn two_proportions_match_r() {
        // prop.test(c(45, 30), c(100, 100), correct = FALSE): p = 0.02846.
        let p = two_proportion_p(45, 100, 30, 100).unwrap();
        assert!(close(p, 0.028_459_736, 1e-6), "{p}");
        // Symmetric, and 1 for equal shares.
        assert_eq!(two_proportion_p(30, 100, 45, 100), Some(p));
        assert!(close(
            two_proportion_p(10, 40, 25, 100).unwrap(),
            1.0,
            1e-12
        ));
        assert_eq!(two_proportion_p(0, 10, 0, 20), None);
        assert_eq!(two_proportion_p(1, 0, 0, 20), None);
        assert_eq!(two_proportion_p(11, 10, 0, 20), None);
    }

    #[test]
    fn holm_adjusts_step_down() {
        // p.adjust(c(0.01, 0.04, 0.03, 0.5), "holm") = 0.04 0.09 0.09 0.5.
        let adj = holm(&[0.01, 0.04, 0.03, 0.5]);
        for (a, b) in adj.iter().zip([0.04, 0.09, 0.09, 0.5]) {
            assert!(close(*a, b, 1e-12), "{adj:?}");
        }
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn benjamini_hochberg_steps_up_to_the_largest_rank_under_its_line() {
        // m = 5, q = 0.05: lines 0.01, 0.02, 0.03, 0.04, 0.05. The third
        // smallest (0.025) is under its line, so the first three are
        // discoveries, the second (0.021 > 0.02) included: step-up.
        let p = [0.2, 0.001, 0.025, 0.021, 0.9];
        assert_eq!(
            benjamini_hochberg(&p, 0.05),
            [false, true, true, true, false]
        );
        assert_eq!(benjamini_hochberg(&[0.5, 0.6], 0.05), [false, false]);
        assert!(benjamini_hochberg(&[], 0.05).is_empty());
        assert!(close(normal_two_sided_p(1.959_964), 0.05, 1e-5));
        assert!(close(normal_two_sided_p(-3.5) / 4.652_581e-4, 1.0, 1e-5));
    }

    #[test]
    fn erfc_known_values() {
        assert!(close(erfc(1.0), 0.157_299_207_050_285, 1e-13));
        assert!(close(erfc(0.5), 0.479_500_122_186_953, 1e-13));
        assert!(close(erfc(3.0) / 2.209_049_699_858_54e-5, 1.0, 1e-10));
        assert!(close(erfc(-1.0), 2.0 - 0.157_299_207_050_285, 1e-13));
    }

    #[test]
    fn identical_samples_cannot_tell_which_is_smaller_but_are_equal() {
        let a = [1.000, 1.001, 0.999, 1.0005, 0.9995, 1.0002, 0.9998, 1.0001];
        let c = rank_compare(&a, &a).unwrap();
        assert_eq!(c.a_smaller(), Verdict::CannotTell);
        assert!(close(c.p_value, 1.0, 1e-9), "{}", c.p_value);
        assert_eq!(c.ratio, 1.0);
        assert!(
            c.ratio_low < 1.0 && c.ratio_high > 1.0 && c.ratio_high < 1.003,
            "{c:?}"
        );
        assert_eq!(c.equal_within(0.05), Verdict::Holds);
        // Every value the same: no variance, no difference, an interval of one point.
        let c = rank_compare(&[2.0; 6], &[2.0; 6]).unwrap();
        assert_eq!((c.p_value, c.ratio_low, c.ratio_high), (1.0, 1.0, 1.0));
        assert_eq!(c.a_smaller(), Verdict::CannotTell);
        assert_eq!(c.equal_within(0.01), Verdict::Holds);
    }

    #[test]
    fn one_sample_each_cannot_tell_anything() {
        let c = rank_compare(&[1.0], &[2.0]).unwrap();
        assert_eq!(c.p_value, 1.0);
        assert_eq!(c.ratio, 0.5);
        assert!(c.ratio_low.is_nan() && c.ratio_high.is_nan());
        assert_eq!(c.a_smaller(), Verdict::CannotTell);
        assert_eq!(c.equal_within(10.0), Verdict::CannotTell);
        assert!(c.describe().contains("n/a"), "{}", c.describe());
        // Three against three can never reach p < 0.05 either.
        let c = rank_compare(&[1., 2., 3.], &[10., 20., 30.]).unwrap();
        assert_eq!(c.a_smaller(), Verdict::CannotTell);
    }

    #[test]
    fn empty_or_non_finite_or_non_positive_is_none() {
        assert!(rank_compare(&[], &[1.0]).is_none());
        assert!(rank_compare(&[1.0], &[]).is_none());
        assert!(rank_compare(&[1.0, f64::NAN], &[1.0]).is_none());
        assert!(rank_compare(&[1.0], &[f64::INFINITY]).is_none());
        assert!(rank_compare(&[1.0, 0.0], &[1.0]).is_none());
        assert!(rank_compare(&[1.0], &[-1.0]).is_none());
    }

    /// Samples b and a = 1.3·b' with b, b' drawn alike: the interval holds
    /// the true ratio, the test tells a is larger, and not equal within 5%.
    #[test]
    fn interval_contains_the_true_ratio_of_shifted_samples() {
        for (seed, n) in [(1u64, 10usize), (2, 20), (3, 60), (4, 7)] {
            let mut rng = crate::random::SplitMix64::new(seed);
            let mut draw = || 1.0 + 0.1 * rng.unit();
            let b: Vec<f64> = (0..n).map(|_| draw()).collect();
            let a: Vec<f64> = (0..n).map(|_| 1.3 * draw()).collect();
            let c = rank_compare(&a, &b).unwrap();
            assert!(c.ratio_low <= 1.3 && 1.3 <= c.ratio_high, "n={n}: {c:?}");
            assert!(c.p_value < ALPHA, "n={n}: {c:?}");
            assert_eq!(c.a_smaller(), Verdict::DoesNotHold, "n={n}");
            assert_eq!(c.equal_within(0.05), Verdict::DoesNotHold, "n={n}");
            let r = rank_compare(&b, &a).unwrap();
            assert_eq!(r.a_smaller(), Verdict::Holds, "n={n}");
            assert!(
                close(r.ratio_low * c.ratio_high, 1.0, 1e-9),
                "the interval mirrors"
            );
        }
    }

    #[test]
    fn describe_shape() {
        let c = RankComparison {
            n_a: 10,
            n_b: 10,
            median_a: 1.32,
            median_b: 1.0,
            ratio: 1.5,
            estimate: 1.32,
            ratio_low: 1.25,
            ratio_high: 1.4,
            p_value: 0.002,
        };
        assert_eq!(c.describe(), "1.32x (95% CI 1.25–1.40), p = 0.002");
        let c = RankComparison { p_value: 1e-5, ..c };
        assert_eq!(c.describe(), "1.32x (95% CI 1.25–1.40), p < 0.001");
        let old = RankComparison {
            estimate: f64::NAN,
            ..c
        };
        assert_eq!(old.describe(), "1.50x (95% CI 1.25–1.40), p < 0.001");
    }

    #[test]
    fn the_estimate_lies_in_its_interval_where_the_ratio_of_medians_does_not() {
        // Two modes, 1 and 3, in both samples: a's median falls in the low
        // one and b's in the high one (ratio about 1/3), while most pairs of
        // a and b are within 5% of each other.
        let jitter = |i: usize| 1.0 + i as f64 / 1000.0;
        let a: Vec<f64> = (0..15)
            .map(|i| if i < 8 { 1.0 } else { 3.0 } * jitter(i))
            .collect();
        let b: Vec<f64> = (0..15)
            .map(|i| if i < 7 { 1.0 } else { 3.0 } * jitter(i + 20))
            .collect();
        let c = rank_compare(&a, &b).unwrap();
        assert!(c.ratio < 0.4, "{c:?}");
        assert!(c.ratio < c.ratio_low, "{c:?}");
        assert!(
            c.ratio_low <= c.estimate && c.estimate <= c.ratio_high,
            "{c:?}"
        );
        assert!((c.estimate - 1.0).abs() < 0.05, "{c:?}");
        // And on many random pairs of samples.
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            0.5 + (seed % 1000) as f64 / 100.0
        };
        for _ in 0..200 {
            let a: Vec<f64> = (0..9).map(|_| next()).collect();
            let b: Vec<f64> = (0..8).map(|_| next()).collect();
            let c = rank_compare(&a, &b).unwrap();
            assert!(
                c.ratio_low <= c.estimate && c.estimate <= c.ratio_high,
                "{c:?}"
            );
        }
    }

    #[test]
    fn json_round_trip_keeps_a_missing_interval() {
        let c = rank_compare(&[1.0], &[2.0]).unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"ratio_low\":null"), "{json}");
        let back: RankComparison = serde_json::from_str(&json).unwrap();
        assert!(back.ratio_low.is_nan() && back.n_a == 1);
        assert_eq!(
            serde_json::to_string(&Verdict::CannotTell).unwrap(),
            "\"cannot_tell\""
        );
    }
}
