//! Options shared by the commands, parsed once here: typed value parsers
//! (each error one line naming the option and the valid choices, each
//! choice listed by `--help`), the measurement options, and the helpers
//! that read CPUs, thread layouts and sizes against the machine.

use crate::output::CliError;
use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use numalab::measure::harness::default_buffer_bytes;
use numalab::measure::kernels::BandwidthKernel;
use numalab::measure::stats::StopRule;
use numalab::placement::{ArrayPolicies, ListMeaning, MemoryPolicy, ResourceSet, ThreadPolicy};
use numalab::text::format::excerpt;
use numalab::text::parse;
use numalab::{IdSet, Machine};
use numalab_report::views::Units;
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

/// Reads an option's text: `(option name, text)` to the value or the reason.
type Check<T> = dyn Fn(&str, &str) -> Result<T, String> + Send + Sync;

/// A typed option value: `check(option, text)` gives the value, or why the
/// text is refused in one line that names the option (`--budget 0 must be
/// at least 1 second`). `names`, when given, are the choices `--help` lists.
#[derive(Clone)]
pub struct Typed<T> {
    check: Arc<Check<T>>,
    names: Option<&'static [&'static str]>,
}

impl<T> Typed<T> {
    pub fn new(check: impl Fn(&str, &str) -> Result<T, String> + Send + Sync + 'static) -> Self {
        Typed {
            check: Arc::new(check),
            names: None,
        }
    }
}

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Typed<T> {
    type Value = T;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let opt = arg
            .and_then(|a| a.get_long())
            .map(|l| format!("--{l}"))
            .unwrap_or_else(|| "value".into());
        let text = value.to_str().ok_or_else(|| {
            clap::Error::raw(ErrorKind::InvalidUtf8, format!("{opt} is not valid UTF-8"))
        })?;
        (self.check)(&opt, text).map_err(|e| clap::Error::raw(ErrorKind::ValueValidation, e))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        let names = self.names?;
        Some(Box::new(names.iter().map(|n| PossibleValue::new(*n))))
    }
}

/// A value read by a parse function of the engine (`BandwidthKernel::parse`,
/// `Isa::parse`...): its error is kept, prefixed with the option, and
/// `names` are the choices `--help` lists.
pub fn choice<T: 'static>(
    names: &'static [&'static str],
    parse: fn(&str) -> Result<T, String>,
) -> Typed<T> {
    Typed {
        names: Some(names),
        ..Typed::new(move |opt, t| parse(t.trim()).map_err(|e| format!("{opt}: {e}")))
    }
}

/// A comma-separated list of values, without repeats, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct List<T>(pub Vec<T>);

/// Reads a comma-separated list with `parse` for each item; an empty item
/// is refused, repeats are dropped.
pub fn read_list<T: PartialEq>(
    text: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<List<T>, String> {
    let mut out: Vec<T> = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("'{text}' has an empty entry"));
        }
        let v = parse(item)?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    Ok(List(out))
}

/// A comma-separated list of choices among `names` (listed by `--help`),
/// each read by `parse`.
pub fn choice_list<T: PartialEq + Clone + Send + Sync + 'static>(
    names: &'static [&'static str],
    parse: fn(&str) -> Result<T, String>,
) -> Typed<List<T>> {
    Typed {
        names: Some(names),
        ..Typed::new(move |opt, t| read_list(t, parse).map_err(|e| format!("{opt}: {e}")))
    }
}

/// `--counters=LIST`: event names (docs/counters.md), or all.
pub fn counter_list() -> Typed<List<&'static numalab::measure::counters::Event>> {
    Typed::new(|opt, t| {
        numalab::measure::counters::parse_list(t)
            .map(List)
            .map_err(|e| format!("{opt}: {e}"))
    })
}

