#include <a2sgd/compress/EfSignExchange.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/compress/impl/SumReduce.hpp>
#include <a2sgd/core/HalfFloat.hpp>

#include <limits>

namespace a2sgd {
namespace {
using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;
}  // namespace

EfSignExchange::EfSignExchange(const Communicator& comm, Index n, const CommonExchangeOptions& common,
                               const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, "efsign"),
      m_residual("a2sgd::compress::residual", static_cast<std::size_t>(n)),
      m_update("a2sgd::compress::efsign_update", static_cast<std::size_t>(n)),
      m_words("a2sgd::compress::efsign_words", static_cast<std::size_t>(payload_words())),
      m_all("a2sgd::compress::efsign_all", static_cast<std::size_t>(payload_words() * comm.size())) {}

void EfSignExchange::do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                             StepStats& stats) {
  Stopwatch clock;
  const Index n = size(), words = payload_words() - 1;
  const std::int64_t bad = compress::impl::fold_into_residual(exec(), grad, m_residual);
  const FloatView e = m_residual;
  const double l1 = compress::impl::sum_reduce(
      exec(), "a2sgd::compress::efsign_norm", n,
      KOKKOS_LAMBDA(Index i) { return static_cast<double>(a2sgd::detail::abs(e(i))); });
  const float scale =
      bad > 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(l1 / static_cast<double>(n));
  // Pack the signs (bit set: negative) and take s sign(a) out of the residual.
  const auto out = m_words;
  Kokkos::parallel_for(
      "a2sgd::compress::efsign_pack", Policy(exec(), 0, words), KOKKOS_LAMBDA(Index w) {
        std::uint32_t bits = 0;
        const Index end = (w + 1) * 32 < n ? (w + 1) * 32 : n;
        for (Index i = w * 32; i < end; ++i) {
          const std::uint32_t neg = e(i) < 0.0f;
          bits |= neg << (i - w * 32);
          e(i) -= scale * (1.0f - 2.0f * static_cast<float>(neg));  // branch-free (random signs)
        }
        out(w + 1) = bits;
        if (w == 0) out(0) = detail::float_bits(scale);
      });
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
  const float inv_p = 1.0f / static_cast<float>(p);
  // One work item per 32-entry word: each rank's sign word is read once.
  Kokkos::parallel_for(
      "a2sgd::compress::efsign_decode", Policy(exec(), 0, words), KOKKOS_LAMBDA(Index w) {
        float sum[32] = {};
        for (int r = 0; r < p; ++r) {
          const float s = detail::bits_float(all(r * stride));
          const std::uint32_t bits = all(r * stride + 1 + w);
          // Branch-free: signs are close to random, so a branch per entry would be mispredicted
          // about half the time.
          for (int j = 0; j < 32; ++j) sum[j] += s * (1.0f - 2.0f * static_cast<float>((bits >> j) & 1u));
        }
        const Index begin = w * 32;
        const int count = static_cast<int>(begin + 32 < n ? 32 : n - begin);
        for (int j = 0; j < count; ++j) u(begin + j) = sum[j] * inv_p;
      });
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
}

}  // namespace a2sgd
