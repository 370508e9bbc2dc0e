//! One module per subcommand, named like the command.

pub mod advise;
pub mod apexmap;
pub mod bench;
pub mod blas;
pub mod c2c;
pub mod compare;
pub mod extrapolate;
pub mod fleet;
pub mod loaded_latency;
pub mod matrix;
pub mod migrate;
pub mod model;
pub mod pdm;
pub mod place;
pub mod policies;
pub mod profile;
pub mod report;
pub mod run;
pub mod scaling;
pub mod set;
pub mod sizes;
pub mod sweep;
pub mod topology;
pub mod verify;
