//! The summary of a whole report: every done part's sentences, advice and
//! key figures (through the registry), the advice that draws on several
//! parts (how to lay out threads with independent or shared data), and the
//! warnings about the machine and its settings, from the key figures.
//! Computed from whatever parts are done, so a partial report still has a
//! summary, and says which questions it cannot answer yet.

use crate::claims::{
    not_answerable_line, token, Basis, Claim, ClaimKind, Derivation, Lacks, Relation, Threshold,
};
use crate::model::drift::{DriftKind, KindText};
use crate::registry::REPORT;
use crate::results::{PartStatus, ReportResults};
use crate::summary::{advice, headline, warning, Summary, SummaryBuilder, SummaryLine};
use std::collections::BTreeMap;

/// The summary of whatever `doc` holds so far.
pub fn summarize(doc: &ReportResults) -> Summary {
    let m = &doc.machine;
    let mut b = SummaryBuilder::new(m, doc.buffer_bytes);
    for (name, _) in doc.parts.iter() {
        for key in REPORT.part(name).info().key_figures {
            b.set_figure(key, None);
        }
    }
    for (name, rec) in doc.parts.iter() {
        if let Some(r) = rec.done() {
            b.base = format!("/parts/{}/result", token(name.name()));
            REPORT.part(name).summarize(r, &mut b);
        }
    }
    b.base.clear();
    let env = doc.environment.as_ref();
    b.emulated = env.is_some_and(|e| e.emulated_cpu.is_some());
    general_advice(&mut b);
    if let Some(c) = placements_verified(doc) {
        b.claim(c);
    }
    for c in model_findings(doc) {
        b.claim(c);
    }
    not_answerable(&mut b);
    let mut claims = vec![headline(m, env.map(|e| e.hostname.as_str()))];
    let emulated = env.and_then(|e| e.emulated_cpu.clone());
    if let Some(e) = &emulated {
        claims.push(
            Claim::new(
                ClaimKind::Banner,
                "emulation",
                Basis::Setting,
                "These timings were taken on an emulated CPU ({emulator}): they say nothing about the hardware, so the findings, advice and warnings drawn from timings are withheld; placement and topology facts stand.",
            )
            .fact("emulator", e, "/environment/emulated_cpu")
            .render(),
        );
    }
    claims.append(&mut b.claims);
    claims.extend(warnings(doc));
    let (own_intervals, key_intervals) = key_intervals(doc, &b);
    claims.extend(drift_warning(doc, &own_intervals, &key_intervals));
    claims.extend(missing(doc));
    let withheld = |c: &Claim| emulated.is_some() && c.basis == Basis::Timing;
    let texts = |kind: ClaimKind| -> Vec<&Claim> {
        claims
            .iter()
            .filter(|c| c.kind == kind && !withheld(c))
            .collect()
    };
    let lines = |kind| {
        texts(kind)
            .into_iter()
            .map(|c| SummaryLine {
                topic: c.topic.clone(),
                text: c.text.clone(),
            })
            .collect()
    };
    let strings = |kind| texts(kind).into_iter().map(|c| c.text.clone()).collect();
    Summary {
        node_count: m.nodes.len(),
        headline: claims[0].text.clone(),
        findings: lines(ClaimKind::Finding),
        advice: lines(ClaimKind::Advice),
        warnings: strings(ClaimKind::Warning),
        missing: strings(ClaimKind::Missing),
        key_figures: b.key_figures,
        key_intervals,
        banner: texts(ClaimKind::Banner).first().map(|c| c.text.clone()),
        withheld: claims
            .iter()
            .filter(|c| withheld(c))
            .map(|c| c.text.clone())
            .collect(),
        claims,
    }
}

type Intervals = BTreeMap<String, [f64; 2]>;

/// Each key figure's 95% interval, from the measurements it is derived
/// from in the document (the derivations are JSON pointers into it): as
/// the measurements give it, and widened by the host's drift over the
/// report for latency and bandwidth figures ([`crate::model::drift`]),
/// which is the one the summary keeps.
fn key_intervals(doc: &ReportResults, b: &SummaryBuilder) -> (Intervals, Intervals) {
    if b.key_sources.is_empty() {
        return Default::default();
    }
    let Ok(v) = serde_json::to_value(doc) else {
        return Default::default();
    };
    b.key_sources
        .iter()
        .filter_map(|(k, d)| {
            let value = b.figure(k)?;
            let own = <[f64; 2]>::from(d.interval(&v)?);
            let wide = doc.drift.widen(DriftKind::of_key(k), value, own);
            Some(((k.clone(), own), (k.clone(), wide)))
        })
        .unzip()
}

