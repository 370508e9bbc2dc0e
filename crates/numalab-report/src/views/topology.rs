//! The compact human view of a machine model (`numalab topology`).
//!
//! Readable from one node to a few hundred: matrices wider than
//! [`MAX_MATRIX_COLUMNS`] are summarized by their values, long lists are cut
//! with a count of what was left out. The JSON form (`--json`) has everything.

use numalab::machine::{Cache, Machine, MemoryAttributeValue, MemoryKind, Source};
use numalab::placement::node_memory::NodeMemory;
use numalab::text::format::{bytes, plural};
use numalab::IdSet;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Matrices with more nodes than this are summarized instead of printed.
pub const MAX_MATRIX_COLUMNS: usize = 16;
/// Devices listed before "... and N more".
const MAX_DEVICES: usize = 24;
/// HMAT rows listed before "... and N more".
const MAX_HMAT_ROWS: usize = 48;
/// CPU lists longer than this many characters are cut.
const MAX_CPU_LIST: usize = 40;

/// Renders the machine as compact text: header, nodes, caches, distances,
/// hops, HMAT attributes, devices, interconnect drawing and warnings. On the
/// live machine the kernel's memory figures are read now: where they
/// disagree, the nodes show both (see [`render_topology_text_with`]).
pub fn render_topology_text(m: &Machine) -> String {
    let memory = m.is_live().then(NodeMemory::capture);
    render_topology_text_with(m, memory.as_ref())
}

/// [`render_topology_text`] with the kernel's memory figures `memory` (none
/// for a topology file). Where they disagree (hot-added or ballooned
/// memory, offline blocks), the node table shows each node's `MemTotal` and
/// what it can give, and one line says why; otherwise they change nothing.
pub fn render_topology_text_with(m: &Machine, memory: Option<&NodeMemory>) -> String {
    let mut out = String::new();
    header(&mut out, m);
    nodes(&mut out, m, memory.filter(|s| s.disagreement.is_some()));
    caches(&mut out, m);
    distances(&mut out, m);
    hops(&mut out, m);
    hmat(&mut out, m);
    devices(&mut out, m);
    interconnect(&mut out, m);
    warnings(&mut out, m);
    out
}

/// What `numactl -H` prints, line for line (so that scripts reading it keep
/// working): the nodes, each node's CPUs, size and free memory in MB, and
/// the distance matrix. Two things numactl does not say: each node's
/// `can give` (what a placement may take there now: free memory plus what
/// the kernel reclaims, within the memory cgroup) after its `free` line,
/// and, where the kernel's figures disagree (memory being hot-added), the
/// sentence saying which figure capacity checks use. `memory` is `None` for
/// a topology file: sizes and free memory then come from the file.
pub fn render_hardware(m: &Machine, memory: Option<&NodeMemory>) -> String {
    const MB: u64 = 1 << 20;
    let mut out = String::new();
    let ids: Vec<u32> = m.nodes.iter().map(|n| n.os_index).collect();
    let _ = writeln!(out, "available: {} nodes ({})", ids.len(), m.node_ids());
    for n in &m.nodes {
        let i = n.os_index;
        let cpus: Vec<String> = n.cpus.iter().map(|c| c.to_string()).collect();
        let _ = writeln!(out, "node {i} cpus: {}", cpus.join(" "));
        let figures = memory.and_then(|mem| mem.nodes.get(&i));
        let size = figures.map_or(n.memory_bytes, |f| f.total);
        let _ = writeln!(out, "node {i} size: {} MB", size / MB);
        match figures.map(|f| f.free).or(n.free_bytes) {
            Some(free) => {
                let _ = writeln!(out, "node {i} free: {} MB", free / MB);
            }
            None => {
                let _ = writeln!(out, "node {i} free: unknown (a topology file)");
            }
        }
        if let (Some(mem), Some(_)) = (memory, figures) {
            let _ = writeln!(out, "node {i} can give: {} MB", mem.allocatable(i) / MB);
        }
    }
    let _ = writeln!(out, "node distances:");
    let mut head = String::from("node ");
    for i in &ids {
        let _ = write!(head, "{i:>3} ");
    }
    let _ = writeln!(out, "{head}");
    for &from in &ids {
        let mut row = format!("{from:>3}: ");
        for &to in &ids {
            let _ = write!(row, "{:>3} ", m.distance(from, to));
        }
        let _ = writeln!(out, "{row}");
    }
    if let Some(mem) = memory {
        let _ = writeln!(
            out,
            "can give: free memory plus the page cache and kernel memory the kernel reclaims on \
             demand, within the memory cgroup{}: what numalab's capacity checks use",
            if mem.cgroup.is_some() {
                " that binds this process"
            } else {
                " (none binds this process)"
            }
        );
        if let Some(d) = &mem.disagreement {
            let _ = writeln!(out, "memory figures disagree: {}", d.sentence());
        }
    }
    out
}

