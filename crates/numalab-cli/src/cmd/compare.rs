//! `numalab compare A.json B.json`: two results side by side, per metric
//! the two values, the ratio and whether the difference exceeds the
//! measured spread.

use crate::output::out;
use crate::output::{
    folder_of, print_json, print_warnings, refuse_overwriting_input, CliError, CliResult,
    RESULT_SCHEMA_VERSION,
};
use numalab::input::{read_text, InputKind};
use numalab::report::compare::{check_input, compare};
use numalab::report::files::write_atomically;
use numalab::report::views::compare::{render_html, render_text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The first result (`--json` output of any measuring command, or a report's results.json).
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

/// Reads a result through the engine's bounded reader and checks that it
/// is a numalab result of a schema version this numalab knows.
fn load(p: &Path) -> Result<Value, CliError> {
    let text = read_text(p, InputKind::ResultsJson).map_err(|e| CliError::usage(e.to_string()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        CliError::usage(format!(
            "{} is not JSON ({e}); give the --json output of a numalab command",
            p.display()
        ))
    })?;
    check_input(&v, RESULT_SCHEMA_VERSION)
        .map_err(|e| CliError::usage(format!("{} {e}", p.display())))?;
    Ok(v)
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

/// Whether `path` begins like a page this command writes.
fn is_compare_page(path: &Path) -> bool {
    use std::io::Read;
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
    let (va, vb) = (load(&a.a)?, load(&a.b)?);
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
