//! Rate-paced background traffic: threads reading (or writing) their local
//! buffers at a set number of bytes per second, achieved rate measured.
//!
//! A [`PacedLoad`] is a set of threads, one pinned to each CPU of a
//! [`PacedSpec`], each streaming over a buffer of its own (placed with the
//! spec's memory policy and first touched by that thread, then verified page
//! by page) until [`PacedLoad::stop`] or drop. What a thread does to its
//! buffer is the [`TrafficMix`]; how fast is the [`Pace`].
//!
//! # Pacing
//! Work is done in chunks ([`DEFAULT_CHUNK_BYTES`] of program bytes, the
//! kernels of [`super::kernels`] over a sub-slice). A rate-paced thread keeps
//! a schedule: after each chunk, the time at which the bytes done so far are
//! due is `start + bytes / rate`; a thread ahead of its schedule waits until
//! then (`nanosleep` for gaps above [`SLEEP_ABOVE`], with the thread's timer
//! slack set to 1 µs; a `pause` spin for shorter ones, so low rates stay
//! smooth instead of bursty). A thread behind its schedule (descheduled, or
//! asked for more than the machine gives) runs flat out to catch up, but
//! never carries a debt of more than [`MAX_DEBT`]: beyond that the schedule
//! is moved, so a long stall is not followed by a long burst. The achieved
//! rate is measured from the bytes done, never assumed: within ±10% of the
//! request whenever the machine can supply it.
//!
//! # Bytes
//! Rates and counts are in *program* bytes (what the code reads and writes,
//! the STREAM convention) and in *memory* bytes (what memory moves: an
//! ordinary store reads the line first and writes it back later, so a
//! written byte costs two; a non-temporal store does not read), as in
//! [`super::kernels::ByteCount`].

use super::harness::{check_buffer, verification_of, Verification, WorkerReport};
use super::kernels::{run_pass, BandwidthKernel, Isa};
use crate::machine::Machine;
use crate::placement::{
    pin_current_thread, sys, usable_free_bytes, BufferSpec, MemoryPolicy, PlacedBuffer,
    PlacementError, Thp,
};
use crate::text::format::{self, s};
use serde::Serialize;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Program bytes of one chunk of work between two looks at the clock.
pub const DEFAULT_CHUNK_BYTES: usize = 16 << 10;
/// Waits longer than this sleep (`nanosleep`); shorter ones spin with `pause`.
pub const SLEEP_ABOVE: Duration = Duration::from_micros(200);
/// Most a rate-paced thread may lag its schedule before the schedule moves.
pub const MAX_DEBT: Duration = Duration::from_millis(25);
/// How close the achieved rate should come to the request: ±10%.
pub const RATE_TOLERANCE: f64 = 0.10;

/// How far an achieved rate is from its request beyond what the pacing rule
/// explains, as a share of the request (0: on target or explained). A
/// thread that waited, ready, a fifth of its time while other tasks held
/// its CPU may fall a fifth short (the machine was busy, not the pacing
/// wrong). It may run over only by the debt it carried into the window
/// (at most [`MAX_DEBT`], paid back flat out): `carried_share` is that
/// debt over the window's length, 0 for a window that starts with the pace.
pub fn unexplained_miss(
    achieved: f64,
    requested: f64,
    waited_share: f64,
    carried_share: f64,
) -> f64 {
    let r = achieved / requested;
    if r > 1.0 {
        (r - 1.0 - carried_share.max(0.0)).max(0.0)
    } else {
        (1.0 - r - waited_share.max(0.0)).max(0.0)
    }
}

/// The most debt a window of `seconds` that starts mid-pace can pay back,
/// as a share of the window.
pub fn carried_share(seconds: f64) -> f64 {
    MAX_DEBT.as_secs_f64() / seconds
}

/// The classic background levels, in bytes/s per thread.
pub const BACKGROUND_LEVELS: [(&str, f64); 4] = [
    ("low", 0.5e9),
    ("medium", 1e9),
    ("high", 2e9),
    ("very-high", 4e9),
];

/// What background/injector threads do to their buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrafficMix {
    /// Every line read (vector loads).
    Read,
    /// `reads` chunks read for every `writes` chunks written with ordinary
    /// stores, walking the buffer in order: distinct lines, in that ratio.
    ReadWrite { reads: u32, writes: u32 },
    /// Every line written with non-temporal (streaming) stores.
    WriteNt,
}

impl TrafficMix {
    /// The mixes of the classic loaded-latency studies: all reads, 3:1, 2:1
    /// and 1:1 read:write, non-temporal writes.
    pub const CLASSIC: [TrafficMix; 5] = [
        Self::Read,
        Self::ReadWrite {
            reads: 3,
            writes: 1,
        },
        Self::ReadWrite {
            reads: 2,
            writes: 1,
        },
        Self::ReadWrite {
            reads: 1,
            writes: 1,
        },
        Self::WriteNt,
    ];

