#!/usr/bin/env bash
# usage: cluster/down.sh [STATE_DIR]
#
# Stop numalab's test cluster: the daemons up.sh started (by their pid
# files), then anything still using STATE_DIR or living in the nodes'
# network namespaces (job steps, tasks); remove node 2's cpuset cgroup, the
# namespaces, the veth pairs and the bridge. Idempotent: safe twice, or after
# a half-failed up.sh. STATE_DIR's files (logs, generated config) are kept
# for post-mortems; the next up.sh wipes them.
# Prints one line; exits 1 when something could not be removed.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE=$(realpath -m -- "${1:-$NL_DEFAULT_DIR}")
[ "$(id -u)" = 0 ] || { echo "numalab-cluster: down FAILED: not root" >&2; exit 1; }
problems=()

# Is $1 a live process of this cluster? (its command line names STATE_DIR,
# or it lives in one of the nodes' network namespaces)
ours() {
    local p=$1 n
    [ -n "$p" ] && [ -d "/proc/$p" ] || return 1
    tr '\0' '\n' 2>/dev/null < "/proc/$p/cmdline" | grep -qF -- "$STATE/" && return 0
    for n in "${NL_NODES[@]}"; do
        [ -e "/run/netns/$n" ] && ip netns identify "$p" 2>/dev/null | grep -qx "$n" && return 0
    done
    return 1
}

# Gone, or a zombie (dead; only waiting to be reaped).
dead() {
    [ ! -d "/proc/$1" ] || [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

# Wait up to $1 tenths of a second for the pids $2... to be dead.
wait_dead() {
    local t=$1 p alive; shift
    while [ "$t" -gt 0 ]; do
        alive=0
        for p in "$@"; do dead "$p" || alive=1; done
        [ "$alive" = 0 ] && return 0
        sleep 0.1; t=$((t - 1))
    done
    return 1
}

signalled=()
stop() {  # stop GRACE PID...: SIGTERM, wait up to GRACE tenths of a second, SIGKILL
    local grace=$1 p; shift
    [ $# -gt 0 ] || return 0
    signalled+=("$@")
    kill -TERM "$@" 2>/dev/null
    wait_dead "$grace" "$@" && return 0
    for p in "$@"; do dead "$p" || kill -KILL "$p" 2>/dev/null; done
    wait_dead 30 "$@"
}

# 1. The daemons, by pid file: slurmds, then slurmctld, then munged last
#    (the others talk to it while they shut down).
pids_from() {
    local f p
    for f in "$@"; do
        [ -s "$f" ] || continue
        p=$(head -c 20 "$f" | tr -dc 0-9)
        ours "$p" && echo "$p"
    done | sort -u
}
if [ -d "$STATE" ]; then
    stop 50 $(pids_from "$STATE"/pids/slurmd-*.pid "$STATE"/nodes/*/slurmd.pid)
    stop 50 $(pids_from "$STATE"/pids/slurmctld.pid "$STATE"/ctld/slurmctld.pid)
fi

# 2. Anything else: slurmstepd and job tasks (in the nodes' netns, or
#    holding files under STATE_DIR). slurmstepd ignores SIGTERM, so the grace
#    is short. Twice, for children forked meanwhile.
for round in 1 2; do
    rest=$(nl_cluster_pids "$STATE" | grep -vxF -f <(pids_from "$STATE/munge/munged.pid") || true)
    stop 10 $rest
done
[ -d "$STATE" ] && stop 50 $(pids_from "$STATE/munge/munged.pid")
rest=$(nl_cluster_pids "$STATE" | tr '\n' ' ')
for p in $rest; do dead "$p" || problems+=("process $p ($(tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline" | cut -c1-60))"); done

# Dead processes stay zombies until their parent reaps them; ours were
# orphaned to pid 1, which may reap late (this sandbox's init takes ~1.5 s).
# Wait a little so that "ps" shows nothing of the cluster afterwards.
for _ in $(seq 50); do
    z=0
    for p in "${signalled[@]}"; do [ ! -d "/proc/$p" ] || { z=1; break; }; done
    [ "$z" = 0 ] && break
    sleep 0.1
done

# 3. Mounts under STATE_DIR (there should be none outside the nodes' private
#    mount namespaces, which died with their processes).
awk -v d="$STATE" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null
done
awk -v d="$STATE" 'index($2, d) == 1' /proc/mounts | grep -q . && problems+=("mounts under $STATE")

# 4. Node 2's cpuset cgroup.
read -r _cgver cgroot <<< "$(nl_cpuset_root)"
if [ -n "${cgroot:-}" ] && [ -d "$cgroot/$NL_CPUSET_NAME" ]; then
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        rmdir "$cgroot/$NL_CPUSET_NAME" 2>/dev/null && break
        sleep 0.2
    done
    [ -d "$cgroot/$NL_CPUSET_NAME" ] && problems+=("cgroup $cgroot/$NL_CPUSET_NAME")
fi
if [ -e "$STATE/cpuset-enabled-by-us" ] && [ -n "${cgroot:-}" ]; then
    echo -cpuset > "$cgroot/cgroup.subtree_control" 2>/dev/null && rm -f "$STATE/cpuset-enabled-by-us"
fi

# 5. Network: the namespaces (their end of each veth goes with them; the
#    kernel destroys a namespace asynchronously, so give the pair a moment
#    to vanish), any host end left, the bridge.
link_exists() { ip link show "$1" >/dev/null 2>&1; }
for n in "${NL_NODES[@]}"; do
    if [ -e "/run/netns/$n" ]; then
        ip netns del "$n" 2>/dev/null || problems+=("netns $n")
    fi
done
for i in 0 1; do
    l=${NL_NODE_IFS[$i]}
    for _ in $(seq 30); do link_exists "$l" || break; sleep 0.1; done
    link_exists "$l" && ip link del "$l" 2>/dev/null
    link_exists "$l" && problems+=("link $l")
done
if link_exists "$NL_BRIDGE"; then
    ip link del "$NL_BRIDGE" 2>/dev/null
    link_exists "$NL_BRIDGE" && problems+=("link $NL_BRIDGE")
fi
# /run/netns's self bind mount and the directory, when up.sh's "ip netns
# add" made them and no other namespace lives there now.
if [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ]; then
    if [ -e "$STATE/run-netns-mount-by-us" ] && mountpoint -q /run/netns; then
        umount /run/netns 2>/dev/null || problems+=("mount /run/netns")
    fi
    if [ -e "$STATE/run-netns-dir-by-us" ] && ! mountpoint -q /run/netns; then
        rmdir /run/netns 2>/dev/null
    fi
fi
rm -f "$STATE/run-netns-mount-by-us" "$STATE/run-netns-dir-by-us" 2>/dev/null

if [ ${#problems[@]} -gt 0 ]; then
    echo "numalab-cluster: down FAILED, left behind: ${problems[*]}" >&2
    exit 1
fi
echo "numalab-cluster: down: nothing left of the cluster in $STATE"
