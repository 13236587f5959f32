#!/usr/bin/env bash
# The emulated network measured, and the alpha-beta model held against it (docs/network.md): for
# each node count and link rate, a2sgd-netbench across that many emulated nodes (one rank per
# node): ping-pong and simultaneous exchange (the link fit), MPI_Allreduce and MPI_Allgather from
# the smallest to the largest size, and every exchange method's step on the LSTM language model's
# gradient; then reports/network_model_report.py tabulates the model's error and draws the plots.
#
# Usage (root): scripts/studies/network_study.sh [options]
#   --out DIR          results (default results/network): netbench_p<N>_<rate>_links<K>.csv and .log
#   --build DIR        build tree with benchmarks/netbench/a2sgd-netbench (default build)
#   --nodes "N ..."    node counts (default "2 4")
#   --rates "R ..."    link rates, tc syntax or none (default "100mbit 1gbit none")
#   --tcp-links K      TCP connections per pair of ranks (default 1, Open MPI's own; the results
#                      are named ..._links<K>)
#   --tcp-protocol P   send (default) or put: how Open MPI moves large messages (a2sgd-cluster run
#                      --tcp-protocol); results with put are named ..._links<K>_put
#   --collectives A    openmpi (default, Open MPI's choice of algorithm) or ring (all-reduce and
#                      all-gather forced to the ring: a2sgd-cluster run --collectives); results with
#                      ring are named ..._ring
#   --allreduce-algorithms "A ..."
#                      also time MPI_Allreduce of 2 and 8 MB with each of coll/tuned's algorithms
#                      forced in turn (numbers of coll_tuned_allreduce_algorithm: 2 reduce then
#                      broadcast, 3 recursive doubling, 4 ring, 5 segmented ring, 6 Rabenseifner),
#                      5 repetitions each: ..._allreduce-alg<A>.csv (with Open MPI's collectives only)
#   --seconds S        time per size and operation (default 1)
#   --max-bytes B      largest message (default 67108864)
#   --no-report        only measure
# After each node count and rate, the cluster's loss counters (a2sgd-cluster losses: tbf drops per
# node and direction, the node's TCP retransmissions and timeouts) go to netbench_<tag>.losses.
# Nothing else should run on the machine meanwhile: the unshaped link is the machine's memory
# and cores. Exit code: 0, or the first failing step's.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"  # here, root, PYTHONPATH, python, die

out=results/network
build=build
nodes="2 4"
rates="100mbit 1gbit none"
links=1
protocol=send
collectives=openmpi
seconds=1
max_bytes=$((64 << 20))
report=1
algorithms=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --nodes) nodes=${2:?}; shift 2 ;;
    --rates) rates=${2:?}; shift 2 ;;
    --tcp-links) links=${2:?}; shift 2 ;;
    --tcp-protocol) protocol=${2:?}; shift 2 ;;
    --collectives) collectives=${2:?}; shift 2 ;;
    --allreduce-algorithms) algorithms=${2?}; shift 2 ;;
    --seconds) seconds=${2:?}; shift 2 ;;
    --max-bytes) max_bytes=${2:?}; shift 2 ;;
    --no-report) report=0; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $collectives == openmpi || $collectives == ring ]] || die "--collectives must be openmpi or ring (got '$collectives')"
for a in $algorithms; do
  [[ $a =~ ^[1-6]$ ]] || die "--allreduce-algorithms takes coll_tuned_allreduce_algorithm numbers 1-6 (got '$a')"
done
[[ -z $algorithms || $collectives == openmpi ]] || die "--allreduce-algorithms forces the algorithm itself: not with --collectives ring"
cluster=$here/cluster/a2sgd-cluster
bench=$(cd "$build" 2> /dev/null && pwd)/benchmarks/netbench/a2sgd-netbench
[[ -x $bench ]] || die "no a2sgd-netbench in $build (--build DIR)"
mkdir -p "$out" || die "cannot create $out"
name=study
trap '"$cluster" down --name $name > /dev/null 2>&1' EXIT
trap '"$cluster" down --name $name > /dev/null 2>&1; exit 130' INT TERM

status=0
for n in $nodes; do
  for rate in $rates; do
    tag=p${n}_${rate}
    tag=${tag}_links$links
    [[ $protocol == put ]] && tag=${tag}_put
    [[ $collectives == ring ]] && tag=${tag}_ring
    echo "== $n nodes, rate $rate, $links TCP connection(s) per pair, protocol $protocol, collectives $collectives" >&2
    "$cluster" down --name $name > /dev/null 2>&1
    "$cluster" up "$n" --rate "$rate" --name $name > /dev/null || exit $?
    start=$(date +%s)
    timeout 3000 "$cluster" run --name $name --tcp-links "$links" --tcp-protocol "$protocol" --collectives "$collectives" -- -np "$n" "$bench" --seconds "$seconds" \
      --max-bytes "$max_bytes" --label "$rate" --csv "$out/netbench_$tag.csv" > "$out/netbench_$tag.log" 2>&1
    rc=$?
    echo "   exit $rc after $(( $(date +%s) - start )) s; $(grep 'fitted link' "$out/netbench_$tag.log")" >&2
    [[ $rc -ne 0 && $status -eq 0 ]] && status=$rc
    for a in $algorithms; do
      timeout 1200 "$cluster" run --name $name --tcp-links "$links" --tcp-protocol "$protocol" -- \
        --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm "$a" -np "$n" "$bench" --ops allreduce \
        --min-bytes 2097152 --max-bytes 8388608 --factor 4 --min-repeats 5 --max-repeats 5 --label "$rate" \
        --csv "$out/netbench_${tag}_allreduce-alg$a.csv" > "$out/netbench_${tag}_allreduce-alg$a.log" 2>&1
      rc=$?
      echo "   all-reduce algorithm $a: exit $rc" >&2
      [[ $rc -ne 0 && $status -eq 0 ]] && status=$rc
    done
    # the counters of this cluster's life: every run above
    if "$cluster" losses --name $name > "$out/netbench_$tag.losses.part"; then
      mv "$out/netbench_$tag.losses.part" "$out/netbench_$tag.losses"
    else
      rm -f "$out/netbench_$tag.losses.part"; echo "   (no loss counters)" >&2
    fi
    "$cluster" down --name $name > /dev/null
  done
done
if [[ $report -eq 1 ]]; then
  "${PYTHON:-/usr/bin/python3}" -m reports network-model "$out" || { rc=$?; [[ $status -eq 0 ]] && status=$rc; }
fi
exit $status