    /// The accepted spellings, for error messages.
    pub const CHOICES: &'static str =
        "read, R:W (reads:writes with ordinary stores, e.g. 3:1, 2:1, 1:1, 0:1), write-nt";

    /// Parses "read", "R:W" (whole numbers, reads:writes, at least one
    /// write: "3:1", "2:1", "1:1", "0:1" = writes only) or "write-nt"; the
    /// error names the valid choices.
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        match t {
            "read" => return Ok(Self::Read),
            "write-nt" => return Ok(Self::WriteNt),
            _ => {}
        }
        let bad = || format!("unknown traffic mix '{t}'; valid: {}", Self::CHOICES);
        let (r, w) = t.split_once(':').ok_or_else(bad)?;
        let num = |x: &str| -> Result<u32, String> {
            x.trim()
                .parse::<u32>()
                .ok()
                .filter(|v| *v <= 1000)
                .ok_or_else(bad)
        };
        let (reads, writes) = (num(r)?, num(w)?);
        if writes == 0 {
            return Err(format!(
                "traffic mix '{t}' has no writes: write 'read' for reads only; valid: {}",
                Self::CHOICES
            ));
        }
        Ok(Self::ReadWrite { reads, writes })
    }

    /// "read", "R:W" or "write-nt": the form [`TrafficMix::parse`] reads back.
    pub fn name(&self) -> String {
        match self {
            Self::Read => "read".into(),
            Self::ReadWrite { reads, writes } => format!("{reads}:{writes}"),
            Self::WriteNt => "write-nt".into(),
        }
    }

    /// A phrase for text output: "reads only", "3 reads : 1 write (ordinary stores)".
    pub fn describe(&self) -> String {
        match *self {
            Self::Read => "reads only".into(),
            Self::ReadWrite { reads, writes } => format!(
                "{reads} read{} : {writes} write{} (ordinary stores)",
                s(reads as usize),
                s(writes as usize)
            ),
            Self::WriteNt => "non-temporal writes".into(),
        }
    }

    /// Memory bytes per program byte: 1 for reads and non-temporal writes,
    /// `(R + 2W) / (R + W)` for R:W (each ordinary store reads its line first).
    pub fn memory_per_program(&self) -> f64 {
        match *self {
            Self::Read | Self::WriteNt => 1.0,
            Self::ReadWrite { reads, writes } => {
                (reads as f64 + 2.0 * writes as f64) / (reads as f64 + writes as f64)
            }
        }
    }
}

impl fmt::Display for TrafficMix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// As its name: "read", "3:1", "write-nt".
impl Serialize for TrafficMix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// From its name (for saved results).
impl<'de> serde::Deserialize<'de> for TrafficMix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TrafficMix::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Classic background levels in bytes/s per thread: low 0.5, medium 1,
/// high 2, very-high 4 GB/s, or a number of GB/s ("1.5"; 1 GB = 1e9 bytes).
pub fn background_rate(level: &str) -> Result<f64, String> {
    let t = level.trim();
    if let Some((_, r)) = BACKGROUND_LEVELS.iter().find(|(n, _)| *n == t) {
        return Ok(*r);
    }
    // A number (with or without GB/s) is a rate; anything else an unknown
    // level name.
    let number = t.strip_suffix("GB/s").unwrap_or(t).trim().parse::<f64>();
    match (number, crate::text::parse::rate(t)) {
        (_, Ok(bytes_per_second)) => Ok(bytes_per_second),
        (Ok(_), Err(e)) => Err(format!("background rate {e}")),
        (Err(_), Err(_)) => Err(format!(
            "unknown background level '{}'; valid: low (0.5 GB/s), medium (1), high (2), very-high (4) per thread, or a number of GB/s from 0.001 to 10000 like 1.5",
            crate::text::format::excerpt(t, 40)
        )),
    }
}

/// How fast the threads of a [`PacedLoad`] go.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Pace {
    /// No traffic: the threads sleep (buffers stay allocated).
    Idle,
    /// As fast as possible.
    Unpaced,
    /// Program bytes per second, per thread.
    Rate { bytes_per_second: f64 },
    /// As fast as possible with a `pause` spin of this many ns after every chunk.
    Delay { ns_per_chunk: u64 },
}

impl Pace {
    /// `Rate` for `Some`, `Unpaced` for `None` (the meaning of
    /// [`PacedSpec::bytes_per_second`]).
    pub fn from_rate(bytes_per_second: Option<f64>) -> Pace {
        match bytes_per_second {
            Some(r) => Pace::Rate {
                bytes_per_second: r,
            },
            None => Pace::Unpaced,
        }
    }

    /// The requested rate, for `Rate`.
    pub fn rate(&self) -> Option<f64> {
        match *self {
            Pace::Rate { bytes_per_second } => Some(bytes_per_second),
            _ => None,
        }
    }

    fn check(&self) -> Result<(), PlacementError> {
        match *self {
            Pace::Rate { bytes_per_second } if !(bytes_per_second.is_finite() && bytes_per_second > 0.0) => {
                Err(PlacementError::Invalid(format!(
                    "a paced rate must be a positive number of bytes per second, not {bytes_per_second}"
                )))
            }
            _ => Ok(()),
        }
    }
}

