#!/usr/bin/env bash
# A one-node SLURM cluster on this Debian machine, for the cluster tests (tests/cluster/) and CI.
#   tests/cluster/slurm_up.sh [accounting|noaccounting]    (or GRPO_SLURM_ACCOUNTING=1|0; default 1)
#   tests/cluster/slurm_down.sh
# accounting: munged, MariaDB, slurmdbd, slurmctld, slurmd (sacct works).
# noaccounting: munged, slurmctld, slurmd (sacct fails; job status only from squeue).
# Needs root and apt-get (Debian's slurm-wlm 22.05 and friends are installed once). Without them it
# prints one line and exits 77, so callers skip. No systemd: the daemons are started here, their
# pids recorded in $GRPO_SLURM_STATE (default /tmp/grpo-dial-slurm) and stopped by pid by
# slurm_down.sh. Idempotent: a second call with the same mode finds the cluster up and returns.
# The node is this machine as it is: CPUs from nproc, memory from MemAvailable (less a margin).
set -euo pipefail

SKIP=77
MODE="${1:-}"
if [[ -z "$MODE" ]]; then
    case "${GRPO_SLURM_ACCOUNTING:-1}" in
        0|no|false) MODE=noaccounting ;;
        *) MODE=accounting ;;
    esac
fi
case "$MODE" in
    accounting|noaccounting) ;;
    *) echo "slurm_up: unknown mode '$MODE' (accounting or noaccounting)" >&2; exit 2 ;;
esac

if [[ "$(id -u)" != 0 ]]; then
    echo "slurm_up: skipped, not root (the test cluster starts system daemons)"; exit $SKIP
