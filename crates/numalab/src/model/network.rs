//! The machine as resources (memory controllers, directed links), threads
//! as flows over them, and the traffic model that turns one into the
//! other.
//!
//! Traffic model, per line a thread accesses on memory node `m`:
//! - `m`'s controller moves `memory_lines` lines (a read 1; a write 2:
//!   write-allocate reads the line, write-back writes it);
//! - each link of the shortest paths toward `m` carries the request-side
//!   bytes (requests, probes, written data), each link back the
//!   response-side bytes (data, responses), in the shares of the paths
//!   through it (equal paths split the traffic, as PDM does). Bytes per
//!   line come from the link loads measured on one thread alone.
//!
//! A thread alone runs at its local rate divided by its hop factor; it
//! keeps `in_flight` requests going scaled by its local rate (Little's law
//! at equal latency: a thread asking twice the bandwidth keeps twice the
//! lines in flight; a farther one is slower and waits longer, so it keeps
//! as many). Its time outside the resources follows from its rate alone,
//! so a thread alone always runs at exactly its measured rate.

use super::mva::{self, Class};
use super::params::ModelParams;
use crate::experiments::pdm::{machine_model, Model};
use crate::machine::Machine;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Most flows one prediction takes.
pub const MAX_FLOWS: usize = 4096;

/// A resource of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Resource {
    /// A memory node's controller.
    Controller { node: u32 },
    /// One direction of a link.
    Link { from: u32, to: u32 },
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Controller { node } => write!(f, "node {node}'s memory controller"),
            Resource::Link { from, to } => write!(f, "link {from}->{to}"),
        }
    }
}

/// A thread (or a paced background thread) as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    /// How results name it: `0.0.w.1`, `background on CPU 5`.
    pub label: String,
    /// The node of its CPU.
    pub cpu_node: u32,
    /// Memory nodes and the share of its lines on each (shares sum to 1).
    pub memory: Vec<(u32, f64)>,
    /// Share of its lines written (0 reads only, 1 writes only).
    pub write_share: f64,
    /// GB/s it asks for when paced (a background thread); `None`: as fast
    /// as it can.
    pub pace_gbps: Option<f64>,
}

impl Flow {
    /// A thread streaming through memory on one node.
    pub fn stream(label: String, cpu_node: u32, mem: u32, write: bool) -> Flow {
        Flow {
            label,
            cpu_node,
            memory: vec![(mem, 1.0)],
            write_share: if write { 1.0 } else { 0.0 },
            pace_gbps: None,
        }
    }

    /// A paced reader of its own node's memory, as `sweep`'s background.
    pub fn background(label: String, node: u32, gbps: f64) -> Flow {
        Flow {
            label,
            cpu_node: node,
            memory: vec![(node, 1.0)],
            write_share: 0.0,
            pace_gbps: Some(gbps),
        }
    }
}

/// One resource's load at the fixed point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceLoad {
    pub resource: Resource,
    /// Label for text: `link 0->1`.
    pub name: String,
    pub capacity_gbps: f64,
    pub gbps: f64,
    pub utilisation: f64,
}

/// One flow's predicted outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowResult {
    pub label: String,
    /// Lines per second it gets, as GB/s of its data.
    pub gbps: f64,
    /// GB/s alone on the idle machine.
    pub alone_gbps: f64,
    /// Time over its time alone (≥ 1 where it shares something).
    pub slowdown: f64,
    /// ns per line: its time for a fixed amount of work, comparable
    /// across threads.
    pub ns_per_line: f64,
    /// Where it waits longest beyond service, and that wait's share of
    /// its time per request; `None` when it waits nowhere measurably.
    pub waits_most_at: Option<String>,
    pub wait_share: f64,
}

/// A whole prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub flows: Vec<FlowResult>,
    /// Every resource some flow crosses, busiest first.
    pub loads: Vec<ResourceLoad>,
    /// The busiest resource.
    pub bottleneck: Option<ResourceLoad>,
    pub iterations: usize,
}

/// A directed link `(from, to)` and the share of a route's traffic on it.
type Arc = ((u32, u32), f64);

/// The machine's resources with their capacities and routes.
#[derive(Debug)]
pub struct Network {
    params: ModelParams,
    model: Model,
    resources: Vec<Resource>,
    capacity: Vec<f64>,
}

