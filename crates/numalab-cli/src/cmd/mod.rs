//! One module per subcommand, named like the command.

pub mod place;
pub mod run;
pub mod set;
pub mod topology;
pub mod verify;
