//! The summary at the top of a report: what the machine is, the key
//! numbers in plain sentences, the placement advice that follows from them,
//! and every warning that can make the numbers (or the machine) wrong.
//!
//! Computed from whatever parts are done, so a partial report still has a
//! summary, and says which questions it cannot answer yet. Each part adds
//! its own sentences, advice, key figures and warnings through a
//! [`SummaryBuilder`] ([`crate::report::part::ReportPart::summarize`]); the
//! advice that draws on several parts (how to lay out threads with
//! independent or shared data) and the warnings about the machine and its
//! settings are written here from the key figures.

use crate::machine::{Machine, Source};
use crate::report::results::{PartStatus, ReportResults};
use crate::text::format::{bytes as format_bytes, plural};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One sentence of the summary and the question it answers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SummaryLine {
    /// `machine`, `latency`, `bandwidth`, `sizes`, `scaling`, `writers`,
    /// `crossfire`, `loaded-latency`, `c2c`, `policies`, `independent-data`,
    /// `shared-data`.
    pub topic: String,
    pub text: String,
}

/// The key numbers, for scripts and `numalab compare`, by name (`None`: not
/// measured or not meaningful on this machine). Every part declares the
/// names it sets ([`crate::report::part::PartInfo::key_figures`]), so all
/// of them are present, as null until measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyFigures(BTreeMap<String, Option<f64>>);

impl KeyFigures {
    /// A figure, when measured.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.0.get(key).copied().flatten()
    }

    /// Sets a figure (`None`: not measured).
    pub fn set(&mut self, key: &str, v: Option<f64>) {
        self.0.insert(key.to_string(), v.filter(|x| x.is_finite()));
    }

    /// Every figure by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<f64>)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

impl Serialize for KeyFigures {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            // Counts (threads) are whole numbers: written as integers.
            match v {
                Some(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => {
                    map.serialize_entry(k, &(*x as i64))?
                }
                other => map.serialize_entry(k, other)?,
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for KeyFigures {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        BTreeMap::<String, Option<f64>>::deserialize(d).map(KeyFigures)
    }
}

/// The summary of a report.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Summary {
    /// NUMA nodes of the machine, CPU-less ones included.
    pub node_count: usize,
    /// The first sentence: what the machine is (it names the node count).
    pub headline: String,
    /// The key facts, in plain sentences.
    pub findings: Vec<SummaryLine>,
    /// The placement advice that follows from them.
    pub advice: Vec<SummaryLine>,
    /// Settings and results that can make the numbers wrong or the machine
    /// slower than it should be (NUMA balancing, THP, cgroup limits,
    /// firmware distances, placements that did not verify).
    pub warnings: Vec<String>,
    /// Parts not in the report and why.
    pub missing: Vec<String>,
    pub key_figures: KeyFigures,
}

/// What parts add to the summary while it is built.
pub struct SummaryBuilder<'a> {
    /// The machine the report describes.
    pub machine: &'a Machine,
    /// Bytes per buffer of the report's memory-bound measurements.
    pub buffer_bytes: u64,
    findings: Vec<SummaryLine>,
    advice: Vec<SummaryLine>,
    warnings: Vec<String>,
    key_figures: KeyFigures,
    /// Sentences to append to the general advice on a topic.
    addenda: Vec<(String, String)>,
}

impl<'a> SummaryBuilder<'a> {
    fn new(machine: &'a Machine, buffer_bytes: u64) -> Self {
        SummaryBuilder {
            machine,
            buffer_bytes,
            findings: Vec::new(),
            advice: Vec::new(),
            warnings: Vec::new(),
            key_figures: KeyFigures::default(),
            addenda: Vec::new(),
        }
    }

    /// A sentence of the findings, on `topic`.
    pub fn finding(&mut self, topic: &str, text: String) {
        self.findings.push(line(topic, text));
    }

    /// A piece of advice, on `topic`.
    pub fn advise(&mut self, topic: &str, text: String) {
        self.advice.push(line(topic, text));
    }

    /// A sentence for the end of the general advice on `topic`
    /// (`independent-data`, `shared-data`).
    pub fn add_to_advice(&mut self, topic: &str, text: String) {
        self.addenda.push((topic.to_string(), text));
    }

    /// A warning that can make the numbers wrong.
    pub fn warn(&mut self, text: String) {
        self.warnings.push(text);
    }

    /// Sets a key figure.
    pub fn set_figure(&mut self, key: &str, v: Option<f64>) {
        self.key_figures.set(key, v);
    }

