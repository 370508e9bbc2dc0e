//! `numalab profile`: which data of a program is accessed from which node.
//!
//! The program runs with the preload library (crates/numalab-preload),
//! which samples accesses to its large allocations by protection faults
//! and writes fixed-size records ([`record`]). This module turns the
//! records into a [`Profile`]: regions grouped by allocation site, each
//! with its sampled accesses as a (CPU node of the thread) × (memory node
//! of the page) matrix, its remote share, where its pages were, and the
//! threads that touched it. [`symbols`] names the allocation sites.

pub mod compare;
pub mod diagnose;
pub mod elf_index;
pub mod estimate;
pub mod filter;
pub mod granularity;
pub mod latency;
pub mod merge;
pub mod objects;
pub mod page_map;
// The perf_event_open structures and sample decoding, shared with the
// preload library through the contract crate.
pub(crate) use numalab_profile_abi::perf;
pub mod plan;
pub mod pmu;
/// The records the preload library writes: the contract crate's.
pub use numalab_profile_abi::record;
pub mod refine;
mod replay;
pub mod session;
pub mod symbols;

use crate::machine::Machine;
use numalab_profile_abi::events::{Cost, PmuEnd};
use record::{Kind, Record};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Version of the profile's JSON (docs/profile.md).
pub const SCHEMA_VERSION: &str = "2.9";

/// Sampled accesses by (CPU node of the thread, memory node of the page).
pub type AccessMatrix = BTreeMap<u32, BTreeMap<u32, u64>>;

/// One allocation site (or mapping, static symbol, stack) and what was
/// sampled of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RegionProfile {
    /// `heap` (malloc family), `mmap` (anonymous mapping), `file` (a
    /// mapping of a file; `object` names it, since 1.4), `small` (heap
    /// allocations below `--min-bytes`, sampled by bytes, located only),
    /// `static` (a data symbol, or the rest of an object's .data/.bss) or
    /// `stack` (a thread's).
    pub kind: String,
    /// The allocation site: the first frame outside the preload library
    /// and libc's allocator, symbolised where debug info allows; for
    /// static data the symbol, for a stack "stack of thread TID".
    pub site: String,
    /// Whether its accesses were sampled (heap and mmap); static data and
    /// stacks are located only.
    pub sampled: bool,
    /// The ELF object of static data.
    pub object: Option<String>,
    /// The thread whose stack it is.
    pub thread: Option<u32>,
    /// The call stack, innermost first.
    pub stack: Vec<String>,
    /// Allocations from this site, and their bytes (kind `small`:
    /// estimated from the sampled ones).
    pub allocations: u64,
    pub bytes: u64,
    /// Kind `small` (allocations below `--min-bytes`, since 1.4): the
    /// allocations drawn, one per so many bytes allocated on average; its
    /// `pages_by_node` then counts the drawn allocations by the node of
    /// their page when allocated (-1: not present yet).
    #[serde(default)]
    pub sampled_allocations: u64,
    /// The first allocation's address, for reading the page map.
    pub first_address: u64,
    pub samples: u64,
    pub reads: u64,
    pub writes: u64,
    /// Samples whose access type the mechanism could not tell.
    pub unknown_access: u64,
    pub accesses: AccessMatrix,
    /// Share of its accesses from a thread on another node than the
    /// page's: the word counts' estimate where they counted any access
    /// (`estimate`), else the share of its page-fault samples (whose error
    /// is not bounded: a fault sample goes to the first thread that
    /// touches an armed page).
    pub remote_share: Option<f64>,
    /// Its accesses estimated from the word counts (since 1.7), with
    /// intervals; `None` where no counted access fell in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<estimate::AccessEstimate>,
    /// Mean SLIT distance of the sampled accesses over the local distance
    /// (1.0: all local).
    pub distance_ratio: Option<f64>,
    /// The sampled accesses priced with a measured latency matrix
    /// (`--machine`); `None` without one.
    #[serde(default)]
    pub latency_cost: Option<latency::AccessCost>,
    /// Pages per node when freed or at exit (`-1`: not present).
    pub pages_by_node: BTreeMap<i32, u64>,
    /// Threads that accessed it, with their samples.
    pub threads: BTreeMap<u32, u64>,
    /// Of each thread's samples with both nodes known, `[placed, remote]`:
    /// the fault samples' interval treats each thread as one cluster.
    #[serde(default)]
    pub placed_by_thread: BTreeMap<u32, [u64; 2]>,
    /// Its sampled first touches: who put its pages where.
    pub first_touch: Option<FirstTouches>,
    /// Its pages by node at the sampler's snapshots, while it lived.
    pub pages_over_time: Vec<PageSnapshot>,
    /// Its most sampled allocation page by page (the [`MAPPED_REGIONS`]
    /// most sampled regions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_map: Option<page_map::PageMap>,
    /// Its accesses unit by unit (`--granularity`); `None`: not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<granularity::UnitTable>,
    /// Its samples as the replay kept them for `--granularity`, until
    /// [`granularity::apply`] makes its units (never written).
    #[serde(skip)]
    pub kept_samples: Option<Box<granularity::RegionSamples>>,
}

impl RegionProfile {
    /// The share of its page-fault samples that were remote (whatever the
    /// word counts say; its error is not bounded).
    pub fn fault_remote_share(&self) -> Option<f64> {
        let mut placed = 0u64;
        let mut remote = 0u64;
        for (c, row) in &self.accesses {
            for (m, k) in row {
                placed += k;
                if c != m {
                    remote += k;
                }
            }
        }
        (placed > 0).then(|| remote as f64 / placed as f64)
    }
}

/// Regions that keep their page map: the most sampled, which are the ones
/// worth drawing, and a bound on the JSON.
pub const MAPPED_REGIONS: usize = 6;

/// Pages by node of a region (its allocations together) at one moment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PageSnapshot {
    /// Seconds from the library's start.
    pub at_s: f64,
    pub pages_by_node: BTreeMap<i32, u64>,
}

/// The first touches sampled in a region: pages armed while not present,
/// and the access that brought each in.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FirstTouches {
    pub samples: u64,
    /// Of them, writes (a read maps the shared zero page; the page is
    /// placed at the first write, which is not sampled then).
    pub writes: u64,
    /// Threads that touched first, with their counts.
    pub threads: BTreeMap<u32, u64>,
    /// The node each page was on after its first touch (-1: unknown, -2:
    /// the zero page, read before written).
    pub nodes: BTreeMap<i32, u64>,
}

