//! The folder `numalab profile -o DIR` writes: which files are its own,
//! how it is claimed (never one that holds files numalab did not write),
//! and the profile's three forms written into it.

use crate::files::{same_file, write_atomically};
use crate::views::plan::{check_text, run_times_text};
use crate::views::profile::render;
use crate::views::profile_compare;
use crate::views::profile_html::render_html;
use numalab::profile::compare::ProfileComparison;
use numalab::profile::plan::{Plan, PlanCheck, RunTimes};
use numalab::profile::Profile;
use numalab::Machine;
use std::path::{Path, PathBuf};

/// What one profiled run writes in its folder.
const RUN_FILES: [&str; 5] = [
    "profile.json",
    "profile.txt",
    "profile.html",
    "records.bin",
    "records.bin.maps",
];

/// What a profile with a plan writes beside its before/ and after/ runs.
const COMPARISON_FILES: [&str; 4] = [
    "compare.txt",
    "compare.json",
    "records.bin",
    "records.bin.maps",
];

/// Every name the command writes in its folder.
const OURS: [&str; 10] = [
    "profile.json",
    "profile.txt",
    "profile.html",
    "records.bin",
    "records.bin.maps",
    "plan.json",
    "compare.txt",
    "compare.json",
    "before",
    "after",
];

/// Why a folder cannot be written.
#[derive(Debug, PartialEq, Eq)]
pub enum DirError {
    /// The user gave the wrong folder (usage).
    Refused(String),
    /// The system refused (a failure).
    Io(String),
}

/// Creates the output folder, refusing one that holds files numalab did
/// not write there, and removes the records of an earlier run (a run
/// appends to them).
pub fn prepare(dir: &Path) -> Result<(), DirError> {
    if dir.exists() && !dir.is_dir() {
        return Err(DirError::Refused(format!(
            "-o {} is a file; give a folder",
            dir.display()
        )));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut foreign: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !OURS.contains(&n.as_str()))
            .collect();
        foreign.sort();
        if !foreign.is_empty() {
            return Err(DirError::Refused(format!(
                "-o {} holds files numalab profile did not write ({}); give a new or empty folder",
                dir.display(),
                foreign.join(", ")
            )));
        }
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| DirError::Io(format!("cannot create {}: {e}", dir.display())))?;
    for f in ["records.bin", "records.bin.maps"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    Ok(())
}

/// The files a profile into `dir` writes or removes: with a plan, its
/// runs' files in before/ and after/ and the comparison; without, one
/// run's and plan.json.
pub fn written_files(dir: &Path, with_plan: bool) -> Vec<PathBuf> {
    if with_plan {
        let runs = ["before", "after"]
            .into_iter()
            .flat_map(|sub| RUN_FILES.iter().map(move |n| dir.join(sub).join(n)));
        runs.chain(COMPARISON_FILES.iter().map(|n| dir.join(n)))
            .collect()
    } else {
        RUN_FILES
            .iter()
            .chain(&["plan.json"])
            .map(|n| dir.join(n))
            .collect()
    }
}

/// Refuses an input (`--plan`, `--machine`) that is one of the files a
/// profile into `dir` writes or removes: numalab never writes over what it
/// reads.
pub fn refuse_inputs(
    dir: &Path,
    with_plan: bool,
    inputs: &[(&str, Option<&Path>)],
) -> Result<(), String> {
    for path in written_files(dir, with_plan) {
        for (opt, input) in inputs {
            if let Some(input) = input.filter(|p| same_file(p, &path)) {
                return Err(format!(
                    "{opt} {} is {}, a file this command writes in -o {}: numalab never writes over an input; move it or choose another -o folder",
                    input.display(),
                    path.display(),
                    dir.display()
                ));
            }
        }
    }
    Ok(())
}

/// Writes the profile's JSON, text and page into `dir`.
pub fn write_profile(dir: &Path, profile: &Profile, m: &Machine) -> Result<(), String> {
    let json = serde_json::to_string_pretty(profile).map_err(|e| e.to_string())?;
    write_all(
        dir,
        &[
            ("profile.json", json + "\n"),
            ("profile.txt", render(profile)),
            ("profile.html", render_html(profile, m)),
        ],
    )
}

