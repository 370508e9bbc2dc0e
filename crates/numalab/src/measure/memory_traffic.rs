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
//! reason.
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
                *self = if self.read_bytes.is_some() && later.read_bytes.is_some() {
                    MemoryTraffic::measured(
                        pmus,
                        sum(self.read_bytes, later.read_bytes),
                        sum(self.write_bytes, later.write_bytes),
                        seconds,
                    )
                } else {
                    MemoryTraffic::measured_total(pmus, sum(self.bytes, later.bytes), seconds)
                };
            }
            (Source::Measured, Source::Assumed) => *self = later,
            (Source::Assumed, _) => {}
        }
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

/// Memory-controller events counting since [`begin`].
pub struct Counting {
    /// Each opened (event index, descriptor, reading at the start).
    fds: Vec<(usize, OwnedFd, Reading)>,
    events: Vec<ImcEvent>,
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

/// Starts counting memory traffic with the PMUs under `devices`; the
/// reason bytes must be assumed when it cannot.
pub fn begin_at(devices: &Path) -> Result<Counting, String> {
    begin_with(imc_events(devices)?)
}

/// Starts counting `events` (system-wide, on each of their CPUs).
pub fn begin_with(events: Vec<ImcEvent>) -> Result<Counting, String> {
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
            fds.push((i, fd, at));
        }
    }
    Ok(Counting {
        fds,
        events,
        start: Instant::now(),
    })
}

/// [`begin_at`] with the machine's PMUs.
pub fn begin() -> Result<Counting, String> {
    begin_at(Path::new(DEVICES))
}

impl Counting {
    /// Reads the counts and gives the traffic since [`begin`].
    pub fn finish(self) -> MemoryTraffic {
        let seconds = self.start.elapsed().as_secs_f64();
        let mut counts = vec![0u64; self.events.len()];
        for (i, fd, at) in &self.fds {
            match read_count(fd).and_then(|now| scaled_delta(*at, now)) {
                Ok(c) => counts[*i] = counts[*i].saturating_add(c),
                Err(e) => return MemoryTraffic::assumed(e),
            }
        }
        let (read, write, both) = bytes_of(&self.events, &counts);
        let mut pmus: Vec<String> = self.events.iter().map(|e| e.device.clone()).collect();
        pmus.dedup();
        if self.events.iter().any(|e| e.direction == Direction::Both) {
            MemoryTraffic::measured_total(pmus, both + read + write, seconds)
        } else {
            MemoryTraffic::measured(pmus, read, write, seconds)
        }
    }
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
}
