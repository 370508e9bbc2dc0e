//! The model fitted to a map (latency and bandwidth per level), the
//! study's published two-level form, and the packed map predicted from the
//! unpacked one.

use super::*;
/// Fits the model to the points (filling their `model_ns` and
/// `residual`), or says why it cannot.
pub(super) fn fit_points(
    levels: &[(String, Option<u64>)],
    points: &mut [ApexPoint],
) -> Result<ApexModel, String> {
    let data: Vec<(Vec<f64>, f64, f64)> = points
        .iter()
        .map(|p| (p.level_share.clone(), (8 * p.l) as f64, p.ns.median))
        .collect();
    let (lat, inv_bw) = fit_model(levels.len(), &data)?;
    let mut worst = (0.0f64, 0.0, 0);
    let mut ss = 0.0;
    for p in points.iter_mut() {
        let model: f64 = p
            .level_share
            .iter()
            .enumerate()
            .map(|(i, s)| s * (lat[i].unwrap_or(0.0) + (8 * p.l) as f64 * inv_bw[i].unwrap_or(0.0)))
            .sum();
        if model > 0.0 {
            let r = p.ns.median / model - 1.0;
            p.model_ns = Some(model);
            p.residual = Some(r);
            ss += r * r;
            if r.abs() > worst.0.abs() {
                worst = (r, p.alpha, p.l);
            }
        }
    }
    Ok(ApexModel {
        method: "shares of each level from the power law and the machine's cache sizes; latency and 1/bandwidth of each level by least squares on the relative error, each deeper level constrained to be at least as slow (non-negative increments from the level above)".into(),
        levels: levels
            .iter()
            .enumerate()
            .map(|(i, (name, cap))| ModelLevel {
                name: name.clone(),
                capacity_bytes: *cap,
                latency_ns: lat[i],
                bandwidth_gbps: inv_bw[i].and_then(|x| (x > 0.0).then(|| 1.0 / x)),
            })
            .collect(),
        rms_residual: (ss / points.len().max(1) as f64).sqrt(),
        worst: WorstPoint {
            alpha: worst.1,
            l: worst.2,
            residual: worst.0,
        },
    })
}

/// Latency (ns) and inverse bandwidth (ns per byte) of `n` levels from
/// points `(shares, bytes per access, measured ns)`, minimizing the squared
/// relative error with both non-negative and non-decreasing from one level
/// to the next deeper one. `None` for a parameter no point depends on. An
/// error naming the counts when there are fewer points than parameters (two
/// per level some point depends on), or fewer than two points.
///
/// The order constraint is built in: with `d_j >= 0` the increment of
/// latency from level `j-1` to `j`, `latency_i = sum_{j<=i} d_j`, and the
/// time of a point `sum_i s_i latency_i = sum_j d_j T_j` with `T_j = sum_{i>=j}
/// s_i` the share served at level `j` or deeper; likewise for 1/bandwidth.
/// So the constrained fit is a non-negative least squares in the increments
/// on the tail shares, and the levels are the increments' running sums.
#[allow(clippy::type_complexity)]
pub fn fit_model(
    n: usize,
    points: &[(Vec<f64>, f64, f64)],
) -> Result<(Vec<Option<f64>>, Vec<Option<f64>>), String> {
    let pts: Vec<&(Vec<f64>, f64, f64)> = points
        .iter()
        .filter(|p| p.2.is_finite() && p.2 > 0.0)
        .collect();
    let used: Vec<bool> = (0..n)
        .map(|i| pts.iter().any(|p| p.0.get(i).is_some_and(|s| *s > 0.0)))
        .collect();
    let parameters = 2 * used.iter().filter(|u| **u).count();
    if pts.len() < 2 || pts.len() < parameters {
        return Err(format!(
            "{parameters} parameters (latency and bandwidth of {} levels) but {} {}: no fit; measure more alphas and Ls",
            parameters / 2,
            pts.len(),
            if pts.len() == 1 { "point" } else { "points" }
        ));
    }
    let k = 2 * n;
    // Rows: [tail shares..., bytes * tail shares...] / measured; target 1.
    let rows: Vec<Vec<f64>> = pts
        .iter()
        .map(|(sh, bytes, t)| {
            let tail: Vec<f64> = (0..n)
                .map(|j| sh.iter().skip(j).take(n - j).sum::<f64>())
                .collect();
            let mut r = Vec::with_capacity(k);
            r.extend(tail.iter().map(|s| s / t));
            r.extend(tail.iter().map(|s| s * bytes / t));
            r
        })
        .collect();
    let x = nnls(&rows, k);
    let levels = |part: &[f64]| -> Vec<Option<f64>> {
        let mut sum = 0.0;
        part.iter()
            .zip(&used)
            .map(|(d, u)| {
                sum += d;
                u.then_some(sum)
            })
            .collect()
    };
    Ok((levels(&x[..n]), levels(&x[n..])))
}

