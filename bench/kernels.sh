#!/usr/bin/env bash
# The speed of numalab's bandwidth kernels and pointer chase on this machine, in one run:
# every kernel x every instruction set this CPU has (`numalab bench bandwidth --kernel K
# --isa ISA`, one pinned thread, SIZE per array, best of 5 samples), then the chase
# (`numalab bench latency`, random, page and stride over 1 GiB, 1 and 8 chains). Prints
# Markdown tables: GB/s of program bytes (memory bytes) per kernel and ISA, and ns per load
# with the wall time of each chase run (process start to exit: placement, prefault, chase
# build, warm-up and 5 samples). A report, not a test: it has no targets, and exits non-zero
# only when it cannot measure (build failed, bad option). See bench/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/kernels.sh [--size SIZE] [--chase-size SIZE] [--no-chase] [--bin PATH] [--log-dir DIR]
  --size SIZE        bytes per array of the bandwidth kernels (default: 400M)
  --chase-size SIZE  buffer of the pointer chase (default: 1G)
  --no-chase         leave the pointer chase out
  --bin PATH         measure this numalab binary instead of building target/release/numalab
  --log-dir DIR      keep every run's JSON there (default: a new /tmp/numalab-kernels-bench.*)
EOF2
}
SIZE=400M CHASE_SIZE=1G CHASE=1 BIN="" LOG_DIR=""
bench_options kernels.sh "size=SIZE chase-size=CHASE_SIZE no-chase=CHASE:0 bin=BIN log-dir=LOG_DIR" "$@"
numalab_bin
LOG_DIR=${LOG_DIR:-$(mktemp -d /tmp/numalab-kernels-bench.XXXXXX)}
mkdir -p "$LOG_DIR"
FIVE=(--warmup 1 --min-reps 5 --max-reps 5 --budget-each 60)

# The instruction sets this CPU has: forcing one it lacks is a one-line error (exit 2).
isas=()
for isa in avx512 avx2 sse2 neon portable; do
    if "$BIN" bench bandwidth --isa "$isa" --size 64K --warmup 0 --min-reps 1 --max-reps 1 \
        --json > /dev/null 2> "$LOG_DIR/isa-$isa.err"; then
        isas+=("$isa")
    fi
done
echo "numalab kernel speeds: $(nproc) CPUs, ISAs ${isas[*]}, logs in $LOG_DIR"
echo
echo "$SIZE per array, one thread; GB/s of program bytes (memory bytes), best of 5 samples"
echo
header="| kernel |" rule="|---|"
for isa in "${isas[@]}"; do header="$header $isa |"; rule="$rule---:|"; done
echo "$header"
echo "$rule"
for k in read read-prefetch write write-nt copy scale add triad line-read line-write random-read; do
    row="| $k |"
    for isa in "${isas[@]}"; do
        out="$LOG_DIR/bw-$k-$isa"
        if "$BIN" bench bandwidth --kernel "$k" --isa "$isa" --size "$SIZE" "${FIVE[@]}" --json \
            > "$out.json" 2> "$out.err"; then
            cell=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f (%.1f)" % (d["gbps"]["best"], d["memory_gbps"]["best"]))' "$out.json")
        else
            cell="ERROR: $(head -c 200 "$out.err" | tr '\n|' '  ')"
        fi
        row="$row $cell |"
    done
    echo "$row"
done
[ "$CHASE" = 1 ] || exit 0
echo
echo "pointer chase over $CHASE_SIZE on the first allowed CPU, 5 samples"
echo
echo "| pattern | chains | ns per dependent load (best) | ns per access, all chains (median) | wall s |"
echo "|---|---:|---:|---:|---:|"
for p in random page stride; do
    for chains in 1 8; do
        out="$LOG_DIR/chase-$p-$chains"
        start=$(date +%s.%N)
        if "$BIN" bench latency --pattern "$p" --chains "$chains" --size "$CHASE_SIZE" "${FIVE[@]}" \
            --json > "$out.json" 2> "$out.err"; then
            end=$(date +%s.%N)
            python3 - "$out.json" "$start" "$end" "$p" "$chains" <<'PY'
import json, sys
path, start, end, p, chains = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
d = json.load(open(path))
print(f"| {p} | {chains} | {d['ns']['best']:.1f} | {d['ns_per_access']:.1f} | {end - start:.1f} |")
PY
        else
            echo "| $p | $chains | ERROR: $(head -c 200 "$out.err" | tr '\n|' '  ') | | |"
        fi
    done
done
