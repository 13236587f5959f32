#!/usr/bin/env bash
# The Slurm job script on a real, single-node Slurm: a job that is told to stop mid-run (the
# signal #SBATCH --signal=B:USR1@120 sends before a time limit) checkpoints on every rank,
# requeues itself, resumes, and ends with the model of an uninterrupted run, bit for bit.
#
#   check_slurm.sh <a2sgd source> <work dir> <a2sgd-train> <a2sgd-checkpoint> <mpiexec> [mpiexec flags...]
#
# Needs root and slurm-wlm + munge installed (scripts/dev/test.sh installs them when it runs as
# root); otherwise it exits 77 (CTest: skipped) saying why. It writes its own slurm.conf for this
# host (proctrack/linuxproc, task/none, this node's CPUs and memory), starts munged, slurmctld
# and slurmd under <work dir>, and stops every daemon it started by PID when it ends, also on
# failure. The daemons' Unix sockets (munge's, slurmd's step sockets in its spool) live in a short
# directory under the temporary directory, removed at the end: a socket path may not exceed 108
# bytes, which a build tree's path alone can (Spack's stage directories do).
set -uo pipefail

source_dir="$1" work="$2" train="$3" checkpoint_tool="$4" mpiexec="$5"
shift 5
mpi_flags=("$@")

skip() {
  echo "A2SGD_SLURM_TEST skipped: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  [[ -f "${work}/log/slurmctld.log" ]] && tail -n 20 "${work}/log/slurmctld.log" >&2
  exit 1
}

[[ ${EUID} -eq 0 ]] || skip "needs root to run slurmctld and slurmd"
for program in munged slurmctld slurmd sbatch scontrol scancel srun; do
  command -v "${program}" > /dev/null || skip "${program} not found (apt-get install slurm-wlm munge)"
done

