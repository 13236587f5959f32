#include <a2sgd/compress/QsgdCodec.hpp>
#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/Random.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/core/impl/Norms.hpp>

#include <cmath>
#include <limits>
#include <string>

namespace a2sgd {
namespace {
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

// The step's field rule from the squared norm on the device: v = ||g||, s / v (0 for a zero
// gradient); a non-finite gradient makes v NaN (no level is computed, the NaN norm reaches every
// rank, which then stops).
struct QsgdNorm {
  Kokkos::View<const double, MemorySpace> sum_sq;
  QsgdField rule;  // to_level filled in by field()
  KOKKOS_INLINE_FUNCTION bool finite() const { return sum_sq() - sum_sq() == 0.0; }
  KOKKOS_INLINE_FUNCTION float norm() const {
    return finite() ? static_cast<float>(a2sgd::detail::sqrt(sum_sq())) : a2sgd::detail::quiet_nan();
  }
  KOKKOS_INLINE_FUNCTION QsgdField field() const {
    QsgdField f = rule;
    const float v = norm();
    f.to_level = finite() && v > 0.0f ? static_cast<float>(rule.top) / v : 0.0f;
    return f;
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

// out(0) = v, then the fields in groups of 32 (impl/BitPack.hpp).
template <class Exec>
void pack_payload(const Exec& exec, const Words& out, const ConstFloatView& g, const QsgdNorm& rule, Index n) {
  const Index groups = compress::impl::packed_groups(n);
  const int bits = rule.rule.bits;
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    exec.fence();  // host backends: the norm is read once, for free
    const bool finite = rule.finite();
    const QsgdField field = rule.field();
    out(0) = detail::float_bits(rule.norm());
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::qsgd_pack"), Policy(exec, 0, groups), [=](Index grp) {
      std::uint32_t fields[32];
      const Index begin = grp * 32;
      const int count = compress::impl::group_size(grp, n);
      if (finite)
        qsgd_fields(g.data() + begin, begin, count, field, fields);
      else
        for (int j = 0; j < count; ++j) fields[j] = 0;
      compress::impl::pack_group(out, 1, grp, n, bits, [&](Index i) { return fields[i - begin]; });
    });
  } else {
    // A vector of 32 lanes per group: lane j reads entry 32 grp + j (coalesced); each of the
    // group's `bits` words is the OR of the (at most 32 / bits + 1) fields that overlap it.
    using Team = Kokkos::TeamPolicy<Exec>;
    constexpr int groups_per_team = 8;
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::qsgd_pack"),
        Team(exec, static_cast<int>((groups + groups_per_team - 1) / groups_per_team), groups_per_team, 32),
        KOKKOS_LAMBDA(const typename Team::member_type& team) {
          const bool finite = rule.finite();
          const QsgdField field = rule.field();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, groups_per_team), [&](int t) {
            const Index grp = static_cast<Index>(team.league_rank()) * groups_per_team + t;
            if (grp >= groups) return;
            const int count = compress::impl::group_size(grp, n);
            const int used = (count * bits + 31) / 32;  // words of this group
            for (int w = 0; w < used; ++w) {
              std::uint32_t word = 0;
              Kokkos::parallel_reduce(
                  Kokkos::ThreadVectorRange(team, count),
                  [&](int j, std::uint32_t& acc) {
                    const int offset = j * bits - 32 * w;  // the field's first bit relative to word w
                    if (finite && offset < 32 && offset + bits > 0) {
                      const std::uint32_t f = field(g(grp * 32 + j), grp * 32 + j);
                      acc |= offset >= 0 ? f << offset : f >> -offset;
                    }
                  },
                  Kokkos::BOr<std::uint32_t>(word));
              Kokkos::single(Kokkos::PerThread(team), [&]() { out(1 + grp * bits + w) = word; });
            }
            if (grp == 0) Kokkos::single(Kokkos::PerThread(team), [&]() { out(0) = detail::float_bits(rule.norm()); });
          });
        });
  }
}

// u = (1/p) sum_r sign v_r l / s over every rank's payload (`stride` words each). Host: one work
// item per group of 32 fields. Device: one thread per entry, reading the one or two words its
// field lies in (neighbouring threads read neighbouring words).
template <class Exec>
void decode_payload(const Exec& exec, const Words& all, const FloatView& u, Index n, int bits, int p, Index stride,
                    float unit) {
  const Index groups = compress::impl::packed_groups(n);
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::qsgd_decode"), Policy(exec, 0, groups), [=](Index grp) {
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
    const std::uint64_t mask = compress::impl::field_mask(bits);
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::qsgd_decode"), Policy(exec, 0, n), KOKKOS_LAMBDA(Index i) {
          const Index grp = i / 32;
          const int bit = static_cast<int>(i % 32) * bits;  // within the group's words
          float sum = 0.0f;
          for (int r = 0; r < p; ++r) {
            const Index w = r * stride + 1 + grp * bits + bit / 32;
            std::uint64_t acc = all(w);
            if ((bit % 32) + bits > 32) acc |= static_cast<std::uint64_t>(all(w + 1)) << 32;
            const auto f = static_cast<std::uint32_t>((acc >> (bit % 32)) & mask);
            sum += decode_field(f, detail::bits_float(all(r * stride)), bits);
          }
          u(i) = sum * unit;
        });
  }
}

}  // namespace

int qsgd_bits(std::int64_t levels) {
  if (levels < 1 || levels >= (std::int64_t(1) << 24))
    throw InvalidArgument("qsgd: " + std::to_string(levels) + " levels is not in [1, 16777215]");
  int bits = 0;
  while ((std::int64_t(1) << bits) < levels + 1) ++bits;
  return bits + 1;
}

QsgdCodec::QsgdCodec(Index n, std::int64_t levels)
    : m_n(n), m_levels(levels), m_bits(qsgd_bits(levels)), m_sum_sq("a2sgd::compress::qsgd_sum_sq") {
  if (n < 1) throw InvalidArgument("qsgd: an empty buffer");
}

Index QsgdCodec::payload_words() const noexcept {
  return 1 + compress::impl::packed_words(m_n, m_bits);
}

std::uint64_t QsgdCodec::rounding_key(std::uint64_t seed, std::uint64_t step, int rank) noexcept {
  return derive_seed(derive_seed(seed, step), static_cast<std::uint64_t>(rank));
}

void QsgdCodec::encode(const ExecutionSpace& exec, const ConstFloatView& g, std::uint64_t key,
                       const Words& payload) const {
  detail::squared_norm(exec, g, m_sum_sq);
  const QsgdField field{0.0f, static_cast<std::uint32_t>(m_levels), m_bits, key};
  pack_payload(exec, payload, g, QsgdNorm{m_sum_sq, field}, m_n);
}

void QsgdCodec::decode(const ExecutionSpace& exec, const Words& gathered, const FloatView& u, int p) const {
  const float s = static_cast<float>(m_levels);
  decode_payload(exec, gathered, u, m_n, m_bits, p, payload_words(), 1.0f / (s * static_cast<float>(p)));
}

}  // namespace a2sgd
