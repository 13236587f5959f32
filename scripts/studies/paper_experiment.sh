#!/usr/bin/env bash
# The paper's experiment on this machine: the LSTM language model on Penn Treebank (a2sgd-train
# --model lstm, the standard small configuration) trained with dense all-reduce, A2SGD (a2sgd-train's
# defaults for the language model, and the paper's pure O(1) exchange), Top-K and QSGD, each with
# SGD and with Adam (A2SGD with frozen-variance Adam on request); every run for the same step budget
# at the same rank count. Each run writes
# OUT/<method>_<optimizer>.jsonl (and .log); then reports/paper_report.py tabulates the
# time to a target validation perplexity (measured, and modelled for larger clusters) and
# reports/plot_metrics.py draws the curves (docs/results.md).
#
# Usage: scripts/studies/paper_experiment.sh [options] [-- extra a2sgd-train options for every run]
#   --out DIR          results directory (default results/paper)
#   --build DIR        build tree with apps/train/a2sgd-train (default build)
#   --ranks P          MPI ranks (default 2)
#   --steps N          training steps per run (default 2000)
#   --eval-every N     steps between evaluations (default 250)
#   --sgd-lr X         SGD learning rate of every run (default: a2sgd-train's, on the language model
#                      the standard recipe's 20, and 30 for the A2SGD runs, docs/convergence.md)
#   --adam-lr X        Adam learning rate of every run (default: a2sgd-train's, 0.002, and 0.003 for
#                      the A2SGD runs, docs/convergence.md)
#   --rates FILE       every baseline (dense, Top-K, QSGD, PowerSGD) at its own best rate of a
#                      learning-rate sweep: FILE is reports/lr_sweep_report.py's best.json, read at the
#                      cell lstm_p<ranks>_<optimizer>; a run whose method the cell lacks is refused
#                      (exit 2) before anything trains. The A2SGD runs keep a2sgd-train's defaults,
#                      A2SGD's tuned rates (docs/convergence.md). Not with --sgd-lr/--adam-lr.
#   --frozen-warmup W  dense warm-up steps of frozen-variance Adam (default 10% of --steps)
#   --runs "a b ..."   a subset of the run names below (default: all)
#   --target X         target validation perplexity (default: dense's final value x 1.1, per optimizer)
#   --no-report        only train
#   --network RATE     instead of training: time every run for --timing-steps steps across --ranks
#                      emulated nodes (one rank per node) whose links run at RATE (a tc rate such as
#                      250mbit; scripts/studies/cluster/a2sgd-cluster, root), into OUT/network-RATE-pP/, and
#                      report the time to the target: steps to target from the full runs already in
#                      OUT (same --ranks) x the step time measured over the network, next to the
#                      alpha-beta model's (reports/network_report.py; docs/network.md)
#   --timing-steps S   steps per timed run with --network (default 200)
#   --tcp-links K      TCP connections per pair of ranks with --network (default 1, Open MPI's own; docs/network.md)
#   --collectives A    with --network: openmpi (default, Open MPI's choice of algorithm) or ring
#                      (all-reduce and all-gather forced to the ring, a2sgd-cluster run --collectives;
#                      the timings go to OUT/network-RATE-pP-ring/)
# Runs: dense_sgd a2sgd_sgd a2sgd-pure_sgd topk_sgd qsgd_sgd dense_adam a2sgd_adam a2sgd-pure_adam
#       topk_adam qsgd_adam; on request a2sgd-frozen_adam, powersgd_sgd and powersgd_adam. a2sgd: the language model's defaults
#       (layer-wise means, held zero gradients, replicas averaged every 200 steps: 0.5% of dense's
#       traffic, docs/convergence.md); a2sgd-pure: the paper's method (model-wide means, zero
#       gradients moved, no averaging: 16 bytes per step).
# Environment: MPIEXEC (default mpirun), MPIEXEC_FLAGS (e.g. --oversubscribe), PYTHON (default
# /usr/bin/python3, which has matplotlib on Debian), A2SGD_DATA_DIR or --data-dir in the extra
# options for the Penn Treebank files.
# Exit code: 0 when every run and the report succeeded; otherwise the first failing step's code
# (a run that diverged with exit 3 is reported as such and does not stop the others).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # here, root, PYTHONPATH, python, die

