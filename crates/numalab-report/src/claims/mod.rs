//! Structured claims: every sentence of a report's summary (headline,
//! findings, advice, warnings, missing parts, the emulation banner) is a
//! [`Claim`] that holds the figures it states, where each comes from in
//! results.json, and the comparisons its wording rests on. The text is
//! rendered from the claim ([`Claim::render`]), never written separately.
//!
//! [`check`] re-derives every claim of a results.json document from the
//! data beside it: each figure from its [`Derivation`] (JSON pointers into
//! the document, combined by median, sums, ratios…), each fact from its
//! path, each comparison's verdict from the re-derived numbers and its rule,
//! and the text from the template. The test suite runs it on every report
//! it renders, so a sentence that contradicts its data fails a test.
//!
//! Why derivations are paths and not values: the views compute figures
//! from the typed results, and the checker recomputes them from the JSON,
//! by a second route. A view that reads the wrong cell, node or case gets a
//! value its own derivation does not give back.
//!
//! Templates name figures, facts and comparisons in braces: `{local}` is a
//! figure printed with its decimals (bytes as "32 MiB"), a fact as its
//! JSON text (strings bare, lists joined by spaces), a comparison as its
//! `yes` or `no` wording, and `{range:lo:hi}` two figures as "lo–hi" (one
//! number when both print the same).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use numalab::measure::compare::{rank_compare, RankComparison, Verdict, ALPHA};

mod check;
pub use check::{check, check_claim};

/// Which list of the summary a claim belongs to.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ClaimKind {
    Headline,
    Finding,
    Advice,
    Warning,
    Missing,
    Banner,
    /// A sentence of a part's own section (a classic question's answer).
    Detail,
}

/// What a claim rests on. Under an emulated CPU, timing claims are withheld:
/// the timings say nothing about hardware there.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// Measured times, bandwidths, latencies and what follows from them.
    Timing,
    /// Where pages and threads were found (placement proofs).
    Placement,
    /// The machine's topology and firmware tables.
    Topology,
    /// Settings of the system (kernel, cgroup, environment).
    Setting,
    /// How the run went: parts done, budget, failures.
    Run,
}

/// How a figure is re-derived from results.json. Paths are JSON pointers
/// (RFC 6901) from the document's root.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Derivation {
    /// The number at `path`.
    Value {
        path: String,
    },
    /// Elements in the array (or keys in the object) at `path`.
    Count {
        path: String,
    },
    /// Elements of the array at `path` whose `field` equals `equals`.
    CountWhere {
        path: String,
        field: String,
        equals: Value,
    },
    /// The node of a page histogram (`{node: pages}`) that holds every
    /// page; no value when pages are on several nodes.
    PageNode {
        path: String,
    },
    Median {
        of: Vec<Derivation>,
    },
    Min {
        of: Vec<Derivation>,
    },
    Max {
        of: Vec<Derivation>,
    },
    Sum {
        of: Vec<Derivation>,
    },
    Ratio {
        num: Box<Derivation>,
        den: Box<Derivation>,
    },
    /// A rule's constant (a threshold the wording is judged by).
    Const {
        value: f64,
    },
    /// `of` times `by` (units: bytes/s to GB/s, seconds to ms).
    Scale {
        of: Box<Derivation>,
        by: f64,
    },
}

impl Derivation {
    /// The number at `path`.
    pub fn at(path: impl Into<String>) -> Derivation {
        Derivation::Value { path: path.into() }
    }

    /// `num / den`.
    pub fn ratio(num: Derivation, den: Derivation) -> Derivation {
        Derivation::Ratio {
            num: Box::new(num),
            den: Box::new(den),
        }
    }

    /// `self * by`.
    pub fn scale(self, by: f64) -> Derivation {
        Derivation::Scale {
            of: Box::new(self),
            by,
        }
    }

    /// In words, for readers: the path, or the operation and how many
    /// values it combines.
    pub fn describe(&self) -> String {
        let many = |op: &str, of: &[Derivation]| match of {
            [one] => one.describe(),
            _ => format!(
                "{op} of {} values (the first: {})",
                of.len(),
                of.first().map(Derivation::describe).unwrap_or_default()
            ),
        };
        match self {
            Derivation::Value { path } => path.clone(),
            Derivation::Count { path } => format!("count of {path}"),
            Derivation::CountWhere {
                path,
                field,
                equals,
            } => {
                format!("count of {path} with {field} = {equals}")
            }
            Derivation::PageNode { path } => format!("the node holding every page of {path}"),
            Derivation::Median { of } => many("median", of),
            Derivation::Min { of } => many("min", of),
            Derivation::Max { of } => many("max", of),
            Derivation::Sum { of } => many("sum", of),
            Derivation::Ratio { num, den } => {
                format!("({}) / ({})", num.describe(), den.describe())
            }
            Derivation::Scale { of, by } => format!("{} x {by}", of.describe()),
            Derivation::Const { value } => format!("{value}"),
        }
    }

