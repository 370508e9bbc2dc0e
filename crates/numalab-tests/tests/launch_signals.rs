//! Signal forwarding and exit propagation of `placement::launch`, which need
//! a whole process: a forwarded signal sent to this process must find every
//! thread blocking it, so this test runs without the test harness and its
//! threads (`harness = false` in Cargo.toml), and each propagation case runs
//! in a fresh copy of this binary that is meant to die.

use nix::sys::signal::{kill, SigSet, Signal};
use nix::unistd::Pid;
use numalab::placement::launch::{ExitStatus, LaunchOutcome, LaunchPlan};
use numalab::placement::MemoryPolicy;
use numalab::Machine;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::{Duration, Instant};

/// The environment variable that makes this binary run one propagation case.
const CASE: &str = "NUMALAB_LAUNCH_PROPAGATE";

fn plan() -> LaunchPlan {
    LaunchPlan::new(
        &Machine::load(None).unwrap(),
        None,
        MemoryPolicy::FirstTouch,
    )
    .unwrap()
}

/// Launches `sh -c SCRIPT`, which creates its $1 when ready, then sends
/// `sig` to this process once it is.
fn launch_and_signal(script: &str, sig: Signal) -> LaunchOutcome {
    let ready = std::env::temp_dir().join(format!("numalab-launch-ready-{}", std::process::id()));
    let _ = std::fs::remove_file(&ready);
    let launch = plan()
        .prepare()
        .unwrap()
        .spawn(&["sh", "-c", script, "sh", ready.to_str().unwrap()])
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "the child never got ready");
        std::thread::sleep(Duration::from_millis(10));
    }
    kill(Pid::this(), sig).unwrap();
    let o = launch.wait().unwrap();
    let _ = std::fs::remove_file(&ready);
    o
}

fn forwards_a_signal_the_child_handles() {
    let o = launch_and_signal(
        "trap 'exit 42' USR1; : > \"$1\"; while :; do sleep 0.05; done",
        Signal::SIGUSR1,
    );
    assert_eq!(o.status, ExitStatus::Exited(42));
}

fn forwards_a_signal_that_kills_the_child() {
    let o = launch_and_signal(": > \"$1\"; exec sleep 30", Signal::SIGTERM);
    assert_eq!(o.status, ExitStatus::Signaled(libc::SIGTERM));
    // Forwarding is over and the mask restored: nothing stays blocked.
    assert_eq!(SigSet::thread_get_mask().unwrap(), SigSet::empty());
}

/// Runs this binary for one case and returns how it ended.
fn propagated(case: &str) -> std::process::ExitStatus {
    Command::new(std::env::current_exe().unwrap())
        .env(CASE, case)
        .status()
        .unwrap()
}

fn propagates_exit_codes_and_signals() {
    assert_eq!(propagated("exit 7").code(), Some(7));
    assert_eq!(propagated("exit 0").code(), Some(0));
    assert_eq!(propagated("kill -TERM $$").signal(), Some(libc::SIGTERM));
    assert_eq!(propagated("kill -KILL $$").signal(), Some(libc::SIGKILL));
    assert_eq!(propagated("kill -35 $$").signal(), Some(35));
}

/// In the copy: launch `sh -c SCRIPT` and end as it ended.
fn propagate_case(script: &str) -> ! {
    let o = plan()
        .prepare()
        .unwrap()
        .spawn(&["sh", "-c", script])
        .unwrap()
        .wait()
        .unwrap();
    let code = o.status.propagate();
    // Only an exit code gets here; `std::process::exit` needs a number.
    let code = match o.status {
        ExitStatus::Exited(c) => c,
        ExitStatus::Signaled(s) => {
            eprintln!("survived signal {s} ({code:?})");
            100
        }
    };
    std::process::exit(code)
}

fn main() {
    if let Ok(script) = std::env::var(CASE) {
        propagate_case(&script);
    }
    let tests: [(&str, fn()); 3] = [
        (
            "forwards_a_signal_the_child_handles",
            forwards_a_signal_the_child_handles,
        ),
        (
            "forwards_a_signal_that_kills_the_child",
            forwards_a_signal_that_kills_the_child,
        ),
        (
            "propagates_exit_codes_and_signals",
            propagates_exit_codes_and_signals,
        ),
    ];
    for (name, test) in tests {
        test();
        println!("test {name} ... ok");
    }
    println!("launch_signals: {} passed, 0 failed", tests.len());
}
