//! How far the host's own speed moved while a report ran, and how much
//! wider that makes the key figures' intervals.
//!
//! A measurement's 95% interval (`rel_ci`) describes its own repetitions:
//! seconds apart, on one buffer. On a shared or virtual machine the speed
//! of the memory the report measures moves over minutes (other tenants,
//! where the buffers' pages land, the host's power state), by more than
//! any one measurement's interval: two consecutive reports then disagree
//! "beyond their intervals" in every figure although nothing about the
//! machine changed. So the report looks at the host between its parts
//! ([`DriftProbe`]: one short pointer chase and one single-thread read on
//! fresh buffers each time, two CPUs of a node reading together and passing
//! a modified line between them) and widens each latency or bandwidth key
//! figure's interval by the probes' spread ([`HostDrift::widen`]): the interval then
//! says where the figure of another run at another moment falls, which is
//! what a reader comparing two reports needs. On a quiet machine the probes
//! agree and the intervals stay as narrow as the measurements'.

use serde::{Deserialize, Serialize};

/// Probes below which the drift is not estimated (two probes give one
/// degree of freedom: a t quantile of 12.7).
pub const MIN_PROBES: usize = 3;

/// One look at the host's speed, between two parts of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftProbe {
    /// The report's run (1, then 2... with `--resume`).
    pub run: u32,
    /// Seconds into that run.
    pub at_s: f64,
    /// The part it followed (`null`: before the first).
    pub after: Option<String>,
    /// Median ns per dependent load of a random chase over a fresh buffer
    /// (`null` when it could not be measured).
    #[serde(deserialize_with = "numalab::serde_util::f64_or_nan")]
    pub latency_ns: f64,
    /// Median GB/s of one thread reading a fresh buffer (`null` likewise).
    #[serde(deserialize_with = "numalab::serde_util::f64_or_nan")]
    pub read_gbps: f64,
    /// Median GB/s per thread of two threads of one node reading at once
    /// (`null` likewise, and where a node has one usable CPU).
    #[serde(deserialize_with = "numalab::serde_util::f64_or_nan")]
    pub pair_read_gbps: f64,
    /// One-way ns of a modified cache line between those two CPUs (`null`
    /// likewise).
    #[serde(deserialize_with = "numalab::serde_util::f64_or_nan")]
    pub pair_c2c_ns: f64,
}

/// What a probe measures, and which key figures move with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftKind {
    /// Figures in ns (idle and loaded latency).
    Latency,
    /// Figures in GB/s of one thread, or of a node's threads together.
    Bandwidth,
    /// Per-thread GB/s of threads sharing the memory (packed, spread): a
    /// virtual machine's host can move two virtual CPUs onto one physical
    /// memory path or apart, which one thread alone does not see.
    Pair,
    /// Core-to-core latency: where the host put two virtual CPUs.
    CoreToCore,
}

/// How the report names a kind of drift: its key in results.json `drift`,
/// what it is for a reader, the look's range as the drift warning says it
/// (with `{key_lo}` and `{key_hi}` for the lowest and highest look), its
/// unit and its decimals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindText {
    pub key: &'static str,
    pub label: &'static str,
    pub range: &'static str,
    pub unit: &'static str,
    pub decimals: u8,
}

impl DriftKind {
    /// Every kind, in the order the report lists them.
    pub const ALL: [DriftKind; 4] = [
        DriftKind::Latency,
        DriftKind::Bandwidth,
        DriftKind::Pair,
        DriftKind::CoreToCore,
    ];

    /// How the report names this kind (the one table both the note under
    /// the key figures and the drift warning read).
    pub fn text(self) -> KindText {
        let (key, label, range, unit, decimals) = match self {
            DriftKind::Latency => (
                "latency",
                "latency",
                "local latency at {latency_lo}-{latency_hi} ns",
                "ns",
                0,
            ),
            DriftKind::Bandwidth => (
                "bandwidth",
                "one thread's bandwidth",
                "one thread's read at {bandwidth_lo}-{bandwidth_hi} GB/s",
                "GB/s",
                1,
            ),
            DriftKind::Pair => (
                "pair",
                "two threads' bandwidth",
                "two threads reading together at {pair_lo}-{pair_hi} GB/s each",
                "GB/s",
                1,
            ),
            DriftKind::CoreToCore => (
                "c2c",
                "core-to-core latency",
                "a modified line passed between them in {c2c_lo}-{c2c_hi} ns",
                "ns",
                0,
            ),
        };
        KindText {
            key,
            label,
            range,
            unit,
            decimals,
        }
    }

