//! `numalab c2c`: cache-line transfer latency between every pair of CPUs.

use crate::cmd::bench::{exit_for, RESULT_SCHEMA_VERSION};
use crate::cmd::options::StatOptions;
use crate::cmd::place::cpuless_hint;
use crate::output::{load_machine, print_json, print_warnings, CliError, CliResult, Progress};
use numalab::experiments::c2c::{
    pair_count, render_matrix, run_c2c, C2cFigures, C2cRequest, C2cResult, CpuMatrix,
};
use numalab::measure::environment::Environment;
use numalab::placement::{ListMeaning, ResourceSet};
use serde::Serialize;

#[derive(clap::Args)]
#[command(
    after_help = "--budget is the time per pair of CPUs (default: about 60 s in all, 0.05 to 0.5 s per pair). Figures: modified (one-way latency of a written line, ping-pong / 2), clean (a reader loads lines held clean by the other CPU), false-sharing (atomic increments of two words of one line vs separate lines). See docs/c2c.md."
)]
pub struct Args {
    /// CPUs to pair (set grammar; default all allowed).
    #[arg(long, value_name = "SET", default_value = "all")]
    cpus: String,
    /// Figures to measure: modified, clean, false-sharing, all (comma list).
    #[arg(long, value_name = "LIST", default_value = "all")]
    figures: String,
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
    result: &'a C2cResult,
    environment: Environment,
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

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let set = ResourceSet::parse(&m, &a.cpus, ListMeaning::Cpus)
        .map_err(|e| CliError::usage(format!("--cpus: {e}")))?;
    if !set.cpus.is_subset(&m.allowed_cpus) {
        return Err(CliError::usage(format!(
            "--cpus '{}' names CPU(s) {} this process may not use; allowed: {}",
            a.cpus,
            set.cpus.difference(&m.allowed_cpus),
            m.allowed_cpus
        )));
    }
    if set.cpus.len() < 2 {
        return Err(CliError::usage(format!(
            "--cpus '{}' holds {} CPU{}: c2c needs at least two{}; allowed CPUs: {}",
            a.cpus,
            set.cpus.len(),
            if set.cpus.len() == 1 { "" } else { "s" },
            cpuless_hint(&m, &set),
            m.allowed_cpus
        )));
    }
    let figures =
        C2cFigures::parse(&a.figures).map_err(|e| CliError::usage(format!("--figures: {e}")))?;
    let cpus: Vec<u32> = set.cpus.iter().collect();
    let pairs = pair_count(cpus.len());
    let rule = a.stats.rule(default_pair_budget(pairs))?;
    let budget = rule.budget.as_secs_f64();
    let estimate = format!(
        "{pairs} pair{} x {budget:.2} s: about {}",
        if pairs == 1 { "" } else { "s" },
        duration_text(pairs as f64 * budget * 1.1)
    );
    if !a.json {
        println!(
            "c2c over CPUs {} ({estimate}; --budget sets the time per pair)",
            set.cpus
        );
    }
    let req = C2cRequest {
        cpus,
        figures,
        rule,
    };
    let progress = Progress::bar(pairs as u64, &format!("c2c {estimate}"));
    let r = run_c2c(&m, &req, &mut |w| progress.step(w))?;
    progress.finish();
    if a.json {
        print_json(&Envelope {
            schema_version: RESULT_SCHEMA_VERSION,
            command: "c2c",
            result: &r,
            environment: Environment::capture(),
        })?;
    } else {
        print!("{}", text(&r));
        print_warnings(&r.warnings);
    }
    Ok(exit_for(r.verification.verified))
}

fn text(r: &C2cResult) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} pair{} in {:.1} s; core clock {}; rows and columns are CPUs grouped by node; the diagonal (a CPU with itself) is not measured",
        r.pair_count,
        if r.pair_count == 1 { "" } else { "s" },
        r.elapsed_s,
        if r.core_ghz > 0.0 {
            format!("{:.2} GHz", r.core_ghz)
        } else {
            "unknown (no cycle figures)".into()
        }
    );
    let mx = &r.matrices;
    let mut show = |title: &str, m: &Option<CpuMatrix>, f: &dyn Fn(f64) -> String| {
        if let Some(m) = m {
            s.push('\n');
            s.push_str(&render_matrix(title, &r.cpus, &r.nodes, m, f));
        }
    };
    let ns = |v: f64| format!("{v:.1}");
    let cyc = |v: f64| format!("{v:.0}");
    show(
        "Modified line, one-way latency (ns): ping-pong of a flag, round trip / 2",
        &mx.modified_ns,
        &ns,
    );
    show(
        "Modified line, one-way latency (cycles)",
        &mx.modified_cycles,
        &cyc,
    );
    show(
        "Clean line (ns per load): row = reader, column = the CPU holding the line clean",
        &mx.clean_ns,
        &ns,
    );
    show("Clean line (cycles per load)", &mx.clean_cycles, &cyc);
    show(
        "False sharing (ns per atomic increment, both threads writing their own word of one line)",
        &mx.false_sharing_ns,
        &ns,
    );
    if let Some(m) = &mx.false_sharing_ratio {
        let mut v: Vec<f64> = r
            .pairs
            .iter()
            .filter_map(|p| p.false_sharing.as_ref().map(|f| f.separate_lines_ns.median))
            .collect();
        v.sort_by(f64::total_cmp);
        let sep = v.get(v.len() / 2).copied().unwrap_or(f64::NAN);
        s.push('\n');
        s.push_str(&render_matrix(
            &format!(
                "False sharing slowdown (one line / separate lines; separate lines: median {sep:.1} ns per increment)"
            ),
            &r.cpus,
            &r.nodes,
            m,
            &|v| format!("{v:.1}x"),
        ));
    }
    let _ = writeln!(s, "\nPer node pair (medians over the CPU pairs):");
    let _ = writeln!(
        s,
        "  {:>7} {:>6}  {:>12} {:>7}  {:>9} {:>7}  {:>14} {:>8}",
        "nodes",
        "pairs",
        "modified ns",
        "cycles",
        "clean ns",
        "cycles",
        "false-shar. ns",
        "slowdown"
    );
    let o = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or("-".into());
    for n in &r.node_summary {
        let _ = writeln!(
            s,
            "  {:>7} {:>6}  {:>12} {:>7}  {:>9} {:>7}  {:>14} {:>8}",
            if n.nodes[0] == n.nodes[1] {
                format!("{}", n.nodes[0])
            } else {
                format!("{}-{}", n.nodes[0], n.nodes[1])
            },
            n.pairs,
            o(n.modified_ns, 1),
            o(n.modified_cycles, 0),
            o(n.clean_ns, 1),
            o(n.clean_cycles, 0),
            o(n.false_sharing_ns, 1),
            n.false_sharing_ratio
                .map(|x| format!("{x:.1}x"))
                .unwrap_or("-".into())
        );
    }
    if r.verification.verified {
        let _ = writeln!(s, "placement verified: every thread ran on its CPU");
    } else {
        for p in &r.verification.problems {
            let _ = writeln!(s, "NOT VERIFIED: {p}");
        }
    }
    s
}
