//! `numalab profile [PLACEMENT] [SAMPLING] [--machine FILE] [--plan FILE [--repeat N]] [-o DIR]
//! [--json] -- CMD ARGS...`: run a command with the preload library, which samples its memory
//! accesses (protection faults, or a memory-sampling PMU), then say which of its allocations
//! were accessed from which node.
//!
//! The sampling is `crates/numalab-preload`, configured through the
//! contract crate `numalab-profile-abi`; the options that configure it are
//! [`crate::sampling_args`]; the runs and the analysis
//! `numalab::profile::session`; the folder and the text
//! `numalab_report::profile_dir` and `numalab_report::views::profile`.

use crate::args::whole;
use crate::launch_args::{placement_for_library, read_plan, LaunchArgs, PinArgs};
use crate::output::{
    errln, load_machine, out, print_result, write_stderr, CliError, CliResult, Envelope,
};
use crate::sampling_args::{session, SamplingArgs};
use numalab::placement::LaunchOutcome;
use numalab::profile::compare::compare as compare_profiles;
use numalab::profile::plan::Plan;
use numalab::profile::session::{records_path, Session};
use numalab::profile::Profile;
use numalab::sys::child::signal_name;
use numalab_report::profile_dir;
use numalab_report::views::plan::plan_text;
use numalab_report::views::profile::render;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    launch: LaunchArgs,
    #[command(flatten)]
    pinning: PinArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// A numalab result with this machine's measured latency matrix
    /// (`numalab matrix --json`, or a report's results.json): each
    /// region's accesses are then priced in ns, not only by SLIT distance.
    #[arg(long, value_name = "FILE")]
    machine: Option<PathBuf>,
    /// Folder for profile.json, profile.txt, profile.html and the raw records ({rank} in DIR:
    /// the MPI rank, one folder per rank of a job run under srun or mpirun).
    #[arg(
        short = 'o',
        long,
        value_name = "DIR",
        default_value = "numalab-profile"
    )]
    output: PathBuf,
    /// Profile twice, without and with this plan (`plan.json` of an earlier profile, or one
    /// written by hand; docs/plan.md), and show the regions side by side.
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// With --plan: also time N unprofiled runs without and N with the plan, interleaved
    /// (their output discarded), and judge the difference by a rank test (4 or more each can
    /// reach p < 0.05).
    #[arg(long, value_name = "N", value_parser = whole(1, 100), requires = "plan")]
    repeat: Option<usize>,
    /// Print the profile as JSON on stderr instead of text (with --plan: the comparison, the
    /// plan's check and the run times). Nothing numalab prints goes to stdout, which is the
    /// program's; scripts read DIR/profile.json.
    #[arg(long)]
    json: bool,
    /// Merge the profiles of an MPI job's ranks (DIR/rank-N/profile.json, as `-o
    /// DIR/rank-{rank}` wrote them) into one view on stdout (no program runs): each rank's
    /// figures, each site over every rank, the ranks whose remote share stands out.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["plan", "machine", "repeat", "command"])]
    merge: Option<PathBuf>,
    /// The command and its arguments, after `--`.
    #[arg(required_unless_present = "merge", last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// `--merge DIR`: every DIR/*/profile.json, by rank.
