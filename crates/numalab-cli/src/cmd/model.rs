//! `numalab model`: predicted times, link and controller loads and the
//! bottleneck of placements nobody ran, from a calibrated contention model
//! (docs/model.md).

use super::sweep::{scenario_list, ScenarioList};
use crate::args::{buffer_size, parsed, size_or_default, Output};
use crate::output::{load_machine, out, print_result, write_stderr, CliError, CliResult};
use numalab::experiments::sweep::{
    plan_scenarios, Access, Normalize, Scenario, ScenarioRequest, ThreadCase,
};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::model::calibrate::{calibrate_file, Calibration};
use numalab::model::params::{builtin, BUILTIN_NAMES};
use numalab::model::predict::{
    background_flows, check_scenarios, level_gbps, predict_case, predict_truth_table, ModelCheck,
    PredictedCase, PredictedScenario,
};
use numalab::model::{predict_scenarios, ModelParams, Network};
use numalab::placement::resource_set::{ListMeaning, ResourceSet};
use numalab::Machine;
use numalab_report::views::model as view;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

/// Most `--case` options.
const MAX_CASES: usize = 256;

/// Most classes per thread count in `--truth-table`.
const TRUTH_TABLE_LIMIT: usize = 20_000;

#[derive(clap::Args)]
pub struct Args {
    /// Read this hwloc XML topology file instead of the live machine.
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// The model's parameters: a parameter file (docs/models/*.json) or a built-in set (amd-quartet-2006).
    #[arg(long, value_name = "FILE|NAME", conflicts_with = "from")]
    params: Option<String>,
    /// Calibrate the parameters from a numalab report of this machine (its results.json).
    #[arg(long, value_name = "RESULTS.json")]
    from: Option<PathBuf>,
    /// Predict the classic study's scenarios (as sweep --scenarios plans them): all, or a comma-separated list (the default when nothing else is asked).
    #[arg(long, value_name = "LIST", value_parser = parsed(scenario_list))]
    scenarios: Option<ScenarioList>,
    /// Predict one case: its threads' labels node.core.{r|w}.memnode separated by spaces, e.g. "0.0.w.1 1.0.w.0" (repeatable).
    #[arg(long = "case", value_name = "LABELS")]
    cases: Vec<String>,
    /// With --case: paced local readers at this rate each (low, medium, high, very-high or GB/s).
    #[arg(long, value_name = "RATE", requires = "cases")]
    background: Option<String>,
    /// With --background: the CPUs the background readers run on (default: every CPU the case leaves).
    #[arg(long, value_name = "SET", requires = "background")]
    background_cpus: Option<String>,
    /// Predict every folded one- and two-thread case of the placement truth table (sweep's classes).
    #[arg(long)]
    truth_table: bool,
    /// Show the calibration (with --from): each fitted parameter, what it was fitted from, and the scaling check.
    #[arg(long, requires = "from")]
    calibration: bool,
    /// Run the predicted scenarios with the engine and print predicted vs measured, with the rank correlation and mean absolute error.
    #[arg(long, conflicts_with_all = ["topology", "truth_table"])]
    verify: bool,
    /// With --verify: interleaved rounds of the scenarios (4 to 100).
    #[arg(long, value_name = "N", default_value = "4", requires = "verify", value_parser = clap::value_parser!(u32).range(4..=100))]
    rounds: u32,
    /// With --verify: bytes per buffer, 4K to 128T (default: 4x the last-level cache, at least 64 MiB).
    #[arg(long, value_name = "SIZE", requires = "verify", allow_hyphen_values = true, value_parser = buffer_size())]
    size: Option<usize>,
    /// With --verify: time budget of each measurement, seconds (each case in each round; 0.05 to 60).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "0.3",
        requires = "verify"
    )]
    budget_each: f64,
    #[command(flatten)]
    out: Output,
}

/// What `--json` prints.
#[derive(Serialize)]
struct ModelResult<'a> {
    params: &'a ModelParams,
    /// `builtin:NAME`, the parameter file, or `calibrated:RESULTS.json`.
    params_from: String,
    calibration: Option<&'a Calibration>,
    scenarios: Vec<PredictedScenario>,
    cases: Vec<PredictedCase>,
    truth_table: Vec<PredictedCase>,
    check: Option<ModelCheck>,
}

