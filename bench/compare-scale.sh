#!/usr/bin/env bash
# Whether `numalab compare A.json B.json` scales linearly, on this machine, in one run
# (issue 37 item 5): generates pairs of results of growing size (a sweep-shaped result
# with N runs, default 20k, 80k and 160k, a few of whose names repeat) and pairs of
# profiles (profile.json of the current schema, default ~50 and ~100 MB each), runs
# `numalab compare A B` on each pair under /usr/bin/time, and prints a Markdown table of
# wall time, peak RSS, peak RSS / input (A and B together) and time per element (per run
# of a result, per region of a profile), so that linearity shows in one table: time per
# element and RSS / input stay flat as the inputs grow. Ends with "targets met: X of Y"
# for: RSS / input <= 8, and time per element of the largest input <= 2 x the smallest's
# (of its kind). A report, not a test: exits 0 when a target is missed, non-zero only when
# it cannot measure (build failed, bad option, a compare that failed). The targets are this
# script's: peak RSS / input was 11 to 18 and time per run grew with the runs before.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/compare-scale.sh [--elements LIST] [--profile-mb LIST] [--timeout S]
                                   [--bin PATH] [--log-dir DIR]
  --elements LIST    comma-separated runs per result (default: 20000,80000,160000)
  --profile-mb LIST  comma-separated sizes of each profile in MB (default: 50,100)
  --timeout S        give up on one compare after S seconds (default: 600)
  --bin PATH         measure this numalab binary instead of building target/release/numalab
  --log-dir DIR      keep the inputs and outputs there (default: a new
                     /tmp/numalab-compare-scale.*, removed at the end)
