//! `numalab profile [PLACEMENT] [--rate R | --overhead PCT] [--duration S] [--min-bytes SIZE]
//! [--small-every SIZE] [--regions FILTER] [--threads SET] [--refine auto|off]
//! [--refine-time S] [--machine FILE] [--sampler auto|faults|pmu] [--plan FILE [--repeat N]] [-o DIR] [--json] -- CMD ARGS...`: run a command with the
//! preload library that samples its memory accesses by protection faults (no PMU needed), or
//! through a memory-sampling PMU where one is usable, then say which of its allocations were
//! accessed from which node.
//!
//! The sampling is `crates/numalab-preload`; the analysis
//! `numalab::profile`; the text `numalab_report::views::profile`, the page
//! `numalab_report::views::profile_html`.

use crate::args::{percent, seconds, size, whole, Typed};
use crate::launch_args::{
    library, library_filter, placement_for_library, plan, preload_with, read_plan, LaunchArgs,
};
use crate::output::{errln, load_machine, write_stderr, CliError, CliResult};
use numalab::placement::ExitStatus;
use numalab::profile::compare::compare as compare_profiles;
use numalab::profile::filter::{self, RegionFilter};
use numalab::profile::latency::{price, LatencyTable};
use numalab::profile::plan::{verify, Plan, RunTimes};
use numalab::profile::record::{Kind, Record, FLAG_WRITE_PROBE, RECORD_BYTES};
use numalab::profile::{build, symbols, PmuStatus, Profile, Sampler};
use numalab::text::format::excerpt;
use numalab::{IdSet, Machine};
use numalab_report::files::write_atomically;
use numalab_report::views::plan::{check_text, plan_text, run_times_text};
use numalab_report::views::profile::render;
use numalab_report::views::profile_compare;
use numalab_report::views::profile_html::render_html;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn on_off(t: &str) -> Result<bool, String> {
    match t {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{t}' is not on or off")),
    }
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    launch: LaunchArgs,
    /// Pages armed per second, fixed (each access to an armed page is one
    /// page-fault sample). Without it the rate adapts to --overhead.
    #[arg(long, value_name = "R", value_parser = whole(1, 200_000))]
    rate: Option<usize>,
    /// The share of the program's CPU time sampling may take, in percent,
    /// for each sampler: the page-fault rate (unless --rate fixes it) and
    /// the word counts' windows adapt to the cost the library measures
    /// (default 1).
    #[arg(long, value_name = "PCT", value_parser = percent())]
    overhead: Option<f64>,
    /// Word counts, the estimate of every share: each thread counts its
    /// accesses to words drawn at random, with hardware watchpoints
    /// (docs/profile.md). `off` leaves the shares to page-fault samples,
    /// whose error is not bounded.
    #[arg(long, value_name = "on|off", default_value = "on", action = clap::ArgAction::Set, value_parser = crate::args::choice(&["on", "off"], on_off))]
    word_counts: bool,
    /// Sample for the first S seconds only; the command then runs on
    /// unsampled, and the profile is written when it ends.
    #[arg(long, value_name = "S", value_parser = seconds(0.001))]
    duration: Option<f64>,
    /// Track allocations of at least this size (malloc family and anonymous mmaps).
    #[arg(long, value_name = "SIZE", default_value = "64K", value_parser = size(4096, "one page"))]
    min_bytes: usize,
    /// Allocations below --min-bytes are not tracked one by one: one is
    /// drawn per this many bytes allocated, on average, with its call
    /// stack and its page's node, and each site's allocations and bytes
    /// are estimated from the draws (0: off).
    #[arg(long, value_name = "SIZE", default_value = "512K", value_parser = small_every())]
    small_every: usize,
    /// `auto`: after the page samples found lines accessed from several
    /// nodes, watch their 8-byte words with hardware watchpoints (reads
    /// and writes by node, false sharing); a region filter (as
    /// --regions): the same, within those regions only; `off` (default):
    /// pages only.
    #[arg(long, value_name = "MODE", default_value = "off", value_parser = refine_mode())]
    refine: Refine,
    /// Seconds of watchpoint windows refinement may spend in all (each hit
    /// costs the accessing thread a debug trap).
    #[arg(long, value_name = "S", default_value = "2", value_parser = seconds(0.02))]
    refine_time: f64,
    /// Sample only these regions: comma-separated alternatives, each a
    /// term or terms joined by & that must all match (heap&size>100M):
    /// heap, mmap, file:PATH (mappings of that file),
    /// stack, static, static:SYMBOL, site:FUNCTION, site:FILE:LINE and
    /// site:OBJECT+0xOFFSET (an allocation whose call stack passes there),
    /// 0xSTART-0xEND (overlapping), size>N, size<N (each allocation's
    /// bytes).
    #[arg(long, value_name = "FILTER", value_parser = region_filter())]
    regions: Option<(String, RegionFilter)>,
    /// Keep only these threads' samples: numbers in creation order, 0 (or
    /// `main`) the main thread, 1 the first thread the program created
    /// (e.g. `1-8`).
    #[arg(long, value_name = "SET", value_parser = thread_set())]
    threads: Option<(String, IdSet)>,
    /// A numalab result with this machine's measured latency matrix
    /// (`numalab matrix --json`, or a report's results.json): each
    /// region's accesses are then priced in ns, not only by SLIT distance.
    #[arg(long, value_name = "FILE")]
    machine: Option<PathBuf>,
    /// `auto` (default): a memory-sampling PMU where this machine has one
    /// this user may open (Intel PEBS mem-loads, AMD IBS op), else
    /// protection faults; `faults`: protection faults; `pmu`: the PMU, or
    /// an error.
    #[arg(long, value_name = "HOW", default_value = "auto", value_parser = sampler_mode())]
    sampler: Sampler,
    /// Folder for profile.json, profile.txt, profile.html and the raw records.
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
    /// Count each thread and child process on its own as well (the counters in profile.json,
    /// docs/counters.md): the command runs traced, and numalab waits until every process it
    /// started has ended.
    #[arg(long)]
    per_thread: bool,
    /// Print the profile as JSON on stderr instead of text (with --plan: the comparison, the
    /// plan's check and the run times). Nothing numalab prints goes to stdout, which is the
    /// program's; scripts read DIR/profile.json.
    #[arg(long)]
    json: bool,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

fn region_filter() -> Typed<(String, RegionFilter)> {
    Typed::new(|opt, t| {
        RegionFilter::parse(t)
            .map(|f| (t.to_string(), f))
            .map_err(|e| format!("{opt}: {e}"))
    })
}

fn thread_set() -> Typed<(String, IdSet)> {
    Typed::new(|opt, t| {
        filter::parse_thread_set(t)
            .map(|s| (t.to_string(), s))
            .map_err(|e| format!("{opt} {}: {e}", excerpt(t, 40)))
    })
}

/// What `--refine` asks for.
#[derive(Clone)]
enum Refine {
    Off,
    Auto,
    /// Within the regions this filter selects (its text, as given).
    Regions(String, RegionFilter),
}

fn refine_mode() -> Typed<Refine> {
    Typed::new(|opt, t| match t.trim() {
        "auto" => Ok(Refine::Auto),
        "off" => Ok(Refine::Off),
        f => RegionFilter::parse(f)
            .map(|r| Refine::Regions(f.to_string(), r))
            .map_err(|e| format!("{opt}: give auto, off or a region filter ({e})")),
    })
}

fn small_every() -> Typed<usize> {
    Typed::new(|opt, t| {
        let v = numalab::text::parse::size(t).map_err(|e| format!("{opt}: {e}"))?;
        match v {
            0 => Ok(0),
            1..=4095 => Err(format!(
                "{opt} {} is too small: 0 (off) or at least 4 KiB",
                excerpt(t, 40)
            )),
            v => usize::try_from(v).map_err(|_| format!("{opt} {} is too large", excerpt(t, 40))),
        }
    })
}

fn sampler_mode() -> Typed<Sampler> {
    Typed::new(|opt, t| match t.trim() {
        "auto" => Ok(Sampler::Auto),
        "faults" => Ok(Sampler::Faults),
        "pmu" => Ok(Sampler::Pmu),
        other => Err(format!(
            "{opt}: '{other}' is no sampler; valid: auto, faults, pmu"
        )),
    })
}

/// The files this command writes in its folder.
const OURS: [&str; 10] = [
    "profile.json",
    "profile.txt",
    "profile.html",
    "records.bin",
    "records.bin.maps",
    "plan.json",
    "compare.txt",
    "compare.json",
    "before",
    "after",
];

/// Creates the output folder, refusing one that holds files numalab did
/// not write there.
fn prepare_folder(dir: &Path) -> Result<(), CliError> {
    if dir.exists() && !dir.is_dir() {
        return Err(CliError::usage(format!(
            "-o {} is a file; give a folder",
            dir.display()
        )));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        let foreign: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !OURS.contains(&n.as_str()))
            .collect();
        if !foreign.is_empty() {
            return Err(CliError::usage(format!(
                "-o {} holds files numalab profile did not write ({}); give a new or empty folder",
                dir.display(),
                foreign.join(", ")
            )));
        }
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::failed(format!("cannot create {}: {e}", dir.display())))?;
    for f in ["records.bin", "records.bin.maps"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    Ok(())
}

/// Samples and remote share so far, on stderr, while the command runs.
fn live_status(m: Machine, records: PathBuf, stop: Arc<AtomicBool>) {
    use std::io::{Read, Seek, SeekFrom};
    let mut last = String::new();
    // Only the records written since the last look are read.
    let (mut offset, mut n, mut remote) = (0u64, 0u64, 0u64);
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let mut bytes = Vec::new();
        if let Ok(mut f) = std::fs::File::open(&records) {
            if f.seek(SeekFrom::Start(offset)).is_ok() {
                let _ = f.read_to_end(&mut bytes);
            }
        }
        let whole = bytes.len() / RECORD_BYTES * RECORD_BYTES;
        offset += whole as u64;
        for c in bytes[..whole].chunks_exact(RECORD_BYTES) {
            let mut a = [0u8; RECORD_BYTES];
            a.copy_from_slice(c);
            // Refinement's write probes are no samples of the accesses.
            let sample = |r: &Record| r.kind == Kind::Sample && r.flags & FLAG_WRITE_PROBE == 0;
            if let Some(r) = Record::decode(&a).filter(sample) {
                n += 1;
                if r.node >= 0 && m.node_of_cpu(r.cpu).is_some_and(|c| c != r.node as u32) {
                    remote += 1;
                }
            }
        }
        let line = format!(
            "numalab profile: {n} samples, {:.0}% remote",
            100.0 * remote as f64 / n.max(1) as f64
        );
        if line != last {
            write_stderr(format_args!("\r{line}"));
            last = line;
        }
    }
    if !last.is_empty() {
        write_stderr(format_args!("\n"));
    }
}

