//! `numalab sweep`: the placement truth table, folded by the machine's
//! symmetry, with background load, and `--findings` mining it for the
//! classic questions.

use crate::args::{
    buffer_size, choice, choice_list, parsed, seconds, size_or_default, whole, List, THP,
};
use crate::output::{
    exit_for, load_machine, print_result, print_warnings, CliError, CliResult, Envelope, Progress,
    RESULT_SCHEMA_VERSION,
};
use crate::output::{out, write_stderr};
use numalab::experiments::sweep::{
    check_buffers_fit, findings, plan, plan_scenarios, run_scenarios, run_sweep, Access,
    Background, ListedCases, ListedPlan, Normalize, PlannedCase, Scenario, ScenarioRequest,
    ScenarioSet, Subscription, SweepListing, SweepReport, SweepRequest, SweepResult, SweepSpace,
    MAX_PLANNED_CASES, MIN_ROUNDS,
};
use numalab::input::{read_text, InputKind};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::pacing::background_rate;
use numalab::measure::stats::StopRule;
use numalab::placement::resource_set::{ListMeaning, ResourceSet};
use numalab::placement::Thp;
use numalab::Machine;
use numalab_report::compare::check_input;
use numalab_report::views::scenarios as scenario_view;
use numalab_report::views::sweep::{self as view, findings_text};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// Foreground thread counts, each swept on its own (e.g. 2 or 1,2; 1 to 8).
    #[arg(long, value_name = "LIST", default_value = "1,2", allow_hyphen_values = true, value_parser = choice_list(&["1", "2", "3", "4", "5", "6", "7", "8"], thread_count))]
    thread_counts: List<usize>,
    /// CPUs the foreground threads may use (resource-set grammar).
    #[arg(long, value_name = "SET", default_value = "all")]
    cpus: String,
    /// Memory nodes the buffers may be on (default: every allowed node with memory).
    #[arg(long, value_name = "NODES")]
    mem_nodes: Option<String>,
    /// r (read-only threads), w (write-only) or rw (every mix).
    #[arg(long, value_name = "ACCESS", default_value = "rw", value_parser = choice(&["r", "w", "rw"], accesses))]
    access: Accesses,
    /// Kernel of read-only threads (a one-array kernel).
    #[arg(long, value_name = "KERNEL", default_value = "line-read", value_parser = choice(ONE_ARRAY, one_array_kernel))]
    read_kernel: BandwidthKernel,
    /// Kernel of write-only threads (a one-array kernel).
    #[arg(long, value_name = "KERNEL", default_value = "line-write", value_parser = choice(ONE_ARRAY, one_array_kernel))]
    write_kernel: BandwidthKernel,
    /// Bytes per buffer, 4K to 128T (default: 4x the last-level cache, at least 64 MiB).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = buffer_size())]
    size: Option<usize>,
    /// Transparent huge pages for the buffers.
    #[arg(long, value_name = "THP", default_value = "on", value_parser = choice(THP, Thp::parse))]
    thp: Thp,
    /// Run every case instead of one per symmetry class.
    #[arg(long)]
    every_case: bool,
    /// Measure one member per class only: no twin (by default a second
    /// member of each class run is measured when the budget pays for it,
    /// to test the symmetry the folding assumes).
    #[arg(long)]
    no_twins: bool,
    /// Time budget of the whole command, in seconds (0.001 to 604800, one week): runs a subset covering every hop class.
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = seconds(0.0))]
    budget: Option<f64>,
    /// Time budget of each measurement (case), in seconds (0.001 to 604800, one week; default: shared out of about 40 s).
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = seconds(0.0))]
    budget_each: Option<f64>,
    /// Background levels, comma-separated, each a sweep of its own: none, low (0.5 GB/s per
    /// thread), medium (1), high (2), very-high (4) or a number of GB/s (0.001 to 10000).
    #[arg(long, value_name = "LEVELS", default_value = "none", allow_hyphen_values = true, value_parser = choice_list(&["none", "low", "medium", "high", "very-high", "GB/s"], level))]
    background: List<Level>,
    /// How many of the CPUs a case leaves free carry background threads
    /// (comma-separated for several).
    #[arg(long, value_name = "LIST", default_value = "full", value_parser = choice_list(&["under", "high", "full"], Subscription::parse))]
    subscription: List<Subscription>,
    /// Put the background threads on these CPUs instead (those a case does not use).
    #[arg(long, value_name = "SET")]
    background_cpus: Option<String>,
    /// Bytes per background buffer, 4K to 128T (default: as --size).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = buffer_size())]
    background_size: Option<usize>,
    /// Mine the sweep for the classic questions and print what holds on this machine.
    #[arg(long)]
    findings: bool,
    /// Read a saved `sweep --json` result instead of running (with --findings, --json or
    /// alone; options that measure would be ignored, so they are refused).
    #[arg(long, value_name = "FILE", conflicts_with_all = MEASURING)]
    from: Option<PathBuf>,
    /// Only print the case and class counts (and the cases) that would run.
    #[arg(long)]
    list: bool,
    /// With --list: plan for the machine of this hwloc XML file instead of the live one.
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// Samples per case, 1 to 1000 (default: until the median is within 1% or the case budget is spent).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = whole(1, 1000))]
    reps: Option<usize>,
    /// Shortest sample in milliseconds, 0 to 10000 (passes repeat up to it); 0 = one pass per sample.
    #[arg(
        long,
        value_name = "MS",
        default_value = "20",
        allow_hyphen_values = true,
        value_parser = parsed(sample_ms)
    )]
    sample_ms: f64,
    /// Most cases --every-case may run, per thread count: 1 to 1500000 (the most a sweep may
    /// plan, days of measuring).
    #[arg(long, value_name = "N", default_value = "100000", value_parser = parsed(case_limit))]
    case_limit: u64,
    /// Run the classic study's figures as fixed scenarios, by role: all, or a comma-separated
    /// list of one-thread-hops, crossfire, crossfire-high, crossfire-full, two-on-one-node,
    /// two-writers-loaded.
    #[arg(long, value_name = "LIST", value_parser = parsed(scenario_list), conflicts_with_all = SWEEP_ONLY)]
    scenarios: Option<ScenarioList>,
    /// With --scenarios: study (the study's baselines: local read; two idle local readers on
    /// different nodes) or run (each run's fastest case).
    #[arg(long, value_name = "HOW", default_value = "study", value_parser = choice(&["study", "run"], Normalize::parse), requires = "scenarios")]
    normalize: Normalize,
    /// With --scenarios: interleaved rounds, each running every case once (4 to 100; the
    /// rank test needs 4 to tell anything from noise).
    #[arg(long, value_name = "N", default_value = "6", allow_hyphen_values = true, value_parser = whole(MIN_ROUNDS, 100), requires = "scenarios")]
    rounds: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The scenarios `--scenarios` names (clap reads a `Vec` as many values).
