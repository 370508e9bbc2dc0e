//! Resource sets: CPUs plus memory nodes, written in numalab's grammar
//! (docs/resource-sets.md), combined, iterated, and named into trees.

use crate::args;
use crate::handles::{self, Object};
use crate::machine::{machine_of, numalab_machine};
use crate::{guard, numalab_status, Fail, Result};
use numalab::placement::{ListMeaning, ResourceSet, SetTree};
use numalab::{IdSet, Machine};
use std::ffi::{c_char, c_int, c_uint};
use std::sync::Arc;

/// A resource set (opaque): CPUs and memory nodes of one machine, with
/// named subsets. Made by `numalab_set_*` calls, freed by
/// `numalab_set_free`. Sets are values: every operation makes a new set.
pub struct numalab_set {
    _opaque: [u8; 0],
}

/// What a set handle holds: the tree and the machine it belongs to.
pub struct SetObject {
    pub machine: Arc<Machine>,
    pub tree: SetTree,
}

impl SetObject {
    pub fn set(&self) -> &ResourceSet {
        self.tree.set()
    }
}

pub(crate) fn set_of(s: *const numalab_set, arg: &str) -> Result<Arc<SetObject>> {
    match handles::get(s as usize, "set", arg)? {
        Object::Set(s) => Ok(s),
        _ => unreachable!("the registry checked the kind"),
    }
}

fn hand_out(machine: Arc<Machine>, tree: SetTree, out: &mut *mut numalab_set) {
    *out = handles::insert(Object::Set(Arc::new(SetObject { machine, tree }))) as *mut numalab_set;
}

/// # Safety
/// `out` is NULL or valid for a write.
unsafe fn out_set<'a>(out: *mut *mut numalab_set) -> Result<&'a mut *mut numalab_set> {
    // SAFETY: the caller's guarantee.
    let o = unsafe { args::out(out, "out") }?;
    *o = std::ptr::null_mut();
    Ok(o)
}

/// Everything this process may use: the allowed CPUs and nodes (cgroup
/// cpuset applied). On failure `*out` is NULL.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_global(
    m: *const numalab_machine,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_global", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_set(out) }?;
        let m = machine_of(m)?;
        let s = ResourceSet::global(&m);
        hand_out(m, SetTree::new(s), o);
        Ok(())
    })
}

fn parse(
    m: *const numalab_machine,
    expr: *const c_char,
    out: *mut *mut numalab_set,
    meaning: ListMeaning,
) -> Result<()> {
    // SAFETY: the exported callers pass their own guarantees on.
    let o = unsafe { out_set(out) }?;
    let m = machine_of(m)?;
    // SAFETY: as above.
    let text = unsafe { args::text(expr, "expr") }?;
    let s = ResourceSet::parse(&m, text, meaning).map_err(Fail::invalid)?;
    hand_out(m, SetTree::new(s), o);
    Ok(())
}

/// A set from an expression of numalab's grammar, a bare list meaning
/// CPUs (as `--cpus`): `"0-3,7"`, `"node:1"`, `"package:0 ~ core:0"`,
/// `"l3:0 & node:0"`, `"!node:0"`, `"all"`. The nodes are those local to
/// the resulting CPUs (and CPU-less nodes named). A bad expression is
/// `NUMALAB_E_INVALID` with a message naming the problem and the valid
/// ids.
///
/// # Safety
/// `expr` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_parse(
    m: *const numalab_machine,
    expr: *const c_char,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_parse", || {
        parse(m, expr, out, ListMeaning::Cpus)
    })
}

/// `numalab_set_parse` with a bare list meaning nodes (as in `bind:0-1`):
/// `"0-1"` is nodes 0 and 1 with their CPUs.
///
/// # Safety
/// As `numalab_set_parse`.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_parse_nodes(
    m: *const numalab_machine,
    expr: *const c_char,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_parse_nodes", || {
        parse(m, expr, out, ListMeaning::Nodes)
    })
}

fn from_ids(m: &Machine, ids: &[u32], what: &str) -> Result<IdSet> {
    let valid = if what == "CPU" {
        &m.allowed_cpus
    } else {
        &m.allowed_nodes
    };
    let set: IdSet = ids.iter().copied().collect();
    if let Some(bad) = set.difference(valid).first() {
        return Err(Fail::invalid(format!(
            "{what} {bad} does not exist or is not allowed; allowed {what}s: {valid}"
        )));
    }
    Ok(set)
}

