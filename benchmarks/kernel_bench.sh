#!/usr/bin/env bash
# The kernel benchmark behind docs/benchmarks.md's kernel table: a2sgd-bench at one gradient size,
# every method, run several times in a row; each run's CSV (every phase's times, bytes and
# percentages of its ceilings, the ceilings measured in that run) goes to OUT/run<K>.csv and its
# printed report to OUT/run<K>.txt, and OUT/meta.json records the command, the commit and the
# CPU. reports/docs_blocks.py then takes the median of the runs per method and figure: on a
# shared machine the ceilings themselves move from run to run, so one run is not a figure.
#
# Usage: benchmarks/kernel_bench.sh [options]
#   --out DIR       results directory (default results/bench/kernels-16m)
#   --build DIR     build tree with benchmarks/bench/a2sgd-bench (default build)
#   --ranks P       MPI ranks (default 2)
#   --runs N        bench runs (default 5)
#   --size S        gradient size, as a2sgd-bench --sizes takes it (default 16M)
#   --repeats N     timed steps per method in each run (medians; default 5)
# Environment: MPIEXEC (default mpirun), MPIEXEC_FLAGS (e.g. --oversubscribe). Keep the machine
# otherwise idle while it runs (about 10 s per run at 16M values on two cores).
# Exit code: 0 on success, 2 for bad options, else the first failing run's code.
set -uo pipefail

out=results/bench/kernels-16m
build=build
ranks=2
runs=5
size=16M
repeats=5
die() { echo "kernel_bench.sh: error: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --runs) runs=${2:?}; shift 2 ;;
    --size) size=${2:?}; shift 2 ;;
    --repeats) repeats=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $ranks =~ ^[1-9][0-9]*$ ]] || die "--ranks must be a positive integer (got '$ranks')"
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer (got '$runs')"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats must be a positive integer (got '$repeats')"
bench=$build/benchmarks/bench/a2sgd-bench
[[ -x $bench ]] || die "no a2sgd-bench in '$build' (build the project first, or pass --build)"
mpiexec=${MPIEXEC:-mpirun}
read -r -a flags <<<"${MPIEXEC_FLAGS:-}"
mkdir -p "$out" || die "cannot create '$out'"
args=(--sizes "$size" --repeats "$repeats" --mlp-batch 0 --no-sort)
for ((k = 1; k <= runs; ++k)); do
  echo "== run $k of $runs: $mpiexec -np $ranks ${flags[*]} $bench ${args[*]} --csv $out/run$k.csv"
  "$mpiexec" -np "$ranks" "${flags[@]}" "$bench" "${args[@]}" --csv "$out/run$k.csv" >"$out/run$k.txt" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "kernel_bench.sh: run $k failed with exit code $rc (see $out/run$k.txt)" >&2
    exit "$rc"
  fi
done
commit=$(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || echo unknown)
cat >"$out/meta.json" <<JSON
{"command": "benchmarks/kernel_bench.sh --ranks $ranks --runs $runs --size $size --repeats $repeats", "bench_args": "${args[*]}", "ranks": $ranks, "runs": $runs, "commit": "$commit", "cpu": "$cpu", "cores": $(nproc)}
JSON
echo "kernel_bench.sh: $runs runs in $out"
