#!/usr/bin/env bash
# Probes a2sgd-train as a hostile user would and prints a table of what happened: malformed
# command lines, config files and data files; damaged checkpoints; ranks killed at random times
# and resumed; a stopped rank; a full disk (a small tmpfs, where mounting is allowed).
#
#   scripts/dev/probe_reliability.sh [--build DIR] [--work DIR] [--mutants N] [--kills N] [--seed S]
#
# Every probe has an expected outcome: bad input exits 2 on every rank with a message, a damaged
# checkpoint is refused (exit 2) or, where the damage touches nothing that is loaded, resumes into
# exactly the state the undamaged file gives; a killed run resumes to the uninterrupted run's
# final checkpoint bit for bit; a stopped rank ends the job with 76; a full disk with 74. Counted
# per category: tried, as expected, crashed (a signal, or an exit code >= 128 from the launcher),
# hung (past the time limit), other (any other outcome: listed after the table). Exit status 0
# when every probe behaved as expected.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${root}/build"
work="${TMPDIR:-/tmp}/a2sgd-probe"
mutants=100
kills=10
seed=1
while (($#)); do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --mutants) mutants="$2"; shift 2 ;;
    --kills) kills="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--work DIR] [--mutants N] [--kills N] [--seed S]" >&2; exit 2 ;;
  esac
done
train="${build}/apps/train/a2sgd-train"
ckpt="${build}/apps/checkpoint/a2sgd-checkpoint"
[[ -x "${train}" && -x "${ckpt}" ]] || { echo "no a2sgd-train / a2sgd-checkpoint in ${build}" >&2; exit 2; }
mpirun=(mpirun)
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  mpirun+=(--oversubscribe)
  [[ ${EUID} -eq 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
RANDOM=${seed}
rm -rf "${work}" && mkdir -p "${work}"
syn=(--dataset synthetic --synthetic-train 2000 --synthetic-test 200 --synthetic-features 32 --batch-size 32
  --no-progress-bar --quiet)

declare -A tried expected crashed hung other
categories=()
others=""
record() {  # category outcome(expected|crashed|hung|other) description
  local c="$1"
  if [[ -z "${tried[$c]+x}" ]]; then
    categories+=("$c")
    tried[$c]=0 expected[$c]=0 crashed[$c]=0 hung[$c]=0 other[$c]=0
  fi
  tried[$c]=$((tried[$c] + 1))
  case "$2" in
    expected) expected[$c]=$((expected[$c] + 1)) ;;
    crashed) crashed[$c]=$((crashed[$c] + 1)); others+="  ${c}: crashed: $3"$'\n' ;;
    hung) hung[$c]=$((hung[$c] + 1)); others+="  ${c}: hung: $3"$'\n' ;;
    *) other[$c]=$((other[$c] + 1)); others+="  ${c}: $3"$'\n' ;;
  esac
}

# Runs a2sgd-train on 2 ranks (limit 120 s); sets rc and err.
run2() {
  timeout -s KILL 120 "${mpirun[@]}" -n 2 "${train}" "$@" > "${work}/out.txt" 2> "${work}/err.txt"
  rc=$?
  err="$(cat "${work}/err.txt")"
}

# Classifies a run that must be refused with exit 2 and a message.
expect_refused() {  # category description args...
  local c="$1" d="$2"
  shift 2
  run2 "$@"
  if ((rc == 137)); then
    record "$c" hung "$d"
  elif ((rc == 2)) && grep -q "error" <<< "${err}"; then
    record "$c" expected "$d"
  elif ((rc >= 128)) || grep -qE "Segmentation fault|Aborted|terminate called|AddressSanitizer|runtime error" <<< "${err}"; then
    record "$c" crashed "$d (exit ${rc})"
  else
    record "$c" other "$d: exit ${rc}"
  fi
}

