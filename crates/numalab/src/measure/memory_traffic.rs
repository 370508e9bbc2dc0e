//! Memory bytes measured by the memory controllers, or assumed
//! (docs/measurement.md, "Measured or assumed memory bytes").
//!
//! numalab's `memory_gbps` counts the bytes a kernel's loop implies
//! (ordinary stores counted twice: write-allocate). Where the machine has
//! Intel `uncore_imc_N` PMUs, [`begin`] opens their `cas_count_read` and
//! `cas_count_write` events system-wide (`pid` = -1, each CPU of the
//! device's `cpumask`, one per socket) and [`Counting::finish`] turns the
//! counts into bytes (count × `.scale` × `.unit`). On AMD, Zen 4 and later
//! expose `amd_umc_N` PMUs (one per memory controller): their CAS commands
//! for reads and for writes (event 0x0a, `rdwrmask` 1 and 2; perf's
//! `umc_cas_cmd.rd`/`.wr`) are counted the same way, 64 bytes each. Zen 2
//! and 3 (families 0x17 and 0x19 without `amd_umc`) have only the data
//! fabric's `amd_df`: its eight DRAM channels' "requests with data (64B)"
//! (event 0x07 + 0x40 × channel, umask 0x38; perf's
//! `dram_channel_data_controller_N`) count reads and writes together, on
//! four counters, so they are multiplexed and scaled by time enabled over
//! time running. Anywhere else — no such PMU, another family's data
//! fabric, or a refusal by the kernel — the result says "assumed" with the
//! reason. The same counts are kept per package (each device is read on one
//! CPU of each package), and Intel `uncore_upi_N` link ports are counted
//! where they exist ([`link_events`]).
//!
//! The counts are the whole machine's: every process's traffic in the
//! interval is in them, not only the measured workers'.

use super::counters::{memory_controller, open_system_wide, refusal_text, Reading};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Instant;

/// Where the PMUs are listed.
pub const DEVICES: &str = "/sys/bus/event_source/devices";
/// Where CPUs' packages and nodes' CPUs are listed.
pub const SYSTEM: &str = "/sys/devices/system";

/// Bytes per CAS command or DRAM request: one cache line.
const LINE: f64 = 64.0;

/// Whether memory bytes were counted by the memory controllers or assumed
/// from the kernel's loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Measured,
    Assumed,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Measured => "measured",
            Source::Assumed => "assumed",
        }
    }
}

/// The memory traffic of a measured interval, or why it is assumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryTraffic {
    pub source: Source,
    /// Why the bytes are assumed (no memory-controller PMU, or the
    /// kernel's refusal); `None` when measured.
    pub reason: Option<String>,
    /// The PMUs counted (`uncore_imc_0`, ...); empty when assumed.
    #[serde(default)]
    pub pmus: Vec<String>,
    /// Bytes read and written, whole machine (the data fabric counts
    /// only this total).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Bytes read from memory (CAS reads × 64), whole machine.
    pub read_bytes: Option<u64>,
    /// Bytes written to memory (CAS writes × 64), whole machine.
    pub write_bytes: Option<u64>,
    /// The interval counted, in seconds.
    pub seconds: Option<f64>,
    /// Read bytes per second, 1e9 B/s.
    pub read_gbps: Option<f64>,
    /// Written bytes per second, 1e9 B/s.
    pub write_gbps: Option<f64>,
    /// Read and written bytes per second, 1e9 B/s.
    pub gbps: Option<f64>,
    /// The same bytes per package (socket): each memory-controller device
    /// is counted on one CPU of each package (its `cpumask`), so the count
    /// read on that CPU is that package's controllers'. Empty when assumed.
    #[serde(default)]
    pub per_package: Vec<PackageTraffic>,
    /// Data each inter-socket link port sent (Intel `uncore_upi_N`), per
    /// package. Empty when not counted: [`MemoryTraffic::links_reason`]
    /// says why.
    #[serde(default)]
    pub links: Vec<LinkTraffic>,
    /// Why links were not counted while the memory controllers were (no
    /// link PMU numalab knows, or the kernel's refusal).
    #[serde(default)]
    pub links_reason: Option<String>,
}

/// What the memory controllers of one package moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackageTraffic {
    /// The CPU the package's devices were counted on.
    pub cpu: i32,
    /// The NUMA nodes of that CPU's package (several where a package is
    /// split into nodes: the count is the package's, not split between
    /// them).
    pub nodes: Vec<u32>,
    /// Bytes read and written (CAS × 64); `None` where the PMU counts only
    /// their total (the data fabric).
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub bytes: u64,
    /// `bytes` per second, 1e9 B/s.
    pub gbps: f64,
}

/// Data one link port of a package sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkTraffic {
    /// The port's PMU (`uncore_upi_0`, ...).
    pub device: String,
    /// The CPU it was counted on, and that CPU's package's nodes.
    pub cpu: i32,
    pub nodes: Vec<u32>,
    /// Data bytes sent (data flits × 64/9: a 64-byte line is nine flits).
    pub bytes: u64,
    pub gbps: f64,
}

impl Default for MemoryTraffic {
    /// What a result written before memory traffic was recorded reads as.
    fn default() -> Self {
        MemoryTraffic::assumed("not recorded".into())
    }
}

impl MemoryTraffic {
    pub fn assumed(reason: String) -> Self {
        MemoryTraffic {
            source: Source::Assumed,
            reason: Some(reason),
            pmus: Vec::new(),
            bytes: None,
            read_bytes: None,
            write_bytes: None,
            seconds: None,
            read_gbps: None,
            write_gbps: None,
            gbps: None,
            per_package: Vec::new(),
            links: Vec::new(),
            links_reason: None,
        }
    }

    /// Measured traffic from byte totals over `seconds`.
    pub fn measured(pmus: Vec<String>, read: u64, write: u64, seconds: f64) -> Self {
        let per_s = |b: u64| b as f64 / seconds.max(1e-9) / 1e9;
        MemoryTraffic {
            source: Source::Measured,
            reason: None,
            pmus,
            bytes: Some(read.saturating_add(write)),
            read_bytes: Some(read),
            write_bytes: Some(write),
            seconds: Some(seconds),
            read_gbps: Some(per_s(read)),
            write_gbps: Some(per_s(write)),
            gbps: Some(per_s(read.saturating_add(write))),
            per_package: Vec::new(),
            links: Vec::new(),
            links_reason: None,
        }
    }
}

impl MemoryTraffic {
    /// Measured traffic known only as a total of bytes read and written
    /// (the data fabric's DRAM requests).
    pub fn measured_total(pmus: Vec<String>, bytes: u64, seconds: f64) -> Self {
        MemoryTraffic {
            read_bytes: None,
            write_bytes: None,
            read_gbps: None,
            write_gbps: None,
            ..MemoryTraffic::measured(pmus, bytes, 0, seconds)
        }
    }

