#!/usr/bin/env bash
# Whether the price word counting puts on a watched context switch is right, on this machine,
# in one run. The library prices it from the program's own windows (the system time a switch
# takes in watched windows less what it takes in skipped ones; crates/numalab-preload/src/
# switch_cost.rs); the truth is whole runs of the same program, two threads meeting at a
# barrier (hazards.c's "barriers"), with word counting off and with every window watched
# (`--overhead 99`), at the same fixed page rate: the difference in the process's system time
# per switch (wait4's rusage), scaled from all its switches to the watched ones. Each round runs
# one of each, in alternating order. Prints a Markdown table: the rounds priced, the mean
# estimate and the mean truth (µs a watched switch, each with a 95% bootstrap interval over the
# rounds), and their ratio with its interval. The estimate leaves out what a watched thread
# costs the threads it meets (about 5 µs a switch in a C test where its own switches paid 16 µs
# more; docs/profile.md, "Context switches while words are watched"), which the whole runs
# hold: the ratio is expected below 1. The estimate is judged good when the whole interval of
# the ratio lies within 1/3 to 1.5, bad when it lies all outside, and otherwise this run cannot
# tell (DESIGN.md section 6). The host must be quiet: whether a blocked thread's CPU halts, and
# so what a switch costs, changes with the load beside it.
# A report, not a test: exits 0 when the estimate is judged bad, non-zero only when it cannot
# measure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/switch-price.sh [--rounds N] [--barriers N] [--bin PATH]
  --rounds N     rounds, each a run with word counting off and one with every window watched
                 (default: 10, about 2 s a round here; 2 to 1000)
  --barriers N   times the two threads meet in each run (default: 20000; 1000 to 10000000)
  --bin PATH     measure this numalab binary (its libnumalab_preload.so beside it)
EOF2
}
ROUNDS=10 BARRIERS=20000 BIN=""
bench_options switch-price.sh "rounds=ROUNDS barriers=BARRIERS bin=BIN" "$@"
bench_whole switch-price.sh --rounds "$ROUNDS" 2 1000
bench_whole switch-price.sh --barriers "$BARRIERS" 1000 10000000
numalab_profile_bin switch-price.sh
work=$(mktemp -d /tmp/numalab-switch-price.XXXXXX)
trap 'rm -rf "$work"' EXIT
gcc -O2 -pthread -o "$work/hazards" crates/numalab-preload/tests/programs/hazards.c

# One profile of the barrier loop; appends its profile.json's usage and word counting to
# $work/runs as one JSON line, tagged with the round and the side.
profile_once() {
    local round=$1 side=$2 words
    if [ "$side" = off ]; then words=(--word-counts off); else words=(--overhead 99); fi
    rm -rf "$work/prof"
    if ! "$BIN" profile --json --rate 20 "${words[@]}" -o "$work/prof" -- \
        "$work/hazards" barriers "$BARRIERS" >"$work/out" 2>"$work/err"; then
        echo "switch-price.sh: numalab profile failed in round $round ($side):" >&2
        tail -3 "$work/err" >&2
        exit 1
    fi
    python3 - "$work/prof/profile.json" "$round" "$side" >>"$work/runs" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
u = v["counters"]["usage"]
w = v.get("word_counting") or {}
print(json.dumps({"round": int(sys.argv[2]), "side": sys.argv[3],
                  "switches": u["voluntary_switches"] + u["involuntary_switches"],
                  "system_ns": u["system_ns"], "watched": w.get("switches", 0),
                  "price": w.get("us_per_switch")}))
PY
}

echo "switch-price.sh: $ROUNDS rounds of hazards barriers $BARRIERS, word counting off and at --overhead 99, --rate 20" >&2
for round in $(seq 1 "$ROUNDS"); do
    # Alternated, so that a drift in the host's load falls on both sides.
    if [ $((round % 2)) -eq 1 ]; then order="off on"; else order="on off"; fi
    for side in $order; do profile_once "$round" "$side"; done
done

python3 - "$work/runs" "$(git describe --always --dirty 2>/dev/null || echo unknown)" <<'PY'
import json, random, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in runs:
    by.setdefault(r["round"], {})[r["side"]] = r
pairs, unpriced = [], 0
for k in sorted(by):
    off, on = by[k]["off"], by[k]["on"]
    if on["price"] is None or on["watched"] == 0:
        unpriced += 1
        continue
    per = lambda r: r["system_ns"] / r["switches"] / 1e3
    truth = (per(on) - per(off)) * on["switches"] / on["watched"]
    pairs.append((on["price"], truth))
if len(pairs) < 2:
    print(f"switch-price.sh: {len(pairs)} of {len(by)} rounds priced; nothing to compare", file=sys.stderr)
    sys.exit(1)
mean = lambda xs: sum(xs) / len(xs)
rng = random.Random(7)
def interval(stat):
    """95% bootstrap interval of stat over the rounds (seeded: the same rounds give the same interval)."""
    vals = sorted(stat([rng.choice(pairs) for _ in pairs]) for _ in range(4000))
    return vals[int(0.025 * len(vals))], vals[int(0.975 * len(vals)) - 1]
est = lambda ps: mean([e for e, _ in ps])
tru = lambda ps: mean([t for _, t in ps])
def ratio(ps):
    t = tru(ps)
    return est(ps) / t if t > 0 else float("inf")
e_lo, e_hi = interval(est)
t_lo, t_hi = interval(tru)
r_lo, r_hi = interval(ratio)
if 1 / 3 <= r_lo and r_hi <= 1.5:
    verdict = "good (the ratio's interval lies within 1/3 to 1.5)"
elif r_hi < 1 / 3 or r_lo > 1.5:
    verdict = "bad (the ratio's interval lies outside 1/3 to 1.5)"
else:
    verdict = "cannot tell"
fmt = lambda x: "inf" if x == float("inf") else f"{x:.2f}"
print(f"| commit | rounds priced | estimate µs (95%) | whole runs µs (95%) | estimate / whole runs (95%) | verdict |")
print(f"|---|---:|---|---|---|---|")
print(f"| {sys.argv[2]} | {len(pairs)} of {len(by)} | {est(pairs):.2f} ({e_lo:.2f}-{e_hi:.2f}) | "
      f"{tru(pairs):.2f} ({t_lo:.2f}-{t_hi:.2f}) | {fmt(ratio(pairs))} ({fmt(r_lo)}-{fmt(r_hi)}) | {verdict} |")
if unpriced:
    print(f"\n{unpriced} round(s) left unpriced (too few switches or too little CPU time in one side's windows): not in the means.")
PY
