//! Reading what people write: sizes (`64M`, `1GiB`), seconds (`60`,
//! `0.5s`), rates (`2`, `0.5GB/s`) and pauses in nanoseconds. Each kind has
//! its range here, in one place ([`MAX_SIZE`], [`MIN_SECONDS`] and
//! [`MAX_SECONDS`], [`MIN_RATE`] and [`MAX_RATE`], [`MAX_DELAY_NS`]), so an
//! accepted number is always one the rest of the engine can turn into a
//! `Duration`, an allocation size or a pace without overflow. Each error is
//! one line that names the problem and the valid range; callers prefix the
//! option name.

use super::format::excerpt;

/// Largest size: 128 TiB, the whole user address space of x86-64 with
/// 4-level page tables. No buffer can be larger, and every byte count
/// below it times any small factor (arrays per kernel, threads) still
/// fits in 64 bits.
pub const MAX_SIZE: u64 = 1 << 47;

/// Shortest time budget or duration: 1 ms. Below it a measurement cannot
/// even start its workers, and `Duration` would round the value away.
pub const MIN_SECONDS: f64 = 1e-3;

/// Longest time budget or duration: one week. A full report on the largest
/// machine takes hours, so a week is never the limit that matters, yet it
/// keeps every deadline (`Instant + Duration`) and every
/// `Duration::from_secs_f64` far from overflow.
pub const MAX_SECONDS: f64 = 7.0 * 86_400.0;

/// Slowest paced rate: 1 MB/s per thread. Slower, one chunk of traffic
/// would wait longer than a whole measurement.
pub const MIN_RATE: f64 = 1e6;

/// Fastest paced rate: 10 TB/s per thread, above what any memory system
/// moves today (an HBM3 stack is about 1 TB/s); asking for more is the same
/// as unpaced.
pub const MAX_RATE: f64 = 1e13;

/// Longest pause after an injector chunk: one second, already far slower
/// than any load worth measuring.
pub const MAX_DELAY_NS: u64 = 1_000_000_000;

/// The text of an error message, cut so that a hostile argument cannot
/// make the line longer than a screen.
fn shown(text: &str) -> String {
    excerpt(text, 40)
}

/// Parses a size like `64M`, `1GiB`, `4096`, `2.5G` (binary units: K =
/// 1024), from 0 to [`MAX_SIZE`].
pub fn size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .ok()
        // Infinity (400 digits) is kept for "too large" below.
        .filter(|v: &f64| *v >= 0.0)
        .ok_or_else(|| {
            format!(
                "'{}' is not a size; write e.g. 4096, 64K, 256M, 1G (binary units, at most 128T)",
                shown(text)
            )
        })?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "unknown size unit '{}' in '{}'; valid: B, K, M, G, T (binary: K = 1024)",
                shown(&unit.trim().to_ascii_lowercase()),
                shown(text)
            ))
        }
    };
    let bytes = (value * mult as f64).round();
    if bytes > MAX_SIZE as f64 {
        return Err(format!(
            "size '{}' is too large: at most 128T (the user address space)",
            shown(text)
        ));
    }
    Ok(bytes as u64)
}

/// Parses a number of seconds (`60`, `0.5`, `2s`) from [`MIN_SECONDS`] to
/// [`MAX_SECONDS`].
pub fn seconds(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let t = t.strip_suffix('s').unwrap_or(t).trim();
    match t.parse::<f64>() {
        Ok(v) if (MIN_SECONDS..=MAX_SECONDS).contains(&v) => Ok(v),
        Ok(_) => Err(format!(
            "'{}' is not a positive number of seconds from 0.001 to 604800 (one week)",
            shown(text)
        )),
        Err(_) => Err(format!(
            "'{}' is not a number of seconds (e.g. 60 or 0.5; from 0.001 to 604800)",
            shown(text)
        )),
    }
}

