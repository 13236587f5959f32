#!/usr/bin/env bash
# scripts/studies/slurm/bind-gpu.sh picks the Kokkos device id a GPU job's task must use.
#   check_bind_gpu.sh <a2sgd source>
set -uo pipefail
bind="$1/scripts/studies/slurm/bind-gpu.sh"
status=0
expect() {  # expect <wanted device id> <environment assignments...>
  local want="$1" got
  shift
  got="$(env -u CUDA_VISIBLE_DEVICES -u ROCR_VISIBLE_DEVICES -u HIP_VISIBLE_DEVICES "$@" "${bind}" echo a2sgd-train)"
  if [[ "${got}" != "a2sgd-train --kokkos-device-id=${want}" ]]; then
    echo "FAIL: $*: got '${got}', want device ${want}"
    status=1
  else
    echo "ok: $* -> device ${want}"
  fi
}
expect 3 SLURM_LOCALID=3                                       # all GPUs visible: the local rank's
expect 2 SLURM_LOCALID=2 CUDA_VISIBLE_DEVICES=0,1,2,3
expect 0 SLURM_LOCALID=2 CUDA_VISIBLE_DEVICES=6                # Slurm gave the task one GPU
expect 0 SLURM_LOCALID=1 ROCR_VISIBLE_DEVICES=1
expect 1 SLURM_LOCALID=1 HIP_VISIBLE_DEVICES=0,1
if env -u SLURM_LOCALID -u CUDA_VISIBLE_DEVICES -u ROCR_VISIBLE_DEVICES -u HIP_VISIBLE_DEVICES \
  "${bind}" echo x > /dev/null 2>&1; then
  echo "FAIL: outside a Slurm task bind-gpu.sh should refuse"
  status=1
fi
exit "${status}"
