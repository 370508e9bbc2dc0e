//! Filling the machine model from hwloc (live discovery or XML file).

use super::{Machine, MachineError};
use std::path::Path;

pub(super) fn load(_path: Option<&Path>) -> Result<Machine, MachineError> {
    todo!("implemented by the machine-model work")
}
