//! The core + contention split of the Cray/NERSC multicore study
//! (`numalab extrapolate`, and the split `scaling` fits within one node).
//!
//! A run's time is time in the core plus time waiting for memory
//! bandwidth, and the waiting scales with the inverse of the memory
//! bandwidth each core gets. With `B(k)` the per-core bandwidth at `k`
//! busy cores per node:
//!
//! `T(k) = core + C * B(1) / B(k)`
//!
//! where `C` is the contention time at one core per node. By default the
//! node's bandwidth is shared evenly, `B(k) ∝ 1/k`, so `T(k) = core + k*C`:
//! the study's 160 s at one core and 230 s at two give core 90 s and
//! contention 70 s. A memory system with `R` times the bandwidth scales
//! only the contention term: `core + C * B(1) / B(k) / R`.
//!
//! With measured per-core bandwidths, counts between or beyond them keep
//! the aggregate bandwidth of the nearest measured count (`B(k) = K_j *
//! B_j / k`): the node's bandwidth is what was measured there, shared.

use serde::{Deserialize, Serialize};

/// Most points a fit takes, and most projections asked at once.
pub const MAX_POINTS: usize = 64;

/// Most cores per node a point or a projection may name.
pub const MAX_CORES: usize = 1 << 16;

/// One measured run: cores busy per node, its time, and optionally the
/// per-core memory bandwidth at that count (any unit, the same for all).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimedPoint {
    pub cores: usize,
    pub seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_core_bandwidth: Option<f64>,
}

/// How the split was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitMethod {
    /// Two points: the two unknowns solved exactly.
    Exact,
    /// More than two points: ordinary least squares on `T = core + C*x`.
    LeastSquares,
}

/// The fitted split: `T(k) = core_seconds + contention_seconds * B(1)/B(k)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreContention {
    /// Time in the core, the same at every core count.
    pub core_seconds: f64,
    /// Contention time at one core per node (`C`).
    pub contention_seconds: f64,
    pub method: FitMethod,
    /// Largest |measured - fitted| over the points (0 for an exact fit).
    pub max_residual_seconds: f64,
    /// The points fitted on, by core count.
    pub points: Vec<TimedPoint>,
}

/// One projection.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub cores: usize,
    pub bandwidth_ratio: f64,
    pub seconds: f64,
}

impl CoreContention {
    /// Fits the split on `points` (cores per node, seconds, optional
    /// per-core bandwidth). Two points are solved exactly, more by least
    /// squares. Refuses, saying why: fewer than two or more than
    /// [`MAX_POINTS`] points, a time that is not positive, a core count
    /// outside 1..=[`MAX_CORES`] or given twice, bandwidths given for some
    /// points only, and fits whose contention or core time would be
    /// negative (the times do not follow the bandwidth model).
    pub fn fit(points: &[TimedPoint]) -> Result<Self, String> {
        if points.len() < 2 || points.len() > MAX_POINTS {
            return Err(format!(
                "the split needs 2 to {MAX_POINTS} timed runs, got {}",
                points.len()
            ));
        }
        for p in points {
            if !(p.seconds.is_finite() && p.seconds > 0.0) {
                return Err(format!(
                    "the time at {} cores per node is {}: times must be positive",
                    p.cores, p.seconds
                ));
            }
            if p.cores == 0 || p.cores > MAX_CORES {
                return Err(format!("{} cores per node: give 1 to {MAX_CORES}", p.cores));
            }
            if let Some(b) = p.per_core_bandwidth {
                if !(b.is_finite() && b > 0.0) {
                    return Err(format!(
                        "the per-core bandwidth at {} cores per node is {b}: it must be positive",
                        p.cores
                    ));
                }
            }
        }
        let mut pts = points.to_vec();
        pts.sort_by_key(|p| p.cores);
        if let Some(w) = pts.windows(2).find(|w| w[0].cores == w[1].cores) {
            return Err(format!(
                "{} cores per node is given twice: the split needs different core counts",
                w[0].cores
            ));
        }
        let with_bw = pts
            .iter()
            .filter(|p| p.per_core_bandwidth.is_some())
            .count();
        if with_bw != 0 && with_bw != pts.len() {
            return Err(format!(
                "per-core bandwidths given for {with_bw} of {} runs: give one for every run or none",
                pts.len()
            ));
        }
        let bw = Bandwidth::of(&pts);
        let xs: Vec<f64> = pts.iter().map(|p| bw.factor(p.cores)).collect();
        let ts: Vec<f64> = pts.iter().map(|p| p.seconds).collect();
        let n = xs.len() as f64;
        let (mx, mt) = (xs.iter().sum::<f64>() / n, ts.iter().sum::<f64>() / n);
        let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
        let sxt: f64 = xs.iter().zip(&ts).map(|(x, t)| (x - mx) * (t - mt)).sum();
        if sxx <= f64::EPSILON * mx * mx {
            return Err(
                "the per-core bandwidth is the same at every core count: nothing separates core from contention time"
                    .into(),
            );
        }
        let contention = sxt / sxx;
        let core = mt - contention * mx;
        let (first, last) = (pts[0], pts[pts.len() - 1]);
        let (a, b) = (format_s(first.seconds), format_s(last.seconds));
        if contention < 0.0 {
            return Err(format!(
                "the time falls from {a} at {} to {b} at {} cores per node: there is no contention to split off (the bandwidth model needs time to grow as bandwidth per core falls)",
                first.cores, last.cores
            ));
        }
        if core < 0.0 {
            let fx = bw.factor(last.cores) / bw.factor(first.cores);
            return Err(format!(
                "{b} at {} cores is more than {} times {a} at {}: contention grows faster than the bandwidth model allows (the core time would be {})",
                last.cores,
                trim_number(fx),
                first.cores,
                format_s(core)
            ));
        }
        let max_residual_seconds = if pts.len() == 2 {
            0.0
        } else {
            xs.iter()
                .zip(&ts)
                .map(|(x, t)| (t - core - contention * x).abs())
                .fold(0.0, f64::max)
        };
        Ok(Self {
            core_seconds: core,
            contention_seconds: contention,
            method: if pts.len() == 2 {
                FitMethod::Exact
            } else {
                FitMethod::LeastSquares
            },
            max_residual_seconds,
            points: pts,
        })
    }

