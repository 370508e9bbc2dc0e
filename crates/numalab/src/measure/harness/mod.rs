//! The harness: pinned workers with placed, verified buffers, started
//! together at a barrier, each timing itself; repeated under a [`StopRule`].
//!
//! Aggregate bandwidth is the total bytes of all workers divided by the
//! slowest worker's time (the classic convention: the job is done when the
//! last worker is), or with [`Aggregate::Sum`] the sum of each worker's own
//! rate (independent programs). Per-worker figures are kept.
//!
//! [`run_bandwidth_with`] adds what the canonical workloads of
//! `numalab policies` need: unpinned workers (the scheduler places and may
//! move them; every CPU they are seen on is recorded) and one initializer
//! thread that touches every worker's data before the workers start.

use super::chase::{Chase, ChasePattern};
use super::kernels::{run_pass, BandwidthKernel, ByteCount, Isa};
use super::memory_traffic::{self, MemoryTraffic};
use super::stats::{measure, Better, Measurement, StopRule, Summary};
use crate::machine::Machine;
use crate::measure::sample_clock::{Gate, SampleClock};
use crate::placement::{
    check_plan, pin_current_thread, sys, ArrayPolicies, BufferDemand, BufferSpec, MemoryPolicy,
    PlacedBuffer, PlacementError, Realization, Thp,
};
use crate::serde_util::{f64_or_nan, int_keyed_map, vec_f64_or_nan};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Shortest time one sample should take: below this, timer resolution and
/// barrier skew dominate.
const MIN_SAMPLE_SECONDS: f64 = 0.02;

/// The seed of every latency chase: the same buffer size and pattern give
/// the same order in every run.
pub(crate) const CHASE_SEED: u64 = 0x5eed_1234;

/// Where one buffer is and whether that is what was asked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BufferCheck {
    /// The kernel array this buffer is (`a`, `b`, `c`: see
    /// [`BandwidthKernel::array_names`]); absent for one-buffer results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
    pub policy: String,
    pub realization: Realization,
    pub thp: String,
    pub bytes: u64,
    pub page_size: usize,
    #[serde(deserialize_with = "int_keyed_map")]
    pub pages_by_node: BTreeMap<u32, u64>,
    pub untouched_pages: u64,
    pub expected_nodes: Option<IdSet>,
    /// CPU the thread that first touched the pages ran on.
    pub toucher_cpu: Option<u32>,
    pub verified: bool,
    pub problems: Vec<String>,
}

/// One worker's placement and figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerReport {
    /// The CPU the worker was pinned to; for an unpinned worker (`pinned`
    /// false), the CPU it started on.
    pub requested_cpu: u32,
    /// CPU seen by the worker at the start and end of the run; for an
    /// unpinned worker, every CPU it was seen on (sorted).
    pub seen_cpus: Vec<u32>,
    pub pinned: bool,
    /// Unpinned workers: how often the worker was seen on another CPU than at
    /// its previous look (looks around each buffer's setup and after each pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u64>,
    pub node: Option<u32>,
    pub buffers: Vec<BufferCheck>,
    /// The worker's own bandwidth (program bytes, GB/s) per sample.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub gbps: Vec<f64>,
    pub verified: bool,
}

impl WorkerReport {
    /// A worker pinned to `cpu` with one buffer, seen on the CPU the
    /// calling thread runs on now.
    pub(crate) fn pinned(m: &Machine, cpu: u32, check: BufferCheck) -> Self {
        WorkerReport {
            requested_cpu: cpu,
            seen_cpus: sys::current_cpu().into_iter().collect(),
            pinned: true,
            migrations: None,
            node: m.node_of_cpu(cpu),
            verified: check.verified,
            buffers: vec![check],
            gbps: Vec::new(),
        }
    }
}

/// The placement proof attached to every result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verification {
    pub verified: bool,
    pub workers: Vec<WorkerReport>,
    pub problems: Vec<String>,
}

/// Pages per node of each named array, summed over the workers.
pub type PagesByArray = BTreeMap<String, BTreeMap<u32, u64>>;

impl Verification {
    /// Each named array's pages per node, summed over the workers (empty for
    /// one-array kernels).
    pub fn pages_by_array(&self) -> PagesByArray {
        let mut out = PagesByArray::new();
        for b in self.workers.iter().flat_map(|w| &w.buffers) {
            if let Some(name) = &b.array {
                let e = out.entry(name.clone()).or_default();
                for (n, p) in &b.pages_by_node {
                    *e.entry(*n).or_insert(0) += p;
                }
            }
        }
        out
    }