fn header(out: &mut String, m: &Machine) {
    let source = match &m.source {
        Source::Live => "this machine (live)".to_string(),
        Source::File { path } => format!("file {}", path.display()),
    };
    let _ = writeln!(out, "Machine: {source}");
    let known: IdSet = m
        .nodes
        .iter()
        .map(|n| &n.cpus)
        .chain(m.cores.iter().map(|c| &c.cpus))
        .fold(IdSet::new(), |acc, s| acc.union(s));
    let pus = if known.is_empty() {
        m.complete_cpus.len()
    } else {
        known.len()
    };
    let cpuless = m.nodes.iter().filter(|n| n.cpuless).count();
    let _ = writeln!(
        out,
        "  {}, {}, {} (SMT {}), {}{}",
        plural(m.packages.len(), "package", "packages"),
        plural(m.cores.len(), "core", "cores"),
        plural(pus, "PU", "PUs"),
        m.smt,
        plural(m.nodes.len(), "NUMA node", "NUMA nodes"),
        if cpuless > 0 {
            format!(" ({cpuless} CPU-less)")
        } else {
            String::new()
        }
    );
    if m.restricted {
        let _ = writeln!(
            out,
            "  view: restricted by a cgroup: allowed CPUs {} of {}, nodes {} of {}",
            list_or_none(&m.allowed_cpus),
            list_or_none(&m.complete_cpus),
            list_or_none(&m.allowed_nodes),
            list_or_none(&m.complete_nodes)
        );
    } else {
        let _ = writeln!(out, "  view: not restricted");
    }
}

fn list_or_none(set: &IdSet) -> String {
    if set.is_empty() {
        "none".to_string()
    } else {
        set.to_string()
    }
}

fn kind_label(kind: MemoryKind) -> &'static str {
    match kind {
        MemoryKind::Dram => "DRAM",
        MemoryKind::Hbm => "HBM",
        MemoryKind::Nvm => "NVM",
        MemoryKind::GpuMemory => "GPU memory",
        MemoryKind::Cxl => "CXL",
        MemoryKind::SpecificPurpose => "SPM",
        MemoryKind::Unknown => "unknown",
    }
}

/// A CPU list cut to [`MAX_CPU_LIST`] characters, with the count.
fn cpu_list(set: &IdSet) -> String {
    if set.is_empty() {
        return "none".to_string();
    }
    let text = set.to_string();
    if text.len() <= MAX_CPU_LIST {
        return format!("{text} ({})", set.len());
    }
    let mut cut = text[..MAX_CPU_LIST].to_string();
    if let Some(p) = cut.rfind(',') {
        cut.truncate(p);
    }
    format!("{cut},… ({})", set.len())
}

