#!/usr/bin/env bash
# Prepares the GPU kit (docs/portability.md, "A GPU run in one go"): builds Kokkos and Kokkos
# Kernels for one device architecture and installs them, with the MPI, parallel HDF5,
# Boost.Program_options and Catch2 that a device machine may lack, into one folder small enough to
# carry to that machine (scripts/gpu/run.sh builds and tests a2sgd there against it).
#
# Usage: scripts/gpu/prepare.sh --kokkos SRC --kernels SRC [options]
#   --kokkos SRC      Kokkos 4.6.01 sources (fetched by hand; never committed)
#   --kernels SRC     Kokkos Kernels 4.6.02 sources
#   --kit DIR         the kit (default .gpu-kit in the repository root, ignored by git); replaced
#   --backend B       cuda (default: sm_90, cuBLAS, nvcc from /usr/local/cuda) or openmp (the
#                     host build that run.sh --host tests on a machine without a GPU)
#   --arch A          Kokkos architecture option for cuda (default HOPPER90)
#   --deps D          debian (default): MPI, HDF5, Boost.Program_options and Catch2 from this
#                     machine's Debian packages, extracted into the kit; none: rely on the target's
#   --limit MIB       refuse a kit larger than this (default 48)
#   --jobs N          parallel build jobs (default: all cores)
# Exit codes: 0 kit ready, 2 bad options or missing tools, 1 a build step failed (its log named).
set -euo pipefail

prog=prepare.sh
die() { echo "$prog: error: $*" >&2; exit 2; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
kokkos_src= kernels_src= kit="$root/.gpu-kit" backend=cuda arch=HOPPER90 deps=debian limit=48
jobs=$(nproc 2> /dev/null || echo 2)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --kokkos) kokkos_src=${2:?}; shift 2 ;;
    --kernels) kernels_src=${2:?}; shift 2 ;;
    --kit) kit=${2:?}; shift 2 ;;
    --backend) backend=${2:?}; shift 2 ;;
    --arch) arch=${2:?}; shift 2 ;;
    --deps) deps=${2:?}; shift 2 ;;
    --limit) limit=${2:?}; shift 2 ;;
    --jobs) jobs=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ -f $kokkos_src/core/src/Kokkos_Core.hpp ]] || die "--kokkos '$kokkos_src' holds no Kokkos sources"
