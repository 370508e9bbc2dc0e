//! The environment that configures the preload library: one type, written
//! by numalab ([`LibraryConfig::to_env`]) and read by the library at its
//! start ([`LibraryConfig::from_env`]). The variables' names exist only
//! here ([`var`]).
//!
//! [`LibraryConfig::to_env`] writes every variable, an empty value for
//! what is not set: numalab's choice is then the whole configuration, and
//! a variable left in the caller's environment cannot add to it. The
//! reader takes an empty value as not set, and a value it cannot parse as
//! not set too (the library never stops a program over its own
//! configuration; numalab validates its options before it writes them).

use std::ffi::OsString;

/// The variables' names.
pub mod var {
    /// The records' file (profiling on when set).
    pub const PROFILE_OUT: &str = "NUMALAB_PROFILE_OUT";
    /// The plan in the library's form (`numalab run --plan`, and striped
    /// or weighted policies), one entry a line.
    pub const PLAN: &str = "NUMALAB_PLAN";
    /// The records' file of a placed, unprofiled run.
    pub const PLAN_OUT: &str = "NUMALAB_PLAN_OUT";
    /// Pages armed a second, fixed.
    pub const RATE: &str = "NUMALAB_PROFILE_RATE";
    /// The share of the program's CPU time sampling may take, percent.
    pub const OVERHEAD: &str = "NUMALAB_PROFILE_OVERHEAD";
    /// `off`: no word counts.
    pub const WORDS: &str = "NUMALAB_PROFILE_WORDS";
    /// Watch slots a thread's word counter uses (tests and experiments).
    pub const WORD_SLOTS: &str = "NUMALAB_PROFILE_WORD_SLOTS";
    /// A word-count window's length in ms (tests and experiments).
    pub const WORD_WINDOW_MS: &str = "NUMALAB_PROFILE_WORD_WINDOW_MS";
    /// The tracking threshold in bytes.
    pub const MIN_BYTES: &str = "NUMALAB_PROFILE_MIN_BYTES";
    /// One small allocation drawn per this many bytes (0: off).
    pub const SMALL_EVERY: &str = "NUMALAB_PROFILE_SMALL_EVERY";
    /// Seconds to sample for, from the start.
    pub const DURATION: &str = "NUMALAB_PROFILE_DURATION";
    /// `auto`: refinement on.
    pub const REFINE: &str = "NUMALAB_PROFILE_REFINE";
    /// Refinement's budget in ms.
    pub const REFINE_MS: &str = "NUMALAB_PROFILE_REFINE_MS";
    /// The regions sampled, one term a line (`profile::filter`'s form).
    pub const REGIONS: &str = "NUMALAB_PROFILE_REGIONS";
    /// The regions refined, in the same form.
    pub const REFINE_REGIONS: &str = "NUMALAB_PROFILE_REFINE_REGIONS";
    /// The threads sampled, ordinals separated by commas.
    pub const THREADS: &str = "NUMALAB_PROFILE_THREADS";
    /// The PMU event (`TYPE:CONFIG:CONFIG1:PRECISE_IP:PERIOD`).
    pub const PMU: &str = "NUMALAB_PROFILE_PMU";
    /// `numalab run --pin`: the CPUs threads are pinned to, in order (the
    /// main thread the first, then each thread as it is created), comma
    /// separated; past the end the list starts again.
    pub const PIN: &str = "NUMALAB_PIN";
    /// `--skip`: the created threads left alone, as a hexadecimal mask (bit
    /// k: the k-th thread created, from 0; the main thread is never
    /// skipped).
    pub const PIN_SKIP: &str = "NUMALAB_PIN_SKIP";

    /// Every variable [`super::LibraryConfig`] reads and writes.
    pub const ALL: [&str; 19] = [
        PROFILE_OUT,
        PLAN,
        PLAN_OUT,
        RATE,
        OVERHEAD,
        WORDS,
        WORD_SLOTS,
        WORD_WINDOW_MS,
        MIN_BYTES,
        SMALL_EVERY,
        DURATION,
        REFINE,
        REFINE_MS,
        REGIONS,
        REFINE_REGIONS,
        THREADS,
        PMU,
        PIN,
        PIN_SKIP,
    ];
}

