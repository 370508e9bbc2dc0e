//! The cluster lane: numalab on a real two-node Slurm cluster (Debian's
//! slurmctld and slurmd, munge, Open MPI with PMIx) that
//! `cluster/with-cluster.sh` starts on this machine, each node in its own
//! network, UTS and mount namespace (cluster/README.md). scripts/lanes.py
//! runs this binary inside it, with node 2's transparent huge pages set to
//! NUMALAB_CLUSTER_NODE2_THP (a value this machine does not have), and
//! stops every daemon afterwards, also when a test fails.
//!
//! Run by hand: `bash cluster/with-cluster.sh cargo test -p numalab-cli
//! --test cluster -- --test-threads=1` (with NUMALAB_CLUSTER_NODE2_THP set).

#[path = "../common/mod.rs"]
mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The cluster's nodes, and node 2's THP setting; a test run outside the
/// cluster fails here, saying how to run it.
fn cluster() -> (Vec<String>, String) {
    let nodes = std::env::var("NUMALAB_CLUSTER_NODES").ok();
    let conf = std::env::var("SLURM_CONF").ok();
    let thp = std::env::var("NUMALAB_CLUSTER_NODE2_THP").ok();
    match (nodes, conf, thp) {
        (Some(n), Some(_), Some(t)) => (n.split(',').map(str::to_string).collect(), t),
        _ => panic!(
            "the cluster tests run on the test cluster: NUMALAB_CLUSTER_NODE2_THP=never bash cluster/with-cluster.sh cargo test -p numalab-cli --test cluster -- --test-threads=1 (scripts/lanes.py runs them so)"
        ),
    }
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_numalab")
}

/// The THP mode in brackets of a sysfs `enabled` line.
fn thp_of(line: &str) -> String {
    line.split('[')
        .nth(1)
        .and_then(|r| r.split(']').next())
        .unwrap_or(line)
        .to_string()
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    // The two nodes are one kernel, and so share /dev/shm: Open MPI's
    // shared-memory transport between ranks of a node once failed to open
    // its segment under load (ENOENT, then SIGSEGV in MPI_Init, seen in a
    // clean-clone run beside the guest lane). Ranks talk over TCP here;
    // what is tested is where numalab places them, not Open MPI's
    // transports.
    cmd.env("OMPI_MCA_btl", "self,tcp");
    let out = cmd.output().expect("start the command");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn node<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("node {name} in {v}"))
}

