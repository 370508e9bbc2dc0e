//! Reading the files a user names (topology XML, saved results), bounded.
//!
//! Every file numalab reads on a user's behalf goes through [`read_text`]:
//! it opens without blocking, so a FIFO with no writer cannot hang the
//! program; refuses anything that is not a regular file, naming what it is;
//! and refuses a file above the size cap of its [`InputKind`], reading at most
//! one byte more than the cap, so `/proc` files that report a size of zero and
//! files that grow while read are bounded too. Nothing here writes.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a file is expected to hold; each kind has its own size cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// An hwloc XML topology (`--topology`).
    TopologyXml,
    /// A numalab JSON result (`compare`, `sweep --from`, a report's
    /// results.json).
    ResultsJson,
    /// A per-thread, per-array placement list (`--placement`).
    PlacementJson,
    /// The contention model's parameters (`model --params`).
    ModelParams,
}

/// The largest topology file read: hwloc exports of the biggest machines
/// (thousands of PUs with their caches and PCI devices) stay below a few MiB.
pub const TOPOLOGY_XML_MAX_BYTES: u64 = 32 << 20;

/// The largest result file read: a full sweep with its samples stays far
/// below this; more would mostly be memory for the parsed tree.
pub const RESULTS_JSON_MAX_BYTES: u64 = 256 << 20;

/// The largest placement file read: 8192 threads with a few arrays each
/// stay below 2 MiB.
pub const PLACEMENT_JSON_MAX_BYTES: u64 = 4 << 20;

/// The largest model parameter file read: a 64-node machine with every
/// link and controller given stays below 64 KiB.
pub const MODEL_PARAMS_MAX_BYTES: u64 = 1 << 20;

impl InputKind {
    /// The most bytes a file of this kind may hold.
    pub const fn max_bytes(self) -> u64 {
        match self {
            InputKind::TopologyXml => TOPOLOGY_XML_MAX_BYTES,
            InputKind::ResultsJson => RESULTS_JSON_MAX_BYTES,
            InputKind::PlacementJson => PLACEMENT_JSON_MAX_BYTES,
            InputKind::ModelParams => MODEL_PARAMS_MAX_BYTES,
        }
    }

    /// The kind in words, for messages.
    pub const fn describe(self) -> &'static str {
        match self {
            InputKind::TopologyXml => "a topology file",
            InputKind::ResultsJson => "a result file",
            InputKind::PlacementJson => "a placement file",
            InputKind::ModelParams => "a model parameter file",
        }
    }
}

/// Why a file could not be read.
#[derive(Debug)]
pub struct InputError {
    /// The file as the user named it.
    pub path: PathBuf,
    /// What went wrong.
    pub problem: InputProblem,
}

/// What went wrong while reading a file.
#[derive(Debug)]
pub enum InputProblem {
    /// Opening or reading failed (missing, permission denied, I/O error).
    Io(std::io::Error),
    /// The path names a directory, device or socket.
    NotRegular(&'static str),
    /// A FIFO or pipe that no program writes into: it would give nothing.
    NoWriter,
    /// A FIFO or pipe whose writer sent nothing for [`PIPE_WAIT`].
    PipeSilent,
    /// The file holds more than the cap of its kind: `size` is the size the
    /// file reports, `None` when it reported less and reading found more.
    TooLarge { size: Option<u64>, kind: InputKind },
    /// The bytes are not UTF-8 text.
    NotText,
}

impl fmt::Display for InputProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputProblem::Io(e) => write!(f, "{e}"),
            InputProblem::NotRegular(what) => write!(
                f,
                "it is {what}, not a regular file (give a file saved on disk)"
            ),
            InputProblem::NoWriter => write!(
                f,
                "it is a FIFO (named pipe) that no program writes into (give a file saved on disk, or a pipe a program writes, such as <(cat FILE))"
            ),
            InputProblem::PipeSilent => write!(
                f,
                "it is a pipe whose writer sent nothing for {} s (give a file saved on disk)",
                PIPE_WAIT.as_secs()
            ),
            InputProblem::TooLarge {
                size: Some(size),
                kind,
            } => write!(
                f,
                "it holds {size} bytes ({}), above the {} numalab reads as {}",
                binary_size(*size),
                binary_size(kind.max_bytes()),
                kind.describe()
            ),
            InputProblem::TooLarge { size: None, kind } => write!(
                f,
                "it holds more than the {} numalab reads as {}",
                binary_size(kind.max_bytes()),
                kind.describe()
            ),
            InputProblem::NotText => write!(f, "it is not UTF-8 text"),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot read {}: {}", self.path.display(), self.problem)
    }
}

