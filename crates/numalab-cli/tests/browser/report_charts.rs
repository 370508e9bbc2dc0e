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
//! The same holds for the study's scenarios (the part `sweep-scenarios`),
//! planned by role on the Quartet: one chart per scenario, each bar named
//! by its roles and hops, and a dashed reference line at 1.0.
//!
//! Chromium is software the README's test command installs
//! (scripts/install-deps.sh --test), not hardware: without it this fails.

use crate::common;

use common::browser::{self, RenderOptions};
use common::{fixture, scratch};
use numalab::experiments::sweep::{
    findings, plan_scenarios, scenario_findings, Access, Background, BaselineResults, CaseResult,
    CaseTime, Normalize, Scenario, ScenarioCase, ScenarioCaseResult, ScenarioRun, ScenariosResult,
    Subscription, SweepResult, SweepRun, SweepSpace, ThreadResult,
};
use numalab::Machine;
use numalab_report::page;
use numalab_report::part::PartResult;
use numalab_report::registry::REPORT;
use numalab_report::results::{Mode, PartRecord, PartStatus};
use numalab_report::session::new_document;
use numalab_report::summarize::summarize;
use numalab_report::views::scenarios_part::{ScenariosOutcome, PRIORITY};
use numalab_report::views::sweep::SweepOutcome;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// Made-up results of every class of `threads` threads of `space`: slower
/// with each hop and each writer, and a little different within a hop
/// class, as real ones are.
fn run_of(space: &SweepSpace, threads: usize) -> SweepRun {
    let planned = space.folded(threads);
    let cases: Vec<CaseResult> = planned
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
                total_seconds: s * p.threads.len() as f64,
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
        normalization: String::new(),
        cases,
        twins: Vec::new(),
    }
}

fn quartet() -> Machine {
    Machine::from_xml_file(Path::new(&fixture("qemu-quartet-4n2c-ring.xml")))
        .unwrap_or_else(|e| panic!("Quartet topology: {e}"))
}

/// report.html of `m` with only `part` done, holding `result`, in `dir`.
fn write_report(dir: &Path, m: &Machine, part: &str, result: PartResult) {
    let part = REPORT.find(part).expect("the part");
    let mut doc = new_document(&REPORT, m, None, Mode::Default, 600.0, 64 << 20, &[part]);
    *doc.parts.get_mut(part) = PartRecord {
        status: PartStatus::Done,
        reason: None,
        budget_s: Some(60.0),
        elapsed_s: Some(2.0),
        run: Some(1),
        started_utc: None,
        verified: Some(true),
        result: Some(result),
        plan: None,
    };
    doc.refresh_status();
    doc.summary = summarize(&doc);
    std::fs::write(dir.join("report.html"), page::render(&doc)).unwrap();
}

/// report.html of the Quartet guest with only the idle sweep done, in
/// `dir`; returns the two-thread run drawn on it.
fn quartet_report(dir: &Path) -> SweepRun {
    let m = quartet();
    let accesses = [Access::Read, Access::Write];
    let space = SweepSpace::new(&m, &m.allowed_cpus, &m.memory_nodes(), &accesses).unwrap();
    let mut runs = vec![run_of(&space, 1), run_of(&space, 2)];
    numalab::experiments::sweep::normalize(&mut runs);
    let two = runs[1].clone();
    assert_eq!(two.classes, 108, "the Quartet's two-thread classes");
    let sweep = SweepResult {
        folded: true,
        node_symmetry_order: space.symmetry_order().to_string(),
        node_automorphisms: space.automorphism_count() as u64,
        machine_symmetry_order: space.machine_symmetry_order().to_string(),
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
        memory_traffic: Default::default(),
    };
    let outcome = SweepOutcome {
        findings: findings(&sweep),
        sweep,
    };
    write_report(dir, &m, "sweep", PartResult::new(outcome));
    two
}