out=results/paper
build=build
ranks=2
steps=2000
eval_every=250
sgd_lr=
adam_lr=
rates_file=
frozen_warmup=
runs="dense_sgd a2sgd_sgd a2sgd-pure_sgd topk_sgd qsgd_sgd dense_adam a2sgd_adam a2sgd-pure_adam topk_adam qsgd_adam"
target=
report=1
network=
timing_steps=200
tcp_links=1
collectives=openmpi
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --eval-every) eval_every=${2:?}; shift 2 ;;
    --sgd-lr) sgd_lr=${2:?}; shift 2 ;;
    --adam-lr) adam_lr=${2:?}; shift 2 ;;
    --rates) rates_file=${2:?}; shift 2 ;;
    --frozen-warmup) frozen_warmup=${2:?}; shift 2 ;;
    --runs) runs=${2:?}; shift 2 ;;
    --target) target=${2:?}; shift 2 ;;
    --no-report) report=0; shift ;;
    --network) network=${2:?}; shift 2 ;;
    --timing-steps) timing_steps=${2:?}; shift 2 ;;
    --tcp-links) tcp_links=${2:?}; shift 2 ;;
    --collectives) collectives=${2:?}; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for v in ranks steps eval_every timing_steps; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v//_/-} must be a positive integer (got '${!v}')"
done
[[ $collectives == openmpi || $collectives == ring ]] || die "--collectives must be openmpi or ring (got '$collectives')"
if [[ -n $rates_file ]]; then
  [[ -z $sgd_lr && -z $adam_lr ]] || die "--rates takes each baseline's rate from its sweep; it cannot be combined with --sgd-lr or --adam-lr"
  [[ -r $rates_file ]] || die "--rates: cannot read '$rates_file'"
fi
[[ -z $frozen_warmup ]] && frozen_warmup=$(( steps / 10 > 0 ? steps / 10 : 1 ))
[[ $frozen_warmup =~ ^[1-9][0-9]*$ ]] || die "--frozen-warmup must be a positive integer"
train=$build/apps/train/a2sgd-train
[[ -x $train ]] || die "no a2sgd-train at $train (--build DIR)"
# shellcheck source=training_runs.sh
source "$here/training_runs.sh"
mkdir -p "$out" || die "cannot create $out"

# With --rates, every baseline run's tuned rate, one "name rate" line per run, or exit 2 naming
# the run whose method the sweep's cell lacks (so no run trains at a rate nobody tuned).
declare -A tuned_lr=()
if [[ -n $rates_file ]]; then
  tuned=$("$python" - "$rates_file" "$ranks" $runs <<'PY'
import json, sys
path, ranks, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    with open(path) as f:
        best = json.load(f)
except (OSError, ValueError) as e:
    print(f"paper_experiment.sh: error: --rates: '{path}' is not a sweep's best.json: {e}", file=sys.stderr)
    sys.exit(2)
for run in runs:
    method, optimizer = run.rsplit("_", 1) if "_" in run else (run, "")
    if method not in ("dense", "topk", "qsgd", "powersgd"):
        continue  # the A2SGD runs keep a2sgd-train's defaults
    cell = f"lstm_p{ranks}_{optimizer}"
    entry = best.get(cell, {}).get(method) if isinstance(best, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("lr"), (int, float)) or entry["lr"] <= 0:
        print(f"paper_experiment.sh: error: --rates: '{path}' has no tuned rate for {method} in cell {cell} "
              f"(run {run}); sweep it first: scripts/studies/lr_sweep.sh --ranks {ranks} --methods {method} "
              f"--optimizers {optimizer}", file=sys.stderr)
        sys.exit(2)
    if entry.get("edge"):
        print(f"paper_experiment.sh: warning: {method}'s best rate in {cell} is at the edge of the rates tried",
              file=sys.stderr)
    lr = repr(float(entry["lr"]))
    print(run, lr[:-2] if lr.endswith(".0") else lr)
PY
) || exit 2
  while read -r name lr; do
    [[ -n $name ]] && tuned_lr[$name]=$lr
  done <<<"$tuned"
