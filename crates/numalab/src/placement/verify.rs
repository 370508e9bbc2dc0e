//! Verification: where pages and threads really are.
//!
//! - [`PageHistogram`]: page → node counts for an address range, from
//!   `move_pages` in query mode (never `get_mempolicy(MPOL_F_ADDR)`, which
//!   allocates untouched pages), with run lengths of same-node pages.
//! - [`ProcessPlacement`]: another process's mappings from
//!   /proc/PID/numa_maps, its threads' CPUs and affinity masks.

use super::sys;
use super::PlacementError;
use crate::IdSet;
use serde::Serialize;
use std::collections::BTreeMap;

/// Pages asked about per move_pages call (bounds the status arrays).
const QUERY_BATCH: usize = 1 << 16;

/// Page → node counts of one address range.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PageHistogram {
    pub page_size: usize,
    pub pages_total: u64,
    /// Node OS index → pages on it.
    pub pages_by_node: BTreeMap<u32, u64>,
    /// Pages never touched (no physical page yet).
    pub untouched_pages: u64,
    /// Pages the kernel could not report for another reason (errno → count).
    pub unknown_pages: BTreeMap<String, u64>,
    pub run_lengths: RunLengths,
    /// The node of every page, in address order (-1 untouched, -2 unknown);
    /// not serialized: it can be millions of entries.
    #[serde(skip)]
    pub page_nodes: Vec<i32>,
}

/// Runs of consecutive pages on the same node.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct RunLengths {
    /// Number of runs.
    pub runs: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    /// The most frequent run length.
    pub mode: u64,
    /// Run length → number of runs (at most 32 entries, most frequent kept).
    pub histogram: BTreeMap<u64, u64>,
    /// Runs cut short by the start or end of the range are included; this
    /// says how many runs touch neither end, for exact-stride checks.
    pub interior_min: Option<u64>,
    pub interior_max: Option<u64>,
}

impl PageHistogram {
    /// Queries process `pid` (0 = self) about `[start, start+len)`.
    pub fn of_range(
        pid: i32,
        start: *mut u8,
        len: usize,
        page_size: usize,
    ) -> Result<Self, PlacementError> {
        let n = len / page_size;
        let mut nodes = Vec::with_capacity(n);
        let mut pages: Vec<usize> = Vec::with_capacity(QUERY_BATCH.min(n));
        let mut status = vec![0i32; QUERY_BATCH.min(n)];
        let mut i = 0;
        while i < n {
            let k = QUERY_BATCH.min(n - i);
            pages.clear();
            pages.extend((i..i + k).map(|p| start as usize + p * page_size));
            sys::query_page_nodes(pid, &pages, &mut status[..k]).map_err(|e| {
                match e.raw_os_error() {
                    Some(libc::EPERM) | Some(libc::EACCES) => PlacementError::Permission(format!(
                        "querying page locations of process {pid} needs the same user or CAP_SYS_NICE: {e}"
                    )),
                    Some(libc::ESRCH) => PlacementError::Invalid(format!("no process {pid}")),
                    _ => PlacementError::Os(format!("move_pages query: {e}")),
                }
            })?;
            nodes.extend_from_slice(&status[..k]);
            i += k;
        }
        Ok(Self::from_page_nodes(nodes, page_size))
    }

    /// Builds the histogram from per-page kernel answers (node or -errno).
    pub fn from_page_nodes(raw: Vec<i32>, page_size: usize) -> Self {
        let mut by_node = BTreeMap::new();
        let mut untouched = 0;
        let mut unknown: BTreeMap<String, u64> = BTreeMap::new();
        let page_nodes: Vec<i32> = raw
            .into_iter()
            .map(|s| {
                if s >= 0 {
                    *by_node.entry(s as u32).or_insert(0) += 1;
                    s
                } else if s == -libc::ENOENT {
                    untouched += 1;
                    -1
                } else {
                    let name = std::io::Error::from_raw_os_error(-s).to_string();
                    *unknown.entry(name).or_insert(0) += 1;
                    -2
                }
            })
            .collect();
        Self {
            page_size,
            pages_total: page_nodes.len() as u64,
            pages_by_node: by_node,
            untouched_pages: untouched,
            unknown_pages: unknown,
            run_lengths: RunLengths::of(&page_nodes),
            page_nodes,
        }
    }