#[test]
fn a_fleet_of_the_two_nodes_names_the_node_whose_thp_differs() {
    let (nodes, node2_thp) = cluster();
    let here =
        thp_of(&std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap());
    assert_ne!(here, node2_thp, "node 2 must differ from this machine");
    let d = scratch("cluster-fleet");
    let dir = d.join("fleet");
    let (rc, out, err) = run(Command::new(bin()).args([
        "fleet",
        "report",
        "-o",
        dir.to_str().unwrap(),
        "--parts",
        "latency-matrix",
        "--size",
        "64M",
        "--node-budget",
        "3",
        "-N",
        "2",
        "--timeout",
        "300",
        "--json",
    ]));
    // Two nodes that differ and no majority: both undecided (exit 3).
    assert_eq!(rc, 3, "stderr: {err}");
    let mut v: Value = serde_json::from_str(&out).unwrap();
    open_envelope(&mut v, "fleet");
    assert_eq!(
        (v["nodes_total"].as_u64(), v["reported"].as_u64()),
        (Some(2), Some(2))
    );
    let (n1, n2) = (node(&v, &nodes[0]), node(&v, &nodes[1]));
    assert_eq!(n1["settings"]["thp_enabled"], here.as_str());
    assert_eq!(n2["settings"]["thp_enabled"], node2_thp.as_str());
    assert_eq!(n2["verdict"], "undecided");
    let why = format!("transparent huge pages: {node2_thp}, and no value is held by a majority");
    assert!(
        n2["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.as_str().unwrap().starts_with(&why)),
        "{n2}"
    );
    assert!(v["summary"].as_array().unwrap().iter().any(|s| s
        .as_str()
        .unwrap()
        .starts_with("The nodes differ in transparent huge pages:")));
    for n in &nodes {
        assert!(
            dir.join("nodes").join(n).join("results.json").is_file(),
            "{n}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("logs").join(format!("{n}.exit_status")))
                .unwrap()
                .trim(),
            "0"
        );
    }
    // Against node 1 as the baseline, node 2 is the outlier, named by THP.
    let baseline = dir.join("nodes").join(&nodes[0]).join("results.json");
    let (rc, out, err) = run(Command::new(bin()).args([
        "fleet",
        "check",
        dir.to_str().unwrap(),
        "--baseline",
        baseline.to_str().unwrap(),
        "--tolerance",
        "99",
        "--json",
    ]));
    assert_eq!(rc, 3, "{err}");
    let mut c: Value = serde_json::from_str(&out).unwrap();
    open_envelope(&mut c, "fleet");
    assert_eq!(node(&c, &nodes[0])["verdict"], "conforms");
    let n2 = node(&c, &nodes[1]);
    assert_eq!(n2["verdict"], "outlier");
    assert_eq!(
        n2["reasons"],
        serde_json::json!([format!(
            "transparent huge pages: {node2_thp}, the baseline {here}"
        )]),
        "the same machine otherwise; latency within 99%"
    );
}

/// mpi_ranks's lines by rank: (local, host, cpus).
fn ranks_printed(out: &str) -> Vec<(u32, String, String)> {
    mpi_ranks_printed(out)
        .into_iter()
        .map(|(_, _, l, h, c)| (l, h, c))
        .collect()
}

#[test]
fn ranks_under_srun_get_their_share_and_verify_gathers_them() {
    let (nodes, _) = cluster();
    let d = scratch("cluster-ranks");
    let rec = d.join("ranks");
    std::fs::create_dir_all(&rec).unwrap();
    let (rc, out, err) = run(Command::new("srun").args([
        "-N",
        "2",
        "-n",
        "4",
        "--cpu-bind=none",
        bin(),
        "run",
        "--per-rank",
        "node",
        "--verify",
        "--verify-json",
        &format!("{}/rank-{{rank}}.json", rec.display()),
        "--",
        "sh",
        "-c",
        "echo $SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status)",
    ]));
    assert_eq!(rc, 0, "{err}");
    // Each rank's program ran on the one CPU of its share: local rank L
    // on CPU L of its node (one NUMA node of two CPUs: core blocks).
    let mut seen: Vec<String> = out.lines().map(str::to_string).collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            "0 Cpus_allowed_list: 0",
            "1 Cpus_allowed_list: 1",
            "2 Cpus_allowed_list: 0",
            "3 Cpus_allowed_list: 1"
        ],
        "{err}"
    );
    let mut v = json(&["verify", "--ranks", rec.to_str().unwrap(), "--json"]);
    open_envelope(&mut v, "verify");
    let got: Vec<(u64, String, Value)> = v["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].as_u64().unwrap(),
                r["host"].as_str().unwrap().to_string(),
                r["cpus"].clone(),
            )
        })
        .collect();
    let want: Vec<(u64, String, Value)> = (0..4u64)
        .map(|r| (r, nodes[r as usize / 2].clone(), serde_json::json!([r % 2])))
        .collect();
    assert_eq!(got, want);
    assert_eq!(v["problems"], serde_json::json!([]));
    // Two ranks given one CPU by hand are found overlapping.
    let bad = d.join("overlap");
    std::fs::create_dir_all(&bad).unwrap();
    let (rc, _, err) = run(Command::new("srun").args([
        "-N",
        "1",
        "-n",
        "2",
        "--cpu-bind=none",
        bin(),
        "run",
        "--per-rank",
        "node",
        "--cpus",
        "0",
        "--verify",
        "--verify-json",
        &format!("{}/rank-{{rank}}.json", bad.display()),
        "--",
        "true",
    ]));
    assert_eq!(rc, 2, "refused: {err}");
    assert!(
        err.contains("--per-rank chooses each rank's CPUs; give it without --cpus"),
        "{err}"
    );
}

