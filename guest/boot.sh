#!/usr/bin/env bash
# Boot the numalab multi-node test guest under QEMU (TCG) and run a script inside it.
#
#   guest/boot.sh --machine quartet|ring4-cpuless [--kernel 6.12|6.1] [--timeout SECONDS]
#                 [--start-timeout SECONDS] [--file HOSTPATH]... [--lib SONAME|PATH]... [--tree HOSTDIR]... [--script FILE]
#                 [--open-mpi] [--append KERNEL_ARGS] [--tcg multi|single]
#
# --kernel 6.12 (default, guest/cache/vmlinuz, weighted interleave) or 6.1 (Debian 12's stock
# kernel, guest/cache/vmlinuz-6.1, no weighted interleave). --tcg single runs every vCPU on one
# host thread (default multi: a thread each): needed where the guest kernel patches its own code
# while it runs (perf events switch on its scheduler hooks), which multi-threaded TCG gets wrong
# now and then ("Oops: int3"). --start-timeout (default 300, at most --timeout): a guest whose
# script has not started by then (a TCG boot that hangs silently after "Booting from ROM") is
# stopped and booted again, as a kernel that died before init is.
# The guest's serial console is streamed to stdout (CR stripped). The script runs under
# busybox /bin/sh as root in /tmp (a tmpfs); every --file is in /bin, with the shared objects it
# links; every --lib (a library a program loads at run time, by soname as ldconfig knows it or by
# path) at its host path, with those it links; every --tree (a directory a program reads or
# dlopens from at run time: plugins, help texts) whole at its host path, with what its ELF files
# link. --open-mpi adds the host's Open MPI: mpirun in /bin, the trees it reads at run time (MCA
# components, help texts, /etc/openmpi, PMIx's components and help texts), /dev/shm, the
# loopback up, and the environment a root mpirun without ssh needs (guest/README.md).
# The last line the guest prints is `NUMALAB-GUEST-EXIT <rc>`; boot.sh exits with that rc, 124
# on timeout, 125 when the marker never appeared (kernel panic, init crash), 2 on usage errors,
# 1 on host errors.
# Without --script, a built-in script prints the guest's NUMA topology.
# Needs guest/cache/vmlinuz[-6.1] (run guest/fetch-kernel.sh first) and qemu-system-x86_64.
set -euo pipefail

GUEST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="$GUEST_DIR/cache"
BUSYBOX=/bin/busybox
QEMU=qemu-system-x86_64
MARKER=NUMALAB-GUEST-EXIT

die() { echo "boot.sh: error: $1" >&2; exit "${2:-1}"; }
usage() {
    sed -n '2,27s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
    exit 2
}

machine="" kernel_ver=6.12 timeout_s=300 start_timeout_s=300 script="" append="" tcg=multi open_mpi=0
files=() extra_libs=() trees=()
while [ $# -gt 0 ]; do
    case "$1" in
        --machine) [ $# -ge 2 ] || usage; machine=$2; shift 2 ;;
        --machine=*) machine=${1#*=}; shift ;;
        --kernel) [ $# -ge 2 ] || usage; kernel_ver=$2; shift 2 ;;
        --kernel=*) kernel_ver=${1#*=}; shift ;;
        --timeout) [ $# -ge 2 ] || usage; timeout_s=$2; shift 2 ;;
        --timeout=*) timeout_s=${1#*=}; shift ;;
        --start-timeout) [ $# -ge 2 ] || usage; start_timeout_s=$2; shift 2 ;;
        --start-timeout=*) start_timeout_s=${1#*=}; shift ;;
        --file) [ $# -ge 2 ] || usage; files+=("$2"); shift 2 ;;
        --file=*) files+=("${1#*=}"); shift ;;
        --lib) [ $# -ge 2 ] || usage; extra_libs+=("$2"); shift 2 ;;
        --lib=*) extra_libs+=("${1#*=}"); shift ;;
        --tree) [ $# -ge 2 ] || usage; trees+=("$2"); shift 2 ;;
        --tree=*) trees+=("${1#*=}"); shift ;;
        --open-mpi) open_mpi=1; shift ;;
        --script) [ $# -ge 2 ] || usage; script=$2; shift 2 ;;
        --script=*) script=${1#*=}; shift ;;
        --append) [ $# -ge 2 ] || usage; append=$2; shift 2 ;;
        --append=*) append=${1#*=}; shift ;;
        --tcg) [ $# -ge 2 ] || usage; tcg=$2; shift 2 ;;
        --tcg=*) tcg=${1#*=}; shift ;;
        -h|--help) usage ;;
        *) echo "boot.sh: unknown argument: $1" >&2; usage ;;
    esac