/// One thread of the program.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThreadProfile {
    pub tid: u32,
    /// Its name as the kernel had it last (`comm`: what `ps -L` and `top
    /// -H` show), since 1.8; `None` where no name was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its number in creation order (0: the main thread), as `--only-threads`
    /// selects it; `None`: not created through `pthread_create`.
    #[serde(default)]
    pub ordinal: Option<u32>,
    pub samples: u64,
    /// CPUs its affinity allowed at its first sample (1: pinned; `None`:
    /// not recorded).
    pub allowed_cpus: Option<u64>,
    /// CPUs it was seen on, and their nodes.
    pub cpus: Vec<u32>,
    pub nodes: Vec<u32>,
    pub remote_share: Option<f64>,
    /// Sampled first touches by this thread, in every region.
    pub first_touches: u64,
    /// Its share of the program's estimated accesses, from the word
    /// counts, and their cells (since 1.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_share: Option<f64>,
    #[serde(default)]
    pub word_cells: u64,
    /// Its sampled accesses by the memory node of the page.
    pub memory_nodes: BTreeMap<u32, u64>,
    /// How often the kernel moved it between CPUs (scheduler statistics,
    /// read when it ended or at exit; `None` where the kernel keeps none).
    pub migrations: Option<u64>,
    /// CPU changes between its consecutive sampled faults (a lower bound
    /// of its migrations).
    pub cpu_changes_seen: u64,
    /// Where it ran over time: spans of consecutive sampled faults on one
    /// node.
    pub timeline: Vec<ThreadSpan>,
}

/// A stretch of a thread's sampled faults on one node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThreadSpan {
    /// Seconds from the library's start, of the first and last fault.
    pub from_s: f64,
    pub to_s: f64,
    pub node: Option<u32>,
    pub cpus: Vec<u32>,
    /// Sampled accesses in it, and of them remote.
    pub samples: u64,
    pub remote: u64,
}

/// Spans kept per thread; later faults extend the last one.
const MAX_SPANS: usize = 1000;

/// What the replay learns of one thread.
#[derive(Default)]
struct ThreadAcc {
    samples: u64,
    word_cells: u64,
    word_draws: u64,
    cpus: BTreeSet<u32>,
    remote: u64,
    memory_nodes: BTreeMap<u32, u64>,
    last_cpu: Option<u32>,
    cpu_changes: u64,
    timeline: Vec<ThreadSpan>,
    migrations: Option<u64>,
}

impl ThreadAcc {
    /// A sampled fault at `t` s on `cpu` (node `node`); `remote` when an
    /// access to another node's page.
    fn fault(&mut self, t: f64, cpu: u32, node: Option<u32>, access: Option<bool>) {
        self.cpus.insert(cpu);
        if self.last_cpu.is_some_and(|c| c != cpu) {
            self.cpu_changes += 1;
        }
        self.last_cpu = Some(cpu);
        let (n, remote) = match access {
            Some(r) => (1, r as u64),
            None => (0, 0),
        };
        let full = self.timeline.len() >= MAX_SPANS;
        match self.timeline.last_mut() {
            Some(s) if s.node == node || full => {
                s.to_s = t;
                if !s.cpus.contains(&cpu) {
                    s.cpus.push(cpu);
                }
                s.samples += n;
                s.remote += remote;
            }
            _ => self.timeline.push(ThreadSpan {
                from_s: t,
                to_s: t,
                node,
                cpus: vec![cpu],
                samples: n,
                remote,
            }),
        }
    }
}

/// What sampling cost the program, as the library measured it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SamplingCost {
    /// The share of the program's CPU time the rate was adapted to
    /// (`None`: a fixed `--rate`).
    pub target_percent: Option<f64>,
    /// Time spent sampling (the sampler thread, the fault handler, and
    /// the kernel's part of each fault), and the program's own CPU time.
    pub spent_ms: f64,
    pub program_cpu_ms: f64,
    /// `spent_ms` over `program_cpu_ms`.
    pub estimated_percent: Option<f64>,
    /// The kernel's part of one sampled fault, measured at start.
    pub kernel_us_per_fault: f64,
    /// Everything spent, per sampled fault (accesses and first touches).
    pub us_per_sample: Option<f64>,
    /// The rate at the end, and its range over the run (pages a second).
    pub final_rate: u64,
    pub min_rate: u64,
    pub max_rate: u64,
    /// Pages armed a second on average over the time the sampler ran
    /// (from its first Cost record to its last), since 2.8; `None` when
    /// several processes were sampled or it ran under 20 ms. It falls
    /// short of the rate asked when the program touches few pages (a page
    /// is armed again only once its last arming was touched, so a tick
    /// arms at most the pages touched since) or the sampler's ticks come
    /// late (a busy machine): base64 at `--rate 20000` got about half.
    #[serde(default)]
    pub armed_per_s: Option<f64>,
    /// How many threads ran in step over the run, weighed by the
    /// program's CPU time (since 2.9; `None` from an older library, or
    /// several processes): busy threads that wait for each other often,
    /// so that a delay of one holds up the others. The rate and word
    /// counting kept their cost to the target over it.
    #[serde(default)]
    pub in_step: Option<f64>,
}

