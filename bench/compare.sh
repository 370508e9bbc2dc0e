#!/usr/bin/env bash
# numalab against the tools people use, on this machine, in one run:
#   1. bandwidth: numalab and likwid-bench interleaved A/B/A/B, best-of-N vs best-of-N,
#      numalab/likwid ratios for read/load_avx, copy/copy_avx, triad/triad_avx,
#      write/store_avx, write-nt/store_mem_avx, with 1 thread and with all threads;
#   2. latency: numalab's random pointer chase against an independent one (bench/chase.c),
#      and numalab's page pattern against its random pattern (TLB effect);
#   3. time to result of numalab's commands with their defaults.
# Prints a Markdown table and "targets met: X of Y". Exits 0 even when a target is missed
# (it is a report); exits non-zero only when it cannot measure at all (install, build).
# See bench/README.md.
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    cat <<'EOF'
usage: bash bench/compare.sh [options]
  --rounds N          A/B rounds per test (default 5; --quick: 2)
  --size SIZE         working set per bandwidth test, all streams together, the same for
                      both tools (default 1GB = 1e9 bytes; --quick: 256MB). Units: kB, MB, GB
                      (decimal, as likwid-bench) or KiB, MiB, GiB (binary)
  --lat-size SIZE     buffer of the latency cross-check and of page vs random
                      (default 1GiB; --quick: 256MiB)
  --threads LIST      thread counts, comma-separated (default "1,all"; all = nproc)
  --numalab-thp MODE  numalab's --thp for bandwidth: system (default: the same pages as
                      likwid-bench gets), on (numalab's own default), off
  --likwid-seconds S  likwid-bench -s: minimal run time of one likwid-bench test (default 1;
                      --quick: 0.5)
  --skip-time         do not time numalab's commands (part 3)
  --skip-bandwidth    do not run the bandwidth comparison (part 1)
  --log-dir DIR       keep every raw output there (default: a new directory under /tmp)
  --bin PATH          measure this numalab binary instead of building target/release/numalab
  --quick             smoke run: 2 rounds, smaller sizes
  -h, --help          this help
EOF
}

ROUNDS="" SIZE="" LAT_SIZE="" THREADS="1,all" NUMALAB_THP="system" LIKWID_S="" SKIP_TIME=0
LOG_DIR="" QUICK=0 BIN="" SKIP_BW=0
bench_options compare "rounds=ROUNDS size=SIZE lat-size=LAT_SIZE threads=THREADS numalab-thp=NUMALAB_THP likwid-seconds=LIKWID_S skip-time=SKIP_TIME:1 skip-bandwidth=SKIP_BW:1 log-dir=LOG_DIR bin=BIN quick=QUICK:1" "$@"
if [ "$QUICK" = 1 ]; then
    : "${ROUNDS:=2}" "${SIZE:=256MB}" "${LAT_SIZE:=256MiB}" "${LIKWID_S:=0.5}"
else
    : "${ROUNDS:=5}" "${SIZE:=1GB}" "${LAT_SIZE:=1GiB}" "${LIKWID_S:=1}"
fi
bench_whole compare --rounds "$ROUNDS" 1
case "$NUMALAB_THP" in on|off|system) ;; *) echo "compare: --numalab-thp must be on, off or system" >&2; exit 2 ;; esac

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$(pwd)
log() { echo "compare: $*"; }

# ---------------------------------------------------------------- install and build
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "compare: error: apt needs root (run as root or install sudo)" >&2; exit 1; }
    SUDO="sudo -n"
fi
log "build dependencies: bash scripts/install-deps.sh"
bash scripts/install-deps.sh
need=()
command -v likwid-bench >/dev/null 2>&1 || need+=(likwid)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    log "apt-get install ${need[*]}"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
    log "likwid-bench, gcc and python3 present"
fi
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
if [ -z "$BIN" ]; then
    log "building numalab: cargo build --release --locked -q"
    cargo build --release --locked -q
    BIN="$REPO/target/release/numalab"
else
    BIN=$(realpath "$BIN")
    log "measuring $BIN (--bin: not building)"
fi

