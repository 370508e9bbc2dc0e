//! `numalab advise`: the placement to use for a workload of a given shape
//! (or a profiled program), predicted by the contention model, with the
//! command lines that give it, its predicted gain over the OS default and
//! the runner-up; `--verify` runs both (docs/advise.md).

use crate::args::{
    choice, isa, parsed, seconds, size, thread_count, whole, Output, ISAS, MAX_THREADS,
};
use crate::output::{
    load_machine, out, print_result, print_warnings, refuse_overwriting_input, write_stderr,
    CliError, CliResult, Progress,
};
use numalab::machine::Source;
use numalab::measure::kernels::Isa;
use numalab::model::advise::{
    self as engine, parse_rw, Advice, AdviceCheck, Candidate, CommandContext, ModelTrust, Shape,
    Sharing, VerifyRequest, Workload,
};
use numalab::model::calibrate::{calibrate_file, Calibration};
use numalab::model::params::{builtin, BUILTIN_NAMES};
use numalab::model::{ModelParams, Network};
use numalab::profile::Profile;
use numalab::text::format;
use numalab::Machine;
use numalab_report::files::write_atomically;
use numalab_report::views::Units;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// What the command line names a plan file when `--write-plan` is not given.
const PLAN_PLACEHOLDER: &str = "advise-plan.json";

const SHARINGS: &[&str] = &["independent", "shared", "producer-consumer"];

#[derive(clap::Args)]
pub struct Args {
    /// Threads of the workload, one per CPU at most.
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = thread_count(MAX_THREADS), conflicts_with = "profile")]
    threads: Option<usize>,
    /// How the threads share the data: independent (each its own slice), shared (every thread all of it), producer-consumer (pairs sharing a buffer the producer touches first).
    #[arg(long, value_name = "SHARING", value_parser = choice(SHARINGS, Sharing::parse), conflicts_with = "profile")]
    sharing: Option<Sharing>,
    /// All the data of the workload together (64K to 128T).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = size(64 << 10, "the data of the workload"), conflicts_with = "profile")]
    data: Option<usize>,
    /// Reads to writes of the accessed lines, R:W (1:0 reads only, 3:1, 1:1, 0:1 writes only; default 1:1 for producer-consumer, else 1:0).
    #[arg(long, value_name = "R:W", allow_hyphen_values = true, value_parser = parsed(parse_rw), conflicts_with = "profile")]
    rw: Option<f64>,
    /// The workload as `numalab profile -o DIR` saw it: DIR/profile.json (threads, regions, who accesses what).
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// Read this hwloc XML topology file instead of the live machine.
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// The model's parameters: a parameter file (docs/models/*.json) or a built-in set (amd-quartet-2006).
    #[arg(long, value_name = "FILE|NAME", conflicts_with = "from")]
    params: Option<String>,
    /// Calibrate the parameters from a numalab report of this machine (its results.json): the gain then has an uncertainty.
    #[arg(long, value_name = "RESULTS.json")]
    from: Option<PathBuf>,
    /// Write the plan `numalab run --plan` reads when the best placement gives regions different policies (a profile's).
    #[arg(long, value_name = "FILE")]
    write_plan: Option<PathBuf>,
    /// Run a synthetic workload of the shape with the best placement and with the default, and print measured against predicted.
    #[arg(long, conflicts_with_all = ["topology", "profile"])]
    verify: bool,
    /// With --verify: interleaved rounds of both runs (1 to 20).
    #[arg(long, value_name = "N", default_value = "3", requires = "verify", value_parser = whole(1, 20))]
    rounds: usize,
    /// With --verify: time budget of each measurement, seconds (each run in each round).
    #[arg(long, value_name = "SECONDS", default_value = "0.5", requires = "verify", value_parser = seconds(0.05))]
    budget_each: f64,
    /// With --verify: instruction set (auto: the widest this CPU runs).
    #[arg(long, value_name = "ISA", default_value = "auto", requires = "verify", value_parser = choice(ISAS, isa))]
    isa: Isa,
    #[command(flatten)]
    out: Output,
    /// The program the command lines place, and its arguments (default: CMD).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// What `--json` prints.
