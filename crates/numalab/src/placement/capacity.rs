//! The capacity check before measuring: every buffer an experiment will
//! place, summed per node, against what each node has free, before anything
//! is allocated.
//!
//! A check buffer by buffer lets an experiment allocate its way toward the
//! limit: the first buffers fit, a later one does not (or, worse, the kernel
//! OOM-kills the process first), and the buffers of one node add up even
//! when each alone is small (eight injector buffers bound to the chase
//! buffer's node). So each experiment describes its whole plan to
//! [`check_plan`] first, as *phases*: the buffers of one phase live at the
//! same time, phases come one after another (a sweep of sizes, the cells of
//! a table).
//!
//! Where a buffer's bytes must come from follows its policy
//! (docs/policies.md):
//!
//! | policy | counted on |
//! |---|---|
//! | `bind` to one node, `remote` | that node |
//! | `bind` to several nodes | those nodes together |
//! | `local`, `first-touch` with a known toucher | the toucher's node |
//! | `local`, `first-touch` unpinned, `preferred` (falls back) | all allowed nodes together |
//! | `interleave`, `weighted` | each node its share |
//!
//! Base pages are checked against what each node can give
//! ([`super::node_memory::NodeMemory::allocatable`]: free memory, page cache
//! and reclaimable slab, on virtual machines whose memory is hot-added also
//! what /proc/meminfo has beyond the nodes, capped by the memory cgroup)
//! less a margin for the kernel's watermarks, hugetlbfs pages against each
//! node's free 2 MiB pages. A plan larger than all the machine's memory is
//! refused as such (where the nodes and /proc/meminfo disagree, the larger
//! figure is the machine's memory: never refuse what fits), and so is a plan
//! larger than what the memory cgroup has left.

use super::memory_policy::{MemoryPolicy, Realization, WeightedImpl};
use super::node_memory::{CgroupMemory, NodeMemory};
use super::sys::Mode;
use super::PlacementError;
use crate::machine::Machine;
use crate::text::format;
use crate::IdSet;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// Bytes of a hugetlbfs page (the only size numalab reserves).
pub(crate) const HUGE_2M: u64 = 2 << 20;

/// One buffer an experiment will place.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferDemand {
    pub bytes: u64,
    pub policy: MemoryPolicy,
    /// CPU of the thread that first touches it; `None`: an unpinned thread,
    /// whose node is not known in advance.
    pub toucher: Option<u32>,
    /// Backed by hugetlbfs 2 MiB pages instead of base pages.
    pub hugetlb: bool,
}

impl BufferDemand {
    /// A buffer of base pages.
    pub fn new(bytes: usize, policy: &MemoryPolicy, toucher: Option<u32>) -> Self {
        BufferDemand {
            bytes: bytes as u64,
            policy: policy.clone(),
            toucher,
            hugetlb: false,
        }
    }

    /// The same buffer backed by hugetlbfs pages when `hugetlb`.
    pub fn hugetlb(mut self, hugetlb: bool) -> Self {
        self.hugetlb = hugetlb;
        self
    }
}

/// Where some of a buffer's bytes must come from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Share {
    /// Exactly this node.
    Node(u32, u64),
    /// Any of these nodes.
    Pool(IdSet, u64),
}

