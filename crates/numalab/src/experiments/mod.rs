//! Layer 4, experiments built from measurements: node-to-node matrices, the
//! working-set size sweep, and packed vs spread scaling.

pub mod matrix;
pub mod scaling;
pub mod sizes;