    /// Pools a later interval into this one: measured bytes and seconds
    /// add up; when either is assumed the pool is assumed, with the first
    /// reason.
    pub fn pool(&mut self, later: MemoryTraffic) {
        match (self.source, later.source) {
            (Source::Measured, Source::Measured) => {
                let sum = |a: Option<u64>, b: Option<u64>| a.unwrap_or(0) + b.unwrap_or(0);
                let mut pmus = std::mem::take(&mut self.pmus);
                for p in later.pmus {
                    if !pmus.contains(&p) {
                        pmus.push(p);
                    }
                }
                let seconds = self.seconds.unwrap_or(0.0) + later.seconds.unwrap_or(0.0);
                let mut packages = std::mem::take(&mut self.per_package);
                for p in later.per_package {
                    match packages.iter_mut().find(|q| q.cpu == p.cpu) {
                        Some(q) => {
                            let add = |a: Option<u64>, b: Option<u64>| Some(a? + b?);
                            q.read_bytes = add(q.read_bytes, p.read_bytes);
                            q.write_bytes = add(q.write_bytes, p.write_bytes);
                            q.bytes += p.bytes;
                        }
                        None => packages.push(p),
                    }
                }
                let mut links = std::mem::take(&mut self.links);
                for l in later.links {
                    match links
                        .iter_mut()
                        .find(|k| k.device == l.device && k.cpu == l.cpu)
                    {
                        Some(k) => k.bytes += l.bytes,
                        None => links.push(l),
                    }
                }
                let links_reason = self.links_reason.take().or(later.links_reason);
                *self = if self.read_bytes.is_some() && later.read_bytes.is_some() {
                    MemoryTraffic::measured(
                        pmus,
                        sum(self.read_bytes, later.read_bytes),
                        sum(self.write_bytes, later.write_bytes),
                        seconds,
                    )
                } else {
                    MemoryTraffic::measured_total(pmus, sum(self.bytes, later.bytes), seconds)
                }
                .with_breakdown(packages, links, links_reason);
            }
            (Source::Measured, Source::Assumed) => *self = later,
            (Source::Assumed, _) => {}
        }
    }
}

impl MemoryTraffic {
    /// Sets the per-package and per-link bytes, their rates over this
    /// interval's seconds.
    pub fn with_breakdown(
        mut self,
        mut packages: Vec<PackageTraffic>,
        mut links: Vec<LinkTraffic>,
        links_reason: Option<String>,
    ) -> Self {
        let secs = self.seconds.unwrap_or(0.0).max(1e-9);
        for p in packages.iter_mut() {
            p.gbps = p.bytes as f64 / secs / 1e9;
        }
        for l in links.iter_mut() {
            l.gbps = l.bytes as f64 / secs / 1e9;
        }
        packages.sort_by_key(|p| p.cpu);
        links.sort_by(|a, b| (a.cpu, &a.device).cmp(&(b.cpu, &b.device)));
        self.per_package = packages;
        self.links = links;
        self.links_reason = links_reason;
        self
    }
}

/// Read or write CAS commands, or requests of either (the data fabric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
    Both,
}

/// One memory-controller event as sysfs describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ImcEvent {
    pub device: String,
    /// Its name in errors (`cas_count_read`, `umc_cas_cmd.rd`, ...).
    pub event: String,
    pub direction: Direction,
    /// The PMU's `type`.
    pub type_: u32,
    /// The event encoded with the PMU's `format/` fields.
    pub config: u64,
    /// The event's `.scale` times its `.unit` in bytes: bytes per count.
    pub bytes_per_count: f64,
    /// The CPUs to open it on (the device's `cpumask`, one per socket).
    pub cpus: Vec<i32>,
}

fn read_trim(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("cannot read {}: {e}", p.display()))
}

/// A CPU list (`0,28` or `0-3,8`).
pub fn parse_cpu_list(text: &str) -> Result<Vec<i32>, String> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| {
            t.parse::<i32>()
                .map_err(|_| format!("bad CPU list {text:?}"))
        };
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(num(a)?..=num(b)?),
            None => cpus.push(num(part)?),
        }
    }
    if cpus.is_empty() {
        return Err(format!("bad CPU list {text:?}"));
    }
    Ok(cpus)
}

/// A `format/` field: its bit ranges in `config` (`config:0-7`,
/// `config:21`, `config:0-7,32-35`). Fields in `config1`/`config2` are
/// refused.
pub fn parse_format(text: &str) -> Result<Vec<(u32, u32)>, String> {
    let Some(ranges) = text.strip_prefix("config:") else {
        return Err(format!("format {text:?} is not in config"));
    };
    let mut out = Vec::new();
    for r in ranges.split(',') {
        let bit = |t: &str| {
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|b| *b < 64)
                .ok_or_else(|| format!("bad format {text:?}"))
        };
        let (lo, hi) = match r.split_once('-') {
            Some((a, b)) => (bit(a)?, bit(b)?),
            None => (bit(r)?, bit(r)?),
        };
        if hi < lo {
            return Err(format!("bad format {text:?}"));
        }
        out.push((lo, hi));
    }
    Ok(out)
}

/// Encodes an event's terms (`event=0x04,umask=0x03`; a bare term is 1)
/// with the PMU's formats.
pub fn encode(event: &str, formats: &BTreeMap<String, Vec<(u32, u32)>>) -> Result<u64, String> {
    let mut config = 0u64;
    for term in event.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = term.split_once('=').unwrap_or((term, "1"));
        let value = match value.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => value.parse::<u64>(),
        }
        .map_err(|_| format!("bad value in event term {term:?}"))?;
        let ranges = formats
            .get(name)
            .ok_or_else(|| format!("event term {name:?} has no format"))?;
        let mut rest = value;
        for &(lo, hi) in ranges {
            let width = hi - lo + 1;
            let mask = if width == 64 {
                u64::MAX
            } else {
                (1u64 << width) - 1
            };
            config |= (rest & mask) << lo;
            rest = if width == 64 { 0 } else { rest >> width };
        }
        if rest != 0 {
            return Err(format!("value of {term:?} does not fit its format"));
        }
    }
    Ok(config)
}

/// Bytes in a sysfs event `.unit`.
pub fn unit_bytes(unit: &str) -> Result<f64, String> {
    Ok(match unit {
        "B" | "Bytes" | "bytes" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        _ => return Err(format!("unknown unit {unit:?}")),
    })
}

