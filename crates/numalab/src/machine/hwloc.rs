//! Filling the machine model from hwloc (live discovery or XML file).
//!
//! Everything hwloc knows is copied into plain data here, once; nothing
//! outside this file touches hwloc's topology for the model.
//!
//! Facts about hwloc that shape this code:
//! - A NUMA node's hwloc cpuset is its *locality*, not its own CPUs: a
//!   CPU-less node (HBM, NVM, GPU memory, CXL) attached next to a CPU node
//!   carries the same cpuset. [`own_cpus`] gives each node the CPUs the kernel
//!   would list in `/sys/devices/system/node/nodeN/cpulist`.
//! - Nodes are keyed by OS index; hwloc's logical indexes follow the tree
//!   and differ for CPU-less nodes.
//! - hwlocality panics (`unreachable!`, `expect`) on a few hwloc answers it
//!   does not expect (an unreadable XML file path, odd attribute values in a
//!   crafted file). We read files ourselves (`crate::input`), hand hwloc a
//!   buffer, and run the extraction under `catch_unwind` as a last line of
//!   defence so that no input can crash the program.
//! - hwloc's XML importer trusts v2 files and crashes on some (a Group with
//!   a cpuset and no complete_cpuset). Files are checked in Rust first
//!   (`xml_check/`), then, while the process is single-threaded (the
//!   command-line tool loads its machine before starting threads), loaded
//!   once in a forked child (`crate::sys::child`) whose death by a signal becomes a
//!   one-line error, and whose hwloc messages (HWLOC_XML_VERBOSE) name what
//!   hwloc refused.
//! - In debug builds hwlocality runs `hwloc_topology_check` after loading,
//!   which *aborts* on an internally inconsistent tree (e.g. a NUMA node
//!   whose os_index disagrees with its nodeset in a hand-edited file). Release
//!   builds do not run it; `[profile.dev.package.hwlocality]
//!   debug-assertions = false` turns it off in debug builds too.

use super::{graph, xml_check};
use super::{
    Cache, Core, Device, Distances, Machine, MachineError, MemoryAttributeValue, MemoryKind, Node,
    Package, Source, TOPOLOGY_SCHEMA_VERSION,
};
use crate::input::{self, InputKind};
use crate::sys::child::{self, Trial};
use crate::IdSet;
use hwlocality::bitmap::SpecializedBitmap;
use hwlocality::memory::attribute::{Initiator, MemoryAttribute};
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::{CacheType, OSDeviceType, ObjectType};
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::{BuildFlags, TypeFilter};
use hwlocality::Topology;
use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::Path;
use std::time::Duration;

/// Largest id we accept in a CPU or node set read from hwloc (files are
/// checked against the same bound before hwloc sees them).
const MAX_ID: usize = xml_check::MAX_OS_INDEX as usize;

/// How long hwloc may take to load a file in the trial child: the largest
/// files load in well under a second.
const TRIAL_LIMIT: Duration = Duration::from_secs(20);

/// Why a load failed when hwlocality panicked on what hwloc returned.
const PANIC_REASON: &str = "hwloc returned values numalab cannot interpret";

/// The trial child's exit code when hwloc refused the file.
const HWLOC_REFUSED: i32 = 1;

pub(super) fn load(path: Option<&Path>) -> Result<Machine, MachineError> {
    // Files are read before hwloc sees them, so that a missing file is
    // "unreadable" and not "malformed".
    let text = match path {
        Some(p) => Some(read_xml(p)?),
        None => None,
    };
    if let (Some(p), Some(t)) = (path, text.as_deref()) {
        trial_load(p, t)?;
    }
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let topology = build(text.as_deref())?;
        let model = extract(&topology, path.is_none())?;
        Ok::<_, String>(model)
    }));
    let model = match attempt {
        Ok(Ok(model)) => model,
        Ok(Err(reason)) => return Err(error_for(path, reason)),
        Err(_) => return Err(error_for(path, PANIC_REASON.to_string())),
    };
    let source = match path {
        Some(p) => Source::File {
            path: p.to_path_buf(),
        },
        None => Source::Live,
    };
    Ok(finish(model, source))
}

fn error_for(path: Option<&Path>, reason: String) -> MachineError {
    match path {
        Some(p) => MachineError::Malformed {
            path: p.to_path_buf(),
            reason,
        },
        None => MachineError::Discovery(reason),
    }
}

