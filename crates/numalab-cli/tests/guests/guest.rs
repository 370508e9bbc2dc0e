//! Multi-node tests for real: numalab runs inside a QEMU guest (stock Linux
//! 6.12 kernel, TCG) with emulated NUMA nodes (guest/boot.sh). Each machine
//! boots once (the 6.12 ones in guest_experiments.rs, which runs these
//! steps first); its script runs every step and prints the output between
//! markers; each `#[test]` below asserts on one step. Timings inside the guest
//! mean nothing and are never asserted; placement, topology and errors are real.
//!
//! Needs guest/cache/vmlinuz (guest/fetch-kernel.sh, run by the README's
//! test command) and qemu-system-x86_64.

use crate::common;

use common::{boot_with_files, nodes_of, one_line_error, Guest, LazyGuest};
use serde_json::Value;

/// Steps the experiments' Quartet guest runs first, on a fresh machine
/// (guest_experiments.rs boots it once for every file).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    ("topology", "numalab topology --json"),
    ("topology_text", "numalab topology"),
    ("bind", "numalab place --size 16M --mem bind:2 --cpu 0 --json"),
    ("bind_two", "numalab place --size 16M --mem bind:1-2 --cpu 0 --json"),
    ("interleave", "numalab place --size 16M --mem interleave:0-3 --thp off --cpu 0 --json"),
    ("interleave_stride", "numalab place --size 16M --mem interleave:all@4 --cpu 2 --json"),
    ("interleave_thp", "numalab place --size 64M --mem interleave:0-1 --thp on --cpu 0 --json"),
    ("weighted_kernel", "numalab place --size 16M --mem weighted:0=3,1=1 --weighted-impl kernel --cpu 0 --json"),
    ("weighted_emulated", "numalab place --size 16M --mem weighted:0=3,1=1 --weighted-impl emulate --cpu 0 --json"),
    ("weights_after", "cat /sys/kernel/mm/mempolicy/weighted_interleave/node0 /sys/kernel/mm/mempolicy/weighted_interleave/node1"),
    // run's auto: the per-process stripes, no system-wide weight written;
    // the kernel's policy only where the system's weights already are
    // the ones asked for; a static program (busybox) refused.
    ("run_weighted_auto", "numalab run --mem weighted:0=3,1=1 -- stripes advise; rc=$?; echo weights $(cat /sys/kernel/mm/mempolicy/weighted_interleave/node0 /sys/kernel/mm/mempolicy/weighted_interleave/node1) >&2; exit $rc"),
    ("run_weighted_as_set", "echo 3 > /sys/kernel/mm/mempolicy/weighted_interleave/node0 && numalab run --mem weighted:0=3,1=1 -- true; rc=$?; echo 1 > /sys/kernel/mm/mempolicy/weighted_interleave/node0; exit $rc"),
    ("err_weighted_static", "numalab run --mem weighted:0=3,1=1 -- busybox true"),
    ("preferred", "numalab place --size 16M --mem preferred:3 --cpu 0 --json"),
    ("preferred_many", "numalab place --size 16M --mem preferred:1-2 --cpu 0 --json"),
    ("local", "numalab place --size 16M --mem local --cpu 4 --json"),
    ("remote_far", "numalab place --size 16M --mem remote:far --cpu 0 --json"),
    ("remote_near", "numalab place --size 16M --mem remote:near --cpu 6 --json"),
    ("first_touch_mistake", "numalab place --size 16M --mem first-touch --cpu 0 --workers 2,4,6 --json"),
    ("first_touch_right", "numalab place --size 16M --mem first-touch --cpu 5 --json"),
    ("place_text", "numalab place --size 8M --mem interleave:0-1"),
    ("run_membind_verify", "numalab run --membind 2 --cpus node:1 --verify --verify-json /tmp/v.json -- dd if=/dev/zero of=/dev/null bs=32M count=1 && cat /tmp/v.json"),
    ("run_interleave_verify", "numalab run -i 0-3 -C 6 --verify --verify-json /tmp/v.json -- dd if=/dev/zero of=/dev/null bs=32M count=1 && cat /tmp/v.json"),
    ("run_text_verify", "numalab run -N 3 -l --verify -- dd if=/dev/zero of=/dev/null bs=8M count=1"),
    ("run_exit_code", "numalab run --cpus 1 -- sh -c \"exit 7\""),
    ("run_signal", "numalab run -- sh -c \"kill -TERM \\$\\$\"; echo rc=$?"),
    ("run_forward", "numalab run -- sleep 60 & p=$!; sleep 2; kill -TERM $p; wait $p; echo rc=$?"),
    ("verify_pid", "numalab run --membind 1 --cpus 3 -- dd if=/dev/zero of=/dev/null bs=16M count=100000000 & for i in $(seq 90); do d=$(pidof dd) && break; sleep 1; done; sleep 2; numalab verify --pid $d --json; kill $d"),
    ("hugetlb_none_reserved", "numalab place --size 8M --hugetlb --cpu 0"),
    ("hugetlb", "echo 32 > /proc/sys/vm/nr_hugepages && cat /sys/devices/system/node/node*/hugepages/hugepages-2048kB/nr_hugepages >&2 && numalab place --size 16M --hugetlb --mem bind:3 --cpu 0 --json"),
    ("hugetlb_too_big", "numalab place --size 64M --hugetlb --mem bind:3 --cpu 0"),
    ("run_preferred_alias", "numalab run -p 3 -C 0 --verify --verify-json /tmp/v.json -- dd if=/dev/zero of=/dev/null bs=8M count=1 && cat /tmp/v.json"),
    ("add_user", "echo nobody:x:65534:65534:nobody:/tmp:/bin/sh >> /etc/passwd && echo nogroup:x:65534: >> /etc/group"),
    ("err_perm_weights", "su nobody -c \"numalab place --size 4M --mem weighted:0=1,1=1 --weighted-impl kernel\""),
    ("perm_weights_emulated", "su nobody -c \"numalab place --size 4M --mem weighted:0=1,1=1 --weighted-impl emulate --json\""),
    ("err_perm_verify", "su nobody -c \"numalab verify --pid 1\""),
    ("err_unknown_node", "numalab place --size 1M --mem bind:7"),
    ("err_unknown_cpu", "numalab place --size 1M --cpu 12"),
    ("err_too_big", "numalab place --size 1G --mem bind:1 --cpu 0; echo rc=$?"),
    ("err_bad_policy", "numalab place --size 1M --mem scatter:0"),
    ("err_bad_set", "numalab run --cpus 0-3x -- true"),
    ("err_weighted_run_impl", "numalab run --mem weighted:0=3,1=1 --weighted-impl chunks -- true"),
    ("err_no_command", "numalab run --cpus 0 -- /no/such/program"),
];

