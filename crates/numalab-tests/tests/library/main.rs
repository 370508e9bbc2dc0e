//! The library's integration tests (fast lane): fixtures, properties and measurements on this machine through the public API.
//!
//! One binary per lane (scripts/lanes.py): each former test file is a
//! module here, so the binary is linked once and its tests share one
//! process (and `common::turn`, which keeps measurements apart).

#[path = "../common/mod.rs"]
mod common;

mod apexmap;
mod capacity;
mod counters;
mod fixtures;
mod harness;
mod kernels;
mod layout_bounds;
mod loaded_latency;
mod pacing;
mod parser_props;
mod placement;
mod policies;
mod roundtrip;
mod stats;
mod sweep;
mod topology_xml_props;