/// Prints rows as left-aligned (or right-aligned, per column) columns.
fn table(out: &mut String, indent: &str, rows: &[Vec<String>], right: &[bool]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = indent.to_string();
        for (c, cell) in row.iter().enumerate() {
            let w = widths[c];
            let pad = w.saturating_sub(cell.chars().count());
            if c > 0 {
                line.push_str("  ");
            }
            if right.get(c).copied().unwrap_or(false) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                if c + 1 < row.len() {
                    line.push_str(&" ".repeat(pad));
                }
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The node table; `disagreeing`: the kernel's memory figures where they
/// disagree, which add each node's meminfo total and what it can give.
fn nodes(out: &mut String, m: &Machine, disagreeing: Option<&NodeMemory>) {
    let _ = writeln!(out, "\nNodes");
    let live_free = m.nodes.iter().any(|n| n.free_bytes.is_some());
    let mut head = vec!["node".to_string(), "CPUs".to_string()];
    let mut right = vec![true, false];
    if disagreeing.is_some() {
        head.push("meminfo total".to_string());
    } else {
        head.push("memory".to_string());
    }
    right.push(true);
    if live_free {
        head.push("free".to_string());
        right.push(true);
    }
    if disagreeing.is_some() {
        head.push("can give".to_string());
        right.push(true);
    }
    head.push("kind".to_string());
    head.push("notes".to_string());
    let mut rows = vec![head];
    for n in &m.nodes {
        let figures = disagreeing.and_then(|s| s.nodes.get(&n.os_index));
        let mut row = vec![
            n.os_index.to_string(),
            cpu_list(&n.cpus),
            bytes(figures.map_or(n.memory_bytes, |f| f.total)),
        ];
        if live_free {
            row.push(n.free_bytes.map_or_else(|| "?".to_string(), bytes));
        }
        if let Some(s) = disagreeing {
            row.push(match figures {
                Some(_) => bytes(s.allocatable(n.os_index)),
                None => "?".to_string(),
            });
        }
        let mut kind = kind_label(n.kind).to_string();
        if let Some(sub) = &n.subtype {
            if !sub.eq_ignore_ascii_case(kind_label(n.kind)) {
                kind = format!("{kind} ({sub})");
            }
        }
        row.push(kind);
        let mut notes = Vec::new();
        if n.cpuless {
            notes.push("CPU-less".to_string());
        }
        if let Some(t) = n.tier {
            notes.push(format!("tier {t}"));
        }
        if !n.allowed {
            notes.push("not allowed".to_string());
        }
        if let Some(offline) = figures
            .and_then(|f| f.offline_block_bytes)
            .filter(|&b| b > 0)
        {
            notes.push(format!("{} offline", bytes(offline)));
        }
        row.push(notes.join(", "));
        rows.push(row);
    }
    table(out, "  ", &rows, &right);
    if let Some(d) = disagreeing.and_then(|s| s.disagreement.as_ref()) {
        let _ = writeln!(out, "  memory figures disagree: {}", d.sentence());
    }
}

fn cache_label(c: &Cache) -> String {
    let suffix = match c.kind.as_str() {
        "data" => "d",
        "instruction" => "i",
        _ => "",
    };
    format!("L{}{suffix}", c.level)
}

/// Identical caches: level, kind order, size, line, associativity, PUs sharing.
type CacheGroup = (u8, String, u64, u32, Option<i32>, usize);

fn caches(out: &mut String, m: &Machine) {
    if m.caches.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nCaches");
    // Group identical caches: (level, kind, size, line, associativity, sharing).
    let mut groups: BTreeMap<CacheGroup, Vec<&Cache>> = BTreeMap::new();
    for c in &m.caches {
        let kind_key = match c.kind.as_str() {
            "data" => "0",
            "instruction" => "1",
            _ => "2",
        };
        groups
            .entry((
                c.level,
                kind_key.to_string(),
                c.size_bytes,
                c.line_bytes,
                c.associativity,
                c.cpus.len(),
            ))
            .or_default()
            .push(c);
    }
    let mut rows = Vec::new();
    for ((_, _, size, line, assoc, share), list) in &groups {
        let first = list[0];
        let ways = match assoc {
            Some(-1) => "fully assoc.".to_string(),
            Some(w) => format!("{w}-way"),
            None => String::new(),
        };
        let sharing = if *share <= 1 {
            "private (1 PU each)".to_string()
        } else if list.len() <= 4 {
            let sets: Vec<String> = list.iter().map(|c| list_or_none(&c.cpus)).collect();
            format!("shared by {}", sets.join(" | "))
        } else {
            format!("each shared by {}", plural(*share, "PU", "PUs"))
        };
        rows.push(vec![
            cache_label(first),
            bytes(*size),
            format!("x{}", list.len()),
            if *line > 0 {
                format!("line {line} B")
            } else {
                String::new()
            },
            ways,
            sharing,
        ]);
    }
    table(out, "  ", &rows, &[false, true, true, false, true, false]);
}

/// Counts of each value over the pairs i < j (and the diagonal apart).
fn value_summary<T: Ord + Copy>(matrix: &[Vec<T>], show: impl Fn(T) -> String) -> String {
    let mut diag: BTreeSet<String> = BTreeSet::new();
    let mut counts: BTreeMap<T, usize> = BTreeMap::new();
    for (i, row) in matrix.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            if i == j {
                diag.insert(show(*v));
            } else if i < j {
                *counts.entry(*v).or_default() += 1;
            }
        }
    }
    let remote: Vec<String> = counts
        .iter()
        .map(|(v, c)| format!("{} x{}", show(*v), c))
        .collect();
    format!(
        "local {}; pairs: {}",
        diag.into_iter().collect::<Vec<_>>().join("/"),
        remote.join(", ")
    )
}

