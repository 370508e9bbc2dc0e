//! What the chart tests share: a small XML parser that checks
//! well-formedness (so that every test also proves the markup is valid),
//! queries over the parsed elements, checks of the style contract, and
//! inputs used by tests of more than one chart.

use super::{Axis, Heatmap, Scale, TickFormat};

/// One element of a parsed document.
#[derive(Debug)]
pub(super) struct El {
    pub(super) name: String,
    pub(super) attrs: Vec<(String, String)>,
    /// Direct text content, entities decoded.
    pub(super) text: String,
    pub(super) children: Vec<usize>,
}

impl El {
    pub(super) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub(super) fn num(&self, name: &str) -> f64 {
        self.attr(name)
            .unwrap_or_else(|| panic!("no {name} on {self:?}"))
            .parse()
            .unwrap()
    }
    pub(super) fn has_class(&self, c: &str) -> bool {
        self.attr("class")
            .is_some_and(|v| v.split_whitespace().any(|t| t == c))
    }
}

/// Decodes the five predefined entities and character references,
/// rejecting a bare `&` or an unknown entity.
fn decode(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let end = after
            .find(';')
            .filter(|&e| e <= 10)
            .ok_or_else(|| format!("bare & in {s:?}"))?;
        let ent = &after[..end];
        let c = match ent {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ if ent.starts_with("#x") => u32::from_str_radix(&ent[2..], 16)
                .ok()
                .and_then(char::from_u32)
                .ok_or_else(|| format!("bad reference &{ent};"))?,
            _ if ent.starts_with('#') => ent[1..]
                .parse::<u32>()
                .ok()
                .and_then(char::from_u32)
                .ok_or_else(|| format!("bad reference &{ent};"))?,
            _ => return Err(format!("unknown entity &{ent};")),
        };
        out.push(c);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if out
        .chars()
        .any(|c| (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r'))
    {
        return Err(format!("control character in {s:?}"));
    }
    Ok(out)
}

fn is_name_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic()
        || c == '_'
        || c == ':'
        || (!first && (c.is_ascii_digit() || c == '-' || c == '.'))
}

/// A small well-formedness checker and parser: one root element, tags
/// balanced, names valid, attributes quoted, unique and free of `<`, no
/// raw `&` anywhere, no text outside the root.
pub(super) fn parse(xml: &str) -> Result<Vec<El>, String> {
    let mut els: Vec<El> = Vec::new();
    let mut stack: Vec<usize> = Vec::new();
    let mut root_seen = false;
    let b: Vec<char> = xml.chars().collect();
    let mut i = 0;
    let name_at = |i: &mut usize| -> Result<String, String> {
        let start = *i;
        while *i < b.len() && is_name_char(b[*i], *i == start) {
            *i += 1;
        }
        if *i == start {
            return Err(format!("expected a name at {start}"));
        }
        Ok(b[start..*i].iter().collect())
    };
    while i < b.len() {
        if b[i] == '<' {
            let rest: String = b[i..(i + 4).min(b.len())].iter().collect();
            if rest.starts_with("<!--") {
                let s: String = b[i..].iter().collect();
                let end = s.find("-->").ok_or("unclosed comment")?;
                if s[4..end].contains("--") {
                    return Err("-- in comment".into());
                }
                i += end + 3;
                continue;
            }
            if rest.starts_with("</") {
                i += 2;
                let name = name_at(&mut i)?;
                while i < b.len() && b[i].is_whitespace() {
                    i += 1;
                }
                if i >= b.len() || b[i] != '>' {
                    return Err(format!("bad end tag </{name}"));
                }
                i += 1;
                let open = stack.pop().ok_or(format!("unmatched </{name}>"))?;
                if els[open].name != name {
                    return Err(format!("<{}> closed by </{name}>", els[open].name));
                }
                continue;
            }
            i += 1;
            let name = name_at(&mut i)?;
            if stack.is_empty() {
                if root_seen {
                    return Err("a second root element".into());
                }
                root_seen = true;
            }
            let mut attrs: Vec<(String, String)> = Vec::new();
            let self_closing;
            loop {
                let ws = i < b.len() && b[i].is_whitespace();
                while i < b.len() && b[i].is_whitespace() {
                    i += 1;
                }
                if i >= b.len() {
                    return Err(format!("unclosed <{name}"));
                }
                if b[i] == '>' {
                    i += 1;
                    self_closing = false;
                    break;
                }
                if b[i] == '/' {
                    if b.get(i + 1) != Some(&'>') {
                        return Err(format!("stray / in <{name}"));
                    }
                    i += 2;
                    self_closing = true;
                    break;
                }
                if !ws {
                    return Err(format!("no space before an attribute of <{name}"));
                }
                let an = name_at(&mut i)?;
                while i < b.len() && b[i].is_whitespace() {
                    i += 1;
                }
                if b.get(i) != Some(&'=') {
                    return Err(format!("attribute {an} of <{name}> without ="));
                }
                i += 1;
                while i < b.len() && b[i].is_whitespace() {
                    i += 1;
                }
                let q = *b.get(i).ok_or("eof")?;
                if q != '"' && q != '\'' {
                    return Err(format!("attribute {an} of <{name}> not quoted"));
                }
                i += 1;
                let start = i;
                while i < b.len() && b[i] != q {
                    if b[i] == '<' {
                        return Err(format!("< in attribute {an} of <{name}>"));
                    }
                    i += 1;
                }
                if i >= b.len() {
                    return Err(format!("unterminated attribute {an}"));
                }
                let raw: String = b[start..i].iter().collect();
                i += 1;
                if attrs.iter().any(|(k, _)| *k == an) {
                    return Err(format!("duplicate attribute {an} on <{name}>"));
                }
                attrs.push((an, decode(&raw)?));
            }
            let idx = els.len();
            if let Some(&p) = stack.last() {
                els[p].children.push(idx);
            }
            els.push(El {
                name,
                attrs,
                text: String::new(),
                children: Vec::new(),
            });
            if !self_closing {
                stack.push(idx);
            }
        } else {
            let start = i;
            while i < b.len() && b[i] != '<' {
                i += 1;
            }
            let raw: String = b[start..i].iter().collect();
            let text = decode(&raw)?;
            match stack.last() {
                Some(&p) => els[p].text.push_str(&text),
                None if text.trim().is_empty() => {}
                None => return Err(format!("text outside the root: {text:?}")),
            }
        }
    }
    if let Some(&open) = stack.last() {
        return Err(format!("<{}> not closed", els[open].name));
    }
    if !root_seen {
        return Err("no root element".into());
    }
    Ok(els)
}

pub(super) fn doc(xml: &str) -> Vec<El> {
    parse(xml).unwrap_or_else(|e| panic!("not well-formed: {e}\n{xml}"))
}

/// The text of element `i`'s `<title>` child.
pub(super) fn title_of(els: &[El], i: usize) -> Option<String> {
    els[i]
        .children
        .iter()
        .find(|&&c| els[c].name == "title")
        .map(|&c| els[c].text.clone())
}

pub(super) fn find<'a>(els: &'a [El], name: &str, class: &str) -> Vec<(usize, &'a El)> {
    els.iter()
        .enumerate()
        .filter(|(_, e)| e.name == name && (class.is_empty() || e.has_class(class)))
        .collect()
}

