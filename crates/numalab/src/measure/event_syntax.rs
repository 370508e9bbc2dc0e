//! perf's spellings of events beyond the named ones, for `numalab run -e`
//! (docs/counters.md):
//!
//! - raw CPU events, `rNNNN`: `PERF_TYPE_RAW` with config 0xNNNN (up to 16
//!   hexadecimal digits), as `perf stat -e r01c2` takes them;
//! - events of a named PMU, `PMU/TERMS/`: `cpu/event=0xc0,umask=0x01/`,
//!   `uncore_imc_0/cas_count_read/`, `msr/tsc/`, `software/config=2/`.
//!   The PMU's own description under `/sys/bus/event_source/devices/PMU`
//!   encodes them: `type`, `format/FIELD` (which bits of config, config1 or
//!   config2 a field fills: `config:0-7`, `config:0-7,32-35`) and
//!   `events/ALIAS` (a named event's terms, `event=0x04,umask=0x03`).
//!
//! A PMU this machine does not have is not an error: the event is reported
//! `<not supported>` with the PMUs that are here, as a named hardware event
//! is on a machine without a CPU PMU, so one command line serves many
//! machines. A malformed spelling, an unknown field or a value wider than
//! its field is refused with one line naming the valid choices.

use super::counters::{Event, Kind};
use crate::sys::perf::TYPE_SOFTWARE;
use std::path::Path;

/// Where the kernel lists its PMUs.
pub const DEVICES: &str = "/sys/bus/event_source/devices";

/// `PERF_TYPE_RAW`.
const TYPE_RAW: u32 = 4;
/// The longest spelling of one event taken.
const MAX_TEXT: usize = 256;
/// The most terms between a PMU event's slashes (an alias's included).
const MAX_TERMS: usize = 16;
/// The most names an error lists before "...".
const MAX_LISTED: usize = 24;

/// Whether `text` is spelled as a raw or PMU event (and so is parsed by
/// [`parse`], not looked up by name).
pub fn is_raw_spelling(text: &str) -> bool {
    text.contains('/') || raw_config(text).is_some()
}

/// Splits a list of events on the commas that are not inside a PMU
/// event's slashes: `cpu/event=1,umask=2/,cycles` is two events.
pub fn split_list(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut slashes) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '/' => slashes += 1,
            ',' if slashes % 2 == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
                slashes = 0;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// The config of a raw event `rNNNN`, when `text` is one.
fn raw_config(text: &str) -> Option<u64> {
    let hex = text.strip_prefix('r')?;
    if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// The event `text` spells, with the PMUs described under `devices`
/// ([`DEVICES`]). The event lives as long as the process: an event list is
/// parsed once per command and is bounded (256 characters an event, and the list's
/// own bound), so the few bytes are leaked rather than every counter type
/// made to own its names.
pub fn parse(devices: &Path, text: &str) -> Result<&'static Event, String> {
    let text = text.trim();
    if text.len() > MAX_TEXT {
        return Err(format!(
            "the event '{}...' is longer than {MAX_TEXT} characters",
            text.chars().take(40).collect::<String>()
        ));
    }
    let spec = match raw_config(text) {
        Some(config) => Spec {
            kind: Kind::Hardware,
            type_: TYPE_RAW,
            config: [config, 0, 0],
            missing: None,
        },
        None => pmu_event(devices, text)?,
    };
    Ok(Box::leak(Box::new(Event {
        name: Box::leak(text.to_string().into_boxed_str()),
        kind: spec.kind,
        type_: spec.type_,
        config: spec.config[0],
        config1: spec.config[1],
        config2: spec.config[2],
        unit: "",
        missing: spec.missing.map(|m| &*Box::leak(m.into_boxed_str())),
    })))
}

/// What an event's spelling encodes.
struct Spec {
    kind: Kind,
    type_: u32,
    /// config, config1, config2.
    config: [u64; 3],
    /// Why it cannot be counted here, when its PMU is missing.
    missing: Option<String>,
}

