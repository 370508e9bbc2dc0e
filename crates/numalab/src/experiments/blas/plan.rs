//! The serial mode's plan: one thread on the first allowed CPU of each
//! CPU node, every placement of its operands over the memory nodes, folded
//! by the machine's automorphisms (or all of them with `full`), each with
//! its contention.

use super::{BlasRequest, Kernel, PlannedRun, MAX_RUNS};
use crate::experiments::pdm;
use crate::experiments::sweep::{Access, SweepSpace};
use crate::machine::Machine;
use crate::placement::PlacementError;
use crate::IdSet;

fn class_label(hops: &[Option<u32>]) -> String {
    hops.iter()
        .map(|h| h.map_or("?".to_string(), |h| h.to_string()))
        .collect::<Vec<_>>()
        .join("/")
}

/// Every CPU node's thread CPU: the first allowed CPU of each node asked for.
fn thread_cpus(m: &Machine, only: Option<&IdSet>) -> Result<Vec<(u32, u32)>, PlacementError> {
    let cpu_nodes = m.cpu_nodes();
    let nodes: Vec<u32> = match only {
        Some(set) => {
            if let Some(bad) = set.iter().find(|n| !cpu_nodes.contains(*n)) {
                return Err(PlacementError::Invalid(format!(
                    "--node {bad} is not a node with CPUs this process may use; CPU nodes: {cpu_nodes}"
                )));
            }
            set.iter().collect()
        }
        None => cpu_nodes.iter().collect(),
    };
    nodes
        .into_iter()
        .map(|node| {
            m.allowed_cpus_of(node)
                .first()
                .map(|cpu| (node, cpu))
                .ok_or_else(|| PlacementError::Invalid(format!("node {node} has no allowed CPU")))
        })
        .collect()
}

/// Every placement the serial mode would run, in run order: per kernel,
/// per CPU node, one per class of placements under the machine's
/// automorphisms (or all of them with `full`), each with its contention.
pub fn plan(m: &Machine, req: &BlasRequest) -> Result<Vec<PlannedRun>, PlacementError> {
    let threads = thread_cpus(m, req.cpu_nodes.as_ref())?;
    let memory: Vec<u32> = m.memory_nodes().iter().collect();
    if memory.is_empty() {
        return Err(PlacementError::Invalid(
            "this machine has no node with memory".into(),
        ));
    }
    // Both are built once: each is quadratic in nodes (or worse) and a
    // plan prices hundreds of placements.
    let links = pdm::Contention::of(m).ok();
    let space = match req.full {
        true => None,
        false => Some(operand_space(m, &threads)?),
    };
    let mut runs = Vec::new();
    for &kernel in &req.kernels {
        let q = kernel.operands().len();
        let total = memory.len().saturating_pow(q as u32);
        if req.full {
            if runs
                .len()
                .saturating_add(total.saturating_mul(threads.len()))
                > MAX_RUNS
            {
                return Err(too_many());
            }
            for &(cpu_node, cpu) in &threads {
                for i in 0..total {
                    let mut rest = i;
                    let mut nodes = vec![0; q];
                    for slot in nodes.iter_mut().rev() {
                        *slot = memory[rest % memory.len()];
                        rest /= memory.len();
                    }
                    runs.push(run_of(m, links.as_ref(), kernel, cpu_node, cpu, nodes, 1));
                }
            }
            continue;
        }
        let Some(space) = &space else { continue };
        // Node automorphisms merge at most their number of placements: a
        // plan past the cap is refused before it is folded.
        let least = (total.saturating_mul(threads.len()) as u128)
            .div_ceil(space.symmetry_order().saturating().max(1));
        if runs.len() as u128 + least > MAX_RUNS as u128 {
            return Err(too_many());
        }
        let mut classes = space.operand_classes(q);
        classes.sort_by_key(|(cpu, nodes, _)| (*cpu, nodes.clone()));
        if runs.len().saturating_add(classes.len()) > MAX_RUNS {
            return Err(too_many());
        }
        for (cpu, nodes, size) in classes {
            let cpu_node = m.node_of_cpu(cpu).unwrap_or(u32::MAX);
            runs.push(run_of(
                m,
                links.as_ref(),
                kernel,
                cpu_node,
                cpu,
                nodes,
                size,
            ));
        }
    }
    Ok(runs)
}

/// The machine's symmetry over the serial mode's thread CPUs and every
/// memory node.
fn operand_space(m: &Machine, threads: &[(u32, u32)]) -> Result<SweepSpace, PlacementError> {
    let cpus: IdSet = threads.iter().map(|t| t.1).collect();
    SweepSpace::new(m, &cpus, &m.memory_nodes(), &[Access::Read]).map_err(PlacementError::Invalid)
}

pub(super) fn too_many() -> PlacementError {
    PlacementError::Invalid(format!(
        "more than {MAX_RUNS} placements to run; leave out --every-case, or pick one --node or fewer --kernels"
    ))
}

fn run_of(
    m: &Machine,
    links: Option<&pdm::Contention>,
    kernel: Kernel,
    cpu_node: u32,
    cpu: u32,
    nodes: Vec<u32>,
    stands_for: u64,
) -> PlannedRun {
    let hops: Vec<Option<u32>> = nodes.iter().map(|&v| m.hops_between(cpu_node, v)).collect();
    let contention = links.and_then(|l| {
        l.of_placement(
            &pdm::streamed(nodes.len()),
            &[cpu_node],
            std::slice::from_ref(&nodes),
        )
        .ok()
    });
    PlannedRun {
        kernel,
        level: kernel.level(),
        cpu_node,
        cpu,
        class: class_label(&hops),
        nodes,
        hops,
        stands_for,
        contention,
    }
}
