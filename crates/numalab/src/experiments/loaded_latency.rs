//! `numalab loaded-latency`: chase latency while injectors add traffic.
//!
//! One pinned thread follows a random pointer chase over a buffer placed on
//! the memory target (any node, CPU-less ones included) while injector
//! threads, pinned to other CPUs, stream over buffers of their own (by
//! default on the same node(s), so both load the same memory controller)
//! with a [`TrafficMix`], stepped from idle to saturation by target rate or
//! by delay ([`crate::measure::pacing`]). Per step: the injected bandwidth,
//! measured over exactly the chase's measurement window (all injectors
//! together, program and memory bytes), and the chase latency (median and
//! 95% CI from the statistics engine under a short per-step budget). The
//! injectors keep their buffers for the whole run: between steps only their
//! pace (and between mixes their mix) changes; idle means they sleep.
//!
//! Chase samples are timed on the chase thread's CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`), so that time the thread spends descheduled
//! (other processes on a shared machine) does not pass for memory latency;
//! the wall-clock median and the share of the wall time the chase ran are
//! kept beside it, and a share below 90% draws a warning.
//!
//! # The knee
//! With `L0` the idle median, `h0` the half-width of its 95% CI, and for
//! step `i` (in ladder order, idle to saturation) `Li`, `hi` the same, step
//! `i` *rises* when `Li >= 1.10 * L0` and `Li - L0 > 2 * (h0 + hi)`: at least
//! 10% above idle, and further from it than twice the two medians'
//! uncertainty together. The knee is the first step from which every step
//! rises (one noisy step alone is not a knee); none when the last step does
//! not rise (the injectors did not load memory enough to show).
//!
//! Where the knee lies is a bandwidth, not a step: the *total* memory
//! bandwidth (the injectors' memory bytes plus the chase's own lines, as
//! Intel MLC plots latency against the bandwidth it measured) at which the
//! latency, interpolated linearly between the step before the knee (idle
//! for the first) and the knee step, reaches 1.10 x idle. A ladder's steps
//! only bracket that point: taking the knee step's own bandwidth made the
//! knee depend on how coarse the ladder was (a `--quick` ladder put it a
//! third as high as the default one on a 16-core Xeon).
//!
//! Idle is measured once, before the first mix, and every mix's rise is
//! judged against it: the injectors sleep at idle, so their mix cannot
//! change it, and one idle per mix gave each mix a different baseline.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the run after the
//! measurement in progress: the curves then hold the mixes and steps
//! measured so far (a mix whose idle point was not measured is left out).

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::chase::{Chase, ChasePattern};
use crate::measure::harness::{
    pinned_buffer, verification_of, warm_chase, Figure, Verification, WorkerReport, CHASE_SEED,
};
use crate::measure::pacing::{
    self, Pace, PaceOptions, PacedLoad, PacedReport, PacedSpec, TrafficMix, RATE_TOLERANCE,
};
use crate::measure::stats::{measure, Better, Measurement, StopReason, StopRule, Summary};
use crate::placement::{check_plan, sys, BufferDemand, MemoryPolicy, PlacementError, Thp};
use crate::serde_util::{f64_or_nan, int_keyed_map, vec_f64_or_nan};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

/// Shortest chase sample: long against the timer, short enough for many
/// samples in a per-step budget of a few tenths of a second.
const SAMPLE_SECONDS: f64 = 0.01;

/// Minimum rise over idle for a knee (fraction of the idle median).
pub const KNEE_MIN_RISE: f64 = 0.10;
/// The rise must exceed this many times the two medians' CI half-widths together.
pub const KNEE_CI_FACTOR: f64 = 2.0;
/// The knee rule in one sentence (also in the JSON result).
pub const KNEE_RULE: &str = "first step from which every step's median latency is >= 1.10 x idle and above idle by more than 2 x (idle CI half-width + step CI half-width); it lies at the total memory bandwidth where the latency, interpolated between the step before it (or idle) and it, reaches 1.10 x idle; one idle for all mixes";

/// Fractions of the injectors' unpaced rate of the default ladder
/// (geometric: halving down from the top, plus one half-step, 1/sqrt 2, below it).
pub const DEFAULT_LADDER: [f64; 5] = [
    1.0 / 16.0,
    1.0 / 8.0,
    0.25,
    0.5,
    std::f64::consts::FRAC_1_SQRT_2,
];

/// One load level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LoadStep {
    /// Program bytes/s per injector thread.
    Rate {
        #[serde(deserialize_with = "f64_or_nan")]
        bytes_per_second: f64,
    },
    /// Unpaced: as fast as the injectors go.
    Max,
    /// A pause of this many ns after every chunk of injector work.
    Delay { ns_per_chunk: u64 },
}

impl LoadStep {
    /// "0.50 GB/s", "max", "delay 500 ns".
    pub fn label(&self) -> String {
        match *self {
            Self::Rate { bytes_per_second } => format!("{:.2} GB/s", bytes_per_second / 1e9),
            Self::Max => "max".into(),
            Self::Delay { ns_per_chunk } => format!("delay {ns_per_chunk} ns"),
        }
    }

    fn pace(&self) -> Pace {
        match *self {
            Self::Rate { bytes_per_second } => Pace::Rate { bytes_per_second },
            Self::Max => Pace::Unpaced,
            Self::Delay { ns_per_chunk } => Pace::Delay { ns_per_chunk },
        }
    }

    /// Ordering key from idle to saturation: rates ascending, then delays
    /// descending (a long pause is a light load), then max.
    fn load_order(&self) -> (u8, f64) {
        match *self {
            Self::Rate { bytes_per_second } => (0, bytes_per_second),
            Self::Delay { ns_per_chunk } => (1, -(ns_per_chunk as f64)),
            Self::Max => (2, 0.0),
        }
    }
}

