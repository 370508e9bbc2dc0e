//! The class of any concrete case, and a twin of a planned case: another
//! member of its class, to test the symmetry the folding assumed.

use super::super::tree::Path;
use super::{Key, PlannedCase, SweepSpace, ThreadCase};
use serde::{Deserialize, Serialize};

/// How a twin differs from its class's representative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TwinMove {
    /// Other nodes, by a permutation that keeps every distance: what the
    /// distance table claims is the same experiment.
    NodeSymmetry,
    /// Other cores (or PUs, or caches with their cores) of the same
    /// nodes: an exchange of alike subtrees of the machine tree.
    CoreSwap,
}

impl TwinMove {
    pub fn name(self) -> &'static str {
        match self {
            TwinMove::NodeSymmetry => "node symmetry",
            TwinMove::CoreSwap => "core swap",
        }
    }
}

impl SweepSpace {
    /// The class key of any concrete case of this space (None when a CPU
    /// or memory node is not in it): equal keys, same experiment.
    pub fn class_of(&self, threads: &[ThreadCase]) -> Option<String> {
        let keys: Vec<Key> = threads
            .iter()
            .map(|t| {
                let cpu = self.sweep_cpu(t.cpu)?;
                self.mem_nodes
                    .contains(&t.mem)
                    .then(|| self.key_of(cpu, t.access, t.mem))
            })
            .collect::<Option<_>>()?;
        Some(Self::class_key(&self.canonical(&keys)))
    }

    /// Another member of `case`'s class, to test the symmetry the folding
    /// assumed: its image under a node automorphism that moves it when
    /// there is one (each thread at the same path of its image node's local
    /// tree), else the same case with the first thread's subtree (its
    /// core, or the cache holding it, or its PU) exchanged with an alike
    /// one no thread uses; every thread inside moves along. None when the
    /// class has no other member either way.
    pub fn twin(&self, case: &PlannedCase) -> Option<(PlannedCase, TwinMove)> {
        let places: Vec<(usize, Path)> = case
            .threads
            .iter()
            .map(|t| self.tree.place(t.cpu))
            .collect::<Option<_>>()?;
        let seq: Vec<usize> = case
            .threads
            .iter()
            .flat_map(|t| [self.node_index(t.node), self.node_index(t.mem)])
            .collect();
        let build = |cpus: Vec<u32>, nodes: &[usize]| -> Option<PlannedCase> {
            let threads = case
                .threads
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let cpu = self.sweep_cpu(cpus[i])?;
                    Some(self.thread_case(cpu, t.access, self.nodes[nodes[2 * i + 1]]))
                })
                .collect::<Option<Vec<_>>>()?;
            Some(PlannedCase {
                threads,
                class_size: case.class_size,
                class_key: case.class_key.clone(),
            })
        };
        if let Some(img) = self.symmetry.moved_image(&seq) {
            let cpus: Option<Vec<u32>> = places
                .iter()
                .enumerate()
                .map(|(i, (_, path))| self.tree.cpu_at(img[2 * i], path))
                .collect();
            if let Some(t) = cpus.and_then(|cpus| build(cpus, &img)) {
                return Some((t, TwinMove::NodeSymmetry));
            }
        }
        let node = places[0].0;
        let inside: Vec<usize> = (0..places.len()).filter(|&i| places[i].0 == node).collect();
        let paths: Vec<Path> = inside.iter().map(|&i| places[i].1).collect();
        let moved = self.tree.swapped(node, &paths)?;
        let mut cpus: Vec<u32> = case.threads.iter().map(|t| t.cpu).collect();
        for (k, &i) in inside.iter().enumerate() {
            cpus[i] = self.tree.cpu_at(node, &moved[k])?;
        }
        build(cpus, &seq).map(|t| (t, TwinMove::CoreSwap))
    }
}
