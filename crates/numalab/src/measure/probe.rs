//! The costs of the operations every measurement is made of, probed on the
//! live machine in about half a second: faulting and checking pages, a read
//! pass, building and walking a pointer chase, starting a thread. The
//! report's budget planner prices its parts with them. They are measured
//! here, in the engine's optimized build, so that what they time is the
//! machine and not the compiler's settings of whoever calls them.

use crate::experiments::c2c::{run_c2c, C2cFigures, C2cRequest};
use crate::machine::Machine;
use crate::measure::chase::{Chase, ChasePattern};
use crate::measure::harness::{
    run_bandwidth, run_latency, BandwidthRequest, LatencyRequest, WorkerPlan,
};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::StopRule;
use crate::placement::{BufferSpec, MemoryPolicy, PlacedBuffer, Thp, WeightedImpl};
use std::time::{Duration, Instant};

const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

/// What each operation took; `None` where it could not be measured (no
/// buffer could be placed, no chase built).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OperationCosts {
    /// Placing, faulting and checking one GiB of base pages from one thread.
    pub fault_s_per_gib: Option<f64>,
    /// One read pass over one GiB by one thread.
    pub pass_s_per_gib: Option<f64>,
    /// Building a random pointer chase over one MiB.
    pub chase_s_per_mib: Option<f64>,
    /// One dependent load of a random chase over 32 MiB, nanoseconds.
    pub load_ns: Option<f64>,
    /// Starting, pinning and joining one worker thread.
    pub thread_s: f64,
}

/// Probes the operations from `cpu`, on a thread of its own pinned there
/// (the caller's affinity stays as it was); `None` when no thread could be
/// started.
pub fn probe_operations(m: &Machine, cpu: u32) -> Option<OperationCosts> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("numalab-probe".into())
            .spawn_scoped(s, || probe_here(m, cpu))
            .ok()
            .and_then(|h| h.join().ok())
    })
}

fn probe_here(m: &Machine, cpu: u32) -> OperationCosts {
    let mut c = OperationCosts::default();
    let _ = crate::placement::pin_current_thread(cpu);
    // Faulting: 32 MiB of base pages, placed and checked.
    let bytes = 32usize << 20;
    let spec = BufferSpec {
        size: bytes,
        policy: MemoryPolicy::Local,
        thp: Some(Thp::Off),
        hugetlb: false,
        toucher: Some(cpu),
        weighted: WeightedImpl::Auto,
    };
    let t = Instant::now();
    if let Ok(mut buf) = PlacedBuffer::new(m, &spec) {
        let _ = buf.histogram();
        c.fault_s_per_gib = Some(t.elapsed().as_secs_f64() * GIB / bytes as f64);
        // A read pass, twice (the first may still miss the TLB).
        let t = Instant::now();
        let mut sum = 0u64;
        for _ in 0..2 {
            for w in buf.as_slice().chunks_exact(8) {
                sum = sum.wrapping_add(u64::from_ne_bytes(w.try_into().unwrap_or([0; 8])));
            }
        }
        std::hint::black_box(sum);
        c.pass_s_per_gib = Some(t.elapsed().as_secs_f64() / 2.0 * GIB / bytes as f64);
        // A chase: built, then walked.
        let t = Instant::now();
        let built = Chase::build(buf.as_mut_slice(), ChasePattern::Random, 1, 0x5eed);
        if let Ok(mut chase) = built {
            c.chase_s_per_mib = Some(t.elapsed().as_secs_f64() * MIB / bytes as f64);
            let steps = 200_000;
            let walk = chase.run(steps);
            std::hint::black_box(walk.sum);
            c.load_ns = Some(walk.elapsed.as_secs_f64() / steps as f64 * 1e9);
        }
    }
    // Threads: start, pin and join a few.
    let n = 4usize;
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..n {
            let _ = std::thread::Builder::new().spawn_scoped(s, move || {
                let _ = crate::placement::pin_current_thread(cpu);
            });
        }
    });
    c.thread_s = t.elapsed().as_secs_f64() / n as f64;
    c
}

/// The host's speed at one moment ([`probe_speed`]); NaN for what could
/// not be measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeedProbe {
    /// Median ns per dependent load of a random chase.
    pub latency_ns: f64,
    /// Median GB/s of one thread reading.
    pub read_gbps: f64,
    /// Median GB/s per thread of two threads of one node reading at once
    /// (NaN where the node has one usable CPU): on a virtual machine the
    /// host may move two virtual CPUs onto one physical core's memory path
    /// or apart, which a single thread does not see.
    pub pair_read_gbps: f64,
    /// One-way latency of a modified cache line between the same two CPUs,
    /// ns (NaN likewise): the host moving virtual CPUs shows here most.
    pub pair_c2c_ns: f64,
}

