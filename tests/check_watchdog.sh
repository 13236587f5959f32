#!/usr/bin/env bash
# The collective watchdog: one rank of a 2-rank run is stopped (SIGSTOP) mid-training; the other
# must report which collective and step it waits in and the job must end with exit code 76
# within the timeout plus a margin, with no process left behind.
#
#   check_watchdog.sh <work dir> <a2sgd-train> <mpiexec> [mpiexec flags...]
set -uo pipefail

work="$1" train="$2" mpiexec="$3"
shift 3
mpi_flags=("$@")
timeout_s=5

fail() {
  echo "FAIL: $*" >&2
  [[ -f "${work}/err.txt" ]] && cat "${work}/err.txt" >&2
  pkill -KILL -f "${train}.*collective-timeout" 2> /dev/null
  exit 1
}

rm -rf "${work}" && mkdir -p "${work}"
"${mpiexec}" -n 2 "${mpi_flags[@]}" "${train}" --dataset synthetic --synthetic-train 2000 --synthetic-test 200 \
  --synthetic-features 32 --steps 100000000 --eval-every 0 --log-every 10 --no-progress-bar --quiet \
  --metrics "${work}/metrics.jsonl" --collective-timeout "${timeout_s}" > "${work}/out.txt" 2> "${work}/err.txt" &
launcher=$!

# Rank 1's process: its launcher-given rank in its environment (Open MPI, MPICH/Hydra, Slurm).
victim=""
for _ in $(seq 1 600); do
  if [[ -s "${work}/metrics.jsonl" ]] && grep -q '"event": "train"' "${work}/metrics.jsonl"; then
    for pid in $(pgrep -f "${train}.*collective-timeout"); do
      if tr '\0' '\n' < "/proc/${pid}/environ" 2> /dev/null |
        grep -qE '^(OMPI_COMM_WORLD_RANK|PMI_RANK|PMIX_RANK|SLURM_PROCID)=1$'; then
        victim=${pid}
      fi
    done
    [[ -n "${victim}" ]] && break
  fi
  kill -0 "${launcher}" 2> /dev/null || fail "the run ended before it could be stopped"
  sleep 0.1
done
[[ -n "${victim}" ]] || fail "no rank-1 process found"
kill -STOP "${victim}"
stopped=$(date +%s%N)
echo "stopped rank 1 (pid ${victim})"

# The launcher must end by itself within the timeout and a margin for the poll and the teardown.
for _ in $(seq 1 300); do
  kill -0 "${launcher}" 2> /dev/null || break
  sleep 0.1
done
if kill -0 "${launcher}" 2> /dev/null; then
  kill -CONT "${victim}" 2> /dev/null
  fail "the job still runs 30 s after rank 1 was stopped (--collective-timeout ${timeout_s})"
fi
wait "${launcher}"
rc=$?
elapsed=$(awk -v a="${stopped}" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
[[ ${rc} -eq 76 ]] || fail "exit code ${rc}, expected 76"
grep -qE "rank 0: no progress for [0-9.]+ s waiting in .+ at step [0-9]+: another rank stopped, died or hangs" \
  "${work}/err.txt" || fail "rank 0 did not report where it waits"
sleep 1
if pgrep -f "${train}.*collective-timeout" > /dev/null; then
  fail "a process of the run is still there: $(pgrep -af "${train}.*collective-timeout")"
fi
echo "ok: exit 76 after ${elapsed} s: $(grep 'no progress' "${work}/err.txt")"