/// A set of `n` CPUs (OS indexes) with the nodes they are local to.
///
/// # Safety
/// `cpus` is NULL or valid for `n` reads; `out` is NULL or valid for a
/// write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_from_cpus(
    m: *const numalab_machine,
    cpus: *const c_uint,
    n: usize,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_from_cpus", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_set(out) }?;
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let ids = unsafe { args::ids(cpus, n, "cpus") }?;
        let set = from_ids(&m, ids, "CPU")?;
        let s = ResourceSet::from_cpus(&m, &set);
        hand_out(m, SetTree::new(s), o);
        Ok(())
    })
}

/// A set of `n` nodes (OS indexes) with their CPUs.
///
/// # Safety
/// `nodes` is NULL or valid for `n` reads; `out` is NULL or valid for a
/// write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_from_nodes(
    m: *const numalab_machine,
    nodes: *const c_uint,
    n: usize,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_from_nodes", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_set(out) }?;
        let m = machine_of(m)?;
        // SAFETY: the caller's guarantee.
        let ids = unsafe { args::ids(nodes, n, "nodes") }?;
        let set = from_ids(&m, ids, "node")?;
        let s = ResourceSet::from_nodes(&m, &set).intersection(&ResourceSet::global(&m));
        hand_out(m, SetTree::new(s), o);
        Ok(())
    })
}

fn combine(
    a: *const numalab_set,
    b: *const numalab_set,
    out: *mut *mut numalab_set,
    op: fn(&ResourceSet, &ResourceSet) -> ResourceSet,
) -> Result<()> {
    // SAFETY: the exported callers pass their own guarantees on.
    let o = unsafe { out_set(out) }?;
    let (x, y) = (set_of(a, "a")?, set_of(b, "b")?);
    if !Arc::ptr_eq(&x.machine, &y.machine) {
        return Err(Fail::invalid(
            "the two sets belong to different machines (load the machine once and make both sets from it)",
        ));
    }
    // As an expression in the grammar ends: the nodes follow the CPUs.
    let s = op(x.set(), y.set()).nodes_from_cpus(&x.machine);
    hand_out(x.machine.clone(), SetTree::new(s), o);
    Ok(())
}

/// A new set: the CPUs and nodes of `a` or `b`. As after an expression of
/// the grammar, the result's nodes are those local to its CPUs plus the
/// CPU-less nodes it holds (so `numalab_set_difference` of `node:0-1` and
/// `core:1` keeps node 0 while CPU 0 is in it). Named subsets are not
/// carried over. Both sets must come from the same machine handle.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_union(
    a: *const numalab_set,
    b: *const numalab_set,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_union", || {
        combine(a, b, out, ResourceSet::union)
    })
}

/// A new set: the CPUs of both `a` and `b` (nodes as for
/// `numalab_set_union`).
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_intersection(
    a: *const numalab_set,
    b: *const numalab_set,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_intersection", || {
        combine(a, b, out, ResourceSet::intersection)
    })
}

/// A new set: the CPUs of `a` that are not in `b`, and the CPU-less nodes
/// of `a` not in `b` (nodes as for `numalab_set_union`).
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_difference(
    a: *const numalab_set,
    b: *const numalab_set,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_difference", || {
        combine(a, b, out, ResourceSet::difference)
    })
}

/// A copy of `s`, named subsets included.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_copy(
    s: *const numalab_set,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_copy", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_set(out) }?;
        let s = set_of(s, "set")?;
        hand_out(s.machine.clone(), s.tree.clone(), o);
        Ok(())
    })
}

/// Frees a set. NULL is a no-op; a set already freed is
/// `NUMALAB_E_HANDLE`.
#[no_mangle]
pub extern "C" fn numalab_set_free(s: *mut numalab_set) -> numalab_status {
    guard("numalab_set_free", || {
        handles::remove(s as usize, "set", "set")
    })
}

