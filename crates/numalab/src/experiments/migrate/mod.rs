//! `numalab migrate`: how fast the kernel moves pages between memory nodes,
//! by each of its three interfaces (docs/migrate.md).
//!
//! For every ordered pair of nodes asked for and every method, a fresh
//! buffer is bound to the source node and first-touched there, its pages
//! counted with the kernel, then moved to the destination `reps` times: each
//! forward move is timed and verified page by page, then the buffer goes
//! back (untimed, verified) for the next repetition.
//!
//! - `move_pages(2)` gets one target per page, in batches of
//!   [`MOVE_PAGES_BATCH`]; its per-page statuses are kept.
//! - `mbind(MPOL_BIND, MPOL_MF_MOVE)` rebinds the range and moves it.
//! - `migrate_pages(2)` moves every page of the *process* on the source
//!   node. It runs in a forked child that owns nothing on the source node
//!   but the buffer: the child's own memory policy binds everything else it
//!   writes to the destination, an untimed warm-up move carries off the few
//!   stack pages it copied before that, the buffer goes back with `mbind`,
//!   and CAP_SYS_NICE is out of its effective set so the kernel leaves the
//!   pages it shares with numalab (and shared libraries) alone. The child
//!   makes only system calls into memory prepared before the fork (no
//!   allocation, no lock), so forking from a threaded process is sound, and
//!   sends its figures back through a pipe.
//!
//! The measuring thread (the child, for `migrate_pages`) is pinned to one
//! CPU of the source node, or of the destination when the source has no
//! CPUs, or else to the first allowed CPU ([`measuring_cpu`]); migration
//! copies pages on the CPU that asks for it.

mod figures;
mod moves;
mod summary;

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::stats::Summary;
use crate::placement::buffer::system_thp_mode;
use crate::placement::sys;
use crate::placement::{check_plan, BufferDemand, MemoryPolicy, PlacementError};
use crate::IdSet;
use moves::measure_method;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Largest buffer `--size` accepts: enough to see steady-state migration,
/// small enough that the per-page arrays stay modest (4 GiB: 1 Mi pages).
pub const MAX_SIZE: u64 = 4 << 30;
/// Most repetitions per pair and method.
pub const MAX_REPS: usize = 100;
/// Pages handed to one `move_pages` call.
pub const MOVE_PAGES_BATCH: usize = 4096;
/// Default `--size`.
pub const DEFAULT_SIZE: u64 = 64 << 20;

const HUGE_2M: usize = 2 << 20;

/// A kernel interface that moves pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// `move_pages(2)`: a target node per page.
    MovePages,
    /// `mbind(2)` with `MPOL_BIND` and `MPOL_MF_MOVE` on the range.
    Mbind,
    /// `migrate_pages(2)`: every page of the process from old to new nodes.
    MigratePages,
}

impl Method {
    /// Every method, in the order they run.
    pub const ALL: [Method; 3] = [Method::MovePages, Method::Mbind, Method::MigratePages];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Method::MovePages => "move_pages",
            Method::Mbind => "mbind",
            Method::MigratePages => "migrate_pages",
        }
    }

    /// Parses `move_pages`, `mbind`, `migrate_pages` or `all`.
    pub fn parse_list(text: &str) -> Result<Vec<Method>, String> {
        match text.trim() {
            "all" => Ok(Self::ALL.to_vec()),
            t => Self::ALL
                .into_iter()
                .find(|m| m.name() == t)
                .map(|m| vec![m])
                .ok_or_else(|| {
                    format!(
                        "unknown method '{}'; valid: move_pages, mbind, migrate_pages, all",
                        crate::text::format::excerpt(t, 40)
                    )
                }),
        }
    }
}

/// Which node pairs to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// One pair, from `--from` to `--to`.
    Pair { from: u32, to: u32 },
    /// The first node with CPUs to the next memory node.
    Default,
    /// Every ordered pair of memory nodes.
    Matrix,
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct MigrateRequest {
    /// Bytes of the buffer (rounded up to whole base pages).
    pub size: usize,
    pub selection: Selection,
    /// `madvise(MADV_HUGEPAGE)` on the buffer (else `MADV_NOHUGEPAGE`).
    pub thp: bool,
    pub methods: Vec<Method>,
    /// Timed forward moves per pair and method.
    pub reps: usize,
}

