#!/usr/bin/env python3
"""Runs numalab's Rust tests in lanes and reports each lane's count, time and CPU use.

    scripts/lanes.py [--lane fast|guest|browser|cluster]... [--list] [--guest-apart]

The lanes (a test binary's lane follows from its name, see `lane_of`):

- fast: every crate's unit tests, doctests, and the integration tests that
  run on this machine alone (fixtures, properties, host measurements, the C
  and Fortran API). What a developer runs on every change.
- guest: the binaries that boot QEMU guests with emulated NUMA nodes
  (named guest*: crates/numalab-cli/tests/guests/).
- browser: the binary that renders report.html in headless Chromium
  (crates/numalab-cli/tests/browser/).
- cluster: the binary that runs numalab on a real two-node Slurm cluster
  and under Open MPI (crates/numalab-cli/tests/cluster/), run inside
  `cluster/with-cluster.sh`, which starts the cluster (node 2 with THP
  "never", the setting a fleet must find) and stops every daemon after it,
  also when a test fails.

Each binary is built once (`cargo test --no-run`) and run as cargo runs it
(from its package's folder, with cargo's environment). Two workers take the
lanes: the guest lane on one, the fast lane on the other, then the browser
lane on whichever worker is free first; the cluster lane runs last, alone
(--guest-apart: one worker, the guest lane before the cluster lane). A test that skips for hardware this
machine cannot have calls `numalab_testkit::skip`, which appends to the file
named by NUMALAB_SKIP_LOG: the lane counts it as skipped, not passed, and
prints why. Exits 1 when any test failed or any binary did not finish.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANES = ("fast", "guest", "browser", "cluster")
# The integration-test binary that renders report.html in Chromium
# (crates/numalab-cli/tests/browser/).
BROWSER = {"browser"}
# The integration-test binary that runs on the test cluster.
CLUSTER = {"cluster"}
# A binary that runs longer than this is killed and counted as failed: the
# guests binary boots five guests one or two at a time (about 20 minutes
# on an idle 2-core host), each capped at 1500 s.
BINARY_TIMEOUT_S = 3600
# How much of each failed test's own output the summary repeats: its panic
# message and the lines around it, so that a log cut to its tail still says
# why each test failed.
FAILURE_LINES = 30
FAILURE_LINE_CHARS = 400
RESULT = re.compile(
    r"^test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured"
)


def lane_of(kind, name):
    """The lane of one test binary: its target kind and name."""
    if kind == "test" and name.startswith("guest"):
        return "guest"
    if kind == "test" and name in BROWSER:
        return "browser"
    if kind == "test" and name in CLUSTER:
        return "cluster"
    return "fast"


class Binary:
    def __init__(self, package, kind, name, executable, manifest_dir):
        self.package = package
        self.kind = kind
        self.name = name
        self.executable = executable
        self.manifest_dir = manifest_dir
        self.lane = lane_of(kind, name)

    def label(self):
        return f"{self.package} {self.kind} {self.name}"


def build():
    """Builds every test binary once; returns them in cargo's order."""
    cmd = [
        "cargo", "test", "--workspace", "--locked", "--no-run",
        "--message-format=json-render-diagnostics",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"lanes: error: `{' '.join(cmd)}` failed (exit {proc.returncode})")
    binaries = []
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        kind = target["kind"][0]
        package = msg["package_id"]
        # package_id: "path+file:///.../crates/numalab-cli#0.1.0" or
        # "numalab-cli 0.1.0 (path+...)".
        package = re.split(r"[#@ ]", package.rsplit("/", 1)[-1])[0]
        binaries.append(
            Binary(
                package,
                kind,
                target["name"],
                msg["executable"],
                str(Path(msg["manifest_path"]).parent),
            )
        )
    return binaries


class Tally:
    def __init__(self, lane):
        self.lane = lane
        self.passed = self.failed = self.ignored = self.skipped = 0
        self.broken = []  # binaries that failed or did not finish
        self.skips = []
        self.notes = []  # what tests asked to show (a guest's time)
        self.failures = []  # (test, its output's last lines) per failed test
        self.seconds = 0.0
        self.busy = None  # share of the host's CPU time busy during the lane

    def line(self):
        busy = "" if self.busy is None else f" (host CPUs {100 * self.busy:.0f}% busy)"
        return (
            f"lane {self.lane}: {self.passed} passed, {self.failed} failed, "
            f"{self.skipped} skipped, {self.ignored} ignored in {self.seconds:.0f} s{busy}"
        )


def cpu_times():
    """(busy, total) jiffies of all CPUs from /proc/stat, or None. A lane
    whose CPUs stay busy is shortened only by less work, one with idle
    CPUs also by running more beside it."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]  # idle, iowait
    total = sum(fields)
    return total - idle, total


def busy_between(before, after):
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def node2_thp():
    """A transparent-huge-page mode this machine does not have, for the
    cluster's node 2 (the setting a fleet report must find): never, or
    madvise where this machine's is never."""
    try:
        line = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
        here = line.split("[", 1)[1].split("]", 1)[0]
    except (OSError, IndexError):
        here = ""
    return "madvise" if here == "never" else "never"


