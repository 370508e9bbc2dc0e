//! The text of `numalab sweep`: the plan, the list of cases, the runs
//! with their twins, and the findings.

use numalab::experiments::sweep::{
    CaseResult, Findings, PlannedCase, SweepRequest, SweepResult, SweepRun,
};
use numalab::measure::memory_traffic::{label, MemoryTraffic, Source};
use numalab::text::format::bytes as format_bytes;
use std::fmt::Write;

/// What a sweep will run, one line per thread count: the cases of the
/// full enumeration and, folded, the classes under the machine tree's
/// `machine` automorphisms (of which `nodes` move the nodes) and thread
/// exchange.
pub fn plan_text(
    req: &SweepRequest,
    plans: &[(usize, u64, Vec<PlannedCase>)],
    nodes: &str,
    machine: &str,
) -> String {
    let mut s = String::new();
    for (t, total, cases) in plans {
        let _ = writeln!(
            s,
            "sweep: {t} thread(s): {total} cases ({} CPUs x {} memory nodes x {} access(es), per thread){}",
            req.cpus.len(),
            req.mem_nodes.len(),
            req.accesses.len(),
            if req.full {
                String::new()
            } else {
                format!(
                    ", {} classes under the machine tree's {machine} automorphism{} ({nodes} of the nodes) and thread exchange",
                    cases.len(),
                    if machine == "1" { "" } else { "s" },
                )
            }
        );
    }
    s
}

/// The cases of a plan (`sweep --list`): label, hop class and class size.
pub fn list_text(plans: &[(usize, u64, Vec<PlannedCase>)]) -> String {
    let mut s = String::new();
    for (t, _, cases) in plans {
        let _ = writeln!(
            s,
            "\n{t} thread(s): {:<28} {:>6} {:>10}",
            "case", "hops", "class size"
        );
        for c in cases {
            let _ = writeln!(
                s,
                "  {:<36} {:>6} {:>10}",
                c.label(),
                c.hop_class(),
                c.class_size
            );
        }
    }
    s
}

/// The answer to a classic question: `holds`, `does not hold` or `cannot tell`.
pub fn answer(holds: Option<bool>) -> &'static str {
    match holds {
        Some(true) => "holds",
        Some(false) => "does not hold",
        None => "cannot tell",
    }
}

/// The exact symmetry order of a result (older results have the number
/// only).
fn symmetry_order(r: &SweepResult) -> String {
    if r.node_symmetry_order.is_empty() {
        r.node_automorphisms.to_string()
    } else {
        r.node_symmetry_order.clone()
    }
}

/// The truth table of every run, fastest case first.
/// What the "mem GB/s" column is: assumed (with why nothing was counted),
/// or assumed per thread beside what the memory controllers measured over
/// all the cases.
pub fn memory_text(t: &MemoryTraffic) -> String {
    match t.source {
        Source::Assumed => format!("mem GB/s {}", label(t)),
        Source::Measured => format!(
            "mem GB/s per thread assumed (write-allocate counted); over all cases, whole machine: {:.2} GB/s {}",
            t.gbps.unwrap_or(0.0),
            label(t)
        ),
    }
}

