//! Layer 6, reports: human-readable views of models and results. Machine
//! readers use the JSON (serde) forms of the same structures instead.

pub mod compare;
pub mod topology;

pub use topology::render_topology_text;