/// One `uncore_imc_N` device's two CAS events.
fn imc_device(dir: &Path, name: &str) -> Result<Vec<ImcEvent>, String> {
    let (type_, cpus, formats) = pmu_device(dir, name)?;
    let mut out = Vec::new();
    for (event, direction) in [
        ("cas_count_read", Direction::Read),
        ("cas_count_write", Direction::Write),
    ] {
        let ev = dir.join("events");
        let text = read_trim(&ev.join(event))?;
        let config = encode(&text, &formats).map_err(|e| format!("{name} {event}: {e}"))?;
        let scale = match std::fs::read_to_string(ev.join(format!("{event}.scale"))) {
            Ok(s) => s
                .trim()
                .parse::<f64>()
                .map_err(|_| format!("{name} {event}: bad scale"))?,
            Err(_) => 1.0,
        };
        let unit = match std::fs::read_to_string(ev.join(format!("{event}.unit"))) {
            Ok(u) => unit_bytes(u.trim()).map_err(|e| format!("{name} {event}: {e}"))?,
            Err(_) => 1.0,
        };
        out.push(ImcEvent {
            device: name.to_string(),
            event: event.to_string(),
            direction,
            type_,
            config,
            bytes_per_count: scale * unit,
            cpus: cpus.clone(),
        });
    }
    Ok(out)
}

/// A PMU's type, cpumask and `format/` fields.
fn pmu_device(dir: &Path, name: &str) -> Result<(u32, Vec<i32>, Formats), String> {
    let type_ = read_trim(&dir.join("type"))?
        .parse::<u32>()
        .map_err(|_| format!("{name}: bad type"))?;
    let cpus = parse_cpu_list(&read_trim(&dir.join("cpumask"))?)?;
    let mut formats = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(dir.join("format")) {
        for f in rd.flatten() {
            let field = f.file_name().to_string_lossy().into_owned();
            formats.insert(field, parse_format(&read_trim(&f.path())?)?);
        }
    }
    Ok((type_, cpus, formats))
}

type Formats = BTreeMap<String, Vec<(u32, u32)>>;

/// Events of `name` (a PMU under `devices`) from (event name, terms,
/// direction), each counting 64 bytes.
fn line_events(
    devices: &Path,
    name: &str,
    events: &[(String, String, Direction)],
) -> Result<Vec<ImcEvent>, String> {
    let (type_, cpus, formats) = pmu_device(&devices.join(name), name)?;
    events
        .iter()
        .map(|(event, terms, direction)| {
            Ok(ImcEvent {
                device: name.to_string(),
                event: event.clone(),
                direction: *direction,
                type_,
                config: encode(terms, &formats).map_err(|e| format!("{name} {event}: {e}"))?,
                bytes_per_count: LINE,
                cpus: cpus.clone(),
            })
        })
        .collect()
}

/// The CPU family of `/proc/cpuinfo` (`cpu family : 25`), when x86.
pub fn cpu_family() -> Option<u32> {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()?
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "cpu family").then(|| v.trim().parse().ok())?
        })
}

/// AMD Zen 4 and later: each `amd_umc_N`'s CAS commands for reads and
/// for writes.
fn amd_umc_events(devices: &Path, umcs: &[&String]) -> Result<Vec<ImcEvent>, String> {
    let mut out = Vec::new();
    for name in umcs {
        out.extend(line_events(
            devices,
            name,
            &[
                (
                    "umc_cas_cmd.rd".into(),
                    "event=0x0a,rdwrmask=0x1".into(),
                    Direction::Read,
                ),
                (
                    "umc_cas_cmd.wr".into(),
                    "event=0x0a,rdwrmask=0x2".into(),
                    Direction::Write,
                ),
            ],
        )?);
    }
    Ok(out)
}

/// AMD Zen 2 and 3 (`family` 0x17 or 0x19): the data fabric's eight DRAM
/// channels' requests with data; other families are refused with the
/// reason.
fn amd_df_events(devices: &Path, family: Option<u32>) -> Result<Vec<ImcEvent>, String> {
    match family {
        Some(0x17 | 0x19) => {}
        Some(f) => {
            return Err(format!(
                "amd_df present, but the DRAM events of CPU family {f:#x}'s data fabric are not known to numalab (Zen 4 and later are counted through amd_umc, which this kernel does not expose)"
            ))
        }
        None => return Err("amd_df present, but the CPU family is unknown".into()),
    }
    let events: Vec<(String, String, Direction)> = (0..8u64)
        .map(|ch| {
            (
                format!("dram_channel_data_controller_{ch}"),
                format!("event={:#x},umask=0x38", 0x07 + 0x40 * ch),
                Direction::Both,
            )
        })
        .collect();
    line_events(devices, "amd_df", &events)
}

/// The memory-controller events to count under `devices`, or why memory
/// bytes must be assumed.
pub fn imc_events(devices: &Path) -> Result<Vec<ImcEvent>, String> {
    imc_events_for(devices, cpu_family())
}

/// [`imc_events`] on a CPU of `family`.
pub fn imc_events_for(devices: &Path, family: Option<u32>) -> Result<Vec<ImcEvent>, String> {
    let mc = memory_controller(devices);
    if let Some(why) = mc.unavailable {
        return Err(why);
    }
    let of = |prefix: &str| -> Vec<&String> {
        mc.pmus.iter().filter(|p| p.starts_with(prefix)).collect()
    };
    let imcs = of("uncore_imc");
    if imcs.is_empty() {
        let umcs = of("amd_umc");
        if !umcs.is_empty() {
            return amd_umc_events(devices, &umcs);
        }
        return amd_df_events(devices, family);
    }
    // Free-running IMC PMUs (`uncore_imc_free_running_N`) name their
    // events otherwise: only the devices with CAS events are counted.
    let with_cas: Vec<&String> = imcs
        .iter()
        .copied()
        .filter(|p| devices.join(p).join("events/cas_count_read").exists())
        .collect();
    if with_cas.is_empty() {
        let names: Vec<&str> = imcs.iter().map(|s| s.as_str()).collect();
        return Err(format!(
            "no uncore_imc PMU has a cas_count_read event ({})",
            names.join(", ")
        ));
    }
    let mut out = Vec::new();
    for name in with_cas {
        out.extend(imc_device(&devices.join(name), name)?);
    }
    Ok(out)
}

/// Bytes read, written, and of either (the data fabric's requests) from
/// each event's count.
pub fn bytes_of(events: &[ImcEvent], counts: &[u64]) -> (u64, u64, u64) {
    let (mut read, mut write, mut both) = (0f64, 0f64, 0f64);
    for (e, &c) in events.iter().zip(counts) {
        let b = c as f64 * e.bytes_per_count;
        match e.direction {
            Direction::Read => read += b,
            Direction::Write => write += b,
            Direction::Both => both += b,
        }
    }
    (
        read.round() as u64,
        write.round() as u64,
        both.round() as u64,
    )
}

/// One opened event on one CPU: (event index, CPU, descriptor, reading
/// at the start).
type Opened = (usize, i32, OwnedFd, Reading);

