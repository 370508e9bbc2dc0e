//! Numbers for people, with one rounding rule: three significant digits,
//! trailing zeros dropped (`1.25 MiB`, `31.3 GiB`, `512 KiB`, `4 KiB`).
//! Percentages keep two significant digits (`5.3%`, `45%`, `100%`). Tables
//! that need fixed decimals use [`fixed`] and [`trimmed`].
//!
//! Finite numbers of 10^15 or more in magnitude (nothing measured comes
//! near; only a corrupt or hostile input can) are written in exponent form
//! (`1.23e308`) by every function here, so no cell or sentence ever holds a
//! 300-digit number. Numbers that are not finite are `-` (or an empty
//! cell), never `inf` or `NaN`.

use std::collections::BTreeMap;

/// Magnitude from which numbers are written in exponent form.
const HUGE: f64 = 1e15;

/// `v` in exponent form with `digits` significant digits when it is
/// [`HUGE`] or more in magnitude; `pad` keeps the mantissa's trailing zeros.
fn exponent_form(v: f64, digits: usize, pad: bool) -> Option<String> {
    if v.abs() < HUGE {
        return None;
    }
    let s = format!("{v:.prec$e}", prec = digits.clamp(1, 17) - 1);
    if pad {
        return Some(s);
    }
    let (mantissa, exp) = s.split_once('e')?;
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    Some(format!("{mantissa}e{exp}"))
}

/// At most `max_chars` characters of `text`, with `...` when cut: what an
/// error message quotes of an input, so a hostile argument cannot make the
/// line unreadable.
pub fn excerpt(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}...", &text[..cut]),
    }
}

/// Binary units of [`bytes`].
const BYTE_UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// `v` with `digits` significant digits (at most 12 decimals), trailing
/// zeros and a trailing point dropped; never in exponent form. Not finite:
/// `-`.
pub fn significant(v: f64, digits: usize) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    if let Some(e) = exponent_form(v, digits, false) {
        return e;
    }
    trimmed(v, significant_decimals(v, digits))
}

/// [`significant`] with its trailing zeros kept, for columns where the
/// digits shown say how precise each number is: `100.0`, `1.250`.
pub fn significant_padded(v: f64, digits: usize) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    if let Some(e) = exponent_form(v, digits, true) {
        return e;
    }
    fixed(v, significant_decimals(v, digits))
}

/// Decimals that show `v` with `digits` significant digits (at most 12).
fn significant_decimals(v: f64, digits: usize) -> usize {
    let magnitude = v.abs().log10().floor() as i64;
    (digits.max(1) as i64 - 1 - magnitude).clamp(0, 12) as usize
}

/// `v` with `decimals` decimals, then trailing zeros (and point) dropped:
/// `trimmed(2.50, 2)` is `2.5`, `trimmed(3.0, 1)` is `3`. Not finite: `-`.
pub fn trimmed(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if let Some(e) = exponent_form(v, 3, false) {
        return e;
    }
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// `v` with exactly `decimals` decimals; empty when not finite (table cells).
pub fn fixed(v: f64, decimals: usize) -> String {
    if let Some(e) = exponent_form(v, 3, true).filter(|_| v.is_finite()) {
        e
    } else if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        String::new()
    }
}

/// A count with thousands separators, as perf stat prints counts:
/// `6,324,039,230`.
pub fn grouped(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A byte count in binary units: `100 B`, `512 KiB`, `1.5 GiB`, `1.25 MiB`.
pub fn bytes(b: u64) -> String {
    bytes_f64(b as f64)
}

/// [`bytes`] of a real number (axis ticks, averages).
pub fn bytes_f64(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let mut x = v;
    let mut k = 0;
    while x.abs() >= 1024.0 && k + 1 < BYTE_UNITS.len() {
        x /= 1024.0;
        k += 1;
    }
    if k == 0 {
        return format!("{} B", x.round() as i64);
    }
    format!("{} {}", significant(x, 3), BYTE_UNITS[k])
}

/// A fraction as a percentage with two significant digits: `0.053` is
/// `5.3%`, `0.45` is `45%`, `1.0` is `100%`. Not finite: `-`.
pub fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if !p.is_finite() {
        return "-".into();
    }
    if p.is_finite() && (100.0..HUGE).contains(&p.abs()) {
        return format!("{}%", p.round() as i64);
    }
    format!("{}%", significant(p, 2))
}

