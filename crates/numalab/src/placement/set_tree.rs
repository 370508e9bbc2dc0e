//! `SetTree`: a resource set made of named subsets, each of which may hold
//! named subsets of its own: the hierarchy of the IBM study's resource sets
//! ("sets inside a global set"), for programs that give parts of the
//! machine roles (`io`, `compute/left`) and look them up by name. The C
//! API (`numalab_set_add_named`) and the Python package build on it.
//!
//! A tree is a value: adding a child copies it (with its own subsets), so
//! changing the child afterwards leaves the parent alone. The set of a
//! parent always holds the sets of its children: adding a child unites it
//! into the parent, and every ancestor on the way.

use super::resource_set::ResourceSet;
use crate::text::format::excerpt;

/// Longest name of a subset, in bytes.
pub const MAX_NAME: usize = 64;
/// Most direct subsets of one set.
pub const MAX_CHILDREN: usize = 1024;
/// Deepest nesting of subsets (a path has at most this many names).
pub const MAX_DEPTH: usize = 16;

/// A resource set with named subsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetTree {
    set: ResourceSet,
    children: Vec<(String, SetTree)>,
}

impl SetTree {
    /// A set without subsets.
    pub fn new(set: ResourceSet) -> Self {
        Self {
            set,
            children: Vec::new(),
        }
    }

    /// The CPUs and nodes of the set (its subsets' included).
    pub fn set(&self) -> &ResourceSet {
        &self.set
    }

    /// The direct subsets, in the order they were added.
    pub fn children(&self) -> impl Iterator<Item = (&str, &SetTree)> {
        self.children.iter().map(|(n, t)| (n.as_str(), t))
    }

    /// How many direct subsets.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// Whether the set has no named subset.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// How deep the subsets nest below this set (0 without subsets).
    pub fn depth(&self) -> usize {
        self.children
            .iter()
            .map(|(_, c)| 1 + c.depth())
            .max()
            .unwrap_or(0)
    }

    /// Adds `child` under `name` (a copy), and unites its CPUs and nodes
    /// into this set. Names are 1 to [`MAX_NAME`] bytes of letters, digits,
    /// `_`, `-` and `.`, unique among the direct subsets.
    pub fn add(&mut self, name: &str, child: SetTree) -> Result<(), String> {
        check_name(name)?;
        if self.children.iter().any(|(n, _)| n == name) {
            return Err(format!(
                "the set already has a subset named '{name}'; its subsets: {}",
                self.names().join(", ")
            ));
        }
        if self.children.len() >= MAX_CHILDREN {
            return Err(format!("a set holds at most {MAX_CHILDREN} named subsets"));
        }
        if 1 + child.depth() > MAX_DEPTH {
            return Err(format!(
                "named subsets nest at most {MAX_DEPTH} deep; '{name}' would make {}",
                1 + child.depth()
            ));
        }
        self.set = self.set.union(&child.set);
        self.children.push((name.to_string(), child));
        Ok(())
    }

    /// The subset at `path`: names joined by `/` (`compute/left`).
    pub fn get(&self, path: &str) -> Result<&SetTree, String> {
        let mut at = self;
        let mut walked: Vec<&str> = Vec::new();
        for name in path.split('/') {
            let found = at.children.iter().find(|(n, _)| n == name);
            match found {
                Some((_, c)) => {
                    walked.push(name);
                    at = c;
                }
                None => {
                    let place = if walked.is_empty() {
                        "the set".to_string()
                    } else {
                        format!("'{}'", walked.join("/"))
                    };
                    let names = at.names();
                    return Err(format!(
                        "{place} has no subset named '{}'; its subsets: {}",
                        excerpt(name, 40),
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ));
                }
            }
        }
        Ok(at)
    }

    /// The names of the direct subsets, in order.
    pub fn names(&self) -> Vec<&str> {
        self.children.iter().map(|(n, _)| n.as_str()).collect()
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{}' is not a subset name: write 1 to {MAX_NAME} letters, digits, '_', '-' or '.'",
            excerpt(name, 40)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IdSet;

    fn set(cpus: &str, nodes: &str) -> SetTree {
        SetTree::new(ResourceSet {
            cpus: IdSet::parse_list(cpus).unwrap(),
            nodes: IdSet::parse_list(nodes).unwrap(),
        })
    }

    #[test]
    fn a_parent_holds_its_named_subsets_at_every_level() {
        let mut compute = set("2-3", "1");
        compute.add("left", set("4", "2")).unwrap();
        let mut job = SetTree::default();
        job.add("io", set("0-1", "0")).unwrap();
        job.add("compute", compute).unwrap();
        assert_eq!(job.set().cpus, IdSet::parse_list("0-4").unwrap());
        assert_eq!(job.set().nodes, IdSet::parse_list("0-2").unwrap());
        assert_eq!(job.names(), ["io", "compute"]);
        assert_eq!(job.depth(), 2);
        let left = job.get("compute/left").unwrap();
        assert_eq!(left.set().cpus, IdSet::single(4));
        assert_eq!(
            job.get("compute").unwrap().set().cpus,
            IdSet::parse_list("2-4").unwrap()
        );
    }

    #[test]
    fn adding_copies_the_child() {
        let mut child = set("0", "0");
        let mut parent = SetTree::default();
        parent.add("a", child.clone()).unwrap();
        child.add("later", set("1", "0")).unwrap();
        assert!(parent.get("a").unwrap().is_empty());
        assert_eq!(parent.set().cpus, IdSet::single(0));
    }

    #[test]
    fn lookups_and_names_that_fail_say_why() {
        let mut p = SetTree::default();
        p.add("io", set("0", "0")).unwrap();
        assert_eq!(
            p.get("net").unwrap_err(),
            "the set has no subset named 'net'; its subsets: io"
        );
        assert_eq!(
            p.get("io/disk").unwrap_err(),
            "'io' has no subset named 'disk'; its subsets: none"
        );
        assert_eq!(
            p.add("io", set("1", "0")).unwrap_err(),
            "the set already has a subset named 'io'; its subsets: io"
        );
        for bad in ["", "a/b", "sp ace", &"x".repeat(65)] {
            let e = p.add(bad, SetTree::default()).unwrap_err();
            assert!(e.contains("is not a subset name"), "{bad}: {e}");
        }
    }

    #[test]
    fn nesting_and_width_are_bounded() {
        let mut deep = SetTree::default();
        for i in 0..MAX_DEPTH {
            let mut up = SetTree::default();
            up.add(&format!("l{i}"), deep).unwrap();
            deep = up;
        }
        assert_eq!(deep.depth(), MAX_DEPTH);
        let mut top = SetTree::default();
        let e = top.add("one-more", deep).unwrap_err();
        assert!(e.contains("nest at most 16 deep"), "{e}");
        let mut wide = SetTree::default();
        for i in 0..MAX_CHILDREN {
            wide.add(&format!("c{i}"), SetTree::default()).unwrap();
        }
        let e = wide.add("extra", SetTree::default()).unwrap_err();
        assert!(e.contains("at most 1024 named subsets"), "{e}");
    }
}