/// `steps` ordered from idle to saturation: rates ascending, then delays
/// descending (a long pause is a light load), then max.
pub fn idle_to_saturation(steps: &[LoadStep]) -> Vec<LoadStep> {
    let mut v = steps.to_vec();
    v.sort_by(|a, b| {
        let (x, y) = (a.load_order(), b.load_order());
        x.0.cmp(&y.0).then(x.1.total_cmp(&y.1))
    });
    v
}

/// The load levels of each mix.
#[derive(Debug, Clone, PartialEq)]
pub enum Ladder {
    /// Unpaced first, then [`DEFAULT_LADDER`] fractions of the per-thread
    /// rate it achieved; reported from idle to saturation.
    Auto,
    /// These steps, ordered from idle to saturation (see [`LoadStep`]).
    Steps(Vec<LoadStep>),
    /// Unpaced first, then these fractions of the per-thread rate it
    /// achieved (a shorter ladder than [`Ladder::Auto`], for a budget).
    Fractions(Vec<f64>),
}

impl Ladder {
    /// The fractions of the unpaced rate this ladder paces at, when it is
    /// relative to the unpaced run.
    pub fn fractions(&self) -> Option<Vec<f64>> {
        match self {
            Ladder::Auto => Some(DEFAULT_LADDER.to_vec()),
            Ladder::Fractions(f) => Some(f.clone()),
            Ladder::Steps(_) => None,
        }
    }
}

/// A loaded-latency experiment.
#[derive(Debug, Clone)]
pub struct LoadedLatencyRequest {
    /// The chasing CPU.
    pub cpu: u32,
    /// The chase buffer's placement (first touched by `cpu`).
    pub policy: MemoryPolicy,
    pub pattern: ChasePattern,
    pub buffer_bytes: usize,
    pub thp: Option<Thp>,
    pub injector_cpus: Vec<u32>,
    /// `None`: the node(s) the chase buffer landed on (bound), or the chase
    /// policy itself when it is page-granular (interleave, weighted).
    pub injector_policy: Option<MemoryPolicy>,
    /// Per injector thread.
    pub injector_buffer_bytes: usize,
    pub injector_thp: Option<Thp>,
    pub mixes: Vec<TrafficMix>,
    pub ladder: Ladder,
    /// Per measurement (idle and each step).
    pub rule: StopRule,
    /// Wait after every change of pace, before measuring.
    pub settle: Duration,
}

/// The chase side of the result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChaseSetup {
    pub cpu: u32,
    pub node: Option<u32>,
    pub policy: String,
    pub pattern: ChasePattern,
    pub buffer_bytes: u64,
    pub steps_per_sample: u64,
    /// Where the chase buffer's pages are.
    #[serde(deserialize_with = "int_keyed_map")]
    pub pages_by_node: BTreeMap<u32, u64>,
}

/// The injector side of the result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InjectorSetup {
    pub cpus: Vec<u32>,
    pub policy: String,
    /// Whether the policy was derived from the chase buffer (no `injector_policy` given).
    pub policy_from_chase: bool,
    pub buffer_bytes: u64,
    pub chunk_bytes: u64,
}

/// One measurement: the chase latency under one load level.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadPoint {
    /// "idle", "0.50 GB/s", "max", "delay 500 ns".
    pub step: String,
    /// `None` for idle.
    pub load: Option<LoadStep>,
    /// All injectors together over the chase's measurement, program bytes, 1e9 B/s.
    #[serde(deserialize_with = "f64_or_nan")]
    pub injected_gbps: f64,
    /// The same in memory bytes (write-allocate included).
    #[serde(deserialize_with = "f64_or_nan")]
    pub injected_memory_gbps: f64,
    /// Total memory bandwidth: `injected_memory_gbps` plus the chase's own
    /// traffic (one cache line per dependent load). NaN in reports written
    /// before it was kept.
    #[serde(default = "nan", deserialize_with = "f64_or_nan")]
    pub total_memory_gbps: f64,
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub per_thread_gbps: Vec<f64>,
    /// Nanoseconds per dependent load, on the chase thread's CPU clock.
    pub latency_ns: Figure,
    #[serde(deserialize_with = "f64_or_nan")]
    pub ci_low_ns: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub ci_high_ns: f64,
    pub samples: usize,
    pub stop_reason: StopReason,
    /// Median latency on the wall clock (descheduled time included).
    #[serde(deserialize_with = "f64_or_nan")]
    pub wall_latency_ns: f64,
    /// `latency_ns.median / wall_latency_ns`: the share of the wall time the
    /// chase thread ran (1 on a quiet machine).
    #[serde(deserialize_with = "f64_or_nan")]
    pub cpu_share: f64,
    /// The share of the measurement the injectors waited, ready, for their
    /// CPUs while other tasks held them (mean over the injectors; `None`
    /// where the kernel keeps no such account): a paced step falls about
    /// this much short of its rate on a busy machine.
    #[serde(default)]
    pub injectors_waited: Option<f64>,
    /// Seconds over which the injected traffic was counted (`None` in
    /// reports written before it was kept).
    #[serde(default)]
    pub counted_seconds: Option<f64>,
    /// Median over the idle median.
    #[serde(deserialize_with = "f64_or_nan")]
    pub vs_idle: f64,
    /// Whether this step is at least 10% and 2 CIs above idle (see the knee rule).
    pub rises: bool,
    pub knee: bool,
}

impl LoadPoint {
    /// For a rate step, how far the injectors' mean rate is from the
    /// request beyond what their wait for CPUs explains
    /// ([`pacing::unexplained_miss`]); `None` for idle and unpaced steps,
    /// and where the kernel keeps no account of waits.
    pub fn unexplained_miss(&self) -> Option<f64> {
        let Some(LoadStep::Rate { bytes_per_second }) = self.load else {
            return None;
        };
        if self.per_thread_gbps.is_empty() {
            return None;
        }
        let per = self.injected_gbps * 1e9 / self.per_thread_gbps.len() as f64;
        Some(pacing::unexplained_miss(
            per,
            bytes_per_second,
            self.injectors_waited?,
            pacing::carried_share(self.counted_seconds?),
        ))
    }
}