/// One method's moves of one buffer from one node to another.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MethodResult {
    pub method: Method,
    /// Base pages of the buffer.
    pub pages: u64,
    /// Where the pages were after the first touch, before any move (all on
    /// the source when placed right).
    pub placed_pages_by_node: BTreeMap<u32, u64>,
    /// Where the pages were after the last forward move.
    pub pages_by_node: BTreeMap<u32, u64>,
    /// Fewest pages found on the destination after a forward move.
    pub pages_moved: u64,
    /// Most pages found elsewhere after a forward move.
    pub pages_not_moved: u64,
    /// Over all forward moves: pages `move_pages` gave an error status, or
    /// that `migrate_pages` reported it could not move (0 for `mbind`, which
    /// reports no count).
    pub move_failures: u64,
    /// For `move_pages`: the failures of each move counted under the name
    /// of that move's first error status (a move rarely has two kinds).
    pub failure_statuses: BTreeMap<String, u64>,
    /// Backward moves (untimed) that left a page off the source.
    pub back_moves_incomplete: u64,
    /// 2 MiB pages the buffer had when placed (from /proc/self/smaps
    /// AnonHugePages); `None` where not counted (`migrate_pages` runs in a
    /// child).
    pub huge_pages_placed: Option<u64>,
    /// 2 MiB pages after the last forward move.
    pub huge_pages_after: Option<u64>,
    /// The CPU the measuring thread ran on.
    pub cpu_seen: Option<u32>,
    /// Seconds of each timed forward move.
    pub seconds: Vec<f64>,
    /// Bytes moved per second (pages found on the destination x 4 KiB),
    /// in GB/s (1e9); `None` when no move moved a page.
    pub gbps: Option<Summary>,
    /// Microseconds per base page moved.
    pub us_per_page: Option<Summary>,
    /// Best GB/s (the largest).
    pub best_gbps: Option<f64>,
    /// Every page on the source after the touch, on the destination after
    /// every forward move, back on the source after every backward move.
    pub verified: bool,
    /// Why not verified, or why nothing was measured.
    pub problems: Vec<String>,
}

/// Every method between one pair of nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairResult {
    pub from: u32,
    pub to: u32,
    /// Firmware distance (SLIT) from source to destination.
    pub distance: u64,
    pub methods: Vec<MethodResult>,
}

/// Median GB/s per ordered pair for one method: `gbps[i][j]` from
/// `nodes[i]` to `nodes[j]` (`None` on the diagonal and where unmeasured).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MethodMatrix {
    pub method: Method,
    pub nodes: Vec<u32>,
    pub gbps: Vec<Vec<Option<f64>>>,
}

/// The result of `numalab migrate`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MigrateResult {
    pub size_bytes: u64,
    /// Base page size.
    pub page_size: u64,
    pub pages: u64,
    /// Whether `MADV_HUGEPAGE` was asked for.
    pub thp: bool,
    /// The system's THP mode (/sys/kernel/mm/transparent_hugepage/enabled),
    /// `None` where the kernel has no THP.
    pub thp_system: Option<String>,
    /// Why the buffer cannot have huge pages, when `thp` was asked for and
    /// the kernel will not give them.
    pub thp_unavailable: Option<String>,
    pub methods: Vec<Method>,
    pub reps: usize,
    /// The CPU the measuring thread is pinned to, per source node.
    pub measuring_cpus: BTreeMap<u32, u32>,
    pub matrix: bool,
    pub pairs: Vec<PairResult>,
    /// With `--matrix`: median GB/s per pair for each method.
    pub matrices: Vec<MethodMatrix>,
    /// Every method of every pair verified.
    pub verified: bool,
    pub warnings: Vec<String>,
}

/// The ordered node pairs `sel` names on `m`. Bad input (the same node
/// twice, a node that is not a memory node this process may use) is
/// [`PlacementError::Invalid`]; a machine with one memory node has nowhere
/// to move pages: [`PlacementError::Unsupported`].
pub fn pairs_for(m: &Machine, sel: Selection) -> Result<Vec<(u32, u32)>, PlacementError> {
    let nodes = m.memory_nodes();
    let check = |opt: &str, n: u32| {
        if nodes.contains(n) {
            Ok(())
        } else {
            Err(PlacementError::Invalid(format!(
                "{opt} {n} is not a memory node this process may use; valid memory nodes: {nodes}"
            )))
        }
    };
    if let Selection::Pair { from, to } = sel {
        if from == to {
            return Err(PlacementError::Invalid(format!(
                "--from and --to must differ (both are node {from}); valid memory nodes: {nodes}"
            )));
        }
        check("--from", from)?;
        check("--to", to)?;
    }
    if nodes.len() < 2 {
        return Err(PlacementError::Unsupported(format!(
            "nothing to migrate: this machine has one memory node ({nodes}) this process may use; migrate needs two or more"
        )));
    }
    Ok(match sel {
        Selection::Pair { from, to } => vec![(from, to)],
        Selection::Default => {
            let from = m.cpu_nodes().first().or(nodes.first()).unwrap_or(0);
            let to = nodes.iter().find(|&n| n != from).unwrap_or(from);
            vec![(from, to)]
        }
        Selection::Matrix => nodes
            .iter()
            .flat_map(|a| nodes.iter().filter(move |&b| b != a).map(move |b| (a, b)))
            .collect(),
    })
}

