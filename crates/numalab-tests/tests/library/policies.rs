//! The harness features behind `numalab policies` (unpinned workers, the
//! serial initializer thread, summed rates) and the policy comparison itself,
//! on this machine. Runs are tiny and take turns; no timing is asserted
//! beyond "positive".

use crate::common;

use common::{policies_request, rule, turn};
use numalab::experiments::policies::{run_policies, PoliciesRequest, PolicyColumn, Workload};
use numalab::measure::harness::{
    run_bandwidth_with, Aggregate, BandwidthRequest, RunOptions, WorkerPlan,
};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::stats::StopRule;
use numalab::placement::{MemoryPolicy, PlacementError, Thp};
use numalab::Machine;

/// A short rule: bandwidth is only asserted positive.
fn quick() -> StopRule {
    rule(3, 20, 0.05, 0.2)
}

fn request(m: &Machine, kernel: BandwidthKernel) -> BandwidthRequest {
    BandwidthRequest {
        kernel,
        isa: Isa::detect_best(),
        workers: m
            .allowed_cpus
            .iter()
            .take(2)
            .map(|cpu| WorkerPlan {
                cpu,
                policy: MemoryPolicy::FirstTouch.into(),
                toucher: None,
            })
            .collect(),
        buffer_bytes: 4 << 20,
        thp: Some(Thp::Off),
        rule: quick(),
    }
}