/// The latency-bandwidth curve of one mix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MixCurve {
    pub mix: TrafficMix,
    pub description: String,
    #[serde(deserialize_with = "f64_or_nan")]
    pub memory_per_program_byte: f64,
    pub idle: LoadPoint,
    /// From idle to saturation.
    pub steps: Vec<LoadPoint>,
    /// Index in `steps` of the knee.
    pub knee: Option<usize>,
    pub knee_injected_gbps: Option<f64>,
    pub knee_latency_ns: Option<f64>,
    /// Where the knee lies: the total memory bandwidth at which the latency
    /// reaches 1.10 x idle, interpolated (see the module's "The knee").
    /// `None` without a knee, and in reports written before it was kept.
    #[serde(default)]
    pub knee_total_gbps: Option<f64>,
    /// Its 95% interval, `[low, high]` ([`knee_interval`]); `None` without
    /// a knee, and in results written before it was kept.
    #[serde(default)]
    pub knee_total_gbps_ci: Option<[f64; 2]>,
    /// Highest injected bandwidth of the curve (program bytes).
    #[serde(deserialize_with = "f64_or_nan")]
    pub max_injected_gbps: f64,
}

/// The outcome of a loaded-latency run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadedLatencyResult {
    pub chase: ChaseSetup,
    pub injectors: InjectorSetup,
    /// [`KNEE_RULE`] when measured; as read back when deserialized.
    pub knee_rule: String,
    #[serde(deserialize_with = "f64_or_nan")]
    pub budget_per_step_s: f64,
    pub mixes: Vec<MixCurve>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
    pub warnings: Vec<String>,
    /// The chase thread and buffer, then each injector and its buffer.
    pub verification: Verification,
    /// Whether every mix's `idle` is the one idle measurement of the run
    /// (false in reports written before idle was shared).
    #[serde(default)]
    pub shared_idle: bool,
}

fn nan() -> f64 {
    f64::NAN
}

/// CPUs this process may run on: the machine's allowed set (cgroup) within
/// the process's affinity mask (taskset).
pub fn usable_cpus(m: &Machine) -> IdSet {
    match crate::placement::sys::get_affinity(0) {
        Ok(mask) if mask.intersects(&m.allowed_cpus) => m.allowed_cpus.intersection(&mask),
        _ => m.allowed_cpus.clone(),
    }
}

/// The default injector CPUs for a chase on `chase`: every other usable
/// CPU, its SMT siblings left out when other CPUs remain (a sibling shares
/// the chasing core's pipeline, which would slow the chase itself).
pub fn default_injectors(m: &Machine, chase: u32) -> Vec<u32> {
    let others: IdSet = usable_cpus(m).iter().filter(|&c| c != chase).collect();
    let siblings: IdSet = m
        .cores
        .iter()
        .filter(|c| c.cpus.contains(chase))
        .flat_map(|c| c.cpus.iter().collect::<Vec<_>>())
        .collect();
    let apart = others.difference(&siblings);
    if apart.is_empty() { others } else { apart }
        .iter()
        .collect()
}

/// Number of measurements a request makes (for progress bars): one idle
/// for the run, then each mix's steps.
pub fn measurements(req: &LoadedLatencyRequest) -> usize {
    let steps = match &req.ladder {
        Ladder::Steps(s) => s.len(),
        l => l.fractions().map_or(0, |f| f.len()) + 1,
    };
    usize::from(!req.mixes.is_empty()) + req.mixes.len() * steps
}

/// The chase's line: the last-level cache's line size (what a miss fetches
/// from memory), 64 bytes where the machine model names none.
fn chase_line_bytes(m: &Machine) -> u32 {
    m.caches
        .iter()
        .max_by_key(|c| c.level)
        .map(|c| c.line_bytes)
        .filter(|&b| b > 0)
        .unwrap_or(64)
}

/// Marks `rises`, `knee` and `vs_idle` on the steps of a curve; returns the knee index.
pub fn mark_knee(idle: &LoadPoint, steps: &mut [LoadPoint]) -> Option<usize> {
    let l0 = idle.latency_ns.median;
    let h0 = (idle.ci_high_ns - idle.ci_low_ns) / 2.0;
    for s in steps.iter_mut() {
        let l = s.latency_ns.median;
        let h = (s.ci_high_ns - s.ci_low_ns) / 2.0;
        s.vs_idle = l / l0;
        s.rises = l >= (1.0 + KNEE_MIN_RISE) * l0 && l - l0 > KNEE_CI_FACTOR * (h0 + h);
        s.knee = false;
    }
    let mut knee = None;
    for i in (0..steps.len()).rev() {
        if steps[i].rises {
            knee = Some(i);
        } else {
            break;
        }
    }
    if let Some(k) = knee {
        steps[k].knee = true;
    }
    knee
}

/// The total memory bandwidth at which the latency reaches
/// `(1 + KNEE_MIN_RISE) x idle`, interpolated linearly between the point
/// before the knee step (idle for the first step) and the knee step; the
/// knee step's own bandwidth where the one before already reached it.
/// `None` without a knee or without total bandwidths.
pub fn knee_bandwidth(idle: &LoadPoint, steps: &[LoadPoint], knee: Option<usize>) -> Option<f64> {
    let k = knee?;
    let at = &steps[k];
    let before = if k == 0 { idle } else { &steps[k - 1] };
    let threshold = (1.0 + KNEE_MIN_RISE) * idle.latency_ns.median;
    let (x0, y0) = (before.total_memory_gbps, before.latency_ns.median);
    let (x1, y1) = (at.total_memory_gbps, at.latency_ns.median);
    if !(x0.is_finite() && x1.is_finite() && y0.is_finite() && y1.is_finite()) {
        return None;
    }
    if y0 >= threshold || y1 <= y0 {
        return Some(x1);
    }
    let t = ((threshold - y0) / (y1 - y0)).clamp(0.0, 1.0);
    Some(x0 + t * (x1 - x0))
}

