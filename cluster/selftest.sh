#!/usr/bin/env bash
# usage: cluster/selftest.sh
#
# Checks numalab's test cluster end to end, one line per check ("ok" or
# "FAIL: why"), and exits 1 if any check failed:
#   1. a plain cluster (with-cluster.sh): both hostnames from srun -N 2;
#      --cpu-bind=verbose,cores over 4 tasks; SLURM_LOCALID 0,1 on each node;
#      both nodes see this machine's THP setting and CPUs; the MPI program
#      (tests/programs/mpi_ranks.c) over 4 ranks by srun --mpi=pmix, by
#      mpirun inside salloc and by mpirun inside sbatch;
#   2. a cluster whose node 2 differs (NUMALAB_CLUSTER_NODE2_THP=never,
#      NUMALAB_CLUSTER_NODE2_CPUS=<first CPU>): node 2 sees both, node 1 the
#      real values; MPI across the two;
#   after each: no daemon, netns, link, mount or cgroup of the cluster left.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
REPO=$(cd "$HERE/.." && pwd)

failures=0
ok()   { echo "ok   - $*"; }
fail() { echo "FAIL - $*"; failures=$((failures + 1)); }
# check DESCRIPTION EXPECTED ACTUAL
check() {
    if [ "$2" = "$3" ]; then ok "$1: $(echo $3)"; else fail "$1: expected '$(echo $2)', got '$(echo $3)'"; fi
}
# Every cluster command is bounded, its stderr joins stdout, less Slurm's
# chatter about queueing ("srun: job 4 queued and waiting for resources").
T() {
    timeout 60 "$@" 2>&1 |
        grep -Ev '^(srun|salloc): (job [0-9]+ (queued|has been allocated)|Granted job|Relinquishing job|Pending job|Nodes .* are ready|Waiting for resource|Job allocation [0-9]+ has been revoked)'
    return "${PIPESTATUS[0]}"
}
# One line per node: "HOST THP CPUS" (THP with _ for blanks), sorted, by commas.
NODE_VIEW='echo "$(hostname) $(tr " " _ < /sys/kernel/mm/transparent_hugepage/enabled) $(awk "/^Cpus_allowed_list/ { print \$2 }" /proc/self/status)"'


# ---------------------------------------------------------------- inside a cluster
inner_plain() {
    local out err host_thp host_cpus mpi
    host_thp=$(cat "$NL_THP_FILE")
    host_cpus=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)

    out=$(T srun -N 2 hostname | sort)
    check "srun -N 2 hostname gives both nodes" "nlnode1 nlnode2" "$(echo $out)"

    err=$(T srun -N2 -n4 --cpu-bind=verbose,cores true)
    if [ $? = 0 ] && [ "$(grep -c 'cpu-bind.*mask' <<< "$err")" = 4 ]; then
        ok "srun -N2 -n4 --cpu-bind=verbose,cores true: $(grep -o 'nlnode[12], task *[0-9] *[0-9] \[[0-9]*\]: mask 0x[0-9a-f]*' <<< "$err" | sed 's/ \[[0-9]*\]//; s/  */ /g' | sort | paste -sd';')"
    else
        fail "srun -N2 -n4 --cpu-bind=verbose,cores true: $(echo $err)"
    fi

    out=$(T srun -N2 -n4 sh -c 'echo $(hostname) $SLURM_LOCALID' | sort | paste -sd,)
    check "SLURM_LOCALID of 4 tasks on 2 nodes" "nlnode1 0,nlnode1 1,nlnode2 0,nlnode2 1" "$out"

    # Whole nodes: an exclusive allocation and a step that takes all of it.
    # (Slurm 22.05: srun --exclusive on a step implies --exact, so
    # "srun --exclusive --ntasks-per-node=1" gets ONE CPU per task.)
    local t=${host_thp// /_}
    out=$(T salloc -N2 --exclusive srun --ntasks-per-node=1 --whole --cpu-bind=none sh -c "$NODE_VIEW" | sort | paste -sd,)
    check "whole nodes see this machine's THP and CPUs (salloc --exclusive, srun --whole)" \
        "nlnode1 $t $host_cpus,nlnode2 $t $host_cpus" "$out"
    out=$(T srun -N2 --ntasks-per-node=1 --exclusive --cpu-bind=none sh -c "$NODE_VIEW" | sort | paste -sd,)
    echo "info - srun -N2 --ntasks-per-node=1 --exclusive (an exact step): $out"

    mpi_checks 4 "nlnode1:0 nlnode1:1 nlnode2:0 nlnode2:1"
}

