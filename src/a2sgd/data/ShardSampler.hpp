#pragma once
/// @file ShardSampler.hpp
/// Non-overlapping per-rank shards of a dataset, reshuffled every epoch from a seed.

#include <a2sgd/core/Types.hpp>

#include <cstdint>
#include <vector>

namespace a2sgd::data {

/// Every epoch, all ranks draw the same permutation of [0, N) from (seed, epoch); rank r takes
/// positions [r * S, (r + 1) * S) with S = floor(N / p). The shards are disjoint, every rank has
/// the same number of samples (so every rank runs the same number of steps), and the N mod p
/// samples left over change from epoch to epoch.
class ShardSampler {
 public:
  ShardSampler(Index dataset_size, int rank, int world_size, std::uint64_t seed);

  /// Samples per rank and epoch (S).
  Index shard_size() const noexcept { return m_shard; }

  /// This rank's sample indices for `epoch`, in visiting order.
  std::vector<Index> epoch_indices(std::uint64_t epoch) const;

 private:
  Index m_size;
  int m_rank;
  std::uint64_t m_seed;
  Index m_shard;
};

}  // namespace a2sgd::data
