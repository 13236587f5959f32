#pragma once
/// @file NetworkModel.hpp
/// The alpha-beta (latency-bandwidth) cost model of MPI collectives used to project measured
/// exchanges to large rank counts (docs/methods.md, "Scale projection").

#include <cstdint>
#include <string>
#include <vector>

namespace a2sgd {

/// The collective a step performs.
enum class CollectiveKind { allreduce, allgather };

/// Which algorithm models an all-reduce.
enum class AllreduceModel {
  ring,      ///< reduce-scatter + allgather around a ring: bandwidth-optimal, 2 (p - 1) latencies
  doubling,  ///< recursive doubling: log2 p latencies, the whole message every round
  /// Rabenseifner's: reduce-scatter by recursive halving, then all-gather by recursive doubling:
  /// bandwidth-optimal like the ring with 2 log2 p latencies (MPICH's choice for long messages)
  halving,
  best,  ///< the cheapest of the three for the message size, as MPI libraries switch algorithms
};

/// One collective of a step and the bytes this rank contributes to it. A method may perform one
/// collective with several MPI calls (the 16-bit all-reduce: an all-to-all and an all-gather);
/// `mpi_calls` says how many, and `algorithm` (when not `best`) the all-reduce algorithm that
/// models them whatever algorithm the projection assumes for MPI's own all-reduce. A collective
/// made once every `every` steps (A2SGD's periodic model averaging) counts 1 / every per step.
struct PlannedCollective {
  CollectiveKind kind = CollectiveKind::allreduce;
  std::uint64_t bytes = 0;
  int mpi_calls = 1;
  AllreduceModel algorithm = AllreduceModel::best;
  std::uint64_t every = 1;
};

/// A link: per-message latency alpha (seconds), bandwidth (bytes per second), and whether a rank
/// sends and receives at the full bandwidth at once (full duplex: InfiniBand, RoCE, and TCP with
/// more than one connection per peer) or the two directions share it (what Open MPI's TCP
/// transport with one connection per peer measured on the emulated cluster, docs/network.md).
struct Link {
  double alpha_s = 2e-6;
  double bytes_per_s = 100e9 / 8;
  bool full_duplex = true;
  /// "100" (Gb/s, default latency), "100:1.5" (Gb/s : alpha in microseconds), optionally followed by
  /// ":half" for a half-duplex link.
  static Link parse(const std::string& text, double default_alpha_s);
  double gbit_per_s() const noexcept { return bytes_per_s * 8 / 1e9; }
};

/// Modelled seconds of one collective at p ranks, each contributing m bytes (beta = 1 / bandwidth):
///   ring all-reduce          2 (p - 1) alpha + 2 (p - 1) / p m beta d
///   recursive-doubling a-r   ceil(log2 p) (alpha + m beta d)
///   halving-doubling a-r     2 log2 q alpha + 2 (q - 1) / q m beta d, q = 2^floor(log2 p); when
///                            p is not a power of two, p - q ranks first hand their vector to a
///                            partner and get the result back: + 2 (alpha + m beta d)
///   recursive-doubling a-g   ceil(log2 p) alpha + (p - 1) m beta d
/// where every rank sends and receives the same bytes in each round, so d = 1 on a full-duplex
/// link and 2 on a half-duplex one. Reduction arithmetic and contention are not modelled; p = 1
/// costs nothing.
double collective_seconds(CollectiveKind kind, std::uint64_t bytes, int p, const Link& link,
                          AllreduceModel model = AllreduceModel::best);

/// Sum over a step's collectives, each divided by its `every`.
double step_comm_seconds(const std::vector<PlannedCollective>& step, int p, const Link& link,
                         AllreduceModel model = AllreduceModel::best);

/// "ring" | "doubling" | "best"; InvalidArgument otherwise.
AllreduceModel parse_allreduce_model(const std::string& name);

}  // namespace a2sgd