/// The 95% interval of [`knee_bandwidth`]: the same interpolation with the
/// latencies at the ends of their 95% intervals, the earliest crossing
/// (idle at its low end, the two steps at their high ends: the threshold
/// lowest, the curve highest) and the latest (the other way round), each
/// within the two steps that bracket the knee, where the rule puts it.
/// `None` where [`knee_bandwidth`] has no value.
pub fn knee_interval(
    idle: &LoadPoint,
    steps: &[LoadPoint],
    knee: Option<usize>,
) -> Option<[f64; 2]> {
    let k = knee?;
    let at = &steps[k];
    let before = if k == 0 { idle } else { &steps[k - 1] };
    let (x0, x1) = (before.total_memory_gbps, at.total_memory_gbps);
    let ends = [
        (idle.ci_low_ns, before.ci_high_ns, at.ci_high_ns),
        (idle.ci_high_ns, before.ci_low_ns, at.ci_low_ns),
    ];
    let mut crossing = ends.iter().map(|&(l0, y0, y1)| {
        if !(x0.is_finite() && x1.is_finite() && l0.is_finite() && y0.is_finite() && y1.is_finite())
        {
            return None;
        }
        let threshold = (1.0 + KNEE_MIN_RISE) * l0;
        if y0 >= threshold {
            return Some(x0);
        }
        if y1 <= y0 {
            return Some(x1);
        }
        let t = ((threshold - y0) / (y1 - y0)).clamp(0.0, 1.0);
        Some(x0 + t * (x1 - x0))
    });
    let (a, b) = (crossing.next()??, crossing.next()??);
    Some([a.min(b), a.max(b)])
}

/// The chase's own memory traffic: one line of `line_bytes` per dependent
/// load of `latency_ns`, in GB/s (bytes per ns).
pub fn chase_gbps(line_bytes: u32, latency_ns: f64) -> f64 {
    if latency_ns > 0.0 && latency_ns.is_finite() {
        line_bytes as f64 / latency_ns
    } else {
        0.0
    }
}

/// Why the default injector placement is what it is: bound to the nodes
/// holding the chase buffer's pages, or the chase policy itself when
/// page-granular.
fn injector_policy_for(chase: &MemoryPolicy, pages: &BTreeMap<u32, u64>) -> MemoryPolicy {
    if chase.is_page_granular() {
        return chase.clone();
    }
    let nodes: IdSet = pages
        .iter()
        .filter(|(_, p)| **p > 0)
        .map(|(n, _)| *n)
        .collect();
    if nodes.is_empty() {
        chase.clone()
    } else {
        MemoryPolicy::Bind { nodes }
    }
}

enum Cmd {
    Measure(StopRule),
}

struct ChaseReady {
    report: WorkerReport,
    steps: u64,
    buffer_bytes: u64,
    pages_by_node: BTreeMap<u32, u64>,
}

/// The chase thread: pins, places and verifies the buffer, builds and
/// warms the chase, then measures on command until the command channel
/// closes; returns its report with the CPU seen at the end.
fn chase_thread(
    m: &Machine,
    req: &LoadedLatencyRequest,
    ready: mpsc::Sender<Result<ChaseReady, PlacementError>>,
    cmds: mpsc::Receiver<Cmd>,
    out: mpsc::Sender<(Measurement, Vec<f64>)>,
) -> Option<WorkerReport> {
    // The buffer outlives the chase laid out in it (which borrows it).
    let (mut buf, check) =
        match pinned_buffer(m, req.cpu, &req.policy, req.buffer_bytes, req.thp, false) {
            Ok(x) => x,
            Err(e) => {
                let _ = ready.send(Err(e));
                return None;
            }
        };
    let buffer_bytes = buf.len() as u64;
    let setup = Chase::build(buf.as_mut_slice(), req.pattern, 1, CHASE_SEED)
        .map_err(PlacementError::Invalid)
        .map(|mut chase| {
            // Warm up as run_latency does, samples sized at idle.
            let steps = warm_chase(m, &mut chase, SAMPLE_SECONDS);
            let ready = ChaseReady {
                pages_by_node: check.pages_by_node.clone(),
                report: WorkerReport::pinned(m, req.cpu, check),
                steps,
                buffer_bytes,
            };
            (chase, ready)
        });
    let (mut chase, r) = match setup {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(e));
            return None;
        }
    };
    let steps = r.steps;
    let mut report = r.report.clone();
    let _ = ready.send(Ok(r));
    while let Ok(Cmd::Measure(rule)) = cmds.recv() {
        let mut wall = Vec::new();
        let meas = measure(&rule, || {
            let c0 = crate::sys::process::thread_cpu_seconds();
            let run = chase.run(steps);
            let c1 = crate::sys::process::thread_cpu_seconds();
            std::hint::black_box(run.sum);
            let w = run.elapsed.as_secs_f64();
            wall.push(w * 1e9 / steps as f64);
            // On the thread's CPU clock: time spent descheduled is not latency.
            match (c0, c1) {
                (Some(a), Some(b)) if b > a => (b - a).min(w) * 1e9 / steps as f64,
                _ => w * 1e9 / steps as f64,
            }
        });
        // The wall figures of the measured samples (warm-up ones dropped).
        let wall = wall.split_off(wall.len() - meas.samples.len().min(wall.len()));
        if out.send((meas, wall)).is_err() {
            break;
        }
    }
    if let Some(c) = sys::current_cpu() {
        report.seen_cpus.push(c);
    }
    Some(report)
}

