//! What follows the object tree: distance matrices, memory attributes and
//! CPU kinds, whose references to objects are resolved once every object is
//! known.

use super::values::{bitmap, decimal, quote, signed};
use super::{
    kind_named, kind_names, Checker, Kind, Reference, MAX_ATTRIBUTE_VALUE, MAX_DISTANCE_OBJECTS,
};
use roxmltree::Node;
use std::collections::HashSet;

/// The objects a distance matrix names: each one's type and index.
type Indexes = Vec<(&'static Kind, u64)>;

impl Checker {
    /// `<distances2[hetero] nbobjs kind indexing [type] [name]>` with
    /// `<indexes length>` and `<u64values length>` children holding exactly
    /// nbobjs indexes and nbobjs^2 values.
    pub(super) fn distances(&mut self, node: Node, hetero: bool) -> Result<(), String> {
        let at = match node.attribute("name") {
            Some(n) => format!("{} name={}", self.element(node), quote(n)),
            None => self.element(node),
        };
        let (n, unique_type, by_os) = distances_header(node, hetero, &at)?;
        let (indexes, values) = self.distances_content(node, hetero, &at, n, unique_type)?;
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

    /// The `<indexes>` and `<u64values>` children of a distance matrix of
    /// `n` objects: the indexes (at most `n`, each a whole number, after its
    /// type in a heterogeneous matrix) and how many values (at most `n`^2,
    /// each a whole number below 2^53).
    fn distances_content(
        &self,
        node: Node,
        hetero: bool,
        at: &str,
        n: u64,
        unique_type: Option<&'static Kind>,
    ) -> Result<(Indexes, u64), String> {
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
        Ok((indexes, values))
    }

    /// `<memattr name flags>` with `<memattr_value>` children.
    pub(super) fn memattr(&mut self, node: Node) -> Result<(), String> {
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
    pub(super) fn cpukind(&self, node: Node) -> Result<(), String> {
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

/// The attributes of `<distances2[hetero]>` named `at` in messages: the
/// number of objects, the type of a homogeneous matrix, and whether it is
/// indexed by OS index (else by gp_index).
fn distances_header(
    node: Node,
    hetero: bool,
    at: &str,
) -> Result<(u64, Option<&'static Kind>, bool), String> {
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
    Ok((n, unique_type, by_os))
}
