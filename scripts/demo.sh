#!/usr/bin/env bash
# A2SGD against dense all-reduce on Fashion-MNIST: builds a2sgd-train (Release), trains the
# 784-256-256-10 MLP on 2 MPI ranks for 3 epochs with each method, and prints a side-by-side table.
#
# Environment: A2SGD_BUILD_DIR (default: build), A2SGD_DEMO_DIR (default: demo-output),
# A2SGD_DEMO_RANKS (default: 2), A2SGD_DEMO_ARGS (extra a2sgd-train options for both runs).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/.." && pwd)"
source "${here}/deps.sh"
a2sgd_install_deps

build="${A2SGD_BUILD_DIR:-${root}/build}"
out="${A2SGD_DEMO_DIR:-${root}/demo-output}"
ranks="${A2SGD_DEMO_RANKS:-2}"
a2sgd_build "${root}" "${build}" a2sgd-train

a2sgd_mpi_flags

for method in dense a2sgd; do
  echo
  echo "=== ${method}: mpiexec -n ${ranks} a2sgd-train --compressor ${method} --output-dir ${out}/${method} ${A2SGD_DEMO_ARGS:-}"
  # shellcheck disable=SC2086
  mpiexec "${A2SGD_MPI_FLAGS[@]}" -n "${ranks}" "${build}/apps/train/a2sgd-train" --compressor "${method}" \
    --output-dir "${out}/${method}" --log-every 200 --no-progress-bar ${A2SGD_DEMO_ARGS:-}
done

# One value of the summary record (flat JSON, one object per line).
field() { tail -n 1 "${out}/$1/metrics.jsonl" | grep -o "\"$2\": [^,}]*" | head -n 1 | cut -d' ' -f2 | tr -d '"'; }

echo
printf '%-7s %10s %10s %9s %10s %10s %14s %10s\n' method "acc(rep0)" "acc(avg)" "ms/step" \
  "compress" "comm" "bytes/step" "reduction"
printf '%-7s %10s %10s %9s %10s %10s %14s %10s\n' "" "" "" "" "ms/step" "ms/step" "per rank" "vs dense"
dense_bytes="$(field dense bytes_per_step)"
for method in dense a2sgd; do
  bytes="$(field "${method}" bytes_per_step)"
  awk -v m="${method}" -v r="$(field "${method}" test_accuracy)" -v a="$(field "${method}" test_accuracy_averaged)" \
    -v t="$(field "${method}" step_time_s)" -v c="$(field "${method}" compress_s_per_step)" \
    -v k="$(field "${method}" comm_s_per_step)" -v b="${bytes}" -v d="${dense_bytes}" \
    'BEGIN { printf "%-7s %10.4f %10.4f %9.3f %10.3f %10.3f %14.0f %9.0fx\n", m, r, a, 1e3 * t, 1e3 * c, 1e3 * k, b, d / b }'
done
echo
echo "metrics: ${out}/{dense,a2sgd}/metrics.jsonl (JSON Lines; schema in docs/training.md)"
