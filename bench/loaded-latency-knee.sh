#!/usr/bin/env bash
# How stable is the loaded-latency knee between runs on this machine? Runs `numalab
# loaded-latency --json` (the default ladder and mixes, every usable CPU but the chase's
# injecting) N times and prints, per run and mix, the idle latency, where the knee lies (the
# total memory bandwidth at which the latency, interpolated between steps, reaches 1.10 x idle:
# `knee_total_gbps`) and the knee step's own injected bandwidth (the rule before it), then per
# mix the spread of each over the runs (highest over lowest). The knee is "stable" when every
# run found one and they lie within 10% of each other, "unstable" when every run found one and
# they do not, and "cannot tell" when some run found none (the injectors did not load memory
# enough: a machine with few CPUs, or one shared with other work).
# A report, not a test: it exits non-zero only when it cannot measure. See bench/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/loaded-latency-knee.sh [--runs N] [--bin PATH] [-- OPTIONS...]
  --runs N     runs of the whole experiment (default: 3)
  --bin PATH   measure this numalab binary instead of building target/release/numalab
  OPTIONS      passed to every `numalab loaded-latency` (e.g. --mix read --budget-each 0.5)
EOF2
}
RUNS=3 BIN=""
bench_options loaded-latency-knee.sh "runs=RUNS bin=BIN --" "$@"
set -- "${BENCH_ARGS[@]}"
bench_whole loaded-latency-knee.sh --runs "$RUNS" 1
numalab_bin
if [ "$(nproc)" -lt 2 ]; then
    echo "loaded-latency-knee.sh: needs 2 CPUs (one to chase, one to inject); this machine has $(nproc)" >&2
    exit 1
fi
work=$(mktemp -d /tmp/numalab-ll-knee.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "loaded-latency knee over $RUNS runs: $BIN loaded-latency $*"
for run in $(seq 1 "$RUNS"); do
    "$BIN" loaded-latency --json "$@" > "$work/run$run.json" 2> "$work/run$run.err" || {
        echo "loaded-latency-knee.sh: run $run failed: $(tail -1 "$work/run$run.err")" >&2
        exit 1
    }
done
python3 - "$work" "$RUNS" <<'PY'
import json, sys
work, runs = sys.argv[1], int(sys.argv[2])
by_mix = {}
print()
print("| run | mix | idle ns | knee: total GB/s at 1.10 x idle | knee step: injected GB/s | highest injected GB/s |")
print("|---:|---|---:|---:|---:|---:|")
for r in range(1, runs + 1):
    v = json.load(open(f"{work}/run{r}.json"))
    for c in v["mixes"]:
        t, g = c.get("knee_total_gbps"), c.get("knee_injected_gbps")
        by_mix.setdefault(c["mix"], []).append((t, g))
        show = lambda x: "none" if x is None else f"{x:.2f}"
        print(f"| {r} | {c['mix']} | {c['idle']['latency_ns']['median']:.1f} | {show(t)} | {show(g)} | {c['max_injected_gbps']:.2f} |")
print()
print("| mix | runs with a knee | knee spread (highest / lowest) | knee-step spread (the rule before) | stable within 10% |")
print("|---|---:|---:|---:|---|")
for mix, ks in by_mix.items():
    found = [k for k in ks if k[0] is not None]
    if len(found) < len(ks) or not found:
        spread = step = "–"
        verdict = "cannot tell"
    else:
        t = [k[0] for k in found]
        g = [k[1] for k in found]
        spread = f"{max(t) / min(t):.3f}"
        step = f"{max(g) / min(g):.3f}"
        verdict = "yes" if max(t) <= 1.10 * min(t) else "no"
    print(f"| {mix} | {len(found)} of {len(ks)} | {spread} | {step} | {verdict} |")
PY
