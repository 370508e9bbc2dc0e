//! MPI ranks on one node: which local rank this process is (from what
//! `mpirun` or `srun` set), and its share of the node (`run --per-rank`):
//! the node's CPUs split into domains (NUMA nodes, packages, last-level
//! caches, or blocks of cores), as likwid-mpirun splits them, and the
//! memory nodes of those CPUs.

use crate::{IdSet, Machine};

/// This process's place among the ranks on its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRank {
    /// From 0.
    pub rank: u32,
    /// Ranks on this node.
    pub size: u32,
    /// Its rank in the whole job, where the launcher says.
    pub global: Option<u32>,
    /// The variables it was read from.
    pub source: &'static str,
}

fn number(var: &impl Fn(&str) -> Option<String>, name: &str) -> Option<Result<u32, String>> {
    let v = var(name)?;
    Some(
        v.trim()
            .parse()
            .map_err(|_| format!("{name}='{v}' is not a rank number")),
    )
}

/// Slurm's tasks per node, `2(x3),1`: node i's count, from 0.
fn tasks_on_node(list: &str, node: usize) -> Option<u32> {
    let mut i = 0usize;
    for item in list.split(',') {
        let (count, times) = match item.split_once("(x") {
            Some((c, t)) => (c, t.trim_end_matches(')').parse::<usize>().ok()?),
            None => (item, 1),
        };
        let count: u32 = count.trim().parse().ok()?;
        if node < i + times {
            return Some(count);
        }
        i += times;
    }
    None
}

/// The local rank from the launcher's variables: Open MPI's mpirun
/// (`OMPI_COMM_WORLD_LOCAL_RANK`), MPICH's Hydra (`MPI_LOCALRANKID`), then
/// Slurm's srun (`SLURM_LOCALID`, with the node's task count from
/// `SLURM_STEP_TASKS_PER_NODE` and `SLURM_NODEID`). `None` outside a
/// launch; an error when the variables do not read.
pub fn local_rank_from(var: impl Fn(&str) -> Option<String>) -> Option<Result<LocalRank, String>> {
    let launchers: [(&str, &str, &str, &'static str); 2] = [
        (
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
            "OMPI_COMM_WORLD_RANK",
            "Open MPI (OMPI_COMM_WORLD_LOCAL_RANK)",
        ),
        (
            "MPI_LOCALRANKID",
            "MPI_LOCALNRANKS",
            "PMI_RANK",
            "MPICH Hydra (MPI_LOCALRANKID)",
        ),
    ];
    let read = || -> Option<Result<LocalRank, String>> {
        for (rank, size, global, source) in launchers {
            let Some(r) = number(&var, rank) else {
                continue;
            };
            return Some((|| {
                let r = r?;
                let s = number(&var, size)
                    .ok_or_else(|| format!("{rank} is set but {size} is not"))??;
                let g = number(&var, global).transpose()?;
                Ok(LocalRank {
                    rank: r,
                    size: s,
                    global: g,
                    source,
                })
            })());
        }
        let r = number(&var, "SLURM_LOCALID")?;
        Some((|| {
            let r = r?;
            let node = number(&var, "SLURM_NODEID").transpose()?.unwrap_or(0);
            let list = var("SLURM_STEP_TASKS_PER_NODE")
                .or_else(|| var("SLURM_TASKS_PER_NODE"))
                .ok_or("SLURM_LOCALID is set but SLURM_STEP_TASKS_PER_NODE is not")?;
            let s = tasks_on_node(&list, node as usize).ok_or_else(|| {
                format!("SLURM_STEP_TASKS_PER_NODE='{list}' names no count for node {node}")
            })?;
            let g = number(&var, "SLURM_PROCID").transpose()?;
            Ok(LocalRank {
                rank: r,
                size: s,
                global: g,
                source: "Slurm (SLURM_LOCALID)",
            })
        })())
    };
    let out = read()?;
    Some(out.and_then(|l| {
        if l.size == 0 || l.rank >= l.size {
            Err(format!(
                "{}: local rank {} of {} ranks on the node does not fit",
                l.source, l.rank, l.size
            ))
        } else {
            Ok(l)
        }
    }))
}

/// [`local_rank_from`] this process's environment.
pub fn local_rank() -> Option<Result<LocalRank, String>> {
    local_rank_from(|k| std::env::var(k).ok())
}

/// `path` with `{rank}` replaced by this process's MPI rank (its rank in
/// the job, else its local rank), so that every rank of a job writes its
/// own file or folder; `path` itself without `{rank}`.
pub fn fill_rank(path: &std::path::Path) -> Result<std::path::PathBuf, String> {
    let text = path.to_string_lossy();
    if !text.contains("{rank}") {
        return Ok(path.to_path_buf());
    }
    let r = local_rank().ok_or_else(|| {
        format!(
            "{}: {{rank}} is an MPI rank, and no launcher's rank variables are set (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID): run numalab under srun or mpirun",
            path.display()
        )
    })??;
    Ok(text
        .replace("{rank}", &r.global.unwrap_or(r.rank).to_string())
        .into())
}

/// What `--per-rank` splits a node by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Domain {
    Node,
    Socket,
    Cache,
    CoreBlock,
    /// `map:0,2,4,6`: local rank `i` on CPU `i mod n` of the list, as
    /// Slurm's `--cpu-bind=map_cpu:` (`scaling --mpi` lays ranks so).
    Map(Vec<u32>),
}

