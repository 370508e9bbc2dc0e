//! Property tests of every text parser of the engine: 100,000 random
//! strings and mutations of valid inputs each, from the crate's own seeded
//! generator so a failure replays exactly. No input may panic, and what is
//! accepted must keep the parser's promises: within the documented range,
//! and printed back (`Display`, `name`) it parses to the same value.

use crate::common;

use numalab::experiments::c2c::C2cFigures;
use numalab::experiments::policies::{parse_list, PolicyColumn, Workload};
use numalab::experiments::sweep::Access;
use numalab::experiments::sweep::Subscription;
use numalab::idset::ID_LIMIT;
use numalab::measure::chase::{ChasePattern, MAX_PAGES_PER_GROUP, MAX_STRIDE};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::pacing::{background_rate, TrafficMix};
use numalab::placement::resource_set::{MAX_SET_DEPTH, MAX_SET_TEXT};
use numalab::placement::thread_policy::MAX_THREADS;
use numalab::placement::{ListMeaning, MemoryPolicy, ResourceSet, Thp, ThreadPolicy, WeightedImpl};
use numalab::random::SplitMix64;
use numalab::text::{format, parse};
use numalab::{IdSet, Machine};
use numalab_report::registry::REPORT;
use numalab_report::views::Units;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Inputs tried per parser and run.
const CASES: usize = 100_000;

/// Pieces the generator strings together: the grammar's words and
/// punctuation, numbers at and beyond every limit, and characters that
/// break naive parsers (multi-byte, control, right-to-left).
const COMMON: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "7",
    "9",
    "15",
    "63",
    "64",
    "-",
    ",",
    ":",
    "@",
    "=",
    ".",
    " ",
    "\t",
    "\n",
    "+",
    "e",
    "E",
    "x",
    "é",
    "\u{0}",
    "\u{202e}",
    "🙂",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "-1e308",
    "1e-300",
    "inf",
    "-inf",
    "NaN",
    "-0",
    "0.",
    ".5",
    "1_000",
    "+1",
    "0x10",
    "9999999999999999999999999",
];

/// Random strings of `tokens` (and of `COMMON`), and mutations of `seeds`.
struct Gen {
    rng: SplitMix64,
    tokens: Vec<&'static str>,
    seeds: Vec<String>,
}

impl Gen {
    fn new(seed: u64, tokens: &[&'static str], seeds: &[String]) -> Gen {
        let mut all: Vec<&'static str> = tokens.to_vec();
        all.extend_from_slice(COMMON);
        Gen {
            rng: SplitMix64::new(seed),
            tokens: all,
            seeds: seeds.to_vec(),
        }
    }

    fn token(&mut self) -> &'static str {
        self.tokens[self.rng.below(self.tokens.len())]
    }

    fn any_char(&mut self) -> char {
        loop {
            let bits = match self.rng.below(4) {
                0 => self.rng.below(0x80) as u32,
                1 => self.rng.below(0x800) as u32,
                _ => self.rng.below(0x11_0000) as u32,
            };
            if let Some(c) = char::from_u32(bits) {
                return c;
            }
        }
    }

    fn random(&mut self) -> String {
        let n = self.rng.below(12);
        let mut s = String::new();
        for _ in 0..n {
            if self.rng.below(8) == 0 {
                s.push(self.any_char());
            } else {
                s.push_str(self.token());
            }
        }
        s
    }

