//! The report directory: results.json, one CSV per table, report.html and
//! report.txt,
//! each written to a temporary file and renamed into place, so that a
//! report killed while saving still has the previous complete files.

use crate::input::{read_text, InputKind};
use crate::report::csv::tables;
use crate::report::html;
use crate::report::results::ReportResults;
use std::io;
use std::path::{Path, PathBuf};

/// The document's file name in a report directory.
pub const RESULTS_FILE: &str = "results.json";
/// The page's file name in a report directory.
pub const HTML_FILE: &str = "report.html";
/// The plain-text report's file name in a report directory.
pub const TEXT_FILE: &str = "report.txt";

fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.partial"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Writes results.json, the CSVs, report.html and report.txt into `dir`
/// (created if needed); returns the paths written.
pub fn write_dir(dir: &Path, doc: &ReportResults) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let json = serde_json::to_string_pretty(doc).map_err(io::Error::other)?;
    let p = dir.join(RESULTS_FILE);
    write_atomically(&p, json.as_bytes())?;
    written.push(p);
    for t in tables(doc) {
        let p = dir.join(t.file_name());
        write_atomically(&p, t.to_csv().as_bytes())?;
        written.push(p);
    }
    let p = dir.join(HTML_FILE);
    write_atomically(&p, html::render(doc).as_bytes())?;
    written.push(p);
    let p = dir.join(TEXT_FILE);
    write_atomically(&p, crate::report::text::render(doc).as_bytes())?;
    written.push(p);
    Ok(written)
}

/// Reads `dir/results.json` (a regular file of at most
/// [`crate::input::RESULTS_JSON_MAX_BYTES`]).
pub fn read_dir(dir: &Path) -> Result<ReportResults, String> {
    let p = dir.join(RESULTS_FILE);
    let text = read_text(&p, InputKind::ResultsJson).map_err(|e| e.to_string())?;
    ReportResults::from_json(&text).map_err(|e| format!("{}: {e}", p.display()))
}