/// `PMU/TERMS/`.
fn pmu_event(devices: &Path, text: &str) -> Result<Spec, String> {
    let shape = || {
        format!(
            "'{text}' is no event: write a name, a raw event rNNNN (hexadecimal) or PMU/TERMS/ (cpu/event=0xc0,umask=0x01/)"
        )
    };
    let (pmu, rest) = text.split_once('/').ok_or_else(shape)?;
    let name_ok = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
    };
    if !name_ok(pmu) {
        return Err(format!(
            "'{pmu}' in '{text}' is no PMU name (letters, digits, '_', '-' and '.')"
        ));
    }
    let (body, modifiers) = rest.rsplit_once('/').ok_or_else(shape)?;
    if body.contains('/') {
        return Err(shape());
    }
    if !modifiers.is_empty() {
        return Err(format!(
            "'{text}': modifiers after the event (':{modifiers}', '/{modifiers}') are not taken; numalab counts user and kernel space, user space only where the kernel refuses kernel mode"
        ));
    }
    let dir = devices.join(pmu);
    let Ok(type_text) = std::fs::read_to_string(dir.join("type")) else {
        let here = listing(devices, |p| p.join("type").is_file());
        return Ok(Spec {
            kind: Kind::Hardware,
            type_: u32::MAX,
            config: [0; 3],
            missing: Some(format!(
                "not available on this machine: no PMU named '{pmu}' (PMUs here: {})",
                if here.is_empty() { "none".into() } else { here }
            )),
        });
    };
    let type_: u32 = type_text.trim().parse().map_err(|_| {
        format!(
            "{}/type reads '{}', no PMU type",
            dir.display(),
            type_text.trim()
        )
    })?;
    let mut config = [0u64; 3];
    let mut terms: Vec<(String, Option<String>)> = Vec::new();
    for term in body.split(',').filter(|t| !t.trim().is_empty()) {
        let (key, value) = match term.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (term.trim(), None),
        };
        // A bare word that is no format field names an alias: its terms.
        if value.is_none() && !dir.join("format").join(key).is_file() && name_ok(key) {
            if let Ok(alias) = std::fs::read_to_string(dir.join("events").join(key)) {
                for t in alias.trim().split(',').filter(|t| !t.trim().is_empty()) {
                    let (k, v) = t.split_once('=').unwrap_or((t, "1"));
                    terms.push((k.trim().to_string(), Some(v.trim().to_string())));
                }
                continue;
            }
        }
        terms.push((key.to_string(), value));
    }
    if terms.len() > MAX_TERMS {
        return Err(format!("'{text}' has more than {MAX_TERMS} terms"));
    }
    for (key, value) in &terms {
        let v = match value {
            Some(v) => number(v).ok_or_else(|| {
                format!("'{key}={v}' in '{text}': the value is no number (0x1f or 31)")
            })?,
            None => 1,
        };
        let direct = ["config", "config1", "config2"]
            .iter()
            .position(|c| c == key);
        if let Some(i) = direct {
            config[i] = v;
            continue;
        }
        let format = name_ok(key)
            .then(|| std::fs::read_to_string(dir.join("format").join(key)).ok())
            .flatten();
        let Some(format) = format else {
            let fields = listing(&dir.join("format"), |_| true);
            let mut valid = vec!["config", "config1", "config2"];
            valid.extend(fields.split(", ").filter(|f| !f.is_empty()));
            let events = listing(&dir.join("events"), |p| {
                p.extension().is_none_or(|e| e != "scale" && e != "unit")
            });
            return Err(format!(
                "'{key}' is no field or event of PMU '{pmu}'; fields: {}{}",
                valid.join(", "),
                if events.is_empty() {
                    String::new()
                } else {
                    format!("; events: {events}")
                }
            ));
        };
        let (word, bits) = place(format.trim(), v)
            .map_err(|e| format!("'{key}' in '{text}': {e} (format {})", format.trim()))?;
        config[word] |= bits;
    }
    Ok(Spec {
        kind: if type_ == TYPE_SOFTWARE {
            Kind::Software
        } else {
            Kind::Hardware
        },
        type_,
        config,
        missing: None,
    })
}

