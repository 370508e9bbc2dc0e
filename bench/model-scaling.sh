#!/usr/bin/env bash
# Does the contention model, calibrated from a numalab report of this machine, predict that
# report's own 1..N-thread scaling? Runs `numalab report --parts` with what calibration reads
# and `scaling` (a small budget: about 2-4 minutes), then `numalab model --from
# DIR/results.json --calibration --json`, and prints each fitted parameter with what it was
# fitted from and its residual, then per scaling point threads | layout | measured GB/s |
# predicted GB/s | error, and the mean absolute error against the 10% target. The scaling points
# are never fitted to: every parameter comes from the other parts
# (crates/numalab/src/model/calibrate.rs), so the error is a prediction's.
#
# NEEDS the `model` command's calibration (crates/numalab-cli/src/cmd/model.rs): `numalab model
# --from RESULTS.json --calibration --json` printing the JSON envelope of every command with the
# calibration as its `calibration` field (model::calibrate::Calibration serialized: `fitted`,
# `scaling`, `mean_abs_error`, `notes`). A binary without it fails here with its own message.
#
# A report, not a test: it exits non-zero only when it cannot measure. See bench/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/common.sh
. bench/common.sh

# What calibration reads (model::calibrate::REPORT_PARTS: the check's `scaling` last).
PARTS=bandwidth-matrix,latency-matrix,sizes,loaded-latency,sweep,scaling

usage() {
    cat <<'EOF2'
usage: bash bench/model-scaling.sh [--budget SECONDS] [--from RESULTS.json] [--bin PATH] [--keep DIR]
  --budget SECONDS   time budget of the report, 20 to 3600 (default: 150: the report takes about 2-3 minutes)
  --from FILE        calibrate from this report's results.json instead of running one
  --bin PATH         use this numalab binary instead of building target/release/numalab
  --keep DIR         write the report and the model's JSON into DIR and keep them (default: a
                     temporary directory, removed)
EOF2
}
BUDGET=150 FROM="" BIN="" KEEP=""
bench_options model-scaling.sh "budget=BUDGET from=FROM bin=BIN keep=KEEP" "$@"
bench_whole model-scaling.sh --budget "$BUDGET" 20 3600
if [ -n "$FROM" ] && [ ! -f "$FROM" ]; then
    echo "model-scaling.sh: --from $FROM is not a file (give a report's results.json)" >&2
    exit 2
fi
numalab_bin
if [ -n "$KEEP" ]; then
    DIR=$KEEP
    mkdir -p "$DIR"
else
    DIR=$(mktemp -d /tmp/numalab-model-scaling.XXXXXX)
    trap 'rm -rf "$DIR"' EXIT
fi

if [ -n "$FROM" ]; then
    RESULTS=$FROM
    HOW="$FROM"
else
    RESULTS=$DIR/report/results.json
    HOW="numalab report --parts $PARTS --budget $BUDGET"
    echo "model-scaling.sh: $HOW (about $((BUDGET / 60 + 1)) minutes)" >&2
    rc=0
    "$BIN" report --parts "$PARTS" --budget "$BUDGET" --force -o "$DIR/report" \
        > "$DIR/report.log" 2>&1 || rc=$?
    # 1: a part failed, 3: a placement did not verify; either way the other parts are written
    # and calibration says which it lacks.
    if [ ! -f "$RESULTS" ]; then
        echo "model-scaling.sh: numalab report failed ($rc) and wrote no results.json: $(tail -1 "$DIR/report.log")" >&2
        exit 1
    fi
    if [ "$rc" -ne 0 ]; then
        echo "model-scaling.sh: numalab report exited $rc (kept going): $(tail -1 "$DIR/report.log")" >&2
    fi
fi

if ! "$BIN" model --from "$RESULTS" --calibration --json > "$DIR/model.json" 2> "$DIR/model.err"; then
    echo "model-scaling.sh: numalab model --from --calibration failed: $(tail -1 "$DIR/model.err")" >&2
    exit 1
fi

python3 - "$DIR/model.json" "$HOW" <<'PY'
import json, sys

path, how = sys.argv[1], sys.argv[2]
try:
    doc = json.load(open(path))
except ValueError as e:
    sys.exit(f"model-scaling.sh: numalab model printed no JSON: {e}")
# The envelope flattens a command's result beside `command`; a `result` object is read too.
doc = doc.get("result", doc) if isinstance(doc, dict) else {}
cal = doc.get("calibration") if isinstance(doc, dict) else None
if not isinstance(cal, dict):
    sys.exit("model-scaling.sh: numalab model's JSON has no calibration (is --calibration implemented?)")

def num(x, fmt):
    return format(x, fmt) if isinstance(x, (int, float)) else "-"

print(f"model calibrated from: {how}")
print()
print("| parameter | value | unit | residual | fitted from |")
print("|---|---:|---|---:|---|")
for f in cal.get("fitted", []):
    r = f.get("residual")
    print(f"| {f.get('name')} | {num(f.get('value'), '.4g')} | {f.get('unit')} | "
          f"{num(r * 100 if isinstance(r, (int, float)) else None, '+.1f')}{'%' if isinstance(r, (int, float)) else ''} | {f.get('from')} |")
print()
rows = cal.get("scaling", [])
if not rows:
    print("scaling: no point to check (the report has no scaling part); see the notes")
else:
    print("scaling, predicted from the parameters above (never fitted to it):")
    print()
    print("| threads | layout | measured GB/s | predicted GB/s | error |")
    print("|---:|---|---:|---:|---:|")
    for s in rows:
        print(f"| {s['threads']} | {s['layout']} | {s['measured_gbps']:.2f} | {s['predicted_gbps']:.2f} | {s['error'] * 100:+.1f}% |")
    print()
    e = cal.get("mean_abs_error")
    if isinstance(e, (int, float)):
        verdict = "met" if e <= 0.10 else "missed"
        print(f"mean absolute error: {e * 100:.1f}% over {len(rows)} points (target 10%: {verdict})")
for n in cal.get("notes", []):
    print(f"note: {n}")
PY
