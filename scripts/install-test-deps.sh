#!/usr/bin/env bash
# Installs what the test suite needs beyond the build (scripts/install-deps.sh)
# and the guest (guest/fetch-kernel.sh), non-interactively and idempotently:
# Debian's Chromium, whose headless mode renders report.html in the browser
# tests, and a font for it (DejaVu), so text has the same metrics everywhere.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "install-test-deps: error: apt needs root (run as root or install sudo)" >&2; exit 1; }
    SUDO="sudo -n"
fi
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
need=()
for pkg in chromium fonts-dejavu-core; do
    installed "$pkg" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "install-test-deps: apt-get install ${need[*]}"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
    echo "install-test-deps: chromium and fonts present"
fi
echo "install-test-deps: using $(chromium --version 2>/dev/null | head -n1)"
