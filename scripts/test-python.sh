#!/usr/bin/env bash
# The Python package's tests (scripts/test.sh runs this): builds the abi3
# wheel of crates/numalab-python with maturin (dev profile, reusing the
# workspace's build; the wheel links the system's hwloc, so it is tagged
# linux, not manylinux), installs it into the test environment that
# scripts/install-deps.sh --test made, and runs pytest on
# crates/numalab-python/tests with NUMALAB pointing at target/debug/numalab.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${NUMALAB_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/numalab/python-venv}"
[ -x "$VENV/bin/maturin" ] || { echo "test-python: error: no test environment at $VENV: run scripts/install-deps.sh --test" >&2; exit 1; }
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
WHEELS="$ROOT/target/wheels"
mkdir -p "$WHEELS"
rm -f "$WHEELS"/numalab-*.whl
# maturin builds this crate alone: shared crates whose features differ from
# the workspace build's are compiled again (crates/numalab-python/Cargo.toml
# lines them up); say which, so that the drift is seen.
tree() { (cd "$ROOT" && cargo tree --locked --prefix none -f '{p} [{f}]' "$@" | sort -u); }
drift=$(comm -13 <(tree --workspace -e normal,build,dev) <(tree -p numalab-python -e normal,build) | grep -v '^numalab' || true)
if [ -n "$drift" ]; then
    echo "test-python: note: these crates' features differ from the workspace build's, so maturin compiles them (and what uses them) again; line them up in crates/numalab-python/Cargo.toml:"
    echo "$drift" | sed 's/^/  /'
fi
start=$(date +%s)
(cd "$ROOT/crates/numalab-python" && "$VENV/bin/maturin" build --locked --quiet \
    --interpreter "$VENV/bin/python" --compatibility linux --auditwheel skip --out "$WHEELS")
echo "test-python: wheel $(basename "$WHEELS"/numalab-*.whl) built in $(( $(date +%s) - start )) s"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WHEELS"/numalab-*.whl
# From outside the source tree: the installed wheel is what is tested.
cd "$ROOT/target"
NUMALAB="$ROOT/target/debug/numalab" "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/crates/numalab-python/tests"
