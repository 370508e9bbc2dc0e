//! One `numalab profile` session: the command run with the preload
//! library under a configuration, its records read back into a
//! [`Profile`], and the timed runs that judge a plan. The CLI command
//! parses options into a [`Session`] and prints what it returns.

use super::filter::{self, RegionFilter};
use super::latency::{price, LatencyTable};
use super::plan::{verify, Plan, RunTimes};
use super::record::{Kind, Record, ALLOC_FILE, FLAG_WRITE_PROBE, RECORD_BYTES};
use super::{build_with_units, symbols, PmuStatus, Profile, Sampler};
use crate::machine::Machine;
use crate::measure::counters;
use crate::placement::launch::PreparedLaunch;
use crate::placement::{ExitStatus, LaunchOutcome, LaunchPlan, PlacementError, SpawnError};
use crate::sys::child::signal_name;
use crate::IdSet;
use numalab_profile_abi::config::LibraryConfig;
use numalab_profile_abi::events::Frame;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// What `--refine` asks for.
#[derive(Debug, Clone)]
pub enum Refine {
    Off,
    Auto,
    /// Within the regions this filter selects (its text, as given).
    Regions(String, RegionFilter),
}

impl Refine {
    /// `auto`, `off` or a region filter.
    pub fn parse(t: &str) -> Result<Refine, String> {
        match t.trim() {
            "auto" => Ok(Refine::Auto),
            "off" => Ok(Refine::Off),
            f => RegionFilter::parse(f)
                .map(|r| Refine::Regions(f.to_string(), r))
                .map_err(|e| format!("give auto, off or a region filter ({e})")),
        }
    }
}

impl Sampler {
    /// `auto`, `faults` or `pmu`.
    pub fn parse(t: &str) -> Result<Sampler, String> {
        match t.trim() {
            "auto" => Ok(Sampler::Auto),
            "faults" => Ok(Sampler::Faults),
            "pmu" => Ok(Sampler::Pmu),
            other => Err(format!("'{other}' is no sampler; valid: auto, faults, pmu")),
        }
    }
}

/// How the library samples, as the user asked.
#[derive(Debug, Clone)]
pub struct Sampling {
    /// Pages armed a second, fixed.
    pub rate: Option<usize>,
    /// The share of the program's CPU time sampling may take (a fraction).
    pub overhead: Option<f64>,
    pub word_counts: bool,
    /// Seconds to sample for, from the start.
    pub duration_s: Option<f64>,
    pub min_bytes: usize,
    /// One small allocation drawn per this many bytes (0: off).
    pub small_every: usize,
    pub refine: Refine,
    pub refine_time_s: f64,
    /// `--regions`: its text and filter.
    pub regions: Option<(String, RegionFilter)>,
    /// `--only-threads`: its text and set.
    pub threads: Option<(String, IdSet)>,
    /// Count each thread and child process on its own as well.
    pub per_thread: bool,
    /// `--counters`: perf events to open on the command. Without it the
    /// counts come from the kernel's accounting of the reaped command,
    /// which costs nothing; inherited perf events make each of the
    /// command's context switches dearer (docs/profile.md, "Overhead").
    pub counters: Option<Vec<&'static counters::Event>>,
    /// `--granularity` (with `--units`, `--hot-share`): each selected
    /// region's accesses unit by unit; `None`: not asked.
    pub units: Option<super::granularity::UnitRequest>,
}

/// Everything every run of the command gets, whatever the plan.
pub struct Session {
    pub machine: Machine,
    pub launch: LaunchPlan,
    pub command: Vec<OsString>,
    /// `LD_PRELOAD`'s value: the library, after what the caller preloads.
    pub preload: OsString,
    pub sampling: Sampling,
    pub pmu: PmuStatus,
    /// The PMU event the library samples with (empty: protection faults).
    pub pmu_spec: String,
    /// `--regions` and `--refine`'s filter in the library's form.
    pub region_filter: String,
    pub refine_filter: String,
    /// The library's placement without a plan: the launch's stripes, or
    /// empty.
    pub placement: String,
    /// `--machine`'s latency matrix and where it came from.
    pub latencies: Option<(LatencyTable, String)>,
    /// `--pin`'s CPUs in order (one per thread as it starts) and
    /// `--skip`'s mask of created threads left unpinned.
    pub pin: Option<Vec<u32>>,
    pub pin_skip: u64,
}

