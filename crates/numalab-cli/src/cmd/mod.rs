//! One module per subcommand, named like the command.

pub mod place;
pub mod run;
pub mod topology;
pub mod verify;
