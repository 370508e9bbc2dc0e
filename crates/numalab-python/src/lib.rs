//! `numalab._native`: the engine's machine model, resource sets, memory
//! policies, placed buffers, range placement, thread binding and
//! verification for Python (docs/python.md). The Python layer
//! (`python/numalab/__init__.py`) turns them into numpy arrays, pandas
//! DataFrames and dataclasses; here results cross as JSON text so that
//! every field keeps the engine's names.
//!
//! Errors: a bad request (a policy or set that does not parse, an
//! unknown CPU) is a `ValueError` naming it; a strict placement that does
//! not fit is a `MemoryError`; not permitted is a `PermissionError`; a
//! missing kernel feature or another OS failure an `OSError`.

use numalab::placement::{
    self, check_pages, BufferSpec, ListMeaning, MemoryPolicy, PlacedBuffer, PlacementError,
    Prefault, RangeOptions, ResourceSet, SetTree, Thp, ThreadPolicy, WeightedImpl,
};
use numalab::IdSet;
use pyo3::exceptions::{PyMemoryError, PyOSError, PyPermissionError, PyValueError};
use pyo3::prelude::*;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

fn py_err(e: PlacementError) -> PyErr {
    match e {
        PlacementError::Invalid(m) => PyValueError::new_err(m),
        PlacementError::Capacity(m) => PyMemoryError::new_err(m),
        PlacementError::Permission(m) => PyPermissionError::new_err(m),
        PlacementError::Unsupported(m) | PlacementError::Os(m) => PyOSError::new_err(m),
    }
}

fn json<T: Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| PyOSError::new_err(e.to_string()))
}

/// A machine model: the live machine, or an hwloc XML topology file.
#[pyclass(module = "numalab._native", frozen)]
struct Machine {
    inner: Arc<numalab::Machine>,
}

#[pymethods]
impl Machine {
    #[new]
    #[pyo3(signature = (topology=None))]
    fn new(py: Python<'_>, topology: Option<PathBuf>) -> PyResult<Self> {
        let m = py
            .detach(|| numalab::Machine::load(topology.as_deref()))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Self { inner: Arc::new(m) })
    }

    /// Whether this is the running machine (placement possible).
    #[getter]
    fn is_live(&self) -> bool {
        self.inner.is_live()
    }

    /// The model as JSON (the object `numalab topology --json` prints).
    fn to_json(&self) -> PyResult<String> {
        json(&*self.inner)
    }

    /// Distance (SLIT) between two nodes.
    fn distance(&self, from: u32, to: u32) -> PyResult<u64> {
        self.node(from)?;
        self.node(to)?;
        Ok(self.inner.distance(from, to))
    }

    /// Hops between two nodes; None when there is no path.
    fn hops(&self, from: u32, to: u32) -> PyResult<Option<u32>> {
        self.node(from)?;
        self.node(to)?;
        Ok(self.inner.hops_between(from, to))
    }

    /// The node whose CPUs include `cpu`.
    fn node_of_cpu(&self, cpu: u32) -> PyResult<u32> {
        self.inner.node_of_cpu(cpu).ok_or_else(|| {
            PyValueError::new_err(format!(
                "CPU {cpu} belongs to no node of this machine; CPUs: {}",
                self.inner.complete_cpus
            ))
        })
    }

    /// A set from an expression of numalab's grammar; with `nodes`, a bare
    /// list means nodes.
    #[pyo3(signature = (expr, nodes=false))]
    fn parse_set(&self, expr: &str, nodes: bool) -> PyResult<Set> {
        let meaning = if nodes {
            ListMeaning::Nodes
        } else {
            ListMeaning::Cpus
        };
        let s = ResourceSet::parse(&self.inner, expr, meaning).map_err(PyValueError::new_err)?;
        Ok(Set::of(self.inner.clone(), SetTree::new(s)))
    }

    /// Everything this process may use.
    fn global_set(&self) -> Set {
        Set::of(
            self.inner.clone(),
            SetTree::new(ResourceSet::global(&self.inner)),
        )
    }

    /// The policy text in its canonical form, or a ValueError naming what
    /// is wrong with it.
    fn check_policy(&self, text: &str) -> PyResult<String> {
        Ok(parse_policy(&self.inner, text)?.to_string())
    }
}

impl Machine {
    fn node(&self, n: u32) -> PyResult<()> {
        self.inner.node(n).map(|_| ()).ok_or_else(|| {
            PyValueError::new_err(format!(
                "node {n} does not exist; nodes: {}",
                self.inner.node_ids()
            ))
        })
    }
}

fn parse_policy(m: &numalab::Machine, text: &str) -> PyResult<MemoryPolicy> {
    MemoryPolicy::parse(m, text).map_err(PyValueError::new_err)
}

