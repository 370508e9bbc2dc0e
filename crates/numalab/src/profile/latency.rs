//! What a region's accesses cost in nanoseconds, from a latency matrix
//! numalab measured on this machine (`numalab profile --machine FILE`):
//! each sampled access weighed by the measured latency from its CPU node to
//! its page's node, against the same accesses all local.

use super::AccessMatrix;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// How deep in a JSON document the matrix is looked for.
const MAX_DEPTH: usize = 8;

/// Measured latency by (CPU node, memory node), ns per dependent load.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyTable {
    cells: BTreeMap<(u32, u32), f64>,
}

impl LatencyTable {
    /// The latency matrix in a numalab result: `numalab matrix --json`, a
    /// report's results.json (its latency-matrix part), or any document
    /// holding a `latency` table of cells `{cpu_node, mem_node, value:
    /// {median}}`.
    pub fn from_json(v: &Value) -> Result<LatencyTable, String> {
        find(v, 0).ok_or_else(|| {
            "it holds no latency matrix (give the --json output of numalab matrix, or a report's results.json with its latency-matrix part)".to_string()
        })
    }

    /// The table of the numalab result at `path` (`--machine FILE`),
    /// checked against `m`; the error names the option.
    pub fn read_for_machine(
        m: &crate::Machine,
        path: &std::path::Path,
    ) -> Result<LatencyTable, String> {
        // The bounded reader: a result's cap, a device refused, a FIFO read
        // to its end or refused when nothing writes into it.
        let text = crate::input::read_text(path, crate::input::InputKind::ResultsJson)
            .map_err(|e| format!("--machine: {e}"))?;
        LatencyTable::for_machine(m, &text)
            .map_err(|why| format!("--machine {}: {why}", path.display()))
    }

    /// The table of a JSON document (`text`), refused when it was measured
    /// on another machine than `m` (other CPU or memory nodes).
    pub fn for_machine(m: &crate::Machine, text: &str) -> Result<LatencyTable, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
        let t = LatencyTable::from_json(&v)?;
        let (rows, cols) = t.nodes();
        let cpu_nodes: Vec<u32> = m.cpu_nodes().iter().collect();
        let mem_nodes: Vec<u32> = m.memory_nodes().iter().collect();
        if rows.iter().any(|n| !cpu_nodes.contains(n))
            || cols.iter().any(|n| !mem_nodes.contains(n))
        {
            let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            return Err(format!(
                "its matrix has CPU nodes {} and memory nodes {}, this machine CPU nodes {} and memory nodes {}: measured on another machine",
                list(&rows),
                list(&cols),
                list(&cpu_nodes),
                list(&mem_nodes)
            ));
        }
        Ok(t)
    }

    /// ns from a CPU of `cpu_node` to memory on `mem_node`, when measured.
    pub fn ns(&self, cpu_node: u32, mem_node: u32) -> Option<f64> {
        self.cells.get(&(cpu_node, mem_node)).copied()
    }

    /// The CPU nodes and memory nodes it covers.
    pub fn nodes(&self) -> (Vec<u32>, Vec<u32>) {
        let mut rows: Vec<u32> = self.cells.keys().map(|k| k.0).collect();
        let mut cols: Vec<u32> = self.cells.keys().map(|k| k.1).collect();
        rows.dedup();
        cols.sort_unstable();
        cols.dedup();
        (rows, cols)
    }

    /// A table from (CPU node, memory node, ns) triples.
    pub fn from_cells(cells: &[(u32, u32, f64)]) -> LatencyTable {
        LatencyTable {
            cells: cells.iter().map(|&(c, m, ns)| ((c, m), ns)).collect(),
        }
    }
}

fn find(v: &Value, depth: usize) -> Option<LatencyTable> {
    if depth > MAX_DEPTH {
        return None;
    }
    match v {
        Value::Object(o) => {
            if let Some(t) = o.get("latency").and_then(table) {
                return Some(t);
            }
            o.values().find_map(|x| find(x, depth + 1))
        }
        Value::Array(a) => a.iter().find_map(|x| find(x, depth + 1)),
        _ => None,
    }
}

/// A `latency` value that is rows of cells with a median.
fn table(v: &Value) -> Option<LatencyTable> {
    let mut cells = BTreeMap::new();
    for row in v.as_array()? {
        for c in row.as_array()? {
            let cpu = c.get("cpu_node")?.as_u64()?;
            let mem = c.get("mem_node")?.as_u64()?;
            let ns = c.get("value")?.get("median")?.as_f64()?;
            if ns.is_finite() && ns > 0.0 && cpu <= u32::MAX as u64 && mem <= u32::MAX as u64 {
                cells.insert((cpu as u32, mem as u32), ns);
            }
        }
    }
    (!cells.is_empty()).then_some(LatencyTable { cells })
}

