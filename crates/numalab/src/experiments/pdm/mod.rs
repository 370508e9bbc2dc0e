//! The placement distribution model (PDM): how the placements of a workload's
//! data quantities spread over link-contention classes (docs/pdm.md).
//!
//! The machine is a directed graph: its vertices are the NUMA nodes (CPU-less
//! ones included), its arcs both directions of every link of the interconnect
//! graph (or of a link list the user gives). A placement puts each thread on a
//! CPU node and each of its quantities on a memory node. A quantity of weight
//! `w` adds `w` to its memory node's controller and `w` to every arc of the
//! shortest path between its thread's node and its memory node, in the
//! direction the data moves (read: memory to CPU; write: CPU to memory); when
//! several shortest paths exist, each arc gets `w` times the share of the
//! shortest paths that use it. CPU-less nodes never carry traffic through
//! them. The contention of a placement is the largest load of any arc or
//! controller; its class `k` is `floor(contention / width)`.
//!
//! # Exact arithmetic
//!
//! Weights and the class width have at most three decimals, so every load is
//! an integer in units of `1 / (1000 · L)`, where `L` is the least common
//! multiple of the shortest-path counts: class boundaries are compared in
//! integers and no placement lands in a neighbouring class by rounding.
//!
//! # Counting
//!
//! Placements are never enumerated. The (thread, quantity) items of equal
//! thread node, weight and direction form a group whose memory nodes are
//! chosen as a multiset (with its multinomial count); a dynamic program walks
//! the groups keeping a map from load vector to the number of placements
//! reaching it, so equal partial loads merge. One thread per CPU node in every
//! order gives `T!` times the distribution of one order (renaming threads
//! changes no load); `--threads N` sums over multisets of thread nodes with
//! their multinomial counts. When the states would exceed [`STATE_CAP`] (or
//! the counts `u128`), uniform random placements are sampled instead and each
//! class carries its 95% Wilson interval.

mod count;
mod draw;
pub mod measure;
mod model;
mod workload;

use crate::machine::Machine;
use serde::Serialize;
use std::collections::BTreeMap;

use count::{exact_count, factorial};
use draw::sample;
pub use draw::{draw_by_class, ClassDraw, DrawnPlacement, MAX_DRAWS};
pub(crate) use model::Model;
use model::{gcd, milli};
pub use workload::{
    kernel_quantities, named_quantities, parse_class_width, parse_directions, parse_links,
    parse_thread_nodes, parse_weights, streamed, Direction, Quantity, KERNELS,
};

/// Most nodes the model takes.
pub const MAX_NODES: usize = 64;
/// Most threads of a workload.
pub const MAX_THREADS: usize = 64;
/// Most data quantities per thread.
pub const MAX_QUANTITIES: usize = 8;
/// Largest weight of one quantity.
pub const MAX_WEIGHT: f64 = 1000.0;
/// Largest class width.
pub const MAX_CLASS_WIDTH: f64 = 1.0e6;
/// Most distinct load vectors one layer of the dynamic program may hold
/// before the model falls back to sampling.
pub const STATE_CAP: usize = 2_000_000;
/// Random placements drawn when the count cannot be exact: the 95% Wilson
/// interval of any share is then at most ±0.196 percentage points.
pub const DEFAULT_SAMPLES: u64 = 250_000;
/// Most random placements one request may draw.
pub const MAX_SAMPLES: u64 = 100_000_000;
/// Most (placement, quantity) pairs one sampling run routes: a few seconds.
pub const MAX_SAMPLED_ITEMS: u64 = 64_000_000;
/// Examples kept per class.
pub const EXAMPLES_PER_CLASS: usize = 3;

/// Weights and widths are held in thousandths, exactly.
const MILLI: u64 = 1000;
/// Largest common multiple of path counts the integer loads can carry.
const MAX_SCALE: u64 = 1_000_000_000;
/// Bytes of load vectors one DP layer may hold.
const MAX_LAYER_BYTES: usize = 256 << 20;
/// Most multisets one group of equal items may offer; larger groups are split.
const MAX_GROUP_OPTIONS: usize = 4096;
/// Most multisets of thread nodes `--threads N` is counted over exactly.
const MAX_THREAD_MULTISETS: usize = 20_000;
/// Most DP states summed over all layers and thread multisets.
const MAX_TOTAL_STATES: usize = 40_000_000;
/// The 95% normal quantile.
const Z95: f64 = 1.959_963_984_540_054;

/// Why the model could not run.
#[derive(Debug, thiserror::Error)]
pub enum PdmError {
    /// Bad input (exit code 2 at the command line).
    #[error("{0}")]
    Invalid(String),
    /// The request is fine but cannot be carried out (exit code 1).
    #[error("{0}")]
    Failed(String),
}

fn invalid<T>(msg: impl Into<String>) -> Result<T, PdmError> {
    Err(PdmError::Invalid(msg.into()))
}

/// How threads sit on CPU nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadPlacement {
    /// One thread per CPU node, every order (the study's case).
    OnePerNode,
    /// This many threads, each on any CPU node.
    Any(usize),
    /// Each thread on the given node.
    Fixed(Vec<u32>),
}

