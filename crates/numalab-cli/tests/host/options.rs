//! One name per concept across commands, and the shared option groups
//! (issue 33): read from every command's `--help`, as a user meets them.
//!
//! - `--budget` is always the whole command's time; `--budget-each` the
//!   time of each measurement.
//! - `--threads` is always a count; thread-count lists are
//!   `--thread-counts`, a profile's thread selection `--only-threads`.
//! - `--layout` is how threads are laid out, in the same words (compact,
//!   scatter) everywhere; `--full` is the report's mode only, and running
//!   every case instead of one per symmetry class is `--every-case`.
//! - Every `--mem` says its default.
//! - The shared groups (args.rs: StatOptions, ThreadLayout, PinnedBuffer)
//!   print the same help in every command that has them.

use crate::common::{numalab, subcommands};
use std::collections::BTreeMap;

/// One option line of a help text: its long name, the value it takes
/// (`<N>`), and its help (with any `[default: ...]`).
#[derive(Debug, Clone)]
struct OptionLine {
    value: String,
    help: String,
}

/// Every command and subcommand (`bench latency`), with its help text.
fn helps() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for c in subcommands(&[]) {
        let subs = subcommands(&[&c]);
        if subs.is_empty() {
            out.insert(c.clone(), numalab(&[&c, "--help"]).out);
        }
        for s in subs {
            out.insert(format!("{c} {s}"), numalab(&[&c, &s, "--help"]).out);
        }
    }
    assert!(out.len() >= 22, "{:?}", out.keys());
    out
}

/// The long options of a help text.
fn options(help: &str) -> BTreeMap<String, OptionLine> {
    let mut out = BTreeMap::new();
    for line in help.lines() {
        // Options are indented; the after-help's prose is not.
        let t = line.trim_start();
        if !line.starts_with("  ") || !t.starts_with('-') {
            continue;
        }
        // "-m, --membind <NODES>  help" or "--budget <SECONDS>  help".
        let t = match t.as_bytes().get(1) {
            Some(b'-') => t,
            _ => t.split_once(", ").map_or(t, |(_, rest)| rest),
        };
        let Some(rest) = t.strip_prefix("--") else {
            continue;
        };
        let (spec, help) = rest.split_once("  ").unwrap_or((rest, ""));
        let (name, value) = spec.split_once(' ').unwrap_or((spec, ""));
        out.insert(
            name.to_string(),
            OptionLine {
                value: value.trim().to_string(),
                help: help.trim().to_string(),
            },
        );
    }
    out
}

/// The help of an option without its `[default: ...]`.
fn without_default(help: &str) -> &str {
    help.split(" [default: ").next().unwrap_or(help)
}

