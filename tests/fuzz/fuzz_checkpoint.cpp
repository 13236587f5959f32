// libFuzzer harness: the checkpoint loader's checks (a2sgd-checkpoint verify: metadata, every
// dataset's type, checksums and values) on arbitrary files. Every input must be judged sound or
// damaged; HDF5 is not instrumented, so findings inside it show as crashes with HDF5 frames.
#include "FuzzFile.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/io/Checkpoint.hpp>

#include <hdf5.h>
#include <mpi.h>
#include <sanitizer/lsan_interface.h>
#include <Kokkos_Core.hpp>

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  {
    // MPI and Kokkos stay initialised until the process ends (libFuzzer never returns to finalize
    // them), so what they allocate here is not a leak. Ignoring it here rather than through the
    // suppression file lets the fuzzer use fast (frame-pointer) stack traces on every allocation:
    // the suppressions need full unwinding through the uninstrumented MPI libraries.
    __lsan::ScopedDisabler not_leaks;
    MPI_Init(argc, argv);
    Kokkos::initialize();
  }
  // Every file open allocates and zeroes HDF5's metadata cache structure (H5C_create, from a
  // fixed-size "regular" free list), a block too large for that list's default limit, so each
  // input would map and fault in fresh pages (half of the harness's time in a profile). The
  // regular lists keep their blocks without limit; the array and block lists are capped at
  // 4 MB / 64 kB and 16 MB / 1 MB (global / per list). HDF5 is not instrumented either way.
  H5set_free_list_limits(-1, -1, 4 << 20, 64 << 10, 16 << 20, 1 << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const a2sgd::fuzz::ScratchPath scratch("ckpt.h5");
  const std::string& path = scratch.path();
  a2sgd::fuzz::write_file(path, data, size);
  std::string summary;
  try {
    a2sgd::io::verify_checkpoint(path, summary);
  } catch (const a2sgd::Error&) {
  }
  return 0;
}