/// A value in perf's terms: hexadecimal with 0x, else decimal.
fn number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Places `value` as a format file says (`config:0-7`, `config1:0-63`,
/// `config:0-7,32-35`: the value's low bits fill the first range, the
/// next bits the next): which config word (0, 1, 2) and its bits.
fn place(format: &str, value: u64) -> Result<(usize, u64), String> {
    let (target, ranges) = format
        .split_once(':')
        .ok_or_else(|| "the PMU's format file is not TARGET:BITS".to_string())?;
    let word = match target {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        t => return Err(format!("the field fills '{t}', which numalab does not set")),
    };
    let (mut bits, mut used) = (0u64, 0u32);
    for range in ranges.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let (Ok(lo), Ok(hi)) = (lo.trim().parse::<u32>(), hi.trim().parse::<u32>()) else {
            return Err(format!("the bit range '{range}' is not LOW-HIGH"));
        };
        if lo > hi || hi > 63 {
            return Err(format!("the bit range '{range}' is not within 0-63"));
        }
        let width = hi - lo + 1;
        // In 128 bits: a 64-bit range and shifts past the value are plain.
        let part = (u128::from(value) >> used.min(127)) & ((1u128 << width) - 1);
        bits |= (part as u64) << lo;
        used = (used + width).min(127);
    }
    if u128::from(value) >> used != 0 {
        return Err(format!("{value:#x} does not fit its {used} bits"));
    }
    Ok((word, bits))
}

