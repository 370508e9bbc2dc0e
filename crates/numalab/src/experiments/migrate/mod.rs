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

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::stats::{Better, Summary};
use crate::placement::buffer::system_thp_mode;
use crate::placement::sys::{self, KernelMask, Mode};
use crate::placement::{check_plan, BufferDemand, MemoryPolicy, PlacementError};
use crate::sys::child::{self, Trial};
use crate::sys::mapping::AnonymousMapping;
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

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

/// What the moves found, in plain numbers so that a forked child can fill
/// it in without allocating and send it back as bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Header {
    /// 0: ran to the end; else the [`Stage`] that failed.
    failed_stage: u32,
    /// The errno of the failure.
    errno: i32,
    cpu_seen: i32,
    placed: Count,
}

/// Pages of the buffer by where the kernel says they are.
#[derive(Debug, Clone, Copy, Default)]
struct Count {
    on_node: u64,
    elsewhere: u64,
    untouched: u64,
    unknown: u64,
}

/// Little-endian bytes of the numbers a forked child sends back: encoded
/// on the stack (no allocation), decoded by the parent.
struct Bytes<const N: usize> {
    b: [u8; N],
    at: usize,
}

impl<const N: usize> Bytes<N> {
    fn new() -> Self {
        Bytes { b: [0; N], at: 0 }
    }
    fn from(b: &[u8]) -> Self {
        let mut out = Self::new();
        out.b.copy_from_slice(&b[..N]);
        out
    }
    fn put(&mut self, v: [u8; 8]) -> &mut Self {
        self.b[self.at..self.at + 8].copy_from_slice(&v);
        self.at += 8;
        self
    }
    fn take(&mut self) -> [u8; 8] {
        let v = self.b[self.at..self.at + 8].try_into().expect("8 bytes");
        self.at += 8;
        v
    }
    fn put_count(&mut self, c: &Count) -> &mut Self {
        for v in [c.on_node, c.elsewhere, c.untouched, c.unknown] {
            self.put(v.to_le_bytes());
        }
        self
    }
    fn take_count(&mut self) -> Count {
        let mut v = [0u64; 4];
        for x in &mut v {
            *x = u64::from_le_bytes(self.take());
        }
        Count {
            on_node: v[0],
            elsewhere: v[1],
            untouched: v[2],
            unknown: v[3],
        }
    }
    /// Two 32-bit numbers in one 8-byte word.
    fn put_pair(&mut self, a: u32, b: u32) -> &mut Self {
        self.put((u64::from(a) | u64::from(b) << 32).to_le_bytes())
    }
    fn take_pair(&mut self) -> (u32, u32) {
        let w = u64::from_le_bytes(self.take());
        (w as u32, (w >> 32) as u32)
    }
}

impl Header {
    const BYTES: usize = 16 + 32;

    fn encode(&self) -> Bytes<{ Header::BYTES }> {
        let mut b = Bytes::new();
        b.put_pair(self.failed_stage, self.errno as u32)
            .put_pair(self.cpu_seen as u32, 0)
            .put_count(&self.placed);
        b
    }

    fn decode(bytes: &[u8]) -> Header {
        let mut b = Bytes::<{ Header::BYTES }>::from(bytes);
        let (failed_stage, errno) = b.take_pair();
        let (cpu_seen, _) = b.take_pair();
        Header {
            failed_stage,
            errno: errno as i32,
            cpu_seen: cpu_seen as i32,
            placed: b.take_count(),
        }
    }
}

impl Rep {
    const BYTES: usize = 8 + 32 + 8 + 8 + 32;

    fn encode(&self) -> Bytes<{ Rep::BYTES }> {
        let mut b = Bytes::new();
        b.put(self.seconds.to_le_bytes())
            .put_count(&self.after)
            .put(self.failures.to_le_bytes())
            .put_pair(self.first_status as u32, 0)
            .put_count(&self.back);
        b
    }

    fn decode(bytes: &[u8]) -> Rep {
        let mut b = Bytes::<{ Rep::BYTES }>::from(bytes);
        let seconds = f64::from_le_bytes(b.take());
        let after = b.take_count();
        let failures = u64::from_le_bytes(b.take());
        let (first_status, _) = b.take_pair();
        Rep {
            seconds,
            after,
            failures,
            first_status: first_status as i32,
            back: b.take_count(),
        }
    }
}