/// Where the bytes of a buffer placed as `r` must come from (`toucher_node`:
/// the node of the thread that first touches it, when known).
pub(crate) fn shares(
    m: &Machine,
    r: &Realization,
    toucher_node: Option<u32>,
    bytes: u64,
) -> Vec<Share> {
    // A share in proportion `part / whole`, rounded up: a node must hold
    // its whole last page.
    let part = |part: u64, whole: u64| -> u64 {
        (bytes as u128 * part as u128).div_ceil(whole.max(1) as u128) as u64
    };
    match r {
        Realization::Kernel {
            mode: Mode::Bind,
            nodes,
        } => match nodes.first().filter(|_| nodes.len() == 1) {
            Some(n) => vec![Share::Node(n, bytes)],
            None => vec![Share::Pool(nodes.clone(), bytes)],
        },
        Realization::Kernel {
            mode: Mode::Default | Mode::Local,
            ..
        } => match toucher_node {
            Some(n) => vec![Share::Node(n, bytes)],
            None => vec![Share::Pool(m.allowed_nodes.clone(), bytes)],
        },
        Realization::Kernel {
            mode: Mode::Interleave,
            nodes,
        } => {
            let k = nodes.len() as u64;
            nodes.iter().map(|n| Share::Node(n, part(1, k))).collect()
        }
        // Preferred policies fall back to any allowed node.
        Realization::Kernel { .. } => vec![Share::Pool(m.allowed_nodes.clone(), bytes)],
        Realization::KernelWeighted { weights, .. } => {
            let total: u64 = weights.iter().map(|w| w.1 as u64).sum();
            weights
                .iter()
                .map(|&(n, w)| Share::Node(n, part(w as u64, total)))
                .collect()
        }
        Realization::Chunks { pattern } => {
            let round: u64 = pattern.iter().map(|p| p.1).sum();
            pattern
                .iter()
                .map(|&(n, pages)| Share::Node(n, part(pages, round)))
                .collect()
        }
    }
}

/// What does not fit, and where.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Shortfall {
    /// More than all the memory of the allowed nodes, free or not.
    Machine {
        need: u64,
        memory: u64,
        nodes: IdSet,
    },
    /// More base pages than the memory cgroup has left.
    Cgroup {
        need: u64,
        buffers: usize,
        cgroup: CgroupMemory,
    },
    /// More than `nodes` have free (`free` before the margin).
    Nodes {
        nodes: IdSet,
        need: u64,
        free: u64,
        buffers: usize,
        hugetlb: bool,
    },
}

/// Bytes the buffers of one kind (base pages or hugetlbfs) need.
#[derive(Default)]
struct Tally {
    /// Per node: bytes and buffers.
    on_node: BTreeMap<u32, (u64, usize)>,
    /// Bytes that any node of a set may supply.
    pools: Vec<(IdSet, u64)>,
    total: u64,
    buffers: usize,
}

impl Tally {
    fn add(&mut self, shares: &[Share], bytes: u64) {
        for s in shares {
            match s {
                Share::Node(n, b) => {
                    let e = self.on_node.entry(*n).or_default();
                    e.0 = e.0.saturating_add(*b);
                    e.1 += 1;
                }
                Share::Pool(set, b) => match self.pools.iter_mut().find(|p| p.0 == *set) {
                    Some(p) => p.1 = p.1.saturating_add(*b),
                    None => self.pools.push((set.clone(), *b)),
                },
            }
        }
        self.total = self.total.saturating_add(bytes);
        self.buffers += 1;
    }

    /// The first set of nodes whose demand exceeds what they may give:
    /// each node alone, each pool with every demand confined to it, then
    /// all the nodes together. `free(node)` is a node's free bytes.
    fn shortfall(
        &self,
        hugetlb: bool,
        all: &IdSet,
        free: &dyn Fn(u32) -> u64,
    ) -> Option<Shortfall> {
        let short = |nodes: IdSet, need: u64, buffers: usize| {
            let have: u64 = nodes.iter().map(free).sum();
            (need > usable(have, hugetlb)).then_some(Shortfall::Nodes {
                nodes,
                need,
                free: have,
                buffers,
                hugetlb,
            })
        };
        for (&n, &(need, buffers)) in &self.on_node {
            if let Some(s) = short(IdSet::single(n), need, buffers) {
                return Some(s);
            }
        }
        let mut sets: Vec<IdSet> = self.pools.iter().map(|p| p.0.clone()).collect();
        sets.push(all.clone());
        for set in sets {
            let mut need = 0u64;
            for (&n, &(b, _)) in &self.on_node {
                if set.contains(n) {
                    need = need.saturating_add(b);
                }
            }
            for (pool, b) in &self.pools {
                if pool.is_subset(&set) {
                    need = need.saturating_add(*b);
                }
            }
            if let Some(s) = short(set, need, self.buffers) {
                return Some(s);
            }
        }
        None
    }
}

