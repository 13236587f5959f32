#!/usr/bin/env bash
# Build a2sgd and run its test suite.
#
#   scripts/dev/test.sh            install missing Debian packages (as root), configure, build, ctest
#
# Environment: A2SGD_BUILD_DIR (default: build), A2SGD_BUILD_TYPE (default: Release),
# A2SGD_CMAKE_ARGS (extra configure arguments), A2SGD_JOBS (default: all cores),
# A2SGD_SANITIZER_STAGE (default 1: then scripts/dev/sanitize.sh runs in <build dir>-sanitize).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${here}/../deps.sh"
a2sgd_install_deps
# The Slurm test (label slurm) needs a Slurm to start; it is skipped without one.
a2sgd_install_optional slurm-wlm munge

root="$(cd "${here}/../.." && pwd)"
build="${A2SGD_BUILD_DIR:-${root}/build}"
jobs="${A2SGD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# The Python package and its tests (label python) when Debian's Python has torch and pybind11.
python_args=()
if /usr/bin/python3 -c "import torch" > /dev/null 2>&1 && [[ -f /usr/lib/cmake/pybind11/pybind11Config.cmake ]]; then
  python_args=(-DA2SGD_PYTHON=ON -DPython3_EXECUTABLE=/usr/bin/python3)
fi
# shellcheck disable=SC2086
cmake -S "${root}" -B "${build}" -DCMAKE_BUILD_TYPE="${A2SGD_BUILD_TYPE:-Release}" "${python_args[@]}" ${A2SGD_CMAKE_ARGS:-}
cmake --build "${build}" --parallel "${jobs}"
cd "${build}"
ctest --output-on-failure --parallel "${jobs}"

# The sanitizer and fuzzing stage (docs/reliability.md), with Clang.
if [[ "${A2SGD_SANITIZER_STAGE:-1}" != 0 ]]; then
  a2sgd_install_optional clang libclang-rt-14-dev
  if command -v clang++ > /dev/null || command -v clang++-14 > /dev/null; then
    bash "${root}/scripts/dev/sanitize.sh" "${build}-sanitize"
  else
    echo "a2sgd: no clang++: the sanitizer and fuzzing stage is skipped" >&2
  fi
fi
