//! The summary at the top of a report: what the machine is, the key
//! numbers in plain sentences, the placement advice that follows from them,
//! and every warning that can make the numbers (or the machine) wrong.
//!
//! Here: the summary as a document holds it ([`Summary`]) and the
//! [`SummaryBuilder`] each part adds its own sentences, advice, key
//! figures and warnings through ([`crate::part::ReportPart::summarize`]).
//! The summary of a whole report, with the advice that draws on several
//! parts and the warnings about the machine and its settings, is made in
//! [`crate::summarize`].

pub use crate::claims::sentence_case;
use crate::claims::{Basis, Claim, ClaimKind, Derivation};
use numalab::machine::{Machine, Source};
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
/// names it sets ([`crate::part::PartInfo::key_figures`]), so all
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
    /// The 95% interval of each key figure whose measurements have one
    /// ([`crate::claims::Derivation::interval`]): `[low, high]` by name.
    /// It is the measurement's own (repetitions within this run); two
    /// runs differ by more where the machine's speed drifts between them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub key_intervals: BTreeMap<String, [f64; 2]>,
    /// Set when the timings were taken on an emulated CPU: said first, and
    /// the timing claims are withheld.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub banner: Option<String>,
    /// Timing sentences left out because the CPU is emulated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
    /// Every sentence above as a structured claim: its figures, where they
    /// come from in this document, and the comparisons its words rest on
    /// ([`crate::claims::check`] re-derives them).
    #[serde(default)]
    pub claims: Vec<Claim>,
}

/// What parts add to the summary while it is built.
pub struct SummaryBuilder<'a> {
    /// The machine the report describes.
    pub machine: &'a Machine,
    /// Bytes per buffer of the report's memory-bound measurements.
    pub buffer_bytes: u64,
    /// JSON pointer of the result of the part being summarized.
    pub(crate) base: String,
    pub(crate) claims: Vec<Claim>,
    pub(crate) key_figures: KeyFigures,
    /// Where each key figure comes from in results.json.
    pub(crate) key_sources: BTreeMap<String, Derivation>,
    /// Sentences to follow the general advice on a topic.
    pub(crate) addenda: Vec<Claim>,
    /// Timings come from an emulated CPU: the general advice is the
    /// topology's, not the timings'.
    pub(crate) emulated: bool,
}

impl<'a> SummaryBuilder<'a> {
    pub(crate) fn new(machine: &'a Machine, buffer_bytes: u64) -> Self {
        SummaryBuilder {
            machine,
            buffer_bytes,
            base: String::new(),
            claims: Vec::new(),
            key_figures: KeyFigures::default(),
            key_sources: BTreeMap::new(),
            addenda: Vec::new(),
            emulated: false,
        }
    }

    /// A builder for `machine` summarizing the part result at `base`.
    #[cfg(test)]
    pub(crate) fn for_tests(machine: &'a Machine, base: &str) -> Self {
        let mut b = SummaryBuilder::new(machine, 64 << 20);
        b.base = base.to_string();
        b
    }

    /// The claims added so far.
    #[cfg(test)]
    pub(crate) fn claims(&self) -> &[Claim] {
        &self.claims
    }

    /// A claim (finding, advice or warning), rendered.
    pub fn claim(&mut self, c: Claim) {
        self.claims.push(c.render());
    }

    /// A claim to follow the general advice on its topic
    /// (`independent-data`, `shared-data`).
    pub fn add_to_advice(&mut self, c: Claim) {
        self.addenda.push(c.render());
    }

    /// The JSON pointer of the result of the part being summarized.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The JSON pointer of `rel` in the result of the part being
    /// summarized (`latency/0/1/value/median`).
    pub fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.base)
    }

    /// The number at `rel` in the part's result.
    pub fn at(&self, rel: &str) -> Derivation {
        Derivation::at(self.path(rel))
    }

    /// The median of `items` (value, path in the part's result), finite
    /// ones only, with its derivation.
    pub fn median_of(
        &self,
        items: impl IntoIterator<Item = (f64, String)>,
    ) -> Option<(f64, Derivation)> {
        let (v, of) = self.finite(items);
        Some((
            numalab::measure::stats::median(v)?,
            Derivation::Median { of },
        ))
    }

    /// The smallest of `items`, as [`SummaryBuilder::median_of`].
    pub fn min_of(
        &self,
        items: impl IntoIterator<Item = (f64, String)>,
    ) -> Option<(f64, Derivation)> {
        let (v, of) = self.finite(items);
        let lo = v.into_iter().reduce(f64::min)?;
        Some((lo, Derivation::Min { of }))
    }

    /// The largest of `items`, as [`SummaryBuilder::median_of`].
    pub fn max_of(
        &self,
        items: impl IntoIterator<Item = (f64, String)>,
    ) -> Option<(f64, Derivation)> {
        let (v, of) = self.finite(items);
        let hi = v.into_iter().reduce(f64::max)?;
        Some((hi, Derivation::Max { of }))
    }

    fn finite(
        &self,
        items: impl IntoIterator<Item = (f64, String)>,
    ) -> (Vec<f64>, Vec<Derivation>) {
        items
            .into_iter()
            .filter(|(v, _)| v.is_finite())
            .map(|(v, p)| (v, self.at(&p)))
            .unzip()
    }

    /// Sets a key figure.
    pub fn set_figure(&mut self, key: &str, v: Option<f64>) {
        self.key_figures.set(key, v);
    }

    /// Sets a key figure and where it comes from, so that claims built
    /// on it elsewhere ([`SummaryBuilder::key`]) can be re-derived.
    pub fn set_key(&mut self, key: &str, v: f64, from: Derivation) {
        self.key_figures.set(key, Some(v));
        self.key_sources.insert(key.to_string(), from);
    }

    /// A key figure set so far.
    pub fn figure(&self, key: &str) -> Option<f64> {
        self.key_figures.get(key)
    }

    /// A key figure with where it comes from, when set by
    /// [`SummaryBuilder::set_key`].
    pub fn key(&self, key: &str) -> Option<(f64, Derivation)> {
        Some((self.figure(key)?, self.key_sources.get(key)?.clone()))
    }
}

