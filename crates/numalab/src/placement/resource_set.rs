//! `ResourceSet`: CPUs plus memory nodes, and the one text grammar every
//! command uses to name them (docs/resource-sets.md).
//!
//! Grammar (evaluated left to right; parentheses group):
//! ```text
//! expr  := ['!'] term { op ['!'] term }
//! op    := '+' (union) | ',' (union) | '&' (intersection) | '~' (difference)
//! term  := 'all' | 'none' | LIST | KIND ':' (LIST | 'all') | '(' expr ')'
//! KIND  := node | numa | package | socket | core | cpu | pu | l1 | l2 | l3 | l4 | l5
//! LIST  := numactl list, e.g. 0-3,7
//! ```
//! `node:` and `cpu:` take OS indexes (what numactl and /sys show); `package:`,
//! `core:` and cache domains (`l3:1` = the PUs sharing the second L3) take
//! hwloc logical indexes, because their OS indexes are not unique machine-wide.
//! A bare LIST means CPUs or nodes depending on where the set is used
//! (`--cpus 0-3` vs `bind:0-1`). `!` complements within `all`.
//! Every term yields CPUs and nodes together: a node brings its CPUs, CPUs
//! bring the nodes they are local to. Operations work on both halves; at the
//! end, the half the context is not about is derived from the other (CPU
//! context: nodes local to the resulting CPUs, plus CPU-less nodes named;
//! node context: the CPUs of the resulting nodes).
//!
//! Expressions are at most [`MAX_SET_TEXT`] bytes and [`MAX_SET_DEPTH`]
//! parentheses deep: the parser recurses once per parenthesis, so the
//! bound is what keeps any input from exhausting the stack. A run of `!`
//! is read in a loop, not by recursion.

use crate::machine::Machine;
use crate::text::format::excerpt;
use crate::IdSet;
use serde::Serialize;
use std::fmt;

/// Longest set expression, in bytes: room for every CPU of the largest
/// machine listed one by one (8192 CPUs, about 40 KB), and no more.
pub const MAX_SET_TEXT: usize = 64 << 10;

/// Deepest nesting of parentheses in a set expression. Real expressions
/// use two or three levels; 32 leaves room for generated ones while the
/// parser's recursion stays a few kilobytes of stack.
pub const MAX_SET_DEPTH: usize = 32;

/// CPUs (PU OS indexes) plus memory nodes (NUMA node OS indexes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResourceSet {
    pub cpus: IdSet,
    pub nodes: IdSet,
}

/// What a bare number list means where a set is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMeaning {
    /// `--cpus 0-3`: PU OS indexes.
    Cpus,
    /// `bind:0-1`: NUMA node OS indexes.
    Nodes,
}

impl ResourceSet {
    /// The empty set.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Everything this process may use (cgroup restrictions applied).
    pub fn global(m: &Machine) -> Self {
        Self {
            cpus: m.allowed_cpus.clone(),
            nodes: m.allowed_nodes.clone(),
        }
    }

    /// A NUMA node: its memory and its CPUs.
    pub fn from_node(m: &Machine, node: u32) -> Option<Self> {
        let n = m.node(node)?;
        Some(Self {
            cpus: n.cpus.clone(),
            nodes: IdSet::single(node),
        })
    }

    /// Some CPUs, with the nodes they are local to.
    pub fn from_cpus(m: &Machine, cpus: &IdSet) -> Self {
        let nodes = m
            .nodes
            .iter()
            .filter(|n| n.cpus.intersects(cpus))
            .map(|n| n.os_index)
            .collect();
        Self {
            cpus: cpus.clone(),
            nodes,
        }
    }

    /// Some nodes, with their CPUs.
    pub fn from_nodes(m: &Machine, nodes: &IdSet) -> Self {
        let cpus = m
            .nodes
            .iter()
            .filter(|n| nodes.contains(n.os_index))
            .fold(IdSet::new(), |acc, n| acc.union(&n.cpus));
        Self {
            cpus,
            nodes: nodes.clone(),
        }
    }

    /// A package (socket) by logical index.
    pub fn from_package(m: &Machine, logical: u32) -> Option<Self> {
        let p = m.packages.iter().find(|p| p.logical_index == logical)?;
        let mut s = Self::from_cpus(m, &p.cpus);
        s.nodes = s.nodes.union(&p.nodes);
        Some(s)
    }