fn matrix_text(out: &mut String, ids: &[u32], cell: impl Fn(usize, usize) -> String) {
    let mut rows = Vec::with_capacity(ids.len() + 1);
    let mut head = vec![String::new()];
    head.extend(ids.iter().map(u32::to_string));
    rows.push(head);
    for (i, id) in ids.iter().enumerate() {
        let mut row = vec![id.to_string()];
        row.extend((0..ids.len()).map(|j| cell(i, j)));
        rows.push(row);
    }
    let right = vec![true; ids.len() + 1];
    table(out, "  ", &rows, &right);
}

fn distances(out: &mut String, m: &Machine) {
    let Some(d) = &m.distances else {
        if m.nodes.len() > 1 {
            let _ = writeln!(out, "\nDistances: none (no SLIT table)");
        }
        return;
    };
    let _ = writeln!(out, "\nDistances ({})", d.source);
    if d.nodes.len() > MAX_MATRIX_COLUMNS {
        let _ = writeln!(
            out,
            "  {} nodes, matrix omitted (use --json); {}",
            d.nodes.len(),
            value_summary(&d.matrix, |v| v.to_string())
        );
        return;
    }
    matrix_text(out, &d.nodes, |i, j| {
        d.matrix
            .get(i)
            .and_then(|r| r.get(j))
            .map_or_else(|| "?".to_string(), u64::to_string)
    });
}

fn hops(out: &mut String, m: &Machine) {
    let h = &m.hops;
    if h.nodes.len() < 2 {
        return;
    }
    let _ = writeln!(out, "\nHops (inferred)");
    let show = |v: Option<u32>| v.map_or_else(|| "-".to_string(), |x| x.to_string());
    if h.nodes.len() > MAX_MATRIX_COLUMNS {
        let _ = writeln!(
            out,
            "  {} nodes, matrix omitted (use --json); {}",
            h.nodes.len(),
            value_summary(&h.matrix, show)
        );
        return;
    }
    matrix_text(out, &h.nodes, |i, j| {
        h.matrix
            .get(i)
            .and_then(|r| r.get(j))
            .map_or_else(|| "?".to_string(), |v| show(*v))
    });
}

const HMAT_COLUMNS: [(&str, &str); 6] = [
    ("latency_ns", "latency"),
    ("read_latency_ns", "read lat."),
    ("write_latency_ns", "write lat."),
    ("bandwidth_mib_s", "bandwidth"),
    ("read_bandwidth_mib_s", "read bw"),
    ("write_bandwidth_mib_s", "write bw"),
];

