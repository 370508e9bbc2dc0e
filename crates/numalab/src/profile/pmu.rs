//! Memory-sampling PMUs: which one this machine has (Intel PEBS load
//! latency, `mem-loads`; AMD IBS op; Arm SPE), whether the kernel lets
//! this user open it, and how their samples read: the `PERF_RECORD_SAMPLE`
//! layout for the fields a data-address sample carries, the `data_src`
//! word (load or store, where the data came from, local or remote and how
//! many hops), and the ring buffer the kernel writes them to.
//!
//! `numalab profile` reports what it found (`pmu` in profile.json) and,
//! where the event opens and writes data addresses, has the preload
//! library sample through it (`crates/numalab-preload/src/pmu.rs`). No
//! machine numalab is tested on has a `cpu` PMU: the decoding (in the
//! preload's `perf.rs`, shared) is tested here on records built by the
//! tests, and the library's path with a software stand-in.
//!
//! Standard-library only (with libc), so that the preload library can
//! include it as it includes `record`.

use std::path::Path;

/// A memory-sampling event this machine offers.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEvent {
    /// "Intel PEBS load latency (mem-loads)", "AMD IBS op", "Arm SPE".
    pub name: String,
    /// `perf_event_attr.type` and its config words.
    pub kind: u32,
    pub config: u64,
    pub config1: u64,
    /// Samples carry the data address as `PERF_RECORD_SAMPLE` fields
    /// (PEBS, IBS op on Linux 6.1+); SPE writes an AUX trace instead.
    pub sample_records: bool,
    /// `precise_ip` the event needs (PEBS: 2).
    pub precise_ip: u8,
}

/// What [`detect`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    pub event: Option<MemoryEvent>,
    /// Why there is none, or what limits the one found.
    pub reason: String,
}

/// The memory-sampling event of the machine whose event sources are under
/// `devices` (`/sys/bus/event_source/devices`).
pub fn detect(devices: &Path) -> Detection {
    let read = |p: &str| std::fs::read_to_string(devices.join(p)).ok();
    let kind_of =
        |dev: &str| read(&format!("{dev}/type")).and_then(|t| t.trim().parse::<u32>().ok());
    if let (Some(kind), Some(spec)) = (kind_of("cpu"), read("cpu/events/mem-loads")) {
        let format = |field: &str| read(&format!("cpu/format/{field}"));
        match encode_event(spec.trim(), &format) {
            Ok((config, config1)) => {
                return Detection {
                    event: Some(MemoryEvent {
                        name: "Intel PEBS load latency (mem-loads)".into(),
                        kind,
                        config,
                        // The latency threshold in cycles: loads slower than
                        // an L1 hit.
                        config1: if config1 == 0 { 30 } else { config1 },
                        sample_records: true,
                        precise_ip: 2,
                    }),
                    reason: "loads only (stores: mem-stores, not used)".into(),
                };
            }
            Err(e) => {
                return Detection {
                    event: None,
                    reason: format!("cpu/events/mem-loads '{}' cannot be read: {e}", spec.trim()),
                }
            }
        }
    }
    if let Some(kind) = kind_of("ibs_op") {
        return Detection {
            event: Some(MemoryEvent {
                name: "AMD IBS op".into(),
                kind,
                config: 0,
                config1: 0,
                sample_records: true,
                precise_ip: 0,
            }),
            reason: "data addresses and sources need Linux 6.1 or later".into(),
        };
    }
    let spe = std::fs::read_dir(devices)
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("arm_spe"));
    if let Some(dev) = spe {
        let name = dev.file_name().to_string_lossy().into_owned();
        if let Some(kind) = kind_of(&name) {
            return Detection {
                event: Some(MemoryEvent {
                    name: "Arm SPE".into(),
                    kind,
                    config: 0,
                    config1: 0,
                    sample_records: false,
                    precise_ip: 0,
                }),
                reason: "writes an AUX trace, which numalab does not decode".into(),
            };
        }
    }
    let mut sources: Vec<String> = std::fs::read_dir(devices)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .take(64)
        .collect();
    sources.sort();
    Detection {
        event: None,
        reason: if sources.iter().any(|s| s == "cpu") {
            format!(
                "no memory-sampling PMU: the cpu PMU has no mem-loads event, and there is no ibs_op or arm_spe (event sources: {})",
                sources.join(", ")
            )
        } else {
            format!(
                "no cpu PMU (event sources: {})",
                if sources.is_empty() {
                    "none".into()
                } else {
                    sources.join(", ")
                }
            )
        },
    }
}