/// The threads of a paced load and their buffers.
#[derive(Debug, Clone)]
pub struct PacedSpec {
    /// One thread pinned to each.
    pub cpus: Vec<u32>,
    /// Per thread, program bytes; `None` = as fast as possible.
    pub bytes_per_second: Option<f64>,
    pub mix: TrafficMix,
    /// Per thread.
    pub buffer_bytes: usize,
    /// Each thread's buffer, e.g. local (first touched by that thread).
    pub policy: MemoryPolicy,
    pub thp: Option<Thp>,
}

/// Less common choices of [`PacedLoad::start_with`].
#[derive(Debug, Clone)]
pub struct PaceOptions {
    /// Program bytes per chunk (rounded down to whole 64-byte lines, at least one).
    pub chunk_bytes: usize,
    pub isa: Isa,
    /// The pace at start instead of the spec's rate (e.g. `Idle`, to set
    /// the buffers up first and start the traffic later with [`PacedLoad::set`]).
    pub initial: Option<Pace>,
}

impl Default for PaceOptions {
    fn default() -> Self {
        PaceOptions {
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            isa: Isa::detect_best(),
            initial: None,
        }
    }
}

/// Per-thread counters, each on its own cache lines (no false sharing).
#[repr(align(128))]
#[derive(Default)]
struct Counter {
    program: AtomicU64,
    memory: AtomicU64,
    /// The thread's kernel id once it runs (0 before), for its schedstat.
    tid: AtomicI32,
}

impl Counter {
    /// Nanoseconds the thread has waited for its CPU so far (see
    /// [`crate::sys::process::run_delay_ns`]).
    fn waited_ns(&self) -> Option<u64> {
        match self.tid.load(Ordering::Acquire) {
            0 => None,
            tid => crate::sys::process::run_delay_ns(tid),
        }
    }
}

#[derive(Clone, Copy)]
struct Control {
    pace: Pace,
    mix: TrafficMix,
}

struct Shared {
    go: AtomicBool,
    stop: AtomicBool,
    /// Bumped by every change of `control`.
    generation: AtomicU64,
    control: Mutex<Control>,
    counters: Vec<Counter>,
}

