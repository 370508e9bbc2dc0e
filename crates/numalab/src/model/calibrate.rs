//! Calibration: the model's parameters fitted from a numalab report's
//! results.json, with the residual of every fit.
//!
//! Every figure comes from a measurement other than the report's
//! 1..N-thread `scaling`, which is then predicted from them as the check
//! (a model fitted to its own test would pass it by construction):
//!
//! | parameter | fitted from |
//! |---|---|
//! | `read.controller_gbps` | `bandwidth-matrix`: one thread reading its own node (read kernel), mean over nodes; `sizes`' memory point when the matrix ran every CPU of a node (`--full`) |
//! | `write.controller_gbps`, `write.memory_lines` | `sizes`: the write kernel at its memory point, in memory bytes (an ordinary store moves its line twice); else `sweep`'s one-thread local writes (`memory_gbps`, line kernel) |
//! | `hop_time` | `bandwidth-matrix`: local over remote one-thread bandwidth, by hops; `latency-matrix`'s ratios when the bandwidth matrix ran every CPU |
//! | `controller_gbps`, `controller_overrides` | per memory node, the most any measurement moved through it: `loaded-latency`'s unpaced step, a `--full` bandwidth matrix's local cells, `sweep`'s idle cases of several threads on one memory node (with the sweep's own one-thread rates: its line kernels ask other rates than the read kernel); each inverted through the model (the capacity at which it predicts what was measured) |
//! | `link_gbps` | a `--full` bandwidth matrix's one-hop cells, inverted likewise; else a placeholder, said so |
//! | `in_flight` | `loaded-latency`'s unpaced step when it is the measurement that set its controller (the chase's latency is the queue it waits behind there, read off a probe flow that keeps one request in flight); else Little's law, one reader's bandwidth x idle latency / line; else a default |
//!
//! The link bytes per line are assumed (a line and a request header), not
//! measured: nothing in a report counts a link's traffic per thread.
//! A measurement whose threads got about what they ask alone (98% or
//! more) does not saturate anything: it only bounds the capacity from
//! below, and the fit says so.

use super::network::{Flow, Network, Resource, MAX_FLOWS};
use super::params::{AccessTraffic, ModelParams, MAX_GBPS, MAX_IN_FLIGHT, PARAMS_SCHEMA};
use crate::input::{read_text, InputKind};
use crate::machine::Machine;
use crate::text::format::{excerpt, significant};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The report parts calibration reads, as `numalab report --parts` takes
/// them (`scaling` is the check).
pub const REPORT_PARTS: &str = "bandwidth-matrix,latency-matrix,sizes,loaded-latency,sweep,scaling";

/// Most rows or columns of a matrix, and most nodes of a machine.
const MAX_NODES: usize = 1024;
/// Most points of one scaling layout, steps of one curve, mixes of a part.
const MAX_POINTS: usize = 4096;
/// Most steps of a loaded-latency curve (the report's ladder has 6).
const MAX_STEPS: usize = 64;
/// Most sweep runs, and cases of a run, read (more is refused).
const MAX_SWEEP_RUNS: usize = 64;
const MAX_SWEEP_CASES: usize = 100_000;
/// Most measurements one controller is fitted from (loaded-latency's
/// steps aside): the first ones are kept, since each fit costs a few
/// dozen solves of the model.
const MAX_LOADS_PER_NODE: usize = 16;
/// Threads got at least this share of what they ask alone: nothing
/// saturated, and the capacity is only bounded from below.
const SATURATED: f64 = 0.98;
/// Bytes per request; the model's default and every kernel's line.
const LINE: f64 = 64.0;
/// `in_flight` when no idle latency was measured: the AMD note's fit
/// (docs/models/amd-quartet-2006.json).
const DEFAULT_IN_FLIGHT: f64 = 20.0;
/// Rounds of the controller / link / in-flight fits, each given the
/// others' last values.
const MAX_ROUNDS: usize = 12;
/// Below this share of their time on a CPU, measuring threads shared
/// the machine with other work (loaded-latency warns under 90% too).
const BUSY_SHARE: f64 = 0.9;
/// Notes about measurements beside the one a parameter was fitted to.
const MAX_CANDIDATE_NOTES: usize = 8;

/// One fitted figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FittedParameter {
    /// As in the parameter file: `controller_gbps`, `hop_time[1]`,
    /// `controller_gbps[node 2]`.
    pub name: String,
    pub value: f64,
    pub unit: String,
    /// The measurement it was fitted from.
    pub from: String,
    /// (model - measured) / measured for what it was fitted to: the worst
    /// cell for a mean over cells; `None` for a placeholder.
    pub residual: Option<f64>,
}

/// One point of the report's scaling, measured and predicted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingCheck {
    pub threads: usize,
    /// `packed` or `spread`, as the scaling result names its layouts.
    pub layout: String,
    pub measured_gbps: f64,
    pub predicted_gbps: f64,
    /// (predicted - measured) / measured.
    pub error: f64,
}

/// Parameters fitted from a report, and how well they predict its scaling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub params: ModelParams,
    /// The same parameters with the rates the sweep's line kernels asked
    /// alone (its one-thread cases), for predicting the sweeps, which run
    /// those kernels: a line-read thread streams at another rate than the
    /// read kernel the matrix measured. `None` without such cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_kernels: Option<ModelParams>,
    pub fitted: Vec<FittedParameter>,
    pub scaling: Vec<ScalingCheck>,
    /// Mean of |error| over `scaling`; `None` without a scaling part.
    pub mean_abs_error: Option<f64>,
    pub notes: Vec<String>,
}

/// Reads `path` (a report's results.json) and calibrates on `machine`.
pub fn calibrate_file(path: &Path, machine: &Machine) -> Result<Calibration, String> {
    let text = read_text(path, InputKind::ResultsJson).map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a JSON document: {e}", path.display()))?;
    let mut c = calibrate(&v, machine).map_err(|e| format!("{}: {e}", path.display()))?;
    c.params.source = format!("{} ({})", c.params.source, path.display());
    Ok(c)
}

/// Fits the model's parameters from a report's results.json of `machine`
/// and predicts the report's scaling from them.
pub fn calibrate(results: &Value, machine: &Machine) -> Result<Calibration, String> {
    let mut r = Report::new(results, machine)?;
    Fitter::new(&mut r)?.run()
}

// ---------------------------------------------------------------------------
// Reading the report

/// A finite number at `key`.
fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key)?.as_f64().filter(|x| x.is_finite())
}

/// A rate or a time: finite, above 0, below what any machine gives.
fn positive(v: &Value, key: &str) -> Option<f64> {
    num(v, key).filter(|&x| x > 0.0 && x <= MAX_GBPS)
}

/// A figure's median (`{"median": ..}`).
fn figure_median(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(|f| positive(f, "median"))
}

fn id(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|x| u32::try_from(x).ok())
}

/// The array at `key` (missing or null: empty); longer than `max`: an
/// error naming it.
fn list<'a>(v: &'a Value, key: &str, max: usize, what: &str) -> Result<&'a [Value], String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) if a.len() <= max => Ok(a),
        Some(Value::Array(a)) => Err(format!(
            "{what} has {} {key}; calibration reads at most {max}",
            a.len()
        )),
        Some(_) => Err(format!("{what}: {key} is not a list")),
    }
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// The entry of `xs` farthest from `x`, as (x - it) / it.
fn worst_residual(x: f64, xs: &[f64]) -> Option<f64> {
    xs.iter()
        .map(|&m| (x - m) / m)
        .max_by(|a, b| a.abs().total_cmp(&b.abs()))
}

fn gbps(x: f64) -> String {
    format!("{} GB/s", significant(x, 3))
}

fn nodes_text(ids: &[u32]) -> String {
    ids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What is missing, and the report that has it.
fn missing(what: &str, parts: &str) -> String {
    format!(
        "calibration needs {what}, from the report's {parts} part, and results.json has none; run `numalab report --parts {REPORT_PARTS}`"
    )
}

/// A report's results.json, checked against the machine it calibrates.
struct Report<'a> {
    root: &'a Value,
    m: &'a Machine,
    notes: Vec<String>,
}

impl<'a> Report<'a> {
    fn new(root: &'a Value, m: &'a Machine) -> Result<Report<'a>, String> {
        let schema = root.get("schema").and_then(Value::as_str).unwrap_or("");
        if schema != "numalab-report" {
            return Err(format!(
                "not a numalab report's results.json (its schema is '{}'); valid: the results.json `numalab report` writes",
                excerpt(schema, 40)
            ));
        }
        if !root.get("parts").is_some_and(Value::is_object) {
            return Err(
                "results.json has no parts; valid: the results.json `numalab report` writes".into(),
            );
        }
        let ours: Vec<u32> = m.node_ids().iter().collect();
        if ours.len() > MAX_NODES {
            return Err(format!(
                "this machine has {} nodes; calibration takes at most {MAX_NODES}",
                ours.len()
            ));
        }
        let nodes = list(
            root.pointer("/machine").unwrap_or(&Value::Null),
            "nodes",
            MAX_NODES,
            "the report's machine",
        )?;
        if !nodes.is_empty() {
            let mut theirs: Vec<u32> = nodes
                .iter()
                .filter_map(|n| n.get("os_index").and_then(id))
                .collect();
            theirs.sort_unstable();
            if theirs != ours {
                return Err(format!(
                    "the report measured a machine with nodes {} and this one has nodes {}: calibrate on the machine the report measured (or give its topology file)",
                    nodes_text(&theirs),
                    nodes_text(&ours)
                ));
            }
        }
        Ok(Report {
            root,
            m,
            notes: Vec::new(),
        })
    }

    /// A part's result, when it has one; a note when it is not `done`.
    fn part(&mut self, name: &str) -> Option<&'a Value> {
        let p = self.root.get("parts")?.get(name)?;
        let result = p.get("result").filter(|r| r.is_object())?;
        let status = p.get("status").and_then(Value::as_str).unwrap_or("?");
        if status != "done" {
            self.notes.push(format!(
                "{name} is '{}': its measurements so far are used",
                excerpt(status, 20)
            ));
        }
        Some(result)
    }

    fn node_of(&self, cpu: u32) -> Result<u32, String> {
        self.m.node_of_cpu(cpu).ok_or_else(|| {
            format!("the report ran a thread on CPU {cpu}, which this machine does not have: calibrate on the machine the report measured")
        })
    }

    fn known_node(&self, node: u32) -> Result<u32, String> {
        if self.m.node(node).is_some() {
            Ok(node)
        } else {
            Err(format!("the report measured node {node}, which this machine does not have: calibrate on the machine the report measured"))
        }
    }
}

