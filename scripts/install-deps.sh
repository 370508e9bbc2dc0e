#!/usr/bin/env bash
# Installs what numalab needs to build on Debian 12, non-interactively and
# idempotently: pkg-config, libhwloc-dev (hwloc >= 2.8), libudev-dev, a C
# toolchain, and a Rust toolchain (>= 1.89) when none is present.
# With --test, also what the test suite needs beyond the build: the lint
# gate's clippy and rustfmt (rustup components, or Debian's rust-web-clippy
# and rustfmt-web beside Debian's toolchain), Debian's Chromium (headless,
# renders report.html), DejaVu fonts (the same text metrics everywhere),
# linux-perf (perf stat, the reference of the `run --counters` tests), and
# for libnumalab's tests: gfortran (the Fortran module), cmake (the examples'
# CMakeLists.txt through pkg-config), cbindgen 0.29.4
# from crates.io (cargo install; the header test), and a Python virtual
# environment ($NUMALAB_VENV, default ~/.cache/numalab/python-venv) with
# maturin, numpy, pandas and pytest pinned from PyPI (the Python package);
# and real programs the preload library must not break (tests/host/
# real_programs.rs): libjemalloc2, libtcmalloc-minimal4 and libmimalloc2.0
# (each preloaded under xz), xz-utils, and
# redis-server with redis-tools (linked with jemalloc; served on the
# loopback, never started as a service by the tests); and the runtimes of
# tests/host/real_runtimes.rs: golang-go (cgo and static Go programs),
# default-jre-headless, nodejs, python3-numpy and sqlite3; and the test
# cluster's Slurm, munge and Open MPI (cluster/install.sh: the cluster lane,
# crates/numalab-cli/tests/cluster/).
set -euo pipefail
TEST=0
case "${1:-}" in
    --test) TEST=1 ;;
    "") ;;
    *) echo "install-deps: error: unknown option '$1' (valid: --test)" >&2; exit 2 ;;
esac
export DEBIAN_FRONTEND=noninteractive
log() { echo "install-deps: $*"; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "install-deps: error: apt needs root (run as root or install sudo)" >&2; exit 1; }
    SUDO="sudo -n"
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

need=()
pkgs=(pkg-config libhwloc-dev libudev-dev gcc libc6-dev libopenblas0)
[ "$TEST" -eq 1 ] && pkgs+=(chromium fonts-dejavu-core linux-perf gfortran cmake python3 python3-venv binutils libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 xz-utils redis-server redis-tools golang-go default-jre-headless nodejs python3-numpy sqlite3)
for pkg in "${pkgs[@]}"; do
    installed "$pkg" || need+=("$pkg")
done

# Rust: rustup's toolchain when there is one, else Debian's rustc-web/cargo-web
# (1.96 in bookworm; the AVX-512 kernels need >= 1.89).
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
rust_ok() {
    command -v cargo >/dev/null 2>&1 || return 1
    local v; v=$(rustc --version 2>/dev/null | awk '{print $2}')
    [ -n "$v" ] && [ "$(printf '%s\n1.89.0\n' "$v" | sort -V | head -n1)" = "1.89.0" ]
}
if ! rust_ok; then
    log "no Rust >= 1.89 found: installing Debian's rustc-web and cargo-web"
    need+=(rustc-web cargo-web)
fi

if [ ${#need[@]} -gt 0 ]; then
    log "apt-get install ${need[*]}"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
    log "packages present (${pkgs[*]})"
fi
rust_ok || { echo "install-deps: error: no Rust >= 1.89 after installing; install rustup's stable toolchain" >&2; exit 1; }
# The lint gate of the test command: cargo clippy (its clippy-driver lints
# the suite's build) and cargo fmt from the same toolchain as cargo.
lint_ok() { cargo clippy --version >/dev/null 2>&1 && command -v clippy-driver >/dev/null && cargo fmt --version >/dev/null 2>&1; }
if [ "$TEST" -eq 1 ] && ! lint_ok; then
    if command -v rustup >/dev/null 2>&1; then
        log "rustup component add clippy rustfmt"
        rustup component add clippy rustfmt >/dev/null
    else
        log "apt-get install rust-web-clippy rustfmt-web"
        $SUDO apt-get update -qq
        $SUDO apt-get install -y -qq --no-install-recommends rust-web-clippy rustfmt-web >/dev/null
    fi
    lint_ok || { echo "install-deps: error: cargo clippy or cargo fmt missing after installing" >&2; exit 1; }
fi
log "using $(rustc --version), hwloc $(pkg-config --modversion hwloc)"
if [ "$TEST" -eq 1 ]; then
    log "using $(chromium --version 2>/dev/null | head -n1), $(cargo clippy --version), $(cargo fmt --version)"
fi
if [ "$TEST" -eq 1 ]; then
    # libnumalab's header is checked against what this cbindgen generates.
    CBINDGEN_VERSION=0.29.4
    if [ "$(cbindgen --version 2>/dev/null)" != "cbindgen $CBINDGEN_VERSION" ]; then
        log "cargo install cbindgen $CBINDGEN_VERSION (the header test)"
        # Built unoptimized: it generates one header, and builds in a third
        # of the time.
        CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
            cargo install --quiet --locked --force cbindgen --version "$CBINDGEN_VERSION"
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
    # The Python package's tests: pinned versions in a virtual environment
    # of their own, reused from run to run.
    VENV="${NUMALAB_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/numalab/python-venv}"
    PY_REQS="maturin==1.16.0 numpy==2.4.6 pandas==3.1.1 pytest==9.2.0"
    if [ "$(cat "$VENV/.numalab-requirements" 2>/dev/null)" != "$PY_REQS" ]; then
        log "python venv at $VENV: $PY_REQS"
        [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
        # shellcheck disable=SC2086
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check $PY_REQS
        echo "$PY_REQS" > "$VENV/.numalab-requirements"
    fi
    bash "$(dirname "${BASH_SOURCE[0]}")/../cluster/install.sh" | sed 's/^/install-deps: /'
    log "using $(cbindgen --version), $(gfortran --version | head -n1), Python $("$VENV/bin/python" -c 'import sys, numpy, pandas; print(sys.version.split()[0], "numpy", numpy.__version__, "pandas", pandas.__version__)')"
fi
