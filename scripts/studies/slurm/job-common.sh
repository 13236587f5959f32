# shellcheck shell=bash
# Shared by the a2sgd Slurm job scripts (sourced, not run): one training run per job (or array
# task) that survives time limits.
#
# a2sgd_slurm_train [a2sgd-train options...]
#   * output in a per-job directory, $A2SGD_RUN_ROOT/<job id>[_<array task>] (default
#     $SLURM_SUBMIT_DIR/runs): train.log, metrics.jsonl (one log across restarts), config.ini,
#     checkpoints/;
#   * starts a2sgd-train with --checkpoint-dir there and --resume auto, so a requeued job continues
#     from its newest valid checkpoint;
#   * forwards SIGUSR1 / SIGTERM that reach the batch shell (#SBATCH --signal=B:USR1@<seconds>) to
#     the job step; a2sgd-train checkpoints at the next step boundary on every rank and exits 75;
#   * on exit code 75 requeues the job (#SBATCH --requeue), at most $A2SGD_MAX_RESTARTS (20) times;
#     likewise on 76, a rank that waited in a collective for longer than --collective-timeout
#     (another rank stopped, died or hangs): the job goes on from its newest checkpoint instead of
#     spending its allocation waiting. srun runs with --kill-on-bad-exit=1, so the first rank that
#     exits takes the job step down.
#
# Environment: A2SGD_TRAIN (the a2sgd-train binary; default: on PATH), A2SGD_LAUNCHER (default
# "srun --kill-on-bad-exit=1"; e.g. "mpirun" where srun cannot start this MPI), A2SGD_RUN_ROOT, A2SGD_MAX_RESTARTS,
# A2SGD_TASK_WRAPPER (a command put before a2sgd-train on every task, e.g. bind-gpu.sh).

a2sgd_slurm_train() {
  local job="${SLURM_JOB_ID:?not inside a Slurm job}"
  if [[ -n "${SLURM_ARRAY_JOB_ID:-}" ]]; then job="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"; fi
  local run_dir="${A2SGD_RUN_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}/runs}/${job}"
  local attempt=$(( ${SLURM_RESTART_COUNT:-0} + 1 ))
  local train="${A2SGD_TRAIN:-a2sgd-train}"
  mkdir -p "${run_dir}/checkpoints"
  # One host thread per CPU Slurm gave each task (Kokkos OpenMP builds).
  export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}" OMP_PROC_BIND=spread OMP_PLACES=threads
  if ! command -v "${train}" > /dev/null; then
    echo "a2sgd job ${job}: ${train} not found (set A2SGD_TRAIN or put a2sgd-train on PATH)" >&2
    return 2
  fi
  echo "a2sgd job ${job}: attempt ${attempt} on ${SLURM_JOB_NODELIST:-$(hostname)}, ${SLURM_NTASKS:-1} ranks, output in ${run_dir}"

  # shellcheck disable=SC2086
  ${A2SGD_LAUNCHER:-srun --kill-on-bad-exit=1} ${A2SGD_TASK_WRAPPER:-} "${train}" "$@" \
    --checkpoint-dir "${run_dir}/checkpoints" --resume auto \
    --output-dir "${run_dir}" --metrics "${run_dir}/metrics.jsonl" --no-progress-bar \
    >> "${run_dir}/train.log" 2>&1 &
  local step=$!
  # The batch shell gets the warning signal; the launcher (srun, mpirun) passes it to every task.
  trap 'echo "a2sgd job ${job}: SIGUSR1: asking the ranks to checkpoint and stop"; kill -USR1 ${step} 2> /dev/null' USR1
  trap 'echo "a2sgd job ${job}: SIGTERM: asking the ranks to checkpoint and stop"; kill -TERM ${step} 2> /dev/null' TERM
  # wait returns early whenever a trapped signal arrives: wait until the step has really ended.
  while kill -0 "${step}" 2> /dev/null; do wait "${step}"; done
  wait "${step}"
  local rc=$?
  trap - USR1 TERM

  case ${rc} in
    0) echo "a2sgd job ${job}: finished (attempt ${attempt})" ;;
    75 | 76)
      local why="checkpointed and stopped"
      (( rc == 76 )) && why="a rank stalled (collective timeout; see ${run_dir}/train.log)"
      if (( attempt > ${A2SGD_MAX_RESTARTS:-20} )); then
        echo "a2sgd job ${job}: ${why}, but ${A2SGD_MAX_RESTARTS:-20} restarts are used up" >&2
        return "${rc}"
      fi
      echo "a2sgd job ${job}: ${why}; requeueing"
      scontrol requeue "${SLURM_JOB_ID}"
      ;;
    *)
      echo "a2sgd job ${job}: a2sgd-train failed with exit code ${rc} (see ${run_dir}/train.log)" >&2
      return "${rc}"
      ;;
  esac
}