done
case "$machine" in
    quartet|ring4-cpuless) ;;
    "") echo "boot.sh: --machine is required" >&2; usage ;;
    *) die "unknown machine '$machine' (quartet or ring4-cpuless)" 2 ;;
esac
case "$kernel_ver" in
    6.12) KERNEL="$CACHE/vmlinuz" ;;
    6.1) KERNEL="$CACHE/vmlinuz-6.1" ;;
    *) die "unknown kernel '$kernel_ver' (6.12 or 6.1)" 2 ;;
esac
case "$tcg" in
    multi|single) ;;
    *) die "unknown --tcg '$tcg' (multi or single)" 2 ;;
esac
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || die "--timeout wants a positive number of seconds, got '$timeout_s'" 2
[[ "$start_timeout_s" =~ ^[1-9][0-9]*$ ]] || die "--start-timeout wants a positive number of seconds, got '$start_timeout_s'" 2
[ "$start_timeout_s" -le "$timeout_s" ] || start_timeout_s=$timeout_s

# ---- host prerequisites (fail early, one line each) ----
[ -s "$KERNEL" ] || die "$KERNEL (kernel $kernel_ver) is missing: run guest/fetch-kernel.sh"
command -v "$QEMU" >/dev/null 2>&1 || die "$QEMU is not installed: run guest/fetch-kernel.sh (installs qemu-system-x86)"
[ -x "$BUSYBOX" ] || die "$BUSYBOX is missing: run guest/fetch-kernel.sh (installs busybox-static)"
for tool in cpio gzip ldd readelf strip timeout; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed: run guest/fetch-kernel.sh"
done
[ -z "$script" ] || [ -r "$script" ] || die "cannot read script $script"
is_elf() { [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }
libs_of() {  # absolute paths of the shared objects (and loader) ELF files need, per ldd
    ldd "$@" 2>/dev/null | sed -n -e 's/^.*=> \(\/[^ ]*\) (0x[0-9a-f]*)$/\1/p' \
                                  -e 's/^[[:space:]]*\(\/[^ ]*\) (0x[0-9a-f]*)$/\1/p' || true
}
init_extra=""
if [ "$open_mpi" = 1 ]; then
    # mpirun (orterun) forks the ranks itself (plm isolated: the guest has no ssh), and dlopens
    # its MCA components from pkglibdir; its help texts are in pkgdatadir, its defaults in
    # sysconfdir; the PMIx library it links dlopens its own components (without them: "help
    # about unavailable" from pcompress) from <prefix>/lib/pmix and reads <prefix>/share.
    # PMIx's server listens on a TCP socket ("ptl_tool: problems getting address", "listener-
    # thread-start" with the loopback down); the shared-memory transport (vader) maps its
    # segments in /dev/shm (without it: the session folder, and an unlink(2) warning).
    mpirun_path=$(command -v mpirun) && command -v ompi_info >/dev/null 2>&1 \
        || die "--open-mpi: mpirun or ompi_info is not installed (cluster/install.sh installs Open MPI)"
    files+=("$mpirun_path")
    for what in pkglibdir pkgdatadir sysconfdir; do
        trees+=("$(ompi_info --path "$what" --parsable | sed -n "s/^path:$what://p")")
    done
    pmix_lib=$(for f in "${trees[0]}"/mca_pmix_*.so; do libs_of "$f"; done | grep -m1 '/libpmix\.so' || true)
    [ -n "$pmix_lib" ] || die "--open-mpi: no component in ${trees[0]} links libpmix (ldd)"
    pmix_prefix=$(dirname "$(dirname "$(readlink -f "$pmix_lib")")")
    trees+=("$pmix_prefix/lib/pmix" "$pmix_prefix/share")
    init_extra='mkdir -p /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm
ip link set lo up
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated'
fi
for f in ${files[@]+"${files[@]}"}; do
    [ -f "$f" ] && [ -r "$f" ] || die "cannot read --file $f"
done
for t in ${trees[@]+"${trees[@]}"}; do
    case "$t" in /*) ;; *) die "--tree wants an absolute directory (it lands at the same path), got '$t'" 2 ;; esac
    [ -d "$t" ] && [ -r "$t" ] || die "cannot read --tree $t (not a directory)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/numalab-guest.XXXXXX")
qemu_pidfile="$tmp/qemu.pid"
timeout_pid="" watchdog_pid=""
cleanup() {
    if [ -n "$timeout_pid" ]; then kill "$timeout_pid" 2>/dev/null || true; fi
    if [ -n "$watchdog_pid" ]; then kill "$watchdog_pid" 2>/dev/null || true; fi
    local qpid
    qpid=$(cat "$qemu_pidfile" 2>/dev/null || true)
    if [ -n "$qpid" ]; then kill "$qpid" 2>/dev/null || true; fi
    # A reader still blocked opening the fifo gets its EOF.
    if [ -p "$tmp/serial.fifo" ]; then : 3<>"$tmp/serial.fifo"; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "boot.sh: interrupted, stopping qemu" >&2; exit 130' INT
trap 'echo "boot.sh: terminated, stopping qemu" >&2; exit 143' TERM

# ---- initramfs ----
root="$tmp/root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,etc,root,numalab}
cp "$BUSYBOX" "$root/bin/busybox"
"$BUSYBOX" --list-full | while read -r applet; do
    [ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
done
# /dev/console for the kernel to open before /init runs (the kernel's built-in cpio has one too).
if [ "$(id -u)" -eq 0 ]; then mknod -m 600 "$root/dev/console" c 5 1; fi
: > "$root/etc/passwd"; echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
echo 'root:x:0:' > "$root/etc/group"

declare -A libs=()
for f in ${files[@]+"${files[@]}"}; do
    dest="$root/bin/$(basename "$f")"
    rm -f "$dest"
    if is_elf "$f"; then
        if readelf -S "$f" 2>/dev/null | grep -q ' \.debug_'; then
            strip --strip-debug -o "$dest" "$f"
        else
            cp "$f" "$dest"
        fi
        chmod 755 "$dest"
        while read -r lib; do [ -n "$lib" ] && libs["$lib"]=1; done < <(libs_of "$f")
    else
        cp "$f" "$dest"
        chmod 755 "$dest"
    fi
done
for want in ${extra_libs[@]+"${extra_libs[@]}"}; do
    lib=$want
    case "$lib" in
        /*) ;;
        # awk reads to the end: an early exit would end ldconfig by SIGPIPE, which pipefail
        # makes this script's exit status.
        *) lib=$(ldconfig -p | awk -v n="$want" '$1 == n && /x86-64/ && !found { print $NF; found = 1 }') ;;
    esac
    [ -n "$lib" ] && [ -f "$lib" ] || die "--lib $want: no such shared object (ldconfig -p does not list it)"
    libs["$lib"]=1
    while read -r dep; do [ -n "$dep" ] && libs["$dep"]=1; done < <(libs_of "$lib")
done
for t in ${trees[@]+"${trees[@]}"}; do
    t=${t%/}
    mkdir -p "$root$t"
    cp -a "$t/." "$root$t/"
    # The ELF files by their first bytes read in this shell, and one ldd for them all: three
    # processes per file took 3.5 s for Open MPI's 258 files.
    elves=()
    while IFS= read -r -d '' f; do
        magic=""
        LC_ALL=C IFS= read -r -d '' -n 4 magic < "$f" || true
        [ "$magic" != $'\x7fELF' ] || elves+=("$f")
    done < <(find "$t" -type f -print0)
    [ ${#elves[@]} -gt 0 ] || continue
    while read -r lib; do [ -n "$lib" ] && libs["$lib"]=1; done < <(libs_of "${elves[@]}" | sort -u)
done
for lib in "${!libs[@]}"; do
    [ ! -e "$root$lib" ] || continue  # already there, as a file of a --tree
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done

if [ -n "$script" ]; then
    cp "$script" "$root/numalab/script.sh"
else
    cat > "$root/numalab/script.sh" <<'EOS'
echo "kernel: $(uname -r)"
echo "online nodes: $(cat /sys/devices/system/node/online)"
for n in /sys/devices/system/node/node[0-9]*; do
    echo "${n##*/}: cpus=[$(cat $n/cpulist)] distance=[$(cat $n/distance)]" \
         "mem=$(sed -n 's/.*MemTotal: *//p' $n/meminfo)"
done
echo "thp: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
echo "weighted_interleave: $(ls /sys/kernel/mm/mempolicy/weighted_interleave/ 2>/dev/null | tr '\n' ' ')"
EOS
fi

cat > "$root/init" <<EOS
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs tmpfs /run
[ -c /dev/console ] && exec </dev/null >/dev/console 2>&1
# Keep kernel chatter (warnings) out of the script's output; 'dmesg' still has it all.
echo 1 > /proc/sys/kernel/printk
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root TERM=dumb
hostname numalab-guest
$init_extra
cd /tmp
# Start on a fresh line: the firmware's last line has no newline.
echo
echo "NUMALAB-GUEST-START"
/bin/sh /numalab/script.sh </dev/null
rc=\$?
sync
echo "$MARKER \$rc"
# Let the UART drain the marker before the machine goes away.
sleep 0.2
poweroff -f
EOS
chmod 755 "$root/init"
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 | gzip -1) > "$tmp/initrd.gz"

