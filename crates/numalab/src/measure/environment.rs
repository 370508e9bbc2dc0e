//! What a result depends on (every result records what can change it,
//! docs/measurement.md): kernel, CPU model and flags, SMT, transparent huge pages,
//! automatic NUMA balancing, the frequency governor, cgroup limits, the hwloc
//! and numalab versions and the command line, with plain-sentence warnings
//! about the settings that make timings move.
//!
//! [`Environment::capture`] never fails: whatever cannot be read is `None`
//! (or empty). Everything except the hwloc version, the command line and the
//! time is read from files, so [`Environment::capture_from`] can read a fake
//! tree (`<root>/proc/...`, `<root>/sys/...`) in tests.
//!
//! Decisions:
//! - `kernel` is `uname -r` (`/proc/sys/kernel/osrelease`); `kernel_version` is
//!   `uname -v`, the build string (`/proc/sys/kernel/version`, else the part of
//!   `/proc/version` from ` #` on), e.g. `#1 SMP PREEMPT_DYNAMIC Debian
//!   6.1.76-1 (2024-02-01)`: with the release it identifies the exact build.
//! - `hwloc_version` is the release of the hwloc library loaded at run time
//!   (`2.9.0`), from the `hwlocVersion` info hwloc puts on every topology it
//!   loads (a one-PU synthetic topology, built once per process);
//!   `hwloc_api_version` is `hwloc_get_api_version()` (`2.8.0` for hwloc 2.9:
//!   the API version only changes when the API does).
//! - `logical_cpus` counts the online CPUs (`/sys/devices/system/cpu/online`).
//! - `cpufreq_mhz` is the frequency range the governor may use
//!   (`scaling_min_freq`, `scaling_max_freq`), else the hardware range.
//! - Active SMT is recorded (`smt_active`) but is not a warning: it is a
//!   property of the machine, and placements pin threads to PUs anyway.
//! - cgroup v2 is used when `/proc/self/cgroup` has no v1 line for the
//!   controller in question (so hybrid systems read v1 controllers). Effective
//!   cpusets come from the cgroup or its nearest ancestor that has them;
//!   `memory_max` and `cpu_max` are the tightest limits over the cgroup and
//!   its ancestors, written the v2 way (`max`, `bytes`, `quota period`) on v1
//!   too.
//! - `memory_disagreement` is [`NodeMemory`]'s finding, memory blocks read:
//!   present only where the nodes' meminfo, /proc/meminfo and the memory
//!   blocks disagree, with a warning saying so.

use crate::placement::node_memory::{Blocks, MemoryDisagreement, NodeMemory};
use crate::placement::sysroot::{ProcessCgroups, SysRoot};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The environment a result was measured in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Environment {
    pub numalab_version: String,
    /// Release of the hwloc library in use, e.g. "2.9.0" ("unknown" if hwloc cannot say).
    pub hwloc_version: String,
    /// hwloc's API version, e.g. "2.8.0".
    pub hwloc_api_version: String,
    /// Kernel release (`uname -r`), e.g. "6.1.0-18-amd64".
    pub kernel: String,
    /// Kernel build (`uname -v`), e.g. "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)".
    pub kernel_version: String,
    pub hostname: String,
    /// `model name` from /proc/cpuinfo (or the nearest equivalent on other architectures).
    pub cpu_model: String,
    /// `vendor_id` from /proc/cpuinfo, or the implementer's name on Arm.
    pub cpu_vendor: String,
    /// The flags among [`RELEVANT_CPU_FLAGS`] this CPU has, in that order.
    pub cpu_flags: Vec<String>,
    /// Online logical CPUs (PUs).
    pub logical_cpus: usize,
    /// Whether simultaneous multithreading is on (`/sys/devices/system/cpu/smt/active`).
    pub smt_active: Option<bool>,
    /// Transparent huge pages mode: "always", "madvise" or "never".
    pub thp_enabled: Option<String>,
    /// THP defrag mode, e.g. "madvise".
    pub thp_defrag: Option<String>,
    /// Whether automatic NUMA balancing may migrate pages (`/proc/sys/kernel/numa_balancing` != 0).
    pub numa_balancing: Option<bool>,
    /// cpufreq governor of the first online CPU, e.g. "performance".
    pub governor: Option<String>,
    /// (min, max) frequency in MHz the governor may choose from.
    pub cpufreq_mhz: Option<(f64, f64)>,
    pub cgroup: CgroupLimits,
    /// Set where the kernel's memory figures disagree (the nodes' meminfo,
    /// /proc/meminfo, the memory blocks: hot-added memory, ballooning,
    /// offline blocks); absent on an ordinary machine. Capacity checks then
    /// use what the kernel will give on each node (docs/measurement.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_disagreement: Option<MemoryDisagreement>,
    /// Set when the CPU is emulated in software (QEMU TCG): what says so.
    /// Timings then say nothing about any hardware (docs/measurement.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated_cpu: Option<String>,
    /// Set when a hardware-assisted hypervisor runs this machine (KVM,
    /// Hyper-V, VMware, Xen…; named from the CPUID signature where there is
    /// one): timings are the hardware's, but the CPUs and nodes are those
    /// the hypervisor presents, and its noise is in every figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<String>,
    pub command_line: Vec<String>,
    /// Capture time, RFC 3339 in UTC: "2024-05-01T12:34:56Z".
    pub timestamp_utc: String,
    /// Plain sentences about settings that can change results.
    pub warnings: Vec<String>,
}

