//! `numalab scaling --copies N -- CMD ARGS...`: an application run as the
//! Cray/NERSC study ran the NAS and SSP codes.
//!
//! - **Copies** (default): N copies of the command, each pinned to one CPU
//!   with its memory bound to that CPU's node. **Threads** (`env`): one
//!   process with the variable (e.g. `OMP_NUM_THREADS`) set to N, pinned to
//!   N CPUs, memory local to whichever thread touches it.
//! - Layouts, run in turn within every repetition so drift hits all alike:
//!   `one` (a single copy or thread, the 1-core-per-node time), `packed` (on
//!   the first node's cores, compact order) and `spread` (one CPU per node,
//!   not applicable with fewer nodes with CPUs than N). With two copies,
//!   packed vs spread is Apex-MAP's "packed vs unpacked".
//! - Each layout's time is the wall time until its last copy ends; each
//!   copy's own time ends when its pidfd says it exited. Medians over the
//!   repetitions.
//! - Every copy's CPU mask is read back from the kernel while it cannot yet
//!   be reaped; the memory policy is set between fork and exec, where a
//!   failure fails the launch. A copy that exits non-zero or is killed is
//!   an error naming it.
//! - The split ([`CoreContention`]) takes `one` as 1 core per node and
//!   `packed` as N cores per node when packed fits on one node.
//! - **MPI** (`mpi`, `scaling --mpi N`): one job of N ranks per layout,
//!   started by the MPI launcher (`mpirun -np N --bind-to none`), each rank
//!   a `numalab run --per-rank map:CPUS --verify` that places itself on
//!   its CPU (memory bound to its node) and records where it ran. No `one`
//!   (one rank is another decomposition of the problem); `spread` deals the
//!   ranks round-robin over the nodes (the study's unpacked), `packed` fills
//!   the nodes in turn. The split takes spread's and packed's ranks per
//!   node as the two core counts, as the study split packed vs unpacked
//!   times of the same job. A rank's time is the job's: MPI ranks end
//!   together, in `MPI_Finalize`.

use crate::experiments::extrapolate::{CoreContention, Prediction, TimedPoint};
use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::stats::median;
use crate::placement::launch::{ExitStatus, Launch, LaunchPlan};
use crate::placement::thread_policy::{compact_order, scatter_order};
use crate::placement::{sys, MemoryPolicy, PlacementError};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

/// Most copies (or threads) one run may start.
pub const MAX_COPIES: usize = 1024;

/// Most repetitions of every layout.
pub const MAX_REPS: usize = 100;

/// What to run and how.
#[derive(Debug, Clone)]
pub struct CopiesRequest {
    /// Copies per layout, or threads with `env`.
    pub copies: usize,
    /// Threads mode: the variable set to the thread count.
    pub env: Option<String>,
    /// Repetitions of every layout.
    pub reps: usize,
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// Send the copies' standard output to standard error (so a JSON
    /// result on standard output stays whole).
    pub output_to_stderr: bool,
    /// MPI mode: the ranks are started by an MPI launcher.
    pub mpi: Option<MpiLaunch>,
}

/// How `scaling --mpi` starts a job's ranks.
#[derive(Debug, Clone)]
pub struct MpiLaunch {
    /// The launcher (`mpirun`, Open MPI's options).
    pub mpirun: OsString,
    /// This numalab, which every rank runs to place itself and record where
    /// it ran.
    pub numalab: std::path::PathBuf,
    /// A folder this run made for the ranks' records (a subfolder per
    /// layout and repetition).
    pub records: std::path::PathBuf,
    /// numalab runs as root: Open MPI's mpirun refuses root unless told
    /// (`OMPI_ALLOW_RUN_AS_ROOT`, set for the launcher alone; other MPIs
    /// ignore it).
    pub as_root: bool,
}

/// One copy in one repetition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CopyRun {
    pub copy: usize,
    /// CPUs it was pinned to.
    pub cpus: IdSet,
    /// Its CPU mask as the kernel reported it after the launch.
    pub cpus_seen: IdSet,
    pub pid: i32,
    /// From its start to its exit.
    pub seconds: f64,
}

