"""numalab: NUMA placement from Python.

numalab's placement framework for Python programs and notebooks (the
reference is docs/python.md in the numalab repository):

- the machine (:func:`machine`, :func:`topology`) and resource sets in
  numalab's grammar (:func:`parse_set`: ``"node:1"``, ``"0-3"``,
  ``"package:0 ~ core:0"``), combined with ``|``, ``&``, ``-`` and named
  into trees (:meth:`Set.with_named`, :meth:`Set.named`);
- numpy arrays whose memory is placed with a policy
  (``numalab.empty((n,), "f8", policy="interleave:0-3")``), or an existing
  array's pages placed (:func:`place`), and where every page is
  (:func:`where`) or whether it is where its policy says (:func:`verify`);
- threads bound to sets or by thread policy (:func:`bind_thread`,
  :func:`bind_team_member`) and checked (:func:`check_thread`);
- numalab's results as pandas DataFrames (:func:`load`) and numalab
  commands run with their results as dicts (:func:`run`).

Policies are the strings every numalab command takes: ``first-touch``,
``local``, ``bind:NODES``, ``preferred:NODES``, ``interleave:NODES[@PAGES]``,
``weighted:N=W,...[@PAGES]``, ``remote[:near|:far]``. A bad one is a
:class:`ValueError` that names it and the valid choices.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._native import Buffer, Machine, Set

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__version__: str = _native.__version__

__all__ = [
    "Buffer",
    "Check",
    "CommandError",
    "Machine",
    "Pages",
    "Set",
    "ThreadCheck",
    "bind_process",
    "bind_team_member",
    "bind_thread",
    "buffer_of",
    "check_thread",
    "empty",
    "global_set",
    "load",
    "machine",
    "parse_set",
    "place",
    "run",
    "team_cpu",
    "topology",
    "verify",
    "where",
    "zeros",
]

_LIVE: Optional[Machine] = None

# The engine's largest buffer (placement::buffer::MAX_BUFFER_BYTES).
_MAX_BYTES = (1 << 63) - 1 - (2 << 20)


def machine(topology: Optional[Union[str, os.PathLike]] = None) -> Machine:
    """The live machine (loaded once), or the machine of an hwloc XML file.

    A topology file describes a machine for sets and queries; placing memory
    or threads needs the live machine.
    """
    global _LIVE
    if topology is not None:
        return Machine(os.fspath(topology))
    if _LIVE is None:
        _LIVE = Machine()
    return _LIVE


def topology(m: Optional[Machine] = None) -> Dict[str, Any]:
    """The machine model as a dict: the object ``numalab topology --json``
    prints (nodes, packages, cores, caches, distances, hops, ...)."""
    return json.loads((m or machine()).to_json())


def parse_set(expr: str, nodes: bool = False, m: Optional[Machine] = None) -> Set:
    """A resource set from an expression of numalab's grammar
    (docs/resource-sets.md). A bare list means CPUs, or nodes with
    ``nodes=True``. A bad expression is a ValueError naming the problem."""
    return (m or machine()).parse_set(expr, nodes)


def global_set(m: Optional[Machine] = None) -> Set:
    """Everything this process may use (cgroup cpuset applied)."""
    return (m or machine()).global_set()


@dataclass(frozen=True)
class Pages:
    """Where the pages of a range are, from the kernel."""

    page_size: int
    total: int
    by_node: Dict[int, int]
    untouched: int

    def fraction(self, node: int) -> float:
        """The share of the touched pages on ``node`` (0 to 1)."""
        touched = sum(self.by_node.values())
        return self.by_node.get(node, 0) / touched if touched else 0.0

    def fractions(self) -> Dict[int, float]:
        """Each node's share of the touched pages."""
        return {n: self.fraction(n) for n in self.by_node}


@dataclass(frozen=True)
class Check:
    """An array or range checked against its policy."""

    verified: bool
    pages: Pages
    expected_nodes: Optional[List[int]]
    problems: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class ThreadCheck:
    """Where a thread may run and runs, against the CPUs asked."""

    tid: int
    asked: List[int]
    allowed: List[int]
    running_cpu: Optional[int]
    verified: bool
    problems: List[str]


def _pages(d: Dict[str, Any]) -> Pages:
    return Pages(
        page_size=d["page_size"],
        total=d["pages_total"],
        by_node={int(k): v for k, v in d["pages_by_node"].items()},
        untouched=d["untouched_pages"],
    )