/// Limits the process's control group puts on it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CgroupLimits {
    /// 2 for the unified hierarchy, 1 when the limits come from v1 controllers.
    pub version: Option<u32>,
    /// The cgroup path: the v2 path, or on v1 the common path of the cpuset,
    /// cpu and memory controllers (`cpuset:/a,cpu:/b,memory:/c` when they differ).
    pub path: Option<String>,
    /// CPUs the cgroup allows, as a list ("0-3").
    pub cpuset_cpus: Option<String>,
    /// Memory nodes the cgroup allows, as a list ("0").
    pub cpuset_mems: Option<String>,
    /// Memory limit in bytes, or "max".
    pub memory_max: Option<String>,
    /// CPU bandwidth limit "quota period" in microseconds, or "max".
    pub cpu_max: Option<String>,
}

/// CPU flags that change what kernels can do or how they are timed: vector
/// widths, fast string copies, cache flushes, 1 GiB pages, invariant TSC (x86);
/// SIMD and atomics (Arm).
pub const RELEVANT_CPU_FLAGS: &[&str] = &[
    // x86
    "sse2",
    "sse4_1",
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512dq",
    "avx512cd",
    "avx512bw",
    "avx512vl",
    "erms",
    "fsrm",
    "clflushopt",
    "clwb",
    "movdiri",
    "movdir64b",
    "pdpe1gb",
    "ht",
    "constant_tsc",
    "nonstop_tsc",
    // aarch64
    "asimd",
    "sve",
    "sve2",
    "atomics",
];

impl Environment {
    /// The environment of this process on this machine, now.
    pub fn capture() -> Environment {
        let mut env = Self::capture_from(Path::new("/"));
        let signature = hypervisor_signature();
        if env.emulated_cpu.is_none() {
            env.emulated_cpu = emulation(&env.cpu_model, signature.as_deref());
        }
        // CPUID names the hypervisor the cpuinfo flag only announced.
        let named = signature.as_deref().map(hypervisor_name);
        env.set_hypervisor(if env.emulated_cpu.is_some() {
            None
        } else {
            named.or(env.hypervisor.clone())
        });
        if env.logical_cpus == 0 {
            env.logical_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        }
        env
    }

