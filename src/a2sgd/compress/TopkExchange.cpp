#include <a2sgd/compress/TopkExchange.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/core/Math.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace a2sgd {
namespace {

using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;

Index k_of(double ratio, Index n) {
  if (!(ratio > 0.0 && ratio <= 1.0))
    throw InvalidArgument("topk: ratio " + std::to_string(ratio) + " is not in (0, 1]");
  return std::max<Index>(1, std::min<Index>(n, static_cast<Index>(std::llround(ratio * static_cast<double>(n)))));
}

// |a| >= t is tested as a^2 >= t^2 in double: no sign branch (signs are random), no overflow.
std::int64_t count_at_least(const ExecutionSpace& exec, const ConstFloatView& a, float threshold) {
  const double t2 = static_cast<double>(threshold) * threshold;
  std::int64_t c = 0;
  Kokkos::parallel_reduce(
      "a2sgd::compress::topk_count", Policy(exec, 0, static_cast<Index>(a.extent(0))),
      KOKKOS_LAMBDA(Index i, std::int64_t & s) { s += static_cast<double>(a(i)) * a(i) >= t2; }, c);
  return c;
}

// Indices and magnitudes of the entries with |a| >= threshold, in ascending index order (one scan
// pass; the magnitudes are what the exact selection compares, so they come along).
struct Candidates {
  Kokkos::View<Index*, MemorySpace> index;
  Kokkos::View<float*, MemorySpace> magnitude;
};

Candidates compact(const ExecutionSpace& exec, const ConstFloatView& a, float threshold, std::int64_t count) {
  const auto len = static_cast<std::size_t>(count);
  Candidates c{Kokkos::View<Index*, MemorySpace>(
                   Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::topk::candidates"), len),
               Kokkos::View<float*, MemorySpace>(
                   Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::topk::magnitudes"), len)};
  const auto index = c.index;
  const auto magnitude = c.magnitude;
  const double t2 = static_cast<double>(threshold) * threshold;
  Kokkos::parallel_scan(
      "a2sgd::compress::topk_compact", Policy(exec, 0, static_cast<Index>(a.extent(0))),
      KOKKOS_LAMBDA(Index i, Index & offset, bool final) {
        const bool keep = static_cast<double>(a(i)) * a(i) >= t2;
        if (final && keep) {
          index(offset) = i;
          magnitude(offset) = a2sgd::detail::abs(a(i));
        }
        offset += keep;
      });
  return c;
}

}  // namespace

std::vector<std::uint32_t> TopkExchange::select(const ExecutionSpace& exec, const ConstFloatView& a, Index k) {
  const auto n = static_cast<Index>(a.extent(0));
  if (k < 1 || k > n) throw InvalidArgument("topk: k = " + std::to_string(k) + " for n = " + std::to_string(n));
  // Threshold from a strided sample of |a|, aiming at about 2k candidates.
  const Index m = std::min<Index>(n, 16384);
  const Index stride = n / m;
  std::vector<float> sample(static_cast<std::size_t>(m));
  {
    Kokkos::View<float*, MemorySpace> s("a2sgd::topk::sample", static_cast<std::size_t>(m));
    Kokkos::parallel_for(
        "a2sgd::compress::topk_sample", Policy(exec, 0, m),
        KOKKOS_LAMBDA(Index j) { s(j) = a2sgd::detail::abs(a(j * stride)); });
    auto hs = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), s);
    std::copy(hs.data(), hs.data() + m, sample.begin());
  }
  // Order statistics of the sample by selection, not sorting (O(m) per query).
  auto threshold_for = [&](double factor) {
    const auto rank = static_cast<std::size_t>(
        std::min<double>(static_cast<double>(m - 1), std::ceil(factor * static_cast<double>(k) * m / n)));
    std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(rank), sample.end(),
                     std::greater<float>());
    return sample[rank];
  };
  float threshold = threshold_for(2.0);
  std::int64_t count = count_at_least(exec, a, threshold);
  // Rare corrections: too few candidates (lower the bar), far too many (raise it).
  for (double factor = 8.0; count < k && threshold > 0.0f; factor *= 4.0) {
    threshold = factor * k * m / n >= m - 1 ? 0.0f : threshold_for(factor);
    count = count_at_least(exec, a, threshold);
  }
  for (double factor = 1.0; count > 8 * k && factor > 0.1; factor /= 2.0) {
    const float higher = threshold_for(factor);
    const std::int64_t c = count_at_least(exec, a, higher);
    if (c < k) break;
    threshold = higher;
    count = c;
  }
  // Exact selection of k among the candidates: largest |a| first, then the lower index.
  // Only the candidates travel to the host (count values, not n).
  const Candidates found = compact(exec, a, threshold, count);
  const auto candidates = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), found.index);
  const auto host_magnitudes = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), found.magnitude);
  std::vector<std::pair<float, Index>> keyed(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) keyed[i] = {host_magnitudes(i), candidates(i)};
  auto before = [](const std::pair<float, Index>& x, const std::pair<float, Index>& y) {
    return x.first > y.first || (x.first == y.first && x.second < y.second);
  };
  std::nth_element(keyed.begin(), keyed.begin() + (k - 1), keyed.end(), before);
  std::vector<std::uint32_t> chosen(static_cast<std::size_t>(k));
  for (Index i = 0; i < k; ++i) chosen[i] = static_cast<std::uint32_t>(keyed[i].second);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

