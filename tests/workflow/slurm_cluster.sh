#!/bin/sh
# A one-node Slurm cluster from the distribution's packages, for tests/workflow/test_slurm.py
# and for trying profiles/slurm by hand (Debian/Ubuntu, as root; about 20 s):
#
#   sh tests/workflow/slurm_cluster.sh start DIR
#   sh tests/workflow/slurm_cluster.sh stop DIR
#
# The daemons' state, logs and pid files, its own munge key and socket live under DIR; the
# configuration is /etc/slurm/slurm.conf and gres.conf (where every Slurm command looks for
# it: a job step's srun sees no SLURM_CONF, the executor plugin removes it), written only
# where none is installed and removed by `stop`. A machine with its own Slurm configuration
# is left alone (exit 3), and Slurm listens on its own ports. Partitions `cpu` (default) and `gpu` share the node, whose
# GPU is declared on /dev/null (a `--gpus=1` job is scheduled; nothing can use it). Memory
# is a consumable resource and a job step that outgrows its request is killed
# (OverMemoryKill, sampled every second); finished jobs stay in `scontrol show job` for an
# hour (MinJobAge: the executor plugin's `squeue` status query needs at least 120 s, and
# there is no slurmdbd for `sacct`); every ended job is one line of DIR/jobcomp.txt.
# `start` installs the packages (slurm-wlm, munge) when they are missing; it exits 3 with
# one line on stderr where that cannot be done (not root, no apt-get, no daemons).
set -eu

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    echo "usage: $0 start|stop DIR" >&2
    exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
etc=/etc/slurm
conf="$etc/slurm.conf"
prefix="# fedrepro one-node test cluster: "
mark="$prefix$dir"

unavailable() {
    echo "slurm cluster unavailable: $*" >&2
    exit 3
}

stop_pid() { # the daemon named by pid file $1, if it still runs
    if [ -f "$1" ]; then
        pid=$(cat "$1")
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid"
            i=0
            while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
                sleep 0.2
                i=$((i + 1))
            done
            kill -9 "$pid" 2>/dev/null || true
        fi
        rm -f "$1"
    fi
}

ours() { [ -f "$conf" ] && [ "$(head -n 1 "$conf")" = "$mark" ]; }

if [ "$cmd" = stop ]; then
    if ours; then
        scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    fi
    stop_pid "$dir/slurmd.pid"
    stop_pid "$dir/slurmctld.pid"
    stop_pid "$dir/munged.pid"
    if ours; then
        rm -f "$conf" "$etc/gres.conf"
    fi
    exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

[ "$(id -u)" = 0 ] || unavailable "needs root (daemons, packages), running as $(id -un)"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || unavailable "slurm-wlm and munge missing and no apt-get"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq slurm-wlm munge; } >"$dir/apt.log" 2>&1 \
        || unavailable "apt-get install slurm-wlm munge failed (see $dir/apt.log)"
fi

if [ -e "$conf" ] && ! ours; then
    case "$(head -n 1 "$conf")" in
    "$prefix"*) # left by an earlier start with another DIR: that cluster stops first
        sh "$0" stop "$(head -n 1 "$conf" | cut -c $((${#prefix} + 1))-)" ;;
    *) unavailable "$conf exists: this machine has its own Slurm configuration" ;;
    esac
fi
host=$(hostname -s)
cpus=$(nproc)
# the node offers 3/4 of the machine's memory to jobs
mem=$(awk '/^MemTotal:/ {print int($2 / 1024 * 3 / 4)}' /proc/meminfo)

# munge: a private key and socket (slurm.conf AuthInfo names it)
if [ ! -f "$dir/munge.key" ]; then
    dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 2>/dev/null
fi
chmod 0400 "$dir/munge.key"
mkdir -p "$dir/munge"
chmod 0700 "$dir/munge"
stop_pid "$dir/munged.pid"
munged --force --key-file="$dir/munge.key" --socket="$dir/munge/socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge.seed" \
    || unavailable "munged did not start (see $dir/munged.log)"

mkdir -p "$dir/ctld" "$dir/spool" "$etc"
cat >"$conf" <<EOF
$mark
ClusterName=fedrepro
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.txt
MinJobAge=3600
ReturnToService=2
MpiDefault=none
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
EOF
echo "NodeName=$host Name=gpu File=/dev/null" >"$etc/gres.conf"

stop_pid "$dir/slurmd.pid"
stop_pid "$dir/slurmctld.pid"
slurmctld -i || unavailable "slurmctld did not start (see $dir/slurmctld.log)"
slurmd || unavailable "slurmd did not start (see $dir/slurmd.log)"
i=0
until sinfo --noheader --states=idle --format=%n 2>/dev/null | grep -qx "$host"; do
    i=$((i + 1))
    [ $i -le 60 ] || unavailable "node $host not idle after 30 s (see $dir/slurmd.log)"
    sleep 0.5
done
sinfo