/// `event=0xcd,umask=0x1,ldlat=3` in config words, each term placed by
/// its sysfs format (`config:0-7`, `config1:0-15`); `format(term)` reads
/// one. Returns (config, config1).
pub fn encode_event(
    spec: &str,
    format: &dyn Fn(&str) -> Option<String>,
) -> Result<(u64, u64), String> {
    let mut words = [0u64; 2];
    for term in spec.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = term.split_once('=').unwrap_or((term, "1"));
        let value = match value.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => value.parse(),
        }
        .map_err(|_| format!("'{term}' has no number"))?;
        let f = format(name).ok_or_else(|| format!("no format for '{name}'"))?;
        let (word, bits) = f
            .trim()
            .split_once(':')
            .ok_or_else(|| format!("format '{}' of '{name}'", f.trim()))?;
        let slot = match word {
            "config" => 0,
            "config1" => 1,
            _ => return Err(format!("'{name}' goes to {word}, not read here")),
        };
        let (lo, hi) = match bits.split_once('-') {
            Some((a, b)) => (a.parse::<u32>(), b.parse::<u32>()),
            None => (bits.parse::<u32>(), bits.parse::<u32>()),
        };
        let (lo, hi) = match (lo, hi) {
            (Ok(l), Ok(h)) if l <= h && h < 64 => (l, h),
            _ => return Err(format!("bits '{bits}' of '{name}'")),
        };
        let width = hi - lo + 1;
        if width < 64 && value >> width != 0 {
            return Err(format!("'{term}' does not fit {width} bits"));
        }
        words[slot] |= value << lo;
    }
    Ok((words[0], words[1]))
}

/// Opens `e` on this thread as numalab would sample with it (user-space
/// accesses, every 1000th event, disabled) and closes it: `Err` with the
/// kernel's refusal.
pub fn probe(e: &MemoryEvent) -> Result<(), String> {
    use super::perf::{
        PerfEventAttr, ATTR_DISABLED, ATTR_EXCLUDE_HV, ATTR_EXCLUDE_KERNEL, ATTR_PRECISE_SHIFT,
    };
    let attr = PerfEventAttr {
        kind: e.kind,
        size: PerfEventAttr::SIZE,
        config: e.config,
        config1: e.config1,
        sample_period: 1000,
        sample_type: SAMPLE_TYPE,
        flags: ATTR_DISABLED
            | ATTR_EXCLUDE_KERNEL
            | ATTR_EXCLUDE_HV
            | (e.precise_ip as u64 & 3) << ATTR_PRECISE_SHIFT,
        ..Default::default()
    };
    match crate::sys::perf::open_event(&attr, 0) {
        // Opened: it can be; dropping the descriptor closes it.
        Ok(_fd) => Ok(()),
        Err(errno) => {
            let err = std::io::Error::from_raw_os_error(errno);
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|t| format!(" (perf_event_paranoid {})", t.trim()))
                .unwrap_or_default();
            Err(format!("the kernel refused to open it: {err}{paranoid}"))
        }
    }
}