/// One timed forward move and its untimed way back.
#[derive(Debug, Clone, Copy, Default)]
struct Rep {
    seconds: f64,
    after: Count,
    /// Error statuses or pages reported not moved.
    failures: u64,
    /// The first error status (a negative errno), 0 if none.
    first_status: i32,
    back: Count,
}

/// Where a measurement failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Stage {
    Pin = 1,
    Bind = 2,
    Query = 3,
    Move = 4,
    MoveBack = 5,
    Policy = 6,
    Child = 7,
}

impl Stage {
    fn of(code: u32) -> &'static str {
        match code {
            1 => "pinning the measuring thread",
            2 => "binding the buffer to its source node",
            3 => "asking the kernel where the pages are",
            4 => "moving the pages",
            5 => "moving the pages back",
            6 => "setting the child's memory policy",
            _ => "running the migrate_pages child",
        }
    }
}

/// Arrays prepared before the moves (and before any fork).
struct Work {
    /// Page addresses, as numbers for the kernel.
    pages: Vec<usize>,
    status: Vec<i32>,
    to_dest: Vec<i32>,
    to_source: Vec<i32>,
    from_mask: KernelMask,
    to_mask: KernelMask,
    header: Header,
    reps: Vec<Rep>,
}

impl Work {
    fn new(region: &Region, plan: &Plan) -> Self {
        let n = plan.len / plan.page;
        Work {
            pages: (0..n).map(|i| region.start() + i * plan.page).collect(),
            status: vec![0; n],
            to_dest: vec![plan.to as i32; n],
            to_source: vec![plan.from as i32; n],
            from_mask: KernelMask::new(&IdSet::single(plan.from)),
            to_mask: KernelMask::new(&IdSet::single(plan.to)),
            header: Header::default(),
            reps: vec![Rep::default(); plan.reps],
        }
    }

    /// Where the pages are, counted against `node`. No allocation.
    fn count(&mut self, node: u32) -> Result<Count, i32> {
        let mut c = Count::default();
        let mut i = 0;
        while i < self.pages.len() {
            let k = MOVE_PAGES_BATCH.min(self.pages.len() - i);
            sys::query_page_nodes(0, &self.pages[i..i + k], &mut self.status[i..i + k])
                .map_err(|e| e.raw_os_error().unwrap_or(0))?;
            i += k;
        }
        for &s in &self.status {
            if s == node as i32 {
                c.on_node += 1;
            } else if s >= 0 {
                c.elsewhere += 1;
            } else if s == -libc::ENOENT {
                c.untouched += 1;
            } else {
                c.unknown += 1;
            }
        }
        Ok(c)
    }

    /// One move of the whole buffer to `dest` by `method`: (failures, first
    /// error status). No allocation.
    fn move_to(
        &mut self,
        method: Method,
        region: &Region,
        dest_is_to: bool,
    ) -> Result<(u64, i32), i32> {
        let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(0);
        match method {
            Method::MovePages => {
                let targets = if dest_is_to {
                    &self.to_dest
                } else {
                    &self.to_source
                };
                let (mut failures, mut first) = (0u64, 0i32);
                let mut i = 0;
                while i < self.pages.len() {
                    let k = MOVE_PAGES_BATCH.min(self.pages.len() - i);
                    sys::move_pages(
                        0,
                        &self.pages[i..i + k],
                        &targets[i..i + k],
                        &mut self.status[i..i + k],
                    )
                    .map_err(errno)?;
                    i += k;
                }
                for &s in &self.status {
                    if s < 0 {
                        failures += 1;
                        if first == 0 {
                            first = s;
                        }
                    }
                }
                Ok((failures, first))
            }
            Method::Mbind => {
                let mask = if dest_is_to {
                    &self.to_mask
                } else {
                    &self.from_mask
                };
                region
                    .bind(Mode::Bind, mask, sys::MPOL_MF_MOVE)
                    .map_err(errno)?;
                Ok((0, 0))
            }
            Method::MigratePages => {
                let (old, new) = if dest_is_to {
                    (&self.from_mask, &self.to_mask)
                } else {
                    (&self.to_mask, &self.from_mask)
                };
                let left = sys::migrate_pages_mask(0, old, new).map_err(errno)?;
                Ok((left as u64, 0))
            }
        }
    }