/// Reads the file ourselves (hwloc cannot tell "missing" from "malformed",
/// and hwlocality panics on some of its file errors) and checks it.
fn read_xml(path: &Path) -> Result<String, MachineError> {
    let bytes =
        input::read_bytes(path, InputKind::TopologyXml).map_err(|e| MachineError::Unreadable {
            path: path.to_path_buf(),
            reason: e.problem.to_string(),
        })?;
    let malformed = |reason: String| MachineError::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    let text =
        String::from_utf8(bytes).map_err(|_| malformed("the file is not UTF-8 text".into()))?;
    xml_check::check(&text).map_err(malformed)?;
    Ok(text)
}

/// Loads the file once in a forked child while the process is
/// single-threaded (see `sys::child`): a crash there, a refusal hwloc
/// explains, or a warning hwloc would print becomes one error line.
fn trial_load(path: &Path, text: &str) -> Result<(), MachineError> {
    if !child::single_threaded() {
        return Ok(());
    }
    let trial = child::in_child(
        || {
            // The child is single-threaded: changing its environment is
            // safe, and hwloc reads this once, at its first XML import.
            std::env::set_var("HWLOC_XML_VERBOSE", "1");
            match build(Some(text)) {
                Err(_) => HWLOC_REFUSED,
                Ok(topology) => match extract(&topology, false) {
                    Ok(_) => 0,
                    Err(_) => 2,
                },
            }
        },
        TRIAL_LIMIT,
        child::SAID_BYTES,
    );
    let malformed = |reason: String| MachineError::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    match trial {
        Trial::Killed { signal, said } => Err(MachineError::Crashed {
            path: path.to_path_buf(),
            signal: child::signal_name(signal),
            detail: hwloc_complaint(&String::from_utf8_lossy(&said))
                .map(|c| format!(" after \"{c}\""))
                .unwrap_or_default(),
        }),
        Trial::TimedOut => Err(malformed(format!(
            "hwloc did not finish loading it within {} s",
            TRIAL_LIMIT.as_secs()
        ))),
        Trial::Exited { code, said } if code == HWLOC_REFUSED => {
            match hwloc_complaint(&String::from_utf8_lossy(&said)) {
                Some(c) => Err(malformed(format!("hwloc refused it: {c}"))),
                None => Ok(()),
            }
        }
        Trial::Exited { code: 0, said } => match hwloc_banner(&String::from_utf8_lossy(&said)) {
            // hwloc would print this screenful again in this process.
            Some(b) => Err(malformed(format!("hwloc reports: {b}"))),
            None => Ok(()),
        },
        // The panic hook has already spoken in the child; here it would
        // add a second line to the error.
        Trial::Exited {
            code: child::PANICKED,
            ..
        } => Err(malformed(PANIC_REASON.to_string())),
        // Other outcomes are reproduced by the load in this process, which
        // then gives its own error.
        Trial::Exited { .. } | Trial::NotRun => Ok(()),
    }
}

/// The line of hwloc's verbose output that says what it refused, without
/// its file-name prefix ("xmlbuffer: invalid normal object Core P#3 without
/// cpuset" gives "invalid normal object Core P#3 without cpuset").
fn hwloc_complaint(said: &str) -> Option<String> {
    // hwloc's small XML reader (hwloc built without libxml2) says only this
    // when it cannot parse the text, over two lines.
    let unparsed = said.contains("with the minimalistic parser");
    let lines: Vec<&str> = said
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with('*')
                && !l.ends_with("discovery failed.")
                && !l.contains("minimalistic parser")
                && !l.starts_with("generated by hwloc")
        })
        .collect();
    let specific = [
        "invalid",
        "cannot",
        "failed",
        "missing",
        "unrecognized",
        "unexpected",
    ];
    let Some(line) = lines
        .iter()
        .rev()
        .find(|l| specific.iter().any(|w| l.to_lowercase().contains(w)))
        .or(lines.last())
    else {
        return unparsed.then(|| {
            "its XML reader (hwloc without libxml2) could not parse the text; it reads files laid out as lstopo --of xml writes them".to_string()
        });
    };
    let text = match line.split_once(": ") {
        Some((prefix, rest)) if !prefix.contains(' ') => rest,
        _ => line,
    };
    Some(text.chars().take(200).collect())
}

/// The first line of a critical-error banner hwloc printed (its lines start
/// with `*`), if any.
fn hwloc_banner(said: &str) -> Option<String> {
    said.lines()
        .filter_map(|l| l.strip_prefix("* "))
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(200).collect())
}

