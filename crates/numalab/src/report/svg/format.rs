//! How axis values are written: tick labels with just the decimals needed
//! to tell neighbouring ticks apart, and exact values for tooltips.

use super::axis::TickFormat;

/// Removes trailing zeros (and a trailing point) of a decimal number.
fn trim_zeros(s: String) -> String {
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.');
        if t == "-0" {
            "0".to_string()
        } else {
            t.to_string()
        }
    } else {
        s
    }
}

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
    format!("{}{suffix}", trim_zeros(format!("{scaled:.dec$}")))
}

/// Binary byte size: `512 B`, `48 KiB`, `1.5 MiB`, `2 GiB`.
pub fn format_bytes(v: f64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut x = v;
    let mut k = 0;
    while x.abs() >= 1024.0 && k + 1 < UNITS.len() {
        x /= 1024.0;
        k += 1;
    }
    format!("{} {}", trim_zeros(format!("{x:.2}")), UNITS[k])
}

/// A fraction as a percentage with at most `dec` decimals.
fn format_percent(v: f64, dec: usize) -> String {
    format!("{}%", trim_zeros(format!("{:.dec$}", v * 100.0)))
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
        TickFormat::Bytes => format_bytes(v),
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
            let pretty = format_bytes(v);
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