// The sample decoding lives beside `perf_event_open` in the file the
// preload library shares, so that its PMU sampler reads samples with the
// same code that is tested here.
pub use super::perf::{
    decode_sample, ring_records, DataSource, Level, Operation, PmuSample, RECORD_SAMPLE,
    SAMPLE_ADDR, SAMPLE_CPU, SAMPLE_DATA_SRC, SAMPLE_IDENTIFIER, SAMPLE_IP, SAMPLE_PERIOD,
    SAMPLE_PHYS_ADDR, SAMPLE_TID, SAMPLE_TIME, SAMPLE_TYPE, SAMPLE_WEIGHT,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_body(fields: &[u64]) -> Vec<u8> {
        fields.iter().flat_map(|f| f.to_le_bytes()).collect()
    }

    #[test]
    fn this_machine_has_no_memory_sampling_pmu_and_says_which_sources_it_has() {
        let devices = Path::new("/sys/bus/event_source/devices");
        let d = detect(devices);
        if devices.join("cpu").exists() || devices.join("ibs_op").exists() {
            numalab_testkit::skip(
                "this machine has a cpu or IBS PMU; the refusal path is tested where it has none",
            );
            return;
        }
        assert_eq!(d.event, None);
        assert!(
            d.reason.starts_with("no cpu PMU (event sources: "),
            "{}",
            d.reason
        );
        assert!(d.reason.contains("software"), "{}", d.reason);
    }

    #[test]
    fn the_kernel_refuses_an_event_type_it_does_not_have() {
        // Type 4 (the x86 cpu PMU's usual number) where no cpu PMU exists,
        // or a type number no PMU has where one does.
        let devices = Path::new("/sys/bus/event_source/devices");
        let kind = if devices.join("cpu").exists() {
            0x7fff_fff0
        } else {
            4
        };
        let e = MemoryEvent {
            name: "test".into(),
            kind,
            config: 0x1cd,
            config1: 3,
            sample_records: true,
            precise_ip: 2,
        };
        let err = probe(&e).unwrap_err();
        assert!(err.starts_with("the kernel refused to open it: "), "{err}");
        assert!(err.contains("(os error"), "{err}");
    }

    #[test]
    fn sysfs_trees_of_each_vendor_are_told_apart() {
        let root = std::env::temp_dir().join(format!("numalab-pmu-{}", std::process::id()));
        let write = |p: &str, t: &str| {
            let f = root.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, t).unwrap();
        };
        // Intel: the cpu PMU with mem-loads and its formats.
        write("intel/cpu/type", "4\n");
        write(
            "intel/cpu/events/mem-loads",
            "event=0xcd,umask=0x1,ldlat=3\n",
        );
        write("intel/cpu/format/event", "config:0-7\n");
        write("intel/cpu/format/umask", "config:8-15\n");
        write("intel/cpu/format/ldlat", "config1:0-15\n");
        let d = detect(&root.join("intel"));
        let e = d.event.unwrap();
        assert_eq!(
            (e.kind, e.config, e.config1, e.precise_ip),
            (4, 0x1cd, 3, 2)
        );
        // AMD: ibs_op, and a cpu PMU without mem-loads.
        write("amd/cpu/type", "4\n");
        write("amd/ibs_op/type", "11\n");
        let e = detect(&root.join("amd")).event.unwrap();
        assert_eq!((e.name.as_str(), e.kind), ("AMD IBS op", 11));
        // Arm: SPE, found but not decodable as sample records.
        write("arm/armv8_pmuv3_0/type", "8\n");
        write("arm/arm_spe_0/type", "9\n");
        let d = detect(&root.join("arm"));
        assert!(!d.event.unwrap().sample_records);
        assert!(d.reason.contains("AUX trace"), "{}", d.reason);
        // A cpu PMU with no memory event.
        write("plain/cpu/type", "4\n");
        write("plain/software/type", "1\n");
        let d = detect(&root.join("plain"));
        assert_eq!(d.event, None);
        assert!(
            d.reason.starts_with("no memory-sampling PMU"),
            "{}",
            d.reason
        );
        assert!(
            d.reason.ends_with("(event sources: cpu, software)"),
            "{}",
            d.reason
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn event_specs_are_placed_by_their_formats() {
        let f = |name: &str| match name {
            "event" => Some("config:0-7".to_string()),
            "umask" => Some("config:8-15".to_string()),
            "ldlat" => Some("config1:0-15".to_string()),
            "any" => Some("config:21".to_string()),
            "frontend" => Some("config2:0-23".to_string()),
            _ => None,
        };
        assert_eq!(
            encode_event("event=0xcd,umask=0x1,ldlat=3", &f),
            Ok((0x1cd, 3))
        );
        assert_eq!(encode_event("event=0x3c,any", &f), Ok((0x3c | 1 << 21, 0)));
        assert!(encode_event("event=0x1cd", &f)
            .unwrap_err()
            .contains("does not fit 8 bits"));
        assert!(encode_event("bogus=1", &f)
            .unwrap_err()
            .contains("no format for 'bogus'"));
        assert!(encode_event("frontend=1", &f)
            .unwrap_err()
            .contains("goes to config2"));
        assert!(encode_event("event=zz", &f)
            .unwrap_err()
            .contains("has no number"));
    }

    #[test]
    fn sample_records_decode_field_by_field() {
        // Identifier, ip, pid/tid, time, addr, cpu/res, period, weight,
        // data_src: a load from remote memory two hops away.
        let src = 0x2 | 0x200 << 5;
        let body = sample_body(&[
            7,
            0x40_1000,
            (812u64 << 32) | 800,
            123_456,
            0x7f00_0000_1008,
            5,
            1000,
            240,
            src,
        ]);
        let s = decode_sample(&body, SAMPLE_TYPE).unwrap();
        assert_eq!(
            (s.ip, s.pid, s.tid, s.time_ns, s.addr, s.cpu, s.period, s.weight),
            (0x40_1000, 800, 812, 123_456, 0x7f00_0000_1008, 5, 1000, 240)
        );
        assert_eq!(
            s.source,
            DataSource {
                op: Operation::Load,
                level: Level::RemoteRam { hops: Some(2) }
            }
        );
        assert_eq!(s.source.remote(), Some(true));
        // Short, or asking for fields not read: nothing.
        assert_eq!(decode_sample(&body[..64], SAMPLE_TYPE), None);
        assert_eq!(decode_sample(&body, SAMPLE_TYPE | 1 << 5), None);
        // Without the identifier, the fields shift by one.
        let s = decode_sample(&body[8..], SAMPLE_TYPE & !SAMPLE_IDENTIFIER).unwrap();
        assert_eq!(s.addr, 0x7f00_0000_1008);
    }

    #[test]
    fn data_sources_read_new_and_old_encodings() {
        let new = |op: u64, lvl_num: u64, remote: u64, hops: u64| {
            op | lvl_num << 33 | remote << 37 | hops << 43
        };
        let d = DataSource::decode(new(0x4, 0xd, 1, 2));
        assert_eq!(
            (d.op, d.level),
            (Operation::Store, Level::RemoteRam { hops: Some(1) })
        );
        assert_eq!(
            DataSource::decode(new(0x2, 0xd, 0, 0)).level,
            Level::LocalRam
        );
        assert_eq!(
            DataSource::decode(new(0x2, 0x3, 1, 3)).level,
            Level::RemoteCache { hops: Some(2) }
        );
        assert_eq!(DataSource::decode(new(0x2, 0x1, 0, 0)).level, Level::L1);
        assert_eq!(
            DataSource::decode(new(0x2, 0xc, 0, 0)).level,
            Level::FillBuffer
        );
        // Old mem_lvl bits: L3 hit, local RAM, remote RAM one hop.
        assert_eq!(DataSource::decode(0x2 | 0x40 << 5).level, Level::L3);
        assert_eq!(DataSource::decode(0x2 | 0x80 << 5).level, Level::LocalRam);
        let d = DataSource::decode(0x2 | 0x100 << 5);
        assert_eq!(d.level, Level::RemoteRam { hops: Some(1) });
        let none = DataSource::decode(0x1);
        assert_eq!(
            (none.op, none.level, none.remote()),
            (Operation::Other, Level::Unknown, None)
        );
    }

    #[test]
    fn ring_records_join_a_record_that_wraps() {
        // A 64-byte ring: records of 24 and 32 bytes from offset 48, the
        // first wrapping round the end.
        let mut data = vec![0u8; 64];
        let mut put = |at: usize, bytes: &[u8]| {
            for (i, b) in bytes.iter().enumerate() {
                data[(at + i) % 64] = *b;
            }
        };
        let header = |kind: u32, len: u16| {
            let mut h = kind.to_le_bytes().to_vec();
            h.extend(0u16.to_le_bytes());
            h.extend(len.to_le_bytes());
            h
        };
        put(48, &header(9, 24));
        put(56, &[1; 16]);
        put(72, &header(2, 32));
        put(80, &[2; 24]);
        let r = ring_records(&data, 48, 48 + 56);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].0, r[0].1.clone()), (9, vec![1; 16]));
        assert_eq!((r[1].0, r[1].1.clone()), (2, vec![2; 24]));
        // A record cut by the head is left for later; a bad ring reads none.
        assert_eq!(ring_records(&data, 48, 48 + 40).len(), 1);
        assert!(ring_records(&data[..48], 0, 8).is_empty());
        assert!(ring_records(&data, 10, 5).is_empty());
    }
}
