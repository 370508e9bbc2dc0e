//! Launching a command with CPU and memory placement, as `numalab run` does.
//!
//! - The child gets its CPU mask (sched_setaffinity) and task memory policy
//!   (set_mempolicy) between fork and exec, so both hold from its first
//!   instruction and are inherited by its threads and children.
//! - Signals a process sends to this one ([`FORWARDED`]) are passed on to the
//!   child; terminal-generated ones already reach the child through its
//!   process group and are not sent twice.
//! - With [`LaunchPlan::verify_at_exit`] the child runs under ptrace with
//!   PTRACE_O_TRACEEXIT: at its exit, before its memory is torn down, its
//!   placement is read ([`ProcessPlacement::read`]). Other signals that stop
//!   it are delivered as they would have been.
//! - With [`PreparedLaunch::follow_tasks`] the tracing follows every thread
//!   and child process the command starts (PTRACE_O_TRACECLONE, FORK and
//!   VFORK), and a [`TaskObserver`] hears of each task before its first
//!   instruction and at its exit (per-thread counters,
//!   `measure::task_counters`). The wait then lasts until every traced
//!   task has ended, as under `strace -f`.
//! - [`ExitStatus::propagate`] ends this process as the command ended.
//!
//! ```no_run
//! use numalab::placement::launch::{ExitStatus, LaunchPlan};
//! use numalab::placement::MemoryPolicy;
//! use numalab::{IdSet, Machine};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let m = Machine::load(None)?;
//! let plan = LaunchPlan::new(&m, Some(IdSet::single(0)), MemoryPolicy::Local)?
//!     .verify_at_exit(true);
//! let outcome = plan.prepare()?.spawn(&["sh", "-c", "exit 3"])?.wait()?;
//! assert_eq!(outcome.status, ExitStatus::Exited(3));
//! let placement = outcome.placement.expect("exit seen")?;
//! println!("{} mappings at exit", placement.mappings.len());
//! # Ok(())
//! # }
//! ```