/// Memory-controller (and link) events counting since [`begin`].
pub struct Counting {
    fds: Vec<Opened>,
    events: Vec<ImcEvent>,
    link_fds: Vec<Opened>,
    link_events: Vec<ImcEvent>,
    links_reason: Option<String>,
    /// The nodes of each counted CPU's package, read before the interval.
    nodes_of: BTreeMap<i32, Vec<u32>>,
    start: Instant,
}

fn read_count(fd: &OwnedFd) -> Result<Reading, String> {
    let mut buf = [0u8; 24];
    let n = crate::sys::process::read_once(fd.as_fd(), &mut buf);
    match n.as_ref().ok().and_then(|&n| Reading::decode(&buf[..n])) {
        Some(r) => Ok(r),
        None => Err(format!(
            "could not read a memory-controller count: {}",
            match n {
                Err(e) => e.to_string(),
                Ok(n) => format!("{n} bytes instead of 24"),
            }
        )),
    }
}

/// The count between two readings, scaled by the time enabled over the
/// time running when the event shared its counter (the data fabric's
/// eight channels on four counters); an error when it never ran.
pub fn scaled_delta(at: Reading, now: Reading) -> Result<u64, String> {
    let delta = Reading {
        value: now.value.wrapping_sub(at.value),
        enabled_ns: now.enabled_ns.saturating_sub(at.enabled_ns),
        running_ns: now.running_ns.saturating_sub(at.running_ns),
    };
    if delta.enabled_ns == 0 {
        return Ok(delta.value);
    }
    delta
        .scaled()
        .map(|(v, _)| v)
        .map_err(|why| format!("a memory-controller event {why}"))
}

/// Opens each of `events` system-wide on each of its CPUs.
fn open_all(events: &[ImcEvent]) -> Result<Vec<Opened>, String> {
    let mut fds = Vec::new();
    for (i, e) in events.iter().enumerate() {
        for &cpu in &e.cpus {
            let fd = open_system_wide(e.type_, e.config, cpu).map_err(|errno| {
                format!(
                    "perf_event_open of {} {} on CPU {cpu} refused: {}",
                    e.device,
                    e.event,
                    refusal_text(errno)
                )
            })?;
            let at = read_count(&fd)?;
            fds.push((i, cpu, fd, at));
        }
    }
    Ok(fds)
}

/// Starts counting `events` (system-wide, on each of their CPUs); no links.
pub fn begin_with(events: Vec<ImcEvent>) -> Result<Counting, String> {
    begin_with_links(events, Err("not asked for".into()), Path::new(SYSTEM))
}

/// Starts counting `events` and, where it can, the link events `links`
/// (a link that cannot be counted leaves the reason, not an error);
/// packages' nodes are read under `system` (`/sys/devices/system`).
pub fn begin_with_links(
    events: Vec<ImcEvent>,
    links: Result<Vec<ImcEvent>, String>,
    system: &Path,
) -> Result<Counting, String> {
    let (link_events, link_fds, links_reason) = match links.and_then(|l| {
        let fds = open_all(&l)?;
        Ok((l, fds))
    }) {
        Ok((l, fds)) => (l, fds, None),
        Err(why) => (Vec::new(), Vec::new(), Some(why)),
    };
    let nodes_of = events
        .iter()
        .chain(&link_events)
        .flat_map(|e| e.cpus.iter().copied())
        .map(|cpu| (cpu, package_nodes_at(system, cpu)))
        .collect();
    let fds = open_all(&events)?;
    Ok(Counting {
        fds,
        events,
        link_fds,
        link_events,
        links_reason,
        nodes_of,
        start: Instant::now(),
    })
}

/// The NUMA nodes of the package of `cpu`, from sysfs under `system`
/// (`/sys/devices/system`): the nodes with a CPU of that package (empty
/// when sysfs does not say).
pub fn package_nodes_at(system: &Path, cpu: i32) -> Vec<u32> {
    let topo = system.join(format!("cpu/cpu{cpu}/topology"));
    let Some(package) = ["package_cpus_list", "core_siblings_list"]
        .iter()
        .find_map(|f| parse_cpu_list(&read_trim(&topo.join(f)).ok()?).ok())
    else {
        return Vec::new();
    };
    let mut nodes: Vec<u32> = std::fs::read_dir(system.join("node"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let n = name.strip_prefix("node")?.parse::<u32>().ok()?;
                    let cpus = parse_cpu_list(&read_trim(&e.path().join("cpulist")).ok()?).ok()?;
                    cpus.iter().any(|c| package.contains(c)).then_some(n)
                })
                .collect()
        })
        .unwrap_or_default();
    nodes.sort_unstable();
    nodes
}

/// Bytes per UPI data flit: a 64-byte line travels as nine flits (Intel's
/// and likwid's data-bandwidth metric).
pub const UPI_BYTES_PER_DATA_FLIT: f64 = 64.0 / 9.0;

/// The link events under `devices`: the data flits each Intel
/// `uncore_upi_N` port sent (`UNC_UPI_TxL_FLITS.ALL_DATA`: event 0x02,
/// umask 0x0f), or why links cannot be counted.
pub fn link_events(devices: &Path) -> Result<Vec<ImcEvent>, String> {
    let mut names: Vec<String> = std::fs::read_dir(devices)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let upis: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("uncore_upi"))
        .collect();
    if upis.is_empty() {
        return Err(if names.iter().any(|n| n.starts_with("uncore_qpi")) {
            "uncore_qpi present, but numalab knows the data events of UPI links only".into()
        } else if names.iter().any(|n| n == "amd_df") {
            "amd_df present, but numalab knows no data event of its xGMI links".into()
        } else {
            "no link PMU on this machine (no uncore_upi)".into()
        });
    }
    upis.into_iter()
        .map(|name| {
            let (type_, cpus, formats) = pmu_device(&devices.join(name), name)?;
            Ok(ImcEvent {
                device: name.clone(),
                event: "txl_flits.all_data".into(),
                direction: Direction::Both,
                type_,
                config: encode("event=0x02,umask=0x0f", &formats)
                    .map_err(|e| format!("{name} txl_flits.all_data: {e}"))?,
                bytes_per_count: UPI_BYTES_PER_DATA_FLIT,
                cpus,
            })
        })
        .collect()
}

/// Starts counting memory traffic with the PMUs under `devices` (and the
/// links, where it can); the reason bytes must be assumed when it cannot.
pub fn begin_at(devices: &Path) -> Result<Counting, String> {
    begin_with_links(
        imc_events(devices)?,
        link_events(devices),
        Path::new(SYSTEM),
    )
}

/// [`begin_at`] with the machine's PMUs.
pub fn begin() -> Result<Counting, String> {
    begin_at(Path::new(DEVICES))
}