/// The latency matrix of `--machine FILE`, checked against this machine.
fn machine_latencies(m: &Machine, path: &Path) -> Result<LatencyTable, CliError> {
    let bad = |why: String| CliError::usage(format!("--machine {}: {why}", path.display()));
    // The bounded reader: a result's cap, a device refused, a FIFO read
    // to its end or refused when nothing writes into it (never a wait for
    // ever, never gigabytes of /dev/zero).
    let text = numalab::input::read_text(path, numalab::input::InputKind::ResultsJson)
        .map_err(|e| CliError::usage(format!("--machine: {e}")))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("not JSON ({e})")))?;
    let t = LatencyTable::from_json(&v).map_err(bad)?;
    let (rows, cols) = t.nodes();
    let cpu_nodes: Vec<u32> = m.cpu_nodes().iter().collect();
    let mem_nodes: Vec<u32> = m.memory_nodes().iter().collect();
    if rows.iter().any(|n| !cpu_nodes.contains(n)) || cols.iter().any(|n| !mem_nodes.contains(n)) {
        let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        return Err(bad(format!(
            "its matrix has CPU nodes {} and memory nodes {}, this machine CPU nodes {} and memory nodes {}: measured on another machine",
            list(&rows),
            list(&cols),
            list(&cpu_nodes),
            list(&mem_nodes)
        )));
    }
    Ok(t)
}

