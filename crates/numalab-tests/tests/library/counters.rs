//! Counters attached to a launch (`measure::counters::attach` through
//! `PreparedLaunch::before_exec`), for real on this machine: the hook sees
//! the child's pid before its exec, works with tracing, and neither a
//! panicking hook nor a missing program leaves anything waiting.

use numalab::measure::counters::{attach, find, parse_list};
use numalab::placement::launch::{ExitStatus, LaunchPlan};
use numalab::placement::MemoryPolicy;
use numalab::Machine;
use std::sync::{Arc, Mutex};

fn plan() -> LaunchPlan {
    let m = Machine::load(None).unwrap();
    LaunchPlan::new(&m, None, MemoryPolicy::FirstTouch).unwrap()
}

#[test]
fn the_hook_sees_the_child_before_its_exec_and_counters_count_it() {
    let seen = Arc::new(Mutex::new(None));
    let s = Arc::clone(&seen);
    let prepared = plan()
        .verify_at_exit(true)
        .prepare()
        .unwrap()
        .before_exec(move |pid| {
            // Before the exec the child is still a copy of this program.
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
            *s.lock().unwrap() = Some((pid, exe));
        });
    let (prepared, pending) = attach(prepared, parse_list("page-faults,cycles").unwrap(), None);
    let launch = prepared.spawn(&["sh", "-c", "exit 4"]).unwrap();
    let pid = launch.pid();
    let outcome = launch.wait().unwrap();
    assert_eq!(outcome.status, ExitStatus::Exited(4));
    assert!(
        matches!(outcome.placement, Some(Ok(_))),
        "tracing still reads the placement"
    );
    let (hook_pid, exe) = seen.lock().unwrap().clone().unwrap();
    assert_eq!(hook_pid, pid);
    assert_eq!(exe, std::env::current_exe().unwrap());
    let r = pending.report().unwrap();
    assert_eq!(r.events[0].name, "page-faults");
    assert!(r.events[0].value.unwrap() > 0, "{:?}", r.events[0]);
    assert_eq!(r.events[1].name, find("cycles").unwrap().name);
    assert!(r.events[1].value.is_some() || r.events[1].unavailable.is_some());
}

#[test]
fn a_panicking_hook_lets_the_command_run() {
    let prepared = plan()
        .prepare()
        .unwrap()
        .before_exec(|_| panic!("a hook that fails"));
    let outcome = prepared
        .spawn(&["sh", "-c", "exit 5"])
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(outcome.status, ExitStatus::Exited(5));
}

#[test]
fn a_missing_program_is_refused_without_waiting() {
    let (prepared, pending) = attach(
        plan().prepare().unwrap(),
        parse_list("page-faults").unwrap(),
        None,
    );
    let e = match prepared.spawn(&["/nonexistent/numalab-no-such-program"]) {
        Err(e) => e,
        Ok(_) => panic!("spawned a missing program"),
    };
    assert_eq!(e.exit_code(), 127);
    // The events were opened on the child that failed to exec; read, they
    // are zero or unavailable, never a hang.
    let _ = pending.report();
}
