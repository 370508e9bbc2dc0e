//! The capacity check before measuring, on this machine: a plan is refused
//! for the sum of its buffers, before any is allocated and before any
//! measurement starts.
//!
//! Every size these tests ask for is derived from the figure the check
//! compares with, what the kernel will give on a node
//! ([`NodeMemory::allocatable`]), never from the machine model's node
//! totals: on a virtual machine whose memory is being hot-added (virtio-mem)
//! those lag what the kernel can already give, and a size "above the
//! machine's memory" taken from them fits (issue 37 item 7). A request is
//! certainly over (1.5 times the figure and [`MARGIN`] more) or certainly
//! under (a third of that), so the tests pass in whatever state the
//! machine's memory is, and the fixture trees at the end show the check and
//! these sizes agree while a node's meminfo lags /proc/meminfo.

use crate::common;

use common::{fixture, loaded_latency_request, policies_request, rule, sweep_request};
use numalab::experiments::loaded_latency::run_loaded_latency;
use numalab::experiments::policies::{run_policies, PolicyColumn, Workload};
use numalab::experiments::sizes::run_sizes;
use numalab::experiments::sweep::run_sweep;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::placement::capacity::check_plan_with;
use numalab::placement::node_memory::{Blocks, MemoryCause, NodeMemory};
use numalab::placement::{check_plan, BufferDemand, MemoryPolicy, PlacementError};
use numalab::text::format;
use numalab::{IdSet, Machine};
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// Beyond 1.5 times what a node can give, so that memory the kernel frees
/// between the test's snapshot and the check's cannot make a plan fit.
const MARGIN: u64 = 256 * MIB;

/// What the capacity check compares a plan on `nodes` with: what the kernel
/// will give there, each node's [`NodeMemory::allocatable`] (its free
/// memory and reclaimable cache, with what /proc/meminfo has beyond the
/// nodes while memory is hot-added, capped by the cgroup), summed.
fn can_give(s: &NodeMemory, nodes: &IdSet) -> u64 {
    nodes
        .iter()
        .map(|n| s.allocatable(n))
        .fold(0, u64::saturating_add)
}

/// Bytes of each of `parts` buffers that together are certainly more than
/// `figure` (1.5 times it and [`MARGIN`]), in whole pages.
fn each_over(figure: u64, parts: u64) -> usize {
    let total = figure.saturating_add(figure / 2).saturating_add(MARGIN);
    total.div_ceil(parts).next_multiple_of(4096) as usize
}

/// This machine's snapshot, as the check takes it; said once when its
/// memory figures disagree (the state these tests once failed in).
fn snapshot() -> NodeMemory {
    static SAID: std::sync::Once = std::sync::Once::new();
    let s = NodeMemory::capture_for_capacity();
    if let Some(d) = &s.disagreement {
        SAID.call_once(|| {
            numalab_testkit::note(&format!(
                "capacity tests ran while {} (the sizes follow what the kernel will give)",
                d.figures()
            ))
        });
    }
    s
}

fn capacity_message<T>(r: Result<T, PlacementError>) -> String {
    match r {
        Err(PlacementError::Capacity(msg)) => msg,
        Err(e) => panic!("not a capacity error: {e}"),
        Ok(_) => panic!("the plan was accepted"),
    }
}

/// Three buffers bound to `node`, touched from `cpu`: each alone a third of
/// what is refused together.
fn three_bound(node: u32, cpu: u32, s: &NodeMemory) -> (BufferDemand, Vec<BufferDemand>) {
    let bound = MemoryPolicy::Bind {
        nodes: IdSet::single(node),
    };
    let one = BufferDemand::new(
        each_over(can_give(s, &IdSet::single(node)), 3),
        &bound,
        Some(cpu),
    );
    (one.clone(), vec![one; 3])
}

#[test]
fn buffers_are_summed_not_checked_one_by_one() {
    let m = Machine::live().unwrap();
    let cpu = m.allowed_cpus.first().unwrap();
    let node = m.node_of_cpu(cpu).unwrap();
    let s = snapshot();
    // Each within what the node can give, together 1.5 times it.
    let (one, three) = three_bound(node, cpu, &s);
    assert!(check_plan(&m, &[vec![one.clone()]], "ask for less").is_ok());
    let msg = capacity_message(check_plan(&m, &[three], "ask for less"));
    // Refused for the three together (for the machine, the cgroup or the
    // node, whichever comes first), not for one of them.
    assert!(msg.contains("do not fit"), "{msg}");
    assert!(msg.contains(&format::bytes(3 * one.bytes)), "{msg}");
    assert!(msg.ends_with("; ask for less"), "{msg}");
    // Phases are alternatives: each alone is what must fit.
    let small = BufferDemand::new(1 << 20, &MemoryPolicy::Local, Some(cpu));
    assert!(check_plan(&m, &[vec![small.clone()], vec![small.clone()]], "").is_ok());
    let msg = capacity_message(check_plan(
        &m,
        &[vec![small], vec![one.clone(), one.clone(), one]],
        "",
    ));
    assert!(msg.contains("do not fit"), "{msg}");
}