/// What a profiled run found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Profile {
    pub schema_version: String,
    /// The profiled program and its arguments. (Schema 1 called it
    /// `command`, read still; 2.0 renamed it so that `profile --json`'s
    /// envelope can carry the numalab command as every command's does.)
    #[serde(alias = "command")]
    pub program: Vec<String>,
    /// The profiled process (its main thread's id).
    pub pid: u32,
    /// The host it ran on (the kernel's host name), so that the ranks of a
    /// job merged from several nodes say where each ran. Since 2.1; absent
    /// in profiles rebuilt from saved records (`profile build`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Pages armed per second asked (0: adaptive, see `cost`), and the
    /// tracking threshold.
    pub rate: u64,
    pub min_bytes: u64,
    pub page_size: u64,
    pub pages_armed: u64,
    /// A Go program (its runtime found at start): no page was armed, since
    /// the runtime's own system calls would fail on one (since 1.9).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub go_runtime: bool,
    pub samples: u64,
    /// Samples taken on a transparent huge page armed whole, so that
    /// sampling did not split it (since 1.4).
    #[serde(default)]
    pub huge_page_samples: u64,
    /// What sampling cost, when the library measured it.
    pub cost: Option<SamplingCost>,
    /// Sampling stopped this long after the start (`--duration`); `None`:
    /// the whole run.
    pub sampled_for_s: Option<f64>,
    /// The command's wall time under the profile, from its start to its
    /// end (since 2.3): what profiling cost the program, beside a plain
    /// run's time, without numalab's own start and analysis. `None` for a
    /// profile rebuilt from saved records.
    #[serde(default)]
    pub ran_for_s: Option<f64>,
    /// Samples outside every tracked allocation (a freed one, a race).
    pub unattributed: u64,
    /// The whole program's remote share: the word counts' estimate where
    /// they ran, else the page-fault samples' (see RegionProfile).
    pub remote_share: Option<f64>,
    /// The word counts over every tracked region (since 1.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<estimate::AccessEstimate>,
    /// What the word counter did (since 1.7); `None` in older profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub word_counting: Option<estimate::WordCounting>,
    pub regions: Vec<RegionProfile>,
    pub threads: Vec<ThreadProfile>,
    /// The file whose latency matrix priced the regions (`--machine`).
    #[serde(default)]
    pub latency_source: Option<String>,
    /// The cache lines and words watched (`--refine auto`); `None`: not
    /// refined.
    #[serde(default)]
    pub refinement: Option<refine::Refinement>,
    /// What the numbers say of the regions, with the fix of each.
    pub diagnoses: Vec<diagnose::Diagnosis>,
    /// With `profile --plan`: where the plan's regions ended, from the
    /// kernel (since 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_check: Option<plan::PlanCheck>,
    /// What limits this profile (no samples, records lost, ...).
    pub warnings: Vec<String>,
    /// What `--regions` and `--only-threads` selected; `None`: everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// The memory-sampling PMU this machine has, and whether it was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmu: Option<PmuStatus>,
    /// The command's counters over the whole run (docs/counters.md),
    /// sampling's own cost included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<crate::measure::counters::CounterReport>,
    /// What `--granularity` asked (each region's units are in its
    /// `units`); `None`: not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granularity: Option<granularity::Granularity>,
}

/// What [`pmu::detect`] and [`pmu::probe`] found, and what sampling
/// made of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PmuStatus {
    /// The memory-sampling event found ("AMD IBS op"), if any.
    pub found: Option<String>,
    /// Whether its samples are in this profile.
    pub used: bool,
    /// Why not (or what limits it).
    pub reason: String,
    /// Samples the PMU took (since 1.4).
    #[serde(default)]
    pub samples: u64,
}

/// How `numalab profile` samples (`--sampler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampler {
    /// The PMU where one is usable, else protection faults.
    Auto,
    /// Protection faults, whatever the machine has.
    Faults,
    /// The PMU, or an error.
    Pmu,
}

/// Every `PMU_PERIOD`-th sampled event (load, or op) is a sample: a
/// prime, so that loops of a power-of-two length are not sampled at one
/// phase.
pub const PMU_PERIOD: u64 = 10007;

impl PmuStatus {
    /// This machine's, from `/sys/bus/event_source/devices` and a trial
    /// open of the event found; with the event to sample with when it is
    /// usable (opens, and writes data addresses in its samples).
    pub fn of_this_machine() -> (PmuStatus, Option<pmu::MemoryEvent>) {
        let d = pmu::detect(std::path::Path::new("/sys/bus/event_source/devices"));
        let Some(e) = d.event else {
            return (PmuStatus::unused(None, d.reason), None);
        };
        match pmu::probe(&e) {
            Err(refused) => (PmuStatus::unused(Some(e.name), refused), None),
            Ok(()) if !e.sample_records => (PmuStatus::unused(Some(e.name), d.reason), None),
            Ok(()) => (
                PmuStatus::unused(Some(e.name.clone()), "usable".into()),
                Some(e),
            ),
        }
    }

    fn unused(found: Option<String>, reason: String) -> PmuStatus {
        PmuStatus {
            found,
            used: false,
            reason,
            samples: 0,
        }
    }

    /// What to sample with, as `--sampler` asks: the status to report,
    /// and the preload library's `NUMALAB_PROFILE_PMU` (empty: faults).
    /// `Err` when the PMU is asked for and none is usable.
    pub fn plan(
        want: Sampler,
        (status, event): (PmuStatus, Option<pmu::MemoryEvent>),
    ) -> Result<(PmuStatus, String), String> {
        match (want, event) {
            (Sampler::Faults, _) => Ok((
                PmuStatus {
                    reason: "--sampler faults: protection faults asked for".into(),
                    ..status
                },
                String::new(),
            )),
            (Sampler::Pmu, None) => Err(format!(
                "--sampler pmu: no memory-sampling PMU usable here ({}); valid: auto, faults",
                status.reason
            )),
            (_, None) => Ok((status, String::new())),
            (_, Some(e)) => Ok((
                status,
                format!(
                    "{}:{:#x}:{:#x}:{}:{}",
                    e.kind, e.config, e.config1, e.precise_ip, PMU_PERIOD
                ),
            )),
        }
    }

    /// What the run's records say of PMU sampling: whether its samples
    /// are in, how many, and warnings for what limited it (the kernel's
    /// refusal, samples it dropped). `asked`: the library was given an
    /// event.
    pub fn after_run(mut self, asked: bool, records: &[Record]) -> (PmuStatus, Vec<String>) {
        let mut warnings = Vec::new();
        self.samples = records
            .iter()
            .filter(|r| r.kind == Kind::Sample && r.flags & record::FLAG_PMU != 0)
            .count() as u64;
        self.used = self.samples > 0;
        if !asked {
            return (self, warnings);
        }
        // The last Pmu record (a forked child writes its own).
        let end = records.iter().rev().find_map(PmuEnd::from_record);
        if let Some(r) = &end {
            if r.refused_threads > 0 {
                let err = std::io::Error::from_raw_os_error(r.first_errno);
                warnings.push(format!(
                    "the kernel refused the PMU event on {} thread(s) ({err}){}",
                    r.refused_threads,
                    if self.used {
                        ""
                    } else {
                        ": sampled by protection faults instead"
                    }
                ));
            }
            if r.untracked_threads > 0 {
                warnings.push(format!(
                    "{} thread(s) past the library's 1024 were not sampled by the PMU",
                    r.untracked_threads
                ));
            }
            if r.lost_samples > 0 {
                warnings.push(format!(
                    "the kernel dropped {} PMU samples (a thread's ring was full between the sampler's reads)",
                    r.lost_samples
                ));
            }
        }
        self.reason = if self.used {
            format!(
                "the samples are the PMU's data addresses (one in {PMU_PERIOD} events){}",
                end.filter(|r| r.outside_samples > 0)
                    .map_or(String::new(), |r| format!(
                        "; {} fell outside the tracked allocations",
                        r.outside_samples
                    ))
            )
        } else {
            "it was asked for, but took no sample in a tracked allocation".into()
        };
        (self, warnings)
    }
}