/// A resource set (CPUs and memory nodes) with named subsets; a value:
/// every operation makes a new set.
#[pyclass(module = "numalab._native", frozen)]
struct Set {
    machine: Arc<numalab::Machine>,
    tree: SetTree,
}

impl Set {
    fn of(machine: Arc<numalab::Machine>, tree: SetTree) -> Self {
        Self { machine, tree }
    }

    fn same_machine(&self, o: &Set) -> PyResult<()> {
        if Arc::ptr_eq(&self.machine, &o.machine) {
            Ok(())
        } else {
            Err(PyValueError::new_err(
                "the two sets belong to different machines (make both from one Machine)",
            ))
        }
    }

    fn combine(&self, o: &Set, op: fn(&ResourceSet, &ResourceSet) -> ResourceSet) -> PyResult<Set> {
        self.same_machine(o)?;
        let s = op(self.tree.set(), o.tree.set()).nodes_from_cpus(&self.machine);
        Ok(Set::of(self.machine.clone(), SetTree::new(s)))
    }
}

#[pymethods]
impl Set {
    /// The CPUs, ascending.
    #[getter]
    fn cpus(&self) -> Vec<u32> {
        self.tree.set().cpus.iter().collect()
    }

    /// The memory nodes, ascending.
    #[getter]
    fn nodes(&self) -> Vec<u32> {
        self.tree.set().nodes.iter().collect()
    }

    /// The names of the direct subsets, in the order added.
    fn names(&self) -> Vec<String> {
        self.tree.names().into_iter().map(str::to_string).collect()
    }

    /// A new set: this one with `child` added under `name`.
    fn with_named(&self, name: &str, child: &Set) -> PyResult<Set> {
        self.same_machine(child)?;
        let mut t = self.tree.clone();
        t.add(name, child.tree.clone())
            .map_err(PyValueError::new_err)?;
        Ok(Set::of(self.machine.clone(), t))
    }

    /// The subset at `path` (`"compute/left"`).
    fn named(&self, path: &str) -> PyResult<Set> {
        let t = self.tree.get(path).map_err(PyValueError::new_err)?;
        Ok(Set::of(self.machine.clone(), t.clone()))
    }

    fn is_subset(&self, other: &Set) -> bool {
        self.tree.set().is_subset(other.tree.set())
    }

    fn __or__(&self, other: &Set) -> PyResult<Set> {
        self.combine(other, ResourceSet::union)
    }

    fn __and__(&self, other: &Set) -> PyResult<Set> {
        self.combine(other, ResourceSet::intersection)
    }

    fn __sub__(&self, other: &Set) -> PyResult<Set> {
        self.combine(other, ResourceSet::difference)
    }

    fn __eq__(&self, other: &Set) -> bool {
        self.tree.set() == other.tree.set()
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.tree.set().cpus.hash(&mut h);
        self.tree.set().nodes.hash(&mut h);
        h.finish()
    }

    fn __repr__(&self) -> String {
        format!(
            "Set(cpus={{{}}}, nodes={{{}}})",
            self.tree.set().cpus,
            self.tree.set().nodes
        )
    }
}

/// Memory placed with a policy: page aligned, zeroed, its pages touched
/// as asked. The memory lives as long as this object.
#[pyclass(module = "numalab._native", frozen)]
struct Buffer {
    buffer: PlacedBuffer,
    machine: Arc<numalab::Machine>,
    policy: MemoryPolicy,
    team: Option<Vec<u32>>,
}

#[pymethods]
impl Buffer {
    /// Start address.
    #[getter]
    fn address(&self) -> usize {
        self.buffer.as_ptr() as usize
    }

    /// Length in bytes (whole pages).
    #[getter]
    fn size(&self) -> usize {
        self.buffer.len()
    }

    #[getter]
    fn page_size(&self) -> usize {
        self.buffer.page_size()
    }

    /// The policy as text.
    #[getter]
    fn policy(&self) -> String {
        match &self.team {
            Some(cpus) => format!(
                "first-touch by CPUs {{{}}}",
                cpus.iter().copied().collect::<IdSet>()
            ),
            None => self.policy.to_string(),
        }
    }

    /// Checks every page against the policy: JSON of the check.
    fn verify(&self, py: Python<'_>) -> PyResult<String> {
        let hist = py.detach(|| self.buffer.histogram()).map_err(py_err)?;
        let toucher = match self.team {
            Some(_) => None,
            None => self.buffer.toucher_cpu(),
        };
        let (expected, problems) = check_pages(
            &self.machine,
            &self.policy,
            self.team.as_deref(),
            &hist,
            toucher,
            self.buffer.prefault_workers(),
        );
        json(&Check::new(&hist, expected, problems, self.buffer.notes()))
    }
}