/// One layout in one repetition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepRun {
    /// From the first copy's start to the last copy's exit.
    pub wall_seconds: f64,
    pub copies: Vec<CopyRun>,
}

/// One layout: where its copies ran and how long they took.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayoutRun {
    /// `one`, `packed` or `spread`.
    pub layout: String,
    pub applicable: bool,
    /// Why not, or what to know about it (packed over several nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Processes started (1 in threads mode).
    pub processes: usize,
    /// Copies or threads: the load.
    pub width: usize,
    /// CPUs of each process.
    pub cpus: Vec<IdSet>,
    /// Nodes of each process's CPUs.
    pub nodes: Vec<IdSet>,
    /// Memory policy of each process.
    pub memory: Vec<String>,
    /// Most copies on one node.
    pub per_node: usize,
    pub runs: Vec<RepRun>,
    /// Median wall time over the repetitions.
    pub wall_seconds: Option<f64>,
    /// Median of each copy's time over the repetitions.
    pub copy_seconds: Vec<f64>,
    /// Every copy's CPU mask as asked, in every repetition.
    pub verified: bool,
}

/// The outcome of [`run_copies`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CopiesResult {
    /// The command and its arguments, as text (lossy for non-UTF-8 bytes).
    pub argv: Vec<String>,
    /// `copies` or `threads`.
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    pub copies: usize,
    pub reps: usize,
    pub layouts: Vec<LayoutRun>,
    /// The split from `one` and `packed`.
    pub model: Option<CoreContention>,
    /// Projections: 1, 2, 4... cores per node at bandwidth ratios 1 and 2.
    pub predictions: Vec<Prediction>,
    /// Why there is no split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_note: Option<String>,
    pub warnings: Vec<String>,
}

/// Why a run of copies failed.
#[derive(Debug, thiserror::Error)]
pub enum CopiesError {
    /// The request does not fit this machine (bad input).
    #[error("{0}")]
    Invalid(String),
    /// A launch, a wait or a copy failed.
    #[error("{0}")]
    Failed(String),
}

impl From<PlacementError> for CopiesError {
    fn from(e: PlacementError) -> Self {
        match e {
            PlacementError::Invalid(_) => Self::Invalid(e.to_string()),
            _ => Self::Failed(e.to_string()),
        }
    }
}

/// What one layout launches: per process, its CPUs and memory policy.
struct Layout {
    name: &'static str,
    procs: Vec<(IdSet, MemoryPolicy)>,
    width: usize,
    note: Option<String>,
    applicable: bool,
}

/// Runs the layouts `req.reps` times each, interleaved.
pub fn run_copies(
    m: &Machine,
    req: &CopiesRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<CopiesResult, CopiesError> {
    let n = req.copies;
    let allowed = m.allowed_cpus.len();
    if n == 0 || n > MAX_COPIES {
        return Err(CopiesError::Invalid(format!(
            "--copies {n}: give 1 to {MAX_COPIES}"
        )));
    }
    if n > allowed {
        return Err(CopiesError::Invalid(format!(
            "--copies {n} but only {allowed} CPUs are allowed ({})",
            m.allowed_cpus
        )));
    }
    if req.command.is_empty() {
        return Err(CopiesError::Invalid("no command given after --".into()));
    }
    let layouts = plan_layouts(m, n, req.env.is_some(), req.mpi.is_some());
    let mut runs: Vec<Vec<RepRun>> = vec![Vec::new(); layouts.len()];
    let mut warnings = Vec::new();
    'reps: for rep in 0..req.reps {
        for (i, l) in layouts.iter().enumerate().filter(|(_, l)| l.applicable) {
            if cancel::requested() {
                warnings.push(cancel::WARNING.to_string());
                break 'reps;
            }
            progress(&format!("{} rep {}/{}", l.name, rep + 1, req.reps));
            let (run, late) = match &req.mpi {
                Some(mpi) => (run_mpi_layout(m, req, mpi, l, rep)?, false),
                None => run_layout(m, req, l)?,
            };
            if late {
                warnings.push(format!(
                    "{}: pidfd_open failed, so copy times end when each copy was reaped (upper bounds)",
                    l.name
                ));
            }
            runs[i].push(run);
        }
    }
    warnings.dedup();
    let layouts: Vec<LayoutRun> = layouts
        .into_iter()
        .zip(runs)
        .map(|(l, runs)| summarize(m, l, runs))
        .collect();
    let (model, predictions, model_note) = split(m, &layouts, req.mpi.is_some());
    Ok(CopiesResult {
        argv: req
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        mode: if req.mpi.is_some() {
            "mpi"
        } else if req.env.is_some() {
            "threads"
        } else {
            "copies"
        }
        .into(),
        env: req.env.clone(),
        copies: n,
        reps: req.reps,
        layouts,
        model,
        predictions,
        model_note,
        warnings,
    })
}