/// Why sampling on this machine splits transparent huge pages, if it
/// does: they are on, and the kernel is older than the `PAGEMAP_SCAN`
/// ioctl (Linux 6.7) through which the library tells which pages are
/// huge (see the preload's `huge` module).
pub fn huge_pages_split_here() -> Option<String> {
    let enabled = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    huge_pages_split(&enabled, &release)
}

/// [`huge_pages_split_here`] from the contents of THP's `enabled` file and
/// the kernel's release.
pub fn huge_pages_split(enabled: &str, release: &str) -> Option<String> {
    if enabled.contains("[never]") {
        return None;
    }
    let mut v = release.trim().split(['.', '-']).map(|x| x.parse::<u32>());
    let (Some(Ok(major)), Some(Ok(minor))) = (v.next(), v.next()) else {
        return None;
    };
    ((major, minor) < (6, 7)).then(|| {
        format!(
            "transparent huge pages are on, and Linux {major}.{minor} cannot tell which pages are huge (PAGEMAP_SCAN came in 6.7): sampling splits the huge pages it arms, and the program may run slower under the profile than without"
        )
    })
}

/// The regions and threads a profile was limited to.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Selection {
    /// The `--regions` filter, as given.
    pub regions: Option<String>,
    /// The `--only-threads` set, as given.
    pub threads: Option<String>,
    /// Static objects and stacks the filter left out of `regions`.
    pub regions_left_out: u64,
    /// Faults of threads outside the set, not recorded.
    pub samples_of_other_threads: u64,
    /// The `--refine` filter: the regions whose lines refinement watched.
    #[serde(default)]
    pub refine_regions: Option<String>,
}

/// Names for what the records hold only as addresses.
pub trait Symbolizer {
    /// The name of a call-stack address.
    fn frame(&self, pc: u64) -> Option<String>;
    /// The object whose writable segment starts at `segment` (loaded at
    /// `bias`), and its data symbols.
    fn static_object(&self, segment: u64, bias: u64) -> Option<StaticObject>;
}

/// An ELF object's static data, for [`Symbolizer::static_object`].
#[derive(Debug, Clone, PartialEq)]
pub struct StaticObject {
    /// The object's file name.
    pub name: String,
    pub symbols: Vec<DataSymbol>,
}

/// One data symbol (.data, .bss) at its address in the process.
#[derive(Debug, Clone, PartialEq)]
pub struct DataSymbol {
    pub name: String,
    pub start: u64,
    pub size: u64,
}

/// A static segment or stack whose pages were located.
struct Located {
    stack_of: Option<u32>,
    start: u64,
    len: u64,
    bias: u64,
    /// (first page, pages, node)
    runs: Vec<(u64, u64, i32)>,
}

/// A live allocation while the records are replayed.
struct Live {
    start: u64,
    len: u64,
    site: usize,
}

/// The whole pages of `[start, start + len)`: what the library tracks of
/// an allocation (and draws words from).
fn whole_pages(start: u64, len: u64, page_size: u64) -> u64 {
    let first = start.div_ceil(page_size);
    let end = (start + len) / page_size;
    end.saturating_sub(first)
}

#[derive(Default)]
struct SiteAcc {
    kind: String,
    stack: Vec<u64>,
    allocations: u64,
    bytes: u64,
    first_address: u64,
    samples: u64,
    reads: u64,
    writes: u64,
    unknown: u64,
    accesses: AccessMatrix,
    remote: u64,
    distance_sum: f64,
    local_distance_sum: f64,
    pages: BTreeMap<i32, u64>,
    threads: BTreeMap<u32, u64>,
    placed_by_thread: BTreeMap<u32, [u64; 2]>,
    first_touch: FirstTouches,
    /// Small allocations (kind "small"): drawn, and the estimates.
    sampled_allocations: u64,
    estimated_allocations: f64,
    estimated_bytes: f64,
    /// Snapshot number -> (first time seen, pages by node).
    snapshots: BTreeMap<u32, (u64, BTreeMap<i32, u64>)>,
    /// Whole pages of its live allocations now (while replaying), the
    /// word counter's frame share.
    live_pages: u64,
    /// Its allocations and samples, kept for `--granularity`.
    kept: granularity::RegionSamples,
}

/// The live allocation holding `addr`.
fn owner_of(live: &BTreeMap<u64, Live>, addr: u64) -> Option<&Live> {
    live.range(..=addr)
        .next_back()
        .map(|(_, l)| l)
        .filter(|l| addr < l.start + l.len)
}

/// Builds the profile of `records` (in the order they were written) on
/// machine `m`; `name` names each call-stack address.
pub fn build(
    m: &Machine,
    command: Vec<String>,
    records: &[Record],
    names: &dyn Symbolizer,
) -> Profile {
    build_with_units(m, command, records, names, false)
}

/// [`build`], keeping each sampled region's samples for
/// [`granularity::apply`] when `keep_samples` (`--granularity`).
pub fn build_with_units(
    m: &Machine,
    command: Vec<String>,
    records: &[Record],
    names: &dyn Symbolizer,
    keep_samples: bool,
) -> Profile {
    let mut replay = replay::Replay::new(m, records, keep_samples);
    for r in records {
        replay.record(r);
    }
    replay.finish(command, records, names)
}