/// What to count.
#[derive(Debug, Clone)]
pub struct PdmRequest {
    /// The kernel's name, or a description of the quantities.
    pub workload: String,
    pub quantities: Vec<Quantity>,
    pub threads: ThreadPlacement,
    /// Links to use instead of the inferred interconnect graph.
    pub links: Option<Vec<(u32, u32)>>,
    pub class_width: f64,
    /// Sample this many placements even when an exact count is possible.
    pub samples: Option<u64>,
    /// Seed of the random placements.
    pub seed: u64,
    /// How long the count may take (`None`: as long as it needs). The
    /// exact count gets two thirds of it and gives up past them; random
    /// placements are then drawn until the whole limit (at least
    /// [`MIN_TIMED_SAMPLES`]), and the shares carry their intervals. For a
    /// caller with a budget on a machine of unknown speed (`numalab
    /// report`: the Quartet's triad takes 0.3 s on this host, 20 s in an
    /// emulated guest).
    pub time_limit: Option<std::time::Duration>,
}

/// Random placements drawn at least when a [`PdmRequest::time_limit`] cut
/// the exact count: every share within ±3.1 points (95%).
pub const MIN_TIMED_SAMPLES: u64 = 1000;

/// The total number of placements: exact when it fits 128 bits, else
/// approximate, and `null` past the largest float (64 nodes give 10^700 and
/// more; `total_placements_log10` still says how many).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Total {
    Exact(u128),
    Approximate(Option<f64>),
}

impl Total {
    fn as_f64(self) -> f64 {
        match self {
            Self::Exact(n) => n as f64,
            Self::Approximate(x) => x.unwrap_or(f64::INFINITY),
        }
    }
}

/// One contention class.
#[derive(Debug, Clone, Serialize)]
pub struct PdmClass {
    /// `k`: contention in `[k·width, (k+1)·width)`.
    pub class: u64,
    pub low: f64,
    pub high: f64,
    /// Placements in the class (exact), or sampled placements in it.
    pub count: u128,
    /// Fraction of all placements (estimated when not exact).
    pub share: f64,
    /// 95% Wilson interval of the share, when sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    /// Up to three placements of the class, as `T0@0:a→1,b→2` per thread.
    pub examples: Vec<String>,
    /// The same examples as vertices: (thread vertices, memory vertices
    /// per thread), for [`draw_by_class`] to fall back on.
    #[serde(skip)]
    example_placements: Vec<Example>,
}

/// One example placement: its label, thread vertices and each thread's
/// quantities' memory vertices.
#[derive(Debug, Clone)]
struct Example {
    label: String,
    threads: Vec<usize>,
    memory: Vec<Vec<usize>>,
}

/// The distribution of placements over contention classes.
#[derive(Debug, Clone, Serialize)]
pub struct PdmResult {
    pub workload: String,
    pub quantities: Vec<Quantity>,
    /// `one-per-node`, `any` or `fixed`.
    pub thread_placement: String,
    pub threads: usize,
    /// The thread nodes when fixed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_nodes: Option<Vec<u32>>,
    pub nodes: Vec<u32>,
    pub cpu_nodes: Vec<u32>,
    /// Undirected links; each carries two arcs.
    pub links: Vec<[u32; 2]>,
    /// Whether the links came from `--links` rather than the machine.
    pub links_given: bool,
    pub class_width: f64,
    pub total_placements: Total,
    /// Its decimal logarithm, finite however many placements there are.
    pub total_placements_log10: f64,
    pub exact: bool,
    /// Placements sampled, when not exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Largest layer of the dynamic program, when exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_state_count: Option<u64>,
    pub classes: Vec<PdmClass>,
    /// Why the count is not exact, and similar remarks.
    pub notes: Vec<String>,
}

struct Prepared<'a> {
    model: &'a Model,
    quantities: &'a [Quantity],
    /// Every load is a multiple of this; keys hold loads divided by it.
    unit: u64,
    /// `k` of a normalized maximum load.
    class_divisor: u64,
}