#[derive(Serialize)]
struct AdviseResult<'a> {
    /// `builtin:NAME`, the parameter file, `calibrated:RESULTS.json`, or
    /// `none` (one node, no model needed).
    params_from: String,
    params: Option<&'a ModelParams>,
    calibration: Option<&'a Calibration>,
    #[serde(flatten)]
    advice: &'a Advice,
    /// `--write-plan`'s file, when a plan was written.
    plan_written: Option<String>,
    check: Option<AdviceCheck>,
}

/// The model's parameters as asked, where they came from, the calibration
/// and how far to trust them; `None` on a one-node machine given none.
struct Model {
    params: Option<ModelParams>,
    from: String,
    calibration: Option<Calibration>,
    trust: ModelTrust,
}

fn model(a: &Args, m: &Machine) -> Result<Model, CliError> {
    if let Some(path) = &a.from {
        let c = calibrate_file(path, m).map_err(|e| CliError::usage(format!("--from: {e}")))?;
        let trust = trust_of(&c, path);
        return Ok(Model {
            params: Some(c.params.clone()),
            from: format!("calibrated:{}", path.display()),
            calibration: Some(c),
            trust,
        });
    }
    let Some(given) = &a.params else {
        if m.node_ids().len() == 1 {
            return Ok(Model {
                params: None,
                from: "none".into(),
                calibration: None,
                trust: ModelTrust {
                    relative_error: None,
                    basis: "one node: no model is needed".into(),
                },
            });
        }
        return Err(CliError::usage(format!(
            "advise needs the model's parameters on a machine with several nodes: give --from RESULTS.json (a numalab report of this machine) or --params FILE|NAME (built in: {})",
            BUILTIN_NAMES.join(", ")
        )));
    };
    let uncalibrated = |what: String| ModelTrust {
        relative_error: None,
        basis: format!(
            "not calibrated on this machine: {what}; give --from RESULTS.json for an uncertainty"
        ),
    };
    if let Some(p) = builtin(given) {
        let trust = uncalibrated(format!("built-in parameters {given} ({})", p.name));
        return Ok(Model {
            params: Some(p),
            from: format!("builtin:{given}"),
            calibration: None,
            trust,
        });
    }
    let path = PathBuf::from(given);
    if !path.exists() {
        return Err(CliError::usage(format!(
            "--params '{}' is neither a file nor a built-in set; built in: {}",
            format::excerpt(given, 60),
            BUILTIN_NAMES.join(", ")
        )));
    }
    let p = ModelParams::load(&path).map_err(|e| CliError::usage(format!("--params: {e}")))?;
    Ok(Model {
        trust: uncalibrated(format!("parameters from {}", path.display())),
        params: Some(p),
        from: path.display().to_string(),
        calibration: None,
    })
}

/// The model's relative error from a calibration: its mean absolute error
/// over the scaling check, else the mean of the checks' own errors.
fn trust_of(c: &Calibration, path: &Path) -> ModelTrust {
    let checks: Vec<f64> = c
        .scaling
        .iter()
        .map(|s| s.error.abs())
        .filter(|e| e.is_finite())
        .collect();
    let error = c
        .mean_abs_error
        .filter(|e| e.is_finite())
        .or_else(|| (!checks.is_empty()).then(|| checks.iter().sum::<f64>() / checks.len() as f64));
    match error {
        Some(e) => ModelTrust {
            relative_error: Some(e.abs()),
            basis: format!(
                "calibrated from {}: the model's mean absolute error {} over the report's {} scaling check{}",
                path.display(),
                format::percent(e.abs()),
                checks.len(),
                format::s(checks.len())
            ),
        },
        None => ModelTrust {
            relative_error: None,
            basis: format!(
                "calibrated from {}, but the report has nothing to check the model against: no uncertainty",
                path.display()
            ),
        },
    }
}

