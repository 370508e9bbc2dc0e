#!/usr/bin/env bash
# How right `numalab profile`'s estimates are, on programs whose truth is known by
# construction (crates/numalab-preload/tests/programs/truth.c: shared data read in step, one
# thread always first, staggered, at random, partitioned slices, producer/consumer, unequal
# work, a thread that migrates, false sharing), in the Quartet guest (4 nodes x 2 CPUs;
# guest/README.md). Each program is profiled --repeats times; for every region the script
# prints the truth, the estimates (median over the repeats), how many of the repeats' 95%
# intervals covered the truth (target: at least 18 of 20), and how far the estimate of each
# repeat was from the truth where it rested on enough samples (target: within 5 points).
# Then the same for every cell of the access matrices, and the page-fault samples' share
# beside the word counts' (whose error the fault sampler cannot bound).
# A report, not a test: exits 0 when a target is missed, non-zero only when it cannot measure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

usage() {
    cat <<'EOF2'
usage: bash bench/profile-truth.sh [--repeats N] [--modes LIST] [--passes P] [--bin PATH]
                                   [--keep DIR]
  --repeats N   profiles of each program (default: 20)
  --modes LIST  comma-separated programs (default: all of truth.c's)
  --passes P    passes over the data a run (default: 20)
  --bin PATH    measure this numalab binary (its libnumalab_preload.so beside it)
  --keep DIR    keep the guest's output in DIR (analysed again with --from DIR)
  --from DIR    analyse a kept output without booting the guest
EOF2
}
REPEATS=20 MODES="leader,instep,staggered,random,slices,prodcons,unequal,migrate,falseshare"
PASSES=20 BIN="" KEEP="" FROM=""
bench_options profile-truth.sh "repeats=REPEATS modes=MODES passes=PASSES bin=BIN keep=KEEP from=FROM" "$@"
bench_whole profile-truth.sh --repeats "$REPEATS" 1
bench_whole profile-truth.sh --passes "$PASSES" 1

if [ -z "$FROM" ]; then
    numalab_profile_bin profile-truth.sh
    lib="$(dirname "$BIN")/libnumalab_preload.so"
    bash guest/fetch-kernel.sh >/dev/null
    work=$(mktemp -d /tmp/numalab-profile-truth.XXXXXX)
    trap 'rm -rf "$work"' EXIT
    gcc -O2 -g -pthread -o "$work/truth" crates/numalab-preload/tests/programs/truth.c
    {
        # One perf event held open for the whole script: the kernel patches
        # its scheduler hooks once, not at every profile (guest/README.md).
        echo 'numalab run --counters -- sleep 2147483647 >/dev/null 2>&1 &'
        for mode in ${MODES//,/ }; do
            for r in $(seq "$REPEATS"); do
                echo "echo '@@@RUN $mode $r'"
                echo "numalab profile --rate 500 --overhead 99 -o /tmp/p -- truth $mode 8 $PASSES 4096 > /tmp/o 2>/tmp/e; echo \"@@@RC \$?\""
                echo "grep -E '^(region|truth|thread) ' /tmp/o; echo '@@@JSON'; cat /tmp/p/profile.json; echo; echo '@@@END'"
            done
        done
    } > "$work/script.sh"
    out=${KEEP:-$work}
    mkdir -p "$out"
    runs=$(( REPEATS * $(echo "$MODES" | tr ',' '\n' | wc -l) ))
    echo "profile-truth: $runs profiles in the Quartet guest (about 15 s each)" >&2
    bash guest/boot.sh --machine quartet --timeout $(( 120 + runs * 90 )) \
        --file "$BIN" --file "$lib" --file "$work/truth" --script "$work/script.sh" \
        > "$out/console.txt"
    FROM=$out
fi

python3 - "$FROM/console.txt" <<'EOF'
import json, re, sys, statistics
text = open(sys.argv[1], errors="replace").read()
runs = re.findall(r"@@@RUN (\w+) (\d+)\n@@@RC (\d+)\n(.*?)@@@JSON\n(.*?)\n@@@END", text, re.S)
if not runs:
    sys.exit("profile-truth: no run in the guest's output")
rows = {}      # (mode, region) -> list of (truth, estimate, low, high, samples, fault share)
cells = {}     # (mode, region, cpu, mem) -> list of (truth, estimate, low, high, samples)
failed = 0
for mode, rep, rc, program, js in runs:
    if rc != "0":
        failed += 1
        continue
    p = json.loads(js)
    addr = {}
    truth = {}
    for line in program.splitlines():
        w = line.split()
        if w[0] == "region":
            # Private arrays and buffers share a site: the first names it.
            name = "P" if w[1].startswith("P") else "BUF" if w[1].startswith("BUF") else w[1]
            addr.setdefault(name, int(w[2], 16))
        elif w[0] == "truth":
            name = "P" if w[1].startswith("P") else w[1]
            key = (int(w[2]), int(w[3]))
            truth.setdefault(name, {})
            truth[name][key] = truth[name].get(key, 0) + int(w[4])
    for name, a in addr.items():
        t = truth.get(name)
        region = next((r for r in p["regions"] if r["first_address"] == a), None)
        if not t or region is None:
            continue
        total = sum(t.values())
        true_remote = sum(v for (c, m), v in t.items() if c != m) / total
        e = region.get("estimate") or {}
        rem = e.get("remote")
        fault = None
        acc = region["accesses"]
        n = sum(sum(row.values()) for row in acc.values())
        if n:
            fault = sum(v for c, row in acc.items() for m, v in row.items() if c != m) / n
        rows.setdefault((mode, name), []).append(
            (true_remote, rem and rem["share"], rem and rem["low"], rem and rem["high"],
             e.get("cells", 0), fault, n))
        for (c, m), v in t.items():
            est = next((x for x in e.get("matrix", []) if x["cpu_node"] == c and x["memory_node"] == m), None)
            cells.setdefault((mode, name, c, m), []).append(
                (v / total, est and est["share"], est and est["low"], est and est["high"], e.get("cells", 0)))

print(f"{len(runs)} profiles, {failed} failed\n")
print("| program | region | truth | word counts (median) | 95% intervals covering | repeats with >= 100 samples | of them within 5 points | samples (median) | page-fault samples (median share) |")
print("|---|---|---|---|---|---|---|---|---|")
met = missed = 0
for (mode, name), rs in sorted(rows.items()):
    got = [r for r in rs if r[1] is not None]
    cover = sum(1 for r in got if r[2] - 1e-9 <= r[0] <= r[3] + 1e-9)
    big = [r for r in got if r[4] >= 100]
    close = sum(1 for r in big if abs(r[1] - r[0]) <= 0.05)
    med = statistics.median([r[1] for r in got]) if got else None
    faults = [r[5] for r in rs if r[5] is not None]
    fmed = statistics.median(faults) if faults else None
    ok = len(got) > 0 and cover >= 0.9 * len(got) and close == len(big)
    met += ok
    missed += not ok
    print(f"| {mode} | {name} | {rs[0][0]:.3f} | {'-' if med is None else f'{med:.3f}'} | {cover} of {len(got)} | {len(big)} | {close} | "
          f"{statistics.median([r[4] for r in rs]):.0f} | {'-' if fmed is None else f'{fmed:.3f}'} |")
print("\n| program | region | CPU node -> memory node | truth | estimate (median) | intervals covering | within 5 points (>= 100 samples) |")
print("|---|---|---|---|---|---|---|")
for (mode, name, c, m), rs in sorted(cells.items()):
    got = [r for r in rs if r[1] is not None]
    cover = sum(1 for r in got if r[2] - 1e-9 <= r[0] <= r[3] + 1e-9)
    big = [r for r in got if r[4] >= 100]
    close = sum(1 for r in big if abs(r[1] - r[0]) <= 0.05)
    med = statistics.median([r[1] for r in got]) if got else None
    print(f"| {mode} | {name} | {c} -> {m} | {rs[0][0]:.3f} | {'-' if med is None else f'{med:.3f}'} | {cover} of {len(got)} | {close} of {len(big)} |")
print(f"\nregions meeting both targets: {met} of {met + missed}")
EOF
