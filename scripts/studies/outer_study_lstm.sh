# Sourced by outer_study.sh for --model lstm: the language model's plan (outer_study.sh --help).
# Uses out, build, ranks, optimizers, phase, python, study() and die() from there.
# shellcheck shell=bash
[[ $phase =~ ^(first|second|rates|seeds|all)$ ]] || die "--phase must be first, second, rates, seeds or all for the lstm"
for p in $ranks; do [[ $p =~ ^(2|4|8|16)$ ]] || die "--ranks: the language model's cells are 2, 4, 8 and 16 ranks (got '$p')"; done
for o in $optimizers; do [[ $o =~ ^(sgd|adam)$ ]] || die "--optimizers: the language model's cells are sgd and adam (got '$o')"; done
convergence=$(cd "$here/../.." && pwd)/docs/results/convergence

# The screened rates (first, second), the tuned dense rate of a cell, the suffix every run of an
# optimizer carries (Adam's 200-step warm-up of the rate, the model's default) and A2SGD's defaults.
lstm_rates() { case "$1" in sgd) echo "30 40" ;; adam) echo "0.003 0.002" ;; esac; }
lstm_dense_rate() { case "$1:$2" in 2:sgd|8:sgd) echo 40 ;; 4:sgd) echo 30 ;; 16:sgd) echo 50 ;; 2:adam|4:adam) echo 0.003 ;; *:adam) echo 0.002 ;; esac; }
lstm_suffix() { [[ $1 == adam ]] && echo "-lrw200"; }
lstm_defaults() { [[ $1 == adam ]] && echo "a2sgd-layer-k200-hold-lr0.003-lrw200" || echo "a2sgd-layer-k200-hold-lr30"; }
lstm_first() { echo "a2sgd-layer-k200-hold-diloco local-k200"; }
lstm_second() { echo "local-k200-diloco local-k100"; }

# Links the convergence study's run NAME of a cell into the study's cell (the metrics and config.ini).
lstm_link() {
  local cell=$1 name=$2 from=$convergence/$1 to=$out/$1
  [[ -f $from/$name.jsonl ]] || die "the convergence study has no $cell/$name.jsonl to link"
  mkdir -p "$to" || die "cannot create $to"
  ln -sfn "$(realpath --relative-to="$to" "$from/$name.jsonl")" "$to/$name.jsonl"
  [[ -d $from/$name ]] && ln -sfn "$(realpath --relative-to="$to" "$from/$name")" "$to/$name"
  return 0
}

# Runs configurations (bases without rate) at rate RATE in a cell, 9 epochs, in resumable pieces.
lstm_run() {
  local p=$1 opt=$2 rate=$3 names="" c
  shift 3
  for c in "$@"; do names+=" $c-lr$rate$(lstm_suffix "$opt")"; done
  study --ranks "$p" --optimizers "$opt" --epochs 9 --checkpoint-every $((800 / p)) --configs "$names"
}

for p in $ranks; do
  for opt in $optimizers; do
    cell=lstm_p${p}_${opt}
    lstm_link "$cell" "dense-lr$(lstm_dense_rate "$p" "$opt")$(lstm_suffix "$opt")"
    lstm_link "$cell" "$(lstm_defaults "$opt")"
  done
done
run_phase() {
  local which=$1 p opt rates
  for p in $ranks; do
    for opt in $optimizers; do
      read -r -a rates <<< "$(lstm_rates "$opt")"
      case "$which" in
        first) lstm_run "$p" "$opt" "${rates[0]}" $(lstm_first) ;;
        second) lstm_run "$p" "$opt" "${rates[0]}" $(lstm_second) ;;
        rates) lstm_run "$p" "$opt" "${rates[1]}" $(lstm_first) $(lstm_second) ;;
        seeds)
          [[ $p == 8 || $p == 16 ]] || continue
          local best c seeded="" dense
          dense="dense-lr$(lstm_dense_rate "$p" "$opt")$(lstm_suffix "$opt")"
          study --ranks "$p" --optimizers "$opt" --epochs 6 --checkpoint-every $((800 / p)) --configs "$dense-s2"
          best=$("$python" -m reports outer --best "$out/lstm_p${p}_${opt}" \
            "$(lstm_defaults "$opt" | sed 's/-lr[0-9.]*//')" $(for c in $(lstm_first) $(lstm_second); do
              echo "$c$(lstm_suffix "$opt")"; done)) || { status=1; continue; }
          for c in $best; do seeded+=" $c-s2"; done
          study --ranks "$p" --optimizers "$opt" --epochs 9 --checkpoint-every $((800 / p)) --configs "$seeded" ;;
      esac
    done
  done
}
if [[ $phase == all ]]; then
  for ph in first second rates seeds; do run_phase "$ph"; done
else
  run_phase "$phase"
fi
