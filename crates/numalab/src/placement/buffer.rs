//! `PlacedBuffer`: memory mapped with a policy, a page size choice, and a
//! prefault by a chosen pinned thread, so its placement is decided before any
//! measurement runs (and then checked by `verify`).

use super::capacity::{self, Shortfall};
use super::memory_policy::{MemoryPolicy, Realization, WeightedImpl};
use super::settings::{Journal, SettingGuard, AUTO_NAMES, WEIGHTS_DIR};
use super::sys::{self, Mode};
use super::touch::{on_pinned_workers, WorkerCheck};
use super::verify::PageHistogram;
use super::{PlacementError, PlacementError as E};
use crate::machine::Machine;
use crate::sys::mapping::{touch_pages, AnonymousMapping};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::io;

/// Transparent huge pages for one buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Thp {
    /// Leave the system setting (/sys/kernel/mm/transparent_hugepage/enabled).
    System,
    /// `madvise(MADV_HUGEPAGE)` on a 2 MiB-aligned mapping.
    On,
    /// `madvise(MADV_NOHUGEPAGE)`: page-granular placement stays page-granular.
    Off,
}

impl Thp {
    /// "on", "off", or "system (madvise)" with the system's current mode.
    pub fn describe(self) -> String {
        match self {
            Self::On => "on".into(),
            Self::Off => "off".into(),
            Self::System => format!(
                "system ({})",
                system_thp_mode().unwrap_or_else(|| "unknown".into())
            ),
        }
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            "system" => Ok(Self::System),
            _ => Err(format!(
                "unknown THP choice '{text}'; valid: on, off, system"
            )),
        }
    }
}

/// The bracketed choice of /sys/kernel/mm/transparent_hugepage/enabled.
pub fn system_thp_mode() -> Option<String> {
    let t = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    let start = t.find('[')? + 1;
    let end = t[start..].find(']')? + start;
    Some(t[start..end].to_string())
}

/// What to allocate and how.
#[derive(Debug, Clone)]
pub struct BufferSpec {
    pub size: usize,
    pub policy: MemoryPolicy,
    /// `None`: off for page-granular policies (interleave, weighted), else the system setting.
    pub thp: Option<Thp>,
    /// Back the buffer with hugetlbfs pages (2 MiB) instead of base pages.
    pub hugetlb: bool,
    /// CPU of the thread that first touches every page; `None` = the caller, unpinned.
    pub toucher: Option<u32>,
    pub weighted: WeightedImpl,
}

const HUGE_2M: usize = 2 << 20;

/// Largest buffer, in bytes: what a pointer offset may span (`isize::MAX`)
/// less room to align the mapping, so no size arithmetic can overflow.
pub const MAX_BUFFER_BYTES: usize = isize::MAX as usize - HUGE_2M;

/// Who writes the first byte of every page while a buffer is made, and so
/// decides where first-touch and local pages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prefault {
    /// One thread: the spec's `toucher` (pinned to it), or the caller.
    Toucher,
    /// One thread pinned to each CPU, in parallel, each its contiguous
    /// share of the pages in the order given (as a parallel program's
    /// workers first touch their parts).
    Parallel(Vec<u32>),
    /// Nobody: every page is placed by the policy when the program first
    /// touches it. Until then the pages are untouched and verification
    /// says so.
    Lazy,
}

/// A buffer whose pages were placed on purpose.
#[derive(Debug)]
pub struct PlacedBuffer {
    map: AnonymousMapping,
    page_size: usize,
    thp: Thp,
    realization: Realization,
    toucher_cpu_seen: Option<u32>,
    workers: Vec<WorkerCheck>,
    notes: Vec<String>,
}

impl PlacedBuffer {
    /// Maps, applies the policy and prefaults. Fails cleanly (never an OOM
    /// kill) when a strict placement asks for more than the nodes have free.
    pub fn new(m: &Machine, spec: &BufferSpec) -> Result<Self, PlacementError> {
        Self::with_prefault(m, spec, &Prefault::Toucher)
    }

