#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/compress/TopkExchange.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/core/Math.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace a2sgd {

std::vector<std::uint32_t> TopkExchange::select(const ExecutionSpace& exec, const ConstFloatView& a, Index k,
                                                compress::impl::TopkSelector::Algorithm algorithm) {
  const auto n = static_cast<Index>(a.extent(0));
  compress::impl::TopkSelector selector(k, n, algorithm);
  Kokkos::View<std::uint64_t*, MemorySpace> chosen("a2sgd::topk::chosen", static_cast<std::size_t>(k));
  selector.select(exec, a, chosen);
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), chosen);
  std::vector<std::uint32_t> out(static_cast<std::size_t>(k));
  for (Index i = 0; i < k; ++i) out[i] = static_cast<std::uint32_t>(host(i) >> 32);
  return out;
}

std::vector<std::uint32_t> TopkExchange::last_selection() const {
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m_payload);
  std::vector<std::uint32_t> out(host.extent(0));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint32_t>(host(i) >> 32);
  return out;
}

TopkExchange::TopkExchange(const Communicator& comm, Index n, const TopkOptions& options,
                           const CommonExchangeOptions& common, const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, "topk;ratio=" + std::to_string(options.ratio)),
      m_options(options),
      m_k(topk_k(options.ratio, n)),
      m_residual("a2sgd::compress::residual", static_cast<std::size_t>(n)),
      m_update("a2sgd::compress::topk_update", static_cast<std::size_t>(n)) {
  const auto k = static_cast<std::size_t>(m_k);
  m_codec = TopkCodec(n, m_k);
  m_payload = decltype(m_payload)("a2sgd::topk::payload", k);
  m_gathered = decltype(m_gathered)("a2sgd::topk::gathered", k * static_cast<std::size_t>(comm.size()));
}

std::vector<std::pair<std::string, std::string>> TopkExchange::own_options() const {
  return {{"ratio", std::to_string(m_options.ratio)}, {"k", std::to_string(m_k)}};
}

void TopkExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                           StepStats& stats) {
  Stopwatch clock;
  // e <- a = g + e, then the k largest |a| into the payload and out of the residual.
  m_codec.encode(exec(), grad, m_residual, non_finite_count(), m_payload);
  exec().fence();
  stats.compress_s += clock.seconds();

  allgather(m_payload, m_gathered, stats);

  clock.restart();
  TopkCodec::decode_add(exec(), m_gathered, m_update, 1.0f / static_cast<float>(comm().size()));
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
  TopkCodec::clear(exec(), m_gathered, m_update);  // leave u zero for the next step: O(k p), not O(n)
  exec().fence();
}

}  // namespace a2sgd

namespace {
a2sgd::TopkOptions topk_options(const a2sgd::OptionValues& o) {
  a2sgd::TopkOptions t;
  t.ratio = o.number("ratio");
  o.require(t.ratio > 0 && t.ratio <= 1, "ratio", "must be in (0, 1]");
  return t;
}
}  // namespace

A2SGD_REGISTER_EXCHANGE(topk) {
  using namespace a2sgd;
  ExchangeMethod m;
  m.summary = "error feedback, the k = ratio n largest |g + e| as (index, value) pairs by allgather: 8 k bytes";
  m.options = {{"ratio", "0.001", "fraction of entries sent per step, in (0, 1]"}};
  m.check_options = [](const OptionValues& o) { topk_options(o); };
  m.make = [](const ExchangeContext& c, const OptionValues& o) -> std::unique_ptr<Exchange> {
    return std::make_unique<TopkExchange>(c.comm, c.n, topk_options(o), c.common, c.exec);
  };
  // Fold, count and compact passes over a (two reads); decode scatters p payloads into u (the
  // touched entries: read and written), then the optimizer and the clearing of those entries.
  m.kernel_traffic = [](double n, double payload, int p) {
    const double f = traffic::buffer(n);
    return KernelTraffic{{{traffic::fold(n), traffic::read(f), traffic::read(f)}},
                         {{traffic::sgd(n), {Access::axpy, 2.0 * p * payload}}}};
  };
  return m;
}