/// Least squares of `rows · x = 1` with `x >= 0`, by coordinate descent on
/// the normal equations with columns scaled to unit norm (convex: it
/// converges; columns that are all zero stay 0).
pub(super) fn nnls(rows: &[Vec<f64>], k: usize) -> Vec<f64> {
    let norm: Vec<f64> = (0..k)
        .map(|j| rows.iter().map(|r| r[j] * r[j]).sum::<f64>().sqrt())
        .collect();
    let mut g = vec![vec![0.0; k]; k];
    let mut h = vec![0.0; k];
    for r in rows {
        for i in 0..k {
            if norm[i] == 0.0 {
                continue;
            }
            let ri = r[i] / norm[i];
            h[i] += ri;
            for j in 0..k {
                if norm[j] > 0.0 {
                    g[i][j] += ri * r[j] / norm[j];
                }
            }
        }
    }
    let mut x = vec![0.0; k];
    for _ in 0..200_000 {
        let mut change = 0.0f64;
        for i in 0..k {
            if g[i][i] <= 0.0 {
                continue;
            }
            let grad: f64 = (0..k).map(|j| g[i][j] * x[j]).sum::<f64>() - h[i];
            let new = (x[i] - grad / g[i][i]).max(0.0);
            change = change.max((new - x[i]).abs());
            x[i] = new;
        }
        if change < 1e-13 {
            break;
        }
    }
    (0..k)
        .map(|j| if norm[j] > 0.0 { x[j] / norm[j] } else { 0.0 })
        .collect()
}

/// The study's model from measured points: the fit of two levels, the L2
/// cache and memory, in ns and in cycles of the CPU's frequency as read
/// under `root` (`/` live).
pub fn published_model(
    m: &Machine,
    cpu: u32,
    points: &[ApexPoint],
    root: &Path,
) -> Result<PublishedModel, String> {
    let l2 = m
        .data_cache_bytes(2)
        .ok_or("the machine model has no L2 cache")?;
    let levels = vec![("L2".to_string(), Some(l2)), ("memory".to_string(), None)];
    let data: Vec<(Vec<f64>, f64, f64)> = points
        .iter()
        .map(|p| {
            (
                level_shares(&levels, p.alpha, p.l, p.blocks),
                (8 * p.l) as f64,
                p.ns.median,
            )
        })
        .collect();
    let (lat, inv_bw) = fit_model(2, &data)?;
    let mut ss = 0.0;
    for (sh, bytes, t) in &data {
        let model: f64 = (0..2)
            .map(|i| sh[i] * (lat[i].unwrap_or(0.0) + bytes * inv_bw[i].unwrap_or(0.0)))
            .sum();
        if model > 0.0 {
            ss += (t / model - 1.0).powi(2);
        }
    }
    let (mhz, source) = match cpu_frequency(root, cpu) {
        Some((f, src)) => (Some(f), src),
        None => (None, "unknown frequency".to_string()),
    };
    let level = |i: usize, cap: Option<u64>| {
        let gbps = inv_bw[i].and_then(|x| (x > 0.0).then(|| 1.0 / x));
        PublishedLevel {
            capacity_bytes: cap,
            latency_ns: lat[i],
            // ns x cycles per ns (MHz / 1000); bytes per ns / cycles per ns.
            latency_cycles: lat[i].zip(mhz).map(|(ns, f)| ns * f / 1000.0),
            bandwidth_gbps: gbps,
            bytes_per_cycle: gbps.zip(mhz).map(|(g, f)| g * 1000.0 / f),
        }
    };
    Ok(PublishedModel {
        method: "Apex-MAP's model: latency + 8L / bandwidth for the L2 (every access its capacity holds under the power law) and memory; fitted as the multi-level model, with two levels".into(),
        l2: level(0, Some(l2)),
        memory: level(1, None),
        frequency_mhz: mhz,
        frequency_source: source,
        rms_residual: (ss / data.len().max(1) as f64).sqrt(),
    })
}

