//! Cooperative cancellation (`measure::cancel`): with the flag set from
//! another thread, long measurements and experiments return long before
//! their budget (every time bound is half of the least time the work would
//! take uncancelled, so a slow machine cannot trip it), with a truncated
//! result that says it was cancelled, and leave no thread running.
//!
//! The flag is process-wide, so everything runs in one test function, one
//! case after another, with the flag reset before and after each.

mod common;

use common::{
    apex_request, loaded_latency_request, matrix_request, policies_request, rule, sweep_request,
};
use numalab::experiments::apexmap::run_apexmap;
use numalab::experiments::c2c::{run_c2c, C2cFigures, C2cRequest};
use numalab::experiments::loaded_latency::{run_loaded_latency, LoadedLatencyRequest};
use numalab::experiments::matrix::run_matrix;
use numalab::experiments::policies::run_policies;
use numalab::experiments::scaling::run_scaling;
use numalab::experiments::sizes::run_sizes;
use numalab::experiments::sweep::{run_sweep, Background, Subscription, SweepRequest};
use numalab::measure::cancel;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::pacing::TrafficMix;
use numalab::measure::stats::{measure, StopReason, StopRule};
use numalab::Machine;
use std::time::{Duration, Instant};

/// A rule that only the budget (or cancellation) stops.
fn long(budget_s: f64) -> StopRule {
    rule(1_000_000, 1_000_000, 0.0, budget_s)
}

/// Asserts that cancelled work returned long before it could have
/// uncancelled: within half of `budget_s`, the least time one unit of it (a
/// measurement, a case, a pair, a cell, a point) takes without cancellation.
fn stopped_early(what: &str, took: Duration, budget_s: f64) {
    eprintln!("{what}: {took:?}");
    assert!(
        took.as_secs_f64() < budget_s / 2.0,
        "{what}: took {took:?}; uncancelled, one unit of it takes {budget_s} s"
    );
}

/// Threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
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
    eprintln!("measure: {} samples", meas.samples.len());
    stopped_early("measure", took, 30.0);
    assert_eq!(meas.stop_reason, StopReason::Cancelled);
    assert!(meas.summary.n > 0 && meas.summary.median == 1.0);

    // (b) a sweep with 5 s per case, under a paced background.
    let req = SweepRequest {
        full: true,
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
        ..sweep_request(&m, long(5.0))
    };
    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_sweep(&m, &req, &mut |_, _, _| {})
    });
    let r = r.unwrap();
    let cases: usize = r.runs.iter().map(|x| x.cases.len()).sum();
    eprintln!("sweep: {cases} case(s)");
    stopped_early("sweep", took, 5.0);
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
        stopped_early("c2c", took, 10.0);
        assert!(r.pairs.len() <= 1);
        assert!(r.warnings.iter().any(|w| w == cancel::WARNING));
    } else {
        eprintln!("skipped: c2c under cancellation needs 2 CPUs; this process may use {cpus:?}");
    }

    // (d) the matrix with 10 s per cell.
    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_matrix(&m, &matrix_request(long(10.0)), &mut |_| {})
    });
    let r = r.unwrap();
    stopped_early("matrix", took, 10.0);
    let cells = r
        .latency
        .iter()
        .chain(&r.bandwidth)
        .flatten()
        .flatten()
        .count();
    assert!(cells <= 1, "{cells} cells");
    assert!(r.warnings.iter().any(|w| w == cancel::WARNING));

    // The other experiments: each returns early, marked, truncated.
    let cpu = cpus[0];
    let isa = Isa::detect_best();
    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_sizes(&m, cpu, &[1 << 20, 2 << 20], isa, &long(10.0), &mut |_| {})
    });
    let r = r.unwrap();
    stopped_early("sizes", took, 10.0);
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
    stopped_early("scaling", took, 10.0);
    assert!(r.packed.len() <= 1 && r.model.is_none());
    assert!(r.warnings.iter().any(|w| w == cancel::WARNING));

    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_policies(
            &m,
            &policies_request(&m, BandwidthKernel::Read, cpus.clone(), long(10.0)),
            &mut |_| {},
        )
    });
    let r = r.unwrap();
    stopped_early("policies", took, 10.0);
    assert_eq!(r.cells.len(), 1);
    if let Some(run) = &r.cells[0].run {
        assert_eq!(run.measurement.stop_reason, StopReason::Cancelled);
    }
    assert!(r.warnings.iter().any(|w| w == cancel::WARNING));

    let (r, took) = cancelled_after(Duration::from_millis(200), || {
        run_apexmap(&m, &apex_request(cpu, long(10.0)), &mut |_| {})
    });
    let r = r.unwrap();
    stopped_early("apexmap", took, 10.0);
    assert!(r.points.len() <= 1);
    for p in &r.points {
        assert_eq!(p.stop_reason, StopReason::Cancelled);
    }
    assert!(r.warnings.iter().any(|w| w == cancel::WARNING));

    if cpus.len() == 2 {
        let req = LoadedLatencyRequest {
            mixes: vec![TrafficMix::Read, TrafficMix::WriteNt],
            ..loaded_latency_request(cpu, cpus[1], long(10.0))
        };
        let (r, took) = cancelled_after(Duration::from_millis(200), || {
            run_loaded_latency(&m, &req, &mut |_| {})
        });
        let r = r.unwrap();
        stopped_early("loaded latency", took, 10.0);
        assert!(r.mixes.len() <= 1);
        for mix in &r.mixes {
            // The point being measured when the flag was set.
            let last = mix.steps.last().unwrap_or(&mix.idle);
            assert_eq!(last.stop_reason, StopReason::Cancelled);
        }
        assert!(r.warnings.iter().any(|w| w == cancel::WARNING));
    } else {
        eprintln!("skipped: loaded latency under cancellation needs 2 CPUs; this process may use {cpus:?}");
    }

    // Nothing left running: paced background threads, c2c partners and
    // workers were all joined (the canceller threads too).
    assert_eq!(
        common::settled(baseline, threads),
        baseline,
        "threads left running"
    );
    assert!(!cancel::requested());
}
