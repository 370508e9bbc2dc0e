//! Layer 6, reports: human-readable views of models and results. Machine
//! readers use the JSON (serde) forms of the same structures instead.
//!
//! `numalab report` (the full characterization of a machine) lives here:
//! [`results`] is its document (results.json), [`plan`] shares out its
//! budget, [`session`] measures the parts, [`summary`] writes its plain
//! sentences and advice, [`csv`] its tables, [`html`] (with the charts of
//! [`svg`]) its page, and [`files`] the report directory.

pub mod compare;
pub mod csv;
pub mod files;
pub mod html;
pub mod plan;
pub mod results;
pub mod session;
pub mod summary;
pub mod svg;
pub mod topology;

pub use topology::render_topology_text;

/// A machine of `tests/fixtures/topologies`, for unit tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> crate::Machine {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/topologies")
        .join(name);
    crate::Machine::from_xml_file(&p).unwrap()
}