fn quartet() -> &'static Guest {
    crate::guest_experiments::quartet()
}

#[test]
fn quartet_topology_equals_qemu_spec() {
    let t = quartet().json("topology", 0);
    let nodes = t["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4);
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(n["os_index"], i as u64);
        assert_eq!(n["cpus"], serde_json::json!([2 * i, 2 * i + 1]));
        assert_eq!(n["cpuless"], false);
        let mem = n["memory_bytes"].as_u64().unwrap();
        assert!(mem > 400 << 20 && mem <= 512 << 20, "node {i} memory {mem}");
    }
    let expect = serde_json::json!([
        [10, 16, 16, 22],
        [16, 10, 22, 16],
        [16, 22, 10, 16],
        [22, 16, 16, 10]
    ]);
    assert_eq!(t["distances"]["nodes"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(t["distances"]["matrix"], expect);
    let hops = serde_json::json!([[0, 1, 1, 2], [1, 0, 2, 1], [1, 2, 0, 1], [2, 1, 1, 0]]);
    assert_eq!(t["hops"]["matrix"], hops);
    assert_eq!(t["packages"].as_array().unwrap().len(), 4);
    assert_eq!(t["smt"], 1);
    assert_eq!(t["restricted"], false);
    let text = &quartet().step("topology_text").out;
    assert!(
        text.contains("22"),
        "text view shows the distance matrix:\n{text}"
    );
}

#[test]
fn quartet_bind_puts_every_page_on_the_node() {
    let v = quartet().json("bind", 0);
    assert_eq!(v["pages_total"], 4096);
    assert_eq!(nodes_of(&v), vec![(2, 4096)]);
    assert_eq!(v["untouched_pages"], 0);
    assert_eq!(v["verified"], true);
    let v = quartet().json("bind_two", 0);
    let n = nodes_of(&v);
    assert!(n.iter().all(|(node, _)| *node == 1 || *node == 2), "{n:?}");
    assert_eq!(n.iter().map(|x| x.1).sum::<u64>(), 4096);
}

#[test]
fn quartet_interleave_is_even_and_page_granular() {
    let v = quartet().json("interleave", 0);
    let n = nodes_of(&v);
    assert_eq!(n.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    for (node, c) in &n {
        assert!((1023..=1025).contains(c), "node {node}: {c} pages");
    }
    assert_eq!(v["run_lengths"]["max"], 1, "THP off: single-page runs");
    assert_eq!(v["thp"], "off");
}

#[test]
fn quartet_interleave_stride_runs_are_exactly_the_chunk() {
    let v = quartet().json("interleave_stride", 0);
    assert_eq!(
        nodes_of(&v),
        vec![(0, 1024), (1, 1024), (2, 1024), (3, 1024)]
    );
    assert_eq!(v["run_lengths"]["min"], 4);
    assert_eq!(v["run_lengths"]["max"], 4);
    assert_eq!(v["run_lengths"]["runs"], 1024);
    assert_eq!(v["realization"]["mechanism"], "chunks");
}

#[test]
fn quartet_thp_turns_interleave_into_huge_runs() {
    let v = quartet().json("interleave_thp", 0);
    assert_eq!(v["thp"], "on");
    // With THP the kernel interleaves 2 MiB pages: runs of 512 base pages.
    assert_eq!(v["run_lengths"]["mode"], 512, "{}", v["run_lengths"]);
    let n = nodes_of(&v);
    assert_eq!(n.len(), 2);
    assert!((n[0].1 as i64 - n[1].1 as i64).abs() <= 512, "{n:?}");
}

#[test]
fn quartet_weighted_interleave_kernel_gives_three_to_one() {
    let v = quartet().json("weighted_kernel", 0);
    assert_eq!(v["realization"]["mechanism"], "kernel-weighted");
    let n = nodes_of(&v);
    assert_eq!(n.len(), 2, "{n:?}");
    let (a, b) = (n[0].1 as i64, n[1].1 as i64);
    assert_eq!(a + b, 4096);
    assert!((a - 3 * b).abs() <= 4, "3:1 within one chunk: {a}:{b}");
    // The sysfs weights were put back after the prefault.
    assert_eq!(
        quartet()
            .step("weights_after")
            .out
            .split_whitespace()
            .collect::<Vec<_>>(),
        vec!["1", "1"]
    );
}

#[test]
fn quartet_run_weighted_changes_no_system_wide_weight_unless_asked() {
    let g = quartet();
    let s = g.step("run_weighted_auto");
    assert_eq!(s.rc, 0, "{}\n{}", s.err, s.out);
    assert!(
        s.err.contains("stripes of pages (3 on 0, 1 on 1)"),
        "{}",
        s.err
    );
    assert!(s.err.contains("weights 1 1"), "{}", s.err);
    assert!(
        !s.err
            .contains("system-wide weighted interleave weights set"),
        "{}",
        s.err
    );
    // 1 MiB in stripes of 3 pages on node 0 and 1 on node 1 (the 16 MiB
    // of the full stripes program took 41 s under TCG).
    let line = s
        .out
        .lines()
        .find(|l| l.starts_with("advise pages"))
        .unwrap_or_default();
    assert_eq!(
        line,
        format!(
            "advise pages 256 nodes 0:192,1:64 runs {}",
            ["3,1"; 64].join(",")
        ),
        "{}",
        s.out
    );
    assert!(s.out.ends_with("advise ok\nfork ok\n"), "{}", s.out);
    // The system's weights already 3 and 1: the kernel's policy, nothing
    // written.
    let s = g.step("run_weighted_as_set");
    assert_eq!(s.rc, 0, "{}", s.err);
    assert!(
        s.err.contains(
            "the kernel's weighted interleave with the system's weights as they are: node0=3 (was 3), node1=1 (was 1) (nothing changed)"
        ),
        "{}",
        s.err
    );
    one_line_error(
        g.step("err_weighted_static"),
        2,
        "is statically linked, so numalab's per-process weighted interleave (stripes laid by the preload library) cannot load into it; --weighted-impl kernel",
    );
}

#[test]
fn quartet_weighted_interleave_emulation_is_exact() {
    let v = quartet().json("weighted_emulated", 0);
    assert_eq!(v["realization"]["mechanism"], "chunks");
    assert_eq!(nodes_of(&v), vec![(0, 3072), (1, 1024)]);
    assert_eq!(
        v["run_lengths"]["histogram"],
        serde_json::json!({"1": 1024, "3": 1024})
    );
}

#[test]
fn quartet_preferred_local_and_remote() {
    let g = quartet();
    assert_eq!(nodes_of(&g.json("preferred", 0)), vec![(3, 4096)]);
    let many = g.json("preferred_many", 0);
    assert_eq!(many["realization"]["mode"], "prefer (many)");
    let n = nodes_of(&many);
    assert!(n.iter().all(|(node, _)| *node == 1 || *node == 2), "{n:?}");
    assert_eq!(n.iter().map(|x| x.1).sum::<u64>(), 4096);
    let local = g.json("local", 0);
    assert_eq!(local["toucher_cpu"], 4);
    assert_eq!(nodes_of(&local), vec![(2, 4096)]);
    // Node 3 is two hops from node 0 in the ring.
    assert_eq!(nodes_of(&g.json("remote_far", 0)), vec![(3, 4096)]);
    // From node 3 the nearest others are 1 and 2 (distance 16): lowest id wins.
    assert_eq!(nodes_of(&g.json("remote_near", 0)), vec![(1, 4096)]);
}

#[test]
fn quartet_first_touch_by_main_thread_is_the_classic_mistake() {
    let g = quartet();
    let v = g.json("first_touch_mistake", 0);
    // Workers on nodes 1, 2, 3 did the work, yet every page stayed on node 0.
    assert_eq!(nodes_of(&v), vec![(0, 4096)]);
    let w = v["workers"].as_array().unwrap();
    assert_eq!(w.len(), 3);
    for (wk, cpu) in w.iter().zip([2, 4, 6]) {
        assert_eq!(wk["requested_cpu"], cpu);
        assert_eq!(wk["seen_cpu"], cpu, "worker ran where it was pinned");
    }
    let right = g.json("first_touch_right", 0);
    assert_eq!(nodes_of(&right), vec![(2, 4096)]);
    assert_eq!(right["toucher_cpu"], 5);
}

#[test]
fn quartet_place_text_view() {
    let s = quartet().step("place_text");
    assert_eq!(s.rc, 0, "{}", s.err);
    assert!(s.out.contains("interleave:0-1"), "{}", s.out);
    assert!(s.out.contains("verified"), "{}", s.out);
    assert!(s.out.contains("50.0%"), "{}", s.out);
}

/// Bytes the process allocated itself on `node` (file page cache excluded:
/// it was placed by whoever first read the file).
#[test]
fn quartet_hugetlb_pages_are_placed_and_counted() {
    let g = quartet();
    one_line_error(
        g.step("hugetlb_none_reserved"),
        1,
        "echo 4 > /proc/sys/vm/nr_hugepages",
    );
    let v = g.json("hugetlb", 0);
    assert_eq!(v["page_size"], 2 << 20);
    assert_eq!(v["hugetlb"], true);
    assert_eq!(nodes_of(&v), vec![(3, 8)]);
    // 32 pages reserved over 4 nodes: 8 on node 3, all taken by the 16M buffer above
    // only while it lived; 64M (32 pages) cannot fit on node 3 alone.
    one_line_error(g.step("hugetlb_too_big"), 1, "cannot fit");
}

#[test]
fn quartet_permissions_are_explained() {
    let g = quartet();
    one_line_error(g.step("err_perm_weights"), 1, "use --weighted-impl emulate");
    let v = g.json("perm_weights_emulated", 0);
    assert_eq!(nodes_of(&v), vec![(0, 512), (1, 512)]);
    one_line_error(g.step("err_perm_verify"), 1, "needs the same user or root");
    let v = g.json("run_preferred_alias", 0);
    assert!(
        verify_bytes_on(&v, "3") >= 8 << 20,
        "{}",
        v["private_bytes_by_node"]
    );
    assert!(
        v["process_policy"].as_str().unwrap().starts_with("prefer"),
        "{}",
        v["process_policy"]
    );
}

fn verify_bytes_on(v: &Value, node: &str) -> u64 {
    v["private_bytes_by_node"][node].as_u64().unwrap_or(0)
}

#[test]
fn quartet_run_applies_and_verifies_placement() {
    let g = quartet();
    let v = g.json("run_membind_verify", 0);
    assert!(
        verify_bytes_on(&v, "2") >= 32 << 20,
        "dd's 32 MiB buffer on node 2: {}",
        v["bytes_by_node"]
    );
    for n in ["0", "1", "3"] {
        assert_eq!(
            verify_bytes_on(&v, n),
            0,
            "nothing on node {n}: {}",
            v["private_bytes_by_node"]
        );
    }
    assert_eq!(v["threads"][0]["cpus_allowed"], serde_json::json!([2, 3]));
    assert!(
        v["process_policy"].as_str().unwrap().starts_with("bind:2"),
        "{}",
        v["process_policy"]
    );

    let v = g.json("run_interleave_verify", 0);
    for n in ["0", "1", "2", "3"] {
        let b = verify_bytes_on(&v, n);
        assert!(
            b >= 8 << 20,
            "interleaved dd buffer: node {n} has {b} bytes"
        );
    }
    assert_eq!(v["threads"][0]["cpus_allowed"], serde_json::json!([6]));
    assert_eq!(v["threads"][0]["last_cpu"], 6);

    let s = g.step("run_text_verify");
    assert_eq!(s.rc, 0, "{}", s.err);
    assert!(s.err.contains("placement of 'dd' at exit"), "{}", s.err);
    assert!(s.err.contains("node   3"), "{}", s.err);
}

#[test]
fn quartet_run_propagates_exit_status_and_signals() {
    let g = quartet();
    assert_eq!(g.step("run_exit_code").rc, 7);
    assert!(
        g.step("run_signal").out.contains("rc=143"),
        "{:?}",
        g.step("run_signal")
    );
    assert!(
        g.step("run_forward").out.contains("rc=143"),
        "{:?}",
        g.step("run_forward")
    );
}

#[test]
fn quartet_verify_pid_of_a_running_process() {
    let v = quartet().json("verify_pid", 0);
    assert!(
        verify_bytes_on(&v, "1") >= 16 << 20,
        "{}",
        v["bytes_by_node"]
    );
    assert_eq!(verify_bytes_on(&v, "0"), 0, "{}", v["bytes_by_node"]);
    assert_eq!(v["command"], "verify");
    assert_eq!(v["program"], "dd");
    assert_eq!(v["threads"][0]["cpus_allowed"], serde_json::json!([3]));
    assert_eq!(v["threads"][0]["last_cpu"], 3);
}

#[test]
fn quartet_bad_input_gets_one_line_errors() {
    let g = quartet();
    one_line_error(
        g.step("err_unknown_node"),
        2,
        "node 7 does not exist; valid nodes: 0-3",
    );
    one_line_error(
        g.step("err_unknown_cpu"),
        2,
        "CPU 12 does not exist; valid CPUs: 0-7",
    );
    one_line_error(
        g.step("err_bad_policy"),
        2,
        "valid: first-touch, local, bind:NODES",
    );
    one_line_error(g.step("err_bad_set"), 2, "--cpus");
    one_line_error(
        g.step("err_weighted_run_impl"),
        2,
        "valid: auto, kernel, emulate",
    );
    one_line_error(
        g.step("err_no_command"),
        127,
        "cannot run '/no/such/program'",
    );
    // A strict bind larger than the node: clean refusal, not an OOM kill.
    let s = g.step("err_too_big");
    assert!(s.out.contains("rc=1"), "{s:?}");
    assert!(s.err.contains("cannot fit"), "{}", s.err);
    assert!(!g.console.contains("Out of memory"), "the OOM killer ran");
}

/// Steps the experiments' ring guest runs first.
pub const RING_STEPS: &[(&str, &str)] = &[
    ("topology", "numalab topology --json"),
    ("topology_text", "numalab topology"),
    ("hmat_sysfs", "cat /sys/devices/system/node/node4/access0/initiators/read_latency /sys/devices/system/node/node4/access0/initiators/read_bandwidth"),
    ("bind_cpuless", "numalab place --size 16M --mem bind:4 --cpu 0 --json"),
    ("interleave_all", "numalab place --size 20M --mem interleave:all --cpu 1 --json"),
    ("remote_far", "numalab place --size 8M --mem remote:far --cpu 0 --json"),
    ("run_cpuless", "numalab run --membind 4 --cpus 1 --verify --verify-json /tmp/v.json -- dd if=/dev/zero of=/dev/null bs=16M count=1 && cat /tmp/v.json"),
    ("matrix", "numalab matrix --size 2M --budget-each 0.05 --min-reps 2 --warmup 0 --json"),
    ("bench_bw_cpuless", "numalab bench bandwidth --kernel triad --threads 2 --cpus node:0-1 --mem bind:4 --size 2M --budget-each 0.2 --min-reps 2 --json"),
    ("bench_lat_cpuless", "numalab bench latency --cpu 3 --mem bind:4 --size 2M --budget-each 0.2 --min-reps 2 --json"),
    ("err_bench_cpuless", "numalab bench bandwidth --cpus node:4 --size 1M"),
    ("err_cpu_on_cpuless", "numalab place --size 1M --cpu node:4"),
    ("err_run_on_cpuless", "numalab run --cpus node:4 -- true"),
    ("err_run_nodebind_cpuless", "numalab run -N 4 -- true"),
];

fn ring() -> &'static Guest {
    crate::guest_experiments::ring()
}

#[test]
fn ring_topology_has_the_cpuless_hmat_node() {
    let t = ring().json("topology", 0);
    let nodes = t["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 5);
    for (i, n) in nodes.iter().take(4).enumerate() {
        assert_eq!(n["cpus"], serde_json::json!([i]));
    }
    assert_eq!(nodes[4]["os_index"], 4);
    assert_eq!(nodes[4]["cpuless"], true);
    assert_eq!(nodes[4]["cpus"], serde_json::json!([]));
    assert_eq!(
        t["distances"]["matrix"],
        serde_json::json!([
            [10, 16, 22, 16, 20],
            [16, 10, 16, 22, 26],
            [22, 16, 10, 16, 32],
            [16, 22, 16, 10, 26],
            [20, 26, 32, 26, 10]
        ])
    );
    let attrs = t["memory_attributes"].as_array().unwrap();
    let find = |attr: &str, target: u64| {
        attrs
            .iter()
            .find(|a| {
                a["attribute"] == attr
                    && a["target"] == target
                    && a["initiator_nodes"] == serde_json::json!([0])
            })
            .map(|a| a["value"].as_u64().unwrap())
    };
    assert_eq!(find("latency_ns", 4), Some(250));
    assert_eq!(find("bandwidth_mib_s", 4), Some(8192));
    assert_eq!(find("latency_ns", 0), Some(90));
    assert_eq!(find("bandwidth_mib_s", 0), Some(20480));
    let sys = &ring().step("hmat_sysfs").out;
    assert_eq!(
        sys.split_whitespace().collect::<Vec<_>>(),
        vec!["250", "8192"]
    );
}

#[test]
fn ring_memory_goes_to_the_cpuless_node() {
    let g = ring();
    assert_eq!(nodes_of(&g.json("bind_cpuless", 0)), vec![(4, 4096)]);
    let v = g.json("interleave_all", 0);
    let n = nodes_of(&v);
    assert_eq!(
        n.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    assert!(n.iter().all(|(_, c)| (1023..=1025).contains(c)), "{n:?}");
    // From node 0 the farthest node is 2 (22), farther than CPU-less node 4 (20).
    assert_eq!(nodes_of(&g.json("remote_far", 0)), vec![(2, 2048)]);
    let v = g.json("run_cpuless", 0);
    assert!(
        verify_bytes_on(&v, "4") >= 16 << 20,
        "{}",
        v["bytes_by_node"]
    );
}

#[test]
fn ring_matrix_covers_every_pair_including_the_cpuless_node() {
    let v = ring().json("matrix", 0);
    assert_eq!(v["cpu_nodes"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(v["mem_nodes"], serde_json::json!([0, 1, 2, 3, 4]));
    assert_eq!(v["verified"], true);
    for table in ["latency", "bandwidth"] {
        let rows = v[table]
            .as_array()
            .unwrap_or_else(|| panic!("{table} missing"));
        assert_eq!(rows.len(), 4);
        for (r, row) in rows.iter().enumerate() {
            let row = row.as_array().unwrap();
            assert_eq!(row.len(), 5, "{table} row {r}");
            for (c, cell) in row.iter().enumerate() {
                assert_eq!(cell["cpu_node"], r as u64);
                assert_eq!(cell["mem_node"], c as u64);
                assert!(cell["value"]["median"].as_f64().unwrap() > 0.0);
                let w = &cell["verification"]["workers"][0];
                assert_eq!(
                    w["requested_cpu"], r as u64,
                    "{table} {r}->{c}: thread on node {r}'s CPU"
                );
                for b in w["buffers"].as_array().unwrap() {
                    let pages = b["pages_by_node"].as_object().unwrap();
                    assert_eq!(
                        pages.keys().collect::<Vec<_>>(),
                        vec![&c.to_string()],
                        "{table} {r}->{c}: pages on node {c}"
                    );
                }
            }
            // The local cell is the reference of the NUMA ratio.
            assert_eq!(row[r]["numa_ratio"], 1.0);
        }
    }
}

#[test]
fn ring_bench_results_carry_verified_placement() {
    let g = ring();
    let v = g.json("bench_bw_cpuless", 0);
    assert_eq!(v["verification"]["verified"], true);
    let workers = v["verification"]["workers"].as_array().unwrap();
    assert_eq!(
        workers
            .iter()
            .map(|w| w["requested_cpu"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![0, 1]
    );
    for w in workers {
        assert_eq!(
            w["buffers"].as_array().unwrap().len(),
            3,
            "triad: three buffers"
        );
        for b in w["buffers"].as_array().unwrap() {
            assert_eq!(b["pages_by_node"], serde_json::json!({"4": 512}));
        }
    }
    assert!(v["gbps"]["median"].as_f64().unwrap() > 0.0);
    assert!(v["environment"]["kernel"]
        .as_str()
        .unwrap()
        .starts_with("6.12"));
    let v = g.json("bench_lat_cpuless", 0);
    assert_eq!(
        v["verification"]["workers"][0]["buffers"][0]["pages_by_node"],
        serde_json::json!({"4": 512})
    );
    assert!(v["ns"]["median"].as_f64().unwrap() > 0.0);
    one_line_error(g.step("err_bench_cpuless"), 2, "node 4 is CPU-less");
}

#[test]
fn ring_cpu_sets_on_a_cpuless_node_are_refused() {
    let g = ring();
    one_line_error(g.step("err_cpu_on_cpuless"), 2, "node 4 is CPU-less");
    one_line_error(g.step("err_run_on_cpuless"), 2, "node 4 is CPU-less");
    one_line_error(g.step("err_run_nodebind_cpuless"), 2, "node 4 is CPU-less");
    let text = &g.step("topology_text").out;
    assert!(text.contains('4'), "{text}");
}

const OLD_KERNEL_STEPS: &[(&str, &str)] = &[
    ("uname", "uname -r"),
    (
        "weighted_kernel",
        "numalab place --size 16M --mem weighted:0=3,1=1 --weighted-impl kernel --cpu 0",
    ),
    (
        "weighted_auto",
        "numalab place --size 16M --mem weighted:0=3,1=1 --cpu 0 --json",
    ),
    (
        "run_weighted_kernel",
        "numalab run --mem weighted:0=3,1=1 --weighted-impl kernel -- true",
    ),
    (
        "run_weighted",
        "numalab run --mem weighted:0=3,1=1 -- stripes advise",
    ),
    (
        "preferred_many",
        "numalab place --size 16M --mem preferred:2-3 --cpu 0 --json",
    ),
    (
        "bind",
        "numalab place --size 16M --mem bind:3 --cpu 0 --json",
    ),
    (
        "per_thread",
        "numalab run --counters=page-faults,task-clock --per-thread --counters-json /tmp/pt.json -- thread_tree 256 >/dev/null; rc=$?; cat /tmp/pt.json; exit $rc",
    ),
    (
        "pin_scatter",
        "numalab run --pin scatter --verify --verify-json /tmp/pin.json -- thread_tree 64 >/dev/null; rc=$?; cat /tmp/pin.json; exit $rc",
    ),
];

/// Debian 12's stock kernel (6.1): no weighted interleave (Linux >= 6.9).
/// The same guest runs Open MPI's ranks after these steps (guest_mpi.rs).
fn old_kernel() -> &'static Guest {
    crate::guest(&OLD_KERNEL)
}
pub(crate) static OLD_KERNEL: LazyGuest = LazyGuest::new(|| {
    let steps = [OLD_KERNEL_STEPS, crate::guest_mpi::STEPS].concat();
    boot_with_files(
        "quartet",
        "6.1",
        &steps,
        &["--open-mpi"],
        &[crate::guest_mpi::program()],
    )
});

#[test]
fn old_kernel_lacks_weighted_interleave_and_says_so() {
    let g = old_kernel();
    assert!(
        g.step("uname").out.starts_with("6.1."),
        "{}",
        g.step("uname").out
    );
    one_line_error(
        g.step("weighted_kernel"),
        1,
        "the weighted interleave memory policy needs Linux >= 6.9; this kernel is 6.1.",
    );
    one_line_error(g.step("run_weighted_kernel"), 1, "needs Linux >= 6.9");
    // run's auto emulates it through the preload library, as place does:
    // stripes of 3 pages on node 0 and 1 on node 1 on the program's memory.
    let s = g.step("run_weighted");
    assert_eq!(s.rc, 0, "{}\n{}", s.err, s.out);
    assert!(
        s.err.contains("stripes of pages (3 on 0, 1 on 1)"),
        "{}",
        s.err
    );
    // On 1 MiB (`stripes advise`; the whole stripes program took 23 s
    // of this guest's 57).
    let line = s
        .out
        .lines()
        .find(|l| l.starts_with("advise pages"))
        .unwrap_or_default();
    assert_eq!(
        line,
        format!(
            "advise pages 256 nodes 0:192,1:64 runs {}",
            ["3,1"; 64].join(",")
        ),
        "{}",
        s.out
    );
    assert!(s.out.ends_with("advise ok\nfork ok\n"), "{}", s.out);
    // auto falls back to the exact emulation.
    let v = g.json("weighted_auto", 0);
    assert_eq!(v["realization"]["mechanism"], "chunks");
    assert_eq!(nodes_of(&v), vec![(0, 3072), (1, 1024)]);
    // Everything older still works there.
    assert_eq!(nodes_of(&g.json("bind", 0)), vec![(3, 4096)]);
    let n = nodes_of(&g.json("preferred_many", 0));
    assert!(n.iter().all(|(node, _)| *node == 2 || *node == 3), "{n:?}");
}

/// A guest kernel that dies before init (TCG sometimes trips the kernel's own
/// code patching at boot) is booted again, at most three times in all, and
/// the failure after the last names what died. Here the kernel is told to run
/// an init that does not exist, so every boot dies the same way.
#[test]
fn boot_retries_a_kernel_that_dies_before_init() {
    let out = std::process::Command::new("bash")
        .arg(common::repo_root().join("guest/boot.sh"))
        .args(["--machine", "quartet", "--timeout", "120"])
        .args(["--append", "rdinit=/no/such/init"])
        .output()
        .expect("run guest/boot.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    let retries: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("booting again"))
        .collect();
    assert_eq!(retries.len(), 2, "{stderr}");
    assert!(
        retries[0].contains("Kernel panic") && retries[0].ends_with("(2 of 3)"),
        "{stderr}"
    );
    assert!(retries[1].ends_with("(3 of 3)"), "{stderr}");
    assert_eq!(stdout.matches("Kernel panic").count(), 3, "{stdout}");
    assert!(!stdout.contains("NUMALAB-GUEST-START"), "{stdout}");
    assert!(
        stderr
            .lines()
            .last()
            .unwrap_or("")
            .contains("ended without 'NUMALAB-GUEST-EXIT'"),
        "{stderr}"
    );
}

/// A guest that never reaches its script (a TCG boot that hangs silently
/// after "Booting from ROM" cost a CI run 25 minutes) is stopped after
/// --start-timeout and booted again, three boots in all, then reported as a
/// timeout naming the start. Here init is a shell that waits for input that
/// never comes, so every boot hangs the same way.
#[test]
fn boot_retries_a_guest_that_never_starts_its_script() {
    let started = std::time::Instant::now();
    let out = std::process::Command::new("bash")
        .arg(common::repo_root().join("guest/boot.sh"))
        .args(["--machine", "quartet", "--timeout", "300"])
        .args(["--start-timeout", "10", "--append", "rdinit=/bin/sh"])
        .output()
        .expect("run guest/boot.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    let retries: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.contains("had not started its script after 10s") && l.contains("booting again")
        })
        .collect();
    assert_eq!(retries.len(), 2, "{stderr}");
    assert!(retries[0].ends_with("(2 of 3)"), "{stderr}");
    assert!(retries[1].ends_with("(3 of 3)"), "{stderr}");
    assert!(
        stderr
            .lines()
            .last()
            .unwrap_or("")
            .ends_with("had not started its script after 10s, 3 boots (--start-timeout)"),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("NUMALAB-GUEST-START"),
        "the shell init never starts a script"
    );
    // Three boots of 10 s each, not the whole --timeout.
    assert!(started.elapsed().as_secs() < 200, "{:?}", started.elapsed());
}

/// `run --pin scatter` on four nodes of two CPUs: one CPU of each node in
/// turn (0, 2, 4, 6, then 1, 3, 5, 7), the main thread on the first, the
/// program's four threads on the next four as they start, each checked.
#[test]
fn old_kernel_pins_threads_scattered_over_the_nodes() {
    let r = old_kernel().json("pin_scatter", 0);
    let p = &r["pins"];
    assert_eq!(
        p["cpus"],
        serde_json::json!([0, 2, 4, 6, 1, 3, 5, 7]),
        "{p}"
    );
    assert_eq!(p["verified"], true, "{p}");
    let threads = p["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 5, "{p}");
    assert_eq!(
        (threads[0]["ordinal"].as_u64(), threads[0]["cpu"].as_u64()),
        (Some(0), Some(0))
    );
    let mut created: Vec<u64> = threads[1..]
        .iter()
        .map(|t| t["cpu"].as_u64().unwrap())
        .collect();
    created.sort_unstable();
    assert_eq!(created, [1, 2, 4, 6], "{p}");
    for t in threads {
        assert_eq!(t["ran_on"], t["cpu"], "{t}");
    }
    // thread_tree's child process pins its own thread (child-t).
    assert_eq!(p["other_processes"], 1, "{p}");
}

/// `--per-thread` on Debian's kernel: ptrace follows every thread and the
/// child process, each counted alone.
#[test]
fn old_kernel_counts_each_thread_and_process_alone() {
    let g = old_kernel();
    let s = g.step("per_thread");
    assert_eq!(s.rc, 0, "{}", s.err);
    let r = common::parse_json(&s.out, "per_thread");
    let tasks = r["tasks"]["tasks"].as_array().unwrap();
    let mut names: Vec<&str> = tasks.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "child",
            "child-t",
            "thread_tree",
            "touch-1",
            "touch-2",
            "touch-2b",
            "touch-3"
        ]
    );
    let faults = |name: &str| -> u64 {
        let t = tasks.iter().find(|t| t["name"] == name).unwrap();
        t["events"][0]["value"]
            .as_u64()
            .unwrap_or_else(|| panic!("{t}"))
    };
    for (name, pages) in [
        ("touch-1", 256),
        ("touch-2", 512),
        ("touch-3", 768),
        ("touch-2b", 256),
        ("child-t", 64),
    ] {
        let pf = faults(name);
        assert!(
            (pages..pages + 64).contains(&pf),
            "{name}: {pf} for {pages} pages"
        );
    }
    let sum: u64 = tasks
        .iter()
        .map(|t| t["events"][0]["value"].as_u64().unwrap())
        .sum();
    assert_eq!(r["events"][0]["value"].as_u64(), Some(sum));
}
