#!/usr/bin/env bash
# A weak-scaling study on Slurm: the same a2sgd-train run at several rank counts, one job per
# count (a job array cannot vary its task count), each through cpu.sbatch or gpu.sbatch, so each
# is restartable and writes runs/<job id>/ (metrics.jsonl, config.ini, checkpoints/). The per-rank
# batch stays a2sgd-train's (--batch-size), so the global batch grows with the count, as
# docs/scaling.md measures; a run's config.ini records what it ran with. Tabulate the jobs with
# scripts/studies/slurm/collect.py runs (docs/hpc.md).
#
# Usage: scripts/studies/slurm/scale.sh [options] [-- a2sgd-train options for every job]
#   --ranks "P ..."   rank counts (default "8 16 32")
#   --gpu             gpu.sbatch: one rank per GPU, --per-node ranks (default 4) and GPUs per node
#   --per-node N      ranks per node (cpu.sbatch: default Slurm's packing)
#   --time T          each job's time limit (sbatch --time; default the script's)
#   --dry-run         print the sbatch commands without submitting
# e.g. scripts/studies/slurm/scale.sh --ranks "8 16 32" -- --model lstm --dataset ptb --compressor a2sgd --epochs 9
# Environment: SBATCH (default sbatch), and what cpu.sbatch / gpu.sbatch read (A2SGD_TRAIN, ...).
# Exit code: 0 when every job was submitted, 2 for bad options, else sbatch's code for the first
# count it refused (the counts before it stay submitted: the script says which).
set -uo pipefail

ranks="8 16 32"
gpu=0
per_node=
time_limit=
dry=0
extra=()
die() { echo "scale.sh: error: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks=${2:?}; shift 2 ;;
    --gpu) gpu=1; shift ;;
    --per-node) per_node=${2:?}; shift 2 ;;
    --time) time_limit=${2:?}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ -n ${ranks// } ]] || die "--ranks needs at least one rank count"
for p in $ranks; do [[ $p =~ ^[1-9][0-9]*$ ]] || die "--ranks: '$p' is not a positive integer"; done
[[ -z $per_node || $per_node =~ ^[1-9][0-9]*$ ]] || die "--per-node must be a positive integer (got '$per_node')"
(( gpu )) && : "${per_node:=4}"
here=$(cd "$(dirname "$0")" && pwd)
script=$here/cpu.sbatch
(( gpu )) && script=$here/gpu.sbatch
submitted=
for p in $ranks; do
  args=(--ntasks="$p" --job-name="a2sgd-p$p")
  if [[ -n $per_node ]]; then
    args+=(--nodes=$(( (p + per_node - 1) / per_node )) --ntasks-per-node="$(( p < per_node ? p : per_node ))")
    (( gpu )) && args+=(--gpus-per-node="$(( p < per_node ? p : per_node ))")
  fi
  [[ -n $time_limit ]] && args+=(--time="$time_limit")
  if (( dry )); then
    echo "${SBATCH:-sbatch} ${args[*]} $script ${extra[*]}"
    continue
  fi
  out=$("${SBATCH:-sbatch}" --parsable "${args[@]}" "$script" "${extra[@]}")
  rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "scale.sh: sbatch refused the $p-rank job (exit $rc)${submitted:+; submitted before it:${submitted%;}}" >&2
    exit "$rc"
  fi
  job=${out%%;*}
  submitted+=" $p ranks: job $job;"
  echo "$p ranks: job $job (runs/$job/)"
done
exit 0
