//! `numalab compare`: two results side by side (two machines, BIOS
//! settings, kernels, policies).
//!
//! Works on any numalab JSON result (`bench`, `matrix`, `sizes`, `scaling`,
//! `sweep`, ..., and a report's results.json): every *figure* (an object
//! with a `median` and a measured spread, `rel_ci` or `spread`) is a metric,
//! named by its path with array elements named by their identifying fields
//! (`bandwidth[cpu_node=0,mem_node=1].value`). A difference is significant
//! when it exceeds the two medians' 95% confidence half-widths added (or,
//! without a CI, their interquartile spreads added).

use crate::model::{REPORT_SCHEMA, REPORT_SCHEMA_VERSION};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// Subtrees that hold no comparable figures (raw samples, proofs, the
/// environment, which is compared field by field instead).
const SKIP: &[&str] = &[
    "environment",
    "measurement",
    "samples",
    "warmup_samples",
    "verification",
    "buffers",
    "machine",
    "rule",
];

/// Fields that name an element of an array, in the order they are used.
const ID_KEYS: &[&str] = &[
    "name",
    "part",
    "kernel",
    "pattern",
    "mix",
    "workload",
    "policy",
    "condition",
    "threads",
    "layout",
    "cpu_node",
    "mem_node",
    "node",
    "cpu",
    "cpus",
    "bytes",
    "labels",
    "label",
    "alpha",
    "l",
    "level",
    "step",
];

/// Environment fields worth showing when they differ.
pub const ENV_KEYS: &[&str] = &[
    "numalab_version",
    "hwloc_version",
    "kernel",
    "hostname",
    "cpu_model",
    "logical_cpus",
    "smt_active",
    "thp_enabled",
    "thp_defrag",
    "numa_balancing",
    "governor",
    "cpufreq_mhz",
];

/// Settings a figure was measured under, as the user chose them: where
/// they differ between the two results, a figure is not comparable. Read
/// from every object on the figure's path that is not an array element (an
/// element's fields name it instead): a report's mode, budget and buffer,
/// each part's budget, a result's buffer, pattern, layout, mix.
const SETTING_KEYS: &[&str] = &[
    "mode",
    "budget_s",
    "buffer_bytes",
    "size_bytes",
    "injector_buffer_bytes",
    "reps",
    "stride",
    "pattern",
    "layout",
    "mix",
];

/// Environment fields never listed as differences: they differ between any
/// two runs.
const ENV_SKIP: &[&str] = &["timestamp_utc"];

/// One figure of a result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    pub median: f64,
    /// Half-width of the median's 95% confidence interval, absolute.
    pub ci: Option<f64>,
    /// Interquartile range, absolute.
    pub spread: Option<f64>,
    /// Which of the result's setting contexts it was measured under
    /// ([`Summary`]'s list).
    #[serde(skip)]
    pub context: usize,
}

/// The settings on one figure's path: (qualified key, value).
type Context = Vec<(String, String)>;

/// The distinct contexts of one result, each stored once.
#[derive(Debug, Default)]
struct Contexts {
    list: Vec<Context>,
    index: HashMap<Context, usize>,
}

impl Contexts {
    fn id(&mut self, ctx: &Context) -> usize {
        if let Some(&i) = self.index.get(ctx) {
            return i;
        }
        self.list.push(ctx.clone());
        self.index.insert(ctx.clone(), self.list.len() - 1);
        self.list.len() - 1
    }
}

/// A metric of both results.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub metric: String,
    /// Its unit, where the metric's name says it (`gbps`: GB/s, `_ns`: ns).
    pub unit: Option<&'static str>,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// b / a.
    pub ratio: Option<f64>,
    /// The difference exceeds the measured spread (None: one side missing,
    /// no spread known, or not comparable).
    pub significant: Option<bool>,
    /// Why the two figures are not compared: the settings they were
    /// measured under differ ("buffer_bytes 134217728 vs 1258291200").
    /// `ratio` and `significant` are then None.
    pub not_comparable: Option<String>,
}

/// A report's key figure in both results.
#[derive(Debug, Clone, Serialize)]
pub struct KeyFigureRow {
    /// Its name in results.json (`summary.key_figures`).
    pub key: String,
    /// What it is, as the key-figures table says.
    pub figure: String,
    pub unit: &'static str,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// b / a, where both were measured under the same settings.
    pub ratio: Option<f64>,
    /// Each side's 95% interval (`summary.key_intervals`), where it has one.
    pub a_interval: Option<[f64; 2]>,
    pub b_interval: Option<[f64; 2]>,
    /// The two intervals do not overlap (None: a side without one, or not
    /// comparable). Within-run intervals: two runs on a machine whose
    /// speed drifts can differ beyond them, and this says so.
    pub beyond_intervals: Option<bool>,
    pub not_comparable: Option<String>,
}

