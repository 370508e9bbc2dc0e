//! Layer 4, experiments built from measurements: node-to-node matrices, the
//! working-set size sweep, packed vs spread scaling, the placement sweep,
//! loaded latency, core-to-core latency, the Apex-MAP locality map, the
//! policy comparison and the placement distribution model (`pdm`).

pub mod apexmap;
pub mod c2c;
pub mod loaded_latency;
pub mod matrix;
pub mod pdm;
pub mod policies;
pub mod scaling;
pub mod sizes;
pub mod sweep;
