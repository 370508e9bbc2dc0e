//! The report directory: results.json, one CSV per table, report.html and
//! report.txt, each written to a temporary file and renamed into place, so
//! that a report killed while saving, or a full disk, leaves the previous
//! complete files.
//!
//! A directory numalab writes a report into is marked and locked by
//! [`LOCK_FILE`]: [`claim_dir`] refuses a directory holding files numalab
//! did not make (unless forced) and a directory another run is writing.
//! numalab only writes and removes the files it names itself
//! ([`is_own_name`]).

use crate::page;
use crate::results::ReportResults;
use crate::tables::tables;
use numalab::input::{read_text, InputKind};
use numalab::measure::environment::rfc3339_utc;
use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The document's file name in a report directory.
pub const RESULTS_FILE: &str = "results.json";
/// The page's file name in a report directory.
pub const HTML_FILE: &str = "report.html";
/// The plain-text report's file name in a report directory.
pub const TEXT_FILE: &str = "report.txt";
/// The file that marks a directory as numalab's report directory and that a
/// run holds locked (flock) while it writes there; it names that run.
pub const LOCK_FILE: &str = ".numalab-report";

/// Temporary files end so; see [`write_atomically`].
const PARTIAL_SUFFIX: &str = ".partial";

/// The temporary name `path` is written under before it is renamed into
/// place: hidden, in the same directory (a rename within one file system is
/// atomic), and unique to this process.
fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}{PARTIAL_SUFFIX}", std::process::id()))
}

/// Whether `a` and `b` name one file (same device and inode: hard links and
/// symbolic links included). A path that does not exist is no file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename: whatever fails (a full disk, a signal), `path` holds
/// either its old content or all of the new one, never a truncated file.
/// The temporary file is removed when writing fails.
///
/// Atomic replacement is for regular files: a character device or a FIFO
/// given as the output is written in place (a rename would
/// replace the system's /dev/null with a regular file), a FIFO only when
/// a program reads from it (else an error, never a wait), and a socket is
/// refused.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(fd) = own_descriptor(path) {
        return numalab::sys::process::write_to_descriptor(fd, bytes);
    }
    if let Some(why) = output_refusal(path) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    }
    if let Ok(meta) = std::fs::metadata(path) {
        let kind = meta.file_type();
        if !kind.is_file() && !kind.is_dir() {
            return write_in_place(path, bytes, kind);
        }
    }
    let tmp = partial_path(path);
    let written = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        // The data must be on disk before the name points at it, or a crash
        // can leave an empty file under the good name.
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The descriptor `path` names when it is one of this process's own:
/// /dev/stdout, /dev/stderr, /dev/fd/N or /proc/self/fd/N. These links
/// are written through the descriptor itself, where it stands (a
/// redirection to a file keeps what is before; the link is neither
/// followed to its file nor replaced).
pub fn own_descriptor(path: &Path) -> Option<i32> {
    let p = path.to_str()?;
    match p {
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    let n = p
        .strip_prefix("/dev/fd/")
        .or_else(|| p.strip_prefix("/proc/self/fd/"))?;
    let fd: i32 = n.parse().ok()?;
    numalab::sys::process::descriptor_is_open(fd).then_some(fd)
}

/// Why numalab will not write the output file `path`, if it will not: a
/// symbolic link (writing would follow it to a file the user may not mean,
/// renaming over it would replace it), a block device (writing in place
/// would overwrite a disk) or a regular file made read-only (root may
/// rename over it; its owner meant it kept).
pub fn output_refusal(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    if own_descriptor(path).is_some() {
        return None;
    }
    let m = std::fs::symlink_metadata(path).ok()?;
    if m.file_type().is_symlink() {
        let to = std::fs::read_link(path)
            .map(|t| format!(" to {}", t.display()))
            .unwrap_or_default();
        return Some(format!(
            "it is a symbolic link{to}: numalab neither follows nor replaces one; give the file itself"
        ));
    }
    if std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()) {
        return Some(
            "it is a block device (a disk or a partition): numalab writes its results to files, FIFOs and character devices only; choose a file".into(),
        );
    }
    if m.is_file() && m.permissions().mode() & 0o222 == 0 {
        return Some(
            "it is read-only: numalab does not replace a file made read-only; make it writable or choose another file".into(),
        );
    }
    None
}

