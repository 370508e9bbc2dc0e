//! `numalab compare A.json B.json`: two results side by side, per metric
//! the two values, the ratio and whether the difference exceeds the
//! measured spread; or two profiles (`numalab profile`'s profile.json),
//! region by region.

use crate::output::out;
use crate::output::{
    folder_of, print_json, print_warnings, refuse_overwriting_input, CliError, CliResult,
    RESULT_SCHEMA_VERSION,
};
use numalab::input::{read_text, InputKind};
use numalab::profile::{Profile, SCHEMA_VERSION as PROFILE_SCHEMA_VERSION};
use numalab::report::compare::{check_input, compare};
use numalab::report::files::write_atomically;
use numalab::report::views::compare::{render_html, render_text};
use numalab::report::views::profile_compare;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The first result (`--json` output of any measuring command, a report's results.json, or
    /// a profile.json of `numalab profile`).
    a: PathBuf,
    /// The second result.
    b: PathBuf,
    /// Also write the comparison as a self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// With --html: replace FILE even when it is not a page numalab compare wrote.
    #[arg(long, requires = "html")]
    force: bool,
    /// Only the metrics that differ by more than the measured spread.
    #[arg(long)]
    significant: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Reads a JSON file through the engine's bounded reader.
fn read_json(p: &Path) -> Result<Value, CliError> {
    let text = read_text(p, InputKind::ResultsJson).map_err(|e| CliError::usage(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| {
        CliError::usage(format!(
            "{} is not JSON ({e}); give the --json output of a numalab command",
            p.display()
        ))
    })
}

/// Checks that a result is a numalab result of a schema version this
/// numalab knows.
fn check_result(p: &Path, v: &Value) -> Result<(), CliError> {
    check_input(v, RESULT_SCHEMA_VERSION)
        .map_err(|e| CliError::usage(format!("{} {e}", p.display())))
}

/// Whether a JSON document is a profile (`numalab profile`'s profile.json).
fn is_profile(v: &Value) -> bool {
    v["regions"].is_array() && v["pages_armed"].is_u64() && v["schema_version"].is_string()
}

/// A profile of a schema this numalab reads.
fn profile_of(p: &Path, v: Value) -> Result<Profile, CliError> {
    let version = v["schema_version"].as_str().unwrap_or("").to_string();
    let major = |t: &str| t.split('.').next().map(str::to_string);
    if major(&version) != major(PROFILE_SCHEMA_VERSION) {
        return Err(CliError::usage(format!(
            "{} is a profile of schema {version}; this numalab reads schema {}.x",
            p.display(),
            major(PROFILE_SCHEMA_VERSION).unwrap_or_default()
        )));
    }
    serde_json::from_value(v).map_err(|e| {
        CliError::usage(format!(
            "{} is not a profile numalab can read ({e})",
            p.display()
        ))
    })
}

/// Two profiles, region by region.
fn compare_profiles(a: &Args, va: Value, vb: Value) -> CliResult {
    if a.html.is_some() {
        return Err(CliError::usage(
            "--html compares results; two profiles compare as text or --json (each profile's folder has its own profile.html)",
        ));
    }
    let (pa, pb) = (profile_of(&a.a, va)?, profile_of(&a.b, vb)?);
    let mut c = numalab::profile::compare::compare(&pa, &pb);
    if a.significant {
        c.regions.retain(|r| r.remote.changed == Some(true));
    }
    if a.json {
        print_json(&c)?;
    } else {
        let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
        out!("{}", profile_compare::render(&c, &na, &nb))?;
        print_warnings(&c.warnings)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What the first bytes of every page `numalab compare --html` writes hold.
const PAGE_MARK: &str = "<title>numalab compare</title>";

/// Refuses an `--html` file that cannot or must not be written, before
/// anything is read: one of the inputs, a directory, a file in a missing
/// folder, or an existing file that is not a compare page (unless --force).
fn check_html(a: &Args, out: &Path) -> Result<(), CliError> {
    refuse_overwriting_input("--html", out, &[("A", &a.a), ("B", &a.b)])?;
    let shown = out.display();
    if out.is_dir() {
        return Err(CliError::usage(format!(
            "--html {shown} is a directory; give a file name"
        )));
    }
    let folder = folder_of(out);
    if !folder.is_dir() {
        return Err(CliError::usage(format!(
            "--html {shown}: the folder {} does not exist",
            folder.display()
        )));
    }
    if out.exists() && !a.force && !is_compare_page(out) {
        return Err(CliError::usage(format!(
            "--html {shown} exists and is not a page numalab compare wrote: choose another file, or --force to replace it"
        )));
    }
    Ok(())
}

/// Whether `path` begins like a page this command writes. Only a regular
/// file is opened: opening a FIFO to read it would wait for a writer.
fn is_compare_page(path: &Path) -> bool {
    use std::io::Read;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = Vec::new();
    match std::fs::File::open(path) {
        Ok(f) => {
            // The mark is near the top; a few hundred bytes suffice.
            let _ = f.take(512).read_to_end(&mut head);
        }
        Err(_) => return false,
    }
    String::from_utf8_lossy(&head).contains(PAGE_MARK)
}

pub fn run(a: Args) -> CliResult {
    if let Some(h) = &a.html {
        check_html(&a, h)?;
    }
    let (va, vb) = (read_json(&a.a)?, read_json(&a.b)?);
    match (is_profile(&va), is_profile(&vb)) {
        (true, true) => return compare_profiles(&a, va, vb),
        (false, false) => {}
        (pa, _) => {
            let (profile, other) = if pa { (&a.a, &a.b) } else { (&a.b, &a.a) };
            return Err(CliError::usage(format!(
                "{} is a profile and {} is not: compare two profiles, or two results",
                profile.display(),
                other.display()
            )));
        }
    }
    check_result(&a.a, &va)?;
    check_result(&a.b, &vb)?;
    let mut c = compare(&va, &vb);
    if c.rows.is_empty() {
        return Err(CliError::usage(format!(
            "{} and {} hold no figures to compare (results of measuring commands do)",
            a.a.display(),
            a.b.display()
        )));
    }
    if a.significant {
        c.rows.retain(|r| r.significant == Some(true));
    }
    let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
    if let Some(h) = &a.html {
        write_atomically(h, render_html(&c, &na, &nb).as_bytes())
            .map_err(|e| CliError::failed(format!("cannot write {}: {e}", h.display())))?;
    }
    if a.json {
        print_json(&c)?;
    } else {
        out!("{}", render_text(&c, &na, &nb))?;
        print_warnings(&c.warnings)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_compare_writes_carry_the_mark() {
        let c = compare(&serde_json::json!({}), &serde_json::json!({}));
        let page = render_html(&c, "a.json", "b.json");
        assert!(page[..512.min(page.len())].contains(PAGE_MARK));
    }
}