/// The cost the Cost records report: the last one's totals, the range of
/// the rate over all of them, and the pages armed a second over the time
/// between the first and the last (`armed`: the pages armed in all, `None`
/// when several processes' records are mixed).
fn sampling_cost(costs: &[Cost], faults: u64, armed: Option<u64>) -> Option<SamplingCost> {
    let last = costs.last()?;
    let ran_s = last.time_ns.saturating_sub(costs[0].time_ns) as f64 / 1e9;
    let rates = costs.iter().map(|c| c.rate as u64);
    let spent_ms = last.spent_ns as f64 / 1e6;
    let program_cpu_ms = last.program_ns as f64 / 1e6;
    Some(SamplingCost {
        target_percent: last.target_ppm.map(|t| t as f64 / 1e4),
        spent_ms,
        program_cpu_ms,
        estimated_percent: (last.program_ns > 0).then(|| 100.0 * spent_ms / program_cpu_ms),
        kernel_us_per_fault: last.kernel_ns_per_fault as f64 / 1e3,
        us_per_sample: (faults > 0).then(|| 1e3 * spent_ms / faults as f64),
        final_rate: last.rate as u64,
        min_rate: rates.clone().min().unwrap_or(0),
        max_rate: rates.max().unwrap_or(0),
        armed_per_s: armed
            .filter(|_| ran_s >= MIN_RATE_SPAN_S)
            .map(|a| a as f64 / ran_s),
        in_step: armed.and_then(|_| in_step_over_run(costs)),
    })
}

/// The threads in step over the run: each Cost record's count weighed by
/// the program's CPU time since the record before (it moves from window
/// to window as the program's threads meet more or less often). `None`
/// when the records do not carry it (an older library).
fn in_step_over_run(costs: &[Cost]) -> Option<f64> {
    let (mut weighed, mut time) = (0.0, 0.0);
    for pair in costs.windows(2) {
        let k = pair[1].in_step_milli? as f64 / 1e3;
        let t = pair[1].program_ns.saturating_sub(pair[0].program_ns) as f64;
        weighed += k * t;
        time += t;
    }
    // In thousandths, as the records carry it (no float noise in the JSON).
    let k = match (time > 0.0, costs.last()?.in_step_milli) {
        (true, _) => weighed / time,
        (false, last) => last? as f64 / 1e3,
    };
    Some((k * 1e3).round() / 1e3)
}

/// The shortest sampling time an armed rate is given for: over less, a
/// tick or two more or less swings it.
const MIN_RATE_SPAN_S: f64 = 0.02;

/// Small allocations drawn from stacks that differ below their site (the
/// first frame outside the allocator) are one region: a site draws few
/// each, and a caller's caller says little about where they went.
fn merge_small_sites(regions: &mut Vec<RegionProfile>) {
    let mut by_site: BTreeMap<String, usize> = BTreeMap::new();
    let mut kept: Vec<RegionProfile> = Vec::with_capacity(regions.len());
    for r in regions.drain(..) {
        if r.kind != "small" {
            kept.push(r);
            continue;
        }
        match by_site.get(&r.site) {
            Some(&i) => {
                let k = &mut kept[i];
                k.allocations += r.allocations;
                k.bytes += r.bytes;
                k.sampled_allocations += r.sampled_allocations;
                for (n, c) in r.pages_by_node {
                    *k.pages_by_node.entry(n).or_default() += c;
                }
            }
            None => {
                by_site.insert(r.site.clone(), kept.len());
                kept.push(r);
            }
        }
    }
    *regions = kept;
}

/// Pages present on some node.
fn present(r: &RegionProfile) -> u64 {
    r.pages_by_node
        .iter()
        .filter(|(n, _)| **n >= 0)
        .map(|(_, p)| p)
        .sum()
}

/// Pages by node of the runs' pages inside `[start, end)`.
fn pages_within(runs: &[(u64, u64, i32)], start: u64, end: u64, ps: u64) -> BTreeMap<i32, u64> {
    let mut h = BTreeMap::new();
    for &(first, pages, node) in runs {
        let (a, b) = (first.max(start / ps * ps), (first + pages * ps).min(end));
        if a < b {
            *h.entry(node).or_default() += (b - a).div_ceil(ps);
        }
    }
    h
}

/// A region located only: no samples, its pages by node.
pub fn located_region(kind: &str, site: String, bytes: u64, first: u64) -> RegionProfile {
    RegionProfile {
        kind: kind.into(),
        site,
        sampled: false,
        object: None,
        thread: None,
        stack: Vec::new(),
        allocations: 1,
        sampled_allocations: 0,
        bytes,
        first_address: first,
        samples: 0,
        reads: 0,
        writes: 0,
        unknown_access: 0,
        accesses: AccessMatrix::new(),
        remote_share: None,
        estimate: None,
        distance_ratio: None,
        latency_cost: None,
        pages_by_node: BTreeMap::new(),
        threads: BTreeMap::new(),
        placed_by_thread: BTreeMap::new(),
        first_touch: None,
        pages_over_time: Vec::new(),
        page_map: None,
        units: None,
        kept_samples: None,
    }
}

/// The stacks and static data as regions: one per thread's stack with
/// pages present; per object, one per data symbol of at least
/// `min_bytes`, and the rest of its segments as one when that much of it
/// is present.
fn located_regions(
    located: &[Located],
    names: &dyn Symbolizer,
    min_bytes: u64,
    ps: u64,
    pid: u32,
) -> Vec<RegionProfile> {
    let ps = ps.max(1);
    let mut out = Vec::new();
    for l in located {
        let end = l.start + l.len;
        if let Some(tid) = l.stack_of {
            let whose = if tid == pid {
                format!("stack of thread {tid} (main)")
            } else {
                format!("stack of thread {tid}")
            };
            let mut r = located_region("stack", whose, l.len, l.start);
            r.thread = Some(tid);
            r.pages_by_node = pages_within(&l.runs, l.start, end, ps);
            if present(&r) > 0 {
                out.push(r);
            }
            continue;
        }
        let obj = names.static_object(l.start, l.bias);
        // The profiler's own tables are not the program's data.
        if obj
            .as_ref()
            .is_some_and(|o| o.name.contains("libnumalab_preload"))
        {
            continue;
        }
        let object = obj
            .as_ref()
            .map_or("(unknown object)".to_string(), |o| o.name.clone());
        let mut rest = pages_within(&l.runs, l.start, end, ps);
        let big = obj
            .iter()
            .flat_map(|o| &o.symbols)
            .filter(|s| s.size >= min_bytes && s.start >= l.start && s.start + s.size <= end);
        for s in big {
            let mut r = located_region("static", s.name.clone(), s.size, s.start);
            r.object = Some(object.clone());
            r.pages_by_node = pages_within(&l.runs, s.start, s.start + s.size, ps);
            // Whole pages of the symbol leave the rest; pages it shares
            // with neighbours stay counted there too.
            let inner = pages_within(
                &l.runs,
                s.start.div_ceil(ps) * ps,
                (s.start + s.size) / ps * ps,
                ps,
            );
            for (n, k) in inner {
                if let Some(v) = rest.get_mut(&n) {
                    *v = v.saturating_sub(k);
                }
            }
            out.push(r);
        }
        let mut r = located_region("static", "(other static data)".into(), l.len, l.start);
        r.object = Some(object);
        rest.retain(|_, k| *k > 0);
        r.pages_by_node = rest;
        if present(&r) * ps >= min_bytes {
            out.push(r);
        }
    }
    out
}