    /// Whether this kind's looks use two CPUs at once: where the host runs
    /// them (a virtual machine's vCPUs on one memory path or apart) moves
    /// these, which one thread alone does not see.
    pub fn is_two_cpus(self) -> bool {
        matches!(self, DriftKind::Pair | DriftKind::CoreToCore)
    }

    /// The kinds of drift a key figure moves with: by its unit as the
    /// key-figures table gives it (or its name's `_ns` / `_gbps` ending),
    /// per-thread figures of threads sharing memory and core-to-core latency
    /// with the two-CPU looks, and latency under another CPU's load with both
    /// memory latency and where the two CPUs are. Empty for ratios, gains and
    /// counts, in which a drift common to both sides cancels.
    pub fn of_key(key: &str) -> &'static [DriftKind] {
        use DriftKind::*;
        match key {
            "packed_per_thread_gbps" | "spread_per_thread_gbps" => return &[Pair],
            "loaded_max_ns" => return &[Latency, Pair],
            "loaded_knee_gbps" => return &[Bandwidth, Pair],
            k if k.starts_with("c2c_") => return &[CoreToCore],
            _ => {}
        }
        let unit = super::key_figures::ROWS.iter().find_map(|r| {
            let keys = match r.shape {
                super::key_figures::Shape::One(k) => [k, k],
                super::key_figures::Shape::Range(a, b) => [a, b],
            };
            keys.contains(&key).then_some(r.unit)
        });
        match unit {
            Some("ns") => &[Latency],
            Some("GB/s") => &[Bandwidth],
            Some(_) => &[],
            None if key.ends_with("_ns") => &[Latency],
            None if key.ends_with("_gbps") => &[Bandwidth],
            None => &[],
        }
    }
}

/// The probes of a report, with what follows from them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostDrift {
    pub probes: Vec<DriftProbe>,
    /// The latency probes' drift ([`HostDrift::refresh`]); `null` below
    /// [`MIN_PROBES`].
    #[serde(default)]
    pub latency: Option<DriftEstimate>,
    /// The bandwidth probes' drift, likewise.
    #[serde(default)]
    pub bandwidth: Option<DriftEstimate>,
    /// The two-thread probes' drift, likewise.
    #[serde(default)]
    pub pair: Option<DriftEstimate>,
    /// The core-to-core probes' drift, likewise.
    #[serde(default)]
    pub c2c: Option<DriftEstimate>,
    /// The runs that did not watch the host (their budget could not hold
    /// [`MIN_PROBES`] looks), and why; empty when every run did (since
    /// 1.5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unwatched: Vec<Unwatched>,
}

/// A run that did not watch the host's speed: none or only its first look
/// fit the share of its budget looks may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unwatched {
    /// The report's run.
    pub run: u32,
    /// Why, in a sentence without its end: what a look took or would
    /// take, and the budget that gives the looks.
    pub why: String,
}

/// What the probes of one kind say, as results.json keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftEstimate {
    /// Probes that measured it.
    pub probes: usize,
    /// The lowest and highest probe.
    pub low: f64,
    pub high: f64,
    /// The sample standard deviation of the probes' logarithms.
    pub log_sd: f64,
    /// Student's t at 97.5% with `probes - 1` degrees of freedom.
    pub t: f64,
    /// The relative half-width the drift alone adds at 95%, `exp(t log_sd) - 1`.
    pub rel_half_width: f64,
}

impl HostDrift {
    /// No probe was taken and no run said why (a report from a topology
    /// file, or from before probes).
    pub fn is_empty(&self) -> bool {
        self.probes.is_empty() && self.unwatched.is_empty()
    }

    /// The probes' values of `kind` that are finite and positive.
    pub fn values(&self, kind: DriftKind) -> Vec<f64> {
        self.probes
            .iter()
            .map(|p| match kind {
                DriftKind::Latency => p.latency_ns,
                DriftKind::Bandwidth => p.read_gbps,
                DriftKind::Pair => p.pair_read_gbps,
                DriftKind::CoreToCore => p.pair_c2c_ns,
            })
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect()
    }