#[test]
fn one_name_per_concept_and_every_mem_says_its_default() {
    let helps = helps();
    let mut seen = BTreeMap::<String, Vec<String>>::new();
    for (command, help) in &helps {
        let opts = options(help);
        for gone in ["threads-policy", "case-budget", "full-limit"] {
            assert!(
                !opts.contains_key(gone),
                "numalab {command} still offers --{gone}"
            );
        }
        for (name, o) in &opts {
            let what = format!("numalab {command} --{name}: {}", o.help);
            match name.as_str() {
                "budget" => {
                    assert!(
                        o.help
                            .to_lowercase()
                            .contains("time budget of the whole command"),
                        "{what}"
                    );
                    assert_eq!(o.value, "<SECONDS>", "{what}");
                }
                "budget-each" => assert!(
                    o.help
                        .to_lowercase()
                        .contains("time budget of each measurement"),
                    "{what}"
                ),
                "threads" => assert_eq!(o.value, "<N>", "a count: {what}"),
                "thread-counts" | "only-threads" => assert_ne!(o.value, "<N>", "{what}"),
                // `fleet report` hands it to each node's report.
                "full" => assert!(
                    command == "report" || command == "fleet report",
                    "--full is the report's mode: {what}"
                ),
                "layout" => {
                    assert!(
                        o.help.contains("compact") && o.help.contains("scatter"),
                        "{what}"
                    );
                    assert!(
                        !o.help.contains("packed") && !o.help.contains("spread"),
                        "{what}"
                    );
                }
                "mem" => assert!(o.help.contains("default"), "no default stated: {what}"),
                _ => {}
            }
            if [
                "budget",
                "budget-each",
                "threads",
                "layout",
                "every-case",
                "mem",
            ]
            .contains(&name.as_str())
            {
                seen.entry(name.clone()).or_default().push(command.clone());
            }
        }
    }
    // The names are where they belong.
    let has = |name: &str, command: &str| {
        seen.get(name)
            .is_some_and(|c| c.iter().any(|x| x == command))
    };
    for c in [
        "apexmap", "c2c", "blas", "matrix", "sweep", "report", "pdm", "sizes",
    ] {
        assert!(has("budget", c), "numalab {c} has no --budget: {seen:?}");
    }
    for c in ["apexmap", "c2c", "blas", "sweep", "pdm", "loaded-latency"] {
        assert!(has("budget-each", c), "numalab {c} has no --budget-each");
    }
    for c in ["sweep", "blas"] {
        assert!(has("every-case", c), "numalab {c} has no --every-case");
    }
    for c in ["set", "policies", "sizes", "bench bandwidth"] {
        assert!(has("layout", c), "numalab {c} has no --layout");
    }
    let sweep = options(&helps["sweep"]);
    assert_eq!(sweep["thread-counts"].value, "<LIST>");
    assert_eq!(options(&helps["profile"])["only-threads"].value, "<SET>");
}

#[test]
fn shared_groups_print_the_same_help_everywhere() {
    let helps = helps();
    let groups: [(&str, &[&str], &[&str]); 5] = [
        (
            "StatOptions",
            &[
                "target-ci",
                "budget",
                "budget-each",
                "min-reps",
                "max-reps",
                "warmup",
                "reps",
            ],
            &[
                "apexmap",
                "bench bandwidth",
                "bench latency",
                "blas",
                "c2c",
                "loaded-latency",
                "matrix",
                "policies",
                "scaling",
                "sizes",
            ],
        ),
        (
            "ThreadLayout",
            &["layout"],
            &["bench bandwidth", "policies", "set"],
        ),
        (
            "PinnedBuffer",
            &["cpu", "mem", "size"],
            &["apexmap", "bench latency", "loaded-latency"],
        ),
        (
            "LaunchArgs",
            &[
                "cpus",
                "mem",
                "membind",
                "interleave",
                "preferred",
                "cpunodebind",
                "physcpubind",
                "localalloc",
            ],
            &["run", "profile"],
        ),
        ("PinArgs", &["pin", "skip"], &["run", "profile"]),
    ];
    for (group, names, commands) in groups {
        for name in names {
            let mut first: Option<(&str, OptionLine)> = None;
            for c in commands {
                let opts = options(&helps[*c]);
                let o = opts
                    .get(*name)
                    .unwrap_or_else(|| panic!("{group}: numalab {c} lacks --{name}"))
                    .clone();
                match &first {
                    None => first = Some((c, o)),
                    Some((c0, o0)) => {
                        // A command may state its own default
                        // (policies scatters its workloads' threads).
                        assert_eq!(
                            (o0.value.as_str(), without_default(&o0.help)),
                            (o.value.as_str(), without_default(&o.help)),
                            "{group}: --{name} of numalab {c0} and numalab {c} differ"
                        );
                    }
                }
            }
        }
    }
    // The one command-specific default of these groups, stated, and the
    // choices of a command that lays its threads out itself.
    let policies = options(&helps["policies"]);
    let layout = &policies["layout"].help;
    assert!(
        layout.ends_with("[default: scatter] [possible values: scatter, compact]"),
        "{layout}"
    );
    let set = options(&helps["set"]);
    let layout = &set["layout"].help;
    assert!(
        layout.ends_with(r#"[default: compact] [possible values: compact, scatter, "CPU list"]"#),
        "{layout}"
    );
}