/// What every run of the command gets, whatever the plan.
struct Setup {
    machine: Machine,
    launch: numalab::placement::LaunchPlan,
    latencies: Option<LatencyTable>,
    library: PathBuf,
    pmu: PmuStatus,
    pmu_spec: String,
    region_filter: String,
    refine_filter: String,
    thread_filter: String,
    /// The library's placement without a plan (`NUMALAB_PLAN`: the
    /// launch's stripes, or empty).
    placement: String,
}

/// Refuses an input (`--plan`, `--machine`) that is one of the files this
/// command writes or removes in its folder (`-o DIR`, its before/ and
/// after/): numalab never writes over what it reads.
fn refuse_inputs_in_output(a: &Args) -> Result<(), CliError> {
    const RUN: [&str; 5] = [
        "profile.json",
        "profile.txt",
        "profile.html",
        "records.bin",
        "records.bin.maps",
    ];
    let mut ours: Vec<PathBuf> = Vec::new();
    if a.plan.is_some() {
        for sub in ["before", "after"] {
            ours.extend(RUN.iter().map(|n| a.output.join(sub).join(n)));
        }
        ours.extend(
            [
                "compare.txt",
                "compare.json",
                "records.bin",
                "records.bin.maps",
            ]
            .iter()
            .map(|n| a.output.join(n)),
        );
    } else {
        ours.extend(RUN.iter().chain(&["plan.json"]).map(|n| a.output.join(n)));
    }
    let inputs = [
        ("--plan", a.plan.as_deref()),
        ("--machine", a.machine.as_deref()),
    ];
    for path in &ours {
        for (opt, input) in inputs {
            if let Some(input) = input.filter(|p| crate::output::same_file(p, path)) {
                return Err(CliError::usage(format!(
                    "{opt} {} is {}, a file this command writes in -o {}: numalab never writes over an input; move it or choose another -o folder",
                    input.display(),
                    path.display(),
                    a.output.display()
                )));
            }
        }
    }
    Ok(())
}

