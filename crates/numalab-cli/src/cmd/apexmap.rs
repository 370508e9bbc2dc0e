//! `numalab apexmap`: the Apex-MAP locality map and the simple model's fit.

use crate::args::{
    choice, cpu_or_first, isa, memory_policy, size_or_default, PinnedBuffer, StatOptions, ISAS, THP,
};
use crate::output::out;
use crate::output::{
    exit_for, load_machine, print_result, print_warnings, CliError, CliResult, Progress,
};
use numalab::experiments::apexmap::{
    check_alpha, check_l, run_apexmap_copies, run_packing_comparison, ApexRequest, Copies,
    DEFAULT_POINT_BUDGET, MAX_L,
};
use numalab::experiments::loaded_latency::usable_cpus;
use numalab::measure::kernels::Isa;
use numalab::placement::Thp;
use numalab_report::views::apexmap::{comparison_text, text};

#[derive(clap::Args)]
#[command(
    after_help = "--budget is the whole command's time, shared among the (alpha, L) points (of both maps with --copies both); --budget-each the time per point (default 0.4 s: the default 45 points take about 25 s). Block index = floor(M * r^(1/alpha)), r uniform in [0, 1); each access reads L contiguous words and depends on the previous one. See docs/apexmap.md."
)]
pub struct Args {
    #[command(flatten)]
    buffer: PinnedBuffer,
    /// Temporal localities, each in (0, 1] (comma list; 1 = uniform random, small = concentrated).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "0.001,0.01,0.1,0.5,1",
        allow_hyphen_values = true
    )]
    alphas: String,
    /// Spatial localities: 8-byte words per access, whole numbers 1..65536 (comma list).
    #[arg(
        long = "ls",
        value_name = "LIST",
        default_value = "1,4,16,64,256,1024,4096,16384,65536",
        allow_hyphen_values = true
    )]
    ls: String,
    /// Transparent huge pages for the buffer.
    #[arg(long, value_name = "THP", default_value = "on", value_parser = choice(THP, Thp::parse))]
    thp: Thp,
    /// Copies of the map at once: single (one, on --cpu), packed (one per core of --cpu's node), unpacked (one per node with CPUs), both (unpacked then packed, their ratio and the prediction of packed).
    #[arg(long, value_name = "MODE", default_value = "single", value_parser = choice(Copies::NAMES, Copies::parse))]
    copies: Copies,
    /// Instruction set of the block reads (auto: the widest this CPU runs).
    #[arg(long, value_name = "ISA", default_value = "auto", value_parser = choice(ISAS, isa))]
    isa: Isa,
    #[command(flatten)]
    stats: StatOptions,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
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
    let mut m = load_machine(None)?;
    if a.copies != Copies::Single {
        // Copies stay inside the taskset mask too (as c2c): the cores and
        // nodes counted are those this process may use.
        m.allowed_cpus = usable_cpus(&m);
    }
    let cpu = cpu_or_first(&m, a.buffer.cpu.as_deref())?;
    let policy = memory_policy(&m, "--mem", &a.buffer.mem)?;
    let alphas = parse_alphas(&a.alphas)?;
    let ls = parse_ls(&a.ls)?;
    let n_points = {
        let mut x = alphas.clone();
        x.sort_by(f64::total_cmp);
        x.dedup();
        let mut y = ls.clone();
        y.sort_unstable();
        y.dedup();
        x.len() * y.len()
    };
    // Both measures every point twice: --budget is shared by both maps.
    let maps = if a.copies == Copies::Both { 2 } else { 1 };
    let rule = a
        .stats
        .rule(DEFAULT_POINT_BUDGET.as_secs_f64(), maps * n_points)?;
    let req = ApexRequest {
        cpu,
        policy,
        buffer_bytes: size_or_default(&m, a.buffer.size),
        thp: Some(a.thp),
        alphas,
        ls,
        isa: a.isa,
        rule,
        seed: 0xa9e4_0000_5eed,
    };
    let progress = Progress::bar((maps * n_points) as u64, "apexmap");
    if a.copies == Copies::Both {
        let c = run_packing_comparison(&m, &req, &mut |w| progress.step(w))?;
        progress.finish();
        if a.json {
            print_result("apexmap", &c)?;
        } else {
            out!("{}", comparison_text(&c, &m, a.thp))?;
            print_warnings(&c.warnings)?;
        }
        return Ok(exit_for(c.verification.verified));
    }
    let r = run_apexmap_copies(&m, &req, a.copies, &mut |w| progress.step(w))?;
    progress.finish();
    if a.json {
        print_result("apexmap", &r)?;
    } else {
        out!("{}", text(&r, &m, a.thp))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(r.verification.verified))
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
