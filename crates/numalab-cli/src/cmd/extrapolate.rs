//! `numalab extrapolate`: the Cray/NERSC core + contention split of measured
//! run times, projected to more cores per node and other memory bandwidths.

use crate::args::{parsed, read_list, List, Output};
use crate::output::{out, print_result, CliError, CliResult};
use numalab::experiments::extrapolate::{
    CoreContention, ExtrapolateResult, MachineCurve, PerCoreBandwidth, Prediction, TimedPoint,
    MAX_CORES, MAX_POINTS,
};
use numalab::experiments::scaling::ScalingResult;
use numalab::input::{read_text, InputKind};
use numalab::text::parse;
use numalab_report::views::extrapolate::{text, to_machine_text};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Run times, comma-separated (seconds, e.g. 160,230 or 160s,230s), one per --cores entry.
    #[arg(long, value_name = "T1,T2,...", allow_hyphen_values = true, value_parser = parsed(times))]
    times: List<f64>,
    /// Cores busy per node in each run, 1 to 65536 (default 1,2).
    #[arg(long, value_name = "K1,K2,...", allow_hyphen_values = true, value_parser = parsed(core_list))]
    cores: Option<List<usize>>,
    /// Per-core memory bandwidth in each run, GB/s (default: proportional to 1/cores).
    #[arg(long, value_name = "B1,B2,...", allow_hyphen_values = true, value_parser = parsed(rates))]
    bandwidth: Option<List<f64>>,
    /// The measured system's per-core bandwidth by cores per node, from its `numalab scaling --json` or a report's results.json (instead of --bandwidth).
    #[arg(long, value_name = "FILE", conflicts_with = "bandwidth")]
    from_machine: Option<PathBuf>,
    /// Also project to another machine from its `numalab scaling --json` or a report's results.json: the contention term scales by the per-core bandwidth there (needs --bandwidth or --from-machine).
    #[arg(long, value_name = "FILE")]
    to_machine: Option<PathBuf>,
    /// Cores per node to project to (default: 1, 2, 4, 8 and the counts measured).
    #[arg(long = "to", value_name = "K,...", allow_hyphen_values = true, value_parser = parsed(core_list))]
    to: Option<List<usize>>,
    /// Memory bandwidth relative to the measured system, above 0 up to 1000 (default 1).
    #[arg(long, value_name = "R,...", allow_hyphen_values = true, value_parser = parsed(ratios))]
    bandwidth_ratio: Option<List<f64>>,
    #[command(flatten)]
    out: Output,
}

/// A comma-separated list of at most [`MAX_POINTS`] entries, each read by
/// `parse`.
fn bounded<T: PartialEq>(t: &str, parse: fn(&str) -> Result<T, String>) -> Result<List<T>, String> {
    let n = t.split(',').count();
    if n > MAX_POINTS {
        return Err(format!("has {n} entries: give 1 to {MAX_POINTS}"));
    }
    read_list(t, parse)
}

fn times(t: &str) -> Result<List<f64>, String> {
    bounded(t, parse::seconds)
}

fn core_list(t: &str) -> Result<List<usize>, String> {
    bounded(t, cores)
}

fn rates(t: &str) -> Result<List<f64>, String> {
    bounded(t, parse::rate)
}

fn ratios(t: &str) -> Result<List<f64>, String> {
    bounded(t, ratio)
}

fn cores(t: &str) -> Result<usize, String> {
    t.parse::<usize>()
        .ok()
        .filter(|k| (1..=MAX_CORES).contains(k))
        .ok_or_else(|| format!("'{t}' is not a core count (a whole number from 1 to {MAX_CORES})"))
}

fn ratio(t: &str) -> Result<f64, String> {
    t.trim_end_matches('x')
        .parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r > 0.0 && *r <= 1000.0)
        .ok_or_else(|| {
            format!(
                "'{t}' is not a bandwidth ratio (a number above 0, at most 1000, e.g. 2 or 0.5)"
            )
        })
}