/// What the nodes can supply, as the capacity check sees it.
pub(crate) struct Supply<'a> {
    /// Bytes a node can give: of base pages, or of hugetlbfs pages.
    pub(crate) free: &'a dyn Fn(u32, bool) -> u64,
    /// All the memory of a node, free or not, when the kernel says more
    /// than the machine model (hot-added memory); `None`: the model's.
    pub(crate) memory: &'a dyn Fn(u32) -> Option<u64>,
    /// The memory cgroup's limit, which caps a whole phase's base pages.
    pub(crate) cgroup: Option<CgroupMemory>,
}

/// The first shortfall of one phase's buffers, `free(node, hugetlb)` giving
/// each node's free bytes (of base pages, or of hugetlbfs pages), the
/// machine model giving each node's memory, no cgroup limit.
#[cfg(test)]
pub(crate) fn phase_shortfall(
    m: &Machine,
    buffers: &[(Vec<Share>, u64, bool)],
    free: &dyn Fn(u32, bool) -> u64,
) -> Option<Shortfall> {
    let supply = Supply {
        free,
        memory: &|_| None,
        cgroup: None,
    };
    phase_shortfall_in(m, buffers, &supply)
}

/// The first shortfall of one phase's buffers against `supply`: the
/// machine's memory, the cgroup's limit, each node and set of nodes.
pub(crate) fn phase_shortfall_in(
    m: &Machine,
    buffers: &[(Vec<Share>, u64, bool)],
    supply: &Supply,
) -> Option<Shortfall> {
    let (mut base, mut huge) = (Tally::default(), Tally::default());
    let mut all = m.allowed_nodes.clone();
    for (shares, bytes, hugetlb) in buffers {
        for s in shares {
            match s {
                Share::Node(n, _) => {
                    all.insert(*n);
                }
                Share::Pool(set, _) => all = all.union(set),
            }
        }
        if *hugetlb { &mut huge } else { &mut base }.add(shares, *bytes);
    }
    let memory: u64 = all
        .iter()
        .map(|n| {
            let model = m.node(n).map_or(0, |node| node.memory_bytes);
            model.max((supply.memory)(n).unwrap_or(0))
        })
        .sum();
    let need = base.total.saturating_add(huge.total);
    if memory > 0 && need > memory {
        return Some(Shortfall::Machine {
            need,
            memory,
            nodes: all,
        });
    }
    if let Some(cgroup) = supply.cgroup.filter(|c| base.total > c.remaining) {
        return Some(Shortfall::Cgroup {
            need: base.total,
            buffers: base.buffers,
            cgroup,
        });
    }
    let free = supply.free;
    base.shortfall(false, &all, &|n| free(n, false))
        .or_else(|| huge.shortfall(true, &all, &|n| free(n, true)))
}

/// The first shortfall of one phase's buffers against a snapshot of what
/// the kernel will give, `hugetlb_free(node)` giving a node's free
/// hugetlbfs bytes.
pub(crate) fn snapshot_shortfall(
    m: &Machine,
    buffers: &[(Vec<Share>, u64, bool)],
    snapshot: &NodeMemory,
    hugetlb_free: &dyn Fn(u32) -> u64,
) -> Option<Shortfall> {
    let free = |n: u32, hugetlb: bool| {
        if hugetlb {
            hugetlb_free(n)
        } else {
            snapshot.allocatable(n)
        }
    };
    let supply = Supply {
        free: &free,
        memory: &|n| snapshot.memory(n),
        cgroup: snapshot.cgroup,
    };
    phase_shortfall_in(m, buffers, &supply)
}

/// The first shortfall of one phase's buffers on the live machine now,
/// against one snapshot of what the kernel will give
/// ([`NodeMemory::capture_for_capacity`]); with the snapshot's figures for
/// a message ([`plan_message`]'s `context`).
pub(crate) fn live_shortfall(
    m: &Machine,
    buffers: &[(Vec<Share>, u64, bool)],
) -> Option<(Shortfall, Option<String>)> {
    let snapshot = NodeMemory::capture_for_capacity();
    let s = snapshot_shortfall(m, buffers, &snapshot, &hugetlb_free)?;
    Some((s, snapshot.disagreement.as_ref().map(|d| d.figures())))
}

