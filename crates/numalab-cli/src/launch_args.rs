//! The placement options of the commands that launch a program (`run`,
//! `profile`): CPUs and a memory policy, numactl's names as aliases.

use crate::args::{choice, cpuless_hint};
use crate::output::{errln, CliError};
use numalab::placement::thread_policy::{compact_order, scatter_order};
use numalab::placement::{LaunchPlan, ListMeaning, MemoryPolicy, ResourceSet, WeightedImpl};
use numalab::profile::filter::{self, RegionFilter};
use numalab::profile::objects;
use numalab::profile::plan::{stripes_form, Plan};
use numalab::{IdSet, Machine};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct LaunchArgs {
    /// CPUs the command may run on (set grammar: 0-3, node:1, package:0, l3:0, ...).
    #[arg(long, value_name = "SET")]
    cpus: Option<String>,
    /// Memory policy of the command (see `numalab place --help`; default: none set, the command's own or the system's, first-touch unless it sets one).
    #[arg(long = "mem", value_name = "POLICY")]
    mem: Option<String>,
    /// numactl alias: allocate only on NODES (bind:NODES).
    #[arg(short = 'm', long, value_name = "NODES")]
    membind: Option<String>,
    /// numactl alias: interleave over NODES (interleave:NODES).
    #[arg(short = 'i', long, value_name = "NODES")]
    interleave: Option<String>,
    /// numactl alias: prefer NODE (preferred:NODE).
    #[arg(short = 'p', long, value_name = "NODE")]
    preferred: Option<String>,
    /// numactl alias: run on the CPUs of NODES.
    #[arg(short = 'N', long, value_name = "NODES")]
    cpunodebind: Option<String>,
    /// numactl alias: run on these CPUs.
    #[arg(short = 'C', long, value_name = "CPUS")]
    physcpubind: Option<String>,
    /// numactl alias: allocate on the node of the CPU that asks (local).
    #[arg(short = 'l', long)]
    localalloc: bool,
    /// Weighted interleave: auto, the kernel's where its system-wide weights already are the
    /// ones asked for (nothing written), else numalab's per-process stripes; kernel, the
    /// kernel's, its system-wide weights written for the command's lifetime (every process
    /// using weighted interleave sees them) and restored after; emulate, placed chunk by chunk
    /// by numalab's preload library on every mapping the command makes.
    #[arg(long, value_name = "IMPL", default_value = "auto", value_parser = choice(&["auto", "kernel", "emulate"], WeightedImpl::parse))]
    weighted_impl: WeightedImpl,
}

impl LaunchArgs {
    /// `--per-rank`: this rank's share of the node as its CPUs and, unless
    /// a memory option says otherwise, memory bound to the share's nodes.
    /// Refused beside a CPU option: the share is the rank's CPUs.
    pub fn give_rank_share(
        &mut self,
        share: &numalab::cluster::ranks::RankShare,
    ) -> Result<(), CliError> {
        for (name, given) in [
            ("--cpus", self.cpus.is_some()),
            ("--cpunodebind", self.cpunodebind.is_some()),
            ("--physcpubind", self.physcpubind.is_some()),
        ] {
            if given {
                return Err(CliError::usage(format!(
                    "--per-rank chooses each rank's CPUs; give it without {name} (or {name} without --per-rank)"
                )));
            }
        }
        self.cpus = Some(share.cpus.to_string());
        let memory_given = self.mem.is_some()
            || self.membind.is_some()
            || self.interleave.is_some()
            || self.preferred.is_some()
            || self.localalloc;
        if !memory_given {
            self.mem = Some(format!("bind:{}", share.nodes));
        }
        Ok(())
    }
}

