//! Layer 4, experiments built from measurements: node-to-node matrices, the
//! working-set size sweep, packed vs spread scaling, the placement sweep,
//! loaded latency, core-to-core latency, the Apex-MAP locality map, the
//! policy comparison, the placement distribution model (`pdm`), the
//! placement sensitivity of BLAS levels 1 to 3 (`blas`), and the cost of
//! moving pages between nodes (`migrate`).

pub mod apexmap;
pub mod blas;
pub mod c2c;
pub mod copies;
pub mod extrapolate;
pub mod loaded_latency;
pub mod matrix;
pub mod migrate;
pub mod pdm;
pub mod policies;
pub mod scaling;
pub mod sizes;
pub mod sweep;
