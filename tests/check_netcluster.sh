#!/usr/bin/env bash
# Two emulated nodes joined by links shaped to a known rate (scripts/studies/cluster/a2sgd-cluster): a2sgd-train
# with dense exchange and with A2SGD across them, on synthetic data. Checks that
#  - the gradient traffic crossed the links: the nodes' veth byte counters grow by the bytes
#    a2sgd-train reports handing to MPI (dense minus A2SGD, to leave out what both runs send
#    besides gradients: the initial broadcast, the evaluations), within a factor [0.9, 2.5]: Open
#    MPI sends between m and 2 m bytes per rank for an all-reduce of m bytes at p = 2 (both
#    directions counted once each), plus TCP/IP headers (about 4%);
#  - dense's communication time per step follows the shaped rate: between 0.8 and 6 times
#    bytes / rate. Below 0.8 the bytes cannot have crossed the shaped link; up to 2x is what Open
#    MPI's p = 2 all-reduce moves (docs/network.md), and a busy CI machine's scheduling has
#    doubled MPI's time over TCP in runs here, whence the upper factor 6 (3 x that);
#  - A2SGD's communication is latency-bound: 16 bytes a step, its time per step at most a tenth of
#    dense's and under 100 ms (a few round trips of a scheduled process; the bandwidth term of 16
#    bytes is under a microsecond);
#  - `run` hands Open MPI its transport: by default btl_tcp_flags without put (docs/network.md, "How
#    Open MPI moves a large message"), Open MPI's own flags with --tcp-protocol put, and refuses
#    any other protocol with exit 2; and the collective algorithms: Open MPI's own choice by
#    default, the ring forced for all-reduce and all-gather with --collectives ring (docs/network.md,
#    "Which collective algorithm"), any other choice refused with exit 2;
#  - `losses` reports, per node, tbf's drops and the TCP stack's retransmissions and timeouts;
#  - scripts/studies/cluster/links_check.sh (docs/network.md, "Connections") refuses bad options with exit 2
#    before it makes a cluster, and one round of one method writes its runs.csv row (exit 0) and
#    its summary;
#  - nothing the cluster made is left afterwards.
# Skipped (exit 77) where network namespaces cannot be made (not root, a container without them).
#
# Usage: check_netcluster.sh SOURCE_DIR WORK_DIR A2SGD_TRAIN
set -uo pipefail
src=$1 work=$2 train=$3
cluster=$src/scripts/studies/cluster/a2sgd-cluster
name=ci$(( $$ % 100000 ))
rate_mbit=200
export A2SGD_CLUSTER_RUNDIR=$work/run
fail() { echo "check_netcluster: FAIL: $*" >&2; exit 1; }

rm -rf "$work" && mkdir -p "$work" || fail "cannot create $work"
"$cluster" up 2 --rate ${rate_mbit}mbit --name "$name" > "$work/up.log" 2>&1
rc=$?
if [[ $rc -eq 2 ]]; then
  echo "check_netcluster: skipped: $(tail -n 1 "$work/up.log")"
  exit 77
fi
[[ $rc -eq 0 ]] || { cat "$work/up.log" >&2; "$cluster" down --name "$name"; fail "up exited $rc"; }
trap '"$cluster" down --name "$name" > /dev/null 2>&1' EXIT

# tx bytes of node 0 and node 1
tx() { "$cluster" counters --name "$name" | awk '{printf "%s ", $2}'; }
train_run() {  # train_run METHOD: one run across the two nodes; prints "tx0 tx1" of the run
  local before after
  before=($(tx))
  timeout 240 "$cluster" run --name "$name" -- -np 2 \
    "$train" --dataset synthetic --synthetic-train 4096 --synthetic-test 512 --steps 40 --eval-every 0 \
    --compressor "$1" --metrics "$work/$1.jsonl" --quiet > "$work/$1.log" 2>&1 ||
    { cat "$work/$1.log" >&2; fail "a2sgd-train --compressor $1 across the cluster failed"; }
  after=($(tx))
  echo "$(( after[0] - before[0] )) $(( after[1] - before[1] ))"
}
dense_tx=($(train_run dense)) || exit 1
a2sgd_tx=($(train_run a2sgd)) || exit 1