[ -n "$LOG_DIR" ] || LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/numalab-compare.XXXXXX")
mkdir -p "$LOG_DIR"
RESULTS="$LOG_DIR/results.tsv"
: >"$RESULTS"
log "raw outputs in $LOG_DIR"

CHASE="$LOG_DIR/chase"
log "building the independent chase: gcc -O2 -o $CHASE bench/chase.c"
gcc -O2 -Wall -o "$CHASE" bench/chase.c

NPROC=$(nproc)
thread_counts=()
IFS=',' read -r -a _tl <<<"$THREADS"
for t in "${_tl[@]}"; do
    t=${t// /}
    [ "$t" = all ] && t=$NPROC
    case "$t" in ''|*[!0-9]*|0) echo "compare: bad thread count '$t' in --threads" >&2; exit 2 ;; esac
    [[ " ${thread_counts[*]-} " == *" $t "* ]] || thread_counts+=("$t")
done

# Sizes: the bandwidth working set in bytes (likwid-bench takes kB = 1000 B).
to_bytes() {
    python3 - "$1" <<'EOF'
import re, sys
t = sys.argv[1].strip()
m = re.fullmatch(r'([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)', t)
units = {'': 1, 'b': 1, 'kb': 10**3, 'mb': 10**6, 'gb': 10**9,
         'k': 2**10, 'kib': 2**10, 'm': 2**20, 'mib': 2**20, 'g': 2**30, 'gib': 2**30}
if not m or m.group(2).lower() not in units:
    sys.exit(f"compare: '{t}' is not a size (e.g. 1GB, 256MB, 1GiB)")
print(int(float(m.group(1)) * units[m.group(2).lower()]))
EOF
}
TOTAL_BYTES=$(to_bytes "$SIZE")
LAT_BYTES=$(to_bytes "$LAT_SIZE")
TOTAL_KB=$((TOTAL_BYTES / 1000))
[ "$TOTAL_KB" -ge 1024 ] || { echo "compare: --size $SIZE is too small (at least 1MB)" >&2; exit 2; }

# ---------------------------------------------------------------- the environment
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -r)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "nproc: $NPROC"
    echo "numa nodes: $(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)"
    echo "thp: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo '?')"
    echo "virtualization: $(systemd-detect-virt 2>/dev/null || { grep -qw hypervisor /proc/cpuinfo && echo 'yes (hypervisor flag)'; } || echo none)"
    echo "likwid: $(dpkg-query -W -f='${Version}' likwid 2>/dev/null || likwid-bench -h 2>&1 | grep -m1 Version)"
    echo "numalab: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO" diff --quiet 2>/dev/null || echo ' (work tree modified)')"
    echo "gcc: $(gcc -dumpfullversion 2>/dev/null || gcc -dumpversion)"
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$LOG_DIR/environment.txt" | sed 's/^/compare: /'

# ---------------------------------------------------------------- 1. bandwidth
# numalab kernel : likwid kernel : numalab buffers : likwid streams : counted (target) or info
PAIRS=(
    "read:load_avx:1:1:target"
    "copy:copy_avx:2:2:target"
    "triad:triad_avx:3:4:target"
    "triad:stream_avx:3:3:info"
    "write:store_avx:1:1:target"
    "write-nt:store_mem_avx:1:1:target"
)
LIKWID_LIST=$(likwid-bench -a 2>&1 | awk '{print $1}')
likwid_kernel() {
    # The AVX variant when this likwid-bench has it, else the plain one.
    local k=$1
    if grep -qx "$k" <<<"$LIKWID_LIST"; then echo "$k"; return; fi
    local plain=${k%_avx}
    plain=${plain/_avx/}
    if grep -qx "$plain" <<<"$LIKWID_LIST"; then
        echo "compare: note: likwid-bench has no $k here, using $plain" >&2
        echo "$plain"; return
    fi
    echo "compare: error: likwid-bench has neither $k nor $plain" >&2
    echo ""
}

record() { printf '%s\n' "$(IFS=$'\t'; echo "$*")" >>"$RESULTS"; }