/// Writes `bytes` into the device or FIFO at `path` (see
/// [`write_atomically`]), without creating, truncating or replacing it.
fn write_in_place(path: &Path, bytes: &[u8], kind: std::fs::FileType) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "it is a socket; give a file, a device or a FIFO",
        ));
    }
    // Non-blocking open: a FIFO nobody reads is an error (ENXIO), not a
    // wait for ever; no controlling terminal is taken from a tty.
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ENXIO) && kind.is_fifo() {
                io::Error::new(
                    e.kind(),
                    "it is a FIFO (named pipe) that no program reads from",
                )
            } else {
                e
            }
        })?;
    // Blocking again for the writes: a reader slower than numalab is
    // waited for.
    numalab::sys::process::set_blocking(std::os::fd::AsFd::as_fd(&f))?;
    f.write_all(bytes)
}

/// Whether `name` is a file numalab writes in a report directory: the
/// document, the page, the text, a CSV table, the lock, or a temporary file
/// of one of them.
pub fn is_own_name(name: &str) -> bool {
    let fixed = |n: &str| {
        n == RESULTS_FILE
            || n == HTML_FILE
            || n == TEXT_FILE
            || n == LOCK_FILE
            || n.ends_with(".csv")
    };
    if fixed(name) {
        return true;
    }
    // `.NAME.PID.partial`
    let Some(inner) = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(PARTIAL_SUFFIX))
    else {
        return false;
    };
    match inner.rsplit_once('.') {
        Some((n, pid)) => {
            !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && n != LOCK_FILE && fixed(n)
        }
        None => false,
    }
}

/// Writes results.json, the CSVs, report.html and report.txt into `dir`
/// (created if needed); returns the paths written. An error names the file.
pub fn write_dir(dir: &Path, doc: &ReportResults) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut put = |name: String, bytes: &[u8]| {
        let p = dir.join(name);
        write_atomically(&p, bytes)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
        written.push(p);
        Ok::<(), io::Error>(())
    };
    let json = serde_json::to_string_pretty(doc).map_err(io::Error::other)?;
    put(RESULTS_FILE.to_string(), json.as_bytes())?;
    for t in tables(doc) {
        put(t.file_name(), t.to_csv().as_bytes())?;
    }
    put(HTML_FILE.to_string(), page::render(doc).as_bytes())?;
    put(TEXT_FILE.to_string(), crate::text::render(doc).as_bytes())?;
    Ok(written)
}

/// Reads `dir/results.json` (a regular file of at most
/// [`numalab::input::RESULTS_JSON_MAX_BYTES`]).
pub fn read_dir(dir: &Path) -> Result<ReportResults, String> {
    let p = dir.join(RESULTS_FILE);
    let text = read_text(&p, InputKind::ResultsJson).map_err(|e| e.to_string())?;
    ReportResults::from_json(&text).map_err(|e| format!("{}: {e}", p.display()))
}

/// Whether `dir` is a report directory numalab made: it has the
/// [`LOCK_FILE`] mark, or (from before the mark existed) a results.json
/// that is a numalab report.
pub fn is_report_dir(dir: &Path) -> bool {
    dir.join(LOCK_FILE).is_file() || (dir.join(RESULTS_FILE).is_file() && read_dir(dir).is_ok())
}

