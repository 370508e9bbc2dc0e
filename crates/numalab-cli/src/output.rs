//! Errors and output helpers shared by the commands: one-line errors with
//! exit codes, the JSON envelope of every result, progress, warnings.

use numalab::measure::environment::Environment;
use serde::Serialize;
use std::fmt;
use std::process::ExitCode;

/// Version of the JSON the measuring commands print (`schema_version`).
pub const RESULT_SCHEMA_VERSION: &str = "1.0";

/// What a measuring command prints with `--json`: the schema version, the
/// command, the result's own fields, and the environment it depends on.
#[derive(Serialize)]
pub struct Envelope<'a, T: Serialize> {
    pub schema_version: &'static str,
    pub command: &'static str,
    #[serde(flatten)]
    pub result: &'a T,
    pub environment: Environment,
}

/// Prints `result` of `command` in its [`Envelope`], as pretty JSON.
pub fn print_result<T: Serialize>(command: &'static str, result: &T) -> Result<(), CliError> {
    print_json(&Envelope {
        schema_version: RESULT_SCHEMA_VERSION,
        command,
        result,
        environment: Environment::capture(),
    })
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

/// Prints a value as pretty JSON on stdout.
pub fn print_json<T: serde::Serialize>(v: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(v)
        .map_err(|e| CliError::failed(format!("cannot encode JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

/// Clap's errors are several lines with usage; ours are one line.
pub fn clap_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::SUCCESS
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
            eprintln!("numalab: {msg}; see numalab --help");
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
pub fn print_warnings(ws: &[String]) {
    if ws.len() <= 3 {
        for w in ws {
            println!("warning: {w}");
        }
        return;
    }
    let imprecise = ws.iter().filter(|w| w.contains("not precise")).count();
    let outliers = ws.iter().filter(|w| w.contains("outliers")).count();
    let other = ws.len() - imprecise - outliers;
    println!(
        "warning: {} warnings: {imprecise} measurements did not reach the target precision in their budget, {outliers} had outliers, {other} other; the machine is noisy or the budget short (raise --budget); --json lists them all",
        ws.len()
    );
}
