//! `numalab profile`'s sampling options, one group: how the preload
//! library samples (rate or overhead, word counts, duration, thresholds,
//! refinement, which regions and threads, which sampler), read into the
//! engine's [`Sampling`]; and [`session`], which turns `profile`'s option
//! groups into the engine's [`Session`].

use crate::args::{counter_list, percent, seconds, size, whole, List, Typed};
use crate::launch_args::{
    library, library_filter, placement_for_library, plan, preload_with, LaunchArgs, PinArgs,
};
use crate::output::CliError;
use numalab::measure::counters::Event;
use numalab::profile::filter::{self, RegionFilter};
use numalab::profile::granularity::{self, UnitRequest, UnitRule};
use numalab::profile::latency::LatencyTable;
use numalab::profile::session::Session;
use numalab::profile::session::{Refine, Sampling};
use numalab::profile::PmuStatus;
use numalab::profile::Sampler;
use numalab::text::format::excerpt;
use numalab::{IdSet, Machine};
use std::ffi::OsString;
use std::path::Path;

fn on_off(t: &str) -> Result<bool, String> {
    match t {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{t}' is not on or off")),
    }
}

/// A value the engine parses, its error after the option and a colon.
fn engine<T: Send + Sync + Clone + 'static>(parse: fn(&str) -> Result<T, String>) -> Typed<T> {
    Typed::new(move |opt, t| parse(t).map_err(|e| format!("{opt}: {e}")))
}

#[derive(clap::Args, Clone)]
pub struct SamplingArgs {
    /// Pages armed per second, fixed (each access to an armed page is one
    /// page-fault sample). Without it the rate adapts to --overhead.
    #[arg(long, value_name = "R", value_parser = whole(1, 200_000))]
    pub rate: Option<usize>,
    /// The share of the program's CPU time sampling may take, in percent,
    /// in all: the word counts' windows keep to three quarters of it (all
    /// but one point above 4), the page-fault rate (unless --rate fixes
    /// it) to what they leave; both adapt to the cost the library
    /// measures (default 0.5).
    #[arg(long, value_name = "PCT", value_parser = percent())]
    pub overhead: Option<f64>,
    /// Word counts, the estimate of every share: each thread counts its
    /// accesses to words drawn at random, with hardware watchpoints
    /// (docs/profile.md). `off` leaves the shares to page-fault samples,
    /// whose error is not bounded.
    #[arg(long, value_name = "on|off", default_value = "on", action = clap::ArgAction::Set, value_parser = crate::args::choice(&["on", "off"], on_off))]
    pub word_counts: bool,
    /// Sample for the first S seconds only; the command then runs on
    /// unsampled, and the profile is written when it ends.
    #[arg(long, value_name = "S", value_parser = seconds(0.001))]
    pub duration: Option<f64>,
    /// Track allocations of at least this size (malloc family and anonymous mmaps).
    #[arg(long, value_name = "SIZE", default_value = "64K", value_parser = size(4096, "one page"))]
    pub min_bytes: usize,
    /// Allocations below --min-bytes are not tracked one by one: one is
    /// drawn per this many bytes allocated, on average, with its call
    /// stack and its page's node, and each site's allocations and bytes
    /// are estimated from the draws (0: off).
    #[arg(long, value_name = "SIZE", default_value = "512K", value_parser = small_every())]
    pub small_every: usize,
    /// `auto`: after the page samples found lines accessed from several
    /// nodes, watch their 8-byte words with hardware watchpoints (reads
    /// and writes by node, false sharing); a region filter (as
    /// --regions): the same, within those regions only; `off` (default):
    /// pages only.
    #[arg(long, value_name = "MODE", default_value = "off", value_parser = engine(Refine::parse))]
    pub refine: Refine,
    /// Seconds of watchpoint windows refinement may spend in all (each hit
    /// costs the accessing thread a debug trap).
    #[arg(long, value_name = "S", default_value = "2", value_parser = seconds(0.02))]
    pub refine_time: f64,
    /// Sample only these regions: comma-separated alternatives, each a
    /// term or terms joined by & that must all match (heap&size>100M):
    /// heap, mmap, file:PATH (mappings of that file),
    /// stack, static, static:SYMBOL, site:FUNCTION, site:FILE:LINE and
    /// site:OBJECT+0xOFFSET (an allocation whose call stack passes there),
    /// site:OBJECT:FUNCTION (a function of a library loaded later, dlopen),
    /// 0xSTART-0xEND (overlapping), size>N, size<N (each allocation's
    /// bytes).
    #[arg(long, value_name = "FILTER", value_parser = region_filter())]
    pub regions: Option<(String, RegionFilter)>,
    /// Keep only these threads' samples: numbers in creation order, 0 (or
    /// `main`) the main thread, 1 the first thread the program created
    /// (e.g. `1-8`).
    #[arg(long = "only-threads", value_name = "SET", value_parser = thread_set())]
    pub threads: Option<(String, IdSet)>,
    /// `auto` (default): a memory-sampling PMU where this machine has one
    /// this user may open (Intel PEBS mem-loads, AMD IBS op), else
    /// protection faults; `faults`: protection faults; `pmu`: the PMU, or
    /// an error.
    #[arg(long, value_name = "HOW", default_value = "auto", value_parser = engine(Sampler::parse))]
    pub sampler: Sampler,
    /// Count perf events for the command, its threads and children (LIST: comma list of event
    /// names or all, default all; docs/counters.md). Without it profile.json's counters come
    /// from the kernel's accounting of the command (CPU time, faults, switches), which costs
    /// it nothing; perf events make each of its context switches dearer.
    #[arg(long, value_name = "LIST", num_args = 0..=1, require_equals = true, default_missing_value = "all", value_parser = counter_list())]
    pub counters: Option<List<&'static Event>>,
    /// Count each thread and child process on its own as well (the counters in profile.json,
    /// docs/counters.md: --counters's events, all by default): the command runs traced, and
    /// numalab waits until every process it started has ended.
    #[arg(long)]
    pub per_thread: bool,
    /// Each region's accesses unit by unit: `SIZE` (every sampled region)
    /// or `FILTER=SIZE` (the regions a filter as --regions takes selects;
    /// repeat it: a region takes the first rule that selects it), SIZE a
    /// power of two from the cache line to 2M (docs/profile.md, "Units
    /// of any size").
    #[arg(long, value_name = "[FILTER=]SIZE", value_parser = engine(UnitRule::parse))]
    pub granularity: Vec<UnitRule>,
    /// With --granularity: units listed per region, the most sampled
    /// first (default 20; the rest are counted).
    #[arg(long, value_name = "N", value_parser = whole(1, granularity::MAX_SHOWN), requires = "granularity")]
    pub units: Option<usize>,
    /// With --granularity: a unit is hot when its share of the region's
    /// samples is above PCT percent (the low end of its 95% interval;
    /// default: twice an even spread over the region's units).
    #[arg(long, value_name = "PCT", value_parser = percent(), requires = "granularity")]
    pub hot_share: Option<f64>,
}