pub fn run(a: Args) -> CliResult {
    refuse_inputs_in_output(&a)?;
    let m = load_machine(None)?;
    let launch = plan(&m, &a.launch)?;
    let file_plan = a.plan.as_ref().map(|p| read_plan(&m, p)).transpose()?;
    let latencies = match &a.machine {
        Some(p) => Some(machine_latencies(&m, p)?),
        None => None,
    };
    let library = library()?;
    let (pmu, pmu_spec) =
        PmuStatus::plan(a.sampler, PmuStatus::of_this_machine()).map_err(CliError::usage)?;
    let region_filter = library_filter(
        "--regions",
        a.regions.as_ref().map(|(_, f)| f),
        &a.command[0],
    )?;
    let refine_filter = match &a.refine {
        Refine::Regions(_, f) => library_filter("--refine", Some(f), &a.command[0])?,
        _ => String::new(),
    };
    let thread_filter = a.threads.as_ref().map_or(String::new(), |(_, s)| {
        s.iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(",")
    });
    let placement = placement_for_library(&m, &launch, None, &a.command[0])?;
    let setup = Setup {
        placement,
        machine: m,
        launch,
        latencies,
        library,
        pmu,
        pmu_spec,
        region_filter,
        refine_filter,
        thread_filter,
    };
    prepare_folder(&a.output)?;
    let Some(fp) = file_plan else {
        let (profile, outcome) = profile_once(&a, &setup, &a.output, None)?;
        // The fixes the diagnoses call for, as a plan `run --plan` applies
        // (none written when nothing calls for one: a plan needs entries).
        let proposed = Plan::from_profile(&setup.machine, &profile, &profile.diagnoses);
        let plan_path = a.output.join("plan.json");
        if proposed.entries.is_empty() {
            let _ = std::fs::remove_file(&plan_path);
        } else {
            let plan_json = serde_json::to_string_pretty(&proposed)
                .map_err(|e| CliError::failed(e.to_string()))?;
            write_atomically(&plan_path, (plan_json + "\n").as_bytes()).map_err(|e| {
                CliError::failed(format!("cannot write {}: {e}", plan_path.display()))
            })?;
        }
        if a.json {
            let json = serde_json::to_string_pretty(&profile)
                .map_err(|e| CliError::failed(e.to_string()))?;
            write_stderr(format_args!("{json}\n"));
        } else {
            write_stderr(format_args!("{}{}", render(&profile), plan_text(&proposed)));
            errln!("numalab profile: written to {}", a.output.display());
            if !proposed.entries.is_empty() {
                errln!(
                    "numalab profile: apply the plan with numalab run --plan {} -- {}",
                    plan_path.display(),
                    shown_command(&a.command)
                );
            }
        }
        return Ok(outcome.status.propagate());
    };
    // Before and after, one after the other: the same command, the same
    // sampling, the plan only in the second.
    errln!("numalab profile: without the plan, then with it");
    // The plan in the library's form once (its sites resolved in the
    // program's files), for the profile and every timed run.
    let planned = placement_for_library(&setup.machine, &setup.launch, Some(&fp), &a.command[0])?;
    let (before, outcome) = profile_once(&a, &setup, &a.output.join("before"), None)?;
    if let Some(sig) = outcome.interrupted_by {
        errln!(
            "numalab profile: stopped by {} during the run without the plan: its profile is in {}; the run with the plan was not started",
            signal_name(sig),
            a.output.join("before").display()
        );
        return Ok(outcome.status.propagate());
    }
    let (after, outcome) =
        profile_once(&a, &setup, &a.output.join("after"), Some((&fp, &planned)))?;
    if let Some(sig) = outcome.interrupted_by {
        errln!(
            "numalab profile: stopped by {} during the run with the plan: both profiles are in {} (before/, after/), not compared (the second is cut short)",
            signal_name(sig),
            a.output.display()
        );
        return Ok(outcome.status.propagate());
    }
    let c = compare_profiles(&before, &after);
    let times = a
        .repeat
        .map(|n| time_runs(&a, &setup, &planned, n))
        .transpose()?;
    let mut text = profile_compare::render(&c, "without the plan", "with the plan");
    if let Some(check) = &after.plan_check {
        text.push('\n');
        text.push_str(&check_text(check));
    }
    if let Some(t) = &times {
        text.push('\n');
        text.push_str(&run_times_text(t));
    }
    let v = serde_json::json!({
        "comparison": c,
        "plan_check": after.plan_check,
        "run_time": times,
    });
    let json =
        serde_json::to_string_pretty(&v).map_err(|e| CliError::failed(e.to_string()))? + "\n";
    for (name, body) in [("compare.txt", &text), ("compare.json", &json)] {
        write_atomically(&a.output.join(name), body.as_bytes())
            .map_err(|e| CliError::failed(format!("cannot write {name}: {e}")))?;
    }
    if a.json {
        write_stderr(format_args!("{json}"));
    } else {
        write_stderr(format_args!("{text}"));
        errln!(
            "numalab profile: written to {} (before/, after/, compare.txt, compare.json)",
            a.output.display()
        );
    }
    Ok(outcome.status.propagate())
}

