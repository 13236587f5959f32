#include <a2sgd/compress/QsgdExchange.hpp>
#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/compress/impl/HostClones.hpp>
#include <a2sgd/compress/impl/SumReduce.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/Random.hpp>

#include <cmath>
#include <limits>

namespace a2sgd {
namespace {
using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;
using Words = Kokkos::View<std::uint32_t*, MemorySpace>;

// Field of entry i: sign in the top bit, level in the others; x = s |g_i| / v is rounded up with
// probability x - floor(x), so E[l_i] = x. Branch-free: the rounding and the signs are random,
// branches would be mispredicted.
struct QsgdField {
  float to_level;     // s / v
  std::uint32_t top;  // s
  int bits;
  std::uint64_t key;  // (seed, step, rank)

  KOKKOS_INLINE_FUNCTION std::uint32_t operator()(float a, Index i) const {
    const float x = a2sgd::detail::abs(a) * to_level;
    const auto lo = static_cast<std::uint32_t>(static_cast<std::int32_t>(x));  // floor: 0 <= x <= s < 2^24
    std::uint32_t level =
        lo + static_cast<std::uint32_t>(compress::impl::counter_uniform(key, static_cast<std::uint64_t>(i)) <
                                        x - static_cast<float>(lo));
    level = level < top ? level : top;
    return level | (static_cast<std::uint32_t>(a < 0.0f) << (bits - 1));
  }
};

// Host: the 32 fields of a group in one SIMD loop (compiled per ISA), then packed.
A2SGD_HOST_CLONES void qsgd_fields(const float* g, Index begin, int count, QsgdField field, std::uint32_t* out) {
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
  for (int j = 0; j < count; ++j) out[j] = field(g[j], begin + j);
}

// sign v l of one field (before the 1 / (s p) every decoded value shares).
KOKKOS_INLINE_FUNCTION float decode_field(std::uint32_t f, float v, int bits) {
  const std::uint32_t level_mask = (std::uint32_t(1) << (bits - 1)) - 1u;
  const float sign = 1.0f - 2.0f * static_cast<float>(f >> (bits - 1));
  return sign * v * static_cast<float>(f & level_mask);
}

// Host: sum[j] += sign_j v l_j for the unpacked fields of one rank's group.
A2SGD_HOST_CLONES void qsgd_accumulate(const std::uint32_t* fields, int count, float v, int bits, float* sum) {
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
  for (int j = 0; j < count; ++j) sum[j] += decode_field(fields[j], v, bits);
}

template <class Exec>
void pack(const Exec& exec, const Words& out, const ConstFloatView& g, const QsgdField& field, Index n) {
  const Index groups = compress::impl::packed_groups(n);
  const int bits = field.bits;
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    Kokkos::parallel_for("a2sgd::compress::qsgd_pack", Policy(exec, 0, groups), [=](Index grp) {
      std::uint32_t fields[32];
      const Index begin = grp * 32;
      const int count = compress::impl::group_size(grp, n);
      qsgd_fields(g.data() + begin, begin, count, field, fields);
      compress::impl::pack_group(out, 1, grp, n, bits, [&](Index i) { return fields[i - begin]; });
    });
  } else {
    Kokkos::parallel_for(
        "a2sgd::compress::qsgd_pack", Policy(exec, 0, groups), KOKKOS_LAMBDA(Index grp) {
          compress::impl::pack_group(out, 1, grp, n, bits, [&](Index i) { return field(g(i), i); });
        });
  }
}

// u = (1/p) sum_r sign v_r l / s over every rank's payload (`stride` words each).
template <class Exec>
void decode(const Exec& exec, const Words& all, const FloatView& u, Index n, int bits, int p, Index stride,
            float unit) {
  const Index groups = compress::impl::packed_groups(n);
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    Kokkos::parallel_for("a2sgd::compress::qsgd_decode", Policy(exec, 0, groups), [=](Index grp) {
      float sum[32] = {};
      std::uint32_t fields[32];
      const int count = compress::impl::group_size(grp, n);
      for (int r = 0; r < p; ++r) {
        compress::impl::unpack_group(all, r * stride + 1, grp, n, bits, [&](int j, std::uint32_t f) { fields[j] = f; });
        qsgd_accumulate(fields, count, detail::bits_float(all(r * stride)), bits, sum);
      }
      compress::impl::store_group(u, grp, n, sum, unit);
    });
  } else {
    Kokkos::parallel_for(
        "a2sgd::compress::qsgd_decode", Policy(exec, 0, groups), KOKKOS_LAMBDA(Index grp) {
          float sum[32] = {};
          for (int r = 0; r < p; ++r) {
            const float v = detail::bits_float(all(r * stride));
            compress::impl::unpack_group(all, r * stride + 1, grp, n, bits,
                                         [&](int j, std::uint32_t f) { sum[j] += decode_field(f, v, bits); });
          }
          compress::impl::store_group(u, grp, n, sum, unit);
        });
  }
}

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
      m_all("a2sgd::compress::qsgd_all", static_cast<std::size_t>(payload_words() * comm.size())) {
  m_host_words = Kokkos::create_mirror_view(m_words);
  m_host_all = Kokkos::create_mirror_view(m_all);
}

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
  const std::uint64_t key =
      derive_seed(derive_seed(m_options.seed, steps()), static_cast<std::uint64_t>(comm().rank()));
  const QsgdField field{to_level, static_cast<std::uint32_t>(m_options.levels), bits, key};
  if (finite)
    pack(exec(), m_words, g, field, n);
  else
    Kokkos::deep_copy(exec(), m_words, 0u);  // NaN/Inf entries have no level; the NaN norm speaks
  Kokkos::deep_copy(exec(), Kokkos::subview(m_words, 0), detail::float_bits(norm));
  exec().fence();
  Kokkos::deep_copy(m_host_words, m_words);
  stats.compress_s += clock.seconds();

  comm().allgather(m_host_words.data(), m_host_words.extent(0), m_host_all.data(), &stats);

  clock.restart();
  Kokkos::deep_copy(m_all, m_host_all);
  decode(exec(), m_all, m_update, n, bits, comm().size(), payload_words(),
         1.0f / (s * static_cast<float>(comm().size())));
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
}

}  // namespace a2sgd
