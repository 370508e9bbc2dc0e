//! Predictions of whole experiments: the classic study's scenarios as
//! `sweep --scenarios` plans them, and any list of sweep cases (a truth
//! table), normalised by the study's rule (docs/sweep.md): one-thread
//! cases over the local read alone, two-thread cases by the total time of
//! both threads over the idle two local readers on different nodes.

use super::network::{Flow, Network, Prediction};
use crate::experiments::sweep::{Access, ScenarioCase, ScenarioSet, ThreadCase};
use crate::machine::Machine;
use crate::measure::pacing::background_rate;
use serde::{Deserialize, Serialize};

/// One case predicted at one background level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictedCase {
    /// The scenario's name for it (`crossfire`), or the sweep's labels.
    pub name: String,
    /// `node.core.access.memnode` per thread.
    pub labels: Vec<String>,
    /// `idle`, or the background level.
    pub condition: String,
    /// Sum of the threads' ns per line: the study's total time.
    pub total_ns_per_line: f64,
    /// Over the baseline the study divides by.
    pub normalized: f64,
    pub prediction: Prediction,
}

/// One scenario's predicted cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictedScenario {
    pub scenario: String,
    pub figure: String,
    pub title: String,
    pub cases: Vec<PredictedCase>,
}

/// The flows of a sweep case's foreground threads.
pub fn case_flows(threads: &[ThreadCase]) -> Vec<Flow> {
    threads
        .iter()
        .map(|t| Flow::stream(t.label(), t.node, t.mem, t.access == Access::Write))
        .collect()
}

/// Paced local readers on `cpus` at `gbps` each.
pub fn background_flows(m: &Machine, cpus: &[u32], gbps: f64) -> Vec<Flow> {
    cpus.iter()
        .filter_map(|&c| {
            m.node_of_cpu(c)
                .map(|n| Flow::background(format!("background on CPU {c}"), n, gbps))
        })
        .collect()
}

fn total(p: &Prediction, foreground: usize) -> f64 {
    p.flows[..foreground].iter().map(|f| f.ns_per_line).sum()
}

/// Predicts one case (its foreground threads and `background`) and
/// normalises its total by `baseline` ns per line.
pub fn predict_case(
    net: &Network,
    name: &str,
    threads: &[ThreadCase],
    background: Vec<Flow>,
    condition: &str,
    baseline: f64,
) -> Result<PredictedCase, String> {
    let mut flows = case_flows(threads);
    let foreground = flows.len();
    flows.extend(background);
    let prediction = net.predict(&flows)?;
    let total_ns_per_line = total(&prediction, foreground);
    Ok(PredictedCase {
        name: name.to_string(),
        labels: threads.iter().map(ThreadCase::label).collect(),
        condition: condition.to_string(),
        total_ns_per_line,
        normalized: total_ns_per_line / baseline,
        prediction,
    })
}

fn baseline_of(net: &Network, case: Option<&ScenarioCase>) -> Result<Option<f64>, String> {
    case.map(|c| {
        let p = net.predict(&case_flows(&c.threads))?;
        Ok(total(&p, c.threads.len()))
    })
    .transpose()
}