use super::buffer::SysfsWeights;
use super::memory_policy::{MemoryPolicy, Realization, WeightedImpl};
use super::sys::{self, KernelMask, Mode};
use super::verify::ProcessPlacement;
use super::{PlacementError, PlacementError as E};
use crate::machine::Machine;
pub use crate::sys::process::ResourceUsage;
use crate::sys::process::{self, pipe, ExecSetup};
use crate::IdSet;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::ptrace;
use nix::sys::signal::{kill, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::Pid;
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsFd;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Signals passed on to the child when a process sends them to this one.
pub const FORWARDED: [Signal; 6] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// Where a command is to run and where its memory is to go.
#[derive(Debug, Clone)]
pub struct LaunchPlan {
    cpus: Option<IdSet>,
    policy: MemoryPolicy,
    mode: Mode,
    nodes: IdSet,
    weights: Option<Vec<(u32, u32)>>,
    stripes: Option<Vec<(u32, u64)>>,
    verify: bool,
}

impl LaunchPlan {
    /// Turns a CPU set (`None`: wherever this process may run) and a memory
    /// policy into what the kernel is asked for the whole process.
    ///
    /// `remote` is relative to where the command runs, so it needs CPUs on
    /// one node; policies that place a known buffer chunk by chunk have no
    /// meaning for a process; weighted interleave is the kernel's (Linux
    /// >= 6.9). Modes the running kernel lacks are refused here, not at exec.
    pub fn new(
        m: &Machine,
        cpus: Option<IdSet>,
        policy: MemoryPolicy,
    ) -> Result<Self, PlacementError> {
        Self::build(m, cpus, policy, WeightedImpl::Kernel, false)
    }

    /// [`LaunchPlan::new`] for a command that runs with numalab's preload
    /// library, which places chunk-wise what the kernel cannot: stripes
    /// of `interleave:NODES@PAGES`, and `weighted:` where the kernel has
    /// no weighted interleave or `weighted` is [`WeightedImpl::Emulate`]
    /// ([`LaunchPlan::stripes`] says which; the command's task policy is
    /// then page interleave over the same nodes, for the memory the
    /// library does not see: thread stacks, memory mapped by libc itself).
    pub fn with_library(
        m: &Machine,
        cpus: Option<IdSet>,
        policy: MemoryPolicy,
        weighted: WeightedImpl,
    ) -> Result<Self, PlacementError> {
        Self::build(m, cpus, policy, weighted, true)
    }

    fn build(
        m: &Machine,
        cpus: Option<IdSet>,
        policy: MemoryPolicy,
        weighted: WeightedImpl,
        library: bool,
    ) -> Result<Self, PlacementError> {
        if cpus.as_ref().is_some_and(IdSet::is_empty) {
            return Err(E::Invalid(
                "a command needs at least one CPU to run on".into(),
            ));
        }
        let home = cpus.as_ref().and_then(|c| {
            let nodes: IdSet = c.iter().filter_map(|x| m.node_of_cpu(x)).collect();
            (nodes.len() == 1).then(|| nodes.first()).flatten()
        });
        if matches!(policy, MemoryPolicy::Remote { .. }) && home.is_none() {
            return Err(E::Invalid(
                "remote placement for run needs the command's CPUs on one node: add --cpus node:N"
                    .into(),
            ));
        }
        let (mode, nodes, weights, stripes) = match policy.realize(m, home, weighted)? {
            Realization::Kernel { mode, nodes } => (mode, nodes, None, None),
            Realization::KernelWeighted { nodes, weights } => {
                (Mode::WeightedInterleave, nodes, Some(weights), None)
            }
            Realization::Chunks { pattern } if library => {
                let nodes = pattern.iter().map(|p| p.0).collect();
                (Mode::Interleave, nodes, None, Some(pattern))
            }
            Realization::Chunks { .. } => return Err(E::Invalid(format!(
                "{policy} needs chunk-wise placement of a known buffer, which a whole process does not have; use interleave:NODES (one page at a time) or numalab place"
            ))),
        };
        if mode != Mode::Default {
            sys::kernel_supports(mode).map_err(E::Unsupported)?;
        }
        Ok(Self {
            cpus,
            policy,
            mode,
            nodes,
            weights,
            stripes,
            verify: false,
        })
    }

    /// The stripes the preload library lays on every mapping the command
    /// makes, `(node, pages)` repeating; `None` when the kernel's policy
    /// does it all.
    pub fn stripes(&self) -> Option<&[(u32, u64)]> {
        self.stripes.as_deref()
    }

    /// Whether to trace the command and read its placement when it exits.
    pub fn verify_at_exit(mut self, on: bool) -> Self {
        self.verify = on;
        self
    }

    /// The CPUs the command may run on (`None`: this process's).
    pub fn cpus(&self) -> Option<&IdSet> {
        self.cpus.as_ref()
    }

    /// The memory policy as asked.
    pub fn policy(&self) -> &MemoryPolicy {
        &self.policy
    }

    /// The kernel mode and nodes the command's task policy gets.
    pub fn kernel_policy(&self) -> (Mode, &IdSet) {
        (self.mode, &self.nodes)
    }

    /// Sets what must hold before the command starts (the kernel's
    /// weighted-interleave weights, restored when the launch ends) and
    /// builds the kernel masks the child applies.
    pub fn prepare(&self) -> Result<PreparedLaunch, PlacementError> {
        let weights = self.weights.as_deref().map(SysfsWeights::set).transpose()?;
        Ok(PreparedLaunch {
            cpus: self.cpus.as_ref().map(KernelMask::new),
            mode: self.mode,
            nodes: KernelMask::new(&self.nodes),
            trace: self.verify,
            placement: self.to_string(),
            weights,
            env: Vec::new(),
            quiet: false,
            before_exec: Vec::new(),
            observer: None,
            end_with_this_process: false,
        })
    }
}

/// "cpus {0-3}, memory bind:1", or "cpus {all}, ..." without a CPU set.
impl fmt::Display for LaunchPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cpus {
            Some(c) => write!(f, "cpus {{{c}}}, memory {}", self.policy),
            None => write!(f, "cpus {{all}}, memory {}", self.policy),
        }
    }
}

