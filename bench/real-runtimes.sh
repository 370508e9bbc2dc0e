#!/usr/bin/env bash
# Real programs and runtimes nobody here wrote, from Debian's packages (and Go static and with
# cgo, rustc and cargo from the toolchains the tests install), under every way numalab
# runs a program, in one run: `profile`, `run --plan` (a plan placing every allocation over
# 1 MiB), `run --mem interleave:0@4` (stripes laid by the preload library) and
# `run --counters`. Each workload runs plain and in every mode, back to back in an order that
# rotates from round to round; each mode's ratio is the median over rounds of its wall time
# over the same round's plain run (paired, so that the machine's drift between rounds cancels),
# with a 95% interval for that median from the rounds' order statistics (distribution-free:
# with 6 rounds it is the whole range, which covers 96.9%; 5 rounds cover only 93.8%). Prints
# a Markdown table: workload, plain time, and per mode the ratio with its interval, and whether
# every run's output and exit status were the plain run's ("same"; a mode numalab refuses for
# a workload by design, `run --plan` of a static program, must exit 2 and print nothing). A
# report, not a test: the real-program tests (crates/numalab-cli/tests/host/real_programs.rs,
# real_runtimes.rs) assert the outputs; this prints what the modes cost. Exits non-zero only when it cannot measure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/real-runtimes.sh [--rounds N] [--bin PATH]
  --rounds N   rounds of each workload (default: 6)
  --bin PATH   measure this numalab binary (its libnumalab_preload.so beside it)