/// Why a session could not run the command to its end.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Placement(#[from] PlacementError),
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("waiting for '{program}': {source}")]
    Wait {
        program: String,
        source: std::io::Error,
    },
    #[error("stopped by {} during timed run {round}: the profiles before/ and after/ are written, the times are not", signal_name(*.signal))]
    Interrupted { signal: i32, round: usize },
    #[error("timed run {round} {} the plan {status:?}: its time would not be the program's", if *.planned { "with" } else { "without" })]
    TimedRunFailed {
        round: usize,
        planned: bool,
        status: ExitStatus,
    },
}

impl SessionError {
    /// The exit code the CLI ends with, where it is not the placement's
    /// (which the CLI maps itself): the shell's for a program that cannot
    /// start, 128 + the signal for an interruption, else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            SessionError::Spawn(e) => e.exit_code(),
            SessionError::Interrupted { signal, .. } => (128 + signal) as u8,
            _ => 1,
        }
    }
}

impl Session {
    /// The library's configuration for one run: records to `records`
    /// (none: an unprofiled, placed run), the library's placement
    /// `placement`.
    pub fn library_config(&self, records: Option<&Path>, placement: &str) -> LibraryConfig {
        let s = &self.sampling;
        let text = |t: &str| (!t.is_empty()).then(|| t.to_string());
        LibraryConfig {
            records: records.map(|p| p.as_os_str().to_owned()),
            plan: text(placement),
            rate: s.rate,
            overhead_percent: s.overhead.map(|f| f * 100.0),
            word_counts: s.word_counts,
            min_bytes: Some(s.min_bytes),
            small_every: Some(s.small_every),
            duration_s: s.duration_s,
            refine: !matches!(s.refine, Refine::Off),
            refine_ms: Some((s.refine_time_s * 1e3).round() as u64),
            regions: text(&self.region_filter),
            refine_regions: text(&self.refine_filter),
            threads: s.threads.as_ref().map(|(_, t)| t.iter().collect()),
            pmu: text(&self.pmu_spec),
            pin: self.pin.clone(),
            pin_skip: self.pin_skip,
            ..LibraryConfig::default()
        }
    }

    fn program(&self) -> String {
        self.command
            .first()
            .map_or(String::new(), |c| c.to_string_lossy().into_owned())
    }

    /// One profiled run recording into `records` (an absolute path), with
    /// a plan and its library form applied when given; `live` gets a
    /// status line twice a second while the command runs.
    pub fn run(
        &self,
        records: &Path,
        plan: Option<(&Plan, &str)>,
        live: Option<&(dyn Fn(&str) + Sync)>,
    ) -> Result<(Profile, LaunchOutcome), SessionError> {
        let m = &self.machine;
        let placement = plan.map_or(self.placement.as_str(), |p| p.1);
        // A profiled program runs armed pages for numalab: it ends with it.
        let prepared = with_library(
            self.launch.prepare()?.end_with_this_process(true),
            &self.preload,
            &self.library_config(Some(records), placement),
        );
        // perf events only where asked for (each thread's, or a list):
        // by default the kernel's accounting at the reap gives the counts.
        let line = counters::line_bytes(m);
        let asked = self.sampling.counters.clone();
        let (prepared, counted) = match (self.sampling.per_thread, asked) {
            (true, list) => {
                let list = list.unwrap_or_else(counters::default_list);
                let (p, c) = counters::attach_per_task(prepared, list, line);
                (p, Some(c))
            }
            (false, Some(list)) => {
                let (p, c) = counters::attach(prepared, list, line);
                (p, Some(c))
            }
            (false, None) => (prepared, None),
        };
        // The kernel's context-switch hooks for perf events turned on
        // before the clock starts (see hold_task_switch_hooks), and kept
        // on until the command ended.
        let _hooks = crate::sys::perf::hold_task_switch_hooks();
        let started = std::time::Instant::now();
        let launch = prepared.spawn(&self.command)?;
        let stop = AtomicBool::new(false);
        let (outcome, ran_for) = std::thread::scope(|scope| {
            if let Some(say) = live {
                scope.spawn(|| live_status(m, records, &stop, say));
            }
            let outcome = launch.wait();
            let ran_for = started.elapsed().as_secs_f64();
            stop.store(true, Ordering::SeqCst);
            (outcome, ran_for)
        });
        let outcome = outcome.map_err(|source| SessionError::Wait {
            program: self.program(),
            source,
        })?;
        let mut profile = self.analyse(records);
        profile.ran_for_s = Some(ran_for);
        profile.counters = match counted {
            Some(c) => c.report(),
            None => outcome
                .usage
                .map(|u| counters::from_usage(&u, (ran_for * 1e9) as u64, line)),
        };
        if let Some((fp, _)) = plan {
            let bytes = std::fs::read(records).unwrap_or_default();
            let at_exit = outcome.placement.as_ref().and_then(|p| p.as_ref().ok());
            profile.plan_check = Some(verify(m, fp, &Record::decode_all(&bytes), at_exit));
        }
        if let Some((t, from)) = &self.latencies {
            price(&mut profile, t, from);
        }
        Ok((profile, outcome))
    }