/// Predicts every applicable scenario of `set` on `m`.
pub fn predict_scenarios(
    net: &Network,
    m: &Machine,
    set: &ScenarioSet,
) -> Result<Vec<PredictedScenario>, String> {
    let one = baseline_of(net, set.one_thread_baseline.as_ref())?;
    let two = baseline_of(net, set.two_thread_baseline.as_ref())?;
    let mut out = Vec::new();
    for plan in set.applicable() {
        let baseline = if plan.threads == 1 { one } else { two };
        let baseline = baseline.ok_or("the scenarios have no baseline case on this machine")?;
        let mut conditions: Vec<(String, Vec<Flow>)> = Vec::new();
        match &plan.background {
            None => conditions.push(("idle".into(), Vec::new())),
            Some(bg) => {
                for (level, &rate) in bg.levels.iter().zip(&bg.bytes_per_second) {
                    conditions.push((level.clone(), background_flows(m, &bg.cpus, rate / 1e9)));
                }
                if plan.name.levels().is_empty() {
                    conditions.push(("idle".into(), Vec::new()));
                }
            }
        }
        let mut cases = Vec::new();
        for (condition, background) in &conditions {
            for case in &plan.cases {
                cases.push(predict_case(
                    net,
                    &case.name,
                    &case.threads,
                    background.clone(),
                    condition,
                    baseline,
                )?);
            }
        }
        out.push(PredictedScenario {
            scenario: plan.name.name().to_string(),
            figure: plan.figure.clone(),
            title: plan.title.clone(),
            cases,
        });
    }
    Ok(out)
}

/// GB/s of a background level's name or number (`very-high`, `1.5`).
pub fn level_gbps(level: &str) -> Result<f64, String> {
    background_rate(level).map(|b| b / 1e9)
}

/// One case predicted and measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRow {
    pub scenario: String,
    pub condition: String,
    pub case: String,
    pub labels: String,
    pub predicted: f64,
    pub measured: f64,
    /// (predicted - measured) / measured.
    pub error: f64,
    /// The predicted bottleneck and its utilisation.
    pub bottleneck: Option<String>,
}

/// How well the model ranked and sized what the engine measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCheck {
    pub rows: Vec<CheckRow>,
    /// Spearman's rank correlation of predicted and measured normalised
    /// times; `None` with fewer than three cases or a constant side.
    pub rank_correlation: Option<f64>,
    /// Mean of |predicted - measured| over the normalised times.
    pub mean_abs_error: f64,
    /// Mean of |error|: relative.
    pub mean_abs_rel_error: f64,
}

/// Pairs each predicted case with the measured one of the same scenario,
/// condition and labels.
pub fn check_scenarios(
    predicted: &[PredictedScenario],
    measured: &crate::experiments::sweep::ScenariosResult,
) -> ModelCheck {
    let mut rows = Vec::new();
    for s in predicted {
        for c in &s.cases {
            let Some(run) = measured.run(&s.scenario, &c.condition) else {
                continue;
            };
            let labels = c.labels.join(" ");
            let Some(m) = run.cases.iter().find(|m| m.case.label() == labels) else {
                continue;
            };
            if !(m.normalized.is_finite() && m.normalized > 0.0) {
                continue;
            }
            rows.push(CheckRow {
                scenario: s.scenario.clone(),
                condition: c.condition.clone(),
                case: c.name.clone(),
                labels,
                predicted: c.normalized,
                measured: m.normalized,
                error: (c.normalized - m.normalized) / m.normalized,
                bottleneck: c
                    .prediction
                    .bottleneck
                    .as_ref()
                    .map(|b| format!("{} {:.0}%", b.name, b.utilisation * 100.0)),
            });
        }
    }
    summarise_rows(rows)
}

/// Every folded class of one and two threads over the machine's allowed
/// CPUs and memory nodes, reads and writes, predicted idle and normalised
/// to the fastest predicted case of its thread count (the sweep's rule).
pub fn predict_truth_table(
    net: &Network,
    m: &Machine,
    threads: &[usize],
    limit: usize,
) -> Result<Vec<PredictedCase>, String> {
    use crate::experiments::sweep::SweepSpace;
    let cpus = m
        .cpu_nodes()
        .iter()
        .flat_map(|n| m.allowed_cpus_of(n).iter().collect::<Vec<_>>())
        .collect::<crate::idset::IdSet>();
    let space = SweepSpace::new(m, &cpus, &m.memory_nodes(), &[Access::Read, Access::Write])?;
    let mut out = Vec::new();
    for &t in threads {
        let cases = space.folded_at_most(t, limit).ok_or_else(|| {
            format!("{t} thread(s) fold into more than {limit} classes; the truth table takes at most {limit}")
        })?;
        let mut predicted = Vec::with_capacity(cases.len());
        for c in &cases {
            predicted.push(predict_case(
                net,
                &format!("{t} thread(s)"),
                &c.threads,
                Vec::new(),
                "idle",
                1.0,
            )?);
        }
        let fastest = predicted
            .iter()
            .map(|p| p.total_ns_per_line)
            .fold(f64::INFINITY, f64::min);
        for p in &mut predicted {
            p.normalized = p.total_ns_per_line / fastest;
        }
        out.extend(predicted);
    }
    Ok(out)
}