/// Configures and loads a topology: live when `xml` is `None`.
fn build(xml: Option<&str>) -> Result<Topology, String> {
    let mut builder = Topology::builder();
    if let Some(xml) = xml {
        builder = builder
            .from_xml(xml)
            .map_err(|e| format!("hwloc rejected the XML ({e})"))?;
    }
    builder = builder
        .with_flags(BuildFlags::INCLUDE_DISALLOWED)
        .map_err(|e| format!("cannot set hwloc flags: {e}"))?
        .with_io_type_filter(TypeFilter::KeepImportant)
        .map_err(|e| format!("cannot keep I/O objects: {e}"))?
        .with_cpu_cache_type_filter(TypeFilter::KeepAll)
        .map_err(|e| format!("cannot keep caches: {e}"))?
        .with_cpu_icache_type_filter(TypeFilter::KeepAll)
        .map_err(|e| format!("cannot keep instruction caches: {e}"))?;
    builder.build().map_err(|e| {
        let why = e
            .errno
            .map_or_else(|| "unknown error".to_string(), |n| n.to_string());
        match xml {
            Some(text) if xml_major_version(text).is_some_and(|v| v >= 3) => format!(
                "it is an XML v3 file (hwloc 3.x) and this hwloc reads only v2: \
                 export it again with hwloc 2 (lstopo --of xml) ({why})"
            ),
            Some(_) if e.errno.is_some_and(|n| n.0 == libc::EINVAL) => format!(
                "hwloc refused it as invalid ({why}) although it passed numalab's checks: \
                 HWLOC_XML_VERBOSE=1 lstopo-no-graphics -i FILE names the object"
            ),
            Some(_) => format!("hwloc could not load it: {why}"),
            None => format!("hwloc_topology_load failed: {why}"),
        }
    })
}

/// The major version in `<topology version="N.M">`, when present.
fn xml_major_version(text: &str) -> Option<u32> {
    let start = text.find("<topology")?;
    let tag = &text[start..];
    let tag = &tag[..tag.find('>')?];
    let v = &tag[tag.find("version=")? + "version=".len()..];
    let v = v.trim_start_matches(['"', '\'']);
    let major: String = v.chars().take_while(char::is_ascii_digit).collect();
    major.parse().ok()
}

/// Everything read from hwloc, before the derived facts are added.
#[derive(Default)]
struct Model {
    nodes: Vec<Node>,
    /// CPU-less node -> CPU nodes sharing its hwloc locality.
    attachments: BTreeMap<u32, IdSet>,
    packages: Vec<super::Package>,
    cores: Vec<Core>,
    complete_cpus: IdSet,
    complete_nodes: IdSet,
    allowed_cpus: IdSet,
    allowed_nodes: IdSet,
    /// CPUs some object below the root places (online ones: offline CPUs and
    /// CPUs of packages a restricted export left out are unknown).
    known_cpus: IdSet,
    caches: Vec<Cache>,
    distances: Option<Distances>,
    memory_attributes: Vec<MemoryAttributeValue>,
    devices: Vec<Device>,
    warnings: Vec<String>,
}

/// Converts an hwloc bitmap into an [`IdSet`], refusing infinite or absurd sets.
fn ids<B>(set: &B) -> Result<IdSet, String>
where
    B: SpecializedBitmap,
{
    let bitmap: &hwlocality::bitmap::Bitmap = set.borrow();
    match (bitmap.weight(), bitmap.last_set()) {
        (None, _) => Err("hwloc reports an infinite CPU or node set".to_string()),
        (Some(_), Some(last)) if usize::from(last) >= MAX_ID => Err(format!(
            "hwloc reports an id too large ({})",
            usize::from(last)
        )),
        _ => Ok(bitmap
            .iter_set()
            .filter_map(|i| u32::try_from(usize::from(i)).ok())
            .collect()),
    }
}

/// The complete cpuset of an object (falls back to its cpuset).
fn obj_cpus(obj: &TopologyObject) -> Result<IdSet, String> {
    match (obj.complete_cpuset(), obj.cpuset()) {
        (Some(c), _) => ids(c.deref()),
        (None, Some(c)) => ids(c.deref()),
        (None, None) => Ok(IdSet::new()),
    }
}

/// The complete nodeset of an object (falls back to its nodeset).
fn obj_nodes(obj: &TopologyObject) -> Result<IdSet, String> {
    match (obj.complete_nodeset(), obj.nodeset()) {
        (Some(n), _) => ids(n.deref()),
        (None, Some(n)) => ids(n.deref()),
        (None, None) => Ok(IdSet::new()),
    }
}

fn os_index_u32(obj: &TopologyObject) -> Option<u32> {
    obj.os_index().and_then(|i| u32::try_from(i).ok())
}

