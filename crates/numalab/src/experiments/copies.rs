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
    let layouts = plan_layouts(m, n, req.env.is_some());
    let mut runs: Vec<Vec<RepRun>> = vec![Vec::new(); layouts.len()];
    let mut warnings = Vec::new();
    'reps: for rep in 0..req.reps {
        for (i, l) in layouts.iter().enumerate().filter(|(_, l)| l.applicable) {
            if cancel::requested() {
                warnings.push(cancel::WARNING.to_string());
                break 'reps;
            }
            progress(&format!("{} rep {}/{}", l.name, rep + 1, req.reps));
            let (run, late) = run_layout(m, req, l)?;
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
    let (model, predictions, model_note) = split(m, &layouts);
    Ok(CopiesResult {
        argv: req
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        mode: if req.env.is_some() {
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

/// `one` (when n > 1), `packed` and `spread`, placed on this machine.
fn plan_layouts(m: &Machine, n: usize, threads: bool) -> Vec<Layout> {
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
    if n > 1 {
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
) -> (Option<CoreContention>, Vec<Prediction>, Option<String>) {
    let get = |name: &str| layouts.iter().find(|l| l.layout == name);
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
    let (Some(t1), Some(tn)) = (one.wall_seconds, packed.wall_seconds) else {
        return (
            None,
            Vec::new(),
            Some("no time was measured (interrupted)".into()),
        );
    };
    let pts = [
        TimedPoint {
            cores: 1,
            seconds: t1,
            per_core_bandwidth: None,
        },
        TimedPoint {
            cores: packed.per_node,
            seconds: tn,
            per_core_bandwidth: None,
        },
    ];
    match CoreContention::fit(&pts) {
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
        let ls = plan_layouts(&q, 2, false);
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
        let ls = plan_layouts(&q, 5, false);
        assert!(!ls[2].applicable);
        assert_eq!(
            ls[2].note.as_deref(),
            Some("spread: not applicable: needs 5 nodes with CPUs, this machine has 4")
        );
        // Threads: one process over the N CPUs.
        let ls = plan_layouts(&q, 2, true);
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
}
