#!/usr/bin/env bash
# The outer-optimizer study (docs/convergence.md, "Local SGD, DiLoCo and A2SGD at equal bytes"): in
# each cell (model, rank count, optimizer) tuned dense, A2SGD, local SGD at the same period, both
# with DiLoCo's outer Nesterov step, and local SGD at the period that spends the whole traffic
# budget. Every method but dense is screened over three learning rates at seed 1 (dense's rate is
# the convergence study's tuned one), and where the best of them is the grid's smallest or
# largest, over the next rate beyond it (half or twice); the best rate of each (fewest steps to
# seed 1's dense target, then the best final quality) is then run at seeds 2 and 3, dense at all
# three. Runs are those of
# scripts/studies/convergence_study.sh (resumable: finished runs are kept), in DIR/<model>_p<P>_<optimizer>/.
#
# The language model (--model lstm) has its own plan, since a run takes 15-45 minutes on the
# 2-core machine the results come from: dense and A2SGD's defaults are the convergence study's runs
# at seed 1 (linked into DIR, not run again); the configurations are A2SGD's defaults with the
# outer step, local SGD every 200 steps (A2SGD's period: the same bytes) with and without it, and
# local SGD every 100 steps (about 1% of dense's bytes: the whole budget); dense runs 6 epochs and
# the others 9, as in the convergence study. The screen is two rates (SGD 30 and 40, Adam 0.002
# and 0.003: the tuned dense rates of 7 of the 8 cells and A2SGD's default), without an edge
# extension; the phases are ordered so that every cell has each configuration at the first rate
# before any second rate runs: --phase first (A2SGD with the outer step and local SGD at the same
# period, first rate), second (the other two configurations), rates (the second rate of all four),
# seeds (seed 2 of dense and of each configuration's best rate, at 8 and 16 ranks). Runs write a
# checkpoint every 800/P steps and continue from it when the study is started again.
#
# Usage: scripts/studies/outer_study.sh [--out DIR] [--build DIR] [--model mlp] [--ranks "4 8 16"]
#                               [--optimizers "momentum adam sgd"] [--seeds "2 3"] [--phase screen|seeds|all]
#        scripts/studies/outer_study.sh --model lstm [--out DIR] [--build DIR] [--ranks "16 8 4 2"]
#                               [--optimizers "adam sgd"] [--phase first|second|rates|seeds|all]
# Environment: as convergence_study.sh (MPIEXEC, MPIEXEC_FLAGS, PYTHON).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # here, root, PYTHONPATH, python, die
out=docs/results/outer
build=build
model=mlp
ranks=
optimizers=
seeds="2 3"
phase=all
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --model) model=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --optimizers) optimizers=${2:?}; shift 2 ;;
    --seeds) seeds=${2:?}; shift 2 ;;
    --phase) phase=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $model =~ ^(mlp|lstm)$ ]] || die "--model must be mlp or lstm (got '$model')"
if [[ $model == lstm ]]; then : "${ranks:=16 8 4 2}" "${optimizers:=adam sgd}"; else : "${ranks:=4 8 16}" "${optimizers:=momentum adam sgd}"; fi
status=0
study() { bash "$here/convergence_study.sh" --out "$out" --build "$build" --model "$model" --no-report "$@" || status=$?; }
if [[ $model == lstm ]]; then
  source "$here/outer_study_lstm.sh"
  exit $status
fi
[[ $phase =~ ^(screen|seeds|all)$ ]] || die "--phase must be screen, seeds or all"

# The rate grid of an optimizer, and the tuned dense rate of a cell (the convergence study's).
grid() { case "$1" in sgd) echo "0.1 0.2 0.4" ;; momentum) echo "0.02 0.05 0.1" ;; adam) echo "0.001 0.002 0.004" ;; esac; }
dense_rate() {
  case "$1:$2" in
    *:sgd) echo 0.2 ;;
    4:momentum|8:momentum) echo 0.05 ;;
    16:momentum) echo 0.1 ;;
    4:adam|8:adam) echo 0.002 ;;
    16:adam) echo 0.004 ;;
  esac
}
# The screened configurations (without their rate): A2SGD's defaults (no average with plain SGD,
# every 100 steps otherwise), local SGD at 100 steps (1% of dense's bytes) and at 50 (2%: the MLP's
# budget), and both with DiLoCo's outer step.
configs() {
  local a2sgd=a2sgd-k100
  [[ $1 == sgd ]] && a2sgd=a2sgd
  echo "$a2sgd a2sgd-k100-diloco local-k100 local-k100-diloco local-k50"
}

for p in $ranks; do
  for opt in $optimizers; do
    dense=dense-lr$(dense_rate "$p" "$opt")
    if [[ $phase != seeds ]]; then
      study --ranks "$p" --optimizers "$opt" --epochs 3 --configs "$dense"
      screened=""
      for c in $(configs "$opt"); do
        for lr in $(grid "$opt"); do screened+=" $c-lr$lr"; done
      done
      study --ranks "$p" --optimizers "$opt" --epochs 6 --configs "$screened"
      # A best rate on the grid's edge: one rate further out.
      rates=($(grid "$opt"))
      beyond=""
      for b in $("$python" -m reports outer --best "$out/${model}_p${p}_${opt}" $(configs "$opt")); do
        rate=${b##*-lr}
        if [[ $rate == "${rates[0]}" ]]; then
          beyond+=" ${b%-lr*}-lr$(awk -v r="$rate" 'BEGIN { printf "%g", r / 2 }')"
        elif [[ $rate == "${rates[-1]}" ]]; then
          beyond+=" ${b%-lr*}-lr$(awk -v r="$rate" 'BEGIN { printf "%g", r * 2 }')"
        fi
      done
      [[ -z $beyond ]] || study --ranks "$p" --optimizers "$opt" --epochs 6 --configs "$beyond"
    fi
    if [[ $phase != screen ]]; then
      best=$("$python" -m reports outer --best "$out/${model}_p${p}_${opt}" $(configs "$opt")) ||
        { status=1; continue; }
      seeded_dense="" seeded=""
      for s in $seeds; do
        seeded_dense+=" $dense-s$s"
        for b in $best; do seeded+=" $b-s$s"; done
      done
      study --ranks "$p" --optimizers "$opt" --epochs 3 --configs "$seeded_dense"
      study --ranks "$p" --optimizers "$opt" --epochs 6 --configs "$seeded"
    fi
  done
done
exit $status