fn logical_u32(obj: &TopologyObject) -> u32 {
    u32::try_from(obj.logical_index()).unwrap_or(u32::MAX)
}

fn cstr(s: Option<&std::ffi::CStr>) -> Option<String> {
    s.map(|s| s.to_string_lossy().trim().to_string())
        .filter(|s| !s.is_empty())
}

fn extract(topology: &Topology, live: bool) -> Result<Model, String> {
    let mut model = Model {
        complete_cpus: ids(topology.complete_cpuset().deref())?,
        complete_nodes: ids(topology.complete_nodeset().deref())?,
        allowed_cpus: ids(topology.allowed_cpuset().deref())?,
        allowed_nodes: ids(topology.allowed_nodeset().deref())?,
        ..Model::default()
    };
    read_nodes(topology, live, &mut model)?;
    if model.nodes.is_empty() {
        return Err("the topology has no NUMA node".to_string());
    }
    read_cpus(topology, &mut model)?;
    read_caches(topology, &mut model)?;
    read_distances(topology, &mut model)?;
    read_memory_attributes(topology, &mut model)?;
    read_devices(topology, &mut model)?;
    Ok(model)
}

/// Memory kind from hwloc's subtype and info attributes.
fn memory_kind(subtype: Option<&str>, dax_type: Option<&str>) -> MemoryKind {
    let classify = |s: &str| {
        let u = s.to_ascii_uppercase();
        if u.contains("CXL") {
            Some(MemoryKind::Cxl)
        } else if u == "DRAM" {
            Some(MemoryKind::Dram)
        } else if u == "HBM" || u == "MCDRAM" {
            Some(MemoryKind::Hbm)
        } else if u == "NVM" || u == "PMEM" {
            Some(MemoryKind::Nvm)
        } else if u == "GPUMEMORY" {
            Some(MemoryKind::GpuMemory)
        } else if u == "SPM" {
            Some(MemoryKind::SpecificPurpose)
        } else {
            None
        }
    };
    subtype
        .and_then(classify)
        .or_else(|| dax_type.and_then(classify))
        .unwrap_or(MemoryKind::Unknown)
}

/// Which of several nodes sharing one locality owns the CPUs: ordinary
/// memory first, then HBM, CXL/SPM, NVM, GPU memory.
fn owner_rank(kind: MemoryKind) -> u8 {
    match kind {
        MemoryKind::Dram | MemoryKind::Unknown => 0,
        MemoryKind::Hbm => 1,
        MemoryKind::Cxl | MemoryKind::SpecificPurpose => 2,
        MemoryKind::Nvm => 3,
        MemoryKind::GpuMemory => 4,
    }
}

/// Each node's own CPUs, from hwloc localities (`(os_index, locality, kind)`).
///
/// A CPU belongs to the node with the smallest locality containing it; when
/// several nodes share that locality, to the one of ordinary memory, then the
/// lowest OS index. The others sharing it are CPU-less (what the kernel says
/// for HBM/NVM/GPU/CXL nodes hwloc attaches next to a CPU node).
pub(crate) fn own_cpus(nodes: &[(u32, IdSet, MemoryKind)]) -> BTreeMap<u32, IdSet> {
    let mut owned: BTreeMap<u32, IdSet> =
        nodes.iter().map(|(n, _, _)| (*n, IdSet::new())).collect();
    let all: IdSet = nodes
        .iter()
        .fold(IdSet::new(), |acc, (_, loc, _)| acc.union(loc));
    for cpu in all.iter() {
        let best = nodes
            .iter()
            .filter(|(_, loc, _)| loc.contains(cpu))
            .min_by_key(|(n, loc, kind)| (loc.len(), owner_rank(*kind), *n));
        if let Some((n, _, _)) = best {
            if let Some(set) = owned.get_mut(n) {
                set.insert(cpu);
            }
        }
    }
    owned
}