/// Writes the plan a profile proposes as `dir/plan.json`, or removes an
/// earlier one when it proposes nothing (a plan needs entries); the path
/// when written.
pub fn write_plan(dir: &Path, plan: &Plan) -> Result<Option<PathBuf>, String> {
    let path = dir.join("plan.json");
    if plan.entries.is_empty() {
        let _ = std::fs::remove_file(&path);
        return Ok(None);
    }
    let json = serde_json::to_string_pretty(plan).map_err(|e| e.to_string())?;
    write_all(dir, &[("plan.json", json + "\n")])?;
    Ok(Some(path))
}

/// The comparison of the profiles without and with a plan, with the
/// plan's check and the timed runs when there are some, as text and JSON,
/// both written into `dir` (compare.txt, compare.json).
pub fn write_comparison(
    dir: &Path,
    c: &ProfileComparison,
    check: Option<&PlanCheck>,
    times: Option<&RunTimes>,
) -> Result<(String, String), String> {
    let mut text = profile_compare::render(c, "without the plan", "with the plan");
    for part in [check.map(check_text), times.map(run_times_text)]
        .into_iter()
        .flatten()
    {
        text = text + "\n" + &part;
    }
    let v = serde_json::json!({ "comparison": c, "plan_check": check, "run_time": times });
    let json = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n";
    write_all(
        dir,
        &[
            ("compare.txt", text.clone()),
            ("compare.json", json.clone()),
        ],
    )?;
    Ok((text, json))
}

/// Writes each named body into `dir`, atomically.
pub fn write_all(dir: &Path, files: &[(&str, String)]) -> Result<(), String> {
    for (name, body) in files {
        let path = dir.join(name);
        write_atomically(&path, body.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("numalab-profile-dir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_folder_with_foreign_files_is_refused_and_one_of_ours_is_reused() {
        let d = scratch("claim");
        prepare(&d).unwrap();
        std::fs::write(d.join("records.bin"), b"old").unwrap();
        std::fs::write(d.join("profile.txt"), b"old").unwrap();
        prepare(&d).unwrap();
        assert!(!d.join("records.bin").exists(), "old records are removed");
        assert!(d.join("profile.txt").exists());
        std::fs::write(d.join("notes.md"), b"mine").unwrap();
        std::fs::write(d.join("data.csv"), b"mine").unwrap();
        let e = prepare(&d).unwrap_err();
        assert_eq!(
            e,
            DirError::Refused(format!(
                "-o {} holds files numalab profile did not write (data.csv, notes.md); give a new or empty folder",
                d.display()
            ))
        );
        assert_eq!(std::fs::read(d.join("notes.md")).unwrap(), b"mine");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_input_the_profile_would_write_over_is_refused() {
        let d = scratch("inputs");
        std::fs::create_dir_all(d.join("after")).unwrap();
        let plan = d.join("plan.json");
        std::fs::write(&plan, b"{}").unwrap();
        let inputs = [("--plan", Some(plan.as_path())), ("--machine", None)];
        // Without a plan the run writes plan.json: refused.
        let e = refuse_inputs(&d, false, &inputs).unwrap_err();
        assert!(e.starts_with("--plan "), "{e}");
        assert!(e.contains("a file this command writes in -o"), "{e}");
        // With a plan, plan.json is not written: allowed; after/profile.json is.
        assert_eq!(refuse_inputs(&d, true, &inputs), Ok(()));
        let theirs = d.join("after/profile.json");
        std::fs::write(&theirs, b"{}").unwrap();
        let inputs = [("--machine", Some(theirs.as_path()))];
        assert!(refuse_inputs(&d, true, &inputs)
            .unwrap_err()
            .starts_with("--machine "));
        assert_eq!(written_files(&d, true).len(), 14);
        let _ = std::fs::remove_dir_all(&d);
    }
}