fi
STATE="${GRPO_SLURM_STATE:-/tmp/grpo-dial-slurm}"
CONF=/etc/slurm/slurm.conf
DBDCONF=/etc/slurm/slurmdbd.conf
MARK="# written by grpo-dial tests/cluster/slurm_up.sh"
PACKAGES=(slurm-wlm slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
mkdir -p "$STATE"
log() { echo "slurm_up: $*" >&2; }

# ------------------------------------------------------------------ packages (once)
missing=()
for bin in slurmctld slurmd sbatch munged slurmdbd mariadbd; do
    command -v "$bin" >/dev/null || missing+=("$bin")
done
if ((${#missing[@]})); then
    if ! command -v apt-get >/dev/null; then
        echo "slurm_up: skipped, no apt-get to install ${missing[*]}"; exit $SKIP
    fi
    log "installing ${PACKAGES[*]} (apt-get; once)"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
               "${PACKAGES[@]}"; } >"$STATE/apt.log" 2>&1; then
        echo "slurm_up: skipped, apt-get could not install the SLURM packages (see $STATE/apt.log)"
        exit $SKIP
    fi
fi

if [[ -e "$CONF" ]] && ! grep -qF "$MARK" "$CONF"; then
    echo "slurm_up: $CONF exists and is not ours; refusing to replace a real cluster's configuration" >&2
    exit 3
fi

alive() { [[ -s "$STATE/$1.pid" ]] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }
wait_for() {  # wait_for SECONDS WHAT COMMAND...: poll until COMMAND succeeds
    local seconds=$1 what=$2; shift 2
    for _ in $(seq $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
    log "$what did not come up within ${seconds}s; logs in $STATE"; return 1
}
start() {  # start NAME COMMAND...: a foreground daemon in the background, its pid recorded
    local name=$1; shift
    "$@" >>"$STATE/$name.out" 2>&1 </dev/null &
    echo $! >"$STATE/$name.pid"
}
stop() {  # stop NAME: by the recorded pid; TERM, then KILL after 10 s
    local name=$1 pid
    alive "$name" || { rm -f "$STATE/$name.pid"; return 0; }
    pid=$(cat "$STATE/$name.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$STATE/$name.pid"
}

# ------------------------------------------------------------------ munge
if ! alive munged; then
    [[ -s /etc/munge/munge.key ]] || { mungekey --create --force >/dev/null; chown munge:munge /etc/munge/munge.key; }
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
    # munged runs as its own user (it refuses root); -F keeps it in the foreground so $! is its pid
    start munged runuser -u munge -- munged -F
    wait_for 10 munged munge -n
    # runuser's pid is not munged's: record the daemon itself
    pgrep -u munge -x munged -P "$(cat "$STATE/munged.pid")" >"$STATE/munged.pid.tmp" && mv "$STATE/munged.pid.tmp" "$STATE/munged.pid"
fi

# ------------------------------------------------------------------ the configuration
HOST=$(hostname -s)
CPUS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)   # GNU nproc obeys OMP_NUM_THREADS
AVAILABLE_MB=$(( $(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) / 1024 ))
MEM_MB=$(( AVAILABLE_MB * 9 / 10 ))   # what jobs may use now, below what slurmd measures
if [[ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" == cgroup2fs && "${GRPO_SLURM_CGROUP:-0}" == 1 ]]; then
    PROCTRACK=proctrack/cgroup; TASK=task/cgroup
else  # containers (no delegated cgroup v2) and hosts alike: no systemd, no cgroup set-up
    PROCTRACK=proctrack/linuxproc; TASK=task/none
fi
if [[ "$MODE" == accounting ]]; then
    ACCOUNTING="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$HOST
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5"
else
    ACCOUNTING="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
fi
mkdir -p "$STATE/ctld" "$STATE/d"
# MinJobAge=300 (SLURM's default, written out): the profiles' squeue status needs a finished job
# to stay in squeue past the executor plugin's longest wait between queries (180 s), so at least
# 240 s (grpo_dial.tools.cluster_status.squeue_min_job_age); below that the workflow uses sacct.
NEW_CONF="$MARK (mode $MODE); slurm_down.sh stops it
ClusterName=grpo
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.daemon.pid
SlurmdPidFile=$STATE/slurmd.daemon.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=$PROCTRACK
TaskPlugin=$TASK
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SchedulerParameters=sched_interval=2
MinJobAge=300
KillWait=5
$ACCOUNTING
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=main Nodes=$HOST Default=YES MaxTime=INFINITE State=UP"

# the same configuration (memory aside, which moves) and every daemon alive: nothing to do
daemons=(slurmctld slurmd); [[ "$MODE" == accounting ]] && daemons+=(mariadb slurmdbd)
up=1
for name in "${daemons[@]}"; do alive "$name" || up=0; done
same() { sed -E 's/RealMemory=[0-9]+//' "$@"; }
if ((up)) && [[ -e "$CONF" ]] && [[ "$(same "$CONF")" == "$(same <<<"$NEW_CONF")" ]]; then
    log "already up ($MODE): $(sinfo -h -o '%n %c CPUs %m MB %T')"
    exit 0
fi
stop slurmd; stop slurmctld
[[ "$MODE" == noaccounting ]] && stop slurmdbd
printf '%s\n' "$NEW_CONF" >"$CONF"

# ------------------------------------------------------------------ accounting: MariaDB + slurmdbd
if [[ "$MODE" == accounting ]]; then
    if ! alive mariadb; then
        install -d -o mysql -g mysql /run/mysqld
        start mariadb mariadbd --user=mysql --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
            --skip-networking=0 --bind-address=127.0.0.1 --skip-log-bin
        wait_for 30 mariadb mariadb-admin --socket=/run/mysqld/mysqld.sock ping
    fi
    mariadb --socket=/run/mysqld/mysqld.sock -e "
        CREATE DATABASE IF NOT EXISTS slurm_acct_db;
        CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'grpo-dial-test';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
    cat >"$DBDCONF" <<DBD
$MARK
AuthType=auth/munge
DbdHost=$HOST
SlurmUser=root
PidFile=$STATE/slurmdbd.daemon.pid
LogFile=$STATE/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=grpo-dial-test
DBD
    chmod 600 "$DBDCONF"
    if ! alive slurmdbd; then
        start slurmdbd slurmdbd -D
        wait_for 30 slurmdbd sacctmgr -n list cluster
    fi
    # the cluster, an account and this user in it: sacct sees the jobs, the executor plugin
    # finds a default account instead of guessing
    sacctmgr -i -Q add cluster grpo >/dev/null 2>&1 || true
    sacctmgr -i -Q add account grpo-test Cluster=grpo Description=tests Organization=grpo-dial >/dev/null 2>&1 || true
    sacctmgr -i -Q add user "$(id -un)" DefaultAccount=grpo-test Account=grpo-test >/dev/null 2>&1 || true
fi

# ------------------------------------------------------------------ slurmctld, slurmd
start slurmctld slurmctld -D -i
wait_for 30 slurmctld scontrol ping
start slurmd slurmd -D
node_ready() { sinfo -h -n "$HOST" -o %T | grep -Eq '^(idle|mixed|allocated)'; }
if ! wait_for 30 slurmd node_ready; then
    sinfo -h -N -o '%N %T %E' >&2; exit 1
fi
log "up ($MODE): $(sinfo -h -o '%n %c CPUs %m MB %T') in $STATE"