/// A value read by `parse`, its error prefixed with the option (for
/// values that are not a choice among names).
pub fn parsed<T: 'static>(parse: fn(&str) -> Result<T, String>) -> Typed<T> {
    Typed::new(move |opt, t| parse(t).map_err(|e| format!("{opt} {e}")))
}

/// A whole number from `min` to `max`: `--OPT 'TEXT' is not a whole number
/// from MIN to MAX`.
pub fn whole(min: usize, max: usize) -> Typed<usize> {
    counted(min, max, None)
}

/// A thread count from 1 to `max` (measuring options: [`MAX_THREADS`]): `--OPT 'TEXT'
/// is not a thread count (a whole number from 1 to MAX)`.
pub fn thread_count(max: usize) -> Typed<usize> {
    counted(1, max, Some("a thread count"))
}

/// Most threads a thread-count option accepts (see
/// `numalab::placement::thread_policy::MAX_THREADS`).
pub const MAX_THREADS: usize = numalab::placement::thread_policy::MAX_THREADS;

fn counted(min: usize, max: usize, what: Option<&'static str>) -> Typed<usize> {
    Typed::new(move |opt, t| {
        t.trim()
            .parse::<usize>()
            .ok()
            .filter(|v| (min..=max).contains(v))
            .ok_or_else(|| {
                let range = format!("a whole number from {min} to {max}");
                let t = excerpt(t, 40);
                match what {
                    Some(w) => format!("{opt} '{t}' is not {w} ({range})"),
                    None => format!("{opt} '{t}' is not {range}"),
                }
            })
    })
}

/// A number of seconds (`60`, `0.5`, `2s`) from `min` (at least 0.001,
/// [`parse::MIN_SECONDS`]) to 604800, one week ([`parse::MAX_SECONDS`]):
/// budgets and durations, so every value converts to a `Duration` and a
/// deadline without overflow.
pub fn seconds(min: f64) -> Typed<f64> {
    Typed::new(move |opt, t| {
        // Below a minimum of a second or more, say so rather than "positive".
        let number = t.trim().trim_end_matches('s').trim().parse::<f64>();
        if let Ok(x) = number {
            if min > parse::MIN_SECONDS && x.is_finite() && x < min {
                return Err(format!(
                    "{opt} {} must be at least {min} second{} and at most 604800 (one week)",
                    excerpt(t, 40),
                    if min == 1.0 { "" } else { "s" }
                ));
            }
        }
        parse::seconds(t).map_err(|e| format!("{opt} {e}"))
    })
}

/// A size (`64M`, `1G`, binary units) from `min` bytes to 128 TiB
/// ([`parse::MAX_SIZE`]): `--OPT TEXT is too small: at least MIN (why)`.
pub fn size(min: u64, why: &'static str) -> Typed<usize> {
    Typed::new(move |opt, t| {
        let v = parse::size(t).map_err(|e| format!("{opt}: {e}"))?;
        if v < min {
            return Err(format!(
                "{opt} {} is too small: at least {} ({why})",
                excerpt(t, 40),
                numalab::text::format::bytes(min)
            ));
        }
        usize::try_from(v).map_err(|_| format!("{opt} {} is too large", excerpt(t, 40)))
    })
}

/// The usual buffer size option: at least one page.
pub fn buffer_size() -> Typed<usize> {
    size(4096, "one page per buffer")
}

/// A percentage above 0 and below 100 (`1`, `0.5%`), as a fraction.
pub fn percent() -> Typed<f64> {
    Typed::new(
        |opt, t| match t.trim().trim_end_matches('%').trim().parse::<f64>() {
            Ok(v) if v > 0.0 && v < 100.0 => Ok(v / 100.0),
            Ok(_) => Err(format!(
                "{opt} {} is out of range: give a percentage above 0 and below 100, e.g. 1 or 0.5",
                excerpt(t, 40)
            )),
            Err(_) => Err(format!(
                "{opt} '{}' is not a percentage like 1 or 0.5 (above 0, below 100)",
                excerpt(t, 40)
            )),
        },
    )
}