/// A check as Python sees it.
#[derive(Serialize)]
struct Check {
    verified: bool,
    expected_nodes: Option<Vec<u32>>,
    page_size: usize,
    pages_total: u64,
    pages_by_node: std::collections::BTreeMap<u32, u64>,
    untouched_pages: u64,
    problems: Vec<String>,
    notes: Vec<String>,
}

impl Check {
    fn new(
        h: &placement::PageHistogram,
        expected: Option<IdSet>,
        problems: Vec<String>,
        notes: &[String],
    ) -> Self {
        Self {
            verified: problems.is_empty(),
            expected_nodes: expected.map(|e| e.iter().collect()),
            page_size: h.page_size,
            pages_total: h.pages_total,
            pages_by_node: h.pages_by_node.clone(),
            untouched_pages: h.untouched_pages,
            problems,
            notes: notes.to_vec(),
        }
    }
}

/// Allocates `size` bytes placed by `policy` (the grammar's text), or
/// first touched in parallel by the CPUs of `touchers`.
#[pyfunction]
#[pyo3(signature = (machine, size, policy, touchers=None, thp=None, lazy=false, weighted_kernel=false))]
#[allow(clippy::too_many_arguments)]
fn allocate(
    py: Python<'_>,
    machine: &Machine,
    size: usize,
    policy: &str,
    touchers: Option<&Set>,
    thp: Option<&str>,
    lazy: bool,
    weighted_kernel: bool,
) -> PyResult<Buffer> {
    let m = machine.inner.clone();
    let mem = parse_policy(&m, policy)?;
    let team: Option<Vec<u32>> = touchers.map(|s| s.tree.set().cpus.iter().collect());
    if team.is_some() && mem != MemoryPolicy::FirstTouch {
        return Err(PyValueError::new_err(format!(
            "touchers place pages by first touch: give policy 'first-touch', not '{policy}'"
        )));
    }
    let prefault = match (&team, lazy) {
        (Some(_), true) => {
            return Err(PyValueError::new_err(
                "touchers touch the pages: a buffer cannot be lazy too",
            ))
        }
        (Some(cpus), false) => Prefault::Parallel(cpus.clone()),
        (None, true) => Prefault::Lazy,
        (None, false) => Prefault::Toucher,
    };
    let thp = thp
        .map(Thp::parse)
        .transpose()
        .map_err(PyValueError::new_err)?;
    let spec = BufferSpec {
        size,
        policy: mem.clone(),
        thp,
        hugetlb: false,
        toucher: None,
        weighted: if weighted_kernel {
            WeightedImpl::Kernel
        } else {
            WeightedImpl::Emulate
        },
    };
    let buffer = py
        .detach(|| PlacedBuffer::with_prefault(&m, &spec, &prefault))
        .map_err(py_err)?;
    Ok(Buffer {
        buffer,
        machine: m,
        policy: mem,
        team,
    })
}

/// Pages by node of any address range of this process: JSON of the
/// kernel's answer.
#[pyfunction]
fn pages(py: Python<'_>, address: usize, length: usize) -> PyResult<String> {
    let h = py.detach(|| histogram(address, length))?;
    json(&Check::new(&h, None, Vec::new(), &[]))
}

fn histogram(address: usize, length: usize) -> PyResult<placement::PageHistogram> {
    if address == 0 {
        return Err(PyValueError::new_err("the address is 0"));
    }
    let page = placement::sys::page_size();
    let (start, span) = placement::range::page_span(address, length, page).map_err(py_err)?;
    if (span / page) as u64 > 1 << 28 {
        return Err(PyValueError::new_err(format!(
            "the range holds {} pages; ask about at most 2^28 at a time",
            span / page
        )));
    }
    placement::PageHistogram::of_range(0, start as *mut u8, span, page).map_err(py_err)
}

/// Places the pages holding a range with a policy, moving those already
/// there; JSON of what was done.
#[pyfunction]
#[pyo3(signature = (machine, address, length, policy, move_pages=true, strict=false))]
fn place(
    py: Python<'_>,
    machine: &Machine,
    address: usize,
    length: usize,
    policy: &str,
    move_pages: bool,
    strict: bool,
) -> PyResult<String> {
    let mem = parse_policy(&machine.inner, policy)?;
    let r = py
        .detach(|| {
            placement::place_range(
                &machine.inner,
                address,
                length,
                &mem,
                RangeOptions { move_pages, strict },
            )
        })
        .map_err(py_err)?;
    json(&r)
}

/// Checks a range against a policy: JSON of the check.
#[pyfunction]
fn verify_range(
    py: Python<'_>,
    machine: &Machine,
    address: usize,
    length: usize,
    policy: &str,
) -> PyResult<String> {
    let mem = parse_policy(&machine.inner, policy)?;
    let h = py.detach(|| histogram(address, length))?;
    let (expected, problems) = check_pages(
        &machine.inner,
        &mem,
        None,
        &h,
        placement::sys::current_cpu(),
        &[],
    );
    json(&Check::new(&h, expected, problems, &[]))
}