    /// The value in `doc`, or why there is none.
    pub fn eval(&self, doc: &Value) -> Result<f64, String> {
        let many = |of: &[Derivation]| -> Result<Vec<f64>, String> {
            let v: Vec<f64> = of.iter().map(|d| d.eval(doc)).collect::<Result<_, _>>()?;
            if v.is_empty() {
                Err("an aggregate of nothing".into())
            } else {
                Ok(v)
            }
        };
        match self {
            Derivation::Value { path } => number(doc, path),
            Derivation::Count { path } => match doc.pointer(path) {
                Some(Value::Array(a)) => Ok(a.len() as f64),
                Some(Value::Object(o)) => Ok(o.len() as f64),
                _ => Err(format!("no array at {path}")),
            },
            Derivation::CountWhere {
                path,
                field,
                equals,
            } => match doc.pointer(path) {
                Some(Value::Array(a)) => {
                    Ok(a.iter().filter(|x| x.get(field) == Some(equals)).count() as f64)
                }
                _ => Err(format!("no array at {path}")),
            },
            Derivation::PageNode { path } => {
                let Some(Value::Object(h)) = doc.pointer(path) else {
                    return Err(format!("no page histogram at {path}"));
                };
                let with_pages: Vec<&String> = h
                    .iter()
                    .filter(|(_, v)| v.as_f64().is_some_and(|p| p > 0.0))
                    .map(|(k, _)| k)
                    .collect();
                match with_pages.as_slice() {
                    [one] => one
                        .parse::<f64>()
                        .map_err(|_| format!("node key '{one}' at {path}")),
                    _ => Err(format!("pages on {} nodes at {path}", with_pages.len())),
                }
            }
            Derivation::Median { of } => numalab::measure::stats::median(many(of)?)
                .ok_or_else(|| "a median of no finite value".to_string()),
            Derivation::Min { of } => Ok(many(of)?.into_iter().fold(f64::INFINITY, f64::min)),
            Derivation::Max { of } => Ok(many(of)?.into_iter().fold(f64::NEG_INFINITY, f64::max)),
            Derivation::Sum { of } => Ok(many(of)?.into_iter().sum()),
            Derivation::Ratio { num, den } => Ok(num.eval(doc)? / den.eval(doc)?),
            Derivation::Scale { of, by } => Ok(of.eval(doc)? * by),
            Derivation::Const { value } => Ok(*value),
        }
    }
}

impl Derivation {
    /// The 95% interval of the derived number, where every measurement it
    /// rests on has one: a `median` whose object carries `rel_ci` (the
    /// measurement's relative half-width) gives `median x (1 ± rel_ci)`;
    /// counts, page nodes and constants are exact. Aggregates carry their
    /// inputs' ends through (the median of the lows and of the highs, and
    /// so on), and a ratio takes the far ends (lowest numerator over the
    /// highest denominator): conservative where the inputs vary together.
    /// `None` where some input has no interval (an interpolated knee, a
    /// verdict's ratio).
    pub fn interval(&self, doc: &Value) -> Option<(f64, f64)> {
        let many = |of: &[Derivation]| -> Option<(Vec<f64>, Vec<f64>)> {
            let ends: Vec<(f64, f64)> =
                of.iter().map(|d| d.interval(doc)).collect::<Option<_>>()?;
            (!ends.is_empty()).then(|| ends.into_iter().unzip())
        };
        let exact = || self.eval(doc).ok().map(|v| (v, v));
        let ends = match self {
            Derivation::Value { path } => match path.strip_suffix("/median") {
                Some(parent) => {
                    let object = doc.pointer(parent)?;
                    let (m, r) = (
                        object.get("median")?.as_f64()?,
                        object.get("rel_ci")?.as_f64()?,
                    );
                    let half = (m * r).abs();
                    (m - half, m + half)
                }
                // Another number carries its interval beside it as
                // `<name>_ci: [low, high]` (the loaded-latency knee's).
                None => {
                    let ci = doc.pointer(&format!("{path}_ci"))?.as_array()?;
                    match ci[..] {
                        [ref lo, ref hi] => (lo.as_f64()?, hi.as_f64()?),
                        _ => return None,
                    }
                }
            },
            Derivation::Count { .. }
            | Derivation::CountWhere { .. }
            | Derivation::PageNode { .. }
            | Derivation::Const { .. } => exact()?,
            Derivation::Median { of } => {
                let (lo, hi) = many(of)?;
                (
                    numalab::measure::stats::median(lo)?,
                    numalab::measure::stats::median(hi)?,
                )
            }
            Derivation::Min { of } => {
                let (lo, hi) = many(of)?;
                (
                    lo.into_iter().fold(f64::INFINITY, f64::min),
                    hi.into_iter().fold(f64::INFINITY, f64::min),
                )
            }
            Derivation::Max { of } => {
                let (lo, hi) = many(of)?;
                (
                    lo.into_iter().fold(f64::NEG_INFINITY, f64::max),
                    hi.into_iter().fold(f64::NEG_INFINITY, f64::max),
                )
            }
            Derivation::Sum { of } => {
                let (lo, hi) = many(of)?;
                (lo.into_iter().sum(), hi.into_iter().sum())
            }
            Derivation::Ratio { num, den } => {
                let ((a, b), (c, d)) = (num.interval(doc)?, den.interval(doc)?);
                if c <= 0.0 || a < 0.0 {
                    return None;
                }
                (a / d, b / c)
            }
            Derivation::Scale { of, by } => {
                let (a, b) = of.interval(doc)?;
                ((a * by).min(b * by), (a * by).max(b * by))
            }
        };
        (ends.0.is_finite() && ends.1.is_finite() && ends.0 <= ends.1).then_some(ends)
    }
}

