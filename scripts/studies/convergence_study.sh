#!/usr/bin/env bash
# The A2SGD convergence study (docs/convergence.md): trains one model with dense exchange and with
# A2SGD configurations at the same rank count, optimizer and horizon, one run after the other, and
# then tabulates with reports/convergence_report.py the steps each configuration needs to reach
# dense's final quality, its final quality, the replica divergence and the amortised bytes per step.
#
# Usage: scripts/studies/convergence_study.sh [options] [-- extra a2sgd-train options for every run]
#   --out DIR          results directory (default results/convergence); run R of a group is
#                      DIR/<model>_p<ranks>_<optimizer>/R.jsonl (metrics), R/config.ini (the
#                      effective configuration, which a2sgd-train --config reads back) and R.log
#   --build DIR        build tree with apps/train/a2sgd-train (default build)
#   --model M          lstm (Penn Treebank, default) or mlp (Fashion-MNIST)
#   --ranks "P ..."    rank counts (default "2 4" for lstm, "4 8" for mlp)
#   --optimizers "O ..."  sgd, adam, momentum (default "sgd adam")
#   --epochs N         horizon in epochs (default 6 for lstm, 3 for mlp)
#   --evals-per-epoch N  evaluations per epoch (default 3 for lstm, 2 for mlp)
#   --configs "C ..."  configurations (default: dense a2sgd a2sgd-layer-k100-hold); a name is
#                      dense, optionally followed by -lr<X>, -clip<X>, -lrw<W> and -const (dense-lr40:
#                      dense at lr 40),
#                      or a2sgd followed by any of these parts, in any order:
#                        -layer       --a2sgd-granularity layer
#                        -k<K>        --a2sgd-average-every K
#                        -global      --a2sgd-residual global
#                        -weighted    --a2sgd-averaging weighted
#                        -hold        --a2sgd-zero-gradient hold
#                        -w<W>        --a2sgd-warmup-steps W
#                        -frozen      --a2sgd-moments frozen (Adam; needs -w<W>)
#                        -decoded     --a2sgd-moments decoded (the optimizer on the decoded update)
#                        -mavg        --a2sgd-state-at-average average (the first moment averaged with
#                                     the replicas; needs -k<K>)
#                        -mreset      --a2sgd-state-at-average reset (the first moment zeroed there)
#                        -lr<X>       --lr X (instead of the optimizer's rate below)
#                        -clip<X>     --clip X
#                        -const       --lr-schedule constant (no plateau cuts; the model's schedule
#                                     otherwise)
#                        -lrw<W>      --lr-warmup-steps W (the rate rises linearly over the first W
#                                     steps; without it every run states --lr-warmup-steps 0, so
#                                     that a name means the same whatever the model's default:
#                                     A2SGD's defaults with Adam are a2sgd-layer-k200-hold-lr0.003-lrw200)
#                        -diloco      --outer-optimizer nesterov --outer-lr 0.7 --outer-momentum 0.9
#                                     (DiLoCo's outer step at each average; needs -k<K>)
#                        -olr<X>      --outer-lr X, -om<X> --outer-momentum X (with -diloco)
#                      or local (local SGD: no exchange between averages) with -k<K> (default: lstm
#                      200, mlp 100), -w<W> (--local-warmup-steps W: post-local SGD), -diloco,
#                      -olr<X>, -om<X>, -lr<X>, -lrw<W>, -clip<X>, -const;
#                      any name may end in -s<N>: --seed N (seed 1 otherwise; dense-s2, a2sgd-s3)
#   --checkpoint-every N  write a checkpoint every N steps into R/checkpoints/ (the newest kept) and
#                      continue an unfinished run from it, bit for bit, when the study is started
#                      again: long runs in resumable pieces. The records the run had written past
#                      that checkpoint are dropped from R.jsonl first, so that none appears twice;
#                      a resumed run's wall times count from its restart. The checkpoints are
#                      removed when the run ends.
#   --force            run again even where a finished run's metrics exist (default: skip them, so
#                      that an interrupted study continues where it stopped)
#   --no-report        only train
# Learning rates: lstm sgd 20, adam 0.002; mlp sgd 0.1, momentum 0.05 (momentum 0.9), adam 0.001.
# Environment: MPIEXEC (default mpirun), MPIEXEC_FLAGS (e.g. --oversubscribe), PYTHON (default
# /usr/bin/python3), A2SGD_DATA_DIR or --data-dir in the extra options.
# Exit code: 0 when every run and the report succeeded, 2 for bad options, else the first failing
# run's code (a run that stopped with exit 3, diverged, is reported and does not stop the others).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # here, root, PYTHONPATH, python, die