    /// The warning of a result whose placement did not verify.
    pub(crate) fn warning(&self) -> Option<String> {
        (!self.verified).then(|| format!("placement did not verify: {}", self.problems.join("; ")))
    }
}

/// One worker of a bandwidth run: its CPU and its arrays' memory policies.
#[derive(Debug, Clone)]
pub struct WorkerPlan {
    pub cpu: u32,
    /// One policy for every array, or one per array (`a=bind:0,b=bind:1`).
    pub policy: ArrayPolicies,
    /// CPU of the thread that first touches the buffers; `None` = the worker itself.
    pub toucher: Option<u32>,
}

impl WorkerPlan {
    /// One worker on each CPU, all with `policy`, each touching its own
    /// buffers.
    pub fn on_each(cpus: &[u32], policy: &MemoryPolicy) -> Vec<WorkerPlan> {
        cpus.iter()
            .map(|&cpu| WorkerPlan {
                cpu,
                policy: policy.clone().into(),
                toucher: None,
            })
            .collect()
    }
}

/// A bandwidth measurement request.
#[derive(Debug, Clone)]
pub struct BandwidthRequest {
    pub kernel: BandwidthKernel,
    pub isa: Isa,
    pub workers: Vec<WorkerPlan>,
    /// Bytes per buffer (each worker has `kernel.arrays()` buffers).
    pub buffer_bytes: usize,
    pub thp: Option<Thp>,
    pub rule: StopRule,
}

/// How the workers' figures add up to the aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Aggregate {
    /// All workers' bytes over the slowest worker's time: one program, done
    /// when its last thread is.
    #[default]
    Slowest,
    /// The sum of each worker's own rate: independent programs, each at its
    /// own pace.
    Sum,
}

/// What a run does beyond pinned workers touching their own buffers.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Workers are not pinned: each may run on any CPU of this set (the
    /// scheduler chooses and may move it), touches its own buffers wherever it
    /// runs, and records every CPU it is seen on. First-touch and local pages
    /// are expected on the nodes of the CPUs it was seen on while touching.
    /// `WorkerPlan::cpu` and `toucher` are ignored.
    pub unpinned: Option<IdSet>,
    /// One thread pinned to this CPU allocates, touches and initializes every
    /// worker's buffers, one after another, before the workers start (a
    /// program whose main thread initializes all data). Overrides
    /// `WorkerPlan::toucher`.
    pub initializer: Option<u32>,
    pub aggregate: Aggregate,
}

/// Figures of one quantity: median and best plus the full summary (`null`
/// in JSON, NaN here, without data).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Figure {
    #[serde(deserialize_with = "f64_or_nan")]
    pub median: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub best: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub min: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub max: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub spread: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub rel_ci: f64,
}

impl Figure {
    /// Figures of a summary in the direction `better`, scaled by `scale`.
    pub fn of(s: &Summary, better: Better, scale: f64) -> Self {
        Self {
            median: s.median * scale,
            best: s.best(better) * scale,
            min: s.min * scale,
            max: s.max * scale,
            spread: s.spread,
            rel_ci: s.rel_ci,
        }
    }
}

/// The outcome of a bandwidth run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BandwidthResult {
    pub kernel: BandwidthKernel,
    pub isa: Isa,
    pub threads: usize,
    pub buffer_bytes: u64,
    pub passes_per_sample: usize,
    pub aggregate: Aggregate,
    /// Bytes of one pass of all workers, counted both ways.
    pub bytes_per_pass: ByteCount,
    /// Program bytes (STREAM convention) per second, 1e9 B/s.
    pub gbps: Figure,
    /// Bytes the memory system moves (write-allocate included), 1e9 B/s:
    /// assumed from the kernel's loop, not counted.
    pub memory_gbps: Figure,
    /// Memory bytes counted by the memory controllers over all samples
    /// (warm-up included), or why they are assumed.
    #[serde(default)]
    pub memory_traffic: MemoryTraffic,
    pub measurement: Measurement,
    pub warnings: Vec<String>,
    pub verification: Verification,
}

