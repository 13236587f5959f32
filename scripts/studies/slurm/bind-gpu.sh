#!/bin/bash
# Runs one MPI task of a GPU job on its own GPU: "bind-gpu.sh a2sgd-train [options]" adds
# --kokkos-device-id for Kokkos. Where Slurm already restricted the task to one device
# (--gpus-per-task=1 sets CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES to one id), that device is
# number 0 inside the task; otherwise the task takes GPU number $SLURM_LOCALID of its node.
set -euo pipefail
visible="${CUDA_VISIBLE_DEVICES:-${ROCR_VISIBLE_DEVICES:-${HIP_VISIBLE_DEVICES:-}}}"
if [[ -n "${visible}" && "${visible}" != *,* ]]; then
  device=0
else
  device="${SLURM_LOCALID:?bind-gpu.sh runs inside a Slurm task}"
fi
exec "$@" "--kokkos-device-id=${device}"
