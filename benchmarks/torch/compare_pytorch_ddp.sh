#!/usr/bin/env bash
# Time per training step of a2sgd-train --compressor dense against PyTorch DistributedDataParallel
# (gloo, CPU, one thread per rank) on the same MLP, batch and rank count, measured in one run:
# the two alternate REPEATS times and the medians are compared. Needs python3-torch (Debian),
# installed here when missing and running as root.
#
# Environment: A2SGD_BUILD_DIR (default: build), RANKS (2), STEPS (600), REPEATS (3),
# PYTHON (/usr/bin/python3, Debian's interpreter that python3-torch installs into), OUT_JSON (also
# write every round, the medians and the setting to this JSON file: docs/benchmarks.md's block
# pytorch-ddp-mlp is generated from such files under docs/results/pytorch/).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
source "${root}/scripts/deps.sh"
a2sgd_install_deps
python="${PYTHON:-/usr/bin/python3}"
if ! "${python}" -c "import torch" 2>/dev/null; then
  if [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch
  else
    echo "compare_pytorch_ddp.sh: needs PyTorch for ${python} (Debian: apt-get install python3-torch)" >&2
    exit 1
  fi
fi

build="${A2SGD_BUILD_DIR:-${root}/build}"
a2sgd_build "${root}" "${build}" a2sgd-train

ranks="${RANKS:-2}"
steps="${STEPS:-600}"
repeats="${REPEATS:-3}"
warmup=50
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
a2sgd_mpi_flags
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

load="$(cut -d' ' -f1 /proc/loadavg)"
ours=()
theirs=()
for ((i = 1; i <= repeats; ++i)); do
  # The same number of steps as PyTorch's warm-up + timed steps; step_time_s averages them all.
  mpiexec "${A2SGD_MPI_FLAGS[@]}" -n "${ranks}" "${build}/apps/train/a2sgd-train" --compressor dense \
    --steps $((steps + warmup)) --eval-every 0 --quiet --metrics "${tmp}/m.jsonl"
  ours+=("$(tail -n 1 "${tmp}/m.jsonl" | grep -o '"step_time_s": [^,}]*' | cut -d' ' -f2)")
  theirs+=("$("${python}" "${here}/pytorch_ddp_mlp.py" --ranks "${ranks}" --steps "${steps}" --warmup "${warmup}" |
    grep -o '"step_time_s": [^,}]*' | cut -d' ' -f2)")
  echo "round ${i}: a2sgd dense ${ours[-1]} s/step, PyTorch DDP ${theirs[-1]} s/step"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
a="$(median "${ours[@]}")"
t="$(median "${theirs[@]}")"
awk -v a="${a}" -v t="${t}" -v p="${ranks}" 'BEGIN {
  printf "MLP 784-256-256-10, batch 64 per rank, %d ranks, one thread per rank\n", p
  printf "  a2sgd-train --compressor dense : %.3f ms per step (median)\n", 1e3 * a
  printf "  PyTorch DDP (gloo)             : %.3f ms per step (median)\n", 1e3 * t
  printf "  ratio a2sgd / PyTorch          : %.3f\n", a / t }'
if [[ -n ${OUT_JSON:-} ]]; then
  # The setting a reader needs to compare two such files: OpenBLAS's kernels (the user's
  # OPENBLAS_CORETYPE, or its run-time choice), the processor, torch's version, the load before.
  core="$(OPENBLAS_VERBOSE=2 "${build}/apps/train/a2sgd-train" --version 2>&1 | sed -n 's/^Core: //p' | head -n 1)"
  "${python}" - "${OUT_JSON}" "${ranks}" "${steps}" "${warmup}" "${core:-unknown}" "${load}" \
    "${ours[*]}" "${theirs[*]}" "${a}" "${t}" <<'PY'
import json, os, platform, sys, torch
out, ranks, steps, warmup, core, load, ours, theirs, a, t = sys.argv[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
rec = {"model": "mlp 784-256-256-10", "batch_per_rank": 64, "ranks": int(ranks), "steps": int(steps),
       "warmup": int(warmup), "threads_per_rank": 1, "openblas_core": core, "cpu": cpu,
       "torch": torch.__version__, "backend": "gloo", "loadavg_before": float(load),
       "a2sgd_step_s": [float(v) for v in ours.split()], "torch_step_s": [float(v) for v in theirs.split()],
       "a2sgd_median_s": float(a), "torch_median_s": float(t), "ratio": float(a) / float(t)}
with open(out + ".tmp", "w") as f:
    json.dump(rec, f, indent=1)
    f.write("\n")
os.replace(out + ".tmp", out)
print(f"wrote {out}")
PY
fi
