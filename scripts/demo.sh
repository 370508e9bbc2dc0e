#!/usr/bin/env bash
# The main job, for now: build numalab, show this machine's topology, and
# place one buffer with a policy and prove where its pages landed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
echo "demo: building numalab (release)"
cargo build --release --locked -q
bin=target/release/numalab
echo
echo "== numalab topology"
"$bin" topology
echo
cpu=$("$bin" topology --json | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["allowed_cpus"][-1])' 2>/dev/null || echo 0)
echo "== numalab place --size 256M --mem local --cpu $cpu"
"$bin" place --size 256M --mem local --cpu "$cpu"
nodes=$("$bin" topology --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["nodes"]))' 2>/dev/null || echo 1)
if [ "$nodes" -le 1 ]; then
    echo
    echo "== this machine has one NUMA node; here is a 4-node ring (the classic Quartet) from a topology file:"
    echo "== numalab topology --topology tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml"
    "$bin" topology --topology tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml
fi
