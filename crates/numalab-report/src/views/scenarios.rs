//! Text of `numalab sweep --scenarios`: the plan by role, each scenario's
//! cases normalised as the study did, and the findings with their
//! statistics.

use numalab::experiments::sweep::{
    ScenarioCaseResult, ScenarioFinding, ScenarioSet, ScenariosResult,
};
use numalab::measure::compare::Verdict;
use numalab::text::format::bytes as format_bytes;
use std::fmt::Write;

/// The roles and, per scenario, its cases and background, or why it
/// cannot run here.
pub fn plan_text(set: &ScenarioSet) -> String {
    let mut s = String::new();
    match &set.roles {
        None => s.push_str("roles: none (no node with both CPUs and memory)\n"),
        Some(r) => {
            let node = |n: Option<u32>| n.map_or("none".to_string(), |n| format!("node {n}"));
            let _ = writeln!(
                s,
                "roles: A = node {} (cores 0,1 = CPUs {}), B = {}{}, C = {}",
                r.a,
                join(&r.a_cpus),
                node(r.b),
                if r.b_cpus.is_empty() {
                    String::new()
                } else {
                    format!(" (CPUs {})", join(&r.b_cpus))
                },
                node(r.c)
            );
            for n in &r.notes {
                let _ = writeln!(s, "  note: {n}");
            }
        }
    }
    for p in &set.scenarios {
        let _ = writeln!(s, "\n{} ({}): {}", p.name.name(), p.figure, p.title);
        if let Some(why) = &p.not_applicable {
            let _ = writeln!(s, "  not applicable: {why}");
            continue;
        }
        for c in &p.cases {
            let _ = writeln!(
                s,
                "  {:<34} {:<20} {}",
                c.name,
                c.roles.join(" + "),
                c.labels.join(" ")
            );
        }
        if let Some(bg) = &p.background {
            let _ = writeln!(
                s,
                "  background: subscription {}, CPUs {}, levels {}",
                p.subscription,
                join(&bg.cpus),
                bg.levels.join(", ")
            );
        }
        let _ = writeln!(s, "  normalised to: {}", p.baseline);
    }
    s
}

fn join(v: &[u32]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// One case's line: name, roles, normalised figure and its parts.
fn case_line(s: &mut String, c: &ScenarioCaseResult) {
    let threads: Vec<String> = c
        .thread_s
        .iter()
        .map(|t| format!("{:.3} ms", t * 1e3))
        .collect();
    let _ = writeln!(
        s,
        "  {:<34} {:<20} {:>6.2}  total {:.3} ms ±{:.1}% (threads {}){}",
        c.case.name,
        c.case.roles.join(" + "),
        c.normalized,
        c.total_median_s * 1e3,
        c.total_rel_ci * 100.0,
        threads.join(", "),
        if c.verified { "" } else { "  NOT VERIFIED" }
    );
}

/// The whole result as text.
pub fn text(r: &ScenariosResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "scenarios of the classic two-thread study: {} of {} rounds, buffers {}, kernels {} / {}",
        r.rounds_run,
        r.rounds_planned,
        format_bytes(r.buffer_bytes),
        r.read_kernel,
        r.write_kernel
    );
    let _ = writeln!(
        s,
        "normalised: {}",
        match r.normalize {
            numalab::experiments::sweep::Normalize::Study =>
                "as the study did (one thread: over the local read; two threads: total time of both over two idle local readers on different nodes)",
            numalab::experiments::sweep::Normalize::Run => "over each run's fastest case (slowest thread)",
        }
    );
    for b in [&r.baselines.one_thread, &r.baselines.two_threads]
        .into_iter()
        .flatten()
    {
        let _ = write!(s, "baseline");
        case_line(&mut s, b);
    }
    for p in &r.set.scenarios {
        if let Some(why) = &p.not_applicable {
            let _ = writeln!(
                s,
                "\n{} ({}): not applicable: {why}",
                p.name.name(),
                p.figure
            );
            continue;
        }
        for run in r.runs.iter().filter(|x| x.scenario == p.name.name()) {
            let cond = match &run.background {
                None => String::new(),
                Some(b) => format!(", {} ({})", b.describe(), run.subscription_words()),
            };
            let _ = writeln!(
                s,
                "\n{} ({}): {}{}",
                run.scenario, run.figure, run.title, cond
            );
            for c in &run.cases {
                case_line(&mut s, c);
            }
        }
    }
    s.push_str(&findings_text(&r.findings));
    s
}

/// The findings, one per line, with the rule they follow.
pub fn findings_text(f: &[ScenarioFinding]) -> String {
    if f.is_empty() {
        return String::new();
    }
    let mut s = String::from("\nfindings:\n");
    for x in f {
        let _ = writeln!(
            s,
            "  ({}) {} [{}]: {} — {}",
            x.question,
            x.title,
            x.condition,
            match x.verdict {
                Verdict::Holds => "holds",
                Verdict::DoesNotHold => "does not hold",
                Verdict::CannotTell => "cannot tell",
            },
            x.detail
        );
    }
    if let Some(x) = f.first() {
        let _ = writeln!(s, "  rule: {}", x.rule);
    }
    s
}
