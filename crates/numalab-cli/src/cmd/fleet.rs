//! `numalab fleet`: one `numalab report` on every node of a Slurm
//! allocation, gathered into one fleet (per key figure the median, spread
//! and outliers; per setting the values nodes differ in; per node a
//! verdict); a fleet re-read, checked against a baseline, or compared with
//! another.

use crate::args::{percent, seconds, size};
use crate::output::{errln, out, print_result, print_versioned_result, CliError, CliResult};
use numalab::cluster::{hostlist, slurm};
use numalab::measure::cancel;
use numalab_report::files::write_atomically;
use numalab_report::fleet::{
    self, compare as fleet_compare, Baseline, Fleet as FleetDoc, Verdict, FLEET_CSV, FLEET_FILE,
    FLEET_HTML, FLEET_SCHEMA, FLEET_TEXT, LOGS_DIR, NODES_DIR,
};
use numalab_report::registry::REPORT;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Subcommand)]
pub enum FleetCommand {
    /// Run `numalab report` on every node through srun (one task per node) and gather the fleet.
    Report(ReportArgs),
    /// Gather a fleet directory again (after Ctrl-C, or nodes reported by hand) and write fleet.*.
    Summarize(SummarizeArgs),
    /// Check every node of a fleet against a baseline; exit 3 when a node does not conform.
    Check(CheckArgs),
    /// Two fleets (before and after a change): per key figure the medians and a paired sign test.
    Compare(CompareArgs),
}

