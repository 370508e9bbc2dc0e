//! Checks shared by the report tests on this host (report.rs) and in the
//! multi-node guest (guest_report.rs): the documented JSON schema, and a
//! real browser rendering of report.html.

use super::browser::{self, png_size, RenderOptions, Rendered};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Every id of a complete report of a multi-node machine with a distance
/// table (docs/report.md lists them).
pub const REPORT_IDS: &[&str] = &[
    "summary",
    "summary-headline",
    "summary-findings",
    "summary-advice",
    "tab-key-figures",
    "tab-parts",
    "tab-machine",
    "tab-nodes",
    "fig-node-graph",
    "machine-picture",
    "tab-distances",
    "fig-distance-heatmap",
    "tab-caches",
    "fig-latency-heatmap",
    "tab-latency-matrix",
    "fig-bandwidth-heatmap",
    "tab-bandwidth-matrix",
    "fig-sizes-bandwidth",
    "fig-sizes-latency",
    "tab-sizes",
    "fig-scaling",
    "tab-scaling",
    "fig-sweep",
    "fig-sweep-1t",
    "fig-sweep-2t",
    "fig-scenarios",
    "tab-scenario-plan",
    "tab-scenarios",
    "tab-scenario-findings",
    "tab-sweep",
    "tab-sweep-findings",
    "fig-loaded-latency-local",
    "fig-loaded-latency-far",
    "tab-loaded-latency",
    "fig-c2c",
    "tab-c2c-nodes",
    "tab-c2c",
    "fig-policies",
    "tab-policies",
    "tab-environment",
];