    /// `B(1)/B(cores)`: how much more contention a core sees at `cores`
    /// per node than alone.
    pub fn contention_factor(&self, cores: usize) -> f64 {
        Bandwidth::of(&self.points).factor(cores)
    }

    /// The projected time at `cores` per node on a memory system with
    /// `bandwidth_ratio` times this one's bandwidth: only the contention
    /// term scales.
    pub fn predict(&self, cores: usize, bandwidth_ratio: f64) -> Prediction {
        Prediction {
            cores,
            bandwidth_ratio,
            seconds: self.core_seconds
                + self.contention_seconds * self.contention_factor(cores) / bandwidth_ratio,
        }
    }

    /// The projected time at `cores` per node on another machine whose
    /// per-core bandwidth is `target` (GB/s, as the runs' bandwidths): the
    /// contention term scales by this system's per-core bandwidth at one
    /// core over the target's at `cores`, so `bandwidth_ratio` is the
    /// target's per-core bandwidth over this system's at that count. Needs
    /// the runs' per-core bandwidths (the ratio has no meaning without
    /// them).
    pub fn predict_on(
        &self,
        cores: usize,
        target: &PerCoreBandwidth,
    ) -> Result<Prediction, String> {
        let here = Bandwidth::of(&self.points);
        if here.measured.is_empty() {
            return Err(
                "projecting to another machine needs this system's per-core bandwidth at each run (--bandwidth or --from-machine)"
                    .into(),
            );
        }
        let (b1, bk, tk) = (here.at(1), here.at(cores.max(1)), target.at(cores.max(1)));
        Ok(Prediction {
            cores,
            bandwidth_ratio: tk / bk,
            seconds: self.core_seconds + self.contention_seconds * b1 / tk,
        })
    }

    /// Share of the time at `cores` per node that is contention.
    pub fn contention_share(&self, cores: usize) -> f64 {
        let p = self.predict(cores, 1.0);
        (p.seconds - self.core_seconds) / p.seconds
    }
}

/// A machine's per-core memory bandwidth by cores busy on one node, GB/s:
/// the packed points of its `numalab scaling` that lie on one node (one
/// thread, two, ... up to the node's CPUs). Counts between or beyond them
/// keep the aggregate bandwidth of the nearest measured count, shared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PerCoreBandwidth {
    /// By cores.
    pub points: Vec<CoreBandwidth>,
}