    /// Pages on nodes outside `allowed`.
    pub fn pages_outside(&self, allowed: &IdSet) -> u64 {
        self.pages_by_node
            .iter()
            .filter(|(n, _)| !allowed.contains(**n))
            .map(|(_, c)| *c)
            .sum()
    }

    /// Fraction of touched pages on `node`.
    pub fn fraction_on(&self, node: u32) -> f64 {
        let touched: u64 = self.pages_by_node.values().sum();
        if touched == 0 {
            return 0.0;
        }
        *self.pages_by_node.get(&node).unwrap_or(&0) as f64 / touched as f64
    }
}

impl RunLengths {
    /// Runs of equal node values; untouched/unknown pages end runs and are not runs.
    pub fn of(page_nodes: &[i32]) -> Self {
        let mut runs: Vec<(usize, u64)> = Vec::new(); // (start index, length)
        let mut i = 0;
        while i < page_nodes.len() {
            let v = page_nodes[i];
            let mut j = i + 1;
            while j < page_nodes.len() && page_nodes[j] == v {
                j += 1;
            }
            if v >= 0 {
                runs.push((i, (j - i) as u64));
            }
            i = j;
        }
        if runs.is_empty() {
            return Self::default();
        }
        let lens: Vec<u64> = runs.iter().map(|r| r.1).collect();
        let mut hist: BTreeMap<u64, u64> = BTreeMap::new();
        for &l in &lens {
            *hist.entry(l).or_insert(0) += 1;
        }
        let mode = hist
            .iter()
            .max_by_key(|(l, c)| (**c, std::cmp::Reverse(**l)))
            .map(|(l, _)| *l)
            .unwrap_or(0);
        if hist.len() > 32 {
            let mut v: Vec<(u64, u64)> = hist.into_iter().collect();
            v.sort_by_key(|(l, c)| (std::cmp::Reverse(*c), *l));
            v.truncate(32);
            hist = v.into_iter().collect();
        }
        let interior: Vec<u64> = runs
            .iter()
            .filter(|(s, l)| *s > 0 && s + (*l as usize) < page_nodes.len())
            .map(|r| r.1)
            .collect();
        Self {
            runs: lens.len() as u64,
            min: *lens.iter().min().unwrap_or(&0),
            max: *lens.iter().max().unwrap_or(&0),
            mean: lens.iter().sum::<u64>() as f64 / lens.len() as f64,
            mode,
            histogram: hist,
            interior_min: interior.iter().min().copied(),
            interior_max: interior.iter().max().copied(),
        }
    }
}

/// One mapping of a process as /proc/PID/numa_maps describes it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Mapping {
    pub address: String,
    /// The kernel's policy text for the range ("default", "bind:0", "interleave:0-3"...).
    pub policy: String,
    /// "heap", "stack", "anon", a file path, or "" when unnamed.
    pub name: String,
    pub page_size: u64,
    pub pages_by_node: BTreeMap<u32, u64>,
    pub pages_total: u64,
}

impl Mapping {
    /// Whether the pages were allocated by the process (not file page cache).
    pub fn is_private(&self) -> bool {
        matches!(self.name.as_str(), "anon" | "heap" | "stack" | "")
    }
}

/// Parses the text of /proc/PID/numa_maps.
pub fn parse_numa_maps(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(address), Some(policy)) = (it.next(), it.next()) else {
            continue;
        };
        let mut m = Mapping {
            address: address.to_string(),
            policy: policy.to_string(),
            name: String::new(),
            page_size: 4096,
            pages_by_node: BTreeMap::new(),
            pages_total: 0,
        };
        for tok in it {
            if let Some(f) = tok.strip_prefix("file=") {
                m.name = f.to_string();
            } else if tok == "heap" || tok == "stack" || tok == "huge" {
                if m.name.is_empty() {
                    m.name = tok.to_string();
                }
            } else if let Some(kb) = tok.strip_prefix("kernelpagesize_kB=") {
                m.page_size = kb.parse::<u64>().unwrap_or(4) * 1024;
            } else if let Some(rest) = tok.strip_prefix('N') {
                if let Some((n, c)) = rest.split_once('=') {
                    if let (Ok(n), Ok(c)) = (n.parse::<u32>(), c.parse::<u64>()) {
                        *m.pages_by_node.entry(n).or_insert(0) += c;
                    }
                }
            } else if tok.starts_with("anon=") && m.name.is_empty() {
                m.name = "anon".into();
            }
        }
        m.pages_total = m.pages_by_node.values().sum();
        out.push(m);
    }
    out
}

