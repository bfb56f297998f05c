#!/usr/bin/env bash
# A real Slurm cluster on this machine for the Slurm backend's end-to-end test: one slurmctld and
# one slurmd per node (all on localhost, each on its own port), each node holding GPUs of one type
# declared as GRES (no devices: the jobs are small programs that only pretend to train).
#
#   local_cluster.sh start DIR NODE:TYPE:COUNT...   writes DIR/slurm.conf, starts the daemons,
#                                                   waits until every node is idle
#   local_cluster.sh kill-node DIR NODE             kills that node's slurmd (the node goes down)
#   local_cluster.sh stop DIR                       stops every daemon started from DIR
#
# Authentication is auth/none: the daemons and the test run as the same user on one machine.
set -euo pipefail

command=${1:?usage: local_cluster.sh start|kill-node|stop DIR ...}
dir=$(realpath -m "${2:?the cluster directory}")
shift 2

port_base() {  # distinct ports per directory, below Linux's ephemeral range (32768 up)
  echo $(( 10000 + $(printf '%s' "$dir" | cksum | cut -d' ' -f1) % 20000 ))
}

# The processes of a node ('.*': of every node) of this cluster: slurmd and slurmstepd hold the
# node's log open (slurmstepd overwrites its environment with its title), and the test's job
# programs carry PERSEUS_TEST_JOB_NODE=DIR/NODE.
node_pids() {
  local pattern="$1" proc
  for proc in /proc/[0-9]*; do
    # shellcheck disable=SC2053
    if { ls -l "$proc/fd"; } 2>/dev/null | grep -q -- "-> $dir/log/slurmd-$pattern.log" ||
       { tr '\0' '\n' <"$proc/environ"; } 2>/dev/null | grep -q "^PERSEUS_TEST_JOB_NODE=$dir/$pattern\$"; then
      echo "${proc#/proc/}"
    fi
  done
}

case "$command" in
start)
  mkdir -p "$dir/state" "$dir/log" "$dir/jobs"
  base=$(port_base)
  user=$(id -un)
  nodes=()
  {
    echo "ClusterName=perseus-test"
    echo "SlurmctldHost=localhost"
    echo "SlurmctldPort=$base"
    echo "SlurmUser=$user"
    echo "SlurmdUser=$user"
    echo "AuthType=auth/none"
    echo "CredType=cred/none"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/state/slurmd-%n"
    echo "SlurmctldPidFile=$dir/state/slurmctld.pid"
    echo "SlurmdPidFile=$dir/state/slurmd-%n.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/pgid"
    echo "TaskPlugin=task/none"
    echo "MpiDefault=none"
    echo "SwitchType=switch/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "SchedulerType=sched/builtin"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "SlurmdParameters=config_overrides"
    echo "GresTypes=gpu"
    echo "ReturnToService=2"
    echo "JobRequeue=1"
    echo "KillWait=2"
    echo "SlurmdTimeout=6"
    echo "SlurmctldTimeout=10"
    echo "MinJobAge=600"
    echo "InactiveLimit=0"
    port=$((base + 1))
    for spec in "$@"; do
      IFS=: read -r node type count <<<"$spec"
      echo "NodeName=$node NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port CPUs=8 RealMemory=1000 Gres=gpu:$type:$count State=UNKNOWN"
      nodes+=("$node")
      port=$((port + 1))
    done
    echo "PartitionName=gpus Nodes=$(IFS=,; echo "${nodes[*]}") Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  {
    echo "AutoDetect=off"
    for spec in "$@"; do
      IFS=: read -r node type count <<<"$spec"
      # Slurm drops GPUs without device files; empty files stand in for /dev/nvidia*.
      mkdir -p "$dir/dev/$node"
      for ((i = 0; i < count; ++i)); do touch "$dir/dev/$node/gpu$i"; done
      echo "NodeName=$node Name=gpu Type=$type File=$dir/dev/$node/gpu[0-$((count - 1))]"
    done
  } >"$dir/gres.conf"
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -i -f "$dir/slurm.conf"
  for node in "${nodes[@]}"; do
    mkdir -p "$dir/state/slurmd-$node"
    slurmd -f "$dir/slurm.conf" -N "$node"
  done
  # Wait (up to 30 s) until every node is idle.
  for _ in $(seq 60); do
    states=$(sinfo -h -N -o '%N %t' 2>/dev/null || true)
    if [ -n "$states" ] && ! grep -qv ' idle$' <<<"$states"; then
      exit 0
    fi
    sleep 0.5
  done
  echo "local_cluster.sh: the nodes did not come up:" >&2
  sinfo -N >&2 || true
  tail -20 "$dir/log/slurmctld.log" >&2 || true
  exit 1
  ;;
kill-node)
  # The node dies: its slurmd, its job steps and their programs, all at once.
  node=${1:?the node}
  kill -9 $(node_pids "$node") 2>/dev/null || true
  ;;
stop)
  for pidfile in "$dir"/state/slurmd-*.pid "$dir/state/slurmctld.pid"; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  # Job steps and their programs outlive the daemons; end them too.
  kill -9 $(node_pids '.*') 2>/dev/null || true
  ;;
*)
  echo "local_cluster.sh: unknown command $command" >&2
  exit 2
  ;;
esac