/// One cell of a matrix.
struct Cell {
    cpu: u32,
    mem: u32,
    value: f64,
    threads: usize,
}

/// A matrix part's cells of one kind (`bandwidth` or `latency`).
struct Matrix {
    all_threads: bool,
    cells: Vec<Cell>,
}

fn matrix(r: &Report, part: &Value, key: &str, name: &str) -> Result<Option<Matrix>, String> {
    let rows = list(part, key, MAX_NODES, name)?;
    let mut cells = Vec::new();
    for row in rows {
        let Some(row) = row.as_array() else { continue };
        if row.len() > MAX_NODES {
            return Err(format!(
                "{name} has a row of {} cells; at most {MAX_NODES}",
                row.len()
            ));
        }
        for c in row {
            let (Some(cpu), Some(mem), Some(value)) = (
                c.get("cpu_node").and_then(id),
                c.get("mem_node").and_then(id),
                figure_median(c, "value"),
            ) else {
                continue;
            };
            let threads = c
                .pointer("/verification/workers")
                .and_then(Value::as_array)
                .map_or(1, Vec::len)
                .clamp(1, MAX_FLOWS);
            cells.push(Cell {
                cpu: r.known_node(cpu)?,
                mem: r.known_node(mem)?,
                value,
                threads,
            });
        }
    }
    if cells.is_empty() {
        return Ok(None);
    }
    let all_threads = part.get("threads_per_node").and_then(Value::as_str) == Some("all");
    Ok(Some(Matrix { all_threads, cells }))
}

impl Matrix {
    fn local(&self) -> BTreeMap<u32, f64> {
        self.cells
            .iter()
            .filter(|c| c.cpu == c.mem)
            .map(|c| (c.cpu, c.value))
            .collect()
    }
}

/// One thread's memory-bound figures of the size sweep (its largest point
/// that fits only in memory), program GB/s by kernel.
struct SizesMemory {
    bytes: f64,
    kernels: BTreeMap<String, f64>,
}

fn sizes(part: &Value) -> Result<Option<SizesMemory>, String> {
    if part.get("threads").and_then(Value::as_u64).unwrap_or(1) != 1 {
        return Ok(None);
    }
    let kernels = list(part, "kernels", 64, "sizes")?;
    let names: Vec<&str> = kernels.iter().filter_map(Value::as_str).collect();
    let mut best: Option<SizesMemory> = None;
    for p in list(part, "points", MAX_POINTS, "sizes")? {
        if p.get("fits_in").and_then(Value::as_str) != Some("memory") {
            continue;
        }
        let Some(bytes) = num(p, "bytes") else {
            continue;
        };
        if best.as_ref().is_some_and(|b| b.bytes >= bytes) {
            continue;
        }
        let rates = p.get("gbps").and_then(Value::as_array);
        let kernels = names
            .iter()
            .enumerate()
            .filter_map(|(i, k)| {
                let g = rates?
                    .get(i)?
                    .as_f64()
                    .filter(|g| g.is_finite() && *g > 0.0 && *g <= MAX_GBPS)?;
                Some((k.to_string(), g))
            })
            .collect();
        best = Some(SizesMemory { bytes, kernels });
    }
    Ok(best)
}

/// One thread of a sweep case.
struct SweepThread {
    /// The sweep's `node.core.access.memnode`.
    label: String,
    cpu_node: u32,
    mem: u32,
    write: bool,
    gbps: f64,
    memory_gbps: f64,
}

/// The idle cases of a sweep whose threads each have a CPU of their own.
fn sweep_cases(r: &Report, part: &Value) -> Result<Vec<Vec<SweepThread>>, String> {
    let sweep = part.get("sweep").unwrap_or(&Value::Null);
    let mut out = Vec::new();
    for run in list(sweep, "runs", MAX_SWEEP_RUNS, "sweep")? {
        if !run.get("background").is_none_or(Value::is_null) {
            continue;
        }
        for case in list(run, "cases", MAX_SWEEP_CASES, "a sweep run")? {
            if case
                .get("sharing")
                .and_then(Value::as_str)
                .unwrap_or("none")
                != "none"
            {
                continue;
            }
            let mut threads = Vec::new();
            for t in list(case, "threads", 64, "a sweep case")? {
                let (Some(cpu), Some(mem), Some(access), Some(g), Some(mg)) = (
                    t.get("cpu").and_then(id),
                    t.get("mem").and_then(id),
                    t.get("access").and_then(Value::as_str),
                    positive(t, "gbps"),
                    positive(t, "memory_gbps"),
                ) else {
                    threads.clear();
                    break;
                };
                let cpu_node = r.node_of(cpu)?;
                let label = t.get("label").and_then(Value::as_str).map_or_else(
                    || {
                        format!(
                            "{cpu_node}.?.{}.{mem}",
                            if access == "write" { "w" } else { "r" }
                        )
                    },
                    |l| excerpt(l, 24),
                );
                threads.push(SweepThread {
                    label,
                    cpu_node,
                    mem: r.known_node(mem)?,
                    write: access == "write",
                    gbps: g,
                    memory_gbps: mg,
                });
            }
            if !threads.is_empty() {
                out.push(threads);
            }
        }
    }
    Ok(out)
}

/// One step of a loaded-latency curve.
struct LlStep {
    name: String,
    /// GB/s per injector when paced; `None`: unpaced (`max`).
    pace: Option<f64>,
    /// Memory GB/s of the injectors and the chase together.
    total: f64,
    latency_ns: f64,
}

/// The read mix of a loaded-latency part.
struct LoadedLatency {
    part: &'static str,
    chase_node: u32,
    mem: u32,
    injector_nodes: Vec<u32>,
    idle_ns: f64,
    steps: Vec<LlStep>,
    /// The least share of its wall time the chase ran, and the most the
    /// injectors waited for their CPUs, over the steps: other processes'
    /// load on the machine while it measured.
    chase_share: f64,
    injectors_waited: f64,
}

fn loaded_latency(
    r: &Report,
    name: &'static str,
    part: &Value,
) -> Result<Option<LoadedLatency>, String> {
    let chase = part.get("chase").unwrap_or(&Value::Null);
    let Some(cpu) = chase.get("cpu").and_then(id) else {
        return Ok(None);
    };
    let chase_node = r.node_of(cpu)?;
    let pages: Vec<u32> = chase
        .get("pages_by_node")
        .and_then(Value::as_object)
        .map(|o| o.keys().filter_map(|k| k.parse().ok()).collect())
        .unwrap_or_default();
    let injectors = part.get("injectors").unwrap_or(&Value::Null);
    let policy = injectors
        .get("policy")
        .and_then(Value::as_str)
        .unwrap_or("");
    // The injectors load the chase's controller only where their buffers
    // are bound to one node.
    let mem = match policy.strip_prefix("bind:").map(str::parse::<u32>) {
        Some(Ok(n)) => n,
        _ if pages.len() == 1 && policy.is_empty() => pages[0],
        _ => return Ok(None),
    };
    let mem = r.known_node(mem)?;
    let mut injector_nodes = Vec::new();
    // Each step's flows: the injectors, the chase and its probe.
    for c in list(injectors, "cpus", MAX_FLOWS - 2, name)? {
        let Some(c) = id(c) else { continue };
        injector_nodes.push(r.node_of(c)?);
    }
    if injector_nodes.is_empty() {
        return Ok(None);
    }
    let mixes = list(part, "mixes", MAX_POINTS, name)?;
    let Some(mix) = mixes
        .iter()
        .find(|x| x.get("mix").and_then(Value::as_str) == Some("read"))
    else {
        return Ok(None);
    };
    let Some(idle_ns) = mix.get("idle").and_then(|i| figure_median(i, "latency_ns")) else {
        return Ok(None);
    };
    let mut steps = Vec::new();
    let (mut chase_share, mut injectors_waited) = (1.0f64, 0.0f64);
    for s in list(mix, "steps", MAX_STEPS, name)? {
        if let Some(x) = num(s, "cpu_share") {
            chase_share = chase_share.min(x);
        }
        if let Some(x) = num(s, "injectors_waited") {
            injectors_waited = injectors_waited.max(x);
        }
        let Some(latency_ns) = figure_median(s, "latency_ns") else {
            continue;
        };
        let load = s.get("load").unwrap_or(&Value::Null);
        let pace = match load.get("kind").and_then(Value::as_str) {
            Some("max") => None,
            Some("rate") => match s
                .get("per_thread_gbps")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect::<Vec<_>>())
            {
                Some(a) if !a.is_empty() && a.iter().all(|g| g.is_finite() && *g > 0.0) => {
                    Some(mean(&a))
                }
                _ => continue,
            },
            _ => continue,
        };
        // Reports before total_memory_gbps was kept: the chase's own line
        // per load added to what the injectors moved.
        let total = positive(s, "total_memory_gbps")
            .or_else(|| positive(s, "injected_memory_gbps").map(|g| g + LINE / latency_ns));
        let Some(total) = total else { continue };
        steps.push(LlStep {
            name: s
                .get("step")
                .and_then(Value::as_str)
                .map_or("?".into(), |t| excerpt(t, 30)),
            pace,
            total,
            latency_ns,
        });
    }
    Ok(Some(LoadedLatency {
        part: name,
        chase_node,
        mem,
        injector_nodes,
        idle_ns,
        steps,
        chase_share,
        injectors_waited,
    }))
}

// ---------------------------------------------------------------------------
// The model evaluated

/// What one thread of each access does alone.
#[derive(Debug, Clone, Copy)]
struct Rates {
    /// GB/s a local reader loads its controller with.
    read: f64,
    /// GB/s a local writer loads its controller with (memory bytes).
    write: f64,
    /// Lines the memory moves per line written.
    write_lines: f64,
}

/// Everything but the capacities, as fitted so far.
#[derive(Debug, Clone)]
struct Base {
    rates: Rates,
    hop_time: Vec<f64>,
    in_flight: f64,
}

fn traffic(
    controller: f64,
    lines: f64,
    hop1: f64,
    out_bytes: f64,
    back_bytes: f64,
) -> AccessTraffic {
    // Link loads at one hop from the bytes per line crossing each way: the
    // thread alone there runs at its local line rate over the hop factor.
    let lines_per_s = controller / lines / LINE / hop1;
    AccessTraffic {
        controller_gbps: controller,
        memory_lines: lines,
        toward_memory_gbps: lines_per_s * out_bytes,
        toward_thread_gbps: lines_per_s * back_bytes,
        measured_hops: 1,
    }
}

