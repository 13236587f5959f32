#!/usr/bin/env bash
# The outer-optimizer study's cells over the emulated network (docs/network.md, "The outer-
# optimizer study over the network"): every configuration's step timed across P emulated nodes,
# one rank per node (a2sgd-cluster; root), then reports/outer_report.py --network multiplies each
# configuration's steps to the target (the study's mean over its seeds, in DIR/<model>_p<P>_<optimizer>/)
# by its time per step. A step's time includes its share of the periodic averages (200 steps hold
# two at the MLP's period of 100, one at the language model's 200), so local SGD's steps between
# averages cost their compute alone.
#
# Usage: scripts/studies/outer_network.sh [--model mlp|lstm] [--out DIR] [--build DIR] [--rate R]
#                                 [--nodes "4 8"] [--optimizers LIST] [--steps 200] [--dense-steps N]
#   --model mlp (default): dense, A2SGD's defaults (an average every 100 steps, outer Nesterov),
#       local SGD every 100 steps, plain and with the outer Nesterov step; rate 100mbit; optimizers
#       "sgd momentum adam".
#   --model lstm: dense, A2SGD's defaults (layer-wise, a plain average every 200 steps) and local
#       SGD every 200 steps, on PTB; rate 250mbit (docs/network.md's choice for the language
#       model); optimizers "sgd adam". Dense runs with a2sgd-train's defaults (clipping, so its
#       all-reduce follows the backward pass) for --dense-steps steps (default 40: it has no periodic
#       average to amortise, and each of its steps takes seconds over these links).
# Timed runs go to DIR/network-<rate>-p<P>/<config>_<optimizer>.jsonl (with link.txt, netbench.csv).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # here, root, PYTHONPATH, python, die
out=docs/results/outer
build=build
model=mlp
rate=
nodes="4 8"
optimizers=
steps=200
dense_steps=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --nodes) nodes=${2:?}; shift 2 ;;
    --optimizers) optimizers=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --dense-steps) dense_steps=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $model =~ ^(mlp|lstm)$ ]] || die "--model must be mlp or lstm (got '$model')"
if [[ $model == lstm ]]; then : "${rate:=250mbit}" "${optimizers:=sgd adam}" "${dense_steps:=40}"; else : "${rate:=100mbit}" "${optimizers:=sgd momentum adam}" "${dense_steps:=$steps}"; fi
[[ $dense_steps =~ ^[1-9][0-9]*$ ]] || die "--dense-steps must be a positive integer (got '$dense_steps')"
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer (got '$steps')"
for p in $nodes; do [[ $p =~ ^[2-9]$|^1[0-6]$ ]] || die "--nodes: '$p' is not 2 to 16"; done
for o in $optimizers; do [[ $o =~ ^(sgd|momentum|adam)$ ]] || die "--optimizers: '$o' is not sgd, momentum or adam"; done
[[ -x $build/apps/train/a2sgd-train ]] || die "no a2sgd-train in $build (--build DIR)"
# shellcheck source=cluster/timing.sh
source "$here/cluster/timing.sh"

# The configurations of the study's verdict (their rate changes no work and no byte of a step).
config_args() {
  case "$1" in
    dense) echo "--compressor dense" ;;
    a2sgd-k100-diloco) echo "--compressor a2sgd --average-every 100 --outer-optimizer nesterov --outer-lr 0.7 --outer-momentum 0.9" ;;
    local-k100) echo "--compressor local --average-every 100 --outer-optimizer average" ;;
    local-k100-diloco) echo "--compressor local --average-every 100 --outer-optimizer nesterov --outer-lr 0.7 --outer-momentum 0.9" ;;
    a2sgd-layer-k200-hold) echo "--compressor a2sgd" ;;
    local-k200) echo "--compressor local --average-every 200 --outer-optimizer average" ;;
  esac
}
if [[ $model == lstm ]]; then
  configs="dense a2sgd-layer-k200-hold local-k200"
  model_args="--model lstm --dataset ptb"
else
  configs="dense a2sgd-k100-diloco local-k100 local-k100-diloco"
  model_args="--model mlp"
fi
for p in $nodes; do
  netdir=$out/network-$rate-p$p
  a2sgd_net_begin "$rate" "$p" "$netdir" "$build" || exit $?
  for opt in $optimizers; do
    for c in $configs; do
      echo "=== $c, $opt, $p nodes at $rate" >&2
      # shellcheck disable=SC2046,SC2086
      a2sgd_net_train "${c}_$opt" $model_args --optimizer "$opt" $([[ $opt == momentum ]] && echo "--momentum 0.9") \
        $(config_args "$c") --steps "$([[ $c == dense ]] && echo "$dense_steps" || echo "$steps")" --eval-every 0 --log-every 1000 --quiet --collective-timeout 0 ||
        { tail -n 5 "$netdir/${c}_$opt.log" >&2; exit 1; }
    done
  done
  a2sgd_net_end
done
exec "${PYTHON:-/usr/bin/python3}" -m reports outer --model "$model" --network "$rate" "$out"