/// Refuses a plan that cannot fit in the machine's free memory, before
/// anything is allocated: each phase's buffers summed per node (see the
/// module documentation). `advice` says what to do instead, e.g. "use a
/// smaller --size or fewer threads". A topology file has no free memory to
/// check: the buffers themselves refuse it.
pub fn check_plan(
    m: &Machine,
    phases: &[Vec<BufferDemand>],
    advice: &str,
) -> Result<(), PlacementError> {
    if !m.is_live() {
        return Ok(());
    }
    // What each node can give is read once: the phases are checked against
    // the same moment, not against what the kernel reclaims between reads.
    check_plan_with(m, phases, advice, &NodeMemory::capture_for_capacity())
}

/// A plan for a machine read from a topology file, where nothing is free
/// or used: whether any phase places more on a node (or a pool of nodes)
/// than the file says it holds in all (`phase` names one in the message:
/// "one cell"). `None` when every phase fits; on a live machine
/// [`check_plan`] is the check.
pub fn exceeds_file_memory(
    m: &Machine,
    phases: &[Vec<BufferDemand>],
    phase_name: &str,
) -> Option<String> {
    let total = |n: u32| m.node(n).map_or(0, |node| node.memory_bytes);
    for phase in phases {
        let mut on_node: BTreeMap<u32, u64> = BTreeMap::new();
        let mut pools: Vec<(IdSet, u64)> = Vec::new();
        for b in phase {
            let toucher_node = b.toucher.and_then(|c| m.node_of_cpu(c));
            let Ok(r) = b.policy.realize(m, toucher_node, WeightedImpl::Auto) else {
                continue;
            };
            for share in shares(m, &r, toucher_node, b.bytes) {
                match share {
                    Share::Node(n, bytes) => *on_node.entry(n).or_default() += bytes,
                    Share::Pool(nodes, bytes) => pools.push((nodes, bytes)),
                }
            }
        }
        if let Some((n, bytes)) = on_node.iter().find(|(&n, &b)| b > total(n)) {
            return Some(format!(
                "node {n} holds {} of memory in all, and {phase_name} places {} there",
                format::bytes(total(*n)),
                format::bytes(*bytes)
            ));
        }
        if let Some((nodes, bytes)) = pools
            .iter()
            .find(|(nodes, b)| *b > nodes.iter().map(total).sum::<u64>())
        {
            return Some(format!(
                "nodes {nodes} hold {} of memory in all, and {phase_name} places {} there",
                format::bytes(nodes.iter().map(total).sum::<u64>()),
                format::bytes(*bytes)
            ));
        }
    }
    None
}

/// [`check_plan`] against `snapshot`, a snapshot of what the kernel will
/// give ([`NodeMemory::capture_for_capacity`] on this machine,
/// [`NodeMemory::capture_from`] of a fixture tree), on any machine, a
/// topology file's included: how a test shows what the check refuses and
/// accepts in a state of memory this machine is not in (nodes' meminfo
/// lagging /proc/meminfo while memory is hot-added). Hugetlbfs pages are
/// counted from this machine's sysfs.
pub fn check_plan_with(
    m: &Machine,
    phases: &[Vec<BufferDemand>],
    advice: &str,
    snapshot: &NodeMemory,
) -> Result<(), PlacementError> {
    let huge_cache = RefCell::new(BTreeMap::new());
    let hugetlb_free = |n: u32| -> u64 {
        *huge_cache
            .borrow_mut()
            .entry(n)
            .or_insert_with(|| hugetlb_free(n))
    };
    let context = snapshot.disagreement.as_ref().map(|d| d.figures());
    for phase in phases {
        let mut placed = Vec::with_capacity(phase.len());
        for b in phase {
            let toucher_node = b.toucher.and_then(|c| m.node_of_cpu(c));
            let r = b.policy.realize(m, toucher_node, WeightedImpl::Auto)?;
            placed.push((shares(m, &r, toucher_node, b.bytes), b.bytes, b.hugetlb));
        }
        if let Some(s) = snapshot_shortfall(m, &placed, snapshot, &hugetlb_free) {
            return Err(PlacementError::Capacity(plan_message(
                &s,
                advice,
                context.as_deref(),
            )));
        }
    }
    Ok(())
}

