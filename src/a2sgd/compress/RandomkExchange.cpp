#include <a2sgd/compress/RandomkExchange.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/Random.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

namespace a2sgd {
namespace {

using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;

}  // namespace

RandomkExchange::RandomkExchange(const Communicator& comm, Index n, const RandomkOptions& options,
                                 const CommonExchangeOptions& common, const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common,
               "randomk;ratio=" + std::to_string(options.ratio) + ";seed=" + std::to_string(options.seed)),
      m_options(options),
      m_k(0),
      m_residual("a2sgd::compress::residual", static_cast<std::size_t>(n)),
      m_update("a2sgd::compress::randomk_update", static_cast<std::size_t>(n)) {
  if (!(options.ratio > 0.0 && options.ratio <= 1.0))
    throw InvalidArgument("randomk: ratio " + std::to_string(options.ratio) + " is not in (0, 1]");
  m_k =
      std::max<Index>(1, std::min<Index>(n, static_cast<Index>(std::llround(options.ratio * static_cast<double>(n)))));
  m_indices = Kokkos::View<Index*, MemorySpace>("a2sgd::randomk::indices", static_cast<std::size_t>(m_k));
  m_values = FloatView("a2sgd::randomk::values", static_cast<std::size_t>(m_k));
  m_host_values = Kokkos::create_mirror_view(m_values);
}

std::vector<std::pair<std::string, std::string>> RandomkExchange::options() const {
  return {
      {"ratio", std::to_string(m_options.ratio)}, {"k", std::to_string(m_k)}, {"seed", std::to_string(m_options.seed)}};
}

std::vector<Index> RandomkExchange::indices(std::uint64_t step) const {
  // Floyd's algorithm: k distinct values of [0, n) in O(k), from a stream all ranks share.
  Rng rng(derive_seed(m_options.seed, step));
  const auto n = static_cast<std::uint64_t>(size());
  std::unordered_set<Index> chosen;
  chosen.reserve(static_cast<std::size_t>(2 * m_k));
  for (std::uint64_t j = n - static_cast<std::uint64_t>(m_k); j < n; ++j) {
    const auto t = static_cast<Index>(rng.below(j + 1));
    chosen.insert(chosen.count(t) ? static_cast<Index>(j) : t);
  }
  std::vector<Index> out(chosen.begin(), chosen.end());
  std::sort(out.begin(), out.end());
  return out;
}

void RandomkExchange::do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                              StepStats& stats) {
  Stopwatch clock;
  const auto k = static_cast<std::size_t>(m_k);
  const std::vector<Index> host_idx = indices(steps());
  const auto idx = m_indices;
  Kokkos::deep_copy(
      idx, Kokkos::View<const Index*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host_idx.data(), k));
  // a = g + e everywhere (the residual keeps it), the sent values leave the residual.
  const FloatView e = m_residual;
  const std::int64_t bad = compress::impl::fold_into_residual(exec(), grad, e);
  const FloatView values = m_values;
  Kokkos::parallel_for(
      "a2sgd::compress::randomk_pack", Policy(exec(), 0, m_k), KOKKOS_LAMBDA(Index j) {
        values(j) = e(idx(j));
        e(idx(j)) = 0.0f;
      });
  auto host_values = m_host_values;
  Kokkos::deep_copy(host_values, values);
  // A non-finite entry anywhere makes every rank stop (NonFiniteError while applying u).
  if (bad > 0) host_values(0) = std::numeric_limits<float>::quiet_NaN();
  stats.compress_s += clock.seconds();

  comm().allreduce(host_values.data(), k, MPI_SUM, &stats);

  clock.restart();
  Kokkos::deep_copy(values, host_values);
  const FloatView u = m_update;
  const float inv_p = 1.0f / static_cast<float>(comm().size());
  Kokkos::parallel_for(
      "a2sgd::compress::randomk_decode", Policy(exec(), 0, m_k),
      KOKKOS_LAMBDA(Index j) { u(idx(j)) = values(j) * inv_p; });
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
  Kokkos::parallel_for(
      "a2sgd::compress::randomk_clear", Policy(exec(), 0, m_k), KOKKOS_LAMBDA(Index j) { u(idx(j)) = 0.0f; });
  exec().fence();
}

}  // namespace a2sgd