/// A plan whose system-wide settings are made and whose masks are built:
/// ready to spawn.
pub struct PreparedLaunch {
    cpus: Option<KernelMask>,
    mode: Mode,
    nodes: KernelMask,
    trace: bool,
    placement: String,
    weights: Option<SysfsWeights>,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    quiet: bool,
    before_exec: Vec<BeforeExec>,
    observer: Option<Box<dyn TaskObserver>>,
    end_with_this_process: bool,
}

/// Told of every task (thread or process) of a command launched with
/// [`PreparedLaunch::follow_tasks`], from the thread that waits for it.
pub trait TaskObserver: Send {
    /// Task `tid` exists and is stopped before its first instruction of the
    /// command's code (the command itself after its exec, a new thread or
    /// process before it runs).
    fn started(&mut self, tid: i32);
    /// Task `tid` is exiting: stopped with its `/proc` entry still there.
    fn ended(&mut self, tid: i32);
}

/// Work done on the child process (given its pid) while it waits between
/// fork and exec, e.g. opening counters on it (`measure::counters`).
type BeforeExec = Box<dyn FnOnce(i32) + Send>;

impl PreparedLaunch {
    /// Sets `key` to `value` in the command's environment.
    pub fn with_env(
        mut self,
        key: impl Into<std::ffi::OsString>,
        value: impl Into<std::ffi::OsString>,
    ) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Sends the command's standard output and error to /dev/null (runs
    /// that are only timed).
    pub fn quiet(mut self) -> Self {
        self.quiet = true;
        self
    }

    /// Runs `hook` with the command's pid on another thread of this process
    /// while the command waits before its exec, so that what the hook sets
    /// up on it (counters enabled at exec) holds from its first instruction.
    /// The command goes on when the hook returns or unwinds. Hooks run in
    /// the order given.
    pub fn before_exec(mut self, hook: impl FnOnce(i32) + Send + 'static) -> Self {
        self.before_exec.push(Box::new(hook));
        self
    }

    /// Traces the command and every thread and process it starts, telling
    /// `observer` of each ([`TaskObserver`]). [`Launch::wait`] then reaps
    /// every child of this process: the caller must have no other child
    /// it waits for while the launch runs.
    pub fn follow_tasks(mut self, observer: Box<dyn TaskObserver>) -> Self {
        self.trace = true;
        self.observer = Some(observer);
        self
    }

    /// Ends the command (SIGKILL) if this process dies first, however it
    /// dies (PR_SET_PDEATHSIG): for a measurement session (`profile`), whose
    /// command is instrumented for it. Off by default, as with numactl: a
    /// `run` that is killed leaves its command running.
    pub fn end_with_this_process(mut self, on: bool) -> Self {
        self.end_with_this_process = on;
        self
    }

    /// The kernel weighted-interleave weights set for the command's lifetime.
    pub fn weights(&self) -> Option<&SysfsWeights> {
        self.weights.as_ref()
    }