#[test]
fn an_open_mpi_program_is_placed_by_rank_under_srun_and_mpirun_and_profiled_per_rank() {
    let (nodes, _) = cluster();
    let d = scratch("cluster-mpi");
    let exe = mpi_ranks_program(&d);
    let exe = exe.to_str().unwrap();
    let want: Vec<(u32, String, String)> = (0..4u32)
        .map(|r| (r % 2, nodes[r as usize / 2].clone(), (r % 2).to_string()))
        .collect();
    // srun starts the ranks (PMIx); numalab places each before MPI_Init.
    let (rc, out, err) = run(Command::new("srun").args([
        "-N",
        "2",
        "-n",
        "4",
        bin(),
        "run",
        "--per-rank",
        "core-block",
        "--",
        exe,
    ]));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(ranks_printed(&out), want, "{out}");
    // mpirun inside an allocation starts them (Open MPI's own launcher).
    let (rc, out, err) = run(Command::new("salloc")
        .args([
            "-N",
            "2",
            "-n",
            "4",
            "mpirun",
            bin(),
            "run",
            "--per-rank",
            "node",
            "--",
            exe,
        ])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(ranks_printed(&out), want, "{out}");
    // One profile per rank.
    let prof = d.join("profiles");
    let (rc, out, err) = run(Command::new("srun").args([
        "-N",
        "2",
        "-n",
        "4",
        bin(),
        "profile",
        "-o",
        &format!("{}/rank-{{rank}}", prof.display()),
        "--",
        exe,
    ]));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        ranks_printed(&out).len(),
        4,
        "the program's own output: {out}"
    );
    for r in 0..4 {
        let p: Value = serde_json::from_str(
            &std::fs::read_to_string(prof.join(format!("rank-{r}")).join("profile.json")).unwrap(),
        )
        .unwrap();
        assert!(
            p["threads"].as_array().is_some_and(|t| !t.is_empty()),
            "rank {r}: {p}"
        );
        assert_eq!(p["program"], serde_json::json!([exe]), "rank {r}");
    }
    // One view of the four.
    let (rc, out, err) =
        run(Command::new(bin()).args(["profile", "--merge", prof.to_str().unwrap(), "--json"]));
    assert_eq!(rc, 0, "{err}");
    let m: Value = serde_json::from_str(&out).expect("JSON");
    let ranks: Vec<&str> = m["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rank"].as_str().unwrap())
        .collect();
    assert_eq!(ranks, ["0", "1", "2", "3"]);
    // Each rank's host, as its node's kernel names it: both nodes ran ranks.
    let mut hosts: Vec<&str> = m["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap_or_else(|| panic!("{out}")))
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    let mut want_hosts: Vec<&str> = nodes.iter().map(String::as_str).collect();
    want_hosts.sort_unstable();
    assert_eq!(hosts, want_hosts, "{out}");
    let (rc, text, err) =
        run(Command::new(bin()).args(["profile", "--merge", prof.to_str().unwrap()]));
    assert_eq!(rc, 0, "{err}");
    assert!(
        text.lines().nth(1).is_some_and(|l| l.contains("host"))
            && nodes.iter().all(|n| text.contains(n.as_str())),
        "{text}"
    );
    let sites = m["sites"].as_array().unwrap();
    let main_stack = sites
        .iter()
        .find(|s| s["site"] == "stack of the main thread")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        main_stack["ranks"], 4,
        "every rank's main stack is one site"
    );
    let total: u64 = m["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["samples"].as_u64().unwrap())
        .sum();
    let site_samples: u64 = sites.iter().map(|s| s["samples"].as_u64().unwrap()).sum();
    assert!(site_samples <= total, "{site_samples} > {total}");
    assert!(
        m["findings"].as_array().unwrap().is_empty(),
        "one node, nothing remote: {out}"
    );
}

/// A job running in the background until dropped (then cancelled).
struct BackgroundJob {
    child: std::process::Child,
    id: String,
}

