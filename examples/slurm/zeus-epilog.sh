#!/usr/bin/env bash
# Slurm Epilog (slurm.conf: Epilog=/etc/slurm/zeus-epilog.sh): stops the job's GPU energy record
# in zeusd when the job ends (however it ends); `zeus job-energy report $SLURM_JOB_ID` then gives
# its per-GPU and total joules, time and average power. Runs as root; never fails the job.
#
# Settings as in zeus-prolog.sh.
ZEUS=${ZEUS:-zeus}
args=(job-energy stop --job "${SLURM_JOB_ID:?SLURM_JOB_ID is not set: run as a Slurm Epilog}")
[[ -n "${ZEUSD_SOCK_PATH:-}" ]] && args+=(--zeusd-socket "$ZEUSD_SOCK_PATH")
if ! out=$("$ZEUS" "${args[@]}" 2>&1); then
  logger -t zeus-epilog "job $SLURM_JOB_ID: energy record not stopped: $out" 2>/dev/null ||
    echo "zeus-epilog: job $SLURM_JOB_ID: energy record not stopped: $out" >&2
fi
exit 0