# Runs numalab once; prints "best median memory_best bytes" or "ERROR <message>".
numalab_bw() {
    local kernel=$1 threads=$2 per_buffer=$3 tag=$4 rc=0
    "$BIN" bench bandwidth --kernel "$kernel" --threads "$threads" --size "$per_buffer" \
        --thp "$NUMALAB_THP" --json >"$LOG_DIR/$tag.json" 2>"$LOG_DIR/$tag.err" || rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
        echo "ERROR exit $rc: $(tr '\n' ' ' <"$LOG_DIR/$tag.err" | cut -c1-400)"
        return
    fi
    python3 - "$LOG_DIR/$tag.json" <<'EOF' || echo "ERROR bad JSON in $LOG_DIR/$tag.json"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    best = float(d["gbps"]["best"])
    median = float(d["gbps"].get("median", "nan"))
    mem = d.get("memory_gbps", {}).get("best", "nan")
    ws = (d.get("bytes_per_pass") or {}).get("program", 0)
    print(f"{best:.3f} {median:.3f} {float(mem):.3f} {int(ws)}")
except Exception as e:
    print(f"ERROR bad JSON ({type(e).__name__}: {e}) in {sys.argv[1]}")
EOF
}

# Runs likwid-bench once; prints "GB/s bytes" (1e9 B/s, from its MByte/s = 1e6 B/s) or ERROR.
likwid_bw() {
    local kernel=$1 threads=$2 tag=$3 rc=0 domain
    if [ "$threads" -eq 1 ]; then domain=S0; else domain=N; fi
    likwid-bench -s "$LIKWID_S" -t "$kernel" -w "$domain:${TOTAL_KB}kB:$threads" \
        >"$LOG_DIR/$tag.txt" 2>&1 || rc=$?
    local mbs bytes
    mbs=$(awk -F'\t+' '/^MByte\/s:/ {print $2}' "$LOG_DIR/$tag.txt" | tail -n1)
    bytes=$(awk -F'\t+' '/^Size \(Byte\):/ {print $2}' "$LOG_DIR/$tag.txt" | tail -n1)
    if [ "$rc" -ne 0 ] || [ -z "$mbs" ]; then
        echo "ERROR likwid-bench exit $rc: $(tail -n3 "$LOG_DIR/$tag.txt" | tr '\n' ' ' | cut -c1-300)"
        return
    fi
    python3 -c "import sys; print(f'{float(sys.argv[1]) / 1000.0:.3f}', sys.argv[2])" "$mbs" "${bytes:-0}"
}

