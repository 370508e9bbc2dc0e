//! The machine: nodes, CPUs, distances, hops, CPU-less memory nodes and
//! caches, from the live machine or an hwloc XML topology file.

use crate::args;
use crate::handles::{self, Object};
use crate::{guard, numalab_status, Fail, Result};
use numalab::Machine;
use std::ffi::{c_char, c_int, c_uint};
use std::sync::Arc;

/// A machine model (opaque). Made by `numalab_machine_load`, freed by
/// `numalab_machine_free`. Safe to share between threads.
pub struct numalab_machine {
    _opaque: [u8; 0],
}

/// One NUMA node.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct numalab_node_info {
    /// The node's OS index (what numactl and /sys show).
    pub os_index: c_uint,
    /// How many CPUs (hardware threads) are local to it; 0 for a CPU-less
    /// (memory-only) node.
    pub cpu_count: c_uint,
    /// 1 when the node has memory and no CPU (CXL, HBM, NVM...).
    pub cpuless: c_int,
    /// 1 when this process may allocate there (cgroup cpuset.mems).
    pub allowed: c_int,
    /// Total memory in bytes.
    pub memory_bytes: u64,
    /// Free memory in bytes now; `UINT64_MAX` when unknown (topology file).
    pub free_bytes: u64,
    /// The node's tier rank where the kernel gives one, else -1.
    pub tier: c_int,
}

/// One CPU cache.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct numalab_cache_info {
    /// 1 for L1 ... 5.
    pub level: c_uint,
    /// 0 data, 1 instruction, 2 unified.
    pub kind: c_uint,
    /// hwloc's logical index among the caches of its level (the `l3:N`
    /// of the set grammar).
    pub logical_index: c_uint,
    /// How many CPUs share it.
    pub cpu_count: c_uint,
    pub size_bytes: u64,
    pub line_bytes: c_uint,
}

pub(crate) fn machine_of(m: *const numalab_machine) -> Result<Arc<Machine>> {
    match handles::get(m as usize, "machine", "machine")? {
        Object::Machine(m) => Ok(m),
        _ => unreachable!("the registry checked the kind"),
    }
}

/// Loads the machine model: the live machine when `topology_xml` is NULL,
/// else an hwloc XML topology file (lstopo --of xml; hwloc 2.x). A file
/// describes a machine for queries and sets; placing memory or threads
/// needs the live machine. On success `*out` is a new handle; on failure
/// it is set to NULL.
///
/// # Safety
/// `topology_xml` is NULL or a NUL-terminated string; `out` is NULL or
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_load(
    topology_xml: *const c_char,
    out: *mut *mut numalab_machine,
) -> numalab_status {
    guard("numalab_machine_load", || {
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(out, "out") }?;
        *out = std::ptr::null_mut();
        // SAFETY: the caller's guarantee.
        let path = unsafe { args::opt_text(topology_xml, "topology_xml") }?;
        let m = Machine::load(path.map(std::path::Path::new))
            .map_err(|e| Fail::invalid(e.to_string()))?;
        *out = handles::insert(Object::Machine(Arc::new(m))) as *mut numalab_machine;
        Ok(())
    })
}

/// Frees a machine. Sets, policies and buffers made from it stay valid.
/// NULL is a no-op; a handle already freed is `NUMALAB_E_HANDLE`.
#[no_mangle]
pub extern "C" fn numalab_machine_free(m: *mut numalab_machine) -> numalab_status {
    guard("numalab_machine_free", || {
        handles::remove(m as usize, "machine", "machine")
    })
}

/// `*out` = 1 when the model is the running machine (placement possible),
/// 0 for a topology file.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_is_live(
    m: *const numalab_machine,
    out: *mut c_int,
) -> numalab_status {
    guard("numalab_machine_is_live", || {
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        *unsafe { args::out(out, "out") }? = m.is_live() as c_int;
        Ok(())
    })
}

/// The OS indexes of every NUMA node (CPU-less and disallowed ones
/// included), ascending: `*count` gets how many there are, `ids` as many
/// as `capacity` holds (`NUMALAB_E_TRUNCATED` when that is fewer). Pass
/// `ids` NULL and `capacity` 0 to ask only for the count.
///
/// # Safety
/// `ids` is NULL or valid for `capacity` writes; `count` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_nodes(
    m: *const numalab_machine,
    ids: *mut c_uint,
    capacity: usize,
    count: *mut usize,
) -> numalab_status {
    guard("numalab_machine_nodes", || {
        let m = machine_of(m)?;
        let list: Vec<u32> = m.nodes.iter().map(|n| n.os_index).collect();
        // SAFETY: the caller's guarantee.
        unsafe { args::write_ids(list.into_iter(), ids, capacity, count) }
    })
}

