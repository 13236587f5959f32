#!/usr/bin/env bash
# The Spack recipe with a real Spack (docs/hpc.md): where a Spack is given, with this machine's
# Debian packages as externals, `spack repo add` of spack/spack_repo/a2sgd, `spack spec`, a plain
# `spack install a2sgd`, `spack load` and a 2-rank run, `spack test run`, `+openmp` refused against
# the Serial-only Kokkos, and `spack install --test=root a2sgd+tests` (the whole suite inside
# Spack's build environment: as root that needs the recipe's launcher flags; and in Spack's long
# stage directory, the Unix sockets of the Slurm test in a short one).
#
# Usage: check_spack_real.sh SOURCE_DIR WORK_DIR
# Environment:
#   A2SGD_SPACK_ROOT      a Spack checkout (v1.x) whose Python finds clingo; unset: skipped (77)
#   A2SGD_SPACK_PACKAGES  a checkout of spack/spack-packages for the builtin repository (required
#                         with A2SGD_SPACK_ROOT: nothing is fetched)
#   A2SGD_SPACK_PYTHONPATH  prepended to PYTHONPATH (where clingo's module is)
#   A2SGD_SPACK_TESTS=0   skip the +tests install (it builds and runs the whole suite)
#   A2SGD_CUDA_KOKKOS_ROOT  a CUDA Kokkos + Kokkos Kernels prefix: +cuda cuda_arch=90 concretized on it
set -uo pipefail
src=$(cd "$1" && pwd) work=$2
[[ -n ${A2SGD_SPACK_ROOT:-} ]] || { echo "check_spack_real: skipped: A2SGD_SPACK_ROOT names no Spack"; exit 77; }
[[ -x $A2SGD_SPACK_ROOT/bin/spack ]] || { echo "check_spack_real: FAIL: no bin/spack in $A2SGD_SPACK_ROOT" >&2; exit 1; }
[[ -d ${A2SGD_SPACK_PACKAGES:-} ]] || { echo "check_spack_real: FAIL: A2SGD_SPACK_PACKAGES names no spack-packages checkout" >&2; exit 1; }
command -v dpkg-query > /dev/null || { echo "check_spack_real: skipped: the externals come from Debian's packages"; exit 77; }
fail() { echo "check_spack_real: FAIL: $*" >&2; exit 1; }

rm -rf "$work" && mkdir -p "$work"/{user,cache,opt,stage,sources} || fail "cannot create $work"
# The user scope is the test's own folder (what compiler find and repo add write goes there), and
# the system scope an empty one, so that neither ~/.spack nor /etc/spack takes part.
# (SPACK_DISABLE_LOCAL_CONFIG would drop the user scope too: the externals would be ignored and the
# writes would land in the Spack checkout's site scope.)
mkdir -p "$work/system" || fail "cannot create $work/system"
export SPACK_USER_CONFIG_PATH=$work/user SPACK_USER_CACHE_PATH=$work/cache SPACK_SYSTEM_CONFIG_PATH=$work/system
export SPACK_PYTHON=${SPACK_PYTHON:-/usr/bin/python3}
[[ -n ${A2SGD_SPACK_PYTHONPATH:-} ]] && export PYTHONPATH=$A2SGD_SPACK_PYTHONPATH${PYTHONPATH:+:$PYTHONPATH}
spack() { "$A2SGD_SPACK_ROOT/bin/spack" "$@"; }
# "step NAME COMMAND...": runs it with its output in $work/NAME.log and its time in the summary.
summary=()
step() {
  local name=$1 start rc
  shift
  start=$(date +%s)
  "$@" > "$work/$name.log" 2>&1
  rc=$?
  summary+=("$name: exit $rc after $(( $(date +%s) - start )) s")
  echo "${summary[-1]}"
  return $rc
}
version() { dpkg-query -W -f='${Version}' "$1" 2> /dev/null | sed 's/^[0-9]*://; s/[-+~].*//'; }
# Kokkos's version as Spack spells it (X.Y.ZZ) from its configuration header (KOKKOS_VERSION 30401).
kokkos_header_version() {
  awk '/#define KOKKOS_VERSION / {v = $3; printf "%d.%d.%02d", v / 10000, (v / 100) % 100, v % 100}' "$1" 2> /dev/null
}
# Debian's Kokkos comes with Trilinos, whose package version (13.2.0) is not Kokkos's, and Trilinos
# ships the Kokkos Kernels of the same release.
kokkos_version=$(kokkos_header_version /usr/include/trilinos/KokkosCore_config.h)
[[ -n $kokkos_version ]] || fail "no KOKKOS_VERSION in /usr/include/trilinos/KokkosCore_config.h"