/// The comparison of two results.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub command_a: String,
    pub command_b: String,
    /// Two reports' key figures, in the key-figures table's order (empty
    /// for other results).
    pub key_figures: Vec<KeyFigureRow>,
    pub rows: Vec<Row>,
    /// Settings that differ: (setting, a, b), the report's and each
    /// part's; figures measured under them are not comparable.
    pub configuration_differences: Vec<(String, String, String)>,
    /// Environment fields that differ: (field, a, b), the usual suspects
    /// ([`ENV_KEYS`]) first, then every other field, the machine's node
    /// count, memory and distances included. (Not `environment`: that is
    /// the envelope's, the environment `compare` itself ran in.)
    pub environment_differences: Vec<(String, String, String)>,
    pub warnings: Vec<String>,
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Array(a) if a.len() <= 8 && a.iter().all(|x| !x.is_object() && !x.is_array()) => {
            Some(
                a.iter()
                    .filter_map(scalar_text)
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        }
        _ => None,
    }
}

/// The name of array element `i`: its identifying fields, or its index.
fn element_name(v: &Value, i: usize) -> String {
    if let Value::Object(o) = v {
        let ids: Vec<String> = ID_KEYS
            .iter()
            .filter_map(|k| o.get(*k).and_then(scalar_text).map(|t| format!("{k}={t}")))
            .collect();
        if !ids.is_empty() {
            return ids.join(",");
        }
    }
    i.to_string()
}

fn figure_of(o: &serde_json::Map<String, Value>) -> Option<Figure> {
    let median = o.get("median")?.as_f64()?;
    let rel_ci = o.get("rel_ci").and_then(Value::as_f64);
    let spread = o.get("spread").and_then(Value::as_f64);
    if rel_ci.is_none() && spread.is_none() {
        return None;
    }
    Some(Figure {
        median,
        ci: rel_ci.map(|r| (r * median).abs()),
        spread: spread.map(|s| (s * median).abs()),
        context: 0,
    })
}

/// What a walk over one result gathers.
struct Walk {
    figures: BTreeMap<String, Figure>,
    contexts: Contexts,
    /// The settings of the objects on the current path.
    ctx: Context,
}

/// `path.key`, or `key` at the top.
fn qualified(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(v: &Value, path: &str, w: &mut Walk, element: bool) {
    match v {
        Value::Object(o) => {
            if let Some(mut f) = figure_of(o) {
                f.context = w.contexts.id(&w.ctx);
                w.figures.insert(path.to_string(), f);
                return;
            }
            let depth = w.ctx.len();
            if !element {
                for k in SETTING_KEYS {
                    if let Some(t) = o.get(*k).and_then(scalar_text) {
                        w.ctx.push((qualified(path, k), t));
                    }
                }
            }
            for (k, x) in o {
                if SKIP.contains(&k.as_str()) {
                    continue;
                }
                walk(x, &qualified(path, k), w, false);
            }
            w.ctx.truncate(depth);
        }
        Value::Array(a) => {
            // Rows of a matrix whose cells name themselves (cpu_node,
            // mem_node) add nothing to the name: `latency[cpu_node=0,mem_node=1]`.
            let named_rows = !a.is_empty()
                && a.iter().all(|row| {
                    row.as_array().is_some_and(|cells| {
                        !cells.is_empty()
                            && cells
                                .iter()
                                .enumerate()
                                .all(|(i, c)| c.is_object() && element_name(c, i) != i.to_string())
                    })
                });
            if named_rows {
                for row in a {
                    walk(row, path, w, true);
                }
                return;
            }
            let names: Vec<String> = a
                .iter()
                .enumerate()
                .map(|(i, x)| element_name(x, i))
                .collect();
            // How many elements bear each name, counted once for the whole
            // array: counting per element made 160k runs take 23 s.
            let mut bearers: HashMap<&str, usize> = HashMap::with_capacity(names.len());
            for n in &names {
                *bearers.entry(n).or_default() += 1;
            }
            for (i, (x, n)) in a.iter().zip(&names).enumerate() {
                // Elements the identifying fields cannot tell apart (a sweep's
                // runs under several backgrounds) keep their index too.
                let p = if bearers[n.as_str()] > 1 {
                    format!("{path}[{n}#{i}]")
                } else {
                    format!("{path}[{n}]")
                };
                walk(x, &p, w, true);
            }
        }
        _ => {}
    }
}

/// Every figure of a result, by metric name, and the setting contexts
/// their `context` indexes.
fn figures_and_contexts(v: &Value) -> (BTreeMap<String, Figure>, Vec<Context>) {
    let mut w = Walk {
        figures: BTreeMap::new(),
        contexts: Contexts::default(),
        ctx: Vec::new(),
    };
    walk(v, "", &mut w, false);
    (w.figures, w.contexts.list)
}

/// Every figure of a result, by metric name.
pub fn figures(v: &Value) -> BTreeMap<String, Figure> {
    figures_and_contexts(v).0
}

/// The unit a metric's name states: its last field (`…points[bytes=4096].gbps`:
/// GB/s, `…latency_ns`: ns, `…elapsed_s`: s).
pub fn unit_of(metric: &str) -> Option<&'static str> {
    let leaf = metric.rsplit('.').next()?;
    let leaf = leaf.split('[').next()?;
    let units: [(&str, &str); 7] = [
        ("gbps", "GB/s"),
        ("_ns", "ns"),
        ("_us", "µs"),
        ("_ms", "ms"),
        ("_s", "s"),
        ("_bytes", "B"),
        ("_pct", "%"),
    ];
    units
        .iter()
        .find(|(suffix, _)| leaf == suffix.trim_start_matches('_') || leaf.ends_with(suffix))
        .map(|(_, u)| *u)
        .or_else(|| leaf.contains("ratio").then_some("x"))
}

