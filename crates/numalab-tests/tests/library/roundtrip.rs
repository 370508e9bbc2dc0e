//! Every result type reads back from the JSON it writes, into the same type,
//! and writes the same JSON again: `numalab report` keeps its experiments'
//! results in one results.json and reads them back (`--resume`, re-rendering).
//!
//! The values are real: each experiment runs on this machine with tiny
//! budgets (the figures themselves are not checked), the machine models come
//! from the live machine and from topology files. Each value goes three
//! ways: through a `serde_json::Value`, through JSON text (as a file is
//! read), and flattened into an envelope next to other keys (as the
//! commands' `--json` output is), where serde reads maps with number keys
//! (pages by node) differently.

use crate::common;

use common::{
    apex_request, fixture_path as fixture, loaded_latency_request, matrix_request,
    policies_request, sweep_request, turn,
};
use numalab::experiments::apexmap::{run_apexmap, ApexRequest};
use numalab::experiments::c2c::{run_c2c, C2cFigures, C2cRequest};
use numalab::experiments::loaded_latency::{
    run_loaded_latency, Ladder, LoadStep, LoadedLatencyRequest,
};
use numalab::experiments::matrix::run_matrix;
use numalab::experiments::policies::{run_policies, PoliciesRequest, PolicyColumn, Workload};
use numalab::experiments::scaling::run_scaling;
use numalab::experiments::sizes::run_sizes;
use numalab::experiments::sweep::run_sweep;
use numalab::measure::chase::ChasePattern;
use numalab::measure::environment::Environment;
use numalab::measure::harness::{
    run_bandwidth, run_latency, BandwidthRequest, LatencyRequest, WorkerPlan,
};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::pacing::TrafficMix;
use numalab::measure::stats::{measure, StopReason, StopRule};
use numalab::placement::{MemoryPolicy, Thp};
use numalab::{IdSet, Machine};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::time::Duration;

// The measuring tests take turns (common::turn): on a 2-core machine two
// measurements at once would measure each other (and the harness pins
// threads).

/// A command's JSON envelope: the result flattened beside other keys.
#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    command: String,
    #[serde(flatten)]
    result: T,
    tail: u32,
}

/// Serializes `v`, reads it back into `T` and serializes that: the two JSON
/// values must be equal, by each of the three ways. Returns the value read back.
fn roundtrip<T: Serialize + DeserializeOwned>(v: &T) -> T {
    let what = std::any::type_name::<T>();
    let json = serde_json::to_value(v).unwrap_or_else(|e| panic!("{what}: {e}"));
    let back: T = serde_json::from_value(json.clone())
        .unwrap_or_else(|e| panic!("{what} from a Value: {e}\n{json:#}"));
    let again = serde_json::to_value(&back).unwrap();
    assert_eq!(json, again, "{what} through a Value");

    let text = serde_json::to_string_pretty(v).unwrap();
    let from_text: T =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what} from text: {e}"));
    assert_eq!(
        json,
        serde_json::to_value(&from_text).unwrap(),
        "{what} through text"
    );
    assert_eq!(
        text,
        serde_json::to_string_pretty(&from_text).unwrap(),
        "{what}: the text differs"
    );

    let env = Envelope {
        command: "roundtrip".into(),
        result: v,
        tail: 7,
    };
    let env_text = serde_json::to_string(&env).unwrap();
    let env_back: Envelope<T> = serde_json::from_str(&env_text)
        .unwrap_or_else(|e| panic!("{what} flattened in an envelope: {e}"));
    assert_eq!(env_back.tail, 7);
    assert_eq!(
        env_text,
        serde_json::to_string(&env_back).unwrap(),
        "{what} flattened in an envelope"
    );
    back
}

/// Tiny measurements: the figures themselves are not checked.
fn rule(budget_s: f64) -> StopRule {
    common::rule(3, 20, 0.05, budget_s)
}

/// The first two allowed CPUs (the same one twice on a one-CPU machine).
fn two_cpus(m: &Machine) -> (u32, u32) {
    let first = m.allowed_cpus.first().unwrap();
    (first, m.allowed_cpus.iter().nth(1).unwrap_or(first))
}