fn read_nodes(topology: &Topology, live: bool, model: &mut Model) -> Result<(), String> {
    struct Raw {
        os: u32,
        locality: IdSet,
        memory: u64,
        subtype: Option<String>,
        kind: MemoryKind,
        tier: Option<u32>,
    }
    let mut raw: Vec<Raw> = Vec::new();
    for obj in topology.objects_with_type(ObjectType::NUMANode) {
        let Some(os) = os_index_u32(obj) else {
            continue;
        };
        if raw.iter().any(|r| r.os == os) {
            return Err(format!("NUMA node {os} appears twice"));
        }
        let memory = match obj.attributes() {
            Some(ObjectAttributes::NUMANode(a)) => a.local_memory().map_or(0, |m| m.get()),
            _ => 0,
        };
        let subtype = cstr(obj.subtype());
        let dax = cstr(obj.info("DAXType"));
        let kind = memory_kind(subtype.as_deref(), dax.as_deref());
        let tier = cstr(obj.info("MemoryTier")).and_then(|t| t.parse::<u32>().ok());
        let locality = obj_cpus(obj)?;
        model.known_cpus = model.known_cpus.union(&locality);
        raw.push(Raw {
            os,
            locality,
            memory,
            subtype,
            kind,
            tier,
        });
    }
    raw.sort_by_key(|r| r.os);
    let owned = own_cpus(
        &raw.iter()
            .map(|r| (r.os, r.locality.clone(), r.kind))
            .collect::<Vec<_>>(),
    );
    for r in &raw {
        let cpus = owned.get(&r.os).cloned().unwrap_or_default();
        let cpuless = cpus.is_empty();
        let kind = match r.kind {
            MemoryKind::Unknown if !cpuless => MemoryKind::Dram,
            k => k,
        };
        if cpuless {
            // The CPU nodes sharing this node's locality: where it attaches.
            let attach: IdSet = raw
                .iter()
                .filter(|o| {
                    o.os != r.os
                        && owned
                            .get(&o.os)
                            .is_some_and(|c| !c.is_empty() && c.is_subset(&r.locality))
                })
                .map(|o| o.os)
                .collect();
            model.attachments.insert(r.os, attach);
        }
        model.nodes.push(Node {
            os_index: r.os,
            cpus,
            memory_bytes: r.memory,
            free_bytes: if live { free_memory(r.os) } else { None },
            cpuless,
            kind,
            subtype: r.subtype.clone(),
            tier: r.tier,
            allowed: model.allowed_nodes.contains(r.os),
        });
    }
    Ok(())
}

/// MemFree of a node from sysfs, in bytes.
fn free_memory(node: u32) -> Option<u64> {
    let text =
        std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/meminfo")).ok()?;
    parse_memfree(&text)
}

fn parse_memfree(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let (_, rest) = line.split_once("MemFree:")?;
        let mut parts = rest.split_whitespace();
        let value: u64 = parts.next()?.parse().ok()?;
        let factor = match parts.next() {
            Some("kB") | Some("KB") => 1024,
            None => 1,
            Some(_) => 1024,
        };
        value.checked_mul(factor)
    })
}

fn read_cpus(topology: &Topology, model: &mut Model) -> Result<(), String> {
    for pkg in topology.objects_with_type(ObjectType::Package) {
        let cpus = obj_cpus(pkg)?;
        model.known_cpus = model.known_cpus.union(&cpus);
        model.packages.push(Package {
            os_index: os_index_u32(pkg),
            logical_index: logical_u32(pkg),
            cpus,
            nodes: obj_nodes(pkg)?,
        });
    }
    for core in topology.objects_with_type(ObjectType::Core) {
        let package = core
            .first_ancestor_with_type(ObjectType::Package)
            .map_or(0, logical_u32);
        let cpus = obj_cpus(core)?;
        model.known_cpus = model.known_cpus.union(&cpus);
        model.cores.push(Core {
            logical_index: logical_u32(core),
            os_index: os_index_u32(core),
            cpus,
            package,
        });
    }
    for pu in topology.objects_with_type(ObjectType::PU) {
        if let Some(os) = os_index_u32(pu) {
            model.known_cpus.insert(os);
        }
    }
    Ok(())
}

fn read_caches(topology: &Topology, model: &mut Model) -> Result<(), String> {
    for obj in topology.objects() {
        if !obj.object_type().is_cpu_cache() {
            continue;
        }
        let Some(ObjectAttributes::Cache(attr)) = obj.attributes() else {
            continue;
        };
        let kind = match attr.cache_type() {
            CacheType::Unified => "unified",
            CacheType::Data => "data",
            CacheType::Instruction => "instruction",
            CacheType::Unknown(_) => "unified",
        };
        let associativity = match attr.associativity() {
            hwlocality::object::attributes::CacheAssociativity::Full => Some(-1),
            hwlocality::object::attributes::CacheAssociativity::Unknown => None,
            hwlocality::object::attributes::CacheAssociativity::Ways(w) => {
                i32::try_from(w.get()).ok()
            }
        };
        model.caches.push(Cache {
            level: u8::try_from(attr.depth()).unwrap_or(u8::MAX),
            kind: kind.to_string(),
            logical_index: logical_u32(obj),
            size_bytes: attr.size().map_or(0, |s| s.get()),
            line_bytes: attr
                .line_size()
                .and_then(|l| u32::try_from(l.get()).ok())
                .unwrap_or(0),
            associativity,
            cpus: obj_cpus(obj)?,
        });
    }
    model.caches.sort_by(|a, b| {
        (a.level, kind_order(&a.kind), a.logical_index).cmp(&(
            b.level,
            kind_order(&b.kind),
            b.logical_index,
        ))
    });
    Ok(())
}

