//! `numalab apexmap`: the Apex-MAP locality map and the simple model's fit.

use crate::cmd::bench::{exit_for, size_option, verification_text, RESULT_SCHEMA_VERSION};
use crate::cmd::options::StatOptions;
use crate::cmd::place::parse_one_cpu;
use crate::output::{load_machine, print_json, print_warnings, CliError, CliResult, Progress};
use numalab::experiments::apexmap::{
    check_alpha, check_l, run_apexmap, ApexRequest, ApexResult, DEFAULT_POINT_BUDGET, MAX_L,
};
use numalab::measure::environment::Environment;
use numalab::measure::kernels::Isa;
use numalab::placement::{format_bytes, MemoryPolicy, Thp};
use serde::Serialize;

#[derive(clap::Args)]
#[command(
    after_help = "--budget is the time per (alpha, L) point (default 0.4 s: the default 45 points take about 25 s). Block index = floor(M * r^(1/alpha)), r uniform in [0, 1); each access reads L contiguous words and depends on the previous one. See docs/apexmap.md."
)]
pub struct Args {
    /// CPU that runs the accesses (default: the first allowed CPU).
    #[arg(long, value_name = "CPU")]
    cpu: Option<String>,
    /// Memory policy of the buffer (see numalab place --help).
    #[arg(long = "mem", value_name = "POLICY", default_value = "local")]
    mem: String,
    /// Buffer size (default: 4x the last-level cache, at least 64 MiB).
    #[arg(long, value_name = "SIZE")]
    size: Option<String>,
    /// Temporal localities, each in (0, 1] (comma list; 1 = uniform random, small = concentrated).
    #[arg(long, value_name = "LIST", default_value = "0.001,0.01,0.1,0.5,1")]
    alphas: String,
    /// Spatial localities: 8-byte words per access, whole numbers 1..65536 (comma list).
    #[arg(
        long = "ls",
        value_name = "LIST",
        default_value = "1,4,16,64,256,1024,4096,16384,65536"
    )]
    ls: String,
    /// Transparent huge pages for the buffer: on, off, system.
    #[arg(long, value_name = "on|off|system", default_value = "on")]
    thp: String,
    /// Instruction set of the block reads: auto, avx512, avx2, sse2, neon, portable.
    #[arg(long, value_name = "ISA", default_value = "auto")]
    isa: String,
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
    result: &'a ApexResult,
    environment: Environment,
}