/// Why [`claim_dir`] refused a directory.
#[derive(Debug)]
pub enum ClaimError {
    /// The directory holds files numalab did not make: the first few names
    /// (sorted) and how many there are.
    Foreign { names: Vec<String>, count: usize },
    /// `force` was given for a directory that is not a report, and files
    /// there have names the report writes: they would be replaced. The
    /// first few names (sorted) and how many there are.
    WouldReplace { names: Vec<String>, count: usize },
    /// Another run holds the directory; what its lock file says about it
    /// ("pid N, started T"), or that it says nothing yet.
    Busy { holder: String },
    /// The directory could not be read, created or locked.
    Io(io::Error),
}

impl fmt::Display for ClaimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClaimError::Foreign { names, count } => {
                write!(
                    f,
                    "holds {count} file(s) numalab did not make ({}",
                    names.join(", ")
                )?;
                if *count > names.len() {
                    write!(f, ", ...")?;
                }
                write!(f, ")")
            }
            ClaimError::WouldReplace { names, count } => {
                write!(
                    f,
                    "holds {count} file(s) numalab did not make under names the report writes ({}",
                    names.join(", ")
                )?;
                if *count > names.len() {
                    write!(f, ", ...")?;
                }
                write!(f, ")")
            }
            ClaimError::Busy { holder } => {
                write!(f, "is in use by another numalab report ({holder})")
            }
            ClaimError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<io::Error> for ClaimError {
    fn from(e: io::Error) -> Self {
        ClaimError::Io(e)
    }
}

/// A report directory this process holds: while it lives (and at the
/// latest when the process ends, however it ends) no other run can claim
/// the directory.
#[derive(Debug)]
pub struct ReportDir {
    // Held for its lock; the kernel drops the lock when the file closes.
    _lock: File,
    was_report: bool,
}

impl ReportDir {
    /// Whether the directory already was numalab's report directory before
    /// this claim (so that its report files are numalab's to replace).
    pub fn was_report(&self) -> bool {
        self.was_report
    }
}

/// How many foreign names a refusal lists.
const FOREIGN_SHOWN: usize = 5;

/// Claims `dir` for one run of `numalab report`: creates it if missing,
/// refuses it when it holds files numalab did not make and is not a report
/// directory (unless `force`), then locks it with [`LOCK_FILE`] (written
/// first in a new directory) and records this process in the lock file.
/// A second claim, from this process or another, fails with
/// [`ClaimError::Busy`] naming the holder.
pub fn claim_dir(dir: &Path, force: bool) -> Result<ReportDir, ClaimError> {
    let was_report = is_report_dir(dir);
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::create_dir_all(dir)?,
        Err(e) => return Err(e.into()),
        Ok(md) if !md.is_dir() => {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, "not a directory").into())
        }
        Ok(_) if was_report => {}
        Ok(_) => {
            let mut names = Vec::new();
            let mut count = 0;
            for e in std::fs::read_dir(dir)? {
                let name = e?.file_name().to_string_lossy().into_owned();
                // --force writes beside a user's files, never over them.
                if force && !is_own_name(&name) {
                    continue;
                }
                count += 1;
                names.push(name);
                // Bounded: a directory of a million files needs no full list.
                if names.len() > 4 * FOREIGN_SHOWN {
                    names.sort();
                    names.truncate(FOREIGN_SHOWN);
                }
            }
            if count > 0 {
                names.sort();
                names.truncate(FOREIGN_SHOWN);
                return Err(if force {
                    ClaimError::WouldReplace { names, count }
                } else {
                    ClaimError::Foreign { names, count }
                });
            }
        }
    }
    let path = dir.join(LOCK_FILE);
    let mut lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        // Never truncated before it is locked: the holder's line must stay
        // readable to the run that is refused.
        .truncate(false)
        // A link planted under the name must not make numalab write elsewhere.
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(ClaimError::Busy {
                holder: read_holder(&lock),
            })
        }
        Err(TryLockError::Error(e)) => return Err(e.into()),
    }
    lock.set_len(0)?;
    write!(
        lock,
        "numalab report directory; locked while a run writes here\npid {}\nstarted {}\n",
        std::process::id(),
        rfc3339_utc(SystemTime::now())
    )?;
    Ok(ReportDir {
        _lock: lock,
        was_report,
    })
}

