//! `numalab profile [PLACEMENT] [--rate R | --overhead PCT] [--duration S] [--min-bytes SIZE]
//! [--small-every SIZE] [--regions FILTER] [--threads SET] [--refine auto|off]
//! [--refine-time S] [--machine FILE] [--sampler auto|faults|pmu] [-o DIR] [--json] -- CMD ARGS...`: run a command with the
//! preload library that samples its memory accesses by protection faults (no PMU needed), or
//! through a memory-sampling PMU where one is usable, then say which of its allocations were
//! accessed from which node.
//!
//! The sampling is `crates/numalab-preload`; the analysis
//! `numalab::profile`; the text `numalab::report::views::profile`, the page
//! `numalab::report::views::profile_html`.

use crate::args::{percent, seconds, size, whole, Typed};
use crate::launch_args::{plan, LaunchArgs};
use crate::output::{errln, load_machine, write_stderr, write_stdout, CliError, CliResult};
use numalab::profile::filter::{self, RegionFilter};
use numalab::profile::latency::{price, LatencyTable};
use numalab::profile::record::{Kind, Record, FLAG_WRITE_PROBE, RECORD_BYTES};
use numalab::profile::{build, symbols, PmuStatus, Profile, Sampler};
use numalab::report::files::write_atomically;
use numalab::report::views::profile::render;
use numalab::report::views::profile_html::render_html;
use numalab::text::format::excerpt;
use numalab::{IdSet, Machine};
use std::ffi::{OsStr, OsString};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    launch: LaunchArgs,
    /// Pages armed per second, fixed (each access to an armed page is one
    /// sample). Without it the rate adapts to --overhead.
    #[arg(long, value_name = "R", value_parser = whole(1, 200_000), conflicts_with = "overhead")]
    rate: Option<usize>,
    /// The share of the program's CPU time sampling may take, in percent:
    /// the rate adapts to the cost the library measures (default 1).
    #[arg(long, value_name = "PCT", value_parser = percent())]
    overhead: Option<f64>,
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
    /// Sample only these regions: comma-separated terms, any of which
    /// selects a region: heap, mmap, stack, static, static:SYMBOL,
    /// site:FUNCTION and site:FILE:LINE (an allocation whose call stack
    /// passes there), 0xSTART-0xEND (overlapping), size>N, size<N (each
    /// allocation's bytes).
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
    /// Print the profile as JSON on stdout instead of text.
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

/// The ELF files a site term may name code in: the program (found as
/// `execvp` would), then the shared libraries the loader gives it
/// (`ldd`).
fn program_objects(opt: &str, program: &OsStr) -> Result<Vec<PathBuf>, CliError> {
    let p = Path::new(program);
    let exe = if p.components().count() > 1 {
        Some(p.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(p))
                .find(|c| c.is_file())
        })
    };
    let exe = exe
        .and_then(|e| std::fs::canonicalize(e).ok())
        .ok_or_else(|| {
            CliError::usage(format!(
                "{opt} site: cannot find the program '{}' to read its symbols",
                p.display()
            ))
        })?;
    let mut objects = vec![exe.clone()];
    // A static program, or one ldd cannot read, has its own code only.
    if let Ok(out) = std::process::Command::new("ldd").arg(&exe).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let path = line
                .split("=>")
                .nth(1)
                .unwrap_or(line)
                .split_whitespace()
                .next()
                .unwrap_or("");
            if path.starts_with('/') {
                if let Ok(c) = std::fs::canonicalize(path) {
                    if !objects.contains(&c) && objects.len() < 256 {
                        objects.push(c);
                    }
                }
            }
        }
    }
    Ok(objects)
}

/// A region filter in the library's form, the site terms resolved to
/// code in the program's objects; empty without a filter.
fn library_filter(
    opt: &str,
    f: Option<&RegionFilter>,
    program: &OsStr,
) -> Result<String, CliError> {
    let Some(f) = f else {
        return Ok(String::new());
    };
    let code = if f.has_sites() {
        let objects = program_objects(opt, program)?;
        filter::resolve_sites(f, &objects).map_err(|e| CliError::usage(format!("{opt}: {e}")))?
    } else {
        Vec::new()
    };
    Ok(f.library_form(&code))
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
const OURS: [&str; 5] = [
    "profile.json",
    "profile.txt",
    "profile.html",
    "records.bin",
    "records.bin.maps",
];

/// The preload library: `NUMALAB_PRELOAD`, else beside this executable.
fn library() -> Result<PathBuf, CliError> {
    if let Some(p) = std::env::var_os("NUMALAB_PRELOAD") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(CliError::usage(format!(
                "NUMALAB_PRELOAD {} is not a file; unset it to use the library beside numalab",
                p.display()
            )))
        };
    }
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find numalab's own path: {e}")))?;
    let beside = exe
        .parent()
        .map(|d| d.join("libnumalab_preload.so"))
        .filter(|p| p.is_file());
    beside.ok_or_else(|| {
        CliError::failed(format!(
            "libnumalab_preload.so is not beside {} (build the workspace: cargo build --release), or set NUMALAB_PRELOAD to its path",
            exe.display()
        ))
    })
}

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