fn merge(dir: &Path, json: bool) -> CliResult {
    use numalab::profile::merge::{merge, MAX_RANKS};
    let rd = std::fs::read_dir(dir)
        .map_err(|e| CliError::usage(format!("--merge {}: {e}", dir.display())))?;
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for e in rd.flatten() {
        let file = e.path().join("profile.json");
        if file.is_file() {
            let name = e.file_name().to_string_lossy().into_owned();
            let rank = name.strip_prefix("rank-").unwrap_or(&name).to_string();
            found.push((rank, file));
            if found.len() > MAX_RANKS {
                return Err(CliError::usage(format!(
                    "--merge {}: more than {MAX_RANKS} profiles",
                    dir.display()
                )));
            }
        }
    }
    if found.is_empty() {
        return Err(CliError::usage(format!(
            "--merge {}: no folder in it holds a profile.json (profile each rank with numalab profile -o {}/rank-{{rank}} -- PROGRAM under srun or mpirun)",
            dir.display(),
            dir.display()
        )));
    }
    // Ranks in number order, other names after them.
    found.sort_by(|a, b| {
        let key = |r: &str| {
            r.parse::<u64>()
                .map_or((1, 0, r.to_string()), |n| (0, n, String::new()))
        };
        key(&a.0).cmp(&key(&b.0))
    });
    let mut profiles = Vec::with_capacity(found.len());
    for (rank, file) in found {
        let text = numalab::input::read_text(&file, numalab::input::InputKind::ResultsJson)
            .map_err(|e| CliError::usage(e.to_string()))?;
        let p: Profile = serde_json::from_str(&text).map_err(|e| {
            CliError::usage(format!(
                "{}: not a profile numalab profile wrote ({e})",
                file.display()
            ))
        })?;
        profiles.push((rank, p));
    }
    let merged = merge(&profiles);
    if json {
        print_result("profile", &merged)?;
    } else {
        out!(
            "{}",
            numalab_report::views::profile_merge::merged_text(&merged)
        )?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

pub fn run(mut a: Args) -> CliResult {
    if let Some(dir) = &a.merge {
        return merge(dir, a.json);
    }
    // `-o DIR/rank-{rank}`: one profile per MPI rank.
    a.output = numalab::cluster::ranks::fill_rank(&a.output)
        .map_err(|e| CliError::usage(format!("-o {e}")))?;
    let inputs = [("--plan", &a.plan), ("--machine", &a.machine)].map(|(o, p)| (o, p.as_deref()));
    profile_dir::refuse_inputs(&a.output, a.plan.is_some(), &inputs).map_err(CliError::usage)?;
    let m = load_machine(None)?;
    let file_plan = a.plan.as_ref().map(|p| read_plan(&m, p)).transpose()?;
    let s = session(
        m,
        (&a.launch, &a.pinning, &a.sampling),
        a.machine.as_deref(),
        &a.command,
    )?;
    let program = &a.command[0];
    profile_dir::prepare(&a.output)?;
    let Some(fp) = file_plan else {
        let (profile, outcome) = profile_once(&s, &a.output, None)?;
        // The fixes the diagnoses call for, as a plan `run --plan` applies
        // (none written when nothing calls for one: a plan needs entries).
        let proposed = Plan::from_profile(&s.machine, &profile, &profile.diagnoses);
        let plan_path = profile_dir::write_plan(&a.output, &proposed).map_err(CliError::failed)?;
        if a.json {
            let json = Envelope::versioned("profile", &profile).to_json()?;
            write_stderr(format_args!("{json}\n"));
        } else {
            write_stderr(format_args!("{}{}", render(&profile), plan_text(&proposed)));
            errln!("numalab profile: written to {}", a.output.display());
            if let Some(plan_path) = plan_path {
                let shown: Vec<_> = a.command.iter().map(|w| w.to_string_lossy()).collect();
                errln!(
                    "numalab profile: apply the plan with numalab run --plan {} -- {}",
                    plan_path.display(),
                    shown.join(" ")
                );
            }
        }
        return Ok(outcome.status.propagate());
    };
    // Before and after, one after the other: the same command, the same
    // sampling, the plan only in the second, in its library form (its
    // sites resolved in the program's files) for the profile and every
    // timed run.
    errln!("numalab profile: without the plan, then with it");
    let planned = placement_for_library(&s.machine, &s.launch, Some(&fp), program)?;
    let mut profiles = Vec::new();
    for plan in [None, Some((&fp, planned.as_str()))] {
        let dir = a
            .output
            .join(if plan.is_some() { "after" } else { "before" });
        let (profile, outcome) = profile_once(&s, &dir, plan)?;
        if let Some(sig) = outcome.interrupted_by {
            let (sig, out) = (signal_name(sig), a.output.display());
            match plan {
                None => errln!("numalab profile: stopped by {sig} during the run without the plan: its profile is in {}; the run with the plan was not started", a.output.join("before").display()),
                Some(_) => errln!("numalab profile: stopped by {sig} during the run with the plan: both profiles are in {out} (before/, after/), not compared (the second is cut short)"),
            }
            return Ok(outcome.status.propagate());
        }
        profiles.push((profile, outcome));
    }
    let (after, outcome) = profiles.pop().expect("two runs");
    let (before, _) = profiles.pop().expect("two runs");
    if let Some(n) = a.repeat.filter(|n| *n < 4) {
        errln!("numalab profile: --repeat {n}: fewer than 4 runs a side can never reach p < 0.05; the verdict will be \"cannot tell\"");
    }
    let times = a.repeat.map(|n| s.time_runs(&planned, n)).transpose()?;
    let c = compare_profiles(&before, &after);
    let (text, json) =
        profile_dir::write_comparison(&a.output, &c, after.plan_check.as_ref(), times.as_ref())
            .map_err(CliError::failed)?;
    if a.json {
        // compare.json as written, in the envelope.
        let c: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| CliError::failed(e.to_string()))?;
        let json = Envelope::new("profile --plan", &c).to_json()?;
        write_stderr(format_args!("{json}\n"));
    } else {
        write_stderr(format_args!("{text}"));
        errln!(
            "numalab profile: written to {} (before/, after/, compare.txt, compare.json)",
            a.output.display()
        );
    }
    Ok(outcome.status.propagate())
}

/// One profiled run into `dir` (profile.json, profile.txt, profile.html,
/// the records), its progress on stderr when that is a terminal.
fn profile_once(
    s: &Session,
    dir: &Path,
    plan: Option<(&Plan, &str)>,
) -> Result<(Profile, LaunchOutcome), CliError> {
    profile_dir::prepare(dir)?;
    let said = std::sync::atomic::AtomicBool::new(false);
    let say = |line: &str| {
        said.store(true, std::sync::atomic::Ordering::SeqCst);
        write_stderr(format_args!("\r{line}"))
    };
    let live = std::io::stderr().is_terminal().then_some(&say as _);
    let result = s.run(&records_path(dir), plan, live);
    if said.into_inner() {
        write_stderr(format_args!("\n"));
    }
    let (profile, outcome) = result?;
    profile_dir::write_profile(dir, &profile, &s.machine).map_err(CliError::failed)?;
    Ok((profile, outcome))
}