impl BandwidthResult {
    /// Pools a later run of the same cell into this one (interleaved
    /// rounds): its samples join these, the figures are those of the pooled
    /// samples, and its placement problems and warnings are kept, marked
    /// with `round`.
    pub fn absorb(&mut self, later: BandwidthResult, round: usize) {
        let scale = if self.gbps.median > 0.0 {
            self.memory_gbps.median / self.gbps.median
        } else {
            1.0
        };
        let m = &mut self.measurement;
        m.samples.extend(later.measurement.samples);
        m.warmup_samples.extend(later.measurement.warmup_samples);
        m.elapsed_s += later.measurement.elapsed_s;
        m.non_finite += later.measurement.non_finite;
        if let Some(s) = Summary::of(&m.samples) {
            m.summary = s;
        }
        self.gbps = Figure::of(&m.summary, Better::Higher, 1.0);
        self.memory_gbps = Figure::of(&m.summary, Better::Higher, scale);
        self.memory_traffic.pool(later.memory_traffic);
        for w in later.warnings {
            if !self.warnings.contains(&w) {
                self.warnings.push(w);
            }
        }
        let v = &mut self.verification;
        v.verified &= later.verification.verified;
        v.problems.extend(
            later
                .verification
                .problems
                .into_iter()
                .map(|p| format!("round {round}: {p}")),
        );
    }
}

pub(crate) fn check_buffer(
    m: &Machine,
    policy: &MemoryPolicy,
    buf: &PlacedBuffer,
    toucher_node: Option<u32>,
) -> Result<BufferCheck, PlacementError> {
    check_buffer_against(policy, buf, policy.nodes_expected(m, toucher_node))
}

/// Checks a buffer's pages against an explicit set of expected nodes.
fn check_buffer_against(
    policy: &MemoryPolicy,
    buf: &PlacedBuffer,
    expected: Option<IdSet>,
) -> Result<BufferCheck, PlacementError> {
    let h = buf.histogram()?;
    let mut problems = Vec::new();
    if h.untouched_pages > 0 {
        problems.push(format!("{} pages never touched", h.untouched_pages));
    }
    if let (Some(e), false) = (&expected, matches!(policy, MemoryPolicy::Preferred { .. })) {
        let out = h.pages_outside(e);
        if out > 0 {
            problems.push(format!(
                "{out} of {} pages outside the requested nodes {{{e}}}",
                h.pages_total
            ));
        }
    }
    Ok(BufferCheck {
        array: None,
        policy: policy.to_string(),
        realization: buf.realization().clone(),
        thp: buf.thp().describe(),
        bytes: buf.len() as u64,
        page_size: h.page_size,
        pages_by_node: h.pages_by_node.clone(),
        untouched_pages: h.untouched_pages,
        expected_nodes: expected,
        toucher_cpu: buf.toucher_cpu(),
        verified: problems.is_empty(),
        problems,
    })
}

/// A buffer's check with its array's name, for kernels of several arrays.
fn named(mut c: BufferCheck, kernel: BandwidthKernel, name: &str) -> BufferCheck {
    if kernel.arrays() > 1 {
        c.array = Some(name.to_string());
    }
    c
}

/// Views a placed buffer as f64s (it is page aligned).
fn as_f64(buf: &mut PlacedBuffer) -> &mut [f64] {
    buf.as_f64_mut()
}

/// Runs a bandwidth measurement. Workers allocate and verify their buffers
/// first; a placement that does not verify is reported, not hidden.
pub fn run_bandwidth(
    m: &Machine,
    req: &BandwidthRequest,
) -> Result<BandwidthResult, PlacementError> {
    run_bandwidth_with(m, req, &RunOptions::default())
}

/// Where a worker was seen running: looks around its setup and after every
/// pass (unpinned workers).
#[derive(Debug, Default)]
struct CpuLooks {
    first: Option<u32>,
    last: Option<u32>,
    seen: IdSet,
    migrations: u64,
}

impl CpuLooks {
    fn look(&mut self) {
        if let Some(c) = sys::current_cpu() {
            self.first.get_or_insert(c);
            if self.last.is_some_and(|l| l != c) {
                self.migrations += 1;
            }
            self.last = Some(c);
            self.seen.insert(c);
        }
    }
}

/// The serial initializer of [`RunOptions::initializer`]: one thread pinned
/// to `cpu` makes every worker's buffers, worker after worker (policy
/// applied, every page first touched and every element written by it).
fn initialize_all(
    m: &Machine,
    req: &BandwidthRequest,
    cpu: u32,
) -> Result<Vec<Vec<PlacedBuffer>>, PlacementError> {
    std::thread::scope(|s| {
        s.spawn(|| -> Result<Vec<Vec<PlacedBuffer>>, PlacementError> {
            pin_current_thread(cpu)?;
            let mut all = Vec::with_capacity(req.workers.len());
            for plan in &req.workers {
                let mut mine = Vec::with_capacity(req.kernel.arrays());
                for name in req.kernel.array_names() {
                    let spec = BufferSpec {
                        size: req.buffer_bytes,
                        policy: plan.policy.of(name).clone(),
                        thp: req.thp,
                        hugetlb: false,
                        toucher: None,
                        weighted: Default::default(),
                    };
                    let mut b = PlacedBuffer::new(m, &spec)?;
                    as_f64(&mut b).fill(1.0);
                    mine.push(b);
                }
                all.push(mine);
            }
            Ok(all)
        })
        .join()
        .map_err(|_| PlacementError::Os("the initializer thread panicked".into()))?
    })
}