/// How far apart two budgets may be and still be one setting: a report
/// shares its budget out by the costs it measures, so two runs of one
/// command give a part budgets a few percent apart (7.56 and 7.42 s); a
/// budget the user changed (quick against default, `--budget 40` against
/// 80) is a factor of 2 or more.
const BUDGET_TOLERANCE: f64 = 1.5;

/// Whether setting `key` has other values in the two results: budgets
/// within [`BUDGET_TOLERANCE`] of each other are the same setting.
fn differs(key: &str, x: &str, y: &str) -> bool {
    if x == y {
        return false;
    }
    if key == "budget_s" || key.ends_with(".budget_s") {
        if let (Ok(a), Ok(b)) = (x.parse::<f64>(), y.parse::<f64>()) {
            if a > 0.0 && b > 0.0 {
                return a.max(b) / a.min(b) > BUDGET_TOLERANCE;
            }
        }
    }
    true
}

/// How two contexts differ, in words: the settings both have with other
/// values (a setting only one side has is not held against it: older
/// results lack some).
fn context_difference(a: &Context, b: &Context) -> Option<String> {
    let diffs: Vec<String> = a
        .iter()
        .filter_map(|(k, x)| {
            let y = &b.iter().find(|(kb, _)| kb == k)?.1;
            differs(k, x, y).then(|| format!("{k} {x} vs {y}"))
        })
        .collect();
    (!diffs.is_empty()).then(|| diffs.join(", "))
}

/// The scalar fields of `v` (objects flattened with dots, short arrays
/// joined), for environment differences; long arrays (CPU flags) as
/// their length and a digest of what each side has that the other lacks.
fn flatten(v: &Value, path: &str, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                if !ENV_SKIP.contains(&k.as_str()) {
                    flatten(x, &qualified(path, k), out);
                }
            }
        }
        _ => out.push((path.to_string(), v.clone())),
    }
}

/// The machine's shape as compared: node count, memory per node, the
/// distance table.
fn machine_fields(m: &Value) -> Vec<(String, Value)> {
    let Some(nodes) = m["nodes"].as_array() else {
        return Vec::new();
    };
    let memory: Vec<String> = nodes
        .iter()
        .map(|n| {
            format!(
                "{}:{}",
                n["os_index"],
                numalab::text::format::bytes(n["memory_bytes"].as_u64().unwrap_or(0))
            )
        })
        .collect();
    vec![
        ("machine.nodes".into(), Value::from(nodes.len())),
        (
            "machine.memory_by_node".into(),
            Value::from(memory.join(" ")),
        ),
        ("machine.distances".into(), m["distances"]["matrix"].clone()),
    ]
}

/// Whether `a` and `b` differ by more than their measured spread.
pub fn significant(a: &Figure, b: &Figure) -> Option<bool> {
    let d = (b.median - a.median).abs();
    let bound = match (a.ci, b.ci) {
        (Some(x), Some(y)) => x + y,
        _ => match (a.spread, b.spread) {
            (Some(x), Some(y)) => x + y,
            _ => return None,
        },
    };
    Some(d > bound)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        Value::Array(a) if a.len() > 8 && a.iter().all(Value::is_string) => {
            format!("{} entries", a.len())
        }
        other => other.to_string(),
    }
}

/// Two long lists of words (CPU flags), as what each has that the other
/// lacks.
fn list_difference(x: &Value, y: &Value) -> Option<(String, String)> {
    let (Some(a), Some(b)) = (x.as_array(), y.as_array()) else {
        return None;
    };
    if a.len() <= 8 && b.len() <= 8 {
        return None;
    }
    let only = |p: &[Value], q: &[Value]| -> String {
        let words: Vec<String> = p.iter().filter(|v| !q.contains(v)).map(text).collect();
        if words.is_empty() {
            "nothing more".into()
        } else {
            format!("also {}", words.join(" "))
        }
    };
    Some((only(a, b), only(b, a)))
}