    /// A core by logical index.
    pub fn from_core(m: &Machine, logical: u32) -> Option<Self> {
        let c = m.cores.iter().find(|c| c.logical_index == logical)?;
        Some(Self::from_cpus(m, &c.cpus))
    }

    /// The CPUs sharing one cache of `level` (data/unified), by logical index
    /// among the caches of that level.
    pub fn from_cache_domain(m: &Machine, level: u8, logical: u32) -> Option<Self> {
        let c = cache_domains(m, level).into_iter().nth(logical as usize)?;
        Some(Self::from_cpus(m, &c))
    }

    pub fn union(&self, o: &Self) -> Self {
        Self {
            cpus: self.cpus.union(&o.cpus),
            nodes: self.nodes.union(&o.nodes),
        }
    }

    pub fn intersection(&self, o: &Self) -> Self {
        Self {
            cpus: self.cpus.intersection(&o.cpus),
            nodes: self.nodes.intersection(&o.nodes),
        }
    }

    pub fn difference(&self, o: &Self) -> Self {
        Self {
            cpus: self.cpus.difference(&o.cpus),
            nodes: self.nodes.difference(&o.nodes),
        }
    }

    /// Whether every CPU and node of `self` is in `o`.
    pub fn is_subset(&self, o: &Self) -> bool {
        self.cpus.is_subset(&o.cpus) && self.nodes.is_subset(&o.nodes)
    }

    /// Whether the set holds neither CPU nor node.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty() && self.nodes.is_empty()
    }

    /// Parses the grammar of this module against machine `m`.
    /// Expressions longer than [`MAX_SET_TEXT`] or nested deeper than
    /// [`MAX_SET_DEPTH`] are refused.
    pub fn parse(m: &Machine, text: &str, meaning: ListMeaning) -> Result<Self, String> {
        if text.len() > MAX_SET_TEXT {
            return Err(format!(
                "set expression '{}' is {} bytes long; at most {MAX_SET_TEXT}",
                excerpt(text, 40),
                text.len()
            ));
        }
        let mut p = Parser {
            m,
            s: text.as_bytes(),
            text,
            pos: 0,
            meaning,
            depth: 0,
        };
        p.skip_ws();
        if p.pos == p.s.len() {
            return Err(format!("empty set; {}", HINT));
        }
        let v = p.expr()?;
        p.skip_ws();
        if p.pos != p.s.len() {
            return Err(p.err_here("unexpected text"));
        }
        // The half the context is not about follows from the half it is
        // about (as hwloc-calc does): `node:0-1 ~ core:0` keeps node 0's
        // memory because CPU 1 is still there.
        Ok(match meaning {
            ListMeaning::Cpus => v.nodes_from_cpus(m),
            ListMeaning::Nodes => restrict(m, Self::from_nodes(m, &v.nodes)),
        })
    }

    /// The set with its nodes derived from its CPUs, as an expression in
    /// CPU context ends: the nodes local to its CPUs, plus the CPU-less
    /// (memory-only) nodes it holds. Combining two sets half by half can
    /// leave a CPU whose node is gone (`node:0-1 ~ core:1` drops node 0
    /// with core 1 although CPU 0 stays); this puts it back.
    pub fn nodes_from_cpus(&self, m: &Machine) -> Self {
        let cpuless: IdSet = self
            .nodes
            .iter()
            .filter(|n| m.node(*n).is_some_and(|x| x.cpus.is_empty()))
            .collect();
        let mut s = Self::from_cpus(m, &self.cpus);
        s.nodes = s.nodes.union(&cpuless);
        s
    }
}

impl fmt::Display for ResourceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cpus {{{}}} nodes {{{}}}", self.cpus, self.nodes)
    }
}

/// The CPU sets of every data/unified cache of `level`, in logical order.
fn cache_domains(m: &Machine, level: u8) -> Vec<IdSet> {
    let mut v: Vec<&crate::machine::Cache> = m
        .caches
        .iter()
        .filter(|c| c.level == level && c.kind != "instruction")
        .collect();
    v.sort_by_key(|c| c.logical_index);
    v.into_iter().map(|c| c.cpus.clone()).collect()
}

const HINT: &str = "write a list like 0-3,7, 'all', or KIND:LIST with KIND one of node, package (socket), core, cpu (pu), l1..l5, combined with + , & ~ and !";

