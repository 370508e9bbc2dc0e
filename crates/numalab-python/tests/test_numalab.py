"""The numalab package on this machine: placed numpy arrays, where their
pages are, placing an existing array, verification, sets, threads, a
report's results.json as DataFrames, commands as dicts, and bad input as
ValueErrors that name it. The multi-node truths are checked in the guests
through the C API (Python cannot run there)."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import numalab

REPO = Path(__file__).resolve().parents[3]
QUARTET = REPO / "tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml"
NUMALAB = os.environ.get("NUMALAB", str(REPO / "target/debug/numalab"))
PAGE = os.sysconf("SC_PAGE_SIZE")


def own_node() -> int:
    return numalab.global_set().nodes[0]


def test_empty_places_an_array_and_where_reports_its_pages():
    n = own_node()
    a = numalab.empty((512, 64), np.float64, policy=f"bind:{n}")
    assert a.shape == (512, 64) and a.dtype == np.float64
    assert a.flags["C_CONTIGUOUS"] and a.ctypes.data % PAGE == 0
    assert (a == 0).all()
    a[:] = 2.5
    pages = numalab.where(a)
    assert pages.total == 512 * 64 * 8 // PAGE == 64
    assert pages.by_node == {n: 64}
    assert pages.untouched == 0
    assert pages.fraction(n) == 1.0
    check = numalab.verify(a)
    assert check.verified, check.problems
    assert check.expected_nodes == [n]
    assert check.pages.by_node == {n: 64}
    assert numalab.buffer_of(a).policy == f"bind:{n}"


def test_the_memory_lives_as_long_as_any_view():
    a = numalab.empty(PAGE * 4, np.uint8, policy="interleave:all@2")
    view = a[PAGE:]
    buf = numalab.buffer_of(view)
    assert buf is not None and buf.size == 4 * PAGE
    del a
    view[:] = 7
    assert int(view.sum()) == 7 * 3 * PAGE
    assert numalab.verify(view).verified


@pytest.mark.parametrize(
    "policy",
    ["first-touch", "local", "bind:{n}", "preferred:{n}", "interleave:{n}", "interleave:{n}@4", "weighted:{n}=3", "weighted:{n}=2@2"],
)
def test_every_policy_places_and_verifies(policy):
    text = policy.format(n=own_node())
    a = numalab.zeros(32 * PAGE // 4, "f4", policy=text)
    c = numalab.verify(a)
    assert c.verified, (text, c.problems)
    assert c.pages.total == 32 and c.pages.untouched == 0
    assert c.pages.by_node == {own_node(): 32}


def test_a_team_first_touches_its_shares_in_parallel():
    team = numalab.global_set()
    a = numalab.empty(33 * PAGE, np.uint8, touchers=team)
    c = numalab.verify(a)
    assert c.verified, c.problems
    assert c.pages.total == 33
    assert numalab.buffer_of(a).policy.startswith("first-touch by CPUs {")
    with pytest.raises(ValueError, match="touchers place pages by first touch"):
        numalab.empty(PAGE, np.uint8, policy=f"bind:{own_node()}", touchers=team)


def test_a_lazy_array_is_placed_when_touched():
    a = numalab.empty(8 * PAGE, np.uint8, policy=f"bind:{own_node()}", lazy=True)
    assert numalab.where(a).untouched == 8
    a[: 3 * PAGE] = 1
    p = numalab.where(a)
    assert (p.untouched, p.by_node) == (5, {own_node(): 3})
    c = numalab.verify(a)
    assert not c.verified and c.problems == ["5 pages were never touched"]


def test_an_existing_numpy_array_is_placed_and_keeps_its_values():
    n = own_node()
    x = np.arange(300_000, dtype=np.int64)
    pages = numalab.place(x, f"bind:{n}", strict=True)
    assert pages.by_node == {n: pages.total} and pages.total >= 300_000 * 8 // PAGE
    assert (x == np.arange(300_000)).all()
    c = numalab.verify(x, f"bind:{n}")
    assert c.verified, c.problems
    striped = numalab.place(x, f"interleave:{n}@4")
    assert striped.by_node == {n: striped.total}
    with pytest.raises(ValueError, match="not placed by numalab"):
        numalab.verify(x)


def test_where_follows_strided_and_reversed_views():
    a = numalab.empty((64, PAGE // 8), np.float64)
    col = a[:, 3]
    rev = a[::-1]
    assert numalab.where(col).total == 64
    assert numalab.where(rev).total == 64
    assert numalab.where(a[10:12]).total == 2
    with pytest.raises(ValueError, match="empty"):
        numalab.where(a[:0])


def test_a_bad_policy_raises_a_value_error_that_names_it():
    with pytest.raises(ValueError, match=r"unknown memory policy 'scatter'; valid: first-touch, local, bind:NODES"):
        numalab.empty(10, policy="scatter")
    with pytest.raises(ValueError, match=r"node 99 does not exist; valid nodes: "):
        numalab.empty(10, policy="bind:99")
    with pytest.raises(ValueError, match=r"policy 'interleave' needs nodes"):
        numalab.place(np.zeros(10), "interleave:")
    with pytest.raises(ValueError, match=r"weight '0' of node"):
        numalab.empty(10, policy=f"weighted:{own_node()}=0")
    with pytest.raises(ValueError, match=r"unknown THP choice 'maybe'"):
        numalab.empty(10, thp="maybe")
    with pytest.raises(MemoryError, match="cannot fit"):
        numalab.empty(1 << 50, np.uint8, policy=f"bind:{own_node()}")
    with pytest.raises(ValueError, match="larger than any address space"):
        numalab.empty((1 << 40, 1 << 30), np.uint8)


def test_sets_parse_combine_and_nest_on_the_quartet_topology():
    m = numalab.machine(QUARTET)
    assert not m.is_live
    a = m.parse_set("node:0-1")
    b = m.parse_set("core:1")
    d = a - b
    assert (d.cpus, d.nodes) == ([0, 2, 3], [0, 1])
    assert (a | m.parse_set("node:3")).nodes == [0, 1, 3]
    assert (a & m.parse_set("cpu:2-5")).cpus == [2, 3]
    assert m.parse_set("1-2", nodes=True).cpus == [2, 3, 4, 5]
    job = m.parse_set("none").with_named("io", m.parse_set("node:0")).with_named(
        "compute", m.parse_set("node:1").with_named("left", m.parse_set("node:3"))
    )
    assert job.names() == ["io", "compute"]
    assert job.named("compute/left").cpus == [6, 7]
    assert job.cpus == [0, 1, 2, 3, 6, 7]
    with pytest.raises(ValueError, match=r"'compute' has no subset named 'right'; its subsets: left"):
        job.named("compute/right")
    with pytest.raises(ValueError, match=r"node 7 does not exist; valid nodes: 0-3"):
        m.parse_set("node:7")
    assert m.distance(0, 3) == 22 and m.hops(0, 3) == 2
    assert numalab.topology(m)["nodes"][3]["os_index"] == 3
    assert [numalab.team_cpu(m.global_set(), "scatter", 4, i) for i in range(4)] == [0, 2, 4, 6]
    with pytest.raises(ValueError, match="placing memory needs the live machine"):
        numalab.empty(10, policy="bind:0", m=m)


def test_team_members_are_bound_and_checked():
    everything = numalab.global_set()
    team = min(len(everything.cpus), 4)
    seen = {}

    def member(i):
        cpu = numalab.bind_team_member(everything, "compact", team, i)
        one = numalab.parse_set(f"cpu:{cpu}")
        seen[i] = (cpu, numalab.check_thread(one))

    threads = [threading.Thread(target=member, args=(i,)) for i in range(team)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(c for c, _ in seen.values()) == everything.cpus[:team]
    for cpu, check in seen.values():
        assert check.verified, check.problems
        assert check.allowed == [cpu] and check.running_cpu == cpu


def test_a_reports_results_json_loads_as_the_csv_tables(tmp_path):
    out = tmp_path / "report"
    subprocess.run([NUMALAB, "report", "--topology", str(QUARTET), "-o", str(out)], check=True,
                   capture_output=True)
    tables = numalab.load(out / "results.json")
    assert set(tables) == {"machine-nodes", "distances", "parts", "key-figures"}
    for name, df in tables.items():
        csv = pd.read_csv(out / f"{name}.csv", keep_default_na=False, na_values=[""])
        assert list(df.columns) == list(csv.columns), name
        assert len(df) == len(csv), name
    d = tables["distances"]
    assert len(d) == 16
    assert d.dtypes["distance"].kind in "if"
    row = d[(d.from_node == 0) & (d.to_node == 3)]
    assert int(row.distance.iloc[0]) == 22
    nodes = tables["machine-nodes"]
    assert list(nodes.node) == [0, 1, 2, 3]


def test_a_profile_json_loads_region_by_region(tmp_path):
    doc = {
        "schema_version": "1.5",
        "command": ["./app"],
        "pid": 1,
        "rate": 0,
        "min_bytes": 4096,
        "page_size": 4096,
        "pages_armed": 10,
        "samples": 7,
        "regions": [
            {"kind": "heap", "site": "main app.c:10", "bytes": 8192, "samples": 7,
             "accesses": {"0": {"0": 3, "1": 4}}, "pages_by_node": {"0": 1, "1": 1},
             "threads": {"11": 7}, "remote_share": 0.57},
        ],
        "threads": [{"tid": 11, "samples": 7, "cpus": [0], "nodes": [0],
                     "timeline": [{"from_s": 0.0, "to_s": 1.0, "node": 0, "cpus": [0, 1], "samples": 7, "remote": 4}]}],
        "diagnoses": [{"region": 0, "kind": "remote", "fix": "numalab run --mem bind:1"}],
        "warnings": ["few samples"],
    }
    p = tmp_path / "profile.json"
    p.write_text(json.dumps(doc))
    t = numalab.load(p)
    assert list(t["regions"].site) == ["main app.c:10"]
    acc = t["region-accesses"]
    assert list(zip(acc.cpu_node, acc.memory_node, acc.samples)) == [(0, 0, 3), (0, 1, 4)]
    assert t["region-pages"].pages.sum() == 2
    assert t["thread-timeline"].cpus.iloc[0] == "0 1"
    assert t["warnings"].warning.iloc[0] == "few samples"
    assert t["diagnoses"].fix.iloc[0].startswith("numalab run")


def test_files_that_are_not_results_are_value_errors(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"a": 1}')
    with pytest.raises(ValueError, match="is not a numalab result"):
        numalab.load(bad)
    bad.write_text("not json")
    with pytest.raises(ValueError, match="is not JSON"):
        numalab.load(bad)
    with pytest.raises(ValueError, match="cannot"):
        numalab.load(tmp_path / "missing.json")


def test_commands_run_with_their_results_as_dicts():
    topo = numalab.run("topology", "--topology", str(QUARTET), binary=NUMALAB)
    assert topo["source"]["kind"] == "file"
    assert [n["os_index"] for n in topo["nodes"]] == [0, 1, 2, 3]
    with pytest.raises(numalab.CommandError, match=r"unknown memory policy 'nope'.*\(exit code 2\)") as e:
        numalab.run("place", "--size", "4K", "--mem", "nope", binary=NUMALAB)
    assert e.value.code == 2


def test_the_python_triad_example_prints_its_verification():
    r = subprocess.run([sys.executable, str(REPO / "examples/triad.py"), "200000"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for name in "abc":
        line = next(l for l in lines if l.startswith(f"{name}: "))
        assert "verified" in line and "(100.0%)" in line, line
    assert "result correct" in r.stdout
