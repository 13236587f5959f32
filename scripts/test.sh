#!/usr/bin/env bash
# Build a2sgd and run its test suite.
#
#   scripts/test.sh            install missing Debian packages (as root), configure, build, ctest
#
# Environment: A2SGD_BUILD_DIR (default: build), A2SGD_BUILD_TYPE (default: Release),
# A2SGD_CMAKE_ARGS (extra configure arguments), A2SGD_JOBS (default: all cores).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${here}/deps.sh"
a2sgd_install_deps
# The Slurm test (label slurm) needs a Slurm to start; it is skipped without one.
a2sgd_install_optional slurm-wlm munge

root="$(cd "${here}/.." && pwd)"
build="${A2SGD_BUILD_DIR:-${root}/build}"
jobs="${A2SGD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# shellcheck disable=SC2086
cmake -S "${root}" -B "${build}" -DCMAKE_BUILD_TYPE="${A2SGD_BUILD_TYPE:-Release}" ${A2SGD_CMAKE_ARGS:-}
cmake --build "${build}" --parallel "${jobs}"
cd "${build}"
ctest --output-on-failure --parallel "${jobs}"
