//! Reading the kernel's files under a root directory, and finding this
//! process's control groups there.
//!
//! Everything that reads `/proc` and `/sys` for a snapshot (the environment
//! of a result, the memory the nodes can give) reads them through
//! [`SysRoot`], so that tests hand it a fake tree (`<root>/proc/...`,
//! `<root>/sys/...`). The cgroup lookup lives here, below both users, so the
//! environment and the capacity check find the same cgroup the same way.

use std::path::{Path, PathBuf};

/// Files under a root directory (`/` for the live system).
pub(crate) struct SysRoot(PathBuf);

impl SysRoot {
    /// The files under `root`.
    pub(crate) fn new(root: &Path) -> Self {
        SysRoot(root.to_path_buf())
    }

    /// The path of `rel` (absolute or relative) under the root.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel.trim_start_matches('/'))
    }

    /// Trimmed contents; `None` when unreadable or empty.
    pub(crate) fn read(&self, rel: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.path(rel)).ok()?;
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_string())
    }
}

/// One line of /proc/self/cgroup: "hierarchy-ID:controller-list:path".
pub(crate) fn parse_cgroup_line(line: &str) -> Option<(&str, Vec<&str>, &str)> {
    let mut it = line.splitn(3, ':');
    let id = it.next()?;
    let controllers = it.next()?;
    let path = it.next()?;
    let controllers = controllers.split(',').filter(|c| !c.is_empty()).collect();
    Some((id, controllers, path))
}

/// `path` and its ancestors, nearest first: "/a/b" -> "/a/b", "/a", "/".
pub(crate) fn ancestors(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut p = path.trim_end_matches('/').to_string();
    loop {
        if p.is_empty() {
            out.push("/".to_string());
            return out;
        }
        out.push(p.clone());
        match p.rfind('/') {
            Some(at) => p.truncate(at),
            None => p.clear(),
        }
    }
}

/// A controller hierarchy mounted at `mount` (relative to the root), with this
/// process's cgroup at `path` inside it.
pub(crate) struct Hierarchy<'a> {
    pub(crate) fs: &'a SysRoot,
    pub(crate) mount: String,
    pub(crate) path: String,
}

impl Hierarchy<'_> {
    /// Directories of the cgroup and its ancestors that exist, nearest first.
    /// In a container the host path may not exist under the mount; its
    /// nearest existing ancestor (the mount, i.e. the container's cgroup) is
    /// then the cgroup.
    pub(crate) fn dirs(&self) -> Vec<String> {
        ancestors(&self.path)
            .into_iter()
            .map(|p| format!("{}{}", self.mount, if p == "/" { "" } else { p.as_str() }))
            .filter(|d| self.fs.path(d).is_dir())
            .collect()
    }

    /// The value of the first of `names` in the nearest directory holding one.
    pub(crate) fn nearest(&self, names: &[&str]) -> Option<String> {
        self.dirs()
            .iter()
            .find_map(|d| names.iter().find_map(|n| self.fs.read(&format!("{d}/{n}"))))
    }

    /// Values of `name` from the cgroup and every ancestor that has it.
    pub(crate) fn all(&self, name: &str) -> Vec<String> {
        self.dirs()
            .iter()
            .filter_map(|d| self.fs.read(&format!("{d}/{name}")))
            .collect()
    }
}

/// This process's cgroups, from `<root>/proc/self/cgroup`.
pub(crate) struct ProcessCgroups<'a> {
    fs: &'a SysRoot,
    /// (hierarchy id, controllers, path) per line.
    lines: Vec<(String, Vec<String>, String)>,
}

impl<'a> ProcessCgroups<'a> {
    /// The cgroups of this process as `<root>/proc/self/cgroup` lists them;
    /// `None` when that file cannot be read.
    pub(crate) fn read(fs: &'a SysRoot) -> Option<Self> {
        let text = fs.read("proc/self/cgroup")?;
        let lines = text
            .lines()
            .filter_map(parse_cgroup_line)
            .map(|(id, cs, p)| {
                (
                    id.to_string(),
                    cs.iter().map(|c| c.to_string()).collect(),
                    p.to_string(),
                )
            })
            .collect();
        Some(ProcessCgroups { fs, lines })
    }

    /// The path of the unified (v2) hierarchy's line, when there is one.
    pub(crate) fn v2_path(&self) -> Option<String> {
        self.lines
            .iter()
            .find(|(id, cs, _)| id == "0" && cs.is_empty())
            .map(|(_, _, p)| p.clone())
    }

    /// The unified hierarchy at `path`.
    pub(crate) fn v2(&self, path: &str) -> Hierarchy<'a> {
        Hierarchy {
            fs: self.fs,
            mount: "sys/fs/cgroup".to_string(),
            path: path.to_string(),
        }
    }

    /// The v1 hierarchy holding `controller` and this process's path in it,
    /// when a v1 line names the controller and its mount exists. A v1
    /// controller is mounted at /sys/fs/cgroup/<its controller list>,
    /// usually with a symlink per controller ("cpu" -> "cpu,cpuacct").
    pub(crate) fn v1(&self, controller: &str) -> Option<(Hierarchy<'a>, String)> {
        let (list, path) = self
            .lines
            .iter()
            .find(|(id, cs, _)| id != "0" && cs.iter().any(|c| c == controller))
            .map(|(_, cs, p)| (cs.join(","), p.clone()))?;
        let mount = [controller.to_string(), list]
            .into_iter()
            .map(|m| format!("sys/fs/cgroup/{m}"))
            .find(|m| self.fs.path(m).is_dir())?;
        Some((
            Hierarchy {
                fs: self.fs,
                mount,
                path: path.clone(),
            },
            path,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_lines_and_ancestors() {
        assert_eq!(
            parse_cgroup_line("4:memory:/a/b"),
            Some(("4", vec!["memory"], "/a/b"))
        );
        assert_eq!(parse_cgroup_line("0::/"), Some(("0", vec![], "/")));
        assert_eq!(
            parse_cgroup_line("1:cpu,cpuacct:/x:y"),
            Some(("1", vec!["cpu", "cpuacct"], "/x:y"))
        );
        assert_eq!(parse_cgroup_line("garbage"), None);
        assert_eq!(ancestors("/a/b"), ["/a/b", "/a", "/"]);
        assert_eq!(ancestors("/"), ["/"]);
    }
}
