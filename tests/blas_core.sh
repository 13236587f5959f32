#!/usr/bin/env bash
# Runs a test command with OpenBLAS forced to one of its kernel families (its dynamic-arch core
# types), so that one machine checks the rounding of other CPUs' GEMM kernels:
#
#   blas_core.sh CORETYPE COMMAND [ARG...]
#
# Exits 77 (CTest SKIP_RETURN_CODE) when this CPU cannot execute that family's instructions.
set -euo pipefail
core="$1"
shift
case "${core}" in
  Prescott) needs="pni" ;;  # SSE3
  Nehalem) needs="sse4_2" ;;
  Sandybridge) needs="avx" ;;
  Haswell | Zen) needs="avx2 fma" ;;
  SkylakeX) needs="avx512f avx512dq avx512cd avx512bw avx512vl" ;;
  Cooperlake) needs="avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16" ;;
  *)
    echo "blas_core.sh: unknown OpenBLAS core type '${core}'" >&2
    exit 2
    ;;
esac
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
for flag in ${needs}; do
  if [[ "${flags}" != *" ${flag} "* ]]; then
    echo "skipped: this CPU lacks ${flag}, which OpenBLAS's ${core} kernels need"
    exit 77
  fi
done
export OPENBLAS_CORETYPE="${core}"
exec "$@"