cat > "$work/user/config.yaml" << EOF
config:
  install_tree:
    root: $work/opt
  build_stage: [$work/stage]
  source_cache: $work/sources
  build_jobs: $(nproc)
EOF
# Debian's packages as externals that Spack may not build (nothing can be fetched here).
cat > "$work/user/packages.yaml" << EOF
packages:
  all:
    providers:
      mpi: [openmpi]
      blas: [openblas]
      lapack: [openblas]
      zlib-api: [zlib]
  kokkos:
    buildable: false
    externals: [{spec: "kokkos@$kokkos_version +serial+pic+shared~openmp~cuda~rocm", prefix: /usr}]
  kokkos-kernels:
    buildable: false
    externals: [{spec: "kokkos-kernels@$kokkos_version +serial+blas+shared", prefix: /usr}]
  openmpi:
    buildable: false
    externals: [{spec: "openmpi@$(version libopenmpi-dev)", prefix: /usr}]
  hdf5:
    buildable: false
    externals: [{spec: "hdf5@$(version libhdf5-openmpi-dev)+mpi", prefix: /usr}]
  boost:
    buildable: false
    externals: [{spec: "boost@$(version libboost-program-options-dev)+program_options", prefix: /usr}]
  catch2:
    buildable: false
    externals: [{spec: "catch2@$(version catch2)", prefix: /usr}]
  cmake:
    buildable: false
    externals: [{spec: "cmake@$(version cmake)", prefix: /usr}]
  gmake:
    buildable: false
    externals: [{spec: "gmake@$(version make)", prefix: /usr}]
  zlib:
    buildable: false
    externals: [{spec: "zlib@$(version zlib1g-dev)", prefix: /usr}]
  openblas:
    buildable: false
    externals: [{spec: "openblas@$(version libopenblas0-serial)", prefix: /usr}]
EOF
if [[ -n ${A2SGD_CUDA_KOKKOS_ROOT:-} ]]; then
  # Spack spells Kokkos versions X.Y.ZZ (4.6.01); Kokkos's header says 40601, Kokkos Kernels'
  # CMake version file 4.6.2. A static prefix (the GPU kit's) is ~shared~pic, so a2sgd ~shared.
  kv=$(kokkos_header_version "$A2SGD_CUDA_KOKKOS_ROOT"/include/KokkosCore_config.h)
  kkv=$(sed -n 's/^set(PACKAGE_VERSION "\([0-9]*\)\.\([0-9]*\)\.\([0-9]*\)")/\1 \2 \3/p' \
    "$A2SGD_CUDA_KOKKOS_ROOT"/lib*/cmake/KokkosKernels/KokkosKernelsConfigVersion.cmake | head -n 1)
  [[ -n $kv && -n $kkv ]] || fail "A2SGD_CUDA_KOKKOS_ROOT: no Kokkos and Kokkos Kernels versions in $A2SGD_CUDA_KOKKOS_ROOT"
  # shellcheck disable=SC2086
  kkv=$(printf "%d.%d.%02d" $kkv)
  cuda_shared="~shared~pic" a2sgd_shared="~shared"
  ls "$A2SGD_CUDA_KOKKOS_ROOT"/lib*/libkokkoscore.so > /dev/null 2>&1 && cuda_shared="+shared+pic" a2sgd_shared="+shared"
  cat >> "$work/user/packages.yaml" << EOF
  # A CUDA Kokkos for the +cuda concretization only (not built against here).
  cuda:
    buildable: false
    externals: [{spec: "cuda@$(/usr/local/cuda/bin/nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')", prefix: /usr/local/cuda}]
