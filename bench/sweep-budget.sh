#!/usr/bin/env bash
# How well `numalab sweep --budget` keeps its budget, on this machine, in one run: the
# two-thread sweep of the tests (`sweep --thread-counts 2 --size 16M --budget B --json`) for each
# budget (default 1 and 4 s; with 1 s it runs a subset covering every hop class, with 4 s
# every class), a few times each, timed from the outside; prints a Markdown table of the
# sweep's own elapsed time / budget and the wall time (process start to exit) / budget per
# run, and "targets met: X of Y" for the targets the tests used to assert: elapsed <= 1.10 x
# budget, and wall <= budget + 2 s (start-up and output around the sweep stay small).
# A report, not a test: exits 0 when a target is missed, non-zero only when it cannot
# measure (build failed, bad option, a sweep that failed). See bench/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/sweep-budget.sh [--budgets LIST] [--runs N] [--bin PATH] [--log-dir DIR]
  --budgets LIST   comma-separated budgets in seconds (default: 1,4)
  --runs N         runs of each budget (default: 3)
  --bin PATH       measure this numalab binary instead of building target/release/numalab
  --log-dir DIR    keep every run's JSON there (default: a new /tmp/numalab-sweep-bench.*)
EOF2
}
BUDGETS="1,4" RUNS=3 BIN="" LOG_DIR=""
bench_options sweep-budget.sh "budgets=BUDGETS runs=RUNS bin=BIN log-dir=LOG_DIR" "$@"
bench_whole sweep-budget.sh --runs "$RUNS" 1
numalab_bin
LOG_DIR=${LOG_DIR:-$(mktemp -d /tmp/numalab-sweep-bench.XXXXXX)}
mkdir -p "$LOG_DIR"
echo "numalab sweep budget check: $(nproc) CPUs, logs in $LOG_DIR"
echo
echo "| budget s | run | cases run / classes | hop classes run | elapsed s | elapsed / budget | wall s | wall / budget | target | met |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
met=0 total=0
IFS=, read -r -a budgets <<< "$BUDGETS"
for b in "${budgets[@]}"; do
    for run in $(seq 1 "$RUNS"); do
        out="$LOG_DIR/budget-$b-run-$run"
        start=$(date +%s.%N)
        "$BIN" sweep --thread-counts 2 --size 16M --budget "$b" --json > "$out.json" 2> "$out.err"
        end=$(date +%s.%N)
        python3 - "$out.json" "$start" "$end" "$b" "$run" <<'PY' > "$out.row"
import json, sys
path, start, end, budget, run = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
d = json.load(open(path))
wall = end - start
elapsed = d["elapsed_s"]
r = d["runs"][0]
targets = [
    ("elapsed <= 1.10 x budget", elapsed <= 1.10 * budget),
    ("wall <= budget + 2 s", wall <= budget + 2.0),
]
for name, ok in targets:
    print(f"| {budget:g} | {run} | {r['cases_run']} / {r['classes']} | {r['hop_classes_run']} / {r['hop_classes']} "
          f"| {elapsed:.2f} | {elapsed / budget:.3f} | {wall:.2f} | {wall / budget:.3f} | {name} | {'yes' if ok else 'NO'} |")
PY
        cat "$out.row"
        total=$((total + $(wc -l < "$out.row")))
        met=$((met + $(grep -c '| yes |$' "$out.row" || true)))
    done
done
echo
echo "targets met: $met of $total"
