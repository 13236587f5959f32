#include <a2sgd/compress/EfSignCodec.hpp>
#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/core/impl/Norms.hpp>
#include <a2sgd/core/impl/Prefetch.hpp>

#include <limits>

namespace a2sgd {
namespace {
using Words = Kokkos::View<std::uint32_t*, MemorySpace>;

// Branch-free throughout: signs are close to random, so a branch per entry would be mispredicted
// about half the time. s sign for a sign bit (set: negative).
KOKKOS_INLINE_FUNCTION float scaled_sign(std::uint32_t negative, float s) {
  return s * (1.0f - 2.0f * static_cast<float>(negative));
}

// Host: the sign words of a block of whole 32-entry words, taking s sign(a) out of them; a
// per-ISA function per block, not per word: a call per 32 entries through the clone's dispatch
// cost more than the pass itself.
// The sign word from compress::impl::lane_bit (BitPack.hpp): GCC 12 left `neg << j` scalar in the
// AVX-512 clone. s sign(a) as a select: the same value as scaled_sign().
A2SGD_HOST_CLONES void efsign_pack_block(float* e, Index words, float scale, std::uint32_t* out) {
  for (Index w = 0; w < words; ++w) {
    float* ew = e + 32 * w;
    a2sgd::impl::prefetch_chunk<true>(ew);
    std::uint32_t bits = 0;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(| : bits)
#endif
    for (int j = 0; j < 32; ++j) {
      const bool neg = ew[j] < 0.0f;
      bits |= neg ? compress::impl::lane_bit[j] : 0u;
      ew[j] -= neg ? -scale : scale;
    }
    out[w] = bits;
  }
}

// The last, partial word (count < 32 entries).
std::uint32_t efsign_pack_tail(float* e, int count, float scale) {
  std::uint32_t bits = 0;
  for (int j = 0; j < count; ++j) {
    const std::uint32_t neg = e[j] < 0.0f;
    bits |= neg << j;
    e[j] -= scaled_sign(neg, scale);
  }
  return bits;
}

// Host: u[32 w + j] = (1/p) sum_r s_r sign_rj for the whole words [w0, w0 + words); rank r's
// payload starts at all[r * stride] with its scale (per ISA: per-lane shifts need AVX2).
A2SGD_HOST_CLONES void efsign_decode_block(const std::uint32_t* all, Index stride, int p, Index w0, Index words,
                                           float inv_p, float* u) {
  for (Index w = w0; w < w0 + words; ++w) {
    a2sgd::impl::prefetch_chunk<true>(u + 32 * w);
    float sum[32] = {};
    for (int r = 0; r < p; ++r) {
      const std::uint32_t bits = all[r * stride + 1 + w];
      const float s = detail::bits_float(all[r * stride]);
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
      for (int j = 0; j < 32; ++j) sum[j] += scaled_sign((bits >> j) & 1u, s);
    }
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (int j = 0; j < 32; ++j) u[32 * w + j] = sum[j] * inv_p;
  }
}

// Words per host work item: large enough that the per-ISA call costs nothing.
constexpr Index host_block_words = 128;

// s = ||a||_1 / n, or NaN when a has a non-finite entry (every rank then stops on the update).
struct Scale {
  Kokkos::View<const double, MemorySpace> l1;
  Kokkos::View<const std::int64_t, MemorySpace> non_finite;
  Index n;
  KOKKOS_INLINE_FUNCTION float operator()() const {
    return non_finite() > 0 ? a2sgd::detail::quiet_nan() : static_cast<float>(l1() / static_cast<double>(n));
  }
};

// out(0) = s, out(1 + w) = the signs of entries [32 w, 32 w + 32) (bit set: negative), and
// s sign(a) leaves the residual.
template <class Exec>
void pack_payload(const Exec& exec, const Words& out, const FloatView& e, Index n, const Scale& scale) {
  const Index words = (n + 31) / 32;
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    exec.fence();  // host backends: the scale is read once, for free
    const float s = scale();
    out(0) = detail::float_bits(s);
    const Index whole = n / 32;  // words of 32 entries; a last partial word apart
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::efsign_pack"),
                         Policy(exec, 0, (whole + host_block_words - 1) / host_block_words), [=](Index b) {
                           const Index w = b * host_block_words;
                           const Index count = w + host_block_words < whole ? host_block_words : whole - w;
                           efsign_pack_block(e.data() + 32 * w, count, s, out.data() + 1 + w);
                         });
    if (whole < words) out(words) = efsign_pack_tail(e.data() + 32 * whole, static_cast<int>(n - 32 * whole), s);
  } else {
    // A vector of 32 lanes per word: lane j reads entry 32 w + j (coalesced), the word is the OR.
    using Team = Kokkos::TeamPolicy<Exec>;
    constexpr int words_per_team = 8;
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::efsign_pack"),
        Team(exec, static_cast<int>((words + words_per_team - 1) / words_per_team), words_per_team, 32),
        KOKKOS_LAMBDA(const typename Team::member_type& team) {
          const float s = scale();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, words_per_team), [&](int t) {
            const Index w = static_cast<Index>(team.league_rank()) * words_per_team + t;
            if (w >= words) return;
            std::uint32_t bits = 0;
            Kokkos::parallel_reduce(
                Kokkos::ThreadVectorRange(team, compress::impl::group_size(w, n)),
                [&](int j, std::uint32_t& b) {
                  const Index i = w * 32 + j;
                  const std::uint32_t neg = e(i) < 0.0f;
                  b |= neg << j;
                  e(i) -= scaled_sign(neg, s);
                },
                Kokkos::BOr<std::uint32_t>(bits));
            Kokkos::single(Kokkos::PerThread(team), [&]() {
              out(w + 1) = bits;
              if (w == 0) out(0) = detail::float_bits(s);
            });
          });
        });
  }
}