EOF
  python3 - "$work/user/packages.yaml" "$A2SGD_CUDA_KOKKOS_ROOT" "$kv" "$kkv" "$cuda_shared" << 'PY'
import sys
path, prefix, kv, kkv, shared = sys.argv[1:]
kernels_shared = shared.replace("~pic", "").replace("+pic", "")
text = open(path).read()
for name, version, variants in (("kokkos", kv, f"+serial+cuda+cuda_lambda~openmp{shared} cuda_arch=90"),
                                ("kokkos-kernels", kkv, f"+cuda+cublas{kernels_shared} cuda_arch=90")):
    key = f"  {name}:\n    buildable: false\n    externals: ["
    text = text.replace(key, key + f'{{spec: "{name}@{version} {variants}", prefix: {prefix}}}, ', 1)
open(path, "w").write(text)
PY
fi

step compiler_find spack compiler find || fail "spack compiler find: $(tail -n 5 "$work/compiler_find.log")"
step repo_builtin spack repo set --destination "$A2SGD_SPACK_PACKAGES" builtin || fail "spack repo set builtin"
step repo_add spack repo add "$src/spack/spack_repo/a2sgd" || fail "spack repo add refused the repository: $(tail -n 3 "$work/repo_add.log")"
step spec spack spec a2sgd || fail "spack spec a2sgd: $(tail -n 20 "$work/spec.log")"
grep -q "a2sgd@main" "$work/spec.log" || fail "spack spec a2sgd did not take version main"
if step spec_openmp spack spec a2sgd+openmp; then
  fail "a2sgd+openmp concretized against a Serial-only Kokkos"
fi
grep -qi "kokkos" "$work/spec_openmp.log" || fail "a2sgd+openmp was refused without naming kokkos"
if [[ -n ${A2SGD_CUDA_KOKKOS_ROOT:-} ]]; then
  step spec_cuda spack spec a2sgd+cuda cuda_arch=90 "$a2sgd_shared" ||
    fail "a2sgd+cuda cuda_arch=90 $a2sgd_shared did not concretize: $(tail -n 20 "$work/spec_cuda.log")"
  grep -q "kokkos@$kv.*+cuda" "$work/spec_cuda.log" || fail "a2sgd+cuda did not take the CUDA Kokkos external"
fi
step install spack install a2sgd || fail "spack install a2sgd: $(tail -n 30 "$work/install.log")"
step load_run bash -c "eval \"\$('$A2SGD_SPACK_ROOT/bin/spack' load --sh a2sgd)\" && a2sgd-train --version &&
  mpiexec --oversubscribe --allow-run-as-root -n 2 a2sgd-train --dataset synthetic --steps 20 --eval-every 0 --quiet" \
  || fail "spack load a2sgd and a 2-rank run: $(tail -n 10 "$work/load_run.log")"
step test_run spack test run a2sgd || fail "spack test run a2sgd: $(tail -n 10 "$work/test_run.log")"
if [[ ${A2SGD_SPACK_TESTS:-1} != 0 ]]; then
  step install_tests spack install --test=root a2sgd+tests ||
    fail "spack install --test=root a2sgd+tests: $(grep -E 'tests passed|Failed|\*\*\*' "$work/install_tests.log" | tail -n 20)"
  grep -E "tests passed, [0-9]+ tests failed" "$work/install_tests.log" || true
fi
printf '%s\n' "check_spack_real: passed" "${summary[@]}"