/// `one` (when n > 1, not under MPI), `packed` and `spread`, placed on
/// this machine.
fn plan_layouts(m: &Machine, n: usize, threads: bool, mpi: bool) -> Vec<Layout> {
    let packed = compact_order(m, &m.allowed_cpus);
    let spread = scatter_order(m, &m.allowed_cpus);
    let nodes_with_cpus = m
        .cpu_nodes()
        .iter()
        .filter(|&x| !m.allowed_cpus_of(x).is_empty())
        .count();
    let place = |cpus: &[u32], width: usize| -> Vec<(IdSet, MemoryPolicy)> {
        if threads {
            vec![(cpus[..width].iter().copied().collect(), MemoryPolicy::Local)]
        } else {
            cpus[..width]
                .iter()
                .map(|&c| {
                    let node = m.node_of_cpu(c).unwrap_or(0);
                    (IdSet::single(c), MemoryPolicy::on_node(node))
                })
                .collect()
        }
    };
    let layout = |name, cpus: &[u32], width| Layout {
        name,
        procs: place(cpus, width),
        width,
        note: None,
        applicable: true,
    };
    let mut v = Vec::new();
    if n > 1 && !mpi {
        v.push(layout("one", &packed, 1));
    }
    let mut p = layout("packed", &packed, n);
    let first = packed.first().and_then(|&c| m.node_of_cpu(c)).unwrap_or(0);
    let on_first = m.allowed_cpus_of(first).len();
    if n > on_first {
        p.note = Some(format!(
            "packed spans several nodes: node {first} has {on_first} allowed CPUs, fewer than {n}"
        ));
    }
    v.push(p);
    if n > 1 {
        if nodes_with_cpus >= n {
            v.push(layout("spread", &spread, n));
        } else if mpi {
            // Dealt round-robin, fewer ranks a node than packed, or no
            // unpacked run to compare with.
            let most = |l: &Layout| -> usize {
                let mut per = std::collections::BTreeMap::<u32, usize>::new();
                for p in &l.procs {
                    for c in p.0.iter() {
                        *per.entry(m.node_of_cpu(c).unwrap_or(0)).or_default() += 1;
                    }
                }
                per.values().copied().max().unwrap_or(0)
            };
            let mut l = layout("spread", &spread, n);
            let (dealt, packed_most) = (most(&l), most(&v[v.len() - 1]));
            if dealt < packed_most {
                l.note = Some(format!(
                    "spread: {n} ranks dealt over {nodes_with_cpus} nodes with CPUs, up to {dealt} a node"
                ));
            } else {
                l = Layout {
                    name: "spread",
                    procs: Vec::new(),
                    width: n,
                    note: Some(format!(
                        "spread: not applicable: dealing {n} ranks over {nodes_with_cpus} node{} with CPUs puts as many on a node as packing them ({packed_most})",
                        crate::text::format::s(nodes_with_cpus)
                    )),
                    applicable: false,
                };
            }
            v.push(l);
        } else {
            v.push(Layout {
                name: "spread",
                procs: Vec::new(),
                width: n,
                note: Some(format!(
                    "spread: not applicable: needs {n} nodes with CPUs, this machine has {nodes_with_cpus}"
                )),
                applicable: false,
            });
        }
    }
    v
}