impl Shared {
    fn control(&self) -> Control {
        *self.control.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a thread hands back when it ends.
struct ThreadEnd {
    report: WorkerReport,
    seconds: f64,
    /// Of `seconds`, the time spent waiting for the CPU.
    waited_seconds: Option<f64>,
}

/// Threads running in the background until [`PacedLoad::stop`] (or drop,
/// which also stops and joins them).
pub struct PacedLoad {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<ThreadEnd>>,
    workers: Vec<WorkerReport>,
    cpus: Vec<u32>,
    chunk_bytes: usize,
    started: Instant,
    pace_changes: AtomicU64,
}

/// A snapshot of the counters and the time (see [`PacedLoad::rates_since`]).
#[derive(Debug, Clone)]
pub struct PacedMark {
    at: Instant,
    program: Vec<u64>,
    memory: Vec<u64>,
    waited_ns: Vec<Option<u64>>,
}

/// Bytes moved by a paced load between a mark and now.
#[derive(Debug, Clone, Serialize)]
pub struct PacedRates {
    pub seconds: f64,
    /// Program bytes/s of each thread.
    pub per_thread: Vec<f64>,
    /// Memory bytes/s of each thread.
    pub per_thread_memory: Vec<f64>,
    /// Sums over the threads.
    pub total: f64,
    pub total_memory: f64,
    /// The share of the window each thread waited, ready, for a CPU that
    /// other tasks held (`None`: the kernel keeps no account). A thread that
    /// waited a fifth of the window falls about a fifth short of its rate:
    /// the machine was busy, not the pacing wrong.
    pub per_thread_waited: Vec<Option<f64>>,
}

impl PacedRates {
    /// [`unexplained_miss`] of thread `k` against `requested` bytes/s, for
    /// a window that starts mid-pace (`None`: the kernel keeps no account
    /// of waits).
    pub fn unexplained_miss(&self, k: usize, requested: f64) -> Option<f64> {
        let waited = self.per_thread_waited.get(k).copied().flatten()?;
        Some(unexplained_miss(
            self.per_thread[k],
            requested,
            waited,
            carried_share(self.seconds),
        ))
    }
}

/// One thread of a finished paced load.
#[derive(Debug, Clone, Serialize)]
pub struct PacedThreadReport {
    pub cpu: u32,
    /// The pace's rate at the end (`None`: not rate-paced).
    pub requested_bytes_per_second: Option<f64>,
    /// Program bytes/s over the thread's life (start to stop).
    pub achieved_bytes_per_second: f64,
    pub achieved_memory_bytes_per_second: f64,
    pub program_bytes: u64,
    pub memory_bytes: u64,
    pub seconds: f64,
    /// Seconds of `seconds` the thread waited, ready, for a CPU that other
    /// tasks held (`None`: the kernel keeps no account): what it fell short
    /// of its rate by for want of a CPU.
    pub waited_seconds: Option<f64>,
    /// The thread's CPU (seen at start and end) and its buffer's placement.
    pub worker: WorkerReport,
}

impl PacedThreadReport {
    /// [`unexplained_miss`] of the thread's life against its rate, for a
    /// load whose pace never changed (`None`: not rate-paced, or no account
    /// of waits).
    pub fn unexplained_miss(&self) -> Option<f64> {
        let requested = self.requested_bytes_per_second?;
        let waited = self.waited_seconds? / self.seconds;
        // A life starts with its pace: it carries no debt in.
        Some(unexplained_miss(
            self.achieved_bytes_per_second,
            requested,
            waited,
            0.0,
        ))
    }
}

/// The record of a paced load, from [`PacedLoad::stop`].
#[derive(Debug, Clone, Serialize)]
pub struct PacedReport {
    /// The mix at the end.
    pub mix: TrafficMix,
    /// The pace at the end.
    pub pace: Pace,
    /// How many times [`PacedLoad::set`] changed the pace or mix: with 0 the
    /// achieved figures over the life compare with the request.
    pub pace_changes: u64,
    pub chunk_bytes: usize,
    pub threads: Vec<PacedThreadReport>,
    /// Sum of the threads' requests.
    pub requested_bytes_per_second: Option<f64>,
    /// Sum of the threads' achieved rates.
    pub achieved_bytes_per_second: f64,
    pub achieved_memory_bytes_per_second: f64,
    /// Every thread within ±10% of its request (`None`: not rate-paced, or
    /// the pace changed during the life).
    pub within_tolerance: Option<bool>,
    /// All threads' CPUs and buffers.
    pub verification: Verification,
}

impl PacedLoad {
    /// Starts one thread per CPU of the spec: each pins itself, allocates,
    /// fills and verifies its buffer, and the traffic starts once all are
    /// ready. Errors (bad CPU, placement, capacity) come back after every
    /// thread has been joined.
    pub fn start(m: &Machine, spec: &PacedSpec) -> Result<PacedLoad, PlacementError> {
        Self::start_with(m, spec, &PaceOptions::default())
    }

    /// [`PacedLoad::start`] with a chunk size, an ISA, or a starting pace.
    pub fn start_with(
        m: &Machine,
        spec: &PacedSpec,
        opts: &PaceOptions,
    ) -> Result<PacedLoad, PlacementError> {
        let (pace, chunk_bytes) = check_spec(m, spec, opts)?;
        let n = spec.cpus.len();
        let shared = Arc::new(Shared {
            go: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            control: Mutex::new(Control {
                pace,
                mix: spec.mix,
            }),
            counters: (0..n).map(|_| Counter::default()).collect(),
        });
        let (tx, rx) = mpsc::channel();
        let (handles, spawn_error) = spawn_threads(m, spec, opts.isa, chunk_bytes, &shared, tx);
        let mut load = PacedLoad {
            shared,
            handles,
            workers: Vec::new(),
            cpus: spec.cpus.clone(),
            chunk_bytes,
            started: Instant::now(),
            pace_changes: AtomicU64::new(0),
        };
        if let Some(e) = spawn_error {
            return Err(e); // drop joins the threads started
        }
        // On error, drop stops and joins everyone.
        load.workers = load.collect_setups(&rx)?;
        load.started = Instant::now();
        load.shared.go.store(true, Ordering::Release);
        Ok(load)
    }

    /// Every thread's setup report, in CPU order, once all are in; the
    /// first error (in CPU order) when a setup failed, or an error as soon
    /// as a thread is seen to have died without reporting.
    fn collect_setups(
        &self,
        rx: &mpsc::Receiver<Setup>,
    ) -> Result<Vec<WorkerReport>, PlacementError> {
        let n = self.cpus.len();
        let mut reports: Vec<Option<Result<WorkerReport, PlacementError>>> =
            (0..n).map(|_| None).collect();
        let mut got = 0;
        while got < n {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok((i, r)) => {
                    reports[i] = Some(r);
                    got += 1;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let dead = self
                        .handles
                        .iter()
                        .enumerate()
                        .find(|(i, h)| reports[*i].is_none() && h.is_finished());
                    if let Some((i, _)) = dead {
                        return Err(PlacementError::Os(format!(
                            "the paced thread for CPU {} ended during setup",
                            self.cpus[i]
                        )));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(PlacementError::Os(
                        "a paced thread ended during setup".into(),
                    ))
                }
            }
        }
        reports.into_iter().flatten().collect()
    }

    /// The CPUs of the threads, in spec order.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// Program bytes per chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// A snapshot of every thread's byte counters and the time.
    pub fn mark(&self) -> PacedMark {
        let at = Instant::now();
        let c = &self.shared.counters;
        PacedMark {
            at,
            program: c
                .iter()
                .map(|c| c.program.load(Ordering::Relaxed))
                .collect(),
            memory: c.iter().map(|c| c.memory.load(Ordering::Relaxed)).collect(),
            waited_ns: c.iter().map(Counter::waited_ns).collect(),
        }
    }

    /// Achieved program bytes/s per thread since `mark`.
    pub fn rates_since(&self, mark: &PacedMark) -> Vec<f64> {
        self.traffic_since(mark).per_thread
    }

    /// Program and memory bytes/s per thread and in total since `mark`.
    pub fn traffic_since(&self, mark: &PacedMark) -> PacedRates {
        let now = self.mark();
        let s = now.at.duration_since(mark.at).as_secs_f64().max(1e-9);
        let rate = |a: &[u64], b: &[u64]| -> Vec<f64> {
            a.iter()
                .zip(b)
                .map(|(x, y)| x.saturating_sub(*y) as f64 / s)
                .collect()
        };
        let per_thread = rate(&now.program, &mark.program);
        let per_thread_memory = rate(&now.memory, &mark.memory);
        let per_thread_waited = now
            .waited_ns
            .iter()
            .zip(&mark.waited_ns)
            .map(|(b, a)| Some(b.as_ref()?.saturating_sub(*a.as_ref()?) as f64 / 1e9 / s))
            .collect();
        PacedRates {
            per_thread_waited,
            seconds: s,
            total: per_thread.iter().sum(),
            total_memory: per_thread_memory.iter().sum(),
            per_thread,
            per_thread_memory,
        }
    }

    /// CPU and buffer verification of each thread, as found at start.
    pub fn workers(&self) -> &[WorkerReport] {
        &self.workers
    }

    /// The current pace and mix.
    pub fn current(&self) -> (Pace, TrafficMix) {
        let c = self.shared.control();
        (c.pace, c.mix)
    }

    /// Changes the pace and the mix of every thread; each starts a fresh
    /// schedule at its next chunk (within one chunk, or a few ms when idle).
    pub fn set(&self, pace: Pace, mix: TrafficMix) -> Result<(), PlacementError> {
        pace.check()?;
        if let TrafficMix::ReadWrite { writes: 0, .. } = mix {
            return Err(PlacementError::Invalid(
                "a read:write mix needs at least one write".into(),
            ));
        }
        *self
            .shared
            .control
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Control { pace, mix };
        self.shared.generation.fetch_add(1, Ordering::AcqRel);
        self.pace_changes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Stops and joins the threads and reports what they did.
    pub fn stop(mut self) -> PacedReport {
        let ends = self.join();
        let control = self.shared.control();
        let requested = control.pace.rate();
        let mut threads = Vec::with_capacity(ends.len());
        for (i, end) in ends.into_iter().enumerate() {
            let c = &self.shared.counters[i];
            let (p, mem) = (
                c.program.load(Ordering::Relaxed),
                c.memory.load(Ordering::Relaxed),
            );
            let (report, seconds, waited_seconds) = match end {
                Some(e) => (e.report, e.seconds, e.waited_seconds),
                None => (
                    self.workers
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| empty_report(self.cpus[i], None)),
                    self.started.elapsed().as_secs_f64(),
                    None,
                ),
            };
            let s = seconds.max(1e-9);
            threads.push(PacedThreadReport {
                cpu: self.cpus[i],
                requested_bytes_per_second: requested,
                achieved_bytes_per_second: p as f64 / s,
                achieved_memory_bytes_per_second: mem as f64 / s,
                program_bytes: p,
                memory_bytes: mem,
                seconds,
                waited_seconds,
                worker: report,
            });
        }
        let verification = verification_of(threads.iter().map(|t| t.worker.clone()).collect());
        let pace_changes = self.pace_changes.load(Ordering::Relaxed);
        let within_tolerance = match (requested, pace_changes) {
            (Some(r), 0) => Some(
                threads
                    .iter()
                    .all(|t| (t.achieved_bytes_per_second / r - 1.0).abs() <= RATE_TOLERANCE),
            ),
            _ => None,
        };
        PacedReport {
            mix: control.mix,
            pace: control.pace,
            pace_changes,
            chunk_bytes: self.chunk_bytes,
            requested_bytes_per_second: requested.map(|r| r * threads.len() as f64),
            achieved_bytes_per_second: threads.iter().map(|t| t.achieved_bytes_per_second).sum(),
            achieved_memory_bytes_per_second: threads
                .iter()
                .map(|t| t.achieved_memory_bytes_per_second)
                .sum(),
            threads,
            within_tolerance,
            verification,
        }
    }

    /// Tells every thread to stop and joins them; `None` for a thread that panicked.
    fn join(&mut self) -> Vec<Option<ThreadEnd>> {
        self.shared.stop.store(true, Ordering::Release);
        self.handles.drain(..).map(|h| h.join().ok()).collect()
    }
}

impl Drop for PacedLoad {
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            self.join();
        }
    }
}

