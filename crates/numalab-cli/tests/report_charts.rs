//! Charts of report.html stay readable however much they show: a report
//! page holding the sweep of the Quartet guest (4 nodes in a ring, 2 CPUs
//! each: 108 two-thread symmetry classes in 21 hop classes) is rendered in
//! headless Chromium, which measures every text of the sweep charts as
//! laid out in a real font. No text may be cut to "…", no two texts may
//! overlap, and every class must be named by a label of its own.
//!
//! The sweep cannot run on this one-node machine, so the cases are planned
//! from the Quartet topology file with the sweep's own space (the classes
//! `numalab sweep --list --topology ... --threads 2` prints) and given
//! made-up times; the page is then written by the report's own renderer.
//! Chromium is software the README's test command installs
//! (scripts/install-deps.sh --test), not hardware: without it this fails.

mod common;

use common::browser::{self, RenderOptions};
use common::{fixture, scratch};
use numalab::experiments::sweep::{
    findings, Access, CaseResult, CaseTime, SweepResult, SweepRun, SweepSpace, ThreadResult,
};
use numalab::report::html;
use numalab::report::part::{PartName, PartResult};
use numalab::report::results::{Mode, PartRecord, PartStatus};
use numalab::report::session::new_document;
use numalab::report::summary::Summary;
use numalab::report::views::sweep::SweepOutcome;
use numalab::Machine;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// Made-up results of every class of `threads` threads of `space`: slower
/// with each hop and each writer, and a little different within a hop
/// class, as real ones are.
fn run_of(space: &SweepSpace, threads: usize) -> SweepRun {
    let planned = space.folded(threads);
    let mut cases: Vec<CaseResult> = planned
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let hops: u32 = p.threads.iter().map(|t| t.hops.unwrap_or(0)).sum();
            let writers = p
                .threads
                .iter()
                .filter(|t| t.access == Access::Write)
                .count();
            let s =
                1e-3 * (1.0 + 0.35 * hops as f64 + 0.2 * writers as f64 + (i % 7) as f64 * 0.02);
            CaseResult {
                labels: p.threads.iter().map(|t| t.label()).collect(),
                hop_class: p.hop_class(),
                sharing: "none".into(),
                class_size: p.class_size,
                class_key: p.class_key.clone(),
                samples: vec![s * 0.99, s, s * 1.01],
                seconds: CaseTime {
                    median: s,
                    best: s * 0.98,
                    max: s * 1.05,
                    spread: 0.02,
                    rel_ci: 0.01,
                    samples: 5,
                },
                normalized: 0.0,
                threads: p
                    .threads
                    .iter()
                    .map(|t| ThreadResult {
                        case: *t,
                        label: t.label(),
                        seconds: s,
                        gbps: 8.0,
                        memory_gbps: 8.0,
                        seen_cpus: vec![t.cpu],
                        verified: true,
                    })
                    .collect(),
                background_achieved: Vec::new(),
                background_cpus: Vec::new(),
                verified: true,
                problems: Vec::new(),
            }
        })
        .collect();
    let fastest = cases
        .iter()
        .map(|c| c.seconds.median)
        .fold(f64::INFINITY, f64::min);
    for c in &mut cases {
        c.normalized = c.seconds.median / fastest;
    }
    let hop_classes = cases
        .iter()
        .map(|c| c.hop_class.as_str())
        .collect::<BTreeSet<_>>()
        .len() as u64;
    SweepRun {
        threads,
        background: None,
        total_cases: u64::try_from(space.total_cases(threads)).unwrap(),
        classes: cases.len() as u64,
        cases_run: cases.len() as u64,
        hop_classes,
        hop_classes_run: hop_classes,
        elapsed_s: 1.0,
        cases,
        twins: Vec::new(),
    }
}

/// report.html of the Quartet guest with only the idle sweep done, in
/// `dir`; returns the two-thread run drawn on it.
fn quartet_report(dir: &Path) -> SweepRun {
    let m = Machine::from_xml_file(Path::new(&fixture("qemu-quartet-4n2c-ring.xml")))
        .unwrap_or_else(|e| panic!("Quartet topology: {e}"));
    let accesses = [Access::Read, Access::Write];
    let space = SweepSpace::new(&m, &m.allowed_cpus, &m.memory_nodes(), &accesses).unwrap();
    let runs = vec![run_of(&space, 1), run_of(&space, 2)];
    let two = runs[1].clone();
    assert_eq!(two.classes, 108, "the Quartet's two-thread classes");
    let sweep = SweepResult {
        folded: true,
        node_symmetry_order: space.symmetry_order().to_string(),
        node_automorphisms: space.automorphism_count() as u64,
        cpus: m.allowed_cpus.iter().collect(),
        mem_nodes: m.memory_nodes().iter().collect(),
        accesses: accesses.to_vec(),
        read_kernel: "line-read".into(),
        write_kernel: "line-write".into(),
        buffer_bytes: 64 << 20,
        budget_s: None,
        runs,
        buffers: Vec::new(),
        verified: true,
        warnings: Vec::new(),
        elapsed_s: 2.0,
    };
    let outcome = SweepOutcome {
        findings: findings(&sweep),
        sweep,
    };
    let part = PartName::find("sweep").expect("the sweep part");
    let mut doc = new_document(&m, None, Mode::Default, 600.0, 64 << 20, &[part]);
    *doc.parts.get_mut(part) = PartRecord {
        status: PartStatus::Done,
        reason: None,
        budget_s: Some(60.0),
        elapsed_s: Some(2.0),
        run: Some(1),
        started_utc: None,
        verified: Some(true),
        result: Some(PartResult::new(outcome)),
        plan: None,
    };
    doc.refresh_status();
    doc.summary = Summary::of(&doc);
    std::fs::write(dir.join("report.html"), html::render(&doc)).unwrap();
    two
}