impl Counting {
    /// Reads the counts and gives the traffic since [`begin`].
    pub fn finish(self) -> MemoryTraffic {
        let seconds = self.start.elapsed().as_secs_f64();
        let counts = match deltas(&self.fds) {
            Ok(c) => c,
            Err(e) => return MemoryTraffic::assumed(e),
        };
        let (links, links_reason) = match deltas(&self.link_fds) {
            Ok(c) => (self.links_of(&c), self.links_reason.clone()),
            Err(e) => (Vec::new(), Some(e)),
        };
        self.traffic(&counts, seconds).with_breakdown(
            self.packages_of(&counts),
            links,
            links_reason,
        )
    }

    /// The whole machine's traffic from each (event, CPU) count.
    fn traffic(&self, counts: &[(usize, i32, u64)], seconds: f64) -> MemoryTraffic {
        let (read, write, both) = bytes_of(&self.events, &per_event(&self.events, counts, None));
        let mut pmus: Vec<String> = self.events.iter().map(|e| e.device.clone()).collect();
        pmus.dedup();
        if self.events.iter().any(|e| e.direction == Direction::Both) {
            MemoryTraffic::measured_total(pmus, both + read + write, seconds)
        } else {
            MemoryTraffic::measured(pmus, read, write, seconds)
        }
    }

    /// Each counted CPU's (package's) bytes.
    fn packages_of(&self, counts: &[(usize, i32, u64)]) -> Vec<PackageTraffic> {
        let mut cpus: Vec<i32> = counts.iter().map(|c| c.1).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let split = !self.events.iter().any(|e| e.direction == Direction::Both);
        cpus.into_iter()
            .map(|cpu| {
                let (read, write, both) =
                    bytes_of(&self.events, &per_event(&self.events, counts, Some(cpu)));
                PackageTraffic {
                    cpu,
                    nodes: self.nodes_of.get(&cpu).cloned().unwrap_or_default(),
                    read_bytes: split.then_some(read),
                    write_bytes: split.then_some(write),
                    bytes: read + write + both,
                    gbps: 0.0,
                }
            })
            .collect()
    }

    /// Each link port's bytes on each CPU it was counted on.
    fn links_of(&self, counts: &[(usize, i32, u64)]) -> Vec<LinkTraffic> {
        counts
            .iter()
            .map(|&(i, cpu, c)| {
                let e = &self.link_events[i];
                LinkTraffic {
                    device: e.device.clone(),
                    cpu,
                    nodes: self.nodes_of.get(&cpu).cloned().unwrap_or_default(),
                    bytes: (c as f64 * e.bytes_per_count).round() as u64,
                    gbps: 0.0,
                }
            })
            .collect()
    }
}

/// Each opened event's count since it was opened.
fn deltas(fds: &[Opened]) -> Result<Vec<(usize, i32, u64)>, String> {
    fds.iter()
        .map(|(i, cpu, fd, at)| {
            Ok((
                *i,
                *cpu,
                read_count(fd).and_then(|now| scaled_delta(*at, now))?,
            ))
        })
        .collect()
}

/// Counts summed per event, over every CPU or one.
fn per_event(events: &[ImcEvent], counts: &[(usize, i32, u64)], cpu: Option<i32>) -> Vec<u64> {
    let mut out = vec![0u64; events.len()];
    for &(i, c, n) in counts {
        if cpu.is_none_or(|want| want == c) {
            out[i] = out[i].saturating_add(n);
        }
    }
    out
}

/// The traffic of running `f`: measured when the memory controllers can be
/// counted, else assumed with the reason.
pub fn around<T>(f: impl FnOnce() -> T) -> (T, MemoryTraffic) {
    match begin() {
        Ok(c) => {
            let out = f();
            (out, c.finish())
        }
        Err(why) => (f(), MemoryTraffic::assumed(why)),
    }
}