    /// [`PlacedBuffer::new`] with the pages first touched as `prefault`
    /// says: by one thread, by a team of pinned threads in parallel, or
    /// later by the program.
    pub fn with_prefault(
        m: &Machine,
        spec: &BufferSpec,
        prefault: &Prefault,
    ) -> Result<Self, PlacementError> {
        if spec.size == 0 {
            return Err(E::Invalid("buffer size must be at least 1 byte".into()));
        }
        if spec.size > MAX_BUFFER_BYTES {
            return Err(E::Invalid(format!(
                "a buffer of {} bytes is larger than any address space; at most {MAX_BUFFER_BYTES} bytes",
                spec.size
            )));
        }
        if let Prefault::Parallel(cpus) = prefault {
            if cpus.is_empty() {
                return Err(E::Invalid(
                    "a parallel first touch needs at least one CPU".into(),
                ));
            }
            if let Some(bad) = cpus.iter().find(|c| m.node_of_cpu(**c).is_none()) {
                return Err(E::Invalid(format!(
                    "CPU {bad} belongs to no NUMA node of this machine; CPUs: {}",
                    m.allowed_cpus
                )));
            }
        }
        let first_worker = match prefault {
            Prefault::Parallel(cpus) => cpus.first().copied(),
            _ => None,
        };
        let toucher_node = match spec.toucher.or(first_worker) {
            Some(cpu) => Some(m.node_of_cpu(cpu).ok_or_else(|| {
                E::Invalid(format!("CPU {cpu} belongs to no NUMA node of this machine"))
            })?),
            None => sys::current_cpu().and_then(|c| m.node_of_cpu(c)),
        };
        let realization = spec.policy.realize(m, toucher_node, spec.weighted)?;
        if matches!(realization, Realization::KernelWeighted { .. }) && *prefault == Prefault::Lazy
        {
            // The kernel reads the weights when a page is allocated: they
            // would be the system's again by the program's first touch.
            return Err(E::Invalid(
                "the kernel's weighted interleave places pages with the weights of the moment they are touched: a lazy buffer needs the emulated weighted interleave".into(),
            ));
        }
        let thp = spec.thp.unwrap_or(if spec.policy.is_page_granular() {
            Thp::Off
        } else {
            Thp::System
        });
        let page_size = if spec.hugetlb {
            HUGE_2M
        } else {
            sys::page_size()
        };
        // Cannot overflow: the size is at most MAX_BUFFER_BYTES.
        let len = spec.size.div_ceil(page_size) * page_size;
        // An unpinned toucher's node is a guess, and a team's pages spread
        // over its nodes: count on any allowed node.
        let pinned_node = match prefault {
            Prefault::Toucher => spec.toucher.and(toucher_node),
            _ => None,
        };
        check_capacity(m, &realization, pinned_node, len, spec.hugetlb)?;

        let mut buf = map(len, page_size, spec.hugetlb, thp)?;
        buf.realization = realization.clone();
        if len != spec.size {
            buf.notes.push(format!(
                "size rounded up from {} to {} bytes (whole {} pages)",
                spec.size,
                len,
                crate::text::format::bytes(page_size as u64)
            ));
        }
        let weights = buf.apply(&realization)?;
        match prefault {
            Prefault::Toucher => {
                let touched = buf.prefault(spec.toucher);
                // The weights matter only while pages are first touched.
                drop(weights);
                buf.toucher_cpu_seen = touched?;
            }
            Prefault::Parallel(cpus) => {
                let seen = buf.prefault_parallel(cpus);
                drop(weights);
                buf.workers = seen?;
            }
            Prefault::Lazy => {
                buf.notes.push(
                    "not prefaulted: each page is placed when the program first touches it".into(),
                );
            }
        }
        Ok(buf)
    }

