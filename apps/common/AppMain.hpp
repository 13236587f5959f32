#pragma once
// The main() of the MPI tools in apps/ (header-only, so the apps build in-tree and against an
// installed package alike).

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HeapPolicy.hpp>
#include <a2sgd/io/Checkpoint.hpp>

#include <mpi.h>
#include <Kokkos_Core.hpp>

#include <cstdio>
#include <exception>
#include <limits>
#include <string>
#include <vector>

namespace a2sgd::apps {

namespace detail {

/// Checks the value of a numeric Kokkos option before Kokkos parses it (Kokkos 3.4 throws
/// std::stoi's exception or aborts on a malformed one): a non-negative integer below 2^31, for
/// --kokkos-num-devices / --kokkos-ndevices optionally followed by ",<integer>" (the device to
/// skip). Returns the problem, or an empty string.
inline std::string kokkos_option_problem(const std::string& arg) {
  static const char* const numeric[] = {"--kokkos-threads",    "--kokkos-num-threads", "--kokkos-numa",
                                        "--kokkos-device-id",  "--kokkos-num-devices", "--kokkos-ndevices",
                                        "--kokkos-skip-device"};
  auto is_count = [](const std::string& v) {
    return !v.empty() && v.size() <= 9 && v.find_first_not_of("0123456789") == std::string::npos;
  };
  for (const char* name : numeric) {
    const std::string prefix = std::string(name) + "=";
    if (arg.rfind(prefix, 0) != 0) continue;
    const std::string value = arg.substr(prefix.size());
    const bool with_skip = std::string(name) == "--kokkos-num-devices" || std::string(name) == "--kokkos-ndevices";
    const std::size_t comma = with_skip ? value.find(',') : std::string::npos;
    const bool ok = comma == std::string::npos ? is_count(value)
                                               : is_count(value.substr(0, comma)) && is_count(value.substr(comma + 1));
    if (!ok)
      return std::string(name) + ": '" + value + "' is not a non-negative integer" +
             (with_skip ? " (or <count>,<device to skip>)" : "");
  }
  return {};
}

}  // namespace detail

/// MPI and Kokkos around run(argc, argv, comm), with the heap policy of A2SGD_HEAP_POLICY
/// (core/HeapPolicy.hpp) applied first, so that MPI's own buffers follow it. Kokkos sees only its
/// own --kokkos-* arguments (it would answer --help itself); run() sees the rest. run() reports
/// collective errors itself and returns the exit code; an exception that reaches here was raised
/// on one rank alone, so it is reported and the job taken down rather than leave the other ranks
/// waiting in a collective.
template <class Run>
int app_main(int argc, char** argv, const char* name, Run run) {
  std::string heap_problem;
  try {
    apply_heap_policy(heap_policy_from_environment());
  } catch (const InvalidArgument& e) {
    heap_problem = e.what();
  }
  MPI_Init(&argc, &argv);
  {
    // Ranks may be started with different environments: all learn of a problem on any rank, the
    // lowest such rank reports it, and every rank exits with the bad-input code.
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int reporter = heap_problem.empty() ? std::numeric_limits<int>::max() : rank;
    MPI_Allreduce(MPI_IN_PLACE, &reporter, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (reporter != std::numeric_limits<int>::max()) {
      if (rank == reporter) std::fprintf(stderr, "%s: error: %s\n", name, heap_problem.c_str());
      MPI_Finalize();
      return 2;
    }
  }
  std::vector<char*> kokkos_args{argv[0]}, our_args{argv[0]};
  for (int i = 1; i < argc; ++i)
    (std::string(argv[i]).rfind("--kokkos", 0) == 0 ? kokkos_args : our_args).push_back(argv[i]);
  int kokkos_argc = static_cast<int>(kokkos_args.size());
  // Every rank has the same arguments and finds the same problem; rank 0 reports it.
  for (std::size_t i = 1; i < kokkos_args.size(); ++i) {
    const std::string problem = detail::kokkos_option_problem(kokkos_args[i]);
    if (problem.empty()) continue;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
      std::fprintf(stderr, "%s: error: %s (--kokkos-help lists the Kokkos options)\n", name, problem.c_str());
    MPI_Finalize();
    return 2;
  }
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
    // Kokkos rejected its options in a way the check above does not foresee. Every rank has the
    // same arguments and fails alike, so each reports through rank 0 and returns the bad-input code.
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