/// What the library does in a program; `Default` is what it does with
/// nothing set: pass every call through.
#[derive(Debug, Clone, PartialEq)]
pub struct LibraryConfig {
    /// Where the records go: profiling is on when set.
    pub records: Option<OsString>,
    /// The plan, in the library's form (placement without a profile when
    /// `records` is not set).
    pub plan: Option<String>,
    /// Where a placed, unprofiled run's records go.
    pub plan_records: Option<OsString>,
    /// Pages armed a second, fixed (else the rate adapts to
    /// `overhead_percent`).
    pub rate: Option<usize>,
    /// The share of the program's CPU time sampling may take, in percent,
    /// in (0, 100); `None`: the library's default.
    pub overhead_percent: Option<f64>,
    /// Word counts (hardware watchpoints) on.
    pub word_counts: bool,
    pub word_slots: Option<usize>,
    pub word_window_ms: Option<usize>,
    /// The tracking threshold in bytes; `None`: the library's default.
    pub min_bytes: Option<usize>,
    /// One small allocation drawn per this many bytes (0: off); `None`:
    /// the library's default.
    pub small_every: Option<usize>,
    /// Seconds to sample for, from the start; `None`: the whole run.
    pub duration_s: Option<f64>,
    pub refine: bool,
    pub refine_ms: Option<u64>,
    pub regions: Option<String>,
    pub refine_regions: Option<String>,
    /// Thread ordinals sampled (0 the main thread); `None`: all.
    pub threads: Option<Vec<u32>>,
    /// The PMU event; `None`: protection faults.
    pub pmu: Option<String>,
    /// The CPUs threads are pinned to, in order ([`var::PIN`]); `None`:
    /// no thread is pinned.
    pub pin: Option<Vec<u32>>,
    /// The created threads left alone (bit k: the k-th created).
    pub pin_skip: u64,
}

impl Default for LibraryConfig {
    fn default() -> LibraryConfig {
        LibraryConfig {
            records: None,
            plan: None,
            plan_records: None,
            rate: None,
            overhead_percent: None,
            word_counts: true,
            word_slots: None,
            word_window_ms: None,
            min_bytes: None,
            small_every: None,
            duration_s: None,
            refine: false,
            refine_ms: None,
            regions: None,
            refine_regions: None,
            threads: None,
            pmu: None,
            pin: None,
            pin_skip: 0,
        }
    }
}

impl LibraryConfig {
    /// Whether the library samples (the records' file is set).
    pub fn profiling(&self) -> bool {
        self.records.is_some()
    }

    /// Whether the library does anything at all: profiles, places memory
    /// or pins threads.
    pub fn active(&self) -> bool {
        self.records.is_some() || self.plan.is_some() || self.pin.is_some()
    }

    /// Whether the created thread of `ordinal` (1 the first created) is
    /// left alone by `--skip`.
    pub fn pin_skips(&self, ordinal: u32) -> bool {
        (1..=64).contains(&ordinal) && (self.pin_skip >> (ordinal - 1)) & 1 == 1
    }

    /// The position in the `--pin` list of the thread of `ordinal` (0 the
    /// main thread), before wrapping at the list's end; `None` where
    /// `--skip` leaves it alone. It follows from the ordinal alone (the
    /// threads created before it, less those skipped), so threads that
    /// start in another order than they were created still get the CPUs
    /// of their creation order.
    pub fn pin_position(&self, ordinal: u32) -> Option<u64> {
        if self.pin_skips(ordinal) {
            return None;
        }
        let below = match ordinal {
            0 => 0,
            o if o > 64 => self.pin_skip,
            o => self.pin_skip & ((1u64 << (o - 1)) - 1),
        };
        Some(u64::from(ordinal) - u64::from(below.count_ones()))
    }