/// The argument vector of one process: the variable set through `env`,
/// the output sent to stderr through `sh`; both `exec`, so the pid, mask
/// and memory policy are the command's own.
fn argv(req: &CopiesRequest, width: usize) -> Vec<OsString> {
    let mut v: Vec<OsString> = Vec::new();
    if req.output_to_stderr {
        v.extend(["sh", "-c", "exec \"$@\" 1>&2", "numalab-copy"].map(OsString::from));
    }
    if let Some(var) = &req.env {
        v.push("env".into());
        v.push(format!("{var}={width}").into());
    }
    v.extend(req.command.iter().cloned());
    v
}

/// One repetition of one layout; `true` beside it when some copy's end
/// could only be seen at reaping.
fn run_layout(m: &Machine, req: &CopiesRequest, l: &Layout) -> Result<(RepRun, bool), CopiesError> {
    let args = argv(req, l.width);
    let program = req.command[0].to_string_lossy().into_owned();
    let mut started: Vec<(Launch, Instant, IdSet, Option<OwnedFd>)> = Vec::new();
    let t0 = Instant::now();
    for (i, (cpus, policy)) in l.procs.iter().enumerate() {
        let launched = LaunchPlan::new(m, Some(cpus.clone()), policy.clone())
            .and_then(|p| p.prepare())
            .map_err(CopiesError::from)
            .and_then(|p| {
                let at = Instant::now();
                p.spawn(&args[..]).map(|launch| (launch, at)).map_err(|e| {
                    CopiesError::Failed(format!(
                        "copy {} of {} ({}): {e}",
                        i + 1,
                        l.procs.len(),
                        l.name
                    ))
                })
            });
        match launched {
            Ok((launch, at)) => {
                let fd = crate::sys::process::pidfd_open(launch.pid());
                started.push((launch, at, cpus.clone(), fd));
            }
            Err(e) => {
                abandon(started);
                return Err(e);
            }
        }
    }
    let seen: Vec<IdSet> = started
        .iter()
        .map(|(launch, ..)| sys::get_affinity(launch.pid()).unwrap_or_default())
        .collect();
    let mut ends: Vec<Option<Instant>> = vec![None; started.len()];
    wait_for_exits(&started, &mut ends);
    // Reaped last to first: each launch restores the signal mask it found.
    let mut statuses: Vec<Option<ExitStatus>> = vec![None; started.len()];
    let mut late = false;
    let mut failure = None;
    let count = started.len();
    let starts: Vec<Instant> = started.iter().map(|s| s.1).collect();
    let mut copies: Vec<CopyRun> = Vec::with_capacity(count);
    for (i, (launch, at, cpus, fd)) in started.into_iter().enumerate().rev() {
        let pid = launch.pid();
        match launch.wait() {
            Ok(o) => statuses[i] = Some(o.status),
            Err(e) => {
                failure.get_or_insert(format!(
                    "copy {} of {count} ({}, '{program}' pid {pid}) could not be waited for: {e}",
                    i + 1,
                    l.name
                ));
            }
        }
        let end = ends[i].unwrap_or_else(|| {
            late |= fd.is_none();
            Instant::now()
        });
        copies.push(CopyRun {
            copy: i,
            cpus,
            cpus_seen: seen[i].clone(),
            pid,
            seconds: end.duration_since(at).as_secs_f64(),
        });
    }
    copies.reverse();
    // Each copy's end, seen by its pidfd or, without one, at reaping.
    let wall = copies
        .iter()
        .map(|c| c.seconds)
        .zip(&starts)
        .map(|(secs, at)| at.duration_since(t0).as_secs_f64() + secs)
        .fold(0.0, f64::max);
    if let Some(f) = failure {
        return Err(CopiesError::Failed(f));
    }
    for (i, s) in statuses.iter().enumerate() {
        let what = |how: String| {
            CopiesError::Failed(format!(
                "copy {} of {count} ({}, CPUs {}, pid {}) of '{program}' {how}",
                i + 1,
                l.name,
                copies[i].cpus,
                copies[i].pid
            ))
        };
        match s {
            Some(ExitStatus::Exited(0)) => {}
            Some(ExitStatus::Exited(c)) => return Err(what(format!("exited with {c}"))),
            Some(ExitStatus::Signaled(sig)) => {
                return Err(what(format!("was ended by signal {sig}")))
            }
            None => return Err(what("was not seen to end".into())),
        }
    }
    Ok((
        RepRun {
            wall_seconds: wall,
            copies,
        },
        late,
    ))
}