    /// The profile of the records a run left at `records`.
    pub fn analyse(&self, records: &Path) -> Profile {
        let m = &self.machine;
        // No records: the profile says why, and the command's status
        // still passes on.
        let (bytes, missing) = match std::fs::read(records) {
            Ok(b) => (b, None),
            Err(e) => (
                Vec::new(),
                Some(format!(
                    "the command left no records at {} ({e}): statically linked and setuid programs ignore LD_PRELOAD, so nothing of them was sampled",
                    records.display()
                )),
            ),
        };
        let all = Record::decode_all(&bytes);
        let maps_text =
            std::fs::read_to_string(records.with_extension("bin.maps")).unwrap_or_default();
        let pcs: Vec<u64> = all
            .iter()
            .filter_map(Frame::from_record)
            .map(|f| f.pc)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let saved_maps = !maps_text.is_empty();
        // Which file each file mapping maps (those still mapped at exit).
        let files: Vec<(u64, Option<String>)> = all
            .iter()
            .filter(|r| r.kind == Kind::Alloc && r.flags & ALLOC_FILE != 0)
            .map(|r| (r.addr, symbols::object_at(&maps_text, r.addr)))
            .collect();
        let names = symbols::ProgramSymbols::new(maps_text, &pcs);
        let command = self
            .command
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let s = &self.sampling;
        let mut p = build_with_units(m, command, &all, &names, s.units.is_some());
        p.host = crate::cluster::host_name();
        for r in p.regions.iter_mut().filter(|r| r.kind == "file") {
            r.object = files
                .iter()
                .find(|(a, _)| *a == r.first_address)
                .and_then(|(_, f)| f.clone());
        }
        filter::apply(
            m,
            &mut p,
            s.regions.as_ref().map(|(t, f)| (t.as_str(), f)),
            s.threads.as_ref().map(|(t, _)| t.as_str()),
        );
        if let Some(u) = &s.units {
            super::granularity::apply(&mut p, u);
        }
        let (pmu, pmu_warnings) = self.pmu.clone().after_run(!self.pmu_spec.is_empty(), &all);
        p.pmu = Some(pmu);
        p.warnings.extend(pmu_warnings);
        if let Some(w) = super::huge_pages_split_here() {
            p.warnings.push(w);
        }
        if let Refine::Regions(t, _) = &s.refine {
            p.selection.get_or_insert_default().refine_regions = Some(t.clone());
        }
        if let Some(w) = missing {
            p.warnings = vec![w];
        }
        if !saved_maps && !pcs.is_empty() {
            p.warnings.push(
                "the program's memory map was not saved (it ended before the library's sampler started, and not through libc's exit): allocation sites are addresses"
                    .into(),
            );
        }
        p
    }

    /// `--repeat N`: N unprofiled runs without and N with the plan (its
    /// library form `with_plan`), in alternating order (without first in
    /// even rounds, with first in odd ones, so neither side always runs
    /// on a warmer machine), timed wall-clock, the program's output
    /// discarded.
    pub fn time_runs(&self, with_plan: &str, n: usize) -> Result<RunTimes, SessionError> {
        let (mut times_without, mut times_with) = (Vec::new(), Vec::new());
        for round in 1..=n {
            let order = if round % 2 == 1 {
                [false, true]
            } else {
                [true, false]
            };
            for planned in order {
                let placement = if planned { with_plan } else { &self.placement };
                let mut prepared = self.launch.prepare()?.quiet().end_with_this_process(true);
                if !placement.is_empty() {
                    let config = self.library_config(None, placement);
                    prepared = with_library(prepared, &self.preload, &config);
                }
                let t0 = std::time::Instant::now();
                let outcome =
                    prepared
                        .spawn(&self.command)?
                        .wait()
                        .map_err(|source| SessionError::Wait {
                            program: self.program(),
                            source,
                        })?;
                let dt = t0.elapsed().as_secs_f64();
                if let Some(signal) = outcome.interrupted_by {
                    return Err(SessionError::Interrupted { signal, round });
                }
                if outcome.status != ExitStatus::Exited(0) {
                    return Err(SessionError::TimedRunFailed {
                        round,
                        planned,
                        status: outcome.status,
                    });
                }
                if planned {
                    times_with.push(dt);
                } else {
                    times_without.push(dt);
                }
            }
        }
        Ok(RunTimes::judge(times_without, times_with))
    }
}