# ---- topology ----
# Both machines: a ring of 4 CPU nodes, SLIT 10 local / 16 one hop / 22 two hops.
numa=()
dist() {  # dist A B D: symmetric SLIT entry
    numa+=(-numa "dist,src=$1,dst=$2,val=$3" -numa "dist,src=$2,dst=$1,val=$3")
}
case "$machine" in
    quartet)
        # 4 sockets x 2 cores, node N = socket N (CPUs 2N, 2N+1), 512M each.
        # Ring 0-1-3-2-0: direct 0-1, 0-2, 1-3, 2-3; two hops 0-3, 1-2.
        machine_opt=q35
        smp="8,sockets=4,cores=2,threads=1"
        mem_mb=2048
        for n in 0 1 2 3; do
            numa+=(-object "memory-backend-ram,size=512M,id=m$n"
                   -numa "node,nodeid=$n,memdev=m$n"
                   -numa "cpu,node-id=$n,socket-id=$n")
        done
        dist 0 1 16; dist 0 2 16; dist 1 3 16; dist 2 3 16; dist 0 3 22; dist 1 2 22
        ;;
    ring4-cpuless)
        # 4 sockets x 1 core, node N = socket N (CPU N), + CPU-less node 4 (initiator 0), 512M each.
        # Ring 0-1-2-3-0: direct 0-1, 1-2, 2-3, 3-0; two hops 0-2, 1-3.
        # Node 4 hangs off node 0: 0-4 20, 1-4 26, 3-4 26, 2-4 32.
        # HMAT (initiator 0): node 0 90 ns / 20 GiB/s, node 4 250 ns / 8 GiB/s.
        machine_opt=q35,hmat=on
        smp="4,sockets=4,cores=1,threads=1"
        mem_mb=2560
        for n in 0 1 2 3; do
            numa+=(-object "memory-backend-ram,size=512M,id=m$n"
                   -numa "node,nodeid=$n,memdev=m$n"
                   -numa "cpu,node-id=$n,socket-id=$n")
        done
        numa+=(-object "memory-backend-ram,size=512M,id=m4" -numa "node,nodeid=4,memdev=m4,initiator=0")
        dist 0 1 16; dist 1 2 16; dist 2 3 16; dist 0 3 16; dist 0 2 22; dist 1 3 22
        dist 0 4 20; dist 1 4 26; dist 2 4 32; dist 3 4 26
        lb() {  # lb INITIATOR TARGET LATENCY_NS BANDWIDTH
            numa+=(-numa "hmat-lb,initiator=$1,target=$2,hierarchy=memory,data-type=access-latency,latency=$3"
                   -numa "hmat-lb,initiator=$1,target=$2,hierarchy=memory,data-type=access-bandwidth,bandwidth=$4")
        }
        # Exactly the entries of tests/fixtures/topologies/qemu-ring4-cpuless-hmat.xml (exported
        # from this guest): initiator 0 only. Nodes 1-3 have access0 files reading 0 (unknown),
        # and hwloc shows no memattrs for them. QEMU 7.2 accepts a partial set of hmat-lb entries.
        lb 0 0 90 20G
        lb 0 4 250 8G
        ;;