/// How a measuring command prints its result.
#[derive(clap::Args, Debug, Clone)]
pub struct Output {
    /// Bandwidth units of the text: gb (1e9 B/s, as STREAM and likwid) or gib (2^30 B/s).
    #[arg(long, value_name = "UNITS", default_value = "gb", value_parser = choice(UNITS, Units::parse))]
    pub units: Units,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One buffer and the one pinned thread that uses it: the same three
/// options, words and defaults in `apexmap`, `bench latency` and
/// `loaded-latency`.
#[derive(clap::Args, Debug, Clone)]
pub struct PinnedBuffer {
    /// CPU of the pinned thread (default: the first allowed CPU).
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<String>,
    /// Memory policy of the buffer (see numalab place --help; CPU-less nodes welcome: bind:4).
    #[arg(long = "mem", value_name = "POLICY", default_value = "local")]
    pub mem: String,
    /// Buffer size, 4K to 128T (default: 4x the last-level cache, at least 64 MiB).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = buffer_size())]
    pub size: Option<usize>,
}

/// How a command lays its threads out over its CPUs: the same option, the
/// same words and the same help in every command that places threads
/// (`set`, `bench bandwidth`, `policies`). A command whose default differs
/// says so with `#[command(mut_arg("layout", ...))]`.
#[derive(clap::Args, Debug, Clone)]
pub struct ThreadLayout {
    /// How threads are laid out over the CPUs: compact (fill a node first) or scatter (one per node in turn); where the possible values say so, an explicit CPU list (0,2,4-5).
    #[arg(long, value_name = "LAYOUT", default_value = "compact", value_parser = choice(&["compact", "scatter", "CPU list"], ThreadPolicy::parse))]
    pub layout: ThreadPolicy,
}

/// How long and how precisely to measure.
#[derive(clap::Args, Debug, Clone)]
pub struct StatOptions {
    /// Stop when the median's 95% confidence interval is within this many percent (above 0, below 100).
    #[arg(
        long,
        value_name = "PERCENT",
        default_value = "1",
        allow_hyphen_values = true,
        value_parser = percent()
    )]
    pub target_ci: f64,
    /// Time budget of the whole command, in seconds (0.001 to 604800, one week): shared equally among its measurements.
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = seconds(0.0), conflicts_with = "budget_each")]
    pub budget: Option<f64>,
    /// Time budget of each measurement, in seconds (0.001 to 604800, one week).
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true, value_parser = seconds(0.0))]
    pub budget_each: Option<f64>,
    /// Repetitions at least (after warm-up), 1 to 1000000.
    #[arg(long, value_name = "N", default_value = "5", allow_hyphen_values = true, value_parser = whole(1, 1_000_000))]
    pub min_reps: usize,
    /// Repetitions at most, 1 to 1000000.
    #[arg(long, value_name = "N", default_value = "1000", allow_hyphen_values = true, value_parser = whole(1, 1_000_000))]
    pub max_reps: usize,
    /// Warm-up repetitions, not counted, 0 to 1000000.
    #[arg(long, value_name = "N", default_value = "1", allow_hyphen_values = true, value_parser = whole(0, 1_000_000))]
    pub warmup: usize,
    /// Exactly N repetitions after warm-up, 1 to 1000000 (sets --min-reps and --max-reps to N).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = whole(1, 1_000_000), conflicts_with_all = ["min_reps", "max_reps"])]
    pub reps: Option<usize>,
}

impl StatOptions {
    /// Whether the user gave a budget (--budget or --budget-each).
    pub fn budget_given(&self) -> bool {
        self.budget.is_some() || self.budget_each.is_some()
    }