/// `prepared` with the preload library loaded (`preload`: `LD_PRELOAD`'s
/// value) and configured by `config`: every variable of the library is
/// set, so none of the caller's environment adds to the configuration.
pub fn with_library(
    mut prepared: PreparedLaunch,
    preload: &OsString,
    config: &LibraryConfig,
) -> PreparedLaunch {
    prepared = prepared.with_env("LD_PRELOAD", preload.clone());
    for (name, value) in config.to_env() {
        prepared = prepared.with_env(name, value);
    }
    prepared
}

/// Samples and remote share so far, while the command runs: `say` gets a
/// line each time it changes.
fn live_status(m: &Machine, records: &Path, stop: &AtomicBool, say: &(dyn Fn(&str) + Sync)) {
    use std::io::{Read, Seek, SeekFrom};
    let mut last = String::new();
    // Only the records written since the last look are read.
    let mut offset = 0u64;
    let mut count = LiveCount::default();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let mut bytes = Vec::new();
        if let Ok(mut f) = std::fs::File::open(records) {
            if f.seek(SeekFrom::Start(offset)).is_ok() {
                let _ = f.read_to_end(&mut bytes);
            }
        }
        let whole = bytes.len() / RECORD_BYTES * RECORD_BYTES;
        offset += whole as u64;
        count.add(m, &Record::decode_all(&bytes[..whole]));
        let line = count.line();
        if line != last {
            say(&line);
            last = line;
        }
    }
}

/// The samples a run has written so far, and how many were remote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LiveCount {
    pub samples: u64,
    pub remote: u64,
}

impl LiveCount {
    /// Counts the samples of `records` (refinement's write probes are no
    /// samples of the accesses).
    pub fn add(&mut self, m: &Machine, records: &[Record]) {
        for r in records
            .iter()
            .filter(|r| r.kind == Kind::Sample && r.flags & FLAG_WRITE_PROBE == 0)
        {
            self.samples += 1;
            if r.node >= 0 && m.node_of_cpu(r.cpu).is_some_and(|c| c != r.node as u32) {
                self.remote += 1;
            }
        }
    }

    pub fn line(&self) -> String {
        format!(
            "numalab profile: {} samples, {:.0}% remote",
            self.samples,
            100.0 * self.remote as f64 / self.samples.max(1) as f64
        )
    }
}

/// Where a run into `dir` writes its records (absolute: the program may
/// change its directory).
pub fn records_path(dir: &Path) -> PathBuf {
    let records = dir.join("records.bin");
    std::path::absolute(&records).unwrap_or(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;
    use crate::profile::record::FLAG_WRITE;

    fn sample(cpu: u32, node: i32, flags: u32) -> Record {
        Record {
            kind: Kind::Sample,
            tid: 1,
            cpu,
            node,
            flags,
            aux: 0,
            addr: 0x1000,
            size: 0,
            time_ns: 0,
        }
    }

    #[test]
    fn the_live_count_leaves_out_write_probes_and_counts_remote_samples() {
        // Node 0 has CPUs 0-1, node 1 CPUs 2-3.
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        assert_eq!(m.node_of_cpu(2), Some(1));
        let cpu_of_node_1 = 2;
        let mut c = LiveCount::default();
        c.add(
            &m,
            &[
                sample(0, 0, 0),
                sample(0, 1, FLAG_WRITE),
                sample(cpu_of_node_1, 0, 0),
                sample(cpu_of_node_1, 1, FLAG_WRITE_PROBE),
                sample(0, -1, 0),
            ],
        );
        assert_eq!(
            c,
            LiveCount {
                samples: 4,
                remote: 2
            }
        );
        assert_eq!(c.line(), "numalab profile: 4 samples, 50% remote");
    }

    #[test]
    fn refine_and_sampler_name_their_choices() {
        assert!(matches!(Refine::parse(" auto "), Ok(Refine::Auto)));
        assert!(matches!(Refine::parse("off"), Ok(Refine::Off)));
        assert!(matches!(Refine::parse("heap"), Ok(Refine::Regions(t, _)) if t == "heap"));
        assert!(Refine::parse("nonsense:x")
            .unwrap_err()
            .starts_with("give auto, off or a region filter ("));
        assert_eq!(Sampler::parse("pmu"), Ok(Sampler::Pmu));
        assert_eq!(
            Sampler::parse("pebs").unwrap_err(),
            "'pebs' is no sampler; valid: auto, faults, pmu"
        );
    }
}