/// `--repeat N`: N unprofiled runs without and N with the plan, in
/// alternating order (without first in even rounds, with first in odd
/// ones, so neither side always runs on a warmer machine), timed wall-clock.
fn time_runs(a: &Args, s: &Setup, with_plan: &str, n: usize) -> Result<RunTimes, CliError> {
    let (with, without) = (with_plan, s.placement.as_str());
    if n < 4 {
        errln!("numalab profile: --repeat {n}: fewer than 4 runs a side can never reach p < 0.05; the verdict will be \"cannot tell\"");
    }
    let (mut times_without, mut times_with) = (Vec::new(), Vec::new());
    for round in 0..n {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for planned in order {
            let placement = if planned { with } else { without };
            let mut prepared = s.launch.prepare()?.quiet().end_with_this_process(true);
            if !placement.is_empty() {
                prepared = prepared
                    .with_env("LD_PRELOAD", preload_with(&s.library))
                    .with_env("NUMALAB_PLAN", placement);
            }
            let t0 = std::time::Instant::now();
            let outcome = prepared
                .spawn(&a.command)
                .map_err(|e| CliError {
                    msg: e.to_string(),
                    code: e.exit_code(),
                })?
                .wait()
                .map_err(|e| CliError::failed(format!("waiting for a timed run: {e}")))?;
            let dt = t0.elapsed().as_secs_f64();
            if let Some(sig) = outcome.interrupted_by {
                return Err(CliError {
                    msg: format!(
                        "stopped by {} during timed run {}: the profiles before/ and after/ are written, the times are not",
                        signal_name(sig),
                        round + 1
                    ),
                    code: (128 + sig) as u8,
                });
            }
            if outcome.status != ExitStatus::Exited(0) {
                return Err(CliError::failed(format!(
                    "timed run {} {} the plan {:?}: its time would not be the program's",
                    round + 1,
                    if planned { "with" } else { "without" },
                    outcome.status
                )));
            }
            if planned {
                times_with.push(dt);
            } else {
                times_without.push(dt);
            }
        }
    }
    Ok(RunTimes::judge(times_without, times_with))
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// The command as a shell would take it back (for the hint).
fn shown_command(c: &[OsString]) -> String {
    c.iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// One profiled run into `dir` (profile.json, profile.txt, profile.html,
/// the records), with a plan and its library form applied when given.
fn profile_once(
    a: &Args,
    s: &Setup,
    dir: &Path,
    file_plan: Option<(&Plan, &str)>,
) -> Result<(Profile, numalab::placement::LaunchOutcome), CliError> {
    let m = &s.machine;
    prepare_folder(dir)?;
    let records = dir.join("records.bin");
    let placement = file_plan.map_or(s.placement.as_str(), |p| p.1);
    let records_abs = std::path::absolute(&records).unwrap_or(records.clone());
    // A profiled program runs armed pages for numalab: it ends with it.
    let prepared = s
        .launch
        .prepare()?
        .end_with_this_process(true)
        .with_env("LD_PRELOAD", preload_with(&s.library))
        .with_env("NUMALAB_PROFILE_OUT", records_abs.as_os_str())
        .with_env("NUMALAB_PLAN", placement)
        // An empty value is no value: the one not chosen is cleared, so
        // that the caller's environment cannot override the choice.
        .with_env(
            "NUMALAB_PROFILE_RATE",
            a.rate.map_or(String::new(), |r| r.to_string()),
        )
        .with_env(
            "NUMALAB_PROFILE_OVERHEAD",
            a.overhead
                .map_or(String::new(), |f| (f * 100.0).to_string()),
        )
        .with_env(
            "NUMALAB_PROFILE_WORDS",
            if a.word_counts { "" } else { "off" },
        )
        .with_env("NUMALAB_PROFILE_MIN_BYTES", a.min_bytes.to_string())
        .with_env("NUMALAB_PROFILE_SMALL_EVERY", a.small_every.to_string())
        .with_env(
            "NUMALAB_PROFILE_DURATION",
            a.duration.map_or(String::new(), |d| d.to_string()),
        )
        .with_env(
            "NUMALAB_PROFILE_REFINE",
            if matches!(a.refine, Refine::Off) {
                "off"
            } else {
                "auto"
            },
        )
        .with_env("NUMALAB_PROFILE_REFINE_REGIONS", s.refine_filter.clone())
        .with_env("NUMALAB_PROFILE_REGIONS", s.region_filter.clone())
        .with_env("NUMALAB_PROFILE_THREADS", s.thread_filter.clone())
        .with_env("NUMALAB_PROFILE_PMU", s.pmu_spec.clone())
        .with_env(
            "NUMALAB_PROFILE_REFINE_MS",
            ((a.refine_time * 1e3).round() as u64).to_string(),
        );
    // Counted by default: the software events and what the machine has.
    let attach = if a.per_thread {
        numalab::measure::counters::attach_per_task
    } else {
        numalab::measure::counters::attach
    };
    let (prepared, counted) = attach(
        prepared,
        numalab::measure::counters::default_list(),
        numalab::measure::counters::line_bytes(m),
    );
    let program = a.command[0].to_string_lossy().into_owned();
    let launch = prepared.spawn(&a.command).map_err(|e| CliError {
        msg: e.to_string(),
        code: e.exit_code(),
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let status = std::io::stderr().is_terminal().then(|| {
        let (m, r, s) = (m.clone(), records_abs.clone(), stop.clone());
        std::thread::spawn(move || live_status(m, r, s))
    });
    let outcome = launch.wait();
    stop.store(true, Ordering::SeqCst);
    if let Some(t) = status {
        let _ = t.join();
    }
    let outcome = outcome.map_err(|e| CliError::failed(format!("waiting for '{program}': {e}")))?;
    let mut profile = analyse(m, a, &records_abs, (s.pmu.clone(), !s.pmu_spec.is_empty()));
    profile.counters = counted.report();
    if let Some((fp, _)) = file_plan {
        let bytes = std::fs::read(&records_abs).unwrap_or_default();
        profile.plan_check = Some(verify(m, fp, &Record::decode_all(&bytes)));
    }
    if let (Some(t), Some(path)) = (&s.latencies, &a.machine) {
        price(&mut profile, t, &path.display().to_string());
    }
    let json =
        serde_json::to_string_pretty(&profile).map_err(|e| CliError::failed(e.to_string()))?;
    for (name, body) in [
        ("profile.json", json + "\n"),
        ("profile.txt", render(&profile)),
        ("profile.html", render_html(&profile, m)),
    ] {
        let path = dir.join(name);
        write_atomically(&path, body.as_bytes())
            .map_err(|e| CliError::failed(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok((profile, outcome))
}

/// The profile of the records the run left.
/// `pmu`: what was found, and whether the library was given its event.
fn analyse(m: &Machine, a: &Args, records: &Path, pmu: (PmuStatus, bool)) -> Profile {
    // No records: the profile says why, and the command's status still
    // passes on.
    let (bytes, missing) = match std::fs::read(records) {
        Ok(b) => (b, None),
        Err(e) => (
            Vec::new(),
            Some(format!(
                "the command left no records at {} ({e}): statically linked and setuid programs ignore LD_PRELOAD, so nothing of them was sampled",
                records.display()
            )),
        ),
    };
    let all = Record::decode_all(&bytes);
    let maps_path = records.with_extension("bin.maps");
    let maps_text = std::fs::read_to_string(&maps_path).unwrap_or_default();
    let pcs: Vec<u64> = all
        .iter()
        .filter(|r| r.kind == Kind::Frame)
        .map(|r| r.time_ns)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let saved_maps = !maps_text.is_empty();
    // Which file each file mapping maps (those still mapped at exit).
    let file_of = |addr: u64| symbols::object_at(&maps_text, addr);
    let files: Vec<(u64, Option<String>)> = all
        .iter()
        .filter(|r| r.kind == Kind::Alloc && r.flags & 2 != 0)
        .map(|r| (r.addr, file_of(r.addr)))
        .collect();
    let names = symbols::ProgramSymbols::new(maps_text, &pcs);
    let command = a
        .command
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let mut p = build(m, command, &all, &names);
    for r in p.regions.iter_mut().filter(|r| r.kind == "file") {
        r.object = files
            .iter()
            .find(|(a, _)| *a == r.first_address)
            .and_then(|(_, f)| f.clone());
    }
    filter::apply(
        m,
        &mut p,
        a.regions.as_ref().map(|(t, f)| (t.as_str(), f)),
        a.threads.as_ref().map(|(t, _)| t.as_str()),
    );
    let (pmu, pmu_warnings) = pmu.0.after_run(pmu.1, &all);
    p.pmu = Some(pmu);
    p.warnings.extend(pmu_warnings);
    if let Some(w) = numalab::profile::huge_pages_split_here() {
        p.warnings.push(w);
    }
    if let Refine::Regions(t, _) = &a.refine {
        p.selection.get_or_insert_default().refine_regions = Some(t.clone());
    }
    if let Some(w) = missing {
        p.warnings = vec![w];
    }
    if !saved_maps && !pcs.is_empty() {
        p.warnings.push(
            "the program's memory map was not saved (it ended before the library's sampler started, and not through libc's exit): allocation sites are addresses"
                .into(),
        );
    }
    p
}
