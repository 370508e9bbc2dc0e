//! Reading numalab's results in a program: a report's results.json (its
//! tables, the same as the CSV files `numalab report` writes), a
//! profile.json, or any command's `--json` output, with values looked up by
//! JSON pointer.

use crate::args;
use crate::handles::{self, Object};
use crate::{guard, numalab_status, Fail, Result};
use numalab::input::{read_text, InputKind};
use numalab_report::csv::Table;
use serde_json::Value;
use std::ffi::{c_char, c_int};
use std::sync::Arc;

/// A loaded result file (opaque). Made by `numalab_results_load`, freed by
/// `numalab_results_free`.
pub struct numalab_results {
    _opaque: [u8; 0],
}

/// What a results handle holds.
pub struct ResultsObject {
    pub kind: String,
    pub value: Value,
    pub tables: Vec<Table>,
}

fn results_of(r: *const numalab_results) -> Result<Arc<ResultsObject>> {
    match handles::get(r as usize, "results", "results")? {
        Object::Results(r) => Ok(r),
        _ => unreachable!("the registry checked the kind"),
    }
}

/// What a numalab JSON document is: `report`, `profile`, or the command
/// that printed it (`command:matrix`).
pub(crate) fn kind_of(v: &Value) -> Result<String> {
    if v["schema"] == numalab_report::results::REPORT_SCHEMA {
        return Ok("report".into());
    }
    if v["regions"].is_array() && v["pages_armed"].is_u64() && v["schema_version"].is_string() {
        return Ok("profile".into());
    }
    if let Some(c) = v["command"].as_str() {
        return Ok(format!("command:{c}"));
    }
    Err(Fail::invalid(
        "not a numalab result: give a report's results.json, a profile.json, or the --json output of a numalab command",
    ))
}

/// Reads a result file: the tables of a report, and the whole document.
pub(crate) fn load(path: &std::path::Path) -> Result<ResultsObject> {
    let text = read_text(path, InputKind::ResultsJson).map_err(|e| Fail::invalid(e.to_string()))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| Fail::invalid(format!("{} is not JSON ({e})", path.display())))?;
    let kind =
        kind_of(&value).map_err(|e| Fail::invalid(format!("{}: {}", path.display(), e.message)))?;
    let tables = if kind == "report" {
        let doc = numalab_report::results::ReportResults::from_json(&text)
            .map_err(|e| Fail::invalid(format!("{}: {e}", path.display())))?;
        numalab_report::tables::tables(&doc)
    } else {
        Vec::new()
    };
    Ok(ResultsObject {
        kind,
        value,
        tables,
    })
}

/// Loads a result file: a report's results.json (`numalab report`), a
/// profile.json (`numalab profile`), or the `--json` output of any
/// numalab command saved to a file. Files are read with a size cap
/// (256 MiB); anything else is `NUMALAB_E_INVALID` saying what it is not.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_results_load(
    path: *const c_char,
    out: *mut *mut numalab_results,
) -> numalab_status {
    guard("numalab_results_load", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { args::out(out, "out") }?;
        *o = std::ptr::null_mut();
        // SAFETY: the caller's guarantee.
        let path = unsafe { args::text(path, "path") }?;
        let r = load(std::path::Path::new(path))?;
        *o = handles::insert(Object::Results(Arc::new(r))) as *mut numalab_results;
        Ok(())
    })
}

/// Frees a result file. NULL is a no-op; one already freed is
/// `NUMALAB_E_HANDLE`.
#[no_mangle]
pub extern "C" fn numalab_results_free(r: *mut numalab_results) -> numalab_status {
    guard("numalab_results_free", || {
        handles::remove(r as usize, "results", "results")
    })
}

/// What the file is: `"report"`, `"profile"` or `"command:NAME"`;
/// NUL-terminated into `(buf, capacity)`, `*needed` (when not NULL) the
/// bytes it needs.
///
/// # Safety
/// `buf` is NULL or valid for `capacity` writes; `needed` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_results_kind(
    r: *const numalab_results,
    buf: *mut c_char,
    capacity: usize,
    needed: *mut usize,
) -> numalab_status {
    guard("numalab_results_kind", || {
        let r = results_of(r)?;
        // SAFETY: the caller's guarantee.
        unsafe { args::write_text(&r.kind, buf, capacity, needed) }
    })
}