#[test]
fn experiments_refuse_their_whole_plan_before_measuring() {
    let m = Machine::live().unwrap();
    let cpu = m.allowed_cpus.first().unwrap();
    let s = snapshot();
    let all = can_give(&s, &m.allowed_nodes);
    let quick = rule(1, 1, 0.0, 0.01);
    // sizes: the largest size is checked before the smallest is measured.
    let sizes = [1 << 20, each_over(all, 1) as u64];
    let msg = capacity_message(run_sizes(
        &m,
        cpu,
        &sizes,
        Isa::Portable,
        &quick,
        &mut |what| panic!("measured {what}"),
    ));
    assert!(msg.contains("--max-size"), "{msg}");
    // policies: no table of cells that did not run.
    let req = numalab::experiments::policies::PoliciesRequest {
        buffer_bytes: each_over(all, 1),
        workloads: vec![Workload::SinglePinned],
        policies: vec![PolicyColumn::OneNode],
        ..policies_request(&m, BandwidthKernel::Read, vec![cpu], quick.clone())
    };
    let msg = capacity_message(run_policies(&m, &req, &mut |w| panic!("ran {w}")));
    assert!(msg.contains("another --node"), "{msg}");
    // sweep: every (thread, memory node) buffer at once; the two threads'
    // buffers of the node that can give most are 1.5 times what it can.
    let mut req = sweep_request(&m, quick.clone());
    req.threads = vec![2];
    let most = req
        .mem_nodes
        .iter()
        .map(|n| can_give(&s, &IdSet::single(n)))
        .max()
        .unwrap();
    req.buffer_bytes = each_over(most, 2);
    let msg = capacity_message(run_sweep(&m, &req, &mut |_, _, c| panic!("ran {c}")));
    assert!(msg.contains("do not fit"), "{msg}");
}

#[test]
fn loaded_latency_sums_the_chase_and_every_injector() {
    let m = Machine::live().unwrap();
    if m.allowed_cpus.len() < 2 {
        numalab_testkit::skip(format!(
            "loaded latency needs 2 CPUs (one to chase, one to inject); this process may use {}",
            m.allowed_cpus
        ));
        return;
    }
    let chase = m.allowed_cpus.first().unwrap();
    let injector = m.allowed_cpus.last().unwrap();
    // Both buffers go to the chase's node (local, touched from the chase's
    // CPU): together 1.5 times what it can give.
    let node = m.node_of_cpu(chase).unwrap();
    let each = each_over(can_give(&snapshot(), &IdSet::single(node)), 2);
    let mut req = loaded_latency_request(chase, injector, rule(1, 1, 0.0, 0.01));
    req.buffer_bytes = each;
    req.injector_buffer_bytes = each;
    let msg = capacity_message(run_loaded_latency(&m, &req, &mut |w| {
        panic!("measured {w}")
    }));
    assert!(
        msg.contains("2 buffers") || msg.contains("in this machine"),
        "{msg}"
    );
    assert!(msg.contains("--injector-size"), "{msg}");
}

/// A /proc and /sys tree in a temporary directory, removed on drop: the
/// files [`NodeMemory::capture_from`] reads, in the kernel's formats (those
/// of the engine's hot-plug fixture, `placement::node_memory`'s tests).
struct Tree(PathBuf);

