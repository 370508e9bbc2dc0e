//! `numalab extrapolate`: the Cray/NERSC core + contention split of measured
//! run times, projected to more cores per node and other memory bandwidths.

use crate::args::{parsed, read_list, List, Output};
use crate::output::{out, print_result, CliError, CliResult};
use numalab::experiments::extrapolate::{
    CoreContention, Prediction, TimedPoint, MAX_CORES, MAX_POINTS,
};
use numalab::report::views::extrapolate::text;
use numalab::text::parse;
use serde::Serialize;
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

/// What `--json` prints.
#[derive(Serialize)]
struct ExtrapolateResult<'a> {
    formula: &'static str,
    core_seconds: f64,
    contention_seconds: f64,
    method: &'a numalab::experiments::extrapolate::FitMethod,
    max_residual_seconds: f64,
    runs: &'a [TimedPoint],
    predictions: &'a [Prediction],
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
            per_core_bandwidth: a.bandwidth.as_ref().map(|b| b.0[i] / 1e9),
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
    if a.out.json {
        print_result(
            "extrapolate",
            &ExtrapolateResult {
                formula: "T(k) = core_seconds + contention_seconds * B(1)/B(k) / bandwidth_ratio",
                core_seconds: fit.core_seconds,
                contention_seconds: fit.contention_seconds,
                method: &fit.method,
                max_residual_seconds: fit.max_residual_seconds,
                runs: &fit.points,
                predictions: &predictions,
            },
        )?;
    } else {
        out!("{}", text(&fit, &predictions))?;
    }
    Ok(ExitCode::SUCCESS)
}