/// What a comparison reads of one result, taken out of its tree so that
/// the tree can be dropped before the other result is read: a result's tree
/// takes several times its text, its figures a fraction of it.
#[derive(Debug, Clone)]
pub struct Summary {
    /// `command`, "?" without one.
    command: String,
    /// `schema_version` as it is (null without one).
    schema_version: Value,
    /// Every field of `environment` and the machine's shape, flattened:
    /// the [`ENV_KEYS`] first, in that order (null where missing).
    environment: Vec<(String, Value)>,
    figures: BTreeMap<String, Figure>,
    contexts: Vec<Context>,
    /// A report's `summary.key_figures` (empty for other results).
    key_figures: BTreeMap<String, Option<f64>>,
    /// Their 95% intervals (`summary.key_intervals`).
    key_intervals: BTreeMap<String, [f64; 2]>,
    /// The bandwidth matrix's threads per node, which decides whether the
    /// scaling's lone thread is a key figure of its own.
    matrix_threads: Option<String>,
    /// The report's (or result's) own settings: the context of its top.
    settings: Context,
}

/// What [`compare_summaries`] needs of result `v`.
pub fn summarize(v: &Value) -> Summary {
    let mut environment: Vec<(String, Value)> = ENV_KEYS
        .iter()
        .map(|k| (k.to_string(), v["environment"][k].clone()))
        .collect();
    let mut rest = Vec::new();
    flatten(&v["environment"], "", &mut rest);
    rest.retain(|(k, _)| !ENV_KEYS.contains(&k.as_str()) && !k.is_empty());
    environment.extend(rest);
    environment.extend(machine_fields(&v["machine"]));
    let (figures, contexts) = figures_and_contexts(v);
    let settings = SETTING_KEYS
        .iter()
        .filter_map(|k| Some((k.to_string(), scalar_text(v.get(*k)?)?)))
        .collect();
    let key_figures = v["summary"]["key_figures"]
        .as_object()
        .map(|o| o.iter().map(|(k, x)| (k.clone(), x.as_f64())).collect())
        .unwrap_or_default();
    let key_intervals = v["summary"]["key_intervals"]
        .as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, x)| {
                    let ends: Vec<f64> = x.as_array()?.iter().filter_map(Value::as_f64).collect();
                    match ends[..] {
                        [lo, hi] if lo <= hi => Some((k.clone(), [lo, hi])),
                        _ => None,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let matrix_threads = v["parts"]["bandwidth-matrix"]["result"]["threads_per_node"]
        .as_str()
        .map(str::to_string);
    Summary {
        command: v["command"].as_str().unwrap_or("?").to_string(),
        schema_version: v["schema_version"].clone(),
        environment,
        figures,
        contexts,
        key_figures,
        key_intervals,
        matrix_threads,
        settings,
    }
}

/// Compares two results. Results of different commands are compared on the
/// metrics they share, with a warning.
pub fn compare(a: &Value, b: &Value) -> Comparison {
    compare_summaries(&summarize(a), &summarize(b))
}

/// [`compare`] of two results' summaries.
pub fn compare_summaries(a: &Summary, b: &Summary) -> Comparison {
    let (ca, cb) = (a.command.clone(), b.command.clone());
    let mut warnings = Vec::new();
    if ca != cb {
        warnings.push(format!(
            "comparing a `{ca}` result with a `{cb}` result: only metrics both have are paired"
        ));
    }
    if a.schema_version != b.schema_version {
        warnings.push(format!(
            "schema versions differ ({} vs {})",
            text(&a.schema_version),
            text(&b.schema_version)
        ));
    }
    let (fa, fb) = (&a.figures, &b.figures);
    let mut names: Vec<&String> = fa.keys().chain(fb.keys()).collect();
    names.sort();
    names.dedup();
    let rows = names
        .into_iter()
        .map(|n| {
            let (x, y) = (fa.get(n), fb.get(n));
            let not_comparable = match (x, y) {
                (Some(x), Some(y)) => {
                    context_difference(&a.contexts[x.context], &b.contexts[y.context])
                }
                _ => None,
            };
            let paired = match (x, y) {
                (Some(x), Some(y)) if not_comparable.is_none() => Some((x, y)),
                _ => None,
            };
            Row {
                metric: n.clone(),
                unit: unit_of(n),
                a: x.map(|f| f.median),
                b: y.map(|f| f.median),
                ratio: paired
                    .filter(|(x, _)| x.median != 0.0)
                    .map(|(x, y)| y.median / x.median),
                significant: paired.and_then(|(x, y)| significant(x, y)),
                not_comparable,
            }
        })
        .collect();
    // Every setting that differs, the report's own and each part's, once.
    let mut configuration: Vec<(String, String, String)> = Vec::new();
    for ctx in &a.contexts {
        for (k, x) in ctx {
            let y = b.contexts.iter().flatten().find(|(kb, _)| kb == k);
            if let Some((_, y)) = y.filter(|(_, y)| differs(k, x, y)) {
                if !configuration.iter().any(|(c, _, _)| c == k) {
                    configuration.push((k.clone(), x.clone(), y.clone()));
                }
            }
        }
    }
    for (k, x) in &a.settings {
        if let Some((_, y)) = b.settings.iter().find(|(kb, _)| kb == k) {
            if differs(k, x, y) && !configuration.iter().any(|(c, _, _)| c == k) {
                configuration.push((k.clone(), x.clone(), y.clone()));
            }
        }
    }
    let mut environment = Vec::new();
    for (k, x) in &a.environment {
        let y = b
            .environment
            .iter()
            .find(|(kb, _)| kb == k)
            .map_or(&Value::Null, |(_, y)| y);
        if x == y {
            continue;
        }
        let (tx, ty) = list_difference(x, y).unwrap_or_else(|| (text(x), text(y)));
        environment.push((k.clone(), tx, ty));
    }
    for (k, y) in &b.environment {
        if !a.environment.iter().any(|(ka, _)| ka == k) && !y.is_null() {
            environment.push((k.clone(), "-".into(), text(y)));
        }
    }
    let top = context_difference(&a.settings, &b.settings);
    let key_figures = crate::model::key_figures::key_labels()
        .into_iter()
        .filter_map(|(key, figure, unit)| {
            let (x, y) = (
                a.key_figures.get(key).copied().flatten(),
                b.key_figures.get(key).copied().flatten(),
            );
            if x.is_none() && y.is_none() {
                return None;
            }
            // As the report's table: a figure folded into another row on
            // both sides is not a second row here.
            let folded_in = |s: &Summary| {
                crate::model::key_figures::folded(
                    key,
                    |k| s.key_figures.get(k).copied().flatten(),
                    s.matrix_threads.as_deref(),
                )
            };
            if folded_in(a) && folded_in(b) {
                return None;
            }
            let (ia, ib) = (
                a.key_intervals.get(key).copied(),
                b.key_intervals.get(key).copied(),
            );
            Some(KeyFigureRow {
                key: key.to_string(),
                figure,
                unit,
                a: x,
                b: y,
                ratio: match (x, y, &top) {
                    (Some(x), Some(y), None) if x != 0.0 => Some(y / x),
                    _ => None,
                },
                a_interval: ia,
                b_interval: ib,
                beyond_intervals: match (ia, ib, &top) {
                    (Some([a0, a1]), Some([b0, b1]), None) => Some(a1 < b0 || b1 < a0),
                    _ => None,
                },
                not_comparable: top.clone(),
            })
        })
        .collect();
    Comparison {
        command_a: ca,
        command_b: cb,
        key_figures,
        rows,
        configuration_differences: configuration,
        environment_differences: environment,
        warnings,
    }
}

/// The major part of a schema version ("1" of "1.4").
fn major(version: &str) -> &str {
    version.split('.').next().unwrap_or("")
}

/// Checks that `v` is a numalab result this numalab can read: a command's
/// `--json` output (a `command` and a `schema_version` whose major part is
/// that of `result_version`, the version commands write) or a report's
/// results.json (schema [`REPORT_SCHEMA`], major of
/// [`REPORT_SCHEMA_VERSION`]). `Err` completes "FILE ...", e.g. "is a
/// numalab result of schema version 2.0, which this numalab cannot read
/// (it reads 1.x)".
pub fn check_input(v: &Value, result_version: &str) -> Result<(), String> {
    const GIVE: &str = "give the --json output of a numalab command or a report's results.json";
    let Some(o) = v.as_object() else {
        return Err(format!(
            "is not a numalab result (it is not a JSON object); {GIVE}"
        ));
    };
    let version = match o.get("schema_version") {
        None => {
            return Err(format!(
                "is not a numalab result (no schema_version); {GIVE}"
            ))
        }
        Some(Value::String(s)) => s.as_str(),
        Some(_) => {
            return Err(format!(
                "is not a numalab result (its schema_version is not a string); {GIVE}"
            ))
        }
    };
    let (what, known) = match o.get("schema") {
        Some(Value::String(s)) if s == REPORT_SCHEMA => ("report", REPORT_SCHEMA_VERSION),
        Some(other) => {
            return Err(format!(
                "is not a numalab result (its schema is {other}, not {REPORT_SCHEMA:?}); {GIVE}"
            ))
        }
        None => match o.get("command") {
            Some(Value::String(_)) => ("result", result_version),
            _ => {
                return Err(format!(
                    "is not a numalab result (no command names what made it); {GIVE}"
                ))
            }
        },
    };
    if major(version).is_empty() || major(version) != major(known) {
        let shown: String = version.chars().take(20).collect();
        return Err(format!(
            "is a numalab {what} of schema version {shown:?}, which this numalab cannot read (it reads {}.x)",
            major(known)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::compare::{render_html, render_text};
    use serde_json::json;

    fn fig(m: f64, ci: f64) -> Value {
        json!({"median": m, "best": m, "min": m, "max": m, "spread": 0.01, "rel_ci": ci})
    }

    #[test]
    fn figures_are_named_by_path_and_identifying_fields() {
        let dup = json!({"runs": [{"threads": 2, "t": fig(1.0, 0.1)}, {"threads": 2, "t": fig(2.0, 0.1)}]});
        let names: Vec<String> = figures(&dup).into_keys().collect();
        assert_eq!(names, ["runs[threads=2#0].t", "runs[threads=2#1].t"]);
        let v = json!({
            "command": "matrix",
            "gbps": fig(10.0, 0.01),
            "measurement": {"summary": {"median": 1.0, "rel_ci": 0.1}},
            "bandwidth": [[{"cpu_node": 0, "mem_node": 1, "value": fig(5.0, 0.02)}]],
            "points": [{"bytes": 4096, "x": fig(1.0, 0.1)}, {"x": fig(2.0, 0.1)}],
        });
        let f = figures(&v);
        let names: Vec<&str> = f.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "bandwidth[cpu_node=0,mem_node=1].value",
                "gbps",
                "points[1].x",
                "points[bytes=4096].x"
            ]
        );
        assert_eq!(f["gbps"].ci, Some(0.1));
    }

    #[test]
    fn repeated_names_among_many_elements_keep_their_index_only_there() {
        // 10,000 runs: 5, 17, 4242 and 9999 all say threads=5, 100 and 101
        // both say threads=100; every other run names itself.
        let threads = |i: usize| match i {
            17 | 4242 | 9999 => 5,
            101 => 100,
            _ => i,
        };
        let runs: Vec<Value> = (0..10_000)
            .map(|i| json!({"threads": threads(i), "t": fig(i as f64, 0.1)}))
            .collect();
        let f = figures(&json!({ "runs": runs }));
        let repeated = [5, 17, 100, 101, 4242, 9999];
        let mut expected: Vec<String> = (0..10_000)
            .map(|i| {
                if repeated.contains(&i) {
                    format!("runs[threads={}#{i}].t", threads(i))
                } else {
                    format!("runs[threads={i}].t")
                }
            })
            .collect();
        expected.sort();
        assert_eq!(f.keys().cloned().collect::<Vec<_>>(), expected);
        assert_eq!(f["runs[threads=5#4242].t"].median, 4242.0);
        assert_eq!(f["runs[threads=100#100].t"].median, 100.0);
        assert_eq!(f["runs[threads=100#101].t"].median, 101.0);
        assert_eq!(f["runs[threads=6].t"].median, 6.0);
        assert_eq!(f.keys().filter(|k| k.contains('#')).count(), 6);
    }

    #[test]
    fn significance_is_the_difference_beyond_both_cis() {
        let a = json!({"command": "bench bandwidth", "gbps": fig(10.0, 0.01), "x": fig(1.0, 0.5)});
        let b = json!({"command": "bench bandwidth", "gbps": fig(11.0, 0.01), "x": fig(1.2, 0.5)});
        let c = compare(&a, &b);
        assert!(c.warnings.is_empty());
        let g = c.rows.iter().find(|r| r.metric == "gbps").unwrap();
        assert!((g.ratio.unwrap() - 1.1).abs() < 1e-12);
        assert_eq!(g.significant, Some(true)); // 1.0 > 0.1 + 0.11
        let x = c.rows.iter().find(|r| r.metric == "x").unwrap();
        assert_eq!(x.significant, Some(false)); // 0.2 < 0.5 + 0.6
        let same = compare(&a, &a);
        assert!(same
            .rows
            .iter()
            .all(|r| r.significant == Some(false) && r.ratio == Some(1.0)));
    }

    #[test]
    fn different_commands_and_environments_are_said() {
        let a = json!({"command": "matrix", "schema_version": "1.0", "environment": {"kernel": "6.1", "thp_enabled": "always"}, "y": fig(1.0, 0.1)});
        let b = json!({"command": "sizes", "schema_version": "1.0", "environment": {"kernel": "6.12", "thp_enabled": "always"}, "z": fig(1.0, 0.1)});
        let c = compare(&a, &b);
        assert_eq!(c.warnings.len(), 1);
        assert!(c.warnings[0].contains("`matrix` result with a `sizes` result"));
        assert_eq!(
            c.environment_differences,
            vec![("kernel".to_string(), "6.1".to_string(), "6.12".to_string())]
        );
        assert_eq!(c.rows.len(), 2);
        assert!(c
            .rows
            .iter()
            .all(|r| r.ratio.is_none() && r.significant.is_none()));
        let html = render_html(&c, "a<1>.json", "b.json");
        assert!(html.contains("a&lt;1&gt;.json"));
        assert!(html.contains("id=\"table-metrics\""));
        let t = render_text(&c, "a", "b");
        assert!(t.contains("kernel"), "{t}");
        assert!(t.contains("2 metric(s), 0 differ"), "{t}");
    }

    #[test]
    fn inputs_of_known_schemas_only() {
        use serde_json::json;
        let ok = |v: Value| check_input(&v, "1.0");
        assert_eq!(
            ok(json!({"schema_version": "1.3", "command": "matrix"})),
            Ok(())
        );
        assert_eq!(
            ok(json!({"schema": "numalab-report", "schema_version": "1.0"})),
            Ok(())
        );
        assert_eq!(
            ok(json!({"schema_version": "2.0", "command": "matrix"})).unwrap_err(),
            "is a numalab result of schema version \"2.0\", which this numalab cannot read (it reads 1.x)"
        );
        assert_eq!(
            ok(json!({"schema": "numalab-report", "schema_version": "7.1"})).unwrap_err(),
            "is a numalab report of schema version \"7.1\", which this numalab cannot read (it reads 1.x)"
        );
        assert!(ok(json!({"schema_version": "", "command": "x"}))
            .unwrap_err()
            .contains("cannot read"));
        assert!(ok(json!({})).unwrap_err().contains("(no schema_version)"));
        assert!(ok(json!([1, 2])).unwrap_err().contains("not a JSON object"));
        assert!(ok(json!({"schema_version": 1, "command": "x"}))
            .unwrap_err()
            .contains("not a string"));
        assert!(ok(json!({"schema_version": "1.0"}))
            .unwrap_err()
            .contains("no command"));
        assert!(ok(json!({"schema_version": "1.0", "schema": "other"}))
            .unwrap_err()
            .contains("its schema is \"other\""));
    }

    /// A report's results.json in miniature: settings at the top and in
    /// each part, key figures, an environment and a machine.
    fn report(buffer: u64, budget: f64, local_ns: f64, flags: &[&str], nodes: u64) -> Value {
        json!({
            "schema": REPORT_SCHEMA, "schema_version": REPORT_SCHEMA_VERSION,
            "command": "report", "mode": "quick", "buffer_bytes": buffer,
            "environment": {"kernel": "6.1", "thp_enabled": "always", "cpu_flags": flags,
                            "timestamp_utc": format!("2026-12-04T00:00:{budget}Z"),
                            "cgroup": {"cpus": "0-1"}},
            "machine": {"nodes": (0..nodes).map(|i| json!({"os_index": i, "memory_bytes": 1u64 << 30})).collect::<Vec<_>>(),
                        "distances": null},
            "summary": {"key_figures": {"local_latency_ns": local_ns, "numa_ratio_min": null},
                        "key_intervals": {"local_latency_ns": [local_ns * 0.98, local_ns * 1.02]}},
            "parts": {
                "sizes": {"budget_s": budget, "result": {"pattern": "random",
                    "points": [{"bytes": 4096, "latency_ns": fig(local_ns, 0.01)}]}},
                "c2c": {"budget_s": 5.0, "result": {"within_ns": fig(50.0, 0.01)}},
            }
        })
    }

    #[test]
    fn key_figures_folded_in_the_reports_table_are_not_rows_here_either() {
        let f = ["f0"];
        let with = |v: &mut Value, k: &str, x: f64| v["summary"]["key_figures"][k] = json!(x);
        let (mut a, mut b) = (
            report(128 << 20, 20.0, 90.0, &f, 1),
            report(128 << 20, 20.0, 99.0, &f, 1),
        );
        for (v, lat) in [(&mut a, 90.0), (&mut b, 99.0)] {
            // One memory node: the slowest pair is the local one; the
            // loaded run's idle chase is the latency matrix's quantity.
            with(v, "max_latency_ns", lat);
            with(v, "loaded_idle_ns", lat - 10.0);
            with(v, "loaded_max_ns", lat * 2.0);
        }
        let keys = |c: &Comparison| -> Vec<String> {
            c.key_figures.iter().map(|k| k.key.clone()).collect()
        };
        assert_eq!(
            keys(&compare(&a, &b)),
            ["local_latency_ns", "loaded_max_ns"]
        );
        // A remote node on one side: its slowest pair is a figure of its own.
        with(&mut b, "numa_ratio_max", 1.5);
        assert_eq!(
            keys(&compare(&a, &b)),
            [
                "local_latency_ns",
                "max_latency_ns",
                "numa_ratio_max",
                "loaded_max_ns"
            ]
        );
    }

    #[test]
    fn figures_under_other_settings_are_not_comparable_and_the_settings_come_first() {
        let flags: Vec<String> = (0..12).map(|i| format!("f{i}")).collect();
        let f: Vec<&str> = flags.iter().map(String::as_str).collect();
        let mut g = f.clone();
        g[11] = "avx512f";
        let a = report(128 << 20, 20.0, 90.0, &f, 1);
        // The same buffer and budgets: everything compared, key figures with
        // their units.
        let c = compare(&a, &report(128 << 20, 20.0, 99.0, &f, 1));
        assert!(c.configuration_differences.is_empty());
        assert!(c.rows.iter().all(|r| r.not_comparable.is_none()));
        // Two runs of one report share a part's budget out a little
        // differently (two default reports here: 7.56 and 7.42 s): the same setting.
        let again = compare(&a, &report(128 << 20, 21.7, 99.0, &f, 1));
        assert!(again.configuration_differences.is_empty());
        assert!(again.rows.iter().all(|r| r.not_comparable.is_none()));
        let k = &c.key_figures[0];
        assert_eq!(
            (k.key.as_str(), k.unit, k.a, k.b),
            ("local_latency_ns", "ns", Some(90.0), Some(99.0))
        );
        assert!((k.ratio.unwrap() - 1.1).abs() < 1e-9);
        // 88.2-91.8 ns against 97.0-101.0 ns: apart; against 91-95 ns, not.
        assert_eq!(k.a_interval, Some([90.0 * 0.98, 90.0 * 1.02]));
        assert_eq!(k.beyond_intervals, Some(true));
        let near = compare(&a, &report(128 << 20, 20.0, 93.0, &f, 1));
        assert_eq!(near.key_figures[0].beyond_intervals, Some(false));
        assert_eq!(
            c.key_figures.len(),
            1,
            "unmeasured key figures are left out"
        );
        let lat = c
            .rows
            .iter()
            .find(|r| r.metric.ends_with("latency_ns"))
            .unwrap();
        assert_eq!(lat.unit, Some("ns"));
        assert_eq!(lat.significant, Some(true));

        // Another buffer and another budget for sizes: sizes' figure and
        // the key figures not comparable, c2c's still compared.
        let b = report(1200 << 20, 40.0, 99.0, &g, 2);
        let c = compare(&a, &b);
        assert_eq!(
            c.configuration_differences,
            [
                (
                    "buffer_bytes".to_string(),
                    "134217728".to_string(),
                    "1258291200".to_string()
                ),
                (
                    "parts.sizes.budget_s".to_string(),
                    "20.0".to_string(),
                    "40.0".to_string()
                ),
            ]
        );
        let lat = c
            .rows
            .iter()
            .find(|r| r.metric.ends_with("latency_ns"))
            .unwrap();
        assert_eq!(
            lat.not_comparable.as_deref(),
            Some("buffer_bytes 134217728 vs 1258291200, parts.sizes.budget_s 20.0 vs 40.0")
        );
        assert_eq!((lat.ratio, lat.significant), (None, None));
        let c2c = c.rows.iter().find(|r| r.metric.contains("c2c")).unwrap();
        assert_eq!(
            c2c.not_comparable.as_deref(),
            Some("buffer_bytes 134217728 vs 1258291200")
        );
        assert!(c
            .key_figures
            .iter()
            .all(|k| k.ratio.is_none() && k.not_comparable.is_some()));
        // Every environment difference, the machine's included; never the
        // time stamp; long lists as what each side has more.
        let env: Vec<&str> = c
            .environment_differences
            .iter()
            .map(|(k, _, _)| k.as_str())
            .collect();
        assert_eq!(
            env,
            ["cpu_flags", "machine.nodes", "machine.memory_by_node"]
        );
        assert_eq!(
            (
                c.environment_differences[0].1.as_str(),
                c.environment_differences[0].2.as_str()
            ),
            ("also f11", "also avx512f")
        );
        let t = render_text(&c, "a", "b");
        let conf = t.find("configuration differences").unwrap();
        let envt = t.find("environment differences").unwrap();
        let keys = t.find("key figures:").unwrap();
        let metrics = t.find("\nmetric ").unwrap();
        assert!(conf < envt && envt < keys && keys < metrics, "{t}");
        assert!(t.contains("Idle latency, local memory"), "{t}");
        assert!(t.contains("90.00 ns"), "{t}");
        assert!(
            t.contains("not comparable: buffer_bytes 134217728 vs 1258291200"),
            "{t}"
        );
        assert!(
            t.contains(", 2 not comparable (measured under other settings)"),
            "{t}"
        );
        let h = render_html(&c, "a", "b");
        assert!(h.contains("id=\"table-key-figures\"") && h.contains("id=\"table-configuration\""));
        assert!(h.contains("<tr class=\"nc\">"), "{h}");
    }

    #[test]
    fn units_come_from_the_metric_name() {
        for (m, u) in [
            ("parts.sizes.result.points[bytes=4096].gbps", Some("GB/s")),
            ("parts.x.result.latency_ns", Some("ns")),
            ("elapsed_s", Some("s")),
            ("runs[threads=2].per_thread_gbps", Some("GB/s")),
            ("speedup_ratio", Some("x")),
            ("bandwidth[cpu_node=0,mem_node=1].value", None),
        ] {
            assert_eq!(unit_of(m), u, "{m}");
        }
    }
}