/// The launcher's argument vector for one layout: `mpirun -np N
/// --bind-to none numalab run --per-rank map:CPUS --verify --verify-json
/// DIR/rank-{rank}.json -- CMD`, output moved to stderr as [`argv`] does.
fn mpi_argv(
    req: &CopiesRequest,
    mpi: &MpiLaunch,
    l: &Layout,
    dir: &std::path::Path,
) -> Vec<OsString> {
    let cpus: Vec<String> = l
        .procs
        .iter()
        .filter_map(|p| p.0.first())
        .map(|c| c.to_string())
        .collect();
    let mut v: Vec<OsString> = Vec::new();
    if req.output_to_stderr {
        v.extend(["sh", "-c", "exec \"$@\" 1>&2", "numalab-copy"].map(OsString::from));
    }
    if mpi.as_root {
        v.extend(
            [
                "env",
                "OMPI_ALLOW_RUN_AS_ROOT=1",
                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
            ]
            .map(OsString::from),
        );
    }
    v.push(mpi.mpirun.clone());
    v.extend(["-np".into(), l.procs.len().to_string().into()]);
    v.extend(["--bind-to", "none"].map(OsString::from));
    v.push(mpi.numalab.clone().into_os_string());
    v.extend(["run", "--per-rank"].map(OsString::from));
    v.push(format!("map:{}", cpus.join(",")).into());
    v.extend(["--verify", "--verify-json"].map(OsString::from));
    v.push(dir.join("rank-{rank}.json").into_os_string());
    v.push("--".into());
    v.extend(req.command.iter().cloned());
    v
}

/// One repetition of one layout under MPI: the launcher started unpinned,
/// its ranks' records read back.
fn run_mpi_layout(
    m: &Machine,
    req: &CopiesRequest,
    mpi: &MpiLaunch,
    l: &Layout,
    rep: usize,
) -> Result<RepRun, CopiesError> {
    let dir = mpi.records.join(format!("{}-{}", l.name, rep + 1));
    std::fs::create_dir_all(&dir)
        .map_err(|e| CopiesError::Failed(format!("{}: {e}", dir.display())))?;
    let args = mpi_argv(req, mpi, l, &dir);
    let launcher = mpi.mpirun.to_string_lossy().into_owned();
    let plan = LaunchPlan::new(m, None, MemoryPolicy::FirstTouch)?.prepare()?;
    let t0 = Instant::now();
    let launch = plan
        .spawn(&args[..])
        .map_err(|e| CopiesError::Failed(format!("{launcher} ({}): {e}", l.name)))?;
    let out = launch
        .wait()
        .map_err(|e| CopiesError::Failed(format!("waiting for {launcher}: {e}")))?;
    let wall = t0.elapsed().as_secs_f64();
    match out.status {
        ExitStatus::Exited(0) => {}
        ExitStatus::Exited(c) => {
            return Err(CopiesError::Failed(format!(
                "{launcher} -np {} ({}) exited with {c}",
                l.procs.len(),
                l.name
            )))
        }
        ExitStatus::Signaled(sig) => {
            return Err(CopiesError::Failed(format!(
                "{launcher} -np {} ({}) was ended by signal {sig}",
                l.procs.len(),
                l.name
            )))
        }
    }
    let mut copies = Vec::with_capacity(l.procs.len());
    for (i, (cpus, _)) in l.procs.iter().enumerate() {
        let path = dir.join(format!("rank-{i}.json"));
        let rec = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| crate::cluster::ranks::RankRecord::from_verify_json(&v))
            .ok_or_else(|| {
                CopiesError::Failed(format!(
                    "rank {i} of {} ({}) wrote no record at {}: did {launcher} start numalab for every rank?",
                    l.procs.len(),
                    l.name,
                    path.display()
                ))
            })?;
        copies.push(CopyRun {
            copy: i,
            cpus: cpus.clone(),
            cpus_seen: rec.cpus.union(&rec.seen_cpus),
            pid: 0,
            seconds: wall,
        });
    }
    Ok(RepRun {
        wall_seconds: wall,
        copies,
    })
}