    /// Like [`Environment::capture`], but reads `<root>/proc/...` and
    /// `<root>/sys/...` instead of `/proc` and `/sys` (the hwloc version, the
    /// command line and the time are still this process's).
    pub fn capture_from(root: &Path) -> Environment {
        let fs = SysRoot::new(root);
        let cpuinfo = fs.read("proc/cpuinfo").unwrap_or_default();
        let info = CpuInfo::parse(&cpuinfo);
        let online = fs
            .read("sys/devices/system/cpu/online")
            .and_then(|t| IdSet::parse_list(&t).ok());
        let logical_cpus = online.as_ref().map_or(info.processors, IdSet::len);
        let first_cpu = online.as_ref().and_then(IdSet::first).unwrap_or(0);
        let cpufreq = format!("sys/devices/system/cpu/cpu{first_cpu}/cpufreq");
        let khz = |name: &str| fs.read(&format!("{cpufreq}/{name}"))?.parse::<f64>().ok();
        let mhz_pair = |lo: &str, hi: &str| Some((khz(lo)? / 1000.0, khz(hi)? / 1000.0));
        let cpufreq_mhz = mhz_pair("scaling_min_freq", "scaling_max_freq")
            .or_else(|| mhz_pair("cpuinfo_min_freq", "cpuinfo_max_freq"));
        let hardware_max_mhz = khz("cpuinfo_max_freq").map(|k| k / 1000.0);
        let (hwloc_version, hwloc_api_version) = hwloc_versions();

        let emulated_cpu = emulation(&info.model, None);
        let hypervisor = (emulated_cpu.is_none() && info.flags.iter().any(|f| f == "hypervisor"))
            .then(|| UNNAMED_HYPERVISOR.to_string());
        let mut env = Environment {
            numalab_version: env!("CARGO_PKG_VERSION").to_string(),
            hwloc_version,
            hwloc_api_version,
            kernel: fs.read("proc/sys/kernel/osrelease").unwrap_or_default(),
            kernel_version: fs
                .read("proc/sys/kernel/version")
                .or_else(|| fs.read("proc/version").map(|v| build_string(&v)))
                .unwrap_or_default(),
            hostname: fs.read("proc/sys/kernel/hostname").unwrap_or_default(),
            cpu_model: info.model,
            cpu_vendor: info.vendor,
            cpu_flags: RELEVANT_CPU_FLAGS
                .iter()
                .filter(|f| info.flags.iter().any(|g| g == *f))
                .map(|f| f.to_string())
                .collect(),
            logical_cpus,
            smt_active: fs
                .read("sys/devices/system/cpu/smt/active")
                .and_then(|t| parse_flag(&t)),
            thp_enabled: fs
                .read("sys/kernel/mm/transparent_hugepage/enabled")
                .and_then(|t| bracketed(&t)),
            thp_defrag: fs
                .read("sys/kernel/mm/transparent_hugepage/defrag")
                .and_then(|t| bracketed(&t)),
            numa_balancing: fs
                .read("proc/sys/kernel/numa_balancing")
                .and_then(|t| parse_flag(&t)),
            governor: fs.read(&format!("{cpufreq}/scaling_governor")),
            cpufreq_mhz,
            cgroup: cgroup_limits(&fs),
            memory_disagreement: NodeMemory::capture_from(root, Blocks::Always).disagreement,
            emulated_cpu,
            hypervisor,
            // Lossy: `std::env::args` panics on an argument that is not
            // UTF-8, and such paths are valid input.
            command_line: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            timestamp_utc: rfc3339_utc(SystemTime::now()),
            warnings: Vec::new(),
        };
        let numa_balancing_value = fs.read("proc/sys/kernel/numa_balancing");
        env.warnings = env.compute_warnings(numa_balancing_value.as_deref(), hardware_max_mhz);
        env
    }

    fn compute_warnings(
        &self,
        numa_balancing: Option<&str>,
        hardware_max_mhz: Option<f64>,
    ) -> Vec<String> {
        let mut w = Vec::new();
        if self.numa_balancing == Some(true) {
            w.push(format!(
                "automatic NUMA balancing is on (/proc/sys/kernel/numa_balancing={}): pages may \
                 migrate during the experiment; turn it off with echo 0 > \
                 /proc/sys/kernel/numa_balancing",
                numa_balancing.unwrap_or("1")
            ));
        }
        if let Some(g) = self.governor.as_deref().filter(|g| *g != "performance") {
            w.push(format!(
                "the CPU frequency governor is '{g}', not 'performance': the clock may change \
                 during the experiment; for steady numbers: cpupower frequency-set -g performance"
            ));
        }
        if let (Some((_, max)), Some(hw)) = (self.cpufreq_mhz, hardware_max_mhz) {
            if max < hw {
                w.push(format!(
                    "the CPU frequency is capped at {max:.0} MHz (the hardware allows {hw:.0} MHz, \
                     see scaling_max_freq)"
                ));
            }
        }
        if self.thp_enabled.as_deref() == Some("always") {
            w.push(
                "transparent huge pages are 'always': the kernel may back buffers with 2 MiB \
                 pages, which turns page-granular placement (interleave, weights) into 2 MiB runs \
                 unless THP is disabled per buffer"
                    .to_string(),
            );
        }
        let cg = &self.cgroup;
        if let Some(cpu_max) = cg.cpu_max.as_deref().filter(|c| *c != "max") {
            let cpus = cpu_quota(cpu_max).map_or(String::new(), |q| format!(" ({q:.2} CPUs)"));
            w.push(format!(
                "the cgroup limits CPU time: cpu.max = {cpu_max}{cpus}; the process may be \
                 throttled, which distorts timings"
            ));
        }
        if let Some(cpus) = cg.cpuset_cpus.as_deref() {
            let allowed = IdSet::parse_list(cpus).map(|s| s.len()).ok();
            if allowed.is_some_and(|a| a < self.logical_cpus) {
                let mems = cg
                    .cpuset_mems
                    .as_deref()
                    .map_or(String::new(), |m| format!(" and memory nodes {m}"));
                w.push(format!(
                    "the cgroup cpuset allows CPUs {cpus} ({} of {} online){mems}: experiments \
                     run inside these sets only",
                    allowed.unwrap_or(0),
                    self.logical_cpus
                ));
            }
        }
        if let Some(bytes) = cg.memory_max.as_deref().and_then(|m| m.parse::<u64>().ok()) {
            w.push(format!(
                "the cgroup limits memory to {} (memory.max): larger buffers are reclaimed, \
                 swapped or killed",
                fmt_bytes(bytes)
            ));
        }
        if let Some(d) = &self.memory_disagreement {
            w.push(d.sentence());
        }
        w.extend(self.hypervisor_warning());
        w
    }