#[test]
fn machine_models() {
    let live = Machine::live().unwrap();
    let back = roundtrip(&live);
    assert!(back.is_live());
    assert_eq!(back.schema_version, live.schema_version);
    assert_eq!(back.allowed_cpus, live.allowed_cpus);
    for name in [
        "qemu-ring4-cpuless-hmat.xml",
        "qemu-quartet-4n2c-ring.xml",
        // Devices, memory attributes, memory kinds, tiers, distances.
        "nvidiaDGX2.xml",
        "8intel64-4n2t-memattrs.xml",
        "cxlmem+dax.v2.xml",
        "fakeheteromemtiers.xml",
        "64intel64-fakeKNL-SNC4-hybrid.xml",
    ] {
        let m = Machine::from_xml_file(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let back = roundtrip(&m);
        assert_eq!(back.source, m.source, "{name}");
        assert_eq!(back.hops, m.hops, "{name}");
        assert_eq!(back.distances, m.distances, "{name}");
        assert_eq!(back.memory_attributes, m.memory_attributes, "{name}");
    }
}

#[test]
fn environment() {
    let e = roundtrip(&Environment::capture());
    assert!(!e.kernel.is_empty());
}

#[test]
fn measurements_without_data_and_budgets() {
    // No finite sample: NaN statistics (null in JSON) read back as NaN.
    let m = measure(&rule(0.01), || f64::NAN);
    assert_eq!(m.summary.n, 0);
    let back = roundtrip(&m);
    assert!(back.summary.median.is_nan() && back.warmup_samples[0].is_nan());
    // Budgets in seconds come back to the nanosecond.
    for budget in [
        Duration::from_millis(20),
        Duration::from_nanos(1_234_567_891),
        Duration::from_secs(3).mul_f64(0.15 / 0.85),
    ] {
        let r = StopRule {
            budget,
            ..StopRule::default()
        };
        assert_eq!(roundtrip(&r).budget, budget);
    }
    for reason in [
        StopReason::Converged,
        StopReason::Budget,
        StopReason::MaxReps,
        StopReason::Cancelled,
    ] {
        assert_eq!(roundtrip(&reason), reason);
    }
    assert_eq!(
        serde_json::to_value(StopReason::Cancelled).unwrap(),
        "cancelled"
    );
}

#[test]
fn realizations() {
    use numalab::placement::sys::Mode;
    use numalab::placement::Realization;
    // Every kernel mode by its name, and the other two mechanisms.
    let nodes: IdSet = [0, 2].into_iter().collect();
    for mode in Mode::ALL {
        let r = Realization::Kernel {
            mode,
            nodes: nodes.clone(),
        };
        assert_eq!(roundtrip(&r), r);
    }
    for r in [
        Realization::KernelWeighted {
            nodes: nodes.clone(),
            weights: vec![(0, 3), (2, 1)],
        },
        Realization::Chunks {
            pattern: vec![(0, 2), (2, 1)],
        },
    ] {
        assert_eq!(roundtrip(&r), r);
    }
    assert!(serde_json::from_str::<Realization>(
        r#"{"mechanism":"kernel","mode":"sideways","nodes":"0"}"#
    )
    .is_err());
}

#[test]
fn bench_results() {
    let _t = turn();
    let m = Machine::live().unwrap();
    let (a, _) = two_cpus(&m);
    let lat = run_latency(
        &m,
        &LatencyRequest {
            cpu: a,
            policy: MemoryPolicy::Local,
            pattern: ChasePattern::Page { pages_per_group: 2 },
            chains: 2,
            buffer_bytes: 4 << 20,
            thp: Some(Thp::Off),
            hugetlb: false,
            rule: rule(0.02),
        },
    )
    .unwrap();
    roundtrip(&lat);
    let bw = run_bandwidth(
        &m,
        &BandwidthRequest {
            kernel: BandwidthKernel::Triad,
            isa: Isa::detect_best(),
            workers: vec![WorkerPlan {
                cpu: a,
                policy: MemoryPolicy::Interleave {
                    nodes: m.allowed_nodes.clone(),
                    chunk_pages: 1,
                }
                .into(),
                toucher: None,
            }],
            buffer_bytes: 4 << 20,
            thp: Some(Thp::Off),
            rule: rule(0.02),
        },
    )
    .unwrap();
    let back = roundtrip(&bw);
    assert_eq!(
        back.verification.workers[0].buffers[0].pages_by_node,
        bw.verification.workers[0].buffers[0].pages_by_node
    );
    assert_eq!(
        back.verification.workers[0].buffers[0].realization,
        bw.verification.workers[0].buffers[0].realization
    );
}

#[test]
fn matrix() {
    let _t = turn();
    let m = Machine::live().unwrap();
    let r = run_matrix(&m, &matrix_request(rule(0.02)), &mut |_| {}).unwrap();
    let back = roundtrip(&r);
    assert_eq!(back.latency.unwrap().len(), r.cpu_nodes.len());
}

#[test]
fn sizes() {
    let _t = turn();
    let m = Machine::live().unwrap();
    let (a, _) = two_cpus(&m);
    let r = run_sizes(
        &m,
        a,
        &[16 << 10, 1 << 20],
        Isa::detect_best(),
        &rule(0.02),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(roundtrip(&r).points.len(), 2);
}

#[test]
fn scaling() {
    let _t = turn();
    let m = Machine::live().unwrap();
    let r = run_scaling(
        &m,
        BandwidthKernel::Copy,
        Isa::detect_best(),
        4 << 20,
        2,
        &rule(0.02),
        &mut |_| {},
    )
    .unwrap();
    let back = roundtrip(&r);
    assert_eq!(back.model, r.model);
}

#[test]
fn loaded_latency() {
    let _t = turn();
    let m = Machine::live().unwrap();
    let (a, b) = two_cpus(&m);
    if a == b {
        numalab_testkit::skip(format!(
            "loaded_latency needs 2 CPUs (one to chase, one to inject); this process may use {}",
            m.allowed_cpus
        ));
        return;
    }
    let req = LoadedLatencyRequest {
        buffer_bytes: 8 << 20,
        mixes: vec![TrafficMix::ReadWrite {
            reads: 2,
            writes: 1,
        }],
        ladder: Ladder::Steps(vec![
            LoadStep::Rate {
                bytes_per_second: 0.5e9,
            },
            LoadStep::Delay { ns_per_chunk: 1000 },
            LoadStep::Max,
        ]),
        ..loaded_latency_request(a, b, rule(0.05))
    };
    let r = run_loaded_latency(&m, &req, &mut |_| {}).unwrap();
    let back = roundtrip(&r);
    assert_eq!(back.knee_rule, r.knee_rule);
    assert_eq!(back.chase.pages_by_node, r.chase.pages_by_node);
    assert_eq!(back.mixes[0].steps.len(), 3);
}

#[test]
fn c2c() {
    let _t = turn();
    let m = Machine::live().unwrap();
    let (a, b) = two_cpus(&m);
    if a == b {
        numalab_testkit::skip(format!(
            "c2c needs 2 CPUs to pass a cache line between; this process may use {}",
            m.allowed_cpus
        ));
        return;
    }
    let r = run_c2c(
        &m,
        &C2cRequest {
            cpus: vec![a, b],
            figures: C2cFigures::default(),
            rule: rule(0.02),
        },
        &mut |_| {},
    )
    .unwrap();
    let back = roundtrip(&r);
    assert_eq!(back.pairs.len(), 1);
    assert_eq!(back.figures, r.figures);
}

#[test]
fn policies() {
    let _t = turn();
    let m = Machine::live().unwrap();
    let (a, b) = two_cpus(&m);
    let cpus = if a == b { vec![a] } else { vec![a, b] };
    let req = PoliciesRequest {
        // The unpinned worker records migrations (a key only it has).
        workloads: vec![Workload::SingleUnpinned, Workload::NumaAware],
        policies: vec![PolicyColumn::Local, PolicyColumn::OneNode],
        ..policies_request(&m, BandwidthKernel::Copy, cpus, rule(0.02))
    };
    let r = run_policies(&m, &req, &mut |_| {}).unwrap();
    let back = roundtrip(&r);
    assert_eq!(back.cells.len(), 4);
    assert_eq!(back.workloads[0].description, r.workloads[0].description);
    assert!(back.cells[0].run.is_some());
}

#[test]
fn apexmap() {
    let _t = turn();
    let m = Machine::live().unwrap();
    let (a, _) = two_cpus(&m);
    let req = ApexRequest {
        seed: 3,
        ..apex_request(a, rule(0.02))
    };
    let r = run_apexmap(&m, &req, &mut |_| {}).unwrap();
    assert_eq!(roundtrip(&r).points.len(), 4);
}

#[test]
fn sweep() {
    let _t = turn();
    let m = Machine::live().unwrap();
    let r = run_sweep(&m, &sweep_request(&m, rule(0.02)), &mut |_, _, _| {}).unwrap();
    assert_eq!(roundtrip(&r).runs.len(), 1);
}
