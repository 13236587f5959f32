#!/usr/bin/env bash
# The GPU run in one go (docs/portability.md, "A GPU run in one go"): on a machine with a GPU,
# from the repository root, with the kit of scripts/gpu/prepare.sh carried, builds a2sgd against
# the kit and runs its stages, each time-boxed and each writing its log before the next starts, so
# that a failing or slow stage still leaves everything before it in the output folder:
#   build    configure and build with all cores
#   unit     the unit tests at 1 rank and at 2 ranks (sharing the GPU)
#   train    a2sgd-train on the MLP (Fashion-MNIST if installed, else synthetic data): dense and
#            A2SGD at 1 and 2 ranks, and a checkpoint/resume that must match bit for bit
#   bench    a2sgd-bench at 16M and 64M values with every method (ceilings, phases, round trips)
# and then summary.txt: one line per stage (passed, failed or timed out, seconds) and the figures.
#
# Usage: scripts/gpu/run.sh [--kit DIR] [--out DIR] [--host] [--jobs N] [--quick]
#   --kit DIR   the kit (default .gpu-kit)
#   --out DIR   results (default $OUT if set, else gpu-run)
#   --host      the same build and stages against a host kit (prepare.sh --backend openmp), to
#               exercise this script where there is no GPU
#   --jobs N    build jobs (default: all cores)
#   --quick     smaller stages (bench at 1M values only, fewer steps): for trying the script
#   --slow-factor F  multiply every stage's time box by F (default 1; 8 with --host)
# Exit code: 0 when every stage passed, 1 when one failed or timed out, 2 for bad options or kit.
set -uo pipefail

prog=run.sh
die() { echo "$prog: error: $*" >&2; exit 2; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
kit="$root/.gpu-kit" out=${OUT:-$root/gpu-run} host=0 quick=0 slow=
jobs=$(nproc 2> /dev/null || echo 2)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --kit) kit=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --host) host=1; shift ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    --quick) quick=1; shift ;;
    --slow-factor) slow=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ -z $slow ]] && slow=$((host ? 8 : 1))
[[ $slow =~ ^[1-9][0-9]*$ ]] || die "--slow-factor takes a positive integer"
[[ -f $kit/kit.txt ]] || die "no kit at $kit (scripts/gpu/prepare.sh makes it)"
kit=$(cd "$kit" && pwd)
backend=$(sed -n 's/^backend=//p' "$kit/kit.txt")
# The kit carries its installs as one archive (prepare.sh); unpacked once per machine.
if [[ -f $kit/kit.tar.xz ]]; then
  unpacked=${TMPDIR:-/tmp}/a2sgd-gpu-kit-$(sha1sum "$kit/kit.tar.xz" | cut -c1-12)
  if [[ ! -f $unpacked/.done ]]; then
    rm -rf "$unpacked" && mkdir -p "$unpacked" && tar -C "$unpacked" -xJf "$kit/kit.tar.xz" && touch "$unpacked/.done" ||
      die "cannot unpack $kit/kit.tar.xz into $unpacked"
  fi
  kit_tree=$unpacked
else
  kit_tree=$kit
fi
if [[ $host -eq 1 && $backend == cuda ]]; then die "--host needs a host kit (prepare.sh --backend openmp)"; fi
if [[ $host -eq 0 && $backend != cuda ]]; then die "the kit at $kit is a host kit: give --host"; fi
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
build="$root/build-gpu-run"
summary="$out/summary.txt"
start_all=$(date +%s)
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
note "a2sgd GPU run: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)"
note "kit: $(tr '\n' ' ' < "$kit/kit.txt")"
[[ $host -eq 1 ]] || note "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null || echo 'nvidia-smi failed')"

# The kit's MPI and friends come first; the system's compilers stay.
if [[ -f $kit_tree/deps/env.sh ]]; then
  # shellcheck disable=SC1091
  source "$kit_tree/deps/env.sh"
else
  kit_cmake_args=()
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1
[[ $host -eq 1 ]] && export OMP_NUM_THREADS=1 OMP_PROC_BIND=false
[[ $backend == cuda ]] && export PATH=/usr/local/cuda/bin:$PATH

