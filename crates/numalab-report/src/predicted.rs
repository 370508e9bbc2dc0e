//! The report's "predicted vs measured" view: the contention model
//! calibrated from the report's own measurements (`numalab model --from`)
//! predicts the sweep's classes and the study's scenarios the report ran,
//! case by case, and names the resource that limits the slowest of them
//! (docs/model.md). Computed from the document, so it follows whatever
//! parts are done.

use crate::registry::REPORT;
use crate::results::{ModelSection, ReportResults};
use crate::views::scenarios_part::ScenariosOutcome;
use crate::views::sweep::SweepOutcome;
use numalab::model::calibrate::calibrate;
use numalab::model::predict::{check_scenarios, check_sweep, ModelCheck};
use numalab::model::{predict_scenarios, Network};
use numalab::text::format::percent;
use std::fmt::Write;

/// The section's title in the text and on the page.
pub const TITLE: &str = "Predicted vs measured: the contention model";

/// The model's section of `doc`, or `None` when no part it checks
/// against (sweep, sweep-scenarios) is done.
pub fn model_section(doc: &ReportResults) -> Option<ModelSection> {
    let done = |name: &str| {
        REPORT
            .find(name)
            .and_then(|n| doc.parts.get(n).done().cloned())
    };
    let sweep = done("sweep").and_then(|r| r.get::<SweepOutcome>().map(|o| o.sweep.clone()));
    let scenarios = done("sweep-scenarios")
        .and_then(|r| r.get::<ScenariosOutcome>().map(|o| o.measured.clone()));
    if sweep.is_none() && scenarios.is_none() {
        return None;
    }
    let mut section = ModelSection::default();
    let value = match serde_json::to_value(doc) {
        Ok(v) => v,
        Err(e) => {
            section.not_available = Some(format!("the document does not serialize: {e}"));
            return Some(section);
        }
    };
    let m = &doc.machine;
    let calibration = match calibrate(&value, m) {
        Ok(c) => c,
        Err(e) => {
            section.not_available = Some(format!("the model cannot be calibrated: {e}"));
            return Some(section);
        }
    };
    // The sweeps run the line kernels: their threads ask the rates the
    // sweep's own one-thread cases measured, where it has them.
    let params = calibration
        .line_kernels
        .clone()
        .unwrap_or_else(|| calibration.params.clone());
    let net = match Network::new(m, params) {
        Ok(n) => n,
        Err(e) => {
            section.not_available = Some(format!("the calibrated model does not build: {e}"));
            return Some(section);
        }
    };
    if let Some(s) = &sweep {
        match check_sweep(&net, m, s) {
            Ok((check, skipped)) => {
                section.sweep = Some(check);
                section.sweep_skipped = skipped;
            }
            Err(e) => section.notes.push(format!("sweep: {e}")),
        }
    }
    if let Some(s) = &scenarios {
        match predict_scenarios(&net, m, &s.set) {
            Ok(p) => section.scenarios = Some(check_scenarios(&p, s)),
            Err(e) => section.notes.push(format!("scenarios: {e}")),
        }
    }
    section.calibration = Some(calibration);
    Some(section)
}

/// The case the measurement found slowest among `check`'s rows with a
/// named bottleneck: (row index, its text).
pub fn slowest(check: &ModelCheck) -> Option<usize> {
    check
        .rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.bottleneck.is_some())
        .max_by(|a, b| a.1.measured.total_cmp(&b.1.measured))
        .map(|(i, _)| i)
}

/// The section as text.
pub fn text(s: &ModelSection) -> String {
    let mut out = String::new();
    if let Some(why) = &s.not_available {
        let _ = writeln!(out, "no prediction: {why}");
        return out;
    }
    if let Some(c) = &s.calibration {
        out.push_str(&crate::views::model::calibration_text(c));
    }
    for (what, check) in [("sweep classes", &s.sweep), ("scenarios", &s.scenarios)] {
        let Some(check) = check else { continue };
        let _ = writeln!(out, "\n{what}:");
        out.push_str(&crate::views::model::check_text(check));
        if let Some(i) = slowest(check) {
            let r = &check.rows[i];
            let _ = writeln!(
                out,
                "  slowest measured: {} {} ({}): the model's busiest resource {}",
                r.scenario,
                r.labels,
                r.condition,
                r.bottleneck.as_deref().unwrap_or("-")
            );
        }
    }
    if s.sweep_skipped > 0 {
        let _ = writeln!(
            out,
            "  {} sweep case(s) left out: threads taking turns on one CPU (the model has no CPU sharing) or no idle baseline",
            s.sweep_skipped
        );
    }
    for n in &s.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    out
}

/// One line for the summary: how well the model ranked the cases.
pub fn headline(check: &ModelCheck) -> String {
    format!(
        "{} cases, rank correlation {}, mean error {}",
        check.rows.len(),
        check
            .rank_correlation
            .map_or("undefined".into(), |r| format!("{r:.2}")),
        percent(check.mean_abs_rel_error)
    )
}