/// The plan the options ask for: one CPU placement, one memory policy.
pub fn plan(m: &Machine, a: &LaunchArgs) -> Result<LaunchPlan, CliError> {
    // CPUs: one of --cpus, --cpunodebind, --physcpubind.
    let cpu_opts: Vec<(&str, &String, ListMeaning)> = [
        ("--cpus", a.cpus.as_ref(), ListMeaning::Cpus),
        ("--cpunodebind", a.cpunodebind.as_ref(), ListMeaning::Nodes),
        ("--physcpubind", a.physcpubind.as_ref(), ListMeaning::Cpus),
    ]
    .into_iter()
    .filter_map(|(n, v, k)| v.map(|v| (n, v, k)))
    .collect();
    if cpu_opts.len() > 1 {
        return Err(CliError::usage(format!(
            "give one CPU placement, not {}",
            cpu_opts
                .iter()
                .map(|o| o.0)
                .collect::<Vec<_>>()
                .join(" and ")
        )));
    }
    let cpus = match cpu_opts.first() {
        None => None,
        Some((name, text, meaning)) => {
            let s = ResourceSet::parse(m, text, *meaning)
                .map_err(|e| CliError::usage(format!("{name}: {e}")))?;
            if s.cpus.is_empty() {
                return Err(CliError::usage(format!(
                    "{name} '{text}' holds no CPU{}; nodes with CPUs: {}",
                    cpuless_hint(m, &s),
                    m.cpu_nodes()
                )));
            }
            Some(s.cpus)
        }
    };
    // Memory: one of --mem, -m, -i, -p, -l.
    let mut mems: Vec<(&str, String)> = Vec::new();
    if let Some(p) = &a.mem {
        mems.push(("--mem", p.clone()));
    }
    if let Some(n) = &a.membind {
        mems.push(("--membind", format!("bind:{n}")));
    }
    if let Some(n) = &a.interleave {
        mems.push(("--interleave", format!("interleave:{n}")));
    }
    if let Some(n) = &a.preferred {
        mems.push(("--preferred", format!("preferred:{n}")));
    }
    if a.localalloc {
        mems.push(("--localalloc", "local".into()));
    }
    if mems.len() > 1 {
        return Err(CliError::usage(format!(
            "give one memory policy, not {}",
            mems.iter().map(|o| o.0).collect::<Vec<_>>().join(" and ")
        )));
    }
    let policy = match mems.first() {
        None => MemoryPolicy::FirstTouch,
        Some((name, text)) => {
            MemoryPolicy::parse(m, text).map_err(|e| CliError::usage(format!("{name}: {e}")))?
        }
    };
    // Stripes the kernel cannot lay (interleave@PAGES, emulated weights)
    // are the preload library's, on every mapping the command makes.
    Ok(LaunchPlan::with_library(m, cpus, policy, a.weighted_impl)?)
}

/// `LD_PRELOAD` with numalab's library first; a program's own preloads
/// stay after it.
pub fn preload_with(lib: &Path) -> OsString {
    let mut preload = lib.as_os_str().to_os_string();
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    preload
}

/// What the preload library is to place (`NUMALAB_PLAN`): a plan file's
/// entries, then the launch's stripes on everything else; empty when
/// neither.
pub fn placement_for_library(
    m: &Machine,
    launch: &LaunchPlan,
    plan: Option<&Plan>,
    program: &OsStr,
) -> Result<String, CliError> {
    let mut out = String::new();
    if let Some(p) = plan {
        // A plan of kinds and sizes only needs no program file (one that
        // does not exist is then the launch's to report: exit 127).
        let objects = if p.needs_symbols() {
            program_objects("--plan", program)?
        } else {
            Vec::new()
        };
        out.push_str(
            &p.library_form(m, &objects)
                .map_err(|e| CliError::usage(format!("--plan: {e}")))?,
        );
    }
    note_later_objects("--plan", &out);
    if let Some(stripes) = launch.stripes() {
        out.push_str(&stripes_form(stripes));
    }
    Ok(out)
}

/// Says which objects a site term names that the program does not load at
/// start: their code is looked for in each allocation's stack as the
/// program runs (a library it `dlopen`s), and nothing can check before
/// that the object exists.
fn note_later_objects(opt: &str, library_form: &str) {
    let later = filter::later_objects(library_form);
    if !later.is_empty() {
        errln!(
            "numalab: {opt}: {} not among the libraries the program loads at start; its sites apply if the program loads it later (dlopen)",
            later.join(", ")
        );
    }
}

/// Reads `--plan FILE`, checked against this machine.
pub fn read_plan(m: &Machine, path: &Path) -> Result<Plan, CliError> {
    let text = numalab::input::read_text(path, numalab::input::InputKind::PlacementJson)
        .map_err(|e| CliError::usage(format!("--plan: {e}")))?;
    Plan::parse(m, &text).map_err(|e| CliError::usage(format!("--plan {}: {e}", path.display())))
}