    /// Starts `command` (program and arguments, the program looked up in
    /// PATH) with the plan's placement.
    ///
    /// The [`FORWARDED`] signals are blocked in the calling thread until the
    /// launch ends, and a forwarding thread takes them. Call this before
    /// starting other threads (threads started later inherit the block), or
    /// block these signals in them: a thread that does not block them takes
    /// their default action instead. [`Launch::wait`] must be called from
    /// this thread too (ptrace answers only to it), which is why a
    /// [`Launch`] cannot be sent to another.
    pub fn spawn<S: AsRef<OsStr>>(self, command: &[S]) -> Result<Launch, SpawnError> {
        let fail = |source: io::Error| SpawnError {
            program: command
                .first()
                .map(|p| p.as_ref().to_string_lossy().into_owned())
                .unwrap_or_default(),
            placement: self.placement.clone(),
            source,
        };
        let Some((program, args)) = command.split_first() else {
            return Err(fail(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no command given",
            )));
        };
        let forwarded: SigSet = FORWARDED.into_iter().collect();
        let saved_mask = forwarded
            .thread_swap_mask(SigmaskHow::SIG_BLOCK)
            .map_err(|e| fail(e.into()))?;
        let restore = |e: io::Error| {
            let _ = saved_mask.thread_set_mask();
            fail(e)
        };
        let signals =
            SignalFd::with_flags(&forwarded, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
                .map_err(|e| restore(e.into()))?;
        let stop = EventFd::from_flags(EfdFlags::EFD_CLOEXEC).map_err(|e| restore(e.into()))?;

        let (cpus, mode, nodes, trace) = (self.cpus, self.mode, self.nodes, self.trace);
        let parent = std::process::id() as libc::pid_t;
        let end_with_parent = self.end_with_this_process;
        let gate = if self.before_exec.is_empty() {
            None
        } else {
            Some(ExecGate::start(self.before_exec).map_err(&restore)?)
        };
        let gate_fds = gate.as_ref().map(ExecGate::child_fds);
        let mut cmd = Command::new(program);
        cmd.args(args);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if self.quiet {
            cmd.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
        }
        ExecSetup {
            signal_mask: saved_mask,
            end_with_parent: end_with_parent.then_some(parent),
            cpus,
            policy: (mode != Mode::Default).then_some((mode, nodes)),
            trace,
            gate: gate_fds,
        }
        .install(&mut cmd);
        let spawned = cmd.spawn();
        if let Some(g) = gate {
            g.finish();
        }
        let child = spawned.map_err(restore)?;
        let pid = Pid::from_raw(child.id() as i32);
        let forwarder = match Forwarder::start(pid, signals, stop) {
            Ok(f) => f,
            Err(e) => {
                // Nothing would pass signals on: do not leave the child running.
                let _ = kill(pid, Signal::SIGKILL);
                let _ = waitpid_raw(pid);
                return Err(restore(e));
            }
        };
        Ok(Launch {
            pid,
            trace,
            observer: self.observer,
            forwarder: Some(forwarder),
            saved_mask,
            _weights: self.weights,
            _this_thread: PhantomData,
        })
    }
}

/// The handshake of [`PreparedLaunch::before_exec`]: the child writes its
/// pid to one pipe and waits on another until a thread of this process has
/// run the hooks on it (the spawning thread itself is blocked in `spawn`
/// until the exec).
struct ExecGate {
    /// The child's ends: it writes its pid here...
    pid_w: std::fs::File,
    /// ...and reads here until the hooks ran (a byte) or the thread is gone (EOF).
    go_r: std::fs::File,
    thread: JoinHandle<()>,
    /// The thread's write end, which the child closes (its copy) so that
    /// the thread's end alone keeps the pipe open.
    go_w_raw: i32,
}

impl ExecGate {
    fn start(hooks: Vec<BeforeExec>) -> io::Result<Self> {
        use std::io::{Read, Write};
        let (mut pid_r, pid_w) = pipe()?;
        let (go_r, mut go_w) = pipe()?;
        let go_w_raw = std::os::fd::AsRawFd::as_raw_fd(&go_w);
        let thread = std::thread::Builder::new()
            .name("numalab-exec-gate".into())
            .spawn(move || {
                let mut b = [0u8; 4];
                // EOF: the child ended before its gate.
                if pid_r.read_exact(&mut b).is_err() {
                    return;
                }
                let pid = i32::from_ne_bytes(b);
                for hook in hooks {
                    hook(pid);
                }
                let _ = go_w.write_all(&[1]);
            })?;
        Ok(Self {
            pid_w,
            go_r,
            thread,
            go_w_raw,
        })
    }

    fn child_fds(&self) -> [i32; 3] {
        use std::os::fd::AsRawFd;
        [self.pid_w.as_raw_fd(), self.go_r.as_raw_fd(), self.go_w_raw]
    }

    /// After `spawn` returned: closes this process's copies of the child's
    /// ends (so the thread sees EOF if the child never wrote) and joins it.
    fn finish(self) {
        drop(self.pid_w);
        drop(self.go_r);
        let _ = self.thread.join();
    }
}