/// Waits until every copy with a pidfd has exited, noting when each did.
fn wait_for_exits(
    started: &[(Launch, Instant, IdSet, Option<OwnedFd>)],
    ends: &mut [Option<Instant>],
) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        let open: Vec<usize> = (0..started.len())
            .filter(|&i| ends[i].is_none() && started[i].3.is_some())
            .collect();
        if open.is_empty() {
            return;
        }
        let mut fds: Vec<PollFd> = open
            .iter()
            .filter_map(|&i| started[i].3.as_ref())
            .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
            .collect();
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return,
        }
        let now = Instant::now();
        let ready: Vec<bool> = fds.iter().map(|f| f.any() == Some(true)).collect();
        for (&i, r) in open.iter().zip(ready) {
            if r {
                ends[i] = Some(now);
            }
        }
    }
}

/// Ends the copies already started (a later one could not be) and reaps
/// them, last to first.
fn abandon(started: Vec<(Launch, Instant, IdSet, Option<OwnedFd>)>) {
    for (launch, ..) in started.into_iter().rev() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(launch.pid()),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = launch.wait();
    }
}

/// A layout's figures over its repetitions.
fn summarize(m: &Machine, l: Layout, runs: Vec<RepRun>) -> LayoutRun {
    let cpus: Vec<IdSet> = l.procs.iter().map(|p| p.0.clone()).collect();
    let nodes: Vec<IdSet> = cpus
        .iter()
        .map(|c| c.iter().filter_map(|x| m.node_of_cpu(x)).collect())
        .collect();
    let mut per_node = std::collections::BTreeMap::<u32, usize>::new();
    for p in &l.procs {
        for c in p.0.iter() {
            *per_node.entry(m.node_of_cpu(c).unwrap_or(0)).or_default() += 1;
        }
    }
    let walls: Vec<f64> = runs.iter().map(|r| r.wall_seconds).collect();
    let copy_seconds = (0..l.procs.len())
        .filter_map(|i| {
            median(
                runs.iter()
                    .filter_map(|r| r.copies.get(i))
                    .map(|c| c.seconds)
                    .collect(),
            )
        })
        .collect();
    let verified = l.applicable
        && !runs.is_empty()
        && runs
            .iter()
            .all(|r| r.copies.iter().all(|c| c.cpus_seen == c.cpus));
    LayoutRun {
        layout: l.name.into(),
        applicable: l.applicable,
        note: l.note,
        processes: l.procs.len(),
        width: l.width,
        memory: l.procs.iter().map(|p| p.1.to_string()).collect(),
        cpus,
        nodes,
        per_node: per_node.values().copied().max().unwrap_or(0),
        wall_seconds: median(walls),
        copy_seconds,
        verified,
        runs,
    }
}

/// The split from `one` (1 per node) and `packed` (all on one node), with
/// projections to 1, 2, 4, ... up to four times the first node's CPUs.
fn split(
    m: &Machine,
    layouts: &[LayoutRun],
    mpi: bool,
) -> (Option<CoreContention>, Vec<Prediction>, Option<String>) {
    let get = |name: &str| layouts.iter().find(|l| l.layout == name && l.applicable);
    if mpi {
        return match (get("spread"), get("packed")) {
            (Some(spread), Some(packed)) => split_unpacked(m, spread, packed),
            _ => (
                None,
                Vec::new(),
                Some("the split needs the job run unpacked too, and this machine has no unpacked layout (see spread)".into()),
            ),
        };
    }
    let (Some(one), Some(packed)) = (get("one"), get("packed")) else {
        return (
            None,
            Vec::new(),
            Some("the split needs at least 2 copies (one alone, then several on one node)".into()),
        );
    };
    if packed
        .nodes
        .iter()
        .flat_map(|n| n.iter())
        .collect::<IdSet>()
        .len()
        != 1
    {
        return (
            None,
            Vec::new(),
            Some("the split needs the packed copies on one node, and they span several".into()),
        );
    }
    fit_pair(m, one, 1, packed)
}