/// A region's sampled accesses priced with the measured latencies.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AccessCost {
    /// Mean ns an access, as placed, and were every access local.
    pub ns_per_access: f64,
    pub local_ns_per_access: f64,
    /// Their ratio (1.0: placement costs nothing).
    pub ratio: f64,
    /// Samples priced (both cells measured), of the samples placed.
    pub priced: u64,
    pub placed: u64,
}

/// Prices every region of `p` with `t`; `source` names the file.
pub fn price(p: &mut super::Profile, t: &LatencyTable, source: &str) {
    for r in &mut p.regions {
        r.latency_cost = access_cost(&r.accesses, t);
    }
    p.latency_source = Some(source.to_string());
}

/// The cost of `accesses` (CPU node → memory node → samples) with `t`;
/// `None` when no sample has both its cells measured.
pub fn access_cost(accesses: &AccessMatrix, t: &LatencyTable) -> Option<AccessCost> {
    let (mut placed, mut priced) = (0u64, 0u64);
    let (mut sum, mut local) = (0.0, 0.0);
    for (&c, row) in accesses {
        for (&mem, &n) in row {
            placed += n;
            if let (Some(ns), Some(l)) = (t.ns(c, mem), t.ns(c, c)) {
                priced += n;
                sum += ns * n as f64;
                local += l * n as f64;
            }
        }
    }
    (priced > 0).then(|| AccessCost {
        ns_per_access: sum / priced as f64,
        local_ns_per_access: local / priced as f64,
        ratio: sum / local,
        priced,
        placed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cell(c: u32, m: u32, ns: f64) -> Value {
        json!({"cpu_node": c, "mem_node": m, "value": {"median": ns, "best": ns}})
    }

    /// Found at the top (numalab matrix --json) or deep in a report; a
    /// document without one says what to give.
    #[test]
    fn the_matrix_is_found_where_numalab_writes_it() {
        let top = json!({"command": "matrix", "latency": [
            [cell(0, 0, 90.0), cell(0, 1, 140.0)],
            [cell(1, 0, 150.0), cell(1, 1, 95.0)]]});
        let t = LatencyTable::from_json(&top).unwrap();
        assert_eq!(t.ns(1, 0), Some(150.0));
        assert_eq!(t.nodes(), (vec![0, 1], vec![0, 1]));
        let deep = json!({"parts": [{"name": "latency-matrix", "result": top}]});
        assert_eq!(LatencyTable::from_json(&deep).unwrap(), t);
        let err = LatencyTable::from_json(&json!({"latency": null, "x": [1, 2]})).unwrap_err();
        assert!(err.starts_with("it holds no latency matrix"), "{err}");
    }

    #[test]
    fn a_matrix_of_other_nodes_is_refused_for_this_machine() {
        let m = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let two = json!({"latency": [[cell(0, 0, 90.0), cell(0, 1, 140.0)]]});
        assert!(LatencyTable::for_machine(&m, &two.to_string()).is_ok());
        let other = json!({"latency": [[cell(0, 0, 90.0), cell(0, 7, 140.0)]]});
        assert_eq!(
            LatencyTable::for_machine(&m, &other.to_string()).unwrap_err(),
            "its matrix has CPU nodes 0 and memory nodes 0,7, this machine CPU nodes 0,1,2,3 and memory nodes 0,1,2,3: measured on another machine"
        );
        assert!(LatencyTable::for_machine(&m, "{")
            .unwrap_err()
            .starts_with("not JSON ("));
    }

    /// Two local accesses from node 0 at 90 ns and one from node 1 to node
    /// 0 at 150 ns: 110 ns an access, against 91.7 were node 1's local
    /// (95 ns); accesses to an unmeasured node are placed, not priced.
    #[test]
    fn accesses_are_priced_by_their_cells() {
        let t = LatencyTable::from_cells(&[(0, 0, 90.0), (1, 1, 95.0), (1, 0, 150.0)]);
        let mut a = AccessMatrix::new();
        a.entry(0).or_default().insert(0, 2);
        a.entry(1).or_default().insert(0, 1);
        a.entry(0).or_default().insert(4, 3);
        let c = access_cost(&a, &t).unwrap();
        assert_eq!((c.priced, c.placed), (3, 6));
        assert!((c.ns_per_access - 110.0).abs() < 1e-9, "{c:?}");
        assert!((c.local_ns_per_access - 91.666_666_666_666_67).abs() < 1e-9);
        assert!((c.ratio - 330.0 / 275.0).abs() < 1e-12);
        assert!(access_cost(&AccessMatrix::new(), &t).is_none());
    }
}