# ---- malformed command lines (--epochs 0 without --steps, which would override it) ----
big=4611686018427387904
for args in "--steps -1" "--steps abc" "--steps ${big}9" "--lr nan" "--lr -1" "--lr inf" "--batch-size 0" \
  "--batch-size -5" "--batch-size ${big}" "--eval-batch ${big}" "--eval-batch 0" "--epochs 0" "--hidden 0" \
  "--hidden 256,-3" "--hidden abc" "--hidden ${big}" "--optimizer rmsprop" "--compressor zip" \
  "--topk-ratio 0" "--topk-ratio 2" "--compressor randomk --randomk-ratio 1e-300" "--qsgd-levels 0" "--qsgd-levels 99999999999" \
  "--powersgd-rank 0" "--powersgd-rank 100000" "--momentum 2" "--beta1 1" "--beta2 -1" "--adam-eps 0" \
  "--weight-decay -1" "--clip -1" "--lr-schedule bogus" "--lr-schedule step --lr-gamma 0" "--a2sgd-averaging odd" \
  "--a2sgd-residual none" "--a2sgd-granularity atom" "--a2sgd-moments x" "--a2sgd-warmup-steps -1" \
  "--synthetic-classes 1" "--synthetic-classes 4294967301" "--synthetic-features 0" "--synthetic-train 0" \
  "--synthetic-train ${big}" "--dataset imagenet" "--model cnn" "--model lstm --dataset synthetic" \
  "--layers 3" "--seed -1" "--checkpoint-every -1" "--keep-checkpoints -1" "--resume" "--resume auto" \
  "--eval-only" "--resume-override everything --resume x" "--divergence-threshold -1" \
  "--collective-timeout -1" "--collective-timeout nan" "--log-every 0" "stray" \
  "--metrics /nonexistent/m.jsonl" "--checkpoint-dir /proc/a2sgd" "--output-dir /proc/a2sgd" \
  "--kokkos-threads=abc" "--kokkos-num-devices=-5" "--config" "--no-such-option"; do
  steps=(--steps 5)
  [[ "${args}" == --epochs* ]] && steps=()
  # shellcheck disable=SC2086
  expect_refused "options" "${args}" "${syn[@]}" "${steps[@]}" ${args}
done

# ---- config files ----
cfg="${work}/cfg"
mkdir -p "${cfg}/dir"
printf 'steps = 3\0\n' > "${cfg}/nul.ini"
printf 'steps = abc\n' > "${cfg}/abc.ini"
printf 'no-such-key = 1\n' > "${cfg}/unknown.ini"
printf 'config = %s/self.ini\n' "${cfg}" > "${cfg}/self.ini"
head -c 4096 /dev/urandom > "${cfg}/random.ini"
printf 'lr = 0.1\nlr = 0.2\n' > "${cfg}/twice.ini"
printf '[section\nsteps=3\n' > "${cfg}/syntax.ini"
for f in dir nul.ini abc.ini unknown.ini self.ini random.ini twice.ini syntax.ini missing.ini; do
  expect_refused "config files" "${f}" "${syn[@]}" --steps 5 --config "${cfg}/${f}"
done
expect_refused "config files" "abc.ini with --steps on the command line" "${syn[@]}" --steps 5 --config "${cfg}/abc.ini"

