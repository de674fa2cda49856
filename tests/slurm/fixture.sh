#!/usr/bin/env bash
# A real single-host Slurm for tests (Debian bookworm's slurm-wlm 22.05 + munge), private to DIR:
# its own munge key and socket, slurm.conf, ports, state, logs and pid files; nothing under /etc
# or /run is touched. Two nodes, n1 and n2, each a slurmd of this host (their names do not
# resolve: a job that needs a rendezvous address sets MASTER_ADDR).
#
#   tests/slurm/fixture.sh start DIR [PROLOG EPILOG]
#                                       # up and idle in about 1-10 s; prints SLURM_CONF=DIR/slurm.conf
#                                       # (PROLOG, EPILOG: slurm.conf's Prolog= and Epilog=, with
#                                       # PrologFlags=Alloc: the prolog runs when the job starts)
#   tests/slurm/fixture.sh stop DIR     # kills the daemons, removes their pid files
#
# Exit codes of start: 0 ready; 3 Slurm cannot run here (not root, packages missing), with the
# reason on stderr, so that tests skip; 1 it failed to come up (logs in DIR/log).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
prolog=${3:-}
epilog=${4:-}
[[ -n "$cmd" && -n "$dir" ]] || {
  echo "usage: $0 start|stop DIR" >&2
  exit 2
}

stop() {
  for pidfile in "$dir"/slurmd-*.pid "$dir"/slurmctld.pid "$dir"/munge/munged.pid; do
    [[ -f "$pidfile" ]] || continue
    pid=$(cat "$pidfile" 2>/dev/null || true)
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
  done
  for _ in $(seq 1 50); do
    alive=0
    for pidfile in "$dir"/slurmd-*.pid "$dir"/slurmctld.pid "$dir"/munge/munged.pid; do
      [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile" 2>/dev/null)" 2>/dev/null && alive=1
    done
    ((alive)) || break
    sleep 0.1
  done
  # A stale pid file (slurmctld's above all) breaks later package upgrades and restarts.
  rm -f "$dir"/slurmd-*.pid "$dir"/slurmctld.pid "$dir"/munge/munged.pid
}

if [[ "$cmd" == stop ]]; then
  stop
  exit 0
fi
[[ "$cmd" == start ]] || {
  echo "usage: $0 start|stop DIR" >&2
  exit 2
}

unavailable() {
  echo "slurm fixture: $*" >&2
  exit 3
}
[[ $(id -u) -eq 0 ]] || unavailable "needs root (slurmd and munged run as root and munge)"
for tool in slurmctld slurmd srun sbatch sinfo munged munge; do
  command -v "$tool" >/dev/null || unavailable "$tool is missing (apt install slurm-wlm munge)"
done
id munge >/dev/null 2>&1 || unavailable "user munge is missing (apt install munge)"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
runuser -u munge -- test -x "$dir" ||
  unavailable "user munge cannot reach $dir (a parent directory is not searchable by others)"
stop
rm -rf "$dir/state" "$dir/spool" "$dir/log" "$dir/munge"
mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/munge"
chmod 755 "$dir"
# munged checks its directories: the socket's must be reachable by all, the key readable by it
# alone.
chown munge:munge "$dir/munge"
chmod 711 "$dir/munge"
dd if=/dev/urandom of="$dir/munge/munge.key" bs=128 count=1 status=none
chown munge:munge "$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
socket="$dir/munge/munge.sock"
runuser -u munge -- munged --key-file="$dir/munge/munge.key" --socket="$socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
  --seed-file="$dir/munge/seed" ||
  {
    echo "slurm fixture: munged did not start (see $dir/munge/munged.log)" >&2
    exit 1
  }

ctld_port=$(free_port)
cpus=$(nproc)
host=$(hostname -s)
cat >"$dir/slurm.conf" <<EOF
ClusterName=zeustest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=300
${prolog:+Prolog=$prolog
PrologFlags=Alloc}
${epilog:+Epilog=$epilog}
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$(free_port) CPUs=$cpus RealMemory=2000 State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$(free_port) CPUs=$cpus RealMemory=2000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP
EOF
export SLURM_CONF="$dir/slurm.conf"
slurmctld || {
  echo "slurm fixture: slurmctld did not start (see $dir/log/slurmctld.log)" >&2
  stop
  exit 1
}
for node in n1 n2; do
  slurmd -N "$node" || {
    echo "slurm fixture: slurmd -N $node did not start (see $dir/log/slurmd-$node.log)" >&2
    stop
    exit 1
  }
done
for _ in $(seq 1 300); do
  if [[ "$(sinfo -h -o %T 2>/dev/null | sort -u | tr -d '\n')" == idle ]]; then
    echo "SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.1
done
echo "slurm fixture: the nodes did not become idle in 30 s: $(sinfo 2>&1 | tr '\n' ' ')" >&2
stop
exit 1
