#!/usr/bin/env bash
# How fast, and in how much memory, does `numalab fleet summarize` aggregate a large fleet?
# Writes N synthetic node reports (DIR/nodes/NODE/results.json, each a copy of one real
# results.json with its key figures perturbed by a few percent, one node in 500 given half its
# bandwidth and one in 700 THP "never"), then times `numalab fleet summarize DIR` and reads its
# peak resident memory (getrusage of the child), and prints both against the targets of issue
# 31: 10,000 nodes within 60 s and 1 GiB. It also checks that the planted nodes are the
# outliers found. A report, not a test: it exits non-zero only when it cannot measure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/fleet-aggregate.sh [--nodes N] [--source FILE] [--bin PATH] [--keep DIR]
  --nodes N      synthetic nodes (default: 10000)
  --source FILE  the results.json every node copies (default: a `numalab report --quick` run here)
  --bin PATH     measure this numalab binary instead of building target/release/numalab
  --keep DIR     write the fleet into DIR and keep it (default: a temporary directory, removed)
EOF2
}
NODES=10000 SOURCE="" BIN="" KEEP=""
bench_options fleet-aggregate.sh "nodes=NODES source=SOURCE bin=BIN keep=KEEP" "$@"
# At most 100000: the most one fleet reads.
bench_whole fleet-aggregate.sh --nodes "$NODES" 1 100000
numalab_bin
if [ -n "$KEEP" ]; then
    DIR=$KEEP
    mkdir -p "$DIR"
else
    DIR=$(mktemp -d /tmp/numalab-fleet-bench.XXXXXX)
    trap 'rm -rf "$DIR"' EXIT
fi
if [ -z "$SOURCE" ]; then
    echo "fleet-aggregate.sh: a quick report of this machine as the template (about a minute)" >&2
    "$BIN" report --quick -o "$DIR/template" > /dev/null
    SOURCE=$DIR/template/results.json
fi
python3 - "$SOURCE" "$DIR" "$NODES" <<'PY'
import json, os, random, sys
src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
doc = json.load(open(src))
keys = doc["summary"]["key_figures"]
rng = random.Random(31)
os.makedirs(os.path.join(out, "nodes"), exist_ok=True)
planted = {"slow": [], "thp": []}
size = 0
for i in range(1, n + 1):
    name = f"cn{i:05d}"
    d = dict(doc)
    kf = {k: (v * (1 + rng.gauss(0, 0.02)) if isinstance(v, (int, float)) else v) for k, v in keys.items()}
    env = dict(doc["environment"])
    env["hostname"] = name
    if i % 500 == 0 and isinstance(kf.get("local_read_gbps"), float):
        kf["local_read_gbps"] = keys["local_read_gbps"] * 0.5
        planted["slow"].append(name)
    if i % 700 == 0:
        env["thp_enabled"] = "never"
        planted["thp"].append(name)
    d["summary"] = dict(doc["summary"], key_figures=kf)
    d["environment"] = env
    os.makedirs(os.path.join(out, "nodes", name), exist_ok=True)
    text = json.dumps(d)
    size += len(text)
    with open(os.path.join(out, "nodes", name, "results.json"), "w") as f:
        f.write(text)
json.dump(planted, open(os.path.join(out, "planted.json"), "w"))
print(f"fleet-aggregate.sh: wrote {n} nodes, {size / 2**20:.0f} MiB of results.json ({size / n / 1024:.0f} KiB each)", file=sys.stderr)
PY
# planted.json is not the fleet's: move it aside before summarize claims the directory.
mv "$DIR/planted.json" "$DIR.planted.json"
python3 - "$BIN" "$DIR" "$NODES" "$DIR.planted.json" <<'PY'
import json, resource, subprocess, sys, time
bin, d, n, planted = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.load(open(sys.argv[4]))
t = time.monotonic()
r = subprocess.run([bin, "fleet", "summarize", d, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.monotonic() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB -> GiB
if r.returncode not in (0, 3):
    sys.exit(f"fleet-aggregate.sh: numalab fleet summarize failed ({r.returncode}): {r.stderr.decode()[-500:]}")
f = json.loads(r.stdout)
slow = sorted(o["node"] for x in f["figures"] if x["name"] == "local_read_gbps" for o in x["outliers"])
thp = sorted(nd["name"] for nd in f["nodes"] if nd["settings"].get("thp_enabled") == "never")
judged = sorted(nd["name"] for nd in f["nodes"] if nd["verdict"] != "conforms")
print(f"nodes: {f['nodes_total']} ({f['reported']} reported)")
print(f"time: {wall:.1f} s (target 60 s: ratio {wall / 60:.2f})")
print(f"peak memory: {rss:.3f} GiB (target 1 GiB: ratio {rss:.2f})")
print(f"planted slow nodes found: {len(set(slow) & set(planted['slow']))} of {len(planted['slow'])}; other bandwidth outliers: {len(set(slow) - set(planted['slow']))}")
print(f"planted THP nodes found: {len(set(thp) & set(planted['thp']))} of {len(planted['thp'])}")
print(f"nodes judged not conforming: {len(judged)} (planted: {len(set(planted['slow']) | set(planted['thp']))})")
PY
rm -f "$DIR.planted.json"