inner_node2() {
    local out host_thp host_cpus want_thp
    host_thp=$(cat "$NL_THP_FILE")
    host_cpus=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)
    want_thp=$(sed 's/\[//; s/\]//; s/\bnever\b/[never]/' <<< "$host_thp")

    out=$(T srun -N 2 hostname | sort)
    check "srun -N 2 hostname gives both nodes" "nlnode1 nlnode2" "$(echo $out)"

    out=$(T srun -w nlnode2 cat "$NL_THP_FILE")
    check "srun -w nlnode2 cat .../transparent_hugepage/enabled" "$want_thp" "$out"
    out=$(T srun -w nlnode1 cat "$NL_THP_FILE")
    check "srun -w nlnode1 cat .../transparent_hugepage/enabled (this machine's)" "$host_thp" "$out"
    check "this machine's THP unchanged" "$host_thp" "$(cat "$NL_THP_FILE")"

    out=$(T srun -w nlnode2 grep Cpus_allowed_list /proc/self/status | awk '{ print $2 }')
    check "srun -w nlnode2 grep Cpus_allowed_list /proc/self/status" "$NUMALAB_CLUSTER_NODE2_CPUS" "$out"
    out=$(T srun -w nlnode1 --exclusive grep Cpus_allowed_list /proc/self/status | awk '{ print $2 }')
    check "srun -w nlnode1 --exclusive grep Cpus_allowed_list (this machine's)" "$host_cpus" "$out"
    out=$(T salloc -N2 --exclusive srun --ntasks-per-node=1 --whole --cpu-bind=none sh -c "$NODE_VIEW" | sort | paste -sd,)
    check "whole nodes: node 1 this machine's THP and CPUs, node 2 its own" \
        "nlnode1 ${host_thp// /_} $host_cpus,nlnode2 ${want_thp// /_} $NUMALAB_CLUSTER_NODE2_CPUS" "$out"

    # Node 2 has one usable CPU (the rest are CpuSpecList): 3 ranks fit.
    mpi_checks 3 "nlnode1:0 nlnode1:1 nlnode2:0"
}

# mpi_checks NRANKS "HOST:LOCAL ..." -- the MPI program three ways.
mpi_checks() {
    local n=$1 want=$2 bin=$NUMALAB_CLUSTER_DIR/mpi_ranks out rc
    if ! out=$(mpicc -O2 -Wall -o "$bin" "$REPO/tests/programs/mpi_ranks.c" 2>&1); then
        fail "mpicc tests/programs/mpi_ranks.c: $out"; return
    fi
    local root_env=()
    [ "$(id -u)" != 0 ] || root_env=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)

    out=$(T srun -N 2 -n "$n" "$bin"); rc=$?
    mpi_verdict "srun -N 2 -n $n mpi_ranks (MpiDefault=$(scontrol show config | awk '$1 == "MpiDefault" { print $3 }'))" "$n" "$want" "$rc" "$out"
    out=$(T srun --mpi=pmix -N 2 -n "$n" "$bin"); rc=$?
    mpi_verdict "srun --mpi=pmix -N 2 -n $n mpi_ranks" "$n" "$want" "$rc" "$out"

    out=$(T env "${root_env[@]}" salloc -N 2 -n "$n" mpirun "$bin"); rc=$?
    mpi_verdict "salloc -N 2 -n $n mpirun mpi_ranks (${root_env[*]:-not root})" "$n" "$want" "$rc" "$out"

    local script=$NUMALAB_CLUSTER_DIR/mpi_job.sh log=$NUMALAB_CLUSTER_DIR/mpi_job.out
    printf '#!/bin/sh\necho "batch host $(hostname)"\nexec mpirun %s\n' "$bin" > "$script"
    T env "${root_env[@]}" sbatch --wait -N 2 -n "$n" -o "$log" "$script" >/dev/null; rc=$?
    out=$(cat "$log" 2>/dev/null)
    if [ "$(head -1 <<< "$out")" != "batch host nlnode1" ]; then
        fail "sbatch --wait -N 2 -n $n (mpirun inside): batch script not on nlnode1: $(echo $out)"
    else
        mpi_verdict "sbatch -N 2 -n $n, mpirun mpi_ranks inside (batch on nlnode1)" "$n" "$want" "$rc" "$(tail -n +2 <<< "$out")"
    fi
}

