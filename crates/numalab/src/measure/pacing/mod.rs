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

mod worker;
use worker::{empty_report, spawn_threads, Control, Counter, Shared, ThreadEnd};

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
}
