//! The machine as the model sees it: nodes, arcs and the shortest routes
//! between CPU nodes and memory nodes, with loads in integer units.

use super::{Direction, PdmError, Quantity, MAX_SCALE, MILLI};
use std::collections::VecDeque;

/// The graph and its routes, with loads in integer units.
#[derive(Debug)]
pub(crate) struct Model {
    pub(super) nodes: Vec<u32>,
    pub(super) cpu: Vec<bool>,
    pub(super) edges: Vec<(usize, usize)>,
    /// `routes[c][m]`: (arc in the direction c → m, paths through it, total paths).
    routes: Vec<Vec<Option<Route>>>,
    /// The least common multiple of all path counts.
    pub(super) scale: u64,
}

#[derive(Debug, Clone)]
struct Route {
    total: u64,
    arcs: Vec<(usize, u64)>,
}

impl Model {
    pub(super) fn resources(&self) -> usize {
        2 * self.edges.len() + self.nodes.len()
    }

    pub(super) fn vertex(&self, id: u32) -> Option<usize> {
        self.nodes.iter().position(|&n| n == id)
    }

    /// Builds the graph from the machine's nodes and `links` (os indexes).
    pub(crate) fn new(
        nodes: &[u32],
        cpu: &[bool],
        links: &[(u32, u32)],
        given: bool,
    ) -> Result<Self, PdmError> {
        let opt = if given {
            "--links"
        } else {
            "the interconnect graph"
        };
        let known = nodes
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let index = |id: u32| -> Result<usize, PdmError> {
            nodes.iter().position(|&n| n == id).ok_or_else(|| {
                PdmError::Invalid(format!(
                    "{opt}: node {id} is not on this machine (nodes: {known})"
                ))
            })
        };
        let mut edges = Vec::new();
        for &(a, b) in links {
            let (i, j) = (index(a)?, index(b)?);
            edges.push((i.min(j), i.max(j)));
        }
        edges.sort_unstable();
        edges.dedup();
        let v = nodes.len();
        let mut adj: Vec<Vec<(usize, usize)>> = vec![Vec::new(); v];
        for (e, &(a, b)) in edges.iter().enumerate() {
            adj[a].push((b, e));
            adj[b].push((a, e));
        }
        let model_err = |msg: String| {
            if given {
                PdmError::Invalid(msg)
            } else {
                PdmError::Failed(format!("{msg}; give the links with --links"))
            }
        };
        let bfs_all: Vec<(Vec<Option<u32>>, Vec<u128>)> =
            (0..v).map(|s| bfs(s, &adj, cpu)).collect();
        let mut routes = vec![vec![None; v]; v];
        let mut scale: u64 = 1;
        for c in (0..v).filter(|&c| cpu[c]) {
            let (dc, sc) = &bfs_all[c];
            for m in 0..v {
                let Some(dist) = dc[m] else {
                    return Err(model_err(format!(
                        "{opt}: node {} cannot reach node {} without passing through a CPU-less node or at all (links must connect every node)",
                        nodes[c], nodes[m]
                    )));
                };
                let (dm, sm) = &bfs_all[m];
                let total = u64::try_from(sc[m]).unwrap_or(u64::MAX);
                let mut arcs = Vec::new();
                for (e, &(a, b)) in edges.iter().enumerate() {
                    for (u, w, arc) in [(a, b, 2 * e), (b, a, 2 * e + 1)] {
                        let on_path =
                            matches!((dc[u], dm[w]), (Some(x), Some(y)) if x + 1 + y == dist);
                        if on_path && (u == c || cpu[u]) && (w == m || cpu[w]) {
                            let through = sc[u].saturating_mul(sm[w]);
                            arcs.push((arc, u64::try_from(through).unwrap_or(u64::MAX)));
                        }
                    }
                }
                scale = lcm(scale, total).ok_or_else(|| {
                    PdmError::Failed(format!(
                        "{opt}: the shortest-path counts are too irregular for exact loads (their common multiple exceeds {MAX_SCALE})"
                    ))
                })?;
                routes[c][m] = Some(Route { total, arcs });
            }
        }
        if !cpu.iter().any(|&c| c) {
            return Err(PdmError::Failed("the machine has no CPU node".into()));
        }
        Ok(Self {
            nodes: nodes.to_vec(),
            cpu: cpu.to_vec(),
            edges,
            routes,
            scale,
        })
    }