impl PublishedModel {
    /// A warning for each latency the fit put at its bound, 0 ns: the
    /// non-negative fit found no latency those points can resolve (on a
    /// noisy machine, a few ns of L2 latency drown in the long blocks'
    /// microseconds), so the figure is no measurement of it.
    pub fn unresolved(&self) -> Vec<String> {
        [("L2", &self.l2), ("memory", &self.memory)]
            .into_iter()
            .filter(|(_, level)| level.latency_ns == Some(0.0))
            .map(|(name, _)| {
                format!(
                    "published model: the {name} latency fits at its bound, 0 ns: these points do not resolve it; measure more small Ls (--ls) or a longer --budget"
                )
            })
            .collect()
    }
}

/// Packed against unpacked at one point (the study's Figure 7c).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackingRatio {
    #[serde(deserialize_with = "f64_or_nan")]
    pub alpha: f64,
    pub l: usize,
    /// Median over copies, ns per access.
    #[serde(deserialize_with = "f64_or_nan")]
    pub unpacked_ns: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub packed_ns: f64,
    /// `packed_ns / unpacked_ns`: above 1 where packing costs.
    #[serde(deserialize_with = "f64_or_nan")]
    pub ratio: f64,
}

/// The predicted packed time of one point and how the measurement departs
/// from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PredictedPoint {
    #[serde(deserialize_with = "f64_or_nan")]
    pub alpha: f64,
    pub l: usize,
    #[serde(deserialize_with = "f64_or_nan")]
    pub predicted_ns: f64,
    /// The packed map's median over copies.
    #[serde(deserialize_with = "f64_or_nan")]
    pub measured_ns: f64,
    /// `measured_ns / predicted_ns - 1`.
    #[serde(deserialize_with = "f64_or_nan")]
    pub residual: f64,
}

/// The packed map predicted from the unpacked map's published model (L2
/// and memory) with the memory bandwidth divided among the copies that
/// share a memory controller, as the Cray/NERSC study halved it for two
/// cores per socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackedPrediction {
    pub method: String,
    /// Copies that share one node's memory (its controller): the divisor
    /// of the memory bandwidth.
    pub sharing: u32,
    /// The unpacked model's memory bandwidth, 1e9 B/s (`None`: unbounded).
    pub memory_bandwidth_gbps: Option<f64>,
    /// What each packed copy is predicted to get: the above / `sharing`.
    pub shared_memory_bandwidth_gbps: Option<f64>,
    pub points: Vec<PredictedPoint>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub rms_residual: f64,
    pub worst: WorstPoint,
}

/// `numalab apexmap --copies both`: unpacked then packed, the ratio of the
/// two at every point and the prediction of packed from unpacked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackingComparison {
    /// Always [`Copies::Both`].
    pub copies: Copies,
    pub unpacked: ApexResult,
    pub packed: ApexResult,
    /// Every point measured in both maps, row-major as `points`.
    pub difference: Vec<PackingRatio>,
    pub prediction: Option<PackedPrediction>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
    /// Each map's warnings (marked `unpacked: ` or `packed: `) and the
    /// comparison's own.
    pub warnings: Vec<String>,
    /// Both maps' copies: the unpacked ones first.
    pub verification: Verification,
}