/// The per-core bandwidth curve of the machine `path` measured: its
/// `numalab scaling --json` or a report's results.json (its scaling part),
/// read through the bounded reader; `option` names the option in errors.
fn machine_curve(option: &str, path: &Path) -> Result<PerCoreBandwidth, CliError> {
    let bad = |why: String| CliError::usage(format!("{option} {}: {why}", path.display()));
    let text = read_text(path, InputKind::ResultsJson)
        .map_err(|e| CliError::usage(format!("{option}: {e}")))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not JSON ({e})")))?;
    let scaling = if v["command"] == "scaling" {
        &v
    } else if v["parts"]["scaling"]["result"].is_object() {
        &v["parts"]["scaling"]["result"]
    } else {
        return Err(bad(
            "holds no scaling measurement; give the output of numalab scaling --json or a report's results.json with its scaling part"
                .into(),
        ));
    };
    let r: ScalingResult = serde_json::from_value(scaling.clone())
        .map_err(|e| bad(format!("its scaling measurement does not read ({e})")))?;
    PerCoreBandwidth::from_scaling(&r).map_err(bad)
}

pub fn run(a: Args) -> CliResult {
    let times = &a.times.0;
    let cores: Vec<usize> = match &a.cores {
        Some(c) => c.0.clone(),
        None => (1..=times.len()).collect(),
    };
    if cores.len() != times.len() {
        return Err(CliError::usage(format!(
            "--times has {} entries and --cores {}: give one time per core count",
            times.len(),
            cores.len()
        )));
    }
    let from = match &a.from_machine {
        Some(p) => Some(machine_curve("--from-machine", p)?),
        None => None,
    };
    let target = match &a.to_machine {
        Some(p) => Some(machine_curve("--to-machine", p)?),
        None => None,
    };
    if target.is_some() && a.bandwidth.is_none() && from.is_none() {
        return Err(CliError::usage(
            "--to-machine needs this system's per-core bandwidth to compare with: give --bandwidth B1,B2,... (one per run) or --from-machine FILE",
        ));
    }
    if let Some(b) = &a.bandwidth {
        if b.0.len() != times.len() {
            return Err(CliError::usage(format!(
                "--bandwidth has {} entries and --times {}: give one per-core bandwidth per run",
                b.0.len(),
                times.len()
            )));
        }
    }
    let points: Vec<TimedPoint> = (0..times.len())
        .map(|i| TimedPoint {
            cores: cores[i],
            seconds: times[i],
            per_core_bandwidth: match (&a.bandwidth, &from) {
                (Some(b), _) => Some(b.0[i] / 1e9),
                (None, Some(curve)) => Some(curve.at(cores[i])),
                (None, None) => None,
            },
        })
        .collect();
    let fit =
        CoreContention::fit(&points).map_err(|e| CliError::usage(format!("extrapolate: {e}")))?;
    let mut to: Vec<usize> = match &a.to {
        Some(t) => t.0.clone(),
        None => [1, 2, 4, 8]
            .into_iter()
            .chain(cores.iter().copied())
            .collect(),
    };
    if a.to.is_none() {
        to.sort_unstable();
        to.dedup();
    }
    let ratios = a.bandwidth_ratio.map(|r| r.0).unwrap_or_else(|| vec![1.0]);
    let predictions: Vec<Prediction> = to
        .iter()
        .flat_map(|&k| ratios.iter().map(move |&r| (k, r)))
        .map(|(k, r)| fit.predict(k, r))
        .collect();
    let on_target: Vec<Prediction> = match &target {
        Some(t) => to
            .iter()
            .map(|&k| fit.predict_on(k, t))
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::usage(format!("extrapolate: {e}")))?,
        None => Vec::new(),
    };
    let shown = |p: &Option<PathBuf>| {
        p.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    if a.out.json {
        let from_machine = from.as_ref().map(|c| MachineCurve {
            file: shown(&a.from_machine),
            per_core_gbps: c,
        });
        let to_machine = target.as_ref().map(|t| {
            let curve = MachineCurve {
                file: shown(&a.to_machine),
                per_core_gbps: t,
            };
            (curve, &on_target[..])
        });
        print_result(
            "extrapolate",
            &ExtrapolateResult::new(&fit, &predictions, from_machine, to_machine),
        )?;
    } else {
        out!("{}", text(&fit, &predictions))?;
        if let Some(t) = &target {
            out!(
                "{}",
                to_machine_text(&fit, &shown(&a.to_machine), t, &on_target)
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