fn number(doc: &Value, path: &str) -> Result<f64, String> {
    match doc.pointer(path) {
        Some(v) => v
            .as_f64()
            .ok_or_else(|| format!("{path} is {v}, not a number")),
        None => Err(format!("nothing at {path}")),
    }
}

/// A number a claim states.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Figure {
    /// Its placeholder in the template.
    pub name: String,
    pub value: f64,
    /// `ns`, `GB/s`, `x` (a ratio), `%`, `bytes`, `node`, `count`, `s`, `MHz`.
    pub unit: String,
    /// Decimals printed.
    pub decimals: u8,
    pub from: Derivation,
}

impl Figure {
    /// The figure as the text prints it.
    pub fn print(&self) -> String {
        print_number(self.value, &self.unit, self.decimals)
    }
}

fn print_number(v: f64, unit: &str, decimals: u8) -> String {
    match unit {
        "bytes" => numalab::text::format::bytes(v.max(0.0).round() as u64),
        "%" => format!("{:.*}", decimals as usize, v * 100.0),
        _ => format!("{:.*}", decimals as usize, v),
    }
}

/// A non-numeric statement taken from results.json (a setting, a node
/// list, a case label, a reason).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Fact {
    pub name: String,
    pub value: Value,
    /// JSON pointer it comes from.
    pub from: String,
}

/// What a comparison asks of its two figures.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// left > right × (1 + threshold)
    Greater,
    /// left < right × (1 − threshold)
    Less,
    /// |left / right − 1| ≤ threshold
    Within,
}

/// The rule a comparison is judged by: a fixed share (the noise floor), or
/// a share measured with the figures (named).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Threshold {
    Share(f64),
    Figure(String),
}

/// A comparison the wording rests on ("beats", "holds", "saturate").
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    /// Its placeholder in the template.
    pub name: String,
    pub left: String,
    pub right: String,
    pub relation: Relation,
    pub threshold: Threshold,
    /// Whether it holds, as the text says.
    pub holds: bool,
    /// The wording when it holds, and when not (both empty: the words
    /// come from the boolean at `stated_by`).
    pub yes: String,
    pub no: String,
    /// A JSON pointer to the verdict the sentence's words were chosen by,
    /// when they were not chosen here (an experiment's own `significant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stated_by: Option<String>,
}

/// The rule a rank test's verdict follows ([`numalab::measure::compare`]).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum RankRule {
    /// a's values are the smaller (a is faster, in seconds):
    /// [`RankComparison::a_smaller`].
    Smaller,
    /// a's values are the larger (slower in seconds, faster in GB/s).
    Larger,
    /// a and b equal within `margin`: [`RankComparison::equal_within`];
    /// "they differ" needs p below the level corrected for the
    /// `corrected_for` comparisons the pair was picked from (Bonferroni; 1:
    /// none).
    EqualWithin { margin: f64, corrected_for: usize },
}

impl RankRule {
    /// The verdict of this rule on a comparison of a with b.
    pub fn judge(self, c: &RankComparison) -> Verdict {
        match self {
            RankRule::Smaller => c.a_smaller(),
            RankRule::Larger => match c.a_smaller() {
                Verdict::Holds => Verdict::DoesNotHold,
                Verdict::DoesNotHold => Verdict::Holds,
                Verdict::CannotTell => Verdict::CannotTell,
            },
            RankRule::EqualWithin {
                margin,
                corrected_for,
            } => match c.equal_within(margin) {
                Verdict::DoesNotHold if c.p_value * corrected_for.max(1) as f64 >= ALPHA => {
                    Verdict::CannotTell
                }
                v => v,
            },
        }
    }

    fn words(self) -> String {
        match self {
            RankRule::Smaller => "a below b".into(),
            RankRule::Larger => "a above b".into(),
            RankRule::EqualWithin {
                margin,
                corrected_for,
            } => format!(
                "a equal to b within {:.0}%, p corrected for {corrected_for} comparisons",
                margin * 100.0
            ),
        }
    }
}

/// A verdict the wording rests on that comes from the rank test on two
/// samples: the checker pools the samples again from their paths, reruns
/// the test and requires the same p-value and, under `rule`, the same
/// verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankTest {
    /// Its placeholder in the template: it prints the verdict's words.
    pub name: String,
    /// JSON pointers to sample a's values, pooled: each an array of
    /// numbers, or one number (a case kept without its samples).
    pub a: Vec<String>,
    /// The same for sample b.
    pub b: Vec<String>,
    #[serde(flatten)]
    pub rule: RankRule,
    /// The test's two-sided p-value, as the sentence's verdict used it.
    pub p_value: f64,
    pub verdict: Verdict,
    /// A JSON pointer to the verdict the experiment recorded for this
    /// comparison: the checker requires it to be the re-derived one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stated_by: Option<String>,
}