/// The CPUs this process may use (cgroup cpuset applied), ascending; the
/// list convention of `numalab_machine_nodes`.
///
/// # Safety
/// As `numalab_machine_nodes`.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_cpus(
    m: *const numalab_machine,
    ids: *mut c_uint,
    capacity: usize,
    count: *mut usize,
) -> numalab_status {
    guard("numalab_machine_cpus", || {
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        unsafe { args::write_ids(m.allowed_cpus.iter(), ids, capacity, count) }
    })
}

fn node_of(m: &Machine, node: c_uint) -> Result<&numalab::machine::Node> {
    m.node(node).ok_or_else(|| {
        Fail::invalid(format!(
            "node {node} does not exist; nodes: {}",
            m.node_ids()
        ))
    })
}

/// What node `node` (an OS index) is.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_node(
    m: *const numalab_machine,
    node: c_uint,
    out: *mut numalab_node_info,
) -> numalab_status {
    guard("numalab_machine_node", || {
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(out, "out") }?;
        let n = node_of(&m, node)?;
        *out = numalab_node_info {
            os_index: n.os_index,
            cpu_count: n.cpus.len() as c_uint,
            cpuless: n.cpuless as c_int,
            allowed: n.allowed as c_int,
            memory_bytes: n.memory_bytes,
            free_bytes: n.free_bytes.unwrap_or(u64::MAX),
            tier: n.tier.map(|t| t as c_int).unwrap_or(-1),
        };
        Ok(())
    })
}

/// The CPUs local to node `node`, ascending (none for a CPU-less node);
/// the list convention of `numalab_machine_nodes`.
///
/// # Safety
/// As `numalab_machine_nodes`.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_node_cpus(
    m: *const numalab_machine,
    node: c_uint,
    ids: *mut c_uint,
    capacity: usize,
    count: *mut usize,
) -> numalab_status {
    guard("numalab_machine_node_cpus", || {
        let m = machine_of(m)?;
        let n = node_of(&m, node)?;
        // SAFETY: the caller's guarantee.
        unsafe { args::write_ids(n.cpus.iter(), ids, capacity, count) }
    })
}

/// The node whose CPUs include `cpu`.
///
/// # Safety
/// `node` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_node_of_cpu(
    m: *const numalab_machine,
    cpu: c_uint,
    node: *mut c_uint,
) -> numalab_status {
    guard("numalab_machine_node_of_cpu", || {
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(node, "node") }?;
        *out = m.node_of_cpu(cpu).ok_or_else(|| {
            Fail::invalid(format!(
                "CPU {cpu} belongs to no node of this machine; CPUs: {}",
                m.complete_cpus
            ))
        })?;
        Ok(())
    })
}

/// The firmware's distance (SLIT) from node `from` to node `to`: 10 for
/// local; 10 and 20 when the machine gives no table (as the kernel does).
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_distance(
    m: *const numalab_machine,
    from: c_uint,
    to: c_uint,
    out: *mut c_uint,
) -> numalab_status {
    guard("numalab_machine_distance", || {
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(out, "out") }?;
        node_of(&m, from)?;
        node_of(&m, to)?;
        *out = m.distance(from, to).min(c_uint::MAX as u64) as c_uint;
        Ok(())
    })
}

/// Hops from node `from` to node `to` over the interconnect graph
/// numalab infers from the distances (0 for the same node). A pair with no
/// path is `NUMALAB_E_INVALID`.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_hops(
    m: *const numalab_machine,
    from: c_uint,
    to: c_uint,
    out: *mut c_uint,
) -> numalab_status {
    guard("numalab_machine_hops", || {
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(out, "out") }?;
        node_of(&m, from)?;
        node_of(&m, to)?;
        *out = m
            .hops_between(from, to)
            .ok_or_else(|| Fail::invalid(format!("no path from node {from} to node {to}")))?;
        Ok(())
    })
}