    /// The stop rule of each of a command's `measurements`: --budget-each
    /// seconds, or --budget shared equally among them, or `default_each`.
    pub fn rule(&self, default_each: f64, measurements: usize) -> Result<StopRule, CliError> {
        let (min_reps, max_reps) = match self.reps {
            Some(n) => (n, n),
            None => (self.min_reps, self.max_reps),
        };
        if max_reps < min_reps {
            return Err(CliError::usage(format!(
                "--min-reps {} and --max-reps {}: need 1 <= min-reps <= max-reps",
                self.min_reps, self.max_reps
            )));
        }
        Ok(StopRule {
            warmup: self.warmup,
            min_reps,
            max_reps,
            target_rel_ci: self.target_ci,
            // `seconds` bounds --budget; the clamp keeps a caller's default
            // inside the same range.
            budget: budget_each(self.budget, self.budget_each, default_each, measurements),
        })
    }
}

/// The time of each of `measurements`: `each` (--budget-each) when given,
/// else `total` (--budget) shared equally, else `default_each`; within the
/// range `seconds` accepts.
pub fn budget_each(
    total: Option<f64>,
    each: Option<f64>,
    default_each: f64,
    measurements: usize,
) -> Duration {
    Duration::from_secs_f64(
        each.or(total.map(|t| t / measurements.max(1) as f64))
            .unwrap_or(default_each)
            .clamp(parse::MIN_SECONDS, parse::MAX_SECONDS),
    )
}

/// The buffer size of an option, or the default (4x the last-level cache).
pub fn size_or_default(m: &Machine, v: Option<usize>) -> usize {
    v.unwrap_or_else(|| default_buffer_bytes(m))
}

/// Parses a single CPU written by the user, with the set grammar's checks.
pub fn one_cpu(m: &Machine, opt: &str, text: &str) -> Result<u32, CliError> {
    let s = ResourceSet::parse(m, text, ListMeaning::Cpus)
        .map_err(|e| CliError::usage(format!("{opt}: {e}")))?;
    match (s.cpus.len(), s.cpus.first()) {
        (1, Some(c)) => Ok(c),
        (0, _) => Err(CliError::usage(format!(
            "{opt} '{text}' holds no CPU{}; CPUs: {}",
            cpuless_hint(m, &s),
            m.allowed_cpus
        ))),
        _ => Err(CliError::usage(format!(
            "{opt} '{text}' is {} CPUs ({}); give one CPU",
            s.cpus.len(),
            s.cpus
        ))),
    }
}

/// A memory policy option (`--mem`), its error naming the option.
pub fn memory_policy(m: &Machine, opt: &str, text: &str) -> Result<MemoryPolicy, CliError> {
    MemoryPolicy::parse(m, text).map_err(|e| CliError::usage(format!("{opt}: {e}")))
}

/// A memory policy for every array of `kernel`, or one per array
/// (`a=bind:0,b=bind:1`; arrays not named get first-touch), its error
/// naming the option and the kernel's arrays.
pub fn array_policies(
    m: &Machine,
    opt: &str,
    text: &str,
    kernel: BandwidthKernel,
) -> Result<ArrayPolicies, CliError> {
    let p = ArrayPolicies::parse(m, text, &MemoryPolicy::FirstTouch)
        .and_then(|p| {
            p.check_names(kernel.name(), kernel.array_names())
                .map(|()| p)
        })
        .map_err(|e| CliError::usage(format!("{opt}: {e}")))?;
    Ok(p)
}

/// `--cpu`, or the first allowed CPU.
pub fn cpu_or_first(m: &Machine, text: Option<&str>) -> Result<u32, CliError> {
    match text {
        Some(c) => one_cpu(m, "--cpu", c),
        None => m
            .allowed_cpus
            .first()
            .ok_or_else(|| CliError::failed("no CPU is allowed for this process")),
    }
}

/// " (node 4 is CPU-less: memory only)" when the set named CPU-less nodes.
pub fn cpuless_hint(m: &Machine, s: &ResourceSet) -> String {
    let cpuless: IdSet = s
        .nodes
        .iter()
        .filter(|n| m.node(*n).is_some_and(|x| x.cpuless))
        .collect();
    if cpuless.is_empty() {
        String::new()
    } else {
        format!(
            " (node {cpuless} {} CPU-less: memory only)",
            if cpuless.len() > 1 { "are" } else { "is" }
        )
    }
}