/// docs/report-schema.json, parsed.
pub fn schema() -> Value {
    let p = super::repo_root().join("docs/report-schema.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("docs/report-schema.json is JSON")
}

/// Every way `doc` breaks the schema, one line each (empty: valid).
pub fn schema_errors(doc: &Value) -> Vec<String> {
    let s = schema();
    let v =
        jsonschema::draft202012::new(&s).expect("docs/report-schema.json is a valid JSON Schema");
    v.iter_errors(doc)
        .map(|e| {
            // The message quotes the whole offending value: keep its start.
            let msg = e.to_string();
            let short: String = msg.chars().take(300).collect();
            format!(
                "{}: {short}{}",
                e.instance_path(),
                if msg.len() > 300 { " ..." } else { "" }
            )
        })
        .collect()
}

/// Asserts `doc` follows the schema.
pub fn assert_valid(doc: &Value, what: &str) {
    let errs = schema_errors(doc);
    assert!(
        errs.is_empty(),
        "{what}: results.json breaks docs/report-schema.json:\n{}",
        errs.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
    assert_claims(doc, what);
}

/// Every sentence of the summary is a claim, and every claim's figures,
/// facts, verdicts and text re-derive from the document
/// (`numalab_report::claims::check`).
pub fn assert_claims(doc: &Value, what: &str) {
    let bad = numalab_report::claims::check(doc);
    assert!(
        bad.is_empty(),
        "{what}: {} sentence(s) of the summary disagree with results.json:\n{}",
        bad.len(),
        bad.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// A report measured under QEMU TCG: it says so first, and no finding,
/// advice or warning rests on timings (those claims are withheld). Returns
/// the finding claims, withheld ones included.
#[allow(dead_code)]
pub fn assert_emulated(doc: &Value) -> Vec<Value> {
    let s = &doc["summary"];
    let banner = s["banner"].as_str().unwrap_or("");
    assert!(
        banner.starts_with(
            "These timings were taken on an emulated CPU (software emulation: CPU model 'QEMU TCG"
        ),
        "no emulation banner: {banner:?}"
    );
    let claims = s["claims"].as_array().expect("claims");
    let basis = |kind: &str, text: &str| {
        claims
            .iter()
            .find(|c| c["kind"] == kind && c["text"] == text)
            .map(|c| c["basis"].as_str().unwrap_or("").to_string())
            .unwrap_or_else(|| panic!("{kind} without a claim: {text}"))
    };
    for (list, kind) in [("findings", "finding"), ("advice", "advice")] {
        for l in s[list].as_array().unwrap() {
            let t = l["text"].as_str().unwrap();
            assert_ne!(
                basis(kind, t),
                "timing",
                "timing {kind} shown under TCG: {t}"
            );
        }
    }
    for w in s["warnings"].as_array().unwrap() {
        let t = w.as_str().unwrap();
        assert_ne!(
            basis("warning", t),
            "timing",
            "timing warning shown under TCG: {t}"
        );
    }
    let withheld = s["withheld"].as_array().map_or(0, Vec::len);
    assert!(withheld >= 5, "only {withheld} timing sentences withheld");
    claims
        .iter()
        .filter(|c| c["kind"] == "finding")
        .cloned()
        .collect()
}

/// Reads DIR/results.json.
pub fn results(dir: &Path) -> Value {
    let p = dir.join("results.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Status of every part, by name.
pub fn statuses(doc: &Value) -> Vec<(String, String)> {
    doc["parts"]
        .as_object()
        .expect("parts")
        .iter()
        .map(|(k, v)| (k.clone(), v["status"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// Renders DIR/report.html in Chromium (light and dark), saves the PNGs
/// beside the test's other output as `<name>-light.png` and `<name>-dark.png`,
/// and checks what every report must satisfy: no console errors, no request
/// leaving the file, every id in `ids` present, the summary naming the node
/// count (`nodes_text`, e.g. "4 NUMA nodes"). Returns the light rendering.
pub fn render_and_check(dir: &Path, name: &str, ids: &[&str], nodes_text: &str) -> Rendered {
    assert!(
        browser::chromium_path().is_some(),
        "chromium not found: run scripts/install-deps.sh --test (the README test command does)"
    );
    if dir.join("results.json").exists() {
        assert_claims(&results(dir), name);
    }
    let html = dir.join("report.html");
    let mut light = None;
    for dark in [false, true] {
        let r = browser::render(
            &html,
            &RenderOptions {
                dark,
                ..RenderOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            r.console_errors.is_empty(),
            "{name}: console errors: {:?}",
            r.console_errors
        );
        assert!(
            r.external_requests().is_empty(),
            "{name}: the report loaded something from outside: {:?}",
            r.external_requests()
        );
        let (w, h) = png_size(&r.png).expect("a PNG");
        assert!(w >= 1280 && h > 2000, "{name}: screenshot {w}x{h}");
        let png = out_dir().join(format!(
            "{name}-{}.png",
            if dark { "dark" } else { "light" }
        ));
        std::fs::write(&png, &r.png).unwrap();
        println!("{name}: screenshot {w}x{h} -> {}", png.display());
        for id in ids {
            assert!(
                r.element_ids.iter().any(|x| x == id),
                "{name}: no element with id '{id}' in report.html; ids: {:?}",
                r.element_ids
            );
        }
        let summary = r.text_of("summary").unwrap_or_default();
        assert!(
            summary.contains(nodes_text),
            "{name}: the summary does not say '{nodes_text}': {summary}"
        );
        if !dark {
            light = Some(r);
        }
    }
    light.unwrap()
}

/// Where tests leave screenshots and reports for people to look at.
pub fn out_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-tests");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Node keys of a page histogram with pages on them.
pub fn page_nodes(h: &Value) -> Vec<u32> {
    let mut v: Vec<u32> = h
        .as_object()
        .expect("pages_by_node is an object")
        .iter()
        .filter(|(_, p)| p.as_u64().unwrap_or(0) > 0)
        .map(|(k, _)| k.parse().expect("node keys are numbers"))
        .collect();
    v.sort_unstable();
    v
}

/// Asserts every cell of a matrix ran where asked and its pages are all on
/// the cell's memory node.
pub fn assert_matrix_placed(doc: &Value, part: &str, table: &str, rows: &[u32], cols: &[u32]) {
    let r = &doc["parts"][part]["result"];
    let t = r[table]
        .as_array()
        .unwrap_or_else(|| panic!("{part}.{table}"));
    assert_eq!(t.len(), rows.len(), "{part}: rows");
    for (row, &cpu_node) in t.iter().zip(rows) {
        let row = row.as_array().unwrap();
        assert_eq!(row.len(), cols.len(), "{part}: columns");
        for (cell, &mem) in row.iter().zip(cols) {
            assert_eq!(cell["cpu_node"], cpu_node);
            assert_eq!(cell["mem_node"], mem);
            assert!(
                cell["value"]["median"].as_f64().unwrap_or(0.0) > 0.0,
                "{part} {cpu_node}->{mem}: {}",
                cell["value"]
            );
            let v = &cell["verification"];
            assert_eq!(v["verified"], true, "{part} {cpu_node}->{mem}: {v}");
            for w in v["workers"].as_array().unwrap() {
                assert!(
                    w["seen_cpus"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .all(|c| *c == w["requested_cpu"]),
                    "{part} {cpu_node}->{mem}: worker moved: {w}"
                );
                for b in w["buffers"].as_array().unwrap() {
                    assert_eq!(
                        page_nodes(&b["pages_by_node"]),
                        vec![mem],
                        "{part} {cpu_node}->{mem}: pages {}",
                        b["pages_by_node"]
                    );
                    assert_eq!(b["untouched_pages"], 0);
                }
            }
        }
    }
}

/// The workloads the report's `policies` part ran, in its order. The quick
/// table's workloads are cut last to first (single-pinned, numa-aware,
/// serial-init) when the budget is short: the kept ones must be a prefix
/// of that order, each with the same number of policy cells, and a cut
/// must be named in the part's reason ("k of 3 workloads").
pub fn policies_workloads_kept(pol: &Value) -> Vec<&str> {
    let cells = pol["result"]["cells"].as_array().unwrap();
    let order = ["single-pinned", "numa-aware", "serial-init"];
    let mut ran: Vec<&str> = cells
        .iter()
        .map(|c| c["workload"].as_str().unwrap())
        .collect();
    ran.sort_unstable_by_key(|w| order.iter().position(|k| k == w));
    ran.dedup();
    assert!(
        !ran.is_empty() && ran == order[..ran.len()],
        "policies workloads {ran:?}"
    );
    assert_eq!(
        cells.len() % ran.len(),
        0,
        "{} cells for {ran:?}",
        cells.len()
    );
    if ran.len() < order.len() {
        let reason = pol["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&format!("{} of 3 workloads", ran.len())),
            "policies ran {ran:?} but says: {reason}"
        );
    }
    ran
}