fn hmat_value(attribute: &str, v: u64) -> String {
    if attribute.ends_with("_ns") {
        format!("{v} ns")
    } else if v >= 1024 {
        let g = v as f64 / 1024.0;
        format!("{g:.1} GiB/s")
    } else {
        format!("{v} MiB/s")
    }
}

fn hmat(out: &mut String, m: &Machine) {
    if m.memory_attributes.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nMemory attributes (HMAT)");
    let present: Vec<(&str, &str)> = HMAT_COLUMNS
        .iter()
        .copied()
        .filter(|(key, _)| m.memory_attributes.iter().any(|a| a.attribute == *key))
        .collect();
    // Row key: (target, first initiator CPU, initiator CPUs as text).
    let mut rows_by_key: BTreeMap<(u32, Option<u32>, String), Vec<&MemoryAttributeValue>> =
        BTreeMap::new();
    for a in &m.memory_attributes {
        rows_by_key
            .entry((
                a.target,
                a.initiator_cpus.first(),
                a.initiator_cpus.to_string(),
            ))
            .or_default()
            .push(a);
    }
    let mut rows = Vec::new();
    let mut head = vec!["target".to_string(), "from".to_string()];
    head.extend(present.iter().map(|(_, label)| (*label).to_string()));
    rows.push(head);
    let total = rows_by_key.len();
    for ((target, _, _), values) in rows_by_key.iter().take(MAX_HMAT_ROWS) {
        let first = values[0];
        let from = match first.initiator_nodes.len() {
            0 => format!("CPUs {}", list_or_none(&first.initiator_cpus)),
            1 => format!("node {}", first.initiator_nodes),
            _ => format!("nodes {}", first.initiator_nodes),
        };
        let mut row = vec![target.to_string(), from];
        for (key, _) in &present {
            row.push(
                values
                    .iter()
                    .find(|v| v.attribute == *key)
                    .map_or_else(String::new, |v| hmat_value(key, v.value)),
            );
        }
        rows.push(row);
    }
    let mut right = vec![true, false];
    right.extend(present.iter().map(|_| true));
    table(out, "  ", &rows, &right);
    if total > MAX_HMAT_ROWS {
        let _ = writeln!(out, "  ... and {} more (use --json)", total - MAX_HMAT_ROWS);
    }
}

fn devices(out: &mut String, m: &Machine) {
    if m.devices.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nDevices");
    let mut rows = Vec::new();
    for d in m.devices.iter().take(MAX_DEVICES) {
        let local = match d.local_nodes.len() {
            0 => "no local node".to_string(),
            1 => format!("node {}", d.local_nodes),
            _ => format!("nodes {}", d.local_nodes),
        };
        rows.push(vec![
            d.label().to_string(),
            d.name.clone(),
            d.model.clone().unwrap_or_else(|| "-".to_string()),
            d.pci_bus_id.clone().unwrap_or_else(|| "-".to_string()),
            local,
        ]);
    }
    table(out, "  ", &rows, &[]);
    if m.devices.len() > MAX_DEVICES {
        let _ = writeln!(
            out,
            "  ... and {} more (use --json)",
            m.devices.len() - MAX_DEVICES
        );
    }
}

/// Adjacency of the interconnect graph.
fn adjacency(m: &Machine) -> BTreeMap<u32, BTreeSet<u32>> {
    let mut adj: BTreeMap<u32, BTreeSet<u32>> = m
        .nodes
        .iter()
        .map(|n| (n.os_index, BTreeSet::new()))
        .collect();
    for l in &m.links {
        adj.entry(l.a).or_default().insert(l.b);
        adj.entry(l.b).or_default().insert(l.a);
    }
    adj
}