    /// Applies the realization to the mapping; returns sysfs weights to put
    /// back after the prefault when the kernel's weighted interleave was used.
    fn apply(&mut self, r: &Realization) -> Result<Option<WeightGuard>, PlacementError> {
        match r {
            Realization::Kernel {
                mode: Mode::Default,
                ..
            } => Ok(None),
            Realization::Kernel { mode, nodes } => {
                if let Err(msg) = sys::kernel_supports(*mode) {
                    return Err(E::Unsupported(msg));
                }
                sys::mbind(self.map.start(), self.map.len(), *mode, nodes, 0)
                    .map_err(|e| mbind_error(e, *mode, nodes))?;
                Ok(None)
            }
            Realization::KernelWeighted { nodes, weights } => {
                sys::kernel_supports(Mode::WeightedInterleave).map_err(E::Unsupported)?;
                let guard = WeightGuard::set(weights)?;
                sys::mbind(
                    self.map.start(),
                    self.map.len(),
                    Mode::WeightedInterleave,
                    nodes,
                    0,
                )
                .map_err(|e| mbind_error(e, Mode::WeightedInterleave, nodes))?;
                self.notes.push(format!(
                    "kernel weighted interleave; weights written to /sys/kernel/mm/mempolicy/weighted_interleave for the prefault, then restored ({})",
                    guard.describe()
                ));
                Ok(Some(guard))
            }
            Realization::Chunks { pattern } => {
                bind_chunks(self.map.start(), self.map.len(), self.page_size, pattern, 0)?;
                Ok(None)
            }
        }
    }

    /// Writes one byte per page from threads pinned to `cpus`, each its
    /// contiguous share of the pages, all at once; returns where each ran.
    /// A buffer of fewer pages than CPUs leaves the last CPUs idle.
    fn prefault_parallel(&mut self, cpus: &[u32]) -> Result<Vec<WorkerCheck>, PlacementError> {
        let step = self.page_size;
        let pages = self.map.len() / step;
        let per = pages.div_ceil(cpus.len()).max(1);
        // One contiguous share of the pages per CPU, each a slice of its own.
        let shares = self.map.as_mut_slice().chunks_mut(per * step);
        on_pinned_workers(
            "a first-touch thread",
            cpus.iter().copied().zip(shares),
            |share: &mut [u8]| touch_pages(share, step, 0),
        )
    }

    /// Writes one byte per page from a thread pinned to `cpu`; returns the
    /// CPU the toucher was seen on.
    fn prefault(&mut self, cpu: Option<u32>) -> Result<Option<u32>, PlacementError> {
        let step = self.page_size;
        let bytes = self.map.as_mut_slice();
        let touch = move || touch_pages(bytes, step, 0);
        match cpu {
            None => {
                let mut touch = touch;
                touch();
                Ok(sys::current_cpu())
            }
            Some(cpu) => std::thread::scope(|s| {
                sys::spawn_scoped(
                    s,
                    "the toucher thread",
                    move || -> Result<Option<u32>, PlacementError> {
                        let mut touch = touch;
                        pin_current_thread(cpu)?;
                        touch();
                        Ok(sys::current_cpu())
                    },
                )?
                .join()
                .map_err(|_| E::Invalid("the toucher thread panicked".into()))?
            }),
        }
    }

    /// Start of the buffer.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.start() as *mut u8
    }

    /// Length in bytes (a whole number of pages).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Size of the pages backing the buffer (4 KiB, or 2 MiB with hugetlb).
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// THP setting applied.
    pub fn thp(&self) -> Thp {
        self.thp
    }

    /// What the kernel was asked to do.
    pub fn realization(&self) -> &Realization {
        &self.realization
    }

    /// The CPU the prefault thread ran on.
    pub fn toucher_cpu(&self) -> Option<u32> {
        self.toucher_cpu_seen
    }

    /// Where the threads of a parallel first touch ([`Prefault::Parallel`])
    /// asked to run and ran; empty for other prefaults.
    pub fn prefault_workers(&self) -> &[WorkerCheck] {
        &self.workers
    }

    /// Remarks worth showing the user (rounding, sysfs weights...).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Where every page is now (move_pages query mode).
    pub fn histogram(&self) -> Result<PageHistogram, PlacementError> {
        PageHistogram::of_range(0, self.as_ptr(), self.len(), self.page_size)
    }

    /// The buffer as a byte slice.
    pub fn as_slice(&self) -> &[u8] {
        self.map.as_slice()
    }

    /// The buffer as a mutable byte slice.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.map.as_mut_slice()
    }

    /// The buffer as 8-byte floats (it starts on a page and is whole pages,
    /// so every byte is in one).
    pub fn as_f64_mut(&mut self) -> &mut [f64] {
        self.map.as_f64_mut()
    }

    /// The buffer as 8-byte atomic words, for threads that share it (the
    /// exclusive borrow keeps the byte views away while they do).
    pub fn as_atomics(&mut self) -> &[std::sync::atomic::AtomicU64] {
        self.map.as_atomics()
    }
}