/// A record for tests that build profiles from records (no flags), here and
/// in numalab-report (compiled always, as
/// `placement::node_memory::test_tree`).
#[doc(hidden)]
pub fn test_record(
    kind: Kind,
    tid: u32,
    cpu: u32,
    node: i32,
    addr: u64,
    size: u64,
    t: u64,
) -> Record {
    Record {
        kind,
        tid,
        cpu,
        node,
        flags: 0,
        addr,
        size,
        time_ns: t,
        aux: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;

    /// Names from fixed tables, as a test's program would have them.
    struct Fixed;

    impl Symbolizer for Fixed {
        fn frame(&self, pc: u64) -> Option<String> {
            (pc == 0x401000).then(|| "fill prog.c:12 (prog)".into())
        }
        fn static_object(&self, segment: u64, bias: u64) -> Option<StaticObject> {
            (segment == 0x10000).then(|| StaticObject {
                name: "prog".into(),
                symbols: vec![
                    DataSymbol {
                        name: "big_table".into(),
                        start: bias + 0x20000,
                        size: 0x20000,
                    },
                    DataSymbol {
                        name: "counter".into(),
                        start: bias + 0x10000,
                        size: 8,
                    },
                ],
            })
        }
    }

    use super::test_record as rec;
    use numalab_profile_abi::events::Totals;

    #[test]
    fn samples_static_symbols_stacks_and_cost_come_out_of_the_records() {
        // Four nodes of two CPUs: CPUs 0-1 on node 0.
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let heap = 0x7000_0000u64;
        let mut records = vec![
            rec(Kind::Start, 100, u32::MAX, 0, 65536, 4096, 1),
            rec(Kind::Alloc, 100, u32::MAX, -1, heap, 1 << 20, 2),
            rec(Kind::Frame, 100, u32::MAX, -1, heap, 0, 0x401000),
        ];
        // Three reads from CPU 0 (node 0) of a page on node 1: remote.
        for t in 3..6 {
            records.push(rec(Kind::Sample, 101, 0, 1, heap + 8, 0, t));
        }
        // One of them on a huge page armed whole.
        records.last_mut().unwrap().flags = record::FLAG_HUGE;
        records.extend([
            // A snapshot (number 0) 1.5 s after the start: half present.
            rec(Kind::PageNodes, 100, 0, 1, heap, 128, 1_500_000_001),
            rec(Kind::PageNodes, 100, 0, -1, heap, 127, 1_500_000_001),
            // At exit (not a snapshot): every page on node 1.
            rec(Kind::PageNodes, 100, u32::MAX, 1, heap, 255, 1_600_000_000),
            rec(Kind::Stack, 101, u32::MAX, -1, 0x100000, 0x10000, 6),
            rec(Kind::PageRun, 0, u32::MAX, -1, 0x100000, 14, 7),
            rec(Kind::PageRun, 0, u32::MAX, 1, 0x10e000, 2, 7),
            // A stack that never touched a page: left out.
            rec(Kind::Stack, 102, u32::MAX, -1, 0x200000, 0x10000, 6),
            rec(Kind::PageRun, 0, u32::MAX, -1, 0x200000, 16, 7),
            rec(Kind::Static, 100, u32::MAX, -1, 0x10000, 0x30000, 0),
            rec(Kind::PageRun, 0, u32::MAX, 0, 0x10000, 16, 8),
            rec(Kind::PageRun, 0, u32::MAX, 1, 0x20000, 32, 8),
            // 3 ms spent against 200 ms of the program's own CPU time.
            rec(Kind::Cost, 100, 20_000, 500, 3_000_000, 200_000_000, 9),
        ]);
        records.last_mut().unwrap().flags = 2500;
        // Thread 101's name, recorded twice: the later one wins (a
        // program names its threads after they start).
        for (name, t) in [("prog", 10), ("reader-1", 11)] {
            let (addr, size) = record::name_words(name.as_bytes());
            records.push(rec(Kind::ThreadName, 101, u32::MAX, 0, addr, size, t));
        }
        let p = build(&m, vec!["prog".into()], &records, &Fixed);
        let t101 = p.threads.iter().find(|t| t.tid == 101).unwrap();
        // How the name is shown: numalab-report's views::profile tests.
        assert_eq!(t101.name.as_deref(), Some("reader-1"));
        assert_eq!((p.samples, p.huge_page_samples), (3, 1));
        assert_eq!(p.remote_share, Some(1.0));
        let heap_region = &p.regions[0];
        assert_eq!(
            (
                heap_region.site.as_str(),
                heap_region.sampled,
                heap_region.samples
            ),
            ("fill prog.c:12 (prog)", true, 3)
        );
        assert_eq!(heap_region.accesses[&0][&1], 3);
        assert_eq!(heap_region.pages_by_node, BTreeMap::from([(1, 255)]));
        assert_eq!(
            heap_region.pages_over_time,
            [PageSnapshot {
                at_s: 1.5,
                pages_by_node: BTreeMap::from([(-1, 127), (1, 128)])
            }]
        );
        // Its one allocation page by page: the sampled page on node 1, read
        // from node 0; the count at exit puts the other pages on node 1.
        let map = heap_region.page_map.as_ref().unwrap();
        assert_eq!((map.address, map.pages, map.pages_per_cell), (heap, 256, 1));
        let runs: Vec<_> = map
            .runs
            .iter()
            .map(|r| (r.cells, r.node, r.from, r.samples))
            .collect();
        assert_eq!(runs, [(1, Some(1), Some(0), 3), (255, Some(1), None, 0)]);
        let find = |site: &str| p.regions.iter().find(|r| r.site == site).unwrap();
        assert!(find("big_table").page_map.is_none(), "located only");
        let big = find("big_table");
        assert_eq!((big.kind.as_str(), big.sampled), ("static", false));
        assert_eq!(big.object.as_deref(), Some("prog"));
        assert_eq!(big.pages_by_node, BTreeMap::from([(1, 32)]));
        let other = find("(other static data)");
        assert_eq!(other.pages_by_node, BTreeMap::from([(0, 16)]));
        assert!(
            p.regions.iter().all(|r| r.site != "counter"),
            "small symbols stay in the rest"
        );
        let stack = find("stack of thread 101");
        assert_eq!(stack.thread, Some(101));
        assert_eq!(stack.pages_by_node, BTreeMap::from([(-1, 14), (1, 2)]));
        assert!(p.regions.iter().all(|r| r.site != "stack of thread 102"));
        let c = p.cost.unwrap();
        assert_eq!(c.target_percent, Some(2.0));
        assert_eq!(c.estimated_percent, Some(1.5));
        assert_eq!(c.kernel_us_per_fault, 2.5);
        assert_eq!(c.us_per_sample, Some(1000.0));
        assert_eq!((c.min_rate, c.max_rate, c.final_rate), (500, 500, 500));
        // One Cost record: no time to divide the armed pages by.
        assert_eq!(c.armed_per_s, None);
    }

    #[test]
    fn the_armed_rate_is_the_pages_armed_over_the_time_the_sampler_ran() {
        let cost = |rate: u32, t_ms: u64| Cost {
            tid: 1,
            spent_ns: 1_000_000,
            program_ns: 100_000_000,
            rate,
            kernel_ns_per_fault: 2000,
            target_ppm: None,
            in_step_milli: Some(1000 + t_ms as u32),
            time_ns: 5_000_000_000 + t_ms * 1_000_000,
        };
        // 2000 asked, 500 armed over 0.5 s: 1000 a second; the threads in
        // step the last record's.
        let c = sampling_cost(&[cost(2000, 0), cost(2000, 500)], 400, Some(500)).unwrap();
        assert_eq!(c.armed_per_s, Some(1000.0));
        assert_eq!(c.in_step, Some(1.5));
        // Over several records, each weighed by the program's time since
        // the one before: 1.2 over 100 ms, then 1.8 over 300 ms.
        let at = |program_ms: u64, milli: u32| Cost {
            program_ns: program_ms * 1_000_000,
            in_step_milli: Some(milli),
            ..cost(2000, program_ms)
        };
        let c = sampling_cost(&[at(0, 1000), at(100, 1200), at(400, 1800)], 1, Some(9)).unwrap();
        assert!((c.in_step.unwrap() - 1.65).abs() < 1e-9, "{:?}", c.in_step);
        // One record: its own; a record not carrying it: none.
        let c = sampling_cost(&[at(0, 1300)], 1, Some(9)).unwrap();
        assert_eq!(c.in_step, Some(1.3));
        let older = Cost {
            in_step_milli: None,
            ..at(100, 0)
        };
        let c = sampling_cost(&[at(0, 1300), older], 1, Some(9)).unwrap();
        assert_eq!(c.in_step, None);
        assert_eq!((c.min_rate, c.final_rate), (2000, 2000));
        // Several processes' records: no one span, and no one program's
        // threads.
        let c = sampling_cost(&[cost(2000, 0), cost(2000, 500)], 400, None).unwrap();
        assert_eq!((c.armed_per_s, c.in_step), (None, None));
        // Under 20 ms: a tick more or less would swing it.
        let c = sampling_cost(&[cost(2000, 0), cost(2000, 19)], 4, Some(30)).unwrap();
        assert_eq!(c.armed_per_s, None);
        assert_eq!(sampling_cost(&[], 0, Some(1)), None);
    }

    #[test]
    fn huge_pages_are_said_to_split_only_where_the_kernel_cannot_tell_them() {
        let on = "always [madvise] never\n";
        let w = huge_pages_split(on, "6.1.0-27-amd64\n").unwrap();
        assert!(w.contains("Linux 6.1 cannot tell"), "{w}");
        assert_eq!(huge_pages_split(on, "6.7.0"), None);
        assert_eq!(huge_pages_split(on, "6.18.44-fc"), None);
        assert_eq!(huge_pages_split("always madvise [never]", "5.15.0"), None);
        assert_eq!(huge_pages_split(on, "garbage"), None);
    }

    #[test]
    fn the_sampler_is_the_pmu_where_one_is_usable_unless_faults_are_asked_for() {
        let pebs = pmu::MemoryEvent {
            name: "Intel PEBS load latency (mem-loads)".into(),
            kind: 4,
            config: 0x1cd,
            config1: 3,
            sample_records: true,
            precise_ip: 2,
        };
        let found = || {
            (
                PmuStatus::unused(Some(pebs.name.clone()), "usable".into()),
                Some(pebs.clone()),
            )
        };
        let none = || (PmuStatus::unused(None, "no cpu PMU".into()), None);
        let (s, spec) = PmuStatus::plan(Sampler::Auto, found()).unwrap();
        assert_eq!(spec, "4:0x1cd:0x3:2:10007");
        assert!(!s.used);
        assert_eq!(PmuStatus::plan(Sampler::Pmu, found()).unwrap().1, spec);
        let (s, spec) = PmuStatus::plan(Sampler::Faults, found()).unwrap();
        assert_eq!(
            (spec.as_str(), s.found.as_deref()),
            ("", Some(pebs.name.as_str()))
        );
        assert!(s.reason.contains("--sampler faults"), "{}", s.reason);
        assert_eq!(PmuStatus::plan(Sampler::Auto, none()).unwrap().1, "");
        assert_eq!(
            PmuStatus::plan(Sampler::Pmu, none()).unwrap_err(),
            "--sampler pmu: no memory-sampling PMU usable here (no cpu PMU); valid: auto, faults"
        );
    }

    #[test]
    fn after_the_run_the_pmu_is_used_if_its_samples_are_in_and_its_limits_are_warned() {
        let mut pmu_sample = rec(Kind::Sample, 7, 0, 1, 0x1000, 120, 5);
        pmu_sample.flags = record::FLAG_PMU;
        let fault_sample = rec(Kind::Sample, 7, 0, 1, 0x2000, 0, 6);
        // 2 threads refused (EACCES), 5 samples dropped, 3 outside.
        let end = rec(Kind::Pmu, 2, 0, libc::EACCES, 5, 3, 9);
        let status = || PmuStatus::unused(Some("AMD IBS op".into()), "usable".into());
        let (s, w) = status().after_run(true, &[pmu_sample, pmu_sample, fault_sample, end]);
        assert!(s.used);
        assert_eq!(s.samples, 2);
        assert_eq!(
            s.reason,
            "the samples are the PMU's data addresses (one in 10007 events); 3 fell outside the tracked allocations"
        );
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("the kernel refused the PMU event on 2 thread(s) (Permission denied"),
            "{}",
            w[0]
        );
        assert!(!w[0].contains("instead"));
        assert!(w[1].contains("dropped 5 PMU samples"), "{}", w[1]);
        // Refused everywhere: faults instead, said so.
        let (s, w) = status().after_run(true, &[fault_sample, end]);
        assert!(!s.used);
        assert!(
            w[0].ends_with("sampled by protection faults instead"),
            "{}",
            w[0]
        );
        // Not asked: nothing to say.
        let (s, w) = status().after_run(false, &[fault_sample]);
        assert!(!s.used && w.is_empty());
    }

    /// A Go program's Start (flag 4: no page armed) and no Totals (Go
    /// never calls libc's exit): both said first, and no advice to raise
    /// the rate; a C program that exited has neither warning.
    #[test]
    fn a_go_program_and_a_missing_exit_are_said_first() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let mut start = rec(Kind::Start, 100, u32::MAX, 0, 65536, 4096, 1);
        start.flags = 4;
        let p = build(&m, vec!["prog".into()], &[start], &Fixed);
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        assert!(
            p.warnings[0].starts_with("a Go program: its runtime makes system calls without libc"),
            "{}",
            p.warnings[0]
        );
        assert!(
            p.warnings[1].starts_with("the program exited without libc's exit (Go's runtime"),
            "{}",
            p.warnings[1]
        );
        // That the page says them first: numalab-report's views::profile
        // tests.
        // A C program that exited: no Go warning, no exit warning (only
        // that nothing was sampled).
        let start = rec(Kind::Start, 100, u32::MAX, 0, 65536, 4096, 1);
        let totals = rec(Kind::Totals, 100, u32::MAX, 0, 0, 0, 2);
        let p = build(&m, vec!["prog".into()], &[start, totals], &Fixed);
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert!(
            p.warnings[0].starts_with("no access was sampled"),
            "{}",
            p.warnings[0]
        );
        // Calls that found the busy table full: said, with their count.
        let full = Totals {
            busy_table_full: Some(3),
            ..Totals::from_record(&totals).unwrap()
        }
        .to_record();
        let p = build(&m, vec!["prog".into()], &[start, full], &Fixed);
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        assert!(
            p.warnings.iter().any(|w| w.starts_with(
                "3 system calls found the library's table of busy buffers full (more than 4096 calls blocked"
            )),
            "{:?}",
            p.warnings
        );
        // Killed before its exit: said.
        let p = build(&m, vec!["prog".into()], &[start], &Fixed);
        assert!(
            p.warnings[0].starts_with("the program did not exit through libc's exit (a signal"),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn small_allocations_are_estimated_from_their_draws_and_merged_by_site() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let key = |n: u64| record::KEY_BIT_SMALL | n;
        let mut records = vec![rec(Kind::Start, 100, u32::MAX, 0, 65536, 4096, 1)];
        // Two 100-byte draws and one of 40000 bytes, at a mean of 64 KiB,
        // from one site; one page on node 2, one not present yet.
        for (n, size, node) in [(0, 100, 2), (1, 100, 2), (2, 40_000, -1)] {
            records.push(rec(
                Kind::SmallAlloc,
                101,
                64,
                node,
                0x9000 + n * 64,
                size,
                key(n),
            ));
            records.push(rec(Kind::Frame, 101, u32::MAX, -1, key(n), 0, 0x401000));
        }
        let p = build(&m, vec!["prog".into()], &records, &Fixed);
        let small: Vec<_> = p.regions.iter().filter(|r| r.kind == "small").collect();
        assert_eq!(small.len(), 1, "{small:?}");
        let r = small[0];
        assert_eq!(r.site, "fill prog.c:12 (prog)");
        assert!(!r.sampled);
        // Each weighed by 1 / (1 - exp(-size / 65536)): 655.86 for 100
        // bytes, 2.19 for 40000.
        assert_eq!((r.sampled_allocations, r.allocations), (3, 1314));
        assert_eq!(r.bytes, 131_172 + 87_558);
        assert_eq!(r.pages_by_node, BTreeMap::from([(-1, 1), (2, 2)]));
        assert_eq!(p.samples, 0);
    }

    #[test]
    fn mappings_are_heap_mmap_or_file_by_their_flags() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let mut records = vec![rec(Kind::Start, 100, u32::MAX, 0, 65536, 4096, 1)];
        for (i, flags) in [0u32, 1, 3, 7].into_iter().enumerate() {
            let mut a = rec(
                Kind::Alloc,
                100,
                u32::MAX,
                -1,
                0x10_0000 * (i as u64 + 1),
                1 << 20,
                2,
            );
            a.flags = flags;
            records.push(a);
            records.push(rec(
                Kind::Frame,
                100,
                u32::MAX,
                -1,
                a.addr,
                0,
                0x401000 + i as u64,
            ));
        }
        let p = build(&m, vec!["prog".into()], &records, &Fixed);
        let mut kinds: Vec<&str> = p.regions.iter().map(|r| r.kind.as_str()).collect();
        kinds.sort();
        assert_eq!(kinds, ["file", "file", "heap", "mmap"]);
    }
}
