//! Counters of a launched program through `perf_event_open(2)`
//! (`numalab run --counters`, docs/counters.md).
//!
//! - [`EVENTS`]: the software events every Linux has and the hardware
//!   events a CPU PMU may have, by name.
//! - [`attach`]: the events opened on a launched command between fork and
//!   exec (`pid` = the child, any CPU, `inherit`, `disabled`,
//!   `enable_on_exec`), so they count from its first instruction, in its
//!   threads and children too; [`Pending::report`] reads them after it ended.
//! - An event the kernel refuses is reported unavailable with the reason
//!   (no CPU PMU, or the kernel's own errno), never as a zero; each event is
//!   opened on its own, so one refusal leaves the others counting.
//! - Reads ask for the times enabled and running: an event that shared its
//!   counter with others (multiplexed, running < enabled) is scaled by
//!   enabled / running and says so.
//! - [`derive()`]: the Cray/NERSC study's metrics (IPC, LLC misses and dTLB
//!   misses per 1000 instructions, bytes per instruction, remote share of
//!   node loads), each unavailable with the reason when an input is.

use crate::machine::Machine;
use crate::placement::launch::PreparedLaunch;
use crate::sys::perf::open_event_on;
use crate::sys::process::ResourceUsage;
use numalab_profile_abi::perf::{
    PerfEventAttr, ATTR_DISABLED, ATTR_EXCLUDE_HV, ATTR_EXCLUDE_KERNEL,
};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::mpsc;

/// Software (counted by the kernel, always there) or hardware (a CPU PMU's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Software,
    Hardware,
}

/// One countable event.
#[derive(Debug, PartialEq, Eq)]
pub struct Event {
    /// Its name on the command line (perf's, in lower case).
    pub name: &'static str,
    pub kind: Kind,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
    /// `perf_event_attr.config1` and `config2` (PMU events that use them,
    /// [`super::event_syntax`]).
    pub config1: u64,
    pub config2: u64,
    /// "ns" for task-clock, "" for counts.
    pub unit: &'static str,
    /// Why it cannot be counted on this machine before anything is opened
    /// (a PMU event whose PMU is missing), in the words a refusal takes.
    pub missing: Option<&'static str>,
}

const TYPE_HARDWARE: u32 = 0;
use crate::sys::perf::TYPE_SOFTWARE;
const TYPE_HW_CACHE: u32 = 3;

/// `PERF_TYPE_HW_CACHE` config: cache id | operation << 8 | result << 16.
const fn cache(id: u64, op: u64, result: u64) -> u64 {
    id | (op << 8) | (result << 16)
}
const CACHE_LL: u64 = 2;
const CACHE_DTLB: u64 = 3;
const CACHE_NODE: u64 = 6;
const OP_READ: u64 = 0;
const RESULT_ACCESS: u64 = 0;
const RESULT_MISS: u64 = 1;

const fn event(
    name: &'static str,
    kind: Kind,
    type_: u32,
    config: u64,
    unit: &'static str,
) -> Event {
    Event {
        name,
        kind,
        type_,
        config,
        config1: 0,
        config2: 0,
        unit,
        missing: None,
    }
}

/// Every event `--counters` knows, software first. LLC misses are
/// `PERF_COUNT_HW_CACHE_LL` read misses (demand loads that left the last
/// level cache: what reaches memory), not `PERF_COUNT_HW_CACHE_MISSES`,
/// whose meaning differs between vendors (docs/counters.md).
pub const EVENTS: &[Event] = &[
    event("task-clock", Kind::Software, TYPE_SOFTWARE, 1, "ns"),
    event("page-faults", Kind::Software, TYPE_SOFTWARE, 2, ""),
    event("minor-faults", Kind::Software, TYPE_SOFTWARE, 5, ""),
    event("major-faults", Kind::Software, TYPE_SOFTWARE, 6, ""),
    event("context-switches", Kind::Software, TYPE_SOFTWARE, 3, ""),
    event("cpu-migrations", Kind::Software, TYPE_SOFTWARE, 4, ""),
    event("cycles", Kind::Hardware, TYPE_HARDWARE, 0, ""),
    event("instructions", Kind::Hardware, TYPE_HARDWARE, 1, ""),
    event(
        "llc-load-misses",
        Kind::Hardware,
        TYPE_HW_CACHE,
        cache(CACHE_LL, OP_READ, RESULT_MISS),
        "",
    ),
    event(
        "dtlb-load-misses",
        Kind::Hardware,
        TYPE_HW_CACHE,
        cache(CACHE_DTLB, OP_READ, RESULT_MISS),
        "",
    ),
    event(
        "node-loads",
        Kind::Hardware,
        TYPE_HW_CACHE,
        cache(CACHE_NODE, OP_READ, RESULT_ACCESS),
        "",
    ),
    event(
        "node-load-misses",
        Kind::Hardware,
        TYPE_HW_CACHE,
        cache(CACHE_NODE, OP_READ, RESULT_MISS),
        "",
    ),
];

