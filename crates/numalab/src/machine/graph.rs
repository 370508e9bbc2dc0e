//! Derived facts: the interconnect graph inferred from distances, hop counts,
//! and warnings about firmware tables that look wrong.

use super::{Distances, HopMatrix};
use serde::Serialize;

/// A direct link between two nodes of the interconnect graph.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Link {
    pub a: u32,
    pub b: u32,
    pub distance: u64,
}

/// Direct neighbours: nodes at the smallest remote distance from each node.
pub fn interconnect_graph(_distances: &Distances) -> Vec<Link> {
    todo!("implemented by the machine-model work")
}

/// Hop counts by BFS over the links.
pub fn hop_matrix(_nodes: &[u32], _links: &[Link]) -> HopMatrix {
    todo!("implemented by the machine-model work")
}