    /// The sample standard deviation of the logarithms of the probes of
    /// `kind` (about the relative spread: 0.05 is 5%); `None` with fewer
    /// than [`MIN_PROBES`].
    pub fn log_sd(&self, kind: DriftKind) -> Option<f64> {
        self.estimate(kind).map(|e| e.log_sd)
    }

    /// What the probes of `kind` say, as [`HostDrift::refresh`] stored it.
    pub fn estimate(&self, kind: DriftKind) -> Option<&DriftEstimate> {
        match kind {
            DriftKind::Latency => self.latency.as_ref(),
            DriftKind::Bandwidth => self.bandwidth.as_ref(),
            DriftKind::Pair => self.pair.as_ref(),
            DriftKind::CoreToCore => self.c2c.as_ref(),
        }
        .filter(|e| e.log_sd.is_finite() && e.t.is_finite())
    }

    /// Recomputes each kind's [`DriftEstimate`] from the probes (after
    /// adding one): the one place the drift is computed.
    pub fn refresh(&mut self) {
        let estimate = |kind| {
            let v = self.values(kind);
            let n = v.len();
            if n < MIN_PROBES {
                return None;
            }
            let logs: Vec<f64> = v.iter().map(|x| x.ln()).collect();
            let mean = logs.iter().sum::<f64>() / n as f64;
            let log_sd =
                (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
            let t = numalab::measure::stats::t_critical(n - 1);
            Some(DriftEstimate {
                probes: n,
                low: v.iter().copied().fold(f64::INFINITY, f64::min),
                high: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                log_sd,
                t,
                rel_half_width: (t * log_sd).exp_m1(),
            })
        };
        let [latency, bandwidth, pair, c2c] = DriftKind::ALL.map(estimate);
        self.latency = latency;
        self.bandwidth = bandwidth;
        self.pair = pair;
        self.c2c = c2c;
    }

    /// Each kind's estimate where there is one, in the order of
    /// [`DriftKind::ALL`].
    pub fn estimates(&self) -> Vec<(DriftKind, &DriftEstimate)> {
        DriftKind::ALL
            .into_iter()
            .filter_map(|k| Some((k, self.estimate(k)?)))
            .collect()
    }

    /// The relative half-width the drift alone adds at 95%: the t quantile
    /// of the probes' degrees of freedom times [`HostDrift::log_sd`], as
    /// a fraction (`exp(t s) - 1`).
    pub fn rel_half_width(&self, kind: DriftKind) -> Option<f64> {
        self.estimate(kind).map(|e| e.rel_half_width)
    }

    /// `interval` (a measurement's own 95% interval around `value`) widened
    /// by the drift of `kinds`: on the log scale the half-widths add in
    /// quadrature (the measurement's repetitions, the moment it ran and,
    /// for several kinds, each drift are taken as independent sources of
    /// error). Kinds without an estimate add nothing.
    pub fn widen(&self, kinds: &[DriftKind], value: f64, interval: [f64; 2]) -> [f64; 2] {
        let drift2: f64 = kinds
            .iter()
            .filter_map(|&k| self.estimate(k).map(|e| (e.t * e.log_sd).powi(2)))
            .sum();
        if drift2 == 0.0 || !(value > 0.0 && interval[0] > 0.0 && interval[1] >= interval[0]) {
            return interval;
        }
        let below = (value / interval[0]).ln().max(0.0);
        let above = (interval[1] / value).ln().max(0.0);
        let wide = |own: f64| (own * own + drift2).sqrt();
        [value * (-wide(below)).exp(), value * wide(above).exp()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probes(lat: &[f64], bw: &[f64]) -> HostDrift {
        let mut d = HostDrift {
            probes: lat
                .iter()
                .zip(bw)
                .enumerate()
                .map(|(i, (&l, &b))| DriftProbe {
                    run: 1,
                    at_s: i as f64 * 10.0,
                    after: None,
                    latency_ns: l,
                    read_gbps: b,
                    pair_read_gbps: b / 2.0 + i as f64,
                    pair_c2c_ns: f64::NAN,
                })
                .collect(),
            ..Default::default()
        };
        d.refresh();
        d
    }

    #[test]
    fn figures_are_latency_or_bandwidth_by_their_unit() {
        use DriftKind::*;
        assert_eq!(DriftKind::of_key("local_latency_ns"), [Latency]);
        assert_eq!(DriftKind::of_key("loaded_idle_ns"), [Latency]);
        assert_eq!(DriftKind::of_key("remote_read_gbps_max"), [Bandwidth]);
        assert_eq!(DriftKind::of_key("loaded_max_ns"), [Latency, Pair]);
        assert_eq!(DriftKind::of_key("loaded_knee_gbps"), [Bandwidth, Pair]);
        assert_eq!(DriftKind::of_key("packed_per_thread_gbps"), [Pair]);
        assert_eq!(DriftKind::of_key("c2c_within_node_ns"), [CoreToCore]);
        // Ratios and gains: a drift common to both sides cancels.
        assert!(DriftKind::of_key("numa_ratio_min").is_empty());
        assert!(DriftKind::of_key("two_writers_gain").is_empty());
    }

    #[test]
    fn the_drift_widens_intervals_by_the_probes_spread() {
        // Latency probes 180, 200, 220 ns: logs' SD 0.1003, t(2) = 4.303.
        let d = probes(&[180.0, 200.0, 220.0], &[30.0, 30.0, 30.0]);
        let s = d.log_sd(DriftKind::Latency).unwrap();
        assert!((s - 0.10034).abs() < 1e-4, "{s}");
        let half = d.rel_half_width(DriftKind::Latency).unwrap();
        assert!((half - ((4.303 * s).exp() - 1.0)).abs() < 1e-9, "{half}");
        // results.json keeps the same numbers.
        let e = d.latency.clone().unwrap();
        assert_eq!((e.probes, e.low, e.high, e.t), (3, 180.0, 220.0, 4.303));
        assert_eq!((e.log_sd, e.rel_half_width), (s, half));
        assert_eq!(d.bandwidth.clone().unwrap().rel_half_width, 0.0);
        // Pairs at 15, 16, 17 GB/s per thread.
        assert_eq!(d.pair.clone().unwrap().low, 15.0);
        // 200 ns ±1%: the drift dominates, in quadrature with the 1%.
        let [lo, hi] = d.widen(&[DriftKind::Latency], 200.0, [198.0, 202.0]);
        let w = ((0.01005f64).powi(2) + (4.303 * s).powi(2)).sqrt();
        assert!((lo - 200.0 * (-w).exp()).abs() < 0.01, "{lo}");
        assert!(
            (hi - 200.0 * (0.00995f64.powi(2) + (4.303 * s).powi(2)).sqrt().exp()).abs() < 0.01
        );
        assert!(lo < 132.0 && hi > 300.0, "{lo}-{hi}");
        // Two kinds add in quadrature: latency and the pairs' 15-17 GB/s.
        let p = d.log_sd(DriftKind::Pair).unwrap();
        let both = d.widen(
            &[DriftKind::Latency, DriftKind::Pair],
            200.0,
            [200.0, 200.0],
        );
        let w2 = ((4.303 * s).powi(2) + (4.303 * p).powi(2)).sqrt();
        assert!((both[1] - 200.0 * w2.exp()).abs() < 1e-9, "{both:?}");
        // Equal bandwidth probes: no drift, the interval stays.
        assert_eq!(
            d.widen(&[DriftKind::Bandwidth], 30.0, [29.7, 30.3]),
            [
                30.0 * (-(30.0f64 / 29.7).ln()).exp(),
                30.0 * (30.3f64 / 30.0).ln().exp()
            ]
        );
    }

    #[test]
    fn fewer_than_three_probes_estimate_nothing() {
        let d = probes(&[180.0, 220.0], &[30.0, 25.0]);
        assert_eq!(d.log_sd(DriftKind::Latency), None);
        assert_eq!((d.latency.clone(), d.bandwidth.clone()), (None, None));
        assert_eq!(d.pair, None);
        assert_eq!(
            d.widen(&[DriftKind::Latency], 200.0, [198.0, 202.0]),
            [198.0, 202.0]
        );
        // A probe that failed (NaN) does not count.
        let d = probes(&[180.0, 200.0, f64::NAN], &[30.0, 31.0, 29.0]);
        assert_eq!(d.values(DriftKind::Latency).len(), 2);
        assert_eq!(d.log_sd(DriftKind::Latency), None);
        assert!(d.log_sd(DriftKind::Bandwidth).is_some());
    }
}
