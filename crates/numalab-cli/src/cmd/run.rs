//! `numalab run [PLACEMENT] [--verify] -- CMD ARGS...`: launch a command with
//! CPU and memory placement. numactl's option names work as aliases.
//!
//! The child gets its CPU mask (sched_setaffinity) and task memory policy
//! (set_mempolicy) between fork and exec, so both hold from its first
//! instruction and are inherited by its threads and children. With
//! `--verify` the child runs under ptrace with PTRACE_O_TRACEEXIT: at its
//! exit, before its memory is torn down, numalab reads /proc/PID/numa_maps.

use crate::cmd::place::cpuless_hint;
use crate::cmd::verify::render;
use crate::output::{load_machine, CliError, CliResult};
use numalab::placement::{
    sys::{self, Mode},
    ListMeaning, MemoryPolicy, ProcessPlacement, Realization, ResourceSet, SysfsWeights,
    WeightedImpl,
};
use numalab::{IdSet, Machine};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// CPUs the command may run on (set grammar: 0-3, node:1, package:0, l3:0, ...).
    #[arg(long, value_name = "SET")]
    cpus: Option<String>,
    /// Memory policy of the command (see `numalab place --help`).
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
    /// Weighted interleave by the kernel only (emulation needs a buffer, see `place`).
    #[arg(long, value_name = "auto|kernel", default_value = "auto")]
    weighted_impl: String,
    /// Report where the command's memory and threads were when it exited (on stderr).
    #[arg(long)]
    verify: bool,
    /// With --verify: write the report as JSON to FILE instead of text on stderr.
    #[arg(long, value_name = "FILE", requires = "verify")]
    verify_json: Option<PathBuf>,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// Signals forwarded to the child when someone sends them to numalab.
const FORWARDED: [i32; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

struct Plan {
    cpus: Option<IdSet>,
    mode: Mode,
    nodes: IdSet,
    weights: Option<Vec<(u32, u32)>>,
    describe: String,
}

fn plan(m: &Machine, a: &Args) -> Result<Plan, CliError> {
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
    let weighted = match a.weighted_impl.as_str() {
        "auto" | "kernel" => WeightedImpl::Kernel,
        other => {
            return Err(CliError::usage(format!(
                "--weighted-impl '{other}' is not possible for run (emulation needs a buffer, see numalab place); valid: auto, kernel"
            )))
        }
    };
    // `remote` is relative to where the command runs: its CPUs must be on one node.
    let home = cpus.as_ref().and_then(|c| {
        let nodes: IdSet = c.iter().filter_map(|x| m.node_of_cpu(x)).collect();
        (nodes.len() == 1).then(|| nodes.first()).flatten()
    });
    if matches!(policy, MemoryPolicy::Remote { .. }) && home.is_none() {
        return Err(CliError::usage(
            "remote placement for run needs the command's CPUs on one node: add --cpus node:N",
        ));
    }
    let r = policy.realize(m, home, weighted)?;
    let (mode, nodes, weights) = match r {
        Realization::Kernel { mode, nodes } => (mode, nodes, None),
        Realization::KernelWeighted { nodes, weights } => {
            (Mode::WeightedInterleave, nodes, Some(weights))
        }
        Realization::Chunks { .. } => {
            return Err(CliError::usage(format!(
                "{policy} needs chunk-wise placement of a known buffer, which a whole process does not have; use interleave:NODES (one page at a time) or numalab place"
            )))
        }
    };
    if mode != Mode::Default {
        sys::kernel_supports(mode).map_err(CliError::failed)?;
    }
    let describe = format!(
        "cpus {{{}}}, memory {policy}",
        cpus.as_ref().map(|c| c.to_string()).unwrap_or("all".into())
    );
    Ok(Plan {
        cpus,
        mode,
        nodes,
        weights,
        describe,
    })
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let plan = plan(&m, &a)?;
    let _weights = match &plan.weights {
        Some(w) => {
            let g = SysfsWeights::set(w)?;
            eprintln!(
                "numalab: weighted interleave weights set for the command's lifetime: {}",
                g.describe()
            );
            Some(g)
        }
        None => None,
    };

    // Block the forwarded signals before any thread exists, so every thread
    // inherits the mask and only the forwarder sees them.
    let mut set = sigset(&FORWARDED);
    // SAFETY: plain mask manipulation on this thread.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };

    let (cpus_words, cpus_len) = match &plan.cpus {
        Some(c) => {
            let w = c.to_words(1024);
            let l = w.len() * 8;
            (Some(w), l)
        }
        None => (None, 0),
    };
    let (mode, nodes_words) = (plan.mode, plan.nodes.to_words(1024));
    let has_nodes = !plan.nodes.is_empty();
    let trace = a.verify;
    let mut cmd = std::process::Command::new(&a.command[0]);
    cmd.args(&a.command[1..]);
    // SAFETY: only async-signal-safe calls (raw syscalls) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let unblock = sigset(&FORWARDED);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &unblock, std::ptr::null_mut());
            if let Some(w) = &cpus_words {
                if libc::syscall(libc::SYS_sched_setaffinity, 0, cpus_len, w.as_ptr()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if mode != Mode::Default {
                let (ptr, maxnode) = if has_nodes {
                    (nodes_words.as_ptr(), nodes_words.len() * 64 + 1)
                } else {
                    (std::ptr::null(), 0)
                };
                if libc::syscall(libc::SYS_set_mempolicy, mode as libc::c_int, ptr, maxnode) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if trace && libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        CliError {
            msg: format!("cannot run '{}' with {}: {e}", a.command[0], plan.describe),
            code,
        }
    })?;
    let pid = child.id() as i32;
    std::thread::spawn(move || forward_signals(pid));

    let (status, report) = wait_child(pid, trace);
    // SAFETY: restore the mask so a re-raised signal is delivered.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
    if trace {
        match (&report, &a.verify_json) {
            (Some(Ok(p)), Some(path)) => {
                let text = serde_json::to_string_pretty(p).unwrap_or_default() + "\n";
                if let Err(e) = std::fs::write(path, text) {
                    eprintln!("numalab: cannot write {}: {e}", path.display());
                }
            }
            (Some(Ok(p)), None) => {
                eprintln!(
                    "numalab: placement of '{}' at exit ({}):",
                    a.command[0], plan.describe
                );
                eprint!("{}", render(p, false));
            }
            (Some(Err(e)), _) => {
                eprintln!("numalab: could not read the command's placement at exit: {e}")
            }
            (None, _) => {
                eprintln!("numalab: the command's exit was not seen, so its placement was not read")
            }
        }
    }
    drop(_weights);
    // Propagate: same exit code, or die of the same signal.
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: default disposition, then raise on ourselves.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            sigemptyset_add(&mut set, sig);
            libc::raise(sig);
        }
        return Ok(ExitCode::from((128 + sig) as u8));
    }
    Ok(ExitCode::from(libc::WEXITSTATUS(status) as u8))
}

