//! What numalab's tests share across crates.
//!
//! Rust's test harness has no run-time skip: a test that finds this
//! machine lacks what it needs (a second CPU, a PMU, mount rights) can only
//! return, and is then reported as passed. [`skip`] makes such a return
//! visible: it prints the reason and, when the lane runner
//! (scripts/lanes.py) asks for it through `NUMALAB_SKIP_LOG`, appends one
//! line per skip to that file, so the runner reports the test as skipped,
//! not passed.

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

/// The environment variable naming the folder where measuring tests ask
/// the lane runner for quiet (scripts/lanes.py sets it when it runs the
/// guest lane beside the others).
pub const QUIET_DIR: &str = "NUMALAB_QUIET_DIR";

/// How long [`quiet`] waits for the runner to pause the guests before it
/// measures anyway (and notes that it did).
const QUIET_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Quiet for a measuring test: while the guard lives, the lane runner
/// keeps the guest lane's QEMU guests paused (QMP `stop`, which stops
/// their clocks too) and its other processes stopped, so a measurement on
/// this 2-core host measures the host, not the emulator beside it.
///
/// A request is a file `PID-N.want` in the folder named by
/// `NUMALAB_QUIET_DIR`; the runner answers with `PID-N.granted` once
/// everything is paused, and resumes the guests when no request is left.
/// Without the variable (a test binary run by hand, or lanes one after
/// another) nothing runs beside, and the guard does nothing.
pub fn quiet() -> Quiet {
    let Some(dir) = std::env::var_os(QUIET_DIR) else {
        return Quiet { want: None };
    };
    static REQUESTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = REQUESTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let base = std::path::Path::new(&dir).join(format!("{}-{n}", std::process::id()));
    let want = base.with_extension("want");
    let granted = base.with_extension("granted");
    if let Err(e) = std::fs::write(&want, b"") {
        panic!(
            "cannot ask for quiet in {} ({QUIET_DIR}): {e}",
            want.display()
        );
    }
    let asked = std::time::Instant::now();
    while !granted.exists() {
        if asked.elapsed() > QUIET_WAIT {
            note(&format!(
                "the guests did not pause within {} s of a measurement's request; it measured anyway",
                QUIET_WAIT.as_secs()
            ));
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Quiet {
        want: Some((want, granted)),
    }
}

/// A measuring test's quiet ([`quiet`]); dropping it lets the guests run.
pub struct Quiet {
    want: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl Drop for Quiet {
    fn drop(&mut self) {
        if let Some((want, granted)) = self.want.take() {
            std::fs::remove_file(&want).ok();
            std::fs::remove_file(&granted).ok();
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

    #[test]
    fn quiet_asks_the_runner_waits_for_its_answer_and_withdraws_when_dropped() {
        let dir = std::env::temp_dir().join(format!("numalab-quiet-test-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        std::fs::create_dir_all(&dir).unwrap();
        // The runner's part: answer the first request, after a while.
        let runner = {
            let dir = dir.clone();
            std::thread::spawn(move || loop {
                let wants: Vec<_> = std::fs::read_dir(&dir)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|e| e == "want"))
                    .collect();
                if let Some(w) = wants.first() {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    std::fs::write(w.with_extension("granted"), b"").unwrap();
                    return w.clone();
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            })
        };
        // Only this test sets the variable, and only `quiet` reads it.
        std::env::set_var(QUIET_DIR, &dir);
        let asked = std::time::Instant::now();
        let guard = quiet();
        std::env::remove_var(QUIET_DIR);
        assert!(asked.elapsed() >= std::time::Duration::from_millis(50));
        let want = runner.join().unwrap();
        assert_eq!(
            want.file_name().unwrap().to_string_lossy(),
            format!("{}-0.want", std::process::id())
        );
        assert!(want.exists() && want.with_extension("granted").exists());
        drop(guard);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).ok();
        // Without the variable there is no one to ask.
        assert!(quiet().want.is_none());
    }
}
