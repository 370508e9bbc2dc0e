//! The counters of a launched command (`numalab run --counters`): one line
//! per event, aligned; an unavailable one says why; the derived metrics
//! with their formulas (docs/counters.md).

use numalab::measure::counters::{CountSource, CounterReport, Kind};
use numalab::measure::task_counters::TaskTable;
use numalab::placement::launch::ResourceUsage;
use numalab::text::format::{grouped, significant};
use std::fmt::Write;

/// What perf stat prints for an event it cannot count.
pub const NOT_SUPPORTED: &str = "<not supported>";

/// The prefix of an unavailable event's reason, left out of the footer
/// that gathers the reasons.
const NOT_AVAILABLE: &str = "not available on this machine: ";

/// An event's value and unit as perf stat prints them: task-clock in
/// milliseconds (`1.10 msec`), counts with thousands separators.
fn value_and_unit(v: u64, unit: &str) -> (String, &'static str) {
    match unit {
        "ns" => (format!("{:.2}", v as f64 / 1e6), "msec"),
        _ => (grouped(v), ""),
    }
}

/// The text view, laid out as `perf stat` lays out its counts: value (with
/// thousands separators) and unit, the event, a `#` comment; an event
/// that cannot be counted reads `<not supported>` and its reason is given
/// once, below, for every event it applies to; derived metrics only where
/// their inputs were asked for.
pub fn text(r: &CounterReport) -> String {
    let mut s = String::new();
    let width = r
        .events
        .iter()
        .map(|e| e.name.len())
        .chain(r.derived.iter().map(|d| d.name.len()))
        .max()
        .unwrap_or(0);
    let _ = writeln!(s, "{}", heading(r));
    // Reasons in the order first met, with the events each applies to.
    let mut reasons: Vec<(String, Vec<&str>)> = Vec::new();
    for e in &r.events {
        let kind = match e.kind {
            Kind::Software => "sw",
            Kind::Hardware => "hw",
        };
        match (e.value, &e.unavailable) {
            (Some(v), _) => {
                let (value, unit) = value_and_unit(v, &e.unit);
                let mut notes: Vec<String> = Vec::new();
                if let Some(f) = e.scale_factor {
                    notes.push(format!(
                        "multiplexed: ran {}% of the time, scaled ×{}",
                        significant(100.0 * e.running_ns as f64 / e.enabled_ns.max(1) as f64, 3),
                        significant(f, 4)
                    ));
                }
                if e.user_only {
                    notes.push("user space only".into());
                }
                let notes = if notes.is_empty() {
                    String::new()
                } else {
                    format!("  # {}", notes.join("; "))
                };
                let _ = writeln!(
                    s,
                    "  {value:>18} {unit:<4}  {:<width$}  {kind}{notes}",
                    e.name
                );
            }
            (None, why) => {
                let why = why.as_deref().unwrap_or("no value");
                let why = why.strip_prefix(NOT_AVAILABLE).unwrap_or(why).to_string();
                match reasons.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, names)) => names.push(&e.name),
                    None => reasons.push((why, vec![&e.name])),
                }
                let _ = writeln!(
                    s,
                    "  {NOT_SUPPORTED:>18} {:<4}  {:<width$}  {kind}",
                    "", e.name
                );
            }
        }
    }
    // A derived metric whose inputs were not all asked for says nothing
    // about this run: it is left out (the JSON keeps it, with why).
    let asked = |d: &numalab::measure::counters::DerivedValue| {
        !d.unavailable
            .as_deref()
            .is_some_and(|w| w.contains("not counted (add it to --counters)"))
    };
    let shown: Vec<_> = r.derived.iter().filter(|d| asked(d)).collect();
    if !shown.is_empty() {
        let _ = writeln!(s, "derived:");
    }
    for d in shown {
        match d.value {
            Some(v) => {
                let _ = writeln!(
                    s,
                    "  {:>18} {:<4}  {:<width$}  # = {}",
                    significant(v, 4),
                    d.unit,
                    d.name,
                    d.formula
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "  {NOT_SUPPORTED:>18} {:<4}  {:<width$}  # = {}",
                    "", d.name, d.formula
                );
            }
        }
    }
    for (why, names) in &reasons {
        let _ = writeln!(s, "{NOT_SUPPORTED} {}: {why}", names.join(", "));
    }
    if let Some(u) = &r.usage {
        let _ = writeln!(s, "  {}", usage_split(u));
    }
    if let Some(t) = &r.tasks {
        s.push_str(&tasks_text(t));
    }
    // Memory-controller traffic belongs with numalab's default set
    // (`--counters`, `all`); an explicit list gets only what it names, as
    // with perf stat.
    let mc = &r.memory_controller;
    let default_set = numalab::measure::counters::default_list()
        .iter()
        .all(|d| r.events.iter().any(|e| e.name == d.name));
    match &mc.unavailable {
        _ if !default_set => {}
        Some(why) => {
            let _ = writeln!(s, "memory-controller traffic: {why}");
        }
        None => {
            let _ = writeln!(
                s,
                "memory-controller traffic: PMUs present ({}), not counted by numalab",
                mc.pmus.join(", ")
            );
        }
    }
    s
}

