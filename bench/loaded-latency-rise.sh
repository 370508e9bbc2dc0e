#!/usr/bin/env bash
# Does one unpaced read injector raise the latency of a DRAM chase on this machine? The
# loaded-latency experiment's premise, timed here rather than in the tests (these shared
# machines make a rise of a few percent come and go: CI saw the injector starved by the host,
# and an injector at 7 GB/s beside a falling latency while the guest lane ran). Each round runs
# `numalab loaded-latency --mix read --rates max` (idle, then the unpaced injector) on one CPU
# with the injector on another, and pairs the unpaced point's median latency with that round's
# idle one. Prints each round and the median paired ratio with the sign count; the rise is
# "seen" when the binomial sign test over rounds gives p < 0.05, "not seen" when the median
# ratio is at or below 1, else "cannot tell". Rounds whose injector waited for its CPU more
# than 10% of the time, or streamed under 1 GB/s, had no load and are left out (counted).
# A report, not a test: it exits non-zero only when it cannot measure. See bench/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/loaded-latency-rise.sh [--rounds N] [--bin PATH]
  --rounds N   rounds of idle and loaded (default: 12)
  --bin PATH   measure this numalab binary instead of building target/release/numalab
EOF2
}
ROUNDS=12 BIN=""
bench_options loaded-latency-rise.sh "rounds=ROUNDS bin=BIN" "$@"
bench_whole loaded-latency-rise.sh --rounds "$ROUNDS" 1
numalab_bin
cpus=$(nproc)
if [ "$cpus" -lt 2 ]; then
    echo "loaded-latency-rise.sh: needs 2 CPUs (one to chase, one to inject); this machine has $cpus" >&2
    exit 1
fi
work=$(mktemp -d /tmp/numalab-ll-rise.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "one unpaced read injector against a DRAM chase: $ROUNDS rounds, $BIN"
for round in $(seq 1 "$ROUNDS"); do
    "$BIN" loaded-latency --cpu 0 --injector-cpus 1 --mix read --rates max --budget 4 --json \
        > "$work/$round.json"
done
python3 - "$work" "$ROUNDS" <<'PY'
import json, math, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
ratios, skipped = [], 0
for r in range(1, rounds + 1):
    m = json.load(open(f"{work}/{r}.json"))["mixes"][0]
    idle, loaded = m["idle"], m["steps"][-1]
    waited = loaded.get("injectors_waited") or 0.0
    gbps = loaded["injected_gbps"]
    ratio = loaded["latency_ns"]["median"] / idle["latency_ns"]["median"]
    held = waited < 0.1 and gbps >= 1.0
    print(f"round {r}: idle {idle['latency_ns']['median']:.1f} ns, loaded {loaded['latency_ns']['median']:.1f} ns"
          f" ({ratio:.3f}x), injector {gbps:.2f} GB/s, waited {waited:.0%}{'' if held else ' (left out: no load)'}")
    if held:
        ratios.append(ratio)
    else:
        skipped += 1
if not ratios:
    print(f"no round had a loading injector ({skipped} left out): cannot tell")
    sys.exit(0)
n, up = len(ratios), sum(1 for x in ratios if x > 1.0)
# One-sided binomial sign test: P(at least `up` of n above 1 | no effect).
p = sum(math.comb(n, k) for k in range(up, n + 1)) / 2 ** n
med = statistics.median(ratios)
verdict = "seen" if p < 0.05 else ("not seen" if med <= 1.0 else "cannot tell")
print(f"\nmedian loaded/idle {med:.3f} over {n} rounds ({skipped} left out); higher in {up} of {n}, sign test p = {p:.3f}: rise {verdict}")
PY
