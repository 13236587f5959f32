#!/usr/bin/env bash
# The inputs of docs/scaling.md's projection to large rank counts: one short a2sgd-train run per
# exchange method on the language model (the paper setup, each method at a2sgd-train's defaults for
# it), whose summary holds what the projection needs and this machine cannot measure at scale:
#   modelled_comm_s_p<P>_<G>gbps   the alpha-beta model's communication time of the method's regular
#                                  step (periodic averages amortised) at every --ranks-list count on
#                                  every --links link (a2sgd::NetworkModel, docs/methods.md)
#   kernel_bytes_compress/_apply   the memory traffic of the method's kernels per step (KernelTraffic)
#   decode_scales_with_ranks       whether its decode grows with p (all-gather methods)
#   num_params, batch_size         the model, for the GPU step time of reports/scaling_report.py
# Run M goes to OUT/M.jsonl (its metrics) and OUT/M/config.ini. Nothing here is timed: the runs are
# two steps long and may share the machine with anything.
#
# Usage: scripts/studies/scaling_projection.sh [options] [-- extra a2sgd-train options for every run]
#   --out DIR          results directory (default results/scaling/projection)
#   --build DIR        build tree with apps/train/a2sgd-train (default build)
#   --methods "M ..."  exchange methods (default "dense a2sgd a2sgd-paper topk qsgd powersgd"); a2sgd is
#                      the language model's defaults (layer-wise means, an average every 200 steps),
#                      a2sgd-paper the paper's exchange alone (model-wide means: one 16-byte
#                      all-reduce per step, no averaging)
#   --ranks-list LIST  rank counts, comma-separated (default 2,4,...,1024)
#   --links LIST       links as GBIT_PER_S:ALPHA_US, comma-separated (default 25:15,200:1: docs/scaling.md
#                      says where each figure comes from)
# Environment: MPIEXEC (default mpirun), MPIEXEC_FLAGS (e.g. --oversubscribe); the Penn Treebank
# files where a2sgd-train finds them (scripts/fetch_data.sh).
# Exit code: 0 when every run succeeded, 2 for bad options, else the first failing run's code.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # here, root, PYTHONPATH, python, die

out=results/scaling/projection
build=build
methods="dense a2sgd a2sgd-paper topk qsgd powersgd"
ranks_list=2,4,8,16,32,64,128,256,512,1024
links=25:15,200:1
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --methods) methods=${2:?}; shift 2 ;;
    --ranks-list) ranks_list=${2:?}; shift 2 ;;
    --links) links=${2:?}; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
train=$build/apps/train/a2sgd-train
[[ -x $train ]] || die "no a2sgd-train at $train (--build DIR)"
[[ -n $methods ]] || die "--methods needs at least one method"
# shellcheck source=training_runs.sh
source "$here/training_runs.sh"
mkdir -p "$out" || die "cannot create $out"
for m in $methods; do
  metrics=$out/$m.jsonl
  # a2sgd-train checks the lists (exit 2 naming the bad entry) before it reads any data.
  case "$m" in
    a2sgd-paper) method=(--compressor a2sgd --a2sgd-granularity model --a2sgd-average-every 0
                         --a2sgd-zero-gradient move) ;;
    *) method=(--compressor "$m") ;;
  esac
  args=(--model lstm --dataset ptb "${method[@]}" --steps 2 --eval-every 0 --log-every 2
        --project-ranks "$ranks_list" --project-links "$links" --metrics "$metrics" --output-dir "$out/$m"
        --no-progress-bar "${extra[@]}")
  echo "== $out/$m: a2sgd-train ${args[*]}" >&2
  a2sgd_train_run "$out/$m.log" 2 "$train" "${args[@]}" && rm -f "$out/$m.log"  # kept when it failed
done
exit $a2sgd_status
