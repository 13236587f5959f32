#!/usr/bin/env bash
# Whether training runs finish across the emulated cluster with K TCP connections per pair of
# ranks (docs/network.md, "Connections"): ROUNDS rounds of a2sgd-train with each method, once per
# connection count, each run ended by --collective-timeout (exit 76) instead of hanging.
# Writes OUT/runs.csv (round,links,method,exit,seconds) and OUT/<links>_<method>_<round>.log, and
# prints per connection count and method how many runs finished, stopped at the timeout or failed.
#
# Usage (root): scripts/studies/cluster/links_check.sh [options]
#   --out DIR            results (default results/links-check)
#   --build DIR          build tree with apps/train/a2sgd-train (default build)
#   --nodes N            emulated nodes, one rank each (default 4)
#   --rate R             link rate, tc syntax (default 100mbit)
#   --links "K ..."      TCP connections per pair (default "1 2")
#   --tcp-protocol P     send or put (default put: Open MPI's own)
#   --methods "M ..."    a2sgd-train --compressor values (default "fp16 bf16": all-to-all and
#                        all-gather, where 2 connections stopped)
#   --rounds R           runs per connection count and method (default 3)
#   --steps S            training steps per run (default 200)
#   --timeout T          a2sgd-train --collective-timeout, seconds (default 60)
#   --name C             the emulated cluster's name (default links; an existing one is replaced)
# Extra a2sgd-train options go after --. Exit code: 0 when every run finished, 1 when one stopped
# or failed, 2 on bad options or no cluster.
set -uo pipefail

out=results/links-check
build=build
nodes=4
rate=100mbit
links="1 2"
protocol=put
methods="fp16 bf16"
rounds=3
steps=200
timeout=60
name=links
extra=()
die() { echo "links_check.sh: error: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --nodes) nodes=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --links) links=${2:?}; shift 2 ;;
    --tcp-protocol) protocol=${2:?}; shift 2 ;;
    --methods) methods=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --timeout) timeout=${2:?}; shift 2 ;;
    --name) name=${2:?}; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer (got '$rounds')"
[[ $timeout =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive number of seconds (got '$timeout')"
[[ -n $links && -n $methods ]] || die "--links and --methods need at least one value each"
for k in $links; do [[ $k =~ ^[1-9]$ ]] || die "--links takes connection counts 1-9 (got '$k')"; done
[[ $nodes =~ ^[1-9][0-9]*$ && $nodes -ge 2 ]] || die "--nodes must be an integer >= 2 (got '$nodes')"
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer (got '$steps')"
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/a2sgd-cluster
train=$(cd "$build" 2> /dev/null && pwd)/apps/train/a2sgd-train
[[ -x $train ]] || die "no a2sgd-train in $build (--build DIR)"
mkdir -p "$out" || die "cannot create $out"
"$cluster" down --name "$name" > /dev/null 2>&1
"$cluster" up "$nodes" --rate "$rate" --name "$name" > /dev/null || exit 2
trap '"$cluster" down --name "$name" > /dev/null 2>&1' EXIT
trap '"$cluster" down --name "$name" > /dev/null 2>&1; exit 130' INT TERM

echo "round,links,method,exit,seconds" > "$out/runs.csv"
for ((r = 1; r <= rounds; r++)); do
  for k in $links; do
    for m in $methods; do
      start=$(date +%s%N)
      # A run that hangs past the collective timeout is the failure this looks for: a hard limit
      # well above it keeps the check itself from hanging.
      timeout $((timeout * 5 + 600)) "$cluster" run --name "$name" --tcp-links "$k" --tcp-protocol "$protocol" -- -np "$nodes" \
        "$train" --compressor "$m" --steps "$steps" --eval-every 0 --quiet --no-progress-bar \
        --collective-timeout "$timeout" "${extra[@]}" > "$out/${k}_${m}_$r.log" 2>&1
      rc=$?
      echo "$r,$k,$m,$rc,$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')" >> "$out/runs.csv"
      echo "round $r, $k connection(s), $m: exit $rc" >&2
    done
  done
done
# per connection count and method: finished, stopped at the timeout (76), otherwise failed
awk -F, 'NR > 1 { key = $2 " connection(s), " $3; n[key]++; if ($4 == 0) ok[key]++; else if ($4 == 76) st[key]++; else bad[key]++ }
  END { for (k in n) printf "%s: %d of %d finished, %d stopped at the collective timeout, %d failed\n", k, ok[k], n[k], st[k], bad[k] }' \
  "$out/runs.csv" | sort
awk -F, 'NR > 1 && $4 != 0 { found = 1 } END { exit found }' "$out/runs.csv"
