//! Cooperative cancellation (`measure::cancel`): with the flag set from
//! another thread, long measurements and experiments return quickly, with a
//! truncated result, and leave no thread running.
//!
//! The flag is process-wide, so everything runs in one test function, one
//! case after another, with the flag reset before and after each.

use numalab::experiments::apexmap::{run_apexmap, ApexRequest};
use numalab::experiments::c2c::{run_c2c, C2cFigures, C2cRequest};
use numalab::experiments::loaded_latency::{
    run_loaded_latency, Ladder, LoadStep, LoadedLatencyRequest,
};
use numalab::experiments::matrix::{run_matrix, MatrixRequest};
use numalab::experiments::policies::{run_policies, PoliciesRequest, PolicyColumn, Workload};
use numalab::experiments::scaling::run_scaling;
use numalab::experiments::sizes::run_sizes;
use numalab::experiments::sweep::{run_sweep, Access, Background, Subscription, SweepRequest};
use numalab::measure::cancel;
use numalab::measure::chase::ChasePattern;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::pacing::TrafficMix;
use numalab::measure::stats::{measure, StopReason, StopRule};
use numalab::placement::{MemoryPolicy, Thp};
use numalab::{IdSet, Machine};
use std::time::{Duration, Instant};

/// A rule that only the budget (or cancellation) stops.
fn long(budget_s: f64) -> StopRule {
    StopRule {
        warmup: 1,
        min_reps: 1_000_000,
        max_reps: 1_000_000,
        target_rel_ci: 0.0,
        budget: Duration::from_secs_f64(budget_s),
    }
}

/// Threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// Threads of this process once exited threads are gone: a joined thread
/// can stay listed in /proc/self/task for a moment after `join` returns
/// (the kernel wakes the joiner before it releases the task), so wait up
/// to a second for the count to come down to `want`.
fn settled_threads(want: usize) -> usize {
    let t0 = Instant::now();
    loop {
        let n = threads();
        if n <= want || t0.elapsed() > Duration::from_secs(1) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `f` with cancellation requested from another thread after `after`;
/// returns its value and how long it took. The flag is clear before and after.
fn cancelled_after<R>(after: Duration, f: impl FnOnce() -> R) -> (R, Duration) {
    cancel::reset();
    let t0 = Instant::now();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(after);
        cancel::request();
    });
    let r = f();
    let took = t0.elapsed();
    canceller.join().unwrap();
    assert!(cancel::requested());
    cancel::reset();
    (r, took)
}