/// A thread's setup as it reports it: its index and its report or error.
type Setup = (usize, Result<WorkerReport, PlacementError>);

/// Refuses a paced load that cannot run, before any thread starts; returns
/// the starting pace and the chunk size (whole lines, at least one, at most
/// the buffer).
fn check_spec(
    m: &Machine,
    spec: &PacedSpec,
    opts: &PaceOptions,
) -> Result<(Pace, usize), PlacementError> {
    let pace = opts
        .initial
        .unwrap_or(Pace::from_rate(spec.bytes_per_second));
    pace.check()?;
    Pace::from_rate(spec.bytes_per_second).check()?;
    opts.isa
        .check_available()
        .map_err(PlacementError::Unsupported)?;
    if spec.cpus.is_empty() {
        return Err(PlacementError::Invalid(
            "a paced load needs at least one CPU".into(),
        ));
    }
    if let Some(c) = spec.cpus.iter().find(|c| m.node_of_cpu(**c).is_none()) {
        return Err(PlacementError::Invalid(format!(
            "CPU {c} is not a CPU of this machine (allowed: {})",
            m.allowed_cpus
        )));
    }
    if spec.buffer_bytes < 4096 {
        return Err(PlacementError::Invalid(format!(
            "paced buffers must be at least 4 KiB, not {} bytes",
            spec.buffer_bytes
        )));
    }
    let chunk_bytes = (opts.chunk_bytes / 64 * 64).clamp(64, spec.buffer_bytes / 64 * 64);
    let n = spec.cpus.len();
    let total = spec.buffer_bytes as u64 * n as u64;
    if m.is_live() && total > usable_free_bytes(m) {
        return Err(PlacementError::Capacity(format!(
            "{n} paced thread(s) x {} = {} do not fit in the {} free on the allowed nodes; use smaller buffers or fewer threads",
            format::bytes(spec.buffer_bytes as u64),
            format::bytes(total),
            format::bytes(usable_free_bytes(m))
        )));
    }
    Ok((pace, chunk_bytes))
}

