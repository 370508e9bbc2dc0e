#!/usr/bin/env bash
# The whole test suite: unit tests, property tests, the topology-fixture tests,
# the multi-node tests in QEMU guests (guest/), and the browser tests of
# report.html in headless Chromium. Installs what it needs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh --test
bash guest/fetch-kernel.sh
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
echo "test: cargo test --workspace (guest tests boot QEMU; about a few minutes)"
cargo test --workspace --locked
