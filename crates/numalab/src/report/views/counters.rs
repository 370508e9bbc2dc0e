//! The counters of a launched command (`numalab run --counters`): one line
//! per event, aligned; an unavailable one says why; the derived metrics
//! with their formulas (docs/counters.md).

use crate::measure::counters::{CounterReport, Kind};
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
}
