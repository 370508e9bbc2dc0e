//! `numalab scaling`: 1..N threads packed vs spread, and the contention split.

use crate::cmd::bench::{size_option, RESULT_SCHEMA_VERSION};
use crate::cmd::options::{StatOptions, Units};
use crate::output::{load_machine, print_json, CliError, CliResult, Progress};
use numalab::experiments::scaling::{run_scaling, ScalingResult};
use numalab::measure::environment::Environment;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use serde::Serialize;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Bandwidth kernel.
    #[arg(long, value_name = "KERNEL", default_value = "read")]
    kernel: String,
    /// Largest thread count (default: every allowed CPU).
    #[arg(long, value_name = "N")]
    max_threads: Option<String>,
    /// Bytes per buffer (default: 4x the last-level cache).
    #[arg(long, value_name = "SIZE")]
    size: Option<String>,
    /// gb (1e9 B/s) or gib.
    #[arg(long, value_name = "UNITS", default_value = "gb")]
    units: String,
    #[command(flatten)]
    stats: StatOptions,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Envelope<'a> {
    schema_version: &'static str,
    command: &'static str,
    #[serde(flatten)]
    result: &'a ScalingResult,
    environment: Environment,
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let kernel = BandwidthKernel::parse(&a.kernel).map_err(CliError::usage)?;
    let units = Units::parse(&a.units)?;
    let n_cpus = m.allowed_cpus.len();
    let max = match a.max_threads.as_deref() {
        None => n_cpus,
        Some(t) => {
            let v: usize = t.trim().parse().ok().filter(|v| *v >= 1).ok_or_else(|| {
                CliError::usage(format!("--max-threads '{t}' is not a thread count"))
            })?;
            if v > n_cpus {
                return Err(CliError::usage(format!(
                    "--max-threads {v} but only {n_cpus} CPUs are allowed ({})",
                    m.allowed_cpus
                )));
            }
            v
        }
    };
    let size = size_option(&m, a.size.as_deref())?;
    let mut rule = a.stats.rule(1.0)?;
    if a.stats.budget.is_none() {
        rule.budget = std::time::Duration::from_secs_f64((16.0 / (2 * max) as f64).clamp(0.3, 2.0));
    }
    let progress = Progress::bar(2 * max as u64, "scaling");
    let r = run_scaling(&m, kernel, Isa::detect_best(), size, max, &rule, &mut |w| {
        progress.step(w)
    })?;
    progress.finish();
    if a.json {
        print_json(&Envelope {
            schema_version: RESULT_SCHEMA_VERSION,
            command: "scaling",
            result: &r,
            environment: Environment::capture(),
        })?;
    } else {
        let u = units.label();
        println!(
            "{} scaling, local memory, {} per buffer",
            kernel.name(),
            numalab::placement::format_bytes(r.buffer_bytes)
        );
        println!(
            "  {:>7}  {:>14} {:>14}  {:>14} {:>14}",
            "threads", "packed total", "per thread", "spread total", "per thread"
        );
        for (p, s) in r.packed.iter().zip(&r.spread) {
            println!(
                "  {:>7}  {:>9.2} {u:<5}{:>9.2} {u:<5}  {:>9.2} {u:<5}{:>9.2} {u:<5}",
                p.threads,
                units.convert(p.gbps.median),
                units.convert(p.per_thread_gbps),
                units.convert(s.gbps.median),
                units.convert(s.per_thread_gbps)
            );
        }
        match &r.model {
            Some(mo) => {
                println!(
                    "contention split (packed, fitted on {} and {} threads): core time {:.2} ms per pass, +{:.2} ms per extra thread; {:.0}% of the time at {} threads is contention",
                    mo.fitted_on.0, mo.fitted_on.1, mo.core_seconds * 1e3, mo.contention_seconds_per_thread * 1e3, mo.contention_share * 100.0, mo.fitted_on.1
                );
                let preds: Vec<String> = mo
                    .predictions
                    .iter()
                    .map(|(n, per, tot)| {
                        format!("{n}: {:.2}/{:.2}", units.convert(*per), units.convert(*tot))
                    })
                    .collect();
                println!(
                    "predicted per-thread/aggregate {u} by thread count: {}",
                    preds.join(", ")
                );
            }
            None => println!(
                "contention split needs at least two thread counts (this machine allows one CPU)"
            ),
        }
        crate::output::print_warnings(&r.warnings);
    }
    let ok = r.packed.iter().chain(&r.spread).all(|p| p.verified);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