/// The most CPUs a `map:` list names.
pub const MAX_MAP: usize = 8192;

impl Domain {
    pub const CHOICES: &'static str = "node, socket, cache, core-block, map:CPU,CPU,...";

    pub fn parse(t: &str) -> Result<Domain, String> {
        if let Some(list) = t.strip_prefix("map:") {
            let cpus: Vec<u32> = list
                .split(',')
                .take(MAX_MAP + 1)
                .map(|c| {
                    c.trim().parse::<u32>().ok().filter(|c| *c < 8192).ok_or_else(|| {
                        format!("map:{list}: '{c}' is not a CPU number (0 to 8191); e.g. map:0,2,4,6")
                    })
                })
                .collect::<Result<_, _>>()?;
            if cpus.len() > MAX_MAP {
                return Err(format!("map: names more than {MAX_MAP} CPUs"));
            }
            return Ok(Domain::Map(cpus));
        }
        Ok(match t {
            "node" => Domain::Node,
            "socket" | "package" => Domain::Socket,
            "cache" | "llc" => Domain::Cache,
            "core-block" => Domain::CoreBlock,
            _ => {
                return Err(format!(
                    "unknown rank domain '{t}'; valid: {}",
                    Self::CHOICES
                ))
            }
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Domain::Node => "node",
            Domain::Socket => "socket",
            Domain::Cache => "cache",
            Domain::CoreBlock => "core-block",
            Domain::Map(_) => "map",
        }
    }
}

/// One rank's share of its node.
#[derive(Debug, Clone, PartialEq)]
pub struct RankShare {
    pub cpus: IdSet,
    /// The memory nodes of those CPUs.
    pub nodes: IdSet,
    /// What it is, for the output: "NUMA node 1", "cores 4-7 of NUMA node 0".
    pub label: String,
}

/// The domains of a machine as the CPUs this process may use, each with
/// its label, in CPU order; empty domains left out.
fn domains(m: &Machine, d: &Domain) -> Vec<(IdSet, String)> {
    let allowed = &m.allowed_cpus;
    let mut out: Vec<(IdSet, String)> = match d {
        Domain::Node => m
            .cpu_nodes()
            .iter()
            .map(|n| (m.allowed_cpus_of(n), format!("NUMA node {n}")))
            .collect(),
        Domain::Socket => m
            .packages
            .iter()
            .map(|p| {
                let name = p
                    .os_index
                    .map_or(format!("package L#{}", p.logical_index), |i| {
                        format!("package {i}")
                    });
                (p.cpus.intersection(allowed), name)
            })
            .collect(),
        Domain::Cache => {
            let top = m
                .caches
                .iter()
                .filter(|c| c.kind != "instruction")
                .map(|c| c.level)
                .max();
            m.caches
                .iter()
                .filter(|c| Some(c.level) == top && c.kind != "instruction")
                .map(|c| {
                    (
                        c.cpus.intersection(allowed),
                        format!("L{} cache {}", c.level, c.logical_index),
                    )
                })
                .collect()
        }
        Domain::CoreBlock | Domain::Map(_) => vec![(allowed.clone(), "the node".to_string())],
    };
    out.retain(|(c, _)| !c.is_empty());
    // Socket and cache fall back to the whole node where hwloc knows none.
    if out.is_empty() && !allowed.is_empty() {
        out.push((allowed.clone(), "the node".to_string()));
    }
    out.sort_by_key(|(c, _)| c.first());
    out
}

/// The CPUs of `cpus` grouped by core (SMT siblings together), in order.
fn core_groups(m: &Machine, cpus: &IdSet) -> Vec<IdSet> {
    let mut groups: Vec<IdSet> = m
        .cores
        .iter()
        .map(|c| c.cpus.intersection(cpus))
        .filter(|g| !g.is_empty())
        .collect();
    let covered = groups.iter().fold(IdSet::new(), |a, g| a.union(g));
    groups.extend(cpus.difference(&covered).iter().map(IdSet::single));
    groups.sort_by_key(|g| g.first());
    groups
}

/// Rank `r`'s share: with no more ranks than domains, a contiguous run of
/// whole domains each; with more, ranks spread evenly over the domains and
/// the ranks of one domain split its cores into contiguous blocks (a block
/// of whole cores each). Refused when a rank would get no core.
pub fn share(m: &Machine, d: &Domain, r: &LocalRank) -> Result<RankShare, String> {
    if let Domain::Map(list) = d {
        let cpu = *list
            .get(r.rank as usize % list.len().max(1))
            .ok_or("map: names no CPU")?;
        if !m.allowed_cpus.contains(cpu) {
            return Err(format!(
                "map: CPU {cpu} (local rank {}) is not one this process may use ({})",
                r.rank, m.allowed_cpus
            ));
        }
        let nodes: IdSet = m.node_of_cpu(cpu).into_iter().collect();
        return Ok(RankShare {
            cpus: IdSet::single(cpu),
            nodes,
            label: format!("CPU {cpu}"),
        });
    }
    let doms = domains(m, d);
    let (rank, size) = (r.rank as usize, r.size as usize);
    let n = doms.len();
    if n == 0 {
        return Err("this process may use no CPU".into());
    }
    let (cpus, label) = if size <= n {
        let (lo, hi) = (rank * n / size, (rank + 1) * n / size);
        let cpus = doms[lo..hi]
            .iter()
            .fold(IdSet::new(), |a, (c, _)| a.union(c));
        let label = doms[lo..hi]
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        (cpus, label)
    } else {
        // Domain i holds ranks [i·size/n, (i+1)·size/n).
        let dom = (0..n)
            .find(|&i| rank < (i + 1) * size / n)
            .expect("the last domain ends at size");
        let first = dom * size / n;
        let here = (dom + 1) * size / n - first;
        let cores = core_groups(m, &doms[dom].0);
        if cores.len() < here {
            let all_cores = core_groups(m, &m.allowed_cpus).len();
            let hint = if *d != Domain::CoreBlock && all_cores >= size {
                format!("give fewer ranks per node, or --per-rank core-block ({all_cores} cores in all)")
            } else {
                format!("give at most {all_cores} ranks per node")
            };
            return Err(format!(
                "{here} of the {size} ranks on this node share {} ({} cores): at most one rank per core; {hint}",
                doms[dom].1,
                cores.len(),
            ));
        }
        let k = rank - first;
        let (lo, hi) = (k * cores.len() / here, (k + 1) * cores.len() / here);
        let cpus = cores[lo..hi].iter().fold(IdSet::new(), |a, c| a.union(c));
        let label = if hi - lo == 1 {
            format!("core {lo} of {}", doms[dom].1)
        } else {
            format!("cores {lo} to {} of {}", hi - 1, doms[dom].1)
        };
        (cpus, label)
    };
    let nodes: IdSet = cpus.iter().filter_map(|c| m.node_of_cpu(c)).collect();
    Ok(RankShare { cpus, nodes, label })
}

/// One rank's placement as `run --per-rank --verify-json` recorded it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RankRecord {
    /// Its rank in the job (the local rank where the launcher gave none).
    pub rank: u32,
    pub host: String,
    /// The share it was given.
    pub cpus: IdSet,
    pub nodes: IdSet,
    /// The CPUs its threads were last seen on.
    pub seen_cpus: IdSet,
    /// Bytes of its own memory (anon, heap, stack) by node.
    pub private_bytes_by_node: std::collections::BTreeMap<u32, u64>,
}

