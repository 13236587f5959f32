#!/usr/bin/env bash
# Long fuzzing runs: each harness of a fuzzing build (scripts/dev/sanitize.sh makes one) for SECONDS,
# from its seed corpus plus what earlier runs found; prints executions and findings per harness.
#
#   scripts/dev/fuzz.sh [build dir] [seconds] [harness...]   (default: build-sanitize, 600, all four)
#
# A2SGD_FUZZ_RUNS=N stops each harness after N executions (or at SECONDS, whichever comes first).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${root}/build-sanitize}"
seconds="${2:-600}"
shift $(($# > 2 ? 2 : $#))
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(idx ptb config checkpoint)
# As the CTest label "fuzz" runs them (tests/fuzz/CMakeLists.txt): fast stack traces; the
# checkpoint harness checks leaks at exit rather than after each input.
export ASAN_OPTIONS="fast_unwind_on_malloc=1:detect_stack_use_after_return=1:strict_string_checks=1"
export LSAN_OPTIONS="suppressions=${root}/tests/sanitizers/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
status=0
printf '| harness | seconds | executions | crashes |\n|---|---:|---:|---:|\n'
for h in "${harnesses[@]}"; do
  exe="${build}/tests/fuzz/fuzz_${h}"
  [[ -x "${exe}" ]] || { echo "no ${exe} (configure with -DA2SGD_ENABLE_FUZZING=ON)" >&2; exit 2; }
  found="${build}/tests/fuzz/found_${h}"
  mkdir -p "${found}"
  log="${build}/tests/fuzz/fuzz_${h}.log"
  extra=()
  [[ ${h} == checkpoint ]] && extra=(-detect_leaks=0)
  "${exe}" -max_total_time="${seconds}" -rss_limit_mb=2048 -timeout=20 -runs="${A2SGD_FUZZ_RUNS:--1}" -print_final_stats=1 "${extra[@]}" \
    -artifact_prefix="${build}/tests/fuzz/crash_${h}_" "${found}" "${root}/tests/fuzz/corpus/${h}" > "${log}" 2>&1
  rc=$?
  runs=$(grep -E "^stat::number_of_executed_units" "${log}" | awk '{print $2}')
  crashes=$((rc == 0 ? 0 : 1))
  ((crashes)) && status=1
  printf '| %s | %s | %s | %s |\n' "${h}" "${seconds}" "${runs:-?}" "${crashes}"
  ((crashes)) && grep -m 5 -E "ERROR|runtime error|SUMMARY" "${log}" >&2
done
exit "${status}"