/// The most events one list may name.
pub const MAX_EVENTS: usize = 64;

/// The names of [`EVENTS`], comma-separated, `all`, and the raw and PMU
/// spellings ([`super::event_syntax`]), as errors list them.
pub fn valid_names() -> String {
    EVENTS.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
        + ", all, a raw event rNNNN or a PMU event PMU/TERMS/"
}

/// The event named `name` (case does not matter: perf's `LLC-load-misses`
/// is `llc-load-misses`).
pub fn find(name: &str) -> Option<&'static Event> {
    EVENTS
        .iter()
        .find(|e| e.name.eq_ignore_ascii_case(name.trim()))
}

/// A comma-separated list of event names, raw events (`r01c2`) and PMU
/// events (`cpu/event=0xc0,umask=0x01/`, whose commas stay inside their
/// slashes), in the order given, without repeats, at most [`MAX_EVENTS`];
/// the error is one line naming the valid choices.
pub fn parse_list(text: &str) -> Result<Vec<&'static Event>, String> {
    let items = super::event_syntax::split_list(text);
    if items.len() > MAX_EVENTS {
        return Err(format!(
            "{} events listed; at most {MAX_EVENTS} are counted at once",
            items.len()
        ));
    }
    let mut out: Vec<&'static Event> = Vec::new();
    for item in items.into_iter().map(str::trim) {
        if item.is_empty() {
            return Err(format!(
                "'{text}' has an empty entry; valid: {}",
                valid_names()
            ));
        }
        let found: Vec<&'static Event> = if item.eq_ignore_ascii_case("all") {
            default_list()
        } else if find(item).is_none() && super::event_syntax::is_raw_spelling(item) {
            vec![super::event_syntax::parse(
                Path::new(super::event_syntax::DEVICES),
                item,
            )?]
        } else {
            vec![find(item)
                .ok_or_else(|| format!("unknown counter '{item}'; valid: {}", valid_names()))?]
        };
        for e in found {
            if !out.contains(&e) {
                out.push(e);
            }
        }
    }
    Ok(out)
}

/// The default list: every event (the hardware ones the machine lacks are
/// reported unavailable).
pub fn default_list() -> Vec<&'static Event> {
    EVENTS.iter().collect()
}

// `flags` bits of perf_event_attr beyond those the shared ABI file names,
// and `read_format` bits.
const ATTR_INHERIT: u64 = 1 << 1;
const ATTR_ENABLE_ON_EXEC: u64 = 1 << 12;
const FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
const FORMAT_TOTAL_TIME_RUNNING: u64 = 2;

/// Opens `e` on `pid` (inherited, enabled at its exec), all of it or, when
/// the kernel refuses kernel-mode counting (perf_event_paranoid), user
/// space only, as `perf stat` does. The descriptor and whether it counts
/// user space only, or the errno of the first refusal.
///
/// With `one_task`, the event counts task `pid` alone from now on (no
/// inherit, enabled at once): [`crate::measure::task_counters`] opens one
/// per thread and process that way.
fn open_one(e: &Event, pid: i32, one_task: bool) -> Result<(OwnedFd, bool), i32> {
    let mut first_err = None;
    for user_only in [false, true] {
        let mut attr = PerfEventAttr {
            kind: e.type_,
            size: PerfEventAttr::SIZE,
            config: e.config,
            config1: e.config1,
            config2: e.config2,
            read_format: FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING,
            flags: if one_task {
                0
            } else {
                ATTR_DISABLED | ATTR_INHERIT | ATTR_ENABLE_ON_EXEC
            },
            ..PerfEventAttr::default()
        };
        if user_only {
            attr.flags |= ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV;
        }
        let errno = match open_event_on(&attr, pid, -1) {
            Ok(fd) => return Ok((fd, user_only)),
            Err(errno) => errno,
        };
        let errno = *first_err.get_or_insert(errno);
        if errno != libc::EACCES && errno != libc::EPERM {
            break;
        }
    }
    Err(first_err.unwrap_or(libc::EINVAL))
}