    fn mutated(&mut self) -> String {
        let seed = self.seeds[self.rng.below(self.seeds.len())].clone();
        let mut chars: Vec<char> = seed.chars().collect();
        for _ in 0..1 + self.rng.below(3) {
            let at = self.rng.below(chars.len() + 1);
            match self.rng.below(6) {
                0 if !chars.is_empty() => {
                    let end = (at + 1 + self.rng.below(3)).min(chars.len());
                    chars.drain(at.min(end)..end);
                }
                1 => {
                    let t: Vec<char> = self.token().chars().collect();
                    chars.splice(at..at, t);
                }
                2 if at < chars.len() => {
                    chars[at] = self.any_char();
                }
                3 => {
                    let copy = chars.clone();
                    chars.push(if self.rng.below(2) == 0 { ',' } else { '+' });
                    chars.extend(copy);
                }
                4 => {
                    let t: Vec<char> = self.token().chars().collect();
                    let end = (at + t.len()).min(chars.len());
                    chars.splice(at..end, t);
                }
                _ => chars.insert(at, self.any_char()),
            }
        }
        chars.into_iter().collect()
    }

    fn next(&mut self) -> String {
        if self.rng.below(2) == 0 {
            self.random()
        } else {
            self.mutated()
        }
    }
}

/// Runs `check` on `CASES` generated inputs; a panic (in the parser or an
/// invariant) fails with the input that caused it. `check` says whether
/// the parser accepted the input: at least 0.5% must be accepted and 0.5%
/// refused, or the generator missed what the parser reads and the
/// invariants were hardly tried.
fn fuzz(
    name: &str,
    seed: u64,
    tokens: &[&'static str],
    seeds: &[&str],
    check: impl Fn(&str) -> bool,
) {
    let seeds: Vec<String> = seeds.iter().map(|s| s.to_string()).collect();
    let mut g = Gen::new(seed, tokens, &seeds);
    for s in &seeds {
        assert!(run_one(name, s, &check), "{name}: seed {s:?} refused");
    }
    let mut accepted = 0;
    for _ in 0..CASES {
        let input = g.next();
        accepted += usize::from(run_one(name, &input, &check));
    }
    assert!(
        (CASES / 200..=CASES - CASES / 200).contains(&accepted),
        "{name}: {accepted} of {CASES} inputs accepted"
    );
}

fn run_one(name: &str, input: &str, check: &impl Fn(&str) -> bool) -> bool {
    match catch_unwind(AssertUnwindSafe(|| check(input))) {
        Ok(accepted) => accepted,
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{name}: input {input:?} panicked: {msg}");
        }
    }
}

/// An error is one line unless the input itself held a line break; false
/// (refused) for `fuzz`.
fn one_line(input: &str, e: &str) -> bool {
    assert!(!e.is_empty(), "empty error");
    if !input.contains(['\n', '\r']) {
        assert!(!e.contains('\n'), "error of two lines: {e}");
    }
    false
}

/// An 8-node machine with caches and cores: every word of the grammar
/// names something on it.
fn machine() -> Machine {
    common::fixture("16amd64-8n2c.xml")
}

const SET_TOKENS: &[&str] = &[
    "all", "none", "node:", "numa:", "package:", "socket:", "core:", "cpu:", "pu:", "l1:", "l2:",
    "l3:", "l4:", "l5:", "!", "(", ")", "&", "~", "ALL", "node", "0-3", "0-15", "2,4", "3-1",
];