fn items(text: &str) -> impl Iterator<Item = &str> {
    text.split([',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Parses `--alphas`.
pub fn parse_alphas(text: &str) -> Result<Vec<f64>, CliError> {
    let v: Vec<f64> = items(text)
        .map(|t| {
            let a: f64 = t.parse().map_err(|_| {
                CliError::usage(format!(
                    "--alphas: '{t}' is not a number; give values in (0, 1], e.g. 0.001,0.1,1"
                ))
            })?;
            check_alpha(a).map_err(|e| CliError::usage(format!("--alphas: {e}")))
        })
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(CliError::usage(
            "--alphas is empty; give values in (0, 1], e.g. 0.001,0.1,1",
        ));
    }
    Ok(v)
}

/// Parses `--ls`.
pub fn parse_ls(text: &str) -> Result<Vec<usize>, CliError> {
    let bad = |t: &str| {
        CliError::usage(format!(
            "--ls: '{t}' is not a whole number of words from 1 to {MAX_L}"
        ))
    };
    let v: Vec<usize> = items(text)
        .map(|t| {
            let l: usize = t.parse().map_err(|_| bad(t))?;
            check_l(l).map_err(|_| bad(t))
        })
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(bad(text));
    }
    Ok(v)
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let cpu = match a.cpu.as_deref() {
        Some(c) => parse_one_cpu(&m, c)?,
        None => m
            .allowed_cpus
            .first()
            .ok_or_else(|| CliError::failed("no CPU is allowed for this process"))?,
    };
    let policy = MemoryPolicy::parse(&m, &a.mem).map_err(CliError::usage)?;
    let alphas = parse_alphas(&a.alphas)?;
    let ls = parse_ls(&a.ls)?;
    let thp = Thp::parse(&a.thp).map_err(CliError::usage)?;
    let isa = match a.isa.as_str() {
        "auto" => Isa::detect_best(),
        t => Isa::parse(t).map_err(CliError::usage)?,
    };
    isa.check_available().map_err(CliError::usage)?;
    let size = size_option(&m, a.size.as_deref())?;
    let rule = a.stats.rule(DEFAULT_POINT_BUDGET.as_secs_f64())?;
    let n_points = {
        let mut x = alphas.clone();
        x.sort_by(f64::total_cmp);
        x.dedup();
        let mut y = ls.clone();
        y.sort_unstable();
        y.dedup();
        x.len() * y.len()
    };
    let req = ApexRequest {
        cpu,
        policy: policy.clone(),
        buffer_bytes: size,
        thp: Some(thp),
        alphas,
        ls,
        isa,
        rule,
        seed: 0xa9e4_0000_5eed,
    };
    let progress = Progress::bar(n_points as u64, "apexmap");
    let r = run_apexmap(&m, &req, &mut |w| progress.step(w))?;
    progress.finish();
    if a.json {
        print_json(&Envelope {
            schema_version: RESULT_SCHEMA_VERSION,
            command: "apexmap",
            result: &r,
            environment: Environment::capture(),
        })?;
    } else {
        let node = m
            .node_of_cpu(cpu)
            .map(|n| format!(" (node {n})"))
            .unwrap_or_default();
        println!(
            "Apex-MAP on CPU {cpu}{node}, memory {policy}, {} buffer (THP {}), ISA {}: {} alphas x {} Ls in {:.1} s",
            format_bytes(r.buffer_bytes),
            thp.describe(),
            r.isa.name(),
            r.alphas.len(),
            r.ls.len(),
            r.elapsed_s
        );
        print!("{}", text(&r));
        print!("{}", verification_text(&r.verification));
        print_warnings(&r.warnings);
    }
    Ok(exit_for(r.verification.verified))
}

/// A table with alphas as rows and Ls as columns.
fn grid(
    r: &ApexResult,
    title: &str,
    cell: &dyn Fn(&numalab::experiments::apexmap::ApexPoint) -> String,
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "{title}");
    let _ = write!(s, "  {:>9}", "alpha \\ L");
    for l in &r.ls {
        let _ = write!(s, " {l:>8}");
    }
    s.push('\n');
    for &a in &r.alphas {
        let _ = write!(s, "  {a:>9}");
        for &l in &r.ls {
            let c = r.point(a, l).map(cell).unwrap_or_else(|| "-".into());
            let _ = write!(s, " {c:>8}");
        }
        s.push('\n');
    }
    s
}

/// A value with about three significant digits.
fn sig(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn text(r: &ApexResult) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    s.push_str(&grid(
        r,
        "ns per access (rows: temporal locality alpha; columns: L, 8-byte words per access)",
        &|p| sig(p.ns.median),
    ));
    s.push_str(&grid(r, "GB/s (8L bytes per access)", &|p| {
        sig(p.gbps.median)
    }));
    if let Some(mo) = &r.model {
        let _ = writeln!(
            s,
            "Model: time per access = sum over levels of P(level) x (latency + 8L / bandwidth); P from the power law and the cache sizes, latency and bandwidth fitted (least squares, relative error)"
        );
        let _ = writeln!(
            s,
            "  {:>8} {:>10} {:>12} {:>12}",
            "level", "capacity", "latency ns", "GB/s"
        );
        for lv in &mo.levels {
            let _ = writeln!(
                s,
                "  {:>8} {:>10} {:>12} {:>12}",
                lv.name,
                lv.capacity_bytes.map(format_bytes).unwrap_or("-".into()),
                lv.latency_ns.map(sig).unwrap_or("-".into()),
                lv.bandwidth_gbps.map(sig).unwrap_or("-".into())
            );
        }
        s.push_str(&grid(
            r,
            "Residual (measured / model - 1): where the machine departs from the model",
            &|p| {
                p.residual
                    .map(|x| format!("{:+.0}%", x * 100.0))
                    .unwrap_or("-".into())
            },
        ));
        let _ = writeln!(
            s,
            "  rms residual {:.0}%, largest {:+.0}% at alpha {} L {}",
            mo.rms_residual * 100.0,
            mo.worst.residual * 100.0,
            mo.worst.alpha,
            mo.worst.l
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_refuse() {
        assert_eq!(parse_alphas("0.001, 0.5,1").unwrap(), vec![0.001, 0.5, 1.0]);
        assert_eq!(parse_ls("1,4 16").unwrap(), vec![1, 4, 16]);
        assert!(parse_alphas("0").unwrap_err().msg.contains("(0, 1]"));
        assert!(parse_alphas("x").unwrap_err().msg.contains("not a number"));
        assert!(parse_ls("3.5").unwrap_err().msg.contains("whole number"));
        assert!(parse_ls("65537").unwrap_err().msg.contains("65536"));
        assert!(parse_ls("0").is_err());
    }
}