/// What this machine lacks that a question needs: the question cannot be
/// answered here at all, whatever the budget or the noise (a "cannot tell"
/// from noise is never this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lacks {
    /// A second memory node: remote memory, a buffer away from a writer.
    SecondMemoryNode,
    /// A node with two CPUs this process may use.
    TwoCpusOnANode,
}

impl Lacks {
    /// The machine, as the summary's line names it: "on one memory node".
    pub fn machine(self) -> &'static str {
        match self {
            Lacks::SecondMemoryNode => "on one memory node",
            Lacks::TwoCpusOnANode => "where no node has two CPUs this process may use",
        }
    }

    /// What the questions need: "a second memory node".
    pub fn need(self) -> &'static str {
        match self {
            Lacks::SecondMemoryNode => "a second memory node",
            Lacks::TwoCpusOnANode => "two CPUs on one node",
        }
    }
}

/// A question this machine cannot answer ([`Claim::not_answerable`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NotAnswerable {
    /// The question in a few words: "classic scenario (c)", "crossfire".
    pub question: String,
    pub lacks: Lacks,
}

/// One sentence of a report, with the figures and facts it states.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Claim {
    pub kind: ClaimKind,
    /// `machine`, `latency`, `bandwidth`… (as [`super::summary::SummaryLine`]).
    pub topic: String,
    pub basis: Basis,
    pub template: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub figures: Vec<Figure>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<Fact>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<Comparison>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank_tests: Vec<RankTest>,
    /// The sentence, rendered from the template.
    pub text: String,
    /// Set on a summary sentence whose question this machine cannot
    /// answer at all: the summary says such questions in one line per
    /// reason ([`not_answerable_line`]) instead of a sentence each. Not
    /// written: that line carries the sentences' facts and figures.
    #[serde(skip)]
    pub not_answerable: Option<NotAnswerable>,
}

impl Claim {
    /// A claim with no figures yet; add them, then [`Claim::render`].
    pub fn new(kind: ClaimKind, topic: &str, basis: Basis, template: impl Into<String>) -> Claim {
        Claim {
            kind,
            topic: topic.into(),
            basis,
            template: template.into(),
            figures: Vec::new(),
            facts: Vec::new(),
            comparisons: Vec::new(),
            rank_tests: Vec::new(),
            text: String::new(),
            not_answerable: None,
        }
    }

    /// Marks the claim's question as one this machine cannot answer, for
    /// want of what `lacks` names; `question` names it in a few words.
    pub fn not_answerable(mut self, question: &str, lacks: Lacks) -> Self {
        self.not_answerable = Some(NotAnswerable {
            question: question.into(),
            lacks,
        });
        self
    }

    /// Adds a figure.
    pub fn fig(
        mut self,
        name: &str,
        value: f64,
        unit: &str,
        decimals: u8,
        from: Derivation,
    ) -> Self {
        self.figures.push(Figure {
            name: name.into(),
            value,
            unit: unit.into(),
            decimals,
            from,
        });
        self
    }

    /// Adds a fact read from `from` (a JSON pointer).
    pub fn fact(mut self, name: &str, value: impl Serialize, from: impl Into<String>) -> Self {
        self.facts.push(Fact {
            name: name.into(),
            value: serde_json::to_value(value).unwrap_or(Value::Null),
            from: from.into(),
        });
        self
    }

    /// Adds a comparison of two of its figures; `holds` is computed here
    /// from the figures, so the wording follows the numbers.
    pub fn compare(
        mut self,
        name: &str,
        (left, relation, right): (&str, Relation, &str),
        threshold: Threshold,
        (yes, no): (&str, &str),
    ) -> Self {
        let mut c = Comparison {
            name: name.into(),
            left: left.into(),
            right: right.into(),
            relation,
            threshold,
            holds: false,
            yes: yes.into(),
            no: no.into(),
            stated_by: None,
        };
        c.holds = judge(&c, |n| self.figure(n).map(|f| f.value)).unwrap_or(false);
        self.comparisons.push(c);
        self
    }

    /// Adds a comparison whose verdict the sentence took from the boolean
    /// at `stated_by` (a JSON pointer): the checker re-judges it from the
    /// figures and requires the same verdict there.
    pub fn stated(
        mut self,
        name: &str,
        (left, relation, right): (&str, Relation, &str),
        threshold: Threshold,
        stated_by: String,
    ) -> Self {
        self = self.compare(name, (left, relation, right), threshold, ("", ""));
        if let Some(c) = self.comparisons.last_mut() {
            c.stated_by = Some(stated_by);
        }
        self
    }