/// Under MPI: the same job unpacked (spread, fewer ranks a node) and packed.
fn split_unpacked(
    m: &Machine,
    spread: &LayoutRun,
    packed: &LayoutRun,
) -> (Option<CoreContention>, Vec<Prediction>, Option<String>) {
    if spread.per_node == packed.per_node {
        return (
            None,
            Vec::new(),
            Some(format!(
                "spread puts as many ranks on a node as packed ({}): this machine has too few nodes with CPUs for an unpacked run",
                packed.per_node
            )),
        );
    }
    fit_pair(m, spread, spread.per_node, packed)
}

/// The split from `base`'s time at `base_cores` a node and `packed`'s at
/// its ranks or copies a node.
fn fit_pair(
    m: &Machine,
    base: &LayoutRun,
    base_cores: usize,
    packed: &LayoutRun,
) -> (Option<CoreContention>, Vec<Prediction>, Option<String>) {
    let (Some(tb), Some(tp)) = (base.wall_seconds, packed.wall_seconds) else {
        return (
            None,
            Vec::new(),
            Some("no time was measured (interrupted)".into()),
        );
    };
    let pts = [
        TimedPoint {
            cores: base_cores,
            seconds: tb,
            per_core_bandwidth: None,
        },
        TimedPoint {
            cores: packed.per_node,
            seconds: tp,
            per_core_bandwidth: None,
        },
    ];
    fit_and_project(m, packed, &pts)
}

