# Sourced by scripts that time training runs over an emulated cluster (paper_experiment.sh
# --network, compare_methods.sh with A2SGD_COMPARE_NETWORK; docs/network.md):
#
#   a2sgd_net_begin RATE NODES DIR BUILD [TCP_LINKS (default 1)] [COLLECTIVES (default openmpi)]
#       brings up NODES emulated nodes with links of RATE (a2sgd-cluster up), measures the link
#       with a2sgd-netbench (ping-pong and simultaneous exchange: DIR/netbench.csv, .log) and
#       writes the fitted link as a2sgd-train's --model-link value to DIR/link.txt; the cluster
#       goes down when the calling script exits, however it exits. COLLECTIVES: a2sgd-cluster run
#       --collectives (openmpi or ring) for every run on it.
#   a2sgd_net_train NAME ARGS...
#       a2sgd-train ARGS with one rank per node across the cluster, --model-link from the fit,
#       metrics to DIR/NAME.jsonl (log DIR/NAME.log); returns a2sgd-train's exit code.
#   a2sgd_net_end
#       takes the cluster down now.
# Needs root (network namespaces): a2sgd_net_begin returns 2 with a2sgd-cluster's message otherwise.
# shellcheck shell=bash

a2sgd_net_cluster="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/a2sgd-cluster"
a2sgd_net_name=timing

a2sgd_net_begin() {
  local rate=$1 nodes=$2 build=$4
  a2sgd_net_dir=$3 a2sgd_net_build=$build a2sgd_net_nodes=$nodes a2sgd_net_links=${5:-1}
  a2sgd_net_collectives=${6:-openmpi}
  mkdir -p "$a2sgd_net_dir" || return 1
  "$a2sgd_net_cluster" down --name "$a2sgd_net_name" > /dev/null 2>&1  # one left by an interrupted run
  "$a2sgd_net_cluster" up "$nodes" --rate "$rate" --name "$a2sgd_net_name" || return $?
  trap 'a2sgd_net_end' EXIT
  trap 'a2sgd_net_end; exit 130' INT TERM
  # The link as MPI sees it: sizes up to 16 MB, about half a second each.
  "$a2sgd_net_cluster" run --name "$a2sgd_net_name" --tcp-links "$a2sgd_net_links" --collectives "$a2sgd_net_collectives" -- -np 2 \
    "$build/benchmarks/netbench/a2sgd-netbench" --ops pingpong,sendrecv --max-bytes $((16 << 20)) --seconds 0.5 \
    --label "$rate" --csv "$a2sgd_net_dir/netbench.csv" > "$a2sgd_net_dir/netbench.log" 2>&1 || {
    cat "$a2sgd_net_dir/netbench.log" >&2
    return 1
  }
  # GBIT_PER_S:ALPHA_US[:half] from the CSV's fit (every row carries it).
  awk -F, 'NR == 2 { printf "%.6g:%.6g%s\n", $10 * 8 / 1e9, $9 * 1e6, ($11 == 1 ? "" : ":half") }' \
    "$a2sgd_net_dir/netbench.csv" > "$a2sgd_net_dir/link.txt"
  echo "network: $nodes nodes at $rate; fitted link $(cat "$a2sgd_net_dir/link.txt") (GBIT_PER_S:ALPHA_US)" >&2
}

a2sgd_net_train() {
  local name=$1
  shift
  "$a2sgd_net_cluster" run --name "$a2sgd_net_name" --tcp-links "$a2sgd_net_links" --collectives "$a2sgd_net_collectives" -- -np "$a2sgd_net_nodes" \
    "$a2sgd_net_build/apps/train/a2sgd-train" "$@" --model-link "$(cat "$a2sgd_net_dir/link.txt")" \
    --metrics "$a2sgd_net_dir/$name.jsonl" --no-progress-bar > "$a2sgd_net_dir/$name.log" 2>&1
}

a2sgd_net_end() {
  "$a2sgd_net_cluster" down --name "$a2sgd_net_name" > /dev/null 2>&1
  trap - EXIT INT TERM
}