fn kind_order(kind: &str) -> u8 {
    match kind {
        "data" => 0,
        "instruction" => 1,
        _ => 2,
    }
}

/// The NUMA latency matrix: prefer hwloc's "NUMALatency" (the SLIT), else
/// the first other matrix between NUMA nodes.
fn read_distances(topology: &Topology, model: &mut Model) -> Result<(), String> {
    // Matrices "by type" hold only NUMA nodes (heterogeneous ones have no
    // single type). `Distances::kind()` is not used: hwlocality asserts on
    // kinds it does not expect, which a crafted file can contain.
    let Ok(all) = topology.distances_with_type(None, ObjectType::NUMANode) else {
        return Ok(());
    };
    let mut best: Option<(u8, Distances)> = None;
    for d in &all {
        let name = cstr(d.name()).unwrap_or_default();
        let mut os = Vec::with_capacity(d.num_objects());
        for obj in d.objects() {
            match obj {
                Some(o) if o.object_type() == ObjectType::NUMANode => match os_index_u32(o) {
                    Some(i) => os.push(i),
                    None => break,
                },
                _ => break,
            }
        }
        let n = d.num_objects();
        if os.len() != n || n == 0 || d.distances().len() != n * n {
            continue;
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| os[i]);
        if order.windows(2).any(|w| os[w[0]] == os[w[1]]) {
            continue;
        }
        let values = d.distances();
        let matrix: Vec<Vec<u64>> = order
            .iter()
            .map(|&i| order.iter().map(|&j| values[i * n + j]).collect())
            .collect();
        let rank = if name == "NUMALatency" { 0 } else { 1 };
        if best.as_ref().is_none_or(|(r, _)| rank < *r) {
            best = Some((
                rank,
                Distances {
                    nodes: order.iter().map(|&i| os[i]).collect(),
                    matrix,
                    source: if name.is_empty() {
                        "unnamed NUMA distances".to_string()
                    } else {
                        name
                    },
                },
            ));
        }
    }
    model.distances = best.map(|(_, d)| d);
    Ok(())
}

