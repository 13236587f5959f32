#!/usr/bin/env bash
# PyTorch DistributedDataParallel over the emulated network (docs/pytorch.md, "Over the network"):
# the LSTM language model of a2sgd-train under DDP over gloo, one process per node of an
# a2sgd-cluster (docs/network.md) at --rate, with DDP's own overlapped all-reduce, torch's PowerSGD
# hook, torch's post-local SGD and a2sgd's A2SGD hook (benchmarks/torch/ddp_network.py says what
# each does and measures); next to them, in the same sitting and on the same links, a2sgd-train
# with the same model, dense and A2SGD at their defaults. Every configuration runs --repeats
# times, the configurations alternating; each run's JSON goes to OUT/p<N>/<exchange>-r<k>.json and
# OUT/meta.json records the command, the commit, the CPU and torch's version.
#
# Usage (as root): benchmarks/torch/ddp_network.sh [options]
#   --out DIR         results (default results/pytorch-network)
#   --nodes "N ..."   cluster sizes (default "2 4")
#   --rate R          link rate, tc's syntax (default 250mbit, as docs/network.md)
#   --exchanges LIST  comma-separated: ddp,powersgd,postlocal,a2sgd,topk,qsgd,efsign,train-dense,train-a2sgd
#                     (default: ddp,powersgd,postlocal,a2sgd,train-dense,train-a2sgd)
#   --repeats K       runs of each (default 3)
#   --steps S         timed steps per run (default 10)
#   --build DIR       build tree (a2sgd-train, and the Python package in DIR/python; default build)
# Environment: PYTHON (default /usr/bin/python3, Debian's, which has python3-torch). Keep the
# machine otherwise idle. The language model's data (PTB) must be in a2sgd's data home for the
# train-* runs (scripts/fetch_data.sh ptb); the PyTorch runs use random tokens.
# Exit code: 0 done, 2 bad options, otherwise the first failing run's (its log is next to its JSON).
set -uo pipefail

source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts/studies" && pwd)/common.sh"
out=results/pytorch-network
nodes_list="2 4"
rate=250mbit
exchanges=ddp,powersgd,postlocal,a2sgd,train-dense,train-a2sgd
repeats=3
steps=10
build=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?}; shift 2 ;;
    --nodes) nodes_list=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --exchanges) exchanges=${2:?}; shift 2 ;;
    --repeats) repeats=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats must be a positive integer (got '$repeats')"
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer (got '$steps')"
for n in $nodes_list; do [[ $n =~ ^[1-9][0-9]*$ && $n -ge 2 ]] || die "--nodes takes cluster sizes of 2 or more (got '$n')"; done
IFS=, read -r -a runs <<<"$exchanges"
for e in "${runs[@]}"; do
  case "$e" in ddp|powersgd|postlocal|a2sgd|topk|qsgd|efsign|train-dense|train-a2sgd) ;; *) die "unknown exchange '$e'" ;; esac
done
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces)"
build=$(cd "$build" 2>/dev/null && pwd) || die "no build tree '$build'"
[[ -x $build/apps/train/a2sgd-train ]] || die "no a2sgd-train in '$build' (build the project first)"
[[ -d $build/python/a2sgd ]] || die "no Python package in '$build/python' (configure with -DA2SGD_ENABLE_PYTHON=ON)"
"$python" -c "import torch" 2>/dev/null || die "$python has no torch (Debian: apt-get install python3-torch)"
cluster="$root/scripts/studies/cluster/a2sgd-cluster"
name=tnet
mkdir -p "$out" || die "cannot create '$out'"
out=$(cd "$out" && pwd)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# One PyTorch run: a worker per node, rank 0's JSON kept.
torch_run() {  # nodes exchange json port
  local n=$1 exchange=$2 json=$3 port=$4 pids=() rc=0 i
  local master
  master=$("$cluster" status --name "$name" | awk '/node 0:/ {print $4}')
  for ((i = 0; i < n; i++)); do
    timeout 900 "$cluster" exec --name "$name" "$i" -- env PYTHONPATH="$build/python" OMP_NUM_THREADS=1 \
      "$python" "$root/benchmarks/torch/ddp_network.py" --rank "$i" --world "$n" --master "$master" --port "$port" \
      --exchange "$exchange" --steps "$steps" --json "$json" >"${json%.json}.rank$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || rc=$?; done
  return "$rc"
}

# One a2sgd-train run over the same cluster: its summary's time per step.
train_run() {  # nodes compressor json
  local n=$1 compressor=$2 json=$3
  timeout 900 "$cluster" run --name "$name" -- -np "$n" "$build/apps/train/a2sgd-train" --model lstm --dataset ptb \
    --compressor "$compressor" --steps $((steps + 4)) --eval-every 0 --no-progress-bar \
    --metrics "${json%.json}.jsonl" >"${json%.json}.log" 2>&1 || return $?
  "$python" - "${json%.json}.jsonl" "$json" "$compressor" "$n" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
summary = [r for r in records if r.get("event") == "summary"][-1]
json.dump(dict(exchange="train-" + sys.argv[3], ranks=int(sys.argv[4]), summary=summary), open(sys.argv[2], "w"), indent=1)
PY
}

port=29500
for n in $nodes_list; do
  "$cluster" down --name "$name" >/dev/null 2>&1
  "$cluster" up "$n" --rate "$rate" --name "$name" >/dev/null || die "cannot bring up a cluster of $n nodes"
  mkdir -p "$out/p$n"
  for ((k = 1; k <= repeats; ++k)); do
    for e in "${runs[@]}"; do
      json="$out/p$n/$e-r$k.json"
      echo "== $n nodes, $e, run $k of $repeats"
      port=$((port + 1))
      case "$e" in
        train-*) train_run "$n" "${e#train-}" "$json" ;;
        *) torch_run "$n" "$e" "$json" "$port" ;;
      esac
      rc=$?
      if [[ $rc -ne 0 || ! -s $json ]]; then
        "$cluster" down --name "$name" >/dev/null 2>&1
        echo "ddp_network.sh: $n nodes, $e, run $k failed (exit code $rc; logs in $out/p$n)" >&2
        exit $((rc == 0 ? 1 : rc))
      fi
    done
  done
  "$cluster" down --name "$name" >/dev/null 2>&1
done
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || echo unknown)
torch_version=$("$python" -c "import torch; print(torch.__version__)")
cat >"$out/meta.json" <<JSON
{"command": "benchmarks/torch/ddp_network.sh --nodes '$nodes_list' --rate $rate --exchanges $exchanges --repeats $repeats --steps $steps", "nodes": [${nodes_list// /, }], "rate": "$rate", "exchanges": "$exchanges", "repeats": $repeats, "steps": $steps, "commit": "$commit", "cpu": "$cpu", "cores": $(nproc --all), "torch": "$torch_version"}
JSON
echo "results in $out"
