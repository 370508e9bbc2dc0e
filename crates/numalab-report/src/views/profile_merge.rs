//! `numalab profile --merge DIR`: an MPI job's profiles, one line per rank,
//! then the sites over every rank and the ranks that stand out.

use numalab::profile::merge::MergedProfiles;
use numalab::text::format::bytes as format_bytes;
use std::fmt::Write;

/// The most sites the text lists (the most sampled); JSON has them all.
pub const SITE_LINES: usize = 20;

fn percent(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |v| format!("{:.0}%", v * 100.0))
}

pub fn merged_text(m: &MergedProfiles) -> String {
    let mut t = String::new();
    let program = m
        .ranks
        .first()
        .map(|r| r.program.join(" "))
        .unwrap_or_default();
    let _ = writeln!(t, "{} ranks of '{program}'", m.ranks.len());
    // Host names run long (FQDNs): the column is as wide as the longest,
    // within reason.
    let hw = m
        .ranks
        .iter()
        .map(|r| r.host.as_deref().unwrap_or("-").chars().count())
        .max()
        .unwrap_or(1)
        .clamp(4, 32);
    let _ = writeln!(
        t,
        "{:>8} {:<hw$} {:>8} {:>8} {:>13} {:>8} {:>8} {:>7} {:>8}",
        "rank", "host", "samples", "remote", "interval", "nodes", "threads", "cost", "warnings"
    );
    for r in &m.ranks {
        let nodes: Vec<String> = r.cpu_nodes.iter().map(u32::to_string).collect();
        let host: String = r.host.as_deref().unwrap_or("-").chars().take(32).collect();
        let _ = writeln!(
            t,
            "{:>8} {:<hw$} {:>8} {:>8} {:>13} {:>8} {:>8} {:>7} {:>8}",
            r.rank,
            host,
            r.samples,
            percent(r.remote_share),
            r.remote_interval
                .map_or("-".to_string(), |(lo, hi)| format!(
                    "{:.0}-{:.0}%",
                    lo * 100.0,
                    hi * 100.0
                )),
            nodes.join(","),
            r.threads,
            r.cost_percent
                .map_or("-".to_string(), |c| format!("{c:.1}%")),
            r.warnings
        );
    }
    let _ = writeln!(
        t,
        "sites over every rank ({} in all, the {} most sampled; remote: of the samples, all ranks together):",
        m.sites.len(),
        m.sites.len().min(SITE_LINES)
    );
    for s in m.sites.iter().take(SITE_LINES) {
        let spread: Vec<f64> = s.by_rank.iter().filter_map(|(_, _, x)| *x).collect();
        let range = match (
            spread.iter().copied().reduce(f64::min),
            spread.iter().copied().reduce(f64::max),
        ) {
            (Some(lo), Some(hi)) if spread.len() > 1 => {
                format!(", ranks {:.0}-{:.0}%", lo * 100.0, hi * 100.0)
            }
            _ => String::new(),
        };
        let _ = writeln!(
            t,
            "  {:<7} {:>10}  {} rank{}  samples {:>6}  remote {}{range}  {}",
            s.kind,
            format_bytes(s.bytes),
            s.ranks,
            numalab::text::format::s(s.ranks),
            s.samples,
            percent(s.sample_remote_share),
            s.site
        );
    }
    if m.findings.is_empty() {
        let _ = writeln!(t, "no rank stands out ({})", m.rule);
    } else {
        for f in &m.findings {
            let _ = writeln!(t, "finding: {f}");
        }
        let _ = writeln!(t, "rule: {}", m.rule);
    }
    t
}