/// Opens a counting event of PMU `type_` with `config` system-wide on
/// `cpu` (`pid` = -1, enabled now, no inherit, read with its times), as
/// uncore PMUs need; the descriptor or the kernel's errno.
pub(crate) fn open_system_wide(type_: u32, config: u64, cpu: i32) -> Result<OwnedFd, i32> {
    let attr = PerfEventAttr {
        kind: type_,
        size: PerfEventAttr::SIZE,
        config,
        // Times too: an event sharing its counter is scaled.
        read_format: FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING,
        ..PerfEventAttr::default()
    };
    open_event_on(&attr, -1, cpu)
}

/// The kernel's refusal of `errno` in words, with its symbolic name, and
/// `kernel.perf_event_paranoid` when it is a permission refusal.
pub(crate) fn refusal_text(errno: i32) -> String {
    let kernel = format!("{}, {}", errno_text(errno), errno_name(errno));
    if errno == libc::EACCES || errno == libc::EPERM {
        let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        format!("{kernel}; kernel.perf_event_paranoid is {paranoid}")
    } else {
        kernel
    }
}

/// The symbolic name of the errnos `perf_event_open` gives.
fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::ENOENT => "ENOENT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENODEV => "ENODEV",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::EINVAL => "EINVAL",
        libc::ESRCH => "ESRCH",
        libc::EMFILE => "EMFILE",
        libc::EBUSY => "EBUSY",
        libc::ENOSYS => "ENOSYS",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

/// The kernel's words for `errno`, without Rust's "(os error N)".
fn errno_text(errno: i32) -> String {
    let t = std::io::Error::from_raw_os_error(errno).to_string();
    match t.rfind(" (os error") {
        Some(i) => t[..i].to_string(),
        None => t,
    }
}

/// Whether a CPU PMU is listed under `devices`
/// (`/sys/bus/event_source/devices`): `cpu` (x86), `cpu_core`/`cpu_atom`
/// (hybrid x86), `armv8_pmuv3*`/`armv7*` (Arm), `riscv-pmu*`.
pub fn has_cpu_pmu(devices: &Path) -> bool {
    let Ok(dir) = std::fs::read_dir(devices) else {
        return false;
    };
    dir.flatten().any(|d| {
        let n = d.file_name().to_string_lossy().into_owned();
        n == "cpu"
            || n == "cpu_core"
            || n == "cpu_atom"
            || n.starts_with("armv")
            || n.starts_with("riscv")
    })
}

/// Why an event could not be opened, in words: "not available on this
/// machine: no cpu PMU" when the kernel has no PMU to count it on, else the
/// kernel's own refusal.
pub fn refusal(kind: Kind, errno: i32, cpu_pmu: bool) -> String {
    let kernel = format!(
        "perf_event_open: {}, {}",
        errno_text(errno),
        errno_name(errno)
    );
    let missing = matches!(errno, libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV);
    match (kind, missing, cpu_pmu) {
        (Kind::Hardware, true, false) => {
            format!("not available on this machine: no cpu PMU ({kernel})")
        }
        (Kind::Hardware, true, true) => {
            format!("not available on this machine: its cpu PMU has no such event ({kernel})")
        }
        (_, _, _) if errno == libc::EACCES || errno == libc::EPERM => {
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into());
            format!("not permitted (kernel.perf_event_paranoid is {paranoid}; {kernel})")
        }
        _ => format!("the kernel refused it ({kernel})"),
    }
}

/// What one `read(2)` of an event opened with `TOTAL_TIME_ENABLED |
/// TOTAL_TIME_RUNNING` gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub value: u64,
    pub enabled_ns: u64,
    pub running_ns: u64,
}

impl Reading {
    /// Decodes the 24 bytes: value, time enabled, time running (native
    /// byte order); `None` when short.
    pub fn decode(bytes: &[u8]) -> Option<Reading> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(
                bytes.get(i * 8..i * 8 + 8)?.try_into().ok()?,
            ))
        };
        Some(Reading {
            value: word(0)?,
            enabled_ns: word(1)?,
            running_ns: word(2)?,
        })
    }

    /// The count over the whole time enabled: the value itself when the
    /// event ran all along; scaled by enabled / running when it was
    /// multiplexed (`(value, Some(factor))`); an error when it was enabled
    /// but never ran, so nothing can be said of it.
    pub fn scaled(&self) -> Result<(u64, Option<f64>), String> {
        if self.running_ns >= self.enabled_ns {
            return Ok((self.value, None));
        }
        if self.running_ns == 0 {
            return Err(format!(
                "never counted: enabled {} ns but never on a hardware counter (multiplexed out)",
                self.enabled_ns
            ));
        }
        let v = (self.value as u128 * self.enabled_ns as u128 / self.running_ns as u128)
            .min(u64::MAX as u128) as u64;
        Ok((v, Some(self.enabled_ns as f64 / self.running_ns as f64)))
    }
}

