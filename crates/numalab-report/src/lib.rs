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
//!    [`session`] (measuring the parts), [`files`] (the report directory), [`fleet`] (many nodes' reports as one)
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
pub mod fleet;
pub mod key_table;
pub mod page;
pub mod predicted;
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
        "predicted",
        "budget",
        "summarize",
        "tables",
        "key_table",
        "page",
        "text",
        "session",
        "files",
        "fleet",
        "profile_dir",
    ];

    #[test]
    fn every_module_uses_only_the_layers_below_it() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        numalab_testkit::layering::assert_layered(&src, ORDER);
    }
}
