//! MPI ranks placed by `numalab run --per-rank` under Open MPI's own
//! launcher, inside the Quartet guest (4 NUMA nodes of 2 CPUs, one socket
//! each): `mpirun -np 4 numalab run --per-rank node -- mpi_ranks` must give
//! rank r NUMA node r's CPUs and memory, and `-np 8 ... core-block` rank r
//! CPU r. The cluster lane tests the same program on two one-node machines
//! (tests/cluster/main.rs); only here do a node's ranks have several NUMA
//! nodes to be spread over.
//!
//! The steps run in the 6.1 guest (guest.rs `OLD_KERNEL`, Debian 12's own
//! kernel, the shortest guest of the lane), booted with guest/boot.sh
//! `--open-mpi`: the host's mpirun with its components, help texts and
//! PMIx, /dev/shm, the loopback up, and plm `isolated` (mpirun forks the
//! ranks itself; the guest has no ssh). The ranks talk through Open MPI's
//! default transports (shared memory on one machine).

use crate::common;

use common::Guest;
use serde_json::{json, Value};
use std::path::PathBuf;

/// The MPI steps (run after the 6.1 guest's own).
pub const STEPS: &[(&str, &str)] = &[
    // As a user types it: Open MPI's default for more than 2 ranks (map
    // and bind by socket) would give these CPUs too, on this machine of
    // one node per socket; the memory binding is numalab's alone, and the
    // core-block step below gives CPUs Open MPI's binding does not.
    (
        "mpi_node",
        "mkdir -p /tmp/mpi-node && mpirun -np 4 numalab run --per-rank node --verify --verify-json /tmp/mpi-node/rank-{rank}.json -- mpi_ranks",
    ),
    ("mpi_node_ranks", "numalab verify --ranks /tmp/mpi-node --json"),
    ("mpi_node_records", "cat /tmp/mpi-node/rank-*.json"),
    // 8 ranks, one core each: Open MPI alone binds rank r to socket r % 4
    // (2 CPUs); numalab moves it to CPU r.
    (
        "mpi_core_block",
        "mkdir -p /tmp/mpi-cb && mpirun -np 8 numalab run --per-rank core-block --verify --verify-json /tmp/mpi-cb/rank-{rank}.json -- mpi_ranks",
    ),
    ("mpi_core_block_ranks", "numalab verify --ranks /tmp/mpi-cb --json"),
    // The same job packed (two ranks a node) and unpacked (one a node),
    // each rank placed by map: and its record read back; times mean
    // nothing here, placements do.
    (
        "mpi_scaling",
        "numalab scaling --mpi 4 --reps 1 --json -- mpi_ranks",
    ),
    // One profile per rank (Open MPI binds rank r to socket r, node r, by
    // itself for more than 2 ranks), then one view of the four.
    (
        "mpi_profile",
        "mpirun -np 4 numalab profile -o /tmp/mpi-prof/rank-{rank} -- mpi_ranks",
    ),
    ("mpi_merge", "numalab profile --merge /tmp/mpi-prof --json"),
];

/// `/bin/mpi_ranks` in the guest.
pub fn program() -> PathBuf {
    static P: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("programs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        common::mpi_ranks_program(&dir)
    })
    .clone()
}

fn guest() -> &'static Guest {
    crate::guest(&crate::guest::OLD_KERNEL)
}

/// `verify --ranks --json`'s ranks as (rank, host, cpus, nodes,
/// private bytes by node), with its problems checked empty.
fn gathered(g: &Guest, step: &str) -> Vec<(u64, String, Value, Value, Value)> {
    let mut v = g.json(step, 0);
    common::open_envelope(&mut v, "verify");
    assert_eq!(v["problems"], json!([]), "{v}");
    v["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].as_u64().unwrap(),
                r["host"].as_str().unwrap().to_string(),
                r["cpus"].clone(),
                r["nodes"].clone(),
                r["private_bytes_by_node"].clone(),
            )
        })
        .collect()
}

/// Every rank's own memory (anon, heap, stack: 1.9 MiB each in the
/// guest, Open MPI's buffers among it) on its node alone.
fn memory_on(by_node: &Value, node: u64) {
    let m = by_node.as_object().unwrap();
    assert_eq!(
        m.keys().collect::<Vec<_>>(),
        vec![&node.to_string()],
        "{by_node}"
    );
    assert!(
        m[&node.to_string()].as_u64().unwrap() > 1 << 20,
        "{by_node}"
    );
}