/// A thread of a process: where it may run and where it last ran.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ThreadPlacement {
    pub tid: i32,
    pub name: String,
    /// The CPU the thread last ran on (/proc/PID/task/TID/stat, field 39).
    pub last_cpu: Option<u32>,
    pub cpus_allowed: IdSet,
    pub mems_allowed: IdSet,
}

/// Everything `numalab verify --pid` reports.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessPlacement {
    pub pid: i32,
    /// Its name (/proc/PID/comm). (Not `command`: that is the envelope's,
    /// the numalab command that printed it.)
    pub program: String,
    pub threads: Vec<ThreadPlacement>,
    pub mappings: Vec<Mapping>,
    /// Sum over mappings, in bytes per node.
    pub bytes_by_node: BTreeMap<u32, u64>,
    /// Memory the process allocated itself (anonymous, heap, stack): what its
    /// memory policy decides. File pages are in the page cache, placed by
    /// whoever first read the file, and are left out here.
    pub private_bytes_by_node: BTreeMap<u32, u64>,
    /// The task policy, read from the stack/heap mapping that carries no
    /// policy of its own (numa_maps prints the task policy there).
    pub process_policy: Option<String>,
}

impl ProcessPlacement {
    /// Reads /proc/PID for `pid`. A kernel thread (no user memory) and a
    /// zombie (exited, its memory gone) are refused with a line saying so,
    /// rather than shown as holding no memory.
    pub fn read(pid: i32) -> Result<Self, PlacementError> {
        let base = format!("/proc/{pid}");
        let read = |p: &str| -> Result<String, PlacementError> {
            std::fs::read_to_string(format!("{base}/{p}")).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => PlacementError::Invalid(format!(
                    "no process {pid} (it has exited or never existed)"
                )),
                std::io::ErrorKind::PermissionDenied => denied(pid, &format!("{base}/{p}"), &e),
                _ => PlacementError::Os(format!("reading {base}/{p}: {e}")),
            })
        };
        // /proc/PID/stat is readable by anyone: what the process is comes
        // before whether its memory may be read.
        let status = ProcessStatus::parse(&read("stat")?).ok_or_else(|| {
            PlacementError::Os(format!("{base}/stat is not in the kernel's format"))
        })?;
        if status.is_kernel_thread() {
            return Err(PlacementError::Unsupported(format!(
                "pid {pid} ({}) is a kernel thread: it has no user memory to verify",
                status.command
            )));
        }
        let command = read("comm")?.trim().to_string();
        let maps_text = match read("numa_maps") {
            Ok(t) if status.state == 'Z' && t.trim().is_empty() => {
                return Err(zombie(pid, &status));
            }
            // A zombie's files may be refused rather than empty.
            Err(PlacementError::Permission(_)) if status.state == 'Z' => {
                return Err(zombie(pid, &status));
            }
            other => other?,
        };
        let mappings = parse_numa_maps(&maps_text);
        let mut bytes_by_node = BTreeMap::new();
        let mut private_bytes_by_node = BTreeMap::new();
        for m in &mappings {
            for (n, c) in &m.pages_by_node {
                *bytes_by_node.entry(*n).or_insert(0) += c * m.page_size;
                if m.is_private() {
                    *private_bytes_by_node.entry(*n).or_insert(0) += c * m.page_size;
                }
            }
        }
        let process_policy = mappings
            .iter()
            .find(|m| m.name == "stack")
            .or_else(|| mappings.iter().find(|m| m.name == "heap"))
            .map(|m| m.policy.clone());
        let mut threads = Vec::new();
        let mut tids: Vec<i32> = std::fs::read_dir(format!("{base}/task"))
            .map_err(|e| PlacementError::Os(format!("listing {base}/task: {e}")))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        tids.sort_unstable();
        for tid in tids {
            let t = format!("task/{tid}");
            let (Ok(stat), Ok(status)) = (read(&format!("{t}/stat")), read(&format!("{t}/status")))
            else {
                continue; // thread exited meanwhile
            };
            threads.push(ThreadPlacement {
                tid,
                name: read(&format!("{t}/comm"))
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
                last_cpu: stat_last_cpu(&stat),
                cpus_allowed: status_list(&status, "Cpus_allowed_list:"),
                mems_allowed: status_list(&status, "Mems_allowed_list:"),
            });
        }
        Ok(Self {
            pid,
            program: command,
            threads,
            mappings,
            bytes_by_node,
            private_bytes_by_node,
            process_policy,
        })
    }
}