/// The packed time of each of `packed`'s points predicted from `model` (the
/// unpacked map's published model) with its memory bandwidth divided by
/// `sharing`: `P(L2) (lat_L2 + 8L / bw_L2) + P(mem) (lat_mem + 8L sharing /
/// bw_mem)`, the shares those of the model's L2 capacity; latencies and the
/// L2 bandwidth unchanged (each core has its own L2). A level the fit left
/// without a latency or bandwidth costs nothing of it, as in the fit.
pub fn predict_packed(
    model: &PublishedModel,
    sharing: u32,
    packed: &[ApexPoint],
) -> Result<PackedPrediction, String> {
    let l2 = model
        .l2
        .capacity_bytes
        .ok_or("the published model has no L2 capacity")?;
    if sharing == 0 {
        return Err("no copy shares the memory".into());
    }
    let levels = vec![("L2".to_string(), Some(l2)), ("memory".to_string(), None)];
    let inv = |lv: &PublishedLevel| lv.bandwidth_gbps.map(|g| 1.0 / g).unwrap_or(0.0);
    let (lat2, inv2) = (model.l2.latency_ns.unwrap_or(0.0), inv(&model.l2));
    let (latm, invm) = (
        model.memory.latency_ns.unwrap_or(0.0),
        inv(&model.memory) * sharing as f64,
    );
    let mut ss = 0.0;
    let mut n = 0usize;
    let mut worst = WorstPoint {
        alpha: f64::NAN,
        l: 0,
        residual: 0.0,
    };
    let points: Vec<PredictedPoint> = packed
        .iter()
        .map(|p| {
            let sh = level_shares(&levels, p.alpha, p.l, p.blocks);
            let bytes = (8 * p.l) as f64;
            let predicted = sh[0] * (lat2 + bytes * inv2) + sh[1] * (latm + bytes * invm);
            let residual = if predicted > 0.0 {
                p.ns.median / predicted - 1.0
            } else {
                f64::NAN
            };
            if residual.is_finite() {
                ss += residual * residual;
                n += 1;
                if residual.abs() > worst.residual.abs() || worst.alpha.is_nan() {
                    worst = WorstPoint {
                        alpha: p.alpha,
                        l: p.l,
                        residual,
                    };
                }
            }
            PredictedPoint {
                alpha: p.alpha,
                l: p.l,
                predicted_ns: predicted,
                measured_ns: p.ns.median,
                residual,
            }
        })
        .collect();
    Ok(PackedPrediction {
        method: format!(
            "the unpacked map's published model (L2 and memory) with the memory bandwidth divided by the {sharing} copies that share one node's memory controller (the study halved it for two cores per socket); latencies and the L2 bandwidth unchanged"
        ),
        sharing,
        memory_bandwidth_gbps: model.memory.bandwidth_gbps,
        shared_memory_bandwidth_gbps: model.memory.bandwidth_gbps.map(|g| g / sharing as f64),
        points,
        rms_residual: if n > 0 {
            (ss / n as f64).sqrt()
        } else {
            f64::NAN
        },
        worst,
    })
}

/// The ratio `packed / unpacked` of every point both maps measured, in
/// `packed`'s order.
pub fn packing_ratios(unpacked: &ApexResult, packed: &ApexResult) -> Vec<PackingRatio> {
    packed
        .points
        .iter()
        .filter_map(|p| {
            let u = unpacked.point(p.alpha, p.l)?;
            Some(PackingRatio {
                alpha: p.alpha,
                l: p.l,
                unpacked_ns: u.ns.median,
                packed_ns: p.ns.median,
                ratio: p.ns.median / u.ns.median,
            })
        })
        .collect()
}

/// Copies of `cpus` on the node with the most of them: how many share one
/// memory controller.
pub fn copies_sharing_a_node(m: &Machine, cpus: &[u32]) -> u32 {
    let mut per = std::collections::BTreeMap::<Option<u32>, u32>::new();
    for &c in cpus {
        *per.entry(m.node_of_cpu(c)).or_insert(0) += 1;
    }
    per.into_values().max().unwrap_or(0)
}