/// The CPU that measures moves out of `from` into `to`: the first allowed
/// CPU of `from`, else of `to` (a CPU-less source), else the first allowed.
pub fn measuring_cpu(m: &Machine, from: u32, to: u32) -> Option<u32> {
    m.allowed_cpus_of(from)
        .first()
        .or_else(|| m.allowed_cpus_of(to).first())
        .or_else(|| m.allowed_cpus.first())
}

/// Runs the request on the live machine. `progress` is told each step.
pub fn run_migrate(
    m: &Machine,
    req: &MigrateRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<MigrateResult, PlacementError> {
    if !m.is_live() {
        return Err(PlacementError::Invalid(
            "migrating pages needs the live machine, not a topology file".into(),
        ));
    }
    if req.size == 0 || req.size as u64 > MAX_SIZE {
        return Err(PlacementError::Invalid(format!(
            "--size must be from 4 KiB to {}",
            crate::text::format::bytes(MAX_SIZE)
        )));
    }
    if req.reps == 0 || req.reps > MAX_REPS {
        return Err(PlacementError::Invalid(format!(
            "--reps must be from 1 to {MAX_REPS}"
        )));
    }
    let pairs = pairs_for(m, req.selection)?;
    let page = sys::page_size();
    let len = req.size.div_ceil(page) * page;
    // The buffer lives on one node at a time, but on every node of a pair.
    let involved: IdSet = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    let phases: Vec<Vec<BufferDemand>> = involved
        .iter()
        .map(|n| vec![BufferDemand::new(len, &MemoryPolicy::on_node(n), None)])
        .collect();
    check_plan(m, &phases, "use a smaller --size")?;

    let thp_system = system_thp_mode();
    let thp_unavailable = if !req.thp {
        None
    } else {
        match thp_system.as_deref() {
            None => Some("this kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage)".to_string()),
            Some("never") => Some("transparent huge pages are disabled (/sys/kernel/mm/transparent_hugepage/enabled is never)".to_string()),
            Some(_) => None,
        }
    };
    let mut warnings = Vec::new();
    if let Some(why) = &thp_unavailable {
        warnings.push(format!("--thp on: {why}; the buffer has base pages only"));
    }
    let mut measuring_cpus = BTreeMap::new();
    let mut results = Vec::with_capacity(pairs.len());
    'pairs: for &(from, to) in &pairs {
        let cpu = measuring_cpu(m, from, to)
            .ok_or_else(|| PlacementError::Invalid("this process may use no CPU at all".into()))?;
        measuring_cpus.insert(from, cpu);
        let mut methods = Vec::with_capacity(req.methods.len());
        for &method in &req.methods {
            if cancel::requested() {
                warnings.push(cancel::WARNING.to_string());
                results.push(PairResult {
                    from,
                    to,
                    distance: m.distance(from, to),
                    methods,
                });
                break 'pairs;
            }
            progress(&format!("{} {from}->{to}", method.name()));
            let plan = Plan {
                len,
                page,
                thp: req.thp,
                from,
                to,
                cpu,
                reps: req.reps,
            };
            methods.push(measure_method(&plan, method)?);
        }
        results.push(PairResult {
            from,
            to,
            distance: m.distance(from, to),
            methods,
        });
    }
    let matrices = if req.selection == Selection::Matrix {
        matrices_of(&m.memory_nodes(), &req.methods, &results)
    } else {
        Vec::new()
    };
    let verified =
        !results.is_empty() && results.iter().all(|p| p.methods.iter().all(|r| r.verified));
    Ok(MigrateResult {
        size_bytes: len as u64,
        page_size: page as u64,
        pages: (len / page) as u64,
        thp: req.thp,
        thp_system,
        thp_unavailable,
        methods: req.methods.clone(),
        reps: req.reps,
        measuring_cpus,
        matrix: req.selection == Selection::Matrix,
        pairs: results,
        matrices,
        verified,
        warnings,
    })
}

fn matrices_of(nodes: &IdSet, methods: &[Method], pairs: &[PairResult]) -> Vec<MethodMatrix> {
    let ids: Vec<u32> = nodes.iter().collect();
    methods
        .iter()
        .map(|&method| {
            let cell = |a: u32, b: u32| {
                pairs
                    .iter()
                    .find(|p| p.from == a && p.to == b)?
                    .methods
                    .iter()
                    .find(|r| r.method == method)?
                    .gbps
                    .as_ref()
                    .map(|s| s.median)
            };
            MethodMatrix {
                method,
                nodes: ids.clone(),
                gbps: ids
                    .iter()
                    .map(|&a| ids.iter().map(|&b| cell(a, b)).collect())
                    .collect(),
            }
        })
        .collect()
}