/// What /proc/PID/stat says about what a process is.
#[derive(Debug, Clone, PartialEq)]
struct ProcessStatus {
    /// Field 2, without its parentheses.
    command: String,
    /// Field 3: R, S, D, Z, ...
    state: char,
    /// Field 4.
    parent: i32,
    /// Field 9: the kernel's PF_* flags.
    flags: u64,
}

/// PF_KTHREAD of the kernel's task flags: the task is a kernel thread.
const PF_KTHREAD: u64 = 0x0020_0000;

impl ProcessStatus {
    /// Parses a stat line; the command name may hold spaces and
    /// parentheses, so the fields after it are counted from the last ')'.
    fn parse(stat: &str) -> Option<Self> {
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let command = stat.get(open + 1..close)?.to_string();
        let mut rest = stat.get(close + 1..)?.split_whitespace();
        let state = rest.next()?.chars().next()?;
        let parent = rest.next()?.parse().ok()?;
        let flags = rest.nth(4)?.parse().ok()?;
        Some(Self {
            command,
            state,
            parent,
            flags,
        })
    }

    fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
}

fn zombie(pid: i32, s: &ProcessStatus) -> PlacementError {
    PlacementError::Unsupported(format!(
        "pid {pid} ({}) is a zombie: it has exited and holds no memory (its parent, pid {}, has not collected it yet)",
        s.command, s.parent
    ))
}

/// A refused read of `file`: as root the refusal comes from ptrace rules,
/// not from being another user, so say which.
fn denied(pid: i32, file: &str, e: &std::io::Error) -> PlacementError {
    let root = crate::sys::process::effective_root();
    PlacementError::Permission(if root {
        format!(
            "reading {file} was refused although numalab runs as root ({e}): it needs ptrace rights over pid {pid} (CAP_SYS_PTRACE where that process lives; a container or security module may deny them)"
        )
    } else {
        format!("reading {file} needs the same user or root (ptrace rights over pid {pid}): {e}")
    })
}

/// Field 39 of /proc/.../stat; the command name (field 2) may hold spaces
/// and parentheses, so count from the last ')'.
pub(super) fn stat_last_cpu(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(36)?.parse().ok()
}