# ---- data files (IDX and Penn Treebank) ----
data="${work}/data"
idx() {  # dir name magic-and-dims-hex payload-bytes
  mkdir -p "$1"
  { printf "$3"; head -c "$4" /dev/zero; } > "$1/$2"
}
mk_fmnist() {  # a valid 2-image set in $1
  idx "$1" train-images-idx3-ubyte '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x1c\x00\x00\x00\x1c' 1568
  idx "$1" train-labels-idx1-ubyte '\x00\x00\x08\x01\x00\x00\x00\x02' 2
  idx "$1" t10k-images-idx3-ubyte '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x1c\x00\x00\x00\x1c' 1568
  idx "$1" t10k-labels-idx1-ubyte '\x00\x00\x08\x01\x00\x00\x00\x02' 2
}
n=0
for case in text truncated huge overlong badlabel counts gzgarbage gzcut empty dims5 float; do
  d="${data}/${case}"
  mk_fmnist "${d}"
  f="${d}/train-images-idx3-ubyte"
  case "${case}" in
    text) echo "not an idx file" > "${f}" ;;
    truncated) head -c 100 "${d}/t10k-images-idx3-ubyte" > "${f}" ;;
    huge) idx "${d}" train-images-idx3-ubyte '\x00\x00\x08\x03\x00\x00\xea\x60\x00\x00\x03\xe8\x00\x00\x03\xe8' 100 ;;
    overlong) head -c 10 /dev/zero >> "${f}" ;;
    badlabel) printf '\x00\x00\x08\x01\x00\x00\x00\x02\x07\x63' > "${d}/train-labels-idx1-ubyte" ;;
    counts) idx "${d}" train-labels-idx1-ubyte '\x00\x00\x08\x01\x00\x00\x00\x03' 3 ;;
    gzgarbage) gzip -c "${f}" > "${f}.gz" && rm "${f}" && echo "garbage" >> "${f}.gz" ;;
    gzcut) gzip -c "${f}" | head -c 60 > "${f}.gz" && rm "${f}" ;;
    empty) : > "${f}" ;;
    dims5) printf '\x00\x00\x08\x05' > "${f}" ;;
    float) idx "${d}" train-images-idx3-ubyte '\x00\x00\x0d\x03\x00\x00\x00\x02\x00\x00\x00\x1c\x00\x00\x00\x1c' 6272 ;;
  esac
  expect_refused "data files" "IDX ${case}" --data-dir "${d}" --steps 1 --batch-size 1 --no-progress-bar --quiet
  n=$((n + 1))
done
expect_refused "data files" "no data directory" --data-dir /nonexistent --steps 1 --no-progress-bar --quiet
for case in missing empty binary unknown-word directory; do
  d="${data}/ptb-${case}"
  mkdir -p "${d}"
  printf 'the cat sat\na dog ran\n' > "${d}/ptb.train.txt"
  printf 'the dog sat\n' > "${d}/ptb.valid.txt"
  printf 'a cat ran\n' > "${d}/ptb.test.txt"
  case "${case}" in
    missing) rm "${d}/ptb.valid.txt" ;;
    empty) : > "${d}/ptb.train.txt" ;;
    binary) head -c 2000 /dev/urandom > "${d}/ptb.test.txt" ;;
    unknown-word) printf 'the zebra sat\n' > "${d}/ptb.valid.txt" ;;
    directory) rm "${d}/ptb.test.txt" && mkdir "${d}/ptb.test.txt" ;;
  esac
  expect_refused "data files" "PTB ${case}" --model lstm --data-dir "${d}" --steps 1 --batch-size 1 --bptt 2 \
    --hidden 8 --no-progress-bar --quiet
done

# ---- damaged checkpoints ----
ck="${work}/ckpt"
run2 "${syn[@]}" --steps 40 --checkpoint-every 20 --eval-every 0 --checkpoint-dir "${ck}/ref"
good="${ck}/ref/ckpt-000000020.h5"
[[ -f "${good}" ]] || { echo "could not write the reference checkpoint: ${err}" >&2; exit 1; }
# The state an undamaged resume reaches at step 40.
run2 "${syn[@]}" --steps 40 --eval-every 0 --checkpoint-dir "${ck}/clean" --resume "${good}"
size=$(stat -c %s "${good}")
for i in $(seq 1 "${mutants}"); do
  at=$(( (RANDOM * 32768 + RANDOM) % size ))
  bits=$(( RANDOM % 255 + 1 ))
  m="${ck}/m${i}"
  mkdir -p "${m}"
  cp "${good}" "${m}/in.h5"
  byte=$(od -An -tu1 -j "${at}" -N1 "${good}" | tr -d ' ')
  printf "$(printf '\\%03o' $(( byte ^ bits )))" | dd of="${m}/in.h5" bs=1 seek="${at}" conv=notrunc 2> /dev/null
  run2 "${syn[@]}" --steps 40 --eval-every 0 --checkpoint-dir "${m}" --resume "${m}/in.h5"
  d="byte ${at} xor ${bits}"
  if ((rc == 137)); then
    record "checkpoint mutants" hung "${d}"
  elif ((rc == 2)) && grep -q "error" <<< "${err}"; then
    record "checkpoint mutants" expected "${d}"
  elif ((rc == 0)) && "${ckpt}" diff "${ck}/clean/ckpt-000000040.h5" "${m}/ckpt-000000040.h5" > /dev/null 2>&1; then
    record "checkpoint mutants" expected "${d}"  # the damage touched nothing that is loaded
  elif ((rc >= 128)) || grep -qE "Segmentation fault|Aborted|terminate called" <<< "${err}"; then
    record "checkpoint mutants" crashed "${d} (exit ${rc})"
  else
    record "checkpoint mutants" other "${d}: exit ${rc}, resumed into a different state"
  fi
  rm -rf "${m}"
