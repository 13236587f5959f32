#!/usr/bin/env bash
# The sanitizer stage: a Clang build of the library, its unit tests and the fuzz harnesses with
# AddressSanitizer and UndefinedBehaviorSanitizer (any report fails), then the unit tests at 1
# and 2 ranks and each fuzz harness for A2SGD_FUZZ_SECONDS (30 here, CI's budget; the CMake default
# for a build of its own is 60, and scripts/dev/fuzz.sh runs them as long as asked) from its seed corpus.
#
#   scripts/dev/sanitize.sh [build dir]      (default: build-sanitize)
#
# Suppressions: tests/sanitizers/lsan.supp (what Open MPI, PMIx and HDF5 allocate for the life of
# the process); Open MPI and PMIx keep their plug-ins loaded so that those stacks can be matched.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${root}/build-sanitize}"
jobs="${A2SGD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
cxx="$(command -v clang++ || command -v clang++-14 || true)"
cc="$(command -v clang || command -v clang-14 || true)"
if [[ -z "${cxx}" ]]; then
  echo "sanitize.sh: no clang++ (apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi

cmake -S "${root}" -B "${build}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="${cxx}" \
  -DCMAKE_C_COMPILER="${cc}" -DA2SGD_ENABLE_APPS=OFF -DA2SGD_ENABLE_FUZZING=ON \
  -DA2SGD_FUZZ_SECONDS="${A2SGD_FUZZ_SECONDS:-30}"
cmake --build "${build}" --parallel "${jobs}"

export ASAN_OPTIONS="fast_unwind_on_malloc=0:detect_stack_use_after_return=1:strict_string_checks=1"
export LSAN_OPTIONS="suppressions=${root}/tests/sanitizers/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
# Open MPI refuses to run as root unless told twice.
[[ ${EUID} -eq 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "${build}"
# One ctest run for both, so that the harnesses (one core each) fill the cores the unit tests leave.
ctest --output-on-failure --parallel "${jobs}" -R '^(test_.*_np[12]|fuzz_.*)$'
# What the fuzzers did, for the log.
grep -h -E "^(stat::number_of_executed_units|Done [0-9]+ runs)" Testing/Temporary/LastTest.log || true