/// What the counts cover and where they come from.
pub fn heading(r: &CounterReport) -> &'static str {
    match r.source {
        CountSource::Perf => "counters (totals over the command's threads and children):",
        CountSource::Rusage => "counters (the kernel's accounting of the command at its end: its threads and the children it waited for; no perf event opened, --counters opens them):",
    }
}

/// The kernel's accounting split: CPU time into user and system, switches
/// into voluntary (blocked) and involuntary (preempted), and the peak
/// resident set.
pub fn usage_split(u: &ResourceUsage) -> String {
    format!(
        "of which: user {:.2} s, system {:.2} s; {} voluntary and {} involuntary switches; peak resident set {} MiB",
        u.user_ns as f64 / 1e9,
        u.system_ns as f64 / 1e9,
        grouped(u.voluntary_switches),
        grouped(u.involuntary_switches),
        significant(u.max_rss_kib as f64 / 1024.0, 4)
    )
}

/// The counts as `perf stat -x SEP` prints them, one event a line:
/// value, unit, event, time running (ns), percentage of the time enabled it
/// ran, metric value, metric unit. The value is the count (task-clock in
/// msec), `<not supported>` when there is none; a derived metric sits on
/// its first input's line (`ipc` on instructions', named in its unit), and
/// a second metric of one event on a line of its own with the first five
/// fields empty, as perf does. No header, no reasons: scripts read it.
pub fn csv(r: &CounterReport, sep: &str) -> String {
    let mut s = String::new();
    for e in &r.events {
        let (value, unit, running, percent) = match e.value {
            Some(v) => {
                let (value, unit) = match e.unit.as_str() {
                    "ns" => (format!("{:.2}", v as f64 / 1e6), "msec"),
                    _ => (v.to_string(), ""),
                };
                let percent = 100.0 * e.running_ns as f64 / e.enabled_ns.max(1) as f64;
                (value, unit, e.running_ns, percent.min(100.0))
            }
            None => (NOT_SUPPORTED.to_string(), "", 0, 0.0),
        };
        let metrics: Vec<String> = r
            .derived
            .iter()
            .filter(|d| d.formula.split_whitespace().next() == Some(e.name.as_str()))
            .filter_map(|d| {
                let v = d.value?;
                Some(format!("{}{sep}{} ({})", significant(v, 4), d.name, d.unit))
            })
            .collect();
        let first = metrics.first().cloned().unwrap_or_else(|| sep.to_string());
        let _ = writeln!(
            s,
            "{value}{sep}{unit}{sep}{}{sep}{running}{sep}{percent:.2}{sep}{first}",
            e.name
        );
        for m in metrics.iter().skip(1) {
            let _ = writeln!(s, "{}{m}", sep.repeat(5));
        }
    }
    s
}

/// Rows of the per-task table shown in text; the JSON has them all.
const TEXT_TASKS: usize = 64;