esac

# tsc=reliable: under TCG the kernel finds the vCPUs' TSCs unsynchronised and falls back to the
# emulated HPET, where every clock read is a system call and a device read the vCPUs queue for
# (200,000 reads: 0.34 s alone, 2.7-2.9 s each with four at once; with the TSC 0.03-0.085 s).
# mitigations=off: the guest kernel's retpolines (3000 execs 36-41 s, without 29-36 s). Timings
# in a TCG guest mean nothing either way; with both, the truth suite's guest used 83-108
# CPU-seconds where it used 159 (guest/README.md, "Timings").
cmdline="console=ttyS0 quiet panic=-1 transparent_hugepage=madvise numa_balancing=disable mitigations=off tsc=reliable"
[ -z "$append" ] || cmdline="$cmdline $append"

# QEMU runs with transparent huge pages disabled for its own memory
# (PR_SET_THP_DISABLE, 41, kept across exec): it asks for them on the
# guest's RAM, and on a host that is itself a virtual machine handing free
# memory back to its hypervisor (free page reporting) the first touch of a
# huge page ran at 0.1 GB/s against 1.9 GB/s for small pages. A Quartet
# guest placing 3.6 GiB took 56 s with them, 28 s without. The guest's
# own huge pages are its kernel's business and unchanged; timings in a
# TCG guest mean nothing either way.
no_host_thp=(python3 -c 'import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0)
os.execvp(sys.argv[1], sys.argv[1:])')
qemu_cmd=("${no_host_thp[@]}" "$QEMU" -accel "tcg,thread=$tcg" -cpu max -machine "$machine_opt" -smp "$smp" -m "${mem_mb}M"
          "${numa[@]}"
          -kernel "$KERNEL" -initrd "$tmp/initrd.gz" -append "$cmdline"
          -nic none -vga none -nographic -no-reboot -pidfile "$qemu_pidfile")

# ---- run ----
# qemu runs in the background (so a TERM/INT to boot.sh is handled at once, not after qemu ends),
# its serial output goes through a fifo to the filter that streams it to stdout and the log.
# A guest kernel that dies before init starts the script (TCG occasionally trips the kernel's own
# int3 code patching during boot: "Oops: int3" in a timer softirq) is booted again, up to
# $BOOT_TRIES times: the script never ran, so nothing is repeated. A kernel crash (Oops, BUG,
# panic, invalid opcode) after NUMALAB-GUEST-START and before the end marker is booted again too:
# multi-threaded TCG also trips the patching perf_event_open does (a static key, "invalid
# opcode" in __schedule), and a fresh guest runs the whole script anew. Any other death is the
# script's, and is reported as it is.
BOOT_TRIES=3
start=$(date +%s.%N)
for attempt in $(seq 1 "$BOOT_TRIES"); do
    rm -f "$tmp/serial.fifo"
    mkfifo "$tmp/serial.fifo"
    sed -u -e 's/\r$//' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' -e 's/\x1b[()][0-9A-Za-z]//g' \
        < "$tmp/serial.fifo" | tee "$tmp/serial.log" &
    reader_pid=$!
    timeout -k 5 "$timeout_s" "${qemu_cmd[@]}" </dev/null >"$tmp/serial.fifo" &
    timeout_pid=$!
    # The start watchdog: a guest that never reaches its script stops
    # qemu (TERM, through its pidfile) and leaves start-timeout behind.
    rm -f "$tmp/start-timeout"
    (
        for second in $(seq 1 "$start_timeout_s"); do
            sleep 1
            if grep -q '^NUMALAB-GUEST-START$' "$tmp/serial.log" 2>/dev/null; then
                echo "$second" > "$tmp/started-after"
                exit 0
            fi
        done
        : > "$tmp/start-timeout"
        kill "$(cat "$qemu_pidfile" 2>/dev/null)" 2>/dev/null || kill "$timeout_pid" 2>/dev/null || true
    ) &
    watchdog_pid=$!
    qemu_rc=0
    wait "$timeout_pid" || qemu_rc=$?
    timeout_pid=""
    kill "$watchdog_pid" 2>/dev/null || true
    wait "$watchdog_pid" 2>/dev/null || true
    watchdog_pid=""
    wait "$reader_pid" || true
    rm -f "$qemu_pidfile"
    # The kernel's last line (power down) has no newline: end the stream on a line boundary.
    [ ! -s "$tmp/serial.log" ] || [ -z "$(tail -c 1 "$tmp/serial.log")" ] || echo
    [ "$qemu_rc" -ne 124 ] && [ "$qemu_rc" -ne 137 ] || break
    oops=$(grep -m1 -E 'Oops|Kernel panic|BUG:|invalid opcode' "$tmp/serial.log" | sed 's/^\[ *[0-9.]*\] //' || true)
    if grep -q '^NUMALAB-GUEST-START$' "$tmp/serial.log"; then
        # The script ran: a kernel crash before its end marker is booted
        # again (a fresh guest runs every step anew), any other end stands.
        grep -q "^$MARKER " "$tmp/serial.log" && break
        [ -n "$oops" ] && [ "$attempt" -lt "$BOOT_TRIES" ] || break
        echo "boot.sh: warning: guest ($machine) kernel crashed while the script ran ($oops); booting again ($((attempt + 1)) of $BOOT_TRIES)" >&2
        continue
    fi
    [ "$attempt" -lt "$BOOT_TRIES" ] || break
    if [ -e "$tmp/start-timeout" ]; then
        echo "boot.sh: warning: guest ($machine) had not started its script after ${start_timeout_s}s (${oops:-no kernel message}); booting again ($((attempt + 1)) of $BOOT_TRIES)" >&2
        continue
    fi
    echo "boot.sh: warning: guest ($machine) kernel died before init (${oops:-no message}); booting again ($((attempt + 1)) of $BOOT_TRIES)" >&2
done
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')

marker_rc=$(sed -n "s/^$MARKER \([0-9][0-9]*\)\$/\1/p" "$tmp/serial.log" | tail -n1)
if [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
    if [ -n "$marker_rc" ]; then
        echo "boot.sh: warning: guest script exited $marker_rc but qemu did not power off within ${timeout_s}s" >&2
        exit "$marker_rc"
    fi
    echo "boot.sh: error: timeout: guest ($machine) still running after ${timeout_s}s, qemu killed" >&2
    exit 124
fi
if [ -z "$marker_rc" ] && [ -e "$tmp/start-timeout" ]; then
    echo "boot.sh: error: guest ($machine) had not started its script after ${start_timeout_s}s, $BOOT_TRIES boots (--start-timeout)" >&2
    exit 124
fi
if [ -z "$marker_rc" ]; then
    echo "boot.sh: error: guest ($machine) ended without '$MARKER' (qemu rc $qemu_rc; kernel panic or init failure?) after ${elapsed}s" >&2
    exit 125
fi
# The host CPU time the guest took (QEMU, and the initrd's packing): on a
# host whose CPUs the guests keep busy, this and not the wall-clock time is
# what a step less saves.
times > "$tmp/times"  # in this shell: a pipe would time a subshell's children
cpu=$(tail -n 1 "$tmp/times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] } printf "%.0f", t }')
# (A script that ends within a second of its start can beat the watchdog's look.)
started=""
[ ! -s "$tmp/started-after" ] || started="script started after $(cat "$tmp/started-after")s of its last boot, "
echo "boot.sh: guest ($machine) ${started}script exited $marker_rc after ${elapsed}s, ${cpu} CPU-seconds" >&2
exit "$marker_rc"
