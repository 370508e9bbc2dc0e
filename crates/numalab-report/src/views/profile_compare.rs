//! The text of `numalab compare` on two profiles
//! ([`numalab::profile::compare`]).

use numalab::profile::compare::{ProfileComparison, ShareChange, ALPHA};
use numalab::text::format::excerpt;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Regions listed in the text at most (the JSON has them all).
const REGIONS_SHOWN: usize = 30;

fn pct(s: Option<f64>) -> String {
    s.map_or("-".into(), |v| format!("{:.1}%", 100.0 * v))
}

/// "75.0% → 25.0%, -50.0 points (p < 0.001 corrected: changed)".
fn share_words(s: &ShareChange) -> String {
    let change = match (s.share_a, s.share_b) {
        (Some(a), Some(b)) => format!(", {:+.1} points", 100.0 * (b - a)),
        _ => String::new(),
    };
    let verdict = match (s.p_corrected, s.changed) {
        (Some(p), Some(true)) => format!(" (p {} corrected: changed)", p_text(p)),
        (Some(p), Some(false)) => {
            format!(" (p {} corrected: no evidence of a change)", p_text(p))
        }
        _ if s.located_a == 0 || s.located_b == 0 => " (not located on both sides)".into(),
        _ => " (all or none remote on both sides: nothing to test)".into(),
    };
    format!("{} → {}{change}{verdict}", pct(s.share_a), pct(s.share_b))
}

fn p_text(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// "0:100%" or "0:50% 1:50%" (the four largest).
fn pages(p: &BTreeMap<i32, f64>) -> String {
    if p.is_empty() {
        return "-".into();
    }
    let mut v: Vec<(&i32, &f64)> = p.iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    let mut s: Vec<String> = v
        .iter()
        .take(4)
        .map(|(n, f)| format!("{n}:{:.0}%", 100.0 * **f))
        .collect();
    if v.len() > 4 {
        s.push(format!("+{} nodes", v.len() - 4));
    }
    s.join(" ")
}

fn count(v: Option<u64>) -> String {
    v.map_or("absent".into(), |n| n.to_string())
}

pub fn render(c: &ProfileComparison, name_a: &str, name_b: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "A: {name_a} ({}), {} samples\nB: {name_b} ({}), {} samples",
        excerpt(&c.command_a, 80),
        c.samples_a,
        excerpt(&c.command_b, 80),
        c.samples_b
    );
    let _ = writeln!(s, "remote share: {}", share_words(&c.remote));
    let _ = writeln!(
        s,
        "(two-proportion tests on located samples, Holm-corrected over the program and its regions; changed: corrected p < {ALPHA})"
    );
    let _ = writeln!(
        s,
        "\nregions (matched by kind and site; most sampled first):"
    );
    for r in c.regions.iter().take(REGIONS_SHOWN) {
        if r.kind == "static" {
            // Located, never sampled: where its pages were is all there is.
            let _ = writeln!(
                s,
                "  static {} (located, not sampled)\n     pages by node {} → {}",
                excerpt(&r.site, 100),
                pages(&r.pages_a),
                pages(&r.pages_b)
            );
            continue;
        }
        let _ = writeln!(
            s,
            "  {} {}\n     samples {} → {}; remote {}\n     pages by node {} → {}",
            r.kind,
            excerpt(&r.site, 100),
            count(r.samples_a),
            count(r.samples_b),
            share_words(&r.remote),
            pages(&r.pages_a),
            pages(&r.pages_b)
        );
        if let (Some(a), Some(b)) = (r.ns_per_access_a, r.ns_per_access_b) {
            let _ = writeln!(s, "     estimated {a:.0} → {b:.0} ns per access");
        }
    }
    if c.regions.len() > REGIONS_SHOWN {
        let _ = writeln!(
            s,
            "  ... and {} more (--json has them all)",
            c.regions.len() - REGIONS_SHOWN
        );
    }
    if !c.diagnoses.is_empty() {
        let _ = writeln!(s, "\ndiagnoses:");
        for d in &c.diagnoses {
            let state = match (d.in_a, d.in_b) {
                (true, false) => "gone",
                (false, true) => "new",
                _ => "still",
            };
            let _ = writeln!(s, "  {state:<5} {} at {}", d.kind, excerpt(&d.subject, 100));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_pages_read_as_words() {
        let mut sc = ShareChange {
            remote_a: 300,
            located_a: 400,
            remote_b: 100,
            located_b: 400,
            share_a: Some(0.75),
            share_b: Some(0.25),
            p_value: Some(1e-40),
            p_corrected: Some(3e-40),
            changed: Some(true),
        };
        assert_eq!(
            share_words(&sc),
            "75.0% → 25.0%, -50.0 points (p < 0.001 corrected: changed)"
        );
        sc.p_corrected = Some(0.2);
        sc.changed = Some(false);
        assert!(share_words(&sc).ends_with("(p 0.200 corrected: no evidence of a change)"));
        sc.located_b = 0;
        sc.share_b = None;
        sc.p_corrected = None;
        sc.changed = None;
        assert_eq!(share_words(&sc), "75.0% → - (not located on both sides)");
        let p = BTreeMap::from([(0, 0.1), (1, 0.6), (2, 0.1), (3, 0.1), (4, 0.1)]);
        assert_eq!(pages(&p), "1:60% 0:10% 2:10% 3:10% +1 nodes");
    }
}