#[derive(Clone)]
pub(crate) struct ScenarioList(pub(crate) Vec<Scenario>);

pub(crate) fn scenario_list(t: &str) -> Result<ScenarioList, String> {
    Scenario::parse_list(t).map(ScenarioList)
}

/// Options of the case-space sweep that the fixed scenarios choose for
/// themselves.
const SWEEP_ONLY: [&str; 8] = [
    "thread_counts",
    "cpus",
    "mem_nodes",
    "access",
    "every_case",
    "background",
    "subscription",
    "background_cpus",
];

/// The options that shape a measurement (or a plan), which `--from` would
/// ignore: every option but --from, --findings and --json.
const MEASURING: [&str; 24] = [
    "thread_counts",
    "cpus",
    "mem_nodes",
    "access",
    "read_kernel",
    "write_kernel",
    "size",
    "thp",
    "every_case",
    "no_twins",
    "budget",
    "budget_each",
    "background",
    "subscription",
    "background_cpus",
    "background_size",
    "list",
    "topology",
    "reps",
    "sample_ms",
    "case_limit",
    "scenarios",
    "normalize",
    "rounds",
];

fn backgrounds(m: &Machine, a: &Args) -> Result<Vec<Option<Background>>, CliError> {
    let cpus = a
        .background_cpus
        .as_deref()
        .map(|t| {
            ResourceSet::parse(m, t, ListMeaning::Cpus)
                .map(|s| s.cpus)
                .map_err(|e| CliError::usage(format!("--background-cpus: {e}")))
        })
        .transpose()?;
    if cpus.as_ref().is_some_and(|c| c.is_empty()) {
        return Err(CliError::usage("--background-cpus names no CPU"));
    }
    let mut out = Vec::new();
    for lv in &a.background.0 {
        let Some((level, rate)) = lv.0.as_ref().map(|(l, r)| (l.as_str(), *r)) else {
            out.push(None);
            continue;
        };
        if cpus.is_some() {
            out.push(Some(Background {
                level: level.into(),
                bytes_per_second: rate,
                subscription: Subscription::Full,
                cpus: cpus.clone(),
            }));
        } else {
            for &s in &a.subscription.0 {
                out.push(Some(Background {
                    level: level.into(),
                    bytes_per_second: rate,
                    subscription: s,
                    cpus: None,
                }));
            }
        }
    }
    Ok(out)
}