    /// The loads a quantity of `milli` thousandths adds, in units of
    /// `1 / (1000 · scale)`: (resource, amount), arcs first, then controllers.
    pub(super) fn contribution(
        &self,
        c: usize,
        m: usize,
        milli: u64,
        dir: Direction,
    ) -> Vec<(usize, u64)> {
        let unit = milli * self.scale;
        let route = self.routes[c][m]
            .as_ref()
            .expect("routes exist from CPU nodes");
        let mut out = vec![(2 * self.edges.len() + m, unit)];
        for &(arc, through) in &route.arcs {
            let amount = unit / route.total * through;
            if matches!(dir, Direction::Write | Direction::Both) {
                out.push((arc, amount));
            }
            if matches!(dir, Direction::Read | Direction::Both) {
                out.push((arc ^ 1, amount));
            }
        }
        out
    }

    /// The directed links a line from CPU node `c` to memory node `m`
    /// crosses, as `((from, to), share)` in the direction `c → m` (os
    /// indexes): the share of the shortest paths through each, so equal
    /// paths split the traffic as PDM does. `None` when `c` is not a CPU
    /// node of the graph or `m` not a node; empty when `c == m`.
    pub(crate) fn arc_shares(&self, c: u32, m: u32) -> Option<Vec<((u32, u32), f64)>> {
        let (ci, mi) = (self.vertex(c)?, self.vertex(m)?);
        let route = self.routes[ci][mi].as_ref()?;
        Some(
            route
                .arcs
                .iter()
                .map(|&(arc, through)| {
                    let (a, b) = self.edges[arc / 2];
                    let (from, to) = if arc % 2 == 0 { (a, b) } else { (b, a) };
                    (
                        (self.nodes[from], self.nodes[to]),
                        through as f64 / route.total as f64,
                    )
                })
                .collect(),
        )
    }

    /// The graph's links as node pairs (os indexes), each once.
    pub(crate) fn links(&self) -> Vec<(u32, u32)> {
        self.edges
            .iter()
            .map(|&(a, b)| (self.nodes[a], self.nodes[b]))
            .collect()
    }

    /// Real-valued loads of one placement (arcs `2e` = a→b, `2e+1` = b→a of
    /// edge `e`, then controllers), for tests and examples.
    pub(crate) fn loads(
        &self,
        quantities: &[Quantity],
        thread_nodes: &[usize],
        memory: &[Vec<usize>],
    ) -> Vec<f64> {
        let mut l = vec![0u64; self.resources()];
        for (t, &c) in thread_nodes.iter().enumerate() {
            for (q, qty) in quantities.iter().enumerate() {
                for (r, a) in self.contribution(c, memory[t][q], milli(qty.weight), qty.direction) {
                    l[r] += a;
                }
            }
        }
        let unit = (MILLI * self.scale) as f64;
        l.iter().map(|&x| x as f64 / unit).collect()
    }
}

pub(super) fn milli(x: f64) -> u64 {
    (x * MILLI as f64).round() as u64
}

pub(super) fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: u64, b: u64) -> Option<u64> {
    let l = (a / gcd(a, b)).checked_mul(b)?;
    (l <= MAX_SCALE).then_some(l)
}

/// Distances and shortest-path counts from `s`; only `s` and CPU nodes are
/// passed through.
fn bfs(s: usize, adj: &[Vec<(usize, usize)>], cpu: &[bool]) -> (Vec<Option<u32>>, Vec<u128>) {
    let mut dist = vec![None; adj.len()];
    let mut sigma = vec![0u128; adj.len()];
    dist[s] = Some(0);
    sigma[s] = 1;
    let mut queue = VecDeque::from([s]);
    while let Some(u) = queue.pop_front() {
        if u != s && !cpu[u] {
            continue;
        }
        let du = dist[u].unwrap_or(0);
        for &(w, _) in &adj[u] {
            match dist[w] {
                None => {
                    dist[w] = Some(du + 1);
                    sigma[w] = sigma[u];
                    queue.push_back(w);
                }
                Some(dw) if dw == du + 1 => sigma[w] = sigma[w].saturating_add(sigma[u]),
                _ => {}
            }
        }
    }
    (dist, sigma)
}