TopkExchange::TopkExchange(const Communicator& comm, Index n, const TopkOptions& options,
                           const CommonExchangeOptions& common, const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, "topk;ratio=" + std::to_string(options.ratio)),
      m_options(options),
      m_k(k_of(options.ratio, n)),
      m_residual("a2sgd::compress::residual", static_cast<std::size_t>(n)),
      m_update("a2sgd::compress::topk_update", static_cast<std::size_t>(n)) {
  if (n >= (Index(1) << 32)) throw InvalidArgument("topk: n = " + std::to_string(n) + " needs 64-bit indices");
  const auto k = static_cast<std::size_t>(m_k);
  m_selected_device = decltype(m_selected_device)("a2sgd::topk::selected", k);
  m_payload = decltype(m_payload)("a2sgd::topk::payload", k);
  m_host_payload = Kokkos::create_mirror_view(m_payload);
  m_gathered = decltype(m_gathered)("a2sgd::topk::gathered", k * static_cast<std::size_t>(comm.size()));
  m_host_gathered = Kokkos::create_mirror_view(m_gathered);
}

std::vector<std::pair<std::string, std::string>> TopkExchange::options() const {
  return {{"ratio", std::to_string(m_options.ratio)}, {"k", std::to_string(m_k)}};
}

void TopkExchange::do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                           StepStats& stats) {
  Stopwatch clock;
  const std::int64_t bad = compress::impl::fold_into_residual(exec(), grad, m_residual);  // the residual now holds a
  m_selected = select(exec(), m_residual, m_k);
  const auto k = static_cast<std::size_t>(m_k);
  const auto selected = m_selected_device;
  {
    Kokkos::View<const std::uint32_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(
        m_selected.data(), k);
    Kokkos::deep_copy(selected, host);
  }
  // Payload: (index << 32) | float bits per entry; the sent entries leave the residual.
  const auto payload = m_payload;
  const FloatView e = m_residual;
  const bool poison = bad > 0;  // NaN travels to every rank, which then stops (NonFiniteError)
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Kokkos::parallel_for(
      "a2sgd::compress::topk_pack", Policy(exec(), 0, m_k), KOKKOS_LAMBDA(Index i) {
        const std::uint32_t idx = selected(i);
        union {
          float f;
          std::uint32_t u;
        } v;
        v.f = poison && i == 0 ? nan : e(idx);
        payload(i) = (std::uint64_t(idx) << 32) | v.u;
        e(idx) = 0.0f;
      });
  Kokkos::deep_copy(m_host_payload, payload);
  stats.compress_s += clock.seconds();

  comm().allgather(m_host_payload.data(), k, m_host_gathered.data(), &stats);

  clock.restart();
  Kokkos::deep_copy(m_gathered, m_host_gathered);
  const auto words = m_gathered;
  const FloatView u = m_update;
  const float inv_p = 1.0f / static_cast<float>(comm().size());
  auto scatter = [&](bool add) {
    Kokkos::parallel_for(
        "a2sgd::compress::topk_decode", Policy(exec(), 0, static_cast<Index>(words.extent(0))), KOKKOS_LAMBDA(Index j) {
          const std::uint64_t w = words(j);
          union {
            float f;
            std::uint32_t u;
          } v;
          v.u = static_cast<std::uint32_t>(w & 0xffffffffu);
          if (add)
            Kokkos::atomic_add(&u(w >> 32), v.f * inv_p);
          else
            u(w >> 32) = 0.0f;
        });
  };
  scatter(true);
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
  scatter(false);  // leave u zero for the next step: O(k p), not O(n)
  exec().fence();
}

}  // namespace a2sgd