out=results/convergence
build=build
model=lstm
ranks=
optimizers="sgd adam"
epochs=
evals_per_epoch=
configs="dense a2sgd a2sgd-layer-k100-hold"
force=0
report=1
checkpoint_every=0
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --model) model=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --optimizers) optimizers=${2:?}; shift 2 ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --evals-per-epoch) evals_per_epoch=${2:?}; shift 2 ;;
    --configs) configs=${2:?}; shift 2 ;;
    --checkpoint-every) checkpoint_every=${2:?}; shift 2 ;;
    --force) force=1; shift ;;
    --no-report) report=0; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
case "$model" in
  lstm) : "${ranks:=2 4}" "${epochs:=6}" "${evals_per_epoch:=3}"; model_opts=(--model lstm --dataset ptb) ;;
  mlp) : "${ranks:=4 8}" "${epochs:=3}" "${evals_per_epoch:=2}"; model_opts=(--model mlp) ;;
  *) die "--model must be lstm or mlp (got '$model')" ;;
esac
for v in epochs evals_per_epoch; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v//_/-} must be a positive integer (got '${!v}')"
done
[[ $checkpoint_every =~ ^[0-9]+$ ]] || die "--checkpoint-every must be a non-negative integer (got '$checkpoint_every')"
for p in $ranks; do [[ $p =~ ^[1-9][0-9]*$ ]] || die "--ranks: '$p' is not a positive integer"; done
train=$build/apps/train/a2sgd-train
[[ -x $train ]] || die "no a2sgd-train at $train (--build DIR)"
# shellcheck source=training_runs.sh
source "$here/training_runs.sh"

# The optimizer's options for this model; its learning rate unless the configuration names one ($2).
optimizer_options() {
  local rate
  case "$model:$1" in
    lstm:sgd) rate=20 ;;
    lstm:adam) rate=0.002 ;;
    mlp:sgd) rate=0.1 ;;
    mlp:momentum) rate=0.05 ;;
    mlp:adam) rate=0.001 ;;
    *) return 1 ;;
  esac
  echo "--optimizer $1 $([[ $1 == momentum ]] && echo "--momentum 0.9") $([[ " $2 " == *" --lr "* ]] || echo "--lr $rate")"
}

# The exchange options of a configuration name (see --help); fails on an unknown part. Every A2SGD
# option is stated, so that a run means the same whatever a2sgd-train's defaults are.
# The parts every method's name may hold (see --help); sets the caller's run (an array of options),
# lrw, every, warmup, outer, olr and om. Fails on a part that is none of them.
shared_part() {
  local part=$1
  case "$part" in
    "") ;;
    k[1-9]*) [[ ${part#k} =~ ^[0-9]+$ ]] || return 1; every=${part#k} ;;
    w[1-9]*) [[ ${part#w} =~ ^[0-9]+$ ]] || return 1; warmup=${part#w} ;;
    diloco) outer=nesterov olr=0.7 om=0.9 ;;
    olr[0-9]*) [[ ${part#olr} =~ ^[0-9.e]+$ ]] || return 1; olr=${part#olr} ;;
    om[0-9]*) [[ ${part#om} =~ ^[0-9.e]+$ ]] || return 1; om=${part#om} ;;
    lrw[1-9]*) [[ ${part#lrw} =~ ^[0-9]+$ ]] || return 1; lrw=${part#lrw} ;;
    lr[0-9]*) [[ ${part#lr} =~ ^[0-9.e]+$ ]] || return 1; run+=(--lr "${part#lr}") ;;
    clip[0-9]*) [[ ${part#clip} =~ ^[0-9.e]+$ ]] || return 1; run+=(--clip "${part#clip}") ;;
    const) run+=(--lr-schedule constant) ;;
    *) return 1 ;;
  esac
}

config_options() {
  local name=$1 part seed=
  # The seed part, any configuration's last.
  if [[ $name =~ ^(.+)-s([1-9][0-9]*)$ ]]; then
    name=${BASH_REMATCH[1]} seed=${BASH_REMATCH[2]}
    config_options "$name" | sed "s/\$/ --seed $seed/"
    return "${PIPESTATUS[0]}"
  fi
  local method=${name%%-*}
  [[ $method =~ ^(dense|a2sgd|local)$ ]] || return 1
  local every=0 warmup=0 lrw=0 outer=average olr=1 om=0
  local granularity=model residual=local averaging=mean zeros=move moments=local state=keep
  [[ $method == local ]] && case "$model" in lstm) every=200 ;; *) every=100 ;; esac
  local -a run=(--compressor "$method")
  local IFS=-
  for part in ${name#"$method"}; do
    if [[ $method == a2sgd ]]; then
      case "$part" in
        layer) granularity=layer; continue ;;
        global) residual=global; continue ;;
        weighted) averaging=weighted; continue ;;
        hold) zeros=hold; continue ;;
        frozen) moments=frozen; continue ;;
        decoded) moments=decoded; continue ;;
        mavg) state=average; continue ;;
        mreset) state=reset; continue ;;
      esac
    fi
    shared_part "$part" || return 1
  done
  IFS=' '
  case "$method" in
    dense)
      # Dense takes no period, warm-up or outer step.
      [[ $every == 0 && $warmup == 0 && $outer == average ]] || return 1
      echo "${run[*]} --lr-warmup-steps $lrw" ;;
    local)
      echo "${run[*]} --lr-warmup-steps $lrw --average-every $every --local-warmup-steps $warmup" \
        "--outer-optimizer $outer --outer-lr $olr --outer-momentum $om" ;;
    a2sgd)
      # Stated only when not the default, so that earlier runs' command lines stay as they were;
      # the outer optimizer always, since a model may default to one (the MLP's A2SGD does).
      [[ $state == keep ]] || run+=(--a2sgd-state-at-average "$state")
      run+=(--outer-optimizer "$outer" --outer-lr "$olr" --outer-momentum "$om")
      echo "${run[*]} --lr-warmup-steps $lrw --a2sgd-granularity $granularity --a2sgd-average-every $every" \
        "--a2sgd-residual $residual --a2sgd-averaging $averaging --a2sgd-zero-gradient $zeros" \
        "--a2sgd-warmup-steps $warmup --a2sgd-moments $moments" ;;
  esac
}

