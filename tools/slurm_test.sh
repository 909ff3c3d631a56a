#!/usr/bin/env bash
# The Slurm launch path, end to end, on one node (docs/CLUSTERS.md): starts munged, slurmctld and
# slurmd from a configuration generated in a temporary directory (its own munge key and socket,
# free ports, state and spool; the machine's /etc/slurm and munge service are not used), waits
# until the node is idle, then trains logistic regression with DDP on 2 tasks twice:
#   1. `srun -n 2 --mpi=pmix train ...`
#   2. `sbatch` of a batch script whose `srun --mpi=pmix train ...` runs the same,
# and checks each job's final JSON line: world_size 2, a test accuracy well above chance, and
# "slurm": {"job_id", "nodes"} naming that job and the node. The daemons (and anything they
# started) are stopped on exit, failure or interrupt. Part of tools/test.sh; 5-10 s once built.
#
# Where Slurm cannot run (not root, slurm-wlm, munge or the pmix plugin missing, or the daemons
# do not come up, as in some containers) it says why and exits 0 with "SKIPPED";
# TESSERA_SLURM_REQUIRED=1 makes that a failure. Once the node is idle, any failure exits 1 with
# the jobs' output and the daemons' logs.
#
# Environment: TESSERA_TRAIN=PATH uses that train binary instead of building //tools:train;
# TESSERA_SLURM_KEEP=1 keeps the temporary directory (configuration, logs, job output).
set -uo pipefail
cd "$(dirname "$0")/.."

t0=$(date +%s%N)
since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'; }
elapsed() { since "$t0"; }
say() { echo "slurm_test: $*"; }

skip() {
  say "SKIPPED: $*"
  if [ "${TESSERA_SLURM_REQUIRED:-0}" = 1 ]; then
    say "FAILED: TESSERA_SLURM_REQUIRED=1 and Slurm could not run ($(elapsed) s)"
    exit 1
  fi
  exit 0
}

# --- Can Slurm run here? ---------------------------------------------------------------------
[ "$(id -u)" -eq 0 ] ||
  skip "not root (slurmd must run as root to start jobs); run as root after tools/setup.sh"
for cmd in munged munge unmunge slurmctld slurmd srun sbatch sinfo squeue scontrol scancel; do
  command -v "$cmd" >/dev/null 2>&1 ||
    skip "'$cmd' not found: install slurm-wlm and munge (tools/setup.sh)"
done

