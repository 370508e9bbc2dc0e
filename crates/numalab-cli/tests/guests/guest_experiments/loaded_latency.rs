//! `numalab loaded-latency` in the multi-node guest: the chase buffer and the
//! injector buffers land where asked (the CPU-less node 4 included), the
//! injectors run on the CPUs asked, and bad requests are one-line errors.
//! Latencies and rates inside the guest mean nothing and are not asserted.
#![allow(unused_imports)]

use crate::common::{nodes_of, one_line_error};
use crate::guest_experiments::{quartet, ring};
use serde_json::Value;

/// Steps run in the Quartet guest: (unique name, shell command).
pub const QUARTET_STEPS: &[(&str, &str)] = &[(
    "ll_remote",
    "numalab loaded-latency --cpu 0 --mem bind:3 --injector-cpus node:3 --mix 2:1 --rates max --size 8M --budget-each 0.2 --min-reps 2 --json",
)];

/// Steps run in the ring guest with the CPU-less node 4.
pub const RING_STEPS: &[(&str, &str)] = &[
    (
        "ll_cpuless",
        "numalab loaded-latency --cpu 0 --mem bind:4 --injector-cpus 1-2 --mix read --rates 0.02,max --size 8M --budget-each 0.2 --min-reps 2 --json",
    ),
    (
        "ll_cpuless_injector_mem",
        "numalab loaded-latency --cpu 3 --mem bind:4 --injector-cpus 1 --injector-mem bind:2 --mix write-nt --delays 100000,0 --size 4M --budget-each 0.15 --min-reps 2 --json",
    ),
    (
        "ll_err_chase_is_injector",
        "numalab loaded-latency --cpu 0 --injector-cpus 0-1 --size 4M",
    ),
    (
        "ll_err_cpuless_injectors",
        "numalab loaded-latency --cpu 0 --mem bind:4 --injector-cpus node:4 --size 4M",
    ),
];

/// (node, pages) of one verified buffer.
fn buffer_nodes(b: &Value) -> Vec<(u32, u64)> {
    nodes_of(b)
}

/// Every page of the buffer on `node`, the whole buffer touched.
fn all_on(b: &Value, node: u32, what: &str) {
    let n = buffer_nodes(b);
    assert_eq!(n.len(), 1, "{what}: one node: {n:?}");
    assert_eq!(n[0].0, node, "{what}: {n:?}");
    let bytes = n[0].1 * b["page_size"].as_u64().unwrap();
    assert_eq!(bytes, b["bytes"].as_u64().unwrap(), "{what}: every page");
    assert_eq!(b["untouched_pages"], 0, "{what}");
    assert_eq!(b["verified"], true, "{what}: {}", b["problems"]);
}

/// The chase worker then the injectors: requested and seen CPUs.
fn check_workers(v: &Value, chase: u64, injectors: &[u64]) -> Vec<Value> {
    let ws = v["verification"]["workers"].as_array().unwrap().clone();
    assert_eq!(ws.len(), 1 + injectors.len(), "chase + injectors");
    let want: Vec<u64> = std::iter::once(chase)
        .chain(injectors.iter().copied())
        .collect();
    for (w, cpu) in ws.iter().zip(&want) {
        assert_eq!(w["requested_cpu"], *cpu);
        let seen = w["seen_cpus"].as_array().unwrap();
        assert_eq!(seen.len(), 2, "seen at start and end: {w}");
        assert!(seen.iter().all(|c| c == cpu), "CPU {cpu} seen on {seen:?}");
    }
    assert_eq!(
        v["injectors"]["cpus"],
        serde_json::json!(injectors),
        "injector CPUs as requested"
    );
    ws
}