    /// Binds and touches the buffer on the source, then the timed moves.
    /// `observe(None, _)` runs once the buffer is placed, `observe(Some(rep), _)`
    /// after each forward move. Makes only system calls into prepared
    /// memory: a forked child may run it.
    fn run(
        &mut self,
        method: Method,
        region: &mut Region,
        plan: &Plan,
        observe: &mut dyn FnMut(Option<usize>, &Region),
    ) {
        if let Err((stage, errno)) = self.run_inner(method, region, plan, observe) {
            self.header.failed_stage = stage as u32;
            self.header.errno = errno;
        }
    }

    fn run_inner(
        &mut self,
        method: Method,
        region: &mut Region,
        plan: &Plan,
        observe: &mut dyn FnMut(Option<usize>, &Region),
    ) -> Result<(), (Stage, i32)> {
        let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(0);
        region
            .bind(Mode::Bind, &self.from_mask, 0)
            .map_err(|e| (Stage::Bind, errno(e)))?;
        region.touch_pages(plan.page, 1);
        self.header.placed = self.count(plan.from).map_err(|e| (Stage::Query, e))?;
        observe(None, region);
        if method == Method::MigratePages {
            // The warm-up: carries off whatever else of this child is on
            // the source (stack pages copied before its policy was set);
            // the buffer comes back by mbind, which moves nothing else.
            self.move_to(method, region, true)
                .map_err(|e| (Stage::Move, e))?;
            self.move_to(Method::Mbind, region, false)
                .map_err(|e| (Stage::MoveBack, e))?;
        }
        for rep in 0..self.reps.len() {
            let t0 = Instant::now();
            let (failures, first_status) = self
                .move_to(method, region, true)
                .map_err(|e| (Stage::Move, e))?;
            let seconds = t0.elapsed().as_secs_f64();
            let after = self.count(plan.to).map_err(|e| (Stage::Query, e))?;
            observe(Some(rep), region);
            let back_method = if method == Method::MigratePages {
                Method::Mbind
            } else {
                method
            };
            self.move_to(back_method, region, false)
                .map_err(|e| (Stage::MoveBack, e))?;
            let back = self.count(plan.from).map_err(|e| (Stage::Query, e))?;
            self.reps[rep] = Rep {
                seconds,
                after,
                failures,
                first_status,
                back,
            };
        }
        Ok(())
    }
}

/// The measured buffer: an anonymous mapping, 2 MiB aligned, with THP
/// advice and no pages yet.
struct Region(AnonymousMapping);

impl std::ops::Deref for Region {
    type Target = AnonymousMapping;
    fn deref(&self) -> &AnonymousMapping {
        &self.0
    }
}

impl std::ops::DerefMut for Region {
    fn deref_mut(&mut self) -> &mut AnonymousMapping {
        &mut self.0
    }
}

impl Region {
    fn new(len: usize, thp: bool) -> Result<Self, PlacementError> {
        let map = AnonymousMapping::new(len, HUGE_2M)
            .map_err(|e| PlacementError::Os(format!("mmap of {len} bytes: {e}")))?;
        let advice = if thp {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // A kernel without THP refuses the advice (EINVAL): then the
        // buffer has base pages, which the result says.
        let _ = map.advise(advice);
        Ok(Region(map))
    }

    /// 2 MiB pages backing the region now (/proc/self/smaps).
    fn huge_pages(&self) -> Option<u64> {
        let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let start = self.start() as u64;
        Some(anon_huge_kb(&text, start, start + self.len() as u64)? * 1024 / HUGE_2M as u64)
    }
}

/// The AnonHugePages (kB) of the mappings of an smaps text that overlap
/// `[start, end)`; `None` when no mapping overlaps.
fn anon_huge_kb(smaps: &str, start: u64, end: u64) -> Option<u64> {
    let mut inside = false;
    let mut found = false;
    let mut kb = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
                inside = a < end && b > start;
                found |= inside;
                continue;
            }
        }
        if inside {
            if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                kb += rest
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    found.then_some(kb)
}

