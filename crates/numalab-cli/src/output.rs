//! Errors and output helpers shared by the commands: one-line errors with
//! exit codes, the JSON envelope of every result, progress, warnings, and
//! the one way to write to standard output ([`out!`], [`outln!`]) and to
//! standard error ([`errln!`]).
//!
//! std's `print!` panics when a write fails (a full disk, a closed pipe
//! reader with SIGPIPE blocked) and silently drops output when fd 1 is
//! closed; `eprintln!` panics too. Every command writes through here
//! instead, so a failed write is one line and exit code 1.

use numalab::measure::environment::Environment;
use serde::Serialize;
use std::fmt;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Writes to standard output like `print!`; evaluates to
/// `Result<(), CliError>` (a failed write is [`CliError::failed`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!($($arg)*))
    };
}
pub(crate) use out;

/// Writes a line to standard output like `println!`; evaluates to
/// `Result<(), CliError>`.
macro_rules! outln {
    () => {
        $crate::output::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;

/// Writes a line to standard error like `eprintln!`, but never panics: a
/// message that cannot be shown must not turn into a crash.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use errln;

/// Whether fd 1 was closed when numalab started.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Looks at fd 1 before Rust's runtime starts: the runtime puts /dev/null on
/// a closed standard descriptor (so that no file numalab opens gets fd 1),
/// after which a closed stdout can no longer be told from a wanted
/// `>/dev/null`, and what numalab prints would be lost without a word.
extern "C" fn note_closed_stdout() {
    // F_GETFD reads the descriptor's flags and changes nothing; it fails
    // (EBADF is its only error here) exactly when fd 1 is closed.
    if !numalab::sys::process::descriptor_is_open(1) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Runs [`note_closed_stdout`] as an ELF constructor: the C runtime calls
/// `.init_array` before `main`, and so before the Rust runtime's start-up.
// SAFETY: the section holds pointers to functions of this signature, called
// once, single-threaded, with no arguments; the function touches only an
// atomic and a system call that needs no runtime.
#[used]
#[allow(unsafe_code)]
#[unsafe(link_section = ".init_array")]
static NOTE_CLOSED_STDOUT: extern "C" fn() = note_closed_stdout;

/// Refuses to go on when standard output was closed: what the command
/// would print would be lost.
pub fn require_stdout() -> Result<(), CliError> {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Err(CliError::failed(
            "cannot write to standard output: it is closed; redirect it to a file or /dev/null",
        ));
    }
    Ok(())
}

fn stdout_error(e: std::io::Error) -> CliError {
    CliError::failed(format!("cannot write to standard output: {e}"))
}

/// What [`out!`] and [`outln!`] call: writes to standard output, an error
/// becoming one line with exit code 1.
pub fn write_stdout(args: fmt::Arguments<'_>) -> Result<(), CliError> {
    require_stdout()?;
    std::io::stdout()
        .lock()
        .write_fmt(args)
        .map_err(stdout_error)
}

/// Flushes standard output; numalab calls it before exiting, because the
/// flush std does at exit ignores errors (`numalab topology > /dev/full`
/// would otherwise exit 0 with the output lost).
pub fn flush_stdout() -> Result<(), CliError> {
    std::io::stdout().flush().map_err(stdout_error)
}

/// What [`errln!`] calls: writes to standard error, ignoring failures.
pub fn write_stderr(args: fmt::Arguments<'_>) {
    // Formatted first and written in one call: stderr is unbuffered, so
    // `write_fmt` would write each piece on its own, and a message the
    // signal handler writes meanwhile would land inside this one (seen:
    // "weights set …: <stopped by SIGINT …> node0=3").
    let text = fmt::format(args);
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

pub use numalab_report::files::same_file;

/// The folder `path` is in ("." for a bare file name).
pub fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Refuses (bad input, exit 2) to write `output` (given as `option`) when
/// it is one of the command's `inputs` (each with the option or role that
/// named it): numalab never writes over what it reads.
pub fn refuse_overwriting_input(
    option: &str,
    output: &Path,
    inputs: &[(&str, &Path)],
) -> Result<(), CliError> {
    if let Some(why) = numalab_report::files::output_refusal(output) {
        return Err(CliError::usage(format!(
            "{option} {}: {why}",
            output.display()
        )));
    }
    // A character device is written in place, never replaced
    // (`write_atomically`), and keeps nothing: /dev/null named by the
    // command too is fine. A FIFO an input is read from is not.
    if std::fs::metadata(output)
        .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_char_device(&m.file_type()))
    {
        return Ok(());
    }
    for (role, input) in inputs {
        if same_file(output, input) {
            return Err(CliError::usage(format!(
                "{option} {} is the same file as {role} {}: numalab never writes over an input; choose another output file",
                output.display(),
                input.display()
            )));
        }
    }
    Ok(())
}

/// Version of the JSON the commands print (`schema_version`), for results
/// without a schema of their own. 1.2: every command's `--json` is in the
/// envelope (place, set, topology, verify, compare, profile, run, the sweep
/// listings and the report plan were bare). 1.3: `sizes`' `layout` takes
/// the words of every command's `--layout`, compact and scatter (packed and
/// spread before, still read). 1.4: `compare` gives a report's key figures
/// (`key_figures`), the settings that differ (`configuration_differences`),
/// every environment field that differs, and per row its `unit` and why it
/// is `not_comparable`. 1.5: `loaded-latency` gives each point's
/// `total_memory_gbps` (the injectors' memory bytes and the chase's lines)
/// and each curve's `knee_total_gbps` (where the knee lies, interpolated),
/// and measures one idle point for all mixes (`shared_idle`). 1.6:
/// `compare`'s key figures carry each report's 95% interval and whether
/// the two lie apart (`beyond_intervals`). 1.7: `loaded-latency` gives
/// each curve's knee its 95% interval (`knee_total_gbps_ci`).
pub const RESULT_SCHEMA_VERSION: &str = "1.7";

/// What every command prints with `--json`: the schema version, the
/// command, the result's own fields, and the environment it depends on.
/// A result with a schema of its own (the machine of `topology`, `place`'s
/// result, a profile) carries that version in its own `schema_version`, and
/// the envelope adds none.
#[derive(Serialize)]
pub struct Envelope<'a, T: Serialize> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<&'static str>,
    pub command: &'static str,
    #[serde(flatten)]
    pub result: &'a T,
    pub environment: Environment,
}

impl<'a, T: Serialize> Envelope<'a, T> {
    /// `result` of `command`, at [`RESULT_SCHEMA_VERSION`].
    pub fn new(command: &'static str, result: &'a T) -> Self {
        Self {
            schema_version: Some(RESULT_SCHEMA_VERSION),
            command,
            result,
            environment: Environment::capture(),
        }
    }

    /// `result` of `command`, whose own `schema_version` field is the
    /// document's.
    pub fn versioned(command: &'static str, result: &'a T) -> Self {
        Self {
            schema_version: None,
            ..Self::new(command, result)
        }
    }

    /// The envelope as pretty JSON.
    pub fn to_json(&self) -> Result<String, CliError> {
        serde_json::to_string_pretty(self)
            .map_err(|e| CliError::failed(format!("cannot encode JSON: {e}")))
    }
}

/// Prints `result` of `command` in its [`Envelope`], as pretty JSON.
pub fn print_result<T: Serialize>(command: &'static str, result: &T) -> Result<(), CliError> {
    print_json(&Envelope::new(command, result))
}

/// Prints `result` of `command`, which has a schema (and a
/// `schema_version` field) of its own, in its [`Envelope`].
pub fn print_versioned_result<T: Serialize>(
    command: &'static str,
    result: &T,
) -> Result<(), CliError> {
    print_json(&Envelope::versioned(command, result))
}

/// Exit 3 when the placement did not verify (the figures are still printed).
pub fn exit_for(verified: bool) -> ExitCode {
    if verified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    }
}