// u = (1/p) sum_r s_r sign_r. Host: one work item per 32-entry word reads each rank's word once.
// Device: one thread per entry; a warp's 32 threads read the same word of each rank.
template <class Exec>
void decode_payload(const Exec& exec, const Words& all, const FloatView& u, Index n, int p, Index stride) {
  const Index words = (n + 31) / 32;
  const float inv_p = 1.0f / static_cast<float>(p);
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    const Index whole = n / 32;  // words of 32 entries; a last partial word apart
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::efsign_decode"),
                         Policy(exec, 0, (whole + host_block_words - 1) / host_block_words), [=](Index b) {
                           const Index w = b * host_block_words;
                           efsign_decode_block(all.data(), stride, p, w,
                                               w + host_block_words < whole ? host_block_words : whole - w, inv_p,
                                               u.data());
                         });
    if (whole < words) {
      float sum[32] = {};
      for (int r = 0; r < p; ++r)
        for (int j = 0; j < 32; ++j)
          sum[j] += scaled_sign((all(r * stride + 1 + whole) >> j) & 1u, detail::bits_float(all(r * stride)));
      compress::impl::store_group(u, whole, n, sum, inv_p);
    }
  } else {
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::efsign_decode"), Policy(exec, 0, n), KOKKOS_LAMBDA(Index i) {
          float sum = 0.0f;
          for (int r = 0; r < p; ++r)
            sum += scaled_sign((all(r * stride + 1 + i / 32) >> (i % 32)) & 1u, detail::bits_float(all(r * stride)));
          u(i) = sum * inv_p;
        });
  }
}

}  // namespace

EfSignCodec::EfSignCodec(Index n) : m_n(n), m_l1("a2sgd::compress::efsign_l1") {
  if (n < 1) throw InvalidArgument("efsign: an empty buffer");
}

void EfSignCodec::encode(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e,
                         const EncodeContext& context, const Words& payload) const {
  const auto& non_finite = context.non_finite;
  compress::impl::fold_into_residual(exec, g, e, non_finite);
  detail::l1_norm(exec, e, m_l1);
  // Pack the scale and the signs (bit set: negative) and take s sign(a) out of the residual.
  pack_payload(exec, payload, e, m_n, Scale{m_l1, non_finite, m_n});
}

void EfSignCodec::decode(const ExecutionSpace& exec, const Words& gathered, const FloatView& u, int p) const {
  decode_payload(exec, gathered, u, m_n, p, payload_words());
}

}  // namespace a2sgd