[[ -f $kernels_src/blas/src/KokkosBlas3_gemm.hpp ]] || die "--kernels '$kernels_src' holds no Kokkos Kernels sources"
grep -q 'Kokkos_VERSION_MAJOR 4' "$kokkos_src/CMakeLists.txt" || die "--kokkos: Kokkos 4.x expected"
[[ $backend == cuda || $backend == openmp ]] || die "--backend must be cuda or openmp (got '$backend')"
[[ $deps == debian || $deps == none ]] || die "--deps must be debian or none (got '$deps')"
[[ $limit =~ ^[1-9][0-9]*$ && $jobs =~ ^[1-9][0-9]*$ ]] || die "--limit and --jobs take positive integers"
command -v cmake > /dev/null || die "cmake not found"
if [[ $backend == cuda ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
  command -v nvcc > /dev/null || die "nvcc not found (expected in /usr/local/cuda/bin)"
fi
case "$kit" in /*) ;; *) kit="$PWD/$kit" ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/a2sgd-gpu-kit.XXXXXX")
trap 'rm -rf "$work"' EXIT
rm -rf "$kit"
mkdir -p "$kit"
prefix="$kit/kokkos"
start=$(date +%s)

step() {  # step NAME command...: runs one build step, its output in the kit's log folder
  local name=$1
  shift
  mkdir -p "$kit/logs"
  echo "== $name" >&2
  "$@" > "$kit/logs/$name.log" 2>&1 || { echo "$prog: $name failed; see $kit/logs/$name.log" >&2; tail -n 20 "$kit/logs/$name.log" >&2; exit 1; }
}

# Kokkos 4.6.01 predates CUDA 13, which changed three runtime signatures: cudaGraphAddDependencies
# takes edge data, cudaMemAdvise and cudaMemPrefetchAsync take a cudaMemLocation (and the prefetch
# flags). The edit is made on a copy; a Kokkos whose text differs is refused rather than guessed at.
cp -r "$kokkos_src" "$work/kokkos"
if [[ $backend == cuda ]] && [[ $(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p') -ge 13 ]]; then
  python3 - "$work/kokkos/core/src/Cuda/Kokkos_Cuda_Instance.hpp" << 'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
edits = [
    ("return cudaGraphAddDependencies(graph, from, to, numDependencies);",
     "return cudaGraphAddDependencies(graph, from, to, nullptr, numDependencies);"),
    ("return cudaMemAdvise(devPtr, count, advice, device);",
     "cudaMemLocation loc;\n    loc.type = cudaMemLocationTypeDevice;\n    loc.id = device;\n"
     "    return cudaMemAdvise(devPtr, count, advice, loc);"),
    ("return cudaMemPrefetchAsync(devPtr, count, dstDevice,\n                                get_input_stream(stream));",
     "cudaMemLocation loc;\n    loc.type = cudaMemLocationTypeDevice;\n    loc.id = dstDevice;\n"
     "    return cudaMemPrefetchAsync(devPtr, count, loc, 0, get_input_stream(stream));"),
]
for old, new in edits:
    if text.count(old) != 1:
        sys.exit("prepare.sh: Kokkos_Cuda_Instance.hpp does not hold the expected line: " + old.split("(")[0])
    text = text.replace(old, new)
open(path, "w").write(text)
EOF
fi

if [[ $backend == cuda ]]; then
  sed -i "s/^default_arch=.*/default_arch=\"sm_90\"/" "$work/kokkos/bin/nvcc_wrapper"
  cxx="$work/kokkos/bin/nvcc_wrapper"
  backend_flags=(-DKokkos_ENABLE_CUDA=ON "-DKokkos_ARCH_$arch=ON")
  kk_tpl=(-DKokkosKernels_ENABLE_TPL_CUBLAS=ON -DKokkosKernels_ENABLE_TPL_BLAS=OFF)
else
  cxx=$(command -v g++)
  backend_flags=(-DKokkos_ENABLE_OPENMP=ON)
  kk_tpl=(-DKokkosKernels_ENABLE_TPL_BLAS=ON)
fi

# Static libraries (nothing to find at run time), Release, no tests or examples. Kokkos Kernels
# with no explicit instantiation: a2sgd's only dense kernel is a float GEMM, which the cuBLAS (or
# BLAS) specialisation serves from the headers; this keeps the installed library small.
step kokkos-configure cmake -S "$work/kokkos" -B "$work/build-kokkos" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_SERIAL=ON "${backend_flags[@]}" \
  -DBUILD_SHARED_LIBS=OFF -DCMAKE_INSTALL_PREFIX="$prefix"
step kokkos-build cmake --build "$work/build-kokkos" --parallel "$jobs"
step kokkos-install cmake --install "$work/build-kokkos" --strip
[[ $backend == cuda ]] && cxx="$prefix/bin/nvcc_wrapper"
step kernels-configure cmake -S "$kernels_src" -B "$work/build-kk" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DKokkos_ROOT="$prefix" "${kk_tpl[@]}" -DKokkosKernels_ENABLE_COMPONENTS=BLAS \
  -DKokkosKernels_INST_DOUBLE=OFF -DKokkosKernels_INST_FLOAT=OFF -DKokkosKernels_INST_ORDINAL_INT=OFF \
  -DKokkosKernels_INST_OFFSET_INT=OFF -DKokkosKernels_INST_OFFSET_SIZE_T=OFF -DKokkosKernels_INST_LAYOUTLEFT=OFF \
  -DBUILD_SHARED_LIBS=OFF -DCMAKE_INSTALL_PREFIX="$prefix"
step kernels-build cmake --build "$work/build-kk" --parallel "$jobs"
step kernels-install cmake --install "$work/build-kk" --strip

# The libraries a2sgd needs besides Kokkos, as this Debian machine has them: the device machine's
# image is not guaranteed to have an MPI, a parallel HDF5 or Boost. Only what building and running
# needs is kept (headers, shared libraries, Open MPI's components, launchers and help texts);
# documentation, manual pages and static libraries are dropped.
if [[ $deps == debian ]]; then
  bash "$root/scripts/gpu/deps-kit.sh" "$kit/deps" "$work/debs" > "$kit/logs/deps.log" 2>&1 ||
    { echo "$prog: collecting the Debian dependencies failed; see $kit/logs/deps.log" >&2; tail -n 20 "$kit/logs/deps.log" >&2; exit 1; }
fi

# What it holds, for the record and for run.sh.
{
  echo "backend=$backend"
  echo "arch=$([[ $backend == cuda ]] && echo "$arch" || echo host)"
  echo "kokkos=$(sed -n 's/.*Kokkos_VERSION_MAJOR \([0-9]*\).*/\1/p' "$kokkos_src/CMakeLists.txt" | head -n 1).$(sed -n 's/.*Kokkos_VERSION_MINOR \([0-9]*\).*/\1/p' "$kokkos_src/CMakeLists.txt" | head -n 1).$(sed -n 's/.*Kokkos_VERSION_PATCH \([0-9]*\).*/\1/p' "$kokkos_src/CMakeLists.txt" | head -n 1)"
  echo "deps=$deps"
  [[ $backend == cuda ]] && echo "nvcc=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "made=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "build_s=$(( $(date +%s) - start ))"
} > "$kit/kit.txt"
rm -rf "$kit/logs"/*-build.log  # long and of no use once the build passed; the configure logs stay

# One xz archive of the installs (run.sh unpacks it under /tmp): static libraries and headers
# compress about 4:1, which is what brings a CUDA Kokkos and a whole MPI stack under the limit.
raw_kib=$(du -sk "$kit" | cut -f1)
kokkos_kib=$(du -sk "$prefix" | cut -f1)
deps_kib=$( (du -sk "$kit/deps" 2> /dev/null || echo 0) | cut -f1)
step pack tar -C "$kit" -cJf "$kit/kit.tar.xz" kokkos $([[ -d $kit/deps ]] && echo deps)
rm -rf "$prefix" "$kit/deps"
size_kib=$(du -sk "$kit" | cut -f1)
echo "unpacked_kib=$raw_kib" >> "$kit/kit.txt"
echo "size_kib=$size_kib" >> "$kit/kit.txt"
printf '%s: kit in %s: %d.%d MiB to carry (unpacked %d MiB: kokkos %d MiB, deps %d MiB; limit %d MiB)\n' "$prog" \
  "$kit" $((size_kib / 1024)) $(((size_kib % 1024) * 10 / 1024)) $((raw_kib / 1024)) $((kokkos_kib / 1024)) \
  $((deps_kib / 1024)) "$limit"
if ((size_kib > limit * 1024)); then
  echo "$prog: error: the kit is larger than --limit $limit MiB" >&2
  exit 1
fi