/// Request header bytes each way per line: what the model counts on a
/// link besides the line itself.
const HEADER: f64 = 8.0;

impl Base {
    fn params(
        &self,
        rates: Rates,
        controller: f64,
        overrides: &BTreeMap<u32, f64>,
        link: f64,
    ) -> ModelParams {
        let hop1 = self.hop_time.get(1).copied().unwrap_or(1.0);
        ModelParams {
            schema: PARAMS_SCHEMA.into(),
            name: String::new(),
            source: String::new(),
            links: None,
            link_gbps: link,
            link_overrides: Vec::new(),
            controller_gbps: controller,
            controller_overrides: overrides.iter().map(|(n, g)| (n.to_string(), *g)).collect(),
            line_bytes: LINE,
            // A read sends a request and gets its line back; a write sends
            // its line (and a request) and fetches it first.
            read: traffic(rates.read, 1.0, hop1, HEADER, LINE),
            write: traffic(rates.write, rates.write_lines, hop1, LINE + HEADER, LINE),
            hop_time: self.hop_time.clone(),
            in_flight: self.in_flight,
            notes: Vec::new(),
        }
    }
}

/// Threads loading one memory node's controller, and what it moved.
struct Load {
    source: String,
    node: u32,
    flows: Vec<Flow>,
    /// Memory GB/s through the controller.
    measured: f64,
    /// What this experiment's threads did alone, when it measured that
    /// (the sweep's line kernels differ from the matrix's read kernel).
    rates: Option<Rates>,
    /// A loaded-latency step's chase.
    chase: Option<Chase>,
    /// An unpaced loaded-latency step: the one `in_flight` may be fitted to.
    unpaced_curve: bool,
}

/// A loaded-latency step's chase as the model sees it. The chase itself is
/// a paced flow (its traffic); its latency is read off a probe beside it,
/// paced so slowly that it keeps one request in flight whatever
/// `in_flight` is (the network scales a paced flow's requests with its
/// rate), so that its wait per request is what a dependent load waits.
#[derive(Debug, Clone, Copy)]
struct Chase {
    /// The probe's index in the flows.
    probe: usize,
    /// The probe's pace, GB/s.
    pace: f64,
    idle_ns: f64,
    /// The measured latency over idle.
    measured: f64,
}

impl Chase {
    /// The probe's pace for readers of `read` GB/s: one request in flight
    /// up to the most `in_flight` allowed.
    fn pace(read: f64) -> f64 {
        read / (2.0 * MAX_IN_FLIGHT)
    }

    /// The chase's predicted latency over idle: idle plus the probe's wait.
    fn ratio(&self, p: &super::Prediction) -> f64 {
        let wait = p.flows[self.probe].ns_per_line - LINE / self.pace;
        1.0 + wait.max(0.0) / self.idle_ns
    }
}

fn stream(label: String, cpu_node: u32, mem: u32, write: bool) -> Flow {
    Flow::stream(label, cpu_node, mem, write)
}

fn paced(label: String, cpu_node: u32, mem: u32, gbps: f64) -> Flow {
    Flow {
        label,
        cpu_node,
        memory: vec![(mem, 1.0)],
        write_share: 0.0,
        pace_gbps: Some(gbps),
    }
}

/// `flows` under `p`.
fn predict(m: &Machine, p: &ModelParams, flows: &[Flow]) -> Result<super::Prediction, String> {
    Network::new(m, p.clone())?.predict(flows)
}

fn controller_load(m: &Machine, p: &ModelParams, l: &Load) -> Result<f64, String> {
    let pr = predict(m, p, &l.flows)?;
    // The probe is the model's instrument, not the machine's traffic.
    let probe = l.chase.map_or(0.0, |c| pr.flows[c.probe].gbps);
    Ok(Network::load_of(&pr, Resource::Controller { node: l.node }) - probe)
}

/// The `x` in `[lo, hi]` where the increasing `f` reaches `target`, by
/// bisection on a log scale; an end when `f` stays beyond it there.
fn solve_increasing(
    lo: f64,
    hi: f64,
    target: f64,
    mut f: impl FnMut(f64) -> Result<f64, String>,
) -> Result<f64, String> {
    let (mut a, mut b) = (lo.ln(), hi.ln());
    if f(lo)? >= target {
        return Ok(lo);
    }
    if f(hi)? <= target {
        return Ok(hi);
    }
    for _ in 0..60 {
        if b - a < 1e-7 {
            break;
        }
        let mid = 0.5 * (a + b);
        if f(mid.exp())? < target {
            a = mid;
        } else {
            b = mid;
        }
    }
    Ok((0.5 * (a + b)).exp())
}

/// A capacity fitted from one measurement.
#[derive(Debug, Clone, Copy)]
struct Capacity {
    gbps: f64,
    /// The measurement saturated the resource: `gbps` explains it; else it
    /// is only a lower bound.
    point: bool,
    /// What the threads asked (the model with an unlimited resource).
    asked: f64,
}

/// The capacity of `l`'s controller at which the model gives what was
/// measured, with every other resource as `with` sets it.
fn fit_controller(m: &Machine, base: &Base, l: &Load, link: f64) -> Result<Capacity, String> {
    let rates = l.rates.unwrap_or(base.rates);
    let at = |c: f64| base.params(rates, c, &BTreeMap::new(), link);
    let load = |c: f64| controller_load(m, &at(c), l).map_err(|e| format!("{}: {e}", l.source));
    let asked = load(MAX_GBPS)?;
    let point = l.measured < SATURATED * asked;
    let target = if point {
        l.measured
    } else {
        SATURATED * asked.min(l.measured)
    };
    let c = solve_increasing(target.max(1e-6), MAX_GBPS, target, load)?;
    Ok(Capacity {
        gbps: if point { c } else { c.max(l.measured) },
        point,
        asked,
    })
}

// ---------------------------------------------------------------------------
// The fit

/// What the loaded-latency curve says of `in_flight`.
#[derive(Debug, Clone, Copy)]
enum InFlight {
    /// No unpaced step set its node's controller.
    NoCurve,
    /// The chase's latency at the unpaced step (`load`) lies outside what
    /// 1 to [`MAX_IN_FLIGHT`] requests give: `lo` to `hi` x idle.
    OutOfReach {
        load: usize,
        lo: f64,
        hi: f64,
    },
    Fitted {
        n: f64,
        load: usize,
    },
}

struct Fitter<'a> {
    m: &'a Machine,
    base: Base,
    /// Where `base.rates` and `hop_time` came from, with residuals.
    fitted: Vec<FittedParameter>,
    notes: Vec<String>,
    loads: Vec<Load>,
    /// `--full` matrix cells of one hop: (label, cpu node, mem node,
    /// threads, measured GB/s).
    link_cells: Vec<(String, u32, u32, usize, f64)>,
    /// Little's law's `in_flight` and what it came from.
    little: Option<(f64, String)>,
    scaling: Option<&'a Value>,
    loaded: Vec<LoadedLatency>,
    /// What the sweep's line kernels did alone, where it measured that.
    sweep_rates: Option<Rates>,
    source: String,
    hostname: String,
    when: String,
}