/// Each node's neighbours among `nodes` (three or more: fewer make no
/// ring and no chain worth drawing).
fn neighbours_within<'a>(
    nodes: &[u32],
    adj: &'a BTreeMap<u32, BTreeSet<u32>>,
) -> Option<impl Fn(u32) -> Vec<u32> + 'a> {
    if nodes.len() < 3 {
        return None;
    }
    let inside: BTreeSet<u32> = nodes.iter().copied().collect();
    Some(move |n: u32| -> Vec<u32> {
        adj.get(&n)
            .map(|s| s.iter().copied().filter(|x| inside.contains(x)).collect())
            .unwrap_or_default()
    })
}

/// The cycle through all of `nodes` when their subgraph is one ring.
fn ring_order(nodes: &[u32], adj: &BTreeMap<u32, BTreeSet<u32>>) -> Option<Vec<u32>> {
    let nb = neighbours_within(nodes, adj)?;
    if nodes.iter().any(|&n| nb(n).len() != 2) {
        return None;
    }
    let start = nodes[0];
    let mut order = vec![start];
    let mut prev = start;
    let mut cur = *nb(start).first()?;
    while cur != start {
        order.push(cur);
        let next = nb(cur).into_iter().find(|&x| x != prev)?;
        prev = cur;
        cur = next;
        if order.len() > nodes.len() {
            return None;
        }
    }
    (order.len() == nodes.len()).then_some(order)
}

/// The path through all of `nodes` when their subgraph is one chain.
fn chain_order(nodes: &[u32], adj: &BTreeMap<u32, BTreeSet<u32>>) -> Option<Vec<u32>> {
    let nb = neighbours_within(nodes, adj)?;
    let ends: Vec<u32> = nodes
        .iter()
        .copied()
        .filter(|&n| nb(n).len() == 1)
        .collect();
    if ends.len() != 2 || nodes.iter().any(|&n| nb(n).len() > 2) {
        return None;
    }
    let mut order = vec![ends[0]];
    let mut prev = ends[0];
    let mut cur = nb(ends[0])[0];
    loop {
        order.push(cur);
        if order.len() > nodes.len() {
            return None;
        }
        match nb(cur).into_iter().find(|&x| x != prev) {
            Some(next) => {
                prev = cur;
                cur = next;
            }
            None => break,
        }
    }
    (order.len() == nodes.len()).then_some(order)
}