/// The one line of a plan that does not fit: what was asked, what is free,
/// what to do. `context` names the kernel's disagreeing figures
/// ([`super::node_memory::MemoryDisagreement::figures`]) on a machine where
/// they disagree, so that a refusal names both.
pub(crate) fn plan_message(s: &Shortfall, advice: &str, context: Option<&str>) -> String {
    match s {
        Shortfall::Machine {
            need,
            memory,
            nodes,
        } => format!(
            "the buffers of this run ({}) do not fit in this machine: nodes {{{nodes}}} have {} of memory in all{}; {advice}",
            format::bytes(*need),
            format::bytes(*memory),
            context.map_or(String::new(), |c| format!(" ({c})"))
        ),
        Shortfall::Cgroup {
            need,
            buffers,
            cgroup,
        } => format!(
            "{} for {} do not fit in this process's memory cgroup: {} left under its {} limit ({}); {advice}",
            format::bytes(*need),
            format::plural(*buffers, "buffer", "buffers"),
            format::bytes(cgroup.remaining),
            format::bytes(cgroup.limit),
            cgroup.limit_file()
        ),
        Shortfall::Nodes {
            nodes,
            need,
            free,
            buffers,
            hugetlb: true,
        } => format!(
            "{} of hugetlbfs 2 MiB pages for {} on {} do not fit: {} free there; reserve more first, e.g. echo {} > /proc/sys/vm/nr_hugepages, or {advice}",
            format::bytes(*need),
            format::plural(*buffers, "buffer", "buffers"),
            node_words(nodes),
            format::bytes(*free),
            need.div_ceil(HUGE_2M)
        ),
        Shortfall::Nodes {
            nodes,
            need,
            free,
            buffers,
            hugetlb: false,
        } => {
            let have = match context {
                Some(c) => format!("{} can give {} ({c})", node_words(nodes), format::bytes(*free)),
                None => format!("{} free there", format::bytes(*free)),
            };
            format!(
                "{} for {} on {} do not fit: {have}, {} usable after the kernel's margin; {advice}",
                format::bytes(*need),
                format::plural(*buffers, "buffer", "buffers"),
                node_words(nodes),
                format::bytes(usable(*free, false))
            )
        }
    }
}

/// `node 3` or `nodes {0-3}`.
pub(crate) fn node_words(nodes: &IdSet) -> String {
    match nodes.first().filter(|_| nodes.len() == 1) {
        Some(n) => format!("node {n}"),
        None => format!("nodes {{{nodes}}}"),
    }
}

/// Free bytes of a node's reserved hugetlbfs 2 MiB pages (base pages:
/// [`NodeMemory::allocatable`]).
pub(crate) fn hugetlb_free(n: u32) -> u64 {
    let p = format!("/sys/devices/system/node/node{n}/hugepages/hugepages-2048kB/free_hugepages");
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map(|pages| pages.saturating_mul(HUGE_2M))
        .unwrap_or(0)
}