/// GB/s per core with `cores` busy on one node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CoreBandwidth {
    pub cores: usize,
    pub gbps: f64,
}

impl PerCoreBandwidth {
    /// The curve of a scaling result: its packed points whose CPUs all lie
    /// on one node (the same node as the first). Refuses a result without
    /// a one-thread point or whose points do not name their nodes (made
    /// before they did).
    pub fn from_scaling(r: &super::scaling::ScalingResult) -> Result<Self, String> {
        let first = r
            .packed
            .first()
            .filter(|p| p.threads == 1)
            .ok_or("it has no one-thread packed point")?;
        let node = match first.nodes.as_slice() {
            [n] => *n,
            _ => {
                return Err(
                    "its scaling points do not name their nodes (a numalab from before they did): run numalab scaling there again"
                        .into(),
                )
            }
        };
        let points: Vec<CoreBandwidth> = r
            .packed
            .iter()
            .filter(|p| p.nodes == [node])
            .filter(|p| p.per_thread_gbps.is_finite() && p.per_thread_gbps > 0.0)
            .map(|p| CoreBandwidth {
                cores: p.threads,
                gbps: p.per_thread_gbps,
            })
            .collect();
        if points.first().map(|p| p.cores) != Some(1) {
            return Err("its one-thread point has no bandwidth".into());
        }
        Ok(Self { points })
    }

    /// GB/s per core at `k` cores busy on one node.
    pub fn at(&self, k: usize) -> f64 {
        Bandwidth {
            measured: self.points.iter().map(|p| (p.cores, p.gbps)).collect(),
        }
        .at(k)
    }
}

/// The per-core bandwidth model: measured points, or `B(k) ∝ 1/k`.
struct Bandwidth {
    /// Sorted by cores, every one with a bandwidth; empty for the default.
    measured: Vec<(usize, f64)>,
}

impl Bandwidth {
    fn of(points: &[TimedPoint]) -> Self {
        let mut measured: Vec<(usize, f64)> = points
            .iter()
            .filter_map(|p| p.per_core_bandwidth.map(|b| (p.cores, b)))
            .collect();
        if measured.len() != points.len() {
            measured.clear();
        }
        measured.sort_by_key(|m| m.0);
        Self { measured }
    }

    /// Per-core bandwidth at `k`: measured there, else the nearest
    /// measured count's aggregate shared by `k` (ties: the smaller count).
    fn at(&self, k: usize) -> f64 {
        let Some(&(kj, bj)) = self
            .measured
            .iter()
            .min_by_key(|(c, _)| (c.abs_diff(k), *c))
        else {
            return 1.0 / k as f64;
        };
        if kj == k {
            bj
        } else {
            kj as f64 * bj / k as f64
        }
    }

    fn factor(&self, k: usize) -> f64 {
        self.at(1) / self.at(k.max(1))
    }
}

/// Seconds as the messages write them: `160 s`, `0.25 s`.
fn format_s(s: f64) -> String {
    format!("{} s", trim_number(s))
}

/// A number with at most 3 decimals, trailing zeros dropped.
fn trim_number(x: f64) -> String {
    let t = format!("{x:.3}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    if t == "-0" {
        "0".into()
    } else {
        t.into()
    }
}

/// `numalab extrapolate --json`: the fit, its predictions and the machine
/// curves they used.
#[derive(Serialize)]
pub struct ExtrapolateResult<'a> {
    pub formula: &'static str,
    pub core_seconds: f64,
    pub contention_seconds: f64,
    pub method: &'a FitMethod,
    pub max_residual_seconds: f64,
    pub runs: &'a [TimedPoint],
    pub predictions: &'a [Prediction],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_machine: Option<MachineCurve<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_machine: Option<ToMachine<'a>>,
}

/// A machine's per-core bandwidth curve and the file it came from.
#[derive(Serialize)]
pub struct MachineCurve<'a> {
    pub file: String,
    pub per_core_gbps: &'a PerCoreBandwidth,
}

/// The projections to another machine (`--to-machine`).
#[derive(Serialize)]
pub struct ToMachine<'a> {
    #[serde(flatten)]
    pub machine: MachineCurve<'a>,
    pub formula: &'static str,
    pub predictions: &'a [Prediction],
}

