#!/usr/bin/env bash
# The main job: build numalab and characterize this machine with `numalab report`
# (about 80 s on a small one-node machine, two minutes on a two-socket server): the
# machine model, latency and bandwidth matrices, size sweep, scaling, placement sweeps,
# loaded latency, core-to-core latency and the policy comparison, as
# numalab-report/report.html (open it in a browser), results.json and CSV files.
# Running it again replaces numalab-report/ (it is this script's own output).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
echo "demo: building numalab (release)"
cargo build --release --locked -q
bin=target/release/numalab
out=${NUMALAB_REPORT_DIR:-numalab-report}
echo
echo "== numalab report -o $out --force"
"$bin" report -o "$out" --force
echo
echo "demo: open $(cd "$out" && pwd)/report.html in a browser"
