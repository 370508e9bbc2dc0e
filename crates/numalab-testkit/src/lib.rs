//! What numalab's tests share across crates.
//!
//! Rust's test harness has no run-time skip: a test that finds this
//! machine lacks what it needs (a second CPU, a PMU, mount rights) can only
//! return, and is then reported as passed. [`skip`] makes such a return
//! visible: it prints the reason and, when the lane runner
//! (scripts/lanes.py) asks for it through `NUMALAB_SKIP_LOG`, appends one
//! line per skip to that file, so the runner reports the test as skipped,
//! not passed.

pub mod layering;

use std::fmt::Display;
use std::io::Write;

/// The environment variable naming the file skips are appended to.
pub const SKIP_LOG: &str = "NUMALAB_SKIP_LOG";

/// Records that the calling test skips, and why; the test then returns.
///
/// The test's name is its thread's name (the harness names each test's
/// thread after the test; with `--test-threads=1` the main thread runs
/// them, and the name is then `main`).
pub fn skip(reason: impl Display) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    let line = skip_line(test, &reason.to_string());
    eprintln!("skipped: {test}: {reason}");
    append_line(SKIP_LOG, &line);
}

/// The environment variable naming the file [`note`]s are appended to.
pub const NOTES: &str = "NUMALAB_LANE_NOTES";

/// Prints `note` and, under the lane runner, appends it to the file named
/// by `NUMALAB_LANE_NOTES`, to be shown after the lane whether the test
/// passes or not (a guest's boot time and slowest steps).
pub fn note(note: &str) {
    eprintln!("{note}");
    append_line(NOTES, &format!("{}\n", note.replace('\n', " ")));
}

/// Appends `line` to the file named by the variable `var`, if it is set.
fn append_line(var: &str, line: &str) {
    if let Some(path) = std::env::var_os(var) {
        // One write of a whole line with O_APPEND: tests that write at once
        // in several threads or binaries never interleave their lines.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!("cannot append to {} ({var}): {e}", path.to_string_lossy());
        }
    }
}

/// One line of the skip log: the test, a tab, the reason on one line.
fn skip_line(test: &str, reason: &str) -> String {
    let reason: String = reason
        .chars()
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .collect();
    format!("{test}\t{reason}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_one_line_naming_the_test_and_why() {
        assert_eq!(
            skip_line("a::b", "needs\t2 CPUs\nhas 1"),
            "a::b\tneeds 2 CPUs has 1\n"
        );
    }

    #[test]
    fn skips_append_to_the_log_the_runner_names() {
        let path = std::env::temp_dir().join(format!("numalab-skip-test-{}", std::process::id()));
        std::fs::remove_file(&path).ok();
        // Only this test sets the variable, and reads it back at once.
        std::env::set_var(SKIP_LOG, &path);
        skip("first");
        skip("second");
        std::env::remove_var(SKIP_LOG);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).ok();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].ends_with("skips_append_to_the_log_the_runner_names\tfirst"),
            "{text}"
        );
        assert!(lines[1].ends_with("\tsecond"), "{text}");
    }
}
