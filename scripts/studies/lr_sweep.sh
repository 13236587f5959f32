#!/usr/bin/env bash
# Learning-rate sweep (docs/tuning.md): every exchange method with every optimizer at a list of
# learning rates, one run after the other at the same rank count, seed, data and horizon, so that
# each method is compared at its own best rate. Every other option is a2sgd-train's default for the
# method (A2SGD: the language model's defaults; Top-K, QSGD, PowerSGD: their default ratio, levels
# and rank). Run R of a cell goes to OUT/<model>_p<ranks>_<optimizer>/<method>_lr<rate>/ as
# metrics.jsonl (train records at the evaluation interval, eval records, summary) and config.ini (the
# effective configuration, which a2sgd-train --config reads back); then reports/lr_sweep_report.py
# tabulates every cell and picks the rate whose averaged model scores best at the end.
#
# Usage: scripts/studies/lr_sweep.sh [options] [-- extra a2sgd-train options for every run]
#   --out DIR           results directory (default results/lr-sweep)
#   --build DIR         build tree with apps/train/a2sgd-train (default build)
#   --model M           lstm (Penn Treebank, default) or mlp (Fashion-MNIST)
#   --ranks "P ..."     rank counts (default 2)
#   --methods "M ..."   exchange methods (default "dense a2sgd topk qsgd powersgd")
#   --optimizers "O ..." optimizers (default: lstm "sgd adam", mlp "sgd momentum adam"; momentum
#                       with --momentum 0.9)
#   --rates "O=R,R,..." the rates of optimizer O (repeatable); defaults: lstm sgd=10,20,30,40
#                       adam=0.001,0.002,0.003,0.004; mlp sgd=0.05,0.1,0.2,0.4
#                       momentum=0.01,0.02,0.05,0.1 adam=0.0005,0.001,0.002,0.004
#   --steps N           training steps per run (default: lstm 800; mlp 3 epochs at the rank count)
#   --eval-every N      steps between evaluations (default: lstm 200; mlp half an epoch)
#   --force             run again where a finished run exists (default: keep it, so that an
#                       interrupted sweep continues where it stopped)
#   --dry-run           print the runs (and whether each is done) without training
#   --no-report         only train
# A run that diverges (exit 3) counts as tried: the report shows it as diverged.
# Environment: MPIEXEC (default mpirun), MPIEXEC_FLAGS (e.g. --oversubscribe), PYTHON (default
# /usr/bin/python3); the Penn Treebank files where a2sgd-train finds them (scripts/fetch_data.sh).
# Exit code: 0 when every run and the report succeeded, 2 for bad options, else the first failing
# run's code.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # here, root, PYTHONPATH, python, die

out=results/lr-sweep
build=build
model=lstm
ranks=2
methods="dense a2sgd topk qsgd powersgd"
optimizers=
steps=
eval_every=
force=0
dry=0
report=1
extra=()
declare -A rates=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --model) model=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --methods) methods=${2:?}; shift 2 ;;
    --optimizers) optimizers=${2:?}; shift 2 ;;
    --rates)
      [[ ${2:-} =~ ^(sgd|momentum|adam)=([0-9.e-]+(,[0-9.e-]+)*)$ ]] ||
        die "--rates takes OPTIMIZER=RATE,RATE,... (got '${2:-}')"
      rates[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
      shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --eval-every) eval_every=${2:?}; shift 2 ;;
    --force) force=1; shift ;;
    --dry-run) dry=1; shift ;;
    --no-report) report=0; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
case "$model" in
  lstm) model_opts=(--model lstm --dataset ptb)
        : "${optimizers:=sgd adam}"
        : "${rates[sgd]:=10,20,30,40}" "${rates[adam]:=0.001,0.002,0.003,0.004}" "${steps:=800}" "${eval_every:=200}" ;;
  mlp) model_opts=(--model mlp)
       : "${optimizers:=sgd momentum adam}"
       : "${rates[sgd]:=0.05,0.1,0.2,0.4}" "${rates[momentum]:=0.01,0.02,0.05,0.1}" "${rates[adam]:=0.0005,0.001,0.002,0.004}" ;;
  *) die "--model must be lstm or mlp (got '$model')" ;;
