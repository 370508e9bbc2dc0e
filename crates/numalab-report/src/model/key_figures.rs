//! The report's key figures (results.json `summary.key_figures`) as
//! readers name them: what each figure is, its unit and its precision, in
//! the order Intel MLC's users read them. The key-figures table
//! (`crate::key_table`) prints them; `crate::compare` lists two reports'
//! side by side.

/// How a row shows its figures.
pub enum Shape {
    /// One figure.
    One(&'static str),
    /// A range from the first to the second (one value where they agree).
    Range(&'static str, &'static str),
}

/// One key figure (or range of two): what it is, its unit, its decimals.
pub struct RowSpec {
    pub figure: &'static str,
    pub shape: Shape,
    pub unit: &'static str,
    pub decimals: usize,
}

/// The rows, in the order MLC's users read them: latency, bandwidth,
/// ratios, core to core, loaded latency, then the sweeps' two figures.
pub const ROWS: &[RowSpec] = &[
    RowSpec {
        figure: "Idle latency, local memory (random pointer chase, latency matrix)",
        shape: Shape::One("local_latency_ns"),
        unit: "ns",
        decimals: 0,
    },
    RowSpec {
        figure: "Idle latency, slowest CPU node to memory node",
        shape: Shape::One("max_latency_ns"),
        unit: "ns",
        decimals: 0,
    },
    RowSpec {
        figure: "NUMA ratio, remote over local latency",
        shape: Shape::Range("numa_ratio_min", "numa_ratio_max"),
        unit: "x",
        decimals: 2,
    },
    RowSpec {
        figure: "Read bandwidth, local memory",
        shape: Shape::One("local_read_gbps"),
        unit: "GB/s",
        decimals: 1,
    },
    RowSpec {
        figure: "Read bandwidth, remote memory",
        shape: Shape::Range("remote_read_gbps_min", "remote_read_gbps_max"),
        unit: "GB/s",
        decimals: 1,
    },
    RowSpec {
        figure: "Read bandwidth, one thread alone (scaling)",
        shape: Shape::One("single_thread_gbps"),
        unit: "GB/s",
        decimals: 1,
    },
    RowSpec {
        figure: "Per-thread bandwidth, threads packed",
        shape: Shape::One("packed_per_thread_gbps"),
        unit: "GB/s",
        decimals: 1,
    },
    RowSpec {
        figure: "Per-thread bandwidth, threads spread",
        shape: Shape::One("spread_per_thread_gbps"),
        unit: "GB/s",
        decimals: 1,
    },
    RowSpec {
        figure: "Core-to-core latency, within a node (modified line)",
        shape: Shape::One("c2c_within_node_ns"),
        unit: "ns",
        decimals: 0,
    },
    RowSpec {
        figure: "Core-to-core latency, across nodes (modified line)",
        shape: Shape::One("c2c_across_nodes_ns"),
        unit: "ns",
        decimals: 0,
    },
    RowSpec {
        figure: "Loaded latency, idle (the loaded-latency run's chase, local node)",
        shape: Shape::One("loaded_idle_ns"),
        unit: "ns",
        decimals: 0,
    },
    RowSpec {
        figure: "Loaded latency at the highest load",
        shape: Shape::One("loaded_max_ns"),
        unit: "ns",
        decimals: 0,
    },
    RowSpec {
        figure: "Highest load injected (loaded latency)",
        shape: Shape::One("loaded_max_gbps"),
        unit: "GB/s",
        decimals: 1,
    },
    RowSpec {
        figure: "Loaded-latency knee: total memory traffic where latency reaches 1.10x idle",
        shape: Shape::One("loaded_knee_gbps"),
        unit: "GB/s",
        decimals: 1,
    },
    RowSpec {
        figure: "Two writers on one node, together over alone (sweep)",
        shape: Shape::One("two_writers_gain"),
        unit: "x",
        decimals: 2,
    },
    RowSpec {
        figure: "Crossfire over no crossfire, time (sweep scenarios)",
        shape: Shape::One("crossfire_ratio"),
        unit: "x",
        decimals: 2,
    },
];

/// Whether key figure `key` is folded into another row (one quantity,
/// one row), given the report's other figures (`get`) and the bandwidth
/// matrix's threads per node: with no remote memory the slowest pair is
/// the local one; where the latency matrix measured local idle latency,
/// the loaded-latency run's own idle chase (its knee's baseline) is not a
/// second headline figure; where the bandwidth matrix read with one
/// thread per node, the scaling's lone thread (its ratios' baseline) is
/// not either. Both stay in their parts.
pub fn folded(key: &str, get: impl Fn(&str) -> Option<f64>, matrix_threads: Option<&str>) -> bool {
    match key {
        "max_latency_ns" => get("numa_ratio_max").is_none(),
        "loaded_idle_ns" => get("local_latency_ns").is_some(),
        "single_thread_gbps" => matrix_threads == Some("1") && get("local_read_gbps").is_some(),
        _ => false,
    }
}

/// The key figures' names in the table's order, each with what it is and
/// its unit (a range's ends as "…, lowest" and "…, highest"): how
/// `compare` lists two reports' key figures first.
pub fn key_labels() -> Vec<(&'static str, String, &'static str)> {
    let mut out = Vec::new();
    for spec in ROWS {
        match spec.shape {
            Shape::One(k) => out.push((k, spec.figure.to_string(), spec.unit)),
            Shape::Range(lo, hi) => {
                out.push((lo, format!("{}, lowest", spec.figure), spec.unit));
                out.push((hi, format!("{}, highest", spec.figure), spec.unit));
            }
        }
    }
    out
}