impl Network {
    /// The network of `machine` under `params` (its links, or the
    /// machine's interconnect graph).
    pub fn new(machine: &Machine, params: ModelParams) -> Result<Network, String> {
        params.check()?;
        // PDM names its own option in its errors; here the links are the
        // parameter file's.
        let model = machine_model(machine, params.links.as_deref())
            .map_err(|e| e.to_string().replace("--links", "the parameters' links"))?;
        let mut resources = Vec::new();
        let mut capacity = Vec::new();
        for n in machine.memory_nodes().iter() {
            resources.push(Resource::Controller { node: n });
            capacity.push(params.controller_of(n));
        }
        for (a, b) in model.links() {
            for (from, to) in [(a, b), (b, a)] {
                resources.push(Resource::Link { from, to });
                capacity.push(params.link_of(from, to));
            }
        }
        for l in &params.link_overrides {
            if !resources.contains(&Resource::Link {
                from: l.from,
                to: l.to,
            }) {
                return Err(format!(
                    "link_overrides: {}->{} is not a link of the graph",
                    l.from, l.to
                ));
            }
        }
        Ok(Network {
            params,
            model,
            resources,
            capacity,
        })
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &ModelParams {
        &self.params
    }

    /// Every resource, controllers first.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    fn index(&self, r: Resource) -> Option<usize> {
        self.resources.iter().position(|&x| x == r)
    }

    /// Lines per ns a thread of this access streams alone, locally.
    fn local_rate(&self, write: bool) -> f64 {
        let t = self.params.traffic(write);
        t.controller_gbps / (t.memory_lines * self.params.line_bytes)
    }

    /// The arcs from `c` to `m` along the graph's shortest paths, each
    /// with the share of the traffic it carries, and the hops (the shares
    /// sum to the path length).
    fn route(&self, c: u32, m: u32) -> Result<(Vec<Arc>, u32), String> {
        let arcs = self.model.arc_shares(c, m).ok_or_else(|| {
            format!("node {c} has no CPUs or node {m} is not a node of the model")
        })?;
        let hops = arcs.iter().map(|a| a.1).sum::<f64>().round() as u32;
        Ok((arcs, hops))
    }

    /// The solver's class for `flow`, and its rate alone (lines per ns).
    fn class(&self, flow: &Flow) -> Result<(Class, f64), String> {
        let p = &self.params;
        let mut demand: Vec<(usize, f64)> = Vec::new();
        let mut add = |k: usize, d: f64| match demand.iter_mut().find(|e| e.0 == k) {
            Some(e) => e.1 += d,
            None => demand.push((k, d)),
        };
        let mut ns_alone = 0.0;
        let mut ns_local = 0.0;
        let share_sum: f64 = flow.memory.iter().map(|m| m.1).sum();
        if flow.memory.is_empty()
            || flow.memory.iter().any(|m| !(m.1.is_finite() && m.1 >= 0.0))
            || (share_sum - 1.0).abs() > 1e-6
        {
            return Err(format!(
                "{}: memory shares must be 0 or more and sum to 1",
                flow.label
            ));
        }
        if !(0.0..=1.0).contains(&flow.write_share) {
            return Err(format!("{}: the written share must be 0 to 1", flow.label));
        }
        for &(mem, share) in &flow.memory {
            let controller = self
                .index(Resource::Controller { node: mem })
                .ok_or_else(|| format!("{}: node {mem} has no memory", flow.label))?;
            let (arcs, hops) = self.route(flow.cpu_node, mem)?;
            for (write, q) in [(false, 1.0 - flow.write_share), (true, flow.write_share)] {
                let q = q * share;
                if q == 0.0 {
                    continue;
                }
                let t = p.traffic(write);
                let local = self.local_rate(write);
                ns_alone += q * p.hop_factor(hops) / local;
                ns_local += q / local;
                add(
                    controller,
                    q * t.memory_lines * p.line_bytes / self.capacity[controller],
                );
                // Link bytes per line, from the loads of a thread alone at
                // the hops they were measured at.
                let measured_rate = local / p.hop_factor(t.measured_hops);
                let out_bytes = t.toward_memory_gbps / measured_rate;
                let back_bytes = t.toward_thread_gbps / measured_rate;
                for &((from, to), through) in &arcs {
                    let there = self
                        .index(Resource::Link { from, to })
                        .ok_or_else(|| format!("link {from}->{to} is missing"))?;
                    let back = self
                        .index(Resource::Link { from: to, to: from })
                        .ok_or_else(|| format!("link {to}->{from} is missing"))?;
                    add(there, q * through * out_bytes / self.capacity[there]);
                    add(back, q * through * back_bytes / self.capacity[back]);
                }
            }
        }
        let reader = self.local_rate(false);
        let (alone, local_rate) = match flow.pace_gbps {
            Some(g) => {
                if !(g.is_finite() && g > 0.0 && g <= super::params::MAX_GBPS) {
                    return Err(format!("{}: pace {g} GB/s is out of range", flow.label));
                }
                (g / p.line_bytes, g / p.line_bytes)
            }
            None => (1.0 / ns_alone, 1.0 / ns_local),
        };
        let in_flight = (p.in_flight * local_rate / reader).max(1.0);
        // Time outside the resources: what is left of the cycle alone once
        // the thread's own service and queueing (Schweitzer, one class) are
        // taken out. A thread that alone would fill a resource is held just
        // below it.
        let mut cycle_resources = 0.0;
        let mut alone = alone;
        for &(_, d) in &demand {
            alone = alone.min(0.999 / d.max(f64::MIN_POSITIVE));
        }
        for &(_, d) in &demand {
            let u = (in_flight - 1.0) / in_flight * alone * d;
            cycle_resources += d / (1.0 - u);
        }
        let think = (in_flight / alone - cycle_resources).max(0.0);
        Ok((
            Class {
                in_flight,
                think,
                demand,
            },
            alone,
        ))
    }

