//! Escaping for HTML, SVG and XML: one function for every page and chart
//! numalab writes.

/// Escapes text for XML/HTML content and attribute values (`& < > " '`),
/// dropping the control characters XML 1.0 does not allow (tabs and line
/// breaks stay).
pub fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_the_five_characters_and_drops_controls() {
        assert_eq!(
            xml("<a href=\"x\">'&'</a>\u{1}\n"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;\n"
        );
        assert_eq!(xml("plain"), "plain");
    }
}