    /// Adds the rank test `test` of the samples at `a` against those at
    /// `b` (JSON pointers, pooled), judged by `rule`: `{name}` prints its
    /// verdict, and the checker reruns the test on the same samples.
    pub fn ranked(
        mut self,
        name: &str,
        (a, b): (Vec<String>, Vec<String>),
        rule: RankRule,
        test: &RankComparison,
    ) -> Self {
        self.rank_tests.push(RankTest {
            name: name.into(),
            a,
            b,
            rule,
            p_value: test.p_value,
            verdict: rule.judge(test),
            stated_by: None,
        });
        self
    }

    /// [`Claim::ranked`] for a verdict the experiment recorded at
    /// `stated_by` (a JSON pointer): the checker requires that verdict too
    /// to follow from the samples.
    pub fn ranked_as(
        mut self,
        name: &str,
        samples: (Vec<String>, Vec<String>),
        rule: RankRule,
        test: &RankComparison,
        stated_by: String,
    ) -> Self {
        self = self.ranked(name, samples, rule, test);
        if let Some(t) = self.rank_tests.last_mut() {
            t.stated_by = Some(stated_by);
        }
        self
    }

    /// The verdict of the rank test `name`.
    pub fn verdict(&self, name: &str) -> Option<Verdict> {
        self.rank_tests
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.verdict)
    }

    /// Where its figures come from, one line each, for readers ("local =
    /// 263 ns: median of 4 values at /parts/…"), then the rules of its
    /// comparisons.
    pub fn sources(&self) -> String {
        let mut lines: Vec<String> = self
            .figures
            .iter()
            .filter(|f| !matches!(f.from, Derivation::Const { .. }))
            .map(|f| {
                format!(
                    "{} = {} {}: {}",
                    f.name,
                    f.print(),
                    f.unit,
                    f.from.describe()
                )
            })
            .collect();
        for c in &self.comparisons {
            let rule = match &c.threshold {
                Threshold::Share(t) => format!("{:.0}%", t * 100.0),
                Threshold::Figure(n) => format!("the noise {n}"),
            };
            let rel = match c.relation {
                Relation::Greater => "above",
                Relation::Less => "below",
                Relation::Within => "within",
            };
            lines.push(format!(
                "rule: {} {rel} {} by more than {rule}: {}",
                c.left,
                c.right,
                if c.holds { "yes" } else { "no" }
            ));
        }
        for t in &self.rank_tests {
            lines.push(format!(
                "rule: Mann–Whitney U of {} against {} values, {}: p = {:.3}, {}",
                t.a.len(),
                t.b.len(),
                t.rule.words(),
                t.p_value,
                t.verdict.words()
            ));
        }
        lines.join("\n")
    }

    /// A figure by name.
    pub fn figure(&self, name: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.name == name)
    }

    /// Whether the comparison `name` holds.
    pub fn holds(&self, name: &str) -> Option<bool> {
        self.comparisons
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.holds)
    }

    /// Renders the text from the template.
    pub fn render(mut self) -> Self {
        self.text = render(&self).unwrap_or_else(|e| format!("{} [{e}]", self.template));
        self
    }
}

/// Whether `c` holds for the figures `value` gives.
fn judge(c: &Comparison, value: impl Fn(&str) -> Option<f64>) -> Result<bool, String> {
    let get = |n: &str| value(n).ok_or_else(|| format!("no figure '{n}'"));
    let (l, r) = (get(&c.left)?, get(&c.right)?);
    let t = match &c.threshold {
        Threshold::Share(t) => *t,
        Threshold::Figure(n) => get(n)?,
    };
    Ok(match c.relation {
        Relation::Greater => l > r * (1.0 + t),
        Relation::Less => l < r * (1.0 - t),
        Relation::Within => r != 0.0 && (l / r - 1.0).abs() <= t,
    })
}

/// The template with its placeholders filled.
fn render(c: &Claim) -> Result<String, String> {
    let mut out = String::with_capacity(c.template.len() + 32);
    let mut rest = c.template.as_str();
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| "unclosed '{' in the template".to_string())?
            + open;
        out.push_str(&placeholder(c, &rest[open + 1..close])?);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn placeholder(c: &Claim, name: &str) -> Result<String, String> {
    if let Some(pair) = name.strip_prefix("range:") {
        let (lo, hi) = pair
            .split_once(':')
            .ok_or_else(|| format!("range placeholder '{name}'"))?;
        let fig = |n: &str| c.figure(n).ok_or_else(|| format!("no figure '{n}'"));
        let (lo, hi) = (fig(lo)?, fig(hi)?);
        let (a, b) = (lo.print(), hi.print());
        return Ok(if a == b { a } else { format!("{a}–{b}") });
    }
    if let Some(f) = c.figure(name) {
        return Ok(f.print());
    }
    if let Some(f) = c.facts.iter().find(|f| f.name == name) {
        return Ok(fact_text(&f.value));
    }
    // `{?name}`: a yes/no fact, or a rank test's verdict
    // (`measure::compare::Verdict`), as a classic question's answer.
    if let Some(f) = name
        .strip_prefix('?')
        .and_then(|n| c.facts.iter().find(|f| f.name == n))
    {
        return Ok(match (f.value.as_bool(), f.value.as_str()) {
            (Some(true), _) | (_, Some("holds")) => "holds",
            (Some(false), _) | (_, Some("does_not_hold")) => "does not hold",
            _ => "cannot tell",
        }
        .into());
    }
    // `{^name}`: a fact with its first letter upper case (experiments'
    // sentences are clauses).
    if let Some(f) = name
        .strip_prefix('^')
        .and_then(|n| c.facts.iter().find(|f| f.name == n))
    {
        return Ok(sentence_case(&fact_text(&f.value)));
    }
    if let Some(x) = c.comparisons.iter().find(|x| x.name == name) {
        return Ok(if x.holds { x.yes.clone() } else { x.no.clone() });
    }
    if let Some(t) = c.rank_tests.iter().find(|t| t.name == name) {
        return Ok(t.verdict.words().into());
    }
    Err(format!("no figure, fact or comparison '{name}'"))
}