/// Results files larger than this are refused (a report's results.json
/// is a few MB).
const MAX_MACHINE_FILE: u64 = 256 << 20;

/// The latency matrix of `--machine FILE`, checked against this machine.
fn machine_latencies(m: &Machine, path: &Path) -> Result<LatencyTable, CliError> {
    let bad = |why: String| CliError::usage(format!("--machine {}: {why}", path.display()));
    let len = std::fs::metadata(path)
        .map_err(|e| bad(format!("cannot read it ({e})")))?
        .len();
    if len > MAX_MACHINE_FILE {
        return Err(bad(format!(
            "{len} bytes is more than a numalab result ({MAX_MACHINE_FILE} at most)"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it ({e})")))?;
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

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let plan = plan(&m, &a.launch)?;
    let latencies = match &a.machine {
        Some(p) => Some(machine_latencies(&m, p)?),
        None => None,
    };
    let lib = library()?;
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
    prepare_folder(&a.output)?;
    let records = a.output.join("records.bin");
    // Ours first; a program's own preloads stay after it.
    let mut preload = lib.as_os_str().to_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    let records_abs = std::path::absolute(&records).unwrap_or(records.clone());
    let prepared = plan
        .prepare()?
        .with_env("LD_PRELOAD", preload)
        .with_env("NUMALAB_PROFILE_OUT", records_abs.as_os_str())
        // An empty value is no value: the one not chosen is cleared, so
        // that the caller's environment cannot override the choice.
        .with_env(
            "NUMALAB_PROFILE_RATE",
            a.rate.map_or(String::new(), |r| r.to_string()),
        )
        .with_env(
            "NUMALAB_PROFILE_OVERHEAD",
            match (a.rate, a.overhead) {
                (None, Some(f)) => (f * 100.0).to_string(),
                _ => String::new(),
            },
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
        .with_env("NUMALAB_PROFILE_REFINE_REGIONS", refine_filter)
        .with_env("NUMALAB_PROFILE_REGIONS", region_filter)
        .with_env("NUMALAB_PROFILE_THREADS", thread_filter)
        .with_env("NUMALAB_PROFILE_PMU", pmu_spec.clone())
        .with_env(
            "NUMALAB_PROFILE_REFINE_MS",
            ((a.refine_time * 1e3).round() as u64).to_string(),
        );
    // Counted by default: the software events and what the machine has.
    let (prepared, counted) = numalab::measure::counters::attach(
        prepared,
        numalab::measure::counters::default_list(),
        numalab::measure::counters::line_bytes(&m),
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
    let mut profile = analyse(&m, &a, &records_abs, (pmu, !pmu_spec.is_empty()));
    profile.counters = counted.report();
    if let (Some(t), Some(path)) = (&latencies, &a.machine) {
        price(&mut profile, t, &path.display().to_string());
    }
    let json =
        serde_json::to_string_pretty(&profile).map_err(|e| CliError::failed(e.to_string()))?;
    let text = render(&profile);
    for (name, body) in [
        ("profile.json", json.clone() + "\n"),
        ("profile.txt", text.clone()),
        ("profile.html", render_html(&profile, &m)),
    ] {
        let path = a.output.join(name);
        write_atomically(&path, body.as_bytes())
            .map_err(|e| CliError::failed(format!("cannot write {}: {e}", path.display())))?;
    }
    if a.json {
        write_stdout(format_args!("{json}\n"))?;
    } else {
        write_stdout(format_args!("{text}"))?;
        errln!("numalab profile: written to {}", a.output.display());
    }
    Ok(outcome.status.propagate())
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
            "the program did not exit normally, so its memory map was not saved: allocation sites are addresses"
                .into(),
        );
    }
    p
}