fn read_memory_attributes(topology: &Topology, model: &mut Model) -> Result<(), String> {
    let attrs: [(&str, MemoryAttribute<'_>); 6] = [
        ("latency_ns", MemoryAttribute::latency(topology)),
        ("read_latency_ns", MemoryAttribute::read_latency(topology)),
        ("write_latency_ns", MemoryAttribute::write_latency(topology)),
        ("bandwidth_mib_s", MemoryAttribute::bandwidth(topology)),
        (
            "read_bandwidth_mib_s",
            MemoryAttribute::read_bandwidth(topology),
        ),
        (
            "write_bandwidth_mib_s",
            MemoryAttribute::write_bandwidth(topology),
        ),
    ];
    for target in topology.objects_with_type(ObjectType::NUMANode) {
        let Some(target_os) = os_index_u32(target) else {
            continue;
        };
        for (name, attr) in &attrs {
            let Ok((initiators, values)) = attr.initiators(target) else {
                continue;
            };
            for (initiator, value) in initiators.iter().zip(values) {
                let cpus = match initiator {
                    Initiator::CpuSet(set) => ids(set.deref())?,
                    Initiator::Object(obj) => obj_cpus(obj)?,
                };
                let initiator_nodes: IdSet = model
                    .nodes
                    .iter()
                    .filter(|n| !n.cpus.is_empty() && n.cpus.is_subset(&cpus))
                    .map(|n| n.os_index)
                    .collect();
                model.memory_attributes.push(MemoryAttributeValue {
                    attribute: (*name).to_string(),
                    target: target_os,
                    initiator_cpus: cpus,
                    initiator_nodes,
                    value,
                });
            }
        }
    }
    let order = |a: &str| {
        attrs
            .iter()
            .position(|(n, _)| *n == a)
            .unwrap_or(attrs.len())
    };
    model.memory_attributes.sort_by(|a, b| {
        (order(&a.attribute), a.target, a.initiator_cpus.first()).cmp(&(
            order(&b.attribute),
            b.target,
            b.initiator_cpus.first(),
        ))
    });
    Ok(())
}

fn read_devices(topology: &Topology, model: &mut Model) -> Result<(), String> {
    for dev in topology.os_devices() {
        let Some(ObjectAttributes::OSDevice(attr)) = dev.attributes() else {
            continue;
        };
        let kind = match attr.device_type() {
            OSDeviceType::GPU => "gpu",
            OSDeviceType::Network | OSDeviceType::OpenFabrics => "network",
            OSDeviceType::Storage => "storage",
            OSDeviceType::CoProcessor => "coprocessor",
            OSDeviceType::DMA => "dma",
            _ => "other",
        };
        let name = cstr(dev.name()).unwrap_or_else(|| "?".to_string());
        // The device's own infos first, then its PCI device's (lspci's
        // names, where the file has them).
        let pci = dev
            .ancestors()
            .find(|a| matches!(a.attributes(), Some(ObjectAttributes::PCIDevice(_))));
        let info = |keys: &[&str]| -> Option<String> {
            let of = |o: &TopologyObject| {
                keys.iter().find_map(|k| {
                    o.infos()
                        .iter()
                        .find(|i| i.name().to_bytes() == k.as_bytes())
                        .map(|i| i.value().to_string_lossy().trim().to_string())
                        .filter(|v| !v.is_empty())
                })
            };
            of(dev).or_else(|| pci.and_then(of))
        };
        let device_model = info(&["GPUModel", "Model", "PCIDevice"]);
        let vendor = info(&["GPUVendor", "Vendor", "PCIVendor"]);
        let compute_gpu = info(&["GPUModel"]).is_some()
            || info(&["OpenCLDeviceType"]).is_some_and(|t| t == "GPU")
            || info(&["Backend"])
                .is_some_and(|b| ["NVML", "CUDA", "RSMI", "LevelZero"].contains(&b.as_str()));
        let kind = if kind == "coprocessor" && compute_gpu {
            "gpu"
        } else {
            kind
        };
        let pci_bus_id = dev.ancestors().find_map(|a| match a.attributes() {
            Some(ObjectAttributes::PCIDevice(p)) => Some(format!(
                "{:04x}:{:02x}:{:02x}.{:x}",
                p.domain(),
                p.bus_id(),
                p.bus_device(),
                p.function()
            )),
            _ => None,
        });
        let (local_nodes, local_cpus) = match dev.first_non_io_ancestor() {
            Some(a) => (obj_nodes(a)?, obj_cpus(a)?),
            None => (IdSet::new(), IdSet::new()),
        };
        model.devices.push(Device {
            kind: kind.to_string(),
            name,
            model: device_model,
            vendor,
            pci_bus_id,
            local_nodes,
            local_cpus,
        });
    }
    Ok(())
}

/// Adds the derived facts (graph, hops, warnings) and builds the [`Machine`].
fn finish(model: Model, source: Source) -> Machine {
    let mut warnings = model.warnings;
    let node_ids: Vec<u32> = model.nodes.iter().map(|n| n.os_index).collect();
    let derived = graph::derive(
        &node_ids,
        model.distances.as_ref(),
        &model.attachments,
        model.packages.len(),
    );
    warnings.extend(derived.warnings);
    // A cgroup shows as CPUs hwloc places (or nodes it describes) that this
    // process may not use. CPUs or nodes hwloc merely counts (offline CPUs,
    // memoryless nodes, parts a restricted export left out) are not evidence.
    let described: IdSet = node_ids.iter().copied().collect();
    let disallowed_cpus = model.known_cpus.difference(&model.allowed_cpus);
    let disallowed_nodes = described.difference(&model.allowed_nodes);
    let restricted = !disallowed_cpus.is_empty() || !disallowed_nodes.is_empty();
    if restricted {
        warnings.push(format!(
            "the view is restricted by a cgroup: allowed CPUs {} of {}, nodes {} of {}",
            model.allowed_cpus, model.complete_cpus, model.allowed_nodes, model.complete_nodes
        ));
    }
    let unknown_cpus = model
        .complete_cpus
        .difference(&model.known_cpus)
        .difference(&model.allowed_cpus);
    if !unknown_cpus.is_empty() {
        warnings.push(format!(
            "CPUs {unknown_cpus} are offline or not described by the topology: they are not listed in any node"
        ));
    }
    let missing_nodes = model.complete_nodes.difference(&described);
    if !missing_nodes.is_empty() {
        warnings.push(format!(
            "node(s) {missing_nodes} are offline, without memory, or not described by the topology: they are not listed"
        ));
    }
    let smt = model
        .cores
        .iter()
        .map(|c| u32::try_from(c.cpus.len()).unwrap_or(u32::MAX))
        .max()
        .unwrap_or(1)
        .max(1);
    Machine {
        schema_version: TOPOLOGY_SCHEMA_VERSION.into(),
        source,
        nodes: model.nodes,
        packages: model.packages,
        cores: model.cores,
        complete_cpus: model.complete_cpus,
        complete_nodes: model.complete_nodes,
        allowed_cpus: model.allowed_cpus,
        allowed_nodes: model.allowed_nodes,
        restricted,
        smt,
        caches: model.caches,
        distances: model.distances,
        memory_attributes: model.memory_attributes,
        devices: model.devices,
        links: derived.links,
        hops: derived.hops,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_versions() {
        assert_eq!(
            xml_major_version("<?xml?>\n<topology version=\"2.0\">"),
            Some(2)
        );
        assert_eq!(xml_major_version("<topology version='3.0'>"), Some(3));
        assert_eq!(xml_major_version("<topology>"), None);
        assert_eq!(xml_major_version("<topology version="), None);
    }

    #[test]
    fn what_hwloc_said() {
        let said = "xmlbuffer: invalid normal object Core P#3 without cpuset\nxmlbuffer: XML component discovery failed.\n";
        assert_eq!(
            hwloc_complaint(said).as_deref(),
            Some("invalid normal object Core P#3 without cpuset")
        );
        assert_eq!(
            hwloc_complaint("xmlbuffer: XML component discovery failed.\n"),
            None
        );
        let unparsed = "Failed to parse XML input with the minimalistic parser. If it was not\ngenerated by hwloc, try enabling full XML support with libxml2.\n";
        assert!(hwloc_complaint(unparsed)
            .unwrap()
            .starts_with("its XML reader (hwloc without libxml2) could not parse the text"));
        let banner = "****\n* hwloc has encountered an out-of-order XML topology load.\n* Object ...\n****\n";
        assert_eq!(
            hwloc_banner(banner).as_deref(),
            Some("hwloc has encountered an out-of-order XML topology load.")
        );
        assert_eq!(
            hwloc_banner("xmlbuffer: ignoring unknown attribute\n"),
            None
        );
    }

    #[test]
    fn memfree_parsing() {
        let text = "Node 0 MemTotal:       16310000 kB\nNode 0 MemFree:         1000 kB\n";
        assert_eq!(parse_memfree(text), Some(1000 * 1024));
        assert_eq!(parse_memfree("garbage"), None);
    }

    #[test]
    fn kinds_from_subtypes() {
        assert_eq!(memory_kind(Some("MCDRAM"), None), MemoryKind::Hbm);
        assert_eq!(memory_kind(Some("HBM"), None), MemoryKind::Hbm);
        assert_eq!(memory_kind(Some("NVM"), None), MemoryKind::Nvm);
        assert_eq!(memory_kind(Some("GPUMemory"), None), MemoryKind::GpuMemory);
        assert_eq!(memory_kind(Some("CXL-DRAM"), None), MemoryKind::Cxl);
        assert_eq!(memory_kind(Some("CXLMem"), None), MemoryKind::Cxl);
        assert_eq!(memory_kind(Some("SPM"), None), MemoryKind::SpecificPurpose);
        assert_eq!(memory_kind(None, Some("NVM")), MemoryKind::Nvm);
        assert_eq!(memory_kind(Some("DRAM"), None), MemoryKind::Dram);
        assert_eq!(memory_kind(None, None), MemoryKind::Unknown);
    }

    #[test]
    fn shared_locality_gives_cpus_to_ordinary_memory() {
        let s = |t: &str| IdSet::parse_list(t).unwrap();
        let owned = own_cpus(&[
            (0, s("0-1"), MemoryKind::Unknown),
            (4, s("0-1"), MemoryKind::Unknown),
            (1, s("2-3"), MemoryKind::Unknown),
            (250, s("2-3"), MemoryKind::GpuMemory),
            (7, s("0-3"), MemoryKind::Nvm),
        ]);
        assert_eq!(owned[&0], s("0-1"));
        assert!(owned[&4].is_empty());
        assert_eq!(owned[&1], s("2-3"));
        assert!(owned[&250].is_empty());
        assert!(owned[&7].is_empty());
    }
}