/// The set's CPUs, ascending; the list convention of
/// `numalab_machine_nodes` (`*count` always gets the whole number).
///
/// # Safety
/// `ids` is NULL or valid for `capacity` writes; `count` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_cpus(
    s: *const numalab_set,
    ids: *mut c_uint,
    capacity: usize,
    count: *mut usize,
) -> numalab_status {
    guard("numalab_set_cpus", || {
        let s = set_of(s, "set")?;
        // SAFETY: the caller's guarantee.
        unsafe { args::write_ids(s.set().cpus.iter(), ids, capacity, count) }
    })
}

/// The set's memory nodes, ascending; as `numalab_set_cpus`.
///
/// # Safety
/// As `numalab_set_cpus`.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_nodes(
    s: *const numalab_set,
    ids: *mut c_uint,
    capacity: usize,
    count: *mut usize,
) -> numalab_status {
    guard("numalab_set_nodes", || {
        let s = set_of(s, "set")?;
        // SAFETY: the caller's guarantee.
        unsafe { args::write_ids(s.set().nodes.iter(), ids, capacity, count) }
    })
}

fn next_after(ids: &IdSet, prev: c_int) -> c_int {
    let from = if prev < 0 { 0 } else { prev as u32 + 1 };
    ids.iter()
        .find(|&i| i >= from)
        .map(|i| i as c_int)
        .unwrap_or(-1)
}

/// Iterates the set's CPUs: `*next` gets the smallest CPU above `prev`
/// (start with `prev` = -1), or -1 when there is none.
///
/// ```c
/// for (int c = -1; numalab_set_next_cpu(s, c, &c) == NUMALAB_OK && c >= 0;) { ... }
/// ```
///
/// # Safety
/// `next` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_next_cpu(
    s: *const numalab_set,
    prev: c_int,
    next: *mut c_int,
) -> numalab_status {
    guard("numalab_set_next_cpu", || {
        let s = set_of(s, "set")?;
        // SAFETY: the caller's guarantee.
        *unsafe { args::out(next, "next") }? = next_after(&s.set().cpus, prev);
        Ok(())
    })
}

/// Iterates the set's nodes as `numalab_set_next_cpu` does its CPUs.
///
/// # Safety
/// `next` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_next_node(
    s: *const numalab_set,
    prev: c_int,
    next: *mut c_int,
) -> numalab_status {
    guard("numalab_set_next_node", || {
        let s = set_of(s, "set")?;
        // SAFETY: the caller's guarantee.
        *unsafe { args::out(next, "next") }? = next_after(&s.set().nodes, prev);
        Ok(())
    })
}

/// `*out` = 1 when every CPU and node of `a` is in `b`, else 0.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_is_subset(
    a: *const numalab_set,
    b: *const numalab_set,
    out: *mut c_int,
) -> numalab_status {
    guard("numalab_set_is_subset", || {
        let (x, y) = (set_of(a, "a")?, set_of(b, "b")?);
        // SAFETY: the caller's guarantee.
        *unsafe { args::out(out, "out") }? = x.set().is_subset(y.set()) as c_int;
        Ok(())
    })
}

/// The set as text, `"cpus {0-3} nodes {0-1}"`, NUL-terminated into
/// `(buf, capacity)`; `*needed` (when not NULL) gets the bytes it needs.
///
/// # Safety
/// `buf` is NULL or valid for `capacity` writes; `needed` is NULL or
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_format(
    s: *const numalab_set,
    buf: *mut c_char,
    capacity: usize,
    needed: *mut usize,
) -> numalab_status {
    guard("numalab_set_format", || {
        let s = set_of(s, "set")?;
        // SAFETY: the caller's guarantee.
        unsafe { args::write_text(&s.set().to_string(), buf, capacity, needed) }
    })
}

/// Adds a copy of `child` (with its own named subsets) to `parent` under
/// `name` (1 to 64 letters, digits, `_`, `-`, `.`; unique in `parent`).
/// `parent` grows to hold the child's CPUs and nodes. Later changes to
/// `child` do not reach `parent`. `parent` is changed in place, the only
/// call that changes a set (safe from several threads at once).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_add_named(
    parent: *mut numalab_set,
    name: *const c_char,
    child: *const numalab_set,
) -> numalab_status {
    guard("numalab_set_add_named", || {
        let c = set_of(child, "child")?;
        // SAFETY: the caller's guarantee.
        let name = unsafe { args::text(name, "name") }?;
        handles::modify(parent as usize, "set", "parent", |o| {
            let Object::Set(p) = o else {
                unreachable!("the registry checked the kind")
            };
            if !Arc::ptr_eq(&p.machine, &c.machine) {
                return Err(Fail::invalid(
                    "parent and child belong to different machines (load the machine once and make both sets from it)",
                ));
            }
            let mut tree = p.tree.clone();
            tree.add(name, c.tree.clone()).map_err(Fail::invalid)?;
            Ok(Object::Set(Arc::new(SetObject {
                machine: p.machine.clone(),
                tree,
            })))
        })
    })
}