rm -rf "${work}"
mkdir -p "${work}"/{state,log,job,ref}
# Sockets: /tmp when $TMPDIR is long itself (the 108-byte limit leaves room for ~40 of its own).
tmp="${TMPDIR:-/tmp}"
((${#tmp} <= 40)) || tmp=/tmp
sockets="$(mktemp -d "${tmp}/a2sgd-slurm.XXXXXX")" || fail "cannot create a directory under ${tmp}"
mkdir -p "${sockets}"/{munge,spool}
pids=()
cleanup() {
  if [[ -f "${work}/slurm.conf" ]]; then
    # Every job of this private cluster (the requeue job, the sweep), whatever step failed.
    SLURM_CONF="${work}/slurm.conf" scancel --quiet --full --user="$(id -un)" 2> /dev/null
  fi
  local pid daemons=("${pids[@]}")
  [[ -f "${sockets}/munge/munged.pid" ]] && daemons+=("$(cat "${sockets}/munge/munged.pid")")
  for pid in "${daemons[@]}"; do kill "${pid}" 2> /dev/null; done
  for _ in $(seq 50); do
    local alive=0
    for pid in "${daemons[@]}"; do kill -0 "${pid}" 2> /dev/null && alive=1; done
    ((alive)) || break
    sleep 0.2
  done
  for pid in "${daemons[@]}"; do kill -KILL "${pid}" 2> /dev/null; done
  rm -rf "${sockets}"
}
trap cleanup EXIT

# ---- the uninterrupted reference, outside Slurm ----
# shellcheck disable=SC2054 # "1024,1024" is one option value
args=(--dataset synthetic --synthetic-train 8000 --synthetic-test 1000 --hidden 1024,1024 --batch-size 32
  --steps 1500 --checkpoint-every 500 --log-every 20 --seed 11 --quiet)
"${mpiexec}" "${mpi_flags[@]}" -n 2 "${train}" "${args[@]}" --checkpoint-dir "${work}/ref" > "${work}/ref.log" 2>&1 \
  || fail "the reference run failed: $(tail -n 5 "${work}/ref.log")"
final=ckpt-000001500.h5
[[ -f "${work}/ref/${final}" ]] || fail "the reference run wrote no ${final}"

# ---- a single-node Slurm ----
host="$(hostname -s)"
# nproc honours OMP_NUM_THREADS, which CTest sets for its tests: ask for the node's CPUs.
cpus="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
((cpus >= 2)) || skip "the 2-rank job needs 2 CPUs; this node has ${cpus}"
memory_mb=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512))
port=$((20000 + ($$ % 20000)))
dd if=/dev/urandom of="${sockets}/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "${sockets}/munge/munge.key"
munged --force --key-file="${sockets}/munge/munge.key" --socket="${sockets}/munge/socket" \
  --pid-file="${sockets}/munge/munged.pid" --log-file="${work}/log/munged.log" --seed-file="${sockets}/munge/seed" \
  || fail "munged did not start"
cat > "${work}/slurm.conf" << CONF
ClusterName=a2sgdtest
SlurmctldHost=${host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: how long a requeued job waits before it may start again (default 120 s).
AuthInfo=socket=${sockets}/munge/socket,cred_expire=10
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
MpiDefault=none
JobRequeue=1
ReturnToService=2
SlurmctldPort=${port}
SlurmdPort=$((port + 1))
StateSaveLocation=${work}/state
SlurmdSpoolDir=${sockets}/spool
SlurmctldPidFile=${work}/slurmctld.pid
SlurmdPidFile=${work}/slurmd.pid
SlurmctldLogFile=${work}/log/slurmctld.log
SlurmdLogFile=${work}/log/slurmd.log
NodeName=${host} CPUs=${cpus} RealMemory=${memory_mb} State=UNKNOWN
PartitionName=a2sgd Nodes=${host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="${work}/slurm.conf"
slurmctld -D -i > "${work}/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D > "${work}/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  [[ "$(sinfo -h -o %T 2> /dev/null)" == idle ]] && break
  sleep 0.2
done
[[ "$(sinfo -h -o %T 2> /dev/null)" == idle ]] || fail "the node did not become idle: $(sinfo 2>&1)"
echo "slurm up: ${host}, ${cpus} CPUs, ${memory_mb} MB, slurmctld/slurmd PIDs ${pids[*]}"

# Open MPI under srun needs the PMIx plugin; without it the job script starts the ranks with mpirun.
launcher="${mpiexec} ${mpi_flags[*]}"
if [[ "$(srun --mpi=list 2>&1)" == *pmix* ]]; then launcher="srun --mpi=pmix"; fi

# ---- the job: stopped mid-run by the time-limit warning, requeued, resumed ----
cd "${work}/job" || fail "no ${work}/job"
job="$(A2SGD_TRAIN="${train}" A2SGD_LAUNCHER="${launcher}" A2SGD_RUN_ROOT="${work}/runs" \
  sbatch --parsable --ntasks=2 --time=10 "${source_dir}/scripts/studies/slurm/cpu.sbatch" "${args[@]}")" \
  || fail "sbatch failed"
echo "submitted job ${job} (launcher: ${launcher})"
run="${work}/runs/${job}"

state() { scontrol show job "${job}" 2> /dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
step_logged() { grep -o '"event": "train", "step": [0-9]*' "${run}/metrics.jsonl" 2> /dev/null | tail -n 1 | grep -o '[0-9]*$'; }
for _ in $(seq 600); do
  step="$(step_logged)"
  [[ -n "${step}" && "${step}" -ge 100 ]] && break
  sleep 0.1
done
[[ -n "${step:-}" && "${step}" -ge 100 && "${step}" -lt 1500 ]] || fail "the job did not reach step 100 (state $(state), step '${step:-}')"
# What --signal=B:USR1@120 does before a time limit: SIGUSR1 to the batch shell only.
scancel --signal=USR1 --batch "${job}" || fail "scancel --signal=USR1 --batch failed"
echo "SIGUSR1 sent to the batch shell of job ${job} at step ${step}"

for _ in $(seq 1200); do
  case "$(state)" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
  sleep 0.25
done
final_state="$(state)"
out="${work}/job/a2sgd-${job}.out"
cat "${out}" 2> /dev/null
[[ "${final_state}" == COMPLETED ]] || fail "job ${job} ended ${final_state}; train.log: $(tail -n 20 "${run}/train.log" 2> /dev/null)"

grep -q "attempt 2" "${out}" || fail "the job did not run a second time"
grep -q "checkpointed and stopped; requeueing" "${out}" || fail "the job did not requeue itself"
stopped="$(grep -c '"event": "stopped"' "${run}/metrics.jsonl")"
resumed="$(grep -c '"event": "resume"' "${run}/metrics.jsonl")"
[[ "${stopped}" == 1 && "${resumed}" == 1 ]] || fail "metrics: ${stopped} stop(s), ${resumed} resume(s), expected 1 and 1"
stop_step="$(grep -o '"event": "stopped", "step": [0-9]*' "${run}/metrics.jsonl" | grep -o '[0-9]*$')"
((stop_step > step && stop_step < 1500)) || fail "stopped at step ${stop_step}, signalled at ${step}"
"${checkpoint_tool}" diff "${work}/ref/${final}" "${run}/checkpoints/${final}" \
  || fail "the requeued job's final model differs from the uninterrupted run's"
echo "job ${job}: stopped at step ${stop_step}, requeued, resumed; final checkpoint identical to the uninterrupted run's"

# The collector's table of this run.
table="$(python3 "${source_dir}/scripts/studies/slurm/collect.py" "${work}/runs")" || fail "collect.py failed"
echo "${table}"
echo "${table}" | grep -E "^\| ${job} \| finished \| a2sgd \| sgd \| 0.1 \| 2 \| 1500 \| 1 \|" > /dev/null \
  || fail "collect.py: no finished row with 1 restart for job ${job}"

# ---- a sweep as a job array (2 methods x 2 learning rates), tabulated by the collector ----
sweep="$(A2SGD_TRAIN="${train}" A2SGD_LAUNCHER="${launcher}" A2SGD_RUN_ROOT="${work}/sweep" \
  A2SGD_SWEEP_METHODS="a2sgd topk" A2SGD_SWEEP_LRS="0.05 0.1" \
  sbatch --parsable --array=0-3 --ntasks=2 --time=10 "${source_dir}/scripts/studies/slurm/sweep.sbatch" \
  --dataset synthetic --synthetic-train 2000 --synthetic-test 500 --steps 60 --quiet)" || fail "sbatch of the sweep failed"
sweep="${sweep%%;*}"
for _ in $(seq 1200); do
  pending="$(squeue -h -j "${sweep}" 2> /dev/null | wc -l)"
  ((pending == 0)) && break
  sleep 0.25
done
table="$(python3 "${source_dir}/scripts/studies/slurm/collect.py" "${work}/sweep" --csv "${work}/sweep.csv")" \
  || fail "collect.py on the sweep failed"
echo "${table}"
for point in "a2sgd | sgd | 0.05" "a2sgd | sgd | 0.1" "topk | sgd | 0.05" "topk | sgd | 0.1"; do
  echo "${table}" | grep -F "| finished | ${point} | 2 | 60 | 0 |" > /dev/null || fail "sweep: no finished run of ${point}"
done
[[ "$(wc -l < "${work}/sweep.csv")" == 5 ]] || fail "sweep.csv: expected a header and 4 rows"
echo "slurm test passed"
