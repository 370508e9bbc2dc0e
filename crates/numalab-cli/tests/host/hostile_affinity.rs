//! Hostile CPU choices for c2c under a narrowed affinity mask (taskset):
//! like the other commands, c2c stays inside the CPUs this process may use
//! and names them when asked for others.

use crate::common;

use common::{allowed_cpus, assert_one_line_error, Run};

/// `numalab ARGS` under `taskset -c CPU`, checked to be bad input naming
/// `needles`.
fn refused_on(cpu: &str, args: &[&str], needles: &[&str]) {
    let r = Run::new(args).via(&["taskset", "-c", cpu]).run();
    assert!(
        !r.err.starts_with("taskset:"),
        "taskset could not start numalab on CPU {cpu}: {}",
        r.err
    );
    let what = format!("taskset -c {cpu} numalab {args:?}");
    assert_one_line_error(&what, r.rc, &r.err, 2, needles[0]);
    for n in &needles[1..] {
        assert!(r.err.contains(n), "{what}: '{n}' not in {}", r.err);
    }
    assert_eq!(r.out, "", "{what}: nothing measured, nothing printed");
}

#[test]
fn c2c_stays_inside_the_taskset_mask() {
    let cpus = allowed_cpus();
    let first = cpus[0].to_string();
    let only = format!("may use only CPU {first}");
    // The default and `all` are what the mask allows: one CPU, no pair.
    refused_on(
        &first,
        &["c2c"],
        &["c2c needs at least two CPUs", &only, "taskset"],
    );
    refused_on(
        &first,
        &["c2c", "--cpus", "all", "--json"],
        &["c2c needs at least two CPUs", &only],
    );
    if cpus.len() < 2 {
        numalab_testkit::skip("c2c under taskset: one allowed CPU");
        return;
    }
    let second = cpus[1].to_string();
    let pair = format!("{first},{second}");
    refused_on(
        &first,
        &["c2c", "--cpus", &pair],
        &[
            &format!("--cpus '{pair}' names CPU {second} this process may not use"),
            &format!("allowed: {first}"),
        ],
    );
    refused_on(
        &second,
        &["c2c", "--cpus", &first, "--figures", "modified"],
        &[
            &format!("names CPU {first} this process may not use"),
            &format!("allowed: {second}"),
        ],
    );
}
