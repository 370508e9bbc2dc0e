//! Checking an hwloc XML topology in Rust before hwloc sees it.
//!
//! hwloc's importer trusts v2 files: it checks some structure but not that
//! the sets it later dereferences exist (a Group with a `cpuset` and no
//! `complete_cpuset` crashes it), asserts on some malformed bitmaps, sizes
//! arrays from counts in the file, and recurses once per nesting level. It
//! answers most other mistakes with a bare "Invalid argument". This pass
//! parses the file with a bounded, non-recursive parser and checks what the
//! importer needs (every element, attribute and set that hwloc 2 writes, in
//! the order and combinations it writes them) and that numbers have a
//! physical meaning, so that a file either passes or is refused with one
//! line naming the element, the attribute and the object.
//!
//! The rules are those of files hwloc 2.x exports (XML v2); hwloc itself is
//! more lenient in places, never in a way a real export needs.

use crate::IdSet;
use roxmltree::{Document, Node, NodeType, ParsingOptions};
use std::collections::{HashMap, HashSet};

/// Deepest nesting of objects accepted. Real machines nest a dozen levels
/// (machine, package, die, caches, core, PU, plus PCI bridges below); hwloc
/// recurses once per level.
pub const MAX_OBJECT_DEPTH: usize = 64;

/// Most XML nodes (elements, text, comments) parsed: a machine with
/// thousands of PUs and their caches and devices holds a few hundred
/// thousand.
pub const MAX_XML_NODES: u32 = 2_000_000;

/// Most objects accepted.
pub const MAX_OBJECTS: usize = 500_000;

/// Largest OS index of a PU or NUMA node, and largest id in any CPU or node
/// set (hwloc bitmaps): Linux supports at most 8192 CPUs and 1024 nodes by
/// default, so ids above this are corruption, not a machine.
pub const MAX_OS_INDEX: u32 = 1 << 16;

/// Largest cache accepted, in bytes (memory-side caches reach hundreds of
/// GiB; a CPU cache of a TiB does not exist).
pub const MAX_CACHE_BYTES: u64 = 1 << 40;

/// Largest memory of one NUMA node (or the whole machine), in bytes: 1 PiB.
pub const MAX_NODE_BYTES: u64 = 1 << 50;

/// Largest distance or memory attribute value accepted (latencies in ns,
/// bandwidths in MiB/s, capacities in bytes, relative SLIT values).
pub const MAX_ATTRIBUTE_VALUE: u64 = 1 << 53;

/// Most objects in one distance matrix (hwloc allocates the square).
pub const MAX_DISTANCE_OBJECTS: u64 = 4096;

/// Characters of a value quoted in a message.
const QUOTE_CHARS: usize = 40;

/// The families of hwloc object types: which sets they carry and where they
/// may sit in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    /// CPU-side objects: all four sets, only below normal objects.
    Normal,
    /// NUMA nodes and memory-side caches: all four sets, below normal or
    /// memory objects.
    Memory,
    /// Bridges, PCI and OS devices: no sets, below normal or I/O objects.
    Io,
    /// Misc: no sets, anywhere.
    Misc,
}

/// One object type as hwloc 2 writes it.
struct Kind {
    name: &'static str,
    family: Family,
    /// For CPU caches: the level, and whether it is an instruction cache.
    cache: Option<(u64, bool)>,
}

const fn kind(name: &'static str, family: Family, cache: Option<(u64, bool)>) -> Kind {
    Kind {
        name,
        family,
        cache,
    }
}

const KINDS: &[Kind] = &[
    kind("Machine", Family::Normal, None),
    kind("Package", Family::Normal, None),
    kind("Die", Family::Normal, None),
    kind("Core", Family::Normal, None),
    kind("PU", Family::Normal, None),
    kind("Group", Family::Normal, None),
    kind("L1Cache", Family::Normal, Some((1, false))),
    kind("L2Cache", Family::Normal, Some((2, false))),
    kind("L3Cache", Family::Normal, Some((3, false))),
    kind("L4Cache", Family::Normal, Some((4, false))),
    kind("L5Cache", Family::Normal, Some((5, false))),
    kind("L1iCache", Family::Normal, Some((1, true))),
    kind("L2iCache", Family::Normal, Some((2, true))),
    kind("L3iCache", Family::Normal, Some((3, true))),
    kind("NUMANode", Family::Memory, None),
    kind("MemCache", Family::Memory, None),
    kind("Bridge", Family::Io, None),
    kind("PCIDev", Family::Io, None),
    kind("OSDev", Family::Io, None),
    kind("Misc", Family::Misc, None),
];

/// Names hwloc reads as another type (older exports, future types).
const ALIASES: &[(&str, &str)] = &[
    ("Socket", "Package"),
    ("Node", "NUMANode"),
    ("Tile", "Group"),
    ("Module", "Group"),
];

