#!/usr/bin/env bash
# usage: cluster/up.sh [STATE_DIR]
#
# Start numalab's two-node Slurm test cluster on this one machine:
#   - munged with its own key, socket, pid, log and seed under STATE_DIR;
#   - slurmctld in the root network namespace (own UTS namespace, hostname
#     nlctl), listening on the bridge nlbr0's address;
#   - slurmd nlnode1 and nlnode2, each in its own network, UTS and mount
#     namespace, joined to nlbr0 by a veth pair.
# Optional differences on node 2 (for outlier tests):
#   NUMALAB_CLUSTER_NODE2_THP=never|madvise|always  what node 2's processes
#       read in /sys/kernel/mm/transparent_hugepage/enabled (a bind mount in
#       node 2's private mount namespace);
#   NUMALAB_CLUSTER_NODE2_CPUS=LIST  node 2's slurmd, and so its job steps,
#       confined to LIST by a cpuset cgroup (numalab-nlnode2).
# Other knobs: NUMALAB_CLUSTER_TIMEOUT (seconds for the whole start, 60).
#
# On success stdout gets one line, which is also shell to eval:
#   export SLURM_CONF=DIR/slurm.conf NUMALAB_CLUSTER_DIR=DIR ... # up in N s
# On failure stderr gets one line naming what failed (then the tail of the
# daemon's log), everything started is torn down (down.sh), and the exit
# status is 1; 2 when it refused before starting anything (bad settings,
# names or subnet in use: another cluster up), which it then leaves alone.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE=$(realpath -m -- "${1:-$NL_DEFAULT_DIR}")
TIMEOUT=${NUMALAB_CLUSTER_TIMEOUT:-60}
THP=${NUMALAB_CLUSTER_NODE2_THP:-}
N2CPUS=${NUMALAB_CLUSTER_NODE2_CPUS:-}
T0=$(date +%s%N)
DEADLINE=$(( $(date +%s) + TIMEOUT ))
STARTED=0

die() {  # die WHAT [LOGFILE]
    echo "numalab-cluster: up FAILED: $1${2:+ (log: $2)}" >&2
    if [ -n "${2:-}" ] && [ -s "$2" ]; then
        tail -n 12 -- "$2" | sed 's/^/  | /' >&2
    fi
    [ "$STARTED" = 1 ] || exit 2
    trap - INT TERM
    bash "$NL_CLUSTER_SRC/down.sh" "$STATE" >/dev/null 2>&1 ||
        echo "numalab-cluster: down.sh after the failure also failed; run it by hand" >&2
    exit 1
}
trap 'die "interrupted"' INT TERM

left() { echo $(( DEADLINE - $(date +%s) )); }

# ---------------------------------------------------------------- preflight
[ "$(id -u)" = 0 ] || die "not root (namespaces, bridge and cgroups need root)"
for c in munged mungekey munge unmunge slurmctld slurmd sinfo scontrol ip nsenter unshare setsid mountpoint ss awk realpath; do
    command -v "$c" >/dev/null || die "command $c not found (run cluster/install.sh)"
done
case $STATE in
    *[!A-Za-z0-9._/+-]*) die "STATE_DIR '$STATE' has characters other than A-Za-z0-9._/+-" ;;
    /) die "STATE_DIR is /" ;;
esac
[ ${#STATE} -le 80 ] || die "STATE_DIR '$STATE' is too long for a unix socket path"
case $THP in
    ''|never|madvise|always) ;;
    *) die "NUMALAB_CLUSTER_NODE2_THP='$THP' is not never, madvise or always" ;;
esac
case $N2CPUS in
    *[!0-9,-]*) die "NUMALAB_CLUSTER_NODE2_CPUS='$N2CPUS' is not a CPU list like 0 or 0-1,3" ;;
esac
[ -z "$THP" ] || [ -f "$NL_THP_FILE" ] || die "$NL_THP_FILE does not exist here"

# One cluster per machine: the names below are host-global.
ip link show "$NL_BRIDGE" >/dev/null 2>&1 &&
    die "link $NL_BRIDGE exists already (a cluster is up? run cluster/down.sh)"
for i in 0 1; do
    [ -e "/run/netns/${NL_NODES[$i]}" ] &&
        die "netns ${NL_NODES[$i]} exists already (a cluster is up? run cluster/down.sh)"
    ip link show "${NL_NODE_IFS[$i]}" >/dev/null 2>&1 &&
        die "link ${NL_NODE_IFS[$i]} exists already (run cluster/down.sh)"
