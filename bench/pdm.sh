#!/usr/bin/env bash
# How fast `numalab pdm` counts, on this machine, in one run: the study's case (the Quartet
# ring, 4 threads one per node, triad: 4^12 x 4! placements, target: exact in under 1 s) and
# the 8-node case (16amd64-8n2c, 8 threads one per node, copy: exact or sampled with 95%
# intervals of at most +-0.2 points, target: under 10 s), a few times each, timed from the
# outside (process start to exit); prints a Markdown table and "targets met: X of Y".
# A report, not a test: exits 0 when a target is missed, non-zero only when it cannot
# measure (build failed, bad option, a count that failed). See bench/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/pdm.sh [--runs N] [--bin PATH]
  --runs N         runs of each case (default: 3)
  --bin PATH       measure this numalab binary instead of building target/release/numalab
EOF2
}
RUNS=3 BIN=""
bench_options pdm.sh "runs=RUNS bin=BIN" "$@"
bench_whole pdm.sh --runs "$RUNS" 1
numalab_bin
FIX=tests/fixtures/topologies
out=$(mktemp /tmp/numalab-pdm-bench.XXXXXX)
trap 'rm -f "$out"' EXIT
echo "numalab pdm counting speed: $(nproc) CPUs"
echo
echo "| case | run | placements | exact | classes | widest 95% half-interval (points) | wall s | target | met |"
echo "|---|---:|---:|---|---:|---:|---:|---|---|"
met=0 total=0
# name|topology|kernel|target seconds
for c in "quartet triad (study)|$FIX/qemu-quartet-4n2c-ring.xml|triad|1" \
         "8 nodes x 8 threads copy|$FIX/16amd64-8n2c.xml|copy|10"; do
    IFS='|' read -r name topo kernel target <<< "$c"
    for run in $(seq 1 "$RUNS"); do
        start=$(date +%s.%N)
        "$BIN" pdm --topology "$topo" --kernel "$kernel" --json > "$out"
        end=$(date +%s.%N)
        row=$(python3 - "$out" "$start" "$end" "$target" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
target = float(sys.argv[4])
half = max(((c["interval"][1] - c["interval"][0]) / 2 * 100 for c in d["classes"] if "interval" in c), default=0.0)
ok = wall < target and (d["exact"] or half <= 0.2)
print(f'10^{d["total_placements_log10"]:.2f}|{str(d["exact"]).lower()}|{len(d["classes"])}|{half:.3f}|{wall:.3f}|{ok}')
PY
)
        IFS='|' read -r placements exact classes half wall ok <<< "$row"
        total=$((total + 1))
        if [ "$ok" = True ]; then met=$((met + 1)); mark=yes; else mark=no; fi
        echo "| $name | $run | $placements | $exact | $classes | $half | $wall | < ${target} s$( [ "$exact" = true ] || echo ', +-0.2 points') | $mark |"
    done
done
echo
echo "targets met: $met of $total"
