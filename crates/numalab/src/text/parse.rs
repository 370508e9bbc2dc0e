//! Reading what people write: sizes (`64M`, `1GiB`), seconds (`60`,
//! `0.5s`) and rates (`2`, `0.5GB/s`). Each error is one line that names
//! the problem and shows valid forms; callers prefix the option name.

/// Parses a size like `64M`, `1GiB`, `4096`, `2.5G` (binary units: K = 1024).
pub fn size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            format!("'{text}' is not a size; write e.g. 4096, 64K, 256M, 1G (binary units)")
        })?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        u => {
            return Err(format!(
                "unknown size unit '{u}' in '{text}'; valid: B, K, M, G, T (binary: K = 1024)"
            ))
        }
    };
    let bytes = value * mult as f64;
    if bytes >= u64::MAX as f64 / 2.0 {
        return Err(format!("size '{text}' is too large"));
    }
    Ok(bytes.round() as u64)
}

/// Parses a positive, finite number of seconds (`60`, `0.5`, `2s`).
pub fn seconds(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let t = t.strip_suffix('s').unwrap_or(t).trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(_) => Err(format!(
            "'{text}' is not a positive number of seconds (e.g. 60 or 0.5)"
        )),
        Err(_) => Err(format!(
            "'{text}' is not a number of seconds (e.g. 60 or 0.5)"
        )),
    }
}

/// Parses a positive rate in GB/s (decimal, 1e9 bytes per second), with or
/// without the unit: `2`, `0.5GB/s`, `4 GB/s`. Returns bytes per second.
pub fn rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let t = t
        .strip_suffix("GB/s")
        .or_else(|| t.strip_suffix("gb/s"))
        .unwrap_or(t)
        .trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * 1e9),
        Ok(_) => Err(format!("'{text}' must be a positive number of GB/s")),
        Err(_) => Err(format!(
            "'{text}' is not a rate; write GB/s like 0.5, 2 or 4GB/s"
        )),
    }
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
        assert!(size("12Q").unwrap_err().contains("valid: B, K, M, G, T"));
        assert!(size("-3").is_err());
        assert!(size("").is_err());
        assert!(size("99999999T").unwrap_err().contains("too large"));
    }

    #[test]
    fn seconds_and_rates() {
        assert_eq!(seconds("60").unwrap(), 60.0);
        assert_eq!(seconds(" 0.5s ").unwrap(), 0.5);
        assert!(seconds("0").unwrap_err().contains("positive"));
        assert!(seconds("inf").unwrap_err().contains("positive"));
        assert!(seconds("soon")
            .unwrap_err()
            .contains("not a number of seconds"));
        assert_eq!(rate("2").unwrap(), 2e9);
        assert_eq!(rate("0.5GB/s").unwrap(), 0.5e9);
        assert_eq!(rate("4 GB/s").unwrap(), 4e9);
        assert!(rate("-1").unwrap_err().contains("positive"));
        assert!(rate("fast").unwrap_err().contains("not a rate"));
    }
}
