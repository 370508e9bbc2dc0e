//! A bandwidth run: workers set up on their placed, verified buffers (or
//! the serial initializer's), started together sample by sample by the main
//! thread, and their figures added up.

use super::{
    as_f64, check_buffer, check_buffer_against, named, verification_of, Aggregate,
    BandwidthRequest, BandwidthResult, BufferCheck, Figure, RunOptions, WorkerPlan, WorkerReport,
    MIN_SAMPLE_SECONDS,
};
use crate::machine::Machine;
use crate::measure::kernels::{run_pass, ByteCount};
use crate::measure::memory_traffic::{self, MemoryTraffic};
use crate::measure::sample_clock::{Gate, SampleClock};
use crate::measure::stats::{measure, Better, Measurement};
use crate::placement::{
    check_plan, pin_current_thread, sys, BufferDemand, BufferSpec, MemoryPolicy, PlacedBuffer,
    PlacementError,
};
use crate::IdSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

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