impl Prepared<'_> {
    fn class_of(&self, max_normalized: u64) -> u64 {
        (u128::from(max_normalized) * u128::from(self.unit) / u128::from(self.class_divisor)) as u64
    }

    /// `T0@0:a→1,b→2`: thread nodes and each quantity's memory node.
    fn label(&self, thread_nodes: &[usize], memory: &[Vec<usize>]) -> String {
        let n = &self.model.nodes;
        thread_nodes
            .iter()
            .enumerate()
            .map(|(t, &c)| {
                let qs = self
                    .quantities
                    .iter()
                    .zip(&memory[t])
                    .map(|(q, &m)| format!("{}→{}", q.name, n[m]))
                    .collect::<Vec<_>>()
                    .join(",");
                format!("T{t}@{}:{qs}", n[c])
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn example(&self, thread_nodes: &[usize], memory: Vec<Vec<usize>>) -> Example {
        Example {
            label: self.label(thread_nodes, &memory),
            threads: thread_nodes.to_vec(),
            memory,
        }
    }
}

/// Counts the placements of `req` on `machine` by contention class.
pub fn run_pdm(machine: &Machine, req: &PdmRequest) -> Result<PdmResult, PdmError> {
    count(&model_of(machine, req)?, req)
}

/// The contention of one placement of `quantities` on `machine`'s inferred
/// links, in the model's units: thread `t` on node `threads[t]`, its
/// quantity `q` on node `memory[t][q]`. The largest load of any arc or
/// controller, as [`run_pdm`] classes placements by. Builds the machine's
/// model each call: to price many placements, build a [`Contention`] once.
pub fn placement_contention(
    machine: &Machine,
    quantities: &[Quantity],
    threads: &[u32],
    memory: &[Vec<u32>],
) -> Result<f64, PdmError> {
    Contention::of(machine)?.of_placement(quantities, threads, memory)
}

/// A machine's inferred links, built once (all shortest routes between its
/// nodes: quadratic in nodes times links) to price many placements.
pub struct Contention {
    model: Model,
}

impl Contention {
    /// The model of `machine`'s inferred links.
    pub fn of(machine: &Machine) -> Result<Self, PdmError> {
        Ok(Self {
            model: machine_model(machine, None)?,
        })
    }

    /// What [`placement_contention`] says of one placement.
    pub fn of_placement(
        &self,
        quantities: &[Quantity],
        threads: &[u32],
        memory: &[Vec<u32>],
    ) -> Result<f64, PdmError> {
        let model = &self.model;
        let vertex = |n: u32| {
            model
                .vertex(n)
                .ok_or_else(|| PdmError::Invalid(format!("node {n} is not on this machine")))
        };
        let t: Vec<usize> = threads
            .iter()
            .map(|&n| vertex(n))
            .collect::<Result<_, _>>()?;
        if let Some(&bad) = t.iter().find(|&&v| !model.cpu[v]) {
            return invalid(format!(
                "node {} has no CPU to run a thread",
                model.nodes[bad]
            ));
        }
        let mem: Vec<Vec<usize>> = memory
            .iter()
            .map(|row| row.iter().map(|&n| vertex(n)).collect::<Result<_, _>>())
            .collect::<Result<_, _>>()?;
        if mem.len() != t.len() || mem.iter().any(|row| row.len() != quantities.len()) {
            return invalid("one memory node per thread and quantity".to_string());
        }
        Ok(model
            .loads(quantities, &t, &mem)
            .into_iter()
            .fold(0.0, f64::max))
    }
}

/// The graph of `machine`, with the links of `req` when it gives them.
fn model_of(machine: &Machine, req: &PdmRequest) -> Result<Model, PdmError> {
    machine_model(machine, req.links.as_deref())
}

/// The graph of `machine`: its nodes, and `links` or its inferred links.
pub(crate) fn machine_model(
    machine: &Machine,
    links: Option<&[(u32, u32)]>,
) -> Result<Model, PdmError> {
    let mut nodes: Vec<(u32, bool)> = machine
        .nodes
        .iter()
        .map(|n| (n.os_index, !n.cpus.is_empty()))
        .collect();
    nodes.sort_unstable();
    if nodes.len() > MAX_NODES {
        return Err(PdmError::Failed(format!(
            "the machine has {} nodes; the model takes at most {MAX_NODES}",
            nodes.len()
        )));
    }
    let ids: Vec<u32> = nodes.iter().map(|n| n.0).collect();
    let cpu: Vec<bool> = nodes.iter().map(|n| n.1).collect();
    let given = links.is_some();
    let links: Vec<(u32, u32)> = match links {
        Some(l) => l.to_vec(),
        None => machine.links.iter().map(|l| (l.a, l.b)).collect(),
    };
    Model::new(&ids, &cpu, &links, given)
}

/// A request checked against its model, with what counting and drawing share.
struct Setup<'a> {
    prepared: Prepared<'a>,
    cpu_vertices: Vec<usize>,
    cpu_ids: Vec<u32>,
    /// `--thread-nodes` as vertices.
    fixed: Option<Vec<usize>>,
    threads: usize,
    mode: &'static str,
}

fn setup<'a>(model: &'a Model, req: &'a PdmRequest) -> Result<Setup<'a>, PdmError> {
    let q = &req.quantities;
    if q.is_empty() || q.len() > MAX_QUANTITIES {
        return invalid(format!(
            "--quantities: {} quantities (valid: 1 to {MAX_QUANTITIES})",
            q.len()
        ));
    }
    let cpu_vertices: Vec<usize> = (0..model.nodes.len()).filter(|&v| model.cpu[v]).collect();
    let cpu_ids: Vec<u32> = cpu_vertices.iter().map(|&v| model.nodes[v]).collect();
    let (mode, threads) = match &req.threads {
        ThreadPlacement::OnePerNode => ("one-per-node", cpu_vertices.len()),
        ThreadPlacement::Any(n) => ("any", *n),
        ThreadPlacement::Fixed(t) => ("fixed", t.len()),
    };
    if threads == 0 || threads > MAX_THREADS {
        return invalid(format!("{threads} threads (valid: 1 to {MAX_THREADS})"));
    }
    let fixed: Option<Vec<usize>> = match &req.threads {
        ThreadPlacement::Fixed(t) => Some(
            t.iter()
                .map(|&id| match model.vertex(id) {
                    Some(v) if model.cpu[v] => Ok(v),
                    _ => invalid(format!(
                        "--thread-nodes: node {id} is not a CPU node (CPU nodes: {})",
                        cpu_ids
                            .iter()
                            .map(|n| n.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    )),
                })
                .collect::<Result<_, _>>()?,
        ),
        _ => None,
    };
    let weights: Vec<u64> = q.iter().map(|x| milli(x.weight)).collect();
    let width = milli(req.class_width);
    if weights.contains(&0) || width == 0 {
        return invalid("weights and the class width must be at least 0.001");
    }
    // Every load is a multiple of the gcd of all contributions.
    let mut unit = 0u64;
    for &c in &cpu_vertices {
        for m in 0..model.nodes.len() {
            for (w, qty) in weights.iter().zip(q) {
                for (_, a) in model.contribution(c, m, *w, qty.direction) {
                    unit = gcd(unit, a);
                }
            }
        }
    }
    let prepared = Prepared {
        model,
        quantities: q,
        unit: unit.max(1),
        class_divisor: width * model.scale,
    };
    Ok(Setup {
        prepared,
        cpu_vertices,
        cpu_ids,
        fixed,
        threads,
        mode,
    })
}

/// How many placements `req` has on `nodes` nodes, `cpus` of them CPU
/// nodes, with `threads` threads: exactly when the count fits 128 bits, its
/// decimal logarithm always, and the [`Total`] a result reports.
fn total_placements(
    req: &PdmRequest,
    nodes: usize,
    cpus: usize,
    threads: usize,
) -> (Option<u128>, f64, Total) {
    let q = &req.quantities;
    let v = nodes as u128;
    let c = cpus as u128;
    let memory_ways = v.checked_pow((threads * q.len()) as u32);
    let thread_ways = match &req.threads {
        ThreadPlacement::OnePerNode => Some(factorial(cpus.min(34))).filter(|_| cpus <= 34),
        ThreadPlacement::Any(n) => c.checked_pow(*n as u32),
        ThreadPlacement::Fixed(_) => Some(1),
    };
    let total_exact = memory_ways
        .zip(thread_ways)
        .and_then(|(a, b)| a.checked_mul(b));
    let log10_total = {
        let tw: f64 = match &req.threads {
            ThreadPlacement::OnePerNode => (1..=cpus).map(|i| (i as f64).log10()).sum(),
            ThreadPlacement::Any(n) => *n as f64 * (c as f64).log10(),
            ThreadPlacement::Fixed(_) => 0.0,
        };
        (threads * q.len()) as f64 * (v as f64).log10() + tw
    };
    let total = match total_exact {
        Some(n) => Total::Exact(n),
        None => {
            let x = 10f64.powf(log10_total);
            Total::Approximate(x.is_finite().then_some(x))
        }
    };
    (total_exact, log10_total, total)
}

pub(crate) fn count(model: &Model, req: &PdmRequest) -> Result<PdmResult, PdmError> {
    let Setup {
        prepared,
        cpu_vertices,
        cpu_ids,
        fixed,
        threads,
        mode,
    } = setup(model, req)?;
    let q = &req.quantities;
    let (total_exact, log10_total, total) =
        total_placements(req, model.nodes.len(), cpu_vertices.len(), threads);
    let mut notes = Vec::new();
    let started = std::time::Instant::now();
    let exact = exact_or_why(
        &prepared,
        req,
        (fixed.as_deref(), &cpu_vertices),
        total_exact.is_some(),
        started,
        &mut notes,
    );
    let w = req.class_width;
    let mut result = PdmResult {
        workload: req.workload.clone(),
        quantities: q.clone(),
        thread_placement: mode.to_string(),
        threads,
        thread_nodes: match &req.threads {
            ThreadPlacement::Fixed(t) => Some(t.clone()),
            _ => None,
        },
        nodes: model.nodes.clone(),
        cpu_nodes: cpu_ids,
        links: model
            .edges
            .iter()
            .map(|&(a, b)| [model.nodes[a], model.nodes[b]])
            .collect(),
        links_given: req.links.is_some(),
        class_width: w,
        total_placements: total,
        total_placements_log10: log10_total,
        exact: exact.is_some(),
        samples: None,
        seed: None,
        largest_state_count: None,
        classes: Vec::new(),
        notes,
    };
    if let Some((classes, largest)) = exact {
        let total_n = total.as_f64();
        result.largest_state_count = Some(largest as u64);
        result.classes = classes
            .into_iter()
            .map(|(k, (count, examples))| PdmClass {
                class: k,
                low: k as f64 * w,
                high: (k + 1) as f64 * w,
                count,
                share: count as f64 / total_n,
                interval: None,
                examples: examples.iter().map(|e| e.label.clone()).collect(),
                example_placements: examples,
            })
            .collect();
        return Ok(result);
    }
    sample_classes(
        &prepared,
        req,
        (fixed.as_deref(), &cpu_vertices),
        started,
        &mut result,
    );
    Ok(result)
}

/// The exact class counts, or `None` with the reason in `notes`: sampling
/// was asked for, the count of placements exceeds 128 bits
/// (`exact_fits` false), or the exact count ran out of time or states.
fn exact_or_why(
    prepared: &Prepared,
    req: &PdmRequest,
    (fixed, cpu_vertices): (Option<&[usize]>, &[usize]),
    exact_fits: bool,
    started: std::time::Instant,
    notes: &mut Vec<String>,
) -> Option<(Labelled, usize)> {
    let exact_deadline = req.time_limit.map(|l| started + l * 2 / 3);
    if req.samples.is_some() {
        notes.push("sampled on request (--samples)".to_string());
        None
    } else if !exact_fits {
        notes.push("the number of placements exceeds 128 bits: sampled".to_string());
        None
    } else {
        let r = exact_count(prepared, &req.threads, fixed, cpu_vertices, exact_deadline);
        if r.is_none() {
            if exact_deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                notes.push(format!(
                    "the exact count did not finish in {:.2} s of the {:.2} s given: sampled",
                    started.elapsed().as_secs_f64(),
                    req.time_limit.unwrap_or_default().as_secs_f64()
                ));
            } else {
                notes.push(format!(
                    "the exact count needs more than {STATE_CAP} load vectors per step (or its work cap): sampled"
                ));
            }
        }
        r
    }
}

/// Draws placements (within the sample and time bounds) and fills
/// `result`'s classes with their shares and Wilson intervals.
fn sample_classes(
    prepared: &Prepared,
    req: &PdmRequest,
    (fixed, cpu_vertices): (Option<&[usize]>, &[usize]),
    started: std::time::Instant,
    result: &mut PdmResult,
) {
    let w = req.class_width;
    let wanted = req.samples.unwrap_or(DEFAULT_SAMPLES).clamp(1, MAX_SAMPLES);
    let items = (result.threads * req.quantities.len()) as u64;
    let bounded = wanted.min((MAX_SAMPLED_ITEMS / items).max(1));
    if bounded < wanted {
        result.notes.push(format!(
            "{bounded} placements drawn instead of {wanted} to bound the time ({items} quantities each): the intervals are wider"
        ));
    }
    let deadline = req.time_limit.map(|l| started + l);
    let (drawn, samples) = sample(
        prepared,
        &req.threads,
        fixed,
        cpu_vertices,
        result.threads,
        (bounded, bounded.min(MIN_TIMED_SAMPLES)),
        req.seed,
        deadline,
    );
    if samples < bounded {
        result.notes.push(format!(
            "{samples} placements drawn instead of {bounded}: the time given ran out"
        ));
    }
    result.samples = Some(samples);
    result.seed = Some(req.seed);
    result.classes = drawn
        .into_iter()
        .map(|(k, (count, examples))| {
            let p = count as f64 / samples as f64;
            PdmClass {
                class: k,
                low: k as f64 * w,
                high: (k + 1) as f64 * w,
                count,
                share: p,
                interval: Some(wilson(p, samples as f64)),
                examples: examples.iter().map(|e| e.label.clone()).collect(),
                example_placements: examples,
            }
        })
        .collect();
}

/// The 95% Wilson score interval of a share `p` seen in `n` samples.
pub fn wilson(p: f64, n: f64) -> [f64; 2] {
    let z2 = Z95 * Z95;
    let d = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / d;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / d;
    [(centre - half).max(0.0), (centre + half).min(1.0)]
}

type Labelled = BTreeMap<u64, (u128, Vec<Example>)>;

#[cfg(test)]
mod tests {
    use super::*;

    fn model(n: usize, cpuless: &[usize], links: &[(u32, u32)]) -> Model {
        let nodes: Vec<u32> = (0..n as u32).collect();
        let cpu: Vec<bool> = (0..n).map(|i| !cpuless.contains(&i)).collect();
        Model::new(&nodes, &cpu, links, true).unwrap()
    }

    fn req(qs: Vec<Quantity>, threads: ThreadPlacement, width: f64) -> PdmRequest {
        PdmRequest {
            workload: "test".into(),
            quantities: qs,
            threads,
            links: None,
            class_width: width,
            samples: None,
            seed: 7,
            time_limit: None,
        }
    }

    /// Every placement enumerated, classes from the real-valued loads.
    fn brute(m: &Model, r: &PdmRequest) -> BTreeMap<u64, u128> {
        let cpus: Vec<usize> = (0..m.nodes.len()).filter(|&v| m.cpu[v]).collect();
        let layouts: Vec<Vec<usize>> = match &r.threads {
            ThreadPlacement::OnePerNode => permutations(&cpus),
            ThreadPlacement::Fixed(t) => vec![t.iter().map(|&i| i as usize).collect()],
            ThreadPlacement::Any(n) => {
                let mut all = vec![vec![]];
                for _ in 0..*n {
                    all = all
                        .into_iter()
                        .flat_map(|l: Vec<usize>| {
                            cpus.iter().map(move |&c| {
                                let mut x = l.clone();
                                x.push(c);
                                x
                            })
                        })
                        .collect();
                }
                all
            }
        };
        let v = m.nodes.len();
        let q = r.quantities.len();
        let mut out = BTreeMap::new();
        for layout in layouts {
            let items = layout.len() * q;
            for code in 0..v.pow(items as u32) {
                let mut x = code;
                let memory: Vec<Vec<usize>> = (0..layout.len())
                    .map(|_| {
                        (0..q)
                            .map(|_| {
                                let d = x % v;
                                x /= v;
                                d
                            })
                            .collect()
                    })
                    .collect();
                let loads = m.loads(&r.quantities, &layout, &memory);
                let max = loads.iter().copied().fold(0.0, f64::max);
                let k = (max / r.class_width + 1e-9).floor() as u64;
                *out.entry(k).or_insert(0u128) += 1;
            }
        }
        out
    }

    fn permutations(v: &[usize]) -> Vec<Vec<usize>> {
        if v.len() <= 1 {
            return vec![v.to_vec()];
        }
        let mut out = Vec::new();
        for i in 0..v.len() {
            let mut rest = v.to_vec();
            let x = rest.remove(i);
            for mut p in permutations(&rest) {
                p.insert(0, x);
                out.push(p);
            }
        }
        out
    }

    fn counts(r: &PdmResult) -> BTreeMap<u64, u128> {
        r.classes.iter().map(|c| (c.class, c.count)).collect()
    }

    fn graphs() -> Vec<(&'static str, Model)> {
        vec![
            (
                "ring of 4",
                model(4, &[], &[(0, 1), (1, 2), (2, 3), (3, 0)]),
            ),
            ("line of 3", model(3, &[], &[(0, 1), (1, 2)])),
            ("star", model(4, &[], &[(0, 1), (0, 2), (0, 3)])),
            (
                "complete 4",
                model(4, &[], &[(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]),
            ),
            (
                "ring of 3 with a CPU-less leaf",
                model(4, &[3], &[(0, 1), (1, 2), (2, 0), (3, 0)]),
            ),
        ]
    }

    #[test]
    fn fast_path_equals_brute_force_on_small_graphs() {
        let rw = named_quantities(&[Direction::Read, Direction::Write], &[1.0, 1.0]);
        let mixed = named_quantities(&[Direction::Read, Direction::Both], &[1.0, 0.5]);
        for (name, m) in graphs() {
            let cases = [
                req(rw.clone(), ThreadPlacement::OnePerNode, 1.0),
                req(mixed.clone(), ThreadPlacement::OnePerNode, 0.5),
                req(rw.clone(), ThreadPlacement::Any(2), 1.0),
                req(mixed.clone(), ThreadPlacement::Fixed(vec![0, 0, 1]), 1.0),
            ];
            for r in cases {
                let got = count(&m, &r).unwrap();
                assert!(got.exact, "{name}");
                let want = brute(&m, &r);
                assert_eq!(
                    counts(&got),
                    want,
                    "{name}: {:?} {:?}",
                    r.threads,
                    r.quantities
                );
                let total: u128 = want.values().sum();
                assert_eq!(got.total_placements, Total::Exact(total), "{name}");
                let shares: f64 = got.classes.iter().map(|c| c.share).sum();
                assert!(
                    (shares - 1.0).abs() < 1e-12,
                    "{name}: shares sum to {shares}"
                );
                for c in &got.classes {
                    assert!(!c.examples.is_empty() && c.examples.len() <= 3, "{name}");
                }
            }
        }
    }

    #[test]
    fn examples_lie_in_their_class() {
        let m = model(4, &[], &[(0, 1), (1, 2), (2, 3), (3, 0)]);
        let r = req(
            kernel_quantities("copy").unwrap(),
            ThreadPlacement::OnePerNode,
            1.0,
        );
        let got = count(&m, &r).unwrap();
        for c in &got.classes {
            for e in &c.examples {
                // Parse `T0@0:a→1,b→2 T1@...` back into a placement.
                let mut layout = Vec::new();
                let mut memory = Vec::new();
                for t in e.split(' ') {
                    let (head, qs) = t.split_once(':').unwrap();
                    layout.push(head.split_once('@').unwrap().1.parse::<usize>().unwrap());
                    memory.push(
                        qs.split(',')
                            .map(|x| x.split_once('→').unwrap().1.parse::<usize>().unwrap())
                            .collect::<Vec<_>>(),
                    );
                }
                let max = m
                    .loads(&r.quantities, &layout, &memory)
                    .into_iter()
                    .fold(0.0, f64::max);
                assert_eq!(max.floor() as u64, c.class, "{e}");
            }
        }
    }

    #[test]
    fn opposite_nodes_of_a_ring_split_over_both_paths() {
        let m = model(4, &[], &[(0, 1), (1, 2), (2, 3), (0, 3)]);
        let q = named_quantities(&[Direction::Read], &[2.0]);
        // A thread on node 0 reading from node 2: 2→1→0 and 2→3→0, w/2 each.
        let loads = m.loads(&q, &[0], &[vec![2]]);
        // Edges sorted: (0,1)=e0, (0,3)=e1, (1,2)=e2, (2,3)=e3; arc 2e = low→high.
        let arc = |a: usize, b: usize| {
            let e = m
                .edges
                .iter()
                .position(|&x| x == (a.min(b), a.max(b)))
                .unwrap();
            2 * e + usize::from(a > b)
        };
        assert_eq!(loads[arc(2, 1)], 1.0);
        assert_eq!(loads[arc(1, 0)], 1.0);
        assert_eq!(loads[arc(2, 3)], 1.0);
        assert_eq!(loads[arc(3, 0)], 1.0);
        assert_eq!(loads[arc(0, 1)], 0.0, "reads move memory to CPU only");
        assert_eq!(loads[8 + 2], 2.0, "the controller of node 2 carries all");
        assert_eq!(loads.iter().sum::<f64>(), 6.0);
        // Writing moves the other way.
        let w = named_quantities(&[Direction::Write], &[2.0]);
        let loads = m.loads(&w, &[0], &[vec![2]]);
        assert_eq!(loads[arc(0, 1)], 1.0);
        assert_eq!(loads[arc(1, 0)], 0.0);
    }

    #[test]
    fn cpu_less_nodes_do_not_route() {
        // 0 - 2(CPU-less) - 1 and 0 - 1 directly: traffic 0→1 never uses 2.
        let m = model(3, &[2], &[(0, 2), (2, 1), (0, 1)]);
        let q = named_quantities(&[Direction::Write], &[1.0]);
        let loads = m.loads(&q, &[0], &[vec![1]]);
        assert_eq!(loads.iter().sum::<f64>(), 2.0, "{loads:?}");
        // Without the direct link, node 0 cannot reach node 1.
        let nodes = [0, 1, 2];
        let e = Model::new(&nodes, &[true, true, false], &[(0, 2), (2, 1)], true);
        assert!(matches!(e, Err(PdmError::Invalid(ref s)) if s.contains("cannot reach")));
    }

    #[test]
    fn monte_carlo_intervals_cover_the_exact_shares() {
        let m = model(4, &[], &[(0, 1), (1, 2), (2, 3), (3, 0)]);
        let mut r = req(
            kernel_quantities("triad").unwrap(),
            ThreadPlacement::Any(2),
            1.0,
        );
        let exact = count(&m, &r).unwrap();
        r.samples = Some(250_000);
        let mc = count(&m, &r).unwrap();
        assert!(exact.exact && !mc.exact);
        assert_eq!(mc.samples, Some(250_000));
        let drawn: u128 = mc.classes.iter().map(|c| c.count).sum();
        assert_eq!(drawn, 250_000);
        for c in &exact.classes {
            let s = mc.classes.iter().find(|x| x.class == c.class);
            let [lo, hi] = s.and_then(|x| x.interval).unwrap_or([0.0, 3.0 / 250_000.0]);
            assert!(
                lo <= c.share && c.share <= hi,
                "class {}: {} not in [{lo}, {hi}]",
                c.class,
                c.share
            );
            assert!(hi - lo <= 0.004 + 1e-12, "interval too wide: {lo} {hi}");
        }
    }

    #[test]
    fn the_study_case_on_a_ring_is_exact() {
        let m = model(4, &[], &[(0, 1), (1, 2), (2, 3), (3, 0)]);
        let r = req(
            kernel_quantities("triad").unwrap(),
            ThreadPlacement::OnePerNode,
            1.0,
        );
        let got = count(&m, &r).unwrap();
        assert!(got.exact);
        assert_eq!(got.total_placements, Total::Exact(4u128.pow(12) * 24));
        assert_eq!(counts(&got).values().sum::<u128>(), 4u128.pow(12) * 24);
        // Every controller gets 3 units at best (12 quantities, 4 nodes).
        assert_eq!(got.classes[0].class, 3);
    }

    /// Tables 4 (copy) and 5 (triad) of the 2007 study: the share of
    /// placements in each contention class on the Quartet ring, one thread
    /// per node, in percent to one decimal. Modelling the written array
    /// one way only gives 3.8 / 51.3 / 34.0 for copy's first classes.
    #[test]
    fn the_quartet_gives_the_2007_studys_tables() {
        let m = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let tables: [(&str, u64, &[f64]); 2] = [
            ("copy", 2, &[2.6, 51.9, 34.6, 9.2, 1.5]),
            ("triad", 3, &[1.9, 38.1, 38.2, 16.0]),
        ];
        for (kernel, first, table) in tables {
            let qs = kernel_quantities(kernel).unwrap();
            assert_eq!(qs.last().unwrap().direction, Direction::Both);
            let r = run_pdm(&m, &req(qs, ThreadPlacement::OnePerNode, 1.0)).unwrap();
            assert!(r.exact, "{kernel}");
            assert_eq!(r.classes[0].class, first, "{kernel}");
            for (i, &want) in table.iter().enumerate() {
                let c = &r.classes[i];
                assert_eq!(c.class, first + i as u64);
                let got = c.share * 100.0;
                assert!(
                    (got - want).abs() < 0.05,
                    "{kernel} class {}-{}: {got:.3}% against the table's {want}%",
                    c.class,
                    c.class + 1
                );
            }
        }
    }

    #[test]
    fn parsers_refuse_bad_input_with_the_valid_choices() {
        let e = |r: Result<Vec<(u32, u32)>, PdmError>| r.unwrap_err().to_string();
        assert_eq!(e(parse_links("0-0")), "--links: 0-0 links a node to itself");
        assert_eq!(e(parse_links("0-1,1-0")), "--links: 0-1 is given twice");
        assert!(e(parse_links("0:1")).contains("write A-B"));
        assert_eq!(parse_links("0-1, 2-1").unwrap(), vec![(0, 1), (1, 2)]);
        assert!(parse_weights("1,0", 2)
            .unwrap_err()
            .to_string()
            .contains("above 0"));
        assert!(parse_weights("1,nan", 2).is_err());
        assert!(parse_weights("1.0001", 1).is_err());
        assert_eq!(parse_weights("1,2.5", 2).unwrap(), vec![1.0, 2.5]);
        assert!(parse_weights("1", 2)
            .unwrap_err()
            .to_string()
            .contains("1 given for 2"));
        assert!(parse_directions("r,x", 2)
            .unwrap_err()
            .to_string()
            .contains("valid: r, w, both"));
        assert!(kernel_quantities("dgemm")
            .unwrap_err()
            .to_string()
            .contains("copy, scale, add, triad"));
        let nodes = [0, 1, 2];
        let m = Model::new(&nodes, &[true; 3], &[(0, 1)], true);
        assert!(matches!(m, Err(PdmError::Invalid(_))), "disconnected");
        let m = Model::new(&nodes, &[true; 3], &[(0, 5)], true);
        assert!(m
            .unwrap_err()
            .to_string()
            .contains("node 5 is not on this machine (nodes: 0,1,2)"));
    }

    /// A STREAM kernel's arrays, one thread per CPU node, seed 1.
    fn kernel_request(kernel: &str, time_limit: Option<std::time::Duration>) -> PdmRequest {
        PdmRequest {
            workload: kernel.into(),
            quantities: kernel_quantities(kernel).unwrap(),
            threads: ThreadPlacement::OnePerNode,
            links: None,
            class_width: 1.0,
            samples: None,
            seed: 1,
            time_limit,
        }
    }

    /// A count given no time is sampled (at least MIN_TIMED_SAMPLES draws,
    /// shares with intervals, the reason in its notes); one given time
    /// enough is the exact count.
    #[test]
    fn a_count_past_its_time_limit_is_sampled_and_says_so() {
        let m = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let req = |limit| kernel_request("triad", limit);
        let cut = run_pdm(&m, &req(Some(std::time::Duration::from_nanos(1)))).unwrap();
        assert!(!cut.exact);
        assert_eq!(cut.total_placements, Total::Exact(402_653_184));
        let n = cut.samples.unwrap();
        assert!((MIN_TIMED_SAMPLES..DEFAULT_SAMPLES).contains(&n), "{n}");
        let drawn: u128 = cut.classes.iter().map(|c| c.count).sum();
        assert_eq!(drawn, u128::from(n));
        assert!(cut.classes.iter().all(|c| c.interval.is_some()));
        assert!(
            cut.notes[0].starts_with("the exact count did not finish in ")
                && cut.notes[0].ends_with(" s of the 0.00 s given: sampled"),
            "{:?}",
            cut.notes
        );
        assert_eq!(
            cut.notes[1],
            format!("{n} placements drawn instead of {DEFAULT_SAMPLES}: the time given ran out")
        );
        let whole = run_pdm(&m, &req(Some(std::time::Duration::from_secs(600)))).unwrap();
        assert!(whole.exact, "{:?}", whole.notes);
        let counts = |r: &PdmResult| {
            r.classes
                .iter()
                .map(|c| (c.class, c.count))
                .collect::<Vec<_>>()
        };
        assert_eq!(counts(&whole), counts(&run_pdm(&m, &req(None)).unwrap()));
    }

    #[test]
    fn draws_lie_in_their_class_and_fill_every_class_of_the_quartet_copy() {
        let m = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let r = kernel_request("copy", None);
        let counted = run_pdm(&m, &r).unwrap();
        let draws = draw_by_class(&m, &r, 5, 3).unwrap();
        assert_eq!(
            draws.iter().map(|d| d.class).collect::<Vec<_>>(),
            counted.classes.iter().map(|c| c.class).collect::<Vec<_>>()
        );
        let model = model_of(&m, &r).unwrap();
        for d in &draws {
            // Every class of copy on four nodes is common enough to fill.
            assert_eq!(d.placements.len(), 5, "class {}", d.class);
            for p in &d.placements {
                assert!(p.contention >= d.low && p.contention < d.high, "{p:?}");
                assert_eq!(p.thread_nodes.len(), 4);
                let mut nodes = p.thread_nodes.clone();
                nodes.sort_unstable();
                assert_eq!(nodes, vec![0, 1, 2, 3], "one thread per node");
                let layout: Vec<usize> = p.thread_nodes.iter().map(|&n| n as usize).collect();
                let memory: Vec<Vec<usize>> = p
                    .memory
                    .iter()
                    .map(|q| q.iter().map(|&n| n as usize).collect())
                    .collect();
                let max = model
                    .loads(&r.quantities, &layout, &memory)
                    .into_iter()
                    .fold(0.0, f64::max);
                assert!((max - p.contention).abs() < 1e-9, "{p:?} vs {max}");
            }
        }
        assert!(draw_by_class(&m, &r, 0, 3)
            .unwrap_err()
            .to_string()
            .contains("valid: 1 to 1000"));
    }

    #[test]
    fn a_class_too_rare_to_draw_gets_the_counts_examples() {
        let m = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let r = kernel_request("triad", None);
        let draws = draw_by_class(&m, &r, 10, 5).unwrap();
        // Every array on one node: 4 nodes x 4! orders of 402653184.
        let top = draws.last().unwrap();
        assert_eq!((top.low, top.wanted), (12.0, 10));
        assert!((top.share - 96.0 / 402_653_184.0).abs() < 1e-15);
        // About one uniform draw in 4,000,000 meets it; three distinct
        // examples of the count join the draws.
        let n = top.placements.len();
        assert!((3..10).contains(&n), "{n}");
        for p in &top.placements {
            assert!(p.contention >= 12.0 && p.contention < 13.0, "{p:?}");
            let first = p.memory[0][0];
            assert!(p.memory.iter().flatten().all(|&n| n == first), "{p:?}");
        }
        assert!(
            top.placements.iter().any(|p| !p.drawn),
            "{:?}",
            top.placements
        );
        // Common classes are random draws only.
        assert!(draws[0].placements.iter().all(|p| p.drawn));
    }
}