fn kind_named(name: &str) -> Option<&'static Kind> {
    let canonical = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map_or(name, |(_, to)| to);
    KINDS
        .iter()
        .find(|k| k.name.eq_ignore_ascii_case(canonical))
}

fn kind_names() -> String {
    KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// Checks an hwloc XML topology; `Err` is one line naming the problem.
pub fn check(text: &str) -> Result<(), String> {
    check_text(text)?;
    let options = ParsingOptions {
        // hwloc files carry `<!DOCTYPE topology SYSTEM "hwloc2.dtd">`;
        // entity declarations were refused above.
        allow_dtd: true,
        nodes_limit: MAX_XML_NODES,
        ..ParsingOptions::default()
    };
    let doc = Document::parse_with_options(text, options).map_err(|e| match e {
        roxmltree::Error::NodesLimitReached => {
            format!("it holds more than {MAX_XML_NODES} XML nodes, more than any machine needs")
        }
        e => format!("it is not well-formed XML ({e})"),
    })?;
    let mut checker = Checker::new(text);
    check_layout(&doc, text, &checker)?;
    checker.topology(doc.root_element())
}

/// What can be said before parsing: the text is XML laid out as hwloc
/// writes it. hwloc built without libxml2 reads XML with its own small
/// reader, which expects exactly that layout: `<?xml ` and `<!DOCTYPE `
/// lines, then `<topology` at the start of a line.
fn check_text(text: &str) -> Result<(), String> {
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
fn check_layout(doc: &Document, text: &str, lines: &Checker) -> Result<(), String> {
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

/// A value quoted for a one-line message: bounded, no control characters.
fn quote(value: &str) -> String {
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
fn decimal(value: &str) -> Option<u64> {
    if value.is_empty() || value.len() > 20 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// A signed whole number in decimal.
fn signed(value: &str) -> Option<i64> {
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

/// What is known of an object once its attributes are read.
struct Object {
    kind: &'static Kind,
    os_index: Option<u32>,
    complete_cpus: Option<IdSet>,
    complete_nodes: Option<IdSet>,
    line: u32,
}

/// "NUMANode P#3 (line 57)" or "Group (line 12)": written only into
/// messages, never built for objects that pass.
impl std::fmt::Display for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.os_index {
            Some(os) => write!(f, "{} P#{os} (line {})", self.kind.name, self.line),
            None => write!(f, "{} (line {})", self.kind.name, self.line),
        }
    }
}

/// A reference from a distance matrix or memory attribute to an object,
/// resolved once every object is known.
struct Reference {
    /// Who refers, for the message.
    from: String,
    kind: &'static Kind,
    index: u64,
    by_os: bool,
}

struct Checker {
    /// Byte offsets of the text's line breaks, for line numbers.
    newlines: Vec<usize>,
    objects: usize,
    /// gp_index -> type, for references.
    gp: HashMap<u64, &'static str>,
    /// (type, os_index) of PUs and NUMA nodes, for references and duplicates.
    os: HashSet<(&'static str, u32)>,
    pus: usize,
    numa_nodes: usize,
    references: Vec<Reference>,
}

impl Checker {
    fn new(text: &str) -> Self {
        Checker {
            newlines: text
                .bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(at, _)| at)
                .collect(),
            objects: 0,
            gp: HashMap::new(),
            os: HashSet::new(),
            pus: 0,
            numa_nodes: 0,
            references: Vec::new(),
        }
    }

    /// The line an element starts on (roxmltree's own lookup scans the text
    /// from its start each time; this is a binary search).
    fn line(&self, node: Node) -> u32 {
        self.line_at(node.range().start)
    }

    /// The line of a byte offset.
    fn line_at(&self, offset: usize) -> u32 {
        let before = self.newlines.partition_point(|&at| at < offset);
        u32::try_from(before + 1).unwrap_or(u32::MAX)
    }

    /// "<distances2> (line 400)".
    fn element(&self, node: Node) -> String {
        format!("<{}> (line {})", node.tag_name().name(), self.line(node))
    }

    fn topology(&mut self, top: Node) -> Result<(), String> {
        if top.tag_name().name() != "topology" {
            return Err(format!(
                "the root element is <{}>, not <topology>",
                top.tag_name().name()
            ));
        }
        match top.attribute("version") {
            None => {
                return Err(
                    "it is an XML v1 file (hwloc 1.x, no version attribute): export it again with hwloc 2 (lstopo --of xml)"
                        .to_string(),
                )
            }
            Some(v) if v.strip_prefix("2.").and_then(decimal).is_some() => {}
            Some(v) if v.split('.').next().and_then(decimal).is_some_and(|m| m >= 3) => {
                return Err(format!(
                    "it is an XML v{v} file (hwloc 3.x) and this hwloc reads only v2: export it again with hwloc 2 (lstopo --of xml)"
                ))
            }
            Some(v) => {
                return Err(format!(
                    "<topology> version={} is not an hwloc XML version (2.x)",
                    quote(v)
                ))
            }
        }
        let mut children = top.children().filter(Node::is_element);
        let root = children
            .next()
            .filter(|n| n.tag_name().name() == "object")
            .ok_or("<topology> must start with the root <object type=\"Machine\">")?;
        self.object(root, None, 1)?;
        for child in children {
            match child.tag_name().name() {
                "distances2" => self.distances(child, false)?,
                "distances2hetero" => self.distances(child, true)?,
                "memattr" => self.memattr(child)?,
                "cpukind" => self.cpukind(child)?,
                "support" => self.no_children(child)?,
                "object" => {
                    return Err(format!(
                        "{}: a second root object; a topology has one root Machine",
                        self.element(child)
                    ))
                }
                other => {
                    return Err(format!(
                        "{}: <{other}> is not an element of an hwloc topology (after the root object: distances2, distances2hetero, memattr, cpukind, support)",
                        self.element(child)
                    ))
                }
            }
        }
        if self.pus == 0 {
            return Err("the topology has no PU (object type=\"PU\")".to_string());
        }
        if self.numa_nodes == 0 {
            return Err("the topology has no NUMA node (object type=\"NUMANode\")".to_string());
        }
        self.resolve()
    }

    /// Every reference names an object of the file.
    fn resolve(&self) -> Result<(), String> {
        for r in &self.references {
            let found = if r.by_os {
                u32::try_from(r.index).is_ok_and(|i| self.os.contains(&(r.kind.name, i)))
            } else {
                self.gp.get(&r.index) == Some(&r.kind.name)
            };
            if !found {
                let how = if r.by_os { "P#" } else { "gp_index " };
                return Err(format!(
                    "{}: names {} {how}{}, which the file does not describe",
                    r.from, r.kind.name, r.index
                ));
            }
        }
        Ok(())
    }

    /// Checks an object and everything below it; returns, for a CPU-side
    /// object, the first CPU of its complete_cpuset (`Some(None)` when it
    /// is empty), by which hwloc orders siblings.
    fn object(
        &mut self,
        node: Node,
        parent: Option<&Object>,
        depth: usize,
    ) -> Result<Option<Option<u32>>, String> {
        let line = self.line(node);
        if depth > MAX_OBJECT_DEPTH {
            return Err(format!(
                "<object> (line {line}): objects nest more than {MAX_OBJECT_DEPTH} levels deep, more than any machine"
            ));
        }
        self.objects += 1;
        if self.objects > MAX_OBJECTS {
            return Err(format!(
                "<object> (line {line}): more than {MAX_OBJECTS} objects, more than any machine"
            ));
        }
        let mut attributes = node.attributes();
        let kind = match attributes.next() {
            Some(a) if a.name() == "type" => kind_named(a.value()).ok_or_else(|| {
                format!(
                    "<object> (line {line}): type={} is not an hwloc object type (valid: {})",
                    quote(a.value()),
                    kind_names()
                )
            })?,
            Some(a) => {
                return Err(format!(
                "<object> (line {line}): attribute {} comes before type (hwloc needs type first)",
                a.name()
            ))
            }
            None => return Err(format!("<object> (line {line}): no type attribute")),
        };
        let os_index = match node.attribute("os_index") {
            None => None,
            Some(v) => Some(
                decimal(v)
                    .and_then(|i| u32::try_from(i).ok())
                    .filter(|&i| i < u32::MAX)
                    .ok_or_else(|| {
                        format!(
                            "{} (line {line}): os_index={} is not a whole number below 2^32-1",
                            kind.name,
                            quote(v)
                        )
                    })?,
            ),
        };
        let mut obj = Object {
            kind,
            os_index,
            complete_cpus: None,
            complete_nodes: None,
            line,
        };
        self.place(&obj, parent)?;
        let sets = self.sets(node, &obj, parent)?;
        obj.complete_cpus = sets.0;
        obj.complete_nodes = sets.1;
        let who = &obj;
        self.identity(node, who)?;
        self.attributes(node, who)?;
        let mut seen_object = false;
        let mut previous_first: Option<Option<u32>> = None;
        for child in node.children().filter(Node::is_element) {
            let tag = child.tag_name().name();
            if tag == "object" {
                seen_object = true;
                // hwloc sorts normal children by their first CPU (empty
                // sets last) and prints a screenful when it must.
                if let Some(first) = self.object(child, Some(who), depth + 1)? {
                    let key = |f: Option<u32>| f.map_or(u64::MAX, u64::from);
                    if previous_first.is_some_and(|prev| key(first) < key(prev)) {
                        return Err(format!(
                            "{}: the children of {who} are out of order (hwloc lists them by their first CPU)",
                            self.element(child)
                        ));
                    }
                    previous_first = Some(first);
                }
                continue;
            }
            if seen_object {
                return Err(format!(
                    "{}: <{tag}> inside {who} comes after its child objects (hwloc needs info, page_type and userdata first)",
                    self.element(child)
                ));
            }
            match tag {
                "info" => self.info(child)?,
                "page_type" => self.page_type(child, who, parent.is_none())?,
                "userdata" => self.userdata(child, who)?,
                other => {
                    return Err(format!(
                        "{}: <{other}> cannot be inside {who} (valid: object, info, page_type, userdata)",
                        self.element(child)
                    ))
                }
            }
        }
        Ok((kind.family == Family::Normal)
            .then(|| obj.complete_cpus.as_ref().and_then(IdSet::first)))
    }

    /// Where an object may sit: the root is the Machine; families nest as
    /// hwloc requires; PUs hold no CPU-side or memory objects.
    fn place(&mut self, obj: &Object, parent: Option<&Object>) -> Result<(), String> {
        let who = obj;
        let Some(parent) = parent else {
            if obj.kind.name != "Machine" {
                return Err(format!(
                    "the root object {who} is not a Machine (hwloc 2 topologies start with type=\"Machine\")"
                ));
            }
            return Ok(());
        };
        let allowed = match obj.kind.family {
            Family::Normal => parent.kind.family == Family::Normal && parent.kind.name != "PU",
            Family::Memory => {
                matches!(parent.kind.family, Family::Normal | Family::Memory)
                    && parent.kind.name != "PU"
            }
            Family::Io => matches!(parent.kind.family, Family::Normal | Family::Io),
            Family::Misc => true,
        };
        if !allowed {
            return Err(format!(
                "{who} cannot be a child of {} (hwloc: CPU-side objects go under CPU-side objects other than PUs, memory under CPU-side or memory objects, I/O under CPU-side or I/O objects)",
                parent
            ));
        }
        Ok(())
    }

    /// The four sets: all or none as the family requires, inside each other
    /// and inside the parent's. Returns the complete sets.
    fn sets(
        &mut self,
        node: Node,
        obj: &Object,
        parent: Option<&Object>,
    ) -> Result<(Option<IdSet>, Option<IdSet>), String> {
        let who = obj;
        const NAMES: [&str; 4] = ["cpuset", "complete_cpuset", "nodeset", "complete_nodeset"];
        let mut parsed: [Option<IdSet>; 4] = [None, None, None, None];
        for (slot, name) in parsed.iter_mut().zip(NAMES) {
            if let Some(v) = node.attribute(name) {
                *slot = Some(bitmap(v).map_err(|why| format!("{who}: {name}={} {why}", quote(v)))?);
            }
        }
        for name in ["allowed_cpuset", "allowed_nodeset"] {
            if let Some(v) = node.attribute(name) {
                bitmap(v).map_err(|why| format!("{who}: {name}={} {why}", quote(v)))?;
            }
        }
        let wants_sets = matches!(obj.kind.family, Family::Normal | Family::Memory);
        if !wants_sets {
            if let Some(name) = NAMES.iter().find(|n| node.attribute(**n).is_some()) {
                return Err(format!(
                    "{who}: has a {name}, which I/O and Misc objects do not carry"
                ));
            }
            return Ok((None, None));
        }
        let [Some(cpus), Some(complete_cpus), Some(nodes), Some(complete_nodes)] = parsed else {
            let missing = NAMES
                .iter()
                .zip(&parsed)
                .find(|(_, set)| set.is_none())
                .map_or("set", |(n, _)| n);
            return Err(format!(
                "{who}: no {missing} attribute (hwloc 2 needs cpuset, complete_cpuset, nodeset and complete_nodeset on every {} object)",
                if obj.kind.family == Family::Normal { "CPU-side" } else { "memory" }
            ));
        };
        if !cpus.is_subset(&complete_cpus) {
            return Err(format!("{who}: cpuset is not inside complete_cpuset"));
        }
        if !nodes.is_subset(&complete_nodes) {
            return Err(format!("{who}: nodeset is not inside complete_nodeset"));
        }
        if let Some(p) = parent {
            if let Some(pc) = &p.complete_cpus {
                if !complete_cpus.is_subset(pc) {
                    return Err(format!(
                        "{who}: complete_cpuset holds CPUs its parent {} does not",
                        p
                    ));
                }
            }
            if let Some(pn) = &p.complete_nodes {
                if !complete_nodes.is_subset(pn) {
                    return Err(format!(
                        "{who}: complete_nodeset holds nodes its parent {} does not",
                        p
                    ));
                }
            }
        } else if nodes.is_empty() {
            return Err(format!(
                "{who}: the root's nodeset is empty (a topology has at least one NUMA node)"
            ));
        }
        Ok((Some(complete_cpus), Some(complete_nodes)))
    }

    /// PUs and NUMA nodes: an OS index in range, unique, and the one bit of
    /// their own set; every object: a unique non-zero gp_index.
    fn identity(&mut self, node: Node, obj: &Object) -> Result<(), String> {
        let who = obj;
        let own_set = match obj.kind.name {
            "PU" => Some(("complete_cpuset", &obj.complete_cpus)),
            "NUMANode" => Some(("complete_nodeset", &obj.complete_nodes)),
            _ => None,
        };
        if let Some((set_name, set)) = own_set {
            let os = obj
                .os_index
                .ok_or_else(|| format!("{who}: no os_index (every {} has one)", obj.kind.name))?;
            if os >= MAX_OS_INDEX {
                return Err(format!(
                    "{who}: os_index {os} is above {}, the largest id numalab accepts",
                    MAX_OS_INDEX - 1
                ));
            }
            if !self.os.insert((obj.kind.name, os)) {
                return Err(format!(
                    "{who}: a second {} with os_index {os}",
                    obj.kind.name
                ));
            }
            if set.as_ref() != Some(&IdSet::single(os)) {
                return Err(format!(
                    "{who}: {set_name} is not {{{os}}}, its own os_index"
                ));
            }
            if obj.kind.name == "PU" {
                self.pus += 1;
            } else {
                self.numa_nodes += 1;
            }
        }
        if let Some(v) = node.attribute("gp_index") {
            let gp = decimal(v).filter(|&g| g > 0).ok_or_else(|| {
                format!("{who}: gp_index={} is not a whole number above 0", quote(v))
            })?;
            if self.gp.insert(gp, obj.kind.name).is_some() {
                return Err(format!("{who}: gp_index {gp} is used by another object"));
            }
        }
        Ok(())
    }

    /// The typed attributes: parse, and have a physical meaning.
    fn attributes(&self, node: Node, obj: &Object) -> Result<(), String> {
        let who = obj;
        let bad = |name: &str, value: &str, want: &str| {
            format!("{who}: {name}={} is not {want}", quote(value))
        };
        let is_cache = obj.kind.cache.is_some();
        for a in node.attributes() {
            let (name, v) = (a.name(), a.value());
            match name {
                "cache_size" => {
                    decimal(v)
                        .filter(|&s| s <= MAX_CACHE_BYTES)
                        .ok_or_else(|| bad(name, v, "a cache size in bytes up to 1 TiB"))?;
                }
                "cache_linesize" => {
                    decimal(v)
                        .filter(|&s| s <= 1 << 16)
                        .ok_or_else(|| bad(name, v, "a line size in bytes up to 65536"))?;
                }
                "cache_associativity" => {
                    signed(v)
                        .filter(|a| (-1..=1 << 16).contains(a))
                        .ok_or_else(|| {
                            bad(
                                name,
                                v,
                                "-1 (fully associative), 0 (unknown) or a number of ways up to 65536",
                            )
                        })?;
                }
                "cache_type" => {
                    let t = decimal(v)
                        .filter(|&t| t <= 2)
                        .ok_or_else(|| bad(name, v, "0 (unified), 1 (data) or 2 (instruction)"))?;
                    if let Some((_, instruction)) = obj.kind.cache {
                        if instruction != (t == 2) {
                            return Err(format!(
                                "{who}: cache_type={} does not match the type {} (2 for instruction caches, 0 or 1 for the others)",
                                quote(v),
                                obj.kind.name
                            ));
                        }
                    }
                }
                "depth" => {
                    let d = decimal(v)
                        .filter(|&d| d <= 1 << 16)
                        .ok_or_else(|| bad(name, v, "a small whole number"))?;
                    if let Some((level, _)) = obj.kind.cache {
                        if d != level {
                            return Err(format!(
                                "{who}: depth={} does not match the type {} (depth {level})",
                                quote(v),
                                obj.kind.name
                            ));
                        }
                    }
                }
                "local_memory" => {
                    decimal(v)
                        .filter(|&m| m < MAX_NODE_BYTES)
                        .ok_or_else(|| bad(name, v, "a memory size in bytes below 1 PiB"))?;
                }
                "kind" | "subkind" => {
                    decimal(v)
                        .filter(|&k| k <= u64::from(u32::MAX))
                        .ok_or_else(|| bad(name, v, "a whole number"))?;
                }
                "dont_merge" => {
                    decimal(v)
                        .filter(|&k| k <= 1)
                        .ok_or_else(|| bad(name, v, "0 or 1"))?;
                }
                "osdev_type" => {
                    decimal(v)
                        .filter(|&t| t <= 5)
                        .ok_or_else(|| bad(name, v, "an OS device type from 0 to 5"))?;
                }
                "bridge_type" => {
                    let ok = v.split_once('-').is_some_and(|(u, d)| {
                        decimal(u).is_some_and(|u| u <= 1) && decimal(d).is_some_and(|d| d <= 1)
                    });
                    if !ok {
                        return Err(bad(name, v, "U-D with U and D 0 (host) or 1 (PCI)"));
                    }
                }
                "pci_busid" if !pci_busid(v) => {
                    return Err(bad(name, v, "a PCI bus id dddd:bb:dd.f"));
                }
                "pci_link_speed" => {
                    v.parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && (0.0..=1e6).contains(s))
                        .ok_or_else(|| bad(name, v, "a link speed in GB/s"))?;
                }
                _ => {}
            }
        }
        for needed in ["depth", "cache_type"] {
            if is_cache && node.attribute(needed).is_none() {
                return Err(format!(
                    "{who}: no {needed} attribute (every cache has one)"
                ));
            }
        }
        Ok(())
    }

    fn no_children(&self, node: Node) -> Result<(), String> {
        match node.children().find(Node::is_element) {
            Some(c) => Err(format!(
                "{}: <{}> cannot be inside <{}>",
                self.element(c),
                c.tag_name().name(),
                node.tag_name().name()
            )),
            None => Ok(()),
        }
    }

    /// `<info name=".." value=".."/>`: nothing else (hwloc refuses other
    /// attributes).
    fn info(&self, node: Node) -> Result<(), String> {
        self.only_attributes(node, &["name", "value"])?;
        self.no_children(node)
    }

    fn only_attributes(&self, node: Node, names: &[&str]) -> Result<(), String> {
        match node.attributes().find(|a| !names.contains(&a.name())) {
            Some(a) => Err(format!(
                "{}: attribute {} is not one hwloc reads here (valid: {})",
                self.element(node),
                a.name(),
                names.join(", ")
            )),
            None => Ok(()),
        }
    }

    fn page_type(&self, node: Node, obj: &Object, root: bool) -> Result<(), String> {
        let who = obj;
        if obj.kind.name != "NUMANode" && !root {
            return Err(format!(
                "{}: page_type inside {who}; only NUMA nodes and the root have page types",
                self.element(node)
            ));
        }
        self.only_attributes(node, &["size", "count"])?;
        self.no_children(node)?;
        for (name, max, want) in [
            ("size", MAX_CACHE_BYTES, "a page size in bytes up to 1 TiB"),
            ("count", MAX_NODE_BYTES, "a page count below 2^50"),
        ] {
            if let Some(v) = node.attribute(name) {
                decimal(v).filter(|&n| n <= max).ok_or_else(|| {
                    format!(
                        "{} in {who}: {name}={} is not {want}",
                        self.element(node),
                        quote(v)
                    )
                })?;
            }
        }
        Ok(())
    }

    /// `<userdata length=".." encoding="base64" name="..">content`: the
    /// content must have the length announced (hwloc reads that many bytes).
    fn userdata(&self, node: Node, who: &Object) -> Result<(), String> {
        self.only_attributes(node, &["length", "encoding", "name"])?;
        self.no_children(node)?;
        let at = self.element(node);
        let length = match node.attribute("length") {
            Some(v) => decimal(v)
                .filter(|&l| l <= 1 << 30)
                .ok_or_else(|| format!("{at} in {who}: length={} is not a byte count", quote(v)))?,
            None => 0,
        };
        let encoded = node.attribute("encoding") == Some("base64");
        let expected = if encoded {
            4 * length.div_ceil(3)
        } else {
            length
        };
        let content: usize = node
            .children()
            .filter(|c| c.is_text())
            .map(|c| c.text().map_or(0, str::len))
            .sum();
        if content as u64 != expected {
            return Err(format!(
                "{at} in {who}: the content holds {content} bytes, not the {expected} its length announces"
            ));
        }
        Ok(())
    }

    /// `<distances2[hetero] nbobjs kind indexing [type] [name]>` with
    /// `<indexes length>` and `<u64values length>` children holding exactly
    /// nbobjs indexes and nbobjs^2 values.
    fn distances(&mut self, node: Node, hetero: bool) -> Result<(), String> {
        let at = match node.attribute("name") {
            Some(n) => format!("{} name={}", self.element(node), quote(n)),
            None => self.element(node),
        };
        let number = |name: &str, max: u64, want: &str| -> Result<u64, String> {
            let v = node
                .attribute(name)
                .ok_or_else(|| format!("{at}: no {name} attribute"))?;
            decimal(v)
                .filter(|&n| n <= max)
                .ok_or_else(|| format!("{at}: {name}={} is not {want}", quote(v)))
        };
        let n = number(
            "nbobjs",
            MAX_DISTANCE_OBJECTS,
            &format!("a number of objects up to {MAX_DISTANCE_OBJECTS}"),
        )?;
        if n == 0 {
            return Err(format!("{at}: nbobjs is 0"));
        }
        let kind = number("kind", u64::from(u32::MAX), "a whole number")?;
        if kind == 0 {
            return Err(format!("{at}: kind is 0 (hwloc needs the kind of values)"));
        }
        let indexing = node.attribute("indexing");
        let unique_type = if hetero {
            None
        } else {
            let t = node
                .attribute("type")
                .ok_or_else(|| format!("{at}: no type attribute"))?;
            Some(kind_named(t).ok_or_else(|| {
                format!(
                    "{at}: type={} is not an hwloc object type (valid: {})",
                    quote(t),
                    kind_names()
                )
            })?)
        };
        let by_os = match (hetero, indexing) {
            (true, None | Some("gp")) => false,
            (false, Some("os")) => true,
            (false, Some("gp")) => false,
            (_, other) => {
                return Err(format!(
                    "{at}: indexing={} is not {}",
                    quote(other.unwrap_or("")),
                    if hetero { "gp" } else { "os or gp" }
                ))
            }
        };
        let mut indexes: Vec<(&'static Kind, u64)> = Vec::new();
        let mut values: u64 = 0;
        for child in node.children().filter(Node::is_element) {
            let tag = child.tag_name().name();
            if tag != "indexes" && tag != "u64values" {
                return Err(format!(
                    "{}: <{tag}> cannot be inside {at} (valid: indexes, u64values)",
                    self.element(child)
                ));
            }
            self.only_attributes(child, &["length"])?;
            self.no_children(child)?;
            let content = child.text().unwrap_or("");
            let length = child.attribute("length").and_then(decimal);
            if length != Some(content.len() as u64) {
                return Err(format!(
                    "{} in {at}: length={} is not the {} bytes of its content",
                    self.element(child),
                    quote(child.attribute("length").unwrap_or("")),
                    content.len()
                ));
            }
            for token in content.split(' ').filter(|t| !t.is_empty()) {
                let bad = || {
                    format!(
                        "{} in {at}: {} is not a whole number{}",
                        self.element(child),
                        quote(token),
                        if tag == "indexes" && hetero {
                            " after Type:"
                        } else {
                            ""
                        }
                    )
                };
                if tag == "u64values" {
                    decimal(token)
                        .filter(|&v| v <= MAX_ATTRIBUTE_VALUE)
                        .ok_or_else(bad)?;
                    values += 1;
                    if values > n * n {
                        return Err(format!("{at}: more than nbobjs^2 = {} values", n * n));
                    }
                    continue;
                }
                let (k, index) = match (hetero, unique_type) {
                    (false, Some(k)) => (k, token),
                    _ => {
                        let (t, i) = token.split_once(':').ok_or_else(bad)?;
                        let k = kind_named(t).ok_or_else(|| {
                            format!(
                                "{} in {at}: {} is not an hwloc object type",
                                self.element(child),
                                quote(t)
                            )
                        })?;
                        (k, i)
                    }
                };
                indexes.push((k, decimal(index).ok_or_else(bad)?));
                if indexes.len() as u64 > n {
                    return Err(format!("{at}: more than nbobjs = {n} indexes"));
                }
            }
        }
        if indexes.len() as u64 != n {
            return Err(format!(
                "{at}: {} indexes where nbobjs says {n}",
                indexes.len()
            ));
        }
        if values != n * n {
            return Err(format!("{at}: {values} values where nbobjs^2 is {}", n * n));
        }
        let mut seen = HashSet::new();
        for &(k, index) in &indexes {
            if !seen.insert((k.name, index)) {
                return Err(format!("{at}: names {} {index} twice", k.name));
            }
            // hwloc ignores os indexing for other types than PU and NUMA
            // node; those references need no object.
            if by_os && !matches!(k.name, "PU" | "NUMANode") {
                continue;
            }
            self.references.push(Reference {
                from: at.clone(),
                kind: k,
                index,
                by_os,
            });
        }
        Ok(())
    }

    /// `<memattr name flags>` with `<memattr_value>` children.
    fn memattr(&mut self, node: Node) -> Result<(), String> {
        self.only_attributes(node, &["name", "flags"])?;
        let at = match node.attribute("name") {
            Some(n) => format!("{} name={}", self.element(node), quote(n)),
            None => self.element(node),
        };
        let flags = match node.attribute("flags") {
            // One of higher-first (1) or lower-first (2), and perhaps
            // need-initiator (4): hwloc refuses other combinations.
            Some(v) => decimal(v)
                .filter(|f| matches!(f, 1 | 2 | 5 | 6))
                .ok_or_else(|| {
                    format!(
                        "{at}: flags={} is not 1, 2, 5 or 6 (higher or lower first, plus 4 when values need an initiator)",
                        quote(v)
                    )
                })?,
            None => return Err(format!("{at}: no flags attribute")),
        };
        for child in node.children().filter(Node::is_element) {
            match child.tag_name().name() {
                "memattr_value" => self.memattr_value(child, flags & 4 != 0, &at)?,
                other => {
                    return Err(format!(
                        "{}: <{other}> cannot be inside {at} (valid: memattr_value)",
                        self.element(child)
                    ))
                }
            }
        }
        Ok(())
    }

    fn memattr_value(&mut self, node: Node, initiator: bool, at: &str) -> Result<(), String> {
        self.only_attributes(
            node,
            &[
                "target_obj_gp_index",
                "target_obj_type",
                "value",
                "initiator_cpuset",
                "initiator_obj_gp_index",
                "initiator_obj_type",
            ],
        )?;
        self.no_children(node)?;
        let here = format!("{} in {at}", self.element(node));
        let get = |name: &str| {
            node.attribute(name)
                .ok_or_else(|| format!("{here}: no {name} attribute"))
        };
        let type_of = |name: &str| -> Result<&'static Kind, String> {
            let t = get(name)?;
            kind_named(t)
                .ok_or_else(|| format!("{here}: {name}={} is not an hwloc object type", quote(t)))
        };
        let gp_of = |name: &str| -> Result<u64, String> {
            let v = get(name)?;
            decimal(v)
                .filter(|&g| g > 0)
                .ok_or_else(|| format!("{here}: {name}={} is not a gp_index", quote(v)))
        };
        let target = type_of("target_obj_type")?;
        let gp = gp_of("target_obj_gp_index")?;
        let v = get("value")?;
        decimal(v)
            .filter(|&x| x <= MAX_ATTRIBUTE_VALUE)
            .ok_or_else(|| {
                format!(
                    "{here}: value={} is not a whole number below 2^53",
                    quote(v)
                )
            })?;
        self.references.push(Reference {
            from: here.clone(),
            kind: target,
            index: gp,
            by_os: false,
        });
        if !initiator {
            return Ok(());
        }
        if let Some(c) = node.attribute("initiator_cpuset") {
            bitmap(c).map_err(|why| format!("{here}: initiator_cpuset={} {why}", quote(c)))?;
            return Ok(());
        }
        let kind = type_of("initiator_obj_type").map_err(|_| {
            format!("{here}: no initiator (initiator_cpuset, or initiator_obj_type and initiator_obj_gp_index)")
        })?;
        let gp = gp_of("initiator_obj_gp_index")?;
        self.references.push(Reference {
            from: here,
            kind,
            index: gp,
            by_os: false,
        });
        Ok(())
    }

    /// `<cpukind cpuset [forced_efficiency]>` with `<info>` children.
    fn cpukind(&self, node: Node) -> Result<(), String> {
        self.only_attributes(node, &["cpuset", "forced_efficiency"])?;
        let at = self.element(node);
        let c = node
            .attribute("cpuset")
            .ok_or_else(|| format!("{at}: no cpuset attribute"))?;
        bitmap(c).map_err(|why| format!("{at}: cpuset={} {why}", quote(c)))?;
        if let Some(e) = node.attribute("forced_efficiency") {
            signed(e)
                .filter(|e| (-1..=1 << 16).contains(e))
                .ok_or_else(|| {
                    format!(
                        "{at}: forced_efficiency={} is not a small whole number",
                        quote(e)
                    )
                })?;
        }
        for child in node.children().filter(Node::is_element) {
            if child.tag_name().name() != "info" {
                return Err(format!(
                    "{}: <{}> cannot be inside {at} (valid: info)",
                    self.element(child),
                    child.tag_name().name()
                ));
            }
            self.info(child)?;
        }
        Ok(())
    }
}

/// `dddd:bb:dd.f` in hex, as hwloc writes PCI bus ids.
fn pci_busid(v: &str) -> bool {
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

    #[test]
    fn types_by_name() {
        assert_eq!(kind_named("numanode").unwrap().name, "NUMANode");
        assert_eq!(kind_named("Socket").unwrap().name, "Package");
        assert_eq!(kind_named("L1iCache").unwrap().cache, Some((1, true)));
        assert!(kind_named("Cache").is_none());
        assert!(kind_named("").is_none());
    }
}
