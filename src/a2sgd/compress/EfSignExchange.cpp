#include <a2sgd/compress/EfSignExchange.hpp>
#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/compress/impl/HostClones.hpp>
#include <a2sgd/compress/impl/SumReduce.hpp>
#include <a2sgd/core/HalfFloat.hpp>

#include <limits>

namespace a2sgd {
namespace {
using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;
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

template <class Exec>
void pack(const Exec& exec, const Words& out, const FloatView& e, Index n, float scale) {
  const Index words = (n + 31) / 32;
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    Kokkos::parallel_for("a2sgd::compress::efsign_pack", Policy(exec, 0, words), [=](Index w) {
      const Index begin = w * 32;
      out(w + 1) = efsign_pack_word(e.data() + begin, compress::impl::group_size(w, n), scale);
    });
  } else {
    Kokkos::parallel_for(
        "a2sgd::compress::efsign_pack", Policy(exec, 0, words), KOKKOS_LAMBDA(Index w) {
          std::uint32_t bits = 0;
          const Index end = w * 32 + compress::impl::group_size(w, n);
          for (Index i = w * 32; i < end; ++i) {
            const std::uint32_t neg = e(i) < 0.0f;
            bits |= neg << (i - w * 32);
            e(i) -= scaled_sign(neg, scale);
          }
          out(w + 1) = bits;
        });
  }
}

// u = (1/p) sum_r s_r sign_r; one work item per 32-entry word reads each rank's word once.
template <class Exec>
void decode(const Exec& exec, const Words& all, const FloatView& u, Index n, int p, Index stride) {
  const Index words = (n + 31) / 32;
  const float inv_p = 1.0f / static_cast<float>(p);
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    Kokkos::parallel_for("a2sgd::compress::efsign_decode", Policy(exec, 0, words), [=](Index w) {
      float sum[32] = {};
      for (int r = 0; r < p; ++r) efsign_accumulate(all(r * stride + 1 + w), detail::bits_float(all(r * stride)), sum);
      compress::impl::store_group(u, w, n, sum, inv_p);
    });
  } else {
    Kokkos::parallel_for(
        "a2sgd::compress::efsign_decode", Policy(exec, 0, words), KOKKOS_LAMBDA(Index w) {
          float sum[32] = {};
          for (int r = 0; r < p; ++r) {
            const float s = detail::bits_float(all(r * stride));
            const std::uint32_t bits = all(r * stride + 1 + w);
            for (int j = 0; j < 32; ++j) sum[j] += scaled_sign((bits >> j) & 1u, s);
          }
          compress::impl::store_group(u, w, n, sum, inv_p);
        });
  }
}

}  // namespace

EfSignExchange::EfSignExchange(const Communicator& comm, Index n, const CommonExchangeOptions& common,
                               const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, "efsign"),
      m_residual("a2sgd::compress::residual", static_cast<std::size_t>(n)),
      m_update("a2sgd::compress::efsign_update", static_cast<std::size_t>(n)),
      m_words("a2sgd::compress::efsign_words", static_cast<std::size_t>(payload_words())),
      m_all("a2sgd::compress::efsign_all", static_cast<std::size_t>(payload_words() * comm.size())) {
  m_host_words = Kokkos::create_mirror_view(m_words);
  m_host_all = Kokkos::create_mirror_view(m_all);
}

void EfSignExchange::do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                             StepStats& stats) {
  Stopwatch clock;
  const Index n = size();
  const std::int64_t bad = compress::impl::fold_into_residual(exec(), grad, m_residual);
  const FloatView e = m_residual;
  const double l1 = compress::impl::sum_reduce(
      exec(), "a2sgd::compress::efsign_norm", n,
      KOKKOS_LAMBDA(Index i) { return static_cast<double>(a2sgd::detail::abs(e(i))); });
  const float scale =
      bad > 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(l1 / static_cast<double>(n));
  // Pack the signs (bit set: negative) and take s sign(a) out of the residual.
  pack(exec(), m_words, e, n, scale);
  Kokkos::deep_copy(exec(), Kokkos::subview(m_words, 0), detail::float_bits(scale));
  exec().fence();
  Kokkos::deep_copy(m_host_words, m_words);
  stats.compress_s += clock.seconds();

  comm().allgather(m_host_words.data(), m_host_words.extent(0), m_host_all.data(), &stats);

  clock.restart();
  Kokkos::deep_copy(m_all, m_host_all);
  decode(exec(), m_all, m_update, n, comm().size(), payload_words());
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
}

}  // namespace a2sgd