#[test]
fn unpinned_workers_record_where_they_ran() {
    let _turn = turn();
    let m = Machine::live().unwrap();
    let mut req = request(&m, BandwidthKernel::Read);
    req.workers.truncate(1);
    let r = run_bandwidth_with(
        &m,
        &req,
        &RunOptions {
            unpinned: Some(m.allowed_cpus.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let w = &r.verification.workers[0];
    assert!(!w.pinned);
    assert!(!w.seen_cpus.is_empty());
    assert!(w.seen_cpus.iter().all(|c| m.allowed_cpus.contains(*c)));
    assert!(
        w.seen_cpus.windows(2).all(|p| p[0] < p[1]),
        "sorted, distinct"
    );
    assert!(
        w.seen_cpus.contains(&w.requested_cpu),
        "started on a CPU it was seen on"
    );
    assert!(w.migrations.is_some());
    // First touch wherever it ran: expected nodes are those of its CPUs.
    let nodes: numalab::IdSet = w
        .seen_cpus
        .iter()
        .filter_map(|c| m.node_of_cpu(*c))
        .collect();
    for b in &w.buffers {
        let e = b.expected_nodes.as_ref().unwrap();
        assert!(e.is_subset(&nodes) && !e.is_empty(), "{e} vs {nodes}");
        assert!(w.seen_cpus.contains(&b.toucher_cpu.unwrap()));
    }
    assert!(r.verification.verified, "{:?}", r.verification.problems);
    assert!(r.gbps.median > 0.0);
    // The JSON says so too.
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["verification"]["workers"][0]["pinned"], false);
    assert!(v["verification"]["workers"][0]["migrations"].is_u64());
}

#[test]
fn the_initializer_touches_everybody_s_data() {
    let _turn = turn();
    let m = Machine::live().unwrap();
    let req = request(&m, BandwidthKernel::Copy);
    let init = m.allowed_cpus.last().unwrap();
    let r = run_bandwidth_with(
        &m,
        &req,
        &RunOptions {
            initializer: Some(init),
            ..Default::default()
        },
    )
    .unwrap();
    let node = m.node_of_cpu(init).unwrap();
    for w in &r.verification.workers {
        assert!(w.pinned);
        assert_eq!(w.buffers.len(), 2);
        for b in &w.buffers {
            assert_eq!(b.toucher_cpu, Some(init));
            assert_eq!(
                b.expected_nodes
                    .as_ref()
                    .unwrap()
                    .iter()
                    .collect::<Vec<_>>(),
                vec![node]
            );
            assert_eq!(b.pages_by_node.get(&node), Some(&1024));
        }
    }
    assert!(r.verification.verified, "{:?}", r.verification.problems);
    // A pinned worker without an initializer touches its own data.
    let r = run_bandwidth_with(&m, &req, &RunOptions::default()).unwrap();
    for w in &r.verification.workers {
        for b in &w.buffers {
            assert_eq!(b.toucher_cpu, Some(w.requested_cpu));
        }
    }
}

#[test]
fn aggregates_are_the_slowest_worker_s_or_the_sum() {
    let _turn = turn();
    let m = Machine::live().unwrap();
    let req = request(&m, BandwidthKernel::Read);
    let n = req.workers.len() as f64;
    for agg in [Aggregate::Slowest, Aggregate::Sum] {
        let r = run_bandwidth_with(
            &m,
            &req,
            &RunOptions {
                aggregate: agg,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(r.aggregate, agg);
        let ws = &r.verification.workers;
        for (i, sample) in r.measurement.samples.iter().enumerate() {
            let per: Vec<f64> = ws.iter().map(|w| w.gbps[i]).collect();
            let want = match agg {
                // All bytes over the slowest time = n x the slowest worker's rate.
                Aggregate::Slowest => n * per.iter().cloned().fold(f64::MAX, f64::min),
                Aggregate::Sum => per.iter().sum(),
            };
            assert!(
                (sample - want).abs() <= 1e-9 * want,
                "{agg:?}: {sample} vs {want}"
            );
        }
    }
}

#[test]
fn the_comparison_runs_and_verifies_here() {
    let _turn = turn();
    let m = Machine::live().unwrap();
    let cpus: Vec<u32> = m.allowed_cpus.iter().take(2).collect();
    let req = PoliciesRequest {
        workloads: vec![Workload::SerialInit, Workload::NumaAware],
        policies: vec![PolicyColumn::Local, PolicyColumn::OneNode],
        ..policies_request(&m, BandwidthKernel::Triad, cpus.clone(), quick())
    };
    let mut steps = Vec::new();
    let r = run_policies(&m, &req, &mut |s| steps.push(s.to_string())).unwrap();
    // Every cell once in table order, then every cell again: the columns
    // of a row are measured interleaved.
    let table = [
        "serial-init / local",
        "serial-init / one-node",
        "numa-aware / local",
        "numa-aware / one-node",
    ];
    let expected: Vec<String> = (1..=2)
        .flat_map(|round| table.map(|c| format!("{c} (round {round} of 2)")))
        .collect();
    assert_eq!(steps, expected);
    assert_eq!(r.rounds, 2);
    assert_eq!(r.cells.len(), 4);
    assert!(
        r.verified,
        "{:?}",
        r.cells.iter().map(|c| &c.problems).collect::<Vec<_>>()
    );
    for c in &r.cells {
        assert!(c.gbps.as_ref().unwrap().median > 0.0);
        assert_eq!(c.threads, cpus.len());
        // 2 MiB x 3 arrays x threads, all pages somewhere.
        let pages: u64 = c.pages_by_node.values().sum();
        assert_eq!(pages, 512 * 3 * cpus.len() as u64);
    }
    let serial = r.cell(Workload::SerialInit, PolicyColumn::Local).unwrap();
    assert_eq!(serial.toucher_cpus, vec![cpus[0]]);
    let aware = r.cell(Workload::NumaAware, PolicyColumn::Local).unwrap();
    assert_eq!(aware.toucher_cpus, {
        let mut c = cpus.clone();
        c.sort();
        c
    });
    assert_eq!(r.single_node, r.interleave_nodes.len() == 1);
    assert!(!r.recommendations.is_empty());
}

#[test]
fn a_table_that_cannot_fit_is_refused_before_any_cell_runs() {
    let _turn = turn();
    let m = Machine::live().unwrap();
    let cpu = m.allowed_cpus.first().unwrap();
    let req = PoliciesRequest {
        buffer_bytes: 1 << 40,
        workloads: vec![Workload::SinglePinned],
        policies: vec![PolicyColumn::Local, PolicyColumn::OneNode],
        ..policies_request(&m, BandwidthKernel::Read, vec![cpu], quick())
    };
    match run_policies(&m, &req, &mut |_| panic!("no cell may run")) {
        Err(PlacementError::Capacity(msg)) => {
            assert!(msg.contains("(1 TiB) do not fit in this machine"), "{msg}");
            assert!(msg.contains("use a smaller --size"), "{msg}");
        }
        other => panic!("{:?}", other.map(|r| r.cells.len())),
    }
}
