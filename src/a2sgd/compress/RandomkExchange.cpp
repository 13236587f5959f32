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

void RandomkExchange::pack(const FloatView& grad, GradientRange range, Index offset, Index k, std::uint64_t seed) {
  // a = g + e over the range (the residual keeps it); the step's k indices, the same on every rank,
  // are drawn in the kernel that gathers their values, and the sent values leave the residual.
  const auto part = std::make_pair(range.begin, range.end);
  const FloatView e = m_residual;
  const auto bad = non_finite_count();
  compress::impl::fold_into_residual(exec(), Kokkos::subview(grad, part), Kokkos::subview(e, part), bad);
  const compress::impl::IndexPermutation pick(derive_seed(seed, steps()), static_cast<std::uint64_t>(range.size()));
  const auto idx = m_indices;
  const FloatView values = m_values;
  const Index begin = range.begin;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::randomk_pack"), Policy(exec(), 0, k), KOKKOS_LAMBDA(Index j) {
        const auto i = begin + static_cast<Index>(pick(static_cast<std::uint64_t>(j)));
        idx(offset + j) = i;
        // A non-finite entry anywhere makes every rank stop (NonFiniteError while applying u).
        values(offset + j) = j == 0 && bad() > 0 ? a2sgd::detail::quiet_nan() : e(i);
        e(i) = 0.0f;
      });
  exec().fence();
}

void RandomkExchange::unpack_apply(const FloatView& params, Optimizer& opt, double lr, Index k, StepStats& stats) {
  Stopwatch clock;
  const FloatView u = m_update;
  const auto idx = m_indices;
  const FloatView values = m_values;
  const float inv_p = 1.0f / static_cast<float>(comm().size());
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::randomk_decode"), Policy(exec(), 0, k),
      KOKKOS_LAMBDA(Index j) { u(idx(j)) = values(j) * inv_p; });
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::randomk_clear"), Policy(exec(), 0, k),
      KOKKOS_LAMBDA(Index j) { u(idx(j)) = 0.0f; });
  exec().fence();
}

void RandomkExchange::buckets_planned() {
  m_bucket_k.clear();
  m_bucket_offset.clear();
  if (buckets().size() < 2) return;
  Index total = 0;
  for (const GradientRange& b : buckets()) {
    const double k = std::round(m_options.ratio * static_cast<double>(b.size()));
    m_bucket_k.push_back(std::max<Index>(1, std::min<Index>(b.size(), static_cast<Index>(k))));
    m_bucket_offset.push_back(total);
    total += m_bucket_k.back();
  }
  m_indices = Kokkos::View<Index*, MemorySpace>("a2sgd::randomk::indices", static_cast<std::size_t>(total));
  m_values = FloatView("a2sgd::randomk::values", static_cast<std::size_t>(total));
}

Request RandomkExchange::start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket,
                                      StepStats& stats) {
  Stopwatch clock;
  // The bucket's own stream: its entries j draw apart from the other buckets'.
  const std::uint64_t seed = m_options.seed ^ (0x9e3779b97f4a7c15ull * (static_cast<std::uint64_t>(index) + 1));
  pack(grad, bucket, m_bucket_offset[index], m_bucket_k[index], seed);
  stats.compress_s += clock.seconds();
  return comm().iallreduce(m_values.data() + m_bucket_offset[index], static_cast<std::size_t>(m_bucket_k[index]),
                           MPI_SUM, &stats);
}

void RandomkExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                              StepStats& stats) {
  if (!m_bucket_k.empty()) {
    finish_buckets(grad, stats);
    unpack_apply(params, opt, lr, static_cast<Index>(m_values.extent(0)), stats);
    return;
  }
  Stopwatch clock;
  pack(grad, {0, size()}, 0, m_k, m_options.seed);
  stats.compress_s += clock.seconds();
  allreduce_sum(m_values, stats);
  unpack_apply(params, opt, lr, m_k, stats);
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