/// A background level: none (an idle sweep), or its name and bytes per
/// second per background thread.
#[derive(Debug, Clone, PartialEq)]
struct Level(Option<(String, f64)>);

fn level(t: &str) -> Result<Level, String> {
    if t == "none" || t == "idle" {
        return Ok(Level(None));
    }
    Ok(Level(Some((t.to_string(), background_rate(t)?))))
}

/// One foreground thread count, from 1 to 8.
fn thread_count(t: &str) -> Result<usize, String> {
    t.trim().parse().ok().filter(|v| (1..=8).contains(v)).ok_or_else(|| {
        format!(
            "'{t}' is not a thread count from 1 to 8 (the space grows as (CPUs x nodes x 2)^threads)"
        )
    })
}

/// Read-only threads, write-only threads, or both.
#[derive(Clone)]
struct Accesses(Vec<Access>);

fn accesses(t: &str) -> Result<Accesses, String> {
    Access::parse_set(t).map(Accesses)
}

/// The kernels a sweep thread can run: one buffer each.
const ONE_ARRAY: &[&str] = &[
    "read",
    "read-prefetch",
    "write",
    "write-nt",
    "line-read",
    "line-write",
    "random-read",
];

fn one_array_kernel(t: &str) -> Result<BandwidthKernel, String> {
    let k = BandwidthKernel::parse(t)?;
    if k.arrays() != 1 {
        return Err(format!(
            "{t}: a sweep thread streams one buffer; use a one-array kernel ({})",
            ONE_ARRAY.join(", ")
        ));
    }
    Ok(k)
}

/// `--sample-ms`: milliseconds from 0 to 10000.
fn sample_ms(t: &str) -> Result<f64, String> {
    t.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0 && *v <= 10_000.0)
        .ok_or_else(|| format!("'{t}' is not a number of milliseconds from 0 to 10000"))
}

/// `--case-limit`: a whole number of cases from 1 to
/// [`MAX_PLANNED_CASES`]; a larger plan could not be built in bounded memory,
/// let alone run.
fn case_limit(t: &str) -> Result<u64, String> {
    t.trim()
        .parse()
        .ok()
        .filter(|n| (1..=MAX_PLANNED_CASES).contains(n))
        .ok_or_else(|| {
            format!(
                "'{t}' is not a number of cases from 1 to {MAX_PLANNED_CASES} (the most a sweep may plan)"
            )
        })
}

fn request(m: &Machine, a: &Args) -> Result<SweepRequest, CliError> {
    let cpus = ResourceSet::parse(m, &a.cpus, ListMeaning::Cpus)
        .map_err(|e| CliError::usage(format!("--cpus: {e}")))?
        .cpus;
    if cpus.is_empty() {
        return Err(CliError::usage(format!(
            "--cpus '{}' holds no CPU; nodes with CPUs: {}",
            a.cpus,
            m.cpu_nodes()
        )));
    }
    let mem_nodes = match &a.mem_nodes {
        None => m.memory_nodes(),
        Some(t) => {
            ResourceSet::parse(m, t, ListMeaning::Nodes)
                .map_err(|e| CliError::usage(format!("--mem-nodes: {e}")))?
                .nodes
        }
    };
    let size = size_or_default(m, a.size);
    let background_bytes = a.background_size.unwrap_or(size);
    let budget = a.budget.map(Duration::from_secs_f64);
    let budget_each = a.budget_each;
    Ok(SweepRequest {
        threads: a.thread_counts.0.clone(),
        cpus,
        mem_nodes,
        accesses: a.access.0.clone(),
        read_kernel: a.read_kernel,
        write_kernel: a.write_kernel,
        isa: Isa::detect_best(),
        buffer_bytes: size,
        thp: Some(a.thp),
        full: a.every_case,
        budget,
        rule: match a.reps {
            None => StopRule {
                warmup: 1,
                min_reps: 3,
                max_reps: 50,
                target_rel_ci: 0.01,
                budget: Duration::from_secs_f64(budget_each.unwrap_or(1.0)),
            },
            Some(n) => StopRule {
                warmup: 0,
                min_reps: n,
                max_reps: n,
                target_rel_ci: 0.0,
                budget: Duration::from_secs_f64(budget_each.unwrap_or(3600.0)),
            },
        },
        min_sample_s: a.sample_ms / 1e3,
        twins: !a.every_case && !a.no_twins,
        backgrounds: backgrounds(m, a)?,
        background_bytes,
        full_limit: a.case_limit,
    })
}