/// # Safety
/// `pointer` is NULL or a NUL-terminated string.
unsafe fn lookup(r: &ResultsObject, pointer: *const c_char) -> Result<&Value> {
    // SAFETY: the caller's guarantee.
    let p = unsafe { args::text(pointer, "pointer") }?;
    if !p.is_empty() && !p.starts_with('/') {
        return Err(Fail::invalid(format!(
            "'{p}' is not a JSON pointer: write \"\" for the whole document or /key/0/key"
        )));
    }
    r.value
        .pointer(p)
        .ok_or_else(|| Fail::invalid(format!("the document has nothing at {p}")))
}

/// The number at JSON pointer `pointer` (RFC 6901: `/parts/0/result/x`).
/// Not there, or not a number: `NUMALAB_E_INVALID`.
///
/// # Safety
/// `pointer` is NULL or a NUL-terminated string; `out` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_results_number(
    r: *const numalab_results,
    pointer: *const c_char,
    out: *mut f64,
) -> numalab_status {
    guard("numalab_results_number", || {
        let r = results_of(r)?;
        // SAFETY: the caller's guarantee.
        let o = unsafe { args::out(out, "out") }?;
        // SAFETY: the caller's guarantee.
        let v = unsafe { lookup(&r, pointer) }?;
        *o = v.as_f64().ok_or_else(|| {
            Fail::invalid(format!(
                "the value there is not a number but {}",
                describe(v)
            ))
        })?;
        Ok(())
    })
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The value at JSON pointer `pointer` as text: a string as it is, any
/// other value as JSON; NUL-terminated into `(buf, capacity)`, `*needed`
/// (when not NULL) the bytes it needs.
///
/// # Safety
/// `pointer` is NULL or a NUL-terminated string; `buf` is NULL or valid
/// for `capacity` writes; `needed` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_results_text(
    r: *const numalab_results,
    pointer: *const c_char,
    buf: *mut c_char,
    capacity: usize,
    needed: *mut usize,
) -> numalab_status {
    guard("numalab_results_text", || {
        let r = results_of(r)?;
        // SAFETY: the caller's guarantee.
        let v = unsafe { lookup(&r, pointer) }?;
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        // SAFETY: the caller's guarantee.
        unsafe { args::write_text(&text, buf, capacity, needed) }
    })
}

/// How many entries the array or object at `pointer` has.
///
/// # Safety
/// `pointer` is NULL or a NUL-terminated string; `out` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_results_length(
    r: *const numalab_results,
    pointer: *const c_char,
    out: *mut usize,
) -> numalab_status {
    guard("numalab_results_length", || {
        let r = results_of(r)?;
        // SAFETY: the caller's guarantee.
        let o = unsafe { args::out(out, "out") }?;
        // SAFETY: the caller's guarantee.
        let v = unsafe { lookup(&r, pointer) }?;
        *o = match v {
            Value::Array(a) => a.len(),
            Value::Object(m) => m.len(),
            other => {
                return Err(Fail::invalid(format!(
                    "the value there is {}, not an array or object",
                    describe(other)
                )))
            }
        };
        Ok(())
    })
}

/// How many tables the file has: a report's tables (the CSV files
/// `numalab report` writes, `nodes`, `latency-matrix`...); 0 for other
/// files, read those by JSON pointer.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_results_table_count(
    r: *const numalab_results,
    out: *mut usize,
) -> numalab_status {
    guard("numalab_results_table_count", || {
        let r = results_of(r)?;
        // SAFETY: the caller's guarantee.
        *unsafe { args::out(out, "out") }? = r.tables.len();
        Ok(())
    })
}

fn table_at(r: &ResultsObject, index: usize) -> Result<&Table> {
    r.tables.get(index).ok_or_else(|| {
        Fail::invalid(format!(
            "table {index} does not exist; the file has {} tables",
            r.tables.len()
        ))
    })
}

/// The index of the table named `name`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `index` is NULL or valid for
/// a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_results_table_find(
    r: *const numalab_results,
    name: *const c_char,
    index: *mut usize,
) -> numalab_status {
    guard("numalab_results_table_find", || {
        let r = results_of(r)?;
        // SAFETY: the caller's guarantee.
        let name = unsafe { args::text(name, "name") }?;
        // SAFETY: the caller's guarantee.
        let o = unsafe { args::out(index, "index") }?;
        *o = r
            .tables
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = r.tables.iter().map(|t| t.name.as_str()).collect();
                Fail::invalid(format!(
                    "no table named '{name}'; tables: {}",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ))
            })?;
        Ok(())
    })
}

