//! The capacity check before measuring, on this machine: a plan is refused
//! for the sum of its buffers, before any is allocated and before any
//! measurement starts.

use crate::common;

use common::{loaded_latency_request, policies_request, rule, sweep_request};
use numalab::experiments::loaded_latency::run_loaded_latency;
use numalab::experiments::policies::{run_policies, PolicyColumn, Workload};
use numalab::experiments::sizes::run_sizes;
use numalab::experiments::sweep::run_sweep;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::placement::{check_plan, BufferDemand, MemoryPolicy, PlacementError};
use numalab::{IdSet, Machine};

/// Bytes of memory of this machine's allowed nodes.
fn memory(m: &Machine) -> u64 {
    m.allowed_nodes
        .iter()
        .filter_map(|n| m.node(n))
        .map(|n| n.memory_bytes)
        .sum()
}

/// `fraction` of this machine's memory, in whole pages.
fn share(m: &Machine, fraction: f64) -> usize {
    ((memory(m) as f64 * fraction) as usize).next_multiple_of(4096)
}

fn capacity_message<T>(r: Result<T, PlacementError>) -> String {
    match r {
        Err(PlacementError::Capacity(msg)) => msg,
        Err(e) => panic!("not a capacity error: {e}"),
        Ok(_) => panic!("the plan was accepted"),
    }
}

#[test]
fn buffers_are_summed_not_checked_one_by_one() {
    let m = Machine::live().unwrap();
    let cpu = m.allowed_cpus.first().unwrap();
    let node = m.node_of_cpu(cpu).unwrap();
    let bound = MemoryPolicy::Bind {
        nodes: IdSet::single(node),
    };
    // Each below the machine's memory, together above it.
    let most = share(&m, 0.55);
    let one = BufferDemand::new(most, &bound, Some(cpu));
    let msg = capacity_message(check_plan(
        &m,
        &[vec![one.clone(), one.clone()]],
        "ask for less",
    ));
    // Refused for the machine, or first for the node when its meminfo
    // shows less than the machine's (memory being hot-added here).
    assert!(
        msg.contains("do not fit in this machine")
            || (msg.contains("do not fit: node") && msg.contains("can give")),
        "{msg}"
    );
    assert!(msg.ends_with("; ask for less"), "{msg}");
    // Phases are alternatives: each alone is what must fit.
    let small = BufferDemand::new(1 << 20, &MemoryPolicy::Local, Some(cpu));
    assert!(check_plan(&m, &[vec![small.clone()], vec![small.clone()]], "").is_ok());
    let msg = capacity_message(check_plan(&m, &[vec![small], vec![one.clone(), one]], ""));
    assert!(msg.contains("do not fit"), "{msg}");
}

#[test]
fn experiments_refuse_their_whole_plan_before_measuring() {
    let m = Machine::live().unwrap();
    let cpu = m.allowed_cpus.first().unwrap();
    let quick = rule(1, 1, 0.0, 0.01);
    // sizes: the largest size is checked before the smallest is measured.
    let sizes = [1 << 20, 2 * memory(&m)];
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
        buffer_bytes: share(&m, 2.0),
        workloads: vec![Workload::SinglePinned],
        policies: vec![PolicyColumn::OneNode],
        ..policies_request(&m, BandwidthKernel::Read, vec![cpu], quick.clone())
    };
    let msg = capacity_message(run_policies(&m, &req, &mut |w| panic!("ran {w}")));
    assert!(msg.contains("another --node"), "{msg}");
    // sweep: every (thread, memory node) buffer at once.
    let mut req = sweep_request(&m, quick.clone());
    req.threads = vec![2];
    req.buffer_bytes = share(&m, 0.55);
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
    let mut req = loaded_latency_request(chase, injector, rule(1, 1, 0.0, 0.01));
    req.buffer_bytes = share(&m, 0.55);
    req.injector_buffer_bytes = share(&m, 0.55);
    let msg = capacity_message(run_loaded_latency(&m, &req, &mut |w| {
        panic!("measured {w}")
    }));
    assert!(
        msg.contains("2 buffers") || msg.contains("in this machine"),
        "{msg}"
    );
    assert!(msg.contains("--injector-size"), "{msg}");
}
