# Sourced by the study scripts (convergence_study.sh, lr_sweep.sh, paper_experiment.sh): one
# a2sgd-train run, and the finished-run test that lets an interrupted study continue.
# shellcheck shell=bash

# a2sgd_finished METRICS: true when the metrics file ends a run (a summary or a diverged record).
a2sgd_finished() { [[ -f $1 ]] && grep -q '"event": *"\(summary\|diverged\)"' "$1"; }

# a2sgd_train_run LOG NP A2SGD_TRAIN ARG...: runs A2SGD_TRAIN on NP ranks under
# ${MPIEXEC:-mpirun} ${MPIEXEC_FLAGS}, its output in LOG; says on stderr how it ended and, when it
# failed other than by diverging (exit 3, a result the studies report), the log's last lines.
# Sets a2sgd_status to the run's code when it failed so and a2sgd_status was 0; returns the code.
a2sgd_status=0
a2sgd_train_run() {
  local log=$1 np=$2 start rc
  shift 2
  start=$(date +%s)
  # shellcheck disable=SC2086
  ${MPIEXEC:-mpirun} ${MPIEXEC_FLAGS:-} -np "$np" "$@" > "$log" 2>&1
  rc=$?
  echo "   exit $rc after $(( $(date +%s) - start )) s" >&2
  if [[ $rc -ne 0 && $rc -ne 3 ]]; then
    tail -n 5 "$log" >&2
    [[ $a2sgd_status -eq 0 ]] && a2sgd_status=$rc
  fi
  return $rc
}