done
used=$(ip -4 -o addr show | awk -v net="$NL_NET." 'index($4, net) == 1 { print $2 " " $4 }')
[ -z "$used" ] || die "subnet $NL_NET.0/24 already has an address here: $used (set NUMALAB_CLUSTER_NET)"
used=$(ip -4 route show match "$NL_NET.0/24" | grep -v '^default' || true)
[ -z "$used" ] || die "subnet $NL_NET.0/24 is already routed here: $used (set NUMALAB_CLUSTER_NET)"
[ -z "$(ss -Hltn "sport = :$NL_CTLD_PORT")" ] ||
    die "TCP port $NL_CTLD_PORT is in use (set NUMALAB_CLUSTER_CTLD_PORT)"
if [ -n "$N2CPUS" ]; then
    SPEC=$(nl_spec_cpus_outside "$N2CPUS") || die "NUMALAB_CLUSTER_NODE2_CPUS='$N2CPUS': $SPEC"
    read -r CG_VER CG_ROOT <<< "$(nl_cpuset_root)"
    [ -n "${CG_ROOT:-}" ] || die "no cpuset cgroup controller mounted, cannot apply NUMALAB_CLUSTER_NODE2_CPUS"
    [ ! -e "$CG_ROOT/$NL_CPUSET_NAME" ] || rmdir "$CG_ROOT/$NL_CPUSET_NAME" 2>/dev/null ||
        die "cgroup $CG_ROOT/$NL_CPUSET_NAME exists and is in use (run cluster/down.sh)"
fi

# A fresh state directory: only ever wipe one that up.sh made.
if [ -d "$STATE" ] && [ -n "$(ls -A "$STATE")" ]; then
    [ -e "$STATE/.numalab-cluster" ] ||
        die "$STATE exists, is not empty and is not a numalab cluster directory"
    live=$(nl_cluster_pids "$STATE" | tr '\n' ' ')
    [ -z "$live" ] || die "processes still use $STATE (pids $live); run cluster/down.sh $STATE"
    rm -rf -- "$STATE"
fi

# From here on, a failure tears down what was started.
STARTED=1
export SLURM_CONF=$STATE/slurm.conf
mkdir -p "$STATE"/{munge,ctld/state,pids} || die "cannot create $STATE"
touch "$STATE/.numalab-cluster"
for n in "${NL_NODES[@]}"; do
    mkdir -p "$STATE/nodes/$n/spool" "$STATE/nodes/$n/tmp" && chmod 1777 "$STATE/nodes/$n/tmp"
done
chmod 755 "$STATE" "$STATE/munge"    # munged wants its socket's directory searchable by all

# ---------------------------------------------------------------- munge
MUNGE_SOCKET=$STATE/munge/munge.socket.2
MUNGE_LOG=$STATE/munge/munged.log
mungekey --create --keyfile="$STATE/munge/munge.key" >/dev/null 2>&1 ||
    { dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none &&
      chmod 600 "$STATE/munge/munge.key"; } || die "cannot create the munge key"
munged --key-file="$STATE/munge/munge.key" --socket="$MUNGE_SOCKET" \
       --pid-file="$STATE/munge/munged.pid" --log-file="$MUNGE_LOG" \
       --seed-file="$STATE/munge/munged.seed" 9>&- </dev/null >>"$STATE/munge/munged.out" 2>&1 ||
    die "munged did not start" "$MUNGE_LOG"
munge -n -S "$MUNGE_SOCKET" 2>/dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null 2>&1 ||
    die "munge round trip through $MUNGE_SOCKET failed" "$MUNGE_LOG"

# ---------------------------------------------------------------- network
net() { "$@" >>"$STATE/net.log" 2>&1 || die "network setup: $*" "$STATE/net.log"; }
# "ip netns add" makes /run/netns (and the first time a shared bind mount of
# it onto itself): note what it will create so down.sh can undo exactly that.
[ -d /run/netns ] || touch "$STATE/run-netns-dir-by-us"
mountpoint -q /run/netns 2>/dev/null || touch "$STATE/run-netns-mount-by-us"
net ip link add "$NL_BRIDGE" type bridge
net ip addr add "$NL_CTL_ADDR/24" dev "$NL_BRIDGE"
net ip link set "$NL_BRIDGE" up
for i in 0 1; do
    n=${NL_NODES[$i]}
    net ip netns add "$n"
    net ip link add "${NL_NODE_IFS[$i]}" type veth peer name "$NL_NODE_INNER_IF" netns "$n"
    net ip link set "${NL_NODE_IFS[$i]}" master "$NL_BRIDGE" up
    net ip -n "$n" link set lo up
    net ip -n "$n" addr add "${NL_NODE_ADDRS[$i]}/24" dev "$NL_NODE_INNER_IF"
    net ip -n "$n" link set "$NL_NODE_INNER_IF" up