/// The CPUs of a set option that must name at least one CPU.
pub fn cpu_set(m: &Machine, opt: &str, text: &str) -> Result<IdSet, CliError> {
    let set = ResourceSet::parse(m, text, ListMeaning::Cpus)
        .map_err(|e| CliError::usage(format!("{opt}: {e}")))?;
    if set.cpus.is_empty() {
        return Err(CliError::usage(format!(
            "{opt} '{text}' holds no CPU{}; nodes with CPUs: {}",
            cpuless_hint(m, &set),
            m.cpu_nodes()
        )));
    }
    Ok(set.cpus)
}

/// The CPUs of `n` threads over the set `cpus` with the thread policy.
pub fn thread_cpus(
    m: &Machine,
    cpus: &str,
    n: usize,
    policy: &ThreadPolicy,
    oversubscribe: bool,
) -> Result<Vec<u32>, CliError> {
    let set = cpu_set(m, "--cpus", cpus)?;
    policy
        .assign(m, &set, n, oversubscribe)
        .map_err(CliError::usage)
}

/// Bandwidth kernels (`BandwidthKernel::parse`).
pub const KERNELS: &[&str] = &[
    "read",
    "read-prefetch",
    "write",
    "write-nt",
    "copy",
    "scale",
    "add",
    "triad",
    "line-read",
    "line-write",
    "random-read",
];
/// Instruction sets, `auto` for the widest this CPU runs.
pub const ISAS: &[&str] = &["auto", "avx512", "avx2", "sse2", "neon", "portable"];
/// Pointer-chase patterns (`ChasePattern::parse`; `page:N` and `stride:N`
/// take a count).
pub const PATTERNS: &[&str] = &["random", "page", "page:N", "stride", "stride:N"];
/// Transparent huge page choices (`Thp::parse`).
pub const THP: &[&str] = &["on", "off", "system"];
/// Bandwidth units of the text output.
pub const UNITS: &[&str] = numalab_report::views::Units::NAMES;

