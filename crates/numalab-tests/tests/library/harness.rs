//! The measurement harness on this machine: structure of results, per-worker
//! figures, default sizes from the machine model, and failures that must
//! come back as errors (never a hang or a panic).

use crate::common;

use common::{fixture, rule};
use numalab::measure::chase::ChasePattern;
use numalab::measure::harness::{
    default_buffer_bytes, run_bandwidth, run_latency, BandwidthRequest, LatencyRequest, WorkerPlan,
};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::stats::StopRule;
use numalab::placement::{MemoryPolicy, Thp};
use numalab::{IdSet, Machine};

/// A short rule: the figures are only checked for structure.
fn quick() -> StopRule {
    rule(3, 20, 0.05, 0.3)
}

#[test]
fn default_size_is_four_times_the_last_level_cache() {
    // Quartet: 16 MiB L3 per package.
    assert_eq!(
        default_buffer_bytes(&fixture("qemu-quartet-4n2c-ring.xml")),
        64 << 20
    );
    // A large L3 is followed up; a tiny one floors at 64 MiB.
    let m = fixture("64amd64-4s2n4ca2co.xml");
    let llc = m.last_level_cache_bytes().unwrap() as usize;
    assert_eq!(
        default_buffer_bytes(&m),
        (4 * llc).max(64 << 20).next_multiple_of(2 << 20)
    );
}

fn workers(m: &Machine, n: usize, policy: MemoryPolicy) -> Vec<WorkerPlan> {
    let cpus: Vec<u32> = m.allowed_cpus.iter().collect();
    cpus.into_iter()
        .cycle()
        .take(n)
        .map(|cpu| WorkerPlan {
            cpu,
            policy: policy.clone().into(),
            toucher: None,
        })
        .collect()
}

#[test]
fn bandwidth_run_reports_every_worker_and_verifies_placement() {
    let m = Machine::live().unwrap();
    let n = m.allowed_cpus.len().min(2);
    let r = run_bandwidth(
        &m,
        &BandwidthRequest {
            kernel: BandwidthKernel::Copy,
            isa: Isa::detect_best(),
            workers: workers(&m, n, MemoryPolicy::Local),
            buffer_bytes: 8 << 20,
            thp: Some(Thp::On),
            rule: quick(),
        },
    )
    .unwrap();
    assert_eq!(r.threads, n);
    assert_eq!(r.bytes_per_pass.program, n as u64 * 16 * (1 << 20));
    assert_eq!(r.bytes_per_pass.memory, n as u64 * 24 * (1 << 20));
    assert!(r.passes_per_sample >= 1);
    assert!(r.verification.verified, "{:?}", r.verification.problems);
    let samples = r.measurement.samples.len();
    assert!(samples >= 2);
    for w in &r.verification.workers {
        assert_eq!(
            w.gbps.len(),
            samples,
            "per-worker figures for counted samples only"
        );
        assert_eq!(w.buffers.len(), 2);
        assert!(w.seen_cpus.iter().all(|c| *c == w.requested_cpu));
    }
    // Aggregate = all bytes / slowest worker: never above the sum of workers.
    let sum_of_medians: f64 = r
        .verification
        .workers
        .iter()
        .map(|w| {
            numalab::measure::stats::Summary::of(&w.gbps)
                .unwrap()
                .median
        })
        .sum();
    assert!(
        r.gbps.median <= sum_of_medians * 1.05,
        "{} vs {sum_of_medians}",
        r.gbps.median
    );
}

#[test]
fn a_worker_that_cannot_set_up_is_an_error_not_a_hang() {
    let m = Machine::live().unwrap();
    // More than the machine has, in total: refused before any worker faults.
    let node = m.allowed_nodes.first().unwrap();
    let half = (m.node(node).unwrap().memory_bytes as usize / 2).next_multiple_of(4096);
    let e = run_bandwidth(
        &m,
        &BandwidthRequest {
            kernel: BandwidthKernel::Triad,
            isa: Isa::Portable,
            workers: workers(&m, 2, MemoryPolicy::Local),
            buffer_bytes: half,
            thp: Some(Thp::On),
            rule: quick(),
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("do not fit"), "{e}");
    // One worker's setup fails (strict bind on a node too small), the other's
    // succeeds: the error comes back and nobody waits forever.
    let small = 64 << 20;
    let mut ws = workers(&m, 2, MemoryPolicy::Local);
    ws[1].policy = MemoryPolicy::Bind {
        nodes: IdSet::single(node),
    }
    .into();
    ws[1].toucher = Some(4000);
    let e = run_bandwidth(
        &m,
        &BandwidthRequest {
            kernel: BandwidthKernel::Read,
            isa: Isa::Portable,
            workers: ws,
            buffer_bytes: small,
            thp: Some(Thp::On),
            rule: quick(),
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("4000"), "{e}");
    // A CPU that does not exist.
    let e = run_bandwidth(
        &m,
        &BandwidthRequest {
            kernel: BandwidthKernel::Read,
            isa: Isa::Portable,
            workers: vec![WorkerPlan {
                cpu: 4000,
                policy: MemoryPolicy::Local.into(),
                toucher: None,
            }],
            buffer_bytes: 1 << 20,
            thp: None,
            rule: quick(),
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("CPU 4000"), "{e}");
}

#[test]
fn latency_run_counts_chains_and_cycles() {
    let m = Machine::live().unwrap();
    let cpu = m.allowed_cpus.first().unwrap();
    let r = run_latency(
        &m,
        &LatencyRequest {
            cpu,
            policy: MemoryPolicy::Local,
            pattern: ChasePattern::Random,
            chains: 2,
            buffer_bytes: 4 << 20,
            thp: Some(Thp::Off),
            hugetlb: false,
            rule: quick(),
        },
    )
    .unwrap();
    assert_eq!(r.chains, 2);
    assert!(r.steps_per_sample >= 1000);
    assert!((r.ns_per_access - r.ns.median / 2.0).abs() < 1e-9);
    assert!(
        r.core_ghz > 0.3 && r.core_ghz < 8.0,
        "core clock {} GHz",
        r.core_ghz
    );
    assert!((r.cycles.median / r.ns.median - r.core_ghz).abs() < 1e-6);
    assert!(r.verification.verified);
    assert_eq!(
        r.verification.workers[0].buffers[0]
            .pages_by_node
            .values()
            .sum::<u64>(),
        1024
    );
}
