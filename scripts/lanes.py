#!/usr/bin/env python3
"""Runs numalab's Rust tests in lanes and reports each lane's count and time.

    scripts/lanes.py [--lane fast|guest|browser]... [--list] [--one-by-one]

The lanes (a test binary's lane follows from its name, see `lane_of`):

- fast: every crate's unit tests, doctests, and the integration tests that
  run on this machine alone (fixtures, properties, host measurements, the C
  and Fortran API). What a developer runs on every change.
- guest: the binaries that boot QEMU guests with emulated NUMA nodes
  (named guest*: crates/numalab-cli/tests/guests/).
- browser: the binary that renders report.html in headless Chromium
  (crates/numalab-cli/tests/browser/).

Each binary is built once (`cargo test --no-run`) and run as cargo runs it
(from its package's folder, with cargo's environment). The guest lane runs
beside the others, at idle priority (SCHED_IDLE), and pauses while they measure: a
measuring test asks for quiet (`numalab_testkit::quiet`, a file in the
folder NUMALAB_QUIET_DIR names), and the runner stops every guest through
QMP (which stops the guest's clocks: nothing in the guest sees the pause)
and every other process of the guest lane with SIGSTOP, answers, and
resumes them all when no request is left. Binaries that do not take turns
to measure (the unit tests) run with the guests paused throughout.
--one-by-one runs the lanes one after another instead. A test that skips for hardware this
machine cannot have calls `numalab_testkit::skip`, which appends to the file
named by NUMALAB_SKIP_LOG: the lane counts it as skipped, not passed, and
prints why. Exits 1 when any test failed or any binary did not finish.
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANES = ("fast", "guest", "browser")
# The integration-test binary that renders report.html in Chromium
# (crates/numalab-cli/tests/browser/).
BROWSER = {"browser"}
# A binary that runs longer than this is killed and counted as failed: the
# guests binary boots five guests one or two at a time (about 20 minutes
# on an idle 2-core host), each capped at 1500 s.
BINARY_TIMEOUT_S = 3600
# How much of each failed test's own output the summary repeats: its panic
# message and the lines around it, so that a log cut to its tail still says
# why each test failed.
FAILURE_LINES = 30
FAILURE_LINE_CHARS = 400
# The binaries of the main lanes that run beside the guests: those whose
# measuring tests take turns and ask for quiet (crates/numalab-cli/tests/
# common, crates/numalab/tests/common). Every other binary runs with the
# guests paused.
BESIDE_GUESTS = {("numalab-cli", "host"), ("numalab-cli", "browser"), ("numalab", "library")}


def idle_priority():
    """The guest lane runs under SCHED_IDLE: it takes only the CPU time the
    other lanes leave. (Nice 10 was not enough: three guests of 4 to 8
    vCPU threads each outweighed a host test's threads, and a profiled
    program whose threads meet at barriers ran ten times slower.)"""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
RESULT = re.compile(
    r"^test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured"
)


def lane_of(kind, name):
    """The lane of one test binary: its target kind and name."""
    if kind == "test" and name.startswith("guest"):
        return "guest"
    if kind == "test" and name in BROWSER:
        return "browser"
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

    def line(self):
        return (
            f"lane {self.lane}: {self.passed} passed, {self.failed} failed, "
            f"{self.skipped} skipped, {self.ignored} ignored in {self.seconds:.0f} s"
        )


def run_binary(b, skip_log, out, pauser=None):
    """Runs one test binary as cargo would; its output goes to `out`."""
    env = dict(os.environ)
    env["CARGO_MANIFEST_DIR"] = b.manifest_dir
    env["CARGO_PKG_NAME"] = b.package
    env["NUMALAB_SKIP_LOG"] = str(skip_log)
    env["NUMALAB_LANE_NOTES"] = str(skip_log) + ".notes"
    guests = pauser is not None and b.lane == "guest"
    if pauser is not None:
        env.update(pauser.env(guest=guests))
    start = time.monotonic()
    out.write(f"     Running {b.label()} ({b.executable})\n")
    out.flush()
    quiet = pauser is not None and not guests and (b.package, b.name) not in BESIDE_GUESTS
    if quiet:
        pauser.hold()
    try:
        proc = subprocess.Popen(
            [b.executable],
            cwd=b.manifest_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            # The guest lane in a session of its own (the pauser finds its
            # processes by it), at idle priority.
            start_new_session=guests,
            preexec_fn=idle_priority if guests else None,
        )
    except OSError as e:
        if quiet:
            pauser.release()
        return None, f"cannot run {b.executable}: {e}", 0.0, []
    if guests:
        pauser.watch(proc.pid)
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
        if quiet:
            pauser.release()
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


def run_lane(lane, binaries, out, scratch, pauser=None):
    tally = Tally(lane)
    start = time.monotonic()
    for i, b in enumerate(binaries):
        skip_log = scratch / f"skips-{lane}-{i}"
        skip_log.write_text("")
        counts, problem, elapsed, failures = run_binary(b, skip_log, out, pauser)
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
        if pauser is not None:
            pauser.hold()
        try:
            doc = doctests(out)
        finally:
            if pauser is not None:
                pauser.release()
        tally.passed += doc[0]
        tally.failed += doc[1]
        tally.ignored += doc[2]
        if doc[1]:
            tally.broken.append("doctests: failed")
    tally.skipped = len(tally.skips)
    tally.passed -= tally.skipped
    tally.seconds = time.monotonic() - start
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


def qmp(path, command):
    """Sends one QMP command to the QEMU listening on `path`; True when it
    answered without an error."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(str(path))
        f = sock.makefile("rw")
        json.loads(f.readline())  # the greeting
        for execute in ("qmp_capabilities", command):
            f.write(json.dumps({"execute": execute}) + "\n")
            f.flush()
            while True:
                line = f.readline()
                if not line:
                    return False
                reply = json.loads(line)
                if "error" in reply:
                    return False
                if "return" in reply:
                    break
    return True


