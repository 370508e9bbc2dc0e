#!/usr/bin/env bash
# What `numalab profile` costs a program at its default rate, on this machine, in one run:
# the test program of known truth (crates/numalab-preload/tests/programs/profile_truth.c, one
# thread per CPU, at full size) and a real program from Debian (`xz -T2` compressing generated
# data), each run plain and under `numalab profile`, alternated (plain, profiled, then the
# other order) for several rounds. Prints a Markdown table of the median wall times, the
# overhead ratio (profiled / plain; target <= 1.03) with the spread of the rounds, whether the
# program's output was the same, and "targets met: X of Y".
# A report, not a test: exits 0 when a target is missed, non-zero only when it cannot measure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/profile-overhead.sh [--rounds N] [--bin PATH]
  --rounds N       rounds of each workload (default: 5)
  --bin PATH       measure this numalab binary (its libnumalab_preload.so beside it)
EOF2
}
ROUNDS=5 BIN=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --bin) BIN=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "profile-overhead.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
case "$ROUNDS" in ''|*[!0-9]*|0) echo "profile-overhead.sh: --rounds takes a whole number from 1" >&2; exit 2 ;; esac
numalab_bin
BIN=$(realpath "$BIN")
if [ ! -f "$(dirname "$BIN")/libnumalab_preload.so" ]; then
    echo "profile-overhead.sh: no libnumalab_preload.so beside $BIN (cargo build --release builds it)" >&2
    exit 1
fi
if ! command -v xz >/dev/null; then
    echo "profile-overhead.sh: apt-get install xz-utils" >&2
    apt-get install -y -qq --no-install-recommends xz-utils >/dev/null
fi
work=$(mktemp -d /tmp/numalab-profile-overhead.XXXXXX)
trap 'rm -rf "$work"' EXIT
gcc -O2 -g -pthread -o "$work/truth" crates/numalab-preload/tests/programs/profile_truth.c
# 96 MiB of data xz works at: text-like, partly repetitive, partly random.
python3 - "$work/data" <<'PY'
import os, random, sys
r = random.Random(42)
words = [bytes(r.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 9))) for _ in range(4000)]
with open(sys.argv[1], "wb") as f:
    while f.tell() < 96 << 20:
        line = b" ".join(r.choice(words) for _ in range(r.randint(5, 15)))
        f.write(line + b"\n" + (os.urandom(16).hex().encode() + b"\n" if r.random() < 0.1 else b""))
PY

# name|command (run in $work; its stdout is compared between plain and profiled)
workloads=(
    "profile_truth, $(nproc) threads, 1500 passes|./truth 1500"
    "xz -T2 -6, 96 MiB|xz -T2 -6 -c data"
)
echo "numalab profile overhead at the default rate: $(nproc) CPUs, $ROUNDS rounds, $BIN"
echo
echo "| workload | plain s (median) | profiled s (median) | ratio | ratio range over rounds | samples (median) | same output | target | met |"
echo "|---|---:|---:|---:|---|---:|---|---|---|"
met=0 total=0
for w in "${workloads[@]}"; do
    IFS='|' read -r name cmd <<< "$w"
    : > "$work/times"
    for round in $(seq 1 "$ROUNDS"); do
        for mode in plain profiled; do
            [ $((round % 2)) -eq 0 ] && mode=$([ "$mode" = plain ] && echo profiled || echo plain)
            rm -rf "$work/prof"
            start=$(date +%s.%N)
            if [ "$mode" = plain ]; then
                (cd "$work" && sh -c "$cmd" > "$work/out.$mode")
            else
                (cd "$work" && "$BIN" profile -o "$work/prof" -- sh -c "$cmd" > "$work/out.$mode" 2>/dev/null)
            fi
            end=$(date +%s.%N)
            samples=0
            if [ "$mode" = profiled ]; then
                samples=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples"])' "$work/prof/profile.json")
                # The profile's text follows the program's output: keep the program's.
                python3 - "$work/out.profiled" <<'PY'
import sys
p = sys.argv[1]
b = open(p, "rb").read()
i = b.rfind(b"profile of: ")
open(p, "wb").write(b[:i] if i >= 0 else b)
PY
            fi
            # Addresses differ from run to run (ASLR): compare the rest.
            same=$(cmp -s <(grep -av 0x "$work/out.plain" 2>/dev/null) <(grep -av 0x "$work/out.profiled" 2>/dev/null) && echo yes || echo no)
            echo "$round $mode $start $end $samples $same" >> "$work/times"
        done
    done
    row=$(python3 - "$work/times" "$name" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
t = {"plain": [], "profiled": []}
ratio_by_round = {}
samples = []
same = True
for r, mode, s, e, n, eq in rows:
    d = float(e) - float(s)
    t[mode].append(d)
    ratio_by_round.setdefault(r, {})[mode] = d
    if mode == "profiled":
        samples.append(int(n))
        same = same and eq == "yes"
rs = sorted(v["profiled"] / v["plain"] for v in ratio_by_round.values() if len(v) == 2)
p, q = statistics.median(t["plain"]), statistics.median(t["profiled"])
ratio = q / p
ok = ratio <= 1.03 and same
print(f"| {sys.argv[2]} | {p:.3f} | {q:.3f} | {ratio:.3f} | {rs[0]:.3f}–{rs[-1]:.3f} | {int(statistics.median(samples))} | {'yes' if same else 'NO'} | <= 1.03 | {'yes' if ok else 'no'} |")
print("MET" if ok else "MISSED")
PY
)
    echo "$row" | head -1
    total=$((total + 1))
    [ "$(echo "$row" | tail -1)" = MET ] && met=$((met + 1))
done
echo
echo "targets met: $met of $total"