/// The preload library: `NUMALAB_PRELOAD`, else beside this executable.
pub fn library() -> Result<PathBuf, CliError> {
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

/// The ELF files a site term may name code in: the program (found as
/// `execvp` would), then its interpreter and the shared libraries the
/// loader gives it at start, found in process as the loader would
/// (`numalab::profile::objects`).
pub fn program_objects(opt: &str, program: &OsStr) -> Result<Vec<PathBuf>, CliError> {
    let p = Path::new(program);
    let objects = program_file(program)
        .map(|e| objects::loaded_at_start(&e, &objects::LoaderPaths::current()))
        .unwrap_or_default();
    if objects.is_empty() {
        return Err(CliError::usage(format!(
            "{opt} site: cannot find the program '{}' to read its symbols",
            p.display()
        )));
    }
    Ok(objects)
}

/// The file the command `program` runs: a path as given, a bare name
/// looked up in PATH as exec does.
pub fn program_file(program: &OsStr) -> Option<PathBuf> {
    let p = Path::new(program);
    if p.components().count() > 1 {
        Some(p.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(p))
                .find(|c| c.is_file())
        })
    }
}

/// Why the program `program` will not load the preload library, if it
/// will not: the loader ignores `LD_PRELOAD` for a statically linked
/// program, and for a set-user-ID or set-group-ID one run by another
/// user (secure execution).
pub fn ignores_preload(program: &OsStr) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let exe = program_file(program)?;
    if numalab::profile::objects::statically_linked(&exe) {
        return Some(format!("{} is statically linked", exe.display()));
    }
    let meta = std::fs::metadata(&exe).ok()?;
    let (uid, gid) = (
        numalab::sys::process::effective_uid(),
        numalab::sys::process::effective_gid(),
    );
    let setuid = meta.mode() & 0o4000 != 0 && meta.uid() != uid;
    let setgid = meta.mode() & 0o2000 != 0 && meta.gid() != gid;
    (setuid || setgid).then(|| {
        format!(
            "{} is set-user-ID or set-group-ID (the loader ignores LD_PRELOAD for it)",
            exe.display()
        )
    })
}

/// Refuses, before the program runs, a `static:SYMBOL` term that names no
/// data symbol in the program or the libraries it loads at start, as an
/// unknown `site:` and a plan's `static:` entry are refused: a filter that
/// can select nothing is a typo far more often than a library the program
/// `dlopen`s later. The error names the closest symbols.
fn refuse_unknown_statics(opt: &str, f: &RegionFilter, program: &OsStr) -> Result<(), CliError> {
    let names: Vec<&str> = f
        .terms
        .iter()
        .filter_map(|t| match t {
            numalab::profile::filter::Term::Static(Some(n)) => Some(n.as_str()),
            _ => None,
        })
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    let Some(exe) = program_file(program) else {
        return Ok(());
    };
    let objects = objects::loaded_at_start(&exe, &objects::LoaderPaths::current());
    let symbols: Vec<String> = objects
        .iter()
        .flat_map(|o| numalab::profile::symbols::data_symbols(&o.to_string_lossy()))
        .map(|(n, _, _)| n)
        .collect();
    for name in names {
        if symbols
            .iter()
            .any(|s| numalab::profile::symbols::names_match(s, name))
        {
            continue;
        }
        let close = closest_names(name, &symbols, 5);
        let valid = if close.is_empty() {
            String::new()
        } else {
            format!(" (closest: {})", close.join(", "))
        };
        return Err(CliError::usage(format!(
            "{opt} static:{name} names no data symbol in {} or the libraries it loads at start{valid}; give a symbol of them, or `static` for all static data (a library the program loads later with dlopen is not searched)",
            exe.display()
        )));
    }
    Ok(())
}