/// [`run_bandwidth`] with unpinned workers, a serial initializer thread or
/// summed rates (see [`RunOptions`]).
pub fn run_bandwidth_with(
    m: &Machine,
    req: &BandwidthRequest,
    opts: &RunOptions,
) -> Result<BandwidthResult, PlacementError> {
    check_bandwidth_request(m, req, opts)?;
    let n = req.workers.len();
    // The serial initializer touches everybody's data before anyone starts.
    let mut premade: Vec<Option<Vec<PlacedBuffer>>> = match opts.initializer {
        None => (0..n).map(|_| None).collect(),
        Some(cpu) => initialize_all(m, req, cpu)?.into_iter().map(Some).collect(),
    };
    let run = Run {
        m,
        req,
        unpinned: opts.unpinned.as_ref(),
        init_node: opts.initializer.and_then(|c| m.node_of_cpu(c)),
        sync: Rendezvous::new(n),
    };
    let outcome = std::thread::scope(|s| {
        for (i, plan) in req.workers.iter().enumerate() {
            let made = premade[i].take();
            let run = &run;
            let started =
                std::thread::Builder::new().spawn_scoped(s, move || worker(run, i, plan, made));
            if let Err(e) = started {
                // The started ones and the main thread meet no one more:
                // the gate opens, the error stops them all.
                run.sync.reports()[i] = Some(Err(spawn_failure(i, n, &e)));
                run.sync.ready.open();
                break;
            }
        }
        drive_samples(&run, opts.aggregate)
    });
    // A worker's own error says more than "workers failed".
    let mut reps = Vec::new();
    for r in run
        .sync
        .reports
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
    {
        match r {
            Some(Ok(rep)) => reps.push(rep),
            Some(Err(e)) => return Err(e),
            None => return Err(PlacementError::Os("a worker did not start".into())),
        }
    }
    let (meas, per_worker, traffic) =
        outcome.ok_or_else(|| PlacementError::Os("workers failed".into()))?;
    for (rep, g) in reps.iter_mut().zip(per_worker) {
        rep.gbps = g;
    }
    let passes = run.sync.clock.passes();
    let mut r = bandwidth_result(req, opts, passes, meas, reps);
    r.memory_traffic = traffic;
    Ok(r)
}

/// Refuses a run that cannot work, before any thread starts: an ISA the
/// CPU lacks, no worker, tiny buffers, an empty unpinned set, or buffers
/// that do not fit in free memory (the last ones to fault would bring the
/// OOM killer).
fn check_bandwidth_request(
    m: &Machine,
    req: &BandwidthRequest,
    opts: &RunOptions,
) -> Result<(), PlacementError> {
    req.isa
        .check_available()
        .map_err(PlacementError::Unsupported)?;
    let n = req.workers.len();
    if n == 0 {
        return Err(PlacementError::Invalid(
            "a bandwidth run needs at least one worker".into(),
        ));
    }
    if req.buffer_bytes / 8 < 8 {
        return Err(PlacementError::Invalid(
            "buffers must be at least 64 bytes".into(),
        ));
    }
    if opts.unpinned.as_ref().is_some_and(|s| s.is_empty()) {
        return Err(PlacementError::Invalid(
            "unpinned workers need at least one CPU to run on".into(),
        ));
    }
    // Every worker's arrays, counted where their policy puts them.
    let toucher = |w: &WorkerPlan| match (&opts.unpinned, opts.initializer) {
        (Some(_), _) => None,
        (None, Some(init)) => Some(init),
        (None, None) => Some(w.toucher.unwrap_or(w.cpu)),
    };
    let buffers: Vec<BufferDemand> =
        req.workers
            .iter()
            .flat_map(|w| {
                req.kernel.array_names().iter().map(move |name| {
                    BufferDemand::new(req.buffer_bytes, w.policy.of(name), toucher(w))
                })
            })
            .collect();
    check_plan(m, &[buffers], "use a smaller --size or fewer threads")?;
    // Room for the threads themselves (after the memory, whose refusal
    // says more): past the address space or the thread limits, a worker's
    // thread dies starting (Rust aborts the process when its signal stack
    // cannot be mapped), so say it first.
    let arrays = req.kernel.array_names().len() as u64;
    sys::room_for_threads(n, req.buffer_bytes as u64 * arrays)
        .map_err(|e| PlacementError::Os(format!("{e}; use fewer --threads")))
}