impl BackgroundJob {
    /// `srun ARGS` under job name `name`, once its `tasks` tasks have each
    /// created their file `ready/TASK` (the command's last step before it
    /// waits; the folder is made here).
    fn start(name: &str, args: &[&str], ready: &Path, tasks: usize) -> BackgroundJob {
        std::fs::create_dir_all(ready).unwrap();
        let child = Command::new("srun")
            .arg(format!("--job-name={name}"))
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start srun");
        let mut job = BackgroundJob {
            child,
            id: String::new(),
        };
        for _ in 0..600 {
            if job.id.is_empty() {
                let (_, out, _) = run(Command::new("squeue").args(["-h", "-n", name, "-o", "%i"]));
                job.id = out.split_whitespace().next().unwrap_or("").to_string();
            }
            let done = std::fs::read_dir(ready).map_or(0, |d| d.count());
            if !job.id.is_empty() && done == tasks {
                return job;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        panic!("job {name} did not start its {tasks} tasks within 120 s");
    }
}

impl Drop for BackgroundJob {
    fn drop(&mut self) {
        if !self.id.is_empty() {
            let _ = Command::new("scancel").arg(&self.id).status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn verify_slurm_job_judges_each_task_against_its_cpu_bind() {
    let (nodes, _) = cluster();
    let ready = scratch("cluster-verify-slurm").join("ready");
    let script = format!(
        "if [ \"$SLURM_PROCID\" = 3 ]; then taskset -p -c 0 $$ >/dev/null; fi; touch {}/$SLURM_PROCID; exec sleep 120",
        ready.display()
    );
    // Four tasks bound one per CPU; task 3 moves itself to CPU 0.
    let job = BackgroundJob::start(
        "numalab-verify-test",
        &[
            "-N",
            "2",
            "-n",
            "4",
            "--cpu-bind=map_cpu:0,1",
            "--mem-bind=local",
            "sh",
            "-c",
            &script,
        ],
        &ready,
        4,
    );
    let (rc, out, err) = run(Command::new(bin()).args(["verify", "--slurm-job", &job.id]));
    assert_eq!(rc, 3, "{out}{err}");
    let problems: Vec<&str> = out.lines().filter(|l| l.starts_with("problem: ")).collect();
    assert_eq!(
        problems,
        [format!(
            "problem: task 3 (step 0, {}, local 1): may run on CPUs 0, outside CPUs 1 that --cpu-bind=map_cpu:0,1 gives it",
            nodes[1]
        )],
        "{out}"
    );
    // The same from inside the job: its own step left out.
    let (rc, out, err) = run(Command::new("srun").args([
        &format!("--jobid={}", job.id),
        "--overlap",
        "-n",
        "1",
        bin(),
        "verify",
        "--slurm-job",
        "--json",
    ]));
    assert_eq!(rc, 3, "{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    let tasks = v["tasks"].as_array().unwrap();
    let got: Vec<(u64, String, String, String, String)> = tasks
        .iter()
        .map(|t| {
            (
                t["task"].as_u64().unwrap(),
                t["step"].as_str().unwrap().to_string(),
                t["host"].as_str().unwrap().to_string(),
                t["cpus"].to_string(),
                t["bound_cpus"].to_string(),
            )
        })
        .collect();
    let want: Vec<(u64, String, String, String, String)> = [
        (0, &nodes[0], "[0]", "[0]"),
        (1, &nodes[0], "[1]", "[1]"),
        (2, &nodes[1], "[0]", "[0]"),
        (3, &nodes[1], "[0]", "[1]"),
    ]
    .into_iter()
    .map(|(t, h, c, b)| (t, "0".to_string(), h.clone(), c.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want, "{out}");
    for t in tasks {
        assert_eq!(t["mem_bind"], "local", "{t}");
        assert_eq!(t["bound_nodes"], serde_json::json!([0]), "{t}");
        assert!(t["private_bytes_by_node"]["0"].as_u64().unwrap() > 0, "{t}");
    }
    // A job that is not running is refused in one line.
    let (rc, _, err) = run(Command::new(bin()).args(["verify", "--slurm-job", "999999"]));
    assert_eq!(rc, 2, "{err}");
    assert!(err.starts_with("numalab: --slurm-job 999999: "), "{err}");
    drop(job);
}

#[test]
fn scaling_mpi_runs_the_job_packed_with_each_rank_placed_and_says_why_no_unpacked_run() {
    let d = scratch("cluster-scaling-mpi");
    let exe = mpi_ranks_program(&d);
    let (rc, out, err) = run(Command::new(bin()).args([
        "scaling",
        "--mpi",
        "2",
        "--reps",
        "1",
        "--json",
        "--",
        exe.to_str().unwrap(),
    ]));
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("JSON on stdout, the ranks' output on stderr");
    assert_eq!(v["mode"], "mpi");
    let layouts = v["layouts"].as_array().unwrap();
    let names: Vec<&str> = layouts
        .iter()
        .map(|l| l["layout"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["packed", "spread"], "no single rank under MPI");
    let packed = &layouts[0];
    assert_eq!(packed["cpus"], serde_json::json!([[0], [1]]));
    assert_eq!(packed["memory"], serde_json::json!(["bind:0", "bind:0"]));
    assert_eq!(packed["verified"], true, "{packed}");
    // Each rank's record came back: where it was put, and ran.
    let ranks = packed["runs"][0]["copies"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    for (i, r) in ranks.iter().enumerate() {
        assert_eq!(r["cpus_seen"], serde_json::json!([i]), "{r}");
    }
    // This machine has one node: no unpacked run, and no split.
    assert_eq!(layouts[1]["applicable"], false);
    assert_eq!(
        layouts[1]["note"],
        "spread: not applicable: dealing 2 ranks over 1 node with CPUs puts as many on a node as packing them (2)"
    );
    assert!(v["model"].is_null());
    assert_eq!(
        v["model_note"],
        "the split needs the job run unpacked too, and this machine has no unpacked layout (see spread)"
    );
    // The program's own lines went to stderr, one per rank.
    assert_eq!(ranks_printed(&err).len(), 2, "{err}");
    // The records folder numalab made is gone.
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("numalab-scaling-mpi-")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn verify_slurm_job_on_redis_and_node_says_what_it_cannot_read() {
    let (nodes, _) = cluster();
    let d = scratch("cluster-verify-real");
    // Node.js, two tasks on one node bound crosswise, 160 MB each.
    let ready = d.join("node-ready");
    let js = format!(
        "const a = new Float64Array(20e6).fill(1); require('fs').writeFileSync('{}/' + process.env.SLURM_PROCID, ''); setTimeout(() => a, 120000)",
        ready.display()
    );
    let job = BackgroundJob::start(
        "numalab-verify-node",
        &[
            "-N",
            "1",
            "-n",
            "2",
            "--cpu-bind=map_cpu:1,0",
            "node",
            "-e",
            &js,
        ],
        &ready,
        2,
    );
    let (rc, out, err) =
        run(Command::new(bin()).args(["verify", "--slurm-job", &job.id, "--json"]));
    assert_eq!(rc, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let got: Vec<(String, String, String, String)> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert!(
                t["private_bytes_by_node"]["0"].as_u64().unwrap() > 150 << 20,
                "{t}"
            );
            (
                t["program"].as_str().unwrap().to_string(),
                t["cpu_bind"].as_str().unwrap().to_string(),
                t["cpus"].to_string(),
                t["host"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = |c: &str| {
        (
            "node".to_string(),
            "map_cpu:1,0".to_string(),
            c.to_string(),
            nodes[0].clone(),
        )
    };
    assert_eq!(got, [want("[1]"), want("[0]")], "{out}");
    drop(job);
    // redis-server writes its process title over its environment, where
    // Slurm put the binding: shown, and said, not judged.
    let ready = d.join("redis-ready");
    let script = format!(
        "exec redis-server --port 0 --save '' --unixsocket {}/$SLURM_PROCID",
        ready.display()
    );
    let job = BackgroundJob::start(
        "numalab-verify-redis",
        &[
            "-N",
            "2",
            "-n",
            "2",
            "--cpu-bind=cores",
            "sh",
            "-c",
            &script,
        ],
        &ready,
        2,
    );
    let (rc, out, err) = run(Command::new(bin()).args(["verify", "--slurm-job", &job.id]));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(
        out.contains("note: tasks 0, 1: their binding cannot be read, the program wrote over its environment"),
        "{out}"
    );
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() >= 10 && w[5] == "redis-server")
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    for (i, w) in rows.iter().enumerate() {
        // task, step, host, local, pid, program, may run on, --cpu-bind
        assert_eq!(
            (w[0], w[2], w[6], w[7]),
            (&*i.to_string(), nodes[i].as_str(), "0", "unknown"),
            "{out}"
        );
    }
}