/// Up to `n` of `names` closest to `want`: those that contain it (or it
/// them), then by edit distance at most a third of its length.
fn closest_names(want: &str, names: &[String], n: usize) -> Vec<String> {
    let lower = want.to_lowercase();
    let mut scored: Vec<(usize, &String)> = names
        .iter()
        .filter_map(|s| {
            let l = s.to_lowercase();
            if l.contains(&lower) || (l.len() >= 3 && lower.contains(&l)) {
                return Some((0, s));
            }
            let d = edit_distance(&lower, &l);
            (d <= (want.len() / 3).max(1)).then_some((d, s))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(n).map(|(_, s)| s.clone()).collect()
}

/// Levenshtein distance, bounded work: names longer than 256 bytes are
/// compared by their first 256.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (
        &a.as_bytes()[..a.len().min(256)],
        &b.as_bytes()[..b.len().min(256)],
    );
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(x != y)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// A region filter in the library's form, the site terms resolved to
/// code in the program's objects; empty without a filter.
pub fn library_filter(
    opt: &str,
    f: Option<&RegionFilter>,
    program: &OsStr,
) -> Result<String, CliError> {
    let Some(f) = f else {
        return Ok(String::new());
    };
    refuse_unknown_statics(opt, f, program)?;
    let code = if f.has_sites() {
        let objects = program_objects(opt, program)?;
        filter::resolve_sites(f, &objects).map_err(|e| CliError::usage(format!("{opt}: {e}")))?
    } else {
        Vec::new()
    };
    let form = f.library_form(&code);
    note_later_objects(opt, &form);
    Ok(form)
}

/// likwid-pin's per-thread pinning, shared by the commands that launch a
/// program (`run`, `profile`): done by the preload library as each thread
/// starts.
#[derive(clap::Args, Clone, Default)]
pub struct PinArgs {
    /// likwid-pin's pinning, one CPU per thread: the main thread on the first CPU of LIST,
    /// each thread the command creates on the next, in creation order (from the first again past
    /// the end); compact (node by node, core by core) or scatter (one CPU of each node in
    /// turn) order the CPUs the command may run on. Done by numalab's preload library;
    /// `run --verify` checks each thread, a profile lists the CPUs each thread was seen on.
    #[arg(
        long,
        visible_alias = "threads-policy",
        value_name = "LIST|compact|scatter"
    )]
    pin: Option<String>,
    /// With --pin: the created threads to leave on the command's CPUs, as a hexadecimal mask
    /// (bit k: the k-th thread the command creates, from 0; 0x1 skips an OpenMP runtime's
    /// first helper thread); a skipped thread takes no CPU of the list.
    #[arg(long, value_name = "MASK", requires = "pin", value_parser = skip_mask)]
    skip: Option<u64>,
}

impl PinArgs {
    /// `--pin`'s CPUs in order, within the CPUs the launch gives the
    /// command (numalab's own where it sets none); `None` without `--pin`.
    pub fn cpus(&self, m: &Machine, launch: &LaunchPlan) -> Result<Option<Vec<u32>>, CliError> {
        let Some(text) = &self.pin else {
            return Ok(None);
        };
        let allowed = match launch.cpus() {
            Some(c) => c.clone(),
            None => numalab::sys::numa::get_affinity(0).map_err(|e| {
                CliError::failed(format!("--pin: cannot read numalab's own CPUs: {e}"))
            })?,
        };
        pin_list(m, text, &allowed).map(Some)
    }

    /// `--skip`'s mask (0 without it).
    pub fn skip_mask(&self) -> u64 {
        self.skip.unwrap_or(0)
    }
}

/// `--skip MASK`: hexadecimal, with or without 0x.
fn skip_mask(t: &str) -> Result<u64, String> {
    let digits = t.trim().trim_start_matches("0x").trim_start_matches("0X");
    u64::from_str_radix(digits, 16).map_err(|_| {
        format!(
            "'{t}' is no hexadecimal mask of threads (bit k: the k-th created thread; e.g. 0x1)"
        )
    })
}

/// `--pin`'s CPUs in order: a list of CPUs and ranges as given (`3,1,0-2`,
/// order kept, repeats allowed), or `compact` / `scatter` over `allowed`,
/// the CPUs the command may run on. Every CPU must be one of them.
fn pin_list(m: &Machine, text: &str, allowed: &IdSet) -> Result<Vec<u32>, CliError> {
    const MOST: usize = 65_536;
    let bad = |why: String| CliError::usage(format!("--pin {text}: {why}"));
    let list = match text.trim() {
        "compact" => compact_order(m, allowed),
        "scatter" => scatter_order(m, allowed),
        t => {
            let mut out = Vec::new();
            for item in t.split(',').map(str::trim) {
                let (a, b) = item.split_once('-').unwrap_or((item, item));
                let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) else {
                    return Err(bad(format!(
                        "'{item}' is no CPU or range; give CPUs in order (0,2,1 or 0-3), compact or scatter"
                    )));
                };
                if a > b || (b - a) as usize >= MOST || out.len() + (b - a) as usize >= MOST {
                    return Err(bad(format!(
                        "'{item}' is no ascending range of at most {MOST} CPUs"
                    )));
                }
                out.extend(a..=b);
            }
            out
        }
    };
    if let Some(c) = list.iter().find(|c| !allowed.contains(**c)) {
        return Err(bad(format!(
            "CPU {c} is not one the command may run on ({{{allowed}}})"
        )));
    }
    if list.is_empty() {
        return Err(bad(format!("no CPU of {{{allowed}}} to pin to")));
    }
    Ok(list)
}