/// Bytes free on the allowed nodes that placements may use (margins kept).
pub fn usable_free_bytes(m: &Machine) -> u64 {
    let snapshot = super::node_memory::NodeMemory::capture_for_capacity();
    capacity::usable(snapshot.allocatable_on(&m.allowed_nodes), false)
}

/// Pins the calling thread to one CPU and checks it got there.
pub fn pin_current_thread(cpu: u32) -> Result<(), PlacementError> {
    sys::set_affinity(0, &IdSet::single(cpu)).map_err(|e| match e.raw_os_error() {
        Some(libc::EINVAL) => E::Invalid(format!(
            "cannot pin to CPU {cpu}: not online or not allowed for this process (allowed: {})",
            sys::get_affinity(0)
                .map(|s| s.to_string())
                .unwrap_or_default()
        )),
        Some(libc::EPERM) => E::Permission(format!("pinning to CPU {cpu}: {e}")),
        _ => E::Os(format!("sched_setaffinity to CPU {cpu}: {e}")),
    })?;
    Ok(())
}

fn map(
    len: usize,
    page_size: usize,
    hugetlb: bool,
    thp: Thp,
) -> Result<PlacedBuffer, PlacementError> {
    // THP needs 2 MiB-aligned ranges: over-map and trim.
    let align = if thp == Thp::On || hugetlb {
        HUGE_2M
    } else {
        page_size
    };
    let mapped = if hugetlb {
        AnonymousMapping::hugetlb(len)
    } else {
        AnonymousMapping::new(len, align)
    };
    let map = mapped.map_err(|e| {
        if hugetlb {
            E::Unsupported(format!(
                "cannot map {} of hugetlbfs pages ({e}): reserve 2 MiB pages first, e.g. echo {} > /proc/sys/vm/nr_hugepages",
                crate::text::format::bytes(len as u64),
                len / HUGE_2M
            ))
        } else {
            E::Os(format!("mmap of {len} bytes: {e}"))
        }
    })?;
    let advice = match thp {
        Thp::On => Some(libc::MADV_HUGEPAGE),
        Thp::Off => Some(libc::MADV_NOHUGEPAGE),
        Thp::System => None,
    };
    if let (Some(a), false) = (advice, hugetlb) {
        if let Err(e) = map.advise(a) {
            return Err(E::Unsupported(format!(
                "madvise for THP {:?} failed ({e}); is transparent_hugepage disabled in this kernel?",
                thp
            )));
        }
    }
    Ok(PlacedBuffer {
        map,
        page_size,
        thp,
        realization: Realization::Kernel {
            mode: Mode::Default,
            nodes: IdSet::new(),
        },
        toucher_cpu_seen: None,
        workers: Vec::new(),
        notes: Vec::new(),
    })
}

/// Most stripes one chunk-wise placement may lay: each chunk is a memory
/// area of its own to the kernel, and a process may have at most
/// `vm.max_map_count` of them (65530 by default). Half is left to the
/// program and its libraries, as the preload library's stripes do.
pub fn max_stripes() -> usize {
    let limit = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|t| t.trim().parse::<usize>().ok())
        .unwrap_or(65530);
    limit / 2
}