pub fn text(r: &SweepResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "placement sweep: kernels {} / {}, {} per buffer, {} node symmetr{}{}{}",
        r.read_kernel,
        r.write_kernel,
        format_bytes(r.buffer_bytes),
        symmetry_order(r),
        if r.node_automorphisms == 1 {
            "y"
        } else {
            "ies"
        },
        if r.machine_symmetry_order.is_empty() {
            String::new()
        } else {
            format!(" ({} of the whole machine tree)", r.machine_symmetry_order)
        },
        if r.folded {
            ", folded"
        } else {
            ", every case (--full)"
        }
    );
    let _ = writeln!(s, "{}", memory_text(&r.memory_traffic));
    for run in &r.runs {
        let cond = run.condition();
        let _ = writeln!(
            s,
            "\n{} thread(s), {cond}: {} of {} classes run ({} cases in all; {} of {} hop classes), {:.1} s",
            run.threads,
            run.cases_run,
            run.classes,
            run.total_cases,
            run.hop_classes_run,
            run.hop_classes,
            run.elapsed_s
        );
        let _ = writeln!(
            s,
            "  norm: {}; ms/pass: the slowest thread's",
            run.normalization
        );
        let width = run
            .cases
            .iter()
            .map(|c| c.labels.join(" ").len())
            .max()
            .unwrap_or(0)
            .max(26);
        let _ = writeln!(
            s,
            "  {:<width$} {:>9} {:>7} {:>6} {:>10} {:>9}  verified",
            "labels (node.core.r|w.mem)", "hops", "class", "norm", "ms/pass", "mem GB/s",
        );
        let mut order: Vec<&CaseResult> = run.cases.iter().collect();
        order.sort_by(|a, b| a.normalized.total_cmp(&b.normalized));
        for c in order {
            let gbps: f64 = c.threads.iter().map(|t| t.memory_gbps).sum();
            let bg = if c.background_achieved.is_empty() {
                String::new()
            } else {
                format!(
                    "  bg {:.2} GB/s x{}",
                    c.background_achieved.iter().sum::<f64>()
                        / c.background_achieved.len() as f64
                        / 1e9,
                    c.background_achieved.len()
                )
            };
            // Threads taking turns on one CPU, or SMT siblings, are marked.
            let share = match c.sharing.as_str() {
                "cpu" => "  (one CPU)",
                "core" => "  (SMT siblings)",
                _ => "",
            };
            let _ = writeln!(
                s,
                "  {:<width$} {:>9} {:>7} {:>6.2} {:>10.2} {:>9.2}  {}{bg}{share}",
                c.labels.join(" "),
                c.hop_class,
                c.class_size,
                c.normalized,
                c.seconds.median * 1e3,
                gbps,
                if c.verified {
                    "yes".to_string()
                } else {
                    format!("NO: {}", c.problems.join("; "))
                },
            );
        }
        twins_text(&mut s, run);
    }
    let bad: Vec<String> = r
        .buffers
        .iter()
        .filter(|b| !b.at_start.verified || !b.at_end.verified)
        .map(|b| format!("thread {} node {}", b.thread, b.node))
        .collect();
    let _ = writeln!(
        s,
        "\nbuffers: {} ({} per thread), {}",
        r.buffers.len(),
        r.mem_nodes.len(),
        if bad.is_empty() {
            "every page on its node at the start and at the end".to_string()
        } else {
            format!("NOT where asked: {}", bad.join(", "))
        }
    );
    s
}

/// The classes measured at two members: both members' median ms per pass
/// and the rank test's ratio of the twin to the representative.
fn twins_text(s: &mut String, run: &SweepRun) {
    if run.twins.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "  twins (a second member of {} class(es), interleaved runs; finding e):",
        run.twins.len()
    );
    for t in &run.twins {
        let ms =
            |v: &[f64]| numalab::measure::stats::median(v.to_vec()).map_or(f64::NAN, |m| m * 1e3);
        let test = t.test.as_ref().map_or_else(
            || "no rank test in this result".to_string(),
            |c| c.describe(),
        );
        let _ = writeln!(
            s,
            "    {} ({:.2} ms) vs {} ({:.2} ms), {}: {test}{}",
            t.labels.join(" "),
            ms(&t.samples),
            t.twin_labels.join(" "),
            ms(&t.twin_samples),
            t.moved_by.name(),
            if t.verified { "" } else { "  NOT verified" }
        );
    }
}

/// The findings as a table: question, answer, ratio, detail.
pub fn findings_text(f: &[Findings]) -> String {
    let mut s = String::new();
    for set in f {
        let _ = writeln!(s, "\nfindings, {}:", set.condition);
        for x in &set.findings {
            let answer = answer(x.holds);
            let _ = writeln!(
                s,
                "  ({}) {}\n      {answer}{}: {}",
                x.question,
                x.title,
                x.ratio.map_or(String::new(), |r| format!(" ({r:.2}x)")),
                x.detail
            );
        }
    }
    s
}