/// A made-up measured case: per round, both threads' times, slower with
/// each hop and writer and under load; normalised over `base` seconds.
fn scenario_case(c: &ScenarioCase, load: f64, base: f64) -> ScenarioCaseResult {
    let per: Vec<f64> = c
        .threads
        .iter()
        .map(|t| {
            let w = if t.access == Access::Write { 0.3 } else { 0.0 };
            1e-3 * (1.0 + 0.2 * t.hops.unwrap_or(0) as f64 + w) * load
        })
        .collect();
    let total: f64 = per.iter().sum();
    let rounds = 6;
    ScenarioCaseResult {
        case: c.clone(),
        rounds: vec![per.clone(); rounds],
        total_s: vec![total; rounds],
        makespan_s: vec![per.iter().copied().fold(0.0, f64::max); rounds],
        thread_s: per.clone(),
        total_median_s: total,
        total_rel_ci: 0.01,
        makespan_median_s: per.iter().copied().fold(0.0, f64::max),
        normalized: total / base,
        baseline: String::new(),
        background_achieved: Vec::new(),
        seen_cpus: c.threads.iter().map(|t| vec![t.cpu]).collect(),
        verified: true,
        problems: Vec::new(),
        memory_traffic: Default::default(),
    }
}

/// report.html of the Quartet with every scenario of the study run (made-up
/// times), in `dir`; returns the bar labels each chart must show, by
/// chart id.
fn quartet_scenarios_report(dir: &Path) -> Vec<(String, Vec<String>)> {
    let m = quartet();
    let set = plan_scenarios(&m, &Scenario::ALL);
    let base = |threads: usize| if threads == 1 { 1e-3 } else { 2e-3 };
    let mut runs = Vec::new();
    let mut wanted = Vec::new();
    for p in set.applicable() {
        let levels: Vec<Option<(String, f64)>> = match &p.background {
            None => vec![None],
            Some(b) => b
                .levels
                .iter()
                .cloned()
                .zip(b.bytes_per_second.iter().copied())
                .map(Some)
                .collect(),
        };
        let mut labels = Vec::new();
        for (i, level) in levels.into_iter().enumerate() {
            let cases: Vec<ScenarioCaseResult> = p
                .cases
                .iter()
                .map(|c| scenario_case(c, 1.0 + 0.5 * i as f64, base(p.threads)))
                .collect();
            labels.extend(cases.iter().map(|c| {
                let hops: Vec<String> = c
                    .case
                    .threads
                    .iter()
                    .map(|t| t.hops.unwrap().to_string())
                    .collect();
                let hops = match hops.as_slice() {
                    [one] if one == "1" => "1 hop".to_string(),
                    _ => format!("{} hops", hops.join("-")),
                };
                format!("{} ({hops})", c.case.roles.join(" + "))
            }));
            runs.push(ScenarioRun {
                scenario: p.name.name().into(),
                figure: p.figure.clone(),
                title: p.title.clone(),
                condition: level.as_ref().map_or("idle".into(), |l| l.0.clone()),
                background: level.map(|(level, rate)| Background {
                    level,
                    bytes_per_second: rate,
                    subscription: Subscription::Full,
                    cpus: Some(
                        p.background
                            .as_ref()
                            .unwrap()
                            .cpus
                            .iter()
                            .copied()
                            .collect(),
                    ),
                }),
                cases,
            });
        }
        wanted.push((format!("fig-scenarios-{}", p.name.name()), labels));
    }
    let mut measured = ScenariosResult {
        set,
        normalize: Normalize::Study,
        rounds_planned: 6,
        rounds_run: 6,
        read_kernel: "line-read".into(),
        write_kernel: "line-write".into(),
        buffer_bytes: 64 << 20,
        background_bytes: 32 << 20,
        runs,
        baselines: BaselineResults {
            one_thread: None,
            two_threads: None,
        },
        buffers: Vec::new(),
        findings: Vec::new(),
        verified: true,
        warnings: Vec::new(),
        elapsed_s: 10.0,
    };
    measured.findings = scenario_findings(&measured);
    let outcome = ScenariosOutcome {
        priority: PRIORITY.to_vec(),
        left_out: Vec::new(),
        measured,
    };
    write_report(dir, &m, "sweep-scenarios", PartResult::new(outcome));
    wanted
}