/// A failure reported to the user as one line, with an exit code:
/// 2 for bad input (usage), 1 for everything else.
#[derive(Debug)]
pub struct CliError {
    pub msg: String,
    pub code: u8,
}

impl CliError {
    /// Bad input: exit code 2.
    pub fn usage(msg: impl Into<String>) -> Self {
        Self {
            msg: msg.into(),
            code: 2,
        }
    }

    /// The request was fine but could not be carried out: exit code 1.
    pub fn failed(msg: impl Into<String>) -> Self {
        Self {
            msg: msg.into(),
            code: 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the source said.
        f.write_str(&self.msg.replace('\n', " "))
    }
}

impl From<numalab::machine::MachineError> for CliError {
    fn from(e: numalab::machine::MachineError) -> Self {
        Self::usage(e.to_string())
    }
}

/// A profile session's errors: a placement's as placement errors are
/// everywhere, the rest with the session's exit code.
impl From<numalab::profile::session::SessionError> for CliError {
    fn from(e: numalab::profile::session::SessionError) -> Self {
        match e {
            numalab::profile::session::SessionError::Placement(p) => p.into(),
            e => CliError {
                msg: e.to_string(),
                code: e.exit_code(),
            },
        }
    }
}

impl From<numalab_report::profile_dir::DirError> for CliError {
    fn from(e: numalab_report::profile_dir::DirError) -> Self {
        match e {
            numalab_report::profile_dir::DirError::Refused(m) => CliError::usage(m),
            numalab_report::profile_dir::DirError::Io(m) => CliError::failed(m),
        }
    }
}

impl From<numalab::placement::PlacementError> for CliError {
    fn from(e: numalab::placement::PlacementError) -> Self {
        use numalab::placement::PlacementError as P;
        match e {
            P::Invalid(_) => Self::usage(e.to_string()),
            _ => Self::failed(e.to_string()),
        }
    }
}

pub type CliResult = Result<ExitCode, CliError>;

/// Prints a value as pretty JSON on stdout: private, so that every
/// command's JSON goes through [`print_result`] and its envelope.
fn print_json<T: serde::Serialize>(v: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(v)
        .map_err(|e| CliError::failed(format!("cannot encode JSON: {e}")))?;
    outln!("{text}")
}

/// Clap's errors are several lines with usage; ours are one line.
///
/// `--help` and `--version` print on stdout and exit 0 (1 with one line when
/// stdout cannot take them). No command at all, or a command group without
/// its subcommand, shows the help on stderr and exits 2, as numactl does
/// when it is given nothing to run.
/// `command` is the command the arguments named (`numalab bench
/// bandwidth`): its own help lists the option that was wrong.
pub fn clap_error(e: clap::Error, command: &str) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let printed = require_stdout()
                .and_then(|()| e.print().map_err(stdout_error))
                .and_then(|()| flush_stdout());
            match printed {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    errln!("numalab: {err}");
                    ExitCode::from(err.code)
                }
            }
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // clap writes this kind on stderr.
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            let rendered = e.render().to_string();
            // Everything clap says before its usage block, on one line.
            let mut parts: Vec<String> = Vec::new();
            for l in rendered.lines() {
                let l = l.trim();
                if l.starts_with("Usage:") || l.starts_with("For more information") {
                    break;
                }
                if l.is_empty() {
                    continue;
                }
                match l.strip_prefix("tip: ") {
                    Some(t) => parts.push(format!("({t})")),
                    None => parts.push(l.trim_start_matches("error: ").to_string()),
                }
            }
            let msg = if parts.is_empty() {
                "invalid arguments".to_string()
            } else {
                parts.join(" ")
            };
            errln!("numalab: {msg}; see {command} --help");
            ExitCode::from(2)
        }
    }
}