EOF2
}
ROUNDS=6 BIN=""
bench_options real-runtimes.sh "rounds=ROUNDS bin=BIN" "$@"
bench_whole real-runtimes.sh --rounds "$ROUNDS" 1
numalab_profile_bin real-runtimes.sh
bash scripts/install-deps.sh --test >/dev/null
work=$(mktemp -d /tmp/numalab-real-runtimes.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "real-runtimes.sh: workloads in $work" >&2
exec python3 - "$BIN" "$ROUNDS" "$work" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time

BIN, ROUNDS, WORK = sys.argv[1], int(sys.argv[2]), sys.argv[3]
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

def sh(cmd, cwd=WORK, **kw):
    subprocess.run(cmd, check=True, cwd=cwd, **kw)

# The workloads' inputs and programs, built once.
with open(os.path.join(WORK, "data.log"), "w") as f:
    x = 0x9E3779B97F4A7C15
    for i in range(150_000):
        x ^= (x << 13) & (2**64 - 1); x ^= x >> 7; x ^= (x << 17) & (2**64 - 1)
        f.write(f"{i:08} worker-{x % 16} served /item/{x % 100000} in {x % 5000} us\n")
os.makedirs(os.path.join(WORK, "go"), exist_ok=True)
# The Go program of the runtime tests, in its cgo form.
with open("crates/numalab-cli/tests/programs/gofiles.go") as src, \
        open(os.path.join(WORK, "go", "main.go"), "w") as f:
    f.write(src.read()
            .replace("import (", "/*\nstatic int twice(int x) { return 2 * x; }\n*/\nimport \"C\"\n\nimport (", 1)
            .replace('"CGO"', "C.twice(21)"))
with open(os.path.join(WORK, "go", "go.mod"), "w") as f:
    f.write("module gofiles\n\ngo 1.19\n")
sh(["go", "build", "-buildvcs=false", "-o", os.path.join(WORK, "gofiles"), "."],
   cwd=os.path.join(WORK, "go"),
   env={**os.environ, "CGO_ENABLED": "1", "GOCACHE": os.path.join(WORK, "gocache")},
   stdout=subprocess.DEVNULL)
# The same program statically linked (no cgo): the preload library cannot load into it.
with open("crates/numalab-cli/tests/programs/gofiles.go") as src, \
        open(os.path.join(WORK, "go", "main.go"), "w") as f:
    f.write(src.read().replace(', "CGO"', ""))
sh(["go", "build", "-buildvcs=false", "-o", os.path.join(WORK, "gostatic"), "."],
   cwd=os.path.join(WORK, "go"),
   env={**os.environ, "CGO_ENABLED": "0", "GOCACHE": os.path.join(WORK, "gocache")},
   stdout=subprocess.DEVNULL)
shutil.rmtree(os.path.join(WORK, "go"))
with open(os.path.join(WORK, "Sum.java"), "w") as f:
    f.write("public class Sum { public static void main(String[] a) { long[] v = new long[8_000_000]; "
            "for (int i = 0; i < v.length; i++) v[i] = i; long s = 0; for (int r = 0; r < 3; r++) "
            "for (long x : v) s += x; System.out.println(s); } }\n")
with open(os.path.join(WORK, "q.sql"), "w") as f:
    f.write("create table t(k integer primary key, v text);\n"
            "with recursive c(x) as (select 1 union all select x + 1 from c where x < 300000) "
            "insert into t select x, printf('%08x', (x * 2654435761) % 4294967296) from c;\n"
            "create index iv on t(v);\nselect count(*), sum(length(v)) from t;\n")
with open(os.path.join(WORK, "plan.json"), "w") as f:
    json.dump({"schema": "numalab-plan/1",
               "entries": [{"region": "size>1M", "policy": "interleave:0"}]}, f)
os.makedirs(os.path.join(WORK, "hello", "src"), exist_ok=True)
with open(os.path.join(WORK, "hello", "Cargo.toml"), "w") as f:
    f.write('[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n\n[workspace]\n')
with open(os.path.join(WORK, "hello", "src", "main.rs"), "w") as f:
    f.write("fn main() { let v: Vec<u64> = (1..=1000).collect(); println!(\"{}\", v.iter().sum::<u64>()); }\n")
# redis-server on a port of its own, serving redis-benchmark on the loopback; everything the
# script starts runs under the mode (the preload library follows exec); the benchmark's own
# figures vary, so only a value written and read back is printed.
import socket
with socket.socket() as s_:
    s_.bind(("127.0.0.1", 0))
    PORT = s_.getsockname()[1]
REDIS = (f"redis-server --port {PORT} --bind 127.0.0.1 --save '' --appendonly no >/dev/null & "
         f"for i in $(seq 200); do redis-cli -p {PORT} ping >/dev/null 2>&1 && break; sleep 0.05; done; "
         f"redis-benchmark -p {PORT} -n 20000 -c 4 -d 1024 -t set,get -q >/dev/null; "
         f"redis-cli -p {PORT} set k v >/dev/null; redis-cli -p {PORT} get k; "
         f"redis-cli -p {PORT} shutdown nosave >/dev/null; wait")
with open(os.path.join(WORK, "sum.rs"), "w") as f:
    f.write("fn main() { let v: Vec<u64> = (0..2_000_000).collect(); println!(\"{}\", v.iter().sum::<u64>()); }\n")

# name, command, environment[, modes numalab refuses for it by design: mode -> exit status]
WORKLOADS = [
    ("xz -T2 -3, 9 MB (jemalloc preloaded)", ["xz", "-T2", "-3", "-c", "data.log"], {"LD_PRELOAD": JEMALLOC}),
    ("Go with cgo, 64 MiB through its heap", ["./gofiles"], {}),
    ("JVM (source launcher)", ["java", "-Xmx512m", "Sum.java"], {}),
    ("Node", ["node", "-e", "const a = new Float64Array(4e6); for (let i = 0; i < a.length; i++) a[i] = i; "
              "let s = 0; for (let r = 0; r < 5; r++) for (let i = 0; i < a.length; i++) s += a[i]; console.log(s)"], {}),
    ("Python with numpy", ["/usr/bin/python3", "-c", "import numpy as np; a = np.arange(8_000_000, dtype=np.float64); "
              "print(sum(float((a * a).sum()) for _ in range(5)))"], {}),
    ("sqlite3, 300k rows and an index", ["sh", "-c", "rm -f db.sqlite && sqlite3 db.sqlite < q.sql"], {}),
    ("rustc -O (its own jemalloc)", ["rustc", "-O", "-o", "sum", "sum.rs"], {}),
    ("Go static (no preload possible)", ["./gostatic"], {}, {"run --plan": 2}),
    ("cargo build + run, a fresh target", ["sh", "-c", "rm -rf t && cargo run --quiet --offline "
              "--manifest-path hello/Cargo.toml --target-dir t"], {}),
    ("redis-server + redis-benchmark 20k set/get", ["sh", "-c", REDIS], {}),
]
MODES = [
    ("profile", ["profile", "-o", "prof"]),
    ("run --plan", ["run", "--plan", "plan.json"]),
    ("stripes", ["run", "--mem", "interleave:0@4"]),
    ("counters", ["run", "--counters"]),
]

def once(argv, env):
    shutil.rmtree(os.path.join(WORK, "prof"), ignore_errors=True)
    t = time.perf_counter()
    p = subprocess.run(argv, cwd=WORK, env={**os.environ, **env}, capture_output=True, timeout=600)
    return time.perf_counter() - t, p.returncode, p.stdout

def median_interval(xs):
    """The median and a distribution-free 95% interval from order statistics
    (the widest symmetric pair whose binomial coverage reaches 95%)."""
    xs = sorted(xs)
    n = len(xs)
    from math import comb
    # [xs[k], xs[n-1-k]] holds the median unless k+1 or more rounds fall
    # on one side of it: coverage P(k+1 <= B <= n-k-1), B ~ Bin(n, 1/2).
    k = 0
    for j in range(n // 2, -1, -1):
        if j + 1 > n - j - 1:
            continue
        cover = sum(comb(n, i) for i in range(j + 1, n - j)) / 2 ** n
        if cover >= 0.95:
            k = j
            break
    return statistics.median(xs), xs[k], xs[n - 1 - k]

print(f"numalab {BIN} on {os.cpu_count()} CPUs, {ROUNDS} rounds; ratio = mode / plain wall time, "
      "the median over rounds of each round's own pair, [95% interval of that median]")
print()
print("| workload | plain s | " + " | ".join(m for m, _ in MODES) + " | same output and status |")
print("|---|---:|" + "---:|" * len(MODES) + "---|")
for name, cmd, env, *refusals in WORKLOADS:
    # A plan cannot be applied to a static program: refused before it runs (exit 2, nothing
    # printed), which is checked, not timed.
    refused = refusals[0] if refusals else {}
    plain_t, ratios, same = [], {m: [] for m, _ in MODES}, True
    want = None
    for r in range(ROUNDS):
        order = [("plain", [])] + MODES
        k = r % len(order)
        order = order[k:] + order[:k]
        times = {}
        for mode, args in order:
            argv = cmd if mode == "plain" else [BIN, *args, "--", *cmd]
            dt, rc, out = once(argv, env)
            if mode == "plain" and want is None:
                want = (rc, out)
            if mode in refused:
                same &= (rc, out) == (refused[mode], b"")
            elif (rc, out) != want:
                same = False
            times[mode] = dt
        plain_t.append(times["plain"])
        for m, _ in MODES:
            ratios[m].append(times[m] / times["plain"])
    cells = []
    for m, _ in MODES:
        if m in refused:
            cells.append(f"refused (exit {refused[m]})")
            continue
        med, lo, hi = median_interval(ratios[m])
        cells.append(f"{med:.2f} [{lo:.2f}–{hi:.2f}]")
    print(f"| {name} | {statistics.median(plain_t):.2f} | " + " | ".join(cells) + f" | {'yes' if same else 'NO'} |", flush=True)
PY