summary() {  # summary METHOD FIELD
  python3 -c "import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get('event') == 'summary': print(r[sys.argv[2]])" "$work/$1.jsonl" "$2"
}
dense_bytes=$(summary dense comm_bytes) a2sgd_bytes=$(summary a2sgd comm_bytes)
dense_step=$(summary dense bytes_per_step)
dense_comm=$(summary dense comm_s_per_step) a2sgd_comm=$(summary a2sgd comm_s_per_step)
echo "dense: $dense_bytes bytes to MPI, node tx ${dense_tx[*]}, comm $dense_comm s/step"
echo "a2sgd: $a2sgd_bytes bytes to MPI, node tx ${a2sgd_tx[*]}, comm $a2sgd_comm s/step"

python3 - "$dense_bytes" "$a2sgd_bytes" "${dense_tx[@]}" "${a2sgd_tx[@]}" "$dense_step" "$dense_comm" "$a2sgd_comm" \
  "$rate_mbit" << 'EOF' || fail "see above"
import sys
dense_b, a2sgd_b, d0, d1, a0, a1, step_b, dense_comm, a2sgd_comm, mbit = map(float, sys.argv[1:])
ok = True
def check(cond, text):
    global ok
    print(("ok   " if cond else "FAIL ") + text)
    ok &= cond
gradient = dense_b - a2sgd_b
for node, (d, a) in enumerate(((d0, a0), (d1, a1))):
    ratio = (d - a) / gradient
    check(0.9 <= ratio <= 2.5, f"node {node}: the links carried {d - a:.0f} more bytes with dense than with A2SGD, "
          f"{ratio:.2f} x the gradient bytes a2sgd-train handed to MPI (expected 0.9-2.5)")
ideal = step_b / (mbit * 1e6 / 8)
check(0.8 <= dense_comm / ideal <= 6, f"dense: {1e3 * dense_comm:.1f} ms per step in MPI, {dense_comm / ideal:.2f} x "
      f"bytes / rate = {1e3 * ideal:.1f} ms (expected 0.8-6)")
check(a2sgd_comm <= dense_comm / 10 and a2sgd_comm < 0.1, f"a2sgd: {1e3 * a2sgd_comm:.2f} ms per step in MPI "
      f"(latency-bound: at most a tenth of dense's and under 100 ms)")
sys.exit(0 if ok else 1)
EOF

flags() { timeout 60 "$cluster" run --name "$name" "$@" -- -np 1 sh -c 'echo "flags=${OMPI_MCA_btl_tcp_flags:-}"'; }
send_flags=$(flags) || fail "a2sgd-cluster run of one process failed"
put_flags=$(flags --tcp-protocol put) || fail "a2sgd-cluster run --tcp-protocol put failed"
[[ $send_flags == flags=send,* && $send_flags != *put* ]] ||
  fail "run's default transport: expected btl_tcp_flags without put, got '$send_flags'"
[[ $put_flags == flags= ]] || fail "run --tcp-protocol put: expected Open MPI's own flags, got '$put_flags'"
"$cluster" run --name "$name" --tcp-protocol rdma -- -np 1 true > "$work/bad.log" 2>&1
rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--tcp-protocol" "$work/bad.log" ||
  fail "run --tcp-protocol rdma: expected exit 2 naming the option, got $rc: $(cat "$work/bad.log")"
echo "ok   run's transport: default '$send_flags', put '$put_flags', an unknown protocol refused"