impl<'a> ExtrapolateResult<'a> {
    /// The result of `fit` with its `predictions`; `from` the curve that
    /// gave this system's per-core bandwidth, `to` the target machine's
    /// curve and the predictions on it.
    pub fn new(
        fit: &'a CoreContention,
        predictions: &'a [Prediction],
        from: Option<MachineCurve<'a>>,
        to: Option<(MachineCurve<'a>, &'a [Prediction])>,
    ) -> Self {
        ExtrapolateResult {
            formula: "T(k) = core_seconds + contention_seconds * B(1)/B(k) / bandwidth_ratio",
            core_seconds: fit.core_seconds,
            contention_seconds: fit.contention_seconds,
            method: &fit.method,
            max_residual_seconds: fit.max_residual_seconds,
            runs: &fit.points,
            predictions,
            from_machine: from,
            to_machine: to.map(|(machine, predictions)| ToMachine {
                machine,
                formula: "T(k) = core_seconds + contention_seconds * B(1)/B_target(k); bandwidth_ratio = B_target(k)/B(k)",
                predictions,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(cores: usize, seconds: f64) -> TimedPoint {
        TimedPoint {
            cores,
            seconds,
            per_core_bandwidth: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn the_studys_160_and_230_seconds_split_into_90_and_70() {
        let f = CoreContention::fit(&[pt(1, 160.0), pt(2, 230.0)]).unwrap();
        assert!(close(f.core_seconds, 90.0), "{f:?}");
        assert!(close(f.contention_seconds, 70.0), "{f:?}");
        assert_eq!(f.method, FitMethod::Exact);
        assert!(close(f.predict(4, 1.0).seconds, 370.0));
        // Twice the bandwidth at 2 cores: 90 + 2*70/2.
        assert!(close(f.predict(2, 2.0).seconds, 160.0));
        assert!(close(f.predict(1, 1.0).seconds, 160.0));
        assert!(close(f.contention_share(2), 140.0 / 230.0));
    }

    /// The study's split projected to a machine with 20 GB/s per core
    /// alone and 15 at two cores, from one with 10 and 5: the contention
    /// term scales by 10 over the target's bandwidth at each count, and
    /// four cores share the target's two-core aggregate (30 GB/s).
    #[test]
    fn another_machine_scales_contention_by_its_per_core_bandwidth() {
        let f = CoreContention::fit(&[
            TimedPoint {
                cores: 1,
                seconds: 160.0,
                per_core_bandwidth: Some(10.0),
            },
            TimedPoint {
                cores: 2,
                seconds: 230.0,
                per_core_bandwidth: Some(5.0),
            },
        ])
        .unwrap();
        assert!(close(f.core_seconds, 90.0) && close(f.contention_seconds, 70.0));
        let target = PerCoreBandwidth {
            points: vec![
                CoreBandwidth {
                    cores: 1,
                    gbps: 20.0,
                },
                CoreBandwidth {
                    cores: 2,
                    gbps: 15.0,
                },
            ],
        };
        let on = |k| f.predict_on(k, &target).unwrap();
        assert!(close(on(1).seconds, 125.0) && close(on(1).bandwidth_ratio, 2.0));
        assert!(close(on(2).seconds, 90.0 + 70.0 * 10.0 / 15.0));
        assert!(close(on(2).bandwidth_ratio, 3.0));
        assert!(close(on(4).seconds, 90.0 + 70.0 * 10.0 / 7.5));
        // The same machine as target gives back the fit's own projections.
        let here = PerCoreBandwidth {
            points: vec![
                CoreBandwidth {
                    cores: 1,
                    gbps: 10.0,
                },
                CoreBandwidth {
                    cores: 2,
                    gbps: 5.0,
                },
            ],
        };
        for k in [1, 2, 4, 8] {
            let p = f.predict_on(k, &here).unwrap();
            assert!(close(p.seconds, f.predict(k, 1.0).seconds), "{k}: {p:?}");
            assert!(close(p.bandwidth_ratio, 1.0));
        }
        // Without the runs' bandwidths there is nothing to compare with.
        let plain = CoreContention::fit(&[pt(1, 160.0), pt(2, 230.0)]).unwrap();
        let e = plain.predict_on(2, &target).unwrap_err();
        assert!(e.contains("--bandwidth or --from-machine"), "{e}");
    }

    #[test]
    fn order_of_points_does_not_matter() {
        let f = CoreContention::fit(&[pt(2, 230.0), pt(1, 160.0)]).unwrap();
        assert!(close(f.core_seconds, 90.0));
        assert_eq!(f.points[0].cores, 1);
    }

    #[test]
    fn measured_bandwidths_set_the_contention_factor() {
        // Per-core bandwidth 10 at 1 core, 8 at 2 (the node not saturated):
        // T = core + C * 10/B, so 100 = core + C and 110 = core + 1.25 C.
        let f = CoreContention::fit(&[
            TimedPoint {
                cores: 1,
                seconds: 100.0,
                per_core_bandwidth: Some(10.0),
            },
            TimedPoint {
                cores: 2,
                seconds: 110.0,
                per_core_bandwidth: Some(8.0),
            },
        ])
        .unwrap();
        assert!(close(f.contention_seconds, 40.0), "{f:?}");
        assert!(close(f.core_seconds, 60.0), "{f:?}");
        // 4 cores keep the 2-core aggregate (16): 4 each, factor 2.5.
        assert!(close(f.predict(4, 1.0).seconds, 60.0 + 100.0));
    }

    #[test]
    fn more_than_two_points_are_fitted_by_least_squares() {
        let f = CoreContention::fit(&[pt(1, 160.0), pt(2, 230.0), pt(4, 370.0)]).unwrap();
        assert_eq!(f.method, FitMethod::LeastSquares);
        assert!(close(f.core_seconds, 90.0) && close(f.contention_seconds, 70.0));
        assert!(f.max_residual_seconds < 1e-9);
        let g = CoreContention::fit(&[pt(1, 160.0), pt(2, 240.0), pt(4, 360.0)]).unwrap();
        assert!(g.max_residual_seconds > 1.0, "{g:?}");
    }

    #[test]
    fn refusals_say_why() {
        let e = CoreContention::fit(&[pt(1, 100.0), pt(2, 250.0)]).unwrap_err();
        assert!(
            e.contains("contention grows faster than the bandwidth model allows"),
            "{e}"
        );
        assert!(
            e.contains("250 s at 2 cores is more than 2 times 100 s at 1"),
            "{e}"
        );
        let e = CoreContention::fit(&[pt(1, 100.0), pt(2, 90.0)]).unwrap_err();
        assert!(e.contains("no contention to split off"), "{e}");
        let e = CoreContention::fit(&[pt(2, 100.0), pt(2, 120.0)]).unwrap_err();
        assert!(e.contains("2 cores per node is given twice"), "{e}");
        let e = CoreContention::fit(&[pt(1, 0.0), pt(2, 120.0)]).unwrap_err();
        assert!(e.contains("times must be positive"), "{e}");
        let e = CoreContention::fit(&[pt(1, -3.0), pt(2, 120.0)]).unwrap_err();
        assert!(e.contains("times must be positive"), "{e}");
        let e = CoreContention::fit(&[pt(1, f64::NAN), pt(2, 120.0)]).unwrap_err();
        assert!(e.contains("times must be positive"), "{e}");
        let e = CoreContention::fit(&[pt(1, 100.0)]).unwrap_err();
        assert!(e.contains("2 to 64 timed runs, got 1"), "{e}");
        let e = CoreContention::fit(&[pt(0, 100.0), pt(2, 120.0)]).unwrap_err();
        assert!(e.contains("0 cores per node"), "{e}");
        let same_bw = |c, s| TimedPoint {
            cores: c,
            seconds: s,
            per_core_bandwidth: Some(5.0 / c as f64 * c as f64),
        };
        let e = CoreContention::fit(&[same_bw(1, 100.0), same_bw(2, 120.0)]).unwrap_err();
        assert!(e.contains("nothing separates core from contention"), "{e}");
        let mixed = [
            TimedPoint {
                per_core_bandwidth: Some(3.0),
                ..pt(1, 100.0)
            },
            pt(2, 120.0),
        ];
        let e = CoreContention::fit(&mixed).unwrap_err();
        assert!(e.contains("given for 1 of 2 runs"), "{e}");
    }

    #[test]
    fn equal_times_mean_no_contention() {
        let f = CoreContention::fit(&[pt(1, 50.0), pt(2, 50.0)]).unwrap();
        assert!(close(f.core_seconds, 50.0) && close(f.contention_seconds, 0.0));
        assert!(close(f.predict(8, 0.5).seconds, 50.0));
    }
}