    /// Predicts `flows` running together.
    pub fn predict(&self, flows: &[Flow]) -> Result<Prediction, String> {
        if flows.is_empty() || flows.len() > MAX_FLOWS {
            return Err(format!(
                "{} threads; the model takes 1 to {MAX_FLOWS}",
                flows.len()
            ));
        }
        let mut classes = Vec::with_capacity(flows.len());
        let mut alone = Vec::with_capacity(flows.len());
        for f in flows {
            let (c, a) = self.class(f)?;
            classes.push(c);
            alone.push(a);
        }
        let s = mva::solve(&classes, self.resources.len())?;
        let line = self.params.line_bytes;
        let results = flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let c = &classes[i];
                let cycle = c.in_flight / s.rate[i];
                let worst = c
                    .demand
                    .iter()
                    .zip(&s.residence[i])
                    .map(|(&(k, d), &r)| (k, r - d))
                    .max_by(|a, b| a.1.total_cmp(&b.1));
                let (waits_most_at, wait_share) = match worst {
                    Some((k, w)) if w / cycle > 0.005 => {
                        (Some(self.resources[k].to_string()), w / cycle)
                    }
                    _ => (None, 0.0),
                };
                FlowResult {
                    label: f.label.clone(),
                    gbps: s.rate[i] * line,
                    alone_gbps: alone[i] * line,
                    slowdown: alone[i] / s.rate[i],
                    ns_per_line: 1.0 / s.rate[i],
                    waits_most_at,
                    wait_share,
                }
            })
            .collect();
        let mut used = vec![false; self.resources.len()];
        for c in &classes {
            for &(k, _) in &c.demand {
                used[k] = true;
            }
        }
        let mut loads: Vec<ResourceLoad> = (0..self.resources.len())
            .filter(|&k| used[k])
            .map(|k| ResourceLoad {
                resource: self.resources[k],
                name: self.resources[k].to_string(),
                capacity_gbps: self.capacity[k],
                gbps: s.utilisation[k] * self.capacity[k],
                utilisation: s.utilisation[k],
            })
            .collect();
        loads.sort_by(|a, b| {
            b.utilisation
                .total_cmp(&a.utilisation)
                .then(a.resource.cmp(&b.resource))
        });
        Ok(Prediction {
            flows: results,
            bottleneck: loads.first().cloned(),
            loads,
            iterations: s.iterations,
        })
    }

    /// The load of `r` in `p` (0 when no flow crosses it).
    pub fn load_of(p: &Prediction, r: Resource) -> f64 {
        p.loads
            .iter()
            .find(|l| l.resource == r)
            .map_or(0.0, |l| l.gbps)
    }
}