/// The sentence on the host's drift, where it is what sets the key
/// figures' intervals: the drift at least doubles the width of one of
/// them. On a machine whose speed holds still, nothing.
fn drift_warning(doc: &ReportResults, own: &Intervals, wide: &Intervals) -> Option<Claim> {
    let width = |i: &[f64; 2]| i[1] - i[0];
    let doubled: Vec<&String> = wide
        .iter()
        .filter(|(k, w)| own.get(*k).is_some_and(|o| width(w) >= 2.0 * width(o)))
        .map(|(k, _)| k)
        .collect();
    if doubled.is_empty() {
        return None;
    }
    // Where the two-CPU looks are what widened a figure, the host moved the
    // CPUs themselves (a virtual machine's vCPUs onto or off one memory
    // path): say what depends on that, the knee first.
    let two_cpus = doubled
        .iter()
        .any(|k| DriftKind::of_key(k).iter().any(|d| d.is_two_cpus()));
    let moved = if two_cpus {
        " The two-CPU looks moved most: where the host runs the CPUs changed during the report, and every figure of two CPUs together depends on it (per-thread bandwidth, core-to-core latency, latency under another CPU's load and its knee, which a run may find or not)."
    } else {
        ""
    };
    let d = &doc.drift;
    let present: Vec<_> = d
        .estimates()
        .into_iter()
        .map(|(k, e)| (k.text(), e))
        .collect();
    if present.is_empty() {
        return None;
    }
    let n = d.probes.len();
    let ranges: Vec<&str> = present.iter().map(|(k, _)| k.range).collect();
    // A drift of more than twice either way reads as a bug in a percentage
    // ("±999%"): the range above already says how far it went.
    let halves: Vec<String> = present
        .iter()
        .map(|(k, e)| {
            if e.rel_half_width >= 1.0 {
                format!("more than twice either way for {}", k.label)
            } else {
                format!("±{{{}}}% for {}", k.key, k.label)
            }
        })
        .collect();
    let at = |p: String| Derivation::at(format!("/drift/{p}"));
    let mut c = warning(
        "drift",
        Basis::Timing,
        format!(
            "The host's own speed moved while this report ran, more than a measurement's repetitions vary: {{n}} looks between its parts found {}. The key figures' 95% intervals include this drift ({}), so another report of this machine should fall within them; a quieter machine gives narrower ones.{moved}",
            ranges.join(", "),
            halves.join(", ")
        ),
    )
    .fig("n", n as f64, "count", 0, Derivation::Count { path: "/drift/probes".into() });
    for (k, e) in present {
        let KindText {
            key,
            unit,
            decimals,
            ..
        } = k;
        c = c
            .fig(
                &format!("{key}_lo"),
                e.low,
                unit,
                decimals,
                at(format!("{key}/low")),
            )
            .fig(
                &format!("{key}_hi"),
                e.high,
                unit,
                decimals,
                at(format!("{key}/high")),
            );
        if e.rel_half_width < 1.0 {
            c = c.fig(
                key,
                e.rel_half_width,
                "%",
                0,
                at(format!("{key}/rel_half_width")),
            );
        }
    }
    Some(c.render())
}

/// The findings whose questions this machine cannot answer at all (a
/// second memory node, two CPUs on a node: [`Claim::not_answerable`]) are
/// not a sentence each: one line per thing lacking names them, last among
/// the findings. Each part's own section still says why.
fn not_answerable(b: &mut SummaryBuilder) {
    let (lacking, kept): (Vec<Claim>, Vec<Claim>) = std::mem::take(&mut b.claims)
        .into_iter()
        .partition(|c| c.kind == ClaimKind::Finding && c.not_answerable.is_some());
    b.claims = kept;
    let mut groups: Vec<(Lacks, Vec<Claim>)> = Vec::new();
    for c in lacking {
        let lacks = c.not_answerable.as_ref().map(|q| q.lacks);
        match groups.iter_mut().find(|(l, _)| Some(*l) == lacks) {
            Some(g) => g.1.push(c),
            None => groups.extend(lacks.map(|l| (l, vec![c]))),
        }
    }
    for (lacks, members) in groups {
        b.claims.push(not_answerable_line(lacks, &members));
    }
}