# Everything of this run in one temporary directory (short: munge's socket path is limited):
# configuration, munge key and socket, Slurm's state and spool, logs, the jobs' output, and a
# copy of the train tool, which another build cannot replace while the jobs run.
dir=$(mktemp -d /tmp/tessera-slurm.XXXXXX)
chmod 711 "$dir"   # munged wants its socket's directory searchable by all
pids=()        # the daemons this script started, in start order
cleanup_done=0
cleanup() {
  [ "$cleanup_done" = 1 ] && return
  cleanup_done=1
  # Jobs first (their steps would otherwise outlive slurmd), then the daemons, newest first.
  if [ ${#pids[@]} -ge 3 ]; then
    ids=$(timeout 10 squeue -h -o %i 2>/dev/null)
    [ -n "$ids" ] && timeout 10 scancel $ids >/dev/null 2>&1
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  export -n SLURM_CONF TESSERA_SLURM_TEST_DIR   # not in the scan's own helpers
  # Whatever is left from this run: slurmstepd and tasks carry this run's SLURM_CONF (or its
  # marker) in their environment; nothing else on the machine does.
  for env in /proc/[0-9]*/environ; do
    p=${env#/proc/}
    p=${p%/environ}
    [ "$p" = "$$" ] && continue
    if { tr '\0' '\n' <"$env"; } 2>/dev/null |
         grep -qxF -e "SLURM_CONF=$dir/slurm.conf" -e "TESSERA_SLURM_TEST_DIR=$dir"; then
      kill -KILL "$p" 2>/dev/null
    fi
  done
  if [ "${TESSERA_SLURM_KEEP:-0}" = 1 ]; then
    say "kept $dir"
  else
    rm -rf "$dir"
  fi
}
trap cleanup EXIT
trap 'say "interrupted"; exit 1' INT TERM

show_logs() {
  # A daemon's stderr repeats its log file; it is shown when the log file was never written.
  for d in munged slurmctld slurmd; do
    for f in "$d.log" "$d.stderr"; do
      if [ -s "$dir/$f" ]; then
        echo "----- $f (last 40 lines) -----"
        tail -n 40 "$dir/$f"
        break
      fi
    done
  done
}

fail() {
  say "FAILED: $*"
  show_logs
  say "FAILED after $(elapsed) s"
  exit 1
}

# The daemons did not come up: the machine's fault more often than the test's (containers
# without the privileges Slurm expects), so a skip, with the logs to tell which.
daemon_skip() {
  say "$*"
  show_logs
  skip "$*"
}

# --- The train tool --------------------------------------------------------------------------
# Built before this run's variables are exported: a Bazel server started here must not carry
# them (cleanup ends every process that does).
if [ -n "${TESSERA_TRAIN:-}" ]; then
  [ -x "$TESSERA_TRAIN" ] || fail "TESSERA_TRAIN=$TESSERA_TRAIN is not an executable"
  cp "$TESSERA_TRAIN" "$dir/train"
else
  say "bazel build //tools:train"
  bazel build //tools:train >"$dir/build.log" 2>&1 ||
    { cat "$dir/build.log"; fail "bazel build //tools:train failed"; }
  cp bazel-bin/tools/train "$dir/train"
fi

# --- The configuration -----------------------------------------------------------------------
# Unset a surrounding job's variables (this may itself run inside a Slurm job or under mpirun).
while read -r v; do
  unset "$v"
done < <(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_|PMIX_)')
export SLURM_CONF="$dir/slurm.conf"
export TESSERA_SLURM_TEST_DIR="$dir"

# Two free TCP ports on the loopback for slurmctld and slurmd, below the ephemeral range (where
# any client's connection may take one between this check and the daemons' bind).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ephemeral_low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
ephemeral_low=${ephemeral_low:-32768}
[ "$ephemeral_low" -gt 12000 ] || ephemeral_low=32768
ctld_port=0
for _ in $(seq 50); do
  p=$((10000 + RANDOM % (ephemeral_low - 10002)))
  if port_free "$p" && port_free $((p + 1)); then
    ctld_port=$p
    break
  fi
done
[ "$ctld_port" -ne 0 ] || skip "found no two free ports on 127.0.0.1"
slurmd_port=$((ctld_port + 1))

mkdir -p "$dir/state" "$dir/spool" "$dir/jobs"
: >"$dir/plugstack.conf"   # no SPANK plugins (not the machine's /etc/slurm/plugstack.conf)
mkdir -p "$dir/pmix"
echo "PMIxCliTmpDirBase=$dir/pmix" >"$dir/mpi.conf"   # read beside slurm.conf
cat >"$dir/slurm.conf" <<EOF
# Generated by tools/slurm_test.sh: one node, this machine, 2 CPUs.
ClusterName=tessera-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
PlugStackConfig=$dir/plugstack.conf
MailProg=/bin/true
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

timeout 10 srun --mpi=list 2>&1 | grep -qw pmix ||
  skip "Slurm has no pmix MPI plugin (srun --mpi=list: $(timeout 10 srun --mpi=list 2>&1 | tr '\n' ' '))"

# --- The daemons -----------------------------------------------------------------------------
t_setup=$(date +%s%N)
if command -v mungekey >/dev/null 2>&1; then
  mungekey --create --keyfile="$dir/munge.key" >/dev/null 2>&1
fi
[ -s "$dir/munge.key" ] || dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 600 "$dir/munge.key"
munged --foreground --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" \
  --pid-file="$dir/munged.pid" --seed-file="$dir/munged.seed" --log-file="$dir/munged.log" \
  >>"$dir/munged.log" 2>&1 &
pids+=($!)
ok=0
deadline=$((SECONDS + 10))
while [ "$SECONDS" -lt "$deadline" ]; do
  kill -0 "${pids[0]}" 2>/dev/null || daemon_skip "munged exited at start-up"
  if [ -S "$dir/munge.socket" ] &&
     timeout 5 munge -n -S "$dir/munge.socket" 2>/dev/null |
       timeout 5 unmunge -S "$dir/munge.socket" >/dev/null 2>&1; then
    ok=1
    break
  fi
  sleep 0.1
done
[ "$ok" = 1 ] || daemon_skip "munged did not answer within 10 s"

slurmctld -D -f "$SLURM_CONF" >"$dir/slurmctld.stderr" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N localhost >"$dir/slurmd.stderr" 2>&1 &
pids+=($!)

state=""
deadline=$((SECONDS + 30))
while [ "$SECONDS" -lt "$deadline" ]; do
  kill -0 "${pids[1]}" 2>/dev/null || daemon_skip "slurmctld exited at start-up"
  kill -0 "${pids[2]}" 2>/dev/null || daemon_skip "slurmd exited at start-up"
  state=$(timeout 5 sinfo -h -n localhost -o %T 2>/dev/null)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] ||
  daemon_skip "the node did not become idle within 30 s (sinfo: '${state:-no answer}')"
say "slurmctld (port $ctld_port) and slurmd (port $slurmd_port) up, node idle," \
  "in $(since "$t_setup") s"

# --- The jobs --------------------------------------------------------------------------------
train_args=(--model=logistic --strategy=ddp --epochs=1 --train-limit=2000 --threads=1)

# The job id of the job named $1 (scontrol keeps finished jobs for MinJobAge, 300 s).
job_id_by_name() {
  timeout 10 scontrol -o show job 2>/dev/null | grep -E "(^| )JobName=$1( |$)" |
    grep -oE '^JobId=[0-9]+' | head -n1 | cut -d= -f2
}

# check_output NAME FILE JOB_ID: the final JSON line of a 2-task DDP run of job JOB_ID.
check_output() {
  local name=$1 file=$2 id=$3 json ws acc slurm slurm_id slurm_nodes
  json=$(grep '^{' "$file" | tail -n1)
  [ -n "$json" ] || { cat "$file"; fail "$name: no final JSON line"; }
  ws=$(grep -oE '"world_size": [0-9]+' <<<"$json" | grep -oE '[0-9]+$')
  acc=$(grep -oE '"test_accuracy": [0-9.eE+-]+' <<<"$json" | grep -oE '[0-9.eE+-]+$')
  slurm=$(grep -oE '"slurm": \{"job_id": "[^"]*", "nodes": "[^"]*"\}' <<<"$json")
  slurm_id=$(sed -E 's/.*"job_id": "([^"]*)".*/\1/' <<<"$slurm")
  slurm_nodes=$(sed -E 's/.*"nodes": "([^"]*)".*/\1/' <<<"$slurm")
  [ "$ws" = 2 ] || { cat "$file"; fail "$name: world_size is '$ws', not 2"; }
  awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.5) }' ||
    { cat "$file"; fail "$name: test_accuracy '$acc' is not above 0.5"; }
  [ -n "$slurm" ] ||
    { cat "$file"; fail "$name: the JSON has no \"slurm\": {\"job_id\", \"nodes\"}"; }
  [ "$slurm_id" = "$id" ] ||
    { cat "$file"; fail "$name: the JSON says job '$slurm_id', Slurm says job '$id'"; }
  [ "$slurm_nodes" = localhost ] ||
    { cat "$file"; fail "$name: the JSON says nodes '$slurm_nodes', not 'localhost'"; }
  grep -qxF "slurm: job $id on localhost" "$file" ||
    { cat "$file"; fail "$name: no start-up line 'slurm: job $id on localhost'"; }
  say "$name: job $id on $slurm_nodes, world_size $ws, test_accuracy $acc"
}

