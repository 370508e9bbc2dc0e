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

/// A position in the characters of a document being parsed.
struct Scanner {
    b: Vec<char>,
    i: usize,
}

impl Scanner {
    fn at_end(&self) -> bool {
        self.i >= self.b.len()
    }

    fn peek(&self) -> Option<char> {
        self.b.get(self.i).copied()
    }

    /// Skips white space; whether there was any.
    fn skip_ws(&mut self) -> bool {
        let start = self.i;
        while self.peek().is_some_and(char::is_whitespace) {
            self.i += 1;
        }
        self.i > start
    }

    /// The characters from `start` to the current position.
    fn since(&self, start: usize) -> String {
        self.b[start..self.i].iter().collect()
    }

    /// An element or attribute name.
    fn name(&mut self) -> Result<String, String> {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|c| is_name_char(c, self.i == start))
        {
            self.i += 1;
        }
        if self.i == start {
            return Err(format!("expected a name at {start}"));
        }
        Ok(self.since(start))
    }

    /// The attributes of a start tag `<name`, up to and including its `>`
    /// or `/>`; whether the element closes itself.
    fn attributes(&mut self, name: &str) -> Result<(Vec<(String, String)>, bool), String> {
        let mut attrs: Vec<(String, String)> = Vec::new();
        loop {
            let ws = self.skip_ws();
            match self.peek() {
                None => return Err(format!("unclosed <{name}")),
                Some('>') => {
                    self.i += 1;
                    return Ok((attrs, false));
                }
                Some('/') => {
                    if self.b.get(self.i + 1) != Some(&'>') {
                        return Err(format!("stray / in <{name}"));
                    }
                    self.i += 2;
                    return Ok((attrs, true));
                }
                Some(_) => {}
            }
            if !ws {
                return Err(format!("no space before an attribute of <{name}"));
            }
            let an = self.name()?;
            self.skip_ws();
            if self.peek() != Some('=') {
                return Err(format!("attribute {an} of <{name}> without ="));
            }
            self.i += 1;
            self.skip_ws();
            let raw = self.quoted(&an, name)?;
            if attrs.iter().any(|(k, _)| *k == an) {
                return Err(format!("duplicate attribute {an} on <{name}>"));
            }
            attrs.push((an, decode(&raw)?));
        }
    }

    /// The raw value of attribute `an` of `<name>`, between its quotes.
    fn quoted(&mut self, an: &str, name: &str) -> Result<String, String> {
        let q = self.peek().ok_or("eof")?;
        if q != '"' && q != '\'' {
            return Err(format!("attribute {an} of <{name}> not quoted"));
        }
        self.i += 1;
        let start = self.i;
        while !self.at_end() && self.b[self.i] != q {
            if self.b[self.i] == '<' {
                return Err(format!("< in attribute {an} of <{name}>"));
            }
            self.i += 1;
        }
        if self.at_end() {
            return Err(format!("unterminated attribute {an}"));
        }
        let raw = self.since(start);
        self.i += 1;
        Ok(raw)
    }
}

/// A small well-formedness checker and parser: one root element, tags
/// balanced, names valid, attributes quoted, unique and free of `<`, no
/// raw `&` anywhere, no text outside the root.
pub(super) fn parse(xml: &str) -> Result<Vec<El>, String> {
    let mut els: Vec<El> = Vec::new();
    let mut stack: Vec<usize> = Vec::new();
    let mut root_seen = false;
    let mut sc = Scanner {
        b: xml.chars().collect(),
        i: 0,
    };
    while !sc.at_end() {
        if sc.b[sc.i] != '<' {
            let start = sc.i;
            while sc.peek().is_some_and(|c| c != '<') {
                sc.i += 1;
            }
            let text = decode(&sc.since(start))?;
            match stack.last() {
                Some(&p) => els[p].text.push_str(&text),
                None if text.trim().is_empty() => {}
                None => return Err(format!("text outside the root: {text:?}")),
            }
            continue;
        }
        let rest: String = sc.b[sc.i..(sc.i + 4).min(sc.b.len())].iter().collect();
        if rest.starts_with("<!--") {
            let s: String = sc.b[sc.i..].iter().collect();
            let end = s.find("-->").ok_or("unclosed comment")?;
            if s[4..end].contains("--") {
                return Err("-- in comment".into());
            }
            sc.i += s[..end + 3].chars().count();
            continue;
        }
        if rest.starts_with("</") {
            sc.i += 2;
            let name = sc.name()?;
            sc.skip_ws();
            if sc.peek() != Some('>') {
                return Err(format!("bad end tag </{name}"));
            }
            sc.i += 1;
            let open = stack.pop().ok_or(format!("unmatched </{name}>"))?;
            if els[open].name != name {
                return Err(format!("<{}> closed by </{name}>", els[open].name));
            }
            continue;
        }
        sc.i += 1;
        let name = sc.name()?;
        if stack.is_empty() {
            if root_seen {
                return Err("a second root element".into());
            }
            root_seen = true;
        }
        let (attrs, self_closing) = sc.attributes(&name)?;
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

/// The width of the root element's viewBox.
pub(super) fn view_width(els: &[El]) -> f64 {
    els[0]
        .attr("viewBox")
        .unwrap()
        .split(' ')
        .nth(2)
        .unwrap()
        .parse()
        .unwrap()
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
        scale_note: None,
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