    /// The caveat of a run in a virtual machine, if it is one.
    fn hypervisor_warning(&self) -> Option<String> {
        self.hypervisor.as_ref().map(|h| {
            format!(
                "measured in a virtual machine ({h}): the CPUs, caches and NUMA nodes are those \
                 the hypervisor presents, virtual CPUs may share physical cores or be moved \
                 between them by the host, and every timing carries the host's noise; confirm \
                 small differences on bare metal"
            )
        })
    }

    /// Names the hypervisor (or none), with its caveat among the warnings.
    pub fn set_hypervisor(&mut self, h: Option<String>) {
        if let Some(old) = self.hypervisor_warning() {
            self.warnings.retain(|w| *w != old);
        }
        self.hypervisor = h;
        self.warnings.extend(self.hypervisor_warning());
    }
}

/// What the cpuinfo `hypervisor` flag alone says.
const UNNAMED_HYPERVISOR: &str = "a hypervisor: the CPU's hypervisor flag";

/// The hypervisor a CPUID signature names ("KVMKVMKVM" is KVM); an
/// unknown signature is given as it is.
pub fn hypervisor_name(signature: &str) -> String {
    let known = [
        ("KVMKVMKVM", "KVM"),
        ("Microsoft Hv", "Microsoft Hyper-V"),
        ("VMwareVMware", "VMware"),
        ("XenVMMXenVMM", "Xen"),
        ("VBoxVBoxVBox", "VirtualBox"),
        ("ACRNACRNACRN", "ACRN"),
        (" lrpepyh  vr", "Parallels"),
        ("bhyve bhyve ", "bhyve"),
        ("QNXQVMBSQG", "QNX"),
    ];
    let sig = signature.trim_end_matches('\0');
    known
        .iter()
        .find(|(s, _)| sig.starts_with(s.trim_end()))
        .map_or_else(
            || format!("hypervisor signature '{}'", sig.trim()),
            |(_, n)| format!("{n}, CPUID signature '{}'", sig.trim()),
        )
}

/// What /proc/cpuinfo says about the first CPU.
#[derive(Debug, Default, PartialEq)]
struct CpuInfo {
    model: String,
    vendor: String,
    flags: Vec<String>,
    processors: usize,
}

impl CpuInfo {
    fn parse(text: &str) -> CpuInfo {
        let mut out = CpuInfo::default();
        let mut first: Vec<(&str, &str)> = Vec::new();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            if key == "processor" {
                out.processors += 1;
            }
            if !first.iter().any(|(k, _)| *k == key) {
                first.push((key, value));
            }
        }
        let get = |key: &str| {
            first
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v)
                .filter(|v| !v.is_empty())
        };
        // x86: "model name"; some Arm kernels: "model name" or "Processor";
        // POWER: "cpu"; s390x: "machine"; RISC-V: "uarch".
        let implementer = get("CPU implementer");
        let part = get("CPU part");
        out.model = get("model name")
            .or_else(|| get("Processor"))
            .or_else(|| get("cpu model"))
            .or_else(|| get("cpu"))
            .or_else(|| get("uarch"))
            .map(str::to_string)
            .or_else(|| Some(format!("implementer {} part {}", implementer?, part?)))
            .unwrap_or_default();
        out.vendor = get("vendor_id")
            .map(str::to_string)
            .or_else(|| implementer.map(arm_implementer))
            .or_else(|| get("mvendorid").map(str::to_string))
            .unwrap_or_default();
        out.flags = get("flags")
            .or_else(|| get("Features"))
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        out
    }
}

/// The name of an Arm "CPU implementer" code.
fn arm_implementer(code: &str) -> String {
    let name = match code.to_ascii_lowercase().as_str() {
        "0x41" => "ARM",
        "0x42" => "Broadcom",
        "0x43" => "Cavium",
        "0x46" => "Fujitsu",
        "0x48" => "HiSilicon",
        "0x4e" => "NVIDIA",
        "0x50" => "APM",
        "0x51" => "Qualcomm",
        "0x61" => "Apple",
        "0x6d" => "Microsoft",
        "0xc0" => "Ampere",
        _ => return format!("implementer {code}"),
    };
    name.to_string()
}

