#pragma once
/// @file BuildInfo.hpp
/// Versions of a2sgd and of the libraries it was built with (for --version and bug reports).

#include <string>

namespace a2sgd {

/// The a2sgd version, e.g. "0.1.0".
std::string version();

/// Multi-line report: a2sgd, Kokkos (version, execution space), MPI library, HDF5.
std::string build_info();

}  // namespace a2sgd