/// What the browser measures of each chart in #fig-sweep: its id and
/// width; texts cut with "…"; pairs of texts whose boxes overlap (each box
/// from getBBox through the text's screen matrix, so rotated labels keep
/// their real, rotated box; separating-axis test, 0.5 px tolerance); texts
/// outside the chart; the bar labels; the bars.
const PROBE: &str = r#"(() => {
  const own = t => [...t.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('');
  const corners = t => {
    const b = t.getBBox(), m = t.getScreenCTM();
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  };
  const span = (pts, nx, ny) => {
    let lo = Infinity, hi = -Infinity;
    for (const [x, y] of pts) { const v = x * nx + y * ny; lo = Math.min(lo, v); hi = Math.max(hi, v); }
    return [lo, hi];
  };
  const overlap = (a, b) => [[a[0], a[1]], [a[1], a[2]], [b[0], b[1]], [b[1], b[2]]].every(([p, q]) => {
    const dx = q[0] - p[0], dy = q[1] - p[1], len = Math.hypot(dx, dy);
    if (len === 0) return true;
    const [alo, ahi] = span(a, -dy / len, dx / len), [blo, bhi] = span(b, -dy / len, dx / len);
    return Math.min(ahi, bhi) - Math.max(alo, blo) > 0.5;
  });
  return [...document.querySelectorAll('#fig-sweep svg.chart')].map(svg => {
    const frame = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')].map(t => ({ text: own(t), pts: corners(t) }))
      .filter(t => t.text.trim() !== '');
    const overlaps = [];
    for (let i = 0; i < texts.length && overlaps.length < 20; i++)
      for (let j = i + 1; j < texts.length && overlaps.length < 20; j++)
        if (overlap(texts[i].pts, texts[j].pts)) overlaps.push(texts[i].text + ' | ' + texts[j].text);
    const outside = texts.filter(t => t.pts.some(([x, y]) =>
      x < frame.left - 0.5 || x > frame.right + 0.5 || y < frame.top - 0.5 || y > frame.bottom + 0.5))
      .map(t => t.text);
    return {
      id: svg.id,
      width: frame.width,
      texts: texts.length,
      cut: texts.filter(t => t.text.includes('…')).map(t => t.text),
      overlaps,
      outside,
      bar_labels: [...svg.querySelectorAll('text.bar-label')].map(own),
      bars: svg.querySelectorAll('rect.bar').length,
    };
  });
})()"#;

#[test]
fn quartet_sweep_chart_names_every_class_without_cuts_or_overlaps() {
    assert!(
        browser::chromium_path().is_some(),
        "chromium not found: run scripts/install-deps.sh --test (the README test command does) or set NUMALAB_CHROMIUM"
    );
    let dir = scratch("quartet_sweep_chart");
    let two = quartet_report(&dir);
    let r = browser::render(
        &dir.join("report.html"),
        &RenderOptions {
            probe: Some(PROBE.into()),
            timeout: Duration::from_secs(120),
            ..RenderOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("render: {e}"));
    let shot = common::report::out_dir().join("report-charts-quartet-sweep.png");
    std::fs::write(&shot, &r.png).unwrap();
    println!("screenshot -> {}", shot.display());
    assert!(
        r.console_errors.is_empty(),
        "console errors: {:?}",
        r.console_errors
    );
    assert!(
        r.external_requests().is_empty(),
        "{:?}",
        r.external_requests()
    );
    let charts = r.probe.as_array().expect("the probe's list of charts");
    let ids: Vec<&str> = charts.iter().filter_map(|c| c["id"].as_str()).collect();
    assert_eq!(ids, ["fig-sweep-1t", "fig-sweep-2t"]);
    for c in charts {
        let id = &c["id"];
        assert!(c["texts"].as_u64().unwrap() > 0, "{id}: no text measured");
        for key in ["cut", "overlaps", "outside"] {
            assert_eq!(c[key], Value::Array(Vec::new()), "{id}: {key}");
        }
        // Within what the page gives a figure at 1280 px: not shrunk.
        assert!(c["width"].as_f64().unwrap() <= 1124.0, "{id}: {c}");
    }
    let chart = &charts[1];
    assert_eq!(chart["bars"], 108);
    let mut shown: Vec<String> = chart["bar_labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let mut wanted: Vec<String> = two.cases.iter().map(|c| c.labels.join(" ")).collect();
    shown.sort();
    wanted.sort();
    assert_eq!(shown, wanted, "every class named by a label of its own");
}
