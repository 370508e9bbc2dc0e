//! numalab's reports, layer 6 of ARCHITECTURE.md: human-readable views of
//! the engine's (crate `numalab`) models and results. Machine readers use
//! the JSON (serde) forms of the same structures instead. A crate of its own
//! so that it builds without the engine's opt-level 3: nothing here is
//! timed.
//!
//! The modules are layered; each uses only those in the layers below it
//! (ARCHITECTURE.md shows the graph, and a test checks it):
//!
//! 1. vocabulary: [`model`] (modes, part names and descriptions, costs and
//!    work), [`claims`] (sentences with their evidence), [`svg`] (charts),
//!    [`plan`] (the budget and nodes a part plans with);
//! 2. output builders: [`csv`] (tables), [`html`] (page pieces and the
//!    [`html::Section`] a part writes into), [`summary`] (the summary's
//!    form and the builder a part adds to), [`compare`] (two documents'
//!    figures side by side);
//! 3. [`part`]: the trait every report part implements;
//! 4. [`views`]: one view per experiment (the text a command prints and,
//!    for report parts, the part itself), and the list of parts;
//! 5. [`registry`]: which parts a report has, and what a name stands for;
//! 6. the whole report: [`results`] (the document, results.json),
//!    [`budget`] (sharing the budget out, given a registry), [`summarize`],
//!    [`tables`], [`key_table`], [`page`] (report.html) and [`text`],
//!    [`session`] (measuring the parts), [`files`] (the report directory)
//!    and [`profile_dir`] (`numalab profile`'s folder).

// Unsafe code lives in `numalab::sys` (and the modules its documentation
// names), behind safe functions.
#![deny(unsafe_code)]

// 1. vocabulary
pub mod claims;
pub mod model;
pub mod plan;
pub mod svg;
// 2. output builders
pub mod compare;
pub mod csv;
pub mod html;
pub mod summary;
// 3. the part trait
pub mod part;
// 4. views
pub mod views;
// 5. the registry
pub mod registry;
// 6. the whole report
pub mod budget;
pub mod files;
pub mod key_table;
pub mod page;
pub mod profile_dir;
pub mod results;
pub mod session;
pub mod summarize;
pub mod tables;
pub mod text;

pub use views::topology::render_topology_text;

/// A machine of `tests/fixtures/topologies`, for unit tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> numalab::Machine {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/topologies")
        .join(name);
    numalab::Machine::from_xml_file(&p).unwrap()
}

#[cfg(test)]
mod layering {
    use std::collections::BTreeMap;
    use std::path::Path;

    /// The modules in an order where each uses only modules before it
    /// (the layers of the crate's documentation, bottom first).
    const ORDER: &[&str] = &[
        "model",
        "claims",
        "svg",
        "plan",
        "csv",
        "html",
        "summary",
        "compare",
        "part",
        "views",
        "registry",
        "results",
        "budget",
        "summarize",
        "tables",
        "key_table",
        "page",
        "text",
        "session",
        "files",
        "profile_dir",
    ];

    /// The crate's modules this source uses (`crate::NAME`, and `super::NAME`
    /// in a top-level file), outside comments and its test module.
    fn uses(text: &str, top_level: bool) -> Vec<String> {
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut out = Vec::new();
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or("");
            let mut prefixes = vec!["crate::"];
            if top_level {
                prefixes.push("super::");
            }
            for p in prefixes {
                for (i, _) in line.match_indices(p) {
                    let rest = &line[i + p.len()..];
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        out.push(name);
                    }
                }
            }
            // `use crate::{a, b}`: every name in the braces.
            if let Some(i) = line.find("crate::{") {
                let inner = line[i + 8..].split('}').next().unwrap_or("");
                out.extend(
                    inner
                        .split(',')
                        .map(|s| s.trim().split("::").next().unwrap_or("").to_string()),
                );
            }
        }
        out
    }

    fn sources(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<(String, bool)>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                sources(&p, root, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(root).unwrap();
                let top = rel
                    .iter()
                    .next()
                    .unwrap()
                    .to_string_lossy()
                    .replace(".rs", "");
                let text = std::fs::read_to_string(&p).unwrap();
                out.entry(top)
                    .or_default()
                    .push((text, rel.components().count() == 1));
            }
        }
    }

    #[test]
    fn every_module_uses_only_the_layers_below_it() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = BTreeMap::new();
        sources(&root, &root, &mut files);
        files.remove("lib");
        let mut listed: Vec<&str> = files.keys().map(String::as_str).collect();
        let mut order = ORDER.to_vec();
        listed.sort_unstable();
        order.sort_unstable();
        assert_eq!(listed, order, "a module is missing from ORDER (or gone)");
        let rank = |m: &str| ORDER.iter().position(|x| *x == m);
        let mut wrong = Vec::new();
        for (module, texts) in &files {
            let own = rank(module).unwrap();
            for (text, top_level) in texts {
                for used in uses(text, *top_level) {
                    if let Some(r) = rank(&used) {
                        if r > own {
                            wrong.push(format!("{module} uses {used}"));
                        }
                    }
                }
            }
        }
        wrong.sort();
        wrong.dedup();
        assert!(wrong.is_empty(), "upward uses: {wrong:?}");
    }
}