/// Starts one thread per CPU of the spec, each reporting its setup on `tx`.
/// Stops at the first thread the OS refuses: the threads started so far,
/// and that error.
fn spawn_threads(
    m: &Machine,
    spec: &PacedSpec,
    isa: Isa,
    chunk_bytes: usize,
    shared: &Arc<Shared>,
    tx: mpsc::Sender<Setup>,
) -> (Vec<JoinHandle<ThreadEnd>>, Option<PlacementError>) {
    let machine = Arc::new(m.clone());
    let mut handles = Vec::with_capacity(spec.cpus.len());
    for (i, &cpu) in spec.cpus.iter().enumerate() {
        let (shared, machine, tx, spec) =
            (shared.clone(), machine.clone(), tx.clone(), spec.clone());
        let h = std::thread::Builder::new()
            .name(format!("paced-cpu{cpu}"))
            .spawn(move || thread_main(i, cpu, &machine, &spec, isa, chunk_bytes, &shared, tx));
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                let e =
                    PlacementError::Os(format!("cannot start the paced thread for CPU {cpu}: {e}"));
                return (handles, Some(e));
            }
        }
    }
    (handles, None)
}

/// The report of a thread that has nothing to show: pinned to `cpu`, never
/// seen running, no buffer, not verified.
fn empty_report(cpu: u32, node: Option<u32>) -> WorkerReport {
    WorkerReport {
        pinned: true,
        migrations: None,
        requested_cpu: cpu,
        seen_cpus: Vec::new(),
        node,
        buffers: Vec::new(),
        gbps: Vec::new(),
        verified: false,
    }
}

