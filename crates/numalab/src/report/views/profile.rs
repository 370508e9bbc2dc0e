//! `numalab profile`: the text of a profile (regions by allocation site,
//! their access matrices and pages, the threads).

use crate::profile::{Profile, RegionProfile};
use crate::text::format::bytes as format_bytes;
use std::fmt::Write;

fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.0}%", x * 100.0))
}

/// "0→0 120, 0→1 40": sampled accesses by CPU node → memory node.
fn matrix(r: &RegionProfile) -> String {
    let cells: Vec<String> = r
        .accesses
        .iter()
        .flat_map(|(c, row)| row.iter().map(move |(m, n)| format!("{c}→{m} {n}")))
        .collect();
    if cells.is_empty() {
        "-".into()
    } else {
        cells.join(", ")
    }
}

fn pages(r: &RegionProfile) -> String {
    if r.pages_by_node.is_empty() {
        return "-".into();
    }
    r.pages_by_node
        .iter()
        .map(|(n, p)| match n {
            -1 => format!("absent:{p}"),
            -2 => format!("beyond:{p}"),
            n => format!("{n}:{p}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The text view.
pub fn render(p: &Profile) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "profile of: {}\n{} samples ({} pages armed, {} per second asked; allocations of {} or more tracked), remote {}",
        p.command.join(" "),
        p.samples,
        p.pages_armed,
        p.rate,
        format_bytes(p.min_bytes),
        percent(p.remote_share)
    );
    if p.unattributed > 0 {
        let _ = writeln!(
            s,
            "{} samples outside the tracked allocations",
            p.unattributed
        );
    }
    let _ = writeln!(s, "\nregions (by allocation site, most sampled first):");
    for (i, r) in p.regions.iter().enumerate() {
        let _ = writeln!(
            s,
            "{:>3}. {} {} in {} allocation{} at {}\n     samples {} (reads {}, writes {}{}), remote {}, distance ratio {}\n     accesses CPU node→memory node: {}\n     pages by node: {}\n     threads: {}",
            i + 1,
            r.kind,
            format_bytes(r.bytes),
            r.allocations,
            if r.allocations == 1 { "" } else { "s" },
            r.site,
            r.samples,
            r.reads,
            r.writes,
            if r.unknown_access > 0 {
                format!(", unknown {}", r.unknown_access)
            } else {
                String::new()
            },
            percent(r.remote_share),
            r.distance_ratio.map_or("-".into(), |d| format!("{d:.2}")),
            matrix(r),
            pages(r),
            r.threads
                .iter()
                .map(|(t, n)| format!("{t} ({n})"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if p.regions.is_empty() {
        let _ = writeln!(s, "  none");
    }
    let _ = writeln!(s, "\nthreads:");
    for t in &p.threads {
        let pinned = match t.allowed_cpus {
            Some(1) => "pinned".to_string(),
            Some(n) => format!("may run on {n} CPUs"),
            None => "affinity not recorded".to_string(),
        };
        let _ = writeln!(
            s,
            "  {:>8}  samples {:>6}  CPUs {:?}  nodes {:?}  remote {}  {pinned}",
            t.tid,
            t.samples,
            t.cpus,
            t.nodes,
            percent(t.remote_share)
        );
    }
    if !p.diagnoses.is_empty() {
        let _ = writeln!(s, "\ndiagnoses:");
        for d in &p.diagnoses {
            let _ = writeln!(s, "  [{}] {}\n    fix: {}", d.kind, d.text, d.fix);
        }
    }
    for w in &p.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}
