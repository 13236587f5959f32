#pragma once
// The main() of the MPI tools in apps/ (header-only, so the apps build in-tree and against an
// installed package alike).

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/io/Checkpoint.hpp>

#include <mpi.h>
#include <Kokkos_Core.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace a2sgd::apps {

/// MPI and Kokkos around run(argc, argv, comm). Kokkos sees only its own --kokkos-* arguments (it
/// would answer --help itself); run() sees the rest. run() reports collective errors itself and
/// returns the exit code; an exception that reaches here was raised on one rank alone, so it is
/// reported and the job taken down rather than leave the other ranks waiting in a collective.
template <class Run>
int app_main(int argc, char** argv, const char* name, Run run) {
  MPI_Init(&argc, &argv);
  std::vector<char*> kokkos_args{argv[0]}, our_args{argv[0]};
  for (int i = 1; i < argc; ++i)
    (std::string(argv[i]).rfind("--kokkos", 0) == 0 ? kokkos_args : our_args).push_back(argv[i]);
  int kokkos_argc = static_cast<int>(kokkos_args.size());
  int code = 0;
  try {
    Kokkos::ScopeGuard kokkos(kokkos_argc, kokkos_args.data());
    try {
      Communicator comm;
      code = run(static_cast<int>(our_args.size()), our_args.data(), comm);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: error: %s\n", name, e.what());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } catch (const std::exception& e) {
    // Kokkos rejected its options (--kokkos-threads=abc, ...). Every rank has the same arguments
    // and fails alike, so each reports through rank 0 and returns the bad-input code.
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::string given;
    for (std::size_t i = 1; i < kokkos_args.size(); ++i) given += (i > 1 ? " " : "") + std::string(kokkos_args[i]);
    if (rank == 0)
      std::fprintf(stderr, "%s: error: Kokkos rejected its options (%s): %s (--kokkos-help lists them)\n", name,
                   given.c_str(), e.what());
    code = 2;
  }
  // A checkpoint write that failed inside HDF5 left a file that HDF5's clean-up in MPI_Finalize
  // would wait on forever; the error has been reported, so end the job with its code instead.
  if (!io::can_finalize()) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  MPI_Finalize();
  return code;
}

}  // namespace a2sgd::apps
