//! Apex-MAP's extreme corners against the engine's own figures (issue 4
//! acceptance): (alpha = 1, L = 1) is a dependent random access over the
//! whole buffer, the random pointer chase's latency on the same buffer and
//! placement; (alpha = 0.001, L = 65536) reads one 512 KiB block more than
//! 99.7% of the time, the read kernel's bandwidth on a 512 KiB buffer.
//!
//! The host is shared and noisy: the measuring threads run at nice -20
//! when permitted (root), so that other jobs' threads rarely preempt a
//! sample; each side is measured several times, interleaved, and the best
//! sample of all runs is compared (the STREAM convention), within 10%.
//! Both take the binary's measuring turn (`common::turn`).

use numalab::experiments::apexmap::{run_apexmap, ApexRequest, ApexResult};
use numalab::measure::chase::ChasePattern;
use numalab::measure::harness::{
    run_bandwidth, run_latency, BandwidthRequest, LatencyRequest, WorkerPlan,
};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::stats::StopRule;
use numalab::placement::{MemoryPolicy, Thp};
use numalab::Machine;
use std::time::Duration;

/// Tries of each side, interleaved (the latency corner needs a 128 MiB
/// buffer per try; the bandwidth corner's runs are cheap, and its figure,
/// from the L2, swings with whatever shares the core on the host).
const LATENCY_TRIES: usize = 3;
const BANDWIDTH_TRIES: usize = 10;

/// Budgets of 0.2 s or more give apexmap samples of 20 ms, as long as the
/// harness's: the best of short samples is more extreme on a noisy host.
fn rule(budget: f64) -> StopRule {
    StopRule {
        warmup: 1,
        min_reps: 5,
        max_reps: 1000,
        target_rel_ci: 0.01,
        budget: Duration::from_secs_f64(budget),
    }
}

/// Raises the calling thread's priority (inherited by the threads it
/// starts); silently keeps it when not permitted.
fn high_priority() {
    // SAFETY: setpriority on the calling thread (Linux: who = 0 is the caller's tid).
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -20) };
}

fn cpu(m: &Machine) -> u32 {
    m.allowed_cpus.first().expect("an allowed CPU")
}

fn apex(m: &Machine, alpha: f64, l: usize, size: usize, budget: f64) -> ApexResult {
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
            rule: rule(budget),
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
    let _turn = crate::common::turn();
    high_priority();
    let m = Machine::live().unwrap();
    let size = 128usize << 20;
    let (mut chase, mut map) = (f64::MAX, f64::MAX);
    let mut log = Vec::new();
    for _ in 0..LATENCY_TRIES {
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
        let a = apex(&m, 1.0, 1, size, 0.6);
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
    let _turn = crate::common::turn();
    high_priority();
    let m = Machine::live().unwrap();
    // 16 blocks of 512 KiB: 99.72% of the accesses go to block 0, the rest
    // to blocks that stay in the L3, so the corner touches one block.
    let size = 8usize << 20;
    // Each try's best, then the median of those: one try's outlier (a
    // kernel best of 102.6 GB/s among nine of 82-94 on a loaded CI
    // machine) does not decide the comparison.
    let (mut kernel_bests, mut map_bests) = (Vec::new(), Vec::new());
    let mut log = Vec::new();
    for _ in 0..BANDWIDTH_TRIES {
        let a = apex(&m, 0.001, 65536, size, 0.2);
        let p = &a.points[0];
        assert_eq!(p.hot99_bytes, 512 << 10, "99% of the accesses in one block");
        let b = run_bandwidth(
            &m,
            &BandwidthRequest {
                kernel: BandwidthKernel::Read,
                isa: Isa::detect_best(),
                workers: vec![WorkerPlan {
                    cpu: cpu(&m),
                    policy: MemoryPolicy::Local.into(),
                    toucher: None,
                }],
                buffer_bytes: p.hot99_bytes as usize,
                thp: Some(Thp::On),
                rule: rule(0.2),
            },
        )
        .expect("read bandwidth runs");
        log.push(format!(
            "kernel {:.1}/{:.1} apexmap {:.1}/{:.1} (best/median GB/s)",
            b.gbps.best, b.gbps.median, p.gbps.best, p.gbps.median
        ));
        kernel_bests.push(b.gbps.best);
        map_bests.push(p.gbps.best);
    }
    // Each side's upper quartile of its tries' bests: one outlier try (a
    // kernel best of 102.6 among 82-94 GB/s on a loaded CI machine) does
    // not decide, nor do slow tries: both sides' bests are bimodal between
    // tries on some hosts (about 155 and 240 GB/s, in alternate tries of
    // the corner on the clean run of dcd2958, in one kernel try here; cause
    // not found), and the claim is that the corner runs at the kernel's
    // speed, which the fast tries of both show.
    let upper_quartile = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[(v.len() * 3) / 4]
    };
    let (kernel, map) = (upper_quartile(kernel_bests), upper_quartile(map_bests));
    let ratio = map / kernel;
    eprintln!(
        "bandwidth corner: {log:?}; upper quartile of the bests {map:.1} vs {kernel:.1} GB/s, ratio {ratio:.3}"
    );
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
