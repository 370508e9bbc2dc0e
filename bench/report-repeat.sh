#!/usr/bin/env bash
# Do consecutive reports of this machine agree? Runs `numalab report` N times in a row (the
# default mode unless --mode says otherwise) and prints, per key figure, each run's value with
# its 95% interval (results.json `summary.key_intervals`: the measurement's own, from its
# repetitions within that run, widened by the host's drift over that run), the spread over the runs (highest over lowest), and whether the
# intervals of all runs share a point ("agree"). Beside it, per run, what the host did while it
# ran: the share of CPU time the hypervisor took (steal, from /proc/stat), the load average, and
# the drift the report's own looks at the host found (results.json `drift`: docs/report.md),
# since a shared machine whose speed drifts between runs moves every figure at once, beyond
# intervals that only see one run's repetitions. It also keeps `numalab compare` of the first two
# runs in the log directory. A report, not a test: it exits non-zero only when it cannot measure
# (a report failed, bad option). See bench/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/report-repeat.sh [--runs N] [--mode quick|default|full] [--bin PATH] [--log-dir DIR]
  --runs N        consecutive reports (2 to 10; default: 2)
  --mode MODE     quick, default or full (default: default)
  --bin PATH      measure this numalab binary instead of building target/release/numalab
  --log-dir DIR   keep every report there (default: a new /tmp/numalab-report-repeat.*)
EOF2
}
RUNS=2 MODE=default BIN="" LOG_DIR=""
bench_options report-repeat.sh "runs=RUNS mode=MODE bin=BIN log-dir=LOG_DIR" "$@"
bench_whole report-repeat.sh --runs "$RUNS" 2 10
case "$MODE" in
    quick) mode_args=(--quick) ;;
    default) mode_args=() ;;
    full) mode_args=(--full) ;;
    *)
        echo "report-repeat.sh: --mode '$MODE': valid: quick, default, full" >&2
        exit 2
        ;;
esac
numalab_bin
LOG_DIR=${LOG_DIR:-$(mktemp -d /tmp/numalab-report-repeat.XXXXXX)}
mkdir -p "$LOG_DIR"
# The cpu line's fields: user nice system idle iowait irq softirq steal.
cpu_jiffies() { awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8+$9, $9}' /proc/stat; }
echo "numalab report, $RUNS consecutive $MODE runs on $(nproc) CPUs; reports in $LOG_DIR"
for run in $(seq 1 "$RUNS"); do
    dir="$LOG_DIR/run$run"
    rm -rf "$dir"
    read -r total0 steal0 < <(cpu_jiffies)
    start=$(date +%s.%N)
    if ! "$BIN" report "${mode_args[@]}" -o "$dir" > "$dir.out" 2> "$dir.err"; then
        # Exit 3 (a placement did not verify) still measured every figure.
        [ -f "$dir/results.json" ] || {
            echo "report-repeat.sh: run $run failed: $(tail -1 "$dir.err")" >&2
            exit 1
        }
    fi
    end=$(date +%s.%N)
    read -r total1 steal1 < <(cpu_jiffies)
    load=$(cut -d' ' -f1 /proc/loadavg)
    python3 -c "import sys; t, s = int(sys.argv[2]) - int(sys.argv[1]), int(sys.argv[4]) - int(sys.argv[3]); print(f'{float(sys.argv[6]) - float(sys.argv[5]):.1f} {100 * s / max(t, 1):.2f} {sys.argv[7]}')" \
        "$total0" "$total1" "$steal0" "$steal1" "$start" "$end" "$load" > "$dir.host"
done
"$BIN" compare "$LOG_DIR/run1/results.json" "$LOG_DIR/run2/results.json" > "$LOG_DIR/compare-1-2.txt" 2>&1 || true
python3 - "$LOG_DIR" "$RUNS" <<'PY'
import json, sys
log, runs = sys.argv[1], int(sys.argv[2])
docs = [json.load(open(f"{log}/run{r}/results.json")) for r in range(1, runs + 1)]
hosts = [open(f"{log}/run{r}.host").read().split() for r in range(1, runs + 1)]
print()
def drift(d, kind):
    e = (d.get("drift") or {}).get(kind)
    return f"±{100 * e['rel_half_width']:.1f}%" if e else "-"
print("| run | wall s | steal % of CPU time | load average at the end | looks at the host | drift: latency | one thread | two threads | core to core |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r, ((wall, steal, load), d) in enumerate(zip(hosts, docs), 1):
    looks = len((d.get("drift") or {}).get("probes", []))
    kinds = " | ".join(drift(d, k) for k in ("latency", "bandwidth", "pair", "c2c"))
    print(f"| {r} | {wall} | {steal} | {load} | {looks} | {kinds} |")
print()
keys = [k for k, v in docs[0]["summary"]["key_figures"].items()
        if v is not None and k != "compared_threads"
        and all(d["summary"]["key_figures"].get(k) is not None for d in docs)]
head = " | ".join(f"run {r}" for r in range(1, runs + 1))
print(f"| key figure | {head} | highest / lowest | intervals agree |")
print("|---|" + "---:|" * runs + "---:|---|")
agree = with_ci = 0
for k in keys:
    vals = [d["summary"]["key_figures"][k] for d in docs]
    cis = [d["summary"].get("key_intervals", {}).get(k) for d in docs]
    cells = []
    for v, ci in zip(vals, cis):
        cells.append(f"{v:.4g}" + (f" [{ci[0]:.4g}–{ci[1]:.4g}]" if ci else ""))
    lo, hi = min(vals), max(vals)
    spread = f"{hi / lo:.3f}" if lo > 0 else "-"
    if all(cis):
        with_ci += 1
        ok = max(c[0] for c in cis) <= min(c[1] for c in cis)
        agree += ok
        verdict = "yes" if ok else "NO"
    else:
        verdict = "no interval"
    print(f"| {k} | " + " | ".join(cells) + f" | {spread} | {verdict} |")
print()
print(f"key figures whose intervals agree over {runs} runs: {agree} of {with_ci} with intervals"
      f" ({len(keys) - with_ci} without one)")
PY
echo "numalab compare of runs 1 and 2: $LOG_DIR/compare-1-2.txt"