fn workload(a: &Args) -> Result<Workload, CliError> {
    if let Some(path) = &a.profile {
        let text = numalab::input::read_text(path, numalab::input::InputKind::ResultsJson)
            .map_err(|e| CliError::usage(format!("--profile: {e}")))?;
        let p: Profile = serde_json::from_str(&text).map_err(|e| {
            CliError::usage(format!(
                "--profile {}: not a profile.json numalab profile wrote ({})",
                path.display(),
                format::excerpt(&e.to_string(), 120)
            ))
        })?;
        let w = Workload::from_profile(&p)
            .map_err(|e| CliError::usage(format!("--profile {}: {e}", path.display())))?;
        return Ok(w);
    }
    let (Some(threads), Some(sharing), Some(data)) = (a.threads, a.sharing, a.data) else {
        let missing: Vec<&str> = [
            ("--threads", a.threads.is_none()),
            ("--sharing", a.sharing.is_none()),
            ("--data", a.data.is_none()),
        ]
        .into_iter()
        .filter(|m| m.1)
        .map(|m| m.0)
        .collect();
        return Err(CliError::usage(format!(
            "advise needs the workload: {} missing; give --threads N --sharing independent|shared|producer-consumer --data SIZE [--rw R:W], or --profile FILE",
            missing.join(" and ")
        )));
    };
    let shape = Shape {
        threads,
        sharing,
        data_bytes: data as u64,
        write_share: a.rw.unwrap_or(sharing.default_write_share()),
    };
    Workload::from_shape(&shape).map_err(CliError::usage)
}