/// `uname -v` out of a /proc/version line: from " #" on (the whole line if absent).
fn build_string(proc_version: &str) -> String {
    let line = proc_version.lines().next().unwrap_or("").trim();
    match line.find(" #") {
        Some(at) => line[at + 1..].to_string(),
        None => line.to_string(),
    }
}

/// The selected value of a sysfs choice: "always [madvise] never" -> "madvise".
fn bracketed(text: &str) -> Option<String> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(text[start..end].trim().to_string())
}

/// "0" -> false, any other integer -> true.
fn parse_flag(text: &str) -> Option<bool> {
    text.trim().parse::<i64>().ok().map(|v| v != 0)
}

/// CPUs' worth of a "quota period" cpu.max value.
fn cpu_quota(cpu_max: &str) -> Option<f64> {
    let mut it = cpu_max.split_whitespace();
    let quota: f64 = it.next()?.parse().ok()?;
    let period: f64 = it.next().unwrap_or("100000").parse().ok()?;
    (period > 0.0).then(|| quota / period)
}

fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (name, size) in UNITS {
        if bytes >= size {
            let v = bytes as f64 / size as f64;
            let text = format!("{v:.1}");
            return format!("{} {name}", text.strip_suffix(".0").unwrap_or(&text));
        }
    }
    format!("{bytes} B")
}

/// The smallest of byte limits written as numbers or "max".
fn tightest_bytes(values: &[u64]) -> String {
    // v1 writes "no limit" as a huge page-aligned number (2^63 - 4096).
    match values.iter().copied().filter(|&v| v < 1 << 62).min() {
        Some(v) => v.to_string(),
        None => "max".to_string(),
    }
}

/// The tightest of "quota period" / "max" values (smallest quota / period).
fn tightest_cpu(values: &[String]) -> String {
    values
        .iter()
        .filter_map(|v| Some((cpu_quota(v)?, v)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map_or("max".to_string(), |(_, v)| v.clone())
}

fn cgroup_limits(fs: &SysRoot) -> CgroupLimits {
    let Some(cgroups) = ProcessCgroups::read(fs) else {
        return CgroupLimits::default();
    };
    let v2_path = cgroups.v2_path();
    let v2 = |path: &str| cgroups.v2(path);
    let v1 = |controller: &str| cgroups.v1(controller);

    let mut out = CgroupLimits::default();
    let mut v1_paths: Vec<(&str, String)> = Vec::new();
    let mut used_v1 = false;

    // cpuset
    if let Some((h, path)) = v1("cpuset") {
        used_v1 = true;
        v1_paths.push(("cpuset", path));
        out.cpuset_cpus = h.nearest(&["cpuset.effective_cpus", "cpuset.cpus"]);
        out.cpuset_mems = h.nearest(&["cpuset.effective_mems", "cpuset.mems"]);
    } else if let Some(p) = &v2_path {
        let h = v2(p);
        out.cpuset_cpus = h.nearest(&["cpuset.cpus.effective"]);
        out.cpuset_mems = h.nearest(&["cpuset.mems.effective"]);
    }
    // memory
    if let Some((h, path)) = v1("memory") {
        used_v1 = true;
        v1_paths.push(("memory", path));
        let limits: Vec<u64> = h
            .all("memory.limit_in_bytes")
            .iter()
            .filter_map(|v| v.parse().ok())
            .collect();
        out.memory_max = (!limits.is_empty()).then(|| tightest_bytes(&limits));
    } else if let Some(p) = &v2_path {
        let values = v2(p).all("memory.max");
        if !values.is_empty() {
            let limits: Vec<u64> = values.iter().filter_map(|v| v.parse().ok()).collect();
            out.memory_max = Some(tightest_bytes(&limits));
        }
    }
    // cpu
    if let Some((h, path)) = v1("cpu") {
        used_v1 = true;
        v1_paths.push(("cpu", path));
        let values: Vec<String> = h
            .dirs()
            .iter()
            .filter_map(|d| {
                let quota = fs.read(&format!("{d}/cpu.cfs_quota_us"))?;
                let period = fs.read(&format!("{d}/cpu.cfs_period_us"));
                Some(match quota.parse::<i64>() {
                    Ok(q) if q >= 0 => format!("{q} {}", period.as_deref().unwrap_or("100000")),
                    _ => "max".to_string(),
                })
            })
            .collect();
        out.cpu_max = (!values.is_empty()).then(|| tightest_cpu(&values));
    } else if let Some(p) = &v2_path {
        let values = v2(p).all("cpu.max");
        out.cpu_max = (!values.is_empty()).then(|| tightest_cpu(&values));
    }

    if used_v1 {
        out.version = Some(1);
        let first = &v1_paths[0].1;
        out.path = Some(if v1_paths.iter().all(|(_, p)| p == first) {
            first.clone()
        } else {
            v1_paths
                .iter()
                .map(|(c, p)| format!("{c}:{p}"))
                .collect::<Vec<_>>()
                .join(",")
        });
    } else if v2_path.is_some() {
        out.version = Some(2);
        out.path = v2_path;
    }
    out
}

/// (hwloc release, hwloc API version), computed once per process.
fn hwloc_versions() -> (String, String) {
    static VERSIONS: OnceLock<(String, String)> = OnceLock::new();
    VERSIONS
        .get_or_init(|| {
            let api = hwlocality::hwloc_api_version();
            let api = format!("{}.{}.{}", api >> 16, (api >> 8) & 0xff, api & 0xff);
            let release = hwlocality::Topology::builder()
                .from_synthetic("pu:1")
                .ok()
                .and_then(|b| b.build().ok())
                .and_then(|t| {
                    let v = t.root_object().info("hwlocVersion")?;
                    Some(v.to_string_lossy().into_owned())
                })
                .unwrap_or_else(|| "unknown".to_string());
            (release, api)
        })
        .clone()
}

/// `t` as RFC 3339 in UTC with whole seconds: "2024-02-29T23:59:59Z".
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs: i64 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => {
            // Before 1970: round down to the whole second.
            let d = e.duration();
            -(d.as_secs() as i64) - i64::from(d.subsec_nanos() > 0)
        }
    };
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// What says the CPU is emulated in software, if anything does: QEMU's TCG
/// names itself in the model string ("QEMU TCG CPU version 2.5+") and, when
/// it sets the hypervisor bit, in the CPUID hypervisor signature
/// ("TCGTCGTCGTCG"). A hardware-assisted hypervisor (KVM, Hyper-V, Xen,
/// VMware) is not emulation: its timings are the hardware's, with some
/// overhead, so it is not flagged.
pub fn emulation(cpu_model: &str, hypervisor_signature: Option<&str>) -> Option<String> {
    if hypervisor_signature.is_some_and(|s| s.starts_with("TCGTCGTCG")) {
        return Some(format!(
            "QEMU TCG: hypervisor signature {}",
            hypervisor_signature.unwrap_or_default()
        ));
    }
    let model = cpu_model.to_ascii_lowercase();
    ["tcg", "bochs"]
        .iter()
        .any(|w| {
            model
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|t| t == *w)
        })
        .then(|| format!("software emulation: CPU model '{cpu_model}'"))
}