/// Why a command could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot run '{program}' with {placement}: {source}")]
pub struct SpawnError {
    /// The program as given.
    pub program: String,
    /// The plan, as [`LaunchPlan`]'s `Display` writes it.
    pub placement: String,
    pub source: io::Error,
}

impl SpawnError {
    /// The shell's exit code for it: 127 when the program was not found,
    /// 126 when it could not be run.
    pub fn exit_code(&self) -> u8 {
        if self.source.kind() == io::ErrorKind::NotFound {
            127
        } else {
            126
        }
    }
}

/// A running command. Dropping it without [`Launch::wait`] leaves the
/// command running and stops forwarding signals to it.
pub struct Launch {
    pid: Pid,
    trace: bool,
    observer: Option<Box<dyn TaskObserver>>,
    forwarder: Option<Forwarder>,
    saved_mask: SigSet,
    _weights: Option<SysfsWeights>,
    /// The signal mask and the ptrace link belong to the spawning thread.
    _this_thread: PhantomData<*const ()>,
}

/// How a launched command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code (0 to 255).
    Exited(i32),
    /// A signal ended it (any signal number, real-time ones included).
    Signaled(i32),
}

/// What [`Launch::wait`] saw.
#[derive(Debug)]
pub struct LaunchOutcome {
    pub status: ExitStatus,
    /// The first SIGINT, SIGTERM or SIGHUP this process received while the
    /// command ran (from a process, or from the terminal, which sent it to
    /// the command too): a caller with more to run after the command stops
    /// there.
    pub interrupted_by: Option<i32>,
    /// With [`LaunchPlan::verify_at_exit`]: the command's placement read at
    /// its exit, or why it could not be read. `None` without tracing, or
    /// when the exit was not seen (a SIGKILL may end a process without it).
    pub placement: Option<Result<ProcessPlacement, PlacementError>>,
    /// What the kernel accounted to the command when it was reaped
    /// (`wait4`'s rusage: its threads and the children it waited for).
    /// `None` when its end was not reaped here.
    pub usage: Option<ResourceUsage>,
}

impl Launch {
    /// The command's process id.
    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Waits for the command to end. Under tracing, reads its placement at
    /// the exit event and delivers every other signal that stopped it.
    /// Then stops forwarding, restores this thread's signal mask and the
    /// sysfs weights. Fails only when the child cannot be waited for
    /// (someone else reaped it, e.g. with SIGCHLD ignored).
    pub fn wait(mut self) -> io::Result<LaunchOutcome> {
        let mut observer = self.observer.take();
        let main = self.pid;
        let mut placement = None;
        let mut first_stop = self.trace;
        let mut status_of_main = None;
        let mut usage = None;
        let mut tasks = Tasks::default();
        loop {
            let (tid, status, used) = if observer.is_some() {
                match waitpid_any_raw()? {
                    Some(w) => w,
                    // No child left (some exits went unseen).
                    None => break,
                }
            } else {
                let (status, used) = waitpid_raw(main)?;
                (main, status, used)
            };
            if let Some(s) = ExitStatus::from_wait(status) {
                if tid == main {
                    status_of_main = Some(s);
                    usage = Some(used);
                } else {
                    tasks.seen.remove(&tid.as_raw());
                }
                if observer.is_none() || (status_of_main.is_some() && tasks.seen.is_empty()) {
                    break;
                }
                continue;
            }
            if !libc::WIFSTOPPED(status) {
                continue;
            }
            let sig = libc::WSTOPSIG(status);
            let event = (status >> 16) & 0xff;
            if let (true, Some(o)) = (tid != main, observer.as_mut()) {
                if tasks.stopped(tid.as_raw(), sig, event, o.as_mut()) {
                    resume(tid, 0);
                    continue;
                }
            }
            let mut deliver = 0;
            if first_stop && tid == main && sig == libc::SIGTRAP {
                // The stop after exec: ask for the exit event (and the new
                // tasks' events when following), and have the kernel kill
                // the child if this process dies, so it never stays stopped.
                first_stop = false;
                let mut options = ptrace::Options::PTRACE_O_TRACEEXIT
                    | ptrace::Options::PTRACE_O_EXITKILL
                    | ptrace::Options::PTRACE_O_TRACEEXEC;
                if let Some(o) = observer.as_mut() {
                    options |= ptrace::Options::PTRACE_O_TRACECLONE
                        | ptrace::Options::PTRACE_O_TRACEFORK
                        | ptrace::Options::PTRACE_O_TRACEVFORK;
                    o.started(main.as_raw());
                }
                let _ = ptrace::setoptions(main, options);
            } else if sig == libc::SIGTRAP && event == ptrace::Event::PTRACE_EVENT_EXIT as i32 {
                if tid == main {
                    placement = Some(ProcessPlacement::read(main.as_raw()));
                }
                if let Some(o) = observer.as_mut() {
                    o.ended(tid.as_raw());
                }
            } else if sig == libc::SIGTRAP
                && [
                    ptrace::Event::PTRACE_EVENT_CLONE,
                    ptrace::Event::PTRACE_EVENT_FORK,
                    ptrace::Event::PTRACE_EVENT_VFORK,
                ]
                .iter()
                .any(|e| event == *e as i32)
            {
                // The new task, stopped until its first stop is seen.
                if let (Ok(new), Some(o)) = (ptrace::getevent(tid), observer.as_mut()) {
                    tasks.created(new as i32, o.as_mut());
                }
            } else if sig == libc::SIGTRAP && event != 0 {
                // Exec and other ptrace events: nothing to deliver.
            } else {
                deliver = sig;
            }
            resume(tid, deliver);
        }
        let status = match status_of_main {
            Some(s) => s,
            None => return Err(io::Error::from_raw_os_error(libc::ECHILD)),
        };
        let interrupted_by = self.forwarder.as_ref().and_then(Forwarder::interrupted_by);
        Ok(LaunchOutcome {
            status,
            placement,
            interrupted_by,
            usage,
        })
    }
}