/// Table number `index`: its name into `(name, capacity)` (as
/// `numalab_results_kind`; NULL with capacity 0 to skip), and its rows and
/// columns (each NULL to skip).
///
/// # Safety
/// `name` is NULL or valid for `capacity` writes; `needed`, `rows` and
/// `columns` are NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_results_table(
    r: *const numalab_results,
    index: usize,
    name: *mut c_char,
    capacity: usize,
    needed: *mut usize,
    rows: *mut usize,
    columns: *mut usize,
) -> numalab_status {
    guard("numalab_results_table", || {
        let r = results_of(r)?;
        let t = table_at(&r, index)?;
        // SAFETY: the caller's guarantee.
        unsafe {
            if let Some(o) = rows.as_mut() {
                *o = t.rows.len();
            }
            if let Some(o) = columns.as_mut() {
                *o = t.header.len();
            }
        }
        if capacity == 0 && needed.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's guarantee.
        unsafe { args::write_text(&t.name, name, capacity, needed) }
    })
}

/// One cell of table `index` as text (as in the CSV file): `row` -1 is the
/// header (the column's name), rows count from 0. NUL-terminated into
/// `(buf, capacity)`, `*needed` (when not NULL) the bytes it needs.
///
/// # Safety
/// `buf` is NULL or valid for `capacity` writes; `needed` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_results_cell(
    r: *const numalab_results,
    index: usize,
    row: c_int,
    column: usize,
    buf: *mut c_char,
    capacity: usize,
    needed: *mut usize,
) -> numalab_status {
    guard("numalab_results_cell", || {
        let r = results_of(r)?;
        let t = table_at(&r, index)?;
        let line = match row {
            -1 => &t.header,
            n if n >= 0 && (n as usize) < t.rows.len() => &t.rows[n as usize],
            n => {
                return Err(Fail::invalid(format!(
                    "row {n} does not exist; table '{}' has rows 0 to {} (-1: the header)",
                    t.name,
                    t.rows.len() as i64 - 1
                )))
            }
        };
        let cell = line.get(column).ok_or_else(|| {
            Fail::invalid(format!(
                "column {column} does not exist; table '{}' has {} columns",
                t.name,
                t.header.len()
            ))
        })?;
        // SAFETY: the caller's guarantee.
        unsafe { args::write_text(cell, buf, capacity, needed) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    #[test]
    fn a_command_result_is_read_by_pointer_and_others_refused() {
        let dir = std::env::temp_dir().join(format!("numalab-capi-results-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("m.json");
        std::fs::write(
            &f,
            r#"{"schema_version":"1.0","command":"matrix","latency_ns":[[90.5,140.0]],"x":"y"}"#,
        )
        .unwrap();
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"a":1}"#).unwrap();
        let path = std::ffi::CString::new(f.to_str().unwrap()).unwrap();
        let badp = std::ffi::CString::new(bad.to_str().unwrap()).unwrap();
        let mut r = std::ptr::null_mut();
        let mut x = 0.0;
        let mut n = 0;
        let mut buf = [0 as c_char; 32];
        // SAFETY: valid pointers.
        unsafe {
            assert_eq!(numalab_results_load(path.as_ptr(), &mut r), NUMALAB_OK);
            assert_eq!(
                numalab_results_kind(r, buf.as_mut_ptr(), 32, std::ptr::null_mut()),
                NUMALAB_OK
            );
            assert_eq!(
                std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().unwrap(),
                "command:matrix"
            );
            assert_eq!(
                numalab_results_number(r, c"/latency_ns/0/1".as_ptr(), &mut x),
                NUMALAB_OK
            );
            assert_eq!(x, 140.0);
            assert_eq!(
                numalab_results_length(r, c"/latency_ns/0".as_ptr(), &mut n),
                NUMALAB_OK
            );
            assert_eq!(n, 2);
            assert_eq!(
                numalab_results_number(r, c"/x".as_ptr(), &mut x),
                NUMALAB_E_INVALID
            );
            assert_eq!(
                numalab_results_number(r, c"/nope".as_ptr(), &mut x),
                NUMALAB_E_INVALID
            );
            assert_eq!(numalab_results_table_count(r, &mut n), NUMALAB_OK);
            assert_eq!(n, 0);
            assert_eq!(numalab_results_free(r), NUMALAB_OK);
            let mut r2 = std::ptr::null_mut();
            assert_eq!(
                numalab_results_load(badp.as_ptr(), &mut r2),
                NUMALAB_E_INVALID
            );
            let e = std::ffi::CStr::from_ptr(numalab_last_error())
                .to_str()
                .unwrap();
            assert!(e.contains("not a numalab result"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