/// Refuses requests that cannot mean anything, with one-line reasons.
fn validate(m: &Machine, req: &LoadedLatencyRequest) -> Result<(), PlacementError> {
    let bad = |s: String| Err(PlacementError::Invalid(s));
    if req.injector_cpus.is_empty() {
        return bad(
            "loaded latency needs at least one injector CPU besides the chasing one".into(),
        );
    }
    if req.injector_cpus.contains(&req.cpu) {
        return bad(format!(
            "the chasing CPU {} is also an injector CPU: the chase needs its CPU to itself",
            req.cpu
        ));
    }
    if req.mixes.is_empty() {
        return bad(format!(
            "no traffic mix given; valid: {}",
            TrafficMix::CHOICES
        ));
    }
    if let Ladder::Steps(steps) = &req.ladder {
        if steps.is_empty() {
            return bad("no load step given".into());
        }
        for s in steps {
            if let LoadStep::Rate { bytes_per_second } = s {
                if !(bytes_per_second.is_finite() && *bytes_per_second > 0.0) {
                    return bad(format!(
                        "injection rates must be positive, not {bytes_per_second} bytes/s"
                    ));
                }
            }
        }
    }
    check_plan(
        m,
        &[buffer_plan(req)],
        "use a smaller --size or --injector-size, or fewer injector CPUs",
    )
}

/// The chase buffer and every injector buffer, all alive together. By
/// default the injectors' buffers go where the chase buffer is: the chase
/// policy touched from the chase CPU says where that is.
fn buffer_plan(req: &LoadedLatencyRequest) -> Vec<BufferDemand> {
    let chase = BufferDemand::new(req.buffer_bytes, &req.policy, Some(req.cpu));
    let injector = |cpu: u32| match &req.injector_policy {
        Some(p) => BufferDemand::new(req.injector_buffer_bytes, p, Some(cpu)),
        None => BufferDemand::new(req.injector_buffer_bytes, &req.policy, Some(req.cpu)),
    };
    std::iter::once(chase)
        .chain(req.injector_cpus.iter().map(|&c| injector(c)))
        .collect()
}

/// Runs the experiment: every mix, idle then every step.
pub fn run_loaded_latency(
    m: &Machine,
    req: &LoadedLatencyRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<LoadedLatencyResult, PlacementError> {
    validate(m, req)?;
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (cmd_tx, cmd_rx) = mpsc::channel();
        let (out_tx, out_rx) = mpsc::channel();
        let chase = crate::placement::sys::spawn_scoped(s, "the chase thread", move || {
            chase_thread(m, req, ready_tx, cmd_rx, out_tx)
        })?;
        let ready = match ready_rx.recv() {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(PlacementError::Os(
                    "the chase thread ended during setup".into(),
                ))
            }
        };
        let outcome = drive(m, req, &ready, &cmd_tx, &out_rx, progress);
        // Closing the command channel ends the chase thread.
        drop(cmd_tx);
        let chase_end = chase.join().ok().flatten();
        let (mixes, injectors, load_report, mut warnings) = outcome?;
        let mut workers = vec![chase_end.unwrap_or_else(|| ready.report.clone())];
        workers.extend(load_report.threads.iter().map(|t| t.worker.clone()));
        let verification = verification_of(workers);
        warnings.extend(verification.warning());
        Ok(LoadedLatencyResult {
            chase: ChaseSetup {
                cpu: req.cpu,
                node: m.node_of_cpu(req.cpu),
                policy: req.policy.to_string(),
                pattern: req.pattern,
                buffer_bytes: ready.buffer_bytes,
                steps_per_sample: ready.steps,
                pages_by_node: ready.pages_by_node.clone(),
            },
            injectors,
            knee_rule: KNEE_RULE.into(),
            budget_per_step_s: req.rule.budget.as_secs_f64(),
            mixes,
            elapsed_s: started.elapsed().as_secs_f64(),
            warnings,
            verification,
            shared_idle: true,
        })
    })
}

type Driven = (Vec<MixCurve>, InjectorSetup, PacedReport, Vec<String>);

/// The main thread's part: starts the injectors, steps them through every
/// mix and load level, and asks the chase thread for a measurement at each.
fn drive(
    m: &Machine,
    req: &LoadedLatencyRequest,
    ready: &ChaseReady,
    cmds: &mpsc::Sender<Cmd>,
    results: &mpsc::Receiver<(Measurement, Vec<f64>)>,
    progress: &mut dyn FnMut(&str),
) -> Result<Driven, PlacementError> {
    let (load, injectors) = start_injectors(m, req, ready)?;
    let mut run = Stepper {
        req,
        line_bytes: chase_line_bytes(m),
        load,
        cmds,
        results,
        warnings: Vec::new(),
    };
    let mut curves = Vec::new();
    let mut idle = None;
    for &mix in &req.mixes {
        if cancel::requested() {
            break;
        }
        if idle.is_none() {
            progress("idle");
            idle = Some(run.point(mix, None)?);
        }
        let idle = idle.clone().expect("measured above");
        curves.push(run.curve(mix, idle, progress)?);
    }
    let mut warnings = run.warnings;
    warnings.extend(shared_cpu_warning(&curves));
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    let report = run.load.stop();
    Ok((curves, injectors, report, warnings))
}

