#include <a2sgd/compress/QsgdExchange.hpp>
#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/Random.hpp>

#include <cmath>
#include <limits>

namespace a2sgd {
namespace {
using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;
}  // namespace

int QsgdExchange::bits_for_levels(std::int64_t levels) {
  if (levels < 1 || levels >= (std::int64_t(1) << 24))
    throw InvalidArgument("qsgd: " + std::to_string(levels) + " levels is not in [1, 16777215]");
  int bits = 0;
  while ((std::int64_t(1) << bits) < levels + 1) ++bits;
  return bits + 1;
}

QsgdExchange::QsgdExchange(const Communicator& comm, Index n, const QsgdOptions& options,
                           const CommonExchangeOptions& common, const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common,
               "qsgd;levels=" + std::to_string(options.levels) + ";seed=" + std::to_string(options.seed)),
      m_options(options),
      m_bits(bits_for_levels(options.levels)),
      m_update("a2sgd::compress::qsgd_update", static_cast<std::size_t>(n)),
      m_words("a2sgd::compress::qsgd_words", static_cast<std::size_t>(payload_words())),
      m_all("a2sgd::compress::qsgd_all", static_cast<std::size_t>(payload_words() * comm.size())) {}

Index QsgdExchange::payload_words() const noexcept { return 1 + compress::impl::packed_words(size(), m_bits); }

std::vector<std::pair<std::string, std::string>> QsgdExchange::options() const {
  return {{"levels", std::to_string(m_options.levels)},
          {"bits", std::to_string(m_bits)},
          {"seed", std::to_string(m_options.seed)}};
}

void QsgdExchange::do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                           StepStats& stats) {
  Stopwatch clock;
  const Index n = size();
  const int bits = m_bits;
  const ConstFloatView g = grad;
  double sum_sq = 0.0;
  Kokkos::parallel_reduce(
      "a2sgd::compress::qsgd_norm", Policy(exec(), 0, n),
      KOKKOS_LAMBDA(Index i, double& s) { s += static_cast<double>(g(i)) * static_cast<double>(g(i)); }, sum_sq);
  // A non-finite gradient gives a non-finite norm; sending NaN as the norm stops every rank.
  const bool finite = std::isfinite(sum_sq);
  const float norm = finite ? static_cast<float>(std::sqrt(sum_sq)) : std::numeric_limits<float>::quiet_NaN();
  const float s = static_cast<float>(m_options.levels);
  const float to_level = finite && norm > 0.0f ? s / norm : 0.0f;
  const std::uint32_t top = static_cast<std::uint32_t>(m_options.levels);
  const std::uint32_t sign_bit = std::uint32_t(1) << (bits - 1);
  const std::uint64_t key = derive_seed(derive_seed(m_options.seed, steps()), static_cast<std::uint64_t>(comm().rank()));
  // Field i: sign in the top bit, level in the others; x = s |g_i| / v is rounded up with
  // probability x - floor(x), so E[l_i] = x.
  auto field = KOKKOS_LAMBDA(Index i)->std::uint32_t {
    const float a = g(i);
    const float x = a2sgd::detail::abs(a) * to_level;
    const auto lo = static_cast<std::uint32_t>(x);  // floor: 0 <= x <= s < 2^24
    std::uint32_t level =
        lo + (compress::impl::counter_uniform(key, static_cast<std::uint64_t>(i)) < x - static_cast<float>(lo) ? 1u : 0u);
    level = level < top ? level : top;
    return level | (a < 0.0f ? sign_bit : 0u);
  };
  const auto out = m_words;
  const Index words = payload_words() - 1;
  Kokkos::parallel_for(
      "a2sgd::compress::qsgd_pack", Policy(exec(), 0, words), KOKKOS_LAMBDA(Index w) {
        out(w + 1) = compress::impl::pack_word(w, n, bits, field);
        if (w == 0) out(0) = detail::float_bits(norm);
      });
  if (words == 0) Kokkos::deep_copy(Kokkos::subview(m_words, 0), detail::float_bits(norm));
  auto host_words = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m_words);
  stats.compress_s += clock.seconds();

  auto host_all = Kokkos::create_mirror_view(m_all);
  comm().allgather(host_words.data(), host_words.extent(0), host_all.data(), &stats);

  clock.restart();
  Kokkos::deep_copy(m_all, host_all);
  const auto all = m_all;
  const FloatView u = m_update;
  const int p = comm().size();
  const Index stride = payload_words();
  const float unit = 1.0f / (s * static_cast<float>(p));
  const std::uint32_t level_mask = sign_bit - 1u;
  Kokkos::parallel_for(
      "a2sgd::compress::qsgd_decode", Policy(exec(), 0, n), KOKKOS_LAMBDA(Index i) {
        float sum = 0.0f;
        for (int r = 0; r < p; ++r) {
          const std::uint32_t f = compress::impl::unpack_field(all, r * stride + 1, i, bits);
          const float v = detail::bits_float(all(r * stride)) * static_cast<float>(f & level_mask);
          sum += (f & sign_bit) ? -v : v;
        }
        u(i) = sum * unit;
      });
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
}

}  // namespace a2sgd