/// The fit of `pts`, with projections to 1, 2, 4, ... up to four times the
/// CPUs of packed's first node.
fn fit_and_project(
    m: &Machine,
    packed: &LayoutRun,
    pts: &[TimedPoint],
) -> (Option<CoreContention>, Vec<Prediction>, Option<String>) {
    match CoreContention::fit(pts) {
        Ok(f) => {
            let node = packed.nodes.first().and_then(|n| n.first()).unwrap_or(0);
            let top = (m.allowed_cpus_of(node).len() * 4).max(4);
            let preds = (0..)
                .map(|k| 1usize << k)
                .take_while(|&c| c <= top)
                .flat_map(|k| [1.0, 2.0].map(|r| f.predict(k, r)))
                .collect();
            (Some(f), preds, None)
        }
        Err(e) => (None, Vec::new(), Some(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;

    #[test]
    fn the_quartet_packs_two_copies_on_node_0_and_spreads_them_over_two_nodes() {
        let q = fixture("qemu-quartet-4n2c-ring.xml");
        let ls = plan_layouts(&q, 2, false, false);
        let names: Vec<&str> = ls.iter().map(|l| l.name).collect();
        assert_eq!(names, ["one", "packed", "spread"]);
        let nodes = |l: &Layout| -> Vec<u32> {
            l.procs
                .iter()
                .map(|p| q.node_of_cpu(p.0.first().unwrap()).unwrap())
                .collect()
        };
        assert_eq!(nodes(&ls[1]), [0, 0]);
        let s = nodes(&ls[2]);
        assert_ne!(s[0], s[1]);
        assert_eq!(ls[1].procs[0].1.to_string(), "bind:0");
        // Five copies do not spread over four nodes.
        let ls = plan_layouts(&q, 5, false, false);
        assert!(!ls[2].applicable);
        assert_eq!(
            ls[2].note.as_deref(),
            Some("spread: not applicable: needs 5 nodes with CPUs, this machine has 4")
        );
        // Threads: one process over the N CPUs.
        let ls = plan_layouts(&q, 2, true, false);
        assert_eq!(ls[1].procs.len(), 1);
        assert_eq!(ls[1].procs[0].0.len(), 2);
    }

    #[test]
    fn argv_sets_the_variable_and_moves_output() {
        let req = CopiesRequest {
            copies: 4,
            env: Some("OMP_NUM_THREADS".into()),
            reps: 1,
            command: vec!["prog".into(), "x".into()],
            output_to_stderr: true,
            mpi: None,
        };
        let v = argv(&req, 4);
        let v: Vec<&str> = v.iter().map(|s| s.to_str().unwrap()).collect();
        assert_eq!(
            v,
            [
                "sh",
                "-c",
                "exec \"$@\" 1>&2",
                "numalab-copy",
                "env",
                "OMP_NUM_THREADS=4",
                "prog",
                "x"
            ]
        );
    }

    #[test]
    fn mpi_jobs_pack_and_deal_ranks_and_place_each_by_map() {
        let q = fixture("qemu-quartet-4n2c-ring.xml");
        let ls = plan_layouts(&q, 4, false, true);
        let names: Vec<&str> = ls.iter().map(|l| l.name).collect();
        assert_eq!(names, ["packed", "spread"], "no single rank under MPI");
        let cpus =
            |l: &Layout| -> Vec<u32> { l.procs.iter().map(|p| p.0.first().unwrap()).collect() };
        assert_eq!(cpus(&ls[0]), [0, 1, 2, 3]);
        assert_eq!(cpus(&ls[1]), [0, 2, 4, 6]);
        // Six ranks on four nodes: dealt, two a node at most (packed: two
        // on each of three nodes, as many: no unpacked run).
        let ls = plan_layouts(&q, 6, false, true);
        assert!(!ls[1].applicable);
        assert_eq!(
            ls[1].note.as_deref(),
            Some("spread: not applicable: dealing 6 ranks over 4 nodes with CPUs puts as many on a node as packing them (2)")
        );
        // Eight nodes of 8 CPUs: packed puts 8 on node 0, dealt 2 a node.
        let big = fixture("64amd64-4s2n4ca2co.xml");
        let ls = plan_layouts(&big, 12, false, true);
        assert!(ls[1].applicable);
        assert_eq!(
            ls[1].note.as_deref(),
            Some("spread: 12 ranks dealt over 8 nodes with CPUs, up to 2 a node")
        );
        let req = CopiesRequest {
            copies: 4,
            env: None,
            reps: 1,
            command: vec!["./app".into()],
            output_to_stderr: false,
            mpi: Some(MpiLaunch {
                mpirun: "mpirun".into(),
                numalab: "/bin/numalab".into(),
                records: "/tmp/r".into(),
                as_root: false,
            }),
        };
        let ls = plan_layouts(&q, 4, false, true);
        let v = mpi_argv(
            &req,
            req.mpi.as_ref().unwrap(),
            &ls[1],
            std::path::Path::new("/tmp/r/spread-1"),
        );
        let v: Vec<&str> = v.iter().map(|s| s.to_str().unwrap()).collect();
        assert_eq!(
            v,
            [
                "mpirun",
                "-np",
                "4",
                "--bind-to",
                "none",
                "/bin/numalab",
                "run",
                "--per-rank",
                "map:0,2,4,6",
                "--verify",
                "--verify-json",
                "/tmp/r/spread-1/rank-{rank}.json",
                "--",
                "./app"
            ]
        );
    }

    #[test]
    fn mpi_split_takes_spread_and_packed_ranks_a_node_as_the_two_core_counts() {
        let q = fixture("qemu-quartet-4n2c-ring.xml");
        let run = |name: &str, per_node: usize, secs: f64| LayoutRun {
            layout: name.into(),
            applicable: true,
            note: None,
            processes: 4,
            width: 4,
            cpus: vec![],
            nodes: vec![IdSet::single(0)],
            memory: vec![],
            per_node,
            runs: vec![],
            wall_seconds: Some(secs),
            copy_seconds: vec![],
            verified: true,
        };
        // Unpacked one a node in 10 s, packed two a node in 14 s: 4 s of
        // contention a rank added on the node.
        let (fit, preds, note) = split(&q, &[run("packed", 2, 14.0), run("spread", 1, 10.0)], true);
        let fit = fit.unwrap_or_else(|| panic!("{note:?}"));
        let cores: Vec<usize> = fit.points.iter().map(|p| p.cores).collect();
        assert_eq!(cores, [1, 2]);
        assert!(
            (fit.core_seconds + fit.contention_seconds * 1.0 - 10.0).abs() < 1e-9,
            "{fit:?}"
        );
        assert!(fit.contention_seconds > 0.0, "{fit:?}");
        assert!(!preds.is_empty());
        // No unpacked run: said, not fitted.
        let mut spread = run("spread", 2, 10.0);
        spread.applicable = false;
        let (fit, _, note) = split(&q, &[run("packed", 2, 14.0), spread], true);
        assert!(fit.is_none());
        assert!(note
            .unwrap()
            .starts_with("the split needs the job run unpacked too"));
    }
}
