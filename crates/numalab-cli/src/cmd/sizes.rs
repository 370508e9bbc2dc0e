//! `numalab sizes`: bandwidth and latency from L1-sized to DRAM-sized working sets.

use crate::cmd::bench::RESULT_SCHEMA_VERSION;
use crate::cmd::options::{StatOptions, Units};
use crate::cmd::place::parse_one_cpu;
use crate::output::{load_machine, print_json, CliError, CliResult, Progress};
use numalab::experiments::sizes::{run_sizes, sweep_sizes, SizesResult};
use numalab::measure::environment::Environment;
use numalab::measure::harness::default_buffer_bytes;
use numalab::measure::kernels::Isa;
use numalab::placement::{format_bytes, parse_size};
use serde::Serialize;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// CPU to run on (default: the first allowed CPU).
    #[arg(long, value_name = "CPU")]
    cpu: Option<String>,
    /// Largest working set (default: 4x the last-level cache).
    #[arg(long, value_name = "SIZE")]
    max_size: Option<String>,
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
    result: &'a SizesResult,
    environment: Environment,
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let cpu = match a.cpu.as_deref() {
        Some(c) => parse_one_cpu(&m, c)?,
        None => m
            .allowed_cpus
            .first()
            .ok_or_else(|| CliError::failed("no CPU is allowed"))?,
    };
    let units = Units::parse(&a.units)?;
    let max = match a.max_size.as_deref() {
        None => default_buffer_bytes(&m) as u64,
        Some(t) => parse_size(t).map_err(CliError::usage)?,
    };
    let sizes = sweep_sizes(&m, max);
    if sizes.is_empty() {
        return Err(CliError::usage(format!(
            "--max-size {} is smaller than the smallest size of the sweep",
            format_bytes(max)
        )));
    }
    let mut rule = a.stats.rule(0.4)?;
    if a.stats.budget.is_none() {
        // About 25 s for the whole sweep: four measurements per size.
        rule.budget =
            std::time::Duration::from_secs_f64((25.0 / (4 * sizes.len()) as f64).clamp(0.1, 1.0));
        rule.min_reps = rule.min_reps.min(3);
    }
    let progress = Progress::bar(4 * sizes.len() as u64, "sizes");
    let r = run_sizes(&m, cpu, &sizes, Isa::detect_best(), &rule, &mut |w| {
        progress.step(w)
    })?;
    progress.finish();
    if a.json {
        print_json(&Envelope {
            schema_version: RESULT_SCHEMA_VERSION,
            command: "sizes",
            result: &r,
            environment: Environment::capture(),
        })?;
    } else {
        let marks: Vec<String> = r
            .caches
            .iter()
            .map(|c| format!("{} {}", c.name, format_bytes(c.bytes)))
            .collect();
        println!(
            "working-set sweep on CPU {cpu}, memory local; caches: {}",
            marks.join(", ")
        );
        println!(
            "  {:>10}  {:>6}  {:>9} {:>9} {:>9}  {:>9}",
            "size", "fits", "read", "write", "copy", "latency"
        );
        println!(
            "  {:>10}  {:>6}  {:>9} {:>9} {:>9}  {:>9}",
            "",
            "in",
            units.label(),
            units.label(),
            units.label(),
            "ns"
        );
        let mut last = String::new();
        for p in &r.points {
            if p.fits_in != last && !last.is_empty() {
                println!("  {:-<62}", format!("-- {} boundary ", last));
            }
            last = p.fits_in.clone();
            println!(
                "  {:>10}  {:>6}  {:>9.2} {:>9.2} {:>9.2}  {:>9.1}",
                format_bytes(p.bytes),
                p.fits_in,
                units.convert(p.gbps[0]),
                units.convert(p.gbps[1]),
                units.convert(p.gbps[2]),
                p.latency_ns
            );
        }
        crate::output::print_warnings(&r.warnings);
    }
    Ok(if r.points.iter().all(|p| p.verified) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