/// Parses a rate in GB/s (decimal, 1e9 bytes per second), with or without
/// the unit: `2`, `0.5GB/s`, `4 GB/s`, from 0.001 to 10000 GB/s
/// ([`MIN_RATE`] to [`MAX_RATE`]). Returns bytes per second.
pub fn rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let t = t
        .strip_suffix("GB/s")
        .or_else(|| t.strip_suffix("gb/s"))
        .unwrap_or(t)
        .trim();
    match t.parse::<f64>() {
        Ok(v) if (MIN_RATE..=MAX_RATE).contains(&(v * 1e9)) => Ok(v * 1e9),
        Ok(_) => Err(format!(
            "'{}' is out of range: give a positive number of GB/s from 0.001 to 10000",
            shown(text)
        )),
        Err(_) => Err(format!(
            "'{}' is not a rate; write GB/s like 0.5, 2 or 4GB/s (from 0.001 to 10000)",
            shown(text)
        )),
    }
}

/// Parses a pause in whole nanoseconds, from 0 to [`MAX_DELAY_NS`] (one
/// second).
pub fn delay_ns(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|v| *v <= MAX_DELAY_NS)
        .ok_or_else(|| {
            format!(
                "'{}' is not a whole number of nanoseconds from 0 to 1000000000 (one second)",
                shown(text)
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size("4096").unwrap(), 4096);
        assert_eq!(size("64K").unwrap(), 65536);
        assert_eq!(size("1GiB").unwrap(), 1 << 30);
        assert_eq!(size("1.5m").unwrap(), 3 << 19);
        assert_eq!(size("128T").unwrap(), MAX_SIZE);
        assert!(size("12Q").unwrap_err().contains("valid: B, K, M, G, T"));
        assert!(size("-3").unwrap_err().contains("is not a size"));
        assert!(size("").is_err());
        assert!(size("1e308")
            .unwrap_err()
            .contains("unknown size unit 'e308'"));
        assert!(size("129T").unwrap_err().contains("at most 128T"));
        assert!(size("99999999T").unwrap_err().contains("too large"));
        let huge = "9".repeat(400);
        let e = size(&huge).unwrap_err();
        assert!(e.contains("too large") && e.len() < 200, "{e}");
    }

    #[test]
    fn seconds_have_a_range() {
        assert_eq!(seconds("60").unwrap(), 60.0);
        assert_eq!(seconds(" 0.5s ").unwrap(), 0.5);
        assert_eq!(seconds("604800").unwrap(), MAX_SECONDS);
        assert_eq!(seconds("0.001").unwrap(), MIN_SECONDS);
        for bad in ["0", "-1", "inf", "NaN", "1e308", "604801", "0.0009"] {
            let e = seconds(bad).unwrap_err();
            assert!(e.contains("from 0.001 to 604800"), "{bad}: {e}");
            assert!(e.contains("positive"), "{bad}: {e}");
        }
        assert!(seconds("soon")
            .unwrap_err()
            .contains("not a number of seconds"));
    }

    #[test]
    fn rates_have_a_range() {
        assert_eq!(rate("2").unwrap(), 2e9);
        assert_eq!(rate("0.5GB/s").unwrap(), 0.5e9);
        assert_eq!(rate("4 GB/s").unwrap(), 4e9);
        assert_eq!(rate("10000").unwrap(), MAX_RATE);
        assert_eq!(rate("0.001").unwrap(), MIN_RATE);
        for bad in ["-1", "0", "1e308", "inf", "NaN", "10001", "1e-300"] {
            let e = rate(bad).unwrap_err();
            assert!(
                e.contains("positive number of GB/s from 0.001 to 10000"),
                "{bad}: {e}"
            );
        }
        assert!(rate("fast").unwrap_err().contains("not a rate"));
    }

    #[test]
    fn delays_have_a_range() {
        assert_eq!(delay_ns("0").unwrap(), 0);
        assert_eq!(delay_ns(" 500 ").unwrap(), 500);
        assert_eq!(delay_ns("1000000000").unwrap(), MAX_DELAY_NS);
        for bad in ["-5", "1000000001", "18446744073709551616", "1.5", "x"] {
            let e = delay_ns(bad).unwrap_err();
            assert!(e.contains("from 0 to 1000000000"), "{bad}: {e}");
        }
    }
}
