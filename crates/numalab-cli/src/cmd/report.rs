//! `numalab report`: the full characterization of a machine, within a time
//! budget, as DIR/results.json, one CSV per table and a self-contained
//! DIR/report.html. Interrupted or failing half way, it keeps what it
//! measured; `--resume` measures only what is missing.

use crate::args::{choice, seconds, size};
use crate::output::{errln, out, outln};
use crate::output::{folder_of, load_machine, same_file, CliError, CliResult};
use numalab::measure::cancel;
use numalab::measure::environment::Environment;
use numalab::measure::harness::default_buffer_bytes;
use numalab::measure::kernels::Isa;
use numalab::text::format::bytes as format_bytes;
use numalab::Machine;
use numalab_report::budget::{dry_run as plan_report, effective_budget, probe};
use numalab_report::files::{
    claim_dir, holder, is_own_name, is_report_dir, read_dir, remove_stale, report_files, write_dir,
    ClaimError, ReportDir, HTML_FILE, LOCK_FILE, RESULTS_FILE, TEXT_FILE,
};
use numalab_report::model::PartName;
use numalab_report::model::{CostSource, Costs};
use numalab_report::part::Progress as PartProgress;
use numalab_report::plan::{default_budget, home_cpu, PlanEnv};
use numalab_report::registry::REPORT;
use numalab_report::results::{Mode, PartStatus, ReportResults};
use numalab_report::session::{self, Observer, RunOutcome};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
#[command(after_help = after_help())]
pub struct Args {
    /// Directory for results.json, the CSV files and report.html.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        default_value = "numalab-report"
    )]
    output: PathBuf,
    /// A third of the default budget: fewer sizes, one traffic mix.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// Four times the default budget: every size, every mix, every scenario of the study.
    #[arg(long)]
    full: bool,
    /// Time budget of the whole command, in seconds (1 to 604800, one week; default: by machine size and mode).
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = seconds(1.0))]
    budget: Option<f64>,
    /// Describe the machine of this hwloc XML file (no measurement: the report says which parts need the machine).
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// Complete the report in DIR: measure only the parts it is missing.
    #[arg(long)]
    resume: bool,
    /// Overwrite a report already in DIR.
    #[arg(long, conflicts_with = "resume")]
    force: bool,
    /// Only these parts (comma-separated; matrix, loaded-latency and sweeps name both of a kind; default all).
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = choice(&["all", "matrix", "loaded-latency", "sweeps", "PART"], part_list))]
    parts: PartList,
    /// Bytes per buffer of the memory-bound measurements, 1M to 128T (default: 4x the last-level cache, at least 64M).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = size(1 << 20, "the memory-bound measurements need buffers well beyond the caches; default 4x the last-level cache"))]
    size: Option<usize>,
    /// Print the plan (per part: its work and predicted seconds) and exit without measuring or writing anything.
    #[arg(long)]
    dry_run: bool,
    /// With --dry-run: print the plan as JSON.
    #[arg(long, requires = "dry_run")]
    json: bool,
    /// With --dry-run: plan with these reference costs instead of probing the live machine (a topology file uses reference-vm).
    #[arg(long, value_name = "PRESET", requires = "dry_run", value_parser = choice(Costs::PRESETS, costs_preset))]
    costs: Option<Costs>,
}

fn costs_preset(t: &str) -> Result<Costs, String> {
    Costs::preset(t).ok_or_else(|| {
        format!(
            "unknown cost preset '{t}'; valid: {}",
            Costs::PRESETS.join(", ")
        )
    })
}