fn interconnect(out: &mut String, m: &Machine) {
    if m.nodes.len() < 2 {
        return;
    }
    let how = if m.distances.is_some() {
        "inferred from distances"
    } else {
        "assumed, no distance table"
    };
    let _ = writeln!(out, "\nInterconnect ({how})");
    let adj = adjacency(m);
    let cpu_nodes: Vec<u32> = m
        .nodes
        .iter()
        .filter(|n| !n.cpuless)
        .map(|n| n.os_index)
        .collect();
    let memory_nodes: Vec<u32> = m
        .nodes
        .iter()
        .filter(|n| n.cpuless)
        .map(|n| n.os_index)
        .collect();
    let dash = " ─ ";
    let join = |order: &[u32]| {
        order
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(dash)
    };
    let cpu_pairs = cpu_nodes.len() * cpu_nodes.len().saturating_sub(1) / 2;
    let cpu_links = m
        .links
        .iter()
        .filter(|l| cpu_nodes.contains(&l.a) && cpu_nodes.contains(&l.b))
        .count();
    if let Some(order) = ring_order(&cpu_nodes, &adj) {
        if order.len() == 4 {
            // a ── b
            // │    │
            // d ── c
            let (a, b, c, d) = (order[0], order[1], order[2], order[3]);
            let w = a.to_string().len().max(d.to_string().len());
            let _ = writeln!(out, "  {a:<w$} ── {b}");
            let _ = writeln!(out, "  {:<w$}    │", "│");
            let _ = writeln!(out, "  {d:<w$} ── {c}");
        }
        let _ = writeln!(out, "  ring: {}{dash}{}", join(&order), order[0]);
    } else if let Some(order) = chain_order(&cpu_nodes, &adj) {
        let _ = writeln!(out, "  chain: {}", join(&order));
    } else if cpu_nodes.len() == 2 && cpu_links == 1 {
        let _ = writeln!(out, "  {} ── {}", cpu_nodes[0], cpu_nodes[1]);
    } else if cpu_nodes.len() > 1 && cpu_links == cpu_pairs {
        let _ = writeln!(
            out,
            "  fully connected: every node with CPUs is one hop from every other"
        );
    } else if cpu_nodes.len() > MAX_MATRIX_COLUMNS {
        let degrees: Vec<usize> = cpu_nodes
            .iter()
            .map(|n| {
                adj.get(n)
                    .map_or(0, |s| s.iter().filter(|x| cpu_nodes.contains(x)).count())
            })
            .collect();
        let max_hops = m.hops.matrix.iter().flatten().flatten().max().copied();
        let _ = writeln!(
            out,
            "  {} nodes with CPUs, {} links, {}-{} direct neighbours per node, at most {} hop(s) apart; list omitted (use --json)",
            cpu_nodes.len(),
            cpu_links,
            degrees.iter().min().copied().unwrap_or(0),
            degrees.iter().max().copied().unwrap_or(0),
            max_hops.map_or_else(|| "?".to_string(), |h| h.to_string())
        );
    } else {
        for n in &cpu_nodes {
            let nb: IdSet = adj
                .get(n)
                .map(|s| {
                    s.iter()
                        .copied()
                        .filter(|x| cpu_nodes.contains(x))
                        .collect()
                })
                .unwrap_or_default();
            let _ = writeln!(out, "  {n:>4} ── {}", list_or_none(&nb));
        }
    }
    for n in memory_nodes.iter().take(MAX_DEVICES) {
        let nb: IdSet = adj
            .get(n)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {n:>4} ── {}   (CPU-less, memory only)",
            list_or_none(&nb)
        );
    }
    if memory_nodes.len() > MAX_DEVICES {
        let _ = writeln!(
            out,
            "  ... and {} more CPU-less nodes (use --json)",
            memory_nodes.len() - MAX_DEVICES
        );
    }
}