/// Parts missing for the same reason are one line.
fn missing(doc: &ReportResults) -> Vec<Claim> {
    let mut groups: Vec<(String, Option<String>, Vec<&str>)> = Vec::new();
    for (n, rec) in doc.missing() {
        let status = rec.status.name().to_string();
        match groups
            .iter_mut()
            .find(|(st, r, _)| *st == status && *r == rec.reason)
        {
            Some(g) => g.2.push(n.name()),
            None => groups.push((status, rec.reason.clone(), vec![n.name()])),
        }
    }
    groups
        .into_iter()
        .map(|(status, reason, names)| {
            let first = format!("/parts/{}", token(names[0]));
            let mut c = Claim::new(
                ClaimKind::Missing,
                "parts",
                Basis::Run,
                format!(
                    "{} ({{status}}): {}",
                    names.join(", "),
                    if reason.is_some() {
                        "{reason}"
                    } else {
                        "not measured yet"
                    }
                ),
            );
            for (i, n) in names.iter().enumerate().skip(1) {
                c = c.fact(
                    &format!("status{i}"),
                    &status,
                    format!("/parts/{}/status", token(n)),
                );
            }
            c = c.fact("status", &status, format!("{first}/status"));
            if let Some(r) = reason {
                c = c.fact("reason", r, format!("{first}/reason"));
            }
            c.render()
        })
        .collect()
}

/// Advice for threads with independent data and threads sharing data,
/// from the key figures of the scaling and c2c parts and what other parts
/// added to these topics.
fn general_advice(b: &mut SummaryBuilder) {
    let m = b.machine;
    if b.emulated {
        // The timings cannot confirm or refute the classic layouts here:
        // say them as what the topology suggests.
        let multi = m.cpu_nodes().len() > 1;
        b.claim(Claim::new(
            ClaimKind::Advice,
            "independent-data",
            Basis::Topology,
            if multi {
                "Threads with independent data: the classic layout is one per node first (scatter, node-major), each thread first-touching its own data; the timings of this emulated CPU cannot confirm it."
            } else {
                "Threads with independent data: with one node, pin each thread and let it first-touch its own data."
            },
        ));
        b.claim(Claim::new(
            ClaimKind::Advice,
            "shared-data",
            Basis::Topology,
            "Threads sharing data: fill one node's cores first (compact, core-major), within one shared cache.",
        ));
        return;
    }
    if let Some(c) = independent_data_advice(b) {
        b.claim(c);
    }
    let shared_cache = m
        .caches
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind != "instruction" && c.cpus.len() > 1)
        .max_by_key(|(_, c)| (c.level, c.size_bytes));
    let shared = match (b.key("c2c_within_node_ns"), b.key("c2c_across_nodes_ns")) {
        (Some((w, wf)), Some((a, af))) => advice(
            "shared-data",
            "Threads sharing data: fill one node's cores first (compact, core-major), within one shared cache: a written line moves in {w} ns within a node{cmp} {a} ns across nodes.",
        )
        .fig("w", w, "ns", 0, wf)
        .fig("a", a, "ns", 0, af)
        .compare(
            "cmp",
            ("a", Relation::Greater, "w"),
            Threshold::Share(NOISE),
            (" but", " and"),
        ),
        (Some((w, wf)), None) => {
            let mut c = advice("shared-data", "").fig("w", w, "ns", 0, wf);
            let mut t = "Threads sharing data: keep them on cores that share a cache".to_string();
            if let Some((i, x)) = shared_cache {
                c = c
                    .fig("level", x.level as f64, "count", 0, Derivation::at(format!("/machine/caches/{i}/level")))
                    .fig("size", x.size_bytes as f64, "bytes", 0, Derivation::at(format!("/machine/caches/{i}/size_bytes")))
                    .fact("cpus", &x.cpus, format!("/machine/caches/{i}/cpus"));
                t.push_str(" (the L{level}: {size}, CPUs {cpus})");
            }
            t.push_str("; a written line moves between cores in {w} ns.");
            c.template = t;
            c
        }
        _ => Claim::new(
            ClaimKind::Advice,
            "shared-data",
            Basis::Topology,
            "Threads sharing data: fill one node's cores first (compact, core-major), within one shared cache.",
        ),
    };
    b.claim(shared);
    // What parts added to the general advice, right after it.
    for c in std::mem::take(&mut b.addenda) {
        match b
            .claims
            .iter()
            .rposition(|l| l.kind == ClaimKind::Advice && l.topic == c.topic)
        {
            Some(i) => b.claims.insert(i + 1, c),
            None => b.claims.push(c),
        }
    }
}

/// Differences smaller than this share are noise on any real machine.
const NOISE: f64 = 0.05;

