//! What the library's test files share: topology fixtures, the measuring
//! tests' turn, stopping rules, and the experiment requests that several
//! files run (each file changes the fields it is about).
#![allow(dead_code)] // each test binary uses its own part

use numalab::experiments::apexmap::ApexRequest;
use numalab::experiments::loaded_latency::{Ladder, LoadStep, LoadedLatencyRequest};
use numalab::experiments::matrix::MatrixRequest;
use numalab::experiments::policies::{PoliciesRequest, PolicyColumn, Workload};
use numalab::experiments::sweep::{Access, SweepRequest};
use numalab::measure::chase::ChasePattern;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::pacing::TrafficMix;
use numalab::measure::stats::StopRule;
use numalab::placement::{MemoryPolicy, Thp};
use numalab::Machine;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// The path of a topology file of tests/fixtures/topologies.
pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/topologies")
        .join(name)
}

/// The machine a topology file of tests/fixtures/topologies describes.
pub fn fixture(name: &str) -> Machine {
    Machine::from_xml_file(&fixture_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Measuring tests of one test binary take turns: on a 2-core machine two
/// measurements at once would measure each other. Hold the guard for the
/// whole test.
pub fn turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|p| p.into_inner())
}

/// One warm-up run, then `min_reps` to `max_reps` repetitions until the
/// median's 95% CI is within `target_rel_ci` or `budget_s` is spent.
pub fn rule(min_reps: usize, max_reps: usize, target_rel_ci: f64, budget_s: f64) -> StopRule {
    StopRule {
        warmup: 1,
        min_reps,
        max_reps,
        target_rel_ci,
        budget: Duration::from_secs_f64(budget_s),
    }
}

/// The latency and bandwidth matrix (one thread per node, read kernel,
/// random chase) over 4 MiB buffers.
pub fn matrix_request(rule: StopRule) -> MatrixRequest {
    MatrixRequest {
        fixed_arrays: Default::default(),
        rows: None,
        latency: true,
        bandwidth: true,
        all_threads_per_node: false,
        kernel: BandwidthKernel::Read,
        isa: Isa::detect_best(),
        pattern: ChasePattern::Random,
        latency_bytes: 4 << 20,
        bandwidth_bytes: 4 << 20,
        rule,
    }
}

/// A 2 x 2 Apex-MAP grid (alpha 0.5 and 1, L 1 and 64) over 1 MiB of local
/// memory from `cpu`, without huge pages.
pub fn apex_request(cpu: u32, rule: StopRule) -> ApexRequest {
    ApexRequest {
        cpu,
        policy: MemoryPolicy::Local,
        buffer_bytes: 1 << 20,
        thp: Some(Thp::Off),
        alphas: vec![0.5, 1.0],
        ls: vec![1, 64],
        isa: Isa::detect_best(),
        rule,
        seed: 1,
    }
}

/// A folded one-thread read/write sweep of every allowed CPU and memory
/// node over 256 KiB buffers, without background load.
pub fn sweep_request(m: &Machine, rule: StopRule) -> SweepRequest {
    SweepRequest {
        threads: vec![1],
        cpus: m.allowed_cpus.clone(),
        mem_nodes: m.memory_nodes(),
        accesses: vec![Access::Read, Access::Write],
        read_kernel: BandwidthKernel::Read,
        write_kernel: BandwidthKernel::Write,
        isa: Isa::detect_best(),
        buffer_bytes: 256 << 10,
        thp: Some(Thp::Off),
        full: false,
        budget: None,
        rule,
        backgrounds: vec![None],
        background_bytes: 1 << 20,
        full_limit: 1000,
        min_sample_s: 0.002,
        twins: false,
    }
}

/// The policy comparison of `kernel` on `cpus` (scatter), the node of the
/// first, 2 MiB per array without huge pages: pinned and NUMA-aware
/// workloads, local and interleaved memory.
pub fn policies_request(
    m: &Machine,
    kernel: BandwidthKernel,
    cpus: Vec<u32>,
    rule: StopRule,
) -> PoliciesRequest {
    PoliciesRequest {
        kernel,
        isa: Isa::detect_best(),
        node: m.node_of_cpu(cpus[0]).unwrap(),
        cpus,
        thread_policy: "scatter".into(),
        unpinned_cpus: m.allowed_cpus.clone(),
        buffer_bytes: 2 << 20,
        thp: Thp::Off,
        rule,
        workloads: vec![Workload::SinglePinned, Workload::NumaAware],
        policies: vec![PolicyColumn::Local, PolicyColumn::Interleave],
    }
}

/// A random chase on `cpu` over 4 MiB of local memory while an injector on
/// `injector` reads 4 MiB of the same node unpaced; no huge pages.
pub fn loaded_latency_request(cpu: u32, injector: u32, rule: StopRule) -> LoadedLatencyRequest {
    LoadedLatencyRequest {
        cpu,
        policy: MemoryPolicy::Local,
        pattern: ChasePattern::Random,
        buffer_bytes: 4 << 20,
        thp: Some(Thp::Off),
        injector_cpus: vec![injector],
        injector_policy: None,
        injector_buffer_bytes: 4 << 20,
        injector_thp: Some(Thp::Off),
        mixes: vec![TrafficMix::Read],
        ladder: Ladder::Steps(vec![LoadStep::Max]),
        rule,
        settle: Duration::from_millis(5),
    }
}

/// `count()` once it is down to `want`, or its last value after 5 s: a
/// joined thread can stay listed in /proc/self/task for a moment after
/// `join` returns (the kernel wakes the joiner before it releases the
/// task), which a loaded machine (CI's) makes visible.
pub fn settled(want: usize, count: impl Fn() -> usize) -> usize {
    let t0 = std::time::Instant::now();
    loop {
        let n = count();
        if n <= want || t0.elapsed() > Duration::from_secs(5) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