/// Parses `--isa`: `auto` (the widest ISA this CPU runs) or a name; refused
/// when this CPU cannot run it.
pub fn isa(t: &str) -> Result<numalab::measure::kernels::Isa, String> {
    use numalab::measure::kernels::Isa;
    let isa = match t {
        "auto" => Isa::detect_best(),
        t => Isa::parse(t)?,
    };
    isa.check_available()?;
    Ok(isa)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use numalab::measure::chase::ChasePattern;
    use numalab::measure::kernels::BandwidthKernel;
    use numalab::placement::Thp;

    #[test]
    fn listed_choices_are_what_the_engine_reads() {
        for k in KERNELS {
            assert!(BandwidthKernel::parse(k).is_ok(), "{k}");
        }
        assert_eq!(KERNELS.len(), BandwidthKernel::ALL.len());
        for p in PATTERNS {
            assert!(ChasePattern::parse(&p.replace('N', "8")).is_ok(), "{p}");
        }
        for t in THP {
            assert!(Thp::parse(t).is_ok(), "{t}");
        }
        assert!(isa("auto").is_ok());
        assert!(isa("mmx").unwrap_err().contains("valid:"));
    }

    #[derive(clap::Parser)]
    struct Try {
        #[arg(long, value_parser = choice(KERNELS, BandwidthKernel::parse))]
        kernel: Option<BandwidthKernel>,
        #[arg(long, allow_hyphen_values = true, value_parser = whole(1, 8))]
        threads: Option<usize>,
        #[arg(long, allow_hyphen_values = true, value_parser = seconds(1.0))]
        total: Option<f64>,
        #[arg(long, allow_hyphen_values = true, value_parser = buffer_size())]
        size: Option<usize>,
    }

    #[derive(clap::Parser)]
    struct TryStats {
        #[command(flatten)]
        stats: StatOptions,
    }

    fn error(args: &[&str]) -> String {
        let mut v = vec!["try"];
        v.extend(args);
        match Try::try_parse_from(v) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn typed_options_refuse_in_one_line_naming_the_option() {
        let e = error(&["--kernel", "bogus"]);
        assert!(
            e.contains("--kernel: unknown kernel 'bogus'; valid: read"),
            "{e}"
        );
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        let e = error(&["--threads", "9"]);
        assert!(
            e.contains("--threads '9' is not a whole number from 1 to 8"),
            "{e}"
        );
        let e = error(&["--total", "0.5"]);
        assert!(e.contains("--total 0.5 must be at least 1 second"), "{e}");
        let e = error(&["--total", "-1"]);
        assert!(e.contains("--total -1 must be at least 1 second"), "{e}");
        let e = error(&["--total", "soon"]);
        assert!(
            e.contains("--total 'soon' is not a number of seconds"),
            "{e}"
        );
        let e = error(&["--size", "1K"]);
        assert!(e.contains("--size 1K is too small: at least 4 KiB"), "{e}");
        let stats_error = |args: &[&str]| {
            let mut v = vec!["try"];
            v.extend(args);
            TryStats::try_parse_from(v).err().unwrap().to_string()
        };
        let e = stats_error(&["--target-ci", "200"]);
        assert!(e.contains("above 0 and below 100"), "{e}");
        let e = stats_error(&["--target-ci", "0"]);
        assert!(
            e.contains("--target-ci 0 is out of range: give a percentage above 0 and below 100"),
            "{e}"
        );
        let e = stats_error(&["--budget", "0"]);
        assert!(
            e.contains("--budget '0' is not a positive number of seconds from 0.001 to 604800"),
            "{e}"
        );
        for huge in ["1e308", "inf", "604801", "-1"] {
            let e = stats_error(&["--budget", huge]);
            assert!(e.contains("from 0.001 to 604800"), "{huge}: {e}");
        }
        let e = stats_error(&["--min-reps", "-1"]);
        assert!(
            e.contains("--min-reps '-1' is not a whole number from 1 to 1000000"),
            "{e}"
        );
        let e = error(&["--threads", "18446744073709551615"]);
        assert!(
            e.contains("--threads '18446744073709551615' is not a whole number from 1 to 8"),
            "{e}"
        );
        let e = error(&["--size", "-1"]);
        assert!(e.contains("--size: '-1' is not a size"), "{e}");
        let e = error(&["--size", "200T"]);
        assert!(e.contains("at most 128T"), "{e}");
        let e = error(&["--total", "1e308"]);
        assert!(e.contains("from 0.001 to 604800"), "{e}");
        let t = Try::try_parse_from(["try", "--kernel", "triad", "--size", "64M", "--total", "2s"])
            .unwrap();
        assert_eq!(t.kernel, Some(BandwidthKernel::Triad));
        assert_eq!(t.size, Some(64 << 20));
        assert_eq!(t.total, Some(2.0));
        let st = TryStats::try_parse_from(["try"]).unwrap().stats;
        assert_eq!(st.rule(1.0, 4).unwrap().target_rel_ci, 0.01);
        assert_eq!(st.rule(1.0, 4).unwrap().budget, Duration::from_secs(1));
        let budget = |args: &[&str], n| {
            let mut v = vec!["try"];
            v.extend(args);
            let st = TryStats::try_parse_from(v).unwrap().stats;
            st.rule(1.0, n).unwrap().budget.as_secs_f64()
        };
        assert_eq!(budget(&["--budget", "8"], 4), 2.0);
        assert_eq!(budget(&["--budget", "8"], 0), 8.0);
        assert_eq!(budget(&["--budget-each", "0.5"], 4), 0.5);
        let e = stats_error(&["--budget", "8", "--budget-each", "1"]);
        assert!(
            e.contains("'--budget <SECONDS>' cannot be used with '--budget-each <SECONDS>'"),
            "{e}"
        );
        let e = TryStats::try_parse_from(["try", "--min-reps", "9", "--max-reps", "3"])
            .unwrap()
            .stats
            .rule(1.0, 1)
            .unwrap_err();
        assert!(e.msg.contains("min-reps <= max-reps"), "{}", e.msg);
    }

    #[test]
    fn lists_drop_repeats_and_refuse_empty_items() {
        let l = read_list("2, 1,2", |t| t.parse::<u32>().map_err(|e| e.to_string())).unwrap();
        assert_eq!(l, List(vec![2, 1]));
        let e = read_list("1,,2", |t| t.parse::<u32>().map_err(|e| e.to_string())).unwrap_err();
        assert_eq!(e, "'1,,2' has an empty entry");
        assert!(read_list("1,x", |t| t
            .parse::<u32>()
            .map_err(|_| format!("'{t}' bad")))
        .unwrap_err()
        .contains("'x' bad"));
    }

    /// 100,000 random strings through each numeric option parser: no
    /// panic, every error one line naming the option, every accepted value
    /// within the range the option documents.
    #[test]
    fn numeric_parsers_keep_their_ranges() {
        const PIECES: &[&str] = &[
            "0",
            "1",
            "5",
            "9",
            ".",
            "-",
            "+",
            "e",
            "E",
            "%",
            "s",
            " ",
            "K",
            "M",
            "T",
            "G",
            "inf",
            "NaN",
            "1e308",
            "100",
            "604800",
            "128",
            "18446744073709551616",
            "é",
            ",",
        ];
        let mut rng = numalab::random::SplitMix64::new(10);
        let mut text = || -> String {
            (0..rng.below(8))
                .map(|_| PIECES[rng.below(PIECES.len())])
                .collect()
        };
        let (pct, secs, secs1, sz, count) = (
            percent(),
            seconds(0.0),
            seconds(1.0),
            buffer_size(),
            thread_count(MAX_THREADS),
        );
        let one_line = |e: String| {
            assert!(e.starts_with("--x") && !e.contains('\n'), "{e}");
        };
        let mut accepted = [0usize; 5];
        for _ in 0..100_000 {
            let t = text();
            match (pct.check)("--x", &t) {
                Ok(v) => {
                    assert!(v > 0.0 && v < 1.0, "{t}: {v}");
                    accepted[0] += 1;
                }
                Err(e) => one_line(e),
            }
            for (i, p) in [&secs, &secs1].into_iter().enumerate() {
                match (p.check)("--x", &t) {
                    Ok(v) => {
                        let min = if i == 0 { parse::MIN_SECONDS } else { 1.0 };
                        assert!((min..=parse::MAX_SECONDS).contains(&v), "{t}: {v}");
                        let _ = Duration::from_secs_f64(v);
                        accepted[1 + i] += 1;
                    }
                    Err(e) => one_line(e),
                }
            }
            match (sz.check)("--x", &t) {
                Ok(v) => {
                    assert!((4096..=parse::MAX_SIZE as usize).contains(&v), "{t}: {v}");
                    accepted[3] += 1;
                }
                Err(e) => one_line(e),
            }
            match (count.check)("--x", &t) {
                Ok(v) => {
                    assert!((1..=MAX_THREADS).contains(&v), "{t}: {v}");
                    accepted[4] += 1;
                }
                Err(e) => one_line(e),
            }
        }
        assert!(accepted.iter().all(|&a| a > 500), "{accepted:?}");
    }

    #[test]
    fn help_lists_the_choices() {
        use clap::CommandFactory;
        let help = Try::command().render_long_help().to_string();
        assert!(help.contains("line-write"), "{help}");
    }
}
