//! Text metrics without a font: the charts are laid out before any browser
//! sees them, so label widths are estimated from per-character advances of
//! a typical sans-serif UI font, generously enough that labels do not
//! collide.

/// Approximate advance width of `s` in a sans-serif UI font of `size` px.
pub(super) fn text_w(s: &str, size: f64) -> f64 {
    let em: f64 = s
        .chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | 'I' | '(' | ')' | '['
            | ']' | 'f' | 't' | 'r' => 0.33,
            ' ' => 0.3,
            'm' | 'w' | 'M' | 'W' | '@' | '%' => 0.9,
            'A'..='Z' => 0.68,
            '0'..='9' => 0.58,
            c if c.is_ascii() => 0.56,
            _ => 0.75,
        })
        .sum();
    em * size
}

/// The width of the widest of `texts` at `size` px (0 for none).
pub(super) fn widest<S: AsRef<str>>(texts: impl IntoIterator<Item = S>, size: f64) -> f64 {
    texts
        .into_iter()
        .map(|s| text_w(s.as_ref(), size))
        .fold(0.0, f64::max)
}

/// `s` cut (with "…") to at most `max_w` px at `size` px.
pub(super) fn fit_text(s: &str, size: f64, max_w: f64) -> String {
    if text_w(s, size) <= max_w {
        return s.to_string();
    }
    let mut out = String::new();
    for c in s.chars() {
        let mut next = out.clone();
        next.push(c);
        if text_w(&next, size) + text_w("…", size) > max_w {
            break;
        }
        out = next;
    }
    out.push('…');
    out
}