EOF2
}
ELEMENTS="20000,80000,160000" PROFILE_MB="50,100" TIMEOUT=600 BIN="" LOG_DIR="" KEEP=0
bench_options compare-scale.sh "elements=ELEMENTS profile-mb=PROFILE_MB timeout=TIMEOUT bin=BIN log-dir=LOG_DIR log-dir=KEEP:1" "$@"
for n in ${ELEMENTS//,/ }; do bench_whole compare-scale.sh --elements "$n" 1; done
for n in ${PROFILE_MB//,/ }; do bench_whole compare-scale.sh --profile-mb "$n" 1; done
bench_whole compare-scale.sh --timeout "$TIMEOUT" 1
[ -x /usr/bin/time ] || { echo "compare-scale.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
numalab_bin
LOG_DIR=${LOG_DIR:-$(mktemp -d /tmp/numalab-compare-scale.XXXXXX)}
mkdir -p "$LOG_DIR"
[ "$KEEP" = 1 ] || trap 'rm -rf "$LOG_DIR"' EXIT
# The schema versions this numalab writes, from its source: the inputs stay readable.
result_version=$(sed -n 's/^pub const RESULT_SCHEMA_VERSION: &str = "\(.*\)";/\1/p' crates/numalab-cli/src/output.rs)
profile_version=$(sed -n 's/^pub const SCHEMA_VERSION: &str = "\(.*\)";/\1/p' crates/numalab/src/profile/mod.rs)
[ -n "$result_version" ] && [ -n "$profile_version" ] || { echo "compare-scale.sh: cannot find the schema versions in the source" >&2; exit 1; }
echo "numalab compare at scale: $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), $BIN, inputs in $LOG_DIR$([ "$KEEP" = 1 ] || echo ' (removed at the end)')"

# gen.py KIND SIZE SIDE OUT: a sweep-shaped result of SIZE runs (every 1000th run repeats
# its neighbour's name, as a sweep's runs under several backgrounds do), or a profile of
# about SIZE MB (regions modelled on a real profile's: an 8-frame stack, a 2-node access
# matrix, pages over time, first touches). Side b differs from a in its figures. Prints
# the elements written.
cat > "$LOG_DIR/gen.py" <<'PY'
import json, sys
kind, size, side, out, result_version, profile_version = sys.argv[1:7]
size = int(size)
shift = 1.0 if side == "a" else 1.07
def fig(m):
    return {"median": m, "best": m * 1.01, "min": m * 0.98, "max": m * 1.02, "spread": 0.01, "rel_ci": 0.004}
with open(out, "w") as f:
    if kind == "result":
        f.write(json.dumps({"command": "sweep", "schema_version": result_version,
                            "environment": {"kernel": "6.1.0", "hostname": f"host-{side}"}})[:-1])
        f.write(', "sweep": {"runs": [')
        for i in range(size):
            name = i - 1 if i % 1000 == 1 else i
            run = {"workload": f"w{name % 97}", "threads": name, "policy": "local",
                   "gbps": fig(10.0 + (i % 13) * shift), "ns": fig(90.0 + (i % 7) * shift),
                   "samples": [1.0, 2.0, 3.0]}
            f.write(("," if i else "") + json.dumps(run))
        f.write("]}}")
        print(size)
    else:
        target = size * 1_000_000
        head = {"schema_version": profile_version, "command": ["./app"], "pid": 1,
                "rate": 1000, "min_bytes": 65536, "page_size": 4096, "pages_armed": 0,
                "samples": 0, "cost": None, "sampled_for_s": 10.0, "unattributed": 0,
                "remote_share": None}
        f.write(json.dumps(head)[:-1] + ', "regions": [')
        written, i = f.tell(), 0
        while written < target:
            s = 100 + i % 900
            remote = int(s * (0.2 if side == "a" else 0.2 + 0.1 * (i % 3 == 0)))
            r = {"kind": "heap" if i % 5 else "mmap",
                 "site": f"alloc_{i} app.c:{i}", "sampled": True, "object": None, "thread": None,
                 "stack": [f"alloc_{i} app.c:{i}"] + [f"frame_{i % 50}_{k} (libapp.so+0x{i * 64 + k:x})" for k in range(7)],
                 "allocations": 1 + i % 4, "bytes": 1 << 20, "sampled_allocations": 0,
                 "first_address": 0x7f0000000000 + i * 4096, "samples": s, "reads": s - s // 4,
                 "writes": s // 4, "unknown_access": 0,
                 "accesses": {"0": {"0": s - remote, "1": remote // 2}, "1": {"0": remote - remote // 2}},
                 "remote_share": remote / s, "distance_ratio": 1.0 + remote / s, "latency_cost": None,
                 "pages_by_node": {"0": 200, "1": 56}, "threads": {str(100 + t): s // 4 for t in range(4)},
                 "placed_by_thread": {str(100 + t): [s // 8, s // 8] for t in range(4)},
                 "first_touch": {"samples": 3, "writes": 3, "threads": {"100": 3}, "nodes": {"0": 3}},
                 "pages_over_time": [{"at_s": 0.5 * k, "pages_by_node": {"0": 20 * k, "1": 5 * k}} for k in range(10)]}
            text = ("," if i else "") + json.dumps(r)
            f.write(text)
            written += len(text)
            i += 1
        f.write('], "threads": [], "diagnoses": [], "warnings": []}')
        print(i)
PY

echo
echo "| input | elements | A + B MB | wall s | peak RSS MB | RSS / input | µs per element | exit |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
rows="$LOG_DIR/rows.tsv"
: > "$rows"
failed=0
measure() { # KIND SIZE LABEL
    local kind=$1 size=$2 label=$3 a="$LOG_DIR/$1-$2-a.json" b="$LOG_DIR/$1-$2-b.json" n rc=0
    n=$(python3 "$LOG_DIR/gen.py" "$kind" "$size" a "$a" "$result_version" "$profile_version")
    python3 "$LOG_DIR/gen.py" "$kind" "$size" b "$b" "$result_version" "$profile_version" > /dev/null
    local bytes=$(( $(stat -c %s "$a") + $(stat -c %s "$b") ))
    /usr/bin/time -f '%e %M' -o "$LOG_DIR/$kind-$size.time" timeout "$TIMEOUT" \
        "$BIN" compare "$a" "$b" > "$LOG_DIR/$kind-$size.out" 2> "$LOG_DIR/$kind-$size.err" || rc=$?
    local wall rss_kb
    read -r wall rss_kb < <(tail -n1 "$LOG_DIR/$kind-$size.time")
    # A row of the table; the kind and the two ratios go to rows.tsv for the summary.
    python3 - "$rows" "$kind" "$label" "$n" "$bytes" "$wall" "$rss_kb" "$rc" <<'PY'
import sys
rows, kind, label = sys.argv[1:4]
n, size, wall, rss, rc = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]) * 1024, sys.argv[8]
print(f"| {label} | {n} | {size / 1e6:.1f} | {wall:.2f} | {rss / 1e6:.0f} | {rss / size:.2f} | {wall / n * 1e6:.1f} | {rc} |")
with open(rows, "a") as f:
    f.write(f"{kind}\t{label}\t{rss / size}\t{wall / n}\n")
PY
    if [ "$rc" -ne 0 ]; then
        failed=1
        echo "compare-scale.sh: numalab compare failed on $label (exit $rc): $(head -c 400 "$LOG_DIR/$kind-$size.err")" >&2
    fi
    rm -f "$a" "$b"
}
IFS=, read -r -a sizes <<< "$ELEMENTS"
for n in "${sizes[@]}"; do measure result "$n" "result, $n runs"; done
IFS=, read -r -a sizes <<< "$PROFILE_MB"
for mb in "${sizes[@]}"; do measure profile "$mb" "profile, ~$mb MB each"; done
echo
python3 - "$rows" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
met = total = 0
lines = []
for kind in ("result", "profile"):
    mine = [r for r in rows if r[0] == kind]
    for r in mine:
        total += 1
        ok = float(r[2]) <= 8.0
        met += ok
        lines.append(f"{r[1]}: peak RSS / input {float(r[2]):.2f} (target <= 8): {'yes' if ok else 'NO'}")
    if len(mine) >= 2:
        total += 1
        ratio = float(mine[-1][3]) / float(mine[0][3])
        ok = ratio <= 2.0
        met += ok
        lines.append(f"{kind}s: time per element, largest / smallest {ratio:.2f} (target <= 2; linear: about 1): {'yes' if ok else 'NO'}")
print("\n".join(lines))
print()
print(f"targets met: {met} of {total}")
PY
exit "$failed"