algs() {
  timeout 60 "$cluster" run --name "$name" "$@" -- -np 1 sh -c \
    'echo "${OMPI_MCA_coll_tuned_use_dynamic_rules:-}/${OMPI_MCA_coll_tuned_allreduce_algorithm:-}/${OMPI_MCA_coll_tuned_allgather_algorithm:-}"'
}
own_algs=$(algs) || fail "a2sgd-cluster run of one process failed"
ring_algs=$(algs --collectives ring) || fail "a2sgd-cluster run --collectives ring failed"
[[ $own_algs == // ]] || fail "run's default collectives: expected Open MPI's own choice, got '$own_algs'"
[[ $ring_algs == 1/4/4 ]] || fail "run --collectives ring: expected dynamic rules with ring (4) all-reduce and all-gather, got '$ring_algs'"
"$cluster" run --name "$name" --collectives tree -- -np 1 true > "$work/bad.log" 2>&1
rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--collectives" "$work/bad.log" ||
  fail "run --collectives tree: expected exit 2 naming the option, got $rc: $(cat "$work/bad.log")"
echo "ok   run's collectives: Open MPI's by default, ring forced with --collectives ring, an unknown choice refused"

# `losses`: one line per node, five counts (node, tbf drops up and down, TCP retransmissions and
# timeouts); the links carried traffic, so the TCP counters are there to read, whatever their value.
losses=$("$cluster" losses --name "$name") || fail "a2sgd-cluster losses failed"
[[ $(grep -cE '^[01] [0-9]+ [0-9]+ [0-9]+ [0-9]+$' <<< "$losses") -eq 2 && $(wc -l <<< "$losses") -eq 2 ]] ||
  fail "losses: expected 'node up_dropped down_dropped retrans_segs rto_timeouts' for nodes 0 and 1, got '$losses'"
echo "ok   losses: $(tr '\n' ';' <<< "$losses")"

trap - EXIT
"$cluster" down --name "$name" > /dev/null || fail "down failed"
left=$(ip netns list | grep -c "a2sgd-$name-" || true)
[[ $left -eq 0 ]] || fail "$left namespaces of the cluster are left after down"
[[ ! -e $A2SGD_CLUSTER_RUNDIR/$name ]] || fail "the cluster's run directory is left after down"

# links_check.sh: bad options refused before anything is made; one tiny round on synthetic data.
links=$src/scripts/studies/cluster/links_check.sh
build=$(cd "$(dirname "$train")/../.." && pwd)
for bad in "--links 0" "--rounds x" "--nodes 1" "--timeout 0"; do
  # shellcheck disable=SC2086
  bash "$links" $bad --name "${name}l" --build "$build" --out "$work/links-bad" > "$work/bad.log" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] && grep -q -- "${bad%% *}" "$work/bad.log" ||
    fail "links_check.sh $bad: expected exit 2 naming the option, got $rc: $(cat "$work/bad.log")"
done
[[ $(ip netns list | grep -c "a2sgd-${name}l-" || true) -eq 0 ]] || fail "links_check.sh made a cluster despite a bad option"
bash "$links" --name "${name}l" --build "$build" --out "$work/links" --nodes 2 --rate 1gbit --links 1 \
  --methods fp16 --rounds 1 --steps 5 -- --dataset synthetic --synthetic-train 4096 --synthetic-test 512 \
  > "$work/links.out" 2>&1
rc=$?
[[ $rc -eq 0 ]] || fail "links_check.sh, one round: exit $rc: $(cat "$work/links.out") $(cat "$work/links"/*.log 2> /dev/null)"
rows=$(tail -n +2 "$work/links/runs.csv")
[[ $(head -n 1 "$work/links/runs.csv") == "round,links,method,exit,seconds" && $rows =~ ^1,1,fp16,0,[0-9]+\.[0-9]$ ]] ||
  fail "links_check.sh runs.csv: expected one row '1,1,fp16,0,<seconds>', got '$rows'"
grep -q "^1 connection(s), fp16: 1 of 1 finished, 0 stopped" "$work/links.out" ||
  fail "links_check.sh: no summary line for 1 connection, fp16 in: $(cat "$work/links.out")"
[[ $(ip netns list | grep -c "a2sgd-${name}l-" || true) -eq 0 ]] || fail "links_check.sh left its cluster behind"
echo "ok   links_check.sh: bad options refused (exit 2, no cluster), one round: $rows"
echo "check_netcluster: passed; nothing left behind"