/// The host's speed right now, as a report looks at it between its parts
/// to see how far it drifts: a random chase, one thread reading, and two
/// threads of `cpu`'s node reading at once, each over fresh buffers of
/// `bytes` (pages land anew each time, as in a new run) on that node, with
/// the chase's 4 KiB pages and the reads' huge pages as the latency and
/// bandwidth matrices use them, each measured within `each`; then a
/// modified line passed between those two CPUs, as `c2c` measures it.
pub fn probe_speed(m: &Machine, cpu: u32, isa: Isa, bytes: usize, each: Duration) -> SpeedProbe {
    let rule = StopRule {
        warmup: 1,
        min_reps: 3,
        max_reps: 1000,
        target_rel_ci: 0.01,
        budget: each,
    };
    let policy = MemoryPolicy::Local;
    let latency_ns = run_latency(
        m,
        &LatencyRequest {
            cpu,
            policy: policy.clone(),
            pattern: ChasePattern::Random,
            chains: 1,
            buffer_bytes: bytes,
            thp: Some(Thp::Off),
            hugetlb: false,
            rule: rule.clone(),
        },
    )
    .map_or(f64::NAN, |r| r.ns.median);
    let read = |cpus: &[u32]| {
        run_bandwidth(
            m,
            &BandwidthRequest {
                kernel: BandwidthKernel::Read,
                isa,
                workers: WorkerPlan::on_each(cpus, &policy),
                buffer_bytes: bytes,
                thp: Some(Thp::On),
                rule: rule.clone(),
            },
        )
        .map_or(f64::NAN, |r| r.gbps.median / cpus.len() as f64)
    };
    let node = m.node_of_cpu(cpu);
    let partner = m
        .allowed_cpus
        .iter()
        .find(|&c| c != cpu && m.node_of_cpu(c) == node);
    let c2c = |p: u32| {
        let req = C2cRequest {
            cpus: vec![cpu, p],
            figures: C2cFigures {
                modified: true,
                clean: false,
                false_sharing: false,
            },
            rule: rule.clone(),
        };
        run_c2c(m, &req, &mut |_| {})
            .ok()
            .and_then(|r| r.pairs.first()?.modified_ns.as_ref().map(|f| f.median))
            .unwrap_or(f64::NAN)
    };
    SpeedProbe {
        latency_ns,
        read_gbps: read(&[cpu]),
        pair_read_gbps: partner.map_or(f64::NAN, |p| read(&[cpu, p])),
        pair_c2c_ns: partner.map_or(f64::NAN, c2c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On this machine every operation is measured, each within what any
    /// machine that runs the suite gives (a loose bound: it is a probe).
    #[test]
    fn every_operation_is_probed_on_the_live_machine() {
        let m = Machine::live().unwrap();
        let cpu = m.allowed_cpus.first().unwrap();
        let c = probe_operations(&m, cpu).unwrap();
        for (what, v) in [
            ("fault", c.fault_s_per_gib),
            ("pass", c.pass_s_per_gib),
            ("chase", c.chase_s_per_mib),
            ("load", c.load_ns),
        ] {
            let v = v.unwrap_or_else(|| panic!("{what} not probed"));
            assert!(v > 0.0 && v.is_finite(), "{what}: {v}");
        }
        assert!(c.pass_s_per_gib.unwrap() < 10.0, "{c:?}");
        assert!(c.thread_s > 0.0 && c.thread_s < 1.0, "{c:?}");
    }

    /// The speed probe measures both figures on the live machine, within
    /// what any machine that runs the suite gives (a loose bound).
    #[test]
    fn the_speed_probe_measures_latency_and_one_threads_read() {
        let m = Machine::live().unwrap();
        let cpu = m.allowed_cpus.first().unwrap();
        let t = Instant::now();
        let p = probe_speed(
            &m,
            cpu,
            Isa::detect_best(),
            64 << 20,
            Duration::from_millis(100),
        );
        assert!(p.latency_ns > 5.0 && p.latency_ns < 5000.0, "{p:?}");
        assert!(p.read_gbps > 0.1 && p.read_gbps < 1000.0, "{p:?}");
        // Two CPUs on one node here (the suite needs two): the pair is measured.
        assert!(
            p.pair_read_gbps > 0.05 && p.pair_read_gbps < 1000.0,
            "{p:?}"
        );
        assert!(p.pair_c2c_ns > 1.0 && p.pair_c2c_ns < 100_000.0, "{p:?}");
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    }
}