/// The traced tasks other than the command's first, while
/// [`Launch::wait`] follows them.
#[derive(Default)]
struct Tasks {
    /// Each task, and whether its first stop (the SIGSTOP a new tracee
    /// starts with) was seen.
    seen: std::collections::HashMap<i32, bool>,
    /// Tasks whose first stop came before their creator's clone or fork
    /// event: waitpid(-1) does not report stops in the order they
    /// happened, so a short thread may even have exited before its
    /// creator's event is seen, and that late event must not start it
    /// again (it would be a task that never ran, with no /proc entry).
    early: std::collections::HashSet<i32>,
}

impl Tasks {
    /// Task `tid` stopped with `sig` and ptrace `event`: a task not seen
    /// before is counted (and `observer` told) from here. Returns whether
    /// this was its first stop, which the caller resumes without a signal.
    fn stopped(&mut self, tid: i32, sig: i32, event: i32, observer: &mut dyn TaskObserver) -> bool {
        match self.seen.get(&tid).copied() {
            // A new task's first stop, before or after its creator's
            // event: it is counted from here.
            None | Some(false) if sig == libc::SIGSTOP && event == 0 => {
                if self.seen.insert(tid, true).is_none() {
                    self.early.insert(tid);
                    observer.started(tid);
                }
                true
            }
            None => {
                self.seen.insert(tid, true);
                self.early.insert(tid);
                observer.started(tid);
                false
            }
            Some(_) => false,
        }
    }

    /// A clone or fork event created task `new` (stopped until its first
    /// stop is seen).
    fn created(&mut self, new: i32, observer: &mut dyn TaskObserver) {
        if self.early.remove(&new) {
            // Already started from its own first stop.
        } else if let std::collections::hash_map::Entry::Vacant(v) = self.seen.entry(new) {
            v.insert(false);
            observer.started(new);
        }
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        if let Some(f) = self.forwarder.take() {
            f.stop();
        }
        let _ = self.saved_mask.thread_set_mask();
    }
}