/// Binds `[ptr, ptr+len)` chunk by chunk, `pattern` repeating: each entry
/// `(node, pages)` strictly on one node, as `Realization::Chunks` says.
/// `flags` are mbind's (`MPOL_MF_MOVE` for memory that already has pages).
/// Refuses more stripes than [`max_stripes`] before binding any.
/// `start` is page aligned and `len` a multiple of `page_size`.
pub(super) fn bind_chunks(
    start: usize,
    len: usize,
    page_size: usize,
    pattern: &[(u32, u64)],
    flags: u32,
) -> Result<(), PlacementError> {
    let pages = len / page_size;
    let round: u64 = pattern.iter().map(|p| p.1).sum();
    if pattern.is_empty() || round == 0 {
        return Err(E::Invalid("a chunk pattern needs at least one page".into()));
    }
    // Stripes in whole rounds, plus those the last partial round starts.
    let whole = pages as u64 / round;
    let mut left = pages as u64 % round;
    let mut stripes = whole * pattern.len() as u64;
    for &(_, n) in pattern {
        if left == 0 {
            break;
        }
        stripes += 1;
        left = left.saturating_sub(n);
    }
    let limit = max_stripes();
    if stripes > limit as u64 {
        return Err(E::Unsupported(format!(
            "placing {} in chunks takes {stripes} stripes, more than the {limit} a process may safely have (half of vm.max_map_count): use larger chunks (@PAGES) or the kernel's policy",
            crate::text::format::bytes(len as u64)
        )));
    }
    let mut page = 0usize;
    'outer: loop {
        for &(node, n) in pattern {
            if page >= pages {
                break 'outer;
            }
            let count = (n as usize).min(pages - page);
            let set = IdSet::single(node);
            sys::mbind(
                start + page * page_size,
                count * page_size,
                Mode::Bind,
                &set,
                flags,
            )
            .map_err(|e| mbind_error(e, Mode::Bind, &set))?;
            page += count;
        }
    }
    Ok(())
}

pub(super) fn mbind_error(e: io::Error, mode: Mode, nodes: &IdSet) -> PlacementError {
    match e.raw_os_error() {
        // An existing range (placement::range) with a hole in it.
        Some(libc::EFAULT) => E::Invalid(format!(
            "the memory to place with {} on nodes {{{nodes}}} is not all mapped memory of this process ({e})",
            mode.kernel_name()
        )),
        Some(libc::EINVAL) => E::Invalid(format!(
            "the kernel refused {} on nodes {{{nodes}}}: a node without memory or not allowed, or a mode this kernel lacks ({e})",
            mode.kernel_name()
        )),
        Some(libc::EPERM) => E::Permission(format!("{} on nodes {{{nodes}}}: {e}", mode.kernel_name())),
        _ => E::Os(format!("mbind {} on nodes {{{nodes}}}: {e}", mode.kernel_name())),
    }
}

/// Refuses a placement that cannot fit: the kernel would OOM-kill us. Its
/// bytes are counted where its policy must take them from (see
/// [`super::capacity`]); `toucher_node` is the node of a pinned toucher.
fn check_capacity(
    m: &Machine,
    r: &Realization,
    toucher_node: Option<u32>,
    len: usize,
    hugetlb: bool,
) -> Result<(), PlacementError> {
    if !m.is_live() {
        return Err(E::Invalid(
            "placing memory needs the live machine, not a topology file".into(),
        ));
    }
    let one = [(
        capacity::shares(m, r, toucher_node, len as u64),
        len as u64,
        hugetlb,
    )];
    let (shortfall, context) = match capacity::live_shortfall(m, &one) {
        None => return Ok(()),
        Some(found) => found,
    };
    match shortfall {
        Shortfall::Machine { memory, nodes, .. } => Err(E::Capacity(format!(
            "placing {} cannot fit in this machine: nodes {{{nodes}}} have {} of memory in all{}; ask for less",
            crate::text::format::bytes(len as u64),
            crate::text::format::bytes(memory),
            context.map_or(String::new(), |c| format!(" ({c})"))
        ))),
        Shortfall::Cgroup { cgroup, .. } => Err(E::Capacity(format!(
            "placing {} cannot fit in this process's memory cgroup: {} left under its {} limit ({}); ask for less",
            crate::text::format::bytes(len as u64),
            crate::text::format::bytes(cgroup.remaining),
            crate::text::format::bytes(cgroup.limit),
            cgroup.limit_file()
        ))),
        Shortfall::Nodes {
            nodes,
            need,
            free,
            hugetlb,
            ..
        } => Err(too_big(need, &nodes, free, hugetlb, context.as_deref())),
    }
}