/// One event's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventValue {
    pub name: String,
    pub kind: Kind,
    /// "ns" for task-clock, "" for counts.
    pub unit: String,
    /// The count (scaled when multiplexed); `None` when unavailable.
    pub value: Option<u64>,
    /// Whether `value` was scaled for multiplexing.
    pub scaled: bool,
    /// enabled / running when scaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_factor: Option<f64>,
    pub enabled_ns: u64,
    pub running_ns: u64,
    /// Whether only user space was counted (the kernel refused kernel mode).
    #[serde(default)]
    pub user_only: bool,
    /// Why there is no value.
    pub unavailable: Option<String>,
}

impl EventValue {
    /// An event with no value, and why.
    pub fn unavailable(e: &Event, why: String) -> Self {
        Self {
            name: e.name.into(),
            kind: e.kind,
            unit: e.unit.into(),
            value: None,
            scaled: false,
            scale_factor: None,
            enabled_ns: 0,
            running_ns: 0,
            user_only: false,
            unavailable: Some(why),
        }
    }

    /// An event's result from its reading.
    pub fn from_reading(e: &Event, r: Reading, user_only: bool) -> Self {
        let (value, factor, why) = match r.scaled() {
            Ok((v, f)) => (Some(v), f, None),
            Err(why) => (None, None, Some(why)),
        };
        Self {
            name: e.name.into(),
            kind: e.kind,
            unit: e.unit.into(),
            value,
            scaled: factor.is_some(),
            scale_factor: factor,
            enabled_ns: r.enabled_ns,
            running_ns: r.running_ns,
            user_only,
            unavailable: why,
        }
    }
}

/// One derived metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DerivedValue {
    pub name: String,
    /// `None` when an input is unavailable (or a divisor is zero).
    pub value: Option<f64>,
    pub unit: String,
    pub formula: String,
    pub unavailable: Option<String>,
}

/// Memory-controller PMUs (Intel `uncore_imc*`, AMD `amd_umc*` and
/// `amd_df`): listed when present (`measure::memory_traffic` counts them
/// around `bench` and `sweep`; docs/counters.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryController {
    pub pmus: Vec<String>,
    pub unavailable: Option<String>,
}

/// The memory-controller PMUs under `devices` (`/sys/bus/event_source/devices`).
pub fn memory_controller(devices: &Path) -> MemoryController {
    let mut pmus: Vec<String> = std::fs::read_dir(devices)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    n.starts_with("uncore_imc") || n.starts_with("amd_umc") || n == "amd_df"
                })
                .collect()
        })
        .unwrap_or_default();
    pmus.sort();
    let unavailable = pmus
        .is_empty()
        .then(|| "not available on this machine: no uncore_imc, amd_umc or amd_df PMU".to_string());
    MemoryController { pmus, unavailable }
}

/// Where a [`CounterReport`]'s counts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CountSource {
    /// perf events opened on the command (`--counters`).
    #[default]
    Perf,
    /// The kernel's accounting of the reaped command (`wait4`'s rusage):
    /// no perf event, so nothing added to the command's context switches
    /// ([`from_usage`]).
    Rusage,
}

/// What `numalab run --counters` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterReport {
    /// perf events, or the kernel's accounting of the reaped command
    /// (absent before profile schema 2.5: perf).
    #[serde(default)]
    pub source: CountSource,
    /// Events in the order asked.
    pub events: Vec<EventValue>,
    pub derived: Vec<DerivedValue>,
    pub memory_controller: MemoryController,
    /// The cache line size memory intensity uses, in bytes.
    pub line_bytes: u32,
    /// Whether `line_bytes` came from the machine model (else 64 assumed).
    pub line_from_machine: bool,
    /// With `--per-thread`: each thread's and process's own counts
    /// ([`crate::measure::task_counters`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<crate::measure::task_counters::TaskTable>,
    /// With [`CountSource::Rusage`]: the accounting itself, which splits
    /// CPU time into user and system, and switches into voluntary (the
    /// task blocked) and involuntary (it was preempted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ResourceUsage>,
}