impl SamplingArgs {
    /// The engine's form; `line_bytes` the machine's cache line, the
    /// smallest unit `--granularity` accepts (the error names the range).
    pub fn into_sampling(self, line_bytes: u64) -> Result<Sampling, String> {
        for rule in &self.granularity {
            rule.check(line_bytes)
                .map_err(|e| format!("--granularity {e}"))?;
        }
        let units = (!self.granularity.is_empty()).then(|| UnitRequest {
            rules: self.granularity,
            shown: self.units.unwrap_or(granularity::DEFAULT_SHOWN),
            hot_share: self.hot_share,
            line_bytes,
        });
        Ok(Sampling {
            rate: self.rate,
            overhead: self.overhead,
            word_counts: self.word_counts,
            duration_s: self.duration,
            min_bytes: self.min_bytes,
            small_every: self.small_every,
            refine: self.refine,
            refine_time_s: self.refine_time,
            regions: self.regions,
            threads: self.threads,
            per_thread: self.per_thread,
            counters: self.counters.map(|l| l.0),
            units,
        })
    }
}

fn region_filter() -> Typed<(String, RegionFilter)> {
    Typed::new(|opt, t| {
        RegionFilter::parse(t)
            .map(|f| (t.to_string(), f))
            .map_err(|e| format!("{opt}: {e}"))
    })
}

fn thread_set() -> Typed<(String, IdSet)> {
    Typed::new(|opt, t| {
        filter::parse_thread_set(t)
            .map(|s| (t.to_string(), s))
            .map_err(|e| format!("{opt} {}: {e}", excerpt(t, 40)))
    })
}

fn small_every() -> Typed<usize> {
    Typed::new(
        |opt, t| match numalab::text::parse::size(t).map_err(|e| format!("{opt}: {e}"))? {
            0 => Ok(0),
            1..=4095 => Err(format!(
                "{opt} {} is too small: 0 (off) or at least 4 KiB",
                excerpt(t, 40)
            )),
            v => usize::try_from(v).map_err(|_| format!("{opt} {} is too large", excerpt(t, 40))),
        },
    )
}

/// The engine's session for `profile`: the launch, the pinning, the
/// sampling and the filters of its option groups, each in the library's
/// form for `command`'s program; `machine`: `--machine`'s latency file.
pub fn session(
    m: Machine,
    (launch, pinning, sampling): (&LaunchArgs, &PinArgs, &SamplingArgs),
    machine: Option<&Path>,
    command: &[OsString],
) -> Result<Session, CliError> {
    let launch_plan = plan(&m, launch)?;
    let pin = pinning.cpus(&m, &launch_plan)?;
    let latencies = match machine {
        Some(p) => Some((
            LatencyTable::read_for_machine(&m, p).map_err(CliError::usage)?,
            p.display().to_string(),
        )),
        None => None,
    };
    let (pmu, pmu_spec) =
        PmuStatus::plan(sampling.sampler, PmuStatus::of_this_machine()).map_err(CliError::usage)?;
    let program = &command[0];
    let region_filter = library_filter(
        "--regions",
        sampling.regions.as_ref().map(|(_, f)| f),
        program,
    )?;
    let refine_filter = match &sampling.refine {
        Refine::Regions(_, f) => library_filter("--refine", Some(f), program)?,
        _ => String::new(),
    };
    let placement = placement_for_library(&m, &launch_plan, None, program)?;
    // The smallest unit is the machine's cache line, as its model says.
    let line = numalab::measure::counters::line_bytes(&m)
        .map_or(numalab::profile::granularity::DEFAULT_LINE, u64::from);
    let library_sampling = sampling
        .clone()
        .into_sampling(line)
        .map_err(CliError::usage)?;
    Ok(Session {
        preload: preload_with(&library()?),
        sampling: library_sampling,
        command: command.to_vec(),
        machine: m,
        launch: launch_plan,
        pmu,
        pmu_spec,
        region_filter,
        refine_filter,
        placement,
        latencies,
        pin,
        pin_skip: pinning.skip_mask(),
    })
}