fn warnings(out: &mut String, m: &Machine) {
    if m.warnings.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nWarnings");
    for w in &m.warnings {
        let _ = writeln!(out, "  ! {w}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(bytes(32 * 1024), "32 KiB");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB");
    }

    #[test]
    fn cut_cpu_lists() {
        let s: IdSet = (0..200).step_by(2).collect();
        let t = cpu_list(&s);
        assert!(t.ends_with("(100)"), "{t}");
        assert!(t.chars().count() < MAX_CPU_LIST + 12, "{t}");
        assert_eq!(cpu_list(&IdSet::new()), "none");
        assert_eq!(cpu_list(&IdSet::parse_list("0-3").unwrap()), "0-3 (4)");
    }

    #[test]
    fn a_hot_plug_vm_shows_both_figures_and_why() {
        use numalab::placement::node_memory::test_tree::Tree;
        use numalab::placement::node_memory::Blocks;
        let m = crate::fixture("8em64t-2s2ca2c-buggynuma.xml");
        let t = Tree::new("topology-hotplug");
        t.file(
            "sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal:  4508876 kB\nNode 0 MemFree:   2097152 kB\n",
        );
        t.file(
            "proc/meminfo",
            "MemTotal:  134217728 kB\nMemAvailable:  131072000 kB\n",
        );
        let hotplug = NodeMemory::capture_from(t.path(), Blocks::Always);
        let text = render_topology_text_with(&m, Some(&hotplug));
        let nodes: Vec<&str> = text
            .lines()
            .skip_while(|l| *l != "Nodes")
            .skip(1)
            .take(3)
            .collect();
        assert_eq!(
            nodes,
            [
                "  node  CPUs     meminfo total  can give  kind  notes",
                "     0  0-7 (8)        4.3 GiB   125 GiB  DRAM",
                "  memory figures disagree: the nodes' meminfo counts 4.3 GiB of memory but \
                 /proc/meminfo 128 GiB (125 GiB available), likely memory being hot-added \
                 (virtio-mem, hot-plug or ballooning): capacity checks use what the kernel will \
                 give on each node, not the nodes' totals",
            ]
        );
        // Figures that agree change nothing.
        t.file(
            "proc/meminfo",
            "MemTotal:  4508876 kB\nMemAvailable:  3000000 kB\n",
        );
        let ordinary = NodeMemory::capture_from(t.path(), Blocks::Always);
        assert_eq!(ordinary.disagreement, None);
        assert_eq!(
            render_topology_text_with(&m, Some(&ordinary)),
            render_topology_text_with(&m, None)
        );
        assert!(render_topology_text_with(&m, None).contains("node  CPUs     memory  kind"));
    }

    #[test]
    fn hardware_is_numactls_layout_with_what_each_node_can_give() {
        use crate::fixture;
        use numalab::placement::node_memory::test_tree::Tree;
        use numalab::placement::node_memory::Blocks;
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let text = render_hardware(&m, None);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "available: 5 nodes (0-4)");
        assert_eq!(lines[1], "node 0 cpus: 0");
        assert_eq!(lines[2], "node 0 size: 502 MB");
        assert_eq!(lines[3], "node 0 free: unknown (a topology file)");
        // The CPU-less node: no CPUs, as numactl prints it.
        assert!(lines.contains(&"node 4 cpus: "), "{text}");
        let d = lines.iter().position(|l| *l == "node distances:").unwrap();
        assert_eq!(lines[d + 1], "node   0   1   2   3   4 ");
        assert_eq!(lines[d + 2], "  0:  10  16  22  16  20 ");
        assert_eq!(lines.len(), d + 7, "{text}");

        // Live figures: size and free from the node's meminfo, what it can
        // give after them, and the disagreement's sentence last.
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let t = Tree::new("hardware-hotplug");
        for n in 0..4 {
            t.file(
                &format!("sys/devices/system/node/node{n}/meminfo"),
                &format!("Node {n} MemTotal:  1048576 kB\nNode {n} MemFree:   524288 kB\n"),
            );
        }
        t.file(
            "proc/meminfo",
            "MemTotal:  134217728 kB\nMemAvailable:  131072000 kB\n",
        );
        let mem = NodeMemory::capture_from(t.path(), Blocks::Always);
        let text = render_hardware(&m, Some(&mem));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            &lines[..5],
            [
                "available: 4 nodes (0-3)",
                "node 0 cpus: 0 1",
                "node 0 size: 1024 MB",
                "node 0 free: 512 MB",
                &format!("node 0 can give: {} MB", mem.allocatable(0) >> 20),
            ]
        );
        assert!(mem.allocatable(0) > 512 << 20, "{mem:?}");
        let n = lines.len();
        assert!(
            lines[n - 2].starts_with("can give: free memory plus the page cache"),
            "{text}"
        );
        assert!(
            lines[n - 1].starts_with("memory figures disagree: "),
            "{text}"
        );
    }

    #[test]
    fn rings_and_chains() {
        let adj = |pairs: &[(u32, u32)]| {
            let mut a: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
            for &(x, y) in pairs {
                a.entry(x).or_default().insert(y);
                a.entry(y).or_default().insert(x);
            }
            a
        };
        let ring = adj(&[(0, 1), (0, 2), (1, 3), (2, 3)]);
        assert_eq!(ring_order(&[0, 1, 2, 3], &ring), Some(vec![0, 1, 3, 2]));
        assert_eq!(chain_order(&[0, 1, 2, 3], &ring), None);
        let chain = adj(&[(0, 1), (1, 2), (2, 3)]);
        assert_eq!(chain_order(&[0, 1, 2, 3], &chain), Some(vec![0, 1, 2, 3]));
        assert_eq!(ring_order(&[0, 1, 2, 3], &chain), None);
        let two_rings = adj(&[(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)]);
        assert_eq!(ring_order(&[0, 1, 2, 3, 4, 5], &two_rings), None);
    }
}
