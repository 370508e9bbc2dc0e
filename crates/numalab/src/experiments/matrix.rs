//! `numalab matrix`: latency and bandwidth from every CPU node to every memory
//! node (CPU-less memory nodes included as targets), with NUMA ratios.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the run after the cell in
//! progress: the tables then hold the cells measured so far (rows may be
//! short, later rows and the bandwidth table missing).

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::chase::ChasePattern;
use crate::measure::harness::{
    run_bandwidth, run_latency, BandwidthRequest, Figure, LatencyRequest, Verification, WorkerPlan,
};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::StopRule;
use crate::placement::{
    check_plan, ArrayPolicies, BufferDemand, MemoryPolicy, PlacementError, Thp,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What to measure.
#[derive(Debug, Clone)]
pub struct MatrixRequest {
    pub latency: bool,
    pub bandwidth: bool,
    /// One thread per CPU node, or every CPU of the node.
    pub all_threads_per_node: bool,
    pub kernel: BandwidthKernel,
    pub isa: Isa,
    pub pattern: ChasePattern,
    pub latency_bytes: usize,
    pub bandwidth_bytes: usize,
    /// Rule for each cell (its budget is per cell).
    pub rule: StopRule,
    /// The CPU nodes measured as rows (`None`: every CPU node). A report
    /// on a machine with many nodes may measure a sample of them.
    pub rows: Option<Vec<u32>>,
    /// Bandwidth: arrays placed by their own policy in every cell
    /// (`b=local` measures reading each column while writing locally);
    /// arrays not named here are bound to the cell's column.
    pub fixed_arrays: BTreeMap<String, MemoryPolicy>,
}

/// One cell: a CPU node reading a memory node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell<T> {
    pub cpu_node: u32,
    pub mem_node: u32,
    pub value: T,
    /// Value relative to the CPU node's local value (the NUMA ratio); for
    /// bandwidth, local / this, so that > 1 means "remote is worse" for both.
    pub numa_ratio: Option<f64>,
    pub verification: Verification,
}

/// The whole matrix. Rows: CPU nodes; columns: memory nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixResult {
    pub cpu_nodes: Vec<u32>,
    pub mem_nodes: Vec<u32>,
    pub threads_per_node: String,
    /// ns per dependent load, `latency[row][col]`.
    pub latency: Option<Vec<Vec<Cell<Figure>>>>,
    /// Aggregate GB/s (program bytes), `bandwidth[row][col]`.
    pub bandwidth: Option<Vec<Vec<Cell<Figure>>>>,
    pub kernel: BandwidthKernel,
    pub pattern: ChasePattern,
    pub verified: bool,
    pub warnings: Vec<String>,
    /// Arrays that did not follow the column: their policies
    /// (`b=local`), as [`MatrixRequest::fixed_arrays`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_arrays: Option<String>,
}

/// Rows and columns: allowed nodes with CPUs, and every allowed memory node.
pub fn matrix_nodes(m: &Machine) -> (Vec<u32>, Vec<u32>) {
    let rows: Vec<u32> = m.cpu_nodes().iter().collect();
    let cols: Vec<u32> = m.memory_nodes().iter().collect();
    (rows, cols)
}

/// Number of measurements `req` implies on `m` (for progress and budgets).
pub fn cell_count(m: &Machine, req: &MatrixRequest) -> usize {
    let (r, c) = matrix_nodes(m);
    let r = req.rows.as_ref().map_or(r.len(), Vec::len);
    r * c.len() * (req.latency as usize + req.bandwidth as usize)
}

