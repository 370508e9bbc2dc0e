//! `numalab run [PLACEMENT] [--plan FILE] [--verify] [--] CMD ARGS...`: launch a command with
//! CPU and memory placement. numactl's option names work as aliases, the
//! command needs no `--` (as with numactl), `-H` prints what `numactl -H`
//! prints, and perf's `-e LIST` spells `--counters=LIST`.
//!
//! Placement the kernel cannot give a whole process (a policy per data
//! region from `--plan`, stripes of `interleave:NODES@PAGES`, emulated
//! weights) is the preload library's (`crates/numalab-preload/src/plan.rs`);
//! the plan itself is `numalab::profile::plan`.
//!
//! The launch itself (placement between fork and exec, signal forwarding,
//! the placement read at exit under ptrace, the exit status passed on) is
//! the engine's `numalab::placement::launch`; this file parses the options
//! and prints.

use crate::args::{choice, counter_list, List};
use crate::launch_args::{
    ignores_preload, library, placement_for_library, plan, preload_with, read_plan, LaunchArgs,
    PinArgs,
};
use crate::output::{
    errln, folder_of, load_machine, out, refuse_overwriting_input, write_stderr, CliError,
    CliResult, Envelope,
};
use numalab::cluster::ranks::{self, Domain};
use numalab::measure::counters::{self, Event};
use numalab::placement::buffer::SysfsWeights;
use numalab::placement::launch::{ExitStatus, LaunchOutcome, LaunchPlan};
use numalab::placement::pin_check::PinCheck;
use numalab::profile::plan::{verify, PlanCheck};
use numalab::profile::record::Record;
use numalab::profile::session::with_library;

