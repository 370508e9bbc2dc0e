#!/usr/bin/env bash
# The whole test suite: the lint gate (rustfmt, clippy with warnings as
# errors, rustdoc with warnings as errors), then the Rust tests in lanes
# (scripts/lanes.py): fast (unit, doc, fixture, property and host tests, the
# C and Fortran API), guest (multi-node tests in QEMU guests, guest/),
# browser (report.html in headless Chromium) and cluster (fleet and MPI
# ranks on a two-node Slurm cluster started and stopped by cluster/), then
# the Python package
# (pytest). Each lane prints its count, its time and how busy the CPUs were; a summary ends the run.
# Installs what it needs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$(date +%s)
bash scripts/install-deps.sh --test
bash guest/fetch-kernel.sh
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
# The suite compiles the workspace from scratch on a fresh clone, where
# incremental compilation only adds work: the engine crate (opt-level 3)
# took 169 s of CPU without it, 189 s with a cold incremental cache. A
# checkout that also builds incrementally rebuilds its own crates once when
# it switches.
export CARGO_INCREMENTAL=0
lint_start=$(date +%s)
echo "test: lint gate: cargo fmt --check, then clippy -D warnings in the build, cargo doc -D warnings"
cargo fmt --all -- --check
# Clippy lints as the build compiles: clippy-driver is the workspace's
# rustc (what `cargo clippy` does, there with `cargo check`), every
# warning an error (dependencies' lints are capped by cargo). A separate
# `cargo clippy --all-targets` type-checked every crate and test a second
# time: 80 s of a 103 s gate here. Exported for the whole suite: the lanes'
# `cargo test --no-run` and doctests and maturin's build then find the same
# compiled crates (the wrapper and RUSTFLAGS are part of cargo's
# fingerprints; a later plain `cargo test` rebuilds the workspace once).
CLIPPY_DRIVER=$(command -v clippy-driver) || { echo "test: error: clippy-driver not found (rustup component add clippy)" >&2; exit 1; }
export RUSTC_WORKSPACE_WRAPPER="$CLIPPY_DRIVER" RUSTFLAGS="-D warnings"
lint_s=$(( $(date +%s) - lint_start ))
# One build of everything the lanes run: the binaries, the cdylibs cargo
# test does not build (libnumalab_preload.so that `numalab profile` loads,
# libnumalab_capi.so and .a) and every test binary.
build_start=$(date +%s)
echo "test: cargo build --workspace --all-targets (binaries, cdylibs, test binaries), linted by clippy"
cargo build --workspace --all-targets --locked
build_s=$(( $(date +%s) - build_start ))
doc_start=$(date +%s)
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
lint_s=$(( lint_s + $(date +%s) - doc_start ))
rc=0
python3 -u scripts/lanes.py || rc=1
python_start=$(date +%s)
echo "test: lane python: maturin build, pytest"
bash scripts/test-python.sh || rc=1
python_s=$(( $(date +%s) - python_start ))
echo "test: lint (fmt, doc) ${lint_s} s, build with clippy ${build_s} s, python lane ${python_s} s; the whole command $(( $(date +%s) - start )) s"
exit $rc