def run_binary(b, skip_log, out):
    """Runs one test binary as cargo would; its output goes to `out`."""
    env = dict(os.environ)
    env["CARGO_MANIFEST_DIR"] = b.manifest_dir
    env["CARGO_PKG_NAME"] = b.package
    env["NUMALAB_SKIP_LOG"] = str(skip_log)
    env["NUMALAB_LANE_NOTES"] = str(skip_log) + ".notes"
    start = time.monotonic()
    out.write(f"     Running {b.label()} ({b.executable})\n")
    out.flush()
    cmd = [b.executable]
    if b.lane == "cluster":
        # One cluster for the binary, its tests one at a time (they share it).
        cmd = ["bash", str(ROOT / "cluster" / "with-cluster.sh"), b.executable, "--test-threads=1"]
        env["NUMALAB_CLUSTER_NODE2_THP"] = node2_thp()
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=b.manifest_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as e:
        return None, f"cannot run {b.executable}: {e}", 0.0, []
    results = []
    failures = FailureReader()
    timer = threading.Timer(BINARY_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            out.write(line)
            failures.feed(line)
            m = RESULT.match(line)
            if m:
                results.append(tuple(int(x) for x in m.groups()[1:4]))
        rc = proc.wait()
    finally:
        timer.cancel()
    out.flush()
    elapsed = time.monotonic() - start
    if rc != 0 and not results:
        return None, f"exited {rc} without a test result", elapsed, failures.found
    passed = sum(r[0] for r in results)
    failed = sum(r[1] for r in results)
    ignored = sum(r[2] for r in results)
    if rc != 0 and failed == 0:
        return (passed, 1, ignored), f"exited {rc}", elapsed, failures.found
    return (passed, failed, ignored), None, elapsed, failures.found


class FailureReader:
    """Picks each failed test's captured output out of libtest's report
    ("---- name stdout ----" blocks after the first "failures:" line)."""

    HEADER = re.compile(r"^---- (\S+) stdout ----$")

    def __init__(self):
        self.in_failures = False
        self.current = None
        self.found = []  # (test, lines)

    def feed(self, line):
        line = line.rstrip("\n")
        if not self.in_failures:
            self.in_failures = line == "failures:"
            return
        m = self.HEADER.match(line)
        if m:
            self.current = (m.group(1), [])
            self.found.append(self.current)
        elif line == "failures:" or RESULT.match(line):
            # The list of names that ends the report; a later binary's run
            # (doctests) starts a new report.
            self.in_failures = False
            self.current = None
        elif self.current is not None:
            self.current[1].append(line)

    @staticmethod
    def excerpt(lines):
        """The panic and what led to it, at most FAILURE_LINES lines."""
        lines = [l for l in lines if l.strip() and not l.startswith("note: run with")]
        at = next((i for i, l in enumerate(lines) if "panicked at" in l), None)
        if at is None:
            return lines[-FAILURE_LINES:]
        # The message ends where a backtrace starts: its frames say less
        # than the next failure's message would in a log cut to its tail.
        end = next(
            (i for i in range(at + 1, len(lines)) if lines[i].startswith("stack backtrace:")),
            len(lines),
        )
        start = max(0, at - FAILURE_LINES // 3)
        return lines[start : min(end, start + FAILURE_LINES)]


def run_lane(lane, binaries, out, scratch):
    tally = Tally(lane)
    start = time.monotonic()
    cpu_start = cpu_times()
    for i, b in enumerate(binaries):
        skip_log = scratch / f"skips-{lane}-{i}"
        skip_log.write_text("")
        counts, problem, elapsed, failures = run_binary(b, skip_log, out)
        tally.failures += [(f"{b.label()} {t}", lines) for t, lines in failures]
        for s in skip_log.read_text().splitlines():
            if s.strip():
                tally.skips.append(f"{b.label()} {s}")
        notes = Path(str(skip_log) + ".notes")
        if notes.exists():
            tally.notes += [f"{b.label()}: {n}" for n in notes.read_text().splitlines() if n]
        out.write(f"lanes: {b.label()} took {elapsed:.0f} s\n")
        if counts:
            tally.passed += counts[0]
            tally.failed += counts[1]
            tally.ignored += counts[2]
        if problem or (counts and counts[1]):
            tally.broken.append(f"{b.label()}: {problem or 'tests failed'}")
    if lane == "fast":
        doc = doctests(out)
        tally.passed += doc[0]
        tally.failed += doc[1]
        tally.ignored += doc[2]
        if doc[1]:
            tally.broken.append("doctests: failed")
    tally.skipped = len(tally.skips)
    tally.passed -= tally.skipped
    tally.seconds = time.monotonic() - start
    tally.busy = busy_between(cpu_start, cpu_times())
    return tally


def doctests(out):
    """The workspace's doctests (cargo builds them only when it runs them)."""
    proc = subprocess.Popen(
        ["cargo", "test", "--workspace", "--locked", "--doc"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    totals = [0, 0, 0]
    for line in proc.stdout:
        out.write(line)
        m = RESULT.match(line)
        if m:
            for i, x in enumerate(m.groups()[1:4]):
                totals[i] += int(x)
    if proc.wait() != 0 and totals[1] == 0:
        totals[1] = 1
    return totals


class Buffered:
    """A lane's output held until the lane ends, so that lanes running side
    by side do not interleave their lines; a line per binary shows progress."""

    def __init__(self, lane):
        self.lane = lane
        self.parts = []

    def write(self, s):
        if s.startswith("     Running "):
            print(f"[{self.lane}] {s.strip()}", flush=True)
        self.parts.append(s)

    def flush(self):
        pass

    def text(self):
        return "".join(self.parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lane", action="append", choices=LANES, help="run this lane (repeatable; default: all)")
    ap.add_argument("--list", action="store_true", help="print each test binary's lane and exit")
    ap.add_argument(
        "--guest-apart",
        action="store_true",
        help="run the guest lane after the others instead of beside them",
    )
    args = ap.parse_args()
    lanes = args.lane or list(LANES)
    t0 = time.monotonic()
    binaries = build()
    print(f"lanes: {len(binaries)} test binaries built in {time.monotonic() - t0:.0f} s", flush=True)
    if args.list:
        for b in binaries:
            print(f"{b.lane:8} {b.label()}")
        return 0
    by_lane = {lane: [b for b in binaries if b.lane == lane] for lane in lanes}
    scratch = Path(tempfile.mkdtemp(prefix="numalab-lanes-"))
    tallies = {}
    # Two workers take the lanes in this order, each the next lane when it
    # is free: the guest lane beside the fast lane by default, and the
    # browser lane to whichever ends first. The cluster lane runs last,
    # alone: beside another lane an Open MPI rank of its MPI test died
    # twice (cc84, and cc91 of 2026-12-06 beside the browser lane: a TCP
    # connect between ranks failed, then a rank segfaulted at address 0). The guests
    # keep the CPUs busy, and much of every lane's work is bounded by
    # wall-clock budgets (measurements, the guests' reports), which then
    # take fewer CPU cycles. Here: fast 309 s, guest 690 s and browser 77 s
    # one after another; all three in 689 s side by side. A clean run of
    # 2026-12-05: fast 750 s then browser 70 s and cluster 21 s on one
    # worker, guest 771 s on the other, 842 s in all. Tests that measure
    # on the host judge rates against the CPU time their threads were given
    # (a paced load's waited_seconds), never against a quiet machine.
    # --guest-apart: one worker, the guest lane last.
    order = [lane for lane in ("guest", "fast", "browser") if lane in lanes]
    if args.guest_apart:
        order = [lane for lane in order if lane != "guest"] + (["guest"] if "guest" in order else [])
    queue = list(order)
    last = [lane for lane in ("cluster",) if lane in lanes]
    taking = threading.Lock()
    # The first worker prints as its lanes run; the second's output is held
    # until it ends, so that lanes side by side do not interleave lines.
    held = Buffered("side")

    def worker(out, live, first):
        lane = first
        while True:
            if lane is None:
                with taking:
                    if not queue:
                        return
                    lane = queue.pop(0)
            if live:
                print(f"lanes: lane {lane}: {len(by_lane[lane])} binaries", flush=True)
            else:
                out.lane = lane
                print(f"[{lane}] lanes: lane {lane} started ({len(by_lane[lane])} binaries)", flush=True)
                out.write(f"lanes: lane {lane}: {len(by_lane[lane])} binaries, its output:\n")
            tallies[lane] = run_lane(lane, by_lane[lane], out, scratch)
            line = tallies[lane].line()
            if live:
                print(line, flush=True)
            else:
                out.write(line + "\n")
                print(f"[{lane}] {line}", flush=True)
            lane = None

    side = None
    if not args.guest_apart and len(queue) > 1:
        # The side worker starts with the first lane (the guests, the
        # longest), this one with the second.
        side = threading.Thread(target=worker, args=(held, False, queue.pop(0)))
        side.start()
    worker(sys.stdout, True, queue.pop(0) if queue else None)
    if side is not None:
        side.join()
        sys.stdout.write(held.text())
    for lane in last:
        worker(sys.stdout, True, lane)
    print("lanes: summary", flush=True)
    bad = False
    for lane in lanes:
        t = tallies[lane]
        print("  " + t.line())
        for s in t.skips:
            test, _, why = s.partition("\t")
            print(f"    skipped {test}: {why}")
        for n in t.notes:
            print(f"    note {n}")
        for b in t.broken:
            print(f"    FAILED {b}")
            bad = True
        for test, lines in t.failures:
            print(f"    failed {test}:")
            for l in FailureReader.excerpt(lines):
                # An assertion may print a whole JSON document.
                cut = l if len(l) <= FAILURE_LINE_CHARS else l[:FAILURE_LINE_CHARS] + " [...]"
                print(f"      | {cut}")
    print(f"lanes: all lanes in {time.monotonic() - t0:.0f} s", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