/// What the workers and the main thread of a run share.
struct Rendezvous {
    /// Every worker finished its setup (or failed), or a worker could not
    /// be started.
    ready: Gate,
    /// The samples: passes over its buffers each worker makes, and each
    /// worker's seconds of the last sample.
    clock: SampleClock,
    /// Each worker's setup: its report, or why it failed.
    reports: Mutex<Vec<Option<Result<WorkerReport, PlacementError>>>>,
}

impl Rendezvous {
    /// For `n` workers and the main thread.
    fn new(n: usize) -> Self {
        Rendezvous {
            ready: Gate::new(n + 1),
            clock: SampleClock::new(n),
            reports: Mutex::new((0..n).map(|_| None).collect()),
        }
    }

    /// The reports (a worker that panicked holding the lock poisons nothing
    /// that matters here).
    fn reports(&self) -> MutexGuard<'_, Vec<Option<Result<WorkerReport, PlacementError>>>> {
        self.reports.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the workers: they see it at their next sample.
    fn stop_all(&self) {
        self.clock.stop();
    }
}

/// A bandwidth run as its threads see it.
struct Run<'a> {
    m: &'a Machine,
    req: &'a BandwidthRequest,
    /// The CPUs unpinned workers may run on (`None`: workers are pinned).
    unpinned: Option<&'a IdSet>,
    /// Node of the serial initializer's CPU.
    init_node: Option<u32>,
    sync: Rendezvous,
}

/// Why worker `i` of `n` could not be started, with the limits on
/// threads that may have refused it.
fn spawn_failure(i: usize, n: usize, e: &std::io::Error) -> PlacementError {
    PlacementError::Os(format!(
        "could not start worker thread {} of {n}: {e} ({})",
        i + 1,
        sys::thread_limits()
    ))
}

/// One worker's life: its setup, then one timed batch of passes per sample
/// until the main thread stops it, then a last look at its CPU.
fn worker(run: &Run, i: usize, plan: &WorkerPlan, made: Option<Vec<PlacedBuffer>>) {
    let sync = &run.sync;
    let mut looks = CpuLooks::default();
    let (mut bufs, report) = match worker_setup(run, plan, made, &mut looks) {
        Ok(x) => x,
        Err(e) => {
            sync.reports()[i] = Some(Err(e));
            // Keep the barrier protocol so the others are not stuck:
            // the main thread stops everyone after `ready`.
            sync.ready.wait();
            let _stopped = sync.clock.next();
            return;
        }
    };
    sync.reports()[i] = Some(Ok(report));
    sync.ready.wait();
    let mut slices: Vec<&mut [f64]> = bufs.iter_mut().map(as_f64).collect();
    while let Some(k) = sync.clock.next() {
        let t0 = Instant::now();
        let mut sink = 0.0;
        for _ in 0..k {
            sink += run_pass(run.req.kernel, run.req.isa, &mut slices, 3.0);
            if run.unpinned.is_some() {
                looks.look();
            }
        }
        std::hint::black_box(sink);
        sync.clock.finish(i, t0.elapsed().as_secs_f64());
    }
    let mut r = sync.reports();
    if let Some(Ok(rep)) = r[i].as_mut() {
        if run.unpinned.is_some() {
            looks.look();
            rep.seen_cpus = looks.seen.iter().collect();
            rep.migrations = Some(looks.migrations);
        } else if let Some(c) = sys::current_cpu() {
            rep.seen_cpus.push(c);
        }
    }
}

/// A worker's setup: pins itself (or lets the scheduler place it), takes
/// the initializer's buffers or makes and touches its own, and checks
/// where their pages are.
fn worker_setup(
    run: &Run,
    plan: &WorkerPlan,
    made: Option<Vec<PlacedBuffer>>,
    looks: &mut CpuLooks,
) -> Result<(Vec<PlacedBuffer>, WorkerReport), PlacementError> {
    let m = run.m;
    match run.unpinned {
        Some(set) => sys::set_affinity(0, set).map_err(|e| {
            PlacementError::Os(format!("letting an unpinned worker run on CPUs {set}: {e}"))
        })?,
        None => pin_current_thread(plan.cpu)?,
    }
    looks.look();
    let (bufs, checks) = match made {
        Some(made) => {
            let mut checks = Vec::new();
            for (b, name) in made.iter().zip(run.req.kernel.array_names()) {
                let c = check_buffer(m, plan.policy.of(name), b, run.init_node)?;
                checks.push(named(c, run.req.kernel, name));
            }
            (made, checks)
        }
        None => own_buffers(run, plan, looks)?,
    };
    // Arrays by name in the report (a, b, c); the buffers stay in kernel order.
    let mut checks = checks;
    checks.sort_by(|x, y| x.array.cmp(&y.array));
    let cpu = match run.unpinned {
        Some(_) => looks.first.unwrap_or(plan.cpu),
        None => plan.cpu,
    };
    let report = WorkerReport {
        requested_cpu: cpu,
        seen_cpus: sys::current_cpu().into_iter().collect(),
        pinned: run.unpinned.is_none(),
        migrations: None,
        node: m.node_of_cpu(cpu),
        verified: checks.iter().all(|c| c.verified),
        buffers: checks,
        gbps: Vec::new(),
    };
    Ok((bufs, report))
}

