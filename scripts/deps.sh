# Sourced by the scripts: installs (or lists) the Debian packages a2sgd needs, and sets up
# Open MPI for running as root.
# shellcheck shell=bash

A2SGD_DEBIAN_PACKAGES=(
  cmake g++ make pkg-config
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev
  libopenmpi-dev openmpi-bin libhdf5-openmpi-dev
  libboost-program-options-dev catch2 zlib1g-dev
  dataset-fashion-mnist  # /usr/share/datasets/fashion-mnist
  libopenblas0-serial  # Kokkos Kernels calls libblas.so.3: without OpenBLAS it is the slow reference BLAS
  python3 python3-matplotlib  # reports/plot_bench.py
  python3-dev pybind11-dev python3-torch  # the Python package a2sgd (-DA2SGD_PYTHON=ON, docs/pytorch.md)
  python3-pip python3-venv  # its `pip install` (pyproject.toml), tested in a venv
)

a2sgd_install_deps() {
  if command -v dpkg-query >/dev/null 2>&1; then
    local missing=() pkg
    for pkg in "${A2SGD_DEBIAN_PACKAGES[@]}"; do
      dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q "install ok installed" || missing+=("${pkg}")
    done
    if ((${#missing[@]})); then
      if [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "a2sgd: installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
      else
        echo "a2sgd: missing Debian packages; install them with:" >&2
        echo "  sudo apt-get install ${missing[*]}" >&2
        return 1
      fi
    fi
  else
    echo "a2sgd: not a Debian system; CMake must find Kokkos, Kokkos Kernels, MPI, parallel HDF5," \
      "Boost.Program_options and Catch2 (set CMAKE_PREFIX_PATH, or use the Spack environment)"
  fi
  if [[ ${EUID} -eq 0 ]]; then
    # Open MPI refuses to run as root unless told twice.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
}

# Installs optional Debian packages (e.g. for a test that is skipped without them) when running as
# root with apt-get; otherwise, or when the installation fails, says so and carries on.
a2sgd_install_optional() {
  local missing=() pkg
  command -v dpkg-query >/dev/null 2>&1 || return 0
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q "install ok installed" || missing+=("${pkg}")
  done
  ((${#missing[@]})) || return 0
  if [[ ${EUID} -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "a2sgd: installing ${missing[*]} (optional)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
        echo "a2sgd: could not install ${missing[*]}; the tests that need them are skipped" >&2
    fi
  else
    echo "a2sgd: optional packages not installed (${missing[*]}); the tests that need them are skipped" >&2
  fi
}

# Configures (Release) and builds one target: a2sgd_build ROOT BUILD_DIR TARGET.
a2sgd_build() {
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$2" --parallel "$(nproc 2>/dev/null || echo 2)" --target "$3" >/dev/null
}

# Sets the array A2SGD_MPI_FLAGS: --oversubscribe for Open MPI (more ranks than cores is fine
# for these runs). Open MPI 4 answers --version as "mpiexec (OpenRTE) ...".
a2sgd_mpi_flags() {
  A2SGD_MPI_FLAGS=()
  if mpiexec --version 2>/dev/null | grep -qiE "open ?mpi|openrte"; then A2SGD_MPI_FLAGS+=(--oversubscribe); fi
}
