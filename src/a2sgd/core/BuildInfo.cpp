#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/core/BuildInfo.hpp>
#include <a2sgd/core/Types.hpp>
#include <a2sgd/core/Version.hpp>

#include <hdf5.h>
#include <mpi.h>

#include <sstream>

namespace a2sgd {

std::string version() {
  return A2SGD_VERSION_STRING;
}

std::string build_info() {
  std::ostringstream out;
  out << "a2sgd " << version() << '\n';
  out << "Kokkos " << KOKKOS_VERSION / 10000 << '.' << (KOKKOS_VERSION / 100) % 100 << '.' << KOKKOS_VERSION % 100
      << ", execution space " << ExecutionSpace::name() << '\n';
#ifdef A2SGD_HOST_CLONES_ACTIVE
  out << "host SIMD block functions: AVX-512, AVX2 and baseline clones, picked at load time\n";
#else
  out << "host SIMD block functions: baseline ISA only\n";
#endif
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(mpi_version, &len) == MPI_SUCCESS) {
    std::string text(mpi_version, static_cast<std::size_t>(len));
    out << text.substr(0, text.find_first_of(",\n")) << '\n';
  }
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  out << "HDF5 " << major << '.' << minor << '.' << release << " (parallel)\n";
  return out.str();
}

}  // namespace a2sgd