impl<'a> Fitter<'a> {
    fn new(r: &mut Report<'a>) -> Result<Fitter<'a>, String> {
        let m = r.m;
        let bw = match r.part("bandwidth-matrix") {
            Some(p) => matrix(r, p, "bandwidth", "bandwidth-matrix")?,
            None => None,
        };
        let lat = match r.part("latency-matrix") {
            Some(p) => matrix(r, p, "latency", "latency-matrix")?,
            None => None,
        };
        let sz = match r.part("sizes") {
            Some(p) => sizes(p)?,
            None => None,
        };
        let sweep = match r.part("sweep") {
            Some(p) => sweep_cases(r, p)?,
            None => Vec::new(),
        };
        let mut loaded = Vec::new();
        for name in ["loaded-latency-local", "loaded-latency-far"] {
            if let Some(p) = r.part(name) {
                loaded.extend(loaded_latency(r, name, p)?);
            }
        }
        let scaling = r.part("scaling");
        let mut fitted = Vec::new();
        let mut notes = std::mem::take(&mut r.notes);

        // One reader alone.
        let one_thread = bw.as_ref().filter(|b| !b.all_threads);
        let read = if let Some(b) = one_thread {
            let local: Vec<f64> = b.local().into_values().collect();
            if local.is_empty() {
                return Err(missing(
                    "one thread's local read bandwidth",
                    "bandwidth-matrix",
                ));
            }
            let x = mean(&local);
            fitted.push(FittedParameter {
                name: "read.controller_gbps".into(),
                value: x,
                unit: "GB/s".into(),
                from: format!(
                    "bandwidth-matrix: one thread reading its own node's memory (read kernel), mean of {} node{}",
                    local.len(),
                    if local.len() == 1 { "" } else { "s" }
                ),
                residual: worst_residual(x, &local),
            });
            x
        } else if let Some(x) = sz.as_ref().and_then(|s| s.kernels.get("read").copied()) {
            fitted.push(FittedParameter {
                name: "read.controller_gbps".into(),
                value: x,
                unit: "GB/s".into(),
                from: "sizes: one thread reading its local memory (read kernel, largest buffer)"
                    .into(),
                residual: Some(0.0),
            });
            x
        } else {
            return Err(missing(
                "one thread's local read bandwidth",
                "bandwidth-matrix (or, with --full, sizes)",
            ));
        };

        // One writer alone, in memory bytes.
        let sweep_alone = |write: bool| -> Vec<&SweepThread> {
            sweep
                .iter()
                .filter(|c| c.len() == 1 && c[0].cpu_node == c[0].mem && c[0].write == write)
                .map(|c| &c[0])
                .collect()
        };
        let (write, write_lines, lines_from) = if let Some(x) =
            sz.as_ref().and_then(|s| s.kernels.get("write").copied())
        {
            // The write kernel's ordinary stores: 8n program bytes, 16n
            // memory bytes (sys::kernels::ByteCount).
            let w = 2.0 * x;
            fitted.push(FittedParameter {
                name: "write.controller_gbps".into(),
                value: w,
                unit: "GB/s".into(),
                from: format!(
                    "sizes: one thread writing its local memory (write kernel, largest buffer): {} of program bytes, twice that in memory bytes (write-allocate)",
                    gbps(x)
                ),
                residual: Some(0.0),
            });
            (
                w,
                2.0,
                "sizes' write kernel: 16 memory bytes per 8 program bytes (ordinary stores)"
                    .to_string(),
            )
        } else {
            let w = sweep_alone(true);
            if w.is_empty() {
                return Err(missing(
                    "one thread's local write bandwidth",
                    "sizes (or sweep)",
                ));
            }
            let mg: Vec<f64> = w.iter().map(|t| t.memory_gbps).collect();
            let x = mean(&mg);
            let lines = (mean(&w.iter().map(|t| t.memory_gbps / t.gbps).collect::<Vec<_>>()) * 2.0)
                .round()
                / 2.0;
            fitted.push(FittedParameter {
                name: "write.controller_gbps".into(),
                value: x,
                unit: "GB/s".into(),
                from: format!(
                    "sweep: one thread writing its own node's memory (line-write kernel, memory bytes), mean of {} case{}",
                    mg.len(),
                    if mg.len() == 1 { "" } else { "s" }
                ),
                residual: worst_residual(x, &mg),
            });
            (
                x,
                lines.clamp(0.5, 4.0),
                "sweep's one-thread local writes: memory_gbps over gbps, to the nearest half line"
                    .to_string(),
            )
        };
        fitted.push(FittedParameter {
            name: "write.memory_lines".into(),
            value: write_lines,
            unit: "lines".into(),
            from: lines_from,
            residual: None,
        });

        let hop_time = hop_time(m, one_thread, lat.as_ref(), &mut fitted, &mut notes);
        let rates = Rates {
            read,
            write,
            write_lines,
        };

        // Little's law: the lines one reader keeps in flight are its line
        // rate times the time each takes.
        let idle = lat
            .as_ref()
            .map(|l| l.local().into_values().collect::<Vec<f64>>())
            .filter(|v| !v.is_empty())
            .map(|v| (mean(&v), "latency-matrix's local latency".to_string()))
            .or_else(|| {
                loaded
                    .iter()
                    .find(|l| l.mem == l.chase_node)
                    .map(|l| (l.idle_ns, format!("{}'s idle latency", l.part)))
            });
        let little = idle.map(|(ns, from)| {
            (
                (read * ns / LINE).clamp(1.0, MAX_IN_FLIGHT),
                format!(
                    "Little's law: one reader's {} x {} ns ({from}) / {LINE} B",
                    gbps(read),
                    significant(ns, 3)
                ),
            )
        });

        // Every measurement that loads one controller.
        let mut loads = Vec::new();
        for l in &loaded {
            for (i, s) in l.steps.iter().enumerate() {
                let mut flows: Vec<Flow> = l
                    .injector_nodes
                    .iter()
                    .enumerate()
                    .map(|(k, &n)| match s.pace {
                        None => stream(format!("injector {k}"), n, l.mem, false),
                        Some(g) => paced(format!("injector {k}"), n, l.mem, g),
                    })
                    .collect();
                flows.push(paced("chase".into(), l.chase_node, l.mem, LINE / l.idle_ns));
                let pace = Chase::pace(read);
                flows.push(paced("probe".into(), l.chase_node, l.mem, pace));
                loads.push(Load {
                    source: format!(
                        "{}: step {} ({} injector{} and the chase on node {}'s memory)",
                        l.part,
                        s.name,
                        l.injector_nodes.len(),
                        if l.injector_nodes.len() == 1 { "" } else { "s" },
                        l.mem
                    ),
                    node: l.mem,
                    measured: s.total,
                    flows,
                    rates: None,
                    chase: Some(Chase {
                        probe: l.injector_nodes.len() + 1,
                        pace,
                        idle_ns: l.idle_ns,
                        measured: s.latency_ns / l.idle_ns,
                    }),
                    unpaced_curve: s.pace.is_none() && i + 1 == l.steps.len(),
                });
            }
        }
        let mut link_cells = Vec::new();
        if let Some(b) = bw.as_ref().filter(|b| b.all_threads) {
            for c in &b.cells {
                let label = format!(
                    "bandwidth-matrix (every CPU): {} thread{} of node {} reading node {}",
                    c.threads,
                    if c.threads == 1 { "" } else { "s" },
                    c.cpu,
                    c.mem
                );
                if c.cpu == c.mem {
                    loads.push(Load {
                        source: label,
                        node: c.mem,
                        flows: (0..c.threads)
                            .map(|k| stream(format!("thread {k}"), c.cpu, c.mem, false))
                            .collect(),
                        measured: c.value,
                        rates: None,
                        chase: None,
                        unpaced_curve: false,
                    });
                } else if m.hops_between(c.cpu, c.mem) == Some(1) {
                    link_cells.push((label, c.cpu, c.mem, c.threads, c.value));
                }
            }
        }
        // The sweep's line kernels ask other rates than the read kernel:
        // its own cases alone say what its threads ask.
        let alone = |write: bool| -> Option<f64> {
            let v: Vec<f64> = sweep_alone(write).iter().map(|t| t.memory_gbps).collect();
            (!v.is_empty()).then(|| mean(&v))
        };
        let sweep_rates = match (alone(false), alone(true)) {
            (Some(r), Some(w)) => Some(Rates {
                read: r,
                write: w,
                write_lines: rates.write_lines,
            }),
            (Some(r), None) => Some(Rates { read: r, ..rates }),
            _ => None,
        };
        for case in sweep.iter().filter(|c| c.len() >= 2) {
            let node = case[0].mem;
            if case.iter().any(|t| t.mem != node) {
                continue;
            }
            let labels: Vec<&str> = case.iter().map(|t| t.label.as_str()).collect();
            loads.push(Load {
                source: format!(
                    "sweep, idle: {} (line kernels, memory bytes)",
                    labels.join(" ")
                ),
                node,
                flows: case
                    .iter()
                    .enumerate()
                    .map(|(k, t)| stream(format!("thread {k}"), t.cpu_node, t.mem, t.write))
                    .collect(),
                measured: case.iter().map(|t| t.memory_gbps).sum(),
                rates: sweep_rates,
                chase: None,
                unpaced_curve: false,
            });
        }
        // Bounded per node, the curves' steps aside: the first ones in the
        // order above (loaded-latency, the matrix, the sweep).
        let mut per_node: BTreeMap<u32, usize> = BTreeMap::new();
        loads.retain(|l| {
            if l.chase.is_some() {
                return true;
            }
            let n = per_node.entry(l.node).or_default();
            *n += 1;
            *n <= MAX_LOADS_PER_NODE
        });
        if !loads.iter().any(|l| l.chase.is_none() || l.unpaced_curve) {
            return Err(missing(
                "a measurement of several threads loading one memory node",
                "loaded-latency (or sweep)",
            ));
        }
        let hostname = r
            .root
            .pointer("/environment/hostname")
            .and_then(Value::as_str)
            .map_or("?".to_string(), |h| excerpt(h, 60));
        let when = r
            .root
            .pointer("/environment/timestamp_utc")
            .and_then(Value::as_str)
            .map_or("?".to_string(), |h| excerpt(h, 40));
        Ok(Fitter {
            m,
            base: Base {
                rates,
                hop_time,
                in_flight: little.as_ref().map_or(DEFAULT_IN_FLIGHT, |l| l.0),
            },
            fitted,
            notes,
            loads,
            link_cells,
            little,
            scaling,
            loaded,
            sweep_rates,
            source: format!("numalab report of {hostname} ({when})"),
            hostname,
            when,
        })
    }

    /// Each node's controller: the most any of its measurements implies.
    fn controllers(&self, link: f64) -> Result<BTreeMap<u32, (Capacity, usize)>, String> {
        let mut best: BTreeMap<u32, (Capacity, usize)> = BTreeMap::new();
        for (i, l) in self.loads.iter().enumerate() {
            // The paced steps of a curve bound nothing a faster step does
            // not: only its unpaced step is fitted.
            if l.chase.is_some() && !l.unpaced_curve {
                continue;
            }
            let c = fit_controller(self.m, &self.base, l, link)?;
            // A controller carries at least what any measurement moved
            // through it: the largest capacity wins, a fit over a bound at
            // equal capacity.
            let better = best
                .get(&l.node)
                .is_none_or(|(b, _)| c.gbps > b.gbps || (c.gbps == b.gbps && c.point && !b.point));
            if better {
                best.insert(l.node, (c, i));
            }
        }
        Ok(best)
    }

    /// The default controller and the nodes that differ from it.
    fn capacities(
        &self,
        best: &BTreeMap<u32, (Capacity, usize)>,
    ) -> Result<(f64, BTreeMap<u32, f64>), String> {
        let mut points: Vec<f64> = best
            .values()
            .filter(|b| b.0.point)
            .map(|b| b.0.gbps)
            .collect();
        if points.is_empty() {
            points = best.values().map(|b| b.0.gbps).collect();
        }
        // The nodes' median is the default; nodes 5% off it get their own.
        let Some(default) = crate::measure::stats::median(points) else {
            return Err(missing(
                "a measurement of several threads loading one memory node",
                "loaded-latency (or sweep)",
            ));
        };
        let overrides = best
            .iter()
            .filter(|(_, (c, _))| {
                (c.point && (c.gbps / default - 1.0).abs() > 0.05) || (!c.point && c.gbps > default)
            })
            .map(|(&n, (c, _))| (n, c.gbps))
            .collect();
        Ok((default, overrides))
    }

    /// The link capacity the `--full` matrix's one-hop cells imply, with
    /// the controllers as fitted: the capacity, its residual and the
    /// index of the cell it came from.
    fn link(
        &self,
        default: f64,
        overrides: &BTreeMap<u32, f64>,
    ) -> Result<Option<(Capacity, f64, usize)>, String> {
        let mut fits = Vec::new();
        for (i, (_, cpu, mem, threads, measured)) in self.link_cells.iter().enumerate() {
            let flows: Vec<Flow> = (0..*threads)
                .map(|k| stream(format!("thread {k}"), *cpu, *mem, false))
                .collect();
            let at = |l: f64| self.base.params(self.base.rates, default, overrides, l);
            let total = |l: f64| -> Result<f64, String> {
                Ok(predict(self.m, &at(l), &flows)?
                    .flows
                    .iter()
                    .map(|f| f.gbps)
                    .sum())
            };
            let asked = total(MAX_GBPS)?;
            let point = *measured < SATURATED * asked;
            let target = if point {
                *measured
            } else {
                SATURATED * asked.min(*measured)
            };
            let l = solve_increasing(target.max(1e-6), MAX_GBPS, target, total)?;
            let residual = (total(l)? - measured) / measured;
            fits.push((
                Capacity {
                    gbps: l,
                    point,
                    asked,
                },
                residual,
                i,
            ));
        }
        // Saturating cells: their median. Else the tightest bound, the
        // largest.
        let mut points: Vec<_> = fits.iter().filter(|f| f.0.point).copied().collect();
        points.sort_by(|a, b| a.0.gbps.total_cmp(&b.0.gbps));
        if !points.is_empty() {
            return Ok(Some(points[points.len() / 2]));
        }
        Ok(fits
            .into_iter()
            .max_by(|a, b| a.0.gbps.total_cmp(&b.0.gbps)))
    }

    /// `in_flight` from the unpaced loaded-latency step that set its
    /// node's controller (it saturated it, and nothing implies more): the
    /// queue the chase waits behind grows with the requests the injectors
    /// keep there.
    fn in_flight(
        &self,
        p: &ModelParams,
        best: &BTreeMap<u32, (Capacity, usize)>,
    ) -> Result<InFlight, String> {
        let Some((i, l, chase)) = self.loads.iter().enumerate().find_map(|(i, l)| {
            let chase = l.chase?;
            let set_it = best.get(&l.node).is_some_and(|b| b.0.point && b.1 == i);
            (l.unpaced_curve && set_it).then_some((i, l, chase))
        }) else {
            return Ok(InFlight::NoCurve);
        };
        let ratio = |n: f64| -> Result<f64, String> {
            let mut q = p.clone();
            q.in_flight = n;
            Ok(chase.ratio(&predict(self.m, &q, &l.flows)?))
        };
        let (lo, hi) = (ratio(1.0)?, ratio(MAX_IN_FLIGHT)?);
        if !(lo..=hi).contains(&chase.measured) {
            return Ok(InFlight::OutOfReach { load: i, lo, hi });
        }
        let n = solve_increasing(1.0, MAX_IN_FLIGHT, chase.measured, ratio)?;
        Ok(InFlight::Fitted { n, load: i })
    }

    fn run(mut self) -> Result<Calibration, String> {
        let m = self.m;
        let mut link = MAX_GBPS;
        let mut from_curve = InFlight::NoCurve;
        let mut link_fit = None;
        let mut best = BTreeMap::new();
        let (mut default, mut overrides) = (0.0, BTreeMap::new());
        // Each of controllers, links and in_flight depends on the others:
        // refit each from the others' last values until none moves.
        for _ in 0..MAX_ROUNDS {
            best = self.controllers(link)?;
            (default, overrides) = self.capacities(&best)?;
            link_fit = self.link(default, &overrides)?;
            let new_link = link_fit.map_or(MAX_GBPS, |l| l.0.gbps);
            let p = self
                .base
                .params(self.base.rates, default, &overrides, new_link);
            from_curve = self.in_flight(&p, &best)?;
            let new_in_flight = match from_curve {
                InFlight::Fitted { n, .. } => n,
                _ => self.little.as_ref().map_or(DEFAULT_IN_FLIGHT, |l| l.0),
            };
            let moved = (new_link / link - 1.0)
                .abs()
                .max((new_in_flight / self.base.in_flight - 1.0).abs());
            link = new_link;
            self.base.in_flight = new_in_flight;
            if moved < 1e-4 {
                break;
            }
        }
        let mut fitted = std::mem::take(&mut self.fitted);
        let mut notes = std::mem::take(&mut self.notes);

        // Controllers, with every measurement's residual under the fit.
        let home = best
            .iter()
            .find(|(_, (c, _))| (c.gbps - default).abs() <= 1e-9 * default)
            .map(|(&n, _)| n);
        for (&node, (c, i)) in &best {
            let l = &self.loads[*i];
            let is_default = !overrides.contains_key(&node);
            if is_default && Some(node) != home {
                continue;
            }
            let p = self.base.params(
                l.rates.unwrap_or(self.base.rates),
                c.gbps,
                &BTreeMap::new(),
                link,
            );
            let residual = (controller_load(m, &p, l)? - l.measured) / l.measured;
            let what = if c.point {
                format!("{}: {} through the controller", l.source, gbps(l.measured))
            } else {
                format!(
                    "{}: {} through the controller, {:.0}% of what its threads ask: not saturated, a lower bound",
                    l.source,
                    gbps(l.measured),
                    100.0 * l.measured / c.asked
                )
            };
            fitted.push(FittedParameter {
                name: if is_default {
                    "controller_gbps".into()
                } else {
                    format!("controller_gbps[node {node}]")
                },
                value: c.gbps,
                unit: "GB/s".into(),
                from: what,
                residual: Some(residual),
            });
        }
        let without: Vec<u32> = m
            .memory_nodes()
            .iter()
            .filter(|n| !best.contains_key(n))
            .collect();
        if !without.is_empty() && !best.is_empty() {
            notes.push(format!(
                "no measurement loaded the controller of node{} {}: {} assumed, as node {}'s",
                if without.len() == 1 { "" } else { "s" },
                nodes_text(&without),
                gbps(default),
                home.map_or("?".into(), |h| h.to_string())
            ));
        }
        if best.values().all(|(c, _)| !c.point) {
            notes.push(
                "no measurement saturated a memory controller (its threads got 98% or more of what they ask alone): controller_gbps is the least capacity that explains them, and the machine may carry more; a report with more CPUs loading one node (loaded-latency's injectors, sweep's cases) would fit it"
                    .into(),
            );
        }
        let params_of = |link: f64| self.base.params(self.base.rates, default, &overrides, link);
        let mut shown = 0;
        let mut left = 0;
        for (i, l) in self.loads.iter().enumerate() {
            if best.values().any(|b| b.1 == i) || (l.chase.is_some() && !l.unpaced_curve) {
                continue;
            }
            let c = fit_controller(m, &self.base, l, link)?;
            let rates = l.rates.unwrap_or(self.base.rates);
            let fit = self.base.params(rates, default, &overrides, link);
            let predicted = controller_load(m, &fit, l)?;
            if shown == MAX_CANDIDATE_NOTES {
                left += 1;
                continue;
            }
            shown += 1;
            notes.push(format!(
                "{}: {} measured, {} predicted ({:+.1}%); by itself it implies a controller of {}{}",
                l.source,
                gbps(l.measured),
                gbps(predicted),
                100.0 * (predicted - l.measured) / l.measured,
                if c.point { "" } else { "at least " },
                gbps(c.gbps)
            ));
        }
        if left > 0 {
            notes.push(format!(
                "and {left} more measurements of controllers, not shown"
            ));
        }

        // Links.
        let multi = m.memory_nodes().len() > 1;
        let link_gbps = match link_fit {
            Some((c, residual, i)) => {
                let cell = &self.link_cells[i];
                fitted.push(FittedParameter {
                    name: "link_gbps".into(),
                    value: c.gbps,
                    unit: "GB/s".into(),
                    from: if c.point {
                        format!("{}: {} (median of the one-hop cells)", cell.0, gbps(cell.4))
                    } else {
                        format!("{}: {}, not saturated: a lower bound", cell.0, gbps(cell.4))
                    },
                    residual: Some(residual),
                });
                c.gbps
            }
            None => {
                let placeholder = overrides.values().fold(default, |a, &b| a.max(b));
                fitted.push(FittedParameter {
                    name: "link_gbps".into(),
                    value: placeholder,
                    unit: "GB/s".into(),
                    from: "placeholder: the largest controller's capacity".into(),
                    residual: None,
                });
                notes.push(if multi {
                    "link_gbps is not measured: one thread per node does not fill a link; the placeholder (a link as fast as the largest controller) is a guess that decides remote cases, and `numalab report --full --parts bandwidth-matrix` (every CPU of a node reading each node) fits it".into()
                } else {
                    "one memory node: no link to measure; link_gbps is a placeholder no prediction on this machine uses".into()
                });
                placeholder
            }
        };
        if multi {
            notes.push(format!(
                "link loads per line are assumed, not measured: a read sends {HEADER} B and gets its {LINE} B line back, a write sends its line and {HEADER} B and fetches the line first; probes to third nodes are not counted"
            ));
        }

        // in_flight.
        if let InFlight::Fitted { n, load } = from_curve {
            let l = &self.loads[load];
            let chase = l.chase.ok_or("in_flight was fitted without a chase")?;
            let predicted = chase.ratio(&predict(m, &params_of(link), &l.flows)?);
            fitted.push(FittedParameter {
                name: "in_flight".into(),
                value: n,
                unit: "requests".into(),
                from: format!(
                    "{}: the chase's latency {:.2}x idle with the controller saturated",
                    l.source, chase.measured
                ),
                residual: Some((predicted - chase.measured) / chase.measured),
            });
            if let Some((little, _)) = &self.little {
                notes.push(format!(
                    "in_flight by Little's law (one reader's bandwidth x idle latency / line) would be {}",
                    significant(*little, 3)
                ));
            }
        } else {
            let why = match from_curve {
                InFlight::OutOfReach { load, lo, hi } => {
                    let l = &self.loads[load];
                    format!(
                        "{}: the chase's latency, {:.2}x idle, lies outside the {:.2}x to {:.2}x the model gives with 1 to {MAX_IN_FLIGHT} requests in flight",
                        l.source,
                        l.chase.map_or(f64::NAN, |c| c.measured),
                        lo,
                        hi
                    )
                }
                _ if self.loaded.is_empty() => {
                    "the report has no loaded-latency curve of the read mix".to_string()
                }
                _ => "no loaded-latency curve's unpaced step saturated its controller (as much as the other measurements imply), so none places the queue".to_string(),
            };
            match &self.little {
                Some((n, from)) => {
                    fitted.push(FittedParameter {
                        name: "in_flight".into(),
                        value: *n,
                        unit: "requests".into(),
                        from: from.clone(),
                        residual: None,
                    });
                    notes.push(format!("in_flight from Little's law: {why}"));
                }
                None => {
                    fitted.push(FittedParameter {
                        name: "in_flight".into(),
                        value: DEFAULT_IN_FLIGHT,
                        unit: "requests".into(),
                        from: "default: the AMD note's fit (docs/models/amd-quartet-2006.json)"
                            .into(),
                        residual: None,
                    });
                    notes.push(format!(
                        "in_flight is a default: the report measured no idle latency for Little's law, and {why}"
                    ));
                }
            }
        }

        let mut params = params_of(link_gbps);
        params.name = format!(
            "{}, calibrated from its numalab report of {}",
            self.hostname, self.when
        );
        params.source = self.source.clone();
        params.notes = fitted
            .iter()
            .map(|f| format!("{}: {}", f.name, f.from))
            .collect();
        params.check()?;
        let line_kernels = match self.sweep_rates {
            Some(r) => {
                let mut p = self.base.params(r, default, &overrides, link_gbps);
                p.name = format!("{}, the sweep's line kernels", params.name);
                p.source = params.source.clone();
                p.notes = vec![format!(
                    "the rates of the sweep's one-thread cases (line kernels, memory bytes): read {}, write {}",
                    gbps(r.read),
                    gbps(r.write)
                )];
                p.check()?;
                Some(p)
            }
            None => None,
        };

        // Other processes' load is in every figure of the report, and the
        // model cannot predict it: the loaded-latency curve shows it.
        for ll in &self.loaded {
            if ll.chase_share < BUSY_SHARE || ll.injectors_waited > 1.0 - BUSY_SHARE {
                notes.push(format!(
                    "the machine was busy while the report measured: in {}, the chase ran as little as {:.0}% of its wall time and the injectors waited up to {:.0}% of theirs for CPUs other processes held; their load is in every figure (the scaling's too), and the model does not predict it: measure again on a quiet machine",
                    ll.part,
                    100.0 * ll.chase_share,
                    100.0 * ll.injectors_waited
                ));
                break;
            }
        }

        // How the model does on each loaded-latency curve's chase: its
        // latency rises only by queueing at the controller.
        for ll in &self.loaded {
            let mut errs = Vec::new();
            for l in self.loads.iter().filter(|l| l.source.starts_with(ll.part)) {
                let Some(chase) = l.chase else { continue };
                let predicted = chase.ratio(&predict(m, &params, &l.flows)?);
                errs.push(((predicted - chase.measured) / chase.measured).abs());
            }
            if !errs.is_empty() {
                notes.push(format!(
                    "{}: the model's chase latency under {} load step{} is off by {:.1}% on average (it queues only at the controller; DRAM's own latency under load is not in it)",
                    ll.part,
                    errs.len(),
                    if errs.len() == 1 { "" } else { "s" },
                    100.0 * mean(&errs)
                ));
            }
        }

        let scaling = match self.scaling {
            Some(s) => scaling_check(m, &params, s, &mut notes)?,
            None => {
                notes.push(format!(
                    "no scaling part: nothing to check the fit against; run `numalab report --parts {REPORT_PARTS}`"
                ));
                Vec::new()
            }
        };
        let mean_abs_error = (!scaling.is_empty())
            .then(|| scaling.iter().map(|s| s.error.abs()).sum::<f64>() / scaling.len() as f64);
        Ok(Calibration {
            params,
            line_kernels,
            fitted,
            scaling,
            mean_abs_error,
            notes,
        })
    }
}

/// `hop_time` from one thread's bandwidth by hops, or the latency matrix's
/// ratios; `[1]` with one node.
fn hop_time(
    m: &Machine,
    bw: Option<&Matrix>,
    lat: Option<&Matrix>,
    fitted: &mut Vec<FittedParameter>,
    notes: &mut Vec<String>,
) -> Vec<f64> {
    // Time factor of each remote cell: local bandwidth over it, or its
    // latency over local.
    let ratios = |mx: &Matrix, bandwidth: bool| -> BTreeMap<u32, Vec<f64>> {
        let local = mx.local();
        let mut by: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for c in mx.cells.iter().filter(|c| c.cpu != c.mem) {
            let (Some(&l), Some(h)) = (local.get(&c.cpu), m.hops_between(c.cpu, c.mem)) else {
                continue;
            };
            if h == 0 || h > 64 {
                continue;
            }
            let r = if bandwidth { l / c.value } else { c.value / l };
            if (0.01..=1000.0).contains(&r) {
                by.entry(h).or_default().push(r);
            }
        }
        by
    };
    let (by, from) = match (bw, lat) {
        (Some(b), _) if !ratios(b, true).is_empty() => (
            ratios(b, true),
            "bandwidth-matrix: local over remote one-thread read bandwidth",
        ),
        (_, Some(l)) if !ratios(l, false).is_empty() => (
            ratios(l, false),
            "latency-matrix: remote over local latency (no one-thread remote bandwidth)",
        ),
        _ => {
            if m.memory_nodes().len() > 1 {
                notes.push(
                    "hop_time is [1]: the report measured no remote memory (bandwidth-matrix or latency-matrix), so every node costs as local".into(),
                );
            }
            return vec![1.0];
        }
    };
    let max = by.keys().copied().max().unwrap_or(0);
    let mut out = vec![1.0];
    for h in 1..=max {
        match by.get(&h) {
            Some(v) => {
                let x = mean(v);
                fitted.push(FittedParameter {
                    name: format!("hop_time[{h}]"),
                    value: x,
                    unit: "x local time".into(),
                    from: format!(
                        "{from}, {h} hop{}, mean of {} cell{}",
                        if h == 1 { "" } else { "s" },
                        v.len(),
                        if v.len() == 1 { "" } else { "s" }
                    ),
                    residual: worst_residual(x, v),
                });
                out.push(x);
            }
            None => {
                // A hop count no cell has: between its neighbours.
                let next = (h + 1..=max).find_map(|k| by.get(&k).map(|v| (k, mean(v))));
                let prev = *out.last().unwrap_or(&1.0);
                let x = next.map_or(prev, |(k, v)| prev + (v - prev) / (k - h + 1) as f64);
                notes.push(format!(
                    "hop_time[{h}]: no cell {h} hops away; interpolated"
                ));
                out.push(x);
            }
        }
    }
    out
}

/// The report's scaling, predicted: each point's threads stream their own
/// node's memory, as `scaling` placed them.
fn scaling_check(
    m: &Machine,
    p: &ModelParams,
    s: &Value,
    notes: &mut Vec<String>,
) -> Result<Vec<ScalingCheck>, String> {
    if s.get("memory").is_some_and(|x| !x.is_null()) {
        notes.push("the scaling part placed memory other than locally: not checked".into());
        return Ok(Vec::new());
    }
    let kernel = s.get("kernel").and_then(Value::as_str).unwrap_or("read");
    let write = match kernel {
        "read" | "read-prefetch" | "line-read" => false,
        "write" | "line-write" => true,
        other => {
            notes.push(format!(
                "the scaling part ran the {} kernel; the model has reads and writes of one array: not checked",
                excerpt(other, 20)
            ));
            return Ok(Vec::new());
        }
    };
    let net = Network::new(m, p.clone())?;
    let mut out = Vec::new();
    let packed = list(s, "packed", MAX_POINTS, "scaling")?;
    for layout in ["packed", "spread"] {
        for point in list(s, layout, MAX_POINTS, "scaling")? {
            let (Some(threads), Some(measured)) = (
                point.get("threads").and_then(Value::as_u64),
                figure_median(point, "gbps"),
            ) else {
                continue;
            };
            let cpus: Vec<u32> = list(point, "cpus", MAX_FLOWS, "a scaling point")?
                .iter()
                .filter_map(id)
                .collect();
            if cpus.is_empty() || cpus.len() as u64 != threads {
                continue;
            }
            // With one thread, or one node, spread is packed's placement:
            // the same measurement, counted once.
            if layout == "spread"
                && packed.iter().any(|q| {
                    q.get("cpus") == point.get("cpus") && q.get("threads") == point.get("threads")
                })
            {
                continue;
            }
            let mut flows = Vec::with_capacity(cpus.len());
            for &c in &cpus {
                let n = m.node_of_cpu(c).ok_or_else(|| {
                    format!("the scaling part ran a thread on CPU {c}, which this machine does not have: calibrate on the machine the report measured")
                })?;
                flows.push(Flow::stream(format!("CPU {c}"), n, n, write));
            }
            let predicted: f64 = net.predict(&flows)?.flows.iter().map(|f| f.gbps).sum();
            out.push(ScalingCheck {
                threads: cpus.len(),
                layout: layout.into(),
                measured_gbps: measured,
                predicted_gbps: predicted,
                error: (predicted - measured) / measured,
            });
        }
    }
    if out.is_empty() {
        notes.push("the scaling part has no point to check".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;
    use serde_json::json;

    fn quartet() -> Machine {
        fixture("qemu-quartet-4n2c-ring.xml")
    }

    fn fig(x: f64) -> Value {
        json!({"median": x, "best": x, "min": x, "max": x, "rel_ci": 0.01, "spread": 0.0})
    }

    fn workers(n: usize) -> Value {
        json!({"verified": true, "problems": [], "workers": (0..n).map(|_| json!({})).collect::<Vec<_>>()})
    }

    /// The parameters the synthetic report is made from.
    fn truth() -> ModelParams {
        let base = Base {
            rates: Rates {
                read: 10.0,
                write: 12.0,
                write_lines: 2.0,
            },
            hop_time: vec![1.0, 1.25, 1.6],
            in_flight: 16.0,
        };
        base.params(base.rates, 15.0, &BTreeMap::new(), MAX_GBPS)
    }

    fn sum_gbps(m: &Machine, p: &ModelParams, flows: &[Flow]) -> f64 {
        predict(m, p, flows)
            .unwrap()
            .flows
            .iter()
            .map(|f| f.gbps)
            .sum()
    }

    /// A quartet report whose every figure the model with `truth` gives:
    /// one-thread matrix, sizes, latency matrix, the local loaded-latency
    /// curve (7 injectors on CPUs 1-7 reading node 0) and scaling.
    fn report(m: &Machine) -> Value {
        let p = truth();
        let hops = |a: u32, b: u32| m.hops_between(a, b).unwrap() as usize;
        let bw: Vec<Value> = (0..4u32)
            .map(|c| {
                json!((0..4u32)
                    .map(
                        |mem| json!({"cpu_node": c, "mem_node": mem, "numa_ratio": null,
                        "value": fig(10.0 / p.hop_time[hops(c, mem)]), "verification": workers(1)})
                    )
                    .collect::<Vec<_>>())
            })
            .collect();
        let lat: Vec<Value> = (0..4u32)
            .map(|c| {
                json!((0..4u32)
                    .map(|mem| json!({"cpu_node": c, "mem_node": mem,
                        "value": fig(100.0 * p.hop_time[hops(c, mem)]), "verification": workers(1)}))
                    .collect::<Vec<_>>())
            })
            .collect();
        // The loaded-latency steps as the model with `truth` predicts them.
        let chase_pace = LINE / 100.0;
        let inj: Vec<u32> = (1..8).map(|c| m.node_of_cpu(c).unwrap()).collect();
        let step = |pace: Option<f64>| -> Value {
            let mut flows: Vec<Flow> = inj
                .iter()
                .map(|&n| match pace {
                    None => stream("i".into(), n, 0, false),
                    Some(g) => paced("i".into(), n, 0, g),
                })
                .collect();
            flows.push(paced("chase".into(), 0, 0, chase_pace));
            let probe = Chase {
                probe: 8,
                pace: Chase::pace(10.0),
                idle_ns: 100.0,
                measured: 0.0,
            };
            flows.push(paced("probe".into(), 0, 0, probe.pace));
            let pr = predict(m, &p, &flows).unwrap();
            let total = Network::load_of(&pr, Resource::Controller { node: 0 }) - pr.flows[8].gbps;
            let slow = probe.ratio(&pr);
            json!({
                "step": pace.map_or("max".to_string(), |g| format!("{g} GB/s")),
                "load": match pace { None => json!({"kind": "max"}), Some(g) => json!({"kind": "rate", "bytes_per_second": g * 1e9}) },
                "per_thread_gbps": vec![pace.unwrap_or(0.0); 7],
                "injected_memory_gbps": total - pr.flows[7].gbps,
                "total_memory_gbps": total,
                "latency_ns": fig(100.0 * slow),
            })
        };
        let steps: Vec<Value> = [Some(0.5), Some(1.0), None].into_iter().map(step).collect();
        let point = |cpus: &[u32]| -> Value {
            let flows: Vec<Flow> = cpus
                .iter()
                .map(|&c| {
                    let n = m.node_of_cpu(c).unwrap();
                    stream(format!("{c}"), n, n, false)
                })
                .collect();
            json!({"threads": cpus.len(), "cpus": cpus, "gbps": fig(sum_gbps(m, &p, &flows)), "verified": true})
        };
        let packed_order = [0u32, 1, 2, 3, 4, 5, 6, 7];
        let spread_order = [0u32, 2, 4, 6, 1, 3, 5, 7];
        json!({
            "schema": "numalab-report",
            "environment": {"hostname": "quartet", "timestamp_utc": "2026-01-01T00:00:00Z"},
            "machine": {"nodes": (0..4).map(|n| json!({"os_index": n})).collect::<Vec<_>>()},
            "parts": {
                "bandwidth-matrix": {"status": "done", "result": {"threads_per_node": "1", "kernel": "read", "bandwidth": bw}},
                "latency-matrix": {"status": "done", "result": {"threads_per_node": "1", "latency": lat}},
                "sizes": {"status": "done", "result": {"threads": 1, "kernels": ["read", "write", "copy"],
                    "points": [{"bytes": 1e5, "fits_in": "L2", "gbps": [50.0, 40.0, 30.0]},
                               {"bytes": 1e9, "fits_in": "memory", "gbps": [10.0, 6.0, 7.0]}]}},
                "loaded-latency-local": {"status": "done", "result": {
                    "chase": {"cpu": 0, "node": 0, "pages_by_node": {"0": 100}},
                    "injectors": {"cpus": [1, 2, 3, 4, 5, 6, 7], "policy": "bind:0"},
                    "mixes": [{"mix": "read", "idle": {"latency_ns": fig(100.0)}, "steps": steps}]}},
                "loaded-latency-far": {"status": "not-applicable", "result": null},
                "scaling": {"status": "done", "result": {"kernel": "read",
                    "packed": (1..=8).map(|n| point(&packed_order[..n])).collect::<Vec<_>>(),
                    "spread": (1..=8).map(|n| point(&spread_order[..n])).collect::<Vec<_>>()}}
            }
        })
    }

    fn value(c: &Calibration, name: &str) -> f64 {
        c.fitted
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("{name} not fitted: {:?}", c.fitted))
            .value
    }

    fn close(x: f64, target: f64, rel: f64) -> bool {
        (x - target).abs() <= rel * target.abs()
    }

    #[test]
    fn a_report_made_by_the_model_gives_its_parameters_back() {
        let m = quartet();
        let c = calibrate(&report(&m), &m).unwrap();
        assert!(
            close(c.params.read.controller_gbps, 10.0, 1e-9),
            "{:?}",
            c.params.read
        );
        assert!(
            close(c.params.write.controller_gbps, 12.0, 1e-9),
            "{:?}",
            c.params.write
        );
        assert_eq!(c.params.write.memory_lines, 2.0);
        assert_eq!(c.params.hop_time.len(), 3);
        assert!(
            close(c.params.hop_time[1], 1.25, 1e-9),
            "{:?}",
            c.params.hop_time
        );
        assert!(
            close(c.params.hop_time[2], 1.6, 1e-9),
            "{:?}",
            c.params.hop_time
        );
        // The unpaced step saturates node 0's controller: its capacity and
        // the injectors' requests in flight come back.
        assert!(
            close(c.params.controller_gbps, 15.0, 1e-6),
            "{}",
            c.params.controller_gbps
        );
        assert!(
            c.params.controller_overrides.is_empty(),
            "{:?}",
            c.params.controller_overrides
        );
        assert!(
            close(c.params.in_flight, 16.0, 1e-5),
            "{}",
            c.params.in_flight
        );
        assert!(close(value(&c, "in_flight"), 16.0, 1e-5));
        let f = c
            .fitted
            .iter()
            .find(|f| f.name == "controller_gbps")
            .unwrap();
        assert!(
            f.from.starts_with(
                "loaded-latency-local: step max (7 injectors and the chase on node 0's memory): "
            ),
            "{}",
            f.from
        );
        assert!(f.residual.unwrap().abs() < 1e-4, "{f:?}");
        // Every hop cell equals its mean: no residual.
        let h = c.fitted.iter().find(|f| f.name == "hop_time[1]").unwrap();
        assert!(h.residual.unwrap().abs() < 1e-12, "{h:?}");
        // Scaling: 8 packed points and the 7 spread points that differ
        // (one thread is packed's), predicted as they were made.
        assert_eq!(c.scaling.iter().filter(|s| s.layout == "packed").count(), 8);
        assert_eq!(c.scaling.iter().filter(|s| s.layout == "spread").count(), 7);
        for s in &c.scaling {
            assert!(s.error.abs() < 1e-5, "{s:?}");
        }
        assert!(c.mean_abs_error.unwrap() < 1e-5, "{:?}", c.mean_abs_error);
        // Packed 8 threads: four controllers of 15 GB/s, each asked 20.
        let eight = c
            .scaling
            .iter()
            .find(|s| s.layout == "packed" && s.threads == 8)
            .unwrap();
        assert!(
            eight.measured_gbps > 55.0 && eight.measured_gbps < 60.0,
            "{eight:?}"
        );
        // No --full matrix: the link is a stated placeholder.
        let l = c.fitted.iter().find(|f| f.name == "link_gbps").unwrap();
        assert_eq!(l.residual, None);
        assert!(
            c.notes
                .iter()
                .any(|n| n.starts_with("link_gbps is not measured")),
            "{:?}",
            c.notes
        );
        c.params.check().unwrap();
    }

    #[test]
    fn an_unsaturated_controller_is_a_lower_bound_and_in_flight_follows_littles_law() {
        let m = quartet();
        let mut r = report(&m);
        // Only the local injector on CPU 1: one reader asks 10 of 15 GB/s.
        let ll = r.pointer_mut("/parts/loaded-latency-local/result").unwrap();
        ll["injectors"]["cpus"] = json!([1]);
        ll["mixes"][0]["steps"] = json!([{"step": "max", "load": {"kind": "max"}, "per_thread_gbps": [10.0],
            "total_memory_gbps": 10.64, "latency_ns": fig(101.0), "cpu_share": 0.5, "injectors_waited": 0.25}]);
        let c = calibrate(&r, &m).unwrap();
        let f = c
            .fitted
            .iter()
            .find(|f| f.name == "controller_gbps")
            .unwrap();
        assert!(
            f.from.contains("not saturated, a lower bound"),
            "{}",
            f.from
        );
        // The least capacity under which the two threads still get 98% of
        // what they ask: above what they moved.
        assert!(f.value > 10.64 && f.value < 15.0, "{f:?}");
        // 10 GB/s x 100 ns / 64 B.
        let n = c.fitted.iter().find(|f| f.name == "in_flight").unwrap();
        assert!(close(n.value, 15.625, 1e-9), "{n:?}");
        assert!(n.from.starts_with("Little's law"), "{}", n.from);
        // Other processes held the CPUs: said, since it is in every figure.
        assert!(
            c.notes.iter().any(|n| n.starts_with(
                "the machine was busy while the report measured: in loaded-latency-local, the chase ran as little as 50% of its wall time and the injectors waited up to 25%"
            )),
            "{:?}",
            c.notes
        );
        assert!(
            c.notes
                .iter()
                .any(|n| n.starts_with("no measurement saturated")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn one_node_keeps_a_placeholder_link_and_says_so() {
        let m = fixture("8em64t-2s2ca2c-buggynuma.xml");
        let nodes: Vec<u32> = m.node_ids().iter().collect();
        assert_eq!(nodes.len(), 1);
        let n = nodes[0];
        let cpus: Vec<u32> = m.allowed_cpus_of(n).iter().collect();
        let r = json!({
            "schema": "numalab-report",
            "machine": {"nodes": [{"os_index": n}]},
            "parts": {
                "bandwidth-matrix": {"status": "done", "result": {"threads_per_node": "1",
                    "bandwidth": [[{"cpu_node": n, "mem_node": n, "value": fig(20.0), "verification": workers(1)}]]}},
                "sweep": {"status": "done", "result": {"sweep": {"runs": [
                    {"background": null, "cases": [
                        {"sharing": "none", "threads": [{"cpu": cpus[0], "mem": n, "access": "write", "gbps": 8.0, "memory_gbps": 16.0}]},
                        {"sharing": "none", "threads": [{"cpu": cpus[0], "mem": n, "access": "read", "gbps": 18.0, "memory_gbps": 18.0}]},
                        {"sharing": "none", "threads": [
                            {"cpu": cpus[0], "mem": n, "access": "write", "gbps": 6.0, "memory_gbps": 12.0, "label": "0.0.w.0"},
                            {"cpu": cpus[1], "mem": n, "access": "write", "gbps": 6.0, "memory_gbps": 12.0}]},
                        {"sharing": "cpu", "threads": [
                            {"cpu": cpus[0], "mem": n, "access": "read", "gbps": 9.0, "memory_gbps": 9.0},
                            {"cpu": cpus[0], "mem": n, "access": "read", "gbps": 9.0, "memory_gbps": 9.0}]}]}]}}},
                "scaling": {"status": "done", "result": {"kernel": "read",
                    "packed": [{"threads": 1, "cpus": [cpus[0]], "gbps": fig(20.0)},
                               {"threads": 2, "cpus": [cpus[0], cpus[1]], "gbps": fig(25.0)}],
                    "spread": [{"threads": 1, "cpus": [cpus[0]], "gbps": fig(20.0)}]}}
            }
        });
        let c = calibrate(&r, &m).unwrap();
        // The write from the sweep's line-write, memory bytes.
        assert!(close(c.params.write.controller_gbps, 16.0, 1e-12));
        assert_eq!(c.params.write.memory_lines, 2.0);
        assert_eq!(c.params.hop_time, vec![1.0]);
        // Two writers asking 2 x 16 moved 24: the controller saturated,
        // fitted with the sweep's own alone rates.
        let f = c
            .fitted
            .iter()
            .find(|f| f.name == "controller_gbps")
            .unwrap();
        // The sweep's labels, or made up where a thread has none.
        assert!(
            f.from
                .starts_with("sweep, idle: 0.0.w.0 0.?.w.0 (line kernels"),
            "{}",
            f.from
        );
        assert!(f.value > 24.0 && f.value < 28.0, "{f:?}");
        assert!(f.residual.unwrap().abs() < 1e-4, "{f:?}");
        // For the sweeps, the line kernels' own rates alone: a line-read
        // thread at 18 GB/s where the read kernel's rate is another; the
        // capacities are the same.
        let lines = c.line_kernels.as_ref().expect("the sweep's rates");
        assert!(
            close(lines.read.controller_gbps, 18.0, 1e-12),
            "{:?}",
            lines.read
        );
        assert!(close(lines.write.controller_gbps, 16.0, 1e-12));
        assert_eq!(lines.controller_gbps, c.params.controller_gbps);
        assert_ne!(lines.read.controller_gbps, c.params.read.controller_gbps);
        // Default in_flight: no latency in this report.
        assert_eq!(c.params.in_flight, DEFAULT_IN_FLIGHT);
        assert!(
            c.notes
                .iter()
                .any(|n| n.starts_with("one memory node: no link")),
            "{:?}",
            c.notes
        );
        assert_eq!(c.params.link_gbps, c.params.controller_gbps);
        // One thread predicted at its own rate; two share a controller.
        assert_eq!(c.scaling.len(), 2);
        assert!(
            close(c.scaling[0].predicted_gbps, 20.0, 1e-6),
            "{:?}",
            c.scaling[0]
        );
        // Two readers ask 40 GB/s of a controller fitted to carry about 26:
        // they fill it, never past it.
        let two = c.scaling[1].predicted_gbps;
        assert!(
            two < c.params.controller_gbps && two > 0.95 * c.params.controller_gbps,
            "{:?}",
            c.scaling[1]
        );
        let e = c.mean_abs_error.unwrap();
        assert!(close(
            e,
            (c.scaling[0].error.abs() + c.scaling[1].error.abs()) / 2.0,
            1e-12
        ));
    }

    #[test]
    fn missing_parts_and_bad_input_are_one_line_naming_what_to_run() {
        let m = quartet();
        let e = calibrate(&json!({"schema": "numalab-report", "parts": {}}), &m).unwrap_err();
        assert_eq!(
            e,
            format!("calibration needs one thread's local read bandwidth, from the report's bandwidth-matrix (or, with --full, sizes) part, and results.json has none; run `numalab report --parts {REPORT_PARTS}`")
        );
        let mut r = report(&m);
        r["parts"].as_object_mut().unwrap().remove("sizes");
        let e = calibrate(&r, &m).unwrap_err();
        assert!(e.starts_with("calibration needs one thread's local write bandwidth, from the report's sizes (or sweep) part"), "{e}");
        let mut r = report(&m);
        r["parts"]
            .as_object_mut()
            .unwrap()
            .remove("loaded-latency-local");
        let e = calibrate(&r, &m).unwrap_err();
        assert!(e.contains("several threads loading one memory node, from the report's loaded-latency (or sweep) part"), "{e}");
        let e = calibrate(&json!([1, 2]), &m).unwrap_err();
        assert_eq!(e, "not a numalab report's results.json (its schema is ''); valid: the results.json `numalab report` writes");
        // Another machine's report.
        let mut r = report(&m);
        r["machine"]["nodes"] = json!([{"os_index": 0}]);
        let e = calibrate(&r, &m).unwrap_err();
        assert!(
            e.starts_with(
                "the report measured a machine with nodes 0 and this one has nodes 0, 1, 2, 3"
            ),
            "{e}"
        );
        // A CPU the machine lacks.
        let mut r = report(&m);
        r["parts"]["loaded-latency-local"]["result"]["injectors"]["cpus"] = json!([1, 99]);
        let e = calibrate(&r, &m).unwrap_err();
        assert!(e.starts_with("the report ran a thread on CPU 99"), "{e}");
        // Garbage where numbers belong is skipped, never a panic.
        let mut r = report(&m);
        r["parts"]["scaling"]["result"]["packed"] =
            json!([{"threads": "x"}, 7, null, {"threads": 1, "cpus": [0], "gbps": {"median": -1}}]);
        r["parts"]["scaling"]["result"]["spread"] = json!("nope");
        let e = calibrate(&r, &m).unwrap_err();
        assert_eq!(e, "scaling: spread is not a list");
        r["parts"]["scaling"]["result"]["spread"] = json!([]);
        let c = calibrate(&r, &m).unwrap();
        assert!(c.scaling.is_empty() && c.mean_abs_error.is_none());
        // Too long a list is refused.
        let mut r = report(&m);
        r["parts"]["scaling"]["result"]["packed"] = json!(vec![0; MAX_POINTS + 1]);
        let e = calibrate(&r, &m).unwrap_err();
        assert_eq!(
            e,
            format!(
                "scaling has {} packed; calibration reads at most {MAX_POINTS}",
                MAX_POINTS + 1
            )
        );
    }

    #[test]
    fn a_full_matrix_fits_the_links_and_the_controllers() {
        let m = quartet();
        // Links of 6 GB/s a direction under controllers of 15; no
        // loaded-latency, so in_flight is Little's: 10 GB/s x 100 ns / 64 B.
        let base = Base {
            rates: Rates {
                read: 10.0,
                write: 12.0,
                write_lines: 2.0,
            },
            hop_time: vec![1.0, 1.25, 1.6],
            in_flight: 15.625,
        };
        let truth = base.params(base.rates, 15.0, &BTreeMap::new(), 6.0);
        let rows: Vec<Value> = (0..4u32)
            .map(|c| {
                json!((0..4u32)
                    .map(|mem| {
                        let flows = [
                            stream("a".into(), c, mem, false),
                            stream("b".into(), c, mem, false),
                        ];
                        json!({"cpu_node": c, "mem_node": mem,
                            "value": fig(sum_gbps(&m, &truth, &flows)), "verification": workers(2)})
                    })
                    .collect::<Vec<_>>())
            })
            .collect();
        let mut r = report(&m);
        r["parts"]
            .as_object_mut()
            .unwrap()
            .remove("loaded-latency-local");
        r["parts"]["bandwidth-matrix"]["result"] =
            json!({"threads_per_node": "all", "bandwidth": rows});
        let c = calibrate(&r, &m).unwrap();
        // One reader from sizes, the hops from the latency matrix.
        let f = c
            .fitted
            .iter()
            .find(|f| f.name == "read.controller_gbps")
            .unwrap();
        assert!(f.from.starts_with("sizes: "), "{}", f.from);
        assert!(close(c.params.read.controller_gbps, 10.0, 1e-12));
        let h = c.fitted.iter().find(|f| f.name == "hop_time[2]").unwrap();
        assert!(h.from.starts_with("latency-matrix: "), "{}", h.from);
        assert!(close(h.value, 1.6, 1e-12), "{h:?}");
        // Two local readers ask 20 of 15 GB/s; two remote ones 16 of a 6
        // GB/s link: both saturate, and both come back.
        assert!(
            close(c.params.controller_gbps, 15.0, 1e-6),
            "{}",
            c.params.controller_gbps
        );
        assert!(
            c.params.controller_overrides.is_empty(),
            "{:?}",
            c.params.controller_overrides
        );
        assert!(
            close(c.params.link_gbps, 6.0, 1e-6),
            "{}",
            c.params.link_gbps
        );
        let l = c.fitted.iter().find(|f| f.name == "link_gbps").unwrap();
        assert!(
            l.from
                .starts_with("bandwidth-matrix (every CPU): 2 threads of node "),
            "{}",
            l.from
        );
        assert!(l.residual.unwrap().abs() < 1e-6, "{l:?}");
        assert!(close(c.params.in_flight, 15.625, 1e-12));
        assert!(
            !c.notes
                .iter()
                .any(|n| n.starts_with("link_gbps is not measured")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn a_chase_latency_no_queue_explains_falls_back_to_littles_law() {
        let m = quartet();
        let mut r = report(&m);
        // No rise at all at the unpaced step, where even one request in
        // flight per injector queues; then only paced steps: nothing to
        // fit a controller to.
        let steps = r
            .pointer_mut("/parts/loaded-latency-local/result/mixes/0/steps")
            .unwrap();
        steps[2]["latency_ns"] = fig(100.0);
        let c = calibrate(&r, &m).unwrap();
        assert!(
            close(c.params.controller_gbps, 15.0, 2e-2),
            "{}",
            c.params.controller_gbps
        );
        assert!(
            close(c.params.in_flight, 15.625, 1e-12),
            "{}",
            c.params.in_flight
        );
        assert!(
            c.notes.iter().any(|n| n.starts_with(
                "in_flight from Little's law: loaded-latency-local: step max (7 injectors and the chase on node 0's memory): the chase's latency, 1.00x idle, lies outside the "
            )),
            "{:?}",
            c.notes
        );
        let mut r = report(&m);
        r.pointer_mut("/parts/loaded-latency-local/result/mixes/0/steps")
            .unwrap()
            .as_array_mut()
            .unwrap()
            .pop();
        let e = calibrate(&r, &m).unwrap_err();
        assert!(
            e.starts_with(
                "calibration needs a measurement of several threads loading one memory node"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_file_that_is_not_json_is_one_line() {
        let d = std::env::temp_dir().join(format!("numalab-calibrate-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("results.json");
        std::fs::write(&p, "{not json").unwrap();
        let e = calibrate_file(&p, &quartet()).unwrap_err();
        assert!(
            e.starts_with(&format!("{}: not a JSON document: ", p.display())),
            "{e}"
        );
        assert!(!e.contains('\n'));
        std::fs::write(&p, serde_json::to_string(&report(&quartet())).unwrap()).unwrap();
        let c = calibrate_file(&p, &quartet()).unwrap();
        assert!(
            c.params.source.ends_with(&format!("({})", p.display())),
            "{}",
            c.params.source
        );
        std::fs::remove_dir_all(&d).ok();
    }
}
