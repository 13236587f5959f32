#!/usr/bin/env bash
# Every exchange method on the Fashion-MNIST MLP (784-256-256-10, 2 MPI ranks, batch 64 per rank,
# 3 epochs, SGD): builds a2sgd-train (Release), trains once per method and prints one table
# (test accuracy, time per step, bytes per rank per step). docs/benchmarks.md's comparison table is this
# script's output. The methods are every method a2sgd-train lists (--list-methods).
#
# Environment: A2SGD_BUILD_DIR (default: build), A2SGD_COMPARE_DIR (default: demo-output/compare),
# A2SGD_COMPARE_RANKS (default: 2), A2SGD_COMPARE_ARGS (extra a2sgd-train options for every run),
# A2SGD_COMPARE_METHODS (default: all methods), A2SGD_COMPARE_TABLE_ONLY=1 (print the table from an
# earlier run's metrics without training).
#
# Over an emulated network (docs/network.md; root): A2SGD_COMPARE_NETWORK=RATE (a tc rate such as
# 100mbit) times every method for A2SGD_COMPARE_TIMING_STEPS steps (default 200) across
# A2SGD_COMPARE_RANKS emulated nodes, one rank per node, into <compare dir>/network-RATE-pRANKS/,
# and reports each method's time per step and communication time there, measured and modelled,
# and its time to a test accuracy (A2SGD_COMPARE_TARGET, default dense's final - 0.01): the steps
# the full run in <compare dir> (same ranks) took, times the step time measured over the network.
# A2SGD_COMPARE_TCP_LINKS: TCP connections per pair of ranks there (default 1, Open MPI's own; docs/network.md).
# A2SGD_COMPARE_COLLECTIVES: openmpi (default) or ring, a2sgd-cluster run --collectives there (ring:
# into network-RATE-pRANKS-ring/).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # here, root, PYTHONPATH, python, die
source "${here}/../deps.sh"
a2sgd_install_deps

build="${A2SGD_BUILD_DIR:-${root}/build}"
out="${A2SGD_COMPARE_DIR:-${root}/demo-output/compare}"
ranks="${A2SGD_COMPARE_RANKS:-2}"
a2sgd_build "${root}" "${build}" a2sgd-train
# Every registered method, as the tool lists them.
methods="${A2SGD_COMPARE_METHODS:-$("${build}/apps/train/a2sgd-train" --list-methods | cut -f1 | tr '\n' ' ')}"

a2sgd_mpi_flags
[[ -n "${A2SGD_COMPARE_NETWORK:-}" ]] && a2sgd_build "${root}" "${build}" a2sgd-netbench

# Per-method settings of this comparison: the defaults, except where the method needs another
# setting to train this MLP in 3 epochs (docs/methods.md); any other method runs at its defaults.
method_args() {
  case "$1" in
    randomk) echo "--randomk-ratio 0.01" ;;  # 0.001 of the entries learns too slowly in 3 epochs
    efsign) echo "--lr 0.01" ;;              # the scaled sign's step is |a|_1/n per entry
    *) echo "" ;;
  esac
}

if [[ -n "${A2SGD_COMPARE_NETWORK:-}" ]]; then
  # shellcheck source=cluster/timing.sh
  source "${here}/cluster/timing.sh"
  collectives="${A2SGD_COMPARE_COLLECTIVES:-openmpi}"
  netdir="${out}/network-${A2SGD_COMPARE_NETWORK}-p${ranks}"
  [[ ${collectives} == ring ]] && netdir="${netdir}-ring"
  a2sgd_net_begin "${A2SGD_COMPARE_NETWORK}" "${ranks}" "${netdir}" "${build}" "${A2SGD_COMPARE_TCP_LINKS:-1}" \
    "${collectives}"
  for method in ${methods}; do
    echo "=== ${method} over the network (${A2SGD_COMPARE_NETWORK}, ${ranks} nodes)"
    # shellcheck disable=SC2046,SC2086
    a2sgd_net_train "${method}" --compressor "${method}" $(method_args "${method}") \
      --steps "${A2SGD_COMPARE_TIMING_STEPS:-200}" --eval-every 0 --log-every 1000 --quiet --collective-timeout 0 \
      ${A2SGD_COMPARE_ARGS:-} || { tail -n 5 "${netdir}/${method}.log" >&2; exit 1; }
  done
  a2sgd_net_end
  targs=()
  [[ -n "${A2SGD_COMPARE_TARGET:-}" ]] && targs=(--target "${A2SGD_COMPARE_TARGET}")
  exec python3 -m reports network "${out}" "${netdir}" --model mlp "${targs[@]}"
fi

for method in ${methods}; do
  [[ "${A2SGD_COMPARE_TABLE_ONLY:-0}" == 1 ]] && break
  # shellcheck disable=SC2046
  cmd=(mpiexec "${A2SGD_MPI_FLAGS[@]}" -n "${ranks}" "${build}/apps/train/a2sgd-train" --compressor "${method}"
    $(method_args "${method}") --output-dir "${out}/${method}" --log-every 1000 --no-progress-bar --quiet)
  # shellcheck disable=SC2206
  cmd+=(${A2SGD_COMPARE_ARGS:-})
  echo "=== ${cmd[*]}"
  "${cmd[@]}"
done

field() { tail -n 1 "${out}/$1/metrics.jsonl" | grep -o "\"$2\": [^,}]*" | head -n 1 | cut -d' ' -f2 | tr -d '"'; }

echo
printf '%-9s %-22s %9s %9s %9s %10s %9s %12s %10s\n' method options "acc(rep0)" "acc(avg)" "ms/step" \
  "compress" "comm" "bytes/step" "vs dense"
dense_bytes=""
for method in ${methods}; do
  [[ "${method}" == dense ]] && dense_bytes="$(field dense bytes_per_step)"
done
for method in ${methods}; do
  bytes="$(field "${method}" bytes_per_step)"
  args="$(method_args "${method}")"
  awk -v m="${method}" -v o="${args:-defaults}" -v r="$(field "${method}" test_accuracy)" \
    -v a="$(field "${method}" test_accuracy_averaged)" -v t="$(field "${method}" step_time_s)" \
    -v c="$(field "${method}" compress_s_per_step)" -v k="$(field "${method}" comm_s_per_step)" -v b="${bytes}" \
    -v d="${dense_bytes:-0}" \
    'BEGIN { printf "%-9s %-22s %9.4f %9.4f %9.3f %10.3f %9.3f %12.0f %9s\n", m, o, r, a, 1e3 * t, 1e3 * c, 1e3 * k, b,
             (d > 0 ? sprintf("%.0fx", d / b) : "-") }'
done
