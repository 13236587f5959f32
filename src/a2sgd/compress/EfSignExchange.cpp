#include <a2sgd/compress/EfSignExchange.hpp>
#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/compress/impl/BitPack.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
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
void pack(const Exec& exec, const Words& out, const FloatView& e, Index n, const Scale& scale) {
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
void decode(const Exec& exec, const Words& all, const FloatView& u, Index n, int p, Index stride) {
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

EfSignExchange::EfSignExchange(const Communicator& comm, Index n, const CommonExchangeOptions& common,
                               const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, "efsign"),
      m_residual("a2sgd::compress::residual", static_cast<std::size_t>(n)),
      m_update("a2sgd::compress::efsign_update", static_cast<std::size_t>(n)),
      m_words("a2sgd::compress::efsign_words", static_cast<std::size_t>(payload_words())),
      m_all("a2sgd::compress::efsign_all", static_cast<std::size_t>(payload_words() * comm.size())),
      m_l1("a2sgd::compress::efsign_l1") {}

void EfSignExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                             StepStats& stats) {
  Stopwatch clock;
  const Index n = size();
  const FloatView e = m_residual;
  compress::impl::fold_into_residual(exec(), grad, e, non_finite_count());
  detail::l1_norm(exec(), e, m_l1);
  // Pack the scale and the signs (bit set: negative) and take s sign(a) out of the residual.
  pack(exec(), m_words, e, n, Scale{m_l1, non_finite_count(), n});
  exec().fence();
  stats.compress_s += clock.seconds();

  allgather(m_words, m_all, stats);

  clock.restart();
  decode(exec(), m_all, m_update, n, comm().size(), payload_words());
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
}

}  // namespace a2sgd

A2SGD_REGISTER_EXCHANGE(efsign) {
  using namespace a2sgd;
  ExchangeMethod m;
  m.summary = "error feedback, the signs scaled by ||g + e||_1 / n, by allgather: 4 + 4 ceil(n / 32) bytes";
  m.make = [](const ExchangeContext& c, const OptionValues&) -> std::unique_ptr<Exchange> {
    return std::make_unique<EfSignExchange>(c.comm, c.n, c.common, c.exec);
  };
  // Fold, L1 norm, pack (reads and writes e, writes the bits); decode as QSGD.
  m.kernel_traffic = [](double n, double payload, int p) {
    const double f = traffic::buffer(n);
    return KernelTraffic{
        {{traffic::fold(n), traffic::read(f), {Access::axpy, 2.0 * f}, traffic::written(0.0, payload)}},
        {{traffic::written(p * payload, f), traffic::sgd(n)}}};
  };
  return m;
}