/// The help's epilogue: the parts (from the registry), the budget, signals
/// and exit codes.
fn after_help() -> String {
    format!(
        "Parts (run in this order): {}. \
The default budget is 80 s on a one-node machine plus 40 s per further memory node (at most 300 s); --quick takes a third of it, --full four times. \
Ctrl-C (or SIGTERM) stops the report and keeps what was measured; a second Ctrl-C kills it at once. \
Exit codes: 0 done (parts skipped for the budget are listed), 1 a part failed or the report could not be written, 2 bad input, 3 some placement did not verify, 130/143 interrupted. See docs/report.md.",
        REPORT.all()
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The parts `--parts` names, in run order.
#[derive(Clone)]
struct PartList(Vec<PartName>);

fn part_list(t: &str) -> Result<PartList, String> {
    REPORT.parse_list(t).map(PartList)
}

fn mode_of(a: &Args) -> Mode {
    if a.quick {
        Mode::Quick
    } else if a.full {
        Mode::Full
    } else {
        Mode::Default
    }
}

/// Progress on stderr: a bar on a terminal, one line per part otherwise.
struct Progress {
    dir: PathBuf,
    bar: Option<indicatif::ProgressBar>,
    start: Instant,
    budget: f64,
    save_error: Option<String>,
}

impl Progress {
    /// The budget the bar measures against (raised, or not, once the costs
    /// are known).
    fn set_budget(&mut self, budget: f64) {
        self.budget = budget;
        if let Some(b) = &self.bar {
            b.set_length((budget * 10.0).ceil() as u64);
        }
    }

    fn new(dir: &Path, budget: f64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let pb = indicatif::ProgressBar::new((budget * 10.0).ceil() as u64);
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("report [{bar:30}] {elapsed}/{msg}")
            {
                pb.set_style(style.progress_chars("=> "));
            }
            pb.enable_steady_tick(std::time::Duration::from_millis(200));
            pb
        });
        Progress {
            dir: dir.to_path_buf(),
            bar,
            start: Instant::now(),
            budget,
            save_error: None,
        }
    }

    fn say(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => errln!("{line}"),
        }
    }

    fn tick(&self, msg: String) {
        if let Some(b) = &self.bar {
            let t = self.start.elapsed().as_secs_f64();
            b.set_position(((t * 10.0) as u64).min(b.length().unwrap_or(0)));
            b.set_message(format!("{:.0}s {msg}", self.budget));
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl PartProgress for Progress {
    fn step(&mut self, part: PartName, what: &str) {
        self.tick(format!("{}: {what}", part.name()));
    }
}

impl Observer for Progress {
    fn calibrating(&mut self) {
        self.tick("calibrating".into());
    }

    fn part_started(&mut self, part: PartName, index: usize, count: usize, budget_s: f64) {
        self.say(&format!(
            "report: [{}/{count}] {} ({budget_s:.1} s)",
            index + 1,
            part.name()
        ));
        self.tick(part.name().into());
    }

    fn part_ended(&mut self, doc: &ReportResults, part: PartName) {
        let m = doc.parts.get(part);
        if m.status != PartStatus::Done {
            self.say(&format!(
                "report: {}: {}",
                part.name(),
                m.reason.as_deref().unwrap_or(m.status.name())
            ));
        }
        if let Err(e) = write_dir(&self.dir, doc) {
            // Keep measuring: the next save may work; the end reports it.
            self.save_error = Some(format!("writing {}: {e}", self.dir.display()));
        }
    }
}

/// Refuses to resume a report of another machine (it would mix machines).
fn check_same_machine(doc: &ReportResults, m: &Machine, dir: &Path) -> Result<(), CliError> {
    if !doc.machine.is_live() {
        return Err(CliError::usage(format!(
            "{} describes a topology file, not this machine: there is nothing to measure or resume; make a new report with -o",
            dir.join(RESULTS_FILE).display()
        )));
    }
    let host_now = Environment::capture().hostname;
    // A report stopped before its first part has no environment yet: it
    // measured nothing, so only the machine's shape can tell.
    let host_then = doc
        .environment
        .as_ref()
        .map_or_else(|| host_now.clone(), |e| e.hostname.clone());
    let shape = |x: &Machine| {
        (
            x.nodes
                .iter()
                .map(|n| (n.os_index, n.cpus.to_string()))
                .collect::<Vec<_>>(),
            x.allowed_cpus.to_string(),
            x.allowed_nodes.to_string(),
        )
    };
    if host_then != host_now || shape(&doc.machine) != shape(m) {
        return Err(CliError::usage(format!(
            "{} was measured on {} ({} node(s), CPUs {}), this is {} ({} node(s), CPUs {}): resuming would mix two machines; make a new report with another -o",
            dir.join(RESULTS_FILE).display(),
            if host_then.is_empty() { "another host" } else { &host_then },
            doc.machine.nodes.len(),
            doc.machine.allowed_cpus,
            host_now,
            m.nodes.len(),
            m.allowed_cpus
        )));
    }
    Ok(())
}

pub fn run(a: Args) -> CliResult {
    if a.dry_run {
        return dry_run(&a);
    }
    if let Some(h) = holder(&a.output) {
        return Err(busy(&a.output, &h));
    }
    check_output(&a)?;
    let dir = a.output.clone();
    let m = load_machine(a.topology.as_deref())?;
    // Before the claim: from the moment the lock names this run, Ctrl-C or
    // SIGTERM ends it through the measuring loop, which keeps a whole
    // report; a signal between the claim and the first part would
    // otherwise kill it with nothing saved.
    cancel::reset();
    cancel::request_on_signals()
        .map_err(|e| CliError::failed(format!("cannot handle Ctrl-C and SIGTERM: {e}")))?;
    // Held to the end of the run (and released by the kernel however the
    // process ends): a second report into DIR is refused, naming this one.
    let held = claim(&a)?;
    // Again under the lock: a run that just ended may have left a report.
    check_output(&a)?;
    // --force replaces a report numalab made there; its files the new one
    // does not write go once the new one is saved (a failed save keeps it).
    let old_files = if a.force && held.was_report() {
        report_files(&dir)
    } else {
        Vec::new()
    };
    if a.topology.is_some() {
        return topology_report(&a, &m, &old_files);
    }
    let (mut doc, budget) = if a.resume {
        match resumed(&a, &m)? {
            Some(x) => x,
            None => return Ok(ExitCode::SUCCESS),
        }
    } else {
        new_report(&a, &m)
    };
    // The directory must be writable before anything is measured.
    let written = save(&dir, &doc)?;
    remove_old(&dir, &old_files, &written)?;

    let mut progress = Progress::new(&dir, budget);
    // The operations' costs on this machine, then the budget the parts'
    // smallest forms need: a default budget grows to it, a given one is
    // kept with a warning.
    let t_probe = Instant::now();
    let todo = session::parts_to_measure(&doc);
    let costs = if todo.is_empty() {
        Costs::reference()
    } else {
        progress.calibrating();
        probe(&m, home_cpu(&m).unwrap_or(0))
    };
    let env = PlanEnv {
        m: &m,
        mode: doc.mode,
        size: doc.buffer_bytes as usize,
        costs: &costs,
        live: true,
    };
    let asked = a.budget.or((a.resume).then_some(budget));
    let (budget, warning) = effective_budget(&REPORT, &env, &todo, asked);
    if let Some(w) = &warning {
        errln!("numalab: warning: {w}");
    }
    if doc.runs.is_empty() {
        doc.budget_s = budget;
    }
    progress.set_budget(budget);

    // Recorded lossily: an argument that is not UTF-8 (a path) must not
    // stop the report.
    let command_line: Vec<String> = std::env::args_os()
        .map(|x| x.to_string_lossy().into_owned())
        .collect();
    let settings = session::RunSettings {
        budget_s: budget,
        started: t_probe,
        costs,
        isa: Isa::detect_best(),
        command_line,
        warnings: warning.into_iter().collect(),
    };
    let outcome = session::run(&REPORT, &m, &mut doc, settings, &mut progress);
    progress.finish();
    let written = save(&dir, &doc)?;
    if let Some(e) = progress.save_error {
        errln!("numalab: warning: {e} (saved at the end)");
    }
    print_summary(&doc, &dir, &written)?;
    Ok(exit_code(&doc, outcome, &dir))
}

/// Refuses option combinations and output directories that cannot work,
/// before anything is read or measured.
fn check_output(a: &Args) -> Result<(), CliError> {
    let dir = &a.output;
    let existing = dir.join(RESULTS_FILE).exists() && is_report_dir(dir);
    if a.topology.is_some() {
        if a.resume || a.budget.is_some() || a.size.is_some() {
            return Err(CliError::usage(
                "--topology describes a machine from a file and measures nothing: --resume, --budget and --size need the live machine",
            ));
        }
        if existing && !a.force {
            return Err(CliError::usage(format!(
                "{} already holds a report: --force overwrites it, or choose another -o DIR",
                dir.display()
            )));
        }
    } else if !a.resume && existing && !a.force {
        return Err(CliError::usage(format!(
            "{} already holds a report: --resume completes it, --force overwrites it, or choose another -o DIR",
            dir.display()
        )));
    }
    if a.resume && !dir.join(RESULTS_FILE).exists() {
        // Refused here, before the directory is claimed (and made).
        return Err(CliError::usage(format!(
            "--resume: {} holds no report ({} is missing); run without --resume to start one",
            dir.display(),
            dir.join(RESULTS_FILE).display()
        )));
    }
    if dir.exists() && !dir.is_dir() {
        return Err(CliError::usage(format!(
            "-o {}: not a directory",
            dir.display()
        )));
    }
    if let Some(t) = &a.topology {
        let written_there = t
            .file_name()
            .is_some_and(|n| is_own_name(&n.to_string_lossy()))
            && same_file(folder_of(t), dir);
        if written_there {
            return Err(CliError::usage(format!(
                "--topology {} is in -o {}, under a name the report writes: numalab never writes over an input; copy the file elsewhere or choose another -o DIR",
                t.display(),
                dir.display()
            )));
        }
    }
    Ok(())
}

/// `dir` is being written by another run: a failure (exit 1), not bad input.
fn busy(dir: &Path, holder: &str) -> CliError {
    CliError::failed(format!(
        "-o {} is in use by another numalab report ({holder}): wait for it to end, or choose another -o DIR",
        dir.display()
    ))
}

/// Claims the output directory for this run: one line naming the foreign
/// files (bad input) or the run that holds it (a failure).
fn claim(a: &Args) -> Result<ReportDir, CliError> {
    let dir = &a.output;
    claim_dir(dir, a.force).map_err(|e| match e {
        ClaimError::Foreign { .. } => CliError::usage(format!(
            "-o {} {e} and no numalab report: choose another -o DIR (new or empty), or --force to write the report's files beside them",
            dir.display()
        )),
        ClaimError::WouldReplace { .. } => CliError::usage(format!(
            "-o {} {e}: --force writes the report's files beside a folder's own files, never over them; move those or choose another -o DIR",
            dir.display()
        )),
        ClaimError::Busy { holder } => busy(dir, &holder),
        ClaimError::Io(err) => CliError::failed(format!(
            "cannot use -o {} ({}): {err}",
            dir.display(),
            dir.join(LOCK_FILE).display()
        )),
    })
}

/// A report of a topology file: the machine model only.
fn topology_report(a: &Args, m: &Machine, old_files: &[String]) -> CliResult {
    let mode = mode_of(a);
    let doc = session::new_document(
        &REPORT,
        m,
        None,
        mode,
        default_budget(m, mode),
        default_buffer_bytes(m),
        &a.parts.0,
    );
    let written = save(&a.output, &doc)?;
    remove_old(&a.output, old_files, &written)?;
    print_summary(&doc, &a.output, &written)?;
    Ok(ExitCode::SUCCESS)
}

/// `--dry-run`: the plan of every part for the budget, with the costs
/// probed on the live machine (or `--costs`, or the reference costs for a
/// topology file); nothing is measured or written.
fn dry_run(a: &Args) -> CliResult {
    if a.resume {
        return Err(CliError::usage(
            "--dry-run plans a new report; drop --resume (a resumed report plans its missing parts when it runs)",
        ));
    }
    let m = load_machine(a.topology.as_deref())?;
    let mode = mode_of(a);
    let size = a
        .size
        .map(|v| v.next_multiple_of(2 << 20))
        .unwrap_or_else(|| default_buffer_bytes(&m));
    let costs = match (&a.costs, m.is_live()) {
        (Some(c), _) => c.clone(),
        (None, true) => probe(&m, home_cpu(&m).unwrap_or(0)),
        (None, false) => Costs::reference(),
    };
    let env = PlanEnv {
        m: &m,
        mode,
        size,
        costs: &costs,
        live: m.is_live(),
    };
    let plan = plan_report(&REPORT, &env, &a.parts.0, a.budget);
    if a.json {
        crate::output::print_result("report --dry-run", &plan)?;
        return Ok(ExitCode::SUCCESS);
    }
    let source = match &plan.costs.source {
        CostSource::Probed => "probed on this machine".to_string(),
        CostSource::Preset(p) => format!("preset {p}"),
    };
    outln!(
        "report plan: {} mode, budget {:.0} s, predicted {:.1} s (the smallest forms need {:.1} s)",
        mode.name(),
        plan.budget_s,
        plan.predicted_total_s,
        plan.required_s
    )?;
    outln!(
        "costs ({source}): fault {:.2} s/GiB, read pass {:.3} s/GiB, chase build {:.4} s/MiB, load {:.0} ns, thread start {:.2} ms",
        plan.costs.fault_s_per_gib,
        plan.costs.pass_s_per_gib,
        plan.costs.chase_s_per_mib,
        plan.costs.load_ns,
        plan.costs.thread_s * 1e3
    )?;
    for p in &plan.parts {
        match (&p.predicted_s, &p.work) {
            (Some(s), Some(w)) => {
                outln!("  {:<22} {:>7.1} s  {}", p.name.name(), s, w.describe())?;
                if let Some(c) = &p.cut {
                    outln!("  {:<22} {:>9}  cut: {c}", "", "")?;
                }
            }
            _ => outln!(
                "  {:<22} {:>9}  not planned: {}",
                p.name.name(),
                "-",
                p.reason.as_deref().unwrap_or("")
            )?,
        }
    }
    if let Some(l) = &plan.looks {
        match &l.reason {
            None => outln!(
                "looks at the host's speed: before the first part, after the last and between parts, about {:.1} s each, within a quarter of the budget",
                l.look_s
            )?,
            Some(why) => outln!("looks at the host's speed: none: {why}")?,
        }
    }
    for w in &plan.warnings {
        errln!("numalab: warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The report to complete with `--resume`, and its budget; `None` when
/// every part is done already (said on stdout).
fn resumed(a: &Args, m: &Machine) -> Result<Option<(ReportResults, f64)>, CliError> {
    let dir = &a.output;
    let existing = dir.join(RESULTS_FILE);
    if !existing.exists() {
        return Err(CliError::usage(format!(
            "--resume: {} holds no report ({} is missing); run without --resume to start one",
            dir.display(),
            existing.display()
        )));
    }
    if a.quick || a.full || a.size.is_some() || a.parts.0 != REPORT.all() {
        return Err(CliError::usage(
            "--resume continues a report with its own mode, parts and buffer size: drop --quick, --full, --parts and --size (--budget may be given)",
        ));
    }
    let doc = read_dir(dir).map_err(|e| CliError::usage(format!("--resume: {e}")))?;
    check_same_machine(&doc, m, dir)?;
    let todo = session::parts_to_measure(&doc);
    if todo.is_empty() {
        let written = save(dir, &doc)?;
        outln!(
            "numalab report: nothing to resume: every part of {} is done",
            dir.display()
        )?;
        print_summary(&doc, dir, &written)?;
        return Ok(None);
    }
    let budget = a
        .budget
        .unwrap_or_else(|| session::resume_budget(&REPORT, &doc));
    errln!(
        "report: resuming {}: {} part(s) missing ({}), budget {budget:.0} s",
        dir.display(),
        todo.len(),
        todo.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
    );
    Ok(Some((doc, budget)))
}

/// A new report of this machine, and its budget.
fn new_report(a: &Args, m: &Machine) -> (ReportResults, f64) {
    let mode = mode_of(a);
    let size = a
        .size
        .map(|v| v.next_multiple_of(2 << 20))
        .unwrap_or_else(|| default_buffer_bytes(m));
    let budget = a.budget.unwrap_or_else(|| default_budget(m, mode));
    let doc = session::new_document(&REPORT, m, None, mode, budget, size, &a.parts.0);
    errln!(
        "report: {} report into {} within {budget:.0} s ({} per memory buffer, {} part(s)): {}",
        mode.name(),
        a.output.display(),
        format_bytes(size as u64),
        session::parts_to_measure(&doc).len(),
        doc.summary.headline
    );
    (doc, budget)
}

/// 130 (143) when a signal stopped the report, 1 when a part failed, 3
/// when some placement did not verify, else 0.
fn exit_code(doc: &ReportResults, outcome: RunOutcome, dir: &Path) -> ExitCode {
    let run = doc.runs.last();
    if outcome == RunOutcome::Interrupted {
        errln!(
            "numalab: interrupted after {:.1} s: kept {} measured part(s) in {}; `numalab report -o {} --resume` measures the rest",
            run.map(|r| r.elapsed_s).unwrap_or(0.0),
            run.map(|r| r.measured.len()).unwrap_or(0),
            dir.display(),
            dir.display()
        );
        return ExitCode::from(cancel::signal_exit_code());
    }
    let failed = doc
        .parts
        .statuses()
        .iter()
        .any(|(_, s)| *s == PartStatus::Failed);
    if failed {
        ExitCode::from(1)
    } else if !doc.verification.verified {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}

/// Removes the files of the old report in `dir` that the new one did not
/// replace (see `numalab_report::files::remove_stale`: only numalab's own).
fn remove_old(dir: &Path, old_files: &[String], written: &[PathBuf]) -> Result<(), CliError> {
    remove_stale(dir, old_files, written).map_err(|e| {
        CliError::failed(format!(
            "--force: removing the old report in {}: {e}",
            dir.display()
        ))
    })
}

/// Writes the report directory; returns the files written.
fn save(dir: &Path, doc: &ReportResults) -> Result<Vec<PathBuf>, CliError> {
    write_dir(dir, doc)
        .map_err(|e| CliError::failed(format!("cannot write the report in {}: {e}", dir.display())))
}

/// The summary on stdout, and where the files are.
fn print_summary(doc: &ReportResults, dir: &Path, written: &[PathBuf]) -> Result<(), CliError> {
    out!("{}", numalab_report::text::summary(doc))?;
    outln!(
        "wrote {} (open it in a browser), {}, {} and {} CSV file(s) in {}",
        dir.join(HTML_FILE).display(),
        RESULTS_FILE,
        TEXT_FILE,
        written
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "csv"))
            .count(),
        dir.display()
    )
}
