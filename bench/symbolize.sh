#!/usr/bin/env bash
# How fast `numalab profile` names code addresses, in process (crates/numalab/src/profile/
# elf_index.rs: each object read once, its symbols sorted, its DWARF line table loaded on the
# first line asked for), against binutils' `addr2line -f -C` given the same addresses in one
# run (what numalab ran before, once per object): N addresses spread over the functions of an
# ELF object (default: node, 10^5 symbols), each tool run ROUNDS times, alternated. Prints a
# Markdown table of the median wall times, the ratio addr2line / numalab (above 1: numalab is
# faster), and how many function names the two agree on (they differ where no symbol holds an
# address, which numalab says and addr2line names after the nearest symbol before it, and where
# code was inlined: addr2line names the inlined function, numalab the one whose symbol holds it).
# A report, not a test: exits 0 whatever the ratio, non-zero only when it cannot measure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/symbolize.sh [--object PATH] [--addresses N] [--rounds N] [--bin PATH]
  --object PATH    the ELF object to name addresses of (default: node, else numalab itself)
  --addresses N    addresses named per run (default: 2000)
  --rounds N       runs of each tool (default: 5)
  --bin PATH       the name_addresses example to measure (default: built with --release)
EOF2
}
OBJECT="" N=2000 ROUNDS=5 BIN=""
bench_options symbolize.sh "object=OBJECT addresses=N rounds=ROUNDS bin=BIN" "$@"
bench_whole symbolize.sh --addresses "$N" 1
bench_whole symbolize.sh --rounds "$ROUNDS" 1
for tool in addr2line nm; do
    command -v "$tool" >/dev/null || { echo "symbolize.sh: $tool missing (apt-get install binutils): it is the peer" >&2; exit 1; }
done
if [ -z "$BIN" ]; then
    if [ -d "$HOME/.cargo/bin" ]; then export PATH="$HOME/.cargo/bin:$PATH"; fi
    cargo build --release --locked -q -p numalab --example name_addresses
    BIN=target/release/examples/name_addresses
fi
if [ -z "$OBJECT" ]; then
    OBJECT=$(command -v node || true)
    [ -n "$OBJECT" ] || OBJECT=$BIN
fi
OBJECT=$(realpath "$OBJECT")
work=$(mktemp -d /tmp/numalab-symbolize.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The middle of N functions spread evenly over the object's sized text symbols.
nm --defined-only -S "$OBJECT" 2>/dev/null | awk '$3 ~ /^[tTwW]$/ && NF >= 4 { print $1, $2 }' \
    | sort -u > "$work/functions"
total=$(wc -l < "$work/functions")
[ "$total" -gt 0 ] || { echo "symbolize.sh: $OBJECT has no sized function symbols" >&2; exit 1; }
awk -v n="$N" -v total="$total" 'BEGIN { step = total / n; if (step < 1) step = 1; next_i = 0 }
    NR - 1 >= next_i { print; next_i += step }' "$work/functions" | head -n "$N" \
    | while read -r value size; do printf '%x\n' $((16#$value + 16#$size / 2)); done > "$work/addresses"
n=$(wc -l < "$work/addresses")
now() { date +%s.%N; }
: > "$work/times"
for r in $(seq "$ROUNDS"); do
    t0=$(now); addr2line -f -C -e "$OBJECT" < "$work/addresses" > "$work/binutils.txt"; t1=$(now)
    "$BIN" "$OBJECT" < "$work/addresses" > "$work/numalab.txt" 2>/dev/null; t2=$(now)
    awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { print b - a, c - b }' >> "$work/times"
done
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
b=$(awk '{ print $1 }' "$work/times" | median)
o=$(awk '{ print $2 }' "$work/times" | median)
# Function names: binutils prints name, location pairs; numalab one line each.
awk 'NR % 2 == 1' "$work/binutils.txt" | sed 's/ \[clone .*\]$//' > "$work/b.names"
sed -E 's/ \([^()]*\)$//; s/ [^ ]+:[0-9]+$//; s/ \[clone .*\]$//' "$work/numalab.txt" > "$work/o.names"
agree=$(paste -d '\t' "$work/b.names" "$work/o.names" | awk -F '\t' '$1 == $2' | wc -l)
nosym=$(grep -c ', no symbol' "$work/numalab.txt" || true)
echo "| object | addresses | addr2line -f -C s | numalab in process s | ratio addr2line / numalab | function names agreeing | no symbol (numalab) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
printf '| %s | %d | %.3f | %.3f | %.2f | %d of %d | %d |\n' "$(basename "$OBJECT")" "$n" "$b" "$o" \
    "$(awk -v b="$b" -v o="$o" 'BEGIN { print b / o }')" "$agree" "$n" "$nosym"
echo
echo "medians of $ROUNDS alternated rounds; numalab's time includes reading and indexing the object"