fi

# The options of one run, by name.
run_options() {
  local method=${1%_*} optimizer=${1##*_}
  local -a o
  case "$method" in
    dense|topk|qsgd|powersgd) o=(--compressor "$method") ;;
    a2sgd) o=(--compressor a2sgd) ;;
    a2sgd-pure) o=(--compressor a2sgd --a2sgd-granularity model --a2sgd-average-every 0 --a2sgd-zero-gradient move) ;;
    a2sgd-frozen) o=(--compressor a2sgd --a2sgd-moments frozen --a2sgd-warmup-steps "$frozen_warmup") ;;
    *) return 1 ;;
  esac
  case "$optimizer" in
    sgd) o+=(--optimizer sgd ${sgd_lr:+--lr "$sgd_lr"}) ;;
    adam) o+=(--optimizer adam ${adam_lr:+--lr "$adam_lr"}) ;;
    *) return 1 ;;
  esac
  [[ -n ${tuned_lr[$1]:-} ]] && o+=(--lr "${tuned_lr[$1]}")
  printf '%s\n' "${o[@]}"
}

# --network: the same runs, timed across emulated nodes.
if [[ -n $network ]]; then
  # shellcheck source=cluster/timing.sh
  source "$here/cluster/timing.sh"
  netdir=$out/network-$network-p$ranks
  [[ $collectives == ring ]] && netdir=$netdir-ring
  a2sgd_net_begin "$network" "$ranks" "$netdir" "$build" "$tcp_links" "$collectives" || exit $?
  status=0
  for name in $runs; do
    mapfile -t opts < <(run_options "$name") || true
    [[ ${#opts[@]} -gt 0 ]] || die "unknown run '$name'"
    echo "== $name over the network: ${opts[*]}" >&2
    start=$(date +%s)
    a2sgd_net_train "$name" --model lstm "${opts[@]}" --steps "$timing_steps" --eval-every 0 --log-every 50 \
      --collective-timeout 0 "${extra[@]}"
    rc=$?
    echo "   exit $rc after $(( $(date +%s) - start )) s" >&2
    if [[ $rc -ne 0 ]]; then
      tail -n 5 "$netdir/$name.log" >&2
      [[ $status -eq 0 ]] && status=$rc
    fi
  done
  a2sgd_net_end
  if [[ $report -eq 1 ]]; then
    targs=()
    [[ -n $target ]] && targs=(--target "$target")
    "$python" -m reports network "$out" "$netdir" "${targs[@]}" || { rc=$?; [[ $status -eq 0 ]] && status=$rc; }
  fi
  exit $status
fi

for name in $runs; do
  mapfile -t opts < <(run_options "$name") || true
  [[ ${#opts[@]} -gt 0 ]] || die "unknown run '$name'"
  rm -f "$out/$name.jsonl"
  echo "== $name: ${opts[*]}" >&2
  a2sgd_train_run "$out/$name.log" "$ranks" "$train" --model lstm "${opts[@]}" --steps "$steps" \
    --eval-every "$eval_every" --metrics "$out/$name.jsonl" --no-progress-bar "${extra[@]}"
done
status=$a2sgd_status

if [[ $report -eq 1 ]]; then
  targs=()
  [[ -n $target ]] && targs=(--target "$target")
  "$python" -m reports paper "$out" "${targs[@]}" || { rc=$?; [[ $status -eq 0 ]] && status=$rc; }
  "$python" -m reports metrics-plots "$out" || { rc=$?; [[ $status -eq 0 ]] && status=$rc; }
fi
exit $status
