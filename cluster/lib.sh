# Shared names and helpers for numalab's test cluster (sourced by up.sh,
# down.sh, with-cluster.sh and selftest.sh). Everything host-global that the
# cluster creates carries the prefix "nl" (network) or "numalab" (cgroup).

NL_CLUSTER_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NL_DEFAULT_DIR=${NUMALAB_CLUSTER_DIR:-/tmp/numalab-cluster}

NL_NET=${NUMALAB_CLUSTER_NET:-10.213.77}   # a /24 on the bridge
NL_BRIDGE=nlbr0
NL_CTL_NAME=nlctl                          # slurmctld's hostname (own UTS ns)
NL_CTL_ADDR=$NL_NET.1                      # the bridge's address, root netns
NL_NODES=(nlnode1 nlnode2)                 # netns name = hostname = NodeName
NL_NODE_ADDRS=("$NL_NET.11" "$NL_NET.12")
NL_NODE_IFS=(nlveth1 nlveth2)              # host side of each veth pair
NL_NODE_INNER_IF=nleth0                    # its peer inside the node's netns
NL_CTLD_PORT=${NUMALAB_CLUSTER_CTLD_PORT:-6917}
NL_SLURMD_PORT=6918                        # one per netns, so no clash
NL_CPUSET_NAME=numalab-nlnode2             # cpuset cgroup for NODE2_CPUS
NL_THP_FILE=/sys/kernel/mm/transparent_hugepage/enabled

# The cpuset cgroup hierarchy for node 2, as "v1 PATH" (cgroup v1's cpuset
# hierarchy) or "v2 PATH" (the unified hierarchy, which offers cpuset); empty
# when there is none.
nl_cpuset_root() {
    local m
    m=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpuset(,|$)/ { print $2; exit }' /proc/mounts)
    if [ -n "$m" ]; then echo "v1 $m"; return; fi
    m=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
    if [ -n "$m" ] && grep -qw cpuset "$m/cgroup.controllers" 2>/dev/null; then
        echo "v2 $m"
    fi
}

# Expand a CPU list ("0-2,5") to one CPU per line.
nl_expand_cpus() {
    local part
    for part in ${1//,/ }; do
        case $part in
            *-*) seq "${part%-*}" "${part#*-}" ;;
            *) echo "$part" ;;
        esac
    done
}

# Slurm's abstract IDs (CPUs numbered socket by socket, core by core, the
# threads of a core together) of the online CPUs NOT in the OS CPU list $1,
# comma-separated; fails with a message when $1 names an offline CPU.
nl_spec_cpus_outside() {
    local -A want=() known=()
    local c cpu idx=0 out=()
    for c in $(nl_expand_cpus "$1"); do want[$c]=1; done
    while IFS=, read -r cpu _core _socket; do
        known[$cpu]=1
        [ -n "${want[$cpu]:-}" ] || out+=("$idx")
        idx=$((idx + 1))
    done < <(lscpu -p=CPU,CORE,SOCKET | grep -v '^#' | sort -t, -k3,3n -k2,2n -k1,1n)
    for c in "${!want[@]}"; do
        [ -n "${known[$c]:-}" ] || { echo "CPU $c is not online here"; return 1; }
    done
    [ "${#out[@]}" -lt "$idx" ] || { echo "no CPU left"; return 1; }
    (IFS=,; echo "${out[*]}")
}

# PIDs (one per line) of processes that belong to a cluster in state dir $1:
# our daemons (their command line names a path under the state dir),
# anything with its cwd, executable or an open file under it, and everything
# inside the nodes' network namespaces. The calling shell, its ancestors and
# its descendants (this function's own subshells) are never listed.
nl_cluster_pids() {
    local dir=${1%/} p q link n
    local -a cands=()
    mapfile -t cands < <({
        for n in "${NL_NODES[@]}"; do
            [ -e "/run/netns/$n" ] && ip netns pids "$n" 2>/dev/null
        done
        grep -alF -- "$dir/" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3
        find /proc/[0-9]*/cwd /proc/[0-9]*/exe /proc/[0-9]*/fd -maxdepth 1 \
             \( -lname "$dir" -o -lname "$dir/*" \) 2>/dev/null | cut -d/ -f3
    } | sort -un)
    local -A mine=()
    p=$$
    while [ -n "$p" ] && [ "$p" != 0 ]; do
        mine[$p]=1
        p=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
    done
    for p in "${cands[@]}"; do
        [ -d "/proc/$p" ] || continue
        [ -z "${mine[$p]:-}" ] || continue
        q=$p                       # skip our own descendants
        while [ -n "$q" ] && [ "$q" != 0 ] && [ "$q" != 1 ] && [ "$q" != $$ ]; do
            q=$(awk '/^PPid:/ { print $2 }' "/proc/$q/status" 2>/dev/null)
        done
        [ "$q" = $$ ] || echo "$p"
    done
}