fn status_list(status: &str, key: &str) -> IdSet {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| IdSet::parse_list(v.trim()).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_lengths_of_a_stride() {
        // interleave over 2 nodes with a stride of 3 pages, starting mid-chunk
        let v: Vec<i32> = [0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0].to_vec();
        let r = RunLengths::of(&v);
        assert_eq!(r.runs, 5);
        assert_eq!((r.min, r.max, r.mode), (1, 3, 3));
        assert_eq!((r.interior_min, r.interior_max), (Some(3), Some(3)));
        assert_eq!(r.histogram.get(&3), Some(&3));
    }

    #[test]
    fn untouched_pages_break_runs() {
        let h =
            PageHistogram::from_page_nodes(vec![0, 0, -libc::ENOENT, 0, 1, -libc::EFAULT], 4096);
        assert_eq!(h.pages_total, 6);
        assert_eq!(h.untouched_pages, 1);
        assert_eq!(h.pages_by_node, BTreeMap::from([(0, 3), (1, 1)]));
        assert_eq!(h.unknown_pages.values().sum::<u64>(), 1);
        assert_eq!(h.run_lengths.runs, 3);
        assert_eq!(h.run_lengths.max, 2);
        assert!((h.fraction_on(0) - 0.75).abs() < 1e-9);
        assert_eq!(h.pages_outside(&IdSet::single(0)), 1);
    }

    #[test]
    fn numa_maps_lines() {
        let text = "\
7f0000000000 interleave:0-3 anon=512 dirty=512 N0=128 N1=128 N2=128 N3=128 kernelpagesize_kB=4
55d5c0000000 default heap anon=3 dirty=3 active=0 N0=3 kernelpagesize_kB=4
7ffd00000000 bind:1 stack anon=5 dirty=5 N1=5 kernelpagesize_kB=4
7f1000000000 default file=/usr/lib/x86_64-linux-gnu/libc.so.6 mapped=40 mapmax=30 N0=40 kernelpagesize_kB=4
7f2000000000 prefer:2 file=/dev/hugepages/x\\040y huge dirty=2 N2=2 kernelpagesize_kB=2048
";
        let m = parse_numa_maps(text);
        assert_eq!(m.len(), 5);
        assert_eq!(m[0].policy, "interleave:0-3");
        assert_eq!(m[0].pages_total, 512);
        assert_eq!(m[0].name, "anon");
        assert_eq!(m[1].name, "heap");
        assert_eq!(m[2].pages_by_node, BTreeMap::from([(1, 5)]));
        assert_eq!(m[3].name, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert!(m[0].is_private() && m[1].is_private() && m[2].is_private());
        assert!(!m[3].is_private());
        assert_eq!(m[4].page_size, 2 << 20);
    }

    #[test]
    fn stat_says_what_a_process_is() {
        let kthread = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 2 0 0 20 0 1 0 25 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 0 0";
        let s = ProcessStatus::parse(kthread).unwrap();
        assert_eq!(
            (s.command.as_str(), s.state, s.parent),
            ("kthreadd", 'S', 0)
        );
        assert!(s.is_kernel_thread());
        let zombie =
            "4321 (a) b (Z)) Z 77 4321 4321 0 -1 4227084 100 0 0 0 0 0 0 0 20 0 1 0 100 0 0";
        let s = ProcessStatus::parse(zombie).unwrap();
        assert_eq!(
            (s.command.as_str(), s.state, s.parent),
            ("a) b (Z)", 'Z', 77)
        );
        assert!(!s.is_kernel_thread());
        assert_eq!(ProcessStatus::parse("1 (x"), None);
        assert_eq!(ProcessStatus::parse("1 (x) S 1 2"), None);
    }

    #[test]
    fn kernel_threads_and_zombies_are_named() {
        // kthreadd is pid 2 wherever there is a kernel to spawn threads.
        match ProcessPlacement::read(2) {
            Err(e) => assert_eq!(
                e.to_string(),
                "pid 2 (kthreadd) is a kernel thread: it has no user memory to verify"
            ),
            Ok(p) => assert_ne!(p.program, "kthreadd", "a kernel thread shown as a process"),
        }
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        // Not reaped yet: a zombie once it has exited.
        let seen = (0..500).find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            (ProcessStatus::parse(&s)?.state == 'Z').then(|| ProcessPlacement::read(pid))
        });
        child.wait().unwrap();
        let e = seen.expect("the child became a zombie").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "pid {pid} (true) is a zombie: it has exited and holds no memory (its parent, pid {}, has not collected it yet)",
                std::process::id()
            )
        );
    }

    #[test]
    fn stat_cpu_field_with_hostile_comm() {
        let stat = "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 100 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 7 0 0 0 0 0";
        assert_eq!(stat_last_cpu(stat), Some(7));
    }

    #[test]
    fn reading_self_sees_this_thread() {
        let p = ProcessPlacement::read(std::process::id() as i32).unwrap();
        assert!(!p.threads.is_empty());
        assert!(p.mappings.iter().any(|m| m.name == "stack"));
        assert!(p.bytes_by_node.values().sum::<u64>() > 0);
        let private: u64 = p.private_bytes_by_node.values().sum();
        assert!(private > 0 && private <= p.bytes_by_node.values().sum::<u64>());
        assert!(p.threads.iter().all(|t| !t.cpus_allowed.is_empty()));
    }
}