/// Starts the injectors, idle, their buffers placed and checked: with the
/// request's injector policy, or by default where the chase buffer is.
fn start_injectors(
    m: &Machine,
    req: &LoadedLatencyRequest,
    ready: &ChaseReady,
) -> Result<(PacedLoad, InjectorSetup), PlacementError> {
    let policy_from_chase = req.injector_policy.is_none();
    let inj_policy = req
        .injector_policy
        .clone()
        .unwrap_or_else(|| injector_policy_for(&req.policy, &ready.pages_by_node));
    let spec = PacedSpec {
        cpus: req.injector_cpus.clone(),
        bytes_per_second: None,
        mix: req.mixes[0],
        buffer_bytes: req.injector_buffer_bytes,
        policy: inj_policy.clone(),
        thp: req.injector_thp,
    };
    let load = PacedLoad::start_with(
        m,
        &spec,
        &PaceOptions {
            initial: Some(Pace::Idle),
            ..PaceOptions::default()
        },
    )?;
    let injectors = InjectorSetup {
        cpus: req.injector_cpus.clone(),
        policy: inj_policy.to_string(),
        policy_from_chase,
        buffer_bytes: req.injector_buffer_bytes as u64,
        chunk_bytes: load.chunk_bytes() as u64,
    };
    Ok((load, injectors))
}

/// The measurements of a run: the injectors, the channels to the chase
/// thread, and the warnings so far.
struct Stepper<'a> {
    req: &'a LoadedLatencyRequest,
    /// The chase's cache line (the machine's last-level cache's).
    line_bytes: u32,
    load: PacedLoad,
    cmds: &'a mpsc::Sender<Cmd>,
    results: &'a mpsc::Receiver<(Measurement, Vec<f64>)>,
    warnings: Vec<String>,
}

impl Stepper<'_> {
    /// Injector threads, as a divisor of rates.
    fn threads(&self) -> f64 {
        self.req.injector_cpus.len() as f64
    }

    /// One mix's curve: idle, then the ladder from idle to saturation (the
    /// automatic ladder measures max first and steps at fractions of it),
    /// its knee marked. Stops early on cancel.
    fn curve(
        &mut self,
        mix: TrafficMix,
        idle: LoadPoint,
        progress: &mut dyn FnMut(&str),
    ) -> Result<MixCurve, PlacementError> {
        let req = self.req;
        let mut steps = Vec::new();
        match &req.ladder {
            Ladder::Auto | Ladder::Fractions(_) if cancel::requested() => {}
            Ladder::Auto | Ladder::Fractions(_) => {
                progress(&format!("{mix}: max"));
                let max = self.point(mix, Some(LoadStep::Max))?;
                let per = (max.injected_gbps * 1e9 / self.threads()).max(1e6);
                let ladder: Vec<LoadStep> = req
                    .ladder
                    .fractions()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|f| LoadStep::Rate {
                        bytes_per_second: per * f,
                    })
                    .collect();
                self.ladder(mix, &ladder, progress, &mut steps)?;
                steps.push(max);
            }
            Ladder::Steps(list) => {
                self.ladder(mix, &idle_to_saturation(list), progress, &mut steps)?
            }
        }
        let knee = mark_knee(&idle, &mut steps);
        let knee_total_gbps = knee_bandwidth(&idle, &steps, knee);
        let knee_total_gbps_ci = knee_interval(&idle, &steps, knee);
        Ok(MixCurve {
            knee_total_gbps,
            knee_total_gbps_ci,
            mix,
            description: mix.describe(),
            memory_per_program_byte: mix.memory_per_program(),
            knee,
            knee_injected_gbps: knee.map(|k| steps[k].injected_gbps),
            knee_latency_ns: knee.map(|k| steps[k].latency_ns.median),
            max_injected_gbps: steps.iter().map(|p| p.injected_gbps).fold(0.0, f64::max),
            idle,
            steps,
        })
    }

    /// Measures `ladder`'s steps in order into `out`, until done or cancelled.
    fn ladder(
        &mut self,
        mix: TrafficMix,
        ladder: &[LoadStep],
        progress: &mut dyn FnMut(&str),
        out: &mut Vec<LoadPoint>,
    ) -> Result<(), PlacementError> {
        for &step in ladder {
            if cancel::requested() {
                break;
            }
            progress(&format!("{mix}: {}", step.label()));
            out.push(self.point(mix, Some(step))?);
        }
        Ok(())
    }

    /// One measurement: the injectors set to `step` (`None`: idle) and
    /// settled, then the chase measured while their traffic is counted.
    fn point(
        &mut self,
        mix: TrafficMix,
        step: Option<LoadStep>,
    ) -> Result<LoadPoint, PlacementError> {
        let req = self.req;
        let pace = step.map(|s| s.pace()).unwrap_or(Pace::Idle);
        self.load.set(pace, mix)?;
        std::thread::sleep(req.settle);
        let mark = self.load.mark();
        let lost = || PlacementError::Os("the chase thread ended unexpectedly".into());
        self.cmds
            .send(Cmd::Measure(req.rule.clone()))
            .map_err(|_| lost())?;
        let (meas, wall) = self.results.recv().map_err(|_| lost())?;
        let wall_median = Summary::of(&wall).map(|w| w.median).unwrap_or(f64::NAN);
        let t = self.load.traffic_since(&mark);
        let label = step.map(|s| s.label()).unwrap_or_else(|| "idle".into());
        for w in meas.warnings() {
            self.warnings.push(format!("mix {mix}, {label}: {w}"));
        }
        let waits: Option<Vec<f64>> = t.per_thread_waited.iter().copied().collect();
        let injectors_waited = waits
            .filter(|w| !w.is_empty() && step.is_some())
            .map(|w| w.iter().sum::<f64>() / w.len() as f64);
        let point = LoadPoint {
            step: label,
            load: step,
            injected_gbps: t.total / 1e9,
            injected_memory_gbps: t.total_memory / 1e9,
            total_memory_gbps: t.total_memory / 1e9
                + chase_gbps(self.line_bytes, meas.summary.median),
            per_thread_gbps: t.per_thread.iter().map(|r| r / 1e9).collect(),
            latency_ns: Figure::of(&meas.summary, Better::Lower, 1.0),
            ci_low_ns: meas.summary.ci_low,
            ci_high_ns: meas.summary.ci_high,
            samples: meas.samples.len(),
            stop_reason: meas.stop_reason,
            wall_latency_ns: wall_median,
            cpu_share: meas.summary.median / wall_median,
            injectors_waited,
            counted_seconds: Some(t.seconds),
            vs_idle: 1.0,
            rises: false,
            knee: false,
        };
        if let Some(LoadStep::Rate { bytes_per_second }) = step {
            let per = t.total / self.threads();
            if per < bytes_per_second * (1.0 - RATE_TOLERANCE) {
                let why = match (point.unexplained_miss(), injectors_waited) {
                    (Some(miss), Some(w)) if miss <= RATE_TOLERANCE => format!(
                        "the injectors waited for their CPUs {:.0}% of the step (other processes held them)",
                        w * 100.0
                    ),
                    _ => "more than the injectors could supply".into(),
                };
                self.warnings.push(format!(
                    "mix {mix}: requested {:.2} GB/s per injector, achieved {:.2}: {why}",
                    bytes_per_second / 1e9,
                    per / 1e9
                ));
            }
        }
        Ok(point)
    }
}