/// `context`: the kernel's disagreeing memory figures, where they disagree.
fn too_big(
    bytes: u64,
    nodes: &IdSet,
    free: u64,
    hugetlb: bool,
    context: Option<&str>,
) -> PlacementError {
    let fb = crate::text::format::bytes;
    let plural = if nodes.len() > 1 { "s" } else { "" };
    if hugetlb {
        // The pool is the limit, not memory: say how to grow it.
        let pages = bytes.div_ceil(HUGE_2M as u64);
        return E::Capacity(format!(
            "placing {} on node{plural} {{{nodes}}} cannot fit: {} of hugetlbfs 2 MiB pages free there; reserve more first, e.g. echo {pages} > /proc/sys/vm/nr_hugepages (or per node under /sys/devices/system/node/nodeN/hugepages/hugepages-2048kB/nr_hugepages)",
            fb(bytes),
            fb(free),
        ));
    }
    E::Capacity(format!(
        "placing {} on node{plural} {{{nodes}}} cannot fit: {} free there (keeping a margin for the kernel{}), so the kernel would OOM-kill; ask for less or add nodes",
        fb(bytes),
        fb(free),
        context.map_or(String::new(), |c| format!("; {c}"))
    ))
}

/// Kernel weighted-interleave weights set for the guard's life. Each is a
/// [`SettingGuard`]: journaled before it is written, restored on drop
/// (returns, errors, panics), on SIGINT/SIGTERM/SIGHUP, and after a SIGKILL
/// by the next numalab command (see [`super::settings`]).
struct WeightGuard {
    /// Declared before `auto`, so dropped first: writing the weights back
    /// turns automatic weights off again, so the switch is restored last.
    weights: Vec<(u32, u32, SettingGuard)>,
    /// Writing a weight turns the kernel's automatic weights off.
    auto: Option<SettingGuard>,
}

impl WeightGuard {
    fn key(n: u32) -> String {
        format!("{WEIGHTS_DIR}/node{n}")
    }

    fn set(weights: &[(u32, u32)]) -> Result<Self, PlacementError> {
        let journal = Journal::system();
        let advise = |e: PlacementError| match e {
            E::Permission(m) => E::Permission(format!(
                "kernel weighted interleave: {m}; use --weighted-impl emulate"
            )),
            other => other,
        };
        let auto = AUTO_NAMES
            .iter()
            .map(|name| format!("{WEIGHTS_DIR}/{name}"))
            .find(|key| journal.path_of(key).exists())
            .map(|key| SettingGuard::watch(journal, &key))
            .transpose()
            .map_err(advise)?;
        // One order for every guard, so that two threads of one process
        // asking for different weights wait for each other, never deadlock.
        let mut sorted = weights.to_vec();
        sorted.sort_unstable();
        let mut g = Self {
            weights: Vec::with_capacity(sorted.len()),
            auto,
        };
        for (n, w) in sorted {
            let s = SettingGuard::set(journal, &Self::key(n), &w.to_string()).map_err(advise)?;
            g.weights.push((n, w, s));
        }
        Ok(g)
    }

    fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .weights
            .iter()
            .map(|(n, w, s)| format!("node{n}={w} (was {})", s.saved()))
            .collect();
        if self
            .auto
            .as_ref()
            .is_some_and(|a| matches!(a.saved(), "true" | "1" | "Y" | "y"))
        {
            parts.push("automatic weights off meanwhile (were on)".into());
        }
        parts.join(", ")
    }
}

/// Sets kernel weighted-interleave weights for the life of the returned guard
/// (used by `numalab run` around the child). The old weights come back on
/// drop, on SIGINT/SIGTERM/SIGHUP while the default action would end the
/// process, and after a SIGKILL at the next numalab command.
pub struct SysfsWeights(WeightGuard);

