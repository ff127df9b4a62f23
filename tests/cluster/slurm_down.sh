#!/usr/bin/env bash
# Stops the test cluster that slurm_up.sh started: cancels its jobs, then each daemon by its
# recorded pid (TERM, KILL after 10 s). Safe to call twice, or when nothing was started.
set -uo pipefail
STATE="${GRPO_SLURM_STATE:-/tmp/grpo-dial-slurm}"
[[ -d "$STATE" ]] || exit 0
if [[ -s "$STATE/slurmctld.pid" ]] && kill -0 "$(cat "$STATE/slurmctld.pid")" 2>/dev/null; then
    scancel --full --quiet --partition=main 2>/dev/null   # jobs outlive slurmd under linuxproc
    for _ in $(seq 25); do [[ -z "$(squeue -h -o %i 2>/dev/null)" ]] && break; sleep 0.2; done
fi
for name in slurmd slurmctld slurmdbd mariadb munged; do
    [[ -s "$STATE/$name.pid" ]] || continue
    pid=$(cat "$STATE/$name.pid")
    if kill "$pid" 2>/dev/null; then
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$pid" 2>/dev/null && echo "slurm_down: $name ($pid) killed after 10 s" >&2
    fi
    rm -f "$STATE/$name.pid"
done
echo "slurm_down: stopped" >&2
