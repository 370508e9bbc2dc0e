//! How axis values are written: tick labels with just the decimals needed
//! to tell neighbouring ticks apart, and exact values for tooltips. The
//! digits themselves follow `numalab::text::format` ([`trimmed`] drops the
//! trailing zeros, [`bytes_f64`] writes byte sizes); what is particular to
//! axes is how many decimals a tick step needs and the k/M/G suffixes.

use super::axis::TickFormat;
use numalab::text::format::{bytes_f64, trimmed};

/// A number with at most `max_dec` decimals, trailing zeros removed, and
/// k/M/G suffixes from 10000 on.
pub(super) fn compact(v: f64, max_dec: usize) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let dec = if suffix.is_empty() { max_dec } else { 2 };
    format!("{}{suffix}", trimmed(scaled, dec))
}

/// A fraction as a percentage with at most `dec` decimals.
fn format_percent(v: f64, dec: usize) -> String {
    format!("{}%", trimmed(v * 100.0, dec))
}

/// Decimals needed to tell ticks `step` apart.
fn step_decimals(step: f64) -> usize {
    if step <= 0.0 || !step.is_finite() || step >= 1.0 {
        0
    } else {
        ((-step.log10()).ceil().max(0.0) as usize).min(9)
    }
}

/// A tick label. `step` is the linear tick step (0 on log axes, where each
/// value is written with its own precision).
pub(super) fn format_tick(v: f64, format: TickFormat, step: f64) -> String {
    match format {
        TickFormat::Number => {
            if step > 0.0 {
                compact(v, step_decimals(step))
            } else {
                compact(v, 6)
            }
        }
        TickFormat::Integer => format!("{}", v.round() as i64),
        TickFormat::Bytes => bytes_f64(v),
        TickFormat::Percent => {
            let dec = if step > 0.0 {
                step_decimals(step * 100.0)
            } else {
                4
            };
            format_percent(v, dec)
        }
    }
}

/// A value written exactly (Rust's shortest round-trip form), with the
/// formatted form too when the format changes it.
pub(super) fn exact(v: f64, format: TickFormat) -> String {
    match format {
        TickFormat::Number | TickFormat::Integer => format!("{v}"),
        TickFormat::Bytes => {
            let pretty = bytes_f64(v);
            let raw = format!("{v} B");
            if pretty == raw {
                raw
            } else {
                format!("{pretty} ({raw})")
            }
        }
        TickFormat::Percent => format!("{} ({v})", format_percent(v, 4)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_and_exact_values() {
        assert_eq!(format_tick(0.5, TickFormat::Number, 0.5), "0.5");
        assert_eq!(format_tick(20000.0, TickFormat::Number, 5000.0), "20k");
        assert_eq!(format_tick(2.5e6, TickFormat::Number, 0.0), "2.5M");
        assert_eq!(format_tick(3.7, TickFormat::Integer, 1.0), "4");
        assert_eq!(format_tick(0.25, TickFormat::Percent, 0.05), "25%");
        assert_eq!(format_tick(0.025, TickFormat::Percent, 0.005), "2.5%");
        assert_eq!(format_tick(1536.0, TickFormat::Bytes, 0.0), "1.5 KiB");
        // No "-0" for a value that rounds to zero.
        assert_eq!(compact(-0.2, 0), "0");
        assert_eq!(exact(1.5, TickFormat::Number), "1.5");
        assert_eq!(exact(512.0, TickFormat::Bytes), "512 B");
        assert_eq!(exact(4096.0, TickFormat::Bytes), "4 KiB (4096 B)");
        assert_eq!(exact(0.25, TickFormat::Percent), "25% (0.25)");
    }
}