/// Free memory a placement may take without pushing the node into reclaim
/// storms: keep a margin for the kernel's watermarks. Reserved hugetlbfs
/// pages are all usable.
pub(crate) fn usable(free: u64, hugetlb: bool) -> u64 {
    if hugetlb {
        return free;
    }
    free.saturating_sub((free / 20).max(32 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;

    const GIB: u64 = 1 << 30;

    /// Shares of `policy` for a buffer touched from `toucher`'s node.
    fn shares_of(m: &Machine, policy: &str, toucher: Option<u32>, bytes: u64) -> Vec<Share> {
        let p = MemoryPolicy::parse(m, policy).unwrap();
        let node = toucher.and_then(|c| m.node_of_cpu(c));
        let r = p.realize(m, node, WeightedImpl::Emulate).unwrap();
        shares(m, &r, node, bytes)
    }

    /// Every node of the quartet (4 nodes of 2 CPUs and 491 MiB each in
    /// the file) with `mib` MiB of base pages free.
    fn free_mib(mib: u64) -> impl Fn(u32, bool) -> u64 {
        move |_, hugetlb| if hugetlb { 0 } else { mib << 20 }
    }

    /// A file's machine has totals only: a step fits when each node (or a
    /// pool of nodes) holds what the step places there, summed over its
    /// buffers.
    #[test]
    fn file_memory_bounds_each_step_by_node_and_by_pool() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let demand = |policy: &str, mib: u64| {
            BufferDemand::new(
                (mib << 20) as usize,
                &MemoryPolicy::parse(&m, policy).unwrap(),
                None,
            )
        };
        // Node 1 holds 459 MiB: two buffers of 200 MiB fit, three do not.
        let two = vec![vec![demand("bind:1", 200), demand("bind:1", 200)]];
        assert_eq!(exceeds_file_memory(&m, &two, "one cell"), None);
        let three = vec![two[0].clone(), vec![demand("bind:1", 200); 3]];
        assert_eq!(
            exceeds_file_memory(&m, &three, "one cell").as_deref(),
            Some("node 1 holds 459 MiB of memory in all, and one cell places 600 MiB there")
        );
        // A pool is bounded by its nodes together.
        let pool = vec![vec![demand("bind:1-2", 900)]];
        assert_eq!(exceeds_file_memory(&m, &pool, "one step"), None);
        let pool = vec![vec![demand("bind:1-2", 1000)]];
        let e = exceeds_file_memory(&m, &pool, "one step").unwrap();
        assert!(
            e.starts_with("nodes 1-2 hold 962 MiB of memory in all, and one step places 1000 MiB"),
            "{e}"
        );
    }

    #[test]
    fn each_policy_names_the_nodes_that_supply_it() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let cpu_on_2 = m.allowed_cpus_of(2).first().unwrap();
        assert_eq!(
            shares_of(&m, "bind:1", None, 100),
            vec![Share::Node(1, 100)]
        );
        assert_eq!(
            shares_of(&m, "bind:1-2", None, 100),
            vec![Share::Pool([1, 2].into_iter().collect(), 100)]
        );
        assert_eq!(
            shares_of(&m, "local", Some(cpu_on_2), 100),
            vec![Share::Node(2, 100)]
        );
        assert_eq!(
            shares_of(&m, "first-touch", None, 100),
            vec![Share::Pool(m.allowed_nodes.clone(), 100)]
        );
        assert_eq!(
            shares_of(&m, "preferred:3", Some(cpu_on_2), 100),
            vec![Share::Pool(m.allowed_nodes.clone(), 100)]
        );
        // Even shares, rounded up so that no node is short of its last page.
        assert_eq!(
            shares_of(&m, "interleave:0-2", None, 100),
            vec![Share::Node(0, 34), Share::Node(1, 34), Share::Node(2, 34)]
        );
        assert_eq!(
            shares_of(&m, "weighted:0=3,1=1", None, 400),
            vec![Share::Node(0, 300), Share::Node(1, 100)]
        );
        // Shares of the largest buffer do not overflow.
        assert_eq!(
            shares_of(&m, "weighted:0=3,1=1", None, u64::MAX),
            vec![
                Share::Node(0, (u64::MAX as u128 * 3).div_ceil(4) as u64),
                Share::Node(1, (u64::MAX as u128).div_ceil(4) as u64)
            ]
        );
    }

    #[test]
    fn buffers_on_one_node_add_up() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let free = free_mib(400);
        // Eight buffers of 100 MiB bound to node 0: each fits, together not.
        let one = (shares_of(&m, "bind:0", None, 100 << 20), 100 << 20, false);
        assert_eq!(phase_shortfall(&m, std::slice::from_ref(&one), &free), None);
        let eight = vec![one; 8];
        match phase_shortfall(&m, &eight, &free) {
            Some(Shortfall::Nodes {
                nodes,
                need,
                buffers,
                free,
                hugetlb: false,
            }) => {
                assert_eq!(nodes, IdSet::single(0));
                assert_eq!(need, 800 << 20);
                assert_eq!(buffers, 8);
                assert_eq!(free, 400 << 20);
            }
            other => panic!("{other:?}"),
        }
        // Spread over the four nodes by interleave, the same bytes fit.
        let spread = vec![
            (
                shares_of(&m, "interleave:all", None, 100 << 20),
                100 << 20,
                false
            );
            8
        ];
        assert_eq!(phase_shortfall(&m, &spread, &free), None);
    }

    #[test]
    fn a_pool_counts_every_demand_confined_to_it() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let free = free_mib(400);
        // 600 MiB on nodes 0-1 together fits (800 MiB free there) ...
        let pool = (shares_of(&m, "bind:0-1", None, 600 << 20), 600 << 20, false);
        assert_eq!(
            phase_shortfall(&m, std::slice::from_ref(&pool), &free),
            None
        );
        // ... not with another 200 MiB bound to node 1, which alone fits.
        let node1 = (shares_of(&m, "bind:1", None, 200 << 20), 200 << 20, false);
        assert_eq!(
            phase_shortfall(&m, std::slice::from_ref(&node1), &free),
            None
        );
        match phase_shortfall(&m, &[pool, node1], &free) {
            Some(Shortfall::Nodes { nodes, need, .. }) => {
                assert_eq!(nodes, [0, 1].into_iter().collect());
                assert_eq!(need, 800 << 20);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn more_than_the_machine_has_is_said_as_such() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let memory: u64 = m.nodes.iter().map(|n| n.memory_bytes).sum();
        let huge = (
            shares_of(&m, "first-touch", None, 100 << 40),
            100 << 40,
            false,
        );
        match phase_shortfall(&m, &[huge], &free_mib(400)) {
            Some(Shortfall::Machine {
                need, memory: had, ..
            }) => {
                assert_eq!(need, 100 << 40);
                assert_eq!(had, memory);
            }
            other => panic!("{other:?}"),
        }
        let msg = plan_message(
            &Shortfall::Machine {
                need: 100 << 40,
                memory: 4 * GIB,
                nodes: m.allowed_nodes.clone(),
            },
            "use a smaller --size",
            None,
        );
        assert_eq!(
            msg,
            "the buffers of this run (100 TiB) do not fit in this machine: nodes {0-3} have 4 GiB of memory in all; use a smaller --size"
        );
    }

    #[test]
    fn hugetlb_pages_are_counted_apart_from_base_pages() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        // Plenty of base pages, four 2 MiB pages reserved per node.
        let free = |_: u32, hugetlb: bool| if hugetlb { 4 * HUGE_2M } else { GIB };
        let fits = (shares_of(&m, "bind:2", None, 8 << 20), 8 << 20, true);
        assert_eq!(
            phase_shortfall(&m, std::slice::from_ref(&fits), &free),
            None
        );
        match phase_shortfall(&m, &[fits.clone(), fits], &free) {
            Some(s @ Shortfall::Nodes { hugetlb: true, .. }) => {
                let msg = plan_message(&s, "use a smaller --size", None);
                assert_eq!(
                    msg,
                    "16 MiB of hugetlbfs 2 MiB pages for 2 buffers on node 2 do not fit: 8 MiB free there; reserve more first, e.g. echo 8 > /proc/sys/vm/nr_hugepages, or use a smaller --size"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_message_says_what_was_asked_what_is_free_and_what_to_do() {
        let msg = plan_message(
            &Shortfall::Nodes {
                nodes: IdSet::single(0),
                need: 40 * GIB,
                free: 10 * GIB,
                buffers: 9,
                hugetlb: false,
            },
            "use a smaller --size or --injector-size",
            None,
        );
        assert_eq!(
            msg,
            "40 GiB for 9 buffers on node 0 do not fit: 10 GiB free there, 9.5 GiB usable after the kernel's margin; use a smaller --size or --injector-size"
        );
    }

    #[test]
    fn a_topology_file_has_nothing_to_check() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let b = BufferDemand::new(1 << 50, &MemoryPolicy::Local, None);
        assert!(check_plan(&m, &[vec![b]], "").is_ok());
    }
}