    /// A key figure set so far.
    pub fn figure(&self, key: &str) -> Option<f64> {
        self.key_figures.get(key)
    }
}

fn line(topic: &str, text: String) -> SummaryLine {
    SummaryLine {
        topic: topic.into(),
        text,
    }
}

/// The headline: what the machine is, with its node count.
pub fn headline(m: &Machine, hostname: Option<&str>) -> String {
    let nodes = m.nodes.len();
    let cpuless = m.nodes.iter().filter(|n| n.cpuless).count();
    let with_cpus = nodes - cpuless;
    let mem: u64 = m.nodes.iter().map(|n| n.memory_bytes).sum();
    let what = match (&m.source, hostname) {
        (Source::File { path }, _) => format!("The machine of {}", path.display()),
        (Source::Live, Some(h)) if !h.is_empty() => format!("This machine ({h})"),
        (Source::Live, _) => "This machine".to_string(),
    };
    let node_text = if cpuless > 0 {
        format!(
            "{} ({with_cpus} with CPUs, {cpuless} CPU-less)",
            plural(nodes, "NUMA node", "NUMA nodes")
        )
    } else {
        plural(nodes, "NUMA node", "NUMA nodes")
    };
    let llc = m
        .last_level_cache_bytes()
        .map(|b| format!(", {} last-level cache", format_bytes(b)))
        .unwrap_or_default();
    format!(
        "{what} has {node_text}, {}, {}, {}{}, {} of memory{llc}.",
        plural(m.packages.len(), "package", "packages"),
        plural(m.cores.len(), "core", "cores"),
        plural(m.complete_cpus.len(), "CPU", "CPUs"),
        if m.smt > 1 {
            format!(" (SMT {})", m.smt)
        } else {
            String::new()
        },
        format_bytes(mem),
    )
}

impl Summary {
    /// The summary of whatever `doc` holds so far.
    pub fn of(doc: &ReportResults) -> Summary {
        let m = &doc.machine;
        let mut b = SummaryBuilder::new(m, doc.buffer_bytes);
        for (name, _) in doc.parts.iter() {
            for key in name.part().info().key_figures {
                b.set_figure(key, None);
            }
        }
        for (name, rec) in doc.parts.iter() {
            if let Some(r) = rec.done() {
                name.part().summarize(r, &mut b);
            }
        }
        advice(&mut b);
        let part_warnings = std::mem::take(&mut b.warnings);
        let mut s = Summary {
            node_count: m.nodes.len(),
            headline: headline(m, doc.environment.as_ref().map(|e| e.hostname.as_str())),
            findings: b.findings,
            advice: b.advice,
            warnings: Vec::new(),
            missing: missing(doc),
            key_figures: b.key_figures,
        };
        warnings(&mut s, doc, part_warnings);
        s
    }
}

/// Parts missing for the same reason are one line.
fn missing(doc: &ReportResults) -> Vec<String> {
    let mut groups: Vec<(String, String, Vec<&str>)> = Vec::new();
    for (n, rec) in doc.missing() {
        let reason = rec
            .reason
            .clone()
            .unwrap_or_else(|| "not measured yet".into());
        let status = rec.status.name().to_string();
        match groups
            .iter_mut()
            .find(|(st, r, _)| *st == status && *r == reason)
        {
            Some(g) => g.2.push(n.name()),
            None => groups.push((status, reason, vec![n.name()])),
        }
    }
    groups
        .into_iter()
        .map(|(status, reason, names)| format!("{} ({status}): {reason}", names.join(", ")))
        .collect()
}

/// `t` with its first letter upper case (the experiments' notes and
/// advice start lower case, as clauses).
pub fn sentence_case(t: &str) -> String {
    let mut c = t.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect::<String>(),
        None => String::new(),
    }
}