fn params(a: &Args, m: &Machine) -> Result<(ModelParams, String, Option<Calibration>), CliError> {
    if let Some(path) = &a.from {
        let c = calibrate_file(path, m).map_err(|e| CliError::usage(format!("--from: {e}")))?;
        return Ok((
            c.params.clone(),
            format!("calibrated:{}", path.display()),
            Some(c),
        ));
    }
    let Some(given) = &a.params else {
        return Err(CliError::usage(format!(
            "the model needs parameters: give --from RESULTS.json (a numalab report of this machine) or --params FILE|NAME (built in: {})",
            BUILTIN_NAMES.join(", ")
        )));
    };
    if let Some(p) = builtin(given) {
        return Ok((p, format!("builtin:{given}"), None));
    }
    let path = PathBuf::from(given);
    if !path.exists() {
        return Err(CliError::usage(format!(
            "--params '{}' is neither a file nor a built-in set; built in: {}",
            numalab::text::format::excerpt(given, 60),
            BUILTIN_NAMES.join(", ")
        )));
    }
    let p = ModelParams::load(&path).map_err(|e| CliError::usage(format!("--params: {e}")))?;
    Ok((p, path.display().to_string(), None))
}

/// One label `node.core.{r|w}.memnode` as a thread of `m`.
fn thread(m: &Machine, label: &str) -> Result<ThreadCase, String> {
    let bad = || {
        format!(
            "--case: '{}' is not a thread label; valid: node.core.r|w.memnode, e.g. 0.0.w.1",
            numalab::text::format::excerpt(label, 40)
        )
    };
    let parts: Vec<&str> = label.split('.').collect();
    let [node, core, access, mem] = parts[..] else {
        return Err(bad());
    };
    let node: u32 = node.parse().map_err(|_| bad())?;
    let core: u32 = core.parse().map_err(|_| bad())?;
    let mem: u32 = mem.parse().map_err(|_| bad())?;
    let access = match access {
        "r" => Access::Read,
        "w" => Access::Write,
        _ => return Err(bad()),
    };
    let cpus: Vec<u32> = m.allowed_cpus_of(node).iter().collect();
    let cpu = *cpus.get(core as usize).ok_or_else(|| {
        format!(
            "--case {label}: node {node} has {} allowed CPU(s) (cores 0 to {}); nodes with CPUs: {}",
            cpus.len(),
            cpus.len().saturating_sub(1),
            m.cpu_nodes()
        )
    })?;
    if !m.memory_nodes().contains(mem) {
        return Err(format!(
            "--case {label}: node {mem} has no memory; memory nodes: {}",
            m.memory_nodes()
        ));
    }
    Ok(ThreadCase {
        cpu,
        node,
        core,
        access,
        mem,
        hops: m.hops_between(node, mem),
    })
}

fn cases(a: &Args, m: &Machine, net: &Network) -> Result<Vec<PredictedCase>, CliError> {
    if a.cases.len() > MAX_CASES {
        return Err(CliError::usage(format!(
            "{} --case options; at most {MAX_CASES}",
            a.cases.len()
        )));
    }
    let rate = a
        .background
        .as_deref()
        .map(level_gbps)
        .transpose()
        .map_err(|e| CliError::usage(format!("--background: {e}")))?;
    let mut parsed = Vec::new();
    for c in &a.cases {
        let threads = c
            .split_whitespace()
            .map(|l| thread(m, l))
            .collect::<Result<Vec<_>, _>>()
            .map_err(CliError::usage)?;
        if threads.is_empty() || threads.len() > 64 {
            return Err(CliError::usage(format!(
                "--case '{}' has {} threads; give 1 to 64 labels",
                numalab::text::format::excerpt(c, 40),
                threads.len()
            )));
        }
        parsed.push(threads);
    }
    // Each case's baseline is the machine's local read alone, as the
    // study's one-thread figures: times are comparable across cases.
    let local = net
        .predict(&[numalab::model::Flow::stream(
            "local read".into(),
            parsed.first().map_or(0, |t| t[0].node),
            parsed.first().map_or(0, |t| t[0].node),
            false,
        )])
        .map_err(CliError::failed)?
        .flows[0]
        .ns_per_line;
    let mut out = Vec::new();
    for threads in parsed {
        let background = match rate {
            None => Vec::new(),
            Some(g) => {
                let cpus: Vec<u32> = match &a.background_cpus {
                    Some(s) => ResourceSet::parse(m, s, ListMeaning::Cpus)
                        .map_err(|e| CliError::usage(format!("--background-cpus: {e}")))?
                        .cpus
                        .iter()
                        .collect(),
                    None => m
                        .cpu_nodes()
                        .iter()
                        .flat_map(|n| m.allowed_cpus_of(n).iter().collect::<Vec<_>>())
                        .filter(|c| !threads.iter().any(|t| t.cpu == *c))
                        .collect(),
                };
                background_flows(m, &cpus, g)
            }
        };
        let condition = a.background.clone().unwrap_or_else(|| "idle".into());
        let name = format!("{} thread(s)", threads.len());
        out.push(
            predict_case(
                net,
                &name,
                &threads,
                background,
                &condition,
                local * threads.len() as f64,
            )
            .map_err(CliError::failed)?,
        );
    }
    Ok(out)
}