/// The last-level cache's line size in the machine model, when known.
pub fn line_bytes(m: &Machine) -> Option<u32> {
    let level = *m.data_cache_levels().last()?;
    m.caches
        .iter()
        .filter(|c| c.level == level && c.kind != "instruction" && c.line_bytes > 0)
        .map(|c| c.line_bytes)
        .max()
}

/// The derived metrics of `events`, with a `line`-byte cache line
/// (`line_known`: from the machine model).
pub fn derive(events: &[EventValue], line: u32, line_known: bool) -> Vec<DerivedValue> {
    let get = |name: &str| -> Result<f64, String> {
        match events.iter().find(|e| e.name == name) {
            None => Err(format!("{name} not counted (add it to --counters)")),
            Some(e) => match (e.value, &e.unavailable) {
                (Some(v), _) => Ok(v as f64),
                (None, Some(why)) => Err(format!("{name} {why}")),
                (None, None) => Err(format!("{name} has no value")),
            },
        }
    };
    // numerator × factor / denominator, or why not.
    let ratio = |num: &str, den: &str, factor: f64| -> Result<f64, String> {
        let n = get(num)?;
        let d = get(den)?;
        if d == 0.0 {
            return Err(format!("{den} counted 0"));
        }
        Ok(n * factor / d)
    };
    let line_note = if line_known {
        format!("{line}-byte line from the machine model")
    } else {
        format!("{line}-byte line assumed")
    };
    let rows: [(&str, Result<f64, String>, &str, String); 5] = [
        (
            "ipc",
            ratio("instructions", "cycles", 1.0),
            "instructions/cycle",
            "instructions / cycles".into(),
        ),
        (
            "llc-misses-per-kilo-instruction",
            ratio("llc-load-misses", "instructions", 1000.0),
            "per 1000 instructions",
            "llc-load-misses × 1000 / instructions".into(),
        ),
        (
            "memory-intensity",
            ratio("llc-load-misses", "instructions", f64::from(line)),
            "bytes/instruction",
            format!("llc-load-misses × {line} / instructions, {line_note}"),
        ),
        (
            "dtlb-misses-per-kilo-instruction",
            ratio("dtlb-load-misses", "instructions", 1000.0),
            "per 1000 instructions",
            "dtlb-load-misses × 1000 / instructions".into(),
        ),
        (
            "remote-share",
            ratio("node-load-misses", "node-loads", 1.0),
            "fraction of node loads",
            "node-load-misses / node-loads".into(),
        ),
    ];
    rows.into_iter()
        .map(|(name, v, unit, formula)| {
            let (value, unavailable) = match v {
                Ok(x) if x.is_finite() => (Some(x), None),
                Ok(_) => (None, Some("not a finite number".to_string())),
                Err(why) => (None, Some(why)),
            };
            DerivedValue {
                name: name.into(),
                value,
                unit: unit.into(),
                formula,
                unavailable,
            }
        })
        .collect()
}

/// An event's descriptor and whether it counts user space only, or why
/// it could not be opened.
type OpenedEvent = Result<(OwnedFd, bool), String>;