    /// Every variable, in [`var::ALL`]'s order, with an empty value for
    /// what is not set.
    pub fn to_env(&self) -> Vec<(&'static str, OsString)> {
        fn text<T: ToString>(v: &Option<T>) -> OsString {
            v.as_ref()
                .map_or_else(OsString::new, |v| v.to_string().into())
        }
        let path = |v: &Option<OsString>| v.clone().unwrap_or_default();
        let list = |v: &Option<Vec<u32>>| {
            v.as_ref()
                .map(|t| t.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
        };
        let threads = list(&self.threads);
        let pin = list(&self.pin);
        let skip = (self.pin_skip != 0).then(|| format!("{:x}", self.pin_skip));
        vec![
            (var::PROFILE_OUT, path(&self.records)),
            (var::PLAN, text(&self.plan)),
            (var::PLAN_OUT, path(&self.plan_records)),
            (var::RATE, text(&self.rate)),
            (var::OVERHEAD, text(&self.overhead_percent)),
            (var::WORDS, if self.word_counts { "" } else { "off" }.into()),
            (var::WORD_SLOTS, text(&self.word_slots)),
            (var::WORD_WINDOW_MS, text(&self.word_window_ms)),
            (var::MIN_BYTES, text(&self.min_bytes)),
            (var::SMALL_EVERY, text(&self.small_every)),
            (var::DURATION, text(&self.duration_s)),
            (var::REFINE, if self.refine { "auto" } else { "off" }.into()),
            (var::REFINE_MS, text(&self.refine_ms)),
            (var::REGIONS, text(&self.regions)),
            (var::REFINE_REGIONS, text(&self.refine_regions)),
            (var::THREADS, text(&threads)),
            (var::PMU, text(&self.pmu)),
            (var::PIN, text(&pin)),
            (var::PIN_SKIP, text(&skip)),
        ]
    }

    /// The configuration this process's environment gives.
    pub fn from_env() -> LibraryConfig {
        LibraryConfig::from_lookup(|name| std::env::var_os(name))
    }

    /// The configuration `get` gives for each variable's name.
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> LibraryConfig {
        let path = |name: &str| get(name).filter(|v| !v.is_empty());
        let text = |name: &str| {
            get(name)
                .and_then(|v| v.into_string().ok())
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        fn number<T: std::str::FromStr>(t: Option<String>) -> Option<T> {
            t?.parse().ok()
        }
        // Regions and plans keep their lines as written (the terms are
        // one a line); only an all-blank value is no value.
        let lines = |name: &str| {
            get(name)
                .and_then(|v| v.into_string().ok())
                .filter(|v| !v.trim().is_empty())
        };
        let numbers = |name: &str| {
            text(name).map(|t| {
                t.split(',')
                    .filter_map(|w| w.trim().parse::<u32>().ok())
                    .collect::<Vec<u32>>()
            })
        };
        LibraryConfig {
            records: path(var::PROFILE_OUT),
            plan: lines(var::PLAN),
            plan_records: path(var::PLAN_OUT),
            rate: number(text(var::RATE)),
            overhead_percent: number::<f64>(text(var::OVERHEAD))
                .filter(|p| p.is_finite() && *p > 0.0 && *p < 100.0),
            word_counts: text(var::WORDS).as_deref() != Some("off"),
            word_slots: number(text(var::WORD_SLOTS)),
            word_window_ms: number(text(var::WORD_WINDOW_MS)),
            min_bytes: number(text(var::MIN_BYTES)),
            small_every: number(text(var::SMALL_EVERY)),
            duration_s: number::<f64>(text(var::DURATION)).filter(|s| s.is_finite() && *s > 0.0),
            refine: text(var::REFINE).as_deref() == Some("auto"),
            refine_ms: number(text(var::REFINE_MS)),
            regions: lines(var::REGIONS),
            refine_regions: lines(var::REFINE_REGIONS),
            threads: numbers(var::THREADS),
            pmu: text(var::PMU),
            pin: numbers(var::PIN).filter(|l| !l.is_empty()),
            pin_skip: text(var::PIN_SKIP)
                .and_then(|t| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok())
                .unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn read(env: &[(&'static str, OsString)]) -> LibraryConfig {
        let map: BTreeMap<&str, OsString> = env.iter().cloned().collect();
        LibraryConfig::from_lookup(|n| map.get(n).cloned())
    }

    #[test]
    fn a_configuration_round_trips_through_the_environment() {
        let c = LibraryConfig {
            records: Some("/tmp/out/records.bin".into()),
            plan: Some("0 interleave 0,1\n1 bind 2\n".into()),
            plan_records: None,
            rate: Some(20_000),
            overhead_percent: Some(2.5),
            word_counts: false,
            word_slots: Some(2),
            word_window_ms: Some(20),
            min_bytes: Some(65536),
            small_every: Some(0),
            duration_s: Some(1.5),
            refine: true,
            refine_ms: Some(2000),
            regions: Some("heap\nsize>1048576\n".into()),
            refine_regions: None,
            threads: Some(vec![0, 3, 4]),
            pmu: Some("4:461:3:2:4000".into()),
            pin: Some(vec![3, 1, 2]),
            pin_skip: 0x5,
        };
        let env = c.to_env();
        assert!(c.pin_skips(1) && !c.pin_skips(2) && c.pin_skips(3));
        assert!(!c.pin_skips(0), "the main thread is never skipped");
        let at: Vec<_> = (0..6).map(|o| c.pin_position(o)).collect();
        assert_eq!(at, [Some(0), None, Some(1), None, Some(2), Some(3)]);
        assert_eq!(c.pin_position(70), Some(68), "past the mask's 64 threads");
        assert_eq!(env.len(), var::ALL.len());
        assert!(env.iter().map(|(n, _)| *n).eq(var::ALL));
        assert_eq!(read(&env), c);
        assert_eq!(
            read(&LibraryConfig::default().to_env()),
            LibraryConfig::default()
        );
    }

    #[test]
    fn empty_blank_and_unparsable_values_are_not_set() {
        let env = [
            (var::PROFILE_OUT, OsString::new()),
            (var::RATE, "fast".into()),
            (var::OVERHEAD, "100".into()),
            (var::DURATION, "-1".into()),
            (var::REGIONS, "  \n".into()),
            (var::REFINE, " auto ".into()),
            (var::WORDS, "off\n".into()),
            (var::THREADS, "1, x,7".into()),
        ];
        let c = read(&env);
        assert_eq!(c.records, None);
        assert!(!c.profiling() && !c.active());
        assert_eq!(c.rate, None);
        assert_eq!(c.overhead_percent, None, "100% is outside (0, 100)");
        assert_eq!(c.duration_s, None);
        assert_eq!(c.regions, None);
        assert!(c.refine);
        assert!(!c.word_counts);
        assert_eq!(c.threads, Some(vec![1, 7]));
    }
}
