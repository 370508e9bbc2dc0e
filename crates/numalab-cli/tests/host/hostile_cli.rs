//! Hostile input to the command line itself: unknown commands and options,
//! option values of the wrong kind, arguments that are not UTF-8.

use crate::common;

use common::hostile::{check_all, Case};

#[test]
fn command_line() {
    let cases = vec![
        Case::new("unknown command", &["frobnicate"]).code(2),
        Case::new("unknown option", &["topology", "--frob"]).code(2),
        Case::new(
            "kernel not in the list",
            &["bench", "bandwidth", "--kernel", "nope"],
        )
        .code(2)
        .says("--kernel")
        .says("triad"),
        Case::new(
            "units not in the list",
            &["topology", "--units", "furlongs"],
        )
        .code(2),
    ];
    check_all("command line", cases);
}