impl RankRecord {
    /// A rank's record from the JSON `run --per-rank --verify --verify-json`
    /// wrote; `None` when it is not one.
    pub fn from_verify_json(v: &serde_json::Value) -> Option<RankRecord> {
        use serde_json::Value;
        let r = v.get("rank")?;
        let set = |x: Option<&Value>| -> IdSet {
            serde_json::from_value(x.cloned().unwrap_or_default()).unwrap_or_default()
        };
        Some(RankRecord {
            rank: r
                .get("rank")
                .and_then(Value::as_u64)
                .or_else(|| r.get("local_rank").and_then(Value::as_u64))? as u32,
            host: r.get("host")?.as_str()?.to_string(),
            cpus: set(r.get("cpus")),
            nodes: set(r.get("nodes")),
            seen_cpus: v
                .get("threads")?
                .as_array()?
                .iter()
                .filter_map(|t| t.get("last_cpu").and_then(Value::as_u64).map(|c| c as u32))
                .collect(),
            private_bytes_by_node: v
                .get("private_bytes_by_node")
                .and_then(Value::as_object)
                .map(|o| {
                    o.iter()
                        .filter_map(|(k, b)| Some((k.parse().ok()?, b.as_u64()?)))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

/// What is wrong with a job's ranks, one sentence each: ranks of one host
/// given the same CPUs, threads seen outside their rank's CPUs, memory
/// outside the rank's nodes (above 1% of it), ranks missing from 0..=max.
pub fn check(records: &[RankRecord]) -> Vec<String> {
    let mut bad = Vec::new();
    for (i, a) in records.iter().enumerate() {
        for b in &records[i + 1..] {
            if a.host == b.host && a.cpus.intersects(&b.cpus) {
                bad.push(format!(
                    "ranks {} and {} on {} overlap: both have CPUs {}",
                    a.rank,
                    b.rank,
                    a.host,
                    a.cpus.intersection(&b.cpus)
                ));
            }
            if a.host == b.host && a.rank == b.rank {
                bad.push(format!("rank {} on {} is recorded twice", a.rank, a.host));
            }
        }
        let outside = a.seen_cpus.difference(&a.cpus);
        if !outside.is_empty() {
            bad.push(format!(
                "rank {} on {}: threads ran on CPUs {}, outside its CPUs {}",
                a.rank, a.host, outside, a.cpus
            ));
        }
        let total: u64 = a.private_bytes_by_node.values().sum();
        let off: u64 = a
            .private_bytes_by_node
            .iter()
            .filter(|(n, _)| !a.nodes.contains(**n))
            .map(|(_, b)| b)
            .sum();
        if total > 0 && off * 100 > total {
            let where_: IdSet = a
                .private_bytes_by_node
                .iter()
                .filter(|(n, b)| !a.nodes.contains(**n) && **b > 0)
                .map(|(n, _)| *n)
                .collect();
            bad.push(format!(
                "rank {} on {}: {:.0}% of its memory on node {}, outside its nodes {}",
                a.rank,
                a.host,
                100.0 * off as f64 / total as f64,
                where_,
                a.nodes
            ));
        }
    }
    if let Some(max) = records.iter().map(|r| r.rank).max() {
        let have: IdSet = records.iter().map(|r| r.rank).collect();
        let missing: IdSet = (0..=max).filter(|r| !have.contains(*r)).collect();
        if !missing.is_empty() {
            bad.push(format!("ranks {missing} of 0-{max} wrote no record"));
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_ranks_stray_threads_and_far_memory_are_named() {
        let rec = |rank: u32, host: &str, cpus: &str, seen: &str, mem: &[(u32, u64)]| RankRecord {
            rank,
            host: host.into(),
            cpus: IdSet::parse_list(cpus).unwrap(),
            nodes: IdSet::single(0),
            seen_cpus: IdSet::parse_list(seen).unwrap(),
            private_bytes_by_node: mem.iter().copied().collect(),
        };
        let good = vec![
            rec(0, "a", "0", "0", &[(0, 100)]),
            rec(1, "a", "1", "1", &[(0, 100)]),
            rec(2, "b", "0", "0", &[(0, 100), (1, 1)]),
        ];
        assert!(check(&good).is_empty(), "{:?}", check(&good));
        let bad = vec![
            rec(0, "a", "0-1", "0", &[(0, 100)]),
            rec(1, "a", "1", "0-1", &[(0, 50), (1, 50)]),
            rec(3, "b", "0", "0", &[]),
        ];
        assert_eq!(
            check(&bad),
            vec![
                "ranks 0 and 1 on a overlap: both have CPUs 1",
                "rank 1 on a: threads ran on CPUs 0, outside its CPUs 1",
                "rank 1 on a: 50% of its memory on node 1, outside its nodes 0",
                "ranks 2 of 0-3 wrote no record",
            ]
        );
    }

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| pairs.iter().find(|p| p.0 == k).map(|p| p.1.to_string())
    }

    #[test]
    fn launchers_variables_give_the_local_rank() {
        assert_eq!(local_rank_from(env(&[])), None);
        let o = local_rank_from(env(&[
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ("OMPI_COMM_WORLD_RANK", "5"),
            ("SLURM_LOCALID", "0"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((o.rank, o.size, o.global), (1, 4, Some(5)), "mpirun first");
        let s = local_rank_from(env(&[
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "1"),
            ("SLURM_PROCID", "4"),
            ("SLURM_STEP_TASKS_PER_NODE", "3,2(x2)"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((s.rank, s.size, s.global), (1, 2, Some(4)));
        assert_eq!(tasks_on_node("2(x3),1", 3), Some(1));
        assert_eq!(tasks_on_node("2(x3),1", 4), None);
        let e = local_rank_from(env(&[("MPI_LOCALRANKID", "3"), ("MPI_LOCALNRANKS", "2")]))
            .unwrap()
            .unwrap_err();
        assert!(
            e.contains("local rank 3 of 2 ranks on the node does not fit"),
            "{e}"
        );
        let e = local_rank_from(env(&[("SLURM_LOCALID", "x")]))
            .unwrap()
            .unwrap_err();
        assert_eq!(e, "SLURM_LOCALID='x' is not a rank number");
    }

    fn rank(rank: u32, size: u32) -> LocalRank {
        LocalRank {
            rank,
            size,
            global: None,
            source: "test",
        }
    }

    fn quartet() -> Machine {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml");
        Machine::from_xml_file(&p).unwrap()
    }

    #[test]
    fn ranks_split_the_quartet_by_node_and_by_core_blocks() {
        let m = quartet();
        // 4 ranks, 4 nodes: one node each.
        for r in 0..4 {
            let s = share(&m, &Domain::Node, &rank(r, 4)).unwrap();
            assert_eq!(s.nodes, IdSet::single(r), "{s:?}");
            assert_eq!(s.cpus, m.allowed_cpus_of(r));
            assert_eq!(s.label, format!("NUMA node {r}"));
        }
        // 2 ranks: two nodes each.
        let s = share(&m, &Domain::Node, &rank(1, 2)).unwrap();
        assert_eq!(s.nodes.to_string(), "2-3");
        // 8 ranks over 4 nodes of 2 cores: one core each, node by node.
        let all: Vec<RankShare> = (0..8)
            .map(|r| share(&m, &Domain::Node, &rank(r, 8)).unwrap())
            .collect();
        for (r, s) in all.iter().enumerate() {
            assert_eq!(s.cpus.len(), 1, "{s:?}");
            assert_eq!(s.nodes, IdSet::single(r as u32 / 2), "{s:?}");
        }
        let union = all.iter().fold(IdSet::new(), |a, s| a.union(&s.cpus));
        assert_eq!(union, m.allowed_cpus, "no CPU left out, none shared");
        // Core blocks: 4 ranks, two cores each, in CPU order.
        let b = share(&m, &Domain::CoreBlock, &rank(3, 4)).unwrap();
        assert_eq!(b.cpus.len(), 2);
        assert_eq!(b.label, "cores 6 to 7 of the node");
        let e = share(&m, &Domain::Node, &rank(8, 9)).unwrap_err();
        assert!(e.contains("at most one rank per core"), "{e}");
        assert!(Domain::parse("ring")
            .unwrap_err()
            .contains("valid: node, socket, cache, core-block, map:CPU,CPU,..."));
        // map: local rank i on the i-th CPU of the list (mod its length).
        let d = Domain::parse("map:6,0").unwrap();
        assert_eq!(d, Domain::Map(vec![6, 0]));
        let s = share(&m, &d, &rank(2, 3)).unwrap();
        assert_eq!(
            (s.cpus, s.nodes, s.label),
            (IdSet::single(6), IdSet::single(3), "CPU 6".into())
        );
        let e = share(&m, &Domain::Map(vec![9]), &rank(0, 1)).unwrap_err();
        assert!(
            e.starts_with("map: CPU 9 (local rank 0) is not one this process may use (0-7)"),
            "{e}"
        );
        let e = Domain::parse("map:1,x").unwrap_err();
        assert!(e.contains("'x' is not a CPU number"), "{e}");
    }
}
