//! Launching commands with placement (`placement::launch`), for real on this
//! machine, and launch plans checked against the four-node fixture. Signal
//! forwarding and exit propagation need a whole process: launch_signals.rs.

use nix::sys::signal::SigSet;
use numalab::placement::launch::{ExitStatus, LaunchOutcome, LaunchPlan, FORWARDED};
use numalab::placement::sys::{self, Mode};
use numalab::placement::{remote_node, MemoryPolicy, PlacementError};
use numalab::{IdSet, Machine};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn live() -> Machine {
    Machine::load(None).unwrap()
}

fn quartet() -> Machine {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml");
    Machine::from_xml_file(&p).unwrap()
}

fn ids(s: &str) -> IdSet {
    IdSet::parse_list(s).unwrap()
}

fn plan(m: &Machine, cpus: Option<&str>, policy: &str) -> LaunchPlan {
    LaunchPlan::new(m, cpus.map(ids), MemoryPolicy::parse(m, policy).unwrap()).unwrap()
}

fn run(plan: &LaunchPlan, command: &[&str]) -> LaunchOutcome {
    plan.prepare()
        .unwrap()
        .spawn(command)
        .unwrap()
        .wait()
        .unwrap()
}

/// A scratch file for what a child writes, unique per test.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        Self(std::env::temp_dir().join(format!("numalab-launch-{}-{name}", std::process::id())))
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn read(&self) -> String {
        std::fs::read_to_string(&self.0).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `sh -c SCRIPT` with the scratch file as $1 and returns what it wrote.
fn sh_output(plan: &LaunchPlan, name: &str, script: &str) -> (ExitStatus, String) {
    let out = Scratch::new(name);
    let o = run(plan, &["sh", "-c", script, "sh", out.path()]);
    (o.status, out.read())
}

#[test]
fn exit_codes_and_signals_are_reported() {
    let m = live();
    let p = plan(&m, None, "first-touch");
    let o = run(&p, &["sh", "-c", "exit 7"]);
    assert_eq!(o.status, ExitStatus::Exited(7));
    assert!(o.placement.is_none(), "not traced");
    assert_eq!(run(&p, &["true"]).status, ExitStatus::Exited(0));
    assert_eq!(
        run(&p, &["sh", "-c", "kill -TERM $$"]).status,
        ExitStatus::Signaled(libc::SIGTERM)
    );
    // Real-time signals too (nix's WaitStatus could not say which).
    assert_eq!(
        run(&p, &["sh", "-c", "kill -35 $$"]).status,
        ExitStatus::Signaled(35)
    );
}

#[test]
fn the_cpu_set_holds_in_the_child() {
    let m = live();
    let last = m.allowed_cpus.iter().last().unwrap();
    let p = plan(&m, Some(&last.to_string()), "first-touch");
    let (status, out) = sh_output(
        &p,
        "cpus",
        "grep Cpus_allowed_list /proc/self/status > \"$1\"",
    );
    assert_eq!(status, ExitStatus::Exited(0));
    assert_eq!(out, format!("Cpus_allowed_list:\t{last}\n"));
}

/// Under tracing the child stops right after exec, before the program's
/// first instruction: its CPU mask and memory policy are already there.
#[test]
fn placement_is_in_force_before_the_first_instruction() {
    let m = live();
    let last = m.allowed_cpus.iter().last().unwrap();
    let p = plan(&m, Some(&last.to_string()), "bind:0").verify_at_exit(true);
    let launch = p.prepare().unwrap().spawn(&["true"]).unwrap();
    let status_file = format!("/proc/{}/status", launch.pid());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        let s = std::fs::read_to_string(&status_file).unwrap();
        if s.contains("State:\tt (tracing stop)") || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(status.contains("State:\tt (tracing stop)"), "{status}");
    assert!(
        status.contains(&format!("Cpus_allowed_list:\t{last}\n")),
        "{status}"
    );
    let maps = std::fs::read_to_string(format!("/proc/{}/numa_maps", launch.pid())).unwrap();
    let stack = maps.lines().find(|l| l.contains(" stack ")).unwrap();
    assert_eq!(stack.split_whitespace().nth(1), Some("bind:0"), "{stack}");
    let o = launch.wait().unwrap();
    assert_eq!(o.status, ExitStatus::Exited(0));
}

/// Each policy as this kernel prints the task policy in numa_maps.
#[test]
fn the_memory_policy_holds_in_the_child() {
    let m = live();
    for (policy, mode, printed) in [
        ("bind:0", Mode::Bind, "bind:0"),
        ("preferred:0", Mode::Preferred, "prefer:0"),
        ("interleave:0", Mode::Interleave, "interleave:0"),
        ("local", Mode::Local, "local"),
        ("first-touch", Mode::Default, "default"),
    ] {
        let p = plan(&m, None, policy);
        assert_eq!(p.kernel_policy().0, mode, "{policy}");
        let (status, out) = sh_output(&p, "policy", "grep ' stack ' /proc/self/numa_maps > \"$1\"");
        assert_eq!(status, ExitStatus::Exited(0), "{policy}");
        assert_eq!(
            out.split_whitespace().nth(1),
            Some(printed),
            "{policy}: {out}"
        );
    }
}

#[test]
fn tracing_reads_the_placement_at_exit() {
    let m = live();
    let first = m.allowed_cpus.first().unwrap();
    let p = plan(&m, Some(&first.to_string()), "bind:0").verify_at_exit(true);
    let launch = p.prepare().unwrap().spawn(&[
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=16M",
        "count=1",
        "status=none",
    ]);
    let launch = launch.unwrap();
    let pid = launch.pid();
    let o = launch.wait().unwrap();
    assert_eq!(o.status, ExitStatus::Exited(0));
    let placement = o.placement.expect("exit event seen").unwrap();
    assert_eq!(placement.pid, pid);
    assert_eq!(placement.program, "dd");
    assert_eq!(placement.process_policy.as_deref(), Some("bind:0"));
    // dd's 16 MiB block was still mapped: read before the teardown.
    assert!(
        placement
            .private_bytes_by_node
            .get(&0)
            .copied()
            .unwrap_or(0)
            >= 16 << 20,
        "{:?}",
        placement.private_bytes_by_node
    );
    assert!(placement
        .mappings
        .iter()
        .any(|mp| mp.name.ends_with("/dd") && mp.policy == "bind:0"));
    assert_eq!(placement.threads.len(), 1);
    assert_eq!(placement.threads[0].cpus_allowed, IdSet::single(first));
}

#[test]
fn traced_commands_still_get_their_signals() {
    let m = live();
    let p = plan(&m, None, "first-touch").verify_at_exit(true);
    let o = run(
        &p,
        &["sh", "-c", "trap 'exit 4' USR1; kill -USR1 $$; sleep 5"],
    );
    assert_eq!(o.status, ExitStatus::Exited(4));
    assert_eq!(o.placement.unwrap().unwrap().program, "sh");
    // A real-time signal stops the tracee too and must be delivered.
    let o = run(
        &p,
        &["bash", "-c", "trap 'exit 3' 40; kill -40 $$; sleep 5"],
    );
    assert_eq!(o.status, ExitStatus::Exited(3));
    // A deadly signal still shows the exit event, then the death.
    let o = run(&p, &["sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status, ExitStatus::Signaled(libc::SIGTERM));
    assert_eq!(o.placement.unwrap().unwrap().program, "sh");
}

#[test]
fn commands_that_cannot_run() {
    let m = live();
    let p = plan(&m, None, "first-touch");
    let spawn = |cmd: &[&str]| p.prepare().unwrap().spawn(cmd).err().unwrap();
    let e = spawn(&["/no/such/cmd"]);
    assert_eq!(e.exit_code(), 127);
    assert_eq!(
        e.to_string(),
        "cannot run '/no/such/cmd' with cpus {all}, memory first-touch: No such file or directory (os error 2)"
    );
    let e = spawn(&["/etc/passwd"]);
    assert_eq!(e.exit_code(), 126);
    assert_eq!(
        e.to_string(),
        "cannot run '/etc/passwd' with cpus {all}, memory first-touch: Permission denied (os error 13)"
    );
    let e = spawn(&[]);
    assert_eq!(e.exit_code(), 126);
    assert!(e.to_string().ends_with("no command given"), "{e}");
    // What the child fails to apply between fork and exec comes back too.
    let e = plan(&m, Some("4000"), "first-touch")
        .prepare()
        .unwrap()
        .spawn(&["true"])
        .err()
        .unwrap();
    assert_eq!(e.exit_code(), 126);
    assert_eq!(
        e.to_string(),
        "cannot run 'true' with cpus {4000}, memory first-touch: Invalid argument (os error 22)"
    );
}

#[test]
fn the_signal_mask_is_restored_after_the_launch() {
    let m = live();
    let before = SigSet::thread_get_mask().unwrap();
    let launch = plan(&m, None, "first-touch")
        .prepare()
        .unwrap()
        .spawn(&["true"])
        .unwrap();
    let during = SigSet::thread_get_mask().unwrap();
    assert!(FORWARDED.iter().all(|s| during.contains(*s)));
    assert_eq!(launch.wait().unwrap().status, ExitStatus::Exited(0));
    assert_eq!(SigSet::thread_get_mask().unwrap(), before);
    // A failed spawn restores it too.
    let _ = plan(&m, None, "first-touch")
        .prepare()
        .unwrap()
        .spawn(&["/no/such/cmd"]);
    assert_eq!(SigSet::thread_get_mask().unwrap(), before);
}

#[test]
fn plans_on_four_nodes() {
    let m = quartet();
    let p = plan(&m, Some("2-3"), "remote:near");
    assert_eq!(p.to_string(), "cpus {2-3}, memory remote:near");
    let near = remote_node(&m, 1, false).unwrap();
    assert_eq!(p.kernel_policy(), (Mode::Bind, &IdSet::single(near)));
    assert_eq!(p.cpus(), Some(&ids("2-3")));
    assert_eq!(p.policy(), &MemoryPolicy::Remote { far: false });

    let p = plan(&m, None, "interleave:0-3");
    assert_eq!(p.to_string(), "cpus {all}, memory interleave:0-3");
    assert_eq!(p.kernel_policy(), (Mode::Interleave, &ids("0-3")));
    assert_eq!(
        plan(&m, None, "preferred:1-2").kernel_policy(),
        (Mode::PreferredMany, &ids("1-2"))
    );

    let err = |cpus: Option<&str>, policy: &str| -> PlacementError {
        LaunchPlan::new(&m, cpus.map(ids), MemoryPolicy::parse(&m, policy).unwrap()).unwrap_err()
    };
    let remote = "remote placement for run needs the command's CPUs on one node: add --cpus node:N";
    assert!(matches!(err(None, "remote"), PlacementError::Invalid(s) if s == remote));
    assert!(matches!(err(Some("0,2"), "remote:far"), PlacementError::Invalid(s) if s == remote));
    assert!(matches!(
        err(None, "interleave:0-3@2"),
        PlacementError::Invalid(s) if s == "interleave:0-3@2 needs chunk-wise placement of a known buffer, which a whole process does not have; use interleave:NODES (one page at a time) or numalab place"
    ));
    assert!(matches!(
        err(Some(""), "local"),
        PlacementError::Invalid(s) if s == "a command needs at least one CPU to run on"
    ));

    // Weighted interleave is the kernel's, where this kernel has it.
    let weighted = LaunchPlan::new(
        &m,
        None,
        MemoryPolicy::parse(&m, "weighted:0=3,1=1").unwrap(),
    );
    match sys::kernel_supports(Mode::WeightedInterleave) {
        Ok(()) => assert_eq!(
            weighted.unwrap().kernel_policy(),
            (Mode::WeightedInterleave, &ids("0-1"))
        ),
        Err(msg) => assert!(
            matches!(weighted, Err(PlacementError::Unsupported(s)) if s == msg),
            "{msg}"
        ),
    }
}