/// The text after memory figures: "assumed: ..." with the reason, or what
/// the memory controllers measured.
pub fn label(t: &MemoryTraffic) -> String {
    match t.source {
        Source::Assumed => format!(
            "assumed: write-allocate counted, no memory-controller counters: {}",
            t.reason.as_deref().unwrap_or("unknown")
        ),
        Source::Measured => {
            let by = if t.pmus.iter().any(|p| p.starts_with("amd_umc")) {
                "amd_umc"
            } else {
                "uncore_imc"
            };
            match (t.read_gbps, t.write_gbps) {
                (Some(r), Some(w)) => {
                    format!("measured by {by} CAS counts: {r:.2} GB/s read, {w:.2} GB/s written")
                }
                _ => format!(
                    "measured by amd_df DRAM channel requests: {:.2} GB/s read and written",
                    t.gbps.unwrap_or(0.0)
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("numalab-imc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A Skylake-SP-like `uncore_imc_N`.
    fn imc(root: &Path, name: &str, type_: u32) {
        let d = root.join(name);
        write(&d.join("type"), &format!("{type_}\n"));
        write(&d.join("cpumask"), "0,28\n");
        write(&d.join("format/event"), "config:0-7\n");
        write(&d.join("format/umask"), "config:8-15\n");
        write(&d.join("events/cas_count_read"), "event=0x04,umask=0x03\n");
        write(&d.join("events/cas_count_read.scale"), "6.103515625e-5\n");
        write(&d.join("events/cas_count_read.unit"), "MiB\n");
        write(&d.join("events/cas_count_write"), "event=0x04,umask=0x0c\n");
        write(&d.join("events/cas_count_write.scale"), "6.103515625e-5\n");
        write(&d.join("events/cas_count_write.unit"), "MiB\n");
    }

    #[test]
    fn imc_events_are_read_from_sysfs() {
        let d = tree("ok");
        imc(&d, "uncore_imc_1", 14);
        imc(&d, "uncore_imc_0", 13);
        let ev = imc_events(&d).unwrap();
        assert_eq!(ev.len(), 4);
        assert_eq!(ev[0].device, "uncore_imc_0");
        assert_eq!(ev[0].type_, 13);
        assert_eq!(ev[0].direction, Direction::Read);
        assert_eq!(ev[0].config, 0x0304);
        assert_eq!(ev[1].direction, Direction::Write);
        assert_eq!(ev[1].config, 0x0c04);
        assert_eq!(ev[2].device, "uncore_imc_1");
        assert_eq!(ev[2].type_, 14);
        assert_eq!(ev[0].cpus, [0, 28]);
        // 6.103515625e-5 MiB is 64 bytes: one cache line per CAS.
        assert_eq!(ev[0].bytes_per_count, 64.0);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn bytes_are_counts_times_scale_and_unit() {
        let d = tree("bytes");
        imc(&d, "uncore_imc_0", 13);
        imc(&d, "uncore_imc_1", 14);
        let ev = imc_events(&d).unwrap();
        // Reads 1000 + 3000 lines, writes 500 + 1500.
        let (r, w, both) = bytes_of(&ev, &[1000, 500, 3000, 1500]);
        assert_eq!((r, w, both), (256_000, 128_000, 0));
        let t = MemoryTraffic::measured(vec!["uncore_imc_0".into()], r, w, 0.001);
        assert_eq!(t.source, Source::Measured);
        assert!((t.read_gbps.unwrap() - 0.256).abs() < 1e-12);
        assert!((t.write_gbps.unwrap() - 0.128).abs() < 1e-12);
        assert!((t.gbps.unwrap() - 0.384).abs() < 1e-12);
        assert_eq!(
            label(&t),
            "measured by uncore_imc CAS counts: 0.26 GB/s read, 0.13 GB/s written"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A Zen 4 `amd_umc_N`, as the kernel's amd_uncore driver makes it.
    fn umc(root: &Path, name: &str, type_: u32, cpus: &str) {
        let d = root.join(name);
        write(&d.join("type"), &format!("{type_}\n"));
        write(&d.join("cpumask"), cpus);
        write(&d.join("format/event"), "config:0-7\n");
        write(&d.join("format/rdwrmask"), "config:8-9\n");
    }

    #[test]
    fn amd_umc_cas_commands_are_counted_read_and_write() {
        let d = tree("umc");
        umc(&d, "amd_umc_0", 21, "0\n");
        umc(&d, "amd_umc_1", 22, "0\n");
        umc(&d, "amd_umc_12", 23, "96\n");
        // With amd_df beside them (Zen 4 has both): the UMCs are counted.
        write(&d.join("amd_df/type"), "20\n");
        let ev = imc_events_for(&d, Some(0x19)).unwrap();
        assert_eq!(ev.len(), 6);
        assert_eq!(
            (ev[0].device.as_str(), ev[0].event.as_str(), ev[0].direction),
            ("amd_umc_0", "umc_cas_cmd.rd", Direction::Read)
        );
        // event 0x0a, rdwrmask 1 (reads) or 2 (writes) in bits 8-9.
        assert_eq!((ev[0].config, ev[1].config), (0x10a, 0x20a));
        assert_eq!(ev[1].direction, Direction::Write);
        assert_eq!(ev[0].bytes_per_count, 64.0);
        assert_eq!(ev[4].device, "amd_umc_12");
        assert_eq!((ev[4].type_, ev[4].cpus.clone()), (23, vec![96]));
        let (r, w, both) = bytes_of(&ev, &[10, 5, 20, 5, 30, 5]);
        assert_eq!((r, w, both), (60 * 64, 15 * 64, 0));
        let t = MemoryTraffic::measured(vec!["amd_umc_0".into()], r, w, 1e-6);
        assert_eq!(
            label(&t),
            "measured by amd_umc CAS counts: 3.84 GB/s read, 0.96 GB/s written"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn amd_df_dram_channels_are_counted_on_zen_2_and_3_as_one_total() {
        let d = tree("df");
        let df = d.join("amd_df");
        write(&df.join("type"), "20\n");
        write(&df.join("cpumask"), "0,64\n");
        // Family 17h: event bits 0-7 and 32-35.
        write(&df.join("format/event"), "config:0-7,32-35\n");
        write(&df.join("format/umask"), "config:8-15\n");
        for family in [0x17, 0x19] {
            let ev = imc_events_for(&d, Some(family)).unwrap();
            let configs: Vec<u64> = ev.iter().map(|e| e.config).collect();
            // perf's dram_channel_data_controller_0..7: event 0x07 + 0x40 ×
            // channel (0x107 and up put their ninth bit in bit 32), umask 0x38.
            assert_eq!(
                configs,
                [
                    0x3807,
                    0x3847,
                    0x3887,
                    0x38c7,
                    0x1_0000_3807,
                    0x1_0000_3847,
                    0x1_0000_3887,
                    0x1_0000_38c7
                ]
            );
            assert!(ev.iter().all(|e| e.direction == Direction::Both));
            assert_eq!(ev[3].event, "dram_channel_data_controller_3");
            assert_eq!(ev[0].cpus, [0, 64]);
        }
        assert!(imc_events_for(&d, None)
            .unwrap_err()
            .contains("CPU family is unknown"));
        let ev = imc_events_for(&d, Some(0x17)).unwrap();
        let counts = [1000u64; 8];
        let (r, w, both) = bytes_of(&ev, &counts);
        assert_eq!((r, w, both), (0, 0, 8000 * 64));
        let mut t = MemoryTraffic::measured_total(vec!["amd_df".into()], both, 0.001);
        assert_eq!(
            (t.read_bytes, t.write_bytes, t.bytes),
            (None, None, Some(512_000))
        );
        assert_eq!(
            label(&t),
            "measured by amd_df DRAM channel requests: 0.51 GB/s read and written"
        );
        // Pooled with a later interval: still one total.
        t.pool(MemoryTraffic::measured_total(
            vec!["amd_df".into()],
            512_000,
            0.001,
        ));
        assert_eq!((t.bytes, t.read_bytes), (Some(1_024_000), None));
        assert!((t.gbps.unwrap() - 0.512).abs() < 1e-9);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn shared_counters_are_scaled_by_time_enabled_over_running() {
        let r = |value, enabled_ns, running_ns| Reading {
            value,
            enabled_ns,
            running_ns,
        };
        // Ran half the interval: counted 1000, 2000 over the whole of it.
        assert_eq!(scaled_delta(r(500, 100, 100), r(1500, 300, 200)), Ok(2000));
        assert_eq!(scaled_delta(r(0, 0, 0), r(700, 50, 50)), Ok(700));
        assert!(scaled_delta(r(0, 0, 0), r(0, 50, 0))
            .unwrap_err()
            .contains("never counted"));
    }

    #[test]
    fn pooled_rounds_add_bytes_and_seconds() {
        let mut t = MemoryTraffic::measured(vec!["uncore_imc_0".into()], 1000, 500, 1.0);
        t.pool(MemoryTraffic::measured(
            vec!["uncore_imc_0".into()],
            3000,
            1500,
            1.0,
        ));
        assert_eq!((t.read_bytes, t.write_bytes), (Some(4000), Some(2000)));
        assert_eq!(t.seconds, Some(2.0));
        assert!((t.gbps.unwrap() - 3e-6).abs() < 1e-15);
        assert_eq!(t.pmus, ["uncore_imc_0"]);
        t.pool(MemoryTraffic::assumed("refused".into()));
        assert_eq!(t.source, Source::Assumed);
        assert_eq!(t.reason.as_deref(), Some("refused"));
        t.pool(MemoryTraffic::measured(Vec::new(), 1, 1, 1.0));
        assert_eq!(t.reason.as_deref(), Some("refused"));
    }

    #[test]
    fn formats_and_terms_encode() {
        assert_eq!(parse_format("config:21").unwrap(), [(21, 21)]);
        assert_eq!(
            parse_format("config:0-7,32-35").unwrap(),
            [(0, 7), (32, 35)]
        );
        assert!(parse_format("config1:0-7").is_err());
        assert!(parse_format("config:7-0").is_err());
        let mut f = BTreeMap::new();
        f.insert(
            "event".to_string(),
            parse_format("config:0-7,32-35").unwrap(),
        );
        f.insert("edge".to_string(), parse_format("config:18").unwrap());
        // 0x1ff: low byte in 0-7, the ninth bit in 32.
        assert_eq!(encode("event=0x1ff,edge", &f).unwrap(), 0x1_0004_00ff);
        assert_eq!(encode("event=12", &f).unwrap(), 12);
        assert!(encode("umask=1", &f).unwrap_err().contains("no format"));
        assert!(encode("event=0x1000", &f)
            .unwrap_err()
            .contains("does not fit"));
        assert_eq!(parse_cpu_list("0-2,8").unwrap(), [0, 1, 2, 8]);
        assert!(parse_cpu_list("").is_err());
        assert_eq!(unit_bytes("KiB").unwrap(), 1024.0);
        assert!(unit_bytes("furlongs").is_err());
    }

    #[test]
    fn no_imc_or_amd_df_means_assumed_with_the_reason() {
        let d = tree("none");
        std::fs::create_dir_all(d.join("software")).unwrap();
        assert_eq!(
            begin_at(&d).err().unwrap(),
            "not available on this machine: no uncore_imc, amd_umc or amd_df PMU"
        );
        std::fs::create_dir_all(d.join("amd_df")).unwrap();
        assert_eq!(
            imc_events_for(&d, Some(0x1a)).err().unwrap(),
            "amd_df present, but the DRAM events of CPU family 0x1a's data fabric are not known to numalab (Zen 4 and later are counted through amd_umc, which this kernel does not expose)"
        );
        std::fs::remove_dir_all(d.join("amd_df")).unwrap();
        // A device without CAS events is not counted.
        write(&d.join("uncore_imc_free_running_0/type"), "13\n");
        assert_eq!(
            begin_at(&d).err().unwrap(),
            "no uncore_imc PMU has a cas_count_read event (uncore_imc_free_running_0)"
        );
        // A device missing a file says which.
        write(&d.join("uncore_imc_0/type"), "14\n");
        write(
            &d.join("uncore_imc_0/events/cas_count_read"),
            "event=0x04\n",
        );
        let why = begin_at(&d).err().unwrap();
        assert!(why.starts_with("cannot read "), "{why}");
        assert!(why.contains("uncore_imc_0/cpumask"), "{why}");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// The system-wide open, read and finish path, on a stand-in
    /// "uncore_imc_0" whose type is the kernel's software PMU and whose
    /// events are `cpu-clock` (nanoseconds, 1 "byte" each) on CPU 0.
    #[test]
    fn counting_opens_system_wide_and_reads_the_difference() {
        let Ok(sw) = std::fs::read_to_string(Path::new(DEVICES).join("software/type")) else {
            return;
        };
        let d = tree("sw");
        let dev = d.join("uncore_imc_0");
        write(&dev.join("type"), &sw);
        write(&dev.join("cpumask"), "0\n");
        write(&dev.join("format/event"), "config:0-7\n");
        for e in ["cas_count_read", "cas_count_write"] {
            write(&dev.join("events").join(e), "event=0x00\n");
            write(&dev.join("events").join(format!("{e}.unit")), "B\n");
        }
        match begin_at(&d) {
            Ok(c) => {
                std::thread::sleep(std::time::Duration::from_millis(30));
                let t = c.finish();
                assert_eq!(t.source, Source::Measured, "{t:?}");
                assert_eq!(t.pmus, ["uncore_imc_0"]);
                let secs = t.seconds.unwrap();
                assert!(secs >= 0.03, "{secs}");
                // cpu-clock counts the nanoseconds it was enabled: about
                // the 30 ms slept, read and written alike.
                for b in [t.read_bytes.unwrap(), t.write_bytes.unwrap()] {
                    assert!(
                        b >= 20_000_000 && (b as f64) <= secs * 1e9 * 1.5,
                        "{b} in {secs} s"
                    );
                }
            }
            Err(why) => assert!(
                why.starts_with(
                    "perf_event_open of uncore_imc_0 cas_count_read on CPU 0 refused: "
                ),
                "{why}"
            ),
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn this_machine_is_measured_or_says_why_not() {
        let (v, t) = around(|| 7);
        assert_eq!(v, 7);
        match t.source {
            Source::Assumed => {
                let why = t.reason.as_deref().unwrap();
                assert!(
                    why.contains("uncore_imc")
                        || why.contains("amd_df")
                        || why.contains("perf_event_open"),
                    "{why}"
                );
                assert!(label(&t).starts_with("assumed: write-allocate counted, "));
                assert_eq!(t.read_bytes, None);
            }
            Source::Measured => {
                assert!(t.read_bytes.is_some() && t.seconds.unwrap() >= 0.0);
                assert!(!t.pmus.is_empty());
            }
        }
        // This host has no memory-controller PMU.
        if !Path::new(DEVICES).join("uncore_imc_0").exists()
            && !Path::new(DEVICES).join("amd_df").exists()
        {
            assert_eq!(
                t.reason.as_deref(),
                Some("not available on this machine: no uncore_imc, amd_umc or amd_df PMU")
            );
        }
    }

    #[test]
    fn old_json_reads_as_not_recorded() {
        let t = MemoryTraffic::default();
        assert_eq!(t.source, Source::Assumed);
        assert_eq!(t.reason.as_deref(), Some("not recorded"));
        let back: MemoryTraffic =
            serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        assert!(serde_json::to_string(&t)
            .unwrap()
            .contains("\"source\":\"assumed\""));
    }

    /// A two-socket machine's sysfs: packages of CPUs 0-3 and 4-7, nodes
    /// 0 and 1 on the first (split), 2 on the second, 3 CPU-less.
    fn system(tag: &str) -> std::path::PathBuf {
        let d = tree(tag);
        for cpu in 0..8 {
            let list = if cpu < 4 { "0-3\n" } else { "4-7\n" };
            write(
                &d.join(format!("cpu/cpu{cpu}/topology/package_cpus_list")),
                list,
            );
        }
        for (n, cpus) in [(0, "0-1"), (1, "2-3"), (2, "4-7"), (3, "")] {
            write(
                &d.join(format!("node/node{n}/cpulist")),
                &format!("{cpus}\n"),
            );
        }
        d
    }

    #[test]
    fn a_package_has_the_nodes_of_its_cpus_and_cpu_less_nodes_none() {
        let d = system("pkg");
        assert_eq!(package_nodes_at(&d, 0), [0, 1]);
        assert_eq!(package_nodes_at(&d, 3), [0, 1]);
        assert_eq!(package_nodes_at(&d, 5), [2]);
        assert_eq!(package_nodes_at(&d, 9), Vec::<u32>::new(), "no such CPU");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn upi_ports_count_data_flits_as_64_9ths_of_a_byte() {
        let d = tree("upi");
        for (name, ty) in [("uncore_upi_1", 21), ("uncore_upi_0", 20)] {
            let dev = d.join(name);
            write(&dev.join("type"), &format!("{ty}\n"));
            write(&dev.join("cpumask"), "0,28\n");
            write(&dev.join("format/event"), "config:0-7\n");
            write(&dev.join("format/umask"), "config:8-15\n");
        }
        let ev = link_events(&d).unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].device, "uncore_upi_0");
        assert_eq!(ev[0].type_, 20);
        assert_eq!(ev[0].config, 0x0f02);
        assert_eq!(ev[0].cpus, [0, 28]);
        assert_eq!(ev[0].event, "txl_flits.all_data");
        assert!((ev[1].bytes_per_count - 64.0 / 9.0).abs() < 1e-12);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn machines_without_a_known_link_pmu_say_which() {
        for (dev, why) in [
            (
                "uncore_qpi_0",
                "uncore_qpi present, but numalab knows the data events of UPI links only",
            ),
            (
                "amd_df",
                "amd_df present, but numalab knows no data event of its xGMI links",
            ),
            ("software", "no link PMU on this machine (no uncore_upi)"),
        ] {
            let d = tree("nolink");
            std::fs::create_dir_all(d.join(dev)).unwrap();
            assert_eq!(link_events(&d).unwrap_err(), why);
            let _ = std::fs::remove_dir_all(&d);
        }
    }

    /// The system-wide path with a per-package breakdown and links, on
    /// stand-ins whose type is the kernel's software PMU (`cpu-clock`, 1
    /// "byte" a nanosecond) counted on CPUs 0 and 1, each its own
    /// "package" in a made-up sysfs.
    #[test]
    fn packages_and_links_are_counted_on_each_cpu_of_their_cpumask() {
        let Ok(sw) = std::fs::read_to_string(Path::new(DEVICES).join("software/type")) else {
            return;
        };
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return;
        }
        let d = tree("sw-pkg");
        let imc = d.join("uncore_imc_0");
        write(&imc.join("type"), &sw);
        write(&imc.join("cpumask"), "0,1\n");
        write(&imc.join("format/event"), "config:0-7\n");
        for e in ["cas_count_read", "cas_count_write"] {
            write(&imc.join("events").join(e), "event=0x00\n");
            write(&imc.join("events").join(format!("{e}.unit")), "B\n");
        }
        let sys = tree("sw-sys");
        for cpu in 0..2 {
            write(
                &sys.join(format!("cpu/cpu{cpu}/topology/package_cpus_list")),
                &format!("{cpu}\n"),
            );
            write(
                &sys.join(format!("node/node{cpu}/cpulist")),
                &format!("{cpu}\n"),
            );
        }
        // The link stand-in is made here: the UPI encoding is no software
        // event.
        let sw_type: u32 = sw.trim().parse().unwrap();
        let port = ImcEvent {
            device: "uncore_upi_0".into(),
            event: "txl_flits.all_data".into(),
            direction: Direction::Both,
            type_: sw_type,
            config: 0,
            bytes_per_count: UPI_BYTES_PER_DATA_FLIT,
            cpus: vec![0, 1],
        };
        let c = match begin_with_links(imc_events(&d).unwrap(), Ok(vec![port]), &sys) {
            Ok(c) => c,
            Err(why) => {
                assert!(why.starts_with("perf_event_open of uncore_imc_0"), "{why}");
                return;
            }
        };
        std::thread::sleep(std::time::Duration::from_millis(30));
        let t = c.finish();
        assert_eq!(t.source, Source::Measured, "{t:?}");
        let cpus: Vec<i32> = t.per_package.iter().map(|p| p.cpu).collect();
        assert_eq!(cpus, [0, 1]);
        assert_eq!(t.per_package[0].nodes, [0]);
        assert_eq!(t.per_package[1].nodes, [1]);
        let read: u64 = t.per_package.iter().map(|p| p.read_bytes.unwrap()).sum();
        assert_eq!(
            read,
            t.read_bytes.unwrap(),
            "packages add up to the machine"
        );
        for p in &t.per_package {
            // cpu-clock on one CPU counts the ns the interval lasted.
            assert!(p.read_bytes.unwrap() >= 20_000_000, "{p:?}");
            assert_eq!(p.bytes, p.read_bytes.unwrap() + p.write_bytes.unwrap());
            let secs = t.seconds.unwrap();
            assert!((p.gbps - p.bytes as f64 / secs / 1e9).abs() < 1e-9);
        }
        assert_eq!(t.links_reason, None);
        let on: Vec<(i32, &[u32])> = t.links.iter().map(|l| (l.cpu, &l.nodes[..])).collect();
        assert_eq!(on, [(0, &[0u32][..]), (1, &[1u32][..])]);
        for l in &t.links {
            assert_eq!(l.device, "uncore_upi_0");
            // About 30 ms of ns, each 64/9 bytes.
            assert!(l.bytes as f64 >= 20e6 * 64.0 / 9.0, "{l:?}");
        }
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_dir_all(&sys);
    }

    #[test]
    fn pooled_intervals_add_packages_and_links_and_rate_them_over_both() {
        let pkg = |cpu, r, w| PackageTraffic {
            cpu,
            nodes: vec![cpu as u32],
            read_bytes: Some(r),
            write_bytes: Some(w),
            bytes: r + w,
            gbps: 0.0,
        };
        let link = |cpu, b| LinkTraffic {
            device: "uncore_upi_0".into(),
            cpu,
            nodes: vec![cpu as u32],
            bytes: b,
            gbps: 0.0,
        };
        let mut a = MemoryTraffic::measured(vec!["uncore_imc_0".into()], 3_000, 1_000, 1.0)
            .with_breakdown(
                vec![pkg(1, 1_000, 0), pkg(0, 2_000, 1_000)],
                vec![link(0, 900)],
                None,
            );
        assert_eq!(a.per_package[0].cpu, 0, "sorted by CPU");
        assert!((a.per_package[0].gbps - 3e-6).abs() < 1e-15);
        let b = MemoryTraffic::measured(vec!["uncore_imc_0".into()], 1_000, 0, 1.0).with_breakdown(
            vec![pkg(0, 1_000, 0)],
            vec![link(0, 100)],
            None,
        );
        a.pool(b);
        assert_eq!(a.read_bytes, Some(4_000));
        assert_eq!(a.per_package[0].read_bytes, Some(3_000));
        assert_eq!(a.per_package[0].bytes, 4_000);
        assert_eq!(a.per_package[1].bytes, 1_000);
        assert!((a.per_package[0].gbps - 2e-6).abs() < 1e-15, "over 2 s");
        assert_eq!(a.links[0].bytes, 1_000);
        assert!((a.links[0].gbps - 0.5e-6).abs() < 1e-15);
    }
}
