//! numalab's reports, layer 6 of ARCHITECTURE.md: human-readable views of
//! the engine's (crate `numalab`) models and results. Machine readers use
//! the JSON (serde) forms of the same structures instead. A crate of its own
//! so that it builds without the engine's opt-level 3: nothing here is
//! timed.
//!
//! [`views`] holds one view per experiment (the text a command prints and,
//! for report parts, the part itself) and the registry of report parts.
//! `numalab report` (the full characterization of a machine) is built from
//! them: [`part`] is the trait every part implements, [`results`] the
//! document (results.json), [`plan`] shares out the budget and calibrates
//! fixed costs, [`session`] measures the parts, [`summary`] writes the plain
//! sentences and advice, [`csv`] the tables, [`html`] (with the charts of
//! [`svg`]) the page, [`text`] the same in plain text, and [`files`] the
//! report directory. [`compare`] sets
//! two results side by side. [`profile_dir`] is `numalab profile`'s folder.

// Unsafe code lives in `numalab::sys` (and the modules its documentation
// names), behind safe functions.
#![deny(unsafe_code)]

pub mod budget;
pub mod claims;
pub mod compare;
pub mod csv;
pub mod files;
pub mod html;
pub mod key_table;
pub mod part;
pub mod plan;
pub mod profile_dir;
pub mod results;
pub mod session;
pub mod summary;
pub mod svg;
pub mod text;
pub mod views;

pub use views::topology::render_topology_text;

/// A machine of `tests/fixtures/topologies`, for unit tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> numalab::Machine {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/topologies")
        .join(name);
    numalab::Machine::from_xml_file(&p).unwrap()
}