#[test]
fn id_lists() {
    fuzz(
        "IdSet::parse_list",
        1,
        &["0-3", "-", ","],
        &["0-3,7", "0", "", "0-65535", "1,3,5-9", "65535"],
        |t| match IdSet::parse_list(t) {
            Ok(s) => {
                assert!(s.last().is_none_or(|l| l < ID_LIMIT), "{s}");
                assert_eq!(IdSet::parse_list(&s.to_string()).as_ref(), Ok(&s));
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn set_expressions() {
    let m = machine();
    let existing = m.complete_nodes.union(&m.node_ids());
    fuzz(
        "ResourceSet::parse",
        2,
        SET_TOKENS,
        &[
            "0-3",
            "all",
            "node:0-1 ~ core:0",
            "!(node:1 + cpu:0-3) & l2:0",
            "package:0,l2:all",
            "((node:0))",
            "!!0",
        ],
        |t| {
            let mut accepted = false;
            for meaning in [ListMeaning::Cpus, ListMeaning::Nodes] {
                accepted |= match ResourceSet::parse(&m, t, meaning) {
                    Ok(s) => {
                        assert!(s.cpus.is_subset(&m.allowed_cpus), "{s}");
                        assert!(s.nodes.is_subset(&existing), "{s}");
                        let half = |r: &ResourceSet| match meaning {
                            ListMeaning::Cpus => r.cpus.clone(),
                            ListMeaning::Nodes => r.nodes.clone(),
                        };
                        let list = half(&s);
                        if !list.is_empty() {
                            let again = ResourceSet::parse(&m, &list.to_string(), meaning);
                            assert_eq!(again.map(|r| half(&r)), Ok(list));
                        }
                        true
                    }
                    Err(e) => one_line(t, &e),
                };
            }
            accepted
        },
    );
}

#[test]
fn set_expressions_have_bounded_depth_and_length() {
    let m = machine();
    let nested = |d: usize| format!("{}0{}", "(".repeat(d), ")".repeat(d));
    assert_eq!(
        ResourceSet::parse(&m, &nested(MAX_SET_DEPTH), ListMeaning::Cpus).map(|s| s.cpus),
        Ok(IdSet::single(0))
    );
    for depth in [MAX_SET_DEPTH + 1, 1000, 30_000] {
        let e = ResourceSet::parse(&m, &nested(depth), ListMeaning::Cpus).unwrap_err();
        assert!(
            e.contains("parentheses nested deeper than 32 levels"),
            "{depth}: {e}"
        );
        assert!(e.len() < 400, "{e}");
    }
    // A run of `!` is a loop, not recursion: any length within the text
    // limit parses, and pairs cancel.
    let bangs = |n: usize| format!("{}0", "!".repeat(n));
    let all_but_0 = m.allowed_cpus.difference(&IdSet::single(0));
    for (n, cpus) in [
        (1, &all_but_0),
        (2, &IdSet::single(0)),
        (50_001, &all_but_0),
    ] {
        assert_eq!(
            ResourceSet::parse(&m, &bangs(n), ListMeaning::Cpus)
                .map(|s| s.cpus)
                .as_ref(),
            Ok(cpus),
            "{n}"
        );
    }
    let long = format!("0{}", "+0".repeat(MAX_SET_TEXT / 2));
    let e = ResourceSet::parse(&m, &long, ListMeaning::Cpus).unwrap_err();
    assert!(e.contains("at most 65536"), "{e}");
    assert!(e.len() < 200, "{e}");
    let e = ResourceSet::parse(&m, "0-4294967295", ListMeaning::Cpus).unwrap_err();
    assert_eq!(
        e,
        "id '4294967295' in '0-4294967295' is out of range: ids go from 0 to 65535 (Linux has at most 8192 CPUs and 1024 nodes)"
    );
}

#[test]
fn memory_policies() {
    let m = machine();
    fuzz(
        "MemoryPolicy::parse",
        3,
        &[
            "first-touch",
            "local",
            "bind:",
            "preferred:",
            "interleave:",
            "weighted:",
            "remote",
            "remote:far",
            "near",
            "@",
            "@4",
            "=3",
            "0=1",
            "all",
            "node:",
            "@1073741824",
            "@1073741825",
        ],
        &[
            "first-touch",
            "local",
            "bind:0-1",
            "preferred:2",
            "interleave:all@4",
            "weighted:0=3,1=1@2",
            "remote:far",
            "bind:package:0",
        ],
        |t| match MemoryPolicy::parse(&m, t) {
            Ok(p) => {
                let again = MemoryPolicy::parse(&m, &p.to_string());
                assert_eq!(again.as_ref(), Ok(&p), "{p}");
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn memory_policy_examples_are_accepted() {
    // Every example an error suggests must itself parse, on a one-node and
    // on a many-node machine.
    for m in [common::fixture("16amd64-8n2c.xml"), one_node()] {
        for bad in [
            "weighted:",
            "weighted:x",
            "weighted",
            "bind",
            "interleave:0@0",
        ] {
            let e = MemoryPolicy::parse(&m, bad).unwrap_err();
            let example = e
                .split("e.g. ")
                .nth(1)
                .and_then(|r| r.split([';', ' ']).next())
                .unwrap_or_else(|| panic!("{bad}: no example in {e}"));
            assert!(
                MemoryPolicy::parse(&m, example).is_ok(),
                "{bad}: example {example} of '{e}' is refused"
            );
        }
    }
}

fn one_node() -> Machine {
    common::fixture("offline-cpu0-node0.xml")
}

#[test]
fn thread_policies() {
    fuzz(
        "ThreadPolicy::parse",
        4,
        &[
            "compact",
            "fill",
            "scatter",
            "round-robin",
            "0-8191",
            "0-65535",
        ],
        &["compact", "scatter", "0,2,4-5", "3,3", "0-8191"],
        |t| match ThreadPolicy::parse(t) {
            Ok(ThreadPolicy::Explicit(cpus)) => {
                assert!(!cpus.is_empty() && cpus.len() <= MAX_THREADS);
                let text: Vec<String> = cpus.iter().map(u32::to_string).collect();
                assert_eq!(
                    ThreadPolicy::parse(&text.join(",")),
                    Ok(ThreadPolicy::Explicit(cpus))
                );
                true
            }
            Ok(_) => true,
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn explicit_lists_share_a_cpu_only_when_oversubscribing() {
    let m = machine();
    let cpus = m.allowed_cpus.clone();
    let twice = ThreadPolicy::parse("0,0").unwrap();
    let e = twice.assign(&m, &cpus, 2, false).unwrap_err();
    assert!(
        e.contains("CPU 0 appears twice") && e.contains("--oversubscribe"),
        "{e}"
    );
    assert_eq!(twice.assign(&m, &cpus, 2, true), Ok(vec![0, 0]));
    // A repeat anywhere in the list is refused, also past the threads
    // that use it (issue 37: `--threads 2 --threads-policy 0,1,0` was
    // accepted); with --oversubscribe the list is a placement.
    let later = ThreadPolicy::parse("1,2,1").unwrap();
    let e = later.assign(&m, &cpus, 2, false).unwrap_err();
    assert!(
        e.contains("CPU 1 appears twice in the thread list 1,2,1"),
        "{e}"
    );
    assert!(later.assign(&m, &cpus, 3, false).is_err());
    assert_eq!(later.assign(&m, &cpus, 2, true), Ok(vec![1, 2]));
    let e = ThreadPolicy::parse("0-65535,0-65535").unwrap_err();
    assert!(e.contains("more than 8192 threads"), "{e}");
    let e = ThreadPolicy::parse("0,,1").unwrap_err();
    assert!(e.contains("empty entry"), "{e}");
    let e = ThreadPolicy::parse("zigzag").unwrap_err();
    assert_eq!(e.matches("valid:").count(), 1, "{e}");
}

const NUMBER_TOKENS: &[&str] = &[
    "K",
    "M",
    "G",
    "T",
    "P",
    "B",
    "KiB",
    "gib",
    "s",
    "GB/s",
    "gb/s",
    "ms",
    "%",
    "1.5",
    "128",
    "129",
    "604800",
    "604801",
    "0.001",
    "0.0009",
    "10000",
    "10001",
    "1000000000",
];

#[test]
fn sizes() {
    fuzz(
        "parse::size",
        5,
        NUMBER_TOKENS,
        &["64M", "1GiB", "4096", "2.5G", "128T", "0"],
        |t| match parse::size(t) {
            Ok(v) => {
                assert!(v <= parse::MAX_SIZE, "{v}");
                assert_eq!(parse::size(&v.to_string()), Ok(v));
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn seconds() {
    fuzz(
        "parse::seconds",
        6,
        NUMBER_TOKENS,
        &["60", "0.5s", "604800", "0.001", "1e3"],
        |t| match parse::seconds(t) {
            Ok(v) => {
                assert!(
                    (parse::MIN_SECONDS..=parse::MAX_SECONDS).contains(&v),
                    "{v}"
                );
                assert_eq!(parse::seconds(&v.to_string()), Ok(v));
                // Every accepted value is a Duration without panicking.
                let _ = std::time::Duration::from_secs_f64(v);
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn rates() {
    fuzz(
        "parse::rate",
        7,
        NUMBER_TOKENS,
        &["2", "0.5GB/s", "4 GB/s", "10000", "0.001"],
        |t| match parse::rate(t) {
            Ok(v) => {
                assert!((parse::MIN_RATE..=parse::MAX_RATE).contains(&v), "{v}");
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
    fuzz(
        "background_rate",
        8,
        &["low", "medium", "high", "very-high", "GB/s"],
        &["low", "very-high", "1.5", "1.5GB/s"],
        |t| match background_rate(t) {
            Ok(v) => {
                assert!((parse::MIN_RATE..=parse::MAX_RATE).contains(&v), "{v}");
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn delays() {
    fuzz(
        "parse::delay_ns",
        9,
        NUMBER_TOKENS,
        &["0", "500", "1000000000"],
        |t| match parse::delay_ns(t) {
            Ok(v) => {
                assert!(v <= parse::MAX_DELAY_NS, "{v}");
                assert_eq!(parse::delay_ns(&v.to_string()), Ok(v));
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn chase_patterns() {
    fuzz(
        "ChasePattern::parse",
        10,
        &[
            "random",
            "page",
            "stride",
            "page:",
            "stride:",
            "262144",
            "1073741824",
        ],
        &["random", "page", "page:4", "stride", "stride:128"],
        |t| match ChasePattern::parse(t) {
            Ok(p) => {
                match p {
                    ChasePattern::Random => {}
                    ChasePattern::Page { pages_per_group } => {
                        assert!((1..=MAX_PAGES_PER_GROUP).contains(&pages_per_group))
                    }
                    ChasePattern::Stride { bytes } => {
                        assert!((8..=MAX_STRIDE).contains(&bytes) && bytes % 8 == 0)
                    }
                }
                assert_eq!(ChasePattern::parse(&p.to_string()), Ok(p));
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn traffic_mixes() {
    fuzz(
        "TrafficMix::parse",
        11,
        &["read", "write-nt", ":", "1000", "1001"],
        &["read", "3:1", "0:1", "1000:1000", "write-nt"],
        |t| match TrafficMix::parse(t) {
            Ok(mix) => {
                if let TrafficMix::ReadWrite { reads, writes } = mix {
                    assert!(reads <= 1000 && (1..=1000).contains(&writes), "{mix}");
                }
                assert_eq!(TrafficMix::parse(&mix.to_string()), Ok(mix));
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn kernels_and_isas() {
    let kernels: Vec<&'static str> = BandwidthKernel::ALL.iter().map(|k| k.name()).collect();
    let seeds: Vec<&str> = kernels.clone();
    fuzz(
        "BandwidthKernel::parse",
        12,
        &kernels,
        &seeds,
        |t| match BandwidthKernel::parse(t) {
            Ok(k) => {
                assert_eq!(BandwidthKernel::parse(k.name()), Ok(k));
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
    let isas: Vec<&'static str> = Isa::ALL.iter().map(|i| i.name()).collect();
    fuzz(
        "Isa::parse",
        13,
        &isas,
        &isas.clone(),
        |t| match Isa::parse(t) {
            Ok(i) => {
                assert_eq!(Isa::parse(i.name()), Ok(i));
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn sweep_choices() {
    fuzz(
        "Access::parse_set",
        14,
        &["r", "w", "rw", "read", "write", "both"],
        &["r", "w", "rw", "both"],
        |t| match Access::parse_set(t) {
            Ok(v) => {
                assert!((1..=2).contains(&v.len()));
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
    fuzz(
        "Subscription::parse",
        15,
        &["under", "high", "full"],
        &["under", "high", "full"],
        |t| match Subscription::parse(t) {
            Ok(s) => {
                assert_eq!(Subscription::parse(s.name()), Ok(s));
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn figure_workload_and_part_lists() {
    fuzz(
        "C2cFigures::parse",
        16,
        &["modified", "clean", "false-sharing", "all"],
        &["modified", "clean,false-sharing", "all"],
        |t| match C2cFigures::parse(t) {
            Ok(f) => {
                assert!(f.modified || f.clean || f.false_sharing);
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
    let workloads: Vec<&'static str> = Workload::ALL.iter().map(|w| w.name()).collect();
    fuzz(
        "policies::parse_list(Workload)",
        17,
        &workloads,
        &["all", "independent,numa-aware", "serial-init"],
        |t| match parse_list(t, &Workload::ALL, Workload::parse) {
            Ok(v) => {
                assert!(!v.is_empty());
                assert!(v.windows(2).all(|w| w[0] < w[1]), "{v:?}");
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
    fuzz(
        "policies::parse_list(PolicyColumn)",
        18,
        &["local", "interleave", "one-node", "bind", "all"],
        &["all", "local,one-node"],
        |t| match parse_list(t, &PolicyColumn::ALL, PolicyColumn::parse) {
            Ok(v) => {
                assert!(!v.is_empty());
                assert!(v.windows(2).all(|w| w[0] < w[1]), "{v:?}");
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
    let parts: Vec<&'static str> = REPORT.all().iter().map(|p| p.name()).collect();
    fuzz(
        "Registry::parse_list",
        19,
        &parts,
        &["all", "matrix", "sweeps"],
        |t| match REPORT.parse_list(t) {
            Ok(v) => {
                assert!(!v.is_empty() && v.len() <= REPORT.all().len());
                assert!(v
                    .windows(2)
                    .all(|w| REPORT.index(w[0]) < REPORT.index(w[1])));
                true
            }
            Err(e) => one_line(t, &e),
        },
    );
}

#[test]
fn small_choices() {
    fuzz(
        "Thp/WeightedImpl/Units",
        20,
        &[
            "on", "off", "system", "auto", "kernel", "emulate", "gb", "gib", "GiB",
        ],
        &["on", "auto", "gib"],
        |t| {
            let errors = [
                Thp::parse(t).err(),
                WeightedImpl::parse(t).err(),
                Units::parse(t).err(),
            ];
            let refused = errors.iter().flatten().count();
            for e in errors.iter().flatten() {
                one_line(t, e);
            }
            refused < 3
        },
    );
}

#[test]
fn formatting_never_prints_inf_nan_or_hundreds_of_digits() {
    let mut rng = SplitMix64::new(21);
    let specials = [
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e15,
        -1e15,
        999_999_999_999_999.0,
        0.0,
        -0.0,
    ];
    for i in 0..CASES {
        let v = specials
            .get(i)
            .copied()
            .unwrap_or_else(|| f64::from_bits(rng.next_u64()));
        let digits = 1 + rng.below(6);
        for text in [
            format::significant(v, digits),
            format::significant_padded(v, digits),
            format::trimmed(v, rng.below(13)),
            format::fixed(v, rng.below(4)),
            format::percent(v),
            format::bytes_f64(v),
        ] {
            let lower = text.to_ascii_lowercase();
            assert!(
                !lower.contains("inf") && !lower.contains("nan"),
                "{v:e}: {text}"
            );
            assert!(text.len() <= 32, "{v:e}: {text}");
        }
    }
}
