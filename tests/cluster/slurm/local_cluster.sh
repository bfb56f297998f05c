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

# The processes of a node ('*': of every node) of this cluster: slurmd and slurmstepd hold the
# node's log open (slurmstepd overwrites its environment with its title); a job's script, before
# it execs the program, has SLURMD_NODENAME and its PERSEUS_JOB_DIR under DIR; the test's job
# programs carry PERSEUS_TEST_JOB_NODE=DIR/NODE. Bash's own matching, not a grep per process: a
# pass over a busy machine's processes then takes a fraction of a second.
node_pids() {
  local node="$1" proc var by_node in_dir
  local -a environment
  {
    find /proc/[0-9]*/fd -maxdepth 1 -lname "$dir/log/slurmd-$node.log" 2>/dev/null | cut -d/ -f3 || true
    for proc in /proc/[0-9]*; do
      { mapfile -d '' environment <"$proc/environ"; } 2>/dev/null || continue
      by_node='' in_dir=''
      for var in "${environment[@]}"; do
        case "$var" in
          PERSEUS_TEST_JOB_NODE="$dir"/$node) by_node=1 in_dir=1 ;;
          SLURMD_NODENAME=$node) by_node=1 ;;
          PERSEUS_JOB_DIR="$dir"/*) in_dir=1 ;;
        esac
      done
      if [ -n "$by_node" ] && [ -n "$in_dir" ]; then echo "${proc#/proc/}"; fi
    done
  } | sort -u
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
  # The node dies: its slurmd, its job steps and their programs, all at once. A step killed
  # as it launched a program may leave a child that execs it an instant later: passes over
  # about 2 s kill those too, as a dead node would have.
  node=${1:?the node}
  for _ in 1 2 3 4; do
    pids=$(node_pids "$node")
    if [ -n "$pids" ]; then kill -9 $pids 2>/dev/null || true; fi
    sleep 0.5
  done
  ;;
stop)
  daemons=()
  for pidfile in "$dir"/state/slurmd-*.pid "$dir/state/slurmctld.pid"; do
    if [ -f "$pidfile" ]; then daemons+=("$(cat "$pidfile")"); fi
  done
  if [ ${#daemons[@]} -gt 0 ]; then kill "${daemons[@]}" 2>/dev/null || true; fi
  # Until they have exited (up to 10 s): slurmctld writes its state as it stops, and the test
  # removes the directory after this returns.
  for _ in $(seq 20); do
    alive=0
    for pid in "${daemons[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.5
  done
  # Job steps and their programs outlive the daemons; end them too (and any daemon still up).
  pids=$(node_pids '*')
  if [ ${#daemons[@]} -gt 0 ] || [ -n "$pids" ]; then kill -9 "${daemons[@]}" $pids 2>/dev/null || true; fi
  ;;
*)
  echo "local_cluster.sh: unknown command $command" >&2
  exit 2
  ;;
esac