for o in $optimizers; do optimizer_options "$o" "" > /dev/null || die "optimizer '$o' is not part of the $model study"; done
for c in $configs; do config_options "$c" > /dev/null || die "unknown configuration '$c' (see --help)"; done

# Steps per epoch at p ranks, as a2sgd-train's header reports them (a one-step run).
steps_per_epoch() {
  ${MPIEXEC:-mpirun} ${MPIEXEC_FLAGS:-} -np "$1" "$train" "${model_opts[@]}" --steps 1 --eval-every 0 \
    --no-progress-bar "${extra[@]}" 2>&1 | sed -n 's/.*(\([0-9]*\) per epoch).*/\1/p' | head -n 1
}

for p in $ranks; do
  spe=$(steps_per_epoch "$p")
  [[ $spe =~ ^[1-9][0-9]*$ ]] || die "could not read the steps per epoch at $p ranks from a2sgd-train"
  steps=$((spe * epochs))
  eval_every=$(( spe / evals_per_epoch > 0 ? spe / evals_per_epoch : 1 ))
  for opt in $optimizers; do
    dir=$out/${model}_p${p}_${opt}
    mkdir -p "$dir" || die "cannot create $dir"
    for c in $configs; do
      metrics=$dir/$c.jsonl
      if [[ $force -eq 0 ]] && a2sgd_finished "$metrics"; then
        echo "== $dir/$c: done before, kept" >&2
        continue
      fi
      copts=$(config_options "$c")
      # shellcheck disable=SC2046,SC2086
      args=("${model_opts[@]}" $(optimizer_options "$opt" "$copts") $copts --steps "$steps"
            --eval-every "$eval_every" --log-every "$eval_every" --metrics "$metrics" --output-dir "$dir/$c"
            --no-progress-bar "${extra[@]}")
      if [[ $checkpoint_every -gt 0 ]]; then
        ckpt=$dir/$c/checkpoints
        newest=$(ls "$ckpt"/ckpt-*.h5 2> /dev/null | sort | tail -n 1)
        if [[ -n $newest && -f $metrics ]]; then
          # The run continues from the newest checkpoint: the records past its step go.
          at=$(basename "$newest" .h5); at=$((10#${at#ckpt-}))
          "$python" - "$metrics" "$at" <<'PY' || die "cannot trim $metrics to step $at"
import json, sys
path, at = sys.argv[1], int(sys.argv[2])
with open(path) as f:
    kept = [line for line in f if line.strip() and json.loads(line).get("step", 0) <= at]
with open(path, "w") as f:
    f.writelines(kept)
PY
          echo "== $dir/$c: continued from step $at" >&2
        else
          # A fresh start (--resume auto appends to the metrics file): no records of an earlier try.
          rm -f "$metrics"
        fi
        args+=(--checkpoint-dir "$ckpt" --checkpoint-every "$checkpoint_every" --keep-checkpoints 1 --resume auto)
      fi
      echo "== $dir/$c: a2sgd-train ${args[*]}" >&2
      a2sgd_train_run "$dir/$c.log" "$p" "$train" "${args[@]}"
      if [[ $checkpoint_every -gt 0 ]] && a2sgd_finished "$metrics"; then
        # Finished: the checkpoints and their records go, so that the file reads as any other run's.
        rm -rf "$dir/$c/checkpoints"
        sed -i '/"event": *"checkpoint"/d' "$metrics"
      fi
    done
  done
done

if [[ $report -eq 1 ]]; then
  "$python" -m reports convergence "$out" || { rc=$?; [[ $a2sgd_status -eq 0 ]] && a2sgd_status=$rc; }
fi
exit $a2sgd_status
