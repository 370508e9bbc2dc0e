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

mod layout;
mod objects;
mod tables;
mod values;

use crate::IdSet;
use layout::{check_layout, check_text};
use roxmltree::{Document, Node, ParsingOptions};
use std::collections::{HashMap, HashSet};
use values::{decimal, quote};

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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_by_name() {
        assert_eq!(kind_named("numanode").unwrap().name, "NUMANode");
        assert_eq!(kind_named("Socket").unwrap().name, "Package");
        assert_eq!(kind_named("L1iCache").unwrap().cache, Some((1, true)));
        assert!(kind_named("Cache").is_none());
        assert!(kind_named("").is_none());
    }
}