#[derive(clap::Args)]
#[command(
    after_help = "DIR must be on a filesystem every node shares: each node writes DIR/nodes/NODE/ (its report) and DIR/logs/NODE.log and NODE.exit_status. Nodes that fail, time out or never start are listed with the reason; the others still report. Ctrl-C stops every node's report (each keeps what it measured) and gathers what arrived. Exit codes: 0 every node conforms, 1 no node reported, 2 bad input, 3 some node does not conform, 130/143 interrupted. See docs/fleet.md."
)]
pub struct ReportArgs {
    /// The fleet directory (shared by every node).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    output: PathBuf,
    /// Each node's report with --quick.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// Each node's report with --full.
    #[arg(long)]
    full: bool,
    /// Each node's report's parts (as `numalab report --parts`).
    #[arg(long, value_name = "LIST")]
    parts: Option<String>,
    /// Each node's report's bytes per buffer, 1M to 128T (its `numalab report --size`; default each node's own, 4x its last-level cache). One size for every node keeps their figures comparable where the nodes' caches differ.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = size(1 << 20, "the memory-bound measurements need buffers well beyond the caches; default 4x each node's last-level cache"))]
    size: Option<usize>,
    /// Each node's report budget, in seconds (its `numalab report --budget`; the whole command is bounded by --timeout).
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = seconds(1.0))]
    node_budget: Option<f64>,
    /// Nodes to ask for (or to use, within an allocation).
    #[arg(short = 'N', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    nodes: Option<u32>,
    /// Slurm partition.
    #[arg(short = 'p', long, value_name = "NAME")]
    partition: Option<String>,
    /// Exactly these nodes (a Slurm host list, e.g. cn[01-16]), as srun -w.
    #[arg(short = 'w', long, value_name = "LIST")]
    nodelist: Option<String>,
    /// Stop nodes still measuring after this many seconds (default: 4x --node-budget + 120 s, or 3600 s).
    #[arg(long, value_name = "SECONDS", value_parser = seconds(10.0))]
    timeout: Option<f64>,
    /// Judge nodes against this node's results.json or fleet.json instead of against each other.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// With --baseline: how far a key figure may be from the baseline's, in percent (default 10).
    #[arg(long, value_name = "PERCENT", requires = "baseline", value_parser = percent())]
    tolerance: Option<f64>,
    /// Measure again into a fleet directory that already holds one.
    #[arg(long)]
    force: bool,
    /// The srun to use (default: srun on PATH).
    #[arg(long, value_name = "PATH", default_value = "srun")]
    srun: PathBuf,
    /// The numalab binary at the same path on every node (default: this one).
    #[arg(long, value_name = "PATH")]
    numalab: Option<PathBuf>,
    /// Print fleet.json instead of the text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct SummarizeArgs {
    /// The fleet directory (DIR/nodes/NODE/results.json).
    dir: PathBuf,
    /// Judge nodes against this node's results.json or fleet.json.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// With --baseline: tolerance for key figures, in percent (default 10).
    #[arg(long, value_name = "PERCENT", requires = "baseline", value_parser = percent())]
    tolerance: Option<f64>,
    /// Print fleet.json instead of the text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The fleet directory.
    dir: PathBuf,
    /// The reference: a known-good node's results.json, or a fleet.json (its majorities and medians).
    #[arg(long, value_name = "FILE", required = true)]
    baseline: PathBuf,
    /// Tolerance for key figures, in percent (default 10).
    #[arg(long, value_name = "PERCENT", value_parser = percent())]
    tolerance: Option<f64>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// The first fleet: a fleet directory or its fleet.json.
    a: PathBuf,
    /// The second fleet.
    b: PathBuf,
    /// Print the comparison as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(f: FleetCommand) -> CliResult {
    match f {
        FleetCommand::Report(a) => report(a),
        FleetCommand::Summarize(a) => {
            let base = baseline(a.baseline.as_deref(), a.tolerance)?;
            let fl = gather(&a.dir, &[], "", base.as_ref())?;
            write_fleet(&a.dir, &fl)?;
            show(&fl, a.json)
        }
        FleetCommand::Check(a) => {
            let base = baseline(Some(&a.baseline), a.tolerance)?;
            let fl = gather(&a.dir, &[], "", base.as_ref())?;
            show(&fl, a.json)
        }
        FleetCommand::Compare(a) => {
            let (x, y) = (load(&a.a)?, load(&a.b)?);
            let c = fleet_compare::compare(&x, &y);
            if a.json {
                print_result("fleet", &c)?;
            } else {
                out!("{}", fleet_compare::render_text(&c))?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn baseline(path: Option<&Path>, tolerance: Option<f64>) -> Result<Option<Baseline>, CliError> {
    let Some(p) = path else { return Ok(None) };
    let text = numalab::input::read_text(p, numalab::input::InputKind::ResultsJson)
        .map_err(|e| CliError::usage(format!("--baseline {e}")))?;
    // `percent()` gives a fraction already.
    let tol = tolerance.unwrap_or(fleet::DEFAULT_TOLERANCE);
    Baseline::parse(&text, &p.display().to_string(), tol)
        .map(Some)
        .map_err(|e| CliError::usage(format!("--baseline {}: {e}", p.display())))
}

fn gather(
    dir: &Path,
    expected: &[String],
    missing_why: &str,
    base: Option<&Baseline>,
) -> Result<FleetDoc, CliError> {
    fleet::gather(dir, expected, missing_why)
        .map(|b| b.finish(base))
        .map_err(CliError::usage)
}

/// A fleet from a directory (its nodes gathered afresh) or a fleet.json.
fn load(p: &Path) -> Result<FleetDoc, CliError> {
    if p.is_dir() {
        return gather(p, &[], "", None);
    }
    let text = numalab::input::read_text(p, numalab::input::InputKind::ResultsJson)
        .map_err(|e| CliError::usage(e.to_string()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("{}: does not read: {e}", p.display())))?;
    if v.get("schema").and_then(|s| s.as_str()) != Some(FLEET_SCHEMA) {
        return Err(CliError::usage(format!(
            "{} is not a fleet (no \"schema\": \"{FLEET_SCHEMA}\"); give a fleet directory or its {FLEET_FILE}",
            p.display()
        )));
    }
    serde_json::from_value(v)
        .map_err(|e| CliError::usage(format!("{}: does not read as a fleet: {e}", p.display())))
}

/// Writes fleet.json, .html, .txt and .csv into `dir`, never over a
/// fleet.json numalab did not write.
fn write_fleet(dir: &Path, f: &FleetDoc) -> Result<(), CliError> {
    let old = dir.join(FLEET_FILE);
    if let Ok(text) = std::fs::read_to_string(&old) {
        let ours = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .is_some_and(|v| v.get("schema").and_then(|s| s.as_str()) == Some(FLEET_SCHEMA));
        if !ours {
            return Err(CliError::usage(format!(
                "{} is not a fleet numalab wrote: it is left as it is; move it away to gather this directory",
                old.display()
            )));
        }
    }
    let json = serde_json::to_string_pretty(f)
        .map_err(|e| CliError::failed(format!("cannot encode JSON: {e}")))?;
    for (name, text) in [
        (FLEET_FILE, json),
        (FLEET_HTML, fleet::render_html(f)),
        (FLEET_TEXT, fleet::render_text(f)),
        (FLEET_CSV, fleet::render_csv(f)),
    ] {
        let p = dir.join(name);
        write_atomically(&p, text.as_bytes())
            .map_err(|e| CliError::failed(format!("cannot write {}: {e}", p.display())))?;
    }
    Ok(())
}

/// Prints the fleet; exit 3 when a node does not conform.
fn show(f: &FleetDoc, json: bool) -> CliResult {
    if json {
        print_versioned_result("fleet", f)?;
    } else {
        out!("{}", fleet::render_text(f))?;
    }
    Ok(if f.reported == 0 {
        ExitCode::FAILURE
    } else if f.nodes.iter().all(|n| n.verdict == Verdict::Conforms) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

/// Refuses a fleet directory that holds something else, or a fleet
/// without --force.
fn claim(dir: &Path, force: bool) -> Result<(), CliError> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return std::fs::create_dir_all(dir).map_err(|e| {
            CliError::failed(format!(
                "cannot create the fleet directory {}: {e}",
                dir.display()
            ))
        });
    };
    let ours = [
        NODES_DIR, LOGS_DIR, FLEET_FILE, FLEET_HTML, FLEET_TEXT, FLEET_CSV,
    ];
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .take(100)
        .collect();
    names.sort();
    if names.is_empty() {
        return Ok(());
    }
    if let Some(other) = names.iter().find(|n| !ours.contains(&n.as_str())) {
        return Err(CliError::usage(format!(
            "-o {} holds {other}, which numalab fleet did not write: give an empty or new directory",
            dir.display()
        )));
    }
    if !force {
        return Err(CliError::usage(format!(
            "-o {} already holds a fleet: give --force to measure again (each node's report is replaced), or `numalab fleet summarize {}` to gather it again",
            dir.display(),
            dir.display()
        )));
    }
    Ok(())
}

fn report(a: ReportArgs) -> CliResult {
    if let Some(p) = &a.parts {
        REPORT
            .parse_list(p)
            .map_err(|e| CliError::usage(format!("--parts: {e}")))?;
    }
    if let Some(l) = &a.nodelist {
        hostlist::expand(l).map_err(|e| CliError::usage(format!("--nodelist: {e}")))?;
    }
    let base = baseline(a.baseline.as_deref(), a.tolerance)?;
    let numalab = match &a.numalab {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| CliError::failed(format!("cannot tell this numalab's path: {e}")))?,
    };
    claim(&a.output, a.force)?;
    // Absolute: every node resolves it from its own working directory.
    let dir = std::fs::canonicalize(&a.output)
        .map_err(|e| CliError::failed(format!("fleet directory {}: {e}", a.output.display())))?;
    let mut report_args = Vec::new();
    if a.quick {
        report_args.push("--quick".to_string());
    }
    if a.full {
        report_args.push("--full".to_string());
    }
    if let Some(p) = &a.parts {
        report_args.extend(["--parts".to_string(), p.clone()]);
    }
    if let Some(b) = a.size {
        report_args.extend(["--size".to_string(), b.to_string()]);
    }
    if let Some(b) = a.node_budget {
        report_args.extend(["--budget".to_string(), b.to_string()]);
    }
    if a.force {
        report_args.push("--force".to_string());
    }
    let timeout = a
        .timeout
        .unwrap_or_else(|| a.node_budget.map_or(3600.0, |b| 4.0 * b + 120.0));
    let allocation = match slurm::allocation() {
        Some(Ok(al)) => Some(al),
        Some(Err(e)) => return Err(CliError::usage(e)),
        None => None,
    };
    // The nodes expected to report, where known before srun runs.
    let expected: Vec<String> = match (&a.nodelist, &allocation, a.nodes) {
        (Some(l), _, _) => hostlist::expand(l).unwrap_or_default(),
        (None, Some(al), None) => al.nodes.clone(),
        _ => Vec::new(),
    };
    let nodes = match (a.nodes, &allocation, &a.nodelist) {
        (Some(n), _, _) => Some(n as usize),
        (None, Some(al), None) => Some(al.nodes.len()),
        _ => None,
    };
    let step = slurm::FleetStep {
        srun: a.srun.clone(),
        nodes,
        partition: a.partition.clone(),
        nodelist: a.nodelist.clone(),
        time_limit_min: Some((timeout / 60.0).ceil() as u64 + 1),
        fleet_dir: dir.clone(),
        numalab,
        report_args,
        in_allocation: allocation.is_some(),
    };
    let status = run_step(&step, timeout)?;
    let missing = format!(
        "never started: no log arrived from it ({})",
        match &status {
            StepEnd::Exited(Some(0)) => "srun exited 0".to_string(),
            StepEnd::Exited(Some(c)) => format!("srun exited with status {c}"),
            StepEnd::Exited(None) => "srun was killed by a signal".to_string(),
            StepEnd::TimedOut => format!("stopped after the {timeout:.0} s timeout"),
            StepEnd::Interrupted => "interrupted".to_string(),
        }
    );
    let fl = gather(&dir, &expected, &missing, base.as_ref())?;
    write_fleet(&dir, &fl)?;
    errln!(
        "fleet: {} of {} nodes reported; {} written",
        fl.reported,
        fl.nodes_total,
        dir.join(FLEET_HTML).display()
    );
    let code = show(&fl, a.json)?;
    if matches!(status, StepEnd::Interrupted) {
        return Ok(ExitCode::from(cancel::signal_exit_code()));
    }
    Ok(code)
}

enum StepEnd {
    Exited(Option<i32>),
    TimedOut,
    Interrupted,
}

/// Runs the job step until it ends, the timeout passes or the user
/// interrupts; then stops it (SIGTERM, which srun hands to every task:
/// each report keeps what it measured) and waits for it, at most a minute
/// before SIGKILL.
fn run_step(step: &slurm::FleetStep, timeout: f64) -> Result<StepEnd, CliError> {
    cancel::request_on_signals()
        .map_err(|e| CliError::failed(format!("cannot handle Ctrl-C: {e}")))?;
    let mut child = step.command().spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CliError::failed(format!(
                "{} not found: numalab fleet report runs on a Slurm cluster (install slurm-client, or run `numalab report -o DIR/nodes/NODE` on each node and `numalab fleet summarize DIR`)",
                step.srun.display()
            ))
        } else {
            CliError::failed(format!("cannot start {}: {e}", step.srun.display()))
        }
    })?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(timeout);
    let mut ended: Option<StepEnd> = None;
    let mut stop_sent: Option<Instant> = None;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                return Ok(ended.unwrap_or(StepEnd::Exited(st.code())));
            }
            Ok(None) => {}
            Err(e) => return Err(CliError::failed(format!("waiting for srun: {e}"))),
        }
        let now = Instant::now();
        if ended.is_none() && (cancel::requested() || now >= deadline) {
            ended = Some(if cancel::requested() {
                StepEnd::Interrupted
            } else {
                StepEnd::TimedOut
            });
            errln!("fleet: stopping every node's report (each keeps what it measured)");
            signal(&child, nix::sys::signal::Signal::SIGTERM);
            stop_sent = Some(now);
        }
        if stop_sent.is_some_and(|t| now.duration_since(t) > Duration::from_secs(60)) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn signal(child: &std::process::Child, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, sig);
}