/// Unpacked, then packed, on the request's CPU's node (both refused before
/// anything is measured when packed would be one copy; unpacked may be one
/// copy, alone on the only node: the baseline packing is compared with);
/// then the ratio map and the prediction of packed from unpacked.
/// `progress` is called before each point of both maps.
pub fn run_packing_comparison(
    m: &Machine,
    req: &ApexRequest,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<PackingComparison, PlacementError> {
    let start = Instant::now();
    let packed_on = packed_cpus(m, req.cpu)?;
    let unpacked_on = unpacked_cpus(m, req.cpu, true)?;
    let unpacked = run_copies(m, req, Copies::Unpacked, &unpacked_on, progress)?;
    let packed = run_copies(m, req, Copies::Packed, &packed_on, progress)?;
    let difference = packing_ratios(&unpacked, &packed);
    let mut warnings: Vec<String> = unpacked
        .warnings
        .iter()
        .map(|w| format!("unpacked: {w}"))
        .chain(packed.warnings.iter().map(|w| format!("packed: {w}")))
        .collect();
    let sharing = copies_sharing_a_node(m, &packed_on);
    let prediction = match &unpacked.published_model {
        None => {
            warnings.push(
                "prediction: the unpacked map has no published model (see its warnings)".into(),
            );
            None
        }
        Some(model) => match predict_packed(model, sharing, &packed.points) {
            Ok(p) => Some(p),
            Err(e) => {
                warnings.push(format!("prediction: {e}"));
                None
            }
        },
    };
    let mut workers = unpacked.verification.workers.clone();
    workers.extend(packed.verification.workers.iter().cloned());
    let problems: Vec<String> = unpacked
        .verification
        .problems
        .iter()
        .map(|p| format!("unpacked: {p}"))
        .chain(
            packed
                .verification
                .problems
                .iter()
                .map(|p| format!("packed: {p}")),
        )
        .collect();
    Ok(PackingComparison {
        copies: Copies::Both,
        difference,
        prediction,
        elapsed_s: start.elapsed().as_secs_f64(),
        warnings,
        verification: Verification {
            verified: problems.is_empty(),
            workers,
            problems,
        },
        unpacked,
        packed,
    })
}

/// The core clock of `cpu` in MHz and where it was read, under `root`: the
/// nominal frequency from cpufreq (`base_frequency`), else `cpu MHz` of
/// /proc/cpuinfo, else the hardware maximum from cpufreq
/// (`cpuinfo_max_freq`); `None` when none is there (never a guess).
pub fn cpu_frequency(root: &Path, cpu: u32) -> Option<(f64, String)> {
    let fs = crate::placement::sysroot::SysRoot::new(root);
    let khz = |name: &str| -> Option<(f64, String)> {
        let rel = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/{name}");
        let v = fs.read(&rel)?.parse::<f64>().ok()?;
        (v.is_finite() && v > 0.0).then(|| (v / 1000.0, format!("/{rel}")))
    };
    khz("base_frequency")
        .or_else(|| {
            let mhz = cpuinfo_mhz(&fs.read("proc/cpuinfo")?, cpu)?;
            Some((mhz, format!("/proc/cpuinfo cpu MHz of processor {cpu}")))
        })
        .or_else(|| khz("cpuinfo_max_freq"))
}

/// `cpu MHz` of processor `cpu` in the text of /proc/cpuinfo.
pub(super) fn cpuinfo_mhz(text: &str, cpu: u32) -> Option<f64> {
    text.split("\n\n").find_map(|block| {
        let field = |name: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim())
            })
        };
        if field("processor")?.parse::<u32>().ok()? != cpu {
            return None;
        }
        let v = field("cpu MHz")?.parse::<f64>().ok()?;
        (v.is_finite() && v > 0.0).then_some(v)
    })
}

/// Default per-point budget so that the default grid takes about 20 s of
/// measuring: 0.4 s.
pub const DEFAULT_POINT_BUDGET: Duration = Duration::from_millis(400);
