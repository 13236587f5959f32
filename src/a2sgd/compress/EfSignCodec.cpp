#include <a2sgd/compress/EfSignCodec.hpp>
#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/impl/HostClones.hpp>
#include <a2sgd/core/impl/Norms.hpp>

#include <limits>

namespace a2sgd {
namespace {
using Words = Kokkos::View<std::uint32_t*, MemorySpace>;

// Branch-free throughout: signs are close to random, so a branch per entry would be mispredicted
// about half the time. s sign for a sign bit (set: negative).
KOKKOS_INLINE_FUNCTION float scaled_sign(std::uint32_t negative, float s) {
  return s * (1.0f - 2.0f * static_cast<float>(negative));
}

// Host: one word of sign bits from up to 32 entries, taking s sign(a) out of them (per ISA).
A2SGD_HOST_CLONES std::uint32_t efsign_pack_word(float* e, int count, float scale) {
  std::uint32_t bits = 0;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd reduction(| : bits)
#endif
  for (int j = 0; j < count; ++j) {
    const std::uint32_t neg = e[j] < 0.0f;
    bits |= neg << j;
    e[j] -= scaled_sign(neg, scale);
  }
  return bits;
}

// Host: sum[j] += s sign_j for the 32 signs of one word (per ISA: per-lane shifts need AVX2).
A2SGD_HOST_CLONES void efsign_accumulate(std::uint32_t bits, float s, float* sum) {
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
  for (int j = 0; j < 32; ++j) sum[j] += scaled_sign((bits >> j) & 1u, s);
}

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
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::efsign_pack"), Policy(exec, 0, words), [=](Index w) {
      out(w + 1) = efsign_pack_word(e.data() + w * 32, compress::impl::group_size(w, n), s);
    });
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
    Kokkos::parallel_for(A2SGD_LABEL("a2sgd::compress::efsign_decode"), Policy(exec, 0, words), [=](Index w) {
      float sum[32] = {};
      for (int r = 0; r < p; ++r) efsign_accumulate(all(r * stride + 1 + w), detail::bits_float(all(r * stride)), sum);
      compress::impl::store_group(u, w, n, sum, inv_p);
    });
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
                         const Count& non_finite, const Words& payload) const {
  compress::impl::fold_into_residual(exec, g, e, non_finite);
  detail::l1_norm(exec, e, m_l1);
  // Pack the scale and the signs (bit set: negative) and take s sign(a) out of the residual.
  pack_payload(exec, payload, e, m_n, Scale{m_l1, non_finite, m_n});
}

void EfSignCodec::decode(const ExecutionSpace& exec, const Words& gathered, const FloatView& u, int p) const {
  decode_payload(exec, gathered, u, m_n, p, payload_words());
}

}  // namespace a2sgd