/// Runs the matrix; `progress` is called before each cell with its name.
pub fn run_matrix(
    m: &Machine,
    req: &MatrixRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<MatrixResult, PlacementError> {
    let (all_rows, cols) = matrix_nodes(m);
    let rows = match &req.rows {
        None => all_rows,
        Some(r) => {
            if let Some(bad) = r.iter().find(|n| !all_rows.contains(n)) {
                return Err(PlacementError::Invalid(format!(
                    "node {bad} is not an allowed node with CPUs; valid: {}",
                    all_rows
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            r.clone()
        }
    };
    if rows.is_empty() || cols.is_empty() {
        return Err(PlacementError::Invalid(
            "no allowed node with CPUs or memory to measure".into(),
        ));
    }
    check_plan(
        m,
        &buffer_plan(m, req, &rows, &cols)?,
        "use a smaller --size",
    )?;
    let mut warnings = Vec::new();
    if req.bandwidth {
        // Per thread: the threads of a row share the cache, so the data of
        // one is the smallest amount that must outgrow it.
        warnings.extend(crate::measure::environment::cache_fit_warning(
            m,
            req.bandwidth_bytes as u64 * req.kernel.arrays() as u64,
            "one thread's data",
        ));
    }
    let mut latency = None;
    let mut bandwidth = None;
    if req.latency {
        let mut table = measure_table(
            "latency",
            (&rows, &cols),
            progress,
            &mut warnings,
            |r| first_cpu(m, r),
            |&cpu, c| latency_cell(m, req, cpu, c),
        )?;
        set_ratios(&mut table, |local, x| x / local);
        latency = Some(table);
    }
    if req.bandwidth && !cancel::requested() {
        let mut table = measure_table(
            "bandwidth",
            (&rows, &cols),
            progress,
            &mut warnings,
            |r| node_threads(m, req, r),
            |cpus, c| bandwidth_cell(m, req, cpus, c),
        )?;
        set_ratios(&mut table, |local, x| local / x);
        bandwidth = Some(table);
    }
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    let verified = [&latency, &bandwidth]
        .iter()
        .filter_map(|t| t.as_ref())
        .all(|t| t.iter().flatten().all(|c| c.verification.verified));
    Ok(MatrixResult {
        cpu_nodes: rows,
        mem_nodes: cols,
        threads_per_node: if req.all_threads_per_node {
            "all".into()
        } else {
            "1".into()
        },
        latency,
        bandwidth,
        kernel: req.kernel,
        pattern: req.pattern,
        verified,
        warnings,
        fixed_arrays: (!req.fixed_arrays.is_empty()).then(|| {
            req.fixed_arrays
                .iter()
                .map(|(n, p)| format!("{n}={p}"))
                .collect::<Vec<_>>()
                .join(" ")
        }),
    })
}

/// The buffers of every cell, one phase per cell (a cell's buffers are
/// freed before the next cell's are placed).
fn buffer_plan(
    m: &Machine,
    req: &MatrixRequest,
    rows: &[u32],
    cols: &[u32],
) -> Result<Vec<Vec<BufferDemand>>, PlacementError> {
    let mut phases = Vec::new();
    for &r in rows {
        let chaser = first_cpu(m, r)?;
        let streamers = node_threads(m, req, r)?;
        for &c in cols {
            if req.latency {
                phases.push(vec![BufferDemand::new(
                    req.latency_bytes,
                    &MemoryPolicy::on_node(c),
                    Some(chaser),
                )]);
            }
            if req.bandwidth {
                let one = |&cpu: &u32| {
                    let col = MemoryPolicy::on_node(c);
                    req.kernel
                        .array_names()
                        .iter()
                        .map(|name| {
                            let p = req.fixed_arrays.get(*name).unwrap_or(&col);
                            BufferDemand::new(req.bandwidth_bytes, p, Some(cpu))
                        })
                        .collect::<Vec<_>>()
                };
                phases.push(streamers.iter().flat_map(one).collect());
            }
        }
    }
    Ok(phases)
}

/// What one cell's measurement gives: its figure, placement proof and warnings.
type Measured = (Figure, Verification, Vec<String>);

/// Measures a table row by row: `row_setup` once per CPU node (the threads
/// of the row), `measure` once per memory node. On cancel it stops before
/// the next cell and keeps the cells measured so far (the row in progress
/// too, when not empty). Each cell's warnings are kept, named by the cell.
fn measure_table<S>(
    what: &str,
    (rows, cols): (&[u32], &[u32]),
    progress: &mut dyn FnMut(&str),
    warnings: &mut Vec<String>,
    mut row_setup: impl FnMut(u32) -> Result<S, PlacementError>,
    mut measure: impl FnMut(&S, u32) -> Result<Measured, PlacementError>,
) -> Result<Vec<Vec<Cell<Figure>>>, PlacementError> {
    let mut table = Vec::new();
    for &r in rows {
        let threads = row_setup(r)?;
        let mut row = Vec::new();
        for &c in cols {
            if cancel::requested() {
                if !row.is_empty() {
                    table.push(row);
                }
                return Ok(table);
            }
            progress(&format!("{what} node {r} -> node {c}"));
            let (value, verification, ws) = measure(&threads, c)?;
            warnings.extend(ws.iter().map(|w| format!("{what} {r}->{c}: {w}")));
            row.push(Cell {
                cpu_node: r,
                mem_node: c,
                value,
                numa_ratio: None,
                verification,
            });
        }
        table.push(row);
    }
    Ok(table)
}

/// Latency from `cpu` (one thread, a chain) to memory on `node`.
fn latency_cell(
    m: &Machine,
    req: &MatrixRequest,
    cpu: u32,
    node: u32,
) -> Result<Measured, PlacementError> {
    let lr = run_latency(
        m,
        &LatencyRequest {
            cpu,
            policy: MemoryPolicy::on_node(node),
            pattern: req.pattern,
            chains: 1,
            buffer_bytes: req.latency_bytes,
            thp: Some(Thp::Off),
            hugetlb: false,
            rule: req.rule.clone(),
        },
    )?;
    Ok((lr.ns, lr.verification, lr.warnings))
}

/// Bandwidth of threads on `cpus` streaming buffers on `node`.
fn bandwidth_cell(
    m: &Machine,
    req: &MatrixRequest,
    cpus: &[u32],
    node: u32,
) -> Result<Measured, PlacementError> {
    let br = run_bandwidth(
        m,
        &BandwidthRequest {
            kernel: req.kernel,
            isa: req.isa,
            workers: cpus
                .iter()
                .map(|&cpu| WorkerPlan {
                    cpu,
                    policy: ArrayPolicies {
                        default: MemoryPolicy::on_node(node),
                        arrays: req.fixed_arrays.clone(),
                    },
                    toucher: None,
                })
                .collect(),
            buffer_bytes: req.bandwidth_bytes,
            thp: Some(Thp::On),
            rule: req.rule.clone(),
        },
    )?;
    Ok((br.gbps, br.verification, br.warnings))
}

/// The bandwidth threads of a CPU node: its first CPU, or all of its CPUs
/// in compact order.
fn node_threads(m: &Machine, req: &MatrixRequest, node: u32) -> Result<Vec<u32>, PlacementError> {
    if req.all_threads_per_node {
        let node_cpus = m.allowed_cpus_of(node);
        Ok(crate::placement::thread_policy::compact_order(
            m, &node_cpus,
        ))
    } else {
        Ok(vec![first_cpu(m, node)?])
    }
}

fn first_cpu(m: &Machine, node: u32) -> Result<u32, PlacementError> {
    m.allowed_cpus_of(node)
        .first()
        .ok_or_else(|| PlacementError::Invalid(format!("node {node} has no allowed CPU")))
}

/// Ratio of each cell's median to its row's local (same node) median; rows
/// without a local column (none here: every CPU node has memory) stay None.
fn set_ratios(table: &mut [Vec<Cell<Figure>>], ratio: impl Fn(f64, f64) -> f64) {
    for row in table.iter_mut() {
        let local = row
            .iter()
            .find(|c| c.cpu_node == c.mem_node)
            .map(|c| c.value.median);
        if let Some(l) = local.filter(|l| *l > 0.0) {
            for c in row.iter_mut() {
                if c.value.median > 0.0 {
                    c.numa_ratio = Some(ratio(l, c.value.median));
                }
            }
        }
    }
}
