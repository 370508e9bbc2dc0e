//! Where a running process's memory and threads are (`numalab verify`, and
//! `numalab run --verify` at the command's exit).

use numalab::cluster::ranks::RankRecord;
use numalab::cluster::tasks::TaskRecord;
use numalab::placement::pin_check::PinCheck;
use numalab::placement::ProcessPlacement;
use numalab::text::format::bytes as format_bytes;
use std::fmt::Write;

/// The most mappings the text lists without `--all`: the largest.
pub const MAPPING_LINES: usize = 40;

/// The text view, shared with `numalab run --verify`.
pub fn render(p: &ProcessPlacement, all: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "process {} ({})", p.pid, p.program);
    if let Some(pol) = &p.process_policy {
        let _ = writeln!(s, "memory policy: {pol}");
    }
    let total: u64 = p.bytes_by_node.values().sum();
    let _ = writeln!(
        s,
        "resident memory by node ({} in all):",
        format_bytes(total)
    );
    for (n, b) in &p.bytes_by_node {
        let _ = writeln!(
            s,
            "  node {n:>3}  {:>10}  {:>5.1}%",
            format_bytes(*b),
            100.0 * *b as f64 / total.max(1) as f64
        );
    }
    let private: u64 = p.private_bytes_by_node.values().sum();
    let _ = writeln!(
        s,
        "  of which allocated by the process (anon, heap, stack; follows its policy): {}",
        p.private_bytes_by_node
            .iter()
            .map(|(n, b)| format!(
                "node {n} {} ({:.1}%)",
                format_bytes(*b),
                100.0 * *b as f64 / private.max(1) as f64
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(s, "threads:");
    for t in &p.threads {
        let _ = writeln!(
            s,
            "  {:>7} {:<16} last on CPU {:<4} allowed CPUs {{{}}} nodes {{{}}}",
            t.tid,
            t.name,
            t.last_cpu.map(|c| c.to_string()).unwrap_or("?".into()),
            t.cpus_allowed,
            t.mems_allowed
        );
    }
    let _ = writeln!(
        s,
        "mappings{}:",
        if all { "" } else { " with resident pages" }
    );
    let shown: Vec<&numalab::placement::verify::Mapping> = p
        .mappings
        .iter()
        .filter(|m| all || m.pages_total > 0)
        .collect();
    // A program whose heap a plan placed block by block can have hundreds
    // of mappings (numpy had about 370): the text keeps the largest, in
    // address order, and says what it left out; --all and the JSON keep
    // every one.
    let kept: Vec<&numalab::placement::verify::Mapping> = if all || shown.len() <= MAPPING_LINES {
        shown.clone()
    } else {
        let mut by_size: Vec<usize> = (0..shown.len()).collect();
        by_size.sort_by_key(|&i| std::cmp::Reverse(shown[i].pages_total));
        by_size.truncate(MAPPING_LINES);
        by_size.sort_unstable();
        by_size.into_iter().map(|i| shown[i]).collect()
    };
    for m in &kept {
        let nodes: Vec<String> = m
            .pages_by_node
            .iter()
            .map(|(n, c)| format!("N{n}={c}"))
            .collect();
        let _ = writeln!(
            s,
            "  {:>14} {:<18} {:>8} pages  {:<24} {}",
            m.address,
            m.policy,
            m.pages_total,
            nodes.join(" "),
            m.name
        );
    }
    if kept.len() < shown.len() {
        let pages: u64 = shown.iter().map(|m| m.pages_total).sum::<u64>()
            - kept.iter().map(|m| m.pages_total).sum::<u64>();
        let _ = writeln!(
            s,
            "  ... and {} smaller mappings with {pages} resident pages (every mapping: `numalab verify --all`, or the JSON: --json, run's --verify-json)",
            shown.len() - kept.len()
        );
    }
    s
}

/// `numalab verify --ranks`: a line per rank (host, its CPUs and nodes,
/// the CPUs its threads were seen on, its memory by node), then the
/// problems found, or that there are none, and the files skipped.
pub fn ranks_text(ranks: &[RankRecord], problems: &[String], skipped: &[String]) -> String {
    let mut t = format!(
        "{:>6}  {:<20} {:<12} {:<8} {:<12} memory by node\n",
        "rank", "host", "CPUs", "nodes", "seen on"
    );
    for r in ranks {
        let mem: Vec<String> = r
            .private_bytes_by_node
            .iter()
            .map(|(n, b)| format!("{n}: {}", format_bytes(*b)))
            .collect();
        let _ = writeln!(
            t,
            "{:>6}  {:<20} {:<12} {:<8} {:<12} {}",
            r.rank,
            r.host,
            r.cpus.to_string(),
            r.nodes.to_string(),
            r.seen_cpus.to_string(),
            mem.join(", ")
        );
    }
    if problems.is_empty() {
        let _ = writeln!(
            t,
            "{} ranks: no two on one host share a CPU, every thread ran on its rank's CPUs, every rank's memory is on its nodes",
            ranks.len()
        );
    }
    for p in problems {
        let _ = writeln!(t, "problem: {p}");
    }
    for s in skipped {
        let _ = writeln!(t, "skipped: {s}");
    }
    t
}

/// `verify --slurm-job`: a line per task (its step, host, CPUs it may run
/// on against what its binding gives, memory by node), then the problems
/// and notes.
pub fn slurm_text(
    job: &str,
    step: Option<&str>,
    nodelist: &str,
    tasks: &[TaskRecord],
    problems: &[String],
    notes: &[String],
) -> String {
    let steps: std::collections::BTreeSet<&str> = tasks.iter().map(|t| t.step.as_str()).collect();
    let mut t = format!(
        "Slurm job {job}{} on {nodelist}: {} task{} in {} step{}\n",
        step.map(|s| format!(" step {s}")).unwrap_or_default(),
        tasks.len(),
        numalab::text::format::s(tasks.len()),
        steps.len(),
        numalab::text::format::s(steps.len()),
    );
    let _ = writeln!(
        t,
        "{:>5} {:>6}  {:<12} {:>5} {:>8}  {:<12} {:<10} {:<16} {:<8} {:<10} memory by node",
        "task",
        "step",
        "host",
        "local",
        "pid",
        "program",
        "may run on",
        "--cpu-bind",
        "seen on",
        "--mem-bind"
    );
    for r in tasks {
        let mem: Vec<String> = r
            .private_bytes_by_node
            .iter()
            .map(|(n, b)| format!("{n}: {}", format_bytes(*b)))
            .collect();
        let opt = |x: Option<u32>| x.map_or("-".to_string(), |v| v.to_string());
        let _ = writeln!(
            t,
            "{:>5} {:>6}  {:<12} {:>5} {:>8}  {:<12} {:<10} {:<16} {:<8} {:<10} {}",
            opt(r.task),
            r.step,
            r.host,
            opt(r.local),
            r.pid,
            r.program,
            r.cpus.to_string(),
            r.cpu_bind,
            r.seen_cpus.to_string(),
            r.mem_bind,
            mem.join(", ")
        );
    }
    if problems.is_empty() {
        let n = tasks.len();
        let cpu = tasks.iter().filter(|r| r.bound_cpus.is_some()).count();
        let mem = tasks.iter().filter(|r| r.bound_nodes.is_some()).count();
        if cpu + mem == 0 {
            let _ = writeln!(t, "no problem, and no binding to judge");
        } else {
            let _ = writeln!(
                t,
                "no problem: {cpu} of {n} task{} bound by --cpu-bind, each within its CPUs; {mem} of {n} by --mem-bind, each with its memory on its nodes",
                numalab::text::format::s(n),
            );
        }
    }
    for p in problems {
        let _ = writeln!(t, "problem: {p}");
    }
    for n in notes {
        let _ = writeln!(t, "note: {n}");
    }
    t
}

/// `run --pin --verify`: each thread, the CPU it was pinned to and the
/// kernel's word on it, a line each.
pub fn pins_text(c: &PinCheck) -> String {
    let list: Vec<String> = c.cpus.iter().map(u32::to_string).collect();
    let pinned = c.threads.iter().filter(|t| t.cpu.is_some()).count();
    let mut out = format!(
        "pinned threads (--pin {}{}): {pinned} pinned, {} skipped: {}\n",
        list.join(","),
        if c.skip_mask != 0 {
            format!(", --skip 0x{:x}", c.skip_mask)
        } else {
            String::new()
        },
        c.threads.len() - pinned,
        if c.verified {
            "each ran on its CPU (checked with the kernel)"
        } else if c.threads.is_empty() {
            "no thread was pinned (the preload library did not start in the command)"
        } else {
            "NOT as asked"
        }
    );
    for t in &c.threads {
        let who = if t.ordinal == 0 {
            format!("thread 0 (main, tid {})", t.tid)
        } else {
            format!("thread {} (tid {})", t.ordinal, t.tid)
        };
        let what = match (t.cpu, &t.problem) {
            (None, _) => "skipped (--skip): on the command's CPUs".to_string(),
            (Some(_), Some(p)) => p.clone(),
            (Some(cpu), None) => format!(
                "CPU {cpu}, ran there{}",
                if t.allowed_at_exit.is_some() {
                    ", still there at the exit"
                } else {
                    ", ended before the command"
                }
            ),
        };
        let _ = writeln!(out, "  {who}: {what}");
    }
    if c.other_processes > 0 {
        let _ = writeln!(
            out,
            "  and {} other process(es) the command started pinned their own threads from the list's start (the preload library is inherited)",
            c.other_processes
        );
    }
    if !c.unseen_tids.is_empty() {
        let tids: Vec<String> = c.unseen_tids.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "  not pinned: threads {} ran at the exit without starting through pthread_create (the library never saw them)",
            tids.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab::placement::verify::Mapping;
    use std::collections::BTreeMap;

    fn process(mappings: usize) -> ProcessPlacement {
        ProcessPlacement {
            pid: 7,
            program: "prog".into(),
            threads: Vec::new(),
            mappings: (0..mappings)
                .map(|i| Mapping {
                    address: format!("{:x}", 0x1000 * (i + 1)),
                    policy: "default".into(),
                    name: "anon".into(),
                    page_size: 4096,
                    // Mapping 3 is empty; the others hold i + 1 pages.
                    pages_by_node: BTreeMap::from([(0, if i == 3 { 0 } else { i as u64 + 1 })]),
                    pages_total: if i == 3 { 0 } else { i as u64 + 1 },
                })
                .collect(),
            bytes_by_node: BTreeMap::from([(0, 1 << 20)]),
            private_bytes_by_node: BTreeMap::from([(0, 1 << 20)]),
            process_policy: None,
        }
    }

    fn mapping_lines(text: &str) -> Vec<&str> {
        text.lines()
            .skip_while(|l| !l.starts_with("mappings"))
            .skip(1)
            .collect()
    }

    #[test]
    fn many_mappings_list_the_largest_in_address_order_and_say_what_is_left_out() {
        let text = render(&process(100), false);
        let lines = mapping_lines(&text);
        assert_eq!(lines.len(), MAPPING_LINES + 1, "{text}");
        // The 40 largest are mappings 60..100 (61..100 pages), in order.
        assert!(
            lines[0].contains(&format!("{:x}", 0x1000 * 61)),
            "{}",
            lines[0]
        );
        assert!(
            lines[39].contains(&format!("{:x}", 0x1000 * 100)),
            "{}",
            lines[39]
        );
        // 99 with pages, 40 shown: 59 left, with 1+2+3+5+...+60 pages.
        let left: u64 = (1..=60).sum::<u64>() - 4;
        assert_eq!(
            lines[40],
            format!("  ... and 59 smaller mappings with {left} resident pages (every mapping: `numalab verify --all`, or the JSON: --json, run's --verify-json)")
        );
        // --all lists every one, the empty one too.
        assert_eq!(mapping_lines(&render(&process(100), true)).len(), 100);
        // Few mappings: all of them, no footer.
        assert_eq!(mapping_lines(&render(&process(10), false)).len(), 9);
    }
}