done

# ---------------------------------------------------------------- config
hw=$(slurmd -C 2>/dev/null | head -1)
hwval() { printf '%s\n' "$hw" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }
CPUS=$(hwval CPUs); BOARDS=$(hwval Boards); SOCKETS=$(hwval SocketsPerBoard)
CORES=$(hwval CoresPerSocket); THREADS=$(hwval ThreadsPerCore); MEM=$(hwval RealMemory)
[ -n "$CPUS" ] && [ -n "$SOCKETS" ] && [ -n "$CORES" ] && [ -n "$THREADS" ] && [ -n "$MEM" ] ||
    die "cannot read the hardware from 'slurmd -C': $hw"
REALMEM=$(( MEM * 97 / 100 ))          # a little below what slurmd finds
NODE2_EXTRA=""
if [ -n "$N2CPUS" ]; then
    # Keep Slurm from allocating node 2 the CPUs outside its cpuset (binding
    # a task there would fail): reserve them as specialized CPUs.
    [ -z "$SPEC" ] || NODE2_EXTRA="CpuSpecList=$SPEC"
fi
MPI_DEFAULT=none
if compgen -G '/usr/lib/*/slurm*/mpi_pmix.so' >/dev/null || compgen -G '/usr/lib*/slurm/mpi_pmix.so' >/dev/null; then
    MPI_DEFAULT=pmix
fi
sed -e "s|@STATE_DIR@|$STATE|g" -e "s|@CTL_NAME@|$NL_CTL_NAME|g" -e "s|@CTL_ADDR@|$NL_CTL_ADDR|g" \
    -e "s|@CTLD_PORT@|$NL_CTLD_PORT|g" -e "s|@SLURMD_PORT@|$NL_SLURMD_PORT|g" \
    -e "s|@MUNGE_SOCKET@|$MUNGE_SOCKET|g" -e "s|@MPI_DEFAULT@|$MPI_DEFAULT|g" \
    -e "s|@NODE1_ADDR@|${NL_NODE_ADDRS[0]}|g" -e "s|@NODE2_ADDR@|${NL_NODE_ADDRS[1]}|g" \
    -e "s|@CPUS@|$CPUS|g" -e "s|@BOARDS@|${BOARDS:-1}|g" -e "s|@SOCKETS@|$SOCKETS|g" \
    -e "s|@CORES@|$CORES|g" -e "s|@THREADS@|$THREADS|g" -e "s|@REALMEM@|$REALMEM|g" \
    -e "s|@NODE2_EXTRA@|$NODE2_EXTRA|g" \
    "$NL_CLUSTER_SRC/slurm.conf.in" > "$SLURM_CONF" || die "cannot write $SLURM_CONF"
grep -q '@[A-Z0-9_]*@' "$SLURM_CONF" && die "unfilled placeholder in $SLURM_CONF"
: > "$STATE/plugstack.conf"

# ---------------------------------------------------------------- slurmctld
CTLD_LOG=$STATE/ctld/slurmctld.log
setsid unshare --uts -- sh -c "hostname $NL_CTL_NAME && exec slurmctld -D -c -f $SLURM_CONF" \
    9>&- </dev/null >>"$STATE/ctld/slurmctld.out" 2>&1 &
echo $! > "$STATE/pids/slurmctld.pid"
until scontrol ping 2>/dev/null | grep -q 'is UP'; do
    kill -0 "$(cat "$STATE/pids/slurmctld.pid")" 2>/dev/null ||
        die "slurmctld exited at start" "$( [ -s "$CTLD_LOG" ] && echo "$CTLD_LOG" || echo "$STATE/ctld/slurmctld.out")"
    [ "$(left)" -gt 0 ] || die "slurmctld did not answer 'scontrol ping' within ${TIMEOUT}s" "$CTLD_LOG"
    sleep 0.2
done

# ---------------------------------------------------------------- slurmd
if [ -n "$N2CPUS" ]; then
    CG=$CG_ROOT/$NL_CPUSET_NAME
    if [ "$CG_VER" = v1 ]; then
        mkdir "$CG" || die "cannot create cgroup $CG"
        echo "$N2CPUS" > "$CG/cpuset.cpus" 2>/dev/null ||
            die "NUMALAB_CLUSTER_NODE2_CPUS='$N2CPUS' refused by $CG/cpuset.cpus (CPUs here: $(cat "$CG_ROOT/cpuset.effective_cpus" 2>/dev/null))"
        cat "$CG_ROOT/cpuset.mems" > "$CG/cpuset.mems" || die "cannot set $CG/cpuset.mems"
    else    # cgroup v2
        if ! grep -qw cpuset "$CG_ROOT/cgroup.subtree_control"; then
            echo +cpuset > "$CG_ROOT/cgroup.subtree_control" || die "cannot enable cpuset in $CG_ROOT"
            touch "$STATE/cpuset-enabled-by-us"
        fi
        mkdir "$CG" || die "cannot create cgroup $CG"
        echo "$N2CPUS" > "$CG/cpuset.cpus" 2>/dev/null ||
            die "NUMALAB_CLUSTER_NODE2_CPUS='$N2CPUS' refused by $CG/cpuset.cpus"
    fi
    echo "$CG" > "$STATE/cpuset-path"
