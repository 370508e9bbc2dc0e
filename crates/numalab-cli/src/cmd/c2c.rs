//! `numalab c2c`: cache-line transfer latency between every pair of CPUs.

use crate::args::{choice, cpuless_hint, StatOptions};
use crate::output::{
    exit_for, load_machine, print_result, print_warnings, CliError, CliResult, Progress,
};
use crate::output::{out, outln};
use numalab::experiments::c2c::{pair_count, run_c2c, C2cFigures, C2cRequest};
use numalab::experiments::loaded_latency::usable_cpus;
use numalab::placement::{ListMeaning, ResourceSet};
use numalab::{IdSet, Machine};
use numalab_report::views::c2c::text;

#[derive(clap::Args)]
#[command(
    after_help = "--budget is the whole command's time, shared among the pairs of CPUs; --budget-each the time per pair (default: about 60 s in all, 0.05 to 0.5 s per pair). Figures: modified (one-way latency of a written line, ping-pong / 2), clean (a reader loads lines held clean by the other CPU), false-sharing (atomic increments of two words of one line vs separate lines). See docs/c2c.md."
)]
pub struct Args {
    /// CPUs to pair (set grammar; default and `all`: every CPU this process
    /// may use, within its cgroup cpuset and taskset mask).
    #[arg(long, value_name = "SET")]
    cpus: Option<String>,
    /// Figures to measure, comma-separated: modified, clean, false-sharing, all.
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = choice(&["modified", "clean", "false-sharing", "all"], C2cFigures::parse))]
    figures: C2cFigures,
    #[command(flatten)]
    stats: StatOptions,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Default budget per pair: about a minute in all, 0.05 to 0.5 s per pair.
pub fn default_pair_budget(pairs: usize) -> f64 {
    (60.0 / pairs.max(1) as f64).clamp(0.05, 0.5)
}

fn duration_text(s: f64) -> String {
    if s < 90.0 {
        format!("{s:.0} s")
    } else {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    }
}

/// The CPUs to pair: `--cpus`, or every CPU this process may use. Like the
/// other commands, c2c stays inside the cgroup cpuset and the taskset mask:
/// CPUs outside them are refused, naming the ones it may use.
fn pair_cpus(m: &Machine, text: Option<&str>) -> Result<Vec<u32>, CliError> {
    let usable = usable_cpus(m);
    // "all" is what this process may use, as the default.
    let Some(t) = text.filter(|t| t.trim() != "all") else {
        if usable.len() < 2 {
            return Err(CliError::usage(format!(
                "c2c needs at least two CPUs, but this process may use only CPU {usable}; run it where 2 or more CPUs are allowed (cgroup cpuset, taskset)"
            )));
        }
        return Ok(usable.iter().collect());
    };
    let set = ResourceSet::parse(m, t, ListMeaning::Cpus)
        .map_err(|e| CliError::usage(format!("--cpus: {e}")))?;
    if !set.cpus.is_subset(&usable) {
        return Err(CliError::usage(format!(
            "--cpus '{t}' names CPU{} {} this process may not use (cgroup cpuset, taskset); allowed: {usable}",
            if set.cpus.difference(&usable).len() == 1 { "" } else { "s" },
            set.cpus.difference(&usable),
        )));
    }
    if set.cpus.len() < 2 {
        return Err(CliError::usage(format!(
            "--cpus '{t}' holds {} CPU{}: c2c needs at least two{}; allowed CPUs: {usable}",
            set.cpus.len(),
            if set.cpus.len() == 1 { "" } else { "s" },
            cpuless_hint(m, &set),
        )));
    }
    Ok(set.cpus.iter().collect())
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let cpus = pair_cpus(&m, a.cpus.as_deref())?;
    let pairs = pair_count(cpus.len());
    let rule = a.stats.rule(default_pair_budget(pairs), pairs)?;
    let budget = rule.budget.as_secs_f64();
    let estimate = format!(
        "{pairs} pair{} x {budget:.2} s: about {}",
        if pairs == 1 { "" } else { "s" },
        duration_text(pairs as f64 * budget * 1.1)
    );
    if !a.json {
        outln!(
            "c2c over CPUs {} ({estimate}; --budget sets the whole time, --budget-each the time per pair)",
            cpus.iter().copied().collect::<IdSet>()
        )?;
    }
    let req = C2cRequest {
        cpus,
        figures: a.figures,
        rule,
    };
    let progress = Progress::bar(pairs as u64, &format!("c2c {estimate}"));
    let r = run_c2c(&m, &req, &mut |w| progress.step(w))?;
    progress.finish();
    if a.json {
        print_result("c2c", &r)?;
    } else {
        out!("{}", text(&r))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(r.verification.verified))
}