#[test]
fn open_mpi_ranks_under_mpirun_get_one_numa_node_each_and_their_memory_there() {
    let g = guest();
    let s = g.step("mpi_node");
    assert_eq!(s.rc, 0, "{}\n{}", s.err, s.out);
    let want: Vec<_> = (0..4u32)
        .map(|r| {
            (
                r,
                4,
                r,
                "numalab-guest".to_string(),
                format!("{}-{}", 2 * r, 2 * r + 1),
            )
        })
        .collect();
    assert_eq!(common::mpi_ranks_printed(&s.out), want, "{}", s.out);
    let got = gathered(g, "mpi_node_ranks");
    assert_eq!(got.len(), 4, "{got:?}");
    for (r, (rank, host, cpus, nodes, mem)) in got.iter().enumerate() {
        let r = r as u64;
        assert_eq!(
            (*rank, host.as_str(), cpus, nodes),
            (r, "numalab-guest", &json!([2 * r, 2 * r + 1]), &json!([r])),
            "{got:?}"
        );
        memory_on(mem, r);
    }
    // Each rank's record: Open MPI's variables named the rank, and the
    // rank's process ran bound to its node.
    let records = &g.step("mpi_node_records").out;
    let mut seen: Vec<(u64, String, String, String)> = serde_json::Deserializer::from_str(records)
        .into_iter::<Value>()
        .map(|v| {
            let v = v.expect("a rank's --verify-json");
            (
                v["rank"]["rank"].as_u64().unwrap(),
                v["rank"]["source"].as_str().unwrap().to_string(),
                v["rank"]["label"].as_str().unwrap().to_string(),
                v["process_policy"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    let want: Vec<_> = (0..4u64)
        .map(|r| {
            (
                r,
                "Open MPI (OMPI_COMM_WORLD_LOCAL_RANK)".to_string(),
                format!("NUMA node {r}"),
                format!("bind:{r}"),
            )
        })
        .collect();
    assert_eq!(seen, want);
}

#[test]
fn eight_open_mpi_ranks_in_core_blocks_get_one_cpu_each_not_open_mpis_socket() {
    let g = guest();
    let s = g.step("mpi_core_block");
    assert_eq!(s.rc, 0, "{}\n{}", s.err, s.out);
    let want: Vec<_> = (0..8u32)
        .map(|r| (r, 8, r, "numalab-guest".to_string(), r.to_string()))
        .collect();
    assert_eq!(common::mpi_ranks_printed(&s.out), want, "{}", s.out);
    let got = gathered(g, "mpi_core_block_ranks");
    assert_eq!(got.len(), 8, "{got:?}");
    for (r, (rank, host, cpus, nodes, mem)) in got.iter().enumerate() {
        let r = r as u64;
        assert_eq!(
            (*rank, host.as_str(), cpus, nodes),
            (r, "numalab-guest", &json!([r]), &json!([r / 2])),
            "{got:?}"
        );
        memory_on(mem, r / 2);
    }
}

#[test]
fn scaling_mpi_packs_two_ranks_a_node_and_deals_one_a_node_each_verified() {
    let g = guest();
    let mut v = g.json("mpi_scaling", 0);
    common::open_envelope(&mut v, "scaling");
    assert_eq!(v["mode"], "mpi");
    let layouts = v["layouts"].as_array().unwrap();
    let get = |name: &str| {
        layouts
            .iter()
            .find(|l| l["layout"] == name)
            .unwrap_or_else(|| panic!("{name} in {v}"))
    };
    let (packed, spread) = (get("packed"), get("spread"));
    assert_eq!(packed["cpus"], json!([[0], [1], [2], [3]]));
    assert_eq!(packed["nodes"], json!([[0], [0], [1], [1]]));
    assert_eq!(
        packed["memory"],
        json!(["bind:0", "bind:0", "bind:1", "bind:1"])
    );
    assert_eq!(packed["per_node"], 2);
    assert_eq!(spread["cpus"], json!([[0], [2], [4], [6]]));
    assert_eq!(spread["nodes"], json!([[0], [1], [2], [3]]));
    assert_eq!(spread["per_node"], 1);
    for l in [packed, spread] {
        assert_eq!(l["verified"], true, "{l}");
        // Every rank's record: the CPU it was given, and only it.
        let ranks = l["runs"][0]["copies"].as_array().unwrap();
        let seen: Vec<&Value> = ranks.iter().map(|r| &r["cpus_seen"]).collect();
        let want: Vec<&Value> = l["cpus"].as_array().unwrap().iter().collect();
        assert_eq!(seen, want, "{l}");
    }
    // The split is fitted from the two ranks-a-node counts, or says why
    // not (guest timings may not follow the model).
    assert!(v["model"].is_object() || v["model_note"].is_string(), "{v}");
}

#[test]
fn merged_profiles_of_four_ranks_show_each_rank_on_its_own_node() {
    let g = guest();
    let s = g.step("mpi_profile");
    assert_eq!(s.rc, 0, "{}\n{}", s.err, s.out);
    let mut v = g.json("mpi_merge", 0);
    common::open_envelope(&mut v, "profile");
    let ranks: Vec<(String, Value)> = v["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].as_str().unwrap().to_string(),
                r["cpu_nodes"].clone(),
            )
        })
        .collect();
    let want: Vec<(String, Value)> = (0..4u64).map(|r| (r.to_string(), json!([r]))).collect();
    assert_eq!(ranks, want, "{v}");
    let sites = v["sites"].as_array().unwrap();
    let main_stack = sites
        .iter()
        .find(|s| s["site"] == "stack of the main thread")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(main_stack["ranks"], 4);
}
