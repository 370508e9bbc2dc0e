//! What can be checked of the text itself: it is XML laid out as hwloc
//! writes it, which hwloc's own small XML reader (hwloc built without
//! libxml2) needs.

use super::values::quote;
use super::Checker;
use roxmltree::{Document, NodeType};

/// What can be said before parsing: the text is XML laid out as hwloc
/// writes it. hwloc built without libxml2 reads XML with its own small
/// reader, which expects exactly that layout: `<?xml ` and `<!DOCTYPE `
/// lines, then `<topology` at the start of a line.
pub(super) fn check_text(text: &str) -> Result<(), String> {
    if text.contains('\0') {
        return Err("the file contains NUL bytes".to_string());
    }
    if text.trim().is_empty() {
        return Err("the file is empty".to_string());
    }
    if text.starts_with('\u{feff}') {
        return Err(format!(
            "the file starts with a byte-order mark, which {LAYOUT}"
        ));
    }
    if !text.trim_start().starts_with('<') {
        return Err("the file does not start with an XML tag".to_string());
    }
    if !text.contains("<topology") {
        return Err("no <topology> element".to_string());
    }
    if !text.trim_end().ends_with("</topology>") {
        return Err("the file is truncated (it does not end with </topology>)".to_string());
    }
    if text.contains("<!ENTITY") {
        // Entities can expand a small file into gigabytes, and hwloc never
        // writes them.
        return Err(
            "it declares XML entities (<!ENTITY>), which hwloc topologies never use".to_string(),
        );
    }
    if text.contains('\r') {
        return Err(format!(
            "the file has Windows line endings (CR LF), which {LAYOUT} (dos2unix converts it)"
        ));
    }
    let mut rest = text;
    while rest.starts_with("<?xml ") || rest.starts_with("<!DOCTYPE ") {
        rest = rest.split_once('\n').map_or("", |(_, r)| r);
    }
    if !rest.starts_with("<topology version=\"") && !rest.starts_with("<topology>") {
        return Err(format!(
            "<topology> does not start the line after the <?xml ...?> and <!DOCTYPE ...> lines, which {LAYOUT}"
        ));
    }
    Ok(())
}

/// Why a file must be laid out as hwloc writes it.
const LAYOUT: &str =
    "hwloc's own XML reader (hwloc without libxml2) cannot read: export the file again with lstopo --of xml";

/// What hwloc's own XML reader cannot read although it is XML: comments,
/// processing instructions, CDATA, entities other than the five it knows,
/// text between elements, single-quoted or spaced attributes, a newline
/// after a tag name, a '>' inside an attribute value, a space in an end tag.
pub(super) fn check_layout(doc: &Document, text: &str, lines: &Checker) -> Result<(), String> {
    for node in doc.descendants() {
        let raw = &text[node.range()];
        // Text starts with the line break before it: name the line of what
        // is wrong in it.
        let lead = raw.len() - raw.trim_start().len();
        let at = || format!("line {}", lines.line_at(node.range().start + lead));
        match node.node_type() {
            NodeType::Root => {}
            NodeType::Comment | NodeType::PI => {
                return Err(format!(
                    "{}: a comment or processing instruction, which {LAYOUT}",
                    at()
                ))
            }
            NodeType::Text => {
                let content = node.parent_element().is_some_and(|p| {
                    matches!(p.tag_name().name(), "indexes" | "u64values" | "userdata")
                });
                // roxmltree merges CDATA and entities into the text around
                // them, keeping the range of one piece: compare both forms.
                let decoded = node.text().unwrap_or("");
                if content {
                    if raw.contains('&') || raw.contains('<') || decoded != raw {
                        return Err(format!(
                            "{}: entities or CDATA in the content of <{}>, which {LAYOUT}",
                            at(),
                            node.parent_element().map_or("", |p| p.tag_name().name())
                        ));
                    }
                } else if ![raw, decoded]
                    .iter()
                    .all(|t| t.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n')))
                {
                    return Err(format!(
                        "{}: text {} between elements, which {LAYOUT}",
                        at(),
                        quote(decoded.trim())
                    ));
                }
            }
            NodeType::Element => {
                let name = node.tag_name().name();
                let after = raw.as_bytes().get(1 + name.len());
                if !raw[1..].starts_with(name) || !matches!(after, Some(b' ' | b'>' | b'/')) {
                    return Err(format!(
                        "{}: <{name}> is not followed by a space, '>' or '/>', which {LAYOUT}",
                        at()
                    ));
                }
                if !raw.ends_with("/>") && !raw.ends_with(&format!("</{name}>")) {
                    return Err(format!(
                        "{}: the end tag of <{name}> is not </{name}>, which {LAYOUT}",
                        at()
                    ));
                }
                for a in node.attributes() {
                    let qname = &text[a.range_qname()];
                    let value = &text[a.range_value()];
                    let syntax_ok = qname.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                        && text[a.range_qname().end..].starts_with("=\"");
                    if !syntax_ok {
                        return Err(format!(
                            "{}: attribute {} is not written name=\"value\" with a lowercase name, which {LAYOUT}",
                            at(),
                            quote(qname)
                        ));
                    }
                    if value.contains('>') || !known_escapes(value) {
                        return Err(format!(
                            "{}: the value of {qname} holds '>' or an entity other than &lt; &gt; &amp; &quot; &#9; &#10; &#13;, which {LAYOUT}",
                            at()
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether every '&' of a raw attribute value starts an escape hwloc's own
/// reader decodes.
fn known_escapes(raw: &str) -> bool {
    const KNOWN: [&str; 7] = ["&#10;", "&#13;", "&#9;", "&quot;", "&lt;", "&gt;", "&amp;"];
    raw.match_indices('&')
        .all(|(at, _)| KNOWN.iter().any(|k| raw[at..].starts_with(k)))
}