/// What the browser measures of each chart in #fig-sweep: its id and
/// width; texts cut with "…"; pairs of texts whose boxes overlap (each box
/// from getBBox through the text's screen matrix, so rotated labels keep
/// their real, rotated box; separating-axis test, 0.5 px tolerance); texts
/// outside the chart; the bar labels; the bars.
fn probe(charts: &str) -> String {
    PROBE.replace("#fig-sweep svg.chart", charts)
}

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
      refs: [...svg.querySelectorAll('line.ref')].map(l => ({
        dash: getComputedStyle(l).strokeDasharray,
        tip: l.parentNode.querySelector('title') ? l.parentNode.querySelector('title').textContent : '',
      })),
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
            probe: Some(probe("#fig-sweep svg.chart")),
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

#[test]
fn quartet_scenario_charts_follow_the_study_with_a_dashed_one() {
    assert!(
        browser::chromium_path().is_some(),
        "chromium not found: run scripts/install-deps.sh --test (the README test command does) or set NUMALAB_CHROMIUM"
    );
    let dir = scratch("quartet_scenario_charts");
    let wanted = quartet_scenarios_report(&dir);
    let r = browser::render(
        &dir.join("report.html"),
        &RenderOptions {
            probe: Some(probe("#fig-scenarios svg.chart")),
            timeout: Duration::from_secs(120),
            ..RenderOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("render: {e}"));
    let shot = common::report::out_dir().join("report-charts-quartet-scenarios.png");
    std::fs::write(&shot, &r.png).unwrap();
    println!("screenshot -> {}", shot.display());
    assert!(
        r.console_errors.is_empty(),
        "console errors: {:?}",
        r.console_errors
    );
    let charts = r.probe.as_array().expect("the probe's list of charts");
    let ids: Vec<&str> = charts.iter().filter_map(|c| c["id"].as_str()).collect();
    // One chart per scenario, in the study's figure order.
    assert_eq!(
        ids,
        [
            "fig-scenarios-one-thread-hops",
            "fig-scenarios-crossfire",
            "fig-scenarios-crossfire-high",
            "fig-scenarios-crossfire-full",
            "fig-scenarios-two-on-one-node",
            "fig-scenarios-two-writers-loaded",
        ]
    );
    for (c, (id, labels)) in charts.iter().zip(&wanted) {
        assert_eq!(c["id"], id.as_str());
        for key in ["cut", "overlaps", "outside"] {
            assert_eq!(c[key], Value::Array(Vec::new()), "{id}: {key}");
        }
        assert!(c["width"].as_f64().unwrap() <= 1124.0, "{id}: {c}");
        // Every bar named by its whole label: roles and hops.
        let mut shown: Vec<String> = c["bar_labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        let mut want = labels.clone();
        shown.sort();
        want.sort();
        assert_eq!(shown, want, "{id}");
        assert_eq!(c["bars"].as_u64().unwrap() as usize, labels.len(), "{id}");
        // The dashed line at 1.0, as the study drew it.
        let refs = c["refs"].as_array().unwrap();
        assert!(!refs.is_empty(), "{id}: no reference line");
        for x in refs {
            let dash = x["dash"].as_str().unwrap();
            assert!(dash != "none" && !dash.is_empty(), "{id}: {x}");
            assert_eq!(x["tip"], "reference: 1", "{id}: {x}");
        }
    }
    // The crossfire chart names the study's three cases by role.
    let cross = &wanted[1].1;
    assert_eq!(
        cross,
        &[
            "A.0.w.A + B.0.w.B (0-0 hops)",
            "A.0.w.B + B.0.w.A (1-1 hops)",
            "A.0.w.B + B.0.w.C (1-1 hops)",
        ]
    );
}
