//! `numalab migrate` on this host: one memory node, so nothing to move.
//! The refusals (bad input, exit 2) and the one-line failure (exit 1) are
//! checked; the moves themselves are checked in the guests
//! (guest_experiments/migrate.rs).

use crate::common;

use common::{fails, fails_rc, json};

/// The memory nodes of this machine, as `numalab topology --json` lists them.
fn memory_nodes() -> Vec<u64> {
    let v = json(&["topology", "--json"]);
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["memory_bytes"].as_u64().unwrap_or(0) > 0)
        .map(|n| n["os_index"].as_u64().unwrap())
        .collect()
}

#[test]
fn one_memory_node_has_nowhere_to_move_pages() {
    if memory_nodes().len() != 1 {
        numalab_testkit::skip("this machine has several memory nodes (the guests cover it)");
        return;
    }
    let want = "nothing to migrate: this machine has one memory node (0) this process may use; migrate needs two or more";
    fails_rc(&["migrate"], 1, want);
    fails_rc(&["migrate", "--json"], 1, want);
    fails_rc(
        &["migrate", "--matrix", "--size", "4M", "--reps", "1"],
        1,
        want,
    );
    fails_rc(&["migrate", "--thp", "on", "--method", "mbind"], 1, want);
}

#[test]
fn the_same_node_twice_is_refused() {
    fails(
        &["migrate", "--from", "0", "--to", "0"],
        "--from and --to must differ (both are node 0); valid memory nodes: ",
    );
}

#[test]
fn unknown_nodes_are_refused_listing_the_memory_nodes() {
    let nodes = memory_nodes();
    let valid = format!(
        "valid memory nodes: {}",
        if nodes.len() == 1 {
            nodes[0].to_string()
        } else {
            String::new()
        }
    );
    fails(
        &["migrate", "--from", "0", "--to", "999"],
        "--to 999 is not a memory node this process may use; ",
    );
    fails(&["migrate", "--from", "999", "--to", "0"], &valid);
    fails(
        &["migrate", "--from", "999", "--to", "0"],
        "--from 999 is not a memory node this process may use",
    );
}

#[test]
fn bad_options_are_one_line_with_the_valid_choices() {
    fails(
        &["migrate", "--method", "memcpy"],
        "--method: unknown method 'memcpy'; valid: move_pages, mbind, migrate_pages, all",
    );
    fails(
        &["migrate", "--thp", "always"],
        "--thp: unknown THP choice 'always'; valid: on, off",
    );
    fails(
        &["migrate", "--reps", "0"],
        "--reps '0' is not a whole number from 1 to 100",
    );
    fails(
        &["migrate", "--reps", "101"],
        "--reps '101' is not a whole number from 1 to 100",
    );
    fails(
        &["migrate", "--size", "5G"],
        "--size 5 GiB is too large: at most 4 GiB",
    );
    fails(
        &["migrate", "--size", "100"],
        "--size 100 is too small: at least 4 KiB (one page)",
    );
    fails(&["migrate", "--from", "0"], "--to");
    fails(&["migrate", "--to", "1"], "--from");
    fails(
        &["migrate", "--matrix", "--from", "0", "--to", "1"],
        "'--matrix' cannot be used with",
    );
    fails(
        &["migrate", "--from", "-1", "--to", "0"],
        "--from '-1' is not a whole number from 0 to 65535",
    );
}