/// A worker's own buffers, made, touched and filled by it (pinned: first
/// touched by its toucher), and their checks. An unpinned worker's pages
/// are checked against the nodes it was seen on while touching them.
fn own_buffers(
    run: &Run,
    plan: &WorkerPlan,
    looks: &mut CpuLooks,
) -> Result<(Vec<PlacedBuffer>, Vec<BufferCheck>), PlacementError> {
    let (m, req) = (run.m, run.req);
    let unpinned = run.unpinned.is_some();
    // Unpinned: touched by the worker wherever it runs.
    let toucher = if unpinned {
        None
    } else {
        Some(plan.toucher.unwrap_or(plan.cpu))
    };
    let toucher_node = m.node_of_cpu(toucher.unwrap_or(plan.cpu));
    let names = req.kernel.array_names();
    let mut bufs = Vec::new();
    let mut checks = Vec::new();
    for name in names {
        let policy = plan.policy.of(name);
        let spec = BufferSpec {
            size: req.buffer_bytes,
            policy: policy.clone(),
            thp: req.thp,
            hugetlb: false,
            toucher,
            weighted: Default::default(),
        };
        let mut b = PlacedBuffer::new(m, &spec)?;
        as_f64(&mut b).fill(1.0);
        if unpinned {
            looks.look();
        } else {
            let c = check_buffer(m, policy, &b, toucher_node)?;
            checks.push(named(c, req.kernel, name));
        }
        bufs.push(b);
    }
    if unpinned {
        // First touch happened wherever the worker ran meanwhile.
        let nodes: IdSet = looks.seen.iter().filter_map(|c| m.node_of_cpu(c)).collect();
        for (b, name) in bufs.iter().zip(names) {
            let policy = plan.policy.of(name);
            let expected = match policy {
                MemoryPolicy::FirstTouch | MemoryPolicy::Local => Some(nodes.clone()),
                _ => policy.nodes_expected(m, looks.first.and_then(|c| m.node_of_cpu(c))),
            };
            let c = check_buffer_against(policy, b, expected)?;
            checks.push(named(c, req.kernel, name));
        }
    }
    Ok((bufs, checks))
}

/// The measurement, each worker's own GB/s per measured sample, and the
/// memory traffic counted over the samples.
type Driven = (Measurement, Vec<Vec<f64>>, MemoryTraffic);

/// The main thread's part once the workers are set up: one untimed sample
/// to size the samples (passes enough for [`MIN_SAMPLE_SECONDS`]), then
/// samples under the request's stop rule. Returns the measurement and each
/// worker's own GB/s per measured sample; `None` when a worker failed its
/// setup (everyone is stopped).
fn drive_samples(run: &Run, aggregate: Aggregate) -> Option<Driven> {
    let sync = &run.sync;
    let n = sync.clock.workers();
    let program = run
        .req
        .kernel
        .bytes_per_pass(run.req.buffer_bytes / 8)
        .program as f64;
    let mut per_worker: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut run_sample = |record: bool| -> f64 {
        let ts = sync.clock.sample();
        let k = sync.clock.passes() as f64;
        let own = |t: f64| program * k / t.max(1e-9) / 1e9;
        if record {
            for (w, t) in ts.iter().enumerate() {
                per_worker[w].push(own(*t));
            }
        }
        match aggregate {
            Aggregate::Slowest => {
                let slowest = ts.iter().cloned().fold(0.0, f64::max).max(1e-9);
                program * n as f64 * k / slowest / 1e9
            }
            Aggregate::Sum => ts.iter().map(|t| own(*t)).sum(),
        }
    };
    sync.ready.wait();
    if sync.reports().iter().any(|r| matches!(r, Some(Err(_)))) {
        sync.stop_all();
        return None;
    }
    let gbps1 = run_sample(false);
    let one_pass = program * n as f64 / (gbps1 * 1e9);
    let k = (MIN_SAMPLE_SECONDS / one_pass.max(1e-9))
        .ceil()
        .clamp(1.0, 1e6) as usize;
    sync.clock.set_passes(k);
    let (meas, traffic) = memory_traffic::around(|| measure(&run.req.rule, || run_sample(true)));
    // Per-worker figures of warm-up samples are not kept either.
    for w in per_worker.iter_mut() {
        w.drain(..meas.warmup_samples.len().min(w.len()));
    }
    sync.stop_all();
    Some((meas, per_worker, traffic))
}