fi
if [ -n "$THP" ]; then
    for v in always madvise never; do
        if [ "$v" = "$THP" ]; then printf '[%s]' "$v"; else printf '%s' "$v"; fi
        [ "$v" = never ] && echo || printf ' '
    done > "$STATE/nodes/${NL_NODES[1]}/thp_enabled"
fi
for i in 0 1; do
    n=${NL_NODES[$i]}
    inner="hostname $n"
    if [ "$i" = 1 ] && [ -n "$THP" ]; then
        inner="$inner && mount --bind $STATE/nodes/$n/thp_enabled $NL_THP_FILE"
    fi
    inner="$inner && exec slurmd -D -N $n -f $SLURM_CONF"
    pre=""
    if [ "$i" = 1 ] && [ -n "$N2CPUS" ]; then pre="echo \$\$ > $CG/cgroup.procs && "; fi
    # One exec chain, so $! is slurmd itself: setsid, then the node's netns,
    # then a new UTS and (private) mount namespace.
    setsid sh -c "${pre}exec nsenter --net=/run/netns/$n unshare --uts --mount --propagation private -- sh -c '$inner'" \
        9>&- </dev/null >>"$STATE/nodes/$n/slurmd.out" 2>&1 &
    echo $! > "$STATE/pids/slurmd-$n.pid"
done

# Both nodes idle in sinfo, within the deadline.
while :; do
    states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u)
    idle=$(printf '%s\n' "$states" | awk '$2 == "idle"' | wc -l)
    [ "$idle" = 2 ] && break
    for n in "${NL_NODES[@]}"; do
        log=$STATE/nodes/$n/slurmd.log; [ -s "$log" ] || log=$STATE/nodes/$n/slurmd.out
        kill -0 "$(cat "$STATE/pids/slurmd-$n.pid")" 2>/dev/null || die "slurmd $n exited at start" "$log"
        st=$(printf '%s\n' "$states" | awk -v n="$n" '$1 == n { print $2 }')
        case $st in     # a node Slurm has refused (wrong hardware, ...)
            drain*|drng|inval|fail*)
                die "node $n is $st: $(scontrol show node "$n" | grep -o 'Reason=.*')" "$log" ;;
        esac
    done
    kill -0 "$(cat "$STATE/pids/slurmctld.pid")" 2>/dev/null || die "slurmctld exited" "$CTLD_LOG"
    [ "$(left)" -gt 0 ] || die "nodes not both idle within ${TIMEOUT}s: $(echo $states)" "$CTLD_LOG"
    sleep 0.2
done

# Node to node over the bridge (MPI and PMIx need it; a host firewall that
# filters bridged traffic, e.g. br_netfilter with FORWARD DROP, breaks it).
for i in 0 1; do
    j=$((1 - i))
    nsenter --net="/run/netns/${NL_NODES[$i]}" timeout 3 \
        bash -c "exec 3<>/dev/tcp/${NL_NODE_ADDRS[$j]}/$NL_SLURMD_PORT" 2>/dev/null ||
        die "${NL_NODES[$i]} cannot open TCP to ${NL_NODES[$j]} (${NL_NODE_ADDRS[$j]}:$NL_SLURMD_PORT) over $NL_BRIDGE: a firewall on bridged traffic? (bridge-nf-call-iptables=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo absent))"
done

trap - INT TERM
secs=$(awk -v a="$T0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
NODES_CSV=$(IFS=,; echo "${NL_NODES[*]}")
{
    echo "export SLURM_CONF=$SLURM_CONF"
    echo "export NUMALAB_CLUSTER_DIR=$STATE"
    echo "export NUMALAB_CLUSTER_NODES=$NODES_CSV"
} > "$STATE/env.sh"
echo "export SLURM_CONF=$SLURM_CONF NUMALAB_CLUSTER_DIR=$STATE NUMALAB_CLUSTER_NODES=$NODES_CSV  # numalab cluster up in ${secs}s: STATE_DIR=$STATE, nodes $NODES_CSV on $NL_NET.0/24 (down: cluster/down.sh $STATE)"
