//! Options shared by the measuring commands (bench, matrix, sizes, scaling).

use crate::output::CliError;
use numalab::measure::stats::StopRule;
use std::time::Duration;

/// How long and how precisely to measure.
#[derive(clap::Args, Debug, Clone)]
pub struct StatOptions {
    /// Stop when the median's 95% confidence interval is within this many percent.
    #[arg(
        long,
        value_name = "PERCENT",
        default_value = "1",
        allow_hyphen_values = true
    )]
    pub target_ci: String,
    /// Time budget per measurement, in seconds.
    #[arg(long, value_name = "SECONDS", allow_hyphen_values = true)]
    pub budget: Option<String>,
    /// Repetitions at least (after warm-up).
    #[arg(long, value_name = "N", default_value = "5")]
    pub min_reps: String,
    /// Repetitions at most.
    #[arg(long, value_name = "N", default_value = "1000")]
    pub max_reps: String,
    /// Warm-up repetitions, not counted.
    #[arg(long, value_name = "N", default_value = "1")]
    pub warmup: String,
}

fn number<T: std::str::FromStr>(opt: &str, text: &str, what: &str) -> Result<T, CliError> {
    text.trim()
        .parse()
        .map_err(|_| CliError::usage(format!("{opt} '{text}' is not {what}")))
}

impl StatOptions {
    /// The stop rule, with `default_budget` seconds unless --budget is given.
    pub fn rule(&self, default_budget: f64) -> Result<StopRule, CliError> {
        let ci: f64 = number("--target-ci", &self.target_ci, "a percentage like 1 or 0.5")?;
        if !(ci > 0.0 && ci < 100.0) {
            return Err(CliError::usage(format!(
                "--target-ci {ci} must be between 0 and 100 (percent)"
            )));
        }
        let budget: f64 = match &self.budget {
            Some(b) => number("--budget", b, "a number of seconds")?,
            None => default_budget,
        };
        if !(budget > 0.0 && budget.is_finite()) {
            return Err(CliError::usage(format!(
                "--budget {budget} must be a positive number of seconds"
            )));
        }
        let min_reps: usize = number("--min-reps", &self.min_reps, "a whole number")?;
        let max_reps: usize = number("--max-reps", &self.max_reps, "a whole number")?;
        let warmup: usize = number("--warmup", &self.warmup, "a whole number")?;
        if min_reps == 0 || max_reps < min_reps {
            return Err(CliError::usage(format!(
                "--min-reps {min_reps} and --max-reps {max_reps}: need 1 <= min-reps <= max-reps"
            )));
        }
        Ok(StopRule {
            warmup,
            min_reps,
            max_reps,
            target_rel_ci: ci / 100.0,
            budget: Duration::from_secs_f64(budget),
        })
    }
}

/// Bandwidth units: decimal GB/s (1e9, the STREAM and likwid convention) or GiB/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    Gb,
    Gib,
}

impl Units {
    pub fn parse(t: &str) -> Result<Self, CliError> {
        match t {
            "gb" | "GB" => Ok(Self::Gb),
            "gib" | "GiB" => Ok(Self::Gib),
            _ => Err(CliError::usage(format!(
                "unknown unit '{t}'; valid: gb (1e9 B/s), gib (2^30 B/s)"
            ))),
        }
    }

    /// Converts a figure in GB/s (1e9) to these units.
    pub fn convert(self, gb: f64) -> f64 {
        match self {
            Self::Gb => gb,
            Self::Gib => gb * 1e9 / (1u64 << 30) as f64,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Gb => "GB/s",
            Self::Gib => "GiB/s",
        }
    }
}