/// How many CPU caches the model holds (every level and kind).
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_cache_count(
    m: *const numalab_machine,
    out: *mut usize,
) -> numalab_status {
    guard("numalab_machine_cache_count", || {
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        *unsafe { args::out(out, "out") }? = m.caches.len();
        Ok(())
    })
}

fn cache_of(m: &Machine, index: usize) -> Result<&numalab::machine::Cache> {
    m.caches.get(index).ok_or_else(|| {
        Fail::invalid(format!(
            "cache {index} does not exist; this machine has {} (0 to {})",
            m.caches.len(),
            m.caches.len() as i64 - 1
        ))
    })
}

/// Cache number `index` (0 to count - 1).
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_cache(
    m: *const numalab_machine,
    index: usize,
    out: *mut numalab_cache_info,
) -> numalab_status {
    guard("numalab_machine_cache", || {
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(out, "out") }?;
        let c = cache_of(&m, index)?;
        *out = numalab_cache_info {
            level: c.level as c_uint,
            kind: match c.kind.as_str() {
                "data" => 0,
                "instruction" => 1,
                _ => 2,
            },
            logical_index: c.logical_index,
            cpu_count: c.cpus.len() as c_uint,
            size_bytes: c.size_bytes,
            line_bytes: c.line_bytes,
        };
        Ok(())
    })
}

/// The CPUs sharing cache number `index`; the list convention of
/// `numalab_machine_nodes`.
///
/// # Safety
/// As `numalab_machine_nodes`.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_cache_cpus(
    m: *const numalab_machine,
    index: usize,
    ids: *mut c_uint,
    capacity: usize,
    count: *mut usize,
) -> numalab_status {
    guard("numalab_machine_cache_cpus", || {
        let m = machine_of(m)?;
        let c = cache_of(&m, index)?;
        // SAFETY: the caller's guarantee.
        unsafe { args::write_ids(c.cpus.iter(), ids, capacity, count) }
    })
}