fn sigset(sigs: &[i32]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data initialized by sigemptyset.
    unsafe {
        let mut s: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut s);
        for &g in sigs {
            libc::sigaddset(&mut s, g);
        }
        s
    }
}

unsafe fn sigemptyset_add(s: &mut libc::sigset_t, sig: i32) {
    // SAFETY: caller passes a valid sigset.
    unsafe {
        libc::sigemptyset(s);
        libc::sigaddset(s, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, s, std::ptr::null_mut());
    }
}

/// Sends the child every forwarded signal sent to numalab by a process.
/// Terminal-generated ones (SI_KERNEL) already reach the child through its
/// process group, so they are not sent twice.
fn forward_signals(pid: i32) {
    let set = sigset(&FORWARDED);
    loop {
        // SAFETY: siginfo is written by the kernel.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let sig = unsafe { libc::sigwaitinfo(&set, &mut info) };
        if sig < 0 {
            continue;
        }
        if info.si_code != libc::SI_KERNEL {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, sig) };
        }
    }
}

/// Waits for the child; under ptrace, reinjects signals and reads the
/// placement at the exit event.
fn wait_child(
    pid: i32,
    trace: bool,
) -> (
    i32,
    Option<Result<ProcessPlacement, numalab::placement::PlacementError>>,
) {
    let mut report = None;
    let mut first_stop = trace;
    loop {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return (status, report);
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            return (status, report);
        }
        if !libc::WIFSTOPPED(status) {
            continue;
        }
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        let mut inject = 0;
        if first_stop && sig == libc::SIGTRAP {
            // The stop after exec: ask for the exit event, and kill the
            // child if numalab dies so it never stays stopped.
            first_stop = false;
            // SAFETY: tracing our own stopped child.
            unsafe {
                libc::ptrace(
                    libc::PTRACE_SETOPTIONS,
                    pid,
                    0,
                    (libc::PTRACE_O_TRACEEXIT | libc::PTRACE_O_EXITKILL) as libc::c_ulong,
                )
            };
        } else if sig == libc::SIGTRAP && event == libc::PTRACE_EVENT_EXIT {
            report = Some(ProcessPlacement::read(pid));
        } else {
            inject = sig;
        }
        // SAFETY: resuming our own stopped child.
        unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, inject as libc::c_ulong) };
    }
}