/// Events opened on one process.
pub struct Opened {
    events: Vec<(&'static Event, OpenedEvent)>,
}

/// Opens `events` on `pid` (inherited by its threads and children, enabled
/// at its next exec). Refused ones carry their reason.
pub fn open(pid: i32, events: &[&'static Event]) -> Opened {
    let cpu_pmu = has_cpu_pmu(Path::new("/sys/bus/event_source/devices"));
    open_on(pid, events, false, cpu_pmu)
}

/// [`open`], or with `one_task` events on task `pid` alone, enabled now
/// (see [`open_one`]); `cpu_pmu` words the refusals.
pub(crate) fn open_on(
    pid: i32,
    events: &[&'static Event],
    one_task: bool,
    cpu_pmu: bool,
) -> Opened {
    Opened {
        events: events
            .iter()
            .map(|e| {
                let opened = match e.missing {
                    Some(why) => Err(why.to_string()),
                    None => {
                        open_one(e, pid, one_task).map_err(|errno| refusal(e.kind, errno, cpu_pmu))
                    }
                };
                (*e, opened)
            })
            .collect(),
    }
}

impl Opened {
    /// Reads every event: after the process and its children ended, the
    /// totals over all of them.
    pub fn read(&self) -> Vec<EventValue> {
        self.events
            .iter()
            .map(|(e, opened)| read_event(e, opened))
            .collect()
    }
}

/// One event's value from its descriptor, or why there is none.
fn read_event(e: &'static Event, opened: &OpenedEvent) -> EventValue {
    match opened {
        Err(why) => EventValue::unavailable(e, why.clone()),
        Ok((fd, user_only)) => {
            let mut buf = [0u8; 24];
            let got =
                crate::sys::process::read_once(fd.as_fd(), &mut buf).map_err(|e| e.to_string());
            match got.as_ref().ok().and_then(|n| Reading::decode(&buf[..*n])) {
                Some(r) => EventValue::from_reading(e, r, *user_only),
                None => EventValue::unavailable(
                    e,
                    format!(
                        "could not be read: {}",
                        match got {
                            Err(err) => err,
                            Ok(n) => format!("{n} bytes instead of 24"),
                        }
                    ),
                ),
            }
        }
    }
}

/// The whole report from events' values and the machine's line size.
pub fn report(events: Vec<EventValue>, line: Option<u32>) -> CounterReport {
    let line_bytes = line.unwrap_or(64);
    let derived = derive(&events, line_bytes, line.is_some());
    CounterReport {
        source: CountSource::Perf,
        events,
        derived,
        memory_controller: memory_controller(Path::new("/sys/bus/event_source/devices")),
        line_bytes,
        line_from_machine: line.is_some(),
        tasks: None,
        usage: None,
    }
}

/// The events the kernel's accounting of a reaped process gives, by their
/// perf names.
pub const USAGE_EVENTS: [&str; 5] = [
    "task-clock",
    "page-faults",
    "minor-faults",
    "major-faults",
    "context-switches",
];

/// The counts of a command from what the kernel accounted to it when it
/// was reaped (`u`, over `ran_ns` of wall time), under perf's names:
/// task-clock is user + system time (microsecond resolution), the faults
/// are those the memory manager handled (not the protection faults it
/// turned into signals, which perf's page-faults also counts), the
/// switches voluntary + involuntary. Its totals cover the threads and the
/// children the command waited for. No derived metric: they need hardware
/// events.
pub fn from_usage(u: &ResourceUsage, ran_ns: u64, line: Option<u32>) -> CounterReport {
    let values = [
        u.user_ns + u.system_ns,
        u.minor_faults + u.major_faults,
        u.minor_faults,
        u.major_faults,
        u.voluntary_switches + u.involuntary_switches,
    ];
    let events = USAGE_EVENTS
        .iter()
        .zip(values)
        .map(|(name, value)| {
            let e = find(name).expect("a usage event is a known software event");
            EventValue::from_reading(
                e,
                Reading {
                    value,
                    enabled_ns: ran_ns,
                    running_ns: ran_ns,
                },
                false,
            )
        })
        .collect();
    CounterReport {
        source: CountSource::Rusage,
        events,
        derived: Vec::new(),
        memory_controller: memory_controller(Path::new("/sys/bus/event_source/devices")),
        line_bytes: line.unwrap_or(64),
        line_from_machine: line.is_some(),
        tasks: None,
        usage: Some(*u),
    }
}

/// Counters attached to a launch, to read once it ended.
pub struct Pending(Source);

enum Source {
    /// Inherited events on the command ([`attach`]).
    Inherited {
        opened: mpsc::Receiver<Opened>,
        line: Option<u32>,
    },
    /// Events per task ([`attach_per_task`]).
    PerTask(crate::measure::task_counters::PerTask),
}

/// Has `launch` open `events` on its command before the command's exec
/// (its first instruction is counted); `line` is the machine's cache line
/// size ([`line_bytes`]).
pub fn attach(
    launch: PreparedLaunch,
    events: Vec<&'static Event>,
    line: Option<u32>,
) -> (PreparedLaunch, Pending) {
    let (tx, rx) = mpsc::sync_channel(1);
    let launch = launch.before_exec(move |pid| {
        let _ = tx.send(open(pid, &events));
    });
    (launch, Pending(Source::Inherited { opened: rx, line }))
}

/// [`attach`] with counts per thread and process
/// ([`crate::measure::task_counters`]): the launch is traced through every
/// task of the command.
pub fn attach_per_task(
    launch: PreparedLaunch,
    events: Vec<&'static Event>,
    line: Option<u32>,
) -> (PreparedLaunch, Pending) {
    let (launch, per_task) = crate::measure::task_counters::follow(launch, events, line);
    (launch, Pending(Source::PerTask(per_task)))
}

impl Pending {
    /// The counts, once the command ended (`wait` returned); `None` when
    /// the command never reached the point where they are opened.
    pub fn report(self) -> Option<CounterReport> {
        match self.0 {
            Source::Inherited { opened, line } => {
                let opened = opened.try_recv().ok()?;
                Some(report(opened.read(), line))
            }
            Source::PerTask(p) => p.report(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(name: &str, v: Option<u64>) -> EventValue {
        let e = find(name).unwrap();
        match v {
            Some(v) => EventValue::from_reading(
                e,
                Reading {
                    value: v,
                    enabled_ns: 10,
                    running_ns: 10,
                },
                false,
            ),
            None => EventValue::unavailable(e, refusal(e.kind, libc::ENOENT, false)),
        }
    }

    fn derived<'a>(d: &'a [DerivedValue], name: &str) -> &'a DerivedValue {
        d.iter().find(|x| x.name == name).unwrap()
    }

    #[test]
    fn configs_are_the_kernels() {
        // enum perf_sw_ids, enum perf_hw_id, and the HW_CACHE encoding of
        // include/uapi/linux/perf_event.h.
        let config = |n: &str| {
            let e = find(n).unwrap();
            (e.type_, e.config)
        };
        assert_eq!(config("task-clock"), (1, 1));
        assert_eq!(config("page-faults"), (1, 2));
        assert_eq!(config("context-switches"), (1, 3));
        assert_eq!(config("cpu-migrations"), (1, 4));
        assert_eq!(config("minor-faults"), (1, 5));
        assert_eq!(config("major-faults"), (1, 6));
        assert_eq!(config("cycles"), (0, 0));
        assert_eq!(config("instructions"), (0, 1));
        assert_eq!(config("llc-load-misses"), (3, 0x10002));
        assert_eq!(config("dtlb-load-misses"), (3, 0x10003));
        assert_eq!(config("node-loads"), (3, 0x6));
        assert_eq!(config("node-load-misses"), (3, 0x10006));
    }

    #[test]
    fn attr_has_the_size_of_version_5() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 112);
    }

    #[test]
    fn derivation_on_synthetic_values() {
        let evs = vec![
            value("cycles", Some(2_000_000)),
            value("instructions", Some(3_000_000)),
            value("llc-load-misses", Some(15_000)),
            value("dtlb-load-misses", Some(600)),
            value("node-loads", Some(8_000)),
            value("node-load-misses", Some(2_000)),
        ];
        let d = derive(&evs, 64, true);
        assert_eq!(derived(&d, "ipc").value, Some(1.5));
        assert_eq!(
            derived(&d, "llc-misses-per-kilo-instruction").value,
            Some(5.0)
        );
        assert_eq!(derived(&d, "memory-intensity").value, Some(0.32));
        assert_eq!(
            derived(&d, "dtlb-misses-per-kilo-instruction").value,
            Some(0.2)
        );
        assert_eq!(derived(&d, "remote-share").value, Some(0.25));
        assert!(d.iter().all(|x| x.unavailable.is_none()));
        assert!(derived(&d, "memory-intensity")
            .formula
            .contains("64-byte line from the machine model"));
        // A 128-byte line doubles the intensity.
        let d = derive(&evs, 128, false);
        assert_eq!(derived(&d, "memory-intensity").value, Some(0.64));
        assert!(derived(&d, "memory-intensity")
            .formula
            .contains("128-byte line assumed"));
    }

    #[test]
    fn derived_metrics_with_missing_inputs_say_why() {
        let evs = vec![
            value("cycles", None),
            value("instructions", Some(1000)),
            value("node-loads", Some(0)),
            value("node-load-misses", Some(0)),
        ];
        let d = derive(&evs, 64, false);
        let ipc = derived(&d, "ipc");
        assert_eq!(ipc.value, None);
        let why = ipc.unavailable.as_deref().unwrap();
        assert!(
            why.starts_with("cycles not available on this machine: no cpu PMU"),
            "{why}"
        );
        let llc = derived(&d, "llc-misses-per-kilo-instruction");
        assert_eq!(llc.value, None);
        assert_eq!(
            llc.unavailable.as_deref(),
            Some("llc-load-misses not counted (add it to --counters)")
        );
        let remote = derived(&d, "remote-share");
        assert_eq!(remote.value, None);
        assert_eq!(remote.unavailable.as_deref(), Some("node-loads counted 0"));
    }

    #[test]
    fn reads_decode_and_scale_for_multiplexing() {
        let mut bytes = Vec::new();
        for w in [1000u64, 400, 100] {
            bytes.extend_from_slice(&w.to_ne_bytes());
        }
        let r = Reading::decode(&bytes).unwrap();
        assert_eq!(
            r,
            Reading {
                value: 1000,
                enabled_ns: 400,
                running_ns: 100
            }
        );
        assert_eq!(r.scaled(), Ok((4000, Some(4.0))));
        let v = EventValue::from_reading(find("cycles").unwrap(), r, false);
        assert_eq!(v.value, Some(4000));
        assert!(v.scaled);
        assert_eq!(v.scale_factor, Some(4.0));
        // Ran all along: as read.
        let full = Reading {
            value: 7,
            enabled_ns: 50,
            running_ns: 50,
        };
        assert_eq!(full.scaled(), Ok((7, None)));
        // Never ran: no value, and why.
        let never = Reading {
            value: 0,
            enabled_ns: 50,
            running_ns: 0,
        };
        let v = EventValue::from_reading(find("cycles").unwrap(), never, false);
        assert_eq!(v.value, None);
        assert!(v.unavailable.unwrap().contains("multiplexed out"));
        // Short reads are refused.
        assert_eq!(Reading::decode(&bytes[..16]), None);
        // No overflow on large counts.
        let big = Reading {
            value: u64::MAX / 2,
            enabled_ns: 3,
            running_ns: 2,
        };
        assert_eq!(big.scaled().unwrap().0, 3 * (1u64 << 62) - 2);
    }

    #[test]
    fn lists_parse_and_refuse_unknown_names() {
        let l = parse_list("task-clock,LLC-load-misses,task-clock").unwrap();
        assert_eq!(
            l.iter().map(|e| e.name).collect::<Vec<_>>(),
            ["task-clock", "llc-load-misses"]
        );
        let e = parse_list("task-clock,bogus").unwrap_err();
        assert!(
            e.starts_with("unknown counter 'bogus'; valid: task-clock, page-faults"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        assert!(parse_list("task-clock,,cycles").is_err());
        let all = parse_list("cycles,all").unwrap();
        assert_eq!(all.len(), EVENTS.len());
        assert_eq!(
            all[..2],
            [find("cycles").unwrap(), find("task-clock").unwrap()]
        );
        assert!(
            e.ends_with("node-load-misses, all, a raw event rNNNN or a PMU event PMU/TERMS/"),
            "{e}"
        );
        assert_eq!(default_list().len(), EVENTS.len());
    }

    #[test]
    fn hardware_events_are_refused_here_with_the_kernels_reason() {
        // The test machines have no CPU PMU (a VM without the `cpu` PMU); on one that has, the
        // test checks that cycles is counted instead.
        let devices = Path::new("/sys/bus/event_source/devices");
        let ops = open(0, &[find("cycles").unwrap(), find("page-faults").unwrap()]);
        // Opened on this process, disabled until an exec: nothing counted,
        // but each open either succeeded or says why.
        let vals = ops.read();
        assert!(vals[1].unavailable.is_none(), "{:?}", vals[1]);
        if has_cpu_pmu(devices) {
            eprintln!("this machine has a CPU PMU: cycles opened");
            return;
        }
        let c = &vals[0];
        assert_eq!(c.value, None);
        let why = c.unavailable.as_deref().unwrap();
        assert!(
            why.starts_with("not available on this machine: no cpu PMU (perf_event_open: "),
            "{why}"
        );
    }

    #[test]
    fn memory_controller_is_detected_by_pmu_name() {
        let d = std::env::temp_dir().join(format!("numalab-mc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("software")).unwrap();
        let none = memory_controller(&d);
        assert_eq!(
            none.unavailable.as_deref(),
            Some("not available on this machine: no uncore_imc, amd_umc or amd_df PMU")
        );
        std::fs::create_dir_all(d.join("uncore_imc_1")).unwrap();
        std::fs::create_dir_all(d.join("uncore_imc_0")).unwrap();
        let some = memory_controller(&d);
        assert_eq!(some.pmus, ["uncore_imc_0", "uncore_imc_1"]);
        assert_eq!(some.unavailable, None);
        std::fs::create_dir_all(d.join("cpu")).unwrap();
        assert!(has_cpu_pmu(&d));
        let _ = std::fs::remove_dir_all(&d);
    }
}
