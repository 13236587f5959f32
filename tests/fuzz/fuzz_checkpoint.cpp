// libFuzzer harness: the checkpoint loader's checks (a2sgd-checkpoint verify: metadata, every
// dataset's type, checksums and values) on arbitrary files. Every input must be judged sound or
// damaged; HDF5 is not instrumented, so findings inside it show as crashes with HDF5 frames.
#include "FuzzFile.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/io/Checkpoint.hpp>

#include <mpi.h>
#include <Kokkos_Core.hpp>

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  Kokkos::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = a2sgd::fuzz::scratch_path("ckpt.h5");
  a2sgd::fuzz::write_file(path, data, size);
  std::string summary;
  try {
    a2sgd::io::verify_checkpoint(path, summary);
  } catch (const a2sgd::Error&) {
  }
  return 0;
}