fn fact_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        // CPU and node sets, as lists are written ("0-3,8").
        Value::Array(a)
            if !a.is_empty()
                && a.iter()
                    .all(|x| x.as_u64().is_some_and(|n| n <= u32::MAX as u64)) =>
        {
            a.iter()
                .filter_map(|x| x.as_u64().map(|n| n as u32))
                .collect::<numalab::IdSet>()
                .to_string()
        }
        Value::Array(a) => a.iter().map(fact_text).collect::<Vec<_>>().join(" "),
        Value::Null => "none".into(),
        other => other.to_string(),
    }
}

/// The one summary line for the questions of `members` (claims marked
/// [`Claim::not_answerable`] for want of `lacks`): "Not answerable on one
/// memory node: classic scenario (c), crossfire (they need a second memory
/// node)." A finding about the machine (under an emulated CPU too). It
/// carries every member's facts, figures and rank tests, named `q<i>_…`,
/// so the checker re-derives what each question's "cannot" rests on.
pub fn not_answerable_line(lacks: Lacks, members: &[Claim]) -> Claim {
    let mut questions: Vec<&str> = Vec::new();
    for q in members.iter().filter_map(|c| c.not_answerable.as_ref()) {
        if !questions.contains(&q.question.as_str()) {
            questions.push(&q.question);
        }
    }
    let mut line = Claim::new(
        ClaimKind::Finding,
        "not-answerable",
        Basis::Topology,
        format!(
            "Not answerable {}: {} ({} {}).",
            lacks.machine(),
            questions.join(", "),
            if questions.len() == 1 {
                "it needs"
            } else {
                "they need"
            },
            lacks.need()
        ),
    );
    for (i, c) in members.iter().enumerate() {
        let name = |n: &str| format!("q{i}_{n}");
        line.facts.extend(c.facts.iter().map(|f| Fact {
            name: name(&f.name),
            ..f.clone()
        }));
        line.figures.extend(c.figures.iter().map(|f| Figure {
            name: name(&f.name),
            ..f.clone()
        }));
        line.rank_tests
            .extend(c.rank_tests.iter().map(|t| RankTest {
                name: name(&t.name),
                ..t.clone()
            }));
    }
    line.render()
}

