#!/usr/bin/env bash
# Fetch a stock Debian kernel with weighted interleave (>= 6.9) for the numalab test guest:
# the linux-image package of bookworm-backports (6.12.x), unpacked with dpkg -x, leaving
# guest/cache/vmlinuz (plus guest/cache/config and guest/cache/kernel-release).
# Also installs the host tools the guest needs (qemu-system-x86, busybox-static, cpio, binutils).
# Idempotent and non-interactive. Needs root (or sudo) for apt.
set -euo pipefail

GUEST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="$GUEST_DIR/cache"
SUITE=bookworm-backports
SOURCES_FILE=/etc/apt/sources.list.d/numalab-bookworm-backports.sources
# Built-in (=y) options the guest relies on: serial console, initramfs, NUMA + ACPI SRAT/SLIT/HMAT,
# devtmpfs, tmpfs, THP, weighted interleave needs NUMA + mempolicy sysfs (>= 6.9).
REQUIRED_CONFIG="SERIAL_8250 SERIAL_8250_CONSOLE BLK_DEV_INITRD RD_GZIP NUMA ACPI_NUMA ACPI_HMAT
HMEM_REPORTING DEVTMPFS TMPFS PROC_FS SYSFS TRANSPARENT_HUGEPAGE MIGRATION"

export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "fetch-kernel: error: apt needs root (run as root or install sudo)" >&2; exit 1
    fi
fi

log() { echo "fetch-kernel: $*"; }

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

# 2. Kernel already there?
if [ -s "$CACHE/vmlinuz" ]; then
    log "kernel already present: $CACHE/vmlinuz ($(cat "$CACHE/kernel-release" 2>/dev/null || echo unknown)); nothing to do"
    exit 0
fi
mkdir -p "$CACHE"

# 3. bookworm-backports in apt sources.
if grep -rqsE "^[^#]*\b$SUITE\b" /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null; then
    log "apt suite $SUITE already configured"
else
    keyring=$(sed -n 's/^Signed-By:[[:space:]]*//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
    [ -n "$keyring" ] || keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    log "adding apt suite $SUITE in $SOURCES_FILE (keyring $keyring)"
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
        "$SUITE" "$keyring" | $SUDO tee "$SOURCES_FILE" >/dev/null
    APT_UPDATED=0
fi

# 4. Resolve the kernel package from the backports metapackage.
resolve() {
    apt-cache show "linux-image-amd64/$SUITE" 2>/dev/null \
        | sed -n 's/^Depends:[[:space:]]*//p' | head -n1 | tr ',' '\n' \
        | sed -n 's/^[[:space:]]*\(linux-image-[0-9][^[:space:]]*-amd64\)[[:space:]]*(= \([^)]*\)).*/\1=\2/p' | head -n1
}
if [ "$APT_UPDATED" = 0 ]; then
    log "apt-get update"
    $SUDO apt-get update -qq
fi
pkgver=$(resolve || true)
if [ -z "$pkgver" ]; then
    echo "fetch-kernel: error: cannot resolve linux-image-amd64 in $SUITE" >&2; exit 1
fi
pkg=${pkgver%%=*}
case "$pkg" in
    linux-image-6.1[2-9]*|linux-image-6.[2-9][0-9]*|linux-image-[7-9].*) ;;
    *) echo "fetch-kernel: error: $pkg is older than expected (need >= 6.12 from $SUITE)" >&2; exit 1 ;;
esac
log "kernel package: $pkgver (from linux-image-amd64/$SUITE)"

# 5. Download and unpack.
work=$(mktemp -d "$CACHE/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"   # apt-get download drops to user _apt
log "apt-get download $pkgver"
# As root, apt would drop to user _apt, which may not reach this directory: download as root.
sandbox=()
[ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)
(cd "$work" && apt-get download -qq "${sandbox[@]}" "$pkgver")
deb=$(ls "$work"/*.deb)
log "unpacking $(basename "$deb") with dpkg -x"
dpkg -x "$deb" "$work/root"
vmlinuz=$(ls "$work"/root/boot/vmlinuz-* | head -n1)
config=$(ls "$work"/root/boot/config-* | head -n1)
release=${vmlinuz##*/vmlinuz-}

# 6. Check built-in drivers (no modules in the guest).
missing=""
for opt in $REQUIRED_CONFIG; do
    grep -qx "CONFIG_$opt=y" "$config" || missing="$missing $opt"
done
if [ -n "$missing" ]; then
    echo "fetch-kernel: error: $release lacks built-in (=y):$missing" >&2; exit 1
fi
log "config checked: built in:" $REQUIRED_CONFIG

cp "$config" "$CACHE/config"
echo "$release" > "$CACHE/kernel-release"
cp "$vmlinuz" "$CACHE/vmlinuz.tmp" && mv "$CACHE/vmlinuz.tmp" "$CACHE/vmlinuz"
log "done: $CACHE/vmlinuz ($release)"
