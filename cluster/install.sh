#!/usr/bin/env bash
# Install what numalab's test cluster needs (Debian 12 packages), without
# starting or enabling the distribution's own munge/slurm services.
# Idempotent: when every package is already installed, apt is not run.
set -euo pipefail

PKGS=(slurmctld slurmd slurm-client munge openmpi-bin libopenmpi-dev
      iproute2 util-linux procps psmisc gcc libc6-dev)
SERVICES=(munge slurmd slurmctld)

if [ "$(id -u)" != 0 ]; then
    echo "install.sh: must run as root (apt-get, namespaces)" >&2
    exit 1
fi

missing=()
for p in "${PKGS[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install.sh: all packages already installed (${PKGS[*]})"
else
    echo "install.sh: installing ${missing[*]}"
    # Forbid maintainer scripts from starting services for this install only;
    # an existing policy-rc.d (Docker images ship one) is put back afterwards.
    POLICY=/usr/sbin/policy-rc.d
    BACKUP=""
    if [ -e "$POLICY" ]; then
        BACKUP=$(mktemp /tmp/numalab-policy-rc.d.XXXXXX)
        cp -a "$POLICY" "$BACKUP"
    fi
    restore_policy() {
        if [ -n "$BACKUP" ]; then
            cp -a "$BACKUP" "$POLICY" && rm -f "$BACKUP"
        else
            rm -f "$POLICY"
        fi
    }
    trap restore_policy EXIT
    printf '#!/bin/sh\n# numalab cluster/install.sh: no service starts during install\nexit 101\n' > "$POLICY"
    chmod 755 "$POLICY"
    if ! apt-get install -y --no-install-recommends --dry-run "${missing[@]}" >/dev/null 2>&1; then
        apt-get update -q
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    restore_policy
    trap - EXIT
fi

# Make sure the distribution's services neither run nor start at boot: the
# cluster runs its own munged/slurmctld/slurmd with its own key and config.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    for s in "${SERVICES[@]}"; do
        systemctl disable --now "$s" >/dev/null 2>&1 || true
    done
else
    for s in "${SERVICES[@]}"; do
        if [ -x "/etc/init.d/$s" ]; then
            /etc/init.d/"$s" stop >/dev/null 2>&1 || true
            update-rc.d "$s" disable >/dev/null 2>&1 || true
        fi
    done
fi

for b in munged mungekey slurmctld slurmd srun sinfo scontrol mpicc mpirun ip unshare nsenter; do
    command -v "$b" >/dev/null || { echo "install.sh: $b not found after install" >&2; exit 1; }
done
echo "install.sh: ok ($(dpkg-query -W -f='slurm ${Version}' slurmd), $(dpkg-query -W -f='munge ${Version}' munge), $(dpkg-query -W -f='openmpi ${Version}' openmpi-bin))"