/// The run that holds `dir` now ("pid N, started T"), if one does; creates
/// nothing. Lets a second run say who holds the directory before it
/// complains about what the directory holds.
pub fn holder(dir: &Path) -> Option<String> {
    let lock = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(LOCK_FILE))
        .ok()?;
    match lock.try_lock() {
        // Free: the probe's lock goes with the file.
        Ok(()) => None,
        Err(TryLockError::WouldBlock) => Some(read_holder(&lock)),
        Err(TryLockError::Error(_)) => None,
    }
}

/// What the lock file `lock` says about its holder.
fn read_holder(lock: &File) -> String {
    let mut text = String::new();
    let _ = lock.take(4096).read_to_string(&mut text);
    holder_of(&text)
}

/// "pid N, started T" from a lock file's text.
fn holder_of(text: &str) -> String {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    match (field("pid "), field("started ")) {
        (Some(pid), Some(t)) => format!("pid {pid}, started {t}"),
        (Some(pid), None) => format!("pid {pid}"),
        _ => "a run that is just starting".to_string(),
    }
}

/// The names of the files the report now in `dir` consists of:
/// results.json, report.html, report.txt and the CSV tables its results.json
/// names. Taken before a new report replaces it (see [`remove_stale`]).
pub fn report_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = [RESULTS_FILE, HTML_FILE, TEXT_FILE]
        .iter()
        .map(|n| n.to_string())
        .collect();
    if let Ok(doc) = read_dir(dir) {
        names.extend(tables(&doc).iter().map(|t| t.file_name()));
    }
    names
}