/// The CPUID hypervisor vendor signature (leaf 0x4000_0000), when the CPU
/// says a hypervisor is present (leaf 1, ECX bit 31).
#[cfg(target_arch = "x86_64")]
fn hypervisor_signature() -> Option<String> {
    use std::arch::x86_64::__cpuid;
    // CPUID exists on every x86_64 CPU; a leaf it does not know returns
    // zeros or the highest basic leaf, which the checks below reject.
    let (leaf1, hv) = (__cpuid(1), __cpuid(0x4000_0000));
    if leaf1.ecx & (1 << 31) == 0 {
        return None;
    }
    let bytes: Vec<u8> = [hv.ebx, hv.ecx, hv.edx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    let s: String = bytes
        .iter()
        .take_while(|b| **b != 0)
        .map(|b| *b as char)
        .collect();
    (!s.is_empty() && s.chars().all(|c| c.is_ascii_graphic() || c == ' ')).then_some(s)
}

#[cfg(not(target_arch = "x86_64"))]
fn hypervisor_signature() -> Option<String> {
    None
}

/// A measured buffer below this many times the last-level cache may be
/// served from cache rather than memory (the STREAM rule is 4x).
pub const CACHE_FIT_MULTIPLE: u64 = 4;

/// A warning when `bytes` of data measured (named `what`, e.g. "buffer")
/// are below [`CACHE_FIT_MULTIPLE`] times the machine's largest last-level
/// cache: "buffer 16 MiB is below 4× the 32 MiB last-level cache: figures
/// may come from cache, not memory". `None` when the data is large enough
/// or the machine reports no cache. The largest cache is used because the
/// threads' own caches are not known before they run, and it errs toward
/// warning.
pub fn cache_fit_warning(m: &crate::machine::Machine, bytes: u64, what: &str) -> Option<String> {
    let llc = m.last_level_cache_bytes().filter(|&b| b > 0)?;
    (bytes < CACHE_FIT_MULTIPLE.saturating_mul(llc)).then(|| {
        format!(
            "{what} {} is below {CACHE_FIT_MULTIPLE}× the {} last-level cache: figures may come from cache, not memory",
            crate::text::format::bytes(bytes),
            crate::text::format::bytes(llc)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: i64) -> String {
        let t = if secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(secs as u64)
        } else {
            UNIX_EPOCH - Duration::from_secs((-secs) as u64)
        };
        rfc3339_utc(t)
    }

    #[test]
    fn emulated_cpus_are_named_and_hypervisors_are_not() {
        assert_eq!(
            emulation("QEMU TCG CPU version 2.5+", None).as_deref(),
            Some("software emulation: CPU model 'QEMU TCG CPU version 2.5+'")
        );
        assert_eq!(
            emulation("QEMU Virtual CPU version 2.5+", Some("TCGTCGTCGTCG")).as_deref(),
            Some("QEMU TCG: hypervisor signature TCGTCGTCGTCG")
        );
        // KVM with QEMU's generic model, and real CPUs: not emulated.
        assert_eq!(
            emulation("QEMU Virtual CPU version 2.5+", Some("KVMKVMKVM")),
            None
        );
        assert_eq!(emulation("AMD EPYC", Some("KVMKVMKVM")), None);
        assert_eq!(emulation("Intel(R) Xeon(R) Platinum 8480+", None), None);
        // A word inside another is not a signature.
        assert_eq!(emulation("Stcgx 9000", None), None);
    }

    #[test]
    fn hypervisors_are_named_and_carry_their_caveat() {
        assert_eq!(
            hypervisor_name("KVMKVMKVM"),
            "KVM, CPUID signature 'KVMKVMKVM'"
        );
        assert_eq!(
            hypervisor_name("Microsoft Hv"),
            "Microsoft Hyper-V, CPUID signature 'Microsoft Hv'"
        );
        assert_eq!(
            hypervisor_name("NewVisor"),
            "hypervisor signature 'NewVisor'"
        );
        let dir = std::env::temp_dir().join(format!("numalab-hv-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("proc")).unwrap();
        let cpuinfo = |model: &str, flags: &str| {
            std::fs::write(
                dir.join("proc/cpuinfo"),
                format!("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: {model}\nflags\t\t: fpu sse2 {flags}\n"),
            )
            .unwrap();
            Environment::capture_from(&dir)
        };
        // The flag alone: a hypervisor, unnamed, with the caveat.
        let mut env = cpuinfo("AMD EPYC", "hypervisor");
        assert_eq!(env.hypervisor.as_deref(), Some(UNNAMED_HYPERVISOR));
        let caveat = |e: &Environment| {
            e.warnings
                .iter()
                .filter(|w| w.starts_with("measured in a virtual machine"))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(caveat(&env).len(), 1, "{:?}", env.warnings);
        // Named from CPUID: one caveat, with the name.
        env.set_hypervisor(Some(hypervisor_name("KVMKVMKVM")));
        assert_eq!(
            caveat(&env),
            ["measured in a virtual machine (KVM, CPUID signature 'KVMKVMKVM'): the CPUs, caches and NUMA nodes are those the hypervisor presents, virtual CPUs may share physical cores or be moved between them by the host, and every timing carries the host's noise; confirm small differences on bare metal"]
        );
        // Emulation is said by emulated_cpu instead; bare metal says nothing.
        let env = cpuinfo("QEMU TCG CPU version 2.5+", "hypervisor");
        assert_eq!((env.hypervisor.as_deref(), caveat(&env).len()), (None, 0));
        let env = cpuinfo("AMD EPYC", "");
        assert_eq!((env.hypervisor.as_deref(), caveat(&env).len()), (None, 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn timestamps() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(at(1_735_689_600), "2025-01-01T00:00:00Z");
        assert_eq!(at(4_102_444_800), "2100-01-01T00:00:00Z");
        assert_eq!(at(-1), "1969-12-31T23:59:59Z");
        let just_before = UNIX_EPOCH - Duration::from_millis(1);
        assert_eq!(rfc3339_utc(just_before), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn sysfs_choices() {
        assert_eq!(
            bracketed("always [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            bracketed("[always] madvise never").as_deref(),
            Some("always")
        );
        assert_eq!(bracketed("always madvise"), None);
        assert_eq!(parse_flag("0"), Some(false));
        assert_eq!(parse_flag("2\n"), Some(true));
        assert_eq!(parse_flag("on"), None);
    }

    #[test]
    fn kernel_build_string() {
        let v = "Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian \
                 12.2.0-14) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC \
                 Debian 6.1.76-1 (2024-02-01)\n";
        assert_eq!(
            build_string(v),
            "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"
        );
        assert_eq!(build_string("odd"), "odd");
    }

    #[test]
    fn cpuinfo_x86_and_arm() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763\n\
                   flags\t\t: fpu sse2 avx2 fma\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\n";
        let i = CpuInfo::parse(x86);
        assert_eq!(
            (i.model.as_str(), i.vendor.as_str()),
            ("AMD EPYC 7763", "AuthenticAMD")
        );
        assert_eq!(i.flags, ["fpu", "sse2", "avx2", "fma"]);
        assert_eq!(i.processors, 2);
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd atomics sve\n\
                   CPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n";
        let i = CpuInfo::parse(arm);
        assert_eq!(i.vendor, "ARM");
        assert_eq!(i.model, "implementer 0x41 part 0xd0c");
        assert!(i.flags.contains(&"sve".to_string()));
        assert_eq!(CpuInfo::parse(""), CpuInfo::default());
    }

    #[test]
    fn a_hot_plug_vm_records_the_disagreement_and_warns() {
        use crate::placement::node_memory::test_tree::Tree;
        let t = Tree::new("env-hotplug");
        t.file(
            "sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal:  4508876 kB\nNode 0 MemFree:   2097152 kB\n",
        );
        t.file(
            "proc/meminfo",
            "MemTotal:  134217728 kB\nMemAvailable:  131072000 kB\n",
        );
        let e = Environment::capture_from(t.path());
        let d = e.memory_disagreement.clone().unwrap();
        assert_eq!(d.cause, crate::placement::node_memory::MemoryCause::HotAdd);
        assert_eq!(d.nodes_total_bytes, 4508876 << 10);
        assert_eq!(d.system_total_bytes, 128 << 30);
        assert_eq!(
            e.warnings,
            [
                "the nodes' meminfo counts 4.3 GiB of memory but /proc/meminfo 128 GiB (125 GiB \
              available), likely memory being hot-added (virtio-mem, hot-plug or ballooning): \
              capacity checks use what the kernel will give on each node, not the nodes' totals"
            ]
        );
        let j = serde_json::to_value(&e).unwrap();
        assert_eq!(j["memory_disagreement"]["cause"], "hot_add");
        assert_eq!(j["memory_disagreement"]["system_total_bytes"], 128u64 << 30);
        // An ordinary machine's figures agree: no key, no warning.
        t.file(
            "proc/meminfo",
            "MemTotal:  4508876 kB\nMemAvailable:  3000000 kB\n",
        );
        let e = Environment::capture_from(t.path());
        assert_eq!(e.memory_disagreement, None);
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        let j = serde_json::to_value(&e).unwrap();
        assert!(j.get("memory_disagreement").is_none(), "{j}");
        // Results written before the field existed still read.
        let mut old = j.clone();
        old.as_object_mut().unwrap().remove("memory_disagreement");
        let back: Environment = serde_json::from_value(old).unwrap();
        assert_eq!(back.memory_disagreement, None);
    }

    #[test]
    fn cgroup_helpers() {
        assert_eq!(tightest_bytes(&[9_223_372_036_854_771_712]), "max");
        assert_eq!(tightest_bytes(&[1 << 30, 1 << 20]), "1048576");
        let cpu = [
            "max".to_string(),
            "50000 100000".to_string(),
            "200000 100000".to_string(),
        ];
        assert_eq!(tightest_cpu(&cpu), "50000 100000");
        assert_eq!(tightest_cpu(&["max".to_string()]), "max");
        assert_eq!(cpu_quota("50000 100000"), Some(0.5));
        assert_eq!(fmt_bytes(2 << 30), "2 GiB");
        assert_eq!(fmt_bytes(1536 << 20), "1.5 GiB");
        assert_eq!(fmt_bytes(100), "100 B");
    }

    #[test]
    fn cache_fit_warning_states_the_multiple_and_the_cache() {
        let m = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let llc = m.last_level_cache_bytes().expect("the fixture has caches");
        let w = cache_fit_warning(&m, llc, "buffer").expect("one cache's worth fits");
        assert_eq!(
            w,
            format!(
                "buffer {} is below 4× the {} last-level cache: figures may come from cache, not memory",
                crate::text::format::bytes(llc),
                crate::text::format::bytes(llc)
            )
        );
        assert!(cache_fit_warning(&m, 4 * llc - 1, "buffer").is_some());
        assert_eq!(cache_fit_warning(&m, 4 * llc, "buffer"), None);
    }
}
