//! Attribute values as hwloc writes them: whole numbers, bitmaps, PCI bus
//! ids, and values quoted for a one-line message.

use super::{MAX_OS_INDEX, QUOTE_CHARS};
use crate::IdSet;

/// A value quoted for a one-line message: bounded, no control characters.
pub(super) fn quote(value: &str) -> String {
    let mut q: String = value
        .chars()
        .take(QUOTE_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if value.chars().count() > QUOTE_CHARS {
        q.push_str("...");
    }
    format!("\"{q}\"")
}

/// A whole number written the way hwloc writes them: decimal digits only.
pub(super) fn decimal(value: &str) -> Option<u64> {
    if value.is_empty() || value.len() > 20 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// A signed whole number in decimal.
pub(super) fn signed(value: &str) -> Option<i64> {
    let digits = value.strip_prefix('-').unwrap_or(value);
    decimal(digits)?;
    value.parse().ok()
}

/// An hwloc bitmap string (`0x000000ff,0xffffffff`, zero words may be
/// empty between commas) as a set of ids below [`MAX_OS_INDEX`].
pub(crate) fn bitmap(value: &str) -> Result<IdSet, String> {
    const WORDS: usize = (MAX_OS_INDEX / 32) as usize;
    if value.is_empty() {
        return Err("is empty (hwloc writes 0x0 for an empty set)".to_string());
    }
    if value.starts_with("0xf...f") {
        return Err("is an infinite set, which no machine has".to_string());
    }
    let count = value.bytes().filter(|&b| b == b',').count() + 1;
    if count > WORDS {
        return Err(format!(
            "has {count} words of 32 bits, more than the {WORDS} that ids below {MAX_OS_INDEX} need"
        ));
    }
    if value.starts_with(',') || value.ends_with(',') {
        return Err("starts or ends with a comma".to_string());
    }
    let mut wide = vec![0u64; count.div_ceil(2)];
    for (index, word) in value.rsplit(',').enumerate() {
        if word.is_empty() {
            continue;
        }
        let bits = word
            .strip_prefix("0x")
            .filter(|h| !h.is_empty() && h.len() <= 8 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| {
                format!(
                    "has the word {} where 0x and 1 to 8 hex digits belong",
                    quote(word)
                )
            })?;
        wide[index / 2] |= u64::from(bits) << (32 * (index % 2));
    }
    Ok(IdSet::from_words(&wide))
}

/// `dddd:bb:dd.f` in hex, as hwloc writes PCI bus ids.
pub(super) fn pci_busid(v: &str) -> bool {
    let hex = |s: &str, max: usize| {
        !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let mut parts = v.splitn(3, ':');
    let (Some(domain), Some(bus), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Some((dev, func)) = rest.split_once('.') else {
        return false;
    };
    hex(domain, 8) && hex(bus, 2) && hex(dev, 2) && hex(func, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_as_hwloc_writes_them() {
        let s = |t: &str| IdSet::parse_list(t).unwrap();
        assert_eq!(bitmap("0x0").unwrap(), IdSet::new());
        assert_eq!(bitmap("0x00000003").unwrap(), s("0-1"));
        assert_eq!(bitmap("0x00000001,0x00000000").unwrap(), s("32"));
        assert_eq!(
            bitmap("0x00000303,0x03030000,,0x03030303").unwrap().len(),
            16
        );
        assert_eq!(
            bitmap("0x00000001,,,").unwrap_err(),
            "starts or ends with a comma"
        );
        assert_eq!(bitmap(",0x1").unwrap_err(), "starts or ends with a comma");
        assert!(bitmap("").unwrap_err().starts_with("is empty"));
        assert!(bitmap("0xf...f").unwrap_err().contains("infinite"));
        assert!(bitmap("0xf...f,0x1").unwrap_err().contains("infinite"));
        assert!(bitmap("0x123456789")
            .unwrap_err()
            .contains("1 to 8 hex digits"));
        assert!(bitmap("12").unwrap_err().contains("1 to 8 hex digits"));
        assert!(bitmap("0x-1").unwrap_err().contains("1 to 8 hex digits"));
        let long = vec!["0x1"; 2049].join(",");
        assert!(bitmap(&long).unwrap_err().contains("2049 words"));
        let widest = vec!["0x80000000"; 2048].join(",");
        assert_eq!(bitmap(&widest).unwrap().last(), Some(MAX_OS_INDEX - 1));
    }

    #[test]
    fn numbers_as_hwloc_writes_them() {
        assert_eq!(decimal("42"), Some(42));
        assert_eq!(decimal(""), None);
        assert_eq!(decimal("-1"), None);
        assert_eq!(decimal(" 1"), None);
        assert_eq!(decimal("0x10"), None);
        assert_eq!(decimal("18446744073709551616"), None);
        assert_eq!(signed("-1"), Some(-1));
        assert_eq!(signed("--1"), None);
        assert!(pci_busid("0000:00:1f.3"));
        assert!(!pci_busid("0000:00:1f"));
        assert!(!pci_busid("0000:000:1f.3"));
    }

    #[test]
    fn quotes_stay_on_one_short_line() {
        assert_eq!(quote("a\nb"), "\"a?b\"");
        assert_eq!(quote(&"x".repeat(50)), format!("\"{}...\"", "x".repeat(40)));
    }
}