/// Escapes a JSON pointer token (`~` and `/`).
pub fn token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "parts": {"m": {"result": {
                "cells": [{"v": 100.0}, {"v": 300.0}, {"v": 200.0}],
                "pages": {"0": 0, "3": 512},
                "split": {"1": 10, "2": 10}
            }}},
            "environment": {"numa_balancing": true}
        })
    }

    fn claim() -> Claim {
        let p = |i: usize| Derivation::at(format!("/parts/m/result/cells/{i}/v"));
        Claim::new(
            ClaimKind::Finding,
            "latency",
            Basis::Timing,
            "Local {local} ns, remote {range:lo:hi} ns on node {node}: remote {slower}.",
        )
        .fig("local", 100.0, "ns", 0, p(0))
        .fig(
            "lo",
            200.0,
            "ns",
            0,
            Derivation::Min {
                of: vec![p(1), p(2)],
            },
        )
        .fig(
            "hi",
            300.0,
            "ns",
            0,
            Derivation::Max {
                of: vec![p(1), p(2)],
            },
        )
        .fig(
            "node",
            3.0,
            "node",
            0,
            Derivation::PageNode {
                path: "/parts/m/result/pages".into(),
            },
        )
        .compare(
            "slower",
            ("lo", Relation::Greater, "local"),
            Threshold::Share(0.03),
            ("is slower", "is not slower"),
        )
        .render()
    }

    #[test]
    fn renders_figures_ranges_and_verdicts() {
        let c = claim();
        assert_eq!(
            c.text,
            "Local 100 ns, remote 200–300 ns on node 3: remote is slower."
        );
        assert_eq!(c.holds("slower"), Some(true));
        assert!(
            check_claim(&c, &doc()).is_empty(),
            "{:?}",
            check_claim(&c, &doc())
        );
    }

    #[test]
    fn sources_say_where_each_figure_comes_from() {
        let s = claim().sources();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "local = 100 ns: /parts/m/result/cells/0/v");
        assert_eq!(
            lines[1],
            "lo = 200 ns: min of 2 values (the first: /parts/m/result/cells/1/v)"
        );
        assert_eq!(
            lines[3],
            "node = 3 node: the node holding every page of /parts/m/result/pages"
        );
        assert_eq!(lines[4], "rule: lo above local by more than 3%: yes");
    }

    #[test]
    fn a_wrong_node_a_wrong_value_and_a_wrong_verdict_fail() {
        let mut c = claim();
        c.figures[3].value = 0.0; // the CPU's node, not the pages' node
        c = c.render();
        let bad = check_claim(&c, &doc());
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(
            bad[0].contains("node states 0 but the data give 3"),
            "{bad:?}"
        );

        let mut c = claim();
        c.figures[0].value = 250.0;
        c = c.render();
        let bad = check_claim(&c, &doc());
        assert!(
            bad[0].contains("local states 250 but the data give 100"),
            "{bad:?}"
        );

        let mut c = claim();
        c.comparisons[0].holds = false;
        c = c.render();
        let bad = check_claim(&c, &doc());
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].contains("says 'is not slower'"), "{bad:?}");

        let mut c = claim();
        c.text = "Local 100 ns.".into();
        let bad = check_claim(&c, &doc());
        assert!(bad[0].contains("the template renders"), "{bad:?}");
    }

    #[test]
    fn page_node_needs_one_node_and_facts_must_match() {
        let d = Derivation::PageNode {
            path: "/parts/m/result/split".into(),
        };
        assert_eq!(
            d.eval(&doc()).unwrap_err(),
            "pages on 2 nodes at /parts/m/result/split"
        );
        let c = Claim::new(
            ClaimKind::Warning,
            "setting",
            Basis::Setting,
            "balancing {b}",
        )
        .fact("b", false, "/environment/numa_balancing")
        .render();
        let bad = check_claim(&c, &doc());
        assert!(
            bad[0].contains("b states false but /environment/numa_balancing is true"),
            "{bad:?}"
        );
    }

    #[test]
    fn every_summary_sentence_must_come_from_a_claim() {
        let c = claim();
        let mut d = doc();
        d["summary"] = json!({
            "headline": "A machine.",
            "findings": [{"topic": "latency", "text": c.text}, {"topic": "x", "text": "Free text."}],
            "advice": [], "warnings": [], "missing": [],
            "claims": [c]
        });
        let bad = check(&d);
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(bad
            .iter()
            .any(|b| b.contains("Headline \"A machine.\" is not rendered")));
        assert!(bad
            .iter()
            .any(|b| b.contains("Finding \"Free text.\" is not rendered")));
    }

    /// Two samples far apart, 8 values each, and the verdict recorded.
    fn timed_doc() -> Value {
        json!({"parts": {"s": {"result": {
            "a": [2.0, 2.1, 2.2, 2.05, 2.15, 2.3, 2.25, 2.12],
            "b": [1.0, 1.1, 1.05, 0.98, 1.02, 1.08, 1.01, 0.99],
            "c": 1.03,
            "verdict": "holds"
        }}}})
    }

    fn slower_claim(d: &Value) -> Claim {
        let get = |k: &str| -> Vec<f64> {
            d["parts"]["s"]["result"][k]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        };
        let test = rank_compare(&get("a"), &get("b")).unwrap();
        let at = |k: &str| vec![format!("/parts/s/result/{k}")];
        Claim::new(
            ClaimKind::Finding,
            "sweep",
            Basis::Timing,
            "a is slower than b: {t}.",
        )
        .ranked_as(
            "t",
            (at("a"), at("b")),
            RankRule::Larger,
            &test,
            "/parts/s/result/verdict".into(),
        )
        .render()
    }

    #[test]
    fn a_rank_test_is_rerun_on_the_samples_it_names() {
        let d = timed_doc();
        let c = slower_claim(&d);
        assert_eq!(c.text, "a is slower than b: holds.");
        assert!(c.rank_tests[0].p_value < 0.001, "{:?}", c.rank_tests);
        assert_eq!(check_claim(&c, &d), Vec::<String>::new());
        assert!(c
            .sources()
            .contains("Mann–Whitney U of 1 against 1 values, a above b"));

        // Samples that no longer differ: the words no longer follow.
        let mut moved = d.clone();
        moved["parts"]["s"]["result"]["a"] = json!([1.0, 1.1, 1.05, 0.98, 1.02, 1.08, 1.01, 0.99]);
        let bad = check_claim(&c, &moved);
        assert!(bad[0].contains("rank test t:"), "{bad:?}");
        assert!(bad[0].contains("the samples give"), "{bad:?}");

        // The experiment recorded another verdict than its samples give.
        let mut recorded = d.clone();
        recorded["parts"]["s"]["result"]["verdict"] = json!("cannot_tell");
        let bad = check_claim(&c, &recorded);
        assert!(
            bad[0].contains(
                "/parts/s/result/verdict records 'cannot tell' but the samples give 'holds'"
            ),
            "{bad:?}"
        );

        // A sentence whose words were changed by hand.
        let mut edited = c.clone();
        edited.rank_tests[0].verdict = Verdict::DoesNotHold;
        edited.text = "a is slower than b: does not hold.".into();
        let bad = check_claim(&edited, &d);
        assert!(
            bad[0].contains("says 'does not hold' but the samples give 'holds'"),
            "{bad:?}"
        );
    }

    #[test]
    fn a_case_kept_without_samples_counts_its_median_once() {
        let d = timed_doc();
        let test = rank_compare(&[1.03], &[2.0, 2.1]).unwrap();
        let c = Claim::new(ClaimKind::Detail, "sweep", Basis::Timing, "{t}")
            .ranked(
                "t",
                (
                    vec!["/parts/s/result/c".into()],
                    vec!["/parts/s/result/a".into()],
                ),
                RankRule::Smaller,
                &test,
            )
            .render();
        // 1 against 8 values, not 1 against 2: another p-value.
        let bad = check_claim(&c, &d);
        assert!(bad[0].contains("states p = "), "{bad:?}");
        let eight = rank_compare(&[1.03], &[2.0, 2.1, 2.2, 2.05, 2.15, 2.3, 2.25, 2.12]).unwrap();
        let mut c = c;
        c.rank_tests[0].p_value = eight.p_value;
        assert_eq!(check_claim(&c, &d), Vec::<String>::new());
        assert_eq!(
            c.text, "cannot tell",
            "one value against eight cannot reach p < 0.05"
        );
    }

    #[test]
    fn a_corrected_equality_needs_the_corrected_p() {
        let a = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99];
        let b: Vec<f64> = a.iter().map(|x| x * 1.3).collect();
        let t = rank_compare(&a, &b).unwrap();
        let once = RankRule::EqualWithin {
            margin: 0.06,
            corrected_for: 1,
        };
        assert_eq!(once.judge(&t), Verdict::DoesNotHold);
        // Picked as the widest of more classes than 0.05 / p: cannot tell.
        let many = (ALPHA / t.p_value).ceil() as usize + 1;
        let wide = RankRule::EqualWithin {
            margin: 0.06,
            corrected_for: many,
        };
        assert_eq!(wide.judge(&t), Verdict::CannotTell);
    }
    #[test]
    fn intervals_follow_the_measurements_through_the_derivation() {
        let d = json!({
            "a": {"median": 200.0, "rel_ci": 0.01},
            "b": {"median": 100.0, "rel_ci": 0.02},
            "c": {"median": 50.0},
            "n": [1, 2, 3]
        });
        let at = |p: &str| Derivation::at(format!("/{p}/median"));
        let close = |x: Option<(f64, f64)>, lo: f64, hi: f64| {
            let (a, b) = x.unwrap();
            assert!(
                (a - lo).abs() < 1e-9 && (b - hi).abs() < 1e-9,
                "{a}-{b}, not {lo}-{hi}"
            );
        };
        close(at("a").interval(&d), 198.0, 202.0);
        // A number with `<name>_ci` beside it: that interval.
        let k = json!({"knee": 5.5, "knee_ci": [5.0, 6.5], "bad": 1.0, "bad_ci": [1.0]});
        close(Derivation::at("/knee").interval(&k), 5.0, 6.5);
        assert_eq!(Derivation::at("/bad").interval(&k), None);
        // A number with no rel_ci beside it, or not a median: no interval.
        assert_eq!(at("c").interval(&d), None);
        assert_eq!(Derivation::at("/a/rel_ci").interval(&d), None);
        // Exact things are their own interval.
        close(
            Derivation::Count { path: "/n".into() }.interval(&d),
            3.0,
            3.0,
        );
        close(Derivation::Const { value: 1.1 }.interval(&d), 1.1, 1.1);
        // The far ends of a ratio: 198/102 to 202/98.
        close(
            Derivation::ratio(at("a"), at("b")).interval(&d),
            198.0 / 102.0,
            202.0 / 98.0,
        );
        close(
            Derivation::Min {
                of: vec![at("a"), at("b")],
            }
            .interval(&d),
            98.0,
            102.0,
        );
        close(
            Derivation::Max {
                of: vec![at("a"), at("b")],
            }
            .interval(&d),
            198.0,
            202.0,
        );
        close(
            Derivation::Sum {
                of: vec![at("a"), at("b")],
            }
            .interval(&d),
            296.0,
            304.0,
        );
        close(
            Derivation::Median {
                of: vec![at("a"), at("b")],
            }
            .interval(&d),
            148.0,
            152.0,
        );
        close(
            Derivation::Scale {
                of: Box::new(at("b")),
                by: -1.0,
            }
            .interval(&d),
            -102.0,
            -98.0,
        );
        // One input without an interval leaves the aggregate without one.
        assert_eq!(
            Derivation::Median {
                of: vec![at("a"), at("c")]
            }
            .interval(&d),
            None
        );
    }
}
