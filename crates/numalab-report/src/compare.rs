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

/// One figure of a result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    pub median: f64,
    /// Half-width of the median's 95% confidence interval, absolute.
    pub ci: Option<f64>,
    /// Interquartile range, absolute.
    pub spread: Option<f64>,
}

/// A metric of both results.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub metric: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// b / a.
    pub ratio: Option<f64>,
    /// The difference exceeds the measured spread (None: one side missing
    /// or no spread known).
    pub significant: Option<bool>,
}

/// The comparison of two results.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub command_a: String,
    pub command_b: String,
    pub rows: Vec<Row>,
    /// Environment fields that differ: (field, a, b). (Not `environment`:
    /// that is the envelope's, the environment `compare` itself ran in.)
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
    })
}

fn walk(v: &Value, path: &str, out: &mut BTreeMap<String, Figure>) {
    match v {
        Value::Object(o) => {
            if let Some(f) = figure_of(o) {
                out.insert(path.to_string(), f);
                return;
            }
            for (k, x) in o {
                if SKIP.contains(&k.as_str()) {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(x, &p, out);
            }
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
                    walk(row, path, out);
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
                walk(x, &p, out);
            }
        }
        _ => {}
    }
}

/// Every figure of a result, by metric name.
pub fn figures(v: &Value) -> BTreeMap<String, Figure> {
    let mut out = BTreeMap::new();
    walk(v, "", &mut out);
    out
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
        other => other.to_string(),
    }
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
    /// The [`ENV_KEYS`] fields of `environment`, in that order (null where
    /// missing).
    environment: Vec<Value>,
    figures: BTreeMap<String, Figure>,
}

/// What [`compare_summaries`] needs of result `v`.
pub fn summarize(v: &Value) -> Summary {
    Summary {
        command: v["command"].as_str().unwrap_or("?").to_string(),
        schema_version: v["schema_version"].clone(),
        environment: ENV_KEYS
            .iter()
            .map(|k| v["environment"][k].clone())
            .collect(),
        figures: figures(v),
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
            Row {
                metric: n.clone(),
                a: x.map(|f| f.median),
                b: y.map(|f| f.median),
                ratio: match (x, y) {
                    (Some(x), Some(y)) if x.median != 0.0 => Some(y.median / x.median),
                    _ => None,
                },
                significant: match (x, y) {
                    (Some(x), Some(y)) => significant(x, y),
                    _ => None,
                },
            }
        })
        .collect();
    let mut environment = Vec::new();
    for ((k, x), y) in ENV_KEYS.iter().zip(&a.environment).zip(&b.environment) {
        if x != y {
            environment.push((k.to_string(), text(x), text(y)));
        }
    }
    Comparison {
        command_a: ca,
        command_b: cb,
        rows,
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
}