#[test]
fn cancellation_stops_measurements_and_experiments() {
    let m = Machine::live().unwrap();
    let cpus: Vec<u32> = m.allowed_cpus.iter().take(2).collect();
    let baseline = threads();

    // The flag itself.
    cancel::reset();
    assert!(!cancel::requested());
    cancel::request();
    assert!(cancel::requested());
    // Already requested: no run at all, the no-data summary.
    let mut runs = 0;
    let meas = measure(&long(30.0), || {
        runs += 1;
        1.0
    });
    assert_eq!(runs, 0);
    assert_eq!(meas.stop_reason, StopReason::Cancelled);
    assert_eq!(meas.summary.n, 0);
    assert!(meas.summary.median.is_nan());
    assert!(meas.warnings().iter().any(|w| w.starts_with("cancelled")));
    cancel::reset();
    assert!(!cancel::requested());

    // (a) measure with a 30 s budget.
    let (meas, took) = cancelled_after(Duration::from_millis(100), || {
        measure(&long(30.0), || {
            std::thread::sleep(Duration::from_millis(1));
            1.0
        })
    });
    eprintln!("measure: {took:?}, {} samples", meas.samples.len());
    assert!(took < Duration::from_millis(600), "{took:?}");
    assert_eq!(meas.stop_reason, StopReason::Cancelled);
    assert!(meas.summary.n > 0 && meas.summary.median == 1.0);

    // (b) a sweep with 5 s per case, under a paced background.
    let mem: IdSet = m
        .nodes
        .iter()
        .filter(|n| n.allowed && n.memory_bytes > 0)
        .map(|n| n.os_index)
        .collect();
    let req = SweepRequest {
        threads: vec![1],
        cpus: m.allowed_cpus.clone(),
        mem_nodes: mem,
        accesses: vec![Access::Read, Access::Write],
        read_kernel: BandwidthKernel::Read,
        write_kernel: BandwidthKernel::Write,
        isa: Isa::detect_best(),
        buffer_bytes: 256 << 10,
        thp: Some(Thp::Off),
        full: true,
        budget: None,
        rule: long(5.0),
        // The paced background first: it runs while the flag is set.
        backgrounds: vec![
            Some(Background {
                level: "low".into(),
                bytes_per_second: 0.5e9,
                subscription: Subscription::Full,
                cpus: None,
            }),
            None,
        ],
        background_bytes: 1 << 20,
        full_limit: 1000,
        min_sample_s: 0.002,
    };
    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_sweep(&m, &req, &mut |_, _, _| {})
    });
    let r = r.unwrap();
    let cases: usize = r.runs.iter().map(|x| x.cases.len()).sum();
    eprintln!("sweep: {took:?}, {cases} case(s)");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(cases <= 1, "{cases} cases ran");
    assert!(r.warnings.iter().any(|w| w == cancel::WARNING));

    if cpus.len() == 2 {
        // (c) c2c with 10 s per pair.
        let (r, took) = cancelled_after(Duration::from_millis(200), || {
            run_c2c(
                &m,
                &C2cRequest {
                    cpus: cpus.clone(),
                    figures: C2cFigures::default(),
                    rule: long(10.0),
                },
                &mut |_| {},
            )
        });
        let r = r.unwrap();
        eprintln!("c2c: {took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert!(r.pairs.len() <= 1);
        assert!(r.warnings.iter().any(|w| w == cancel::WARNING));
    } else {
        eprintln!("c2c skipped: needs 2 CPUs");
    }

    // (d) the matrix with 10 s per cell.
    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_matrix(
            &m,
            &MatrixRequest {
                latency: true,
                bandwidth: true,
                all_threads_per_node: false,
                kernel: BandwidthKernel::Read,
                isa: Isa::detect_best(),
                pattern: ChasePattern::Random,
                latency_bytes: 4 << 20,
                bandwidth_bytes: 4 << 20,
                rule: long(10.0),
            },
            &mut |_| {},
        )
    });
    let r = r.unwrap();
    eprintln!("matrix: {took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let cells = r
        .latency
        .iter()
        .chain(&r.bandwidth)
        .flatten()
        .flatten()
        .count();
    assert!(cells <= 1, "{cells} cells");
    assert!(r.warnings.iter().any(|w| w == cancel::WARNING));

    // The other experiments: each returns quickly, marked, truncated.
    let quick = Duration::from_secs(2);
    let cpu = cpus[0];
    let isa = Isa::detect_best();
    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_sizes(&m, cpu, &[1 << 20, 2 << 20], isa, &long(10.0), &mut |_| {})
    });
    let r = r.unwrap();
    eprintln!("sizes: {took:?}");
    assert!(took < quick, "{took:?}");
    assert!(r.points.is_empty());
    assert!(r.warnings.iter().any(|w| w == cancel::WARNING));

    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_scaling(
            &m,
            BandwidthKernel::Read,
            isa,
            4 << 20,
            2,
            &long(10.0),
            &mut |_| {},
        )
    });
    let r = r.unwrap();
    eprintln!("scaling: {took:?}");
    assert!(took < quick, "{took:?}");
    assert!(r.packed.len() <= 1 && r.model.is_none());
    assert!(r.warnings.iter().any(|w| w == cancel::WARNING));

    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_policies(
            &m,
            &PoliciesRequest {
                kernel: BandwidthKernel::Read,
                isa,
                cpus: cpus.clone(),
                thread_policy: "scatter".into(),
                unpinned_cpus: m.allowed_cpus.clone(),
                node: m.node_of_cpu(cpu).unwrap(),
                buffer_bytes: 2 << 20,
                thp: Thp::Off,
                rule: long(10.0),
                workloads: vec![Workload::SinglePinned, Workload::NumaAware],
                policies: vec![PolicyColumn::Local, PolicyColumn::Interleave],
            },
            &mut |_| {},
        )
    });
    let r = r.unwrap();
    eprintln!("policies: {took:?}");
    assert!(took < quick, "{took:?}");
    assert_eq!(r.cells.len(), 1);
    assert!(r.warnings.iter().any(|w| w == cancel::WARNING));

    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_apexmap(
            &m,
            &ApexRequest {
                cpu,
                policy: MemoryPolicy::Local,
                buffer_bytes: 1 << 20,
                thp: Some(Thp::Off),
                alphas: vec![0.5, 1.0],
                ls: vec![1, 64],
                isa,
                rule: long(10.0),
                seed: 1,
            },
            &mut |_| {},
        )
    });
    let r = r.unwrap();
    eprintln!("apexmap: {took:?}");
    assert!(took < quick, "{took:?}");
    assert!(r.points.len() <= 1);
    assert!(r.warnings.iter().any(|w| w == cancel::WARNING));

    if cpus.len() == 2 {
        let (r, took) = cancelled_after(Duration::from_millis(200), || {
            run_loaded_latency(
                &m,
                &LoadedLatencyRequest {
                    cpu,
                    policy: MemoryPolicy::Local,
                    pattern: ChasePattern::Random,
                    buffer_bytes: 4 << 20,
                    thp: Some(Thp::Off),
                    injector_cpus: vec![cpus[1]],
                    injector_policy: None,
                    injector_buffer_bytes: 4 << 20,
                    injector_thp: Some(Thp::Off),
                    mixes: vec![TrafficMix::Read, TrafficMix::WriteNt],
                    ladder: Ladder::Steps(vec![LoadStep::Max]),
                    rule: long(10.0),
                    settle: Duration::from_millis(5),
                },
                &mut |_| {},
            )
        });
        let r = r.unwrap();
        eprintln!("loaded latency: {took:?}");
        assert!(took < quick, "{took:?}");
        assert!(r.mixes.len() <= 1);
        assert!(r.warnings.iter().any(|w| w == cancel::WARNING));
    }

    // Nothing left running: paced background threads, c2c partners and
    // workers were all joined (the canceller threads too).
    assert_eq!(settled_threads(baseline), baseline, "threads left running");
    assert!(!cancel::requested());
}