/// Pairs every measured sweep case with its prediction, normalised as the
/// sweep normalises (the total time of the threads over the fastest idle
/// case of the same thread count, among the cases run). Cases whose
/// threads take turns on one CPU are left out: the model has no CPU time
/// sharing. `skipped` says how many.
pub fn check_sweep(
    net: &Network,
    m: &Machine,
    sweep: &crate::experiments::sweep::SweepResult,
) -> Result<(ModelCheck, usize), String> {
    let mut rows = Vec::new();
    let mut skipped = 0;
    let mut fastest_idle: std::collections::BTreeMap<usize, f64> = Default::default();
    let mut predicted: Vec<(
        usize,
        String,
        &crate::experiments::sweep::CaseResult,
        f64,
        Option<String>,
    )> = Vec::new();
    for run in &sweep.runs {
        let condition = run
            .background
            .as_ref()
            .map_or("idle".to_string(), |b| b.level.clone());
        for case in &run.cases {
            if case.sharing == "cpu" || !(case.normalized.is_finite() && case.normalized > 0.0) {
                skipped += 1;
                continue;
            }
            let threads: Vec<ThreadCase> = case.threads.iter().map(|t| t.case).collect();
            let background = match &run.background {
                Some(b) => background_flows(m, &case.background_cpus, b.bytes_per_second / 1e9),
                None => Vec::new(),
            };
            let p = predict_case(net, "", &threads, background, &condition, 1.0)?;
            if run.background.is_none() {
                let f = fastest_idle.entry(run.threads).or_insert(f64::INFINITY);
                *f = f.min(p.total_ns_per_line);
            }
            let busiest = p
                .prediction
                .bottleneck
                .as_ref()
                .map(|b| format!("{} {:.0}%", b.name, b.utilisation * 100.0));
            predicted.push((
                run.threads,
                condition.clone(),
                case,
                p.total_ns_per_line,
                busiest,
            ));
        }
    }
    for (threads, condition, case, total, busiest) in predicted {
        let Some(&base) = fastest_idle.get(&threads) else {
            skipped += 1;
            continue;
        };
        let predicted = total / base;
        rows.push(CheckRow {
            scenario: format!("sweep, {threads} thread(s)"),
            condition,
            case: case.hop_class.clone(),
            labels: case.labels.join(" "),
            predicted,
            measured: case.normalized,
            error: (predicted - case.normalized) / case.normalized,
            bottleneck: busiest,
        });
    }
    Ok((summarise_rows(rows), skipped))
}

/// The rank correlation and errors of `rows`.
fn summarise_rows(rows: Vec<CheckRow>) -> ModelCheck {
    let points: Vec<(f64, f64)> = rows.iter().map(|r| (r.predicted, r.measured)).collect();
    let n = rows.len().max(1) as f64;
    ModelCheck {
        rank_correlation: if points.len() >= 3 {
            crate::experiments::pdm::measure::spearman(&points)
        } else {
            None
        },
        mean_abs_error: rows
            .iter()
            .map(|r| (r.predicted - r.measured).abs())
            .sum::<f64>()
            / n,
        mean_abs_rel_error: rows.iter().map(|r| r.error.abs()).sum::<f64>() / n,
        rows,
    }
}