impl ExitStatus {
    /// Decodes a wait status; `None` for a stop.
    fn from_wait(status: i32) -> Option<Self> {
        if libc::WIFEXITED(status) {
            Some(Self::Exited(libc::WEXITSTATUS(status)))
        } else if libc::WIFSIGNALED(status) {
            Some(Self::Signaled(libc::WTERMSIG(status)))
        } else {
            None
        }
    }

    /// Ends this process as the command ended. A signal is raised on this
    /// process with its default action restored (real-time signals, which
    /// this process never handles, are raised as they are), so the caller of
    /// this program sees the same death. What is returned is the code to
    /// exit with: the command's exit code, or 128 + signal should the signal
    /// not end this process.
    pub fn propagate(self) -> ExitCode {
        match self {
            Self::Exited(code) => ExitCode::from(code as u8),
            Self::Signaled(sig) => {
                if signal_hook::low_level::emulate_default_handler(sig).is_err() {
                    let _ = signal_hook::low_level::raise(sig);
                }
                ExitCode::from((128 + sig) as u8)
            }
        }
    }
}

/// A thread passing the [`FORWARDED`] signals on to the child.
struct Forwarder {
    stop: Arc<EventFd>,
    thread: JoinHandle<()>,
    /// See [`LaunchOutcome::interrupted_by`]; 0 for none.
    interrupted: Arc<AtomicI32>,
}

impl Forwarder {
    fn start(child: Pid, signals: SignalFd, stop: EventFd) -> io::Result<Self> {
        let stop = Arc::new(stop);
        let stop_seen = Arc::clone(&stop);
        let interrupted = Arc::new(AtomicI32::new(0));
        let seen = Arc::clone(&interrupted);
        let thread = std::thread::Builder::new()
            .name("numalab-forward".into())
            .spawn(move || forward(child, &signals, &stop_seen, &seen))?;
        Ok(Self {
            stop,
            thread,
            interrupted,
        })
    }

    fn interrupted_by(&self) -> Option<i32> {
        Some(self.interrupted.load(Ordering::SeqCst)).filter(|s| *s != 0)
    }

    fn stop(self) {
        let _ = self.stop.write(1);
        let _ = self.thread.join();
    }
}

/// Sends the child every forwarded signal a process sent to this one, until
/// `stop` is written. Terminal-generated ones (SI_KERNEL) already reached
/// the child through its process group.
fn forward(child: Pid, signals: &SignalFd, stop: &EventFd, interrupted: &AtomicI32) {
    loop {
        let mut fds = [
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(stop.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return,
        }
        if fds[1].any() == Some(true) {
            return;
        }
        while let Ok(Some(info)) = signals.read_signal() {
            let signo = info.ssi_signo as i32;
            if [libc::SIGINT, libc::SIGTERM, libc::SIGHUP].contains(&signo) {
                let _ = interrupted.compare_exchange(0, signo, Ordering::SeqCst, Ordering::SeqCst);
            }
            if info.ssi_code == libc::SI_KERNEL {
                continue;
            }
            if let Ok(sig) = Signal::try_from(info.ssi_signo as i32) {
                let _ = kill(child, sig);
            }
        }
    }
}

/// waitpid(2) keeping the raw status: nix's `WaitStatus` has no real-time
/// signals and fails on them after the child is already reaped.
fn waitpid_raw(pid: Pid) -> io::Result<(i32, ResourceUsage)> {
    process::wait_raw_usage(pid.as_raw())
}

/// waitpid(-1, __WALL) keeping the raw status: the task that changed
/// state, its status and usage, or `None` when this process has no child
/// left.
fn waitpid_any_raw() -> io::Result<Option<(Pid, i32, ResourceUsage)>> {
    Ok(process::wait_any_raw()?.map(|(pid, status, used)| (Pid::from_raw(pid), status, used)))
}

/// PTRACE_CONT delivering signal `sig` (0: none). nix's `ptrace::cont` takes
/// only the standard signals, and a traced program may be stopped by a
/// real-time one (glibc's own 32 and 33 among them), which must reach it.
fn resume(pid: Pid, sig: i32) {
    process::ptrace_continue(pid.as_raw(), sig);
}