/// The per-task table: one row per thread or process, one column per event
/// some task counted, and IPC where both its inputs were counted.
fn tasks_text(t: &TaskTable) -> String {
    let mut s = String::new();
    let Some(first) = t.tasks.first() else {
        let _ = writeln!(s, "per thread: no task was seen");
        return s;
    };
    let columns: Vec<usize> = (0..first.events.len())
        .filter(|&i| t.tasks.iter().any(|k| k.events[i].value.is_some()))
        .collect();
    let ipc = t
        .tasks
        .iter()
        .any(|k| k.derived.iter().any(|d| d.name == "ipc"));
    let _ = writeln!(
        s,
        "per thread ({} tasks{}; each task counted alone, totals are their sums):",
        t.tasks.len() as u64 + t.not_listed,
        if t.not_listed > 0 {
            format!(", {} not listed", t.not_listed)
        } else {
            String::new()
        }
    );
    let name_w = t
        .tasks
        .iter()
        .map(|k| k.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 16);
    let mut header = format!("  {:>8} {:>8}  {:<name_w$}", "pid", "tid", "name");
    let widths: Vec<usize> = columns
        .iter()
        .map(|&i| first.events[i].name.len().max(10))
        .collect();
    for (&i, w) in columns.iter().zip(&widths) {
        let _ = write!(header, "  {:>w$}", first.events[i].name);
    }
    if ipc {
        header.push_str("    ipc");
    }
    let _ = writeln!(s, "{}", header.trim_end());
    for k in t.tasks.iter().take(TEXT_TASKS) {
        let name: String = k.name.chars().take(16).collect();
        let mut row = format!("  {:>8} {:>8}  {name:<name_w$}", k.pid, k.tid);
        for (&i, w) in columns.iter().zip(&widths) {
            let e = &k.events[i];
            let cell = match e.value {
                Some(v) if e.scaled => format!("{v}*"),
                Some(v) => v.to_string(),
                None => "n/a".into(),
            };
            let _ = write!(row, "  {cell:>w$}");
        }
        if ipc {
            match k
                .derived
                .iter()
                .find(|d| d.name == "ipc")
                .and_then(|d| d.value)
            {
                Some(v) => {
                    let _ = write!(row, "  {:>5}", significant(v, 3));
                }
                None => row.push_str("    n/a"),
            }
        }
        if !k.ended {
            row.push_str("  (exit not seen: read at the end)");
        }
        let _ = writeln!(s, "{}", row.trim_end());
    }
    let hidden = t.tasks.len().saturating_sub(TEXT_TASKS) as u64 + t.not_listed;
    if hidden > 0 {
        let _ = writeln!(
            s,
            "  ... {hidden} more tasks (--counters-json lists up to {})",
            numalab::measure::task_counters::MAX_TASKS
        );
    }
    if t.tasks.iter().any(|k| k.events.iter().any(|e| e.scaled)) {
        let _ = writeln!(s, "  * scaled: the task's counter was multiplexed");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab::measure::counters::{find, report, EventValue, Reading};

    #[test]
    fn counters_text_says_why_and_never_prints_zero_for_the_missing() {
        let pf = find("page-faults").unwrap();
        let cy = find("cycles").unwrap();
        let ins = find("instructions").unwrap();
        let r = report(
            vec![
                EventValue::from_reading(
                    pf,
                    Reading {
                        value: 4242,
                        enabled_ns: 10,
                        running_ns: 10,
                    },
                    false,
                ),
                EventValue::unavailable(cy, "not available on this machine: no cpu PMU".into()),
                EventValue::from_reading(
                    ins,
                    Reading {
                        value: 1000,
                        enabled_ns: 40,
                        running_ns: 10,
                    },
                    false,
                ),
            ],
            Some(64),
        );
        let t = text(&r);
        // The line whose event (after the value and unit) is `name`.
        let line = |name: &str| -> String {
            t.lines()
                .find(|l| l.starts_with("  ") && l.split_whitespace().any(|w| w == name))
                .unwrap_or_else(|| panic!("no {name} line in {t}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(line("page-faults"), "4,242 page-faults sw");
        assert_eq!(line("cycles"), "<not supported> cycles hw");
        assert_eq!(
            line("instructions"),
            "4,000 instructions hw # multiplexed: ran 25% of the time, scaled ×4"
        );
        // Its inputs were asked for: shown, with no number and no reason
        // repeated; the reason is given once, below, naming the event.
        assert_eq!(line("ipc"), "<not supported> ipc # = instructions / cycles");
        assert_eq!(
            t.lines()
                .filter(|l| l.contains("no cpu PMU"))
                .collect::<Vec<_>>(),
            ["<not supported> cycles: no cpu PMU"]
        );
        // Not asked for: no llc-load-misses, so no memory intensity.
        assert!(!t.contains("memory-intensity"), "{t}");
        // Aligned: every event name starts in the same column.
        let col = |name: &str| {
            t.lines()
                .find(|l| l.starts_with("  ") && l.split_whitespace().any(|w| w == name))
                .and_then(|l| l.find(name))
        };
        assert_eq!(col("page-faults"), col("cycles"));
        assert_eq!(col("page-faults"), col("instructions"));
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(6324039230), "6,324,039,230");
        // Three events named: no memory-controller line (perf stat's way);
        // the default set has it.
        assert!(!t.contains("memory-controller traffic"), "{t}");
        let all = report(
            numalab::measure::counters::default_list()
                .into_iter()
                .map(|e| EventValue::unavailable(e, "not available on this machine: test".into()))
                .collect(),
            Some(64),
        );
        assert!(
            text(&all).contains("memory-controller traffic: "),
            "{}",
            text(&all)
        );
    }

    #[test]
    fn task_table_marks_scaled_counts_ipc_and_running_tasks() {
        use numalab::measure::counters::derive;
        use numalab::measure::task_counters::TaskCounters;
        let read = |name: &str, value: u64, running_ns: u64| {
            EventValue::from_reading(
                find(name).unwrap(),
                Reading {
                    value,
                    enabled_ns: 100,
                    running_ns,
                },
                false,
            )
        };
        let task = |tid: i32, name: &str, ended: bool, cycles: Option<u64>| {
            let events = vec![
                read("page-faults", 10 * tid as u64, 100),
                match cycles {
                    Some(c) => read("cycles", c, 50),
                    None => EventValue::unavailable(find("cycles").unwrap(), "refused".into()),
                },
                read("instructions", 3000, 100),
            ];
            TaskCounters {
                pid: 7,
                tid,
                name: name.into(),
                derived: derive(&events, 64, true)
                    .into_iter()
                    .filter(|d| d.value.is_some())
                    .collect(),
                events,
                ended,
            }
        };
        let mut r = report(vec![], Some(64));
        r.tasks = Some(TaskTable {
            tasks: vec![
                task(7, "main", true, Some(1000)),
                task(8, "worker", false, None),
            ],
            not_listed: 2,
        });
        let t = text(&r);
        let row = |name: &str| -> String {
            t.lines()
                .find(|l| l.split_whitespace().nth(2) == Some(name))
                .unwrap_or_else(|| panic!("no {name} row in {t}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(t.contains("per thread (4 tasks, 2 not listed;"), "{t}");
        // cycles 1000 counted half the time: 2000, scaled; IPC 3000 / 2000.
        assert_eq!(row("main"), "7 7 main 70 2000* 3000 1.5");
        assert_eq!(
            row("worker"),
            "7 8 worker 80 n/a 3000 n/a (exit not seen: read at the end)"
        );
        assert!(t.contains("... 2 more tasks (--counters-json lists up to 4096)"));
        assert!(t.contains("* scaled: the task's counter was multiplexed"));
    }

    #[test]
    fn csv_is_perf_stat_x_with_metrics_on_their_first_inputs_line() {
        let read = |name: &str, value: u64, enabled_ns: u64, running_ns: u64| {
            EventValue::from_reading(
                find(name).unwrap(),
                Reading {
                    value,
                    enabled_ns,
                    running_ns,
                },
                false,
            )
        };
        let r = report(
            vec![
                read("task-clock", 1_500_000, 100, 100),
                read("instructions", 3000, 100, 100),
                read("cycles", 1000, 100, 50),
                read("llc-load-misses", 6, 100, 100),
                EventValue::unavailable(
                    find("dtlb-load-misses").unwrap(),
                    "not available on this machine: no cpu PMU".into(),
                ),
            ],
            Some(64),
        );
        assert_eq!(
            csv(&r, ";"),
            "1.50;msec;task-clock;100;100.00;;\n\
             3000;;instructions;100;100.00;1.5;ipc (instructions/cycle)\n\
             2000;;cycles;50;50.00;;\n\
             6;;llc-load-misses;100;100.00;2;llc-misses-per-kilo-instruction (per 1000 instructions)\n\
             ;;;;;0.128;memory-intensity (bytes/instruction)\n\
             <not supported>;;dtlb-load-misses;0;0.00;;\n"
        );
    }
}