/// Root element requirements of the style contract.
pub(super) fn check_root(els: &[El], id: &str, title: &str) {
    let root = &els[0];
    assert_eq!(root.name, "svg");
    assert_eq!(root.attr("id"), Some(id));
    assert_eq!(root.attr("role"), Some("img"));
    assert_eq!(root.attr("width"), Some("100%"));
    assert!(root.attr("viewBox").is_some());
    assert!(root.attr("style").unwrap().contains("max-width:"));
    let labelled = root.attr("aria-labelledby").unwrap();
    let t = els
        .iter()
        .find(|e| e.attr("id") == Some(labelled))
        .expect("aria-labelledby target");
    assert_eq!(t.name, "title");
    assert_eq!(t.text, title);
    assert!(root.children.contains(&1), "title is a child of the root");
    // The title is visible too.
    assert!(find(els, "text", "chart-title")
        .iter()
        .any(|(_, e)| e.text == title));
}

/// No hard-coded colour outside heatmap cells.
pub(super) fn check_no_literal_colours(svg: &str) {
    for bad in [
        "fill=\"#",
        "stroke=\"#",
        "fill:#",
        "stroke:#",
        "black",
        "white",
    ] {
        assert!(!svg.contains(bad), "hard-coded colour {bad}");
    }
}

pub(super) const HOSTILE: &str = "a<b & c>\"d\" 'e' &amp; \u{1}";
pub(super) const HOSTILE_CLEAN: &str = "a<b & c>\"d\" 'e' &amp; ";

pub(super) fn bytes_axis() -> Axis {
    Axis::new("working set (bytes)", Scale::Log2, TickFormat::Bytes)
}

pub(super) fn gbs_axis() -> Axis {
    Axis::new("bandwidth (GB/s)", Scale::Linear, TickFormat::Number)
}

pub(super) fn sample_heatmap(higher_is_better: bool) -> Heatmap {
    Heatmap {
        rows: vec!["node 0".into(), "node 1".into()],
        cols: vec!["m0".into(), "m1".into(), "m2".into()],
        values: vec![
            vec![Some(90.25), Some(140.0), None],
            vec![Some(141.5), Some(250.0), Some(180.0)],
        ],
        row_title: "CPU node".into(),
        col_title: "memory node".into(),
        unit: "ns".into(),
        decimals: 1,
        higher_is_better,
        row_groups: vec![],
        col_groups: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checker_rejects_malformed_markup() {
        assert!(parse("<svg><g></svg>").is_err());
        assert!(parse("<svg a=b/>").is_err());
        assert!(parse("<svg a=\"1\" a=\"2\"/>").is_err());
        assert!(parse("<svg>a & b</svg>").is_err());
        assert!(parse("<svg>a &foo; b</svg>").is_err());
        assert!(parse("<svg a=\"<\"/>").is_err());
        assert!(parse("<svg/><svg/>").is_err());
        assert!(parse("<svg a=\"1\"b=\"2\"/>").is_err());
        assert!(parse("<svg><t>x &lt; &#39;</t></svg>").is_ok());
    }
}
