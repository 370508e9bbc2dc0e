#!/usr/bin/env bash
# usage: cluster/with-cluster.sh CMD [ARGS...]
#
# Start numalab's two-node test cluster (up.sh), run CMD with SLURM_CONF,
# NUMALAB_CLUSTER_DIR and NUMALAB_CLUSTER_NODES=nlnode1,nlnode2 exported,
# then stop it (down.sh) on every exit path: CMD's end, a failure, Ctrl-C,
# SIGTERM, SIGHUP. Exits with CMD's status (or up.sh's: 1 failed, 2 refused
# because the cluster's names are taken; or 128+signal).
#
# The cluster's names and subnet are host-global, so clusters take turns: a
# second with-cluster.sh waits (up to NUMALAB_CLUSTER_LOCK_WAIT seconds, 600)
# for the first one's lock. The state directory is NUMALAB_CLUSTER_DIR
# (default /tmp/numalab-cluster); NUMALAB_CLUSTER_NODE2_THP and
# NUMALAB_CLUSTER_NODE2_CPUS pass through to up.sh.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ $# -eq 0 ]; then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi
STATE=$(realpath -m -- "$NL_DEFAULT_DIR")
LOCK=${NUMALAB_CLUSTER_LOCK:-/tmp/numalab-cluster.lock}

exec 9>>"$LOCK" || { echo "numalab-cluster: cannot open lock $LOCK" >&2; exit 1; }
if ! flock -w "${NUMALAB_CLUSTER_LOCK_WAIT:-600}" 9; then
    echo "numalab-cluster: another cluster held $LOCK for ${NUMALAB_CLUSTER_LOCK_WAIT:-600}s" >&2
    exit 1
fi

child=""
upped=0
finish() {
    local rc=$?
    trap - EXIT INT TERM HUP
    if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    if [ "$upped" = 1 ]; then
        bash "$NL_CLUSTER_SRC/down.sh" "$STATE" 9>&- >&2 || { [ "$rc" != 0 ] || rc=1; }
    fi
    exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# up.sh tears down after its own failures (status 1), and when it refuses
# (status 2: another cluster holds the names) there is nothing of ours to
# stop. down.sh runs on the way out unless up.sh refused.
upped=1
line=$(bash "$NL_CLUSTER_SRC/up.sh" "$STATE" 9>&-)
rc=$?
if [ "$rc" != 0 ]; then
    [ "$rc" != 2 ] || upped=0
    exit "$rc"
fi
echo "$line" >&2
export SLURM_CONF=$STATE/slurm.conf
export NUMALAB_CLUSTER_DIR=$STATE
export NUMALAB_CLUSTER_NODES=$(IFS=,; echo "${NL_NODES[*]}")

# CMD runs in the background (with our stdin) so that a signal to this
# script is handled at once: the trap ends CMD, then brings the cluster down.
"$@" <&0 &
child=$!
wait "$child"
rc=$?
child=""
exit "$rc"
