//! Text of `numalab model`: the parameters, the calibration, predicted
//! scenarios and cases with their bottlenecks, and predicted vs measured
//! ([`numalab::model`]).

use numalab::model::calibrate::Calibration;
use numalab::model::predict::{ModelCheck, PredictedCase, PredictedScenario};
use numalab::model::ModelParams;
use numalab::text::format::{percent, significant};
use std::fmt::Write;

/// What the model is and where its parameters come from.
pub fn header(p: &ModelParams, from: &str, resources: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "model: {} ({from})", p.name);
    let _ = writeln!(
        s,
        "  {resources} resources: controllers {} GB/s{}, links {} GB/s a direction{}; {} requests in flight per local reader; hop factors {}",
        significant(p.controller_gbps, 3),
        if p.controller_overrides.is_empty() { "" } else { " (some nodes differ)" },
        significant(p.link_gbps, 3),
        if p.link_overrides.is_empty() { "" } else { " (some links differ)" },
        significant(p.in_flight, 3),
        p.hop_time
            .iter()
            .map(|h| significant(*h, 3))
            .collect::<Vec<_>>()
            .join(" / ")
    );
    let _ = writeln!(
        s,
        "  times are ns per line of each thread summed over the case's threads, normalised as the study does (docs/model.md)"
    );
    s
}

/// Each fitted parameter with what it came from, and the scaling check.
pub fn calibration_text(c: &Calibration) -> String {
    let mut s = String::from("\ncalibration\n");
    let _ = writeln!(
        s,
        "  {:<28} {:>10}  {:<8} {:>9}  from",
        "parameter", "value", "unit", "residual"
    );
    for f in &c.fitted {
        let _ = writeln!(
            s,
            "  {:<28} {:>10}  {:<8} {:>9}  {}",
            f.name,
            significant(f.value, 4),
            f.unit,
            f.residual
                .map_or("-".into(), |r| format!("{:+.1}%", r * 100.0)),
            f.from
        );
    }
    if !c.scaling.is_empty() {
        let _ = writeln!(
            s,
            "\n  scaling, predicted from the parameters above (not fitted to it):"
        );
        let _ = writeln!(
            s,
            "  {:>7}  {:<8} {:>13} {:>14} {:>7}",
            "threads", "layout", "measured GB/s", "predicted GB/s", "error"
        );
        for r in &c.scaling {
            let _ = writeln!(
                s,
                "  {:>7}  {:<8} {:>13} {:>14} {:>+6.1}%",
                r.threads,
                r.layout,
                significant(r.measured_gbps, 3),
                significant(r.predicted_gbps, 3),
                r.error * 100.0
            );
        }
        if let Some(e) = c.mean_abs_error {
            let _ = writeln!(s, "  mean absolute error {}", percent(e));
        }
    }
    for n in &c.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

fn case_line(s: &mut String, c: &PredictedCase) {
    let threads: Vec<String> = c
        .prediction
        .flows
        .iter()
        .take(c.labels.len())
        .map(|f| significant(f.gbps, 3))
        .collect();
    let bottleneck = c
        .prediction
        .bottleneck
        .as_ref()
        .map_or("-".to_string(), |b| {
            format!("{} {}", b.name, percent(b.utilisation))
        });
    let _ = writeln!(
        s,
        "  {:<34} {:<24} {:<10} {:>9}  {:<16} {}",
        c.name,
        c.labels.join(" "),
        c.condition,
        format!("{:.3}", c.normalized),
        threads.join(", "),
        bottleneck
    );
}

fn case_header(s: &mut String) {
    let _ = writeln!(
        s,
        "  {:<34} {:<24} {:<10} {:>9}  {:<16} busiest resource",
        "case", "threads", "condition", "predicted", "GB/s each"
    );
}

/// Every predicted scenario, case by case.
pub fn scenarios_text(scenarios: &[PredictedScenario]) -> String {
    let mut s = String::new();
    for sc in scenarios {
        let _ = writeln!(s, "\n{} ({}): {}", sc.scenario, sc.figure, sc.title);
        case_header(&mut s);
        for c in &sc.cases {
            case_line(&mut s, c);
        }
    }
    s
}

/// Cases outside the scenarios (`--case`, `--truth-table`), fastest first.
pub fn cases_text(title: &str, cases: &[PredictedCase]) -> String {
    let mut s = format!("\n{title}\n");
    case_header(&mut s);
    let mut sorted: Vec<&PredictedCase> = cases.iter().collect();
    sorted.sort_by(|a, b| {
        a.labels
            .len()
            .cmp(&b.labels.len())
            .then(a.normalized.total_cmp(&b.normalized))
    });
    for c in sorted {
        case_line(&mut s, c);
    }
    s
}

/// Predicted vs measured, case by case, with the rank correlation and
/// the mean absolute error.
pub fn check_text(c: &ModelCheck) -> String {
    let mut s = String::from("\npredicted vs measured (normalised times)\n");
    let _ = writeln!(
        s,
        "  {:<18} {:<10} {:<34} {:<24} {:>9} {:>9} {:>7}",
        "scenario", "condition", "case", "threads", "predicted", "measured", "error"
    );
    for r in &c.rows {
        let _ = writeln!(
            s,
            "  {:<18} {:<10} {:<34} {:<24} {:>9.3} {:>9.3} {:>+6.1}%",
            r.scenario,
            r.condition,
            r.case,
            r.labels,
            r.predicted,
            r.measured,
            r.error * 100.0
        );
    }
    let _ = writeln!(
        s,
        "  {} cases: rank correlation (Spearman) {}, mean absolute error {:.3} ({} relative)",
        c.rows.len(),
        c.rank_correlation.map_or(
            "undefined (fewer than 3 cases or a constant side)".into(),
            |r| format!("{r:.2}")
        ),
        c.mean_abs_error,
        percent(c.mean_abs_rel_error)
    );
    s
}