/// `--verify`: the scenarios run by the engine, as `sweep --scenarios`
/// runs them (line kernels, the study's normalisation).
fn measure(
    m: &Machine,
    a: &Args,
    which: &[Scenario],
) -> Result<numalab::experiments::sweep::ScenariosResult, CliError> {
    if !(a.budget_each.is_finite() && (0.05..=60.0).contains(&a.budget_each)) {
        return Err(CliError::usage(format!(
            "--budget-each {}: give 0.05 to 60 seconds",
            a.budget_each
        )));
    }
    let set = plan_scenarios(m, which);
    if set.applicable().next().is_none() {
        return Err(CliError::failed(format!(
            "model --verify: no scenario can run on this machine ({})",
            set.not_applicable_reasons()
        )));
    }
    let size = size_or_default(m, a.size);
    let req = ScenarioRequest {
        set,
        read_kernel: BandwidthKernel::LineRead,
        write_kernel: BandwidthKernel::LineWrite,
        isa: Isa::detect_best(),
        buffer_bytes: size,
        background_bytes: size,
        thp: None,
        rounds: a.rounds as usize,
        rule: super::sweep::scenario_rule(a.budget_each),
        min_sample_s: 0.0,
        normalize: Normalize::Study,
        budget: None,
    };
    super::sweep::run_scenarios_shown(m, &req)
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(a.topology.as_deref())?;
    let (p, params_from, calibration) = params(&a, &m)?;
    let net = Network::new(&m, p.clone()).map_err(|e| CliError::usage(format!("model: {e}")))?;
    let which = match (
        &a.scenarios,
        a.cases.is_empty() && !a.truth_table && !a.calibration,
    ) {
        (Some(s), _) => s.0.clone(),
        (None, true) => Scenario::ALL.to_vec(),
        (None, false) => Vec::new(),
    };
    let scenarios = if which.is_empty() {
        Vec::new()
    } else {
        let set = plan_scenarios(&m, &which);
        if set.applicable().next().is_none() && a.cases.is_empty() && !a.truth_table {
            return Err(CliError::failed(format!(
                "no scenario asked for can be predicted on this machine ({}); give --case LABELS or --truth-table",
                set.not_applicable_reasons()
            )));
        }
        predict_scenarios(&net, &m, &set).map_err(CliError::failed)?
    };
    let cases = cases(&a, &m, &net)?;
    let truth_table = if a.truth_table {
        predict_truth_table(&net, &m, &[1, 2], TRUTH_TABLE_LIMIT).map_err(CliError::failed)?
    } else {
        Vec::new()
    };
    let check = if a.verify {
        if scenarios.is_empty() {
            return Err(CliError::usage(
                "--verify runs scenarios: give --scenarios LIST (or nothing, for all)",
            ));
        }
        write_stderr(format_args!(
            "model --verify: running the scenarios with the engine to compare\n"
        ));
        let measured = measure(&m, &a, &which)?;
        Some(check_scenarios(&scenarios, &measured))
    } else {
        None
    };
    if a.out.json {
        print_result(
            "model",
            &ModelResult {
                params: &p,
                params_from,
                calibration: calibration.as_ref(),
                scenarios,
                cases,
                truth_table,
                check,
            },
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    out!("{}", view::header(&p, &params_from, net.resources().len()))?;
    if a.calibration {
        if let Some(c) = &calibration {
            out!("{}", view::calibration_text(c))?;
        }
    }
    if !scenarios.is_empty() {
        out!("{}", view::scenarios_text(&scenarios))?;
    }
    if !cases.is_empty() {
        out!("{}", view::cases_text("Cases", &cases))?;
    }
    if !truth_table.is_empty() {
        out!(
            "{}",
            view::cases_text("Truth table (every folded class, idle)", &truth_table)
        )?;
    }
    if let Some(c) = &check {
        out!("{}", view::check_text(c))?;
    }
    Ok(ExitCode::SUCCESS)
}
