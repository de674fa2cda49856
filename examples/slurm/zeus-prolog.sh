#!/usr/bin/env bash
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/zeus-prolog.sh): starts the job's GPU energy
# record in zeusd, on every node of the job, before the job runs. slurmd runs it as root.
# The job's GPUs are SLURM_JOB_GPUS (NVML indices) where the gres plugin sets it, else every
# GPU of the node. It never fails the job: a node whose zeusd is down logs it and the job runs
# unmeasured (a failing prolog would drain the node).
#
# Settings (environment, or edit here): ZEUS (the zeus program), ZEUSD_SOCK_PATH (zeusd's
# socket, default /run/zeusd/zeusd.sock), ZEUSD_ADMIN_TOKEN_FILE (zeusd's admin token, which
# starting and stopping a record needs; default /var/lib/zeusd/admin.token, zeusd's own, which
# root reads).
ZEUS=${ZEUS:-zeus}
args=(job-energy start --job "${SLURM_JOB_ID:?SLURM_JOB_ID is not set: run as a Slurm Prolog}")
[[ -n "${SLURM_JOB_GPUS:-}" ]] && args+=(--gpus "$SLURM_JOB_GPUS")
[[ -n "${ZEUSD_SOCK_PATH:-}" ]] && args+=(--zeusd-socket "$ZEUSD_SOCK_PATH")
if ! out=$("$ZEUS" "${args[@]}" 2>&1); then
  logger -t zeus-prolog "job $SLURM_JOB_ID: energy not measured: $out" 2>/dev/null ||
    echo "zeus-prolog: job $SLURM_JOB_ID: energy not measured: $out" >&2
fi
exit 0