fn measure_method(plan: &Plan, method: Method) -> Result<MethodResult, PlacementError> {
    let mut region = Region::new(plan.len, plan.thp)?;
    let mut work = Work::new(&region, plan);
    let mut huge = (None, None);
    if method == Method::MigratePages {
        in_child(&mut work, &mut region, plan)?;
    } else {
        let last = plan.reps - 1;
        std::thread::scope(|s| {
            crate::placement::sys::spawn_scoped(s, "the measuring thread", || {
                if let Err(e) = sys::set_affinity(0, &IdSet::single(plan.cpu)) {
                    work.header.failed_stage = Stage::Pin as u32;
                    work.header.errno = e.raw_os_error().unwrap_or(0);
                    return;
                }
                work.header.cpu_seen = sys::current_cpu().map_or(-1, |c| c as i32);
                let mut observe = |rep: Option<usize>, region: &Region| match rep {
                    None => huge.0 = region.huge_pages(),
                    Some(r) if r == last => huge.1 = region.huge_pages(),
                    Some(_) => {}
                };
                work.run(method, &mut region, plan, &mut observe);
            })?
            .join()
            .map_err(|_| PlacementError::Os("the measuring thread panicked".into()))
        })?;
    }
    Ok(summarize(method, plan, &work, huge))
}

/// How long the `migrate_pages` child may take: far beyond any move of the
/// largest buffer `migrate` accepts; a child past it is killed and the
/// method reported failed.
const CHILD_LIMIT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Runs the moves in a forked child (see the module documentation) and
/// reads its figures back: the child writes them as bytes on its standard
/// error, which `sys::child` collects.
fn in_child(work: &mut Work, region: &mut Region, plan: &Plan) -> Result<(), PlacementError> {
    let cpu_mask = KernelMask::new(&IdSet::single(plan.cpu));
    let reps = work.reps.len();
    let trial = child::in_child(
        || {
            // Only system calls into memory prepared before the fork.
            child_moves(work, region, plan, &cpu_mask);
            let mut sent = child::write_stderr(&work.header.encode().b);
            for rep in &work.reps {
                sent &= child::write_stderr(&rep.encode().b);
            }
            i32::from(!sent)
        },
        CHILD_LIMIT,
        Header::BYTES + reps * Rep::BYTES,
    );
    let said = match trial {
        Trial::Exited { code: 0, said } if said.len() == Header::BYTES + reps * Rep::BYTES => said,
        Trial::NotRun => {
            return Err(PlacementError::Os(format!(
                "no child for migrate_pages (pipe or fork refused): {}",
                std::io::Error::last_os_error()
            )))
        }
        _ => {
            work.header.failed_stage = Stage::Child as u32;
            work.header.errno = 0;
            return Ok(());
        }
    };
    work.header = Header::decode(&said);
    for (i, rep) in work.reps.iter_mut().enumerate() {
        *rep = Rep::decode(&said[Header::BYTES + i * Rep::BYTES..]);
    }
    Ok(())
}

fn child_moves(work: &mut Work, region: &mut Region, plan: &Plan, cpu_mask: &KernelMask) {
    if let Err(e) = sys::set_affinity_mask(0, cpu_mask) {
        work.header.failed_stage = Stage::Pin as u32;
        work.header.errno = e.raw_os_error().unwrap_or(0);
        return;
    }
    work.header.cpu_seen = sys::current_cpu().map_or(-1, |c| c as i32);
    // Without CAP_SYS_NICE the kernel moves only pages this child alone
    // maps; an error means it was not in effect anyway.
    let _ = sys::drop_effective_capability(sys::CAP_SYS_NICE);
    if let Err(e) = sys::set_mempolicy_mask(Mode::Bind, &work.to_mask) {
        work.header.failed_stage = Stage::Policy as u32;
        work.header.errno = e.raw_os_error().unwrap_or(0);
        return;
    }
    work.run(Method::MigratePages, region, plan, &mut |_, _| {});
}

fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EBUSY => "EBUSY",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::ENOENT => "ENOENT",
        libc::EPERM => "EPERM",
        libc::EINVAL => "EINVAL",
        libc::E2BIG => "E2BIG",
        libc::ENODEV => "ENODEV",
        libc::EIO => "EIO",
        libc::ENOSYS => "ENOSYS",
        libc::EAGAIN => "EAGAIN",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

