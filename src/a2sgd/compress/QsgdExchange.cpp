#include <a2sgd/compress/QsgdExchange.hpp>
#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/compress/impl/SumReduce.hpp>
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

Index QsgdExchange::payload_words() const noexcept {
  return 1 + compress::impl::packed_words(size(), m_bits);
}

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
  const double sum_sq = compress::impl::sum_reduce(
      exec(), "a2sgd::compress::qsgd_norm", n,
      KOKKOS_LAMBDA(Index i) { return static_cast<double>(g(i)) * static_cast<double>(g(i)); });
  // A non-finite gradient gives a non-finite norm; sending NaN as the norm stops every rank.
  const bool finite = std::isfinite(sum_sq);
  const float norm = finite ? static_cast<float>(std::sqrt(sum_sq)) : std::numeric_limits<float>::quiet_NaN();
  const float s = static_cast<float>(m_options.levels);
  const float to_level = finite && norm > 0.0f ? s / norm : 0.0f;
  const std::uint32_t top = static_cast<std::uint32_t>(m_options.levels);
  const std::uint32_t sign_bit = std::uint32_t(1) << (bits - 1);
  const std::uint64_t key =
      derive_seed(derive_seed(m_options.seed, steps()), static_cast<std::uint64_t>(comm().rank()));
  // Field i: sign in the top bit, level in the others; x = s |g_i| / v is rounded up with
  // probability x - floor(x), so E[l_i] = x.
  auto field = KOKKOS_LAMBDA(Index i)->std::uint32_t {
    const float a = g(i);
    const float x = a2sgd::detail::abs(a) * to_level;
    const auto lo = static_cast<std::uint32_t>(x);  // floor: 0 <= x <= s < 2^24
    // Branch-free (the rounding and the signs are random, branches would be mispredicted).
    std::uint32_t level =
        lo + static_cast<std::uint32_t>(compress::impl::counter_uniform(key, static_cast<std::uint64_t>(i)) <
                                        x - static_cast<float>(lo));
    level = level < top ? level : top;
    return level | (static_cast<std::uint32_t>(a < 0.0f) << (bits - 1));
  };
  const auto out = m_words;
  const Index groups = compress::impl::packed_groups(n);
  if (finite) {
    Kokkos::parallel_for(
        "a2sgd::compress::qsgd_pack", Policy(exec(), 0, groups),
        KOKKOS_LAMBDA(Index grp) { compress::impl::pack_group(out, 1, grp, n, bits, field); });
  } else {
    Kokkos::deep_copy(exec(), m_words, 0u);  // NaN/Inf entries have no level; the NaN norm speaks
  }
  Kokkos::deep_copy(exec(), Kokkos::subview(m_words, 0), detail::float_bits(norm));
  exec().fence();
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
      "a2sgd::compress::qsgd_decode", Policy(exec(), 0, groups), KOKKOS_LAMBDA(Index grp) {
        float sum[32] = {};
        for (int r = 0; r < p; ++r) {
          const float v = detail::bits_float(all(r * stride));
          compress::impl::unpack_group(all, r * stride + 1, grp, n, bits, [&](int j, std::uint32_t f) {
            const float sign = 1.0f - 2.0f * static_cast<float>(f >> (bits - 1));  // branch-free
            sum[j] += sign * v * static_cast<float>(f & level_mask);
          });
        }
        const Index begin = grp * 32;
        const int count = static_cast<int>(begin + 32 < n ? 32 : n - begin);
        for (int j = 0; j < count; ++j) u(begin + j) = sum[j] * unit;
      });
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
}

}  // namespace a2sgd
