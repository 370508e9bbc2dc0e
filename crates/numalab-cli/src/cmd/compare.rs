//! `numalab compare A.json B.json`: two results side by side, per metric
//! the two values, the ratio and whether the difference exceeds the
//! measured spread.

use crate::output::{print_json, print_warnings, CliError, CliResult, RESULT_SCHEMA_VERSION};
use numalab::input::{read_text, InputKind};
use numalab::report::compare::{check_input, compare};
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

pub fn run(a: Args) -> CliResult {
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
        std::fs::write(h, render_html(&c, &na, &nb))
            .map_err(|e| CliError::failed(format!("writing {}: {e}", h.display())))?;
    }
    if a.json {
        print_json(&c)?;
    } else {
        print!("{}", render_text(&c, &na, &nb));
        print_warnings(&c.warnings);
    }
    Ok(ExitCode::SUCCESS)
}