/// `1 thread`, `2 threads`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `s` when `n` is not one: `format!("CPU{}", s(n))`.
pub fn s(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Each node's share of some pages, nodes without pages left out:
/// `node 0 25%, node 1 75%` (shares rounded to whole percent).
pub fn page_shares(pages_by_node: &BTreeMap<u32, u64>) -> String {
    let total: u64 = pages_by_node.values().sum();
    pages_by_node
        .iter()
        .filter(|(_, &p)| p > 0)
        .map(|(n, &p)| format!("node {n} {:.0}%", 100.0 * p as f64 / total.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rounding_rule() {
        assert_eq!(significant(1.25, 3), "1.25");
        assert_eq!(significant(31.26, 3), "31.3");
        assert_eq!(significant(1000.0, 3), "1000");
        assert_eq!(significant(0.000123456, 3), "0.000123");
        assert_eq!(significant(2.0, 3), "2");
        assert_eq!(significant(-0.5, 2), "-0.5");
        assert_eq!(significant(f64::NAN, 3), "-");
        assert_eq!(significant_padded(100.0, 4), "100.0");
        assert_eq!(significant_padded(1.25, 4), "1.250");
        assert_eq!(significant_padded(12345.6, 4), "12346");
        assert_eq!(trimmed(2.50, 2), "2.5");
        assert_eq!(trimmed(-0.001, 1), "0");
        assert_eq!(fixed(1.23456, 2), "1.23");
        assert_eq!(fixed(f64::INFINITY, 2), "");
    }

    #[test]
    fn huge_numbers_in_exponent_form() {
        assert_eq!(significant(1e308, 3), "1e308");
        assert_eq!(significant(-1.2345e20, 3), "-1.23e20");
        assert_eq!(significant(999e12, 3), "999000000000000");
        assert_eq!(significant(f64::MAX, 3), "1.8e308");
        assert_eq!(significant_padded(1e308, 4), "1.000e308");
        assert_eq!(trimmed(1e300, 2), "1e300");
        assert_eq!(trimmed(f64::NEG_INFINITY, 2), "-");
        assert_eq!(fixed(2.5e200, 1), "2.50e200");
        assert_eq!(percent(1e300), "1e302%");
        assert_eq!(percent(f64::NAN), "-");
        assert_eq!(bytes_f64(1e308), "8.67e289 EiB");
        for v in [1e15, 1e100, f64::MAX, -f64::MAX, 123456789e10] {
            for text in [
                significant(v, 3),
                significant_padded(v, 4),
                trimmed(v, 2),
                fixed(v, 2),
                percent(v),
                bytes_f64(v),
            ] {
                assert!(text.len() < 20, "{v}: {text}");
                assert!(
                    !text.contains("inf") && !text.contains("NaN"),
                    "{v}: {text}"
                );
            }
        }
    }

    #[test]
    fn excerpts_cut_long_text() {
        assert_eq!(excerpt("short", 10), "short");
        assert_eq!(excerpt("0123456789abc", 10), "0123456789...");
        assert_eq!(excerpt("ééééé", 2), "éé...");
        assert_eq!(excerpt("", 0), "");
    }

    #[test]
    fn bytes_and_percent() {
        assert_eq!(bytes(100), "100 B");
        assert_eq!(bytes(512 << 10), "512 KiB");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
        assert_eq!(bytes(1280 << 10), "1.25 MiB");
        assert_eq!(bytes(48 << 10), "48 KiB");
        assert_eq!(bytes(1 << 30), "1 GiB");
        assert_eq!(bytes((31.26 * (1u64 << 30) as f64) as u64), "31.3 GiB");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(u64::MAX), "16 EiB");
        assert_eq!(bytes_f64(4096.0), "4 KiB");
        assert_eq!(percent(0.053), "5.3%");
        assert_eq!(percent(0.45), "45%");
        assert_eq!(percent(1.0), "100%");
        assert_eq!(percent(0.0), "0%");
        assert_eq!(plural(1, "CPU", "CPUs"), "1 CPU");
        assert_eq!(plural(3, "CPU", "CPUs"), "3 CPUs");
        let pages: BTreeMap<u32, u64> = [(0, 1), (1, 3), (2, 0)].into_iter().collect();
        assert_eq!(page_shares(&pages), "node 0 25%, node 1 75%");
    }
}