struct Parser<'a> {
    m: &'a Machine,
    s: &'a [u8],
    text: &'a str,
    pos: usize,
    meaning: ListMeaning,
    /// Parentheses open at `pos`.
    depth: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn err_here(&self, what: &str) -> String {
        let rest = &self.text[self.pos.min(self.text.len())..];
        format!(
            "{what} at '{}' in '{}'; {HINT}",
            excerpt(rest, 40),
            excerpt(self.text, 60)
        )
    }

    fn expr(&mut self) -> Result<ResourceSet, String> {
        let mut acc = self.unary()?;
        loop {
            self.skip_ws();
            let op = match self.peek() {
                Some(c @ (b'+' | b',' | b'&' | b'~')) => c,
                _ => return Ok(acc),
            };
            self.pos += 1;
            let rhs = self.unary()?;
            acc = match op {
                b'+' | b',' => acc.union(&rhs),
                b'&' => acc.intersection(&rhs),
                _ => acc.difference(&rhs),
            };
        }
    }

    fn unary(&mut self) -> Result<ResourceSet, String> {
        let mut bangs = 0usize;
        loop {
            self.skip_ws();
            if self.peek() != Some(b'!') {
                break;
            }
            self.pos += 1;
            bangs += 1;
        }
        let inner = self.term()?;
        let all = ResourceSet::global(self.m);
        // `!x` is `all ~ x`; `!!x` is `all ~ (all ~ x)`, that is `all & x`,
        // and every further pair of `!` changes nothing.
        Ok(match bangs {
            0 => inner,
            n if n % 2 == 1 => all.difference(&inner),
            _ => all.intersection(&inner),
        })
    }

    fn term(&mut self) -> Result<ResourceSet, String> {
        self.skip_ws();
        match self.peek() {
            Some(b'(') => {
                if self.depth == MAX_SET_DEPTH {
                    return Err(self.err_here(&format!(
                        "parentheses nested deeper than {MAX_SET_DEPTH} levels"
                    )));
                }
                self.pos += 1;
                self.depth += 1;
                let v = self.expr()?;
                self.skip_ws();
                if self.peek() != Some(b')') {
                    return Err(self.err_here("missing ')'"));
                }
                self.pos += 1;
                self.depth -= 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() => {
                let ids = self.list()?;
                match self.meaning {
                    ListMeaning::Cpus => self.cpus(&ids),
                    ListMeaning::Nodes => self.nodes(&ids),
                }
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
                {
                    self.pos += 1;
                }
                let word = self.text[start..self.pos].to_ascii_lowercase();
                if word == "all" {
                    return Ok(ResourceSet::global(self.m));
                }
                if word == "none" {
                    return Ok(ResourceSet::empty());
                }
                self.skip_ws();
                if self.peek() != Some(b':') {
                    self.pos = start;
                    return Err(self.err_here(&format!("unknown word '{}'", excerpt(&word, 40))));
                }
                self.pos += 1;
                self.skip_ws();
                self.domain(&word, start)
            }
            _ => Err(self.err_here("expected a set")),
        }
    }

    /// A numactl list; stops before a ',' that starts a named term.
    fn list(&mut self) -> Result<IdSet, String> {
        let start = self.pos;
        let mut end = self.pos;
        loop {
            while self
                .peek()
                .is_some_and(|c| c.is_ascii_digit() || c == b'-' || c == b' ')
            {
                self.pos += 1;
            }
            end = end.max(self.pos);
            // A ',' continues the list only when a number follows it.
            if self.peek() == Some(b',')
                && self
                    .s
                    .get(self.pos + 1..)
                    .and_then(|r| r.iter().find(|c| !c.is_ascii_whitespace()))
                    .is_some_and(|c| c.is_ascii_digit())
            {
                self.pos += 1;
                continue;
            }
            break;
        }
        let text = self.text[start..end].trim();
        IdSet::parse_list(text).map_err(|e| {
            if text == self.text.trim() {
                e
            } else {
                format!("{e} in '{}'", excerpt(self.text, 60))
            }
        })
    }

    fn domain(&mut self, kind: &str, start: usize) -> Result<ResourceSet, String> {
        let all = self.text[self.pos..]
            .to_ascii_lowercase()
            .starts_with("all");
        let m = self.m;
        let ids = if all {
            self.pos += 3;
            None
        } else if self.peek().is_some_and(|c| c.is_ascii_digit()) {
            Some(self.list()?)
        } else {
            return Err(self.err_here(&format!("'{}:' needs a list or 'all'", excerpt(kind, 40))));
        };
        let pick = |valid: IdSet, what: &str, ids: Option<IdSet>| -> Result<IdSet, String> {
            match ids {
                None => Ok(valid),
                Some(ids) => match ids.difference(&valid).first() {
                    Some(bad) => Err(format!(
                        "{what} {bad} does not exist; valid {what}s: {}",
                        if valid.is_empty() {
                            "none".to_string()
                        } else {
                            valid.to_string()
                        }
                    )),
                    None => Ok(ids),
                },
            }
        };
        let mut acc = ResourceSet::empty();
        match kind {
            "node" | "numa" | "numanode" => {
                let ids = pick(existing_nodes(m), "node", ids)?;
                return self.nodes(&ids);
            }
            "cpu" | "pu" => {
                let ids = pick(m.complete_cpus.clone(), "CPU", ids)?;
                return self.cpus(&ids);
            }
            "package" | "socket" => {
                let valid = m.packages.iter().map(|p| p.logical_index).collect();
                for i in pick(valid, "package", ids)?.iter() {
                    acc = acc.union(&ResourceSet::from_package(m, i).unwrap_or_default());
                }
            }
            "core" => {
                let valid = m.cores.iter().map(|c| c.logical_index).collect();
                for i in pick(valid, "core", ids)?.iter() {
                    acc = acc.union(&ResourceSet::from_core(m, i).unwrap_or_default());
                }
            }
            k if k.len() == 2 && k.starts_with('l') && (b'1'..=b'5').contains(&k.as_bytes()[1]) => {
                let level = k.as_bytes()[1] - b'0';
                let doms = cache_domains(m, level);
                if doms.is_empty() {
                    self.pos = start;
                    return Err(format!(
                        "this machine has no L{level} cache (levels present: {})",
                        cache_levels(m)
                    ));
                }
                let valid = (0..doms.len() as u32).collect();
                for i in pick(valid, &format!("L{level} cache"), ids)?.iter() {
                    acc = acc.union(&ResourceSet::from_cpus(m, &doms[i as usize]));
                }
            }
            _ => {
                self.pos = start;
                return Err(self.err_here(&format!("unknown kind '{}'", excerpt(kind, 40))));
            }
        }
        Ok(restrict(m, acc))
    }

    fn cpus(&self, ids: &IdSet) -> Result<ResourceSet, String> {
        let m = self.m;
        if let Some(bad) = ids.difference(&m.complete_cpus).first() {
            return Err(format!(
                "CPU {bad} does not exist; valid CPUs: {}",
                m.allowed_cpus
            ));
        }
        if let Some(bad) = ids.difference(&m.allowed_cpus).first() {
            return Err(format!(
                "CPU {bad} exists but this process may not use it (cgroup cpuset); allowed CPUs: {}",
                m.allowed_cpus
            ));
        }
        Ok(ResourceSet::from_cpus(m, ids))
    }

    fn nodes(&self, ids: &IdSet) -> Result<ResourceSet, String> {
        let m = self.m;
        let all = existing_nodes(m);
        if let Some(bad) = ids.difference(&all).first() {
            return Err(format!("node {bad} does not exist; valid nodes: {all}"));
        }
        if let Some(bad) = ids.difference(&m.allowed_nodes).first() {
            return Err(format!(
                "node {bad} exists but this process may not use it (cgroup cpuset.mems); allowed nodes: {}",
                m.allowed_nodes
            ));
        }
        Ok(restrict(m, ResourceSet::from_nodes(m, ids)))
    }
}

/// Nodes that exist, allowed or not: a restricted topology may describe
/// only the allowed nodes as objects and the rest in its complete nodeset.
fn existing_nodes(m: &Machine) -> IdSet {
    m.complete_nodes.union(&m.node_ids())
}

/// Named domains may span disallowed CPUs or nodes: keep the allowed part.
fn restrict(m: &Machine, s: ResourceSet) -> ResourceSet {
    s.intersection(&ResourceSet::global(m))
}

fn cache_levels(m: &Machine) -> String {
    let levels = m.data_cache_levels();
    if levels.is_empty() {
        return "none".into();
    }
    levels
        .iter()
        .map(|l| format!("l{l}"))
        .collect::<Vec<_>>()
        .join(", ")
}