/// The named subset at `path` (names joined by `/`: `"compute/left"`), as
/// a new set (with its own subsets). An unknown name is
/// `NUMALAB_E_INVALID` naming the subsets there are.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or valid for a
/// write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_named(
    s: *const numalab_set,
    path: *const c_char,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_named", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out_set(out) }?;
        let s = set_of(s, "set")?;
        // SAFETY: the caller's guarantee.
        let path = unsafe { args::text(path, "path") }?;
        let sub = s.tree.get(path).map_err(Fail::invalid)?.clone();
        hand_out(s.machine.clone(), sub, o);
        Ok(())
    })
}

/// How many named subsets `s` holds directly.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_named_count(
    s: *const numalab_set,
    out: *mut usize,
) -> numalab_status {
    guard("numalab_set_named_count", || {
        let s = set_of(s, "set")?;
        // SAFETY: the caller's guarantee.
        *unsafe { args::out(out, "out") }? = s.tree.len();
        Ok(())
    })
}

/// The direct subset number `index` (in the order added): its name into
/// `(name, capacity)` (as `numalab_set_format`; `name` may be NULL with
/// `capacity` 0), and, when `out` is not NULL, the subset as a new set.
///
/// # Safety
/// `name` is NULL or valid for `capacity` writes; `needed` and `out` are
/// NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_set_named_at(
    s: *const numalab_set,
    index: usize,
    name: *mut c_char,
    capacity: usize,
    needed: *mut usize,
    out: *mut *mut numalab_set,
) -> numalab_status {
    guard("numalab_set_named_at", || {
        // SAFETY: the caller's guarantee.
        let o = unsafe { out.as_mut() };
        let s = set_of(s, "set")?;
        let (n, sub) = s.tree.children().nth(index).ok_or_else(|| {
            Fail::invalid(format!(
                "the set has {} named subsets; index {index} is past them",
                s.tree.len()
            ))
        })?;
        if let Some(o) = o {
            hand_out(s.machine.clone(), sub.clone(), o);
        }
        if capacity == 0 && needed.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's guarantee.
        unsafe { args::write_text(n, name, capacity, needed) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::numalab_machine_load;
    use crate::*;

    fn quartet() -> *mut numalab_machine {
        let p = std::ffi::CString::new(format!(
            "{}/../../tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let mut m = std::ptr::null_mut();
        // SAFETY: valid pointers.
        assert_eq!(
            // SAFETY: the test passes valid pointers and sizes.
            unsafe { numalab_machine_load(p.as_ptr(), &mut m) },
            NUMALAB_OK
        );
        m
    }

    fn parsed(m: *mut numalab_machine, e: &std::ffi::CStr) -> *mut numalab_set {
        let mut s = std::ptr::null_mut();
        // SAFETY: valid pointers.
        let st = unsafe { numalab_set_parse(m, e.as_ptr(), &mut s) };
        assert_eq!(st, NUMALAB_OK, "{e:?}");
        s
    }

    fn cpus(s: *const numalab_set) -> Vec<u32> {
        let mut v = [0u32; 64];
        let mut n = 0;
        // SAFETY: sized as passed.
        assert_eq!(
            // SAFETY: the test passes valid pointers and sizes.
            unsafe { numalab_set_cpus(s, v.as_mut_ptr(), 64, &mut n) },
            NUMALAB_OK
        );
        v[..n].to_vec()
    }

    fn last() -> String {
        // SAFETY: never NULL.
        unsafe { std::ffi::CStr::from_ptr(numalab_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn sets_parse_combine_and_iterate() {
        let m = quartet();
        let a = parsed(m, c"node:0-1");
        let b = parsed(m, c"core:1");
        let mut d = std::ptr::null_mut();
        // SAFETY: valid pointers throughout.
        unsafe {
            assert_eq!(numalab_set_difference(a, b, &mut d), NUMALAB_OK);
            assert_eq!(cpus(d), [0, 2, 3]);
            let mut next = -1;
            let mut seen = Vec::new();
            while numalab_set_next_node(d, next, &mut next) == NUMALAB_OK && next >= 0 {
                seen.push(next);
            }
            assert_eq!(seen, [0, 1]);
            let mut text = [0 as c_char; 64];
            assert_eq!(
                numalab_set_format(d, text.as_mut_ptr(), 64, std::ptr::null_mut()),
                NUMALAB_OK
            );
            assert_eq!(
                std::ffi::CStr::from_ptr(text.as_ptr()).to_str().unwrap(),
                "cpus {0,2-3} nodes {0-1}"
            );
            let mut sub = 0;
            assert_eq!(numalab_set_is_subset(d, a, &mut sub), NUMALAB_OK);
            assert_eq!(sub, 1);
            let mut nodes = std::ptr::null_mut();
            assert_eq!(
                numalab_set_parse_nodes(m, c"1-2".as_ptr(), &mut nodes),
                NUMALAB_OK
            );
            assert_eq!(cpus(nodes), [2, 3, 4, 5]);
            let mut bad = std::ptr::null_mut();
            assert_eq!(
                numalab_set_parse(m, c"node:7".as_ptr(), &mut bad),
                NUMALAB_E_INVALID
            );
            assert!(bad.is_null());
            assert_eq!(
                last(),
                "numalab_set_parse: node 7 does not exist; valid nodes: 0-3"
            );
            let mut from = std::ptr::null_mut();
            assert_eq!(
                numalab_set_from_cpus(m, [6u32, 1].as_ptr(), 2, &mut from),
                NUMALAB_OK
            );
            assert_eq!(cpus(from), [1, 6]);
            assert_eq!(
                numalab_set_from_nodes(m, [9u32].as_ptr(), 1, &mut from),
                NUMALAB_E_INVALID
            );
            for s in [a, b, d, nodes] {
                assert_eq!(numalab_set_free(s), NUMALAB_OK);
            }
            crate::machine::numalab_machine_free(m);
        }
    }

    #[test]
    fn union_and_intersection_follow_the_cpus_and_refuse_two_machines() {
        let m = quartet();
        let a = parsed(m, c"node:0-1");
        let b = parsed(m, c"node:1-2");
        let (mut u, mut i) = (std::ptr::null_mut(), std::ptr::null_mut());
        let mut text = [0 as c_char; 64];
        let format = |s: *const numalab_set, text: &mut [c_char; 64]| {
            // SAFETY: valid pointers and the buffer's size.
            let st = unsafe { numalab_set_format(s, text.as_mut_ptr(), 64, std::ptr::null_mut()) };
            assert_eq!(st, NUMALAB_OK);
            // SAFETY: NUL-terminated by numalab_set_format.
            unsafe { std::ffi::CStr::from_ptr(text.as_ptr()) }
                .to_str()
                .unwrap()
                .to_string()
        };
        // SAFETY: valid pointers throughout.
        unsafe {
            assert_eq!(numalab_set_union(a, b, &mut u), NUMALAB_OK);
            assert_eq!(cpus(u), [0, 1, 2, 3, 4, 5]);
            assert_eq!(format(u, &mut text), "cpus {0-5} nodes {0-2}");
            assert_eq!(numalab_set_intersection(a, b, &mut i), NUMALAB_OK);
            assert_eq!(cpus(i), [2, 3]);
            assert_eq!(format(i, &mut text), "cpus {2-3} nodes {1}");
            // Sets of two loads of the same file are of two machines.
            let other = quartet();
            let c = parsed(other, c"node:3");
            let mut bad = std::ptr::null_mut();
            assert_eq!(numalab_set_union(a, c, &mut bad), NUMALAB_E_INVALID);
            assert!(bad.is_null());
            assert_eq!(
                last(),
                "numalab_set_union: the two sets belong to different machines (load the machine once and make both sets from it)"
            );
            assert_eq!(
                numalab_set_intersection(a, std::ptr::null(), &mut bad),
                NUMALAB_E_NULL
            );
            for s in [a, b, u, i, c] {
                assert_eq!(numalab_set_free(s), NUMALAB_OK);
            }
            crate::machine::numalab_machine_free(m);
            crate::machine::numalab_machine_free(other);
        }
    }

    #[test]
    fn named_subsets_nest_and_are_found_by_path() {
        let m = quartet();
        let io = parsed(m, c"node:0");
        let left = parsed(m, c"node:2");
        let compute = parsed(m, c"node:1");
        let mut job = std::ptr::null_mut();
        // SAFETY: valid pointers throughout.
        unsafe {
            assert_eq!(
                numalab_set_add_named(compute, c"left".as_ptr(), left),
                NUMALAB_OK
            );
            assert_eq!(numalab_set_parse(m, c"none".as_ptr(), &mut job), NUMALAB_OK);
            assert_eq!(numalab_set_add_named(job, c"io".as_ptr(), io), NUMALAB_OK);
            assert_eq!(
                numalab_set_add_named(job, c"compute".as_ptr(), compute),
                NUMALAB_OK
            );
            assert_eq!(cpus(job), [0, 1, 2, 3, 4, 5]);
            let mut found = std::ptr::null_mut();
            assert_eq!(
                numalab_set_named(job, c"compute/left".as_ptr(), &mut found),
                NUMALAB_OK
            );
            assert_eq!(cpus(found), [4, 5]);
            let mut n = 0;
            assert_eq!(numalab_set_named_count(job, &mut n), NUMALAB_OK);
            assert_eq!(n, 2);
            let mut name = [0 as c_char; 16];
            let mut need = 0;
            let mut second = std::ptr::null_mut();
            assert_eq!(
                numalab_set_named_at(job, 1, name.as_mut_ptr(), 16, &mut need, &mut second),
                NUMALAB_OK
            );
            assert_eq!(
                std::ffi::CStr::from_ptr(name.as_ptr()).to_str().unwrap(),
                "compute"
            );
            assert_eq!(cpus(second), [2, 3, 4, 5]);
            assert_eq!(
                numalab_set_named(job, c"disk".as_ptr(), &mut found),
                NUMALAB_E_INVALID
            );
            assert_eq!(
                last(),
                "numalab_set_named: the set has no subset named 'disk'; its subsets: io, compute"
            );
            assert_eq!(
                numalab_set_add_named(job, c"io".as_ptr(), io),
                NUMALAB_E_INVALID
            );
            assert_eq!(
                numalab_set_add_named(job, c"a/b".as_ptr(), io),
                NUMALAB_E_INVALID
            );
        }
    }

    #[test]
    fn freed_foreign_and_null_handles_are_statuses() {
        let m = quartet();
        let s = parsed(m, c"all");
        let mut n = 0;
        let mut out = std::ptr::null_mut();
        // SAFETY: the calls must refuse the bad handles without touching them.
        unsafe {
            assert_eq!(numalab_set_free(s), NUMALAB_OK);
            assert_eq!(
                numalab_set_cpus(s, std::ptr::null_mut(), 0, &mut n),
                NUMALAB_E_HANDLE
            );
            assert!(
                last().contains("is not a live set handle: already freed"),
                "{}",
                last()
            );
            assert_eq!(numalab_set_free(s), NUMALAB_E_HANDLE);
            assert_eq!(numalab_set_free(std::ptr::null_mut()), NUMALAB_OK);
            assert_eq!(
                numalab_set_cpus(std::ptr::null(), std::ptr::null_mut(), 0, &mut n),
                NUMALAB_E_NULL
            );
            assert_eq!(last(), "numalab_set_cpus: argument 'set' is NULL");
            // A machine where a set is expected.
            assert_eq!(
                numalab_set_copy(m as *const numalab_set, &mut out),
                NUMALAB_E_HANDLE
            );
            assert_eq!(
                last(),
                "numalab_set_copy: argument 'set' is a machine handle, not a set"
            );
            // A pointer numalab never made.
            let fake = 0x1234usize as *const numalab_set;
            assert_eq!(numalab_set_copy(fake, &mut out), NUMALAB_E_HANDLE);
            assert_eq!(
                numalab_set_parse(m, std::ptr::null(), &mut out),
                NUMALAB_E_NULL
            );
            assert_eq!(
                numalab_set_parse(m, c"all".as_ptr(), std::ptr::null_mut()),
                NUMALAB_E_NULL
            );
        }
    }
}
