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
    check_plan, exceeds_file_memory, ArrayPolicies, BufferDemand, MemoryPolicy, PlacementError, Thp,
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

/// The matrix's whole budget when none is given: about 12 s, shared by
/// the cells.
pub const DEFAULT_TOTAL_BUDGET_S: f64 = 12.0;

/// Each cell's budget (s) when the user gives none: the default total
/// shared by `cells`, from 0.2 s (enough for a precise median) to 1.5 s.
pub fn default_cell_budget_s(cells: usize) -> f64 {
    (DEFAULT_TOTAL_BUDGET_S / cells.max(1) as f64).clamp(0.2, 1.5)
}

/// What a matrix would measure, without measuring (`matrix --list`, also
/// for a machine read from a topology file): its rows and columns, the
/// CPUs each row runs on, the buffers and the measurement time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MatrixPlan {
    /// Rows: the CPU nodes measured.
    pub cpu_nodes: Vec<u32>,
    /// Columns: every allowed memory node.
    pub mem_nodes: Vec<u32>,
    /// Columns without CPUs (CPU-less memory: CXL, HBM, persistent memory).
    pub cpuless_nodes: Vec<u32>,
    pub rows: Vec<PlannedRow>,
    /// Latency cells (rows x columns), 0 when latency is not measured.
    pub latency_cells: usize,
    /// Bandwidth cells, 0 when bandwidth is not measured.
    pub bandwidth_cells: usize,
    /// The chase buffer of a latency cell.
    pub latency_bytes: usize,
    /// Each array of each bandwidth thread.
    pub bandwidth_bytes: usize,
    pub kernel: BandwidthKernel,
    /// Arrays of the kernel, and those kept in place (`--mem b=local`).
    pub arrays: Vec<String>,
    pub fixed_arrays: BTreeMap<String, String>,
    pub pattern: ChasePattern,
    pub budget_per_cell_s: f64,
    /// Cells times their budget: the measurement's time; placing and
    /// touching each cell's buffers comes on top.
    pub measuring_s: f64,
    /// The most memory one cell places at once (its buffers are freed
    /// before the next cell's are placed).
    pub largest_cell_bytes: u64,
    pub warnings: Vec<String>,
}

/// One row of a [`MatrixPlan`]: a CPU node and the CPUs that run on it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedRow {
    pub cpu_node: u32,
    /// The CPU that chases for latency (`None` without latency).
    pub chase_cpu: Option<u32>,
    /// The CPUs that stream for bandwidth (empty without bandwidth).
    pub stream_cpus: Vec<u32>,
}

/// The plan of `req` on `m`: which cells, on which CPUs, with which
/// buffers, and whether they fit in each node's memory (an error naming
/// the node when a cell's buffers do not, as [`run_matrix`] would give).
pub fn plan(m: &Machine, req: &MatrixRequest) -> Result<MatrixPlan, PlacementError> {
    let (rows, cols) = rows_and_columns(m, req)?;
    let phases = buffer_plan(m, req, &rows, &cols)?;
    check_plan(m, &phases, "use a smaller --size")?;
    if !m.is_live() {
        if let Some(e) = exceeds_file_memory(m, &phases, "one cell") {
            return Err(PlacementError::Capacity(format!(
                "{e}: use a smaller --size"
            )));
        }
    }
    let mut planned = Vec::new();
    for &r in &rows {
        planned.push(PlannedRow {
            cpu_node: r,
            chase_cpu: if req.latency {
                Some(first_cpu(m, r)?)
            } else {
                None
            },
            stream_cpus: if req.bandwidth {
                node_threads(m, req, r)?
            } else {
                Vec::new()
            },
        });
    }
    let cells = rows.len() * cols.len();
    let latency_cells = if req.latency { cells } else { 0 };
    let bandwidth_cells = if req.bandwidth { cells } else { 0 };
    let budget = req.rule.budget.as_secs_f64();
    let cpu_nodes = m.cpu_nodes();
    Ok(MatrixPlan {
        cpuless_nodes: cols
            .iter()
            .copied()
            .filter(|&c| !cpu_nodes.contains(c))
            .collect(),
        cpu_nodes: rows,
        mem_nodes: cols,
        rows: planned,
        latency_cells,
        bandwidth_cells,
        latency_bytes: req.latency_bytes,
        bandwidth_bytes: req.bandwidth_bytes,
        kernel: req.kernel,
        arrays: req
            .kernel
            .array_names()
            .iter()
            .map(|a| a.to_string())
            .collect(),
        fixed_arrays: req
            .fixed_arrays
            .iter()
            .map(|(n, p)| (n.clone(), p.to_string()))
            .collect(),
        pattern: req.pattern,
        budget_per_cell_s: budget,
        measuring_s: (latency_cells + bandwidth_cells) as f64 * budget,
        largest_cell_bytes: phases
            .iter()
            .map(|p| p.iter().map(|d| d.bytes).sum::<u64>())
            .max()
            .unwrap_or(0),
        warnings: cache_warnings(m, req),
    })
}

/// Rows (the requested CPU nodes, checked, or every one) and columns.
fn rows_and_columns(
    m: &Machine,
    req: &MatrixRequest,
) -> Result<(Vec<u32>, Vec<u32>), PlacementError> {
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
    Ok((rows, cols))
}

/// The warning when one bandwidth thread's data fits in the cache: the
/// threads of a row share it, so one thread's data is the smallest amount
/// that must outgrow it.
fn cache_warnings(m: &Machine, req: &MatrixRequest) -> Vec<String> {
    if !req.bandwidth {
        return Vec::new();
    }
    crate::measure::environment::cache_fit_warning(
        m,
        req.bandwidth_bytes as u64 * req.kernel.arrays() as u64,
        "one thread's data",
    )
    .into_iter()
    .collect()
}

/// Runs the matrix; `progress` is called before each cell with its name.
pub fn run_matrix(
    m: &Machine,
    req: &MatrixRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<MatrixResult, PlacementError> {
    let (rows, cols) = rows_and_columns(m, req)?;
    check_plan(
        m,
        &buffer_plan(m, req, &rows, &cols)?,
        "use a smaller --size",
    )?;
    let mut warnings = cache_warnings(m, req);
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
