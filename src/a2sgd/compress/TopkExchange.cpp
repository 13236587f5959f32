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
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), payload());
  std::vector<std::uint32_t> out(host.extent(0));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint32_t>(host(i) >> 32);
  return out;
}

TopkExchange::TopkExchange(const Communicator& comm, Index n, const TopkOptions& options,
                           const CommonExchangeOptions& common, const ExecutionSpace& exec)
    : GatherExchange(comm, n, exec, common, "topk;ratio=" + std::to_string(options.ratio),
                     TopkCodec(n, topk_k(options.ratio, n)), 0,
                     [ratio = options.ratio](Index m) { return TopkCodec(m, topk_k(ratio, m)); }),
      m_options(options) {}

std::vector<std::pair<std::string, std::string>> TopkExchange::own_options() const {
  return {{"ratio", std::to_string(m_options.ratio)}, {"k", std::to_string(k())}};
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
