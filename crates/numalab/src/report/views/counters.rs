//! The counters of a launched command (`numalab run --counters`): one line
//! per event, aligned; an unavailable one says why; the derived metrics
//! with their formulas (docs/counters.md).

use crate::measure::counters::{CounterReport, Kind};
use crate::measure::task_counters::TaskTable;
use crate::text::format::significant;
use std::fmt::Write;

/// The text view.
pub fn text(r: &CounterReport) -> String {
    let mut s = String::new();
    let width = r
        .events
        .iter()
        .map(|e| e.name.len())
        .chain(r.derived.iter().map(|d| d.name.len()))
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        s,
        "counters (totals over the command's threads and children):"
    );
    for e in &r.events {
        let kind = match e.kind {
            Kind::Software => "sw",
            Kind::Hardware => "hw",
        };
        match (e.value, &e.unavailable) {
            (Some(v), _) => {
                let unit = if e.unit.is_empty() {
                    String::new()
                } else {
                    format!(" {}", e.unit)
                };
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
                    format!("  ({})", notes.join("; "))
                };
                let _ = writeln!(s, "  {:<width$}  {kind}  {v:>15}{unit}{notes}", e.name);
            }
            (None, why) => {
                let _ = writeln!(
                    s,
                    "  {:<width$}  {kind}  {}",
                    e.name,
                    why.as_deref().unwrap_or("no value")
                );
            }
        }
    }
    let _ = writeln!(s, "derived:");
    for d in &r.derived {
        match (d.value, &d.unavailable) {
            (Some(v), _) => {
                let _ = writeln!(
                    s,
                    "  {:<width$}  {:>15} {}  = {}",
                    d.name,
                    significant(v, 4),
                    d.unit,
                    d.formula
                );
            }
            (None, why) => {
                let _ = writeln!(
                    s,
                    "  {:<width$}  not available: {}  (= {})",
                    d.name,
                    why.as_deref().unwrap_or("no value"),
                    d.formula
                );
            }
        }
    }
    if let Some(t) = &r.tasks {
        s.push_str(&tasks_text(t));
    }
    let mc = &r.memory_controller;
    match &mc.unavailable {
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
            crate::measure::task_counters::MAX_TASKS
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
    use crate::measure::counters::{find, report, EventValue, Reading};

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
        let line = |name: &str| -> String {
            t.lines()
                .find(|l| l.split_whitespace().next() == Some(name))
                .unwrap_or_else(|| panic!("no {name} line in {t}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(line("page-faults"), "page-faults sw 4242");
        assert_eq!(
            line("cycles"),
            "cycles hw not available on this machine: no cpu PMU"
        );
        assert_eq!(
            line("instructions"),
            "instructions hw 4000 (multiplexed: ran 25% of the time, scaled ×4)"
        );
        assert_eq!(
            line("ipc"),
            "ipc not available: cycles not available on this machine: no cpu PMU (= instructions / cycles)"
        );
        // Aligned: every value starts in the same column.
        let col = |name: &str| {
            t.lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap()
                .find(" sw ")
                .or_else(|| {
                    t.lines()
                        .find(|l| l.trim_start().starts_with(name))
                        .unwrap()
                        .find(" hw ")
                })
        };
        assert_eq!(col("page-faults"), col("cycles"));
        assert!(t.contains("memory-controller traffic: "), "{t}");
    }

    #[test]
    fn task_table_marks_scaled_counts_ipc_and_running_tasks() {
        use crate::measure::counters::derive;
        use crate::measure::task_counters::TaskCounters;
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
}
