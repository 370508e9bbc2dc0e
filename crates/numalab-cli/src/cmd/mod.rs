//! One module per subcommand, named like the command.

pub mod bench;
pub mod matrix;
pub mod options;
pub mod place;
pub mod run;
pub mod scaling;
pub mod set;
pub mod sizes;
pub mod topology;
pub mod verify;