log ""
log "== 1. bandwidth: $ROUNDS rounds, threads ${thread_counts[*]}, working set $TOTAL_KB kB over all streams for both tools, numalab --thp $NUMALAB_THP, likwid-bench -s $LIKWID_S"
for ((r = 1; r <= ROUNDS; r++)); do
    [ "$SKIP_BW" = 0 ] || break
    for t in "${thread_counts[@]}"; do
        last_nl=""
        for pair in "${PAIRS[@]}"; do
            IFS=: read -r nk lk_want nbuf lstreams kind <<<"$pair"
            lk=$(likwid_kernel "$lk_want")
            # numalab's --size is per buffer of each worker: every thread has its own buffers.
            per_buffer=$(( TOTAL_KB * 1000 / nbuf / t / 64 * 64 ))
            # A: numalab (once per numalab kernel and round; the info pair reuses the triad run)
            if [ "$last_nl" != "$nk" ]; then
                res=$(numalab_bw "$nk" "$t" "$per_buffer" "bw-r$r-t$t-numalab-$nk")
                last_nl=$nk
                if [[ "$res" == ERROR* ]]; then
                    nl_best=""; nl_med=""; nl_mem=""; nl_ws=""; nl_err=${res#ERROR }
                else
                    read -r nl_best nl_med nl_mem nl_ws <<<"$res"; nl_err=""
                fi
            fi
            # B: likwid-bench
            if [ -n "$lk" ]; then
                res=$(likwid_bw "$lk" "$t" "bw-r$r-t$t-likwid-$lk")
            else
                res="ERROR likwid-bench has no $lk_want"
            fi
            if [[ "$res" == ERROR* ]]; then
                lw=""; lw_bytes=""; lw_err=${res#ERROR }
            else
                read -r lw lw_bytes <<<"$res"; lw_err=""
            fi
            record bw "$nk" "${lk:-$lk_want}" "$t" "$r" "$kind" "$nbuf" "$lstreams" "${nl_ws:-}" \
                "${lw_bytes:-}" "${nl_best:-}" "${nl_med:-}" "${nl_mem:-}" "${lw:-}" "${nl_err:-}" "${lw_err:-}"
            printf 'compare: round %d/%d  T=%-3s %-9s numalab %8s GB/s (median %s, memory %s)  |  %-14s likwid %8s GB/s%s\n' \
                "$r" "$ROUNDS" "$t" "$nk" "${nl_best:-ERR}" "${nl_med:-?}" "${nl_mem:-?}" "${lk:-$lk_want}" "${lw:-ERR}" \
                "${nl_err:+  numalab error: $nl_err}${lw_err:+  likwid error: $lw_err}"
        done
    done
done

# ---------------------------------------------------------------- 2. latency
numalab_lat() {
    local pattern=$1 tag=$2 rc=0
    "$BIN" bench latency --pattern "$pattern" --size "$LAT_BYTES" --cpu 0 --json \
        >"$LOG_DIR/$tag.json" 2>"$LOG_DIR/$tag.err" || rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
        echo "ERROR exit $rc: $(tr '\n' ' ' <"$LOG_DIR/$tag.err" | cut -c1-400)"
        return
    fi
    python3 - "$LOG_DIR/$tag.json" <<'EOF' || echo "ERROR bad JSON in $LOG_DIR/$tag.json"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    m = d.get("measurement", {})
    n = int(m.get("summary", {}).get("n", 0) or len(m.get("samples", [])))
    steps = int(d.get("steps_per_sample", 0))
    print(f'{float(d["ns"]["best"]):.2f} {float(d["ns"].get("median", "nan")):.2f} {n} {steps}')
except Exception as e:
    print(f"ERROR bad JSON ({type(e).__name__}: {e}) in {sys.argv[1]}")
EOF
}

log ""
log "== 2. latency: $ROUNDS rounds on CPU 0, buffer $LAT_BYTES bytes, 4 KiB pages (no THP) on both sides"
for ((r = 1; r <= ROUNDS; r++)); do
    res=$(numalab_lat random "lat-r$r-numalab-random")
    if [[ "$res" == ERROR* ]]; then record lat numalab-random "$r" "" "" "${res#ERROR }"; nr="ERR ${res#ERROR }"
    else read -r b m nsamples nsteps <<<"$res"; record lat numalab-random "$r" "$b" "$m" ""; nr="$b ns (median $m, $nsamples samples of $nsteps loads)"; fi
    # The chase takes as many samples of as many loads as numalab's run just before, so
    # that best-of and median mean the same on both sides (the best of more samples is lower).
    chase_args=()
    if [[ "$res" != ERROR* ]] && [ "${nsamples:-0}" -ge 1 ] && [ "${nsteps:-0}" -ge 1 ]; then
        [ "$nsamples" -le 1000 ] || nsamples=1000
        chase_args=(-r "$nsamples" -n "$nsteps")
    fi
    rc=0
    "$CHASE" -s "$LAT_BYTES" -c 0 "${chase_args[@]}" >"$LOG_DIR/lat-r$r-chase.txt" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        b=$(sed -n 's/.*ns_best=\([0-9.]*\).*/\1/p' "$LOG_DIR/lat-r$r-chase.txt")
        m=$(sed -n 's/.*ns_median=\([0-9.]*\).*/\1/p' "$LOG_DIR/lat-r$r-chase.txt")
        record lat chase "$r" "$b" "$m" ""; cr="$b ns (median $m)"
    else
        e=$(tr '\n' ' ' <"$LOG_DIR/lat-r$r-chase.txt"); record lat chase "$r" "" "" "$e"; cr="ERR $e"
    fi
    res=$(numalab_lat page "lat-r$r-numalab-page")
    if [[ "$res" == ERROR* ]]; then record lat numalab-page "$r" "" "" "${res#ERROR }"; np="ERR ${res#ERROR }"
    else read -r b m _ _ <<<"$res"; record lat numalab-page "$r" "$b" "$m" ""; np="$b ns (median $m)"; fi
    log "round $r/$ROUNDS  numalab random $nr  |  chase.c $cr  |  numalab page $np"
done

# ---------------------------------------------------------------- 3. time to result
if [ "$SKIP_TIME" = 0 ]; then
    log ""
    log "== 3. time to result, numalab's defaults (wall clock)"
    time_cmd() {
        local name=$1 target=$2; shift 2
        local t0 t1 rc=0
        t0=$(date +%s.%N)
        "$BIN" "$@" >"$LOG_DIR/time-$name.out" 2>"$LOG_DIR/time-$name.err" || rc=$?
        t1=$(date +%s.%N)
        local secs; secs=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$t0" "$t1")
        local err=""
        if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then err="exit $rc: $(tr '\n' ' ' <"$LOG_DIR/time-$name.err" | cut -c1-300)"; fi
        record time "numalab $*" "$secs" "$target" "$rc" "$err"
        log "numalab $*: ${secs} s (target <= $target s, exit $rc)${err:+  error: $err}"
    }
    time_cmd bench-bandwidth 5 bench bandwidth
    time_cmd bench-latency 5 bench latency
    time_cmd matrix 15 matrix
    time_cmd sizes 30 sizes
fi

# ---------------------------------------------------------------- 4. the report
log ""
python3 - "$RESULTS" "$ROUNDS" "$TOTAL_KB" "$LAT_BYTES" "$NUMALAB_THP" "$LOG_DIR" <<'EOF'
import math, sys
from collections import OrderedDict

path, rounds, total_kb, lat_bytes, thp, log_dir = sys.argv[1:7]
rows = [line.rstrip("\n").split("\t") for line in open(path) if line.strip()]

def num(s):
    try:
        v = float(s)
        return v if math.isfinite(v) else None
    except (TypeError, ValueError):
        return None

def fmt(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"

def human(b):
    b = int(b)
    for u, s in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if b >= u and b % u == 0:
            return f"{b // u} {s}"
    if b >= 10**9:
        return f"{b / 1e9:g} GB"
    return f"{b / 1e6:g} MB"

met = total = 0
errors = []
out = []
out.append(f"### numalab vs likwid-bench on this machine ({rounds} round{'s' if int(rounds) != 1 else ''}, interleaved A/B, best of rounds)")
out.append("")
out.append(f"Bandwidth: {int(total_kb) * 1000 / 1e9:g} GB working set over all streams, both tools; "
           "program bytes (every stream's reads and writes, no write-allocate), GB/s = 1e9 B/s; "
           f"numalab --thp {thp}.")
out.append("")
out.append("| numalab kernel | likwid-bench kernel | threads | numalab best GB/s | likwid best GB/s | ratio | target | result | numalab memory GB/s | ratio, numalab median |")
out.append("|---|---|---:|---:|---:|---:|---|---|---:|---:|")

groups = OrderedDict()
for r in rows:
    if r[0] != "bw":
        continue
    _, nk, lk, t, rnd, kind, nbuf, lstreams, per_buffer, lw_bytes, nl_best, nl_med, nl_mem, lw, nl_err, lw_err = (r + [""] * 16)[:16]
    g = groups.setdefault((nk, lk, int(t)), {"kind": kind, "nbuf": nbuf, "ls": lstreams, "nl": [], "med": [], "mem": [], "lw": []})
    a, b = num(per_buffer), num(lw_bytes)
    if a and b and abs(a - b) / b > 0.01:
        errors.append(f"working sets differ for {nk} vs {lk}, {t} threads (round {rnd}): "
                      f"numalab {int(a)} B per pass, likwid-bench {int(b)} B")
    for key, val in (("nl", nl_best), ("med", nl_med), ("mem", nl_mem), ("lw", lw)):
        v = num(val)
        if v is not None:
            g[key].append(v)
    if nl_err:
        errors.append(f"numalab bench bandwidth --kernel {nk} --threads {t} (round {rnd}): {nl_err}")
    if lw_err:
        errors.append(f"likwid-bench -t {lk} threads {t} (round {rnd}): {lw_err}")

for (nk, lk, t), g in groups.items():
    nl = max(g["nl"]) if g["nl"] else None
    lw = max(g["lw"]) if g["lw"] else None
    mem = max(g["mem"]) if g["mem"] else None
    med = max(g["med"]) if g["med"] else None
    ratio = nl / lw if nl is not None and lw else None
    ratio_med = med / lw if med is not None and lw else None
    if g["kind"] == "target":
        total += 1
        ok = ratio is not None and ratio >= 1.0
        met += ok
        target, result = ">= 1.00", ("PASS" if ok else ("FAIL" if ratio is not None else "ERROR"))
    else:
        target, result = "info", "-"
    label = lk
    if g["nbuf"] != g["ls"]:
        label += f" ({g['ls']} streams vs {g['nbuf']})"
    out.append(f"| {nk} | {label} | {t} | {fmt(nl)} | {fmt(lw)} | {fmt(ratio, 3)} | {target} | {result} | {fmt(mem)} | {fmt(ratio_med, 3)} |")

lat = {}
lat_med = {}
for r in rows:
    if r[0] != "lat":
        continue
    _, who, rnd, best, med, err = (r + [""] * 6)[:6]
    d = lat.setdefault(who, [])
    v = num(best)
    if v is not None:
        d.append(v)
    v = num(med)
    if v is not None:
        lat_med.setdefault(who, []).append(v)
    if err:
        errors.append(f"latency {who} (round {rnd}): {err}")

if lat:
    out.append("")
    out.append(f"Latency: CPU 0, {human(lat_bytes)} buffer, one pointer per 64-byte line, 4 KiB pages; "
               "the chase takes as many samples of as many loads as numalab; best (lowest) of rounds.")
    out.append("")
    out.append("| check | numalab ns | reference ns | difference | target | result |")
    out.append("|---|---:|---:|---:|---|---|")
    nr = min(lat.get("numalab-random", []), default=None)
    ch = min(lat.get("chase", []), default=None)
    npg = min(lat.get("numalab-page", []), default=None)
    total += 1
    if nr is not None and ch is not None:
        diff = (nr - ch) / ch * 100
        ok = abs(diff) <= 3.0
        met += ok
        out.append(f"| random vs bench/chase.c (Sattolo cycle) | {nr:.1f} | {ch:.1f} | {diff:+.1f}% | within 3% | {'PASS' if ok else 'FAIL'} |")
    else:
        out.append(f"| random vs bench/chase.c (Sattolo cycle) | {fmt(nr, 1)} | {fmt(ch, 1)} | - | within 3% | ERROR |")
    nrm = min(lat_med.get("numalab-random", []), default=None)
    chm = min(lat_med.get("chase", []), default=None)
    if nrm is not None and chm is not None:
        out.append(f"| same, medians (lowest round) | {nrm:.1f} | {chm:.1f} | {(nrm - chm) / chm * 100:+.1f}% | info | - |")
    total += 1
    if nr is not None and npg is not None:
        ratio = npg / nr
        ok = ratio <= 0.90
        met += ok
        out.append(f"| page vs random (TLB effect), page/random | {npg:.1f} | {nr:.1f} (random) | {ratio:.2f}x | page <= 0.90x random | {'PASS' if ok else 'FAIL'} |")
    else:
        out.append(f"| page vs random (TLB effect), page/random | {fmt(npg, 1)} | {fmt(nr, 1)} (random) | - | page <= 0.90x random | ERROR |")

times = [r for r in rows if r[0] == "time"]
if times:
    out.append("")
    out.append("Time to result, defaults, wall clock:")
    out.append("")
    out.append("| command | seconds | target | result |")
    out.append("|---|---:|---:|---|")
    for r in times:
        _, cmd, secs, target, rc, err = (r + [""] * 6)[:6]
        total += 1
        s = num(secs)
        if err:
            errors.append(f"{cmd}: {err}")
            res = "ERROR"
        else:
            ok = s is not None and s <= float(target)
            met += ok
            res = "PASS" if ok else "FAIL"
        out.append(f"| `{cmd}` | {fmt(s)} | <= {target} s | {res} |")

if errors:
    out.append("")
    out.append("Errors:")
    out.append("")
    seen = set()
    for e in errors:
        if e not in seen:
            seen.add(e)
            out.append(f"- {e}")

out.append("")
out.append(f"targets met: {met} of {total}")
out.append(f"(raw outputs: {log_dir})")
print("\n".join(out))
EOF