/// A warning when the chasing CPU ran less than 90% of the wall time at
/// some point (other processes shared it), naming the worst point.
fn shared_cpu_warning(curves: &[MixCurve]) -> Option<String> {
    let (mix, p) = curves
        .iter()
        .flat_map(|c| {
            std::iter::once(&c.idle)
                .chain(&c.steps)
                .map(move |p| (c.mix, p))
        })
        .filter(|(_, p)| p.cpu_share.is_finite())
        .min_by(|a, b| a.1.cpu_share.total_cmp(&b.1.cpu_share))
        .filter(|(_, p)| p.cpu_share < 0.9)?;
    Some(format!(
        "the chasing CPU was shared with other processes: the chase ran as little as {:.0}% of the wall time (mix {mix}, {}); latencies are on its own CPU clock, but their traffic and cache use still add noise",
        p.cpu_share * 100.0,
        p.step
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::FRAC_1_SQRT_2;

    fn p(median: f64, half: f64) -> LoadPoint {
        LoadPoint {
            step: String::new(),
            load: None,
            injected_gbps: 0.0,
            injected_memory_gbps: 0.0,
            total_memory_gbps: 0.0,
            per_thread_gbps: Vec::new(),
            latency_ns: Figure {
                median,
                best: median,
                min: median,
                max: median,
                spread: 0.0,
                rel_ci: half / median,
            },
            ci_low_ns: median - half,
            ci_high_ns: median + half,
            samples: 10,
            stop_reason: StopReason::Budget,
            wall_latency_ns: median,
            cpu_share: 1.0,
            injectors_waited: None,
            counted_seconds: None,
            vs_idle: 1.0,
            rises: false,
            knee: false,
        }
    }

    #[test]
    fn the_knee_is_where_latency_stays_clearly_above_idle() {
        let idle = p(100.0, 1.0);
        // 105: under 10%; 130: rises; 104: noise back down; 112, 150, 300: rise.
        let mut s = vec![
            p(105.0, 1.0),
            p(130.0, 2.0),
            p(104.0, 1.0),
            p(112.0, 1.0),
            p(150.0, 5.0),
            p(300.0, 20.0),
        ];
        assert_eq!(mark_knee(&idle, &mut s), Some(3));
        assert!(s[1].rises && !s[1].knee, "a lone rise is not the knee");
        assert!(s[3].knee);
        assert_eq!(s.iter().filter(|x| x.knee).count(), 1);
        assert!((s[5].vs_idle - 3.0).abs() < 1e-12);
        // 12% above idle but inside twice the uncertainty: no rise.
        let mut s = vec![p(112.0, 5.0)];
        assert_eq!(mark_knee(&idle, &mut s), None);
        assert!(!s[0].rises);
        // A curve whose last step falls back has no knee.
        let mut s = vec![p(150.0, 1.0), p(101.0, 1.0)];
        assert_eq!(mark_knee(&idle, &mut s), None);
    }

    /// A point at total bandwidth `x` with latency `l` (tight CI).
    fn at(x: f64, l: f64) -> LoadPoint {
        LoadPoint {
            total_memory_gbps: x,
            ..p(l, 0.5)
        }
    }

    #[test]
    fn the_knee_lies_where_the_interpolated_latency_reaches_110_percent_of_idle() {
        let idle = at(0.5, 100.0);
        // 104 at 10 GB/s, then 134 at 20: 110 is reached a fifth of the way.
        let mut s = vec![at(10.0, 104.0), at(20.0, 134.0), at(30.0, 200.0)];
        let k = mark_knee(&idle, &mut s);
        assert_eq!(k, Some(1));
        let x = knee_bandwidth(&idle, &s, k).unwrap();
        assert!((x - 12.0).abs() < 1e-9, "{x}");
        // The first step is the knee: interpolated from idle.
        let mut s = vec![at(10.5, 120.0), at(20.0, 150.0)];
        let k = mark_knee(&idle, &mut s);
        assert_eq!(k, Some(0));
        assert!((knee_bandwidth(&idle, &s, k).unwrap() - 5.5).abs() < 1e-9);
        // A step before the knee already at 1.10 x (it did not rise by its
        // CI): the knee step's own bandwidth, never one below the bracket.
        let mut s = vec![at(10.0, 111.0), at(20.0, 140.0)];
        s[0].ci_low_ns = 90.0;
        s[0].ci_high_ns = 132.0;
        let k = mark_knee(&idle, &mut s);
        assert_eq!(k, Some(1));
        assert_eq!(knee_bandwidth(&idle, &s, k), Some(20.0));
        // No knee, or no total bandwidth (a report from before): none.
        let mut s = vec![at(10.0, 101.0)];
        let k = mark_knee(&idle, &mut s);
        assert_eq!(knee_bandwidth(&idle, &s, k), None);
        let mut s = vec![at(f64::NAN, 150.0)];
        let k = mark_knee(&idle, &mut s);
        assert_eq!(knee_bandwidth(&idle, &s, k), None);
    }

    /// The knee's interval: the interpolation redone with the latencies at
    /// their intervals' ends, within the bracketing steps.
    #[test]
    fn the_knees_interval_carries_the_latencies_intervals_through() {
        // Idle 100 ±0.5, steps 104 ±0.5 at 10 GB/s and 134 ±0.5 at 20:
        // earliest crossing 1.1 x 99.5 = 109.45 on the curve 104.5-134.5,
        // latest 1.1 x 100.5 = 110.55 on 103.5-133.5.
        let idle = at(0.5, 100.0);
        let mut s = vec![at(10.0, 104.0), at(20.0, 134.0), at(30.0, 200.0)];
        let k = mark_knee(&idle, &mut s);
        let [lo, hi] = knee_interval(&idle, &s, k).unwrap();
        let x = knee_bandwidth(&idle, &s, k).unwrap();
        assert!(
            (lo - (10.0 + 10.0 * (109.45 - 104.5) / 30.0)).abs() < 1e-9,
            "{lo}"
        );
        assert!(
            (hi - (10.0 + 10.0 * (110.55 - 103.5) / 30.0)).abs() < 1e-9,
            "{hi}"
        );
        assert!(lo < x && x < hi, "{lo} {x} {hi}");
        // Wide latency intervals: the bracket's ends at most.
        let mut s = vec![at(10.0, 104.0), at(20.0, 180.0)];
        s[0].ci_low_ns = 60.0;
        s[0].ci_high_ns = 148.0;
        idle_wide(&mut s[1]);
        let k = Some(1);
        assert_eq!(knee_interval(&idle, &s, k), Some([10.0, 20.0]));
        // No knee: no interval.
        assert_eq!(knee_interval(&idle, &s, None), None);
    }

    fn idle_wide(p: &mut LoadPoint) {
        p.ci_low_ns = p.latency_ns.median * 0.5;
        p.ci_high_ns = p.latency_ns.median * 1.5;
    }

    #[test]
    fn the_knee_hardly_depends_on_the_ladder() {
        // A queueing curve: latency = idle x (1 + 0.3 u / (1 - u)) at
        // utilisation u of 40 GB/s; it reaches 1.10 x idle at u = 0.25,
        // 10 GB/s. Sampled by the default ladder and by every cut-down
        // ladder of two or more steps the report uses (the top at u = 0.9).
        let curve = |u: f64| 100.0 * (1.0 + 0.3 * u / (1.0 - u));
        let idle = at(0.0, curve(0.0));
        let top = 0.9;
        let ladders: Vec<Vec<f64>> = vec![
            DEFAULT_LADDER.to_vec(),
            vec![1.0 / 16.0, 0.25, FRAC_1_SQRT_2],
            vec![0.125, 0.5],
            vec![0.25, 0.5],
        ];
        for ladder in ladders {
            let mut steps: Vec<LoadPoint> = ladder
                .iter()
                .chain(std::iter::once(&1.0))
                .map(|f| at(40.0 * top * f, curve(top * f)))
                .collect();
            let k = mark_knee(&idle, &mut steps);
            let x = knee_bandwidth(&idle, &steps, k).unwrap();
            // Within 25% of the true 10 GB/s on every ladder, where the knee
            // step's own bandwidth is 18 GB/s (u = 0.45) on the default one.
            assert!((x - 10.0).abs() <= 2.5, "{ladder:?}: {x}");
        }
        let mut steps: Vec<LoadPoint> = DEFAULT_LADDER
            .iter()
            .chain(std::iter::once(&1.0))
            .map(|f| at(40.0 * top * f, curve(top * f)))
            .collect();
        let k = mark_knee(&idle, &mut steps).unwrap();
        assert!((steps[k].total_memory_gbps - 18.0).abs() < 1e-9);
        let x = knee_bandwidth(&idle, &steps, Some(k)).unwrap();
        assert!((x - 10.0).abs() <= 0.5, "default ladder: {x}");
    }

    #[test]
    fn the_chase_adds_one_line_per_load() {
        assert!((chase_gbps(64, 100.0) - 0.64).abs() < 1e-12);
        assert_eq!(chase_gbps(64, f64::NAN), 0.0);
        assert_eq!(chase_gbps(64, 0.0), 0.0);
    }

    #[test]
    fn steps_are_ordered_from_idle_to_saturation() {
        let v = idle_to_saturation(&[
            LoadStep::Max,
            LoadStep::Rate {
                bytes_per_second: 2e9,
            },
            LoadStep::Delay { ns_per_chunk: 100 },
            LoadStep::Rate {
                bytes_per_second: 0.5e9,
            },
            LoadStep::Delay { ns_per_chunk: 5000 },
        ]);
        let labels: Vec<String> = v.iter().map(|s| s.label()).collect();
        assert_eq!(
            labels,
            [
                "0.50 GB/s",
                "2.00 GB/s",
                "delay 5000 ns",
                "delay 100 ns",
                "max"
            ]
        );
    }

    #[test]
    fn injectors_follow_the_chase_buffer() {
        let pages: BTreeMap<u32, u64> = [(4, 2048), (1, 0)].into_iter().collect();
        assert_eq!(
            injector_policy_for(&MemoryPolicy::Local, &pages),
            MemoryPolicy::Bind {
                nodes: IdSet::single(4)
            }
        );
        let il = MemoryPolicy::Interleave {
            nodes: [0, 1].into_iter().collect(),
            chunk_pages: 1,
        };
        assert_eq!(injector_policy_for(&il, &pages), il);
    }
}