impl Tree {
    fn new(name: &str) -> Tree {
        let d =
            std::env::temp_dir().join(format!("numalab-capacity-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Tree(d)
    }

    fn file(&self, rel: &str, text: &str) -> &Tree {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    /// Node 0's meminfo counting `total`, `free` of it free, `file` of
    /// page cache (written in kB, as the kernel does).
    fn node0(&self, total: u64, free: u64, file: u64) -> &Tree {
        let kb = |b: u64| b >> 10;
        self.file(
            "sys/devices/system/node/node0/meminfo",
            &format!(
                "Node 0 MemTotal:       {} kB\nNode 0 MemFree:        {} kB\n\
                 Node 0 MemUsed:        {} kB\nNode 0 Active(file):   {} kB\n\
                 Node 0 Inactive(file): {} kB\nNode 0 KReclaimable:   0 kB\n\
                 Node 0 HugePages_Free:     0\n",
                kb(total),
                kb(free),
                kb(total - free),
                kb(file / 2),
                kb(file - file / 2)
            ),
        )
    }

    fn proc_meminfo(&self, total: u64, free: u64, available: u64) -> &Tree {
        self.file(
            "proc/meminfo",
            &format!(
                "MemTotal:       {} kB\nMemFree:        {} kB\nMemAvailable:   {} kB\n",
                total >> 10,
                free >> 10,
                available >> 10
            ),
        )
    }

    /// Node 0's memory blocks `ids`, online, of 128 MiB.
    fn online_blocks(&self, ids: std::ops::Range<u32>) -> &Tree {
        self.file("sys/devices/system/memory/block_size_bytes", "8000000\n")
            .file("sys/devices/system/memory/auto_online_blocks", "online\n");
        for id in ids {
            std::fs::create_dir_all(
                self.0
                    .join(format!("sys/devices/system/node/node0/memory{id}")),
            )
            .unwrap();
            self.file(
                &format!("sys/devices/system/memory/memory{id}/state"),
                "online\n",
            );
        }
        self
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The fresh VM of issue 37 item 7 while virtio-mem adds its memory: 24 GiB
/// in /proc/meminfo (22 GiB available), node 0's meminfo counting 6 GiB of
/// it (48 online blocks of 128 MiB).
fn hot_adding(t: &Tree) -> NodeMemory {
    t.node0(6 * GIB, 4 * GIB, GIB)
        .proc_meminfo(24 * GIB, 20 * GIB, 22 * GIB)
        .file("proc/self/cgroup", "0::/user.slice\n")
        .file("sys/fs/cgroup/user.slice/memory.max", "max\n")
        .online_blocks(0..48);
    NodeMemory::capture_from(t.path(), Blocks::WhenTotalsDisagree)
}

/// The plans of this file's live tests on machine `m` from `cpu`, sized as
/// those tests size them from snapshot `s`: each must be refused.
fn the_tests_plans(
    m: &Machine,
    cpu: u32,
    s: &NodeMemory,
) -> Vec<(&'static str, Vec<BufferDemand>)> {
    let node = m.node_of_cpu(cpu).unwrap();
    let on_node = can_give(s, &IdSet::single(node));
    let all = can_give(s, &m.allowed_nodes);
    let bound = MemoryPolicy::Bind {
        nodes: IdSet::single(node),
    };
    let local =
        |bytes: usize, n: usize| vec![BufferDemand::new(bytes, &MemoryPolicy::Local, Some(cpu)); n];
    let bind = |bytes: usize, n: usize| vec![BufferDemand::new(bytes, &bound, None); n];
    vec![
        ("three bound buffers", three_bound(node, cpu, s).1),
        // run_sizes: the largest size, local to the CPU.
        ("sizes", local(each_over(all, 1), 1)),
        // run_policies, one-node column: one read array bound to the node.
        ("policies", bind(each_over(all, 1), 1)),
        // run_sweep, 2 threads: two buffers bound to each memory node (the
        // node that can give most decides; here the only one).
        ("sweep", bind(each_over(on_node, 2), 2)),
        // run_loaded_latency: the chase and one injector, local to the chase.
        ("loaded latency", local(each_over(on_node, 2), 2)),
    ]
}

/// `plan` with a third of each buffer's bytes: certainly under what was
/// certainly over.
fn a_third(plan: &[BufferDemand]) -> Vec<BufferDemand> {
    plan.iter()
        .map(|b| BufferDemand::new((b.bytes / 3) as usize, &b.policy, b.toucher))
        .collect()
}

#[test]
fn while_memory_is_hot_added_the_tests_sizes_agree_with_the_check() {
    // The machine model of a hot-plug VM (one node, 8 CPUs): its node total
    // (2 GiB) is hwloc's, read from the node's lagging meminfo.
    let m = fixture("8em64t-2s2ca2c-buggynuma.xml");
    let t = Tree::new("hot-adding");
    let s = hot_adding(&t);
    let d = s.disagreement.clone().expect("the figures disagree");
    assert_eq!(d.cause, MemoryCause::HotAdd);
    assert_eq!(
        (d.nodes_total_bytes, d.system_total_bytes),
        (6 * GIB, 24 * GIB)
    );
    // The check counts what /proc/meminfo has beyond the node: all 22 GiB
    // available are node 0's to give.
    assert_eq!(s.allocatable(0), 22 * GIB);
    let check = |plan: Vec<BufferDemand>| check_plan_with(&m, &[plan], "ask for less", &s);

    // The old sizes, from the model's node totals, fit in what the kernel
    // can already give: what failed on the fresh VM ("the plan was
    // accepted").
    let model = m.node(0).unwrap().memory_bytes;
    let old = ((model as f64 * 0.55) as usize).next_multiple_of(4096);
    let bound = MemoryPolicy::Bind {
        nodes: IdSet::single(0),
    };
    assert!(check(vec![BufferDemand::new(old, &bound, Some(0)); 2]).is_ok());
    assert!(check(vec![BufferDemand::new(
        2 * model as usize,
        &MemoryPolicy::Local,
        Some(0)
    )])
    .is_ok());

    // The sizes of this file's tests: every plan refused, the same plan
    // with a third of the bytes accepted, and one of the three alone.
    for (name, plan) in the_tests_plans(&m, 0, &s) {
        let msg = capacity_message(check(plan.clone()));
        assert!(msg.contains("do not fit"), "{name}: {msg}");
        assert!(msg.contains("memory being hot-added"), "{name}: {msg}");
        assert!(check(a_third(&plan)).is_ok(), "{name}: a third refused");
    }
    let (one, three) = three_bound(0, 0, &s);
    assert!(check(vec![one.clone()]).is_ok());
    // 1.5 times what node 0 can give is more than all its memory, the
    // 24 GiB /proc/meminfo counts: refused as such, with both figures.
    assert_eq!(
        capacity_message(check(three)),
        format!(
            "the buffers of this run ({}) do not fit in this machine: nodes {{0}} have 24 GiB of \
             memory in all (node meminfo says 6 GiB total; /proc/meminfo 24 GiB, memory being \
             hot-added); ask for less",
            format::bytes(3 * one.bytes)
        )
    );
    // Below that, the node's figure decides: 20 GiB fits (ten times the
    // model's node total), 23 GiB does not.
    let on_0 = |bytes: u64| vec![BufferDemand::new(bytes as usize, &bound, Some(0))];
    assert!(check(on_0(20 * GIB)).is_ok());
    assert_eq!(
        capacity_message(check(on_0(23 * GIB))),
        "23 GiB for 1 buffer on node 0 do not fit: node 0 can give 22 GiB (node meminfo says 6 \
         GiB total; /proc/meminfo 24 GiB, memory being hot-added), 20.9 GiB usable after the \
         kernel's margin; ask for less"
    );
}

#[test]
fn in_every_state_of_memory_the_tests_sizes_agree_with_the_check() {
    let m = fixture("8em64t-2s2ca2c-buggynuma.xml");
    // (state, node 0's meminfo: total, free, page cache; /proc/meminfo:
    // total, free, available)
    let states = [
        (
            "hot-adding",
            [6 * GIB, 4 * GIB, GIB],
            [24 * GIB, 20 * GIB, 22 * GIB],
        ),
        (
            "settled",
            [24 * GIB, 20 * GIB, GIB],
            [24 * GIB, 20 * GIB, 21 * GIB],
        ),
        (
            "busy",
            [24 * GIB, GIB, 512 * MIB],
            [24 * GIB, GIB, GIB + 256 * MIB],
        ),
        ("small", [GIB, 600 * MIB, 0], [GIB, 600 * MIB, 600 * MIB]),
    ];
    for (state, [total, free, file], [sys_total, sys_free, sys_available]) in states {
        let t = Tree::new(state);
        t.node0(total, free, file)
            .proc_meminfo(sys_total, sys_free, sys_available);
        let s = NodeMemory::capture_from(t.path(), Blocks::WhenTotalsDisagree);
        assert_eq!(
            s.disagreement.is_some(),
            state == "hot-adding",
            "{state}: {:?}",
            s.disagreement
        );
        for (name, plan) in the_tests_plans(&m, 0, &s) {
            let r = check_plan_with(&m, std::slice::from_ref(&plan), "", &s);
            assert!(
                capacity_message(r).contains("do not fit"),
                "{state}, {name}"
            );
            assert!(
                check_plan_with(&m, &[a_third(&plan)], "", &s).is_ok(),
                "{state}, {name}: a third refused"
            );
        }
        let (one, _) = three_bound(0, 0, &s);
        assert!(
            check_plan_with(&m, &[vec![one]], "", &s).is_ok(),
            "{state}: one of three refused"
        );
    }
}
