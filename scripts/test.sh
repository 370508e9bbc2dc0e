#!/usr/bin/env bash
# The whole test suite: the lint gate (rustfmt, clippy with warnings as
# errors, rustdoc with warnings as errors), then unit tests, property tests,
# the topology-fixture tests, the multi-node tests in QEMU guests (guest/),
# the browser tests of report.html in headless Chromium, libnumalab from C
# and Fortran (installed into a scratch prefix) and its Python package
# (pytest). Installs what it needs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh --test
bash guest/fetch-kernel.sh
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
echo "test: lint gate: cargo fmt --check, cargo clippy -D warnings, cargo doc -D warnings"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
# cargo test builds no cdylib: the preload library `numalab profile` loads
# (crates/numalab-preload) is built here, beside the numalab binary the
# tests run.
echo "test: cargo build --workspace (numalab, libnumalab_preload.so, libnumalab_capi.so and .a)"
cargo build --workspace --locked
echo "test: cargo test --workspace (guest tests boot QEMU; about a few minutes)"
cargo test --workspace --locked
# libnumalab's Python package: its wheel (maturin) and its tests (pytest).
echo "test: the Python package: maturin build, pytest"
bash scripts/test-python.sh
