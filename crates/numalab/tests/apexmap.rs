//! Apex-MAP's extreme corners against the engine's own figures (issue 4
//! acceptance): (alpha = 1, L = 1) is a dependent random access over the
//! whole buffer, the random pointer chase's latency on the same buffer and
//! placement; (alpha = 0.001, L = 65536) reads one 512 KiB block more than
//! 99.7% of the time, the read kernel's bandwidth on a 512 KiB buffer.
//!
//! The host is shared and noisy: each side is measured three times,
//! interleaved, and the best sample of the three runs is compared (the
//! STREAM convention), within 10%.

use numalab::experiments::apexmap::{run_apexmap, ApexRequest, ApexResult};
use numalab::measure::chase::ChasePattern;
use numalab::measure::harness::{
    run_bandwidth, run_latency, BandwidthRequest, LatencyRequest, WorkerPlan,
};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::stats::StopRule;
use numalab::placement::{MemoryPolicy, Thp};
use numalab::Machine;
use std::sync::Mutex;
use std::time::Duration;

/// Timed tests run one at a time.
static LOCK: Mutex<()> = Mutex::new(());

const TRIES: usize = 3;

fn rule(budget: f64) -> StopRule {
    StopRule {
        warmup: 1,
        min_reps: 5,
        max_reps: 1000,
        target_rel_ci: 0.01,
        budget: Duration::from_secs_f64(budget),
    }
}

fn cpu(m: &Machine) -> u32 {
    m.allowed_cpus.first().expect("an allowed CPU")
}

fn apex(m: &Machine, alpha: f64, l: usize, size: usize) -> ApexResult {
    let r = run_apexmap(
        m,
        &ApexRequest {
            cpu: cpu(m),
            policy: MemoryPolicy::Local,
            buffer_bytes: size,
            thp: Some(Thp::On),
            alphas: vec![alpha],
            ls: vec![l],
            isa: Isa::detect_best(),
            rule: rule(0.6),
            seed: 11,
        },
        &mut |_| {},
    )
    .expect("apexmap runs");
    assert!(r.verification.verified, "{:?}", r.verification.problems);
    assert_eq!(r.points.len(), 1);
    r
}

#[test]
fn latency_corner_matches_the_random_chase() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let m = Machine::live().unwrap();
    let size = 128usize << 20;
    let (mut chase, mut map) = (f64::MAX, f64::MAX);
    let mut log = Vec::new();
    for _ in 0..TRIES {
        let c = run_latency(
            &m,
            &LatencyRequest {
                cpu: cpu(&m),
                policy: MemoryPolicy::Local,
                pattern: ChasePattern::Random,
                chains: 1,
                buffer_bytes: size,
                thp: Some(Thp::On),
                hugetlb: false,
                rule: rule(0.6),
            },
        )
        .expect("chase runs");
        let a = apex(&m, 1.0, 1, size);
        let p = &a.points[0];
        // Every line of the buffer once per lap: the chase's access pattern.
        assert_eq!(p.footprint_bytes, size as u64);
        log.push(format!(
            "chase {:.1}/{:.1} apexmap {:.1}/{:.1} (best/median ns)",
            c.ns.best, c.ns.median, p.ns.best, p.ns.median
        ));
        chase = chase.min(c.ns.best);
        map = map.min(p.ns.best);
    }
    let ratio = map / chase;
    eprintln!("latency corner: {log:?}; best {map:.1} vs {chase:.1} ns, ratio {ratio:.3}");
    assert!(
        (10.0..2000.0).contains(&chase),
        "chase latency {chase} ns is implausible"
    );
    assert!(
        (0.9..=1.1).contains(&ratio),
        "apexmap (alpha 1, L 1) {map:.1} ns vs random chase {chase:.1} ns: ratio {ratio:.3}; {log:?}"
    );
}

#[test]
fn bandwidth_corner_matches_the_read_kernel_on_the_block() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let m = Machine::live().unwrap();
    // 16 blocks of 512 KiB: 99.72% of the accesses go to block 0, the rest
    // to blocks that stay in the L3, so the corner touches one block.
    let size = 8usize << 20;
    let (mut kernel, mut map) = (0.0f64, 0.0f64);
    let mut log = Vec::new();
    for _ in 0..TRIES {
        let a = apex(&m, 0.001, 65536, size);
        let p = &a.points[0];
        assert_eq!(p.hot99_bytes, 512 << 10, "99% of the accesses in one block");
        let b = run_bandwidth(
            &m,
            &BandwidthRequest {
                kernel: BandwidthKernel::Read,
                isa: Isa::detect_best(),
                workers: vec![WorkerPlan {
                    cpu: cpu(&m),
                    policy: MemoryPolicy::Local,
                    toucher: None,
                }],
                buffer_bytes: p.hot99_bytes as usize,
                thp: Some(Thp::On),
                rule: rule(0.6),
            },
        )
        .expect("read bandwidth runs");
        log.push(format!(
            "kernel {:.1}/{:.1} apexmap {:.1}/{:.1} (best/median GB/s)",
            b.gbps.best, b.gbps.median, p.gbps.best, p.gbps.median
        ));
        kernel = kernel.max(b.gbps.best);
        map = map.max(p.gbps.best);
    }
    let ratio = map / kernel;
    eprintln!("bandwidth corner: {log:?}; best {map:.1} vs {kernel:.1} GB/s, ratio {ratio:.3}");
    assert!(
        (0.9..=1.1).contains(&ratio),
        "apexmap (alpha 0.001, L 65536) {map:.1} GB/s vs read kernel on 512 KiB {kernel:.1} GB/s: ratio {ratio:.3}; {log:?}"
    );
}

#[test]
fn bad_requests_are_refused() {
    let m = Machine::live().unwrap();
    let mut req = ApexRequest {
        cpu: cpu(&m),
        policy: MemoryPolicy::Local,
        buffer_bytes: 256 << 10,
        thp: None,
        alphas: vec![1.0],
        ls: vec![65536],
        isa: Isa::detect_best(),
        rule: rule(0.1),
        seed: 1,
    };
    let e = run_apexmap(&m, &req, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("does not fit"), "{e}");
    req.ls = vec![1];
    req.alphas = vec![0.0];
    let e = run_apexmap(&m, &req, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("(0, 1]"), "{e}");
}
