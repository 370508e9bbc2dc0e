#!/usr/bin/env bash
# Fetch the stock Debian kernels of the numalab test guest, unpacked with dpkg -x, never installed:
#   6.12 (weighted interleave, >= 6.9): linux-image-amd64 of bookworm-backports, leaving
#        guest/cache/vmlinuz (plus guest/cache/config and guest/cache/kernel-release);
#   6.1  (no weighted interleave): linux-image-amd64 of bookworm itself (Debian 12's stock kernel),
#        leaving guest/cache/vmlinuz-6.1 (plus guest/cache/config-6.1 and kernel-release-6.1).
# Also installs the host tools the guest needs (qemu-system-x86, busybox-static, cpio, binutils).
# Idempotent and non-interactive: a kernel already in guest/cache/ is left alone.
# Needs root (or sudo) for apt.
set -euo pipefail

GUEST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="$GUEST_DIR/cache"
BACKPORTS=bookworm-backports
SOURCES_FILE=/etc/apt/sources.list.d/numalab-bookworm-backports.sources
# Built-in (=y) options the guest relies on: serial console, initramfs, NUMA + ACPI SRAT/SLIT/HMAT,
# devtmpfs, tmpfs, THP, page migration. Both kernels must have all of them (6.1 has HMAT too);
# weighted interleave itself (6.9+) has no config option of its own: it comes with NUMA.
REQUIRED_CONFIG="SERIAL_8250 SERIAL_8250_CONSOLE BLK_DEV_INITRD RD_GZIP NUMA ACPI_NUMA ACPI_HMAT
HMEM_REPORTING DEVTMPFS TMPFS PROC_FS SYSFS TRANSPARENT_HUGEPAGE MIGRATION"

# The kernels: NAME SUFFIX SUITES (first that resolves wins) VERSION-GLOB.
# SUFFIX "" keeps the historical file names of the 6.12 kernel (vmlinuz, config, kernel-release).
KERNELS=(
    "6.12||$BACKPORTS|linux-image-6.1[2-9]*|linux-image-6.[2-9][0-9]*|linux-image-[7-9].*"
    "6.1|-6.1|bookworm bookworm-updates bookworm-security|linux-image-6.1.*"
)

export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "fetch-kernel: error: apt needs root (run as root or install sudo)" >&2; exit 1
    fi
fi

log() { echo "fetch-kernel: $*"; }
die() { echo "fetch-kernel: error: $*" >&2; exit 1; }

# 1. Host tools (only what is missing).
need=()
for pkg in qemu-system-x86 busybox-static cpio binutils gzip; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        need+=("$pkg")
    fi
done
APT_UPDATED=0
if [ ${#need[@]} -gt 0 ]; then
    log "installing host packages: ${need[*]}"
    $SUDO apt-get update -qq
    APT_UPDATED=1
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
    log "host packages present (qemu-system-x86, busybox-static, cpio, binutils, gzip)"
fi

# 2. Kernels already there?
todo=()
for k in "${KERNELS[@]}"; do
    IFS='|' read -r name suffix _ <<<"$k"
    if [ -s "$CACHE/vmlinuz$suffix" ]; then
        log "kernel $name already present: $CACHE/vmlinuz$suffix ($(cat "$CACHE/kernel-release$suffix" 2>/dev/null || echo unknown)); nothing to do"
    else
        todo+=("$k")
    fi
done
[ ${#todo[@]} -gt 0 ] || exit 0
mkdir -p "$CACHE"

# 3. bookworm-backports in apt sources (only for the 6.12 kernel).
if [[ " ${todo[*]%%|*} " == *" 6.12 "* ]]; then
    if grep -rqsE "^[^#]*\b$BACKPORTS\b" /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null; then
        log "apt suite $BACKPORTS already configured"
    else
        keyring=$(sed -n 's/^Signed-By:[[:space:]]*//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
        [ -n "$keyring" ] || keyring=/usr/share/keyrings/debian-archive-keyring.gpg
        log "adding apt suite $BACKPORTS in $SOURCES_FILE (keyring $keyring)"
        printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
            "$BACKPORTS" "$keyring" | $SUDO tee "$SOURCES_FILE" >/dev/null
        APT_UPDATED=0
    fi
fi
if [ "$APT_UPDATED" = 0 ]; then
    log "apt-get update"
    $SUDO apt-get update -qq
fi

# 4. Resolve the kernel package from the linux-image-amd64 metapackage of a suite:
#    prints linux-image-<abi>-amd64=<version>.
resolve() {
    apt-cache show "linux-image-amd64/$1" 2>/dev/null \
        | sed -n 's/^Depends:[[:space:]]*//p' | head -n1 | tr ',' '\n' \
        | sed -n 's/^[[:space:]]*\(linux-image-[0-9][^[:space:]]*-amd64\)[[:space:]]*(= \([^)]*\)).*/\1=\2/p' | head -n1
}

work=$(mktemp -d "$CACHE/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"   # apt-get download drops to user _apt
# As root, apt would drop to user _apt, which may not reach this directory: download as root.
sandbox=()
[ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)

for k in "${todo[@]}"; do
    IFS='|' read -r name suffix suites globs <<<"$k"
    pkgver="" suite=""
    for s in $suites; do
        pkgver=$(resolve "$s" || true)
        if [ -n "$pkgver" ]; then suite=$s; break; fi
    done
    [ -n "$pkgver" ] || die "cannot resolve linux-image-amd64 in ${suites// / or } (kernel $name)"
    pkg=${pkgver%%=*}
    ok=0
    IFS='|' read -ra patterns <<<"$globs"
    for p in "${patterns[@]}"; do
        # shellcheck disable=SC2053  # glob match intended
        [[ "$pkg" == $p ]] && ok=1
    done
    [ "$ok" = 1 ] || die "$pkg from $suite is not the expected kernel $name"
    log "kernel $name package: $pkgver (from linux-image-amd64/$suite)"

    # 5. Download and unpack.
    dir="$work/$name"
    mkdir -p "$dir" && chmod 755 "$dir"
    log "apt-get download $pkgver"
    (cd "$dir" && apt-get download -qq "${sandbox[@]}" "$pkgver")
    deb=$(ls "$dir"/*.deb)
    log "unpacking $(basename "$deb") with dpkg -x"
    dpkg -x "$deb" "$dir/root"
    vmlinuz=$(ls "$dir"/root/boot/vmlinuz-* | head -n1)
    config=$(ls "$dir"/root/boot/config-* | head -n1)
    release=${vmlinuz##*/vmlinuz-}

    # 6. Check built-in drivers (no modules in the guest).
    missing=""
    for opt in $REQUIRED_CONFIG; do
        grep -qx "CONFIG_$opt=y" "$config" || missing="$missing $opt"
    done
    [ -z "$missing" ] || die "$release lacks built-in (=y):$missing"
    log "config checked ($release): built in:" $REQUIRED_CONFIG

    cp "$config" "$CACHE/config$suffix"
    echo "$release" > "$CACHE/kernel-release$suffix"
    cp "$vmlinuz" "$CACHE/vmlinuz$suffix.tmp" && mv "$CACHE/vmlinuz$suffix.tmp" "$CACHE/vmlinuz$suffix"
    rm -rf "$dir"
    log "done: $CACHE/vmlinuz$suffix ($release)"
done
