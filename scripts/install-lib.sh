#!/usr/bin/env bash
# Installs libnumalab, numalab's placement library for C, C++ and Fortran
# programs: the shared library (libnumalab.so.0, soname libnumalab.so.0,
# with the libnumalab.so link), the static library (libnumalab.a), the
# header (numalab.h), pkg-config files (numalab.pc; numalab-fortran.pc with
# the Fortran module numalab.mod and its wrappers, libnumalab_fortran.a,
# when gfortran is there). Debug info is stripped from the installed copies.
#
#   scripts/install-lib.sh [--prefix DIR] [--libdir DIR] [--profile release|dev]
#                          [--no-build] [--no-static]
#
# --prefix defaults to /usr/local; --libdir to PREFIX/lib. --profile picks
# the cargo build (default release); --no-build installs what cargo already
# built (target/release or target/debug). Then, e.g.:
#   cc prog.c $(pkg-config --cflags --libs numalab)
#   gfortran prog.f90 $(pkg-config --cflags --libs numalab-fortran)
# with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig when PREFIX is not a system one.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX=/usr/local
LIBDIR=""
PROFILE=release
BUILD=1
STATIC=1
usage() { echo "install-lib: error: $1 (usage: install-lib.sh [--prefix DIR] [--libdir DIR] [--profile release|dev] [--no-build] [--no-static])" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || usage "--prefix needs a directory"; PREFIX="$2"; shift 2 ;;
        --libdir) [ $# -ge 2 ] || usage "--libdir needs a directory"; LIBDIR="$2"; shift 2 ;;
        --profile)
            [ $# -ge 2 ] || usage "--profile needs release or dev"
            case "$2" in release|dev) PROFILE="$2" ;; *) usage "unknown profile '$2' (valid: release, dev)" ;; esac
            shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --no-static) STATIC=0; shift ;;
        *) usage "unknown option '$1'" ;;
    esac
done
case "$PREFIX" in /*) ;; *) PREFIX="$(pwd)/$PREFIX" ;; esac
[ -n "$LIBDIR" ] || LIBDIR="$PREFIX/lib"
case "$LIBDIR" in /*) ;; *) LIBDIR="$(pwd)/$LIBDIR" ;; esac
INCLUDEDIR="$PREFIX/include"
log() { echo "install-lib: $*"; }

[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
if [ "$BUILD" -eq 1 ]; then
    log "cargo build --profile $PROFILE -p numalab-capi"
    (cd "$ROOT" && cargo build --locked --profile "$PROFILE" -p numalab-capi)
fi
case "$PROFILE" in release) OUT="$ROOT/target/release" ;; dev) OUT="$ROOT/target/debug" ;; esac
SO="$OUT/libnumalab_capi.so"
AR="$OUT/libnumalab_capi.a"
[ -f "$SO" ] || { echo "install-lib: error: $SO is missing: build it (cargo build -p numalab-capi, or drop --no-build)" >&2; exit 1; }
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)"

install -d "$LIBDIR/pkgconfig" "$INCLUDEDIR"
strip --strip-debug -o "$LIBDIR/libnumalab.so.$VERSION" "$SO"
chmod 755 "$LIBDIR/libnumalab.so.$VERSION"
ln -sf "libnumalab.so.$VERSION" "$LIBDIR/libnumalab.so.0"
ln -sf libnumalab.so.0 "$LIBDIR/libnumalab.so"
if [ "$STATIC" -eq 1 ]; then
    [ -f "$AR" ] || { echo "install-lib: error: $AR is missing: build it (cargo build -p numalab-capi)" >&2; exit 1; }
    strip --strip-debug -o "$LIBDIR/libnumalab.a" "$AR"
fi
install -m 644 "$ROOT/crates/numalab-capi/include/numalab.h" "$INCLUDEDIR/numalab.h"

# What the static library needs besides itself (rustc --print
# native-static-libs: hwloc, libudev through hwloc, and the Rust runtime's
# system libraries; OpenBLAS is loaded at run time, by `blas` only).
cat > "$LIBDIR/pkgconfig/numalab.pc" <<PC
prefix=$PREFIX
libdir=$LIBDIR
includedir=$INCLUDEDIR

Name: numalab
Description: NUMA placement for programs: resource sets, memory and thread policies, verification
URL: https://example.invalid/numalab
Version: $VERSION
Requires.private: hwloc
Libs: -L\${libdir} -lnumalab
Libs.private: -ludev -lgcc_s -lutil -lrt -lpthread -lm -ldl
Cflags: -I\${includedir}
PC
log "installed libnumalab $VERSION ($PROFILE build): $LIBDIR/libnumalab.so.$VERSION$([ "$STATIC" -eq 1 ] && echo ", libnumalab.a"), $INCLUDEDIR/numalab.h, $LIBDIR/pkgconfig/numalab.pc"

# The Fortran module: compiled with this machine's gfortran (a .mod file is
# the compiler's own format), its wrappers in libnumalab_fortran.a.
if command -v gfortran >/dev/null 2>&1; then
    FORTRAN="$ROOT/crates/numalab-capi/fortran/numalab.f90"
    BUILD_DIR="$(mktemp -d)"
    trap 'rm -rf "$BUILD_DIR"' EXIT
    gfortran -O2 -fPIC -c "$FORTRAN" -J "$BUILD_DIR" -o "$BUILD_DIR/numalab_fortran.o"
    rm -f "$LIBDIR/libnumalab_fortran.a"
    ar rcs "$LIBDIR/libnumalab_fortran.a" "$BUILD_DIR/numalab_fortran.o"
    install -m 644 "$BUILD_DIR/numalab.mod" "$INCLUDEDIR/numalab.mod"
    install -m 644 "$FORTRAN" "$INCLUDEDIR/numalab.f90"
    cat > "$LIBDIR/pkgconfig/numalab-fortran.pc" <<PC
prefix=$PREFIX
libdir=$LIBDIR
includedir=$INCLUDEDIR

Name: numalab-fortran
Description: NUMA placement for Fortran programs: the numalab module over libnumalab
Version: $VERSION
Requires: numalab
Libs: -L\${libdir} -lnumalab_fortran
Cflags: -I\${includedir}
PC
    log "installed the Fortran module ($(gfortran -dumpfullversion 2>/dev/null || gfortran -dumpversion)): $INCLUDEDIR/numalab.mod, $LIBDIR/libnumalab_fortran.a, $LIBDIR/pkgconfig/numalab-fortran.pc"
else
    log "gfortran not found: the Fortran module is not installed (apt-get install gfortran)"
fi