def _check(text: str) -> Check:
    d = json.loads(text)
    return Check(
        verified=d["verified"],
        pages=_pages(d),
        expected_nodes=d["expected_nodes"],
        problems=d["problems"],
        notes=d["notes"],
    )


class _Memory:
    """Hands a Buffer's memory to numpy (the array interface); numpy keeps
    this object, and so the buffer, alive as long as any view of it."""

    __slots__ = ("buffer", "__array_interface__")

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer
        self.__array_interface__ = {
            "version": 3,
            "shape": (buffer.size,),
            "typestr": "|u1",
            "data": (buffer.address, False),
        }


def _ids(value: Union[None, int, Sequence[int]]) -> Tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)


def empty(
    shape: Union[int, Sequence[int]],
    dtype: Any = float,
    policy: str = "first-touch",
    *,
    touchers: Optional[Set] = None,
    thp: Optional[str] = None,
    lazy: bool = False,
    weighted_kernel: bool = False,
    order: str = "C",
    m: Optional[Machine] = None,
) -> np.ndarray:
    """A numpy array whose memory is placed with ``policy``.

    The memory is page aligned and zeroed, and every page is touched before
    this returns (unless ``lazy``), so the placement is decided:
    first-touch and local pages go to the calling thread's node; with
    ``touchers`` (a :class:`Set`) and ``policy="first-touch"``, one thread
    pinned to each of the set's CPUs touches its contiguous share in
    parallel. ``thp`` is ``"on"``, ``"off"`` or ``"system"`` (default: off
    for interleaved and weighted policies, else the system's). Weighted
    policies are laid chunk by chunk unless ``weighted_kernel`` asks for the
    kernel's weighted interleave (Linux >= 6.9, root: it writes the
    system's weights for the allocation and restores them).

    A bad policy is a ValueError naming it; a strict placement larger than
    its nodes' free memory is a MemoryError.
    """
    dt = np.dtype(dtype)
    dims = _ids(shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimension in shape {dims}")
    count = math.prod(dims)
    nbytes = max(count * dt.itemsize, 1)
    if nbytes > _MAX_BYTES:
        raise ValueError(
            f"an array of {nbytes} bytes is larger than any address space; at most {_MAX_BYTES} bytes"
        )
    buf = _native.allocate(
        m or machine(), nbytes, policy, touchers, thp, lazy, weighted_kernel
    )
    raw = np.asarray(_Memory(buf))
    return raw[: count * dt.itemsize].view(dt).reshape(dims, order=order)


def zeros(
    shape: Union[int, Sequence[int]],
    dtype: Any = float,
    policy: str = "first-touch",
    **options: Any,
) -> np.ndarray:
    """:func:`empty`: numalab's memory is always zeroed."""
    return empty(shape, dtype, policy, **options)


def buffer_of(array: np.ndarray) -> Optional[Buffer]:
    """The numalab Buffer holding an array's memory, or None when numpy (or
    anything else) allocated it."""
    base: Any = array
    while base is not None:
        if isinstance(base, _Memory):
            return base.buffer
        base = getattr(base, "base", None)
    return None


def _extent(array: np.ndarray) -> Tuple[int, int]:
    """The first byte and the length of the memory an array spans."""
    if array.size == 0:
        raise ValueError("the array is empty: it has no memory to place")
    start = array.__array_interface__["data"][0]
    low = high = 0
    for dim, stride in zip(array.shape, array.strides):
        if stride < 0:
            low += stride * (dim - 1)
        else:
            high += stride * (dim - 1)
    return start + low, high - low + array.itemsize


def where(array: np.ndarray) -> Pages:
    """Where the pages holding ``array`` are now, from the kernel
    (``move_pages`` in query mode: nothing moves, untouched pages stay
    untouched). Any array: numalab's, numpy's, a view."""
    address, length = _extent(np.asarray(array))
    return _pages(json.loads(_native.pages(address, length)))


def place(
    array: np.ndarray,
    policy: str,
    *,
    move: bool = True,
    strict: bool = False,
    m: Optional[Machine] = None,
) -> Pages:
    """Places the pages holding an existing array with ``policy`` and moves
    those already there (``move=False``: only pages touched later follow).
    The range is widened to whole pages: other data sharing its first and
    last page moves with it. Striped and weighted policies are laid chunk
    by chunk. ``strict`` raises MemoryError when a page cannot move.
    Returns where the pages are afterwards."""
    a = np.asarray(array)
    address, length = _extent(a)
    _native.place(m or machine(), address, length, policy, move, strict)
    return where(a)


def verify(array: np.ndarray, policy: Optional[str] = None, m: Optional[Machine] = None) -> Check:
    """Checks an array's pages against a policy, in one call: for an array
    from :func:`empty`, its own policy (and its touchers); for any other
    array, the ``policy`` given."""
    a = np.asarray(array)
    buf = buffer_of(a)
    if policy is None:
        if buf is None:
            raise ValueError(
                "this array's memory was not placed by numalab: give the policy to check it against"
            )
        return _check(buf.verify())
    address, length = _extent(a)
    return _check(_native.verify_range(m or machine(), address, length, policy))


def bind_thread(set: Set, tid: int = 0) -> None:
    """Binds thread ``tid`` (the kernel's id; 0: the calling thread) to the
    set's CPUs."""
    _native.bind_thread(set, tid)


def bind_process(set: Set) -> int:
    """Binds every thread of this process to the set's CPUs; returns how
    many were bound."""
    return _native.bind_process(set)


def team_cpu(set: Set, policy: str, team: int, index: int) -> int:
    """The CPU thread ``index`` of a team of ``team`` gets under a thread
    policy (``"compact"``, ``"scatter"``, or a CPU list ``"0,2,4"``) over
    the set's CPUs, one CPU a thread."""
    return _native.team_cpu(set, policy, team, index)


def bind_team_member(set: Set, policy: str, team: int, index: int) -> int:
    """Binds the calling thread, member ``index`` of a team of ``team``, to
    its CPU under a thread policy; returns the CPU."""
    return _native.bind_team_member(set, policy, team, index)


def check_thread(set: Set, tid: int = 0) -> ThreadCheck:
    """Where thread ``tid`` (0: the calling thread) may run and runs,
    checked against the set's CPUs."""
    d = json.loads(_native.check_thread(set, tid))
    return ThreadCheck(
        tid=d["tid"],
        asked=_list(d["asked"]),
        allowed=_list(d["allowed"]),
        running_cpu=d["running_cpu"],
        verified=d["verified"],
        problems=d["problems"],
    )


def _list(ids: Any) -> List[int]:
    """An id set as JSON (a list, or numactl text) as a list of ints."""
    if isinstance(ids, list):
        return [int(i) for i in ids]
    out: List[int] = []
    for part in str(ids).split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


# Results


def _frame(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> "pandas.DataFrame":
    import pandas as pd

    df = pd.DataFrame(list(rows), columns=list(header))
    for col in df.columns:
        values = df[col]
        if not (values.dtype == object or pd.api.types.is_string_dtype(values)):
            continue
        # Numbers as numbers: a column converts when every non-empty cell
        # is one (empty cells become NaN).
        blank = values.isin(["", None])
        converted = pd.to_numeric(values.where(~blank), errors="coerce")
        if converted[~blank].notna().all() and (~blank).any():
            df[col] = converted
    return df


def _records(items: Sequence[Dict[str, Any]]) -> "pandas.DataFrame":
    import pandas as pd

    flat = []
    for it in items:
        flat.append({k: v for k, v in it.items() if not isinstance(v, (list, dict))})
    return pd.DataFrame(flat)


def _profile_tables(doc: Dict[str, Any]) -> Dict[str, "pandas.DataFrame"]:
    import pandas as pd

    regions = doc.get("regions", [])
    tables: Dict[str, pd.DataFrame] = {}
    reg = _records(regions)
    if len(reg):
        reg.insert(0, "region", range(len(regions)))
    tables["regions"] = reg
    acc, pages, reg_threads = [], [], []
    for i, r in enumerate(regions):
        for cpu_node, row in (r.get("accesses") or {}).items():
            for mem_node, n in row.items():
                acc.append({"region": i, "site": r.get("site"), "cpu_node": int(cpu_node),
                            "memory_node": int(mem_node), "samples": n})
        for node, n in (r.get("pages_by_node") or {}).items():
            pages.append({"region": i, "site": r.get("site"), "node": int(node), "pages": n})
        for tid, n in (r.get("threads") or {}).items():
            reg_threads.append({"region": i, "site": r.get("site"), "tid": int(tid), "samples": n})
    tables["region-accesses"] = pd.DataFrame(acc, columns=["region", "site", "cpu_node", "memory_node", "samples"])
    tables["region-pages"] = pd.DataFrame(pages, columns=["region", "site", "node", "pages"])
    tables["region-threads"] = pd.DataFrame(reg_threads, columns=["region", "site", "tid", "samples"])
    threads = doc.get("threads", [])
    tables["threads"] = _records(threads)
    timeline = []
    for t in threads:
        for span in t.get("timeline") or []:
            timeline.append({"tid": t.get("tid"), **{k: v for k, v in span.items() if k != "cpus"},
                             "cpus": " ".join(str(c) for c in span.get("cpus", []))})
    tables["thread-timeline"] = pd.DataFrame(timeline)
    tables["diagnoses"] = _records(doc.get("diagnoses", []))
    tables["warnings"] = pd.DataFrame({"warning": doc.get("warnings", [])})
    return tables


def load(path: Union[str, os.PathLike]) -> Dict[str, "pandas.DataFrame"]:
    """numalab results as pandas DataFrames, one per table.

    - A report's results.json (``numalab report``): its tables, the same as
      the CSV files the report writes (``machine-nodes``, ``distances``,
      ``latency-matrix``, ...), numbers as numbers.
    - A profile.json (``numalab profile``): ``regions`` (one row per data
      region), ``region-accesses`` (region x CPU node x memory node),
      ``region-pages``, ``region-threads``, ``threads``,
      ``thread-timeline``, ``diagnoses``, ``warnings``.
    - The ``--json`` output of another command: each top-level list of
      objects as a table, and ``result`` with the other scalar fields.

    Files are read with numalab's size cap; anything that is not a numalab
    result is a ValueError saying so.
    """
    p = os.fspath(path)
    text = _native.read_result(p)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{p} is not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{p} is not a numalab result (not a JSON object)")
    if doc.get("schema") == "numalab-report":
        return {name: _frame(header, rows) for name, _title, header, rows in _native.report_tables(p)}
    if isinstance(doc.get("regions"), list) and "pages_armed" in doc:
        return _profile_tables(doc)
    if isinstance(doc.get("command"), str):
        import pandas as pd

        tables: Dict[str, pd.DataFrame] = {}
        scalars = {k: v for k, v in doc.items() if not isinstance(v, (list, dict))}
        tables["result"] = pd.DataFrame([scalars])
        for k, v in doc.items():
            if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                tables[k] = _records(v)
        return tables
    raise ValueError(
        f"{p} is not a numalab result: give a report's results.json, a profile.json, "
        "or the --json output of a numalab command"
    )


# Commands


class CommandError(RuntimeError):
    """A numalab command that failed: its exit code and its one-line error.
    ``result`` holds its JSON output when it printed one (exit code 3:
    the placement did not verify, figures still printed)."""

    def __init__(self, args: Sequence[str], code: int, stderr: str, result: Optional[Dict[str, Any]]):
        self.args_run = list(args)
        self.code = code
        self.stderr = stderr
        self.result = result
        line = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {code}"
        super().__init__(f"numalab {' '.join(args)}: {line} (exit code {code})")


def _binary(binary: Optional[str]) -> str:
    found = binary or os.environ.get("NUMALAB") or shutil.which("numalab")
    if not found:
        raise FileNotFoundError(
            "the numalab command is not found: put it on the PATH, set NUMALAB to its path, or pass binary="
        )
    return found


def run(*args: str, binary: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
    """Runs a numalab command with ``--json`` and returns its result as a
    dict: ``numalab.run("topology")``, ``numalab.run("bench", "latency",
    "--cpu", "0", "--mem", "bind:0")``. The binary is ``binary``, else
    ``$NUMALAB``, else ``numalab`` on the PATH. A failure raises
    :class:`CommandError` with the command's one-line error."""
    argv = [str(a) for a in args]
    if "--json" not in argv:
        argv.append("--json")
    proc = subprocess.run(
        [_binary(binary), *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    result: Optional[Dict[str, Any]] = None
    if proc.stdout.strip():
        try:
            result = json.loads(proc.stdout)
        except json.JSONDecodeError:
            result = None
    if proc.returncode != 0 or result is None:
        raise CommandError(argv, proc.returncode, proc.stderr, result)
    return result