/// The result of a run from its measurement and its workers' reports.
fn bandwidth_result(
    req: &BandwidthRequest,
    opts: &RunOptions,
    passes: usize,
    meas: Measurement,
    reps: Vec<WorkerReport>,
) -> BandwidthResult {
    let n = req.workers.len();
    let per_pass_worker = req.kernel.bytes_per_pass(req.buffer_bytes / 8);
    let total = ByteCount {
        program: per_pass_worker.program * n as u64,
        memory: per_pass_worker.memory * n as u64,
    };
    let mem_scale = total.memory as f64 / total.program as f64;
    let verification = verification_of(reps);
    let mut warnings = meas.warnings();
    warnings.extend(verification.warning());
    BandwidthResult {
        kernel: req.kernel,
        isa: req.isa,
        threads: n,
        buffer_bytes: req.buffer_bytes as u64,
        passes_per_sample: passes,
        aggregate: opts.aggregate,
        bytes_per_pass: total,
        gbps: Figure::of(&meas.summary, Better::Higher, 1.0),
        memory_gbps: Figure::of(&meas.summary, Better::Higher, mem_scale),
        memory_traffic: MemoryTraffic::default(),
        measurement: meas,
        warnings,
        verification,
    }
}

pub(crate) fn verification_of(workers: Vec<WorkerReport>) -> Verification {
    let mut problems = Vec::new();
    for w in &workers {
        if w.pinned && w.seen_cpus.iter().any(|c| *c != w.requested_cpu) {
            problems.push(format!(
                "worker pinned to CPU {} was seen on CPU(s) {:?}",
                w.requested_cpu, w.seen_cpus
            ));
        }
        let who = if w.pinned {
            format!("worker on CPU {}", w.requested_cpu)
        } else {
            format!("unpinned worker (seen on CPUs {:?})", w.seen_cpus)
        };
        for b in &w.buffers {
            for p in &b.problems {
                problems.push(format!("{who}: {p}"));
            }
        }
    }
    Verification {
        verified: problems.is_empty(),
        workers,
        problems,
    }
}

/// A latency measurement request.
#[derive(Debug, Clone)]
pub struct LatencyRequest {
    pub cpu: u32,
    pub policy: MemoryPolicy,
    pub pattern: ChasePattern,
    pub chains: usize,
    pub buffer_bytes: usize,
    pub thp: Option<Thp>,
    pub hugetlb: bool,
    pub rule: StopRule,
}

/// The outcome of a latency run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencyResult {
    pub pattern: ChasePattern,
    pub chains: usize,
    pub buffer_bytes: u64,
    pub steps_per_sample: u64,
    /// Nanoseconds per dependent load (each chain advances once per step).
    pub ns: Figure,
    /// Core cycles per dependent load, at the core clock measured alongside.
    pub cycles: Figure,
    #[serde(deserialize_with = "f64_or_nan")]
    pub core_ghz: f64,
    /// Nanoseconds per load over all chains (throughput view, `ns / chains`).
    #[serde(deserialize_with = "f64_or_nan")]
    pub ns_per_access: f64,
    pub measurement: Measurement,
    pub warnings: Vec<String>,
    pub verification: Verification,
}

/// Runs a pointer chase on one pinned CPU over a placed buffer.
pub fn run_latency(m: &Machine, req: &LatencyRequest) -> Result<LatencyResult, PlacementError> {
    std::thread::scope(|s| {
        crate::placement::sys::spawn_scoped(s, "the latency worker", || run_latency_pinned(m, req))?
            .join()
            .map_err(|_| PlacementError::Os("the latency worker panicked".into()))?
    })
}