fn by_node(c: &Count, node: u32, other: Option<u32>) -> BTreeMap<u32, u64> {
    let mut m = BTreeMap::new();
    if c.on_node > 0 {
        m.insert(node, c.on_node);
    }
    if let (Some(o), true) = (other, c.elsewhere > 0) {
        m.insert(o, c.elsewhere);
    }
    m
}

/// The method's result from the raw figures.
fn summarize(
    method: Method,
    plan: &Plan,
    work: &Work,
    huge: (Option<u64>, Option<u64>),
) -> MethodResult {
    let pages = (plan.len / plan.page) as u64;
    let h = &work.header;
    let mut problems = Vec::new();
    if h.failed_stage != 0 {
        problems.push(format!(
            "{} failed: {}",
            Stage::of(h.failed_stage),
            if h.errno == 0 {
                "no figures came back".to_string()
            } else {
                std::io::Error::from_raw_os_error(h.errno).to_string()
            }
        ));
    }
    let ran = if h.failed_stage == 0 {
        &work.reps[..]
    } else {
        &work.reps[..0]
    };
    // Only two nodes are involved: what is not on one is on the other.
    let placed = by_node(&h.placed, plan.from, Some(plan.to));
    if h.failed_stage == 0 && h.placed.on_node != pages {
        problems.push(format!(
            "after the first touch {} of {pages} pages were on node {} ({} elsewhere, {} untouched)",
            h.placed.on_node, plan.from, h.placed.elsewhere, h.placed.untouched
        ));
    }
    let mut failure_statuses = BTreeMap::new();
    let mut move_failures = 0;
    let mut back_incomplete = 0;
    let mut samples_gbps = Vec::new();
    let mut samples_us = Vec::new();
    for r in ran {
        move_failures += r.failures;
        if r.first_status < 0 {
            *failure_statuses
                .entry(errno_name(-r.first_status))
                .or_insert(0) += r.failures;
        }
        if r.back.on_node != pages {
            back_incomplete += 1;
        }
        if r.after.on_node > 0 && r.seconds > 0.0 {
            let bytes = (r.after.on_node * plan.page as u64) as f64;
            samples_gbps.push(bytes / r.seconds / 1e9);
            samples_us.push(r.seconds * 1e6 / r.after.on_node as f64);
        }
    }
    let pages_moved = ran.iter().map(|r| r.after.on_node).min().unwrap_or(0);
    let pages_not_moved = pages - pages_moved;
    if !ran.is_empty() && pages_not_moved > 0 {
        problems.push(format!(
            "a move left {pages_not_moved} of {pages} pages off node {}",
            plan.to
        ));
    }
    if back_incomplete > 0 {
        problems.push(format!(
            "{back_incomplete} backward move(s) left pages off node {}",
            plan.from
        ));
    }
    let gbps = Summary::of(&samples_gbps);
    let us_per_page = Summary::of(&samples_us);
    MethodResult {
        method,
        pages,
        placed_pages_by_node: placed,
        pages_by_node: ran
            .last()
            .map(|r| by_node(&r.after, plan.to, Some(plan.from)))
            .unwrap_or_default(),
        pages_moved,
        pages_not_moved,
        move_failures,
        failure_statuses,
        back_moves_incomplete: back_incomplete,
        huge_pages_placed: huge.0,
        huge_pages_after: huge.1,
        cpu_seen: u32::try_from(h.cpu_seen).ok(),
        seconds: ran.iter().map(|r| r.seconds).collect(),
        best_gbps: gbps.as_ref().map(|s| s.best(Better::Higher)),
        gbps,
        us_per_page,
        verified: problems.is_empty() && h.placed.on_node == pages,
        problems,
    }
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

    #[test]
    fn smaps_huge_pages_of_a_range() {
        let smaps = "7f0000000000-7f0000400000 rw-p 00000000 00:00 0\nSize: 4096 kB\nAnonHugePages: 2048 kB\n7f0000400000-7f0000800000 rw-p 00000000 00:00 0\nAnonHugePages: 4096 kB\n";
        assert_eq!(
            anon_huge_kb(smaps, 0x7f00_0000_0000, 0x7f00_0040_0000),
            Some(2048)
        );
        assert_eq!(
            anon_huge_kb(smaps, 0x7f00_0000_0000, 0x7f00_0080_0000),
            Some(6144)
        );
        assert_eq!(anon_huge_kb(smaps, 0x1000, 0x2000), None);
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