use numalab_profile_abi::config::LibraryConfig;
use numalab_report::files::write_atomically;
use numalab_report::views::plan::check_text;
use numalab_report::views::verify::{pins_text, render};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("counting").args(["counters", "event"])))]
pub struct Args {
    #[command(flatten)]
    launch: LaunchArgs,
    /// numactl's -H: the nodes, their CPUs, size, free memory (and what each can give now) and
    /// distances, as `numactl -H` prints them; runs nothing.
    #[arg(short = 'H', long, conflicts_with_all = ["command", "verify", "plan", "counting"])]
    hardware: bool,
    /// Report where the command's memory and threads were when it exited (on stderr).
    #[arg(long)]
    verify: bool,
    /// Place the command's data regions as the plan FILE says (`numalab profile` writes one,
    /// plan.json; docs/plan.md), through numalab's preload library.
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// With --verify: write the report as JSON to FILE instead of text on stderr ({rank} in
    /// FILE: the MPI rank, so that every rank of a job writes its own).
    #[arg(long, value_name = "FILE", requires = "verify")]
    verify_json: Option<PathBuf>,
    /// Under srun or mpirun: give each rank its share of the node, as likwid-mpirun does: the
    /// node's CPUs split by NUMA node, socket, last-level cache or into blocks of cores among
    /// the ranks on the node (by their local rank), memory bound to the share's nodes unless
    /// a memory option is given; `numalab verify --ranks DIR` gathers the ranks' --verify-json.
    #[arg(long, value_name = "DOMAIN", value_parser = choice(&["node", "socket", "cache", "core-block", "map:CPU,CPU,..."], Domain::parse))]
    per_rank: Option<Domain>,
    /// Count events for the command, its threads and children (perf_event_open;
    /// LIST: comma list of event names or all, default all; see docs/counters.md), on stderr.
    #[arg(long, value_name = "LIST", num_args = 0..=1, require_equals = true, default_missing_value = "all", value_parser = counter_list(), conflicts_with = "event")]
    counters: Option<List<&'static Event>>,
    /// perf's spelling of --counters=LIST: -e cycles,instructions.
    #[arg(short = 'e', long, value_name = "LIST", value_parser = counter_list())]
    event: Option<List<&'static Event>>,
    /// With --counters: write the counters as JSON to FILE instead of text on stderr.
    #[arg(long, value_name = "FILE", requires = "counting")]
    counters_json: Option<PathBuf>,
    /// With --counters: print the counts as perf stat -x SEP does (value, unit, event, time
    /// running in ns, percentage of the time it ran, metric, metric unit; one event a line),
    /// on stderr.
    #[arg(short = 'x', long, value_name = "SEP", requires = "counting", conflicts_with_all = ["counters_json", "per_thread"], value_parser = field_separator)]
    field_separator: Option<String>,
    /// With --counters: count each thread and child process on its own as well (the command
    /// runs traced, and numalab waits until every process it started has ended).
    #[arg(long, requires = "counting")]
    per_thread: bool,
    #[command(flatten)]
    pinning: PinArgs,
    /// The command and its arguments (passed on byte for byte, UTF-8 or not), after the
    /// options or after `--`: everything from the first word that is not an option is the
    /// command's, as with numactl.
    #[arg(
        required_unless_present = "hardware",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// `-x SEP`: a short separator that cannot be confused with a value.
fn field_separator(t: &str) -> Result<String, String> {
    let bad = |why: &str| format!("-x '{t}': {why}; give a separator such as ',' or ';'");
    if t.is_empty() || t.chars().count() > 8 {
        return Err(bad("a separator has 1 to 8 characters"));
    }
    if t.chars()
        .any(|c| c.is_ascii_alphanumeric() || c == '.' || c == '\n')
    {
        return Err(bad(
            "letters, digits, '.' and newlines appear in the values",
        ));
    }
    Ok(t.to_string())
}

/// `--counters LIST` with a space: the list would be run as the command.
/// Said before anything runs when the command's first word is a counter
/// list and no program of that name exists.
fn check_counters_spelling(a: &Args) -> Result<(), CliError> {
    let (Some(_), Some(first)) = (&a.counters, a.command.first()) else {
        return Ok(());
    };
    let word = first.to_string_lossy();
    if counters::parse_list(&word).is_ok() && crate::launch_args::program_file(first).is_none() {
        return Err(CliError::usage(format!(
            "--counters takes its list after '=' (--counters={word}) or as perf's -e {word}; '{word}' is no program to run"
        )));
    }
    Ok(())
}

/// Refuses a `--verify-json` (or `--counters-json`: `opt`) file that could
/// not be written, before the command runs (its run would be wasted): a
/// directory, a file in a missing or unwritable folder, or one of the
/// command's own files.
fn check_json_output(
    opt: &str,
    path: &Path,
    command: &[OsString],
    plan: Option<&Path>,
) -> Result<(), CliError> {
    let shown = path.display();
    let named: Vec<PathBuf> = command.iter().map(PathBuf::from).collect();
    let mut inputs: Vec<(&str, &Path)> = named
        .iter()
        .map(|p| ("the command's argument", p.as_path()))
        .collect();
    inputs.extend(plan.map(|p| ("--plan", p)));
    refuse_overwriting_input(opt, path, &inputs)?;
    if path.is_dir() {
        return Err(CliError::usage(format!(
            "{opt} {shown} is a directory; give a file name"
        )));
    }
    // A device, a FIFO or one of numalab's own descriptors (/dev/stdout)
    // is written in place (`write_atomically`): its folder (/dev) need not
    // take new files.
    if numalab_report::files::own_descriptor(path).is_some()
        || std::fs::metadata(path).is_ok_and(|m| !m.is_file())
    {
        return Ok(());
    }
    let folder = folder_of(path);
    if !folder.is_dir() {
        return Err(CliError::usage(format!(
            "{opt} {shown}: the folder {} does not exist",
            folder.display()
        )));
    }
    // Creating a file is the one test that sees read-only file systems,
    // ACLs and full quotas alike.
    let probe = folder.join(format!(".numalab-probe.{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(CliError::failed(format!(
            "{opt} {shown}: cannot create a file in {}: {e}",
            folder.display()
        ))),
    }
}