failed=0
# stage NAME LIMIT_S FUNCTION: runs it under a time box, its output in NAME.log. The function runs
# in a process group of its own (job control), so that the time box ends every process it started.
stage() {
  local name=$1 limit=$2 rc t0 pid watcher flag="$out/.$1.timed-out"
  shift 2
  t0=$(date +%s)
  rm -f "$flag"
  echo "== $name (at most $limit s)" >&2
  set -m
  ("$@") > "$out/$name.log" 2>&1 &
  pid=$!
  set +m
  (sleep "$limit" && touch "$flag" && kill -TERM -- "-$pid" 2> /dev/null && sleep 10 && kill -KILL -- "-$pid" 2> /dev/null) &
  watcher=$!
  wait "$pid"
  rc=$?
  kill "$watcher" 2> /dev/null
  wait "$watcher" 2> /dev/null
  local took=$(($(date +%s) - t0))
  if [[ -f $flag ]]; then
    rm -f "$flag"
    note "$name: TIMED OUT after $took s (limit $limit s)"
    failed=1
    rc=124
  elif [[ $rc -eq 0 ]]; then
    note "$name: passed in $took s"
  else
    note "$name: FAILED (exit $rc) after $took s; last lines:"
    tail -n 15 "$out/$name.log" | sed 's/^/    /' | tee -a "$summary" > /dev/null
    failed=1
  fi
  return $rc
}

do_build() {
  local cxx=g++ require=
  if [[ $backend == cuda ]]; then
    cxx="$kit_tree/kokkos/bin/nvcc_wrapper" require=-DA2SGD_REQUIRE_CUDA=ON
  else
    require=-DA2SGD_REQUIRE_OPENMP=ON
  fi
  # Ninja where there is one (the device image has ninja and may lack make).
  local generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_PREFIX_PATH="$kit_tree/kokkos" -DKokkos_ROOT="$kit_tree/kokkos" $require "${kit_cmake_args[@]}" &&
    grep -E '^(MPIEXEC_EXECUTABLE|HDF5_C_INCLUDE_DIR|Boost_DIR|Kokkos_DIR|CMAKE_CXX_COMPILER):' "$build/CMakeCache.txt" &&
    cmake --build "$build" --parallel "$jobs"
}

# Unit tests (the Catch2 executables) at 1 and 2 ranks; the applications' tests are the next stages.
do_unit() {
  cd "$build" && ctest --output-on-failure --parallel "$jobs" -R '^test_.*_np[12]$' -E 'compile_check'
}

# a2sgd-train: dense and A2SGD at 1 and 2 ranks, then a run that stops at a checkpoint and is
# resumed, whose final checkpoint must equal the uninterrupted run's.
do_train() {
  local t="$build/apps/train/a2sgd-train" ck="$build/apps/checkpoint/a2sgd-checkpoint" data=(--dataset synthetic)
  local steps=$((quick ? 40 : 400)) half
  half=$((steps / 2))
  [[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]] && data=(--dataset fashion-mnist)
  local w="$build/train-run"
  rm -rf "$w" && mkdir -p "$w" || return 1
  for p in 1 2; do
    for m in dense a2sgd; do
      echo "-- $m at $p rank(s)"
      mpiexec -np $p "$t" "${data[@]}" --compressor $m --steps $steps --eval-every $half --no-progress-bar \
        --metrics "$w/$m-p$p.jsonl" || return 1
      grep '"event": "summary"' "$w/$m-p$p.jsonl" | head -c 600; echo
    done
  done
  echo "-- checkpoint and bit-exact resume, A2SGD at 2 ranks"
  mpiexec -np 2 "$t" "${data[@]}" --compressor a2sgd --steps $steps --eval-every 0 --no-progress-bar \
    --checkpoint-dir "$w/full" --checkpoint-every $steps || return 1
  mpiexec -np 2 "$t" "${data[@]}" --compressor a2sgd --steps $half --eval-every 0 --no-progress-bar \
    --checkpoint-dir "$w/split" --checkpoint-every $half || return 1
  mpiexec -np 2 "$t" "${data[@]}" --compressor a2sgd --steps $steps --eval-every 0 --no-progress-bar \
    --checkpoint-dir "$w/split" --checkpoint-every $steps --resume auto || return 1
  local name
  name=$(printf "ckpt-%09d.h5" "$steps")
  "$ck" diff "$w/full/$name" "$w/split/$name"
}

do_bench() {
  local sizes=16M,64M
  [[ $quick -eq 1 ]] && sizes=1M
  mpiexec -np 1 "$build/benchmarks/bench/a2sgd-bench" --sizes $sizes --methods all --repeats 5 --no-sort \
    --csv "$out/bench.csv"
}

# Time boxes for 16 cores and one H200 (the whole run stays under 8 minutes); a host run on a
# small machine gets them scaled by --slow-factor (default 1, 8 with --host).
box() { echo $(($1 * slow)); }
stage build "$(box 240)" do_build || { note "build failed: nothing else can run"; exit 1; }
stage unit "$(box 90)" do_unit
stage train "$(box 60)" do_train
stage bench "$(box 60)" do_bench
# Each size's table (phases against their ceilings, device-to-host copies and fences per step).
if [[ -f $out/bench.log ]]; then
  grep -E '^(n = |method |[a-z0-9]+ +[0-9.]+ +[0-9.]+ )' "$out/bench.log" >> "$summary" || true
fi
note "total: $(( $(date +%s) - start_all )) s"
exit $failed