/// A placement fact, true on any CPU: every done part's threads ran where
/// asked and its pages were on the nodes asked.
fn placements_verified(doc: &ReportResults) -> Option<Claim> {
    let done: Vec<&str> = doc
        .parts
        .iter()
        .filter(|(_, r)| r.status == PartStatus::Done && r.verified.is_some())
        .map(|(n, _)| n.name())
        .collect();
    if done.is_empty() || !doc.verification.verified {
        return None;
    }
    let mut c = Claim::new(
        ClaimKind::Finding,
        "placement",
        Basis::Placement,
        format!(
            "Every placement verified: in the {} part{} measured, threads ran on the CPUs asked and pages were on the nodes asked (checked with the kernel).",
            done.len(),
            numalab::text::format::s(done.len())
        ),
    )
    .fact("verified", true, "/verification/verified");
    for (i, n) in done.iter().enumerate() {
        c = c.fact(
            &format!("v{i}"),
            true,
            format!("/parts/{}/verified", token(n)),
        );
    }
    Some(c.render())
}

/// What the contention model calibrated from this report says of the
/// cases the report measured: how well it ranks them, and the resource it
/// finds busiest in the slowest (docs/model.md).
fn model_findings(doc: &ReportResults) -> Vec<Claim> {
    let Some(model) = &doc.model else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, what, check) in [
        ("sweep", "sweep classes", &model.sweep),
        ("scenarios", "scenario cases", &model.scenarios),
    ] {
        let Some(check) = check else { continue };
        let Some(rho) = check.rank_correlation else {
            continue;
        };
        let base = format!("/model/{key}");
        let mut c = Claim::new(
            ClaimKind::Finding,
            "model",
            Basis::Timing,
            format!(
                "The contention model, calibrated from this report, ranks the {{n}} measured {what} with a rank correlation of {{rho}} and a mean absolute error of {{mae}} in normalised time"
            ),
        )
        .fig("n", check.rows.len() as f64, "", 0, Derivation::Count { path: format!("{base}/rows") })
        .fig("rho", rho, "", 2, Derivation::Value { path: format!("{base}/rank_correlation") })
        .fig("mae", check.mean_abs_error, "", 2, Derivation::Value { path: format!("{base}/mean_abs_error") });
        match crate::predicted::slowest(check) {
            Some(i) => {
                let row = &check.rows[i];
                c.template.push_str(
                    "; in the slowest, {case} ({condition}), its busiest resource is {resource}.",
                );
                c = c
                    .fact("case", &row.labels, format!("{base}/rows/{i}/labels"))
                    .fact(
                        "condition",
                        &row.condition,
                        format!("{base}/rows/{i}/condition"),
                    )
                    .fact(
                        "resource",
                        row.bottleneck.as_deref().unwrap_or_default(),
                        format!("{base}/rows/{i}/bottleneck"),
                    );
            }
            None => c.template.push('.'),
        }
        out.push(c.render());
    }
    out
}

/// How to lay out threads with independent data, from the packed vs
/// spread figures of the scaling part.
fn independent_data_advice(b: &SummaryBuilder) -> Option<Claim> {
    let multi = b.machine.cpu_nodes().len() > 1;
    let (n, nf) = b.key("compared_threads")?;
    let (p, pf) = b.key("packed_per_thread_gbps")?;
    let spread = b.key("spread_per_thread_gbps");
    match (multi, spread) {
        (true, Some((sp, sf))) => {
            let c = advice("independent-data", "")
                .fig("n", n, "count", 0, nf)
                .fig("p", p, "GB/s", 2, pf)
                .fig("sp", sp, "GB/s", 2, sf)
                .compare(
                    "faster",
                    ("sp", Relation::Greater, "p"),
                    Threshold::Share(NOISE),
                    ("", ""),
                );
            let template = if c.holds("faster") == Some(true) {
                "Threads with independent data: spread them one per node first, then fill each node's second core (scatter, node-major), each with its own first-touched data: at {n} threads each got {sp} GB/s spread vs {p} packed (more than 5% apart{faster})."
            } else {
                "Threads with independent data: packing them on one node was not slower here ({p} vs {sp} GB/s per thread at {n} threads spread, within 5%{faster}), so keep them where their data is; let each thread first-touch its own data."
            };
            Some(Claim {
                template: template.into(),
                ..c
            })
        }
        (false, _) => {
            let mut c = advice("independent-data", "")
                .fig("n", n, "count", 0, nf)
                .fig("p", p, "GB/s", 1, pf);
            let mut t = "Threads with independent data: with one node there is nothing to spread over; let each thread first-touch its own data and pin it. {n} threads share the node's bandwidth ({p} GB/s each".to_string();
            if let Some((x, xf)) = b.key("single_thread_gbps") {
                c = c.fig("one", x, "GB/s", 1, xf);
                t.push_str(" vs {one} alone");
            }
            t.push_str(").");
            c.template = t;
            Some(c)
        }
        _ => None,
    }
}