/// A finding on `topic`, from timings.
pub fn finding(topic: &str, template: impl Into<String>) -> Claim {
    Claim::new(ClaimKind::Finding, topic, Basis::Timing, template)
}

/// Advice on `topic`, from timings.
pub fn advice(topic: &str, template: impl Into<String>) -> Claim {
    Claim::new(ClaimKind::Advice, topic, Basis::Timing, template)
}

/// A warning on `topic`.
pub fn warning(topic: &str, basis: Basis, template: impl Into<String>) -> Claim {
    Claim::new(ClaimKind::Warning, topic, basis, template)
}

/// The headline: what the machine is, with its node count.
pub fn headline(m: &Machine, hostname: Option<&str>) -> Claim {
    let nodes = m.nodes.len();
    let cpuless = m.nodes.iter().filter(|n| n.cpuless).count();
    let with_cpus = nodes - cpuless;
    let mem: u64 = m.nodes.iter().map(|n| n.memory_bytes).sum();
    let mut c = Claim::new(ClaimKind::Headline, "machine", Basis::Topology, "");
    let what = match (&m.source, hostname) {
        (Source::File { path }, _) => {
            c = c.fact(
                "file",
                path.to_string_lossy().to_string(),
                "/machine/source/path",
            );
            "The machine of {file}"
        }
        (Source::Live, Some(h)) if !h.is_empty() => {
            c = c.fact("host", h, "/environment/hostname");
            "This machine ({host})"
        }
        (Source::Live, _) => "This machine",
    };
    let noun = |n: usize, one: &str, many: &str| if n == 1 { one } else { many }.to_string();
    let count = |path: &str| Derivation::Count { path: path.into() };
    let nodes_where = |cpuless: bool| Derivation::CountWhere {
        path: "/machine/nodes".into(),
        field: "cpuless".into(),
        equals: cpuless.into(),
    };
    c = c
        .fig("nodes", nodes as f64, "count", 0, count("/machine/nodes"))
        .fig(
            "packages",
            m.packages.len() as f64,
            "count",
            0,
            count("/machine/packages"),
        )
        .fig(
            "cores",
            m.cores.len() as f64,
            "count",
            0,
            count("/machine/cores"),
        )
        .fig(
            "cpus",
            m.complete_cpus.len() as f64,
            "count",
            0,
            count("/machine/complete_cpus"),
        )
        .fig(
            "memory",
            mem as f64,
            "bytes",
            0,
            Derivation::Sum {
                of: (0..nodes)
                    .map(|i| Derivation::at(format!("/machine/nodes/{i}/memory_bytes")))
                    .collect(),
            },
        );
    let mut t = format!(
        "{what} has {{nodes}} {}",
        noun(nodes, "NUMA node", "NUMA nodes")
    );
    if cpuless > 0 {
        c = c
            .fig(
                "with_cpus",
                with_cpus as f64,
                "count",
                0,
                nodes_where(false),
            )
            .fig("cpuless", cpuless as f64, "count", 0, nodes_where(true));
        t.push_str(" ({with_cpus} with CPUs, {cpuless} CPU-less)");
    }
    t.push_str(&format!(
        ", {{packages}} {}, {{cores}} {}, {{cpus}} {}",
        noun(m.packages.len(), "package", "packages"),
        noun(m.cores.len(), "core", "cores"),
        noun(m.complete_cpus.len(), "CPU", "CPUs"),
    ));
    if m.smt > 1 {
        c = c.fig(
            "smt",
            m.smt as f64,
            "count",
            0,
            Derivation::at("/machine/smt"),
        );
        t.push_str(" (SMT {smt})");
    }
    t.push_str(", {memory} of memory");
    if let Some(b) = m.last_level_cache_bytes() {
        let level = m.data_cache_levels().last().copied().unwrap_or(0);
        let of: Vec<Derivation> = m
            .caches
            .iter()
            .enumerate()
            .filter(|(_, x)| x.level == level && x.kind != "instruction")
            .map(|(i, _)| Derivation::at(format!("/machine/caches/{i}/size_bytes")))
            .collect();
        c = c.fig("llc", b as f64, "bytes", 0, Derivation::Max { of });
        t.push_str(", {llc} last-level cache");
    }
    t.push('.');
    c.template = t;
    c.render()
}
