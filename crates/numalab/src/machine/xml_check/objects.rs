//! The object tree: each object's type, place, sets, identity and typed
//! attributes, and what it holds (info, page types, user data).

use super::values::{bitmap, decimal, pci_busid, quote, signed};
use super::{
    kind_named, kind_names, Checker, Family, Object, MAX_CACHE_BYTES, MAX_NODE_BYTES, MAX_OBJECTS,
    MAX_OBJECT_DEPTH, MAX_OS_INDEX,
};
use crate::IdSet;
use roxmltree::Node;

impl Checker {
    /// Checks an object and everything below it; returns, for a CPU-side
    /// object, the first CPU of its complete_cpuset (`Some(None)` when it
    /// is empty), by which hwloc orders siblings.
    pub(super) fn object(
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
}