def session_of(pid):
    """The session id of process `pid`, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # pid (comm) state ppid pgrp session ...: comm may hold spaces.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[3])


def comm_of(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Pauser:
    """Pauses the guest lane while a test of another lane measures.

    A request for quiet is a file NAME.want in `quiet_dir` (written by
    `numalab_testkit::quiet`) or a hold of the runner's own (`hold`, for
    binaries that run wholly paused). While any is there, every QEMU of the
    guest lane is stopped through its QMP socket in `qmp_dir` (guest/boot.sh
    makes one per boot), which stops the guest's clocks too, and every
    other process of the guest lane's session gets SIGSTOP; each request is
    then answered with NAME.granted. With no request left, all resume."""

    POLL_S = 0.02

    def __init__(self, scratch):
        self.quiet_dir = scratch / "quiet"
        self.qmp_dir = scratch / "qmp"
        self.quiet_dir.mkdir()
        self.qmp_dir.mkdir()
        self.lock = threading.Lock()
        self.holds = 0
        self.session = None
        self.stopped_guests = set()  # QMP sockets
        self.stopped_pids = set()
        self.paused_since = None
        self.pauses = 0
        self.paused_s = 0.0
        self.failures = 0  # QMP commands that failed (a guest ending, say)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def env(self, guest):
        """The variables a lane's binaries run with."""
        if guest:
            return {"NUMALAB_GUEST_QMP_DIR": str(self.qmp_dir)}
        return {"NUMALAB_QUIET_DIR": str(self.quiet_dir)}

    def watch(self, pid):
        """The guest lane's binary, in a session of its own."""
        with self.lock:
            self.session = pid

    def hold(self):
        """Pauses the guests until `release` (waits until they are)."""
        with self.lock:
            self.holds += 1
            self.pause()

    def release(self):
        with self.lock:
            self.holds -= 1

    def start(self):
        self.thread.start()

    def stop(self):
        """Ends the watch and lets everything run."""
        self.done.set()
        self.thread.join()
        with self.lock:
            self.resume()

    def loop(self):
        while not self.done.is_set():
            with self.lock:
                wants = list(self.quiet_dir.glob("*.want"))
                if wants or self.holds:
                    self.pause()
                    for w in wants:
                        granted = w.with_suffix(".granted")
                        if w.exists() and not granted.exists():
                            granted.write_text("")
                elif self.paused_since is not None:
                    self.resume()
                for g in self.quiet_dir.glob("*.granted"):
                    if not g.with_suffix(".want").exists():
                        g.unlink(missing_ok=True)
            self.done.wait(self.POLL_S)

    def pause(self):
        """Stops what is not stopped yet (guests and processes started
        since the last call included). Called with the lock held."""
        if self.paused_since is None:
            self.paused_since = time.monotonic()
            self.pauses += 1
        for sock in self.qmp_dir.glob("*.sock"):
            if sock in self.stopped_guests:
                continue
            try:
                ok = qmp(sock, "stop")
            except (OSError, ValueError):
                ok = False
            if ok:
                self.stopped_guests.add(sock)
            else:
                self.failures += 1
        if self.session is None:
            return
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            if pid in self.stopped_pids or session_of(pid) != self.session:
                continue
            # QEMU is stopped through QMP: a SIGSTOP would leave its clocks
            # running, and the guest would see the pause.
            if comm_of(pid).startswith("qemu-system"):
                continue
            try:
                os.kill(pid, signal.SIGSTOP)
                self.stopped_pids.add(pid)
            except ProcessLookupError:
                pass

    def resume(self):
        """Called with the lock held."""
        for pid in self.stopped_pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.stopped_pids.clear()
        for sock in self.stopped_guests:
            try:
                qmp(sock, "cont")
            except (OSError, ValueError):
                self.failures += 1
        self.stopped_guests.clear()
        if self.paused_since is not None:
            self.paused_s += time.monotonic() - self.paused_since
            self.paused_since = None

    def line(self):
        return (
            f"lanes: the guest lane was paused {self.pauses} times, "
            f"{self.paused_s:.0f} s in all, while the other lanes measured"
            + (f" ({self.failures} QMP commands failed: guests ending)" if self.failures else "")
        )


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
        "--one-by-one",
        action="store_true",
        help="run the lanes one after another (by default the guest lane runs beside the others, paused while they measure)",
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
    # The guest lane (QEMU, CPU-bound for most of its 8 minutes) runs beside
    # the others and takes the CPU time they leave: the host lane kept 38%
    # of the two CPUs idle, the browser lane 49% (vmstat, 2026-12-02),
    # mostly while one test measured and the others waited for its turn.
    # A measurement must not share the host with a guest (a loaded-latency
    # ladder out of order, a fitted latency of 0, seen when the lanes first
    # ran side by side): the Pauser stops the guests for every measuring
    # turn.
    side = [lane for lane in lanes if lane == "guest" and not args.one_by_one and len(lanes) > 1]
    main_lanes = [lane for lane in lanes if lane not in side]
    pauser = Pauser(scratch) if side else None
    buffered = {lane: Buffered(lane) for lane in side}
    threads = []
    stop_signals = {}
    if pauser is not None:
        pauser.start()

        # A runner stopped by a signal lets the guests go first: stopped
        # processes would outlive it.
        def ended(signum, _frame):
            pauser.stop()
            sys.exit(128 + signum)

        for sig in (signal.SIGINT, signal.SIGTERM):
            stop_signals[sig] = signal.signal(sig, ended)
    for lane in side:
        th = threading.Thread(
            target=lambda lane=lane: tallies.__setitem__(
                lane, run_lane(lane, by_lane[lane], buffered[lane], scratch, pauser)
            )
        )
        th.start()
        threads.append(th)
    try:
        for lane in main_lanes:
            print(f"lanes: lane {lane}: {len(by_lane[lane])} binaries", flush=True)
            tallies[lane] = run_lane(lane, by_lane[lane], sys.stdout, scratch, pauser)
            print(tallies[lane].line(), flush=True)
        if threads:
            print("lanes: the other lanes are done; waiting for the guest lane", flush=True)
        for th in threads:
            th.join()
    finally:
        if pauser is not None:
            pauser.stop()
            for sig, old in stop_signals.items():
                signal.signal(sig, old)
    for lane in side:
        print(f"lanes: lane {lane}: {len(by_lane[lane])} binaries, its output:", flush=True)
        sys.stdout.write(buffered[lane].text())
        print(tallies[lane].line(), flush=True)
    if pauser is not None:
        print(pauser.line(), flush=True)
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