# mpi_verdict WHAT NRANKS "HOST:LOCAL ..." RC OUTPUT
mpi_verdict() {
    local what=$1 n=$2 want=$3 rc=$4 out=$5 lines got ranks
    lines=$(grep '^rank ' <<< "$out")
    ranks=$(awk '{ print $2 "/" $4 }' <<< "$lines" | sort -n | paste -sd' ')
    got=$(awk '{ print $8 ":" $6 }' <<< "$lines" | sort | paste -sd' ')
    local want_ranks
    want_ranks=$(for ((r = 0; r < n; r++)); do echo "$r/$n"; done | paste -sd' ')
    if [ "$rc" = 0 ] && [ "$ranks" = "$want_ranks" ] && [ "$got" = "$want" ]; then
        ok "$what: $(sort -k2n <<< "$lines" | sed 's/^rank //' | paste -sd';')"
    else
        fail "$what: rc $rc, ranks '$ranks' (want '$want_ranks'), host:local '$got' (want '$want'): $(tail -5 <<< "$out" | tr '\n' ' ')"
    fi
}

# ---------------------------------------------------------------- after a cluster
# /run/netns: absent, a directory, or a mount point ("ip netns add" makes it
# a bind mount of itself); down.sh must leave it as it was.
netns_mount_state() {
    if mountpoint -q /run/netns 2>/dev/null; then echo "mount point"
    elif [ -d /run/netns ]; then echo directory
    else echo absent; fi
}
check_nothing_left() {
    local left="" p z
    for _ in $(seq 30); do      # dead daemons may wait a moment for pid 1 to reap them
        left=$(ps -eo pid=,stat=,comm=,args= | awk -v d="$NL_DEFAULT_DIR/" '
            $3 ~ /^(slurmctld|slurmd|slurmstepd)$/ || ($3 == "munged" && index($0, d)) { print $1 "(" $3 "," $2 ")" }' | paste -sd' ')
        [ -z "$left" ] && break
        sleep 0.1
    done
    [ -z "$left" ] || left="processes: $left; "
    z=$(ip netns list | awk '$1 ~ /^nl/ { print $1 }' | paste -sd' ')
    [ -z "$z" ] || left="${left}netns: $z; "
    z=$(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep '^nl' | paste -sd' ')
    [ -z "$z" ] || left="${left}links: $z; "
    z=$(grep -F -e numalab-cluster -e /run/netns/nl /proc/mounts | awk '{ print $2 }' | paste -sd' ')
    [ -z "$z" ] || left="${left}mounts: $z; "
    [ "$(netns_mount_state)" = "$NETNS_BEFORE" ] ||
        left="${left}/run/netns: $(netns_mount_state) (before: $NETNS_BEFORE); "
    read -r _v cg <<< "$(nl_cpuset_root)"
    [ -z "${cg:-}" ] || [ ! -d "$cg/$NL_CPUSET_NAME" ] || left="${left}cgroup: $cg/$NL_CPUSET_NAME; "
    if [ -z "$left" ]; then
        ok "after down.sh: no munged/slurmctld/slurmd/slurmstepd, no nl* netns or link, no mount, /run/netns $NETNS_BEFORE as before, no cgroup"
    else
        fail "after down.sh, left behind: $left"
    fi
}

case ${1:-} in
    --inner-plain) inner_plain; exit $((failures > 0)) ;;
    --inner-node2) inner_node2; exit $((failures > 0)) ;;
    '') ;;
    *) echo "usage: $0" >&2; exit 2 ;;
esac

# ---------------------------------------------------------------- outside
[ "$(id -u)" = 0 ] || { echo "selftest.sh: must run as root" >&2; exit 1; }
unset NUMALAB_CLUSTER_NODE2_THP NUMALAB_CLUSTER_NODE2_CPUS
NETNS_BEFORE=$(netns_mount_state)
echo "# 1. a plain cluster"
bash "$HERE/with-cluster.sh" bash "$HERE/selftest.sh" --inner-plain ||
    fail "cluster 1 (see the lines above)"
check_nothing_left

first_cpu=$(nl_expand_cpus "$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)" | head -1)
echo "# 2. node 2 differs: NUMALAB_CLUSTER_NODE2_THP=never NUMALAB_CLUSTER_NODE2_CPUS=$first_cpu"
NUMALAB_CLUSTER_NODE2_THP=never NUMALAB_CLUSTER_NODE2_CPUS=$first_cpu \
    bash "$HERE/with-cluster.sh" bash "$HERE/selftest.sh" --inner-node2 ||
    fail "cluster 2 (see the lines above)"
check_nothing_left

if [ "$failures" = 0 ]; then
    echo "selftest: all checks passed"
else
    echo "selftest: $failures failure(s)"
    exit 1
fi