/// Removes from `dir` the files of an old report (`old`, from
/// [`report_files`]) that the new one did not write (`written`), and
/// temporary files a killed run left. Called after the new report is
/// saved, so a failed save (a full disk) leaves the old report whole; files
/// numalab did not write stay.
pub fn remove_stale(dir: &Path, old: &[String], written: &[PathBuf]) -> io::Result<()> {
    let kept: Vec<&std::ffi::OsStr> = written.iter().filter_map(|p| p.file_name()).collect();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let os_name = e.file_name();
        let name = os_name.to_string_lossy();
        let partial = name.ends_with(PARTIAL_SUFFIX) && is_own_name(&name);
        let stale = old.iter().any(|o| **o == *name) && !kept.contains(&os_name.as_os_str());
        if (stale || partial) && e.file_type()?.is_file() {
            std::fs::remove_file(e.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("numalab-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn own_names() {
        for n in [
            "results.json",
            "report.html",
            "report.txt",
            ".numalab-report",
            "latency-matrix.csv",
            ".report.html.123.partial",
            ".nodes.csv.9.partial",
        ] {
            assert!(is_own_name(n), "{n}");
        }
        for n in [
            "notes.txt",
            "report.htm",
            ".report.html.partial",
            ".report.html.x1.partial",
            ".notes.txt.12.partial",
            "results.json.bak",
        ] {
            assert!(!is_own_name(n), "{n}");
        }
    }

    #[test]
    fn atomic_write_replaces_whole_and_leaves_no_temporary() {
        let d = scratch("atomic");
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("a.csv");
        write_atomically(&p, b"old").unwrap();
        write_atomically(&p, b"new content").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new content");
        let left: Vec<_> = std::fs::read_dir(&d).unwrap().collect();
        assert_eq!(left.len(), 1);
        // A path whose folder is missing fails and leaves nothing behind.
        let missing = d.join("no/such/dir/x.csv");
        assert!(write_atomically(&missing, b"x").is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_foreign_directory_is_refused_unless_forced() {
        let d = scratch("foreign");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("report.html"), "mine").unwrap();
        std::fs::write(d.join("notes.txt"), "mine").unwrap();
        match claim_dir(&d, false) {
            Err(ClaimError::Foreign { names, count }) => {
                assert_eq!(count, 2);
                assert_eq!(names, vec!["notes.txt", "report.html"]);
            }
            other => panic!("want Foreign, got {other:?}"),
        }
        assert!(!d.join(LOCK_FILE).exists(), "nothing written when refused");
        // --force writes beside the user's files, never over them: the
        // user's report.html (and results.json, a table's CSV) keep it out.
        std::fs::write(d.join(RESULTS_FILE), "{\"mine\": 1}").unwrap();
        std::fs::write(d.join("latency.csv"), "a,b").unwrap();
        match claim_dir(&d, true) {
            Err(e @ ClaimError::WouldReplace { .. }) => assert_eq!(
                e.to_string(),
                "holds 3 file(s) numalab did not make under names the report writes (latency.csv, report.html, results.json)"
            ),
            other => panic!("want WouldReplace, got {other:?}"),
        }
        assert!(!d.join(LOCK_FILE).exists(), "nothing written when refused");
        for f in [RESULTS_FILE, "latency.csv", "report.html"] {
            std::fs::remove_file(d.join(f)).unwrap();
        }
        let held = claim_dir(&d, true).unwrap();
        assert!(!held.was_report());
        assert!(d.join(LOCK_FILE).is_file());
        assert_eq!(
            std::fs::read_to_string(d.join("notes.txt")).unwrap(),
            "mine"
        );
        drop(held);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_second_claim_names_the_first_and_waits_for_its_end() {
        let d = scratch("busy").join("sub");
        let first = claim_dir(&d, false).unwrap();
        assert!(!first.was_report());
        let text = std::fs::read_to_string(d.join(LOCK_FILE)).unwrap();
        assert!(text.contains(&format!("pid {}", std::process::id())));
        match claim_dir(&d, false) {
            Err(ClaimError::Busy { holder }) => {
                assert!(
                    holder.starts_with(&format!("pid {}, started ", std::process::id())),
                    "{holder}"
                );
            }
            other => panic!("want Busy, got {other:?}"),
        }
        assert_eq!(
            holder(&d),
            Some(format!("pid {}, started {}", std::process::id(), {
                let t = text
                    .lines()
                    .find_map(|l| l.strip_prefix("started "))
                    .unwrap();
                t.to_string()
            }))
        );
        drop(first);
        assert_eq!(holder(&d), None);
        // Marked now: claimed again without --force, and known as numalab's.
        let again = claim_dir(&d, false).unwrap();
        assert!(again.was_report());
        drop(again);
        std::fs::remove_dir_all(d.parent().unwrap()).unwrap();
    }

    #[test]
    fn stale_files_go_and_files_numalab_did_not_write_stay() {
        let d = scratch("stale");
        std::fs::create_dir_all(&d).unwrap();
        for n in [
            "results.json",
            "report.html",
            "report.txt",
            "old-part.csv",
            ".report.txt.77.partial",
            "notes.txt",
            "mine.csv",
            ".numalab-report",
        ] {
            std::fs::write(d.join(n), "x").unwrap();
        }
        // results.json is no report here, so it names no CSV: mine.csv is
        // not numalab's; old-part.csv is given as the old report's.
        let mut old = report_files(&d);
        assert_eq!(old, vec!["results.json", "report.html", "report.txt"]);
        old.push("old-part.csv".into());
        let written = vec![d.join("results.json"), d.join("report.html")];
        remove_stale(&d, &old, &written).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            vec![
                ".numalab-report",
                "mine.csv",
                "notes.txt",
                "report.html",
                "results.json"
            ]
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn holder_text() {
        assert_eq!(
            holder_of("x\npid 12\nstarted 2024-01-01T00:00:00Z\n"),
            "pid 12, started 2024-01-01T00:00:00Z"
        );
        assert_eq!(holder_of(""), "a run that is just starting");
    }
}