/// Loads the machine model: live or from `--topology FILE`.
pub fn load_machine(path: Option<&std::path::Path>) -> Result<numalab::Machine, CliError> {
    Ok(numalab::Machine::load(path)?)
}

/// A progress indicator on stderr, drawn only when stderr is a terminal, so
/// piped and redirected runs stay quiet.
pub struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    /// A spinner with a message, for measurements of unknown length.
    pub fn spinner(msg: &str) -> Self {
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return Self(None);
        }
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_message(msg.to_string());
        pb.enable_steady_tick(std::time::Duration::from_millis(120));
        Self(Some(pb))
    }

    /// A bar of `len` steps.
    pub fn bar(len: u64, msg: &str) -> Self {
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return Self(None);
        }
        let pb = indicatif::ProgressBar::new(len);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} ({elapsed}, ~{eta} left)",
        ) {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.set_message(msg.to_string());
        Self(Some(pb))
    }

    /// Advances the bar by one step, naming what is being done.
    pub fn step(&self, what: &str) {
        if let Some(pb) = &self.0 {
            pb.set_message(what.to_string());
            pb.inc(1);
        }
    }

    /// Removes the indicator from the terminal.
    pub fn finish(&self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}

/// Prints warnings; a long list is summarized (`--json` keeps them all).
pub fn print_warnings(ws: &[String]) -> Result<(), CliError> {
    if ws.len() <= 3 {
        for w in ws {
            outln!("warning: {w}")?;
        }
        return Ok(());
    }
    let imprecise = ws.iter().filter(|w| w.contains("not precise")).count();
    let outliers = ws.iter().filter(|w| w.contains("outliers")).count();
    let other = ws.len() - imprecise - outliers;
    outln!(
        "warning: {} warnings: {imprecise} measurements did not reach the target precision in their budget, {outliers} had outliers, {other} other; the machine is noisy or the budget short (raise --budget); --json lists them all",
        ws.len()
    )
}
