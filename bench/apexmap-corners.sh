#!/usr/bin/env bash
# Apex-MAP's two extreme corners against the engine's own figures (issue 4's acceptance, timed
# here rather than in the tests, which these shared machines make noisy): (alpha 1, L 1) is a
# dependent random access over the whole buffer, so its ns per access should be the random
# pointer chase's on the same buffer; (alpha 0.001, L 65536) reads one 512 KiB block 99.7% of
# the time, so its GB/s should be the read kernel's on a 512 KiB buffer. Each side is run
# TRIES times, interleaved, on one pinned CPU; each try pairs the two sides' bests (the STREAM
# convention), so a slow phase of the machine moves both. Prints each try and, per corner,
# the median of the paired ratios and the share of tries within 10%. Target: the median
# paired ratio within [0.9, 1.1]. A report, not a test: it exits non-zero only when it cannot
# measure. See bench/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/apexmap-corners.sh [--tries N] [--cpu CPU] [--bin PATH] [--log-dir DIR]
  --tries N      tries of each side, interleaved (default: 10)
  --cpu CPU      the CPU that runs both sides (default: the first allowed CPU)
  --bin PATH     measure this numalab binary instead of building target/release/numalab
  --log-dir DIR  keep every run's JSON there (default: a new /tmp/numalab-apexmap-bench.*)
EOF2
}
TRIES=10 CPU="" BIN="" LOG_DIR=""
bench_options apexmap-corners.sh "tries=TRIES cpu=CPU bin=BIN log-dir=LOG_DIR" "$@"
bench_whole apexmap-corners.sh --tries "$TRIES" 1 1000
numalab_bin
LOG_DIR=${LOG_DIR:-$(mktemp -d /tmp/numalab-apexmap-bench.XXXXXX)}
mkdir -p "$LOG_DIR"
# Both sides default to the first allowed CPU (one compact thread for the kernel).
CPU_OPT=() BW_CPUS=()
if [ -n "$CPU" ]; then CPU_OPT=(--cpu "$CPU") BW_CPUS=(--cpus "$CPU"); fi
RULE=(--warmup 1 --min-reps 5 --max-reps 1000 --target-ci 1)

# The latency corner: 128 MiB, THP on both sides (the chase's --huge).
for i in $(seq 1 "$TRIES"); do
    "$BIN" bench latency --pattern random --size 128M --huge "${CPU_OPT[@]}" "${RULE[@]}" \
        --budget-each 0.6 --json > "$LOG_DIR/chase-$i.json"
    "$BIN" apexmap --alphas 1 --ls 1 --size 128M --thp on "${CPU_OPT[@]}" "${RULE[@]}" \
        --budget-each 0.6 --json > "$LOG_DIR/latency-corner-$i.json"
done
# The bandwidth corner: an 8 MiB buffer (16 blocks), against the read kernel on one block.
for i in $(seq 1 "$TRIES"); do
    "$BIN" apexmap --alphas 0.001 --ls 65536 --size 8M --thp on "${CPU_OPT[@]}" "${RULE[@]}" \
        --budget-each 0.2 --json > "$LOG_DIR/bandwidth-corner-$i.json"
    "$BIN" bench bandwidth --kernel read --size 512K --threads 1 "${BW_CPUS[@]}" --thp on \
        "${RULE[@]}" --budget-each 0.2 --json > "$LOG_DIR/read-$i.json"
done

python3 - "$LOG_DIR" "$TRIES" <<'PY'
import json, statistics, sys
d, tries = sys.argv[1], int(sys.argv[2])
load = lambda n: json.load(open(f"{d}/{n}.json"))
def corner(title, unit, pairs):
    print(f"\n### {title}\n\n| try | apexmap | engine | ratio |\n|---:|---:|---:|---:|")
    ratios = []
    for i, (a, e) in enumerate(pairs, 1):
        ratios.append(a / e)
        print(f"| {i} | {a:.1f} {unit} | {e:.1f} {unit} | {a / e:.3f} |")
    med = statistics.median(ratios)
    within = sum(0.9 <= r <= 1.1 for r in ratios)
    met = 0.9 <= med <= 1.1
    print(f"\nmedian paired ratio {med:.3f} (target 0.9-1.1: {'met' if met else 'MISSED'}); "
          f"{within} of {len(ratios)} tries within 10%")
    return met
lat = [(load(f"latency-corner-{i}")["points"][0]["ns"]["best"], load(f"chase-{i}")["ns"]["best"])
       for i in range(1, tries + 1)]
bw = []
for i in range(1, tries + 1):
    p = load(f"bandwidth-corner-{i}")["points"][0]
    assert p["hot99_bytes"] == 512 << 10, p["hot99_bytes"]
    bw.append((p["gbps"]["best"], load(f"read-{i}")["gbps"]["best"]))
print("# Apex-MAP's corners against the chase and the read kernel")
met = [corner("latency corner (alpha 1, L 1) vs random chase, 128 MiB", "ns", lat),
       corner("bandwidth corner (alpha 0.001, L 65536) vs read kernel on 512 KiB", "GB/s", bw)]
print(f"\ntargets met: {sum(met)} of {len(met)}; runs in {d}")
PY
