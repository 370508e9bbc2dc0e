//! Text of `numalab sweep --scenarios`: the plan by role, each scenario's
//! cases normalised as the study did, and the findings with their
//! statistics.

use numalab::experiments::sweep::{
    ScenarioCaseResult, ScenarioFinding, ScenarioSet, ScenariosResult,
};
use numalab::measure::compare::Verdict;
use numalab::measure::memory_traffic::{MemoryTraffic, Source};
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
    if let Some(t) = traffic_line(&c.memory_traffic) {
        let _ = writeln!(s, "    {t}");
    }
}

fn nodes_of(nodes: &[u32]) -> String {
    match nodes {
        [] => "nodes unknown".to_string(),
        [n] => format!("node {n}"),
        _ => format!("nodes {}", join(nodes)),
    }
}

/// What the memory controllers of each package and each link port moved
/// during a case, when they were counted.
pub fn traffic_line(t: &MemoryTraffic) -> Option<String> {
    if t.source != Source::Measured || t.per_package.is_empty() {
        return None;
    }
    let packages: Vec<String> = t
        .per_package
        .iter()
        .map(|p| {
            let secs = t.seconds.unwrap_or(0.0).max(1e-9);
            let rate = |b: u64| b as f64 / secs / 1e9;
            match (p.read_bytes, p.write_bytes) {
                (Some(r), Some(w)) => format!(
                    "{} {:.2} read + {:.2} written",
                    nodes_of(&p.nodes),
                    rate(r),
                    rate(w)
                ),
                _ => format!("{} {:.2}", nodes_of(&p.nodes), p.gbps),
            }
        })
        .collect();
    let mut line = format!("memory controllers, GB/s: {}", packages.join("; "));
    if !t.links.is_empty() {
        let links: Vec<String> = t
            .links
            .iter()
            .map(|l| format!("{} of {} {:.2}", l.device, nodes_of(&l.nodes), l.gbps))
            .collect();
        let _ = write!(line, "; links sent, GB/s: {}", links.join("; "));
    }
    Some(line)
}

/// Whether the memory controllers and links were counted during the
/// cases, and if not why (one line for the whole run).
pub fn traffic_header(r: &ScenariosResult) -> String {
    let cases: Vec<&MemoryTraffic> = r
        .runs
        .iter()
        .flat_map(|x| x.cases.iter())
        .chain(
            [&r.baselines.one_thread, &r.baselines.two_threads]
                .into_iter()
                .flatten(),
        )
        .map(|c| &c.memory_traffic)
        .collect();
    let Some(first) = cases.first() else {
        return String::new();
    };
    if cases.iter().all(|t| t.source == Source::Assumed) {
        return format!(
            "memory-controller and link traffic: not measured: {}",
            first.reason.as_deref().unwrap_or("unknown")
        );
    }
    let mut s = String::from(
        "memory-controller traffic: measured per package during each case (whole machine, background included)",
    );
    match cases.iter().find_map(|t| t.links_reason.as_deref()) {
        Some(why) => {
            let _ = write!(s, "; links not counted: {why}");
        }
        None => s.push_str("; link ports' data sent as well"),
    }
    s
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
    let header = traffic_header(r);
    if !header.is_empty() {
        let _ = writeln!(s, "{header}");
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use numalab::measure::memory_traffic::{LinkTraffic, PackageTraffic};

    fn package(cpu: i32, nodes: Vec<u32>, read: u64, write: u64) -> PackageTraffic {
        PackageTraffic {
            cpu,
            nodes,
            read_bytes: Some(read),
            write_bytes: Some(write),
            bytes: read + write,
            gbps: 0.0,
        }
    }

    #[test]
    fn measured_traffic_is_given_per_package_and_link() {
        let t = MemoryTraffic::measured(vec!["uncore_imc_0".into()], 6e9 as u64, 1e9 as u64, 2.0)
            .with_breakdown(
                vec![
                    package(28, vec![1], 1e9 as u64, 0),
                    package(0, vec![0], 5e9 as u64, 1e9 as u64),
                ],
                vec![LinkTraffic {
                    device: "uncore_upi_0".into(),
                    cpu: 0,
                    nodes: vec![0],
                    bytes: 3e9 as u64,
                    gbps: 0.0,
                }],
                None,
            );
        assert_eq!(
            traffic_line(&t).unwrap(),
            "memory controllers, GB/s: node 0 2.50 read + 0.50 written; node 1 0.50 read + 0.00 written; links sent, GB/s: uncore_upi_0 of node 0 1.50"
        );
        let assumed = MemoryTraffic::assumed("no PMU".into());
        assert_eq!(traffic_line(&assumed), None, "nothing counted, no zeros");
    }

    #[test]
    fn a_package_of_several_nodes_or_a_total_only_is_worded_so() {
        let mut p = package(0, vec![0, 1], 0, 0);
        p.read_bytes = None;
        p.write_bytes = None;
        p.bytes = 4e9 as u64;
        let t = MemoryTraffic::measured_total(vec!["amd_df".into()], 4e9 as u64, 1.0)
            .with_breakdown(
                vec![p],
                Vec::new(),
                Some("amd_df present, but numalab knows no data event of its xGMI links".into()),
            );
        assert_eq!(
            traffic_line(&t).unwrap(),
            "memory controllers, GB/s: nodes 0,1 4.00"
        );
    }
}