/// The plan of a sweep: per thread count, the cases of the full
/// enumeration and the representative case of every class.
type Plans = Vec<(usize, u64, Vec<PlannedCase>)>;

pub fn run(a: Args) -> CliResult {
    if let Some(path) = &a.from {
        return from_file(path, &a);
    }
    if a.topology.is_some() && !a.list {
        return Err(CliError::usage(
            "--topology only goes with --list: measuring needs the live machine",
        ));
    }
    let m = load_machine(a.topology.as_deref())?;
    if let Some(which) = &a.scenarios {
        return scenarios(&m, &a, &which.0);
    }
    let mut req = request(&m, &a)?;
    let space =
        SweepSpace::new(&m, &req.cpus, &req.mem_nodes, &req.accesses).map_err(CliError::usage)?;
    let plans = plan(&space, &req).map_err(CliError::usage)?;
    let symmetries = Symmetries {
        nodes: space.symmetry_order().to_string(),
        machine: space.machine_symmetry_order().to_string(),
    };
    if a.list {
        return list(&a, &req, &plans, &symmetries);
    }
    let n_cases: usize = plans.iter().map(|p| p.2.len()).sum::<usize>() * req.backgrounds.len();
    // A sweep that cannot fit says so in its one line, before the plan.
    check_buffers_fit(&m, &req)?;
    if a.budget_each.is_none() && req.budget.is_none() {
        // About 40 s of measuring in all by default.
        req.rule.budget = Duration::from_secs_f64((40.0 / n_cases.max(1) as f64).clamp(0.1, 1.0));
    }
    write_stderr(format_args!(
        "{}",
        view::plan_text(&req, &plans, &symmetries.nodes, &symmetries.machine)
    ));
    // The sweep plans again for itself: one plan in memory at a time.
    drop(plans);
    let progress = Progress::bar(n_cases as u64, "sweep");
    let r = run_sweep(&m, &req, &mut |_, _, label| progress.step(label))?;
    progress.finish();
    let f = findings(&r);
    if a.json {
        print_result(
            "sweep",
            &SweepReport {
                sweep: &r,
                findings: &f,
            },
        )?;
    } else {
        out!("{}", view::text(&r))?;
        if a.findings {
            out!("{}", findings_text(&f))?;
        }
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(r.verified))
}

/// `--list`: the cases that would run, as text or JSON.
/// `--scenarios`: plan the study's figures by role here, list them, or run them.
fn scenarios(m: &Machine, a: &Args, which: &[Scenario]) -> CliResult {
    let set = plan_scenarios(m, which);
    if a.list {
        return list_scenarios(a, &set);
    }
    if set.applicable().next().is_none() {
        return Err(CliError::failed(format!(
            "no scenario asked for can run on this machine ({})",
            set.not_applicable_reasons()
        )));
    }
    let size = size_or_default(m, a.size);
    let rule = match a.reps {
        None => scenario_rule(a.budget_each.unwrap_or(0.3)),
        Some(n) => StopRule {
            warmup: 0,
            min_reps: n,
            max_reps: n,
            target_rel_ci: 0.0,
            budget: Duration::from_secs_f64(a.budget_each.unwrap_or(3600.0)),
        },
    };
    let req = ScenarioRequest {
        set,
        read_kernel: a.read_kernel,
        write_kernel: a.write_kernel,
        isa: Isa::detect_best(),
        buffer_bytes: size,
        background_bytes: a.background_size.unwrap_or(size),
        thp: Some(a.thp),
        rounds: a.rounds,
        rule,
        min_sample_s: a.sample_ms / 1e3,
        normalize: a.normalize,
        budget: a.budget.map(Duration::from_secs_f64),
    };
    write_stderr(format_args!("{}", scenario_view::plan_text(&req.set)));
    let r = run_scenarios_shown(m, &req)?;
    if a.json {
        print_result("sweep", &r)?;
    } else {
        out!("{}", scenario_view::text(&r))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(r.verified))
}

/// The scenarios' stop rule unless `--reps` fixes the count: a warm-up,
/// then 3 to 5 repetitions toward ±2%, within `budget_each` seconds.
pub(crate) fn scenario_rule(budget_each: f64) -> StopRule {
    StopRule {
        warmup: 1,
        min_reps: 3,
        max_reps: 5,
        target_rel_ci: 0.02,
        budget: Duration::from_secs_f64(budget_each),
    }
}