#[test]
fn ring_loaded_latency_targets_the_cpuless_node() {
    let v = ring().json("ll_cpuless", 0);
    assert_eq!(v["command"], "loaded-latency");
    assert_eq!(
        v["verification"]["verified"], true,
        "{}",
        v["verification"]["problems"]
    );
    // The chase buffer: every page on the CPU-less node 4.
    assert_eq!(v["chase"]["cpu"], 0);
    assert_eq!(v["chase"]["node"], 0);
    assert_eq!(v["chase"]["policy"], "bind:4");
    assert_eq!(v["chase"]["pages_by_node"], serde_json::json!({"4": 2048}));
    // Injectors by default load the same node: bound to 4.
    assert_eq!(v["injectors"]["policy"], "bind:4");
    assert_eq!(v["injectors"]["policy_from_chase"], true);
    let ws = check_workers(&v, 0, &[1, 2]);
    all_on(&ws[0]["buffers"][0], 4, "chase buffer");
    for w in &ws[1..] {
        all_on(&w["buffers"][0], 4, "injector buffer");
        assert_eq!(w["buffers"][0]["bytes"], 8 << 20);
    }
    let c = &v["mixes"][0];
    assert_eq!(c["mix"], "read");
    let steps = c["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["load"]["kind"], "rate");
    assert_eq!(steps[1]["step"], "max");
    assert!(
        steps[1]["injected_gbps"].as_f64().unwrap() > 0.0,
        "injectors moved bytes"
    );
    assert_eq!(c["idle"]["injected_gbps"].as_f64(), Some(0.0));
    assert_eq!(steps[1]["per_thread_gbps"].as_array().unwrap().len(), 2);
}

#[test]
fn ring_loaded_latency_places_injectors_where_asked() {
    let v = ring().json("ll_cpuless_injector_mem", 0);
    assert_eq!(
        v["verification"]["verified"], true,
        "{}",
        v["verification"]["problems"]
    );
    assert_eq!(v["chase"]["pages_by_node"], serde_json::json!({"4": 1024}));
    assert_eq!(v["injectors"]["policy"], "bind:2");
    assert_eq!(v["injectors"]["policy_from_chase"], false);
    let ws = check_workers(&v, 3, &[1]);
    all_on(&ws[0]["buffers"][0], 4, "chase buffer");
    all_on(&ws[1]["buffers"][0], 2, "injector buffer on node 2");
    let steps = v["mixes"][0]["steps"].as_array().unwrap();
    assert_eq!(steps[0]["step"], "delay 100000 ns");
    assert_eq!(steps[1]["step"], "delay 0 ns");
    assert_eq!(v["mixes"][0]["mix"], "write-nt");
}

#[test]
fn ring_loaded_latency_refuses_impossible_cpus() {
    one_line_error(
        ring().step("ll_err_chase_is_injector"),
        2,
        "includes the chasing CPU 0",
    );
    one_line_error(ring().step("ll_err_cpuless_injectors"), 2, "CPU-less");
}

#[test]
fn quartet_loaded_latency_with_a_remote_target() {
    let v = quartet().json("ll_remote", 0);
    assert_eq!(
        v["verification"]["verified"], true,
        "{}",
        v["verification"]["problems"]
    );
    assert_eq!(v["chase"]["node"], 0);
    assert_eq!(v["chase"]["pages_by_node"], serde_json::json!({"3": 2048}));
    assert_eq!(v["injectors"]["policy"], "bind:3");
    let ws = check_workers(&v, 0, &[6, 7]);
    all_on(&ws[0]["buffers"][0], 3, "chase buffer two hops away");
    for w in &ws[1..] {
        assert_eq!(w["node"], 3);
        all_on(&w["buffers"][0], 3, "injector buffer");
    }
    let c = &v["mixes"][0];
    assert_eq!(c["mix"], "2:1");
    // 2:1 with ordinary stores: memory bytes are 4/3 of program bytes.
    let s = &c["steps"][0];
    let ratio = s["injected_memory_gbps"].as_f64().unwrap() / s["injected_gbps"].as_f64().unwrap();
    assert!((ratio - 4.0 / 3.0).abs() < 0.02, "{ratio}");
}