impl std::error::Error for InputError {}

/// A size in the largest binary unit that keeps one decimal, for messages
/// (layer 0 keeps its own: `text::format` sits beside it, not above).
fn binary_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// What a non-regular file is, in words.
fn file_kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// How long a pipe's writer may stay silent before reading it gives up.
pub const PIPE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads a FIFO or pipe opened non-blocking to its end, at most `cap` + 1
/// bytes: refused when no program writes into it (a read with no writer
/// ends at once) or when the writer is silent for [`PIPE_WAIT`].
fn read_pipe(file: &mut std::fs::File, cap: u64) -> Result<Vec<u8>, InputProblem> {
    use std::os::fd::AsFd;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 64 << 10];
    loop {
        match file.read(&mut chunk) {
            Ok(0) if bytes.is_empty() => return Err(InputProblem::NoWriter),
            Ok(0) => return Ok(bytes),
            Ok(n) => {
                bytes.extend_from_slice(&chunk[..n]);
                if bytes.len() as u64 > cap {
                    return Ok(bytes);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                match crate::sys::process::wait_readable(file.as_fd(), PIPE_WAIT.as_millis() as i32)
                {
                    Ok(true) => {}
                    Ok(false) => return Err(InputProblem::PipeSilent),
                    // A signal ended the wait early: that is no silence.
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(InputProblem::Io(e)),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(InputProblem::Io(e)),
        }
    }
}

/// Reads a whole regular file of `kind`, at most its cap; a FIFO or pipe
/// (`--plan <(cat plan.json)`) is read to its end, bounded the same way.
pub fn read_bytes(path: &Path, kind: InputKind) -> Result<Vec<u8>, InputError> {
    let fail = |problem| InputError {
        path: path.to_path_buf(),
        problem,
    };
    // O_NONBLOCK: opening a FIFO for reading blocks until a writer comes;
    // nonblocking, it returns at once, and a read with no writer ends.
    // O_NOCTTY: a terminal device named by mistake must not become ours.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| fail(InputProblem::Io(e)))?;
    // The type of what was opened, not of the path: a path swapped between
    // a check and the open cannot slip a device through.
    let meta = file.metadata().map_err(|e| fail(InputProblem::Io(e)))?;
    let cap = kind.max_bytes();
    if meta.file_type().is_fifo() {
        let bytes = read_pipe(&mut file, cap).map_err(fail)?;
        if bytes.len() as u64 > cap {
            return Err(fail(InputProblem::TooLarge { size: None, kind }));
        }
        return Ok(bytes);
    }
    if !meta.file_type().is_file() {
        return Err(fail(InputProblem::NotRegular(file_kind(meta.file_type()))));
    }
    if meta.len() > cap {
        return Err(fail(InputProblem::TooLarge {
            size: Some(meta.len()),
            kind,
        }));
    }
    // The reported size is a hint (zero for /proc files, stale for a file
    // being written): read at most one byte past the cap to know.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(InputProblem::Io(e)))?;
    if bytes.len() as u64 > cap {
        return Err(fail(InputProblem::TooLarge { size: None, kind }));
    }
    Ok(bytes)
}

/// Reads a whole regular file of `kind` as UTF-8 text, at most its cap.
pub fn read_text(path: &Path, kind: InputKind) -> Result<String, InputError> {
    let bytes = read_bytes(path, kind)?;
    String::from_utf8(bytes).map_err(|_| InputError {
        path: path.to_path_buf(),
        problem: InputProblem::NotText,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("numalab-input-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_a_regular_file() {
        let d = scratch("regular");
        let p = d.join("a.json");
        std::fs::write(&p, "{\"a\": 1}").unwrap();
        assert_eq!(read_text(&p, InputKind::ResultsJson).unwrap(), "{\"a\": 1}");
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn refuses_what_is_not_a_regular_file_or_a_written_pipe() {
        let d = scratch("kinds");
        let e = read_text(&d, InputKind::ResultsJson).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot read {}: it is a directory, not a regular file (give a file saved on disk)",
                d.display()
            )
        );
        let e = read_text(Path::new("/dev/zero"), InputKind::TopologyXml).unwrap_err();
        assert!(e.to_string().contains("it is a character device"), "{e}");
        // A FIFO with no writer: refused at once instead of waiting forever.
        let fifo = d.join("fifo");
        crate::sys::process::make_fifo(&fifo, 0o600).unwrap();
        let e = read_text(&fifo, InputKind::ResultsJson).unwrap_err();
        assert!(
            e.to_string()
                .contains("it is a FIFO (named pipe) that no program writes into"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn reads_a_pipe_a_program_writes_and_bounds_it() {
        let d = scratch("pipe");
        let fifo = d.join("fifo");
        crate::sys::process::make_fifo(&fifo, 0o600).unwrap();
        // The writer opens first (as a shell's <(...) does), writes in two
        // pieces with a pause, and closes.
        let f2 = fifo.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&f2)
                .unwrap();
            tx.send(()).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::io::Write::write_all(&mut w, b"{\"a\":").unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::io::Write::write_all(&mut w, b" 1}").unwrap();
        });
        rx.recv().unwrap();
        // The writer holds it open read-write, so the reader sees a writer;
        // the text ends when the writer's thread drops it.
        assert_eq!(
            read_text(&fifo, InputKind::ResultsJson).unwrap(),
            "{\"a\": 1}"
        );
        writer.join().unwrap();
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn refuses_a_file_above_the_cap_without_reading_it() {
        let d = scratch("large");
        let p = d.join("big.xml");
        let f = std::fs::File::create(&p).unwrap();
        // Sparse: the size is what counts, no bytes need writing.
        f.set_len(TOPOLOGY_XML_MAX_BYTES + 1).unwrap();
        let e = read_text(&p, InputKind::TopologyXml).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot read {}: it holds 33554433 bytes (32.0 MiB), above the 32 MiB numalab reads as a topology file",
                p.display()
            )
        );
        f.set_len(TOPOLOGY_XML_MAX_BYTES).unwrap();
        assert_eq!(
            read_bytes(&p, InputKind::TopologyXml).unwrap().len() as u64,
            TOPOLOGY_XML_MAX_BYTES
        );
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn names_missing_files_and_binary_content() {
        let e = read_text(Path::new("/no/such/file.json"), InputKind::ResultsJson).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read /no/such/file.json: No such file or directory (os error 2)"
        );
        let d = scratch("binary");
        let p = d.join("b.json");
        std::fs::write(&p, [0xff, 0xfe, 0x00]).unwrap();
        let e = read_text(&p, InputKind::ResultsJson).unwrap_err();
        assert!(e.to_string().ends_with("it is not UTF-8 text"), "{e}");
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn sizes_in_messages() {
        assert_eq!(binary_size(12), "12 bytes");
        assert_eq!(binary_size(32 << 20), "32 MiB");
        assert_eq!(binary_size((32 << 20) + 1), "32.0 MiB");
        assert_eq!(binary_size(3 << 29), "1.5 GiB");
    }
}