fn cpus_of(set: &Set) -> PyResult<&IdSet> {
    let c = &set.tree.set().cpus;
    if c.is_empty() {
        return Err(PyValueError::new_err("the set holds no CPU"));
    }
    Ok(c)
}

/// Binds thread `tid` (0: the caller) to the set's CPUs.
#[pyfunction]
#[pyo3(signature = (set, tid=0))]
fn bind_thread(set: &Set, tid: i32) -> PyResult<()> {
    placement::bind_thread(tid, cpus_of(set)?).map_err(py_err)
}

/// Binds every thread of the process to the set's CPUs; returns how many.
#[pyfunction]
fn bind_process(set: &Set) -> PyResult<usize> {
    placement::bind_process(cpus_of(set)?).map_err(py_err)
}

/// The CPU of thread `index` of a team of `team` under a thread policy.
#[pyfunction]
fn team_cpu(set: &Set, policy: &str, team: usize, index: usize) -> PyResult<u32> {
    let p = ThreadPolicy::parse(policy).map_err(PyValueError::new_err)?;
    let cpus = cpus_of(set)?;
    if team == 0 || index >= team {
        return Err(PyValueError::new_err(format!(
            "thread {index} is not in a team of {team}"
        )));
    }
    let room = match &p {
        ThreadPolicy::Explicit(l) => l.len(),
        _ => cpus.len(),
    };
    if team > room {
        return Err(PyValueError::new_err(format!(
            "a team of {team} threads does not fit on the {room} CPUs of {{{cpus}}}: one CPU a thread"
        )));
    }
    let order = p
        .assign(&set.machine, cpus, team, true)
        .map_err(PyValueError::new_err)?;
    Ok(order[index])
}

/// Binds the calling thread, member `index` of a team of `team`, to the
/// one CPU `team_cpu` gives it; returns that CPU.
#[pyfunction]
fn bind_team_member(set: &Set, policy: &str, team: usize, index: usize) -> PyResult<u32> {
    let cpu = team_cpu(set, policy, team, index)?;
    placement::bind_thread(0, &IdSet::single(cpu)).map_err(py_err)?;
    Ok(cpu)
}

/// Where thread `tid` (0: the caller) may run and runs, against the set's
/// CPUs: JSON of the check.
#[pyfunction]
#[pyo3(signature = (set, tid=0))]
fn check_thread(set: &Set, tid: i32) -> PyResult<String> {
    let c = placement::check_thread(tid, &set.tree.set().cpus).map_err(py_err)?;
    json(&c)
}

/// The tables of a report's results.json, as the CSV files it writes:
/// (name, title, header, rows) each.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn report_tables(
    py: Python<'_>,
    path: PathBuf,
) -> PyResult<Vec<(String, String, Vec<String>, Vec<Vec<String>>)>> {
    py.detach(|| {
        let text = numalab::input::read_text(&path, numalab::input::InputKind::ResultsJson)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let doc = numalab_report::results::ReportResults::from_json(&text)
            .map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))?;
        Ok(numalab_report::tables::tables(&doc)
            .into_iter()
            .map(|t| (t.name, t.title, t.header, t.rows))
            .collect())
    })
}

/// A numalab JSON file's text, read with numalab's size cap.
#[pyfunction]
fn read_result(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    py.detach(|| {
        numalab::input::read_text(&path, numalab::input::InputKind::ResultsJson)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// The kernel's id of the calling thread.
#[pyfunction]
fn thread_id() -> i32 {
    placement::threads::current_tid()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Machine>()?;
    m.add_class::<Set>()?;
    m.add_class::<Buffer>()?;
    m.add_function(wrap_pyfunction!(allocate, m)?)?;
    m.add_function(wrap_pyfunction!(pages, m)?)?;
    m.add_function(wrap_pyfunction!(place, m)?)?;
    m.add_function(wrap_pyfunction!(verify_range, m)?)?;
    m.add_function(wrap_pyfunction!(bind_thread, m)?)?;
    m.add_function(wrap_pyfunction!(bind_process, m)?)?;
    m.add_function(wrap_pyfunction!(team_cpu, m)?)?;
    m.add_function(wrap_pyfunction!(bind_team_member, m)?)?;
    m.add_function(wrap_pyfunction!(check_thread, m)?)?;
    m.add_function(wrap_pyfunction!(report_tables, m)?)?;
    m.add_function(wrap_pyfunction!(read_result, m)?)?;
    m.add_function(wrap_pyfunction!(thread_id, m)?)?;
    Ok(())
}
