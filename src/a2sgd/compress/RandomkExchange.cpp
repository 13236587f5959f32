#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/compress/RandomkExchange.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/compress/impl/IndexPermutation.hpp>
#include <a2sgd/core/Random.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace a2sgd {
namespace {

std::string range_message(double ratio, Index n) {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "randomk: ratio %g of n = %lld values selects none (k = 0); the valid range is [%g, 1]", ratio,
                static_cast<long long>(n), 0.5 / static_cast<double>(n));
  return buf;
}

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
  // k = round(ratio n); a ratio that selects no value would train nothing, so it is refused.
  const double k = std::round(options.ratio * static_cast<double>(n));
  if (n > 0 && k < 1.0) throw InvalidArgument(range_message(options.ratio, n));
  m_k = std::max<Index>(1, std::min<Index>(n, static_cast<Index>(k)));
  m_indices = Kokkos::View<Index*, MemorySpace>("a2sgd::randomk::indices", static_cast<std::size_t>(m_k));
  m_values = FloatView("a2sgd::randomk::values", static_cast<std::size_t>(m_k));
}

std::vector<std::pair<std::string, std::string>> RandomkExchange::own_options() const {
  return {
      {"ratio", std::to_string(m_options.ratio)}, {"k", std::to_string(m_k)}, {"seed", std::to_string(m_options.seed)}};
}

std::vector<Index> RandomkExchange::indices(std::uint64_t step) const {
  const compress::impl::IndexPermutation pick(derive_seed(m_options.seed, step), static_cast<std::uint64_t>(size()));
  std::vector<Index> out(static_cast<std::size_t>(m_k));
  for (Index j = 0; j < m_k; ++j)
    out[static_cast<std::size_t>(j)] = static_cast<Index>(pick(static_cast<std::uint64_t>(j)));
  std::sort(out.begin(), out.end());
  return out;
}

void RandomkExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                              StepStats& stats) {
  Stopwatch clock;
  // a = g + e everywhere (the residual keeps it); this step's k indices, the same on every rank,
  // are drawn in the kernel that gathers their values, and the sent values leave the residual.
  const FloatView e = m_residual;
  const auto bad = non_finite_count();
  compress::impl::fold_into_residual(exec(), grad, e, bad);
  const compress::impl::IndexPermutation pick(derive_seed(m_options.seed, steps()), static_cast<std::uint64_t>(size()));
  const auto idx = m_indices;
  const FloatView values = m_values;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::randomk_pack"), Policy(exec(), 0, m_k), KOKKOS_LAMBDA(Index j) {
        const auto i = static_cast<Index>(pick(static_cast<std::uint64_t>(j)));
        idx(j) = i;
        // A non-finite entry anywhere makes every rank stop (NonFiniteError while applying u).
        values(j) = j == 0 && bad() > 0 ? a2sgd::detail::quiet_nan() : e(i);
        e(i) = 0.0f;
      });
  exec().fence();
  stats.compress_s += clock.seconds();

  allreduce_sum(m_values, stats);

  clock.restart();
  const FloatView u = m_update;
  const float inv_p = 1.0f / static_cast<float>(comm().size());
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::randomk_decode"), Policy(exec(), 0, m_k),
      KOKKOS_LAMBDA(Index j) { u(idx(j)) = values(j) * inv_p; });
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::randomk_clear"), Policy(exec(), 0, m_k),
      KOKKOS_LAMBDA(Index j) { u(idx(j)) = 0.0f; });
  exec().fence();
}

}  // namespace a2sgd

namespace {
a2sgd::RandomkOptions randomk_options(const a2sgd::OptionValues& o, std::uint64_t seed) {
  a2sgd::RandomkOptions r;
  r.ratio = o.number("ratio");
  o.require(r.ratio > 0 && r.ratio <= 1, "ratio", "must be in (0, 1]");
  r.seed = seed;
  return r;
}
}  // namespace

A2SGD_REGISTER_EXCHANGE(randomk) {
  using namespace a2sgd;
  ExchangeMethod m;
  m.summary = "error feedback, k = ratio n entries at indices every rank draws alike, by all-reduce: 4 k bytes";
  m.options = {{"ratio", "0.001", "fraction of entries sent per step, in (0, 1]"}};
  m.check_options = [](const OptionValues& o) { randomk_options(o, 0); };
  m.make = [](const ExchangeContext& c, const OptionValues& o) -> std::unique_ptr<Exchange> {
    return std::make_unique<RandomkExchange>(c.comm, c.n, randomk_options(o, c.seed), c.common, c.exec);
  };
  // Fold, gather k values; scatter k values, optimizer.
  m.kernel_traffic = [](double n, double payload, int) {
    return KernelTraffic{{{traffic::fold(n), traffic::read(payload)}},
                         {{traffic::sgd(n), {Access::axpy, 2.0 * payload}}}};
  };
  return m;
}