# 1. srun: a job and its step in one command.
say "srun -n 2 --mpi=pmix train ${train_args[*]}"
# In the background, so that an INT or TERM is handled at once (bash runs traps between
# commands, and `wait` is one).
timeout 120 srun --job-name=tessera-srun --time=5 --chdir="$dir/jobs" -n 2 --mpi=pmix \
  --kill-on-bad-exit=1 "$dir/train" "${train_args[@]}" \
  </dev/null >"$dir/jobs/srun.out" 2>"$dir/jobs/srun.err" &
wait $!
rc=$?
if [ "$rc" -ne 0 ]; then
  cat "$dir/jobs/srun.out" "$dir/jobs/srun.err"
  grep -qi libpmix "$dir/jobs/srun.err" &&
    say "hint: Slurm's pmix plugin loads libpmix.so from libpmix-dev (tools/setup.sh installs it)"
  [ "$rc" -eq 124 ] && fail "srun did not finish within 120 s"
  fail "srun exited with $rc"
fi
srun_id=$(job_id_by_name tessera-srun)
[ -n "$srun_id" ] || fail "scontrol does not know the srun job"
check_output srun "$dir/jobs/srun.out" "$srun_id"

# 2. sbatch: a batch script, as a user would write one (docs/CLUSTERS.md), polled until it ends.
cat >"$dir/jobs/batch.sh" <<EOF
#!/bin/bash
#SBATCH --job-name=tessera-sbatch
#SBATCH --ntasks=2
#SBATCH --time=5
#SBATCH --output=$dir/jobs/sbatch-%j.out
srun --mpi=pmix --kill-on-bad-exit=1 $dir/train ${train_args[*]}
EOF
say "sbatch (srun --mpi=pmix train ${train_args[*]} in a batch script)"
submitted=$(timeout 30 sbatch --parsable --chdir="$dir/jobs" "$dir/jobs/batch.sh" 2>&1) ||
  fail "sbatch refused the job: $submitted"
batch_id=${submitted%%;*}
[[ "$batch_id" =~ ^[0-9]+$ ]] || fail "sbatch printed '$submitted', not a job id"
job_state=""
deadline=$((SECONDS + 120))
while [ "$SECONDS" -lt "$deadline" ]; do
  job_state=$(timeout 10 scontrol -o show job "$batch_id" 2>/dev/null |
    grep -oE 'JobState=[A-Z_]+' | cut -d= -f2)
  case "$job_state" in
    PENDING | CONFIGURING | RUNNING | COMPLETING | "") sleep 0.5 ;;
    *) break ;;
  esac
done
batch_out="$dir/jobs/sbatch-$batch_id.out"
case "$job_state" in
  COMPLETED) ;;
  PENDING | CONFIGURING | RUNNING | COMPLETING | "")
    cat "$batch_out" 2>/dev/null
    fail "batch job $batch_id did not end within 120 s (state '${job_state:-unknown}')" ;;
  *)
    cat "$batch_out" 2>/dev/null
    exit_code=$(timeout 10 scontrol -o show job "$batch_id" | grep -oE 'ExitCode=[0-9:]+')
    fail "batch job $batch_id ended $job_state ($exit_code)" ;;
esac
check_output sbatch "$batch_out" "$batch_id"

say "passed in $(elapsed) s, $(since "$t_setup") s of them from starting munged" \
  "(srun and sbatch, 2 tasks each, --mpi=pmix)"