pub fn run(a: Args) -> CliResult {
    // Never write over an input, and say so before reading anything.
    if let Some(out) = &a.write_plan {
        let mut inputs: Vec<(&str, &Path)> = Vec::new();
        if let Some(p) = &a.profile {
            inputs.push(("--profile", p));
        }
        if let Some(p) = &a.from {
            inputs.push(("--from", p));
        }
        if let Some(p) = &a.topology {
            inputs.push(("--topology", p));
        }
        if let Some(p) = &a.params {
            inputs.push(("--params", Path::new(p)));
        }
        refuse_overwriting_input("--write-plan", out, &inputs)?;
    }
    let m = load_machine(a.topology.as_deref())?;
    let w = workload(&a)?;
    let model = model(&a, &m)?;
    let mut notes = Vec::new();
    let net = match &model.params {
        None => None,
        Some(p) => match Network::new(&m, p.clone()) {
            Ok(n) => Some(n),
            // On one node every placement is the same memory: parameters
            // of another machine are not needed, only noted.
            Err(e) if m.node_ids().len() == 1 => {
                notes.push(format!(
                    "the parameters ({}) do not describe this machine ({e}); on one node they are not needed",
                    model.from
                ));
                None
            }
            Err(e) => return Err(CliError::usage(format!("advise: {e}"))),
        },
    };
    let program = if a.command.is_empty() {
        w.program.clone()
    } else {
        a.command.clone()
    };
    let cx = CommandContext {
        program,
        plan_path: a
            .write_plan
            .as_ref()
            .map_or(PLAN_PLACEHOLDER.to_string(), |p| p.display().to_string()),
    };
    let mut advice =
        engine::advise(&m, net.as_ref(), &w, &model.trust, &cx).map_err(CliError::usage)?;
    advice.notes.extend(notes);
    let plan_written = match (&a.write_plan, &advice.best.commands.plan) {
        (Some(path), Some(plan)) => {
            let text = serde_json::to_string_pretty(plan)
                .map_err(|e| CliError::failed(format!("cannot encode the plan: {e}")))?;
            write_atomically(path, format!("{text}\n").as_bytes())
                .map_err(|e| CliError::failed(format!("--write-plan {}: {e}", path.display())))?;
            Some(path.display().to_string())
        }
        (Some(path), None) => {
            advice.warnings.push(format!(
                "--write-plan {}: nothing written: the best placement gives the whole process one policy (the command line says it)",
                path.display()
            ));
            None
        }
        _ => None,
    };
    let check = if a.verify {
        write_stderr(format_args!(
            "advise --verify: running the best placement and the default, {}\n",
            format::plural(a.rounds, "round", "rounds")
        ));
        let progress = Progress::bar(2 * a.rounds as u64, "advise --verify");
        let req = VerifyRequest {
            isa: a.isa,
            rounds: a.rounds,
            budget_each: Duration::from_secs_f64(a.budget_each),
        };
        let c = engine::verify(&m, net.as_ref(), &advice, &req, &mut |what| {
            progress.step(what)
        });
        progress.finish();
        Some(c?)
    } else {
        None
    };
    if a.out.json {
        print_result(
            "advise",
            &AdviseResult {
                params_from: model.from.clone(),
                params: model.params.as_ref(),
                calibration: model.calibration.as_ref(),
                advice: &advice,
                plan_written,
                check,
            },
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    out!(
        "{}",
        text(
            &m,
            &advice,
            &model.from,
            a.out.units,
            plan_written.as_deref()
        )
    )?;
    if let Some(c) = &check {
        out!("{}", check_text(c, a.out.units))?;
        print_warnings(&c.warnings)?;
    }
    print_warnings(&advice.warnings)?;
    Ok(ExitCode::SUCCESS)
}

fn seconds_text(s: f64) -> String {
    if s >= 1.0 {
        format!("{} s", format::significant(s, 3))
    } else {
        format!("{} ms", format::significant(s * 1e3, 3))
    }
}

fn gbps(units: Units, g: f64) -> String {
    format!(
        "{} {}",
        format::significant(units.convert(g), 3),
        units.label()
    )
}

/// Where each thread runs, in words: `CPUs 0,2,4,6 (nodes 0,1,2,3)`.
fn threads_text(c: &Candidate) -> String {
    let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let pin = if c.threads.pinned {
        ", pinned to"
    } else {
        ": modelled on"
    };
    format!(
        "{}{pin} CPUs {} (nodes {})",
        c.threads.name,
        list(&c.threads.cpus),
        list(&c.threads.nodes)
    )
}

fn pages_text(pages: &[(u32, f64)]) -> String {
    pages
        .iter()
        .map(|(n, s)| format!("node {n} {}", format::percent(*s)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn predicted_text(c: &Candidate, units: Units) -> String {
    match &c.predicted {
        None => "not predicted (no model)".into(),
        Some(p) => {
            let neck = match (&p.bottleneck, p.bottleneck_utilisation) {
                (Some(b), Some(u)) => format!("; busiest: {b} at {}", format::percent(u)),
                _ => String::new(),
            };
            format!(
                "{} a pass ({}){neck}",
                seconds_text(p.seconds),
                gbps(units, p.gbps)
            )
        }
    }
}

/// One placement in full: threads, pages, prediction, command lines.
fn candidate_text(title: &str, c: &Candidate, units: Units, lines: bool) -> String {
    let mut s = format!("{title}: {}\n", c.name);
    s += &format!("  threads    {}\n", threads_text(c));
    for (i, r) in c.memory.iter().enumerate() {
        let label = if i == 0 { "memory" } else { "" };
        let region = if c.memory.len() == 1 {
            String::new()
        } else {
            format!(" for {}", format::excerpt(&r.region, 60))
        };
        s += &format!(
            "  {label:<10} {}{region} ({})\n",
            r.policy,
            pages_text(&r.pages)
        );
    }
    s += &format!("  predicted  {}\n", predicted_text(c, units));
    if let Some(n) = &c.needs {
        s += &format!("  needs      {n}\n");
    }
    for p in &c.problems {
        s += &format!("  problem    {p}\n");
    }
    if lines {
        s += &format!("  numalab    {}\n", c.commands.numalab);
        match &c.commands.numactl {
            Some(n) => s += &format!("  numactl    {n}\n"),
            None => s += "  numactl    cannot express it\n",
        }
        if let Some(n) = &c.commands.numactl_note {
            s += &format!("             ({n})\n");
        }
    }
    s
}

fn text(m: &Machine, a: &Advice, from: &str, units: Units, plan: Option<&str>) -> String {
    let mut s = String::new();
    s += &format!("Workload: {}\n", a.workload.description);
    let source = match &m.source {
        Source::Live => "this machine (live)".to_string(),
        Source::File { path } => format!("file {}", path.display()),
    };
    s += &format!(
        "Machine: {source}, {} node{}; model: {from}\n",
        m.node_ids().len(),
        format::s(m.node_ids().len())
    );
    s += &format!("Predicted time: {}\n\n", a.time_basis);
    s += &candidate_text("Advice", &a.best, units, true);
    let g = &a.gain;
    let range = match (g.low, g.high) {
        (Some(lo), Some(hi)) if !a.single_node => format!(
            " (between {}x and {}x: {})",
            format::fixed(lo, 2),
            format::fixed(hi, 2),
            g.verdict
        ),
        _ => String::new(),
    };
    s += &format!(
        "  gain       {}x over the OS default{range}\n             uncertainty: {}\n",
        format::fixed(g.ratio, 2),
        g.basis
    );
    if let Some(p) = &a.best.commands.plan {
        match plan {
            Some(path) => s += &format!("  plan       written to {path} ({} entries)\n", p.entries.len()),
            None => s += &format!(
                "  plan       {} entries: write it with --write-plan FILE (or take it from --json's best.commands.plan)\n",
                p.entries.len()
            ),
        }
    }
    s += "\n";
    if let Some(r) = &a.runner_up {
        let vs = r
            .vs_best
            .map(|v| format!(" ({}x the best's time)", format::fixed(v, 2)))
            .unwrap_or_default();
        s += &candidate_text(&format!("Runner-up{vs}"), r, units, true);
        s += "\n";
    }
    s += &candidate_text("Default", &a.default, units, false);
    s += "\n";
    s += "Candidates (predicted, the advice first, then fastest first)\n";
    s += &format!(
        "  {:>4}  {:<40}  {:>10}  {:>12}  {:>8}  {}\n",
        "rank",
        "placement",
        "time",
        units.label(),
        "vs best",
        "busiest resource"
    );
    for (i, c) in a.candidates.iter().enumerate() {
        let (t, g, neck) = match &c.predicted {
            Some(p) => (
                seconds_text(p.seconds),
                format::significant(units.convert(p.gbps), 3),
                match (&p.bottleneck, p.bottleneck_utilisation) {
                    (Some(b), Some(u)) => format!("{b} {}", format::percent(u)),
                    _ => String::new(),
                },
            ),
            None => ("-".into(), "-".into(), String::new()),
        };
        let vs = c
            .vs_best
            .map_or("-".into(), |v| format!("{}x", format::fixed(v, 2)));
        let mark = if c.fits { "" } else { "  (does not fit)" };
        let row = format!(
            "  {:>4}  {:<40}  {:>10}  {:>12}  {:>8}  {neck}{mark}",
            i + 1,
            format::excerpt(&c.name, 40),
            t,
            g,
            vs
        );
        s += row.trim_end();
        s += "\n";
    }
    for n in &a.notes {
        s += &format!("note: {n}\n");
    }
    s
}

fn check_text(c: &AdviceCheck, units: Units) -> String {
    let mut s = format!(
        "\nVerify (this machine: kernel {}, {} a worker's array, {} round{}, pages checked with the kernel)\n",
        c.kernel.name(),
        format::bytes(c.buffer_bytes),
        c.rounds,
        format::s(c.rounds)
    );
    s += &format!(
        "  {:<8}  {:<40}  {:>16}  {:>16}  {}\n",
        "run",
        "placement",
        format!("predicted {}", units.label()),
        format!("measured {}", units.label()),
        "pages"
    );
    for r in &c.runs {
        let pred = r
            .predicted_gbps
            .map_or("-".into(), |g| format::significant(units.convert(g), 3));
        s += &format!(
            "  {:<8}  {:<40}  {:>16}  {:>16}  {}\n",
            r.role,
            format::excerpt(&r.name, 40),
            pred,
            format::significant(units.convert(r.measured_gbps), 3),
            if r.verified {
                "as placed"
            } else {
                "NOT as placed"
            }
        );
    }
    let test = c
        .comparison
        .as_ref()
        .map(|t| format!("; rank test {}", t.describe()))
        .unwrap_or_default();
    s += &format!(
        "  gain (best over default): predicted {}x, measured {}x{test}; the best is faster: {}\n",
        format::fixed(c.predicted_gain, 2),
        format::fixed(c.measured_gain, 2),
        c.verdict.words()
    );
    for n in &c.notes {
        s += &format!("note: {n}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_safe_placeholders() {
        assert_eq!(PLAN_PLACEHOLDER, "advise-plan.json");
        assert_eq!(seconds_text(0.0123), "12.3 ms");
        assert_eq!(seconds_text(2.5), "2.5 s");
    }
}