/// The whole model as JSON (the object `numalab topology --json` prints:
/// docs/topology-schema.md), NUL-terminated into `(buf, capacity)`;
/// `*needed` gets the bytes it needs. Pass `buf` NULL and `capacity` 0 to
/// ask for the size.
///
/// # Safety
/// `buf` is NULL or valid for `capacity` writes; `needed` is NULL or
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_machine_json(
    m: *const numalab_machine,
    buf: *mut c_char,
    capacity: usize,
    needed: *mut usize,
) -> numalab_status {
    guard("numalab_machine_json", || {
        let m = machine_of(m)?;
        let json = serde_json::to_string(&*m)
            .map_err(|e| Fail::new(crate::NUMALAB_E_INTERNAL, e.to_string()))?;
        // SAFETY: the caller's guarantee.
        unsafe { args::write_text(&json, buf, capacity, needed) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    fn fixture(name: &str) -> std::ffi::CString {
        let p = format!(
            "{}/../../tests/fixtures/topologies/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::ffi::CString::new(p).unwrap()
    }

    #[test]
    fn a_topology_file_gives_nodes_distances_hops_and_caches() {
        let mut m = std::ptr::null_mut();
        let path = fixture("qemu-ring4-cpuless-hmat.xml");
        // SAFETY: valid pointers throughout.
        unsafe {
            assert_eq!(numalab_machine_load(path.as_ptr(), &mut m), NUMALAB_OK);
            let mut live = 7;
            assert_eq!(numalab_machine_is_live(m, &mut live), NUMALAB_OK);
            assert_eq!(live, 0);
            let mut ids = [0u32; 8];
            let mut n = 0;
            assert_eq!(
                numalab_machine_nodes(m, ids.as_mut_ptr(), 8, &mut n),
                NUMALAB_OK
            );
            assert_eq!(&ids[..n], &[0, 1, 2, 3, 4]);
            let mut info = numalab_node_info::default();
            assert_eq!(numalab_machine_node(m, 4, &mut info), NUMALAB_OK);
            assert_eq!((info.os_index, info.cpu_count, info.cpuless), (4, 0, 1));
            assert_eq!(info.free_bytes, u64::MAX);
            let mut d = 0;
            assert_eq!(numalab_machine_distance(m, 0, 2, &mut d), NUMALAB_OK);
            assert_eq!(d, 22);
            assert_eq!(numalab_machine_hops(m, 0, 2, &mut d), NUMALAB_OK);
            assert_eq!(d, 2);
            assert_eq!(numalab_machine_node_of_cpu(m, 3, &mut d), NUMALAB_OK);
            assert_eq!(d, 3);
            assert_eq!(numalab_machine_node(m, 9, &mut info), NUMALAB_E_INVALID);
            let e = std::ffi::CStr::from_ptr(numalab_last_error())
                .to_str()
                .unwrap();
            assert_eq!(e, "numalab_machine_node: node 9 does not exist; nodes: 0-4");
            let mut cpus = [0u32; 16];
            assert_eq!(
                numalab_machine_cpus(m, cpus.as_mut_ptr(), 16, &mut n),
                NUMALAB_OK
            );
            assert_eq!(&cpus[..n], &[0, 1, 2, 3]);
            // Too little room: the first ones are written, the count says how many.
            cpus = [99; 16];
            assert_eq!(
                numalab_machine_cpus(m, cpus.as_mut_ptr(), 3, &mut n),
                NUMALAB_E_TRUNCATED
            );
            assert_eq!((n, &cpus[..4]), (4, &[0, 1, 2, 99][..]));
            assert_eq!(
                numalab_machine_node_cpus(m, 2, cpus.as_mut_ptr(), 16, &mut n),
                NUMALAB_OK
            );
            assert_eq!(&cpus[..n], &[2]);
            // The CPU-less node has none; a node that does not exist is named.
            assert_eq!(
                numalab_machine_node_cpus(m, 4, cpus.as_mut_ptr(), 16, &mut n),
                NUMALAB_OK
            );
            assert_eq!(n, 0);
            assert_eq!(
                numalab_machine_node_cpus(m, 5, cpus.as_mut_ptr(), 16, &mut n),
                NUMALAB_E_INVALID
            );
            let mut caches = 0;
            assert_eq!(numalab_machine_cache_count(m, &mut caches), NUMALAB_OK);
            assert!(caches > 0);
            let mut c = numalab_cache_info::default();
            assert_eq!(numalab_machine_cache(m, 0, &mut c), NUMALAB_OK);
            assert!((1..=5).contains(&c.level) && c.size_bytes > 0, "{c:?}");
            assert_eq!(
                numalab_machine_cache_cpus(m, 0, cpus.as_mut_ptr(), 16, &mut n),
                NUMALAB_OK
            );
            assert_eq!(n as u32, c.cpu_count, "{c:?}");
            assert!(cpus[..n].iter().all(|&cpu| cpu < 4), "{:?}", &cpus[..n]);
            assert_eq!(
                numalab_machine_cache_cpus(m, caches, cpus.as_mut_ptr(), 16, &mut n),
                NUMALAB_E_INVALID
            );
            let mut need = 0;
            assert_eq!(
                numalab_machine_json(m, std::ptr::null_mut(), 0, &mut need),
                NUMALAB_OK
            );
            let mut buf = vec![0 as c_char; need];
            assert_eq!(
                numalab_machine_json(m, buf.as_mut_ptr(), need, &mut need),
                NUMALAB_OK
            );
            let v: serde_json::Value =
                serde_json::from_str(std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().unwrap())
                    .unwrap();
            assert_eq!(v["nodes"].as_array().unwrap().len(), 5);
            assert_eq!(numalab_machine_free(m), NUMALAB_OK);
            assert_eq!(numalab_machine_free(m), NUMALAB_E_HANDLE);
            assert_eq!(
                numalab_machine_nodes(m, ids.as_mut_ptr(), 8, &mut n),
                NUMALAB_E_HANDLE
            );
        }
    }

    #[test]
    fn a_file_that_is_not_a_topology_is_one_line() {
        let mut m = std::ptr::null_mut();
        let path = std::ffi::CString::new("/nonexistent/topo.xml").unwrap();
        // SAFETY: valid pointers.
        unsafe {
            assert_eq!(
                numalab_machine_load(path.as_ptr(), &mut m),
                NUMALAB_E_INVALID
            );
            assert!(m.is_null());
            let e = std::ffi::CStr::from_ptr(numalab_last_error())
                .to_str()
                .unwrap();
            assert!(
                e.starts_with(
                    "numalab_machine_load: cannot read topology file /nonexistent/topo.xml"
                ),
                "{e}"
            );
            assert_eq!(
                numalab_machine_load(path.as_ptr(), std::ptr::null_mut()),
                NUMALAB_E_NULL
            );
        }
    }
}