/// The names in `dir` that `keep` accepts, sorted, comma-separated, at
/// most [`MAX_LISTED`] of them.
fn listing(dir: &Path, keep: impl Fn(&Path) -> bool) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| keep(&e.path()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let more = names.len().saturating_sub(MAX_LISTED);
    names.truncate(MAX_LISTED);
    if more > 0 {
        names.push(format!("... ({more} more)"));
    }
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A scratch folder, removed when dropped.
    struct Scratch(std::path::PathBuf);
    impl Scratch {
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// A sysfs-like PMU folder (one per test: they run in parallel): an
    /// Intel core PMU (`cpu`), an uncore memory controller with an alias,
    /// and the software PMU.
    fn devices(test: &str) -> Scratch {
        let d = Scratch(std::env::temp_dir().join(format!(
            "numalab-event-syntax-{}-{test}",
            std::process::id()
        )));
        let pmu = |name: &str, type_: u32, formats: &[(&str, &str)], events: &[(&str, &str)]| {
            let p = d.path().join(name);
            fs::create_dir_all(p.join("format")).unwrap();
            fs::create_dir_all(p.join("events")).unwrap();
            fs::write(p.join("type"), format!("{type_}\n")).unwrap();
            for (f, spec) in formats {
                fs::write(p.join("format").join(f), format!("{spec}\n")).unwrap();
            }
            for (e, terms) in events {
                fs::write(p.join("events").join(e), format!("{terms}\n")).unwrap();
            }
        };
        pmu(
            "cpu",
            4,
            &[
                ("event", "config:0-7"),
                ("umask", "config:8-15"),
                ("any", "config:21"),
                ("cmask", "config:24-31"),
                ("ldlat", "config1:0-15"),
                ("split", "config:0-7,32-35"),
            ],
            &[("mem-loads", "event=0xcd,umask=0x1,ldlat=3")],
        );
        pmu(
            "uncore_imc_0",
            17,
            &[("event", "config:0-7"), ("umask", "config:8-15")],
            &[
                ("cas_count_read", "event=0x04,umask=0x03"),
                ("cas_count_read.scale", "6.103515625e-5"),
                ("cas_count_read.unit", "MiB"),
            ],
        );
        pmu("software", 1, &[], &[]);
        d
    }

    #[test]
    fn raw_events_are_perf_type_raw_with_their_hex_config() {
        let d = devices("raw");
        let e = parse(d.path(), "r01c2").unwrap();
        assert_eq!((e.type_, e.config, e.kind), (4, 0x01c2, Kind::Hardware));
        assert_eq!(e.name, "r01c2");
        assert!(e.missing.is_none());
        assert!(is_raw_spelling("r1") && is_raw_spelling("cpu/event=1/"));
        // Not hexadecimal, too long or bare: no raw event.
        for not_raw in ["r", "rxyz", "r11111111111111111", "cycles"] {
            assert!(!is_raw_spelling(not_raw), "{not_raw}");
        }
    }

    #[test]
    fn pmu_fields_fill_the_bits_their_format_files_name() {
        let d = devices("fields");
        let e = parse(d.path(), "cpu/event=0xc0,umask=0x01/").unwrap();
        assert_eq!((e.type_, e.config), (4, 0x01c0));
        // A bare field is 1; cmask in its own byte; config1 fields.
        let e = parse(d.path(), "cpu/event=0x3c,any,cmask=2,ldlat=30/").unwrap();
        assert_eq!(e.config, 0x3c | 1 << 21 | 2 << 24);
        assert_eq!(e.config1, 30);
        // Split ranges: the value's low 8 bits at 0-7, the next at 32-35.
        let e = parse(d.path(), "cpu/split=0x1ff/").unwrap();
        assert_eq!(e.config, 0xff | 1 << 32);
        // Generic terms set whole words.
        let e = parse(d.path(), "cpu/config=0x1234,config2=7/").unwrap();
        assert_eq!((e.config, e.config2), (0x1234, 7));
        let e = parse(d.path(), "software/config=2/").unwrap();
        assert_eq!((e.type_, e.config, e.kind), (1, 2, Kind::Software));
    }

    #[test]
    fn aliases_expand_to_their_terms() {
        let d = devices("aliases");
        let e = parse(d.path(), "uncore_imc_0/cas_count_read/").unwrap();
        assert_eq!((e.type_, e.config), (17, 0x0304));
        let e = parse(d.path(), "cpu/mem-loads/").unwrap();
        assert_eq!((e.config, e.config1), (0x01cd, 3));
    }

    #[test]
    fn a_missing_pmu_is_reported_unavailable_with_the_pmus_here() {
        let d = devices("missing");
        let e = parse(d.path(), "amd_df/event=0x07/").unwrap();
        assert_eq!(
            e.missing,
            Some("not available on this machine: no PMU named 'amd_df' (PMUs here: cpu, software, uncore_imc_0)")
        );
    }

    #[test]
    fn bad_spellings_are_one_line_naming_the_choices() {
        let d = devices("bad");
        let err = |t: &str| parse(d.path(), t).unwrap_err();
        assert_eq!(
            err("cpu/evnt=1/"),
            "'evnt' is no field or event of PMU 'cpu'; fields: config, config1, config2, any, cmask, event, ldlat, split, umask; events: mem-loads"
        );
        assert!(
            err("cpu/event=0x1ff/").contains("0x1ff does not fit its 8 bits (format config:0-7)")
        );
        assert!(err("cpu/event=zz/").contains("the value is no number"));
        assert!(err("cpu/event=1/u").contains("modifiers after the event"));
        assert!(err("../cpu/event=1/").contains("no PMU name"));
        assert!(err("cpu/event=1").starts_with("'cpu/event=1' is no event"));
        assert!(err(&format!("cpu/{}/", "any,".repeat(100))).contains("longer than 256"));
        assert!(err(&format!("cpu/{}/", "any,".repeat(20))).contains("more than 16 terms"));
        for e in ["cpu/evnt=1/", "cpu/event=0x1ff/", "../cpu/event=1/"] {
            assert!(!err(e).contains('\n'), "{e}");
        }
    }

    #[test]
    fn lists_split_outside_slashes_only() {
        assert_eq!(
            split_list("cycles,cpu/event=1,umask=2/,r01c2,msr/tsc/"),
            ["cycles", "cpu/event=1,umask=2/", "r01c2", "msr/tsc/"]
        );
        assert_eq!(split_list("a,,b"), ["a", "", "b"]);
    }
}