/// The life of one paced thread: setup, report, wait for go, traffic.
#[allow(clippy::too_many_arguments)]
fn thread_main(
    i: usize,
    cpu: u32,
    m: &Machine,
    spec: &PacedSpec,
    isa: Isa,
    chunk_bytes: usize,
    shared: &Shared,
    tx: mpsc::Sender<Setup>,
) -> ThreadEnd {
    // Known before the load starts, so that every mark sees this thread's
    // waits.
    shared.counters[i]
        .tid
        .store(crate::sys::process::current_tid(), Ordering::Release);
    let setup = (|| -> Result<(PlacedBuffer, WorkerReport), PlacementError> {
        pin_current_thread(cpu)?;
        let bspec = BufferSpec {
            size: spec.buffer_bytes,
            policy: spec.policy.clone(),
            thp: spec.thp,
            hugetlb: false,
            toucher: Some(cpu),
            weighted: Default::default(),
        };
        let mut buf = PlacedBuffer::new(m, &bspec)?;
        buf.as_f64_mut().fill(1.0);
        let check = check_buffer(m, &spec.policy, &buf, m.node_of_cpu(cpu))?;
        Ok((buf, WorkerReport::pinned(m, cpu, check)))
    })();
    let (mut buf, mut report) = match setup {
        Ok(x) => {
            let _ = tx.send((i, Ok(x.1.clone())));
            x
        }
        Err(e) => {
            let _ = tx.send((i, Err(e)));
            return ThreadEnd {
                report: empty_report(cpu, m.node_of_cpu(cpu)),
                seconds: 0.0,
                waited_seconds: None,
            };
        }
    };
    drop(tx);
    // Sleeps end within ~1 µs of their deadline instead of the default 50 µs.
    crate::sys::process::set_timer_slack(1000);
    while !shared.go.load(Ordering::Acquire) {
        if shared.stop.load(Ordering::Acquire) {
            return ThreadEnd {
                report,
                seconds: 0.0,
                waited_seconds: None,
            };
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let counter = &shared.counters[i];
    let waited0 = counter.waited_ns();
    let t0 = Instant::now();
    let mut stream = Stream::new(buf.as_f64_mut(), chunk_bytes / 8, isa);
    traffic(&mut stream, counter, shared);
    let seconds = t0.elapsed().as_secs_f64();
    let waited_seconds = counter
        .waited_ns()
        .zip(waited0)
        .map(|(b, a)| b.saturating_sub(a) as f64 / 1e9);
    if let Some(c) = sys::current_cpu() {
        report.seen_cpus.push(c);
    }
    let p = shared.counters[i].program.load(Ordering::Relaxed);
    report.gbps = vec![p as f64 / seconds.max(1e-9) / 1e9];
    ThreadEnd {
        report,
        seconds,
        waited_seconds,
    }
}

/// A cursor walking a buffer chunk by chunk with a traffic mix.
struct Stream<'a> {
    buf: &'a mut [f64],
    /// Elements per chunk (a multiple of 8: whole lines).
    chunk: usize,
    isa: Isa,
    pos: usize,
    /// Position in the reads-then-writes cycle of an R:W mix.
    phase: u32,
}

impl<'a> Stream<'a> {
    fn new(buf: &'a mut [f64], chunk: usize, isa: Isa) -> Self {
        let chunk = (chunk / 8 * 8).clamp(8, buf.len() / 8 * 8);
        Stream {
            buf,
            chunk,
            isa,
            pos: 0,
            phase: 0,
        }
    }

    /// One kernel pass over the next `elems` elements (fewer at the end of
    /// the buffer, which then wraps); returns (program, memory) bytes.
    fn pass(&mut self, kernel: BandwidthKernel, elems: usize) -> (u64, u64) {
        if self.pos >= self.buf.len() {
            self.pos = 0;
        }
        let end = (self.pos + elems).min(self.buf.len());
        let slice = &mut self.buf[self.pos..end];
        let n = slice.len();
        let r = run_pass(kernel, self.isa, &mut [slice], 1.0);
        std::hint::black_box(r);
        self.pos = end;
        let b = kernel.bytes_per_pass(n);
        (b.program, b.memory)
    }

    /// One chunk of work; returns (program, memory) bytes.
    fn chunk(&mut self, mix: TrafficMix) -> (u64, u64) {
        match mix {
            TrafficMix::Read => self.pass(BandwidthKernel::Read, self.chunk),
            TrafficMix::WriteNt => self.pass(BandwidthKernel::WriteNt, self.chunk),
            TrafficMix::ReadWrite { reads, writes } => {
                // Four units per chunk, each read or written whole, in the
                // cycle R reads then W writes.
                let unit = (self.chunk / 4 / 8 * 8).max(8);
                let (mut p, mut m) = (0, 0);
                for _ in 0..4 {
                    let cycle = reads + writes;
                    if self.phase >= cycle {
                        self.phase = 0;
                    }
                    let k = if self.phase < reads {
                        BandwidthKernel::Read
                    } else {
                        BandwidthKernel::Write
                    };
                    self.phase = (self.phase + 1) % cycle.max(1);
                    let (a, b) = self.pass(k, unit);
                    p += a;
                    m += b;
                }
                (p, m)
            }
        }
    }
}

/// The traffic loop of one thread, until `shared.stop`.
fn traffic(stream: &mut Stream, counter: &Counter, shared: &Shared) {
    let mut program = 0u64;
    let mut memory = 0u64;
    let mut seen_generation = u64::MAX;
    let mut control = shared.control();
    // Schedule of the current pace: bytes done since `since`.
    let mut since = Instant::now();
    let mut sched_bytes = 0u64;
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let g = shared.generation.load(Ordering::Acquire);
        if g != seen_generation {
            seen_generation = g;
            control = shared.control();
            since = Instant::now();
            sched_bytes = 0;
        }
        if control.pace == Pace::Idle {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let (p, m) = stream.chunk(control.mix);
        program += p;
        memory += m;
        counter.program.store(program, Ordering::Relaxed);
        counter.memory.store(memory, Ordering::Relaxed);
        match control.pace {
            Pace::Idle | Pace::Unpaced => {}
            Pace::Delay { ns_per_chunk } => {
                if ns_per_chunk > 0 {
                    let due = Instant::now() + Duration::from_nanos(ns_per_chunk);
                    wait_until(due, shared, seen_generation);
                }
            }
            Pace::Rate { bytes_per_second } => {
                sched_bytes += p;
                let on_time = Duration::from_secs_f64(sched_bytes as f64 / bytes_per_second);
                let now = Instant::now();
                let elapsed = now.duration_since(since);
                if on_time > elapsed {
                    wait_until(since + on_time, shared, seen_generation);
                } else if elapsed - on_time > MAX_DEBT {
                    // Too far behind: forgive all but MAX_DEBT of it.
                    since = now.checked_sub(on_time + MAX_DEBT).unwrap_or(since);
                }
            }
        }
    }
}

/// Waits until `due`: sleeps while far from it, spins with `pause` near it;
/// returns early on stop or a change of pace.
fn wait_until(due: Instant, shared: &Shared, generation: u64) {
    loop {
        let now = Instant::now();
        if now >= due
            || shared.stop.load(Ordering::Relaxed)
            || shared.generation.load(Ordering::Relaxed) != generation
        {
            return;
        }
        let left = due - now;
        if left > SLEEP_ABOVE {
            // Leave the last stretch to the spin; wake at least every 5 ms
            // to notice stop and pace changes.
            std::thread::sleep((left - SLEEP_ABOVE / 2).min(Duration::from_millis(5)));
        } else {
            for _ in 0..16 {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_parse_and_name_round_trip() {
        for m in TrafficMix::CLASSIC {
            assert_eq!(TrafficMix::parse(&m.name()).unwrap(), m);
        }
        assert_eq!(
            TrafficMix::parse("5:2").unwrap(),
            TrafficMix::ReadWrite {
                reads: 5,
                writes: 2
            }
        );
        assert_eq!(TrafficMix::parse("0:1").unwrap().memory_per_program(), 2.0);
        for bad in ["", "write", "3:", ":1", "a:b", "3:0", "1:2:3", "-1:1"] {
            let e = TrafficMix::parse(bad).unwrap_err();
            assert!(e.contains("write-nt"), "{bad}: {e}");
        }
        assert_eq!(TrafficMix::parse("3:1").unwrap().memory_per_program(), 1.25);
    }

    #[test]
    fn mixes_and_paces_survive_json() {
        for m in TrafficMix::CLASSIC {
            let j = serde_json::to_string(&m).unwrap();
            assert_eq!(j, format!("\"{}\"", m.name()));
            assert_eq!(serde_json::from_str::<TrafficMix>(&j).unwrap(), m);
        }
        assert!(serde_json::from_str::<TrafficMix>("\"sideways\"").is_err());
        let p = Pace::Rate {
            bytes_per_second: 1.5e9,
        };
        let j = serde_json::to_string(&p).unwrap();
        assert_eq!(j, r#"{"kind":"rate","bytes_per_second":1500000000.0}"#);
        assert_eq!(serde_json::from_str::<Pace>(&j).unwrap(), p);
    }

    #[test]
    fn a_load_can_be_shared_and_sent() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<PacedLoad>();
        send_sync::<PacedMark>();
    }

    #[test]
    fn background_levels() {
        assert_eq!(background_rate("low").unwrap(), 0.5e9);
        assert_eq!(background_rate("medium").unwrap(), 1e9);
        assert_eq!(background_rate("high").unwrap(), 2e9);
        assert_eq!(background_rate("very-high").unwrap(), 4e9);
        assert_eq!(background_rate("1.5").unwrap(), 1.5e9);
        assert!(background_rate("0").unwrap_err().contains("positive"));
        assert!(background_rate("-2").unwrap_err().contains("positive"));
        assert!(background_rate("nan").unwrap_err().contains("positive"));
        assert!(background_rate("huge").unwrap_err().contains("very-high"));
    }

    #[test]
    fn stream_counts_bytes_by_mix() {
        let mut v = vec![1.0f64; 64 << 10]; // 512 KiB
        let mut s = Stream::new(&mut v, 2048, Isa::Portable); // 16 KiB chunks
        assert_eq!(s.chunk(TrafficMix::Read), (16384, 16384));
        assert_eq!(s.chunk(TrafficMix::WriteNt), (16384, 16384));
        let rw = TrafficMix::ReadWrite {
            reads: 3,
            writes: 1,
        };
        // 3 units read, 1 written (4 KiB each): memory counts the write twice.
        assert_eq!(s.chunk(rw), (16384, 16384 + 4096));
        let one = TrafficMix::ReadWrite {
            reads: 1,
            writes: 1,
        };
        let (p, m) = (0..10).fold((0, 0), |a, _| {
            let (x, y) = s.chunk(one);
            (a.0 + x, a.1 + y)
        });
        assert_eq!(m as f64 / p as f64, one.memory_per_program());
        // The cursor wraps at the end of the buffer.
        for _ in 0..100 {
            s.chunk(TrafficMix::Read);
        }
        assert!(s.pos <= s.buf.len());
    }
}