/// One method's measurement between one pair.
#[derive(Debug, Clone, Copy)]
struct Plan {
    len: usize,
    page: usize,
    thp: bool,
    from: u32,
    to: u32,
    cpu: u32,
    reps: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;

    #[test]
    fn quartet_matrix_is_every_ordered_pair() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let pairs = pairs_for(&m, Selection::Matrix).unwrap();
        assert_eq!(pairs.len(), 12);
        assert!(pairs.contains(&(0, 3)) && pairs.contains(&(3, 0)));
        assert!(pairs.iter().all(|(a, b)| a != b));
        assert_eq!(pairs_for(&m, Selection::Default).unwrap(), vec![(0, 1)]);
    }

    #[test]
    fn ring_matrix_includes_the_cpuless_node() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let pairs = pairs_for(&m, Selection::Matrix).unwrap();
        assert_eq!(pairs.len(), 20);
        assert!(pairs.contains(&(4, 0)) && pairs.contains(&(0, 4)));
        // Out of a CPU-less node, the destination's CPU measures.
        assert_eq!(measuring_cpu(&m, 4, 3), m.allowed_cpus_of(3).first());
        assert_eq!(measuring_cpu(&m, 0, 4), m.allowed_cpus_of(0).first());
    }

    #[test]
    fn bad_pairs_are_refused_naming_the_valid_nodes() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let e = pairs_for(&m, Selection::Pair { from: 2, to: 2 }).unwrap_err();
        assert!(matches!(e, PlacementError::Invalid(_)));
        assert_eq!(
            e.to_string(),
            "--from and --to must differ (both are node 2); valid memory nodes: 0-3"
        );
        let e = pairs_for(&m, Selection::Pair { from: 0, to: 7 }).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--to 7 is not a memory node this process may use; valid memory nodes: 0-3"
        );
    }

    #[test]
    fn one_memory_node_has_nowhere_to_move() {
        let m = Machine::live().unwrap();
        if m.memory_nodes().len() != 1 {
            numalab_testkit::skip("this machine has several memory nodes");
            return;
        }
        let e = pairs_for(&m, Selection::Default).unwrap_err();
        assert!(matches!(e, PlacementError::Unsupported(_)), "{e}");
        assert!(e
            .to_string()
            .starts_with("nothing to migrate: this machine has one memory node (0)"));
    }

    /// Every method's path on this machine with node 0 to node 0 (the
    /// only move a one-node machine has): placement, moves that leave
    /// every page where it is, the pipe back from the migrate_pages child.
    #[test]
    fn every_method_runs_and_verifies_in_place() {
        let m = Machine::live().unwrap();
        let cpu = m.allowed_cpus.first().unwrap();
        let node = m.node_of_cpu(cpu).unwrap();
        let plan = Plan {
            len: 64 * sys::page_size(),
            page: sys::page_size(),
            thp: false,
            from: node,
            to: node,
            cpu,
            reps: 3,
        };
        for method in Method::ALL {
            let r = measure_method(&plan, method).unwrap();
            assert_eq!(r.problems, Vec::<String>::new(), "{method:?}");
            assert!(r.verified, "{method:?}");
            assert_eq!(r.pages, 64);
            assert_eq!(r.placed_pages_by_node, BTreeMap::from([(node, 64)]));
            assert_eq!(r.pages_by_node, BTreeMap::from([(node, 64)]));
            assert_eq!((r.pages_moved, r.pages_not_moved), (64, 0));
            assert_eq!(r.move_failures, 0, "{method:?}");
            assert_eq!(r.seconds.len(), 3);
            assert_eq!(r.cpu_seen, Some(cpu), "{method:?}");
            assert_eq!(r.gbps.as_ref().map(|s| s.n), Some(3));
            assert!(r.best_gbps.is_some_and(|g| g.is_finite() && g > 0.0));
            let counted = method != Method::MigratePages;
            assert_eq!(r.huge_pages_placed, counted.then_some(0), "{method:?}");
        }
    }

    #[test]
    fn methods_parse_by_name() {
        assert_eq!(Method::parse_list("all").unwrap(), Method::ALL.to_vec());
        assert_eq!(Method::parse_list("mbind").unwrap(), vec![Method::Mbind]);
        assert_eq!(
            Method::parse_list("move").unwrap_err(),
            "unknown method 'move'; valid: move_pages, mbind, migrate_pages, all"
        );
    }
}