/// The warnings: settings of the machine, the firmware, placements that did
/// not verify, failed parts (the parts' own warnings are their claims).
fn warnings(doc: &ReportResults) -> Vec<Claim> {
    let m = &doc.machine;
    let mut out = Vec::new();
    let setting = |t: &str| warning("settings", Basis::Setting, t);
    if let Some(env) = &doc.environment {
        // The environment's own sentences are the one source for settings
        // (NUMA balancing, THP, governor, cgroup limits, memory figures).
        for (i, w) in env.warnings.iter().enumerate() {
            out.push(setting("{^w}.").fact("w", w, format!("/environment/warnings/{i}")));
        }
    }
    if m.restricted {
        out.push(
            warning(
                "cgroup",
                Basis::Setting,
                "A cgroup (cpuset) restricts this process to CPUs {cpus} and memory nodes {nodes} of the {all} CPUs and nodes {all_nodes} the machine has; the report covers only what it may use.",
            )
            .fact("cpus", &m.allowed_cpus, "/machine/allowed_cpus")
            .fact("nodes", &m.allowed_nodes, "/machine/allowed_nodes")
            .fig("all", m.complete_cpus.len() as f64, "count", 0, Derivation::Count { path: "/machine/complete_cpus".into() })
            .fact("all_nodes", &m.complete_nodes, "/machine/complete_nodes"),
        );
    }
    for (i, w) in m.warnings.iter().enumerate() {
        out.push(warning("firmware", Basis::Topology, "Firmware: {w}").fact(
            "w",
            w,
            format!("/machine/warnings/{i}"),
        ));
    }
    for (i, p) in doc.verification.problems.iter().enumerate() {
        out.push(
            warning(
                "placement",
                Basis::Placement,
                "Placement did not verify: {p}.",
            )
            .fact("p", p, format!("/verification/problems/{i}")),
        );
    }
    let failed: Vec<&str> = doc
        .parts
        .iter()
        .filter(|(_, r)| r.status == PartStatus::Failed)
        .map(|(n, _)| n.name())
        .collect();
    if !failed.is_empty() {
        let mut c = warning(
            "parts",
            Basis::Run,
            format!(
                "Part{} {} failed (see the parts table for why).",
                numalab::text::format::s(failed.len()),
                failed.join(", ")
            ),
        );
        for (i, n) in failed.iter().enumerate() {
            c = c.fact(
                &format!("failed{i}"),
                "failed",
                format!("/parts/{}/status", token(n)),
            );
        }
        out.push(c);
    }
    out.into_iter().map(Claim::render).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::{check, check_claim};
    use crate::part::PartResult;
    use crate::results::{Mode, PartStatus};
    use crate::session::new_document;
    use crate::views::matrix::claim_tests::ring_bandwidth;
    use numalab::measure::environment::Environment;

    /// A report of the CPU-less ring with its bandwidth matrix done.
    fn ring_report(emulated: Option<&str>) -> ReportResults {
        let m = crate::fixture("qemu-ring4-cpuless-hmat.xml");
        let mut env = Environment::capture();
        env.emulated_cpu = emulated.map(str::to_string);
        env.warnings.clear();
        let mut doc = new_document(
            &REPORT,
            &m,
            Some(env),
            Mode::Quick,
            100.0,
            64 << 20,
            &REPORT.all(),
        );
        let name = REPORT.find("bandwidth-matrix").unwrap();
        let rec = doc.parts.get_mut(name);
        rec.status = PartStatus::Done;
        rec.verified = Some(true);
        rec.result = Some(PartResult::new(ring_bandwidth()));
        doc.summary = crate::summarize::summarize(&doc);
        doc
    }

    #[test]
    fn every_sentence_is_a_claim_that_re_derives() {
        let doc = ring_report(None);
        let s = &doc.summary;
        assert_eq!(s.banner, None);
        assert!(
            s.findings.iter().any(|f| f.topic == "bandwidth"),
            "{:?}",
            s.findings
        );
        let v = serde_json::to_value(&doc).unwrap();
        assert_eq!(check(&v), Vec::<String>::new());
        // A sentence edited after rendering is caught.
        let mut v2 = v.clone();
        v2["summary"]["findings"][0]["text"] = "One thread reads 9.9 GB/s.".into();
        assert_eq!(check(&v2).len(), 1);
        // So is a figure the data do not give.
        let mut v3 = v;
        v3["parts"]["bandwidth-matrix"]["result"]["bandwidth"][0][4]["value"]["median"] =
            0.7.into();
        let bad = check(&v3);
        assert!(
            bad.iter().any(|b| b.contains("but the data give")),
            "{bad:?}"
        );
    }

    /// The host's drift, from the probes between the parts, widens the
    /// bandwidth figures' intervals and, when it at least doubles one,
    /// is a warning whose numbers re-derive from results.json; without
    /// probes, or with probes that agree, the intervals are the
    /// measurements' own and nothing is said.
    #[test]
    fn the_hosts_drift_widens_the_intervals_and_is_said_where_it_dominates() {
        use crate::model::drift::DriftProbe;
        let mut doc = ring_report(None);
        let own = doc.summary.key_intervals["local_read_gbps"];
        let v = doc.summary.key_figures.get("local_read_gbps").unwrap();
        assert!(
            (own[0] - v * 0.99).abs() < 1e-9 && (own[1] - v * 1.01).abs() < 1e-9,
            "{own:?}"
        );
        let probe = |at_s: f64, read_gbps: f64| DriftProbe {
            run: 1,
            at_s,
            after: None,
            latency_ns: 100.0,
            read_gbps,
            pair_read_gbps: f64::NAN,
            pair_c2c_ns: f64::NAN,
        };
        // Three probes that agree: no drift to add, nothing said.
        doc.drift.probes = vec![probe(0.0, 30.0), probe(10.0, 30.0), probe(20.0, 30.0)];
        doc.drift.refresh();
        doc.summary = summarize(&doc);
        assert_eq!(doc.summary.key_intervals["local_read_gbps"], own);
        assert!(!doc.summary.warnings.iter().any(|w| w.contains("own speed")));
        // Probes 27, 30, 33 GB/s: the interval takes the drift in quadrature.
        doc.drift.probes = vec![probe(0.0, 27.0), probe(10.0, 30.0), probe(20.0, 33.0)];
        doc.drift.refresh();
        doc.summary = summarize(&doc);
        let wide = doc.summary.key_intervals["local_read_gbps"];
        let drift = doc.drift.bandwidth.clone().unwrap();
        assert_eq!((drift.probes, drift.low, drift.high), (3, 27.0, 33.0));
        let lw = ((1.0f64 / 0.99).ln().powi(2) + (drift.t * drift.log_sd).powi(2)).sqrt();
        assert!((wide[0] - v * (-lw).exp()).abs() < 1e-9, "{wide:?}");
        assert!(wide[1] > v * 1.4 && wide[0] < v * 0.7, "{wide:?}");
        let w: Vec<&String> = doc
            .summary
            .warnings
            .iter()
            .filter(|w| w.contains("own speed"))
            .collect();
        assert_eq!(w.len(), 1, "{:?}", doc.summary.warnings);
        assert!(
            w[0].contains("3 looks between its parts found local latency at 100-100 ns, one thread's read at 27.0-33.0 GB/s. ")
                && w[0].contains(&format!("±{:.0}% for one thread's bandwidth", drift.rel_half_width * 100.0))
                && !w[0].contains("two threads"),
            "{}",
            w[0]
        );
        assert!(!w[0].contains("two-CPU looks"), "{}", w[0]);
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(check(&json), Vec::<String>::new());
        // Two-CPU looks that flip (the host moving two vCPUs): when they are
        // what doubled a figure's interval, the sentence says what depends on
        // where the CPUs run.
        let mut flip = doc.clone();
        for (p, g) in flip.drift.probes.iter_mut().zip([18.0, 32.0, 19.0]) {
            p.pair_read_gbps = g;
        }
        flip.drift.refresh();
        let key = "packed_per_thread_gbps".to_string();
        let own = BTreeMap::from([(key.clone(), [18.0, 19.0])]);
        let wide = BTreeMap::from([(key, [7.0, 49.0])]);
        let c = drift_warning(&flip, &own, &wide).unwrap();
        assert!(
            c.text
                .contains("two threads reading together at 18.0-32.0 GB/s each")
                && c.text.ends_with(
                    "latency under another CPU's load and its knee, which a run may find or not)."
                ),
            "{}",
            c.text
        );
        // A drift past twice either way is not given as "±290%": the range
        // above says how far it went.
        let pair = flip.drift.pair.clone().unwrap();
        assert!(pair.rel_half_width > 1.0, "{pair:?}");
        assert!(
            c.text
                .contains("more than twice either way for two threads' bandwidth")
                && !c.text.contains("±{pair}")
                && !c
                    .text
                    .contains(&format!("±{:.0}%", pair.rel_half_width * 100.0)),
            "{}",
            c.text
        );
        let note = crate::key_table::interval_note(&flip).unwrap();
        assert!(
            note.contains(&format!(
                "two threads' bandwidth a factor of {:.1} either way",
                1.0 + pair.rel_half_width
            )),
            "{note}"
        );
        // The page and the text say what the intervals hold.
        let note = crate::key_table::interval_note(&doc).unwrap();
        assert!(
            note.contains("3 looks between the parts: latency ±0.0%, one thread's bandwidth ±"),
            "{note}"
        );
        assert!(
            note.ends_with(&format!(
                "one thread's bandwidth ±{:.0}%), so that another run at another moment falls within them.",
                drift.rel_half_width * 100.0
            )),
            "{note}"
        );
    }

    /// A run that did not watch the host says why under the key figures,
    /// with no look at all or with its first only; results.json keeps it.
    #[test]
    fn a_run_that_did_not_watch_the_host_says_why_under_the_key_figures() {
        use crate::model::drift::{DriftProbe, Unwatched};
        let mut doc = ring_report(None);
        let why = "a look at the host's speed would take about 7.8 s here, and the 3 that estimate a drift more than a quarter of the 4 s budget (--budget 94 or more, or a smaller --size, gives them)";
        doc.drift.unwatched = vec![Unwatched {
            run: 1,
            why: why.into(),
        }];
        doc.summary = summarize(&doc);
        let own = doc.summary.key_intervals["local_read_gbps"];
        let note = crate::key_table::interval_note(&doc).unwrap();
        assert_eq!(
            note,
            format!("95% intervals: each measurement's own, from its repetitions, without the host's drift: {why}.")
        );
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["drift"]["unwatched"][0]["run"], 1);
        assert_eq!(check(&json), Vec::<String>::new());
        // One look, then no more: the look is counted, and the reason given.
        doc.drift.probes = vec![DriftProbe {
            run: 1,
            at_s: 0.5,
            after: None,
            latency_ns: 300.0,
            read_gbps: 15.0,
            pair_read_gbps: 14.0,
            pair_c2c_ns: 60.0,
        }];
        doc.drift.unwatched[0].why = "its one look at the host's speed took 14.0 s, and the 3 that estimate a drift more than a quarter of the 80 s budget (--budget 168 or more, or a smaller --size, gives them)".into();
        doc.drift.refresh();
        doc.summary = summarize(&doc);
        assert_eq!(doc.summary.key_intervals["local_read_gbps"], own);
        let note = crate::key_table::interval_note(&doc).unwrap();
        assert!(
            note.ends_with("1 look at the host's speed between the parts, too few (3 at least) to add how far it drifts: its one look at the host's speed took 14.0 s, and the 3 that estimate a drift more than a quarter of the 80 s budget (--budget 168 or more, or a smaller --size, gives them)."),
            "{note}"
        );
        assert_eq!(
            check(&serde_json::to_value(&doc).unwrap()),
            Vec::<String>::new()
        );
        // A report without looks and without a reason (a topology file's)
        // says nothing of the host.
        doc.drift = Default::default();
        assert!(serde_json::to_value(&doc).unwrap().get("drift").is_none());
    }

    #[test]
    fn questions_this_machine_cannot_answer_are_one_line() {
        let m = crate::fixture("8em64t-2s2ca2c-buggynuma.xml");
        let doc = serde_json::json!({"p": {
            "c": "this machine has no memory node away from node A",
            "b": "this sweep has one memory node (node 0)",
            "mem_nodes": [0],
            "noise": "the difference is inside the noise"
        }});
        let finding = |topic: &str, template: &str, why: &str| {
            Claim::new(ClaimKind::Finding, topic, Basis::Run, template).fact(
                "why",
                &doc["p"][why],
                format!("/p/{why}"),
            )
        };
        let mut b = SummaryBuilder::for_tests(&m, "/p");
        b.claim(
            finding(
                "scenarios",
                "Classic scenario (c): cannot tell — {why}.",
                "c",
            )
            .not_answerable("classic scenario (c)", Lacks::SecondMemoryNode),
        );
        b.claim(finding(
            "scenarios",
            "Classic scenario (b): cannot tell — {why}.",
            "noise",
        ));
        b.claim(
            finding("crossfire", "Crossfire: cannot be told: {why}.", "b")
                .fact("mem_nodes", [0], "/p/mem_nodes")
                .not_answerable("crossfire", Lacks::SecondMemoryNode),
        );
        // A section's sentence (detail) stays where it is.
        let mut detail = finding("scenarios", "Classic scenario (c), loaded: {why}.", "c")
            .not_answerable("classic scenario (c)", Lacks::SecondMemoryNode);
        detail.kind = ClaimKind::Detail;
        b.claim(detail);
        not_answerable(&mut b);
        let findings: Vec<&str> = b
            .claims
            .iter()
            .filter(|c| c.kind == ClaimKind::Finding)
            .map(|c| c.text.as_str())
            .collect();
        // The cannot-tell from noise stays a sentence of its own.
        assert_eq!(
            findings,
            [
                "Classic scenario (b): cannot tell — the difference is inside the noise.",
                "Not answerable on one memory node: classic scenario (c), crossfire (they need a second memory node).",
            ]
        );
        assert_eq!(
            b.claims
                .iter()
                .filter(|c| c.kind == ClaimKind::Detail)
                .count(),
            1
        );
        // The line carries what each question rested on, re-derived.
        let line = b.claims.last().unwrap();
        assert_eq!(line.basis, Basis::Topology);
        let names: Vec<&str> = line.facts.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["q0_why", "q1_why", "q1_mem_nodes"]);
        assert_eq!(check_claim(line, &doc), Vec::<String>::new());
        let mut two = doc.clone();
        two["p"]["mem_nodes"] = serde_json::json!([0, 1]);
        assert_eq!(check_claim(line, &two).len(), 1);
        // One question alone: "it needs".
        let mut one = SummaryBuilder::for_tests(&m, "/p");
        one.claim(
            finding("crossfire", "Crossfire: cannot be told: {why}.", "b")
                .not_answerable("crossfire", Lacks::SecondMemoryNode),
        );
        not_answerable(&mut one);
        assert_eq!(
            one.claims[0].text,
            "Not answerable on one memory node: crossfire (it needs a second memory node)."
        );
    }

    #[test]
    fn each_setting_is_warned_about_once() {
        let mut doc = ring_report(None);
        let env = doc.environment.as_mut().unwrap();
        env.numa_balancing = Some(true);
        env.warnings = vec![
            "automatic NUMA balancing is on (/proc/sys/kernel/numa_balancing=1): pages may migrate during the experiment; turn it off with echo 0 > /proc/sys/kernel/numa_balancing".into(),
        ];
        doc.summary = crate::summarize::summarize(&doc);
        let w = &doc.summary.warnings;
        assert_eq!(
            w.iter()
                .filter(|x| x.to_lowercase().contains("numa balancing"))
                .count(),
            1,
            "{w:?}"
        );
        assert!(w[0].starts_with("Automatic NUMA balancing is on"), "{w:?}");
        let v = serde_json::to_value(&doc).unwrap();
        assert_eq!(check(&v), Vec::<String>::new());
    }

    #[test]
    fn an_emulated_cpu_withholds_timing_claims_and_keeps_the_rest() {
        let doc = ring_report(Some(
            "software emulation: CPU model 'QEMU TCG CPU version 2.5+'",
        ));
        let s = &doc.summary;
        let banner = s.banner.as_deref().expect("a banner");
        assert!(
            banner.starts_with("These timings were taken on an emulated CPU (software emulation: CPU model 'QEMU TCG CPU version 2.5+')"),
            "{banner}"
        );
        // The bandwidth finding is withheld, the topology advice and the
        // missing parts stay.
        assert!(
            s.findings.iter().all(|f| f.topic != "bandwidth"),
            "{:?}",
            s.findings
        );
        assert_eq!(s.withheld.len(), 1, "{:?}", s.withheld);
        assert!(
            s.withheld[0].starts_with("One thread reads 2.0 GB/s"),
            "{:?}",
            s.withheld
        );
        // The placement proof stands.
        assert!(
            s.findings.iter().any(|f| f.text
                == "Every placement verified: in the 1 part measured, threads ran on the CPUs asked and pages were on the nodes asked (checked with the kernel)."),
            "{:?}",
            s.findings
        );
        assert!(
            s.advice.iter().any(|a| a.topic == "shared-data"),
            "{:?}",
            s.advice
        );
        assert!(!s.missing.is_empty());
        let v = serde_json::to_value(&doc).unwrap();
        assert_eq!(check(&v), Vec::<String>::new());
    }
}