pub fn run(mut a: Args) -> CliResult {
    if a.hardware {
        let m = load_machine(None)?;
        let memory = numalab::placement::node_memory::NodeMemory::capture();
        out!(
            "{}",
            numalab_report::views::topology::render_hardware(&m, Some(&memory))
        )?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    check_counters_spelling(&a)?;
    if a.counters.is_none() {
        a.counters = a.event.take();
    }
    if let Some(path) = &a.verify_json {
        let path =
            ranks::fill_rank(path).map_err(|e| CliError::usage(format!("--verify-json {e}")))?;
        check_json_output("--verify-json", &path, &a.command, a.plan.as_deref())?;
        a.verify_json = Some(path);
    }
    if let Some(path) = &a.counters_json {
        check_json_output("--counters-json", path, &a.command, a.plan.as_deref())?;
    }
    let m = load_machine(None)?;
    let rank = match a.per_rank.clone() {
        Some(d) => Some(rank_share(&m, &d, &mut a)?),
        None => None,
    };
    let plan = plan(&m, &a.launch)?.verify_at_exit(a.verify);
    let file_plan = a.plan.as_ref().map(|p| read_plan(&m, p)).transpose()?;
    let placement = placement_for_library(&m, &plan, file_plan.as_ref(), &a.command[0])?;
    let pins = a.pinning.cpus(&m, &plan)?;
    let unreachable = library_reach(
        &a.command[0],
        &plan,
        !placement.is_empty(),
        pins.is_some(),
        file_plan.is_some(),
    )?;
    let mut prepared = plan.prepare()?;
    // The library's records of a plan, for --verify: a file this run
    // creates (never one that was there), removed once read.
    let records = (a.verify && (file_plan.is_some() || pins.is_some()))
        .then(plan_records_file)
        .transpose()?;
    if !placement.is_empty() || pins.is_some() {
        let config = LibraryConfig {
            plan: (!placement.is_empty()).then(|| placement.clone()),
            plan_records: records.as_ref().map(|r| r.as_os_str().to_owned()),
            pin: pins.clone(),
            pin_skip: a.pinning.skip_mask(),
            ..LibraryConfig::default()
        };
        prepared = with_library(prepared, &preload_with(&library()?), &config);
        if !placement.is_empty() {
            announce_stripes(plan.stripes(), unreachable.as_deref());
        }
    }
    let (prepared, counted) = match &a.counters {
        Some(list) => {
            let attach = if a.per_thread {
                counters::attach_per_task
            } else {
                counters::attach
            };
            let (p, c) = attach(prepared, list.0.clone(), counters::line_bytes(&m));
            (p, Some(c))
        }
        None => (prepared, None),
    };
    let program = a
        .command
        .first()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(g) = prepared.weights() {
        announce_weights(g);
    }
    let launch = prepared.spawn(&a.command).map_err(|e| {
        if let Some(r) = &records {
            let _ = std::fs::remove_file(r);
        }
        CliError {
            msg: e.to_string(),
            code: e.exit_code(),
        }
    })?;
    let command_pid = launch.pid() as u32;
    let outcome = launch
        .wait()
        .map_err(|e| CliError::failed(format!("waiting for '{program}': {e}")))?;
    let library_records = records.as_ref().map(|path| {
        let bytes = std::fs::read(path).unwrap_or_default();
        let _ = std::fs::remove_file(path);
        Record::decode_all(&bytes)
    });
    let checked: Option<PlanCheck> = match (&file_plan, &library_records) {
        (Some(fp), Some(r)) => Some(verify(
            &m,
            fp,
            r,
            outcome.placement.as_ref().and_then(|p| p.as_ref().ok()),
        )),
        _ => None,
    };
    let pinned = match (&pins, &library_records) {
        (Some(list), Some(r)) => Some(PinCheck::new(
            list,
            a.pinning.skip_mask(),
            command_pid,
            r,
            outcome.placement.as_ref().and_then(|p| p.as_ref().ok()),
        )),
        _ => None,
    };
    if a.verify {
        say_placement(
            &outcome,
            checked.as_ref(),
            pinned.as_ref(),
            rank.as_ref(),
            a.verify_json.as_deref(),
            &program,
            &plan,
        )?;
    }
    if let Some(c) = counted {
        print_counters(
            c,
            a.counters_json.as_deref(),
            a.field_separator.as_deref(),
            &program,
            outcome.status,
        )?;
    }
    // Same exit code, or death by the same signal.
    Ok(outcome.status.propagate())
}

/// This rank's place and share (`--per-rank`), as `--verify-json` records
/// it for `numalab verify --ranks`.
#[derive(serde::Serialize)]
struct RankInfo {
    /// The rank in the whole job, where the launcher says.
    rank: Option<u32>,
    local_rank: u32,
    local_size: u32,
    host: String,
    source: &'static str,
    domain: &'static str,
    cpus: numalab::IdSet,
    nodes: numalab::IdSet,
    label: String,
}

/// `--per-rank`: the local rank from the launcher's variables, its share of
/// the node given to the launch options.
fn rank_share(m: &numalab::Machine, d: &Domain, a: &mut Args) -> Result<RankInfo, CliError> {
    let lr = ranks::local_rank()
        .ok_or_else(|| {
            CliError::usage(
                "--per-rank: no MPI launcher's rank variables (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID): run numalab under srun or mpirun, one numalab per rank",
            )
        })?
        .map_err(|e| CliError::usage(format!("--per-rank: {e}")))?;
    let share = ranks::share(m, d, &lr)
        .map_err(|e| CliError::usage(format!("--per-rank {}: {e}", d.name())))?;
    a.launch.give_rank_share(&share)?;
    Ok(RankInfo {
        rank: lr.global,
        local_rank: lr.rank,
        local_size: lr.size,
        host: numalab::cluster::host_name().unwrap_or_default(),
        source: lr.source,
        domain: d.name(),
        cpus: share.cpus,
        nodes: share.nodes,
        label: share.label,
    })
}

/// Why the preload library cannot load into `program` (statically linked,
/// setuid...) where this run needs it (`placed`: stripes or a plan,
/// `pinned`: --pin, `planned`: --plan); an error where that would silently
/// change what the run does, `None` where the library is not needed.
fn library_reach(
    program: &std::ffi::OsStr,
    plan: &LaunchPlan,
    placed: bool,
    pinned: bool,
    planned: bool,
) -> Result<Option<String>, CliError> {
    // A program the loader will not give the library: a plan would place
    // nothing (refused), stripes become the kernel's page-by-page
    // interleave (said), threads would not be pinned (refused).
    let unreachable = if placed || pinned {
        ignores_preload(program)
    } else {
        None
    };
    if let (Some(why), true) = (&unreachable, pinned) {
        return Err(CliError::usage(format!(
            "--pin: {why}, so the preload library that pins each thread cannot load into it; --cpus (or -C) binds the whole process"
        )));
    }
    if let (Some(why), true) = (&unreachable, planned) {
        return Err(CliError::usage(format!(
            "--plan: {why}, so the preload library that applies a plan cannot load into it and nothing would be placed; give a dynamically linked program"
        )));
    }
    // Unequal stripes are weighted interleave: without the library it
    // would silently become plain interleave.
    let weighted_stripes = plan
        .stripes()
        .is_some_and(|s| s.iter().any(|(_, p)| *p != s[0].1));
    if let (Some(why), true) = (&unreachable, weighted_stripes) {
        return Err(CliError::usage(format!(
            "--mem {}: {why}, so numalab's per-process weighted interleave (stripes laid by the preload library) cannot load into it; --weighted-impl kernel uses the kernel's, writing its system-wide weights for the command's lifetime",
            plan.policy()
        )));
    }
    Ok(unreachable)
}

/// What the preload library does with stripes of pages, on stderr; `why`
/// the program cannot load it, when it cannot.
fn announce_stripes(stripes: Option<&[(u32, u64)]>, unreachable: Option<&str>) {
    if let (Some(why), Some(s)) = (unreachable, stripes) {
        let mut nodes: Vec<String> = s.iter().map(|(n, _)| n.to_string()).collect();
        nodes.dedup();
        errln!(
            "numalab: warning: {why}, so the preload library cannot lay stripes of pages in it: the kernel interleaves its memory page by page over nodes {} instead",
            nodes.join(",")
        );
    } else if let Some(s) = stripes {
        let stripes: Vec<String> = s.iter().map(|(n, p)| format!("{p} on {n}")).collect();
        errln!(
            "numalab: stripes of pages ({}) laid by the preload library on every mapping the command makes; thread stacks and libc's own mappings are interleaved page by page",
            stripes.join(", ")
        );
        if s.iter().any(|(n, _)| *n != s[0].0) {
            let max = std::fs::read_to_string("/proc/sys/vm/max_map_count")
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .unwrap_or(65530);
            errln!(
                "numalab: at most {} stripes are laid over the run (half of vm.max_map_count {max}: each is a kernel mapping of its own, and the other half is left to the command); past them a range is interleaved page by page",
                max / 2
            );
        }
    }
}

/// The weighted-interleave weights the command runs with, on stderr.
fn announce_weights(g: &SysfsWeights) {
    if g.changed() {
        errln!(
            "numalab: system-wide weighted interleave weights set for the command's lifetime (every process on this machine that uses weighted interleave sees them; another numalab command waits; restored when the command ends): {}",
            g.describe()
        );
    } else {
        errln!(
            "numalab: the kernel's weighted interleave with the system's weights as they are: {} (nothing changed)",
            g.describe()
        );
    }
}

/// `--verify`: the command's placement at exit (and the plan's check), to
/// `verify_json` or as text on stderr.
fn say_placement(
    outcome: &LaunchOutcome,
    checked: Option<&PlanCheck>,
    pinned: Option<&PinCheck>,
    rank: Option<&RankInfo>,
    verify_json: Option<&Path>,
    program: &str,
    plan: &LaunchPlan,
) -> Result<(), CliError> {
    match (&outcome.placement, verify_json) {
        (Some(Ok(p)), Some(path)) => {
            let written = serde_json::to_value(p)
                .map(|mut v| {
                    // The plan's check beside the process's placement.
                    if let (Some(c), Some(o)) = (checked, v.as_object_mut()) {
                        o.insert("plan".into(), serde_json::to_value(c).unwrap_or_default());
                    }
                    // And each thread's pinning (--pin).
                    if let (Some(c), Some(o)) = (pinned, v.as_object_mut()) {
                        o.insert("pins".into(), serde_json::to_value(c).unwrap_or_default());
                    }
                    // And the rank's share (--per-rank).
                    if let (Some(r), Some(o)) = (rank, v.as_object_mut()) {
                        o.insert("rank".into(), serde_json::to_value(r).unwrap_or_default());
                    }
                    v
                })
                .and_then(|v| serde_json::to_string_pretty(&Envelope::new("run --verify", &v)))
                .map_err(std::io::Error::other)
                .and_then(|text| write_atomically(path, (text + "\n").as_bytes()));
            if let Err(e) = written {
                // The placement asked for is lost: that is a failure,
                // whatever the command's own status was (said here).
                return Err(CliError::failed(format!(
                    "cannot write {}: {e} ('{program}' {})",
                    path.display(),
                    ended(outcome.status)
                )));
            }
        }
        (Some(Ok(p)), None) => {
            if let Some(r) = rank {
                errln!(
                    "numalab: rank {} (local {} of {} on {}, {}): CPUs {} ({}), memory nodes {}",
                    r.rank.map_or("?".to_string(), |g| g.to_string()),
                    r.local_rank,
                    r.local_size,
                    r.host,
                    r.source,
                    r.cpus,
                    r.label,
                    r.nodes
                );
            }
            errln!("numalab: placement of '{program}' at exit ({plan}):");
            write_stderr(format_args!("{}", render(p, false)));
            if let Some(c) = checked {
                write_stderr(format_args!("{}", check_text(c)));
            }
            if let Some(c) = pinned {
                write_stderr(format_args!("{}", pins_text(c)));
            }
        }
        (Some(Err(e)), _) => {
            errln!("numalab: could not read the command's placement at exit: {e}")
        }
        (None, _) => {
            errln!("numalab: the command's exit was not seen, so its placement was not read")
        }
    }
    Ok(())
}

/// `--counters`: the text (or with `-x`, perf's CSV) on stderr, or the JSON
/// to `--counters-json`.
fn print_counters(
    counted: counters::Pending,
    json: Option<&Path>,
    separator: Option<&str>,
    program: &str,
    status: ExitStatus,
) -> Result<(), CliError> {
    let Some(r) = counted.report() else {
        errln!("numalab: the counters of '{program}' were not opened (it did not start)");
        return Ok(());
    };
    match (json, separator) {
        (Some(path), _) => {
            let written = serde_json::to_string_pretty(&Envelope::new("run --counters", &r))
                .map_err(std::io::Error::other)
                .and_then(|text| write_atomically(path, (text + "\n").as_bytes()));
            written.map_err(|e| {
                CliError::failed(format!(
                    "cannot write {}: {e} ('{program}' {})",
                    path.display(),
                    ended(status)
                ))
            })
        }
        (None, Some(sep)) => {
            write_stderr(format_args!(
                "{}",
                numalab_report::views::counters::csv(&r, sep)
            ));
            Ok(())
        }
        (None, None) => {
            errln!("numalab: counters of '{program}' ({}):", ended(status));
            write_stderr(format_args!(
                "{}",
                numalab_report::views::counters::text(&r)
            ));
            Ok(())
        }
    }
}

/// A new, empty file for the library's plan records, in the temporary
/// folder.
fn plan_records_file() -> Result<PathBuf, CliError> {
    let dir = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let path = dir.join(format!("numalab-plan-{}-{nanos}.bin", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map(|_| path)
        .map_err(|e| {
            CliError::failed(format!(
                "--verify: cannot create the plan's records in {}: {e}",
                dir.display()
            ))
        })
}

/// How the command ended, in words.
fn ended(status: ExitStatus) -> String {
    match status {
        ExitStatus::Exited(code) => format!("exited with {code}"),
        ExitStatus::Signaled(sig) => format!("was ended by signal {sig}"),
    }
}