esac
for v in steps eval_every; do
  [[ -z ${!v} || ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v//_/-} must be a positive integer (got '${!v}')"
done
for p in $ranks; do [[ $p =~ ^[1-9][0-9]*$ ]] || die "--ranks: '$p' is not a positive integer"; done
for o in $optimizers; do
  case "$model:$o" in lstm:sgd|lstm:adam|mlp:sgd|mlp:momentum|mlp:adam) ;;
    *) die "optimizer '$o' is not swept for the $model model (lstm: sgd adam; mlp: sgd momentum adam)" ;; esac
  for r in ${rates[$o]//,/ }; do
    [[ $r =~ ^[0-9]*\.?[0-9]+(e-?[0-9]+)?$ ]] || die "--rates $o: '$r' is not a positive number"
  done
done
train=$build/apps/train/a2sgd-train
[[ -x $train ]] || die "no a2sgd-train at $train (--build DIR)"
known=$("$train" --list-methods 2>/dev/null | awk 'NF {print $1}')
for m in $methods; do grep -qx -- "$m" <<<"$known" || die "unknown method '$m' (a2sgd-train --list-methods)"; done
# shellcheck source=training_runs.sh
source "$here/training_runs.sh"

# Steps per epoch at p ranks, as a2sgd-train's header reports them (a one-step run).
steps_per_epoch() {
  ${MPIEXEC:-mpirun} ${MPIEXEC_FLAGS:-} -np "$1" "$train" "${model_opts[@]}" --steps 1 --eval-every 0 \
    --no-progress-bar "${extra[@]}" 2>&1 | sed -n 's/.*(\([0-9]*\) per epoch).*/\1/p' | head -n 1
}

for p in $ranks; do
  run_steps=$steps run_eval=$eval_every
  if [[ -z $run_steps || -z $run_eval ]]; then
    spe=$(steps_per_epoch "$p")
    [[ $spe =~ ^[1-9][0-9]*$ ]] || die "could not read the steps per epoch at $p ranks from a2sgd-train"
    : "${run_steps:=$((3 * spe))}" "${run_eval:=$(( spe / 2 > 0 ? spe / 2 : 1 ))}"
  fi
  for opt in $optimizers; do
    cell=$out/${model}_p${p}_${opt}
    for m in $methods; do
      for r in ${rates[$opt]//,/ }; do
        dir=$cell/${m}_lr$r
        if [[ $force -eq 0 ]] && a2sgd_finished "$dir/metrics.jsonl"; then
          echo "== $dir: done before, kept" >&2
          continue
        fi
        args=("${model_opts[@]}" --compressor "$m" --optimizer "$opt" --lr "$r" --steps "$run_steps"
              --eval-every "$run_eval" --log-every "$run_eval" --output-dir "$dir" --no-progress-bar "${extra[@]}")
        [[ $opt == momentum ]] && args+=(--momentum 0.9)
        if [[ $dry -eq 1 ]]; then
          echo "$dir: -np $p a2sgd-train ${args[*]}"
          continue
        fi
        # A run that stopped part-way (a killed sweep) starts again from scratch.
        rm -rf "$dir"
        mkdir -p "$dir" || die "cannot create $dir"
        echo "== $dir: a2sgd-train ${args[*]}" >&2
        a2sgd_train_run "$dir/run.log" "$p" "$train" "${args[@]}"
      done
    done
  done
done

if [[ $report -eq 1 && $dry -eq 0 ]]; then
  "$python" -m reports lr-sweep "$out" || { rc=$?; [[ $a2sgd_status -eq 0 ]] && a2sgd_status=$rc; }
fi
exit $a2sgd_status