/// Runs `req`'s scenarios with a progress bar over every case of every
/// round (and each round's two alone runs).
pub(crate) fn run_scenarios_shown(
    m: &Machine,
    req: &ScenarioRequest,
) -> Result<numalab::experiments::sweep::ScenariosResult, CliError> {
    let cases: usize = req
        .set
        .applicable()
        .map(|p| p.cases.len() * p.background.as_ref().map_or(1, |b| b.levels.len()))
        .sum();
    let progress = Progress::bar((cases as u64 + 2) * req.rounds as u64, "scenarios");
    let r = run_scenarios(m, req, &mut |_, _, label| progress.step(label))?;
    progress.finish();
    Ok(r)
}

/// `--scenarios --list`: the plan, as text or JSON.
fn list_scenarios(a: &Args, set: &ScenarioSet) -> CliResult {
    if !a.json {
        out!("{}", scenario_view::plan_text(set))?;
        return Ok(ExitCode::SUCCESS);
    }
    print_result("sweep --list --scenarios", set)?;
    Ok(ExitCode::SUCCESS)
}

/// The orders of the node symmetry and of the whole machine tree's.
struct Symmetries {
    nodes: String,
    machine: String,
}

fn list(a: &Args, req: &SweepRequest, plans: &Plans, symmetries: &Symmetries) -> CliResult {
    if !a.json {
        out!(
            "{}",
            view::plan_text(req, plans, &symmetries.nodes, &symmetries.machine)
        )?;
        out!("{}", view::list_text(plans))?;
        return Ok(ExitCode::SUCCESS);
    }
    let listing = SweepListing {
        plans: plans
            .iter()
            .map(|(t, total, cases)| ListedPlan {
                threads: *t,
                total_cases: *total,
                classes: cases.len(),
                node_automorphisms: symmetries.nodes.parse().unwrap_or(u64::MAX),
                node_symmetry_order: &symmetries.nodes,
                machine_symmetry_order: &symmetries.machine,
                cases: ListedCases(cases),
            })
            .collect(),
    };
    let out = std::io::stdout().lock();
    let mut out = std::io::BufWriter::new(out);
    // Written as it is serialized (the cases are never one document in
    // memory), in the envelope every command's JSON has.
    let written = serde_json::to_writer_pretty(&mut out, &Envelope::new("sweep --list", &listing))
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out))
        .and_then(|()| out.flush());
    written.map_err(|e| CliError::failed(format!("cannot write the list: {e}")))?;
    Ok(ExitCode::SUCCESS)
}

fn from_file(path: &std::path::Path, a: &Args) -> CliResult {
    let text = read_text(path, InputKind::ResultsJson)
        .map_err(|e| CliError::usage(format!("--from {}: {}", path.display(), e.problem)))?;
    let not_sweep = |why: String| {
        CliError::usage(format!(
            "--from {}: not a `numalab sweep --json` result ({why})",
            path.display()
        ))
    };
    let mut v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| not_sweep(e.to_string()))?;
    check_input(&v, RESULT_SCHEMA_VERSION)
        .map_err(|e| CliError::usage(format!("--from {} {e}", path.display())))?;
    let command = v["command"].as_str().unwrap_or("").to_string();
    if command != "sweep" {
        return Err(not_sweep(format!("its command is '{command}'")));
    }
    // Not through a flattened struct: serde cannot read numeric map keys
    // (pages by node) back through `flatten`.
    if let Some(o) = v.as_object_mut() {
        for k in ["schema_version", "command", "findings", "environment"] {
            o.remove(k);
        }
    }
    let result: SweepResult = serde_json::from_value(v).map_err(|e| not_sweep(e.to_string()))?;
    let f = findings(&result);
    if a.json {
        print_result("sweep --from", &f)?;
    } else {
        if !a.findings {
            out!("{}", view::text(&result))?;
        }
        out!("{}", findings_text(&f))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args as _, Command};

    #[test]
    fn from_refuses_every_option_that_measures() {
        let mut cmd = Args::augment_args(Command::new("sweep"));
        cmd.build();
        let from = cmd.get_arguments().find(|a| a.get_id() == "from").unwrap();
        let mut conflicting: Vec<&str> = cmd
            .get_arg_conflicts_with(from)
            .iter()
            .map(|a| a.get_id().as_str())
            .collect();
        conflicting.sort_unstable();
        let mut others: Vec<&str> = cmd
            .get_arguments()
            .map(|a| a.get_id().as_str())
            .filter(|id| !["from", "findings", "json", "help"].contains(id))
            .collect();
        others.sort_unstable();
        assert_eq!(
            conflicting, others,
            "a new sweep option must join MEASURING"
        );
    }
}