done

# ---- ranks killed at random times, then resumed ----
kr="${work}/kill"
run2 "${syn[@]}" --steps 200 --checkpoint-every 25 --eval-every 0 --checkpoint-dir "${kr}/ref"
for i in $(seq 1 "${kills}"); do
  dir="${kr}/k${i}"
  delay="$((RANDOM % 30 + 5))"
  (
    sleep "$(awk -v d="${delay}" 'BEGIN { print d / 10 }')"
    pid=$(pgrep -f "${train}.*${dir}" | shuf -n 1 --random-source=<(yes "${i}"))
    [[ -n "${pid}" ]] && kill -KILL "${pid}"
  ) &
  run2 "${syn[@]}" --steps 200 --checkpoint-every 25 --eval-every 0 --checkpoint-dir "${dir}"
  wait
  first=${rc}
  run2 "${syn[@]}" --steps 200 --checkpoint-every 25 --eval-every 0 --checkpoint-dir "${dir}" --resume auto
  d="SIGKILL after ${delay}00 ms (first run exit ${first})"
  if ((rc == 137)); then
    record "kill and resume" hung "${d}"
  elif ((rc == 0)) && "${ckpt}" diff "${kr}/ref/ckpt-000000200.h5" "${dir}/ckpt-000000200.h5" > /dev/null 2>&1; then
    record "kill and resume" expected "${d}"
  else
    record "kill and resume" other "${d}: resume exit ${rc}, or a final state that differs"
  fi
done

# ---- a stopped rank ----
if bash "${root}/tests/check_watchdog.sh" "${work}/watchdog" "${train}" "${mpirun[0]}" "${mpirun[@]:1}" \
  > "${work}/watchdog.txt" 2>&1; then
  record "stalled rank" expected "SIGSTOP"
else
  record "stalled rank" other "SIGSTOP: $(tail -n 3 "${work}/watchdog.txt")"
fi

# ---- a full disk ----
disk="${work}/disk"
mkdir -p "${disk}"
if mount -t tmpfs -o size=3m tmpfs "${disk}" 2> /dev/null; then
  for no_reserve in 0 1; do
    # 64 features: 1.7 MB per checkpoint (2.7 MB claimed while written), the second does not fit.
    A2SGD_FAULT_NO_RESERVE=${no_reserve} run2 --dataset synthetic --synthetic-train 2000 --synthetic-test 200 \
      --synthetic-features 64 --batch-size 32 --no-progress-bar --quiet --steps 40 --checkpoint-every 10 \
      --checkpoint-dir "${disk}" --resume auto
    if ((rc == 74)) && grep -q "No space left on device" <<< "${err}" && ! ls "${disk}"/.*.tmp > /dev/null 2>&1; then
      record "disk full" expected "space claim ${no_reserve}"
    elif ((rc == 137)); then
      record "disk full" hung "space claim off=${no_reserve}"
    else
      record "disk full" other "space claim off=${no_reserve}: exit ${rc}"
    fi
  done
  umount "${disk}"
fi

printf '| probe | tried | as expected | crashed | hung | other |\n|---|---:|---:|---:|---:|---:|\n'
failed=0
for c in "${categories[@]}"; do
  printf '| %s | %d | %d | %d | %d | %d |\n' "$c" "${tried[$c]}" "${expected[$c]}" "${crashed[$c]}" "${hung[$c]}" \
    "${other[$c]}"
  ((expected[$c] == tried[$c])) || failed=1
done
[[ -n "${others}" ]] && printf '\nNot as expected:\n%s' "${others}"
exit "${failed}"
