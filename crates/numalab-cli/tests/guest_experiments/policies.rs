//! `numalab policies` in the multi-node guest.
#![allow(unused_imports)]

use crate::common::{nodes_of, one_line_error};
use crate::{quartet, ring};

/// Steps run in the Quartet guest: (unique name, shell command).
pub const QUARTET_STEPS: &[(&str, &str)] = &[];

/// Steps run in the ring guest with the CPU-less node 4.
pub const RING_STEPS: &[(&str, &str)] = &[];