impl SysfsWeights {
    /// Writes `(node, weight)` pairs to the kernel's weights, recording the
    /// old values first.
    pub fn set(weights: &[(u32, u32)]) -> Result<Self, PlacementError> {
        Ok(Self(WeightGuard::set(weights)?))
    }

    /// "node0=3 (was 1), node1=1 (was 1)".
    pub fn describe(&self) -> String {
        self.0.describe()
    }

    /// Whether any weight differs from what it was (false when the
    /// system's weights already were these).
    pub fn changed(&self) -> bool {
        self.0
            .weights
            .iter()
            .any(|(_, w, s)| s.saved().trim() != w.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pages: usize, policy: MemoryPolicy) -> BufferSpec {
        BufferSpec {
            size: pages * sys::page_size(),
            policy,
            thp: None,
            hugetlb: false,
            toucher: None,
            weighted: WeightedImpl::Auto,
        }
    }

    #[test]
    fn a_team_touches_its_shares_in_parallel() {
        let m = Machine::live().unwrap();
        let cpus: Vec<u32> = m.allowed_cpus.iter().take(2).collect();
        let b = PlacedBuffer::with_prefault(
            &m,
            &spec(9, MemoryPolicy::FirstTouch),
            &Prefault::Parallel(cpus.clone()),
        )
        .unwrap();
        let seen: Vec<u32> = b
            .prefault_workers()
            .iter()
            .map(|w| w.requested_cpu)
            .collect();
        assert_eq!(seen, cpus);
        assert!(b.prefault_workers().iter().all(|w| w.ok));
        let h = b.histogram().unwrap();
        assert_eq!((h.pages_total, h.untouched_pages), (9, 0));
        assert!(crate::placement::parallel_touch_problems(&m, &h, &cpus).is_empty());
        assert!(b.as_slice().iter().all(|&x| x == 0));
    }

    #[test]
    fn a_lazy_buffer_is_placed_when_first_touched() {
        let m = Machine::live().unwrap();
        let n = m.allowed_nodes.first().unwrap();
        let mut b =
            PlacedBuffer::with_prefault(&m, &spec(4, MemoryPolicy::on_node(n)), &Prefault::Lazy)
                .unwrap();
        assert_eq!(b.histogram().unwrap().untouched_pages, 4);
        b.as_mut_slice()[0] = 1;
        let h = b.histogram().unwrap();
        assert_eq!(h.untouched_pages, 3);
        assert_eq!(h.pages_by_node.get(&n), Some(&1));
        assert!(
            b.notes()[0].starts_with("not prefaulted"),
            "{:?}",
            b.notes()
        );
    }

    #[test]
    fn sizes_and_teams_that_cannot_be_are_refused() {
        let m = Machine::live().unwrap();
        let mut s = spec(1, MemoryPolicy::FirstTouch);
        s.size = usize::MAX;
        let e = PlacedBuffer::new(&m, &s).unwrap_err().to_string();
        assert!(e.contains("larger than any address space"), "{e}");
        let s = spec(1, MemoryPolicy::FirstTouch);
        let e = PlacedBuffer::with_prefault(&m, &s, &Prefault::Parallel(vec![]))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "a parallel first touch needs at least one CPU");
        let e = PlacedBuffer::with_prefault(&m, &s, &Prefault::Parallel(vec![60000]))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("CPU 60000 belongs to no NUMA node"), "{e}");
    }

    #[test]
    fn too_many_stripes_are_refused_before_any_is_laid() {
        let page = sys::page_size();
        let limit = max_stripes();
        // A reservation only: no page is ever touched.
        let len = (limit + 1) * page;
        let p = crate::sys::mapping::AnonymousMapping::new(len, page).unwrap();
        let e = bind_chunks(p.start(), len, page, &[(0, 1)], 0).unwrap_err();
        drop(p);
        assert!(
            e.to_string().contains(&format!(
                "takes {} stripes, more than the {limit}",
                limit + 1
            )),
            "{e}"
        );
    }
}