fn run_latency_pinned(m: &Machine, req: &LatencyRequest) -> Result<LatencyResult, PlacementError> {
    let buffer = BufferDemand::new(req.buffer_bytes, &req.policy, Some(req.cpu));
    check_plan(
        m,
        &[vec![buffer.hugetlb(req.hugetlb)]],
        "use a smaller --size",
    )?;
    let (mut buf, check) = pinned_buffer(
        m,
        req.cpu,
        &req.policy,
        req.buffer_bytes,
        req.thp,
        req.hugetlb,
    )?;
    let buffer_bytes = buf.len() as u64;
    let mut chase = Chase::build(buf.as_mut_slice(), req.pattern, req.chains, CHASE_SEED)
        .map_err(PlacementError::Invalid)?;
    let ghz = core_ghz();
    let steps = warm_chase(m, &mut chase, MIN_SAMPLE_SECONDS);
    let meas = measure(&req.rule, || {
        let r = chase.run(steps);
        std::hint::black_box(r.sum);
        r.elapsed.as_secs_f64() * 1e9 / steps as f64
    });
    let verification = verification_of(vec![WorkerReport::pinned(m, req.cpu, check)]);
    let mut warnings = meas.warnings();
    warnings.extend(verification.warning());
    let ns = Figure::of(&meas.summary, Better::Lower, 1.0);
    Ok(LatencyResult {
        pattern: req.pattern,
        chains: chase.chains(),
        buffer_bytes,
        steps_per_sample: steps,
        ns_per_access: ns.median / chase.chains() as f64,
        cycles: Figure::of(&meas.summary, Better::Lower, ghz),
        core_ghz: ghz,
        ns,
        measurement: meas,
        warnings,
        verification,
    })
}

/// Pins the calling thread to `cpu` and makes a buffer of `size` bytes for
/// it with `policy`, first touched there, its pages checked (first-touch
/// policies expect the node of `cpu`).
pub(crate) fn pinned_buffer(
    m: &Machine,
    cpu: u32,
    policy: &MemoryPolicy,
    size: usize,
    thp: Option<Thp>,
    hugetlb: bool,
) -> Result<(PlacedBuffer, BufferCheck), PlacementError> {
    pin_current_thread(cpu)?;
    let spec = BufferSpec {
        size,
        policy: policy.clone(),
        thp,
        hugetlb,
        toucher: Some(cpu),
        weighted: Default::default(),
    };
    let buf = PlacedBuffer::new(m, &spec)?;
    let check = check_buffer(m, policy, &buf, m.node_of_cpu(cpu))?;
    Ok((buf, check))
}

/// Warms a chase up and sizes its samples in one go; returns the steps of
/// a sample of about `sample_seconds` (at least 1000). Building the chase
/// wrote every line, so the last-written ones sit in the caches: chase
/// twice the LLC's worth of lines (or one full lap, at least 10,000 steps)
/// first, so samples see the steady state.
pub(crate) fn warm_chase(m: &Machine, chase: &mut Chase, sample_seconds: f64) -> u64 {
    let llc_lines = m.last_level_cache_bytes().unwrap_or(32 << 20) / 64;
    let warm = (chase.lines_per_chain() as u64)
        .min(2 * llc_lines)
        .max(10_000);
    let probe = chase.run(warm);
    std::hint::black_box(probe.sum);
    let per_step = probe.elapsed.as_secs_f64() / warm as f64;
    ((sample_seconds / per_step.max(1e-10)) as u64).clamp(1000, 1 << 32)
}

/// The core clock in GHz, from a chain of dependent integer operations of
/// known latency; 0 when it cannot be measured. x86-64 uses `imul` (3 cycles
/// on every core since Core 2 and on Zen): plain `add reg, imm` chains are
/// folded at rename by recent Intel cores and would overstate the clock.
pub fn core_ghz() -> f64 {
    // Many short runs (~1 ms each), the fastest kept: on a busy machine a
    // long run is rarely free of preemption or steal time, a short one often is.
    let mut best = f64::MAX;
    for _ in 0..60 {
        let t = Instant::now();
        let cycles = crate::sys::kernels::dependent_cycles(50_000);
        let s = t.elapsed().as_secs_f64();
        if cycles > 0 {
            best = best.min(s / cycles as f64);
        }
    }
    if best == f64::MAX || best <= 0.0 {
        0.0
    } else {
        1e-9 / best
    }
}

/// Default buffer size: at least 4x the last-level cache (from the machine
/// model), never below 64 MiB; rounded to 2 MiB so THP can back it.
pub fn default_buffer_bytes(m: &Machine) -> usize {
    let llc = m.last_level_cache_bytes().unwrap_or(32 << 20) as usize;
    (4 * llc).max(64 << 20).next_multiple_of(2 << 20)
}

/// Convenience for time budgets given in seconds.
pub fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}
