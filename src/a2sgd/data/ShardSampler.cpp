#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/Random.hpp>
#include <a2sgd/data/ShardSampler.hpp>

#include <numeric>
#include <utility>

namespace a2sgd::data {

ShardSampler::ShardSampler(Index dataset_size, int rank, int world_size, std::uint64_t seed)
    : m_size(dataset_size), m_rank(rank), m_seed(seed), m_shard(0) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw InvalidArgument("ShardSampler: rank " + std::to_string(rank) + " of " + std::to_string(world_size));
  m_shard = dataset_size / world_size;
  if (m_shard < 1)
    throw InvalidArgument("ShardSampler: " + std::to_string(dataset_size) + " samples cannot be split over " +
                          std::to_string(world_size) + " ranks");
}

std::vector<Index> ShardSampler::epoch_indices(std::uint64_t epoch) const {
  std::vector<Index> perm(static_cast<std::size_t>(m_size));
  std::iota(perm.begin(), perm.end(), Index(0));
  // Fisher-Yates with our own generator: the same order for every rank and standard library.
  Rng rng(derive_seed(m_seed, 1000003ull + epoch));
  for (std::size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
  const auto begin = perm.begin() + static_cast<std::ptrdiff_t>(m_rank * m_shard);
  return std::vector<Index>(begin, begin + static_cast<std::ptrdiff_t>(m_shard));
}

}  // namespace a2sgd::data