/// Advice for threads with independent data and threads sharing data,
/// from the key figures of the scaling and c2c parts and what other parts
/// added to these topics.
fn advice(b: &mut SummaryBuilder) {
    let m = b.machine;
    if let Some(t) = independent_data_advice(b) {
        b.advise("independent-data", t);
    }
    let shared_cache = m
        .caches
        .iter()
        .filter(|c| c.kind != "instruction" && c.cpus.len() > 1)
        .max_by_key(|c| (c.level, c.size_bytes))
        .map(|c| {
            format!(
                "the L{}: {}, CPUs {}",
                c.level,
                format_bytes(c.size_bytes),
                c.cpus
            )
        });
    let shared = match (b.figure("c2c_within_node_ns"), b.figure("c2c_across_nodes_ns")) {
        (Some(w), Some(a)) => format!(
            "Threads sharing data: fill one node's cores first (compact, core-major), within one shared cache: a written line moves in {w:.0} ns within a node but {a:.0} ns across nodes."
        ),
        (Some(w), None) => format!(
            "Threads sharing data: keep them on cores that share a cache{}; a written line moves between cores in {w:.0} ns.",
            shared_cache
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default()
        ),
        _ => "Threads sharing data: fill one node's cores first (compact, core-major), within one shared cache.".to_string(),
    };
    b.advise("shared-data", shared);
    // What parts added to the general advice, at the end of its line.
    for (topic, text) in std::mem::take(&mut b.addenda) {
        match b.advice.iter_mut().rev().find(|l| l.topic == topic) {
            Some(l) => {
                l.text.push(' ');
                l.text.push_str(&text);
            }
            None => b.advise(&topic, text),
        }
    }
}

/// How to lay out threads with independent data, from the packed vs
/// spread figures of the scaling part.
fn independent_data_advice(b: &SummaryBuilder) -> Option<String> {
    let multi = b.machine.cpu_nodes().len() > 1;
    let n = b.figure("compared_threads")? as usize;
    let p = b.figure("packed_per_thread_gbps")?;
    let spread = b.figure("spread_per_thread_gbps");
    match (multi, spread) {
        (true, Some(sp)) if sp > p * 1.05 => Some(format!(
            "Threads with independent data: spread them one per node first, then fill each node's second core (scatter, node-major), each with its own first-touched data: at {n} threads each got {sp:.1} GB/s spread vs {p:.1} packed."
        )),
        (true, Some(sp)) => Some(format!(
            "Threads with independent data: packing them on one node was not slower here ({p:.1} vs {sp:.1} GB/s per thread at {n} threads spread), so keep them where their data is; let each thread first-touch its own data."
        )),
        (false, _) => Some(format!(
            "Threads with independent data: with one node there is nothing to spread over; let each thread first-touch its own data and pin it. {n} threads share the node's bandwidth ({p:.1} GB/s each{}).",
            b.figure("single_thread_gbps")
                .map(|x| format!(" vs {x:.1} alone"))
                .unwrap_or_default()
        )),
        _ => None,
    }
}

/// The warnings: settings of the machine, the firmware, what the parts
/// found (`part_warnings`), placements that did not verify, failed parts.
fn warnings(s: &mut Summary, doc: &ReportResults, part_warnings: Vec<String>) {
    let m = &doc.machine;
    if let Some(env) = &doc.environment {
        if env.numa_balancing == Some(true) {
            s.warnings.push(
                "Automatic NUMA balancing is on (/proc/sys/kernel/numa_balancing): the kernel migrates pages behind programs' backs; numalab checks pages at the start and end of each measurement, but production placements may move."
                    .into(),
            );
        }
        if env.thp_enabled.as_deref() == Some("always") {
            s.warnings.push(
                "Transparent huge pages are set to 'always': page-granular placement (interleave, striping) becomes 2 MiB runs in large buffers unless a program turns THP off for them."
                    .into(),
            );
        }
        if let Some(max) = &env.cgroup.memory_max {
            if max != "max" {
                s.warnings.push(format!(
                    "The cgroup limits this process's memory to {max} bytes."
                ));
            }
        }
        for w in &env.warnings {
            if !s.warnings.contains(w) {
                s.warnings.push(w.clone());
            }
        }
    }
    if m.restricted {
        s.warnings.push(format!(
            "A cgroup (cpuset) restricts this process to CPUs {} and memory nodes {} of the {} CPUs and nodes {} the machine has; the report covers only what it may use.",
            m.allowed_cpus, m.allowed_nodes, m.complete_cpus.len(), m.complete_nodes
        ));
    }
    for w in &m.warnings {
        s.warnings.push(format!("Firmware: {w}"));
    }
    s.warnings.extend(part_warnings);
    for p in &doc.verification.problems {
        s.warnings.push(format!("Placement did not verify: {p}."));
    }
    let failed: Vec<&str> = doc
        .parts
        .iter()
        .filter(|(_, r)| r.status == PartStatus::Failed)
        .map(|(n, _)| n.name())
        .collect();
    if !failed.is_empty() {
        s.warnings.push(format!(
            "Part{} {} failed (see the parts table for why).",
            crate::text::format::s(failed.len()),
            failed.join(", ")
        ));
    }
}
